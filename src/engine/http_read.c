/* SPDX-License-Identifier: MIT */
/*
 * http_read.c - HTTP and SSE reads on the engine (http_read.h): the
 * request side (auth, ?user= and ?as=, rate), the queries that collect
 * the owners' answers by index, and the owner side of a user's read.
 */
#include "http_read.h"
#include "cluster_user.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "engine.h"
#include "engine_privacy.h"
#include "engine_room.h"
#include "engine_expiry.h"
#include "engine_state.h"
#include "frame.h"
#include "httpd.h"
#include "json.h"
#include "quota.h"
#include "ratelimit.h"
#include "room.h"
#include "sse.h"
#include "watch.h"

/* ---- request helpers ---- */

/* True when the query has the key at all (decodable or not). */
bool http_read__query_has(const struct http_request *req, const char *key)
{
    size_t k = strlen(key);
    const char *q = req->query;

    for (size_t i = 0; q && i + k <= req->query_len; i++) {
        if ((i == 0 || q[i - 1] == '&') && memcmp(q + i, key, k) == 0 &&
            (i + k == req->query_len || q[i + k] == '=' || q[i + k] == '&'))
            return true;
    }
    return false;
}

bool http_read__query_id(const struct http_request *req, const char *key,
                         char out[PRESENCE_ID_MAX + 1])
{
    size_t pos = 0;
    ssize_t n = http_query_next(req->query, req->query_len, key, &pos, out, PRESENCE_ID_MAX + 1);

    /* strlen: a %00 would cut the id short into another valid one. */
    return n > 0 && strlen(out) == (size_t)n && presence_id_valid(out);
}

/* The bearer token of a request: Authorization: Bearer, ?token=, or a
 * "bearer.<token>" Sec-WebSocket-Protocol entry. Returns its length (0:
 * none) with the token copied into out (JWT_MAX_LEN + 1 bytes). */
static size_t request_token(const struct http_request *req, char *out)
{
    const struct http_header *h = http_header_get(req, "Authorization");
    size_t pos = 0;
    ssize_t n;

    if (h && h->value_len > 7 && h->value_len - 7 <= JWT_MAX_LEN &&
        ascii_ieq(h->value, 7, "bearer ")) {
        memcpy(out, h->value + 7, h->value_len - 7);
        out[h->value_len - 7] = '\0';
        return h->value_len - 7;
    }
    n = http_query_next(req->query, req->query_len, "token", &pos, out, JWT_MAX_LEN + 1);
    if (n > 0)
        return (size_t)n;
    h = http_header_get(req, "Sec-WebSocket-Protocol");
    for (size_t i = 0; h && i < h->value_len; i++) {
        size_t end = i;
        while (end < h->value_len && h->value[end] != ',')
            end++;
        while (i < end && h->value[i] == ' ')
            i++;
        if (end - i > 7 && end - i - 7 <= JWT_MAX_LEN && memcmp(h->value + i, "bearer.", 7) == 0) {
            size_t len = end - i - 7;
            while (len > 0 && h->value[i + 7 + len - 1] == ' ')
                len--;
            memcpy(out, h->value + i + 7, len);
            out[len] = '\0';
            return len;
        }
        i = end;
    }
    return 0;
}

/* auth = jwt at the upgrade: a token, if given, must verify (401 else). */
/* The request's bearer token, verified: 1 with *cl filled, 0 when the
 * request has no token, -1 when it has one that does not verify. */
int http_read__claims(struct engine *e, const struct http_request *req, struct jwt_claims *cl)
{
    char *tok = xmalloc(JWT_MAX_LEN + 1);
    size_t n = request_token(req, tok);
    int r = n == 0 ? 0 : client__verify_token(e, tok, n, cl) == 0 ? 1 : -1;

    free(tok);
    return r;
}

/* ---- HTTP reads and HTTP heartbeats ----
 *
 * An HTTP request about users is answered by their owners: the worker
 * that holds the request sends one OP_QUERY per user to its owner, defers
 * the HTTP answer (httpd_defer), and collects the OP_ANSWER parts by index,
 * so the answer lists users in the order asked. If the client goes away
 * first, the query is marked orphaned and freed when the last part comes
 * back. */

