/* SPDX-License-Identifier: MIT */
/*
 * test_httpc.c - the outbound HTTP client on a real loop against a real
 * server on 127.0.0.1 (a thread with blocking sockets, one connection per
 * test): statuses, chunked and EOF-delimited bodies, interim responses,
 * every error (refused, timeout, early close, garbage, the size limit on
 * both sides of it), cancellation from anywhere, the exact request bytes,
 * header injection and URL parsing.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "httpc.h"
#include "loop.h"
#include "util.h"

#define REQ_MAX (1024u * 1024u) /* request bytes a test server keeps */

/* What the test server does once it has accepted. */
enum srv_mode {
    SRV_ANSWER,    /* read the request, send resp, close */
    SRV_HOLD,      /* read the request, send resp, wait for the client's close */
    SRV_SILENT,    /* read the request, never answer, wait for the client's close */
    SRV_CLOSE_NOW, /* close at once, reading nothing */
};

struct server {
    int lfd;
    uint16_t port;
    pthread_t thread;
    enum srv_mode mode;
    const char *resp; /* sent after the request (SRV_ANSWER, SRV_HOLD) */
    size_t resp_len;
    char *req; /* the request bytes received */
    size_t req_len;
};

/* What a done callback saw. */
struct result {
    int calls;
    int status;
    struct httpc_req *cancel; /* cancelled by the callback, when set */
    bool cancel_self;         /* the callback cancels its own request */
};

struct fixture {
    struct loop *loop;
    struct server srv;
    bool started;
    struct httpc_target t;
};

static void on_done(struct httpc_req *r, int status, void *data)
{
    struct result *res = data;

    res->calls++;
    res->status = status;
    if (res->cancel)
        httpc_cancel(res->cancel);
    if (res->cancel_self)
        httpc_cancel(r);
}

/* ---- The test server ---- */

static size_t content_length(const char *head)
{
    const char *p = strcasestr(head, "\r\ncontent-length:");

    return p ? strtoul(p + 17, NULL, 10) : 0;
}

/* Reads one request (head and Content-Length body) into s->req. */
static void read_request(struct server *s, int fd)
{
    size_t head = 0;

    while (s->req_len < REQ_MAX - 1) {
        ssize_t n = read(fd, s->req + s->req_len, REQ_MAX - 1 - s->req_len);
        char *end;

        if (n <= 0)
            return;
        s->req_len += (size_t)n;
        s->req[s->req_len] = '\0';
        if (!head && (end = strstr(s->req, "\r\n\r\n")))
            head = (size_t)(end - s->req) + 4;
        if (head && s->req_len >= head + content_length(s->req))
            return;
    }
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

        if (k <= 0)
            return; /* the client gave up (a response over the limit) */
        p += k;
        n -= (size_t)k;
    }
}

static void wait_eof(int fd)
{
    char b[4096];

    while (read(fd, b, sizeof(b)) > 0)
        ;
}

static void *serve(void *arg)
{
    struct server *s = arg;
    struct timeval tv = {.tv_sec = 5};
    int fd = accept(s->lfd, NULL, NULL);

    if (fd < 0)
        return NULL;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (s->mode != SRV_CLOSE_NOW)
        read_request(s, fd);
    if (s->resp)
        send_all(fd, s->resp, s->resp_len);
    if (s->mode == SRV_HOLD || s->mode == SRV_SILENT)
        wait_eof(fd);
    close(fd);
    return NULL;
}

/* A socket bound to 127.0.0.1 on a free port; listening when listen_too. */
static int bound_socket(uint16_t *port, bool listen_too)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    if (listen_too)
        assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Starts the server thread and points f->t at it (path "/hook"). */
static void start_server(struct fixture *f, enum srv_mode mode, const char *resp, size_t len)
{
    char url[64];

    f->srv.mode = mode;
    f->srv.resp = resp;
    f->srv.resp_len = resp && !len ? strlen(resp) : len;
    assert_int_equal(pthread_create(&f->srv.thread, NULL, serve, &f->srv), 0);
    f->started = true;
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/hook", f->srv.port);
    assert_int_equal(httpc_target_parse(&f->t, url, NULL, 0), 0);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    f->loop = loop_new();
    f->srv.lfd = bound_socket(&f->srv.port, true);
    f->srv.req = calloc(1, REQ_MAX);
    *state = f;
    return 0;
}

