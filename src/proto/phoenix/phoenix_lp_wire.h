/* SPDX-License-Identifier: MIT */
/*
 * phoenix_lp_wire.h - the pure parts of Phoenix's long-poll transport
 * (docs/phoenix.md "Long-poll"): the session token and the NDJSON body
 * of a POST. No I/O, no allocation; views point into the caller's bytes.
 *
 * A session token is "lp1.<16 hex: the session's client id>.<32 hex>",
 * the last part the first 16 bytes of HMAC-SHA256(key, "lp1.<id>") under
 * a key drawn at start: it names one session of this process and cannot
 * be made for another id without the key.
 *
 * A POST body of type application/x-ndjson is messages separated by "\n"
 * (or "\r\n"); empty lines are skipped. A line starting with '[' or '{' is
 * a text message (vsn 2.0.0 arrays, 1.0.0 objects), any other the base64
 * of a binary one, as phoenix.js's LongPoll sends them.
 */
#ifndef PHOENIX_LP_WIRE_H
#define PHOENIX_LP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PHX_LP_KEY_LEN   32                /* bytes of the token key */
#define PHX_LP_TOKEN_LEN (4 + 16 + 1 + 32) /* "lp1." id "." mac */
#define PHX_LP_BATCH_MAX 100               /* messages in one POST (phoenix.js's batch) */

/* The token for session id under key, NUL-terminated into out. */
void phx_lp_token_make(const unsigned char key[PHX_LP_KEY_LEN], uint64_t id,
                       char out[PHX_LP_TOKEN_LEN + 1]);
/* True when (p, n) starts like a session token ("lp1."): a query's token=
 * that is not one is the connect token (a JWT). */
bool phx_lp_token_like(const char *p, size_t n);
/* Checks (p, n) against key: 0 with *id set, -1 when it is not a token of
 * this format, -2 when its MAC is wrong (compared in constant time). */
int phx_lp_token_check(const unsigned char key[PHX_LP_KEY_LEN], const char *p, size_t n,
                       uint64_t *id);

/* The next non-empty line of the NDJSON body (p, n) from *pos (0 at
 * first): true with (*line, *len) a view without its "\n" or "\r\n" and
 * *pos past it, false at the end. */
bool phx_lp_next_line(const char *p, size_t n, size_t *pos, const char **line, size_t *len);
/* True when line is a text message ('[' or '{' first), else base64. */
bool phx_lp_line_is_text(const char *line, size_t len);
/* Decodes standard base64 (padding optional, exact when present; bits
 * below the last byte ignored: b64.h's B64_STD | B64_LAX) of (p, n) into
 * out (cap bytes): the decoded length, or -1 when it is not base64 or does
 * not fit. */
ssize_t phx_lp_b64_decode(const char *p, size_t n, char *out, size_t cap);

#endif
