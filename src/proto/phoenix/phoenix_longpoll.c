/* SPDX-License-Identifier: MIT */
/*
 * phoenix_longpoll.c - Phoenix's long-poll transport at /socket/longpoll
 * (docs/phoenix.md "Long-poll"), the one phoenix.js falls back to: a
 * session is a socketless client (client.h) whose Phoenix socket state is
 * a WebSocket's (struct pclient), plus the struct lp below.
 *
 * GET without a session token (or with one that does not verify) makes a
 * session and answers {"status":410,"token":..,"messages":[]}. GET with
 * the token answers at once with what is queued ({"status":200,...}), or
 * is held up to phoenix-longpoll-window-ms on the loop's timers and then
 * answered {"status":204,...}; a second GET replaces the held one, which
 * gets its 204 at once. POST with the token carries one message, or with
 * Content-Type application/x-ndjson up to PHX_LP_BATCH_MAX, handled as a
 * WebSocket's frames are, and is answered {"status":200}. A token whose
 * session has ended gets {"status":410}. The HTTP status is always 200,
 * the real one in the body, as Phoenix does.
 *
 * Workers. A session lives on the worker that made it (its id's top
 * bits). A request that reaches another worker is relayed: that worker
 * defers it under a relay client of its own (a socketless client with a
 * struct lp whose relay flag is set) and sends the session's worker a
 * record ("\x01Q" relay-id method ndjson body) through OP_REPLY, which
 * reaches phoenix__send of the session; the answer comes back to the
 * relay client as a record "\x01H" json, also through OP_REPLY. A relay
 * that hears nothing within the window and RELAY_SLACK_MS (its session's
 * worker no longer knows it) answers {"status":410}.
 *
 * A session ends when the engine closes it (kick, expiry, rate limit), on
 * a queue overflow (phoenix-longpoll-max-queue), on a malformed POST, or
 * when no GET arrives for 1.5 windows (Phoenix's rule): then it is closed
 * as a WebSocket is (client__close(): the reconnect grace), from a timer,
 * never under the caller.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "adapter.h"
#include "apps.h"
#include "client.h"
#include "engine.h"
#include "engine_state.h"
#include "frame.h"
#include "http.h"
#include "http_read.h"
#include "httpd.h"
#include "json.h"
#include "loop.h"
#include "phoenix.h"
#include "phoenix_encode.h"
#include "phoenix_internal.h"
#include "phoenix_lp_wire.h"
#include "phoenix_msg.h"

#define RELAY_SLACK_MS 2000 /* a relayed request waits for its window and this */
#define LP_HEADERS     "Access-Control-Allow-Origin: *\r\nCache-Control: no-store\r\n"
#define TOKEN_HEADER   "X-Phoenix-LongPoll-Token"

static unsigned char lp_key[PHX_LP_KEY_LEN];

/* Who waits for an answer: a deferred request of this worker, or a relay
 * client on another (its id). Both zero: nobody. */
struct lp_waiter {
    struct conn *conn;
    uint64_t relay;
};

struct lp {
    struct client *c;
    bool relay;              /* a relay client: park is its own request */
    bool gone;               /* the session ended: 410 from now on */
    struct lp_waiter park;   /* the held GET (a relay: its request) */
    struct wheel_timer hold; /* park's window; 0 ms when messages came */
    struct wheel_timer idle; /* 1.5 windows without a GET; 0 ms once gone: the close */
    struct payload **q;      /* what the next poll gets, referenced */
    size_t qlen, qcap;
    char token[PHX_LP_TOKEN_LEN + 1];
};

static const struct config *cfg_of(const struct client *c)
{
    return &c->e->w->srv->cfg;
}

static struct lp *lp_of(struct client *c)
{
    return c->x && c->x->adata ? phx__pc(c)->lp : NULL;
}

/* ---- answers ---- */

static void respond(struct conn *conn, const struct buf *b)
{
    httpd_respond(conn, 200, "application/json; charset=utf-8", LP_HEADERS, b->data, b->len);
}

