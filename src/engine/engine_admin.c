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
 *
 * The reads the admin page (www/admin/) polls are here too, each bounded:
 * /stats from the workers' metrics on the HTTP worker (no message at
 * all), /nodes from the cluster home (worker 0, which knows the node's
 * epoch), /users/{id} from the user's owner, /rooms?top=N as each
 * worker's N busiest rooms merged into the N busiest of all.
 */
#include "engine.h"
#include "engine_admin.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine_privacy.h"
#include "engine_state.h"
#include "frame.h"
#include "http_read.h"
#include "msg.h"
#include "room.h"
#include "store.h"

#include "cluster.h"
#include "health.h"
#include "http.h"
#include "httpd.h"
#include "json.h"
#include "metrics.h"

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
    bool read = em->arg == ADMIN_GET_PRIVACY || em->arg == ADMIN_GET_USER;
    int kind = read ? QUERY_ADMIN : QUERY_ADMIN_WRITE;
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
    if (p == end) {
        em->arg = ADMIN_GET_USER;
        return is_method(req, "GET") ? 1 : 0;
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

/* Whether the query string has key (as "key=..." or "key" alone). */
static bool query_has(const char *q, size_t len, const char *key)
{
    size_t k = strlen(key), i = 0;

    while (i < len) {
        const char *amp = memchr(q + i, '&', len - i);
        size_t end = amp ? (size_t)(amp - q) : len;
        if (end - i >= k && memcmp(q + i, key, k) == 0 && (end - i == k || q[i + k] == '='))
            return true;
        i = end + 1;
    }
    return false;
}

/* ?top=N: 0 when absent, -1 when not 1..ROOM_ADMIN_TOP_MAX (or not
 * decodable, or too long), else N. */
static int top_param(const struct http_request *req)
{
    char v[8], *endp;
    size_t pos = 0;
    long n;

    if (!req->query || !query_has(req->query, req->query_len, "top"))
        return 0;
    if (http_query_next(req->query, req->query_len, "top", &pos, v, sizeof(v)) < 0)
        return -1;
    n = strtol(v, &endp, 10);
    return *endp || endp == v || n < 1 || n > ROOM_ADMIN_TOP_MAX ? -1 : (int)n;
}

struct top_line {
    unsigned long long members;
    const char *json; /* into a part, up to its '\n' */
    size_t len;
};

static int top_cmp(const void *a, const void *b)
{
    const struct top_line *x = a, *y = b;
    size_t n = MIN(x->len, y->len);
    int c;

    if (x->members != y->members)
        return x->members > y->members ? -1 : 1;
    c = memcmp(x->json, y->json, n); /* then by room id: a stable order */
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Splits a part of room_admin_top() lines into lines[*k...]. */
static void top_split(const struct payload *p, struct top_line *lines, size_t *k)
{
    const char *s = p->data, *end = p->data + p->len;

    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *sp = memchr(s, ' ', (size_t)(end - s));
        if (!nl || !sp || sp > nl)
            return;
        lines[*k].members = strtoull(s, NULL, 10);
        lines[*k].json = sp + 1;
        lines[(*k)++].len = (size_t)(nl - sp - 1);
        s = nl + 1;
    }
}

/* The answer of ?top=N: each worker sent its N busiest rooms, most first;
 * the N busiest of them all, most first. */
static void top_merge(struct conn *c, struct payload *const *parts, size_t n, size_t limit)
{
    struct top_line *lines = xcalloc(n * ROOM_ADMIN_TOP_MAX + 1, sizeof(*lines));
    struct buf b = {0};
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        top_split(parts[i], lines, &k);
    qsort(lines, k, sizeof(*lines), top_cmp);
    buf_append_str(&b, "{\"rooms\":[");
    for (size_t i = 0; i < k && i < limit; i++) {
        if (i)
            buf_append(&b, ",", 1);
        buf_append(&b, lines[i].json, lines[i].len);
    }
    buf_append_str(&b, "]}\n");
    httpd_respond(c, 200, "application/json", "Cache-Control: no-store\r\n", b.data, b.len);
    buf_release(&b);
    free(lines);
}

static void rooms_route(struct conn *c, const struct http_request *req, struct worker *w,
                        const char *p, const char *end)
{
    struct engine *e = engine_of(w);
    struct emsg *em;

    if (p == end) { /* every worker lists its rooms, or its busiest */
        int top = top_param(req);
        struct query *q;
        if (top < 0) {
            httpd_error(c, 400, "bad_request", "top must be 1-100");
            return;
        }
        q = http_read__query_new(c, QUERY_ADMIN_ROOMS, e->w->srv->nworkers);
        if (top)
            http_read__query_set_merge(q, top_merge, (size_t)top);
        for (unsigned i = 0; i < e->w->srv->nworkers; i++) {
            em = emsg_new(OP_ADMIN_ROOMS, 0);
            em->query = (uint64_t)(uintptr_t)q;
            em->index = i;
            em->arg = top ? 2 : 0;
            em->limit = (uint16_t)top;
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

/* ---- the admin page's reads: stats, nodes, a user ---- */

/* The node's counts, summed over its workers' metrics (each worker owns a
 * partition of the users and rooms, so the sums count each once). */
struct admin_counts {
    uint64_t users, sessions, rooms, members, ws, sse;
    unsigned conns;
};

static void counts_of(struct server *srv, struct admin_counts *out)
{
    *out = (struct admin_counts){.conns = atomic_load(&srv->conns)};
    for (unsigned i = 0; i < srv->nworkers; i++) {
        struct metrics *m = &srv->workers[i].metrics;
        out->users += METRIC_GET(m, users_online);
        out->sessions += METRIC_GET(m, sessions);
        out->rooms += METRIC_GET(m, rooms);
        out->members += METRIC_GET(m, room_members);
        out->ws += METRIC_GET(m, conns_ws);
        out->sse += METRIC_GET(m, conns_sse);
    }
}

static void counts_json(const struct admin_counts *n, struct buf *b)
{
    buf_printf(b,
               "\"usersOnline\":%llu,\"sessions\":%llu,\"connections\":%u,"
               "\"websockets\":%llu,\"streams\":%llu,\"rooms\":%llu,\"roomMembers\":%llu",
               (unsigned long long)n->users, (unsigned long long)n->sessions, n->conns,
               (unsigned long long)n->ws, (unsigned long long)n->sse, (unsigned long long)n->rooms,
               (unsigned long long)n->members);
}

/* GET /v1/admin/stats: cheap enough to poll every second or two. */
static void stats_route(struct conn *c, struct worker *w)
{
    struct admin_counts n;
    struct buf b = {0};

    counts_of(w->srv, &n);
    buf_printf(&b, "{\"at\":%llu,", (unsigned long long)time_wall_ms());
    counts_json(&n, &b);
    buf_append_str(&b, "}\n");
    httpd_respond(c, 200, "application/json", "Cache-Control: no-store\r\n", b.data, b.len);
    buf_release(&b);
}

/* GET /v1/admin/nodes: answered by worker 0, the cluster home. */
static void nodes_route(struct conn *c, struct worker *w)
{
    struct emsg *em = emsg_new(OP_ADMIN_NODE, 0);

    em->query = (uint64_t)(uintptr_t)http_read__query_new(c, QUERY_ADMIN, 1);
    owner_send(engine_of(w), 0, em);
}

/* The node id: the configured one, else the host name. */
static void node_name(const struct config *cfg, char *out, size_t outsz)
{
    if (cfg->node_id && cfg->node_id[0])
        snprintf(out, outsz, "%s", cfg->node_id);
    else if (gethostname(out, outsz) < 0 || !out[0])
        snprintf(out, outsz, "localhost");
    out[outsz - 1] = '\0';
}

/* The node's id and epoch: cluster_self()'s "<node-id>.<epoch>" with
 * redis set (home worker only), else the configured id and no epoch. */
static void node_ident(struct engine *e, struct buf *b)
{
    char name[256];
    const char *self = e->env->cluster ? cluster_self(e->env->cluster) : NULL;
    const char *dot = self ? strrchr(self, '.') : NULL;

    buf_append_str(b, "\"node\":");
    if (dot) {
        json_append_string(b, self, (size_t)(dot - self));
        buf_append_str(b, ",\"epoch\":");
        json_append_cstr(b, dot + 1);
        return;
    }
    node_name(&e->w->srv->cfg, name, sizeof(name));
    json_append_cstr(b, name);
    buf_append_str(b, ",\"epoch\":null");
}

/* This node's summary, the members of its JSON object without the braces:
 * what /v1/admin/nodes lists and what other nodes read from Redis. */
static void node_summary(struct engine *e, struct buf *b)
{
    struct server *srv = e->w->srv;
    struct admin_counts n;

    counts_of(srv, &n);
    node_ident(e, b);
    buf_printf(b, ",\"startedAt\":%llu,\"uptimeMs\":%llu,\"workers\":%u,",
               (unsigned long long)srv->started_wall_ms,
               (unsigned long long)(time_wall_ms() - srv->started_wall_ms), srv->nworkers);
    counts_json(&n, b);
    buf_printf(b,
               ",\"ready\":%s,\"draining\":%s,\"degraded\":", server_ready(srv) ? "true" : "false",
               atomic_load(&srv->shutting_down) ? "true" : "false");
    health_append_degraded(b);
}

/* An answer with this node alone; err: why the others are missing. */
static void nodes_answer_self(struct engine *e, const struct emsg *em, int err)
{
    struct buf b = {0};

    buf_append_str(&b, "200{\"nodes\":[{\"self\":true,");
    node_summary(e, &b);
    buf_append_str(&b, "}]");
    if (err)
        buf_append_str(&b, ",\"clusterError\":\"the other nodes could not be read from redis\"");
    buf_append_str(&b, "}\n");
    http_read__answer(e, em, buf_payload(&b));
}

/* One other node: its summary as it put it, marked not self, or only its
 * id and epoch when it put none lately (or it is not an object). */
static void other_node(struct buf *b, const char *member, const char *info, size_t len)
{
    const char *dot = strrchr(member, '.');

    if (info && len >= 2 && info[0] == '{' && info[len - 1] == '}') {
        buf_append_str(b, ",{\"self\":false,");
        buf_append(b, info + 1, len - 1);
        return;
    }
    buf_append_str(b, ",{\"self\":false,\"node\":");
    json_append_string(b, member, dot ? (size_t)(dot - member) : strlen(member));
    buf_append_str(b, ",\"epoch\":");
    json_append_cstr(b, dot ? dot + 1 : "");
    buf_append_str(b, ",\"summary\":false}");
}

static void nodes_got(void *ctx, int err, const char *const *members, const char *const *infos,
                      const size_t *lens, size_t n)
{
    struct emsg *em = ctx;
    struct engine *e = em->eng;
    struct buf b = {0};

    if (e->cluster_gone) { /* shutting down: the query times out */
        emsg_free(&em->msg);
        return;
    }
    if (err) {
        nodes_answer_self(e, em, err);
        emsg_free(&em->msg);
        return;
    }
    buf_append_str(&b, "200{\"nodes\":[{\"self\":true,");
    node_summary(e, &b);
    buf_append(&b, "}", 1);
    for (size_t i = 1; i < n; i++) /* members[0] is this node */
        other_node(&b, members[i], infos[i], lens[i]);
    buf_append_str(&b, "]}\n");
    http_read__answer(e, em, buf_payload(&b));
    emsg_free(&em->msg);
}

/* OP_ADMIN_NODE on the cluster home: this node, and with redis set the
 * others' summaries (engine__admin_tick() puts this node's). */
void engine__admin_node(struct engine *e, struct emsg *em)
{
    if (!e->env->cluster || e->cluster_gone) {
        nodes_answer_self(e, em, 0);
        return;
    }
    em->eng = e;
    em->parked = true; /* until nodes_got() */
    if (cluster_nodes_get(e->env->cluster, nodes_got, em) != 0) {
        em->parked = false;
        nodes_answer_self(e, em, -1);
    }
}

void engine__admin_tick(struct engine *e, uint64_t now)
{
    struct buf b = {0};

    if (!e->env->cluster || e->cluster_gone || e->w->id != 0 ||
        now - e->admin_info_ms < ADMIN_INFO_EVERY_MS)
        return;
    e->admin_info_ms = now;
    buf_append(&b, "{", 1);
    node_summary(e, &b);
    buf_append(&b, "}", 1);
    cluster_info_put(e->env->cluster, b.data, b.len);
    buf_release(&b);
}

#define ADMIN_SESSIONS_MAX 64 /* sessions listed for one user */

/* The protocol a session's socket speaks (the adapter's name, kept as the
 * session's tag when it started), or "http" for a socketless session. */
static const char *protocol_of(const struct presence_session_info *si)
{
    if (!si->conn_ref)
        return "http";
    return si->tag < adapter_count() ? adapter_get(si->tag)->name : "unknown";
}

static void session_json(const struct presence_session_info *si, int64_t off, struct buf *b)
{
    buf_append_str(b, "{\"session\":");
    json_append_cstr(b, si->sid);
    buf_printf(b,
               ",\"device\":\"%s\",\"status\":\"%s\",\"idle\":%s,\"connected\":%s,"
               "\"transport\":\"%s\",\"protocol\":\"%s\",\"connectedAt\":%lld,"
               "\"lastActiveAt\":%lld",
               presence_device_name(si->device), presence_status_name(si->status),
               si->idle ? "true" : "false", si->attached ? "true" : "false",
               si->conn_ref ? "socket" : "http", protocol_of(si),
               (long long)si->connected_at + (long long)off,
               (long long)si->last_activity + (long long)off);
    if ((si->custom.text && si->custom.text[0]) || (si->custom.emoji && si->custom.emoji[0])) {
        buf_append_str(b, ",\"custom\":{\"text\":");
        json_append_cstr(b, si->custom.text ? si->custom.text : "");
        buf_append_str(b, ",\"emoji\":");
        json_append_cstr(b, si->custom.emoji ? si->custom.emoji : "");
        buf_append(b, "}", 1);
    }
    buf_append(b, "}", 1);
}

/* What the store said of the user's relations: the counts and the first
 * users it blocks, or nulls and why when it could not say. */
static void relations_json(const struct store_result *r, int status, struct buf *b)
{
    if (status < 0) {
        buf_append_str(b, ",\"contacts\":null,\"blocks\":null,\"blocked\":[],\"storeError\":");
        json_append_cstr(b, store_strerror(status));
        return;
    }
    buf_printf(b, ",\"contacts\":%zu,\"blocks\":%zu,\"blocked\":[", r->contacts, r->blocks);
    for (size_t i = 0; i < r->nids; i++) {
        if (i)
            buf_append(b, ",", 1);
        json_append_cstr(b, r->ids[i]);
    }
    buf_append(b, "]", 1);
}

/* The answer, once the store read the relations (r NULL with status < 0
 * when it could not); the settings are those req->priv holds. */
static void user_answer(struct engine *e, const struct emsg *req, int status,
                        const struct store_result *r)
{
    struct presence_session_info *si = xcalloc(ADMIN_SESSIONS_MAX, sizeof(*si));
    size_t n = presence_list_sessions(e->pres, req->uid, si, ADMIN_SESSIONS_MAX);
    int64_t off = wall_offset(e);
    struct presence_view v;
    char name[256];
    struct buf b = {0};

    presence_get_user(e->pres, req->uid, loop_now(e->w->loop), &v);
    node_name(&e->w->srv->cfg, name, sizeof(name));
    buf_append_str(&b, "200{\"user\":");
    json_append_cstr(&b, req->uid);
    buf_append_str(&b, ",\"presence\":");
    presence_encode_user(&v, off, &b);
    buf_append_str(&b, ",\"privacy\":");
    privacy_encode_settings(&req->priv, &b);
    relations_json(r, status, &b);
    buf_append_str(&b, ",\"node\":");
    json_append_cstr(&b, name);
    buf_printf(&b, ",\"sessionCount\":%zu,\"sessions\":[", n);
    for (size_t i = 0; i < n && i < ADMIN_SESSIONS_MAX; i++) {
        if (i)
            buf_append(&b, ",", 1);
        session_json(&si[i], off, &b);
    }
    buf_append_str(&b, "]}\n");
    free(si);
    http_read__answer(e, req, buf_payload(&b));
}

static void user_relations_read(void *ctx, int status, const struct store_result *r)
{
    struct emsg *req = ctx;
    struct engine *e = req->eng;

    if (!e->closing) /* engine_free: only the context is freed */
        user_answer(e, req, status, r);
    emsg_free(&req->msg);
}

void engine__admin_user(struct engine *e, struct emsg *req)
{
    const struct privacy_public *pub;
    int rc;

    req->priv = *engine__privacy_settings(e, req->uid, &pub);
    req->eng = e;
    rc = store_get_summary(e->env->store, e->inbox, req->uid, user_relations_read, req);
    if (rc < 0) {
        user_answer(e, req, rc, NULL);
        return;
    }
    req->parked = true; /* until user_relations_read() */
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
        rooms_route(c, req, w, p + 5 + (end - p > 5), end);
    else if (end - p == 5 && memcmp(p, "stats", 5) == 0 && is_method(req, "GET"))
        stats_route(c, w);
    else if (end - p == 5 && memcmp(p, "nodes", 5) == 0 && is_method(req, "GET"))
        nodes_route(c, w);
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

    if (em->arg == 2) {
        room_admin_top(e->rooms, em->limit, &b);
    } else if (em->arg) {
        buf_append_str(&b, "200");
        room_admin_members(e->rooms, em->room, &b);
        buf_append(&b, "\n", 1);
    } else {
        room_admin_list(e->rooms, &b, &first);
    }
    http_read__answer(e, em, buf_payload(&b));
}
