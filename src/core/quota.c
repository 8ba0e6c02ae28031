/* SPDX-License-Identifier: MIT */
/*
 * quota.c - counts per key shared by the workers (quota.h): striped
 * mutexes over intrusive hash tables keyed by SipHash. Does not know what
 * the counts mean or what the limits are; the callers pass them.
 */
#include "quota.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "util.h"

struct entry {
    struct hmap_node node;
    uint32_t held[QUOTA_KINDS];
    char key[];
};

struct stripe {
    pthread_mutex_t lock;
    struct hmap map;
    size_t count;
};

struct quota {
    unsigned char seed[RATELIMIT_SEED_LEN];
    struct stripe stripes[QUOTA_STRIPES];
};

struct quota *quota_new(const unsigned char seed[RATELIMIT_SEED_LEN])
{
    struct quota *q = xcalloc(1, sizeof(*q));

    memcpy(q->seed, seed, sizeof(q->seed));
    for (size_t i = 0; i < QUOTA_STRIPES; i++)
        pthread_mutex_init(&q->stripes[i].lock, NULL);
    return q;
}

void quota_free(struct quota *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < QUOTA_STRIPES; i++) {
        struct stripe *s = &q->stripes[i];
        size_t it;
        struct hmap_node *n = hmap_first(&s->map, &it);

        while (n) {
            struct hmap_node *next = hmap_next(&s->map, n, &it);
            hmap_remove(&s->map, n);
            free(container_of(n, struct entry, node));
            n = next;
        }
        hmap_release(&s->map);
        pthread_mutex_destroy(&s->lock);
    }
    free(q);
}

/* The stripe of hash h: its top bits (the chains use all of them). */
static struct stripe *stripe_of(struct quota *q, uint64_t h)
{
    return &q->stripes[(h >> 60) & (QUOTA_STRIPES - 1)];
}

static struct entry *find(struct stripe *s, const char *key, uint64_t h)
{
    for (struct hmap_node *n = hmap_find(&s->map, h); n; n = hmap_find_next(n, h)) {
        struct entry *en = container_of(n, struct entry, node);
        if (strcmp(en->key, key) == 0)
            return en;
    }
    return NULL;
}

static bool is_empty(const struct entry *en)
{
    for (size_t k = 0; k < QUOTA_KINDS; k++)
        if (en->held[k])
            return false;
    return true;
}

bool quota_take(struct quota *q, const char *key, enum quota_kind k, uint32_t n, uint32_t max)
{
    uint64_t h = ratelimit__hash(q->seed, key, strlen(key));
    struct stripe *s = stripe_of(q, h);
    struct entry *en;
    bool ok;

    if (n == 0)
        return true;
    pthread_mutex_lock(&s->lock);
    en = find(s, key, h);
    ok = (en ? en->held[k] : 0) + (uint64_t)n <= max;
    if (ok && !en) {
        size_t len = strlen(key);
        en = xcalloc(1, sizeof(*en) + len + 1);
        memcpy(en->key, key, len + 1);
        hmap_insert(&s->map, &en->node, h);
        s->count++;
    }
    if (ok)
        en->held[k] += n;
    pthread_mutex_unlock(&s->lock);
    return ok;
}

void quota_give(struct quota *q, const char *key, enum quota_kind k, uint32_t n)
{
    uint64_t h = ratelimit__hash(q->seed, key, strlen(key));
    struct stripe *s = stripe_of(q, h);
    struct entry *en;

    if (n == 0)
        return;
    pthread_mutex_lock(&s->lock);
    en = find(s, key, h);
    assert(en && en->held[k] >= n);
    if (en) {
        en->held[k] -= MIN(n, en->held[k]);
        if (is_empty(en)) {
            hmap_remove(&s->map, &en->node);
            s->count--;
            free(en);
        }
    }
    pthread_mutex_unlock(&s->lock);
}

uint32_t quota_held(struct quota *q, const char *key, enum quota_kind k)
{
    uint64_t h = ratelimit__hash(q->seed, key, strlen(key));
    struct stripe *s = stripe_of(q, h);
    struct entry *en;
    uint32_t v;

    pthread_mutex_lock(&s->lock);
    en = find(s, key, h);
    v = en ? en->held[k] : 0;
    pthread_mutex_unlock(&s->lock);
    return v;
}

size_t quota_count(struct quota *q)
{
    size_t total = 0;

    for (size_t i = 0; i < QUOTA_STRIPES; i++) {
        pthread_mutex_lock(&q->stripes[i].lock);
        total += q->stripes[i].count;
        pthread_mutex_unlock(&q->stripes[i].lock);
    }
    return total;
}
