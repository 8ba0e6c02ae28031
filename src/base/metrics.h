/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - per-worker counters and gauges, rendered in Prometheus text,
 * and the helpers that render a process-wide metric beside them.
 *
 * Each worker owns one struct metrics and is its only writer; the /metrics
 * handler (on any worker) reads every worker's struct. Fields are relaxed
 * atomics updated with a plain load+store (no lock prefix on x86), so the
 * hot path pays nothing and readers see torn-free values.
 *
 * Histograms (latencies) are kept the same way: each worker's struct holds
 * its own shard of every histogram (a count per bucket, not cumulative,
 * and the sum), and /metrics merges the workers' shards into one
 * Prometheus histogram per label set (no worker label): cumulative
 * _bucket{le=...} lines, +Inf equal to _count, and _sum in seconds. An
 * observation is a short scan of at most METRICS_HIST_BOUNDS bounds and
 * two relaxed load+stores. Each histogram has fixed bounds chosen for what
 * it measures (metrics.c, hist_defs[]).
 */
#ifndef METRICS_H
#define METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "buf.h"

/* WebSocket close codes tracked individually; anything else is "other". */
#define METRICS_CLOSE_CODES 13
extern const unsigned metrics_close_codes[METRICS_CLOSE_CODES];

/* The proto label of presenced_handshake_seconds: each protocol adapter
 * names its own at registration (adapter.h), so the engine picks the
 * series by number, never by comparing adapter names. 0 is native. */
enum metrics_proto {
    METRICS_PROTO_NATIVE,
    METRICS_PROTO_PUSHER,
    METRICS_PROTO_PHOENIX,
    METRICS_PROTOS /* not a protocol: how many there are */
};

/* The histograms, one slot each in struct metrics.hist. Consecutive ids
 * with the same name are one metric with different labels. */
enum metrics_hist_id {
    MH_FANOUT,            /* presenced_fanout_seconds */
    MH_STORE_SET_PRIVACY, /* presenced_store_seconds{op=...}, one per op */
    MH_STORE_CONTACTS,    /* ... add, remove and replace */
    MH_STORE_BLOCK,       /* ... block and unblock */
    MH_STORE_LASTSEEN_WRITE,
    MH_STORE_GET_PRIVACY,
    MH_STORE_GET_RELATIONS,
    MH_STORE_LIST_BLOCKERS,
    MH_STORE_LASTSEEN_READ,
    MH_STORE_LASTSEEN_LOAD,
    MH_REDIS,            /* presenced_redis_seconds */
    MH_HANDSHAKE_NATIVE, /* presenced_handshake_seconds{proto=...}, */
    MH_HANDSHAKE_PUSHER, /* one per enum metrics_proto, in its order */
    MH_HANDSHAKE_PHOENIX,
    MH_COUNT /* not a histogram: how many there are */
};

#define METRICS_HIST_BOUNDS 16 /* finite bucket bounds at most */

/* One worker's shard of a histogram. */
struct metrics_hist {
    _Atomic uint64_t n[METRICS_HIST_BOUNDS + 1]; /* per bucket; the last: above every bound */
    _Atomic uint64_t sum_us;                     /* observed microseconds */
};

