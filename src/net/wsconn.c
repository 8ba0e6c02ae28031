/* SPDX-License-Identifier: MIT */
/*
 * wsconn.c - WebSocket connections: the opening handshake (wsconn_upgrade),
 * frame processing in on_data, the closing handshake, ping liveness and
 * the send functions. The byte-level codec is ws.c, UTF-8 is utf8.c.
 *
 * Input is consumed as it arrives, with two exceptions that conn.c keeps
 * as leftover bytes until they are complete: a frame header (at most 14
 * bytes) and a whole control frame (at most 139 bytes, answered only once
 * complete). Data payload bytes are unmasked straight into the message's
 * reassembly buffer and validated there; a complete small unfragmented
 * frame is unmasked on the stack instead and never touches the heap.
 * After a close was sent, data frames are parsed but neither buffered nor
 * delivered: only the peer's close still matters.
 * This file never frees a connection: it ends them with conn_close() or
 * conn_close_after_flush() and releases its state in on_close.
 */
#include "wsconn.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "utf8.h"
#include "util.h"
#include "ws.h"

#define WS_STACK_MESSAGE            2048u /* complete frames up to this size skip the heap */
#define WS_SMALL_FRAME              1024u /* frames up to this size are copied, larger ones referenced */
#define WS_MIN_BUFFER               256u /* first reassembly allocation */
#define WS_DEFAULT_CLOSE_TIMEOUT_MS 2000u

/* Subprotocols of wsconn_opts.subprotocols that can be chosen: the choice is
 * kept as a one-byte index. */
#define WS_MAX_SUBPROTOCOLS 255u

/*
 * The state of a frame or message still arriving, out of line: it exists
 * only from a data frame that is not handled whole (whole_message) until its
 * message has been delivered, so an idle connection has none. The
 * reassembly buffer is its tail, allocated with it and grown with it.
 */
struct wsconn_rx {
    uint64_t frame_left; /* payload bytes of the current data frame to come */
    size_t msg_len;      /* unmasked bytes of the open message in msg */
    size_t msg_cap;      /* bytes allocated for msg */
    uint32_t utf8;       /* validator state of the open text message */
    uint8_t mask[4];     /* masking key of the current data frame */
    uint16_t frames;     /* data frames of the open message (capped) */
    uint8_t msg_opcode;  /* WS_OP_TEXT/BINARY while a message is open, else 0 */
    uint8_t mask_off;    /* payload offset of the next byte, mod 4 */
    bool in_payload;     /* inside a data frame's payload */
    bool frame_fin;      /* the current data frame ends its message */
    char msg[];          /* reassembly buffer: msg_cap bytes */
};

/*
 * What the connections upgraded with one (opts, app) pair share: their
 * conn_ops (wsconn_ops), which c->ops points at, and the pair, found from
 * c->ops, so that a wsconn holds no pointer to either. A process has one
 * per endpoint (/v1/ws, and /test/echo and /test/broadcast in test
 * builds). Added under wsconn_endpoints_lock, never removed (the pair's
 * pointers are only compared once its connections are gone), read
 * without the lock: an entry is complete before it is published.
 */
struct wsconn_endpoint {
    struct conn_ops ops;            /* wsconn_ops */
    const struct wsconn_opts *opts; /* borrowed, as given to wsconn_upgrade */
    const struct wsconn_app *app;   /* ditto */
    struct wsconn_endpoint *next;   /* wsconn_endpoints */
};

static _Atomic(struct wsconn_endpoint *) wsconn_endpoints;
static pthread_mutex_t wsconn_endpoints_lock = PTHREAD_MUTEX_INITIALIZER;

/* app_data and user_data once the application sets user data other than
 * its app_data (the engine's user data is its app_data: it needs none). */
struct wsconn_data {
    void *app_data;  /* from wsconn_upgrade */
    void *user_data; /* the application's, owned by it */
};

/*
 * Lives in the connection's protocol room (conn_proto_room): allocated and
 * freed with its struct conn, which it therefore needs no pointer to; its
 * options and callbacks are its endpoint's (c->ops).
 */