static void respond_status(struct conn *conn, int status)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"status\":");
    json_append_u64(&b, (uint64_t)status);
    buf_append_str(&b, "}");
    respond(conn, &b);
    buf_release(&b);
}

/* {"status":..,"token":..,"messages":[..]}: a GET's answer; the queue
 * goes into it (and is emptied) when messages is true. */
static void poll_json(struct buf *b, struct lp *lp, int status, bool messages)
{
    buf_append_str(b, "{\"status\":");
    json_append_u64(b, (uint64_t)status);
    buf_append_str(b, ",\"token\":");
    json_append_cstr(b, lp->token);
    buf_append_str(b, ",\"messages\":[");
    for (size_t i = 0; messages && i < lp->qlen; i++) {
        const char *p;
        size_t n;
        frame_json(lp->q[i], &p, &n);
        if (i)
            buf_append_str(b, ",");
        json_append_string(b, p, n);
        payload_unref(lp->q[i]);
    }
    if (messages)
        lp->qlen = 0;
    buf_append_str(b, "]}");
}

/* Writes b to w: the deferred request, or through the bus to the relay
 * client that holds it on another worker. */
static void answer(struct engine *e, struct lp_waiter w, const struct buf *b)
{
    struct adapter_frames fs = {0};
    struct buf rec = {0};
    struct payload *p;

    if (w.conn) {
        respond(w.conn, b);
        return;
    }
    if (!w.relay)
        return;
    buf_append(&rec, "\x01H", 2);
    buf_append(&rec, b->data, b->len);
    p = buf_payload(&rec);
    fs.f[phx__proto_of(PHX_VSN_2)] = p;
    fs.f[phx__proto_of(PHX_VSN_1)] = payload_ref(p);
    frame_reply_frames(e, w.relay, &fs);
}

static void answer_status(struct engine *e, struct lp_waiter w, int status)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"status\":");
    json_append_u64(&b, (uint64_t)status);
    buf_append_str(&b, "}");
    answer(e, w, &b);
    buf_release(&b);
}

/* Answers the held GET with status (200 with the queue, or 204). */
static void answer_park(struct lp *lp, int status)
{
    struct lp_waiter w = lp->park;
    struct buf b = {0};

    lp->park = (struct lp_waiter){0};
    wheel_del(&lp->hold);
    poll_json(&b, lp, status, status == 200);
    answer(lp->c->e, w, &b);
    buf_release(&b);
}

/* ---- a session's life ---- */

static void drop_queue(struct lp *lp)
{
    for (size_t i = 0; i < lp->qlen; i++)
        payload_unref(lp->q[i]);
    lp->qlen = 0;
}

/* Ends the session: a held GET gets 410, the queue goes, and the client
 * is closed from the idle timer (at 0 ms), outside the caller. */
static void lp_end(struct lp *lp)
{
    if (lp->gone)
        return;
    lp->gone = true;
    if (lp->park.conn || lp->park.relay) {
        struct lp_waiter w = lp->park;
        lp->park = (struct lp_waiter){0};
        wheel_del(&lp->hold);
        answer_status(lp->c->e, w, 410);
    }
    drop_queue(lp);
    loop_timer_start(lp->c->e->w->loop, &lp->idle, 0);
}

void phoenix__close(struct client *c, unsigned code, const char *reason)
{
    struct lp *lp = lp_of(c);

    (void)code;
    (void)reason;
    if (lp && !lp->relay)
        lp_end(lp);
}

static void on_hold(struct wheel_timer *t, uint64_t now)
{
    struct lp *lp = container_of(t, struct lp, hold);

    (void)now;
    if (lp->relay) { /* nothing came back: the session is not there */
        struct conn *conn = lp->park.conn;
        lp->park.conn = NULL;
        if (conn)
            respond_status(conn, 410);
        loop_timer_start(lp->c->e->w->loop, &lp->idle, 0);
        return;
    }
    answer_park(lp, lp->qlen ? 200 : 204);
}

