/* SPDX-License-Identifier: MIT */
/*
 * b64.c - base64 encoding and decoding (b64.h): the one implementation
 * the WebSocket handshake, JWT segments, webhook secrets and signatures,
 * Phoenix bearer tokens, long-poll bodies and binary casts share. A table
 * per alphabet for encoding; decoding maps digits with comparisons (no
 * table to keep in step) and validates the whole text before it reports
 * that the output does not fit.
 */
#include "b64.h"

#include <stdbool.h>
#include <stdint.h>

static const char std_digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char url_digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t b64_encode(const void *p, size_t n, char *out, unsigned flags)
{
    const char *d = (flags & (B64_STD | B64_URL)) == B64_URL ? url_digits : std_digits;
    const unsigned char *in = p;
    size_t i, o = 0;

    for (i = 0; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];

        out[o++] = d[v >> 18];
        out[o++] = d[(v >> 12) & 63];
        out[o++] = d[(v >> 6) & 63];
        out[o++] = d[v & 63];
    }
    if (i < n) {
        bool two = i + 1 < n;
        uint32_t v = (uint32_t)in[i] << 16 | (two ? (uint32_t)in[i + 1] << 8 : 0);

        out[o++] = d[v >> 18];
        out[o++] = d[(v >> 12) & 63];
        if (two)
            out[o++] = d[(v >> 6) & 63];
        if (!(flags & B64_NOPAD)) {
            if (!two)
                out[o++] = '=';
            out[o++] = '=';
        }
    }
    out[o] = '\0';
    return o;
}

/* The value of digit c in the alphabet(s) of flags, or -1. */
static int digit_value(unsigned char c, unsigned flags)
{
    bool std = (flags & (B64_STD | B64_URL)) != B64_URL;
    bool url = (flags & B64_URL) != 0;

    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if ((std && c == '+') || (url && c == '-'))
        return 62;
    if ((std && c == '/') || (url && c == '_'))
        return 63;
    return -1;
}

/* The '=' at the end of (s, n), at most 2; -1 when the flags or the
 * length refuse them. */
static int padding(const char *s, size_t n, unsigned flags)
{
    int pad = 0;

    while ((size_t)pad < n && pad < 2 && s[n - 1 - (size_t)pad] == '=')
        pad++;
    if ((flags & B64_PAD) && n % 4 != 0)
        return -1;
    if (pad > 0 && ((flags & B64_NOPAD) || n % 4 != 0))
        return -1;
    return pad;
}

ssize_t b64_decode(const char *s, size_t n, void *out, size_t cap, unsigned flags)
{
    unsigned char *dst = out;
    int pad = padding(s, n, flags);
    size_t digits, i, o = 0;
    uint32_t acc = 0;
    unsigned bits = 0;

    if (pad < 0)
        return B64_E_INVALID;
    digits = n - (size_t)pad;
    if (digits % 4 == 1)
        return B64_E_INVALID; /* 6 bits: not even one byte */
    for (i = 0; i < digits; i++) {
        int v = digit_value((unsigned char)s[i], flags);

        if (v < 0)
            return B64_E_INVALID;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o < cap)
                dst[o] = (unsigned char)(acc >> bits);
            o++;
            acc &= (1u << bits) - 1;
        }
    }
    /* The 2 or 4 bits below the last byte: zero, or two spellings would
     * give one value. */
    if (acc != 0 && !(flags & B64_LAX))
        return B64_E_INVALID;
    return o > cap ? B64_E_SPACE : (ssize_t)o;
}
