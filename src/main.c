/* SPDX-License-Identifier: MIT */
/*
 * main.c - process start-up and shutdown.
 *
 * Loads the configuration (defaults < file < environment < flags), blocks
 * SIGINT/SIGTERM/SIGPIPE in every thread (workers inherit the mask), starts
 * the workers, prints the URL, then waits for a signal with sigwait: the
 * main thread does nothing else. On SIGINT/SIGTERM it asks the workers to
 * drain (close 1001 to WebSockets, finish responses), joins them (each stops
 * by itself within shutdown-drain-ms) and exits 0.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "engine.h"
#include "log.h"
#include "util.h"
#include "worker.h"

#ifdef PRESENCED_TESTING
void relay_register(void); /* relay.c */
#endif

static const char *const subprotocols[] = {"presenced.v1", NULL};

/* ws_opts wants both below 2^32 ms: a connection keeps its last input
 * time in 32 bits (wsconn.c). */
_Static_assert(CONFIG_WS_PING_INTERVAL_MS_MAX < UINT32_MAX, "ws-ping-interval-ms bound");
_Static_assert(CONFIG_WS_PONG_TIMEOUT_MS_MAX < UINT32_MAX, "ws-pong-timeout-ms bound");

static void derive_ws_opts(struct server *srv)
{
    struct ws_opts *o = &srv->ws_opts;
    const struct config *cfg = &srv->cfg;

    o->max_message = (size_t)cfg->ws_max_message_bytes;
    o->ping_interval_ms = (uint64_t)cfg->ws_ping_interval_ms;
    o->pong_timeout_ms = (uint64_t)cfg->ws_pong_timeout_ms;
    o->allowed_origins = cfg->ws_allowed_origins;
    o->subprotocols = subprotocols;
    o->close_timeout_ms = 2000;
}

/* auth = jwt: loads the key once; workers share it read-only. */
static int load_jwt_key(struct server *srv)
{
    const struct config *cfg = &srv->cfg;
    char err[JWT_ERR_LEN];

    if (strcmp(cfg->auth, "jwt") != 0)
        return 0;
    srv->jwt_opts.leeway_s = cfg->jwt_leeway_s;
    srv->jwt_opts.aud = cfg->jwt_audience[0] ? cfg->jwt_audience : NULL;
    srv->jwt_opts.iss = cfg->jwt_issuer[0] ? cfg->jwt_issuer : NULL;
    if (cfg->jwt_hs256_secret[0]) {
        if (jwt_key_load_hmac(&srv->jwt, cfg->jwt_hs256_secret, strlen(cfg->jwt_hs256_secret)) == 0)
            return 0;
        fprintf(stderr, "presenced: jwt-hs256-secret is not usable as an HS256 key\n");
        return -1;
    }
    if (jwt_key_load_pem(&srv->jwt, cfg->jwt_public_key_file, err, sizeof(err)) == 0)
        return 0;
    fprintf(stderr, "presenced: jwt-public-key-file: %s\n", err);
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
    derive_ws_opts(&srv);
    if (load_jwt_key(&srv) < 0) {
        config_release(&srv.cfg);
        return 2;
    }
    engine_register();
#ifdef PRESENCED_TESTING
    relay_register();
#endif
    block_signals(&set);
    if (server_start(&srv) < 0) {
        config_release(&srv.cfg);
        return 1;
    }
    announce(&srv);
    if (sigwait(&set, &sig) != 0)
        sig = SIGTERM;
    log_info("main", "signal %s, draining for up to %lld ms", sig == SIGINT ? "SIGINT" : "SIGTERM",
             (long long)srv.cfg.shutdown_drain_ms);
    server_shutdown(&srv);
    server_join(&srv);
    jwt_key_release(&srv.jwt);
    log_info("main", "stopped");
    config_release(&srv.cfg);
    return 0;
}
