/* SPDX-License-Identifier: MIT */
/*
 * room_count.c - sockets per room, counted on the client workers and
 * summed on the rooms' owners (room_count.h).
 */
#include "room_count.h"

#include <string.h>

#include "adapter.h"
#include "cluster_room.h"
#include "engine_room.h"
#include "engine_state.h"
#include "frame.h"
#include "hooks.h"
#include "http_read.h"
#include "json.h"
#include "ns.h"
#include "pool.h"
#include "room.h"

#define RLIST_MAX 10000 /* rooms one worker lists for engine_list_rooms() */

struct rc_pend {           /* client side: a count to send to R */
    struct hmap_node node; /* e->rc_pend */
    char room[PRESENCE_ID_MAX + 1];
    uint32_t n;
};

struct rcount {            /* R side: one room's sockets */
    struct hmap_node node; /* e->rcounts */
    char room[PRESENCE_ID_MAX + 1];
    struct engine *e;         /* for the timer */
    struct wheel_timer timer; /* armed while a changed sum waits to be sent */
    uint64_t total;           /* this node's sum */
    uint64_t sent;            /* the sum (every node's) last sent to the subscribers */
    uint32_t n[];             /* per worker (nworkers) */
};

bool rcount__on(const struct engine *e)
{
    return e->count_rooms;
}

/* ---- client side ---- */

static struct rc_pend *find_pend(struct engine *e, const char *room)
{
    return ENGINE_FIND(struct rc_pend, &e->rc_pend, room, room);
}

void rcount__local(struct engine *e, const char *room, uint32_t n)
{
    struct rc_pend *p;

    if (!e->count_rooms)
        return;
    if (!(p = find_pend(e, room))) {
        p = pool_alloc(sizeof(*p));
        copy_id(p->room, room);
        hmap_insert(&e->rc_pend, &p->node, str_hash(p->room));
    }
    p->n = n;
}

void rcount__local_gone(struct engine *e, const char *room)
{
    struct rc_pend *p;

    if (!e->count_rooms || !(p = find_pend(e, room)))
        return;
    hmap_remove(&e->rc_pend, &p->node);
    pool_free(p);
}

void rcount__flush(struct engine *e)
{
    struct hmap_node *n, *next;
    size_t it;

    if (!e->count_rooms || e->rc_pend.count == 0)
        return;
    for (n = hmap_first(&e->rc_pend, &it); n; n = next) {
        struct rc_pend *p = container_of(n, struct rc_pend, node);
        struct emsg *em = emsg_new(OP_RCOUNT, 0);

        next = hmap_next(&e->rc_pend, n, &it);
        emsg_set_id(&em->room, p->room);
        em->index = p->n;
        owner_send(e, owner_of_room(e, p->room), em);
        hmap_remove(&e->rc_pend, n);
        pool_free(p);
    }
}

/* ---- R side ---- */

static struct rcount *find_count(const struct engine *e, const char *room)
{
    return ENGINE_FIND(struct rcount, &e->rcounts, room, room);
}

static void drop_count(struct engine *e, struct rcount *rc)
{
    wheel_del(&rc->timer);
    hmap_remove(&e->rcounts, &rc->node);
    pool_free(rc);
}

/* Every node's sockets in rc's room. */
static uint64_t all_of(struct engine *e, const struct rcount *rc)
{
    return rc->total + cr__remote_subs(e, rc->room);
}

static void on_timer(struct wheel_timer *t, uint64_t now)
{
    struct rcount *rc = container_of(t, struct rcount, timer);
    uint64_t all = all_of(rc->e, rc);

    (void)now;
    if (all != rc->sent) {
        rc->sent = all;
        engine__room_count_event(rc->e, rc->room, all);
    }
}

/* The subscribers hear of a changed sum RCOUNT_EVENT_MS after the change. */
static void arm(struct engine *e, struct rcount *rc)
{
    if (all_of(e, rc) != rc->sent && !wheel_is_linked(&rc->timer))
        loop_timer_start(e->w->loop, &rc->timer, RCOUNT_EVENT_MS);
}

