/* SPDX-License-Identifier: MIT */
/*
 * util.c - aborting allocators, clocks and hashing.
 *
 * The allocators write one line to stderr naming the size and abort(): an
 * out-of-memory condition is a configuration error (limits too high), not a
 * condition to recover from.
 */
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void oom(size_t n)
{
    fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *xcalloc(size_t nmemb, size_t n)
{
    void *p = calloc(nmemb ? nmemb : 1, n ? n : 1);
    if (!p)
        oom(nmemb * n);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

void *xaligned_alloc(size_t align, size_t n)
{
    void *p = NULL;

    if (posix_memalign(&p, align, n ? n : 1) != 0)
        oom(n);
    return p;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = xmalloc(len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

static uint64_t clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t time_mono_ms(void)
{
    return clock_us(CLOCK_MONOTONIC) / 1000u;
}

uint64_t time_mono_us(void)
{
    return clock_us(CLOCK_MONOTONIC);
}

uint64_t time_wall_ms(void)
{
    return clock_us(CLOCK_REALTIME) / 1000u;
}

uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 14695981039346656037ull; /* the FNV-1a-64 offset basis */
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    return h;
}

int hex_digit_value(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

int ascii_ieq(const char *a, size_t alen, const char *b)
{
    size_t i;
    for (i = 0; i < alen; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (y == '\0')
            return 0;
        if (x >= 'A' && x <= 'Z')
            x += 32;
        if (y >= 'A' && y <= 'Z')
            y += 32;
        if (x != y)
            return 0;
    }
    return b[i] == '\0';
}
