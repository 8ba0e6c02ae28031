/*
 * w_churn.c - presence-bench: churn, expiry and the reconnect storm.
 *
 * W6: `rooms` rooms, each with one watcher (user r in room r); `churners`
 *   users that join a random room and leave it again (`rate` joins+leaves
 *   per second in all, so each churner is in a room for churners/rate*2
 *   seconds); `victims` users, each in room v % rooms, heartbeating every
 *   hb_ms like everyone else. Step 0 (warmup_s + step_s): churn; the
 *   watcher of a room times each join and leave of a churner sent after the
 *   warm-up, from the moment it was sent (shared memory); the leaves that
 *   empty the rooms after the churn are not timed. Step 1: the victims stop heartbeating with their
 *   sockets left open (a silent death the server can only see through its
 *   TTL); the watchers time each victim's leave from its last heartbeat:
 *   the offline detection delay (goal: <= TTL + 1 s).
 * W8 storm (w8s): `conns` users in rooms of room_size, all dropped at once
 *   (close, no close frame) and reconnected evenly spread over jitter_ms
 *   from new source addresses, resuming their sessions (?resume=, native)
 *   and joining their room again; time from the drop until the last
 *   member is back in its room, per-member resync time.
 */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* user layout: watchers [0, rooms), churners, victims, then probes (all
 * in room `rooms`, which has no victims) */
static uint32_t first_churner, first_victim, end_users, end_probes;

/* Expiry phase windows for the probes' cursor latency (step 1): lat[2] is
 * the baseline (from 0.5 s after the victims fall silent until 1.5 s
 * before their TTL), lat[3] the expiry burst (TTL - 1 s .. TTL + 1.5 s:
 * the victims' last heartbeats are spread over the second before they fall
 * silent, and the server's expiry check adds up to ~0.8 s). */
static uint64_t quiet_t0, probe_t0, probe_done;

/* The window a moment of the expiry phase belongs to: 2 = baseline (0.5 s
 * after the victims fall silent until TTL - 1.5 s), 3 = burst (TTL - 1 s to
 * TTL + 1.5 s), -1 = neither. */
static int window_of(uint64_t now, uint64_t ttl)
{
    if (now >= quiet_t0 + 500000u && now + 1500000u < quiet_t0 + ttl)
        return 2;
    if (now + 1000000u >= quiet_t0 + ttl && now <= quiet_t0 + ttl + 1500000u)
        return 3;
    return -1;
}
static uint32_t probe_pos;

static void on_probe(struct net *n, struct conn *c, int kind, uint32_t room, uint32_t from,
                     uint64_t id, uint64_t t)
{
    (void)n, (void)id;
    if (kind != D_CURSOR || X->step != 1 || !quiet_t0 || from == c->user ||
        room != (uint32_t)X->p->rooms || c->user < end_users)
        return;
    uint64_t now = now_us();
    int w = window_of(now, (uint64_t)X->p->ttl_ms * 1000u);
    if (w > 0)
        hist_add(&X->res->lat[w], now > t ? now - t : 0);
}

/* The generator's own loop gaps in the same windows (lat2[2], lat2[3]):
 * a gap is time this process could not read or send, so a probe latency
 * far above the largest gap is the server's. */
static uint64_t last_tick;

static void loop_gap(struct ctx *x, uint64_t now)
{
    if (last_tick && quiet_t0) {
        int w = window_of(now, (uint64_t)x->p->ttl_ms * 1000u);
        if (w > 0)
            hist_add(&x->res->lat2[w], now - last_tick);
    }
    last_tick = now;
}

static void probe_tick(struct ctx *x, uint64_t now)
{
    loop_gap(x, now);
    uint32_t P = (uint32_t)x->p->procs, np = end_probes - end_users;
    if (!np || x->p->probe_rate <= 0)
        return;
    uint64_t due = (uint64_t)((double)(now - probe_t0) * x->p->probe_rate / 1e6);
    for (; probe_done < due; probe_done++) {
        uint32_t u = end_users + probe_pos;
        probe_pos = (probe_pos + 1) % np;
        if (u % P != (uint32_t)x->shard)
            continue;
        struct conn *c = &x->conns[local_of(x, u)];
        if (c->ready)
            proto_cursor(&x->net, c, (uint32_t)x->p->rooms, probe_done + 1, now_us());
    }
}

/* shm user slots: 2*u = join (churner) or last heartbeat (victim); 2*u+1 = leave.
 * A churner's op sent as UNTIMED is counted when seen but not timed: the
 * ops of the warm-up (every churner's first join loads its user's settings)
 * and the leaves that empty the rooms at the end of the churn (a burst of
 * ~1,000 at once, not churn at the offered rate). */
