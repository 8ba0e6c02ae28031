/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - Prometheus text exposition (format 0.0.4) of the per-worker
 * metrics: one HELP/TYPE block per metric, one sample per worker labelled
 * worker="N", WebSocket closes additionally labelled code="NNNN"; the
 * latency histograms, merged over the workers; and the head and sample
 * lines of process-wide metrics for other modules.
 */
#include "metrics.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

const unsigned metrics_close_codes[METRICS_CLOSE_CODES] = {
    1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1013, 4001, 4008, 4009,
};

void metrics_count_close(struct metrics *m, unsigned code)
{
    unsigned i;

    for (i = 0; i < METRICS_CLOSE_CODES; i++)
        if (metrics_close_codes[i] == code)
            break;
    METRIC_ADD(m, ws_closes[i], 1);
}

struct metric_def {
    const char *name;
    const char *type;
    const char *help;
    size_t offset;
    size_t plus; /* a second field added to the first (0 = none) */
};

#define M(field, type, help)                                                \
    {                                                                       \
        "presenced_" #field, type, help, offsetof(struct metrics, field), 0 \
    }
/* A metric counted in two places: heartbeats throttled on the client's
 * worker never reach the owner's presence core, yet are heartbeats. */
#define M2(field, plus, type, help)                                       \
    {                                                                     \
        "presenced_" #field, type, help, offsetof(struct metrics, field), \
            offsetof(struct metrics, plus)                                \
    }

static const struct metric_def defs[] = {
    M(conns_accepted, "counter", "TCP connections accepted."),
    M(conns_closed, "counter", "Connections closed."),
    M(conns_http, "gauge", "Connections currently speaking HTTP."),
    M(conns_ws, "gauge", "Open WebSocket connections."),
    M(conns_sse, "gauge", "Open Server-Sent Events streams."),
    M(accept_errors, "counter", "Failed or refused accepts (EMFILE, max-connections)."),
    M(addr_refused, "counter",
      "Connections refused by max-pending-per-address or max-connections-per-address."),
    M(http_requests, "counter", "HTTP requests parsed."),
    M(http_errors, "counter", "HTTP responses with status >= 400."),
    M(frames_in, "counter", "WebSocket frames received."),
    M(frames_out, "counter", "WebSocket frames queued for sending."),
    M(bytes_in, "counter", "Bytes read from sockets."),
    M(bytes_out, "counter", "Bytes written to sockets."),
    M(writev_calls, "counter", "writev system calls."),
    M(output_limit_closes, "counter", "Connections closed for exceeding the output limits."),
    M(loop_iterations, "counter", "Event loop iterations."),
    M(loop_lag_max_us, "gauge", "Longest busy event-loop iteration since the last scrape."),
    M(bus_msgs_in, "counter", "Cross-worker messages received."),
    M(msgs_rate_limited, "counter",
      "Client messages past their per-connection budget (msg-rate-*): each closed its connection."),
    M(reads_paused, "counter",
      "Times a connection stopped being read because its messages waited on another worker "
      "(bus-backlog-max)."),
    M(sessions, "gauge", "Live sessions of the users this worker owns."),
    M(users_online, "gauge", "Users with at least one session, of those this worker owns."),
    M2(heartbeats, heartbeats_early, "counter",
       "Heartbeats received (WebSocket and HTTP), counted on the owner, or on the client's "
       "worker when throttled there."),
    M2(heartbeats_throttled, heartbeats_early, "counter",
       "Of those, heartbeats too close to the last to refresh anything."),

    M(presence_events, "counter", "User presence transitions emitted."),
    M(rooms, "gauge", "Rooms this worker owns."),
    M(room_members, "gauge", "Member records of the rooms this worker owns."),
    M(room_deltas, "counter", "Room deltas emitted."),
    M(ephemeral_sent, "counter", "Ephemeral messages (cursors, typing) emitted."),
    M(last_seen_writes, "counter",
      "Last-seen batches submitted to the store (one transaction each)."),
    M(last_seen_dropped, "counter",
      "Last-seen updates dropped: too many users waiting to be written."),
    M(webhooks_sent, "counter", "Webhook requests answered 2xx."),
    M(webhooks_failed, "counter",
      "Webhook attempts that failed (each is retried on its schedule)."),
    M(webhooks_dropped, "counter",
      "Webhook events or messages dropped: a full queue (10,000 messages or 16 MiB per worker "
      "and endpoint) or a disabled endpoint."),
    M(webhooks_queued, "gauge", "Webhook messages waiting or in flight (the webhook backlog)."),
    M(webhook_endpoints_disabled, "counter",
      "Times a worker disabled a webhook endpoint (its retries were spent, or 410 Gone); it "
      "stays disabled until restart."),
    M(bus_backlog, "gauge",
      "Messages this worker sent over the bus (to any worker, itself included) not taken yet; "
      "past bus-backlog-max to one worker its clients' reads pause."),
    M(output_bytes, "gauge", "Bytes queued for this worker's sockets and not yet written."),
    M(store_pending, "gauge",
      "Settings store requests this worker submitted whose completions have not run yet."),
};

