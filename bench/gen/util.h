/*
 * util.h - presence-bench: aborting allocators, clocks, fatal errors and a
 * growable byte buffer shared by every other file of the generator.
 *
 * Out of memory aborts; nothing in the generator checks for NULL.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Allocators that abort on failure; never return NULL. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);

/* Prints "presence-bench: <message>" (plus strerror(errno) for die_errno)
 * and exits 2. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void die_errno(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* CLOCK_MONOTONIC in microseconds: the one clock every process of the
 * generator stamps payloads with and measures latency against. */
uint64_t now_us(void);

/* CLOCK_REALTIME in seconds (JWT exp). */
int64_t wall_s(void);

/* A private growable byte string. Data is [data + off, data + len). */
struct buf {
    char *data;
    size_t len; /* bytes written */
    size_t off; /* bytes consumed from the front */
    size_t cap;
};

/* Appends n bytes; grows as needed. */
void buf_add(struct buf *b, const void *p, size_t n);

/* Appends a printf-formatted string. */
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reserves room for n more bytes and returns a pointer to it; the caller
 * adds what it wrote to b->len. */
char *buf_reserve(struct buf *b, size_t n);

/* Unread bytes. */
static inline size_t buf_used(const struct buf *b)
{
    return b->len - b->off;
}

/* Drops n bytes from the front; empties and frees the storage when all is
 * consumed, so idle connections own no buffer memory. */
void buf_consume(struct buf *b, size_t n);

/* Frees the storage; b may be reused. NULL-safe. */
void buf_free(struct buf *b);

/* Parses an unsigned decimal at p (up to end); stores the end in *next.
 * Returns 0 with *next == p if there is no digit. */
uint64_t parse_u64(const char *p, const char *end, const char **next);

/* Finds needle (length m) in [p, end); NULL if absent. */
const char *find(const char *p, const char *end, const char *needle, size_t m);

#define FIND(p, end, lit) find((p), (end), (lit), sizeof(lit) - 1)

#endif
