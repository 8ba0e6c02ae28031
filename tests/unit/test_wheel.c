/* SPDX-License-Identifier: MIT */
/*
 * test_wheel.c - the timing wheel against a fake clock.
 *
 * The wheel never reads a clock, so every test drives it with chosen
 * values of now. Timers are embedded in struct tt, which records how often
 * and when they fired; callbacks that act on other timers find them
 * through the test's context pointer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "util.h"
#include "wheel.h"

#define REV ((uint64_t)WHEEL_TICK_MS * WHEEL_SLOTS) /* one revolution in ms */
#define T0  1000000u                                /* the fake clock's start */

struct tt;
typedef void tt_action(struct tt *x, uint64_t now);

static unsigned long fire_seq; /* firings so far, across all timers */
static unsigned long run_id;   /* the run in progress, for run_counted() */

/* A test timer: counts its firings and may run an action when it fires. */
struct tt {
    struct wheel_timer timer;
    unsigned fired;     /* number of callbacks */
    uint64_t fired_now; /* now of the last callback */
    bool linked_in_cb;  /* wheel_is_linked() as seen inside the callback */
    bool deleted;       /* deleted by a peer's callback before firing */
    tt_action *action;  /* optional extra behaviour */
    struct wheel *w;    /* for actions that re-add */
    struct tt *peers;   /* for actions on other timers */
    size_t npeers;
    uint64_t period;         /* for re-arming actions */
    unsigned long order;     /* fire_seq at the last callback */
    unsigned long added;     /* run_id when a callback last added it, else 0 */
    unsigned long fired_run; /* run_id at the last callback */
};

static void tt_cb(struct wheel_timer *t, uint64_t now)
{
    struct tt *x = container_of(t, struct tt, timer);

    /* A timer fires only when due, and is unlinked before its callback. */
    assert_true(now >= t->expire_at);
    assert_false(x->deleted);
    /* Once per run at most, and never in the run whose callback added it. */
    assert_true(run_id == 0 || x->fired_run != run_id);
    assert_true(run_id == 0 || x->added != run_id);
    x->fired_run = run_id;
    x->order = ++fire_seq;
    x->fired++;
    x->fired_now = now;
    x->linked_in_cb = wheel_is_linked(t);
    if (x->action)
        x->action(x, now);
}

static void tt_init(struct tt *x, struct wheel *w)
{
    *x = (struct tt){.w = w};
    wheel_timer_init(&x->timer, tt_cb);
}

/* A budgeted run that tt_cb can tell apart from the others. */
static size_t run_counted(struct wheel *w, uint64_t now, size_t max)
{
    run_id++;
    return wheel_run_budget(w, now, max);
}

static int reset_counters(void **state)
{
    (void)state;
    fire_seq = 0;
    run_id = 0;
    return 0;
}

/* ---- basic behaviour ---- */

static void test_zeroed_timer(void **state)
{
    struct wheel *w = wheel_new(T0);
    struct tt x = {0};

    (void)state;
    assert_false(wheel_is_linked(&x.timer));
    wheel_del(&x.timer); /* no-op on a zero-filled timer */
    x.timer.cb = tt_cb;
    wheel_add(w, &x.timer, T0 + 50);
    assert_true(wheel_is_linked(&x.timer));
    assert_int_equal(wheel_run(w, T0 + 50), 1);
    assert_false(wheel_is_linked(&x.timer));
    wheel_free(w);
}

static void test_empty_wheel(void **state)
{
    struct wheel *w = wheel_new(T0);

    (void)state;
    assert_true(wheel_next(w) == UINT64_MAX);
    assert_int_equal(wheel_count(w), 0);
    assert_int_equal(wheel_run(w, T0 + 5 * REV), 0);
    assert_true(wheel_next(w) == UINT64_MAX);
    wheel_free(w);
    wheel_free(NULL);
}

static void test_fires_at_expiry_never_before(void **state)
{
    static const uint64_t offsets[] = {0, 1, 9, 10, 11, 15, 19, 20, 999, 1005, REV - 1, REV};
    struct wheel *w = wheel_new(T0);
    struct tt x;

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(offsets); i++) {
        uint64_t at = T0 + 3 + offsets[i]; /* not tick aligned */

        tt_init(&x, w);
        wheel_run(w, T0 + 3); /* the clock restarts from T0 + 3 each round */
        wheel_add(w, &x.timer, at);
        assert_true(wheel_next(w) <= at);
        if (at > T0 + 3) {
            assert_int_equal(wheel_run(w, at - 1), 0);
            assert_int_equal(x.fired, 0);
            assert_true(wheel_next(w) <= at);
        }
        assert_int_equal(wheel_run(w, at), 1);
        assert_int_equal(x.fired, 1);
        assert_true(x.fired_now == at);
        assert_false(x.linked_in_cb);
        assert_int_equal(wheel_run(w, at + REV), 0); /* exactly once */
        wheel_free(w);
        w = wheel_new(T0);
    }
    wheel_free(w);
}

