/* SPDX-License-Identifier: MIT */
/*
 * fuzz_phoenix_lp.c - libFuzzer target for the long-poll transport's pure
 * parts (phoenix_lp_wire.h). The input is read as an NDJSON body, as a
 * session token and as base64, from libFuzzer's exact-size copy, so any
 * read past it is caught. Invariants: no crash or leak; the lines of a
 * body are non-empty views inside it, in order, holding no "\n", each
 * followed by "\n", "\r\n" or the end, and what lies between them is
 * "\r" and "\n" only; a token that checks is the one phx_lp_token_make() makes for its
 * id, a made token always checks, and flipping any byte of it fails; a
 * base64 decode fits its buffer and is at most 3/4 of the input.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "phoenix_lp_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const unsigned char key[PHX_LP_KEY_LEN] = "fuzz-key-fuzz-key-fuzz-key-fuzz";

static void check_lines(const char *p, size_t n)
{
    size_t pos = 0, len, seen = 0, last_end = 0;
    const char *line;

    while (phx_lp_next_line(p, n, &pos, &line, &len)) {
        CHECK(len > 0 && line >= p + last_end && line + len <= p + n);
        CHECK(!memchr(line, '\n', len));
        /* After it: "\n", "\r\n", or the end of the body (one "\r" dropped). */
        size_t end = (size_t)(line - p) + len, sep = pos - end;
        CHECK(pos <= n && pos >= end && sep <= 2);
        CHECK(sep == 0 || (sep == 1 && (p[end] == '\n' || (p[end] == '\r' && pos == n))) ||
              (p[end] == '\r' && p[end + 1] == '\n'));
        CHECK(sep > 0 || pos == n);
        for (const char *s = p + last_end; s < line; s++) /* skipped: separators only */
            CHECK(*s == '\n' || *s == '\r');
        last_end = (size_t)(line - p) + len;
        seen++;
        CHECK(seen <= n);
    }
    CHECK(pos == n);
}

static void check_token(const char *p, size_t n)
{
    char made[PHX_LP_TOKEN_LEN + 1];
    uint64_t id = 0;

    if (phx_lp_token_check(key, p, n, &id) == 0) {
        phx_lp_token_make(key, id, made);
        CHECK(n == PHX_LP_TOKEN_LEN && memcmp(made, p, n) == 0);
    }
    memcpy(&id, p, n < sizeof(id) ? n : sizeof(id));
    phx_lp_token_make(key, id, made);
    uint64_t back = 0;
    CHECK(phx_lp_token_check(key, made, PHX_LP_TOKEN_LEN, &back) == 0 && back == id);
    made[n % PHX_LP_TOKEN_LEN] ^= 1;
    CHECK(phx_lp_token_check(key, made, PHX_LP_TOKEN_LEN, &back) != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *p = malloc(size ? size : 1), *out = malloc(size + 1);
    ssize_t k;

    memcpy(p, data, size);
    check_lines(p, size);
    check_token(p, size);
    k = phx_lp_b64_decode(p, size, out, size + 1);
    CHECK(k < 0 || (size_t)k <= size * 3 / 4 + 1);
    free(out);
    free(p);
    return 0;
}
