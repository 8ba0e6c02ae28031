/* SPDX-License-Identifier: MIT */
/*
 * test_utf8.c - the incremental UTF-8 validator: Markus Kuhn style stress
 * cases (boundaries, lonely and truncated sequences, impossible bytes,
 * overlongs, surrogates, beyond U+10FFFF, non-characters), the exact byte
 * at which invalid input is rejected, every split point, and exhaustive
 * agreement with a straightforward decoding validator. Every input is read
 * from the end of a page followed by a PROT_NONE page.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "guard.h"
#include "utf8.h"
#include "util.h"

struct sample {
    const char *bytes;
    size_t len; /* 0: strlen(bytes) */
};

#define S(lit)               \
    {                        \
        lit, sizeof(lit) - 1 \
    }

/* Steps through (p, n) placed at a guard page, in pieces cut at a and b. */
static uint32_t step_split(const char *p, size_t n, size_t a, size_t b)
{
    struct guard g1 = guard_place(p, a);
    struct guard g2 = guard_place(p + a, b - a);
    struct guard g3 = guard_place(p + b, n - b);
    uint32_t st = utf8_step(UTF8_ACCEPT, g1.data, a);

    st = utf8_step(st, g2.data, b - a);
    st = utf8_step(st, g3.data, n - b);
    guard_free(&g1);
    guard_free(&g2);
    guard_free(&g3);
    return st;
}

static uint32_t step_whole(const char *p, size_t n)
{
    struct guard g = guard_place(p, n);
    uint32_t st = utf8_step(UTF8_ACCEPT, g.data, n);

    guard_free(&g);
    return st;
}

static uint32_t step_bytewise(const char *p, size_t n)
{
    uint32_t st = UTF8_ACCEPT;

    for (size_t i = 0; i < n; i++) {
        struct guard g = guard_place(p + i, 1);
        st = utf8_step(st, g.data, 1);
        guard_free(&g);
    }
    return st;
}

/* Whole, byte by byte, and split at every pair of points. */
static void expect_all_ways(const char *p, size_t n, bool valid)
{
    uint32_t st = step_whole(p, n);

    if (valid)
        assert_int_equal(st, UTF8_ACCEPT);
    else
        assert_int_not_equal(st, UTF8_ACCEPT);
    assert_int_equal(step_bytewise(p, n), st);
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b++)
            assert_int_equal(step_split(p, n, a, b), st);
}

/* Reference: decode each sequence and check the code point's range. */
static bool ref_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        uint8_t b = s[i];
        size_t len;
        uint32_t cp, min;

        if (b < 0x80) {
            i++;
            continue;
        } else if (b >= 0xC0 && b < 0xE0) {
            len = 2, cp = b & 0x1Fu, min = 0x80;
        } else if (b >= 0xE0 && b < 0xF0) {
            len = 3, cp = b & 0x0Fu, min = 0x800;
        } else if (b >= 0xF0 && b < 0xF8) {
            len = 4, cp = b & 0x07u, min = 0x10000;
        } else {
            return false;
        }
        if (i + len > n)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0u) != 0x80u)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3Fu);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

static size_t encode(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | cp >> 18);
    out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

static void expect_samples(const struct sample *s, size_t count, bool valid)
{
    for (size_t i = 0; i < count; i++) {
        size_t n = s[i].len;
        expect_all_ways(s[i].bytes, n, valid);
        assert_int_equal(ref_valid((const uint8_t *)s[i].bytes, n), valid);
    }
}

/* Rejected exactly at byte index bad: the prefix before it is not rejected. */
static void expect_reject_at(const char *p, size_t n, size_t bad)
{
    assert_int_not_equal(step_whole(p, bad), UTF8_REJECT);
    assert_int_equal(step_whole(p, bad + 1), UTF8_REJECT);
    assert_int_equal(step_whole(p, n), UTF8_REJECT);
}

/* ---- cases ---- */

static void test_empty_is_valid(void **state)
{
    (void)state;
    assert_int_equal(utf8_step(UTF8_ACCEPT, NULL, 0), UTF8_ACCEPT);
    assert_true(utf8_valid("", 0));
}

