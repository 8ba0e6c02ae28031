/* SPDX-License-Identifier: MIT */
/*
 * buf.h - growable byte buffers and refcounted shared payloads.
 *
 * struct buf is a private, growable byte string (curl DYNBUF style): the
 * owner appends, consumes from the front, and frees. Pointers into it are
 * invalidated by the next buf_* call that may grow it.
 *
 * struct payload is an immutable, refcounted byte block: a broadcast frame
 * is encoded once into a payload and every recipient's output queue holds a
 * reference. The count is atomic, so a payload may be shared by workers.
 * While its creator holds the only reference it may still append to it
 * (payload_append); once shared it must never change. Payloads come from
 * malloc, except those made to be held as long as connections
 * (payload_lasting), which come from pool.h.
 */
#ifndef BUF_H
#define BUF_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>

struct buf {
    char *data; /* NULL until the first append */
    size_t len; /* bytes in use */
    size_t cap; /* bytes allocated */
};

/* A zero-filled struct buf is an empty buffer; buf_release frees its memory. */
void buf_release(struct buf *b);
void buf_reserve(struct buf *b, size_t extra); /* ensures cap >= len + extra */
void buf_append(struct buf *b, const void *p, size_t n);
void buf_append_str(struct buf *b, const char *s);
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_consume(struct buf *b, size_t n); /* drops n bytes from the front */

struct payload {
    atomic_uint refs; /* owners; freed when it drops to zero */
    size_t len;       /* bytes used in data */
    size_t cap;       /* bytes allocated in data */
    char data[];
};

/* New payload with one reference and room for cap bytes (len 0). */
struct payload *payload_new(size_t cap);
/* New payload holding a copy of (p, n), one reference. */
struct payload *payload_from(const void *p, size_t n);
/* Like payload_from, in pool.h memory: for bytes held while clients stay
 * connected (a room's resume ring, members' metadata), which in malloc's
 * arenas would pin the pages a burst's transient frames leave free. */
struct payload *payload_lasting(const void *p, size_t n);
struct payload *payload_ref(struct payload *p); /* returns p */
void payload_unref(struct payload *p);          /* NULL is a no-op */
/* Appends up to the free room; returns bytes copied. Only while unshared. */
size_t payload_append(struct payload *p, const void *data, size_t n);

#endif
