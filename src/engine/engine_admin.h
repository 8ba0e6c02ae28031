/* SPDX-License-Identifier: MIT */
/*
 * engine_admin.h - the admin API's worker side (the HTTP side is
 * engine_http_admin() in engine.h; the calls on a user land on its owner
 * in engine_privacy.c).
 */
#ifndef ENGINE_ADMIN_H
#define ENGINE_ADMIN_H

#include "msg.h"

/* OP_ADMIN_ROOMS: this worker's rooms (arg 0) or one room's members (1),
 * as one part of the admin query. */
engine_op_fn engine__admin_rooms;

#endif
