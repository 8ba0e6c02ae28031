/* SPDX-License-Identifier: MIT */
/*
 * test_pool.c - the long-lived object pool: zero-filled aligned objects
 * of every class, reuse, realloc across classes, the malloc fallback above
 * POOL_MAX, empty chunks given back, and threads freeing what others
 * allocated.
 *
 * The pool is process-wide, so each test compares counters with their
 * value at its start. cmocka is not thread-safe: the threads record what
 * they saw and the main thread asserts after joining them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "pool.h"
#include "util.h"

static size_t live_objects(void)
{
    struct pool_stats st;

    pool_get_stats(&st);
    return st.objects;
}

static size_t live_chunks(void)
{
    struct pool_stats st;

    pool_get_stats(&st);
    return st.chunks;
}

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static void test_every_size_zeroed_aligned(void **state)
{
    static unsigned char *v[POOL_MAX + 1];
    size_t before = live_objects();

    (void)state;
    for (size_t n = 0; n <= POOL_MAX; n++) {
        v[n] = pool_alloc(n);
        assert_non_null(v[n]);
        assert_int_equal((uintptr_t)v[n] % 16, 0);
        assert_true(all_zero(v[n], n));
        memset(v[n], 0xa5, n); /* overlapping objects would corrupt others */
    }
    for (size_t n = 0; n <= POOL_MAX; n++) {
        for (size_t i = 0; i < n; i++)
            assert_int_equal(v[n][i], 0xa5);
    }
    assert_int_equal(live_objects(), before + POOL_MAX + 1);
    for (size_t n = 0; n <= POOL_MAX; n++)
        pool_free(v[n]);
    assert_int_equal(live_objects(), before);
    pool_free(NULL);
}

static void test_freed_object_reused_zeroed(void **state)
{
    char *a = pool_alloc(40);
    char *b;

    (void)state;
    memset(a, 'x', 40);
    pool_free(a);
    b = pool_alloc(33); /* same class (48 bytes): the same slot comes back */
    assert_ptr_equal(a, b);
    assert_true(all_zero((unsigned char *)b, 33));
    pool_free(b);
}

static void test_realloc_keeps_prefix(void **state)
{
    char *p = pool_alloc(10);

    (void)state;
    memcpy(p, "0123456789", 10);
    p = pool_realloc(p, 12); /* same class: stays */
    p = pool_realloc(p, 300);
    assert_memory_equal(p, "0123456789", 10);
    p = pool_realloc(p, 5000); /* to the malloc fallback */
    assert_memory_equal(p, "0123456789", 10);
    p = pool_realloc(p, 6000);
    assert_memory_equal(p, "0123456789", 10);
    pool_free(p);
    p = pool_realloc(NULL, 8);
    assert_true(all_zero((unsigned char *)p, 8));
    p = pool_realloc(p, 4);
    pool_free(p);
}

static void test_strdup(void **state)
{
    char *a = pool_strdup("user-42");
    char *b = pool_strndup("session-abcdef", 7);
    char *c = pool_strdup("");

    (void)state;
    assert_string_equal(a, "user-42");
    assert_string_equal(b, "session");
    assert_string_equal(c, "");
    pool_free(a);
    pool_free(b);
    pool_free(c);
}

static void test_large_falls_back_to_malloc(void **state)
{
    size_t before = live_objects();
    char *p = pool_alloc(POOL_MAX + 1);

    (void)state;
    assert_true(all_zero((unsigned char *)p, POOL_MAX + 1));
    assert_int_equal(live_objects(), before); /* not a pool object */
    pool_free(p);
}

/* Fills several chunks of one class, frees everything: the chunks stay
 * (no madvise in a free) until pool_trim() gives them all back. */
static void test_empty_chunks_given_back(void **state)
{
    enum { N = 2000 }; /* 2000 x 208 bytes: 7 chunks */
    static void *v[N];
    size_t chunks = live_chunks();

    (void)state;
    for (size_t i = 0; i < N; i++)
        v[i] = pool_alloc(200);
    assert_true(live_chunks() >= chunks + 6);
    for (size_t i = 0; i < N; i++)
        pool_free(v[i]);
    assert_true(live_chunks() >= chunks + 6);
    assert_true(pool_trim() >= 6);
    assert_true(live_chunks() <= chunks);
    /* And the pages are usable again, zero-filled. */
    for (size_t i = 0; i < N; i++) {
        v[i] = pool_alloc(200);
        assert_true(all_zero(v[i], 200));
    }
    for (size_t i = 0; i < N; i++)
        pool_free(v[i]);
}

/* Producers allocate objects stamped with their address and hand them
 * over a shared ring; consumers check the stamp and free them, so every
 * object is freed on a thread that did not allocate it while both keep
 * allocating. */