struct wsconn {
    void *data;           /* app_data; a struct wsconn_data once data_pair */
    struct wsconn_rx *rx; /* while a frame or message is partial, else NULL */
    uint32_t last_rx_ms;  /* loop time of the last input, mod 2^32 (wsconn_opts) */
    uint16_t close_code;  /* first close code sent or received; 0 = none */
    uint8_t subprotocol;  /* 1 + index in opts->subprotocols; 0 = none */
    bool close_sent : 1;  /* our close frame is queued: no more data frames */
    bool ping_out : 1;    /* a ping is out and no input arrived since */
    bool user_is_app : 1; /* the user data is app_data (unless data_pair) */
    bool data_pair : 1;   /* data is a struct wsconn_data (malloc'd, owned) */
};

_Static_assert(sizeof(struct wsconn) <= CONN_PROTO_ROOM, "struct wsconn must fit the conn's room");
_Static_assert(WS_MAX_SUBPROTOCOLS <= UINT8_MAX, "struct wsconn's subprotocol is 1 + an index");

static const struct conn_ops wsconn_ops;

static struct conn *conn_of(const struct wsconn *ws)
{
    return conn_from_proto_room(ws);
}

static const struct wsconn_endpoint *endpoint_of(const struct wsconn *ws)
{
    return container_of(conn_of(ws)->ops, struct wsconn_endpoint, ops);
}

static const struct wsconn_opts *opts_of(const struct wsconn *ws)
{
    return endpoint_of(ws)->opts;
}

static const struct wsconn_app *app_of(const struct wsconn *ws)
{
    return endpoint_of(ws)->app;
}

static struct wsconn_endpoint *endpoint_find(struct wsconn_endpoint *e, const struct wsconn_opts *o,
                                             const struct wsconn_app *app)
{
    for (; e; e = e->next)
        if (e->opts == o && e->app == app)
            return e;
    return NULL;
}

/* The endpoint of (o, app), added on first use. */
static const struct wsconn_endpoint *endpoint_get(const struct wsconn_opts *o,
                                                  const struct wsconn_app *app)
{
    struct wsconn_endpoint *head = atomic_load_explicit(&wsconn_endpoints, memory_order_acquire);
    struct wsconn_endpoint *e = endpoint_find(head, o, app);

    if (e)
        return e;
    pthread_mutex_lock(&wsconn_endpoints_lock);
    head = atomic_load_explicit(&wsconn_endpoints, memory_order_acquire);
    e = endpoint_find(head, o, app);
    if (!e) {
        e = xmalloc(sizeof(*e));
        *e = (struct wsconn_endpoint){.ops = wsconn_ops, .opts = o, .app = app, .next = head};
        atomic_store_explicit(&wsconn_endpoints, e, memory_order_release);
    }
    pthread_mutex_unlock(&wsconn_endpoints_lock);
    return e;
}

static struct metrics *metrics_of(const struct wsconn *ws)
{
    return conn_of(ws)->pool->metrics;
}

/* ---- output ---- */

/* Queues one FIN frame. A frame always goes out with a single queue call,
 * so an output-limit trip can never leave a header without its payload. */
static void send_frame(struct wsconn *ws, unsigned op, const void *p, size_t n)
{
    struct conn *c = conn_of(ws);
    struct payload *pl;

    if (conn_is_closing(c))
        return;
    METRIC_ADD(metrics_of(ws), frames_out, 1);
    if (n <= WS_SMALL_FRAME) {
        uint8_t tmp[WS_MAX_SERVER_HEADER + WS_SMALL_FRAME];
        size_t h = ws_encode_header(tmp, op, true, n);

        if (n)
            memcpy(tmp + h, p, n);
        conn_write(c, tmp, h + n);
        return;
    }
    pl = ws_frame_payload(op, p, n);
    conn_write_payload(c, pl);
    payload_unref(pl);
}

