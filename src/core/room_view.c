/* SPDX-License-Identifier: MIT */
/*
 * room_view.c - a room as seen by a reader some members hide from (they
 * block the reader): the numbering of that reader's view, which must be
 * the room's as it would be without those members.
 *
 * A room has one sequence; a reader who filters members skips the
 * messages that only changed them, and its view restarts (a new view
 * epoch, like a deleted and re-created room) after a message that left
 * it nobody to see. The engine tells this module which users hide from
 * some reader (room_note_hider(): they block someone), and each room
 * keeps a view log of its messages that matter to such views: a delta
 * that changed only hiders, and a message after which only hiders were
 * shown. Any reader's view head is then computed from the room and its
 * log (room_view_head()): walking the log back from the newest record,
 * count the deltas that changed only members hidden from the reader
 * until a record after which the reader saw nobody (its view began
 * there). The client's worker numbers a live view's deltas the same way
 * (docs/protocol.md), so the two agree.
 *
 * Bounds: at most ROOM_HIDERS_MAX hiders per engine (later ones are not
 * remembered: their activity is counted as visible, never left empty),
 * at most ring_len records per room (a view reaching back past the log
 * restarts at its oldest record), and at most VLOG_IDS users in a
 * record's lists (a larger change counts as visible to every view). The
 * log is empty, and costs nothing, while no hider is known.
 */
#include "room_internal.h"

#include <string.h>

#include "list.h"
#include "pool.h"

#define ROOM_HIDERS_MAX 65536u
#define EPOCH_MASK      ((UINT64_C(1) << 53) - 1)

/* ---- hiders ---- */

static const struct hider *hider_find(const struct room_engine *e, const char *id)
{
    uint64_t h = hash_bytes(id, strlen(id));

    for (struct hmap_node *n = hmap_find(&e->hiders, h); n; n = hmap_find_next(n, h)) {
        const struct hider *x = container_of(n, struct hider, node);
        if (strcmp(x->id, id) == 0)
            return x;
    }
    return NULL;
}

bool room_is_hider(const struct room_engine *e, const char *id)
{
    return e->hiders.count && hider_find(e, id) != NULL;
}

void room_note_hider(struct room_engine *e, const char *user)
{
    size_t n;
    struct hider *x;

    if (!room__id_ok(user, ROOM_ID_MAX) || e->hiders.count >= ROOM_HIDERS_MAX ||
        hider_find(e, user))
        return;
    n = strlen(user);
    x = pool_alloc(offsetof(struct hider, id) + n + 1);
    memcpy(x->id, user, n + 1);
    hmap_insert(&e->hiders, &x->node, hash_bytes(user, n));
}

void room__hiders_release(struct room_engine *e)
{
    struct hmap_node *n, *next;
    size_t it;

    for (n = hmap_first(&e->hiders, &it); n; n = next) {
        next = hmap_next(&e->hiders, n, &it);
        hmap_remove(&e->hiders, n);
        pool_free(container_of(n, struct hider, node));
    }
    hmap_release(&e->hiders);
}

/* ---- the view log ---- */

void room__vlog_release(struct vlog *g)
{
    for (uint32_t i = 0; i < g->n; i++)
        pool_free(g->v[i]);
    pool_free(g->v);
    *g = (struct vlog){0};
}

/* Appends r's published members to b (NUL-terminated ids) and returns
 * how many, when they are 1..VLOG_IDS hiders; else 0. */
static size_t shown_hiders(const struct room_engine *e, const struct room *r, struct buf *b)
{
    size_t n = 0;

    if (r->published == 0 || r->published > VLOG_IDS)
        return 0;
    for (const struct list *pos = r->order.next; pos != &r->order && n < r->published;
         pos = pos->next) {
        const struct member *m = container_of(pos, struct member, order);
        if (!m->pub)
            continue;
        if (!room_is_hider(e, m->user))
            return 0;
        buf_append(b, m->user, strlen(m->user) + 1);
        n++;
    }
    return n;
}

static void vlog_append(struct room_engine *e, struct room *r, struct vlog_rec *x)
{
    struct vlog *g = &r->vlog;

    if (g->n == e->cfg.ring_len) {
        g->floor = g->v[0]->seq;
        pool_free(g->v[0]);
        memmove(g->v, g->v + 1, (g->n - 1) * sizeof(*g->v));
        g->n--;
    }
    if (g->n == g->cap) {
        g->cap = g->cap ? MIN(g->cap * 2, e->cfg.ring_len) : MIN(8u, e->cfg.ring_len);
        g->v = pool_realloc(g->v, g->cap * sizeof(*g->v));
    }
    g->v[g->n++] = x;
}

void room__vlog_note(struct room_engine *e, struct room *r, const char *u, size_t ulen, size_t nu)
{
    struct buf *b = &e->vlog_ids;
    size_t np;
    struct vlog_rec *x;

    if (e->hiders.count == 0)
        return;
    b->len = 0;
    buf_append(b, u, ulen);
    np = shown_hiders(e, r, b);
    if (nu == 0 && np == 0)
        return;
    x = pool_alloc(offsetof(struct vlog_rec, ids) + b->len);
    x->seq = r->seq;
    x->nu = (uint8_t)nu;
    x->np = (uint8_t)np;
    memcpy(x->ids, b->data, b->len);
    vlog_append(e, r, x);
}

/* True when hide hides each of the n ids at *p (advanced past them). */
static bool all_hidden(const char **p, size_t n, room_hide_fn *hide, void *ctx)
{
    bool all = true;

    for (size_t i = 0; i < n; i++, *p += strlen(*p) + 1)
        all = all && hide(*p, ctx);
    return all;
}

/* ---- public ---- */

uint64_t room_view_epoch(uint64_t epoch, uint64_t since)
{
    uint64_t z = epoch + since * UINT64_C(0x9E3779B97F4A7C15);

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z = (z ^ (z >> 31)) & EPOCH_MASK;
    return z && z != epoch ? z : (epoch ^ 1) | 2;
}

/* The head of r as a reader who hides some (hide) sees it; r has
 * something to show that reader. */
static void view_head(const struct room *r, room_hide_fn *hide, void *ctx, struct room_head *out)
{
    const struct vlog *g = &r->vlog;
    uint64_t begin = g->floor, skipped = 0;

    for (uint32_t i = g->n; i-- > 0;) {
        const struct vlog_rec *x = g->v[i];
        const char *p = x->ids;
        bool solo = x->nu && all_hidden(&p, x->nu, hide, ctx);

        if (x->np && all_hidden(&p, x->np, hide, ctx)) {
            begin = x->seq; /* the reader saw nobody after it: its view began there */
            break;
        }
        skipped += solo;
    }
    out->epoch = begin ? room_view_epoch(r->epoch, begin) : r->epoch;
    out->seq = r->seq - begin - skipped;
}

int room_view_head(const struct room_engine *e, const char *room, room_hide_fn *hide, void *ctx,
                   struct room_head *out)
{
    const struct room *r;

    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    r = room__find(e, room);
    *out = (struct room_head){.room = room, .mode = ROOM_MODE_NORMAL};
    out->count = room__shown(r, hide, ctx, &out->digest);
    if (out->count == 0) /* the digest of no member is 0 too */
        return 0;
    out->room = r->id;
    out->mode = r->mode;
    out->epoch = r->epoch;
    out->seq = r->seq;
    if (hide)
        view_head(r, hide, ctx, out);
    return 0;
}
