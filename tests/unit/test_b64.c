/* SPDX-License-Identifier: MIT */
/*
 * test_b64.c - base64 (b64.h): the RFC 4648 section 10 vectors in both
 * alphabets, padded and unpadded; bad input (other alphabet, whitespace,
 * NUL, impossible lengths, misplaced or missing padding, non-zero bits
 * below the last byte) under each flag; the output bound (B64_E_SPACE,
 * nothing written past cap, invalid wins over space); and round trips of
 * every length up to 70 under every flag. Inputs are read from the end of
 * a page followed by a PROT_NONE page, outputs written to one.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "b64.h"
#include "guard.h"

/* RFC 4648 section 10. */
static const struct {
    const char *bytes, *padded, *unpadded;
} rfc[] = {
    {"", "", ""},
    {"f", "Zg==", "Zg"},
    {"fo", "Zm8=", "Zm8"},
    {"foo", "Zm9v", "Zm9v"},
    {"foob", "Zm9vYg==", "Zm9vYg"},
    {"fooba", "Zm9vYmE=", "Zm9vYmE"},
    {"foobar", "Zm9vYmFy", "Zm9vYmFy"},
};

/* b64_decode() of the text s (strlen) read at a guard page. */
static ssize_t decode(const char *s, void *out, size_t cap, unsigned flags)
{
    struct guard g = guard_place(s, strlen(s));
    ssize_t n = b64_decode(g.data, strlen(s), out, cap, flags);

    guard_free(&g);
    return n;
}

/* The decoded bytes of s as a NUL-terminated string in out (64 bytes),
 * or NULL when it does not decode. */
static const char *decoded(const char *s, unsigned flags, char out[64])
{
    ssize_t n = decode(s, out, 63, flags);

    if (n < 0)
        return NULL;
    out[n] = '\0';
    return out;
}

static void test_rfc4648_encode(void **state)
{
    char out[16];

    (void)state;
    for (size_t i = 0; i < sizeof(rfc) / sizeof(rfc[0]); i++) {
        size_t n = strlen(rfc[i].bytes);

        assert_int_equal(b64_encode(rfc[i].bytes, n, out, B64_STD), strlen(rfc[i].padded));
        assert_string_equal(out, rfc[i].padded);
        assert_int_equal(strlen(out), B64_ENCODED_LEN(n));
        assert_int_equal(b64_encode(rfc[i].bytes, n, out, B64_URL | B64_NOPAD),
                         strlen(rfc[i].unpadded));
        assert_string_equal(out, rfc[i].unpadded);
        assert_int_equal(strlen(out), B64_ENCODED_LEN_NOPAD(n));
    }
}

static void test_rfc4648_decode(void **state)
{
    char out[64];

    (void)state;
    for (size_t i = 0; i < sizeof(rfc) / sizeof(rfc[0]); i++) {
        const char *b = rfc[i].bytes, *p = rfc[i].padded, *u = rfc[i].unpadded;

        assert_string_equal(decoded(p, B64_STD | B64_PAD, out), b);
        assert_string_equal(decoded(p, B64_STD, out), b); /* optional: present */
        assert_string_equal(decoded(u, B64_STD, out), b); /* optional: absent */
        assert_string_equal(decoded(u, B64_URL | B64_NOPAD, out), b);
        assert_string_equal(decoded(p, 0, out), b); /* no alphabet bit: standard */
        if (strcmp(p, u) != 0) {
            assert_null(decoded(u, B64_STD | B64_PAD, out));
            assert_null(decoded(p, B64_URL | B64_NOPAD, out));
        }
    }
}

