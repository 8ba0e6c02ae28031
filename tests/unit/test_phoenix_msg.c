/* SPDX-License-Identifier: MIT */
/*
 * test_phoenix_msg.c - the Phoenix Channels codec. Inbound frames are the
 * ones phoenix.js 1.8 and @supabase/realtime-js 2.x write (the serializer
 * output of socket.js / serializer.js, JSON.stringify of the 1.0.0
 * object), outbound ones are compared byte for byte with what Phoenix's
 * serializers send. Every error code has its case, every limit is hit at
 * and one past its bound, and every decoded frame is read from the end of
 * a page followed by a PROT_NONE page, so an over-read crashes; realistic
 * frames are also decoded cut at every length.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "guard.h"
#include "phoenix_msg.h"
#include "utf8.h"

#define V1 PHX_VSN_1
#define V2 PHX_VSN_2

#define HEARTBEAT    "[null,\"5\",\"phoenix\",\"heartbeat\",{}]"
#define JOIN_PAYLOAD "{\"config\":{\"presence\":{\"key\":\"u1\"}}}"
#define JOIN_V2      "[\"3\",\"3\",\"realtime:room1\",\"phx_join\"," JOIN_PAYLOAD "]"

/* ---- helpers ---- */

/* phx_decode() of the C string s, read from the end of a page. */
static int decode(enum phx_vsn vsn, const char *s, struct phx_msg *m)
{
    struct guard g = guard_place(s, strlen(s));
    int rc = phx_decode(vsn, g.data, strlen(s), m);

    /* The payload points into the frame; compare it while it is mapped. */
    if (rc == 0)
        assert_true(m->payload >= g.data && m->payload + m->payload_len <= g.data + strlen(s));
    /* A copy by length: the payload is not NUL-terminated, and strndup()
     * under ASan's strict_string_checks reads on to the guard page. */
    if (rc == 0) {
        char *copy = malloc(m->payload_len + 1);

        assert_non_null(copy);
        memcpy(copy, m->payload, m->payload_len);
        copy[m->payload_len] = '\0';
        m->payload = copy;
    }
    guard_free(&g);
    return rc;
}

/* The same, for a frame with an error: returns the code and checks that
 * the message was left zero-filled. */
static int decode_err(enum phx_vsn vsn, const char *s)
{
    static const struct phx_msg zero;
    struct phx_msg m;
    int rc;

    memset(&m, 0x5a, sizeof(m));
    rc = decode(vsn, s, &m);
    assert_int_not_equal(rc, 0);
    assert_memory_equal(&m, &zero, sizeof(m));
    return rc;
}

static void msg_free(struct phx_msg *m)
{
    free((char *)m->payload);
    m->payload = NULL;
}

/* Decodes s with vsn and checks every field; NULL refs mean null. */
static void expect(enum phx_vsn vsn, const char *s, const char *join_ref, const char *ref,
                   const char *topic, const char *event, const char *payload)
{
    struct phx_msg m;

    assert_int_equal(decode(vsn, s, &m), 0);
    assert_int_equal(m.has_join_ref, join_ref != NULL);
    assert_string_equal(m.join_ref, join_ref ? join_ref : "");
    assert_int_equal(m.join_ref_len, strlen(m.join_ref));
    assert_int_equal(m.has_ref, ref != NULL);
    assert_string_equal(m.ref, ref ? ref : "");
    assert_int_equal(m.ref_len, strlen(m.ref));
    assert_string_equal(m.topic, topic);
    assert_int_equal(m.topic_len, strlen(topic));
    assert_string_equal(m.event, event);
    assert_int_equal(m.event_len, strlen(event));
    assert_int_equal(m.payload_len, strlen(payload));
    assert_string_equal(m.payload, payload);
    msg_free(&m);
}

/* A string of n copies of unit (a C string), as a JSON string literal. */
static char *repeat(const char *unit, size_t n)
{
    size_t u = strlen(unit);
    char *s = malloc(u * n + 3);

    s[0] = '"';
    for (size_t i = 0; i < n; i++)
        memcpy(s + 1 + i * u, unit, u);
    memcpy(s + 1 + u * n, "\"", 2);
    return s;
}

/* A 2.0.0 frame whose field f (0..3) is the JSON text v, others plain. */
static char *frame_with(int f, const char *v)
{
    const char *parts[4] = {"\"1\"", "\"2\"", "\"room:1\"", "\"ev\""};
    char *s;

    parts[f] = v;
    assert_int_not_equal(asprintf(&s, "[%s,%s,%s,%s,{}]", parts[0], parts[1], parts[2], parts[3]),
                         -1);
    return s;
}

/* decode_err() of frame_with(f, v), or 0 when it decodes. */
static int field_rc(int f, const char *v)
{
    char *s = frame_with(f, v);
    struct phx_msg m;
    int rc = decode(V2, s, &m);

    if (rc == 0)
        msg_free(&m);
    else
        assert_int_equal(decode_err(V2, s), rc);
    free(s);
    return rc;
}

/* The bytes b holds, as a C string (b stays the owner). */
static const char *text(struct buf *b)
{
    buf_append(b, "", 1);
    b->len--;
    return b->data;
}

/* ---- decoding: realistic frames ---- */

