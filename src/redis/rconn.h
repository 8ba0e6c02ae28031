/* SPDX-License-Identifier: MIT */
/*
 * rconn.h - one non-blocking RESP connection on the loop: connect, batched
 * writes, replies parsed by hiredis's redisReader and matched in FIFO
 * order (or all handed over as pushes, for a pub/sub connection).
 *
 * Internal to src/redis/. An rconn is embedded in its owner and reused
 * across reconnects: it is never freed while the loop runs, so no callback
 * can outlive it (the owner releases it in redis_free(), outside every
 * callback). It never retries, times out or interprets a reply: the owner
 * (redis.c) does, with rconn_oldest() and its own timers.
 *
 * Writes are batched: rconn_send() appends to the output buffer and puts
 * the connection on the owner's flush list; the owner's before-sleep hook
 * calls rconn_flush(), one write() per connection per iteration (EPOLLOUT
 * carries on after a short write).
 */
#ifndef RCONN_H
#define RCONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <hiredis/hiredis.h>

#include "buf.h"
#include "list.h"
#include "loop.h"

struct metrics;
struct rconn;

/* A request waiting for its reply: embedded in the owner's command. */
struct rconn_req {
    struct list link; /* private: the connection's FIFO */
    uint64_t sent_at; /* loop ms when rconn_send() queued it */
    uint64_t sent_us; /* with metrics: time_mono_us() of the write that sent it, 0 before */
};

struct rconn_ops {
    /* The TCP connection is established (a later iteration than
     * rconn_connect(), always). */
    void (*connected)(struct rconn *c);
    /* A reply, borrowed until return. req is the FIFO head it answers
     * (already unlinked), or NULL on a push connection. The callback may
     * send, or close the connection (rconn_close); the rest of the input
     * is then discarded. */
    void (*reply)(struct rconn *c, struct rconn_req *req, const redisReply *r);
    /* The connection failed or was lost (err < 0: -errno, or REDIS_E_PROTO
     * when the input is not RESP2). It is closed already; reqs holds the
     * requests that were waiting, which the owner must unlink (all of
     * them) before returning. */
    void (*lost)(struct rconn *c, struct list *reqs, int err);
};

enum rconn_state {
    RCONN_IDLE,       /* no socket */
    RCONN_CONNECTING, /* connect() in progress */
    RCONN_OPEN,       /* connected */
};

struct rconn {
    struct loop *loop;
    const struct rconn_ops *ops;
    void *data;                   /* the owner's */
    struct sockaddr_storage addr; /* resolved by rconn_set_addr() */
    socklen_t addrlen;            /* 0 until then */
    struct loop_io io;
    int fd;                 /* -1 when idle */
    enum rconn_state state; /* ... */
    bool push;              /* every reply is a push (pub/sub): no FIFO */
    redisReader *reader;    /* while not idle */
    struct buf out;         /* bytes not yet written from out_off on */
    size_t out_off;         /* written prefix of out */
    struct list fifo;       /* struct rconn_req, oldest first */
    struct list flush_link; /* on *flushq while output waits for the hook */
    struct list *flushq;    /* the owner's flush list */
    uint64_t since;         /* loop ms of the last state change */
    unsigned gen;           /* bumped by every close: callbacks notice one */
    uint64_t writes;        /* write() calls, ever */

    /* NULL, or where replies' round trips are observed (MH_REDIS): one
     * clock reading per write and one per read. */
    struct metrics *metrics;
};

/* Zero-fills and initialises c (idle). flushq: the list the owner's hook
 * drains with rconn_flush(). */
void rconn_init(struct rconn *c, struct loop *l, struct list *flushq, const struct rconn_ops *ops,
                void *data);
/* Resolves host:port (blocking for a host name; instant for an address).
 * Returns 0 or -EHOSTUNREACH-like -errno; c keeps its previous address on
 * failure. */
int rconn_set_addr(struct rconn *c, const char *host, uint16_t port);
/* Starts connecting to the resolved address; ops->connected or ops->lost
 * follows on a later iteration. Returns 0, or -errno (no callback then). */
int rconn_connect(struct rconn *c);
/* Appends a formatted command (copied). req: waits for its reply in FIFO
 * order (NULL on a push connection, or for a request whose reply the
 * caller has arranged to skip otherwise). Not while idle. */
void rconn_send(struct rconn *c, const char *cmd, size_t len, struct rconn_req *req);
/* Writes what is queued, once (the owner's before-sleep hook). May call
 * ops->lost on a write error. */
void rconn_flush(struct rconn *c);
/* Closes the socket now, drops unwritten output and partial input, and
 * moves the waiting requests onto reqs (their owner's to finish; NULL:
 * the caller has already taken them). No callback. Idle: a no-op. */
void rconn_close(struct rconn *c, struct list *reqs);
/* rconn_close() and frees the buffers: c may then be freed. */
void rconn_release(struct rconn *c);
/* loop ms when the oldest waiting request was sent, or 0 when none. */
uint64_t rconn_oldest(const struct rconn *c);

#endif
