/* SPDX-License-Identifier: MIT */
/*
 * ratelimit.c - striped table of token buckets (ratelimit.h has the
 * contract), the keyed hash that places keys in it, and the observer key
 * format. It reads no clock and never logs; the caller decides what a
 * refusal means.
 */
#include "ratelimit.h"

#include <arpa/inet.h>
#include <assert.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "list.h"
#include "util.h"

#define CACHE_LINE   64
#define STRIPE_SHIFT 58 /* the hash's top 6 bits pick one of 64 stripes */

_Static_assert(RATELIMIT_STRIPES == 1u << (64 - STRIPE_SHIFT), "stripe bits");

struct rl_entry {
    struct hmap_node node; /* stripe->map, by hash of key */
    struct list lru;       /* stripe->lru, least recently used first */
    uint64_t tokens;       /* milli-tokens at last_ms */
    uint64_t last_ms;      /* time of the last refill */
    char key[];
};

struct rl_stripe {
    alignas(CACHE_LINE) pthread_mutex_t lock; /* guards the rest */
    struct hmap map;                          /* struct rl_entry by key */
    struct list lru;                          /* struct rl_entry.lru */
};

/* Tokens are counted in thousandths: a rate of r per second refills r
 * milli-tokens per millisecond, so refills are exact integer arithmetic. */
struct ratelimit {
    uint64_t rate;      /* tokens per second = milli-tokens per ms */
    uint64_t burst;     /* bucket size in milli-tokens */
    size_t stripe_max;  /* entries per stripe */
    uint64_t k0, k1;    /* hash key */
    atomic_uint cursor; /* next stripe to sweep */
    struct rl_stripe stripes[RATELIMIT_STRIPES];
};

/* ---- SipHash-2-4 (Aumasson and Bernstein, 2012) ---- */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void sip_round(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = ROTL(v[1], 13) ^ v[0];
    v[0] = ROTL(v[0], 32);
    v[2] += v[3];
    v[3] = ROTL(v[3], 16) ^ v[2];
    v[0] += v[3];
    v[3] = ROTL(v[3], 21) ^ v[0];
    v[2] += v[1];
    v[1] = ROTL(v[1], 17) ^ v[2];
    v[2] = ROTL(v[2], 32);
}

static uint64_t load_le(const unsigned char *p, size_t n)
{
    uint64_t x = 0;

    for (size_t i = 0; i < n; i++)
        x |= (uint64_t)p[i] << (8 * i);
    return x;
}

