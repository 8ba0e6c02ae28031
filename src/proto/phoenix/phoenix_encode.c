/* SPDX-License-Identifier: MIT */
/*
 * phoenix_encode.c - engine events as Phoenix Channels frames
 * (phoenix_encode.h): presence_state and presence_diff from the room
 * core's values, broadcasts, and the records of errors and acks.
 */
#include "phoenix_encode.h"
#include "phoenix_filter.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "frame.h"
#include "json.h"
#include "phoenix.h"
#include "room.h"
#include "ws.h"

#define EV_STATE "presence_state"
#define EV_DIFF  "presence_diff"
#define EV_CAST  "broadcast"

#define NO_DIFF "{\"joins\":{},\"leaves\":{}}"

/* ---- metas ---- */

/* cJSON reports out-of-memory as NULL; the project aborts on OOM. */
static void *must(void *p)
{
    if (p == NULL)
        abort();
    return p;
}

/* The phx_ref of a member without per-connection metas: FNV-1a-64 of its
 * user, joinedAt and metadata, so that other metadata is another ref. */
static void derived_ref(const char *user, uint64_t joined_at, const char *meta, size_t n,
                        char out[24])
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    const unsigned char *p = (const unsigned char *)user;

    for (; *p; p++)
        h = (h ^ *p) * UINT64_C(0x100000001b3);
    for (unsigned i = 0; i < 8; i++)
        h = (h ^ ((joined_at >> (8 * i)) & 0xffu)) * UINT64_C(0x100000001b3);
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)meta[i]) * UINT64_C(0x100000001b3);
    snprintf(out, 24, "n%016" PRIx64, h);
}

/* Appends the one meta of a member that has no per-connection metas to
 * items, and its phx_ref to refs, each NUL-terminated. */
static void native_item(const struct room_entry *x, struct buf *items, struct buf *refs)
{
    char ref[24];

    derived_ref(x->user, x->joined_at, x->meta, x->meta_len, ref);
    buf_append_str(items, "{\"phx_ref\":\"");
    buf_append_str(items, ref);
    buf_append_str(items, "\"");
    if (x->meta_len > 2 && x->meta[0] == '{') { /* an object's members after the ref */
        buf_append_str(items, ",");
        buf_append(items, x->meta + 1, x->meta_len - 1);
    } else if (x->meta_len == 2 && x->meta[0] == '{') {
        buf_append_str(items, "}");
    } else {
        buf_append_str(items, ",\"meta\":");
        buf_append(items, x->meta, x->meta_len);
        buf_append_str(items, "}");
    }
    buf_append(items, "", 1);
    buf_append(refs, ref, strlen(ref) + 1);
}

/* Appends each meta of x (see "Metas") to items and its phx_ref to refs,
 * each NUL-terminated (compact JSON holds no NUL byte); returns how many. */
static size_t meta_items(const struct room_entry *x, struct buf *items, struct buf *refs)
{
    cJSON *v, *sv, *item;
    size_t count = 0;

    if (x->meta_len == 0 || x->meta[0] != '{' ||
        !memmem(x->meta, x->meta_len, "\"" ROOM_SESSION_VALUES "\"", 8)) {
        native_item(x, items, refs);
        return 1;
    }
    v = must(cJSON_ParseWithLength(x->meta, x->meta_len)); /* stored metadata is valid JSON */
    sv = cJSON_GetObjectItemCaseSensitive(v, ROOM_SESSION_VALUES);
    if (!cJSON_IsObject(sv))
        sv = NULL;
    cJSON_ArrayForEach(item, sv)
    {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(item, "phx_ref");
        char *text;

        if (!cJSON_IsObject(item) || !cJSON_IsString(r))
            continue; /* not one of this adapter's metas */
        text = must(cJSON_PrintUnformatted(item));
        buf_append(items, text, strlen(text) + 1);
        cJSON_free(text);
        buf_append(refs, r->valuestring, strlen(r->valuestring) + 1);
        count++;
    }
    cJSON_Delete(v);
    return count;
}

/* True when the NUL-separated list refs has ref. */
static bool refs_have(const struct buf *refs, const char *ref)
{
    for (size_t i = 0; i < refs->len; i += strlen(refs->data + i) + 1)
        if (strcmp(refs->data + i, ref) == 0)
            return true;
    return false;
}

/* Appends to b, comma-separated, x's metas whose phx_ref is not in skip
 * (NULL: none skipped); returns how many. */
static size_t append_metas(struct buf *b, const struct room_entry *x, const struct buf *skip)
{
    struct buf items = {0}, refs = {0};
    size_t count = 0, k = meta_items(x, &items, &refs), i = 0, r = 0;

    for (size_t n = 0; n < k; n++) {
        if (!skip || !refs_have(skip, refs.data + r)) {
            if (count++)
                buf_append_str(b, ",");
            buf_append_str(b, items.data + i);
        }
        i += strlen(items.data + i) + 1;
        r += strlen(refs.data + r) + 1;
    }
    buf_release(&items);
    buf_release(&refs);
    return count;
}

