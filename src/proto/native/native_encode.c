/* SPDX-License-Identifier: MIT */
/*
 * native_encode.c - the native protocol's adapter table (adapter.h): the
 * JSON of docs/protocol.md for each engine event, written with the own
 * JSON encoder straight into the buffer that becomes the WebSocket frame.
 * The presence and settings objects themselves are privacy.h's encoders,
 * which the HTTP API shares. The room messages (room_delta, room_snapshot,
 * ephemeral) are written from the room core's values (room.h) into the
 * scratch buffer the caller lends, so that they allocate only the frame.
 */
#include "native_encode.h"

#include "client.h"
#include "config.h"
#include "frame.h"
#include "json.h"
#include "ns.h"
#include "presence.h"
#include "privacy.h"
#include "room.h"
#include "ws.h"

#define NATIVE_PROTOCOL 1 /* the native protocol's version, in the welcome */

static void append_ref(struct buf *b, const char *ref)
{
    if (ref && ref[0]) {
        buf_append_str(b, ",\"ref\":");
        buf_append_str(b, ref);
    }
}

void native_error_json(struct buf *b, const char *code, const char *message, const char *ref)
{
    buf_append_str(b, "{\"type\":\"error\",\"code\":");
    json_append_cstr(b, code);
    buf_append_str(b, ",\"message\":");
    json_append_cstr(b, message);
    append_ref(b, ref);
    buf_append_str(b, "}");
}

static struct payload *enc_error(const struct error_event *ev)
{
    struct buf b = {0};

    native_error_json(&b, ev->code, ev->message, ev->ref);
    return frame_text(&b);
}

static struct payload *enc_ack(const char *ref)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"type\":\"ack\"");
    append_ref(&b, ref);
    buf_append_str(&b, "}");
    return frame_text(&b);
}

static struct payload *enc_welcome(const struct welcome_event *ev)
{
    const struct config *cfg = ev->cfg;
    struct buf b = {0};

    buf_printf(&b,
               "{\"type\":\"welcome\",\"protocol\":%d,\"server\":\"presenced/0.1.0\","
               "\"connectionId\":\"%llx\"",
               NATIVE_PROTOCOL, (unsigned long long)ev->conn_id);
    if (ev->uid[0]) {
        buf_append_str(&b, ",\"user\":");
        json_append_cstr(&b, ns_strip(ev->uid));
        buf_append_str(&b, ",\"sessionId\":");
        json_append_cstr(&b, ev->sid);
        buf_printf(&b, ",\"resumed\":%s", ev->resumed ? "true" : "false");
    }
    buf_printf(&b,
               ",\"heartbeatMs\":%lld,\"sessionTtlMs\":%lld,\"reconnectGraceMs\":%lld,"
               "\"idleMs\":%lld,\"statusPolicy\":\"%s\",\"limits\":{\"maxMessageBytes\":%lld,"
               "\"maxWatch\":%d,\"maxRoomMetaBytes\":1024,\"maxEphemeralBytes\":1024,"
               "\"ephemeralPerSecond\":%d}}",
               (long long)cfg->heartbeat_interval_ms, (long long)cfg->session_ttl_ms,
               (long long)cfg->reconnect_grace_ms, (long long)cfg->idle_ms, cfg->status_policy,
               (long long)cfg->ws_max_message_bytes, cfg->max_watch, cfg->ephemeral_rate);
    return frame_text(&b);
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

static struct payload *enc_ended(const struct ended_event *ev)
{
    struct buf b = {0};

    buf_printf(&b, "{\"type\":\"session_ended\",\"reason\":\"%s\"", end_reason_name(ev->why));
    if (ev->message) {
        buf_append_str(&b, ",\"message\":");
        json_append_cstr(&b, ev->message);
    }
    buf_append_str(&b, "}");
    return frame_text(&b);
}

static struct payload *enc_token_expired(void)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"type\":\"token_expired\"}");
    return frame_text(&b);
}

