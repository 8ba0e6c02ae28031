/* SPDX-License-Identifier: MIT */
/*
 * phoenix_supabase.c - what realtime-js adds to Phoenix Channels
 * (phoenix.h): the presence event's track and untrack (a Supabase channel
 * joins its room as a member at its first track and leaves it at untrack,
 * staying subscribed), broadcast between a topic's sockets of every
 * protocol (JSON, or realtime-js's binary push under vsn 2.0.0), and the
 * access_token event. The rest of a socket's life is phoenix.c's.
 */
#include "phoenix_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter.h"
#include "b64.h"
#include "client.h"
#include "engine_room.h"
#include "json.h"
#include "phoenix.h"
#include "phoenix_bin.h"
#include "phoenix_encode.h"
#include "utf8.h"
#include "wsconn.h"

/* The merge patch that turns ch's meta old into its meta now (members of
 * old that are not in now become null), with the new phx_ref and prev. */
static char *update_patch(struct client *c, const struct chan *ch, const char *old,
                          const char *prev)
{
    char *full = phx__member_meta(c, ch, prev), *out;
    cJSON *p = cJSON_Parse(full), *o = cJSON_Parse(old), *item, *mine;

    free(full);
    if (!p || !o)
        abort(); /* our own JSON: only OOM fails */
    mine = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(p, ROOM_SESSION_VALUES), client_sid(c));
    cJSON_ArrayForEach(item, o)
    {
        if (!cJSON_GetObjectItemCaseSensitive(mine, item->string))
            cJSON_AddItemToObject(mine, item->string, cJSON_CreateNull());
    }
    out = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    cJSON_Delete(o);
    if (!out)
        abort();
    return out;
}

/* ---- Supabase: track, untrack, broadcast ---- */

static void track(struct client *c, const struct phx_msg *m, struct chan *ch, const cJSON *payload)
{
    char *text, *old, *patch, prev[sizeof(ch->phx_ref)];

    if (!cJSON_IsObject(payload)) {
        phx__reply(c, m, false, "Presence track payload must be a map");
        return;
    }
    if (!client_uid(c)[0] || !c->started) {
        phx__reply(c, m, false, "this connection has no user: connect with params.user or a token");
        return;
    }
    if (ch->state != CH_JOINED) {
        phx__reply(c, m, false, "the channel is not joined yet");
        return;
    }
    if (!phx__take_push(c)) {
        phx__reply(c, m, false, "Too many presence messages per second");
        return;
    }
    text = cJSON_PrintUnformatted(payload);
    if (!text || strlen(text) > META_BYTES) {
        cJSON_free(text);
        phx__reply(c, m, false, "the tracked payload is over 1024 bytes");
        return;
    }
    if (ch->member && ch->meta && strcmp(ch->meta, text) == 0) {
        cJSON_free(text); /* unchanged: ok, and nothing to tell */
        phx__reply(c, m, true, NULL);
        return;
    }
    old = ch->meta;
    ch->meta = text;
    if (!ch->member) {
        cJSON_free(old);
        memcpy(ch->push_ref, m->ref, sizeof(ch->push_ref));
        ch->has_push_ref = m->has_ref;
        engine__room_unsubscribe(c, ch->room);
        if (phx__member_join(c, ch)) {
            ch->state = CH_TRACKING; /* the reply goes with the new state */
        } else {                     /* refused (and replied): subscribed again, as before */
            engine__room_stream(c, ch->room, NULL);
            ch->state = CH_RESYNC;
        }
        return;
    }
    memcpy(prev, ch->phx_ref, sizeof(prev));
    phx__new_phx_ref(c, ch);
    patch = update_patch(c, ch, old ? old : "{}", prev);
    engine__room_patch(c, ch->room, patch, ch->ref);
    cJSON_free(patch);
    cJSON_free(old);
    phx__reply(c, m, true, NULL);
}

static void untrack(struct client *c, const struct phx_msg *m, struct chan *ch)
{
    if (ch->member && ch->state == CH_JOINED) {
        engine__room_leave(c, ch->room, "");
        ch->member = false;
        engine__room_stream(c, ch->room, NULL); /* still subscribed */
        ch->state = CH_RESYNC;
    }
    phx__reply(c, m, true, NULL);
}

void phx__ev_presence(struct client *c, const struct phx_msg *m, struct chan *ch, const cJSON *p)
{
    const char *what = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "event"));

    if (what && strcmp(what, "track") == 0)
        track(c, m, ch, cJSON_GetObjectItemCaseSensitive(p, "payload"));
    else if (what && strcmp(what, "untrack") == 0)
        untrack(c, m, ch);
    else
        phx__reply(c, m, false, "presence events are track and untrack");
}

/* A socket's name in broadcasts' exclude: "phx.<phx__boot>.<connection>". */
static void socket_tag(uint64_t conn_id, char out[48])
{
    snprintf(out, 48, "phx.%" PRIu32 ".%" PRIu64, phx__boot, conn_id);
}

uint64_t phoenix__conn_of(const char *tag)
{
    unsigned long long b, conn;
    int used = 0;

    if (strncmp(tag, "phx.", 4) != 0 || sscanf(tag + 4, "%llu.%llu%n", &b, &conn, &used) != 2 ||
        tag[4 + used] != '\0' || b != phx__boot)
        return 0;
    return conn;
}

/* ROOM_CAST_BINARY and the base64 of the n bytes at p, a heap string. */
static char *binary_data(const char *p, size_t n)
{
    char *out = xmalloc(2 + B64_ENCODED_LEN(n));

    out[0] = ROOM_CAST_BINARY;
    b64_encode(p, n, out + 1, B64_STD);
    return out;
}

