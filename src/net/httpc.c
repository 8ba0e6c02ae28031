/* SPDX-License-Identifier: MIT */
/*
 * httpc.c - one HTTP/1.1 POST on the loop (httpc.h).
 *
 * A request is a small state machine: CONNECTING (a non-blocking connect
 * whose first EPOLLOUT or error ends it), SENDING (the request bytes,
 * built once by httpc_post(), written on EPOLLOUT; a response may already
 * be read), RECEIVING (reads fed to an incremental llhttp response parser
 * until the final message is complete, or EOF ends it), then the callback
 * and the free. One wheel timer does three jobs in turn: the deadline, the
 * deferred report of a failure httpc_post() met at once (the callback
 * never fires from inside the call), and the deferred free of a cancelled
 * request. URL parsing and header checks are pure and come first.
 */
#include "httpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <llhttp.h>

#include "buf.h"

#define HTTPC_READ_SIZE       (16u * 1024u)
#define HTTPC_READS_PER_EVENT 4
#define HTTPC_DEFAULT_PORT    80u

/* ---- Target parsing ---- */

/* Writes a sentence into err, if there is room for one; returns -EINVAL. */
static int __attribute__((format(printf, 3, 4)))
refuse(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static bool is_name_char(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_';
}

/* "[:PORT]" after the host (p, n), the rest of the authority. An empty
 * rest is the default port. */
static int parse_port(const char *p, size_t n, uint16_t *port, char *err, size_t errlen)
{
    unsigned v = 0;

    *port = HTTPC_DEFAULT_PORT;
    if (n == 0)
        return 0;
    if (p[0] != ':')
        return refuse(err, errlen, "bad character after the host");
    if (n == 1 || n > 6)
        return refuse(err, errlen, "bad port: %s", n == 1 ? "empty" : "too long");
    for (size_t i = 1; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return refuse(err, errlen, "bad port: not a number");
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    if (v == 0 || v > 65535)
        return refuse(err, errlen, "bad port: %u is out of range", v);
    *port = (uint16_t)v;
    return 0;
}

/* An IPv4 literal, or a name (resolved with getaddrinfo, which may block).
 * A host of digits and dots is an IPv4 literal or nothing: getaddrinfo
 * would take "10.1" for 10.0.0.1. */
static int resolve_host(struct httpc_target *t, const char *host, uint16_t port, char *err,
                        size_t errlen)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)&t->addr;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res;
    char service[8];
    int rc;

    if (strspn(host, "0123456789.") == strlen(host)) {
        if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
            return refuse(err, errlen, "bad IPv4 address: %s", host);
        sin->sin_family = AF_INET;
        sin->sin_port = htons(port);
        t->addrlen = sizeof(*sin);
        return 0;
    }
    snprintf(service, sizeof(service), "%u", port);
    rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        refuse(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
        return -EHOSTUNREACH;
    }
    memcpy(&t->addr, res->ai_addr, res->ai_addrlen);
    t->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* A bracketed IPv6 literal, and the port, making up the authority (p, n). */
static int parse_v6(struct httpc_target *t, const char *p, size_t n, char *err, size_t errlen)
{
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&t->addr;
    const char *close = memchr(p, ']', n);
    char lit[INET6_ADDRSTRLEN];
    uint16_t port;
    size_t len;
    int rc;

    if (!close)
        return refuse(err, errlen, "unclosed '[' in the host");
    len = (size_t)(close - p) - 1;
    if (len == 0 || len >= sizeof(lit))
        return refuse(err, errlen, "bad IPv6 address");
    memcpy(lit, p + 1, len);
    lit[len] = '\0';
    if (inet_pton(AF_INET6, lit, &sin6->sin6_addr) != 1)
        return refuse(err, errlen, "bad IPv6 address: %s", lit);
    rc = parse_port(p + len + 2, n - len - 2, &port, err, errlen);
    if (rc)
        return rc;
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    t->addrlen = sizeof(*sin6);
    return 0;
}

/* A name or IPv4 literal, and the port, making up the authority (p, n). */
static int parse_name(struct httpc_target *t, const char *p, size_t n, char *err, size_t errlen)
{
    char name[256];
    size_t len = 0;
    uint16_t port;
    int rc;

    while (len < n && is_name_char((unsigned char)p[len]))
        len++;
    if (len == 0 && p[0] != ':')
        return refuse(err, errlen, "bad character in the host");
    if (len == 0)
        return refuse(err, errlen, "empty host");
    if (len >= sizeof(name))
        return refuse(err, errlen, "host name too long");
    rc = parse_port(p + len, n - len, &port, err, errlen);
    if (rc)
        return rc;
    memcpy(name, p, len);
    name[len] = '\0';
    return resolve_host(t, name, port, err, errlen);
}

/* The authority (p, n): host and port into t->addr, itself into t->host. */
static int parse_authority(struct httpc_target *t, const char *p, size_t n, char *err,
                           size_t errlen)
{
    int rc;

    if (memchr(p, '@', n))
        return refuse(err, errlen, "userinfo (user@) is not allowed in the URL");
    if (n == 0)
        return refuse(err, errlen, "empty host");
    if (n >= sizeof(t->host))
        return refuse(err, errlen, "host too long");
    rc = p[0] == '[' ? parse_v6(t, p, n, err, errlen) : parse_name(t, p, n, err, errlen);
    if (rc)
        return rc;
    memcpy(t->host, p, n);
    t->host[n] = '\0';
    return 0;
}

/* The path and query after the authority ("" becomes "/", "?q" "/?q"). */
static int parse_path(struct httpc_target *t, const char *p, char *err, size_t errlen)
{
    size_t n = strlen(p);
    size_t lead = p[0] == '/' ? 0 : 1;

    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];

        if (ch == '#')
            return refuse(err, errlen, "a fragment (#) is not allowed in the URL");
        if (ch <= 0x20 || ch >= 0x7f)
            return refuse(err, errlen, "byte 0x%02x in the path (percent-encode it)", ch);
    }
    if (lead + n >= sizeof(t->path))
        return refuse(err, errlen, "path too long");
    t->path[0] = '/';
    memcpy(t->path + lead, p, n + 1);
    return 0;
}

