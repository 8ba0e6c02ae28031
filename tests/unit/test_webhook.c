/* SPDX-License-Identifier: MIT */
/*
 * test_webhook.c - webhook bodies, signatures, secrets, ids and the retry
 * schedule. Bodies are compared with golden strings and checked with
 * json_check(). The Pusher signature was computed outside presenced with
 * openssl (the command is next to the value); the Standard Webhooks
 * signature is the spec's published vector (libraries/javascript/src/
 * webhook.test.ts, "sign function works"), recomputed with openssl too.
 * Header values a receiver reads are placed at the end of a page followed
 * by a PROT_NONE page, so an over-read crashes.
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
#include "json.h"
#include "webhook.h"

/* The Pusher documentation's example app. */
#define KEY    "278d425bdf160c739803"
#define SECRET "7ad3773142a6692b25b8"
#define T_MS   1614265330123ULL

/* The Standard Webhooks vector. */
#define SW_SECRET  "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SW_ID      "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define SW_TS      1614265330
#define SW_PAYLOAD "{\"test\": 2432232314}"
#define SW_SIG     "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

#define GOLDEN_BATCH                                                                         \
    "{\"time_ms\":1614265330123,\"events\":["                                                \
    "{\"name\":\"channel_occupied\",\"channel\":\"presence-a\"},"                            \
    "{\"name\":\"member_added\",\"channel\":\"presence-a\",\"user_id\":\"42\"},"             \
    "{\"name\":\"client_event\",\"channel\":\"presence-a\",\"event\":\"client-x\",\"data\":" \
    "\"{\\\"a\\\":1}\",\"socket_id\":\"1.2\",\"user_id\":\"42\"},"                           \
    "{\"name\":\"member_removed\",\"channel\":\"presence-a\",\"user_id\":\"42\"},"           \
    "{\"name\":\"channel_vacated\",\"channel\":\"presence-a\"}]}"
/* printf '%s' "$GOLDEN_BATCH" | openssl dgst -sha256 -hmac 7ad3773142a6692b25b8
 * (and node's crypto.createHmac('sha256', SECRET) agrees). */
#define GOLDEN_BATCH_SIG "682696471d8086dfc331f26ad9e3f7a70578fc81ad4d933e09968eba7756052c"

/* ---- helpers ---- */

static void assert_json(const struct buf *b)
{
    assert_int_equal(json_check(b->data, b->len), 0);
}

/* The body of a batch holding just ev. */
static void one_pusher(const struct webhook_pusher_event *ev, struct buf *out)
{
    struct webhook_batch b = {0};

    assert_int_equal(webhook_batch_add(&b, ev, 0), 1);
    webhook_batch_finish(&b, T_MS, out);
    webhook_batch_release(&b);
    assert_json(out);
}

static void assert_pusher(const struct webhook_pusher_event *ev, const char *want_event)
{
    struct buf out = {0}, want = {0};

    one_pusher(ev, &out);
    buf_printf(&want, "{\"time_ms\":1614265330123,\"events\":[%s]}", want_event);
    assert_int_equal(out.len, want.len);
    assert_memory_equal(out.data, want.data, want.len);
    buf_release(&out);
    buf_release(&want);
}

static void assert_body(const struct webhook_event *ev, const char *want)
{
    struct buf out = {0};

    assert_int_equal(webhook_event_body(ev, &out), 0);
    assert_int_equal(out.len, strlen(want));
    assert_memory_equal(out.data, want, out.len);
    assert_json(&out);
    buf_release(&out);
}

static struct webhook_key sw_key(void)
{
    struct webhook_key k;

    assert_int_equal(webhook_key_parse(&k, SW_SECRET), 0);
    return k;
}

static int key_parse(const char *secret, struct webhook_key *k)
{
    struct guard g = guard_place(secret, strlen(secret) + 1);
    int rc = webhook_key_parse(k, g.data);

    guard_free(&g);
    return rc;
}

/* webhook_verify() of the vector's body with the three header values
 * from guard pages (NULL stays NULL), at now_s. */
static int sw_verify(const char *id, const char *ts, const char *sig, const char *body,
                     int64_t now_s)
{
    struct webhook_key k = sw_key();
    struct guard gi = guard_place(id ? id : "", id ? strlen(id) + 1 : 1);
    struct guard gt = guard_place(ts ? ts : "", ts ? strlen(ts) + 1 : 1);
    struct guard gs = guard_place(sig ? sig : "", sig ? strlen(sig) + 1 : 1);
    struct guard gb = guard_place(body, strlen(body));
    int rc = webhook_verify(&k, id ? gi.data : NULL, ts ? gt.data : NULL, sig ? gs.data : NULL,
                            gb.data, strlen(body), now_s, WEBHOOK_TOLERANCE_S);

    guard_free(&gi);
    guard_free(&gt);
    guard_free(&gs);
    guard_free(&gb);
    return rc;
}

static bool pusher_ok(const char *key, const char *sig, const char *body)
{
    struct guard gk = guard_place(key, strlen(key) + 1);
    struct guard gs = guard_place(sig, strlen(sig) + 1);
    bool ok = webhook_pusher_verify(KEY, SECRET, gk.data, gs.data, body, strlen(body));

    guard_free(&gk);
    guard_free(&gs);
    return ok;
}

/* ---- Pusher bodies ---- */

static void test_pusher_event_bodies(void **state)
{
    struct webhook_pusher_event ev = {.kind = WEBHOOK_CHANNEL_OCCUPIED, .channel = "presence-a"};

    (void)state;
    assert_pusher(&ev, "{\"name\":\"channel_occupied\",\"channel\":\"presence-a\"}");
    ev.kind = WEBHOOK_CHANNEL_VACATED;
    ev.user_id = "42"; /* not part of a channel event: left out */
    assert_pusher(&ev, "{\"name\":\"channel_vacated\",\"channel\":\"presence-a\"}");
    ev.kind = WEBHOOK_MEMBER_ADDED;
    assert_pusher(&ev, "{\"name\":\"member_added\",\"channel\":\"presence-a\",\"user_id\":\"42\"}");
    ev.kind = WEBHOOK_MEMBER_REMOVED;
    assert_pusher(&ev,
                  "{\"name\":\"member_removed\",\"channel\":\"presence-a\",\"user_id\":\"42\"}");
}