/* Runs the loop until res has its callback or ms pass, then a few
 * iterations more (cancelled requests are freed by the next timer run). */
static void run_until(struct loop *l, const struct result *res, uint64_t ms)
{
    uint64_t end = time_mono_ms() + ms;

    while ((!res || !res->calls) && time_mono_ms() < end)
        loop_run_once(l, 10);
    for (int i = 0; i < 3; i++)
        loop_run_once(l, 0);
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    run_until(f->loop, NULL, 0);
    shutdown(f->srv.lfd, SHUT_RDWR); /* a thread still in accept() gets EINVAL */
    close(f->srv.lfd);
    if (f->started)
        pthread_join(f->srv.thread, NULL);
    loop_free(f->loop);
    free(f->srv.req);
    free(f);
    return 0;
}

/* POSTs body to f->t and waits up to 2 s for the result. */
static int post_and_wait(struct fixture *f, const char *body, uint32_t timeout_ms)
{
    struct result res = {0};
    struct httpc_req *r;

    r = httpc_post(f->loop, &f->t, NULL, body, strlen(body), timeout_ms, on_done, &res);
    assert_non_null(r);
    assert_int_equal(res.calls, 0); /* never from inside httpc_post() */
    run_until(f->loop, &res, 2000);
    assert_int_equal(res.calls, 1);
    return res.status;
}

/* ---- Statuses ---- */

static void test_200_with_body(void **state)
{
    struct fixture *f = *state;

    /* Held open: the response ends at its Content-Length, not at EOF. */
    start_server(f, SRV_HOLD, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 0);
    assert_int_equal(post_and_wait(f, "{}", 1000), 200);
}

static void test_204(void **state)
{
    struct fixture *f = *state;

    start_server(f, SRV_HOLD, "HTTP/1.1 204 No Content\r\n\r\n", 0);
    assert_int_equal(post_and_wait(f, "{}", 1000), 204);
}

static void test_500(void **state)
{
    struct fixture *f = *state;

    start_server(f, SRV_ANSWER, "HTTP/1.1 500 Oops\r\nContent-Length: 3\r\n\r\nbad", 0);
    assert_int_equal(post_and_wait(f, "{}", 1000), 500);
}

static void test_302_is_reported_not_followed(void **state)
{
    struct fixture *f = *state;

    start_server(f, SRV_ANSWER,
                 "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/elsewhere\r\n"
                 "Content-Length: 0\r\n\r\n",
                 0);
    assert_int_equal(post_and_wait(f, "{}", 1000), 302);
}

static void test_chunked_response(void **state)
{
    struct fixture *f = *state;

    start_server(f, SRV_HOLD,
                 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
                 0);
    assert_int_equal(post_and_wait(f, "{}", 1000), 200);
}

static void test_body_until_eof(void **state)
{
    struct fixture *f = *state;

    start_server(f, SRV_ANSWER, "HTTP/1.1 202 Accepted\r\n\r\nqueued", 0);
    assert_int_equal(post_and_wait(f, "{}", 1000), 202);
}

static void test_interim_1xx_is_skipped(void **state)
{
    struct fixture *f = *state;

    start_server(f, SRV_HOLD,
                 "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\n"
                 "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
                 0);
    assert_int_equal(post_and_wait(f, "{}", 1000), 201);
}

/* ---- Errors ---- */

static void test_connection_refused(void **state)
{
    struct fixture *f = *state;
    uint16_t port;
    int fd = bound_socket(&port, false); /* bound, not listening: refused */
    char url[64];

    snprintf(url, sizeof(url), "http://127.0.0.1:%u/", port);
    assert_int_equal(httpc_target_parse(&f->t, url, NULL, 0), 0);
    assert_int_equal(post_and_wait(f, "{}", 1000), HTTPC_E_REFUSED);
    close(fd);
}

