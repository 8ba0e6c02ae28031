/* SPDX-License-Identifier: MIT */
/*
 * test_room.c - the room presence core against a fake clock.
 *
 * The engine never reads a clock: every test drives `now` and runs the
 * wheel itself (advance()). Both callbacks record what they get (a
 * reference to each payload, so resume can be checked for byte-identical,
 * pointer-identical payloads), and every recorded message is parsed back
 * with cJSON. The core has no wire format of its own: the test codec
 * below writes each message value as the JSON of room.h's first version
 * (the native protocol's, which test_native_encode.c checks on the real
 * adapter), so the tests read the values through it. The on_delta recorder also checks, for every
 * test, that a room's messages come with consecutive sequence numbers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cJSON.h>

#include "buf.h"
#include "json.h"
#include "room.h"
#include "util.h"
#include "wheel.h"

#define T0 1000000u /* the fake clock's start */

struct fx;
typedef void fx_hook(struct fx *f, const struct room_event *ev);

/* One recorded emission. */
struct rec {
    struct payload *p; /* a reference */
    const char *json;
    size_t json_len;
    uint64_t seq;
    uint64_t epoch;
    uint64_t at; /* the fake now when it was emitted */
    char room[ROOM_ID_MAX + 1];
    char user[ROOM_ID_MAX + 1];
    bool droppable;
    unsigned order; /* emission order across both callbacks */
};

/* ---- the test codec: each value as JSON, in a plain payload ---- */

static void put_entry(struct buf *b, const struct room_entry *x)
{
    buf_append_str(b, "{\"user\":");
    json_append_cstr(b, x->user);
    buf_printf(b, ",\"joinedAt\":%llu,\"meta\":", (unsigned long long)x->joined_at);
    buf_append(b, x->meta, x->meta_len);
    buf_append_str(b, "}");
}

static void put_entries(struct buf *b, const char *key, const struct room_entry *x, size_t n)
{
    buf_printf(b, ",\"%s\":[", key);
    for (size_t i = 0; i < n; i++) {
        if (i)
            buf_append_str(b, ",");
        put_entry(b, &x[i]);
    }
    buf_append_str(b, "]");
}

static void put_head(struct buf *b, const char *type, const struct room_head *h)
{
    buf_printf(b, "{\"type\":\"%s\",\"room\":", type);
    json_append_cstr(b, h->room);
    buf_printf(b,
               ",\"epoch\":%llu,\"seq\":%llu,\"mode\":\"%s\",\"count\":%zu,\"digest\":\"%016llx\"",
               (unsigned long long)h->epoch, (unsigned long long)h->seq, room_mode_name(h->mode),
               h->count, (unsigned long long)h->digest);
}

/* Whether the test codec writes a delta's previous entries too (the
 * tests of per-session values set it; resume tests compare live deltas
 * with re-encoded ones, which have none). */
static bool tc_show_prev;

static struct payload *tc_delta(const struct room_delta_view *v, struct buf *b)
{
    b->len = 0;
    put_head(b, "room_delta", &v->head);
    put_entries(b, "joins", v->joins, v->njoins);
    buf_append_str(b, ",\"leaves\":[");
    for (size_t i = 0; i < v->nleaves; i++) {
        if (i)
            buf_append_str(b, ",");
        json_append_cstr(b, v->leaves[i]);
    }
    buf_append_str(b, "]");
    put_entries(b, "patches", v->patches, v->npatches);
    if (tc_show_prev && v->leaves_prev)
        put_entries(b, "leavesPrev", v->leaves_prev, v->nleaves);
    if (tc_show_prev && v->patches_prev)
        put_entries(b, "patchesPrev", v->patches_prev, v->npatches);
    if (v->head.mode == ROOM_MODE_INTERVAL)
        buf_printf(b, ",\"joinCount\":%zu,\"leaveCount\":%zu,\"patchCount\":%zu", v->join_total,
                   v->leave_total, v->patch_total);
    buf_append_str(b, "}");
    return payload_from(b->data, b->len);
}

static struct payload *tc_snapshot(const struct room_snapshot_view *v, struct buf *b)
{
    b->len = 0;
    put_head(b, "room_snapshot", &v->head);
    put_entries(b, "members", v->members, v->nmembers);
    buf_append_str(b, "}");
    return payload_from(b->data, b->len);
}

static struct payload *tc_ephemeral(const struct room_ephemeral_view *v, struct buf *b)
{
    b->len = 0;
    buf_append_str(b, "{\"type\":\"ephemeral\",\"room\":");
    json_append_cstr(b, v->room);
    buf_append_str(b, ",\"user\":");
    json_append_cstr(b, v->user);
    buf_append_str(b, ",\"kind\":");
    json_append_cstr(b, v->kind);
    buf_append_str(b, ",\"data\":");
    buf_append(b, v->data, v->data_len);
    buf_append_str(b, "}");
    return payload_from(b->data, b->len);
}

static const struct room_codec test_codec = {
    .encode_delta = tc_delta,
    .encode_snapshot = tc_snapshot,
    .encode_ephemeral = tc_ephemeral,
};

/* A codec whose payloads carry a 4-byte header, like a WebSocket frame:
 * the core must treat payloads as opaque. */
static struct payload *with_hdr(struct payload *json)
{
    struct payload *p = payload_new(json->len + 4);

    payload_append(p, "HDR:", 4);
    payload_append(p, json->data, json->len);
    payload_unref(json);
    return p;
}

static struct payload *hdr_delta(const struct room_delta_view *v, struct buf *b)
{
    return with_hdr(tc_delta(v, b));
}

static struct payload *hdr_snapshot(const struct room_snapshot_view *v, struct buf *b)
{
    return with_hdr(tc_snapshot(v, b));
}

static struct payload *hdr_ephemeral(const struct room_ephemeral_view *v, struct buf *b)
{
    return with_hdr(tc_ephemeral(v, b));
}

static const struct room_codec hdr_codec = {
    .encode_delta = hdr_delta,
    .encode_snapshot = hdr_snapshot,
    .encode_ephemeral = hdr_ephemeral,
};

/* The JSON in a payload of either codec. */
static size_t hdr_len(const struct payload *p)
{
    return p->len >= 4 && memcmp(p->data, "HDR:", 4) == 0 ? 4 : 0;
}

static const char *pjson(const struct payload *p)
{
    return p->data + hdr_len(p);
}

static size_t pjson_len(const struct payload *p)
{
    return p->len - hdr_len(p);
}

/* The event's value matches its kind and its payload's head. */
static void check_value(const struct room_event *ev)
{
    const struct room_head *h = NULL;

    switch (ev->kind) {
    case ROOM_EV_DELTA:
        assert_non_null(ev->delta);
        assert_null(ev->snapshot);
        h = &ev->delta->head;
        assert_true(ev->delta->njoins <= ev->delta->join_total);
        assert_true(ev->delta->nleaves <= ev->delta->leave_total);
        assert_true(ev->delta->npatches <= ev->delta->patch_total);
        break;
    case ROOM_EV_SNAPSHOT:
        assert_non_null(ev->snapshot);
        assert_null(ev->delta);
        h = &ev->snapshot->head;
        break;
    case ROOM_EV_EPHEMERAL:
        assert_non_null(ev->ephemeral);
        assert_string_equal(ev->ephemeral->user, ev->user);
        assert_string_equal(ev->ephemeral->room, ev->room);
        return;
    }
    assert_string_equal(h->room, ev->room);
    if (h->epoch == 0) { /* nothing to show: the empty room's head */
        assert_int_equal(h->seq, 0);
        assert_int_equal(h->count, 0);
    } else {
        assert_int_equal(h->epoch, ev->epoch);
        assert_int_equal(h->seq, ev->seq);
    }
}

/* Last seq seen per room epoch, for the consecutive-seq check. */
struct seen {
    char room[ROOM_ID_MAX + 1];
    uint64_t epoch;
    uint64_t seq;
};

struct fx {
    struct wheel *w;
    struct room_engine *e;
    struct room_config cfg;
    uint64_t now;
    struct rec *d; /* deltas */
    size_t nd;
    struct rec *x; /* ephemeral */
    size_t nx;
    unsigned order;
    struct seen seen[16];
    size_t nseen;
    fx_hook *hook; /* extra action inside the callbacks */
    void *arg;     /* for the hook */
};

static void check_seq(struct fx *f, const struct room_event *ev)
{
    for (size_t i = 0; i < f->nseen; i++) {
        struct seen *s = &f->seen[i];
        if (strcmp(s->room, ev->room) != 0)
            continue;
        if (s->epoch == ev->epoch) {
            assert_int_equal(ev->seq, s->seq + 1);
        } else {
            assert_int_equal(ev->seq, 1); /* a new epoch starts at 1 */
            s->epoch = ev->epoch;
        }
        s->seq = ev->seq;
        return;
    }
    assert_true(f->nseen < ARRAY_SIZE(f->seen));
    assert_int_equal(ev->seq, 1);
    snprintf(f->seen[f->nseen].room, sizeof(f->seen[0].room), "%s", ev->room);
    f->seen[f->nseen].epoch = ev->epoch;
    f->seen[f->nseen++].seq = ev->seq;
}

static void record(struct fx *f, struct rec **v, size_t *n, const struct room_event *ev)
{
    struct rec *r;

    if ((*n & (*n - 1)) == 0) /* 0, 1, 2, 4, ...: double the array */
        *v = xrealloc(*v, (*n ? *n * 2 : 1) * sizeof(**v));
    r = &(*v)[(*n)++];
    *r = (struct rec){
        .p = payload_ref(ev->msg.payload),
        .json = pjson(ev->msg.payload),
        .json_len = pjson_len(ev->msg.payload),
        .seq = ev->seq,
        .epoch = ev->epoch,
        .at = f->now,
        .droppable = ev->droppable,
        .order = f->order++,
    };
    snprintf(r->room, sizeof(r->room), "%s", ev->room);
    snprintf(r->user, sizeof(r->user), "%s", ev->user ? ev->user : "");
    check_value(ev);
}

static void on_delta(void *ctx, const struct room_event *ev)
{
    struct fx *f = ctx;

    assert_false(ev->droppable);
    assert_null(ev->user);
    assert_int_equal(ev->seq, ev->msg.seq);
    check_seq(f, ev);
    record(f, &f->d, &f->nd, ev);
    if (f->hook)
        f->hook(f, ev);
}

static void on_ephemeral(void *ctx, const struct room_event *ev)
{
    struct fx *f = ctx;

    assert_true(ev->droppable);
    assert_non_null(ev->user);
    assert_int_equal(ev->seq, 0);
    record(f, &f->x, &f->nx, ev);
    if (f->hook)
        f->hook(f, ev);
}

static struct fx *fx_new(const struct room_config *cfg)
{
    struct fx *f = xcalloc(1, sizeof(*f));

    if (cfg)
        f->cfg = *cfg;
    else
        room_config_init(&f->cfg);
    if (!f->cfg.codec)
        f->cfg.codec = &test_codec;
    assert_int_equal(room_config_check(&f->cfg), 0);
    f->now = T0;
    f->w = wheel_new(T0);
    f->e = room_engine_new(&f->cfg, f->w, on_delta, on_ephemeral, f);
    return f;
}

static void fx_clear(struct fx *f)
{
    for (size_t i = 0; i < f->nd; i++)
        payload_unref(f->d[i].p);
    for (size_t i = 0; i < f->nx; i++)
        payload_unref(f->x[i].p);
    free(f->d);
    free(f->x);
    f->d = f->x = NULL;
    f->nd = f->nx = 0;
}

static void fx_free(struct fx *f)
{
    room_engine_free(f->e);
    wheel_free(f->w);
    fx_clear(f);
    free(f);
}

/* Moves the fake clock forward by ms, running the wheel every tick like
 * the loop does. */
static void advance(struct fx *f, uint64_t ms)
{
    uint64_t end = f->now + ms;

    while (f->now < end) {
        f->now = MIN(end, f->now + WHEEL_TICK_MS);
        wheel_run(f->w, f->now);
    }
}

static int join(struct fx *f, const char *room, const char *user, const char *session,
                const char *meta)
{
    return room_join(f->e, room, user, session, meta, meta ? strlen(meta) : 0, f->now);
}

static int leave(struct fx *f, const char *room, const char *user, const char *session)
{
    return room_leave(f->e, room, user, session, f->now);
}

static int patch(struct fx *f, const char *room, const char *user, const char *p)
{
    return room_patch(f->e, room, user, p, strlen(p), f->now);
}

static int eph(struct fx *f, const char *room, const char *user, const char *kind, const char *data)
{
    return room_ephemeral(f->e, room, user, kind, data, strlen(data), f->now);
}

static cJSON *parse_msg(const char *json, size_t n)
{
    cJSON *v = cJSON_ParseWithLength(json, n);

    assert_non_null(v);
    return v;
}

static cJSON *rec_json(const struct rec *r)
{
    return parse_msg(r->json, r->json_len);
}

static cJSON *snapshot(struct fx *f, const char *room)
{
    struct room_msg m;
    cJSON *v;

    assert_int_equal(room_snapshot(f->e, room, &m), 0);
    v = parse_msg(pjson(m.payload), pjson_len(m.payload));
    payload_unref(m.payload);
    return v;
}

