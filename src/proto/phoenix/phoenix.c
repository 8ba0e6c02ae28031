/* SPDX-License-Identifier: MIT */
/*
 * phoenix.c - the Phoenix protocol's sockets (phoenix.h): the WebSocket
 * application at /socket/websocket and /realtime/v1/websocket, the
 * channels of a socket, the events that become engine operations, the
 * per-socket delivery of room frames, and the registration; Supabase's
 * own events are phoenix_supabase.c's.
 *
 * Per socket the adapter keeps a struct pclient in c->x->adata: the
 * serializer, a bearer token waiting for the open, the channels (topic,
 * room, join_ref, where the join stands, the tracked meta), the session's
 * keep-alive timer and the broadcast/track bucket.
 *
 * A channel's life. phx_join creates it; it waits while the socket's
 * session is being started (a socket with a user always has one), then
 * joins its room as a member (phoenix.js topics, and Supabase ones once
 * tracked) or subscribes to it (Supabase topics, and any topic of a socket
 * without a user). The room's owner answers with the room's state, which
 * reaches send_room as a presence_state: the channel then replies ok to
 * the push it was answering (the join, or a track), and passes the state
 * on stamped with its join_ref. An error of the operation comes first,
 * through send, as a record naming the channel (its ref "c<serial>"), and
 * is replied to that push instead.
 */
#include "phoenix.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <cJSON.h>

#include "adapter.h"
#include "b64.h"
#include "client.h"
#include "engine.h"
#include "engine_room.h"
#include "engine_state.h"
#include "frame.h"
#include "http.h"
#include "httpd.h"
#include "json.h"
#include "loop.h"
#include "phoenix_encode.h"
#include "phoenix_internal.h"
#include "phoenix_msg.h"
#include "room.h"
#include "session.h"
#include "ws.h"

static unsigned proto_v2, proto_v1;
uint32_t phx__boot; /* in phx_refs and socket tags: differs per start and node */
static struct wsconn_opts ws_opts;
static const char *const subprotocols[] = {"phoenix", NULL};
static const struct route no_routes[1];
struct route_list phoenix_routes = {no_routes, 0};

/* ---- per-socket state ---- */

struct pclient *phx__pc(struct client *c)
{
    return c->x->adata;
}

static void chan_free(struct chan *ch)
{
    cJSON_free(ch->meta);
    ch->meta = NULL;
}

void phoenix__release(struct client *c)
{
    struct pclient *pc = c->x->adata;

    wheel_del(&pc->beat);
    phx__lp_release(pc->lp);
    for (unsigned i = 0; i < pc->nch; i++)
        chan_free(&pc->ch[i]);
    free(pc->ch);
    free(pc->token);
    free(pc);
    c->x->adata = NULL;
}

struct chan *phx__chan_by_topic(struct pclient *pc, const char *topic)
{
    for (unsigned i = 0; i < pc->nch; i++)
        if (strcmp(pc->ch[i].topic, topic) == 0)
            return &pc->ch[i];
    return NULL;
}

static struct chan *chan_by_room(struct pclient *pc, const char *room, size_t n)
{
    /* No strlen: this runs for every room frame to every socket. */
    for (unsigned i = 0; i < pc->nch && n < sizeof(pc->ch[i].room); i++)
        if (memcmp(pc->ch[i].room, room, n) == 0 && pc->ch[i].room[n] == '\0')
            return &pc->ch[i];
    return NULL;
}

static struct chan *chan_by_ref(struct pclient *pc, const char *ref)
{
    for (unsigned i = 0; i < pc->nch && ref[0]; i++)
        if (strcmp(pc->ch[i].ref, ref) == 0)
            return &pc->ch[i];
    return NULL;
}

void phx__chan_remove(struct pclient *pc, struct chan *ch)
{
    chan_free(ch);
    *ch = pc->ch[--pc->nch];
}

static struct chan *chan_add(struct pclient *pc)
{
    struct chan *ch;

    if (pc->nch == pc->cap) {
        pc->cap = pc->cap ? 2 * pc->cap : 2;
        pc->ch = xrealloc(pc->ch, pc->cap * sizeof(*pc->ch));
    }
    ch = &pc->ch[pc->nch++];
    memset(ch, 0, sizeof(*ch));
    snprintf(ch->ref, sizeof(ch->ref), "c%" PRIu32, ++pc->serial);
    return ch;
}

