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
#include "engine_room.h"
#include "engine_state.h"
#include "httpd.h"
#include "json.h"
#include "pusher_auth.h"
#include "pusher_encode.h"
#include "pusher_name.h"

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

    if (k == PUSHER_CH_USER || !pusher_room_of(channel, k == PUSHER_CH_PRESENCE, room))
        return; /* server-to-user channels: not in this version */
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

void pusher_api_post(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    char path[PATH_MAX_BYTES];
    const char *rest;

    if (!own_app(req, path, &rest)) {
        answer(c, 404, "unknown app\n");
        return;
    }
    if (strcmp(rest, "events") != 0 && strcmp(rest, "batch_events") != 0) {
        answer(c, 404, "unknown endpoint\n");
        return;
    }
    if (signed_ok(c, req, path))
        post_events(c, req, nc->app, rest[0] == 'b');
}

void pusher_api_get(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    char path[PATH_MAX_BYTES];
    const char *rest;

    (void)nc;
    if (!own_app(req, path, &rest)) {
        answer(c, 404, "unknown app\n");
        return;
    }
    if (signed_ok(c, req, path))
        answer(c, 501, "the channel and user reads are not in this version of presenced\n");
}
