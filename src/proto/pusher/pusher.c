/* SPDX-License-Identifier: MIT */
/*
 * pusher.c - the Pusher protocol's client messages: the event table, the
 * handlers that turn them into engine operations, the WebSocket
 * application at /app/{key}, and the registration (pusher.h).
 *
 * Per socket the adapter keeps a struct pclient in c->x->adata: the
 * presence subscriptions that wait for the session to start, the session's
 * keep-alive timer, the client-event bucket and the signed-in user.
 *
 * pusher:signin (user authentication) makes the socket its user's
 * session, as a presence subscription does, and lets it subscribe to that
 * user's own channel "#server-to-user-<id>" (the room "~p~hserver-to-user-
 * <id>", pusher_name.h), which the HTTP API's events (the server
 * libraries' sendToUser) reach on every node.
 */
#include "pusher.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#include "adapter.h"
#include "apps.h"
#include "client.h"
#include "engine.h"
#include "engine_room.h"
#include "engine_state.h"
#include "frame.h"
#include "hooks.h"
#include "json.h"
#include "loop.h"
#include "pusher_api.h"
#include "pusher_app.h"
#include "pusher_auth.h"
#include "pusher_encode.h"
#include "pusher_name.h"
#include "session.h"
#include "watch.h"
#include "ws.h"

#define MAX_PENDING        8     /* presence subscriptions waiting for the session */
#define CLIENT_EVENT_RATE  10    /* client events per second per socket (Pusher's) */
#define CLIENT_EVENT_BYTES 10240 /* data of one client event (Pusher's 10 KB) */
#define USER_INFO_MAX      1024  /* a member's user_info: the room core's metadata limit */
#define WATCHLIST_MAX      100   /* ids in a signed-in user's watchlist (Pusher's limit) */

struct pending {
    char room[PUSHER_ROOM_MAX + 1];
    char ref[MSG_REF_MAX];
    char *info; /* cJSON_free() */
};

struct pclient {
    struct client *c;
    struct wheel_timer beat; /* keeps the session alive while the socket is open */
    struct pending pend[MAX_PENDING];
    unsigned npend;
    double tokens;                          /* client-event bucket */
    uint64_t refilled;                      /* loop ms */
    char signed_in[PUSHER_USER_ID_MAX + 1]; /* pusher:signin's user id, "" = none */
    const struct pusher_app *app;           /* the socket's, from /app/{key} */
};

static struct pusher_app apps[PUSHER_APPS_MAX];
static size_t napps;
/* The app of the socket get_app is upgrading, for on_open (which runs
 * inside wsconn_upgrade, on the same worker thread). */
static _Thread_local const struct pusher_app *opening;
static unsigned pusher_proto;
static const struct route no_routes[1];
struct route_list pusher_routes = {no_routes, 0};

/* ---- per-socket state ---- */

static void on_beat(struct wheel_timer *t, uint64_t now);

static struct pclient *pc_of(struct client *c)
{
    struct client_x *x = client_x(c);

    if (!x->adata) {
        struct pclient *pc = xcalloc(1, sizeof(*pc));
        pc->c = c;
        pc->tokens = CLIENT_EVENT_RATE;
        wheel_timer_init(&pc->beat, on_beat);
        x->adata = pc;
    }
    return x->adata;
}

void pusher__release(struct client *c)
{
    struct pclient *pc = c->x->adata;

    wheel_del(&pc->beat);
    for (unsigned i = 0; i < pc->npend; i++)
        cJSON_free(pc->pend[i].info);
    free(pc);
    c->x->adata = NULL;
}

static void on_beat(struct wheel_timer *t, uint64_t now)
{
    struct pclient *pc = container_of(t, struct pclient, beat);

    (void)now;
    session__keepalive(pc->c, &pc->beat);
}

/* ---- frames of the adapter's own ---- */

static void send_json(struct client *c, struct buf *b)
{
    frame_send(c, frame_text(b));
}

static void send_error(struct client *c, int code, const char *message)
{
    frame_send(c, pusher_frame_error(code, message));
}

static void subscription_error(struct client *c, const char *channel, const char *type,
                               const char *message, int status)
{
    frame_send(c, pusher_frame_subscription_error(channel, type, message, status));
}

