/* SPDX-License-Identifier: MIT */
/*
 * engine_admin.h - the admin API's worker side (the HTTP side is
 * engine_http_admin() in engine.h; the calls on a user land on its owner
 * in engine_privacy.c).
 */
#ifndef ENGINE_ADMIN_H
#define ENGINE_ADMIN_H

#include <stdint.h>

#include "msg.h"

/* OP_ADMIN_ROOMS: this worker's rooms (arg 0) or one room's members (1),
 * as one part of the admin query. */
engine_op_fn engine__admin_rooms;
/* OP_ADMIN_NODE, on the cluster home: this node's summary (node id,
 * epoch, start, counts, health) as one part of the admin query. */
engine_op_fn engine__admin_node;
/* On the cluster home with redis set, every ADMIN_INFO_EVERY_MS: puts
 * this node's summary for the other nodes' /v1/admin/nodes. From
 * engine_tick(). */
#define ADMIN_INFO_EVERY_MS 1000
struct engine;
void engine__admin_tick(struct engine *e, uint64_t now);

/* OP_ADMIN with ADMIN_GET_USER on uid's owner, once its settings are in
 * (engine__op_admin): reads the user's contact and block counts from the
 * store (req is parked meanwhile), then answers the query with the
 * user's presence, its sessions here, its settings and those counts. */
void engine__admin_user(struct engine *e, struct emsg *req);

/* Ends every session of uid on every node, as the admin API's kick does
 * (session_ended "kicked" with reason as its message, NULL = none), with
 * nobody to answer: for an adapter's API (Pusher's terminate_connections). */
void engine__kick_user(struct engine *e, const char *uid, const char *reason);

#endif