static void on_beat(struct wheel_timer *t, uint64_t now)
{
    struct pclient *pc = container_of(t, struct pclient, beat);

    (void)now;
    session__keepalive(pc->c, &pc->beat);
}

/* A token bucket of PUSH_RATE per second for broadcasts and tracks. */
bool phx__take_push(struct client *c)
{
    struct pclient *pc = phx__pc(c);
    uint64_t now = loop_now(c->e->w->loop);

    pc->tokens += (double)(now - pc->refilled) * PUSH_RATE / 1000.0;
    if (pc->tokens > PUSH_RATE)
        pc->tokens = PUSH_RATE;
    pc->refilled = now;
    if (pc->tokens < 1.0)
        return false;
    pc->tokens -= 1.0;
    return true;
}

struct pclient *phx__pc_new(struct client *c, enum phx_vsn vsn)
{
    struct pclient *pc = xcalloc(1, sizeof(*pc));

    pc->c = c;
    pc->vsn = vsn;
    pc->tokens = PUSH_RATE;
    wheel_timer_init(&pc->beat, on_beat);
    return pc;
}

unsigned phx__proto_of(enum phx_vsn vsn)
{
    return vsn == PHX_VSN_2 ? proto_v2 : proto_v1;
}

/* ---- replies ---- */

static void send_buf(struct client *c, struct buf *b)
{
    frame_send(c, frame_text(b));
}

static void reply_raw(struct client *c, const char *join_ref, const char *ref, const char *topic,
                      bool ok, const struct buf *response)
{
    struct buf b = {0};

    phx_encode_reply(&b, phx__pc(c)->vsn, join_ref, ref, topic, ok, response->data, response->len);
    send_buf(c, &b);
}

/* A reply's response into r: {} when ok, else {"reason": why}. */
static void reply_body(struct buf *r, bool ok, const char *why)
{
    if (ok) {
        buf_append_str(r, "{}");
        return;
    }
    buf_append_str(r, "{\"reason\":");
    json_append_cstr(r, why);
    buf_append_str(r, "}");
}

/* ok {} or error {"reason": why} to the decoded push m. */
void phx__reply(struct client *c, const struct phx_msg *m, bool ok, const char *why)
{
    struct buf r = {0};

    reply_body(&r, ok, why);
    reply_raw(c, m->has_join_ref ? m->join_ref : NULL, m->has_ref ? m->ref : NULL, m->topic, ok,
              &r);
    buf_release(&r);
}

/* The same for the push a channel answers (its join or a track). */
void phx__reply_chan(struct client *c, struct chan *ch, bool ok, const char *why)
{
    struct buf r = {0};

    reply_body(&r, ok, why);
    reply_raw(c, ch->has_join_ref ? ch->join_ref : NULL, ch->has_push_ref ? ch->push_ref : NULL,
              ch->topic, ok, &r);
    buf_release(&r);
}

static void send_close(struct client *c, const struct chan *ch)
{
    struct buf b = {0};

    phx_encode_close(&b, phx__pc(c)->vsn, ch->has_join_ref ? ch->join_ref : NULL, ch->topic);
    send_buf(c, &b);
}

/* ---- metas ---- */

/* A fresh phx_ref for ch: "<boot>.<connection>.<n>", unique per node,
 * start, connection and change: n counts the socket's changes, not the
 * channel's, so a channel joined again (a phx_join on its topic replaces
 * it) never repeats the ref its predecessor showed, which a client's
 * syncDiff would take for the meta that leaves. */
void phx__new_phx_ref(struct client *c, struct chan *ch)
{
    snprintf(ch->phx_ref, sizeof(ch->phx_ref), "%08" PRIx32 ".%" PRIx64 ".%x", phx__boot,
             client_conn_id(c), ++phx__pc(c)->metas_made);
}

/* The member metadata of c's connection in ch: {"~metas":{"<sid>":meta}},
 * meta being ch's meta object with its phx_ref (and prev, when given). */
