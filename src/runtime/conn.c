/* SPDX-License-Identifier: MIT */
/*
 * conn.c - connection I/O: shared read buffer, coalesced writev output,
 * output limits and deferred close.
 *
 * Read path: conn_on_io -> read_some: read() into pool->rbuf, then
 * ops->on_data at once (read_input), or, when a partial message is
 * pending, appended to the leftover input first (on_input); repeated
 * while the protocol switches (HTTP upgrade); leftover bytes are copied
 * into the busy part (below).
 * Write path: conn_write/conn_write_payload queue chunks and put c on
 * pool->pending; conn_pool_flush (before sleep) does one writev per
 * pending connection, arms EPOLLOUT only after a short write, and frees
 * connections closed during the iteration. Connections with only bulk
 * output (or a graceful close to finish) wait on pool->bulk and are
 * flushed after the pending ones while the iteration is within
 * LOOP_SLICE_US; so are the frees. What the slice leaves, in order, goes
 * first in the next iteration, which loop_more() keeps from sleeping.
 * Graceful close (conn_close_after_flush): stop delivering input, write what
 * is queued, shutdown(SHUT_WR), read and discard until the peer's EOF or
 * the linger deadline, then close. Closing while unread input sits in the
 * kernel would send a RST that can destroy our last frames in flight. If
 * the peer's EOF came first (a WebSocket client answering our close frame
 * and hanging up), there is nothing to wait for: close() once the output
 * is written, without the shutdown.
 * Busy part: the leftover input, the output ring, the flush-list link and
 * the soft-limit timer live in one struct conn_busy that exists only
 * while one of them is in use, so an idle connection is struct conn alone.
 * The ring's first chunks are inside it: queuing a reply costs the same
 * allocations as before it existed (this struct instead of a ring).
 */
#include "conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "addrcap.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "util.h"

#define CONN_RBUF_SIZE       (64u * 1024u)
#define CONN_CHUNK_SIZE      4096u /* private chunk for small writes */
#define CONN_IOV_MAX         128u  /* iovecs per writev */
#define CONN_READS_PER_EVENT 4     /* fairness under level-triggered epoll */

static void conn_on_io(struct loop_io *io, uint32_t events);
static void conn_on_timer(struct wheel_timer *t, uint64_t now);
static void conn_on_soft(struct wheel_timer *t, uint64_t now);
static void peer_clear(struct conn *c);

/* Chunks the busy part holds itself: a queue that never holds more needs
 * no ring of its own (the common case: a reply or an event or two). */
#define CONN_RING_INLINE 4u

/* The soft-window timer, out of line: only a connection over the soft
 * limit (a slow reader) has one. */
struct conn_soft {
    struct wheel_timer timer;
    struct conn *c;
    uint64_t since; /* loop ms when the queue went over the soft limit */
};

/* The state of a busy connection, allocated by busy_get() and freed by
 * busy_release() once none of it is in use: an idle connection (most of
 * them, most of the time) has none. */
struct conn_busy {
    struct conn *c;         /* back pointer, for the flush lists */
    struct list link;       /* pool->pending or pool->bulk (CONN_BULK) */
    struct buf in;          /* leftover input; empty when none */
    struct conn_soft *soft; /* while over the soft limit, else NULL */
    struct conn_chunk *out; /* ring of queued chunks: ring[], or heap once grown */
    size_t out_bytes;       /* unwritten bytes queued */
    size_t kernel_bytes;    /* in the socket's full buffer at the last short write */
    uint32_t out_head;      /* index of the first chunk */
    uint32_t out_count;     /* chunks queued */
    uint32_t out_cap;       /* ring size (power of two) */
    struct conn_chunk ring[CONN_RING_INLINE];
};

