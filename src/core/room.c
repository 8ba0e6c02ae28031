/* SPDX-License-Identifier: MIT */
/*
 * room.c - room presence of one partition: rooms and members in intrusive
 * hash tables, a dirty list and one flush timer per room for batched
 * deltas, a per-room ring of compactly kept delta values for resume
 * (encoded again when a resume asks), and a per-seq snapshot cache. The ephemeral
 * lane lives in room_ephemeral.c.
 *
 * Every member record keeps two states: the current one, changed by the
 * calls, and the published one, which is what the last delta told
 * subscribers. Flushing a room turns the difference into one delta. This
 * file does not know connections, subscriptions, frames or any client
 * protocol: a message is a value (room.h) that the configured codec
 * encodes, and its payload goes to the callbacks.
 */
#include "room_internal.h"

#include <assert.h>
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "json.h"
#include "list.h"
#include "pool.h"
#include "utf8.h"

#define EPOCH_MASK       ((UINT64_C(1) << 53) - 1) /* epochs stay exact as JSON numbers */
#define RING_MIN         8u                        /* first ring allocation, in entries */
#define RING_FLOOR_BYTES 4096u                     /* deltas kept for resume in any room */

/* ---- ids, JSON input ---- */

static bool id_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~' || c == ':' || c == '@';
}

bool room__id_ok(const char *s, size_t max)
{
    size_t n;

    if (s == NULL)
        return false;
    for (n = 0; s[n]; n++)
        if (n >= max || !id_char((unsigned char)s[n]))
            return false;
    return n > 0;
}

static bool is_json_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Parses (p, n) as exactly one JSON value with optional whitespace around
 * it; NULL when it is not. cJSON would accept a leading BOM and trailing
 * bytes, and does not check UTF-8, so those are checked here. */
