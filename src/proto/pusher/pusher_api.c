/* SPDX-License-Identifier: MIT */
/*
 * pusher_api.c - the Pusher HTTP API (pusher_api.h).
 */
#include "pusher_api.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>

#include "adapter.h"
#include "engine_admin.h"
#include "engine_room.h"
#include "engine_state.h"
#include "httpd.h"
#include "json.h"
#include "ns.h"
#include "pusher_auth.h"
#include "pusher_encode.h"
#include "pusher_name.h"
#include "room.h"

#define EVENT_DATA_MAX 10240 /* bytes of an event's data (Pusher's 10 KB) */
#define EVENT_NAME_MAX 200   /* bytes of an event's name */
#define CHANNELS_MAX   100   /* channels of one event */
#define BATCH_MAX      10    /* events of one batch */
#define PATH_MAX_BYTES 512

static const struct pusher_app *apps;
static size_t napps;

void pusher_api_init(const struct pusher_app *a, size_t n)
{
    apps = a;
    napps = n;
}

static void answer(struct conn *c, int status, const char *text)
{
    httpd_respond(c, status, status == 200 ? "application/json" : "text/plain", NULL, text,
                  strlen(text));
}

/* The app named by "/apps/{id}/" and the endpoint after it into *rest;
 * NULL when no app has that id (404). */
static const struct pusher_app *own_app(const struct http_request *req, char *path,
                                        const char **rest)
{
    const struct pusher_app *app;
    size_t idlen;

    if (req->path_len >= PATH_MAX_BYTES)
        return NULL;
    memcpy(path, req->path, req->path_len);
    path[req->path_len] = '\0';
    idlen = strcspn(path + 6, "/");
    if (path[6 + idlen] != '/' || !(app = pusher_apps_by_id(apps, napps, path + 6, idlen)))
        return NULL;
    *rest = path + 6 + idlen + 1;
    return app;
}

/* Checks the request's signature; answers and returns false when bad. */
static bool signed_ok(struct conn *c, const struct pusher_app *app, const struct http_request *req,
                      const char *path)
{
    char method[8], query[PUSHER_API_QUERY_MAX + 1];
    struct pusher_api_req r = {method, path, query, req->body, req->body_len};
    const char *why = NULL;
    int err;

    if (req->method_len >= sizeof(method) || req->query_len > PUSHER_API_QUERY_MAX) {
        answer(c, 400, "request too large\n");
        return false;
    }
    memcpy(method, req->method, req->method_len);
    method[req->method_len] = '\0';
    memcpy(query, req->query ? req->query : "", req->query_len);
    query[req->query_len] = '\0';
    err = pusher_api_verify(&r, app->key, app->secret, (int64_t)time(NULL), &why);
    if (err == 0)
        return true;
    answer(c, pusher_api_status(err), why);
    return false;
}

/* The socket an event's socket_id excludes: its name on every node
 * ("" = none, or not a socket id) and its connection here (0: none). */
struct excluded {
    const char *tag;
    uint64_t conn;
};

static struct excluded excluded(const cJSON *ev)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(ev, "socket_id");
    struct excluded x = {.tag = ""};

    if (cJSON_IsString(s) && pusher_socket_id_valid(s->valuestring)) {
        x.tag = s->valuestring;
        pusher_conn_of(x.tag, &x.conn);
    }
    return x;
}

/* Validates one event object; returns the HTTP status (200 = fine) and
 * a message in *why. */
static int check_event(const cJSON *ev, const char **why)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(ev, "name");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(ev, "data");
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(ev, "channel");
    const cJSON *many = cJSON_GetObjectItemCaseSensitive(ev, "channels");
    const cJSON *ch;
    int n = 0;

    *why = "an event needs a string name (<= 200 bytes), string data and channel or channels\n";
    if (!cJSON_IsString(name) || !name->valuestring[0] ||
        strlen(name->valuestring) > EVENT_NAME_MAX || !cJSON_IsString(data) ||
        (one && !cJSON_IsString(one)) || (many && !cJSON_IsArray(many)) || (!one == !many))
        return 400;
    if (strlen(data->valuestring) > EVENT_DATA_MAX) {
        *why = "event data is over 10 KB\n";
        return 413;
    }
    *why = "channels must be 1 to 100 valid channel names\n";
    if (one)
        return pusher_channel_kind(one->valuestring) != PUSHER_CH_INVALID ? 200 : 400;
    cJSON_ArrayForEach(ch, many)
    {
        if (!cJSON_IsString(ch) || pusher_channel_kind(ch->valuestring) == PUSHER_CH_INVALID)
            return 400;
        n++;
    }
    return n >= 1 && n <= CHANNELS_MAX ? 200 : 400;
}