char *phx__member_meta(struct client *c, const struct chan *ch, const char *prev)
{
    struct buf b = {0};
    const char *m = ch->meta ? ch->meta : "{}";
    char *out;

    buf_append_str(&b, "{\"" ROOM_SESSION_VALUES "\":{");
    json_append_cstr(&b, client_sid(c));
    buf_append_str(&b, ":{\"phx_ref\":");
    json_append_cstr(&b, ch->phx_ref);
    if (prev) {
        buf_append_str(&b, ",\"phx_ref_prev\":");
        json_append_cstr(&b, prev);
    }
    if (strlen(m) > 2) {
        buf_append_str(&b, ",");
        buf_append_str(&b, m + 1);
    } else {
        buf_append_str(&b, "}");
    }
    buf_append_str(&b, "}}");
    out = xstrndup(b.data, b.len);
    buf_release(&b);
    return out;
}

/* ---- joining ---- */

/* Joins ch's room as a member; false (ch's error replied) when the engine
 * refuses at once. */
bool phx__member_join(struct client *c, struct chan *ch)
{
    char *meta;
    int r;

    phx__new_phx_ref(c, ch);
    meta = phx__member_meta(c, ch, NULL);
    r = engine__room_join(c, ch->room, meta, false, 0, 0, 0, ch->ref);
    if (r == -EALREADY) { /* a failed join's link, its answer still on the way */
        engine__room_unsubscribe(c, ch->room);
        r = engine__room_join(c, ch->room, meta, false, 0, 0, 0, ch->ref);
    }
    free(meta);
    if (r < 0) {
        phx__reply_chan(c, ch, false,
                        r == -EMLINK ? "this connection is in max-rooms-per-connection topics"
                                     : "this connection is in that room already");
        return false;
    }
    ch->member = r == 0;
    return r == 0;
}

/* Starts a channel that waited: a member join or a subscription. */
static void chan_start(struct client *c, struct chan *ch)
{
    bool member = !ch->supabase && client_uid(c)[0];

    ch->state = CH_JOINING;
    if (member) {
        if (!phx__member_join(c, ch))
            phx__chan_remove(phx__pc(c), ch);
        return;
    }
    engine__room_unsubscribe(c, ch->room); /* a failed join's link, if any */
    engine__room_stream(c, ch->room, NULL);
}

void phoenix__on_started(struct client *c)
{
    struct pclient *pc = phx__pc(c);

    loop_timer_start(c->e->w->loop, &pc->beat, session__keepalive_ms(c));
    for (unsigned i = 0; i < pc->nch; i++)
        if (pc->ch[i].state == CH_WAIT)
            chan_start(c, &pc->ch[i]);
}

/* Under auth = jwt, a token from a join or an access_token event: takes
 * it (a first one starts the session; a later one must name the same
 * user). NULL when fine, else the reason to reply. */
const char *phx__take_token(struct client *c, const char *tok)
{
    struct jwt_claims cl;

    if (!client__auth_jwt(c->e))
        return NULL; /* auth = none: tokens mean nothing */
    if (client__verify_token(c->e, tok, strlen(tok), &cl) < 0)
        return "unauthorized: the access token does not verify";
    if (c->authed && strcmp(cl.sub, client_uid(c)) != 0)
        return "unauthorized: a refreshed token must name the same user";
    client__take_token(c, &cl);
    return NULL;
}

/* The join's config: the presence key, broadcast.self, postgres_changes. */
struct join_cfg {
    const char *key; /* config.presence.key, NULL when absent or "" */
    const char *token;
    bool self;
    bool postgres; /* postgres_changes with entries */
    char *meta;    /* phoenix.js: params.meta, compact (cJSON_free) */
};

static void read_join(const cJSON *p, bool supabase, struct join_cfg *j)
{
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(p, "config");
    const cJSON *pres = cJSON_GetObjectItemCaseSensitive(cfg, "presence");
    const cJSON *cast = cJSON_GetObjectItemCaseSensitive(cfg, "broadcast");
    const cJSON *pg = cJSON_GetObjectItemCaseSensitive(cfg, "postgres_changes");
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(pres, "key");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(p, "meta");

    memset(j, 0, sizeof(*j));
    j->key = cJSON_IsString(key) && key->valuestring[0] ? key->valuestring : NULL;
    j->token = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "access_token"));
    j->self = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cast, "self"));
    j->postgres = cJSON_IsArray(pg) && cJSON_GetArraySize(pg) > 0;
    if (!supabase && cJSON_IsObject(meta))
        j->meta = cJSON_PrintUnformatted(meta);
}