/* Firing may be late only because nobody ran the wheel in between. */
static void test_fires_at_first_run_after_expiry(void **state)
{
    struct wheel *w = wheel_new(T0);
    struct tt x;

    (void)state;
    tt_init(&x, w);
    wheel_add(w, &x.timer, T0 + 123);
    assert_int_equal(wheel_run(w, T0 + 120), 0);
    assert_int_equal(wheel_run(w, T0 + 777), 1);
    assert_true(x.fired_now == T0 + 777);
    wheel_free(w);
}

static void test_next_is_exact_for_simple_cases(void **state)
{
    struct wheel *w = wheel_new(T0);
    struct tt a, b;

    (void)state;
    tt_init(&a, w);
    tt_init(&b, w);
    wheel_add(w, &a.timer, T0 + 5000);
    assert_true(wheel_next(w) == T0 + 5000);
    wheel_add(w, &b.timer, T0 + 47);
    assert_true(wheel_next(w) == T0 + 47);
    assert_int_equal(wheel_run(w, T0 + 47), 1);
    assert_true(wheel_next(w) == T0 + 5000); /* recomputed after passing it */
    wheel_del(&a.timer);
    assert_true(wheel_next(w) == UINT64_MAX);
    /* Beyond one revolution. */
    wheel_add(w, &a.timer, T0 + 3 * REV + 1);
    assert_true(wheel_next(w) == T0 + 3 * REV + 1);
    wheel_add(w, &b.timer, T0 + 100);
    assert_int_equal(wheel_run(w, T0 + 100), 1);
    assert_true(wheel_next(w) == T0 + 3 * REV + 1);
    wheel_free(w);
}

/* ---- one slot, several revolutions ---- */

static void test_same_slot_different_revolutions(void **state)
{
    enum { N = 6 };
    struct wheel *w = wheel_new(T0);
    struct tt x[N];

    (void)state;
    /* Same slot (offsets differ by whole revolutions), added out of order. */
    for (int i = N - 1; i >= 0; i--) {
        tt_init(&x[i], w);
        wheel_add(w, &x[i].timer, T0 + 250 + (uint64_t)i * REV);
    }
    assert_int_equal(wheel_count(w), N);
    for (int i = 0; i < N; i++) {
        uint64_t at = T0 + 250 + (uint64_t)i * REV;

        assert_true(wheel_next(w) == at);
        /* Step through the revolution tick by tick around the slot. */
        assert_int_equal(wheel_run(w, at - REV / 2), 0);
        assert_int_equal(wheel_run(w, at - 1), 0);
        assert_int_equal(wheel_run(w, at), 1);
        for (int j = 0; j < N; j++)
            assert_int_equal(x[j].fired, j <= i ? 1 : 0);
        assert_int_equal(wheel_count(w), N - 1 - i);
    }
    wheel_free(w);
}

static void test_many_timers_one_slot(void **state)
{
    enum { N = 1000 };
    struct wheel *w = wheel_new(T0);
    struct tt *x = calloc(N, sizeof(*x));
    size_t early = 0, rev0 = 0;

    (void)state;
    /* All in one slot: spread inside one tick and over three revolutions. */
    for (int i = 0; i < N; i++) {
        uint64_t at = T0 + 300 + (uint64_t)(i % 10) + (uint64_t)(i % 3) * REV;

        tt_init(&x[i], w);
        wheel_add(w, &x[i].timer, at);
        early += at <= T0 + 304;
        rev0 += at <= T0 + 309;
    }
    assert_int_equal(wheel_run(w, T0 + 304), early);
    assert_int_equal(wheel_run(w, T0 + 309), rev0 - early);
    for (int i = 0; i < N; i++)
        assert_int_equal(x[i].fired, i % 3 == 0 ? 1 : 0);
    assert_int_equal(wheel_count(w), N - rev0);
    assert_int_equal(wheel_run(w, T0 + 309 + REV), (N - rev0) / 2);
    assert_int_equal(wheel_run(w, T0 + 309 + 2 * REV), N - rev0 - (N - rev0) / 2);
    for (int i = 0; i < N; i++)
        assert_int_equal(x[i].fired, 1);
    assert_int_equal(wheel_count(w), 0);
    wheel_free(w);
    free(x);
}

/* ---- refresh ---- */

static void test_refresh_moves_without_firing(void **state)
{
    struct wheel *w = wheel_new(T0);
    struct tt x;

    (void)state;
    tt_init(&x, w);
    /* A heartbeat pushed later over and over never fires. */
    for (uint64_t now = T0; now < T0 + 2 * REV; now += 700) {
        assert_int_equal(wheel_run(w, now), 0);
        wheel_add(w, &x.timer, now + 1000);
        assert_int_equal(wheel_count(w), 1);
    }
    assert_int_equal(x.fired, 0);
    /* Moved earlier: fires at the new time, not again at the old one. */
    wheel_add(w, &x.timer, T0 + 2 * REV + 5000);
    wheel_add(w, &x.timer, T0 + 2 * REV + 100);
    assert_true(wheel_next(w) <= T0 + 2 * REV + 100);
    assert_int_equal(wheel_run(w, T0 + 2 * REV + 100), 1);
    assert_int_equal(wheel_run(w, T0 + 2 * REV + 5000), 0);
    assert_int_equal(x.fired, 1);
    wheel_free(w);
}

/* ---- callbacks that change the wheel ---- */

