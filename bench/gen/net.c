/*
 * net.c - presence-bench: the client side of TCP, the WebSocket handshake
 * and frames, RESP reply framing, batched writes. See net.h.
 */
#include "net.h"
#include "crypto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define WS_KEY     "dGhlIHNhbXBsZSBub25jZQ=="
#define RBUF_SIZE  (256 * 1024)
#define MAX_EVENTS 1024

void net_init(struct net *n, enum target t, int port, const char *secret)
{
    memset(n, 0, sizeof *n);
    n->ep = epoll_create1(EPOLL_CLOEXEC);
    if (n->ep < 0)
        die_errno("epoll_create1");
    n->target = t;
    n->dst.sin_family = AF_INET;
    n->dst.sin_port = htons((uint16_t)port);
    n->dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    n->rbuf = xmalloc(RBUF_SIZE);
    n->rcap = RBUF_SIZE;
    snprintf(n->host, sizeof n->host, "127.0.0.1:%d", port);
    n->secret = secret;
    ws_accept_of(WS_KEY, n->accept);
}

static void set_events(struct net *n, struct conn *c, uint32_t ev, int op)
{
    struct epoll_event e = {.events = ev, .data.ptr = c};
    if (epoll_ctl(n->ep, op, c->fd, &e) < 0)
        die_errno("epoll_ctl");
}

static uint32_t wanted_events(const struct conn *c)
{
    uint32_t ev = c->paused ? 0 : EPOLLIN;
    if (c->state == CS_CONNECTING || c->want_out)
        ev |= EPOLLOUT;
    return ev;
}

static void mark_pending(struct net *n, struct conn *c)
{
    if (!c->pending) {
        c->pending = 1;
        c->next_pending = n->pending;
        n->pending = c;
    }
}

/* The first few connection failures of a process, on stderr (the bench
 * log), so a run whose connections all fail says why. */
