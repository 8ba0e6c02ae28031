/* SPDX-License-Identifier: MIT */
/*
 * redis.h - a Redis client on the event loop: one Redis, N standalone
 * shards, or a Redis Cluster, behind one interface.
 *
 * Everything runs on the one loop given to redis_new(), on its thread:
 * presenced keeps all of a node's Redis connections on one worker (the
 * node's "Redis home"), so that a channel is subscribed once per node, not
 * once per worker. hiredis (Debian's 0.14.1) is used only as the RESP
 * reply parser (redisReader) and the command formatter
 * (redisFormatCommandArgv); connections, pipelining, timeouts, pub/sub and
 * cluster routing are this layer's own (hiredis's async API cannot do
 * SSUBSCRIBE, docs/cluster.md).
 *
 * Topology. Per master (a standalone shard, or a Cluster master) the
 * client keeps one command connection, pipelined (commands are written in
 * batches from the loop's before-sleep hook and their replies matched in
 * FIFO order), and one pub/sub connection, opened on the first
 * subscription routed to that master. A key is routed by its hash tag
 * (the text between the first '{' and the next '}', when non-empty; else
 * the whole key), exactly as Redis Cluster does: on Cluster to the master
 * serving CRC16(tag) mod 16384; over N standalone shards to shard
 * jump_hash(FNV-1a-64(tag), N). A channel is routed like a key.
 *
 * Cluster. The slot map is read with CLUSTER SLOTS from any reachable
 * seed at start and again after every MOVED and every unsolicited
 * sunsubscribe. -MOVED retries that one command on the new owner and
 * refreshes the map; -ASK sends ASKING plus the command once to the
 * target without changing the map; -TRYAGAIN retries after 20 ms; at most
 * REDIS_REDIRECTS_MAX redirects per command, then REDIS_E_REDIRECT.
 * An unsolicited sunsubscribe (the slot moved or its master failed over)
 * resubscribes the channel where the map now says, and reports it through
 * events.subscribed, so that the caller resyncs what it may have missed.
 *
 * Liveness. A master is down while its command connection is not
 * connected, while a command to it has waited longer than timeout_ms, or
 * while its pub/sub connection's probe is unanswered: every probe_ms an
 * idle pub/sub connection's master gets an SPUBLISH on a probe channel
 * that connection is subscribed to, and a probe not received within
 * probe_ms means a subscription that is connected but no longer receives:
 * the connection is dropped and everything on it resubscribed. A lost
 * connection is reopened after a delay of full jitter: uniform in
 * [backoff_floor_ms, min(backoff_cap_ms, backoff_base_ms * 2^attempt)].
 * Each change of a master's health is reported by events.shard.
 *
 * Callbacks are never called from inside the call that queued them (a
 * reply always arrives on a later loop iteration), so a caller may queue
 * commands from any callback. A command's callback runs exactly once:
 * with its reply, or with an error when the reply cannot come (its
 * connection was lost after the command was written, or the command got
 * no reply within timeout_ms, which drops the connection as dead:
 * REDIS_E_DOWN, and the command may or may not have run; its master
 * stayed unreachable for timeout_ms: REDIS_E_TIMEOUT, and it was never
 * written, so it did not run). Commands are never
 * retried after they may have run, but for -MOVED/-ASK/-TRYAGAIN/-NOSCRIPT
 * replies, which say they did not.
 *
 * Memory: bounded by queued commands; a command queued while its master
 * has more than max_pending waiting fails at once with REDIS_E_FULL.
 * The servers are trusted: hiredis 0.14.1 allocates what a reply's array
 * header announces (it has no element limit before 1.0), so only a real
 * Redis may be named in the topology.
 */
#ifndef REDIS_H
#define REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "util.h"

struct loop;
struct metrics;
struct redis;

#define REDIS_ENDPOINTS_MAX 64  /* shards or seeds in one topology */
#define REDIS_HOST_MAX      255 /* bytes in a host name */
#define REDIS_SLOTS         16384
#define REDIS_REDIRECTS_MAX 5
#define REDIS_CHANNEL_MAX   512 /* bytes in a channel name */

