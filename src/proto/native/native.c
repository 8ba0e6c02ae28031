/* SPDX-License-Identifier: MIT */
/*
 * native.c - the native protocol's client messages: the one type table,
 * the handlers that turn wire JSON into engine operations, and the
 * WebSocket application that feeds them (native.h).
 *
 * A handler returns false when it rejected the message (after answering
 * with an error): PROTO_MAX_ERRORS of those in a row close the socket
 * (proto_count_error()). Its replies that do not depend on the owner
 * (errors of validation, acks of watch lists, pongs) are written here; the
 * others come back from the engine.
 */
#include "native.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "client.h"
#include "engine.h"
#include "engine_room.h"
#include "flow.h"
#include "frame.h"
#include "http_read.h"
#include "json.h"
#include "native_encode.h"
#include "ns.h"
#include "presence.h"
#include "privacy.h"
#include "proto.h"
#include "room.h"
#include "session.h"
#include "watch.h"

/* proto_count_error() closes at PROTO_MAX_ERRORS: the count must reach it. */
_Static_assert(PROTO_MAX_ERRORS <= CLIENT_BAD_MAX, "struct client's bad_in_a_row has 5 bits");
_Static_assert(PROTO_REF_MAX <= MSG_REF_MAX, "a ref fits a bus message");

/* ---- helpers ---- */

static unsigned native_proto; /* the native adapter's id (native_register()) */

static bool need_session(struct client *c, const char *ref)
{
    if (c->started)
        return true;
    frame_send_error(c, "no_session",
                     client_uid(c)[0] ? "the session is not started yet"
                                      : "connect with ?user= to have a session",
                     ref);
    return false;
}

/* "expiresInMs": absent or null = none; else a positive integer. */
static bool parse_expiry(const cJSON *root, uint64_t *out)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, "expiresInMs");
    int64_t v;

    *out = 0;
    if (!x || cJSON_IsNull(x))
        return true;
    if (json_number_i64(x, 1, 31536000000, &v) < 0)
        return false; /* not a number, a fraction, or out of range */
    *out = (uint64_t)v;
    return true;
}

/* The largest epoch or seq a "since" may name: 2^53, the last integer a
 * JSON number (and a JavaScript client) holds exactly. */
#define SINCE_MAX 9007199254740992LL

/* "since": absent or null = none (*has = false); else an object with
 * integers "epoch" and "seq" in [0, 2^53]. False = refused. */
static bool parse_since(const cJSON *root, bool *has, uint64_t *epoch, uint64_t *seq)
{
    const cJSON *since = cJSON_GetObjectItemCaseSensitive(root, "since");
    int64_t ep, sq;

    *has = false;
    if (!since || cJSON_IsNull(since))
        return true;
    if (json_get_i64(since, "epoch", 0, SINCE_MAX, &ep) < 0 ||
        json_get_i64(since, "seq", 0, SINCE_MAX, &sq) < 0)
        return false;
    *epoch = (uint64_t)ep;
    *seq = (uint64_t)sq;
    *has = true;
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

/* ---- sessions ---- */

static bool msg_activity(struct client *c, const cJSON *root, const char *ref)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "active");

    if (!need_session(c, ref))
        return false;
    if (!cJSON_IsBool(a)) {
        frame_send_error(c, "invalid", "\"active\" must be true or false", ref);
        return false;
    }
    session__activity(c, cJSON_IsTrue(a), ref);
    return true;
}

static bool msg_status(struct client *c, const cJSON *root, const char *ref)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "status");
    uint64_t exp;
    int st;

    if (!need_session(c, ref))
        return false;
    st = cJSON_IsString(s) ? presence_status_parse(s->valuestring) : PRESENCE_E_BAD_STATUS;
    if (st < 0 || st == PRESENCE_OFFLINE) {
        frame_send_error(c, "invalid", "\"status\" must be online, away, busy or dnd", ref);
        return false;
    }
    if (!parse_expiry(root, &exp)) {
        frame_send_error(c, "invalid", "\"expiresInMs\" must be a positive integer", ref);
        return false;
    }
    session__status(c, st, exp, ref);
    return true;
}

