/* SPDX-License-Identifier: MIT */
/*
 * pusher_auth.h - the signatures and names of the Pusher Channels protocol:
 * channel authorisation (the "auth" of a private- or presence- subscribe),
 * user sign-in, the HTTP API's signed query string, and the rules for
 * socket ids, channel names, channel_data and user_data.
 *
 * Every signature is the lowercase hex HMAC-SHA256, under the app secret,
 * of bytes exactly as they were received: channel_data and user_data are
 * signed as text, never re-serialised first. Signatures are compared in
 * constant time; uppercase hex is refused (the Pusher libraries send
 * lowercase, and one spelling per signature leaves nothing to normalise).
 *
 * Pure and thread-safe: no I/O, no clock (now is a parameter), no global
 * state, no logging. It allocates only the outputs it documents and
 * temporary scratch, and aborts on out-of-memory like x*alloc(). Not here:
 * the WebSocket protocol, which channels a user may join, webhooks, the
 * shared secrets of private-encrypted- channels, HTTP routing and limits.
 */
#ifndef PUSHER_AUTH_H
#define PUSHER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define PUSHER_HEX_LEN             64u  /* hex digits in an HMAC-SHA256 signature */
#define PUSHER_SOCKET_ID_MAX       64u  /* bytes in a socket id */
#define PUSHER_CHANNEL_MAX         164u /* bytes in a channel name */
#define PUSHER_USER_ID_MAX         128u /* bytes in a user id, and after the user prefix */
#define PUSHER_USER_CHANNEL_PREFIX "#server-to-user-"
#define PUSHER_API_VERSION         "1.0" /* the one auth_version accepted */
#define PUSHER_API_MAX_SKEW        600   /* seconds: |now - auth_timestamp| must be below */
#define PUSHER_API_QUERY_MAX       8192u /* bytes in an API query string */
#define PUSHER_API_MAX_PARAMS      32u   /* parameters in an API query string */

/* Errors (negative, below -PS_EBASE). The parse errors are for a
 * pusher:error or a 4xx body; pusher_strerror() words each one for the
 * client. The API errors split into malformed requests (400) and failed
 * authentication (401); pusher_api_status() maps them. */
enum {
    PUSHER_E_CHANNEL_DATA = -(PS_EBASE + 1100), /* channel_data not one strict JSON object */
    PUSHER_E_USER_ID = -(PS_EBASE + 1101),      /* user_id missing, not a string/integer, bad id */
    PUSHER_E_USER_INFO = -(PS_EBASE + 1102),    /* user_info over max_info bytes (compact) */
    PUSHER_E_USER_DATA = -(PS_EBASE + 1103),    /* user_data not one strict JSON object */
    PUSHER_E_ID = -(PS_EBASE + 1104),           /* user_data "id" missing, not a string, bad id */
    PUSHER_E_WATCHLIST = -(PS_EBASE + 1105),    /* not an array, too long, or a bad id in it */
    /* 400: the request is malformed. */
    PUSHER_E_API_REQUEST = -(PS_EBASE + 1110), /* no method or path, or body NULL with body_len */
    PUSHER_E_API_QUERY = -(PS_EBASE + 1111),   /* bad escape, NUL, empty key, too long, too many */
    PUSHER_E_API_DUPLICATE = -(PS_EBASE + 1112), /* a parameter twice (keys lower-cased) */
    PUSHER_E_API_VERSION = -(PS_EBASE + 1113),   /* auth_version is not "1.0" */
    /* 401: the request is not authenticated. */
    PUSHER_E_API_MISSING = -(PS_EBASE + 1120), /* auth_key/_timestamp/_version/_signature absent */
    PUSHER_E_API_KEY = -(PS_EBASE + 1121),     /* auth_key is not the app key */
    PUSHER_E_API_TIMESTAMP = -(PS_EBASE + 1122), /* not decimal digits, or 600 s or more off */
    PUSHER_E_API_BODY_MD5 = -(PS_EBASE + 1123),  /* absent with a body, or not the body's MD5 */
    PUSHER_E_API_SIGNATURE = -(PS_EBASE + 1124), /* not 64 lowercase hex, or does not verify */
};