/* Why c may not join as j asks, or NULL (the presence key, the token). */
static const char *join_refusal(struct client *c, const struct join_cfg *j)
{
    const char *why;

    if (j->postgres)
        return "postgres_changes not supported: presenced serves presence and broadcast only";
    if (j->token && (why = phx__take_token(c, j->token)) != NULL)
        return why;
    if (client__auth_jwt(c->e) && !c->authed)
        return "unauthorized: connect with a token (params.token, authToken or access_token)";
    if (j->meta && strlen(j->meta) > META_BYTES)
        return "meta is over 1024 bytes";
    if (!j->key)
        return NULL;
    if (!room_id_valid(j->key))
        return "the presence key must be 1-128 of A-Z a-z 0-9 - _ . ~ : @";
    if (client_uid(c)[0] && strcmp(client_uid(c), j->key) != 0)
        return "the presence key must be this connection's user";
    return NULL;
}

/* Ends ch: its membership or subscription goes, phx_close is sent. */
static void chan_end(struct client *c, struct chan *ch)
{
    if (ch->state != CH_WAIT) {
        if (ch->member)
            engine__room_leave(c, ch->room, "");
        else
            engine__room_unsubscribe(c, ch->room);
    }
    send_close(c, ch);
    phx__chan_remove(phx__pc(c), ch);
}

static void ev_join(struct client *c, const struct phx_msg *m, const cJSON *p)
{
    struct pclient *pc = phx__pc(c);
    const char *name = phx_topic_realtime_name(m->topic), *why;
    struct join_cfg j;
    struct chan *ch;

    if (!name)
        name = m->topic;
    if (!room_id_valid(name)) {
        phx__reply(c, m, false, "the topic must be a room id: 1-128 of A-Z a-z 0-9 - _ . ~ : @");
        return;
    }
    if ((ch = phx__chan_by_topic(pc, m->topic)) != NULL)
        chan_end(c, ch); /* a duplicate join replaces the channel, as Phoenix's does */
    if ((ch = chan_by_room(pc, name, strlen(name))) != NULL) {
        phx__reply(c, m, false, "this connection has joined that room under another topic");
        return;
    }
    if (pc->nch >= CHANNELS_MAX) {
        phx__reply(c, m, false, "too many topics on this connection");
        return;
    }
    read_join(p, name != m->topic, &j);
    if ((why = join_refusal(c, &j)) != NULL) {
        phx__reply(c, m, false, why);
        cJSON_free(j.meta);
        return;
    }
    if (j.key && !client_uid(c)[0] && !client__auth_jwt(c->e))
        client__start_as(c, j.key); /* auth = none: the key names the user */
    ch = chan_add(pc);
    snprintf(ch->topic, sizeof(ch->topic), "%s", m->topic);
    memcpy(ch->room, name, strlen(name) + 1); /* a valid room id fits */
    memcpy(ch->join_ref, m->join_ref, sizeof(ch->join_ref));
    memcpy(ch->push_ref, m->ref, sizeof(ch->push_ref));
    ch->has_join_ref = m->has_join_ref;
    ch->has_push_ref = m->has_ref;
    ch->supabase = name != m->topic;
    ch->self = j.self;
    ch->meta = j.meta;
    if (!client_uid(c)[0] || c->started)
        chan_start(c, ch); /* else on_started starts it */
}

static void ev_leave(struct client *c, const struct phx_msg *m, struct chan *ch)
{
    phx__reply(c, m, true, NULL);
    chan_end(c, ch);
}

/* ---- the event table ---- */

static void on_channel_event(struct client *c, const struct phx_msg *m, const cJSON *p)
{
    struct chan *ch = phx__chan_by_topic(phx__pc(c), m->topic);

    if (!ch || (m->has_join_ref && strcmp(m->join_ref, ch->join_ref) != 0)) {
        phx__reply(c, m, false, "unmatched topic");
        return;
    }
    if (strcmp(m->event, PHX_EV_LEAVE) == 0)
        ev_leave(c, m, ch);
    else if (strcmp(m->event, "access_token") == 0)
        phx__ev_access_token(c, m, p);
    else if (strcmp(m->event, "presence") == 0 && ch->supabase)
        phx__ev_presence(c, m, ch, p);
    else if (strcmp(m->event, "broadcast") == 0)
        phx__ev_broadcast(c, m, ch, p);
    else
        phx__reply(c, m, false,
                   "unknown event: presenced handles phx_leave, presence (track, "
                   "untrack), broadcast and access_token");
}

