/* SPDX-License-Identifier: MIT */
/*
 * test_ratelimit.c - the shared token-bucket table on a fake clock: burst
 * and refill, refusals that take nothing, independent keys, a lagging
 * worker clock, the sweep (only refilled entries, round robin), the entry
 * cap (the fullest old entry goes), several threads at once (the total
 * granted never exceeds the buckets), observer keys and the hash's
 * SipHash-2-4 test vectors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "ratelimit.h"
#include "util.h"

#define T0 1000000 /* any start time: the table never reads a clock */

static const unsigned char seed[RATELIMIT_SEED_LEN] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                       8, 9, 10, 11, 12, 13, 14, 15};

static struct ratelimit *table(uint32_t rate, uint32_t burst, size_t max_entries)
{
    return ratelimit_new(rate, burst, max_entries, seed);
}

static unsigned stripe_of(const char *key)
{
    return (unsigned)(ratelimit__hash(seed, key, strlen(key)) >> 58);
}

static void test_burst_then_refused(void **state)
{
    struct ratelimit *rl = table(10, 20, 1000);

    (void)state;
    assert_true(ratelimit_take(rl, "u:alice", 15, T0));
    assert_true(ratelimit_take(rl, "u:alice", 5, T0));
    assert_false(ratelimit_take(rl, "u:alice", 1, T0));
    assert_true(ratelimit_available(rl, "u:alice", T0) == 0.0);
    ratelimit_free(rl);
}

static void test_refill_is_capped_at_burst(void **state)
{
    struct ratelimit *rl = table(10, 20, 1000);

    (void)state;
    assert_true(ratelimit_take(rl, "k", 20, T0));
    assert_false(ratelimit_take(rl, "k", 1, T0 + 99)); /* 0.99 tokens */
    assert_true(ratelimit_take(rl, "k", 1, T0 + 100));
    assert_false(ratelimit_take(rl, "k", 1, T0 + 100));
    assert_true(ratelimit_available(rl, "k", T0 + 1100) == 10.0);
    assert_true(ratelimit_available(rl, "k", T0 + 3600000) == 20.0);
    assert_true(ratelimit_take(rl, "k", 20, T0 + 3600000));
    assert_false(ratelimit_take(rl, "k", 1, T0 + 3600000));
    ratelimit_free(rl);
}

/* A refusal takes nothing; a request above the burst can never pass and
 * a new key refused so records no entry. */
static void test_refusal_takes_nothing(void **state)
{
    struct ratelimit *rl = table(10, 20, 1000);

    (void)state;
    assert_true(ratelimit_take(rl, "k", 15, T0));
    assert_false(ratelimit_take(rl, "k", 10, T0));
    assert_true(ratelimit_available(rl, "k", T0) == 5.0);
    assert_true(ratelimit_take(rl, "k", 5, T0));
    assert_false(ratelimit_take(rl, "new", 21, T0));
    assert_int_equal(ratelimit_count(rl), 1);
    assert_true(ratelimit_take(rl, "new", 0, T0)); /* nothing asked, nothing recorded */
    assert_int_equal(ratelimit_count(rl), 1);
    ratelimit_free(rl);
}

static void test_keys_are_independent(void **state)
{
    struct ratelimit *rl = table(1, 3, 1000);
    char key[32];

    (void)state;
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof(key), "u:user%d", i);
        assert_true(ratelimit_take(rl, key, 3, T0));
    }
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof(key), "u:user%d", i);
        assert_false(ratelimit_take(rl, key, 1, T0));
    }
    assert_true(ratelimit_take(rl, "u:someone-else", 3, T0));
    assert_int_equal(ratelimit_count(rl), 201);
    ratelimit_free(rl);
}

/* Workers' loop clocks differ: a call with an older now refills nothing
 * and does not move the entry's clock back (no double refill later). */
static void test_lagging_clock(void **state)
{
    struct ratelimit *rl = table(10, 20, 1000);

    (void)state;
    assert_true(ratelimit_take(rl, "k", 20, T0));
    assert_false(ratelimit_take(rl, "k", 1, T0 - 500));
    assert_true(ratelimit_available(rl, "k", T0 - 500) == 0.0);
    assert_true(ratelimit_available(rl, "k", T0 + 100) == 1.0);
    ratelimit_free(rl);
}

/* Only entries whose bucket is full again go; a swept key starts full
 * again, which is what it would have had anyway. */
static void test_sweep_removes_only_refilled(void **state)
{
    struct ratelimit *rl = table(10, 20, 1000);

    (void)state;
    assert_true(ratelimit_take(rl, "drained", 20, T0));     /* full at T0 + 2000 */
    assert_true(ratelimit_take(rl, "one", 1, T0 + 500));    /* full at T0 + 600 */
    assert_true(ratelimit_take(rl, "later", 1, T0 + 1900)); /* full at T0 + 2000 */
    assert_int_equal(ratelimit_sweep(rl, RATELIMIT_STRIPES, T0 + 599), 0);
    assert_int_equal(ratelimit_sweep(rl, RATELIMIT_STRIPES, T0 + 600), 1);
    assert_int_equal(ratelimit_count(rl), 2);
    assert_true(ratelimit_available(rl, "one", T0 + 600) == 20.0);
    assert_int_equal(ratelimit_sweep(rl, RATELIMIT_STRIPES, T0 + 1999), 0);
    assert_true(ratelimit_available(rl, "drained", T0 + 1999) < 20.0); /* not yet full */
    assert_int_equal(ratelimit_sweep(rl, RATELIMIT_STRIPES, T0 + 2000), 2);
    assert_int_equal(ratelimit_count(rl), 0);
    ratelimit_free(rl);
}

