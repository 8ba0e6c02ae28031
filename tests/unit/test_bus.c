/* SPDX-License-Identifier: MIT */
/*
 * test_bus.c - the inter-worker bus: routing, FIFO, wakeups, ownership,
 * and a multi-thread stress run over real eventfds and poll().
 *
 * cmocka is not thread-safe, so the stress threads record what they saw
 * and the main thread asserts after joining them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "bus.h"
#include "util.h"

/* A test message: seq is the sender's per-destination sequence number. */
struct tmsg {
    struct bus_msg m;
    uint32_t seq;
};

static unsigned tmsg_freed; /* single-thread tests only */

static void tmsg_free(struct bus_msg *m)
{
    tmsg_freed++;
    free(container_of(m, struct tmsg, m));
}

static void tmsg_free_mt(struct bus_msg *m)
{
    free(container_of(m, struct tmsg, m));
}

static struct bus_msg *tmsg_new(uint32_t type, uint32_t seq, bus_msg_free_cb *free_cb)
{
    struct tmsg *t = xcalloc(1, sizeof(*t));

    t->m.type = type;
    t->m.free = free_cb;
    t->seq = seq;
    return &t->m;
}

static bool fd_readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};

    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* Records what a drain delivered, in order. */
struct seen {
    unsigned n;
    uint32_t from[256];
    uint32_t type[256];
    uint32_t seq[256];
};

static void record(void *ctx, struct bus_msg *m)
{
    struct seen *s = ctx;

    assert_true(s->n < ARRAY_SIZE(s->seq));
    s->from[s->n] = m->from;
    s->type[s->n] = m->type;
    s->seq[s->n] = container_of(m, struct tmsg, m)->seq;
    s->n++;
    m->free(m);
}

/* ---- routing ---- */

static void test_route_stable_and_in_range(void **state)
{
    (void)state;
    for (unsigned n = 1; n <= 9; n++) {
        struct bus *a = bus_new(n), *b = bus_new(n);
        unsigned hits[9] = {0};

        assert_int_equal(bus_workers(a), n);
        for (unsigned i = 0; i < 10000; i++) {
            char key[32];
            int len = snprintf(key, sizeof(key), "user:%u", i);
            unsigned r = bus_route(a, key, (size_t)len);

            assert_true(r < n);
            assert_int_equal(r, bus_route(a, key, (size_t)len)); /* stable */
            assert_int_equal(r, bus_route(b, key, (size_t)len)); /* same on any bus of n */
            assert_int_equal(r, hash_bytes(key, (size_t)len) % n);
            hits[r]++;
        }
        for (unsigned r = 0; r < n; r++)
            assert_true(hits[r] > 10000 / n / 2); /* roughly even */
        bus_free(a);
        bus_free(b);
    }
}

/* ---- single thread ---- */

static void test_send_flush_drain_fifo(void **state)
{
    struct bus *b = bus_new(3);
    struct seen s = {0};

    (void)state;
    tmsg_freed = 0;
    for (uint32_t i = 0; i < 100; i++)
        bus_send(b, 0, 1, tmsg_new(7, i, tmsg_free));
    for (uint32_t i = 0; i < 10; i++)
        bus_send(b, 2, 1, tmsg_new(8, i, tmsg_free));
    /* Nothing is visible before the sender flushes. */
    assert_false(fd_readable(bus_inbox_fd(b, 1)));
    assert_int_equal(bus_drain(b, 1, record, &s), 0);
    bus_flush(b, 0);
    assert_true(fd_readable(bus_inbox_fd(b, 1)));
    assert_false(fd_readable(bus_inbox_fd(b, 0)));
    assert_false(fd_readable(bus_inbox_fd(b, 2)));
    bus_flush(b, 2);
    assert_int_equal(bus_drain(b, 1, record, &s), 110);
    assert_false(fd_readable(bus_inbox_fd(b, 1)));
    /* Per sender in send order; the earlier flush comes first. */
    for (uint32_t i = 0; i < 100; i++) {
        assert_int_equal(s.from[i], 0);
        assert_int_equal(s.type[i], 7);
        assert_int_equal(s.seq[i], i);
    }
    for (uint32_t i = 0; i < 10; i++) {
        assert_int_equal(s.from[100 + i], 2);
        assert_int_equal(s.type[100 + i], 8);
        assert_int_equal(s.seq[100 + i], i);
    }
    assert_int_equal(tmsg_freed, 110);
    assert_int_equal(bus_drain(b, 1, record, &s), 0);
    bus_free(b);
}