/* Deletes every peer (marking those not fired yet), then itself (a no-op:
 * a firing timer is already unlinked). */
static void act_del_peers(struct tt *x, uint64_t now)
{
    (void)now;
    for (size_t i = 0; i < x->npeers; i++) {
        if (wheel_is_linked(&x->peers[i].timer))
            x->peers[i].deleted = true;
        wheel_del(&x->peers[i].timer);
    }
    wheel_del(&x->timer);
}

static void test_del_from_callback(void **state)
{
    enum { N = 9 };
    struct wheel *w = wheel_new(T0);
    struct tt x[N];

    (void)state;
    /* x[0..7] share a slot and each cancels all of x[0..8]; x[8] is in
     * another slot, due later. */
    for (int i = 0; i < N; i++) {
        tt_init(&x[i], w);
        x[i].action = act_del_peers;
        x[i].peers = x;
        x[i].npeers = N;
        wheel_add(w, &x[i].timer, i < N - 1 ? T0 + 200 + (uint64_t)i : T0 + 5000);
    }
    assert_int_equal(wheel_count(w), N);
    /* Whoever fires first cancels the rest of its slot and x[8]. */
    assert_int_equal(wheel_run(w, T0 + 300), 1);
    assert_int_equal(wheel_count(w), 0);
    assert_true(wheel_next(w) == UINT64_MAX);
    assert_int_equal(wheel_run(w, T0 + 10 * REV), 0);
    for (int i = 0; i < N; i++)
        assert_true(x[i].fired + x[i].deleted == 1);
    wheel_free(w);
}

/* Deletes the next timer of a chain. */
static void act_del_next(struct tt *x, uint64_t now)
{
    (void)now;
    if (x->npeers && wheel_is_linked(&x->peers[0].timer)) {
        x->peers[0].deleted = true;
        wheel_del(&x->peers[0].timer);
    }
}

/* A chain in one slot where each timer deletes the next: whatever the
 * firing order, a deleted timer never fires (tt_cb checks), nothing fires
 * twice, and every timer either fired or was deleted. */
static void test_del_other_same_slot(void **state)
{
    enum { N = 64 };
    struct wheel *w = wheel_new(T0);
    struct tt x[N];
    size_t total;

    (void)state;
    for (int i = 0; i < N; i++) {
        tt_init(&x[i], w);
        x[i].action = act_del_next;
        x[i].peers = i + 1 < N ? &x[i + 1] : NULL;
        x[i].npeers = i + 1 < N;
        wheel_add(w, &x[i].timer, T0 + 400 + (uint64_t)i % 10);
    }
    total = wheel_run(w, T0 + 409);
    assert_true(total >= N / 2);
    for (int i = 0; i < N; i++) {
        assert_true(x[i].fired + x[i].deleted == 1);
        assert_false(wheel_is_linked(&x[i].timer));
    }
    assert_int_equal(wheel_count(w), 0);
    assert_int_equal(wheel_run(w, T0 + 2 * REV), 0);
    wheel_free(w);
}

/* Re-arms itself period ms later (0: at now, i.e. already due). */
static void act_rearm(struct tt *x, uint64_t now)
{
    wheel_add(x->w, &x->timer, now + x->period);
    x->added = run_id;
}

static void test_readd_from_callback(void **state)
{
    struct wheel *w = wheel_new(T0);
    struct tt p, z;

    (void)state;
    tt_init(&p, w);
    p.action = act_rearm;
    p.period = 25;
    wheel_add(w, &p.timer, T0 + 25);
    for (uint64_t now = T0 + 1; now <= T0 + 1000; now++)
        wheel_run(w, now);
    assert_int_equal(p.fired, 40);
    assert_true(wheel_is_linked(&p.timer));
    assert_true(p.timer.expire_at == T0 + 1025);
    /* A long pause fires it once, then it continues from there. */
    assert_int_equal(wheel_run(w, T0 + 5000), 1);
    assert_true(p.timer.expire_at == T0 + 5025);
    wheel_del(&p.timer);

    /* Re-armed as already due: fires once per run, never loops in one run. */
    tt_init(&z, w);
    z.action = act_rearm;
    z.period = 0;
    wheel_add(w, &z.timer, T0 + 5000);
    for (int i = 1; i <= 5; i++) {
        assert_true(wheel_next(w) <= T0 + 5000);
        assert_int_equal(wheel_run(w, T0 + 5000), 1);
        assert_int_equal(z.fired, i);
    }
    wheel_free(w);
    assert_false(wheel_is_linked(&z.timer)); /* dropped by wheel_free */
}

/* Re-adds a peer that sits in the same slot and has not fired yet. */
static void act_push_peer(struct tt *x, uint64_t now)
{
    if (x->npeers && x->peers[0].fired == 0) {
        wheel_add(x->w, &x->peers[0].timer, now + 1000);
        x->peers[0].added = run_id;
    }
}

/* Arms a and b at the same time; whichever fires first pushes the other
 * on (act_push_peer). */
static void push_pair(struct wheel *w, struct tt *a, struct tt *b, uint64_t at)
{
    tt_init(a, w);
    tt_init(b, w);
    a->action = b->action = act_push_peer;
    a->peers = b;
    b->peers = a;
    a->npeers = b->npeers = 1;
    wheel_add(w, &a->timer, at);
    wheel_add(w, &b->timer, at);
}