struct metrics {
    _Atomic uint64_t conns_accepted;      /* counter */
    _Atomic uint64_t conns_closed;        /* counter */
    _Atomic uint64_t conns_http;          /* gauge: connections speaking HTTP */
    _Atomic uint64_t conns_ws;            /* gauge: WebSocket connections */
    _Atomic uint64_t conns_sse;           /* gauge: SSE streams */
    _Atomic uint64_t accept_errors;       /* counter (EMFILE etc.) */
    _Atomic uint64_t addr_refused;        /* counter: over a per-address cap (addrcap.h) */
    _Atomic uint64_t http_requests;       /* counter */
    _Atomic uint64_t http_errors;         /* counter: responses >= 400 */
    _Atomic uint64_t frames_in;           /* counter: WebSocket frames received */
    _Atomic uint64_t frames_out;          /* counter: WebSocket frames queued */
    _Atomic uint64_t bytes_in;            /* counter: socket bytes read */
    _Atomic uint64_t bytes_out;           /* counter: socket bytes written */
    _Atomic uint64_t writev_calls;        /* counter */
    _Atomic uint64_t output_limit_closes; /* counter: slow consumers closed */
    _Atomic uint64_t ws_closes[METRICS_CLOSE_CODES + 1]; /* by code; last = other */
    _Atomic uint64_t loop_iterations;                    /* counter */
    _Atomic uint64_t loop_lag_max_us;   /* gauge: worst iteration since last scrape */
    _Atomic uint64_t bus_msgs_in;       /* counter: cross-worker messages drained */
    _Atomic uint64_t msgs_rate_limited; /* counter: messages past their budget (engine/flow.h) */
    _Atomic uint64_t reads_paused;      /* counter: connections paused by bus backpressure */
    /* presence engine, copied from the partition's cores each iteration */
    _Atomic uint64_t sessions;             /* gauge: live sessions owned here */
    _Atomic uint64_t users_online;         /* gauge: users with a session */
    _Atomic uint64_t heartbeats;           /* counter: heartbeats reaching the owner */
    _Atomic uint64_t heartbeats_throttled; /* counter: of those, ones that wrote nothing */
    _Atomic uint64_t heartbeats_early;     /* counter: throttled on the client's worker, never sent
                                            * (rendered inside heartbeats and heartbeats_throttled) */
    _Atomic uint64_t presence_events;      /* counter: user transitions emitted */
    _Atomic uint64_t rooms;                /* gauge: rooms owned here */
    _Atomic uint64_t room_members;         /* gauge: member records */
    _Atomic uint64_t room_deltas;          /* counter: room deltas emitted */
    _Atomic uint64_t ephemeral_sent;       /* counter: ephemeral messages emitted */
    _Atomic uint64_t last_seen_writes;     /* counter: last-seen batches written to the store */
    _Atomic uint64_t last_seen_dropped;    /* counter: last-seen updates dropped at the cap */
    /* webhooks (engine/hooks.h) */
    _Atomic uint64_t webhooks_sent;              /* counter: requests answered 2xx */
    _Atomic uint64_t webhooks_failed;            /* counter: attempts that failed */
    _Atomic uint64_t webhooks_dropped;           /* counter: events/messages dropped */
    _Atomic uint64_t webhooks_queued;            /* gauge: messages waiting or in flight */
    _Atomic uint64_t webhook_endpoints_disabled; /* counter: endpoints given up */
    /* queue depths */
    _Atomic uint64_t bus_backlog;   /* gauge: messages sent over the bus, not yet taken */
    _Atomic uint64_t output_bytes;  /* gauge: bytes queued on this worker's sockets, unwritten */
    _Atomic uint64_t store_pending; /* gauge: store requests submitted here, callbacks not run */
    struct metrics_hist hist[MH_COUNT];
};

#define METRIC_ADD(m, field, n)                                                          \
    atomic_store_explicit(&(m)->field,                                                   \
                          atomic_load_explicit(&(m)->field, memory_order_relaxed) + (n), \
                          memory_order_relaxed)
#define METRIC_SUB(m, field, n) METRIC_ADD(m, field, (uint64_t)0 - (uint64_t)(n))
#define METRIC_SET(m, field, v) atomic_store_explicit(&(m)->field, (v), memory_order_relaxed)
#define METRIC_GET(m, field)    atomic_load_explicit(&(m)->field, memory_order_relaxed)

void metrics_count_close(struct metrics *m, unsigned code);
/* Records one observation of us microseconds in histogram id of m. Only
 * m's worker (its only writer) calls it. */
void metrics_observe(struct metrics *m, enum metrics_hist_id id, uint64_t us);
/* The presenced_handshake_seconds series of protocol p (< METRICS_PROTOS). */
static inline enum metrics_hist_id metrics_handshake_hist(enum metrics_proto p)
{
    return (enum metrics_hist_id)(MH_HANDSHAKE_NATIVE + p);
}
/* Appends the Prometheus text for n workers' metrics to out: the
 * per-worker samples, then the histograms merged over the n workers. */
void metrics_render(struct buf *out, struct metrics *const *per_worker, unsigned n);

/* Process-wide metrics that are no worker's (the dependency gauges, the
 * cluster's counters): one head per metric, then its samples. name is the
 * full metric name (a counter's ends in _total), type "counter" or
 * "gauge", help one line of text without a newline. */
void metrics_render_head(struct buf *out, const char *name, const char *type, const char *help);
/* One sample of name: labels is the text between the braces (e.g.
 * dependency="redis", values already escaped) or NULL for none. */
void metrics_render_sample(struct buf *out, const char *name, const char *labels, uint64_t v);

#endif
