/* SPDX-License-Identifier: MIT */
/*
 * phoenix_msg.h - the wire codec of Phoenix Channels (phoenix.js 1.8,
 * @supabase/realtime-js 2.x): one text frame in, one struct out, and the
 * frames a server sends, for both of Phoenix's JSON serializers.
 *
 *   vsn 2.0.0  [join_ref, ref, topic, event, payload]         (an array of 5)
 *   vsn 1.0.0  {"topic":t,"event":e,"payload":p,"ref":r,"join_ref":j}
 *
 * Inbound, refs are strings or null (phoenix.js sends its counters as
 * strings), topic and event strings, payload an object. A 1.0.0 frame
 * needs topic, event, payload and ref (null is fine) and may leave out
 * join_ref, as Phoenix's V1 serializer has it; other members are ignored,
 * and a known member given twice is refused. Outbound, 1.0.0 frames carry
 * no join_ref (Phoenix's encode_v1_fields_only): {topic,event,payload,ref}.
 *
 * The decoder first holds the whole frame to json_check() (RFC 8259, UTF-8,
 * no \u0000), then walks the checked text itself: escapes in refs, topic
 * and event are decoded into fixed arrays of struct phx_msg, and the
 * payload is handed back as the span of its text, not re-serialised, for
 * the caller to parse (cJSON) or forward. The encoders append to a struct
 * buf, escape strings with json_append_cstr() and copy payloads as given.
 *
 * Pure and thread-safe: no I/O, no global state, no logging, and the
 * decoder allocates nothing (the encoders grow only the caller's buffer,
 * aborting on out-of-memory like x*alloc()). Not here: the WebSocket and
 * long-poll transports, the binary (kind 3/4) broadcast frames of
 * realtime-js, what each event means, and the frame size limit, which is
 * the caller's (the decoder reads exactly the n bytes it is given).
 */
#ifndef PHOENIX_MSG_H
#define PHOENIX_MSG_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "util.h"

/* Bounds on decoded strings, in bytes after escapes are decoded, without
 * the NUL. They size the arrays of struct phx_msg, so a message lives on
 * the stack. Topics are "room:<id>" or "realtime:<channel name>" and end up
 * in Redis keys and channels, so 255 bounds those too. Events are the
 * protocol's short names (phx_join, heartbeat, access_token) or an
 * application's. phoenix.js and realtime-js refs are decimal counters, at
 * most 16 digits in a JavaScript number; 64 also fits a UUID. */
#define PHX_TOPIC_MAX 255
#define PHX_EVENT_MAX 64
#define PHX_REF_MAX   64

/* Topics and events the protocol itself defines. */
#define PHX_TOPIC_PHOENIX  "phoenix"   /* the socket's own topic: heartbeats */
#define PHX_TOPIC_REALTIME "realtime:" /* the prefix of every Supabase channel */
#define PHX_EV_HEARTBEAT   "heartbeat"
#define PHX_EV_JOIN        "phx_join"
#define PHX_EV_LEAVE       "phx_leave"
#define PHX_EV_REPLY       "phx_reply"
#define PHX_EV_CLOSE       "phx_close" /* the server ended the channel */
#define PHX_EV_ERROR       "phx_error" /* the channel crashed: the client rejoins */

/* Errors (negative, below -PS_EBASE). phx_decode() checks from PHX_E_JSON
 * to PHX_E_PAYLOAD in this order and returns the first that fails, so the
 * fields are checked join_ref, ref, topic, event, payload, each for its
 * type, then its length. phx_strerror() words each for the client. */
enum phx_error {
    PHX_E_JSON = -(PS_EBASE + 1200),          /* not one JSON value (json_check) */
    PHX_E_UTF8 = -(PS_EBASE + 1201),          /* invalid UTF-8, or a lone surrogate escape */
    PHX_E_NUL = -(PS_EBASE + 1202),           /* \u0000 in a string */
    PHX_E_SHAPE = -(PS_EBASE + 1203),         /* not the vsn's array or object (above) */
    PHX_E_JOIN_REF = -(PS_EBASE + 1204),      /* join_ref neither a string nor null */
    PHX_E_JOIN_REF_LONG = -(PS_EBASE + 1205), /* join_ref over PHX_REF_MAX bytes */
    PHX_E_REF = -(PS_EBASE + 1206),           /* ref neither a string nor null */
    PHX_E_REF_LONG = -(PS_EBASE + 1207),      /* ref over PHX_REF_MAX bytes */
    PHX_E_TOPIC = -(PS_EBASE + 1208),         /* topic not a string */
    PHX_E_TOPIC_LONG = -(PS_EBASE + 1209),    /* topic over PHX_TOPIC_MAX bytes */
    PHX_E_EVENT = -(PS_EBASE + 1210),         /* event not a string */
    PHX_E_EVENT_LONG = -(PS_EBASE + 1211),    /* event over PHX_EVENT_MAX bytes */
    PHX_E_PAYLOAD = -(PS_EBASE + 1212),       /* payload not a JSON object */
    PHX_E_VSN = -(PS_EBASE + 1213),           /* vsn neither 1.0.0 nor 2.0.0 */
};

/* The serializer of a socket, chosen once at connect. */
enum phx_vsn {
    PHX_VSN_1 = 1, /* "1.0.0": objects */
    PHX_VSN_2 = 2, /* "2.0.0": arrays */
};