/* The ref a join carries: the channel as a JSON string when it fits (its
 * errors then say which channel), else none. */
static void channel_ref(const char *channel, char ref[MSG_REF_MAX])
{
    if (strlen(channel) + 3 > MSG_REF_MAX)
        ref[0] = '\0';
    else
        snprintf(ref, MSG_REF_MAX, "\"%s\"", channel);
}

/* ---- subscribe / unsubscribe ---- */

static const char *str_field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void join_now(struct client *c, const char *room, const char *info, const char *ref)
{
    int r = engine__room_join(c, room, info, false, 0, 0, pc_of(c)->app->member_limit, ref);
    char channel[PUSHER_CHANNEL_MAX + 1];

    if (r == -EMLINK && pusher_channel_of(room, channel))
        subscription_error(c, channel, "LimitReached",
                           "this connection is in max-rooms-per-connection channels", 4100);
}

void pusher__on_started(struct client *c)
{
    struct pclient *pc = pc_of(c);

    loop_timer_start(c->e->w->loop, &pc->beat, session__keepalive_ms(c));
    for (unsigned i = 0; i < pc->npend; i++) {
        join_now(c, pc->pend[i].room, pc->pend[i].info, pc->pend[i].ref);
        cJSON_free(pc->pend[i].info);
    }
    pc->npend = 0;
}

static bool pending_has(const struct pclient *pc, const char *room)
{
    for (unsigned i = 0; i < pc->npend; i++)
        if (strcmp(pc->pend[i].room, room) == 0)
            return true;
    return false;
}

/* A presence subscription of user uid with info (taken over): joins at
 * once when the session runs, else waits for it (starting it first). */
static void presence_join(struct client *c, const char *channel, const char *room, const char *uid,
                          char *info)
{
    struct pclient *pc = pc_of(c);
    char ref[MSG_REF_MAX];

    channel_ref(channel, ref);
    if (client_uid(c)[0] && strcmp(client_uid(c), uid) != 0) {
        subscription_error(c, channel, "AuthError",
                           "a connection is one user: its presence channels must name the same "
                           "user_id",
                           401);
    } else if (c->started) {
        join_now(c, room, info, ref);
    } else if (pc->npend == MAX_PENDING || pending_has(pc, room)) {
        subscription_error(c, channel, "LimitReached", "too many subscriptions in flight", 4100);
    } else {
        struct pending *p = &pc->pend[pc->npend++];
        snprintf(p->room, sizeof(p->room), "%s", room);
        memcpy(p->ref, ref, sizeof(p->ref));
        p->info = info;
        info = NULL;
        if (!client_uid(c)[0])
            client__start_as(c, uid);
    }
    cJSON_free(info);
}

/* The internal id of the wire id in c's app's namespace (ns.h) into out
 * (PUSHER_USER_ID_MAX + 1 bytes); false when it does not fit. */
static bool user_of(struct client *c, const char *id, char *out)
{
    return ns_join(pc_of(c)->app->ns, id, out, PUSHER_USER_ID_MAX);
}

static void subscribe_presence(struct client *c, const char *channel, const char *room,
                               const cJSON *data, const char *sid)
{
    const char *auth = str_field(data, "auth"), *cd = str_field(data, "channel_data");
    const struct pusher_app *app = pc_of(c)->app;
    char uid[PUSHER_USER_ID_MAX + 1], iuid[PUSHER_USER_ID_MAX + 1], *info = NULL;
    int r;

    if (!auth || !cd || !pusher_channel_auth_ok(app->key, app->secret, sid, channel, cd, auth)) {
        subscription_error(c, channel, "AuthError", "invalid signature", 401);
        return;
    }
    if ((r = pusher_member_parse(cd, USER_INFO_MAX, uid, sizeof(uid), &info)) < 0) {
        subscription_error(c, channel, "InvalidRequest", pusher_strerror(r), 400);
        return;
    }
    if (!user_of(c, uid, iuid)) {
        subscription_error(c, channel, "InvalidRequest",
                           "user_id is too long for this app (128 bytes less the app id and 1)",
                           400);
        cJSON_free(info);
        return;
    }
    presence_join(c, channel, room, iuid, info);
}

