/* SPDX-License-Identifier: MIT */
/*
 * utf8.h - incremental UTF-8 validation (RFC 3629) with a byte DFA.
 *
 * The state is a small integer the caller keeps between calls, so a text
 * message may be validated fragment by fragment, split anywhere, even
 * inside a code point. Rejected: stray continuation bytes, C0/C1 and
 * F5..FF, overlong forms (NUL included), UTF-16 surrogates U+D800..DFFF,
 * code points above U+10FFFF, and truncated sequences (a stream that ends
 * in a state other than UTF8_ACCEPT). Non-characters such as U+FFFE are
 * valid. The DFA rejects at the first byte that cannot start or continue a
 * valid sequence, so a caller learns of bad input as early as the bytes
 * allow (fail fast). Pure: no allocation, no I/O, no global state.
 */
#ifndef UTF8_H
#define UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UTF8_ACCEPT 0u  /* between code points: the input so far is valid */
#define UTF8_REJECT 12u /* invalid; sticky: every later step stays here */

/* Feeds (p, n) to the validator in state (UTF8_ACCEPT at the start of a
 * stream) and returns the new state: UTF8_ACCEPT, UTF8_REJECT (stops at the
 * offending byte; the rest is not read) or an opaque "inside a code point"
 * state to pass to the next call. */
uint32_t utf8_step(uint32_t state, const void *p, size_t n);

/* True when (p, n) is complete, valid UTF-8. */
bool utf8_valid(const void *p, size_t n);

/* Length of the longest prefix of (p, n) that ends on a character boundary
 * of valid UTF-8 (used to cut text, e.g. a close reason, without splitting
 * a character). */
size_t utf8_valid_prefix(const void *p, size_t n);

#endif