/* One decoded inbound frame; the caller's storage (a stack variable will
 * do). The strings are decoded, NUL-terminated and valid UTF-8 with no NUL
 * inside, so strlen() equals their _len. A null ref is "" with its has_
 * false, which tells it from a present "". */
struct phx_msg {
    char join_ref[PHX_REF_MAX + 1]; /* "" when null or absent */
    char ref[PHX_REF_MAX + 1];      /* "" when null */
    char topic[PHX_TOPIC_MAX + 1];  /* may be "": what a topic means is the caller's */
    char event[PHX_EVENT_MAX + 1];  /* ditto */
    size_t join_ref_len, ref_len, topic_len, event_len;
    bool has_join_ref;   /* false for null, or absent in 1.0.0 */
    bool has_ref;        /* false for null */
    const char *payload; /* the object's text, '{' to '}', inside the frame: borrowed */
    size_t payload_len;  /* bytes of it */
};

/* ---- decoding ---- */

/* Decodes the text frame (p, n) written with serializer vsn into *m. The
 * payload points into (p, n), valid as long as those bytes are; nothing
 * else refers to the frame. p may be NULL when n is 0. Returns 0, or a
 * negative enum phx_error (PHX_E_VSN for a vsn not in enum phx_vsn); on
 * error *m is zero-filled. No allocation. */
int phx_decode(enum phx_vsn vsn, const char *p, size_t n, struct phx_msg *m);

/* ---- vsn ---- */

/* Reads the vsn query parameter of a connect, already percent-decoded:
 * "2.0.0" or "1.0.0", exactly. NULL (no vsn parameter) is 1.0.0, as in
 * Phoenix's socket.ex (params["vsn"] || "1.0.0"): phoenix.js and
 * realtime-js always send vsn, so only old or hand-written clients leave
 * it out, and those speak 1.0.0. Phoenix itself takes any "~> 2.0.0"
 * (2.0.7); no client sends one, so anything else, "" included, is refused
 * (a 400 at connect, scaleout.md X1). Returns 0 and sets *vsn, or
 * PHX_E_VSN leaving *vsn untouched. */
int phx_vsn_parse(const char *value, enum phx_vsn *vsn);
/* "1.0.0" or "2.0.0"; "?" for a value not in enum phx_vsn. Static. */
const char *phx_vsn_name(enum phx_vsn vsn);

/* ---- encoding ---- */

/* Each appends one frame to b, after what b holds already. vsn must be in
 * enum phx_vsn (asserted). join_ref and ref may be NULL, written as null;
 * 1.0.0 frames carry no join_ref, so it is ignored there. topic and event
 * are required C strings, JSON-escaped (invalid UTF-8 becomes U+FFFD). The
 * payload (payload, n) is JSON text copied as it is, unchecked: it must be
 * one object, or any value for a reply's response; NULL writes {}. */
void phx_encode(struct buf *b, enum phx_vsn vsn, const char *join_ref, const char *ref,
                const char *topic, const char *event, const char *payload, size_t n);

/* A phx_reply: payload {"status":"ok"|"error","response":<response>}, the
 * request's join_ref and ref echoed (NULL: null). */
void phx_encode_reply(struct buf *b, enum phx_vsn vsn, const char *join_ref, const char *ref,
                      const char *topic, bool ok, const char *response, size_t n);
/* Ditto, answering the decoded request req: its join_ref, ref and topic. */
void phx_encode_reply_to(struct buf *b, enum phx_vsn vsn, const struct phx_msg *req, bool ok,
                         const char *response, size_t n);

/* A push from the server: ref null. join_ref is the channel's current one
 * (presence_state must carry it, or the client drops the frame as
 * outdated) or NULL (broadcasts such as presence_diff). */
void phx_encode_push(struct buf *b, enum phx_vsn vsn, const char *join_ref, const char *topic,
                     const char *event, const char *payload, size_t n);

/* phx_close (the channel is over: after a phx_leave's reply, or when the
 * server ends it) and phx_error (the channel crashed; the client rejoins
 * with back-off, so never for an ordinary refusal, which is an error
 * reply): join_ref and ref are both the channel's join_ref, payload {},
 * as Phoenix sends them. */
void phx_encode_close(struct buf *b, enum phx_vsn vsn, const char *join_ref, const char *topic);
void phx_encode_error(struct buf *b, enum phx_vsn vsn, const char *join_ref, const char *topic);

/* ---- topics ---- */

/* True when m is a heartbeat: topic "phoenix", event "heartbeat". */
bool phx_is_heartbeat(const struct phx_msg *m);
/* True when topic is "phoenix", the socket's own (no channel is joined on
 * it). False for NULL. */
bool phx_topic_is_phoenix(const char *topic);
/* The rest of topic after prefix, or NULL when topic does not start with
 * prefix or nothing follows it (an empty name names nothing). Phoenix
 * topics are "<prefix>:<subtopic>" by convention only, so the caller
 * gives the prefix with its ':' ("room:"). Points into topic. NULL for a
 * NULL argument. */
const char *phx_topic_after(const char *topic, const char *prefix);
/* Ditto for PHX_TOPIC_REALTIME: the Supabase channel name of
 * "realtime:<name>", or NULL for any other topic. */
const char *phx_topic_realtime_name(const char *topic);

/* A short static message for err, fit to show a client ("topic must be a
 * string"); "ok" for 0 and a generic one for codes not above. */
const char *phx_strerror(int err);

#endif
