/* SPDX-License-Identifier: MIT */
/*
 * health.c - /healthz, /readyz and /metrics (health.h). They read the
 * runtime's server (readiness, the connection count, every worker's
 * counters), which sits below net, and what upper layers registered
 * before the workers started (checks, dependencies, metrics sources):
 * nothing of the application directly. /metrics needs a bearer key unless
 * the server runs in development mode (metrics_allowed()).
 */
#include "health.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "util.h"
#include "worker.h"

static void get_healthz(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    char body[128];
    int n = snprintf(body, sizeof(body), "{\"status\":\"ok\",\"uptime_ms\":%llu}\n",
                     (unsigned long long)(time_wall_ms() - nc->worker->srv->started_wall_ms));

    (void)req;
    httpd_respond(c, 200, "application/json", "Cache-Control: no-store\r\n", body, (size_t)n);
}

static struct {
    health_check_fn *fn;
    void *data;
} checks[HEALTH_CHECKS_MAX];
static size_t nchecks;

void health_add_check(health_check_fn *fn, void *data)
{
    if (nchecks == HEALTH_CHECKS_MAX)
        fatalx("health", "more than %d readiness checks", HEALTH_CHECKS_MAX);
    checks[nchecks].fn = fn;
    checks[nchecks++].data = data;
}

static struct {
    const char *name;
    health_dep_fn *fn;
    void *data;
} deps[HEALTH_DEPS_MAX];
static size_t ndeps;

void health_add_dependency(const char *name, health_dep_fn *fn, void *data)
{
    if (ndeps == HEALTH_DEPS_MAX)
        fatalx("health", "more than %d dependencies", HEALTH_DEPS_MAX);
    /* Names go into JSON and label values unescaped. */
    assert(name[0] && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(name));
    deps[ndeps].name = name;
    deps[ndeps].fn = fn;
    deps[ndeps++].data = data;
}

static struct {
    health_metrics_fn *fn;
    void *data;
} sources[HEALTH_METRICS_MAX];
static size_t nsources;

void health_add_metrics(health_metrics_fn *fn, void *data)
{
    if (nsources == HEALTH_METRICS_MAX)
        fatalx("health", "more than %d metrics sources", HEALTH_METRICS_MAX);
    sources[nsources].fn = fn;
    sources[nsources++].data = data;
}

void health_append_degraded(struct buf *out)
{
    size_t down = 0;

    buf_append(out, "[", 1);
    for (size_t i = 0; i < ndeps; i++)
        if (!deps[i].fn(deps[i].data))
            buf_printf(out, "%s\"%s\"", down++ ? "," : "", deps[i].name);
    buf_append(out, "]", 1);
}

/* The ready body: {"status":"ready"}, or with "degraded":["redis",...]
 * naming every dependency that is down, in the order they were added. */
static void respond_ready(struct conn *c)
{
    struct buf out = {0};
    size_t down = 0;

    buf_append_str(&out, "{\"status\":\"ready\"");
    for (size_t i = 0; i < ndeps; i++) {
        if (deps[i].fn(deps[i].data))
            continue;
        buf_printf(&out, "%s\"%s\"", down++ ? "," : ",\"degraded\":[", deps[i].name);
    }
    buf_append_str(&out, down ? "]}\n" : "}\n");
    httpd_respond(c, 200, "application/json", "Cache-Control: no-store\r\n", out.data, out.len);
    buf_release(&out);
}

static void get_readyz(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    struct server *srv = nc->worker->srv;
    const char *code, *message;

    (void)req;
    for (size_t i = 0; server_ready(srv) && i < nchecks; i++) {
        if (!checks[i].fn(checks[i].data, &code, &message)) {
            httpd_error(c, 503, code, message);
            return;
        }
    }
    if (server_ready(srv)) {
        respond_ready(c);
        return;
    }
    httpd_error(c, 503, atomic_load(&srv->shutting_down) ? "shutting_down" : "starting",
                "not ready");
}

/* /metrics shows per-worker counts that move when one user connects,
 * changes status or leaves (sessions, users online, rooms, members,
 * connections), so that anyone reading it could watch an invisible user.
 * It is public only in development (auth = none and no key set at all);
 * otherwise it needs the metrics key or the admin API key. */
static bool metrics_allowed(const struct config *cfg, const struct http_request *req)
{
    if (!cfg->metrics_key[0] && !cfg->admin_api_key[0] && strcmp(cfg->auth, "none") == 0)
        return true;
    return http_bearer_is(req, cfg->metrics_key) || http_bearer_is(req, cfg->admin_api_key);
}

/* What no worker owns: presenced_dependency_up per dependency, then the
 * upper layers' sources. */
static void render_process_wide(struct buf *out)
{
    char label[64];

    if (ndeps)
        metrics_render_head(out, "presenced_dependency_up", "gauge",
                            "1 while the dependency answers, 0 while the node runs degraded "
                            "without it.");
    for (size_t i = 0; i < ndeps; i++) {
        snprintf(label, sizeof(label), "dependency=\"%s\"", deps[i].name);
        metrics_render_sample(out, "presenced_dependency_up", label, deps[i].fn(deps[i].data));
    }
    for (size_t i = 0; i < nsources; i++)
        sources[i].fn(sources[i].data, out);
}

static void get_metrics(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    struct server *srv = nc->worker->srv;
    struct metrics *per[64];
    unsigned n = MIN(srv->nworkers, (unsigned)ARRAY_SIZE(per));
    struct buf out = {0};

    if (!metrics_allowed(nc->cfg, req)) {
        httpd_error(c, 401, "unauthorized",
                    "/metrics needs Authorization: Bearer <metrics-key or admin-api-key>");
        return;
    }
    for (unsigned i = 0; i < n; i++)
        per[i] = &srv->workers[i].metrics;
    metrics_render(&out, per, n);
    buf_printf(&out,
               "# HELP presenced_connections Open connections in the process.\n"
               "# TYPE presenced_connections gauge\npresenced_connections %u\n",
               atomic_load(&srv->conns));
    render_process_wide(&out);
    httpd_respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, out.data, out.len);
    buf_release(&out);
}

static const struct route routes[] = {
    {"GET", "/healthz", get_healthz},
    {"GET", "/readyz", get_readyz},
    {"GET", "/metrics", get_metrics},
};

const struct route_list health_routes = ROUTE_LIST(routes);
