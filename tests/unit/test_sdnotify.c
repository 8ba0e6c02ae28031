/* SPDX-License-Identifier: MIT */
/*
 * test_sdnotify.c - the systemd notifications against a socket of the
 * test's own, standing in for systemd's NOTIFY_SOCKET: nothing without
 * it; READY=1, then WATCHDOG=1 only while every worker's loop counts
 * iterations (no loop runs here: the test moves the counters itself), and
 * STOPPING=1.
 */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "loop.h"
#include "metrics.h"
#include "sdnotify.h"
#include "worker.h"

#define NWORKERS 2

static char dir[64];
static char path[96];

/* A datagram socket at a fresh path, named in NOTIFY_SOCKET. */
static int listen_notify(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;

    snprintf(dir, sizeof(dir), "/tmp/test_sdnotify.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/notify", dir);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(setenv("NOTIFY_SOCKET", path, 1), 0);
    return fd;
}

static void unlisten(int fd)
{
    close(fd);
    unlink(path);
    rmdir(dir);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
}

/* The next datagram within ms into buf, or 0 bytes. */
static size_t next_msg(int fd, char *buf, size_t len, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ssize_t n;

    if (poll(&p, 1, ms) <= 0)
        return 0;
    n = recv(fd, buf, len - 1, 0);
    assert_true(n >= 0);
    buf[n] = 0;
    return (size_t)n;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Counts the WATCHDOG=1 received over ms, moving the loop_iterations of
 * the first `turning` workers every 5 ms meanwhile. */
static int pings_over(int fd, struct server *srv, unsigned turning, int ms)
{
    char buf[256];
    int pings = 0;

    for (int t = 0; t < ms; t += 5) {
        for (unsigned i = 0; i < turning; i++)
            METRIC_ADD(&srv->workers[i].metrics, loop_iterations, 1);
        while (next_msg(fd, buf, sizeof(buf), 0))
            if (strcmp(buf, "WATCHDOG=1") == 0)
                pings++;
        sleep_ms(5);
    }
    return pings;
}

static void make_server(struct server *srv, struct worker *w)
{
    memset(srv, 0, sizeof(*srv));
    memset(w, 0, NWORKERS * sizeof(*w));
    srv->nworkers = NWORKERS;
    srv->workers = w;
    srv->port = 7400;
    for (unsigned i = 0; i < NWORKERS; i++) {
        w[i].id = i;
        w[i].srv = srv;
        w[i].loop = loop_new();
    }
}

static void free_server(struct server *srv)
{
    for (unsigned i = 0; i < srv->nworkers; i++)
        loop_free(srv->workers[i].loop);
}

static void test_nothing_without_notify_socket(void **state)
{
    struct worker w[NWORKERS];
    struct server srv;

    (void)state;
    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(setenv("WATCHDOG_USEC", "100000", 1), 0);
    make_server(&srv, w);
    sdnotify_ready(&srv);
    sdnotify_stopping();
    unsetenv("WATCHDOG_USEC");
    free_server(&srv);
}

static void test_ready_and_stopping_without_watchdog(void **state)
{
    struct worker w[NWORKERS];
    struct server srv;
    char buf[256];
    int fd = listen_notify();

    (void)state;
    make_server(&srv, w);
    sdnotify_ready(&srv);
    assert_true(next_msg(fd, buf, sizeof(buf), 1000) > 0);
    assert_string_equal(buf, "READY=1\nSTATUS=listening on port 7400, 2 workers");
    /* No WATCHDOG_USEC: no pings, however the loops turn. */
    assert_int_equal(pings_over(fd, &srv, NWORKERS, 150), 0);
    sdnotify_stopping();
    assert_true(next_msg(fd, buf, sizeof(buf), 1000) > 0);
    assert_string_equal(buf, "STOPPING=1\nSTATUS=draining");
    unlisten(fd);
    free_server(&srv);
}

static void test_watchdog_pings_only_while_every_loop_turns(void **state)
{
    struct worker w[NWORKERS];
    struct server srv;
    char buf[256];
    int fd = listen_notify();

    (void)state;
    assert_int_equal(setenv("WATCHDOG_USEC", "60000", 1), 0); /* a check every 30 ms */
    make_server(&srv, w);
    sdnotify_ready(&srv);
    assert_true(next_msg(fd, buf, sizeof(buf), 1000) > 0);
    assert_non_null(strstr(buf, "READY=1"));
    /* No loop turns: no ping. */
    assert_int_equal(pings_over(fd, &srv, 0, 200), 0);
    /* Every loop turns: a ping every 30 ms, give or take the scheduler. */
    assert_true(pings_over(fd, &srv, NWORKERS, 300) >= 3);
    /* Worker 1 is stuck: no ping, once the check that still saw it move
     * (within a period of its last iteration) has had its say. */
    (void)pings_over(fd, &srv, NWORKERS - 1, 100);
    assert_int_equal(pings_over(fd, &srv, NWORKERS - 1, 200), 0);
    /* It turns again: pings again. */
    assert_true(pings_over(fd, &srv, NWORKERS, 300) >= 3);
    sdnotify_stopping();
    for (;;) { /* pings sent before the stop, then STOPPING=1 */
        assert_true(next_msg(fd, buf, sizeof(buf), 1000) > 0);
        if (strcmp(buf, "WATCHDOG=1") != 0)
            break;
    }
    assert_string_equal(buf, "STOPPING=1\nSTATUS=draining");
    /* The thread is gone: nothing more arrives. */
    assert_int_equal(pings_over(fd, &srv, NWORKERS, 100), 0);
    unlisten(fd);
    free_server(&srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_without_notify_socket),
        cmocka_unit_test(test_ready_and_stopping_without_watchdog),
        cmocka_unit_test(test_watchdog_pings_only_while_every_loop_turns),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
