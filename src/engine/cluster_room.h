/* SPDX-License-Identifier: MIT */
/*
 * cluster_room.h - rooms across nodes (docs/cluster.md, "Rooms across
 * nodes"). Only with `redis` set; every function is a no-op without it.
 *
 * The room's owner on each node (R, engine_room.c) runs the room core as
 * a single node does, for its local sessions; this file mirrors into it
 * the members that the other nodes hold. Per room, Redis keeps each node
 * epoch's visible local members ("<node>.<epoch> <user>" -> joinedAt and
 * metadata) and one seq; a node whose local members change runs the
 * room's script (scripts.h, SCRIPT_ROOM_PUT), which applies its ops and
 * publishes them with the next seq on the room's channel in the same
 * transaction. Every node with a local member or subscriber of the room
 * subscribes to that channel before it reads the room (SCRIPT_ROOM_GET),
 * and applies each other node's ops in seq order: a member held by node
 * A is, in node B's room core, a member with one session "~<A's epoch>".
 * So a user with tabs on two nodes is one member with two sessions, and
 * batching, interval mode, resume and privacy views stay the room core's.
 *
 * A gap in the channel's seq (a message lost by pub/sub), a
 * resubscription or Redis coming back makes the node read the room again
 * and reconcile; a node epoch past its lease and orphan grace
 * (hooks.dead) loses its members at once on every node, before anything
 * is swept. When Redis comes back a node puts its whole local part of
 * every room again ("*" op: its old fields go first).
 *
 * The ephemeral lane crosses nodes outside the sequence: a value the
 * sender's node emitted (rate-limited and coalesced by its room core) is
 * published on the room's channel with seq 0, and each other node with
 * local subscribers sends it to them as it is (at most once: pub/sub).
 */
#ifndef CLUSTER_ROOM_H
#define CLUSTER_ROOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.h"

struct engine;
struct emsg;

/* The prefix of a mirrored member's session id: never a local session's
 * (session ids a client names are refused with it: cr__local_sid()). */
#define CR_SID_PREFIX '~'

/* Whether sid may be a local session's id (not a mirrored one). */
bool cr__local_sid(const char *sid);

/* Subscription-only rooms: an id starting with CR_SUBS_ROOM is a room no
 * member joins (the native protocol refuses such ids; adapters use them
 * for their channels without members). In such a room a node's part is
 * one entry, user CR_SUBS_USER (no user id has a '!') with the node's
 * count of subscribed sockets (room_count.h) as its metadata: so the room
 * script's first and last holder of that entry are the room's occupied
 * and vacated across nodes (one producer each, docs/cluster.md
 * "Webhooks"), and the other nodes' entries are their counts. */
#define CR_SUBS_ROOM "~p"
#define CR_SUBS_USER "!s"

/* Whether room is subscription-only: CR_SUBS_ROOM after its namespace
 * prefix (ns.h: an app's rooms carry one). */
bool cr__subs_room(const char *room);

/* R side: this node's count of sockets subscribed to room (a
 * subscription-only one) changed: its part is put within CR_FLUSH_MS. */
void cr__subs_touch(struct engine *e, const char *room);
/* R side: the sockets the other nodes count in room (0 when unknown). */
uint64_t cr__remote_subs(struct engine *e, const char *room);

/* R side: room's local member user changed (joined, left, turned
 * visible or invisible, its metadata changed). joined/left: +1 when a
 * local session joined, -1 when one left, 0 otherwise. The node's part
 * is put within CR_FLUSH_MS. */
void cr__touch(struct engine *e, const char *room, const char *user, int sessions);
/* R side: room has local subscribers (engine_room.c's rsub) from now on:
 * the node keeps its channel and mirror. */
void cr__hold(struct engine *e, const char *room);
/* R side: room's rsub went: the mirror goes when nothing local is left. */
void cr__unhold(struct engine *e, const char *room);
/* Whether room's other members are known (read from Redis, or Redis is
 * unreachable): a join or subscription may be answered. Else the room is
 * being read, and engine__room_loaded() runs when it is. */
bool cr__ready(struct engine *e, const char *room);

/* R side: an HTTP read of a room whose other members are not known yet
 * (nothing local holds it): em waits for the read of the room from Redis
 * and is answered then (true), or may be answered now (false). */
bool cr__park_read(struct engine *e, struct emsg *em);

/* R side: the room core emitted a local sender's ephemeral value: it is
 * published on the room's channel (seq 0, outside the sequence), for the
 * other nodes' subscribers. */
struct room_ephemeral_view;
void cr__ephemeral_out(struct engine *e, const struct room_ephemeral_view *v);

/* R side: an application event for room's subscribers (OP_RCAST) is
 * published on the room's channel (seq 0), for the other nodes'. */
struct room_broadcast_event;
void cr__cast_out(struct engine *e, const struct room_broadcast_event *ev);

/* The cluster hooks of rooms (cluster_user.c's table names them). */
void cr__on_message(void *wctx, const char *room, uint64_t seq, const char *node, bool own,
                    const char *ops, size_t len);
void cr__on_state(void *wctx, const char *room, int err, uint64_t seq, const char *text,
                  size_t len);
void cr__on_resync(void *wctx, const char *tag);
void cr__on_dead(void *wctx, const char *list);
/* cluster_hooks.room_hooks: the room's transitions this worker's script
 * made, to the webhooks (their one producer in the cluster). */
void cr__on_hooks(void *wctx, const char *room, uint64_t seq, const char *text, size_t len);
/* Redis is back: put every room's local part again and read it again. */
void cr__on_health(struct engine *e);

void cr__init(struct engine *e);
void cr__free(struct engine *e); /* the engine is going: no callback fires */

#endif
