/* SPDX-License-Identifier: MIT */
/*
 * room_publish.c - what subscribers of a room are told, and when: the
 * flush that turns a room's batch of changes (its dirty list, collected
 * by room.c during the batch window) into one delta or, when interval
 * mode ends, one snapshot; the interval-mode hysteresis that caps a large
 * room's lists; the message values (room.h) built in the engine's scratch
 * lists for the codec; and the per-seq snapshot cache (room_snapshot*).
 * Each published message enters the resume ring (room_ring.c) before
 * on_delta runs.
 *
 * Only published state is read here, and a member's published state is
 * written only here (publish_member()), so that at every moment it equals
 * "apply deltas 1..seq to the empty room". Like room.c, this file knows
 * no connection and no wire format.
 */
#include "room_internal.h"

#include <assert.h>
#include <string.h>

#include "buf.h"
#include "list.h"
#include "ns.h"
#include "pool.h"
#include "util.h"

#define RING_FLOOR_BYTES 4096u /* deltas kept for resume in any room */

/* ---- messages as values ----
 *
 * Every message is built as its value (room.h) in the engine's scratch
 * lists and handed to the codec; nothing here writes a wire format (the
 * HTTP API's info object is room_info.c's).
 */

/* Grows the scratch list i to hold n entries. */
struct room_entry *room__ents_reserve(struct room_engine *e, int i, size_t n)
{
    if (n > e->cap_ents[i]) {
        e->cap_ents[i] = MAX(n, e->cap_ents[i] * 2);
        e->ents[i] = xrealloc(e->ents[i], e->cap_ents[i] * sizeof(*e->ents[i]));
    }
    return e->ents[i];
}

const char **room__leaves_reserve(struct room_engine *e, size_t n)
{
    if (n > e->cap_leaves) {
        e->cap_leaves = MAX(n, e->cap_leaves * 2);
        e->leaves = xrealloc(e->leaves, e->cap_leaves * sizeof(*e->leaves));
    }
    return e->leaves;
}

/* m as published. */
static struct room_entry entry_of(const struct member *m)
{
    return (struct room_entry){.user = m->user,
                               .joined_at = m->joined_at, /* unchanged while published */
                               .meta = m->pub_meta->data,
                               .meta_len = m->pub_meta->len};
}

/* A member is listed unless unpublished or hidden by the reader's hide. */
bool room__listed(const struct member *m, room_hide_fn *hide, void *ctx)
{
    return m->pub && !(hide && hide(m->user, ctx));
}

uint64_t room_digest_of(const char *user)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);

    /* A room's members share its namespace (ns.h): the digest is of the
     * ids its readers know, without the prefix. */
    for (const unsigned char *p = (const unsigned char *)ns_strip(user); *p; p++)
        h = (h ^ *p) * UINT64_C(0x100000001b3);
    return h;
}

/* One walk for a reader who hides some: the members it does not see
 * leave the count and the digest. */
size_t room__shown(const struct room *r, room_hide_fn *hide, void *ctx, uint64_t *digest)
{
    size_t shown = r ? r->published : 0;

    *digest = r ? r->digest : 0;
    if (r && hide)
        for (const struct list *pos = r->order.next; pos != &r->order; pos = pos->next) {
            const struct member *m = container_of(pos, struct member, order);
            if (m->pub && !room__listed(m, hide, ctx)) {
                shown--;
                *digest ^= room_digest_of(m->user);
            }
        }
    return shown;
}

/* v = r's published state as a reader who hides some sees it (hide NULL:
 * none), listing at most limit members in join order, in scratch list 0;
 * r NULL, or a room with nothing to show, reads as the empty room of
 * epoch 0. */
static void state_view(struct room_engine *e, const char *id, const struct room *r, size_t limit,
                       room_hide_fn *hide, void *ctx, struct room_snapshot_view *v)
{
    uint64_t digest;
    size_t shown = room__shown(r, hide, ctx, &digest);
    struct room_entry *x;

    *v = (struct room_snapshot_view){.head = {.room = id, .mode = ROOM_MODE_NORMAL}};
    if (r == NULL || shown == 0)
        return;
    v->head = (struct room_head){r->id, r->epoch, r->seq, r->mode, shown, digest};
    x = room__ents_reserve(e, 0, MIN(limit, shown));
    for (const struct list *pos = r->order.next; pos != &r->order && v->nmembers < limit;
         pos = pos->next) {
        const struct member *m = container_of(pos, struct member, order);
        if (room__listed(m, hide, ctx))
            x[v->nmembers++] = entry_of(m);
    }
    v->members = x;
}

