/* SPDX-License-Identifier: MIT */
/*
 * bus.c - per-worker lock-free inboxes, batched outboxes, eventfd wakeups.
 *
 * Exports the bus.h API. Holds no lock and allocates only in bus_new();
 * it does not know what messages mean, and it does not watch the
 * eventfds (each worker's loop does).
 *
 * ---- The protocol ----
 *
 * Outboxes. Worker f keeps one private outbox per destination t, a chain of
 * the messages sent since its last flush, newest first: bus_send() is two
 * pointer stores. Only f touches its outboxes, so they need no atomics.
 *
 * Inboxes. Each worker's inbox is an intrusive stack (newest first) with an
 * _Atomic head: many producers, one consumer. bus_flush() pushes a whole
 * outbox chain at once: it points the chain's oldest message at the head it
 * read and CASes the head from that value to the chain's newest message,
 * retrying on contention. One CAS per destination per loop iteration,
 * however many messages the iteration produced. The CAS is a release, so
 * the messages' contents and links are visible to whoever acquires the
 * head; later pushes by other producers are read-modify-writes and so
 * extend that release sequence.
 *
 * Draining. The consumer takes the whole stack with one atomic_exchange of
 * the head with NULL (acquire) and reverses it. A stack read newest first
 * and reversed is oldest first, and a pushed chain was stored newest first,
 * so every sender's messages come out in send order.
 *
 * Why there is no ABA problem. ABA bites a lock-free stack whose consumers
 * pop one node with a CAS: the head can be popped, freed, reused and pushed
 * again between a pop's read and its CAS. Here nothing is ever popped by
 * CAS: producers only push (their CAS succeeds only if the head is still
 * what they linked their chain to, and a changed-back head is harmless
 * because the link they stored is then still right), and the single
 * consumer detaches everything with an exchange, which has no expected
 * value to be fooled by. A message is owned by the consumer from the moment
 * the exchange returns it, and no producer holds a pointer into the inbox.
 *
 * Wakeups. A producer that finds the inbox empty (its CAS replaced NULL)
 * writes 1 to the consumer's eventfd; pushes onto a non-empty inbox write
 * nothing, because a wakeup is already pending for the messages below them
 * and the consumer will take everything at once. The consumer must read
 * (clear) the eventfd before it exchanges the head. In the other order a
 * push landing between exchange and read would see an empty inbox, write
 * the eventfd, and have that write cleared by the read: the inbox would
 * then hold messages with no wakeup pending, and since later pushes see a
 * non-empty inbox, none would ever come. In this order such a push is
 * either taken by the exchange (its write becomes one spurious, harmless
 * wakeup) or comes after it and finds the inbox empty, so its write stays.
 * Hence: at most one eventfd write per empty -> non-empty transition.
 */
#include "bus.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* Keeps two inboxes' hot fields, and two senders' outbox rows, off one
 * cache line (64 bytes) without relying on the allocator's alignment. */
#define BUS_PAD 64

struct bus_inbox {
    _Atomic(struct bus_msg *) head; /* newest first; NULL when empty */
    _Atomic uint64_t wakeups;       /* eventfd writes, for bus_stat_wakeups() */
    _Atomic uint64_t *taken;        /* [from]: messages of each sender taken (bus_backlog()) */
    int efd;                        /* readable when head became non-NULL */
    char _pad[BUS_PAD];
};

/* Messages sent by one worker to one destination since the last flush. */
struct bus_outbox {
    struct bus_msg *newest; /* chain head, linked newest to oldest */
    struct bus_msg *oldest; /* chain tail; its _next is set at push time */
    bool urgent;            /* holds a bus_send() message: bus_flush() pushes it */
    uint64_t sent;          /* messages ever appended here (bus_backlog()) */
};

struct bus {
    unsigned n;              /* workers */
    size_t stride;           /* outboxes per sender row, padding included */
    struct bus_inbox *inbox; /* n inboxes */
    struct bus_outbox *out;  /* n rows of n outboxes: out[from * stride + to] */
};

static struct bus_outbox *outbox(struct bus *b, unsigned from, unsigned to)
{
    return &b->out[(size_t)from * b->stride + to];
}

/* Frees every message of a chain linked through _next (order irrelevant). */
static void free_chain(struct bus_msg *m)
{
    while (m != NULL) {
        struct bus_msg *next = m->_next;

        if (m->free != NULL)
            m->free(m);
        m = next;
    }
}

struct bus *bus_new(unsigned n)
{
    struct bus *b = xcalloc(1, sizeof(*b));

    assert(n >= 1); /* a server has at least one worker */
    b->n = n;
    b->stride = n + (BUS_PAD + sizeof(struct bus_outbox) - 1) / sizeof(struct bus_outbox);
    b->inbox = xcalloc(n, sizeof(*b->inbox));
    b->out = xcalloc((size_t)n * b->stride, sizeof(*b->out));
    for (unsigned i = 0; i < n; i++) {
        atomic_init(&b->inbox[i].head, NULL);
        atomic_init(&b->inbox[i].wakeups, 0);
        b->inbox[i].taken = xcalloc(n, sizeof(*b->inbox[i].taken));
        for (unsigned j = 0; j < n; j++)
            atomic_init(&b->inbox[i].taken[j], 0);
        b->inbox[i].efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (b->inbox[i].efd < 0)
            fatal("bus", "eventfd");
    }
    return b;
}