static void test_decode_phoenix_js(void **state)
{
    struct phx_msg m;

    (void)state;
    expect(V2, HEARTBEAT, NULL, "5", "phoenix", "heartbeat", "{}");
    assert_int_equal(decode(V2, HEARTBEAT, &m), 0);
    assert_true(phx_is_heartbeat(&m));
    msg_free(&m);
    expect(V2, "[\"1\",\"1\",\"room:lobby\",\"phx_join\",{}]", "1", "1", "room:lobby", "phx_join",
           "{}");
    expect(V2, "[\"1\",\"2\",\"room:lobby\",\"new_msg\",{\"body\":\"hi\"}]", "1", "2", "room:lobby",
           "new_msg", "{\"body\":\"hi\"}");
    expect(V2, "[\"1\",\"3\",\"room:lobby\",\"phx_leave\",{}]", "1", "3", "room:lobby", "phx_leave",
           "{}");
    assert_int_equal(decode(V2, "[\"1\",\"3\",\"room:lobby\",\"phx_leave\",{}]", &m), 0);
    assert_false(phx_is_heartbeat(&m));
    msg_free(&m);
}

static void test_decode_realtime_js(void **state)
{
    (void)state;
    expect(V2, JOIN_V2, "3", "3", "realtime:room1", "phx_join", JOIN_PAYLOAD);
    /* A full realtime-js join. */
    expect(V2,
           "[\"1\",\"1\",\"realtime:room1\",\"phx_join\",{\"config\":{\"broadcast\":{\"ack\":"
           "false,\"self\":false},\"presence\":{\"key\":\"u1\",\"enabled\":true},\"postgres_"
           "changes\":[],\"private\":false},\"access_token\":\"eyJhbGciOi.x.y\"}]",
           "1", "1", "realtime:room1", "phx_join",
           "{\"config\":{\"broadcast\":{\"ack\":false,\"self\":false},\"presence\":{\"key\":"
           "\"u1\",\"enabled\":true},\"postgres_changes\":[],\"private\":false},\"access_"
           "token\":\"eyJhbGciOi.x.y\"}");
    /* track() and untrack(). */
    expect(V2,
           "[\"1\",\"2\",\"realtime:room1\",\"presence\",{\"type\":\"presence\",\"event\":"
           "\"track\",\"payload\":{\"online_at\":\"2024-01-01T00:00:00.000Z\"}}]",
           "1", "2", "realtime:room1", "presence",
           "{\"type\":\"presence\",\"event\":\"track\",\"payload\":{\"online_at\":\"2024-01-"
           "01T00:00:00.000Z\"}}");
    expect(V2,
           "[\"1\",\"4\",\"realtime:room1\",\"presence\",{\"type\":\"presence\",\"event\":"
           "\"untrack\"}]",
           "1", "4", "realtime:room1", "presence", "{\"type\":\"presence\",\"event\":\"untrack\"}");
    expect(V2, "[\"1\",\"5\",\"realtime:room1\",\"access_token\",{\"access_token\":\"t\"}]", "1",
           "5", "realtime:room1", "access_token", "{\"access_token\":\"t\"}");
}

/* realtime-js up to 2025 and phoenix.js with vsn 1.0.0: JSON.stringify of
 * {topic, event, payload, ref, join_ref}; a heartbeat has no join_ref. */
static void test_decode_v1(void **state)
{
    (void)state;
    expect(V1,
           "{\"topic\":\"realtime:room1\",\"event\":\"phx_join\",\"payload\":" JOIN_PAYLOAD
           ",\"ref\":\"1\",\"join_ref\":\"1\"}",
           "1", "1", "realtime:room1", "phx_join", JOIN_PAYLOAD);
    expect(V1, "{\"topic\":\"phoenix\",\"event\":\"heartbeat\",\"payload\":{},\"ref\":\"2\"}", NULL,
           "2", "phoenix", "heartbeat", "{}");
    expect(V1,
           "{\"topic\":\"phoenix\",\"event\":\"heartbeat\",\"payload\":{},\"ref\":null,"
           "\"join_ref\":null}",
           NULL, NULL, "phoenix", "heartbeat", "{}");
    /* Any member order, whitespace, and members Phoenix ignores. */
    expect(V1,
           " {\n \"ref\" : \"7\" , \"extra\":[1,{\"topic\":2}], \"payload\" : { \"a\" : [ ] } ,"
           "\"join_ref\":\"6\",\"event\":\"e\",\"topic\":\"t\",\"x\":null,\"joinref\":1} \r\n",
           "6", "7", "t", "e", "{ \"a\" : [ ] }");
    /* Escaped member names are the names they decode to. */
    expect(V1,
           "{\"\\u0074opic\":\"t\",\"ev\\u0065nt\":\"e\",\"payload\":{},\"ref\":\"1\","
           "\"join_ref\\u0078\":5}",
           NULL, "1", "t", "e", "{}");
}

/* ---- decoding: strings ---- */

