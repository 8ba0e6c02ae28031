/* SPDX-License-Identifier: MIT */
/*
 * test_json.c - the JSON output helpers: escaping of every control
 * character, quotes and backslashes; UTF-8 passed through; integers. The
 * input side: json_check() against RFC 8259 and the cases cJSON lets
 * through (trailing data, raw control characters, \u0000, bad UTF-8),
 * every input read from a buffer that ends at a PROT_NONE page; and the
 * range-checked integer reads.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "guard.h"
#include "json.h"
#include "utf8.h"

static void expect_escaped(const char *in, size_t n, const char *want)
{
    struct buf b = {0};

    json_append_string(&b, in, n);
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.data, want, b.len);
    buf_release(&b);
}

static void test_plain_string(void **state)
{
    (void)state;
    expect_escaped("hello", 5, "\"hello\"");
    expect_escaped("", 0, "\"\"");
}

static void test_quotes_and_backslash(void **state)
{
    (void)state;
    expect_escaped("a\"b\\c", 5, "\"a\\\"b\\\\c\"");
}

static void test_named_control_escapes(void **state)
{
    (void)state;
    expect_escaped("\n\r\t", 3, "\"\\n\\r\\t\"");
}

static void test_every_control_character(void **state)
{
    (void)state;
    for (int ch = 0; ch < 0x20; ch++) {
        char in[1] = {(char)ch};
        struct buf b = {0};

        json_append_string(&b, in, 1);
        assert_true(b.len >= 4);
        assert_int_equal(b.data[1], '\\');
        for (size_t i = 0; i < b.len; i++)
            assert_true((unsigned char)b.data[i] >= 0x20);
        buf_release(&b);
    }
    expect_escaped("\x01", 1, "\"\\u0001\"");
    expect_escaped("\x1f", 1, "\"\\u001f\"");
    expect_escaped("a\0b", 3, "\"a\\u0000b\"");
}

static void test_utf8_passes_through(void **state)
{
    (void)state;
    expect_escaped("h\xc3\xa9 \xf0\x9f\x98\x80", 8, "\"h\xc3\xa9 \xf0\x9f\x98\x80\"");
}

/* Invalid UTF-8 never reaches a text frame: a kick reason with a stray
 * byte was forwarded as it was (issue 15, item 6). Each maximal ill-formed
 * subpart becomes one U+FFFD. */
