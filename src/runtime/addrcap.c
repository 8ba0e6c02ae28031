/* SPDX-License-Identifier: MIT */
/*
 * addrcap.c - the per-address connection table (addrcap.h): striped
 * mutexes over small intrusive hash tables, one entry per address that
 * has a connection, freed when its last connection is forgotten.
 */
#include "addrcap.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "conn.h"
#include "hmap.h"
#include "log.h"
#include "pool.h"
#include "util.h"

#define ADDRCAP_STRIPES 64

struct addr_entry {
    struct hmap_node node; /* stripe->map, by key hash */
    uint64_t key;          /* addr_key() */
    uint32_t pending;
    uint32_t established;
};

struct stripe {
    pthread_mutex_t lock;
    struct hmap map; /* struct addr_entry */
} __attribute__((aligned(64)));

struct addrcap {
    uint32_t max_pending;     /* 0 = no cap */
    uint32_t max_established; /* 0 = no cap */
    uint64_t seed;            /* random per process */
    struct stripe stripes[ADDRCAP_STRIPES];
};

/* The address as one 64-bit key: an IPv4 address with bit 63 set (no
 * IPv6 /64 prefix in use has it: 8000::/1 is unassigned), or the first 64
 * bits of an IPv6 one. False when c has no address. */
static bool addr_key(const struct conn *c, uint64_t *key)
{
    uint64_t k = 0;

    if (c->peer_family == AF_INET || (c->peer_family == AF_INET6 && c->peer_v4mapped)) {
        for (int i = 0; i < 4; i++)
            k = k << 8 | c->peer_ip.v4[i];
        *key = k | (1ull << 63);
        return true;
    }
    if (c->peer_family == AF_INET6 && c->peer_ip.v6) {
        for (int i = 0; i < 8; i++)
            k = k << 8 | c->peer_ip.v6[i];
        *key = k & ~(1ull << 63);
        return true;
    }
    return false;
}

/* A keyed mix (splitmix64's finaliser over key ^ seed): which addresses
 * share a stripe depends on the secret seed. */
static uint64_t key_hash(const struct addrcap *t, uint64_t key)
{
    uint64_t z = key ^ t->seed;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

struct addrcap *addrcap_new(uint32_t max_pending, uint32_t max_established)
{
    struct addrcap *t = xcalloc(1, sizeof(*t));

    t->max_pending = max_pending;
    t->max_established = max_established;
    if (getrandom(&t->seed, sizeof(t->seed), 0) != (ssize_t)sizeof(t->seed))
        fatal("addrcap", "getrandom");
    for (int i = 0; i < ADDRCAP_STRIPES; i++)
        pthread_mutex_init(&t->stripes[i].lock, NULL);
    return t;
}

void addrcap_free(struct addrcap *t)
{
    if (!t)
        return;
    for (int i = 0; i < ADDRCAP_STRIPES; i++) {
        /* Every connection was forgotten, so every entry is gone. */
        assert(t->stripes[i].map.count == 0);
        hmap_release(&t->stripes[i].map);
        pthread_mutex_destroy(&t->stripes[i].lock);
    }
    free(t);
}

/* The entry of key in its stripe (locked by the caller), made when absent
 * and make is set; NULL otherwise. */
static struct addr_entry *entry_get(struct stripe *s, uint64_t key, uint64_t h, bool make)
{
    struct addr_entry *e;

    for (struct hmap_node *n = hmap_find(&s->map, h); n; n = hmap_find_next(n, h)) {
        e = container_of(n, struct addr_entry, node);
        if (e->key == key)
            return e;
    }
    if (!make)
        return NULL;
    e = pool_alloc(sizeof(*e));
    e->key = key;
    hmap_insert(&s->map, &e->node, h);
    return e;
}

static void entry_put(struct stripe *s, struct addr_entry *e)
{
    if (e->pending || e->established)
        return;
    hmap_remove(&s->map, &e->node);
    pool_free(e);
}

/* Locks and returns c's stripe with its key hash, or NULL (no address). */
static struct stripe *lock_for(struct addrcap *t, const struct conn *c, uint64_t *key, uint64_t *h)
{
    struct stripe *s;

    if (!t || !addr_key(c, key))
        return NULL;
    *h = key_hash(t, *key);
    s = &t->stripes[*h % ADDRCAP_STRIPES];
    pthread_mutex_lock(&s->lock);
    return s;
}

bool addrcap_admit(struct addrcap *t, struct conn *c)
{
    uint64_t key, h;
    struct stripe *s = lock_for(t, c, &key, &h);
    struct addr_entry *e;
    bool ok;

    if (!s)
        return true;
    e = entry_get(s, key, h, true);
    ok = !t->max_pending || e->pending < t->max_pending;
    if (ok) {
        e->pending++;
        c->addr_state = ADDRCAP_PENDING;
    }
    entry_put(s, e);
    pthread_mutex_unlock(&s->lock);
    return ok;
}

bool addrcap_establish(struct addrcap *t, struct conn *c)
{
    uint64_t key, h;
    struct stripe *s;
    struct addr_entry *e;
    bool ok;

    if (c->addr_state != ADDRCAP_PENDING || !(s = lock_for(t, c, &key, &h)))
        return true;
    e = entry_get(s, key, h, false);
    assert(e); /* a pending connection keeps its entry */
    ok = !t->max_established || e->established < t->max_established;
    if (ok) {
        e->pending--;
        e->established++;
        c->addr_state = ADDRCAP_ESTABLISHED;
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

void addrcap_forget(struct addrcap *t, struct conn *c)
{
    uint64_t key, h;
    struct stripe *s;
    struct addr_entry *e;

    if (c->addr_state == ADDRCAP_NONE || !(s = lock_for(t, c, &key, &h)))
        return;
    e = entry_get(s, key, h, false);
    assert(e); /* a counted connection keeps its entry */
    if (c->addr_state == ADDRCAP_PENDING)
        e->pending--;
    else
        e->established--;
    c->addr_state = ADDRCAP_NONE;
    entry_put(s, e);
    pthread_mutex_unlock(&s->lock);
}

void addrcap_counts(struct addrcap *t, const struct conn *c, uint32_t *pending,
                    uint32_t *established)
{
    uint64_t key, h;
    struct stripe *s = lock_for(t, c, &key, &h);
    struct addr_entry *e = s ? entry_get(s, key, h, false) : NULL;

    *pending = e ? e->pending : 0;
    *established = e ? e->established : 0;
    if (s)
        pthread_mutex_unlock(&s->lock);
}
