/* SPDX-License-Identifier: MIT */
/*
 * webhook.h - the pure half of presenced's webhooks: bodies, signatures,
 * secrets, event ids and the retry schedule, in the two formats presenced
 * sends. The HTTP client, the queues, the endpoint table and the metrics
 * are the caller's; this module only computes.
 *
 * ---- Pusher format (Pusher apps) ----
 *
 * One POST per batch of at most WEBHOOK_PUSHER_BATCH_MAX events; the caller
 * flushes when webhook_batch_add() says the batch is full or
 * webhook_batch_due() says its first event waited WEBHOOK_PUSHER_BATCH_MS
 * (Pusher batches "for a maximum of 250ms or until 20 webhook events").
 * The body, as Pusher and soketi send it (pusher.com/docs/channels/
 * server_api/webhooks, soketi src/webhook-sender.ts):
 *   {"time_ms":1614265330123,"events":[
 *    {"name":"channel_occupied","channel":"presence-a"},
 *    {"name":"channel_vacated","channel":"presence-a"},
 *    {"name":"member_added","channel":"presence-a","user_id":"42"},
 *    {"name":"member_removed","channel":"presence-a","user_id":"42"},
 *    {"name":"client_event","channel":"presence-a","event":"client-x",
 *     "data":"{\"a\":1}","socket_id":"1.2","user_id":"42"}]}
 * time_ms is when the request was made (the flush). client_event's data is
 * the event's data as a JSON string, socket_id the sender's, and user_id
 * is sent on presence channels only. Headers: X-Pusher-Key = the app key,
 * X-Pusher-Signature = webhook_pusher_sign() of the exact body. Pusher's
 * format has no event id, version or seq: its consumers dedupe nothing,
 * and presenced adds no fields to it.
 *
 * ---- Standard Webhooks format (native side) ----
 *
 * One POST per event (www.standardwebhooks.com, spec/standard-webhooks.md
 * of standard-webhooks/standard-webhooks). The body, webhook_event_body():
 *   {"type":"user.online","timestamp":"2021-02-25T15:02:10.123Z",
 *    "data":{"id":"msg_...","user":"u1","version":7}}
 *   user.online, user.offline   data {"id","user","version"}
 *   room.occupied, room.vacated data {"id","room","epoch","seq"}
 *   member.joined, member.left  data {"id","room","epoch","seq","user"}
 * timestamp is when the event happened (RFC 3339, UTC, milliseconds), not
 * when it was sent. id is the event id, also sent as webhook-id, the same
 * on every retry: consumers dedupe on it. version is the user's presence
 * version (presence.h: strictly increasing per user); (epoch, seq) is the
 * room's sequence at this change (room.h: seq increases by one per delta
 * within an epoch, and a re-created room has another epoch): consumers
 * order on them and drop what is older than what they hold.
 * Headers: webhook-id = the event id, webhook-timestamp = the attempt's
 * unix seconds (a retry gets a fresh one), webhook-signature =
 * webhook_sign(): "v1," base64(HMAC-SHA256(key, id "." timestamp "." body)).
 *
 * The configured secret (webhook-secret) is "whsec_" followed by the
 * standard base64 of the key, as the spec serialises it. The prefix may be
 * left out: the rest is still base64, as every Standard Webhooks library
 * reads it (their tests: "verification works with and without signature
 * prefix"), so the string a consumer pastes into its library verifies.
 * Any other string is refused, never used as raw bytes, because no
 * consumer library would derive the same key from it; a caller that holds
 * raw key bytes uses webhook_key_raw() (the libraries' NewWebhookRaw).
 *
 * ---- Retries ----
 *
 * webhook_next_delay_ms() gives the delay before each attempt, and
 * webhook_outcome_of() what an HTTP result means; both are written out
 * at their declarations with the reasons for the numbers.
 *
 * Pure and thread-safe: no I/O, no clock (times are parameters), no
 * randomness (the caller passes it), no global state, no logging. It
 * allocates only through the struct buf it is given, and aborts on
 * out-of-memory like x*alloc() (and if libcrypto's HMAC cannot run).
 */
#ifndef WEBHOOK_H
#define WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "util.h"

#define WEBHOOK_PUSHER_BATCH_MAX 20u  /* events in one Pusher request */
#define WEBHOOK_PUSHER_BATCH_MS  250u /* the longest an event waits for its batch */
#define WEBHOOK_HEX_LEN          64u  /* hex digits of X-Pusher-Signature */
#define WEBHOOK_SIG_LEN          47u  /* "v1," and the base64 of 32 bytes */
#define WEBHOOK_KEY_MIN          24u  /* key bytes: the spec's "at least 24 bytes" */
#define WEBHOOK_KEY_MAX          64u  /* key bytes: its "512 [bits] maximum" */
#define WEBHOOK_SECRET_PREFIX    "whsec_"
#define WEBHOOK_ID_MAX           64u /* bytes in a webhook-id (without the NUL) */
#define WEBHOOK_EVENT_ID_LEN     37u /* webhook_event_id(): "msg_" 16 "_" 16 hex */
#define WEBHOOK_TOLERANCE_S      300 /* webhook_verify() clock skew: the libraries' 5 min */

