/* SPDX-License-Identifier: MIT */
/*
 * hmap.h - intrusive chained hash table (the engine's index structure).
 *
 * Nodes are embedded in their owners, like list.h links: the table never
 * allocates a node, only its bucket array, which doubles when the load
 * passes 1 and is never shrunk (halving on mass deletes is not worth the
 * churn for presence state that comes back). Keys are the owner's
 * business: the caller hashes (hash_bytes), and compares keys while
 * walking the nodes with that hash:
 *
 *   for (n = hmap_find(m, h); n; n = hmap_find_next(n, h))
 *       if (key_equal(container_of(n, struct user, node), id))
 *           return ...;
 *
 * Not thread-safe: a table belongs to one worker.
 */
#ifndef HMAP_H
#define HMAP_H

#include <stddef.h>
#include <stdint.h>

struct hmap_node {
    struct hmap_node *_next; /* private */
    uint64_t hash;           /* set by hmap_insert */
};

struct hmap {
    struct hmap_node **buckets; /* NULL until the first insert */
    size_t nbuckets;            /* power of two, or 0 */
    size_t count;               /* nodes in the table */
};

/* A zero-filled struct hmap is an empty table. */
void hmap_release(struct hmap *m); /* frees the bucket array; nodes are the caller's */
/* Links n under hash (duplicates allowed: the caller checks first). */
void hmap_insert(struct hmap *m, struct hmap_node *n, uint64_t hash);
/* Unlinks n, which must be in m. */
void hmap_remove(struct hmap *m, struct hmap_node *n);
/* First node with this hash, or NULL; then hmap_find_next(prev, hash). */
struct hmap_node *hmap_find(const struct hmap *m, uint64_t hash);
struct hmap_node *hmap_find_next(const struct hmap_node *prev, uint64_t hash);
/* Iteration over every node: pos = hmap_first(m, &i); pos; pos = hmap_next(m, pos, &i).
 * The current node may be removed if the caller fetched the next one first. */
struct hmap_node *hmap_first(const struct hmap *m, size_t *iter);
struct hmap_node *hmap_next(const struct hmap *m, const struct hmap_node *n, size_t *iter);

#endif