static const char *jstr(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

static uint64_t jnum(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    assert_true(cJSON_IsNumber(v));
    return (uint64_t)v->valuedouble;
}

static const cJSON *jarr(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    assert_true(cJSON_IsArray(v));
    return v;
}

static int jlen(const cJSON *o, const char *key)
{
    return cJSON_GetArraySize(jarr(o, key));
}

/* True when JSON text a and b are the same value. */
static bool json_same(const char *a, const char *b)
{
    cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
    bool same;

    assert_non_null(x);
    assert_non_null(y);
    same = cJSON_Compare(x, y, true);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return same;
}

/* The member's metadata as a C string (static buffer). */
static const char *meta_of(struct fx *f, const char *room, const char *user)
{
    static char buf[4096];
    struct room_member_view v;

    assert_int_equal(room_get_member(f->e, room, user, &v), 0);
    assert_true(v.meta_len < sizeof(buf));
    memcpy(buf, v.meta, v.meta_len);
    buf[v.meta_len] = '\0';
    return buf;
}

static size_t rooms(struct fx *f)
{
    struct room_stats st;

    room_get_stats(f->e, &st);
    return st.rooms;
}

/* ---- ids, errors, configuration ---- */

static void test_ids_and_errors(void **state)
{
    struct fx *f = fx_new(NULL);
    char id[ROOM_ID_MAX + 2];
    const int codes[] = {ROOM_E_ROOM_ID,   ROOM_E_USER_ID,    ROOM_E_SESSION_ID, ROOM_E_META_SIZE,
                         ROOM_E_META_JSON, ROOM_E_FULL,       ROOM_E_SESSIONS,   ROOM_E_JOINED,
                         ROOM_E_NO_ROOM,   ROOM_E_NOT_MEMBER, ROOM_E_NO_SESSION, ROOM_E_INVISIBLE,
                         ROOM_E_KIND,      ROOM_E_KINDS,      ROOM_E_DATA_SIZE,  ROOM_E_DATA_JSON,
                         ROOM_E_CONFIG};

    (void)state;
    memset(id, 'a', ROOM_ID_MAX);
    id[ROOM_ID_MAX] = '\0';
    assert_true(room_id_valid(id));
    assert_true(room_id_valid("A-z_0.9~:@"));
    id[ROOM_ID_MAX] = 'a';
    id[ROOM_ID_MAX + 1] = '\0';
    assert_false(room_id_valid(id));
    assert_false(room_id_valid(""));
    assert_false(room_id_valid(NULL));
    assert_false(room_id_valid("a b"));
    assert_false(room_id_valid("a/b"));
    assert_false(room_id_valid("caf\xc3\xa9"));
    /* An app's namespace prefix (ns.h): internal ids only. */
    assert_false(room_id_valid("app2|doc"));
    assert_true(room_ns_id_valid("app2|doc"));
    assert_true(room_ns_id_valid("app2|~pnews"));
    assert_true(room_ns_id_valid("doc"));
    assert_false(room_ns_id_valid("app2|"));
    assert_false(room_ns_id_valid("|doc"));
    assert_false(room_ns_id_valid("a|b|c"));
    assert_false(room_ns_id_valid("a-b|doc"));
    assert_int_equal(join(f, "", "u", "s", NULL), ROOM_E_ROOM_ID);
    assert_int_equal(join(f, id, "u", "s", NULL), ROOM_E_ROOM_ID);
    assert_int_equal(join(f, "r", "u\"", "s", NULL), ROOM_E_USER_ID);
    assert_int_equal(join(f, "r", "u", "s s", NULL), ROOM_E_SESSION_ID);
    assert_int_equal(leave(f, "r?", "u", "s"), ROOM_E_ROOM_ID);
    assert_int_equal(leave(f, "r", "u", ""), ROOM_E_SESSION_ID);
    assert_int_equal(rooms(f), 0);
    assert_int_equal(join(f, "app2|doc2", "a|b|u", "s", NULL), ROOM_E_USER_ID);
    assert_int_equal(join(f, "app2|doc", "app2|u", "s", NULL), 0); /* internal ids */
    for (size_t i = 0; i < ARRAY_SIZE(codes); i++) {
        assert_string_not_equal(room_strerror(codes[i]), "unknown error");
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(codes[i], codes[j]);
            assert_string_not_equal(room_strerror(codes[i]), room_strerror(codes[j]));
        }
    }
    assert_string_equal(room_strerror(0), "unknown error");
    assert_string_equal(room_mode_name(ROOM_MODE_NORMAL), "normal");
    assert_string_equal(room_mode_name(ROOM_MODE_INTERVAL), "interval");
    fx_free(f);
}

static void test_config_check(void **state)
{
    struct room_config c;

    (void)state;
    room_config_init(&c);
    assert_int_equal(room_config_check(&c), 0);
    assert_int_equal(c.batch_ms, 50);
    assert_int_equal(c.max_meta_bytes, 1024);
    assert_int_equal(c.ephemeral_rate, 15);
    c.interval_leave = c.interval_enter;
    assert_int_equal(room_config_check(&c), ROOM_E_CONFIG);
    room_config_init(&c);
    c.ring_len = 0;
    assert_int_equal(room_config_check(&c), ROOM_E_CONFIG);
    room_config_init(&c);
    c.ephemeral_rate = 1001;
    assert_int_equal(room_config_check(&c), ROOM_E_CONFIG);
    room_config_init(&c);
    c.max_meta_bytes = (1u << 20) + 1;
    assert_int_equal(room_config_check(&c), ROOM_E_CONFIG);
}

/* ---- membership ---- */

static void test_two_tabs_one_member(void **state)
{
    struct fx *f = fx_new(NULL);
    struct room_member_view v;
    struct room_info info;
    cJSON *d, *s;

    (void)state;
    assert_int_equal(join(f, "r", "u1", "tab1", "{\"name\":\"Ann\"}"), 0);
    assert_int_equal(join(f, "r", "u1", "tab2", NULL), 0);
    assert_int_equal(f->nd, 0); /* batched: nothing before the window ends */
    advance(f, 49);
    assert_int_equal(f->nd, 0);
    advance(f, 1);
    assert_int_equal(f->nd, 1);
    d = rec_json(&f->d[0]);
    assert_string_equal(jstr(d, "type"), "room_delta");
    assert_string_equal(jstr(d, "room"), "r");
    assert_int_equal(jnum(d, "seq"), 1);
    assert_int_equal(jnum(d, "count"), 1);
    assert_string_equal(jstr(d, "mode"), "normal");
    assert_int_equal(jlen(d, "joins"), 1);
    assert_int_equal(jlen(d, "leaves"), 0);
    assert_int_equal(jlen(d, "patches"), 0);
    assert_string_equal(jstr(cJSON_GetArrayItem(jarr(d, "joins"), 0), "user"), "u1");
    assert_int_equal(jnum(cJSON_GetArrayItem(jarr(d, "joins"), 0), "joinedAt"), T0);
    assert_null(cJSON_GetObjectItem(d, "joinCount")); /* normal mode: lists are complete */
    cJSON_Delete(d);

    assert_int_equal(room_get_member(f->e, "r", "u1", &v), 0);
    assert_int_equal(v.nsessions, 2);
    assert_string_equal(v.session_ids[0], "tab1");
    assert_string_equal(v.session_ids[1], "tab2");
    assert_true(v.published);
    assert_int_equal(room_get_info(f->e, "r", &info), 0);
    assert_int_equal(info.count, 1);
    assert_int_equal(info.members, 1);

    /* Closing one tab changes nothing anyone sees. */
    assert_int_equal(leave(f, "r", "u1", "tab1"), 0);
    advance(f, 200);
    assert_int_equal(f->nd, 1);
    /* The last one: a leave. */
    assert_int_equal(leave(f, "r", "u1", "tab2"), 0);
    assert_int_equal(room_get_member(f->e, "r", "u1", &v), ROOM_E_NOT_MEMBER);
    s = snapshot(f, "r"); /* still published until the flush */
    assert_int_equal(jnum(s, "count"), 1);
    cJSON_Delete(s);
    advance(f, 50);
    assert_int_equal(f->nd, 2);
    d = rec_json(&f->d[1]);
    assert_int_equal(jnum(d, "seq"), 2);
    assert_int_equal(jnum(d, "count"), 0);
    assert_int_equal(jlen(d, "leaves"), 1);
    assert_string_equal(cJSON_GetArrayItem(jarr(d, "leaves"), 0)->valuestring, "u1");
    assert_int_equal(jlen(d, "joins"), 0);
    cJSON_Delete(d);
    fx_free(f);
}

/* Per-session values: two sessions' values under "~metas" add up, the
 * leave of one drops its own (a patch), and deltas carry the entries as
 * they were (leavesPrev, patchesPrev). */
static void test_session_values(void **state)
{
    struct fx *f = fx_new(NULL);
    struct room_member_view v;
    const cJSON *x;
    cJSON *d;

    (void)state;
    tc_show_prev = true;
    assert_int_equal(join(f, "r", "u1", "s1", "{\"~metas\":{\"s1\":{\"d\":1}}}"), 0);
    assert_int_equal(join(f, "r", "u1", "s2", "{\"~metas\":{\"s2\":{\"d\":2}}}"), 0);
    assert_int_equal(room_get_member(f->e, "r", "u1", &v), 0);
    assert_int_equal(v.meta_len, strlen("{\"~metas\":{\"s2\":{\"d\":2},\"s1\":{\"d\":1}}}"));
    assert_memory_equal(v.meta, "{\"~metas\":{\"s2\":{\"d\":2},\"s1\":{\"d\":1}}}", v.meta_len);
    advance(f, 50);
    assert_int_equal(f->nd, 1);
    d = rec_json(&f->d[0]);
    assert_int_equal(jlen(d, "joins"), 1);
    assert_null(cJSON_GetObjectItem(d, "leavesPrev"));
    cJSON_Delete(d);

    /* s1 leaves, u1 stays: its value goes, the patch shows it was there. */
    assert_int_equal(leave(f, "r", "u1", "s1"), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 2);
    d = rec_json(&f->d[1]);
    assert_int_equal(jlen(d, "patches"), 1);
    assert_int_equal(jlen(d, "patchesPrev"), 1);
    x = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(jarr(d, "patches"), 0), "meta"),
                            "~metas");
    assert_int_equal(cJSON_GetArraySize(x), 1);
    assert_non_null(cJSON_GetObjectItem(x, "s2"));
    x = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(jarr(d, "patchesPrev"), 0), "meta"), "~metas");
    assert_int_equal(cJSON_GetArraySize(x), 2);
    assert_string_equal(jstr(cJSON_GetArrayItem(jarr(d, "patchesPrev"), 0), "user"), "u1");
    cJSON_Delete(d);

    /* The last session: a leave, with the entry as it was. */
    assert_int_equal(leave(f, "r", "u1", "s2"), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 3);
    d = rec_json(&f->d[2]);
    assert_int_equal(jlen(d, "leaves"), 1);
    assert_int_equal(jlen(d, "leavesPrev"), 1);
    assert_string_equal(jstr(cJSON_GetArrayItem(jarr(d, "leavesPrev"), 0), "user"), "u1");
    x = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(jarr(d, "leavesPrev"), 0), "meta"), "~metas");
    assert_non_null(cJSON_GetObjectItem(x, "s2"));
    cJSON_Delete(d);

    /* Metadata without "~metas" is replaced as before. */
    assert_int_equal(join(f, "r", "u2", "a", "{\"~metas\":{\"a\":1}}"), 0);
    assert_int_equal(join(f, "r", "u2", "b", "{\"n\":1}"), 0);
    assert_int_equal(room_get_member(f->e, "r", "u2", &v), 0);
    assert_memory_equal(v.meta, "{\"n\":1}", v.meta_len);
    tc_show_prev = false;
    fx_free(f);
}

/* A merge that would exceed max_meta_bytes refuses the join. */
static void test_session_values_limit(void **state)
{
    struct room_config cfg;
    struct fx *f;
    char big[200];

    (void)state;
    room_config_init(&cfg);
    cfg.max_meta_bytes = 120;
    f = fx_new(&cfg);
    snprintf(big, sizeof(big), "{\"~metas\":{\"s1\":\"%060d\"}}", 0);
    assert_int_equal(join(f, "r", "u1", "s1", big), 0);
    snprintf(big, sizeof(big), "{\"~metas\":{\"s2\":\"%060d\"}}", 0);
    assert_int_equal(join(f, "r", "u1", "s2", big), ROOM_E_META_SIZE);
    fx_free(f);
}

static void test_join_leave_in_window_is_nothing(void **state)
{
    struct fx *f = fx_new(NULL);

    (void)state;
    assert_int_equal(join(f, "r", "u1", "s1", NULL), 0);
    assert_int_equal(join(f, "r", "u2", "s1", NULL), 0);
    advance(f, 20);
    assert_int_equal(leave(f, "r", "u1", "s1"), 0);
    advance(f, 100);
    assert_int_equal(f->nd, 1); /* only u2's join */
    {
        cJSON *d = rec_json(&f->d[0]);
        assert_int_equal(jlen(d, "joins"), 1);
        assert_string_equal(jstr(cJSON_GetArrayItem(jarr(d, "joins"), 0), "user"), "u2");
        assert_int_equal(jlen(d, "leaves"), 0);
        cJSON_Delete(d);
    }
    /* A room whose only member came and went inside one window: nothing,
     * and the room is gone. */
    assert_int_equal(join(f, "q", "u1", "s1", NULL), 0);
    assert_int_equal(rooms(f), 2);
    assert_int_equal(leave(f, "q", "u1", "s1"), 0);
    advance(f, 100);
    assert_int_equal(f->nd, 1);
    assert_int_equal(rooms(f), 1);
    fx_free(f);
}

static void test_leave_rejoin_in_window(void **state)
{
    struct fx *f = fx_new(NULL);
    cJSON *d;

    (void)state;
    assert_int_equal(join(f, "r", "u1", "s1", "{\"c\":\"red\"}"), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 1);
    /* A reload: leave and come back with the same metadata. */
    advance(f, 1000);
    assert_int_equal(leave(f, "r", "u1", "s1"), 0);
    assert_int_equal(join(f, "r", "u1", "s2", "{\"c\":\"red\"}"), 0);
    advance(f, 100);
    assert_int_equal(f->nd, 1);
    /* Again, with other metadata: one patch, joinedAt kept. */
    assert_int_equal(leave(f, "r", "u1", "s2"), 0);
    assert_int_equal(join(f, "r", "u1", "s3", "{\"c\":\"blue\"}"), 0);
    advance(f, 100);
    assert_int_equal(f->nd, 2);
    d = rec_json(&f->d[1]);
    assert_int_equal(jlen(d, "joins"), 0);
    assert_int_equal(jlen(d, "leaves"), 0);
    assert_int_equal(jlen(d, "patches"), 1);
    assert_int_equal(jnum(cJSON_GetArrayItem(jarr(d, "patches"), 0), "joinedAt"), T0);
    assert_string_equal(
        jstr(cJSON_GetObjectItem(cJSON_GetArrayItem(jarr(d, "patches"), 0), "meta"), "c"), "blue");
    cJSON_Delete(d);
    /* A rejoin without metadata keeps the member's. */
    assert_int_equal(leave(f, "r", "u1", "s3"), 0);
    assert_int_equal(join(f, "r", "u1", "s4", NULL), 0);
    advance(f, 100);
    assert_int_equal(f->nd, 2);
    assert_string_equal(meta_of(f, "r", "u1"), "{\"c\":\"blue\"}");
    fx_free(f);
}