static cJSON *parse_json(const char *p, size_t n)
{
    const char *end = NULL;
    cJSON *v;

    if (n == 0 || !utf8_valid(p, n) || (n >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0))
        return NULL;
    v = cJSON_ParseWithLengthOpts(p, n, &end, false);
    if (v == NULL)
        return NULL;
    while (end < p + n && is_json_ws(*end))
        end++;
    if (end != p + n) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

/* cJSON reports out-of-memory as NULL; the project aborts on OOM. */
static void *must(void *p)
{
    if (p == NULL)
        abort();
    return p;
}

/* Parses (p, n) and returns its compact form (free() it), or NULL with *err
 * set: size_err when the text or its compact form exceeds max, json_err
 * when it is not one JSON value. */
char *room__compact_json(const char *p, size_t n, size_t max, int size_err, int json_err, int *err)
{
    cJSON *v;
    char *s;

    if (n > max) {
        *err = size_err;
        return NULL;
    }
    v = parse_json(p, n);
    if (v == NULL) {
        *err = json_err;
        return NULL;
    }
    s = must(cJSON_PrintUnformatted(v));
    cJSON_Delete(v);
    if (strlen(s) > max) {
        free(s);
        *err = size_err;
        return NULL;
    }
    return s;
}

/* Moves a compact JSON string from room__compact_json() into a payload, a
 * lasting one (metadata stays as long as its member), and returns a
 * reference. Members often share a value (an app's default metadata, the
 * same role or status): a value equal to one of the last few seen, by
 * hash, shares that one's payload, so that a thousand members with the
 * same metadata hold one copy. The cache keeps at most META_CACHE values
 * of up to META_CACHE_MAX bytes alive after their members have gone. */
static struct payload *meta_take(struct room_engine *e, char *s)
{
    size_t n = strlen(s);
    struct payload **slot, *p;

    if (n == 2 && memcmp(s, "{}", 2) == 0) {
        free(s);
        return payload_ref(e->empty_meta);
    }
    if (n > META_CACHE_MAX) {
        p = payload_lasting(s, n);
        free(s);
        return p;
    }
    slot = &e->metas[hash_bytes(s, n) % META_CACHE];
    if (*slot == NULL || (*slot)->len != n || memcmp((*slot)->data, s, n) != 0) {
        payload_unref(*slot);
        *slot = payload_lasting(s, n);
    }
    free(s);
    return payload_ref(*slot);
}

/*
 * RFC 7386 MergePatch(target, patch): consumes target, borrows patch and
 * returns the result. An object patch merges key by key into an object
 * target (a non-object target becomes {} first): a null value deletes the
 * key, an object value merges recursively, anything else replaces. A
 * non-object patch replaces the whole target. Keys keep their position when
 * replaced in place, so patching a value to what it was leaves the compact
 * form byte-identical and produces no delta.
 */
static cJSON *merge_patch(cJSON *target, const cJSON *patch)
{
    const cJSON *p;

    if (!cJSON_IsObject(patch)) {
        cJSON_Delete(target);
        return must(cJSON_Duplicate(patch, true));
    }
    if (!cJSON_IsObject(target)) {
        cJSON_Delete(target);
        target = must(cJSON_CreateObject());
    }
    cJSON_ArrayForEach(p, patch)
    {
        cJSON *old = cJSON_GetObjectItemCaseSensitive(target, p->string);

        if (cJSON_IsNull(p)) {
            cJSON_DeleteItemFromObjectCaseSensitive(target, p->string);
        } else if (cJSON_IsObject(old) && cJSON_IsObject(p)) {
            merge_patch(old, p); /* in place: returns old */
        } else if (old != NULL) {
            cJSON_ReplaceItemInObjectCaseSensitive(target, p->string, merge_patch(NULL, p));
        } else {
            cJSON_AddItemToObject(target, p->string, merge_patch(NULL, p));
        }
    }
    return target;
}

/* ---- lookups ---- */

static struct room *room_find(const struct room_engine *e, const char *id)
{
    uint64_t h = hash_bytes(id, strlen(id));
    struct hmap_node *n;

    for (n = hmap_find(&e->rooms, h); n; n = hmap_find_next(n, h)) {
        struct room *r = container_of(n, struct room, node);
        if (strcmp(r->id, id) == 0)
            return r;
    }
    return NULL;
}

static struct member *member_find(const struct room *r, const char *user)
{
    uint64_t h = hash_bytes(user, strlen(user));
    struct hmap_node *n;

    for (n = hmap_find(&r->members, h); n; n = hmap_find_next(n, h)) {
        struct member *m = container_of(n, struct member, node);
        if (strcmp(m->user, user) == 0)
            return m;
    }
    return NULL;
}

/* m's nsessions session ids, join order. */
static char *const *sessions(const struct member *m)
{
    return m->nsessions >= 2 ? m->sid.many : &m->sid.one;
}

/* Index of session in m's sessions, or -1. */
static long session_index(const struct member *m, const char *session)
{
    char *const *v = sessions(m);

    for (size_t i = 0; i < m->nsessions; i++)
        if (strcmp(v[i], session) == 0)
            return (long)i;
    return -1;
}

/* Common lookup of the mutating calls: validates the ids and finds the
 * member, which must hold a session. */
int room__find_member(const struct room_engine *e, const char *room, const char *user,
                      struct room **rp, struct member **out)
{
    struct room *r;
    struct member *m;

    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    if (!room__id_ok(user, ROOM_ID_MAX))
        return ROOM_E_USER_ID;
    r = room_find(e, room);
    if (r == NULL)
        return ROOM_E_NO_ROOM;
    m = member_find(r, user);
    if (m == NULL || m->nsessions == 0)
        return ROOM_E_NOT_MEMBER;
    *rp = r;
    *out = m;
    return 0;
}

/* ---- messages as values ----
 *
 * Every message is built as its value (room.h) in the engine's scratch
 * lists and handed to the codec; nothing here writes a wire format. The
 * HTTP API's info object (room_encode_info) is the one JSON this file
 * writes, at the end.
 */

/* Grows the scratch list i to hold n entries. */
static struct room_entry *ents_reserve(struct room_engine *e, int i, size_t n)
{
    if (n > e->cap_ents[i]) {
        e->cap_ents[i] = MAX(n, e->cap_ents[i] * 2);
        e->ents[i] = xrealloc(e->ents[i], e->cap_ents[i] * sizeof(*e->ents[i]));
    }
    return e->ents[i];
}

static const char **leaves_reserve(struct room_engine *e, size_t n)
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
static bool listed(const struct member *m, room_hide_fn *hide, void *ctx)
{
    return m->pub && !(hide && hide(m->user, ctx));
}

/* How many of r's published members a reader who hides some sees. */
static size_t shown_count(const struct room *r, room_hide_fn *hide, void *ctx)
{
    size_t shown = r ? r->published : 0;

    if (r && hide)
        for (const struct list *pos = r->order.next; pos != &r->order; pos = pos->next)
            shown -= container_of(pos, struct member, order)->pub &&
                     !listed(container_of(pos, struct member, order), hide, ctx);
    return shown;
}

/* v = r's published state as a reader who hides some sees it (hide NULL:
 * none), listing at most limit members in join order, in scratch list 0;
 * r NULL, or a room with nothing to show, reads as the empty room of
 * epoch 0. */
static void state_view(struct room_engine *e, const char *id, const struct room *r, size_t limit,
                       room_hide_fn *hide, void *ctx, struct room_snapshot_view *v)
{
    size_t shown = shown_count(r, hide, ctx);
    struct room_entry *x;

    *v = (struct room_snapshot_view){.head = {.room = id, .mode = ROOM_MODE_NORMAL}};
    if (r == NULL || shown == 0)
        return;
    v->head = (struct room_head){r->id, r->epoch, r->seq, r->mode, shown};
    x = ents_reserve(e, 0, MIN(limit, shown));
    for (const struct list *pos = r->order.next; pos != &r->order && v->nmembers < limit;
         pos = pos->next) {
        const struct member *m = container_of(pos, struct member, order);
        if (listed(m, hide, ctx))
            x[v->nmembers++] = entry_of(m);
    }
    v->members = x;
}

static size_t snapshot_limit(const struct room *r)
{
    return r->mode == ROOM_MODE_INTERVAL ? r->e->cfg.snapshot_limit : SIZE_MAX;
}

static struct room_msg make_msg(struct payload *p, uint64_t seq)
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
    return make_msg(codec->encode_snapshot(v, &e->scratch), r->seq);
}

enum { DELTA_JOINS, DELTA_LEAVES, DELTA_PATCHES }; /* the lists of a delta */