static void send_close(struct wsconn *ws, unsigned code, const char *reason)
{
    uint8_t pl[WS_MAX_CONTROL];
    size_t n;

    if (ws->close_sent)
        return;
    ws->close_sent = true;
    if (!ws->close_code)
        ws->close_code = (uint16_t)code;
    n = ws_encode_close(pl, code, reason);
    send_frame(ws, WS_OP_CLOSE, pl, n);
}

/* Fails the connection (RFC 6455 §7.1.7): close frame with the error's
 * code, then TCP close once it is written. */
static void fail(struct wsconn *ws, ssize_t err)
{
    log_debug("ws", "failing conn=%llu: %s", (unsigned long long)conn_of(ws)->id, ws_strerror(err));
    send_close(ws, ws_error_close_code(err), ws_strerror(err));
    conn_close_after_flush(conn_of(ws));
}

/* ---- opening handshake ---- */

static bool token_eq(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && strncasecmp(a, b, alen) == 0;
}

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* Next comma-separated, whitespace-trimmed item of (*p, *n); advances. */
static bool next_item(const char **p, size_t *n, const char **item, size_t *len)
{
    const char *s = *p, *end = *p + *n, *e;

    while (s < end && (is_space(*s) || *s == ','))
        s++;
    if (s == end)
        return false;
    e = memchr(s, ',', (size_t)(end - s));
    if (!e)
        e = end;
    *p = e;
    *n = (size_t)(end - e);
    while (e > s && is_space(e[-1]))
        e--;
    *item = s;
    *len = (size_t)(e - s);
    return true;
}

/* Origin "scheme://host[:port]" names the same host[:port] as Host. */
static bool same_origin(const struct http_header *origin, const struct http_header *host)
{
    const char *v = origin->value, *sep;
    size_t n = origin->value_len;

    sep = memchr(v, ':', n);
    if (!sep || (size_t)(sep - v) + 3 > n || sep[1] != '/' || sep[2] != '/')
        return false;
    sep += 3;
    return token_eq(sep, n - (size_t)(sep - v), host->value, host->value_len);
}

static bool origin_allowed(const struct http_request *req, const struct wsconn_opts *o)
{
    const struct http_header *origin = http_header_get(req, "Origin");
    const char *list = o->allowed_origins, *item;
    size_t n = list ? strlen(list) : 0, len;

    const struct http_header *host = http_header_get(req, "Host");

    if (!origin)
        return true; /* not a browser: Origin is a browser's statement */
    if (host && same_origin(origin, host))
        return true;
    while (next_item(&list, &n, &item, &len)) {
        if ((len == 1 && item[0] == '*') || token_eq(item, len, origin->value, origin->value_len))
            return true;
    }
    return false;
}

/* 1 + the index in o->subprotocols of (p, n), or 0 when not supported. */
static uint8_t server_protocol(const struct wsconn_opts *o, const char *p, size_t n)
{
    for (unsigned i = 0; o->subprotocols && o->subprotocols[i] && i < WS_MAX_SUBPROTOCOLS; i++) {
        const char *s = o->subprotocols[i];

        if (strlen(s) == n && memcmp(s, p, n) == 0)
            return (uint8_t)(i + 1);
    }
    return 0;
}

/* The first subprotocol the client offers (every Sec-WebSocket-Protocol
 * header, in order) that the server supports, as 1 + its index in
 * o->subprotocols, or 0 for none. */
static uint8_t choose_subprotocol(const struct http_request *req, const struct wsconn_opts *o)
{
    for (size_t i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];
        const char *list = h->value, *item;
        size_t n = h->value_len, len;
        uint8_t found;

        if (!token_eq(h->name, h->name_len, "Sec-WebSocket-Protocol", 22))
            continue;
        while (next_item(&list, &n, &item, &len))
            if ((found = server_protocol(o, item, len)))
                return found;
    }
    return 0;
}

static bool header_has(const struct http_request *req, const char *name, const char *token)
{
    const struct http_header *h = http_header_get(req, name);

    return h && http_header_has_token(h, token);
}

/* Checks the request (RFC 6455 §4.2.1); returns 0 or the HTTP status to
 * answer with, and writes the Accept value on success. */
