/* SPDX-License-Identifier: MIT */
/*
 * sdnotify.c - the systemd notification protocol through libsystemd's
 * sd_notify() (sdnotify.h), and the watchdog thread.
 *
 * The thread sleeps on a condition variable (CLOCK_MONOTONIC) so that
 * sdnotify_stopping() ends it at once rather than after a period. Each
 * period it compares every worker's loop_iterations counter (written by
 * the worker itself, worker.c) with the value it saw last time, pings
 * systemd if all of them moved, and then wakes every loop, so that an idle
 * worker, whose epoll_wait might otherwise sleep for the whole period,
 * makes an iteration before the next check. The workers and their loops
 * are created by server_start and freed by server_join, after
 * sdnotify_stopping() has joined this thread.
 */
#include "sdnotify.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "util.h"
#include "worker.h"

static struct {
    bool active;        /* NOTIFY_SOCKET was set at sdnotify_ready() */
    bool thread;        /* the watchdog thread runs */
    bool stop;          /* under lock: the thread should return */
    bool warned;        /* a stuck worker was logged (once per stall) */
    uint64_t period_ns; /* half of WATCHDOG_USEC */
    struct server *srv;
    uint64_t *seen; /* per worker: loop_iterations at the previous check */
    pthread_t tid;
    pthread_mutex_t lock;
    pthread_cond_t cond;
} sdn = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Every worker's loop turned since the last call; records the counters. */
static bool workers_turning(void)
{
    struct server *srv = sdn.srv;
    bool all = true;

    for (unsigned i = 0; i < srv->nworkers; i++) {
        uint64_t n = METRIC_GET(&srv->workers[i].metrics, loop_iterations);

        if (n == sdn.seen[i]) {
            all = false;
            if (!sdn.warned)
                log_warnx("sdnotify",
                          "worker %u made no loop iteration in %llu ms: no watchdog ping", i,
                          (unsigned long long)(sdn.period_ns / 1000000));
            sdn.warned = true;
        }
        sdn.seen[i] = n;
    }
    if (all)
        sdn.warned = false;
    return all;
}

static void wake_workers(void)
{
    for (unsigned i = 0; i < sdn.srv->nworkers; i++)
        loop_wake(sdn.srv->workers[i].loop);
}

static void *watchdog_main(void *arg)
{
    struct timespec at;

    (void)arg;
    wake_workers();
    clock_gettime(CLOCK_MONOTONIC, &at);
    pthread_mutex_lock(&sdn.lock);
    while (!sdn.stop) {
        uint64_t ns = (uint64_t)at.tv_nsec + sdn.period_ns;

        at.tv_sec += (time_t)(ns / 1000000000u);
        at.tv_nsec = (long)(ns % 1000000000u);
        while (!sdn.stop && pthread_cond_timedwait(&sdn.cond, &sdn.lock, &at) == 0)
            ;
        if (sdn.stop)
            break;
        if (workers_turning())
            sd_notify(0, "WATCHDOG=1");
        wake_workers();
    }
    pthread_mutex_unlock(&sdn.lock);
    return NULL;
}

static void watchdog_start(struct server *srv)
{
    pthread_condattr_t ca;
    uint64_t usec = 0;

    if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
        return;
    sdn.srv = srv;
    sdn.stop = false;
    sdn.warned = false;
    sdn.period_ns = usec / 2 * 1000u;
    sdn.seen = xcalloc(srv->nworkers ? srv->nworkers : 1, sizeof(*sdn.seen));
    for (unsigned i = 0; i < srv->nworkers; i++)
        sdn.seen[i] = METRIC_GET(&srv->workers[i].metrics, loop_iterations);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sdn.cond, &ca);
    pthread_condattr_destroy(&ca);
    errno = pthread_create(&sdn.tid, NULL, watchdog_main, NULL);
    if (errno != 0) {
        log_warn("sdnotify", "pthread_create: no watchdog pings");
        pthread_cond_destroy(&sdn.cond);
        free(sdn.seen);
        sdn.seen = NULL;
        return;
    }
    sdn.thread = true;
    log_info("sdnotify", "watchdog pings every %llu ms",
             (unsigned long long)(sdn.period_ns / 1000000));
}

void sdnotify_ready(struct server *srv)
{
    const char *sock = getenv("NOTIFY_SOCKET");

    if (!sock || !sock[0])
        return;
    sdn.active = true;
    if (sd_notifyf(0, "READY=1\nSTATUS=listening on port %d, %u workers", srv->port,
                   srv->nworkers) <= 0)
        log_warnx("sdnotify", "READY=1 was not delivered to %s", sock);
    watchdog_start(srv);
}

void sdnotify_stopping(void)
{
    if (!sdn.active)
        return;
    if (sdn.thread) {
        pthread_mutex_lock(&sdn.lock);
        sdn.stop = true;
        pthread_cond_signal(&sdn.cond);
        pthread_mutex_unlock(&sdn.lock);
        pthread_join(sdn.tid, NULL);
        pthread_cond_destroy(&sdn.cond);
        free(sdn.seen);
        sdn.seen = NULL;
        sdn.thread = false;
    }
    sd_notify(0, "STOPPING=1\nSTATUS=draining");
    sdn.active = false;
}
