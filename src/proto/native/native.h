/* SPDX-License-Identifier: MIT */
/*
 * native.h - the native WebSocket protocol (docs/protocol.md) as the
 * first protocol adapter above the engine: GET /v1/ws upgrades to it, and
 * each client message is looked up by its "type" in one table
 * (native.c: grep "{\"heartbeat\"") whose handler validates the message
 * and calls the engine's operation (session.h, watch.h, engine_room.h).
 *
 * The events the engine sends its clients are encoded by the native
 * adapter table (native_encode.h, the engine's adapter.h).
 *
 * A second adapter (Pusher, Phoenix) plugs in the same way: a route of
 * its own that upgrades with its struct wsconn_app, a type table of its own
 * calling the same operations, and an adapter table of its own that its
 * on_open passes to client__open() (docs/architecture.md).
 */
#ifndef NATIVE_H
#define NATIVE_H

#include "route.h"
#include "wsconn.h"

/* GET /v1/ws; main.c joins it to the engine's routes. */
extern const struct route_list native_routes;

/* The WebSocket application on GET /v1/ws. Its app_data is a struct
 * client made by engine_client_prepare(); the engine owns it once
 * on_open ran (client__open()). */
extern const struct wsconn_app native_app;

/* Registers the native adapter table (adapter_register()) as the first,
 * so ADAPTER_DEFAULT: main.c, before the workers start. */
void native_register(void);

#endif