/* Errors (negative, below -PS_EBASE); webhook_strerror() words them. */
enum {
    WEBHOOK_E_SECRET_EMPTY = -(PS_EBASE + 1300),  /* NULL, "" or "whsec_" alone */
    WEBHOOK_E_SECRET_BASE64 = -(PS_EBASE + 1301), /* not strict padded standard base64 */
    WEBHOOK_E_SECRET_SHORT = -(PS_EBASE + 1302),  /* fewer than WEBHOOK_KEY_MIN bytes */
    WEBHOOK_E_SECRET_LONG = -(PS_EBASE + 1303),   /* more than WEBHOOK_KEY_MAX bytes */
    WEBHOOK_E_SECRET_KIND = -(PS_EBASE + 1304),   /* whsk_/whpk_: asymmetric, not supported */
    WEBHOOK_E_EVENT = -(PS_EBASE + 1310),         /* unknown kind or a required field NULL */
    WEBHOOK_E_TIME = -(PS_EBASE + 1311),          /* time before 1970 or after 9999 */
    WEBHOOK_E_FULL = -(PS_EBASE + 1312),          /* the batch already holds its maximum */
    WEBHOOK_E_ID = -(PS_EBASE + 1320),            /* webhook-id not 1..64 of A-Za-z0-9_- */
    WEBHOOK_E_TIMESTAMP = -(PS_EBASE + 1321),     /* not 1..18 digits, or outside tolerance */
    WEBHOOK_E_SIGNATURE = -(PS_EBASE + 1322),     /* no v1 signature in the header verifies */
};

/* A short static message for err ("webhook secret is not base64"); "ok"
 * for 0, a generic message for codes not above. */
const char *webhook_strerror(int err);

/* ---- Pusher format ---- */

enum webhook_pusher_kind {
    WEBHOOK_CHANNEL_OCCUPIED = 0,
    WEBHOOK_CHANNEL_VACATED,
    WEBHOOK_MEMBER_ADDED,
    WEBHOOK_MEMBER_REMOVED,
    WEBHOOK_CLIENT_EVENT,
};

/* One Pusher event; every pointer borrowed for the call. Strings are
 * JSON-escaped as json_append_string() does (invalid UTF-8 becomes
 * U+FFFD). */
struct webhook_pusher_event {
    enum webhook_pusher_kind kind;
    const char *channel;   /* required */
    const char *user_id;   /* member_*: required; client_event: sent when not NULL */
    const char *event;     /* client_event: required, the event name ("client-x") */
    const char *data;      /* client_event: the data's text, sent as a JSON string */
    size_t data_len;       /* bytes in data (data may be NULL when 0) */
    const char *socket_id; /* client_event: the sender's; omitted when NULL */
};

/* A batch being filled. Zero-filled is empty; webhook_batch_release()
 * frees it. */
struct webhook_batch {
    struct buf events; /* the events' JSON objects, comma-separated */
    size_t n;          /* events in it, 0..WEBHOOK_PUSHER_BATCH_MAX */
    uint64_t first_ms; /* now_ms of the first event's add (valid when n > 0) */
};

/* Appends ev, received at now_ms (any clock the caller also gives
 * webhook_batch_due()). Returns the number of events now in the batch:
 * WEBHOOK_PUSHER_BATCH_MAX means full, flush now. WEBHOOK_E_FULL when it
 * was full already, WEBHOOK_E_EVENT for an unknown kind or a required
 * field NULL; the batch is unchanged on error. For client_event the
 * caller decides whether user_id applies (presence channels only). */
int webhook_batch_add(struct webhook_batch *b, const struct webhook_pusher_event *ev,
                      uint64_t now_ms);

/* True when the batch holds an event that has waited WEBHOOK_PUSHER_BATCH_MS
 * or more at now_ms (same clock as the adds), or is full. */
bool webhook_batch_due(const struct webhook_batch *b, uint64_t now_ms);

/* Appends the request body {"time_ms":time_ms,"events":[...]} to out and
 * empties the batch for reuse. An empty batch writes "events":[] (the
 * caller should not send it). time_ms is the unix time in ms of the
 * request. */
void webhook_batch_finish(struct webhook_batch *b, uint64_t time_ms, struct buf *out);