/* Several flushes before one drain still come out in send order. */
static void test_fifo_across_flushes(void **state)
{
    struct bus *b = bus_new(2);
    struct seen s = {0};
    uint32_t seq = 0;

    (void)state;
    for (int f = 0; f < 20; f++) {
        for (int i = 0; i < f % 4; i++, seq++)
            bus_send(b, 0, 1, tmsg_new(0, seq, tmsg_free));
        bus_flush(b, 0);
    }
    assert_int_equal(bus_drain(b, 1, record, &s), seq);
    for (uint32_t i = 0; i < seq; i++)
        assert_int_equal(s.seq[i], i);
    bus_free(b);
}

static void test_send_to_self(void **state)
{
    struct bus *b = bus_new(1);
    struct seen s = {0};

    (void)state;
    bus_send(b, 0, 0, tmsg_new(1, 41, tmsg_free));
    bus_send(b, 0, 0, tmsg_new(1, 42, tmsg_free));
    bus_flush(b, 0);
    assert_true(fd_readable(bus_inbox_fd(b, 0)));
    assert_int_equal(bus_drain(b, 0, record, &s), 2);
    assert_int_equal(s.from[0], 0);
    assert_int_equal(s.seq[0], 41);
    assert_int_equal(s.seq[1], 42);
    bus_free(b);
}

/* A handler that answers each message by sending one to itself. */
static void echo_to_self(void *ctx, struct bus_msg *m)
{
    struct bus *b = ctx;

    if (m->type == 0)
        bus_send(b, 0, 0, tmsg_new(1, 0, tmsg_free));
    m->free(m);
}

static void test_handler_may_send(void **state)
{
    struct bus *b = bus_new(1);

    (void)state;
    bus_send(b, 0, 0, tmsg_new(0, 0, tmsg_free));
    bus_send(b, 0, 0, tmsg_new(0, 1, tmsg_free));
    bus_flush(b, 0);
    assert_int_equal(bus_drain(b, 0, echo_to_self, b), 2);
    /* The replies wait for the flush and the next drain. */
    assert_int_equal(bus_drain(b, 0, echo_to_self, b), 0);
    bus_flush(b, 0);
    assert_int_equal(bus_drain(b, 0, echo_to_self, b), 2);
    bus_free(b);
}

static void test_wakeup_once_per_transition(void **state)
{
    struct bus *b = bus_new(3);
    struct seen s = {0};

    (void)state;
    assert_int_equal(bus_stat_wakeups(b), 0);
    bus_flush(b, 0); /* nothing queued: no CAS, no write */
    assert_int_equal(bus_stat_wakeups(b), 0);
    bus_send(b, 0, 1, tmsg_new(0, 0, tmsg_free));
    bus_flush(b, 0);
    assert_int_equal(bus_stat_wakeups(b), 1);
    /* Inbox still non-empty: further pushes, from anyone, do not write. */
    for (uint32_t i = 1; i < 5; i++) {
        bus_send(b, 0, 1, tmsg_new(0, i, tmsg_free));
        bus_send(b, 2, 1, tmsg_new(0, i, tmsg_free));
        bus_flush(b, 0);
        bus_flush(b, 2);
    }
    assert_int_equal(bus_stat_wakeups(b), 1);
    assert_int_equal(bus_drain(b, 1, record, &s), 9);
    assert_false(fd_readable(bus_inbox_fd(b, 1)));
    /* A spurious drain finds nothing and does not block. */
    assert_int_equal(bus_drain(b, 1, record, &s), 0);
    /* Empty again: the next push wakes once more; other inboxes count too. */
    bus_send(b, 0, 1, tmsg_new(0, 9, tmsg_free));
    bus_send(b, 0, 2, tmsg_new(0, 9, tmsg_free));
    bus_flush(b, 0);
    assert_int_equal(bus_stat_wakeups(b), 3);
    bus_free(b); /* frees the two undelivered messages */
}

/* Lazy messages: bus_flush() leaves them (no wakeup), an ordinary message
 * to the same worker takes them along in order, bus_flush_all() publishes
 * them, and bus_free() releases any still queued. */
