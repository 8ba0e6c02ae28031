/*
 * harness.c - presence-bench: processes, phases, run loops, connection
 * ramps, keep-alive heartbeats and the JSON output. See bench.h.
 */
#include "bench.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct ctx *X;

int run_until(struct ctx *x, uint64_t deadline, int (*cond)(struct ctx *x))
{
    for (;;) {
        if (cond && cond(x))
            return 1;
        uint64_t now = now_us();
        if (now >= deadline)
            return 0;
        int wait_ms = x->tick ? 1 : (int)((deadline - now) / 1000);
        if (wait_ms > 20)
            wait_ms = 20;
        net_poll(&x->net, wait_ms);
        now = now_us();
        if (x->hb_on)
            hb_tick(x, now);
        if (x->tick)
            x->tick(x, now);
    }
}

static int phase_target;

static int phase_released(struct ctx *x)
{
    return __atomic_load_n(&x->shm->release, __ATOMIC_ACQUIRE) >= phase_target;
}

void phase(struct ctx *x, int k)
{
    net_flush(&x->net);
    x->res->cpu[k] = self_cpu_s(0);
    __atomic_add_fetch(&x->shm->arrived[k], 1, __ATOMIC_ACQ_REL);
    phase_target = k;
    run_until(x, UINT64_MAX, phase_released);
}

void hb_tick(struct ctx *x, uint64_t now)
{
    if (!x->p->hb_ms || !x->nlocal)
        return;
    uint64_t period = (uint64_t)x->p->hb_ms * 1000u;
    uint64_t gap = period / x->nlocal;
    if (!gap)
        gap = 1;
    if (!x->hb_next)
        x->hb_next = now + gap;
    uint32_t budget = x->nlocal;
    while (x->hb_next <= now && budget--) {
        struct conn *c = &x->conns[x->hb_pos];
        if (c->ready && c->state == CS_OPEN && !c->quiet) {
            proto_heartbeat(&x->net, c);
            c->t_mark = now;
        }
        x->hb_pos = (x->hb_pos + 1) % x->nlocal;
        x->hb_next += gap;
    }
    if (x->hb_next + period < now)
        x->hb_next = now; /* the loop stalled: do not burst */
}

struct ramp {
    uint32_t from, to, next;
    int64_t pending;
};

static struct ramp ramp;

static int ramp_done(struct ctx *x)
{
    (void)x;
    return ramp.next >= ramp.to && ramp.pending <= 0;
}

uint32_t connect_range(struct ctx *x, uint32_t from, uint32_t to, uint64_t deadline,
                       void (*query_of)(struct ctx *x, struct conn *c, char *q, size_t cap))
{
    ramp = (struct ramp){from, to, from, 0};
    uint32_t lo = from;
    int src = 2 + x->shard + 8 * x->gen;
    int inflight = x->p->inflight > 0 ? x->p->inflight : 200;
    while (!ramp_done(x) && now_us() < deadline) {
        while (ramp.next < ramp.to && ramp.pending < inflight) {
            struct conn *c = &x->conns[ramp.next++];
            char q[128] = "";
            if (query_of)
                query_of(x, c, q, sizeof q);
            net_connect(&x->net, c, src, q);
            if (c->state != CS_CLOSED)
                ramp.pending++;
        }
        net_poll(&x->net, 5);
        uint64_t now = now_us();
        if (x->hb_on)
            hb_tick(x, now);
        if (x->tick)
            x->tick(x, now);
        /* pending: connections in [lo, next) neither ready nor closed */
        while (lo < ramp.next && (x->conns[lo].ready || x->conns[lo].state == CS_CLOSED))
            lo++;
        int64_t pend = 0;
        for (uint32_t i = lo; i < ramp.next; i++) {
            struct conn *c = &x->conns[i];
            pend += !c->ready && c->state != CS_CLOSED;
        }
        ramp.pending = pend;
    }
    uint32_t ready = 0;
    for (uint32_t i = from; i < to; i++)
        ready += x->conns[i].ready;
    return ready;
}

/* ---- output ---- */

static int out_first;

void out_begin(struct params *p, const char *workload, int step)
{
    printf("{\"workload\":\"%s\",\"target\":\"%s\",\"label\":\"%s\",\"step\":%d", workload,
           p->target_name, p->label ? p->label : "", step);
    out_first = 0;
}

void out_num(const char *key, double v)
{
    if (v == (double)(int64_t)v && v < 9e15 && v > -9e15)
        printf(",\"%s\":%lld", key, (long long)v);
    else
        printf(",\"%s\":%.6g", key, v);
}

void out_str(const char *key, const char *v)
{
    printf(",\"%s\":\"%s\"", key, v);
}

void out_end(void)
{
    printf("}\n");
    fflush(stdout);
}

void out_hist(const char *prefix, const struct hist *h)
{
    char k[64];
    static const struct {
        const char *name;
        double q;
    } qs[] = {{"p50", 0.50}, {"p95", 0.95}, {"p99", 0.99}};
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        snprintf(k, sizeof k, "%s_%s_ms", prefix, qs[i].name);
        out_num(k, hist_quantile(h, qs[i].q) / 1000.0);
    }
    snprintf(k, sizeof k, "%s_max_ms", prefix);
    out_num(k, (double)h->max / 1000.0);
    snprintf(k, sizeof k, "%s_n", prefix);
    out_num(k, (double)h->n);
}

uint64_t sum_c(struct shm *m, int procs, int step, enum counter k)
{
    uint64_t s = 0;
    for (int i = 0; i < procs; i++)
        s += m->sh[i].c[step][k];
    return s;
}

void sum_hist(struct shm *m, int procs, int step, int second, struct hist *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < procs; i++)
        hist_merge(out, second ? &m->sh[i].lat2[step] : &m->sh[i].lat[step]);
}

double gen_cpu(struct shm *m, int procs, int a, int b)
{
    double s = 0;
    for (int i = 0; i < procs; i++)
        s += m->sh[i].cpu[b] - m->sh[i].cpu[a];
    return s;
}
