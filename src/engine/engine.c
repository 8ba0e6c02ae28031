/* SPDX-License-Identifier: MIT */
/*
 * engine.c - the presence engine wired onto the workers and the native
 * protocol (engine.h has the partitioning model).
 *
 * Three kinds of state per worker:
 *   - clients: the sockets this worker accepted (struct client, by
 *     connection id), each with its session (if it named a user) and the
 *     users it watches;
 *   - watches: per watched user, the local watchers and the last
 *     presence frame seen (struct watch), so a new local watcher gets its
 *     snapshot at once;
 *   - as the OWNER of some users: their presence core (presence.h) and,
 *     per user, the mask of workers that watch them (struct sub).
 * Every interaction between a client's worker and a user's owner is one
 * struct emsg on the bus, one of the ops below; per-sender FIFO order of
 * the bus keeps a client's messages, and an owner's events, in order.
 *
 * Heartbeats are throttled on the client's worker already: one faster
 * than heartbeat-min-ms after the last forwarded one is accepted and
 * dropped there, so a heartbeat storm costs one read and a comparison.
 */
#include "engine.h"
#include "engine_internal.h"

#include <errno.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"
#include "hmap.h"
#include "http.h"
#include "httpd.h"
#include "json.h"
#include "list.h"
#include "log.h"
#include "presence.h"
#include "proto.h"
#include "ratelimit.h"
#include "sse.h"
#include "util.h"
#include "worker.h"
#include "ws.h"

#define SID_BYTES 16 /* random bytes in a server-made session id */

char engine__no_id[1]; /* "": what unset heap ids point to */

static char *heap_id(const char *v, size_t n)
{
    return n ? pool_strndup(v, n) : engine__no_id;
}

void engine__client_set_ids(struct client *c, const char *uid, const char *sid)
{
    char *old_uid = c->ids_heap ? c->ids.heap.uid : NULL;
    char *old_sid = c->ids_heap ? c->ids.heap.sid : NULL;
    size_t nu = uid ? strlen(uid) : 0, ns = sid ? strlen(sid) : 0;
    char tmp[CLIENT_IDS_INLINE];

    if (nu + ns + 2 <= sizeof(tmp)) { /* via tmp: either may be inline now */
        memcpy(tmp, uid ? uid : "", nu + 1);
        memcpy(tmp + nu + 1, sid ? sid : "", ns + 1);
        memcpy(c->ids.in, tmp, nu + ns + 2);
        c->sid_off = (nu + 1) & 63u;
        c->ids_heap = false;
    } else { /* both copied before ids.heap overlays the inline ones */
        char *u = heap_id(uid, nu), *s = heap_id(sid, ns);
        c->ids.heap.uid = u;
        c->ids.heap.sid = s;
        c->ids_heap = true;
    }
    if (old_uid && old_uid != engine__no_id)
        pool_free(old_uid);
    if (old_sid && old_sid != engine__no_id)
        pool_free(old_sid);
}

#define EPHEMERAL_HOLD_MS 2000 /* ephemerals dropped after asking to hide */

/* ---- lookups ---- */

static struct watch *find_watch(struct engine *e, const char *uid)
{
    return ENGINE_FIND(struct watch, &e->watches, uid, uid);
}

/* ---- owner side: the presence core's callbacks ---- */

static void on_change(void *ctx, const struct presence_view *old, const struct presence_view *cur)
{
    engine__privacy_on_change(ctx, old, cur);
}

static void on_end(void *ctx, const struct presence_session_info *s, enum presence_end_reason why)
{
    struct engine *e = ctx;
    uint64_t conn_id = (uint64_t)(uintptr_t)s->conn_ref;
    struct emsg *em;

    engine__rooms_session_ended(e, s->sid, s->user); /* its rooms see it leave */
    if (why == PRESENCE_END_GRACE || !s->attached || conn_id == 0)
        return; /* its socket is already gone, or it is an HTTP session */
    em = emsg_new(OP_ENDED, conn_id);
    em->arg = (int8_t)why;
    if (why == PRESENCE_END_KICKED && e->kick_reason)
        em->text = xstrdup(e->kick_reason);
    emsg_set_id(&em->sid, s->sid);
    send_to(e, worker_of_conn(conn_id), em);
}

/* ---- owner side: ops from client workers ---- */

void engine__reply_error(struct engine *e, uint64_t conn_id, const char *code, const char *message,
                         const char *ref)
{
    struct emsg *em = emsg_new(OP_REPLY, conn_id);
    struct buf b = {0};

    proto_error_json(&b, code, message, ref);
    em->frame = frame_text(&b);
    send_to(e, worker_of_conn(conn_id), em);
}

static void reply_error(struct engine *e, const struct emsg *req, int err)
{
    engine__reply_error(e, req->conn_id, "invalid", presence_strerror(err), req->ref);
}

