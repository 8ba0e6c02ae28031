/* SPDX-License-Identifier: MIT */
/*
 * frame.c - the native JSON encodings of the engine's replies and session
 * events (frame.h says why they are in one place). Written with the own
 * JSON encoder straight into the buffer that becomes the frame.
 */
#include "frame.h"

#include <string.h>

#include "config.h"
#include "engine_state.h"
#include "json.h"
#include "msg.h"
#include "presence.h"
#include "privacy.h"
#include "room.h"
#include "store.h"
#include "ws.h"

#define FRAME_PROTOCOL 1 /* the native protocol's version, in the welcome */

struct payload *frame_text(struct buf *b)
{
    struct payload *p = ws_frame_payload(WS_OP_TEXT, b->data, b->len);

    buf_release(b);
    return p;
}

struct payload *frame_text_json(const char *json, size_t n)
{
    return ws_frame_payload(WS_OP_TEXT, json, n);
}

/* A server WebSocket frame is unmasked, so its header is 2, 4 or 10 bytes
 * by the 7-bit length field. */
void frame_json(const struct payload *f, const char **p, size_t *n)
{
    unsigned len7 = (unsigned char)f->data[1] & 0x7fu;
    size_t hdr = len7 < 126 ? 2 : len7 == 126 ? 4 : 10;

    *p = f->data + hdr;
    *n = f->len - hdr;
}

struct payload *buf_payload(struct buf *b)
{
    struct payload *p = payload_from(b->data ? b->data : "", b->len);

    buf_release(b);
    return p;
}

void frame_append_ref(struct buf *b, const char *ref)
{
    if (ref && ref[0]) {
        buf_append_str(b, ",\"ref\":");
        buf_append_str(b, ref);
    }
}

void frame_error_json(struct buf *b, const char *code, const char *message, const char *ref)
{
    buf_append_str(b, "{\"type\":\"error\",\"code\":");
    json_append_cstr(b, code);
    buf_append_str(b, ",\"message\":");
    json_append_cstr(b, message);
    frame_append_ref(b, ref);
    buf_append_str(b, "}");
}

void frame_send_buf(struct wsconn *ws, struct buf *b)
{
    ws_send_text(ws, b->data, b->len);
    buf_release(b);
}

void frame_send_error(struct wsconn *ws, const char *code, const char *message, const char *ref)
{
    struct buf b = {0};

    frame_error_json(&b, code, message, ref);
    frame_send_buf(ws, &b);
}

void frame_send_ack(struct wsconn *ws, const char *ref)
{
    struct buf b = {0};

    if (!ref || !ref[0])
        return;
    buf_append_str(&b, "{\"type\":\"ack\"");
    frame_append_ref(&b, ref);
    buf_append_str(&b, "}");
    frame_send_buf(ws, &b);
}

void frame_send_welcome(struct wsconn *ws, const struct config *cfg, uint64_t conn_id,
                        const char *uid, const char *sid, bool resumed)
{
    struct buf b = {0};

    buf_printf(&b,
               "{\"type\":\"welcome\",\"protocol\":%d,\"server\":\"presenced/0.1.0\","
               "\"connectionId\":\"%llx\"",
               FRAME_PROTOCOL, (unsigned long long)conn_id);
    if (uid[0]) {
        buf_append_str(&b, ",\"user\":");
        json_append_cstr(&b, uid);
        buf_append_str(&b, ",\"sessionId\":");
        json_append_cstr(&b, sid);
        buf_printf(&b, ",\"resumed\":%s", resumed ? "true" : "false");
    }
    buf_printf(&b,
               ",\"heartbeatMs\":%lld,\"sessionTtlMs\":%lld,\"reconnectGraceMs\":%lld,"
               "\"idleMs\":%lld,\"statusPolicy\":\"%s\",\"limits\":{\"maxMessageBytes\":%lld,"
               "\"maxWatch\":%d,\"maxRoomMetaBytes\":1024,\"maxEphemeralBytes\":1024,"
               "\"ephemeralPerSecond\":%d}}",
               (long long)cfg->heartbeat_interval_ms, (long long)cfg->session_ttl_ms,
               (long long)cfg->reconnect_grace_ms, (long long)cfg->idle_ms, cfg->status_policy,
               (long long)cfg->ws_max_message_bytes, cfg->max_watch, cfg->ephemeral_rate);
    frame_send_buf(ws, &b);
}

static const char *end_reason_name(int why)
{
    switch (why) {
    case PRESENCE_END_LEAVE:
        return "leave";
    case PRESENCE_END_TTL:
        return "ttl";
    case PRESENCE_END_KICKED:
        return "kicked";
    default:
        return "grace";
    }
}

void frame_send_session_ended(struct wsconn *ws, int why, const char *message)
{
    struct buf b = {0};

    buf_printf(&b, "{\"type\":\"session_ended\",\"reason\":\"%s\"", end_reason_name(why));
    if (message) {
        buf_append_str(&b, ",\"message\":");
        json_append_cstr(&b, message);
    }
    buf_append_str(&b, "}");
    frame_send_buf(ws, &b);
}

void frame_send_token_expired(struct wsconn *ws)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"type\":\"token_expired\"}");
    frame_send_buf(ws, &b);
}

struct payload *frame_presence(const struct presence_view *v, int cls, int64_t wall_offset_ms)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"type\":\"presence\",\"presence\":");
    privacy_encode(v, (enum privacy_class)cls, wall_offset_ms, &b);
    buf_append_str(&b, "}");
    return frame_text(&b);
}

struct payload *frame_privacy_changed(const struct store_privacy *p)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"type\":\"privacy_changed\",\"privacy\":");
    privacy_encode_settings(p, &b);
    buf_append_str(&b, "}");
    return frame_text(&b);
}

struct payload *frame_room_joined(const char *room, const struct room_info *info, bool resumed,
                                  const char *ref)
{
    struct buf b = {0};

    buf_printf(&b, "{\"type\":\"room_joined\",\"room\":");
    json_append_cstr(&b, room);
    buf_printf(&b, ",\"epoch\":%llu,\"seq\":%llu,\"mode\":\"%s\",\"count\":%zu,\"resumed\":%s",
               (unsigned long long)info->epoch, (unsigned long long)info->seq,
               room_mode_name(info->mode), (size_t)info->count, resumed ? "true" : "false");
    frame_append_ref(&b, ref);
    buf_append_str(&b, "}");
    return frame_text(&b);
}

void frame_reply(struct engine *e, const struct emsg *req, struct payload *frame)
{
    struct emsg *em = emsg_new(OP_REPLY, req->conn_id);

    em->frame = frame;
    send_to(e, worker_of_conn(req->conn_id), em);
}

void frame_reply_ack(struct engine *e, const struct emsg *req)
{
    struct buf b = {0};

    if (!req->ref[0])
        return;
    buf_append_str(&b, "{\"type\":\"ack\"");
    frame_append_ref(&b, req->ref);
    buf_append_str(&b, "}");
    frame_reply(e, req, frame_text(&b));
}

void frame_reply_error(struct engine *e, uint64_t conn_id, const char *code, const char *message,
                       const char *ref)
{
    struct emsg *em = emsg_new(OP_REPLY, conn_id);
    struct buf b = {0};

    frame_error_json(&b, code, message, ref);
    em->frame = frame_text(&b);
    send_to(e, worker_of_conn(conn_id), em);
}