#define QUERY_MAX_USERS 100 /* users in one HTTP read */

#define QUERY_TIMEOUT_MS 2000 /* reads: then missing parts read as unknown, degraded */

struct query {
    struct list link;  /* engine->queries */
    struct conn *conn; /* NULL once answered or the client went away */
    enum query_kind kind;
    size_t n;                         /* parts expected */
    size_t remaining;                 /* parts still to come */
    struct payload **parts;           /* by index; raw JSON, not framed */
    char (*ids)[PRESENCE_ID_MAX + 1]; /* the user or room of each part */
    struct wheel_timer timer;         /* reads: QUERY_TIMEOUT_MS */
    engine_room_read_done *done;      /* QUERY_ROOM for an adapter: writes the answer */
    char *done_arg;                   /* done's arg (a copy) */
    http_read_merge_fn *merge;        /* QUERY_ADMIN_ROOMS: writes the answer (NULL: the list) */
    size_t merge_arg;
};

/* A write is answered when its outcome is known, never on a timer. */
static bool query_is_write(enum query_kind kind)
{
    return kind == QUERY_BEAT || kind == QUERY_ADMIN_WRITE;
}

static void query_abort(void *data)
{
    ((struct query *)data)->conn = NULL;
}

static void query_free(struct query *q)
{
    list_del(&q->link);
    wheel_del(&q->timer);
    free(q->ids);
    free(q->done_arg);
    for (size_t i = 0; i < q->n; i++)
        payload_unref(q->parts[i]);
    free(q->parts);
    free(q);
}

void http_read__queries_free(struct engine *e)
{
    while (!list_empty(&e->queries))
        query_free(container_of(list_first(&e->queries), struct query, link));
}

static void query_finish(struct query *q)
{
    struct buf b = {0};

    if (q->kind == QUERY_ROOM && q->done) {
        q->done(q->conn, q->done_arg, q->parts[0]->data, q->parts[0]->len);
        return;
    }
    if (q->kind == QUERY_ROOM) {
        httpd_respond(q->conn, 200, "application/json", "Cache-Control: no-store\r\n",
                      q->parts[0]->data, q->parts[0]->len);
        return;
    }
    if (q->kind == QUERY_ADMIN_ROOMS && q->merge) {
        q->merge(q->conn, q->parts, q->n, q->merge_arg);
        return;
    }
    if (q->kind == QUERY_ADMIN_ROOMS || q->kind == QUERY_ROOM_LIST) {
        bool first = true;
        buf_append_str(&b, "{\"rooms\":[");
        for (size_t i = 0; i < q->n; i++) {
            if (q->parts[i]->len == 0)
                continue;
            if (!first)
                buf_append(&b, ",", 1);
            buf_append(&b, q->parts[i]->data, q->parts[i]->len);
            first = false;
        }
        buf_append_str(&b, "]}\n");
        if (q->done)
            q->done(q->conn, q->done_arg, b.data, b.len);
        else
            httpd_respond(q->conn, 200, "application/json", "Cache-Control: no-store\r\n", b.data,
                          b.len);
        buf_release(&b);
        return;
    }
    if (q->kind == QUERY_ADMIN || q->kind == QUERY_ADMIN_WRITE) { /* "NNN" code, then JSON */
        struct payload *p = q->parts[0];
        httpd_respond(q->conn, atoi((char[4]){p->data[0], p->data[1], p->data[2], 0}),
                      "application/json", "Cache-Control: no-store\r\n", p->data + 3, p->len - 3);
        return;
    }
    if (q->kind == QUERY_BEAT) {
        struct payload *p = q->parts[0];
        httpd_respond(q->conn, p->data[0] == '{' ? 200 : 400, "application/json", NULL,
                      p->data + (p->data[0] != '{'), p->len - (p->data[0] != '{'));
        return;
    }
    buf_append_str(&b, "{\"users\":[");
    for (size_t i = 0; i < q->n; i++) {
        if (i)
            buf_append(&b, ",", 1);
        buf_append(&b, q->parts[i]->data, q->parts[i]->len);
    }
    buf_append_str(&b, "]}\n");
    httpd_respond(q->conn, 200, "application/json", "Cache-Control: no-store\r\n", b.data, b.len);
    buf_release(&b);
}