static void test_pusher_client_event(void **state)
{
    struct webhook_pusher_event ev = {
        .kind = WEBHOOK_CLIENT_EVENT,
        .channel = "presence-a",
        .event = "client-x",
        .data = "{\"a\":1}",
        .data_len = 7,
        .socket_id = "1.2",
        .user_id = "42",
    };

    (void)state;
    assert_pusher(&ev, "{\"name\":\"client_event\",\"channel\":\"presence-a\",\"event\":"
                       "\"client-x\",\"data\":\"{\\\"a\\\":1}\",\"socket_id\":\"1.2\","
                       "\"user_id\":\"42\"}");
    /* A private channel: no user_id (the caller's rule). */
    ev.channel = "private-b";
    ev.user_id = NULL;
    assert_pusher(&ev, "{\"name\":\"client_event\",\"channel\":\"private-b\",\"event\":"
                       "\"client-x\",\"data\":\"{\\\"a\\\":1}\",\"socket_id\":\"1.2\"}");
    /* No socket id, empty data (NULL with 0), data with a NUL and a newline. */
    ev.socket_id = NULL;
    ev.data = NULL;
    ev.data_len = 0;
    assert_pusher(&ev, "{\"name\":\"client_event\",\"channel\":\"private-b\",\"event\":"
                       "\"client-x\",\"data\":\"\"}");
    ev.data = "a\x01"
              "b\n\"";
    ev.data_len = 5;
    assert_pusher(&ev, "{\"name\":\"client_event\",\"channel\":\"private-b\",\"event\":"
                       "\"client-x\",\"data\":\"a\\u0001b\\n\\\"\"}");
}

static void test_pusher_golden_batch(void **state)
{
    const struct webhook_pusher_event evs[] = {
        {.kind = WEBHOOK_CHANNEL_OCCUPIED, .channel = "presence-a"},
        {.kind = WEBHOOK_MEMBER_ADDED, .channel = "presence-a", .user_id = "42"},
        {.kind = WEBHOOK_CLIENT_EVENT,
         .channel = "presence-a",
         .event = "client-x",
         .data = "{\"a\":1}",
         .data_len = 7,
         .socket_id = "1.2",
         .user_id = "42"},
        {.kind = WEBHOOK_MEMBER_REMOVED, .channel = "presence-a", .user_id = "42"},
        {.kind = WEBHOOK_CHANNEL_VACATED, .channel = "presence-a"},
    };
    struct webhook_batch b = {0};
    struct buf out = {0};
    char sig[WEBHOOK_HEX_LEN + 1];

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(evs); i++)
        assert_int_equal(webhook_batch_add(&b, &evs[i], 10 + i), (int)i + 1);
    webhook_batch_finish(&b, T_MS, &out);
    assert_int_equal(out.len, strlen(GOLDEN_BATCH));
    assert_memory_equal(out.data, GOLDEN_BATCH, out.len);
    assert_json(&out);
    webhook_pusher_sign(SECRET, out.data, out.len, sig);
    assert_string_equal(sig, GOLDEN_BATCH_SIG);
    assert_int_equal(b.n, 0);
    buf_release(&out);
    /* The emptied batch is reused; finishing it empty writes no events. */
    webhook_batch_finish(&b, 5, &out);
    assert_int_equal(out.len, strlen("{\"time_ms\":5,\"events\":[]}"));
    assert_memory_equal(out.data, "{\"time_ms\":5,\"events\":[]}", out.len);
    buf_release(&out);
    webhook_batch_release(&b);
}

/* Quotes, backslashes, control characters, valid and invalid UTF-8. */
static void test_pusher_escaping(void **state)
{
    struct webhook_pusher_event ev = {
        .kind = WEBHOOK_MEMBER_ADDED,
        .channel = "presence-\"x\\y",
        .user_id = "\x01\x1f\t\r\n\x7f \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 \xff\xc3",
    };

    (void)state;
    assert_pusher(&ev, "{\"name\":\"member_added\",\"channel\":\"presence-\\\"x\\\\y\","
                       "\"user_id\":\"\\u0001\\u001f\\t\\r\\n\x7f \xc3\xa9\xe2\x82\xac"
                       "\xf0\x9f\x98\x80 \xef\xbf\xbd\xef\xbf\xbd\"}");
}

static void test_pusher_batch_full(void **state)
{
    struct webhook_pusher_event ev = {.kind = WEBHOOK_MEMBER_ADDED, .channel = "c", .user_id = "u"};
    struct webhook_batch b = {0};
    struct buf out = {0};
    size_t objects = 0;

    (void)state;
    for (unsigned i = 1; i < WEBHOOK_PUSHER_BATCH_MAX; i++) {
        assert_int_equal(webhook_batch_add(&b, &ev, 100), (int)i);
        assert_false(webhook_batch_due(&b, 100));
    }
    assert_int_equal(webhook_batch_add(&b, &ev, 100), 20);
    assert_true(webhook_batch_due(&b, 100)); /* full: due at once */
    assert_int_equal(webhook_batch_add(&b, &ev, 100), WEBHOOK_E_FULL);
    assert_int_equal(b.n, 20);
    webhook_batch_finish(&b, 1, &out);
    assert_json(&out);
    for (size_t i = 0; i < out.len; i++)
        objects += out.data[i] == '{';
    assert_int_equal(objects, 1 + 20); /* the body and its events */
    assert_int_equal(webhook_batch_add(&b, &ev, 7), 1);
    webhook_batch_release(&b);
    buf_release(&out);
}

