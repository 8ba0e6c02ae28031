/* SPDX-License-Identifier: MIT */
/*
 * engine_admin.c - the admin API under /v1/admin/ (docs/api.md): the HTTP
 * side. It checks the key, parses the path and the JSON body, and sends one
 * OP_ADMIN to the owner of the user concerned (engine_privacy.c does the
 * work there and answers "NNN" + JSON), or reads without privacy filtering.
 *
 * Authentication: "Authorization: Bearer <admin-api-key>", compared in
 * constant time over SHA-256 digests (so neither content nor length leaks
 * through timing). No key configured: every call is 403 admin_disabled.
 */
#include "engine.h"
#include "engine_admin.h"

#include <signal.h>
#include <unistd.h>

#include "engine_state.h"
#include "frame.h"
#include "http_read.h"
#include "msg.h"
#include "room.h"

#include "http.h"
#include "httpd.h"
#include "json.h"

#define ADMIN_IDS_MAX 10000 /* ids in one contacts call (STORE_IDS_MAX) */

static bool key_ok(const struct config *cfg, const struct http_request *req)
{
    return http_bearer_is(req, cfg->admin_api_key);
}

/* Copies the next path segment of [*p, end) into out; false when absent,
 * empty or not a valid id. */
static bool segment(const char **p, const char *end, char out[PRESENCE_ID_MAX + 1])
{
    const char *s = *p;
    size_t n = 0;

    while (s + n < end && s[n] != '/')
        n++;
    if (n == 0 || n > PRESENCE_ID_MAX)
        return false;
    memcpy(out, s, n);
    out[n] = '\0';
    *p = s + n + (s + n < end);
    return presence_id_valid(out);
}

/* segment() into one of a message's ids. */
static bool segment_id(const char **p, const char *end, const char **field)
{
    char id[PRESENCE_ID_MAX + 1];

    if (!segment(p, end, id))
        return false;
    emsg_set_id(field, id);
    return true;
}

static bool is_method(const struct http_request *req, const char *m)
{
    return req->method_len == strlen(m) && memcmp(req->method, m, req->method_len) == 0;
}

/* Sends em to the owner of key. A write (everything but GET privacy) is
 * answered only when its outcome is known: a 2xx once it was applied, an
 * error when nothing was, never a timeout after which it may still apply. */
void engine__kick_user(struct engine *e, const char *uid, const char *reason)
{
    struct emsg *em = emsg_new(OP_ADMIN, 0);

    em->arg = ADMIN_KICK;
    emsg_set_id(&em->uid, uid);
    if (reason)
        em->text = xstrdup(reason);
    owner_send(e, owner_of_user(e, uid), em); /* em->query 0: no answer */
}

static void send_admin(struct conn *c, struct worker *w, struct emsg *em, const char *key)
{
    struct engine *e = engine_of(w);
    int kind = em->arg == ADMIN_GET_PRIVACY ? QUERY_ADMIN : QUERY_ADMIN_WRITE;
    struct query *q = http_read__query_new(c, kind, 1);

    em->query = (uint64_t)(uintptr_t)q;
    http_read__query_set_id(q, 0, key);
    owner_send(e, owner_of_user(e, key), em);
}

/* {"online":..,"lastSeen":..,"invisible":..}, any subset; false = 400 sent. */
static bool parse_privacy(struct conn *c, const cJSON *root, struct emsg *em)
{
    if (privacy_parse_update(root, &em->priv, &em->priv_mask) < 0) {
        httpd_error(c, 400, "bad_request",
                    "body: {\"online\",\"lastSeen\": everyone|contacts|nobody, "
                    "\"invisible\": true|false}, any subset");
        return false;
    }
    return true;
}

/* Copies a JSON array of user ids into em->ids; false = 400 sent. */
static bool parse_ids(struct conn *c, const cJSON *arr, struct emsg *em)
{
    const cJSON *u;
    size_t n = 0;

    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > ADMIN_IDS_MAX) {
        httpd_error(c, 400, "bad_request", "user ids must be an array of at most 10000");
        return false;
    }
    em->ids = xcalloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*em->ids));
    cJSON_ArrayForEach(u, arr)
    {
        if (!cJSON_IsString(u) || !presence_id_valid(u->valuestring)) {
            httpd_error(c, 400, "bad_user", "user ids must be 1-128 of A-Z a-z 0-9 - _ . ~ : @");
            return false;
        }
        em->ids[n++] = xstrdup(u->valuestring);
        em->nids = n;
    }
    return true;
}

