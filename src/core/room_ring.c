/* SPDX-License-Identifier: MIT */
/*
 * room_ring.c - resume for rooms: the per-room ring of the last messages
 * (struct ring in room_internal.h), kept as compact records of their
 * values rather than as their encoded bytes, bounded by ring_len entries
 * and a byte budget that room_publish.c gives per message; and
 * room_resume*, which answers a client's (epoch, seq) with the missed
 * deltas encoded again by the asking codec, or with a snapshot when the
 * ring no longer holds all of them.
 *
 * A record is written once, when room_publish.c publishes its message,
 * and read only to encode it again: with the room's own codec, the same
 * bytes that went out.
 */
#include "room_internal.h"

#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "util.h"

#define RING_MIN 8u /* first ring allocation, in entries */

/* ---- ring ---- */

static void ring_pop(struct ring *g)
{
    struct ring_rec *x = g->v[g->head];

    g->bytes -= x->wire_len;
    pool_free(x);
    g->head = (g->head + 1) % g->cap;
    g->n--;
}

void room__ring_release(struct ring *g)
{
    while (g->n)
        ring_pop(g);
    pool_free(g->v);
    *g = (struct ring){0};
}

static void ring_grow(struct ring *g, uint32_t max)
{
    uint32_t cap = g->cap ? MIN(g->cap * 2, max) : MIN(RING_MIN, max);
    struct ring_rec **v = pool_alloc(cap * sizeof(*v));

    for (uint32_t i = 0; i < g->n; i++)
        v[i] = g->v[(g->head + i) % g->cap];
    pool_free(g->v);
    g->v = v;
    g->cap = cap;
    g->head = 0;
}

#define ENTRY_FIXED (1 + 4 + 8) /* an entry's lengths and joinedAt */

static size_t entries_size(const struct room_entry *x, size_t n)
{
    size_t len = 0;

    for (size_t i = 0; i < n; i++)
        len += ENTRY_FIXED + strlen(x[i].user) + 1 + x[i].meta_len;
    return len;
}

static char *put_u32(char *p, size_t v)
{
    uint32_t u = (uint32_t)v;

    memcpy(p, &u, sizeof(u));
    return p + sizeof(u);
}

static const char *get_u32(const char *p, size_t *v)
{
    uint32_t u;

    memcpy(&u, p, sizeof(u));
    *v = u;
    return p + sizeof(u);
}

static char *put_entries(char *p, const struct room_entry *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t ulen = (uint8_t)strlen(x[i].user); /* ids are at most 128 bytes */

        *p++ = (char)ulen;
        p = put_u32(p, x[i].meta_len);
        memcpy(p, &x[i].joined_at, sizeof(x[i].joined_at));
        p += sizeof(x[i].joined_at);
        memcpy(p, x[i].user, ulen + 1u);
        p += ulen + 1u;
        memcpy(p, x[i].meta, x[i].meta_len);
        p += x[i].meta_len;
    }
    return p;
}

/* Reads n entries at p into x (pointing into the record). */
static const char *get_entries(const char *p, struct room_entry *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t ulen = (unsigned char)*p++;

        p = get_u32(p, &x[i].meta_len);
        memcpy(&x[i].joined_at, p, sizeof(x[i].joined_at));
        p += sizeof(x[i].joined_at);
        x[i].user = p;
        p += ulen + 1;
        x[i].meta = p;
        p += x[i].meta_len;
    }
    return p;
}

static struct ring_rec *ring_rec_alloc(const struct room_msg *msg, int kind,
                                       const struct room_head *h, size_t len)
{
    struct ring_rec *x = pool_alloc(offsetof(struct ring_rec, tail) + len);

    x->wire_len = (uint32_t)msg->payload->len;
    x->count = (uint32_t)h->count;
    x->len = (uint32_t)len;
    x->digest = h->digest;
    x->kind = (uint8_t)kind;
    x->mode = (uint8_t)h->mode;
    return x;
}

/* A record of msg, the delta whose value is v. */
struct ring_rec *room__ring_rec_delta(const struct room_msg *msg, const struct room_delta_view *v)
{
    bool totals = v->head.mode == ROOM_MODE_INTERVAL;
    size_t len = (totals ? 6 : 3) * sizeof(uint32_t);
    struct ring_rec *x;
    char *p;

    len += entries_size(v->joins, v->njoins) + entries_size(v->patches, v->npatches);
    for (size_t i = 0; i < v->nleaves; i++)
        len += strlen(v->leaves[i]) + 1;
    x = ring_rec_alloc(msg, RING_DELTA, &v->head, len);
    p = put_u32(put_u32(put_u32(x->tail, v->njoins), v->nleaves), v->npatches);
    if (totals)
        p = put_u32(put_u32(put_u32(p, v->join_total), v->leave_total), v->patch_total);
    p = put_entries(p, v->joins, v->njoins);
    for (size_t i = 0; i < v->nleaves; i++) {
        size_t n = strlen(v->leaves[i]) + 1;

        memcpy(p, v->leaves[i], n);
        p += n;
    }
    put_entries(p, v->patches, v->npatches);
    return x;
}

/* A record of msg, the snapshot whose value is v. */
struct ring_rec *room__ring_rec_snapshot(const struct room_msg *msg,
                                         const struct room_snapshot_view *v)
{
    struct ring_rec *x;

    if (v->head.epoch == 0)
        return ring_rec_alloc(msg, RING_EMPTY, &v->head, 0);
    x = ring_rec_alloc(msg, RING_SNAPSHOT, &v->head,
                       sizeof(uint32_t) + entries_size(v->members, v->nmembers));
    put_entries(put_u32(x->tail, v->nmembers), v->members, v->nmembers);
    return x;
}