static void on_idle(struct wheel_timer *t, uint64_t now)
{
    struct lp *lp = container_of(t, struct lp, idle);
    struct client *c = lp->c;

    (void)now;
    if (lp->relay) { /* answered or abandoned: the relay client goes */
        hmap_remove(&c->e->clients, &c->node);
        client__free(c);
        return;
    }
    if (!lp->gone) { /* no poll for 1.5 windows: Phoenix's end */
        lp_end(lp);
        return;
    }
    client__close(c); /* its session enters the reconnect grace */
}

static struct lp *lp_new(struct client *c, bool relay)
{
    struct lp *lp = xcalloc(1, sizeof(*lp));

    lp->c = c;
    lp->relay = relay;
    wheel_timer_init(&lp->hold, on_hold);
    wheel_timer_init(&lp->idle, on_idle);
    return lp;
}

void phx__lp_release(struct lp *lp)
{
    if (!lp)
        return;
    wheel_del(&lp->hold);
    wheel_del(&lp->idle);
    if (lp->park.conn) /* ends its deferral: its abort never fires on lp */
        respond_status(lp->park.conn, 410);
    drop_queue(lp);
    free(lp->q);
    free(lp);
}

/* A held request's connection closed before its answer. */
static void on_park_abort(void *data)
{
    struct lp *lp = data;

    lp->park.conn = NULL;
    wheel_del(&lp->hold);
    if (lp->relay)
        loop_timer_start(lp->c->e->w->loop, &lp->idle, 0);
}

bool phx__lp_push(struct client *c, struct payload *f)
{
    struct lp *lp = lp_of(c);

    if (!lp)
        return false;
    if (lp->gone || lp->relay)
        return true;
    if (lp->qlen >= (size_t)cfg_of(c)->phoenix_longpoll_max_queue) {
        client__ws_close(c, 4008, "output limit"); /* the adapter's close: lp_end */
        return true;
    }
    if (lp->qlen == lp->qcap) {
        lp->qcap = lp->qcap ? 2 * lp->qcap : 8;
        lp->q = xrealloc(lp->q, lp->qcap * sizeof(*lp->q));
    }
    lp->q[lp->qlen++] = payload_ref(f);
    if ((lp->park.conn || lp->park.relay) && lp->qlen == 1) /* answered at the loop's next turn */
        loop_timer_start(c->e->w->loop, &lp->hold, 0);
    return true;
}

/* ---- requests on the session's worker ---- */

/* A GET: answered now, or held (true: w.conn must then be deferred). */
static bool lp_get(struct lp *lp, struct lp_waiter w)
{
    const struct config *cfg = cfg_of(lp->c);
    uint64_t window = (uint64_t)cfg->phoenix_longpoll_window_ms;
    struct buf b = {0};

    loop_timer_start(lp->c->e->w->loop, &lp->idle, window + window / 2);
    if (lp->park.conn || lp->park.relay)
        answer_park(lp, 204); /* replaced: only one GET is held */
    if (lp->qlen) {
        poll_json(&b, lp, 200, true);
        answer(lp->c->e, w, &b);
        buf_release(&b);
        return false;
    }
    lp->park = w;
    loop_timer_start(lp->c->e->w->loop, &lp->hold, window);
    return w.conn != NULL;
}

/* Checks every message of a POST before any is applied: 0, or the
 * status to answer (413 too many or too large, 400 malformed). */
static int post_check(struct client *c, bool ndjson, const char *body, size_t n, char *scratch)
{
    const struct config *cfg = cfg_of(c);
    size_t max = (size_t)cfg->ws_max_message_bytes, pos = 0, count = 0, len;
    enum phx_vsn vsn = phx__pc(c)->vsn;
    const char *line;
    struct phx_msg m;

    if (!ndjson)
        return n > max ? 413 : n == 0 || phx_decode(vsn, body, n, &m) < 0 ? 400 : 0;
    while (phx_lp_next_line(body, n, &pos, &line, &len)) {
        if (++count > PHX_LP_BATCH_MAX || len > max + max / 3 + 4)
            return 413;
        if (phx_lp_line_is_text(line, len)) {
            if (len > max || phx_decode(vsn, line, len, &m) < 0)
                return len > max ? 413 : 400;
        } else if (vsn != PHX_VSN_2 || phx_lp_b64_decode(line, len, scratch, max) < 0) {
            return 400;
        }
    }
    return count ? 0 : 400;
}

