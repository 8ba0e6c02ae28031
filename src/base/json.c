/* SPDX-License-Identifier: MIT */
/*
 * json.c - JSON string escaping and integer formatting into a struct buf,
 * the strict check of incoming JSON text, and range-checked integer reads.
 * Runs of bytes that need no escaping are copied with one append.
 *
 * json_check() is a validating scanner, not a parser: it builds nothing,
 * keeps the open containers as one bit each in a fixed stack, and runs the
 * UTF-8 DFA (utf8.h) over the bytes of strings. It accepts a subset of
 * what cJSON accepts, so cJSON_Parse after it cannot fail on syntax.
 */
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "utf8.h"

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

/* Length of the valid UTF-8 sequence at s[0] (s[0] >= 0x80), or 0 when
 * there is none; then *bad is the length of the maximal ill-formed subpart
 * (Unicode's "U+FFFD substitution of maximal subparts": at least 1, never
 * the byte that proved it ill-formed, which may start a valid sequence). */
static size_t utf8_seq(const char *s, size_t n, size_t *bad)
{
    uint32_t st = UTF8_ACCEPT;

    for (size_t k = 0; k < n && k < 4; k++) {
        st = utf8_step(st, s + k, 1);
        if (st == UTF8_ACCEPT)
            return k + 1;
        if (st == UTF8_REJECT) {
            *bad = k > 0 ? k : 1;
            return 0;
        }
    }
    *bad = MIN(n, (size_t)4); /* cut short by the end of the string */
    return 0;
}

/* The escaping loop: runs of bytes that need nothing are appended at once;
 * control characters, quotes and backslashes are escaped; invalid UTF-8 is
 * replaced by U+FFFD, so that no text the server writes (a kick reason, a
 * stored setting) can make a WebSocket text frame invalid. */