enum {
    REDIS_E_DOWN = -(PS_EBASE + 800),     /* connection lost with the command written */
    REDIS_E_TIMEOUT = -(PS_EBASE + 801),  /* master unreachable for timeout_ms */
    REDIS_E_FULL = -(PS_EBASE + 802),     /* max_pending commands already wait */
    REDIS_E_REDIRECT = -(PS_EBASE + 803), /* more than REDIS_REDIRECTS_MAX redirects */
    REDIS_E_CLOSED = -(PS_EBASE + 804),   /* redis_free() ran first */
    REDIS_E_SPEC = -(PS_EBASE + 805),     /* redis_topology_parse(): bad spec */
    REDIS_E_PROTO = -(PS_EBASE + 806),    /* the server sent what RESP2 cannot be */
};

enum redis_mode {
    REDIS_SHARDS,  /* 1..N standalone servers: "redis://h:p[,redis://h:p...]" */
    REDIS_CLUSTER, /* a Redis Cluster: "redis-cluster://h:p[,h:p...]" (seeds) */
};

struct redis_endpoint {
    char host[REDIS_HOST_MAX + 1];
    uint16_t port;
};

struct redis_topology {
    enum redis_mode mode;
    unsigned n; /* 1..REDIS_ENDPOINTS_MAX */
    struct redis_endpoint ep[REDIS_ENDPOINTS_MAX];
};

/* Parses the `redis` configuration value (pure). Accepted: a
 * comma-separated list of redis://HOST:PORT URLs (N shards, in that
 * order: the order is the shard numbering), or redis-cluster:// followed
 * by one or more HOST:PORT seeds separated by commas. HOST is a name, an
 * IPv4 address or a bracketed IPv6 address; PORT 1..65535 is required; a
 * trailing "/" is allowed, a path, user, password or query is not (they
 * are refused, not ignored). Duplicates are refused. Returns 0, or
 * REDIS_E_SPEC with a one-line reason in err. */
int redis_topology_parse(const char *spec, struct redis_topology *out, char *err, size_t errlen);

/* ---- routing (pure) ---- */

uint64_t redis_fnv1a64(const void *p, size_t len);
/* Lamping & Veach's jump consistent hash: a bucket in [0, n), n >= 1. */
unsigned redis_jump_hash(uint64_t key, unsigned n);
/* CRC16-XMODEM, as Redis Cluster's key slots. */
uint16_t redis_crc16(const void *p, size_t len);
/* The part of key that routes it: the hash tag if it has a non-empty one,
 * else the whole key (*len updated). */
const char *redis_key_tag(const char *key, size_t *len);
/* CRC16(tag) mod 16384. */
unsigned redis_key_slot(const char *key, size_t len);

/* ---- the client ---- */

struct redis_options {
    uint32_t timeout_ms;       /* 1000: a command's wait, and a connect's */
    uint32_t probe_ms;         /* 5000: pub/sub probe interval and deadline */
    uint32_t backoff_base_ms;  /* 100 */
    uint32_t backoff_floor_ms; /* 250 */
    uint32_t backoff_cap_ms;   /* 5000 */
    uint32_t linger_ms;        /* 30000: a channel's unsubscribe waits this long */
    uint32_t max_pending;      /* 100000 commands waiting per master */
    struct metrics *metrics;   /* NULL; else the loop's worker's: each command's round
                                * trip is observed there (presenced_redis_seconds) */
};

/* Fills o with the defaults above. */
void redis_options_init(struct redis_options *o);

struct redis_events {
    /* A master's health changed (shard: redis_shard_of() numbering). */
    void (*shard)(void *ctx, unsigned shard, bool up);
    /* channel is subscribed: after the first redis_sub() and after every
     * resubscription (reconnect, probe failure, slot move), so the caller
     * knows that every message published from now on reaches it, and
     * resyncs what may have been missed before. */
    void (*subscribed)(void *ctx, const char *channel, size_t len);
    /* A message on a subscribed channel. Both are borrowed. */
    void (*message)(void *ctx, const char *channel, size_t clen, const char *msg, size_t mlen);
};

/* A command's reply (borrowed until the callback returns), or NULL with
 * err < 0. An error reply is a reply (r->type == REDIS_REPLY_ERROR), err 0. */
