/* SPDX-License-Identifier: MIT */
/*
 * test_phoenix_encode.c - the Phoenix adapter's encoders (phoenix_encode.h)
 * on room values built by hand: presence_state from Phoenix and native
 * members, presence_diff for joins, leaves and meta updates matched by
 * phx_ref, nothing for a change Phoenix does not show, the broadcast
 * envelope, both serializers, and the error records. Each frame is
 * parsed back with cJSON.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <cJSON.h>

#include "frame.h"
#include "phoenix_encode.h"
#include "room.h"

#define ANN_TWO \
    "{\"~metas\":{\"s1\":{\"phx_ref\":\"r1\",\"tab\":1},\"s2\":{\"phx_ref\":\"r2\",\"tab\":2}}}"
#define ANN_ONE "{\"~metas\":{\"s2\":{\"phx_ref\":\"r2\",\"tab\":2}}}"
#define ANN_UPD "{\"~metas\":{\"s2\":{\"phx_ref\":\"r3\",\"phx_ref_prev\":\"r2\",\"tab\":9}}}"

static struct room_entry entry(const char *user, const char *meta)
{
    return (struct room_entry){
        .user = user, .joined_at = 1000, .meta = meta, .meta_len = strlen(meta)};
}

/* The frame's JSON (a V2 array or V1 object), parsed; frees f. */
static cJSON *parse(struct payload *f)
{
    const char *p;
    size_t n;
    cJSON *v;

    assert_non_null(f);
    frame_json(f, &p, &n);
    v = cJSON_ParseWithLength(p, n);
    payload_unref(f);
    assert_non_null(v);
    return v;
}

/* The payload of a V2 frame, with the event checked. */
static const cJSON *payload_of(const cJSON *frame, const char *event)
{
    assert_true(cJSON_IsArray(frame));
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(frame, 0)));
    assert_string_equal(cJSON_GetArrayItem(frame, 2)->valuestring, "room:1");
    assert_string_equal(cJSON_GetArrayItem(frame, 3)->valuestring, event);
    return cJSON_GetArrayItem(frame, 4);
}

static const cJSON *metas(const cJSON *o, const char *key)
{
    const cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(o, key), "metas");

    assert_true(cJSON_IsArray(m));
    return m;
}

static void test_state(void **state)
{
    struct room_entry m[] = {entry("ann", ANN_TWO), entry("nat", "{\"name\":\"N\"}"),
                             entry("raw", "[1]")};
    struct room_snapshot_view v = {
        .head = {.room = "room:1", .count = 3}, .members = m, .nmembers = 3};
    struct buf scratch = {0};
    cJSON *f = parse(phoenix_adapter_v2.encode_room_snapshot(&v, &scratch));
    const cJSON *p = payload_of(f, "presence_state"), *x;

    (void)state;
    assert_int_equal(cJSON_GetArraySize(metas(p, "ann")), 2);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetArrayItem(metas(p, "ann"), 0), "phx_ref")->valuestring, "r1");
    x = cJSON_GetArrayItem(metas(p, "nat"), 0);
    assert_string_equal(cJSON_GetObjectItem(x, "name")->valuestring, "N");
    assert_true(cJSON_IsString(cJSON_GetObjectItem(x, "phx_ref")));
    x = cJSON_GetArrayItem(metas(p, "raw"), 0);
    assert_true(cJSON_IsArray(cJSON_GetObjectItem(x, "meta")));
    cJSON_Delete(f);
    buf_release(&scratch);
}

static void test_diff_patch_and_leave(void **state)
{
    struct room_entry now[] = {entry("ann", ANN_UPD)}, before[] = {entry("ann", ANN_TWO)};
    struct room_entry gone_prev[] = {entry("bob", "{\"b\":1}")};
    const char *gone[] = {"bob"};
    struct room_delta_view v = {.head = {.room = "room:1"},
                                .patches = now,
                                .npatches = 1,
                                .patches_prev = before,
                                .leaves = gone,
                                .nleaves = 1,
                                .leaves_prev = gone_prev};
    struct buf scratch = {0};
    cJSON *f = parse(phoenix_adapter_v2.encode_room_delta(&v, &scratch));
    const cJSON *p = payload_of(f, "presence_diff");
    const cJSON *joins = cJSON_GetObjectItem(p, "joins"),
                *leaves = cJSON_GetObjectItem(p, "leaves");

    (void)state;
    /* ann: r1 and r2 went (the session left, the other updated), r3 came. */
    assert_int_equal(cJSON_GetArraySize(metas(joins, "ann")), 1);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetArrayItem(metas(joins, "ann"), 0), "phx_ref_prev")
            ->valuestring,
        "r2");
    assert_int_equal(cJSON_GetArraySize(metas(leaves, "ann")), 2);
    assert_int_equal(cJSON_GetArraySize(metas(leaves, "bob")), 1);
    assert_int_equal(
        cJSON_GetObjectItem(cJSON_GetArrayItem(metas(leaves, "bob"), 0), "b")->valueint, 1);
    cJSON_Delete(f);
    buf_release(&scratch);
}