/* {"type":"reconnect","afterMs":N}: a draining server closes this socket
 * in N ms; come back then, resuming the session. */
static struct payload *enc_reconnect(uint64_t after_ms)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"type\":\"reconnect\",\"afterMs\":");
    json_append_u64(&b, after_ms);
    buf_append_str(&b, "}");
    return frame_text(&b);
}

static struct payload *enc_presence(const struct presence_event *ev)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"type\":\"presence\",\"presence\":");
    privacy_encode(ev->view, (enum privacy_class)ev->cls, ev->wall_offset_ms, &b);
    buf_append_str(&b, "}");
    return frame_text(&b);
}

static struct payload *enc_privacy(const struct privacy_event *ev)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"type\":\"privacy_changed\",\"privacy\":");
    privacy_encode_settings(ev->settings, &b);
    buf_append_str(&b, "}");
    return frame_text(&b);
}

static struct payload *enc_room_joined(const struct room_joined_event *ev)
{
    const struct room_info *info = ev->info;
    struct buf b = {0};

    buf_printf(&b, "{\"type\":\"room_joined\",\"room\":");
    json_append_cstr(&b, ns_strip(ev->room));
    buf_printf(&b,
               ",\"epoch\":%llu,\"seq\":%llu,\"mode\":\"%s\",\"count\":%zu,\"digest\":\"%016llx\""
               ",\"resumed\":%s",
               (unsigned long long)info->epoch, (unsigned long long)info->seq,
               room_mode_name(info->mode), (size_t)info->count, (unsigned long long)info->digest,
               ev->resumed ? "true" : "false");
    append_ref(&b, ev->ref);
    buf_append_str(&b, "}");
    return frame_text(&b);
}

/* ---- rooms (room.h's values) ---- */

/* The text frame of the message in scratch. */
static struct payload *scratch_frame(const struct buf *b)
{
    return ws_frame_payload(WS_OP_TEXT, b->data, b->len);
}

/* {"user":"u","joinedAt":T,"meta":M} */
static void append_entry(struct buf *b, const struct room_entry *x)
{
    buf_append_str(b, "{\"user\":");
    json_append_cstr(b, ns_strip(x->user));
    buf_append_str(b, ",\"joinedAt\":");
    json_append_u64(b, x->joined_at);
    buf_append_str(b, ",\"meta\":");
    buf_append(b, x->meta, x->meta_len);
    buf_append_str(b, "}");
}

/* ,"key":[entry,...] */
static void append_entries(struct buf *b, const char *key, const struct room_entry *x, size_t n)
{
    buf_printf(b, ",\"%s\":[", key);
    for (size_t i = 0; i < n; i++) {
        if (i)
            buf_append_str(b, ",");
        append_entry(b, &x[i]);
    }
    buf_append_str(b, "]");
}

/* {"type":T,"room":R,"epoch":E,"seq":N,"mode":M,"count":C,"digest":D */
static void append_room_head(struct buf *b, const char *type, const struct room_head *h)
{
    buf_append_str(b, "{\"type\":");
    json_append_cstr(b, type);
    buf_append_str(b, ",\"room\":");
    json_append_cstr(b, ns_strip(h->room));
    buf_append_str(b, ",\"epoch\":");
    json_append_u64(b, h->epoch);
    buf_append_str(b, ",\"seq\":");
    json_append_u64(b, h->seq);
    buf_append_str(b, ",\"mode\":");
    json_append_cstr(b, room_mode_name(h->mode));
    buf_append_str(b, ",\"count\":");
    json_append_u64(b, h->count);
    buf_printf(b, ",\"digest\":\"%016llx\"", (unsigned long long)h->digest);
}

/* {"type":"room_delta",head,"joins":[..],"leaves":[..],"patches":[..]}, in
 * interval mode with "joinCount", "leaveCount" and "patchCount". */