static void test_readd_other_from_callback(void **state)
{
    struct wheel *w = wheel_new(T0);
    struct tt a, b;

    (void)state;
    push_pair(w, &a, &b, T0 + 500);
    assert_int_equal(wheel_run(w, T0 + 500), 1);
    assert_int_equal(a.fired + b.fired, 1);
    assert_int_equal(wheel_run(w, T0 + 1499), 0);
    assert_int_equal(wheel_run(w, T0 + 1500), 1);
    assert_int_equal(a.fired, 1);
    assert_int_equal(b.fired, 1);
    wheel_free(w);
}

/* Adds its first peer at x->period (an absolute time here). */
static void act_add_peer_at(struct tt *x, uint64_t now)
{
    (void)now;
    wheel_add(x->w, &x->peers[0].timer, x->period);
    x->peers[0].added = run_id;
}

/* A run covering many ticks: a callback adds a timer for a tick the run has
 * already passed. It must fire at the next run, not a revolution later. */
static void test_add_passed_tick_from_callback(void **state)
{
    struct wheel *w = wheel_new(T0);
    struct tt f, y;

    (void)state;
    tt_init(&f, w);
    tt_init(&y, w);
    f.action = act_add_peer_at;
    f.peers = &y;
    f.period = T0 + 50;
    wheel_add(w, &f.timer, T0 + 500);
    assert_int_equal(wheel_run(w, T0 + 1000), 1);
    assert_int_equal(y.fired, 0); /* added by a callback: the next run */
    assert_true(wheel_next(w) <= T0 + 50);
    assert_int_equal(wheel_run(w, T0 + 1001), 1);
    assert_int_equal(y.fired, 1);
    wheel_free(w);
}

/* A callback adds a timer due later in the current tick, earlier than a
 * timer already waiting there: wheel_next() must see the earlier one. */
static void test_next_after_callback_adds_in_current_tick(void **state)
{
    struct wheel *w = wheel_new(T0);
    struct tt f, d, s;

    (void)state;
    tt_init(&f, w);
    tt_init(&d, w);
    tt_init(&s, w);
    f.action = act_add_peer_at;
    f.peers = &d;
    f.period = T0 + 3;
    wheel_add(w, &f.timer, T0 + 1);
    wheel_add(w, &s.timer, T0 + 5);
    assert_int_equal(wheel_run(w, T0 + 2), 1);
    assert_true(wheel_next(w) > T0 + 2);
    assert_true(wheel_next(w) <= T0 + 3);
    assert_int_equal(wheel_run(w, T0 + 3), 1);
    assert_int_equal(d.fired, 1);
    assert_true(wheel_next(w) == T0 + 5);
    assert_int_equal(wheel_run(w, T0 + 5), 1);
    assert_int_equal(s.fired, 1);
    wheel_free(w);
}

/* ---- late timers and long pauses ---- */

static void test_late_add_fires_next_run(void **state)
{
    static const uint64_t late[] = {
        0, 1, T0, T0 + 10 * REV - 2 * REV, T0 + 10 * REV - 10, T0 + 10 * REV - 1, T0 + 10 * REV};
    struct wheel *w = wheel_new(T0);
    struct tt x[ARRAY_SIZE(late)];

    (void)state;
    wheel_run(w, T0 + 10 * REV);
    for (size_t i = 0; i < ARRAY_SIZE(late); i++) {
        tt_init(&x[i], w);
        wheel_add(w, &x[i].timer, late[i]);
        assert_true(wheel_next(w) <= late[i]);
    }
    assert_int_equal(wheel_run(w, T0 + 10 * REV), ARRAY_SIZE(late));
    assert_true(wheel_next(w) == UINT64_MAX);
    wheel_free(w);
}

static void test_large_jumps(void **state)
{
    enum { N = 5000 };
    struct wheel *w = wheel_new(T0);
    struct tt *x = calloc(N, sizeof(*x));
    uint64_t now = T0;

    (void)state;
    for (int i = 0; i < N; i++) {
        tt_init(&x[i], w);
        wheel_add(w, &x[i].timer, T0 + (uint64_t)i * 37 % (3 * REV) + 1);
    }
    /* 1.5 revolutions: fires exactly those due. */
    now += REV + REV / 2;
    size_t due = 0;
    for (int i = 0; i < N; i++)
        due += x[i].timer.expire_at <= now;
    assert_int_equal(wheel_run(w, now), due);
    for (int i = 0; i < N; i++)
        assert_int_equal(x[i].fired, x[i].timer.expire_at <= now);
    /* Ten revolutions: everything left. */
    now += 10 * REV;
    assert_int_equal(wheel_run(w, now), N - due);
    for (int i = 0; i < N; i++)
        assert_int_equal(x[i].fired, 1);
    /* And the wheel keeps working after the jump. */
    wheel_add(w, &x[0].timer, now + 30);
    assert_int_equal(wheel_run(w, now + 29), 0);
    assert_int_equal(wheel_run(w, now + 30), 1);
    wheel_free(w);
    free(x);
}

/* ---- budgeted runs ---- */

