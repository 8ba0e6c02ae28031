/* SPDX-License-Identifier: MIT */
/*
 * webhook.c - webhook bodies, signatures, secrets, ids and retry delays,
 * on libcrypto's HMAC and json.h's escaping. Bodies are written straight
 * into a struct buf; signatures hash the exact bytes that are sent, and
 * are compared with CRYPTO_memcmp(). Secrets are decoded as strict
 * padded base64 (b64.h), so a mistyped secret is an error rather than
 * another key. Exports only what webhook.h declares; keeps no state, reads
 * no clock.
 */
#include "webhook.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "b64.h"
#include "json.h"

#define SHA256_LEN    32u
#define B64_SHA256    44u               /* base64 of 32 bytes, padded */
#define TS_DIGITS_MAX 18u               /* digits in webhook-timestamp: no int64 overflow */
#define TIME_MS_MAX   253402300799999LL /* 9999-12-31T23:59:59.999Z */
#define MS_PER_DAY    86400000LL

/* ---- HMAC and hex ---- */

/* HMAC-SHA256 of (data, n) under (key, klen) into md. SHA-256 is always
 * there: HMAC() fails only when it cannot allocate. */
static void hmac_sha256(const void *key, size_t klen, const void *data, size_t n,
                        unsigned char md[SHA256_LEN])
{
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;

    if (klen > INT_MAX ||
        !HMAC(EVP_sha256(), key, (int)klen, data ? data : (const void *)"", n, out, &len) ||
        len != SHA256_LEN)
        abort();
    memcpy(md, out, SHA256_LEN);
}

