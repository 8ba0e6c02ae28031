/* SPDX-License-Identifier: MIT */
/*
 * main.c - the composition root, and process start-up and shutdown.
 *
 * The only file that knows every layer: it opens the settings store and
 * loads the JWT key (the engine's shared env), joins the route tables of
 * the modules that serve HTTP (health, the engine, and in test builds the
 * testing endpoints) into one, and gives the runtime the hooks it runs on
 * each worker: make the worker's net context and engine, accept a socket
 * as HTTP, the per-iteration tick, drain, and free.
 *
 * Loads the configuration (defaults < file < environment < flags), blocks
 * SIGINT/SIGTERM/SIGPIPE in every thread (workers inherit the mask), starts
 * the workers, prints the URL, then waits for a signal with sigwait: the
 * main thread does nothing else. On SIGINT/SIGTERM it asks the workers to
 * drain (close 1001 to WebSockets, finish responses), joins them (each stops
 * by itself within shutdown-drain-ms), saves the sessions for the next
 * start (single node, persist.h) and exits 0.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cluster.h"
#include "config.h"
#include "drain.h"
#include "engine.h"
#include "health.h"
#include "http.h"
#include "hooks.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "native.h"
#include "phoenix.h"
#include "pusher.h"
#include "net.h"
#include "persist.h"
#include "quota.h"
#include "ratelimit.h"
#include "route.h"
#include "sdnotify.h"
#include "store.h"
#include "util.h"
#include "worker.h"
#ifdef PRESENCED_TESTING
#include "testing.h"
#endif

/* What the hooks share, made before the workers start. */
static struct engine_env env;
static struct hooks_config hooks_cfg; /* the webhook endpoints, read-only once workers run */
static struct route *routes;          /* the joined table */
static size_t nroutes;
static struct wsconn_opts wsconn_opts;

static const char *const subprotocols[] = {"presenced.v1", NULL};

/* wsconn_opts wants both below 2^32 ms: a connection keeps its last input
 * time in 32 bits (wsconn.c). */
_Static_assert(CONFIG_WS_PING_INTERVAL_MS_MAX < UINT32_MAX, "ws-ping-interval-ms bound");
_Static_assert(CONFIG_WS_PONG_TIMEOUT_MS_MAX < UINT32_MAX, "ws-pong-timeout-ms bound");

static void derive_ws_opts(const struct server *srv)
{
    struct wsconn_opts *o = &wsconn_opts;
    const struct config *cfg = &srv->cfg;

    o->max_message = (size_t)cfg->ws_max_message_bytes;
    o->ping_interval_ms = (uint64_t)cfg->ws_ping_interval_ms;
    o->pong_timeout_ms = (uint64_t)cfg->ws_pong_timeout_ms;
    o->allowed_origins = cfg->ws_allowed_origins;
    o->subprotocols = subprotocols;
    o->close_timeout_ms = 2000;
}

/* auth = jwt: loads the key once; workers share it read-only. */
static int load_jwt_key(const struct server *srv)
{
    const struct config *cfg = &srv->cfg;
    char err[JWT_ERR_LEN];

    if (strcmp(cfg->auth, "jwt") != 0)
        return 0;
    env.jwt_opts.leeway_s = cfg->jwt_leeway_s;
    env.jwt_opts.aud = cfg->jwt_audience[0] ? cfg->jwt_audience : NULL;
    env.jwt_opts.iss = cfg->jwt_issuer[0] ? cfg->jwt_issuer : NULL;
    if (cfg->jwt_hs256_secret[0]) {
        if (jwt_key_load_hmac(&env.jwt, cfg->jwt_hs256_secret, strlen(cfg->jwt_hs256_secret)) == 0)
            return 0;
        fprintf(stderr, "presenced: jwt-hs256-secret is not usable as an HS256 key\n");
        return -1;
    }
    if (jwt_key_load_pem(&env.jwt, cfg->jwt_public_key_file, err, sizeof(err)) == 0)
        return 0;
    fprintf(stderr, "presenced: jwt-public-key-file: %s\n", err);
    return -1;
}

/* Observer buckets held at most: one per connection's user and as many
 * anonymous addresses, OBSERVER_MIN_ENTRIES at least (an entry is about
 * 100 bytes). Beyond it the fullest old bucket is forgotten (ratelimit.h). */