int httpc_target_parse(struct httpc_target *t, const char *url, char *err, size_t errlen)
{
    static const char scheme[] = "http://";
    const char *auth, *end;
    int rc;

    memset(t, 0, sizeof(*t));
    if (errlen)
        err[0] = '\0';
    if (strncasecmp(url, "https://", 8) == 0)
        return refuse(err, errlen, "https is not supported: this build has no TLS");
    if (strncasecmp(url, scheme, sizeof(scheme) - 1) != 0)
        return refuse(err, errlen, "the URL must start with http://");
    auth = url + sizeof(scheme) - 1;
    end = auth + strcspn(auth, "/?#");
    rc = parse_authority(t, auth, (size_t)(end - auth), err, errlen);
    if (rc == 0)
        rc = parse_path(t, end, err, errlen);
    if (rc)
        t->addrlen = 0;
    return rc;
}

/* ---- Header checks ---- */

/* RFC 9110 tchar. */
static bool is_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* The headers httpc_post() writes itself: a second copy of any would be
 * ambiguous to the receiver (two lengths are request smuggling). */
static bool is_own_header(const char *name, size_t n)
{
    static const char *const own[] = {"Host",       "Content-Type", "Content-Length",
                                      "Connection", "User-Agent",   "Transfer-Encoding"};

    for (size_t i = 0; i < ARRAY_SIZE(own); i++)
        if (ascii_ieq(name, n, own[i]))
            return true;
    return false;
}

bool httpc_header_is_valid(const char *h)
{
    size_t n = 0;

    while (is_tchar((unsigned char)h[n]))
        n++;
    if (n == 0 || h[n] != ':' || is_own_header(h, n))
        return false;
    for (const char *v = h + n + 1; *v; v++) {
        unsigned char ch = (unsigned char)*v;

        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return false;
    }
    return true;
}

/* ---- The request ---- */

enum httpc_state {
    HTTPC_CONNECTING, /* connect() in progress */
    HTTPC_SENDING,    /* request bytes left to write; reading too */
    HTTPC_RECEIVING,  /* all written; reading the response */
    HTTPC_FAILED,     /* failed inside httpc_post(): result reported by the timer */
    HTTPC_CANCELLED,  /* socket closed, no callback; freed by the timer */
};

struct httpc_req {
    struct loop *loop;
    struct loop_io io;        /* the socket's watcher */
    int fd;                   /* the socket, owned; -1 once closed */
    struct wheel_timer timer; /* deadline; in FAILED and CANCELLED, due now */
    enum httpc_state state;
    bool in_cb;        /* cb is running: httpc_cancel() is a no-op */
    int result;        /* FAILED: the error to report */
    httpc_done_cb *cb; /* fired once, unless cancelled */
    void *data;        /* the caller's, for cb */
    struct buf out;    /* the whole request */
    size_t out_off;    /* bytes of out written */
    size_t got;        /* response bytes given to the parser */
    int status;        /* the final response's status once complete, else 0 */
    llhttp_t parser;   /* the response; parser.data is the request */
};

