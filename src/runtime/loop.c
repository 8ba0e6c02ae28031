/* SPDX-License-Identifier: MIT */
/*
 * loop.c - the per-worker epoll reactor.
 *
 * Level-triggered epoll: a readable socket that is not fully drained is
 * reported again next iteration, so callbacks may stop early to be fair.
 * epoll_wait's timeout comes from the timing wheel (wheel_next), so there
 * is no timerfd and no per-timer syscall. Each iteration fires at most
 * LOOP_TIMER_BUDGET timers; while the wheel holds due timers that the
 * budget left, wheel_next() is <= now and the wait does not sleep, so a
 * burst drains over consecutive iterations with I/O between the slices.
 * A hook that stops early (loop_busy_us() past LOOP_SLICE_US) calls
 * loop_more(), which has the same effect for one wait.
 * A wake eventfd lets other threads interrupt the wait (loop_wake,
 * loop_stop). Before-sleep hooks run after the events and timers of every
 * iteration: this is where coalesced writes are flushed and closed
 * connections freed, so nothing is ever freed under a running callback.
 */
#include "loop.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define LOOP_MAX_EVENTS 512

struct loop_hook {
    loop_hook_cb *cb;
    void *data;
};

struct loop {
    int epfd;                               /* epoll instance */
    int wakefd;                             /* eventfd for cross-thread wakeups */
    atomic_bool stop;                       /* set by loop_stop */
    uint64_t now;                           /* cached monotonic ms */
    struct wheel *wheel;                    /* timers */
    struct loop_hook hooks[LOOP_MAX_HOOKS]; /* before-sleep hooks */
    unsigned nhooks;
    bool more;           /* loop_more(): do not sleep in the next wait */
    uint64_t busy_start; /* monotonic us when this iteration's wait returned */
    uint64_t iterations; /* completed iterations */
    uint64_t lag_max_us; /* max busy time since last read */
    bool fixed_clock;    /* loop_set_clock(): now moves only by its calls */
    struct epoll_event events[LOOP_MAX_EVENTS];
};

struct loop *loop_new(void)
{
    struct loop *l = xcalloc(1, sizeof(*l));
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};

    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0)
        fatal("loop", "epoll_create1");
    l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->wakefd < 0)
        fatal("loop", "eventfd");
    /* data.ptr == NULL marks the wake fd. */
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev) < 0)
        fatal("loop", "epoll_ctl wakefd");
    l->now = time_mono_ms();
    l->busy_start = time_mono_us();
    l->wheel = wheel_new(l->now);
    atomic_init(&l->stop, false);
    return l;
}

void loop_free(struct loop *l)
{
    if (!l)
        return;
    close(l->epfd);
    close(l->wakefd);
    wheel_free(l->wheel);
    free(l);
}

int loop_io_start(struct loop *l, struct loop_io *io, int fd, uint32_t events, loop_io_cb *cb)
{
    struct epoll_event ev = {.events = events, .data.ptr = io};

    io->fd = fd;
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return -errno;
    io->events = events;
    io->cb = cb;
    return 0;
}

int loop_io_set(struct loop *l, struct loop_io *io, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = io};

    if (!io->cb || io->events == events)
        return 0;
    if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0)
        return -errno;
    io->events = events;
    return 0;
}

void loop_io_stop(struct loop *l, struct loop_io *io)
{
    if (!io->cb)
        return;
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL);
    io->cb = NULL;
    io->events = 0;
}

void loop_io_forget(struct loop_io *io)
{
    io->cb = NULL;
    io->events = 0;
}

uint64_t loop_now(const struct loop *l)
{
    return l->now;
}

struct wheel *loop_wheel(struct loop *l)
{
    return l->wheel;
}

void loop_timer_start(struct loop *l, struct wheel_timer *t, uint64_t delay_ms)
{
    wheel_add(l->wheel, t, l->now + delay_ms);
}

void loop_add_hook(struct loop *l, loop_hook_cb *cb, void *data)
{
    unsigned i;

    /* A slot loop_del_hook() emptied is reused first. */
    for (i = 0; i < l->nhooks && l->hooks[i].cb; i++)
        ;
    if (i == LOOP_MAX_HOOKS)
        fatalx("loop", "too many before-sleep hooks");
    l->hooks[i].cb = cb;
    l->hooks[i].data = data;
    if (i == l->nhooks)
        l->nhooks++;
}