static void test_timeout_covers_a_silent_server(void **state)
{
    struct fixture *f = *state;
    uint64_t t0 = time_mono_ms(), took;

    start_server(f, SRV_SILENT, NULL, 0);
    assert_int_equal(post_and_wait(f, "{}", 100), HTTPC_E_TIMEOUT);
    took = time_mono_ms() - t0;
    assert_true(took >= 90);  /* the deadline, give or take a wheel tick */
    assert_true(took < 1000); /* and not the 2 s run_until would wait */
}

static void test_garbage_is_malformed(void **state)
{
    struct fixture *f = *state;

    start_server(f, SRV_HOLD, "SSH-2.0-OpenSSH_9.2\r\n\r\n", 0);
    assert_int_equal(post_and_wait(f, "{}", 1000), HTTPC_E_MALFORMED);
}

static void test_status_out_of_range_is_malformed(void **state)
{
    struct fixture *f = *state;

    start_server(f, SRV_HOLD, "HTTP/1.1 600 Nope\r\nContent-Length: 0\r\n\r\n", 0);
    assert_int_equal(post_and_wait(f, "{}", 1000), HTTPC_E_MALFORMED);
}

/* A 200 of exactly n bytes in all (n > 100). */
static char *response_of(size_t n)
{
    char *p = malloc(n);
    int head = snprintf(p, n, "HTTP/1.1 200 OK\r\nContent-Length: %05zu\r\n\r\n", (size_t)0);

    /* The length has five digits either way, so the head's size is known. */
    snprintf(p, n, "HTTP/1.1 200 OK\r\nContent-Length: %05zu\r\n\r\n", n - (size_t)head);
    memset(p + head, 'x', n - (size_t)head);
    return p;
}

static void test_response_at_the_limit_is_read(void **state)
{
    struct fixture *f = *state;
    char *resp = response_of(HTTPC_MAX_RESPONSE);

    start_server(f, SRV_HOLD, resp, HTTPC_MAX_RESPONSE);
    assert_int_equal(post_and_wait(f, "{}", 2000), 200);
    pthread_join(f->srv.thread, NULL); /* resp is the thread's until then */
    f->started = false;
    free(resp);
}

static void test_response_over_the_limit_is_too_large(void **state)
{
    struct fixture *f = *state;
    char *resp = response_of(HTTPC_MAX_RESPONSE + 1);

    start_server(f, SRV_HOLD, resp, HTTPC_MAX_RESPONSE + 1);
    assert_int_equal(post_and_wait(f, "{}", 2000), HTTPC_E_TOO_LARGE);
    pthread_join(f->srv.thread, NULL);
    f->started = false;
    free(resp);
}

static void test_close_without_answer(void **state)
{
    struct fixture *f = *state;

    start_server(f, SRV_ANSWER, NULL, 0);
    assert_int_equal(post_and_wait(f, "{}", 1000), HTTPC_E_CLOSED);
}

static void test_close_in_the_middle_of_a_response(void **state)
{
    struct fixture *f = *state;

    start_server(f, SRV_ANSWER, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0);
    assert_int_equal(post_and_wait(f, "{}", 1000), HTTPC_E_CLOSED);
}

static void test_close_before_reading(void **state)
{
    struct fixture *f = *state;
    int status;

    /* A FIN or, if the request arrives first, a RST: either way an error. */
    start_server(f, SRV_CLOSE_NOW, NULL, 0);
    status = post_and_wait(f, "{}", 1000);
    assert_true(status == HTTPC_E_CLOSED || status == HTTPC_E_RESET);
}

/* ---- Cancellation ---- */

static void test_cancel_before_completion(void **state)
{
    struct fixture *f = *state;
    struct result res = {0};
    struct httpc_req *r;

    start_server(f, SRV_SILENT, NULL, 0);
    r = httpc_post(f->loop, &f->t, NULL, "{}", 2, 1000, on_done, &res);
    for (int i = 0; i < 5; i++)
        loop_run_once(f->loop, 10); /* connected and written */
    httpc_cancel(r);
    run_until(f->loop, &res, 200);
    assert_int_equal(res.calls, 0);
}

static void test_cancel_at_once(void **state)
{
    struct fixture *f = *state;
    struct result res = {0};

    start_server(f, SRV_SILENT, NULL, 0);
    httpc_cancel(httpc_post(f->loop, &f->t, NULL, "{}", 2, 1000, on_done, &res));
    run_until(f->loop, &res, 200);
    assert_int_equal(res.calls, 0);
}

