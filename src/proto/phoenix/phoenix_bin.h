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
 * And the server's "user broadcast" (kind 4), which realtime-js decodes
 * into {type:"broadcast", event, payload} with payload an ArrayBuffer
 * (encoding 0) or the parsed JSON (1); presenced sends it only for a
 * binary payload (JSON ones go as text frames, which realtime-js decodes
 * as well):
 *
 *   u8 kind = 4, u8 topic_len, u8 event_len, u8 meta_len, u8 encoding,
 *   topic, event, meta (JSON text or empty), payload
 *
 * No I/O; decoding allocates nothing and its fields are views into the
 * frame, encoding appends to a buf. Whether the strings are valid UTF-8
 * and the JSON parts valid JSON is the caller's to check (they are copied
 * into JSON only after that).
 */
#ifndef PHOENIX_BIN_H
#define PHOENIX_BIN_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "util.h"

#define PHX_BIN_PUSH 3 /* kind of a client's user broadcast push */
#define PHX_BIN_CAST 4 /* kind of the server's user broadcast */

enum {
    PHX_BIN_E_SHORT = -(PS_EBASE + 1220), /* shorter than its header and lengths say */
    PHX_BIN_E_KIND = -(PS_EBASE + 1221),  /* not kind 3 */
    PHX_BIN_E_ENC = -(PS_EBASE + 1222),   /* encoding neither 0 nor 1 */
    PHX_BIN_E_LONG = -(PS_EBASE + 1223),  /* a string over 255 bytes */
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

/* Appends to out the kind-4 frame of topic and event (no meta) with the
 * payload (p, n), JSON text when json, else bytes. Returns 0, or
 * PHX_BIN_E_LONG (out unchanged) when topic or event is over 255 bytes. */
int phx_bin_encode_cast(struct buf *out, const struct phx_bin_span *topic,
                        const struct phx_bin_span *event, const char *p, size_t n, bool json);

#endif