#define UNTIMED 1u
static uint64_t *slot(uint32_t u, int k)
{
    return &X->shm->user_u64[2 * (size_t)u + (size_t)k];
}

static void on_member(struct net *n, struct conn *c, int joined, uint32_t room, uint32_t user)
{
    (void)n, (void)room;
    uint64_t now = now_us();
    if (c->user >= first_churner)
        return; /* only watchers time events */
    if (user >= first_churner && user < first_victim && X->step == 0) {
        uint64_t t = __atomic_load_n(slot(user, joined ? 0 : 1), __ATOMIC_ACQUIRE);
        if (!t)
            return;
        CNT(X, joined ? C_MJOIN : C_MLEAVE)++;
        if (t == UNTIMED)
            return;
        hist_add(joined ? &X->res->lat[X->step] : &X->res->lat2[X->step], now > t ? now - t : 0);
    } else if (user >= first_victim && user < end_users && !joined && X->step == 1) {
        uint64_t t = __atomic_load_n(slot(user, 0), __ATOMIC_ACQUIRE);
        CNT(X, C_VLEAVE)++;
        hist_add(&X->res->lat[1], now > t ? now - t : 0);
    }
}

static struct app_ops churn_ops;
static uint8_t *in_room; /* per local churner: 0 = out, else room + 1 */
static uint32_t *cur_room;
static uint64_t ch_t0, ch_timed_from, ch_done;
static uint32_t ch_pos;

static void churn_tick(struct ctx *x, uint64_t now)
{
    uint32_t P = (uint32_t)x->p->procs, nch = first_victim - first_churner;
    uint64_t due = (uint64_t)((double)(now - ch_t0) * x->p->rate / 1e6);
    for (; ch_done < due; ch_done++) {
        uint32_t u = first_churner + ch_pos;
        ch_pos = (ch_pos + 1) % nch;
        if (u % P != (uint32_t)x->shard)
            continue;
        uint32_t k = local_of(x, u);
        struct conn *c = &x->conns[k];
        if (!c->ready)
            continue;
        uint64_t sent = now_us();
        if (sent < ch_timed_from)
            sent = UNTIMED;
        if (!in_room[k]) {
            cur_room[k] = (uint32_t)random() % (uint32_t)x->p->rooms;
            __atomic_store_n(slot(u, 0), sent, __ATOMIC_RELEASE);
            proto_join(&x->net, c, cur_room[k]);
            in_room[k] = 1;
        } else {
            __atomic_store_n(slot(u, 1), sent, __ATOMIC_RELEASE);
            proto_leave_room(&x->net, c, cur_room[k]);
            in_room[k] = 0;
        }
        CNT(x, C_SENT)++;
    }
}

static uint32_t want_leaves;

static int victims_gone(struct ctx *x)
{
    return CNT(x, C_VLEAVE) >= want_leaves;
}

/* Joins watchers to their room and victims to theirs. */
static void w6_join(struct ctx *x)
{
    uint32_t joins = 0;
    for (uint32_t k = 0; k < x->nlocal; k++) {
        struct conn *c = &x->conns[k];
        if (!c->ready)
            continue;
        if (c->user < first_churner) {
            proto_join(&x->net, c, c->user);
            joins++;
        } else if (c->user >= end_users) {
            proto_join(&x->net, c, (uint32_t)x->p->rooms);
            joins++;
        } else if (c->user >= first_victim) {
            proto_join(&x->net, c, (c->user - first_victim) % (uint32_t)x->p->rooms);
            joins++;
        }
    }
    wait_count(x, C_JOINED, joins, 60);
}

