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
    log_warnx("main", "auth=none: clients name their own user with ?user= (development only; "
                      "token authentication is not built yet)");
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
    log_info("main", "stopped");
    config_release(&srv.cfg);
    return 0;
}