static void say_failure(const char *fmt, ...)
{
    static int said;
    va_list ap;

    if (said++ >= 3)
        return;
    va_start(ap, fmt);
    fprintf(stderr, "presence-bench: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void conn_closed(struct net *n, struct conn *c, int code)
{
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    int was_open = c->state == CS_OPEN;
    c->state = CS_CLOSED;
    buf_free(&c->in);
    buf_free(&c->out);
    if (!was_open)
        n->st.connect_fail++;
    proto_on_close(n, c, code); /* c->ready still says whether it was up */
    c->ready = 0;
}

void net_connect(struct net *n, struct conn *c, int src_host, const char *query)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        die_errno("socket (raise ulimit -n or spread over more processes)");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    if (c->small_rcv) {
        int small = 4096;
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    }
    struct sockaddr_in src = {.sin_family = AF_INET};
    src.sin_addr.s_addr = htonl((127u << 24) | (uint32_t)(src_host & 0xffffff));
    if (bind(c->fd, (struct sockaddr *)&src, sizeof src) < 0)
        die_errno("bind 127.0.0.%d", src_host);
    c->close_code = 1006;
    c->ready = 0;
    c->t_connect = now_us();
    if (!c->mask)
        c->mask = (uint32_t)random() | 1u;
    if (connect(c->fd, (struct sockaddr *)&n->dst, sizeof n->dst) < 0 && errno != EINPROGRESS) {
        say_failure("connect: %s", strerror(errno));
        c->state = CS_CONNECTING;
        conn_closed(n, c, 1006);
        return;
    }
    c->state = CS_CONNECTING;
    if (n->target == T_REDIS) {
        /* The request bytes can wait in the queue until connected. */
    } else {
        char app_path[160];
        const char *path = n->target == T_SIO ? "/socket.io/?EIO=4&transport=websocket" : "/v1/ws";
        if (n->target == T_PUSHER) { /* what pusher-js asks for */
            snprintf(app_path, sizeof app_path, "/app/%s?protocol=7&client=presence-bench&version=1",
                     n->app_key ? n->app_key : "");
            path = app_path;
        }
        if (n->target == T_PHOENIX) /* phoenix.js's endpoint and serializer */
            path = "/socket/websocket?vsn=2.0.0";
        char token[512] = "";
        if ((n->target == T_NATIVE || n->target == T_PHOENIX) && n->secret && *n->secret) {
            char sub[16];
            snprintf(sub, sizeof sub, "u%u", c->user);
            jwt_mint(token, sizeof token, n->secret, sub, wall_s() + 7200);
        }
        char sep = strchr(path, '?') ? '&' : '?';
        buf_printf(&c->out,
                   "GET %s%s%s%s%s%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Key: " WS_KEY "\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n",
                   path, *token || *query ? (char[]){sep, 0} : "", *token ? "token=" : "", token,
                   *token && *query ? "&" : "", query, n->host);
    }
    set_events(n, c, EPOLLOUT, EPOLL_CTL_ADD);
}

/* Frames p as one masked text frame into c->out. */
static void ws_frame(struct conn *c, int opcode, const char *p, size_t len)
{
    char *h = buf_reserve(&c->out, len + 14);
    size_t hl = 2;
    h[0] = (char)(0x80 | opcode);
    if (len < 126) {
        h[1] = (char)(0x80 | len);
    } else if (len < 65536) {
        h[1] = (char)(0x80 | 126);
        h[2] = (char)(len >> 8);
        h[3] = (char)len;
        hl = 4;
    } else {
        h[1] = (char)(0x80 | 127);
        for (int i = 0; i < 8; i++)
            h[2 + i] = (char)((uint64_t)len >> (56 - 8 * i));
        hl = 10;
    }
    unsigned char m[4];
    memcpy(m, &c->mask, 4);
    memcpy(h + hl, m, 4);
    unsigned char *d = (unsigned char *)h + hl + 4;
    for (size_t i = 0; i < len; i++)
        d[i] = (unsigned char)p[i] ^ m[i & 3];
    c->out.len += hl + 4 + len;
}

void net_send(struct net *n, struct conn *c, const char *p, size_t len)
{
    if (c->state == CS_CLOSED || c->state == CS_IDLE)
        return;
    if (n->target == T_REDIS)
        buf_add(&c->out, p, len);
    else
        ws_frame(c, 1, p, len);
    if (c->state == CS_OPEN)
        mark_pending(n, c);
}

void net_drop(struct net *n, struct conn *c)
{
    if (c->fd < 0)
        return;
    close(c->fd);
    c->fd = -1;
    c->state = CS_CLOSED;
    c->ready = 0;
    buf_free(&c->in);
    buf_free(&c->out);
    (void)n;
}

void net_close_ws(struct net *n, struct conn *c)
{
    if (c->state != CS_OPEN)
        return;
    ws_frame(c, 8, "\x03\xe8", 2);
    net_flush(n);
    net_drop(n, c);
}

void net_pause(struct net *n, struct conn *c, int paused)
{
    if (c->fd < 0 || c->paused == paused)
        return;
    c->paused = (uint8_t)paused;
    set_events(n, c, wanted_events(c), EPOLL_CTL_MOD);
}

/* Writes c->out; returns -1 if the connection died. */
static int conn_write(struct net *n, struct conn *c)
{
    while (buf_used(&c->out)) {
        ssize_t w = write(c->fd, c->out.data + c->out.off, buf_used(&c->out));
        n->st.writes++;
        if (w < 0) {
            if (errno == EAGAIN)
                break;
            if (errno == EINTR)
                continue;
            return -1;
        }
        n->st.bytes_out += (uint64_t)w;
        buf_consume(&c->out, (size_t)w);
    }
    int want = buf_used(&c->out) > 0;
    if (want != c->want_out) {
        c->want_out = (uint8_t)want;
        set_events(n, c, wanted_events(c), EPOLL_CTL_MOD);
    }
    return 0;
}

void net_flush(struct net *n)
{
    while (n->pending) {
        struct conn *c = n->pending;
        n->pending = c->next_pending;
        c->pending = 0;
        if (c->state == CS_OPEN && conn_write(n, c) < 0)
            conn_closed(n, c, 1006);
    }
}

/* Length of one complete RESP value at p, 0 if incomplete. */
static size_t resp_len(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
        return 0;
    size_t head = (size_t)(nl + 1 - p);
    const char *q;
    if (*p == '$') {
        long len = strtol(p + 1, NULL, 10);
        if (len < 0)
            return head;
        return (size_t)(end - nl - 1) >= (size_t)len + 2 ? head + (size_t)len + 2 : 0;
    }
    if (*p == '*') {
        long cnt = strtol(p + 1, NULL, 10);
        size_t total = head;
        for (long i = 0; i < cnt; i++) {
            q = p + total;
            if (q >= end)
                return 0;
            size_t l = resp_len(q, end);
            if (!l)
                return 0;
            total += l;
        }
        return total;
    }
    return head; /* +, -, : */
}

/* Splits [p, end) into messages; returns the bytes consumed, or -1 when
 * the connection must close (close code in *code). */
static ssize_t split_messages(struct net *n, struct conn *c, const char *p, const char *end,
                              int *code)
{
    const char *start = p;
    while (p < end && c->state == CS_OPEN) {
        if (n->target == T_REDIS) {
            size_t l = resp_len(p, end);
            if (!l)
                break;
            n->st.msgs_in++;
            proto_on_message(n, c, p, l);
            p += l;
            continue;
        }
        if (end - p < 2)
            break;
        unsigned op = (unsigned char)p[0] & 0x0f;
        uint64_t len = (unsigned char)p[1] & 0x7f;
        size_t hl = 2;
        if (len == 126) {
            if (end - p < 4)
                break;
            len = ((uint64_t)(unsigned char)p[2] << 8) | (unsigned char)p[3];
            hl = 4;
        } else if (len == 127) {
            if (end - p < 10)
                break;
            len = 0;
            for (int i = 0; i < 8; i++)
                len = (len << 8) | (unsigned char)p[2 + i];
            hl = 10;
        }
        if ((uint64_t)(end - p) < hl + len)
            break;
        const char *pl = p + hl;
        p += hl + len;
        if (op == 1 || op == 0) {
            n->st.msgs_in++;
            proto_on_message(n, c, pl, (size_t)len);
        } else if (op == 8) {
            *code = len >= 2 ? ((unsigned char)pl[0] << 8) | (unsigned char)pl[1] : 1005;
            return -1;
        } else if (op == 9) {
            ws_frame(c, 10, pl, (size_t)len);
            mark_pending(n, c);
        }
    }
    return p - start;
}

/* Reads the HTTP 101 answer at the front of c->in; returns the bytes of
 * the head, 0 if incomplete, -1 if refused. */
static ssize_t handshake_done(struct net *n, const char *p, size_t len)
{
    const char *end = FIND(p, p + len, "\r\n\r\n");
    if (!end)
        return len > 8192 ? -1 : 0;
    if (len < 12 || memcmp(p, "HTTP/1.1 101", 12) != 0 || !find(p, end, n->accept, 28))
        return -1;
    return end + 4 - p;
}

static void on_readable(struct net *n, struct conn *c)
{
    ssize_t r = read(c->fd, n->rbuf, n->rcap);
    if (r <= 0) {
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        conn_closed(n, c, c->close_code);
        return;
    }
    n->st.bytes_in += (uint64_t)r;
    const char *p = n->rbuf;
    size_t len = (size_t)r;
    if (buf_used(&c->in)) {
        buf_add(&c->in, n->rbuf, len);
        p = c->in.data + c->in.off;
        len = buf_used(&c->in);
    }
    size_t used = 0;
    if (c->state == CS_HANDSHAKE) {
        ssize_t h = handshake_done(n, p, len);
        if (h < 0) {
            const char *eol = memchr(p, '\r', len);
            say_failure("handshake refused: %.*s", (int)(eol ? eol - p : (len > 80 ? 80 : (ssize_t)len)), p);
            conn_closed(n, c, 1006);
            return;
        }
        if (h == 0) {
            if (!buf_used(&c->in))
                buf_add(&c->in, p, len);
            return;
        }
        used = (size_t)h;
        c->state = CS_OPEN;
        proto_on_open(n, c);
    }
    int code = 1006;
    ssize_t m = split_messages(n, c, p + used, p + len, &code);
    if (m < 0 || c->state != CS_OPEN) {
        if (c->state != CS_CLOSED)
            conn_closed(n, c, code);
        return;
    }
    used += (size_t)m;
    if (buf_used(&c->in)) {
        buf_consume(&c->in, used);
    } else if (used < len) {
        buf_add(&c->in, p + used, len - used);
    }
}

static void on_connected(struct net *n, struct conn *c)
{
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
        say_failure("connect: %s", strerror(err));
        conn_closed(n, c, 1006);
        return;
    }
    if (n->target == T_REDIS) {
        c->state = CS_OPEN;
        proto_on_open(n, c);
    } else {
        c->state = CS_HANDSHAKE;
    }
    if (conn_write(n, c) < 0) {
        conn_closed(n, c, 1006);
        return;
    }
    set_events(n, c, wanted_events(c), EPOLL_CTL_MOD);
}

int net_poll(struct net *n, int timeout_ms)
{
    struct epoll_event ev[MAX_EVENTS];
    net_flush(n);
    int k = epoll_wait(n->ep, ev, MAX_EVENTS, timeout_ms);
    if (k < 0) {
        if (errno == EINTR)
            return 0;
        die_errno("epoll_wait");
    }
    for (int i = 0; i < k; i++) {
        struct conn *c = ev[i].data.ptr;
        if (c->fd < 0)
            continue;
        if (c->state == CS_CONNECTING) {
            if (ev[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
                on_connected(n, c);
            continue;
        }
        if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            on_readable(n, c);
        if (c->fd >= 0 && (ev[i].events & EPOLLOUT) && conn_write(n, c) < 0)
            conn_closed(n, c, 1006);
    }
    net_flush(n);
    return k;
}
