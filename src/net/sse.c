/* SPDX-License-Identifier: MIT */
/*
 * sse.c - text/event-stream responses: head, retry hint, event framing,
 * keep-alive comments. Streams are HTTP/1.1 responses without
 * Content-Length that end when either side closes the connection.
 * Input from the client after the request is read and discarded.
 */
#include "sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "conn.h"
#include "httpd.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

struct sse_stream {
    struct conn *conn;       /* borrowed: the stream lives as long as c */
    struct metrics *metrics; /* the worker's, borrowed */
    sse_close_cb *on_close;  /* may be NULL */
    void *data;              /* for on_close and the publisher */
    uint64_t keepalive_ms;   /* comment interval */
};

static size_t sse_on_data(struct conn *c, const char *p, size_t n)
{
    (void)c;
    (void)p;
    return n; /* the client has nothing more to say on a stream */
}

static void sse_on_timer(struct conn *c)
{
    struct sse_stream *s = c->proto;

    conn_write(c, ":\n\n", 3);
    conn_timer_start(c, s->keepalive_ms);
}

static void sse_on_close(struct conn *c)
{
    struct sse_stream *s = c->proto;

    METRIC_SUB(s->metrics, conns_sse, 1);
    if (s->on_close)
        s->on_close(s, s->data);
    free(s);
}

static const struct conn_ops sse_ops = {
    .name = "sse",
    .on_data = sse_on_data,
    .on_timer = sse_on_timer,
    .on_close = sse_on_close,
};

struct sse_stream *sse_start(struct conn *c, struct net_ctx *nc, sse_close_cb *on_close, void *data)
{
    const struct config *cfg = nc->cfg;
    struct sse_stream *s = xcalloc(1, sizeof(*s));
    char head[512];
    int n;

    s->conn = c;
    s->metrics = nc->metrics;
    s->on_close = on_close;
    s->data = data;
    s->keepalive_ms = (uint64_t)cfg->sse_keepalive_ms;
    n = snprintf(head, sizeof(head),
                 "HTTP/1.1 200 OK\r\nServer: presenced\r\nContent-Type: text/event-stream\r\n"
                 "Cache-Control: no-store\r\nConnection: keep-alive\r\nX-Accel-Buffering: no\r\n"
                 "\r\nretry: %lld\n\n",
                 (long long)cfg->sse_retry_ms);
    httpd_taken_over(c);
    conn_write(c, head, (size_t)n);
    conn_set_ops(c, &sse_ops, s);
    METRIC_ADD(nc->metrics, conns_sse, 1);
    conn_timer_start(c, s->keepalive_ms);
    return s;
}

static bool parse_u64(const char *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;

    if (n == 0 || n > 19)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    *out = v;
    return true;
}

bool sse_last_event_id_text(const struct http_request *req, char *out, size_t outsz)
{
    const struct http_header *h = http_header_get(req, "Last-Event-ID");
    size_t pos = 0;

    if (h) {
        if (h->value_len == 0 || h->value_len >= outsz)
            return false;
        memcpy(out, h->value, h->value_len);
        out[h->value_len] = '\0';
        return true;
    }
    return http_query_next(req->query, req->query_len, "lastEventId", &pos, out, outsz) > 0;
}

bool sse_last_event_id(const struct http_request *req, uint64_t *id)
{
    char val[32];

    return sse_last_event_id_text(req, val, sizeof(val)) && parse_u64(val, strlen(val), id);
}

struct payload *sse_format(const char *event, uint64_t id, const char *data, size_t n)
{
    char tmp[24];

    if (!id)
        return sse_format_id(event, NULL, data, n);
    snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)id);
    return sse_format_id(event, tmp, data, n);
}

struct payload *sse_format_id(const char *event, const char *id, const char *data, size_t n)
{
    struct buf b = {0};
    struct payload *p;
    size_t start = 0;

    if (id)
        buf_printf(&b, "id: %s\n", id);
    if (event)
        buf_printf(&b, "event: %s\n", event);
    for (size_t i = 0; i <= n; i++) {
        if (i < n && data[i] != '\n')
            continue;
        buf_append_str(&b, "data: ");
        buf_append(&b, data + start, i - start);
        buf_append(&b, "\n", 1);
        start = i + 1;
    }
    buf_append(&b, "\n", 1);
    p = payload_from(b.data, b.len);
    buf_release(&b);
    return p;
}

void sse_send_payload(struct sse_stream *s, struct payload *p)
{
    conn_write_payload(s->conn, p);
}

void sse_send(struct sse_stream *s, const char *event, uint64_t id, const char *data, size_t n)
{
    struct payload *p = sse_format(event, id, data, n);

    sse_send_payload(s, p);
    payload_unref(p);
}

struct conn *sse_conn(struct sse_stream *s)
{
    return s->conn;
}

void sse_fail(struct sse_stream *s, const char *code, const char *message)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"code\":");
    json_append_cstr(&b, code);
    buf_append_str(&b, ",\"message\":");
    json_append_cstr(&b, message);
    buf_append_str(&b, "}");
    sse_send(s, "error", 0, b.data, b.len);
    buf_release(&b);
    conn_close_after_flush(s->conn);
}