static void dispatch(struct client *c, const struct phx_msg *m)
{
    cJSON *p = cJSON_ParseWithLength(m->payload, m->payload_len);

    if (phx_is_heartbeat(m))
        phx__reply(c, m, true, NULL);
    else if (phx_topic_is_phoenix(m->topic))
        phx__reply(c, m, false, "unknown event on topic phoenix");
    else if (strcmp(m->event, PHX_EV_JOIN) == 0)
        ev_join(c, m, p);
    else
        on_channel_event(c, m, p);
    cJSON_Delete(p);
}

/* ---- what the engine sends ---- */

void phoenix__send(struct client *c, struct payload *f)
{
    struct phx_record r;
    struct chan *ch;

    if (phx__lp_record(c, f))
        return; /* a long-poll request or answer relayed between workers */
    if (!phx_record_read(f, &r)) {
        if (!phx__lp_push(c, f))
            client__ws_send(c, f);
        return;
    }
    if (r.kind != 'E' || !c->x || !c->x->adata || !(ch = chan_by_ref(phx__pc(c), r.ref)))
        return; /* an ack, or an answer for a channel that went */
    if (ch->state == CH_JOINING) {
        phx__reply_chan(c, ch, false, r.message);
        phx__chan_remove(phx__pc(c), ch);
    } else if (ch->state == CH_TRACKING) {
        phx__reply_chan(c, ch, false, r.message);
        ch->member = false;
        engine__room_unsubscribe(c, ch->room); /* the failed join's link */
        engine__room_stream(c, ch->room, NULL);
        ch->state = CH_RESYNC;
    }
    /* A failed update of a tracked meta keeps the meta subscribers see. */
}

/* Where a room frame of ours names its room and event (see
 * phoenix_encode.h): the text after the room's closing quote in *rest. */
struct room_frame {
    const char *room, *event, *rest;
    size_t room_len, event_len;
};

static bool parse_room_frame(enum phx_vsn vsn, const char *p, size_t n, struct room_frame *rf)
{
    static const char v2[] = "[null,null,\"", v1[] = "{\"topic\":\"";
    const char *head = vsn == PHX_VSN_2 ? v2 : v1, *q, *e;
    size_t hn = strlen(head);

    if (n < hn || memcmp(p, head, hn) != 0)
        return false;
    rf->room = p + hn;
    q = memchr(rf->room, '"', n - hn); /* room ids need no escapes */
    if (!q)
        return false;
    rf->room_len = (size_t)(q - rf->room);
    rf->rest = q;
    /* V2: ","event", V1: ","event":"event" */
    e = q + (vsn == PHX_VSN_2 ? 3 : 11);
    if (e >= p + n)
        return false;
    q = memchr(e, '"', (size_t)(p + n - e));
    if (!q)
        return false;
    rf->event = e;
    rf->event_len = (size_t)(q - e);
    return true;
}

static bool is_event(const struct room_frame *rf, const char *name)
{
    return rf->event_len == strlen(name) && memcmp(rf->event, name, rf->event_len) == 0;
}

/* f for ch: its topic for the room, and on a presence_state (stamp) its
 * join_ref. A new frame reference. */
static struct payload *for_channel(enum phx_vsn vsn, const struct chan *ch,
                                   const struct room_frame *rf, const char *p, size_t n, bool stamp)
{
    struct buf b = {0};

    if (vsn == PHX_VSN_2) {
        buf_append_str(&b, "[");
        if (stamp && ch->has_join_ref)
            json_append_cstr(&b, ch->join_ref);
        else
            buf_append_str(&b, "null");
        buf_append_str(&b, ",null,");
    } else {
        buf_append_str(&b, "{\"topic\":");
    }
    json_append_cstr(&b, ch->topic);
    buf_append(&b, rf->rest + 1, (size_t)(p + n - rf->rest - 1));
    return frame_text(&b);
}