/* Per-flush lists: entries and totals. */
struct delta_lists {
    size_t total[3]; /* changes of each kind */
    size_t listed[3];
    size_t limit; /* entries listed per list */
};

/* Lists m in d (joins and patches in scratch lists 0 and 1, leaves as
 * copies in leave_ids: the member is freed before the message goes). */
static void delta_add(struct room_engine *e, struct delta_lists *d, int which,
                      const struct member *m)
{
    size_t k = d->listed[which];

    d->total[which]++;
    if (k >= d->limit)
        return;
    d->listed[which]++;
    if (which == DELTA_LEAVES)
        buf_append(&e->leave_ids, m->user, strlen(m->user) + 1);
    else
        ents_reserve(e, which == DELTA_JOINS ? 0 : 1, k + 1)[k] = entry_of(m);
}

/* The value of r's delta from d and the scratch lists. */
static void delta_view(struct room_engine *e, const struct room *r, const struct delta_lists *d,
                       struct room_delta_view *v)
{
    const char **leaves = leaves_reserve(e, d->listed[DELTA_LEAVES]);
    const char *p = e->leave_ids.data;

    for (size_t i = 0; i < d->listed[DELTA_LEAVES]; i++, p += strlen(p) + 1)
        leaves[i] = p;
    *v = (struct room_delta_view){
        .head = {r->id, r->epoch, r->seq, r->mode, r->published},
        .joins = e->ents[0],
        .njoins = d->listed[DELTA_JOINS],
        .leaves = leaves,
        .nleaves = d->listed[DELTA_LEAVES],
        .patches = e->ents[1],
        .npatches = d->listed[DELTA_PATCHES],
        .join_total = d->total[DELTA_JOINS],
        .leave_total = d->total[DELTA_LEAVES],
        .patch_total = d->total[DELTA_PATCHES],
    };
}

/* ---- ring ---- */

static void ring_pop(struct ring *g)
{
    struct ring_rec *x = g->v[g->head];

    g->bytes -= x->wire_len;
    pool_free(x);
    g->head = (g->head + 1) % g->cap;
    g->n--;
}

static void ring_release(struct ring *g)
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
    x->kind = (uint8_t)kind;
    x->mode = (uint8_t)h->mode;
    return x;
}

/* A record of msg, the delta whose value is v. */
static struct ring_rec *ring_rec_delta(const struct room_msg *msg, const struct room_delta_view *v)
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
static struct ring_rec *ring_rec_snapshot(const struct room_msg *msg,
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
    p = get_entries(p, ents_reserve(e, 0, v->njoins), v->njoins);
    leaves = leaves_reserve(e, v->nleaves);
    for (size_t i = 0; i < v->nleaves; i++, p += strlen(p) + 1)
        leaves[i] = p;
    get_entries(p, ents_reserve(e, 1, v->npatches), v->npatches);
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
    struct room_head h = {r->id, r->epoch, seq, (enum room_mode)x->mode, x->count};
    struct room_snapshot_view sv = {.head = h};
    struct room_delta_view dv = {.head = h};

    switch (x->kind) {
    case RING_DELTA:
        ring_delta_view(e, x, &dv);
        return make_msg(codec->encode_delta(&dv, &e->scratch), seq);
    case RING_SNAPSHOT:
        get_u32(x->tail, &sv.nmembers);
        sv.members = ents_reserve(e, 0, sv.nmembers);
        get_entries(x->tail + sizeof(uint32_t), e->ents[0], sv.nmembers);
        break;
    default: /* RING_EMPTY */
        sv.head = (struct room_head){.room = r->id, .mode = ROOM_MODE_NORMAL};
    }
    return make_msg(codec->encode_snapshot(&sv, &e->scratch), seq);
}

/* Makes room for r's newest message of len bytes (as encoded), evicting
 * the oldest ones beyond ring_len entries or max_bytes bytes. False when
 * the message is larger than max_bytes: the ring is then empty (keeping
 * older ones would leave a gap) and the message is not kept. */
static bool ring_make_room(struct room_engine *e, struct room *r, size_t len, size_t max_bytes)
{
    struct ring *g = &r->ring;

    while (g->n && (len > max_bytes || g->n >= e->cfg.ring_len || g->bytes + len > max_bytes))
        ring_pop(g);
    return len <= max_bytes;
}

/* Keeps x, the record of r's newest message, as the newest entry (after
 * ring_make_room()). The ring holds a compact lasting record, not the
 * payload being sent now: that one is freed once delivered, and an idle
 * room's ring stays out of malloc's arenas. */
static void ring_append(struct room_engine *e, struct room *r, struct ring_rec *x)
{
    struct ring *g = &r->ring;

    if (g->n == g->cap)
        ring_grow(g, e->cfg.ring_len);
    g->v[(g->head + g->n) % g->cap] = x;
    g->n++;
    g->bytes += x->wire_len;
}

/* ---- rooms and members ---- */

static void on_flush_timer(struct wheel_timer *t, uint64_t now);

/* splitmix64: spreads consecutive counters over 53 bits. */
static uint64_t next_epoch(struct room_engine *e)
{
    uint64_t z = e->cfg.epoch_seed + ++e->rooms_created * UINT64_C(0x9E3779B97F4A7C15);

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z = (z ^ (z >> 31)) & EPOCH_MASK;
    return z ? z : 1;
}

