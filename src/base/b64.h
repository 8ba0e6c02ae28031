/* SPDX-License-Identifier: MIT */
/*
 * b64.h - base64 (RFC 4648): encoding and strict decoding, in the
 * standard alphabet (section 4, '+' '/') and the URL-safe one (section 5,
 * '-' '_'), with or without '=' padding, as each caller's format says.
 *
 * The decoder is strict unless told otherwise: only the chosen alphabet,
 * no whitespace, no NUL, no impossible length (4k + 1 digits), padding
 * exactly as the length needs when there is any, and zero bits below the
 * last byte, so each byte string has exactly one accepted spelling (a
 * mistyped secret or a forged token segment is an error, not another
 * value). Pure: no allocation, no I/O, no global state; nothing is read
 * past (s, n) and nothing written past (out, cap).
 */
#ifndef B64_H
#define B64_H

#include <stddef.h>
#include <sys/types.h>

/* Flags of b64_encode() and b64_decode(), or-ed. */
#define B64_STD   0x01u /* alphabet '+' '/' (the default when no alphabet bit is set) */
#define B64_URL   0x02u /* alphabet '-' '_'; with B64_STD (decode only): either, even mixed */
#define B64_PAD   0x04u /* decode: padding required (length a multiple of 4) */
#define B64_NOPAD 0x08u /* encode: no padding; decode: '=' refused */
#define B64_LAX   0x10u /* decode: non-zero bits below the last byte are ignored */
/* Decode with neither B64_PAD nor B64_NOPAD: padding optional, and exact
 * ("=" or "==" completing the last group of 4) when present. */

/* b64_decode()'s errors. */
#define B64_E_INVALID (-1) /* not base64 under the flags */
#define B64_E_SPACE   (-2) /* valid, but decodes to more than cap bytes */

/* Characters b64_encode() writes for n bytes, NUL not counted: padded
 * 4 * ceil(n / 3); unpadded ceil(4 * n / 3). */
#define B64_ENCODED_LEN(n)       (((n) + 2) / 3 * 4)
#define B64_ENCODED_LEN_NOPAD(n) (((n)*4 + 2) / 3)
/* An upper bound of the bytes that n characters decode to. */
#define B64_DECODED_MAX(n) ((n) / 4 * 3 + 2)

/* Writes the base64 of (p, n) and a NUL into out, which has room for
 * B64_ENCODED_LEN(n) + 1 bytes (B64_ENCODED_LEN_NOPAD(n) + 1 with
 * B64_NOPAD); flags: B64_URL for the URL-safe alphabet, B64_NOPAD for no
 * padding. Returns the characters written, NUL not counted. */
size_t b64_encode(const void *p, size_t n, char *out, unsigned flags);

/* Decodes the base64 text (s, n) into out (cap bytes, may be NULL when cap
 * is 0) under flags (alphabet, padding, B64_LAX; see above). Returns the
 * byte count, B64_E_INVALID, or B64_E_SPACE when the text is valid but its
 * bytes do not fit (then only the first cap bytes were written). Invalid
 * text wins over no space. Empty text decodes to 0 bytes. */
ssize_t b64_decode(const char *s, size_t n, void *out, size_t cap, unsigned flags);

#endif