/* Whether channel is "#server-to-user-" + the socket's signed-in user. */
static bool own_user_channel(struct client *c, const char *channel)
{
    const char *id = pc_of(c)->signed_in;

    return id[0] && strcmp(channel + strlen(PUSHER_USER_CHANNEL_PREFIX), id) == 0;
}

static void msg_subscribe(struct client *c, const cJSON *data)
{
    const char *channel = str_field(data, "channel");
    enum pusher_channel_kind k = channel ? pusher_channel_kind(channel) : PUSHER_CH_INVALID;
    char sid[PUSHER_SOCKET_ID_MAX], room[PUSHER_ROOM_MAX + 1];
    const char *auth = str_field(data, "auth");

    if (k == PUSHER_CH_INVALID ||
        !pusher_room_of(pc_of(c)->app->ns, channel, k == PUSHER_CH_PRESENCE, room)) {
        subscription_error(c, channel ? channel : "", "InvalidChannel", "invalid channel name",
                           400);
        return;
    }
    if (k == PUSHER_CH_USER && !own_user_channel(c, channel)) {
        subscription_error(c, channel, "AuthError",
                           "a server-to-user channel is its signed-in user's only", 403);
        return;
    }
    if (engine__room_linked(c, room) || pending_has(pc_of(c), room))
        return; /* subscribed already: nothing changes */
    pusher_socket_id(client_conn_id(c), sid);
    if (k == PUSHER_CH_PRESENCE) {
        subscribe_presence(c, channel, room, data, sid);
        return;
    }
    if (k != PUSHER_CH_PUBLIC && k != PUSHER_CH_USER &&
        (!auth || !pusher_channel_auth_ok(pc_of(c)->app->key, pc_of(c)->app->secret, sid, channel,
                                          NULL, auth))) {
        subscription_error(c, channel, "AuthError", "invalid signature", 401);
        return;
    }
    engine__room_stream(c, room, NULL);
}

static void msg_unsubscribe(struct client *c, const cJSON *data)
{
    const char *channel = str_field(data, "channel");
    enum pusher_channel_kind k = channel ? pusher_channel_kind(channel) : PUSHER_CH_INVALID;
    struct pclient *pc = pc_of(c);
    char room[PUSHER_ROOM_MAX + 1];

    if (k == PUSHER_CH_INVALID ||
        !pusher_room_of(pc->app->ns, channel, k == PUSHER_CH_PRESENCE, room))
        return; /* never subscribed: no reply is expected */
    for (unsigned i = 0; i < pc->npend; i++) {
        if (strcmp(pc->pend[i].room, room) == 0) { /* still waiting for the session */
            cJSON_free(pc->pend[i].info);
            pc->pend[i] = pc->pend[--pc->npend];
            return;
        }
    }
    if (k == PUSHER_CH_PRESENCE && c->started)
        engine__room_leave(c, room, "");
    else
        engine__room_unsubscribe(c, room);
}

/* ---- client events ---- */

static bool take_token(struct client *c)
{
    struct pclient *pc = pc_of(c);
    uint64_t now = loop_now(c->e->w->loop);

    pc->tokens += (double)(now - pc->refilled) * CLIENT_EVENT_RATE / 1000.0;
    if (pc->tokens > CLIENT_EVENT_RATE)
        pc->tokens = CLIENT_EVENT_RATE;
    pc->refilled = now;
    if (pc->tokens < 1.0)
        return false;
    pc->tokens -= 1.0;
    return true;
}

