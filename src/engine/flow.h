/* SPDX-License-Identifier: MIT */
/*
 * flow.h - flow control of a client's input, so that one client's flood
 * never costs another client anything:
 *
 *   - budgets: each costly message kind has a per-connection token bucket
 *     (budget.h); a message past its budget is answered rate_limited and
 *     the connection is closed (1008). An adapter calls flow__spend()
 *     before it runs the message. A connection's first CLIENT_BUDGET_FREE
 *     (7) budgeted messages take no state (most sockets send no more: a
 *     join, a status); from the next one on its buckets are kept, full at
 *     first, until they have refilled (flow__tick()).
 *   - backpressure on the bus: when a message a client sent leaves more
 *     than bus-backlog-max messages queued from this worker to the owner
 *     it went to (bus_backlog(); owner.h raises e->congested), the client
 *     stops being read (flow__after()): its bytes wait in the kernel and
 *     its TCP window closes. Every few ms flow's timer looks again, and
 *     once every backlog of this worker is below half the bound the
 *     paused clients are read again, their buffered input first. Clients
 *     that send nothing to a congested owner are never paused.
 *
 * Counted in presenced_msgs_rate_limited_total and
 * presenced_reads_paused_total (docs/api.md).
 */
#ifndef FLOW_H
#define FLOW_H

#include <stdbool.h>

#include "budget.h"
#include "client.h"

/* Spends one message of kind k (BUDGET_NONE: free) for c at the loop's
 * now. Returns true, or false after answering rate_limited (with ref) and
 * closing c's connection: the caller must then not run the message. */
bool flow__spend(struct client *c, enum budget_kind k, const char *ref);

/* Stops reading c until the worker's backlogs drain; see above. */
void flow__pause(struct client *c);

/* After one of c's messages ran: pauses c when a send it made found its
 * owner congested, and clears the flag for the next message. */
static inline void flow__after(struct client *c)
{
    if (c->e->congested)
        flow__pause(c);
}

/* c is going away: its flow state goes (it leaves the paused list). */
void flow__forget(struct client *c);

/* Once a second (engine_tick): drops the state of clients whose budgets
 * have refilled, so an idle connection holds none. */
void flow__tick(struct engine *e, uint64_t now);

/* The engine's set-up and tear-down of the resume timer. */
void flow__init(struct engine *e);
void flow__free(struct engine *e);

#endif