static void test_lazy_messages(void **state)
{
    struct bus *b = bus_new(2);
    struct seen s = {0};

    (void)state;
    assert_false(bus_lazy_pending(b, 0));
    bus_send_lazy(b, 0, 1, tmsg_new(0, 0, tmsg_free));
    bus_send_lazy(b, 0, 1, tmsg_new(0, 1, tmsg_free));
    assert_true(bus_lazy_pending(b, 0));
    bus_flush(b, 0);
    assert_true(bus_lazy_pending(b, 0));
    assert_int_equal(bus_stat_wakeups(b), 0);
    assert_false(fd_readable(bus_inbox_fd(b, 1)));
    assert_int_equal(bus_drain(b, 1, record, &s), 0);
    /* An ordinary message takes them along, after them. */
    bus_send(b, 0, 1, tmsg_new(0, 2, tmsg_free));
    bus_send_lazy(b, 0, 1, tmsg_new(0, 3, tmsg_free)); /* same iteration */
    bus_flush(b, 0);
    assert_false(bus_lazy_pending(b, 0));
    assert_int_equal(bus_stat_wakeups(b), 1);
    assert_int_equal(bus_drain(b, 1, record, &s), 4);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(s.seq[i], i);
    /* bus_flush_all() publishes lazy ones alone; to self too. */
    bus_send_lazy(b, 0, 1, tmsg_new(0, 4, tmsg_free));
    bus_send_lazy(b, 0, 0, tmsg_new(0, 5, tmsg_free));
    bus_flush_all(b, 0);
    assert_false(bus_lazy_pending(b, 0));
    assert_true(fd_readable(bus_inbox_fd(b, 1)));
    assert_int_equal(bus_drain(b, 1, record, &s), 1);
    assert_int_equal(bus_drain(b, 0, record, &s), 1);
    assert_int_equal(s.seq[4], 4);
    assert_int_equal(s.seq[5], 5);
    /* The flag is per destination: a lazy message to 1 stays when only
     * worker 0 gets an ordinary one. */
    bus_send_lazy(b, 0, 1, tmsg_new(0, 6, tmsg_free));
    bus_send(b, 0, 0, tmsg_new(0, 7, tmsg_free));
    bus_flush(b, 0);
    assert_true(bus_lazy_pending(b, 0));
    assert_int_equal(bus_drain(b, 1, record, &s), 0);
    assert_int_equal(bus_drain(b, 0, record, &s), 1);
    tmsg_freed = 0;
    bus_free(b); /* the lazy one still queued */
    assert_int_equal(tmsg_freed, 1);
}

static struct bus_msg static_msg = {.type = 99}; /* free == NULL: not owned */

static void test_free_releases_undelivered(void **state)
{
    struct bus *b = bus_new(2);

    (void)state;
    tmsg_freed = 0;
    bus_send(b, 0, 1, tmsg_new(0, 0, tmsg_free)); /* flushed, not drained */
    bus_send(b, 1, 1, tmsg_new(0, 1, tmsg_free));
    bus_flush(b, 0);
    bus_flush(b, 1);
    bus_send(b, 0, 1, tmsg_new(0, 2, tmsg_free)); /* queued, not flushed */
    bus_send(b, 1, 0, tmsg_new(0, 3, tmsg_free));
    bus_send(b, 1, 0, &static_msg);
    bus_free(b);
    assert_int_equal(tmsg_freed, 4); /* and ASan sees no leak */
}

/* ---- multi-thread stress ---- */

enum {
    PRODUCERS = 4,
    CONSUMERS = 2,
    PER_PRODUCER = 100000,
    POLL_TIMEOUT_MS = 10000, /* a lost wakeup would hang here */
};

struct stress {
    struct bus *b;
    /* Written by the consumer thread c only, read after join. */
    struct {
        uint64_t received;
        uint64_t out_of_order;
        uint64_t bad_sender;
        uint64_t timeouts;
        uint64_t nonempty_drains;
        uint32_t next_seq[PRODUCERS];
    } c[CONSUMERS];
};

struct stress_arg {
    struct stress *st;
    unsigned id; /* worker id on the bus */
};

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Sends PER_PRODUCER messages, alternating consumers, flushing after
 * batches of random size (1..64) like a loop's before-sleep hook would. */
static void *producer_main(void *arg)
{
    struct stress_arg *a = arg;
    uint64_t rng = 0x2545f4914f6cdd1du * (a->id + 1);
    uint32_t seq[CONSUMERS] = {0};
    unsigned batch = 0;

    for (unsigned i = 0; i < PER_PRODUCER; i++) {
        unsigned c = i % CONSUMERS;

        bus_send(a->st->b, a->id, PRODUCERS + c, tmsg_new(0, seq[c]++, tmsg_free_mt));
        if (batch == 0)
            batch = 1 + (unsigned)(xorshift(&rng) % 64);
        if (--batch == 0)
            bus_flush(a->st->b, a->id);
    }
    bus_flush(a->st->b, a->id);
    return NULL;
}

static void stress_handle(void *ctx, struct bus_msg *m)
{
    struct stress_arg *a = ctx;
    unsigned c = a->id - PRODUCERS;
    uint32_t seq = container_of(m, struct tmsg, m)->seq;

    if (m->from >= PRODUCERS)
        a->st->c[c].bad_sender++;
    else if (a->st->c[c].next_seq[m->from]++ != seq)
        a->st->c[c].out_of_order++;
    a->st->c[c].received++;
    m->free(m);
}

/* Sleeps in poll() on the inbox eventfd and drains until every message
 * meant for this consumer has arrived. */
