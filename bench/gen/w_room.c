/*
 * w_room.c - presence-bench: the room fan-out workloads.
 *
 * W4 fan-out: `rooms` rooms of room_size members; for each rate in
 *   `rates` (room-wide transitions per second per room) members publish in
 *   turn (round robin, so a member publishes at most rate/room_size times a
 *   second and presenced's 50 ms batching never merges two of one member)
 *   for step_s, then the run drains until every subscriber has every
 *   publisher's last id (or 5 s). A transition is a `patch` (presenced), a
 *   `meta` event (Socket.IO) or a PUBLISH (Redis, from one extra
 *   publisher connection per process) or a client event client-meta
 *   (Pusher: never echoed to its sender, so a transition has room_size - 1
 *   deliveries there, room_size in presenced's native protocol, which
 *   sends a member its own patch too). Every delivery is checked against
 *   the previous id of its publisher at that subscriber: a skipped id is a
 *   gap, an id not above the last one a duplicate; after the drain a
 *   publisher whose last id never arrived is `missing`.
 * W5 cursor room: one room of room_size, `rate` cursor updates per second
 *   from members in a fixed pseudo-random order (a member repeats only
 *   every room_size updates); latency to every recipient and to the last
 *   recipient of each update (shared memory across processes).
 * W8 slow consumer: W4's traffic in one room at `rate`; step 0 baseline,
 *   step 1 with `victims` members (4 KiB receive buffer) not reading for
 *   hold_s, step 2 after they resume. Server peak RSS per step, healthy
 *   members' latency, the slow members' close code (4008 expected).
 */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct room_state {
    uint32_t **last;   /* per local subscriber: last id per publisher position */
    struct conn *pubs; /* Redis: one publisher connection */
    uint64_t t0;       /* start of publishing */
    uint64_t done;     /* publishes scheduled so far (per room, global sequence) */
    double rate;       /* per room per second (w4/w8) or in all (w5) */
    int publishing;
};

static struct room_state rs;

static inline uint32_t room_of(uint32_t user)
{
    return user / (uint32_t)X->p->room_size;
}

/* W5: cursor ids up to this one are sent during the warm-up (id k leaves
 * (k - 1) / rate seconds after publishing starts) and are not measured. */
static uint64_t w5_first_id(const struct params *p)
{
    return (uint64_t)(p->warmup_s * p->rate);
}

static void on_delivery(struct net *n, struct conn *c, int kind, uint32_t room, uint32_t from,
                        uint64_t id, uint64_t t)
{
    (void)n;
    uint64_t now = now_us();
    uint32_t rsz = (uint32_t)X->p->room_size;
    if (id == 0 || from / rsz != room || c->publisher)
        return;
    if (kind == D_CURSOR) {
        if (from == c->user || id <= w5_first_id(X->p))
            return; /* the sender's own, or sent during the warm-up */
        CNT(X, C_DELIV)++;
        hist_add(&X->res->lat[X->step], now > t ? now - t : 0);
        if (id < MAX_MSGS) {
            uint64_t *slot = &X->shm->msg_last[id], old = __atomic_load_n(slot, __ATOMIC_RELAXED);
            while (old < now && !__atomic_compare_exchange_n(slot, &old, now, 1, __ATOMIC_RELAXED,
                                                             __ATOMIC_RELAXED))
                ;
        }
        return;
    }
    if (c->small_rcv)
        return; /* the slow consumer's stale backlog is not a healthy delivery */
    uint32_t *last = &rs.last[local_of(X, c->user)][from % rsz];
    if (id == (uint64_t)*last + 1) {
        CNT(X, C_DELIV)++;
    } else if (id > *last) {
        CNT(X, C_DELIV)++;
        CNT(X, C_GAP) += id - *last - 1;
    } else {
        CNT(X, C_DUP)++;
        return;
    }
    *last = (uint32_t)id;
    hist_add(&X->res->lat[X->step], now > t ? now - t : 0);
}

static struct app_ops room_ops;

static void setup_ops(void)
{
    room_ops = base_ops;
    room_ops.delivery = on_delivery;
    app = &room_ops;
}