void conn_pool_init(struct conn_pool *pool, struct loop *l, struct metrics *m, unsigned worker_id)
{
    pool->loop = l;
    pool->metrics = m;
    pool->worker_id = worker_id;
    /* Ids must not repeat across restarts (a room token signed for a
     * connection id must not admit a later connection that gets the same
     * id): the sequence starts at the wall clock in ms times 128, so a
     * later start begins above everything an earlier run handed out,
     * unless that run averaged over 128 connections per ms of its life.
     * Wall ms < 2^41 until 2039, so the sequence stays within its 48 bits. */
    pool->next_seq = (time_wall_ms() << 7) + 1;
    if (pool->linger_ms == 0)
        pool->linger_ms = 2000;
    if (pool->max_input == 0)
        pool->max_input = 128u * 1024u * 1024u;
    list_init(&pool->all);
    list_init(&pool->pending);
    list_init(&pool->bulk);
    list_init(&pool->closed);
    pool->rbuf_size = CONN_RBUF_SIZE;
    pool->rbuf = xmalloc(pool->rbuf_size);
}

/* ---- the busy part ---- */

static struct conn_busy *busy_get(struct conn *c)
{
    struct conn_busy *b = c->busy;

    if (b)
        return b;
    b = xmalloc(sizeof(*b));
    b->c = c;
    list_init(&b->link);
    b->in = (struct buf){0};
    b->soft = NULL;
    b->out = b->ring;
    b->out_bytes = 0;
    b->kernel_bytes = 0;
    b->out_head = b->out_count = 0;
    b->out_cap = CONN_RING_INLINE;
    c->busy = b;
    return b;
}

static void out_drop_all(struct conn_busy *b)
{
    for (uint32_t i = 0; i < b->out_count; i++)
        payload_unref(b->out[(b->out_head + i) & (b->out_cap - 1)].p);
    if (b->out != b->ring)
        free(b->out);
    b->out = b->ring;
    b->out_cap = CONN_RING_INLINE;
    b->out_head = b->out_count = 0;
    METRIC_SUB(b->c->pool->metrics, output_bytes, b->out_bytes);
    b->out_bytes = 0;
    b->kernel_bytes = 0;
}

static void soft_stop(struct conn_busy *b)
{
    if (!b->soft)
        return;
    wheel_del(&b->soft->timer);
    free(b->soft);
    b->soft = NULL;
}

/* Frees c's busy part whatever it holds. */
static void busy_free(struct conn *c)
{
    struct conn_busy *b = c->busy;

    if (!b)
        return;
    list_del(&b->link);
    soft_stop(b);
    out_drop_all(b);
    buf_release(&b->in);
    free(b);
    c->busy = NULL;
}

/* Frees c's busy part if nothing in it is in use any more. */
static void busy_release(struct conn *c)
{
    const struct conn_busy *b = c->busy;

    if (b && b->in.len == 0 && b->out_count == 0 && !b->soft && !list_is_linked(&b->link))
        busy_free(c);
}

static uint32_t out_count(const struct conn *c)
{
    return c->busy ? c->busy->out_count : 0;
}

static void conn_free(struct conn *c)
{
    if (c->ops->on_close)
        c->ops->on_close(c);
    busy_free(c);
    peer_clear(c);
    pool_free(c);
}

void conn_pool_release(struct conn_pool *pool)
{
    struct list *pos, *tmp;

    list_foreach_safe(pos, tmp, &pool->all)
    {
        conn_close(container_of(pos, struct conn, link_all));
    }
    list_foreach_safe(pos, tmp, &pool->closed)
    {
        list_del(pos);
        conn_free(container_of(pos, struct conn, link_all));
    }
    free(pool->rbuf);
    pool->rbuf = NULL;
}

struct conn *conn_new(struct conn_pool *pool, int fd, const struct conn_ops *ops, void *proto)
{
    struct conn *c = pool_alloc(sizeof(*c) + CONN_PROTO_ROOM);