static void test_ascii_is_valid(void **state)
{
    static const struct sample s[] = {S("a"),
                                      S("Hello-\x01\x7f"),
                                      S("{\"type\":\"ping\"}"),
                                      S("0123456789abcdefghijklmnopqrstuvwxyz"),
                                      {"\0\0\0", 3}};
    (void)state;
    expect_samples(s, ARRAY_SIZE(s), true);
}

static void test_kuhn_greek_word_is_valid(void **state)
{
    static const struct sample s[] = {S("\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"),
                                      S("Hello-\xc2\xb5@\xc3\x9f\xc3\xb6\xc3\xa4\xc3\xbc\xc3\xa0"
                                        "\xc3\xa1-UTF-8!!")};
    (void)state;
    expect_samples(s, ARRAY_SIZE(s), true);
}

static void test_boundary_code_points_are_valid(void **state)
{
    static const struct sample s[] = {
        {"\x00", 1},       S("\x7f"),         S("\xc2\x80"),         S("\xdf\xbf"),
        S("\xe0\xa0\x80"), S("\xef\xbf\xbf"), S("\xf0\x90\x80\x80"), S("\xf4\x8f\xbf\xbf"),
        S("\xed\x9f\xbf"), S("\xee\x80\x80"), S("\xef\xbf\xbd"),     S("\xf3\xbf\xbf\xbf"),
    };
    (void)state;
    expect_samples(s, ARRAY_SIZE(s), true);
}

static void test_noncharacters_are_valid(void **state)
{
    static const struct sample s[] = {
        S("\xef\xbf\xbe"),     S("\xef\xbf\xbf"),     S("\xef\xb7\x90"),     S("\xef\xb7\xaf"),
        S("\xf0\x9f\xbf\xbe"), S("\xf0\x9f\xbf\xbf"), S("\xf4\x8f\xbf\xbe"), S("\xf4\x8f\xbf\xbf"),
    };
    (void)state;
    expect_samples(s, ARRAY_SIZE(s), true);
}

static void test_lonely_continuation_bytes_are_rejected(void **state)
{
    static const struct sample s[] = {S("\x80"),     S("\xbf"),         S("a\x80"),
                                      S("\x80\xbf"), S("\x80\xbf\x80"), S("\xc2\x80\x80")};
    (void)state;
    expect_samples(s, ARRAY_SIZE(s), false);
    for (unsigned b = 0x80; b <= 0xbf; b++) {
        char one = (char)b;
        assert_int_equal(step_whole(&one, 1), UTF8_REJECT);
    }
}

static void test_lonely_start_bytes_are_rejected(void **state)
{
    (void)state;
    for (unsigned b = 0xc0; b <= 0xff; b++) {
        char two[2] = {(char)b, ' '};
        assert_int_equal(step_whole(two, 2), UTF8_REJECT);
        assert_false(ref_valid((const uint8_t *)two, 2));
    }
}

static void test_truncated_sequences_stay_incomplete(void **state)
{
    static const struct sample s[] = {S("\xc2"),         S("\xe0\xa0"), S("\xe1"),
                                      S("\xf0\x90\x80"), S("\xf4\x8f"), S("\xf1")};
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(s); i++) {
        uint32_t st = step_whole(s[i].bytes, s[i].len);
        assert_int_not_equal(st, UTF8_ACCEPT);
        assert_int_not_equal(st, UTF8_REJECT);
        assert_false(utf8_valid(s[i].bytes, s[i].len));
    }
    expect_samples(s, ARRAY_SIZE(s), false);
}

static void test_truncated_sequence_before_ascii_is_rejected(void **state)
{
    static const struct sample s[] = {S("\xc2 "), S("\xe0\xa0 "), S("\xf0\x90\x80 "),
                                      S("\xdf\xef\xbf"), S("\xe0\x80\xaf\xc0")};
    (void)state;
    expect_samples(s, ARRAY_SIZE(s), false);
}

static void test_five_and_six_byte_forms_are_rejected(void **state)
{
    static const struct sample s[] = {S("\xf8\x88\x80\x80\x80"), S("\xfb\xbf\xbf\xbf\xbf"),
                                      S("\xfc\x84\x80\x80\x80\x80"), S("\xfd\xbf\xbf\xbf\xbf\xbf")};
    (void)state;
    expect_samples(s, ARRAY_SIZE(s), false);
}