static struct room *room_create(struct room_engine *e, const char *id)
{
    struct room *r = pool_alloc(sizeof(*r));

    r->e = e;
    memcpy(r->id, id, strlen(id) + 1);
    r->epoch = next_epoch(e);
    r->mode = ROOM_MODE_NORMAL;
    list_init(&r->order);
    wheel_timer_init(&r->flush_timer, on_flush_timer);
    hmap_insert(&e->rooms, &r->node, hash_bytes(id, strlen(id)));
    e->stats.rooms++;
    return r;
}

/* A member record without sessions whose inline session id copy has room
 * for session (session_add() then takes it). */
static struct member *member_create(struct room *r, const char *user, const char *session,
                                    uint64_t now)
{
    size_t n = strlen(user), k = strlen(session);
    struct member *m = pool_alloc(offsetof(struct member, user) + n + 1 + k + 1);

    memcpy(m->user, user, n + 1);
    memcpy(m->user + n + 1, session, k + 1);
    m->meta = payload_ref(r->e->empty_meta);
    m->joined_at = now + (uint64_t)r->e->cfg.wall_offset_ms;
    m->visible = true;
    list_insert_tail(&r->order, &m->order);
    hmap_insert(&r->members, &m->node, hash_bytes(user, strlen(user)));
    r->e->stats.members++;
    return m;
}

/* The inline session id copy, after the user id. */
static char *inline_sid(struct member *m)
{
    return m->user + strlen(m->user) + 1;
}

/* A copy of session for m: the inline one when it is free and long
 * enough, else a pool.h copy. */
static char *sid_copy(struct member *m, const char *session)
{
    char *slot = inline_sid(m);
    size_t n = strlen(session);

    if (m->sid_inline || n > strlen(slot))
        return pool_strdup(session);
    memmove(slot, session, n + 1); /* the same bytes at member_create() */
    m->sid_inline = true;
    return slot;
}

static void sid_free(struct member *m, char *sid)
{
    if (sid == inline_sid(m))
        m->sid_inline = false;
    else
        pool_free(sid);
}

/* Frees m, which must not be in its room's dirty list (unless the room
 * is being freed). */
static void member_free(struct room *r, struct member *m)
{
    char *const *v = sessions(m);

    hmap_remove(&r->members, &m->node);
    list_del(&m->order);
    room__sender_free(r->e, m);
    for (size_t i = 0; i < m->nsessions; i++)
        sid_free(m, v[i]);
    if (m->nsessions >= 2)
        pool_free(m->sid.many);
    payload_unref(m->meta);
    payload_unref(m->pub_meta);
    pool_free(m);
    r->e->stats.members--;
}

static void room_free(struct room *r)
{
    struct room_engine *e = r->e;
    struct list *pos, *tmp;

    list_foreach_safe(pos, tmp, &r->order)
    {
        member_free(r, container_of(pos, struct member, order));
    }
    hmap_release(&r->members);
    pool_free(r->dirty);
    hmap_remove(&e->rooms, &r->node);
    wheel_del(&r->flush_timer);
    ring_release(&r->ring);
    payload_unref(r->snap.payload);
    pool_free(r);
    e->stats.rooms--;
}

/* Deletes r if nobody is in it and no callback for it is running. Returns
 * true when r is gone. */
bool room__maybe_delete(struct room *r)
{
    if (r->busy || r->members.count)
        return false;
    room_free(r);
    return true;
}

/* Marks m changed: it joins the room's dirty list, and the room's flush
 * timer is armed for the end of the current window if it is not yet. */
static void touch(struct room *r, struct member *m, uint64_t now)
{
    const struct room_config *c = &r->e->cfg;

    if (!m->dirty) {
        if (r->ndirty == r->cap_dirty) {
            r->cap_dirty = r->cap_dirty ? r->cap_dirty * 2 : 4;
            r->dirty = pool_realloc(r->dirty, r->cap_dirty * sizeof(*r->dirty));
        }
        r->dirty[r->ndirty++] = m;
        m->dirty = true;
    }
    if (!wheel_is_linked(&r->flush_timer))
        wheel_add(r->e->wheel, &r->flush_timer,
                  now + (r->mode == ROOM_MODE_INTERVAL ? c->interval_ms : c->batch_ms));
}

/* Calls cb with ev, keeping r (and the engine) alive across it. */
void room__emit(struct room *r, room_emit_cb *cb, struct room_event *ev)
{
    struct room_engine *e = r->e;

    if (cb == NULL)
        return;
    ev->room = r->id;
    ev->epoch = r->epoch;
    ev->droppable = ev->user != NULL;
    r->busy++;
    e->depth++;
    cb(e->ctx, ev);
    e->depth--;
    r->busy--;
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
    m->pub = seen;
    payload_unref(m->pub_meta);
    m->pub_meta = seen ? payload_ref(m->meta) : NULL;
    if (m->pub)
        r->pub_bytes += member_bytes(m);
    return which;
}

/* The apply pass; d collects list entries (NULL: count only). Empties
 * the dirty list; returns the number of changes. */