/* What an HTTP read says about a user or room whose owner did not answer
 * in time: never an error page, but "unknown" flagged degraded (the
 * multi-node mode will meet this when a node is unreachable). */
static struct payload *degraded_part(const struct query *q, size_t i)
{
    struct buf b = {0};

    if (q->kind == QUERY_ADMIN_ROOMS || q->kind == QUERY_ROOM_LIST)
        return payload_from("", 0); /* that worker's rooms are missing */
    buf_append_str(&b, q->kind == QUERY_ROOM ? "{\"room\":" : "{\"user\":");
    json_append_cstr(&b, q->ids[i]);
    if (q->kind == QUERY_PRESENCE)
        buf_append_str(&b, ",\"status\":\"unknown\",\"degraded\":true}");
    else if (q->kind == QUERY_LASTSEEN)
        buf_append_str(&b, ",\"online\":null,\"degraded\":true}");
    else
        buf_append_str(&b, ",\"count\":null,\"degraded\":true}\n");
    return buf_payload(&b);
}

static void query_timeout(struct wheel_timer *t, uint64_t now)
{
    struct query *q = container_of(t, struct query, timer);

    (void)now;
    if (!q->conn)
        return;
    if (q->kind == QUERY_ADMIN) { /* a read: no partial answer */
        httpd_error(q->conn, 503, "unavailable", "the user's owner did not answer in time");
    } else {
        for (size_t i = 0; i < q->n; i++)
            if (!q->parts[i])
                q->parts[i] = degraded_part(q, i);
        query_finish(q);
        for (size_t i = 0; i < q->n; i++) { /* late answers take these slots */
            payload_unref(q->parts[i]);
            q->parts[i] = NULL;
        }
    }
    q->conn = NULL;
}

void http_read__on_answer(struct engine *e, struct emsg *em)
{
    struct query *q = (struct query *)(uintptr_t)em->query;

    (void)e;
    payload_unref(q->parts[em->index]);
    q->parts[em->index] = payload_ref(em->frame);
    if (--q->remaining > 0)
        return;
    if (q->conn)
        query_finish(q);
    query_free(q);
}

/* Owner side: one user's part of a read. */
static struct payload *encode_lastseen(struct engine *e, const struct presence_view *v, bool exact)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"user\":");
    json_append_cstr(&b, v->user);
    buf_printf(&b, ",\"online\":%s", v->status == PRESENCE_OFFLINE ? "false" : "true");
    presence_encode_last_seen(v, wall_offset(e), exact, &b);
    buf_append_str(&b, "}");
    return buf_payload(&b);
}

void http_read__answer(struct engine *e, const struct emsg *req, struct payload *part)
{
    struct emsg *em = emsg_new(OP_ANSWER, 0);

    em->query = req->query;
    em->index = req->index;
    em->frame = part;
    owner_send(e, req->msg.from, em);
}

void http_read__on_query(struct engine *e, struct emsg *req)
{
    struct presence_view truth, v;
    const struct privacy_public *pub;
    const struct store_privacy *set;
    struct buf b = {0};
    int cls = PRIVACY_CLASS_SELF;
    bool degraded = false;

    if (e->w->srv->cfg.test_silent_owners)
        return; /* owners that cannot answer, as a node could be (test-silent-owners) */

    if (!req->unfiltered) { /* the admin API reads the truth */
        if (!engine__privacy_ready(e, req, req->uid, req->viewer))
            return;
        cls = engine__privacy_class(e, req->uid, req->viewer, NULL, NULL);
    }
    if (!cu__ready(e, req, req->uid))
        return; /* the global view first (many nodes) */
    cu__truth(e, req->uid, &truth, &degraded);
    set = engine__privacy_settings(e, req->uid, &pub);
    privacy_view(&truth, set, pub, (enum privacy_class)cls, &v);
    if (req->arg == QUERY_LASTSEEN) {
        http_read__answer(e, req, encode_lastseen(e, &v, cls == PRIVACY_CLASS_SELF));
        return;
    }
    privacy_encode(&v, (enum privacy_class)cls, wall_offset(e), &b);
    if (degraded && b.len && b.data[b.len - 1] == '}') { /* an estimate (docs/cluster.md) */
        b.len--;
        buf_append_str(&b, ",\"degraded\":true}");
    }
    http_read__answer(e, req, buf_payload(&b));
}