static void test_impossible_bytes_are_rejected(void **state)
{
    static const struct sample s[] = {S("\xfe"), S("\xff"), S("\xfe\xfe\xff\xff")};
    (void)state;
    expect_samples(s, ARRAY_SIZE(s), false);
}

static void test_overlong_forms_are_rejected(void **state)
{
    static const struct sample s[] = {
        S("\xc0\xaf"),
        S("\xe0\x80\xaf"),
        S("\xf0\x80\x80\xaf"),
        S("\xc1\xbf"),
        S("\xe0\x9f\xbf"),
        S("\xf0\x8f\xbf\xbf"),
        S("\xf8\x80\x80\x80\xaf"),
        S("\xfc\x80\x80\x80\x80\xaf"),
    };
    (void)state;
    expect_samples(s, ARRAY_SIZE(s), false);
}

static void test_overlong_nul_is_rejected(void **state)
{
    static const struct sample s[] = {S("\xc0\x80"), S("\xe0\x80\x80"), S("\xf0\x80\x80\x80"),
                                      S("\xf8\x80\x80\x80\x80")};
    (void)state;
    expect_samples(s, ARRAY_SIZE(s), false);
}

static void test_surrogates_are_rejected(void **state)
{
    static const struct sample s[] = {
        S("\xed\xa0\x80"),
        S("\xed\xad\xbf"),
        S("\xed\xae\x80"),
        S("\xed\xaf\xbf"),
        S("\xed\xb0\x80"),
        S("\xed\xbe\x80"),
        S("\xed\xbf\xbf"),
        S("\xed\xa0\x80\xed\xb0\x80"),
        S("\xed\xaf\xbf\xed\xbf\xbf"),
    };
    (void)state;
    expect_samples(s, ARRAY_SIZE(s), false);
}

static void test_beyond_u10ffff_is_rejected(void **state)
{
    static const struct sample s[] = {S("\xf4\x90\x80\x80"), S("\xf5\x80\x80\x80"),
                                      S("\xf7\xbf\xbf\xbf"), S("\xf4\xbf\xbf\xbf")};
    (void)state;
    expect_samples(s, ARRAY_SIZE(s), false);
}

/* Autobahn 6.4.x: rejection must come at the first impossible byte. */
static void test_rejects_at_first_bad_byte(void **state)
{
    static const char kosme_surrogate[] = "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"
                                          "\xed\xa0\x80"
                                          "edited";
    static const char kosme_f4[] = "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"
                                   "\xf4\x90\x80\x80"
                                   "edited";
    (void)state;
    expect_reject_at(kosme_surrogate, sizeof(kosme_surrogate) - 1, 12);
    expect_reject_at(kosme_f4, sizeof(kosme_f4) - 1, 12);
    expect_reject_at("\xc0\x80", 2, 0);
    expect_reject_at("\xe0\x80\x80", 3, 1);
    expect_reject_at("\xf0\x8f\xbf\xbf", 4, 1);
    expect_reject_at("\xf4\x8f\xbf\x41", 4, 3);
    expect_reject_at("abc\x80", 4, 3);
}

static void test_reject_is_sticky(void **state)
{
    (void)state;
    assert_int_equal(utf8_step(UTF8_REJECT, "abc", 3), UTF8_REJECT);
    assert_int_equal(utf8_step(UTF8_REJECT, "\xc2\x80", 2), UTF8_REJECT);
    assert_int_equal(utf8_step(UTF8_REJECT, NULL, 0), UTF8_REJECT);
}

/* The word-at-a-time ASCII skip must notice a high byte at any offset. */
static void test_ascii_run_with_bad_byte_at_every_offset(void **state)
{
    char buf[72];

    (void)state;
    for (size_t pos = 0; pos < sizeof(buf); pos++) {
        memset(buf, 'x', sizeof(buf));
        buf[pos] = (char)0x80;
        expect_reject_at(buf, sizeof(buf), pos);
        memset(buf, 'x', sizeof(buf));
        if (pos + 2 <= sizeof(buf)) {
            buf[pos] = (char)0xc3;
            buf[pos + 1] = (char)0xa9;
            assert_int_equal(step_whole(buf, sizeof(buf)), UTF8_ACCEPT);
        }
    }
}