/* A POST: every message handled as a WebSocket frame would be. */
static void lp_post(struct lp *lp, struct lp_waiter w, bool ndjson, const char *body, size_t n)
{
    struct client *c = lp->c;
    char *scratch = xmalloc((size_t)cfg_of(c)->ws_max_message_bytes + 1);
    int st = post_check(c, ndjson, body, n, scratch);
    size_t pos = 0, len;
    const char *line;

    if (st) {
        answer_status(c->e, w, st);
        if (st == 400) /* undecodable: Phoenix drops the session, as a WebSocket's 1007 */
            lp_end(lp);
        free(scratch);
        return;
    }
    if (!ndjson) {
        phx__on_text(c, body, n);
    } else {
        while (!lp->gone && phx_lp_next_line(body, n, &pos, &line, &len)) {
            if (phx_lp_line_is_text(line, len)) {
                phx__on_text(c, line, len);
            } else {
                ssize_t k =
                    phx_lp_b64_decode(line, len, scratch, (size_t)cfg_of(c)->ws_max_message_bytes);
                phx__on_binary(c, scratch, (size_t)k);
            }
        }
    }
    free(scratch);
    answer_status(c->e, w, 200);
}

/* A request for session lp: true when w.conn is held (defer it). */
static bool lp_request(struct lp *lp, struct lp_waiter w, char method, bool ndjson,
                       const char *body, size_t n)
{
    if (lp->gone) {
        answer_status(lp->c->e, w, 410);
        return false;
    }
    if (method == 'G')
        return lp_get(lp, w);
    lp_post(lp, w, ndjson, body, n);
    return false;
}

/* ---- relayed requests and answers (records through OP_REPLY) ---- */

bool phx__lp_record(struct client *c, const struct payload *f)
{
    struct lp *lp = lp_of(c);
    const char *p = f->data;
    uint64_t relay = 0;

    if (f->len < 2 || p[0] != '\x01' || (p[1] != 'Q' && p[1] != 'H'))
        return false;
    if (!lp)
        return true;
    if (p[1] == 'H') { /* an answer for this relay client's request */
        struct buf b = {0};
        if (!lp->relay || !lp->park.conn)
            return true;
        buf_append(&b, p + 2, f->len - 2);
        respond(lp->park.conn, &b);
        buf_release(&b);
        lp->park.conn = NULL;
        wheel_del(&lp->hold);
        loop_timer_start(c->e->w->loop, &lp->idle, 0);
        return true;
    }
    if (lp->relay || f->len < 2 + 16 + 2)
        return true;
    for (size_t i = 0; i < 16; i++) { /* our own hex: no checks needed beyond the digits */
        char h = p[2 + i];
        relay = relay << 4 | (uint64_t)(h <= '9' ? h - '0' : h - 'a' + 10);
    }
    lp_request(lp, (struct lp_waiter){.relay = relay}, p[18], p[19] == '1', p + 20, f->len - 20);
    return true;
}

