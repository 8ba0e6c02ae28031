/* SPDX-License-Identifier: MIT */
/*
 * pusher_encode.c - engine events as Pusher frames (pusher_encode.h).
 */
#include "pusher_encode.h"
#include "pusher_filter.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "buf.h"
#include "client.h"
#include "frame.h"
#include "json.h"
#include "ns.h"
#include "pusher.h"
#include "pusher_app.h"
#include "pusher_name.h"
#include "room.h"
#include "ws.h"
#include "wsconn.h"

static uint32_t boot; /* the first part of every socket id */

void pusher_encode_init(void)
{
    uint32_t r = 0;

    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
        r = 1;
    boot = r % 1000000000u + 1u;
}

void pusher_socket_id(uint64_t conn_id, char out[PUSHER_SOCKET_ID_MAX])
{
    snprintf(out, PUSHER_SOCKET_ID_MAX, "%" PRIu32 ".%" PRIu64, boot, conn_id);
}

bool pusher_conn_of(const char *s, uint64_t *conn_id)
{
    char *end;
    unsigned long long b = strtoull(s, &end, 10);

    if (end == s || *end != '.' || b != boot || end[1] < '0' || end[1] > '9')
        return false;
    *conn_id = strtoull(end + 1, &end, 10);
    return *end == '\0';
}

/* ---- helpers ---- */

/* Appends {"event":E,"channel":C,"data": to b (the caller adds the data). */
static void head(struct buf *b, const char *event, const char *channel)
{
    buf_append_str(b, "{\"event\":");
    json_append_cstr(b, event);
    if (channel) {
        buf_append_str(b, ",\"channel\":");
        json_append_cstr(b, channel);
    }
    buf_append_str(b, ",\"data\":");
}

/* Appends the text of inner as a JSON string (Pusher's data is a string
 * holding JSON) and releases inner. */
static void append_as_string(struct buf *b, struct buf *inner)
{
    json_append_string(b, inner->data ? inner->data : "", inner->len);
    buf_release(inner);
}

/* Appends b as one more text frame to out and empties b. */
static void add_frame(struct buf *out, struct buf *b)
{
    struct payload *p = ws_frame_payload(WS_OP_TEXT, b->data, b->len);

    buf_append(out, p->data, p->len);
    payload_unref(p);
    b->len = 0;
}

static struct payload *frames_of(struct buf *out)
{
    struct payload *p = out->len ? payload_from(out->data, out->len) : NULL;

    buf_release(out);
    return p;
}

static const char *channel_of(const char *room, char *buf)
{
    return pusher_channel_of(room, buf) ? buf : ns_strip(room);
}

/* A user id as its app's clients know it: without its namespace prefix
 * (ns.h). A room's members, a watched user and a sender are of the
 * reader's namespace (its ids carry the same prefix). */
static void append_user(struct buf *b, const char *user)
{
    json_append_cstr(b, ns_strip(user));
}

/* {"user_id":U,"user_info":I} or {"user_id":U} (info NULL) into b. */
static void member_json(struct buf *b, const char *user, const char *info, size_t n)
{
    buf_append_str(b, "{\"user_id\":");
    append_user(b, user);
    if (info) {
        buf_append_str(b, ",\"user_info\":");
        buf_append(b, info, n);
    }
    buf_append_str(b, "}");
}

/* ---- the events ---- */

static struct payload *enc_welcome(const struct welcome_event *ev)
{
    char sid[PUSHER_SOCKET_ID_MAX];
    struct buf b = {0}, in = {0};

    if (ev->uid && ev->uid[0])
        return NULL; /* a presence subscription's session: welcomed at open */
    pusher_socket_id(ev->conn_id, sid);
    head(&b, "pusher:connection_established", NULL);
    buf_printf(&in, "{\"socket_id\":\"%s\",\"activity_timeout\":%d}", sid,
               PUSHER_ACTIVITY_TIMEOUT_S);
    append_as_string(&b, &in);
    buf_append_str(&b, "}");
    return frame_text(&b);
}

/* The Pusher status of an engine error code. */
static int status_of(const char *code)
{
    if (strcmp(code, "room_full") == 0 || strcmp(code, "too_many_rooms") == 0 ||
        strcmp(code, "too_many_sessions") == 0 || strcmp(code, "rate_limited") == 0)
        return 4100;
    if (strcmp(code, "forbidden") == 0 || strcmp(code, "unauthorized") == 0)
        return 401;
    return 400;
}

/* A ref that names a channel: a JSON string (the adapter passes those). */
static bool ref_channel(const char *ref, char *out, size_t n)
{
    size_t len = ref ? strlen(ref) : 0;

    if (len < 3 || ref[0] != '"' || ref[len - 1] != '"' || len - 2 >= n)
        return false;
    memcpy(out, ref + 1, len - 2);
    out[len - 2] = '\0';
    return true;
}