static bool msg_custom(struct client *c, const cJSON *root, const char *ref)
{
    bool ok = true;
    const char *text = opt_string(root, "text", &ok);
    const char *emoji = opt_string(root, "emoji", &ok);
    uint64_t exp;
    int r;

    if (!need_session(c, ref))
        return false;
    if (!ok || !parse_expiry(root, &exp)) {
        frame_send_error(c, "invalid",
                         "\"text\" and \"emoji\" must be strings, \"expiresInMs\" a positive "
                         "integer",
                         ref);
        return false;
    }
    if ((r = presence_custom_check(text, emoji)) < 0) {
        frame_send_error(c, "invalid", presence_strerror(r), ref);
        return false;
    }
    session__custom(c, text, emoji, exp, ref);
    return true;
}

static bool msg_leave(struct client *c, const cJSON *root, const char *ref)
{
    (void)root;
    if (!need_session(c, ref))
        return false;
    session__leave(c, ref);
    return true;
}

/* {"type":"privacy","online":"contacts","lastSeen":"nobody","invisible":true}:
 * any of the three; acknowledged once stored (engine_privacy.c). */
static bool msg_privacy(struct client *c, const cJSON *root, const char *ref)
{
    struct store_privacy p = {STORE_VIS_EVERYONE, STORE_VIS_EVERYONE, false};
    uint8_t mask;

    if (!need_session(c, ref))
        return false;
    if (privacy_parse_update(root, &p, &mask) < 0) {
        frame_send_error(c, "bad_request",
                         "online and lastSeen must be everyone, contacts or nobody; invisible "
                         "true or false",
                         ref);
        return false;
    }
    session__privacy(c, &p, mask, ref);
    return true;
}

/* ---- watch lists ---- */

/* Validates the "users" array: 1..max ids, each valid, and makes each
 * the internal id of c's namespace (ns.h; in place). */
static const cJSON *users_arg(struct client *c, const cJSON *root, const char *ref)
{
    const cJSON *users = cJSON_GetObjectItemCaseSensitive(root, "users");
    char id[PRESENCE_ID_MAX + 1];
    cJSON *u;

    if (!cJSON_IsArray(users) || cJSON_GetArraySize(users) == 0) {
        frame_send_error(c, "invalid", "\"users\" must be a non-empty array of user ids", ref);
        return NULL;
    }
    if (cJSON_GetArraySize(users) > c->e->w->srv->cfg.max_watch) {
        frame_send_error(c, "too_many_watched", "more users than max-watch", ref);
        return NULL;
    }
    cJSON_ArrayForEach(u, users)
    {
        if (!cJSON_IsString(u) || !presence_id_valid(u->valuestring) ||
            !ns_join(client_ns(c), u->valuestring, id, PRESENCE_ID_MAX)) {
            frame_send_error(c, "invalid", "invalid user id in \"users\"", ref);
            return NULL;
        }
        if (client_ns(c)[0] && !cJSON_SetValuestring(u, id))
            abort(); /* cJSON fails only on OOM */
    }
    return users;
}

/* The users of the array c does not watch yet, each counted once. */
static size_t distinct_fresh(struct client *c, const cJSON *users)
{
    const cJSON *u, *v;
    size_t idx, n = 0;

    cJSON_ArrayForEach(u, users)
    {
        bool seen = watch__find_link(c, u->valuestring, &idx) != NULL;
        for (v = users->child; v != u && !seen; v = v->next)
            seen = strcmp(v->valuestring, u->valuestring) == 0;
        n += !seen;
    }
    return n;
}

