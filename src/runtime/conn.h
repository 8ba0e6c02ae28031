/* SPDX-License-Identifier: MIT */
/*
 * conn.h - a TCP connection on a worker's loop: input, coalesced output,
 * output limits and deferred close. Protocols (HTTP, WebSocket, SSE) sit on
 * top through struct conn_ops and may switch ops (an HTTP upgrade).
 *
 * Input: the worker reads into one shared per-worker buffer; bytes a
 * protocol leaves unconsumed are copied into the connection's own buffer,
 * which exists only while a message is partial (idle connections own no
 * input memory).
 * Memory: an idle connection is struct conn and the protocol room after
 * it (CONN_PROTO_ROOM), one pool object; leftover input, queued output
 * and the soft-limit timer live in a busy part allocated on demand.
 * Output: conn_write() copies small writes into a private tail chunk;
 * conn_write_payload() queues a reference to a shared, pre-encoded payload.
 * Nothing is written at once: the connection is put on the worker's
 * pending list and flushed by one writev() in the before-sleep hook, so a
 * socket gets at most one writev per loop iteration.
 * Bulk output: conn_write_payload_bulk() queues the same way, in the same
 * byte order, but puts the connection on the bulk list, which the hook
 * flushes only while the iteration has been busy less than LOOP_SLICE_US
 * (loop.h); the rest waits for the next iterations, which do not sleep.
 * It is for output that has already waited for a batch window (room
 * deltas), so that a burst of it (10,000 expiries fanned out to their
 * rooms) cannot hold up urgent output (a cursor, an ack) for tens of ms.
 * Any urgent write to the connection makes all its queued output urgent.
 * A graceful close (conn_close_after_flush) and the frees of closed
 * connections are sliced the same way.
 * Limits: queued bytes above the hard limit, or above the soft limit for
 * longer than the soft window, trip ops->on_overflow (WebSocket sends close
 * 4008) and the connection is closed after a short linger; writes to a
 * closing connection are dropped, so memory stays bounded. Queued bytes
 * are the connection's own queue plus, once a write came back short (the
 * socket's buffer is full), what the kernel still holds for it (SIOCOUTQ,
 * read once per flush): a reader is cut at the configured limit, not at
 * the limit plus a send buffer of up to tcp_wmem's max (4 MiB). pool->
 * sndbuf bounds that buffer on every new socket.
 * Lifetime: conn_close() never frees. It closes the socket, stops timers
 * and queues the connection; the before-sleep hook calls ops->on_close and
 * frees it. During a graceful close c->timer is the linger deadline (the
 * protocol timer has no use then and cannot be armed); the soft-limit
 * timer is allocated only while the queue is over the soft limit, so an
 * idle connection carries one timer.
 * Peer: the address is kept in binary (IPv4 in 4 bytes, other IPv6 in
 * 16 of its own) and formatted only when a log line or a rate-limit key
 * needs it.
 * Code that iterates pool->all (list_foreach_safe) may close the
 * connection it is on, never another: closing moves a connection to
 * pool->closed through the same link, which would derail the walk.
 */
#ifndef CONN_H
#define CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdatomic.h>
#include <sys/socket.h>

#include "buf.h"
#include "list.h"
#include "loop.h"
#include "wheel.h"

struct conn;
struct addrcap;
struct conn_pool;
struct conn_soft;
struct metrics;

struct conn_ops {
    const char *name; /* "http", "ws", "sse": for logs and metrics */
    /* New input (p, n): leftover bytes followed by fresh ones. Returns the
     * bytes consumed; the rest is kept and presented again with more data.
     * May call conn_close(). Required. */
    size_t (*on_data)(struct conn *c, const char *p, size_t n);
    /* The peer closed its side (read returned 0). Optional: default closes. */
    void (*on_eof)(struct conn *c);
    /* The output queue went over its limit. Optional. */
    void (*on_overflow)(struct conn *c);
    /* c->timer fired. Optional. */
    void (*on_timer)(struct conn *c);
    /* Called exactly once, from the deferred free, before c is freed:
     * release c->proto here. Optional. */
    void (*on_close)(struct conn *c);
};

