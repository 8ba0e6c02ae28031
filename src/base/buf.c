/* SPDX-License-Identifier: MIT */
/*
 * buf.c - growable buffers (doubling growth, never shrinking until release)
 * and refcounted payloads (one allocation: header plus bytes).
 */
#include "buf.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "util.h"

void buf_release(struct buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void buf_reserve(struct buf *b, size_t extra)
{
    size_t need = b->len + extra;
    size_t cap = b->cap ? b->cap : 64;

    if (need <= b->cap)
        return;
    while (cap < need)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void buf_append(struct buf *b, const void *p, size_t n)
{
    if (n == 0)
        return;
    buf_reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void buf_append_str(struct buf *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    buf_reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void buf_consume(struct buf *b, size_t n)
{
    assert(n <= b->len); /* callers consume only what they parsed */
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

/* Payloads bigger than this come from pool.h, smaller ones from malloc.
 * Frames of this size are mostly room snapshots, made by the thousand in a
 * join burst and freed once written: from malloc, the last few of each
 * size stay in the thread's tcache, scattered over the pages the burst
 * touched, which malloc_trim() cannot return (~100 B per connection after
 * 19,000 joins). In pool.h they fill chunks of their own size class that
 * go back to the kernel once empty (at the next pool_trim()). Small frames stay with malloc, so
 * that they do not churn the classes of long-lived objects. */
#define PAYLOAD_POOL_MIN 512

struct payload *payload_new(size_t cap)
{
    size_t n = sizeof(struct payload) + cap;
    struct payload *p = n > PAYLOAD_POOL_MIN ? pool_alloc_uninit(n) : xmalloc(n);

    atomic_init(&p->refs, 1);
    p->len = 0;
    p->cap = cap;
    return p;
}

struct payload *payload_from(const void *data, size_t n)
{
    struct payload *p = payload_new(n);

    memcpy(p->data, data, n);
    p->len = n;
    return p;
}

struct payload *payload_lasting(const void *data, size_t n)
{
    struct payload *p = pool_alloc(sizeof(*p) + n);

    atomic_init(&p->refs, 1);
    memcpy(p->data, data, n);
    p->len = p->cap = n;
    return p;
}

struct payload *payload_ref(struct payload *p)
{
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return p;
}

void payload_unref(struct payload *p)
{
    if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
        pool_free(p); /* from malloc or pool.h: it tells them apart */
}

size_t payload_append(struct payload *p, const void *data, size_t n)
{
    size_t room = p->cap - p->len;

    if (n > room)
        n = room;
    memcpy(p->data + p->len, data, n);
    p->len += n;
    return n;
}