static void test_pusher_batch_due(void **state)
{
    struct webhook_pusher_event ev = {.kind = WEBHOOK_CHANNEL_OCCUPIED, .channel = "c"};
    struct webhook_batch b = {0};
    struct buf out = {0};

    (void)state;
    assert_false(webhook_batch_due(&b, 1000000)); /* empty: never */
    assert_int_equal(webhook_batch_add(&b, &ev, 1000), 1);
    assert_int_equal(webhook_batch_add(&b, &ev, 1200), 2); /* the first add starts the wait */
    assert_false(webhook_batch_due(&b, 1000));
    assert_false(webhook_batch_due(&b, 1249));
    assert_true(webhook_batch_due(&b, 1250));
    assert_true(webhook_batch_due(&b, 99999));
    assert_false(webhook_batch_due(&b, 999)); /* a clock behind the add: not yet */
    webhook_batch_finish(&b, 1, &out);
    assert_false(webhook_batch_due(&b, 99999));
    assert_int_equal(webhook_batch_add(&b, &ev, 5000), 1);
    assert_false(webhook_batch_due(&b, 5249));
    assert_true(webhook_batch_due(&b, 5250));
    webhook_batch_release(&b);
    buf_release(&out);
}

static void test_pusher_batch_errors(void **state)
{
    static const struct webhook_pusher_event bad[] = {
        {.kind = WEBHOOK_CHANNEL_OCCUPIED},               /* no channel */
        {.kind = WEBHOOK_MEMBER_ADDED, .channel = "c"},   /* no user_id */
        {.kind = WEBHOOK_MEMBER_REMOVED, .channel = "c"}, /* no user_id */
        {.kind = WEBHOOK_CLIENT_EVENT, .channel = "c"},   /* no event */
        {.kind = WEBHOOK_CLIENT_EVENT, .channel = "c", .event = "client-x", .data_len = 1},
        {.kind = (enum webhook_pusher_kind)5, .channel = "c"},    /* unknown */
        {.kind = (enum webhook_pusher_kind) - 1, .channel = "c"}, /* unknown */
    };
    struct webhook_pusher_event ok = {.kind = WEBHOOK_CHANNEL_VACATED, .channel = "c"};
    struct webhook_batch b = {0};

    (void)state;
    assert_int_equal(webhook_batch_add(&b, &ok, 1), 1);
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(webhook_batch_add(&b, &bad[i], 2), WEBHOOK_E_EVENT);
    assert_int_equal(webhook_batch_add(&b, NULL, 2), WEBHOOK_E_EVENT);
    assert_int_equal(b.n, 1);
    assert_int_equal(b.first_ms, 1);
    assert_int_equal(b.events.len, strlen("{\"name\":\"channel_vacated\",\"channel\":\"c\"}"));
    webhook_batch_release(&b);
    webhook_batch_release(&b); /* twice is fine */
}

/* ---- Pusher signatures ---- */

static void test_pusher_sign(void **state)
{
    char sig[WEBHOOK_HEX_LEN + 1], empty[WEBHOOK_HEX_LEN + 1];

    (void)state;
    webhook_pusher_sign(SECRET, GOLDEN_BATCH, strlen(GOLDEN_BATCH), sig);
    assert_string_equal(sig, GOLDEN_BATCH_SIG);
    /* printf '' | openssl dgst -sha256 -hmac 7ad3773142a6692b25b8 */
    webhook_pusher_sign(SECRET, NULL, 0, empty);
    assert_string_equal(empty, "f92b07dd13def8d24fb329693d44d5c046b416b553728fde26a187adfa9a1987");
}

static void test_pusher_verify(void **state)
{
    char sig[WEBHOOK_HEX_LEN + 2];

    (void)state;
    assert_true(pusher_ok(KEY, GOLDEN_BATCH_SIG, GOLDEN_BATCH));
    assert_false(pusher_ok("278d425bdf160c739804", GOLDEN_BATCH_SIG, GOLDEN_BATCH));
    assert_false(pusher_ok(KEY "x", GOLDEN_BATCH_SIG, GOLDEN_BATCH));
    assert_false(pusher_ok("", GOLDEN_BATCH_SIG, GOLDEN_BATCH));
    assert_false(pusher_ok(KEY, GOLDEN_BATCH_SIG, GOLDEN_BATCH " "));
    assert_false(pusher_ok(KEY, "", GOLDEN_BATCH));
    snprintf(sig, sizeof(sig), "%.63s", GOLDEN_BATCH_SIG);
    assert_false(pusher_ok(KEY, sig, GOLDEN_BATCH));
    snprintf(sig, sizeof(sig), "%s0", GOLDEN_BATCH_SIG);
    assert_false(pusher_ok(KEY, sig, GOLDEN_BATCH));
    snprintf(sig, sizeof(sig), "%s", GOLDEN_BATCH_SIG);
    for (char *p = sig; *p; p++) /* uppercase hex is another spelling: refused */
        if (*p >= 'a' && *p <= 'f')
            *p = (char)(*p - 'a' + 'A');
    assert_false(pusher_ok(KEY, sig, GOLDEN_BATCH));
    for (size_t i = 0; i < WEBHOOK_HEX_LEN; i++) {
        snprintf(sig, sizeof(sig), "%s", GOLDEN_BATCH_SIG);
        sig[i] = sig[i] == '0' ? '1' : '0';
        assert_false(pusher_ok(KEY, sig, GOLDEN_BATCH));
    }
    assert_false(webhook_pusher_verify(NULL, SECRET, KEY, GOLDEN_BATCH_SIG, "", 0));
    assert_false(webhook_pusher_verify(KEY, NULL, KEY, GOLDEN_BATCH_SIG, "", 0));
    assert_false(webhook_pusher_verify(KEY, SECRET, NULL, GOLDEN_BATCH_SIG, "", 0));
    assert_false(webhook_pusher_verify(KEY, SECRET, KEY, NULL, "", 0));
    assert_false(webhook_pusher_verify(KEY, SECRET, KEY, GOLDEN_BATCH_SIG, NULL, 3));
    webhook_pusher_sign("", "x", 1, sig);
    assert_false(webhook_pusher_verify(KEY, "", KEY, sig, "x", 1)); /* empty secret */
    webhook_pusher_sign(SECRET, "x", 1, sig);
    assert_false(webhook_pusher_verify("", SECRET, "", sig, "x", 1)); /* empty key */
    assert_true(webhook_pusher_verify(KEY, SECRET, KEY, sig, "x", 1));
}

