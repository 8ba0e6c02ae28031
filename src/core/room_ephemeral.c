/* SPDX-License-Identifier: MIT */
/*
 * room_ephemeral.c - the ephemeral lane of room.h: per member (sender), one
 * slot per kind holding the latest value, and a rate limit of one message
 * per period (1000 / ephemeral_rate ms) enforced with one wheel timer per
 * sender. Messages get no seq and never enter the delta ring; they leave
 * through on_ephemeral, marked droppable.
 *
 * The policy, in short: a publish after a quiet period is sent at once
 * (lowest latency for sparse updates such as typing flags); a publish
 * within the period is stored in its kind's slot, replacing a pending
 * value of that kind (latest wins), and the sender's timer sends the
 * oldest pending kind when the period is over, then re-arms while values
 * wait. So a sender never exceeds the rate, the last value of every kind
 * is always delivered, and memory per sender is bounded by
 * max_ephemeral_kinds * max_ephemeral_bytes. A sender whose join is not
 * published yet waits for the flush that publishes it.
 */
#include "room_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- senders ----
 *
 * Few members ever publish, so a member does not point to its sender: the
 * engine's senders table finds it by the member's address, and the
 * member's sender bit says whether to look.
 */

/* m's sender, or NULL. */
static struct sender *sender_find(const struct room_engine *e, const struct member *m)
{
    const struct hmap *t = &e->senders;
    uint64_t h = room__member_hash(m);
    struct hmap_node *n;

    if (!m->sender)
        return NULL;
    for (n = hmap_find(t, h); n; n = hmap_find_next(n, h)) {
        struct sender *s = container_of(n, struct sender, node);
        if (s->m == m)
            return s;
    }
    assert(false); /* the sender bit is set only while the table has it */
    return NULL;
}

void room__sender_free(struct room_engine *e, struct member *m)
{
    struct sender *s = sender_find(e, m);

    if (s == NULL)
        return;
    hmap_remove(&e->senders, &s->node);
    wheel_del(&s->timer);
    for (size_t i = 0; i < s->nslots; i++)
        buf_release(&s->slots[i].data);
    free(s);
    m->sender = false;
}

static struct slot *slot_find(struct sender *s, const char *kind)
{
    for (size_t i = 0; s && i < s->nslots; i++)
        if (strcmp(s->slots[i].kind, kind) == 0)
            return &s->slots[i];
    return NULL;
}

static struct slot *oldest_pending(struct sender *s)
{
    struct slot *best = NULL;

    for (size_t i = 0; i < s->nslots; i++)
        if (s->slots[i].order && (best == NULL || s->slots[i].order < best->order))
            best = &s->slots[i];
    return best;
}

/* While m's join waits in the batch, its values wait for the flush that
 * publishes it, so that no ephemeral message precedes its sender's join
 * (and a joiner's cursor never forces an early flush, which would defeat
 * interval mode). Returns when to try: the flush time, or the next tick. */
static uint64_t after_join(const struct room *r, uint64_t now)
{
    const struct wheel_timer *t = &r->flush_timer;

    return wheel_is_linked(t) && t->expire_at > now ? t->expire_at : now + 1;
}

/* Emits s's oldest pending value and re-arms the timer if more wait. The
 * event's strings are copied first: the callback may end the membership. */
static void sender_emit(struct sender *s, uint64_t now)
{
    struct room *r = s->room;
    struct room_engine *e = r->e;
    struct slot *x = oldest_pending(s);
    char user[ROOM_ID_MAX + 1];
    struct room_ephemeral_view v;
    struct room_event ev = {.kind = ROOM_EV_EPHEMERAL, .ephemeral = &v};

    assert(x != NULL); /* the timer is armed only while values wait */
    if (!s->m->pub) {
        /* This timer ran before the flush in the same tick: wait more. */
        wheel_add(e->wheel, &s->timer, after_join(r, now));
        return;
    }
    v = (struct room_ephemeral_view){.room = r->id,
                                     .user = s->m->user,
                                     .kind = x->kind,
                                     .data = x->data.data,
                                     .data_len = x->data.len};
    ev.msg = (struct room_msg){.payload = e->cfg.codec->encode_ephemeral(&v, &e->scratch)};
    x->order = 0;
    s->last_emit = now;
    s->emitted = true;
    if (oldest_pending(s))
        wheel_add(e->wheel, &s->timer, now + e->ephemeral_period);
    memcpy(user, s->m->user, strlen(s->m->user) + 1);
    e->stats.ephemeral_sent++;
    /* The value is the callback's too: its strings must outlive the
     * member (the callback may end the membership). */
    v.user = ev.user = user;
    room__emit(r, e->on_ephemeral, &ev);
    payload_unref(ev.msg.payload);
    room__maybe_delete(r);
}

