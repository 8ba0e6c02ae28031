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
#include "pusher_auth.h"
#include "pusher_encode.h"
#include "pusher_name.h"
#include "room.h"

#define EVENT_DATA_MAX 10240 /* bytes of an event's data (Pusher's 10 KB) */
#define EVENT_NAME_MAX 200   /* bytes of an event's name */
#define CHANNELS_MAX   100   /* channels of one event */
#define BATCH_MAX      10    /* events of one batch */
#define PATH_MAX_BYTES 512

static const struct pusher_app *app;

void pusher_api_init(const struct pusher_app *a)
{
    app = a;
}

static void answer(struct conn *c, int status, const char *text)
{
    httpd_respond(c, status, status == 200 ? "application/json" : "text/plain", NULL, text,
                  strlen(text));
}

/* The endpoint after "/apps/{id}/" into *rest; false when the id is not
 * the app's (404). */
static bool own_app(const struct http_request *req, char *path, const char **rest)
{
    size_t idlen = strlen(app->id);

    if (req->path_len >= PATH_MAX_BYTES)
        return false;
    memcpy(path, req->path, req->path_len);
    path[req->path_len] = '\0';
    if (strncmp(path + 6, app->id, idlen) != 0 || path[6 + idlen] != '/')
        return false;
    *rest = path + 6 + idlen + 1;
    return true;
}

/* Checks the request's signature; answers and returns false when bad. */
static bool signed_ok(struct conn *c, const struct http_request *req, const char *path)
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

static void send_to(struct engine *e, const char *channel, const char *name, const char *data,
                    struct excluded x)
{
    enum pusher_channel_kind k = pusher_channel_kind(channel);
    char room[PUSHER_ROOM_MAX + 1];
    struct room_broadcast_event ev = {
        .room = room, .event = name, .data = data, .user = "", .exclude = x.tag};

    if (!pusher_room_of(channel, k == PUSHER_CH_PRESENCE, room))
        return; /* a user channel of an id too long for a room: nobody can hold it */
    engine__room_broadcast(e, &ev, x.conn);
}

/* Sends one checked event to each of its channels. */
static void publish(struct engine *e, const cJSON *ev)
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
        send_to(e, one->valuestring, name->valuestring, text.data, exclude);
    else
        cJSON_ArrayForEach(ch, cJSON_GetObjectItemCaseSensitive(ev, "channels"))
            send_to(e, ch->valuestring, name->valuestring, text.data, exclude);
    buf_release(&text);
}

/* The events of the body: one (events) or a batch (batch_events); every
 * one is checked before any is sent, so a refused request sends none. */
static void post_events(struct conn *c, const struct http_request *req, struct engine *e,
                        bool batch)
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
        cJSON_ArrayForEach(ev, list) publish(e, ev);
    else if (status == 200)
        publish(e, root);
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
static void terminate(struct conn *c, struct engine *e, const char *uid)
{
    if (!room_id_valid(uid)) {
        answer(c, 400, "user ids are 1-128 of A-Z a-z 0-9 - _ . ~ : @\n");
        return;
    }
    engine__kick_user(e, uid, "connection terminated by the server");
    answer(c, 200, "{}");
}

void pusher_api_post(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    char path[PATH_MAX_BYTES], uid[PUSHER_USER_ID_MAX + 1];
    const char *rest;
    bool events, term;

    if (!own_app(req, path, &rest)) {
        answer(c, 404, "unknown app\n");
        return;
    }
    events = strcmp(rest, "events") == 0 || strcmp(rest, "batch_events") == 0;
    term = !events && terminate_path(rest, uid);
    if (!events && !term) {
        answer(c, 404, "unknown endpoint\n");
        return;
    }
    if (!signed_ok(c, req, path))
        return;
    if (term)
        terminate(c, nc->app, uid);
    else
        post_events(c, req, nc->app, rest[0] == 'b');
}

/* ---- reads: GET channels/{name}[/users] ---- */

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

/* {"occupied": bool[, "user_count": n]}: a presence channel is occupied
 * while it has a member (its published ones: hidden users are absent). */
