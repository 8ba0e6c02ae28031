/* SPDX-License-Identifier: MIT */
/*
 * lastseen.h - durable last seen on the owner side: the users whose last
 * seen moved, collected and written to the store in batches, and the
 * stored values put back into the presence core at start.
 *
 * What is written. The engine notes a user (lastseen_note(), through
 * engine__lastseen_note()) when their public last seen moves: when they
 * go offline (the core's last seen), when they come online (the moment
 * they were seen, so that after kill -9 a user who was online then reads
 * as seen at least that late), when they become invisible (the moment
 * invisibility began: from then on nothing moves, as if they had gone
 * offline then), and at a clean stop for everyone still online (their
 * latest recorded beat). Heartbeats are never noted: a heartbeat storm
 * writes nothing.
 *
 * Batching. Notes of one user merge (the later time wins) until the next
 * flush, every `last-seen-flush-ms` (4000): one store_lastseen_write() of
 * up to STORE_IDS_MAX users, one batch in flight at a time (a slow
 * database makes bigger batches, not a queue of them). A failed batch is
 * merged back and written with the next one (the store keeps the max, so
 * resending is safe). Pending users, in flight included, are capped at
 * LASTSEEN_PENDING_MAX: beyond it new users are dropped (the ones already
 * waiting, the oldest, are kept), counted in
 * presenced_last_seen_dropped_total and logged. kill -9 loses at most
 * last-seen-flush-ms plus one commit.
 *
 * Restoring. At start each worker pages through the stored table
 * (store_lastseen_load()) and gives the core the rows of the users it
 * owns (presence_set_last_seen(), keeping the later of stored and known),
 * so reads, watch snapshots and events show the stored value. A user read
 * in the moments before their page arrived reads as never seen. A failed
 * page is retried a second later. A stored time from before the machine
 * booted (the core counts monotonic ms from boot) reads as the boot time.
 *
 * The batch (lastseen_*) is pure: no store, no clock, no loop; the engine
 * side (engine__lastseen_*) owns the timer and the store calls.
 */
#ifndef LASTSEEN_H
#define LASTSEEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

#define LASTSEEN_PENDING_MAX 200000 /* users waiting to be written, per worker */

struct lastseen;
struct engine;

struct lastseen_stats {
    uint64_t dropped; /* notes refused at the cap */
    size_t pending;   /* users waiting, in flight excluded */
    size_t in_flight; /* users of the batch being written */
};

/* A new empty batch holding at most cap users (pending and in flight).
 * Aborts on OOM. */
struct lastseen *lastseen_new(size_t cap);
/* Frees everything, a batch in flight included. NULL is a no-op. */
void lastseen_free(struct lastseen *ls);

/* Notes that uid (copied) was last seen at wall_ms (> 0): merges with a
 * pending note of uid (the later wins). 0, or -ENOBUFS when uid is not
 * pending and the cap is reached (dropped and counted), -EINVAL for
 * wall_ms <= 0. A user in the batch in flight may be noted again: it is
 * then pending too, and written once more. */
int lastseen_note(struct lastseen *ls, const char *uid, int64_t wall_ms);

/* Starts a batch: moves up to max (>= 1) pending users into the batch in
 * flight and returns how many, with *pairs pointing at them (owned by ls,
 * valid until lastseen_done()). 0 (nothing moved) when a batch is
 * already in flight or nothing is pending. */
size_t lastseen_take(struct lastseen *ls, size_t max, const struct store_lastseen **pairs);

/* The batch in flight completed: ok drops it; otherwise its users are
 * pending again, merged with newer notes (nothing is lost). No-op without
 * a batch in flight. */
void lastseen_done(struct lastseen *ls, bool ok);

bool lastseen_in_flight(const struct lastseen *ls);
void lastseen_get_stats(const struct lastseen *ls, struct lastseen_stats *out);

/* ---- the engine side (owner worker) ---- */

/* Creates e's batch and its flush timer and starts loading the stored
 * last seen of the users e owns. After engine__privacy_init(). */
void engine__lastseen_init(struct engine *e);
/* uid's public last seen moved to mono_ms (the loop's monotonic ms, > 0):
 * converted to wall time and noted; the flush timer is armed. */
void engine__lastseen_note(struct engine *e, const char *uid, uint64_t mono_ms);
/* A clean stop: submits everything pending now, in as many writes as it
 * takes (the store commits them before store_close() returns). Before
 * engine__privacy_free(), which waits for the completions. */
void engine__lastseen_stop(struct engine *e);
/* Frees the batch; after the inbox was drained. */
void engine__lastseen_free(struct engine *e);
/* Notes the last seen (latest recorded beat) of every owned user with a
 * session whose last seen is public (not invisible): what a clean stop
 * writes. In engine_privacy.c, which knows who is invisible. */
void engine__privacy_note_online(struct engine *e);

#endif