void http_read__query_set_id(struct query *q, size_t i, const char *id)
{
    copy_id(q->ids[i], id);
}

void http_read__query_set_merge(struct query *q, http_read_merge_fn *fn, size_t arg)
{
    q->merge = fn;
    q->merge_arg = arg;
}

struct query *http_read__query_new(struct conn *c, int kind, size_t n)
{
    struct query *q = xcalloc(1, sizeof(*q));

    q->conn = c;
    q->kind = (enum query_kind)kind;
    struct net_ctx *nc = ((struct httpd_conn *)c->proto)->nc;

    list_insert_tail(&((struct engine *)nc->app)->queries, &q->link);
    q->n = q->remaining = n;
    q->parts = xcalloc(n, sizeof(*q->parts));
    q->ids = xcalloc(n, sizeof(*q->ids));
    wheel_timer_init(&q->timer, query_timeout);
    if (!query_is_write(q->kind))
        loop_timer_start(nc->worker->loop, &q->timer, QUERY_TIMEOUT_MS);
    httpd_defer(c, query_abort, q);
    return q;
}

/* auth = jwt: HTTP requests carry a bearer token (Authorization: Bearer,
 * or ?token= where headers cannot be set, e.g. EventSource). Answers 401
 * and returns false when it is missing or does not verify. */
static bool http_authorized(struct conn *c, const struct http_request *req, struct worker *w,
                            struct jwt_claims *cl)
{
    struct engine *e = engine_of(w);

    if (!client__auth_jwt(e) || http_read__claims(e, req, cl) > 0)
        return true;
    httpd_error(c, 401, "unauthorized", jwt_strerror(-1));
    return false;
}

/* Reads the ?user= parameters (1..QUERY_MAX_USERS valid ids) into ids.
 * Returns how many, or 0 after answering 400. */
static size_t read_users(struct conn *c, const struct http_request *req,
                         char ids[QUERY_MAX_USERS][PRESENCE_ID_MAX + 1])
{
    size_t pos = 0, n = 0;

    for (;;) {
        char id[PRESENCE_ID_MAX + 1];
        ssize_t r = http_query_next(req->query, req->query_len, "user", &pos, id, sizeof(id));
        if (r < 0)
            break; /* no more (an undecodable one ends the list) */
        if (strlen(id) != (size_t)r || !presence_id_valid(id)) { /* %00 included */
            httpd_error(c, 400, "bad_user", "user must be 1-128 of A-Z a-z 0-9 - _ . ~ : @");
            return 0;
        }
        if (n == QUERY_MAX_USERS) {
            httpd_error(c, 400, "too_many_users", "at most 100 users per request");
            return 0;
        }
        memcpy(ids[n++], id, sizeof(id));
    }
    if (n == 0)
        httpd_error(c, 400, "bad_user", "give one or more ?user= parameters");
    return n;
}

bool http_read__rate_take(struct engine *e, double *tokens, uint64_t *last, const char *uid,
                          const struct conn *conn, size_t n, const char **why)
{
    const struct config *cfg = &e->w->srv->cfg;
    struct ratelimit *observers = e->env->observer_rate;
    uint64_t now = loop_now(e->w->loop);
    char key[RATELIMIT_KEY_MAX];

    if (*last == 0)
        *tokens = cfg->query_burst;
    else
        *tokens = MIN((double)cfg->query_burst,
                      *tokens + (double)(now - *last) * cfg->query_rate / 1000.0);
    *last = now ? now : 1;
    /* Check the connection's bucket, check-and-take the observer's, then
     * take the connection's: a refusal by either charges neither. */
    if (*tokens < (double)n) {
        *why = "too many user ids queried; slow down (query-rate)";
        return false;
    }
    if (observers && n > 0) {
        char peer[CONN_PEER_MAX];

        ratelimit_observer_key(key, uid, conn_peer(conn, peer), client__auth_jwt(e));
        if (!ratelimit_take(observers, key, (uint32_t)MIN(n, (size_t)UINT32_MAX), now)) {
            *why = "too many user ids queried by this observer over all its connections; "
                   "slow down (observer-query-rate)";
            return false;
        }
    }
    *tokens -= (double)n;
    return true;
}