static void test_decode_escapes(void **state)
{
    (void)state;
    expect(V2, "[null,null,\"room:a\\u0062\",\"e\",{}]", NULL, NULL, "room:ab", "e", "{}");
    expect(V2, "[\"\\\"q\\\\\",\"\\/\",\"\\b\\f\\n\\r\\t\",\"\\u00e9\\u20ac\",{}]", "\"q\\", "/",
           "\b\f\n\r\t", "\xc3\xa9\xe2\x82\xac", "{}");
    /* A surrogate pair is one 4-byte character; raw UTF-8 stays as it is. */
    expect(V2, "[null,null,\"\\ud83d\\ude00 \xf0\x9f\x98\x80\",\"\xc3\xa9\",{}]", NULL, NULL,
           "\xf0\x9f\x98\x80 \xf0\x9f\x98\x80", "\xc3\xa9", "{}");
    expect(V2, "[null,null,\"\\uD83D\\uDE00\",\"\\u007F\\u0001\",{}]", NULL, NULL,
           "\xf0\x9f\x98\x80", "\x7f\x01", "{}");
    /* The payload is the frame's text: its escapes and spacing are kept. */
    expect(V2, "[null,null,\"t\",\"e\", {\"k\":\"\\u0062\\n\" , \"a\":[\"]}\"]}  ]", NULL, NULL,
           "t", "e", "{\"k\":\"\\u0062\\n\" , \"a\":[\"]}\"]}");
    /* Empty strings are not null. */
    expect(V2, "[\"\",\"\",\"\",\"\",{}]", "", "", "", "", "{}");
}

static void test_decode_null_refs(void **state)
{
    struct phx_msg m;

    (void)state;
    expect(V2, "[null,null,\"t\",\"e\",{}]", NULL, NULL, "t", "e", "{}");
    expect(V2, "[\"1\",null,\"t\",\"e\",{}]", "1", NULL, "t", "e", "{}");
    expect(V2, "[null,\"1\",\"t\",\"e\",{}]", NULL, "1", "t", "e", "{}");
    expect(V1, "{\"topic\":\"t\",\"event\":\"e\",\"payload\":{},\"ref\":null}", NULL, NULL, "t",
           "e", "{}");
    assert_int_equal(decode(V2, "[\"\",null,\"t\",\"e\",{}]", &m), 0);
    assert_true(m.has_join_ref);
    assert_false(m.has_ref);
    msg_free(&m);
}

/* Exactly at each bound passes, one byte over fails; bounds count bytes
 * after escapes are decoded. */
static void test_decode_limits(void **state)
{
    static const struct {
        int field;
        size_t max;
        int err;
    } cases[] = {
        {0, PHX_REF_MAX, PHX_E_JOIN_REF_LONG},
        {1, PHX_REF_MAX, PHX_E_REF_LONG},
        {2, PHX_TOPIC_MAX, PHX_E_TOPIC_LONG},
        {3, PHX_EVENT_MAX, PHX_E_EVENT_LONG},
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        size_t max = cases[i].max;
        char *at = repeat("a", max), *over = repeat("a", max + 1);
        char *esc = repeat("\\u0041", max), *esc_over = repeat("\\u00e9", max / 2 + 1);
        char *two = repeat("\xc3\xa9", max / 2), *two_over = repeat("\xc3\xa9", max / 2 + 1);

        assert_int_equal(field_rc(cases[i].field, at), 0);
        assert_int_equal(field_rc(cases[i].field, over), cases[i].err);
        assert_int_equal(field_rc(cases[i].field, esc), 0);
        assert_int_equal(field_rc(cases[i].field, esc_over), cases[i].err);
        assert_int_equal(field_rc(cases[i].field, two), 0);
        assert_int_equal(field_rc(cases[i].field, two_over), cases[i].err);
        free(at);
        free(over);
        free(esc);
        free(esc_over);
        free(two);
        free(two_over);
    }
}

static void test_decode_limit_fills(void **state)
{
    char *topic = repeat("t", PHX_TOPIC_MAX), *s;
    struct phx_msg m;

    (void)state;
    assert_int_not_equal(asprintf(&s, "[null,null,%s,\"e\",{}]", topic), -1);
    assert_int_equal(decode(V2, s, &m), 0);
    assert_int_equal(m.topic_len, PHX_TOPIC_MAX);
    assert_int_equal(strlen(m.topic), PHX_TOPIC_MAX);
    msg_free(&m);
    free(s);
    free(topic);
}

/* ---- decoding: refusals ---- */

static void test_decode_not_json(void **state)
{
    static const char *const bad[] = {
        "",
        " ",
        "[",
        "nope",
        "[null,null,\"t\",\"e\",{}",
        "[null,null,\"t\",\"e\",{}] x",
        "[null,null,\"t\",\"e\",{}][]",
        "[null,null,'t',\"e\",{}]",
        "[null,null,\"t\",\"e\",{},]",
        "[null,null,\"t\x01\",\"e\",{}]", /* raw control character */
        "[null,null,\"t\",\"e\",{\"a\":1,}]",
        "[null,null,\"t\",\"e\",{\"a\":01}]",
        "[null,null,\"t\\x\",\"e\",{}]",
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        assert_int_equal(decode_err(V2, bad[i]), PHX_E_JSON);
        assert_int_equal(decode_err(V1, bad[i]), PHX_E_JSON);
    }
    assert_int_equal(phx_decode(V2, NULL, 0, &(struct phx_msg){0}), PHX_E_JSON);
}

static void test_decode_deep(void **state)
{
    static const char head[] = "[null,null,\"t\",\"e\",";
    size_t depth = 1100, n = sizeof(head) - 1;
    char *s = malloc(2 * depth + sizeof(head) + 1);

    (void)state;
    memcpy(s, head, n);
    for (size_t i = 0; i < depth; i++)
        s[n++] = '[';
    for (size_t i = 0; i < depth; i++)
        s[n++] = ']';
    memcpy(s + n, "]", 2);
    assert_int_equal(decode_err(V2, s), PHX_E_JSON);
    free(s);
}