#define OBSERVER_MIN_ENTRIES 65536

/* The per-observer query limit shared by every worker, or NULL when
 * observer-query-rate is 0. Its hash seed is random per process, so which
 * keys share a stripe cannot be predicted from outside. */
static struct ratelimit *observer_rate_new(const struct config *cfg)
{
    unsigned char seed[RATELIMIT_SEED_LEN];
    size_t cap = MAX((size_t)OBSERVER_MIN_ENTRIES, 2 * (size_t)cfg->max_connections);

    if (cfg->observer_query_rate == 0)
        return NULL;
    if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
        fatal("main", "getrandom");
    return ratelimit_new((uint32_t)cfg->observer_query_rate, (uint32_t)cfg->observer_query_burst,
                         cap, seed);
}

/* The per-user counts of watches and event streams, shared by every
 * worker (max-watch-per-user, max-streams-per-user), under a random seed. */
static struct quota *observer_quota_new(void)
{
    unsigned char seed[RATELIMIT_SEED_LEN];

    if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
        fatal("main", "getrandom");
    return quota_new(seed);
}

/* The route table: the server's own endpoints, the engine's, and in test
 * builds the testing endpoints. */
static void compose_routes(void)
{
    const struct route_list parts[] = {
        health_routes,  native_routes, pusher_routes, phoenix_routes, engine_routes,
#ifdef PRESENCED_TESTING
        testing_routes,
#endif
    };

    routes = route_join(parts, ARRAY_SIZE(parts), &nroutes);
}

/* ---- the hooks the runtime runs on each worker ---- */

static void hook_start(struct worker *w)
{
    struct net_ctx *nc = xcalloc(1, sizeof(*nc));

    nc->cfg = &w->srv->cfg;
    nc->metrics = &w->metrics;
    nc->routes = routes;
    nc->nroutes = nroutes;
    nc->wsconn_opts = wsconn_opts;
    nc->worker = w;
    /* Leftover input is bounded by the protocols (a request head and body,
     * a partial frame header); this is the backstop, plus one read. */
    w->pool.max_input = HTTP_MAX_HEAD_BYTES + (size_t)w->srv->cfg.http_max_body_bytes + 65536;
    w->app = nc;
    nc->app = engine_new(w, &env, nc);
}

static void hook_accept(struct worker *w, int fd, const struct sockaddr *peer)
{
    httpd_accept(w->app, &w->pool, fd, peer);
}

/* Set by the first worker that sees the store lose its file. */
static atomic_bool store_fault_logged;

static void hook_tick(struct worker *w)
{
    engine_tick(((struct net_ctx *)w->app)->app);
    if (!store_is_healthy(env.store) && !atomic_exchange(&store_fault_logged, true))
        log_error("store",
                  "%s: every settings write is refused from now on; restore the file "
                  "and restart (/readyz answers 503 store_unhealthy)",
                  store_strerror(store_fault(env.store)));
}

static bool engine_keeps(const struct conn *c, void *e)
{
    return engine_drain_owns(e, c);
}

/* The engine closes its WebSockets spread over drain-window-ms (drain.h);
 * the runtime everything else. */
static void hook_drain(struct worker *w)
{
    struct engine *e = ((struct net_ctx *)w->app)->app;

    engine_drain(e, (uint64_t)w->srv->cfg.drain_window_ms);
    httpd_drain_all(&w->pool, engine_keeps, e);
}

static bool hook_busy(struct worker *w)
{
    return engine_drain_busy(((struct net_ctx *)w->app)->app);
}

static void hook_stop(struct worker *w)
{
    struct net_ctx *nc = w->app;

    engine_free(nc->app);
    free(nc);
    w->app = NULL;
}

static const struct worker_hooks hooks = {
    .start = hook_start,
    .accept = hook_accept,
    .tick = hook_tick,
    .drain = hook_drain,
    .busy = hook_busy,
    .stop = hook_stop,
};

/* The dependencies /readyz names when degraded and /metrics gauges:
 * redis while any shard is unreachable (cluster.h), the store while its
 * database is unreachable (PostgreSQL down, store.h) or faulted. */
static bool redis_up(void *data)
{
    return !cluster_degraded(data);
}

static bool store_up(void *data)
{
    return store_is_reachable(data) && store_is_healthy(data);
}

