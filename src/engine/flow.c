/* SPDX-License-Identifier: MIT */
/* flow.c - budgets and bus backpressure for client input (flow.h). */
#include "flow.h"

#include <stdio.h>

#include "bus.h"
#include "conn.h"
#include "frame.h"
#include "loop.h"
#include "metrics.h"
#include "pool.h"
#include "worker.h"
#include "wsconn.h"

#define FLOW_RECHECK_MS 2    /* how often paused clients look at the backlogs */
#define FLOW_SWEEP_MS   1000 /* how often records that carry nothing are dropped */

/* A client's flow state, in e->flows while it carries information: its
 * budgets since their last use (a bucket refilled to full is the same as
 * none), or its pause. Idle connections have none. */
struct flow_rec {
    struct hmap_node node; /* e->flows, by the client's address */
    struct client *c;
    struct budget budget;
    struct list link; /* e->paused while paused */
    bool paused;
};

static uint64_t client_hash(const struct client *c)
{
    return hash_bytes(&c, sizeof(c));
}

static struct flow_rec *find_rec(struct engine *e, const struct client *c)
{
    uint64_t h = client_hash(c);

    for (struct hmap_node *n = hmap_find(&e->flows, h); n; n = hmap_find_next(n, h)) {
        struct flow_rec *r = container_of(n, struct flow_rec, node);
        if (r->c == c)
            return r;
    }
    return NULL;
}

static struct flow_rec *get_rec(struct engine *e, struct client *c)
{
    struct flow_rec *r = find_rec(e, c);

    if (!r) {
        r = pool_alloc(sizeof(*r)); /* zeroed: budgets not started */
        r->c = c;
        list_init(&r->link);
        hmap_insert(&e->flows, &r->node, client_hash(c));
    }
    return r;
}

static void drop_rec(struct engine *e, struct flow_rec *r)
{
    if (r->paused)
        list_del(&r->link);
    hmap_remove(&e->flows, &r->node);
    pool_free(r);
}

bool flow__spend(struct client *c, enum budget_kind k, const char *ref)
{
    struct engine *e = c->e;
    const struct config *cfg = &e->w->srv->cfg;
    char msg[96];

    if (k == BUDGET_NONE)
        return true;
    if (c->budget_free < CLIENT_BUDGET_FREE) {
        c->budget_free++; /* a connection's first few cost no state (W1) */
        return true;
    }
    if (budget_take(&get_rec(e, c)->budget, k, cfg, loop_now(e->w->loop)))
        return true;
    METRIC_ADD(&e->w->metrics, msgs_rate_limited, 1);
    snprintf(msg, sizeof(msg), "more %s messages than msg-rate-%s per second", budget_kind_name(k),
             budget_kind_name(k));
    frame_send_error(c, "rate_limited", msg, ref);
    if (!client_is_stream(c))
        client__ws_close(c, 1008, "rate limited");
    return false;
}

/* The largest backlog from this worker to any worker. */
static uint64_t worst_backlog(struct engine *e)
{
    struct bus *b = e->w->srv->bus;
    uint64_t worst = 0;

    for (unsigned to = 0; to < bus_workers(b); to++) {
        uint64_t n = bus_backlog(b, e->w->id, to);
        worst = n > worst ? n : worst;
    }
    return worst;
}

void flow__pause(struct client *c)
{
    struct engine *e = c->e;
    struct flow_rec *r;

    e->congested = false;
    if (!c->ws)
        return;
    r = get_rec(e, c);
    if (r->paused)
        return;
    r->paused = true;
    list_insert_tail(&e->paused, &r->link);
    conn_pause_input(wsconn_to_conn(c->ws), true);
    METRIC_ADD(&e->w->metrics, reads_paused, 1);
    if (!wheel_is_linked(&e->flow_timer))
        loop_timer_start(e->w->loop, &e->flow_timer, FLOW_RECHECK_MS);
}

void flow__forget(struct client *c)
{
    struct flow_rec *r = c->e->flows.count ? find_rec(c->e, c) : NULL;

    if (r)
        drop_rec(c->e, r);
}

/* Reads every client paused until now again, its buffered input first.
 * Each leaves the list before its input runs, which may close it (and
 * free it); one that pauses again then waits for the next look. */
static void resume_all(struct engine *e)
{
    struct list now;

    list_init(&now);
    list_move_all(&now, &e->paused);
    while (!list_empty(&now)) {
        struct flow_rec *r = container_of(now.next, struct flow_rec, link);
        struct conn *conn = wsconn_to_conn(r->c->ws);

        list_del(&r->link);
        r->paused = false;
        conn_pause_input(conn, false);
        conn_replay_input(conn);
    }
    if (!list_empty(&e->paused) && !wheel_is_linked(&e->flow_timer))
        loop_timer_start(e->w->loop, &e->flow_timer, FLOW_RECHECK_MS);
}

static void on_flow_timer(struct wheel_timer *t, uint64_t now)
{
    struct engine *e = container_of(t, struct engine, flow_timer);

    (void)now;
    if (worst_backlog(e) * 2 < (uint64_t)e->w->srv->cfg.bus_backlog_max)
        resume_all(e);
    else
        loop_timer_start(e->w->loop, &e->flow_timer, FLOW_RECHECK_MS);
}

void flow__tick(struct engine *e, uint64_t now)
{
    uint64_t idle = (uint64_t)e->w->srv->cfg.msg_burst_seconds * 1000;
    struct hmap_node *n, *next;
    size_t i;

    if (now - e->flows_swept_ms < FLOW_SWEEP_MS || e->flows.count == 0)
        return;
    e->flows_swept_ms = now;
    for (n = hmap_first(&e->flows, &i); n; n = next) {
        struct flow_rec *r = container_of(n, struct flow_rec, node);

        next = hmap_next(&e->flows, n, &i);
        if (!r->paused && now - r->budget.last_ms >= idle)
            drop_rec(e, r); /* its buckets are full again: the same as none */
    }
}

void flow__init(struct engine *e)
{
    list_init(&e->paused);
    wheel_timer_init(&e->flow_timer, on_flow_timer);
}

void flow__free(struct engine *e)
{
    struct hmap_node *n, *next;
    size_t i;

    wheel_del(&e->flow_timer);
    for (n = hmap_first(&e->flows, &i); n; n = next) {
        next = hmap_next(&e->flows, n, &i);
        drop_rec(e, container_of(n, struct flow_rec, node));
    }
    hmap_release(&e->flows);
}