static void test_invalid_utf8_is_replaced(void **state)
{
    (void)state;
    expect_escaped("a\xff"
                   "b",
                   3,
                   "\"a\xef\xbf\xbd"
                   "b\"");
    expect_escaped("\xc3", 1, "\"\xef\xbf\xbd\"");                 /* cut short at the end */
    expect_escaped("\xc3(", 2, "\"\xef\xbf\xbd(\"");               /* lead without its tail */
    expect_escaped("\xe2\x82(", 3, "\"\xef\xbf\xbd(\"");           /* one U+FFFD for the subpart */
    expect_escaped("\xc0\xaf", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\""); /* overlong: two */
    expect_escaped("\xed\xa0\x80", 3, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""); /* surrogate */
    expect_escaped("\xf4\x90\x80\x80", 4,
                   "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""); /* > U+10FFFF */
    expect_escaped("\xe2\x82\xac\xff\n", 5, "\"\xe2\x82\xac\xef\xbf\xbd\\n\"");
    for (int ch = 0x80; ch < 0x100; ch++) {
        char in[3] = {'x', (char)ch, '"'};
        struct buf b = {0};

        json_append_string(&b, in, sizeof(in));
        assert_true(utf8_valid(b.data, b.len));
        buf_release(&b);
    }
}

static void test_integers(void **state)
{
    struct buf b = {0};

    (void)state;
    json_append_u64(&b, 18446744073709551615ull);
    buf_append(&b, ",", 1);
    json_append_i64(&b, INT64_MIN);
    buf_append(&b, ",", 1);
    json_append_u64(&b, 0);
    assert_int_equal(b.len, strlen("18446744073709551615,-9223372036854775808,0"));
    assert_memory_equal(b.data, "18446744073709551615,-9223372036854775808,0", b.len);
    buf_release(&b);
}

/* ---- json_check ---- */

/* json_check over (p, n) placed before a guard page; every prefix too, so
 * a read past the end of any of them crashes. */
static int check_guarded(const char *p, size_t n)
{
    int r = 0;

    for (size_t k = 0; k <= n; k++) {
        struct guard g = guard_place(p, k);
        int rk = json_check(g.data, k);

        guard_free(&g);
        if (k == n)
            r = rk;
    }
    return r;
}

static void expect_json(const char *p, size_t n, int want)
{
    int got = check_guarded(p, n);

    if (got != want)
        fail_msg("json_check(\"%.*s\") = %d, want %d", (int)n, p, got, want);
    if (want == 0) {
        /* What json_check accepts, cJSON parses. */
        cJSON *v = cJSON_ParseWithLength(p, n);

        assert_non_null(v);
        cJSON_Delete(v);
    }
}

#define CHECK(lit, want) expect_json(lit, sizeof(lit) - 1, want)

static void test_check_accepts_json(void **state)
{
    (void)state;
    CHECK("{}", 0);
    CHECK("[]", 0);
    CHECK(" \t\r\n{ } \t\r\n", 0);
    CHECK("{\"type\":\"ping\",\"ref\":7}", 0);
    CHECK("{\"a\":[1,-2,3.5,-0,0e0,1E+2,1e-2,true,false,null,{},[]],\"b\":{\"c\":\"d\"}}", 0);
    CHECK("[ 1 , [ 2 , { \"x\" : [ ] } ] ]", 0);
    CHECK("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00\"", 0);
    CHECK("\"h\xc3\xa9 \xf0\x9f\x98\x80\"", 0);
    CHECK("{\"\":\"\"}", 0);
    CHECK("0", 0);
    CHECK("-12.5e3", 0);
    CHECK("null", 0);
    CHECK("\"\x7f\"", 0); /* DEL is not a control character for JSON */
}

static void test_check_refuses_syntax(void **state)
{
    static const char *const bad[] = {
        "",
        " ",
        "{",
        "}",
        "[",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\" 1}",
        "[1,]",
        "{,}",
        "[,1]",
        "{\"a\":1,}",
        "[1 2]",
        "{a:1}",
        "{'a':1}",
        "1.",
        ".5",
        "-",
        "1e",
        "1e+",
        "+1",
        "--1",
        "tru",
        "nul",
        "True",
        "NaN",
        "Infinity",
        "\"abc",
        "\"\\x\"",
        "\"\\u12\"",
        "\"\\u12g4\"",
        "[1}",
        "{\"a\":1]",
        "\xef\xbb\xbf{}",
        "{\"a\":1 \"b\":2}",
        "[\"a\" \"b\"]",
        "\"\\",
        "{\"a\"",
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        expect_json(bad[i], strlen(bad[i]), JSON_E_SYNTAX);
}

/* cJSON stops after the first value; the protocol wants the whole message. */
static void test_check_refuses_trailing_data(void **state)
{
    (void)state;
    CHECK("{} x", JSON_E_TRAILING);
    CHECK("{}{}", JSON_E_TRAILING);
    CHECK("{\"type\":\"ping\"} {\"type\":\"ping\"}", JSON_E_TRAILING);
    CHECK("1 2", JSON_E_TRAILING);
    CHECK("01", JSON_E_TRAILING); /* a number is "0", then more */
    CHECK("0x10", JSON_E_TRAILING);
    CHECK("\"a\"\"b\"", JSON_E_TRAILING);
    CHECK("{}\x01", JSON_E_TRAILING); /* cJSON skips any byte <= 0x20 as space */
    expect_json("{}\0", 3, JSON_E_TRAILING);
}

static void test_check_refuses_raw_control_characters(void **state)
{
    (void)state;
    for (int ch = 0; ch < 0x20; ch++) {
        char doc[] = "{\"k\":\"a?b\"}";

        doc[7] = (char)ch;
        expect_json(doc, sizeof(doc) - 1, JSON_E_CONTROL);
        doc[7] = 'x';
        doc[2] = (char)ch; /* in a member name too */
        expect_json(doc, sizeof(doc) - 1, JSON_E_CONTROL);
    }
}

static void test_check_refuses_escaped_nul(void **state)
{
    (void)state;
    CHECK("{\"type\":\"watch\",\"users\":[\"a\\u0000b\"]}", JSON_E_NUL);
    CHECK("\"\\u0000\"", JSON_E_NUL);
    CHECK("{\"\\u0000\":1}", JSON_E_NUL);
    CHECK("\"\\u0001\"", 0); /* escaped, other controls are fine */
}

static void test_check_refuses_bad_utf8(void **state)
{
    (void)state;
    CHECK("\"\xff\"", JSON_E_UTF8);
    CHECK("\"\xc0\xaf\"", JSON_E_UTF8);     /* overlong '/' */
    CHECK("\"\xed\xa0\x80\"", JSON_E_UTF8); /* raw surrogate */
    CHECK("\"\xc3\"", JSON_E_UTF8);         /* cut short by the quote */
    CHECK("\"\\ud800\"", JSON_E_UTF8);      /* lone high surrogate */
    CHECK("\"\\udc00\"", JSON_E_UTF8);      /* lone low surrogate */
    CHECK("\"\\ud800\\u0041\"", JSON_E_UTF8);
    CHECK("\"\\ud800x\"", JSON_E_UTF8);
    CHECK("{\"a\xff\":1}", JSON_E_UTF8);
    CHECK("\xc3\xa9", JSON_E_SYNTAX); /* outside a string */
}

static void test_check_depth_limit(void **state)
{
    char doc[2 * (JSON_MAX_DEPTH + 1)];
    cJSON *v;

    (void)state;
    memset(doc, '[', JSON_MAX_DEPTH);
    memset(doc + JSON_MAX_DEPTH, ']', JSON_MAX_DEPTH);
    assert_int_equal(json_check(doc, 2 * JSON_MAX_DEPTH), 0);
    v = cJSON_ParseWithLength(doc, 2 * JSON_MAX_DEPTH);
    assert_non_null(v);
    cJSON_Delete(v);
    memset(doc, '[', JSON_MAX_DEPTH + 1);
    memset(doc + JSON_MAX_DEPTH + 1, ']', JSON_MAX_DEPTH + 1);
    assert_int_equal(json_check(doc, sizeof(doc)), JSON_E_DEPTH);
    for (size_t i = 0; i < JSON_MAX_DEPTH; i++)
        doc[i] = i % 2 ? '[' : '{';
    assert_int_equal(json_check(doc, JSON_MAX_DEPTH), JSON_E_SYNTAX);
}

static void test_check_error_text(void **state)
{
    (void)state;
    assert_string_equal(json_strerror(JSON_E_TRAILING), "trailing data after the JSON value");
    assert_string_equal(json_strerror(JSON_E_NUL), "\\u0000 in a string");
    assert_string_equal(json_strerror(JSON_E_SYNTAX), "invalid JSON");
    assert_string_equal(json_strerror(-1), "invalid JSON");
}

/* ---- Integers ---- */

static int number_of(const char *text, int64_t min, int64_t max, int64_t *out)
{
    cJSON *v = cJSON_Parse(text);
    int r;

    assert_non_null(v);
    r = json_number_i64(v, min, max, out);
    cJSON_Delete(v);
    return r;
}

static void test_number_i64(void **state)
{
    int64_t x = 42;

    (void)state;
    assert_int_equal(number_of("7", INT64_MIN, INT64_MAX, &x), 0);
    assert_int_equal(x, 7);
    assert_int_equal(number_of("-0", INT64_MIN, INT64_MAX, &x), 0);
    assert_int_equal(x, 0);
    assert_int_equal(number_of("1e2", INT64_MIN, INT64_MAX, &x), 0);
    assert_int_equal(x, 100);
    assert_int_equal(number_of("-9223372036854775808", INT64_MIN, INT64_MAX, &x), 0);
    assert_true(x == INT64_MIN);
    x = 42;
    assert_int_equal(number_of("1.5", INT64_MIN, INT64_MAX, &x), -EINVAL);
    assert_int_equal(number_of("1e300", INT64_MIN, INT64_MAX, &x), -ERANGE);
    assert_int_equal(number_of("-1e300", INT64_MIN, INT64_MAX, &x), -ERANGE);
    /* 2^63 - 1 is 2^63 as a double: past the top. */
    assert_int_equal(number_of("9223372036854775807", INT64_MIN, INT64_MAX, &x), -ERANGE);
    assert_int_equal(number_of("18446744073709551616", 0, INT64_MAX, &x), -ERANGE);
    assert_int_equal(number_of("\"7\"", INT64_MIN, INT64_MAX, &x), -EINVAL);
    assert_int_equal(number_of("true", INT64_MIN, INT64_MAX, &x), -EINVAL);
    assert_int_equal(number_of("null", INT64_MIN, INT64_MAX, &x), -EINVAL);
    assert_int_equal(x, 42); /* untouched on error */
    assert_int_equal(json_number_i64(NULL, 0, 1, &x), -ENOENT);
}

static void test_number_i64_bounds(void **state)
{
    int64_t x = 0;

    (void)state;
    assert_int_equal(number_of("0", 1, 10, &x), -ERANGE);
    assert_int_equal(number_of("1", 1, 10, &x), 0);
    assert_int_equal(number_of("10", 1, 10, &x), 0);
    assert_int_equal(number_of("11", 1, 10, &x), -ERANGE);
    assert_int_equal(number_of("-1", 0, INT64_MAX, &x), -ERANGE);
}

static void test_get_i64(void **state)
{
    cJSON *o = cJSON_Parse("{\"since\":5,\"bad\":5.5,\"s\":\"5\"}");
    int64_t x = 0;

    (void)state;
    assert_int_equal(json_get_i64(o, "since", 0, INT64_MAX, &x), 0);
    assert_int_equal(x, 5);
    assert_int_equal(json_get_i64(o, "bad", 0, INT64_MAX, &x), -EINVAL);
    assert_int_equal(json_get_i64(o, "s", 0, INT64_MAX, &x), -EINVAL);
    assert_int_equal(json_get_i64(o, "absent", 0, INT64_MAX, &x), -ENOENT);
    assert_int_equal(json_get_i64(NULL, "since", 0, INT64_MAX, &x), -ENOENT);
    assert_int_equal(json_get_i64(cJSON_GetObjectItem(o, "since"), "since", 0, 9, &x), -ENOENT);
    cJSON_Delete(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_string),
        cmocka_unit_test(test_quotes_and_backslash),
        cmocka_unit_test(test_named_control_escapes),
        cmocka_unit_test(test_every_control_character),
        cmocka_unit_test(test_utf8_passes_through),
        cmocka_unit_test(test_invalid_utf8_is_replaced),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_check_accepts_json),
        cmocka_unit_test(test_check_refuses_syntax),
        cmocka_unit_test(test_check_refuses_trailing_data),
        cmocka_unit_test(test_check_refuses_raw_control_characters),
        cmocka_unit_test(test_check_refuses_escaped_nul),
        cmocka_unit_test(test_check_refuses_bad_utf8),
        cmocka_unit_test(test_check_depth_limit),
        cmocka_unit_test(test_check_error_text),
        cmocka_unit_test(test_number_i64),
        cmocka_unit_test(test_number_i64_bounds),
        cmocka_unit_test(test_get_i64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