    c->id = ((uint64_t)pool->worker_id << 48) | pool->next_seq++;
    c->io.fd = fd;
    c->pool = pool;
    /* Without it the kernel autotunes the buffer up to tcp_wmem's max, so
     * a stalled reader could hold megabytes before our queue grew. */
    if (pool->sndbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &pool->sndbuf, sizeof(pool->sndbuf));
    c->ops = ops;
    c->proto = proto;
    c->born_ms = (uint16_t)loop_now(pool->loop);
    wheel_timer_init(&c->timer, conn_on_timer);
    list_init(&c->link_all);
    list_insert_tail(&pool->all, &c->link_all);
    pool->count++;
    if (loop_io_start(pool->loop, &c->io, fd, EPOLLIN | EPOLLRDHUP, conn_on_io) < 0) {
        log_warn("conn", "epoll add conn=%llu", (unsigned long long)c->id);
        conn_close(c);
    }
    return c;
}

/* Urgent: flushed at the end of this iteration (off the bulk list if on it). */
static void mark_pending(struct conn *c)
{
    struct conn_busy *b = busy_get(c);

    if (c->flags & CONN_BULK) {
        list_del(&b->link);
        c->flags &= ~CONN_BULK;
    }
    if (!list_is_linked(&b->link))
        list_insert_tail(&c->pool->pending, &b->link);
}

/* Bulk: flushed within an iteration's slice, unless already pending. */
static void mark_bulk(struct conn *c)
{
    struct conn_busy *b = busy_get(c);

    if (list_is_linked(&b->link))
        return;
    list_insert_tail(&c->pool->bulk, &b->link);
    c->flags |= CONN_BULK;
}

static void unmark(struct conn *c)
{
    if (c->busy)
        list_del(&c->busy->link);
    c->flags &= ~CONN_BULK;
}

/* Keeps only a partially written head chunk, so that the byte stream
 * stays well-formed when a close frame is appended after an overflow. */
static void out_drop_unstarted(struct conn_busy *b)
{
    uint32_t keep = (b->out_count > 0 && b->out[b->out_head].off > 0) ? 1 : 0;

    for (uint32_t i = keep; i < b->out_count; i++) {
        struct conn_chunk *ch = &b->out[(b->out_head + i) & (b->out_cap - 1)];
        b->out_bytes -= ch->end - ch->off;
        METRIC_SUB(b->c->pool->metrics, output_bytes, ch->end - ch->off);
        payload_unref(ch->p);
    }
    b->out_count = keep;
}

static void overflow(struct conn *c)
{
    char peer[CONN_PEER_MAX];

    if (c->flags & CONN_OVERFLOWED)
        return;
    c->flags |= CONN_OVERFLOWED;
    METRIC_ADD(c->pool->metrics, output_limit_closes, 1);
    log_info("conn", "output limit exceeded, closing conn=%llu queued=%zu peer=%s",
             (unsigned long long)c->id, conn_output_len(c), conn_peer(c, peer));
    out_drop_unstarted(c->busy);
    if (c->ops->on_overflow)
        c->ops->on_overflow(c);
    conn_close_after_flush(c);
}

/* Starts c's soft window at now, with the timer that re-checks the limit
 * when it ends: a reader that stalls gets no more writes to trigger a check. */
static void soft_start(struct conn *c, uint64_t now)
{
    struct conn_soft *s = xmalloc(sizeof(*s));

    wheel_timer_init(&s->timer, conn_on_soft);
    s->c = c;
    s->since = now;
    c->busy->soft = s;
    loop_timer_start(c->pool->loop, &s->timer, c->pool->out_soft_ms + 1);
}

/* Called with output queued (c->busy exists). What counts is the own
 * queue plus the kernel's full buffer (kernel_bytes, 0 while writes go
 * through): the reader is that far behind. */
static void check_limits(struct conn *c)
{
    struct conn_pool *pool = c->pool;
    struct conn_busy *b = c->busy;
    size_t queued = b->out_bytes + b->kernel_bytes;
    uint64_t now;

    if (c->flags & CONN_OVERFLOWED)
        return;
    if (pool->out_hard_limit && queued > pool->out_hard_limit) {
        overflow(c);
        return;
    }
    if (!pool->out_soft_limit || queued <= pool->out_soft_limit) {
        soft_stop(b);
        return;
    }
    now = loop_now(pool->loop);
    if (!b->soft)
        soft_start(c, now);
    else if (now - b->soft->since >= pool->out_soft_ms)
        overflow(c);
}