/* Who reads: the bearer token's user under auth = jwt, else ?as= (absent:
 * anonymous). Returns false after answering 400 for a bad ?as=. */
static bool http_viewer(struct conn *c, const struct http_request *req, struct engine *e,
                        const struct jwt_claims *cl, char out[PRESENCE_ID_MAX + 1])
{
    out[0] = '\0';
    if (client__auth_jwt(e)) {
        copy_id(out, cl->sub);
        return true;
    }
    if (!http_read__query_has(req, "as"))
        return true;
    if (http_read__query_id(req, "as", out))
        return true;
    httpd_error(c, 400, "bad_user", "as must be 1-128 of A-Z a-z 0-9 - _ . ~ : @");
    return false;
}

static bool http_rate(struct conn *c, struct engine *e, const char *viewer, size_t n)
{
    struct httpd_conn *h = c->proto;
    const char *why;

    if (http_read__rate_take(e, &h->qtokens, &h->qlast, viewer, c, n, &why))
        return true;
    httpd_error(c, 429, "rate_limited", why);
    return false;
}

void http_read__read(struct conn *c, const struct http_request *req, struct engine *e, int kind,
                     bool unfiltered)
{
    char ids[QUERY_MAX_USERS][PRESENCE_ID_MAX + 1], viewer[PRESENCE_ID_MAX + 1] = "";
    struct query *q;
    struct jwt_claims cl;
    size_t n;

    if (!unfiltered &&
        (!http_authorized(c, req, e->w, &cl) || !http_viewer(c, req, e, &cl, viewer)))
        return;
    if ((n = read_users(c, req, ids)) == 0 || (!unfiltered && !http_rate(c, e, viewer, n)))
        return;
    q = http_read__query_new(c, kind, n);
    for (size_t i = 0; i < n; i++) {
        struct emsg *em = emsg_new(OP_QUERY, 0);
        copy_id(q->ids[i], ids[i]);
        emsg_set_id(&em->uid, ids[i]);
        emsg_set_id(&em->viewer, viewer);
        em->unfiltered = unfiltered;
        em->arg = (int8_t)kind;
        em->query = (uint64_t)(uintptr_t)q;
        em->index = (uint32_t)i;
        owner_send(e, owner_of_user(e, ids[i]), em);
    }
}

void engine_http_presence(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    http_read__read(c, req, nc->app, QUERY_PRESENCE, false);
}

void engine_http_lastseen(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    http_read__read(c, req, nc->app, QUERY_LASTSEEN, false);
}