typedef void redis_reply_cb(void *ctx, const redisReply *r, int err);

/* A client for topology t on loop l (its thread only from now on): starts
 * connecting to every shard (Cluster: reads the slot map first) and
 * returns at once; commands queue until their master is reachable (at
 * most timeout_ms). Host names are resolved here, blocking (start-up
 * only). ev's members may be NULL. Aborts on OOM. */
struct redis *redis_new(struct loop *l, const struct redis_topology *t,
                        const struct redis_options *o, const struct redis_events *ev, void *ctx);
/* Closes every connection and fails every queued command with
 * REDIS_E_CLOSED (their callbacks run inside this call). NULL is a no-op.
 * Not from one of this client's callbacks. */
void redis_free(struct redis *r);

/* Queues a command routed by route_key (its hash tag; a key of the
 * command). argv[i] has argvlen[i] bytes (copied). Returns 0 (cb will run
 * once), or REDIS_E_FULL, or REDIS_E_CLOSED from a callback that
 * redis_free() runs (cb will not run). */
int redis_cmd(struct redis *r, const char *route_key, size_t route_len, int argc,
              const char *const *argv, const size_t *argvlen, redis_reply_cb *cb, void *ctx);

/* Registers a Lua script (copied) and returns its handle (>= 0). It is
 * loaded on every master at each connect (SCRIPT LOAD); redis_eval() runs
 * it with EVALSHA and, on -NOSCRIPT, EVAL. Before any redis_cmd(). */
int redis_script(struct redis *r, const char *lua);
/* EVALSHA script with nkeys keys (routed by keys[0]; all must share its
 * slot) and nargs args. Returns as redis_cmd(). */
int redis_eval(struct redis *r, int script, int nkeys, const char *const *keys,
               const size_t *keylen, int nargs, const char *const *args, const size_t *arglen,
               redis_reply_cb *cb, void *ctx);

/* Sharded pub/sub with a reference count per channel. The first
 * redis_sub() of a channel (or one during its linger) SSUBSCRIBEs on the
 * channel's master; events.subscribed reports the confirmation. The
 * redis_unsub() that takes the count to 0 SUNSUBSCRIBEs after linger_ms,
 * unless a redis_sub() came first. Any number of flips is safe. A
 * redis_sub() that takes the count from 0 to 1 during the linger, while
 * the channel is confirmed, has events.subscribed reported again (from the
 * loop, not from inside the call). A channel longer than
 * REDIS_CHANNEL_MAX is ignored. */
void redis_sub(struct redis *r, const char *channel, size_t len);
void redis_unsub(struct redis *r, const char *channel, size_t len);
/* Whether channel is subscribed and confirmed now. */
bool redis_subscribed(const struct redis *r, const char *channel, size_t len);
/* SPUBLISH (routed by the channel). cb may be NULL. Returns as redis_cmd(). */
int redis_publish(struct redis *r, const char *channel, size_t clen, const char *msg, size_t mlen,
                  redis_reply_cb *cb, void *ctx);

/* Masters: standalone, the shard count of the topology; Cluster, the
 * masters seen in slot maps (and redirects) so far, numbered in the order
 * first seen: a number never changes meaning, and a master that lost its
 * slots keeps its number. 0 before the first map. */
unsigned redis_nshards(const struct redis *r);
unsigned redis_shard_of(const struct redis *r, const char *key, size_t len);
bool redis_shard_up(const struct redis *r, unsigned shard);
/* True when every master is up. */
bool redis_all_up(const struct redis *r);

struct redis_stats {
    uint64_t commands;   /* written to a server (redirects and probes counted) */
    uint64_t writes;     /* write() calls on every connection: < commands when pipelined */
    uint64_t replies;    /* received, errors included */
    uint64_t messages;   /* pub/sub messages received */
    uint64_t reconnects; /* connections reopened after a loss */
    uint64_t redirects;  /* MOVED + ASK + TRYAGAIN */
    uint64_t resubscribes;
    uint64_t probes_failed;
};
void redis_stats(const struct redis *r, struct redis_stats *out);

#endif
