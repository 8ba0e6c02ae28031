/* SPDX-License-Identifier: MIT */
/*
 * engine_expiry.c - the deadlines of WebSocket clients under auth = jwt:
 * until its first valid token a socket has the auth deadline
 * (auth-timeout-ms after open, loop time), then its token's exp plus
 * jwt-leeway-s (wall time); a refresh moves it.
 *
 * Instead of a 32-byte wheel timer in every client, the clients whose
 * deadlines fall in the same bucket (64 s of exp, or 64 ms of auth
 * deadline) share one group, whose timer is armed for the earliest of
 * them. When it fires, the due ones are closed, the others stay, and the
 * timer is armed again for the earliest left: a client is looked at once
 * per distinct due time in its bucket (at most 64 times), and a client
 * costs its list link and its deadline (24 bytes). Each close happens when
 * it did with a timer of its own.
 *
 * A close caused by a firing may arm or disarm any client, members of the
 * firing group included (those not looked at yet wait on a list of the
 * callback's own): the group is marked firing meanwhile, so that losing
 * its last member does not free it under the callback, which frees it at
 * its end if no member is left.
 */
#include "engine_expiry.h"

#include "client.h"
#include "engine_state.h"
#include "log.h"

#define EXPIRY_SHIFT 6 /* a bucket is 2^6 seconds of exp, or ms of auth deadline */

struct expiry {
    struct hmap_node node;    /* e->expiries, by (token, bucket) */
    struct engine *e;         /* for the timer */
    struct wheel_timer timer; /* armed for next */
    struct list clients;      /* struct client.auth_link */
    int64_t bucket;           /* each member's deadline >> EXPIRY_SHIFT */
    int64_t next;             /* the deadline the timer is armed for */
    bool token;               /* tokens' exp (s, wall); else auth deadlines (ms, loop) */
    bool firing;              /* on_expiry() runs: freed by it, not by a disarm */
};

static uint64_t expiry_hash(bool token, int64_t bucket)
{
    int64_t key[2] = {token, bucket};

    return hash_bytes(key, sizeof(key));
}

static struct expiry *expiry_find(struct engine *e, bool token, int64_t bucket)
{
    uint64_t h = expiry_hash(token, bucket);

    for (struct hmap_node *n = hmap_find(&e->expiries, h); n; n = hmap_find_next(n, h)) {
        struct expiry *g = container_of(n, struct expiry, node);
        if (g->token == token && g->bucket == bucket)
            return g;
    }
    return NULL;
}

/* The time of a kind's clock in ms: wall time for tokens, else loop time. */
static int64_t clock_ms(const struct engine *e, bool token)
{
    return token ? (int64_t)time_wall_ms() : (int64_t)loop_now(e->w->loop);
}

/* Milliseconds from now (clock_ms() of the kind) until deadline d of a
 * group's kind (0 when due). */
static uint64_t left_ms(const struct engine *e, bool token, int64_t d, int64_t now)
{
    int64_t at = token ? (d + e->w->srv->cfg.jwt_leeway_s) * 1000 : d;

    return at > now ? (uint64_t)(at - now) : 0;
}

/* Adds c to g, arming g's timer for c when c is the earliest (now as in
 * left_ms()). */
static void expiry_add(struct expiry *g, struct client *c, int64_t now)
{
    list_insert_tail(&g->clients, &c->auth_link);
    if (c->deadline < g->next || !wheel_is_linked(&g->timer)) {
        g->next = c->deadline;
        loop_timer_start(g->e->w->loop, &g->timer, left_ms(g->e, g->token, c->deadline, now));
    }
}

static void expiry_release(void *owner)
{
    struct expiry *g = owner;

    wheel_del(&g->timer);
}

static void expiry_drop(struct expiry *g)
{
    hmap_remove(&g->e->expiries, &g->node);
    expiry_release(g);
    pool_free(g);
}

/* Closes g's due members and re-arms g for the others, reading the clock
 * once. A close may arm or disarm members (see the top of the file): a
 * member still on todo is unlinked from it by its disarm, and g, marked
 * firing, outlives its members until the end. */
static void on_expiry(struct wheel_timer *t, uint64_t loop_ms)
{
    struct expiry *g = container_of(t, struct expiry, timer);
    int64_t now = clock_ms(g->e, g->token);
    struct list todo;

    (void)loop_ms;
    list_init(&todo); /* the members move to todo, and the ones not due back */
    if (!list_empty(&g->clients)) {
        todo.next = g->clients.next;
        todo.prev = g->clients.prev;
        todo.next->prev = todo.prev->next = &todo;
        list_init(&g->clients);
    }
    g->next = INT64_MAX;
    g->firing = true;
    while (!list_empty(&todo)) {
        struct client *c = container_of(list_first(&todo), struct client, auth_link);
        list_del(&c->auth_link);
        if (left_ms(g->e, g->token, c->deadline, now) > 0)
            expiry_add(g, c, now); /* not yet (or wall time went back) */
        else
            g->e->expired(c); /* unlinked first: its close finds nothing to disarm */
    }
    g->firing = false;
    if (list_empty(&g->clients))
        expiry_drop(g);
}

void engine__expiry_arm(struct client *c)
{
    struct engine *e = c->e;
    int64_t bucket = c->deadline >> EXPIRY_SHIFT;
    struct expiry *g;

    engine__expiry_disarm(c);
    if (!(g = expiry_find(e, c->authed, bucket))) {
        g = pool_alloc(sizeof(*g));
        g->e = e;
        g->bucket = bucket;
        g->token = c->authed;
        g->next = INT64_MAX;
        wheel_timer_init(&g->timer, on_expiry);
        list_init(&g->clients);
        hmap_insert(&e->expiries, &g->node, expiry_hash(g->token, bucket));
    }
    expiry_add(g, c, clock_ms(e, g->token));
}

void engine__expiry_disarm(struct client *c)
{
    struct expiry *g;

    if (!list_is_linked(&c->auth_link))
        return;
    g = expiry_find(c->e, c->authed, c->deadline >> EXPIRY_SHIFT);
    list_del(&c->auth_link);
    if (g && list_empty(&g->clients) && !g->firing)
        expiry_drop(g);
}

void engine__expiry_free(struct engine *e)
{
    engine__free_map(&e->expiries, offsetof(struct expiry, node), expiry_release);
}
