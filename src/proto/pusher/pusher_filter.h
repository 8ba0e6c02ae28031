/* SPDX-License-Identifier: MIT */
/*
 * pusher_filter.h - a Pusher room frame as a user whom some members block
 * sees it: the blockers are not there (pure, no state).
 *
 * The engine sends a room's frames once per protocol; a socket whose user
 * is blocked by members of the room gets them through this filter, as a
 * native socket gets its own view (engine_room_client.c). A payload may
 * hold several WebSocket text frames (a delta's member events): each is
 * read on its own.
 *   pusher_internal:member_added / member_removed of a blocker: dropped;
 *   pusher_internal:subscription_succeeded: the blockers leave ids, hash
 *       and count;
 *   any event with a top-level "user_id" of a blocker (a client event on a
 *       presence channel, a broadcast from the blocker): dropped;
 *   everything else: as it is.
 * A frame that is not one of the adapter's own (not JSON, not a text
 * frame) is passed on untouched: the filter never makes a frame up.
 */
#ifndef PUSHER_FILTER_H
#define PUSHER_FILTER_H

#include <stdbool.h>

#include "buf.h"

/* Whether user blocks the reader (ctx is the caller's). */
typedef bool pusher_blocked_fn(void *ctx, const char *user);

/* f as the reader sees it: a new reference to f itself when nothing in it
 * names a blocker, a new payload when something was taken out, or NULL
 * when nothing is left. f is borrowed. */
struct payload *pusher_filter_blocked(struct payload *f, pusher_blocked_fn *blocked, void *ctx);

#endif