/* Worker from has n sockets in room now. */
static void set_count(struct engine *e, const char *room, unsigned from, uint32_t n)
{
    struct rcount *rc = find_count(e, room);
    uint64_t before;

    if (!rc && n == 0)
        return;
    if (!rc) {
        size_t size = sizeof(*rc) + e->w->srv->nworkers * sizeof(rc->n[0]);
        rc = pool_alloc(size);
        memset(rc, 0, size);
        copy_id(rc->room, room);
        rc->e = e;
        wheel_timer_init(&rc->timer, on_timer);
        hmap_insert(&e->rcounts, &rc->node, str_hash(rc->room));
    }
    before = rc->total;
    rc->total = rc->total - rc->n[from] + n;
    rc->n[from] = n;
    if (e->env->cluster) /* the room script knows the first and last node */
        cr__subs_touch(e, room);
    else if ((before == 0) != (rc->total == 0))
        hooks_channel_occupancy(e->hooks, room, rc->total > 0);
    if (rc->total == 0) { /* nobody is left here to tell */
        drop_count(e, rc);
        return;
    }
    arm(e, rc);
}

void rcount__on_count(struct engine *e, struct emsg *em)
{
    set_count(e, em->room, em->msg.from, em->index);
}

void rcount__unsub(struct engine *e, const char *room, unsigned from)
{
    if (e->count_rooms)
        set_count(e, room, from, 0);
}

uint64_t rcount__local_total(const struct engine *e, const char *room)
{
    const struct rcount *rc = e->count_rooms ? find_count(e, room) : NULL;

    return rc ? rc->total : 0;
}

uint64_t rcount__get(struct engine *e, const char *room)
{
    return e->count_rooms ? rcount__local_total(e, room) + cr__remote_subs(e, room) : 0;
}

void rcount__remote_changed(struct engine *e, const char *room)
{
    struct rcount *rc = e->count_rooms ? find_count(e, room) : NULL;

    if (rc)
        arm(e, rc);
}

/* ---- the room list (every worker) ---- */

struct lister {
    struct buf *b;
    size_t n;
    const char *ns; /* the namespace listed (ns.h) */
};

static void list_one(struct lister *l, const char *room, size_t count, uint64_t subs)
{
    if (!ns_in(room, l->ns) || l->n++ >= RLIST_MAX)
        return;
    buf_append_str(l->b, l->n > 1 ? ",{\"room\":" : "{\"room\":");
    json_append_cstr(l->b, room);
    buf_printf(l->b, ",\"count\":%zu,\"subscriptions\":%llu}", count, (unsigned long long)subs);
}

static void list_member_room(void *ctx, const char *room, size_t count, size_t sessions)
{
    list_one(ctx, room, count, sessions);
}

/* This worker's rooms of the namespace em->text: those with published
 * members (count, and their sessions as subscriptions: a hidden member's
 * sockets are not told), and those with subscribers and no members at all
 * (count 0). */
void rcount__on_list(struct engine *e, struct emsg *em)
{
    struct buf b = {0};
    struct lister l = {&b, 0, em->text ? em->text : ""};
    struct hmap_node *n;
    struct room_info info;
    size_t it;

    room_list_published(e->rooms, list_member_room, &l);
    for (n = hmap_first(&e->rcounts, &it); n; n = hmap_next(&e->rcounts, n, &it)) {
        const struct rcount *rc = container_of(n, struct rcount, node);
        if (room_get_info(e->rooms, rc->room, &info) != 0 || info.members == 0)
            list_one(&l, rc->room, 0, all_of(e, rc));
    }
    http_read__answer(e, em, buf_payload(&b));
}

/* ---- set-up ---- */

void rcount__init(struct engine *e)
{
    for (unsigned p = 0; p < adapter_count(); p++)
        e->count_rooms |= adapter_get(p)->room_counts;
}

void rcount__free(struct engine *e)
{
    struct hmap_node *n, *next;
    size_t it;

    for (n = hmap_first(&e->rcounts, &it); n; n = next) {
        next = hmap_next(&e->rcounts, n, &it);
        drop_count(e, container_of(n, struct rcount, node));
    }
    hmap_release(&e->rcounts);
    engine__free_map(&e->rc_pend, offsetof(struct rc_pend, node), NULL);
}