static bool accepts_output(const struct conn *c)
{
    return !(c->flags & (CONN_CLOSING | CONN_CLOSE_AFTER));
}

static void out_push_range(struct conn_busy *b, struct payload *p, size_t off, size_t end)
{
    if (b->out_count == b->out_cap) {
        uint32_t ncap = b->out_cap * 2;
        struct conn_chunk *n = xmalloc(sizeof(*n) * ncap);
        for (uint32_t i = 0; i < b->out_count; i++)
            n[i] = b->out[(b->out_head + i) & (b->out_cap - 1)];
        if (b->out != b->ring)
            free(b->out);
        b->out = n;
        b->out_head = 0;
        b->out_cap = ncap;
    }
    b->out[(b->out_head + b->out_count) & (b->out_cap - 1)] =
        (struct conn_chunk){p, (uint32_t)off, (uint32_t)end};
    b->out_count++;
}

static void out_push(struct conn_busy *b, struct payload *p)
{
    out_push_range(b, p, 0, p->len);
}

/* The tail chunk if it is private to this queue and has room, else NULL. */
static struct payload *writable_tail(struct conn_busy *b)
{
    struct conn_chunk *t;

    if (b->out_count == 0)
        return NULL;
    t = &b->out[(b->out_head + b->out_count - 1) & (b->out_cap - 1)];
    if (atomic_load_explicit(&t->p->refs, memory_order_acquire) != 1 || t->p->len == t->p->cap ||
        t->end != t->p->len)
        return NULL;
    return t->p;
}

static void queue_bytes(struct conn_busy *b, const char *p, size_t n)
{
    while (n > 0) {
        struct payload *t = writable_tail(b);
        size_t k;

        if (!t) {
            t = payload_new(MAX(n, CONN_CHUNK_SIZE));
            out_push(b, t);
        }
        k = payload_append(t, p, n);
        b->out[(b->out_head + b->out_count - 1) & (b->out_cap - 1)].end = (uint32_t)t->len;
        p += k;
        n -= k;
        b->out_bytes += k;
        METRIC_ADD(b->c->pool->metrics, output_bytes, k);
    }
}

void conn_write(struct conn *c, const void *p, size_t n)
{
    if (!accepts_output(c) || n == 0)
        return;
    queue_bytes(busy_get(c), p, n);
    mark_pending(c);
    check_limits(c);
}

static void queue_payload(struct conn_busy *b, struct payload *p)
{
    /* Tiny shared payloads are cheaper copied than referenced. */
    if (p->len <= 64 && writable_tail(b)) {
        queue_bytes(b, p->data, p->len);
        return;
    }
    out_push(b, payload_ref(p));
    b->out_bytes += p->len;
    METRIC_ADD(b->c->pool->metrics, output_bytes, p->len);
}

void conn_write_payload(struct conn *c, struct payload *p)
{
    if (!accepts_output(c) || p->len == 0)
        return;
    queue_payload(busy_get(c), p);
    mark_pending(c);
    check_limits(c);
}

void conn_write_payload_bulk(struct conn *c, struct payload *p)
{
    if (!accepts_output(c) || p->len == 0)
        return;
    queue_payload(busy_get(c), p);
    mark_bulk(c);
    check_limits(c);
}

void conn_write_payload_range(struct conn *c, struct payload *p, size_t off, size_t end, bool bulk)
{
    struct conn_busy *b;

    if (!accepts_output(c) || off >= end)
        return;
    b = busy_get(c);
    if (end - off <= 64 && writable_tail(b)) {
        queue_bytes(b, p->data + off, end - off);
    } else {
        out_push_range(b, payload_ref(p), off, end);
        b->out_bytes += end - off;
        METRIC_ADD(b->c->pool->metrics, output_bytes, end - off);
    }
    if (bulk)
        mark_bulk(c);
    else
        mark_pending(c);
    check_limits(c);
}