/* 0xfb 0xef 0xbe and 0xff 0xff 0xfe: the digits 62 and 63 in each. */
static void test_alphabets(void **state)
{
    static const unsigned char b62[] = {0xfb, 0xef, 0xbe}, b63[] = {0xff, 0xff, 0xfe};
    unsigned char out[8];
    char s[8];

    (void)state;
    b64_encode(b62, 3, s, B64_STD);
    assert_string_equal(s, "++++");
    b64_encode(b62, 3, s, B64_URL);
    assert_string_equal(s, "----");
    b64_encode(b63, 3, s, B64_STD);
    assert_string_equal(s, "///+");
    b64_encode(b63, 3, s, B64_URL);
    assert_string_equal(s, "___-");
    b64_encode(b63, 2, s, B64_URL);
    assert_string_equal(s, "__8=");

    assert_int_equal(decode("///+", out, 8, B64_STD), 3);
    assert_memory_equal(out, b63, 3);
    assert_int_equal(decode("___-", out, 8, B64_URL), 3);
    assert_memory_equal(out, b63, 3);
    assert_int_equal(decode("___-", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("///+", out, 8, B64_URL), B64_E_INVALID);
    /* Both alphabet bits: either, even mixed in one text. */
    assert_int_equal(decode("/_/-", out, 8, B64_STD | B64_URL), 3);
    assert_memory_equal(out, b63, 3);
    assert_int_equal(decode("/_/-", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("/_/-", out, 8, B64_URL), B64_E_INVALID);
}

static void test_bad_characters(void **state)
{
    static const char *const bad[] = {
        " Zm9v",  "Zm9v ", "Zm 9v", "Zm9v\n",  "Zm9v\r\n",
        "Zm\t9v", "Zm.v",  "Zm9v!", "Zm9\xc3", "\x80Zm9",
    };
    static const unsigned flags[] = {B64_STD, B64_URL, B64_STD | B64_URL, B64_STD | B64_LAX,
                                     B64_URL | B64_NOPAD | B64_LAX};
    unsigned char out[8];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++)
            assert_int_equal(decode(bad[i], out, 8, flags[f]), B64_E_INVALID);
    /* A NUL inside and at the end (strlen would not see it). */
    assert_int_equal(b64_decode("Zm\0v", 4, out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(b64_decode("Zm9v\0", 5, out, 8, B64_STD), B64_E_INVALID);
}

static void test_lengths_and_padding(void **state)
{
    unsigned char out[8];

    (void)state;
    /* 4k + 1 digits carry 6 bits: never a byte string, even when lax. */
    assert_int_equal(decode("Z", out, 8, B64_STD | B64_LAX), B64_E_INVALID);
    assert_int_equal(decode("Zm9vY", out, 8, B64_URL | B64_NOPAD | B64_LAX), B64_E_INVALID);
    assert_int_equal(decode("Zm9vY===", out, 8, B64_STD), B64_E_INVALID);
    /* Padding: exact when present, refused with B64_NOPAD, needed with B64_PAD. */
    assert_int_equal(decode("Zg=", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("Zg===", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("Zg====", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("Zm8==", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("Zm9v=", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("Zm9v====", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("=", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("==", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("====", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("Zg==Zg==", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("Z=g=", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("Zg==", out, 8, B64_URL | B64_NOPAD), B64_E_INVALID);
    assert_int_equal(decode("Zm8=", out, 8, B64_STD | B64_NOPAD), B64_E_INVALID);
    assert_int_equal(decode("Zm8", out, 8, B64_STD | B64_PAD), B64_E_INVALID);
    assert_int_equal(decode("Zg", out, 8, B64_STD | B64_PAD), B64_E_INVALID);
    assert_int_equal(decode("", out, 0, B64_STD | B64_PAD), 0);
    assert_int_equal(b64_decode("", 0, NULL, 0, B64_URL | B64_NOPAD), 0);
}

/* The bits below the last byte: zero unless B64_LAX. "Zg" is 'f'; "Zh",
 * "Zm8" then "Zm9" differ from it only there. */
static void test_leftover_bits(void **state)
{
    unsigned char out[8];

    (void)state;
    assert_int_equal(decode("Zh==", out, 8, B64_STD), B64_E_INVALID);
    assert_int_equal(decode("Zh", out, 8, B64_URL | B64_NOPAD), B64_E_INVALID);
    assert_int_equal(decode("Zm9=", out, 8, B64_STD | B64_PAD), B64_E_INVALID);
    assert_int_equal(decode("Zh==", out, 8, B64_STD | B64_LAX), 1);
    assert_int_equal(out[0], 'f');
    assert_int_equal(decode("Zm9", out, 8, B64_URL | B64_LAX), 2);
    assert_memory_equal(out, "fo", 2);
    assert_int_equal(decode("Zm9=", out, 8, B64_STD | B64_PAD | B64_LAX), 2);
    assert_memory_equal(out, "fo", 2);
}

/* B64_E_SPACE past cap, only cap bytes written (the rest of out is a
 * guard page), and an invalid text is B64_E_INVALID however long. */
static void test_output_bound(void **state)
{
    struct guard g = guard_place("", 0);
    unsigned char *end = (unsigned char *)g.data;

    (void)state;
    assert_int_equal(b64_decode("Zm9vYmFy", 8, end - 6, 6, B64_STD), 6);
    assert_memory_equal(end - 6, "foobar", 6);
    assert_int_equal(b64_decode("Zm9vYmFy", 8, end - 5, 5, B64_STD), B64_E_SPACE);
    assert_memory_equal(end - 5, "fooba", 5);
    assert_int_equal(b64_decode("Zm9vYg==", 8, end - 3, 3, B64_STD), B64_E_SPACE);
    assert_int_equal(b64_decode("Zm9vYg==", 8, NULL, 0, B64_STD), B64_E_SPACE);
    assert_int_equal(b64_decode("Zm9vYmF!", 8, end - 1, 1, B64_STD), B64_E_INVALID);
    assert_int_equal(b64_decode("Zm9vYh==", 8, end - 1, 1, B64_STD), B64_E_INVALID);
    guard_free(&g);
}

/* Every length 0..70 of varied bytes, under every flag: the encoding has
 * the promised length and decodes back, in the exact output room. */
static void test_round_trips(void **state)
{
    static const unsigned flags[] = {B64_STD, B64_URL, B64_STD | B64_NOPAD, B64_URL | B64_NOPAD};
    unsigned char bytes[70];
    char text[B64_ENCODED_LEN(70) + 1];
    uint32_t x = 12345;

    (void)state;
    for (size_t i = 0; i < sizeof(bytes); i++) {
        x = x * 1103515245u + 12345u;
        bytes[i] = (unsigned char)(x >> 16);
    }
    for (size_t n = 0; n <= sizeof(bytes); n++)
        for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++) {
            bool pad = !(flags[f] & B64_NOPAD);
            size_t len = b64_encode(bytes, n, text, flags[f]);
            struct guard t = guard_place(text, len), out = guard_place("", 0);
            unsigned dec = (flags[f] & B64_URL) | (pad ? B64_PAD : B64_NOPAD);

            assert_int_equal(len, pad ? B64_ENCODED_LEN(n) : B64_ENCODED_LEN_NOPAD(n));
            assert_true(B64_DECODED_MAX(len) >= n);
            assert_int_equal(b64_decode(t.data, len, out.data - n, n, dec), (ssize_t)n);
            assert_memory_equal(out.data - n, bytes, n);
            guard_free(&t);
            guard_free(&out);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4648_encode),      cmocka_unit_test(test_rfc4648_decode),
        cmocka_unit_test(test_alphabets),           cmocka_unit_test(test_bad_characters),
        cmocka_unit_test(test_lengths_and_padding), cmocka_unit_test(test_leftover_bits),
        cmocka_unit_test(test_output_bound),        cmocka_unit_test(test_round_trips),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