static void test_patch_in_place(void **state)
{
    struct fx *f = fx_new(NULL);
    cJSON *d;

    (void)state;
    assert_int_equal(join(f, "r", "u1", "s1", "{\"name\":\"Ann\",\"x\":1}"), 0);
    assert_int_equal(join(f, "r", "u2", "s1", NULL), 0);
    advance(f, 50);
    assert_int_equal(patch(f, "r", "u1", "{\"x\":2}"), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 2);
    d = rec_json(&f->d[1]);
    assert_int_equal(jnum(d, "seq"), 2);
    assert_int_equal(jnum(d, "count"), 2);
    assert_int_equal(jlen(d, "joins"), 0);
    assert_int_equal(jlen(d, "leaves"), 0);
    assert_int_equal(jlen(d, "patches"), 1);
    {
        const cJSON *m = cJSON_GetArrayItem(jarr(d, "patches"), 0);
        assert_string_equal(jstr(m, "user"), "u1");
        assert_int_equal(jnum(m, "joinedAt"), T0);
        assert_int_equal(jnum(cJSON_GetObjectItem(m, "meta"), "x"), 2);
        assert_string_equal(jstr(cJSON_GetObjectItem(m, "meta"), "name"), "Ann");
    }
    cJSON_Delete(d);
    /* Several patches in one window: one patch with the final state. */
    assert_int_equal(patch(f, "r", "u1", "{\"x\":3}"), 0);
    assert_int_equal(patch(f, "r", "u1", "{\"x\":4}"), 0);
    assert_int_equal(patch(f, "r", "u1", "{\"y\":true}"), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 3);
    d = rec_json(&f->d[2]);
    assert_int_equal(jlen(d, "patches"), 1);
    {
        char *m = cJSON_PrintUnformatted(
            cJSON_GetObjectItem(cJSON_GetArrayItem(jarr(d, "patches"), 0), "meta"));
        assert_true(json_same(m, "{\"name\":\"Ann\",\"x\":4,\"y\":true}"));
        free(m);
    }
    cJSON_Delete(d);
    /* Patches that cancel out, or change nothing: no delta, no seq. */
    assert_int_equal(patch(f, "r", "u1", "{\"x\":5}"), 0);
    assert_int_equal(patch(f, "r", "u1", "{\"x\":4}"), 0);
    assert_int_equal(patch(f, "r", "u1", "{\"name\":\"Ann\"}"), 0);
    advance(f, 100);
    assert_int_equal(f->nd, 3);
    /* Patch errors. */
    assert_int_equal(patch(f, "r", "nobody", "{}"), ROOM_E_NOT_MEMBER);
    assert_int_equal(patch(f, "nowhere", "u1", "{}"), ROOM_E_NO_ROOM);
    assert_int_equal(patch(f, "r", "u1", "{"), ROOM_E_META_JSON);
    fx_free(f);
}

static void test_merge_patch_semantics(void **state)
{
    struct fx *f = fx_new(NULL);

    (void)state;
    assert_int_equal(
        join(f, "r", "u", "s", "{\"name\":\"Ann\",\"color\":\"red\",\"pos\":{\"x\":1,\"y\":2}}"),
        0);
    /* null deletes, objects merge recursively, other values replace. */
    assert_int_equal(
        patch(f, "r", "u",
              "{\"color\":null,\"pos\":{\"y\":3,\"z\":null},\"tag\":[1,{\"a\":null}]}"),
        0);
    assert_string_equal(meta_of(f, "r", "u"),
                        "{\"name\":\"Ann\",\"pos\":{\"x\":1,\"y\":3},\"tag\":[1,{\"a\":null}]}");
    /* A nested object patch where the target is not an object: nulls
     * inside it are dropped (RFC 7386 section 2). */
    assert_int_equal(patch(f, "r", "u", "{\"name\":{\"first\":\"Ann\",\"last\":null}}"), 0);
    assert_string_equal(meta_of(f, "r", "u"),
                        "{\"name\":{\"first\":\"Ann\"},\"pos\":{\"x\":1,\"y\":3},\"tag\":[1,{\"a\":"
                        "null}]}");
    /* Deleting a key that is not there is a no-op. */
    assert_int_equal(patch(f, "r", "u", "{\"nope\":null}"), 0);
    assert_string_equal(meta_of(f, "r", "u"),
                        "{\"name\":{\"first\":\"Ann\"},\"pos\":{\"x\":1,\"y\":3},\"tag\":[1,{\"a\":"
                        "null}]}");
    /* A non-object patch replaces everything; an object patch on a
     * non-object starts from {}. */
    assert_int_equal(patch(f, "r", "u", "  [1, 2]  "), 0);
    assert_string_equal(meta_of(f, "r", "u"), "[1,2]");
    assert_int_equal(patch(f, "r", "u", "{\"a\":1,\"b\":null}"), 0);
    assert_string_equal(meta_of(f, "r", "u"), "{\"a\":1}");
    /* room_set_meta replaces. */
    assert_int_equal(room_set_meta(f->e, "r", "u", "{\"z\" : 9}", 9, f->now), 0);
    assert_string_equal(meta_of(f, "r", "u"), "{\"z\":9}");
    /* Key order is kept when a value is replaced in place. */
    assert_int_equal(room_set_meta(f->e, "r", "u", "{\"a\":1,\"b\":2,\"c\":3}", 19, f->now), 0);
    assert_int_equal(patch(f, "r", "u", "{\"a\":7}"), 0);
    assert_string_equal(meta_of(f, "r", "u"), "{\"a\":7,\"b\":2,\"c\":3}");
    fx_free(f);
}

/* "{"a":"xxx..."}" of exactly n bytes (n >= 8). */
static char *meta_of_size(size_t n)
{
    char *s = xmalloc(n + 1);

    memcpy(s, "{\"a\":\"", 6);
    memset(s + 6, 'x', n - 8);
    memcpy(s + n - 2, "\"}", 3);
    return s;
}

static void test_meta_limits(void **state)
{
    struct fx *f = fx_new(NULL);
    char *ok = meta_of_size(1024), *big = meta_of_size(1025);
    struct room_member_view v;

    (void)state;
    assert_int_equal(strlen(ok), 1024);
    assert_int_equal(join(f, "r", "u1", "s", ok), 0);
    assert_int_equal(join(f, "r", "u2", "s", big), ROOM_E_META_SIZE);
    assert_int_equal(join(f, "r", "u2", "s", "{\"a\":"), ROOM_E_META_JSON);
    assert_int_equal(join(f, "r", "u2", "s", "{} {}"), ROOM_E_META_JSON);
    assert_int_equal(join(f, "r", "u2", "s", "{}x"), ROOM_E_META_JSON);
    assert_int_equal(join(f, "r", "u2", "s", "\xEF\xBB\xBF{}"), ROOM_E_META_JSON);
    assert_int_equal(join(f, "r", "u2", "s", "\"\xff\""), ROOM_E_META_JSON);
    assert_int_equal(join(f, "r", "u2", "s", ""), ROOM_E_META_JSON);
    assert_int_equal(room_join(f->e, "r", "u2", "s", "{}\0", 3, f->now), ROOM_E_META_JSON);
    /* Nothing changed by the failures. */
    assert_int_equal(room_get_member(f->e, "r", "u2", &v), ROOM_E_NOT_MEMBER);
    /* Any JSON value, stored compactly. */
    assert_int_equal(join(f, "r", "u3", "s", " \"Ann\" "), 0);
    assert_string_equal(meta_of(f, "r", "u3"), "\"Ann\"");
    assert_int_equal(join(f, "r", "u4", "s", "{ \"a\" : [ 1 , 2 ] }\n"), 0);
    assert_string_equal(meta_of(f, "r", "u4"), "{\"a\":[1,2]}");
    assert_int_equal(join(f, "r", "u5", "s", NULL), 0);
    assert_string_equal(meta_of(f, "r", "u5"), "{}");
    /* 1025 bytes with spaces that would compact below the limit: the text
     * as given is limited too. */
    big[1023] = ' ';
    big[1024] = '}';
    big[1022] = '"';
    assert_int_equal(join(f, "r", "u6", "s", big), ROOM_E_META_SIZE);
    /* A patch whose result would be too large: error, nothing changes. */
    assert_int_equal(patch(f, "r", "u1", "{\"b\":1}"), ROOM_E_META_SIZE);
    assert_string_equal(meta_of(f, "r", "u1"), ok);
    assert_int_equal(room_set_meta(f->e, "r", "u1", big, 1025, f->now), ROOM_E_META_SIZE);
    free(ok);
    free(big);
    fx_free(f);
}

/* room_full counts only the members the joiner may see: not those that
 * block it (room_join_for's unseen), up to the hard bound of twice the
 * cap. */
static void test_full_ignores_unseen(void **state)
{
    const char *unseen[] = {"b1", "nobody", "b2"};
    struct room_config c;
    struct fx *f;
    char user[16];

    (void)state;
    room_config_init(&c);
    c.max_members = 3;
    f = fx_new(&c);
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    assert_int_equal(join(f, "r", "b1", "s", NULL), 0);
    assert_int_equal(join(f, "r", "b2", "s", NULL), 0);
    assert_int_equal(join(f, "r", "x", "s", NULL), ROOM_E_FULL);
    /* To a joiner blocked by b1 and b2 the room holds one member. */
    assert_int_equal(room_join_for(f->e, "r", "v", "s", NULL, 0, f->now, unseen, 3), 0);
    assert_int_equal(room_join_for(f->e, "r", "w", "s", NULL, 0, f->now, unseen, 3), 0);
    assert_int_equal(room_join_for(f->e, "r", "y", "s", NULL, 0, f->now, unseen, 3), ROOM_E_FULL);
    /* The hard bound counts everyone: b1, b2 and three invisible ones. */
    assert_int_equal(join(f, "r2", "b1", "s", NULL), 0);
    assert_int_equal(join(f, "r2", "b2", "s", NULL), 0);
    for (int i = 0; i < 3; i++) {
        snprintf(user, sizeof(user), "g%d", i);
        assert_int_equal(join(f, "r2", user, "s", NULL), 0);
        assert_int_equal(room_set_visible(f->e, "r2", user, false, f->now), 0);
    }
    assert_int_equal(room_join_for(f->e, "r2", "v", "s", NULL, 0, f->now, unseen, 3), 0);
    assert_int_equal(room_join_for(f->e, "r2", "w", "s", NULL, 0, f->now, unseen, 3), ROOM_E_FULL);
    fx_free(f);
}

static void test_limits_and_leave_errors(void **state)
{
    struct room_config c;
    struct fx *f;

    (void)state;
    room_config_init(&c);
    c.max_members = 3;
    c.max_sessions = 2;
    f = fx_new(&c);
    assert_int_equal(join(f, "r", "u1", "s1", NULL), 0);
    assert_int_equal(join(f, "r", "u2", "s1", NULL), 0);
    assert_int_equal(join(f, "r", "u3", "s1", NULL), 0);
    assert_int_equal(join(f, "r", "u4", "s1", NULL), ROOM_E_FULL);
    assert_int_equal(join(f, "r", "u1", "s2", NULL), 0); /* not a new member */
    assert_int_equal(join(f, "r", "u1", "s3", NULL), ROOM_E_SESSIONS);
    assert_int_equal(join(f, "r", "u1", "s2", NULL), ROOM_E_JOINED);
    assert_int_equal(join(f, "other", "u4", "s1", NULL), 0); /* per room */
    assert_int_equal(leave(f, "r", "u1", "s9"), ROOM_E_NO_SESSION);
    assert_int_equal(leave(f, "r", "u9", "s1"), ROOM_E_NOT_MEMBER);
    assert_int_equal(leave(f, "nowhere", "u1", "s1"), ROOM_E_NO_ROOM);
    /* A leaving member frees its place at once. */
    assert_int_equal(leave(f, "r", "u3", "s1"), 0);
    assert_int_equal(leave(f, "r", "u3", "s1"), ROOM_E_NOT_MEMBER);
    assert_int_equal(join(f, "r", "u4", "s1", NULL), 0);
    assert_int_equal(join(f, "r", "u3", "s1", NULL), ROOM_E_FULL);
    advance(f, 50);
    {
        struct room_info i;
        assert_int_equal(room_get_info(f->e, "r", &i), 0);
        assert_int_equal(i.count, 3);
        assert_int_equal(i.members, 3);
        assert_false(i.pending);
    }
    fx_free(f);
}

static void test_kick(void **state)
{
    struct fx *f = fx_new(NULL);
    cJSON *d;

    (void)state;
    assert_int_equal(join(f, "r", "u1", "a", NULL), 0);
    assert_int_equal(join(f, "r", "u1", "b", NULL), 0);
    assert_int_equal(join(f, "r", "u2", "a", NULL), 0);
    advance(f, 50);
    assert_int_equal(room_kick(f->e, "r", "u1", f->now), 0);
    assert_int_equal(room_kick(f->e, "r", "u1", f->now), ROOM_E_NOT_MEMBER);
    advance(f, 50);
    assert_int_equal(f->nd, 2);
    d = rec_json(&f->d[1]);
    assert_int_equal(jlen(d, "leaves"), 1);
    assert_int_equal(jnum(d, "count"), 1);
    cJSON_Delete(d);
    fx_free(f);
}

/* ---- sequence numbers, snapshots, resume ---- */

static void test_seq_by_one(void **state)
{
    struct fx *f = fx_new(NULL);
    char user[16];

    (void)state;
    for (int i = 0; i < 20; i++) {
        snprintf(user, sizeof(user), "u%d", i);
        assert_int_equal(join(f, "r", user, "s", NULL), 0);
        if (i % 3 == 0) /* a window with a net change of nothing */
            assert_int_equal(leave(f, "r", user, "s"), 0);
        advance(f, 60);
    }
    for (size_t i = 0; i < f->nd; i++) {
        cJSON *d = rec_json(&f->d[i]);
        assert_int_equal(jnum(d, "seq"), i + 1);
        assert_int_equal(f->d[i].seq, i + 1);
        assert_int_equal(jnum(d, "epoch"), f->d[i].epoch);
        cJSON_Delete(d);
    }
    assert_int_equal(f->nd, 13);
    fx_free(f);
}

