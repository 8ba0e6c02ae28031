/* SPDX-License-Identifier: MIT */
/*
 * pool.h - the allocator for long-lived small objects (what an idle
 * connection holds: its conn, WebSocket state, client, session, user,
 * settings entry, room membership and their id strings; and what an idle
 * room holds: the room, its member table and resume ring).
 *
 * Why not malloc: a join burst interleaves these objects with thousands of
 * short-lived ones (bus messages, frames, snapshots) in the same malloc
 * arena; when the short-lived ones are freed they leave holes of a few
 * hundred bytes between long-lived neighbours that malloc_trim() cannot
 * give back, and idle connections cost twice what they hold
 * (docs/architecture.md "Memory"). Objects from this pool never share a
 * page with malloc's, so the arenas hold only transients and trim to
 * nearly nothing after a burst.
 *
 * Shape: size classes from 16 to POOL_MAX bytes (16-byte steps up to 256,
 * then 32, 64 and from 1 KiB 256), each carved from 64 KiB chunks of one reserved
 * address range; no per-object header (the chunk names the class); a
 * chunk whose objects are all freed goes back to the kernel
 * (MADV_DONTNEED) at the next pool_trim(). Larger
 * requests, and requests once the range is used up, go to malloc, and
 * pool_free() tells the two apart by address.
 *
 * Thread-safe: an object may be freed (or reallocated) on any thread, not
 * only the one that allocated it. Under AddressSanitizer free objects are
 * poisoned and the range is a LeakSanitizer root region, so malloc'd
 * memory referenced from pool objects is not reported as leaked; pool
 * objects themselves are not leak-checked.
 */
#ifndef POOL_H
#define POOL_H

#include <stddef.h>

#define POOL_MAX 4096 /* bytes; larger objects come from malloc */

/* Zero-filled, 16-byte aligned; aborts on OOM, never NULL. Free with
 * pool_free() (never free()). */
void *pool_alloc(size_t n);
/* The same without the zero fill, for objects written in full at once. */
void *pool_alloc_uninit(size_t n);
/* Like xrealloc() for p from pool_alloc() (or NULL): keeps the first
 * min(old, n) bytes; bytes beyond the old size are unspecified. */
void *pool_realloc(void *p, size_t n);
/* A pool copy of the NUL-terminated s / of at most n bytes of s. */
char *pool_strdup(const char *s);
char *pool_strndup(const char *s, size_t n);
/* Frees p from any pool_* call; NULL is a no-op. Any thread. */
void pool_free(void *p);
/* Gives back every chunk with no live object (MADV_DONTNEED): frees
 * never do, so that a burst does not map and unmap chunks over and over.
 * Returns how many chunks went back. Any thread; meant for a periodic
 * trim, like malloc_trim() (the workers call both every 10 s). */
size_t pool_trim(void);

struct pool_stats {
    size_t chunks;  /* chunks holding objects or kept for reuse (resident) */
    size_t objects; /* live pool objects (not counting malloc fallbacks) */
    size_t bytes;   /* their size-class bytes */
};

/* A consistent snapshot of the counters. */
void pool_get_stats(struct pool_stats *st);

#endif