static void w6_child(struct ctx *x)
{
    struct params *p = x->p;
    first_churner = (uint32_t)p->rooms;
    first_victim = first_churner + (uint32_t)p->churners;
    end_users = first_victim + (uint32_t)p->victims;
    end_probes = end_users + (uint32_t)(p->probes > 0 ? p->probes : 0);
    churn_ops = base_ops;
    churn_ops.member = on_member;
    churn_ops.delivery = on_probe;
    app = &churn_ops;
    alloc_conns(x, end_probes);
    in_room = xcalloc(x->nlocal, 1);
    cur_room = xcalloc(x->nlocal, sizeof *cur_room);
    x->hb_on = p->hb_ms > 0;
    connect_range(x, 0, x->nlocal, now_us() + 60000000u, NULL);
    w6_join(x);
    phase(x, 1);
    x->step = 0;
    ch_t0 = now_us();
    ch_timed_from = ch_t0 + (uint64_t)(p->warmup_s * 1e6);
    x->tick = churn_tick;
    run_until(x, ch_t0 + (uint64_t)((p->warmup_s + p->step_s) * 1e6), NULL);
    x->tick = NULL;
    for (uint32_t k = 0; k < x->nlocal; k++) {
        if (in_room[k] && x->conns[k].ready) {
            __atomic_store_n(slot(x->conns[k].user, 1), UNTIMED, __ATOMIC_RELEASE);
            proto_leave_room(&x->net, &x->conns[k], cur_room[k]);
        }
    }
    run_until(x, now_us() + 1000000u, NULL);
    phase(x, 2);
    x->step = 1;
    uint64_t now = now_us();
    for (uint32_t k = 0; k < x->nlocal; k++) {
        struct conn *c = &x->conns[k];
        if (c->user >= first_victim && c->user < end_users) {
            c->quiet = 1;
            __atomic_store_n(slot(c->user, 0), c->t_mark ? c->t_mark : now, __ATOMIC_RELEASE);
        }
    }
    phase(x, 3); /* every victim's last heartbeat is recorded */
    quiet_t0 = now;
    probe_t0 = now_us();
    probe_done = 0;
    x->tick = probe_tick;
    want_leaves = 0;
    for (uint32_t r = (uint32_t)x->shard; r < (uint32_t)p->rooms; r += (uint32_t)p->procs)
        for (uint32_t v = r; v < (uint32_t)p->victims; v += (uint32_t)p->rooms)
            want_leaves++;
    run_until(x, now_us() + (uint64_t)p->ttl_ms * 1000u + 15000000u, victims_gone);
    if (p->probes > 0) /* the probes' burst window ends at TTL + 1.5 s */
        run_until(x, quiet_t0 + (uint64_t)p->ttl_ms * 1000u + 1500000u, NULL);
    x->tick = NULL;
    phase(x, 4);
}

static void w6_report(struct params *p, struct shm *m)
{
    struct hist j, l, off;
    sum_hist(m, p->procs, 0, 0, &j);
    sum_hist(m, p->procs, 0, 1, &l);
    sum_hist(m, p->procs, 1, 0, &off);
    double secs = p->warmup_s + p->step_s;
    out_begin(p, "w6", 0);
    out_str("phase", "churn");
    out_num("rooms", p->rooms);
    out_num("churners", p->churners);
    out_num("offered_ops_per_s", p->rate);
    out_num("warmup_s", p->warmup_s);
    out_num("ops", (double)sum_c(m, p->procs, 0, C_SENT));
    out_num("ops_per_s", (double)sum_c(m, p->procs, 0, C_SENT) / secs);
    out_num("server_cpu_s", m->at[2].cpu_s - m->at[1].cpu_s);
    out_num("gen_cpu_s", gen_cpu(m, p->procs, 1, 2));
    out_num("joins_seen", (double)sum_c(m, p->procs, 0, C_MJOIN));
    out_num("leaves_seen", (double)sum_c(m, p->procs, 0, C_MLEAVE));
    out_hist("join", &j);
    out_hist("leave", &l);
    out_errors(p, m, 0);
    out_end();
    double ttl_ms = p->ttl_ms;
    out_begin(p, "w6", 1);
    out_str("phase", "expiry");
    out_num("victims", p->victims);
    out_num("ttl_ms", ttl_ms);
    out_num("detected", (double)sum_c(m, p->procs, 1, C_VLEAVE));
    out_num("expired_closes", (double)sum_c(m, p->procs, 1, C_EXPIRED));
    out_num("server_cpu_s", m->at[4].cpu_s - m->at[3].cpu_s);
    out_num("detect_over_ttl_max_ms", (double)off.max / 1000.0 - ttl_ms);
    out_hist("offline", &off);
    if (p->probes > 0) {
        struct hist base, burst;
        sum_hist(m, p->procs, 2, 0, &base);
        sum_hist(m, p->procs, 3, 0, &burst);
        out_num("probes", p->probes);
        out_num("probe_rate", p->probe_rate);
        out_hist("probe_base", &base);
        out_hist("probe_burst", &burst);
        sum_hist(m, p->procs, 2, 1, &base);
        sum_hist(m, p->procs, 3, 1, &burst);
        out_hist("gen_gap_base", &base);
        out_hist("gen_gap_burst", &burst);
    }
    out_errors(p, m, 1);
    out_end();
}

