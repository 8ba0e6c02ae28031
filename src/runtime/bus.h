/* SPDX-License-Identifier: MIT */
/*
 * bus.h - batched messages between the share-nothing workers.
 *
 * Workers (threads, each with its own loop) exchange messages and nothing
 * else. State is partitioned across workers by key (bus_route), exactly as
 * nodes will later partition it through Redis, so the bus is that seam.
 *
 * Messages are caller-allocated structs whose first member is a struct
 * bus_msg; the bus never allocates, copies or frees a message except
 * through its free callback. Ownership moves with the message: the sender
 * gives it up in bus_send(), the receiver gets it from bus_take() (or its
 * handler from bus_drain()).
 *
 * Threads: worker w alone may call bus_send(b, w, ...), bus_flush(b, w),
 * bus_take(b, w) and bus_drain(b, w, ...). bus_route(), bus_inbox_fd() and
 * bus_stat_wakeups() may be called from any thread; bus_new() and bus_free() from one thread
 * while no worker uses the bus.
 *
 * Cost: bus_send() is a pointer store (no atomics, no syscall); bus_flush()
 * does one CAS per destination with pending messages and writes the
 * destination's eventfd only when its inbox was empty; bus_take() does one
 * read(2) and one atomic exchange for however many messages are waiting.
 * Order: messages from one sender to one receiver arrive in send order;
 * nothing is promised across senders.
 */
#ifndef BUS_H
#define BUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bus;
struct bus_msg;

/* Releases a message (and the struct that embeds it). */
typedef void bus_msg_free_cb(struct bus_msg *m);
/* Receives one message and owns it: must free it (m->free) or reuse it. */
typedef void bus_handle_cb(void *ctx, struct bus_msg *m);

/* The first member of every message. */
struct bus_msg {
    struct bus_msg *_next; /* private to bus.c */
    uint32_t type;         /* set by the sender; meaning is the receiver's */
    uint32_t from;         /* sending worker; set by bus_send() */
    bus_msg_free_cb *free; /* releases the message; NULL if nothing to release */
};

/* Creates the bus for n >= 1 workers, each with an empty inbox and an
 * eventfd. Aborts on OOM or when an eventfd cannot be created. */
struct bus *bus_new(unsigned n);
/* NULL is a no-op. Releases every message still queued (sent but not
 * flushed, or flushed but not drained) through its free callback, then
 * closes the eventfds. No worker may use the bus any more. */
void bus_free(struct bus *b);

unsigned bus_workers(const struct bus *b); /* n */
/* The worker that owns key: hash_bytes(key, len) % n. Stable for the
 * life of the bus; pure, any thread. */
unsigned bus_route(const struct bus *b, const void *key, size_t len);

/* Queues m for worker `to` (to == from is allowed) and takes ownership of
 * it; nothing is delivered before the next bus_flush(b, from). Sets
 * m->from. Worker from's thread only. */
void bus_send(struct bus *b, unsigned from, unsigned to, struct bus_msg *m);
/* Like bus_send(), for a message that may wait (a heartbeat, which
 * refreshes a TTL of tens of seconds): bus_flush() leaves alone an outbox
 * that holds only such messages, so that its destination need not wake up
 * for them. They go with the next bus_send() to the same worker (in send
 * order, before it) or at bus_flush_all(). Worker from's thread only. */
void bus_send_lazy(struct bus *b, unsigned from, unsigned to, struct bus_msg *m);
/* Publishes every outbox of worker from that holds a bus_send() message,
 * with the lazy messages queued before it; call once per loop iteration
 * (the before-sleep hook). Worker from's thread only. */
void bus_flush(struct bus *b, unsigned from);
/* Publishes everything worker from has queued, lazy messages included.
 * Worker from's thread only. */
void bus_flush_all(struct bus *b, unsigned from);
/* Whether worker from holds messages not yet published (after
 * bus_flush(): lazy ones only). Worker from's thread only. */
bool bus_lazy_pending(struct bus *b, unsigned from);

/* The eventfd (EFD_NONBLOCK | EFD_CLOEXEC, owned by the bus) that becomes
 * readable when worker's inbox goes from empty to non-empty. */
int bus_inbox_fd(const struct bus *b, unsigned worker);
/* Clears the eventfd, then hands every message waiting in worker's inbox
 * to handle(ctx, m), in send order per sender. The handler owns m and may
 * call bus_send() and bus_flush(); what it sends to worker itself waits
 * for a flush and the next drain. Returns the number handled. Worker's
 * thread only. */
size_t bus_drain(struct bus *b, unsigned worker, bus_handle_cb *handle, void *ctx);
/* bus_drain() without the callback: clears the eventfd and returns every
 * message waiting in worker's inbox (NULL: none), in send order per
 * sender, linked by bus_next(). The caller owns them all; read a
 * message's bus_next() before handing it on (the receiver may free it).
 * Worker's thread only. */
struct bus_msg *bus_take(struct bus *b, unsigned worker);
/* Messages worker from has sent to worker to (bus_send() or lazily) that
 * to has not taken yet: what waits in from's outbox and to's inbox. The
 * measure of backpressure (engine/flow.h). Worker from's thread only;
 * exact up to the receiver's take in progress. */
uint64_t bus_backlog(struct bus *b, unsigned from, unsigned to);
/* The message after m in what bus_take() returned, NULL after the last. */
static inline struct bus_msg *bus_next(const struct bus_msg *m)
{
    return m->_next;
}

/* Eventfd writes (empty -> non-empty inbox transitions) over all inboxes
 * since bus_new(); for metrics and tests. Any thread. */
uint64_t bus_stat_wakeups(const struct bus *b);

#endif
