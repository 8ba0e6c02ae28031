/* SPDX-License-Identifier: MIT */
/*
 * test_native_encode.c - the native adapter's room codec (native_encode.c):
 * the room core's values (room.h) become exactly the JSON of
 * docs/protocol.md, byte for byte, in one WebSocket text frame each. These
 * are the shapes the room core used to write itself; the core's own tests
 * (test_room.c) read its values through a test codec.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "adapter.h"
#include "frame.h"
#include "native_encode.h"
#include "room.h"

static const struct room_entry ann = {
    .user = "u1", .joined_at = 1764406800000u, .meta = "{\"name\":\"Ann\"}", .meta_len = 14};
static const struct room_entry bob = {
    .user = "u3", .joined_at = 1764406800123u, .meta = "{}", .meta_len = 2};

/* f is one unmasked text frame whose message is exactly want. */
static void assert_frame(struct payload *f, const char *want)
{
    const char *p;
    size_t n;

    assert_int_equal((unsigned char)f->data[0], 0x81); /* FIN, text */
    frame_json(f, &p, &n);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(p, want, n);
    payload_unref(f);
}

static void test_delta_normal(void **state)
{
    const char *leaves[] = {"u2"};
    struct room_delta_view v = {
        .head = {"r", 5, 2, ROOM_MODE_NORMAL, 2, UINT64_C(0x0123456789abcdef)},
        .joins = &ann,
        .njoins = 1,
        .leaves = leaves,
        .nleaves = 1,
        .join_total = 1,
        .leave_total = 1,
    };
    struct buf scratch = {0};

    (void)state;
    buf_append_str(&scratch, "left over"); /* the encoder owns its contents */
    assert_frame(
        native_adapter.encode_room_delta(&v, &scratch),
        "{\"type\":\"room_delta\",\"room\":\"r\",\"epoch\":5,\"seq\":2,\"mode\":\"normal\","
        "\"count\":2,\"digest\":\"0123456789abcdef\",\"joins\":[{\"user\":\"u1\","
        "\"joinedAt\":1764406800000,\"meta\":{\"name\":\"Ann\"}}],\"leaves\":[\"u2\"],"
        "\"patches\":[]}");
    buf_release(&scratch);
}

static void test_delta_interval(void **state)
{
    struct room_entry two[] = {ann, bob};
    struct room_delta_view v = {
        .head = {"big", 9007199254740991u, 40, ROOM_MODE_INTERVAL, 1200, 0xfedcba9876543210u},
        .joins = two,
        .njoins = 2,
        .patches = &bob,
        .npatches = 1,
        .join_total = 250,
        .leave_total = 3,
        .patch_total = 1,
    };
    struct buf scratch = {0};

    (void)state;
    assert_frame(native_adapter.encode_room_delta(&v, &scratch),
                 "{\"type\":\"room_delta\",\"room\":\"big\",\"epoch\":9007199254740991,\"seq\":40,"
                 "\"mode\":\"interval\",\"count\":1200,\"digest\":\"fedcba9876543210\",\"joins\":[{"
                 "\"user\":\"u1\",\"joinedAt\":"
                 "1764406800000,\"meta\":{\"name\":\"Ann\"}},{\"user\":\"u3\",\"joinedAt\":"
                 "1764406800123,\"meta\":{}}],\"leaves\":[],\"patches\":[{\"user\":\"u3\","
                 "\"joinedAt\":1764406800123,\"meta\":{}}],\"joinCount\":250,\"leaveCount\":3,"
                 "\"patchCount\":1}");
    buf_release(&scratch);
}

static void test_snapshot(void **state)
{
    struct room_entry two[] = {ann, bob};
    struct room_snapshot_view v = {
        .head = {"r", 5, 3, ROOM_MODE_NORMAL, 2, 1}, .members = two, .nmembers = 2};
    struct room_snapshot_view empty = {.head = {.room = "gone", .mode = ROOM_MODE_NORMAL}};
    struct buf scratch = {0};

    (void)state;
    assert_frame(native_adapter.encode_room_snapshot(&v, &scratch),
                 "{\"type\":\"room_snapshot\",\"room\":\"r\",\"epoch\":5,\"seq\":3,\"mode\":"
                 "\"normal\",\"count\":2,\"digest\":\"0000000000000001\",\"members\":[{\"user\":"
                 "\"u1\",\"joinedAt\":1764406800000,"
                 "\"meta\":{\"name\":\"Ann\"}},{\"user\":\"u3\",\"joinedAt\":1764406800123,"
                 "\"meta\":{}}]}");
    assert_frame(native_adapter.encode_room_snapshot(&empty, &scratch),
                 "{\"type\":\"room_snapshot\",\"room\":\"gone\",\"epoch\":0,\"seq\":0,\"mode\":"
                 "\"normal\",\"count\":0,\"digest\":\"0000000000000000\",\"members\":[]}");
    buf_release(&scratch);
}

static void test_ephemeral(void **state)
{
    struct room_ephemeral_view v = {
        .room = "r", .user = "u1", .kind = "cursor", .data = "{\"x\":1,\"y\":2}", .data_len = 13};
    struct buf scratch = {0};

    (void)state;
    assert_frame(native_adapter.encode_room_ephemeral(&v, &scratch),
                 "{\"type\":\"ephemeral\",\"room\":\"r\",\"user\":\"u1\",\"kind\":\"cursor\","
                 "\"data\":{\"x\":1,\"y\":2}}");
    buf_release(&scratch);
}

/* A message over 125 bytes gets the 4-byte frame header: frame_json (what
 * the event-stream path and the blocks filter read) finds it whole. */
static void test_long_frame(void **state)
{
    struct room_entry many[8];
    struct room_snapshot_view v = {
        .head = {"r", 1, 1, ROOM_MODE_NORMAL, 8, 0}, .members = many, .nmembers = 8};
    struct buf scratch = {0};
    struct payload *f;
    const char *p;
    size_t n;

    (void)state;
    for (int i = 0; i < 8; i++)
        many[i] = ann;
    f = native_adapter.encode_room_snapshot(&v, &scratch);
    frame_json(f, &p, &n);
    assert_true(n > 125);
    assert_int_equal((unsigned char)f->data[1], 126);
    assert_int_equal(p[0], '{');
    assert_int_equal(p[n - 1], '}');
    payload_unref(f);
    buf_release(&scratch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delta_normal), cmocka_unit_test(test_delta_interval),
        cmocka_unit_test(test_snapshot),     cmocka_unit_test(test_ephemeral),
        cmocka_unit_test(test_long_frame),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
