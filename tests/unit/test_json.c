/* SPDX-License-Identifier: MIT */
/*
 * test_json.c - the JSON output helpers: escaping of every control
 * character, quotes and backslashes; UTF-8 passed through; integers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_string),
        cmocka_unit_test(test_quotes_and_backslash),
        cmocka_unit_test(test_named_control_escapes),
        cmocka_unit_test(test_every_control_character),
        cmocka_unit_test(test_utf8_passes_through),
        cmocka_unit_test(test_integers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