/* Connects and joins room_size * rooms members (plus a Redis publisher). */
static void room_setup(struct ctx *x, uint32_t members)
{
    setup_ops();
    alloc_conns(x, members);
    rs.last = xcalloc(x->nlocal ? x->nlocal : 1, sizeof *rs.last);
    for (uint32_t k = 0; k < x->nlocal; k++)
        rs.last[k] = xcalloc((size_t)x->p->room_size, sizeof **rs.last);
    for (int v = 0; v < x->p->victims; v++)
        if ((uint32_t)v % (uint32_t)x->p->procs == (uint32_t)x->shard)
            x->conns[local_of(x, (uint32_t)v)].small_rcv = 1;
    connect_range(x, 0, x->nlocal, now_us() + 60000000u, NULL);
    join_all(x);
    wait_count(x, C_JOINED, x->nlocal, 60);
    if (x->p->target == T_REDIS) {
        rs.pubs = xcalloc(1, sizeof *rs.pubs);
        rs.pubs->fd = -1;
        rs.pubs->publisher = 1;
        rs.pubs->user = 0;
        net_connect(&x->net, rs.pubs, 2 + x->shard, "");
    }
}

static int pub_ready(struct ctx *x)
{
    (void)x;
    return rs.pubs->ready;
}

/* Publishes one transition of user u (its own connection, or Redis's). */
static void publish_one(struct ctx *x, uint32_t u)
{
    struct conn *c = rs.pubs ? rs.pubs : &x->conns[local_of(x, u)];
    if (!c->ready)
        return;
    uint64_t id = ++x->shm->user_u64[u];
    proto_publish(&x->net, c, room_of(u), u, id, now_us());
    CNT(x, C_SENT)++;
    if (x->p->target == T_PUSHER) /* a client event is not echoed: the sender has its own */
        rs.last[local_of(x, u)][u % (uint32_t)x->p->room_size] = (uint32_t)id;
}

static void fanout_tick(struct ctx *x, uint64_t now)
{
    if (!rs.publishing)
        return;
    uint32_t rsz = (uint32_t)x->p->room_size, P = (uint32_t)x->p->procs;
    uint64_t due = (uint64_t)((double)(now - rs.t0) * rs.rate / 1e6);
    if (due > rs.done + (uint64_t)rs.rate)
        rs.done = due - (uint64_t)rs.rate; /* never bank more than a second */
    for (; rs.done < due; rs.done++) {
        uint32_t pos = (uint32_t)(rs.done % rsz);
        for (uint32_t r = 0; r < (uint32_t)x->p->rooms; r++) {
            uint32_t u = r * rsz + pos;
            if (u % P == (uint32_t)x->shard)
                publish_one(x, u);
        }
    }
}

/* Every subscriber has every publisher's last id. Sets C_MISSING. */
static uint64_t missing_now(struct ctx *x)
{
    uint64_t miss = 0;
    uint32_t rsz = (uint32_t)x->p->room_size;
    for (uint32_t k = 0; k < x->nlocal; k++) {
        struct conn *c = &x->conns[k];
        if (c->small_rcv || c->state != CS_OPEN)
            continue;
        uint32_t base = room_of(c->user) * rsz;
        for (uint32_t pos = 0; pos < rsz; pos++) {
            uint64_t sent = __atomic_load_n(&x->shm->user_u64[base + pos], __ATOMIC_RELAXED);
            if (sent > rs.last[k][pos])
                miss += sent - rs.last[k][pos];
        }
    }
    return miss;
}

static uint64_t next_check;

static int drained(struct ctx *x)
{
    uint64_t now = now_us();
    if (now < next_check)
        return 0;
    next_check = now + 50000;
    return missing_now(x) == 0;
}

/* Publishes at rate for seconds, arrives at phase `published` (so that no
 * process still publishes while another checks), then drains (up to 5 s). */
static void publish_step(struct ctx *x, double rate, double seconds, int published)
{
    rs.rate = rate;
    rs.done = 0;
    rs.t0 = now_us();
    rs.publishing = 1;
    x->tick = fanout_tick;
    run_until(x, rs.t0 + (uint64_t)(seconds * 1e6), NULL);
    rs.publishing = 0;
    phase(x, published);
    next_check = 0;
    run_until(x, now_us() + 5000000u, drained);
    CNT(x, C_MISSING) += missing_now(x);
}