/* Runs with budget max at now until nothing due is left, checking every
 * run: it fires max or, in the last one, the rest; wheel_next() says "due"
 * exactly while some is left. Returns the number of runs. */
static size_t drain(struct wheel *w, uint64_t now, size_t max, size_t due)
{
    size_t runs = 0;

    while (due > 0) {
        size_t n = run_counted(w, now, max);

        assert_int_equal(n, MIN(max, due));
        due -= n;
        runs++;
        if (due > 0)
            assert_true(wheel_next(w) <= now);
        else
            assert_true(wheel_next(w) > now);
    }
    return runs;
}

static void test_budget_leaves_rest_due(void **state)
{
    enum { N = 1000, LATER = 500, MAX = 64 };
    struct wheel *w = wheel_new(T0);
    struct tt *x = calloc(N + LATER, sizeof(*x));
    const uint64_t now = T0 + 300;
    size_t soon = 0, then = 0;

    (void)state;
    /* N due at now over 30 ticks; LATER in the same slots but a revolution
     * on, or in the 15 ms after now (in the tick of now and the next). */
    for (int i = 0; i < N + LATER; i++) {
        uint64_t at = T0 + 1 + (uint64_t)i % 300;

        if (i >= N)
            at = i % 2 ? at + REV : now + 1 + (uint64_t)i % 15;
        soon += at > now && at <= now + 9;
        then += at > now + 9 && at <= now + 15;
        tt_init(&x[i], w);
        wheel_add(w, &x[i].timer, at);
    }
    assert_int_equal(run_counted(w, now, 0), 0); /* budget 0: nothing */
    assert_true(wheel_next(w) <= now);
    assert_int_equal(drain(w, now, MAX, N), (N + MAX - 1) / MAX);
    for (int i = 0; i < N + LATER; i++)
        assert_int_equal(x[i].fired, i < N); /* tt_cb: none early */
    assert_int_equal(wheel_count(w), LATER);
    /* The rest keep their times; exactly the budget drains fully. */
    assert_int_equal(run_counted(w, now + 9, SIZE_MAX), soon);
    assert_true(wheel_next(w) == now + 10);
    assert_int_equal(drain(w, now + 15, then, then), 1);
    assert_int_equal(drain(w, T0 + 300 + REV, 10, LATER / 2), LATER / 2 / 10);
    assert_int_equal(wheel_count(w), 0);
    assert_true(wheel_next(w) == UINT64_MAX);
    wheel_free(w);
    free(x);
}

/* Leftovers of a budgeted run fire before timers that became due later,
 * and a timer added while a backlog remains fires on time, never early. */
static void test_budget_leftovers_first(void **state)
{
    enum { OLD = 300, NEW = 50, MAX = 100 };
    struct wheel *w = wheel_new(T0);
    struct tt old[OLD], new[NEW], y;
    unsigned long last_old = 0;

    (void)state;
    for (int i = 0; i < OLD; i++) {
        tt_init(&old[i], w);
        wheel_add(w, &old[i].timer, T0 + 100 + (uint64_t)i % 7);
    }
    for (int i = 0; i < NEW; i++) {
        tt_init(&new[i], w);
        wheel_add(w, &new[i].timer, T0 + 150 + (uint64_t)i % 30);
    }
    assert_int_equal(run_counted(w, T0 + 110, MAX), MAX);
    /* Time goes on while the backlog lasts: the new ones are due too. */
    tt_init(&y, w);
    wheel_add(w, &y.timer, T0 + 400);
    assert_int_equal(drain(w, T0 + 200, MAX, OLD + NEW - MAX), 3);
    for (int i = 0; i < OLD; i++)
        last_old = MAX(last_old, old[i].order);
    for (int i = 0; i < NEW; i++)
        assert_true(new[i].order > last_old);
    assert_int_equal(y.fired, 0);
    assert_true(wheel_next(w) <= T0 + 400);
    assert_int_equal(run_counted(w, T0 + 399, MAX), 0);
    assert_int_equal(run_counted(w, T0 + 400, MAX), 1);
    wheel_free(w);
}

/* Late timers (the due list) leave a backlog in the order they came, and
 * a timer a callback re-arms as already due queues up behind it. */
static void test_budget_due_list_in_order(void **state)
{
    enum { N = 20, MAX = 5 };
    struct wheel *w = wheel_new(T0);
    struct tt x[N], r;

    (void)state;
    run_counted(w, T0 + 1000, SIZE_MAX);
    tt_init(&r, w);
    r.action = act_rearm; /* period 0 */
    wheel_add(w, &r.timer, T0 + 1);
    for (int i = 0; i < N; i++) {
        tt_init(&x[i], w);
        wheel_add(w, &x[i].timer, T0 + 2 + (uint64_t)i);
    }
    /* r and x[0..18] in four runs, then x[19] and r re-armed. */
    for (int i = 0; i < 4; i++)
        assert_int_equal(run_counted(w, T0 + 1000, MAX), MAX);
    assert_int_equal(r.fired, 1);
    assert_int_equal(run_counted(w, T0 + 1000, MAX), 2);
    assert_int_equal(r.fired, 2);
    for (int i = 0; i < N; i++)
        assert_true(x[i].order == (unsigned long)i + 2);
    assert_true(r.order == N + 2);
    wheel_del(&r.timer);
    wheel_free(w);
}