static void msg_client_event(struct client *c, const char *event, const cJSON *root)
{
    const char *channel = str_field(root, "channel");
    enum pusher_channel_kind k = channel ? pusher_channel_kind(channel) : PUSHER_CH_INVALID;
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
    char room[PUSHER_ROOM_MAX + 1], sid[PUSHER_SOCKET_ID_MAX], *text;
    struct room_broadcast_event ev;

    if (!pc_of(c)->app->client_events) {
        send_error(c, 4301, "client events are not enabled for this app");
        return;
    }
    if ((k != PUSHER_CH_PRIVATE && k != PUSHER_CH_PRESENCE && k != PUSHER_CH_ENCRYPTED) ||
        !pusher_room_of(pc_of(c)->app->ns, channel, k == PUSHER_CH_PRESENCE, room) ||
        !engine__room_linked(c, room)) {
        send_error(c, 4009,
                   "client events need a private or presence channel this connection "
                   "is subscribed to");
        return;
    }
    if (!take_token(c)) {
        send_error(c, 4301, "The rate limit for sending client events exceeded the quota");
        return;
    }
    text = data ? cJSON_PrintUnformatted(data) : NULL;
    if (!text || strlen(text) > CLIENT_EVENT_BYTES) {
        send_error(c, 4301, "client event data is missing or over 10 KB");
        cJSON_free(text);
        return;
    }
    if (engine__room_ephemerals_held(c)) { /* asked to hide: dropped, as native's ephemerals */
        cJSON_free(text);
        return;
    }
    pusher_socket_id(client_conn_id(c), sid);
    ev = (struct room_broadcast_event){.room = room,
                                       .event = event,
                                       .data = text,
                                       .user = client_uid(c),
                                       .exclude = sid,
                                       .batch = true};
    engine__room_broadcast(c->e, &ev, client_conn_id(c));
    /* client_event webhook: data as the client gave it (a string stays
     * the string), user_id on presence channels only, as Pusher sends it. */
    if (c->e->hooks) {
        const char *d = cJSON_IsString(data) ? data->valuestring : text;

        hooks_client_event(c->e->hooks, room, event, d, strlen(d), sid,
                           k == PUSHER_CH_PRESENCE ? client_uid(c) : NULL);
    }
    cJSON_free(text);
}

/* ---- pusher:signin ---- */

/* A refused sign-in: pusher:error 4009, then close 4009 (pusher-js does not
 * reconnect), as Pusher does. */
static void signin_refused(struct client *c, const char *why)
{
    send_error(c, 4009, why);
    client__ws_close(c, 4009, "sign-in refused");
}

/* pusher:signin_success {"user_data": the signed text}, its data a JSON
 * string as Pusher's always is. */
static void signin_success(struct client *c, const char *user_data)
{
    struct buf b = {0}, in = {0};

    buf_append_str(&in, "{\"user_data\":");
    json_append_cstr(&in, user_data);
    buf_append_str(&in, "}");
    buf_append_str(&b, "{\"event\":\"pusher:signin_success\",\"data\":");
    json_append_string(&b, in.data, in.len);
    buf_append_str(&b, "}");
    buf_release(&in);
    send_json(c, &b);
}

/* Whether ids[i] is new to c: not watched yet and not earlier in ids. */
static bool fresh_at(struct client *c, const char *const *ids, size_t i)
{
    size_t idx;

    for (size_t j = 0; j < i; j++)
        if (strcmp(ids[j], ids[i]) == 0)
            return false;
    return watch__find_link(c, ids[i], &idx) == NULL;
}

/* The signed-in user's watchlist: its users' watch links, whose online
 * and offline reach the socket as pusher_internal:watchlist_events
 * (encode_watch), the online ones at once. Over the watch limits
 * (max-watch, max-watch-per-user) nothing is watched: pusher:error 4004. */
