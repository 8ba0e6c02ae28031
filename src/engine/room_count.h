/* SPDX-License-Identifier: MIT */
/*
 * room_count.h - how many sockets are subscribed to each room (a join and
 * an event stream's subscription are one each), for the protocols that
 * report it: Pusher's subscription_count, its channel list and the
 * occupancy of its channels without members (docs/pusher.md).
 *
 * Two roles, as for the rooms (engine_room.c):
 *   - the client's worker knows its own sockets per room (its struct
 *     lroom). A change is recorded (rcount__local()) and sent to the
 *     room's owner R once per loop iteration (rcount__flush(), from
 *     engine_tick()) as the worker's new count, OP_RCOUNT; the last
 *     socket's leave is the OP_RUNSUB the worker sends anyway, count 0.
 *     A worker's counts and unsubscribes of a room all go the same way,
 *     worker to R over the bus, in order, so the last one R got is the
 *     worker's count: no versions needed, however the joins travel.
 *   - R sums the workers' counts per room (struct rcount in e->rcounts,
 *     only while the sum is not 0). A sum that turns from 0 to more or
 *     back is a webhook on one node (hooks_channel_occupancy(): Pusher's
 *     channel_occupied/vacated of the channels without members); a
 *     changed sum goes to the room's subscribers, RCOUNT_EVENT_MS after
 *     the first change (so a burst is one message), in every protocol
 *     with a message for it (proto_adapter.encode_room_count: Pusher's
 *     pusher_internal:subscription_count).
 * Counting is on only when a registered adapter asks for it
 * (proto_adapter.room_counts): the native protocol alone pays nothing.
 * With redis set, a subscription-only room's count crosses nodes as the
 * node's part of the room (cluster_room.h, CR_SUBS_USER): the occupancy
 * webhooks then come from the room script's first and last holder, once
 * across nodes, and the sums add the other nodes' counts; a room list
 * lists the rooms this node knows (docs/pusher.md).
 */
#ifndef ROOM_COUNT_H
#define ROOM_COUNT_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "msg.h"

struct engine;

#define RCOUNT_EVENT_MS 100 /* a changed count is sent this long after its first change */

/* Whether subscriptions are counted (an adapter asked). */
bool rcount__on(const struct engine *e);
/* Client side: this worker now has n sockets in room (n > 0), sent to R at
 * the next rcount__flush(). */
void rcount__local(struct engine *e, const char *room, uint32_t n);
/* Client side: the worker's last socket of room left; its pending count
 * is dropped, as the caller's OP_RUNSUB says 0. */
void rcount__local_gone(struct engine *e, const char *room);
/* Client side: sends the recorded counts (once per loop iteration). */
void rcount__flush(struct engine *e);
/* R side: worker from has no socket left in room (OP_RUNSUB). */
void rcount__unsub(struct engine *e, const char *room, unsigned from);
/* R side: the sockets subscribed to room on every worker of this node. */
uint64_t rcount__local_total(const struct engine *e, const char *room);
/* R side: ditto on every node (with redis set, the other nodes' counts as
 * this node mirrors them: cluster_room.h, CR_SUBS_USER). */
uint64_t rcount__get(struct engine *e, const char *room);
/* R side: another node's count of room changed (cluster_room.c). */
void rcount__remote_changed(struct engine *e, const char *room);

/* The op-table handlers: OP_RCOUNT (R side: a worker's count) and
 * OP_RLIST (every worker: its rooms for engine_list_rooms(), one part). */
engine_op_fn rcount__on_count;
engine_op_fn rcount__on_list;

void rcount__init(struct engine *e);
void rcount__free(struct engine *e);

#endif
