/* SPDX-License-Identifier: MIT */
/*
 * httpd.c - HTTP/1.1 on a connection: request loop, timeouts, responses.
 *
 * on_data parses as many complete requests as the input holds and answers
 * each before parsing the next, so pipelined requests are answered in
 * order; the responses are coalesced by conn.c into one writev. States:
 *   WAITING  - no byte of the next request yet: keep-alive timer armed
 *              (the first request of a connection uses the header timer);
 *   PARTIAL  - some bytes of a request: the header timer (armed once, not
 *              refreshed by further bytes, so slowloris drips cannot
 *              extend it) closes the connection with 408 when it fires.
 * A protocol switch (WebSocket upgrade, SSE) frees the HTTP state and
 * returns the bytes consumed so far; conn.c hands the rest to the new
 * protocol.
 */
#include "httpd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "addrcap.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "route.h"
#include "util.h"
#include "wsconn.h"

enum httpd_state { HTTPD_WAITING, HTTPD_PARTIAL };

static struct httpd_conn *proto(struct conn *c)
{
    return c->proto;
}

struct httpd_conn *httpd_conn_new(struct net_ctx *nc)
{
    struct httpd_conn *h = xcalloc(1, sizeof(*h));

    h->nc = nc;
    h->state = HTTPD_PARTIAL; /* the first request runs on the header timer */
    return h;
}

struct conn *httpd_accept(struct net_ctx *nc, struct conn_pool *pool, int fd,
                          const struct sockaddr *peer)
{
    struct conn *c = conn_new(pool, fd, &httpd_ops, httpd_conn_new(nc));
    char name[CONN_PEER_MAX];

    conn_set_peer(c, peer);
    METRIC_ADD(nc->metrics, conns_http, 1);
    if (!addrcap_admit(pool->addrs, c)) {
        METRIC_ADD(nc->metrics, addr_refused, 1);
        log_debug("conn", "max-pending-per-address reached, closing conn=%llu peer=%s",
                  (unsigned long long)c->id, conn_peer(c, name));
        conn_close(c);
        return c;
    }
    log_debug("conn", "accepted conn=%llu peer=%s", (unsigned long long)c->id, conn_peer(c, name));
    conn_timer_start(c, (uint64_t)nc->cfg->http_header_timeout_ms);
    return c;
}

void httpd_drain_all(struct conn_pool *pool, bool (*keep)(const struct conn *c, void *ctx),
                     void *ctx)
{
    struct list *pos, *tmp;

    list_foreach_safe(pos, tmp, &pool->all)
    {
        struct conn *c = container_of(pos, struct conn, link_all);

        if (keep && keep(c, ctx))
            continue;
        if (wsconn_is(c))
            wsconn_going_away(wsconn_from_conn(c));
        else
            httpd_drain(c);
    }
}