void bus_free(struct bus *b)
{
    if (b == NULL)
        return;
    for (unsigned from = 0; from < b->n; from++) {
        for (unsigned to = 0; to < b->n; to++)
            free_chain(outbox(b, from, to)->newest);
    }
    for (unsigned i = 0; i < b->n; i++) {
        free_chain(atomic_exchange(&b->inbox[i].head, NULL));
        close(b->inbox[i].efd);
        free((void *)b->inbox[i].taken);
    }
    free(b->out);
    free(b->inbox);
    free(b);
}

unsigned bus_workers(const struct bus *b)
{
    return b->n;
}

unsigned bus_route(const struct bus *b, const void *key, size_t len)
{
    return (unsigned)(hash_bytes(key, len) % b->n);
}

static struct bus_outbox *append(struct bus *b, unsigned from, unsigned to, struct bus_msg *m)
{
    struct bus_outbox *ob;

    assert(from < b->n && to < b->n);
    ob = outbox(b, from, to);
    m->from = from;
    ob->sent++;
    m->_next = ob->newest;
    if (ob->newest == NULL)
        ob->oldest = m;
    ob->newest = m;
    return ob;
}

void bus_send(struct bus *b, unsigned from, unsigned to, struct bus_msg *m)
{
    append(b, from, to, m)->urgent = true;
}

void bus_send_lazy(struct bus *b, unsigned from, unsigned to, struct bus_msg *m)
{
    (void)append(b, from, to, m);
}

/* Writes the eventfd. EAGAIN means the counter is saturated, i.e. a wakeup
 * is pending anyway; nothing else can fail on a valid eventfd. */
static void wake(struct bus_inbox *in)
{
    uint64_t one = 1;
    ssize_t r = write(in->efd, &one, sizeof(one));

    assert(r == (ssize_t)sizeof(one) || errno == EAGAIN);
    (void)r;
    atomic_fetch_add_explicit(&in->wakeups, 1, memory_order_relaxed);
}

/* Pushes a whole chain with one successful CAS; wakes the consumer when the
 * inbox was empty (see "Wakeups" above). */
static void push_chain(struct bus_inbox *in, struct bus_msg *newest, struct bus_msg *oldest)
{
    struct bus_msg *head = atomic_load_explicit(&in->head, memory_order_relaxed);

    do {
        oldest->_next = head;
    } while (!atomic_compare_exchange_weak_explicit(&in->head, &head, newest, memory_order_release,
                                                    memory_order_relaxed));
    if (head == NULL)
        wake(in);
}

/* Pushes from's outboxes: the urgent ones, or all when lazy too. */
static void flush(struct bus *b, unsigned from, bool lazy_too)
{
    assert(from < b->n);
    for (unsigned to = 0; to < b->n; to++) {
        struct bus_outbox *ob = outbox(b, from, to);

        if (ob->newest == NULL || !(ob->urgent || lazy_too))
            continue;
        push_chain(&b->inbox[to], ob->newest, ob->oldest);
        ob->newest = ob->oldest = NULL;
        ob->urgent = false;
    }
}

void bus_flush(struct bus *b, unsigned from)
{
    flush(b, from, false);
}

void bus_flush_all(struct bus *b, unsigned from)
{
    flush(b, from, true);
}

bool bus_lazy_pending(struct bus *b, unsigned from)
{
    assert(from < b->n);
    for (unsigned to = 0; to < b->n; to++) {
        if (outbox(b, from, to)->newest != NULL)
            return true;
    }
    return false;
}

int bus_inbox_fd(const struct bus *b, unsigned worker)
{
    assert(worker < b->n);
    return b->inbox[worker].efd;
}

static struct bus_msg *reverse(struct bus_msg *m)
{
    struct bus_msg *prev = NULL;

    while (m != NULL) {
        struct bus_msg *next = m->_next;

        m->_next = prev;
        prev = m;
        m = next;
    }
    return prev;
}

/* Counts the messages of chain m per sender into in->taken; returns m.
 * Only the receiver writes its taken[], so a load and a store will do. */
static struct bus_msg *count_taken(struct bus_inbox *in, struct bus_msg *m)
{
    for (struct bus_msg *p = m; p != NULL; p = p->_next) {
        uint64_t t = atomic_load_explicit(&in->taken[p->from], memory_order_relaxed);

        atomic_store_explicit(&in->taken[p->from], t + 1, memory_order_relaxed);
    }
    return m;
}

struct bus_msg *bus_take(struct bus *b, unsigned worker)
{
    struct bus_inbox *in;
    uint64_t v;

    assert(worker < b->n);
    in = &b->inbox[worker];
    /* Read first, exchange second: the order that cannot lose a wakeup. */
    if (read(in->efd, &v, sizeof(v)) < 0)
        assert(errno == EAGAIN); /* nothing pending: a spurious call */
    return count_taken(in,
                       reverse(atomic_exchange_explicit(&in->head, NULL, memory_order_acquire)));
}

uint64_t bus_backlog(struct bus *b, unsigned from, unsigned to)
{
    uint64_t taken;

    assert(from < b->n && to < b->n);
    taken = atomic_load_explicit(&b->inbox[to].taken[from], memory_order_relaxed);
    return outbox(b, from, to)->sent - taken;
}

size_t bus_drain(struct bus *b, unsigned worker, bus_handle_cb *handle, void *ctx)
{
    struct bus_msg *m = bus_take(b, worker);
    size_t n = 0;

    while (m != NULL) {
        struct bus_msg *next = m->_next; /* the handler may free m */

        handle(ctx, m);
        m = next;
        n++;
    }
    return n;
}

uint64_t bus_stat_wakeups(const struct bus *b)
{
    uint64_t sum = 0;

    for (unsigned i = 0; i < b->n; i++)
        sum += atomic_load_explicit(&b->inbox[i].wakeups, memory_order_relaxed);
    return sum;
}