static size_t apply_dirty(struct room *r, struct delta_lists *d)
{
    struct room_engine *e = r->e;
    size_t changes = 0;

    for (uint32_t i = 0; i < r->ndirty; i++) {
        struct member *m = r->dirty[i];
        int which = publish_member(r, m);

        m->dirty = false;
        if (which == DELTA_JOINS)
            r->published++;
        else if (which == DELTA_LEAVES)
            r->published--;
        if (which >= 0 && d)
            delta_add(e, d, which, m);
        changes += which >= 0;
        if (m->nsessions == 0)
            member_free(r, m);
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
        ev.msg = make_msg(e->cfg.codec->encode_delta(&dv, &e->scratch), r->seq);
        ev.kind = ROOM_EV_DELTA;
        ev.delta = &dv;
    }
    if (ring_make_room(e, r, ev.msg.payload->len, max_bytes))
        ring_append(e, r, reset ? ring_rec_snapshot(&ev.msg, &sv) : ring_rec_delta(&ev.msg, &dv));
    e->stats.deltas++;
    room__emit(r, e->on_delta, &ev);
    payload_unref(ev.msg.payload);
}

/* Flushes r's batch (see the essay above) at now. Returns true when r was
 * deleted. */
static bool flush_room(struct room *r, uint64_t now)
{
    struct room_engine *e = r->e;
    enum room_mode old = r->mode;
    struct delta_lists d = {.limit = SIZE_MAX};
    bool reset;

    wheel_del(&r->flush_timer);
    r->mode = next_mode(&e->cfg, old, count_after(r));
    reset = old == ROOM_MODE_INTERVAL && r->mode == ROOM_MODE_NORMAL;
    if (r->mode == ROOM_MODE_INTERVAL)
        d.limit = e->cfg.interval_list_limit;
    e->leave_ids.len = 0;
    if (apply_dirty(r, reset ? NULL : &d) == 0) {
        assert(r->mode == old); /* the mode follows the count, which did not move */
        return room__maybe_delete(r);
    }
    r->seq++;
    r->flushed_at = now;
    publish(e, r, &d, reset);
    return room__maybe_delete(r);
}

static void on_flush_timer(struct wheel_timer *t, uint64_t now)
{
    flush_room(container_of(t, struct room, flush_timer), now);
}

/* ---- public: engine ---- */

void room_config_init(struct room_config *c)
{
    *c = (struct room_config){
        .max_members = 10000,
        .max_sessions = 32,
        .max_meta_bytes = 1024,
        .batch_ms = 50,
        .interval_ms = 1000,
        .interval_enter = 1000,
        .interval_leave = 800,
        .snapshot_limit = 100,
        .interval_list_limit = 100,
        .ring_len = 256,
        .ring_bytes = 65536,
        .ephemeral_rate = 15,
        .max_ephemeral_bytes = 1024,
        .max_ephemeral_kinds = 8,
    };
}

int room_config_check(const struct room_config *c)
{
    const uint32_t positive[] = {
        c->max_members,        c->max_sessions,   c->max_meta_bytes, c->batch_ms,
        c->interval_ms,        c->interval_enter, c->snapshot_limit, c->interval_list_limit,
        c->ring_len,           c->ring_bytes,     c->ephemeral_rate, c->max_ephemeral_bytes,
        c->max_ephemeral_kinds};

    for (size_t i = 0; i < ARRAY_SIZE(positive); i++)
        if (positive[i] == 0)
            return ROOM_E_CONFIG;
    if (c->max_meta_bytes > (1u << 20) || c->max_ephemeral_bytes > (1u << 20))
        return ROOM_E_CONFIG;
    if (c->interval_leave >= c->interval_enter || c->ephemeral_rate > 1000)
        return ROOM_E_CONFIG;
    return 0;
}

struct room_engine *room_engine_new(const struct room_config *cfg, struct wheel *w,
                                    room_emit_cb *on_delta, room_emit_cb *on_ephemeral, void *ctx)
{
    struct room_engine *e = xcalloc(1, sizeof(*e));

    assert(room_config_check(cfg) == 0); /* the caller validated its configuration */
    assert(cfg->codec && cfg->codec->encode_delta && cfg->codec->encode_snapshot &&
           cfg->codec->encode_ephemeral); /* a composition error otherwise */
    e->cfg = *cfg;
    e->wheel = w;
    e->on_delta = on_delta;
    e->on_ephemeral = on_ephemeral;
    e->ctx = ctx;
    e->ephemeral_period = (1000 + cfg->ephemeral_rate - 1) / cfg->ephemeral_rate;
    e->empty_meta = payload_from("{}", 2);
    return e;
}

void room_engine_free(struct room_engine *e)
{
    struct hmap_node *n, *next;
    size_t it;

    if (e == NULL)
        return;
    assert(e->depth == 0); /* never from a callback: the caller is using it */
    for (n = hmap_first(&e->rooms, &it); n; n = next) {
        next = hmap_next(&e->rooms, n, &it);
        room_free(container_of(n, struct room, node));
    }
    hmap_release(&e->rooms);
    hmap_release(&e->senders); /* emptied with the members */
    free(e->ents[0]);
    free(e->ents[1]);
    free(e->leaves);
    buf_release(&e->leave_ids);
    buf_release(&e->scratch);
    payload_unref(e->empty_meta);
    for (size_t i = 0; i < META_CACHE; i++)
        payload_unref(e->metas[i]);
    free(e);
}