static int check_handshake(const struct http_request *req, const struct wsconn_opts *o,
                           char accept[29], const char **why)
{
    const struct http_header *h;

    *why = "expected a WebSocket upgrade request";
    if (req->method_len != 3 || memcmp(req->method, "GET", 3) != 0 || req->version_minor != 1 ||
        !http_header_get(req, "Host") || !header_has(req, "Upgrade", "websocket") ||
        !header_has(req, "Connection", "upgrade"))
        return 400;
    h = http_header_get(req, "Sec-WebSocket-Version");
    *why = "only WebSocket version 13 is supported";
    if (!h || !token_eq(h->value, h->value_len, "13", 2))
        return 426;
    h = http_header_get(req, "Sec-WebSocket-Key");
    *why = "invalid Sec-WebSocket-Key";
    if (!h || ws_accept_key(h->value, h->value_len, accept) < 0)
        return 400;
    *why = "origin not allowed";
    if (!origin_allowed(req, o))
        return 403;
    return 0;
}

static void reject(struct conn *c, int status, const char *why)
{
    static const char body[] = "{\"error\":{\"code\":\"upgrade_required\",\"message\":"
                               "\"only WebSocket version 13 is supported\"}}\n";

    log_debug("ws", "handshake rejected status=%d conn=%llu: %s", status, (unsigned long long)c->id,
              why);
    if (status == 426)
        httpd_respond(c, 426, "application/json", "Sec-WebSocket-Version: 13\r\n", body,
                      sizeof(body) - 1);
    else
        httpd_error(c, status, status == 403 ? "forbidden_origin" : "bad_handshake", why);
}

static void write_101(struct conn *c, const char *accept, const char *subprotocol)
{
    struct buf b = {0};

    buf_printf(&b,
               "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n",
               accept);
    if (subprotocol)
        buf_printf(&b, "Sec-WebSocket-Protocol: %s\r\n", subprotocol);
    buf_append(&b, "\r\n", 2);
    conn_write(c, b.data, b.len);
    buf_release(&b);
}

static uint64_t pong_timeout(const struct wsconn *ws)
{
    const struct wsconn_opts *o = opts_of(ws);

    return o->pong_timeout_ms ? o->pong_timeout_ms : o->ping_interval_ms;
}

struct wsconn *wsconn_upgrade(struct conn *c, const struct http_request *req,
                              const struct wsconn_opts *o, const struct wsconn_app *app,
                              void *app_data)
{
    char accept[29];
    const char *why;
    struct wsconn *ws;
    int status = check_handshake(req, o, accept, &why);

    if (status) {
        reject(c, status, why);
        return NULL;
    }
    /* Config bounds both to an hour; last_rx_ms needs them below 2^32. */
    assert(o->ping_interval_ms < UINT32_MAX && o->pong_timeout_ms < UINT32_MAX);
    ws = conn_proto_room(c);
    memset(ws, 0, sizeof(*ws));
    ws->data = app_data;
    ws->subprotocol = choose_subprotocol(req, o);
    ws->last_rx_ms = (uint32_t)loop_now(c->pool->loop);
    httpd_taken_over(c);
    conn_set_ops(c, &endpoint_get(o, app)->ops, ws); /* before opts_of(ws) */
    write_101(c, accept, wsconn_subprotocol(ws));
    METRIC_ADD(metrics_of(ws), conns_ws, 1);
    if (o->ping_interval_ms)
        conn_timer_start(c, o->ping_interval_ms);
    if (app->on_open)
        app->on_open(ws);
    return ws;
}

/* ---- input: messages ---- */

static struct wsconn_rx *rx_new(struct wsconn *ws)
{
    struct wsconn_rx *rx = xmalloc(sizeof(*rx));

    *rx = (struct wsconn_rx){.utf8 = UTF8_ACCEPT};
    ws->rx = rx;
    return rx;
}

/* Frees the partial-input state once no message is open and no frame is
 * partial: an idle connection has none. */
static void rx_release(struct wsconn *ws)
{
    if (ws->rx && !ws->rx->in_payload && !ws->rx->msg_opcode) {
        free(ws->rx);
        ws->rx = NULL;
    }
}