/* Drops queued output and the soft timer; leftover input stays until the
 * free, as a protocol may still be reading it (conn_close() from on_data). */
void conn_close(struct conn *c)
{
    if (c->flags & CONN_CLOSING)
        return;
    c->flags |= CONN_CLOSING;
    /* The fd goes now (close() also leaves epoll: no EPOLL_CTL_DEL), the
     * struct at the deferred free. */
    loop_io_forget(&c->io);
    close(c->io.fd);
    c->io.fd = -1;
    /* The socket is gone, so its place under max-connections is free now,
     * not at the deferred (sliced) free: after 19,000 drops, reconnects
     * were refused until the frees caught up. */
    if (c->pool->shared_count)
        atomic_fetch_sub(c->pool->shared_count, 1);
    addrcap_forget(c->pool->addrs, c);
    wheel_del(&c->timer);
    unmark(c);
    if (c->busy) {
        soft_stop(c->busy);
        out_drop_all(c->busy);
        busy_release(c);
    }
    list_del(&c->link_all);
    c->pool->count--;
    METRIC_ADD(c->pool->metrics, conns_closed, 1);
    list_insert_tail(&c->pool->closed, &c->link_all);
}

void conn_close_after_flush(struct conn *c)
{
    if (c->flags & (CONN_CLOSING | CONN_CLOSE_AFTER))
        return;
    c->flags |= CONN_CLOSE_AFTER | CONN_READ_PAUSED;
    /* c->timer is the linger deadline from now on (conn_on_timer). */
    loop_timer_start(c->pool->loop, &c->timer, c->pool->linger_ms);
    mark_bulk(c); /* the flush hook shuts down once output is empty */
}

bool conn_is_closing(const struct conn *c)
{
    return (c->flags & (CONN_CLOSING | CONN_CLOSE_AFTER)) != 0;
}

size_t conn_input_len(const struct conn *c)
{
    return c->busy ? c->busy->in.len : 0;
}

size_t conn_output_len(const struct conn *c)
{
    return c->busy ? c->busy->out_bytes : 0;
}

uint64_t conn_soft_since(const struct conn *c)
{
    return c->busy && c->busy->soft ? c->busy->soft->since : 0;
}

void conn_timer_start(struct conn *c, uint64_t delay_ms)
{
    if (c->flags & (CONN_CLOSING | CONN_CLOSE_AFTER))
        return;
    loop_timer_start(c->pool->loop, &c->timer, delay_ms);
}

void conn_timer_stop(struct conn *c)
{
    if (c->flags & (CONN_CLOSING | CONN_CLOSE_AFTER))
        return;
    wheel_del(&c->timer);
}

static void peer_clear(struct conn *c)
{
    if (c->peer_family == AF_INET6 && !c->peer_v4mapped)
        pool_free(c->peer_ip.v6);
    c->peer_ip.v6 = NULL;
    c->peer_port = 0;
    c->peer_family = 0;
    c->peer_v4mapped = false;
}

void conn_set_peer(struct conn *c, const struct sockaddr *sa)
{
    peer_clear(c);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)(const void *)sa;
        c->peer_family = AF_INET;
        c->peer_port = ntohs(in4->sin_port);
        memcpy(c->peer_ip.v4, &in4->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        c->peer_family = AF_INET6;
        c->peer_port = ntohs(in6->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            c->peer_v4mapped = true;
            memcpy(c->peer_ip.v4, in6->sin6_addr.s6_addr + 12, 4);
        } else {
            c->peer_ip.v6 = pool_alloc(16);
            memcpy(c->peer_ip.v6, &in6->sin6_addr, 16);
        }
    }
}