/* Per-worker state shared by its connections. Zero-fill, then conn_pool_init. */
struct conn_pool {
    struct loop *loop;         /* the worker's loop */
    struct metrics *metrics;   /* the worker's counters */
    unsigned worker_id;        /* high bits of connection ids */
    uint64_t next_seq;         /* low bits of connection ids (from the wall clock) */
    size_t out_soft_limit;     /* bytes; 0 disables */
    uint64_t out_soft_ms;      /* how long over soft before closing */
    size_t out_hard_limit;     /* bytes; 0 disables */
    int sndbuf;                /* SO_SNDBUF set on new sockets; 0 leaves autotuning */
    uint64_t linger_ms;        /* close-after-flush deadline */
    size_t max_input;          /* leftover input cap; above it the conn is closed */
    struct list all;           /* every live connection */
    struct list pending;       /* busy parts of connections with urgent output to flush */
    struct list bulk;          /* ditto, with only bulk output (CONN_BULK) */
    struct list closed;        /* deferred frees */
    size_t count;              /* live connections */
    atomic_uint *shared_count; /* optional: process-wide count of open sockets,
                                * decremented when the socket is closed */
    struct addrcap *addrs;     /* optional: connections per address (addrcap.h),
                                * shared by the workers; closing forgets c */
    char *rbuf;                /* shared read buffer */
    size_t rbuf_size;
};

/* Bulk flushes, and frees of closed connections, that one iteration does
 * at least however long it has been busy: bulk output always progresses. */
#define CONN_SLICE_MIN 32

#define CONN_CLOSING     0x01u /* conn_close() called; no I/O any more */
#define CONN_CLOSE_AFTER 0x02u /* close once output drains */
#define CONN_WANT_WRITE  0x04u /* EPOLLOUT armed */
#define CONN_OVERFLOWED  0x08u /* output limit tripped */
#define CONN_READ_PAUSED 0x10u /* input is discarded (after EOF or close-after) */
#define CONN_SHUT_WR     0x20u /* our side shut down; waiting for the peer's EOF */
#define CONN_BULK        0x40u /* on pool->bulk, not pool->pending */
#define CONN_GREETED     0x80u /* conn_first_message() was called */

/* The peer's IP address, binary: IPv4 inline, and so is an IPv4-mapped
 * IPv6 address (what a dual-stack listener reports for an IPv4 client);
 * any other IPv6 address, rarer, in 16 bytes of its own. */
union conn_ip {
    uint8_t v4[4]; /* peer_family AF_INET, or AF_INET6 with peer_v4mapped */
    uint8_t *v6;   /* peer_family AF_INET6 otherwise: pool_alloc'd, owned */
};

/* "ip:port" (IPv6 unbracketed, "?:0" when unknown) fits in this with its NUL. */
#define CONN_PEER_MAX 64

struct conn_chunk {
    struct payload *p; /* referenced */
    uint32_t off;      /* bytes of p already written (from its start) */
    uint32_t end;      /* where its bytes end in p: p->len, or a slice's end */
};

/*
 * The connection. An idle one (nothing partial in, nothing queued out, no
 * limit being watched) is just this struct: the state of a busy one
 * (leftover input, the output ring, its place on a flush list, the
 * soft-limit timer) is one struct conn_busy (conn.c), allocated when the
 * connection gets busy and freed when it is idle again.
 */
struct conn {
    uint64_t id;                /* worker << 48 | seq; unique across restarts (conn_pool_init) */
    struct loop_io io;          /* epoll watcher; io.fd is the socket, owned,
                                 * closed by conn_close() (then -1) */
    struct conn_pool *pool;     /* borrowed; outlives c */
    const struct conn_ops *ops; /* current protocol */
    void *proto;                /* protocol state, owned by ops */
    struct conn_busy *busy;     /* while busy (conn.c), else NULL */
    struct wheel_timer timer;   /* protocol timer (header timeout, ping, ...);
                                 * the linger deadline once CONN_CLOSE_AFTER */
    struct list link_all;       /* pool->all while live, pool->closed once closed */
    union conn_ip peer_ip;      /* the peer, for logs and rate-limit keys (conn_peer) */
    uint16_t peer_port;         /* host order */
    uint8_t peer_family;        /* 0 (unknown), AF_INET or AF_INET6 */
    bool peer_v4mapped;         /* AF_INET6 ::ffff:a.b.c.d, kept in peer_ip.v4 */
    uint8_t flags;              /* CONN_* */
    uint8_t addr_state;         /* enum addrcap_state: how pool->addrs counts it */
    uint16_t born_ms;           /* loop ms of conn_new(), mod 2^16 (conn_first_message) */
};

/*
 * Bytes allocated right after every struct conn for the state of the
 * protocol that ends up owning the connection (conn_proto_room()): WebSocket
 * keeps its struct wsconn there, so that a WebSocket connection, which
 * lives long, is one allocation. Zero-filled by conn_new(); a protocol
 * that takes it over clears what it uses.
 */
