/* SPDX-License-Identifier: MIT */
/*
 * test_pusher_filter.c - Pusher room frames without the reader's blockers:
 * member events of a blocker go, a blocker leaves subscription_succeeded's
 * ids, hash and count, a blocker's client event goes, a payload of several
 * frames keeps the others in order, and what is not the adapter's own
 * frame is passed on untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cJSON.h>
#include <cmocka.h>

#include "buf.h"
#include "pusher_filter.h"
#include "ws.h"

static bool blocks(void *ctx, const char *user)
{
    (void)ctx;
    return strcmp(user, "bob") == 0;
}

static void add(struct buf *b, const char *json)
{
    struct payload *f = ws_frame_payload(WS_OP_TEXT, json, strlen(json));

    buf_append(b, f->data, f->len);
    payload_unref(f);
}

static struct payload *frames(const char *a, const char *b)
{
    struct buf out = {0};
    struct payload *p;

    add(&out, a);
    if (b)
        add(&out, b);
    p = payload_from(out.data, out.len);
    buf_release(&out);
    return p;
}

/* The JSON of the only frame of p, copied into out. */
static void only_json(const struct payload *p, char *out, size_t size)
{
    struct ws_frame wf;
    ssize_t h = ws_decode_header(p->data, p->len, &wf);

    assert_true(h > 0);
    assert_int_equal((size_t)h + wf.len, p->len);
    assert_true(wf.len < size);
    memcpy(out, p->data + h, wf.len);
    out[wf.len] = '\0';
}

#define ADDED(u)                                                                       \
    "{\"event\":\"pusher_internal:member_added\",\"channel\":\"presence-a\",\"data\":" \
    "\"{\\\"user_id\\\":\\\"" u "\\\",\\\"user_info\\\":{}}\"}"
#define REMOVED(u)                                                                       \
    "{\"event\":\"pusher_internal:member_removed\",\"channel\":\"presence-a\",\"data\":" \
    "\"{\\\"user_id\\\":\\\"" u "\\\"}\"}"

static void test_member_events(void **state)
{
    struct payload *in, *out;
    char json[512];

    (void)state;
    in = frames(ADDED("bob"), NULL);
    assert_null(pusher_filter_blocked(in, blocks, NULL));
    payload_unref(in);
    in = frames(ADDED("ann"), NULL);
    out = pusher_filter_blocked(in, blocks, NULL);
    assert_ptr_equal(out, in); /* nothing to take out: the same payload */
    payload_unref(out);
    payload_unref(in);
    in = frames(REMOVED("bob"), ADDED("ann")); /* a delta: the other stays */
    out = pusher_filter_blocked(in, blocks, NULL);
    assert_non_null(out);
    only_json(out, json, sizeof(json));
    assert_string_equal(json, ADDED("ann"));
    payload_unref(out);
    payload_unref(in);
}

static void test_snapshot(void **state)
{
    const char *ss =
        "{\"event\":\"pusher_internal:subscription_succeeded\",\"channel\":\"presence-a\","
        "\"data\":\"{\\\"presence\\\":{\\\"ids\\\":[\\\"ann\\\",\\\"bob\\\"],\\\"hash\\\":"
        "{\\\"ann\\\":{},\\\"bob\\\":{\\\"x\\\":1}},\\\"count\\\":2}}\"}";
    struct payload *in = frames(ss, NULL), *out;
    char json[512];
    cJSON *root, *data, *pres;

    (void)state;
    out = pusher_filter_blocked(in, blocks, NULL);
    assert_non_null(out);
    assert_ptr_not_equal(out, in);
    only_json(out, json, sizeof(json));
    root = cJSON_Parse(json);
    data = cJSON_Parse(cJSON_GetStringValue(cJSON_GetObjectItem(root, "data")));
    pres = cJSON_GetObjectItem(data, "presence");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(pres, "ids")), 1);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(pres, "ids"), 0)->valuestring,
                        "ann");
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(pres, "hash"), "bob"));
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(pres, "hash"), "ann"));
    assert_int_equal(cJSON_GetObjectItem(pres, "count")->valueint, 1);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(root, "event")),
                        "pusher_internal:subscription_succeeded");
    cJSON_Delete(data);
    cJSON_Delete(root);
    payload_unref(out);
    payload_unref(in);
}

static void test_client_event_and_others(void **state)
{
    struct payload *in, *out;

    (void)state;
    in = frames(
        "{\"event\":\"client-x\",\"channel\":\"presence-a\",\"data\":\"{}\",\"user_id\":\"bob\"}",
        NULL);
    assert_null(pusher_filter_blocked(in, blocks, NULL));
    payload_unref(in);
    in = frames("{\"event\":\"my-event\",\"channel\":\"private-a\",\"data\":\"{}\"}", NULL);
    out = pusher_filter_blocked(in, blocks, NULL);
    assert_ptr_equal(out, in);
    payload_unref(out);
    payload_unref(in);
    in = payload_from("not a frame", 11); /* not the adapter's: untouched */
    out = pusher_filter_blocked(in, blocks, NULL);
    assert_ptr_equal(out, in);
    payload_unref(out);
    payload_unref(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_member_events),
        cmocka_unit_test(test_snapshot),
        cmocka_unit_test(test_client_event_and_others),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
