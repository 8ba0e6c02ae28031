/* SPDX-License-Identifier: MIT */
/*
 * pool.c - size classes carved from 64 KiB chunks of one reserved range
 * (see pool.h for why and the contracts).
 *
 * The range (POOL_RANGE bytes of address space) is reserved PROT_NONE at
 * the first allocation and made read-write a chunk at a time, so it costs
 * nothing until used and commit accounting sees only the chunks in use.
 * Each chunk serves one class; its metadata lives outside it, in meta[],
 * so an object's chunk (and so its size) is found from its address alone.
 *
 * A class keeps the chunks that have room on a list (avail). Allocation
 * takes the first one: a previously freed object (the chunk's free list,
 * linked through the objects' first word) or else the next never-used
 * object (carved), so a fresh chunk is touched only as far as it is used.
 * A free pushes the object on its chunk's list. A chunk left with no live
 * object stays with its class until pool_trim() gives it back
 * (MADV_DONTNEED, onto the spare stack any class may take chunks from):
 * giving it back at once cost a madvise() (and a TLB shootdown of the
 * other threads) in the free, and a page fault per page when the class
 * grew again, which a burst (a join storm's snapshots, an expiry burst's
 * frees) did over and over.
 *
 * Locking: one mutex per class guards its chunks' lists and counts; one
 * more guards the spare stack and the high-water mark. A class lock may be
 * held while taking the chunk lock, never the other way round.
 */
#include "pool.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util.h"

#if defined(__SANITIZE_ADDRESS__)
#define POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_ASAN 1
#endif
#endif

#ifdef POOL_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/lsan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define CHUNK_SHIFT 16
#define CHUNK_SIZE  ((size_t)1 << CHUNK_SHIFT)
#define POOL_RANGE  ((size_t)8 << 30) /* reserved address space: 8 GiB */
#define NCHUNKS     (POOL_RANGE / CHUNK_SIZE)
#define NCLASSES    44

struct chunk {
    struct chunk *next; /* in its class's avail list */
    struct chunk *prev;
    void *free;      /* freed objects, linked through their first word */
    uint32_t used;   /* live objects */
    uint32_t carved; /* objects handed out at least once */
    uint32_t cap;    /* objects that fit */
    uint8_t cls;     /* size class */
    bool on_avail;   /* linked in the class's avail list */
};

struct sclass {
    pthread_mutex_t lock;
    struct chunk *avail; /* chunks with a free or never-used object */
    size_t navail;       /* length of avail */
};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static char *pool_base; /* the reserved range; NULL when it could not be */
static pthread_mutex_t chunk_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t chunk_top;           /* chunks made read-write so far */
static uint32_t spare[NCHUNKS];    /* given-back chunk indexes, a stack */
static size_t nspare;              /* its depth */
static struct chunk meta[NCHUNKS]; /* touched only as far as chunk_top */
static struct sclass classes[NCLASSES];
static atomic_size_t live_objects;
static atomic_size_t live_bytes;