#define CONN_PROTO_ROOM 24

static inline void *conn_proto_room(struct conn *c)
{
    return c + 1;
}

/* The connection whose room is room (from conn_proto_room). */
static inline struct conn *conn_from_proto_room(const void *room)
{
    return (struct conn *)room - 1;
}

/* Initialises pool storage; aborts on OOM. */
void conn_pool_init(struct conn_pool *pool, struct loop *l, struct metrics *m, unsigned worker_id);
/* Frees every connection immediately (only at shutdown, outside callbacks). */
void conn_pool_release(struct conn_pool *pool);

/* Takes ownership of fd (non-blocking), starts reading. Never NULL. */
struct conn *conn_new(struct conn_pool *pool, int fd, const struct conn_ops *ops, void *proto);
/* Copies (p, n) into the output queue. Dropped when closing. */
void conn_write(struct conn *c, const void *p, size_t n);
/* Queues a new reference to p (the caller keeps its own). Dropped when closing. */
void conn_write_payload(struct conn *c, struct payload *p);
/* Same, as bulk output: flushed within the iteration's slice (LOOP_SLICE_US)
 * rather than unconditionally, so it may go out an iteration or a few
 * later, after urgent output queued since (never reordered within c). */
void conn_write_payload_bulk(struct conn *c, struct payload *p);
/* Queues bytes [off, end) of p as one piece, referencing p (no copy): a
 * slice of a payload shared by many connections, such as the frames of
 * a room tick around a recipient's own. bulk as conn_write_payload_bulk.
 * off <= end <= p->len, p->len < 4 GiB. */
void conn_write_payload_range(struct conn *c, struct payload *p, size_t off, size_t end, bool bulk);
/* Deferred close: stops I/O now, drops queued output, frees later. Idempotent. */
void conn_close(struct conn *c);
/* Stops reading; closes once queued output is written or after linger_ms. */
void conn_close_after_flush(struct conn *c);
bool conn_is_closing(const struct conn *c);   /* closing or close-after-flush */
size_t conn_input_len(const struct conn *c);  /* leftover input bytes kept */
size_t conn_output_len(const struct conn *c); /* unwritten output bytes queued */
/* The first call for c sets *age_ms to the milliseconds since conn_new()
 * (loop time, modulo 65,536: an older connection reads younger) and
 * returns true; later calls return false. A protocol calls it with each
 * message it sends on c (inline: after the first, one flag test), for the
 * handshake histogram. */
static inline bool conn_first_message(struct conn *c, uint64_t *age_ms)
{
    if (c->flags & CONN_GREETED)
        return false;
    c->flags |= CONN_GREETED;
    *age_ms = (uint16_t)((uint16_t)loop_now(c->pool->loop) - c->born_ms);
    return true;
}
/* Loop ms when the output queue went over the soft limit; 0 while below. */
uint64_t conn_soft_since(const struct conn *c);
/* Arms c->timer (ops->on_timer) delay_ms from now; re-arms if armed.
 * Both are no-ops once closing (c->timer is then the linger deadline). */
void conn_timer_start(struct conn *c, uint64_t delay_ms);
void conn_timer_stop(struct conn *c);
/* Stops (true) or resumes (false) reading from the socket without
 * discarding anything: bytes wait in the kernel, so a peer cannot make a
 * paused connection buffer more. Used while an HTTP answer is deferred. */
void conn_pause_input(struct conn *c, bool pause);
/* Whether c's input is paused (conn_pause_input()): a protocol stops
 * consuming input then, and what it leaves is kept for the replay. */
bool conn_input_paused(const struct conn *c);
/* Presents the buffered leftover input to the protocol again (after it
 * paused, e.g. an HTTP request answered later). Not from inside on_data. */
void conn_replay_input(struct conn *c);
/* Records the peer's address (from accept) in c->peer_*: an AF_INET or
 * AF_INET6 sockaddr, anything else as unknown. */
void conn_set_peer(struct conn *c, const struct sockaddr *sa);
/* Formats the peer as "ip:port" into out and returns out. */
char *conn_peer(const struct conn *c, char out[CONN_PEER_MAX]);
/* Switches protocol (e.g. HTTP -> WebSocket). Old proto state must already be released. */
void conn_set_ops(struct conn *c, const struct conn_ops *ops, void *proto);

/* Before-sleep work: flush pending writes (one writev each), then free
 * deferred closes. Registered as a loop hook by the worker. */
void conn_pool_flush(struct loop *l, void *pool);

#endif