static void w4_child(struct ctx *x)
{
    room_setup(x, (uint32_t)(x->p->rooms * x->p->room_size));
    if (rs.pubs)
        run_until(x, now_us() + 5000000u, pub_ready);
    phase(x, 1);
    for (int i = 0; i < x->p->nrates; i++) {
        x->step = i;
        phase(x, 2 + 3 * i);
        publish_step(x, x->p->rates[i], x->p->step_s, 3 + 3 * i);
        phase(x, 4 + 3 * i);
    }
}

/* Fields common to a fan-out step between phases a and b. */
static void out_fanout(struct params *p, struct shm *m, int step, int a, int b)
{
    double secs = (double)(m->at[b].t_us - m->at[a].t_us) / 1e6;
    double cpu = m->at[b].cpu_s - m->at[a].cpu_s;
    uint64_t d = sum_c(m, p->procs, step, C_DELIV);
    struct hist h;
    sum_hist(m, p->procs, step, 0, &h);
    out_num("published", (double)sum_c(m, p->procs, step, C_SENT));
    out_num("deliveries", (double)d);
    out_num("seconds", secs);
    out_num("deliveries_per_s", (double)d / secs);
    out_num("server_cpu_s", cpu);
    out_num("deliveries_per_cpu_s", cpu > 0 ? (double)d / cpu : 0);
    out_num("gen_cpu_s", gen_cpu(m, p->procs, a, b));
    out_num("server_busiest_thread_cpu_s", busiest_thread_cpu_s(&m->at[a], &m->at[b]));
    out_num("server_threads", m->at[b].nthr);
    out_num("gaps", (double)sum_c(m, p->procs, step, C_GAP));
    out_num("dups", (double)sum_c(m, p->procs, step, C_DUP));
    out_num("missing", (double)sum_c(m, p->procs, step, C_MISSING));
    out_num("server_peak_rss_mb", (double)m->peak_rss_kb[b] / 1024.0);
    out_num("tcp_peak_mb", (double)m->peak_tcp_kb[b] / 1024.0);
    out_hist("lat", &h);
    out_errors(p, m, step);
}

static void w4_report(struct params *p, struct shm *m)
{
    for (int i = 0; i < p->nrates; i++) {
        out_begin(p, "w4", i);
        out_num("rooms", p->rooms);
        out_num("room_size", p->room_size);
        out_num("rate", p->rates[i]);
        out_fanout(p, m, i, 2 + 3 * i, 4 + 3 * i);
        out_end();
    }
}

/* ---- W5 ---- */

static uint64_t w5_seq;

static void cursor_tick(struct ctx *x, uint64_t now)
{
    if (!rs.publishing)
        return;
    uint32_t rsz = (uint32_t)x->p->room_size, P = (uint32_t)x->p->procs;
    uint64_t due = (uint64_t)((double)(now - rs.t0) * rs.rate / 1e6);
    for (; w5_seq < due && w5_seq + 1 < MAX_MSGS; w5_seq++) {
        /* every member in turn, or `senders` fixed members (7919 % rsz is
         * prime to rsz for the sizes used, so they are distinct) */
        uint64_t k = x->p->senders > 0 ? w5_seq % (uint64_t)x->p->senders : w5_seq;
        uint32_t u = (uint32_t)((k * 7919u) % rsz);
        if (u % P != (uint32_t)x->shard)
            continue;
        struct conn *c = &x->conns[local_of(x, u)];
        if (!c->ready)
            continue;
        uint64_t id = w5_seq + 1, t = now_us();
        x->shm->msg_t[id] = t;
        proto_cursor(&x->net, c, 0, id, t);
        CNT(x, C_SENT)++;
    }
}

static void w5_child(struct ctx *x)
{
    room_setup(x, (uint32_t)x->p->room_size);
    phase(x, 1);
    rs.rate = x->p->rate;
    rs.t0 = now_us();
    rs.publishing = 1;
    x->tick = cursor_tick;
    /* Warm-up (a room turning hot, say): published, not measured. */
    run_until(x, rs.t0 + (uint64_t)(x->p->warmup_s * 1e6), NULL);
    phase(x, 2);
    run_until(x, rs.t0 + (uint64_t)((x->p->warmup_s + x->p->step_s) * 1e6), NULL);
    rs.publishing = 0;
    run_until(x, now_us() + 500000u, NULL);
    phase(x, 3);
}