static size_t snapshot_limit(const struct room *r)
{
    return r->mode == ROOM_MODE_INTERVAL ? r->e->cfg.snapshot_limit : SIZE_MAX;
}

struct room_msg room__make_msg(struct payload *p, uint64_t seq)
{
    return (struct room_msg){.payload = p, .seq = seq};
}

/* A new snapshot message of r's published state, by codec; *v
 * (optional) is its value, in the scratch lists. */
static struct room_msg encode_snapshot(struct room_engine *e, const struct room *r,
                                       const struct room_codec *codec, struct room_snapshot_view *v)
{
    struct room_snapshot_view tmp;

    if (v == NULL)
        v = &tmp;
    state_view(e, r->id, r, snapshot_limit(r), NULL, NULL, v);
    e->stats.snapshots++;
    return room__make_msg(codec->encode_snapshot(v, &e->scratch), r->seq);
}

enum { DELTA_JOINS, DELTA_LEAVES, DELTA_PATCHES }; /* the lists of a delta */

/* Per-flush lists: entries and totals. */
struct delta_lists {
    size_t total[3]; /* changes of each kind */
    size_t listed[3];
    size_t limit; /* entries listed per list */
};

/* Keeps prev (a reference, taken over) until the delta has gone out. */
static void prev_keep(struct room_engine *e, struct payload *prev)
{
    if (e->nprev_refs == e->cap_prev_refs) {
        e->cap_prev_refs = MAX((size_t)8, e->cap_prev_refs * 2);
        e->prev_refs = xrealloc(e->prev_refs, e->cap_prev_refs * sizeof(*e->prev_refs));
    }
    e->prev_refs[e->nprev_refs++] = prev;
}

/* Drops the flush's references to previously published metadata. */
static void prev_release(struct room_engine *e)
{
    for (size_t i = 0; i < e->nprev_refs; i++)
        payload_unref(e->prev_refs[i]);
    e->nprev_refs = 0;
}

/* Lists m in d (joins and patches in scratch lists 0 and 1, leaves as
 * copies in leave_ids: the member is freed before the message goes);
 * prev is m's metadata as published before this flush (a reference,
 * taken over; NULL for a join), listed beside a leave or a patch. */
static void delta_add(struct room_engine *e, struct delta_lists *d, int which,
                      const struct member *m, struct payload *prev)
{
    size_t k = d->listed[which];
    struct room_entry *x;

    d->total[which]++;
    if (k >= d->limit) {
        payload_unref(prev);
        return;
    }
    d->listed[which]++;
    if (which == DELTA_LEAVES)
        buf_append(&e->leave_ids, m->user, strlen(m->user) + 1);
    else
        room__ents_reserve(e, which == DELTA_JOINS ? 0 : 1, k + 1)[k] = entry_of(m);
    if (which == DELTA_JOINS)
        return;
    /* A leave's or patch's entry as it was (the user id is set in
     * delta_view(): a leaving member's copy is in leave_ids). */
    if (k + 1 > e->cap_prev_ents[which - 1]) {
        size_t cap = MAX(k + 1, e->cap_prev_ents[which - 1] * 2);
        e->prev_ents[which - 1] = xrealloc(e->prev_ents[which - 1], cap * sizeof(*x));
        e->cap_prev_ents[which - 1] = cap;
    }
    x = &e->prev_ents[which - 1][k];
    *x = (struct room_entry){
        .user = m->user, .joined_at = m->joined_at, .meta = prev->data, .meta_len = prev->len};
    prev_keep(e, prev);
}

/* The value of r's delta from d and the scratch lists. */
static void delta_view(struct room_engine *e, const struct room *r, const struct delta_lists *d,
                       struct room_delta_view *v)
{
    const char **leaves = room__leaves_reserve(e, d->listed[DELTA_LEAVES]);
    const char *p = e->leave_ids.data;

