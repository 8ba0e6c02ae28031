/* SPDX-License-Identifier: MIT */
/*
 * phoenix_encode.h - the Phoenix adapter's two tables (struct
 * proto_adapter), one per serializer (vsn 2.0.0 arrays, 1.0.0 objects):
 * the engine's room events as Phoenix Channels frames (docs/phoenix.md).
 *
 *   room snapshot   presence_state {"<key>":{"metas":[meta, ...]}, ...}
 *   room delta      presence_diff {"joins":{...},"leaves":{...}}: a join
 *                   lists the member's metas, a leave the metas it had, a
 *                   patch the metas that are new (joins) and those that
 *                   went (leaves), matched by phx_ref
 *   broadcast       "broadcast" {"type":"broadcast","event":E,"payload":D}
 *                   (Supabase's envelope, whoever sent it); a binary
 *                   payload (adapter.h ROOM_CAST_BINARY) is D = its base64
 *                   string and ends the envelope with ,"encoding":"base64"
 *                   (PHX_CAST_BINARY_TAIL), which send_room turns into
 *                   realtime-js's binary frame on a realtime: channel
 *                   under vsn 2.0.0 (phoenix_bin.h)
 *   errors, acks    an internal record (below), not a frame
 *   the rest        nothing: a Phoenix socket has no welcome, acks or
 *                   watch lists
 *
 * Room frames are shared by every socket of the vsn in the room, so they
 * name the room, not the socket's topic, and carry no join_ref: the
 * socket's send_room (phoenix.c) passes them on as they are when its
 * topic is the room (phoenix.js "room:lobby"), and rewrites the topic
 * ("realtime:room:lobby") and stamps the channel's join_ref on a
 * presence_state otherwise.
 *
 * Metas. A member's metadata holds its connections' metas under
 * "~metas" (room.h, per-session values), each with its phx_ref, so a
 * Phoenix member lists those. Any other member (a native or Pusher
 * client's) shows as one meta, its metadata object's members plus a
 * phx_ref derived from the user, its joinedAt and the metadata's bytes
 * (so an update of it is a new phx_ref), or {"phx_ref":..,"meta":value}
 * for metadata that is not an object.
 *
 * Errors and acks of owner-side operations travel to the socket's worker
 * as records the adapter's send reads (phx_record_*): a byte 0x01, a kind
 * ('E' error, 'A' ack), then the ref the adapter gave the operation, and
 * for errors "\0code\0message". A WebSocket frame of this server never
 * starts with 0x01, so send tells the two apart by the first byte.
 */
#ifndef PHOENIX_ENCODE_H
#define PHOENIX_ENCODE_H

#include <stdbool.h>
#include <stddef.h>

#include "adapter.h"
#include "buf.h"
#include "phoenix_msg.h"

#define PHX_RECORD 0x01 /* first byte of an error or ack record */
/* How a binary broadcast's envelope ends: after a JSON payload the
 * envelope ends with "}", so a valid payload never produces this tail. */
#define PHX_CAST_BINARY_TAIL ",\"encoding\":\"base64\"}"

extern const struct proto_adapter phoenix_adapter_v2;
extern const struct proto_adapter phoenix_adapter_v1;

/* One decoded record (borrowed from its payload). */
struct phx_record {
    char kind;           /* 'E' or 'A' */
    const char *ref;     /* the operation's ref, "" = none */
    const char *code;    /* errors: the engine's code */
    const char *message; /* errors: its message */
};

/* Reads payload f as a record: true with *r filled, false when f is a
 * frame. */
bool phx_record_read(const struct payload *f, struct phx_record *r);

struct room_entry;
/* Appends to refs, each NUL-terminated, the phx_refs of the metas a
 * member's entry shows (see "Metas"); returns how many. */
size_t phx_metas_refs(const struct room_entry *x, struct buf *refs);

#endif
