/* SPDX-License-Identifier: MIT */
/*
 * worker.h - the server and its share-nothing workers.
 *
 * struct server holds what every worker may read (the immutable config,
 * the bus, the per-worker metrics for /metrics). Each struct worker is one
 * thread with its own epoll loop, its own SO_REUSEPORT listener, its own
 * connections and timers; workers never touch each other's connections and
 * talk only through the bus (bus.h), drained once per loop iteration.
 *
 * Shutdown (server_shutdown, from the signal-handling main thread): every
 * worker closes its listener, sends close 1001 to its WebSockets, closes
 * idle HTTP connections after their last response, and stops its loop when
 * its last connection is gone or the drain time is up.
 */
#ifndef WORKER_H
#define WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "conn.h"
#include "loop.h"
#include "metrics.h"
#include "store.h"
#include "jwt.h"
#include "wsconn.h"

struct bus;
struct engine;
struct ratelimit;
struct bus_msg;
struct server;

struct worker {
    unsigned id;        /* 0..nworkers-1 */
    struct server *srv; /* borrowed */
    pthread_t thread;
    struct loop *loop;      /* owned */
    struct conn_pool pool;  /* this worker's connections */
    struct metrics metrics; /* written only by this worker */
    int listen_fd;          /* owned; -1 once closed */
    struct loop_io listen_io;
    int spare_fd;                  /* reserved fd for the EMFILE trick */
    uint64_t emfile_logged_ms;     /* last EMFILE warning (rate limit) */
    struct loop_io bus_io;         /* the bus inbox eventfd */
    struct wheel_timer lazy_timer; /* armed while lazy bus messages wait (bus_hook) */
    struct engine *engine;         /* engine.c state of this worker */
#ifdef PRESENCED_TESTING
    struct list relay_conns; /* relay.c: this worker's /test/broadcast sockets */
#endif
    uint64_t swept_ms;       /* loop ms of the last observer-rate sweep */
    bool draining;           /* shutdown seen by this worker */
    uint64_t drain_deadline; /* loop ms at which the loop stops regardless */
};

struct server {
    struct config cfg; /* immutable once workers start */
    unsigned nworkers;
    struct worker *workers;          /* array of nworkers */
    struct bus *bus;                 /* inter-worker queues */
    struct ws_opts ws_opts;          /* derived from cfg */
    struct jwt_key jwt;              /* auth = jwt: the verification key (read-only) */
    struct jwt_opts jwt_opts;        /* auth = jwt: leeway, aud, iss */
    struct store *store;             /* settings store (opened by server_start) */
    struct ratelimit *observer_rate; /* observer-query-rate buckets, all workers; NULL = off */
    atomic_uint conns;               /* live connections, all workers */
    atomic_bool shutting_down;       /* set by server_shutdown */
    _Atomic uint64_t trimmed_ms;     /* monotonic ms of the last malloc_trim(), any worker */
    atomic_uint running;             /* workers whose loop is running */
    int port;                        /* the bound port (resolves port 0) */
    uint64_t started_wall_ms;        /* for /healthz uptime */
};

/* Cross-worker message types (struct bus_msg.type). */
enum worker_msg_type {
    WORKER_MSG_RELAY = 1,  /* relay.c, test builds: a broadcast frame */
    WORKER_MSG_ENGINE = 2, /* engine.c: sessions, watches, events */
    WORKER_MSG_MAX = 32,
};

/* Handles one message on worker w and owns it (must release it). */
typedef void worker_msg_cb(struct worker *w, struct bus_msg *m);

/* Registers the handler for a message type; call before server_start
 * (the table is read-only while workers run). */
void worker_on_msg(unsigned type, worker_msg_cb *cb);
/* Sends m (ownership moves) from w to worker `to`; delivered after w's
 * current loop iteration, batched with everything else w sends to `to`. */
void worker_send(struct worker *w, unsigned to, struct bus_msg *m);
/* The same for a message that may wait up to BUS_LAZY_MS (25 ms, worker.c)
 * unless an ordinary one to `to` takes it along sooner (bus_send_lazy());
 * order among w's messages to `to` is kept. For heartbeats. */
void worker_send_lazy(struct worker *w, unsigned to, struct bus_msg *m);

/* Binds every worker's listener and starts the threads. Returns 0, or -1
 * after logging why (e.g. the port is taken). */
int server_start(struct server *srv);
/* Asks every worker to drain and stop (any thread). */
void server_shutdown(struct server *srv);
/* Waits for every worker thread; frees workers. */
void server_join(struct server *srv);
/* True when every worker runs and no shutdown has begun. */
bool server_ready(struct server *srv);

#endif
