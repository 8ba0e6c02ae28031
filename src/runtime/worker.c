/* SPDX-License-Identifier: MIT */
/*
 * worker.c - listeners, accept, worker threads, bus wiring and draining.
 *
 * Each worker binds its own SO_REUSEPORT socket, so the kernel spreads new
 * connections evenly and no accept lock exists. Accept loops take at most
 * ACCEPT_BATCH sockets per readiness event. On EMFILE/ENFILE the worker
 * closes its spare descriptor, accepts and immediately closes one pending
 * socket, and re-opens the spare (libuv's trick): without it a
 * level-triggered listener would spin at 100% CPU.
 */
#include "worker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addrcap.h"
#include "bus.h"
#include "log.h"
#include "pool.h"
#include "util.h"

#define ACCEPT_BATCH   64
#define LISTEN_BACKLOG 4096

/* ---- listening sockets ---- */

static int parse_addr(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len)
{
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

    memset(ss, 0, sizeof(*ss));
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        *len = sizeof(*in4);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*in6);
        return 0;
    }
    return -1;
}

/* Returns a listening non-blocking SO_REUSEPORT socket or -1 (errno set). */
static int listen_on(const char *host, int port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int one = 1, fd;

    if (parse_addr(host, port, &ss, &len) < 0) {
        errno = EINVAL;
        return -1;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* ---- accept ---- */

static void emfile_trick(struct worker *w)
{
    int fd;

    if (w->spare_fd < 0)
        return;
    close(w->spare_fd);
    fd = accept4(w->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        close(fd);
    w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void on_accepted(struct worker *w, int fd, const struct sockaddr_storage *ss)
{
    struct server *srv = w->srv;
    int one = 1;

    METRIC_ADD(&w->metrics, conns_accepted, 1);
    if (atomic_fetch_add(&srv->conns, 1) >= (unsigned)srv->cfg.max_connections) {
        atomic_fetch_sub(&srv->conns, 1);
        METRIC_ADD(&w->metrics, accept_errors, 1);
        log_warnx("worker", "max-connections reached, refusing worker=%u", w->id);
        close(fd);
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    srv->hooks->accept(w, fd, (const struct sockaddr *)ss);
}

static void on_listen(struct loop_io *io, uint32_t events)
{
    struct worker *w = container_of(io, struct worker, listen_io);

    (void)events;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(w->listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd >= 0) {
            on_accepted(w, fd, &ss);
            continue;
        }
        if (errno == EMFILE || errno == ENFILE) {
            METRIC_ADD(&w->metrics, accept_errors, 1);
            if (loop_now(w->loop) - w->emfile_logged_ms >= 1000) {
                log_warn("worker", "accept worker=%u (dropping pending connections)", w->id);
                w->emfile_logged_ms = loop_now(w->loop);
            }
            emfile_trick(w);
        } else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
            METRIC_ADD(&w->metrics, accept_errors, 1);
            log_warn("worker", "accept worker=%u", w->id);
        }
        return;
    }
}

/* ---- bus ---- */

static worker_msg_cb *msg_handlers[WORKER_MSG_MAX];

void worker_on_msg(unsigned type, worker_msg_cb *cb)
{
    if (type == 0 || type >= WORKER_MSG_MAX)
        fatalx("worker", "bad message type %u", type);
    msg_handlers[type] = cb;
}

#define BUS_LAZY_MS 25 /* longest wait of a lazy bus message (bus_hook) */

/* The lazy-flush timer: lazy messages have waited BUS_LAZY_MS. */
static void on_lazy_due(struct wheel_timer *t, uint64_t now)
{
    struct worker *w = container_of(t, struct worker, lazy_timer);

    (void)now;
    bus_flush_all(w->srv->bus, w->id);
}

/* The bus woke w: every waiting message goes to its type's handler from
 * here (the heartbeat's path in docs/architecture.md: one function of
 * the runtime on the owner's side). */
static void on_bus(struct loop_io *io, uint32_t events)
{
    struct worker *w = container_of(io, struct worker, bus_io);
    struct bus_msg *m = bus_take(w->srv->bus, w->id), *next;

    (void)events;
    for (; m; m = next) {
        next = bus_next(m); /* the handler owns m */
        METRIC_ADD(&w->metrics, bus_msgs_in, 1);
        if (m->type < WORKER_MSG_MAX && msg_handlers[m->type]) {
            msg_handlers[m->type](w, m);
            continue;
        }
        log_error("worker", "no handler for message type %u worker=%u", m->type, w->id);
        if (m->free)
            m->free(m);
    }
}

/* ---- draining ---- */

static void close_listener(struct worker *w)
{
    if (w->listen_fd < 0)
        return;
    loop_io_stop(w->loop, &w->listen_io);
    close(w->listen_fd);
    w->listen_fd = -1;
}

static void begin_drain(struct worker *w)
{
    w->draining = true;
    /* The window for the spread-out closes, then the time to flush. */
    w->drain_deadline = loop_now(w->loop) + (uint64_t)w->srv->cfg.drain_window_ms +
                        (uint64_t)w->srv->cfg.shutdown_drain_ms;
    close_listener(w);
    w->srv->hooks->drain(w);
}

/* Before-sleep hook, before and after the flush: publishes this
 * iteration's cross-worker messages (one CAS per destination with any).
 * Lazy messages (heartbeats) that no urgent one took along wait for the
 * lazy timer, at most BUS_LAZY_MS: at a heartbeat every 15 s per socket
 * the owner then wakes up ~40 times a second for all of them instead of
 * once per heartbeat (each wake-up costs a few syscalls and a context
 * switch, most of an idle server's CPU), and a session's TTL, seconds
 * long, sees its refresh at most that much later. */
static void bus_hook(struct loop *l, void *data)
{
    struct worker *w = data;

    bus_flush(w->srv->bus, w->id);
    if (!wheel_is_linked(&w->lazy_timer) && bus_lazy_pending(w->srv->bus, w->id))
        loop_timer_start(l, &w->lazy_timer, BUS_LAZY_MS);
}

/* Before-sleep hook: shutdown progress and metrics upkeep. */
#define TRIM_EVERY_MS 10000 /* malloc_trim() at most this often per process */

/* glibc's malloc_trim(), except under AddressSanitizer, whose allocator
 * replaces glibc's (trimming glibc's untouched arenas there crashes). */
#if defined(__SANITIZE_ADDRESS__)
#define TRIM_HEAP() ((void)0)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TRIM_HEAP() ((void)0)
#endif
#endif
#ifndef TRIM_HEAP
#define TRIM_HEAP() ((void)malloc_trim(0))
#endif

/* Whether this worker trims now: malloc_trim() walks every arena (a few
 * ms with a big heap), so one worker at a time does it for the process,
 * at most every TRIM_EVERY_MS, instead of each worker at the same moment. */
static bool trim_due(struct server *srv, uint64_t now)
{
    uint64_t last = atomic_load(&srv->trimmed_ms);

    return now > last && now - last >= TRIM_EVERY_MS &&
           atomic_compare_exchange_strong(&srv->trimmed_ms, &last, now);
}

static void worker_hook(struct loop *l, void *data)
{
    struct worker *w = data;
    uint64_t lag = loop_lag_max_us(l);

    METRIC_ADD(&w->metrics, loop_iterations, 1);
    w->srv->hooks->tick(w);
    if (lag > METRIC_GET(&w->metrics, loop_lag_max_us))
        METRIC_SET(&w->metrics, loop_lag_max_us, lag);
    if (trim_due(w->srv, loop_now(l))) {
        /* Bursts (a join storm writes megabytes of snapshots and deltas)
         * leave free pages in the malloc arenas; give them back so that
         * idle connections cost what they hold, not the burst's peak. */
        TRIM_HEAP();
        (void)pool_trim();
    }
    if (!w->draining && atomic_load(&w->srv->shutting_down))
        begin_drain(w);
    if (w->draining && ((w->pool.count == 0 && !(w->srv->hooks->busy && w->srv->hooks->busy(w))) ||
                        loop_now(l) >= w->drain_deadline))
        loop_stop(l);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    atomic_fetch_add(&w->srv->running, 1);
    loop_run(w->loop);
    if (w->pool.count > 0)
        log_warnx("worker", "drain time over, dropping %zu connections worker=%u", w->pool.count,
                  w->id);
    conn_pool_release(&w->pool);
    w->srv->hooks->stop(w);
    atomic_fetch_sub(&w->srv->running, 1);
    return NULL;
}

static int worker_init(struct server *srv, struct worker *w, unsigned id)
{
    w->id = id;
    w->srv = srv;
    w->loop = loop_new();
    w->pool.out_soft_limit = (size_t)srv->cfg.client_output_soft_limit_bytes;
    w->pool.out_soft_ms = (uint64_t)srv->cfg.client_output_soft_limit_ms;
    w->pool.out_hard_limit = (size_t)srv->cfg.client_output_hard_limit_bytes;
    w->pool.sndbuf = (int)srv->cfg.client_socket_sndbuf_bytes;
    w->pool.shared_count = &srv->conns;
    w->pool.addrs = srv->addrs;
    conn_pool_init(&w->pool, w->loop, &w->metrics, id);
    w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    w->listen_fd = listen_on(srv->cfg.bind, srv->port);
    if (w->listen_fd < 0) {
        log_warn("worker", "cannot listen on %s:%d", srv->cfg.bind, srv->port);
        return -1;
    }
    if (srv->port == 0)
        srv->port = bound_port(w->listen_fd); /* later workers share it */
    if (loop_io_start(w->loop, &w->listen_io, w->listen_fd, EPOLLIN, on_listen) < 0 ||
        loop_io_start(w->loop, &w->bus_io, bus_inbox_fd(srv->bus, id), EPOLLIN, on_bus) < 0)
        fatal("worker", "epoll_ctl");
    srv->hooks->start(w);
    /* Order matters: worker_hook may queue output (close frames of a
     * drain) that conn_pool_flush writes. The bus is published before the
     * flush, so that other workers start their share of a fan-out (a room
     * event's OP_REVENT) while this one writes its own sockets, not after;
     * and again after it, for what freeing closed connections sent. */
    wheel_timer_init(&w->lazy_timer, on_lazy_due);
    loop_add_hook(w->loop, worker_hook, w);
    loop_add_hook(w->loop, bus_hook, w);
    loop_add_hook(w->loop, conn_pool_flush, &w->pool);
    loop_add_hook(w->loop, bus_hook, w);
    return 0;
}

static void worker_release(struct worker *w)
{
    if (w->app)
        w->srv->hooks->stop(w); /* only when the thread never ran */
    close_listener(w);
    if (w->spare_fd >= 0)
        close(w->spare_fd);
    loop_free(w->loop);
}

int server_start(struct server *srv)
{
    srv->nworkers = (unsigned)config_workers(&srv->cfg);
    srv->workers = xcalloc(srv->nworkers, sizeof(*srv->workers));
    srv->bus = bus_new(srv->nworkers);
    srv->port = srv->cfg.port;
    srv->started_wall_ms = time_wall_ms();
    srv->addrs = addrcap_new((uint32_t)srv->cfg.max_pending_per_address,
                             (uint32_t)srv->cfg.max_connections_per_address);
    for (unsigned i = 0; i < srv->nworkers; i++) {
        if (worker_init(srv, &srv->workers[i], i) < 0) {
            for (unsigned j = 0; j <= i; j++)
                worker_release(&srv->workers[j]);
            free(srv->workers);
            srv->workers = NULL;
            bus_free(srv->bus);
            srv->bus = NULL;
            addrcap_free(srv->addrs);
            srv->addrs = NULL;
            return -1;
        }
    }
    for (unsigned i = 0; i < srv->nworkers; i++) {
        if (pthread_create(&srv->workers[i].thread, NULL, worker_main, &srv->workers[i]) != 0)
            fatalx("worker", "cannot start worker thread %u", i);
    }
    return 0;
}

void server_shutdown(struct server *srv)
{
    atomic_store(&srv->shutting_down, true);
    for (unsigned i = 0; i < srv->nworkers; i++)
        loop_wake(srv->workers[i].loop);
}

void server_join(struct server *srv)
{
    for (unsigned i = 0; i < srv->nworkers; i++)
        pthread_join(srv->workers[i].thread, NULL);
    for (unsigned i = 0; i < srv->nworkers; i++)
        worker_release(&srv->workers[i]);
    free(srv->workers);
    srv->workers = NULL;
    bus_free(srv->bus);
    srv->bus = NULL;
    addrcap_free(srv->addrs); /* every connection is closed */
    srv->addrs = NULL;
}

bool server_ready(struct server *srv)
{
    return !atomic_load(&srv->shutting_down) && atomic_load(&srv->running) == srv->nworkers;
}