/* The delta x of r at seq, as its value (in the scratch lists). */
static void ring_delta_view(struct room_engine *e, const struct ring_rec *x,
                            struct room_delta_view *v)
{
    const char *p = x->tail;
    const char **leaves;

    p = get_u32(get_u32(get_u32(p, &v->njoins), &v->nleaves), &v->npatches);
    if (v->head.mode == ROOM_MODE_INTERVAL) {
        p = get_u32(get_u32(get_u32(p, &v->join_total), &v->leave_total), &v->patch_total);
    } else {
        v->join_total = v->njoins;
        v->leave_total = v->nleaves;
        v->patch_total = v->npatches;
    }
    p = get_entries(p, room__ents_reserve(e, 0, v->njoins), v->njoins);
    leaves = room__leaves_reserve(e, v->nleaves);
    for (size_t i = 0; i < v->nleaves; i++, p += strlen(p) + 1)
        leaves[i] = p;
    get_entries(p, room__ents_reserve(e, 1, v->npatches), v->npatches);
    v->joins = e->ents[0];
    v->leaves = leaves;
    v->patches = e->ents[1];
}

/* The message x of r, at seq, encoded again by codec: with the room's
 * own, the same bytes that went out. */
static struct room_msg ring_msg(struct room_engine *e, const struct room *r,
                                const struct ring_rec *x, uint64_t seq,
                                const struct room_codec *codec)
{
    struct room_head h = {r->id, r->epoch, seq, (enum room_mode)x->mode, x->count, x->digest};
    struct room_snapshot_view sv = {.head = h};
    struct room_delta_view dv = {.head = h};

    switch (x->kind) {
    case RING_DELTA:
        ring_delta_view(e, x, &dv);
        return room__make_msg(codec->encode_delta(&dv, &e->scratch), seq);
    case RING_SNAPSHOT:
        get_u32(x->tail, &sv.nmembers);
        sv.members = room__ents_reserve(e, 0, sv.nmembers);
        get_entries(x->tail + sizeof(uint32_t), e->ents[0], sv.nmembers);
        break;
    default: /* RING_EMPTY */
        sv.head = (struct room_head){.room = r->id, .mode = ROOM_MODE_NORMAL};
    }
    return room__make_msg(codec->encode_snapshot(&sv, &e->scratch), seq);
}

/* Makes room for r's newest message of len bytes (as encoded), evicting
 * the oldest ones beyond ring_len entries or max_bytes bytes. False when
 * the message is larger than max_bytes: the ring is then empty (keeping
 * older ones would leave a gap) and the message is not kept. */
bool room__ring_make_room(struct room_engine *e, struct room *r, size_t len, size_t max_bytes)
{
    struct ring *g = &r->ring;

    while (g->n && (len > max_bytes || g->n >= e->cfg.ring_len || g->bytes + len > max_bytes))
        ring_pop(g);
    return len <= max_bytes;
}

/* Keeps x, the record of r's newest message, as the newest entry (after
 * room__ring_make_room()). The ring holds a compact lasting record, not the
 * payload being sent now: that one is freed once delivered, and an idle
 * room's ring stays out of malloc's arenas. */
void room__ring_append(struct room_engine *e, struct room *r, struct ring_rec *x)
{
    struct ring *g = &r->ring;

    if (g->n == g->cap)
        ring_grow(g, e->cfg.ring_len);
    g->v[(g->head + g->n) % g->cap] = x;
    g->n++;
    g->bytes += x->wire_len;
}

/* The deltas after since, encoded again, when the ring has all of them;
 * false if not. */
static bool resume_deltas(struct room_engine *e, const struct room *r, uint64_t since,
                          const struct room_codec *codec, struct room_resume *out)
{
    const struct ring *g = &r->ring;
    uint64_t first;
    size_t k;

    if (since == r->seq)
        return true;
    if (since > r->seq || g->n == 0)
        return false;
    /* Ring entries are consecutive and end at the room's seq. */
    first = r->seq - g->n + 1;
    if (since + 1 < first)
        return false;
    k = (size_t)(since + 1 - first);
    out->n = g->n - k;
    out->msgs = xcalloc(out->n, sizeof(*out->msgs));
    for (size_t i = 0; i < out->n; i++)
        out->msgs[i] = ring_msg(e, r, g->v[(g->head + k + i) % g->cap], first + k + i, codec);
    return true;
}

int room_resume(struct room_engine *e, const char *room, uint64_t epoch, uint64_t since,
                struct room_resume *out)
{
    return room_resume_as(e, room, epoch, since, e->cfg.codec, out);
}

int room_resume_as(struct room_engine *e, const char *room, uint64_t epoch, uint64_t since,
                   const struct room_codec *codec, struct room_resume *out)
{
    const struct room *r;
    bool fresh = epoch == 0 && since == 0; /* a client with the empty model */

    *out = (struct room_resume){.kind = ROOM_RESUME_DELTAS};
    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    r = room__find(e, room);
    if ((r == NULL && fresh) ||
        (r && (fresh || epoch == r->epoch) && resume_deltas(e, r, since, codec, out))) {
        e->stats.resumes_deltas++;
        return ROOM_RESUME_DELTAS;
    }
    out->kind = ROOM_RESUME_SNAPSHOT;
    out->n = 1;
    out->msgs = xcalloc(1, sizeof(*out->msgs));
    room__snapshot(e, room, true, codec, &out->msgs[0]);
    e->stats.resumes_snapshot++;
    return ROOM_RESUME_SNAPSHOT;
}

void room_resume_release(struct room_resume *r)
{
    for (size_t i = 0; i < r->n; i++)
        payload_unref(r->msgs[i].payload);
    free(r->msgs);
    *r = (struct room_resume){.kind = ROOM_RESUME_DELTAS};
}
