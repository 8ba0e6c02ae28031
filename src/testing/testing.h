/* SPDX-License-Identifier: MIT */
/*
 * testing.h - endpoints that exist only in test builds (make asan, make
 * test, the fuzz build): the Makefile compiles src/testing/ into those
 * builds only, and main.c adds testing_routes to the route table there.
 * Release builds contain none of it.
 *   GET /test/echo       a WebSocket echo application (echo.c), for the
 *                        conformance suite
 *   GET /test/sse        a synthetic event stream: events id last+1 ..
 *                        last+3 ("tick", data {"n":id}) after the client's
 *                        Last-Event-ID (0 when absent), then keep-alives
 *   GET /test/broadcast  every text message to every client, on every
 *                        worker (relay.c): the fan-out path end to end
 * The layer sits on net and runtime and below nothing: no production
 * module includes it.
 */
#ifndef TESTING_H
#define TESTING_H

#include "route.h"
#include "wsconn.h"

extern const struct route_list testing_routes;
extern const struct wsconn_app echo_app;  /* echo.c */
extern const struct wsconn_app relay_app; /* relay.c: app_data is the struct net_ctx */

/* Registers relay.c's bus message handler (before server_start). */
void testing_register(void);

#endif
