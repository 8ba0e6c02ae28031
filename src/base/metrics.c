/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - Prometheus text exposition (format 0.0.4) of the per-worker
 * metrics: one HELP/TYPE block per metric, one sample per worker labelled
 * worker="N", WebSocket closes additionally labelled code="NNNN"; and
 * the head and sample lines of process-wide metrics for other modules.
 */
#include "metrics.h"

#include <inttypes.h>
#include <stddef.h>

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
    M(webhooks_queued, "gauge", "Webhook messages waiting or in flight."),
    M(webhook_endpoints_disabled, "counter",
      "Times a worker disabled a webhook endpoint (its retries were spent, or 410 Gone); it "
      "stays disabled until restart."),
};

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