static void on_io(struct loop_io *io, uint32_t events);
static void on_timer(struct wheel_timer *t, uint64_t now);

/* A status outside 100-599 is refused as soon as the head is read. */
static int on_headers_complete(llhttp_t *p)
{
    int status = llhttp_get_status_code(p);

    return status < 100 || status > 599 ? -1 : 0;
}

/* The final response is complete: keep its status and stop the parser.
 * Interim 1xx responses are skipped (llhttp goes on to the next message);
 * 101 is final, if odd for a POST. */
static int on_message_complete(llhttp_t *p)
{
    struct httpc_req *r = p->data;
    int status = llhttp_get_status_code(p);

    if (status < 200 && status != 101)
        return 0;
    r->status = status;
    return HPE_PAUSED;
}

static const llhttp_settings_t response_settings = {
    .on_headers_complete = on_headers_complete,
    .on_message_complete = on_message_complete,
};

/* Builds the request bytes into r->out. */
static void build_request(struct httpc_req *r, const struct httpc_target *t,
                          const char *const *headers, const void *body, size_t len)
{
    buf_reserve(&r->out, strlen(t->path) + strlen(t->host) + 160 + len);
    buf_printf(&r->out,
               "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
               "Content-Length: %zu\r\nConnection: close\r\nUser-Agent: presenced\r\n",
               t->path, t->host, len);
    for (size_t i = 0; headers && headers[i]; i++) {
        buf_append_str(&r->out, headers[i]);
        buf_append(&r->out, "\r\n", 2);
    }
    buf_append(&r->out, "\r\n", 2);
    if (len)
        buf_append(&r->out, body, len);
}

/* Maps a socket error to what the callback is told. */
static int map_errno(int e)
{
    switch (e) {
    case ECONNREFUSED:
        return HTTPC_E_REFUSED;
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ENETDOWN:
    case EHOSTDOWN:
    case ETIMEDOUT:
        return HTTPC_E_UNREACHABLE;
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
        return HTTPC_E_RESET;
    default:
        return -e;
    }
}

/* Opens the socket and starts connecting; returns 0 or -errno. Even a
 * connect that completes at once is reported by the loop (EPOLLOUT). */
static int start_connect(struct httpc_req *r, const struct httpc_target *t)
{
    int one = 1, fd, rc;

    fd = socket(t->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (const struct sockaddr *)&t->addr, t->addrlen) < 0 && errno != EINPROGRESS) {
        rc = -errno;
        close(fd);
        return rc;
    }
    rc = loop_io_start(r->loop, &r->io, fd, EPOLLOUT, on_io);
    if (rc) {
        close(fd);
        return rc;
    }
    r->fd = fd;
    return 0;
}

static bool headers_are_valid(const char *const *headers)
{
    for (size_t i = 0; headers && headers[i]; i++)
        if (!httpc_header_is_valid(headers[i]))
            return false;
    return true;
}

struct httpc_req *httpc_post(struct loop *l, const struct httpc_target *t,
                             const char *const *headers, const void *body, size_t len,
                             uint32_t timeout_ms, httpc_done_cb *cb, void *data)
{
    struct httpc_req *r;
    int rc;

    if (!t->addrlen || !timeout_ms || (!body && len) || !headers_are_valid(headers))
        return NULL;
    r = xcalloc(1, sizeof(*r));
    r->loop = l;
    r->fd = -1;
    r->cb = cb;
    r->data = data;
    wheel_timer_init(&r->timer, on_timer);
    build_request(r, t, headers, body, len);
    llhttp_init(&r->parser, HTTP_RESPONSE, &response_settings);
    r->parser.data = r;
    rc = start_connect(r, t);
    if (rc) {
        r->state = HTTPC_FAILED;
        r->result = map_errno(-rc);
        loop_timer_start(l, &r->timer, 0);
        return r;
    }
    r->state = HTTPC_CONNECTING;
    loop_timer_start(l, &r->timer, timeout_ms);
    return r;
}

/* ---- Ending ---- */

static void close_socket(struct httpc_req *r)
{
    if (r->fd < 0)
        return;
    loop_io_forget(&r->io);
    close(r->fd);
    r->fd = -1;
}

static void req_free(struct httpc_req *r)
{
    wheel_del(&r->timer);
    buf_release(&r->out);
    free(r);
}

/* Reports result and frees r. Only from r's own I/O or timer callback, so
 * nothing of the loop's still points at r once this returns. */
static void finish(struct httpc_req *r, int result)
{
    close_socket(r);
    wheel_del(&r->timer);
    r->in_cb = true;
    r->cb(r, result, r->data);
    req_free(r);
}