void json_append_string(struct buf *b, const char *s, size_t n)
{
    size_t start = 0, i = 0, bad = 0;

    buf_reserve(b, n + 2);
    buf_append(b, "\"", 1);
    while (i < n) {
        unsigned char ch = (unsigned char)s[i];
        size_t len;

        if (ch >= 0x80) {
            len = utf8_seq(s + i, n - i, &bad);
            if (len) {
                i += len;
                continue;
            }
            buf_append(b, s + start, i - start);
            buf_append(b, "\xef\xbf\xbd", 3);
            i += bad;
            start = i;
            continue;
        }
        i++;
        if (!needs_escape(ch))
            continue;
        buf_append(b, s + start, i - 1 - start);
        append_escape(b, ch);
        start = i;
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

/* ---- Strict check of incoming JSON ---- */

/* The scanner's cursor over (p, n). */
struct scan {
    const unsigned char *p;
    size_t n;
    size_t i; /* next byte */
};

static void skip_ws(struct scan *s)
{
    while (s->i < s->n &&
           (s->p[s->i] == ' ' || s->p[s->i] == '\t' || s->p[s->i] == '\n' || s->p[s->i] == '\r'))
        s->i++;
}

/* Reads the four hex digits of a \u escape at s->i; -1 when they are not. */
static long read_hex4(struct scan *s)
{
    long v = 0;

    if (s->n - s->i < 4)
        return -1;
    for (int k = 0; k < 4; k++) {
        int d = hex_digit_value((unsigned char)s->p[s->i + (size_t)k]);

        if (d < 0)
            return -1;
        v = v << 4 | d;
    }
    s->i += 4;
    return v;
}

/* An escape, its backslash already read. A high surrogate must be followed
 * by an escaped low one (cJSON refuses the rest too); U+0000 is refused
 * because every consumer reads strings as C strings. */
static int scan_escape(struct scan *s)
{
    long cp, lo;

    if (s->i == s->n)
        return JSON_E_SYNTAX;
    if (s->p[s->i] != '\0' && strchr("\"\\/bfnrt", s->p[s->i])) {
        s->i++;
        return 0;
    }
    if (s->p[s->i++] != 'u' || (cp = read_hex4(s)) < 0)
        return JSON_E_SYNTAX;
    if (cp == 0)
        return JSON_E_NUL;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return JSON_E_UTF8;
    if (cp < 0xD800 || cp > 0xDBFF)
        return 0;
    if (s->n - s->i < 2 || s->p[s->i] != '\\' || s->p[s->i + 1] != 'u')
        return JSON_E_UTF8;
    s->i += 2;
    lo = read_hex4(s);
    if (lo < 0)
        return JSON_E_SYNTAX;
    return lo >= 0xDC00 && lo <= 0xDFFF ? 0 : JSON_E_UTF8;
}

/* A string, at its opening quote. */
static int scan_string(struct scan *s)
{
    uint32_t u = UTF8_ACCEPT;

    s->i++;
    while (s->i < s->n) {
        unsigned char ch = s->p[s->i];
        int r;

        if (ch >= 0x80 || u != UTF8_ACCEPT) {
            u = utf8_step(u, &ch, 1);
            if (u == UTF8_REJECT)
                return JSON_E_UTF8;
            s->i++;
            continue;
        }
        s->i++;
        if (ch == '"')
            return 0;
        if (ch < 0x20)
            return JSON_E_CONTROL;
        if (ch == '\\' && (r = scan_escape(s)) < 0)
            return r;
    }
    return JSON_E_SYNTAX;
}

static bool is_digit(unsigned char ch)
{
    return ch >= '0' && ch <= '9';
}

/* Skips one or more digits; false when there is none. */
static bool scan_digits(struct scan *s)
{
    size_t start = s->i;

    while (s->i < s->n && is_digit(s->p[s->i]))
        s->i++;
    return s->i > start;
}

/* number = [ "-" ] ( "0" / 1-9 *DIGIT ) [ "." 1*DIGIT ] [ ( "e" / "E" ) [ "+" / "-" ] 1*DIGIT ] */
static int scan_number(struct scan *s)
{
    if (s->p[s->i] == '-')
        s->i++;
    if (s->i < s->n && s->p[s->i] == '0')
        s->i++;
    else if (!scan_digits(s))
        return JSON_E_SYNTAX;
    if (s->i < s->n && s->p[s->i] == '.') {
        s->i++;
        if (!scan_digits(s))
            return JSON_E_SYNTAX;
    }
    if (s->i < s->n && (s->p[s->i] == 'e' || s->p[s->i] == 'E')) {
        s->i++;
        if (s->i < s->n && (s->p[s->i] == '+' || s->p[s->i] == '-'))
            s->i++;
        if (!scan_digits(s))
            return JSON_E_SYNTAX;
    }
    return 0;
}

static int scan_literal(struct scan *s, const char *word)
{
    size_t len = strlen(word);

    if (s->n - s->i < len || memcmp(s->p + s->i, word, len) != 0)
        return JSON_E_SYNTAX;
    s->i += len;
    return 0;
}

/* A value that is not a container, at its first byte. */
static int scan_scalar(struct scan *s)
{
    switch (s->p[s->i]) {
    case '"':
        return scan_string(s);
    case 't':
        return scan_literal(s, "true");
    case 'f':
        return scan_literal(s, "false");
    case 'n':
        return scan_literal(s, "null");
    default:
        return s->p[s->i] == '-' || is_digit(s->p[s->i]) ? scan_number(s) : JSON_E_SYNTAX;
    }
}

/* An object member's name and colon, whitespace before each included. */
static int scan_key(struct scan *s)
{
    int r;

    skip_ws(s);
    if (s->i == s->n || s->p[s->i] != '"')
        return JSON_E_SYNTAX;
    if ((r = scan_string(s)) < 0)
        return r;
    skip_ws(s);
    if (s->i == s->n || s->p[s->i] != ':')
        return JSON_E_SYNTAX;
    s->i++;
    return 0;
}

/* The open containers: bit d of objs is set when level d is an object. */
struct nest {
    size_t depth;
    uint8_t objs[(JSON_MAX_DEPTH + 7) / 8];
};

static bool nest_is_object(const struct nest *st)
{
    size_t d = st->depth - 1;

    return st->objs[d / 8] >> (d % 8) & 1;
}

/* After a value: closes the containers that end here and reads the comma
 * (and the next member's name) before the next value. Returns 1 when the
 * outermost value is complete, 0 when a value must follow, or an error. */
static int scan_after_value(struct scan *s, struct nest *st)
{
    for (;;) {
        skip_ws(s);
        if (st->depth == 0)
            return 1;
        if (s->i == s->n)
            return JSON_E_SYNTAX;
        if (s->p[s->i] == ',') {
            s->i++;
            return nest_is_object(st) ? scan_key(s) : 0;
        }
        if (s->p[s->i] != (nest_is_object(st) ? '}' : ']'))
            return JSON_E_SYNTAX;
        s->i++;
        st->depth--;
    }
}

/* Opens the container at s->i. Returns 1 when it is empty (and so already
 * a complete value), 0 when its first value must follow, or an error. */
static int scan_open(struct scan *s, struct nest *st)
{
    bool obj = s->p[s->i] == '{';
    size_t d = st->depth;

    if (d == JSON_MAX_DEPTH)
        return JSON_E_DEPTH;
    if (obj)
        st->objs[d / 8] |= (uint8_t)(1u << (d % 8));
    else
        st->objs[d / 8] &= (uint8_t) ~(1u << (d % 8));
    st->depth++;
    s->i++;
    skip_ws(s);
    if (s->i < s->n && s->p[s->i] == (obj ? '}' : ']')) {
        s->i++;
        st->depth--;
        return 1;
    }
    return obj ? scan_key(s) : 0;
}

int json_check(const char *p, size_t n)
{
    struct scan s = {(const unsigned char *)p, n, 0};
    struct nest st;
    int r;

    st.depth = 0;
    for (;;) {
        skip_ws(&s);
        if (s.i == s.n)
            return JSON_E_SYNTAX;
        if (s.p[s.i] == '{' || s.p[s.i] == '[') {
            if ((r = scan_open(&s, &st)) < 0)
                return r;
            if (r == 0)
                continue; /* the container's first value follows */
        } else if ((r = scan_scalar(&s)) < 0) {
            return r;
        }
        if ((r = scan_after_value(&s, &st)) < 0)
            return r;
        if (r == 1)
            return s.i == s.n ? 0 : JSON_E_TRAILING;
    }
}

const char *json_strerror(int err)
{
    switch (err) {
    case JSON_E_TRAILING:
        return "trailing data after the JSON value";
    case JSON_E_CONTROL:
        return "unescaped control character in a string";
    case JSON_E_NUL:
        return "\\u0000 in a string";
    case JSON_E_UTF8:
        return "invalid UTF-8 in a string";
    case JSON_E_DEPTH:
        return "JSON nested too deeply";
    default:
        return "invalid JSON";
    }
}

/* ---- Integers ---- */

int json_number_i64(const cJSON *v, int64_t min, int64_t max, int64_t *out)
{
    double d;
    int64_t i;

    if (!v)
        return -ENOENT;
    if (!cJSON_IsNumber(v))
        return -EINVAL;
    d = v->valuedouble;
    if (d != d)
        return -EINVAL; /* NaN: not from a parse, but a tree may be built */
    /* The int64 range as doubles: -2^63 is exact, 2^63 is the first value
     * past the top. Checked before the cast, which is undefined outside. */
    if (!(d >= -0x1p63 && d < 0x1p63))
        return -ERANGE;
    i = (int64_t)d;
    if ((double)i != d)
        return -EINVAL;
    if (i < min || i > max)
        return -ERANGE;
    *out = i;
    return 0;
}

int json_get_i64(const cJSON *obj, const char *key, int64_t min, int64_t max, int64_t *out)
{
    if (!cJSON_IsObject(obj))
        return -ENOENT;
    return json_number_i64(cJSON_GetObjectItemCaseSensitive(obj, key), min, max, out);
}