/* Writes a fresh random session id into out and returns out. */
static char *new_sid(char out[PRESENCE_ID_MAX + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[SID_BYTES];

    if (RAND_bytes(r, sizeof(r)) != 1)
        fatalx("engine", "no randomness for session ids");
    for (size_t i = 0; i < sizeof(r); i++) {
        out[2 * i] = hex[r[i] >> 4];
        out[2 * i + 1] = hex[r[i] & 15];
    }
    out[2 * sizeof(r)] = '\0';
    return out;
}

static void op_start(struct engine *e, struct emsg *req)
{
    uint64_t now = loop_now(e->w->loop);
    void *ref = (void *)(uintptr_t)req->conn_id;
    void *old = NULL;
    struct emsg *res = emsg_new(OP_STARTED, req->conn_id);
    char sid[PRESENCE_ID_MAX + 1];
    int r = -1;

    if (req->arg && presence_session_resume(e->pres, req->uid, req->sid, ref, &old, now) == 0) {
        res->arg = 1;
        if (old) { /* the same session on another socket: that one goes */
            struct emsg *kick = emsg_new(OP_KICK, (uint64_t)(uintptr_t)old);
            send_to(e, worker_of_conn(kick->conn_id), kick);
        }
        r = 0;
    }
    if (r != 0) {
        emsg_set_id(&req->sid, new_sid(sid));
        r = presence_session_start(e->pres, req->sid, req->uid, (enum presence_device)req->device,
                                   ref, now);
    }
    res->err = r;
    emsg_set_id(&res->sid, req->sid);
    send_to(e, worker_of_conn(req->conn_id), res);
    if (r == 0) { /* then its settings, once known */
        struct emsg *hello = emsg_new(OP_PRIV_HELLO, req->conn_id);
        emsg_set_id(&hello->uid, req->uid);
        engine__dispatch(e, hello);
    }
}

/* Applies a session op; errors go back to the client. */
static void op_session(struct engine *e, struct emsg *req)
{
    uint64_t now = loop_now(e->w->loop);
    uint64_t exp = req->expires_in ? now + req->expires_in : 0;
    int r = 0;

    switch (req->op) {
    case OP_HEARTBEAT:
        r = presence_heartbeat(e->pres, req->sid, now);
        break;
    case OP_ACTIVITY:
        r = presence_activity(e->pres, req->sid, req->arg != 0, now);
        break;
    case OP_STATUS:
        r = presence_set_status(e->pres, req->sid, (enum presence_status)req->arg, exp, now);
        break;
    case OP_CUSTOM:
        r = presence_set_custom(e->pres, req->sid, req->text, req->emoji, exp, now);
        break;
    case OP_LEAVE:
        r = presence_session_end(e->pres, req->sid, now);
        break;
    case OP_CLOSED:
        presence_socket_closed(e->pres, req->sid, (void *)(uintptr_t)req->conn_id, now);
        return;
    }
    if (r < 0 && req->op != OP_HEARTBEAT)
        reply_error(e, req, r);
    else if (r == 0 && req->op != OP_HEARTBEAT && req->op != OP_LEAVE)
        reply_ack(e, req);
}

/* ---- client side ---- */

static void send_welcome(struct client *c, bool resumed)
{
    const struct config *cfg = &c->e->w->srv->cfg;
    struct buf b = {0};

    buf_printf(&b,
               "{\"type\":\"welcome\",\"protocol\":%d,\"server\":\"presenced/0.1.0\","
               "\"connectionId\":\"%llx\"",
               PROTO_VERSION, (unsigned long long)client_conn_id(c));
    if (client_uid(c)[0]) {
        buf_append_str(&b, ",\"user\":");
        json_append_cstr(&b, client_uid(c));
        buf_append_str(&b, ",\"sessionId\":");
        json_append_cstr(&b, client_sid(c));
        buf_printf(&b, ",\"resumed\":%s", resumed ? "true" : "false");
    }
    buf_printf(&b,
               ",\"heartbeatMs\":%lld,\"sessionTtlMs\":%lld,\"reconnectGraceMs\":%lld,"
               "\"idleMs\":%lld,\"statusPolicy\":\"%s\",\"limits\":{\"maxMessageBytes\":%lld,"
               "\"maxWatch\":%d,\"maxRoomMetaBytes\":1024,\"maxEphemeralBytes\":1024,"
               "\"ephemeralPerSecond\":%d}}",
               (long long)cfg->heartbeat_interval_ms, (long long)cfg->session_ttl_ms,
               (long long)cfg->reconnect_grace_ms, (long long)cfg->idle_ms, cfg->status_policy,
               (long long)cfg->ws_max_message_bytes, cfg->max_watch, cfg->ephemeral_rate);
    proto_send_buf(c->ws, &b);
}

static const char *end_reason_name(int why)
{
    switch (why) {
    case PRESENCE_END_LEAVE:
        return "leave";
    case PRESENCE_END_TTL:
        return "ttl";
    case PRESENCE_END_KICKED:
        return "kicked";
    default:
        return "grace";
    }
}

static void on_started(struct engine *e, struct emsg *res)
{
    struct client *c = find_client(e, res->conn_id);

    if (!c) { /* closed before the owner answered: let the session go */
        if (res->err == 0) {
            struct emsg *em = emsg_new(OP_CLOSED, res->conn_id);
            emsg_set_id(&em->sid, res->sid);
            send_to(e, res->msg.from, em);
        }
        return;
    }
    if (res->err < 0) {
        proto_send_error(c->ws, res->err == PRESENCE_E_TOO_MANY ? "too_many_sessions" : "invalid",
                         presence_strerror(res->err), NULL);
        ws_close(c->ws, 1008, "session refused");
        return;
    }
    client_set_sid(c, res->sid);
    c->started = true;
    c->last_beat = loop_now(e->w->loop);
    send_welcome(c, res->arg != 0);
}

static void on_ended(struct engine *e, struct emsg *em)
{
    struct client *c = find_client(e, em->conn_id);
    struct buf b = {0};

    if (!c || strcmp(client_sid(c), em->sid) != 0)
        return;
    c->started = false;
    buf_printf(&b, "{\"type\":\"session_ended\",\"reason\":\"%s\"", end_reason_name(em->arg));
    if (em->text) {
        buf_append_str(&b, ",\"message\":");
        json_append_cstr(&b, em->text);
    }
    buf_append_str(&b, "}");
    proto_send_buf(c->ws, &b);
    if (em->arg == PRESENCE_END_LEAVE)
        ws_close(c->ws, 1000, "left");
    else
        ws_close(c->ws, 4000, "session ended");
}

/* Sends frame f (the watch's current one for class cls) to one watcher,
 * as a WebSocket frame or an SSE event (formatted once per frame, shared
 * by all streams). */
static void client_send_frame(struct client *c, struct watch *wt, int cls)
{
    const char *json;
    size_t n;

    if (c->ws) {
        ws_send_payload(c->ws, wt->last[cls]);
        return;
    }
    if (!wt->last_sse[cls]) {
        frame_json(wt->last[cls], &json, &n);
        wt->last_sse[cls] = sse_format("presence", ++wt->sse_id, json, n);
    }
    sse_send_payload(c->x->sse, wt->last_sse[cls]);
}

static void set_last(struct watch *wt, int cls, struct payload *f)
{
    if (wt->last[cls] == f)
        return;
    payload_unref(wt->last[cls]);
    payload_unref(wt->last_sse[cls]);
    wt->last[cls] = payload_ref(f);
    wt->last_sse[cls] = NULL;
}

/* Delivers the view's current frame to its watchers: all of them when its
 * bytes differ from what they got last, else only those still waiting for
 * a snapshot. */
static void view_deliver(struct watch *wt, struct wview *v)
{
    struct payload *f = wt->last[v->cls];
    bool changed = !v->sent || v->sent->len != f->len || memcmp(v->sent->data, f->data, f->len);
    struct list *pos, *tmp;

    list_foreach_safe(pos, tmp, &v->links)
    {
        struct watch_link *l = container_of(pos, struct watch_link, link);

        if (changed || l->need_snapshot)
            client_send_frame(l->client, wt, v->cls);
        l->need_snapshot = false;
    }
    payload_unref(v->sent);
    v->sent = payload_ref(f);
}

static struct wview *find_view(struct watch *wt, const char *viewer)
{
    struct list *pos;

    list_foreach(pos, &wt->views)
    {
        struct wview *v = container_of(pos, struct wview, node);
        if (strcmp(v->viewer, viewer) == 0)
            return v;
    }
    return NULL;
}

/* OP_VIEW: the owner's class and frame for one viewer (a snapshot, or a
 * re-classification after a privacy change). */
static void on_view(struct engine *e, struct emsg *em)
{
    struct watch *wt = find_watch(e, em->uid);
    struct wview *v = wt ? find_view(wt, em->viewer) : NULL;

    if (!v)
        return; /* unwatched meanwhile */
    v->cls = em->arg;
    set_last(wt, v->cls, em->frame);
    view_deliver(wt, v);
}

/* OP_PRESENCE: a transition, one frame per class whose bytes changed. */
static void on_presence(struct engine *e, struct emsg *em)
{
    struct watch *wt = find_watch(e, em->uid);
    struct list *pos;

    if (!wt)
        return;
    for (int k = 0; k < PRIVACY_NCLASS; k++)
        if (em->frames[k])
            set_last(wt, k, em->frames[k]);
    list_foreach(pos, &wt->views)
    {
        struct wview *v = container_of(pos, struct wview, node);
        if (v->cls >= 0 && em->frames[v->cls])
            view_deliver(wt, v);
    }
}

static void op_query(struct engine *e, struct emsg *req);
static void op_http_beat(struct engine *e, struct emsg *req);
static void on_answer(struct engine *e, struct emsg *em);

void engine__dispatch(struct engine *e, struct emsg *em)
{
    struct client *c;

    switch (em->op) {
    case OP_START:
        op_start(e, em);
        break;
    case OP_STARTED:
        on_started(e, em);
        break;
    case OP_WATCH:
    case OP_UNWATCH:
        engine__op_watch(e, em, em->op == OP_WATCH);
        break;
    case OP_VIEW:
        on_view(e, em);
        break;
    case OP_PRESENCE:
        on_presence(e, em);
        break;
    case OP_PRIVACY:
        engine__op_privacy(e, em);
        break;
    case OP_PRIV_HELLO:
        engine__privacy_hello(e, em);
        break;
    case OP_ADMIN:
        engine__op_admin(e, em);
        break;
    case OP_ADMIN_ROOMS:
        engine__admin_rooms(e, em);
        break;
    case OP_PRIV_EVENT: /* the owner has handled this connection's privacy message */
        if ((c = find_client(e, em->conn_id)) != NULL && c->x) {
            c->x->ephemeral_hold_until = 0;
            client_x_trim(c);
        }
        break;
    case OP_ENDED:
        on_ended(e, em);
        break;
    case OP_REPLY:
        if ((c = find_client(e, em->conn_id)) != NULL)
            ws_send_payload(c->ws, em->frame);
        break;
    case OP_QUERY:
        op_query(e, em);
        break;
    case OP_HTTP_BEAT:
        op_http_beat(e, em);
        break;
    case OP_ANSWER:
        on_answer(e, em);
        break;
    case OP_RINFO: {
        struct buf b = {0};
        engine__room_info(e, em->room, em->ids, em->nids, &b);
        buf_append(&b, "\n", 1);
        engine__answer(e, em, buf_payload(&b));
        break;
    }
    case OP_KICK:
        if ((c = find_client(e, em->conn_id)) != NULL) {
            c->started = false; /* the session lives on elsewhere */
            ws_close(c->ws, 4001, "session resumed on another connection");
        }
        break;
    default:
        if (!engine__room_msg(e, em))
            op_session(e, em);
    }
    if (!em->parked)
        emsg_free(&em->msg);
}

static void on_msg(struct worker *w, struct bus_msg *m)
{
    engine__dispatch(engine_of(w), (struct emsg *)m);
}

/* ---- client messages ---- */

/* "expiresInMs": absent or null = none; else a positive integer. */
static bool parse_expiry(const cJSON *root, uint64_t *out)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, "expiresInMs");

    *out = 0;
    if (!x || cJSON_IsNull(x))
        return true;
    if (!cJSON_IsNumber(x) || x->valuedouble < 1 || x->valuedouble > 31536000000.0)
        return false;
    *out = (uint64_t)x->valuedouble;
    return true;
}

