/* SPDX-License-Identifier: MIT */
/*
 * wheel.h - hashed timing wheel for TTLs, heartbeats and timeouts.
 *
 * Timers are embedded in their owners; this module never allocates a timer.
 * All times are monotonic milliseconds supplied by the caller (loop_now() in
 * the server, a fake clock in tests), so nothing here reads a clock.
 * add, del and re-add (refresh) are O(1) list operations: refreshing a
 * heartbeat moves one intrusive node, it never allocates or sifts a heap.
 * Resolution is WHEEL_TICK_MS: a timer fires at the first wheel_run() whose
 * now >= expire_at, never earlier. A run may be given a budget
 * (wheel_run_budget): what it cannot fire stays due and fires at the
 * following runs, so a loop can interleave a burst of expiries with I/O.
 */
#ifndef WHEEL_H
#define WHEEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "list.h"

#define WHEEL_TICK_MS 10u   /* slot width */
#define WHEEL_SLOTS   4096u /* power of two; one revolution = 40.96 s */

struct wheel;
struct wheel_timer;
typedef void wheel_cb(struct wheel_timer *t, uint64_t now);

/* Zero-fill (or wheel_timer_init) before first use. */
struct wheel_timer {
    struct list _link;  /* private to wheel.c */
    uint64_t expire_at; /* absolute ms; set by wheel_add() */
    wheel_cb *cb;       /* called once when due; the timer is unlinked first */
};

void wheel_timer_init(struct wheel_timer *t, wheel_cb *cb);
struct wheel *wheel_new(uint64_t now); /* aborts on OOM */
void wheel_free(struct wheel *w);      /* NULL is a no-op; timers left linked are dropped */
/* Links t to fire at expire_at (re-links if already linked: a refresh). */
void wheel_add(struct wheel *w, struct wheel_timer *t, uint64_t expire_at);
void wheel_del(struct wheel_timer *t); /* no-op if not linked */
bool wheel_is_linked(const struct wheel_timer *t);
/* Fires every timer with expire_at <= now that was linked when the run
 * began, in no particular order within a tick; a callback may add, delete
 * or re-add any timer, itself included. A timer a callback adds with
 * expire_at <= now fires at the next run, never in the same one, so a
 * self-re-arming timer cannot loop forever. Returns the number fired.
 * Same as wheel_run_budget(w, now, SIZE_MAX). */
size_t wheel_run(struct wheel *w, uint64_t now);
/* wheel_run() that fires at most max timers (0: none). The due timers it
 * leaves stay linked and due: until a run has fired them, wheel_next()
 * returns a time <= now, and following runs fire them before the timers
 * that became due after this run (except timers added late, with
 * expire_at in a tick a run had already passed, which may go first).
 * It fires fewer than max only when no timer that was linked and due when
 * it began is still waiting (callbacks may have deleted or moved some). */
size_t wheel_run_budget(struct wheel *w, uint64_t now, size_t max);
/* Absolute ms at or before which the next timer may be due, or UINT64_MAX
 * when no timer is linked. Never later than the true next expiry. */
uint64_t wheel_next(const struct wheel *w);
size_t wheel_count(const struct wheel *w); /* linked timers */

#endif