static void test_snapshot_is_published_state(void **state)
{
    struct fx *f = fx_new(NULL);
    struct room_msg a, b;
    cJSON *s;

    (void)state;
    /* A room that does not exist: the empty room of epoch 0. */
    s = snapshot(f, "r");
    assert_string_equal(jstr(s, "type"), "room_snapshot");
    assert_int_equal(jnum(s, "epoch"), 0);
    assert_int_equal(jnum(s, "seq"), 0);
    assert_int_equal(jnum(s, "count"), 0);
    assert_int_equal(jlen(s, "members"), 0);
    cJSON_Delete(s);
    assert_int_equal(room_snapshot(f->e, "bad id", &a), ROOM_E_ROOM_ID);

    assert_int_equal(join(f, "r", "u1", "s", "{\"n\":1}"), 0);
    advance(f, 50);
    assert_int_equal(join(f, "r", "u2", "s", NULL), 0);
    assert_int_equal(patch(f, "r", "u1", "{\"n\":2}"), 0);
    /* Pending changes are not in the snapshot: it matches seq 1 exactly. */
    s = snapshot(f, "r");
    assert_int_equal(jnum(s, "seq"), 1);
    assert_int_equal(jnum(s, "epoch"), f->d[0].epoch);
    assert_string_equal(jstr(s, "mode"), "normal");
    assert_int_equal(jnum(s, "count"), 1);
    assert_int_equal(jlen(s, "members"), 1);
    assert_int_equal(
        jnum(cJSON_GetObjectItem(cJSON_GetArrayItem(jarr(s, "members"), 0), "meta"), "n"), 1);
    cJSON_Delete(s);
    /* Encoded once per seq: the same payload until the seq moves. */
    assert_int_equal(room_snapshot(f->e, "r", &a), 0);
    assert_int_equal(room_snapshot(f->e, "r", &b), 0);
    assert_ptr_equal(a.payload, b.payload);
    payload_unref(b.payload);
    /* room_flush publishes early. */
    assert_int_equal(room_flush(f->e, "r", f->now), 0);
    assert_int_equal(f->nd, 2);
    assert_int_equal(room_snapshot(f->e, "r", &b), 0);
    assert_ptr_not_equal(a.payload, b.payload);
    s = parse_msg(pjson(b.payload), pjson_len(b.payload));
    assert_int_equal(jnum(s, "seq"), 2);
    assert_int_equal(jnum(s, "count"), 2);
    /* Members in join order. */
    assert_string_equal(jstr(cJSON_GetArrayItem(jarr(s, "members"), 0), "user"), "u1");
    assert_string_equal(jstr(cJSON_GetArrayItem(jarr(s, "members"), 1), "user"), "u2");
    cJSON_Delete(s);
    payload_unref(a.payload);
    payload_unref(b.payload);
    assert_int_equal(room_flush(f->e, "nowhere", f->now), ROOM_E_NO_ROOM);
    fx_free(f);
}

static void test_snapshot_uncached(void **state)
{
    struct fx *f = fx_new(NULL);
    struct room_msg a, b, c;
    cJSON *s;

    (void)state;
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    assert_int_equal(room_flush(f->e, "r", f->now), 0);
    /* Encoded and not kept: the next reader gets a fresh encoding. */
    assert_int_equal(room_snapshot_uncached(f->e, "r", &a), 0);
    assert_int_equal(room_snapshot(f->e, "r", &b), 0);
    assert_ptr_not_equal(a.payload, b.payload);
    assert_int_equal(a.payload->len, b.payload->len);
    assert_memory_equal(a.payload->data, b.payload->data, a.payload->len);
    s = parse_msg(pjson(a.payload), pjson_len(a.payload));
    assert_string_equal(jstr(s, "type"), "room_snapshot");
    assert_int_equal(jnum(s, "seq"), 1);
    cJSON_Delete(s);
    /* A current cached snapshot is shared. */
    assert_int_equal(room_snapshot_uncached(f->e, "r", &c), 0);
    assert_ptr_equal(b.payload, c.payload);
    payload_unref(a.payload);
    payload_unref(b.payload);
    payload_unref(c.payload);
    assert_int_equal(room_snapshot_uncached(f->e, "bad id", &a), ROOM_E_ROOM_ID);
    fx_free(f);
}

/* A member's first session id is kept in the member itself, the others in
 * an array made for the second one: join order survives any mix of
 * leaves, growth past the array, a return to one session, and a rejoin
 * of a member whose leave is still pending. */