/* POST /v1/heartbeat {"user":"alice","sessionId":"…","device":"web","leave":false} */
void engine_http_heartbeat(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    struct worker *w = nc->worker;
    struct engine *e = engine_of(w);
    /* An empty body stays a bad_request (no body at all), as before. */
    int bad = req->body_len ? json_check(req->body, req->body_len) : 0;
    cJSON *root =
        bad < 0 || !req->body_len ? NULL : cJSON_ParseWithLength(req->body, req->body_len);
    const cJSON *user = cJSON_GetObjectItemCaseSensitive(root, "user");
    const cJSON *sid = cJSON_GetObjectItemCaseSensitive(root, "sessionId");
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(root, "device");
    const cJSON *leave = cJSON_GetObjectItemCaseSensitive(root, "leave");
    int d = PRESENCE_DEVICE_WEB;
    struct jwt_claims cl;
    struct emsg *em;

    if (!http_authorized(c, req, w, &cl)) {
        cJSON_Delete(root);
        return;
    }
    if (bad < 0) {
        httpd_error(c, 400, "bad_json", json_strerror(bad));
        return;
    }
    if (cJSON_GetObjectItemCaseSensitive(root, "status")) {
        httpd_error(c, 400, "bad_request",
                    "an HTTP session has no status: \"status\" is not a field of a heartbeat");
        cJSON_Delete(root);
        return;
    }
    if (client__auth_jwt(e) && cJSON_IsString(user) && strcmp(user->valuestring, cl.sub) != 0) {
        httpd_error(c, 403, "forbidden", "\"user\" must be the token's subject");
        cJSON_Delete(root);
        return;
    }
    if (client__auth_jwt(e) && !user) { /* the token names the user */
        cJSON_AddStringToObject(root, "user", cl.sub);
        user = cJSON_GetObjectItemCaseSensitive(root, "user");
    }
    if (!cJSON_IsObject(root) || !cJSON_IsString(user) || !presence_id_valid(user->valuestring) ||
        (sid && (!cJSON_IsString(sid) || !presence_id_valid(sid->valuestring))) ||
        (dev && (!cJSON_IsString(dev) || (d = presence_device_parse(dev->valuestring)) < 0)) ||
        (leave && !cJSON_IsBool(leave))) {
        httpd_error(c, 400, "bad_request",
                    "body must be {\"user\":id, \"sessionId\"?:id, \"device\"?:name, "
                    "\"leave\"?:bool}");
        cJSON_Delete(root);
        return;
    }
    em = emsg_new(OP_HTTP_BEAT, 0);
    emsg_set_id(&em->uid, user->valuestring);
    if (sid)
        emsg_set_id(&em->sid, sid->valuestring);
    em->device = (uint8_t)d;
    em->arg = cJSON_IsTrue(leave);
    em->query = (uint64_t)(uintptr_t)http_read__query_new(c, QUERY_BEAT, 1);
    owner_send(e, owner_of_user(e, em->uid), em);
    cJSON_Delete(root);
}

/* ---- event streams: GET /v1/presence/events?user=a&user=b ----
 *
 * A read-only watcher: the stream starts with one "presence" event per
 * user (the current state), then one per transition, each with the user's
 * version as its id. Presence is state, not a log, so a reconnect (with
 * or without Last-Event-ID) gets the current state again; versions let the
 * client drop what it already has. */

static void sse_closed(struct sse_stream *s, void *data)
{
    struct client *c = data;
    struct quota *q = c->e->env->observer_quota;

    (void)s;
    if (q && client_uid(c)[0])
        quota_give(q, c->x->okey, QUOTA_STREAMS, 1);
    engine__expiry_disarm(c);
    hmap_remove(&c->e->clients, &c->node);
    client__free(c);
}

/* auth = jwt: a stream ends when its token does, as a WebSocket does
 * (client__expire() sends an "error" event token_expired and closes). */
static void sse_expires(struct client *c, const struct jwt_claims *cl)
{
    if (!client__auth_jwt(c->e))
        return;
    c->authed = 1;
    c->deadline = cl->exp;
    engine__expiry_arm(c);
}

/* Counts a stream and nwatch watch links for the observer key (NULL: an
 * anonymous reader, not counted): both or neither; false after answering
 * 429 too_many_streams / too_many_watched. */
static bool stream_admit(struct conn *conn, struct engine *e, const char *key, size_t nwatch)
{
    const struct config *cfg = &e->w->srv->cfg;
    struct quota *q = e->env->observer_quota;

    if (!q || !key)
        return true;
    if (!quota_take(q, key, QUOTA_STREAMS, 1, (uint32_t)cfg->max_streams_per_user)) {
        httpd_error(conn, 429, "too_many_streams",
                    "this user holds max-streams-per-user event streams; close one first");
        return false;
    }
    if (!quota_take(q, key, QUOTA_WATCHES, (uint32_t)nwatch, (uint32_t)cfg->max_watch_per_user)) {
        quota_give(q, key, QUOTA_STREAMS, 1);
        httpd_error(conn, 429, "too_many_watched",
                    "this user's watch lists are at max-watch-per-user; unwatch first");
        return false;
    }
    return true;
}