/* Teardown: abandon frees the request at once, no callback and no later
 * loop run needed (the fixture frees the loop right after: ASan's leak
 * check fails the test if anything was left). */
static void test_abandon_at_teardown(void **state)
{
    struct fixture *f = *state;
    struct result res = {0};
    struct httpc_req *r;

    start_server(f, SRV_SILENT, NULL, 0);
    r = httpc_post(f->loop, &f->t, NULL, "{}", 2, 1000, on_done, &res);
    for (int i = 0; i < 5; i++)
        loop_run_once(f->loop, 10); /* connected and written */
    httpc_abandon(r);
    assert_int_equal(res.calls, 0);
}

static void test_cancel_from_another_callback(void **state)
{
    struct fixture *f = *state;
    struct httpc_target refused = {0};
    struct result a = {0}, b = {0};
    uint16_t port;
    int fd = bound_socket(&port, false);
    char url[64];

    start_server(f, SRV_SILENT, NULL, 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/", port);
    assert_int_equal(httpc_target_parse(&refused, url, NULL, 0), 0);
    a.cancel = httpc_post(f->loop, &f->t, NULL, "{}", 2, 5000, on_done, &b);
    assert_non_null(httpc_post(f->loop, &refused, NULL, "{}", 2, 5000, on_done, &a));
    run_until(f->loop, &a, 2000);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.status, HTTPC_E_REFUSED);
    run_until(f->loop, NULL, 0);
    assert_int_equal(b.calls, 0);
    close(fd);
}

static void test_cancel_self_in_callback_is_a_noop(void **state)
{
    struct fixture *f = *state;
    struct result res = {.cancel_self = true};
    struct httpc_req *r;

    start_server(f, SRV_ANSWER, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0);
    r = httpc_post(f->loop, &f->t, NULL, "{}", 2, 1000, on_done, &res);
    assert_non_null(r);
    run_until(f->loop, &res, 2000);
    assert_int_equal(res.calls, 1);
    assert_int_equal(res.status, 200);
}

/* ---- The request ---- */

static void test_request_bytes_are_exact(void **state)
{
    struct fixture *f = *state;
    const char *headers[] = {"Webhook-Id: msg_1", "X-Pusher-Signature: abc123", NULL};
    struct result res = {0};
    char url[64], want[512];

    start_server(f, SRV_ANSWER, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/hooks/x?y=1", f->srv.port);
    assert_int_equal(httpc_target_parse(&f->t, url, NULL, 0), 0);
    assert_non_null(httpc_post(f->loop, &f->t, headers, "{\"a\":1}", 7, 1000, on_done, &res));
    run_until(f->loop, &res, 2000);
    assert_int_equal(res.status, 200);
    snprintf(want, sizeof(want),
             "POST /hooks/x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
             "Content-Type: application/json\r\nContent-Length: 7\r\nConnection: close\r\n"
             "User-Agent: presenced\r\nWebhook-Id: msg_1\r\nX-Pusher-Signature: abc123\r\n"
             "\r\n{\"a\":1}",
             f->srv.port);
    pthread_join(f->srv.thread, NULL);
    f->started = false;
    assert_int_equal(f->srv.req_len, strlen(want));
    assert_memory_equal(f->srv.req, want, f->srv.req_len);
}

/* Larger than a socket buffer: written over several EPOLLOUTs. */
static void test_large_body_arrives_whole(void **state)
{
    struct fixture *f = *state;
    size_t n = 600 * 1024;
    char *body = malloc(n);
    struct result res = {0};

    memset(body, 'b', n);
    start_server(f, SRV_ANSWER, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0);
    assert_non_null(httpc_post(f->loop, &f->t, NULL, body, n, 2000, on_done, &res));
    run_until(f->loop, &res, 3000);
    assert_int_equal(res.status, 200);
    pthread_join(f->srv.thread, NULL);
    f->started = false;
    assert_true(f->srv.req_len > n);
    assert_memory_equal(f->srv.req + f->srv.req_len - n, body, n);
    free(body);
}

static void test_header_injection_is_refused(void **state)
{
    static const char *const bad[] = {
        "X-A: b\r\nX-Evil: 1",
        "X-A: b\nX-Evil: 1",
        "X-A: b\rc",
        "X-A: b\x01",
        "NoColon",
        ": empty name",
        "Bad Name: x",
        "Content-Length: 3",
        "host: elsewhere",
        "Transfer-Encoding: chunked",
    };
    struct fixture *f = *state;
    struct result res = {0};

    assert_int_equal(httpc_target_parse(&f->t, "http://127.0.0.1:1/", NULL, 0), 0);
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        const char *headers[] = {"X-Fine: yes", bad[i], NULL};

        assert_false(httpc_header_is_valid(bad[i]));
        assert_null(httpc_post(f->loop, &f->t, headers, "{}", 2, 100, on_done, &res));
    }
    assert_true(httpc_header_is_valid("X-Fine: yes"));
    assert_true(httpc_header_is_valid("X-Empty:"));
    assert_true(httpc_header_is_valid("X-Tab:\ta b"));
    run_until(f->loop, NULL, 0);
    assert_int_equal(res.calls, 0); /* a failing call never fires its callback */
}