/* A long pause stopped part-way through the revolution it covers: the
 * slots not reached yet still fire before anything later, and a timer
 * added late meanwhile (already due) fires too. */
static void test_budget_after_long_pause(void **state)
{
    enum { N = 3000, MAX = 7 };
    struct wheel *w = wheel_new(T0);
    struct tt *x = calloc(N + 2, sizeof(*x));
    const uint64_t now = T0 + 5 * REV + 3;
    size_t due = 0, runs = 0;

    (void)state;
    for (int i = 0; i < N; i++) {
        tt_init(&x[i], w);
        wheel_add(w, &x[i].timer, T0 + (uint64_t)i * 41 % (6 * REV));
        due += x[i].timer.expire_at <= now + 29;
    }
    assert_int_equal(run_counted(w, now, MAX), MAX);
    due -= MAX;
    tt_init(&x[N], w);
    wheel_add(w, &x[N].timer, T0 + 5); /* late */
    tt_init(&x[N + 1], w);
    wheel_add(w, &x[N + 1].timer, now + 30); /* ahead */
    due++;
    while (due > 0) {
        size_t n = run_counted(w, now + 29, MAX);

        assert_int_equal(n, MIN(MAX, due));
        due -= n;
        assert_true(due == 0 || wheel_next(w) <= now + 29);
        assert_true(++runs <= N);
    }
    for (int i = 0; i <= N; i++)
        assert_int_equal(x[i].fired, x[i].timer.expire_at <= now + 29);
    assert_int_equal(x[N + 1].fired, 0);
    assert_true(wheel_next(w) > now + 29);
    assert_int_equal(run_counted(w, now + 30, MAX), 1);
    wheel_free(w);
    free(x);
}

/* Callbacks delete backlog timers wherever they wait: put back in their
 * slot, on the due list or in a slot not reached yet. */
static void test_budget_del_from_callback(void **state)
{
    enum { N = 200 };
    struct wheel *w = wheel_new(T0);
    struct tt x[N];
    size_t fired = 0, deleted = 0;

    (void)state;
    for (int i = 0; i < N; i++) {
        tt_init(&x[i], w);
        x[i].action = act_del_peers;
        x[i].peers = &x[(i * 7 + 3) % N];
        x[i].npeers = 1;
        wheel_add(w, &x[i].timer, T0 + 100 + (uint64_t)(i % 4) * 10 + (uint64_t)i % 3);
    }
    for (int runs = 0; wheel_next(w) <= T0 + 200; runs++) {
        assert_true(run_counted(w, T0 + 200, 5) <= 5);
        assert_true(runs < N);
    }
    for (int i = 0; i < N; i++) {
        assert_true(x[i].fired + x[i].deleted == 1);
        fired += x[i].fired;
        deleted += x[i].deleted;
    }
    assert_int_equal(fired + deleted, N);
    assert_true(deleted > 0);
    assert_int_equal(wheel_count(w), 0);
    wheel_free(w);
}

/* Timers that re-arm as already due fire once per run and do not keep the
 * backlog from draining; one pushed later by a callback waits its time. */
static void test_budget_readd_from_callback(void **state)
{
    enum { R = 4, N = 100, MAX = 10 };
    struct wheel *w = wheel_new(T0);
    struct tt r[R], x[N], a, b;
    size_t runs = 0, left = N;

    (void)state;
    for (int i = 0; i < R; i++) {
        tt_init(&r[i], w);
        r[i].action = act_rearm; /* period 0 */
        wheel_add(w, &r[i].timer, T0 + 100);
    }
    for (int i = 0; i < N; i++) {
        tt_init(&x[i], w);
        wheel_add(w, &x[i].timer, T0 + 100);
    }
    /* Each run: the re-armers once each, one-shots for the rest. */
    while (left > 0) {
        size_t n = run_counted(w, T0 + 100, MAX);

        assert_int_equal(n, MIN(MAX, R + left));
        left -= n - R;
        runs++;
        assert_true(wheel_next(w) <= T0 + 100);
    }
    assert_int_equal(runs, (N + MAX - R - 1) / (MAX - R));
    for (int i = 0; i < N; i++)
        assert_int_equal(x[i].fired, 1);
    for (int i = 0; i < R; i++) {
        assert_int_equal(r[i].fired, runs);
        wheel_del(&r[i].timer);
    }
    /* a and b share a slot; whichever fires first pushes the other on. */
    push_pair(w, &a, &b, T0 + 500);
    assert_int_equal(run_counted(w, T0 + 500, 1), 1);
    assert_true(wheel_next(w) > T0 + 500);
    assert_int_equal(run_counted(w, T0 + 1499, 1), 0);
    assert_int_equal(run_counted(w, T0 + 1500, 1), 1);
    assert_int_equal(a.fired + b.fired, 2);
    wheel_free(w);
}

/* ---- count and free ---- */

