/* SPDX-License-Identifier: MIT */
/*
 * frame.h - the engine's event and reply encodings, in one place.
 *
 * The engine still encodes its events as the native protocol's JSON
 * (docs/protocol.md) and frames them once as shared WebSocket payloads:
 * replies (error, ack), the welcome, session_ended and token_expired,
 * presence events, privacy_changed and room_joined. Room deltas and
 * snapshots are still encoded by the room core (room.h) and only framed
 * here (frame_text_json()). Everything the engine writes to a socket or puts in
 * an OP_REPLY goes through these functions, so that turning events into
 * structured values, encoded by each protocol adapter, changes this file
 * and its callers, not the routing around them.
 *
 * Refs are the client's "ref" as JSON text ("" = none, at most
 * MSG_REF_MAX - 1 bytes): copied into the reply for that message.
 */
#ifndef FRAME_H
#define FRAME_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "conn.h"
#include "wsconn.h"

struct engine;
struct emsg;
struct presence_view;
struct room_info;
struct store_privacy;
struct client;
struct config;

/* A text frame of b's bytes (a new reference); releases b. */
struct payload *frame_text(struct buf *b);
/* A text frame of the JSON json[0..n) (the room core's framing). */
struct payload *frame_text_json(const char *json, size_t n);
/* The JSON inside a frame made by frame_text(): borrowed from f. */
void frame_json(const struct payload *f, const char **p, size_t *n);
/* An unframed payload of b's bytes (HTTP answer parts); releases b. */
struct payload *buf_payload(struct buf *b);

/* Appends ,"ref":<ref> when ref is not "". */
void frame_append_ref(struct buf *b, const char *ref);
/* Appends {"type":"error","code":..,"message":..[,"ref":..]} to b. */
void frame_error_json(struct buf *b, const char *code, const char *message, const char *ref);

/* Sends the buffer as one text message on ws and releases it. */
void frame_send_buf(struct wsconn *ws, struct buf *b);
/* Sends an error message on ws. */
void frame_send_error(struct wsconn *ws, const char *code, const char *message, const char *ref);
/* {"type":"ack"[,"ref":..]} on ws, only when ref is not "". */
void frame_send_ack(struct wsconn *ws, const char *ref);
/* The welcome of a socket that opened (user, session when it has one,
 * and the server's settings). */
void frame_send_welcome(struct wsconn *ws, const struct config *cfg, uint64_t conn_id,
                        const char *uid, const char *sid, bool resumed);
/* session_ended with the reason (enum presence_end_reason) and, when not
 * NULL, a message. */
void frame_send_session_ended(struct wsconn *ws, int why, const char *message);
/* token_expired (auth = jwt). */
void frame_send_token_expired(struct wsconn *ws);

/* A presence event: v as seen by class cls (enum privacy_class), its
 * times converted with wall_offset_ms (wall - monotonic). */
struct payload *frame_presence(const struct presence_view *v, int cls, int64_t wall_offset_ms);
/* privacy_changed with the user's settings p. */
struct payload *frame_privacy_changed(const struct store_privacy *p);
/* room_joined: the room's epoch, seq, mode, count and whether the join
 * resumed, for the join with ref. */
struct payload *frame_room_joined(const char *room, const struct room_info *info, bool resumed,
                                  const char *ref);

/* Owner side: sends frame (a reference, taken over) to the client of
 * req->conn_id as an OP_REPLY. */
void frame_reply(struct engine *e, const struct emsg *req, struct payload *frame);
/* An ack of req to its client, when it has a ref. */
void frame_reply_ack(struct engine *e, const struct emsg *req);
/* An error message to the client on connection conn_id (any worker). */
void frame_reply_error(struct engine *e, uint64_t conn_id, const char *code, const char *message,
                       const char *ref);

#endif