static void test_diff_one_session_leaves(void **state)
{
    struct room_entry now[] = {entry("ann", ANN_ONE)}, before[] = {entry("ann", ANN_TWO)};
    struct room_delta_view v = {
        .head = {.room = "room:1"}, .patches = now, .npatches = 1, .patches_prev = before};
    struct buf scratch = {0};
    cJSON *f = parse(phoenix_adapter_v2.encode_room_delta(&v, &scratch));
    const cJSON *p = payload_of(f, "presence_diff");

    (void)state;
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(p, "joins")), 0);
    assert_int_equal(cJSON_GetArraySize(metas(cJSON_GetObjectItem(p, "leaves"), "ann")), 1);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetArrayItem(metas(cJSON_GetObjectItem(p, "leaves"), "ann"), 0),
                            "phx_ref")
            ->valuestring,
        "r1");
    cJSON_Delete(f);
    /* The same metas before and after (a change Phoenix does not show):
     * nothing to send. */
    v.patches_prev = now;
    assert_null(phoenix_adapter_v2.encode_room_delta(&v, &scratch));
    buf_release(&scratch);
}

static void test_v1_and_broadcast(void **state)
{
    struct room_entry j[] = {entry("nat", "{}")};
    struct room_delta_view v = {.head = {.room = "room:1"}, .joins = j, .njoins = 1};
    struct room_broadcast_event ev = {
        .room = "room:1", .event = "cursor", .data = "{\"x\":1}", .user = "ann", .exclude = ""};
    struct buf scratch = {0};
    cJSON *f = parse(phoenix_adapter_v1.encode_room_delta(&v, &scratch)), *b;
    const cJSON *x;

    (void)state;
    assert_string_equal(cJSON_GetObjectItem(f, "topic")->valuestring, "room:1");
    assert_string_equal(cJSON_GetObjectItem(f, "event")->valuestring, "presence_diff");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(f, "ref")));
    assert_null(cJSON_GetObjectItem(f, "join_ref"));
    x = metas(cJSON_GetObjectItem(cJSON_GetObjectItem(f, "payload"), "joins"), "nat");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(x, 0)), 1); /* just its phx_ref */
    cJSON_Delete(f);
    b = parse(phoenix_adapter_v2.encode_room_broadcast(&ev));
    x = payload_of(b, "broadcast");
    assert_string_equal(cJSON_GetObjectItem(x, "type")->valuestring, "broadcast");
    assert_string_equal(cJSON_GetObjectItem(x, "event")->valuestring, "cursor");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(x, "payload"), "x")->valueint, 1);
    cJSON_Delete(b);
    buf_release(&scratch);
}

static void test_records(void **state)
{
    struct error_event ev = {.code = "room_full", .message = "the room is full", .ref = "c7"};
    struct payload *p = phoenix_adapter_v2.encode_error(&ev);
    struct phx_record r;

    (void)state;
    assert_true(phx_record_read(p, &r));
    assert_int_equal(r.kind, 'E');
    assert_string_equal(r.ref, "c7");
    assert_string_equal(r.code, "room_full");
    assert_string_equal(r.message, "the room is full");
    payload_unref(p);
    p = phoenix_adapter_v1.encode_ack("c8");
    assert_true(phx_record_read(p, &r));
    assert_int_equal(r.kind, 'A');
    assert_string_equal(r.ref, "c8");
    payload_unref(p);
    p = payload_from("\x81\x02{}", 4); /* a frame is not a record */
    assert_false(phx_record_read(p, &r));
    payload_unref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state),
        cmocka_unit_test(test_diff_patch_and_leave),
        cmocka_unit_test(test_diff_one_session_leaves),
        cmocka_unit_test(test_v1_and_broadcast),
        cmocka_unit_test(test_records),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
