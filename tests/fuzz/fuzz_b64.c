/* SPDX-License-Identifier: MIT */
/*
 * fuzz_b64.c - libFuzzer target for the base64 codec (b64.h). The input
 * is a flags byte (the low five bits are b64_decode()'s flags) and then a
 * text, copied into an exact-size heap buffer so any read past it is
 * caught. Invariants: no crash, no over-read or over-write (ASan); a
 * decoded length is at most B64_DECODED_MAX(n); with room for one byte
 * less the same text is B64_E_SPACE and the bytes written are the same
 * prefix; a strict decode in one alphabet is canonical (encoding its
 * bytes gives the text back, padded exactly when the text was); and the
 * text taken as bytes encodes, under the same alphabet and padding, to
 * something that decodes back to them.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A strict decode of (s, n) in one alphabet that gave (raw, len) spells
 * the text it came from. */
static void check_canonical(const char *s, size_t n, const unsigned char *raw, size_t len,
                            unsigned flags)
{
    bool padded = n > 0 && s[n - 1] == '=';
    char *again = malloc(B64_ENCODED_LEN(len) + 1);
    size_t m = b64_encode(raw, len, again, (flags & B64_URL) | (padded ? 0 : B64_NOPAD));

    CHECK(m == n && memcmp(again, s, n) == 0);
    free(again);
}

/* (p, n) as bytes: encoded under flags, decoded back. */
static void check_round_trip(const unsigned char *p, size_t n, unsigned flags)
{
    unsigned alphabet = flags & B64_URL, pad = flags & B64_NOPAD;
    char *text = malloc(B64_ENCODED_LEN(n) + 1);
    unsigned char *back = malloc(n ? n : 1);
    size_t m = b64_encode(p, n, text, alphabet | pad);

    CHECK(m == (pad ? B64_ENCODED_LEN_NOPAD(n) : B64_ENCODED_LEN(n)) && text[m] == '\0');
    CHECK(b64_decode(text, m, back, n, alphabet | (pad ? B64_NOPAD : B64_PAD)) == (ssize_t)n);
    CHECK(n == 0 || memcmp(back, p, n) == 0);
    free(back);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned flags;
    size_t n, cap;
    char *s;
    unsigned char *out, *less;
    ssize_t len;

    if (size < 1)
        return 0;
    flags = data[0] & 0x1fu;
    n = size - 1;
    s = malloc(n ? n : 1);
    memcpy(s, data + 1, n);
    cap = B64_DECODED_MAX(n);
    out = malloc(cap);
    len = b64_decode(s, n, out, cap, flags);
    CHECK(len == B64_E_INVALID || (len >= 0 && (size_t)len <= cap));
    if (len > 0) {
        less = malloc((size_t)len - 1 ? (size_t)len - 1 : 1);
        CHECK(b64_decode(s, n, less, (size_t)len - 1, flags) == B64_E_SPACE);
        CHECK(len == 1 || memcmp(less, out, (size_t)len - 1) == 0);
        free(less);
    }
    if (len >= 0 && !(flags & B64_LAX) && (flags & (B64_STD | B64_URL)) != (B64_STD | B64_URL))
        check_canonical(s, n, out, (size_t)len, flags);
    check_round_trip((const unsigned char *)s, n, flags);
    free(out);
    free(s);
    return 0;
}
