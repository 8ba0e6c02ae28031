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

#include <sys/socket.h>

#include "config.h"
#include "conn.h"
#include "loop.h"
#include "metrics.h"

struct addrcap;
struct bus;
struct bus_msg;
struct server;
struct worker;

/*
 * What the application runs on each worker (main.c composes them). The
 * runtime knows nothing above it: it accepts sockets, runs loops and moves
 * bus messages, and calls these at fixed points of a worker's life. All
 * run on the worker's own thread but init and fini; every member is
 * required.
 */
struct worker_hooks {
    /* Before the loop runs: sets w->app (the application's per-worker
     * state). Runs on the starting thread, before the worker thread. */
    void (*start)(struct worker *w);
    /* A socket was accepted (and counted against max-connections): make a
     * connection of it on w->pool (conn_new), or close(fd). */
    void (*accept)(struct worker *w, int fd, const struct sockaddr *peer);
    /* Once per loop iteration, before the flush (cheap upkeep, metrics). */
    void (*tick)(struct worker *w);
    /* Shutdown has begun: start closing every connection gracefully. */
    void (*drain)(struct worker *w);
    /* Optional: while draining, true keeps the loop running after its
     * last connection went (until the drain deadline at most), for work
     * other workers still hand it. Checked once per loop iteration. */
    bool (*busy)(struct worker *w);
    /* The loop has stopped or never ran: free w->app. Connections are gone. */
    void (*stop)(struct worker *w);
};

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
    void *app;                     /* the application's per-worker state (hooks->start) */
    bool draining;                 /* shutdown seen by this worker */
    uint64_t drain_deadline;       /* loop ms at which the loop stops regardless */
};

struct server {
    struct config cfg;                /* immutable once workers start */
    const struct worker_hooks *hooks; /* set before server_start; borrowed */
    void *app;                        /* the application's shared state, for the hooks */
    unsigned nworkers;
    struct worker *workers;      /* array of nworkers */
    struct bus *bus;             /* inter-worker queues */
    atomic_uint conns;           /* live connections, all workers */
    struct addrcap *addrs;       /* connections per client address, all workers */
    atomic_bool shutting_down;   /* set by server_shutdown */
    _Atomic uint64_t trimmed_ms; /* monotonic ms of the last malloc_trim(), any worker */
    atomic_uint running;         /* workers whose loop is running */
    int port;                    /* the bound port (resolves port 0) */
    uint64_t started_wall_ms;    /* for /healthz uptime */
};

/* Cross-worker message types (struct bus_msg.type). */
enum worker_msg_type {
    WORKER_MSG_RELAY = 1,   /* testing/relay.c: a broadcast frame */
    WORKER_MSG_ENGINE = 2,  /* the engine: sessions, watches, events */
    WORKER_MSG_CLUSTER = 3, /* cluster/: requests to the Redis home and answers */
    WORKER_MSG_HOOKS = 4,   /* engine/hooks_stream.c: webhook events to the Redis home */
    WORKER_MSG_MAX = 32,
};

/* Handles one message on worker w and owns it (must release it). */
typedef void worker_msg_cb(struct worker *w, struct bus_msg *m);

/* Registers the handler for a message type; call before server_start
 * (the table is read-only while workers run). */
void worker_on_msg(unsigned type, worker_msg_cb *cb);
/* Sending: bus_send(w->srv->bus, w->id, to, m) and bus_send_lazy() (bus.h);
 * a lazy message waits at most BUS_LAZY_MS (25 ms, worker.c). */

/* Binds every worker's listener, runs hooks->start for each and starts
 * the threads. srv->hooks must be set. Returns 0, or -1 after logging why
 * (e.g. the port is taken). */
int server_start(struct server *srv);
/* Asks every worker to drain and stop (any thread). */
void server_shutdown(struct server *srv);
/* Waits for every worker thread (hooks->stop ran on each); frees workers. */
void server_join(struct server *srv);
/* True when every worker runs and no shutdown has begun. */
bool server_ready(struct server *srv);

#endif