struct client *http_read__sse_client(struct conn *conn, struct engine *e, const char *viewer,
                                     size_t nwatch)
{
    char key[RATELIMIT_KEY_MAX], peer[CONN_PEER_MAX];
    struct client *c;

    ratelimit_observer_key(key, viewer, conn_peer(conn, peer), client__auth_jwt(e));
    if (!stream_admit(conn, e, viewer[0] ? key : NULL, nwatch))
        return NULL;
    c = pool_alloc(sizeof(*c));
    c->e = e;
    client_set_uid(c, viewer); /* the viewer; an event stream has no session */
    if (viewer[0])
        client_x(c)->okey = xstrdup(key);
    hmap_insert(&c->e->clients, &c->node, hash_bytes(&conn->id, sizeof(conn->id)));
    client_x(c)->sse = sse_start(conn, c->e->nc, sse_closed, c);
    return c;
}

/* Moves the distinct ids of ids[0..n) to its front; returns how many. */
static size_t distinct_ids(char ids[][PRESENCE_ID_MAX + 1], size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < k && strcmp(ids[j], ids[i]) != 0)
            j++;
        if (j == k && k != i)
            memcpy(ids[k], ids[i], sizeof(ids[i]));
        k += j == k;
    }
    return k;
}

void engine_sse_presence(struct conn *conn, const struct http_request *req, struct net_ctx *nc)
{
    struct worker *w = nc->worker;
    char ids[QUERY_MAX_USERS][PRESENCE_ID_MAX + 1];
    struct client *c;
    size_t n;
    struct jwt_claims cl;

    char viewer[PRESENCE_ID_MAX + 1];

    if (!http_authorized(conn, req, w, &cl) || !http_viewer(conn, req, engine_of(w), &cl, viewer) ||
        (n = read_users(conn, req, ids)) == 0 || !http_rate(conn, engine_of(w), viewer, n))
        return;
    n = distinct_ids(ids, n);
    if (!(c = http_read__sse_client(conn, engine_of(w), viewer, n)))
        return;
    sse_expires(c, &cl);
    for (size_t i = 0; i < n; i++)
        watch__add(c, ids[i]);
}

/* The rooms claim of the bearer token (auth = jwt), else with
 * room-token-secret a ?room_token= for the reader (holder "http" without
 * one); 403 otherwise. */
static bool http_room_allowed(struct conn *c, const struct http_request *req, struct engine *e,
                              const struct jwt_claims *cl, const char *room, const char *viewer)
{
    char tok[16 + 2 * 64 + 1];
    size_t pos = 0;
    bool claims = client__auth_jwt(e) && cl->has_rooms;

    if (claims && jwt_claims_allow_room(cl, room))
        return true;
    if (!e->w->srv->cfg.room_token_secret[0] && !claims)
        return true;
    if (e->w->srv->cfg.room_token_secret[0] &&
        http_query_next(req->query, req->query_len, "room_token", &pos, tok, sizeof(tok)) > 0 &&
        engine__room_token_ok(e, viewer[0] ? viewer : "http", room, tok))
        return true;
    httpd_error(c, 403, "forbidden", "this room needs a rooms claim or a valid room_token");
    return false;
}

/* An HTTP room read waiting for the blockers of its reader. */
struct room_read {
    struct engine *e;
    struct query *q;
};

static void room_info_ask(struct engine *e, struct query *q, const char *const *blockers, size_t n)
{
    struct emsg *em = emsg_new(OP_RINFO, 0);

    em->arg = q->done != NULL; /* an adapter's read: with the subscriptions */
    emsg_set_id(&em->room, q->ids[0]);
    em->query = (uint64_t)(uintptr_t)q;
    if (n) {
        em->ids = xcalloc(n, sizeof(*em->ids));
        for (em->nids = 0; em->nids < n; em->nids++)
            em->ids[em->nids] = xstrdup(blockers[em->nids]);
    }
    owner_send(e, owner_of_room(e, q->ids[0]), em);
}

/* The reader's blockers are known: the room's owner answers without them.
 * Unreadable: 503, as the room cannot be filtered (fail closed). */