/* ---- histograms ---- */

/* Bucket bounds in microseconds, ascending, at most METRICS_HIST_BOUNDS. */
struct hist_scale {
    unsigned n;
    uint64_t le_us[METRICS_HIST_BOUNDS];
};

/* In-process hops: a bus hop and a queue take tens of microseconds. */
static const struct hist_scale scale_fast = {15,
                                             {50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000,
                                              50000, 100000, 250000, 500000, 1000000, 2500000}};
/* A database round trip: a SQLite fsync or a PostgreSQL query, up to the
 * store's timeouts. */
static const struct hist_scale scale_store = {16,
                                              {100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000,
                                               100000, 250000, 500000, 1000000, 2500000, 5000000,
                                               10000000}};
/* A handshake: TCP accept, HTTP upgrade, then the protocol's first
 * message (measured in loop milliseconds). */
static const struct hist_scale scale_handshake = {15,
                                                  {500, 1000, 2500, 5000, 10000, 25000, 50000,
                                                   100000, 250000, 500000, 1000000, 2500000,
                                                   5000000, 10000000, 30000000}};

struct hist_def {
    const char *name;
    const char *labels; /* text between the braces before le, or NULL */
    const struct hist_scale *scale;
    const char *help; /* on the first of a name's ids */
};

#define STORE_OP(id, op)                                                                      \
    [id] = {"presenced_store_seconds", "op=\"" op "\"", &scale_store,                         \
            "Settings store round trips, from the request's submission to its completion on " \
            "the worker (queueing on the database thread included), by operation."}
#define HANDSHAKE(id, proto)                                                             \
    [id] = {"presenced_handshake_seconds", "proto=\"" proto "\"", &scale_handshake,      \
            "WebSocket handshakes, from the TCP accept to the protocol's first message " \
            "(welcome, pusher:connection_established, the first phx_reply), by protocol."}

/* metrics_handshake_hist() counts on one id per protocol, in order. */
_Static_assert(MH_HANDSHAKE_PUSHER == MH_HANDSHAKE_NATIVE + METRICS_PROTO_PUSHER &&
                   MH_HANDSHAKE_PHOENIX == MH_HANDSHAKE_NATIVE + METRICS_PROTO_PHOENIX &&
                   MH_HANDSHAKE_NATIVE + METRICS_PROTOS == MH_COUNT,
               "one presenced_handshake_seconds id per enum metrics_proto, in its order");

static const struct hist_def hist_defs[MH_COUNT] = {
    [MH_FANOUT] = {"presenced_fanout_seconds", NULL, &scale_fast,
                   "Presence and room events, from the owner's transition until the frame is "
                   "queued for the recipients' writev, once per batch of recipients on a worker."},
    STORE_OP(MH_STORE_SET_PRIVACY, "set_privacy"),
    STORE_OP(MH_STORE_CONTACTS, "contacts"),
    STORE_OP(MH_STORE_BLOCK, "block"),
    STORE_OP(MH_STORE_LASTSEEN_WRITE, "lastseen_write"),
    STORE_OP(MH_STORE_GET_PRIVACY, "get_privacy"),
    STORE_OP(MH_STORE_GET_RELATIONS, "get_relations"),
    STORE_OP(MH_STORE_LIST_BLOCKERS, "list_blockers"),
    STORE_OP(MH_STORE_LASTSEEN_READ, "lastseen_read"),
    STORE_OP(MH_STORE_LASTSEEN_LOAD, "lastseen_load"),
    [MH_REDIS] = {"presenced_redis_seconds", NULL, &scale_fast,
                  "Redis command round trips, from the write that sent the command to the read "
                  "that brought its reply (pipelined replies matched to their command)."},
    HANDSHAKE(MH_HANDSHAKE_NATIVE, "native"),
    HANDSHAKE(MH_HANDSHAKE_PUSHER, "pusher"),
    HANDSHAKE(MH_HANDSHAKE_PHOENIX, "phoenix"),
};

void metrics_observe(struct metrics *m, enum metrics_hist_id id, uint64_t us)
{
    const struct hist_scale *sc = hist_defs[id].scale;
    struct metrics_hist *h = &m->hist[id];
    unsigned i = 0;

    while (i < sc->n && us > sc->le_us[i])
        i++;
    METRIC_ADD(h, n[i], 1);
    METRIC_ADD(h, sum_us, us);
}

