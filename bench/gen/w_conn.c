/*
 * w_conn.c - presence-bench: the connection workloads and the callbacks
 * every workload shares.
 *
 * W1 idle:   conns authenticated connections, each in one room of
 *            room_size, heartbeating every hb_ms for hold_s; the server's
 *            RSS and the machine's slab growth per connection.
 * W2 ramp:   conns handshakes (JWT verified) as fast as inflight allows;
 *            handshakes per second and per server CPU-second, failures,
 *            connect-to-welcome latency; then hold_s idle (idle CPU).
 * W3 flood:  conns connections sending `rate` heartbeats per second in
 *            all for step_s, one heartbeat per write; a ping barrier at
 *            the end makes sure the server has read them all; heartbeats
 *            per server CPU-second.
 */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int err_printed;

static void on_ready(struct net *n, struct conn *c)
{
    (void)n;
    CNT(X, C_READY)++;
    if (c->t_connect) /* handshake latency, read by W2 */
        hist_add(&X->res->lat2[MAX_STEPS - 1], now_us() - c->t_connect);
}

static void on_joined(struct net *n, struct conn *c, uint32_t room)
{
    (void)n, (void)c, (void)room;
    CNT(X, C_JOINED)++;
}

static void on_error(struct net *n, struct conn *c, const char *p, size_t len)
{
    (void)n;
    CNT(X, C_ERR)++;
    if (err_printed++ < 5)
        fprintf(stderr, "presence-bench: u%u got error: %.*s\n", c->user,
                (int)(len > 200 ? 200 : len), p);
}

static void on_closed(struct net *n, struct conn *c, int code)
{
    (void)n;
    if (code == 4008 || c->small_rcv) { /* the slow consumer: 4008, or a reset after it */
        CNT(X, C_C4008)++;
        fprintf(stderr, "presence-bench: slow consumer u%u closed, code %d\n", c->user, code);
    } else if (code == 4000 || c->quiet) /* a session the server expired (w6) */
        CNT(X, C_EXPIRED)++;
    else if (!c->ready)
        CNT(X, C_CONNFAIL)++;
    else
        CNT(X, C_CLOSED)++;
}

static void on_pong(struct net *n, struct conn *c)
{
    (void)n, (void)c;
    CNT(X, C_PONG)++;
}

const struct app_ops base_ops = {
    .ready = on_ready,
    .joined = on_joined,
    .error = on_error,
    .closed = on_closed,
    .pong = on_pong,
};

/* Allocates the local connections for `total` users (0 .. total-1). */
void alloc_conns(struct ctx *x, uint32_t total)
{
    uint32_t P = (uint32_t)x->p->procs;
    x->nlocal = total / P + ((uint32_t)x->shard < total % P);
    x->conns = xcalloc(x->nlocal ? x->nlocal : 1, sizeof *x->conns);
    for (uint32_t k = 0; k < x->nlocal; k++) {
        x->conns[k].fd = -1;
        x->conns[k].user = (uint32_t)x->shard + k * P;
    }
}

/* Sum over all steps of counter k of this child. */
static uint64_t all_steps(struct ctx *x, enum counter k)
{
    uint64_t s = 0;
    for (int i = 0; i < MAX_STEPS; i++)
        s += x->res->c[i][k];
    return s;
}

static uint32_t want;
static enum counter want_k;

static int have_wanted(struct ctx *x)
{
    return all_steps(x, want_k) + all_steps(x, C_CONNFAIL) + all_steps(x, C_CLOSED) >= want;
}

/* Runs until counter k (all steps) reaches n, or timeout_s. */
int wait_count(struct ctx *x, enum counter k, uint64_t n, double timeout_s)
{
    want = (uint32_t)n;
    want_k = k;
    return run_until(x, now_us() + (uint64_t)(timeout_s * 1e6), have_wanted);
}

/* Every ready connection of this process sends a ping and the run waits
 * (30 s at most) until every ready connection of all processes answered:
 * what was sent before has been processed by the server. */