static bool msg_watch(struct client *c, const cJSON *root, const char *ref)
{
    const cJSON *users = users_arg(c, root, ref);
    const cJSON *tier = cJSON_GetObjectItemCaseSensitive(root, "tier");
    const cJSON *u;
    size_t idx, fresh = 0;
    struct client_x *x;
    const char *why;
    bool list;

    if (!users)
        return false;
    if (tier && !(cJSON_IsString(tier) && (strcmp(tier->valuestring, "live") == 0 ||
                                           strcmp(tier->valuestring, "list") == 0))) {
        frame_send_error(c, "invalid", "tier must be \"live\" or \"list\"", ref);
        return false;
    }
    list = tier && strcmp(tier->valuestring, "list") == 0;
    cJSON_ArrayForEach(u, users)
    {
        fresh += watch__find_link(c, u->valuestring, &idx) == NULL;
    }
    if ((c->x ? c->x->nlinks : 0) + fresh > (size_t)c->e->w->srv->cfg.max_watch) {
        frame_send_error(c, "too_many_watched", "watch list over max-watch; unwatch first", ref);
        return false;
    }
    /* Its other sockets count too, so a refusal is not garbage. A user
     * named twice counts once, which costs a scan only near the limit. */
    if (!watch__reserve(c, fresh) && !watch__reserve(c, fresh = distinct_fresh(c, users))) {
        frame_send_error(c, "too_many_watched",
                         "this user's watch lists are at max-watch-per-user; unwatch first", ref);
        return true;
    }
    x = client_x(c);
    if (!http_read__rate_take(c->e, &x->qtokens, &x->qlast, client_uid(c), wsconn_to_conn(c->ws),
                              fresh, &why)) {
        watch__unreserve(c, fresh);
        frame_send_error(c, "rate_limited", why, ref);
        return true; /* the client's own pace, not garbage */
    }
    frame_send_ack(c, ref); /* first, so that snapshots always follow it */
    cJSON_ArrayForEach(u, users)
    {
        if (!watch__find_link(c, u->valuestring, &idx)) {
            watch__add(c, u->valuestring);
            fresh--;
        }
        watch__set_tier(c, u->valuestring, list);
    }
    watch__unreserve(c, fresh); /* what a user named twice reserved twice */
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
        if (watch__find_link(c, u->valuestring, &idx))
            watch__remove(c, idx);
    }
    frame_send_ack(c, ref);
    return true;
}

/* ---- connection ---- */

static bool msg_ping(struct client *c, const cJSON *root, const char *ref)
{
    (void)root;
    proto_send_pong(c->ws, ref);
    return true;
}

/* {"type":"auth","token":...}: a first token, or a refresh (client.c). */
static bool msg_auth(struct client *c, const cJSON *root, const char *ref)
{
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "token");
    struct jwt_claims cl;

    if (!client__auth_jwt(c->e)) {
        frame_send_error(c, "invalid", "this server does not use tokens (auth = none)", ref);
        return false;
    }
    if (!cJSON_IsString(tok) ||
        client__verify_token(c->e, tok->valuestring, strlen(tok->valuestring), &cl) < 0) {
        frame_send_error(c, "unauthorized", jwt_strerror(-1), ref);
        return false;
    }
    if (c->authed && strcmp(cl.sub, client_uid(c)) != 0) {
        frame_send_error(c, "token_user_mismatch", "a refreshed token must name the same user",
                         ref);
        return false;
    }
    if (client__take_token(c, &cl))
        frame_send_ack(c, ref); /* a refresh */
    return true;
}

/* ---- rooms ---- */

/* The message's room as the client names it (NULL after answering an
 * error), its internal id in c's namespace (ns.h) into room. */
static const char *room_arg(struct client *c, const cJSON *root, const char *ref,
                            char room[ROOM_ID_MAX + 1])
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(root, "room");

    if (!cJSON_IsString(r) || !room_id_valid(r->valuestring) ||
        !ns_join(client_ns(c), r->valuestring, room, ROOM_ID_MAX)) {
        frame_send_error(c, "invalid", "\"room\" must be a room id", ref);
        return NULL;
    }
    if (strncmp(r->valuestring, "~p", 2) == 0) { /* proto/pusher/pusher_name.h */
        frame_send_error(c, "invalid", "room ids starting with ~p are reserved for Pusher channels",
                         ref);
        return NULL;
    }
    return r->valuestring;
}

/* The JSON value of key as compact text (heap, caller cJSON_free()s it),
 * or NULL when absent; *bad when present but over max bytes. */
static char *json_arg(const cJSON *root, const char *key, size_t max, bool *bad)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    char *text;

    *bad = false;
    if (!v)
        return NULL;
    text = cJSON_PrintUnformatted(v);
    if (!text || strlen(text) > max) {
        *bad = true;
        cJSON_free(text);
        return NULL;
    }
    return text;
}

