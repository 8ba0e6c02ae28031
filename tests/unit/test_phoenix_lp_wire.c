/* SPDX-License-Identifier: MIT */
/*
 * test_phoenix_lp_wire.c - the long-poll transport's pure parts
 * (phoenix_lp_wire.h): session tokens made and checked (a forged MAC, an
 * other key, a changed id, a cut or padded token all fail), the NDJSON
 * splitter on phoenix.js's batches ("\n") and Phoenix's "\r\n", empty
 * lines skipped, and base64 as phoenix.js's btoa() writes it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "phoenix_lp_wire.h"

static const unsigned char key[PHX_LP_KEY_LEN] = "0123456789abcdef0123456789abcde";
static const unsigned char other[PHX_LP_KEY_LEN] = "fedcba9876543210fedcba987654321";

static void test_token(void **state)
{
    char t[PHX_LP_TOKEN_LEN + 1], bad[PHX_LP_TOKEN_LEN + 2];
    uint64_t id = 0;

    (void)state;
    phx_lp_token_make(key, 0x0001800000000007ull, t);
    assert_int_equal(strlen(t), PHX_LP_TOKEN_LEN);
    assert_memory_equal(t, "lp1.0001800000000007.", 21);
    assert_true(phx_lp_token_like(t, strlen(t)));
    assert_int_equal(phx_lp_token_check(key, t, strlen(t), &id), 0);
    assert_true(id == 0x0001800000000007ull);
    assert_int_equal(phx_lp_token_check(other, t, strlen(t), &id), -2);
    memcpy(bad, t, sizeof(t));
    bad[19] = '8'; /* another id under the same MAC */
    assert_int_equal(phx_lp_token_check(key, bad, strlen(bad), &id), -2);
    memcpy(bad, t, sizeof(t));
    bad[PHX_LP_TOKEN_LEN - 1] = bad[PHX_LP_TOKEN_LEN - 1] == '0' ? '1' : '0';
    assert_int_equal(phx_lp_token_check(key, bad, strlen(bad), &id), -2);
    assert_int_equal(phx_lp_token_check(key, t, strlen(t) - 1, &id), -1);
    memcpy(bad, t, sizeof(t));
    strcat(bad, "0");
    assert_int_equal(phx_lp_token_check(key, bad, strlen(bad), &id), -1);
    memcpy(bad, t, sizeof(t));
    bad[5] = 'G'; /* not hex */
    assert_int_equal(phx_lp_token_check(key, bad, strlen(bad), &id), -1);
    assert_false(phx_lp_token_like("eyJhbGciOi.x.y", 14));
}

static void test_lines(void **state)
{
    static const char body[] = "[1]\n\n[2]\r\n\r\n{\"a\":3}\r\nAAEC";
    const char *want[] = {"[1]", "[2]", "{\"a\":3}", "AAEC"};
    size_t pos = 0, len, k = 0;
    const char *line;

    (void)state;
    while (phx_lp_next_line(body, strlen(body), &pos, &line, &len)) {
        assert_true(k < 4);
        assert_int_equal(len, strlen(want[k]));
        assert_memory_equal(line, want[k], len);
        k++;
    }
    assert_int_equal(k, 4);
    assert_true(phx_lp_line_is_text("[1]", 3));
    assert_true(phx_lp_line_is_text("{}", 2));
    assert_false(phx_lp_line_is_text("AAEC", 4));
    pos = 0;
    assert_false(phx_lp_next_line("\n\r\n\n", 4, &pos, &line, &len));
}

static void test_base64(void **state)
{
    char out[16];

    (void)state;
    assert_int_equal(phx_lp_b64_decode("aGVsbG8=", 8, out, sizeof(out)), 5);
    assert_memory_equal(out, "hello", 5);
    assert_int_equal(phx_lp_b64_decode("aGVsbG8", 7, out, sizeof(out)), 5);
    assert_int_equal(phx_lp_b64_decode("AAEC", 4, out, sizeof(out)), 3);
    assert_memory_equal(out, "\0\1\2", 3);
    assert_int_equal(phx_lp_b64_decode("a-_b", 4, out, sizeof(out)), -1);
    assert_int_equal(phx_lp_b64_decode("aGVsbG8=", 8, out, 4), -1);
    assert_int_equal(phx_lp_b64_decode("a", 1, out, sizeof(out)), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token),
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_base64),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