static void info_answer(struct conn *c, const char *json, size_t n, bool user_count)
{
    cJSON *root = room_info(c, json, n);
    struct buf b = {0};
    int count;

    if (!root)
        return;
    count = cJSON_GetObjectItemCaseSensitive(root, "count")->valueint;
    buf_printf(&b, "{\"occupied\":%s", count > 0 ? "true" : "false");
    if (user_count)
        buf_printf(&b, ",\"user_count\":%d", count);
    buf_append(&b, "}", 2);
    answer(c, 200, b.data);
    buf_release(&b);
    cJSON_Delete(root);
}

static void info_done(struct conn *c, const char *json, size_t n)
{
    info_answer(c, json, n, false);
}

static void info_count_done(struct conn *c, const char *json, size_t n)
{
    info_answer(c, json, n, true);
}

/* {"users":[{"id":...},...]}: the channel's published members (the first
 * 1000, as the native room read lists them). */
static void users_done(struct conn *c, const char *json, size_t n)
{
    cJSON *root = room_info(c, json, n);
    const cJSON *m;
    struct buf b = {0};
    bool first = true;

    if (!root)
        return;
    buf_append_str(&b, "{\"users\":[");
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(root, "members"))
    {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(m, "user");
        if (!cJSON_IsString(u))
            continue;
        buf_append_str(&b, first ? "{\"id\":" : ",{\"id\":");
        json_append_cstr(&b, u->valuestring);
        buf_append_str(&b, "}");
        first = false;
    }
    buf_append(&b, "]}", 3);
    answer(c, 200, b.data);
    buf_release(&b);
    cJSON_Delete(root);
}

/* Whether the query's info names field (info=user_count,subscription_count). */
static bool info_has(const struct http_request *req, const char *field)
{
    char q[PUSHER_API_QUERY_MAX + 1], v[256];
    size_t fl = strlen(field);

    memcpy(q, req->query ? req->query : "", req->query_len);
    q[req->query_len] = '\0';
    if (pusher_query_get(q, "info", v, sizeof(v)) < 0)
        return false;
    for (const char *p = v; (p = strstr(p, field)) != NULL; p += fl)
        if ((p == v || p[-1] == ',') && (p[fl] == '\0' || p[fl] == ','))
            return true;
    return false;
}

/* GET channels/{name} or channels/{name}/users. Presence channels only:
 * the occupancy of other channels (subscriptions without members) is not
 * known across workers and nodes in this version (501). */
static void get_channel(struct conn *c, const struct http_request *req, struct engine *e,
                        char *name)
{
    char *slash = strchr(name, '/'), room[PUSHER_ROOM_MAX + 1];
    bool users = slash && strcmp(slash, "/users") == 0;
    enum pusher_channel_kind k;

    if (slash && !users) {
        answer(c, 404, "unknown endpoint\n");
        return;
    }
    if (slash)
        *slash = '\0';
    k = pusher_channel_kind(name);
    if (k == PUSHER_CH_INVALID || !pusher_room_of(name, k == PUSHER_CH_PRESENCE, room)) {
        answer(c, 400, "invalid channel name\n");
        return;
    }
    if (k != PUSHER_CH_PRESENCE) {
        answer(c, users ? 400 : 501,
               users ? "users are listed for presence channels only\n"
                     : "only presence channels are read in this version of presenced\n");
        return;
    }
    engine_read_room(c, e, room,
                     users                         ? users_done
                     : info_has(req, "user_count") ? info_count_done
                                                   : info_done);
}

void pusher_api_get(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    char path[PATH_MAX_BYTES];
    const char *rest;

    if (!own_app(req, path, &rest)) {
        answer(c, 404, "unknown app\n");
        return;
    }
    if (!signed_ok(c, req, path))
        return;
    if (strncmp(rest, "channels/", 9) == 0 && rest[9])
        get_channel(c, req, nc->app, (char *)rest + 9);
    else if (strcmp(rest, "channels") == 0)
        answer(c, 501, "the channel list is not in this version of presenced\n");
    else
        answer(c, 404, "unknown endpoint\n");
}