/* Drops the reassembled bytes and their buffer (closing: not wanted). */
static void drop_msg(struct wsconn *ws)
{
    if (ws->rx->msg_cap)
        ws->rx = xrealloc(ws->rx, sizeof(*ws->rx));
    ws->rx->msg_len = ws->rx->msg_cap = 0;
}

static bool too_big(const struct wsconn *ws, uint64_t len)
{
    size_t max = opts_of(ws)->max_message, have = ws->rx ? ws->rx->msg_len : 0;

    return max && (len > max || have > max - len);
}

/* Makes room for k more bytes, doubling, but never past max_message, nor
 * past the message's total once its last frame has declared it. */
static void reserve(struct wsconn *ws, size_t k)
{
    struct wsconn_rx *rx = ws->rx;
    size_t need = rx->msg_len + k, cap, limit = opts_of(ws)->max_message;

    if (need <= rx->msg_cap)
        return;
    if (rx->frame_fin)
        limit = (size_t)((uint64_t)rx->msg_len + rx->frame_left);
    else if (!limit)
        limit = SIZE_MAX - sizeof(*rx);
    cap = MAX(need, MAX(rx->msg_cap * 2, (size_t)WS_MIN_BUFFER));
    cap = MIN(cap, limit);
    rx = xrealloc(rx, sizeof(*rx) + cap);
    rx->msg_cap = cap;
    ws->rx = rx;
}

static void deliver(struct wsconn *ws, unsigned op, const char *p, size_t n)
{
    app_of(ws)->on_message(ws, op == WS_OP_BINARY, p ? p : "", n);
}

/* The last frame of a message has all arrived: delivers it and frees the
 * partial-input state. */
static void message_end(struct wsconn *ws)
{
    struct wsconn_rx *rx = ws->rx;
    unsigned op = rx->msg_opcode;

    rx->msg_opcode = 0;
    if (!ws->close_sent && op == WS_OP_TEXT && rx->utf8 != UTF8_ACCEPT)
        fail(ws, WS_E_UTF8); /* the text ends inside a character */
    else if (!ws->close_sent)
        deliver(ws, op, rx->msg_cap ? rx->msg : NULL, rx->msg_len);
    rx_release(ws);
}

/* Unmasks and validates k payload bytes into the reassembly buffer.
 * Returns false when they are invalid text (the connection is failed). */
static bool absorb(struct wsconn *ws, const char *p, size_t k)
{
    struct wsconn_rx *rx;
    char *dst;

    reserve(ws, k);
    rx = ws->rx;
    dst = rx->msg + rx->msg_len;
    ws_mask_copy(dst, p, k, rx->mask, rx->mask_off);
    if (rx->msg_opcode == WS_OP_TEXT) {
        rx->utf8 = utf8_step(rx->utf8, dst, k);
        if (rx->utf8 == UTF8_REJECT) {
            fail(ws, WS_E_UTF8);
            return false;
        }
    }
    rx->msg_len += k;
    return true;
}

/* Payload bytes of the current data frame. Returns the bytes consumed. */
static size_t rx_payload(struct wsconn *ws, const char *p, size_t n)
{
    size_t k = (size_t)MIN((uint64_t)n, ws->rx->frame_left);
    struct wsconn_rx *rx;

    if (ws->close_sent)
        drop_msg(ws); /* closing: data is no longer wanted */
    else if (!absorb(ws, p, k))
        return k;
    rx = ws->rx;
    rx->frame_left -= k;
    rx->mask_off = (uint8_t)((rx->mask_off + k) & 3);
    if (rx->frame_left == 0) {
        rx->in_payload = false;
        if (rx->frame_fin)
            message_end(ws);
    }
    return k;
}

/* A data frame's header (h bytes; its payload follows, handled by
 * rx_payload()). Returns the bytes consumed, 0 after failing the
 * connection. */
#define WS_MAX_FRAGMENTS 4096 /* data frames in one message -> 1009 beyond */