static struct payload *enc_room_delta(const struct room_delta_view *v, struct buf *b)
{
    b->len = 0;
    append_room_head(b, "room_delta", &v->head);
    append_entries(b, "joins", v->joins, v->njoins);
    buf_append_str(b, ",\"leaves\":[");
    for (size_t i = 0; i < v->nleaves; i++) {
        if (i)
            buf_append_str(b, ",");
        json_append_cstr(b, ns_strip(v->leaves[i]));
    }
    buf_append_str(b, "]");
    append_entries(b, "patches", v->patches, v->npatches);
    if (v->head.mode == ROOM_MODE_INTERVAL) {
        buf_append_str(b, ",\"joinCount\":");
        json_append_u64(b, v->join_total);
        buf_append_str(b, ",\"leaveCount\":");
        json_append_u64(b, v->leave_total);
        buf_append_str(b, ",\"patchCount\":");
        json_append_u64(b, v->patch_total);
    }
    buf_append_str(b, "}");
    return scratch_frame(b);
}

/* {"type":"room_snapshot",head,"members":[..]} */
static struct payload *enc_room_snapshot(const struct room_snapshot_view *v, struct buf *b)
{
    b->len = 0;
    append_room_head(b, "room_snapshot", &v->head);
    append_entries(b, "members", v->members, v->nmembers);
    buf_append_str(b, "}");
    return scratch_frame(b);
}

/* {"type":"ephemeral","room":R,"user":U,"kind":K,"data":D} */
static struct payload *enc_room_ephemeral(const struct room_ephemeral_view *v, struct buf *b)
{
    b->len = 0;
    buf_append_str(b, "{\"type\":\"ephemeral\",\"room\":");
    json_append_cstr(b, ns_strip(v->room));
    buf_append_str(b, ",\"user\":");
    json_append_cstr(b, ns_strip(v->user));
    buf_append_str(b, ",\"kind\":");
    json_append_cstr(b, v->kind);
    buf_append_str(b, ",\"data\":");
    buf_append(b, v->data, v->data_len);
    buf_append_str(b, "}");
    return scratch_frame(b);
}

/* {"type":"broadcast","room":R,"event":E,"data":D[,"user":U]}; a binary
 * payload's D is its base64 string, followed by "encoding":"base64". */
static struct payload *enc_room_broadcast(const struct room_broadcast_event *ev)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"type\":\"broadcast\",\"room\":");
    json_append_cstr(&b, ns_strip(ev->room));
    buf_append_str(&b, ",\"event\":");
    json_append_cstr(&b, ev->event);
    buf_append_str(&b, ",\"data\":");
    if (room_broadcast_is_binary(ev)) {
        json_append_cstr(&b, ev->data + 1); /* base64 needs no escapes */
        buf_append_str(&b, ",\"encoding\":\"base64\"");
    } else {
        buf_append_str(&b, ev->data);
    }
    if (ev->user[0]) {
        buf_append_str(&b, ",\"user\":");
        json_append_cstr(&b, ns_strip(ev->user));
    }
    buf_append_str(&b, "}");
    return frame_text(&b);
}

const struct proto_adapter native_adapter = {
    .name = "native",
    .metrics_proto = METRICS_PROTO_NATIVE,
    .encode_error = enc_error,
    .encode_ack = enc_ack,
    .encode_welcome = enc_welcome,
    .encode_ended = enc_ended,
    .encode_token_expired = enc_token_expired,
    .encode_presence = enc_presence,
    .encode_privacy = enc_privacy,
    .encode_room_joined = enc_room_joined,
    .encode_room_delta = enc_room_delta,
    .encode_room_snapshot = enc_room_snapshot,
    .encode_room_ephemeral = enc_room_ephemeral,
    .encode_room_broadcast = enc_room_broadcast,
    .encode_reconnect = enc_reconnect,
    .send = client__ws_send,
};
