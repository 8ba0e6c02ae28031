/* SPDX-License-Identifier: MIT */
/*
 * hooks.h - webhook delivery: the engine's transitions as HTTP POSTs to
 * the configured endpoints, in the Pusher format (Pusher apps) or the
 * Standard Webhooks format (native side), with batching, retries and
 * bounded queues. The formats, signatures and schedules are webhook.h's;
 * the transport is httpc.h's; this module queues, times and counts.
 *
 * ---- What is sent ----
 *
 * Native endpoint (webhook-url, webhook-secret), Standard Webhooks:
 *   user.online / user.offline  when a user's presence turns online or
 *       offline as everyone sees it (the "everyone" privacy class: an
 *       invisible or hidden user is offline here too, so a hidden user
 *       leaves no trace). Offline comes only after the reconnect grace,
 *       so a reload sends nothing.
 *   room.occupied / room.vacated  when a room's visible members go from
 *       none to some and back; member.joined / member.left per user (not
 *       per session: two tabs are one member). Rooms of the Pusher
 *       channels that are not presence channels are not reported.
 * Pusher endpoint (per app webhook=URL, or pusher-webhook-url):
 *   channel_occupied / channel_vacated and member_added / member_removed
 *   of presence channels (a native room X is presence-X), and client_event
 *   for the client events the app relays (hooks_client_event()), and
 *   channel_occupied / channel_vacated of the other channels, from their
 *   subscribed sockets (hooks_channel_occupancy(), room_count.h).
 *
 * ---- Delivery ----
 *
 * Per worker and endpoint one lane: a FIFO of messages with at most one
 * request in flight, so one worker's events reach an endpoint in order.
 * Pusher events are batched (20 events or 250 ms: webhook.h) into one
 * signed body; Standard Webhooks events go one per request, each with its
 * id (webhook-id, the same on every retry) and a fresh timestamp and
 * signature per attempt. A failed attempt is retried on the format's
 * schedule (webhook_next_delay_ms(), jitter); a message whose schedule
 * is spent, or a 410 from a Standard Webhooks endpoint, disables the
 * endpoint, on every worker, until restart: the queues are dropped and
 * counted, and so is everything after (presenced_webhook_endpoints_disabled).
 * A lane holds at most HOOKS_QUEUE_MAX messages of HOOKS_QUEUE_BYTES in
 * all; an event past that is dropped and counted (presenced_webhooks_dropped_total), never
 * silently. Without Redis the queue is in memory: at-most-once across a crash or a restart
 * (docs/api.md "Webhooks"). With Redis the events go through a Redis Stream per endpoint
 * instead, delivered by any node: at-least-once across a node's crash (hooks_stream.h).
 * Only the configured URLs are ever called, and redirects are not followed (httpc.h).
 *
 * ---- Threads ----
 *
 * struct hooks_config is built before the workers start and read-only
 * while they run but for each endpoint's disabled flag (atomic): an
 * endpoint is disabled for the whole process. struct hooks is one
 * worker's, used on its loop only.
 */
#ifndef HOOKS_H
#define HOOKS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "httpc.h"
#include "ns.h"
#include "webhook.h"

struct cluster;
struct hstream;
struct room_delta_view;
struct worker;

#define HOOKS_ENDPOINTS_MAX 17                  /* configured endpoints: native + 16 apps */
#define HOOKS_QUEUE_MAX     10000               /* messages waiting per worker and endpoint */
#define HOOKS_QUEUE_BYTES   (16u * 1024 * 1024) /* and their bodies' bytes */
#define HOOKS_URL_MAX       256                 /* bytes of a configured URL */
#define HOOKS_SECRET_MAX    64                  /* bytes of a Pusher app key or secret */

/* The name a Pusher endpoint gives room (a channel), into out (size
 * bytes); false = the room is not reported to it. */
typedef bool hooks_room_name_fn(const char *room, char *out, size_t size);