/* Relays event with data (JSON text, or n bytes when bin) to the room's
 * other sockets, of every protocol, and the sender's own when ch->self. */
static void cast(struct client *c, const struct phx_msg *m, struct chan *ch, const char *event,
                 const char *data, size_t n, bool bin)
{
    char tag[48], *copy;
    struct room_broadcast_event ev;

    if (ch->state == CH_WAIT) {
        phx__reply(c, m, false, "the channel is not joined yet");
        return;
    }
    if (!event || !event[0] || strlen(event) > PHX_EVENT_MAX) {
        phx__reply(c, m, false, "a broadcast needs an event name of 1-64 bytes");
        return;
    }
    if (n > CAST_BYTES || (!bin && json_check(data, n) != 0)) {
        phx__reply(c, m, false, "a broadcast payload is one JSON value of at most 32 KiB");
        return;
    }
    if (!phx__take_push(c)) {
        phx__reply(c, m, false, "Too many messages per second");
        return;
    }
    if (engine__room_ephemerals_held(c)) { /* asked to hide: as native's ephemerals */
        if (m->has_ref)
            phx__reply(c, m, true, NULL);
        return;
    }
    socket_tag(client_conn_id(c), tag);
    copy = bin ? binary_data(data, n) : xstrndup(data, n);
    ev = (struct room_broadcast_event){.room = ch->room,
                                       .event = event,
                                       .data = copy,
                                       .user = client_uid(c),
                                       .exclude = ch->self ? "" : tag};
    engine__room_broadcast(c->e, &ev, ch->self ? 0 : client_conn_id(c));
    free(copy);
    if (m->has_ref)
        phx__reply(c, m, true, NULL);
}

void phx__ev_broadcast(struct client *c, const struct phx_msg *m, struct chan *ch, const cJSON *p)
{
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(p, "payload");
    char *text = data ? cJSON_PrintUnformatted(data) : NULL;

    cast(c, m, ch, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "event")),
         text ? text : "null", text ? strlen(text) : 4, false);
    cJSON_free(text);
}

void phx__ev_access_token(struct client *c, const struct phx_msg *m, const cJSON *p)
{
    const char *tok = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "access_token"));
    const char *why = tok ? phx__take_token(c, tok) : "access_token must be a string";

    if (why)
        phx__reply(c, m, false, why);
}

/* realtime-js's binary broadcast (vsn 2.0.0): the same as a JSON one. */
void phx__on_binary(struct client *c, const char *p, size_t n)
{
    struct phx_bin_push b;
    struct phx_msg m = {0};
    struct chan *ch;
    char event[PHX_EVENT_MAX + 1];

    if (phx_bin_decode_push(p, n, &b) < 0 || b.topic.n > PHX_TOPIC_MAX || b.ref.n > PHX_REF_MAX ||
        b.join_ref.n > PHX_REF_MAX || b.event.n > PHX_EVENT_MAX ||
        !utf8_valid(b.topic.p, b.topic.n) || !utf8_valid(b.event.p, b.event.n) ||
        memchr(b.topic.p, 0, b.topic.n) || memchr(b.event.p, 0, b.event.n)) {
        client__ws_close(c, 1003, "unsupported binary frame");
        return;
    }
    memcpy(m.topic, b.topic.p, b.topic.n);
    memcpy(m.ref, b.ref.p, b.ref.n);
    memcpy(m.join_ref, b.join_ref.p, b.join_ref.n);
    m.has_ref = b.ref.n > 0;
    m.has_join_ref = b.join_ref.n > 0;
    snprintf(m.event, sizeof(m.event), "broadcast");
    memcpy(event, b.event.p, b.event.n);
    event[b.event.n] = '\0';
    if (!(ch = phx__chan_by_topic(phx__pc(c), m.topic))) {
        phx__reply(c, &m, false, "unmatched topic");
        return;
    }
    cast(c, &m, ch, event, b.payload.p, b.payload.n, !b.json);
}

bool phx__send_binary_cast(struct client *c, const struct chan *ch, const char *p, size_t n)
{
    static const char tail[] = PHX_CAST_BINARY_TAIL "]";
    size_t tn = sizeof(tail) - 1;
    cJSON *root, *env;
    const char *event, *b64;
    struct phx_bin_span topic, name;
    struct buf out = {0};
    unsigned char *bytes;
    size_t cap;
    ssize_t len;

    if (!c->ws || n < tn || memcmp(p + n - tn, tail, tn) != 0)
        return false; /* JSON: the text frame as it is */
    root = cJSON_ParseWithLength(p, n);
    env = cJSON_GetArrayItem(root, 4);
    event = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(env, "event"));
    b64 = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(env, "payload"));
    if (!event || !b64)
        abort(); /* our own frame (phoenix_encode.c): only OOM fails */
    cap = B64_DECODED_MAX(strlen(b64));
    bytes = xmalloc(cap);
    len = b64_decode(b64, strlen(b64), bytes, cap, B64_STD | B64_PAD);
    topic = (struct phx_bin_span){ch->topic, strlen(ch->topic)};
    name = (struct phx_bin_span){event, strlen(event)};
    if (len >= 0 &&
        phx_bin_encode_cast(&out, &topic, &name, (const char *)bytes, (size_t)len, false) == 0)
        wsconn_send_binary(c->ws, out.data, out.len);
    buf_release(&out);
    free(bytes);
    cJSON_Delete(root);
    return true;
}
