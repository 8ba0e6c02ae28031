/* SPDX-License-Identifier: MIT */
/*
 * route.h - the routing table: method + path -> handler.
 *
 * The table is data: each module that serves HTTP exports its routes as
 * an array (health.h, engine.h, testing.h), and the composition root
 * (main.c) joins them with route_join() into the one table every worker's
 * net_ctx points to. Routes are matched in table order; a route's path is
 * exact, or a prefix when it ends in '/'. A path that matches with another
 * method answers 405 with an Allow header; no match answers 404 (or, for
 * GET/HEAD, the SDK directory under /sdk/ and the static directory, when
 * configured).
 */
#ifndef ROUTE_H
#define ROUTE_H

#include <stddef.h>

#include "conn.h"
#include "http.h"
#include "net.h"

/* Must answer with httpd_respond/httpd_error, defer (httpd_defer) or take
 * the connection over. nc is the worker's context, borrowed. */
typedef void route_handler(struct conn *c, const struct http_request *req, struct net_ctx *nc);

struct route {
    const char *method; /* "GET", "POST", ...; HEAD also matches GET routes */
    const char *path;   /* exact, or prefix when ending in '/' */
    route_handler *handler;
};

/* One module's routes, for route_join(). */
struct route_list {
    const struct route *routes;
    size_t n;
};

/* The initializer of a struct route_list for a static array of routes. */
#define ROUTE_LIST(arr)                       \
    {                                         \
        (arr), sizeof(arr) / sizeof((arr)[0]) \
    }

/* Joins parts[0..nparts) in order into one new table of *n routes, which
 * the caller frees with free(). Aborts on OOM. */
struct route *route_join(const struct route_list *parts, size_t nparts, size_t *n);

/* Dispatches req on c through nc's table. */
void route_dispatch(struct conn *c, const struct http_request *req, struct net_ctx *nc);

#endif