#define NPAIRS 4
#define PER    20000
#define RING   1024

struct ring {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    void *slot[RING];
    size_t head, count;
    bool done;
};

struct pair {
    struct ring ring;
    size_t bad; /* stamps that did not match */
};

static void *producer(void *arg)
{
    struct pair *pr = arg;

    for (size_t i = 0; i < PER; i++) {
        size_t n = 8 + (i * 37) % 600;
        uintptr_t *o = pool_alloc(n);

        o[0] = (uintptr_t)o;
        pthread_mutex_lock(&pr->ring.lock);
        while (pr->ring.count == RING)
            pthread_cond_wait(&pr->ring.cond, &pr->ring.lock);
        pr->ring.slot[(pr->ring.head + pr->ring.count++) % RING] = o;
        pthread_cond_broadcast(&pr->ring.cond);
        pthread_mutex_unlock(&pr->ring.lock);
    }
    pthread_mutex_lock(&pr->ring.lock);
    pr->ring.done = true;
    pthread_cond_broadcast(&pr->ring.cond);
    pthread_mutex_unlock(&pr->ring.lock);
    return NULL;
}

static void *consumer(void *arg)
{
    struct pair *pr = arg;

    for (;;) {
        uintptr_t *o;
        void *mine = pool_alloc(24); /* allocate on this side too */

        pthread_mutex_lock(&pr->ring.lock);
        while (pr->ring.count == 0 && !pr->ring.done)
            pthread_cond_wait(&pr->ring.cond, &pr->ring.lock);
        if (pr->ring.count == 0) {
            pthread_mutex_unlock(&pr->ring.lock);
            pool_free(mine);
            return NULL;
        }
        o = pr->ring.slot[pr->ring.head];
        pr->ring.head = (pr->ring.head + 1) % RING;
        pr->ring.count--;
        pthread_cond_broadcast(&pr->ring.cond);
        pthread_mutex_unlock(&pr->ring.lock);
        if (o[0] != (uintptr_t)o)
            pr->bad++;
        pool_free(o);
        pool_free(mine);
    }
}

/* An emptied chunk stays until pool_trim(), and the class still works
 * afterwards; pool_alloc_uninit() draws from the same classes. */
static void test_trim_gives_back_the_kept_chunk(void **state)
{
    void *p;
    size_t chunks;

    (void)state;
    pool_trim();
    chunks = live_chunks();
    p = pool_alloc(3000); /* a class no other test leaves objects in */
    assert_int_equal(live_chunks(), chunks + 1);
    pool_free(p);
    assert_int_equal(live_chunks(), chunks + 1); /* kept */
    p = pool_alloc_uninit(3000);                 /* the kept chunk, no new one */
    assert_int_equal(live_chunks(), chunks + 1);
    memset(p, 0xab, 3000);
    pool_free(p);
    assert_int_equal(pool_trim(), 1);
    assert_int_equal(live_chunks(), chunks);
    assert_int_equal(pool_trim(), 0);
    p = pool_alloc(3000);
    assert_true(all_zero(p, 3000));
    assert_int_equal(live_chunks(), chunks + 1);
    pool_free(p);
    pool_trim();
}

static void test_threads_free_each_others(void **state)
{
    static struct pair pairs[NPAIRS];
    pthread_t t[2 * NPAIRS];
    size_t before = live_objects();

    (void)state;
    for (size_t i = 0; i < NPAIRS; i++) {
        memset(&pairs[i], 0, sizeof(pairs[i]));
        pthread_mutex_init(&pairs[i].ring.lock, NULL);
        pthread_cond_init(&pairs[i].ring.cond, NULL);
        assert_int_equal(pthread_create(&t[2 * i], NULL, producer, &pairs[i]), 0);
        assert_int_equal(pthread_create(&t[2 * i + 1], NULL, consumer, &pairs[i]), 0);
    }
    for (size_t i = 0; i < 2 * NPAIRS; i++)
        pthread_join(t[i], NULL);
    for (size_t i = 0; i < NPAIRS; i++) {
        assert_int_equal(pairs[i].bad, 0);
        pthread_mutex_destroy(&pairs[i].ring.lock);
        pthread_cond_destroy(&pairs[i].ring.cond);
    }
    assert_int_equal(live_objects(), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_size_zeroed_aligned),
        cmocka_unit_test(test_freed_object_reused_zeroed),
        cmocka_unit_test(test_realloc_keeps_prefix),
        cmocka_unit_test(test_strdup),
        cmocka_unit_test(test_large_falls_back_to_malloc),
        cmocka_unit_test(test_empty_chunks_given_back),
        cmocka_unit_test(test_trim_gives_back_the_kept_chunk),
        cmocka_unit_test(test_threads_free_each_others),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
