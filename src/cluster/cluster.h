/* SPDX-License-Identifier: MIT */
/*
 * cluster.h - many nodes, one presence: users' presence shared through
 * Redis (docs/cluster.md).
 *
 * Each node keeps its own sockets, sessions and timing wheels, exactly as
 * a single node does. What Redis holds per user is one *contribution* per
 * node epoch that has sessions of the user (the node's local merge of
 * them: status, device breakdown, custom status, activity, session count;
 * contrib.h) and the user's *global view*, the merge of the live
 * contributions, with a version. A node that sees its local view of a user
 * change runs one single-slot Lua script (scripts.c) that writes its
 * contribution, drops those of dead epochs, recomputes the global view
 * and bumps the version only when the view changed; a changed view is
 * then published on the user's watch-bucket channel, so every node with a
 * local watcher of a user in that bucket learns it. Heartbeats never
 * reach Redis.
 *
 * Threads. All Redis connections of a node live on one worker, the node's
 * Redis home (worker 0): a channel is subscribed once per node. Other
 * workers reach it through the bus (a WORKER_MSG_CLUSTER message) and get
 * answers the same way; every hook below runs on the worker that asked,
 * or, for a published view, on the worker that owns the user
 * (bus_route() of the user id), never on another thread.
 *
 * Liveness (node.c). Each node renews a lease in Redis every renew_ms,
 * timed by Redis's clock; a node whose lease is older than lease_ms is
 * dead, and after orphan_grace_ms more one surviving node sweeps it: it
 * removes the dead epoch's contributions, which publishes the users who
 * had no other session as offline. Scripts drop dead epochs' fields as
 * they meet them, and so do reads of a user before the sweep ran
 * (SCRIPT_USER_READ): no reader shows a dead epoch's users. A node
 * that restarts is a new epoch; so is a node that finds, back from an
 * outage of its own, that its lease was swept (or is being swept, or
 * Redis lost it): it then puts every local user again under the new
 * epoch (hooks.health, up).
 *
 * Control. Every node subscribes to pd:<app>:{c}:ctl. A node that wrote a
 * user's settings to the shared store announces it there, and each other
 * node drops its cached copy (hooks.settings); an admin kick made on one
 * node is announced there too, and each other node ends the user's
 * sessions it holds (hooks.kick); so is a request to one node to end a
 * user's sessions without a live connection to make room under the
 * session cap (hooks.yield), a heartbeat or leave of an HTTP session
 * that reached another node than the one holding it (hooks.hbeat), and
 * a session another node took over by a resume there (hooks.moved).
 *
 * Resume. A session that lost its socket has a record in Redis
 * ({u:<h>}:r) that another node the client reconnects to takes over with
 * one script (cluster_rs_take(); docs/cluster.md, "Resume across
 * nodes").
 *
 * Degraded. While a shard is unreachable (redis.h's health), puts and gets
 * for it fail with an error the hook sees; the engine then keeps serving
 * its local state (marked degraded) and puts again once the shard is back
 * (hooks.health). Death detection is frozen while this node cannot renew
 * its own lease: an outage of Redis never makes anyone go offline.
 */
#ifndef CLUSTER_H
#define CLUSTER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "presence.h"
#include "redis.h"

struct cluster;
struct worker;

#define CLUSTER_NODE_ID_MAX 64   /* bytes in a node id */
#define CLUSTER_BUCKETS     1024 /* watch-bucket channels */
#define CLUSTER_APP_MAX     64

struct cluster_config {
    struct redis_topology topo;
    struct redis_options redis;
    char node_id[CLUSTER_NODE_ID_MAX + 1]; /* [A-Za-z0-9_.-]+ */
    char app[CLUSTER_APP_MAX + 1];         /* key prefix namespace: pd:<app>: */
    uint32_t renew_ms;                     /* 1000: lease renewal period */
    uint32_t lease_ms;                     /* 5000: a lease not renewed for this long is dead */
    uint32_t orphan_grace_ms;              /* 10000: then this long before the sweep */
    enum presence_policy policy;           /* merges contributions like sessions */
    unsigned home;                         /* the worker that holds the connections */
};

#define CLUSTER_SEATS_MAX 32 /* other node epochs one seats answer lists */

/* Another node epoch's session counts of a user (hooks.seats). */
struct cluster_seat {
    char node[CLUSTER_NODE_ID_MAX + 18]; /* "<node-id>.<epoch>" */
    unsigned sessions, live;             /* live: those with a live connection */
};

/* Who holds a socketless HTTP session (hooks.hsession). */
enum cluster_hs {
    CLUSTER_HS_NONE,   /* nobody (none, ended, or its deadline passed) */
    CLUSTER_HS_OWNED,  /* another node, its lease alive: beats go to it */
    CLUSTER_HS_ORPHAN, /* a node epoch whose lease expired: take it over */
};