static void watch_list(struct client *c, const char *const *ids, size_t n)
{
    size_t fresh = 0;

    for (size_t i = 0; i < n; i++)
        fresh += fresh_at(c, ids, i);
    if (fresh == 0)
        return;
    if ((c->x ? c->x->nlinks : 0) + fresh > (size_t)c->e->w->srv->cfg.max_watch ||
        !watch__reserve(c, fresh)) {
        send_error(c, 4004, "the watchlist is over this server's watch limits");
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (fresh_at(c, ids, i))
            watch__add(c, ids[i]);
}

/* The watchlist's ids, in place, as internal ids of c's app's namespace
 * (each id owned by the list: free()); false when one does not fit. */
static bool watch_ids_of(struct client *c, char **ids, size_t n)
{
    char id[PUSHER_USER_ID_MAX + 1];

    if (!pc_of(c)->app->ns[0])
        return true; /* the first app's ids are the internal ones */
    for (size_t i = 0; i < n; i++) {
        if (!user_of(c, ids[i], id))
            return false;
        free(ids[i]);
        ids[i] = xstrdup(id);
    }
    return true;
}

/* {"auth": "<key>:<hmac of socket_id::user::user_data>", "user_data":
 * "{\"id\":...,\"user_info\":...,\"watchlist\":[...]}"} */
static void msg_signin(struct client *c, const cJSON *data)
{
    const char *auth = str_field(data, "auth"), *ud = str_field(data, "user_data");
    struct pclient *pc = pc_of(c);
    char sid[PUSHER_SOCKET_ID_MAX], id[PUSHER_USER_ID_MAX + 1], iid[PUSHER_USER_ID_MAX + 1];
    char **watch = NULL;
    size_t nwatch = 0;
    int r;

    pusher_socket_id(client_conn_id(c), sid);
    if (!auth || !ud || !pusher_signin_ok(pc->app->key, pc->app->secret, sid, ud, auth)) {
        signin_refused(c, "invalid signature");
        return;
    }
    if ((r = pusher_user_data_parse(ud, USER_INFO_MAX, WATCHLIST_MAX, id, sizeof(id), NULL, &watch,
                                    &nwatch)) < 0) {
        signin_refused(c, pusher_strerror(r));
        return;
    }
    if (!user_of(c, id, iid) || !watch_ids_of(c, watch, nwatch)) {
        pusher_watchlist_free(watch, nwatch);
        signin_refused(c, "an id is too long for this app (128 bytes less the app id and 1)");
        return;
    }
    if ((client_uid(c)[0] && strcmp(client_uid(c), iid) != 0) ||
        (pc->signed_in[0] && strcmp(pc->signed_in, id) != 0)) {
        pusher_watchlist_free(watch, nwatch);
        signin_refused(c, "a connection is one user: it signed in or joined as another");
        return;
    }
    snprintf(pc->signed_in, sizeof(pc->signed_in), "%s", id);
    if (!client_uid(c)[0])
        client__start_as(c, iid); /* a signed-in user is online */
    signin_success(c, ud);
    watch_list(c, (const char *const *)watch, nwatch);
    pusher_watchlist_free(watch, nwatch);
}

/* ---- the event table ---- */

static void msg_ping(struct client *c, const cJSON *root)
{
    struct buf b = {0};

    (void)root;
    buf_append_str(&b, "{\"event\":\"pusher:pong\",\"data\":{}}");
    send_json(c, &b);
}

struct pusher_event {
    const char *name;
    void (*fn)(struct client *c, const cJSON *data);
};

/* clang-format off */
static const struct pusher_event events[] = {
    {"pusher:ping",        msg_ping},
    {"pusher:signin",      msg_signin},
    {"pusher:subscribe",   msg_subscribe},
    {"pusher:unsubscribe", msg_unsubscribe},
};
/* clang-format on */

/* "data" as an object: pusher-js sends one; a string holding JSON is
 * parsed (*owned then gets it, for the caller to cJSON_Delete()). */
static const cJSON *data_of(const cJSON *root, cJSON **owned)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "data");

    *owned = NULL;
    if (cJSON_IsString(d))
        return *owned = cJSON_Parse(d->valuestring);
    return d;
}

static void dispatch(struct client *c, const cJSON *root, const char *event)
{
    cJSON *owned;
    const cJSON *data;

    if (strncmp(event, "client-", 7) == 0) {
        msg_client_event(c, event, root);
        return;
    }
    for (size_t i = 0; i < ARRAY_SIZE(events); i++) {
        if (strcmp(event, events[i].name) == 0) {
            data = data_of(root, &owned);
            events[i].fn(c, cJSON_IsObject(data) ? data : NULL);
            cJSON_Delete(owned);
            return;
        }
    }
    /* Unknown events are ignored, as Pusher ignores them. */
}

/* ---- the WebSocket application ---- */

static void on_open(struct wsconn *ws)
{
    struct client *c = wsconn_app_data(ws);

    wsconn_set_user_data(ws, c);
    c->proto = pusher_proto & 3u; /* pc_of's state is then released by this adapter */
    pc_of(c)->app = opening;
    client__open(c, ws, pusher_proto);
}