void httpc_cancel(struct httpc_req *r)
{
    if (r->in_cb || r->state == HTTPC_CANCELLED)
        return;
    close_socket(r);
    r->state = HTTPC_CANCELLED;
    /* Not freed here: this iteration's events may still name r->io. */
    loop_timer_start(r->loop, &r->timer, 0);
}

void httpc_abandon(struct httpc_req *r)
{
    if (r->in_cb)
        return;
    close_socket(r);
    req_free(r);
}

static void on_timer(struct wheel_timer *t, uint64_t now)
{
    struct httpc_req *r = container_of(t, struct httpc_req, timer);

    (void)now;
    if (r->state == HTTPC_CANCELLED)
        req_free(r);
    else if (r->state == HTTPC_FAILED)
        finish(r, r->result);
    else
        finish(r, HTTPC_E_TIMEOUT);
}

/* ---- I/O ---- */

/* Feeds (p, n) to the parser, at most up to HTTPC_MAX_RESPONSE in all.
 * Returns the status once the response is complete, 0 when more is
 * needed, or a negative error. */
static int feed(struct httpc_req *r, const char *p, size_t n)
{
    llhttp_errno_t e;

    n = MIN(n, HTTPC_MAX_RESPONSE - r->got);
    r->got += n;
    e = llhttp_execute(&r->parser, p, n);
    if (r->status)
        return r->status;
    if (e != HPE_OK)
        return HTTPC_E_MALFORMED;
    if (r->got == HTTPC_MAX_RESPONSE)
        return HTTPC_E_TOO_LARGE;
    return 0;
}

/* The peer closed its side: the response may end with it (a body that
 * runs to EOF); anything else unfinished is HTTPC_E_CLOSED. */
static int on_eof(struct httpc_req *r)
{
    llhttp_errno_t e = llhttp_finish(&r->parser);

    if (r->status)
        return r->status;
    if (e != HPE_OK && e != HPE_INVALID_EOF_STATE)
        return HTTPC_E_MALFORMED;
    return HTTPC_E_CLOSED;
}

/* Reads what is there; returns a result to finish with, or 0. */
static int on_readable(struct httpc_req *r)
{
    char b[HTTPC_READ_SIZE];

    for (int i = 0; i < HTTPC_READS_PER_EVENT; i++) {
        ssize_t n = read(r->fd, b, sizeof(b));
        int rc;

        if (n == 0)
            return on_eof(r);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : map_errno(errno);
        rc = feed(r, b, (size_t)n);
        if (rc || (size_t)n < sizeof(b))
            return rc;
    }
    return 0;
}

/* Writes what is left of the request; returns an error to finish with, or 0. */
static int on_writable(struct httpc_req *r)
{
    while (r->out_off < r->out.len) {
        ssize_t n = send(r->fd, r->out.data + r->out_off, r->out.len - r->out_off, MSG_NOSIGNAL);

        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : map_errno(errno);
        r->out_off += (size_t)n;
    }
    r->state = HTTPC_RECEIVING;
    return loop_io_set(r->loop, &r->io, EPOLLIN);
}

/* The connect ended: an error, or the start of SENDING. */
static int on_connected(struct httpc_req *r)
{
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err)
        return map_errno(err);
    r->state = HTTPC_SENDING;
    return loop_io_set(r->loop, &r->io, EPOLLIN | EPOLLOUT);
}

static void on_io(struct loop_io *io, uint32_t events)
{
    struct httpc_req *r = container_of(io, struct httpc_req, io);
    int rc = 0;

    if (r->state == HTTPC_CONNECTING) {
        rc = on_connected(r);
        if (rc == 0)
            rc = on_writable(r);
    } else {
        if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            rc = on_readable(r);
        if (rc == 0 && r->state == HTTPC_SENDING && (events & EPOLLOUT))
            rc = on_writable(r);
    }
    if (rc)
        finish(r, rc);
}

const char *httpc_strerror(int err)
{
    switch (err) {
    case HTTPC_E_REFUSED:
        return "connection refused";
    case HTTPC_E_UNREACHABLE:
        return "network or host unreachable";
    case HTTPC_E_TIMEOUT:
        return "timed out";
    case HTTPC_E_RESET:
        return "connection reset by peer";
    case HTTPC_E_CLOSED:
        return "connection closed before a complete response";
    case HTTPC_E_MALFORMED:
        return "malformed response";
    case HTTPC_E_TOO_LARGE:
        return "response too large";
    default:
        return err < 0 && err > -PS_EBASE ? strerror(-err) : "unknown httpc error";
    }
}
