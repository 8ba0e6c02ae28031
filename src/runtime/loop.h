/* SPDX-License-Identifier: MIT */
/*
 * loop.h - one epoll reactor per worker thread (Redis ae.c in spirit).
 *
 * Level-triggered epoll; fd watchers (struct loop_io) and timers (struct
 * wheel_timer) are embedded in their owners. One iteration is:
 *   epoll_wait (timeout from the wheel) -> fd callbacks -> due timers, at
 *   most LOOP_TIMER_BUDGET -> before-sleep hooks (flush coalesced writes,
 *   free deferred closes, hand cross-worker batches to the bus).
 * Timers the budget leaves due fire in the next iterations, whose
 * epoll_wait does not sleep (timeout 0) until they have. Hooks slice their
 * deferrable work the same way: past LOOP_SLICE_US of busy time they stop
 * and call loop_more(), and the next iteration does not sleep either.
 * The loop caches the monotonic time once per iteration (loop_now) and
 * measures iteration lag (time spent outside epoll_wait) for metrics.
 * A loop belongs to exactly one thread; only loop_wake() and loop_stop()
 * may be called from other threads.
 */
#ifndef LOOP_H
#define LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "wheel.h"

struct loop;
struct loop_io;

/* events: EPOLLIN/EPOLLOUT/EPOLLERR/EPOLLHUP bits that are ready. */
typedef void loop_io_cb(struct loop_io *io, uint32_t events);
typedef void loop_hook_cb(struct loop *l, void *data);

/* Zero-fill before first use. 16 bytes: one is embedded in every
 * connection. */
struct loop_io {
    loop_io_cb *cb;  /* called with ready events; NULL while not registered */
    int fd;          /* watched descriptor (not owned) */
    uint32_t events; /* interest set currently registered */
};

#define LOOP_MAX_HOOKS 8

/*
 * Timers one iteration fires at most. A burst of expiries (10,000 sessions
 * whose TTLs end within a second) then runs in slices with I/O and the hooks in
 * between, instead of stalling every other connection of the worker for
 * the whole burst. A timer costs from ~1 us to ~200 us with the work it
 * leaves to the hooks (a session's end: its close frame and close, its
 * rooms' leaves). Smaller: shorter stalls, but more iterations (an
 * epoll_wait and a round of hooks each) to drain a burst; larger: the
 * reverse. In W6's expiry burst (bench/, 2 workers on 2 cores) another
 * room's cursor p99 was 110-200 ms unsliced, ~90 ms at 256, ~30 ms at 64;
 * at 16, with the bulk output sliced too (LOOP_SLICE_US), iterations stay
 * within a few ms. Ordinary iterations fire a handful of timers and never
 * reach the budget.
 */
#define LOOP_TIMER_BUDGET 16

/*
 * Busy time (us since epoll_wait returned) after which a hook leaves its
 * deferrable work for the next iteration (conn.c: bulk output and the
 * frees of closed connections). Urgent work is never cut: a cursor or an
 * ack waits at most one short iteration behind a burst of room deltas.
 */
#define LOOP_SLICE_US 1000

struct loop *loop_new(void);    /* aborts on OOM or when epoll fails */
void loop_free(struct loop *l); /* NULL is a no-op; does not close watched fds */

/* Registers io for fd with interest events and cb (not NULL); returns 0
 * or -errno (io is then not registered). */
int loop_io_start(struct loop *l, struct loop_io *io, int fd, uint32_t events, loop_io_cb *cb);
/* Changes the interest set; a no-op when unchanged. Returns 0 or -errno. */
int loop_io_set(struct loop *l, struct loop_io *io, uint32_t events);
void loop_io_stop(struct loop *l, struct loop_io *io); /* no-op if not started */
/* For a caller about to close io->fd itself: forgets io without a syscall.
 * close() takes the fd out of the epoll set, provided the descriptor was
 * never duplicated. Events for io already returned by this iteration's
 * wait are skipped. */
void loop_io_forget(struct loop_io *io);

uint64_t loop_now(const struct loop *l); /* cached monotonic ms of this iteration */
/* A test clock: from now on loop_now() is now_ms, which only further calls
 * move (forward only: an earlier now_ms is ignored); each iteration fires
 * the timers due by it. For unit tests that drive TTLs and debounces
 * without waiting. Not for use in the server. */
void loop_set_clock(struct loop *l, uint64_t now_ms);
struct wheel *loop_wheel(struct loop *l);
/* Arms t to fire delay_ms after loop_now() (re-arms if linked). */
void loop_timer_start(struct loop *l, struct wheel_timer *t, uint64_t delay_ms);

/* Microseconds this iteration has been busy: since its epoll_wait returned. */
uint64_t loop_busy_us(const struct loop *l);
/* A hook stopped with work left: the next epoll_wait does not sleep (timeout
 * 0), so the work continues right after the pending I/O. One-shot. */
void loop_more(struct loop *l);

/* Registers a before-sleep hook; hooks run in registration order every
 * iteration. At most LOOP_MAX_HOOKS; aborts beyond that (a programming error). */
void loop_add_hook(struct loop *l, loop_hook_cb *cb, void *data);
/* Unregisters the hook added with (cb, data); a no-op when there is none.
 * Safe from inside a hook: the freed slot is skipped, then reused. */
void loop_del_hook(struct loop *l, loop_hook_cb *cb, void *data);

/* Runs until loop_stop(); returns 0. */
int loop_run(struct loop *l);
/* One iteration waiting at most timeout_ms, then the before-sleep hooks
 * once more (so its output is flushed). For tests and embedding. */
void loop_run_once(struct loop *l, int timeout_ms);
void loop_stop(struct loop *l); /* any thread */
void loop_wake(struct loop *l); /* any thread: interrupts epoll_wait */
bool loop_stopping(const struct loop *l);

/* Statistics for metrics (read by the owning thread). */
uint64_t loop_iterations(const struct loop *l);
uint64_t
loop_lag_max_us(struct loop *l); /* max busy time of one iteration since last call; resets */

#endif
