/* SPDX-License-Identifier: MIT */
/*
 * pusher_encode.h - the Pusher adapter's table (struct proto_adapter): the
 * engine's events as Pusher Channels protocol 7 frames (docs/pusher.md).
 *
 *   welcome (observer)  pusher:connection_established {socket_id, activity_timeout}
 *   welcome (a user's)  nothing: the socket was welcomed at open
 *   error               pusher:subscription_error {type, error, status} when the
 *                       ref names a channel (a JSON string), else pusher:error
 *   room snapshot       pusher_internal:subscription_succeeded; on a presence
 *                       channel with {"presence":{ids, hash, count}}
 *   room delta          pusher_internal:member_added per join and per patch (the
 *                       new user_info), member_removed per leave; nothing on a
 *                       channel that is not a presence channel
 *   broadcast           {event, channel, data[, user_id]}
 *   acks, room_joined, presence, privacy, ephemerals: nothing
 *
 * A socket id is "<boot>.<connection id>": boot is a random number drawn
 * at registration, so ids differ between runs and nodes.
 */
#ifndef PUSHER_ENCODE_H
#define PUSHER_ENCODE_H

#include <stdbool.h>
#include <stdint.h>

#include "adapter.h"
#include "pusher_auth.h"

#define PUSHER_ACTIVITY_TIMEOUT_S 120 /* announced in the handshake (Pusher's) */

extern const struct proto_adapter pusher_adapter;

/* Draws the boot number of the socket ids (before the workers start).
 * Each app's subscription-count comes from pusher__app_of(), per room. */
void pusher_encode_init(void);
/* pusher:error {code, message} (code 0: null) and
 * pusher:subscription_error {type, error, status} on channel, as frames. */
struct payload *pusher_frame_error(int code, const char *message);
struct payload *pusher_frame_subscription_error(const char *channel, const char *type,
                                                const char *message, int status);
/* c's socket id into out. */
void pusher_socket_id(uint64_t conn_id, char out[PUSHER_SOCKET_ID_MAX]);
/* The connection of socket id s on this node; false when s is another
 * node's or not a socket id. */
bool pusher_conn_of(const char *s, uint64_t *conn_id);

#endif