/* Microseconds as decimal seconds: 2500 -> "0.0025", 1000000 -> "1". */
static void append_seconds(struct buf *out, uint64_t us)
{
    char frac[8];
    int k;

    snprintf(frac, sizeof(frac), "%06" PRIu64, us % 1000000u);
    for (k = 5; k >= 0 && frac[k] == '0'; k--)
        frac[k] = '\0';
    buf_printf(out, "%" PRIu64 "%s%s", us / 1000000u, k >= 0 ? "." : "", frac);
}

/* One label set of a histogram, merged over n workers. */
static void render_hist(struct buf *out, struct metrics *const *w, unsigned n, unsigned id)
{
    const struct hist_def *d = &hist_defs[id];
    const char *sep = d->labels ? "," : "";
    const char *labels = d->labels ? d->labels : "";
    uint64_t cum = 0, sum = 0;

    for (unsigned b = 0; b <= d->scale->n; b++) {
        for (unsigned i = 0; i < n; i++)
            cum += METRIC_GET(&w[i]->hist[id], n[b]);
        buf_printf(out, "%s_bucket{%s%sle=\"", d->name, labels, sep);
        if (b < d->scale->n)
            append_seconds(out, d->scale->le_us[b]);
        else
            buf_append_str(out, "+Inf");
        buf_printf(out, "\"} %" PRIu64 "\n", cum);
    }
    for (unsigned i = 0; i < n; i++)
        sum += METRIC_GET(&w[i]->hist[id], sum_us);
    buf_printf(out, "%s_sum%s%s%s ", d->name, d->labels ? "{" : "", labels, d->labels ? "}" : "");
    append_seconds(out, sum);
    buf_printf(out, "\n%s_count%s%s%s %" PRIu64 "\n", d->name, d->labels ? "{" : "", labels,
               d->labels ? "}" : "", cum);
}

static void render_hists(struct buf *out, struct metrics *const *w, unsigned n)
{
    for (unsigned id = 0; id < MH_COUNT; id++) {
        if (id == 0 || strcmp(hist_defs[id].name, hist_defs[id - 1].name) != 0)
            buf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", hist_defs[id].name,
                       hist_defs[id].help, hist_defs[id].name);
        render_hist(out, w, n, id);
    }
}

static uint64_t read_field(struct metrics *m, size_t offset)
{
    _Atomic uint64_t *p = (_Atomic uint64_t *)(void *)((char *)m + offset);

    return atomic_load_explicit(p, memory_order_relaxed);
}

static void render_closes(struct buf *out, struct metrics *const *w, unsigned n)
{
    buf_append_str(out,
                   "# HELP presenced_ws_closes_total WebSocket connections closed, by close code "
                   "sent or received.\n# TYPE presenced_ws_closes_total counter\n");
    for (unsigned i = 0; i < n; i++) {
        for (unsigned k = 0; k <= METRICS_CLOSE_CODES; k++) {
            uint64_t v = atomic_load_explicit(&w[i]->ws_closes[k], memory_order_relaxed);
            if (k < METRICS_CLOSE_CODES)
                buf_printf(out,
                           "presenced_ws_closes_total{worker=\"%u\",code=\"%u\"} %" PRIu64 "\n", i,
                           metrics_close_codes[k], v);
            else
                buf_printf(out,
                           "presenced_ws_closes_total{worker=\"%u\",code=\"other\"} %" PRIu64 "\n",
                           i, v);
        }
    }
}

void metrics_render(struct buf *out, struct metrics *const *w, unsigned n)
{
    for (size_t d = 0; d < sizeof(defs) / sizeof(defs[0]); d++) {
        const char *sfx = defs[d].type[0] == 'c' ? "_total" : "";

        buf_printf(out, "# HELP %s%s %s\n# TYPE %s%s %s\n", defs[d].name, sfx, defs[d].help,
                   defs[d].name, sfx, defs[d].type);
        for (unsigned i = 0; i < n; i++) {
            uint64_t v = read_field(w[i], defs[d].offset);
            if (defs[d].plus)
                v += read_field(w[i], defs[d].plus);
            buf_printf(out, "%s%s{worker=\"%u\"} %" PRIu64 "\n", defs[d].name, sfx, i, v);
        }
    }
    render_closes(out, w, n);
    render_hists(out, w, n);
}

void metrics_render_head(struct buf *out, const char *name, const char *type, const char *help)
{
    buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metrics_render_sample(struct buf *out, const char *name, const char *labels, uint64_t v)
{
    if (labels)
        buf_printf(out, "%s{%s} %" PRIu64 "\n", name, labels, v);
    else
        buf_printf(out, "%s %" PRIu64 "\n", name, v);
}