/* POST .../contacts {"add":[..],"remove":[..]}: one or two calls, in order. */
static bool contacts_post(struct conn *c, const cJSON *root, struct emsg *em)
{
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(root, "add");
    const cJSON *rm = cJSON_GetObjectItemCaseSensitive(root, "remove");

    if ((add && rm) || (!add && !rm)) {
        httpd_error(c, 400, "bad_request", "give exactly one of \"add\" or \"remove\"");
        return false;
    }
    em->arg = add ? ADMIN_CONTACTS_ADD : ADMIN_CONTACTS_REMOVE;
    return parse_ids(c, add ? add : rm, em);
}

/* The users/{id}/... calls: 1 = em is ready, 0 = unknown path or method,
 * -1 = answered 400 already. */
static int user_call(struct conn *c, const struct http_request *req, const char *p, const char *end,
                     struct emsg *em, const cJSON *body)
{
    char what[PRESENCE_ID_MAX + 1];

    if (!segment_id(&p, end, &em->uid)) {
        httpd_error(c, 400, "bad_user", "user ids must be 1-128 of A-Z a-z 0-9 - _ . ~ : @");
        return -1;
    }
    if (!segment(&p, end, what))
        return 0;
    if (strcmp(what, "privacy") == 0 && p == end) {
        em->arg = is_method(req, "GET") ? ADMIN_GET_PRIVACY : ADMIN_SET_PRIVACY;
        if (is_method(req, "GET"))
            return 1;
        return !is_method(req, "PUT") ? 0 : parse_privacy(c, body, em) ? 1 : -1;
    }
    if (strcmp(what, "contacts") == 0 && p == end) {
        if (is_method(req, "PUT")) {
            em->arg = ADMIN_CONTACTS_REPLACE;
            return parse_ids(c, cJSON_GetObjectItemCaseSensitive(body, "contacts"), em) ? 1 : -1;
        }
        return !is_method(req, "POST") ? 0 : contacts_post(c, body, em) ? 1 : -1;
    }
    if (strcmp(what, "blocks") == 0 && p < end) {
        if (!is_method(req, "PUT") && !is_method(req, "DELETE"))
            return 0;
        if (!segment_id(&p, end, &em->viewer) || p != end) {
            httpd_error(c, 400, "bad_user", "user ids must be 1-128 of A-Z a-z 0-9 - _ . ~ : @");
            return -1;
        }
        em->arg = is_method(req, "DELETE") ? ADMIN_UNBLOCK : ADMIN_BLOCK;
        /* A user hidden from herself would vanish from her own views. */
        if (em->arg == ADMIN_BLOCK && strcmp(em->uid, em->viewer) == 0) {
            httpd_error(c, 400, "self_block", "a user cannot block herself");
            return -1;
        }
        return 1;
    }
    if (strcmp(what, "kick") == 0 && p == end && is_method(req, "POST")) {
        const cJSON *sid = cJSON_GetObjectItemCaseSensitive(body, "session");
        const cJSON *why = cJSON_GetObjectItemCaseSensitive(body, "reason");
        em->arg = ADMIN_KICK;
        if ((sid && (!cJSON_IsString(sid) || !presence_id_valid(sid->valuestring))) ||
            (why && (!cJSON_IsString(why) || strlen(why->valuestring) > 200)) ||
            (body && !cJSON_IsObject(body))) {
            httpd_error(c, 400, "bad_request",
                        "body: {\"session\": a session id, \"reason\": text of at most 200 bytes}");
            return -1;
        }
        if (sid)
            emsg_set_id(&em->sid, sid->valuestring);
        if (why)
            em->text = xstrdup(why->valuestring);
        return 1;
    }
    return 0;
}

/* The whole body as one JSON value, held to json_check() first (no NUL in
 * a string, valid UTF-8, no trailing data), or NULL. */
static cJSON *parse_body(const struct http_request *req)
{
    if (json_check(req->body, req->body_len) < 0)
        return NULL;
    return cJSON_ParseWithLength(req->body, req->body_len);
}

