/* SPDX-License-Identifier: MIT */
/*
 * test_hmap.c - the intrusive hash table: insert/find/remove, colliding
 * hashes, growth keeps every node, iteration visits each node once and
 * tolerates removing the current node; hash_bytes() is the standard
 * FNV-1a-64 (published test vectors).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hmap.h"
#include "util.h"

struct item {
    struct hmap_node node;
    int key;
    int seen;
};

static struct item *find(struct hmap *m, int key, uint64_t h)
{
    for (struct hmap_node *n = hmap_find(m, h); n; n = hmap_find_next(n, h)) {
        struct item *it = container_of(n, struct item, node);
        if (it->key == key)
            return it;
    }
    return NULL;
}

static uint64_t h_of(int key)
{
    return hash_bytes(&key, sizeof(key));
}

/* The FNV-1a-64 vectors of the FNV reference (isthe.com/chongo/tech/comp/fnv). */
static void test_hash_bytes_is_fnv1a64(void **state)
{
    (void)state;
    assert_true(hash_bytes("", 0) == UINT64_C(0xcbf29ce484222325));
    assert_true(hash_bytes("a", 1) == UINT64_C(0xaf63dc4c8601ec8c));
    assert_true(hash_bytes("foobar", 6) == UINT64_C(0x85944171f73967e8));
}

static void test_insert_find_remove_many(void **state)
{
    enum { N = 5000 };
    struct item *items = calloc(N, sizeof(*items));
    struct hmap m = {0};

    (void)state;
    for (int i = 0; i < N; i++) {
        items[i].key = i;
        hmap_insert(&m, &items[i].node, h_of(i));
    }
    assert_int_equal(m.count, N);
    /* Two nodes per bucket before the array doubles: 4096 for 5000, not 8192. */
    assert_int_equal(m.nbuckets, 4096);
    for (int i = 0; i < N; i++)
        assert_ptr_equal(find(&m, i, h_of(i)), &items[i]);
    assert_null(find(&m, N + 1, h_of(N + 1)));
    for (int i = 0; i < N; i += 2)
        hmap_remove(&m, &items[i].node);
    assert_int_equal(m.count, N / 2);
    for (int i = 0; i < N; i++)
        assert_true((find(&m, i, h_of(i)) != NULL) == (i % 2 == 1));
    hmap_release(&m);
    free(items);
}

static void test_colliding_hashes(void **state)
{
    struct item a = {.key = 1}, b = {.key = 2}, c = {.key = 3};
    struct hmap m = {0};

    (void)state;
    hmap_insert(&m, &a.node, 42);
    hmap_insert(&m, &b.node, 42);
    hmap_insert(&m, &c.node, 42 + 16); /* same bucket, other hash */
    assert_ptr_equal(find(&m, 1, 42), &a);
    assert_ptr_equal(find(&m, 2, 42), &b);
    assert_null(find(&m, 3, 42));
    assert_ptr_equal(find(&m, 3, 42 + 16), &c);
    hmap_remove(&m, &b.node);
    assert_null(find(&m, 2, 42));
    assert_ptr_equal(find(&m, 1, 42), &a);
    hmap_release(&m);
}

static void test_iteration_with_removal(void **state)
{
    enum { N = 300 };
    struct item items[N];
    struct hmap m = {0};
    struct hmap_node *n, *next;
    size_t it;
    int visited = 0;

    (void)state;
    memset(items, 0, sizeof(items));
    for (int i = 0; i < N; i++) {
        items[i].key = i;
        hmap_insert(&m, &items[i].node, h_of(i));
    }
    for (n = hmap_first(&m, &it); n; n = next) {
        struct item *x = container_of(n, struct item, node);
        next = hmap_next(&m, n, &it);
        x->seen++;
        visited++;
        if (x->key % 3 == 0)
            hmap_remove(&m, n);
    }
    assert_int_equal(visited, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(items[i].seen, 1);
    assert_int_equal(m.count, N - N / 3);
    hmap_release(&m);
}

static void test_empty_table(void **state)
{
    struct hmap m = {0};
    size_t it;

    (void)state;
    assert_null(hmap_find(&m, 7));
    assert_null(hmap_first(&m, &it));
    hmap_release(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_bytes_is_fnv1a64),
        cmocka_unit_test(test_insert_find_remove_many),
        cmocka_unit_test(test_colliding_hashes),
        cmocka_unit_test(test_iteration_with_removal),
        cmocka_unit_test(test_empty_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
