/*
 * sink.c - presence-bench: a null server, to show the generator is not
 * the bottleneck. It accepts connections on 127.0.0.1:port, answers the
 * WebSocket handshake and a welcome, answers a ping with a pong, and
 * discards everything else, on one epoll loop, for `seconds`. The W3
 * heartbeat flood against it measures what the generator can send when
 * the server costs nothing.
 */
#include "crypto.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

struct sconn {
    int fd;
    int open;      /* handshake done */
    struct buf in; /* partial input */
};

static void sink_reply(int fd, const char *p, size_t n)
{
    if (write(fd, p, n) < 0 && errno != EAGAIN)
        return;
}

/* Consumes frames of one connection; answers pings (native ping). */
static size_t sink_frames(struct sconn *s, const char *p, size_t len)
{
    size_t off = 0;
    while (len - off >= 6) {
        const unsigned char *h = (const unsigned char *)p + off;
        uint64_t l = h[1] & 0x7f;
        size_t hl = 2;
        if (l == 126) {
            if (len - off < 8)
                break;
            l = ((uint64_t)h[2] << 8) | h[3];
            hl = 4;
        } else if (l == 127) {
            break;
        }
        if (len - off < hl + 4 + l)
            break;
        if (l == 23 && (h[hl + 4 + 9] ^ h[hl + ((9) & 3)]) == 'p')
            sink_reply(s->fd, "\x81\x0f{\"type\":\"pong\"}", 17);
        off += hl + 4 + l;
    }
    return off;
}

static void sink_read(struct sconn *s, char *rb, size_t cap, const char *accept_hdr)
{
    ssize_t r = read(s->fd, rb, cap);
    if (r <= 0) {
        if (r < 0 && errno == EAGAIN)
            return;
        close(s->fd);
        s->fd = -1;
        buf_free(&s->in);
        return;
    }
    buf_add(&s->in, rb, (size_t)r);
    const char *p = s->in.data + s->in.off;
    size_t len = buf_used(&s->in), used = 0;
    if (!s->open) {
        const char *e = FIND(p, p + len, "\r\n\r\n");
        if (!e)
            return;
        used = (size_t)(e + 4 - p);
        sink_reply(s->fd, accept_hdr, strlen(accept_hdr));
        s->open = 1;
    }
    used += sink_frames(s, p + used, len - used);
    buf_consume(&s->in, used);
}

void sink_main(int port, double seconds)
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 4096) < 0)
        die_errno("sink: cannot listen on port %d", port);
    socklen_t al = sizeof a;
    getsockname(ls, (struct sockaddr *)&a, &al);
    printf("listening on %d\n", ntohs(a.sin_port));
    fflush(stdout);
    char acc[29], hdr[512];
    ws_accept_of("dGhlIHNhbXBsZSBub25jZQ==", acc);
    static const char welcome[] = "{\"type\":\"welcome\",\"protocol\":1,\"sessionId\":"
                                  "\"00000000000000000000000000000000\"}";
    int hl = snprintf(hdr, sizeof hdr,
                      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n\x81%c%s",
                      acc, (char)(sizeof welcome - 1), welcome);
    (void)hl;
    int ep = epoll_create1(0);
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &e);
    char *rb = xmalloc(65536);
    uint64_t end = now_us() + (uint64_t)(seconds * 1e6);
    struct epoll_event ev[512];
    while (now_us() < end) {
        int k = epoll_wait(ep, ev, 512, 100);
        for (int i = 0; i < k; i++) {
            if (!ev[i].data.ptr) {
                int fd;
                while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    struct sconn *s = xcalloc(1, sizeof *s);
                    s->fd = fd;
                    struct epoll_event ce = {.events = EPOLLIN, .data.ptr = s};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
                }
                continue;
            }
            struct sconn *s = ev[i].data.ptr;
            if (s->fd >= 0)
                sink_read(s, rb, 65536, hdr);
        }
    }
}