/* Relays a request to the session id's worker under a relay client. */
static void relay(struct conn *conn, struct engine *e, uint64_t id, char method, bool ndjson,
                  const struct http_request *req)
{
    struct client *rc = engine_client_bare(e->w);
    struct pclient *pc = phx__pc_new(rc, PHX_VSN_2);
    struct adapter_frames fs = {0};
    struct buf rec = {0};
    char hex[17];
    struct payload *p;
    struct lp *lp;

    lp = pc->lp = lp_new(rc, true);
    client_x(rc)->adata = pc;
    client__attach_socketless(rc, phx__proto_of(PHX_VSN_2));
    snprintf(hex, sizeof(hex), "%016" PRIx64, client_conn_id(rc));
    buf_append(&rec, "\x01Q", 2);
    buf_append(&rec, hex, 16);
    buf_append(&rec, &method, 1);
    buf_append(&rec, ndjson ? "1" : "0", 1);
    if (req->body_len)
        buf_append(&rec, req->body, req->body_len);
    p = buf_payload(&rec);
    fs.f[phx__proto_of(PHX_VSN_2)] = p;
    fs.f[phx__proto_of(PHX_VSN_1)] = payload_ref(p);
    frame_reply_frames(e, id, &fs);
    lp->park.conn = conn;
    loop_timer_start(e->w->loop, &lp->hold,
                     (uint64_t)e->w->srv->cfg.phoenix_longpoll_window_ms + RELAY_SLACK_MS);
    httpd_defer(conn, on_park_abort, lp);
}

/* ---- new sessions ---- */

/* The connect token under auth = jwt: Authorization: Bearer, phoenix.js's
 * X-Phoenix-AuthToken, or the first token= that is no session token; into
 * out (JWT_MAX_LEN + 1 bytes). 0 when none. */
static size_t connect_token(const struct http_request *req, char *out)
{
    const struct http_header *h = http_header_get(req, "Authorization");
    size_t pos = 0;
    ssize_t n;

    if (h && h->value_len > 7 && h->value_len - 7 <= JWT_MAX_LEN &&
        (memcmp(h->value, "Bearer ", 7) == 0 || memcmp(h->value, "bearer ", 7) == 0)) {
        memcpy(out, h->value + 7, h->value_len - 7);
        out[h->value_len - 7] = '\0';
        return h->value_len - 7;
    }
    h = http_header_get(req, "X-Phoenix-AuthToken");
    if (h && h->value_len > 0 && h->value_len <= JWT_MAX_LEN) {
        memcpy(out, h->value, h->value_len);
        out[h->value_len] = '\0';
        return h->value_len;
    }
    while (pos < req->query_len) {
        n = http_query_next(req->query, req->query_len, "token", &pos, out, JWT_MAX_LEN + 1);
        if (n > 0 && !phx_lp_token_like(out, (size_t)n))
            return (size_t)n;
    }
    return 0;
}

/* The identity of a new session, set on c as the WebSocket path sets it:
 * false when the request is refused (then answered 403, as Phoenix
 * answers a refused connect). *cl is filled when *has_token. */
static bool new_identity(struct conn *conn, const struct http_request *req, struct client *c,
                         struct jwt_claims *cl, bool *has_token)
{
    char id[PRESENCE_ID_MAX + 1], dev[32];
    char *tok = xmalloc(JWT_MAX_LEN + 1);
    size_t n, pos = 0;
    int d = PRESENCE_DEVICE_WEB;

    *has_token = false;
    if (client__auth_jwt(c->e)) {
        n = connect_token(req, tok);
        if (n && client__verify_token(c->e, tok, n, cl) < 0)
            goto out_refuse;
        *has_token = n > 0;
    } else if (http_read__query_has(req, "user")) {
        if (!http_read__query_id(req, "user", id))
            goto out_refuse;
        client_set_uid(c, id);
    }
    if (http_read__query_has(req, "device") &&
        (http_query_next(req->query, req->query_len, "device", &pos, dev, sizeof(dev)) < 0 ||
         (d = presence_device_parse(dev)) < 0))
        goto out_refuse;
    c->device = (unsigned)d & 7u;
    free(tok);
    return true;
out_refuse:
    free(tok);
    respond_status(conn, 403);
    return false;
}

