/* SPDX-License-Identifier: MIT */
/*
 * testing.c - the test builds' route table (testing.h) and the synthetic
 * event stream of GET /test/sse.
 */
#include "testing.h"

#include <stdio.h>

#include "sse.h"

static void get_test_echo(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    wsconn_upgrade(c, req, &nc->wsconn_opts, &echo_app, NULL);
}

static void get_test_broadcast(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    wsconn_upgrade(c, req, &nc->wsconn_opts, &relay_app, nc);
}

static void get_test_sse(struct conn *c, const struct http_request *req, struct net_ctx *nc)
{
    uint64_t last = 0;
    struct sse_stream *s;

    sse_last_event_id(req, &last);
    s = sse_start(c, nc, NULL, NULL);
    for (uint64_t id = last + 1; id <= last + 3; id++) {
        char data[64];
        int n = snprintf(data, sizeof(data), "{\"n\":%llu}", (unsigned long long)id);
        sse_send(s, "tick", id, data, (size_t)n);
    }
}

static const struct route routes[] = {
    {"GET", "/test/echo", get_test_echo},
    {"GET", "/test/sse", get_test_sse},
    {"GET", "/test/broadcast", get_test_broadcast},
};

const struct route_list testing_routes = ROUTE_LIST(routes);
