/* SPDX-License-Identifier: MIT */
/*
 * phoenix.h - Phoenix Channels and Presence (phoenix.js 1.8) and Supabase
 * Realtime presence and broadcast (realtime-js 2.x), the third protocol
 * adapter: their client code works against presenced with only the
 * endpoint changed (docs/phoenix.md).
 *
 * WebSocket at GET /socket/websocket (phoenix.js) and
 * /realtime/v1/websocket (realtime-js; its apikey parameter is accepted
 * and not checked), ?vsn=2.0.0 (arrays) or 1.0.0 (objects, the default),
 * subprotocol "phoenix" answered when offered. The socket is its user's
 * session: ?user= under auth = none, a token under auth = jwt (?token=,
 * phoenix.js's authToken subprotocol "base64url.bearer.phx.<base64>", or
 * realtime-js's access_token in a join or its access_token event). A
 * socket without a user may still join topics: it sees presence and
 * broadcasts without appearing.
 *
 * Long-poll at /socket/longpoll (phoenix.js's LongPoll transport, the
 * one it falls back to): a session of HTTP requests, with the same
 * channels, identity rules and limits as a WebSocket (phoenix_longpoll.c).
 *
 * A topic is the room of the same name, "realtime:" dropped. phx_join on
 * a phoenix.js topic makes the socket a member, its join params' "meta"
 * object its meta; on a Supabase topic ("realtime:...") it only
 * subscribes, and the presence event's track/untrack make it a member
 * (track's payload its meta) and not. Every join is answered with
 * phx_reply, then presence_state stamped with the join's join_ref;
 * presence_diff follows each room delta. A user is one key; each of its
 * connections is one meta with its own phx_ref (the room core's
 * per-session values, room.h), and the key leaves with the last
 * connection, after the reconnect grace. broadcast events go to the
 * topic's other sockets of every protocol (engine__room_broadcast).
 */
#ifndef PHOENIX_H
#define PHOENIX_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "config.h"
#include "route.h"

struct client;

/* The routes: GET /socket/websocket and /realtime/v1/websocket, and the
 * long-poll transport's GET, POST and OPTIONS /socket/longpoll
 * (phoenix_longpoll.c). Empty
 * until phoenix_register() registered the adapters. */
extern struct route_list phoenix_routes;

/* With phoenix = on (the default), registers the adapters (one per
 * serializer, after the native and Pusher ones) and fills phoenix_routes.
 * Returns 0, or -1 with a message in err (too many adapters). Before the
 * workers start. */
int phoenix_register(const struct config *cfg, char *err, size_t errlen);

/* The adapter tables' hooks (phoenix_encode.c's tables point to them). */
void phoenix__send(struct client *c, struct payload *f);
void phoenix__send_room(struct client *c, struct payload *f, bool bulk);
void phoenix__on_started(struct client *c);
void phoenix__release(struct client *c);
void phoenix__close(struct client *c, unsigned code, const char *reason); /* a long-poll session */
uint64_t phoenix__conn_of(const char *tag);

#endif