static bool msg_heartbeat(struct client *c, const cJSON *root, const char *ref)
{
    uint64_t now = loop_now(c->e->w->loop);

    (void)root;
    if (!need_session(c, ref))
        return false;
    /* Throttled here already: a storm never reaches the owner. */
    if (now - c->last_beat < (uint64_t)c->e->w->srv->cfg.heartbeat_min_ms)
        return true;
    c->last_beat = now;
    /* No answer is sent, and the TTL is seconds long: it may wait for
     * other traffic to the owner (or 25 ms) instead of waking it. */
    send_lazy(c->e, c->owner, session_msg(c, OP_HEARTBEAT, ref));
    return true;
}

static bool msg_activity(struct client *c, const cJSON *root, const char *ref)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "active");
    struct emsg *em;

    if (!need_session(c, ref))
        return false;
    if (!cJSON_IsBool(a)) {
        proto_send_error(c->ws, "invalid", "\"active\" must be true or false", ref);
        return false;
    }
    em = session_msg(c, OP_ACTIVITY, ref);
    em->arg = cJSON_IsTrue(a);
    send_to(c->e, c->owner, em);
    return true;
}

static bool msg_status(struct client *c, const cJSON *root, const char *ref)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "status");
    uint64_t exp;
    struct emsg *em;
    int st;

    if (!need_session(c, ref))
        return false;
    st = cJSON_IsString(s) ? presence_status_parse(s->valuestring) : PRESENCE_E_BAD_STATUS;
    if (st < 0 || st == PRESENCE_OFFLINE) {
        proto_send_error(c->ws, "invalid", "\"status\" must be online, away, busy or dnd", ref);
        return false;
    }
    if (!parse_expiry(root, &exp)) {
        proto_send_error(c->ws, "invalid", "\"expiresInMs\" must be a positive integer", ref);
        return false;
    }
    em = session_msg(c, OP_STATUS, ref);
    em->arg = (int8_t)st;
    em->expires_in = exp;
    send_to(c->e, c->owner, em);
    return true;
}

static const char *opt_string(const cJSON *root, const char *key, bool *ok)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, key);

    if (!x || cJSON_IsNull(x))
        return "";
    if (!cJSON_IsString(x))
        *ok = false;
    return cJSON_IsString(x) ? x->valuestring : "";
}

static bool msg_custom(struct client *c, const cJSON *root, const char *ref)
{
    bool ok = true;
    const char *text = opt_string(root, "text", &ok);
    const char *emoji = opt_string(root, "emoji", &ok);
    uint64_t exp;
    struct emsg *em;
    int r;

    if (!need_session(c, ref))
        return false;
    if (!ok || !parse_expiry(root, &exp)) {
        proto_send_error(c->ws, "invalid",
                         "\"text\" and \"emoji\" must be strings, \"expiresInMs\" a positive "
                         "integer",
                         ref);
        return false;
    }
    if ((r = presence_custom_check(text, emoji)) < 0) {
        proto_send_error(c->ws, "invalid", presence_strerror(r), ref);
        return false;
    }
    em = session_msg(c, OP_CUSTOM, ref);
    em->text = xstrdup(text);
    em->emoji = xstrdup(emoji);
    em->expires_in = exp;
    send_to(c->e, c->owner, em);
    return true;
}

static bool msg_leave(struct client *c, const cJSON *root, const char *ref)
{
    (void)root;
    if (!need_session(c, ref))
        return false;
    send_to(c->e, c->owner, session_msg(c, OP_LEAVE, ref));
    return true;
}