void room_engine_set_wall_offset(struct room_engine *e, int64_t wall_offset_ms)
{
    e->cfg.wall_offset_ms = wall_offset_ms;
}

/* ---- public: membership ---- */

/* The id checks of room_join() and room_leave(), in that order. */
static int check_ids(const char *room, const char *user, const char *session)
{
    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    if (!room__id_ok(user, ROOM_ID_MAX))
        return ROOM_E_USER_ID;
    if (!room__id_ok(session, ROOM_ID_MAX))
        return ROOM_E_SESSION_ID;
    return 0;
}

/* The checks of room_join() that need the room; 0 when the join may go. */
static int join_check(const struct room_engine *e, const struct room *r, const struct member *m,
                      const char *session)
{
    if (m && session_index(m, session) >= 0)
        return ROOM_E_JOINED;
    if (m && m->nsessions >= e->cfg.max_sessions)
        return ROOM_E_SESSIONS;
    /* Full counts the members others can see, so that room_full says
     * nothing about invisible ones; twice the cap bounds them all. */
    if ((m == NULL || m->nsessions == 0) && r &&
        (r->present - r->hidden >= e->cfg.max_members ||
         r->present >= 2 * (size_t)e->cfg.max_members))
        return ROOM_E_FULL;
    return 0;
}

/* Appends session to m's ids. One id lives in m->sid.one; the array is
 * made for the second one and has room for the next power of two, so it
 * grows when nsessions is one (>= 2). */
static void session_add(struct member *m, const char *session)
{
    char *sid = sid_copy(m, session);
    uint32_t n = m->nsessions;

    if (n == 0) {
        m->sid.one = sid;
    } else if (n == 1) {
        char **v = pool_alloc(2 * sizeof(*v));

        v[0] = m->sid.one;
        m->sid.many = v;
    } else if ((n & (n - 1)) == 0) {
        m->sid.many = pool_realloc(m->sid.many, 2 * n * sizeof(*m->sid.many));
    }
    if (n >= 1)
        m->sid.many[n] = sid;
    m->nsessions = n + 1;
}

/* m's metadata becomes meta (a reference, consumed); true when it changed. */
static bool meta_replace(struct member *m, struct payload *meta)
{
    bool same = meta->len == m->meta->len && memcmp(meta->data, m->meta->data, meta->len) == 0;

    payload_unref(m->meta);
    m->meta = meta;
    return !same;
}

int room_join(struct room_engine *e, const char *room, const char *user, const char *session,
              const char *meta, size_t meta_len, uint64_t now)
{
    struct payload *pm = NULL;
    struct room *r;
    struct member *m;
    bool changed;
    int rc;

    rc = check_ids(room, user, session);
    if (rc)
        return rc;
    if (meta) {
        char *s = room__compact_json(meta, meta_len, e->cfg.max_meta_bytes, ROOM_E_META_SIZE,
                                     ROOM_E_META_JSON, &rc);
        if (s == NULL)
            return rc;
        pm = meta_take(e, s);
    }
    r = room_find(e, room);
    m = r ? member_find(r, user) : NULL;
    rc = join_check(e, r, m, session);
    if (rc) {
        payload_unref(pm);
        return rc;
    }
    if (r == NULL)
        r = room_create(e, room);
    if (m == NULL)
        m = member_create(r, user, session, now);
    changed = m->nsessions == 0;
    if (changed) {
        /* Back from zero sessions: a new membership, unless its leave was
         * never published, which it then cancels (joinedAt stays). */
        r->present++;
        m->visible = true;
        if (!m->pub)
            m->joined_at = now + (uint64_t)e->cfg.wall_offset_ms;
    }
    session_add(m, session);
    if (pm && meta_replace(m, pm))
        changed = true;
    if (changed)
        touch(r, m, now);
    return 0;
}

/* Removes session i of m; with the last one the member leaves. */
static void session_remove(struct room *r, struct member *m, size_t i, uint64_t now)
{
    char **v = m->nsessions >= 2 ? m->sid.many : &m->sid.one;

    sid_free(m, v[i]);
    memmove(&v[i], &v[i + 1], (m->nsessions - i - 1) * sizeof(*v));
    if (--m->nsessions == 1) {
        char *last = v[0];

        pool_free(v); /* back to one id: no array */
        m->sid.one = last;
    }
    if (m->nsessions > 0)
        return;
    m->sid.one = NULL;
    r->present--;
    if (!m->visible)
        r->hidden--;
    room__sender_free(r->e, m);
    touch(r, m, now);
}

int room_leave(struct room_engine *e, const char *room, const char *user, const char *session,
               uint64_t now)
{
    struct room *r;
    struct member *m;
    long i;
    int rc;

    rc = check_ids(room, user, session);
    if (rc == 0)
        rc = room__find_member(e, room, user, &r, &m);
    if (rc)
        return rc;
    i = session_index(m, session);
    if (i < 0)
        return ROOM_E_NO_SESSION;
    session_remove(r, m, (size_t)i, now);
    return 0;
}