static void pool_init(void)
{
    void *p = mmap(NULL, POOL_RANGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    for (size_t i = 0; i < NCLASSES; i++)
        pthread_mutex_init(&classes[i].lock, NULL);
    if (p == MAP_FAILED)
        return; /* every request falls back to malloc */
#ifdef POOL_ASAN
    __lsan_register_root_region(p, POOL_RANGE);
#endif
    pool_base = p;
}

/* 16-byte steps up to 256, 32 up to 512, 64 up to 1 KiB, 256 up to
 * POOL_MAX; n in 1..POOL_MAX. */
static unsigned class_of(size_t n)
{
    if (n <= 256)
        return (unsigned)((n + 15) / 16 - 1);
    if (n <= 512)
        return (unsigned)(16 + (n - 256 + 31) / 32 - 1);
    if (n <= 1024)
        return (unsigned)(24 + (n - 512 + 63) / 64 - 1);
    return (unsigned)(32 + (n - 1024 + 255) / 256 - 1);
}

static size_t class_size(unsigned c)
{
    if (c < 16)
        return 16 * ((size_t)c + 1);
    if (c < 24)
        return 256 + 32 * ((size_t)c - 15);
    if (c < 32)
        return 512 + 64 * ((size_t)c - 23);
    return 1024 + 256 * ((size_t)c - 31);
}

static bool in_range(const void *p)
{
    return pool_base && (uintptr_t)p - (uintptr_t)pool_base < POOL_RANGE;
}

static char *chunk_base(const struct chunk *ch)
{
    return pool_base + (size_t)(ch - meta) * CHUNK_SIZE;
}

static void avail_push(struct sclass *sc, struct chunk *ch)
{
    ch->prev = NULL;
    ch->next = sc->avail;
    if (sc->avail)
        sc->avail->prev = ch;
    sc->avail = ch;
    ch->on_avail = true;
    sc->navail++;
}

static void avail_remove(struct sclass *sc, struct chunk *ch)
{
    if (ch->prev)
        ch->prev->next = ch->next;
    else
        sc->avail = ch->next;
    if (ch->next)
        ch->next->prev = ch->prev;
    ch->on_avail = false;
    sc->navail--;
}

/* A chunk for class c: a spare one, else the next of the range; NULL when
 * the range is used up. */
static struct chunk *chunk_get(unsigned c)
{
    struct chunk *ch = NULL;

    pthread_mutex_lock(&chunk_lock);
    if (nspare > 0) {
        ch = &meta[spare[--nspare]];
    } else if (chunk_top < NCHUNKS && mprotect(pool_base + chunk_top * CHUNK_SIZE, CHUNK_SIZE,
                                               PROT_READ | PROT_WRITE) == 0) {
        ch = &meta[chunk_top++];
    }
    pthread_mutex_unlock(&chunk_lock);
    if (!ch)
        return NULL;
    memset(ch, 0, sizeof(*ch));
    ch->cls = (uint8_t)c;
    ch->cap = (uint32_t)(CHUNK_SIZE / class_size(c));
    POISON(chunk_base(ch), CHUNK_SIZE);
    return ch;
}

/* Gives an empty chunk's pages back; its address stays reserved. */
static void chunk_put(struct chunk *ch)
{
    (void)madvise(chunk_base(ch), CHUNK_SIZE, MADV_DONTNEED);
    pthread_mutex_lock(&chunk_lock);
    spare[nspare++] = (uint32_t)(ch - meta);
    pthread_mutex_unlock(&chunk_lock);
}

/* pool_alloc() without the zero fill when !zero. */
static void *alloc(size_t n, bool zero)
{
    struct sclass *sc;
    struct chunk *ch;
    unsigned c;
    size_t size;
    char *p;

    if (n > POOL_MAX)
        return zero ? xcalloc(1, n) : xmalloc(n);
    pthread_once(&pool_once, pool_init);
    if (!pool_base)
        return zero ? xcalloc(1, n) : xmalloc(n);
    c = class_of(n ? n : 1);
    size = class_size(c);
    sc = &classes[c];
    pthread_mutex_lock(&sc->lock);
    ch = sc->avail;
    if (!ch) {
        ch = chunk_get(c);
        if (!ch) {
            pthread_mutex_unlock(&sc->lock);
            return zero ? xcalloc(1, n) : xmalloc(n);
        }
        avail_push(sc, ch);
    }
    if (ch->free) {
        p = ch->free;
        UNPOISON(p, sizeof(void *));
        memcpy(&ch->free, p, sizeof(void *));
    } else {
        p = chunk_base(ch) + (size_t)ch->carved++ * size;
    }
    ch->used++;
    if (!ch->free && ch->carved == ch->cap)
        avail_remove(sc, ch);
    UNPOISON(p, n);
    pthread_mutex_unlock(&sc->lock);
    if (zero)
        memset(p, 0, n);
    atomic_fetch_add_explicit(&live_objects, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&live_bytes, size, memory_order_relaxed);
    return p;
}

void *pool_alloc(size_t n)
{
    return alloc(n, true);
}

void *pool_alloc_uninit(size_t n)
{
    return alloc(n, false);
}

void pool_free(void *p)
{
    struct chunk *ch;
    struct sclass *sc;
    size_t size;

    if (!p)
        return;
    if (!in_range(p)) {
        free(p);
        return;
    }
    ch = &meta[((char *)p - pool_base) >> CHUNK_SHIFT];
    size = class_size(ch->cls); /* stable: p keeps the chunk in use */
    /* Anything else is not an object this pool handed out. */
    assert(ch->used > 0 && (size_t)((char *)p - chunk_base(ch)) % size == 0);
    sc = &classes[ch->cls];
    pthread_mutex_lock(&sc->lock);
    UNPOISON(p, sizeof(void *));
    memcpy(p, &ch->free, sizeof(void *));
    POISON(p, size);
    ch->free = p;
    ch->used--;
    if (!ch->on_avail)
        avail_push(sc, ch);
    pthread_mutex_unlock(&sc->lock);
    atomic_fetch_sub_explicit(&live_objects, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&live_bytes, size, memory_order_relaxed);
}

void *pool_realloc(void *p, size_t n)
{
    size_t old;
    void *q;

    if (!p)
        return pool_alloc(n);
    if (!in_range(p))
        return xrealloc(p, n); /* a malloc fallback stays one */
    old = class_size(meta[((char *)p - pool_base) >> CHUNK_SHIFT].cls);
    if (n > 0 && n <= POOL_MAX && class_size(class_of(n)) == old) {
        POISON(p, old);
        UNPOISON(p, n);
        return p;
    }
    q = pool_alloc(n);
    UNPOISON(p, old); /* its tail may be poisoned; it is freed next */
    memcpy(q, p, MIN(old, n));
    pool_free(p);
    return q;
}

char *pool_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = pool_alloc(len + 1);

    memcpy(p, s, len);
    return p; /* zero-filled: already terminated */
}

char *pool_strdup(const char *s)
{
    return pool_strndup(s, SIZE_MAX);
}

/* Unlinks class sc's empty chunks onto *out, linked through next. Called
 * with sc->lock held. */
static void take_empty(struct sclass *sc, struct chunk **out)
{
    struct chunk *ch = sc->avail;

    while (ch) {
        struct chunk *next = ch->next;

        if (ch->used == 0) {
            avail_remove(sc, ch);
            ch->next = *out;
            *out = ch;
        }
        ch = next;
    }
}

size_t pool_trim(void)
{
    struct chunk *empty = NULL;
    size_t n = 0;

    if (!pool_base)
        return 0;
    for (unsigned c = 0; c < NCLASSES; c++) {
        pthread_mutex_lock(&classes[c].lock);
        take_empty(&classes[c], &empty);
        pthread_mutex_unlock(&classes[c].lock);
    }
    while (empty) {
        struct chunk *next = empty->next;

        chunk_put(empty);
        empty = next;
        n++;
    }
    return n;
}

void pool_get_stats(struct pool_stats *st)
{
    pthread_mutex_lock(&chunk_lock);
    st->chunks = chunk_top - nspare;
    pthread_mutex_unlock(&chunk_lock);
    st->objects = atomic_load(&live_objects);
    st->bytes = atomic_load(&live_bytes);
}