static void test_decode_utf8_nul(void **state)
{
    (void)state;
    assert_int_equal(decode_err(V2, "[null,null,\"room\xff\",\"e\",{}]"), PHX_E_UTF8);
    assert_int_equal(decode_err(V2, "[null,null,\"room\xc3\",\"e\",{}]"), PHX_E_UTF8);
    assert_int_equal(decode_err(V2, "[null,null,\"\xc0\xaf\",\"e\",{}]"), PHX_E_UTF8);
    assert_int_equal(decode_err(V2, "[null,null,\"\xed\xa0\x80\",\"e\",{}]"), PHX_E_UTF8);
    assert_int_equal(decode_err(V2, "[null,null,\"\\ud800\",\"e\",{}]"), PHX_E_UTF8);
    assert_int_equal(decode_err(V2, "[null,null,\"\\udc00\",\"e\",{}]"), PHX_E_UTF8);
    assert_int_equal(decode_err(V2, "[null,null,\"\\ud800\\u0041\",\"e\",{}]"), PHX_E_UTF8);
    assert_int_equal(decode_err(V2, "[null,null,\"t\",\"e\",{\"k\":\"\xfe\"}]"), PHX_E_UTF8);
    assert_int_equal(decode_err(V2, "[null,null,\"room:\\u0000x\",\"e\",{}]"), PHX_E_NUL);
    assert_int_equal(decode_err(V2, "[\"\\u0000\",null,\"t\",\"e\",{}]"), PHX_E_NUL);
    assert_int_equal(decode_err(V2, "[null,null,\"t\",\"e\",{\"k\":\"\\u0000\"}]"), PHX_E_NUL);
    assert_int_equal(
        decode_err(V1, "{\"topic\":\"\\u0000\",\"event\":\"e\",\"payload\":{},\"ref\":null}"),
        PHX_E_NUL);
    /* A raw NUL is not JSON at all. */
    {
        static const char raw[] = "[null,null,\"a\0b\",\"e\",{}]";
        struct guard g = guard_place(raw, sizeof(raw) - 1);
        struct phx_msg m;

        assert_int_equal(phx_decode(V2, g.data, sizeof(raw) - 1, &m), PHX_E_JSON);
        guard_free(&g);
    }
}