/* ---- W8 storm ---- */

static uint64_t storm_t0;
static uint32_t storm_next;

static void resume_query(struct ctx *x, struct conn *c, char *q, size_t cap)
{
    (void)x;
    if (c->sid[0] && x->p->target == T_NATIVE)
        snprintf(q, cap, "resume=%s", c->sid);
}

static void storm_ready(struct net *n, struct conn *c)
{
    CNT(X, C_READY)++;
    if (c->resumed)
        CNT(X, C_RESUMED)++;
    proto_join(n, c, c->user / (uint32_t)X->p->room_size);
}

static void storm_joined(struct net *n, struct conn *c, uint32_t room)
{
    (void)n, (void)c, (void)room;
    CNT(X, C_JOINED)++;
    if (X->step == 1)
        hist_add(&X->res->lat[1], now_us() - storm_t0);
}

/* A reconnect that failed (refused while the server still counted the
 * dropped sockets, say) is retried 200 ms later, like a real client. */
static void storm_closed(struct net *n, struct conn *c, int code)
{
    (void)n, (void)code;
    if (X->step != 1 || c->ready) {
        base_ops.closed(n, c, code);
        return;
    }
    CNT(X, C_LATE)++;
    c->t_mark = now_us() + 200000u;
}

static void storm_retry(struct ctx *x, uint64_t now)
{
    int src = 2 + x->shard + 8 * x->gen;
    for (uint32_t k = 0; k < storm_next; k++) {
        struct conn *c = &x->conns[k];
        if (c->state == CS_CLOSED && c->t_mark && c->t_mark <= now) {
            c->t_mark = 0;
            char q[128] = "";
            resume_query(x, c, q, sizeof q);
            net_connect(&x->net, c, src, q);
        }
    }
}

static uint64_t next_retry_scan;

static void storm_tick(struct ctx *x, uint64_t now)
{
    if (now >= next_retry_scan) {
        next_retry_scan = now + 50000;
        storm_retry(x, now);
    }
    uint64_t span = (uint64_t)x->p->jitter_ms * 1000u;
    int src = 2 + x->shard + 8 * x->gen;
    while (storm_next < x->nlocal &&
           storm_t0 + (span * storm_next) / (x->nlocal ? x->nlocal : 1) <= now) {
        struct conn *c = &x->conns[storm_next++];
        char q[128] = "";
        resume_query(x, c, q, sizeof q);
        net_connect(&x->net, c, src, q);
    }
}

static void w8s_child(struct ctx *x)
{
    static struct app_ops ops;
    ops = base_ops;
    app = &ops;
    alloc_conns(x, (uint32_t)x->p->conns);
    connect_range(x, 0, x->nlocal, now_us() + 60000000u, NULL);
    join_all(x);
    wait_count(x, C_JOINED, x->nlocal, 60);
    ops.ready = storm_ready;
    ops.joined = storm_joined;
    ops.closed = storm_closed;
    for (uint32_t k = 0; k < x->nlocal; k++)
        x->conns[k].t_mark = 0;
    phase(x, 1);
    x->step = 1;
    storm_t0 = now_us();
    for (uint32_t k = 0; k < x->nlocal; k++)
        net_drop(&x->net, &x->conns[k]);
    x->gen = 1;
    x->tick = storm_tick;
    wait_count(x, C_JOINED, x->res->c[0][C_JOINED] + x->nlocal, 60);
    x->tick = NULL;
    phase(x, 2);
}

static void w8s_report(struct params *p, struct shm *m)
{
    struct hist h;
    sum_hist(m, p->procs, 1, 0, &h);
    out_begin(p, "w8", 3);
    out_str("phase", "storm");
    out_num("conns", p->conns);
    out_num("jitter_ms", p->jitter_ms);
    out_num("rejoined", (double)sum_c(m, p->procs, 1, C_JOINED));
    out_num("resumed", (double)sum_c(m, p->procs, 1, C_RESUMED));
    out_num("retries", (double)sum_c(m, p->procs, 1, C_LATE));
    out_num("resync_s", (double)(m->at[2].t_us - m->at[1].t_us) / 1e6);
    out_num("server_cpu_s", m->at[2].cpu_s - m->at[1].cpu_s);
    out_hist("resync", &h);
    out_errors(p, m, 1);
    out_end();
}

const struct workload w6 = {"w6", 4, 0, w6_child, w6_report};
const struct workload w8s = {"w8s", 2, 0, w8s_child, w8s_report};