size_t phx_metas_refs(const struct room_entry *x, struct buf *refs)
{
    struct buf items = {0};
    size_t k = meta_items(x, &items, refs);

    buf_release(&items);
    return k;
}

/* ---- helpers ---- */

static struct payload *push_frame(enum phx_vsn vsn, const char *room, const char *event,
                                  struct buf *payload, struct buf *scratch)
{
    scratch->len = 0;
    phx_encode_push(scratch, vsn, NULL, room, event, payload->data, payload->len);
    return ws_frame_payload(WS_OP_TEXT, scratch->data, scratch->len);
}

/* "key":{"metas":[...]} of an entry, preceded by a comma unless *first. */
static void append_presence(struct buf *b, const struct room_entry *x, bool *first)
{
    if (!*first)
        buf_append_str(b, ",");
    *first = false;
    json_append_cstr(b, x->user);
    buf_append_str(b, ":{\"metas\":[");
    append_metas(b, x, NULL);
    buf_append_str(b, "]}");
}

/* A patch's joins (from = the new entry, against = the old: the metas
 * that are new) or leaves (from = old, against = new: those that went)
 * for one member, as "key":{"metas":[...]}, unless there are none. */
static void append_changed(struct buf *b, const struct room_entry *from,
                           const struct room_entry *against, bool *first)
{
    struct buf metas = {0}, refs = {0};

    phx_metas_refs(against, &refs);
    if (append_metas(&metas, from, &refs) > 0) {
        if (!*first)
            buf_append_str(b, ",");
        *first = false;
        json_append_cstr(b, from->user);
        buf_append_str(b, ":{\"metas\":[");
        buf_append(b, metas.data, metas.len);
        buf_append_str(b, "]}");
    }
    buf_release(&metas);
    buf_release(&refs);
}

/* ---- the room events ---- */

/* {"joins":{...},"leaves":{...}}: see phoenix_encode.h. A leave without
 * its previous entry (a delta encoded again from the resume ring, which
 * a Phoenix socket never asks for) lists no metas. */
static void diff_payload(struct buf *in, const struct room_delta_view *v)
{
    bool first = true;

    buf_append_str(in, "{\"joins\":{");
    for (size_t i = 0; i < v->njoins; i++)
        append_presence(in, &v->joins[i], &first);
    for (size_t i = 0; i < v->npatches && v->patches_prev; i++)
        append_changed(in, &v->patches[i], &v->patches_prev[i], &first);
    buf_append_str(in, "},\"leaves\":{");
    first = true;
    for (size_t i = 0; i < v->nleaves; i++) {
        if (v->leaves_prev) {
            append_presence(in, &v->leaves_prev[i], &first);
            continue;
        }
        if (!first)
            buf_append_str(in, ",");
        first = false;
        json_append_cstr(in, v->leaves[i]);
        buf_append_str(in, ":{\"metas\":[]}");
    }
    for (size_t i = 0; i < v->npatches && v->patches_prev; i++)
        append_changed(in, &v->patches_prev[i], &v->patches[i], &first);
    buf_append_str(in, "}}");
}

static struct payload *enc_delta(enum phx_vsn vsn, const struct room_delta_view *v,
                                 struct buf *scratch)
{
    struct buf in = {0};
    struct payload *p;

    diff_payload(&in, v);
    if (in.len == strlen(NO_DIFF) && memcmp(in.data, NO_DIFF, in.len) == 0) {
        buf_release(&in);
        return NULL; /* only what Phoenix does not show changed */
    }
    p = push_frame(vsn, v->head.room, EV_DIFF, &in, scratch);
    buf_release(&in);
    return p;
}

static struct payload *enc_snapshot(enum phx_vsn vsn, const struct room_snapshot_view *v,
                                    struct buf *scratch)
{
    struct buf in = {0};
    struct payload *p;
    bool first = true;

    buf_append_str(&in, "{");
    for (size_t i = 0; i < v->nmembers; i++)
        append_presence(&in, &v->members[i], &first);
    buf_append_str(&in, "}");
    p = push_frame(vsn, v->head.room, EV_STATE, &in, scratch);
    buf_release(&in);
    return p;
}

/* Supabase's broadcast envelope, for every sender's event; a binary
 * payload is its base64 string, and the envelope ends with
 * PHX_CAST_BINARY_TAIL (phoenix_encode.h). */
static struct payload *enc_broadcast(enum phx_vsn vsn, const struct room_broadcast_event *ev)
{
    struct buf in = {0}, b = {0};
    struct payload *p;

    buf_append_str(&in, "{\"type\":\"broadcast\",\"event\":");
    json_append_cstr(&in, ev->event);
    buf_append_str(&in, ",\"payload\":");
    if (room_broadcast_is_binary(ev)) {
        json_append_cstr(&in, ev->data + 1); /* base64 needs no escapes */
        buf_append_str(&in, PHX_CAST_BINARY_TAIL);
    } else {
        buf_append_str(&in, ev->data[0] ? ev->data : "null");
        buf_append_str(&in, "}");
    }
    p = push_frame(vsn, ev->room, EV_CAST, &in, &b);
    buf_release(&in);
    buf_release(&b);
    return p;
}

