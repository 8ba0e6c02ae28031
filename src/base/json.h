/* SPDX-License-Identifier: MIT */
/*
 * json.h - JSON in both directions, around cJSON.
 *
 * Output: appending escaped strings and numbers to a struct buf. Outgoing
 * messages have fixed shapes and are written directly with these helpers,
 * so an event is encoded once straight into the buffer that becomes its
 * frame.
 * Input: incoming JSON is parsed with cJSON, which is lenient where the
 * protocol must not be: it stops at the end of the first value and ignores
 * what follows, takes raw control characters inside strings, and decodes
 * \u0000 into a NUL that silently cuts the C string short. json_check()
 * holds the text to RFC 8259 first; json_number_i64() and json_get_i64()
 * read integers with a range check instead of a cast.
 */
#ifndef JSON_H
#define JSON_H

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "buf.h"
#include "util.h"

/* Appends "s" with JSON escaping (quotes included). Valid UTF-8 is copied
 * as it is; each maximal ill-formed subsequence becomes U+FFFD, so the
 * output is always valid UTF-8 (a text frame cannot be made invalid by
 * what a client or an admin sent). Control characters become \n, \t, ...
 * or \u00XX. */
void json_append_string(struct buf *b, const char *s, size_t n);
void json_append_cstr(struct buf *b, const char *s); /* ditto for a C string */
void json_append_u64(struct buf *b, uint64_t v);
void json_append_i64(struct buf *b, int64_t v);

/* Nesting json_check() accepts: cJSON's own limit (CJSON_NESTING_LIMIT). */
#define JSON_MAX_DEPTH 1000

/* Errors of json_check (negative, below -PS_EBASE); json_strerror() says
 * each in words, for an error message. */
enum json_error {
    JSON_E_SYNTAX = -(PS_EBASE + 200),   /* not RFC 8259 JSON (or cut short) */
    JSON_E_TRAILING = -(PS_EBASE + 201), /* more than whitespace after the value */
    JSON_E_CONTROL = -(PS_EBASE + 202),  /* a raw U+0000..U+001F inside a string */
    JSON_E_NUL = -(PS_EBASE + 203),      /* \u0000 inside a string */
    JSON_E_UTF8 = -(PS_EBASE + 204),     /* invalid UTF-8, or a lone surrogate escape */
    JSON_E_DEPTH = -(PS_EBASE + 205),    /* nested deeper than JSON_MAX_DEPTH */
};

/* Pure: checks that (p, n) is exactly one JSON value (RFC 8259), with
 * optional whitespace around it, whose strings hold no raw control
 * character, no \u0000 and no invalid UTF-8 (raw or as unpaired surrogate
 * escapes). Returns 0 or a negative enum json_error. Reads only (p, n);
 * no allocation. Text it accepts, cJSON parses, and every string cJSON
 * returns from it is valid UTF-8 whose strlen() is its whole length. */
int json_check(const char *p, size_t n);
/* A short lowercase description of a json_check error ("trailing data
 * after the JSON value"); "invalid JSON" for anything else. Static. */
const char *json_strerror(int err);

/* Reads the number v as an integer in [min, max]. Returns 0 and sets *out;
 * -ENOENT when v is NULL; -EINVAL when v is not a number or not integral
 * (1.5); -ERANGE when it is outside [min, max] (1e300, or 2^63 and beyond
 * for the int64 range). *out is untouched on error. cJSON keeps numbers as
 * doubles: integers beyond 2^53 arrive already rounded to the nearest
 * double, so callers that must echo exact values want strings there. */
int json_number_i64(const cJSON *v, int64_t min, int64_t max, int64_t *out);
/* The same for member key of obj (-ENOENT when absent or obj is not an
 * object). */
int json_get_i64(const cJSON *obj, const char *key, int64_t min, int64_t max, int64_t *out);

#endif
