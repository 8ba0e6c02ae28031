/* SPDX-License-Identifier: MIT */
/*
 * pusher.h - the Pusher Channels protocol (version 7), the second protocol
 * adapter: pusher-js, Laravel Echo and the `pusher` server libraries work
 * against presenced unchanged (docs/pusher.md).
 *
 * WebSocket at GET /app/{key} (pusher.c): a socket opens anonymous and is
 * welcomed with pusher:connection_established. pusher:subscribe to a
 * public or private channel subscribes it to the channel's room (no
 * membership); to a presence channel, with a signed channel_data, it
 * becomes a session of the channel_data's user_id (the first presence
 * subscription starts it; every later one must name the same user) and
 * joins the room X of presence-X with user_info as the member's metadata.
 * Members are users, so two tabs make one member, and the last tab's
 * close removes it after the reconnect grace. client-* events on private
 * and presence channels go to the channel's other subscribers when the
 * app enables them. While a socket is open its session is kept alive
 * (a heartbeat every session-ttl-ms / 3): the WebSocket's own pings
 * (ws-ping-interval-ms) close a dead one.
 *
 * HTTP API at /apps/{id}/... (pusher_api.c): POST events and batch_events,
 * signed as the Pusher server libraries sign them.
 *
 * Several apps: each is a namespace of its own users and rooms (ns.h).
 * A socket of /app/{key} and a call of /apps/{id}/ name wire ids; the
 * adapter adds its app's prefix where they come in and the encoders drop
 * it where ids go out (the first app's prefix is empty: it shares the
 * native namespace).
 */
#ifndef PUSHER_H
#define PUSHER_H

#include "config.h"
#include "route.h"

struct client;

/* The routes: GET /app/ (WebSocket) and /apps/ (HTTP API). Empty until
 * pusher_register() found an app. */
extern struct route_list pusher_routes;

/* Reads pusher-app from cfg: with an app, registers the adapter (after
 * the native one) and fills pusher_routes. 0 (also without an app), or -1
 * with a message in err. Before the workers start. */
int pusher_register(const struct config *cfg, char *err, size_t errlen);

struct hooks_config;
/* Adds each registered app's webhook endpoint to hc: the app's
 * webhook=URL, else cfg's pusher-webhook-url (none: nothing added), each
 * for the rooms and users of its app's namespace, signed with its secret.
 * After pusher_register(); configuration time. 0, or -1 with a message in
 * err. */
int pusher_webhooks(const struct config *cfg, struct hooks_config *hc, char *err, size_t errlen);

struct pusher_app;
/* The app whose namespace the internal id (room or user) is in, or NULL. */
const struct pusher_app *pusher__app_of(const char *id);

/* The adapter table's hooks (pusher_encode.c's table points to them). */
void pusher__on_started(struct client *c);
void pusher__release(struct client *c);

#endif
