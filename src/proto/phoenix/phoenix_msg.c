/* SPDX-License-Identifier: MIT */
/*
 * phoenix_msg.c - the Phoenix Channels codec. Decoding is two passes over
 * the frame: json_check() proves it is strict JSON, then a small cursor
 * walks the top level, records where each of the five values starts,
 * decodes the strings into the message and measures the payload. The
 * cursor trusts the syntax json_check() proved but never reads past the
 * frame. Encoding writes the fixed shapes straight into a struct buf.
 * Exports only what phoenix_msg.h declares; keeps no state.
 */
#include "phoenix_msg.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "json.h"

#define STR_(x) #x
#define STR(x)  STR_(x)

/* The five values of a frame, in 2.0.0 array order. */
enum field { F_JOIN_REF, F_REF, F_TOPIC, F_EVENT, F_PAYLOAD, F_COUNT };

/* Their member names in a 1.0.0 object. */
static const char *const field_names[F_COUNT] = {"join_ref", "ref", "topic", "event", "payload"};

/* ---- a cursor over checked JSON ---- */

struct cur {
    const char *p;   /* next byte */
    const char *end; /* one past the frame */
};

static void skip_ws(struct cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* Skips whitespace, then consumes ch when it is the next byte. */
static bool eat(struct cur *c, char ch)
{
    skip_ws(c);
    if (c->p == c->end || *c->p != ch)
        return false;
    c->p++;
    return true;
}

/* The first byte of the next value ('\0' at the end), whitespace skipped. */
static char peek(struct cur *c)
{
    skip_ws(c);
    return c->p < c->end ? *c->p : '\0';
}

/* Skips the string at its opening quote, closing quote included. */
static void skip_string(struct cur *c)
{
    c->p++;
    while (c->p < c->end && *c->p != '"') {
        if (*c->p == '\\' && c->end - c->p > 1)
            c->p++;
        c->p++;
    }
    if (c->p < c->end)
        c->p++;
}

/* Skips a number or a literal: it ends at a delimiter or the frame's end. */
static void skip_scalar(struct cur *c)
{
    while (c->p < c->end && !memchr(",]} \t\n\r", *c->p, 7))
        c->p++;
}

/* Skips the next value. A container ends where its depth returns to zero;
 * strings are skipped whole, so the brackets inside them do not count. */
static void skip_value(struct cur *c)
{
    size_t depth = 0;
    char ch = peek(c);

    if (ch != '{' && ch != '[') {
        if (ch == '"')
            skip_string(c);
        else
            skip_scalar(c);
        return;
    }
    while (c->p < c->end) {
        ch = *c->p;
        if (ch == '"') {
            skip_string(c);
            continue;
        }
        c->p++;
        if (ch == '{' || ch == '[')
            depth++;
        else if ((ch == '}' || ch == ']') && --depth == 0)
            return;
    }
}

/* ---- strings ---- */

/* The four hex digits at c->p, consumed; 0xFFFD when the frame ends. */
static uint32_t hex4(struct cur *c)
{
    uint32_t v = 0;
    int k;

    if (c->end - c->p < 4) {
        c->p = c->end;
        return 0xFFFD;
    }
    for (k = 0; k < 4; k++)
        v = v << 4 | (uint32_t)hex_digit_value((unsigned char)*c->p++);
    return v;
}

/* The code point of the escape after a backslash, consumed. A high
 * surrogate takes the low one that json_check() proved follows it. */
static uint32_t unescape(struct cur *c)
{
    uint32_t hi, lo;

    if (c->p == c->end)
        return 0xFFFD;
    switch (*c->p++) {
    case 'b':
        return '\b';
    case 'f':
        return '\f';
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    case 'u':
        break;
    default:
        return (unsigned char)c->p[-1]; /* " \ / */
    }
    hi = hex4(c);
    if (hi < 0xD800 || hi > 0xDBFF)
        return hi;
    c->p += MIN(c->end - c->p, 2); /* the "\u" of the low half */
    lo = hex4(c);
    return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
}

/* Writes the UTF-8 of cp into out; returns its length, 1 to 4. */
static size_t utf8_put(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the string at its opening quote into out: at most max bytes and
 * a NUL. The whole string is consumed either way. Returns its decoded
 * length, or -1 when that is over max (out then holds a cut prefix). */
static long read_string(struct cur *c, char *out, size_t max)
{
    size_t n = 0, k;
    bool over = false;
    char tmp[4];

    c->p++;
    while (c->p < c->end && *c->p != '"') {
        k = 1;
        if (*c->p == '\\') {
            c->p++;
            k = utf8_put(tmp, unescape(c));
        } else {
            tmp[0] = *c->p++;
        }
        if (over || n + k > max) {
            over = true;
            continue;
        }
        memcpy(out + n, tmp, k);
        n += k;
    }
    if (c->p < c->end)
        c->p++;
    out[n] = '\0';
    return over ? -1 : (long)n;
}

/* ---- decoding ---- */

/* json_check() of the frame, in this module's codes. */
static int check_text(const char *p, size_t n)
{
    switch (json_check(p, n)) {
    case 0:
        return 0;
    case JSON_E_UTF8:
        return PHX_E_UTF8;
    case JSON_E_NUL:
        return PHX_E_NUL;
    default:
        return PHX_E_JSON;
    }
}

/* 2.0.0: an array of exactly five values; records where each starts. */
static int shape_v2(struct cur *c, const char *at[F_COUNT])
{
    size_t i;

    if (!eat(c, '['))
        return PHX_E_SHAPE;
    for (i = 0; i < F_COUNT; i++) {
        if (i > 0 && !eat(c, ','))
            return PHX_E_SHAPE;
        if (peek(c) == ']')
            return PHX_E_SHAPE;
        at[i] = c->p;
        skip_value(c);
    }
    return eat(c, ']') ? 0 : PHX_E_SHAPE;
}

/* The field the member name at c->p names, consumed; -1 for another. */
static int field_of(struct cur *c)
{
    char key[sizeof("join_ref")];
    int f;

    if (read_string(c, key, sizeof(key) - 1) < 0)
        return -1;
    for (f = 0; f < F_COUNT; f++)
        if (strcmp(key, field_names[f]) == 0)
            return f;
    return -1;
}

/* 1.0.0: an object with topic, event, payload and ref, join_ref optional,
 * none of them twice; records where each value starts. */
static int shape_v1(struct cur *c, const char *at[F_COUNT])
{
    int f;

    if (!eat(c, '{') || peek(c) == '}')
        return PHX_E_SHAPE;
    do {
        peek(c);
        f = field_of(c);
        eat(c, ':');
        peek(c);
        if (f >= 0 && at[f] != NULL)
            return PHX_E_SHAPE;
        if (f >= 0)
            at[f] = c->p;
        skip_value(c);
    } while (eat(c, ','));
    for (f = F_REF; f < F_COUNT; f++)
        if (at[f] == NULL)
            return PHX_E_SHAPE;
    return 0;
}

/* Where a string field goes and how it fails. */
struct slot {
    char *out;   /* the message's array */
    size_t max;  /* its PHX_*_MAX */
    size_t *len; /* the message's _len */
    bool *has;   /* NULL when null is refused (topic, event) */
    int e_type;  /* neither a string nor (when allowed) null */
    int e_long;  /* over max */
};

/* Reads the string field at at (NULL: absent, as null) into its slot. */
static int read_field(const char *at, const char *end, const struct slot *s)
{
    struct cur c = {at, end};
    long n;

    if (at == NULL || *at == 'n')
        return s->has != NULL ? 0 : s->e_type;
    if (*at != '"')
        return s->e_type;
    n = read_string(&c, s->out, s->max);
    if (n < 0)
        return s->e_long;
    *s->len = (size_t)n;
    if (s->has != NULL)
        *s->has = true;
    return 0;
}

/* Reads the payload at at: an object, kept as the span of its text. */
static int read_payload(const char *at, const char *end, struct phx_msg *m)
{
    struct cur c = {at, end};

    if (*at != '{')
        return PHX_E_PAYLOAD;
    skip_value(&c);
    m->payload = at;
    m->payload_len = (size_t)(c.p - at);
    return 0;
}

static int read_fields(const char *const at[F_COUNT], const char *end, struct phx_msg *m)
{
    const struct slot slots[F_PAYLOAD] = {
        {m->join_ref, PHX_REF_MAX, &m->join_ref_len, &m->has_join_ref, PHX_E_JOIN_REF,
         PHX_E_JOIN_REF_LONG},
        {m->ref, PHX_REF_MAX, &m->ref_len, &m->has_ref, PHX_E_REF, PHX_E_REF_LONG},
        {m->topic, PHX_TOPIC_MAX, &m->topic_len, NULL, PHX_E_TOPIC, PHX_E_TOPIC_LONG},
        {m->event, PHX_EVENT_MAX, &m->event_len, NULL, PHX_E_EVENT, PHX_E_EVENT_LONG},
    };
    int f, rc;

    for (f = 0; f < F_PAYLOAD; f++)
        if ((rc = read_field(at[f], end, &slots[f])) != 0)
            return rc;
    return read_payload(at[F_PAYLOAD], end, m);
}

int phx_decode(enum phx_vsn vsn, const char *p, size_t n, struct phx_msg *m)
{
    const char *at[F_COUNT] = {NULL};
    struct cur c;
    int rc;

    memset(m, 0, sizeof(*m));
    if (vsn != PHX_VSN_1 && vsn != PHX_VSN_2)
        return PHX_E_VSN;
    rc = check_text(p, n);
    if (rc != 0)
        return rc;
    c.p = p;
    c.end = p + n;
    rc = vsn == PHX_VSN_2 ? shape_v2(&c, at) : shape_v1(&c, at);
    if (rc == 0)
        rc = read_fields(at, p + n, m);
    if (rc != 0)
        memset(m, 0, sizeof(*m));
    return rc;
}

/* ---- vsn ---- */

int phx_vsn_parse(const char *value, enum phx_vsn *vsn)
{
    if (value == NULL || strcmp(value, "1.0.0") == 0)
        *vsn = PHX_VSN_1;
    else if (strcmp(value, "2.0.0") == 0)
        *vsn = PHX_VSN_2;
    else
        return PHX_E_VSN;
    return 0;
}

const char *phx_vsn_name(enum phx_vsn vsn)
{
    switch (vsn) {
    case PHX_VSN_1:
        return "1.0.0";
    case PHX_VSN_2:
        return "2.0.0";
    default:
        return "?";
    }
}

/* ---- encoding ---- */

/* What a frame is addressed with; borrowed for the call. */
struct head {
    const char *join_ref; /* NULL: null; not written in 1.0.0 */
    const char *ref;      /* NULL: null */
    const char *topic;
    const char *event;
};

static void append_ref(struct buf *b, const char *ref)
{
    if (ref != NULL)
        json_append_cstr(b, ref);
    else
        buf_append(b, "null", 4);
}

static void append_json(struct buf *b, const char *json, size_t n)
{
    if (json != NULL)
        buf_append(b, json, n);
    else
        buf_append(b, "{}", 2);
}

/* Everything before the payload. */
static void frame_head(struct buf *b, enum phx_vsn vsn, const struct head *h)
{
    /* A caller's bug, not input: vsn comes from phx_vsn_parse(). */
    assert(vsn == PHX_VSN_1 || vsn == PHX_VSN_2);
    if (vsn == PHX_VSN_1) {
        buf_append_str(b, "{\"topic\":");
        json_append_cstr(b, h->topic);
        buf_append_str(b, ",\"event\":");
        json_append_cstr(b, h->event);
        buf_append_str(b, ",\"payload\":");
        return;
    }
    buf_append(b, "[", 1);
    append_ref(b, h->join_ref);
    buf_append(b, ",", 1);
    append_ref(b, h->ref);
    buf_append(b, ",", 1);
    json_append_cstr(b, h->topic);
    buf_append(b, ",", 1);
    json_append_cstr(b, h->event);
    buf_append(b, ",", 1);
}

/* Everything after the payload. */
static void frame_tail(struct buf *b, enum phx_vsn vsn, const struct head *h)
{
    if (vsn == PHX_VSN_1) {
        buf_append_str(b, ",\"ref\":");
        append_ref(b, h->ref);
        buf_append(b, "}", 1);
        return;
    }
    buf_append(b, "]", 1);
}

void phx_encode(struct buf *b, enum phx_vsn vsn, const char *join_ref, const char *ref,
                const char *topic, const char *event, const char *payload, size_t n)
{
    const struct head h = {join_ref, ref, topic, event};

    frame_head(b, vsn, &h);
    append_json(b, payload, n);
    frame_tail(b, vsn, &h);
}

void phx_encode_reply(struct buf *b, enum phx_vsn vsn, const char *join_ref, const char *ref,
                      const char *topic, bool ok, const char *response, size_t n)
{
    const struct head h = {join_ref, ref, topic, PHX_EV_REPLY};

    frame_head(b, vsn, &h);
    buf_append_str(b,
                   ok ? "{\"status\":\"ok\",\"response\":" : "{\"status\":\"error\",\"response\":");
    append_json(b, response, n);
    buf_append(b, "}", 1);
    frame_tail(b, vsn, &h);
}

void phx_encode_reply_to(struct buf *b, enum phx_vsn vsn, const struct phx_msg *req, bool ok,
                         const char *response, size_t n)
{
    phx_encode_reply(b, vsn, req->has_join_ref ? req->join_ref : NULL,
                     req->has_ref ? req->ref : NULL, req->topic, ok, response, n);
}

void phx_encode_push(struct buf *b, enum phx_vsn vsn, const char *join_ref, const char *topic,
                     const char *event, const char *payload, size_t n)
{
    phx_encode(b, vsn, join_ref, NULL, topic, event, payload, n);
}

void phx_encode_close(struct buf *b, enum phx_vsn vsn, const char *join_ref, const char *topic)
{
    phx_encode(b, vsn, join_ref, join_ref, topic, PHX_EV_CLOSE, NULL, 0);
}

void phx_encode_error(struct buf *b, enum phx_vsn vsn, const char *join_ref, const char *topic)
{
    phx_encode(b, vsn, join_ref, join_ref, topic, PHX_EV_ERROR, NULL, 0);
}

/* ---- topics ---- */

bool phx_is_heartbeat(const struct phx_msg *m)
{
    return phx_topic_is_phoenix(m->topic) && strcmp(m->event, PHX_EV_HEARTBEAT) == 0;
}

bool phx_topic_is_phoenix(const char *topic)
{
    return topic != NULL && strcmp(topic, PHX_TOPIC_PHOENIX) == 0;
}

const char *phx_topic_after(const char *topic, const char *prefix)
{
    size_t n;

    if (topic == NULL || prefix == NULL)
        return NULL;
    n = strlen(prefix);
    if (strncmp(topic, prefix, n) != 0 || topic[n] == '\0')
        return NULL;
    return topic + n;
}

const char *phx_topic_realtime_name(const char *topic)
{
    return phx_topic_after(topic, PHX_TOPIC_REALTIME);
}

const char *phx_strerror(int err)
{
    switch (err) {
    case 0:
        return "ok";
    case PHX_E_JSON:
        return "message is not JSON";
    case PHX_E_UTF8:
        return "message is not valid UTF-8";
    case PHX_E_NUL:
        return "a string holds a NUL character (\\u0000)";
    case PHX_E_SHAPE:
        return "message must be [join_ref, ref, topic, event, payload] (vsn 2.0.0) or an "
               "object with topic, event, payload and ref (vsn 1.0.0)";
    case PHX_E_JOIN_REF:
        return "join_ref must be a string or null";
    case PHX_E_JOIN_REF_LONG:
        return "join_ref is longer than " STR(PHX_REF_MAX) " bytes";
    case PHX_E_REF:
        return "ref must be a string or null";
    case PHX_E_REF_LONG:
        return "ref is longer than " STR(PHX_REF_MAX) " bytes";
    case PHX_E_TOPIC:
        return "topic must be a string";
    case PHX_E_TOPIC_LONG:
        return "topic is longer than " STR(PHX_TOPIC_MAX) " bytes";
    case PHX_E_EVENT:
        return "event must be a string";
    case PHX_E_EVENT_LONG:
        return "event is longer than " STR(PHX_EVENT_MAX) " bytes";
    case PHX_E_PAYLOAD:
        return "payload must be a JSON object";
    case PHX_E_VSN:
        return "unsupported vsn: only 1.0.0 and 2.0.0 are accepted";
    default:
        return "invalid message";
    }
}
