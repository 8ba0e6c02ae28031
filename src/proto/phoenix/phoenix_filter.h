/* SPDX-License-Identifier: MIT */
/*
 * phoenix_filter.h - a Phoenix room frame as a user whom some members
 * block sees it: the blockers are not there (pure, no state).
 *
 * The engine sends a room's frames once per serializer; a socket whose
 * user is blocked by members of the room gets them through this filter
 * (adapter.h filter_blocked), as native and Pusher sockets get their own
 * views.
 *   presence_state: the blockers' keys are taken out;
 *   presence_diff: the blockers' keys leave joins and leaves; a diff left
 *       with neither is not sent;
 *   everything else: as it is (a broadcast names no sender in its frame:
 *       the engine drops a blocker's broadcasts for the users it blocks
 *       before they reach any filter, engine__room_on_event()).
 * A frame that is not one of the adapter's own pushes is passed on
 * untouched: the filter never makes a frame up.
 */
#ifndef PHOENIX_FILTER_H
#define PHOENIX_FILTER_H

#include <stdbool.h>

#include "buf.h"
#include "phoenix_msg.h"

/* Whether user blocks the reader (ctx is the caller's). */
typedef bool phx_blocked_fn(void *ctx, const char *user);

/* f (one text frame of serializer vsn, borrowed) as the reader sees it: a
 * new reference to f when nothing in it names a blocker, a new frame when
 * something was taken out, or NULL when nothing is left. */
struct payload *phx_filter_blocked(enum phx_vsn vsn, struct payload *f, phx_blocked_fn *blocked,
                                   void *ctx);

#endif