static bool msg_join(struct client *c, const cJSON *root, const char *ref)
{
    char room[ROOM_ID_MAX + 1];
    const char *wire = room_arg(c, root, ref, room);
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "token");
    uint64_t epoch = 0, seq = 0;
    bool bad, has_since = false;
    char *meta;
    int r;

    if (!wire || !need_session(c, ref))
        return false;
    /* Tokens name the room as the client does (another app's namespace
     * is served without tokens: engine_client_prepare()). */
    if (!engine__room_allowed(c, wire, cJSON_IsString(tok) ? tok->valuestring : NULL)) {
        frame_send_error(c, "forbidden",
                         "the token does not allow this room and no valid room token was given",
                         ref);
        return false;
    }
    meta = json_arg(root, "meta", 1024, &bad);
    if (bad) {
        frame_send_error(c, "invalid", "\"meta\" is over 1024 bytes", ref);
        return false;
    }
    if (!parse_since(root, &has_since, &epoch, &seq)) {
        cJSON_free(meta);
        frame_send_error(c, "invalid",
                         "\"since\" must be {\"epoch\":E,\"seq\":N}, integers from 0 to 2^53", ref);
        return false;
    }
    r = engine__room_join(c, room, meta, has_since, epoch, seq, 0, ref);
    cJSON_free(meta);
    if (r == -EALREADY) {
        frame_send_error(c, "already_joined", "this connection is in the room already", ref);
        return false;
    }
    if (r == -EMLINK) {
        frame_send_error(c, "too_many_rooms",
                         "this connection is in max-rooms-per-connection rooms; leave one first",
                         ref);
        return false;
    }
    return true;
}

static bool msg_room_leave(struct client *c, const cJSON *root, const char *ref)
{
    char room[ROOM_ID_MAX + 1];

    if (!room_arg(c, root, ref, room) || !need_session(c, ref))
        return false;
    if (engine__room_leave(c, room, ref) == -ENOENT) {
        frame_send_error(c, "not_joined", "this connection is not in the room", ref);
        return false;
    }
    frame_send_ack(c, ref);
    return true;
}

static bool msg_patch(struct client *c, const cJSON *root, const char *ref)
{
    char room[ROOM_ID_MAX + 1], *meta;
    bool bad;

    if (!room_arg(c, root, ref, room) || !need_session(c, ref))
        return false;
    if (!(meta = json_arg(root, "meta", 1024, &bad))) {
        frame_send_error(c, "invalid", "need \"meta\" (a JSON merge patch, <= 1024 bytes)", ref);
        return false;
    }
    engine__room_patch(c, room, meta, ref);
    cJSON_free(meta);
    return true;
}

static bool msg_ephemeral(struct client *c, const cJSON *root, const char *ref)
{
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
    char room[ROOM_ID_MAX + 1], *data;
    bool bad;

    if (!room_arg(c, root, ref, room) || !need_session(c, ref))
        return false;
    if (engine__room_ephemerals_held(c))
        return true; /* asked to hide: dropped until the rooms know */
    data = json_arg(root, "data", 1024, &bad);
    if (!data || !cJSON_IsString(kind)) {
        cJSON_free(data);
        frame_send_error(c, "invalid", "need \"kind\" (string) and \"data\" (JSON, <= 1024 bytes)",
                         ref);
        return false;
    }
    engine__room_ephemeral(c, room, kind->valuestring, data, ref);
    cJSON_free(data);
    return true;
}

/* ---- the type table ---- */

/* A message type: its handler fn validates the fields and calls the
 * engine; a type with no fields but its name (heartbeat) names the
 * engine's operation itself (op), which runs once the client has a
 * session. */
struct native_type {
    const char *type;
    bool (*fn)(struct client *c, const cJSON *root, const char *ref);
    void (*op)(struct client *c, const char *ref);
    bool before_auth;        /* allowed before the first token (auth = jwt) */
    enum budget_kind budget; /* its per-connection budget (flow.h) */
};