int room_kick(struct room_engine *e, const char *room, const char *user, uint64_t now)
{
    struct room *r;
    struct member *m;
    int rc = room__find_member(e, room, user, &r, &m);

    if (rc)
        return rc;
    while (m->nsessions)
        session_remove(r, m, m->nsessions - 1, now);
    return 0;
}

/* room_patch (merge) and room_set_meta (replace). */
static int update_meta(struct room_engine *e, const char *room, const char *user, const char *text,
                       size_t len, bool merge, uint64_t now)
{
    struct room *r;
    struct member *m;
    cJSON *v;
    char *s;
    int rc = room__find_member(e, room, user, &r, &m);

    if (rc)
        return rc;
    if (len > e->cfg.max_meta_bytes)
        return ROOM_E_META_SIZE;
    v = parse_json(text, len);
    if (v == NULL)
        return ROOM_E_META_JSON;
    if (merge) {
        /* Stored metadata is always valid JSON of our own making. */
        cJSON *target = must(cJSON_ParseWithLength(m->meta->data, m->meta->len));
        cJSON *patch = v;

        v = merge_patch(target, patch);
        cJSON_Delete(patch);
    }
    s = must(cJSON_PrintUnformatted(v));
    cJSON_Delete(v);
    if (strlen(s) > e->cfg.max_meta_bytes) {
        free(s);
        return ROOM_E_META_SIZE;
    }
    if (meta_replace(m, meta_take(e, s)))
        touch(r, m, now);
    return 0;
}

int room_patch(struct room_engine *e, const char *room, const char *user, const char *patch,
               size_t len, uint64_t now)
{
    return update_meta(e, room, user, patch, len, true, now);
}

int room_set_meta(struct room_engine *e, const char *room, const char *user, const char *meta,
                  size_t len, uint64_t now)
{
    return update_meta(e, room, user, meta, len, false, now);
}

int room_set_visible(struct room_engine *e, const char *room, const char *user, bool visible,
                     uint64_t now)
{
    struct room *r;
    struct member *m;
    int rc = room__find_member(e, room, user, &r, &m);

    if (rc)
        return rc;
    if (m->visible == visible)
        return 0;
    m->visible = visible;
    if (visible)
        r->hidden--;
    else
        r->hidden++;
    /* Others see her enter now: joinedAt must not tell when she came in
     * hidden (unless her membership is still published, unchanged). */
    if (visible && !m->pub)
        m->joined_at = now + (uint64_t)e->cfg.wall_offset_ms;
    if (!visible)
        room__sender_free(e, m);
    touch(r, m, now);
    return 0;
}

int room_flush(struct room_engine *e, const char *room, uint64_t now)
{
    struct room *r;

    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    r = room_find(e, room);
    if (r == NULL)
        return ROOM_E_NO_ROOM;
    flush_room(r, now);
    return 0;
}

/* ---- public: snapshots, resume, reads ---- */