/* Slices of stripes: eight calls of eight stripes cover the table once. */
static void test_sweep_slices(void **state)
{
    struct ratelimit *rl = table(10, 20, 100000);
    char key[32];
    size_t removed, total = 0;

    (void)state;
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof(key), "a:10.0.%d.%d", i / 256, i % 256);
        assert_true(ratelimit_take(rl, key, 1, T0));
    }
    removed = ratelimit_sweep(rl, 8, T0 + 100);
    assert_true(removed > 0 && removed < 2000);
    total += removed;
    for (int i = 1; i < RATELIMIT_STRIPES / 8; i++)
        total += ratelimit_sweep(rl, 8, T0 + 100);
    assert_int_equal(total, 2000);
    assert_int_equal(ratelimit_count(rl), 0);
    ratelimit_free(rl);
}

/* Finds n keys of one stripe, so that the per-stripe cap can be tested. */
static void same_stripe_keys(char keys[][32], int n)
{
    unsigned want = stripe_of("u:k0");
    int found = 0;

    for (int i = 0; found < n; i++) {
        snprintf(keys[found], 32, "u:k%d", i);
        if (stripe_of(keys[found]) == want)
            found++;
    }
}

/* max_entries 128 = 2 per stripe. A third key in a full stripe evicts the
 * entry with the most tokens (the least information), not the drained one. */
static void test_cap_evicts_the_fullest(void **state)
{
    struct ratelimit *rl = table(1, 100, 2 * RATELIMIT_STRIPES);
    char keys[4][32];

    (void)state;
    same_stripe_keys(keys, 4);
    assert_true(ratelimit_take(rl, keys[0], 100, T0)); /* drained */
    assert_true(ratelimit_take(rl, keys[1], 1, T0));   /* 99 left */
    assert_true(ratelimit_take(rl, keys[2], 50, T0));  /* evicts keys[1] */
    assert_int_equal(ratelimit_count(rl), 2);
    assert_true(ratelimit_available(rl, keys[0], T0) == 0.0);
    assert_false(ratelimit_take(rl, keys[0], 1, T0)); /* still limited */
    assert_true(ratelimit_available(rl, keys[1], T0) == 100.0);
    /* Now keys[2] (50) is fuller than keys[0] (0): it goes next. */
    assert_true(ratelimit_take(rl, keys[3], 1, T0));
    assert_true(ratelimit_available(rl, keys[2], T0) == 100.0);
    assert_true(ratelimit_available(rl, keys[0], T0) == 0.0);
    assert_int_equal(ratelimit_count(rl), 2);
    ratelimit_free(rl);
}

/* However many keys come, the table holds at most its cap (rounded up to
 * whole stripes), and every new key is still served. */
static void test_cap_bounds_memory(void **state)
{
    struct ratelimit *rl = table(1, 10, 1000);
    char key[32];

    (void)state;
    for (int i = 0; i < 20000; i++) {
        snprintf(key, sizeof(key), "u:flood%d", i);
        assert_true(ratelimit_take(rl, key, 10, T0 + (uint64_t)i));
        assert_true(ratelimit_count(rl) <= 1024); /* 16 per stripe */
    }
    assert_true(ratelimit_count(rl) > 900);
    ratelimit_free(rl);
}

/* ---- several threads ---- */

#define THREADS 8
#define KEYS    4

struct worker_arg {
    struct ratelimit *rl;
    _Atomic uint64_t *clock; /* NULL: time stands still */
    int iterations;
    long granted[KEYS];
    int sweeper; /* also sweeps and adds other keys */
};

static void *hammer(void *p)
{
    struct worker_arg *a = p;
    char key[32];

    for (int i = 0; i < a->iterations; i++) {
        uint64_t now = a->clock ? atomic_fetch_add(a->clock, 1) : T0;
        int k = i % KEYS;
        snprintf(key, sizeof(key), "u:shared%d", k);
        if (ratelimit_take(a->rl, key, 1, now))
            a->granted[k]++;
        if (a->sweeper) {
            snprintf(key, sizeof(key), "a:10.1.%d.%d", (i / 256) % 256, i % 256);
            ratelimit_take(a->rl, key, 1, now);
            if (i % 64 == 0)
                ratelimit_sweep(a->rl, 4, now);
        }
    }
    return NULL;
}