void phoenix__send_room(struct client *c, struct payload *f, bool bulk)
{
    struct pclient *pc = phx__pc(c);
    struct room_frame rf;
    struct payload *own;
    struct chan *ch;
    const char *p;
    size_t n;
    bool state;

    frame_json(f, &p, &n);
    if (!parse_room_frame(pc->vsn, p, n, &rf) || !(ch = chan_by_room(pc, rf.room, rf.room_len)))
        return; /* not a room this socket holds any more */
    state = is_event(&rf, "presence_state");
    if (state && (ch->state == CH_JOINING || ch->state == CH_TRACKING))
        phx__reply_chan(c, ch, true, NULL); /* the reply before the state */
    if (state && ch->state != CH_WAIT)
        ch->state = CH_JOINED;
    if (pc->vsn == PHX_VSN_2 && ch->supabase && is_event(&rf, "broadcast") &&
        phx__send_binary_cast(c, ch, p, n))
        return; /* a binary payload, as realtime-js's binary frame */
    if (ch->topic[rf.room_len] == '\0' && (!state || pc->vsn == PHX_VSN_1)) {
        own = payload_ref(f); /* the shared frame names the socket's topic */
    } else {
        own = for_channel(pc->vsn, ch, &rf, p, n, state);
    }
    if (!phx__lp_push(c, own)) { /* else in a long-poll session's queue */
        if (bulk)
            wsconn_send_payload_bulk(c->ws, own);
        else
            wsconn_send_payload(c->ws, own);
    }
    payload_unref(own);
}

/* ---- the WebSocket application ---- */

static void on_open(struct wsconn *ws)
{
    struct client *c = wsconn_app_data(ws);
    struct pclient *pc = phx__pc(c);
    struct jwt_claims cl;

    wsconn_set_user_data(ws, c);
    client__open(c, ws, c->proto);
    if (pc->token && !c->authed &&
        client__verify_token(c->e, pc->token, strlen(pc->token), &cl) == 0)
        client__take_token(c, &cl);
    free(pc->token);
    pc->token = NULL;
}

void phx__on_text(struct client *c, const char *p, size_t n)
{
    struct phx_msg m;
    int rc;

    if (c->started)
        session__heartbeat(c, ""); /* throttled there */
    /* A frame that does not decode has no topic or ref to answer: Phoenix
     * drops such a connection, and so does presenced. */
    if ((rc = phx_decode(phx__pc(c)->vsn, p, n, &m)) < 0) {
        client__ws_close(c, 1007, phx_strerror(rc));
        return;
    }
    dispatch(c, &m);
}

static void on_message(struct wsconn *ws, bool binary, const char *p, size_t n)
{
    struct client *c = wsconn_user_data(ws);

    if (!binary) {
        phx__on_text(c, p, n);
        return;
    }
    if (c->started)
        session__heartbeat(c, "");
    if (phx__pc(c)->vsn == PHX_VSN_2)
        phx__on_binary(c, p, n);
    else
        client__ws_close(c, 1003, "binary frames need vsn 2.0.0");
}

static const struct wsconn_app phoenix_ws = {
    .on_open = on_open,
    .on_message = on_message,
    .on_close = client__on_ws_close,
};

/* ---- the upgrade ---- */

/* Decodes unpadded base64 or base64url (p, n) into a new string (free it),
 * or NULL when it is not that, decodes past TOKEN_MAX or holds a NUL. */
static char *b64_token(const char *p, size_t n)
{
    char *out = xmalloc(B64_DECODED_MAX(n) + 1);
    ssize_t len = b64_decode(p, n, out, TOKEN_MAX, B64_STD | B64_URL | B64_NOPAD | B64_LAX);

    if (len < 0 || memchr(out, '\0', (size_t)len)) {
        free(out);
        return NULL;
    }
    out[len] = '\0';
    return out;
}

/* phoenix.js's authToken: the "base64url.bearer.phx.<base64>" entry of
 * Sec-WebSocket-Protocol, decoded (free it); NULL when there is none.
 * *bad is set when there is one that does not decode. */
static char *bearer_token(const struct http_request *req, bool *bad)
{
    const struct http_header *h = http_header_get(req, "Sec-WebSocket-Protocol");
    size_t pn = strlen(BEARER_PREFIX);

    *bad = false;
    for (size_t i = 0; h && i < h->value_len; i++) {
        size_t end = i;
        while (end < h->value_len && h->value[end] != ',')
            end++;
        while (i < end && h->value[i] == ' ')
            i++;
        if (end - i > pn && memcmp(h->value + i, BEARER_PREFIX, pn) == 0) {
            size_t len = end - i - pn;
            char *tok;
            while (len > 0 && h->value[i + pn + len - 1] == ' ')
                len--;
            tok = b64_token(h->value + i + pn, len);
            *bad = tok == NULL;
            return tok;
        }
        i = end;
    }
    return NULL;
}