static void w5_report(struct params *p, struct shm *m)
{
    struct hist h, last;
    sum_hist(m, p->procs, 0, 0, &h);
    memset(&last, 0, sizeof last);
    uint64_t sent = 0;
    for (uint64_t id = w5_first_id(p) + 1; id < MAX_MSGS; id++) {
        if (!m->msg_t[id])
            continue;
        sent++;
        if (m->msg_last[id])
            hist_add(&last, m->msg_last[id] - m->msg_t[id]);
    }
    double secs = (double)(m->at[3].t_us - m->at[2].t_us) / 1e6;
    double cpu = m->at[3].cpu_s - m->at[2].cpu_s;
    uint64_t d = sum_c(m, p->procs, 0, C_DELIV);
    out_begin(p, "w5", 0);
    out_num("room_size", p->room_size);
    out_num("rate", p->rate);
    out_num("senders", p->senders);
    out_num("published", (double)sent);
    out_num("deliveries", (double)d);
    out_num("expected", (double)sent * (p->room_size - 1));
    out_num("lost", (double)sent * (p->room_size - 1) - (double)d);
    out_num("server_cpu_pct", 100.0 * cpu / secs);
    out_num("server_cpu_s", cpu);
    out_num("seconds", secs);
    out_num("warmup_s", p->warmup_s);
    out_num("gen_cpu_s", gen_cpu(m, p->procs, 2, 3));
    /* presenced's own count: writes per member per second (W5 stress goal:
     * at most one per 33 ms tick, ~30). */
    if (m->at[2].writev >= 0 && m->at[3].writev >= m->at[2].writev)
        out_num("server_writes_per_member_s",
                (double)(m->at[3].writev - m->at[2].writev) / p->room_size / secs);
    out_hist("lat", &h);
    out_hist("last", &last);
    out_errors(p, m, 0);
    out_end();
}

/* ---- W8 slow consumer ---- */

static void pause_victims(struct ctx *x, int paused)
{
    for (uint32_t k = 0; k < x->nlocal; k++)
        if (x->conns[k].small_rcv)
            net_pause(&x->net, &x->conns[k], paused);
}

static void w8_child(struct ctx *x)
{
    room_setup(x, (uint32_t)x->p->room_size);
    phase(x, 1);
    rs.rate = x->p->rate;
    rs.t0 = now_us();
    rs.done = 0;
    rs.publishing = 1;
    x->tick = fanout_tick;
    x->step = 0;
    run_until(x, now_us() + (uint64_t)(x->p->step_s * 1e6), NULL);
    phase(x, 2);
    x->step = 1;
    pause_victims(x, 1);
    run_until(x, now_us() + (uint64_t)(x->p->hold_s * 1e6), NULL);
    phase(x, 3);
    x->step = 2;
    pause_victims(x, 0);
    run_until(x, now_us() + (uint64_t)(x->p->step_s * 1e6), NULL);
    rs.publishing = 0;
    phase(x, 4);
    next_check = 0;
    run_until(x, now_us() + 5000000u, drained);
    CNT(x, C_MISSING) += missing_now(x);
    phase(x, 5);
}

static void w8_report(struct params *p, struct shm *m)
{
    static const char *names[] = {"baseline", "stalled", "after"};
    for (int s = 0; s < 3; s++) {
        out_begin(p, "w8", s);
        out_str("phase", names[s]);
        out_num("room_size", p->room_size);
        out_num("rate", p->rate);
        out_num("slow", p->victims);
        out_num("server_rss_start_mb", (double)m->at[1].rss_kb / 1024.0);
        out_num("slow_closed", (double)sum_c(m, p->procs, s, C_C4008));
        out_fanout(p, m, s, s + 1, s == 2 ? 5 : s + 2);
        out_end();
    }
}

const struct workload w4 = {"w4", 1, 3, w4_child, w4_report};
const struct workload w5 = {"w5", 3, 0, w5_child, w5_report};
const struct workload w8 = {"w8", 5, 0, w8_child, w8_report};
