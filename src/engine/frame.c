/* SPDX-License-Identifier: MIT */
/*
 * frame.c - the engine's events as structured values handed to the
 * protocol adapters (frame.h says which adapter encodes which), and the
 * WebSocket framing helpers the adapters share.
 */
#include "frame.h"

#include "client.h"
#include "engine_state.h"
#include "metrics.h"
#include "msg.h"
#include "owner.h"
#include "room.h"
#include "ws.h"

struct payload *frame_text(struct buf *b)
{
    struct payload *p = ws_frame_payload(WS_OP_TEXT, b->data, b->len);

    buf_release(b);
    return p;
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

/* ---- client side: the client's own adapter ---- */

const struct proto_adapter *frame_adapter(const struct client *c)
{
    return adapter_get(c->proto);
}

/* The first frame a WebSocket client is sent is its protocol's first
 * message (welcome, pusher:connection_established, a phx_reply): its
 * connection's age then is the handshake (presenced_handshake_seconds). */
static void observe_handshake(struct client *c)
{
    uint64_t ms;

    if (!conn_first_message(wsconn_to_conn(c->ws), &ms))
        return;
    metrics_observe(&c->e->w->metrics, metrics_handshake_hist(frame_adapter(c)->metrics_proto),
                    ms * 1000);
}

void frame_send(struct client *c, struct payload *f)
{
    if (!f)
        return; /* the protocol has no such message */
    if (c->ws)
        observe_handshake(c);
    frame_adapter(c)->send(c, f);
    payload_unref(f);
}

void frame_send_error(struct client *c, const char *code, const char *message, const char *ref)
{
    struct error_event ev = {.code = code, .message = message, .ref = ref};

    frame_send(c, frame_adapter(c)->encode_error(&ev));
}

void frame_send_ack(struct client *c, const char *ref)
{
    if (!ref || !ref[0])
        return;
    frame_send(c, frame_adapter(c)->encode_ack(ref));
}

void frame_send_welcome(struct client *c, const struct config *cfg, uint64_t conn_id,
                        const char *uid, const char *sid, bool resumed)
{
    struct welcome_event ev = {
        .cfg = cfg, .conn_id = conn_id, .uid = uid, .sid = sid, .resumed = resumed};

    frame_send(c, frame_adapter(c)->encode_welcome(&ev));
}

void frame_send_session_ended(struct client *c, int why, const char *message)
{
    struct ended_event ev = {.why = why, .message = message};

    frame_send(c, frame_adapter(c)->encode_ended(&ev));
}

void frame_send_token_expired(struct client *c)
{
    frame_send(c, frame_adapter(c)->encode_token_expired());
}

/* ---- owner side: the default adapter, one frame per event ---- */

static struct payload *room_delta_default(const struct room_delta_view *v, struct buf *scratch)
{
    return adapter_get(ADAPTER_DEFAULT)->encode_room_delta(v, scratch);
}

static struct payload *room_snapshot_default(const struct room_snapshot_view *v,
                                             struct buf *scratch)
{
    return adapter_get(ADAPTER_DEFAULT)->encode_room_snapshot(v, scratch);
}

static struct payload *room_ephemeral_default(const struct room_ephemeral_view *v,
                                              struct buf *scratch)
{
    return adapter_get(ADAPTER_DEFAULT)->encode_room_ephemeral(v, scratch);
}

const struct room_codec frame_room_codec = {
    .encode_delta = room_delta_default,
    .encode_snapshot = room_snapshot_default,
    .encode_ephemeral = room_ephemeral_default,
};

struct room_codec frame_room_codec_for(unsigned proto)
{
    const struct proto_adapter *a;

    if (proto == ADAPTER_DEFAULT)
        return frame_room_codec;
    a = adapter_get(proto);
    return (struct room_codec){
        .encode_delta = a->encode_room_delta,
        .encode_snapshot = a->encode_room_snapshot,
        .encode_ephemeral = a->encode_room_ephemeral,
    };
}

struct payload *frame_room_event(struct adapter_frames *fs, unsigned proto,
                                 const struct room_event *ev)
{
    const struct proto_adapter *a;
    struct buf b = {0};

    if (fs->f[proto])
        return fs->f[proto];
    if (proto == ADAPTER_DEFAULT)
        return fs->f[proto] = payload_ref(ev->msg.payload);
    a = adapter_get(proto);
    if (ev->kind == ROOM_EV_DELTA)
        fs->f[proto] = a->encode_room_delta(ev->delta, &b);
    else if (ev->kind == ROOM_EV_SNAPSHOT)
        fs->f[proto] = a->encode_room_snapshot(ev->snapshot, &b);
    else
        fs->f[proto] = a->encode_room_ephemeral(ev->ephemeral, &b);
    buf_release(&b);
    return fs->f[proto];
}

void frame_room_broadcast(const struct room_broadcast_event *ev, unsigned protos,
                          struct adapter_frames *fs)
{
    for (unsigned p = 0; p < adapter_count(); p++)
        if (protos & (1u << p))
            fs->f[p] = adapter_get(p)->encode_room_broadcast(ev);
}

struct payload *frame_presence(const struct presence_view *v, int cls, int64_t wall_offset_ms)
{
    struct presence_event ev = {.view = v, .cls = cls, .wall_offset_ms = wall_offset_ms};

    return adapter_get(ADAPTER_DEFAULT)->encode_presence(&ev);
}

void frame_privacy_changed(const struct store_privacy *p, struct adapter_frames *fs)
{
    struct privacy_event ev = {.settings = p};

    for (unsigned i = 0; i < adapter_count(); i++)
        fs->f[i] = adapter_get(i)->encode_privacy(&ev);
}

struct payload *frame_room_joined(const char *room, const struct room_info *info, bool resumed,
                                  const char *ref, unsigned proto)
{
    struct room_joined_event ev = {.room = room, .info = info, .resumed = resumed, .ref = ref};

    return adapter_get(proto)->encode_room_joined(&ev);
}

void frame_reply_frames(struct engine *e, uint64_t conn_id, struct adapter_frames *fs)
{
    struct emsg *em = emsg_new(OP_REPLY, conn_id);

    emsg_take_frames(em, fs);
    owner_send(e, owner_of_conn(conn_id), em);
}

void frame_reply_ack(struct engine *e, const struct emsg *req)
{
    struct adapter_frames fs = {0};

    if (!req->ref[0])
        return;
    for (unsigned p = 0; p < adapter_count(); p++)
        fs.f[p] = adapter_get(p)->encode_ack(req->ref);
    frame_reply_frames(e, req->conn_id, &fs);
}

void frame_reply_error(struct engine *e, uint64_t conn_id, const char *code, const char *message,
                       const char *ref)
{
    struct error_event ev = {.code = code, .message = message, .ref = ref};
    struct adapter_frames fs = {0};

    for (unsigned p = 0; p < adapter_count(); p++)
        fs.f[p] = adapter_get(p)->encode_error(&ev);
    frame_reply_frames(e, conn_id, &fs);
}
