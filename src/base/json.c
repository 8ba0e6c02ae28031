/* SPDX-License-Identifier: MIT */
/*
 * json.c - JSON string escaping and integer formatting into a struct buf.
 * Runs of bytes that need no escaping are copied with one append.
 */
#include "json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char hexdigits[] = "0123456789abcdef";

static int needs_escape(unsigned char ch)
{
    return ch < 0x20 || ch == '"' || ch == '\\';
}

static void append_escape(struct buf *b, unsigned char ch)
{
    char esc[6] = {'\\', 'u', '0', '0', hexdigits[ch >> 4], hexdigits[ch & 15]};

    switch (ch) {
    case '"':
        buf_append(b, "\\\"", 2);
        return;
    case '\\':
        buf_append(b, "\\\\", 2);
        return;
    case '\n':
        buf_append(b, "\\n", 2);
        return;
    case '\r':
        buf_append(b, "\\r", 2);
        return;
    case '\t':
        buf_append(b, "\\t", 2);
        return;
    default:
        buf_append(b, esc, sizeof(esc));
    }
}

void json_append_string(struct buf *b, const char *s, size_t n)
{
    size_t start = 0;

    buf_reserve(b, n + 2);
    buf_append(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        if (!needs_escape((unsigned char)s[i]))
            continue;
        buf_append(b, s + start, i - start);
        append_escape(b, (unsigned char)s[i]);
        start = i + 1;
    }
    buf_append(b, s + start, n - start);
    buf_append(b, "\"", 1);
}

void json_append_cstr(struct buf *b, const char *s)
{
    json_append_string(b, s, strlen(s));
}

void json_append_u64(struct buf *b, uint64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v);

    buf_append(b, tmp, (size_t)n);
}

void json_append_i64(struct buf *b, int64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%" PRId64, v);

    buf_append(b, tmp, (size_t)n);
}