void loop_del_hook(struct loop *l, loop_hook_cb *cb, void *data)
{
    for (unsigned i = 0; i < l->nhooks; i++)
        if (l->hooks[i].cb == cb && l->hooks[i].data == data)
            l->hooks[i].cb = NULL;
}

/* 0 while timers are due, those a budgeted run left included. */
static int wait_timeout(struct loop *l)
{
    uint64_t next = wheel_next(l->wheel);

    if (l->more) {
        l->more = false;
        return 0;
    }
    if (next == UINT64_MAX)
        return 1000; /* wake now and then even when idle: cheap and robust */
    if (next <= l->now)
        return 0;
    return (int)MIN(next - l->now, 1000u);
}

static void drain_wakefd(struct loop *l)
{
    uint64_t v;

    if (read(l->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
        log_warn("loop", "read wakefd");
}

static void dispatch(struct loop *l, int n)
{
    for (int i = 0; i < n; i++) {
        struct loop_io *io = l->events[i].data.ptr;

        if (io == NULL) {
            drain_wakefd(l);
            continue;
        }
        if (io->cb) /* NULL: stopped or forgotten by an earlier callback */
            io->cb(io, l->events[i].events);
    }
}

static void run_hooks(struct loop *l)
{
    for (unsigned i = 0; i < l->nhooks; i++)
        if (l->hooks[i].cb) /* NULL: deleted */
            l->hooks[i].cb(l, l->hooks[i].data);
}

/*
 * One iteration: sleep in epoll_wait (the timeout is computed only now, after
 * the previous iteration's hooks, which may have armed timers), then handle
 * events, due timers and the before-sleep hooks. Everything but the wait is
 * the iteration's busy time, measured as the loop lag.
 */
static void iterate(struct loop *l, int max_wait_ms)
{
    int t = wait_timeout(l);
    uint64_t busy_start;
    int n;

    n = epoll_wait(l->epfd, l->events, LOOP_MAX_EVENTS, max_wait_ms < t ? max_wait_ms : t);
    busy_start = time_mono_us();
    l->busy_start = busy_start;
    if (!l->fixed_clock)
        l->now = busy_start / 1000u;
    if (n < 0 && errno != EINTR)
        fatal("loop", "epoll_wait");
    if (n > 0)
        dispatch(l, n);
    wheel_run_budget(l->wheel, l->now, LOOP_TIMER_BUDGET);
    run_hooks(l);
    l->iterations++;
    l->lag_max_us = MAX(l->lag_max_us, time_mono_us() - busy_start);
}

void loop_set_clock(struct loop *l, uint64_t now_ms)
{
    l->fixed_clock = true;
    if (now_ms > l->now)
        l->now = now_ms;
}

int loop_run(struct loop *l)
{
    l->busy_start = time_mono_us();
    run_hooks(l); /* work queued before the first wait */
    while (!atomic_load_explicit(&l->stop, memory_order_acquire))
        iterate(l, 1000);
    run_hooks(l);
    return 0;
}

void loop_run_once(struct loop *l, int timeout_ms)
{
    iterate(l, timeout_ms);
}

uint64_t loop_busy_us(const struct loop *l)
{
    return time_mono_us() - l->busy_start;
}

void loop_more(struct loop *l)
{
    l->more = true;
}

void loop_stop(struct loop *l)
{
    atomic_store_explicit(&l->stop, true, memory_order_release);
    loop_wake(l);
}

void loop_wake(struct loop *l)
{
    uint64_t one = 1;

    if (write(l->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        log_warn("loop", "write wakefd");
}

bool loop_stopping(const struct loop *l)
{
    return atomic_load_explicit(&l->stop, memory_order_acquire);
}

uint64_t loop_iterations(const struct loop *l)
{
    return l->iterations;
}

uint64_t loop_lag_max_us(struct loop *l)
{
    uint64_t v = l->lag_max_us;

    l->lag_max_us = 0;
    return v;
}