static void metric_one(struct buf *out, const char *name, const char *type, const char *help,
                       uint64_t v)
{
    metrics_render_head(out, name, type, help);
    metrics_render_sample(out, name, NULL, v);
}

/* /metrics with redis set: the node's cluster counters (cluster.h). */
static void cluster_metrics(void *data, struct buf *out)
{
    struct cluster_stats st;

    cluster_get_stats(data, &st);
    metric_one(out, "presenced_cluster_puts_total", "counter",
               "Contributions put to Redis (a user's local view changed on this node).", st.puts);
    metric_one(out, "presenced_cluster_gets_total", "counter", "Global views read from Redis.",
               st.gets);
    metric_one(out, "presenced_cluster_views_received_total", "counter",
               "Changed global views received on watch-bucket channels.", st.views_in);
    metric_one(out, "presenced_cluster_nodes_swept_total", "counter",
               "Dead node epochs this node swept.", st.swept);
    metric_one(out, "presenced_cluster_nodes_live", "gauge",
               "Nodes with a live lease in the last renewal reply.", st.nodes_live);
}

/* /readyz: 503 store_unhealthy once the store refuses writes for good
 * (its SQLite file deleted or replaced, store.h). */
static bool store_check(void *data, const char **code, const char **message)
{
    struct store *st = data;

    if (store_is_healthy(st))
        return true;
    *code = "store_unhealthy";
    *message = store_strerror(store_fault(st));
    return false;
}

/* redis set: the node's part of the cluster (docs/cluster.md), else NULL
 * with 0. -1 after saying why the settings cannot make one. */
static int cluster_make(const struct server *srv, struct cluster **out)
{
    const struct config *cfg = &srv->cfg;
    struct cluster_config cc = {0};
    char err[256];

    *out = NULL;
    if (!cfg->redis[0])
        return 0;
    if (redis_topology_parse(cfg->redis, &cc.topo, err, sizeof(err)) != 0) {
        fprintf(stderr, "presenced: redis: %s\n", err);
        return -1;
    }
    redis_options_init(&cc.redis);
    cc.redis.timeout_ms = (uint32_t)cfg->redis_timeout_ms;
    cc.redis.linger_ms = (uint32_t)cfg->cluster_linger_ms;
    if (cfg->node_id[0])
        snprintf(cc.node_id, sizeof(cc.node_id), "%s", cfg->node_id);
    else if (gethostname(cc.node_id, sizeof(cc.node_id) - 1) != 0 || !cc.node_id[0])
        snprintf(cc.node_id, sizeof(cc.node_id), "node");
    snprintf(cc.app, sizeof(cc.app), "%s", "app");
    cc.lease_ms = (uint32_t)cfg->cluster_lease_ms;
    cc.renew_ms = cc.lease_ms / 5;
    cc.orphan_grace_ms = (uint32_t)cfg->cluster_orphan_grace_ms;
    cc.policy = (enum presence_policy)presence_policy_parse(cfg->status_policy);
    cc.home = 0;
    *out = cluster_new(&cc, (unsigned)config_workers(cfg));
    return 0;
}

/* The webhook endpoints: the native one (webhook-url) and the Pusher
 * app's. Event ids start from 64 random bits, fresh at every start. */
static int make_hooks(const struct config *cfg, char *err, size_t errlen)
{
    if (getrandom(&hooks_cfg.node_epoch, sizeof(hooks_cfg.node_epoch), 0) !=
        (ssize_t)sizeof(hooks_cfg.node_epoch))
        hooks_cfg.node_epoch = time_wall_ms() ^ ((uint64_t)getpid() << 40);
    if (cfg->webhook_url[0] && hooks_config_add_standard(&hooks_cfg, cfg->webhook_url,
                                                         cfg->webhook_secret, err, errlen) < 0)
        return -1;
    if (pusher_webhooks(cfg, &hooks_cfg, err, errlen) < 0)
        return -1;
    env.hooks = hooks_cfg.n ? &hooks_cfg : NULL;
    return 0;
}

/* A single node takes the sessions its last clean stop saved (persist.h),
 * for the workers to restore, and will save its own at its stop; with
 * restore-max-age-s = 0 it clears what is saved and saves nothing. With
 * redis the cluster re-asserts presence through Redis instead. */
static void load_saved(const struct config *cfg)
{
    if (env.cluster)
        return;
    env.persist = persist_new();
    persist_load(env.persist, env.store, cfg);
    if (cfg->restore_max_age_s == 0) {
        persist_free(env.persist);
        env.persist = NULL;
    }
}