static void ping_barrier(struct ctx *x)
{
    for (uint32_t k = 0; k < x->nlocal; k++)
        if (x->conns[k].ready)
            proto_barrier(&x->net, &x->conns[k]);
    wait_count(x, C_PONG, all_steps(x, C_READY), 30);
}

/* Joins every ready local connection to room user / room_size. */
void join_all(struct ctx *x)
{
    for (uint32_t k = 0; k < x->nlocal; k++) {
        struct conn *c = &x->conns[k];
        if (c->ready)
            proto_join(&x->net, c, c->user / (uint32_t)x->p->room_size);
    }
}

/* Common tail fields: errors, closes, failures of a step. */
void out_errors(struct params *p, struct shm *m, int step)
{
    out_num("errors", (double)sum_c(m, p->procs, step, C_ERR));
    out_num("closed", (double)sum_c(m, p->procs, step, C_CLOSED));
    out_num("connect_failed", (double)sum_c(m, p->procs, step, C_CONNFAIL));
}

/* ---- W1 ---- */

static void w1_child(struct ctx *x)
{
    app = &base_ops;
    alloc_conns(x, (uint32_t)x->p->conns);
    phase(x, 1);
    x->hb_on = x->p->hb_ms > 0;
    connect_range(x, 0, x->nlocal, now_us() + 60000000u, NULL);
    join_all(x);
    wait_count(x, C_JOINED, x->nlocal, 60);
    phase(x, 2);
    run_until(x, now_us() + (uint64_t)(x->p->hold_s * 1e6), NULL);
    phase(x, 3);
}

static void w1_report(struct params *p, struct shm *m)
{
    double n = p->conns;
    uint64_t joined = sum_c(m, p->procs, 0, C_JOINED);
    uint64_t gen_rss = 0;
    for (int i = 0; i < p->procs; i++)
        gen_rss += m->sh[i].rss_kb;
    out_begin(p, "w1", 0);
    out_num("conns", n);
    out_num("joined", (double)joined);
    out_num("server_rss_per_conn_b",
            ((double)m->at[3].rss_kb - (double)m->at[1].rss_kb) * 1024.0 / n);
    out_num("slab_per_conn_b", ((double)m->at[3].slab_kb - (double)m->at[1].slab_kb) * 1024.0 / n);
    out_num("server_rss_mb", (double)m->at[3].rss_kb / 1024.0);
    out_num("gen_rss_per_conn_b", (double)gen_rss * 1024.0 / n);
    double hold = (double)(m->at[3].t_us - m->at[2].t_us) / 1e6;
    out_num("hold_s", hold);
    out_num("idle_cpu_pct", 100.0 * (m->at[3].cpu_s - m->at[2].cpu_s) / hold);
    out_num("setup_s", (double)(m->at[2].t_us - m->at[1].t_us) / 1e6);
    out_errors(p, m, 0);
    out_end();
}

/* ---- W2 ---- */

static void w2_child(struct ctx *x)
{
    app = &base_ops;
    alloc_conns(x, (uint32_t)x->p->conns);
    phase(x, 1);
    connect_range(x, 0, x->nlocal, now_us() + 60000000u, NULL);
    phase(x, 2);
    x->hb_on = x->p->hb_ms > 0; /* a long hold keeps the sessions alive */
    run_until(x, now_us() + (uint64_t)(x->p->hold_s * 1e6), NULL);
    phase(x, 3);
    /* still alive after the hold: every connection answers a ping */
    x->hb_on = 0;
    ping_barrier(x);
    phase(x, 4);
}