static void new_session(struct conn *conn, const struct http_request *req, struct engine *e)
{
    struct client *c;
    struct pclient *pc;
    struct jwt_claims cl;
    struct buf b = {0};
    enum phx_vsn vsn;
    bool has_token;
    uint64_t window = (uint64_t)e->w->srv->cfg.phoenix_longpoll_window_ms;

    if (!phx__query_vsn(req, &vsn)) {
        httpd_error(conn, 400, "bad_vsn", "vsn must be 2.0.0 or 1.0.0");
        return;
    }
    c = engine_client_bare(e->w);
    if (!new_identity(conn, req, c, &cl, &has_token)) {
        engine_client_discard(c);
        return;
    }
    pc = phx__pc_new(c, vsn);
    pc->lp = lp_new(c, false);
    client_x(c)->adata = pc;
    client__open_socketless(c, phx__proto_of(vsn));
    if (has_token && !c->authed)
        client__take_token(c, &cl);
    phx_lp_token_make(lp_key, client_conn_id(c), pc->lp->token);
    loop_timer_start(e->w->loop, &pc->lp->idle, window + window / 2);
    poll_json(&b, pc->lp, 410, false);
    respond(conn, &b);
    buf_release(&b);
}

/* ---- the route ---- */

/* The session token: the X-Phoenix-LongPoll-Token header, or the last
 * token= of the query that looks like one; into out. False when none. */
static bool session_token(const struct http_request *req, char out[PHX_LP_TOKEN_LEN + 2])
{
    const struct http_header *h = http_header_get(req, TOKEN_HEADER);
    char v[PHX_LP_TOKEN_LEN + 2];
    size_t pos = 0;
    ssize_t n;
    bool found = false;

    if (h && h->value_len <= PHX_LP_TOKEN_LEN) {
        memcpy(out, h->value, h->value_len);
        out[h->value_len] = '\0';
        return true;
    }
    while (pos < req->query_len) {
        n = http_query_next(req->query, req->query_len, "token", &pos, v, sizeof(v));
        if (n >= 0 && phx_lp_token_like(v, (size_t)n)) {
            memcpy(out, v, (size_t)n + 1);
            found = true;
        }
    }
    return found;
}

static bool is_ndjson(const struct http_request *req)
{
    const struct http_header *h = http_header_get(req, "Content-Type");
    static const char t[] = "application/x-ndjson";

    return h && h->value_len >= sizeof(t) - 1 && strncasecmp(h->value, t, sizeof(t) - 1) == 0;
}

void phx__lp_on_request(struct conn *conn, const struct http_request *req, struct net_ctx *nc)
{
    struct engine *e = nc->app;
    char method = req->method_len == 4 && memcmp(req->method, "POST", 4) == 0 ? 'P' : 'G';
    char tok[PHX_LP_TOKEN_LEN + 2];
    uint64_t id;

    if (!apps_native_ok(conn, req)) /* ?app=: the first app's namespace only */
        return;
    if (req->method_len == 7 && memcmp(req->method, "OPTIONS", 7) == 0) {
        httpd_respond(conn, 200, NULL,
                      "Access-Control-Allow-Origin: *\r\n"
                      "Access-Control-Allow-Headers: content-type, x-phoenix-authtoken, "
                      "x-phoenix-longpoll-token, authorization\r\n"
                      "Access-Control-Allow-Methods: get, post, options\r\n"
                      "Access-Control-Max-Age: 3600\r\n",
                      "", 0);
        return;
    }
    if (session_token(req, tok) && phx_lp_token_check(lp_key, tok, strlen(tok), &id) == 0) {
        unsigned home = worker_of_conn(id);
        struct client *c;
        struct lp *lp;

        if (home != e->w->id) {
            relay(conn, e, id, method, is_ndjson(req), req);
            return;
        }
        c = find_client(e, id);
        lp = c && client_is_socketless(c) ? lp_of(c) : NULL;
        if (lp && !lp->relay) {
            if (lp_request(lp, (struct lp_waiter){.conn = conn}, method, is_ndjson(req), req->body,
                           req->body_len))
                httpd_defer(conn, on_park_abort, lp);
            return;
        }
        respond_status(conn, 410); /* a session of ours that ended */
        return;
    }
    if (method == 'P') {
        respond_status(conn, 410);
        return;
    }
    new_session(conn, req, e);
}

void phx__lp_init(void)
{
    if (getrandom(lp_key, sizeof(lp_key), 0) != (ssize_t)sizeof(lp_key))
        abort(); /* no unguessable tokens without it */
}
