/* SPDX-License-Identifier: MIT */
/*
 * room_info.c - the reads of room.h that do not publish anything: a
 * room's counters (room_get_info), one member's current state
 * (room_get_member), the HTTP API's info object (room_encode_info*, the
 * published state as a reader who hides some members sees it), the admin
 * lists (room_admin_list, room_admin_top, room_admin_members: current state, hidden
 * members included) and the engine's stats. The info object is the one
 * JSON of the room module not written by a codec.
 */
#include "room_internal.h"

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "json.h"
#include "list.h"

int room_get_info(const struct room_engine *e, const char *room, struct room_info *out)
{
    const struct room *r;

    *out = (struct room_info){.mode = ROOM_MODE_NORMAL};
    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    r = room__find(e, room);
    if (r == NULL)
        return ROOM_E_NO_ROOM;
    out->epoch = r->epoch;
    out->seq = r->seq;
    out->mode = r->mode;
    out->count = r->published;
    out->digest = r->digest;
    out->members = r->present;
    out->pending = r->ndirty > 0;
    out->flushed_at = r->flushed_at;
    return 0;
}

/* m as a reader sees it: borrowed from m, valid until the room changes. */
static struct room_member_view member_view(const struct member *m)
{
    return (struct room_member_view){
        .user = m->user,
        .meta = m->meta->data,
        .meta_len = m->meta->len,
        .joined_at = m->joined_at,
        .session_ids = (const char *const *)room__sessions(m),
        .nsessions = m->nsessions,
        .visible = m->visible,
        .published = m->pub,
    };
}

int room_get_member(const struct room_engine *e, const char *room, const char *user,
                    struct room_member_view *out)
{
    struct room *r;
    struct member *m;
    int rc = room__find_member(e, room, user, &r, &m);

    if (rc)
        return rc;
    *out = member_view(m);
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
    struct room_head h;
    size_t n = 0;

    if (room_view_head(e, room, hide, ctx, &h) != 0)
        return ROOM_E_ROOM_ID;
    r = room__find(e, room);
    /* A room whose members are all hidden reads exactly like no room. */
    buf_append_str(out, "{\"room\":");
    json_append_cstr(out, room);
    buf_printf(out,
               ",\"epoch\":%llu,\"seq\":%llu,\"mode\":\"%s\",\"count\":%zu,\"digest\":\"%016llx\""
               ",\"members\":[",
               (unsigned long long)h.epoch, (unsigned long long)h.seq, room_mode_name(h.mode),
               h.count, (unsigned long long)h.digest);
    for (const struct list *pos = h.count ? r->order.next : NULL;
         pos && pos != &r->order && n < limit; pos = pos->next) {
        const struct member *m = container_of(pos, struct member, order);
        if (!room__listed(m, hide, ctx))
            continue;
        if (n++)
            buf_append_str(out, ",");
        append_member(out, m);
    }
    buf_append_str(out, "]}");
    return 0;
}

static size_t listed_sessions(const struct room *r, room_hide_fn *hide, void *ctx)
{
    size_t n = 0;

    for (const struct list *pos = r->order.next; pos != &r->order; pos = pos->next) {
        const struct member *m = container_of(pos, struct member, order);
        if (room__listed(m, hide, ctx))
            n += m->nsessions;
    }
    return n;
}

size_t room_listed_sessions(const struct room_engine *e, const char *room, room_hide_fn *hide,
                            void *ctx)
{
    const struct room *r;

    if (!room__id_ok(room, ROOM_ID_MAX) || !(r = room__find(e, room)))
        return 0;
    return listed_sessions(r, hide, ctx);
}

void room_list_published(const struct room_engine *e, room_list_fn *fn, void *ctx)
{
    struct hmap_node *n;
    size_t it;

    for (n = hmap_first(&e->rooms, &it); n; n = hmap_next(&e->rooms, n, &it)) {
        const struct room *r = container_of(n, struct room, node);
        if (r->published > 0)
            fn(ctx, r->id, r->published, listed_sessions(r, NULL, NULL));
    }
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

/* Keeps top[0..*k) sorted by members, most first, at most n: r goes in
 * at its place when it beats the last (or there is room). */
static void top_insert(const struct room **top, size_t *k, size_t n, const struct room *r)
{
    size_t i;

    if (*k == n && top[n - 1]->present >= r->present)
        return;
    i = *k < n ? (*k)++ : n - 1;
    while (i > 0 && top[i - 1]->present < r->present) {
        top[i] = top[i - 1];
        i--;
    }
    top[i] = r;
}

void room_admin_top(const struct room_engine *e, size_t n, struct buf *out)
{
    const struct room *top[ROOM_ADMIN_TOP_MAX];
    struct hmap_node *node;
    size_t it, k = 0;

    n = n < 1 ? 1 : n > ROOM_ADMIN_TOP_MAX ? ROOM_ADMIN_TOP_MAX : n;
    for (node = hmap_first(&e->rooms, &it); node; node = hmap_next(&e->rooms, node, &it)) {
        const struct room *r = container_of(node, struct room, node);
        if (r->present > 0)
            top_insert(top, &k, n, r);
    }
    for (size_t i = 0; i < k; i++) {
        buf_printf(out, "%zu {\"room\":", top[i]->present);
        json_append_cstr(out, top[i]->id);
        buf_printf(out, ",\"members\":%zu,\"visible\":%zu}\n", top[i]->present, top[i]->published);
    }
}

int room_admin_members(const struct room_engine *e, const char *room, struct buf *out)
{
    const struct room *r;
    const struct list *pos;
    const char *sep = "";

    if (!room__id_ok(room, ROOM_ID_MAX))
        return ROOM_E_ROOM_ID;
    r = room__find(e, room);
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

void room_each_member(const struct room_engine *e, room_member_fn *fn, void *ctx)
{
    struct hmap_node *n;
    size_t it;

    for (n = hmap_first(&e->rooms, &it); n; n = hmap_next(&e->rooms, n, &it)) {
        const struct room *r = container_of(n, struct room, node);

        for (const struct list *pos = r->order.next; pos != &r->order; pos = pos->next) {
            const struct member *m = container_of(pos, struct member, order);
            struct room_member_view v = member_view(m);

            if (m->nsessions > 0)
                fn(ctx, r->id, &v);
        }
    }
}

void room_get_stats(const struct room_engine *e, struct room_stats *out)
{
    *out = e->stats;
}