static void hex_encode(const unsigned char *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

/* ---- Pusher format ---- */

static const char *const pusher_names[] = {
    [WEBHOOK_CHANNEL_OCCUPIED] = "channel_occupied", [WEBHOOK_CHANNEL_VACATED] = "channel_vacated",
    [WEBHOOK_MEMBER_ADDED] = "member_added",         [WEBHOOK_MEMBER_REMOVED] = "member_removed",
    [WEBHOOK_CLIENT_EVENT] = "client_event",
};

static bool pusher_event_ok(const struct webhook_pusher_event *ev)
{
    if ((unsigned)ev->kind >= ARRAY_SIZE(pusher_names) || ev->channel == NULL)
        return false;
    switch (ev->kind) {
    case WEBHOOK_MEMBER_ADDED:
    case WEBHOOK_MEMBER_REMOVED:
        return ev->user_id != NULL;
    case WEBHOOK_CLIENT_EVENT:
        return ev->event != NULL && (ev->data != NULL || ev->data_len == 0);
    default:
        return true;
    }
}

/* Appends ,"key":"value" (value a C string). */
static void member_str(struct buf *b, const char *key, const char *value)
{
    buf_append(b, ",\"", 2);
    buf_append_str(b, key);
    buf_append(b, "\":", 2);
    json_append_cstr(b, value);
}

/* Appends ,"key":v. */
static void member_u64(struct buf *b, const char *key, uint64_t v)
{
    buf_append(b, ",\"", 2);
    buf_append_str(b, key);
    buf_append(b, "\":", 2);
    json_append_u64(b, v);
}

static void pusher_event_json(struct buf *b, const struct webhook_pusher_event *ev)
{
    buf_append_str(b, "{\"name\":\"");
    buf_append_str(b, pusher_names[ev->kind]);
    buf_append(b, "\"", 1);
    member_str(b, "channel", ev->channel);
    if (ev->kind == WEBHOOK_CLIENT_EVENT) {
        member_str(b, "event", ev->event);
        buf_append_str(b, ",\"data\":");
        json_append_string(b, ev->data ? ev->data : "", ev->data_len);
        if (ev->socket_id)
            member_str(b, "socket_id", ev->socket_id);
    }
    if (ev->user_id && ev->kind != WEBHOOK_CHANNEL_OCCUPIED && ev->kind != WEBHOOK_CHANNEL_VACATED)
        member_str(b, "user_id", ev->user_id);
    buf_append(b, "}", 1);
}

int webhook_batch_add(struct webhook_batch *b, const struct webhook_pusher_event *ev,
                      uint64_t now_ms)
{
    if (b->n >= WEBHOOK_PUSHER_BATCH_MAX)
        return WEBHOOK_E_FULL;
    if (ev == NULL || !pusher_event_ok(ev))
        return WEBHOOK_E_EVENT;
    if (b->n == 0)
        b->first_ms = now_ms;
    else
        buf_append(&b->events, ",", 1);
    pusher_event_json(&b->events, ev);
    return (int)++b->n;
}

bool webhook_batch_due(const struct webhook_batch *b, uint64_t now_ms)
{
    if (b->n == 0)
        return false;
    return b->n >= WEBHOOK_PUSHER_BATCH_MAX ||
           (now_ms >= b->first_ms && now_ms - b->first_ms >= WEBHOOK_PUSHER_BATCH_MS);
}

void webhook_batch_finish(struct webhook_batch *b, uint64_t time_ms, struct buf *out)
{
    buf_append_str(out, "{\"time_ms\":");
    json_append_u64(out, time_ms);
    buf_append_str(out, ",\"events\":[");
    if (b->events.len)
        buf_append(out, b->events.data, b->events.len);
    buf_append(out, "]}", 2);
    b->events.len = 0;
    b->n = 0;
    b->first_ms = 0;
}

void webhook_batch_release(struct webhook_batch *b)
{
    buf_release(&b->events);
    b->n = 0;
    b->first_ms = 0;
}

void webhook_pusher_sign(const char *secret, const void *body, size_t n,
                         char out[WEBHOOK_HEX_LEN + 1])
{
    unsigned char md[SHA256_LEN];

    hmac_sha256(secret, strlen(secret), body, n, md);
    hex_encode(md, SHA256_LEN, out);
}

bool webhook_pusher_verify(const char *app_key, const char *secret, const char *key_header,
                           const char *sig_header, const void *body, size_t n)
{
    char want[WEBHOOK_HEX_LEN + 1];
    size_t i;

    if (!app_key || !secret || !key_header || !sig_header || (body == NULL && n > 0))
        return false;
    if (app_key[0] == '\0' || secret[0] == '\0' || strcmp(app_key, key_header) != 0)
        return false;
    for (i = 0; i < WEBHOOK_HEX_LEN; i++)
        if (!((sig_header[i] >= '0' && sig_header[i] <= '9') ||
              (sig_header[i] >= 'a' && sig_header[i] <= 'f')))
            return false;
    if (sig_header[WEBHOOK_HEX_LEN] != '\0')
        return false;
    webhook_pusher_sign(secret, body, n, want);
    return CRYPTO_memcmp(want, sig_header, WEBHOOK_HEX_LEN) == 0;
}

/* ---- Standard Webhooks bodies ---- */

static const char *const event_types[] = {
    [WEBHOOK_USER_ONLINE] = "user.online",     [WEBHOOK_USER_OFFLINE] = "user.offline",
    [WEBHOOK_ROOM_OCCUPIED] = "room.occupied", [WEBHOOK_ROOM_VACATED] = "room.vacated",
    [WEBHOOK_MEMBER_JOINED] = "member.joined", [WEBHOOK_MEMBER_LEFT] = "member.left",
};

const char *webhook_event_type(enum webhook_event_kind kind)
{
    return (unsigned)kind < ARRAY_SIZE(event_types) ? event_types[kind] : NULL;
}

static bool is_user_kind(enum webhook_event_kind k)
{
    return k == WEBHOOK_USER_ONLINE || k == WEBHOOK_USER_OFFLINE;
}

static bool is_member_kind(enum webhook_event_kind k)
{
    return k == WEBHOOK_MEMBER_JOINED || k == WEBHOOK_MEMBER_LEFT;
}

/* Days since 1970-01-01 to a proleptic Gregorian date (the civil_from_days
 * algorithm: eras of 400 years, March-based years so the leap day is
 * last). days >= 0 here. */
static void civil_from_days(int64_t days, int64_t *y, unsigned *m, unsigned *d)
{
    int64_t z = days + 719468, era = z / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;

    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

/* Writes v as exactly w decimal digits at p (v < 10^w). */
static void put_digits(char *p, unsigned v, unsigned w)
{
    while (w-- > 0) {
        p[w] = (char)('0' + v % 10);
        v /= 10;
    }
}

int webhook_rfc3339(int64_t t, char out[25])
{
    int64_t y, ms;
    unsigned mo, d;

    out[0] = '\0';
    if (t < 0 || t > TIME_MS_MAX)
        return WEBHOOK_E_TIME;
    civil_from_days(t / MS_PER_DAY, &y, &mo, &d);
    ms = t % MS_PER_DAY;
    memcpy(out, "0000-00-00T00:00:00.000Z", 25);
    put_digits(out, (unsigned)y, 4);
    put_digits(out + 5, mo, 2);
    put_digits(out + 8, d, 2);
    put_digits(out + 11, (unsigned)(ms / 3600000), 2);
    put_digits(out + 14, (unsigned)(ms / 60000 % 60), 2);
    put_digits(out + 17, (unsigned)(ms / 1000 % 60), 2);
    put_digits(out + 20, (unsigned)(ms % 1000), 3);
    return 0;
}

static bool event_ok(const struct webhook_event *ev)
{
    if (ev == NULL || webhook_event_type(ev->kind) == NULL || ev->id == NULL)
        return false;
    if (is_user_kind(ev->kind))
        return ev->user != NULL;
    return ev->room != NULL && (!is_member_kind(ev->kind) || ev->user != NULL);
}

static void event_data(const struct webhook_event *ev, struct buf *out)
{
    buf_append_str(out, "{\"id\":");
    json_append_cstr(out, ev->id);
    if (is_user_kind(ev->kind)) {
        member_str(out, "user", ev->user);
        member_u64(out, "version", ev->version);
    } else {
        member_str(out, "room", ev->room);
        member_u64(out, "epoch", ev->epoch);
        member_u64(out, "seq", ev->seq);
        if (is_member_kind(ev->kind))
            member_str(out, "user", ev->user);
    }
    buf_append(out, "}", 1);
}

int webhook_event_body(const struct webhook_event *ev, struct buf *out)
{
    char ts[25];

    if (!event_ok(ev))
        return WEBHOOK_E_EVENT;
    if (webhook_rfc3339(ev->time_ms, ts) != 0)
        return WEBHOOK_E_TIME;
    buf_append_str(out, "{\"type\":\"");
    buf_append_str(out, event_types[ev->kind]);
    buf_append_str(out, "\",\"timestamp\":\"");
    buf_append_str(out, ts);
    buf_append_str(out, "\",\"data\":");
    event_data(ev, out);
    buf_append(out, "}", 1);
    return 0;
}

/* ---- Standard Webhooks keys and signatures ---- */

int webhook_key_raw(struct webhook_key *k, const void *p, size_t n)
{
    memset(k, 0, sizeof(*k));
    if (n < WEBHOOK_KEY_MIN)
        return WEBHOOK_E_SECRET_SHORT;
    if (n > WEBHOOK_KEY_MAX)
        return WEBHOOK_E_SECRET_LONG;
    memcpy(k->bytes, p, n);
    k->len = n;
    return 0;
}

int webhook_key_parse(struct webhook_key *k, const char *secret)
{
    const size_t plen = sizeof(WEBHOOK_SECRET_PREFIX) - 1;
    ssize_t n;

    memset(k, 0, sizeof(*k));
    if (secret == NULL)
        return WEBHOOK_E_SECRET_EMPTY;
    if (strncmp(secret, "whsk_", 5) == 0 || strncmp(secret, "whpk_", 5) == 0)
        return WEBHOOK_E_SECRET_KIND;
    if (strncmp(secret, WEBHOOK_SECRET_PREFIX, plen) == 0)
        secret += plen;
    if (secret[0] == '\0')
        return WEBHOOK_E_SECRET_EMPTY;
    n = b64_decode(secret, strlen(secret), k->bytes, WEBHOOK_KEY_MAX, B64_STD | B64_PAD);
    if (n >= 0 && (size_t)n >= WEBHOOK_KEY_MIN) {
        k->len = (size_t)n;
        return 0;
    }
    memset(k, 0, sizeof(*k));
    if (n == B64_E_INVALID)
        return WEBHOOK_E_SECRET_BASE64;
    return n == B64_E_SPACE ? WEBHOOK_E_SECRET_LONG : WEBHOOK_E_SECRET_SHORT;
}

/* True when id is 1..WEBHOOK_ID_MAX bytes of A-Z a-z 0-9 _ -. */
static bool msg_id_ok(const char *id)
{
    size_t i;

    for (i = 0; id[i] != '\0'; i++) {
        unsigned char c = (unsigned char)id[i];

        if (i >= WEBHOOK_ID_MAX || !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                     (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return i > 0;
}

/* The base64 of the HMAC of msg_id "." ts_s "." body, into out (44 + NUL). */
static void sign_b64(const struct webhook_key *k, const char *msg_id, int64_t ts_s,
                     const void *body, size_t n, char out[B64_SHA256 + 1])
{
    unsigned char md[SHA256_LEN];
    struct buf b = {0};

    buf_printf(&b, "%s.%" PRId64 ".", msg_id, ts_s);
    if (n)
        buf_append(&b, body, n);
    hmac_sha256(k->bytes, k->len, b.data, b.len, md);
    buf_release(&b);
    b64_encode(md, SHA256_LEN, out, B64_STD);
}

int webhook_sign(const struct webhook_key *k, const char *msg_id, int64_t ts_s, const void *body,
                 size_t n, char out[WEBHOOK_SIG_LEN + 1])
{
    out[0] = '\0';
    if (msg_id == NULL || !msg_id_ok(msg_id))
        return WEBHOOK_E_ID;
    if (ts_s < 0)
        return WEBHOOK_E_TIMESTAMP;
    memcpy(out, "v1,", 3);
    sign_b64(k, msg_id, ts_s, body, n, out + 3);
    return 0;
}

/* Reads 1..18 decimal digits into *ts; false otherwise. */
static bool parse_ts(const char *s, int64_t *ts)
{
    size_t i;

    *ts = 0;
    for (i = 0; s[i] != '\0'; i++) {
        if (i >= TS_DIGITS_MAX || s[i] < '0' || s[i] > '9')
            return false;
        *ts = *ts * 10 + (s[i] - '0');
    }
    return i > 0;
}

/* True when |ts - now| <= tolerance, in unsigned arithmetic (no overflow
 * for any now). */
static bool ts_fresh(int64_t ts, int64_t now, int64_t tolerance)
{
    uint64_t diff = ts <= now ? (uint64_t)now - (uint64_t)ts : (uint64_t)ts - (uint64_t)now;

    return tolerance >= 0 && diff <= (uint64_t)tolerance;
}

/* True when some space-separated "v1,<sig>" entry of list is want. */
static bool any_v1_matches(const char *list, const char want[B64_SHA256 + 1])
{
    const char *p = list;

    while (*p != '\0') {
        size_t len = strcspn(p, " ");

        if (len == 3 + B64_SHA256 && memcmp(p, "v1,", 3) == 0 &&
            CRYPTO_memcmp(p + 3, want, B64_SHA256) == 0)
            return true;
        p += len;
        p += strspn(p, " ");
    }
    return false;
}

int webhook_verify(const struct webhook_key *k, const char *msg_id, const char *timestamp,
                   const char *signature, const void *body, size_t n, int64_t now_s,
                   int64_t tolerance_s)
{
    char want[B64_SHA256 + 1];
    int64_t ts;

    if (msg_id == NULL || !msg_id_ok(msg_id))
        return WEBHOOK_E_ID;
    if (timestamp == NULL || !parse_ts(timestamp, &ts) || !ts_fresh(ts, now_s, tolerance_s))
        return WEBHOOK_E_TIMESTAMP;
    if (signature == NULL || k == NULL || k->len == 0 || (body == NULL && n > 0))
        return WEBHOOK_E_SIGNATURE;
    sign_b64(k, msg_id, ts, body, n, want);
    return any_v1_matches(signature, want) ? 0 : WEBHOOK_E_SIGNATURE;
}

/* ---- event ids ---- */

void webhook_event_id(uint64_t node_epoch, uint64_t counter, char out[WEBHOOK_EVENT_ID_LEN + 1])
{
    snprintf(out, WEBHOOK_EVENT_ID_LEN + 1, "msg_%016" PRIx64 "_%016" PRIx64, node_epoch, counter);
}

/* ---- retries ---- */

/* Nominal delays before attempts 1..N, in seconds. */
static const int64_t standard_delays_s[WEBHOOK_STANDARD_ATTEMPTS] = {
    0, 5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 14 * 3600, 20 * 3600, 24 * 3600,
};

static double clamp01(double r)
{
    if (!(r > 0.0)) /* NaN too */
        return 0.0;
    return r < 1.0 ? r : 1.0;
}

int64_t webhook_next_delay_ms(enum webhook_format f, unsigned attempt, double rnd01)
{
    double r = clamp01(rnd01);
    int64_t nominal_ms;

    if (attempt == 0)
        return -1;
    if (f == WEBHOOK_STANDARD) {
        if (attempt > WEBHOOK_STANDARD_ATTEMPTS)
            return -1;
        nominal_ms = standard_delays_s[attempt - 1] * 1000;
        return (int64_t)((double)nominal_ms * (0.9 + 0.2 * r)); /* >= 0: truncation floors */
    }
    if (f != WEBHOOK_PUSHER || attempt > WEBHOOK_PUSHER_ATTEMPTS)
        return -1;
    if (attempt == 1)
        return 0;
    nominal_ms = (int64_t)1000 << (attempt - 2);
    return (int64_t)((double)nominal_ms * (0.5 + 0.5 * r));
}

enum webhook_outcome webhook_outcome_of(enum webhook_format f, int status)
{
    if (status >= 200 && status <= 299)
        return WEBHOOK_DELIVERED;
    if (f == WEBHOOK_STANDARD && status == 410)
        return WEBHOOK_GONE;
    return WEBHOOK_RETRY;
}

const char *webhook_strerror(int err)
{
    switch (err) {
    case 0:
        return "ok";
    case WEBHOOK_E_SECRET_EMPTY:
        return "webhook secret is empty";
    case WEBHOOK_E_SECRET_BASE64:
        return "webhook secret is not whsec_ followed by standard padded base64";
    case WEBHOOK_E_SECRET_SHORT:
        return "webhook secret decodes to fewer than 24 bytes";
    case WEBHOOK_E_SECRET_LONG:
        return "webhook secret decodes to more than 64 bytes";
    case WEBHOOK_E_SECRET_KIND:
        return "webhook secret is an asymmetric key (whsk_/whpk_): only whsec_ is supported";
    case WEBHOOK_E_EVENT:
        return "webhook event has an unknown kind or lacks a required field";
    case WEBHOOK_E_TIME:
        return "webhook event time is outside years 1970 to 9999";
    case WEBHOOK_E_FULL:
        return "webhook batch is full";
    case WEBHOOK_E_ID:
        return "webhook-id must be 1 to 64 characters A-Z a-z 0-9 _ -";
    case WEBHOOK_E_TIMESTAMP:
        return "webhook-timestamp is missing, not a number or outside the tolerance";
    case WEBHOOK_E_SIGNATURE:
        return "no webhook-signature matches";
    default:
        return "webhook error";
    }
}