    for (size_t i = 0; i < d->listed[DELTA_LEAVES]; i++, p += strlen(p) + 1) {
        leaves[i] = p;
        e->prev_ents[0][i].user = p;
    }
    *v = (struct room_delta_view){
        .head = {r->id, r->epoch, r->seq, r->mode, r->published, r->digest},
        .joins = e->ents[0],
        .njoins = d->listed[DELTA_JOINS],
        .leaves = leaves,
        .nleaves = d->listed[DELTA_LEAVES],
        .patches = e->ents[1],
        .npatches = d->listed[DELTA_PATCHES],
        .join_total = d->total[DELTA_JOINS],
        .leave_total = d->total[DELTA_LEAVES],
        .patch_total = d->total[DELTA_PATCHES],
        .leaves_prev = d->listed[DELTA_LEAVES] ? e->prev_ents[0] : NULL,
        .patches_prev = d->listed[DELTA_PATCHES] ? e->prev_ents[1] : NULL,
    };
}

/* ---- flushing ----
 *
 * A room's pending batch is its dirty list: the members whose current
 * state (present = has a session, visible, metadata, joinedAt) changed
 * since the last flush, in the order of their first change (an array
 * that exists only while changes wait). Each member also remembers its
 * published state (pub, pub_meta; joinedAt changes only while a member is
 * not published, so it needs no published copy). The flush, run by the
 * room's timer at the end of the window (batch_ms, or interval_ms in
 * interval mode) or by room_flush(), walks the dirty list once per pass:
 *
 *   1. Count pass: the visible count after the flush is published +
 *      (members becoming seen) - (members no longer seen). It decides the
 *      mode with hysteresis: normal -> interval at >= interval_enter,
 *      interval -> normal at <= interval_leave. Deciding first lets the
 *      lists be capped while they are built, so a large interval batch
 *      costs O(dirty) but encodes at most 3 * interval_list_limit entries.
 *   2. Apply pass: per member, seen = present && visible. !pub && seen is
 *      a join, pub && !seen a leave, pub && seen with other metadata or
 *      joinedAt a patch; anything else (join+leave, leave+rejoin with the
 *      same metadata, patches that cancel out) is nothing. The published
 *      state becomes the current one, and records without sessions are
 *      freed (their leave is now published).
 *   3. If nothing changed: no seq, no message. Otherwise seq + 1 and one
 *      message: a room_delta, or, when the room went back to normal mode,
 *      a full room_snapshot (restoring exact lists for clients that held a
 *      sample). It enters the ring, then on_delta runs.
 *   4. A room left without member records is deleted, after the callback.
 *
 * Snapshots and reads use only published state, so at every moment the
 * published state equals "apply deltas 1..seq to the empty room".
 */

static size_t count_after(const struct room *r)
{
    size_t count = r->published;
    for (uint32_t i = 0; i < r->ndirty; i++) {
        const struct member *m = r->dirty[i];
        bool seen = m->nsessions > 0 && m->visible;

        if (seen && !m->pub)
            count++;
        else if (!seen && m->pub)
            count--;
    }
    return count;
}

static enum room_mode next_mode(const struct room_config *c, enum room_mode mode, size_t count)
{
    if (mode == ROOM_MODE_NORMAL && count >= c->interval_enter)
        return ROOM_MODE_INTERVAL;
    if (mode == ROOM_MODE_INTERVAL && count <= c->interval_leave)
        return ROOM_MODE_NORMAL;
    return mode;
}

/* About the bytes m adds to a snapshot: its id and metadata, plus the
 * member object's keys and joinedAt. */
static size_t member_bytes(const struct member *m)
{
    return strlen(m->user) + m->pub_meta->len + 48;
}

/* Publishes m's current state; returns which list it belongs to, or -1. */
static int publish_member(struct room *r, struct member *m)
{
    bool seen = m->nsessions > 0 && m->visible;
    int which = -1;

    if (m->pub)
        r->pub_bytes -= member_bytes(m);
    if (seen && !m->pub)
        which = DELTA_JOINS;
    else if (!seen && m->pub)
        which = DELTA_LEAVES;
    else if (seen && m->pub_meta != m->meta &&
             (m->pub_meta->len != m->meta->len ||
              memcmp(m->pub_meta->data, m->meta->data, m->meta->len) != 0))
        which = DELTA_PATCHES; /* joinedAt does not change while published */
    if (which == DELTA_JOINS || which == DELTA_LEAVES)
        r->digest ^= room_digest_of(m->user);
    m->pub = seen;
    payload_unref(m->pub_meta);
    m->pub_meta = seen ? payload_ref(m->meta) : NULL;
    if (m->pub)
        r->pub_bytes += member_bytes(m);
    return which;
}

