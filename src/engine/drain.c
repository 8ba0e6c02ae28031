/* SPDX-License-Identifier: MIT */
/*
 * drain.c - the spread-out close of a worker's WebSocket clients at a
 * drain (drain.h has the model): the draw of each socket's delay, the
 * reconnect frames, and the one timer that closes the sockets due.
 * Socketless clients (client.h: a long-poll session) are ended the same
 * way, through their adapter's close.
 *
 * A socket that closed by itself before its time is skipped when its
 * time comes (it is looked up by connection id, never kept as a pointer).
 */
#include "drain.h"

#include <openssl/rand.h>
#include <stdlib.h>

#include "client.h"
#include "cluster.h"
#include "cluster_resume.h"
#include "engine_state.h"
#include "frame.h"
#include "loop.h"

struct drain_due {
    uint64_t at;      /* loop ms of its close */
    uint64_t conn_id; /* the socket */
};

/* The home (and with it the node's lease) stays this long after the
 * window: for the last writes, and for the clients closed at the end of
 * the window, which come back up to 250 ms later (the SDK's jitter) and
 * take their sessions over on another node while this one still holds
 * them (a contribution that left with the lease first would be a flap). */
#define DRAIN_FLUSH_MS 1000

struct drain {
    struct wheel_timer timer; /* at due[next].at */
    uint64_t until;           /* loop ms: the window's end + DRAIN_FLUSH_MS */
    struct wheel_timer wake;  /* at until: the home's loop looks again (engine_drain_busy()) */
    struct engine *e;
    struct drain_due *due; /* sorted by at */
    size_t n, next;
};

/* Uniform in [0, window): 64 random bits reduced (the bias of the modulo
 * is below 2^-40 for any window allowed). */
static uint64_t draw(uint64_t window)
{
    uint64_t r;

    if (window == 0)
        return 0;
    if (RAND_bytes((unsigned char *)&r, sizeof(r)) != 1)
        r = (uint64_t)rand() << 31 ^ (uint64_t)rand();
    return r % window;
}

static int cmp_due(const void *a, const void *b)
{
    const struct drain_due *x = a, *y = b;

    return x->at < y->at ? -1 : x->at > y->at;
}

/* Writes the adapter's last frame and closes c with its drain code. */
static void close_one(struct client *c)
{
    const struct proto_adapter *a = frame_adapter(c);
    struct payload *f = a->encode_drain_close ? a->encode_drain_close() : NULL;
    unsigned code = a->drain_close_code ? a->drain_close_code : 1001;

    if (f) {
        a->send(c, f);
        payload_unref(f);
    }
    if (c->ws)
        wsconn_close(c->ws, code, "server restarting");
    else /* socketless (client.h): its adapter ends it */
        a->close(c, code, "server restarting");
}

static void on_wake(struct wheel_timer *t, uint64_t now)
{
    (void)t;
    (void)now; /* the iteration it makes is the point */
}

static void on_due(struct wheel_timer *t, uint64_t now)
{
    struct drain *d = container_of(t, struct drain, timer);

    while (d->next < d->n && d->due[d->next].at <= now) {
        struct client *c = find_client(d->e, d->due[d->next++].conn_id);

        if (c && (c->ws || client_is_socketless(c)))
            close_one(c);
    }
    if (d->next < d->n)
        loop_timer_start(d->e->w->loop, &d->timer, d->due[d->next].at - now);
}

/* Tells c when its socket closes (the adapter's reconnect frame). */
static void announce(struct client *c, uint64_t after_ms)
{
    const struct proto_adapter *a = frame_adapter(c);
    struct payload *f = a->encode_reconnect ? a->encode_reconnect(after_ms) : NULL;

    if (f) {
        a->send(c, f);
        payload_unref(f);
    }
}

void engine_drain(struct engine *e, uint64_t window_ms)
{
    uint64_t now = loop_now(e->w->loop);
    bool back = e->env->cluster == NULL; /* one node: nowhere to go until the next is up */
    struct drain *d;
    struct hmap_node *n;
    size_t it;

    if (e->drain)
        return;
    cs__drain(e, window_ms); /* resumable on another node while this one goes */
    d = e->drain = xcalloc(1, sizeof(*d));
    d->e = e;
    d->until = now + window_ms + DRAIN_FLUSH_MS;
    wheel_timer_init(&d->wake, on_wake);
    if (engine_drain_busy(e))
        loop_timer_start(e->w->loop, &d->wake, d->until - now);
    wheel_timer_init(&d->timer, on_due);
    d->due = xcalloc(e->clients.count + 1, sizeof(*d->due));
    for (n = hmap_first(&e->clients, &it); n; n = hmap_next(&e->clients, n, &it)) {
        struct client *c = container_of(n, struct client, node);
        uint64_t after = draw(window_ms);

        if (!c->ws && !client_is_socketless(c))
            continue; /* an event stream: the runtime ends it */
        announce(c, back ? after + window_ms : after);
        d->due[d->n++] = (struct drain_due){now + after, client_conn_id(c)};
    }
    qsort(d->due, d->n, sizeof(*d->due), cmp_due);
    if (d->n)
        loop_timer_start(e->w->loop, &d->timer, d->due[0].at - now);
}

bool engine_drain_owns(struct engine *e, const struct conn *c)
{
    struct client *cl = e->drain ? find_client(e, c->id) : NULL;

    return cl && cl->ws && wsconn_to_conn(cl->ws) == c;
}

void engine__drain_free(struct engine *e)
{
    if (!e->drain)
        return;
    wheel_del(&e->drain->timer);
    wheel_del(&e->drain->wake);
    free(e->drain->due);
    free(e->drain);
    e->drain = NULL;
}

bool engine_drain_busy(struct engine *e)
{
    return e->drain && e->env->cluster && cluster_is_home(e->env->cluster, e->w->id) &&
           loop_now(e->w->loop) < e->drain->until;
}
