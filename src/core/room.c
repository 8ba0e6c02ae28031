/* SPDX-License-Identifier: MIT */
/*
 * room.c - room presence of one partition, its current state: rooms and
 * members in intrusive hash tables, their sessions and metadata (JSON
 * input checks, RFC 7386 merge patch, shared metadata values), the
 * engine's lifetime and configuration, and the membership calls of
 * room.h (join, leave, kick, patch, set_meta, set_visible). A change marks
 * its member dirty and arms the room's flush timer for the end of the
 * batch window (touch()).
 *
 * Every member record keeps two states: the current one, changed by the
 * calls here, and the published one, which is what the last delta told
 * subscribers. Flushing a room turns the difference into one delta: that,
 * the message values and the snapshot cache are room_publish.c; the
 * resume ring is room_ring.c; the reads and admin lists room_info.c; the
 * ephemeral lane room_ephemeral.c. None of them knows connections,
 * subscriptions, frames or any client protocol: a message is a value
 * (room.h) that the configured codec encodes, and its payload goes to the
 * callbacks.
 */
#include "room_internal.h"

#include <assert.h>
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "list.h"
#include "ns.h"
#include "pool.h"
#include "utf8.h"

#define EPOCH_MASK ((UINT64_C(1) << 53) - 1) /* epochs stay exact as JSON numbers */

/* ---- ids, JSON input ---- */

static bool id_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~' || c == ':' || c == '@';
}

/* Whether s is 1..max bytes of the id alphabet from offset p on. */
static bool id_from(const char *s, size_t p, size_t max)
{
    size_t n;

    for (n = p; s[n]; n++)
        if (n >= max || !id_char((unsigned char)s[n]))
            return false;
    return n > p;
}

bool room__id_ok(const char *s, size_t max)
{
    int p;

    return s != NULL && (p = ns_prefix_len(s)) >= 0 && id_from(s, (size_t)p, max);
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

/* ---- per-session values (room.h, "Members") ---- */

/* True when the compact JSON (p, n) may hold per-session values: a cheap
 * test that spares the parse of every other member's metadata. */
static bool has_session_values(const char *p, size_t n)
{
    return n > 0 && p[0] == '{' && memmem(p, n, "\"" ROOM_SESSION_VALUES "\"", 8) != NULL;
}

/* The per-session values object of v, or NULL. */
static cJSON *session_values(cJSON *v)
{
    cJSON *sv = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, ROOM_SESSION_VALUES) : NULL;

    return cJSON_IsObject(sv) ? sv : NULL;
}

/* A join's new metadata s (compact, taken over) with the values of the
 * member's other sessions (old, its current metadata) that s does not
 * name. Returns the compact result, or NULL with *err = ROOM_E_META_SIZE
 * when it exceeds max. */
static char *session_values_merge(const struct payload *old, char *s, size_t max, int *err)
{
    cJSON *nv, *ov, *nsv, *osv, *item;
    char *out;

    if (!has_session_values(s, strlen(s)) || !has_session_values(old->data, old->len))
        return s;
    nv = must(cJSON_Parse(s));
    ov = must(cJSON_ParseWithLength(old->data, old->len));
    nsv = session_values(nv);
    osv = session_values(ov);
    if (!nsv || !osv) {
        cJSON_Delete(nv);
        cJSON_Delete(ov);
        return s;
    }
    cJSON_ArrayForEach(item, osv)
    {
        if (!cJSON_GetObjectItemCaseSensitive(nsv, item->string))
            cJSON_AddItemToObject(nsv, item->string, must(cJSON_Duplicate(item, true)));
    }
    out = must(cJSON_PrintUnformatted(nv));
    cJSON_Delete(nv);
    cJSON_Delete(ov);
    free(s);
    if (strlen(out) > max) {
        free(out);
        *err = ROOM_E_META_SIZE;
        return NULL;
    }
    return out;
}

/* The metadata of m without session's value, compact (free() it), or NULL
 * when it has none to drop. */
static char *session_value_drop(const struct member *m, const char *session)
{
    cJSON *v, *sv;
    char *out = NULL;

    if (!has_session_values(m->meta->data, m->meta->len))
        return NULL;
    v = must(cJSON_ParseWithLength(m->meta->data, m->meta->len));
    sv = session_values(v);
    if (sv && cJSON_GetObjectItemCaseSensitive(sv, session)) {
        cJSON_DeleteItemFromObjectCaseSensitive(sv, session);
        out = must(cJSON_PrintUnformatted(v));
    }
    cJSON_Delete(v);
    return out;
}