static size_t rx_data(struct wsconn *ws, const struct ws_frame *f, size_t h)
{
    struct wsconn_rx *rx = ws->rx;
    unsigned open = rx ? rx->msg_opcode : 0, frames;

    if (f->opcode == WS_OP_CONT && !open) {
        fail(ws, WS_E_CONTINUATION);
        return 0;
    }
    if (f->opcode != WS_OP_CONT && open) {
        fail(ws, WS_E_FRAGMENT_OPEN);
        return 0;
    }
    /* Many tiny (even empty) fragments cost work per frame without ever
     * reaching the size limit: a message has at most WS_MAX_FRAGMENTS. */
    frames = f->opcode != WS_OP_CONT ? 1 : rx->frames + 1u;
    if (too_big(ws, f->len) || frames > WS_MAX_FRAGMENTS) {
        fail(ws, WS_E_TOO_BIG);
        return 0;
    }
    if (!rx)
        rx = rx_new(ws);
    rx->frames = (uint16_t)frames;
    if (f->opcode != WS_OP_CONT) {
        rx->msg_opcode = (uint8_t)f->opcode;
        rx->utf8 = UTF8_ACCEPT;
    }
    memcpy(rx->mask, f->mask, 4);
    rx->mask_off = 0;
    rx->frame_left = f->len;
    rx->frame_fin = f->fin;
    rx->in_payload = f->len > 0;
    if (f->len == 0 && f->fin)
        message_end(ws);
    return h;
}

/* ---- input: control frames ---- */

static void rx_close(struct wsconn *ws, const uint8_t *p, size_t n)
{
    unsigned code;
    int err;

    if (ws->close_sent) {
        conn_close_after_flush(conn_of(ws)); /* the closing handshake is complete */
        return;
    }
    err = ws_parse_close(p, n, &code);
    if (err < 0) {
        fail(ws, err);
        return;
    }
    ws->close_code = (uint16_t)code;
    send_close(ws, code == WS_CLOSE_NO_STATUS ? WS_CLOSE_NORMAL : code, NULL);
    conn_close_after_flush(conn_of(ws));
}

static void rx_control(struct wsconn *ws, const struct ws_frame *f, const char *p)
{
    uint8_t pl[WS_MAX_CONTROL];
    size_t n = (size_t)f->len;

    ws_mask_copy(pl, p, n, f->mask, 0);
    if (f->opcode == WS_OP_PING && !ws->close_sent)
        send_frame(ws, WS_OP_PONG, pl, n);
    else if (f->opcode == WS_OP_CLOSE)
        rx_close(ws, pl, n);
    /* pongs only prove liveness, which any input already did */
}

/* A frame starting at p, whose header decoded to h (ws_decode_header():
 * its size, PS_PARTIAL or an error) and f, other than a whole message
 * (whole_message()). Returns the bytes consumed: 0 when the header (or a
 * whole control frame) is not all there yet, or after failing. */
static size_t rx_frame(struct wsconn *ws, const struct ws_frame *f, ssize_t h, const char *p,
                       size_t n)
{
    if (h < 0 && h != PS_PARTIAL) {
        fail(ws, h);
        return 0;
    }
    if (n >= 2 && !((uint8_t)p[1] & 0x80u)) {
        fail(ws, WS_E_UNMASKED);
        return 0;
    }
    if (h == PS_PARTIAL)
        return 0;
    if (f->opcode < WS_OP_CLOSE) {
        METRIC_ADD(metrics_of(ws), frames_in, 1);
        return rx_data(ws, f, (size_t)h);
    }
    if (n - (size_t)h < f->len)
        return 0; /* control frames are handled whole */
    METRIC_ADD(metrics_of(ws), frames_in, 1);
    rx_control(ws, f, p + h);
    return (size_t)h + (size_t)f->len;
}

/* Whether the frame (header h bytes, decoded to f) is a whole message that
 * is all there in the n bytes available: a masked, unfragmented text or
 * binary frame of at most WS_STACK_MESSAGE bytes, with no message open
 * and within the size limit. Such a frame, nearly every client message,
 * is delivered from the stack with no partial-input state (ws->rx stays
 * NULL). */