static void test_count(void **state)
{
    enum { N = 100 };
    struct wheel *w = wheel_new(T0);
    struct tt x[N];

    (void)state;
    for (int i = 0; i < N; i++) {
        tt_init(&x[i], w);
        wheel_add(w, &x[i].timer, T0 + (uint64_t)i * 1000);
    }
    assert_int_equal(wheel_count(w), N);
    wheel_add(w, &x[0].timer, T0 + 7); /* refresh */
    assert_int_equal(wheel_count(w), N);
    for (int i = 0; i < N; i += 2)
        wheel_del(&x[i].timer);
    wheel_del(&x[0].timer); /* twice */
    assert_int_equal(wheel_count(w), N / 2);
    assert_int_equal(wheel_run(w, T0 + 10000), 5); /* 1, 3, 5, 7, 9 */
    assert_int_equal(wheel_count(w), N / 2 - 5);
    wheel_free(w); /* drops the rest */
    for (int i = 0; i < N; i++)
        assert_false(wheel_is_linked(&x[i].timer));
}

/* ---- randomized comparison with a brute-force model ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void)
{
    /* xorshift64*: deterministic across libcs, unlike rand(). */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717u;
}

static uint64_t rng_below(uint64_t n)
{
    return rng() % n;
}

/* A delay drawn to hit every case: late, same tick, near, far. */
static uint64_t random_delay(uint64_t now)
{
    switch (rng_below(6)) {
    case 0:
        return now - rng_below(MIN(now, 3 * REV)); /* late, possibly very */
    case 1:
        return now + rng_below(WHEEL_TICK_MS);
    case 2:
        return now + rng_below(200);
    case 3:
        return now + rng_below(5000);
    case 4:
        return now + rng_below(REV);
    default:
        return now + rng_below(4 * REV);
    }
}

static uint64_t random_step(void)
{
    switch (rng_below(8)) {
    case 0:
        return 0;
    case 1:
        return rng_below(2 * REV); /* sometimes more than a revolution */
    case 2:
        return rng_below(3000);
    default:
        return rng_below(40);
    }
}

/* A run's budget: unlimited half the time, else small enough to bite. */
static size_t random_budget(void)
{
    return rng_below(2) ? SIZE_MAX : (size_t)rng_below(12);
}

/* Marks the model's timers due at now; returns how many. */
static size_t model_due(const bool *linked, bool *due, const uint64_t *at, size_t n, uint64_t now)
{
    size_t count = 0;

    for (size_t j = 0; j < n; j++) {
        due[j] = linked[j] && at[j] <= now;
        count += due[j];
    }
    return count;
}

static void test_random_against_model(void **state)
{
    enum { N = 300, OPS = 60000 };
    struct wheel *w = wheel_new(T0);
    struct tt *x = calloc(N, sizeof(*x));
    bool *linked = calloc(N, sizeof(*linked)); /* the model */
    bool *due = calloc(N, sizeof(*due));
    uint64_t *at = calloc(N, sizeof(*at));
    uint64_t now = T0;
    size_t backlog = 0; /* due timers the last run left */

    (void)state;
    for (int i = 0; i < N; i++)
        tt_init(&x[i], w);
    for (int op = 0; op < OPS; op++) {
        size_t i = (size_t)rng_below(N), model_count = 0;
        uint64_t model_min = UINT64_MAX, next;
        unsigned r = (unsigned)rng_below(10);

        if (r < 5) {
            at[i] = random_delay(now);
            linked[i] = true;
            wheel_add(w, &x[i].timer, at[i]);
        } else if (r < 7) {
            linked[i] = false;
            wheel_del(&x[i].timer);
        } else {
            size_t max = random_budget(), ndue, fired;

            now += backlog > 0 && rng_below(2) ? 0 : random_step();
            for (int j = 0; j < N; j++)
                x[j].fired = 0;
            ndue = model_due(linked, due, at, N, now);
            run_id++;
            fired = max == SIZE_MAX ? wheel_run(w, now) : wheel_run_budget(w, now, max);
            /* As many as the budget allows, only due ones, once each. */
            assert_int_equal(fired, MIN(max, ndue));
            backlog = ndue - fired;
            for (int j = 0; j < N; j++) {
                assert_true(x[j].fired <= due[j]);
                linked[j] = linked[j] && !x[j].fired;
                assert_int_equal(wheel_is_linked(&x[j].timer), linked[j]);
            }
        }
        for (int j = 0; j < N; j++) {
            if (linked[j]) {
                model_count++;
                model_min = MIN(model_min, at[j]);
            }
        }
        next = wheel_next(w);
        if (model_count == 0)
            assert_true(next == UINT64_MAX);
        else
            assert_true(next <= model_min);
        /* While a backlog remains the loop must not sleep; after a run
         * that left none, the hint must not make it spin: it lies after
         * now. */
        if (r >= 7 && backlog > 0)
            assert_true(next <= now);
        else if (r >= 7 && model_count > 0)
            assert_true(next > now);
        if (op % 64 == 0)
            assert_int_equal(wheel_count(w), model_count);
    }
    wheel_free(w);
    free(at);
    free(due);
    free(linked);
    free(x);
}

/* ---- randomized: budgeted runs whose callbacks change the wheel ---- */

static struct tt *chaos; /* the timers act_random picks from */
static size_t nchaos;

/* Deletes a random timer, re-arms itself (already due, or soon), re-adds
 * a random timer anywhere, or does nothing. */
