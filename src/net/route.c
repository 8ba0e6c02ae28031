/* SPDX-License-Identifier: MIT */
/*
 * route.c - route tables joined from each module's routes, and the
 * dispatch of one request through them: a matching route, else 405 when
 * the path matches with another method, else the SDK and static
 * directories for GET/HEAD, else 404.
 */
#include "route.h"

#include <stdio.h>
#include <string.h>

#include "httpd.h"
#include "static.h"
#include "util.h"

struct route *route_join(const struct route_list *parts, size_t nparts, size_t *n)
{
    size_t total = 0, at = 0;
    struct route *all;

    for (size_t i = 0; i < nparts; i++)
        total += parts[i].n;
    all = xcalloc(total ? total : 1, sizeof(*all));
    for (size_t i = 0; i < nparts; i++) {
        memcpy(all + at, parts[i].routes, parts[i].n * sizeof(*all));
        at += parts[i].n;
    }
    *n = total;
    return all;
}

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

static void not_allowed(struct conn *c, const struct http_request *req, const struct net_ctx *nc)
{
    const struct route *routes = nc->routes;
    char allow[128] = "Allow: ";
    size_t len = strlen(allow);

    for (size_t i = 0; i < nc->nroutes; i++) {
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
static bool sdk_request(struct conn *c, const struct http_request *req, const struct net_ctx *nc)
{
    const char *dir = nc->cfg->sdk_dir;
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

void route_dispatch(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    const struct route *routes = nc->routes;
    bool path_seen = false;
    const char *root = nc->cfg->static_dir;

    for (size_t i = 0; i < nc->nroutes; i++) {
        if (!path_matches(&routes[i], req))
            continue;
        path_seen = true;
        if (method_matches(&routes[i], req)) {
            routes[i].handler(c, req, nc);
            return;
        }
    }
    if (path_seen) {
        not_allowed(c, req, nc);
        return;
    }
    if (sdk_request(c, req, nc))
        return;
    if (root && root[0] && is_get_or_head(req)) {
        static_serve(c, req, root);
        return;
    }
    httpd_error(c, 404, "not_found", "no such resource");
}
