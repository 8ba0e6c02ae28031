/* SPDX-License-Identifier: MIT */
/*
 * route.c - the routing table and the runtime's own endpoints:
 *   GET /healthz   liveness: 200 while the process runs
 *   GET /readyz    readiness: 200 while every worker runs and no shutdown
 *                  has begun, else 503
 *   GET /metrics   Prometheus text for every worker
 *   GET /v1/ws     the native WebSocket protocol (engine.c, proto.c)
 * and, in test builds only (PRESENCED_TESTING), /test/echo (a WebSocket
 * echo endpoint for the conformance suite), /test/sse (a synthetic event
 * stream) and /test/broadcast (relay.c: fan-out across workers).
 * GET/HEAD requests that match no route are served from the static
 * directory when one is configured.
 */
#include "route.h"

#include <stdio.h>
#include <string.h>

#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "engine.h"
#include "sse.h"
#include "static.h"
#include "util.h"
#include "worker.h"
#include "wsconn.h"

static void get_healthz(struct conn *c, const struct http_request *req, struct worker *w)
{
    char body[128];
    int n = snprintf(body, sizeof(body), "{\"status\":\"ok\",\"uptime_ms\":%llu}\n",
                     (unsigned long long)(time_wall_ms() - w->srv->started_wall_ms));

    (void)req;
    httpd_respond(c, 200, "application/json", "Cache-Control: no-store\r\n", body, (size_t)n);
}

static void get_readyz(struct conn *c, const struct http_request *req, struct worker *w)
{
    (void)req;
    if (server_ready(w->srv) && !store_is_healthy(w->srv->store)) {
        httpd_error(c, 503, "store_unhealthy", store_strerror(store_fault(w->srv->store)));
        return;
    }
    if (server_ready(w->srv)) {
        httpd_respond(c, 200, "application/json", "Cache-Control: no-store\r\n",
                      "{\"status\":\"ready\"}\n", 19);
        return;
    }
    httpd_error(c, 503, atomic_load(&w->srv->shutting_down) ? "shutting_down" : "starting",
                "not ready");
}

static void get_metrics(struct conn *c, const struct http_request *req, struct worker *w)
{
    struct server *srv = w->srv;
    struct metrics *per[64];
    unsigned n = MIN(srv->nworkers, (unsigned)ARRAY_SIZE(per));
    struct buf out = {0};

    (void)req;
    for (unsigned i = 0; i < n; i++)
        per[i] = &srv->workers[i].metrics;
    metrics_render(&out, per, n);
    buf_printf(&out,
               "# HELP presenced_connections Open connections in the process.\n"
               "# TYPE presenced_connections gauge\npresenced_connections %u\n",
               atomic_load(&srv->conns));
    httpd_respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, out.data, out.len);
    buf_release(&out);
}

static void get_ws(struct conn *c, const struct http_request *req, struct worker *w)
{
    struct client *cl = engine_client_prepare(w, c, req);

    if (cl && !ws_upgrade(c, req, &w->srv->ws_opts, &engine_app, cl))
        engine_client_discard(cl);
}

#ifdef PRESENCED_TESTING
extern const struct ws_app echo_app;

static void get_test_echo(struct conn *c, const struct http_request *req, struct worker *w)
{
    ws_upgrade(c, req, &w->srv->ws_opts, &echo_app, NULL);
}

extern const struct ws_app relay_app;

static void get_test_broadcast(struct conn *c, const struct http_request *req, struct worker *w)
{
    ws_upgrade(c, req, &w->srv->ws_opts, &relay_app, w);
}

static void get_test_sse(struct conn *c, const struct http_request *req, struct worker *w)
{
    sse_test_stream(c, req, w);
}
#endif

/* clang-format off */
static const struct route routes[] = {
    {"GET", "/healthz", get_healthz},
    {"GET", "/readyz", get_readyz},
    {"GET", "/metrics", get_metrics},
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
#ifdef PRESENCED_TESTING
    {"GET", "/test/echo", get_test_echo},
    {"GET", "/test/sse", get_test_sse},
    {"GET", "/test/broadcast", get_test_broadcast},
#endif
};
/* clang-format on */

static bool path_matches(const struct route *r, const struct http_request *req)
{
    size_t n = strlen(r->path);

    if (r->path[n - 1] == '/')
        return req->path_len >= n && memcmp(req->path, r->path, n) == 0;
    return req->path_len == n && memcmp(req->path, r->path, n) == 0;
}

static bool method_matches(const struct route *r, const struct http_request *req)
{
    size_t n = strlen(r->method);

    if (req->method_len == n && memcmp(req->method, r->method, n) == 0)
        return true;
    return strcmp(r->method, "GET") == 0 && req->method_len == 4 &&
           memcmp(req->method, "HEAD", 4) == 0;
}

static bool is_get_or_head(const struct http_request *req)
{
    return (req->method_len == 3 && memcmp(req->method, "GET", 3) == 0) ||
           (req->method_len == 4 && memcmp(req->method, "HEAD", 4) == 0);
}

static const char not_allowed_body[] =
    "{\"error\":{\"code\":\"method_not_allowed\",\"message\":\"method not allowed for this "
    "path\"}}\n";

static void not_allowed(struct conn *c, const struct http_request *req)
{
    char allow[128] = "Allow: ";
    size_t len = strlen(allow);

    for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
        if (path_matches(&routes[i], req) && len + 16 < sizeof(allow))
            len += (size_t)snprintf(allow + len, sizeof(allow) - len, "%s%s", len > 7 ? ", " : "",
                                    routes[i].method);
    }
    snprintf(allow + len, sizeof(allow) - len, "\r\n");
    httpd_respond(c, 405, "application/json", allow, not_allowed_body,
                  sizeof(not_allowed_body) - 1);
}

/* GET /sdk/... serves the JavaScript client from sdk-dir, so the demo page
 * imports the same files an application would. */
static bool sdk_request(struct conn *c, const struct http_request *req, struct worker *w)
{
    const char *dir = w->srv->cfg.sdk_dir;
    struct http_request sub;

    if (!dir || !dir[0] || !is_get_or_head(req) || req->path_len < 5 ||
        memcmp(req->path, "/sdk/", 5) != 0)
        return false;
    sub = *req;
    sub.path += 4; /* keep the slash: "/client.js" */
    sub.path_len -= 4;
    static_serve(c, &sub, dir);
    return true;
}

void route_dispatch(struct conn *c, const struct http_request *req, struct worker *w)
{
    bool path_seen = false;
    const char *root = w->srv->cfg.static_dir;

    for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
        if (!path_matches(&routes[i], req))
            continue;
        path_seen = true;
        if (method_matches(&routes[i], req)) {
            routes[i].handler(c, req, w);
            return;
        }
    }
    if (path_seen) {
        not_allowed(c, req);
        return;
    }
    if (sdk_request(c, req, w))
        return;
    if (root && root[0] && is_get_or_head(req)) {
        static_serve(c, req, root);
        return;
    }
    httpd_error(c, 404, "not_found", "no such resource");
}
