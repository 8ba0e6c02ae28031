/* SPDX-License-Identifier: MIT */
/*
 * test_loop.c - the epoll reactor: fd readiness, interest changes, timers
 * driven by the wheel, before-sleep hook order, cross-thread wake and stop.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "loop.h"
#include "util.h"

static int io_calls;
static uint32_t io_events;
static int timer_calls;
static char hook_order[8];
static int hook_n;

static void on_io(struct loop_io *io, uint32_t events)
{
    char b[16];

    io_calls++;
    io_events = events;
    if (events & EPOLLIN)
        (void)!read(io->fd, b, sizeof(b));
}

static void on_timer(struct wheel_timer *t, uint64_t now)
{
    (void)t;
    (void)now;
    timer_calls++;
}

static void hook_a(struct loop *l, void *d)
{
    (void)l;
    (void)d;
    if (hook_n < 8)
        hook_order[hook_n++] = 'a';
}

static void hook_b(struct loop *l, void *d)
{
    (void)l;
    (void)d;
    if (hook_n < 8)
        hook_order[hook_n++] = 'b';
}

static int setup(void **state)
{
    io_calls = timer_calls = hook_n = 0;
    io_events = 0;
    *state = loop_new();
    return 0;
}

static int teardown(void **state)
{
    loop_free(*state);
    return 0;
}

static void test_readable_fd_calls_back(void **state)
{
    struct loop *l = *state;
    struct loop_io io = {0};
    int sv[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(loop_io_start(l, &io, sv[0], EPOLLIN, on_io), 0);
    loop_run_once(l, 0);
    assert_int_equal(io_calls, 0);
    assert_int_equal(write(sv[1], "x", 1), 1);
    loop_run_once(l, 1000);
    assert_int_equal(io_calls, 1);
    assert_true(io_events & EPOLLIN);
    loop_io_stop(l, &io);
    assert_int_equal(write(sv[1], "y", 1), 1);
    loop_run_once(l, 0);
    assert_int_equal(io_calls, 1); /* stopped watchers are silent */
    close(sv[0]);
    close(sv[1]);
}