static void assert_sessions(struct fx *f, const char *user, const char *const *want, size_t n)
{
    struct room_member_view v;

    assert_int_equal(room_get_member(f->e, "r", user, &v), 0);
    assert_int_equal(v.nsessions, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(v.session_ids[i], want[i]);
}

static void test_sessions_inline_and_overflow(void **state)
{
    struct fx *f = fx_new(NULL);
    const char *five[] = {"tab1", "tab2", "tab3", "tab4", "tab5"};
    const char *after[] = {"tab2", "tab3", "tab4", "tab5", "x"};
    const char *two[] = {"tab2", "a-much-longer-session-id"};
    char sid[16];

    (void)state;
    for (int i = 0; i < 5; i++)
        assert_int_equal(join(f, "r", "u", five[i], NULL), 0);
    assert_int_equal(join(f, "r", "u", "tab3", NULL), ROOM_E_JOINED);
    assert_sessions(f, "u", five, 5);
    /* the first (inline) id leaves; a short one takes its place */
    assert_int_equal(leave(f, "r", "u", "tab1"), 0);
    assert_sessions(f, "u", five + 1, 4);
    assert_int_equal(join(f, "r", "u", "x", NULL), 0);
    assert_sessions(f, "u", after, 5);
    assert_int_equal(leave(f, "r", "u", "tab1"), ROOM_E_NO_SESSION);
    /* back to one session, then two with a long id */
    for (int i = 1; i < 5; i++)
        assert_int_equal(leave(f, "r", "u", after[i]), 0);
    assert_sessions(f, "u", two, 1);
    assert_int_equal(join(f, "r", "u", two[1], NULL), 0);
    assert_sessions(f, "u", two, 2);
    assert_int_equal(leave(f, "r", "u", "tab2"), 0);
    assert_sessions(f, "u", two + 1, 1);
    advance(f, 50);
    assert_int_equal(f->nd, 1); /* one join: sessions are not seen */
    /* the last leaves, and a rejoin in the same window cancels it */
    assert_int_equal(leave(f, "r", "u", two[1]), 0);
    assert_int_equal(room_get_member(f->e, "r", "u", &(struct room_member_view){0}),
                     ROOM_E_NOT_MEMBER);
    assert_int_equal(join(f, "r", "u", "t1", NULL), 0);
    assert_int_equal(join(f, "r", "u", two[1], NULL), 0);
    assert_sessions(f, "u", (const char *[]){"t1", two[1]}, 2);
    advance(f, 50);
    assert_int_equal(f->nd, 1);
    /* many sessions, then a kick */
    for (int i = 0; i < 20; i++) {
        snprintf(sid, sizeof(sid), "s%d", i);
        assert_int_equal(join(f, "r", "u", sid, NULL), 0);
    }
    assert_int_equal(room_kick(f->e, "r", "u", f->now), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 2);
    assert_int_equal(rooms(f), 0);
    fx_free(f);
}

/* Members with equal metadata share one stored copy (the same pointer in
 * their views); a change gives a member its own value, and values that
 * meet in the sharing cache never mix. */
static void test_meta_shared(void **state)
{
    struct fx *f = fx_new(NULL);
    struct room_member_view a, b;
    char user[16], meta[64], want[64];
    char *big;

    (void)state;
    assert_int_equal(join(f, "r", "u1", "s", "{\"a\": 1}"), 0);
    assert_int_equal(join(f, "r", "u2", "s", "{\"a\":1}"), 0);
    assert_int_equal(room_get_member(f->e, "r", "u1", &a), 0);
    assert_int_equal(room_get_member(f->e, "r", "u2", &b), 0);
    assert_ptr_equal(a.meta, b.meta);
    assert_int_equal(join(f, "r", "u3", "s", NULL), 0);
    assert_int_equal(join(f, "r", "u4", "s", "{ }"), 0);
    assert_int_equal(room_get_member(f->e, "r", "u3", &a), 0);
    assert_int_equal(room_get_member(f->e, "r", "u4", &b), 0);
    assert_ptr_equal(a.meta, b.meta);
    assert_string_equal(meta_of(f, "r", "u4"), "{}");
    assert_int_equal(patch(f, "r", "u1", "{\"b\":2}"), 0);
    assert_string_equal(meta_of(f, "r", "u1"), "{\"a\":1,\"b\":2}");
    assert_string_equal(meta_of(f, "r", "u2"), "{\"a\":1}");
    assert_int_equal(room_set_meta(f->e, "r", "u1", "{\"a\":1}", 7, f->now), 0);
    assert_int_equal(room_get_member(f->e, "r", "u1", &a), 0);
    assert_int_equal(room_get_member(f->e, "r", "u2", &b), 0);
    assert_ptr_equal(a.meta, b.meta);
    big = meta_of_size(900);
    assert_int_equal(join(f, "r", "u5", "s", big), 0);
    assert_int_equal(join(f, "r", "u6", "s", big), 0);
    assert_true(json_same(meta_of(f, "r", "u5"), big));
    assert_true(json_same(meta_of(f, "r", "u6"), big));
    free(big);
    /* far more values than the cache has slots */
    for (int i = 0; i < 300; i++) {
        snprintf(user, sizeof(user), "m%d", i);
        snprintf(meta, sizeof(meta), "{\"i\":%d}", i % 150);
        assert_int_equal(join(f, "r", user, "s", meta), 0);
    }
    advance(f, 50);
    for (int i = 0; i < 300; i++) {
        snprintf(user, sizeof(user), "m%d", i);
        snprintf(want, sizeof(want), "{\"i\":%d}", i % 150);
        assert_string_equal(meta_of(f, "r", user), want);
    }
    /* leaving members drop their references; the values stay right */
    for (int i = 0; i < 300; i += 2) {
        snprintf(user, sizeof(user), "m%d", i);
        assert_int_equal(leave(f, "r", user, "s"), 0);
    }
    advance(f, 50);
    assert_string_equal(meta_of(f, "r", "m1"), "{\"i\":1}");
    assert_string_equal(meta_of(f, "r", "u2"), "{\"a\":1}");
    fx_free(f);
}

/* A fixture with ring_len 6 whose room "r" has emitted seqs 1..10. */
static struct fx *ten_deltas(void)
{
    struct room_config c;
    struct fx *f;
    char user[16];

    room_config_init(&c);
    c.ring_len = 6;
    f = fx_new(&c);
    for (int i = 0; i < 10; i++) {
        snprintf(user, sizeof(user), "u%d", i);
        assert_int_equal(join(f, "r", user, "s", NULL), 0);
        advance(f, 50);
    }
    assert_int_equal(f->nd, 10);
    return f;
}

static void test_resume_missed_deltas(void **state)
{
    struct fx *f = ten_deltas();
    uint64_t epoch = f->d[0].epoch;
    struct room_resume res;

    (void)state;
    /* Missed 6..10: exactly those, the very bytes that went out. */
    assert_int_equal(room_resume(f->e, "r", epoch, 5, &res), ROOM_RESUME_DELTAS);
    assert_int_equal(res.kind, ROOM_RESUME_DELTAS);
    assert_int_equal(res.n, 5);
    for (size_t i = 0; i < res.n; i++) {
        assert_int_equal(res.msgs[i].payload->len, f->d[5 + i].p->len);
        assert_memory_equal(res.msgs[i].payload->data, f->d[5 + i].p->data, f->d[5 + i].p->len);
        assert_int_equal(res.msgs[i].seq, 6 + i);
        assert_int_equal(pjson_len(res.msgs[i].payload), f->d[5 + i].json_len);
        assert_memory_equal(pjson(res.msgs[i].payload), f->d[5 + i].json, f->d[5 + i].json_len);
    }
    room_resume_release(&res);
    assert_int_equal(res.n, 0);
    assert_null(res.msgs);
    /* The oldest the ring reaches: 4 (ring of 6 holds 5..10). */
    assert_int_equal(room_resume(f->e, "r", epoch, 4, &res), ROOM_RESUME_DELTAS);
    assert_int_equal(res.n, 6);
    room_resume_release(&res);
    /* Up to date: nothing. */
    assert_int_equal(room_resume(f->e, "r", epoch, 10, &res), ROOM_RESUME_DELTAS);
    assert_int_equal(res.n, 0);
    room_resume_release(&res);
    /* An empty-model client (epoch 0, seq 0) in a young room: deltas. */
    assert_int_equal(join(f, "young", "u", "s", NULL), 0);
    advance(f, 50);
    assert_int_equal(room_resume(f->e, "young", 0, 0, &res), ROOM_RESUME_DELTAS);
    assert_int_equal(res.n, 1);
    assert_int_equal(res.msgs[0].payload->len, f->d[f->nd - 1].p->len);
    assert_memory_equal(res.msgs[0].payload->data, f->d[f->nd - 1].p->data, f->d[f->nd - 1].p->len);
    room_resume_release(&res);
    /* A room that does not exist: an empty model is up to date. */
    assert_int_equal(room_resume(f->e, "none", 0, 0, &res), ROOM_RESUME_DELTAS);
    assert_int_equal(res.n, 0);
    room_resume_release(&res);
    fx_free(f);
}

static void test_resume_gets_snapshot(void **state)
{
    struct fx *f = ten_deltas();
    uint64_t epoch = f->d[0].epoch;
    struct room_resume res;
    struct room_stats st;
    cJSON *s;

    (void)state;
    /* Older than the ring, from the future, another epoch: a snapshot. */
    for (int k = 0; k < 3; k++) {
        uint64_t e = k == 2 ? epoch + 1 : epoch, since = k == 0 ? 3 : (k == 1 ? 11 : 9);
        assert_int_equal(room_resume(f->e, "r", e, since, &res), ROOM_RESUME_SNAPSHOT);
        assert_int_equal(res.kind, ROOM_RESUME_SNAPSHOT);
        assert_int_equal(res.n, 1);
        s = parse_msg(pjson(res.msgs[0].payload), pjson_len(res.msgs[0].payload));
        assert_string_equal(jstr(s, "type"), "room_snapshot");
        assert_int_equal(jnum(s, "seq"), 10);
        assert_int_equal(jnum(s, "epoch"), epoch);
        assert_int_equal(jnum(s, "count"), 10);
        cJSON_Delete(s);
        room_resume_release(&res);
    }
    /* An empty-model client when the ring no longer reaches seq 1. */
    assert_int_equal(room_resume(f->e, "r", 0, 0, &res), ROOM_RESUME_SNAPSHOT);
    room_resume_release(&res);
    /* A room that does not exist: the epoch-0 empty snapshot. */
    assert_int_equal(room_resume(f->e, "none", epoch, 3, &res), ROOM_RESUME_SNAPSHOT);
    s = parse_msg(pjson(res.msgs[0].payload), pjson_len(res.msgs[0].payload));
    assert_int_equal(jnum(s, "epoch"), 0);
    assert_int_equal(jnum(s, "count"), 0);
    cJSON_Delete(s);
    room_resume_release(&res);
    assert_int_equal(room_resume(f->e, "bad/id", 0, 0, &res), ROOM_E_ROOM_ID);
    assert_int_equal(res.n, 0);
    room_get_stats(f->e, &st);
    assert_int_equal(st.resumes_deltas, 0);
    assert_int_equal(st.resumes_snapshot, 5);
    fx_free(f);
}

/* A room keeps about a snapshot's worth of deltas for resume (4 KiB at
 * least): a resume that would send more gets the snapshot instead. */
static void test_ring_snapshot_budget(void **state)
{
    struct fx *f = fx_new(NULL);
    struct room_resume res;
    char meta[600];
    uint64_t epoch, last;

    (void)state;
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    assert_int_equal(join(f, "r", "u2", "s", NULL), 0);
    advance(f, 50);
    epoch = f->d[0].epoch;
    /* 40 patches of ~600 bytes: ~24 KiB of deltas, far over both the
     * floor and this two-member room's snapshot */
    for (int i = 0; i < 40; i++) {
        snprintf(meta, sizeof(meta), "{\"n\":%d,\"pad\":\"%0500d\"}", i, 0);
        assert_int_equal(patch(f, "r", "u1", meta), 0);
        advance(f, 50);
    }
    last = f->d[f->nd - 1].seq;
    assert_int_equal(room_resume(f->e, "r", epoch, last - 4, &res), ROOM_RESUME_DELTAS);
    assert_int_equal(res.n, 4); /* recent ones: still deltas */
    room_resume_release(&res);
    assert_int_equal(room_resume(f->e, "r", epoch, last - 20, &res), ROOM_RESUME_SNAPSHOT);
    room_resume_release(&res);
    /* the ring holds at most 4 KiB or the snapshot's size, not 64 KiB */
    for (uint64_t k = 1; k < 20; k++) {
        if (room_resume(f->e, "r", epoch, last - k, &res) == ROOM_RESUME_SNAPSHOT) {
            size_t kept = 0;
            room_resume_release(&res);
            assert_int_equal(room_resume(f->e, "r", epoch, last - (k - 1), &res),
                             ROOM_RESUME_DELTAS);
            for (size_t i = 0; i < res.n; i++)
                kept += res.msgs[i].payload->len;
            assert_true(kept <= 4096);
            assert_true(kept + 700 > 4096 / 2); /* about full */
            room_resume_release(&res);
            break;
        }
        room_resume_release(&res);
    }
    fx_free(f);
}

static void test_ring_byte_bound(void **state)
{
    struct room_config c;
    struct room_resume res;
    struct fx *f;
    char user[16];
    size_t one;
    char *huge;

    (void)state;
    room_config_init(&c);
    c.ring_bytes = 400;
    f = fx_new(&c);
    for (int i = 0; i < 10; i++) {
        snprintf(user, sizeof(user), "u%d", i);
        assert_int_equal(join(f, "r", user, "s", NULL), 0);
        advance(f, 50);
    }
    one = f->d[9].p->len;
    assert_true(one * 2 <= 400 && one * 5 > 400);
    /* The ring keeps as many of the newest as fit in 400 bytes. */
    {
        size_t fit = 0, bytes = 0;
        for (size_t i = 10; i-- > 0 && bytes + f->d[i].p->len <= 400;)
            bytes += f->d[i].p->len, fit++;
        assert_int_equal(room_resume(f->e, "r", f->d[0].epoch, 10 - fit, &res), ROOM_RESUME_DELTAS);
        assert_int_equal(res.n, fit);
        room_resume_release(&res);
        assert_int_equal(room_resume(f->e, "r", f->d[0].epoch, 10 - fit - 1, &res),
                         ROOM_RESUME_SNAPSHOT);
        room_resume_release(&res);
    }
    /* A delta larger than the bound empties the ring. */
    huge = meta_of_size(600);
    assert_int_equal(join(f, "r", "big", "s", huge), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 11);
    assert_int_equal(room_resume(f->e, "r", f->d[0].epoch, 10, &res), ROOM_RESUME_SNAPSHOT);
    room_resume_release(&res);
    assert_int_equal(room_resume(f->e, "r", f->d[0].epoch, 11, &res), ROOM_RESUME_DELTAS);
    assert_int_equal(res.n, 0);
    room_resume_release(&res);
    /* and the ring restarts with the next one. */
    assert_int_equal(join(f, "r", "after", "s", NULL), 0);
    advance(f, 50);
    assert_int_equal(room_resume(f->e, "r", f->d[0].epoch, 11, &res), ROOM_RESUME_DELTAS);
    assert_int_equal(res.n, 1);
    room_resume_release(&res);
    free(huge);
    fx_free(f);
}

static void test_empty_room_deleted(void **state)
{
    struct fx *f = fx_new(NULL);
    struct room_info info;
    uint64_t epoch;
    cJSON *d;

    (void)state;
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    advance(f, 50);
    epoch = f->d[0].epoch;
    assert_int_equal(leave(f, "r", "u1", "s"), 0);
    assert_int_equal(rooms(f), 1); /* until the leave is flushed */
    advance(f, 50);
    assert_int_equal(f->nd, 2);
    assert_int_equal(rooms(f), 0);
    assert_int_equal(room_get_info(f->e, "r", &info), ROOM_E_NO_ROOM);
    assert_int_equal(info.epoch, 0);
    assert_int_equal(info.count, 0);
    /* Re-created: another epoch, seq from 1 again. */
    assert_int_equal(join(f, "r", "u2", "s", NULL), 0);
    advance(f, 50);
    d = rec_json(&f->d[2]);
    assert_int_equal(jnum(d, "seq"), 1);
    assert_int_not_equal(jnum(d, "epoch"), epoch);
    assert_true(jnum(d, "epoch") > 0 && jnum(d, "epoch") < (UINT64_C(1) << 53));
    cJSON_Delete(d);
    fx_free(f);
}

static void test_frame_hook(void **state)
{
    struct room_config c;
    struct room_resume res;
    struct room_msg m;
    struct fx *f;

    (void)state;
    room_config_init(&c);
    c.codec = &hdr_codec;
    f = fx_new(&c);
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    advance(f, 50);
    assert_int_equal(eph(f, "r", "u1", "cursor", "{\"x\":1}"), 0);
    assert_int_equal(f->nd, 1);
    assert_int_equal(f->nx, 1);
    assert_memory_equal(f->d[0].p->data, "HDR:{", 5);
    assert_ptr_equal(f->d[0].json, f->d[0].p->data + 4);
    assert_memory_equal(f->x[0].p->data, "HDR:{\"type\":\"ephemeral\"", 23);
    assert_int_equal(room_resume(f->e, "r", f->d[0].epoch, 0, &res), ROOM_RESUME_DELTAS);
    assert_int_equal(res.msgs[0].payload->len, f->d[0].p->len);
    assert_memory_equal(res.msgs[0].payload->data, f->d[0].p->data, f->d[0].p->len);
    assert_ptr_equal(pjson(res.msgs[0].payload), res.msgs[0].payload->data + 4);
    room_resume_release(&res);
    assert_int_equal(room_snapshot(f->e, "r", &m), 0);
    assert_memory_equal(m.payload->data, "HDR:{\"type\":\"room_snapshot\"", 27);
    assert_int_equal(pjson_len(m.payload) + 4, m.payload->len);
    payload_unref(m.payload);
    fx_free(f);
}

/* Another protocol's codec gets the same messages from the same kept
 * values: a resume and a snapshot through hdr_codec are the configured
 * codec's bytes with its header, and do not touch the snapshot cache. */
static void test_resume_and_snapshot_as(void **state)
{
    struct fx *f = fx_new(NULL);
    struct room_resume res;
    struct room_msg a, b, mine;

    (void)state;
    assert_int_equal(join(f, "r", "u1", "s", "{\"n\":1}"), 0);
    advance(f, 50);
    assert_int_equal(join(f, "r", "u2", "s", NULL), 0);
    assert_int_equal(patch(f, "r", "u1", "{\"n\":2}"), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 2);
    assert_int_equal(room_resume_as(f->e, "r", f->d[0].epoch, 0, &hdr_codec, &res),
                     ROOM_RESUME_DELTAS);
    assert_int_equal(res.n, 2);
    for (size_t i = 0; i < res.n; i++) {
        assert_int_equal(res.msgs[i].seq, f->d[i].seq);
        assert_memory_equal(res.msgs[i].payload->data, "HDR:", 4);
        assert_int_equal(res.msgs[i].payload->len, f->d[i].p->len + 4);
        assert_memory_equal(res.msgs[i].payload->data + 4, f->d[i].p->data, f->d[i].p->len);
    }
    room_resume_release(&res);
    assert_int_equal(room_snapshot(f->e, "r", &mine), 0);
    assert_int_equal(room_snapshot_as(f->e, "r", &hdr_codec, &a), 0);
    assert_int_equal(room_snapshot_as(f->e, "r", &hdr_codec, &b), 0);
    assert_ptr_not_equal(a.payload, b.payload); /* not cached */
    assert_int_equal(a.payload->len, mine.payload->len + 4);
    assert_memory_equal(a.payload->data + 4, mine.payload->data, mine.payload->len);
    payload_unref(a.payload);
    payload_unref(b.payload);
    assert_int_equal(room_snapshot(f->e, "r", &a), 0);
    assert_ptr_equal(a.payload, mine.payload); /* the cache is the room's codec's */
    payload_unref(a.payload);
    payload_unref(mine.payload);
    /* Too old for the ring (another epoch): a snapshot through the codec. */
    assert_int_equal(room_resume_as(f->e, "r", f->d[0].epoch + 1, 1, &hdr_codec, &res),
                     ROOM_RESUME_SNAPSHOT);
    assert_memory_equal(res.msgs[0].payload->data, "HDR:{\"type\":\"room_snapshot\"", 27);
    room_resume_release(&res);
    fx_free(f);
}

/* ---- large rooms ---- */

static void join_n(struct fx *f, const char *room, int from, int to)
{
    char user[16];

    for (int i = from; i < to; i++) {
        snprintf(user, sizeof(user), "u%03d", i);
        assert_int_equal(join(f, room, user, "s", NULL), 0);
    }
}

static void leave_n(struct fx *f, const char *room, int from, int to)
{
    char user[16];

    for (int i = from; i < to; i++) {
        snprintf(user, sizeof(user), "u%03d", i);
        assert_int_equal(leave(f, room, user, "s"), 0);
    }
}

/* Every resumable message since 0 comes back as the same bytes: the
 * room's current epoch began with recorded message first. */
static void assert_resume_bytes(struct fx *f, uint64_t epoch, size_t first)
{
    struct room_resume res;

    for (size_t since = 0; since <= f->nd - first; since++) {
        assert_int_equal(room_resume(f->e, "r", epoch, since, &res), ROOM_RESUME_DELTAS);
        assert_int_equal(res.n, f->nd - first - since);
        for (size_t i = 0; i < res.n; i++) {
            const struct rec *d = &f->d[first + since + i];
            assert_int_equal(res.msgs[i].seq, d->seq);
            assert_int_equal(res.msgs[i].payload->len, d->p->len);
            assert_memory_equal(res.msgs[i].payload->data, d->p->data, d->p->len);
            assert_int_equal(pjson_len(res.msgs[i].payload), d->json_len);
            assert_ptr_equal(pjson(res.msgs[i].payload), res.msgs[i].payload->data + 4);
        }
        room_resume_release(&res);
    }
}

/* The ring keeps messages compactly (without their head, normal-mode
 * deltas as their three lists) and frames them again on resume: normal
 * and interval deltas and the snapshot that ends interval mode come back
 * byte for byte. The room left showing nobody (7) starts a new epoch, at
 * seq 1 (8), whose messages come back too, until it shows nobody again (9). */
static void test_resume_rebuilds_every_kind(void **state)
{
    struct room_config c;
    struct fx *f;
    char odd[] = "{\"n\":\"x],\\\"leaves\\\":[\\\"y\\u00e9\"}";

    (void)state;
    room_config_init(&c);
    c.codec = &hdr_codec;
    c.interval_enter = 4;
    c.interval_leave = 2;
    c.interval_ms = 200;
    f = fx_new(&c);
    assert_int_equal(join(f, "r", "hidden", "s", NULL), 0); /* keeps the room */
    assert_int_equal(room_set_visible(f->e, "r", "hidden", false, f->now), 0);
    join_n(f, "r", 0, 3);
    advance(f, 50); /* 1: normal, three joins */
    join_n(f, "r", 3, 4);
    advance(f, 50); /* 2: into interval mode */
    join_n(f, "r", 4, 6);
    assert_int_equal(patch(f, "r", "u000", odd), 0);
    advance(f, 200); /* 3: interval, joins and a patch */
    leave_n(f, "r", 0, 5);
    advance(f, 200); /* 4: back to normal: a snapshot of one */
    assert_int_equal(join(f, "r", "u006", "s", "{\"k\":[1,2]}"), 0);
    assert_int_equal(patch(f, "r", "u005", odd), 0);
    advance(f, 50); /* 5: normal, a join and a patch */
    join_n(f, "r", 0, 4);
    advance(f, 50); /* 6: interval again */
    leave_n(f, "r", 0, 4);
    leave_n(f, "r", 5, 7);
    assert_resume_bytes(f, f->d[0].epoch, 0);
    advance(f, 200); /* 7: back to normal with nobody to show */
    assert_int_equal(join(f, "r", "u009", "s", odd), 0);
    advance(f, 50); /* 8: a join */
    assert_resume_bytes(f, f->d[7].epoch, 7);
    assert_int_equal(leave(f, "r", "u009", "s"), 0);
    advance(f, 50); /* 9: a leave */
    assert_int_equal(f->nd, 9);
    assert_memory_equal(f->d[3].json, "{\"type\":\"room_snapshot\"", 23);
    assert_memory_equal(f->d[6].json, "{\"type\":\"room_snapshot\"", 23);
    assert_int_equal(f->d[7].seq, 1);
    assert_true(f->d[7].epoch != f->d[0].epoch);
    /* Nobody to show again: that epoch is over too (a snapshot). */
    {
        struct room_resume res;
        assert_int_equal(room_resume(f->e, "r", f->d[7].epoch, 2, &res), ROOM_RESUME_SNAPSHOT);
        cJSON *m = parse_msg(pjson(res.msgs[0].payload), pjson_len(res.msgs[0].payload));
        assert_int_equal(jnum(m, "epoch"), 0);
        cJSON_Delete(m);
        room_resume_release(&res);
    }
    fx_free(f);
}

/* c with interval thresholds 10 / 6 and small lists. */
static void small_interval_config(struct room_config *c)
{
    room_config_init(c);
    c->interval_enter = 10;
    c->interval_leave = 6;
    c->snapshot_limit = 3;
    c->interval_list_limit = 2;
}

static void test_interval_mode_enter(void **state)
{
    struct room_config c;
    struct room_info info;
    struct fx *f;
    cJSON *d, *s;

    (void)state;
    small_interval_config(&c);
    f = fx_new(&c);
    join_n(f, "r", 0, 9);
    /* Invisible members do not count toward the threshold. */
    assert_int_equal(join(f, "r", "hidden", "s", NULL), 0);
    assert_int_equal(room_set_visible(f->e, "r", "hidden", false, f->now), 0);
    advance(f, 50);
    d = rec_json(&f->d[0]);
    assert_string_equal(jstr(d, "mode"), "normal");
    assert_int_equal(jnum(d, "count"), 9);
    assert_int_equal(jlen(d, "joins"), 9);
    cJSON_Delete(d);
    /* The 10th member switches the room; the delta says so, capped. */
    join_n(f, "r", 9, 12);
    advance(f, 50);
    assert_int_equal(f->nd, 2);
    d = rec_json(&f->d[1]);
    assert_string_equal(jstr(d, "mode"), "interval");
    assert_int_equal(jnum(d, "count"), 12);
    assert_int_equal(jlen(d, "joins"), 2);
    assert_int_equal(jnum(d, "joinCount"), 3);
    assert_int_equal(jnum(d, "leaveCount"), 0);
    assert_int_equal(jnum(d, "patchCount"), 0);
    cJSON_Delete(d);
    s = snapshot(f, "r");
    assert_string_equal(jstr(s, "mode"), "interval");
    assert_int_equal(jnum(s, "count"), 12);
    assert_int_equal(jlen(s, "members"), 3); /* the first 3, in join order */
    assert_string_equal(jstr(cJSON_GetArrayItem(jarr(s, "members"), 0), "user"), "u000");
    assert_string_equal(jstr(cJSON_GetArrayItem(jarr(s, "members"), 2), "user"), "u002");
    cJSON_Delete(s);
    assert_int_equal(room_get_info(f->e, "r", &info), 0);
    assert_int_equal(info.mode, ROOM_MODE_INTERVAL);
    /* Interval batches: nothing after 50 ms, one delta after 1 s. */
    leave_n(f, "r", 0, 3);
    assert_int_equal(patch(f, "r", "u005", "{\"x\":1}"), 0);
    advance(f, 990);
    assert_int_equal(f->nd, 2);
    advance(f, 10);
    assert_int_equal(f->nd, 3);
    d = rec_json(&f->d[2]);
    assert_string_equal(jstr(d, "type"), "room_delta");
    assert_string_equal(jstr(d, "mode"), "interval"); /* 9 > 6: hysteresis */
    assert_int_equal(jnum(d, "count"), 9);
    assert_int_equal(jlen(d, "leaves"), 2);
    assert_int_equal(jnum(d, "leaveCount"), 3);
    assert_int_equal(jlen(d, "patches"), 1);
    assert_int_equal(jnum(d, "patchCount"), 1);
    cJSON_Delete(d);
    fx_free(f);
}

static void test_interval_mode_hysteresis(void **state)
{
    struct room_config c;
    struct room_msg m;
    struct room_resume res;
    struct fx *f;
    cJSON *d;

    (void)state;
    small_interval_config(&c);
    f = fx_new(&c);
    join_n(f, "r", 0, 12);
    advance(f, 50);
    d = rec_json(&f->d[0]);
    assert_string_equal(jstr(d, "mode"), "interval");
    cJSON_Delete(d);
    /* Down to 7, still interval; to 6, back to normal with a full
     * snapshot as the message for that seq. */
    leave_n(f, "r", 0, 5);
    advance(f, 1000);
    d = rec_json(&f->d[1]);
    assert_string_equal(jstr(d, "mode"), "interval");
    assert_int_equal(jnum(d, "count"), 7);
    cJSON_Delete(d);
    leave_n(f, "r", 5, 6);
    advance(f, 1000);
    assert_int_equal(f->nd, 3);
    d = rec_json(&f->d[2]);
    assert_string_equal(jstr(d, "type"), "room_snapshot");
    assert_string_equal(jstr(d, "mode"), "normal");
    assert_int_equal(jnum(d, "seq"), 3);
    assert_int_equal(jnum(d, "count"), 6);
    assert_int_equal(jlen(d, "members"), 6);
    cJSON_Delete(d);
    /* It is also the cached snapshot, and in the ring. */
    assert_int_equal(room_snapshot(f->e, "r", &m), 0);
    assert_ptr_equal(m.payload, f->d[2].p);
    payload_unref(m.payload);
    assert_int_equal(room_resume(f->e, "r", f->d[0].epoch, 1, &res), ROOM_RESUME_DELTAS);
    assert_int_equal(res.n, 2);
    assert_int_equal(res.msgs[1].payload->len, f->d[2].p->len);
    assert_memory_equal(res.msgs[1].payload->data, f->d[2].p->data, f->d[2].p->len);
    room_resume_release(&res);
    /* Back in normal mode: 50 ms windows; up to 9 stays normal, 10
     * switches again. */
    join_n(f, "r", 100, 103);
    advance(f, 50);
    d = rec_json(&f->d[3]);
    assert_string_equal(jstr(d, "mode"), "normal");
    assert_int_equal(jnum(d, "count"), 9);
    assert_int_equal(jlen(d, "joins"), 3);
    cJSON_Delete(d);
    join_n(f, "r", 103, 104);
    advance(f, 50);
    d = rec_json(&f->d[4]);
    assert_string_equal(jstr(d, "mode"), "interval");
    assert_int_equal(jnum(d, "count"), 10);
    cJSON_Delete(d);
    fx_free(f);
}

/* ---- visibility ---- */

/* A room that shows nobody after a flush but lives on (a hidden member
 * keeps it) reads as no room, and its next change re-creates it: seq 1 of
 * a new epoch, as in the world without the hidden member (fuzz_engine
 * bug 2: epoch 0, then the old epoch's seq 3). */
static void test_room_shows_nobody_restarts(void **state)
{
    struct fx *f = fx_new(NULL);
    struct room_resume res;
    struct room_info info;
    cJSON *s;

    (void)state;
    assert_int_equal(join(f, "r", "ghost", "s", NULL), 0);
    assert_int_equal(room_set_visible(f->e, "r", "ghost", false, f->now), 0);
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    advance(f, 50);
    assert_int_equal(patch(f, "r", "u1", "{\"a\":1}"), 0);
    advance(f, 50);
    assert_int_equal(leave(f, "r", "u1", "s"), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 3);
    assert_int_equal(f->d[2].seq, 3);
    assert_int_equal(room_get_info(f->e, "r", &info), 0);
    assert_int_equal(info.seq, 0);
    assert_true(info.epoch != 0 && info.epoch != f->d[0].epoch);
    s = snapshot(f, "r");
    assert_int_equal(jnum(s, "epoch"), 0);
    assert_int_equal(jnum(s, "seq"), 0);
    cJSON_Delete(s);
    /* The old epoch resumes to the empty room's snapshot. */
    assert_int_equal(room_resume(f->e, "r", f->d[0].epoch, 3, &res), ROOM_RESUME_SNAPSHOT);
    room_resume_release(&res);
    assert_int_equal(join(f, "r", "u2", "s", NULL), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 4);
    assert_int_equal(f->d[3].seq, 1);
    assert_int_equal(f->d[3].epoch, info.epoch);
    /* An empty-model client gets it from the ring. */
    assert_int_equal(room_resume(f->e, "r", 0, 0, &res), ROOM_RESUME_DELTAS);
    assert_int_equal(res.n, 1);
    room_resume_release(&res);
    fx_free(f);
}

static void test_invisible_members(void **state)
{
    struct fx *f = fx_new(NULL);
    struct room_info info;
    struct room_member_view v;
    cJSON *d, *s;

    (void)state;
    /* Joining invisibly: nothing is ever published. */
    assert_int_equal(join(f, "r", "ghost", "s", NULL), 0);
    assert_int_equal(room_set_visible(f->e, "r", "ghost", false, f->now), 0);
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 1);
    d = rec_json(&f->d[0]);
    assert_int_equal(jnum(d, "count"), 1);
    assert_int_equal(jlen(d, "joins"), 1);
    assert_string_equal(jstr(cJSON_GetArrayItem(jarr(d, "joins"), 0), "user"), "u1");
    cJSON_Delete(d);
    s = snapshot(f, "r");
    assert_int_equal(jnum(s, "count"), 1);
    assert_int_equal(jlen(s, "members"), 1);
    cJSON_Delete(s);
    assert_int_equal(room_get_info(f->e, "r", &info), 0);
    assert_int_equal(info.count, 1);
    assert_int_equal(info.members, 2);
    assert_int_equal(room_get_member(f->e, "r", "ghost", &v), 0);
    assert_false(v.visible);
    assert_false(v.published);
    /* Its patches stay private. */
    assert_int_equal(patch(f, "r", "ghost", "{\"a\":1}"), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 1);
    /* Becoming visible is a join; invisible again a leave. */
    assert_int_equal(room_set_visible(f->e, "r", "ghost", true, f->now), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 2);
    d = rec_json(&f->d[1]);
    assert_int_equal(jlen(d, "joins"), 1);
    assert_int_equal(
        jnum(cJSON_GetObjectItem(cJSON_GetArrayItem(jarr(d, "joins"), 0), "meta"), "a"), 1);
    assert_int_equal(jnum(d, "count"), 2);
    cJSON_Delete(d);
    assert_int_equal(room_set_visible(f->e, "r", "ghost", false, f->now), 0);
    advance(f, 50);
    d = rec_json(&f->d[2]);
    assert_int_equal(jlen(d, "leaves"), 1);
    assert_int_equal(jnum(d, "count"), 1);
    cJSON_Delete(d);
    /* A flip and back inside a window is nothing; setting the same value
     * is a no-op. */
    assert_int_equal(room_set_visible(f->e, "r", "ghost", true, f->now), 0);
    assert_int_equal(room_set_visible(f->e, "r", "ghost", false, f->now), 0);
    assert_int_equal(room_set_visible(f->e, "r", "ghost", false, f->now), 0);
    advance(f, 100);
    assert_int_equal(f->nd, 3);
    /* Invisible members keep a room alive and count toward the limit, and
     * leaving is not announced. */
    assert_int_equal(leave(f, "r", "u1", "s"), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 4);
    assert_int_equal(rooms(f), 1);
    assert_int_equal(leave(f, "r", "ghost", "s"), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 4);
    assert_int_equal(rooms(f), 0);
    assert_int_equal(room_set_visible(f->e, "r", "ghost", true, f->now), ROOM_E_NO_ROOM);
    fx_free(f);
}

