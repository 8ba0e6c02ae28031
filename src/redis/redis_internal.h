/* SPDX-License-Identifier: MIT */
/*
 * redis_internal.h - the client's private structures, shared by redis.c
 * (masters, commands, routing, the Cluster slot map) and redis_sub.c
 * (sharded pub/sub: channels, pub/sub connections, the probe).
 *
 * Internal to src/redis/. Functions named redis__* cross between the two
 * files; everything else is static.
 */
#ifndef REDIS_INTERNAL_H
#define REDIS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "hmap.h"
#include "list.h"
#include "loop.h"
#include "rconn.h"
#include "redis.h"
#include "redis_topo.h"

struct master;

/* What a command is, for its reply. */
enum rcmd_kind {
    RCMD_USER,     /* redis_cmd/redis_eval/redis_publish: cb gets the reply */
    RCMD_INTERNAL, /* the client's own (handshake, probe): done() gets it */
    RCMD_ASKING,   /* the ASKING before a command sent after -ASK: reply skipped */
};

struct rcmd;
typedef void rcmd_done_cb(struct master *m, struct rcmd *c, const redisReply *rep, int err);

/* One queued command. Owned by the client from redis_cmd() until its
 * callback has run; its bytes are kept until then for redirects. */
struct rcmd {
    struct rconn_req req; /* on the master's command connection once written */
    struct list link;     /* master->queued, redis->unrouted or redis->retry */
    char *buf;            /* the formatted command (malloc: hiredis's formatter) */
    size_t len;           /* ... */
    size_t eval_tail;     /* EVALSHA: where the bytes after the SHA start; else 0 */
    int script;           /* EVALSHA: the script; else -1 */
    uint64_t queued_at;   /* loop ms when first queued: the timeout's start */
    uint64_t retry_at;    /* -TRYAGAIN: loop ms of the retry */
    unsigned slot;        /* Cluster slot of the route key */
    int shard;            /* standalone: the shard; Cluster: -1 (by slot) */
    struct master *m;     /* where it waits or was written; NULL while unrouted */
    uint8_t redirects;    /* MOVED/ASK/TRYAGAIN so far */
    uint8_t kind;         /* enum rcmd_kind */
    bool written;         /* on a connection's FIFO */
    redis_reply_cb *cb;   /* RCMD_USER */
    void *ctx;            /* ... */
    rcmd_done_cb *done;   /* RCMD_INTERNAL (may be NULL: reply ignored) */
};

/* A sharded channel: subscribed while refs > 0 or lingering. */
struct chan {
    struct hmap_node node;     /* redis->chans (not the probes) */
    struct list todo;          /* master->ps_todo while an SSUBSCRIBE is due */
    struct list report;        /* redis->reports: a subscribed event is due */
    struct wheel_timer linger; /* armed while refs == 0 */
    struct redis *r;
    int master;    /* the master it is (to be) subscribed on, or -1 */
    uint8_t state; /* enum chan_state */
    bool reported; /* events.subscribed reported at least once */
    bool probe;    /* a master's probe channel (not reported) */
    unsigned refs; /* redis_sub() minus redis_unsub() */
    unsigned slot; /* Cluster slot of the name */
    size_t len;    /* ... of name */
    char name[];   /* NUL-terminated for logging */
};

enum chan_state {
    CHAN_IDLE, /* not subscribed: on a todo list when its master is known */
    CHAN_SENT, /* SSUBSCRIBE written, confirmation awaited */
    CHAN_OK,   /* confirmed */
};

struct master {
    struct redis *r;
    unsigned idx;             /* shard number */
    struct redis_endpoint ep; /* ... */
    bool resolved;            /* the address is known */
    struct rconn cmd;         /* the command connection */
    bool cmd_ready;           /* its handshake (SCRIPT LOADs + PING) answered */
    bool cmd_was_ready;       /* it was ever ready: a new ready is a reconnect */
    unsigned cmd_attempt;     /* failed connects since the last ready */
    struct wheel_timer cmd_retry;
    struct list queued; /* struct rcmd not written yet */
    unsigned pending;   /* user commands queued or written */
    bool up;            /* as last reported through events.shard */