char *conn_peer(const struct conn *c, char out[CONN_PEER_MAX])
{
    char ip[INET6_ADDRSTRLEN] = "?";
    struct in6_addr a6 = {0};

    if (c->peer_family == AF_INET) {
        inet_ntop(AF_INET, c->peer_ip.v4, ip, sizeof(ip));
    } else if (c->peer_family == AF_INET6) {
        if (c->peer_v4mapped) {
            a6.s6_addr[10] = a6.s6_addr[11] = 0xff;
            memcpy(a6.s6_addr + 12, c->peer_ip.v4, 4);
        } else {
            memcpy(&a6, c->peer_ip.v6, 16);
        }
        inet_ntop(AF_INET6, &a6, ip, sizeof(ip));
    }
    snprintf(out, CONN_PEER_MAX, "%s:%d", ip, c->peer_family ? c->peer_port : 0);
    return out;
}

void conn_set_ops(struct conn *c, const struct conn_ops *ops, void *proto)
{
    c->ops = ops;
    c->proto = proto;
}

static void conn_on_timer(struct wheel_timer *t, uint64_t now)
{
    struct conn *c = container_of(t, struct conn, timer);

    (void)now;
    if (c->flags & CONN_CLOSE_AFTER) {
        conn_close(c); /* the linger deadline */
        return;
    }
    if (c->ops->on_timer)
        c->ops->on_timer(c);
}

static void conn_on_soft(struct wheel_timer *t, uint64_t now)
{
    struct conn *c = container_of(t, struct conn_soft, timer)->c;

    (void)now;
    /* May free the timer (soft_stop): nothing touches t afterwards. */
    check_limits(c);
    busy_release(c);
}

/* ---- read path ---- */

/* Presents (p, n) to the protocol, again after each protocol switch.
 * Returns the bytes consumed. */
static size_t deliver(struct conn *c, const char *p, size_t n)
{
    size_t off = 0;

    while (off < n && !(c->flags & (CONN_CLOSING | CONN_READ_PAUSED))) {
        const struct conn_ops *before = c->ops;
        size_t k = c->ops->on_data(c, p + off, n - off);

        off += k;
        if (c->ops == before)
            break;
    }
    return off;
}

/* After input was consumed: frees the leftover buffer once empty (idle
 * connections own no input memory), closes c when it holds too much. */
static void input_done(struct conn *c)
{
    struct conn_busy *b = c->busy;

    if (!b)
        return;
    if (b->in.len == 0) {
        buf_release(&b->in);
        busy_release(c);
    } else if (b->in.len > c->pool->max_input) {
        conn_close(c);
    }
}

/* The busy part cannot go away under deliver() while it presents the
 * leftover buffer: it is kept while in.len > 0 (conn_close included). */
static void on_input(struct conn *c, const char *p, size_t n)
{
    struct conn_busy *b = c->busy;
    size_t used;

    if (c->flags & CONN_READ_PAUSED)
        return; /* closing gracefully: input is discarded */
    if (!b || b->in.len == 0) {
        used = deliver(c, p, n);
        if (used < n && !(c->flags & (CONN_CLOSING | CONN_READ_PAUSED)))
            buf_append(&busy_get(c)->in, p + used, n - used);
    } else {
        buf_append(&b->in, p, n);
        used = deliver(c, b->in.data, b->in.len);
        if (c->flags & CONN_CLOSING)
            return;
        buf_consume(&b->in, used);
    }
    input_done(c);
}

void conn_pause_input(struct conn *c, bool pause)
{
    uint32_t ev = c->io.events;

    if (c->flags & (CONN_CLOSING | CONN_READ_PAUSED))
        return;
    ev = pause ? (ev & ~(uint32_t)(EPOLLIN | EPOLLRDHUP)) : (ev | EPOLLIN | EPOLLRDHUP);
    loop_io_set(c->pool->loop, &c->io, ev);
}

bool conn_input_paused(const struct conn *c)
{
    return !(c->io.events & EPOLLIN);
}

