/*
 * pusher.h - presence-bench: the Pusher Channels protocol (version 7, as
 * pusher-js speaks it) behind proto.h's requests, for `--target pusher`.
 *
 * | request    | Pusher                                                      |
 * |------------|-------------------------------------------------------------|
 * | join       | pusher:subscribe presence-r<room>, signed channel_data      |
 * |            | {"user_id":"u<i>","user_info":{"i":0,"t":0}}                 |
 * |            | (pusher_internal:subscription_succeeded)                    |
 * | publish    | client event client-meta {"i","t"} on presence-r<room>       |
 * | cursor     | client event client-cursor {"x","i","t"}                     |
 * | heartbeat  | pusher:ping                                                 |
 * | barrier    | pusher:ping (pusher:pong)                                   |
 * | leave_room | pusher:unsubscribe                                          |
 *
 * A Pusher member cannot change its user_info once subscribed (only a
 * resubscribe can, with a snapshot of the whole channel for it), so a
 * room-wide transition from a member is a client event; the server relays
 * it to every other subscriber (never to the sender) with "user_id".
 * Client events need the app option client-events=true and are limited to
 * 10 per second per socket (Pusher's limit, presenced's too).
 */
#ifndef BENCH_PUSHER_H
#define BENCH_PUSHER_H

#include "net.h"

#include <stdint.h>

/* Splits --pusher-app ID:KEY:SECRET[:options] into n's key and secret
 * (the options are the server's; ignored here). Dies on a malformed spec. */
void pusher_use_app(struct net *n, const char *spec);

void pusher_join(struct net *n, struct conn *c, uint32_t room);
void pusher_leave_room(struct net *n, struct conn *c, uint32_t room);
void pusher_publish(struct net *n, struct conn *c, uint32_t room, uint64_t id, uint64_t t, int pad,
                    const char *pad_text);
void pusher_cursor(struct net *n, struct conn *c, uint32_t room, uint64_t id, uint64_t t);
void pusher_ping(struct net *n, struct conn *c);

/* One incoming text message: calls proto.h's app callbacks. */
void pusher_msg(struct net *n, struct conn *c, const char *p, size_t len);

#endif