static void test_interest_change_to_writable(void **state)
{
    struct loop *l = *state;
    struct loop_io io = {0};
    int sv[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(loop_io_start(l, &io, sv[0], EPOLLIN, on_io), 0);
    assert_int_equal(loop_io_set(l, &io, EPOLLIN | EPOLLOUT), 0);
    assert_int_equal(io.events, EPOLLIN | EPOLLOUT);
    loop_run_once(l, 1000);
    assert_int_equal(io_calls, 1);
    assert_true(io_events & EPOLLOUT);
    loop_io_stop(l, &io);
    close(sv[0]);
    close(sv[1]);
}

static void test_timer_fires_and_bounds_the_wait(void **state)
{
    struct loop *l = *state;
    struct wheel_timer t;
    uint64_t t0 = time_mono_ms();

    wheel_timer_init(&t, on_timer);
    loop_timer_start(l, &t, 30);
    /* The wait is bounded by the timer, not by the 5 s asked for. */
    while (timer_calls == 0 && time_mono_ms() - t0 < 2000)
        loop_run_once(l, 5000);
    assert_int_equal(timer_calls, 1);
    assert_true(time_mono_ms() - t0 >= 30);
    assert_true(time_mono_ms() - t0 < 1000);
}

static void test_cancelled_timer_never_fires(void **state)
{
    struct loop *l = *state;
    struct wheel_timer t;

    wheel_timer_init(&t, on_timer);
    loop_timer_start(l, &t, 10);
    wheel_del(&t);
    for (int i = 0; i < 5; i++)
        loop_run_once(l, 10);
    assert_int_equal(timer_calls, 0);
}

static void hook_count_timers(struct loop *l, void *d)
{
    int *calls = d;

    (void)l;
    *calls = timer_calls;
}

/* A burst of due timers fires LOOP_TIMER_BUDGET per iteration, the hooks
 * run after each slice, and the iterations in between do not sleep. */
static void test_timer_burst_fires_in_slices(void **state)
{
    enum { N = 3 * LOOP_TIMER_BUDGET + 1 };
    struct loop *l = *state;
    struct wheel_timer *t = calloc(N, sizeof(*t));
    int seen_by_hook = -1;
    uint64_t t0;

    loop_add_hook(l, hook_count_timers, &seen_by_hook);
    for (int i = 0; i < N; i++) {
        wheel_timer_init(&t[i], on_timer);
        loop_timer_start(l, &t[i], 0);
    }
    t0 = time_mono_ms();
    for (int i = 1; i <= 4; i++) {
        loop_run_once(l, 5000); /* would sleep 5 s with nothing due */
        assert_int_equal(timer_calls, MIN(i * LOOP_TIMER_BUDGET, N));
        assert_int_equal(seen_by_hook, timer_calls);
    }
    assert_true(time_mono_ms() - t0 < 1000);
    assert_true(wheel_next(loop_wheel(l)) == UINT64_MAX);
    free(t);
}

static void hook_more_once(struct loop *l, void *d)
{
    int *calls = d;

    if ((*calls)++ == 0)
        loop_more(l);
}

/* A hook that stopped with work left (loop_more) gets the next iteration
 * without a sleep, once; then the loop sleeps as usual again. */
static void test_more_skips_one_sleep(void **state)
{
    struct loop *l = *state;
    int calls = 0;
    uint64_t t0;

    loop_add_hook(l, hook_more_once, &calls);
    loop_run_once(l, 0);
    t0 = time_mono_ms();
    loop_run_once(l, 5000); /* nothing due: would sleep 5 s without it */
    assert_true(time_mono_ms() - t0 < 1000);
    assert_int_equal(calls, 2);
    t0 = time_mono_ms();
    loop_run_once(l, 50);
    assert_true(time_mono_ms() - t0 >= 40); /* slept again */
}

/* loop_busy_us counts from the moment the iteration's wait returned. */
static void test_busy_time_counts_from_the_wait(void **state)
{
    struct loop *l = *state;

    loop_run_once(l, 0);
    usleep(3000);
    assert_true(loop_busy_us(l) >= 3000);
    loop_run_once(l, 0);
    assert_true(loop_busy_us(l) < 3000);
}

static void test_hooks_run_in_order(void **state)
{
    struct loop *l = *state;

    loop_add_hook(l, hook_a, NULL);
    loop_add_hook(l, hook_b, NULL);
    loop_run_once(l, 0);
    assert_true(hook_n >= 2);
    assert_memory_equal(hook_order, "ab", 2);
}

static void *stopper(void *arg)
{
    usleep(50000);
    loop_stop(arg);
    return NULL;
}

static void test_stop_from_another_thread(void **state)
{
    struct loop *l = *state;
    pthread_t th;
    uint64_t t0 = time_mono_ms();

    assert_int_equal(pthread_create(&th, NULL, stopper, l), 0);
    assert_int_equal(loop_run(l), 0); /* returns once stopped */
    pthread_join(th, NULL);
    assert_true(loop_stopping(l));
    assert_true(time_mono_ms() - t0 < 900); /* woken, not timed out */
}

static void test_now_is_cached_per_iteration(void **state)
{
    struct loop *l = *state;
    uint64_t a = loop_now(l);

    usleep(20000);
    assert_int_equal(loop_now(l), a);
    loop_run_once(l, 0);
    assert_true(loop_now(l) >= a + 20);
    assert_true(loop_iterations(l) >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_readable_fd_calls_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interest_change_to_writable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timer_fires_and_bounds_the_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancelled_timer_never_fires, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timer_burst_fires_in_slices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hooks_run_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_more_skips_one_sleep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy_time_counts_from_the_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_from_another_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_now_is_cached_per_iteration, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