/* {"type":"privacy","online":"contacts","lastSeen":"nobody","invisible":true}:
 * any of the three; acknowledged once stored (engine_privacy.c). */
static bool msg_privacy(struct client *c, const cJSON *root, const char *ref)
{
    struct store_privacy p = {STORE_VIS_EVERYONE, STORE_VIS_EVERYONE, false};
    struct emsg *em;
    uint8_t mask;

    if (!need_session(c, ref))
        return false;
    if (privacy_parse_update(root, &p, &mask) < 0) {
        proto_send_error(c->ws, "bad_request",
                         "online and lastSeen must be everyone, contacts or nobody; invisible "
                         "true or false",
                         ref);
        return false;
    }
    em = session_msg(c, OP_PRIVACY, ref);
    em->priv = p;
    em->priv_mask = mask;
    if (p.invisible || ((mask & PRIVACY_FIELD_ONLINE) && p.online != STORE_VIS_EVERYONE))
        /* Ephemerals go straight to the rooms, this message through the
         * user's owner: hold them back until the rooms have heard. */
        client_x(c)->ephemeral_hold_until = loop_now(c->e->w->loop) + EPHEMERAL_HOLD_MS;
    send_to(c->e, c->owner, em);
    return true;
}

/* ---- watch lists ---- */

static void watch_request(struct engine *e, const char *uid, const char *viewer, enum engine_op op)
{
    struct emsg *em = emsg_new(op, 0);

    emsg_set_id(&em->uid, uid);
    emsg_set_id(&em->viewer, viewer);
    send_to(e, owner_of(e, uid), em);
}

static struct watch_link *find_link(struct client *c, const char *uid, size_t *idx)
{
    for (size_t i = 0; c->x && i < c->x->nlinks; i++) {
        if (strcmp(c->x->links[i]->watch->uid, uid) == 0) {
            *idx = i;
            return c->x->links[i];
        }
    }
    return NULL;
}

/* The watch of uid and, in it, the view of c's user (both made, and the
 * owner asked, when new). */
static struct wview *view_get(struct client *c, const char *uid, struct watch **out)
{
    struct engine *e = c->e;
    struct watch *wt = find_watch(e, uid);
    struct wview *v;
    size_t n;

    if (!wt) {
        wt = xcalloc(1, sizeof(*wt));
        copy_id(wt->uid, uid);
        list_init(&wt->views);
        hmap_insert(&e->watches, &wt->node, str_hash(wt->uid));
    }
    *out = wt;
    if ((v = find_view(wt, client_uid(c))) != NULL)
        return v;
    n = strlen(client_uid(c));
    v = xcalloc(1, sizeof(*v) + n + 1);
    memcpy(v->viewer, client_uid(c), n + 1);
    v->cls = -1;
    list_init(&v->links);
    list_insert_tail(&wt->views, &v->node);
    watch_request(e, uid, client_uid(c), OP_WATCH);
    return v;
}

static void watch_add(struct client *c, const char *uid)
{
    struct watch *wt;
    struct wview *v = view_get(c, uid, &wt);
    struct watch_link *l = xcalloc(1, sizeof(*l));
    struct client_x *x = client_x(c);

    l->view = v;
    l->watch = wt;
    l->client = c;
    l->need_snapshot = v->cls < 0;
    list_insert_tail(&v->links, &l->link);
    if (x->nlinks == x->caplinks) {
        x->caplinks = x->caplinks ? x->caplinks * 2 : 8;
        x->links = pool_realloc(x->links, x->caplinks * sizeof(*x->links));
    }
    x->links[x->nlinks++] = l;
    if (v->cls >= 0)
        client_send_frame(c, wt, v->cls); /* snapshot from the local copy */
}

static void watch_free(struct engine *e, struct watch *wt)
{
    hmap_remove(&e->watches, &wt->node);
    for (int k = 0; k < PRIVACY_NCLASS; k++) {
        payload_unref(wt->last[k]);
        payload_unref(wt->last_sse[k]);
    }
    free(wt);
}

static void watch_remove(struct client *c, size_t idx)
{
    struct client_x *x = c->x;
    struct watch_link *l = x->links[idx];
    struct wview *v = l->view;
    struct watch *wt = l->watch;

    x->links[idx] = x->links[--x->nlinks];
    list_del(&l->link);
    free(l);
    if (!list_empty(&v->links))
        return;
    watch_request(c->e, wt->uid, v->viewer, OP_UNWATCH);
    list_del(&v->node);
    payload_unref(v->sent);
    free(v);
    if (list_empty(&wt->views))
        watch_free(c->e, wt);
}

/* Drops a closing client's watch links and room links. */
static void client_drop_links(struct client *c)
{
    while (c->x && c->x->nlinks > 0)
        watch_remove(c, c->x->nlinks - 1);
    engine__rooms_client_closed(c);
}

/* Frees a client that is out of e->clients (or never was in it), with
 * its watch links, room links, rare parts and ids. */
static void client_free(struct client *c)
{
    client_drop_links(c);
    if (c->x) {
        pool_free(c->x->links);
        free(c->x->room_claims);
        pool_free(c->x);
    }
    client_free_ids(c);
    pool_free(c);
}

/* Validates the "users" array: 1..max ids, each valid. */
static const cJSON *users_arg(struct client *c, const cJSON *root, const char *ref)
{
    const cJSON *users = cJSON_GetObjectItemCaseSensitive(root, "users");
    const cJSON *u;

    if (!cJSON_IsArray(users) || cJSON_GetArraySize(users) == 0) {
        proto_send_error(c->ws, "invalid", "\"users\" must be a non-empty array of user ids", ref);
        return NULL;
    }
    if (cJSON_GetArraySize(users) > c->e->w->srv->cfg.max_watch) {
        proto_send_error(c->ws, "too_many_watched", "more users than max-watch", ref);
        return NULL;
    }
    cJSON_ArrayForEach(u, users)
    {
        if (!cJSON_IsString(u) || !presence_id_valid(u->valuestring)) {
            proto_send_error(c->ws, "invalid", "invalid user id in \"users\"", ref);
            return NULL;
        }
    }
    return users;
}

static bool msg_watch(struct client *c, const cJSON *root, const char *ref)
{
    const cJSON *users = users_arg(c, root, ref);
    const cJSON *u;
    size_t idx, fresh = 0;
    struct client_x *x;
    const char *why;

    if (!users)
        return false;
    cJSON_ArrayForEach(u, users)
    {
        fresh += find_link(c, u->valuestring, &idx) == NULL;
    }
    if ((c->x ? c->x->nlinks : 0) + fresh > (size_t)c->e->w->srv->cfg.max_watch) {
        proto_send_error(c->ws, "too_many_watched", "watch list over max-watch; unwatch first",
                         ref);
        return false;
    }
    x = client_x(c);
    if (!engine__rate_take(c->e, &x->qtokens, &x->qlast, client_uid(c), ws_conn(c->ws), fresh,
                           &why)) {
        proto_send_error(c->ws, "rate_limited", why, ref);
        return true; /* the client's own pace, not garbage */
    }
    proto_send_ack(c->ws, ref); /* first, so that snapshots always follow it */
    cJSON_ArrayForEach(u, users)
    {
        if (!find_link(c, u->valuestring, &idx))
            watch_add(c, u->valuestring);
    }
    return true;
}