    struct rconn ps;     /* the pub/sub connection (push mode) */
    bool ps_wanted;      /* a channel was ever routed here */
    bool ps_lost;        /* lost since its probe was last confirmed */
    unsigned ps_attempt; /* ... */
    struct wheel_timer ps_retry;
    struct list ps_todo;    /* struct chan due for an SSUBSCRIBE */
    struct list ps_ops;     /* struct psop, in the order sent */
    struct chan *probe;     /* this master's probe channel, or NULL */
    bool probe_out;         /* a probe SPUBLISH awaits its message */
    uint64_t probe_sent;    /* loop ms it was sent */
    uint64_t ps_last_rx;    /* loop ms of the last message received */
    uint64_t ps_hold_until; /* after an SSUBSCRIBE error: no new ones before */
};

/* An SSUBSCRIBE or SUNSUBSCRIBE written on a pub/sub connection, whose
 * confirmation (or error) is the next one of that connection. */
struct psop {
    struct list link;
    bool sub;         /* SSUBSCRIBE (else SUNSUBSCRIBE) */
    uint64_t sent_at; /* loop ms */
    size_t len;       /* ... of name */
    char name[];
};

struct redis_script {
    char *lua;    /* the source (owned) */
    char sha[41]; /* hex SHA1, NUL-terminated */
};

struct redis {
    struct loop *loop;
    struct redis_options o;
    struct redis_events ev;
    void *ctx;
    enum redis_mode mode;
    struct redis_topology topo; /* as given (Cluster: the seeds) */
    struct master *m[REDIS_ENDPOINTS_MAX];
    unsigned nm;                    /* masters: shards, or Cluster masters seen */
    uint8_t owner[REDIS_SLOTS];     /* Cluster: slot -> master, REDIS_SLOT_NONE */
    bool have_map;                  /* Cluster: a slot map was read */
    struct list flushq;             /* rconns with output for the hook */
    struct list unrouted;           /* Cluster commands waiting for a map */
    unsigned nunrouted;             /* ... */
    struct list retry;              /* -TRYAGAIN commands, retry_at order */
    struct wheel_timer retry_timer; /* ... */
    struct wheel_timer tick;        /* timeouts and probes */
    struct hmap chans;              /* struct chan by name */
    struct list reports;            /* struct chan: subscribed again after a linger */
    struct redis_script *scripts;   /* redis_script() */
    unsigned nscripts;              /* ... */
    struct redis_stats st;          /* writes are summed at redis_stats() */
    uint64_t rng;                   /* xorshift state: backoff jitter, probe nonce */
    uint64_t nonce;                 /* makes probe channel names this client's */
    bool closing;                   /* redis_free() is running */

    /* Cluster slot map refresh (one at a time, on its own connection). */
    struct rconn mapc;                 /* connection to the node asked */
    struct rconn_req map_req;          /* its CLUSTER SLOTS */
    bool map_busy;                     /* a refresh is running */
    bool map_again;                    /* another was asked for meanwhile */
    unsigned map_next;                 /* the next endpoint to ask (seeds, then masters) */
    unsigned map_attempt;              /* failed refreshes in a row */
    char map_host[REDIS_HOST_MAX + 1]; /* the host asked: CLUSTER SLOTS' empty hosts */
    struct wheel_timer map_timer;      /* delay before the next refresh */
    struct redis_slotmap *map;         /* scratch for the parser */
};

/* redis.c, used by redis_sub.c */
struct master *redis__route_master(struct redis *r, const char *key, size_t len);
struct master *redis__master_of(struct redis *r, int idx);
void redis__refresh_map(struct redis *r);
void redis__health(struct master *m);
uint32_t redis__backoff(struct redis *r, unsigned attempt);
uint64_t redis__rand(struct redis *r);
void redis__internal_cmd(struct master *m, const char *buf, size_t len, rcmd_done_cb *done);

/* redis_sub.c, used by redis.c */
void redis__sub_init(struct master *m);
void redis__sub_release(struct master *m);
void redis__sub_hook(struct redis *r); /* the hook: SSUBSCRIBEs and reports due */
void redis__sub_tick(struct master *m, uint64_t now);
void redis__sub_reconcile(struct redis *r); /* channels to where the map says */
void redis__chans_free(struct redis *r);

#endif
