/* SPDX-License-Identifier: MIT */
/*
 * ratelimit.h - token buckets keyed by a string and shared by every worker
 * thread: the per-observer query limit (observer-query-rate/-burst).
 *
 * One observer (a user id, or the address of an anonymous client) may
 * query `rate` ids per second with bursts of `burst`, across all of its
 * connections. Those land on different workers, so the table is
 * process-wide: the one piece of mutable state workers share
 * (docs/architecture.md says why).
 *
 * Contention: RATELIMIT_STRIPES stripes, each a mutex, an hmap and an LRU
 * list on its own cache lines. A key's stripe and chain come from a keyed
 * hash (SipHash-2-4 under a per-process random seed), so clients cannot
 * pile their keys into one stripe or one chain. A take holds one stripe's
 * lock for a lookup and a little arithmetic.
 *
 * Memory: an entry exists only while it carries information. A bucket that
 * has refilled (idle for burst/rate seconds) is the same as no entry, and
 * ratelimit_sweep() removes it. At most max_entries exist (split evenly
 * over the stripes): a new key in a full stripe evicts, of the
 * RATELIMIT_EVICT_SCAN least recently used entries, the one holding the
 * most tokens. Forgetting an entry hands its observer at most
 * burst - tokens, so that is the smallest error on offer; the cap costs
 * accuracy, never availability (a shared overflow bucket would refuse
 * every newcomer during a reconnect storm instead).
 *
 * Time: every call takes `now` in monotonic milliseconds; nothing here
 * reads a clock. Workers' loop clocks differ a little: a `now` older than
 * an entry's last refill refills nothing and does not move it back.
 *
 * Threads: ratelimit_take/available/sweep/count may run on any threads at
 * once. ratelimit_new/free may not: free only once every user has stopped.
 * Ownership: the table owns its entries and copies keys; callers keep
 * theirs.
 */
#ifndef RATELIMIT_H
#define RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RATELIMIT_STRIPES    64  /* lock stripes (a power of two) */
#define RATELIMIT_EVICT_SCAN 8   /* entries looked at per eviction */
#define RATELIMIT_SEED_LEN   16  /* bytes of hash key */
#define RATELIMIT_KEY_MAX    192 /* observer key bytes, NUL included */

struct ratelimit;

/* A table of buckets of `burst` tokens refilled at `rate` per second (both
 * > 0), holding at most max_entries keys (at least one per stripe), hashed
 * under seed (random bytes). Aborts on OOM; never NULL. */
struct ratelimit *ratelimit_new(uint32_t rate, uint32_t burst, size_t max_entries,
                                const unsigned char seed[RATELIMIT_SEED_LEN]);
void ratelimit_free(struct ratelimit *rl); /* NULL is a no-op */

/* Takes n tokens from key's bucket at now_ms (a key without an entry has a
 * full one). Returns true when the bucket held n; false takes nothing,
 * and n > burst is always false. n == 0 is true and records nothing; a
 * refused new key records nothing either. key is copied. */
bool ratelimit_take(struct ratelimit *rl, const char *key, uint32_t n, uint64_t now_ms);
/* Tokens key could take at now_ms (burst without an entry); changes nothing. */
double ratelimit_available(struct ratelimit *rl, const char *key, uint64_t now_ms);
/* Removes the entries whose bucket is full again at now_ms from the next
 * nstripes stripes (round robin over all callers, so workers calling it in
 * turn sweep disjoint slices). Returns the number removed. */
size_t ratelimit_sweep(struct ratelimit *rl, unsigned nstripes, uint64_t now_ms);
/* Entries held now (each stripe read under its lock, so only a snapshot). */
size_t ratelimit_count(struct ratelimit *rl);

/* Writes the observer key of a query into out: "u:<uid>" for a verified
 * user (a non-empty uid from a token), "u:<uid>@a:<address>" for a user
 * id that is only claimed (auth = none: anyone may claim any id, so the id
 * alone must not let one client spend another's budget), else
 * "a:<address>" for an anonymous client, from peer as conn.h stores it
 * ("ip:port"). IPv4 (also IPv4-mapped IPv6) keeps the whole address; other
 * IPv6 addresses are cut to their /64, the block one subscriber gets. The
 * prefixes keep a user id from ever equalling an address. Longer input is
 * truncated to RATELIMIT_KEY_MAX - 1 bytes. */
void ratelimit_observer_key(char out[RATELIMIT_KEY_MAX], const char *uid, const char *peer,
                            bool verified);

/* SipHash-2-4 of (p, n) under seed; exposed for its test vectors. */
uint64_t ratelimit__hash(const unsigned char seed[RATELIMIT_SEED_LEN], const void *p, size_t n);

#endif