static void send_to(struct engine *e, const char *ns, const char *channel, const char *name,
                    const char *data, struct excluded x)
{
    enum pusher_channel_kind k = pusher_channel_kind(channel);
    char room[PUSHER_ROOM_MAX + 1];
    struct room_broadcast_event ev = {
        .room = room, .event = name, .data = data, .user = "", .exclude = x.tag};

    if (!pusher_room_of(ns, channel, k == PUSHER_CH_PRESENCE, room))
        return; /* a user channel of an id too long for a room: nobody can hold it */
    engine__room_broadcast(e, &ev, x.conn);
}

/* Sends one checked event to each of its channels, in namespace ns. */
static void publish(struct engine *e, const char *ns, const cJSON *ev)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(ev, "name");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(ev, "data");
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(ev, "channel");
    const cJSON *ch;
    struct excluded exclude = excluded(ev);
    struct buf text = {0}; /* the data as a JSON string: Pusher's data is one */

    json_append_cstr(&text, data->valuestring);
    buf_append(&text, "", 1);
    if (one)
        send_to(e, ns, one->valuestring, name->valuestring, text.data, exclude);
    else
        cJSON_ArrayForEach(ch, cJSON_GetObjectItemCaseSensitive(ev, "channels"))
            send_to(e, ns, ch->valuestring, name->valuestring, text.data, exclude);
    buf_release(&text);
}

/* The events of the body: one (events) or a batch (batch_events); every
 * one is checked before any is sent, so a refused request sends none. */
static void post_events(struct conn *c, const struct http_request *req, struct engine *e,
                        const char *ns, bool batch)
{
    cJSON *root = cJSON_ParseWithLength(req->body ? req->body : "", req->body_len);
    const cJSON *list = batch ? cJSON_GetObjectItemCaseSensitive(root, "batch") : NULL;
    const cJSON *ev;
    const char *why = "the body must be a JSON object\n";
    int status = cJSON_IsObject(root) ? 200 : 400, n = 0;

    if (status == 200 && batch) {
        why = "batch must be an array of 1 to 10 events\n";
        n = cJSON_GetArraySize(list);
        status = cJSON_IsArray(list) && n >= 1 && n <= BATCH_MAX ? 200 : 400;
        cJSON_ArrayForEach(ev, list) if (status == 200 && (status = check_event(ev, &why)) == 200 &&
                                         cJSON_GetObjectItemCaseSensitive(ev, "channels")) status =
            400; /* a batch's events name one channel each */
    } else if (status == 200) {
        status = check_event(root, &why);
    }
    if (status == 200 && batch)
        cJSON_ArrayForEach(ev, list) publish(e, ns, ev);
    else if (status == 200)
        publish(e, ns, root);
    cJSON_Delete(root);
    answer(c, status, status == 200 ? "{}" : why);
}

/* The user id of "users/<id>/terminate_connections" into uid, or false. */
static bool terminate_path(const char *rest, char uid[PUSHER_USER_ID_MAX + 1])
{
    static const char head[] = "users/", tail[] = "/terminate_connections";
    size_t n = strlen(rest), idn;

    if (n <= sizeof(head) - 1 + sizeof(tail) - 1 || strncmp(rest, head, sizeof(head) - 1) != 0 ||
        strcmp(rest + n - (sizeof(tail) - 1), tail) != 0)
        return false;
    idn = n - (sizeof(head) - 1) - (sizeof(tail) - 1);
    if (idn > PUSHER_USER_ID_MAX)
        return false;
    memcpy(uid, rest + sizeof(head) - 1, idn);
    uid[idn] = '\0';
    return true;
}

/* POST users/{id}/terminate_connections: every socket of the user (its
 * sessions: signed in, or in a presence channel) on every node is closed
 * with pusher:error 4009, as the admin API's kick ends them. */
static void terminate(struct conn *c, struct engine *e, const char *ns, const char *uid)
{
    char id[PUSHER_USER_ID_MAX + 1];

    if (!room_id_valid(uid)) {
        answer(c, 400, "user ids are 1-128 of A-Z a-z 0-9 - _ . ~ : @\n");
        return;
    }
    if (!ns_join(ns, uid, id, PUSHER_USER_ID_MAX)) {
        answer(c, 400, "user id too long for this app (128 bytes less the app id and 1)\n");
        return;
    }
    engine__kick_user(e, id, "connection terminated by the server");
    answer(c, 200, "{}");
}

void pusher_api_post(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    char path[PATH_MAX_BYTES], uid[PUSHER_USER_ID_MAX + 1];
    const struct pusher_app *app;
    const char *rest;
    bool events, term;

    if (!(app = own_app(req, path, &rest))) {
        answer(c, 404, "unknown app\n");
        return;
    }
    events = strcmp(rest, "events") == 0 || strcmp(rest, "batch_events") == 0;
    term = !events && terminate_path(rest, uid);
    if (!events && !term) {
        answer(c, 404, "unknown endpoint\n");
        return;
    }
    if (!signed_ok(c, app, req, path))
        return;
    if (term)
        terminate(c, nc->app, app->ns, uid);
    else
        post_events(c, req, nc->app, app->ns, rest[0] == 'b');
}