/* Supabase's apikey parameter when it is a token that verifies (its
 * anon or service key is one; realtime uses it when a join carries no
 * access_token), as a copy; NULL otherwise: an apikey is accepted
 * whatever it is. */
static char *apikey_token(struct engine *e, const struct http_request *req)
{
    char *v = xmalloc(TOKEN_MAX + 1);
    size_t pos = 0;
    ssize_t n = http_query_next(req->query, req->query_len, "apikey", &pos, v, TOKEN_MAX + 1);
    struct jwt_claims cl;

    if (n <= 0 || (size_t)n != strlen(v) || client__verify_token(e, v, (size_t)n, &cl) < 0) {
        free(v);
        return NULL;
    }
    return v;
}

bool phx__query_vsn(const struct http_request *req, enum phx_vsn *vsn)
{
    char v[16];
    size_t pos = 0;
    ssize_t n = http_query_next(req->query, req->query_len, "vsn", &pos, v, sizeof(v));

    return phx_vsn_parse(n >= 0 ? v : NULL, vsn) == 0;
}

/* GET /socket/websocket and /realtime/v1/websocket. */
static void get_socket(struct conn *conn, const struct http_request *req, struct net_ctx *nc)
{
    struct engine *e = nc->app;
    struct pclient *pc;
    struct jwt_claims cl;
    struct client *c;
    enum phx_vsn vsn;
    char *tok;
    bool bad;

    if (!phx__query_vsn(req, &vsn)) {
        httpd_error(conn, 400, "bad_vsn", "vsn must be 2.0.0 or 1.0.0");
        return;
    }
    tok = bearer_token(req, &bad);
    if (bad || (tok && client__auth_jwt(e) && client__verify_token(e, tok, strlen(tok), &cl) < 0)) {
        free(tok);
        httpd_error(conn, 401, "unauthorized", "the bearer token does not verify");
        return;
    }
    if (!tok && client__auth_jwt(e))
        tok = apikey_token(e, req);
    c = engine_client_prepare(nc->worker, conn, false, req); /* ?user=, ?token= */
    if (!c) {
        free(tok);
        return;
    }
    pc = phx__pc_new(c, vsn);
    pc->token = tok;
    client_x(c)->adata = pc;
    /* The protocol before the open: a failed upgrade frees c, and with it
     * pc, through this adapter's release. */
    c->proto = (vsn == PHX_VSN_2 ? proto_v2 : proto_v1) & 3u;
    if (!wsconn_upgrade(conn, req, &ws_opts, &phoenix_ws, c))
        engine_client_discard(c);
}

static const struct route routes[] = {
    {"GET", "/socket/websocket", get_socket},
    {"GET", "/realtime/v1/websocket", get_socket},
    {"GET", "/socket/longpoll", phx__lp_on_request},
    {"POST", "/socket/longpoll", phx__lp_on_request},
    {"OPTIONS", "/socket/longpoll", phx__lp_on_request},
};

int phoenix_register(const struct config *cfg, char *err, size_t errlen)
{
    if (strcmp(cfg->phoenix, "on") != 0)
        return 0;
    if (adapter_count() + 2 > ADAPTER_MAX) {
        snprintf(err, errlen, "phoenix: no room for two more protocol adapters");
        return -1;
    }
    if (getrandom(&phx__boot, sizeof(phx__boot), 0) != (ssize_t)sizeof(phx__boot))
        phx__boot = 1;
    phx__lp_init();
    ws_opts = (struct wsconn_opts){
        .max_message = (size_t)cfg->ws_max_message_bytes,
        .ping_interval_ms = (uint64_t)cfg->ws_ping_interval_ms,
        .pong_timeout_ms = (uint64_t)cfg->ws_pong_timeout_ms,
        .allowed_origins = cfg->ws_allowed_origins,
        .subprotocols = subprotocols,
        .close_timeout_ms = 2000,
    };
    proto_v2 = adapter_register(&phoenix_adapter_v2);
    proto_v1 = adapter_register(&phoenix_adapter_v1);
    phoenix_routes = (struct route_list)ROUTE_LIST(routes);
    return 0;
}
