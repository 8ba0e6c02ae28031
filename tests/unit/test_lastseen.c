/* SPDX-License-Identifier: MIT */
/*
 * test_lastseen.c - the last-seen batch (lastseen.h): merging, one batch
 * in flight, failures merged back, the cap that keeps the oldest.
 *
 * The batch is pure, so these tests drive it directly; the store and the
 * timer around it are covered by tests/integration/lastseen-durable.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lastseen.h"

/* The value of uid in pairs[0..n), or -1. */
static int64_t find(const struct store_lastseen *pairs, size_t n, const char *uid)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(pairs[i].user, uid) == 0)
            return pairs[i].last_seen_ms;
    return -1;
}

static void test_notes_merge_to_the_latest(void **state)
{
    struct lastseen *ls = lastseen_new(100);
    const struct store_lastseen *pairs;
    size_t n;

    (void)state;
    assert_int_equal(lastseen_note(ls, "a", 0), -EINVAL);
    assert_int_equal(lastseen_note(ls, "a", 100), 0);
    assert_int_equal(lastseen_note(ls, "a", 300), 0);
    assert_int_equal(lastseen_note(ls, "a", 200), 0); /* older: kept 300 */
    assert_int_equal(lastseen_note(ls, "b", 50), 0);
    n = lastseen_take(ls, 10, &pairs);
    assert_int_equal(n, 2);
    assert_int_equal(find(pairs, n, "a"), 300);
    assert_int_equal(find(pairs, n, "b"), 50);
    lastseen_done(ls, true);
    assert_false(lastseen_in_flight(ls));
    assert_int_equal(lastseen_take(ls, 10, &pairs), 0); /* nothing left */
    lastseen_free(ls);
}

static void test_one_batch_in_flight(void **state)
{
    struct lastseen *ls = lastseen_new(100);
    const struct store_lastseen *pairs;
    struct lastseen_stats st;
    char flying[8];
    size_t n;

    (void)state;
    lastseen_note(ls, "a", 1);
    lastseen_note(ls, "b", 2);
    lastseen_note(ls, "c", 3);
    n = lastseen_take(ls, 2, &pairs); /* at most max */
    assert_int_equal(n, 2);
    assert_true(lastseen_in_flight(ls));
    assert_int_equal(lastseen_take(ls, 10, &pairs), 0); /* one at a time */
    /* Notes go on collecting meanwhile, also for users in flight. */
    snprintf(flying, sizeof(flying), "%s", pairs[0].user);
    lastseen_note(ls, flying, 10);
    lastseen_get_stats(ls, &st);
    assert_int_equal(st.in_flight, 2);
    assert_int_equal(st.pending, 2);
    lastseen_done(ls, true);
    n = lastseen_take(ls, 10, &pairs);
    assert_int_equal(n, 2);
    assert_int_equal(find(pairs, n, flying), 10);
    lastseen_done(ls, true);
    lastseen_free(ls);
}

static void test_failed_batch_merges_back(void **state)
{
    struct lastseen *ls = lastseen_new(100);
    const struct store_lastseen *pairs;
    size_t n;

    (void)state;
    lastseen_note(ls, "a", 100);
    lastseen_note(ls, "b", 200);
    assert_int_equal(lastseen_take(ls, 10, &pairs), 2);
    lastseen_note(ls, "a", 50);  /* older than the one in flight */
    lastseen_note(ls, "b", 250); /* newer */
    lastseen_done(ls, false);    /* the write failed: nothing lost */
    n = lastseen_take(ls, 10, &pairs);
    assert_int_equal(n, 2);
    assert_int_equal(find(pairs, n, "a"), 100);
    assert_int_equal(find(pairs, n, "b"), 250);
    lastseen_done(ls, false);
    lastseen_done(ls, false); /* no batch in flight: a no-op */
    n = lastseen_take(ls, 10, &pairs);
    assert_int_equal(n, 2);
    lastseen_free(ls); /* with a batch in flight: freed too (ASan checks) */
}

static void test_cap_keeps_the_oldest(void **state)
{
    struct lastseen *ls = lastseen_new(3);
    const struct store_lastseen *pairs;
    struct lastseen_stats st;
    size_t n;

    (void)state;
    assert_int_equal(lastseen_note(ls, "a", 1), 0);
    assert_int_equal(lastseen_note(ls, "b", 2), 0);
    assert_int_equal(lastseen_take(ls, 10, &pairs), 2); /* in flight counts */
    assert_int_equal(lastseen_note(ls, "c", 3), 0);
    assert_int_equal(lastseen_note(ls, "d", 4), -ENOBUFS);
    assert_int_equal(lastseen_note(ls, "c", 5), 0); /* pending: merges */
    lastseen_get_stats(ls, &st);
    assert_int_equal(st.dropped, 1);
    lastseen_done(ls, false); /* merged back: still within the cap */
    lastseen_get_stats(ls, &st);
    assert_int_equal(st.pending, 3);
    n = lastseen_take(ls, 10, &pairs);
    assert_int_equal(n, 3);
    assert_int_equal(find(pairs, n, "a"), 1);
    assert_int_equal(find(pairs, n, "c"), 5);
    assert_int_equal(find(pairs, n, "d"), -1);
    lastseen_done(ls, true);
    assert_int_equal(lastseen_note(ls, "d", 6), 0); /* room again */
    lastseen_free(ls);
}

/* A large flush goes out in batches of at most max, each user once. */
static void test_large_flush_in_batches(void **state)
{
    struct lastseen *ls = lastseen_new(50000);
    const struct store_lastseen *pairs;
    char uid[32];
    size_t n, total = 0, batches = 0;

    (void)state;
    for (int i = 0; i < 25000; i++) {
        snprintf(uid, sizeof(uid), "user%d", i);
        assert_int_equal(lastseen_note(ls, uid, i + 1), 0);
    }
    while ((n = lastseen_take(ls, STORE_IDS_MAX, &pairs)) > 0) {
        assert_true(n <= STORE_IDS_MAX);
        for (size_t i = 0; i < n; i++) {
            int k = atoi(pairs[i].user + 4);
            assert_int_equal(pairs[i].last_seen_ms, k + 1);
        }
        total += n;
        batches++;
        lastseen_done(ls, true);
    }
    assert_int_equal(total, 25000);
    assert_int_equal(batches, 3);
    lastseen_free(ls);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_notes_merge_to_the_latest),
        cmocka_unit_test(test_one_batch_in_flight),
        cmocka_unit_test(test_failed_batch_merges_back),
        cmocka_unit_test(test_cap_keeps_the_oldest),
        cmocka_unit_test(test_large_flush_in_batches),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