static bool whole_message(const struct wsconn *ws, const struct ws_frame *f, ssize_t h, size_t n)
{
    return h > 0 && f->masked && f->fin && (f->opcode == WS_OP_TEXT || f->opcode == WS_OP_BINARY) &&
           f->len <= WS_STACK_MESSAGE && f->len <= n - (size_t)h &&
           !(ws->rx && ws->rx->msg_opcode) && !too_big(ws, f->len);
}

/* The connection's input: frames, and whole messages straight to the
 * application's on_message (the read path of docs/architecture.md: one
 * call from read_some to here, one from here to the application). */
static size_t wsconn_on_data(struct conn *c, const char *p, size_t n)
{
    struct wsconn *ws = c->proto;
    char msg[WS_STACK_MESSAGE];
    size_t off = 0, k;

    ws->last_rx_ms = (uint32_t)loop_now(c->pool->loop);
    ws->ping_out = false;
    for (; off < n && !conn_is_closing(c) && !conn_input_paused(c); off += k) {
        struct ws_frame f = {0};
        ssize_t h;

        if (ws->rx && ws->rx->in_payload) {
            k = rx_payload(ws, p + off, n - off);
        } else if (!whole_message(ws, &f, h = ws_decode_header(p + off, n - off, &f), n - off)) {
            k = rx_frame(ws, &f, h, p + off, n - off);
        } else {
            k = (size_t)h + (size_t)f.len;
            METRIC_ADD(metrics_of(ws), frames_in, 1);
            ws_mask_copy(msg, p + off + h, (size_t)f.len, f.mask, 0);
            if (ws->close_sent)
                continue; /* closing: data is no longer wanted */
            if (f.opcode == WS_OP_TEXT && !utf8_valid(msg, (size_t)f.len))
                fail(ws, WS_E_UTF8);
            else
                app_of(ws)->on_message(ws, f.opcode == WS_OP_BINARY, msg, (size_t)f.len);
        }
        if (k == 0)
            break;
    }
    return conn_is_closing(c) ? n : off;
}

/* ---- connection events ---- */

static void wsconn_on_eof(struct conn *c)
{
    conn_close_after_flush(c); /* 1006 unless a close was exchanged */
}

static void wsconn_on_overflow(struct conn *c)
{
    send_close(c->proto, WS_CLOSE_OUTPUT_LIMIT, "output limit");
}

/* Ping liveness, or the end of the wait for the peer's close. */
static void wsconn_on_timer(struct conn *c)
{
    struct wsconn *ws = c->proto;
    uint64_t idle, interval = opts_of(ws)->ping_interval_ms;
    char peer[CONN_PEER_MAX];

    if (ws->close_sent) {
        conn_close(c); /* the peer never answered our close */
        return;
    }
    if (ws->ping_out) {
        log_info("ws", "ping timeout conn=%llu peer=%s", (unsigned long long)c->id,
                 conn_peer(c, peer));
        send_close(ws, WS_CLOSE_INTERNAL, "ping timeout");
        conn_close_after_flush(c);
        return;
    }
    if (!interval)
        return;
    /* Exact in 32 bits: the timer fires within ping_interval_ms or
     * pong_timeout_ms (< 2^32, wsconn_opts) of the last input. */
    idle = (uint32_t)((uint32_t)loop_now(c->pool->loop) - ws->last_rx_ms);
    if (idle < interval) {
        conn_timer_start(c, interval - idle);
        return;
    }
    send_frame(ws, WS_OP_PING, NULL, 0);
    ws->ping_out = true;
    conn_timer_start(c, pong_timeout(ws));
}

static void wsconn_on_close(struct conn *c)
{
    struct wsconn *ws = c->proto;
    unsigned code = ws->close_code ? ws->close_code : WS_CLOSE_ABNORMAL;

    metrics_count_close(metrics_of(ws), code);
    METRIC_SUB(metrics_of(ws), conns_ws, 1);
    if (app_of(ws)->on_close)
        app_of(ws)->on_close(ws, code);
    free(ws->rx);
    ws->rx = NULL; /* the room is freed with c */
    if (ws->data_pair)
        free(ws->data);
}