void conn_replay_input(struct conn *c)
{
    struct conn_busy *b = c->busy;
    size_t used;

    if (!b || b->in.len == 0 || (c->flags & (CONN_CLOSING | CONN_READ_PAUSED)))
        return;
    used = deliver(c, b->in.data, b->in.len);
    if (c->flags & CONN_CLOSING)
        return;
    buf_consume(&b->in, used);
    if (b->in.len == 0) {
        buf_release(&b->in);
        busy_release(c);
    }
}

static void on_eof(struct conn *c)
{
    if (c->flags & (CONN_SHUT_WR | CONN_CLOSE_AFTER)) {
        /* Both sides are done once nothing is left to send: close() sends
         * our FIN (the input is drained, so no RST). */
        if ((c->flags & CONN_SHUT_WR) || out_count(c) == 0) {
            conn_close(c);
            return;
        }
        c->flags |= CONN_READ_PAUSED;
        loop_io_set(c->pool->loop, &c->io, c->io.events & ~(uint32_t)(EPOLLIN | EPOLLRDHUP));
        return;
    }
    if (c->ops->on_eof)
        c->ops->on_eof(c);
    else
        conn_close(c);
    if (!(c->flags & CONN_CLOSING))
        loop_io_set(c->pool->loop, &c->io, c->io.events & ~(uint32_t)(EPOLLIN | EPOLLRDHUP));
}

/* n bytes just read. The usual case, no leftover input and no protocol
 * switch, goes straight to the protocol: the read path is read_some ->
 * ops->on_data, nothing in between (docs/architecture.md counts it). */
static void read_input(struct conn *c, const char *p, size_t n)
{
    const struct conn_ops *ops = c->ops;
    size_t used;

    if ((c->busy && c->busy->in.len) || (c->flags & CONN_READ_PAUSED)) {
        on_input(c, p, n);
        return;
    }
    used = ops->on_data(c, p, n);
    if (used == n || (c->flags & (CONN_CLOSING | CONN_READ_PAUSED))) {
        input_done(c);
    } else if (c->ops != ops) {
        on_input(c, p + used, n - used); /* the rest is the next protocol's */
    } else {
        buf_append(&busy_get(c)->in, p + used, n - used);
        input_done(c);
    }
}

static void read_some(struct conn *c)
{
    struct conn_pool *pool = c->pool;

    for (int i = 0; i < CONN_READS_PER_EVENT && !(c->flags & CONN_CLOSING) && !conn_input_paused(c);
         i++) {
        ssize_t n = read(c->io.fd, pool->rbuf, pool->rbuf_size);

        if (n > 0) {
            METRIC_ADD(pool->metrics, bytes_in, (uint64_t)n);
            read_input(c, pool->rbuf, (size_t)n);
            if ((size_t)n < pool->rbuf_size)
                return;
        } else if (n == 0) {
            on_eof(c);
            return;
        } else {
            if (errno != EAGAIN && errno != EINTR)
                conn_close(c);
            return;
        }
    }
}

static void conn_on_io(struct loop_io *io, uint32_t events)
{
    struct conn *c = container_of(io, struct conn, io);

    if (events & EPOLLOUT)
        mark_pending(c);
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        read_some(c);
}

/* ---- write path ---- */

static size_t fill_iov(const struct conn_busy *b, struct iovec *iov)
{
    size_t n = MIN(b->out_count, CONN_IOV_MAX);

    for (size_t i = 0; i < n; i++) {
        const struct conn_chunk *ch = &b->out[(b->out_head + i) & (b->out_cap - 1)];
        iov[i].iov_base = ch->p->data + ch->off;
        iov[i].iov_len = ch->end - ch->off;
    }
    return n;
}

static void advance(struct conn_busy *b, size_t n)
{
    b->out_bytes -= n;
    METRIC_SUB(b->c->pool->metrics, output_bytes, n);
    while (n > 0) {
        struct conn_chunk *ch = &b->out[b->out_head];
        size_t left = ch->end - ch->off;

        if (n < left) {
            ch->off += (uint32_t)n;
            return;
        }
        n -= left;
        payload_unref(ch->p);
        b->out_head = (b->out_head + 1) & (b->out_cap - 1);
        b->out_count--;
    }
}

