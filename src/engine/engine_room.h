/* SPDX-License-Identifier: MIT */
/*
 * engine_room.h - rooms on the workers (engine_room.c has the model):
 * the operations a protocol adapter asks for on a client (join, leave,
 * patch, ephemeral, an event stream's subscription), and the three roles'
 * bus ops: R, the room's owner (engine_room.c), U, the joining user's
 * owner (engine_room.c), and the client's worker (engine_room_client.c,
 * with the blocks inside rooms).
 */
#ifndef ENGINE_ROOM_H
#define ENGINE_ROOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "msg.h"

struct client;
struct engine;
struct room_engine;

/* ---- client side: the operations ---- */

/* True when c may join room: by its token's rooms claim, or by tok (NULL:
 * none), a room subscription token for its connection, when
 * room-token-secret is set. Without a secret and without a claim every
 * room is open. */
bool engine__room_allowed(const struct client *c, const char *room, const char *tok);
/* Joins room (valid) with meta (compact JSON, NULL = none), resuming
 * after (epoch, seq) when has_since. The snapshot or the missed deltas,
 * then room_joined, come from R. -EALREADY when c is in the room already,
 * -EMLINK when it is in max-rooms-per-connection rooms. limit (1..65535,
 * 0 = none) caps the members this join may make: R refuses it with
 * room_full when the room has limit members and c's user is not one of
 * them (a second tab of a member always joins): Pusher's member-limit. */
int engine__room_join(struct client *c, const char *room, const char *meta, bool has_since,
                      uint64_t epoch, uint64_t seq, unsigned limit, const char *ref);
/* Leaves room: -ENOENT when c is not in it. */
int engine__room_leave(struct client *c, const char *room, const char *ref);
/* Ends a subscription without membership (engine__room_stream()):
 * -ENOENT when c has none to room. */
int engine__room_unsubscribe(struct client *c, const char *room);
/* True when c's connection is subscribed to (or joined) room. */
bool engine__room_linked(struct client *c, const char *room);
/* A metadata patch (meta: a JSON merge patch, compact) or an ephemeral
 * message (data: compact JSON, kind a string) to the room's owner. */
void engine__room_patch(struct client *c, const char *room, const char *meta, const char *ref);
void engine__room_ephemeral(struct client *c, const char *room, const char *kind, const char *data,
                            const char *ref);
/* True while c's ephemerals are dropped: it asked to hide and the rooms
 * have not heard yet (session__privacy()). */
bool engine__room_ephemerals_held(const struct client *c);
/* Subscribes an event-stream client to room (no membership), resuming
 * after last_event_id ("epoch-seq") when given. */
void engine__room_stream(struct client *c, const char *room, const char *last_event_id);
/* An application event ev (its strings copied) to every subscriber of
 * ev->room in every protocol that has such a message, except the
 * connection exclude (0: none): from any worker, e.g. an HTTP API call. Not
 * part of the room's state: no seq, never replayed, never dropped. With
 * `redis`, the room's channel takes it to the other nodes' subscribers
 * (at most once, as pub/sub is), which skip ev->exclude's socket. */
struct room_broadcast_event;
void engine__room_broadcast(struct engine *e, const struct room_broadcast_event *ev,
                            uint64_t exclude);
/* A closing client's room links go (membership follows the session). */
void engine__rooms_client_closed(struct client *c);
/* Frees the client side's local rooms (engine_free). */
void engine__rooms_client_free(struct engine *e);

/* True when tok is a room subscription token of holder (the user, or
 * "http" for an HTTP read without a reader) for room that has not expired:
 * "<exp>.<hex>", exp in Unix seconds (1..12 digits, wall clock) and hex the
 * lowercase HMAC-SHA256 of "<holder>:<room>:<exp>" under room-token-secret,
 * as the application's backend signs it (like Pusher's channel auth). */
bool engine__room_token_ok(const struct engine *e, const char *holder, const char *room,
                           const char *tok);

/* ---- U side ---- */

/* owner's acknowledged block (or unblock) of target; tells every worker,
 * so that target's sockets stop (or start) seeing owner in rooms. */
