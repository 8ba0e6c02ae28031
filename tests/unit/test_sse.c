/* SPDX-License-Identifier: MIT */
/*
 * test_sse.c - event formatting (ids, names, multi-line data) and the
 * Last-Event-ID rules (header first, then ?lastEventId=, strict decimal).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sse.h"
#include "util.h"

static void expect_format(const char *event, uint64_t id, const char *data, const char *want)
{
    struct payload *p = sse_format(event, id, data, strlen(data));

    assert_int_equal(p->len, strlen(want));
    assert_memory_equal(p->data, want, p->len);
    payload_unref(p);
}

static void test_format_full_event(void **state)
{
    (void)state;
    expect_format("presence", 42, "{\"a\":1}", "id: 42\nevent: presence\ndata: {\"a\":1}\n\n");
}

static void test_format_without_id_or_name(void **state)
{
    (void)state;
    expect_format(NULL, 0, "x", "data: x\n\n");
}

static void test_format_multiline_data(void **state)
{
    (void)state;
    expect_format(NULL, 1, "a\nb\n", "id: 1\ndata: a\ndata: b\ndata: \n\n");
}

static void test_format_empty_data(void **state)
{
    (void)state;
    expect_format("e", 0, "", "event: e\ndata: \n\n");
}

static struct http_request make_req(const char *hdr_value, const char *query)
{
    struct http_request req;

    memset(&req, 0, sizeof(req));
    if (hdr_value) {
        req.headers[0].name = "Last-Event-ID";
        req.headers[0].name_len = 13;
        req.headers[0].value = hdr_value;
        req.headers[0].value_len = strlen(hdr_value);
        req.nheaders = 1;
    }
    if (query) {
        req.query = query;
        req.query_len = strlen(query);
    }
    return req;
}

static void test_last_event_id_header(void **state)
{
    struct http_request req = make_req("17", NULL);
    uint64_t id = 0;

    (void)state;
    assert_true(sse_last_event_id(&req, &id));
    assert_int_equal(id, 17);
}

static void test_last_event_id_header_wins_over_query(void **state)
{
    struct http_request req = make_req("5", "lastEventId=9");
    uint64_t id = 0;

    (void)state;
    assert_true(sse_last_event_id(&req, &id));
    assert_int_equal(id, 5);
}

static void test_last_event_id_query(void **state)
{
    struct http_request req = make_req(NULL, "x=1&lastEventId=12345");
    uint64_t id = 0;

    (void)state;
    assert_true(sse_last_event_id(&req, &id));
    assert_int_equal(id, 12345);
}

static void test_last_event_id_rejects_garbage(void **state)
{
    const char *bad[] = {"", "-1", "1a", " 1", "12345678901234567890", "0x10"};
    uint64_t id = 99;

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct http_request req = make_req(bad[i], NULL);
        assert_false(sse_last_event_id(&req, &id));
    }
    struct http_request none = make_req(NULL, NULL);
    assert_false(sse_last_event_id(&none, &id));
    assert_int_equal(id, 99);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_full_event),
        cmocka_unit_test(test_format_without_id_or_name),
        cmocka_unit_test(test_format_multiline_data),
        cmocka_unit_test(test_format_empty_data),
        cmocka_unit_test(test_last_event_id_header),
        cmocka_unit_test(test_last_event_id_header_wins_over_query),
        cmocka_unit_test(test_last_event_id_query),
        cmocka_unit_test(test_last_event_id_rejects_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
