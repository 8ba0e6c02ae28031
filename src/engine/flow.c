/* SPDX-License-Identifier: MIT */
/* flow.c - budgets and bus backpressure for client input (flow.h). */
#include "flow.h"

#include "bus.h"
#include "conn.h"
#include "frame.h"
#include "loop.h"
#include "metrics.h"
#include "pool.h"
#include "worker.h"
#include "wsconn.h"

#define FLOW_RECHECK_MS 2 /* how often paused clients look at the backlogs */

/* A paused client, in e->paused (rare: its own small object). */
struct flow_pause {
    struct list link;
    struct client *c;
};

bool flow__spend(struct client *c, enum budget_kind k, const char *ref)
{
    struct engine *e = c->e;
    const struct config *cfg = &e->w->srv->cfg;
    char msg[96];

    if (k == BUDGET_NONE || budget_take(&client_x(c)->budget, k, cfg, loop_now(e->w->loop)))
        return true;
    METRIC_ADD(&e->w->metrics, msgs_rate_limited, 1);
    snprintf(msg, sizeof(msg), "more %s messages than msg-rate-%s per second", budget_kind_name(k),
             budget_kind_name(k));
    frame_send_error(c, "rate_limited", msg, ref);
    if (c->ws)
        wsconn_close(c->ws, 1008, "rate limited");
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
    struct flow_pause *p;

    e->congested = false;
    if (!c->ws || (c->x && c->x->paused))
        return;
    p = pool_alloc(sizeof(*p));
    p->c = c;
    client_x(c)->paused = p;
    list_insert_tail(&e->paused, &p->link);
    conn_pause_input(wsconn_to_conn(c->ws), true);
    METRIC_ADD(&e->w->metrics, reads_paused, 1);
    if (!wheel_is_linked(&e->flow_timer))
        loop_timer_start(e->w->loop, &e->flow_timer, FLOW_RECHECK_MS);
}

void flow__forget(struct client *c)
{
    struct flow_pause *p = c->x ? c->x->paused : NULL;

    if (!p)
        return;
    c->x->paused = NULL;
    list_del(&p->link);
    pool_free(p);
}

/* Reads every paused client again, its buffered input first. Each leaves
 * the list before its input runs, which may close it (and free it). */
static void resume_all(struct engine *e)
{
    while (!list_empty(&e->paused)) {
        struct flow_pause *p = container_of(e->paused.next, struct flow_pause, link);
        struct conn *conn = wsconn_to_conn(p->c->ws);

        flow__forget(p->c);
        conn_pause_input(conn, false);
        conn_replay_input(conn);
    }
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

void flow__init(struct engine *e)
{
    list_init(&e->paused);
    wheel_timer_init(&e->flow_timer, on_flow_timer);
}

void flow__free(struct engine *e)
{
    wheel_del(&e->flow_timer);
    while (!list_empty(&e->paused))
        flow__forget(container_of(e->paused.next, struct flow_pause, link)->c);
}