/* ---- reads: GET channels, channels/{name}[/users] ---- */

/* The read's info flags, as the arg of the engine's read. */
#define INFO_USERS 'u' /* info=user_count */
#define INFO_SUBS  's' /* info=subscription_count */

/* The room info the engine read (engine_read_room()), parsed; NULL after
 * a 503 when the room's owner did not answer in time. */
static cJSON *room_info(struct conn *c, const char *json, size_t n)
{
    cJSON *root = cJSON_ParseWithLength(json, n);

    if (!root || !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(root, "count"))) {
        cJSON_Delete(root);
        answer(c, 503, "the channel could not be read in time; try again\n");
        return NULL;
    }
    return root;
}

static double num_field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* {"occupied": bool[, "user_count": n][, "subscription_count": n]}: a
 * presence channel is occupied while it has a member (its published
 * ones: hidden users are absent, and so are their sockets), another
 * channel while a socket is subscribed. */
static void info_done(struct conn *c, const char *arg, const char *json, size_t n)
{
    cJSON *root = room_info(c, json, n);
    const cJSON *room;
    struct buf b = {0};
    double count, subs;
    bool presence;

    if (!root)
        return;
    room = cJSON_GetObjectItemCaseSensitive(root, "room");
    presence = cJSON_IsString(room) && pusher_room_is_presence(room->valuestring);
    count = num_field(root, "count");
    subs = num_field(root, "subscriptions");
    buf_printf(&b, "{\"occupied\":%s", (presence ? count : subs) > 0 ? "true" : "false");
    if (strchr(arg, INFO_USERS))
        buf_printf(&b, ",\"user_count\":%.0f", count);
    if (strchr(arg, INFO_SUBS))
        buf_printf(&b, ",\"subscription_count\":%.0f", subs);
    buf_append(&b, "}", 2);
    answer(c, 200, b.data);
    buf_release(&b);
    cJSON_Delete(root);
}

/* {"users":[{"id":...},...]}: the channel's published members (the first
 * 1000, as the native room read lists them). */
static void users_done(struct conn *c, const char *arg, const char *json, size_t n)
{
    cJSON *root = room_info(c, json, n);
    const cJSON *m;
    struct buf b = {0};
    bool first = true;

    (void)arg;
    if (!root)
        return;
    buf_append_str(&b, "{\"users\":[");
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(root, "members"))
    {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(m, "user");
        if (!cJSON_IsString(u))
            continue;
        buf_append_str(&b, first ? "{\"id\":" : ",{\"id\":");
        json_append_cstr(&b, ns_strip(u->valuestring));
        buf_append_str(&b, "}");
        first = false;
    }
    buf_append(&b, "]}", 3);
    answer(c, 200, b.data);
    buf_release(&b);
    cJSON_Delete(root);
}

/* The request's query as a C string into q (PUSHER_API_QUERY_MAX + 1). */
static void query_of(const struct http_request *req, char *q)
{
    size_t n = req->query_len > PUSHER_API_QUERY_MAX ? 0 : req->query_len;

    memcpy(q, req->query && n ? req->query : "", n);
    q[n] = '\0';
}

/* Whether the query's info names field (info=user_count,subscription_count). */
static bool info_has(const struct http_request *req, const char *field)
{
    char q[PUSHER_API_QUERY_MAX + 1], v[256];
    size_t fl = strlen(field);

    query_of(req, q);
    if (pusher_query_get(q, "info", v, sizeof(v)) < 0)
        return false;
    for (const char *p = v; (p = strstr(p, field)) != NULL; p += fl)
        if ((p == v || p[-1] == ',') && (p[fl] == '\0' || p[fl] == ','))
            return true;
    return false;
}

/* GET channels/{name}[?info=user_count,subscription_count] or
 * channels/{name}/users (presence channels only). */