static uint64_t siphash(uint64_t k0, uint64_t k1, const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
                     k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
    uint64_t m;
    size_t i;

    for (i = 0; i + 8 <= n; i += 8) {
        m = load_le(s + i, 8);
        v[3] ^= m;
        sip_round(v);
        sip_round(v);
        v[0] ^= m;
    }
    m = load_le(s + i, n - i) | (uint64_t)n << 56;
    v[3] ^= m;
    sip_round(v);
    sip_round(v);
    v[0] ^= m;
    v[2] ^= 0xff;
    for (i = 0; i < 4; i++)
        sip_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

uint64_t ratelimit__hash(const unsigned char seed[RATELIMIT_SEED_LEN], const void *p, size_t n)
{
    return siphash(load_le(seed, 8), load_le(seed + 8, 8), p, n);
}

/* ---- the table ---- */

struct ratelimit *ratelimit_new(uint32_t rate, uint32_t burst, size_t max_entries,
                                const unsigned char seed[RATELIMIT_SEED_LEN])
{
    struct ratelimit *rl = xaligned_alloc(CACHE_LINE, sizeof(*rl));

    assert(rate > 0 && burst > 0); /* a disabled limit has no table */
    memset(rl, 0, sizeof(*rl));
    rl->rate = rate;
    rl->burst = (uint64_t)burst * 1000;
    rl->stripe_max = MAX((size_t)1, (max_entries + RATELIMIT_STRIPES - 1) / RATELIMIT_STRIPES);
    rl->k0 = load_le(seed, 8);
    rl->k1 = load_le(seed + 8, 8);
    atomic_init(&rl->cursor, 0);
    for (size_t i = 0; i < RATELIMIT_STRIPES; i++) {
        pthread_mutex_init(&rl->stripes[i].lock, NULL);
        list_init(&rl->stripes[i].lru);
    }
    return rl;
}

static void entry_free(struct rl_stripe *s, struct rl_entry *e)
{
    hmap_remove(&s->map, &e->node);
    list_del(&e->lru);
    free(e);
}

void ratelimit_free(struct ratelimit *rl)
{
    struct list *pos, *tmp;

    if (!rl)
        return;
    for (size_t i = 0; i < RATELIMIT_STRIPES; i++) {
        struct rl_stripe *s = &rl->stripes[i];
        list_foreach_safe(pos, tmp, &s->lru)
        {
            entry_free(s, container_of(pos, struct rl_entry, lru));
        }
        hmap_release(&s->map);
        pthread_mutex_destroy(&s->lock);
    }
    free(rl);
}

/* The entry's milli-tokens at now, refilled and capped (a now before its
 * last refill, from a worker whose clock lags, adds nothing). Comparing
 * the time with what is missing first keeps the product from overflowing. */
static uint64_t level(const struct ratelimit *rl, const struct rl_entry *e, uint64_t now)
{
    uint64_t elapsed = now > e->last_ms ? now - e->last_ms : 0;

    if (elapsed > (rl->burst - e->tokens) / rl->rate)
        return rl->burst;
    return e->tokens + elapsed * rl->rate;
}

/* Keys are used up to RATELIMIT_KEY_MAX - 1 bytes, in the hash too, so
 * a longer one is the same key every time. */
static size_t key_len(const char *key)
{
    return strnlen(key, RATELIMIT_KEY_MAX - 1);
}

static struct rl_entry *find(struct rl_stripe *s, const char *key, size_t len, uint64_t h)
{
    for (struct hmap_node *n = hmap_find(&s->map, h); n; n = hmap_find_next(n, h)) {
        struct rl_entry *e = container_of(n, struct rl_entry, node);
        if (memcmp(e->key, key, len) == 0 && e->key[len] == '\0')
            return e;
    }
    return NULL;
}

/* Makes room in a full stripe: of the RATELIMIT_EVICT_SCAN least recently
 * used entries, drops the one with the most tokens (a full one at once),
 * the entry whose loss grants its observer the least. */
static void evict(const struct ratelimit *rl, struct rl_stripe *s, uint64_t now)
{
    struct rl_entry *victim = NULL;
    uint64_t most = 0;
    struct list *pos;
    unsigned seen = 0;

    list_foreach(pos, &s->lru)
    {
        struct rl_entry *e = container_of(pos, struct rl_entry, lru);
        uint64_t t = level(rl, e, now);
        if (!victim || t > most) {
            most = t;
            victim = e;
        }
        if (t >= rl->burst || ++seen == RATELIMIT_EVICT_SCAN)
            break;
    }
    assert(victim != NULL); /* only called on a full stripe, which is never empty */
    entry_free(s, victim);
}

static struct rl_stripe *stripe_of(struct ratelimit *rl, uint64_t h)
{
    return &rl->stripes[h >> STRIPE_SHIFT];
}

bool ratelimit_take(struct ratelimit *rl, const char *key, uint32_t n, uint64_t now_ms)
{
    size_t len = key_len(key);
    uint64_t h = siphash(rl->k0, rl->k1, key, len);
    struct rl_stripe *s = stripe_of(rl, h);
    uint64_t want = (uint64_t)n * 1000;
    struct rl_entry *e;
    bool ok = true;

    if (n == 0)
        return true;
    if (want > rl->burst)
        return false;
    pthread_mutex_lock(&s->lock);
    e = find(s, key, len, h);
    if (e) {
        e->tokens = level(rl, e, now_ms);
        e->last_ms = MAX(e->last_ms, now_ms);
        ok = e->tokens >= want;
        if (ok)
            e->tokens -= want;
        list_del(&e->lru); /* refused or not, it is in use */
        list_insert_tail(&s->lru, &e->lru);
        goto out_unlock;
    }
    if (s->map.count >= rl->stripe_max)
        evict(rl, s, now_ms);
    e = xmalloc(sizeof(*e) + len + 1);
    memcpy(e->key, key, len);
    e->key[len] = '\0';
    e->tokens = rl->burst - want;
    e->last_ms = now_ms;
    hmap_insert(&s->map, &e->node, h);
    list_insert_tail(&s->lru, &e->lru);
out_unlock:
    pthread_mutex_unlock(&s->lock);
    return ok;
}

double ratelimit_available(struct ratelimit *rl, const char *key, uint64_t now_ms)
{
    size_t len = key_len(key);
    uint64_t h = siphash(rl->k0, rl->k1, key, len);
    struct rl_stripe *s = stripe_of(rl, h);
    struct rl_entry *e;
    uint64_t t;

    pthread_mutex_lock(&s->lock);
    e = find(s, key, len, h);
    t = e ? level(rl, e, now_ms) : rl->burst;
    pthread_mutex_unlock(&s->lock);
    return (double)t / 1000.0;
}

/*
 * The sweep: every entry of a stripe is looked at, since refill times do
 * not follow LRU order (a drained entry used long ago may still be
 * refilling while one touched later for a single token is full). A stripe
 * holds at most stripe_max entries, so one stripe is a bounded, short
 * critical section; callers spread stripes over time (nstripes per call)
 * and over workers (the shared cursor).
 */
size_t ratelimit_sweep(struct ratelimit *rl, unsigned nstripes, uint64_t now_ms)
{
    unsigned first = atomic_fetch_add_explicit(&rl->cursor, nstripes, memory_order_relaxed);
    struct list *pos, *tmp;
    size_t removed = 0;

    nstripes = MIN(nstripes, (unsigned)RATELIMIT_STRIPES);
    for (unsigned i = 0; i < nstripes; i++) {
        struct rl_stripe *s = &rl->stripes[(first + i) % RATELIMIT_STRIPES];
        pthread_mutex_lock(&s->lock);
        list_foreach_safe(pos, tmp, &s->lru)
        {
            struct rl_entry *e = container_of(pos, struct rl_entry, lru);
            if (level(rl, e, now_ms) >= rl->burst) {
                entry_free(s, e);
                removed++;
            }
        }
        pthread_mutex_unlock(&s->lock);
    }
    return removed;
}

size_t ratelimit_count(struct ratelimit *rl)
{
    size_t n = 0;

    for (size_t i = 0; i < RATELIMIT_STRIPES; i++) {
        pthread_mutex_lock(&rl->stripes[i].lock);
        n += rl->stripes[i].map.count;
        pthread_mutex_unlock(&rl->stripes[i].lock);
    }
    return n;
}

/* ---- observer keys ---- */

/* Writes "a:" and the address part of peer ("ip:port"): IPv4 as is,
 * IPv4-mapped IPv6 as IPv4, other IPv6 as its /64 ("2001:db8:1:2::/64"). */
static void address_key(char out[RATELIMIT_KEY_MAX], const char *peer)
{
    char ip[INET6_ADDRSTRLEN] = "";
    const char *colon = strrchr(peer, ':');
    size_t len = colon ? (size_t)(colon - peer) : strlen(peer);
    struct in6_addr a6;

    if (len < sizeof(ip)) {
        memcpy(ip, peer, len);
        ip[len] = '\0';
    }
    if (inet_pton(AF_INET6, ip, &a6) != 1) {
        snprintf(out, RATELIMIT_KEY_MAX, "a:%.*s", (int)len, peer);
        return;
    }
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
        inet_ntop(AF_INET, &a6.s6_addr[12], ip, sizeof(ip));
        snprintf(out, RATELIMIT_KEY_MAX, "a:%s", ip);
        return;
    }
    memset(&a6.s6_addr[8], 0, 8);
    inet_ntop(AF_INET6, &a6, ip, sizeof(ip));
    snprintf(out, RATELIMIT_KEY_MAX, "a:%s/64", ip);
}

void ratelimit_observer_key(char out[RATELIMIT_KEY_MAX], const char *uid, const char *peer,
                            bool verified)
{
    char addr[RATELIMIT_KEY_MAX];

    address_key(addr, peer ? peer : "");
    if (uid && uid[0] && verified)
        snprintf(out, RATELIMIT_KEY_MAX, "u:%s", uid);
    else if (uid && uid[0]) {
        size_t len, k;
        snprintf(out, RATELIMIT_KEY_MAX, "u:%s@", uid);
        len = strlen(out);
        k = strnlen(addr, RATELIMIT_KEY_MAX - 1 - len);
        memcpy(out + len, addr, k);
        out[len + k] = '\0';
    } else
        memcpy(out, addr, RATELIMIT_KEY_MAX);
}