void webhook_batch_release(struct webhook_batch *b); /* frees; it is empty after */

/* X-Pusher-Signature of (body, n): lowercase hex HMAC-SHA256 under the
 * NUL-terminated app secret, into out (64 digits and a NUL). body may be
 * NULL when n is 0. */
void webhook_pusher_sign(const char *secret, const void *body, size_t n,
                         char out[WEBHOOK_HEX_LEN + 1]);

/* True when key_header equals app_key and sig_header is the 64 lowercase
 * hex digits of the body's signature (constant-time compare; other
 * spellings refused, as pusher-http-node's WebHook compares exactly).
 * False for any NULL string, an empty app_key or secret. */
bool webhook_pusher_verify(const char *app_key, const char *secret, const char *key_header,
                           const char *sig_header, const void *body, size_t n);

/* ---- Standard Webhooks format ---- */

enum webhook_event_kind {
    WEBHOOK_USER_ONLINE = 0,
    WEBHOOK_USER_OFFLINE,
    WEBHOOK_ROOM_OCCUPIED,
    WEBHOOK_ROOM_VACATED,
    WEBHOOK_MEMBER_JOINED,
    WEBHOOK_MEMBER_LEFT,
};

/* One native event; pointers borrowed for the call. */
struct webhook_event {
    enum webhook_event_kind kind;
    const char *id;   /* required: the event id (webhook_event_id()), = webhook-id */
    int64_t time_ms;  /* unix ms when it happened, 0..253402300799999 (year 9999) */
    const char *user; /* user.*, member.*: required */
    const char *room; /* room.*, member.*: required */
    uint64_t version; /* user.*: the user's presence version */
    uint64_t epoch;   /* room.*, member.*: the room's epoch */
    uint64_t seq;     /* room.*, member.*: the room's seq of this change */
};

/* "user.online", "room.vacated", ...; NULL for an unknown kind. */
const char *webhook_event_type(enum webhook_event_kind kind);

/* Appends ev's body (the shapes in the file comment) to out. Returns 0,
 * WEBHOOK_E_EVENT (unknown kind, a required field NULL) or WEBHOOK_E_TIME;
 * out is unchanged on error. id is escaped like the other strings, but
 * webhook_sign() accepts only ids of A-Za-z0-9_-. */
int webhook_event_body(const struct webhook_event *ev, struct buf *out);

/* Writes the RFC 3339 UTC form of unix ms t, "2021-02-25T15:02:10.123Z"
 * (24 bytes and a NUL), into out. Returns 0 or WEBHOOK_E_TIME outside
 * 0..253402300799999 (out is "" then). */
int webhook_rfc3339(int64_t t, char out[25]);

/* A signing key. Fill with webhook_key_parse() or webhook_key_raw(). */
struct webhook_key {
    unsigned char bytes[WEBHOOK_KEY_MAX];
    size_t len; /* WEBHOOK_KEY_MIN..WEBHOOK_KEY_MAX once filled */
};

/* Reads a configured secret: optional "whsec_", then strict standard
 * base64 (RFC 4648 section 4: A-Z a-z 0-9 + /, '=' padding to a multiple
 * of 4, zero pad bits, no whitespace) of WEBHOOK_KEY_MIN..WEBHOOK_KEY_MAX
 * bytes. Returns 0 or WEBHOOK_E_SECRET_*; k is zeroed on error. */
int webhook_key_parse(struct webhook_key *k, const char *secret);

/* Takes (p, n) as the key bytes themselves. 0, or WEBHOOK_E_SECRET_SHORT
 * or _LONG (k zeroed). */
int webhook_key_raw(struct webhook_key *k, const void *p, size_t n);

/* The webhook-signature value of one attempt, into out:
 * "v1," base64(HMAC-SHA256(key, msg_id "." ts_s "." body)), 47 bytes and a
 * NUL. msg_id must be 1..WEBHOOK_ID_MAX bytes of A-Z a-z 0-9 _ - (the spec:
 * no '.', and nothing a header could not carry); ts_s is the attempt's
 * unix seconds, >= 0. Returns 0, WEBHOOK_E_ID or WEBHOOK_E_TIMESTAMP (out
 * is "" then). body may be NULL when n is 0. */
int webhook_sign(const struct webhook_key *k, const char *msg_id, int64_t ts_s, const void *body,
                 size_t n, char out[WEBHOOK_SIG_LEN + 1]);

