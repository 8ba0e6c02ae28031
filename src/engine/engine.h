/* SPDX-License-Identifier: MIT */
/*
 * engine.h - the presence engine across workers: sessions, heartbeats,
 * statuses, watch lists, rooms and privacy, below the protocol adapters
 * (src/proto/native/ is the first). An adapter turns wire messages into
 * the operations of session.h, watch.h and engine_room.h.
 *
 * Partitioning. Every user is owned by one worker, bus_route(user id);
 * that worker's presence core (presence.h) holds the user's sessions and
 * emits their transitions. A client's socket lives on whatever worker
 * accepted it. So a client message becomes a bus message to the owner
 * (the ops of msg.h) and the owner's answers and events travel back by bus
 * message. With one worker every message goes to itself through the same
 * path, so behaviour does not depend on the worker count. The ops and the
 * one table that dispatches them are in msg.h / msg.c.
 *
 * Watch lists are subscriptions per worker, not per socket: the owner of a
 * user keeps a bitmask of the workers that have local watchers and sends
 * each of them ONE message per transition, carrying one pre-framed shared
 * payload; each worker writes it to its local watchers (and remembers it,
 * so a later local watcher gets its snapshot without asking the owner).
 * This is the seam the Redis mode will use: owners become nodes, worker
 * masks become channels.
 */
#ifndef ENGINE_H
#define ENGINE_H

#include "conn.h"
#include "http.h"
#include "jwt.h"
#include "net.h"
#include "route.h"
#include "store.h"
#include "wsconn.h"

struct engine;
struct quota;
struct ratelimit;
struct worker;

/* What every worker's engine shares, made by the composition root
 * (main.c) before the workers start and read-only while they run. */
struct cluster;
struct hooks_config;
struct persist;

struct engine_env {
    struct store *store;             /* the settings store, owned by main.c */
    struct jwt_key jwt;              /* auth = jwt: the verification key */
    struct jwt_opts jwt_opts;        /* auth = jwt: leeway, aud, iss */
    struct ratelimit *observer_rate; /* observer-query-rate buckets, all workers; NULL = off */
    struct quota *observer_quota;    /* max-watch/streams-per-user counts; NULL = off */
    struct cluster *cluster;         /* many nodes over Redis (cluster.h); NULL = one node */
    struct hooks_config *hooks;      /* webhook endpoints (hooks.h); NULL = none */
    struct persist *persist;         /* sessions saved and restored (persist.h); NULL = off */
};

/* The engine's HTTP routes: GET /v1/presence, /v1/lastseen, /v1/presence/events, /v1/rooms/...,
 * POST /v1/heartbeat and /v1/admin/... (docs/api.md). Their handlers find
 * the worker's engine in nc->app. */
extern const struct route_list engine_routes;

/* Registers the engine's bus message handlers (before server_start). */
void engine_register(void);
/* The engine of worker w, created on its loop's wheel, with the shared
 * env (borrowed, must outlive it) and the worker's net context nc
 * (borrowed; the engine's handlers take it as nc->app). Aborts on OOM or
 * a configuration the presence core refuses (config validation catches
 * it first). */
struct engine *engine_new(struct worker *w, const struct engine_env *env, struct net_ctx *nc);
/* One slice of the observer-rate table's sweep (ratelimit_sweep), at most
 * once a second per worker, and the engine's statistics copied into the
 * worker's metrics (cheap); the worker's tick calls it. */
void engine_tick(struct engine *e);
/* Frees all state without events. NULL is a no-op. Worker thread, after
 * its connections are gone. */
void engine_free(struct engine *e);

struct client;

/* The request side of a WebSocket upgrade (the protocol adapter's
 * route, e.g. GET /v1/ws): reads ?user= (optional: without it the
 * socket is an anonymous observer that can watch but has no session),
 * ?device= (default web), ?resume=<sessionId> and ?app= (apps.h): with
 * other_apps (the native WebSocket) another app's namespace when auth =
 * none and no room-token-secret is set (client_ns() then gives its prefix
 * and the user id carries it). On a bad value answers 400 (bad_user,
 * bad_device, unknown_app, app_not_native) and returns NULL. */
struct client *engine_client_prepare(struct worker *w, struct conn *conn, bool other_apps,
                                     const struct http_request *req);
/* GET /v1/presence?user=a&user=b: {"users":[<presence objects>]}, in the
 * order asked, at most 100 users. GET /v1/lastseen?user=…: {"users":
 * [{"user":..,"online":..,"lastSeen":{..}}]}. POST /v1/heartbeat: a
 * session without a socket (see docs/api.md). Answered when the owners
 * replied (the request is deferred meanwhile). */
void engine_http_presence(struct conn *c, const struct http_request *req, struct net_ctx *nc);
void engine_http_lastseen(struct conn *c, const struct http_request *req, struct net_ctx *nc);
void engine_http_heartbeat(struct conn *c, const struct http_request *req, struct net_ctx *nc);
/* GET /v1/presence/events?user=…: a Server-Sent Events stream of the
 * users' presence (snapshot, then transitions; event "presence", id = the
 * user's version). */
void engine_sse_presence(struct conn *c, const struct http_request *req, struct net_ctx *nc);
/* GET /v1/rooms/{id}: the room's members (first 1000), count, mode, epoch
 * and seq. GET /v1/rooms/{id}/events: an SSE stream of the room's
 * snapshot and deltas (event "room", id "epoch-seq"), resumable with
 * Last-Event-ID. */
void engine_http_room(struct conn *c, const struct http_request *req, struct net_ctx *nc);
/* A room read for another protocol's HTTP API (Pusher's GET channels/X):
 * the room as GET /v1/rooms/{id} reads it without a reader (published
 * members only, first 1000; the other nodes' included), handed as that
 * JSON text (json, n bytes; a room that did not answer in time reads
 * {"room":..,"count":null,"degraded":true}) to done, which writes c's
 * response; arg is a copy of the read's arg (NULL: ""). done runs on c's
 * worker, once, unless c went away. room must be valid (room_id_valid()). */
typedef void engine_room_read_done(struct conn *c, const char *arg, const char *json, size_t n);
/* The answer also has "subscriptions": the sockets of the published
 * members, or for a room without members every socket subscribed (this
 * node's: room_count.h). */
void engine_read_room(struct conn *c, struct engine *e, const char *room,
                      engine_room_read_done *done, const char *arg);
/* The occupied rooms of this node for another protocol's HTTP API
 * (Pusher's GET channels), handed to done as {"rooms":[{"room","count",
 * "subscriptions"},...]}: every room with published members (count, and
 * their sockets), and every room without members that sockets subscribe
 * to (count 0); at most 10,000 per worker; a worker that did not answer
 * in time is left out. Counted only when an adapter asked
 * (room_count.h). Only the rooms of namespace ns (ns.h: "" the first
 * app's), so one app's rooms never crowd another's out of the 10,000.
 * done as engine_read_room()'s. */
void engine_list_rooms(struct conn *c, struct engine *e, const char *ns,
                       engine_room_read_done *done, const char *arg);
/* /v1/admin/... (engine_admin.c; docs/api.md). */
void engine_http_admin(struct conn *c, const struct http_request *req, struct net_ctx *nc);
/* Frees a prepared client whose upgrade failed (on_open never ran). */
void engine_client_discard(struct client *c);
/* A client for a WebSocket of another protocol that authenticates its
 * own way (Pusher's signed subscriptions): anonymous (it takes a user
 * later, client__start_as()), device web, needing no token under auth =
 * jwt. Open it with client__open(), or engine_client_discard() it. */
struct client *engine_client_bare(struct worker *w);

#endif