static void test_decode_shape_v2(void **state)
{
    static const char *const bad[] = {
        "{}",
        "{\"topic\":\"t\",\"event\":\"e\",\"payload\":{},\"ref\":null}",
        "[]",
        "[null]",
        "[null,null,\"t\",\"e\"]",
        "[null,null,\"t\",\"e\",{},{}]",
        "[null,null,\"t\",\"e\",{},null]",
        "[[null,null,\"t\",\"e\",{}]]",
        "\"[null,null,\\\"t\\\",\\\"e\\\",{}]\"",
        "5",
        "null",
        "true",
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(decode_err(V2, bad[i]), PHX_E_SHAPE);
}

static void test_decode_shape_v1(void **state)
{
    static const char *const bad[] = {
        HEARTBEAT,
        "{}",
        "\"x\"",
        "null",
        "{\"event\":\"e\",\"payload\":{},\"ref\":null}",
        "{\"topic\":\"t\",\"payload\":{},\"ref\":null}",
        "{\"topic\":\"t\",\"event\":\"e\",\"ref\":null}",
        "{\"topic\":\"t\",\"event\":\"e\",\"payload\":{}}", /* ref is required */
        "{\"topic\":\"t\",\"topic\":\"t\",\"event\":\"e\",\"payload\":{},\"ref\":null}",
        "{\"topic\":\"t\",\"event\":\"e\",\"payload\":{},\"ref\":null,\"ref\":null}",
        "{\"topic\":\"t\",\"event\":\"e\",\"payload\":{},\"ref\":0,\"join_ref\":0,\"join_ref\":1}",
        "{\"topic\":\"t\",\"event\":\"e\",\"payload\":{},\"r\\u0065f\":null,\"ref\":null}",
        "{\"Topic\":\"t\",\"event\":\"e\",\"payload\":{},\"ref\":null}",
        "{\"data\":{\"topic\":\"t\",\"event\":\"e\",\"payload\":{},\"ref\":null}}",
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(decode_err(V1, bad[i]), PHX_E_SHAPE);
}

static void test_decode_types(void **state)
{
    static const char *const not_string[] = {"1",  "-0.5", "true",    "false",
                                             "{}", "[]",   "[\"1\"]", "{\"a\":\"b\"}"};
    static const int type_err[] = {PHX_E_JOIN_REF, PHX_E_REF, PHX_E_TOPIC, PHX_E_EVENT};

    (void)state;
    for (int f = 0; f < 4; f++)
        for (size_t i = 0; i < ARRAY_SIZE(not_string); i++)
            assert_int_equal(field_rc(f, not_string[i]), type_err[f]);
    /* null is a ref's "none", but no topic or event. */
    assert_int_equal(field_rc(0, "null"), 0);
    assert_int_equal(field_rc(1, "null"), 0);
    assert_int_equal(field_rc(2, "null"), PHX_E_TOPIC);
    assert_int_equal(field_rc(3, "null"), PHX_E_EVENT);
    assert_int_equal(field_rc(0, " \"x\" "), 0);
}

static void test_decode_payload(void **state)
{
    static const char *const bad[] = {"[]", "\"{}\"", "null", "1", "true", "[{}]"};
    char *s;

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        assert_int_not_equal(asprintf(&s, "[null,null,\"t\",\"e\",%s]", bad[i]), -1);
        assert_int_equal(decode_err(V2, s), PHX_E_PAYLOAD);
        free(s);
        assert_int_not_equal(
            asprintf(&s, "{\"topic\":\"t\",\"event\":\"e\",\"payload\":%s,\"ref\":null}", bad[i]),
            -1);
        assert_int_equal(decode_err(V1, s), PHX_E_PAYLOAD);
        free(s);
    }
}

/* The first failing check wins: JSON, then shape, then the fields in
 * order join_ref, ref, topic, event, payload, each type before length. */
static void test_decode_order(void **state)
{
    char *long_ref = repeat("r", PHX_REF_MAX + 1), *s;

    (void)state;
    assert_int_equal(decode_err(V2, "[1,2,3,4,5] x"), PHX_E_JSON);
    assert_int_equal(decode_err(V2, "[1,2,3,4]"), PHX_E_SHAPE);
    assert_int_equal(decode_err(V2, "[1,2,3,4,5]"), PHX_E_JOIN_REF);
    assert_int_equal(decode_err(V2, "[null,2,3,4,5]"), PHX_E_REF);
    assert_int_equal(decode_err(V2, "[null,null,3,4,5]"), PHX_E_TOPIC);
    assert_int_equal(decode_err(V2, "[null,null,\"t\",4,5]"), PHX_E_EVENT);
    assert_int_equal(decode_err(V2, "[null,null,\"t\",\"e\",5]"), PHX_E_PAYLOAD);
    assert_int_not_equal(asprintf(&s, "[%s,2,3,4,5]", long_ref), -1);
    assert_int_equal(decode_err(V2, s), PHX_E_JOIN_REF_LONG);
    free(s);
    assert_int_not_equal(asprintf(&s, "[null,%s,3,4,5]", long_ref), -1);
    assert_int_equal(decode_err(V2, s), PHX_E_REF_LONG);
    free(s);
    assert_int_equal(decode_err(V1, "{\"ref\":1,\"topic\":2,\"event\":3,\"payload\":4}"),
                     PHX_E_REF);
    assert_int_equal(
        decode_err(V1, "{\"ref\":null,\"topic\":2,\"event\":3,\"payload\":4,\"join_ref\":1}"),
        PHX_E_JOIN_REF);
    free(long_ref);
}

static void test_decode_bad_vsn(void **state)
{
    struct phx_msg m;

    (void)state;
    memset(&m, 1, sizeof(m));
    assert_int_equal(phx_decode((enum phx_vsn)0, HEARTBEAT, strlen(HEARTBEAT), &m), PHX_E_VSN);
    assert_null(m.payload);
    assert_int_equal(phx_decode((enum phx_vsn)3, HEARTBEAT, strlen(HEARTBEAT), &m), PHX_E_VSN);
}

/* A success after a failure and a failure after a success leave no trace
 * of the other in the message. */
static void test_decode_reuse(void **state)
{
    struct phx_msg m;

    (void)state;
    assert_int_equal(decode(V2, JOIN_V2, &m), 0);
    msg_free(&m);
    assert_int_equal(phx_decode(V2, "[\"1\",2]", 7, &m), PHX_E_SHAPE);
    assert_string_equal(m.topic, "");
    assert_false(m.has_join_ref);
    assert_int_equal(decode(V2, "[null,null,\"x\",\"y\",{}]", &m), 0);
    assert_string_equal(m.join_ref, "");
    assert_string_equal(m.topic, "x");
    msg_free(&m);
}

/* Every cut of realistic frames, from the end of a page: never an
 * over-read, and only the whole frame decodes. */
static void test_decode_prefixes(void **state)
{
    static const struct {
        enum phx_vsn vsn;
        const char *s;
    } frames[] = {
        {V2, HEARTBEAT},
        {V2, JOIN_V2},
        {V2, "[\"1\",\"2\",\"r\\u00e9\\ud83d\\ude00\",\"e\\\"\",{\"a\":[\"}\\\\\",{}]}]"},
        {V1, "{\"topic\":\"phoenix\",\"event\":\"heartbeat\",\"payload\":{},\"ref\":\"2\","
             "\"join_ref\":null}"},
    };
    struct phx_msg m;

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(frames); i++) {
        size_t n = strlen(frames[i].s);

        for (size_t k = 0; k <= n; k++) {
            struct guard g = guard_place(frames[i].s, k);
            int rc = phx_decode(frames[i].vsn, g.data, k, &m);

            assert_int_equal(rc == 0, k == n);
            if (rc == 0)
                assert_true(m.payload + m.payload_len <= g.data + k);
            guard_free(&g);
        }
    }
}

/* ---- vsn ---- */