static bool msg_unwatch(struct client *c, const cJSON *root, const char *ref)
{
    const cJSON *users = users_arg(c, root, ref);
    const cJSON *u;
    size_t idx;

    if (!users)
        return false;
    cJSON_ArrayForEach(u, users)
    {
        if (find_link(c, u->valuestring, &idx))
            watch_remove(c, idx);
    }
    proto_send_ack(c->ws, ref);
    return true;
}

static bool msg_ping(struct client *c, const cJSON *root, const char *ref)
{
    (void)root;
    proto_send_pong(c->ws, ref);
    return true;
}

struct handler {
    const char *type;
    bool (*fn)(struct client *c, const cJSON *root, const char *ref);
};

static const struct handler handlers[] = {
    {"ping", msg_ping},     {"heartbeat", msg_heartbeat}, {"activity", msg_activity},
    {"status", msg_status}, {"custom", msg_custom},       {"leave", msg_leave},
    {"watch", msg_watch},   {"unwatch", msg_unwatch},     {"privacy", msg_privacy},
};

/* ---- authentication (auth = jwt) ----
 *
 * A token comes with the upgrade (?token=, or a "bearer.<token>" entry in
 * Sec-WebSocket-Protocol next to presenced.v1) or in a first
 * {"type":"auth","token":...} message. Until then the socket may only ping
 * and authenticate, and auth-timeout-ms later it is closed with 4401. The
 * token's sub is the user: ?user= and every user id inside messages are
 * ignored. The same message with a newer token refreshes it (same sub);
 * a token that expires unrefreshed closes the socket with 4403, jwt-leeway-s
 * after its exp. */

static bool auth_jwt(const struct engine *e)
{
    return strcmp(e->w->srv->cfg.auth, "jwt") == 0;
}

static int verify_token(struct engine *e, const char *tok, size_t n, struct jwt_claims *cl)
{
    return jwt_verify(&e->env->jwt, &e->env->jwt_opts, tok, n, (int64_t)(time_wall_ms() / 1000),
                      cl);
}

static void start_session(struct client *c);

/* Takes the identity and room rights of verified claims. */
static void take_claims(struct client *c, const struct jwt_claims *cl)
{
    engine__expiry_disarm(c); /* the auth deadline, or the old token's */
    client_set_uid(c, cl->sub);
    c->authed = true;
    c->deadline = cl->exp;
    if (cl->has_device && presence_device_parse(cl->device) >= 0) {
        c->device = (unsigned)presence_device_parse(cl->device) & 7u;
        c->device_claim = true;
    }
    if (c->x) {
        free(c->x->room_claims);
        c->x->room_claims = NULL;
        client_x_trim(c);
    }
    if (cl->has_rooms)
        client_x(c)->room_claims = jwt_rooms_pack(cl);
}

static bool msg_auth(struct client *c, const cJSON *root, const char *ref)
{
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "token");
    struct jwt_claims cl;
    int r;

    if (!auth_jwt(c->e)) {
        proto_send_error(c->ws, "invalid", "this server does not use tokens (auth = none)", ref);
        return false;
    }
    if (!cJSON_IsString(tok) ||
        (r = verify_token(c->e, tok->valuestring, strlen(tok->valuestring), &cl)) < 0) {
        proto_send_error(c->ws, "unauthorized", jwt_strerror(-1), ref);
        return false;
    }
    if (c->authed && strcmp(cl.sub, client_uid(c)) != 0) {
        proto_send_error(c->ws, "token_user_mismatch", "a refreshed token must name the same user",
                         ref);
        return false;
    }
    if (c->authed) { /* a refresh */
        take_claims(c, &cl);
        engine__expiry_arm(c);
        proto_send_ack(c->ws, ref);
        return true;
    }
    take_claims(c, &cl);
    engine__expiry_arm(c);
    start_session(c);
    return true;
}

static bool dispatch(struct client *c, const cJSON *root, const char *type)
{
    char ref[PROTO_REF_MAX];
    bool ok = false;

    proto_ref_text(root, ref);
    if (strcmp(type, "auth") == 0)
        return msg_auth(c, root, ref);
    if (auth_jwt(c->e) && !c->authed && strcmp(type, "ping") != 0) {
        proto_send_error(c->ws, "unauthenticated", "send {\"type\":\"auth\",\"token\":...} first",
                         ref);
        return false;
    }
    if (engine__room_dispatch(c, root, type, ref, &ok))
        return ok;
    for (size_t i = 0; i < ARRAY_SIZE(handlers); i++)
        if (strcmp(type, handlers[i].type) == 0)
            return handlers[i].fn(c, root, ref);
    proto_send_error(c->ws, "unknown_type", "unknown message type", ref);
    return false;
}

/* ---- the WebSocket application ---- */

static void app_on_open(struct wsconn *ws)
{
    struct client *c = ws_app_data(ws);
    struct engine *e = c->e;

    c->ws = ws;
    ws_set_user_data(ws, c);
    hmap_insert(&e->clients, &c->node, hash_bytes(&ws_conn(ws)->id, sizeof(uint64_t)));
    if (auth_jwt(e) && !c->authed) {
        c->deadline = (int64_t)(loop_now(e->w->loop) + (uint64_t)e->w->srv->cfg.auth_timeout_ms);
        engine__expiry_arm(c);
        return; /* the welcome follows a valid auth message */
    }
    if (c->authed)
        engine__expiry_arm(c);
    start_session(c);
}

/* Asks the user's owner for the session (or welcomes an observer). */
static void start_session(struct client *c)
{
    struct engine *e = c->e;
    struct emsg *em;

    if (!client_uid(c)[0]) {
        send_welcome(c, false);
        return;
    }
    c->owner = owner_of(e, client_uid(c)) & 127u;
    em = emsg_new(OP_START, client_conn_id(c));
    emsg_set_id(&em->uid, client_uid(c));
    emsg_set_id(&em->sid, client_sid(c));
    em->arg = c->resume;
    em->device = (uint8_t)c->device;
    send_to(e, c->owner, em);
}

static void app_on_message(struct wsconn *ws, bool binary, const char *p, size_t n)
{
    struct client *c = ws_user_data(ws);
    const char *type;
    cJSON *root;
    bool ok;

    if (binary) {
        ws_close(ws, 1003, "binary messages are not supported");
        return;
    }
    root = proto_parse(ws, p, n, &type);
    ok = root && dispatch(c, root, type);
    cJSON_Delete(root);
    if (ok) {
        c->bad_in_a_row = 0;
    } else {
        unsigned bad = c->bad_in_a_row;
        proto_count_error(ws, &bad); /* closes at PROTO_MAX_ERRORS, so bad stays small */
        c->bad_in_a_row = MIN(bad, 31u) & 31u;
    }
}