static void get_channel(struct conn *c, const struct http_request *req, struct engine *e,
                        const char *ns, char *name)
{
    char *slash = strchr(name, '/'), room[PUSHER_ROOM_MAX + 1], flags[3] = {0};
    bool users = slash && strcmp(slash, "/users") == 0;
    enum pusher_channel_kind k;
    size_t nf = 0;

    if (slash && !users) {
        answer(c, 404, "unknown endpoint\n");
        return;
    }
    if (slash)
        *slash = '\0';
    k = pusher_channel_kind(name);
    if (k == PUSHER_CH_INVALID || !pusher_room_of(ns, name, k == PUSHER_CH_PRESENCE, room)) {
        answer(c, 400, "invalid channel name\n");
        return;
    }
    if (k != PUSHER_CH_PRESENCE && (users || info_has(req, "user_count"))) {
        answer(c, 400,
               users ? "users are listed for presence channels only\n"
                     : "user_count is only available for presence channels\n");
        return;
    }
    if (users) {
        engine_read_room(c, e, room, users_done, NULL);
        return;
    }
    if (info_has(req, "user_count"))
        flags[nf++] = INFO_USERS;
    if (info_has(req, "subscription_count"))
        flags[nf++] = INFO_SUBS;
    engine_read_room(c, e, room, info_done, flags);
}

/* One room of the engine's list as a channel of the answer, if it is
 * one: a room of namespace ns, a presence channel with a published
 * member, another channel (not a server-to-user one) with a subscribed
 * socket, whose name starts with prefix. */
static void list_channel(struct buf *b, bool *first, const cJSON *r, const char *ns,
                         const char *prefix, bool user_count)
{
    const cJSON *room = cJSON_GetObjectItemCaseSensitive(r, "room");
    char channel[PUSHER_CHANNEL_MAX + 1];
    bool presence;
    double count;

    if (!cJSON_IsString(room) || !ns_in(room->valuestring, ns) ||
        !pusher_channel_of(room->valuestring, channel) || channel[0] == '#' ||
        strncmp(channel, prefix, strlen(prefix)) != 0)
        return;
    presence = pusher_room_is_presence(room->valuestring);
    count = num_field(r, "count");
    if ((presence ? count : num_field(r, "subscriptions")) <= 0)
        return;
    buf_append_str(b, *first ? "" : ",");
    json_append_cstr(b, channel);
    if (user_count)
        buf_printf(b, ":{\"user_count\":%.0f}", count);
    else
        buf_append_str(b, ":{}");
    *first = false;
}

/* {"channels":{"<name>":{}|{"user_count":n},...}} from the engine's list;
 * arg is the info flag (or '-'), the app's namespace prefix (ns.h: ""
 * or "<id>|"; no channel name holds NS_SEP) and then the prefix. */
static void list_done(struct conn *c, const char *arg, const char *json, size_t n)
{
    cJSON *root = cJSON_ParseWithLength(json, n);
    const char *sep = strchr(arg + 1, NS_SEP), *prefix = sep ? sep + 1 : arg + 1;
    char ns[NS_PREFIX_MAX + 1];
    const cJSON *r;
    struct buf b = {0};
    bool first = true;

    ns_prefix_of(arg + 1, ns);
    buf_append_str(&b, "{\"channels\":{");
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(root, "rooms"))
        list_channel(&b, &first, r, ns, prefix, arg[0] == INFO_USERS);
    buf_append(&b, "}}", 3);
    answer(c, 200, b.data);
    buf_release(&b);
    cJSON_Delete(root);
}

/* GET channels[?filter_by_prefix=P][&info=user_count]: the occupied
 * channels; user_count needs a prefix of presence channels, as on Pusher. */
static void get_channels(struct conn *c, const struct http_request *req, struct engine *e,
                         const char *ns)
{
    char q[PUSHER_API_QUERY_MAX + 1], arg[NS_PREFIX_MAX + PUSHER_CHANNEL_MAX + 2] = "-";
    size_t nl = strlen(ns);
    bool users = info_has(req, "user_count");
    int n;

    query_of(req, q);
    memcpy(arg + 1, ns, nl + 1);
    n = pusher_query_get(q, "filter_by_prefix", arg + 1 + nl, PUSHER_CHANNEL_MAX + 1);
    if (n == -2 || strchr(arg + 1 + nl, NS_SEP)) {
        answer(c, 400, "filter_by_prefix is over 164 bytes or malformed\n");
        return;
    }
    if (users && strncmp(arg + 1 + nl, "presence-", 9) != 0) {
        answer(c, 400,
               "user_count is only available for presence channels: give "
               "filter_by_prefix=presence-\n");
        return;
    }
    if (users)
        arg[0] = INFO_USERS;
    engine_list_rooms(c, e, ns, list_done, arg);
}

void pusher_api_get(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    char path[PATH_MAX_BYTES];
    const struct pusher_app *app;
    const char *rest;

    if (!(app = own_app(req, path, &rest))) {
        answer(c, 404, "unknown app\n");
        return;
    }
    if (!signed_ok(c, app, req, path))
        return;
    if (strncmp(rest, "channels/", 9) == 0 && rest[9])
        get_channel(c, req, nc->app, app->ns, (char *)rest + 9);
    else if (strcmp(rest, "channels") == 0)
        get_channels(c, req, nc->app, app->ns);
    else
        answer(c, 404, "unknown endpoint\n");
}
