/* SPDX-License-Identifier: MIT */
/*
 * route.h - the routing table: method + path -> handler.
 *
 * Routes are matched in table order; a route's path is exact, or a prefix
 * when it ends in '/'. A path that matches with another method answers 405
 * with an Allow header; no match answers 404 (or the static directory for
 * GET/HEAD when configured).
 */
#ifndef ROUTE_H
#define ROUTE_H

#include "conn.h"
#include "http.h"

struct worker;

/* Must answer with httpd_respond/httpd_error or take the connection over. */
typedef void route_handler(struct conn *c, const struct http_request *req, struct worker *w);

struct route {
    const char *method; /* "GET", "POST", ...; HEAD also matches GET routes */
    const char *path;   /* exact, or prefix when ending in '/' */
    route_handler *handler;
};

/* Dispatches req on c. */
void route_dispatch(struct conn *c, const struct http_request *req, struct worker *w);

#endif