static void app_on_close(struct wsconn *ws, unsigned code)
{
    struct client *c = ws_user_data(ws);
    struct engine *e;

    (void)code;
    if (!c)
        return;
    e = c->e;
    client_drop_links(c);
    engine__expiry_disarm(c);
    if (c->started)
        send_to(e, c->owner, session_msg(c, OP_CLOSED, NULL));
    hmap_remove(&e->clients, &c->node);
    ws_set_user_data(ws, NULL);
    client_free(c);
}

const struct ws_app engine_app = {
    .on_open = app_on_open,
    .on_message = app_on_message,
    .on_close = app_on_close,
};

/* ---- set-up ---- */

void engine_register(void)
{
    worker_on_msg(WORKER_MSG_ENGINE, on_msg);
}

static void presence_cfg(const struct config *cfg, struct presence_config *pc)
{
    presence_config_init(pc);
    pc->heartbeat_interval_ms = (uint32_t)cfg->heartbeat_interval_ms;
    pc->heartbeat_min_ms = (uint32_t)cfg->heartbeat_min_ms;
    pc->session_ttl_ms = (uint32_t)cfg->session_ttl_ms;
    pc->reconnect_grace_ms = (uint32_t)cfg->reconnect_grace_ms;
    pc->idle_ms = (uint32_t)cfg->idle_ms;
    pc->debounce_ms = (uint32_t)cfg->presence_debounce_ms;
    pc->max_sessions_per_user = (uint32_t)cfg->max_sessions_per_user;
    pc->policy = (enum presence_policy)presence_policy_parse(cfg->status_policy);
}

struct engine *engine_new(struct worker *w, const struct engine_env *env, struct net_ctx *nc)
{
    struct engine *e = xcalloc(1, sizeof(*e));
    struct presence_config pc;

    e->w = w;
    e->env = env;
    e->nc = nc;
    presence_cfg(&w->srv->cfg, &pc);
    if (presence_config_check(&pc) != 0)
        fatalx("engine", "invalid presence settings: need heartbeat-min-ms <= "
                         "heartbeat-interval-ms < session-ttl-ms");
    e->pres = presence_new(&pc, loop_wheel(w->loop), on_change, on_end, e);
    e->rooms = engine__rooms_new(e);
    list_init(&e->queries);
    engine__privacy_init(e);
    return e;
}

void engine__free_map(struct hmap *m, size_t node_off, void (*release)(void *owner))
{
    struct hmap_node *n, *next;
    size_t it;

    for (n = hmap_first(m, &it); n; n = next) {
        next = hmap_next(m, n, &it);
        hmap_remove(m, n);
        if (release)
            release((char *)n - node_off);
        pool_free((char *)n - node_off);
    }
    hmap_release(m);
}

static void queries_free(struct engine *e);

void engine_free(struct engine *e)
{
    if (!e)
        return;
    engine__privacy_free(e); /* waits for the store requests in flight */
    presence_free(e->pres);
    engine__rooms_free(e);
    queries_free(e); /* answers that never came back */
    engine__subs_free(e);
    engine__expiry_free(e);
    hmap_release(&e->clients); /* clients are freed with their sockets */
    hmap_release(&e->watches);
    free(e);
}

/* True when the query has the key at all (decodable or not). */
static bool query_has(const struct http_request *req, const char *key)
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