static void test_vsn(void **state)
{
    static const char *const bad[] = {"",      "2",      "2.0",    "2.0.1",  "1.0.1",
                                      "3.0.0", "2.0.0 ", " 2.0.0", "v2.0.0", "2.0.0-rc.1"};
    enum phx_vsn v = V2;

    (void)state;
    assert_int_equal(phx_vsn_parse(NULL, &v), 0);
    assert_int_equal(v, V1);
    assert_int_equal(phx_vsn_parse("2.0.0", &v), 0);
    assert_int_equal(v, V2);
    assert_int_equal(phx_vsn_parse("1.0.0", &v), 0);
    assert_int_equal(v, V1);
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        v = V2;
        assert_int_equal(phx_vsn_parse(bad[i], &v), PHX_E_VSN);
        assert_int_equal(v, V2);
    }
    assert_string_equal(phx_vsn_name(V1), "1.0.0");
    assert_string_equal(phx_vsn_name(V2), "2.0.0");
    assert_string_equal(phx_vsn_name((enum phx_vsn)9), "?");
}

/* ---- encoding ---- */

static void test_encode_reply(void **state)
{
    struct buf b = {0};

    (void)state;
    phx_encode_reply(&b, V2, NULL, "5", "phoenix", true, "{}", 2);
    assert_string_equal(text(&b), "[null,\"5\",\"phoenix\",\"phx_reply\",{\"status\":\"ok\","
                                  "\"response\":{}}]");
    b.len = 0;
    phx_encode_reply(&b, V2, "3", "3", "room:1", false, "{\"reason\":\"unauthorized\"}", 25);
    assert_string_equal(text(&b), "[\"3\",\"3\",\"room:1\",\"phx_reply\",{\"status\":\"error\","
                                  "\"response\":{\"reason\":\"unauthorized\"}}]");
    b.len = 0;
    phx_encode_reply(&b, V2, "3", "4", "room:1", true, NULL, 0); /* NULL: {} */
    assert_string_equal(text(&b), "[\"3\",\"4\",\"room:1\",\"phx_reply\",{\"status\":\"ok\","
                                  "\"response\":{}}]");
    b.len = 0;
    /* 1.0.0: no join_ref, as Phoenix's V1 serializer writes. */
    phx_encode_reply(&b, V1, "3", "5", "phoenix", true, "{}", 2);
    assert_string_equal(text(&b), "{\"topic\":\"phoenix\",\"event\":\"phx_reply\",\"payload\":{"
                                  "\"status\":\"ok\",\"response\":{}},\"ref\":\"5\"}");
    b.len = 0;
    phx_encode_reply(&b, V1, NULL, NULL, "t", false, "\"x\"", 3);
    assert_string_equal(text(&b), "{\"topic\":\"t\",\"event\":\"phx_reply\",\"payload\":{"
                                  "\"status\":\"error\",\"response\":\"x\"},\"ref\":null}");
    buf_release(&b);
}

static void test_encode_reply_to(void **state)
{
    struct buf b = {0};
    struct phx_msg m;

    (void)state;
    assert_int_equal(decode(V2, HEARTBEAT, &m), 0);
    phx_encode_reply_to(&b, V2, &m, true, NULL, 0);
    assert_string_equal(text(&b), "[null,\"5\",\"phoenix\",\"phx_reply\",{\"status\":\"ok\","
                                  "\"response\":{}}]");
    msg_free(&m);
    b.len = 0;
    assert_int_equal(decode(V2, "[\"a\\\"b\",\"\",\"room:\\u00e9\",\"phx_join\",{}]", &m), 0);
    phx_encode_reply_to(&b, V2, &m, false, "{\"reason\":\"x\"}", 14);
    assert_string_equal(text(&b), "[\"a\\\"b\",\"\",\"room:\xc3\xa9\",\"phx_reply\",{\"status\":"
                                  "\"error\",\"response\":{\"reason\":\"x\"}}]");
    b.len = 0;
    phx_encode_reply_to(&b, V1, &m, true, "{}", 2);
    assert_string_equal(text(&b), "{\"topic\":\"room:\xc3\xa9\",\"event\":\"phx_reply\","
                                  "\"payload\":{\"status\":\"ok\",\"response\":{}},\"ref\":\"\"}");
    msg_free(&m);
    buf_release(&b);
}

/* The presence pushes of client-protocols.md 2.4. */
static void test_encode_push(void **state)
{
    static const char state_p[] =
        "{\"42\":{\"metas\":[{\"phx_ref\":\"F6x\",\"online_at\":\"1700000000\"}]}}";
    static const char diff_p[] =
        "{\"joins\":{\"7\":{\"metas\":[{\"phx_ref\":\"F6y\",\"device\":\"ios\"}]}},\"leaves\":{}}";
    struct buf b = {0};

    (void)state;
    phx_encode_push(&b, V2, "1", "room:1", "presence_state", state_p, strlen(state_p));
    assert_string_equal(text(&b), "[\"1\",null,\"room:1\",\"presence_state\",{\"42\":{\"metas\":"
                                  "[{\"phx_ref\":\"F6x\",\"online_at\":\"1700000000\"}]}}]");
    b.len = 0;
    phx_encode_push(&b, V2, NULL, "room:1", "presence_diff", diff_p, strlen(diff_p));
    assert_string_equal(text(&b), "[null,null,\"room:1\",\"presence_diff\",{\"joins\":{\"7\":{"
                                  "\"metas\":[{\"phx_ref\":\"F6y\",\"device\":\"ios\"}]}},"
                                  "\"leaves\":{}}]");
    b.len = 0;
    phx_encode_push(&b, V1, "1", "realtime:r", "presence_diff", diff_p, strlen(diff_p));
    assert_string_equal(text(&b), "{\"topic\":\"realtime:r\",\"event\":\"presence_diff\","
                                  "\"payload\":{\"joins\":{\"7\":{\"metas\":[{\"phx_ref\":\"F6y\","
                                  "\"device\":\"ios\"}]}},\"leaves\":{}},\"ref\":null}");
    b.len = 0;
    phx_encode(&b, V2, "1", "9", "t", "e", NULL, 0);
    assert_string_equal(text(&b), "[\"1\",\"9\",\"t\",\"e\",{}]");
    b.len = 0;
    /* Only n bytes of the payload are copied. */
    phx_encode(&b, V2, NULL, NULL, "t", "e", "{}xyz", 2);
    assert_string_equal(text(&b), "[null,null,\"t\",\"e\",{}]");
    buf_release(&b);
}

