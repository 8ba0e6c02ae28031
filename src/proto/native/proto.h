/* SPDX-License-Identifier: MIT */
/*
 * proto.h - the native JSON protocol's envelope (docs/protocol.md): the
 * parsing and reply helpers every message type shares.
 *
 * Every client message is a JSON object with a string "type" and an
 * optional "ref" (string or number) that the server copies into the reply
 * or error for that message. Messages that are not valid JSON, not objects
 * or lack a type are answered with an "error" message and the connection
 * stays open; PROTO_MAX_ERRORS rejected messages in a row close it with
 * 1008. Binary messages close with 1003: the protocol is JSON text only.
 * The message types themselves live in native.c; the replies are
 * encoded by the engine's frame.h.
 */
#ifndef PROTO_H
#define PROTO_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "wsconn.h"

#define PROTO_MAX_ERRORS 20 /* consecutive bad messages before close 1008 */
#define PROTO_REF_MAX    64 /* bytes of a ref kept as JSON text */

/* Parses one text message. On success returns the root object (the
 * caller cJSON_Delete()s it) with *type set to its "type" string (borrowed
 * from the root). The text must be exactly one JSON value (json_check():
 * no trailing data, no raw control character, no \u0000, valid UTF-8);
 * otherwise the answer is bad_json, with the reason. The value must be an
 * object with a string "type", and a "ref", when present, must be usable
 * (proto_ref_text); otherwise the answer is bad_message. On failure
 * answers itself and returns NULL. */
cJSON *proto_parse(struct wsconn *ws, const char *p, size_t n, const char **type);
/* The message's "ref" rendered as JSON text into out: a string literal of
 * at most PROTO_REF_MAX - 1 bytes as escaped (61 plain bytes and its
 * quotes), or an integer in the int64 range. "" when absent or unusable
 * (too long, not integral, out of range, another type): proto_parse()
 * refuses those, so after it "" means absent. */
void proto_ref_text(const cJSON *root, char out[PROTO_REF_MAX]);
/* {"type":"pong","time":<server wall ms>[,"ref":..]} */
void proto_send_pong(struct wsconn *ws, const char *ref);
/* Counts one rejected message in *bad (reset it to 0 on success); after
 * PROTO_MAX_ERRORS in a row closes with 1008 and returns true. */
bool proto_count_error(struct wsconn *ws, unsigned *bad);

#endif