/* ---- ephemeral lane ---- */

static void test_ephemeral_rate_and_coalescing(void **state)
{
    struct fx *f = fx_new(NULL);
    char data[64];
    uint64_t start;
    cJSON *x;

    (void)state;
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    advance(f, 50);
    start = f->now;
    /* 100 cursor updates in one second, one every 10 ms. */
    for (int i = 0; i < 100; i++) {
        snprintf(data, sizeof(data), "{\"x\":%d,\"y\":%d}", i, -i);
        assert_int_equal(eph(f, "r", "u1", "cursor", data), 0);
        advance(f, 10);
    }
    /* At most one message per 1000/15 ms: no more than 15 in any second. */
    for (size_t i = 1; i < f->nx; i++)
        assert_true(f->x[i].at - f->x[i - 1].at >= 67);
    for (size_t i = 0; i < f->nx; i++) {
        size_t in_window = 0;
        for (size_t j = i; j < f->nx && f->x[j].at < f->x[i].at + 1000; j++)
            in_window++;
        assert_true(in_window <= 15);
    }
    assert_true(f->nx >= 14);
    advance(f, 200);
    assert_true(f->nx <= 16);
    /* The last value is always delivered. */
    x = rec_json(&f->x[f->nx - 1]);
    assert_string_equal(jstr(x, "type"), "ephemeral");
    assert_string_equal(jstr(x, "room"), "r");
    assert_string_equal(jstr(x, "user"), "u1");
    assert_string_equal(jstr(x, "kind"), "cursor");
    assert_int_equal(jnum(cJSON_GetObjectItem(x, "data"), "x"), 99);
    cJSON_Delete(x);
    /* The first one went out at once. */
    assert_int_equal(f->x[0].at, start);
    assert_string_equal(f->x[0].user, "u1");
    /* Never a lifecycle delta, never a seq. */
    assert_int_equal(f->nd, 1);
    {
        struct room_info info;
        struct room_stats st;
        assert_int_equal(room_get_info(f->e, "r", &info), 0);
        assert_int_equal(info.seq, 1);
        room_get_stats(f->e, &st);
        assert_int_equal(st.ephemeral_sent, f->nx);
        assert_int_equal(st.ephemeral_sent + st.ephemeral_coalesced, 100);
    }
    fx_free(f);
}

static void test_ephemeral_senders_and_kinds(void **state)
{
    struct fx *f = fx_new(NULL);
    struct room_resume res;
    int u1 = 0, u2 = 0;

    (void)state;
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    assert_int_equal(join(f, "r", "u2", "s", NULL), 0);
    advance(f, 50);
    /* Two senders are independent: both go out at once. */
    assert_int_equal(eph(f, "r", "u1", "cursor", "1"), 0);
    assert_int_equal(eph(f, "r", "u2", "cursor", "2"), 0);
    assert_int_equal(f->nx, 2);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(eph(f, "r", "u1", "cursor", "1"), 0);
        assert_int_equal(eph(f, "r", "u2", "cursor", "2"), 0);
        advance(f, 10);
    }
    for (size_t i = 0; i < f->nx; i++) {
        u1 += strcmp(f->x[i].user, "u1") == 0;
        u2 += strcmp(f->x[i].user, "u2") == 0;
    }
    assert_int_equal(u1, u2);
    assert_true(u1 >= 3);
    advance(f, 500);
    /* Two kinds of one sender: each kind's latest value is delivered, one
     * message per period. */
    {
        size_t before = f->nx;
        cJSON *a, *b;
        assert_int_equal(eph(f, "r", "u1", "cursor", "{\"x\":1}"), 0); /* at once */
        assert_int_equal(eph(f, "r", "u1", "typing", "true"), 0);
        assert_int_equal(eph(f, "r", "u1", "cursor", "{\"x\":2}"), 0);
        assert_int_equal(eph(f, "r", "u1", "typing", "false"), 0);
        assert_int_equal(f->nx, before + 1);
        advance(f, 70);
        assert_int_equal(f->nx, before + 2);
        advance(f, 70);
        assert_int_equal(f->nx, before + 3);
        advance(f, 500);
        assert_int_equal(f->nx, before + 3);
        a = rec_json(&f->x[before + 1]);
        b = rec_json(&f->x[before + 2]);
        /* Oldest pending kind first: typing was pending before the second
         * cursor value. */
        assert_string_equal(jstr(a, "kind"), "typing");
        assert_false(cJSON_IsTrue(cJSON_GetObjectItem(a, "data")));
        assert_string_equal(jstr(b, "kind"), "cursor");
        assert_int_equal(jnum(cJSON_GetObjectItem(b, "data"), "x"), 2);
        cJSON_Delete(a);
        cJSON_Delete(b);
    }
    /* Ephemeral messages are never in the delta ring. */
    assert_int_equal(room_resume(f->e, "r", f->d[0].epoch, 0, &res), ROOM_RESUME_DELTAS);
    assert_int_equal(res.n, 1);
    for (size_t i = 0; i < f->nx; i++)
        assert_ptr_not_equal(res.msgs[0].payload, f->x[i].p);
    room_resume_release(&res);
    assert_int_equal(f->nd, 1);
    fx_free(f);
}