static long run_threads(struct ratelimit *rl, _Atomic uint64_t *clock, int iterations,
                        long granted[KEYS])
{
    struct worker_arg args[THREADS];
    pthread_t th[THREADS];
    long total = 0;

    memset(args, 0, sizeof(args));
    for (int t = 0; t < THREADS; t++) {
        args[t].rl = rl;
        args[t].clock = clock;
        args[t].iterations = iterations;
        args[t].sweeper = t < 2;
        assert_int_equal(pthread_create(&th[t], NULL, hammer, &args[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (int k = 0; k < KEYS; k++) {
        granted[k] = 0;
        for (int t = 0; t < THREADS; t++)
            granted[k] += args[t].granted[k];
        total += granted[k];
    }
    return total;
}

/* Time stands still: each shared key grants exactly its burst, however
 * the threads interleave. */
static void test_threads_grant_exactly_the_burst(void **state)
{
    struct ratelimit *rl = table(100, 500, 4096);
    long granted[KEYS];

    (void)state;
    assert_int_equal(run_threads(rl, NULL, 20000, granted), KEYS * 500);
    for (int k = 0; k < KEYS; k++)
        assert_int_equal(granted[k], 500);
    ratelimit_free(rl);
}

/* A moving clock (every call one ms later): per key, at most the burst
 * plus the refill over the time that passed. */
static void test_threads_stay_within_rate(void **state)
{
    struct ratelimit *rl = table(100, 500, 4096);
    _Atomic uint64_t clock = T0;
    long granted[KEYS];
    double elapsed_s;

    (void)state;
    run_threads(rl, &clock, 20000, granted);
    elapsed_s = (double)(atomic_load(&clock) - T0) / 1000.0;
    for (int k = 0; k < KEYS; k++) {
        assert_true(granted[k] >= 500);
        assert_true((double)granted[k] <= 500 + 100 * elapsed_s + 1);
    }
    ratelimit_free(rl);
}

/* ---- observer keys and the hash ---- */

static void check_key(const char *uid, const char *peer, const char *want)
{
    char out[RATELIMIT_KEY_MAX];

    ratelimit_observer_key(out, uid, peer, true);
    assert_string_equal(out, want);
}

static void test_observer_keys(void **state)
{
    char big[300], out[RATELIMIT_KEY_MAX];

    (void)state;
    check_key("alice", "127.0.0.1:5000", "u:alice");
    check_key("", "127.0.0.1:5000", "a:127.0.0.1");
    check_key(NULL, "127.0.0.1:6001", "a:127.0.0.1"); /* any port, one observer */
    check_key("", "2001:db8:1:2:3:4:5:6:443", "a:2001:db8:1:2::/64");
    check_key("", "2001:db8:1:2:ffff::9:80", "a:2001:db8:1:2::/64");
    check_key("", "::ffff:10.0.0.1:1234", "a:10.0.0.1");
    check_key("", "?:0", "a:?");
    /* A user named like an address is still a user. */
    check_key("a:10.0.0.1", "10.0.0.1:1", "u:a:10.0.0.1");
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ratelimit_observer_key(out, big, "", true);
    assert_int_equal(strlen(out), RATELIMIT_KEY_MAX - 1);
    /* A claimed id (auth = none) is the observer only together with its
     * address: another address claiming it does not spend its budget. */
    ratelimit_observer_key(out, "alice", "127.0.0.1:5000", false);
    assert_string_equal(out, "u:alice@a:127.0.0.1");
    ratelimit_observer_key(out, "alice", "127.0.0.2:5000", false);
    assert_string_equal(out, "u:alice@a:127.0.0.2");
    ratelimit_observer_key(out, "", "127.0.0.2:5000", false);
    assert_string_equal(out, "a:127.0.0.2");
}

/* The reference vectors of SipHash-2-4 (key 00..0f, message 00..n-1). */
static void test_hash_vectors(void **state)
{
    unsigned char msg[64];

    (void)state;
    for (int i = 0; i < 64; i++)
        msg[i] = (unsigned char)i;
    assert_true(ratelimit__hash(seed, msg, 0) == 0x726fdb47dd0e0e31ull);
    assert_true(ratelimit__hash(seed, msg, 8) == 0x93f5f5799a932462ull);
    assert_true(ratelimit__hash(seed, msg, 15) == 0xa129ca6149be45e5ull);
    assert_true(ratelimit__hash(seed, msg, 63) == 0x958a324ceb064572ull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_then_refused),
        cmocka_unit_test(test_refill_is_capped_at_burst),
        cmocka_unit_test(test_refusal_takes_nothing),
        cmocka_unit_test(test_keys_are_independent),
        cmocka_unit_test(test_lagging_clock),
        cmocka_unit_test(test_sweep_removes_only_refilled),
        cmocka_unit_test(test_sweep_slices),
        cmocka_unit_test(test_cap_evicts_the_fullest),
        cmocka_unit_test(test_cap_bounds_memory),
        cmocka_unit_test(test_threads_grant_exactly_the_burst),
        cmocka_unit_test(test_threads_stay_within_rate),
        cmocka_unit_test(test_observer_keys),
        cmocka_unit_test(test_hash_vectors),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