void engine__rooms_block_changed(struct engine *e, const char *owner, const char *target,
                                 bool blocked);
/* Tells the owners of uid's rooms its new room visibility. */
void engine__rooms_visibility(struct engine *e, const char *uid, bool visible);
/* A session ended: R hears its leaves (no ghosts). */
void engine__rooms_session_ended(struct engine *e, const char *sid, const char *uid);

/* ---- R side ---- */

struct room_engine *engine__rooms_new(struct engine *e);
void engine__rooms_free(struct engine *e);
/* R side: appends "subscriptions" to the info object in out (its last
 * byte a '}'): the sockets of the published members that the reader with
 * those blockers sees, for a room with members (a hidden member's
 * sockets are not told), else every socket subscribed (room_count.h). */
void engine__room_subscriptions(struct engine *e, const char *room, char *const *blockers,
                                size_t nblockers, struct buf *out);
/* R side: the room's socket count n changed: sent to its subscribers in
 * the protocols that have a message for it (encode_room_count). */
void engine__room_count_event(struct engine *e, const char *room, uint64_t n);
/* GET /v1/rooms/{id}: the room's info object as seen by a reader blocked
 * by the nblockers users in blockers (not listed, not counted; see
 * room_encode_info_for()). */
void engine__room_info(struct engine *e, const char *room, char *const *blockers, size_t nblockers,
                       struct buf *out);

/* ---- restoring a clean stop's sessions (persist.h) ---- */

/* U: restored session sid (in e's presence core) is in room. */
void engine__rooms_restore_session(struct engine *e, const char *sid, const char *room);
/* R: puts back session sid of uid in room with meta (compact JSON, NULL:
 * {}), visible or not (an invisible one is never published). 0 or a
 * ROOM_E_* error of room_join(). */
int engine__rooms_restore_member(struct engine *e, const char *room, const char *uid,
                                 const char *sid, const char *meta, bool visible);
/* R: publishes room's restored members at once (to nobody yet: the first
 * subscriber gets a snapshot with them). */
void engine__rooms_restore_flush(struct engine *e, const char *room);

/* ---- the op-table handlers ---- */
engine_op_fn engine__room_on_join;    /* OP_RJOIN (U) */
engine_op_fn engine__room_on_leave;   /* OP_RLEAVE (U) */
engine_op_fn engine__room_on_join_r;  /* OP_RJOIN_R (R) */
engine_op_fn engine__room_on_leave_r; /* OP_RLEAVE_R (R) */
engine_op_fn engine__room_on_patch;   /* OP_RPATCH and OP_REPHEM (R) */
engine_op_fn engine__room_on_unsub;   /* OP_RUNSUB (R) */
engine_op_fn engine__room_on_info;    /* OP_RINFO (R) */
engine_op_fn engine__room_on_sub;     /* OP_RSUB (R) */
engine_op_fn engine__room_on_cast;    /* OP_RCAST (R) */
/* R: room's members on the other nodes are known now (cluster_room.c):
 * the joins and subscriptions parked for it are answered. */
void engine__room_loaded(struct engine *e, const char *room);
/* R: an ephemeral value that another node's room core let through
 * (rate-limited there, from a visible member): sent to the local
 * subscribers as the local ones are, without entering this node's core. */
struct room_ephemeral_view;
void engine__room_remote_ephemeral(struct engine *e, const struct room_ephemeral_view *v);
/* R: an application event another node published (cluster_room.c): sent
 * to the local subscribers but the socket ev->exclude names here. */
void engine__room_remote_cast(struct engine *e, const struct room_broadcast_event *ev);
engine_op_fn engine__room_on_vis;     /* OP_RVIS (R) */
engine_op_fn engine__room_on_refresh; /* OP_RREFRESH (R) */
engine_op_fn engine__room_on_state;   /* OP_RSTATE (client side) */
engine_op_fn engine__room_on_event;   /* OP_REVENT (client side) */
engine_op_fn engine__room_on_block;   /* OP_RBLOCK (client side, every worker) */

#endif
