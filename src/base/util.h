/* SPDX-License-Identifier: MIT */
/*
 * util.h - allocation, containers and small helpers every module uses.
 *
 * Allocation never fails from the caller's point of view: x*alloc() log the
 * size and abort() on out-of-memory (Redis zmalloc_default_oom). Memory is
 * bounded by configured limits instead, so no caller checks for NULL.
 * Error codes: actions return 0 or a negative errno; project errors live
 * below PS_EBASE so they never collide with errno values.
 */
#ifndef UTIL_H
#define UTIL_H

#include <stddef.h>
#include <stdint.h>

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))
#define ARRAY_SIZE(a)                   (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b)                       ((a) < (b) ? (a) : (b))
#define MAX(a, b)                       ((a) > (b) ? (a) : (b))

/* Parser results (pure parsers return >= 0 bytes consumed or one of these). */
#define PS_PARTIAL (-2)  /* need more input */
#define PS_EBASE   10000 /* project error codes are -(PS_EBASE + n) */

void *xmalloc(size_t n);                 /* aborts on OOM; never NULL */
void *xcalloc(size_t nmemb, size_t n);   /* ditto, zero-filled */
void *xrealloc(void *p, size_t n);       /* ditto; p may be NULL */
char *xstrdup(const char *s);            /* ditto */
char *xstrndup(const char *s, size_t n); /* copies at most n bytes, NUL-terminates */
/* Like xmalloc, aligned to align (a power of two, at least sizeof(void *));
 * free() releases it. */
void *xaligned_alloc(size_t align, size_t n);

/* Monotonic clock in milliseconds / microseconds (CLOCK_MONOTONIC). */
uint64_t time_mono_ms(void);
uint64_t time_mono_us(void);
/* Wall clock in milliseconds since the epoch (CLOCK_REALTIME). */
uint64_t time_wall_ms(void);

/* 64-bit FNV-1a hash of (p, n), the standard one (offset basis
 * 14695981039346656037, prime 1099511628211): in-process hash maps and
 * the worker that owns a key (bus.c). Nothing stored or sent to another
 * node depends on it (Redis routing and tags use redis_fnv1a64()). */
uint64_t hash_bytes(const void *p, size_t n);

/* Case-insensitive ASCII comparison of (a, alen) with NUL-terminated b:
 * returns 1 when equal. */
int ascii_ieq(const char *a, size_t alen, const char *b);
/* The value of one hexadecimal digit (either case), or -1. */
int hex_digit_value(int ch);

#endif
