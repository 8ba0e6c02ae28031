/* SPDX-License-Identifier: MIT */
/*
 * frame.h - where the engine turns its events into frames: each function
 * builds the event's structured value (adapter.h) and has a protocol
 * adapter encode it. The engine itself writes no protocol's bytes.
 *
 * Client side (frame_send_*): the event is for one local client and is
 * encoded by that client's adapter (struct client.proto, chosen at open),
 * then sent by it. Owner side: the frame travels by bus message to the
 * client's worker. An owner that knows the recipient's protocol (a room
 * join carries it: frame_room_joined) encodes for that one; one that does
 * not (frame_privacy_changed, frame_reply_*) encodes once for every
 * registered protocol (struct adapter_frames; one when only the native
 * protocol runs) and the client's worker picks its client's
 * (emsg_frame_of()). Watch-list transitions (frame_presence, one frame per
 * privacy class) are still the default protocol's only.
 *
 * Room messages (owner side): the room core encodes each delta, snapshot
 * and ephemeral once through frame_room_codec, the default protocol's room
 * encoders; its callback hands the engine the value and that payload, and
 * frame_room_event() gives the frame of any protocol from them, each
 * encoded at most once per event (struct adapter_frames).
 *
 * Refs are the client's "ref" as JSON text ("" = none, at most
 * MSG_REF_MAX - 1 bytes): copied into the reply for that message.
 */
#ifndef FRAME_H
#define FRAME_H

#include <stdbool.h>
#include <stddef.h>

#include "adapter.h"
#include "buf.h"
#include "conn.h"

struct engine;
struct emsg;
struct presence_view;
struct room_event;
struct room_info;
struct store_privacy;
struct client;
struct config;

/* A WebSocket text frame of b's bytes (a new reference); releases b. The
 * framing every WebSocket adapter shares. */
struct payload *frame_text(struct buf *b);
/* The message inside a frame made by frame_text(): borrowed from f. */
void frame_json(const struct payload *f, const char **p, size_t *n);
/* An unframed payload of b's bytes (HTTP answer parts); releases b. */
struct payload *buf_payload(struct buf *b);

/* The adapter of client c. */
const struct proto_adapter *frame_adapter(const struct client *c);
/* Sends frame f to c through its adapter and drops the reference f. */
void frame_send(struct client *c, struct payload *f);
/* An error reply on c. */
void frame_send_error(struct client *c, const char *code, const char *message, const char *ref);
/* An ack on c, only when ref is not "". */
void frame_send_ack(struct client *c, const char *ref);
/* The welcome of a socket that opened (user, session when it has one,
 * and the server's settings). */
void frame_send_welcome(struct client *c, const struct config *cfg, uint64_t conn_id,
                        const char *uid, const char *sid, bool resumed);
/* session_ended with the reason (enum presence_end_reason) and, when not
 * NULL, a message. */
void frame_send_session_ended(struct client *c, int why, const char *message);
/* token_expired (auth = jwt). */
void frame_send_token_expired(struct client *c);
/* The room core's codec (room_config.codec): the room encoders of
 * ADAPTER_DEFAULT. */
extern const struct room_codec frame_room_codec;
/* The frame of room event ev (the room core's callback argument) for
 * protocol proto, borrowed from fs, the event's cache (zero-filled before
 * the first call, adapter_frames_release() after the last): the default
 * protocol's is the payload ev already carries, another's is encoded from
 * ev's value on its first call. */
struct payload *frame_room_event(struct adapter_frames *fs, unsigned proto,
                                 const struct room_event *ev);
/* The room codec of protocol proto (its adapter's three room encoders). */
struct room_codec frame_room_codec_for(unsigned proto);
/* An application event's frame for every protocol in the bit set protos,
 * into fs (zero-filled; NULL where a protocol has no such message). */
struct room_broadcast_event;
void frame_room_broadcast(const struct room_broadcast_event *ev, unsigned protos,
                          struct adapter_frames *fs);

/* A presence event: v as seen by class cls (enum privacy_class), its
 * times converted with wall_offset_ms (wall - monotonic). */
struct payload *frame_presence(const struct presence_view *v, int cls, int64_t wall_offset_ms);
/* privacy_changed with the user's settings p, for every protocol, into fs
 * (zero-filled). */
void frame_privacy_changed(const struct store_privacy *p, struct adapter_frames *fs);
/* room_joined in protocol proto: the room's epoch, seq, mode, count and
 * whether the join resumed, for the join with ref (NULL: nothing). */
struct payload *frame_room_joined(const char *room, const struct room_info *info, bool resumed,
                                  const char *ref, unsigned proto);

/* Owner side: sends the frames of fs (taken over, fs left empty) to the
 * client of conn_id as an OP_REPLY; its worker writes its protocol's. */
void frame_reply_frames(struct engine *e, uint64_t conn_id, struct adapter_frames *fs);
/* An ack of req to its client, when it has a ref. */
void frame_reply_ack(struct engine *e, const struct emsg *req);
/* An error message to the client on connection conn_id (any worker). */
void frame_reply_error(struct engine *e, uint64_t conn_id, const char *code, const char *message,
                       const char *ref);

#endif