static void on_message(struct wsconn *ws, bool binary, const char *p, size_t n)
{
    struct client *c = wsconn_user_data(ws);
    const cJSON *ev;
    cJSON *root;

    if (binary) {
        send_error(c, 4003, "binary frames are not supported");
        wsconn_close(ws, 1003, "binary frames are not supported");
        return;
    }
    root = cJSON_ParseWithLength(p, n);
    ev = root ? cJSON_GetObjectItemCaseSensitive(root, "event") : NULL;
    if (!cJSON_IsString(ev)) {
        send_error(c, 4200, "a message must be a JSON object with a string \"event\"");
    } else {
        if (c->started)
            session__heartbeat(c, ""); /* throttled there */
        if (cJSON_IsObject(root))
            dispatch(c, root, ev->valuestring);
    }
    cJSON_Delete(root);
}

static const struct wsconn_app pusher_app_ws = {
    .on_open = on_open,
    .on_message = on_message,
    .on_close = client__on_ws_close,
};

/* A socket of an unknown app key: refused as Pusher refuses it,
 * pusher:error 4001, then close 4001. */
static void refuse_open(struct wsconn *ws)
{
    static const char msg[] = "{\"event\":\"pusher:error\",\"data\":{\"code\":4001,"
                              "\"message\":\"App key not in this server\"}}";

    wsconn_send_text(ws, msg, sizeof(msg) - 1);
    wsconn_close(ws, 4001, "app key not known");
}

static void refuse_message(struct wsconn *ws, bool binary, const char *p, size_t n)
{
    (void)ws, (void)binary, (void)p, (void)n;
}

static const struct wsconn_app refused_ws = {
    .on_open = refuse_open,
    .on_message = refuse_message,
};

/* GET /app/{key}: the Pusher WebSocket. */
static void get_app(struct conn *conn, const struct http_request *req, struct net_ctx *nc)
{
    const struct pusher_app *app =
        pusher_apps_by_key(apps, napps, req->path + 5, req->path_len - 5);
    struct client *c;

    if (!app) {
        wsconn_upgrade(conn, req, &nc->wsconn_opts, &refused_ws, NULL);
        return;
    }
    c = engine_client_bare(nc->worker);
    opening = app;
    if (!wsconn_upgrade(conn, req, &nc->wsconn_opts, &pusher_app_ws, c))
        engine_client_discard(c);
    opening = NULL;
}

static const struct route routes[] = {
    {"GET", "/app/", get_app},
    {"GET", "/apps/", pusher_api_get},
    {"POST", "/apps/", pusher_api_post},
};

/* A room's channel for the webhooks (hooks_room_name_fn): the room is of
 * the endpoint's app (hooks.c checked its namespace). */
static bool webhook_channel(const char *room, char *out, size_t size)
{
    char channel[PUSHER_CHANNEL_MAX + 1];

    if (!pusher_channel_of(room, channel) || strlen(channel) >= size)
        return false;
    memcpy(out, channel, strlen(channel) + 1);
    return true;
}

int pusher_webhooks(const struct config *cfg, struct hooks_config *hc, char *err, size_t errlen)
{
    for (size_t i = 0; pusher_proto && i < napps; i++) {
        const struct pusher_app *app = &apps[i];
        const char *url = app->webhook[0] ? app->webhook : cfg->pusher_webhook_url;

        if (url && url[0] &&
            hooks_config_add_pusher(hc, url, app->key, app->secret, app->ns, webhook_channel, err,
                                    errlen) < 0)
            return -1;
    }
    return 0;
}

const struct pusher_app *pusher__app_of(const char *id)
{
    return pusher_apps_by_ns(apps, napps, id);
}

int pusher_register(const struct config *cfg, char *err, size_t errlen)
{
    const char *ids[PUSHER_APPS_MAX];
    size_t n;

    if (!cfg->pusher_app || !cfg->pusher_app[0])
        return 0;
    if (pusher_apps_parse(cfg->pusher_app, apps, PUSHER_APPS_MAX, &n, err, errlen) < 0)
        return -1;
    napps = n;
    for (size_t i = 0; i < n; i++)
        ids[i] = apps[i].id;
    apps_set(ids, n); /* ?app= on the native side (apps.h) */
    pusher_encode_init();
    pusher_api_init(apps, napps);
    pusher_proto = adapter_register(&pusher_adapter);
    pusher_routes = (struct route_list)ROUTE_LIST(routes);
    return 0;
}