static void users_route(struct conn *c, const struct http_request *req, struct worker *w,
                        const char *p, const char *end)
{
    cJSON *body = NULL;
    struct emsg *em = emsg_new(OP_ADMIN, 0);
    int ok;

    if (req->body_len > 0 && !(body = parse_body(req))) {
        httpd_error(c, 400, "bad_json", "the body is not valid JSON");
        emsg_free(&em->msg);
        return;
    }
    ok = user_call(c, req, p, end, em, body);
    cJSON_Delete(body);
    if (ok > 0) {
        send_admin(c, w, em, em->uid);
        return;
    }
    if (ok == 0)
        httpd_error(c, 404, "not_found", "no such admin resource or method");
    emsg_free(&em->msg);
}

static void rooms_route(struct conn *c, struct worker *w, const char *p, const char *end)
{
    struct engine *e = engine_of(w);
    struct emsg *em;

    if (p == end) { /* every worker lists its rooms */
        struct query *q = http_read__query_new(c, QUERY_ADMIN_ROOMS, e->w->srv->nworkers);
        for (unsigned i = 0; i < e->w->srv->nworkers; i++) {
            em = emsg_new(OP_ADMIN_ROOMS, 0);
            em->query = (uint64_t)(uintptr_t)q;
            em->index = i;
            owner_send(e, i, em);
        }
        return;
    }
    em = emsg_new(OP_ADMIN_ROOMS, 0);
    if (!segment_id(&p, end, &em->room) || p != end || !room_id_valid(em->room)) {
        httpd_error(c, 400, "bad_room", "room must be 1-128 of A-Z a-z 0-9 - _ . ~ : @");
        emsg_free(&em->msg);
        return;
    }
    em->arg = 1;
    em->query = (uint64_t)(uintptr_t)http_read__query_new(c, QUERY_ADMIN, 1);
    http_read__query_set_id((struct query *)(uintptr_t)em->query, 0, em->room);
    owner_send(e, owner_of_room(e, em->room), em);
}

/* POST /v1/admin/drain: the same drain as SIGTERM (docs/api.md): answered
 * first, then the signal that main.c waits for, so that the one shutdown
 * path runs (the spread-out closes, the saved state, the exit). */
static void drain_route(struct conn *c, struct worker *w)
{
    struct buf b = {0};

    if (atomic_load(&w->srv->shutting_down)) {
        httpd_error(c, 409, "draining", "the server is draining already");
        return;
    }
    buf_printf(&b, "{\"draining\":true,\"windowMs\":%lld}\n",
               (long long)w->srv->cfg.drain_window_ms);
    httpd_respond(c, 202, "application/json", NULL, b.data, b.len);
    buf_release(&b);
    kill(getpid(), SIGTERM);
}

void engine_http_admin(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    struct worker *w = nc->worker;
    static const char prefix[] = "/v1/admin/";
    const struct config *cfg = &w->srv->cfg;
    const char *p = req->path + sizeof(prefix) - 1, *end = req->path + req->path_len;

    if (!cfg->admin_api_key[0]) {
        httpd_error(c, 403, "admin_disabled", "the admin API is off: set admin-api-key");
        return;
    }
    if (!key_ok(cfg, req)) {
        httpd_error(c, 401, "unauthorized", "a valid admin key is required");
        return;
    }
    if (end - p == 8 && memcmp(p, "presence", 8) == 0 && is_method(req, "GET"))
        http_read__read(c, req, engine_of(w), QUERY_PRESENCE, true);
    else if (end - p == 8 && memcmp(p, "lastseen", 8) == 0 && is_method(req, "GET"))
        http_read__read(c, req, engine_of(w), QUERY_LASTSEEN, true);
    else if (end - p >= 5 && memcmp(p, "rooms", 5) == 0 && (end - p == 5 || p[5] == '/') &&
             is_method(req, "GET"))
        rooms_route(c, w, p + 5 + (end - p > 5), end);
    else if (end - p == 5 && memcmp(p, "drain", 5) == 0 && is_method(req, "POST"))
        drain_route(c, w);
    else if (end - p > 6 && memcmp(p, "users/", 6) == 0)
        users_route(c, req, w, p + 6, end);
    else
        httpd_error(c, 404, "not_found", "no such admin resource or method");
}

/* The worker side of OP_ADMIN_ROOMS: its room list (arg 0) or one room's
 * members (arg 1), as an answer part. */
void engine__admin_rooms(struct engine *e, struct emsg *em)
{
    struct buf b = {0};
    bool first = true;

    if (em->arg) {
        buf_append_str(&b, "200");
        room_admin_members(e->rooms, em->room, &b);
        buf_append(&b, "\n", 1);
    } else {
        room_admin_list(e->rooms, &b, &first);
    }
    http_read__answer(e, em, buf_payload(&b));
}
