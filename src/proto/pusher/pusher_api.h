/* SPDX-License-Identifier: MIT */
/*
 * pusher_api.h - the Pusher HTTP API at /apps/{id}/ (docs/pusher.md),
 * signed as the Pusher server libraries sign it (pusher_auth.h:
 * auth_key, auth_timestamp within 600 s, auth_version, body_md5,
 * auth_signature; constant-time compare).
 *
 *   POST /apps/{id}/events        {name, data, channel | channels[<= 100], socket_id?}
 *   POST /apps/{id}/batch_events  {batch: [<= 10 of {name, data, channel, socket_id?}]}
 *   POST /apps/{id}/users/{id}/terminate_connections
 *   GET  /apps/{id}/channels[?filter_by_prefix=P][&info=user_count]
 *   GET  /apps/{id}/channels/{name}[?info=user_count,subscription_count]
 *   GET  /apps/{id}/channels/presence-X/users
 *
 * Each event goes to every subscriber of each channel (every node; the
 * socket socket_id excluded) and answers 200 {}. The reads answer as
 * Pusher's (the engine's room reads and lists, room_count.h for the
 * sockets). Errors answer Pusher's statuses with a text body: 400
 * malformed, 401 signature, 404 unknown app or endpoint, 413 data over
 * 10 KB, 503 a room's owner that did not answer in time.
 */
#ifndef PUSHER_API_H
#define PUSHER_API_H

#include "pusher_app.h"
#include "route.h"

/* The apps the API serves, each at /apps/{id}/ (borrowed for the
 * process's life). */
void pusher_api_init(const struct pusher_app *apps, size_t n);

route_handler pusher_api_get;
route_handler pusher_api_post;

#endif