/* Opens the settings store and the shared tables, then the workers. */
static int start(struct server *srv)
{
    char err[STORE_ERR_LEN];

    if (cluster_make(srv, &env.cluster) < 0)
        return -1;
    env.store = store_open(srv->cfg.store, err, sizeof(err));
    if (!env.store) {
        log_warnx("store", "cannot open the settings store: %s", err);
        cluster_free(env.cluster);
        return -1;
    }
    env.observer_rate = observer_rate_new(&srv->cfg);
    env.observer_quota = observer_quota_new();
    health_add_check(store_check, env.store);
    if (env.cluster) {
        health_add_dependency("redis", redis_up, env.cluster);
        health_add_metrics(cluster_metrics, env.cluster);
    }
    health_add_dependency("store", store_up, env.store);
    load_saved(&srv->cfg);
    compose_routes();
    srv->hooks = &hooks;
    if (server_start(srv) == 0) {
        persist_loaded_done(env.persist); /* every engine_new() took its part */
        return 0;
    }
    persist_free(env.persist);
    env.persist = NULL;
    free(routes);
    ratelimit_free(env.observer_rate);
    quota_free(env.observer_quota);
    store_close(env.store);
    cluster_free(env.cluster);
    return -1;
}

static void block_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void announce(const struct server *srv)
{
    const char *host = srv->cfg.bind;
    int v6 = strchr(host, ':') != NULL;

    log_info("main", "listening on http://%s%s%s:%d workers=%u", v6 ? "[" : "", host, v6 ? "]" : "",
             srv->port, srv->nworkers);
    if (strcmp(srv->cfg.auth, "none") == 0)
        log_warnx("main", "auth=none: clients name their own user with ?user= (development only; "
                          "set auth = jwt for real clients)");
    printf("presenced is running: http://%s%s%s:%d/ (health: /healthz, metrics: /metrics)\n",
           v6 ? "[" : "", host, v6 ? "]" : "", srv->port);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static struct server srv;
    char err[512];
    enum log_level lvl;
    sigset_t set;
    int sig, r;

    config_init(&srv.cfg);
    r = config_load(&srv.cfg, argc, argv, err, sizeof(err));
    if (r != 0) {
        if (r < 0)
            fprintf(stderr, "presenced: %s\n", err);
        config_release(&srv.cfg);
        return r < 0 ? 2 : 0;
    }
    if (log_level_parse(srv.cfg.log_level, &lvl) == 0)
        log_init(lvl);
    log_set_json(strcmp(srv.cfg.log_format, "json") == 0);
    derive_ws_opts(&srv);
    if (load_jwt_key(&srv) < 0) {
        config_release(&srv.cfg);
        return 2;
    }
    native_register(); /* the first adapter: ADAPTER_DEFAULT */
    if (pusher_register(&srv.cfg, err, sizeof(err)) < 0 ||
        make_hooks(&srv.cfg, err, sizeof(err)) < 0 ||
        phoenix_register(&srv.cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "presenced: %s\n", err);
        config_release(&srv.cfg);
        return 2;
    }
    engine_register();
#ifdef PRESENCED_TESTING
    testing_register();
#endif
    block_signals(&set);
    if (start(&srv) < 0) {
        config_release(&srv.cfg);
        return 1;
    }
    announce(&srv);
    sdnotify_ready(&srv); /* systemd: READY=1 and the watchdog, under Type=notify */
    if (sigwait(&set, &sig) != 0)
        sig = SIGTERM;
    log_info("main", "signal %s, draining for up to %lld ms", sig == SIGINT ? "SIGINT" : "SIGTERM",
             (long long)srv.cfg.shutdown_drain_ms);
    sdnotify_stopping();
    server_shutdown(&srv);
    server_join(&srv);
    if (env.persist) /* every worker added its sessions: before the store closes */
        persist_save(env.persist, env.store);
    persist_free(env.persist);
    free(routes);
    ratelimit_free(env.observer_rate); /* every worker has stopped */
    quota_free(env.observer_quota);
    store_close(env.store);
    cluster_free(env.cluster);
    jwt_key_release(&env.jwt);
    log_info("main", "stopped");
    config_release(&srv.cfg);
    return 0;
}
