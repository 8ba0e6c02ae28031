/*
 * util.c - presence-bench: allocators, clocks, errors, byte buffers and the
 * tiny scanners the protocol readers are built from.
 */
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort();
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        abort();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        abort();
    return p;
}

static void vdie(int err, const char *fmt, va_list ap) __attribute__((noreturn));

static void vdie(int err, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (err)
        fprintf(stderr, "presence-bench: %s: %s\n", msg, strerror(err));
    else
        fprintf(stderr, "presence-bench: %s\n", msg);
    exit(2);
}

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdie(0, fmt, ap);
}

void die_errno(const char *fmt, ...)
{
    int err = errno;
    va_list ap;
    va_start(ap, fmt);
    vdie(err, fmt, ap);
}

uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int64_t wall_s(void)
{
    return (int64_t)time(NULL);
}

char *buf_reserve(struct buf *b, size_t n)
{
    if (b->off && b->off == b->len)
        b->off = b->len = 0;
    if (b->len + n > b->cap) {
        if (b->off) {
            memmove(b->data, b->data + b->off, b->len - b->off);
            b->len -= b->off;
            b->off = 0;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        if (cap != b->cap) {
            b->data = xrealloc(b->data, cap);
            b->cap = cap;
        }
    }
    return b->data + b->len;
}

void buf_add(struct buf *b, const void *p, size_t n)
{
    memcpy(buf_reserve(b, n), p, n);
    b->len += n;
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *dst = buf_reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(dst, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void buf_consume(struct buf *b, size_t n)
{
    b->off += n;
    if (b->off >= b->len)
        buf_free(b);
}

void buf_free(struct buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->off = b->cap = 0;
}

uint64_t parse_u64(const char *p, const char *end, const char **next)
{
    uint64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9')
        v = v * 10 + (uint64_t)(*p++ - '0');
    *next = p;
    return v;
}

const char *find(const char *p, const char *end, const char *needle, size_t m)
{
    if (p >= end || (size_t)(end - p) < m)
        return NULL;
    return memmem(p, (size_t)(end - p), needle, m);
}