static void test_ephemeral_errors(void **state)
{
    struct room_config c;
    struct fx *f;
    char *big;

    (void)state;
    room_config_init(&c);
    c.max_ephemeral_kinds = 2;
    f = fx_new(&c);
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    assert_int_equal(join(f, "r", "ghost", "s", NULL), 0);
    assert_int_equal(room_set_visible(f->e, "r", "ghost", false, f->now), 0);
    advance(f, 50);
    assert_int_equal(eph(f, "nowhere", "u1", "cursor", "1"), ROOM_E_NO_ROOM);
    assert_int_equal(eph(f, "r", "stranger", "cursor", "1"), ROOM_E_NOT_MEMBER);
    assert_int_equal(eph(f, "r", "ghost", "cursor", "1"), ROOM_E_INVISIBLE);
    assert_int_equal(eph(f, "r", "u1", "", "1"), ROOM_E_KIND);
    assert_int_equal(eph(f, "r", "u1", "a-kind-that-is-longer-than-32-byt", "1"), ROOM_E_KIND);
    assert_int_equal(eph(f, "r", "u1", "a kind", "1"), ROOM_E_KIND);
    assert_int_equal(eph(f, "r", "u 1", "cursor", "1"), ROOM_E_USER_ID);
    assert_int_equal(eph(f, "r r", "u1", "cursor", "1"), ROOM_E_ROOM_ID);
    assert_int_equal(eph(f, "r", "u1", "cursor", "{x:1}"), ROOM_E_DATA_JSON);
    assert_int_equal(eph(f, "r", "u1", "cursor", "+1"), ROOM_E_DATA_JSON);
    big = meta_of_size(1025);
    assert_int_equal(eph(f, "r", "u1", "cursor", big), ROOM_E_DATA_SIZE);
    big[1024] = '\0';
    big[1023] = '}';
    big[1022] = '"';
    assert_int_equal(eph(f, "r", "u1", "cursor", big), 0);
    free(big);
    assert_int_equal(eph(f, "r", "u1", "typing", "true"), 0);
    assert_int_equal(eph(f, "r", "u1", "third", "1"), ROOM_E_KINDS);
    assert_int_equal(eph(f, "r", "u1", "typing", "false"), 0);
    assert_int_equal(f->nx, 1); /* only the first one so far */
    /* A member that left cannot publish, and its pending values are
     * dropped: no ghost cursor after the leave, even though the sender's
     * period ends before the leave is flushed. */
    advance(f, 60);
    assert_int_equal(f->nx, 1);
    assert_int_equal(leave(f, "r", "u1", "s"), 0);
    assert_int_equal(eph(f, "r", "u1", "cursor", "1"), ROOM_E_NOT_MEMBER);
    advance(f, 1000);
    assert_int_equal(f->nx, 1);
    fx_free(f);
}

static void test_ephemeral_never_precedes_join(void **state)
{
    struct room_config c;
    struct fx *f;
    cJSON *d;

    (void)state;
    room_config_init(&c);
    c.interval_enter = 3;
    c.interval_leave = 1;
    f = fx_new(&c);
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    advance(f, 50);
    assert_int_equal(join(f, "r", "u2", "s", NULL), 0);
    assert_int_equal(patch(f, "r", "u1", "{\"p\":1}"), 0);
    assert_int_equal(eph(f, "r", "u2", "cursor", "{\"x\":1}"), 0);
    assert_int_equal(eph(f, "r", "u2", "cursor", "{\"x\":2}"), 0);
    /* u2's values wait for the flush that publishes its join; the batch
     * is not flushed early. */
    assert_int_equal(f->nd, 1);
    assert_int_equal(f->nx, 0);
    advance(f, 40);
    assert_int_equal(f->nx, 0);
    advance(f, 10);
    assert_int_equal(f->nd, 2);
    assert_int_equal(f->nx, 1);
    assert_true(f->d[1].order < f->x[0].order);
    assert_int_equal(f->x[0].at, f->d[1].at);
    d = rec_json(&f->d[1]);
    assert_int_equal(jlen(d, "joins"), 1);
    assert_int_equal(jlen(d, "patches"), 1);
    cJSON_Delete(d);
    d = rec_json(&f->x[0]);
    assert_int_equal(jnum(cJSON_GetObjectItem(d, "data"), "x"), 2); /* latest wins */
    cJSON_Delete(d);
    /* In interval mode a joiner's cursor waits for the interval flush. */
    assert_int_equal(join(f, "r", "u3", "s", NULL), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 3); /* the switch to interval mode */
    assert_int_equal(join(f, "r", "u4", "s", NULL), 0);
    assert_int_equal(eph(f, "r", "u4", "cursor", "1"), 0);
    advance(f, 990);
    assert_int_equal(f->nd, 3);
    assert_int_equal(f->nx, 1);
    advance(f, 10);
    assert_int_equal(f->nd, 4);
    assert_int_equal(f->nx, 2);
    assert_string_equal(f->x[1].user, "u4");
    /* Turning invisible drops pending values. */
    assert_int_equal(eph(f, "r", "u2", "cursor", "{\"x\":3}"), 0);
    assert_int_equal(eph(f, "r", "u2", "cursor", "{\"x\":4}"), 0);
    assert_int_equal(f->nx, 3);
    assert_int_equal(room_set_visible(f->e, "r", "u2", false, f->now), 0);
    advance(f, 2000);
    assert_int_equal(f->nx, 3);
    fx_free(f);
}

/* ---- re-entrancy ---- */

/* Hook: inside callbacks, change the rooms the engine is emitting for. */
static void reentrant_hook(struct fx *f, const struct room_event *ev)
{
    int *step = f->arg;
    struct room_msg m;

    /* Reads are fine, and agree with what is being emitted. */
    assert_int_equal(room_snapshot(f->e, ev->room, &m), 0);
    payload_unref(m.payload);
    switch ((*step)++) {
    case 0: /* in u1's join delta: u1 leaves and the room is flushed */
        assert_int_equal(leave(f, "r", "u1", "s"), 0);
        assert_int_equal(room_flush(f->e, "r", f->now), 0);
        break;
    case 1: /* the nested leave delta: the room is empty but busy */
        assert_int_equal(rooms(f), 1);
        break;
    case 2: /* in u2's ephemeral message: u2 is kicked */
        assert_int_equal(room_kick(f->e, "q", "u2", f->now), 0);
        assert_int_equal(room_flush(f->e, "q", f->now), 0);
        break;
    default:
        break;
    }
}

static void test_callbacks_may_reenter(void **state)
{
    struct fx *f = fx_new(NULL);
    int step = 0;

    (void)state;
    f->hook = reentrant_hook;
    f->arg = &step;
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    advance(f, 50);
    assert_int_equal(step, 2);
    assert_int_equal(f->nd, 2);
    assert_int_equal(rooms(f), 0); /* deleted once the callbacks returned */
    f->hook = NULL;
    assert_int_equal(join(f, "q", "u2", "s", NULL), 0);
    assert_int_equal(room_flush(f->e, "q", f->now), 0);
    assert_int_equal(f->nd, 3);
    f->hook = reentrant_hook;
    assert_int_equal(eph(f, "q", "u2", "cursor", "1"), 0);
    assert_int_equal(step, 4);
    assert_int_equal(f->nx, 1);
    assert_int_equal(rooms(f), 0);
    advance(f, 500);
    fx_free(f);
}

/* ---- reads ---- */

static void test_encode_info(void **state)
{
    struct fx *f = fx_new(NULL);
    struct buf b = {0};
    cJSON *v;

    (void)state;
    room_engine_set_wall_offset(f->e, 1000);
    assert_int_equal(join(f, "r", "u1", "s", "{\"n\":\"A\"}"), 0);
    assert_int_equal(join(f, "r", "u2", "s", NULL), 0);
    assert_int_equal(join(f, "r", "u3", "s", NULL), 0);
    advance(f, 50);
    assert_int_equal(room_encode_info(f->e, "r", 2, &b), 0);
    v = parse_msg(b.data, b.len);
    assert_null(cJSON_GetObjectItem(v, "type"));
    assert_string_equal(jstr(v, "room"), "r");
    assert_int_equal(jnum(v, "seq"), 1);
    assert_int_equal(jnum(v, "count"), 3);
    assert_int_equal(jlen(v, "members"), 2);
    assert_int_equal(jnum(cJSON_GetArrayItem(jarr(v, "members"), 0), "joinedAt"), T0 + 1000);
    cJSON_Delete(v);
    b.len = 0;
    assert_int_equal(room_encode_info(f->e, "none", 10, &b), 0);
    assert_int_equal(b.len, strlen("{\"room\":\"none\",\"epoch\":0,\"seq\":0,\"mode\":\"normal\","
                                   "\"count\":0,\"digest\":\"0000000000000000\",\"members\":[]}"));
    assert_memory_equal(b.data, "{\"room\":\"none\",\"epoch\":0", 24);
    b.len = 0;
    assert_int_equal(room_encode_info(f->e, "x y", 10, &b), ROOM_E_ROOM_ID);
    assert_int_equal(b.len, 0);
    buf_release(&b);
    fx_free(f);
}

static bool hide_named(const char *user, void *ctx)
{
    for (const char *const *p = ctx; *p; p++)
        if (strcmp(*p, user) == 0)
            return true;
    return false;
}

/* The digest string a message or read carries, as a number. */
static uint64_t jdigest(const cJSON *v)
{
    return strtoull(jstr(v, "digest"), NULL, 16);
}

/* The member digest: FNV-1a-64 per id (the published test vectors),
 * XORed over exactly the members shown, in every message and read, the
 * same after any order of changes, and the same bytes on resume. */
static void test_digest(void **state)
{
    struct fx *f = fx_new(NULL);
    const char *u1[] = {"u1", NULL};
    uint64_t d1 = room_digest_of("u1"), d2 = room_digest_of("u2"), d3 = room_digest_of("u3");
    struct room_head h;
    struct buf b = {0};
    cJSON *v;

    (void)state;
    assert_true(room_digest_of("") == UINT64_C(0xcbf29ce484222325));
    assert_true(room_digest_of("a") == UINT64_C(0xaf63dc4c8601ec8c));
    assert_true(room_digest_of("foobar") == UINT64_C(0x85944171f73967e8));
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    assert_int_equal(join(f, "r", "u2", "s", NULL), 0);
    advance(f, 50);
    v = rec_json(&f->d[0]);
    assert_true(jdigest(v) == (d1 ^ d2));
    cJSON_Delete(v);
    assert_int_equal(join(f, "r", "u3", "s", NULL), 0);
    assert_int_equal(patch(f, "r", "u1", "{\"x\":1}"), 0); /* metadata is not in it */
    advance(f, 50);
    assert_int_equal(leave(f, "r", "u2", "s"), 0);
    advance(f, 50);
    assert_int_equal(f->nd, 3);
    v = rec_json(&f->d[2]);
    assert_true(jdigest(v) == (d1 ^ d3));
    cJSON_Delete(v);
    v = snapshot(f, "r");
    assert_true(jdigest(v) == (d1 ^ d3));
    cJSON_Delete(v);
    assert_int_equal(room_encode_info(f->e, "r", 10, &b), 0);
    v = parse_msg(b.data, b.len);
    assert_true(jdigest(v) == (d1 ^ d3));
    cJSON_Delete(v);
    /* A reader u1 blocks: u1 is not in its digest, as not in its count. */
    assert_int_equal(room_view_head(f->e, "r", hide_named, (void *)u1, &h), 0);
    assert_true(h.digest == d3);
    assert_int_equal(room_view_head(f->e, "r", NULL, NULL, &h), 0);
    assert_true(h.digest == (d1 ^ d3));
    /* Invisible: out of the digest; everyone gone: 0 in a new epoch. */
    assert_int_equal(room_set_visible(f->e, "r", "u3", false, f->now), 0);
    advance(f, 50);
    v = rec_json(&f->d[3]);
    assert_true(jdigest(v) == d1);
    cJSON_Delete(v);
    assert_int_equal(leave(f, "r", "u1", "s"), 0);
    advance(f, 50);
    v = rec_json(&f->d[4]);
    assert_true(jdigest(v) == 0);
    cJSON_Delete(v);
    buf_release(&b);
    fx_free(f);
}

struct listed {
    char rooms[4][16];
    size_t count[4], sessions[4], n;
};

static void list_cb(void *ctx, const char *room, size_t count, size_t sessions)
{
    struct listed *l = ctx;

    assert_true(l->n < 4);
    snprintf(l->rooms[l->n], sizeof(l->rooms[0]), "%s", room);
    l->count[l->n] = count;
    l->sessions[l->n++] = sessions;
}

/* The published members' sessions (Pusher's subscription_count of a
 * presence channel) and the list of rooms with published members: a
 * reader's blockers and an invisible member are not counted. */
static void test_listed_sessions(void **state)
{
    struct fx *f = fx_new(NULL);
    const char *u1[] = {"u1", NULL};
    struct listed l = {0};

    (void)state;
    assert_int_equal(join(f, "r", "u1", "s1", NULL), 0);
    assert_int_equal(join(f, "r", "u1", "s2", NULL), 0);
    assert_int_equal(join(f, "r", "u2", "s3", NULL), 0);
    assert_int_equal(join(f, "hid", "u3", "s4", NULL), 0);
    assert_int_equal(room_set_visible(f->e, "hid", "u3", false, f->now), 0);
    advance(f, 50);
    assert_int_equal(room_listed_sessions(f->e, "r", NULL, NULL), 3);
    assert_int_equal(room_listed_sessions(f->e, "r", hide_named, (void *)u1), 1);
    assert_int_equal(room_listed_sessions(f->e, "hid", NULL, NULL), 0);
    assert_int_equal(room_listed_sessions(f->e, "gone", NULL, NULL), 0);
    room_list_published(f->e, list_cb, &l);
    assert_int_equal(l.n, 1); /* "hid" shows nobody */
    assert_string_equal(l.rooms[0], "r");
    assert_int_equal(l.count[0], 2);
    assert_int_equal(l.sessions[0], 3);
    fx_free(f);
}