/* What a worker's engine is told (wctx = what it gave cluster_attach()). */
struct cluster_hooks {
    /* The global view of uid (a JSON object, contrib.h; len bytes,
     * borrowed), from a put's or get's reply or a published change; or
     * err < 0 (REDIS_E_*) when a put or get failed, json NULL. Runs on
     * the worker that owns uid. `own` is true for the reply to this
     * worker's own put. */
    void (*view)(void *wctx, const char *uid, int err, const char *json, size_t len, bool own);
    /* Optional: this node's put (a session's, or a sweep of a dead epoch)
     * turned uid online or offline; json is the new global view (len
     * bytes, borrowed); visible: the putting worker knew uid visible
     * (false for a sweep: the owner decides from what it knows). Exactly one node gets each such
     * transition: its one producer of webhooks. Runs on the worker that owns uid. */
    void (*user_hook)(void *wctx, const char *uid, const char *json, size_t len, bool visible);
    /* bucket was (re)subscribed: views published before may have been
     * missed; get the watched users of that bucket again. */
    void (*resync)(void *wctx, unsigned bucket);
    /* Redis as a whole became reachable (up) or not. When up again, put
     * every local user again (their contributions may be gone). Also
     * sent (up) after the node took a new epoch because its lease was
     * swept (node.c): the puts then go under the new epoch. */
    void (*health)(void *wctx, bool up);
    /* Another node changed uid's privacy settings, contacts or blocks:
     * drop what is cached of them. Runs on the worker that owns uid. */
    void (*settings)(void *wctx, const char *uid);
    /* Another node was asked (admin kick) to end uid's sessions: session
     * sid, or every one when sid is "", with reason (a short text, may be
     * ""). Runs on the worker that owns uid. */
    void (*kick)(void *wctx, const char *uid, const char *sid, const char *reason);
    /* The answer to cluster_seats_get(): err < 0 (REDIS_E_*, n 0), or
     * the session counts of uid on the n other live node epochs that
     * have sessions of it (seats borrowed). Runs on the worker that
     * asked. */
    void (*seats)(void *wctx, const char *uid, int err, const struct cluster_seat *seats,
                  unsigned n);
    /* Another node asks this one to end count of uid's sessions without
     * a live connection, oldest first, to make room under the session
     * cap (cluster_yield()). Runs on the worker that owns uid. */
    void (*yield)(void *wctx, const char *uid, unsigned count);
    /* The answer to cluster_hs_get(): who holds uid's HTTP session sid
     * (node: the holder's "<node-id>.<epoch>" for OWNED and ORPHAN, else
     * ""). A failed read is NONE. Runs on the worker that asked. */
    void (*hsession)(void *wctx, const char *uid, const char *sid, enum cluster_hs st,
                     const char *node);
    /* Another node passes on a heartbeat (leave false) or a leave of
     * uid's HTTP session sid, which this node holds (cluster_hs_forward()).
     * Runs on the worker that owns uid. */
    void (*hbeat)(void *wctx, const char *uid, const char *sid, bool leave);
    /* The answer to cluster_rs_take(): the resume record of uid's
     * session sid (contrib.h; len bytes, borrowed), which this node now
     * holds and rebuilds the session from, or NULL (no record, its
     * deadline passed, or the read failed). Runs on the worker that
     * asked. */
    void (*rsession)(void *wctx, const char *uid, const char *sid, const char *record, size_t len);
    /* Another node took uid's session sid over (a resume there): drop
     * this node's copy without ending it for anyone. Runs on the worker
     * that owns uid. */
    void (*moved)(void *wctx, const char *uid, const char *sid);
    /* ---- rooms (each runs on the room's owner, bus_route(room id)) ---- */
    /* A message of room's script: seq, the node epoch that ran it
     * (own: this one) and its ops, lines "+ <user> <joinedAt> <meta>",
     * "- <user>" and "*" (that epoch's members before are gone), len
     * bytes, borrowed. */
    void (*room_message)(void *wctx, const char *room, uint64_t seq, const char *node, bool own,
                         const char *ops, size_t len);
    /* The answer to cluster_room_get(): err < 0 (REDIS_E_*, text NULL),
     * or room's seq and its live members on other node epochs, lines
     * "<node>.<epoch> <user> <joinedAt> <meta>" (len bytes, borrowed). */
    void (*room_state)(void *wctx, const char *room, int err, uint64_t seq, const char *text,
                       size_t len);
    /* Optional: room's transitions that this worker's put or read made,
     * at seq (scripts.h "hooks": "<epoch> <members before> <after>\n"
     * then "+<user>" / "-<user>" lines; len bytes, borrowed). Each
     * transition reaches exactly one worker of one node: its producer
     * of webhooks. */
    void (*room_hooks)(void *wctx, const char *room, uint64_t seq, const char *text, size_t len);
    /* The room channel with tag hex (cluster_room_tag()) was
     * (re)subscribed: messages may have been missed. Every worker. */
    void (*room_resync)(void *wctx, const char *tag);
    /* The node epochs past their lease and grace changed: list is
     * "m1,m2" (every one now, borrowed), plus any epoch another node
     * swept before this one's grace for it ended (it is dead just the
     * same). Every worker. */
    void (*dead)(void *wctx, const char *list);
};