/* One configured endpoint. */
struct hook_endpoint {
    enum webhook_format format;
    struct httpc_target target;
    char url[HOOKS_URL_MAX]; /* as configured, for the log */
    uint32_t timeout_ms;
    /* WEBHOOK_PUSHER */
    char app_key[HOOKS_SECRET_MAX + 1];
    char app_secret[HOOKS_SECRET_MAX + 1];
    hooks_room_name_fn *channel_of;
    char ns[NS_PREFIX_MAX + 1]; /* the app's namespace prefix (ns.h): its rooms only */
    /* WEBHOOK_STANDARD */
    struct webhook_key key;
    /* Set once, by the first worker that gives the endpoint up; every
     * worker then drops what it holds for it. The one field written while
     * the workers run. */
    _Atomic bool disabled;
};

struct hooks_config {
    struct hook_endpoint ep[HOOKS_ENDPOINTS_MAX];
    unsigned n;
    uint64_t node_epoch; /* event ids: random at start (webhook_event_id()) */
};

/* Adds a Standard Webhooks endpoint: url (http://, httpc_target_parse()),
 * secret ("whsec_" + base64, webhook_key_parse()). Configuration time
 * only (the name is resolved here). 0, or -1 with a sentence in err. */
int hooks_config_add_standard(struct hooks_config *hc, const char *url, const char *secret,
                              char *err, size_t errlen);
/* Adds a Pusher endpoint for the app (key, secret) whose namespace
 * prefix is ns (ns.h; "" for the first app): it hears of that
 * namespace's rooms only, rooms named by channel_of, user ids without
 * the prefix. The Standard endpoint hears of the first namespace's only.
 * 0, or -1 with a sentence in err. */
int hooks_config_add_pusher(struct hooks_config *hc, const char *url, const char *app_key,
                            const char *app_secret, const char *ns, hooks_room_name_fn *channel_of,
                            char *err, size_t errlen);

struct hooks;

/* Registers the bus handler of the Redis Streams queue; before
 * server_start. */
void hooks_register(void);

/* Worker w's lanes, on its loop, counting into its metrics (borrowed).
 * hc NULL or without endpoints gives NULL: every hooks_*() below takes
 * NULL as "no webhooks" and does nothing. The worker's id makes event ids
 * distinct between workers. cl non-NULL (the node has Redis): events go
 * through the durable queue of hooks_stream.h instead of the lanes. */
struct hooks *hooks_new(struct hooks_config *hc, struct worker *w, struct cluster *cl);
/* The Streams side of h (hooks_stream.c's bus handler); NULL without
 * Redis. */
struct hstream *hooks__stream(struct hooks *h);
/* Drops what is queued and abandons the requests in flight (they are
 * never answered: at-most-once). After the loop stopped running, from
 * the worker's stop; NULL is a no-op. */
void hooks_free(struct hooks *h);

/* uid turned online (or offline) as everyone sees it; version is its
 * presence version, time_ms the unix ms of the change. */
void hooks_user(struct hooks *h, const char *uid, bool online, uint64_t version, int64_t time_ms);
/* A room's delta as its owner published it (visible members only):
 * member joins and leaves, and occupied/vacated from the count. One node. */
void hooks_room_delta(struct hooks *h, const struct room_delta_view *d, int64_t time_ms);
/* One transition of room at (epoch, seq): user joined (or left); the room
 * became occupied (or vacated). With many nodes, from the room script
 * that made it (cluster_hooks.room_hooks). */
void hooks_room_member(struct hooks *h, const char *room, uint64_t epoch, uint64_t seq,
                       const char *user, bool joined, int64_t time_ms);
void hooks_room_occupancy(struct hooks *h, const char *room, uint64_t epoch, uint64_t seq,
                          bool occupied, int64_t time_ms);
/* A room without members (a Pusher channel that is not a presence
 * channel) got its first subscribed socket (occupied) or lost its last
 * one, on this node (room_count.h): channel_occupied / channel_vacated
 * to the Pusher endpoints that name the room a channel other than a
 * presence or server-to-user channel; nothing to the native one. */
void hooks_channel_occupancy(struct hooks *h, const char *room, bool occupied);
/* A client event relayed in room (Pusher endpoints only). user NULL =
 * not a presence channel's member; data is the event's data text. */
void hooks_client_event(struct hooks *h, const char *room, const char *event, const char *data,
                        size_t data_len, const char *socket_id, const char *user);

#endif