/* A reader blocked by some members: they are neither listed nor counted,
 * and a room of blockers only reads exactly like an absent one. */
static void test_encode_info_hiding(void **state)
{
    struct fx *f = fx_new(NULL);
    const char *u1[] = {"u1", NULL}, *both[] = {"u1", "u3", NULL};
    struct buf b = {0}, none = {0};
    cJSON *v;

    (void)state;
    assert_int_equal(join(f, "r", "u1", "s", NULL), 0);
    assert_int_equal(join(f, "r", "u2", "s", NULL), 0);
    assert_int_equal(join(f, "only", "u1", "s", NULL), 0);
    advance(f, 50);
    assert_int_equal(room_encode_info_for(f->e, "r", 10, hide_named, (void *)u1, &b), 0);
    v = parse_msg(b.data, b.len);
    assert_int_equal(jnum(v, "count"), 1);
    assert_int_equal(jlen(v, "members"), 1);
    assert_string_equal(jstr(cJSON_GetArrayItem(jarr(v, "members"), 0), "user"), "u2");
    cJSON_Delete(v);
    b.len = 0;
    assert_int_equal(room_encode_info_for(f->e, "r", 1, hide_named, (void *)both, &b), 0);
    v = parse_msg(b.data, b.len); /* hiding a non-member changes nothing else */
    assert_int_equal(jnum(v, "count"), 1);
    cJSON_Delete(v);
    b.len = 0;
    assert_int_equal(room_encode_info_for(f->e, "only", 10, hide_named, (void *)u1, &b), 0);
    assert_int_equal(room_encode_info(f->e, "only", 10, &none), 0);
    assert_true(none.len > b.len); /* u1 is shown to others */
    none.len = 0;
    assert_int_equal(room_encode_info_for(f->e, "only", 10, NULL, NULL, &none), 0);
    assert_true(none.len > b.len);
    none.len = 0;
    assert_int_equal(room_encode_info(f->e, "gone", 10, &none), 0);
    assert_int_equal(b.len, none.len); /* "only" and "gone": same length, same bytes but the id */
    assert_memory_equal(b.data + strlen("{\"room\":\"only\""),
                        none.data + strlen("{\"room\":\"gone\""),
                        b.len - strlen("{\"room\":\"only\""));
    buf_release(&b);
    buf_release(&none);
    fx_free(f);
}

/* ---- randomized: client models built from deltas equal the snapshots ---- */

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* A client's view of one room, built only from messages. */
struct model {
    char room[16];
    uint64_t epoch;
    uint64_t seq;
    bool interval;
    uint64_t count;
    cJSON *members; /* object: user -> member */
};

static void model_reset(struct model *m, const cJSON *snap)
{
    const cJSON *x;

    cJSON_Delete(m->members);
    m->members = cJSON_CreateObject();
    m->epoch = jnum(snap, "epoch");
    m->seq = jnum(snap, "seq");
    m->count = jnum(snap, "count");
    m->interval = strcmp(jstr(snap, "mode"), "interval") == 0;
    cJSON_ArrayForEach(x, jarr(snap, "members"))
        cJSON_AddItemToObject(m->members, jstr(x, "user"), cJSON_Duplicate(x, true));
}

/* Applies one message as a client would; strict in normal mode. */
static void model_apply(struct model *m, const char *json, size_t n)
{
    cJSON *d = parse_msg(json, n);
    const cJSON *x;

    if (strcmp(jstr(d, "type"), "room_snapshot") == 0) {
        model_reset(m, d);
        cJSON_Delete(d);
        return;
    }
    assert_string_equal(jstr(d, "type"), "room_delta");
    if (jnum(d, "epoch") != m->epoch) {
        /* A new room: only from the empty state, at seq 1. */
        assert_int_equal(m->count, 0);
        assert_int_equal(jnum(d, "seq"), 1);
        m->epoch = jnum(d, "epoch");
        m->seq = 0;
    }
    assert_int_equal(jnum(d, "seq"), m->seq + 1);
    cJSON_ArrayForEach(x, jarr(d, "leaves"))
    {
        assert_true(m->interval || cJSON_HasObjectItem(m->members, x->valuestring));
        cJSON_DeleteItemFromObjectCaseSensitive(m->members, x->valuestring);
    }
    cJSON_ArrayForEach(x, jarr(d, "joins"))
    {
        assert_true(m->interval || !cJSON_HasObjectItem(m->members, jstr(x, "user")));
        cJSON_DeleteItemFromObjectCaseSensitive(m->members, jstr(x, "user"));
        cJSON_AddItemToObject(m->members, jstr(x, "user"), cJSON_Duplicate(x, true));
    }
    cJSON_ArrayForEach(x, jarr(d, "patches"))
    {
        assert_true(m->interval || cJSON_HasObjectItem(m->members, jstr(x, "user")));
        cJSON_DeleteItemFromObjectCaseSensitive(m->members, jstr(x, "user"));
        cJSON_AddItemToObject(m->members, jstr(x, "user"), cJSON_Duplicate(x, true));
    }
    m->seq = jnum(d, "seq");
    m->count = jnum(d, "count");
    m->interval = strcmp(jstr(d, "mode"), "interval") == 0;
    if (!m->interval)
        assert_int_equal(cJSON_GetArraySize(m->members), m->count);
    cJSON_Delete(d);
}

/* The model must equal the room's snapshot: exactly in normal mode, in
 * count, seq and mode in interval mode. */
static void model_check(struct fx *f, const struct model *m)
{
    cJSON *s = snapshot(f, m->room);
    const cJSON *x;

    if (jnum(s, "seq") == 0) { /* the room is gone or new: the model is empty */
        assert_int_equal(m->count, 0);
        assert_int_equal(cJSON_GetArraySize(m->members), 0);
        cJSON_Delete(s);
        return;
    }
    assert_int_equal(jnum(s, "epoch"), m->epoch);
    assert_int_equal(jnum(s, "seq"), m->seq);
    assert_int_equal(jnum(s, "count"), m->count);
    assert_int_equal(strcmp(jstr(s, "mode"), "interval") == 0, m->interval);
    if (!m->interval) {
        assert_int_equal(jlen(s, "members"), cJSON_GetArraySize(m->members));
        cJSON_ArrayForEach(x, jarr(s, "members"))
            assert_true(cJSON_Compare(x, cJSON_GetObjectItem(m->members, jstr(x, "user")), true));
    }
    cJSON_Delete(s);
}

struct random_ctx {
    struct model models[2];
    struct model saved[2]; /* a copy of each model at some earlier seq */
};

static void random_hook(struct fx *f, const struct room_event *ev)
{
    struct random_ctx *rc = f->arg;

    for (int i = 0; i < 2; i++) {
        struct model *m = &rc->models[i];
        if (strcmp(m->room, ev->room) != 0)
            continue;
        if (!ev->droppable)
            model_apply(m, pjson(ev->msg.payload), pjson_len(ev->msg.payload));
        else if (!m->interval) /* never from someone clients do not see */
            assert_true(cJSON_HasObjectItem(m->members, ev->user));
    }
}

static void model_copy(struct model *dst, const struct model *src)
{
    cJSON_Delete(dst->members);
    *dst = *src;
    dst->members = cJSON_Duplicate(src->members, true);
}

/* Resuming (a copy of) the saved model must bring it to the current
 * snapshot. Returns the kind of answer. */
static int check_resume(struct fx *f, const struct model *saved)
{
    struct model m = {0};
    struct room_resume res;
    int kind;

    model_copy(&m, saved);
    kind = room_resume(f->e, m.room, m.epoch, m.seq, &res);
    assert_true(kind == ROOM_RESUME_DELTAS || kind == ROOM_RESUME_SNAPSHOT);
    for (size_t i = 0; i < res.n; i++)
        model_apply(&m, pjson(res.msgs[i].payload), pjson_len(res.msgs[i].payload));
    room_resume_release(&res);
    if (!m.interval)
        model_check(f, &m);
    cJSON_Delete(m.members);
    return kind;
}

static void random_run(const struct room_config *c, uint64_t seed, int steps)
{
    struct random_ctx rc = {0};
    struct fx *f = fx_new(c);
    char user[16], session[ROOM_ID_MAX + 1], text[64];

    rng_state = seed;
    f->hook = random_hook;
    f->arg = &rc;
    for (int i = 0; i < 2; i++) {
        snprintf(rc.models[i].room, sizeof(rc.models[i].room), "room%d", i);
        rc.models[i].members = cJSON_CreateObject();
        model_copy(&rc.saved[i], &rc.models[i]);
    }
    for (int step = 0; step < steps; step++) {
        const char *room = rc.models[rnd(2)].room;
        /* Alternate growing and shrinking phases so that rooms cross the
         * mode thresholds both ways and empty out now and then. */
        bool grow = (step / 1500) % 2 == 0;
        uint32_t op = rnd(100), joins = grow ? 40 : 2, leaves = 55;

        snprintf(user, sizeof(user), "u%u", rnd(60));
        snprintf(session, sizeof(session), "s%u", rnd(3));
        if (op < joins) {
            uint32_t n = rnd(3), c = rnd(3);
            snprintf(text, sizeof(text), "{\"n\":%u,\"c\":\"%c\"}", n, (char)('a' + c));
            room_join(f->e, room, user, session, rnd(2) ? text : NULL, strlen(text), f->now);
        } else if (op < leaves) {
            struct room_member_view v;
            /* While shrinking, leave with a session the member has. */
            if (!grow && room_get_member(f->e, room, user, &v) == 0)
                snprintf(session, sizeof(session), "%s", v.session_ids[rnd((uint32_t)v.nsessions)]);
            room_leave(f->e, room, user, session, f->now);
        } else if (op < 65) {
            const char *p[] = {"{\"n\":1}", "{\"c\":null}", "{\"d\":{\"x\":1}}", "{\"d\":null}",
                               "{\"n\":0,\"c\":\"a\"}"};
            const char *t = p[rnd(ARRAY_SIZE(p))];
            room_patch(f->e, room, user, t, strlen(t), f->now);
        } else if (op < 70) {
            room_set_visible(f->e, room, user, rnd(3) != 0, f->now);
        } else if (op < (grow ? 72u : 76u)) {
            room_kick(f->e, room, user, f->now);
        } else if (op < 78) {
            room_flush(f->e, room, f->now);
        } else if (op < 80) {
            room_ephemeral(f->e, room, user, "cursor", "{\"x\":1}", 7, f->now);
        } else if (op < 95) {
            advance(f, rnd(80));
        } else if (op < 98) {
            /* At any moment, pending batch or not. */
            model_check(f, &rc.models[0]);
            model_check(f, &rc.models[1]);
        } else {
            /* Resume an older copy; keep it aging now and then, so that
             * some resumes fall off the ring. */
            int i = rnd(2);
            check_resume(f, &rc.saved[i]);
            if (rnd(4) == 0)
                model_copy(&rc.saved[i], &rc.models[i]);
        }
    }
    advance(f, 2000);
    for (int i = 0; i < 2; i++) {
        model_check(f, &rc.models[i]);
        check_resume(f, &rc.saved[i]);
        cJSON_Delete(rc.models[i].members);
        cJSON_Delete(rc.saved[i].members);
    }
    assert_true(f->nd > 100);
    fx_free(f);
}

static void test_random_deltas_rebuild_snapshot(void **state)
{
    struct room_config c;

    (void)state;
    room_config_init(&c);
    c.ring_len = 64;
    random_run(&c, UINT64_C(0x9E3779B97F4A7C15), 30000);
}

static void test_random_with_interval_mode(void **state)
{
    struct room_config c;

    (void)state;
    room_config_init(&c);
    c.interval_enter = 20;
    c.interval_leave = 14;
    c.interval_ms = 200;
    c.snapshot_limit = 5;
    c.interval_list_limit = 3;
    c.ring_len = 16;
    random_run(&c, UINT64_C(0x2545F4914F6CDD1D), 30000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids_and_errors),
        cmocka_unit_test(test_config_check),
        cmocka_unit_test(test_two_tabs_one_member),
        cmocka_unit_test(test_session_values),
        cmocka_unit_test(test_session_values_limit),
        cmocka_unit_test(test_sessions_inline_and_overflow),
        cmocka_unit_test(test_meta_shared),
        cmocka_unit_test(test_join_leave_in_window_is_nothing),
        cmocka_unit_test(test_leave_rejoin_in_window),
        cmocka_unit_test(test_patch_in_place),
        cmocka_unit_test(test_merge_patch_semantics),
        cmocka_unit_test(test_meta_limits),
        cmocka_unit_test(test_limits_and_leave_errors),
        cmocka_unit_test(test_full_ignores_unseen),
        cmocka_unit_test(test_kick),
        cmocka_unit_test(test_seq_by_one),
        cmocka_unit_test(test_snapshot_is_published_state),
        cmocka_unit_test(test_snapshot_uncached),
        cmocka_unit_test(test_resume_missed_deltas),
        cmocka_unit_test(test_resume_gets_snapshot),
        cmocka_unit_test(test_ring_byte_bound),
        cmocka_unit_test(test_ring_snapshot_budget),
        cmocka_unit_test(test_empty_room_deleted),
        cmocka_unit_test(test_frame_hook),
        cmocka_unit_test(test_resume_and_snapshot_as),
        cmocka_unit_test(test_resume_rebuilds_every_kind),
        cmocka_unit_test(test_interval_mode_enter),
        cmocka_unit_test(test_interval_mode_hysteresis),
        cmocka_unit_test(test_invisible_members),
        cmocka_unit_test(test_room_shows_nobody_restarts),
        cmocka_unit_test(test_ephemeral_rate_and_coalescing),
        cmocka_unit_test(test_ephemeral_senders_and_kinds),
        cmocka_unit_test(test_ephemeral_errors),
        cmocka_unit_test(test_ephemeral_never_precedes_join),
        cmocka_unit_test(test_callbacks_may_reenter),
        cmocka_unit_test(test_encode_info),
        cmocka_unit_test(test_encode_info_hiding),
        cmocka_unit_test(test_listed_sessions),
        cmocka_unit_test(test_digest),
        cmocka_unit_test(test_random_deltas_rebuild_snapshot),
        cmocka_unit_test(test_random_with_interval_mode),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