static void *consumer_main(void *arg)
{
    struct stress_arg *a = arg;
    unsigned c = a->id - PRODUCERS;
    const uint64_t expect = (uint64_t)PRODUCERS * PER_PRODUCER / CONSUMERS;
    struct pollfd p = {.fd = bus_inbox_fd(a->st->b, a->id), .events = POLLIN};

    while (a->st->c[c].received < expect) {
        int r = poll(&p, 1, POLL_TIMEOUT_MS);

        if (r == 0) {
            a->st->c[c].timeouts++;
            break;
        }
        if (r > 0 && bus_drain(a->st->b, a->id, stress_handle, a) > 0)
            a->st->c[c].nonempty_drains++;
    }
    return NULL;
}

/* bus_backlog(): sent but not taken, per sender and receiver, lazy and
 * unflushed messages included; bus_take() hands the chain in send order. */
static void test_backlog_and_take(void **state)
{
    struct bus *b = bus_new(2);
    struct bus_msg *m;
    uint32_t n = 0;

    (void)state;
    tmsg_freed = 0;
    for (uint32_t i = 0; i < 5; i++)
        bus_send(b, 0, 1, tmsg_new(7, i, tmsg_free));
    bus_send_lazy(b, 0, 1, tmsg_new(7, 5, tmsg_free));
    bus_send(b, 1, 1, tmsg_new(8, 0, tmsg_free));
    assert_int_equal(bus_backlog(b, 0, 1), 6); /* unflushed still counts */
    assert_int_equal(bus_backlog(b, 1, 1), 1);
    assert_int_equal(bus_backlog(b, 0, 0), 0);
    bus_flush_all(b, 0);
    assert_int_equal(bus_backlog(b, 0, 1), 6);
    for (m = bus_take(b, 1); m; n++) {
        struct bus_msg *next = bus_next(m);

        assert_int_equal(((struct tmsg *)m)->seq, n);
        m->free(m);
        m = next;
    }
    assert_int_equal(n, 6);
    assert_int_equal(bus_backlog(b, 0, 1), 0);
    assert_int_equal(bus_backlog(b, 1, 1), 1); /* worker 1's own send is not flushed yet */
    bus_free(b);
    assert_int_equal(tmsg_freed, 7);
}

static void test_stress_threads(void **state)
{
    static struct stress st; /* large-ish; keep it off the stack */
    struct stress_arg args[PRODUCERS + CONSUMERS];
    pthread_t th[PRODUCERS + CONSUMERS];
    uint64_t nonempty = 0;

    (void)state;
    st = (struct stress){.b = bus_new(PRODUCERS + CONSUMERS)};
    for (unsigned i = 0; i < PRODUCERS + CONSUMERS; i++) {
        args[i] = (struct stress_arg){.st = &st, .id = i};
        assert_int_equal(
            pthread_create(&th[i], NULL, i < PRODUCERS ? producer_main : consumer_main, &args[i]),
            0);
    }
    for (unsigned i = 0; i < PRODUCERS + CONSUMERS; i++)
        pthread_join(th[i], NULL);
    for (unsigned c = 0; c < CONSUMERS; c++) {
        assert_int_equal(st.c[c].timeouts, 0);
        assert_int_equal(st.c[c].bad_sender, 0);
        assert_int_equal(st.c[c].out_of_order, 0);
        /* Exactly once: the right count, and each sender's sequence whole. */
        assert_int_equal(st.c[c].received, PRODUCERS * PER_PRODUCER / CONSUMERS);
        for (unsigned p = 0; p < PRODUCERS; p++)
            assert_int_equal(st.c[c].next_seq[p], PER_PRODUCER / CONSUMERS);
        nonempty += st.c[c].nonempty_drains;
    }
    /* One eventfd write per empty -> non-empty transition, and each such
     * transition is ended by exactly one non-empty drain. */
    assert_int_equal(bus_stat_wakeups(st.b), nonempty);
    assert_true(nonempty <= (uint64_t)PRODUCERS * PER_PRODUCER);
    print_message("stress: %u messages, %llu wakeups\n", PRODUCERS * PER_PRODUCER,
                  (unsigned long long)nonempty);
    bus_free(st.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_stable_and_in_range),
        cmocka_unit_test(test_send_flush_drain_fifo),
        cmocka_unit_test(test_fifo_across_flushes),
        cmocka_unit_test(test_send_to_self),
        cmocka_unit_test(test_handler_may_send),
        cmocka_unit_test(test_wakeup_once_per_transition),
        cmocka_unit_test(test_lazy_messages),
        cmocka_unit_test(test_free_releases_undelivered),
        cmocka_unit_test(test_backlog_and_take),
        cmocka_unit_test(test_stress_threads),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
