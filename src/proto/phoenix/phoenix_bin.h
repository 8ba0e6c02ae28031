/* SPDX-License-Identifier: MIT */
/*
 * phoenix_bin.h - the binary frame realtime-js 2.119 sends for a channel
 * broadcast under vsn 2.0.0 (its serializer's "user broadcast push", kind
 * 3): a 7-byte header of lengths, then the strings, then the payload.
 *
 *   u8 kind = 3, u8 join_ref_len, u8 ref_len, u8 topic_len, u8 event_len,
 *   u8 meta_len, u8 encoding (0 binary, 1 JSON),
 *   join_ref, ref, topic, event, meta (JSON text or empty), payload
 *
 * Pure: no allocation, no I/O; the decoded fields are views into the
 * frame. Whether the strings are valid UTF-8 and the JSON parts valid JSON
 * is the caller's to check (they are copied into JSON only after that).
 * Not here: the server's kind 4 frames (presenced answers with JSON text
 * frames, which realtime-js decodes as well).
 */
#ifndef PHOENIX_BIN_H
#define PHOENIX_BIN_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define PHX_BIN_PUSH 3 /* kind of a client's user broadcast push */

enum {
    PHX_BIN_E_SHORT = -(PS_EBASE + 1220), /* shorter than its header and lengths say */
    PHX_BIN_E_KIND = -(PS_EBASE + 1221),  /* not kind 3 */
    PHX_BIN_E_ENC = -(PS_EBASE + 1222),   /* encoding neither 0 nor 1 */
};

/* A span of the frame. */
struct phx_bin_span {
    const char *p;
    size_t n;
};

/* One decoded kind-3 frame: views into the input, valid as long as it is. */
struct phx_bin_push {
    struct phx_bin_span join_ref, ref, topic, event, meta, payload;
    bool json; /* encoding 1: the payload is JSON text */
};

/* Decodes the binary frame (p, n) into *out. Returns 0, or PHX_BIN_E_SHORT,
 * _KIND or _ENC (then *out is zero-filled). p may be NULL when n is 0. */
int phx_bin_decode_push(const char *p, size_t n, struct phx_bin_push *out);

#endif