static bool query_id(const struct http_request *req, const char *key, char out[PRESENCE_ID_MAX + 1])
{
    size_t pos = 0;
    ssize_t n = http_query_next(req->query, req->query_len, key, &pos, out, PRESENCE_ID_MAX + 1);

    return n > 0 && presence_id_valid(out);
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
static int request_claims(struct engine *e, const struct http_request *req, struct jwt_claims *cl)
{
    char *tok = xmalloc(JWT_MAX_LEN + 1);
    size_t n = request_token(req, tok);
    int r = n == 0 ? 0 : verify_token(e, tok, n, cl) == 0 ? 1 : -1;

    free(tok);
    return r;
}

/* auth = jwt at the upgrade: a token, if given, must verify (401 else). */
static int prepare_token(struct client *c, struct conn *conn, const struct http_request *req)
{
    struct jwt_claims cl;
    int r = request_claims(c->e, req, &cl);

    if (r < 0) {
        httpd_error(conn, 401, "unauthorized", jwt_strerror(-1));
        return -1;
    }
    if (r > 0)
        take_claims(c, &cl);
    return 0;
}

struct client *engine_client_prepare(struct worker *w, struct conn *conn,
                                     const struct http_request *req)
{
    struct client *c = pool_alloc(sizeof(*c)); /* ids "" inline */
    char dev[32], id[PRESENCE_ID_MAX + 1];
    size_t pos = 0;
    int d = PRESENCE_DEVICE_WEB;

    c->e = engine_of(w);
    if (auth_jwt(c->e)) {
        if (prepare_token(c, conn, req) < 0)
            goto out_free;
    } else if (query_has(req, "user")) {
        if (!query_id(req, "user", id)) {
            httpd_error(conn, 400, "bad_user", "user must be 1-128 of A-Z a-z 0-9 - _ . ~ : @");
            goto out_free;
        }
        client_set_uid(c, id);
    }
    if (query_has(req, "device")) {
        if (http_query_next(req->query, req->query_len, "device", &pos, dev, sizeof(dev)) < 0 ||
            (d = presence_device_parse(dev)) < 0) {
            httpd_error(conn, 400, "bad_device",
                        "device must be desktop, mobile, tablet, web or other");
            goto out_free;
        }
    }
    if (!c->device_claim)
        c->device = (unsigned)d & 7u;
    c->resume = client_uid(c)[0] && query_id(req, "resume", id);
    if (c->resume)
        client_set_sid(c, id);
    return c;
out_free:
    engine_client_discard(c);
    return NULL;
}

void engine_client_discard(struct client *c)
{
    client_free(c);
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

#define QUERY_TIMEOUT_MS 2000 /* then missing parts read as unknown, degraded */

struct query {
    struct list link;  /* engine->queries */
    struct conn *conn; /* NULL once answered or the client went away */
    enum query_kind kind;
    size_t n;                         /* parts expected */
    size_t remaining;                 /* parts still to come */
    struct payload **parts;           /* by index; raw JSON, not framed */
    char (*ids)[PRESENCE_ID_MAX + 1]; /* the user or room of each part */
    struct wheel_timer timer;         /* QUERY_TIMEOUT_MS */
};

static void query_abort(void *data)
{
    ((struct query *)data)->conn = NULL;
}

static void query_free(struct query *q)
{
    list_del(&q->link);
    wheel_del(&q->timer);
    free(q->ids);
    for (size_t i = 0; i < q->n; i++)
        payload_unref(q->parts[i]);
    free(q->parts);
    free(q);
}

static void queries_free(struct engine *e)
{
    while (!list_empty(&e->queries))
        query_free(container_of(list_first(&e->queries), struct query, link));
}

static void query_finish(struct query *q)
{
    struct buf b = {0};

    if (q->kind == QUERY_ROOM) {
        httpd_respond(q->conn, 200, "application/json", "Cache-Control: no-store\r\n",
                      q->parts[0]->data, q->parts[0]->len);
        return;
    }
    if (q->kind == QUERY_ADMIN_ROOMS) {
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
        httpd_respond(q->conn, 200, "application/json", "Cache-Control: no-store\r\n", b.data,
                      b.len);
        buf_release(&b);
        return;
    }
    if (q->kind == QUERY_ADMIN) { /* "NNN" status code, then the JSON */
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

    if (q->kind == QUERY_ADMIN_ROOMS)
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
    if (q->kind == QUERY_BEAT || q->kind == QUERY_ADMIN) { /* no partial answer */
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

static void on_answer(struct engine *e, struct emsg *em)
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

void engine__answer(struct engine *e, const struct emsg *req, struct payload *part)
{
    struct emsg *em = emsg_new(OP_ANSWER, 0);

    em->query = req->query;
    em->index = req->index;
    em->frame = part;
    send_to(e, req->msg.from, em);
}

static void op_query(struct engine *e, struct emsg *req)
{
#ifdef PRESENCED_TESTING
    if (getenv("PRESENCED_TEST_SILENT_OWNERS"))
        return; /* test builds: simulate owners that cannot answer */
#endif
    struct presence_view truth, v;
    const struct privacy_public *pub;
    const struct store_privacy *set;
    struct buf b = {0};
    int cls = PRIVACY_CLASS_SELF;

    if (!req->unfiltered) { /* the admin API reads the truth */
        if (!engine__privacy_ready(e, req, req->uid, req->viewer))
            return;
        cls = engine__privacy_class(e, req->uid, req->viewer, NULL, NULL);
    }
    presence_get_user(e->pres, req->uid, loop_now(e->w->loop), &truth);
    set = engine__privacy_settings(e, req->uid, &pub);
    privacy_view(&truth, set, pub, (enum privacy_class)cls, &v);
    if (req->arg == QUERY_LASTSEEN) {
        engine__answer(e, req, encode_lastseen(e, &v, cls == PRIVACY_CLASS_SELF));
        return;
    }
    privacy_encode(&v, (enum privacy_class)cls, wall_offset(e), &b);
    engine__answer(e, req, buf_payload(&b));
}

/* Owner side: a heartbeat over HTTP starts the session if needed (an HTTP
 * session has no socket: no grace, its TTL alone ends it), or ends it when
 * the client says it leaves. Errors come back as "!" + JSON. */
static void op_http_beat(struct engine *e, struct emsg *req)
{
    uint64_t now = loop_now(e->w->loop);
    const struct config *cfg = &e->w->srv->cfg;
    struct presence_session_info si;
    struct buf b = {0};
    bool known = req->sid[0] && presence_get_session(e->pres, req->sid, &si) == 0 &&
                 strcmp(si.user, req->uid) == 0 && si.conn_ref == NULL;
    char sid[PRESENCE_ID_MAX + 1];
    int r = 0;

    if (req->arg) { /* leave */
        if (known)
            presence_session_end(e->pres, req->sid, now);
        buf_printf(&b, "{\"sessionId\":\"%s\",\"ended\":true}\n", req->sid);
        engine__answer(e, req, buf_payload(&b));
        return;
    }
    if (known) {
        presence_heartbeat(e->pres, req->sid, now);
    } else {
        emsg_set_id(&req->sid, new_sid(sid));
        r = presence_session_start(e->pres, req->sid, req->uid, (enum presence_device)req->device,
                                   NULL, now);
    }
    if (r < 0) {
        buf_append_str(&b, "!{\"error\":{\"code\":\"too_many_sessions\",\"message\":");
        json_append_cstr(&b, presence_strerror(r));
        buf_append_str(&b, "}}\n");
    } else {
        buf_printf(&b,
                   "{\"sessionId\":\"%s\",\"created\":%s,\"heartbeatMs\":%lld,"
                   "\"sessionTtlMs\":%lld}\n",
                   req->sid, known ? "false" : "true", (long long)cfg->heartbeat_interval_ms,
                   (long long)cfg->session_ttl_ms);
    }
    engine__answer(e, req, buf_payload(&b));
}

void engine__query_set_id(struct query *q, size_t i, const char *id)
{
    copy_id(q->ids[i], id);
}

struct query *engine__query_new(struct conn *c, int kind, size_t n)
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

    if (!auth_jwt(e) || request_claims(e, req, cl) > 0)
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
        if (!presence_id_valid(id)) {
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

bool engine__rate_take(struct engine *e, double *tokens, uint64_t *last, const char *uid,
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

        ratelimit_observer_key(key, uid, conn_peer(conn, peer), auth_jwt(e));
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
    if (auth_jwt(e)) {
        copy_id(out, cl->sub);
        return true;
    }
    if (!query_has(req, "as"))
        return true;
    if (query_id(req, "as", out))
        return true;
    httpd_error(c, 400, "bad_user", "as must be 1-128 of A-Z a-z 0-9 - _ . ~ : @");
    return false;
}

static bool http_rate(struct conn *c, struct engine *e, const char *viewer, size_t n)
{
    struct httpd_conn *h = c->proto;
    const char *why;

    if (engine__rate_take(e, &h->qtokens, &h->qlast, viewer, c, n, &why))
        return true;
    httpd_error(c, 429, "rate_limited", why);
    return false;
}

void engine__http_read(struct conn *c, const struct http_request *req, struct worker *w, int kind,
                       bool unfiltered)
{
    struct engine *e = engine_of(w);
    char ids[QUERY_MAX_USERS][PRESENCE_ID_MAX + 1], viewer[PRESENCE_ID_MAX + 1] = "";
    struct query *q;
    struct jwt_claims cl;
    size_t n;

    if (!unfiltered && (!http_authorized(c, req, w, &cl) || !http_viewer(c, req, e, &cl, viewer)))
        return;
    if ((n = read_users(c, req, ids)) == 0 || (!unfiltered && !http_rate(c, e, viewer, n)))
        return;
    q = engine__query_new(c, kind, n);
    for (size_t i = 0; i < n; i++) {
        struct emsg *em = emsg_new(OP_QUERY, 0);
        copy_id(q->ids[i], ids[i]);
        emsg_set_id(&em->uid, ids[i]);
        emsg_set_id(&em->viewer, viewer);
        em->unfiltered = unfiltered;
        em->arg = (int8_t)kind;
        em->query = (uint64_t)(uintptr_t)q;
        em->index = (uint32_t)i;
        send_to(e, owner_of(e, ids[i]), em);
    }
}

void engine_http_presence(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    engine__http_read(c, req, nc->worker, QUERY_PRESENCE, false);
}

void engine_http_lastseen(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    engine__http_read(c, req, nc->worker, QUERY_LASTSEEN, false);
}

/* POST /v1/heartbeat {"user":"alice","sessionId":"…","device":"web","leave":false} */
void engine_http_heartbeat(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    struct worker *w = nc->worker;
    struct engine *e = engine_of(w);
    cJSON *root = cJSON_ParseWithLength(req->body ? req->body : "", req->body_len);
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
    if (auth_jwt(e) && cJSON_IsString(user) && strcmp(user->valuestring, cl.sub) != 0) {
        httpd_error(c, 403, "forbidden", "\"user\" must be the token's subject");
        cJSON_Delete(root);
        return;
    }
    if (auth_jwt(e) && !user) { /* the token names the user */
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
    em->query = (uint64_t)(uintptr_t)engine__query_new(c, QUERY_BEAT, 1);
    send_to(e, owner_of(e, em->uid), em);
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

    (void)s;
    hmap_remove(&c->e->clients, &c->node);
    client_free(c);
}

struct client *engine__sse_client(struct conn *conn, struct worker *w)
{
    struct client *c = pool_alloc(sizeof(*c));

    c->e = engine_of(w);
    hmap_insert(&c->e->clients, &c->node, hash_bytes(&conn->id, sizeof(conn->id)));
    client_x(c)->sse = sse_start(conn, c->e->nc, sse_closed, c);
    return c;
}

void engine_sse_presence(struct conn *conn, const struct http_request *req, struct net_ctx *nc)
{
    struct worker *w = nc->worker;
    char ids[QUERY_MAX_USERS][PRESENCE_ID_MAX + 1];
    struct client *c;
    size_t n, idx;
    struct jwt_claims cl;

    char viewer[PRESENCE_ID_MAX + 1];

    if (!http_authorized(conn, req, w, &cl) || !http_viewer(conn, req, engine_of(w), &cl, viewer) ||
        (n = read_users(conn, req, ids)) == 0 || !http_rate(conn, engine_of(w), viewer, n))
        return;
    c = engine__sse_client(conn, w);
    client_set_uid(c, viewer); /* the viewer; an event stream has no session */
    for (size_t i = 0; i < n; i++)
        if (!find_link(c, ids[i], &idx))
            watch_add(c, ids[i]);
}

/* The rooms claim of the bearer token (auth = jwt), else with
 * room-token-secret a ?room_token= for holder "http"; 403 otherwise. */
static bool http_room_allowed(struct conn *c, const struct http_request *req, struct engine *e,
                              const struct jwt_claims *cl, const char *room)
{
    char tok[2 * 64 + 1];
    size_t pos = 0;
    bool claims = auth_jwt(e) && cl->has_rooms;

    if (claims && jwt_claims_allow_room(cl, room))
        return true;
    if (!e->w->srv->cfg.room_token_secret[0] && !claims)
        return true;
    if (e->w->srv->cfg.room_token_secret[0] &&
        http_query_next(req->query, req->query_len, "room_token", &pos, tok, sizeof(tok)) > 0 &&
        engine__room_token_ok(e, "http", room, tok))
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

    emsg_set_id(&em->room, q->ids[0]);
    em->query = (uint64_t)(uintptr_t)q;
    if (n) {
        em->ids = xcalloc(n, sizeof(*em->ids));
        for (em->nids = 0; em->nids < n; em->nids++)
            em->ids[em->nids] = xstrdup(blockers[em->nids]);
    }
    send_to(e, owner_of(e, q->ids[0]), em);
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
    struct query *q = engine__query_new(c, QUERY_ROOM, 1);
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
    if (!http_room_allowed(c, req, e, &claims, room) || !http_rate(c, e, viewer, 1))
        return; /* a room read or stream counts as one query */
    if (events) {
        bool has = sse_last_event_id_text(req, last, sizeof(last));
        struct client *sc = engine__sse_client(c, w);
        client_set_uid(sc, viewer); /* the reader; an event stream has no session */
        engine__room_stream(sc, room, has ? last : NULL);
        return;
    }
    room_read(c, e, room, viewer);
}

void engine_update_metrics(struct engine *e)
{
    struct metrics *m = &e->w->metrics;
    struct presence_stats ps;
    struct room_stats rs;

    presence_get_stats(e->pres, &ps);
    room_get_stats(e->rooms, &rs);
    METRIC_SET(m, sessions, ps.sessions);
    METRIC_SET(m, users_online, ps.users);
    METRIC_SET(m, heartbeats, ps.heartbeats);
    METRIC_SET(m, heartbeats_throttled, ps.heartbeats_throttled);
    METRIC_SET(m, presence_events, ps.events);
    METRIC_SET(m, rooms, rs.rooms);
    METRIC_SET(m, room_members, rs.members);
    METRIC_SET(m, room_deltas, rs.deltas);
    METRIC_SET(m, ephemeral_sent, rs.ephemeral_sent);
}

/* ---- the engine's routes and per-iteration upkeep ---- */

/* GET /v1/ws: the native protocol's WebSocket upgrade. */
static void get_ws(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    struct client *cl = engine_client_prepare(nc->worker, c, req);

    if (cl && !ws_upgrade(c, req, &nc->ws_opts, &engine_app, cl))
        engine_client_discard(cl);
}

/* clang-format off */
static const struct route routes[] = {
    {"GET", "/v1/ws", get_ws},
    {"GET", "/v1/presence", engine_http_presence},
    {"GET", "/v1/lastseen", engine_http_lastseen},
    {"GET", "/v1/presence/events", engine_sse_presence},
    {"GET", "/v1/rooms/", engine_http_room},
    {"POST", "/v1/heartbeat", engine_http_heartbeat},
    {"GET", "/v1/admin/", engine_http_admin},
    {"PUT", "/v1/admin/", engine_http_admin},
    {"POST", "/v1/admin/", engine_http_admin},
    {"DELETE", "/v1/admin/", engine_http_admin},
};
/* clang-format on */

const struct route_list engine_routes = ROUTE_LIST(routes);

struct engine *engine_of_worker(struct worker *w)
{
    return engine_of(w);
}

/* The observer-rate table (ratelimit.h) is swept a slice at a time: each
 * worker takes the next SWEEP_STRIPES stripes at most every SWEEP_EVERY_MS,
 * so one worker alone covers all 64 in 8 s, about the time a bucket with
 * the default settings takes to refill (and become removable). */
#define SWEEP_EVERY_MS 1000
#define SWEEP_STRIPES  8

void engine_tick(struct engine *e)
{
    uint64_t now = loop_now(e->w->loop);

    engine_update_metrics(e);
    if (e->env->observer_rate && now - e->swept_ms >= SWEEP_EVERY_MS) {
        e->swept_ms = now;
        ratelimit_sweep(e->env->observer_rate, SWEEP_STRIPES, now);
    }
}