static void test_invalid_requests_return_null(void **state)
{
    struct fixture *f = *state;
    struct httpc_target unparsed = {0};
    struct result res = {0};

    assert_int_equal(httpc_target_parse(&f->t, "http://127.0.0.1:1/", NULL, 0), 0);
    assert_null(httpc_post(f->loop, &unparsed, NULL, "{}", 2, 100, on_done, &res));
    assert_null(httpc_post(f->loop, &f->t, NULL, "{}", 2, 0, on_done, &res));
    assert_null(httpc_post(f->loop, &f->t, NULL, NULL, 2, 100, on_done, &res));
    run_until(f->loop, NULL, 0);
    assert_int_equal(res.calls, 0);
}

/* ---- URLs ---- */

static uint16_t port_of(const struct httpc_target *t)
{
    if (t->addr.ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)&t->addr)->sin6_port);
    return ntohs(((const struct sockaddr_in *)&t->addr)->sin_port);
}

static void test_url_ipv4_port_and_path(void **state)
{
    struct httpc_target t;
    const struct sockaddr_in *sin = (const struct sockaddr_in *)&t.addr;

    (void)state;
    assert_int_equal(httpc_target_parse(&t, "http://10.1.2.3:8080/a/b?c=d", NULL, 0), 0);
    assert_int_equal(t.addr.ss_family, AF_INET);
    assert_int_equal(ntohl(sin->sin_addr.s_addr), 0x0a010203);
    assert_int_equal(port_of(&t), 8080);
    assert_string_equal(t.host, "10.1.2.3:8080");
    assert_string_equal(t.path, "/a/b?c=d");
}

static void test_url_defaults(void **state)
{
    struct httpc_target t;

    (void)state;
    assert_int_equal(httpc_target_parse(&t, "http://127.0.0.1", NULL, 0), 0);
    assert_int_equal(port_of(&t), 80);
    assert_string_equal(t.host, "127.0.0.1");
    assert_string_equal(t.path, "/");
    assert_int_equal(httpc_target_parse(&t, "HTTP://127.0.0.1?x=1", NULL, 0), 0);
    assert_string_equal(t.path, "/?x=1");
}

static void test_url_ipv6(void **state)
{
    struct httpc_target t;
    const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&t.addr;

    (void)state;
    assert_int_equal(httpc_target_parse(&t, "http://[::1]:9000/x", NULL, 0), 0);
    assert_int_equal(t.addr.ss_family, AF_INET6);
    assert_memory_equal(&sin6->sin6_addr, &in6addr_loopback, sizeof(in6addr_loopback));
    assert_int_equal(port_of(&t), 9000);
    assert_string_equal(t.host, "[::1]:9000");
    assert_string_equal(t.path, "/x");
    assert_int_equal(httpc_target_parse(&t, "http://[::1]", NULL, 0), 0);
    assert_int_equal(port_of(&t), 80);
    assert_string_equal(t.host, "[::1]");
}