/* clang-format off */
static const struct native_type types[] = {
    {"auth",       msg_auth,       NULL, true,  BUDGET_NONE},
    {"ping",       msg_ping,       NULL, true,  BUDGET_NONE},
    {"heartbeat",  NULL, session__heartbeat, false, BUDGET_NONE},
    {"activity",   msg_activity,   NULL, false, BUDGET_STATUS},
    {"status",     msg_status,     NULL, false, BUDGET_STATUS},
    {"custom",     msg_custom,     NULL, false, BUDGET_STATUS},
    {"leave",      msg_leave,      NULL, false, BUDGET_STATUS},
    {"privacy",    msg_privacy,    NULL, false, BUDGET_STATUS},
    {"watch",      msg_watch,      NULL, false, BUDGET_WATCH},
    {"unwatch",    msg_unwatch,    NULL, false, BUDGET_WATCH},
    {"join",       msg_join,       NULL, false, BUDGET_JOIN},
    {"room_leave", msg_room_leave, NULL, false, BUDGET_JOIN},
    {"patch",      msg_patch,      NULL, false, BUDGET_PATCH},
    {"ephemeral",  msg_ephemeral,  NULL, false, BUDGET_EPHEMERAL},
};
/* clang-format on */

static const struct native_type *find_type(const char *type)
{
    for (size_t i = 0; i < ARRAY_SIZE(types); i++)
        if (strcmp(type, types[i].type) == 0)
            return &types[i];
    return NULL;
}

/* Whether c may send a message of type t (NULL: unknown); answers the
 * error when it may not. */
static bool admitted(struct client *c, const struct native_type *t, const char *ref)
{
    if (!(t && t->before_auth) && client__auth_jwt(c->e) && !c->authed) {
        frame_send_error(c, "unauthenticated", "send {\"type\":\"auth\",\"token\":...} first", ref);
        return false;
    }
    if (!t) {
        frame_send_error(c, "unknown_type", "unknown message type", ref);
        return false;
    }
    return (t->fn || need_session(c, ref)) && flow__spend(c, t->budget, ref);
}

/* ---- the WebSocket application ---- */

static void on_open(struct wsconn *ws)
{
    struct client *c = wsconn_app_data(ws);

    wsconn_set_user_data(ws, c);
    client__open(c, ws, native_proto);
}

/* One message: parsed, found in the type table and run, all here (the
 * heartbeat's path in docs/architecture.md: on_message is its one
 * function in this adapter). */
static void on_message(struct wsconn *ws, bool binary, const char *p, size_t n)
{
    struct client *c = wsconn_user_data(ws);
    const struct native_type *t;
    char ref[PROTO_REF_MAX];
    const char *type;
    cJSON *root;
    bool ok = false;

    if (binary) {
        wsconn_close(ws, 1003, "binary messages are not supported");
        return;
    }
    root = proto_parse(ws, p, n, &type);
    c->e->congested = false;
    if (root) {
        proto_ref_text(root, ref);
        t = find_type(type);
        ok = admitted(c, t, ref);
        if (ok && t->op)
            t->op(c, ref);
        else if (ok)
            ok = t->fn(c, root, ref);
    }
    cJSON_Delete(root);
    flow__after(c);
    if (ok) {
        c->bad_in_a_row = 0;
    } else {
        unsigned bad = c->bad_in_a_row;
        proto_count_error(ws, &bad); /* closes at PROTO_MAX_ERRORS, so bad stays small */
        c->bad_in_a_row = MIN(bad, (unsigned)CLIENT_BAD_MAX) & 31u;
    }
}

const struct wsconn_app native_app = {
    .on_open = on_open,
    .on_message = on_message,
    .on_close = client__on_ws_close,
};

/* GET /v1/ws: the native protocol's WebSocket upgrade. */
static void get_ws(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    struct client *cl = engine_client_prepare(nc->worker, c, true, req);

    if (cl && !wsconn_upgrade(c, req, &nc->wsconn_opts, &native_app, cl))
        engine_client_discard(cl);
}

static const struct route routes[] = {
    {"GET", "/v1/ws", get_ws},
};

const struct route_list native_routes = ROUTE_LIST(routes);

void native_register(void)
{
    native_proto = adapter_register(&native_adapter);
}
