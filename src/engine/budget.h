/* SPDX-License-Identifier: MIT */
/*
 * budget.h - per-connection message budgets: how many messages of each
 * costly kind one connection may send, so that one client's flood is cut
 * at its socket before it costs other clients anything.
 *
 * A kind is a family of messages that cost the server alike: ephemeral
 * (cursors, typing), patch (room metadata), status (status, custom,
 * activity, leave, privacy), watch (watch, unwatch) and join (join,
 * room_leave). Each has a token bucket per connection: it holds rate *
 * msg-burst-seconds tokens, refills at rate per second (config keys
 * msg-rate-<kind> and msg-burst-seconds), and starts full. A message
 * takes one token; a message that finds none is refused — the adapter
 * answers rate_limited and closes the connection (docs/protocol.md). A
 * rate of 0 means no budget for that kind. Heartbeats have no budget:
 * they are throttled, and cost nothing past the throttle (session.c).
 *
 * Pure: no clock reads (now comes in), no allocation; flow.c keeps a
 * connection's buckets from its first budgeted message until they have
 * all refilled (then they are the same as none and go).
 */
#ifndef BUDGET_H
#define BUDGET_H

#include <stdbool.h>
#include <stdint.h>

struct config;

enum budget_kind {
    BUDGET_NONE,      /* not budgeted */
    BUDGET_EPHEMERAL, /* "ephemeral" */
    BUDGET_PATCH,     /* "patch" */
    BUDGET_STATUS,    /* "status" */
    BUDGET_WATCH,     /* "watch" */
    BUDGET_JOIN,      /* "join" */
    BUDGET_KINDS
};

/* One connection's buckets. Zero-filled = not started (full at first use). */
struct budget {
    float tokens[BUDGET_KINDS];
    uint64_t last_ms; /* loop ms of the last refill; 0 = not started */
};

/* Takes one token of kind k (not BUDGET_NONE) at now_ms under cfg's rates.
 * Returns false, taking nothing, when the bucket is empty. */
bool budget_take(struct budget *b, enum budget_kind k, const struct config *cfg, uint64_t now_ms);

/* The kind's name ("ephemeral", ...), as in its config key msg-rate-<name>. */
const char *budget_kind_name(enum budget_kind k);

#endif