static void on_sender_timer(struct wheel_timer *t, uint64_t now)
{
    sender_emit(container_of(t, struct sender, timer), now);
}

/* A sender for m, which has none. */
static struct sender *sender_new(struct room_engine *e, struct room *r, struct member *m)
{
    struct sender *s = xcalloc(1, sizeof(*s) + e->cfg.max_ephemeral_kinds * sizeof(s->slots[0]));

    s->m = m;
    s->room = r;
    wheel_timer_init(&s->timer, on_sender_timer);
    hmap_insert(&e->senders, &s->node, room__member_hash(m));
    m->sender = true;
    return s;
}

/* Stores value (compact JSON) as m's latest of kind, then emits at once
 * when the sender's period has passed (sender_emit() itself defers while
 * the join is unpublished), else leaves it to the timer. s is m's sender
 * as sender_find() gave it (NULL: m has none yet). */
static void sender_publish(struct room_engine *e, struct room *r, struct member *m,
                           struct sender *s, const char *kind, const char *value, uint64_t now)
{
    struct slot *x;

    if (s == NULL)
        s = sender_new(e, r, m);
    x = slot_find(s, kind);
    if (x == NULL) {
        x = &s->slots[s->nslots++];
        memcpy(x->kind, kind, strlen(kind) + 1);
    }
    if (x->order)
        e->stats.ephemeral_coalesced++;
    else
        x->order = ++e->ephemeral_order;
    x->data.len = 0;
    buf_append_str(&x->data, value);
    if (wheel_is_linked(&s->timer))
        return;
    if (!s->emitted || now >= s->last_emit + e->ephemeral_period)
        sender_emit(s, now);
    else
        wheel_add(e->wheel, &s->timer, s->last_emit + e->ephemeral_period);
}

/* ---- public ---- */

/* ROOM_E_KINDS when the member whose sender is s (NULL: none yet) cannot
 * take a value of a new kind, else 0. */
static int kinds_check(const struct room_engine *e, struct sender *s, const char *kind)
{
    if (s && s->nslots >= e->cfg.max_ephemeral_kinds && slot_find(s, kind) == NULL)
        return ROOM_E_KINDS;
    return 0;
}

/* room__find_member() plus the checks of a publisher; on 0 *sp is the
 * member's sender (NULL: none yet), for sender_publish(). */
static int find_publisher(const struct room_engine *e, const char *room, const char *user,
                          const char *kind, struct room **rp, struct member **out,
                          struct sender **sp)
{
    int rc = room__find_member(e, room, user, rp, out);

    if (rc)
        return rc;
    if (!(*out)->visible)
        return ROOM_E_INVISIBLE;
    *sp = sender_find(e, *out);
    return kinds_check(e, *sp, kind);
}

int room_ephemeral(struct room_engine *e, const char *room, const char *user, const char *kind,
                   const char *data, size_t len, uint64_t now)
{
    struct room *r;
    struct member *m;
    struct sender *s;
    char *value;
    int rc;

    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    if (!room__id_ok(user, ROOM_ID_MAX))
        return ROOM_E_USER_ID;
    if (!room__id_ok(kind, ROOM_KIND_MAX))
        return ROOM_E_KIND;
    rc = find_publisher(e, room, user, kind, &r, &m, &s);
    if (rc)
        return rc;
    value = room__compact_json(data, len, e->cfg.max_ephemeral_bytes, ROOM_E_DATA_SIZE,
                               ROOM_E_DATA_JSON, &rc);
    if (value == NULL)
        return rc;
    sender_publish(e, r, m, s, kind, value, now); /* s still m's: nothing ran since */
    free(value);
    return 0;
}