static void test_encode_close_error(void **state)
{
    struct buf b = {0};

    (void)state;
    phx_encode_close(&b, V2, "4", "room:lobby");
    assert_string_equal(text(&b), "[\"4\",\"4\",\"room:lobby\",\"phx_close\",{}]");
    b.len = 0;
    phx_encode_error(&b, V2, "4", "room:lobby");
    assert_string_equal(text(&b), "[\"4\",\"4\",\"room:lobby\",\"phx_error\",{}]");
    b.len = 0;
    phx_encode_close(&b, V1, "4", "room:lobby");
    assert_string_equal(text(&b), "{\"topic\":\"room:lobby\",\"event\":\"phx_close\","
                                  "\"payload\":{},\"ref\":\"4\"}");
    b.len = 0;
    phx_encode_error(&b, V2, NULL, "t");
    assert_string_equal(text(&b), "[null,null,\"t\",\"phx_error\",{}]");
    buf_release(&b);
}

static void test_encode_escapes(void **state)
{
    struct buf b = {0};

    (void)state;
    buf_append_str(&b, "kept:");
    phx_encode_push(&b, V2, "a\"b\\c", "t\n\x01\x7f", "\xc3\xa9\xff", "{}", 2);
    assert_string_equal(text(&b), "kept:[\"a\\\"b\\\\c\",null,\"t\\n\\u0001\x7f\",\"\xc3\xa9"
                                  "\xef\xbf\xbd\",{}]");
    buf_release(&b);
}

/* ---- round trips ---- */

static void assert_msg_equal(const struct phx_msg *a, const struct phx_msg *b, bool join_ref)
{
    if (join_ref) {
        assert_int_equal(a->has_join_ref, b->has_join_ref);
        assert_string_equal(a->join_ref, b->join_ref);
        assert_int_equal(a->join_ref_len, b->join_ref_len);
    }
    assert_int_equal(a->has_ref, b->has_ref);
    assert_string_equal(a->ref, b->ref);
    assert_int_equal(a->ref_len, b->ref_len);
    assert_string_equal(a->topic, b->topic);
    assert_int_equal(a->topic_len, b->topic_len);
    assert_string_equal(a->event, b->event);
    assert_int_equal(a->payload_len, b->payload_len);
    assert_memory_equal(a->payload, b->payload, a->payload_len);
}

/* Decodes s with from, encodes it with to, decodes that: equal, but a
 * 1.0.0 frame the server writes carries no join_ref. */
static void round_trip(enum phx_vsn from, enum phx_vsn to, const char *s)
{
    struct phx_msg a, b;
    struct buf out = {0};

    assert_int_equal(decode(from, s, &a), 0);
    phx_encode(&out, to, a.has_join_ref ? a.join_ref : NULL, a.has_ref ? a.ref : NULL, a.topic,
               a.event, a.payload, a.payload_len);
    assert_int_equal(decode(to, text(&out), &b), 0);
    assert_msg_equal(&a, &b, to == V2);
    if (to == V1)
        assert_false(b.has_join_ref);
    msg_free(&a);
    msg_free(&b);
    buf_release(&out);
}

static void test_round_trips(void **state)
{
    static const char *const v2[] = {
        HEARTBEAT,
        JOIN_V2,
        "[null,null,\"t\",\"e\",{}]",
        "[\"\",\"\",\"\",\"\",{}]",
        "[\"a\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0001\",\"\\ud83d\\ude00\",\"r\\u00e9\",\"\\u007f\","
        "{\"k\":[1,2.5e3,true,false,null,\"\\u0000x\"]}]",
        "[\"1\",\"2\",\"realtime:room1\",\"presence\",{\"type\":\"presence\",\"event\":"
        "\"track\",\"payload\":{\"name\":\"\xc3\xa9\"}}]",
    };
    static const char *const v1[] = {
        "{\"topic\":\"phoenix\",\"event\":\"heartbeat\",\"payload\":{},\"ref\":\"2\"}",
        "{\"topic\":\"t\",\"event\":\"e\",\"payload\":{\"a\":{}},\"ref\":null,\"join_ref\":\"9\"}",
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(v2); i++) {
        if (strstr(v2[i], "\\u0000"))
            continue;
        round_trip(V2, V2, v2[i]);
        round_trip(V2, V1, v2[i]);
    }
    for (size_t i = 0; i < ARRAY_SIZE(v1); i++) {
        round_trip(V1, V1, v1[i]);
        round_trip(V1, V2, v1[i]);
    }
    /* The frame with \u0000 in its payload is refused, payloads included. */
    assert_int_equal(decode_err(V2, v2[4]), PHX_E_NUL);
}