/* A node for config cfg (copied) with nworkers workers. Picks this
 * start's random epoch. Registers its bus handler. Before server_start;
 * aborts on OOM. */
struct cluster *cluster_new(const struct cluster_config *cfg, unsigned nworkers);
/* After every worker detached. NULL is a no-op. */
void cluster_free(struct cluster *cl);

/* Worker w takes part: hooks run with wctx. On the home worker this
 * starts the Redis client on w's loop. From every worker's start hook
 * (before the worker threads run). */
void cluster_attach(struct cluster *cl, struct worker *w, const struct cluster_hooks *hooks,
                    void *wctx);
/* The worker stops taking part: no hook runs for it after this. On the
 * home worker this also ends the lease (so that the others sweep it
 * without waiting for its expiry when shutdown asked for it) and closes
 * the connections. Worker's thread. */
void cluster_detach(struct cluster *cl, unsigned worker);

/* ---- from a worker (its thread; the answers come to hooks.view) ---- */

/* Sets this node's contribution to uid: contrib (a JSON object made by
 * contrib_encode()), or NULL when this node has no session of uid any
 * more, then seen_wall is the wall-clock ms of its last sign of life.
 * visible: uid is visible to webhooks (hooks.user_hook gets the put's
 * online/offline transition; false: it gets none). */
void cluster_user_put(struct cluster *cl, unsigned worker, const char *uid, const char *contrib,
                      uint64_t seen_wall, bool visible);
/* Asks for uid's global view. */
void cluster_user_get(struct cluster *cl, unsigned worker, const char *uid);
/* A worker's first local watcher of uid (on = true) or its last one gone
 * (false): keeps the node subscribed to uid's bucket while any remains. */
void cluster_watch(struct cluster *cl, unsigned worker, const char *uid, bool on);

/* uid's settings were written (acknowledged): every other node's
 * hooks.settings hears of it, within a Redis round trip. */
void cluster_settings_changed(struct cluster *cl, unsigned worker, const char *uid);

/* Ends uid's sessions (sid, or all when "") on every other node, with
 * reason (NULL = none): their hooks.kick runs within a Redis round trip. */
void cluster_kick(struct cluster *cl, unsigned worker, const char *uid, const char *sid,
                  const char *reason);

/* ---- the session cap across nodes (docs/cluster.md, "Session cap") ---- */

/* This node holds sessions sessions of uid, live of them with a live
 * connection (0 sessions: none any more); written to {u:<h>}:c, which
 * cluster_seats_get() reads. */
void cluster_seats_put(struct cluster *cl, unsigned worker, const char *uid, unsigned sessions,
                       unsigned live);
/* Asks for the other live node epochs' counts of uid (hooks.seats). */
void cluster_seats_get(struct cluster *cl, unsigned worker, const char *uid);
/* Asks node epoch node (as a seats answer named it) to end count of uid's
 * sessions without a live connection (its hooks.yield), within a Redis
 * round trip. */
void cluster_yield(struct cluster *cl, unsigned worker, const char *uid, const char *node,
                   unsigned count);

/* ---- socketless HTTP sessions (docs/cluster.md, "HTTP sessions") ---- */

/* This node holds uid's HTTP session sid, alive until deadline_wall (wall
 * ms): written to {u:<h>}:h, so that a heartbeat of it that reaches
 * another node finds its way here. */
void cluster_hs_put(struct cluster *cl, unsigned worker, const char *uid, const char *sid,
                    uint64_t deadline_wall);
/* uid's HTTP session sid ended here. */
void cluster_hs_del(struct cluster *cl, unsigned worker, const char *uid, const char *sid);
/* Asks who holds uid's HTTP session sid (hooks.hsession). */
void cluster_hs_get(struct cluster *cl, unsigned worker, const char *uid, const char *sid);
/* Passes a heartbeat (or, leave, a leave) of uid's HTTP session sid on to
 * node, which holds it (its hooks.hbeat), within a Redis round trip. */