/* ---- signatures ---- */

/* Writes the lowercase hex HMAC-SHA256 of (data, n) under the NUL-terminated
 * secret (any length below 2 GiB, "" included) into out: 64 digits and a
 * NUL. data may be NULL when n is 0. Aborts if libcrypto fails (out of
 * memory). */
void pusher_hmac_hex(const char *secret, const void *data, size_t n, char out[PUSHER_HEX_LEN + 1]);

/* True when auth is "<app_key>:<hex>" and hex is the 64 lowercase digits of
 * the HMAC of socket_id ":" channel, followed by ":" channel_data when
 * channel_data is not NULL (presence channels; "" is signed as ":"). The
 * strings are signed byte for byte as given; socket_id is the connection's
 * own. False for any NULL argument other than channel_data, and for an
 * empty app_key or secret. It checks the signature only: whether the
 * channel's kind wants channel_data is the caller's rule. */
bool pusher_channel_auth_ok(const char *app_key, const char *secret, const char *socket_id,
                            const char *channel, const char *channel_data, const char *auth);

/* The same for pusher:signin: the signed string is socket_id "::user::"
 * user_data. False for a NULL argument or an empty app_key or secret. */
bool pusher_signin_ok(const char *app_key, const char *secret, const char *socket_id,
                      const char *user_data, const char *auth);

/* ---- names ---- */

/* True when s is 1+ digits, '.', 1+ digits, and at most
 * PUSHER_SOCKET_ID_MAX bytes (^[0-9]+\.[0-9]+$). False for NULL. */
bool pusher_socket_id_valid(const char *s);

enum pusher_channel_kind {
    PUSHER_CH_INVALID = 0,
    PUSHER_CH_PUBLIC,
    PUSHER_CH_PRIVATE,   /* private- */
    PUSHER_CH_ENCRYPTED, /* private-encrypted- */
    PUSHER_CH_PRESENCE,  /* presence- */
    PUSHER_CH_USER,      /* #server-to-user-<user id> */
};

/* The kind of channel name. A valid name is 1..PUSHER_CHANNEL_MAX bytes of
 * A-Z a-z 0-9 _ - = @ , . ; or PUSHER_USER_CHANNEL_PREFIX followed by
 * 1..PUSHER_USER_ID_MAX bytes of that same alphabet. A prefix with nothing
 * after it ("private-", "private-encrypted-", "presence-") is invalid;
 * "private-encrypted-" wins over "private-". PUSHER_CH_INVALID for NULL. */
enum pusher_channel_kind pusher_channel_kind(const char *name);

/* ---- channel_data and user_data ---- */

/* Parses the channel_data of a presence subscribe: one strict JSON object
 * (json_check() rules; no key read here may appear twice) with "user_id",
 * a string or an integer within +-(2^53 - 1) given as its decimal text
 * (Pusher allows numeric ids: 42 -> "42"), and an optional "user_info" of
 * any JSON value. The id must be 1..PUSHER_USER_ID_MAX bytes of
 * A-Z a-z 0-9 - _ . ~ : @ and fit in user_id (uid_size should be
 * PUSHER_USER_ID_MAX + 1). user_info, when not NULL, gets the compact JSON
 * text of "user_info" ("{}" when absent), heap, the caller cJSON_free()s
 * it; over max_info bytes (without the NUL) is refused.
 * Returns 0, or PUSHER_E_CHANNEL_DATA, _USER_ID, _USER_INFO; on error
 * user_id is "" (when uid_size > 0) and *user_info NULL. */
int pusher_member_parse(const char *channel_data, size_t max_info, char *user_id, size_t uid_size,
                        char **user_info);