static void test_url_name_is_resolved(void **state)
{
    struct httpc_target t;

    (void)state;
    /* localhost comes from /etc/hosts: no DNS. */
    assert_int_equal(httpc_target_parse(&t, "http://localhost:81/h", NULL, 0), 0);
    assert_true(t.addr.ss_family == AF_INET || t.addr.ss_family == AF_INET6);
    assert_int_equal(port_of(&t), 81);
    assert_string_equal(t.host, "localhost:81");
}

static void test_url_https_is_refused(void **state)
{
    struct httpc_target t;
    char err[128];

    (void)state;
    assert_int_equal(httpc_target_parse(&t, "https://127.0.0.1/", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "TLS"));
    assert_int_equal(t.addrlen, 0);
}

static void test_url_junk_is_refused(void **state)
{
    static const struct {
        const char *url, *why;
    } bad[] = {
        {"ftp://127.0.0.1/", "http://"},
        {"127.0.0.1/x", "http://"},
        {"http://", "empty host"},
        {"http:///x", "empty host"},
        {"http://:80/", "empty host"},
        {"http://user:pw@127.0.0.1/", "userinfo"},
        {"http://127.0.0.1/a#frag", "fragment"},
        {"http://127.0.0.1:/", "port"},
        {"http://127.0.0.1:0/", "port"},
        {"http://127.0.0.1:65536/", "port"},
        {"http://127.0.0.1:80a/", "port"},
        {"http://127.0.0.1:1234567/", "port"},
        {"http://256.1.1.1/", "IPv4"},
        {"http://10.1/", "IPv4"},
        {"http://[::1/", "'['"},
        {"http://[]/", "IPv6"},
        {"http://[zz::1]/", "IPv6"},
        {"http://[::1]x/", "after the host"},
        {"http://a b/", "after the host"},
        {"http://%41/", "in the host"},
        {"http://127.0.0.1/a b", "path"},
        {"http://127.0.0.1/\x80", "path"},
    };
    struct httpc_target t;
    char err[128];

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err[0] = '\0';
        if (httpc_target_parse(&t, bad[i].url, err, sizeof(err)) != -EINVAL ||
            !strstr(err, bad[i].why))
            fail_msg("%s: got \"%s\", want \"%s\"", bad[i].url, err, bad[i].why);
        assert_int_equal(t.addrlen, 0);
    }
}

static void test_strerror_words_every_error(void **state)
{
    (void)state;
    for (int e = HTTPC_E_TOO_LARGE; e <= HTTPC_E_REFUSED; e++)
        assert_string_not_equal(httpc_strerror(e), "unknown httpc error");
    assert_string_equal(httpc_strerror(-EMFILE), strerror(EMFILE));
    assert_string_equal(httpc_strerror(-(PS_EBASE + 999)), "unknown httpc error");
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_200_with_body),
        T(test_204),
        T(test_500),
        T(test_302_is_reported_not_followed),
        T(test_chunked_response),
        T(test_body_until_eof),
        T(test_interim_1xx_is_skipped),
        T(test_connection_refused),
        T(test_timeout_covers_a_silent_server),
        T(test_garbage_is_malformed),
        T(test_status_out_of_range_is_malformed),
        T(test_response_at_the_limit_is_read),
        T(test_response_over_the_limit_is_too_large),
        T(test_close_without_answer),
        T(test_close_in_the_middle_of_a_response),
        T(test_close_before_reading),
        T(test_cancel_before_completion),
        T(test_cancel_at_once),
        T(test_abandon_at_teardown),
        T(test_cancel_from_another_callback),
        T(test_cancel_self_in_callback_is_a_noop),
        T(test_request_bytes_are_exact),
        T(test_large_body_arrives_whole),
        T(test_header_injection_is_refused),
        T(test_invalid_requests_return_null),
        cmocka_unit_test(test_url_ipv4_port_and_path),
        cmocka_unit_test(test_url_defaults),
        cmocka_unit_test(test_url_ipv6),
        cmocka_unit_test(test_url_name_is_resolved),
        cmocka_unit_test(test_url_https_is_refused),
        cmocka_unit_test(test_url_junk_is_refused),
        cmocka_unit_test(test_strerror_words_every_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
