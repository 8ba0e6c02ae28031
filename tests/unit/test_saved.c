/* SPDX-License-Identifier: MIT */
/*
 * test_saved.c - the encoding of saved sessions (saved.h): a full session
 * and a bare one survive encode and decode, the encoding is the
 * documented JSON, and every kind of damaged row is refused with its
 * error and leaves nothing to free. The restore into the presence core is
 * test_presence.c's; the store's rows test_store.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "saved.h"

static struct saved_room rooms2[] = {
    {"doc-42", "{\"name\":\"Alice\",\"n\":[1,2]}", true},
    {"lobby", "{}", false},
};

static struct saved_session full(void)
{
    struct saved_session s = {
        .sid = "9f2c0a",
        .user = "alice",
        .device = PRESENCE_DEVICE_MOBILE,
        .manual = PRESENCE_DND,
        .status_expires_ms = 1764410400000,
        .idle = true,
        .text = "In a meeting \xe2\x80\x94 back soon",
        .emoji = ":calendar:",
        .custom_expires_ms = 1764410500000,
        .last_seen_ms = 1764406800000,
        .last_activity_ms = 1764406790000,
        .offline_seen_ms = 1764400000000,
        .rooms = rooms2,
        .nrooms = 2,
    };
    return s;
}

static int decode_str(const char *sid, const char *json, struct saved_session *out)
{
    return saved_decode(sid, json, strlen(json), out);
}

static void test_round_trip(void **state)
{
    struct saved_session in = full(), out;
    struct buf b = {0};

    (void)state;
    saved_encode(&in, &b);
    assert_int_equal(saved_decode(in.sid, b.data, b.len, &out), 0);
    assert_string_equal(out.sid, "9f2c0a");
    assert_string_equal(out.user, "alice");
    assert_int_equal(out.device, PRESENCE_DEVICE_MOBILE);
    assert_int_equal(out.manual, PRESENCE_DND);
    assert_int_equal(out.status_expires_ms, 1764410400000);
    assert_true(out.idle);
    assert_false(out.http);
    assert_string_equal(out.text, in.text);
    assert_string_equal(out.emoji, ":calendar:");
    assert_int_equal(out.custom_expires_ms, 1764410500000);
    assert_int_equal(out.last_seen_ms, 1764406800000);
    assert_int_equal(out.last_activity_ms, 1764406790000);
    assert_int_equal(out.offline_seen_ms, 1764400000000);
    assert_int_equal(out.nrooms, 2);
    assert_string_equal(out.rooms[0].room, "doc-42");
    assert_string_equal(out.rooms[0].meta, "{\"name\":\"Alice\",\"n\":[1,2]}");
    assert_true(out.rooms[0].visible);
    assert_string_equal(out.rooms[1].room, "lobby");
    assert_string_equal(out.rooms[1].meta, "{}");
    assert_false(out.rooms[1].visible);
    saved_release(&out);
    saved_release(&out); /* idempotent */
    buf_release(&b);
}

static void test_bare_session_is_the_documented_json(void **state)
{
    struct saved_session in = {.sid = "s1",
                               .user = "bob",
                               .device = PRESENCE_DEVICE_WEB,
                               .http = true,
                               .last_seen_ms = 5},
                         out;
    struct buf b = {0};

    (void)state;
    saved_encode(&in, &b);
    buf_append(&b, "", 1);
    assert_string_equal(b.data, "{\"v\":1,\"user\":\"bob\",\"device\":\"web\",\"idle\":false,"
                                "\"http\":true,\"lastSeen\":5,\"rooms\":[]}");
    assert_int_equal(decode_str("s1", b.data, &out), 0);
    assert_int_equal(out.manual, PRESENCE_OFFLINE);
    assert_string_equal(out.text, "");
    assert_string_equal(out.emoji, "");
    assert_int_equal(out.nrooms, 0);
    assert_true(out.http);
    saved_release(&out);
    buf_release(&b);
    /* Unknown members are ignored, order does not matter, rooms optional. */
    assert_int_equal(
        decode_str("s1", "{\"x\":[1],\"device\":\"other\",\"user\":\"u\",\"v\":1}", &out), 0);
    assert_int_equal(out.device, PRESENCE_DEVICE_OTHER);
    saved_release(&out);
}

static void test_damaged_rows_are_refused(void **state)
{
    static const struct {
        const char *sid, *json;
        int err;
    } cases[] = {
        {"s", "", SAVED_E_JSON},
        {"s", "[1]", SAVED_E_JSON},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\"} x", SAVED_E_JSON},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"user\":\"\\u0000\"}", SAVED_E_JSON},
        {"s", "{\"user\":\"u\",\"device\":\"web\"}", SAVED_E_VERSION},
        {"s", "{\"v\":2,\"user\":\"u\",\"device\":\"web\"}", SAVED_E_VERSION},
        {"bad sid", "{\"v\":1,\"user\":\"u\",\"device\":\"web\"}", SAVED_E_ID},
        {"s", "{\"v\":1,\"user\":\"a b\",\"device\":\"web\"}", SAVED_E_ID},
        {"s", "{\"v\":1,\"user\":7,\"device\":\"web\"}", SAVED_E_ID},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"fridge\"}", SAVED_E_VALUE},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"manual\":\"online\"}", SAVED_E_VALUE},
        {"s",
         "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"manual\":\"away\",\"statusExpiresAt\":9}",
         SAVED_E_VALUE},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"idle\":1}", SAVED_E_VALUE},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"lastSeen\":-1}", SAVED_E_VALUE},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"lastSeen\":1.5}", SAVED_E_VALUE},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"lastSeen\":1e300}", SAVED_E_VALUE},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"offlineSeen\":\"1\"}", SAVED_E_VALUE},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"custom\":{\"emoji\":\"abc\"}}",
         SAVED_E_CUSTOM},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"custom\":{\"text\":\"a\\u0007\"}}",
         SAVED_E_CUSTOM},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"custom\":\"x\"}", SAVED_E_VALUE},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"rooms\":{}}", SAVED_E_VALUE},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"rooms\":[1]}", SAVED_E_VALUE},
        {"s", "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"rooms\":[{\"room\":\"a/b\"}]}",
         SAVED_E_ID},
        {"s",
         "{\"v\":1,\"user\":\"u\",\"device\":\"web\",\"rooms\":[{\"room\":\"r\",\"visible\":0}]}",
         SAVED_E_VALUE},
    };
    struct saved_session out;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int r = decode_str(cases[i].sid, cases[i].json, &out);

        if (r != cases[i].err)
            fail_msg("case %zu (%s): %d, want %d", i, cases[i].json, r, cases[i].err);
        assert_null(out.rooms);
        assert_null(out.text);
        assert_int_equal(out.nrooms, 0);
    }
    assert_int_equal(saved_decode(NULL, "{}", 2, &out), SAVED_E_ID);
    assert_int_equal(saved_decode("s", NULL, 0, &out), SAVED_E_JSON);
    assert_string_equal(saved_strerror(SAVED_E_ID), "invalid session, user or room id");
    assert_string_equal(saved_strerror(0), "unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bare_session_is_the_documented_json),
        cmocka_unit_test(test_damaged_rows_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
