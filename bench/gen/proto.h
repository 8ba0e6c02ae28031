/*
 * proto.h - presence-bench: the client protocols behind one small
 * API. Requests (join, publish a room-wide transition, cursor, heartbeat,
 * leave a room) are encoded for the connection's target; incoming messages
 * are decoded into the events a workload counts (struct app_ops).
 *
 * Names: user i is "u<i>", room r is "r<r>". A transition or cursor carries
 * {"i":<id>,"t":<now_us()>} so a receiver can match ids and compute the
 * latency on the shared CLOCK_MONOTONIC.
 *
 * | request    | native (presenced)         | Socket.IO peer        | Redis              |
 * |------------|----------------------------|-----------------------|--------------------|
 * | join       | join (room_joined)         | 42N["join",room] (43N)| SUBSCRIBE          |
 * | publish    | patch meta (room_delta)    | meta (member_meta)    | PUBLISH            |
 * | cursor     | ephemeral kind c           | cursor                | -                  |
 * | heartbeat  | heartbeat                  | heartbeat             | -                  |
 * | leave_room | room_leave                 | leave                 | UNSUBSCRIBE        |
 *
 * The fourth, Pusher's (--target pusher), is in pusher.h; the fifth,
 * Phoenix's (--target phoenix), in phoenix.h.
 */
#ifndef BENCH_PROTO_H
#define BENCH_PROTO_H

#include "net.h"

enum dkind { D_META, D_CURSOR };

/* What a workload hears. Every callback may be NULL. Callbacks run inside
 * net_poll(); they may queue output but must not reconnect c. */
struct app_ops {
    void (*ready)(struct net *n, struct conn *c); /* welcome / 40 / TCP up */
    void (*joined)(struct net *n, struct conn *c, uint32_t room);
    void (*delivery)(struct net *n, struct conn *c, int kind, uint32_t room, uint32_t from,
                     uint64_t id, uint64_t t);
    void (*member)(struct net *n, struct conn *c, int joined, uint32_t room, uint32_t user);
    void (*error)(struct net *n, struct conn *c, const char *p, size_t len);
    void (*closed)(struct net *n, struct conn *c, int code); /* c->ready: was up */
    void (*pong)(struct net *n, struct conn *c);             /* answer to proto_barrier */
};

/* Bytes of padding ("p":"xxx...") added to every published transition
 * (native and Socket.IO), to make deltas bigger (w8). At most 900. */
extern int proto_pad;

/* The callbacks of the running workload (set before the first poll). */
extern const struct app_ops *app;

/* Requests; queued on c, written at the next flush. A resume (native) is
 * requested with `since` = 1 and the last epoch/seq the caller saw. */
void proto_join(struct net *n, struct conn *c, uint32_t room);
void proto_leave_room(struct net *n, struct conn *c, uint32_t room);
void proto_publish(struct net *n, struct conn *c, uint32_t room, uint32_t from, uint64_t id,
                   uint64_t t);
void proto_cursor(struct net *n, struct conn *c, uint32_t room, uint64_t id, uint64_t t);
void proto_heartbeat(struct net *n, struct conn *c);

/* Asks for an answer that comes after everything sent before on c
 * (native ping, a Socket.IO join with an ack of room 900000000 + user);
 * app->pong fires with it. */
void proto_barrier(struct net *n, struct conn *c);

#endif