static void w2_report(struct params *p, struct shm *m)
{
    double secs = (double)(m->at[2].t_us - m->at[1].t_us) / 1e6;
    double cpu = m->at[2].cpu_s - m->at[1].cpu_s;
    uint64_t ok = sum_c(m, p->procs, 0, C_READY);
    struct hist h;
    sum_hist(m, p->procs, MAX_STEPS - 1, 1, &h);
    out_begin(p, "w2", 0);
    out_num("conns", p->conns);
    out_num("ready", (double)ok);
    out_num("ramp_s", secs);
    out_num("handshakes_per_s", (double)ok / secs);
    out_num("server_cpu_s", cpu);
    out_num("handshakes_per_cpu_s", cpu > 0 ? (double)ok / cpu : 0);
    out_num("gen_cpu_s", gen_cpu(m, p->procs, 1, 2));
    out_hist("handshake", &h);
    double hold = (double)(m->at[3].t_us - m->at[2].t_us) / 1e6;
    out_num("idle_cpu_pct", 100.0 * (m->at[3].cpu_s - m->at[2].cpu_s) / hold);
    out_num("hold_s", hold);
    out_num("hb_ms", p->hb_ms);
    out_num("servers", p->nports ? p->nports : 1);
    out_num("server_rss_per_conn_b",
            ok ? ((double)m->at[3].rss_kb - (double)m->at[1].rss_kb) * 1024.0 / (double)ok : 0);
    out_num("server_rss_mb", (double)m->at[3].rss_kb / 1024.0);
    out_num("answered_after_hold", (double)sum_c(m, p->procs, 0, C_PONG));
    out_errors(p, m, 0);
    out_end();
}

/* ---- W3 ---- */

static uint64_t w3_t0, w3_sent;
static uint32_t w3_pos;

static void w3_tick(struct ctx *x, uint64_t now)
{
    double per_proc = x->p->rate / x->p->procs;
    uint64_t due = (uint64_t)((double)(now - w3_t0) * per_proc / 1e6);
    uint32_t budget = x->nlocal; /* at most one heartbeat per connection per tick */
    while (w3_sent < due && budget--) {
        struct conn *c = &x->conns[w3_pos];
        w3_pos = (w3_pos + 1) % x->nlocal;
        if (!c->ready)
            continue;
        proto_heartbeat(&x->net, c);
        w3_sent++;
        CNT(x, C_SENT)++;
    }
    if (due > w3_sent + (uint64_t)per_proc)
        w3_sent = due - (uint64_t)per_proc; /* cannot keep up: do not bank more than 1 s */
}

static void w3_child(struct ctx *x)
{
    app = &base_ops;
    alloc_conns(x, (uint32_t)x->p->conns);
    connect_range(x, 0, x->nlocal, now_us() + 60000000u, NULL);
    phase(x, 1);
    w3_t0 = now_us();
    x->tick = w3_tick;
    run_until(x, w3_t0 + (uint64_t)(x->p->step_s * 1e6), NULL);
    x->tick = NULL;
    ping_barrier(x);
    phase(x, 2);
}

static void w3_report(struct params *p, struct shm *m)
{
    double secs = (double)(m->at[2].t_us - m->at[1].t_us) / 1e6;
    double cpu = m->at[2].cpu_s - m->at[1].cpu_s;
    uint64_t sent = sum_c(m, p->procs, 0, C_SENT);
    out_begin(p, "w3", 0);
    out_num("conns", p->conns);
    out_num("offered_rate", p->rate);
    out_num("heartbeats", (double)sent);
    out_num("seconds", secs);
    out_num("heartbeats_per_s", (double)sent / secs);
    out_num("server_cpu_s", cpu);
    out_num("heartbeats_per_cpu_s", cpu > 0 ? (double)sent / cpu : 0);
    out_num("gen_cpu_s", gen_cpu(m, p->procs, 1, 2));
    out_num("barrier_ok", (double)sum_c(m, p->procs, 0, C_PONG));
    out_errors(p, m, 0);
    out_end();
}

const struct workload w1 = {"w1", 3, 0, w1_child, w1_report};
const struct workload w2 = {"w2", 4, 0, w2_child, w2_report};
const struct workload w3 = {"w3", 2, 0, w3_child, w3_report};

extern const struct workload w4, w5, w6, w8, w8s;

const struct workload *workload_find(const char *name)
{
    const struct workload *all[] = {&w1, &w2, &w3, &w4, &w5, &w6, &w8, &w8s};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(all[i]->name, name))
            return all[i];
    return NULL;
}
