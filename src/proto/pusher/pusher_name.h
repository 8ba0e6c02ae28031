/* SPDX-License-Identifier: MIT */
/*
 * pusher_name.h - where a Pusher channel lives in the presence core: the
 * room id of a channel and the channel of a room id (pure, no state).
 *
 * A presence channel "presence-X" is the room X, the same room native
 * clients join as X: its members are the room's members. Every other
 * channel (public "X", "private-X", "private-encrypted-X") is the room
 * "~p" + its whole name, a room that only subscriptions use (no members)
 * and that the native protocol refuses to name (room ids starting with
 * "~p" are reserved), so no native client reads a private channel.
 *
 * Pusher's channel alphabet has three characters the room alphabet lacks
 * (= , ;) and lacks two it has (~ :), so those three are written "~e",
 * "~c" and "~s", and the '#' of "#server-to-user-<id>" is "~h": the
 * mapping is one-to-one on Pusher's names. A channel whose room id would
 * pass ROOM_ID_MAX (128) bytes has none (a user channel of an id over 108
 * bytes). The rooms of an app other than the first carry its namespace
 * prefix "<id>|" (ns.h) before all that: "app2|doc", "app2|~pnews".
 */
#ifndef PUSHER_NAME_H
#define PUSHER_NAME_H

#include <stdbool.h>
#include <stddef.h>

#include "pusher_auth.h"

#define PUSHER_ROOM_MAX    128  /* bytes of a room id */
#define PUSHER_ROOM_PREFIX "~p" /* rooms of the channels that are not presence channels */

/* The room of channel (a valid Pusher channel name, pusher_auth.h) in the
 * namespace ns (an app's prefix, ns.h: "" for the first app) into out
 * (PUSHER_ROOM_MAX + 1 bytes); presence says whether it is a presence
 * channel. False when the room id, prefix included, would be too long. */
bool pusher_room_of(const char *ns, const char *channel, bool presence, char *out);
/* The channel of room into out (PUSHER_CHANNEL_MAX + 1 bytes): the
 * inverse of pusher_room_of(), whatever the room's namespace (its prefix
 * is dropped: "presence-" + the name, for a room without "~p"; a native
 * room id of 128 bytes gives 137). False when it does not fit. */
bool pusher_channel_of(const char *room, char *out);
/* True when room is a presence channel's room (no "~p" after its
 * namespace prefix). */
bool pusher_room_is_presence(const char *room);

#endif