/* Parses the user_data of pusher:signin: one strict JSON object with a
 * required string "id" (the user id rules above, into id of id_size
 * bytes), an optional "user_info" (as above, "{}" when absent, caller
 * cJSON_free()s it; user_info may be NULL when not wanted) and an optional
 * "watchlist": an array of at most max_watch user id strings, each valid,
 * duplicates kept in order. *watchlist gets a heap array of *nwatch heap
 * copies, the caller's, to free with pusher_watchlist_free(); NULL and 0
 * when absent or empty. Returns 0, or PUSHER_E_USER_DATA, _ID, _USER_INFO,
 * _WATCHLIST; on error id is "", *user_info and *watchlist NULL, *nwatch 0. */
int pusher_user_data_parse(const char *user_data, size_t max_info, size_t max_watch, char *id,
                           size_t id_size, char **user_info, char ***watchlist, size_t *nwatch);

/* Frees a watchlist of n entries from pusher_user_data_parse(); NULL is a
 * no-op. */
void pusher_watchlist_free(char **watchlist, size_t n);

/* ---- the HTTP API ---- */

/* One API request as received; every pointer borrowed for the call. */
struct pusher_api_req {
    const char *method; /* "GET", "POST": as in the request line, signed as is */
    const char *path;   /* "/apps/123/events": the request-line path, without '?' */
    const char *query;  /* the raw text after '?', percent-encoded; NULL or "" for none */
    const char *body;   /* the request body; may be NULL when body_len is 0 */
    size_t body_len;    /* bytes in body */
};

/* Verifies a request signed the way pusher-http-node signs it. The query
 * is split at '&' (empty pieces skipped) and each piece at its first '='
 * (none: an empty value); keys and values are percent-decoded with '+' as
 * a space, and keys lower-cased. An escape that is not %XY, a byte that
 * decodes to NUL, an empty key, a key given twice, more than
 * PUSHER_API_MAX_PARAMS parameters or over PUSHER_API_QUERY_MAX bytes make
 * it malformed. Required: auth_key equal to app_key; auth_timestamp, 1..18
 * decimal digits, less than PUSHER_API_MAX_SKEW seconds from now_s (either
 * way); auth_version "1.0"; auth_signature, 64 lowercase hex digits. When
 * body_md5 is present, or body_len > 0 (then it is required), it must be
 * the body's MD5 in 32 lowercase hex digits. The signed string is method
 * "\n" path "\n" and every parameter but auth_signature as key=value,
 * sorted by key (byte order), joined with '&', values decoded and not
 * escaped again. app_key and secret must be non-empty (an empty one
 * refuses every request). Returns 0 or a PUSHER_E_API_* code; *why, when
 * why is not NULL, gets pusher_strerror() of the result. Allocates only
 * temporarily. */
int pusher_api_verify(const struct pusher_api_req *r, const char *app_key, const char *secret,
                      int64_t now_s, const char **why);

/* The HTTP status for a pusher_api_verify() result: 200 for 0, 401 for
 * PUSHER_E_API_MISSING, _KEY, _TIMESTAMP, _BODY_MD5 and _SIGNATURE, 400
 * for anything else. */
int pusher_api_status(int err);

/* The decoded value of the first parameter of query (raw, as in
 * pusher_api_verify()) whose decoded key equals key ignoring ASCII case,
 * copied into out with a NUL. Returns its length, -1 when no parameter has
 * that key (or query is NULL), or -2 when query is malformed anywhere (the
 * pusher_api_verify() rules, without the size and count limits) or the
 * value needs more than out_size bytes with its NUL; out is "" on -1 and
 * -2 when out_size > 0. Reads query only; no allocation. */
int pusher_query_get(const char *query, const char *key, char *out, size_t out_size);

/* A short static message for err, fit to show a client ("invalid
 * signature"); "ok" for 0 and a generic message for codes not above. */
const char *pusher_strerror(int err);

#endif