static void test_every_code_point_encodes_valid_unless_surrogate(void **state)
{
    uint8_t b[4];

    (void)state;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        size_t n = encode(cp, b);
        bool want = cp < 0xD800 || cp > 0xDFFF;
        assert_int_equal(utf8_step(UTF8_ACCEPT, b, n) == UTF8_ACCEPT, want);
    }
}

static void test_all_two_and_three_byte_inputs_match_reference(void **state)
{
    uint8_t b[3];

    (void)state;
    for (unsigned i = 0; i < 0x10000; i++) {
        b[0] = (uint8_t)(i >> 8), b[1] = (uint8_t)i;
        assert_int_equal(utf8_valid(b, 2), ref_valid(b, 2));
    }
    for (unsigned i = 0; i < 0x1000000; i++) {
        b[0] = (uint8_t)(i >> 16), b[1] = (uint8_t)(i >> 8), b[2] = (uint8_t)i;
        if (utf8_valid(b, 3) != ref_valid(b, 3))
            fail_msg("mismatch on %02x %02x %02x", b[0], b[1], b[2]);
    }
}

static void test_four_byte_leads_match_reference(void **state)
{
    static const uint8_t tails[] = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90,
                                    0x9f, 0xa0, 0xbf, 0xc0, 0xff};
    uint8_t b[4];

    (void)state;
    for (unsigned lead = 0xe0; lead <= 0xff; lead++)
        for (unsigned second = 0; second <= 0xff; second++)
            for (size_t t = 0; t < sizeof(tails); t++)
                for (size_t u = 0; u < sizeof(tails); u++) {
                    b[0] = (uint8_t)lead, b[1] = (uint8_t)second;
                    b[2] = tails[t], b[3] = tails[u];
                    if (utf8_valid(b, 4) != ref_valid(b, 4))
                        fail_msg("mismatch on %02x %02x %02x %02x", b[0], b[1], b[2], b[3]);
                }
}

static void test_valid_prefix_stops_at_character_boundary(void **state)
{
    (void)state;
    assert_int_equal(utf8_valid_prefix("abc", 3), 3);
    assert_int_equal(utf8_valid_prefix("ab\xc3", 3), 2);
    assert_int_equal(utf8_valid_prefix("ab\xc3\xa9", 4), 4);
    assert_int_equal(utf8_valid_prefix("a\xf0\x90\x80", 4), 1);
    assert_int_equal(utf8_valid_prefix("a\x80zz", 4), 1);
    assert_int_equal(utf8_valid_prefix(NULL, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_is_valid),
        cmocka_unit_test(test_ascii_is_valid),
        cmocka_unit_test(test_kuhn_greek_word_is_valid),
        cmocka_unit_test(test_boundary_code_points_are_valid),
        cmocka_unit_test(test_noncharacters_are_valid),
        cmocka_unit_test(test_lonely_continuation_bytes_are_rejected),
        cmocka_unit_test(test_lonely_start_bytes_are_rejected),
        cmocka_unit_test(test_truncated_sequences_stay_incomplete),
        cmocka_unit_test(test_truncated_sequence_before_ascii_is_rejected),
        cmocka_unit_test(test_five_and_six_byte_forms_are_rejected),
        cmocka_unit_test(test_impossible_bytes_are_rejected),
        cmocka_unit_test(test_overlong_forms_are_rejected),
        cmocka_unit_test(test_overlong_nul_is_rejected),
        cmocka_unit_test(test_surrogates_are_rejected),
        cmocka_unit_test(test_beyond_u10ffff_is_rejected),
        cmocka_unit_test(test_rejects_at_first_bad_byte),
        cmocka_unit_test(test_reject_is_sticky),
        cmocka_unit_test(test_ascii_run_with_bad_byte_at_every_offset),
        cmocka_unit_test(test_every_code_point_encodes_valid_unless_surrogate),
        cmocka_unit_test(test_all_two_and_three_byte_inputs_match_reference),
        cmocka_unit_test(test_four_byte_leads_match_reference),
        cmocka_unit_test(test_valid_prefix_stops_at_character_boundary),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
