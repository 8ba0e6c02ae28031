/* SPDX-License-Identifier: MIT */
/*
 * phoenix_internal.h - what the Phoenix adapter's files share: a socket's
 * state (struct pclient in c->x->adata, its channels) and the functions
 * phoenix.c (the socket, its channels, joins and delivery) gives
 * phoenix_supabase.c (track, untrack, broadcast, access_token, the binary
 * push) and back. Not an interface for anything outside src/proto/phoenix/.
 */
#ifndef PHOENIX_INTERNAL_H
#define PHOENIX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "phoenix_msg.h"
#include "room.h"
#include "wheel.h"

struct client;
struct http_request;
struct lp;
struct payload;

#define CHANNELS_MAX  64    /* topics one socket may hold (and max-rooms-per-connection) */
#define PUSH_RATE     20    /* broadcasts and tracks per second per socket */
#define CAST_BYTES    32768 /* a broadcast's payload */
#define META_BYTES    1024  /* a tracked meta: the room core's metadata limit */
#define TOKEN_MAX     8192  /* a bearer token from the subprotocol */
#define BEARER_PREFIX "base64url.bearer.phx."

enum chan_state {
    CH_WAIT,     /* for the session: nothing sent yet */
    CH_JOINING,  /* the join's state comes: reply to the join */
    CH_TRACKING, /* a track's join: reply to the track push */
    CH_RESYNC,   /* a new subscription's state comes: no reply */
    CH_JOINED,
};

struct chan {
    char topic[PHX_TOPIC_MAX + 1];
    char room[ROOM_ID_MAX + 1];
    char join_ref[PHX_REF_MAX + 1];
    char push_ref[PHX_REF_MAX + 1]; /* the push the coming answer replies to */
    bool has_join_ref, has_push_ref;
    char ref[16]; /* the channel in the engine's refs: "c<serial>" */
    char phx_ref[48];
    enum chan_state state;
    bool supabase; /* a "realtime:" topic: join subscribes, track joins */
    bool member;   /* joined (or joining) the room as a member */
    bool self;     /* Supabase broadcast.self: the sender gets its own */
    char *meta;    /* the meta object joined or tracked, compact (cJSON_free) */
};

struct pclient {
    struct client *c;
    struct wheel_timer beat; /* keeps the session alive while the socket is open */
    enum phx_vsn vsn;
    char *token; /* a subprotocol bearer token until the open (free) */
    struct chan *ch;
    unsigned nch, cap;
    uint32_t serial;     /* channels made (their refs) */
    uint32_t metas_made; /* phx_refs made (phx__new_phx_ref()) */
    double tokens;       /* the push bucket */
    uint64_t refilled;   /* loop ms */
    struct lp *lp;       /* a long-poll session or relay (phoenix_longpoll.c), else NULL */
};

extern uint32_t phx__boot; /* in phx_refs and socket tags: differs per start and node */

/* ---- phoenix.c ---- */

struct pclient *phx__pc(struct client *c); /* c's state (a Phoenix socket's) */
struct chan *phx__chan_by_topic(struct pclient *pc, const char *topic); /* NULL: none */
void phx__chan_remove(struct pclient *pc, struct chan *ch);             /* ch is invalid after */
/* A reply to the decoded push m: ok {} or error {"reason": why}. */
void phx__reply(struct client *c, const struct phx_msg *m, bool ok, const char *why);
/* The same for the push ch answers (its join, or a track). */
void phx__reply_chan(struct client *c, struct chan *ch, bool ok, const char *why);
/* Takes one push from c's bucket (PUSH_RATE a second); false when empty. */
bool phx__take_push(struct client *c);
/* Under auth = jwt, a token from a join or an access_token event, taken:
 * NULL, or the reason to reply. Under auth = none: NULL. */
const char *phx__take_token(struct client *c, const char *tok);
/* A fresh phx_ref for ch's meta. */
void phx__new_phx_ref(struct client *c, struct chan *ch);
/* c's member metadata in ch: {"~metas":{"<sid>":meta}} with its phx_ref
 * (and phx_ref_prev when prev is not NULL); free() it. */
char *phx__member_meta(struct client *c, const struct chan *ch, const char *prev);
/* Joins ch's room as a member; false (the error replied to ch's push)
 * when the engine refuses at once. */
bool phx__member_join(struct client *c, struct chan *ch);

/* A new socket state for c with serializer vsn (the caller sets adata). */
struct pclient *phx__pc_new(struct client *c, enum phx_vsn vsn);
/* The protocol id of serializer vsn's adapter. */
unsigned phx__proto_of(enum phx_vsn vsn);
/* The serializer from ?vsn= (1.0.0 without one); false when it names another. */
bool phx__query_vsn(const struct http_request *req, enum phx_vsn *vsn);
/* One text message of c, as a WebSocket text frame is handled (an
 * undecodable one closes c with 1007). */
void phx__on_text(struct client *c, const char *p, size_t n);

/* ---- phoenix_longpoll.c ---- */

struct conn;
struct net_ctx;
/* The route of GET, POST and OPTIONS /socket/longpoll. */
void phx__lp_on_request(struct conn *conn, const struct http_request *req, struct net_ctx *nc);
/* Draws the token key; before the workers start. */
void phx__lp_init(void);
/* f (a frame for c) queued for c's next poll when c is a long-poll
 * session: true then (or when it is a relay client's), false when c is a
 * WebSocket's. */
bool phx__lp_push(struct client *c, struct payload *f);
/* A relayed request or answer (a record "\x01Q" or "\x01H") for c: true
 * when f was one (handled). */
bool phx__lp_record(struct client *c, const struct payload *f);
/* Frees a session's or relay's state (NULL is a no-op). */
void phx__lp_release(struct lp *lp);

/* ---- phoenix_supabase.c ---- */

/* The presence event (track, untrack), broadcast and access_token on a
 * joined channel ch (access_token needs none), p the parsed payload (may
 * be NULL when it did not parse). */
void phx__ev_presence(struct client *c, const struct phx_msg *m, struct chan *ch, const cJSON *p);
void phx__ev_broadcast(struct client *c, const struct phx_msg *m, struct chan *ch, const cJSON *p);
void phx__ev_access_token(struct client *c, const struct phx_msg *m, const cJSON *p);
/* realtime-js's binary broadcast push (vsn 2.0.0) of n bytes at p. */
void phx__on_binary(struct client *c, const char *p, size_t n);
/* Sends the shared broadcast frame (p, n: vsn 2.0.0 text) to ch, a
 * realtime: channel of c's, as realtime-js's binary frame when it carries
 * a binary payload (phoenix_encode.h): true when that is done (or the
 * frame dropped), false when the text frame is for c as it is. */
bool phx__send_binary_cast(struct client *c, const struct chan *ch, const char *p, size_t n);

#endif
