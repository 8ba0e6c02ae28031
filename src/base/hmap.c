/* SPDX-License-Identifier: MIT */
/*
 * hmap.c - bucket array of singly linked chains; the bucket is the low
 * bits of the hash. Growth rehashes by relinking nodes (no allocation per
 * node), so a refresh or a lookup never allocates. Bucket arrays live as
 * long as their tables, so small ones (a room's members) come from pool.h;
 * large ones fall through it to malloc. Chains average up to HMAP_LOAD
 * nodes: every connection is in several tables (clients, sessions, users,
 * ...), so a bucket per node would cost 8-16 B per table and connection,
 * while a lookup compares the stored hash before touching a node's key.
 */
#include "hmap.h"

#include <assert.h>
#include <stdlib.h>

#include "pool.h"
#include "util.h"

#define HMAP_LOAD 2 /* nodes per bucket before the array doubles */

void hmap_release(struct hmap *m)
{
    pool_free(m->buckets);
    m->buckets = NULL;
    m->nbuckets = m->count = 0;
}

static void grow(struct hmap *m)
{
    size_t n = m->nbuckets ? m->nbuckets * 2 : 16;
    struct hmap_node **b = pool_alloc(n * sizeof(*b));

    for (size_t i = 0; i < m->nbuckets; i++) {
        struct hmap_node *node = m->buckets[i];
        while (node) {
            struct hmap_node *next = node->_next;
            size_t k = node->hash & (n - 1);
            node->_next = b[k];
            b[k] = node;
            node = next;
        }
    }
    pool_free(m->buckets);
    m->buckets = b;
    m->nbuckets = n;
}

void hmap_insert(struct hmap *m, struct hmap_node *n, uint64_t hash)
{
    size_t k;

    if (m->count >= HMAP_LOAD * m->nbuckets)
        grow(m);
    k = hash & (m->nbuckets - 1);
    n->hash = hash;
    n->_next = m->buckets[k];
    m->buckets[k] = n;
    m->count++;
}

void hmap_remove(struct hmap *m, struct hmap_node *n)
{
    struct hmap_node **pp = &m->buckets[n->hash & (m->nbuckets - 1)];

    while (*pp != n) {
        assert(*pp != NULL); /* n must be in m: a caller bug otherwise */
        pp = &(*pp)->_next;
    }
    *pp = n->_next;
    n->_next = NULL;
    m->count--;
}

struct hmap_node *hmap_find(const struct hmap *m, uint64_t hash)
{
    struct hmap_node *n;

    if (m->nbuckets == 0)
        return NULL;
    for (n = m->buckets[hash & (m->nbuckets - 1)]; n; n = n->_next)
        if (n->hash == hash)
            return n;
    return NULL;
}

struct hmap_node *hmap_find_next(const struct hmap_node *prev, uint64_t hash)
{
    struct hmap_node *n;

    for (n = prev->_next; n; n = n->_next)
        if (n->hash == hash)
            return n;
    return NULL;
}

static struct hmap_node *scan(const struct hmap *m, size_t *iter)
{
    for (; *iter < m->nbuckets; (*iter)++)
        if (m->buckets[*iter])
            return m->buckets[*iter];
    return NULL;
}

struct hmap_node *hmap_first(const struct hmap *m, size_t *iter)
{
    *iter = 0;
    return scan(m, iter);
}

struct hmap_node *hmap_next(const struct hmap *m, const struct hmap_node *n, size_t *iter)
{
    if (n->_next)
        return n->_next;
    (*iter)++;
    return scan(m, iter);
}