static void room_blockers_read(void *ctx, int status, const struct store_result *r)
{
    struct room_read *rr = ctx;
    struct engine *e = rr->e;
    struct query *q = rr->q;

    free(rr);
    if (e->closing)
        return; /* the query is freed with the engine */
    if (status == 0) {
        room_info_ask(e, q, r->ids, r->nids);
        return;
    }
    if (q->conn)
        httpd_error(q->conn, 503, "store_unavailable", "the settings could not be read; try again");
    q->conn = NULL;
    query_free(q);
}

/*
 * GET /v1/rooms/{id}: the room as its reader sees it. A reader with an
 * identity (JWT sub, or ?as= without auth) is read like a WebSocket
 * member would be: the users that block it are left out. The blockers are
 * read for every such reader, so that a reader blocked by nobody answers
 * as late as one with blockers.
 */
static void room_read(struct conn *c, struct engine *e, const char *room, const char *viewer)
{
    struct query *q = http_read__query_new(c, QUERY_ROOM, 1);
    struct room_read *rr;
    struct store_result none;

    copy_id(q->ids[0], room);
    if (!viewer[0]) {
        room_info_ask(e, q, NULL, 0);
        return;
    }
    rr = xcalloc(1, sizeof(*rr));
    rr->e = e;
    rr->q = q;
    if (store_list_blockers(e->env->store, e->inbox, viewer, room_blockers_read, rr) < 0) {
        memset(&none, 0, sizeof(none));
        room_blockers_read(rr, -EINVAL, &none);
    }
}

void engine_read_room(struct conn *c, struct engine *e, const char *room,
                      engine_room_read_done *done, const char *arg)
{
    struct query *q = http_read__query_new(c, QUERY_ROOM, 1);

    q->done = done;
    q->done_arg = xstrdup(arg ? arg : "");
    copy_id(q->ids[0], room);
    room_info_ask(e, q, NULL, 0);
}

void engine_list_rooms(struct conn *c, struct engine *e, const char *ns,
                       engine_room_read_done *done, const char *arg)
{
    unsigned n = e->w->srv->nworkers;
    struct query *q = http_read__query_new(c, QUERY_ROOM_LIST, n);

    q->done = done;
    q->done_arg = xstrdup(arg ? arg : "");
    for (unsigned i = 0; i < n; i++) {
        struct emsg *em = emsg_new(OP_RLIST, 0);
        em->text = xstrdup(ns); /* the namespace listed */
        em->query = (uint64_t)(uintptr_t)q;
        em->index = i;
        owner_send(e, i, em);
    }
}

/* GET /v1/rooms/{id} and GET /v1/rooms/{id}/events */
void engine_http_room(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    static const char prefix[] = "/v1/rooms/", suffix[] = "/events";
    struct worker *w = nc->worker;
    struct engine *e = engine_of(w);
    char room[PRESENCE_ID_MAX + 1], last[64], viewer[PRESENCE_ID_MAX + 1];
    struct jwt_claims claims;
    size_t n = req->path_len - (sizeof(prefix) - 1);
    bool events = n > sizeof(suffix) - 1 && memcmp(req->path + req->path_len - (sizeof(suffix) - 1),
                                                   suffix, sizeof(suffix) - 1) == 0;

    if (!http_authorized(c, req, w, &claims) || !http_viewer(c, req, e, &claims, viewer))
        return;
    if (events)
        n -= sizeof(suffix) - 1;
    if (n == 0 || n > PRESENCE_ID_MAX) {
        httpd_error(c, 404, "not_found", "no such resource");
        return;
    }
    memcpy(room, req->path + sizeof(prefix) - 1, n);
    room[n] = '\0';
    if (!room_id_valid(room)) {
        httpd_error(c, 400, "bad_room", "room must be 1-128 of A-Z a-z 0-9 - _ . ~ : @");
        return;
    }
    if (!http_room_allowed(c, req, e, &claims, room, viewer) || !http_rate(c, e, viewer, 1))
        return; /* a room read or stream counts as one query */
    if (events) {
        bool has = sse_last_event_id_text(req, last, sizeof(last));
        struct client *sc = http_read__sse_client(c, e, viewer, 0); /* viewer: the reader */
        if (!sc)
            return;
        sse_expires(sc, &claims);
        engine__room_stream(sc, room, has ? last : NULL);
        return;
    }
    room_read(c, e, room, viewer);
}
