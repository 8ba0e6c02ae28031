/* SPDX-License-Identifier: MIT */
/*
 * proto.h - the native JSON protocol on GET /v1/ws (docs/protocol.md).
 *
 * The foundation implements the envelope every message shares: the server
 * greets with "welcome" (protocol version, limits), answers "ping" with
 * "pong", and answers anything it cannot understand with an "error"
 * message while keeping the connection. The presence engine adds its
 * message types behind the same dispatcher.
 */
#ifndef PROTO_H
#define PROTO_H

#include "wsconn.h"

#define PROTO_VERSION 1
#define PROTO_MAX_ERRORS 20 /* consecutive bad messages before close 1008 */

/* app_data passed to ws_upgrade must be the struct worker. */
extern const struct ws_app proto_app;

#endif
