/* SPDX-License-Identifier: MIT */
/*
 * test_phoenix_bin.c - realtime-js's binary broadcast push decoder
 * (phoenix_bin.h), on frames laid out as realtime-js 2.119.1's serializer
 * writes them, each read from the end of a page followed by a PROT_NONE
 * page, whole and cut short at every byte; and the server's kind-4
 * broadcast as realtime-js 2.119.1's _decodeUserBroadcast() reads it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "guard.h"
#include "phoenix_bin.h"

/* realtime-js's _encodeUserBroadcastPush() layout of the given parts. */
static size_t layout(char *out, const char *jr, const char *ref, const char *topic,
                     const char *event, const char *meta, int enc, const char *payload)
{
    const char *parts[] = {jr, ref, topic, event, meta};
    size_t n = 7;

    out[0] = PHX_BIN_PUSH;
    for (int i = 0; i < 5; i++) {
        out[1 + i] = (char)strlen(parts[i]);
        memcpy(out + n, parts[i], strlen(parts[i]));
        n += strlen(parts[i]);
    }
    out[6] = (char)enc;
    memcpy(out + n, payload, strlen(payload));
    return n + strlen(payload);
}

static bool span_is(struct phx_bin_span s, const char *want)
{
    return s.n == strlen(want) && memcmp(s.p, want, s.n) == 0;
}

static void test_json_push(void **state)
{
    char f[128];
    size_t n = layout(f, "1", "7", "realtime:room:lobby", "cursor", "", 1, "{\"x\":1}");
    struct guard g = guard_place(f, n);
    struct phx_bin_push m;

    (void)state;
    assert_int_equal(phx_bin_decode_push(g.data, n, &m), 0);
    assert_true(span_is(m.join_ref, "1"));
    assert_true(span_is(m.ref, "7"));
    assert_true(span_is(m.topic, "realtime:room:lobby"));
    assert_true(span_is(m.event, "cursor"));
    assert_int_equal(m.meta.n, 0);
    assert_true(m.json);
    assert_true(span_is(m.payload, "{\"x\":1}"));
    /* Cut short anywhere inside the header or the strings: refused. */
    for (size_t cut = 0; cut < n - strlen("{\"x\":1}"); cut++) {
        struct guard h = guard_place(f, cut);
        assert_int_equal(phx_bin_decode_push(h.data, cut, &m), PHX_BIN_E_SHORT);
        guard_free(&h);
    }
    guard_free(&g);
}

static void test_binary_push_with_meta(void **state)
{
    char f[128];
    size_t n = layout(f, "", "", "realtime:r", "blob", "{\"id\":\"a\"}", 0, "\x01\x02");
    struct guard g = guard_place(f, n);
    struct phx_bin_push m;

    (void)state;
    assert_int_equal(phx_bin_decode_push(g.data, n, &m), 0);
    assert_int_equal(m.join_ref.n, 0);
    assert_true(span_is(m.meta, "{\"id\":\"a\"}"));
    assert_false(m.json);
    assert_int_equal(m.payload.n, 2);
    guard_free(&g);
}

static void test_refused(void **state)
{
    char f[64];
    size_t n = layout(f, "1", "1", "t", "e", "", 1, "{}");
    struct phx_bin_push m;

    (void)state;
    assert_int_equal(phx_bin_decode_push(NULL, 0, &m), PHX_BIN_E_SHORT);
    f[0] = 4; /* a server's kind */
    assert_int_equal(phx_bin_decode_push(f, n, &m), PHX_BIN_E_KIND);
    f[0] = PHX_BIN_PUSH;
    f[6] = 2;
    assert_int_equal(phx_bin_decode_push(f, n, &m), PHX_BIN_E_ENC);
    assert_null(m.topic.p);
}

/* Kind 4: u8 kind, topic_len, event_len, meta_len, encoding, then the
 * strings and the payload, byte for byte. */
static void test_encode_cast(void **state)
{
    static const char want[] = "\x04\x0a\x06\x00\x00realtime:rcursor\x00\xff=";
    struct phx_bin_span topic = {"realtime:r", 10}, event = {"cursor", 6};
    struct buf b = {0};
    char long_topic[256];

    (void)state;
    assert_int_equal(phx_bin_encode_cast(&b, &topic, &event, "\x00\xff=", 3, false), 0);
    assert_int_equal(b.len, sizeof(want) - 1);
    assert_memory_equal(b.data, want, b.len);
    b.len = 0;
    assert_int_equal(phx_bin_encode_cast(&b, &topic, &event, "{}", 2, true), 0);
    assert_int_equal((unsigned char)b.data[4], 1);
    b.len = 0;
    assert_int_equal(phx_bin_encode_cast(&b, &topic, &event, "", 0, false), 0);
    assert_int_equal(b.len, 5 + 10 + 6);
    memset(long_topic, 't', sizeof(long_topic));
    topic = (struct phx_bin_span){long_topic, 256};
    b.len = 0;
    assert_int_equal(phx_bin_encode_cast(&b, &topic, &event, "", 0, false), PHX_BIN_E_LONG);
    assert_int_equal(b.len, 0);
    buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_push),
        cmocka_unit_test(test_binary_push_with_meta),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_encode_cast),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