/* ---- lookups ---- */

struct room *room__find(const struct room_engine *e, const char *id)
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
char *const *room__sessions(const struct member *m)
{
    return m->nsessions >= 2 ? m->sid.many : &m->sid.one;
}

/* Index of session in m's sessions, or -1. */
static long session_index(const struct member *m, const char *session)
{
    char *const *v = room__sessions(m);

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
    r = room__find(e, room);
    if (r == NULL)
        return ROOM_E_NO_ROOM;
    m = member_find(r, user);
    if (m == NULL || m->nsessions == 0)
        return ROOM_E_NOT_MEMBER;
    *rp = r;
    *out = m;
    return 0;
}

/* ---- rooms and members ---- */

/* splitmix64: spreads consecutive counters over 53 bits. */
uint64_t room__next_epoch(struct room_engine *e)
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
    r->epoch = room__next_epoch(e);
    r->mode = ROOM_MODE_NORMAL;
    list_init(&r->order);
    wheel_timer_init(&r->flush_timer, room__on_flush_timer);
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
void room__member_free(struct room *r, struct member *m)
{
    char *const *v = room__sessions(m);

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
        room__member_free(r, container_of(pos, struct member, order));
    }
    hmap_release(&r->members);
    pool_free(r->dirty);
    hmap_remove(&e->rooms, &r->node);
    wheel_del(&r->flush_timer);
    room__ring_release(&r->ring);
    room__vlog_release(&r->vlog);
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
    room__hiders_release(e);
    buf_release(&e->vlog_ids);
    buf_release(&e->vlog_next);
    free(e->ents[0]);
    free(e->ents[1]);
    free(e->prev_ents[0]);
    free(e->prev_ents[1]);
    free(e->prev_refs);
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

/* How many of r's members with a session and visible are among the n
 * users in unseen (a set: the joiner must not see them). */
static size_t count_unseen(const struct room *r, const char *const *unseen, size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++) {
        const struct member *m = member_find(r, unseen[i]);
        k += m && m->nsessions > 0 && m->visible;
    }
    return k;
}

/* The checks of room_join() that need the room; 0 when the join may go.
 * Full counts the members the joiner can see, so that room_full says
 * nothing about invisible ones or those in unseen; twice the cap bounds
 * them all. */
static int join_check(const struct room_engine *e, const struct room *r, const struct member *m,
                      const char *session, const char *const *unseen, size_t nunseen)
{
    size_t cap = e->cfg.max_members;

    if (m && session_index(m, session) >= 0)
        return ROOM_E_JOINED;
    if (m && m->nsessions >= e->cfg.max_sessions)
        return ROOM_E_SESSIONS;
    if ((m == NULL || m->nsessions == 0) && r &&
        (r->present >= 2 * cap ||
         (r->present - r->hidden >= cap &&
          r->present - r->hidden - count_unseen(r, unseen, nunseen) >= cap)))
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
    return room_join_for(e, room, user, session, meta, meta_len, now, NULL, 0);
}

int room_join_for(struct room_engine *e, const char *room, const char *user, const char *session,
                  const char *meta, size_t meta_len, uint64_t now, const char *const *unseen,
                  size_t nunseen)
{
    struct payload *pm = NULL;
    struct room *r;
    struct member *m;
    char *s = NULL;
    bool changed;
    int rc;

    rc = check_ids(room, user, session);
    if (rc)
        return rc;
    if (meta) {
        s = room__compact_json(meta, meta_len, e->cfg.max_meta_bytes, ROOM_E_META_SIZE,
                               ROOM_E_META_JSON, &rc);
        if (s == NULL)
            return rc;
    }
    r = room__find(e, room);
    m = r ? member_find(r, user) : NULL;
    rc = join_check(e, r, m, session, unseen, nunseen);
    if (rc) {
        free(s);
        return rc;
    }
    if (s && m && m->nsessions > 0 &&
        !(s = session_values_merge(m->meta, s, e->cfg.max_meta_bytes, &rc)))
        return rc;
    if (s)
        pm = meta_take(e, s);
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
    if (m->nsessions > 1) { /* the member stays: its value for session goes */
        char *rest = session_value_drop(m, session);
        if (rest && meta_replace(m, meta_take(e, rest)))
            touch(r, m, now);
    }
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

/* ---- public: pure helpers ---- */

bool room_id_valid(const char *id)
{
    return id != NULL && id_from(id, 0, ROOM_ID_MAX); /* NS_SEP is no id_char */
}

bool room_ns_id_valid(const char *id)
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
