/* SPDX-License-Identifier: MIT */
/*
 * quota.h - counts held per key and shared by every worker thread: the
 * per-user limits on watched users (max-watch-per-user) and on concurrent
 * event streams (max-streams-per-user).
 *
 * The key is an observer key (ratelimit_observer_key(): a verified user
 * id, or a claimed one at its address), the same one observer-query-rate
 * charges. One user's connections land on
 * different workers, so the table is process-wide, like ratelimit.h's.
 * Each key carries QUOTA_KINDS counters: quota_take() adds n to one when
 * the result stays within max, quota_give() hands it back.
 *
 * Memory: an entry exists only while one of its counters is non-zero, so
 * the table holds at most one entry per watch link or stream alive, each
 * already bounded by max-connections and max-watch.
 *
 * Contention: QUOTA_STRIPES stripes, each a mutex and an hmap. A key's
 * stripe and chain come from SipHash under a per-process random seed, so
 * clients cannot pile their keys into one chain. A take or give holds one
 * stripe's lock for a lookup and an addition.
 *
 * Threads: quota_take/give/held/count from any threads at once;
 * quota_new/free from one thread while no other uses the table.
 * Ownership: the table copies keys; callers keep theirs.
 */
#ifndef QUOTA_H
#define QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ratelimit.h"

#define QUOTA_STRIPES 16 /* lock stripes (a power of two) */

enum quota_kind {
    QUOTA_WATCHES, /* watch links: users watched, one per connection and user */
    QUOTA_STREAMS, /* event streams open */
    QUOTA_KINDS,
};

struct quota;

/* An empty table hashing under seed (random bytes). Aborts on OOM. */
struct quota *quota_new(const unsigned char seed[RATELIMIT_SEED_LEN]);
void quota_free(struct quota *q); /* NULL is a no-op; frees what is still held */

/* Adds n to key's counter k when that leaves it at most max; returns
 * whether it did (n == 0 is always true and records nothing). */
bool quota_take(struct quota *q, const char *key, enum quota_kind k, uint32_t n, uint32_t max);
/* Hands back n of key's counter k, taken before (more than it holds is a
 * bug: an assert, else clamped to 0). */
void quota_give(struct quota *q, const char *key, enum quota_kind k, uint32_t n);
/* What key holds of k now (a snapshot). */
uint32_t quota_held(struct quota *q, const char *key, enum quota_kind k);
/* Keys with something held now (each stripe read under its lock). */
size_t quota_count(struct quota *q);

#endif
