/* SPDX-License-Identifier: MIT */
/*
 * test_quota.c - the shared per-key counts: takes within the limit, a
 * refusal that takes nothing, kinds and keys independent, entries gone
 * once nothing is held, and several threads at once (never over the
 * limit, everything handed back at the end).
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

#include "quota.h"

static const unsigned char seed[RATELIMIT_SEED_LEN] = {9, 8, 7, 6, 5, 4, 3, 2,
                                                       1, 0, 1, 2, 3, 4, 5, 6};

static void test_take_within_limit(void **state)
{
    struct quota *q = quota_new(seed);

    (void)state;
    assert_true(quota_take(q, "u:alice", QUOTA_WATCHES, 6, 10));
    assert_true(quota_take(q, "u:alice", QUOTA_WATCHES, 4, 10));
    assert_false(quota_take(q, "u:alice", QUOTA_WATCHES, 1, 10));
    assert_int_equal(quota_held(q, "u:alice", QUOTA_WATCHES), 10); /* the refusal took nothing */
    assert_false(quota_take(q, "u:bob", QUOTA_WATCHES, 11, 10));
    assert_int_equal(quota_count(q), 1); /* a refused new key records nothing */
    assert_true(quota_take(q, "u:bob", QUOTA_WATCHES, 10, 10));
    assert_true(quota_take(q, "u:alice", QUOTA_STREAMS, 2, 2)); /* kinds count apart */
    assert_true(quota_take(q, "u:alice", QUOTA_WATCHES, 0, 0));
    quota_give(q, "u:alice", QUOTA_WATCHES, 3);
    assert_true(quota_take(q, "u:alice", QUOTA_WATCHES, 3, 10));
    assert_int_equal(quota_count(q), 2);
    quota_free(q);
}

static void test_entry_gone_when_empty(void **state)
{
    struct quota *q = quota_new(seed);

    (void)state;
    assert_true(quota_take(q, "a:10.0.0.1", QUOTA_WATCHES, 5, 100));
    assert_true(quota_take(q, "a:10.0.0.1", QUOTA_STREAMS, 1, 100));
    quota_give(q, "a:10.0.0.1", QUOTA_WATCHES, 5);
    assert_int_equal(quota_count(q), 1); /* the stream is still held */
    quota_give(q, "a:10.0.0.1", QUOTA_STREAMS, 1);
    assert_int_equal(quota_count(q), 0);
    assert_int_equal(quota_held(q, "a:10.0.0.1", QUOTA_WATCHES), 0);
    for (int i = 0; i < 1000; i++) { /* many keys, then none: nothing left over */
        char key[32];
        snprintf(key, sizeof(key), "u:%d", i);
        assert_true(quota_take(q, key, QUOTA_WATCHES, 1, 1));
    }
    assert_int_equal(quota_count(q), 1000);
    for (int i = 0; i < 1000; i++) {
        char key[32];
        snprintf(key, sizeof(key), "u:%d", i);
        quota_give(q, key, QUOTA_WATCHES, 1);
    }
    assert_int_equal(quota_count(q), 0);
    quota_free(q);
}

#define THREADS 4
#define ROUNDS  20000
#define LIMIT   7

struct worker_arg {
    struct quota *q;
    atomic_int *inside; /* held by all threads now, counted outside the table */
    atomic_int *over;   /* times inside passed LIMIT */
};

static void *worker(void *p)
{
    struct worker_arg *a = p;

    for (int i = 0; i < ROUNDS; i++) {
        if (!quota_take(a->q, "u:shared", QUOTA_STREAMS, 1, LIMIT))
            continue;
        if (atomic_fetch_add(a->inside, 1) + 1 > LIMIT)
            atomic_fetch_add(a->over, 1);
        atomic_fetch_sub(a->inside, 1);
        quota_give(a->q, "u:shared", QUOTA_STREAMS, 1);
    }
    return NULL;
}

static void test_threads_never_over(void **state)
{
    struct quota *q = quota_new(seed);
    atomic_int inside = 0, over = 0;
    struct worker_arg a = {q, &inside, &over};
    pthread_t t[THREADS];

    (void)state;
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, &a);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&over), 0);
    assert_int_equal(quota_count(q), 0);
    quota_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take_within_limit),
        cmocka_unit_test(test_entry_gone_when_empty),
        cmocka_unit_test(test_threads_never_over),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