struct payload *pusher_frame_error(int code, const char *message)
{
    struct buf b = {0};

    head(&b, "pusher:error", NULL);
    if (code)
        buf_printf(&b, "{\"code\":%d,\"message\":", code);
    else
        buf_append_str(&b, "{\"code\":null,\"message\":");
    json_append_cstr(&b, message);
    buf_append_str(&b, "}}");
    return frame_text(&b);
}

struct payload *pusher_frame_subscription_error(const char *channel, const char *type,
                                                const char *message, int status)
{
    struct buf b = {0};

    head(&b, "pusher:subscription_error", channel);
    buf_append_str(&b, "{\"type\":");
    json_append_cstr(&b, type);
    buf_append_str(&b, ",\"error\":");
    json_append_cstr(&b, message);
    buf_printf(&b, ",\"status\":%d}}", status);
    return frame_text(&b);
}

static struct payload *enc_error(const struct error_event *ev)
{
    char channel[PUSHER_CHANNEL_MAX + 1];
    int status = status_of(ev->code);

    if (ref_channel(ev->ref, channel, sizeof(channel)))
        return pusher_frame_subscription_error(channel,
                                               status == 4100  ? "LimitReached"
                                               : status == 401 ? "AuthError"
                                                               : "InvalidRequest",
                                               ev->message, status);
    return pusher_frame_error(status == 4100 ? 4100 : 0, ev->message);
}

static struct payload *enc_nothing_ref(const char *ref)
{
    (void)ref;
    return NULL;
}

static struct payload *enc_ended(const struct ended_event *ev)
{
    if (ev->why == PRESENCE_END_KICKED)
        return pusher_frame_error(4009, ev->message ? ev->message : "connection terminated");
    return pusher_frame_error(4200, ev->message ? ev->message : "the session ended");
}

/* member_added (joins and patches: the new user_info) and member_removed
 * frames, one per member, in one payload. */
static struct payload *enc_room_delta(const struct room_delta_view *v, struct buf *scratch)
{
    char channel[PUSHER_CHANNEL_MAX + 1];
    struct buf out = {0}, in = {0};
    const char *ch = channel_of(v->head.room, channel);

    if (!pusher_room_is_presence(v->head.room))
        return NULL;
    scratch->len = 0;
    for (size_t i = 0; i < v->njoins + v->npatches; i++) {
        const struct room_entry *x = i < v->njoins ? &v->joins[i] : &v->patches[i - v->njoins];
        head(scratch, "pusher_internal:member_added", ch);
        member_json(&in, x->user, x->meta, x->meta_len);
        append_as_string(scratch, &in);
        buf_append_str(scratch, "}");
        add_frame(&out, scratch);
    }
    for (size_t i = 0; i < v->nleaves; i++) {
        head(scratch, "pusher_internal:member_removed", ch);
        member_json(&in, v->leaves[i], NULL, 0);
        append_as_string(scratch, &in);
        buf_append_str(scratch, "}");
        add_frame(&out, scratch);
    }
    return frames_of(&out);
}

/* {"presence":{"ids":[..],"hash":{id:info,..},"count":N}} */
static void presence_data(struct buf *in, const struct room_snapshot_view *v)
{
    buf_append_str(in, "{\"presence\":{\"ids\":[");
    for (size_t i = 0; i < v->nmembers; i++) {
        if (i)
            buf_append_str(in, ",");
        append_user(in, v->members[i].user);
    }
    buf_append_str(in, "],\"hash\":{");
    for (size_t i = 0; i < v->nmembers; i++) {
        if (i)
            buf_append_str(in, ",");
        append_user(in, v->members[i].user);
        buf_append_str(in, ":");
        buf_append(in, v->members[i].meta, v->members[i].meta_len);
    }
    buf_append_str(in, "},\"count\":");
    json_append_u64(in, v->head.count);
    buf_append_str(in, "}}");
}

static struct payload *enc_room_snapshot(const struct room_snapshot_view *v, struct buf *scratch)
{
    char channel[PUSHER_CHANNEL_MAX + 1];
    struct buf in = {0};

    scratch->len = 0;
    head(scratch, "pusher_internal:subscription_succeeded", channel_of(v->head.room, channel));
    if (pusher_room_is_presence(v->head.room))
        presence_data(&in, v);
    else
        buf_append_str(&in, "{}");
    append_as_string(scratch, &in);
    buf_append_str(scratch, "}");
    return ws_frame_payload(WS_OP_TEXT, scratch->data, scratch->len);
}