/* Verifies a received webhook the way the Standard Webhooks libraries do:
 * the three header values as received (NULL when absent), the body, the
 * receiver's unix seconds now_s. webhook-timestamp must be 1..18 decimal
 * digits within tolerance_s of now_s either way (WEBHOOK_TOLERANCE_S is
 * the libraries' value); webhook-signature is a space-separated list of
 * "<version>,<signature>" of which any "v1" one must be the exact base64
 * of the HMAC (constant-time compare; other versions are skipped, so a
 * key rotation's double signature verifies). Returns 0, WEBHOOK_E_ID
 * (absent or not the webhook_sign() alphabet), WEBHOOK_E_TIMESTAMP or
 * WEBHOOK_E_SIGNATURE (also when absent or no entry verifies). */
int webhook_verify(const struct webhook_key *k, const char *msg_id, const char *timestamp,
                   const char *signature, const void *body, size_t n, int64_t now_s,
                   int64_t tolerance_s);

/* ---- event ids ---- */

/* Writes "msg_" followed by node_epoch and counter as 16 lowercase hex
 * digits each, joined by '_' (WEBHOOK_EVENT_ID_LEN bytes and a NUL), into
 * out: "msg_0000018de1a2b3c4_0000000000000001". Distinct (node_epoch,
 * counter) pairs give distinct ids, and one node's ids sort by counter.
 * node_epoch must differ between nodes and between restarts of a node
 * (e.g. the node id in the top 16 bits and the start time in ms below, or
 * 64 random bits drawn at start); the counter goes up by one per event. */
void webhook_event_id(uint64_t node_epoch, uint64_t counter, char out[WEBHOOK_EVENT_ID_LEN + 1]);

/* ---- retries ---- */

enum webhook_format {
    WEBHOOK_PUSHER = 0, /* Pusher apps */
    WEBHOOK_STANDARD,   /* Standard Webhooks, native endpoints */
};

#define WEBHOOK_PUSHER_ATTEMPTS     9u      /* attempts before giving up */
#define WEBHOOK_STANDARD_ATTEMPTS   10u     /* ditto */
#define WEBHOOK_PUSHER_TIMEOUT_MS   4000u   /* Pusher: answer 2xx within 4 s */
#define WEBHOOK_STANDARD_TIMEOUT_MS 15000u  /* the spec: 15 to 30 s */
#define WEBHOOK_PUSHER_WINDOW_MS    300000u /* Pusher retries "for 5 minutes" */

/* The delay in ms before attempt `attempt` of one message (1 is the first
 * send), measured from the end of the previous attempt, or -1 when there
 * is no such attempt (attempt 0 or beyond the schedule): the message is
 * given up, and the caller disables the endpoint and counts it. rnd01 is
 * uniform in [0, 1) from the caller (clamped into [0, 1]; NaN reads as 0).
 *
 * WEBHOOK_STANDARD: the spec's example schedule, attempts 1..10: 0, 5 s,
 * 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h (75 h 35 min 5 s in
 * all), each but the first times 0.9 + 0.2 * rnd01 (+-10 %): the spec asks
 * for "some level of random jitter" around a schedule spanning days.
 *
 * WEBHOOK_PUSHER: attempt 1 at 0, then 1, 2, 4, ..., 128 s before
 * attempts 2..9, each times 0.5 + 0.5 * rnd01 ("equal jitter": never more
 * than the nominal delay, never less than half). The nominal waits add up
 * to 255 s and nine attempts of WEBHOOK_PUSHER_TIMEOUT_MS take 36 s, so
 * the worst case, 291 s, stays inside Pusher's 5 minutes; the next
 * doubling (256 s) would not. */
int64_t webhook_next_delay_ms(enum webhook_format f, unsigned attempt, double rnd01);

enum webhook_outcome {
    WEBHOOK_DELIVERED = 0, /* done */
    WEBHOOK_RETRY,         /* failed: try again after webhook_next_delay_ms() */
    WEBHOOK_GONE,          /* stop: disable the endpoint now, drop its queue */
};

/* What an attempt's result means. status is the HTTP status, or 0 when
 * there was none (connection refused or reset, DNS or TLS failure,
 * timeout). 200..299 is delivered, in both formats. WEBHOOK_STANDARD: 410
 * is gone (the spec: "Sender should disable the webhook endpoint"); every
 * other result retries, 3xx (redirects are not followed), every other
 * 4xx, 429 and 5xx included, because the spec treats all of them as
 * failures to retry (a 404 or 401 from an endpoint being redeployed is
 * temporary too; the schedule, not the status, decides when to give up).
 * For 429 and 503 with Retry-After the caller waits at least that long;
 * on 429, 502 and 504 it also throttles the endpoint. WEBHOOK_PUSHER:
 * every non-2xx result retries (Pusher: "If a non 2XX status code is
 * returned, Pusher will retry ... for 5 minutes"), 410 included. */
enum webhook_outcome webhook_outcome_of(enum webhook_format f, int status);

#endif