/* Collects, for the view log, m (which changed in this flush) into
 * e->vlog_next while every change so far is a hider's; *nu counts them,
 * SIZE_MAX once one is not (or too many are). */
static void note_changed(struct room_engine *e, const struct member *m, size_t *nu)
{
    if (*nu == SIZE_MAX)
        return;
    if (*nu >= VLOG_IDS || !room_is_hider(e, m->user)) {
        *nu = SIZE_MAX;
        return;
    }
    buf_append(&e->vlog_next, m->user, strlen(m->user) + 1);
    (*nu)++;
}

/* The apply pass; d collects list entries (NULL: count only). Empties
 * the dirty list; returns the number of changes, and in *nu how many
 * hiders changed when only hiders did (else SIZE_MAX; see note_changed). */
static size_t apply_dirty(struct room *r, struct delta_lists *d, size_t *nu)
{
    struct room_engine *e = r->e;
    size_t changes = 0;

    e->vlog_next.len = 0;
    *nu = e->hiders.count ? 0 : SIZE_MAX;
    for (uint32_t i = 0; i < r->ndirty; i++) {
        struct member *m = r->dirty[i];
        /* What subscribers saw, for the delta's leaves_prev/patches_prev. */
        struct payload *prev = m->pub && d ? payload_ref(m->pub_meta) : NULL;
        int which = publish_member(r, m);

        m->dirty = false;
        if (which == DELTA_JOINS)
            r->published++;
        else if (which == DELTA_LEAVES)
            r->published--;
        if (which >= 0 && d)
            delta_add(e, d, which, m, prev); /* NULL for a join: not published before */
        else
            payload_unref(prev);
        if (which >= 0)
            note_changed(e, m, nu);
        changes += which >= 0;
        if (m->nsessions == 0)
            room__member_free(r, m);
    }
    /* An idle room keeps no dirty array: one allocation per window. */
    pool_free(r->dirty);
    r->dirty = NULL;
    r->ndirty = r->cap_dirty = 0;
    return changes;
}

/* The bytes of deltas worth keeping for resume: no more than about a
 * snapshot (a resume that would send more is no better than the
 * snapshot it falls back to), RING_FLOOR_BYTES at least, ring_bytes at
 * most. An idle room of n members holds O(its state), not 64 KiB. */
static size_t ring_budget(const struct room *r)
{
    return MIN((size_t)r->e->cfg.ring_bytes, MAX((size_t)RING_FLOOR_BYTES, r->pub_bytes));
}

/* Encodes r's new delta (or, reset, the snapshot that ends interval
 * mode), keeps it in the ring and emits it. */
static void publish(struct room_engine *e, struct room *r, const struct delta_lists *d, bool reset)
{
    struct room_event ev = {.seq = r->seq};
    struct room_delta_view dv;
    struct room_snapshot_view sv;
    size_t max_bytes = ring_budget(r);

    payload_unref(r->snap.payload); /* a delta makes it stale; a reset replaces it */
    r->snap.payload = NULL;
    if (reset) {
        ev.msg = encode_snapshot(e, r, e->cfg.codec, &sv);
        ev.kind = ROOM_EV_SNAPSHOT;
        ev.snapshot = &sv;
        r->snap = ev.msg;
        payload_ref(ev.msg.payload);
    } else {
        delta_view(e, r, d, &dv);
        ev.msg = room__make_msg(e->cfg.codec->encode_delta(&dv, &e->scratch), r->seq);
        ev.kind = ROOM_EV_DELTA;
        ev.delta = &dv;
    }
    if (room__ring_make_room(e, r, ev.msg.payload->len, max_bytes))
        room__ring_append(e, r,
                          reset ? room__ring_rec_snapshot(&ev.msg, &sv)
                                : room__ring_rec_delta(&ev.msg, &dv));
    e->stats.deltas++;
    room__emit(r, e->on_delta, &ev);
    payload_unref(ev.msg.payload);
}