static struct payload *enc_room_ephemeral(const struct room_ephemeral_view *v, struct buf *scratch)
{
    (void)v;
    (void)scratch;
    return NULL;
}

static struct payload *enc_room_broadcast(const struct room_broadcast_event *ev)
{
    char channel[PUSHER_CHANNEL_MAX + 1];
    struct buf b = {0};

    head(&b, ev->event, channel_of(ev->room, channel));
    if (room_broadcast_is_binary(ev))
        json_append_cstr(&b, ev->data + 1); /* a binary payload: its base64 as the data */
    else
        buf_append_str(&b, ev->data);
    if (ev->user[0] && pusher_room_is_presence(ev->room)) {
        buf_append_str(&b, ",\"user_id\":");
        append_user(&b, ev->user);
    }
    buf_append_str(&b, "}");
    return frame_text(&b);
}

/* pusher_internal:subscription_count {"subscription_count":n}, as Pusher
 * sends it to an app that enabled it: channels other than presence and
 * server-to-user channels only. */
static struct payload *enc_room_count(const char *room, uint64_t n)
{
    const struct pusher_app *app = pusher__app_of(room);
    char channel[PUSHER_CHANNEL_MAX + 1];
    struct buf b = {0}, in = {0};

    if (!app || !app->subscription_count || pusher_room_is_presence(room) ||
        !pusher_channel_of(room, channel) || channel[0] == '#')
        return NULL;
    head(&b, "pusher_internal:subscription_count", channel);
    buf_printf(&in, "{\"subscription_count\":%llu}", (unsigned long long)n);
    append_as_string(&b, &in);
    buf_append_str(&b, "}");
    return frame_text(&b);
}

/* A drain closes the socket at its own random moment within the window
 * with pusher:error 4200, then close 4200: pusher-js reconnects at once
 * on 4200, so the spread of the closes is the spread of the reconnects. */
static struct payload *enc_drain_close(void)
{
    return pusher_frame_error(4200, "server restarting, reconnect");
}

/* Pusher's close codes drive pusher-js's reconnection (4000 would mean
 * "TLS only", 40xx "do not reconnect"): a session that ended or moved
 * reconnects at once (4200), a refused or rate-limited one backs off
 * (4100), an authentication failure or a kick (the HTTP API's
 * terminate_connections) does not come back (4009). */
static unsigned close_code(unsigned native, int end)
{
    if (end == PRESENCE_END_KICKED)
        return 4009;
    switch (native) {
    case 4000:
    case 4001:
        return 4200;
    case 1008:
        return 4100;
    case 4401:
    case 4403:
        return 4009;
    default:
        return native;
    }
}

/* pusher_internal:watchlist_events with one event, "online" or "offline",
 * for one user; data a JSON string, as Pusher's is. */
static struct payload *enc_watch(const char *user, bool online)
{
    struct buf b = {0}, in = {0};

    buf_printf(&in, "{\"events\":[{\"name\":\"%s\",\"user_ids\":[", online ? "online" : "offline");
    append_user(&in, user);
    buf_append_str(&in, "]}]}");
    buf_append_str(&b, "{\"event\":\"pusher_internal:watchlist_events\",\"data\":");
    json_append_string(&b, in.data, in.len);
    buf_append_str(&b, "}");
    buf_release(&in);
    return frame_text(&b);
}

/* The adapter's conn_of: a socket id of this node's. */
static uint64_t conn_of_socket(const char *tag)
{
    uint64_t conn = 0;

    return pusher_conn_of(tag, &conn) ? conn : 0;
}

const struct proto_adapter pusher_adapter = {
    .name = "pusher",
    .metrics_proto = METRICS_PROTO_PUSHER,
    .own_auth = true,
    .encode_error = enc_error,
    .encode_ack = enc_nothing_ref,
    .encode_welcome = enc_welcome,
    .encode_ended = enc_ended,
    .encode_token_expired = adapter_no_frame,
    .encode_presence = adapter_no_presence,
    .encode_privacy = adapter_no_privacy,
    .encode_room_joined = adapter_no_room_joined,
    .encode_room_delta = enc_room_delta,
    .encode_room_snapshot = enc_room_snapshot,
    .encode_room_ephemeral = enc_room_ephemeral,
    .filter_blocked = pusher_filter_blocked,
    .encode_room_broadcast = enc_room_broadcast,
    .encode_watch = enc_watch,
    .send = client__ws_send,
    .on_started = pusher__on_started,
    .close_code = close_code,
    .encode_drain_close = enc_drain_close,
    .drain_close_code = 4200,
    .release = pusher__release,
    .conn_of = conn_of_socket,
    .room_counts = true,
    .encode_room_count = enc_room_count,
};