/* Cached "Date:" value, refreshed at most once a second per thread. */
static const char *http_date(void)
{
    static _Thread_local char cache[64];
    static _Thread_local time_t cached_at;
    time_t now = time(NULL);
    struct tm tm;

    if (now != cached_at) {
        gmtime_r(&now, &tm);
        strftime(cache, sizeof(cache), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        cached_at = now;
    }
    return cache;
}

static void arm_timer(struct conn *c, enum httpd_state st);

/* A deferred request was answered: go on with the connection, including
 * any pipelined requests that waited in the input buffer. */
static void finish_deferred(struct conn *c)
{
    struct httpd_conn *h = proto(c);

    h->deferred = 0;
    h->abort_cb = NULL;
    if (!h->keep_alive) {
        conn_close_after_flush(c);
        return;
    }
    h->state = HTTPD_WAITING;
    arm_timer(c, HTTPD_WAITING);
    if (!h->peer_eof)
        conn_pause_input(c, false);
    conn_replay_input(c);
    /* Half-closed meanwhile: once nothing is pending, we close too. */
    if (h->peer_eof && c->ops == &httpd_ops && !h->deferred && !conn_is_closing(c))
        conn_close_after_flush(c);
}

void httpd_defer(struct conn *c, void (*abort_cb)(void *data), void *data)
{
    struct httpd_conn *h = proto(c);

    h->deferred = 1;
    h->abort_cb = abort_cb;
    h->abort_data = data;
    conn_pause_input(c, true); /* pipelined bytes wait in the kernel */
}

void httpd_respond(struct conn *c, int status, const char *content_type, const char *extra_headers,
                   const void *body, size_t len)
{
    struct httpd_conn *h = proto(c);
    struct net_ctx *nc = h->nc;
    char head[1024];
    char len_hdr[48];
    int n;

    if (h->responded)
        return; /* one response per request */
    h->responded = 1;
    /* RFC 9110 8.6: no Content-Length on 1xx, 204 and 304 responses. */
    if (status < 200 || status == 204 || status == 304)
        len_hdr[0] = '\0';
    else
        snprintf(len_hdr, sizeof(len_hdr), "Content-Length: %zu\r\n", len);
    n = snprintf(head, sizeof(head),
                 "HTTP/1.1 %d %s\r\nDate: %s\r\nServer: presenced\r\n%s%s%s"
                 "%sConnection: %s\r\n%s\r\n",
                 status, http_status_text(status), http_date(),
                 content_type ? "Content-Type: " : "", content_type ? content_type : "",
                 content_type ? "\r\n" : "", len_hdr, h->keep_alive ? "keep-alive" : "close",
                 extra_headers ? extra_headers : "");
    if (n < 0 || (size_t)n >= sizeof(head)) {
        log_error("http", "response head too long conn=%llu", (unsigned long long)c->id);
        conn_close(c);
        return;
    }
    conn_write(c, head, (size_t)n);
    if (!h->head_only)
        conn_write(c, body, len);
    if (status >= 400)
        METRIC_ADD(nc->metrics, http_errors, 1);
    if (status >= 500)
        log_warnx("http", "status=%d conn=%llu req=%llu", status, (unsigned long long)c->id,
                  (unsigned long long)h->req_seq);
    if (h->deferred)
        finish_deferred(c);
}

void httpd_error_json(struct buf *b, const char *code, const char *message)
{
    buf_append_str(b, "{\"error\":{\"code\":");
    json_append_cstr(b, code);
    buf_append_str(b, ",\"message\":");
    json_append_cstr(b, message);
    buf_append_str(b, "}}");
}

void httpd_error(struct conn *c, int status, const char *code, const char *message)
{
    struct buf b = {0};

    httpd_error_json(&b, code, message);
    buf_append(&b, "\n", 1);
    httpd_respond(c, status, "application/json", NULL, b.data, b.len);
    buf_release(&b);
}

void httpd_taken_over(struct conn *c)
{
    struct httpd_conn *h = proto(c);

    h->responded = 1;
    conn_timer_stop(c);
    METRIC_SUB(h->nc->metrics, conns_http, 1);
}

void httpd_drain(struct conn *c)
{
    struct httpd_conn *h;

    if (c->ops != &httpd_ops) {
        conn_close_after_flush(c); /* an event stream: end it */
        return;
    }
    h = proto(c);
    h->draining = 1;
    if (h->deferred) {
        h->keep_alive = 0; /* answered later, with Connection: close */
        return;
    }
    if (h->state == HTTPD_WAITING || conn_input_len(c) == 0)
        conn_close_after_flush(c);
}

static const char *error_code(int status)
{
    switch (status) {
    case 400:
        return "bad_request";
    case 411:
        return "length_required";
    case 413:
        return "payload_too_large";
    case 417:
        return "expectation_failed";
    case 431:
        return "headers_too_large";
    case 505:
        return "http_version_not_supported";
    default:
        return "error";
    }
}

static const char *error_message(ssize_t err)
{
    switch (err) {
    case HTTP_E_LENGTH_REQUIRED:
        return "chunked request bodies are not accepted; send Content-Length";
    case HTTP_E_BODY_TOO_LARGE:
        return "request body exceeds http-max-body-bytes";
    case HTTP_E_HEAD_TOO_LARGE:
        return "request header block exceeds 8192 bytes; a token too large for a header or "
               "the query string goes in the first {\"type\":\"auth\"} message on /v1/ws";
    case HTTP_E_HOST:
        return "an HTTP/1.1 request needs exactly one Host header with a valid host";
    case HTTP_E_EXPECTATION:
        return "the only expectation supported is Expect: 100-continue";
    case HTTP_E_TOO_MANY_HEADERS:
        return "more than 100 request headers";
    case HTTP_E_VERSION:
        return "only HTTP/1.0 and HTTP/1.1 are supported";
    default:
        return "malformed HTTP request";
    }
}

/* A request that cannot be parsed ends the connection after the answer:
 * the position of the next request is unknown. */
static void reject(struct conn *c, ssize_t err)
{
    struct httpd_conn *h = proto(c);
    int status = http_error_status(err);
    char peer[CONN_PEER_MAX];

    h->keep_alive = 0;
    h->head_only = 0;
    h->responded = 0;
    log_debug("http", "bad request status=%d conn=%llu peer=%s", status, (unsigned long long)c->id,
              conn_peer(c, peer));
    httpd_error(c, status, error_code(status), error_message(err));
    conn_close_after_flush(c);
}

/* Answers one parsed request. Returns false when the connection left HTTP
 * (upgrade) or is closing. */
static bool serve(struct conn *c, const struct http_request *req)
{
    struct httpd_conn *h = proto(c);
    struct net_ctx *nc = h->nc;

    h->req_seq++;
    h->responded = 0;
    h->keep_alive = req->keep_alive && !h->draining;
    h->head_only = req->method_len == 4 && memcmp(req->method, "HEAD", 4) == 0;
    METRIC_ADD(nc->metrics, http_requests, 1);
    conn_timer_stop(c);
    if (!addrcap_establish(c->pool->addrs, c)) {
        METRIC_ADD(nc->metrics, addr_refused, 1);
        h->keep_alive = 0;
        httpd_error(c, 503, "too_many_connections",
                    "this address holds max-connections-per-address connections");
        conn_close_after_flush(c);
        return false;
    }
    route_dispatch(c, req, nc);
    if (c->ops != &httpd_ops || conn_is_closing(c) || h->deferred)
        return false;
    if (!h->responded)
        httpd_error(c, 500, "internal", "handler did not answer");
    if (!h->keep_alive) {
        conn_close_after_flush(c);
        return false;
    }
    return true;
}

static void arm_timer(struct conn *c, enum httpd_state st)
{
    struct httpd_conn *h = proto(c);
    const struct config *cfg = h->nc->cfg;

    if (h->state == (int)st && wheel_is_linked(&c->timer))
        return; /* the header timer is never extended by more bytes */
    h->state = st;
    conn_timer_start(c, (uint64_t)(st == HTTPD_PARTIAL ? cfg->http_header_timeout_ms
                                                       : cfg->http_keepalive_timeout_ms));
}

static size_t httpd_on_data(struct conn *c, const char *p, size_t n)
{
    struct httpd_conn *h = proto(c);
    size_t max_body = (size_t)h->nc->cfg->http_max_body_bytes;
    size_t off = 0;

    if (h->deferred)
        return 0; /* the next request waits for the current answer */
    while (off < n) {
        struct http_request req;
        ssize_t r = http_parse_request(p + off, n - off, max_body, &req);

        if (r == PS_PARTIAL) {
            /* RFC 9110 10.1.1: a client that expects 100-continue waits
             * for it before the body. Sent when the head is all that has
             * arrived, which is once per request: on_data only runs again
             * with more bytes. */
            if (req.expect_continue && req.head_len == n - off)
                conn_write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
            arm_timer(c, HTTPD_PARTIAL);
            return off;
        }
        if (r < 0) {
            reject(c, r);
            return n;
        }
        off += (size_t)r;
        if (!serve(c, &req)) {
            if (c->ops != &httpd_ops)
                free(h); /* taken over: the new protocol owns c->proto */
            if (c->ops != &httpd_ops || (h->deferred && !conn_is_closing(c)))
                return off;
            return n;
        }
        h->state = HTTPD_WAITING;
    }
    arm_timer(c, HTTPD_WAITING);
    return off;
}

static void httpd_on_timer(struct conn *c)
{
    struct httpd_conn *h = proto(c);
    char peer[CONN_PEER_MAX];

    if (h->state == HTTPD_WAITING) {
        conn_close(c);
        return;
    }
    log_info("http", "request timeout conn=%llu peer=%s received=%zu", (unsigned long long)c->id,
             conn_peer(c, peer), conn_input_len(c));
    if (conn_input_len(c) == 0 && h->req_seq == 0) {
        conn_close(c); /* never sent a byte: nothing to answer */
        return;
    }
    h->keep_alive = 0;
    h->head_only = 0;
    h->responded = 0;
    httpd_error(c, 408, "request_timeout", "request not received in time");
    conn_close_after_flush(c);
}

static void httpd_on_eof(struct conn *c)
{
    struct httpd_conn *h = proto(c);

    if (h->deferred) {
        h->peer_eof = 1; /* answer first, then close */
        return;
    }
    conn_close_after_flush(c);
}

static void httpd_on_close(struct conn *c)
{
    struct httpd_conn *h = proto(c);

    if (h->deferred && h->abort_cb)
        h->abort_cb(h->abort_data);
    METRIC_SUB(h->nc->metrics, conns_http, 1);
    free(h);
}

const struct conn_ops httpd_ops = {
    .name = "http",
    .on_data = httpd_on_data,
    .on_eof = httpd_on_eof,
    .on_timer = httpd_on_timer,
    .on_close = httpd_on_close,
};
