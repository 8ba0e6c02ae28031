/*
 * phoenix.h - presence-bench: the Phoenix Channels protocol (serializer
 * vsn 2.0.0, as phoenix.js speaks it) behind proto.h's requests, for
 * `--target phoenix` on /socket/websocket?vsn=2.0.0 (the JWT as ?token=).
 *
 * | request    | Phoenix (frames are [join_ref, ref, topic, event, payload])  |
 * |------------|--------------------------------------------------------------|
 * | join       | phx_join r<room> {"meta":{"i":0,"t":0}}, ref "0" (its ok     |
 * |            | phx_reply: joined)                                           |
 * | cursor     | broadcast {"type":"broadcast","event":"cursor",              |
 * |            | "payload":{"x","u","i","t"}}, a ref of its own (phx_reply ok) |
 * | heartbeat  | heartbeat on topic phoenix                                   |
 * | barrier    | heartbeat (its phx_reply on topic phoenix)                   |
 * | leave_room | phx_leave                                                    |
 *
 * The socket joins the room's own topic (as phoenix.js joins "room:lobby"),
 * so it is a member with a meta, as a native member is, and receives the
 * room's broadcast frames as the server shares them. A W5 cursor is a
 * broadcast (Supabase's and phoenix.js's way to send a cursor): the server
 * relays it to every other socket of the room (never to the sender), with
 * no sender in the frame, so the payload names it ("u"). A metadata update
 * (W4's transition) has no Phoenix message from a phoenix.js member, so
 * the target runs W5 only. Broadcasts are limited to 20 per second per
 * socket (presenced's Phoenix limit).
 */
#ifndef BENCH_PHOENIX_H
#define BENCH_PHOENIX_H

#include "net.h"

#include <stdint.h>

void phoenix_join(struct net *n, struct conn *c, uint32_t room);
void phoenix_leave_room(struct net *n, struct conn *c, uint32_t room);
void phoenix_cursor(struct net *n, struct conn *c, uint32_t room, uint64_t id, uint64_t t);
void phoenix_heartbeat(struct net *n, struct conn *c);

/* One incoming text message: calls proto.h's app callbacks. */
void phoenix_msg(struct net *n, struct conn *c, const char *p, size_t len);

#endif
