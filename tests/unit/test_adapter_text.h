/* SPDX-License-Identifier: MIT */
/*
 * test_adapter_text.h - a protocol adapter for the engine's unit tests:
 * every event becomes one line of "name key=value ..." text, so a test
 * can check what the engine decided (which event, for whom, with which
 * values) without linking a real protocol, which sits above the engine.
 * The shapes:
 *   error code=<code> ref=<ref JSON>        ack ref=<ref JSON>
 *   welcome uid=<uid> sid=<sid>              ended why=<reason number>
 *   token_expired                            privacy_changed
 *   presence user=<u> status=<status> class=<n>
 *   room_joined room=<r> epoch=<e> seq=<n> ref=<ref JSON>
 *   room_delta room=<r> seq=<n> joins=<n> leaves=<n> patches=<n>
 *   room_snapshot room=<r> seq=<n> members=<n>
 *   ephemeral room=<r> user=<u> kind=<k>
 * send drops the frame (the tests have no sockets).
 * Header-only: include it in one test file, then text_register().
 */
#ifndef TEST_ADAPTER_TEXT_H
#define TEST_ADAPTER_TEXT_H

#include "adapter.h"
#include "buf.h"
#include "presence.h"
#include "room.h"

static struct payload *text_payload(struct buf *b)
{
    struct payload *p = payload_from(b->data, b->len);

    buf_release(b);
    return p;
}

static const char *text_ref(const char *ref)
{
    return ref && ref[0] ? ref : "-";
}

static struct payload *text_error(const struct error_event *ev)
{
    struct buf b = {0};

    buf_printf(&b, "error code=%s ref=%s", ev->code, text_ref(ev->ref));
    return text_payload(&b);
}

static struct payload *text_ack(const char *ref)
{
    struct buf b = {0};

    buf_printf(&b, "ack ref=%s", ref);
    return text_payload(&b);
}

static struct payload *text_welcome(const struct welcome_event *ev)
{
    struct buf b = {0};

    buf_printf(&b, "welcome uid=%s sid=%s", ev->uid, ev->sid ? ev->sid : "-");
    return text_payload(&b);
}

static struct payload *text_ended(const struct ended_event *ev)
{
    struct buf b = {0};

    buf_printf(&b, "ended why=%d", ev->why);
    return text_payload(&b);
}

static struct payload *text_token_expired(void)
{
    return payload_from("token_expired", 13);
}

static struct payload *text_presence(const struct presence_event *ev)
{
    struct buf b = {0};

    buf_printf(&b, "presence user=%s status=%s class=%d", ev->view->user,
               presence_status_name(ev->view->status), ev->cls);
    return text_payload(&b);
}

static struct payload *text_privacy(const struct privacy_event *ev)
{
    (void)ev;
    return payload_from("privacy_changed", 15);
}

static struct payload *text_room_joined(const struct room_joined_event *ev)
{
    struct buf b = {0};

    buf_printf(&b, "room_joined room=%s epoch=%llu seq=%llu ref=%s", ev->room,
               (unsigned long long)ev->info->epoch, (unsigned long long)ev->info->seq,
               text_ref(ev->ref));
    return text_payload(&b);
}

static struct payload *text_room_delta(const struct room_delta_view *v, struct buf *scratch)
{
    (void)scratch;
    struct buf b = {0};

    buf_printf(&b, "room_delta room=%s seq=%llu joins=%zu leaves=%zu patches=%zu", v->head.room,
               (unsigned long long)v->head.seq, v->njoins, v->nleaves, v->npatches);
    return text_payload(&b);
}

static struct payload *text_room_snapshot(const struct room_snapshot_view *v, struct buf *scratch)
{
    (void)scratch;
    struct buf b = {0};

    buf_printf(&b, "room_snapshot room=%s seq=%llu members=%zu", v->head.room,
               (unsigned long long)v->head.seq, v->nmembers);
    return text_payload(&b);
}

static struct payload *text_room_ephemeral(const struct room_ephemeral_view *v, struct buf *scratch)
{
    (void)scratch;
    struct buf b = {0};

    buf_printf(&b, "ephemeral room=%s user=%s kind=%s", v->room, v->user, v->kind);
    return text_payload(&b);
}

static struct payload *text_room_broadcast(const struct room_broadcast_event *ev)
{
    struct buf b = {0};

    buf_printf(&b, "broadcast room=%s event=%s data=%s user=%s", ev->room, ev->event, ev->data,
               ev->user);
    return text_payload(&b);
}

static void text_send(struct client *c, struct payload *f)
{
    (void)c;
    (void)f; /* no sockets: the caller keeps and drops its own reference */
}

static const struct proto_adapter text_adapter = {
    .name = "text",
    .encode_error = text_error,
    .encode_ack = text_ack,
    .encode_welcome = text_welcome,
    .encode_ended = text_ended,
    .encode_token_expired = text_token_expired,
    .encode_presence = text_presence,
    .encode_privacy = text_privacy,
    .encode_room_joined = text_room_joined,
    .encode_room_delta = text_room_delta,
    .encode_room_snapshot = text_room_snapshot,
    .encode_room_ephemeral = text_room_ephemeral,
    .encode_room_broadcast = text_room_broadcast,
    .send = text_send,
};

/* Registers the text adapter as the default protocol (the first one). */
static inline void text_register(void)
{
    (void)adapter_register(&text_adapter);
}

#endif