static void set_want_write(struct conn *c, bool on)
{
    uint32_t ev = c->io.events;

    if (on == !!(c->flags & CONN_WANT_WRITE))
        return;
    ev = on ? (ev | EPOLLOUT) : (ev & ~(uint32_t)EPOLLOUT);
    if (on)
        c->flags |= CONN_WANT_WRITE;
    else
        c->flags &= ~CONN_WANT_WRITE;
    loop_io_set(c->pool->loop, &c->io, ev);
}

/* Output drained on a closing connection: half-close and wait for EOF, or
 * close if the EOF was already read. */
static void finish_close(struct conn *c)
{
    if (c->flags & CONN_SHUT_WR)
        return;
    c->flags |= CONN_SHUT_WR;
    /* After the peer's EOF (no EPOLLIN any more) close() alone is the
     * graceful end; before it, half-close and wait for the EOF. */
    if (!(c->io.events & EPOLLIN) || shutdown(c->io.fd, SHUT_WR) < 0)
        conn_close(c);
}

/* Bytes the kernel holds for c's socket, not yet sent or not yet
 * acknowledged (SIOCOUTQ: TCP and Unix stream sockets); 0 if unknown. */
static size_t kernel_queued(const struct conn *c)
{
    int n = 0;

    if (ioctl(c->io.fd, SIOCOUTQ, &n) < 0 || n < 0)
        return 0;
    return (size_t)n;
}

/* c is busy (it was on a flush list); it may be idle afterwards. */
static void flush_one(struct conn *c)
{
    struct conn_busy *b = c->busy;
    struct iovec iov[CONN_IOV_MAX];
    ssize_t n;

    if (b->out_count > 0) {
        n = writev(c->io.fd, iov, (int)fill_iov(b, iov));
        METRIC_ADD(c->pool->metrics, writev_calls, 1);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            conn_close(c);
            return;
        }
        if (n > 0) {
            METRIC_ADD(c->pool->metrics, bytes_out, (uint64_t)n);
            advance(b, (size_t)n);
        }
    }
    if (b->out_count > 0) {
        /* A short write: the socket's buffer is full, and part of what the
         * reader has not taken. Read once here, not on every write. */
        b->kernel_bytes = kernel_queued(c);
        set_want_write(c, true);
        check_limits(c);
        return;
    }
    out_drop_all(b); /* the empty ring: back to the inline one */
    soft_stop(b);
    set_want_write(c, false);
    if (c->flags & CONN_CLOSE_AFTER)
        finish_close(c);
    busy_release(c); /* idle connections own no output memory */
}

/* Whether the iteration's slice for deferrable work is spent, after done
 * items of it: never before CONN_SLICE_MIN (so bulk output progresses
 * however busy the iterations are), else once the iteration has been busy
 * LOOP_SLICE_US. When spent, the next iteration is asked not to sleep. */
static bool slice_spent(struct loop *l, unsigned done)
{
    if (done < CONN_SLICE_MIN || loop_busy_us(l) < LOOP_SLICE_US)
        return false;
    loop_more(l);
    return true;
}

void conn_pool_flush(struct loop *l, void *arg)
{
    struct conn_pool *pool = arg;
    struct list *pos, *tmp;
    unsigned done = 0;

    list_foreach_safe(pos, tmp, &pool->pending)
    {
        struct conn *c = container_of(pos, struct conn_busy, link)->c;

        list_del(pos);
        flush_one(c);
    }
    list_foreach_safe(pos, tmp, &pool->bulk)
    {
        struct conn *c = container_of(pos, struct conn_busy, link)->c;

        if (slice_spent(l, done++))
            break;
        unmark(c);
        flush_one(c);
    }
    done = 0;
    list_foreach_safe(pos, tmp, &pool->closed)
    {
        if (slice_spent(l, done++))
            break;
        list_del(pos);
        conn_free(container_of(pos, struct conn, link_all));
    }
}
