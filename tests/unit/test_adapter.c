/* SPDX-License-Identifier: MIT */
/*
 * test_adapter.c - the protocol adapter seam (adapter.h, frame.h): the
 * registry gives each table one id, and a client's events are encoded and
 * sent by the adapter it opened with, from structured values, not by the
 * engine and not by another protocol's table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "adapter.h"
#include "client.h"
#include "frame.h"
#include "presence.h"
#include "room.h"

/* What the test adapter saw: the last event's fields and the frames sent. */
static struct {
    char code[32], ref[16];
    int why;
    unsigned sent;
    struct client *to;
    char last[64];
    unsigned room_encodes; /* room events the second protocol encoded */
    char room_user[16];    /* the first join's user it saw */
} seen;

static struct payload *text(const char *s)
{
    return payload_from(s, strlen(s));
}

static struct payload *t_error(const struct error_event *ev)
{
    snprintf(seen.code, sizeof(seen.code), "%s", ev->code);
    snprintf(seen.ref, sizeof(seen.ref), "%s", ev->ref ? ev->ref : "");
    return text("E");
}

static struct payload *t_ack(const char *ref)
{
    snprintf(seen.ref, sizeof(seen.ref), "%s", ref);
    return text("A");
}

static struct payload *t_ended(const struct ended_event *ev)
{
    seen.why = ev->why;
    return text("X");
}

static struct payload *t_expired(void)
{
    return text("T");
}

static void t_send(struct client *c, struct payload *f)
{
    seen.sent++;
    seen.to = c;
    snprintf(seen.last, sizeof(seen.last), "%.*s", (int)f->len, f->data);
}

static struct payload *t_room_delta(const struct room_delta_view *v, struct buf *scratch)
{
    (void)scratch;
    seen.room_encodes++;
    snprintf(seen.room_user, sizeof(seen.room_user), "%s", v->njoins ? v->joins[0].user : "");
    return text("D");
}

static const struct proto_adapter first = {.name = "first"};
static const struct proto_adapter second = {
    .name = "second",
    .encode_error = t_error,
    .encode_ack = t_ack,
    .encode_ended = t_ended,
    .encode_token_expired = t_expired,
    .encode_room_delta = t_room_delta,
    .send = t_send,
};

static void test_register_ids(void **state)
{
    unsigned a, b;

    (void)state;
    a = adapter_register(&first);
    b = adapter_register(&second);
    assert_int_equal(a, ADAPTER_DEFAULT); /* the first registered */
    assert_int_not_equal(a, b);
    assert_int_equal(adapter_register(&second), b); /* idempotent */
    assert_ptr_equal(adapter_get(a), &first);
    assert_ptr_equal(adapter_get(b), &second);
    assert_int_equal(adapter_count(), 2);
}

/* A client opened under the second protocol gets its replies and session
 * events from that table alone (first has no encoders: calling it would
 * crash), each as one encode and one send. */
static void test_client_uses_its_adapter(void **state)
{
    struct client c = {0};

    (void)state;
    adapter_register(&first);
    c.proto = adapter_register(&second) & 3u;
    memset(&seen, 0, sizeof(seen));
    frame_send_error(&c, "invalid", "bad", "7");
    assert_string_equal(seen.code, "invalid");
    assert_string_equal(seen.ref, "7");
    assert_string_equal(seen.last, "E");
    assert_ptr_equal(seen.to, &c);
    frame_send_ack(&c, ""); /* no ref: no ack at all */
    assert_int_equal(seen.sent, 1);
    frame_send_ack(&c, "\"r\"");
    assert_string_equal(seen.last, "A");
    frame_send_session_ended(&c, PRESENCE_END_TTL, NULL);
    assert_int_equal(seen.why, PRESENCE_END_TTL);
    frame_send_token_expired(&c);
    assert_string_equal(seen.last, "T");
    assert_int_equal(seen.sent, 4);
}

/* The per-event cache drops every protocol's frame. */
static void test_frames_release(void **state)
{
    struct adapter_frames fs = {0};

    (void)state;
    fs.f[0] = text("a");
    fs.f[2] = text("b");
    adapter_frames_release(&fs);
    for (unsigned i = 0; i < ADAPTER_MAX; i++)
        assert_null(fs.f[i]);
}

/* A room event's frame per protocol, from the per-event cache: the
 * default protocol's is the payload the room core made (no encode), the
 * second's is encoded from the event's value on first need, once, and
 * shared by every later recipient of that protocol. */
static void test_room_event_once_per_protocol(void **state)
{
    struct room_entry join = {.user = "ann", .joined_at = 7, .meta = "{}", .meta_len = 2};
    struct room_delta_view v = {
        .head = {.room = "r", .epoch = 1, .seq = 1, .count = 1},
        .joins = &join,
        .njoins = 1,
        .join_total = 1,
    };
    struct payload *native = text("N");
    struct room_event ev = {
        .room = "r", .epoch = 1, .seq = 1, .msg = {native, 1}, .kind = ROOM_EV_DELTA, .delta = &v};
    struct adapter_frames fs = {0};
    unsigned b;
    struct payload *f1, *f2;

    (void)state;
    adapter_register(&first);
    b = adapter_register(&second);
    memset(&seen, 0, sizeof(seen));
    assert_ptr_equal(frame_room_event(&fs, ADAPTER_DEFAULT, &ev), native);
    assert_int_equal(seen.room_encodes, 0);
    f1 = frame_room_event(&fs, b, &ev);
    f2 = frame_room_event(&fs, b, &ev);
    assert_ptr_equal(f1, f2);
    assert_memory_equal(f1->data, "D", 1);
    assert_int_equal(seen.room_encodes, 1);
    assert_string_equal(seen.room_user, "ann");
    assert_ptr_equal(frame_room_event(&fs, ADAPTER_DEFAULT, &ev), native);
    adapter_frames_release(&fs);
    payload_unref(native); /* the cache held its own reference */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_ids),
        cmocka_unit_test(test_client_uses_its_adapter),
        cmocka_unit_test(test_frames_release),
        cmocka_unit_test(test_room_event_once_per_protocol),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
