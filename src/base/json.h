/* SPDX-License-Identifier: MIT */
/*
 * json.h - the output side of JSON: appending escaped strings and numbers
 * to a struct buf. Incoming JSON is parsed with cJSON; outgoing messages
 * have fixed shapes and are written directly with these helpers, so an
 * event is encoded once straight into the buffer that becomes its frame.
 */
#ifndef JSON_H
#define JSON_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Appends "s" with JSON escaping (quotes included). Bytes >= 0x80 are
 * copied as they are: callers pass valid UTF-8. Control characters become
 * \n, \t, ... or \u00XX. */
void json_append_string(struct buf *b, const char *s, size_t n);
void json_append_cstr(struct buf *b, const char *s); /* ditto for a C string */
void json_append_u64(struct buf *b, uint64_t v);
void json_append_i64(struct buf *b, int64_t v);

#endif