static void act_random(struct tt *x, uint64_t now)
{
    struct tt *y = &chaos[rng_below(nchaos)];

    switch (rng_below(4)) {
    case 0:
        if (wheel_is_linked(&y->timer))
            y->deleted = true;
        wheel_del(&y->timer);
        break;
    case 1:
        wheel_add(x->w, &x->timer, now + rng_below(3) * 7);
        x->added = run_id;
        break;
    case 2:
        y->deleted = false;
        wheel_add(x->w, &y->timer, random_delay(now));
        y->added = run_id;
        break;
    default:
        break;
    }
}

/*
 * No model can say which timers a budgeted run picks when callbacks
 * change the wheel, so this checks the contract instead: tt_cb sees no
 * timer fire early, twice in a run, after a callback deleted it, or in
 * the run whose callback added it; a run fires at most its budget, and
 * fewer only when every timer due and linked when it began has fired (the
 * due timers still linked were added by its callbacks); wheel_next() is
 * never later than the earliest linked timer; wheel_count() is exact.
 */
static void test_random_budget_with_callbacks(void **state)
{
    enum { N = 200, OPS = 20000 };
    struct wheel *w = wheel_new(T0);
    struct tt *x = calloc(N, sizeof(*x));
    uint64_t now = T0;
    size_t total = 0;

    (void)state;
    chaos = x;
    nchaos = N;
    for (int i = 0; i < N; i++) {
        tt_init(&x[i], w);
        x[i].action = act_random;
    }
    for (int op = 0; op < OPS; op++) {
        struct tt *y = &x[rng_below(N)];
        uint64_t min = UINT64_MAX;
        size_t linked = 0;
        unsigned r = (unsigned)rng_below(10);

        if (r < 4) {
            y->deleted = false;
            y->added = 0;
            wheel_add(w, &y->timer, random_delay(now));
        } else if (r < 5) {
            wheel_del(&y->timer);
        } else {
            size_t max = rng_below(4) == 0 ? SIZE_MAX : (size_t)rng_below(16);
            size_t fired;

            now += rng_below(2) ? 0 : random_step();
            fired = run_counted(w, now, max);
            total += fired;
            assert_true(fired <= max);
            for (int j = 0; j < N; j++) {
                const struct wheel_timer *t = &x[j].timer;

                if (fired < max && wheel_is_linked(t) && t->expire_at <= now)
                    assert_true(x[j].added == run_id);
            }
        }
        for (int j = 0; j < N; j++) {
            if (wheel_is_linked(&x[j].timer)) {
                linked++;
                min = MIN(min, x[j].timer.expire_at);
            }
        }
        assert_true(wheel_next(w) <= min);
        assert_true((wheel_next(w) == UINT64_MAX) == (linked == 0));
        if (op % 64 == 0)
            assert_int_equal(wheel_count(w), linked);
    }
    assert_true(total > OPS / 4); /* the runs did fire */
    /* Without actions, one unlimited run empties the wheel. */
    for (int i = 0; i < N; i++)
        x[i].action = NULL;
    run_counted(w, now + 5 * REV, SIZE_MAX);
    assert_int_equal(wheel_count(w), 0);
    assert_true(wheel_next(w) == UINT64_MAX);
    wheel_free(w);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_zeroed_timer, reset_counters),
        cmocka_unit_test_setup(test_empty_wheel, reset_counters),
        cmocka_unit_test_setup(test_fires_at_expiry_never_before, reset_counters),
        cmocka_unit_test_setup(test_fires_at_first_run_after_expiry, reset_counters),
        cmocka_unit_test_setup(test_next_is_exact_for_simple_cases, reset_counters),
        cmocka_unit_test_setup(test_same_slot_different_revolutions, reset_counters),
        cmocka_unit_test_setup(test_many_timers_one_slot, reset_counters),
        cmocka_unit_test_setup(test_refresh_moves_without_firing, reset_counters),
        cmocka_unit_test_setup(test_del_from_callback, reset_counters),
        cmocka_unit_test_setup(test_del_other_same_slot, reset_counters),
        cmocka_unit_test_setup(test_readd_from_callback, reset_counters),
        cmocka_unit_test_setup(test_readd_other_from_callback, reset_counters),
        cmocka_unit_test_setup(test_add_passed_tick_from_callback, reset_counters),
        cmocka_unit_test_setup(test_next_after_callback_adds_in_current_tick, reset_counters),
        cmocka_unit_test_setup(test_late_add_fires_next_run, reset_counters),
        cmocka_unit_test_setup(test_large_jumps, reset_counters),
        cmocka_unit_test_setup(test_count, reset_counters),
        cmocka_unit_test_setup(test_budget_leaves_rest_due, reset_counters),
        cmocka_unit_test_setup(test_budget_leftovers_first, reset_counters),
        cmocka_unit_test_setup(test_budget_due_list_in_order, reset_counters),
        cmocka_unit_test_setup(test_budget_after_long_pause, reset_counters),
        cmocka_unit_test_setup(test_budget_del_from_callback, reset_counters),
        cmocka_unit_test_setup(test_budget_readd_from_callback, reset_counters),
        cmocka_unit_test_setup(test_random_against_model, reset_counters),
        cmocka_unit_test_setup(test_random_budget_with_callbacks, reset_counters),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