void cluster_hs_forward(struct cluster *cl, unsigned worker, const char *uid, const char *sid,
                        const char *node, bool leave);

/* ---- resume across nodes (docs/cluster.md, "Resume across nodes") ---- */

/* uid's session sid lost its socket here: its resume record (the text of
 * contrib_resume_encode() of a record whose node is "": the home puts
 * this node's epoch first; copied) is written to {u:<h>}:r, so that a
 * resume that reaches another node finds it. */
void cluster_rs_put(struct cluster *cl, unsigned worker, const char *uid, const char *sid,
                    const char *record);
/* uid's session sid was resumed here or ended: its record goes. */
void cluster_rs_del(struct cluster *cl, unsigned worker, const char *uid, const char *sid);
/* Takes uid's session sid over from the node that holds it
 * (SCRIPT_USER_TAKE): hooks.rsession answers; when it was taken, the
 * holder's hooks.moved runs within a Redis round trip. Only uid's own
 * records are looked at: another user's session id is not found. */
void cluster_rs_take(struct cluster *cl, unsigned worker, const char *uid, const char *sid);

/* ---- rooms (docs/cluster.md, "Rooms across nodes") ---- */

/* Runs room's script with this node's ops (lines as in
 * hooks.room_message; a copy is taken): they are applied and published in
 * one transaction with the room's next seq. Nothing comes back but the
 * message (hooks.room_message with this node's epoch). */
void cluster_room_put(struct cluster *cl, unsigned worker, const char *room, const char *ops,
                      size_t len);
/* Publishes an ephemeral value (text "<user> <kind> <data>", len bytes,
 * copied) on room's channel with seq 0: hooks.room_message on every node
 * subscribed, outside the room's sequence. */
void cluster_room_publish(struct cluster *cl, unsigned worker, const char *room, const char *text,
                          size_t len);
/* Asks for room's seq and members (hooks.room_state). */
void cluster_room_get(struct cluster *cl, unsigned worker, const char *room);
/* Keeps the node subscribed to room's channel (on) or lets it go after
 * the linger (off); counted. */
void cluster_room_sub(struct cluster *cl, unsigned worker, const char *room, bool on);
/* room's channel tag: 16 lowercase hex digits (pure). */
void cluster_room_tag(const char *room, char out[17]);

/* uid's watch bucket (pure). */
unsigned cluster_bucket_of(const char *uid);
/* Whether worker is the node's Redis home (any thread). */
bool cluster_is_home(const struct cluster *cl, unsigned worker);
/* This node's "<node-id>.<epoch>". Home worker's thread: it changes when
 * the node finds its lease swept while it was cut off (node.c) and takes
 * a new epoch. */
const char *cluster_self(const struct cluster *cl);
/* For a module above that keeps keys of its own in the node's Redis (the
 * webhook streams, engine/hooks_stream.c): the client, on the home
 * worker's thread only, between its cluster_attach() and
 * cluster_detach() (NULL before and after); which worker is the home
 * (any thread); and the app of the keys' "pd:<app>:" prefix (any
 * thread, NUL-terminated, fixed). */
struct redis *cluster_redis(const struct cluster *cl);
unsigned cluster_home(const struct cluster *cl);
const char *cluster_app(const struct cluster *cl);

/* ---- node summaries for the admin API (nodeinfo.c; home worker) ---- */

#define CLUSTER_NODES_MAX 64 /* node epochs one cluster_nodes_get() lists */

/* Puts this node's summary (a JSON object, len bytes, copied) where
 * cluster_nodes_get() finds it, for twice the lease. 0 or REDIS_E_*. */
int cluster_info_put(struct cluster *cl, const char *json, size_t len);
/* The answer: err < 0 (REDIS_E_*; n 0), or n members ("<node-id>.<epoch>":
 * this node first, then the live epochs of the last lease reply) with
 * each one's last summary (infos[i], lens[i] bytes; NULL when it put none
 * lately). All borrowed for the call. */
typedef void cluster_nodes_cb(void *ctx, int err, const char *const *members,
                              const char *const *infos, const size_t *lens, size_t n);
/* Reads every live node's summary; cb runs later on the home worker.
 * 0, or REDIS_E_* and cb will not run. */
int cluster_nodes_get(struct cluster *cl, cluster_nodes_cb *cb, void *ctx);

/* True while some shard is unreachable (any thread). */
bool cluster_degraded(const struct cluster *cl);

struct cluster_stats {
    uint64_t puts, gets, views_in; /* requests and published views received */
    uint64_t swept;                /* dead epochs swept by this node */
    unsigned nodes_live;           /* in the last lease reply */
};
/* A copy of the counters (any thread; approximately consistent). */
void cluster_get_stats(const struct cluster *cl, struct cluster_stats *out);

#endif
