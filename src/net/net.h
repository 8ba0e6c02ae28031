/* SPDX-License-Identifier: MIT */
/*
 * net.h - the per-worker context the net layer's modules share.
 *
 * The HTTP server (httpd.c), the router (route.c), event streams (sse.c)
 * and WebSocket upgrades (wsconn.c) read their settings, count into their
 * worker's metrics and find the route table through one struct net_ctx
 * per worker, made by the composition root (main.c) before the worker's
 * loop runs and immutable after that. The net layer never names the
 * application: route handlers of upper layers find their own per-worker
 * state in nc->app, which net never reads.
 */
#ifndef NET_H
#define NET_H

#include <stddef.h>

#include "config.h"
#include "metrics.h"
#include "wsconn.h"

struct route;
struct worker;

struct net_ctx {
    const struct config *cfg;   /* borrowed, immutable while workers run */
    struct metrics *metrics;    /* the worker's counters (written by it only) */
    const struct route *routes; /* the composed route table (route.h), borrowed */
    size_t nroutes;
    struct wsconn_opts wsconn_opts; /* WebSocket settings derived from cfg */
    struct worker *worker;          /* the runtime's worker of this context: for upper
                                     * layers (bus, loop); net modules never use it */
    void *app;                      /* the application's per-worker state (main.c: the
                                     * engine), for route handlers; net never reads it */
};

#endif