static const struct conn_ops wsconn_ops = {
    .name = "ws",
    .on_data = wsconn_on_data,
    .on_eof = wsconn_on_eof,
    .on_overflow = wsconn_on_overflow,
    .on_timer = wsconn_on_timer,
    .on_close = wsconn_on_close,
};

/* ---- public sending and accessors ---- */

void wsconn_send_text(struct wsconn *ws, const void *p, size_t n)
{
    if (!ws->close_sent)
        send_frame(ws, WS_OP_TEXT, p, n);
}

void wsconn_send_binary(struct wsconn *ws, const void *p, size_t n)
{
    if (!ws->close_sent)
        send_frame(ws, WS_OP_BINARY, p, n);
}

void wsconn_send_payload(struct wsconn *ws, struct payload *framed)
{
    if (ws->close_sent || conn_is_closing(conn_of(ws)))
        return;
    METRIC_ADD(metrics_of(ws), frames_out, 1);
    conn_write_payload(conn_of(ws), framed);
}

void wsconn_send_payload_bulk(struct wsconn *ws, struct payload *framed)
{
    if (ws->close_sent || conn_is_closing(conn_of(ws)))
        return;
    METRIC_ADD(metrics_of(ws), frames_out, 1);
    conn_write_payload_bulk(conn_of(ws), framed);
}

void wsconn_send_payload_range(struct wsconn *ws, struct payload *framed, size_t off, size_t end,
                               unsigned frames, bool bulk)
{
    if (ws->close_sent || conn_is_closing(conn_of(ws)))
        return;
    METRIC_ADD(metrics_of(ws), frames_out, frames);
    conn_write_payload_range(conn_of(ws), framed, off, end, bulk);
}

void wsconn_close(struct wsconn *ws, unsigned code, const char *reason)
{
    uint64_t t = opts_of(ws)->close_timeout_ms;

    if (ws->close_sent || conn_is_closing(conn_of(ws)))
        return;
    send_close(ws, code, reason);
    conn_timer_start(conn_of(ws), t ? t : WS_DEFAULT_CLOSE_TIMEOUT_MS);
}

void wsconn_going_away(struct wsconn *ws)
{
    wsconn_close(ws, WS_CLOSE_GOING_AWAY, "server shutting down");
}

bool wsconn_is(const struct conn *c)
{
    return c->ops->on_data == wsconn_ops.on_data; /* c->ops is an endpoint's copy */
}

struct wsconn *wsconn_from_conn(struct conn *c)
{
    return wsconn_is(c) ? c->proto : NULL;
}

struct conn *wsconn_to_conn(const struct wsconn *ws)
{
    return conn_of(ws);
}

void *wsconn_app_data(const struct wsconn *ws)
{
    return ws->data_pair ? ((struct wsconn_data *)ws->data)->app_data : ws->data;
}

void *wsconn_user_data(const struct wsconn *ws)
{
    if (ws->data_pair)
        return ((struct wsconn_data *)ws->data)->user_data;
    return ws->user_is_app ? ws->data : NULL;
}

/* User data equal to app_data (or NULL) is a flag; anything else makes
 * data a struct wsconn_data for the rest of the connection. */
void wsconn_set_user_data(struct wsconn *ws, void *data)
{
    struct wsconn_data *pair;

    if (ws->data_pair) {
        ((struct wsconn_data *)ws->data)->user_data = data;
    } else if (!data || data == ws->data) {
        ws->user_is_app = data != NULL;
    } else {
        pair = xmalloc(sizeof(*pair));
        *pair = (struct wsconn_data){.app_data = ws->data, .user_data = data};
        ws->data = pair;
        ws->data_pair = true;
    }
}

const char *wsconn_subprotocol(const struct wsconn *ws)
{
    return ws->subprotocol ? opts_of(ws)->subprotocols[ws->subprotocol - 1] : NULL;
}

bool wsconn_has_partial_input(const struct wsconn *ws)
{
    return ws->rx != NULL;
}