/* A room that shows nobody after a flush but lives on (its members are
 * hidden, or their leave waits for a callback to end) starts a new epoch
 * at seq 0, as if it had been deleted: the world without its hidden
 * members has no room there, and the next change re-creates it (seq 1 of
 * a new epoch) instead of continuing a history nobody may see. Resume
 * with the old epoch then gets a snapshot (the empty room's). */
static void restart_if_empty(struct room_engine *e, struct room *r)
{
    if (r->published > 0 || r->seq == 0)
        return;
    r->epoch = room__next_epoch(e);
    r->seq = 0;
    room__ring_release(&r->ring);
    room__vlog_release(&r->vlog);
    payload_unref(r->snap.payload);
    r->snap.payload = NULL;
}

/* Flushes r's batch (see the essay above) at now. Returns true when r was
 * deleted. */
static bool flush_room(struct room *r, uint64_t now)
{
    struct room_engine *e = r->e;
    enum room_mode old = r->mode;
    struct delta_lists d = {.limit = SIZE_MAX};
    size_t nu;
    bool reset;

    wheel_del(&r->flush_timer);
    r->mode = next_mode(&e->cfg, old, count_after(r));
    reset = old == ROOM_MODE_INTERVAL && r->mode == ROOM_MODE_NORMAL;
    if (r->mode == ROOM_MODE_INTERVAL)
        d.limit = e->cfg.interval_list_limit;
    e->leave_ids.len = 0;
    if (apply_dirty(r, reset ? NULL : &d, &nu) == 0) {
        assert(r->mode == old); /* the mode follows the count, which did not move */
        return room__maybe_delete(r);
    }
    r->seq++;
    r->flushed_at = now;
    room__vlog_note(e, r, e->vlog_next.data, e->vlog_next.len, reset || nu == SIZE_MAX ? 0 : nu);
    publish(e, r, &d, reset);
    prev_release(e);
    if (room__maybe_delete(r))
        return true;
    restart_if_empty(e, r);
    return false;
}

void room__on_flush_timer(struct wheel_timer *t, uint64_t now)
{
    flush_room(container_of(t, struct room, flush_timer), now);
}

int room_flush(struct room_engine *e, const char *room, uint64_t now)
{
    struct room *r;

    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    r = room__find(e, room);
    if (r == NULL)
        return ROOM_E_NO_ROOM;
    flush_room(r, now);
    return 0;
}

/* ---- public: snapshots, resume, reads ---- */

/* room's snapshot by codec; the cache holds the room's own codec's only. */
int room__snapshot(struct room_engine *e, const char *room, bool keep,
                   const struct room_codec *codec, struct room_msg *out)
{
    struct room *r;

    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    r = room__find(e, room);
    if (r == NULL) {
        struct room_snapshot_view v;

        state_view(e, room, NULL, 0, NULL, NULL, &v);
        *out = room__make_msg(codec->encode_snapshot(&v, &e->scratch), 0);
        return 0;
    }
    if (codec != e->cfg.codec) {
        *out = encode_snapshot(e, r, codec, NULL);
        return 0;
    }
    if (r->snap.payload != NULL && r->snap.seq != r->seq) {
        payload_unref(r->snap.payload); /* stale */
        r->snap.payload = NULL;
    }
    if (r->snap.payload == NULL && !keep) {
        *out = encode_snapshot(e, r, codec, NULL);
        return 0;
    }
    if (r->snap.payload == NULL)
        r->snap = encode_snapshot(e, r, codec, NULL);
    *out = r->snap;
    payload_ref(out->payload);
    return 0;
}

int room_snapshot(struct room_engine *e, const char *room, struct room_msg *out)
{
    return room__snapshot(e, room, true, e->cfg.codec, out);
}

int room_snapshot_uncached(struct room_engine *e, const char *room, struct room_msg *out)
{
    return room__snapshot(e, room, false, e->cfg.codec, out);
}

int room_snapshot_as(struct room_engine *e, const char *room, const struct room_codec *codec,
                     struct room_msg *out)
{
    return room__snapshot(e, room, true, codec, out);
}