/* room's snapshot by codec; the cache holds the room's own codec's only. */
static int snapshot(struct room_engine *e, const char *room, bool keep,
                    const struct room_codec *codec, struct room_msg *out)
{
    struct room *r;

    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    r = room_find(e, room);
    if (r == NULL) {
        struct room_snapshot_view v;

        state_view(e, room, NULL, 0, NULL, NULL, &v);
        *out = make_msg(codec->encode_snapshot(&v, &e->scratch), 0);
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
    return snapshot(e, room, true, e->cfg.codec, out);
}

int room_snapshot_uncached(struct room_engine *e, const char *room, struct room_msg *out)
{
    return snapshot(e, room, false, e->cfg.codec, out);
}

int room_snapshot_as(struct room_engine *e, const char *room, const struct room_codec *codec,
                     struct room_msg *out)
{
    return snapshot(e, room, true, codec, out);
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
    r = room_find(e, room);
    if ((r == NULL && fresh) ||
        (r && (fresh || epoch == r->epoch) && resume_deltas(e, r, since, codec, out))) {
        e->stats.resumes_deltas++;
        return ROOM_RESUME_DELTAS;
    }
    out->kind = ROOM_RESUME_SNAPSHOT;
    out->n = 1;
    out->msgs = xcalloc(1, sizeof(*out->msgs));
    snapshot(e, room, true, codec, &out->msgs[0]);
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

int room_get_info(const struct room_engine *e, const char *room, struct room_info *out)
{
    const struct room *r;

    *out = (struct room_info){.mode = ROOM_MODE_NORMAL};
    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    r = room_find(e, room);
    if (r == NULL)
        return ROOM_E_NO_ROOM;
    out->epoch = r->epoch;
    out->seq = r->seq;
    out->mode = r->mode;
    out->count = r->published;
    out->members = r->present;
    out->pending = r->ndirty > 0;
    out->flushed_at = r->flushed_at;
    return 0;
}

int room_get_member(const struct room_engine *e, const char *room, const char *user,
                    struct room_member_view *out)
{
    struct room *r;
    struct member *m;
    int rc = room__find_member(e, room, user, &r, &m);

    if (rc)
        return rc;
    *out = (struct room_member_view){
        .user = m->user,
        .meta = m->meta->data,
        .meta_len = m->meta->len,
        .joined_at = m->joined_at,
        .session_ids = (const char *const *)sessions(m),
        .nsessions = m->nsessions,
        .visible = m->visible,
        .published = m->pub,
    };
    return 0;
}

int room_encode_info(const struct room_engine *e, const char *room, size_t limit, struct buf *out)
{
    return room_encode_info_for(e, room, limit, NULL, NULL, out);
}

/* {"user":"u","joinedAt":T,"meta":M} as published: the HTTP API's member. */
static void append_member(struct buf *b, const struct member *m)
{
    buf_append_str(b, "{\"user\":");
    json_append_cstr(b, m->user);
    buf_append_str(b, ",\"joinedAt\":");
    json_append_u64(b, m->joined_at); /* unchanged while published */
    buf_append_str(b, ",\"meta\":");
    buf_append(b, m->pub_meta->data, m->pub_meta->len);
    buf_append_str(b, "}");
}

int room_encode_info_for(const struct room_engine *e, const char *room, size_t limit,
                         room_hide_fn *hide, void *ctx, struct buf *out)
{
    const struct room *r;
    size_t shown, n = 0;

    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    r = room_find(e, room);
    shown = shown_count(r, hide, ctx);
    /* A room whose members are all hidden reads exactly like no room. */
    buf_append_str(out, "{\"room\":");
    json_append_cstr(out, room);
    buf_printf(out, ",\"epoch\":%llu,\"seq\":%llu,\"mode\":\"%s\",\"count\":%zu,\"members\":[",
               shown ? (unsigned long long)r->epoch : 0ull,
               shown ? (unsigned long long)r->seq : 0ull,
               room_mode_name(shown ? r->mode : ROOM_MODE_NORMAL), shown);
    for (const struct list *pos = shown ? r->order.next : NULL;
         pos && pos != &r->order && n < limit; pos = pos->next) {
        const struct member *m = container_of(pos, struct member, order);
        if (!listed(m, hide, ctx))
            continue;
        if (n++)
            buf_append_str(out, ",");
        append_member(out, m);
    }
    buf_append_str(out, "]}");
    return 0;
}

void room_admin_list(const struct room_engine *e, struct buf *out, bool *first)
{
    struct hmap_node *n;
    size_t it;

    for (n = hmap_first(&e->rooms, &it); n; n = hmap_next(&e->rooms, n, &it)) {
        const struct room *r = container_of(n, struct room, node);
        if (r->present == 0)
            continue;
        buf_append_str(out, *first ? "{\"room\":" : ",{\"room\":");
        json_append_cstr(out, r->id);
        buf_printf(out, ",\"members\":%zu,\"visible\":%zu}", r->present, r->published);
        *first = false;
    }
}

int room_admin_members(const struct room_engine *e, const char *room, struct buf *out)
{
    const struct room *r;
    const struct list *pos;
    const char *sep = "";

    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    r = room_find(e, room);
    buf_append_str(out, "{\"room\":");
    json_append_cstr(out, room);
    buf_append_str(out, ",\"members\":[");
    for (pos = r ? r->order.next : NULL; r && pos != &r->order; pos = pos->next) {
        const struct member *m = container_of(pos, struct member, order);
        if (m->nsessions == 0)
            continue;
        buf_printf(out, "%s{\"user\":", sep);
        json_append_cstr(out, m->user);
        buf_printf(out, ",\"sessions\":%u,\"visible\":%s}", (unsigned)m->nsessions,
                   m->visible ? "true" : "false");
        sep = ",";
    }
    buf_append_str(out, "]}");
    return 0;
}

void room_get_stats(const struct room_engine *e, struct room_stats *out)
{
    *out = e->stats;
}

/* ---- public: pure helpers ---- */

bool room_id_valid(const char *id)
{
    return room__id_ok(id, ROOM_ID_MAX);
}

const char *room_mode_name(enum room_mode m)
{
    switch (m) {
    case ROOM_MODE_NORMAL:
        return "normal";
    case ROOM_MODE_INTERVAL:
        return "interval";
    }
    return "?";
}

const char *room_strerror(int err)
{
    switch (err) {
    case ROOM_E_ROOM_ID:
        return "invalid room id";
    case ROOM_E_USER_ID:
        return "invalid user id";
    case ROOM_E_SESSION_ID:
        return "invalid session id";
    case ROOM_E_META_SIZE:
        return "metadata too large";
    case ROOM_E_META_JSON:
        return "metadata is not valid JSON";
    case ROOM_E_FULL:
        return "room is full";
    case ROOM_E_SESSIONS:
        return "too many sessions in the room";
    case ROOM_E_JOINED:
        return "session already in the room";
    case ROOM_E_NO_ROOM:
        return "no such room";
    case ROOM_E_NOT_MEMBER:
        return "not a member of the room";
    case ROOM_E_NO_SESSION:
        return "session not in the room";
    case ROOM_E_INVISIBLE:
        return "invisible members cannot publish";
    case ROOM_E_KIND:
        return "invalid ephemeral kind";
    case ROOM_E_KINDS:
        return "too many ephemeral kinds";
    case ROOM_E_DATA_SIZE:
        return "ephemeral data too large";
    case ROOM_E_DATA_JSON:
        return "ephemeral data is not valid JSON";
    case ROOM_E_CONFIG:
        return "invalid room configuration";
    }
    return "unknown error";
}