/* ---- Standard Webhooks bodies ---- */

static void test_standard_bodies(void **state)
{
    struct webhook_event ev = {
        .kind = WEBHOOK_USER_ONLINE,
        .id = "msg_0000000000000001_0000000000000002",
        .time_ms = (int64_t)T_MS,
        .user = "u1",
        .room = "r1",
        .version = 7,
        .epoch = 123456789,
        .seq = 42,
    };

    (void)state;
    assert_body(&ev, "{\"type\":\"user.online\",\"timestamp\":\"2021-02-25T15:02:10.123Z\","
                     "\"data\":{\"id\":\"msg_0000000000000001_0000000000000002\",\"user\":\"u1\","
                     "\"version\":7}}");
    ev.kind = WEBHOOK_USER_OFFLINE;
    ev.version = UINT64_MAX;
    assert_body(&ev, "{\"type\":\"user.offline\",\"timestamp\":\"2021-02-25T15:02:10.123Z\","
                     "\"data\":{\"id\":\"msg_0000000000000001_0000000000000002\",\"user\":\"u1\","
                     "\"version\":18446744073709551615}}");
    ev.kind = WEBHOOK_ROOM_OCCUPIED;
    ev.time_ms = 0;
    assert_body(&ev, "{\"type\":\"room.occupied\",\"timestamp\":\"1970-01-01T00:00:00.000Z\","
                     "\"data\":{\"id\":\"msg_0000000000000001_0000000000000002\",\"room\":\"r1\","
                     "\"epoch\":123456789,\"seq\":42}}");
    ev.kind = WEBHOOK_ROOM_VACATED;
    ev.seq = 43;
    assert_body(&ev, "{\"type\":\"room.vacated\",\"timestamp\":\"1970-01-01T00:00:00.000Z\","
                     "\"data\":{\"id\":\"msg_0000000000000001_0000000000000002\",\"room\":\"r1\","
                     "\"epoch\":123456789,\"seq\":43}}");
    ev.kind = WEBHOOK_MEMBER_JOINED;
    ev.time_ms = 951782400000; /* 2000-02-29 */
    assert_body(&ev, "{\"type\":\"member.joined\",\"timestamp\":\"2000-02-29T00:00:00.000Z\","
                     "\"data\":{\"id\":\"msg_0000000000000001_0000000000000002\",\"room\":\"r1\","
                     "\"epoch\":123456789,\"seq\":43,\"user\":\"u1\"}}");
    ev.kind = WEBHOOK_MEMBER_LEFT;
    ev.seq = 44;
    assert_body(&ev, "{\"type\":\"member.left\",\"timestamp\":\"2000-02-29T00:00:00.000Z\","
                     "\"data\":{\"id\":\"msg_0000000000000001_0000000000000002\",\"room\":\"r1\","
                     "\"epoch\":123456789,\"seq\":44,\"user\":\"u1\"}}");
}

static void test_standard_escaping(void **state)
{
    struct webhook_event ev = {
        .kind = WEBHOOK_MEMBER_JOINED,
        .id = "a\"b",
        .time_ms = 1,
        .user = "\\\"\x01\x7f\xe2\x82\xac\xf0\x9f\x98\x80\xed\xa0\x80",
        .room = "r\n\"x\"\x1b",
    };

    (void)state;
    assert_body(&ev, "{\"type\":\"member.joined\",\"timestamp\":\"1970-01-01T00:00:00.001Z\","
                     "\"data\":{\"id\":\"a\\\"b\",\"room\":\"r\\n\\\"x\\\"\\u001b\",\"epoch\":0,"
                     "\"seq\":0,\"user\":\"\\\\\\\"\\u0001\x7f\xe2\x82\xac\xf0\x9f\x98\x80"
                     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"}}");
}

static void test_standard_body_errors(void **state)
{
    struct webhook_event ev = {.kind = WEBHOOK_USER_ONLINE, .id = "m", .user = "u"};
    struct buf out = {0};

    (void)state;
    ev.id = NULL;
    assert_int_equal(webhook_event_body(&ev, &out), WEBHOOK_E_EVENT);
    ev.id = "m";
    ev.user = NULL;
    assert_int_equal(webhook_event_body(&ev, &out), WEBHOOK_E_EVENT);
    ev.kind = WEBHOOK_ROOM_OCCUPIED; /* rooms need a room, not a user */
    assert_int_equal(webhook_event_body(&ev, &out), WEBHOOK_E_EVENT);
    ev.room = "r";
    assert_int_equal(webhook_event_body(&ev, &out), 0);
    ev.kind = WEBHOOK_MEMBER_LEFT; /* members need both */
    assert_int_equal(webhook_event_body(&ev, &out), WEBHOOK_E_EVENT);
    ev.kind = (enum webhook_event_kind)6;
    ev.user = "u";
    assert_int_equal(webhook_event_body(&ev, &out), WEBHOOK_E_EVENT);
    ev.kind = WEBHOOK_MEMBER_LEFT;
    ev.time_ms = -1;
    assert_int_equal(webhook_event_body(&ev, &out), WEBHOOK_E_TIME);
    ev.time_ms = 253402300800000;
    assert_int_equal(webhook_event_body(&ev, &out), WEBHOOK_E_TIME);
    assert_int_equal(webhook_event_body(NULL, &out), WEBHOOK_E_EVENT);
    /* Only the one good call wrote anything. */
    assert_int_equal(out.len, strlen("{\"type\":\"room.occupied\",\"timestamp\":"
                                     "\"1970-01-01T00:00:00.000Z\",\"data\":{\"id\":\"m\","
                                     "\"room\":\"r\",\"epoch\":0,\"seq\":0}}"));
    buf_release(&out);
    assert_string_equal(webhook_event_type(WEBHOOK_USER_ONLINE), "user.online");
    assert_string_equal(webhook_event_type(WEBHOOK_MEMBER_LEFT), "member.left");
    assert_null(webhook_event_type((enum webhook_event_kind)6));
}