/* A 255-byte topic of characters that each take six bytes escaped. */
static void test_round_trip_escaped_limit(void **state)
{
    char *topic = repeat("\\u0001", PHX_TOPIC_MAX), *s;

    (void)state;
    assert_int_not_equal(asprintf(&s, "[null,null,%s,\"e\",{}]", topic), -1);
    round_trip(V2, V2, s);
    round_trip(V2, V1, s);
    free(s);
    free(topic);
}

/* ---- topics and messages ---- */

static void test_topics(void **state)
{
    struct phx_msg m;

    (void)state;
    assert_true(phx_topic_is_phoenix("phoenix"));
    assert_false(phx_topic_is_phoenix("phoenix:x"));
    assert_false(phx_topic_is_phoenix("Phoenix"));
    assert_false(phx_topic_is_phoenix(""));
    assert_false(phx_topic_is_phoenix(NULL));
    assert_string_equal(phx_topic_realtime_name("realtime:room1"), "room1");
    assert_string_equal(phx_topic_realtime_name("realtime:a:b"), "a:b");
    assert_null(phx_topic_realtime_name("realtime:"));
    assert_null(phx_topic_realtime_name("realtime"));
    assert_null(phx_topic_realtime_name("room:1"));
    assert_null(phx_topic_realtime_name("Realtime:x"));
    assert_null(phx_topic_realtime_name(NULL));
    assert_string_equal(phx_topic_after("room:lobby", "room:"), "lobby");
    assert_null(phx_topic_after("room:", "room:"));
    assert_null(phx_topic_after("roo", "room:"));
    assert_null(phx_topic_after("rooms:1", "room:"));
    assert_string_equal(phx_topic_after("x", ""), "x");
    assert_null(phx_topic_after("", ""));
    assert_null(phx_topic_after(NULL, "room:"));
    assert_null(phx_topic_after("room:1", NULL));
    /* A heartbeat is topic and event both. */
    assert_int_equal(decode(V2, "[null,\"1\",\"phoenix\",\"phx_join\",{}]", &m), 0);
    assert_false(phx_is_heartbeat(&m));
    msg_free(&m);
    assert_int_equal(decode(V2, "[null,\"1\",\"room:1\",\"heartbeat\",{}]", &m), 0);
    assert_false(phx_is_heartbeat(&m));
    msg_free(&m);
    assert_int_equal(decode(V1,
                            "{\"topic\":\"phoenix\",\"event\":\"heartbeat\",\"payload\":{},"
                            "\"ref\":\"1\"}",
                            &m),
                     0);
    assert_true(phx_is_heartbeat(&m));
    msg_free(&m);
}

static void test_strerror(void **state)
{
    static const int codes[] = {
        PHX_E_JSON,          PHX_E_UTF8,       PHX_E_NUL,      PHX_E_SHAPE, PHX_E_JOIN_REF,
        PHX_E_JOIN_REF_LONG, PHX_E_REF,        PHX_E_REF_LONG, PHX_E_TOPIC, PHX_E_TOPIC_LONG,
        PHX_E_EVENT,         PHX_E_EVENT_LONG, PHX_E_PAYLOAD,  PHX_E_VSN,
    };
    const char *generic = phx_strerror(-1);

    (void)state;
    assert_string_equal(phx_strerror(0), "ok");
    assert_string_equal(generic, "invalid message");
    for (size_t i = 0; i < ARRAY_SIZE(codes); i++) {
        assert_true(codes[i] < -PS_EBASE);
        assert_string_not_equal(phx_strerror(codes[i]), generic);
        assert_true(utf8_valid(phx_strerror(codes[i]), strlen(phx_strerror(codes[i]))));
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(phx_strerror(codes[i]), phx_strerror(codes[j]));
    }
    assert_string_equal(phx_strerror(PHX_E_TOPIC_LONG), "topic is longer than 255 bytes");
    assert_string_equal(phx_strerror(PHX_E_REF_LONG), "ref is longer than 64 bytes");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_phoenix_js),
        cmocka_unit_test(test_decode_realtime_js),
        cmocka_unit_test(test_decode_v1),
        cmocka_unit_test(test_decode_escapes),
        cmocka_unit_test(test_decode_null_refs),
        cmocka_unit_test(test_decode_limits),
        cmocka_unit_test(test_decode_limit_fills),
        cmocka_unit_test(test_decode_not_json),
        cmocka_unit_test(test_decode_deep),
        cmocka_unit_test(test_decode_utf8_nul),
        cmocka_unit_test(test_decode_shape_v2),
        cmocka_unit_test(test_decode_shape_v1),
        cmocka_unit_test(test_decode_types),
        cmocka_unit_test(test_decode_payload),
        cmocka_unit_test(test_decode_order),
        cmocka_unit_test(test_decode_bad_vsn),
        cmocka_unit_test(test_decode_reuse),
        cmocka_unit_test(test_decode_prefixes),
        cmocka_unit_test(test_vsn),
        cmocka_unit_test(test_encode_reply),
        cmocka_unit_test(test_encode_reply_to),
        cmocka_unit_test(test_encode_push),
        cmocka_unit_test(test_encode_close_error),
        cmocka_unit_test(test_encode_escapes),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_round_trip_escaped_limit),
        cmocka_unit_test(test_topics),
        cmocka_unit_test(test_strerror),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