/* ---- records ---- */

static struct payload *record(char kind, const char *ref, const char *code, const char *message)
{
    struct buf b = {0};
    struct payload *p;

    buf_append(&b, "\x01", 1);
    buf_append(&b, &kind, 1);
    buf_append_str(&b, ref ? ref : "");
    if (kind == 'E') {
        buf_append(&b, "", 1);
        buf_append_str(&b, code ? code : "");
        buf_append(&b, "", 1);
        buf_append_str(&b, message ? message : "");
    }
    buf_append(&b, "", 1);
    p = payload_from(b.data, b.len);
    buf_release(&b);
    return p;
}

bool phx_record_read(const struct payload *f, struct phx_record *r)
{
    const char *p = f->data;

    if (f->len < 3 || p[0] != PHX_RECORD || p[f->len - 1] != '\0')
        return false;
    r->kind = p[1];
    r->ref = p + 2;
    r->code = r->message = "";
    if (r->kind == 'E') {
        r->code = r->ref + strlen(r->ref) + 1;
        if (r->code >= p + f->len)
            return false;
        r->message = r->code + strlen(r->code) + 1;
        if (r->message >= p + f->len)
            return false;
    }
    return true;
}

static struct payload *enc_error(const struct error_event *ev)
{
    return record('E', ev->ref, ev->code, ev->message);
}

static struct payload *enc_ack(const char *ref)
{
    return record('A', ref, NULL, NULL);
}

/* ---- what a Phoenix socket does not get ---- */

static struct payload *enc_welcome(const struct welcome_event *ev)
{
    (void)ev;
    return NULL;
}

static struct payload *enc_ended(const struct ended_event *ev)
{
    (void)ev;
    return NULL; /* the close follows; phoenix.js rejoins after reconnecting */
}

static struct payload *enc_ephemeral(const struct room_ephemeral_view *v, struct buf *scratch)
{
    (void)v;
    (void)scratch;
    return NULL;
}

/* ---- the two tables ---- */

static struct payload *enc_delta_v2(const struct room_delta_view *v, struct buf *scratch)
{
    return enc_delta(PHX_VSN_2, v, scratch);
}

static struct payload *enc_delta_v1(const struct room_delta_view *v, struct buf *scratch)
{
    return enc_delta(PHX_VSN_1, v, scratch);
}

static struct payload *enc_snapshot_v2(const struct room_snapshot_view *v, struct buf *scratch)
{
    return enc_snapshot(PHX_VSN_2, v, scratch);
}

static struct payload *enc_snapshot_v1(const struct room_snapshot_view *v, struct buf *scratch)
{
    return enc_snapshot(PHX_VSN_1, v, scratch);
}

static struct payload *filter_v2(struct payload *f, bool (*blocked)(void *ctx, const char *user),
                                 void *ctx)
{
    return phx_filter_blocked(PHX_VSN_2, f, blocked, ctx);
}

static struct payload *filter_v1(struct payload *f, bool (*blocked)(void *ctx, const char *user),
                                 void *ctx)
{
    return phx_filter_blocked(PHX_VSN_1, f, blocked, ctx);
}

static struct payload *enc_broadcast_v2(const struct room_broadcast_event *ev)
{
    return enc_broadcast(PHX_VSN_2, ev);
}

static struct payload *enc_broadcast_v1(const struct room_broadcast_event *ev)
{
    return enc_broadcast(PHX_VSN_1, ev);
}

/* Phoenix clients reconnect after any close, whatever its code, so the
 * engine's codes (docs/protocol.md) stay as they are: they are what the
 * logs and a developer's network tab show. */
static unsigned close_code(unsigned native, int end)
{
    (void)end;
    return native;
}

#define PHX_TABLE(suffix)                                                                          \
    {                                                                                              \
        .name = "phoenix-" #suffix, .metrics_proto = METRICS_PROTO_PHOENIX, .own_auth = false,     \
        .encode_error = enc_error, .encode_ack = enc_ack, .encode_welcome = enc_welcome,           \
        .encode_ended = enc_ended, .encode_token_expired = adapter_no_frame,                       \
        .encode_presence = adapter_no_presence, /* room_joined: the reply goes with the            \
                                                   presence_state (phoenix.c) */                   \
            .encode_privacy = adapter_no_privacy, .encode_room_joined = adapter_no_room_joined,    \
        .encode_room_delta = enc_delta_##suffix, .encode_room_snapshot = enc_snapshot_##suffix,    \
        .encode_room_ephemeral = enc_ephemeral, .encode_room_broadcast = enc_broadcast_##suffix,   \
        .send = phoenix__send, .send_room = phoenix__send_room, .on_started = phoenix__on_started, \
        .close_code = close_code, .close = phoenix__close, .release = phoenix__release,            \
        .conn_of = phoenix__conn_of, .filter_blocked = filter_##suffix,                            \
    }

const struct proto_adapter phoenix_adapter_v2 = PHX_TABLE(v2);
const struct proto_adapter phoenix_adapter_v1 = PHX_TABLE(v1);