/* Expected values from date -u -d @<seconds> +%FT%TZ. */
static void test_rfc3339(void **state)
{
    static const struct {
        int64_t ms;
        const char *want;
    } cases[] = {
        {0, "1970-01-01T00:00:00.000Z"},
        {999, "1970-01-01T00:00:00.999Z"},
        {1614265330123, "2021-02-25T15:02:10.123Z"},
        {951782400000, "2000-02-29T00:00:00.000Z"},
        {951868799999, "2000-02-29T23:59:59.999Z"},
        {4107542400000, "2100-03-01T00:00:00.000Z"}, /* 2100 is not leap */
        {4107456000000, "2100-02-28T00:00:00.000Z"},
        {253402300799999, "9999-12-31T23:59:59.999Z"},
    };
    char out[25];

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        assert_int_equal(webhook_rfc3339(cases[i].ms, out), 0);
        assert_string_equal(out, cases[i].want);
    }
    assert_int_equal(webhook_rfc3339(-1, out), WEBHOOK_E_TIME);
    assert_string_equal(out, "");
    assert_int_equal(webhook_rfc3339(253402300800000, out), WEBHOOK_E_TIME);
    assert_int_equal(webhook_rfc3339(INT64_MAX, out), WEBHOOK_E_TIME);
    assert_int_equal(webhook_rfc3339(INT64_MIN, out), WEBHOOK_E_TIME);
}

/* ---- Standard Webhooks signatures ---- */

static void test_standard_vector(void **state)
{
    struct webhook_key k;
    char sig[WEBHOOK_SIG_LEN + 1];

    (void)state;
    /* The key is base64 -d of the part after whsec_: 24 bytes. */
    assert_int_equal(webhook_key_parse(&k, SW_SECRET), 0);
    assert_int_equal(k.len, 24);
    assert_memory_equal(k.bytes, "\x31\xf2\x90\xf6\xbf\x06\x29\x8a\xab\x4f\x08\xd4", 12);
    assert_int_equal(webhook_sign(&k, SW_ID, SW_TS, SW_PAYLOAD, strlen(SW_PAYLOAD), sig), 0);
    assert_string_equal(sig, SW_SIG);
    assert_int_equal(strlen(sig), WEBHOOK_SIG_LEN);
    /* Without the prefix the same key (the libraries read it so). */
    assert_int_equal(webhook_key_parse(&k, &SW_SECRET[6]), 0);
    assert_int_equal(webhook_sign(&k, SW_ID, SW_TS, SW_PAYLOAD, strlen(SW_PAYLOAD), sig), 0);
    assert_string_equal(sig, SW_SIG);
    assert_int_equal(sw_verify(SW_ID, "1614265330", SW_SIG, SW_PAYLOAD, SW_TS), 0);
}

static void test_standard_verify(void **state)
{
    const char *other = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=";
    char list[256];

    (void)state;
    /* Key rotation: several signatures, other versions skipped. */
    snprintf(list, sizeof(list), "%s v2,%s  %s v1a,xyz %s", other, &SW_SIG[3], SW_SIG, other);
    assert_int_equal(sw_verify(SW_ID, "1614265330", list, SW_PAYLOAD, SW_TS), 0);
    snprintf(list, sizeof(list), "%s v2,%s", other, &SW_SIG[3]);
    assert_int_equal(sw_verify(SW_ID, "1614265330", list, SW_PAYLOAD, SW_TS), WEBHOOK_E_SIGNATURE);
    /* Tolerance: 300 s either way, not 301. */
    assert_int_equal(sw_verify(SW_ID, "1614265330", SW_SIG, SW_PAYLOAD, SW_TS + 300), 0);
    assert_int_equal(sw_verify(SW_ID, "1614265330", SW_SIG, SW_PAYLOAD, SW_TS - 300), 0);
    assert_int_equal(sw_verify(SW_ID, "1614265330", SW_SIG, SW_PAYLOAD, SW_TS + 301),
                     WEBHOOK_E_TIMESTAMP);
    assert_int_equal(sw_verify(SW_ID, "1614265330", SW_SIG, SW_PAYLOAD, SW_TS - 301),
                     WEBHOOK_E_TIMESTAMP);
    assert_int_equal(sw_verify(SW_ID, "1614265331", SW_SIG, SW_PAYLOAD, SW_TS),
                     WEBHOOK_E_SIGNATURE);
    /* Malformed or missing headers. */
    assert_int_equal(sw_verify(SW_ID, "hello", SW_SIG, SW_PAYLOAD, SW_TS), WEBHOOK_E_TIMESTAMP);
    assert_int_equal(sw_verify(SW_ID, "", SW_SIG, SW_PAYLOAD, SW_TS), WEBHOOK_E_TIMESTAMP);
    assert_int_equal(sw_verify(SW_ID, "-1614265330", SW_SIG, SW_PAYLOAD, SW_TS),
                     WEBHOOK_E_TIMESTAMP);
    assert_int_equal(sw_verify(SW_ID, "1234567890123456789", SW_SIG, SW_PAYLOAD, SW_TS),
                     WEBHOOK_E_TIMESTAMP);
    assert_int_equal(sw_verify(SW_ID, NULL, SW_SIG, SW_PAYLOAD, SW_TS), WEBHOOK_E_TIMESTAMP);
    assert_int_equal(sw_verify(NULL, "1614265330", SW_SIG, SW_PAYLOAD, SW_TS), WEBHOOK_E_ID);
    assert_int_equal(sw_verify("", "1614265330", SW_SIG, SW_PAYLOAD, SW_TS), WEBHOOK_E_ID);
    assert_int_equal(sw_verify("msg.1", "1614265330", SW_SIG, SW_PAYLOAD, SW_TS), WEBHOOK_E_ID);
    assert_int_equal(sw_verify(SW_ID, "1614265330", NULL, SW_PAYLOAD, SW_TS), WEBHOOK_E_SIGNATURE);
    assert_int_equal(sw_verify(SW_ID, "1614265330", "", SW_PAYLOAD, SW_TS), WEBHOOK_E_SIGNATURE);
    assert_int_equal(sw_verify(SW_ID, "1614265330", "v1,", SW_PAYLOAD, SW_TS), WEBHOOK_E_SIGNATURE);
    assert_int_equal(sw_verify(SW_ID, "1614265330", "v1,g0hM9SsE", SW_PAYLOAD, SW_TS),
                     WEBHOOK_E_SIGNATURE);
    assert_int_equal(sw_verify(SW_ID, "1614265330", "v1,dawfeoifkpqwoekfpqoekf", SW_PAYLOAD, SW_TS),
                     WEBHOOK_E_SIGNATURE);
    snprintf(list, sizeof(list), "%sA", SW_SIG);
    assert_int_equal(sw_verify(SW_ID, "1614265330", list, SW_PAYLOAD, SW_TS), WEBHOOK_E_SIGNATURE);
    /* The body as signed, byte for byte. */
    assert_int_equal(sw_verify(SW_ID, "1614265330", SW_SIG, "{\"test\":2432232314}", SW_TS),
                     WEBHOOK_E_SIGNATURE);
    /* Every signature byte matters. */
    for (size_t i = 3; i < strlen(SW_SIG); i++) {
        snprintf(list, sizeof(list), "%s", SW_SIG);
        list[i] = list[i] == 'A' ? 'B' : 'A';
        assert_int_equal(sw_verify(SW_ID, "1614265330", list, SW_PAYLOAD, SW_TS),
                         WEBHOOK_E_SIGNATURE);
    }
}

static void test_sign_refusals(void **state)
{
    struct webhook_key k = sw_key();
    char sig[WEBHOOK_SIG_LEN + 1], id[WEBHOOK_ID_MAX + 2];

    (void)state;
    assert_int_equal(webhook_sign(&k, "msg.x", 1, "", 0, sig), WEBHOOK_E_ID);
    assert_string_equal(sig, "");
    assert_int_equal(webhook_sign(&k, "", 1, "", 0, sig), WEBHOOK_E_ID);
    assert_int_equal(webhook_sign(&k, NULL, 1, "", 0, sig), WEBHOOK_E_ID);
    assert_int_equal(webhook_sign(&k, "a b", 1, "", 0, sig), WEBHOOK_E_ID);
    assert_int_equal(webhook_sign(&k, "a\r\nX: y", 1, "", 0, sig), WEBHOOK_E_ID);
    assert_int_equal(webhook_sign(&k, "caf\xc3\xa9", 1, "", 0, sig), WEBHOOK_E_ID);
    assert_int_equal(webhook_sign(&k, "m", -1, "", 0, sig), WEBHOOK_E_TIMESTAMP);
    memset(id, 'a', WEBHOOK_ID_MAX);
    id[WEBHOOK_ID_MAX] = '\0';
    assert_int_equal(webhook_sign(&k, id, 0, NULL, 0, sig), 0);
    id[WEBHOOK_ID_MAX] = 'a';
    id[WEBHOOK_ID_MAX + 1] = '\0';
    assert_int_equal(webhook_sign(&k, id, 0, NULL, 0, sig), WEBHOOK_E_ID);
    assert_int_equal(webhook_sign(&k, "Az09_-", 0, NULL, 0, sig), 0);
}

/* ---- secrets ---- */

static void test_key_parse_errors(void **state)
{
    static const struct {
        const char *secret;
        int rc;
    } cases[] = {
        {"", WEBHOOK_E_SECRET_EMPTY},
        {"whsec_", WEBHOOK_E_SECRET_EMPTY},
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", WEBHOOK_E_SECRET_BASE64}, /* 31 digits */
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS!", WEBHOOK_E_SECRET_BASE64},
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS_", WEBHOOK_E_SECRET_BASE64}, /* base64url */
        {"whsec_MfKQ9r8GKYqrTwjU PD8ILPZIo2LaLaSw", WEBHOOK_E_SECRET_BASE64},
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n", WEBHOOK_E_SECRET_BASE64},
        {" whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", WEBHOOK_E_SECRET_BASE64},
        {"whsec_whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", WEBHOOK_E_SECRET_BASE64},
        {"WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", WEBHOOK_E_SECRET_BASE64},
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLQ==", WEBHOOK_E_SECRET_SHORT},      /* 22 bytes */
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLR==", WEBHOOK_E_SECRET_BASE64},     /* pad bits */
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwAAA=", 0},                       /* 26 bytes */
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwAAB=", WEBHOOK_E_SECRET_BASE64}, /* pad bits */
        {"whsec_=MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw===", WEBHOOK_E_SECRET_BASE64},
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2La=aSw", WEBHOOK_E_SECRET_BASE64},
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw====", WEBHOOK_E_SECRET_BASE64},
        {"whsk_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", WEBHOOK_E_SECRET_KIND},
        {"whpk_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", WEBHOOK_E_SECRET_KIND},
        {"my-raw-password", WEBHOOK_E_SECRET_BASE64}, /* not used as raw bytes */
    };
    struct webhook_key k;

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int want = cases[i].rc;

        memset(&k, 0xaa, sizeof(k));
        assert_int_equal(key_parse(cases[i].secret, &k), want);
        if (want != 0) {
            assert_int_equal(k.len, 0);
            assert_memory_equal(k.bytes, (unsigned char[WEBHOOK_KEY_MAX]){0}, WEBHOOK_KEY_MAX);
            assert_non_null(webhook_strerror(want));
        }
    }
    assert_int_equal(webhook_key_parse(&k, NULL), WEBHOOK_E_SECRET_EMPTY);
}

static void test_key_parse_sizes(void **state)
{
    char secret[128];
    struct webhook_key k;

    (void)state;
    /* 24 bytes = 32 digits; 64 bytes = 88 digits with "=="; 66 = 88 digits. */
    snprintf(secret, sizeof(secret), "whsec_%.32s", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef");
    assert_int_equal(key_parse(secret, &k), 0);
    assert_int_equal(k.len, 24);
    memset(secret, 'A', sizeof(secret));
    memcpy(secret, "whsec_", 6);
    memcpy(secret + 6 + 84, "AA==", 5);
    assert_int_equal(key_parse(secret, &k), 0);
    assert_int_equal(k.len, 64);
    memcpy(secret + 6 + 84, "AAA=", 5); /* 65 bytes */
    assert_int_equal(key_parse(secret, &k), WEBHOOK_E_SECRET_LONG);
    memcpy(secret + 6 + 84, "AAAA", 5); /* 66 bytes */
    assert_int_equal(key_parse(secret, &k), WEBHOOK_E_SECRET_LONG);
    /* 23 bytes: 32 digits with one '='. */
    assert_int_equal(key_parse("ABCDEFGHIJKLMNOPQRSTUVWXYZabcde=", &k), WEBHOOK_E_SECRET_BASE64);
    assert_int_equal(key_parse("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdA=", &k), WEBHOOK_E_SECRET_SHORT);
    /* Every alphabet character decodes, + and / included. */
    assert_int_equal(
        key_parse("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", &k), 0);
    assert_int_equal(k.len, 48);
    assert_memory_equal(k.bytes, "\x00\x10\x83", 3);
    assert_memory_equal(k.bytes + 45, "\xf3\xdf\xbf", 3);
}

static void test_key_raw(void **state)
{
    unsigned char raw[WEBHOOK_KEY_MAX + 1];
    struct webhook_key k, p;
    char a[WEBHOOK_SIG_LEN + 1], b[WEBHOOK_SIG_LEN + 1];

    (void)state;
    memset(raw, 7, sizeof(raw));
    assert_int_equal(webhook_key_raw(&k, raw, WEBHOOK_KEY_MIN - 1), WEBHOOK_E_SECRET_SHORT);
    assert_int_equal(k.len, 0);
    assert_int_equal(webhook_key_raw(&k, raw, WEBHOOK_KEY_MAX + 1), WEBHOOK_E_SECRET_LONG);
    assert_int_equal(webhook_key_raw(&k, raw, WEBHOOK_KEY_MAX), 0);
    /* The vector's key as raw bytes signs as the parsed secret does. */
    p = sw_key();
    assert_int_equal(webhook_key_raw(&k, p.bytes, p.len), 0);
    assert_int_equal(webhook_sign(&k, SW_ID, SW_TS, SW_PAYLOAD, strlen(SW_PAYLOAD), a), 0);
    assert_int_equal(webhook_sign(&p, SW_ID, SW_TS, SW_PAYLOAD, strlen(SW_PAYLOAD), b), 0);
    assert_string_equal(a, b);
}

/* ---- ids ---- */

static void test_event_id(void **state)
{
    char a[WEBHOOK_EVENT_ID_LEN + 1], b[WEBHOOK_EVENT_ID_LEN + 1];
    struct webhook_key k = sw_key();
    char sig[WEBHOOK_SIG_LEN + 1];

    (void)state;
    webhook_event_id(0x18de1a2b3c4ULL, 1, a);
    assert_string_equal(a, "msg_0000018de1a2b3c4_0000000000000001");
    webhook_event_id(UINT64_MAX, UINT64_MAX, a);
    assert_string_equal(a, "msg_ffffffffffffffff_ffffffffffffffff");
    assert_int_equal(strlen(a), WEBHOOK_EVENT_ID_LEN);
    webhook_event_id(0, 0, a);
    assert_string_equal(a, "msg_0000000000000000_0000000000000000");
    /* Order by counter within a node; distinct across nodes. */
    webhook_event_id(5, 9, a);
    webhook_event_id(5, 10, b);
    assert_true(strcmp(a, b) < 0);
    webhook_event_id(6, 9, b);
    assert_string_not_equal(a, b);
    webhook_event_id(0x10, 0x1, a); /* no "1" "01" vs "10" "1" ambiguity */
    webhook_event_id(0x1, 0x01, b);
    assert_string_not_equal(a, b);
    /* An id is a valid webhook-id. */
    assert_int_equal(webhook_sign(&k, a, 1, "", 0, sig), 0);
}

/* ---- retries ---- */

static void test_schedule_standard(void **state)
{
    static const int64_t nominal_s[] = {0,        5,         300,       1800,      7200,
                                        5 * 3600, 10 * 3600, 14 * 3600, 20 * 3600, 24 * 3600};
    int64_t total = 0;

    (void)state;
    assert_int_equal(ARRAY_SIZE(nominal_s), WEBHOOK_STANDARD_ATTEMPTS);
    for (unsigned a = 1; a <= WEBHOOK_STANDARD_ATTEMPTS; a++) {
        int64_t nom = nominal_s[a - 1] * 1000;

        assert_int_equal(webhook_next_delay_ms(WEBHOOK_STANDARD, a, 0.5), nom);
        assert_int_equal(webhook_next_delay_ms(WEBHOOK_STANDARD, a, 0.0), nom * 9 / 10);
        assert_int_equal(webhook_next_delay_ms(WEBHOOK_STANDARD, a, 1.0), nom * 11 / 10);
        for (double r = 0.0; r < 1.0; r += 0.01) {
            int64_t d = webhook_next_delay_ms(WEBHOOK_STANDARD, a, r);

            assert_true(d >= nom * 9 / 10 && d <= nom * 11 / 10);
        }
        total += nom;
    }
    assert_int_equal(total, ((75 * 60 + 35) * 60 + 5) * 1000LL); /* the spec's 75:35:05 */
    assert_int_equal(webhook_next_delay_ms(WEBHOOK_STANDARD, 0, 0.5), -1);
    assert_int_equal(webhook_next_delay_ms(WEBHOOK_STANDARD, 11, 0.5), -1);
    assert_int_equal(webhook_next_delay_ms(WEBHOOK_STANDARD, 1000, 0.5), -1);
    /* rnd01 is clamped; NaN reads as 0. */
    assert_int_equal(webhook_next_delay_ms(WEBHOOK_STANDARD, 2, -5.0), 4500);
    assert_int_equal(webhook_next_delay_ms(WEBHOOK_STANDARD, 2, 7.0), 5500);
    assert_int_equal(webhook_next_delay_ms(WEBHOOK_STANDARD, 2, 0.0 / 0.0), 4500);
}

static void test_schedule_pusher(void **state)
{
    static const int64_t want_max[] = {0, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000};
    int64_t worst = 0;

    (void)state;
    assert_int_equal(ARRAY_SIZE(want_max), WEBHOOK_PUSHER_ATTEMPTS);
    for (unsigned a = 1; a <= WEBHOOK_PUSHER_ATTEMPTS; a++) {
        int64_t nom = want_max[a - 1];

        assert_int_equal(webhook_next_delay_ms(WEBHOOK_PUSHER, a, 1.0), nom);
        assert_int_equal(webhook_next_delay_ms(WEBHOOK_PUSHER, a, 0.0), nom / 2);
        assert_int_equal(webhook_next_delay_ms(WEBHOOK_PUSHER, a, 0.5), nom * 3 / 4);
        for (double r = 0.0; r < 1.0; r += 0.01) {
            int64_t d = webhook_next_delay_ms(WEBHOOK_PUSHER, a, r);

            assert_true(d >= nom / 2 && d <= nom);
        }
        worst += webhook_next_delay_ms(WEBHOOK_PUSHER, a, 1.0) + WEBHOOK_PUSHER_TIMEOUT_MS;
    }
    /* Every wait at its longest and every attempt timing out: 291 s. */
    assert_int_equal(worst, 291000);
    assert_true(worst <= WEBHOOK_PUSHER_WINDOW_MS);
    assert_int_equal(webhook_next_delay_ms(WEBHOOK_PUSHER, 0, 0.5), -1);
    assert_int_equal(webhook_next_delay_ms(WEBHOOK_PUSHER, 10, 0.5), -1);
    assert_int_equal(webhook_next_delay_ms(WEBHOOK_PUSHER, UINT32_MAX, 0.5), -1);
    assert_int_equal(webhook_next_delay_ms((enum webhook_format)7, 1, 0.5), -1);
}

static void test_outcome(void **state)
{
    (void)state;
    for (int s = 200; s <= 299; s++) {
        assert_int_equal(webhook_outcome_of(WEBHOOK_STANDARD, s), WEBHOOK_DELIVERED);
        assert_int_equal(webhook_outcome_of(WEBHOOK_PUSHER, s), WEBHOOK_DELIVERED);
    }
    assert_int_equal(webhook_outcome_of(WEBHOOK_STANDARD, 410), WEBHOOK_GONE);
    assert_int_equal(webhook_outcome_of(WEBHOOK_PUSHER, 410), WEBHOOK_RETRY);
    static const int retry[] = {0,   100, 199, 300, 301, 302, 400, 401, 403, 404,
                                408, 413, 422, 429, 500, 502, 503, 504, 599, -1};
    for (size_t i = 0; i < ARRAY_SIZE(retry); i++) {
        assert_int_equal(webhook_outcome_of(WEBHOOK_STANDARD, retry[i]), WEBHOOK_RETRY);
        assert_int_equal(webhook_outcome_of(WEBHOOK_PUSHER, retry[i]), WEBHOOK_RETRY);
    }
}

static void test_strerror(void **state)
{
    static const int codes[] = {
        WEBHOOK_E_SECRET_EMPTY, WEBHOOK_E_SECRET_BASE64, WEBHOOK_E_SECRET_SHORT,
        WEBHOOK_E_SECRET_LONG,  WEBHOOK_E_SECRET_KIND,   WEBHOOK_E_EVENT,
        WEBHOOK_E_TIME,         WEBHOOK_E_FULL,          WEBHOOK_E_ID,
        WEBHOOK_E_TIMESTAMP,    WEBHOOK_E_SIGNATURE,
    };

    (void)state;
    assert_string_equal(webhook_strerror(0), "ok");
    for (size_t i = 0; i < ARRAY_SIZE(codes); i++) {
        assert_string_not_equal(webhook_strerror(codes[i]), webhook_strerror(-1));
        for (size_t j = i + 1; j < ARRAY_SIZE(codes); j++)
            assert_string_not_equal(webhook_strerror(codes[i]), webhook_strerror(codes[j]));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pusher_event_bodies),
        cmocka_unit_test(test_pusher_client_event),
        cmocka_unit_test(test_pusher_golden_batch),
        cmocka_unit_test(test_pusher_escaping),
        cmocka_unit_test(test_pusher_batch_full),
        cmocka_unit_test(test_pusher_batch_due),
        cmocka_unit_test(test_pusher_batch_errors),
        cmocka_unit_test(test_pusher_sign),
        cmocka_unit_test(test_pusher_verify),
        cmocka_unit_test(test_standard_bodies),
        cmocka_unit_test(test_standard_escaping),
        cmocka_unit_test(test_standard_body_errors),
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_standard_vector),
        cmocka_unit_test(test_standard_verify),
        cmocka_unit_test(test_sign_refusals),
        cmocka_unit_test(test_key_parse_errors),
        cmocka_unit_test(test_key_parse_sizes),
        cmocka_unit_test(test_key_raw),
        cmocka_unit_test(test_event_id),
        cmocka_unit_test(test_schedule_standard),
        cmocka_unit_test(test_schedule_pusher),
        cmocka_unit_test(test_outcome),
        cmocka_unit_test(test_strerror),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
