/* SPDX-License-Identifier: MIT */
/*
 * fuzz_engine.h - the programs of fuzz_engine.c: their byte code, the
 * clients' model, and the generators that turn bytes into native
 * protocol messages. Included by fuzz_engine.c only (its functions are
 * static).
 *
 * Byte code. Byte 0 picks the configuration variant (fuzz_engine.c,
 * configure()). Then, until the input ends (a missing byte reads as 0),
 * one step per opcode byte op, taken modulo 16:
 *   0, 1  open    SLOT WHO DEV   a client on slot SLOT % 6 (a no-op if
 *                                open); WHO % 8: 0-3 a user of fz_users,
 *                                4 anonymous, 5 an invalid user (HTTP 400),
 *                                6-7 ?resume= the session of slot WHO>>3
 *                                (another user's when WHO & 0x80); DEV % 8:
 *                                0-4 a device, 5 an invalid one (400), 6-7
 *                                none
 *   2     drop    SLOT           close the socket, no close frame
 *   3     close   SLOT CODE      a close frame (CODE % 8 from a table of
 *                                valid and invalid codes; CODE & 8: empty)
 *   4     clock   D              move the clock by fz_delay(D) ms
 *   5     raw     SLOT SHAPE ... a text message that is not valid JSON:
 *                                LEN % 64 bytes taken as they are, made
 *                                invalid if they happen to be valid
 *   6-15  message SLOT SHAPE K ... one native message of kind K % FZ_K_COUNT,
 *                                its fields as the generators read them
 * SHAPE & 3 is the framing (one frame, two fragments, two fragments with a
 * ping between) and SHAPE & 4 puts "type" last, SHAPE & 8 adds an unknown
 * field. Each field reads one byte F: F % 8 == 0 leaves it out, 1 puts a
 * value of a random type, anything else a value of the right type (valid
 * or not) chosen by the next byte. Refs: one byte, none, a fresh integer or
 * string (with escapes), or one the protocol refuses (1e300, 1.5, true,
 * a 70-byte string ...). join and room_leave always carry a ref, usable or
 * not, so that the model knows where their effect starts.
 */
#ifndef FUZZ_ENGINE_H
#define FUZZ_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "util.h"
#include "ws.h"

#define FZ_PEERS       6
#define FZ_USERS       4
#define FZ_ROOMS       3
#define FZ_REFS_MAX    256 /* > FZ_MAX_STEPS: one per message at most */
#define FZ_KEY_MAX     80
#define FZ_MAX_INPUT   4096
#define FZ_MAX_STEPS   200
#define FZ_TTL_MS      3000
#define FZ_GRACE_MS    1000
#define FZ_CLOCK_START 1000000
#define FZ_DRAIN_MS    (FZ_TTL_MS + FZ_GRACE_MS + 5000) /* + debounce, batches, expiries */

static const char *const fz_users[FZ_USERS] = {"ann", "bob", "cy", "dee"};
/* User ids on the wire are fz_prefix + a name: the store lives as long
 * as the process (opening one costs more than a run), and a prefix of its
 * own per run makes every run meet a store that has never seen its users,
 * as a fresh one would (fuzz_engine.c sets it). */
static char fz_prefix[24];
static const char *const fz_rooms[FZ_ROOMS] = {"r1", "r2", "doc-42"};
/* Ids a watch may name that are valid: the users, then one who never comes. */
#define FZ_WATCH_IDS 5
static const char *const fz_watch_ids[FZ_WATCH_IDS] = {"ann", "bob", "cy", "dee", "zz"};

enum fz_kind {
    FZ_K_AUTH,
    FZ_K_PING,
    FZ_K_HEARTBEAT,
    FZ_K_ACTIVITY,
    FZ_K_STATUS,
    FZ_K_CUSTOM,
    FZ_K_LEAVE,
    FZ_K_PRIVACY,
    FZ_K_WATCH,
    FZ_K_UNWATCH,
    FZ_K_JOIN,
    FZ_K_ROOM_LEAVE,
    FZ_K_PATCH,
    FZ_K_EPHEMERAL,
    FZ_K_UNKNOWN, /* a type the protocol does not have */
    FZ_K_NOTYPE,  /* no string type */
    FZ_K_COUNT
};

static const char *const fz_kind_names[FZ_K_COUNT] = {
    "auth",  "ping",    "heartbeat", "activity",   "status", "custom",    "leave", "privacy",
    "watch", "unwatch", "join",      "room_leave", "patch",  "ephemeral", "bogus", "(no type)",
};

static inline const char *fz_kind_name(int k)
{
    return k >= 0 && k < FZ_K_COUNT ? fz_kind_names[k] : "?";
}

/* Whether a request of kind k that carried a usable ref must be answered
 * (ack, error, pong) while its connection stays open. Heartbeats (a
 * throttled one is dropped on the spot), leave (session_ended says it),
 * ephemeral (silent on success) and join (checked by the room model)
 * need not, nor a message without a string type (refused before its
 * ref is read). */
static inline bool fz_kind_answers(int k)
{
    return k != FZ_K_HEARTBEAT && k != FZ_K_LEAVE && k != FZ_K_EPHEMERAL && k != FZ_K_JOIN &&
           k != FZ_K_NOTYPE;
}

struct prog {
    const uint8_t *data;
    size_t size, pos;
};

static inline uint8_t fz_u8(struct prog *p)
{
    return p->pos < p->size ? p->data[p->pos++] : 0;
}

/* A ref this connection sent in a message the server will parse. */
struct ref_rec {
    char *key;     /* "i:<int>" or "s:<string>", owned */
    int kind;      /* enum fz_kind */
    int room;      /* join/room_leave: the fz_rooms index, or -1 */
    bool answered; /* a reply carried it */
};

/* What a connection knows of one room (docs/protocol.md's client table). */
enum { RM_NONE, RM_JOINING, RM_JOINED };
struct rmodel {
    int state;    /* RM_*: RM_NONE = nothing of the room may arrive */
    int join_ref; /* RM_JOINING: index of the join's ref_rec */
    bool base;    /* members/epoch/seq are a state the server sent */
    uint64_t epoch, seq;
    unsigned members; /* bit i: fz_users[i] is a member */
};

struct peer {
    int fd;       /* the client's end of the socketpair; -1 when none */
    int slot;     /* index in the peers (for traces) */
    int user;     /* fz_users index, -1 anonymous */
    bool bad;     /* the upgrade request is invalid: expect HTTP 400 */
    char sid[64]; /* from the welcome */
    bool upgraded, welcomed, ended, server_closed, gone;
    bool refused; /* got too_many_sessions instead of a welcome */
    char *in;     /* bytes from the server not parsed yet */
    size_t in_len, in_cap;
    struct ref_rec refs[FZ_REFS_MAX];
    int nrefs;
    uint64_t next_ref; /* makes every usable ref of the connection unique */
    struct rmodel rooms[FZ_ROOMS];
    unsigned watched; /* bit i: fz_watch_ids[i] was in a watch */
};

/* Defined in fuzz_engine.c. */
void fz_send_frame(struct peer *p, unsigned opcode, bool fin, const void *data, size_t n,
                   const uint8_t mask[4]);
void fz_trace(const char *dir, const struct peer *p, const char *s, size_t n);
bool fz_ref_expect(struct peer *p, const char *key, int kind, int room);

/* The name of a wire user id, or NULL when it is not one of this run. */
static inline const char *fz_unprefix(const char *u)
{
    size_t n = strlen(fz_prefix);

    return strncmp(u, fz_prefix, n) == 0 ? u + n : NULL;
}

static inline bool fz_watched_ever(const struct peer *p, const char *u)
{
    const char *name = fz_unprefix(u);

    for (int i = 0; name && i < FZ_WATCH_IDS; i++)
        if (strcmp(name, fz_watch_ids[i]) == 0)
            return p->watched & (1u << i);
    return false;
}

static inline uint64_t fz_delay(uint8_t b)
{
    static const uint16_t t[16] = {1,   5,   10,   20,   50,   60,   100,  150,
                                   250, 500, 1000, 1500, 2500, 3100, 5000, 12000};
    return t[b % 16] + (uint64_t)(b >> 4) * 7;
}

/* The query of an upgrade for WHO and DEV (see the byte code); returns the
 * user index (-1 anonymous) and sets p->bad for a request the server must
 * refuse. */
static int fz_pick_user(struct peer *peers, struct peer *p, uint8_t who, char *q, size_t n,
                        uint8_t dev)
{
    static const char *const devices[] = {"web", "desktop", "mobile", "tablet", "other", "toaster"};
    char d[32] = "";
    int user = -1;
    struct peer *src = &peers[(who >> 3) % FZ_PEERS];

    if (dev % 8 < 6)
        snprintf(d, sizeof(d), "&device=%s", devices[dev % 8]);
    p->bad = dev % 8 == 5;
    switch (who % 8) {
    case 4:
        snprintf(q, n, "%s%s", d[0] ? "?" : "", d[0] ? d + 1 : "");
        return -1;
    case 5:
        p->bad = true;
        snprintf(q, n, "?user=a%%20b%s", d);
        return -1;
    case 6:
    case 7:
        if (src->sid[0] && src->user >= 0) {
            user = (who & 0x80) ? (src->user + 1) % FZ_USERS : src->user;
            snprintf(q, n, "?user=%s%s&resume=%s%s", fz_prefix, fz_users[user], src->sid, d);
            return user;
        }
        user = (who >> 3) % FZ_USERS;
        break;
    default:
        user = who % 8;
        break;
    }
    snprintf(q, n, "?user=%s%s%s", fz_prefix, fz_users[user], d);
    return user;
}

/* ---- JSON generators ---- */

static const char *const fz_numbers[] = {
    "0",
    "1",
    "-1",
    "7",
    "1.5",
    "1e300",
    "-1e300",
    "9007199254740992",
    "9007199254740993",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "3600000",
    "31536000000",
    "31536000001",
    "0.0",
    "1E2",
    "-0",
    "2",
    "100",
};

/* A text of 101 characters (over the custom status limit), a ref of 70. */
#define FZ_A101  "\"" FZ_A10 FZ_A10 FZ_A10 FZ_A10 FZ_A10 FZ_A10 FZ_A10 FZ_A10 FZ_A10 FZ_A10 "a\""
#define FZ_A10   "aaaaaaaaaa"
#define FZ_REF70 "\"" FZ_A10 FZ_A10 FZ_A10 FZ_A10 FZ_A10 FZ_A10 FZ_A10 "\""

static const char *const fz_strings[] = {
    "\"\"",
    "\"x\"",
    "\"In a meeting\"",
    "\"\\u00e9\\n\\t\"",
    "\"a\\u0000b\"",
    "\"\\ud83d\\ude00\"",
    "\"\\ud83d\"",
    "\"\xf0\x9f\x98\x80\"",
    "\"\\u202e\"",
    "\":calendar:\"",
    "\":bad code:\"",
    FZ_A101,
    "\"\\\"\\\\/\"",
    "\"cursor\"",
    "\"typing\"",
    "\"online\"",
};

static void fz_value(struct buf *b, struct prog *pr, int depth);

static void fz_number(struct buf *b, struct prog *pr)
{
    buf_append_str(b, fz_numbers[fz_u8(pr) % ARRAY_SIZE(fz_numbers)]);
}

static void fz_string(struct buf *b, struct prog *pr)
{
    buf_append_str(b, fz_strings[fz_u8(pr) % ARRAY_SIZE(fz_strings)]);
}

/* Any JSON value: scalars, small objects and arrays, an oversized string,
 * deep nesting. */
static void fz_value(struct buf *b, struct prog *pr, int depth)
{
    uint8_t c = fz_u8(pr);
    int n;

    switch (c % 12) {
    case 0:
        buf_append_str(b, "null");
        return;
    case 1:
        buf_append_str(b, (c & 16) ? "true" : "false");
        return;
    case 2:
        fz_number(b, pr);
        return;
    case 3:
        fz_string(b, pr);
        return;
    case 4:
    case 5:
        if (depth > 3) {
            buf_append_str(b, "{}");
            return;
        }
        n = (c >> 4) % 4;
        buf_append_str(b, "{");
        for (int i = 0; i < n; i++) {
            static const char *const keys[] = {"name", "color", "x", "y", "status", ""};
            buf_printf(b, "%s\"%s\":", i ? "," : "", keys[(fz_u8(pr) + i) % 6]);
            fz_value(b, pr, depth + 1);
        }
        buf_append_str(b, "}");
        return;
    case 6:
        if (depth > 3) {
            buf_append_str(b, "[]");
            return;
        }
        n = (c >> 4) % 4;
        buf_append_str(b, "[");
        for (int i = 0; i < n; i++) {
            if (i)
                buf_append_str(b, ",");
            fz_value(b, pr, depth + 1);
        }
        buf_append_str(b, "]");
        return;
    case 7:
        buf_append_str(b, "\"");
        for (int i = 0; i < 1100; i++)
            buf_append_str(b, "x");
        buf_append_str(b, "\"");
        return;
    case 8:
        for (int i = 0; i < 60; i++)
            buf_append_str(b, "[");
        for (int i = 0; i < 60; i++)
            buf_append_str(b, "]");
        return;
    case 9:
        buf_append_str(b, "{\"name\":\"Ann\",\"color\":\"#e11\"}");
        return;
    case 10:
        buf_append_str(b, "{\"color\":null}");
        return;
    default:
        buf_printf(b, "{\"x\":%u,\"y\":%u}", c, (unsigned)fz_u8(pr));
        return;
    }
}

/* An id: mostly prefix and one of pool (n entries), else an invalid one. */
static void fz_id(struct buf *b, struct prog *pr, const char *prefix, const char *const *pool,
                  size_t n, int *index)
{
    static const char *const bad[] = {"\"\"", "\"a b\"", "\"a\\u0000b\"", "\"\\u00e9\"",
                                      "7",    "null",    "[\"ann\"]"};
    uint8_t c = fz_u8(pr);

    *index = -1;
    if (c % 8 < 6) {
        *index = (int)((c >> 3) % n);
        buf_printf(b, "\"%s%s\"", prefix, pool[*index]);
    } else if (c & 0x80) {
        buf_append_str(b, "\"");
        for (int i = 0; i < 129; i++)
            buf_append_str(b, "i");
        buf_append_str(b, "\"");
    } else {
        buf_append_str(b, bad[(c >> 3) % ARRAY_SIZE(bad)]);
    }
}

/* One of choices as a JSON string, or (rarely) a near miss. */
static void fz_enum(struct buf *b, struct prog *pr, const char *const *choices, size_t n)
{
    uint8_t c = fz_u8(pr);

    if (c % 8 == 7)
        buf_printf(b, "\"%s \"", choices[(c >> 3) % n]);
    else
        buf_printf(b, "\"%s\"", choices[(c >> 3) % n]);
}

/* A field: absent, a value of any type, or gen's (the right type). */
#define FZ_FIELD(b, pr, first, name, gen)                          \
    do {                                                           \
        uint8_t f_ = fz_u8(pr);                                    \
        if (f_ % 8 == 0)                                           \
            break;                                                 \
        buf_printf((b), "%s\"%s\":", *(first) ? "" : ",", (name)); \
        *(first) = false;                                          \
        if (f_ % 8 == 1)                                           \
            fz_value((b), (pr), 1);                                \
        else                                                       \
            gen;                                                   \
    } while (0)

/* A value of the wrong type for a field that holds ids (room, users):
 * never a valid id nor an array holding one, so that the model knows
 * every room and user a message can name. */
static void fz_wrong(struct buf *b, struct prog *pr)
{
    static const char *const wrong[] = {"7",   "null",  "true",    "{}",        "{\"a\":1}",
                                        "1.5", "[1,2]", "\"a b\"", "[\"a b\"]", "[[]]"};

    buf_append_str(b, wrong[fz_u8(pr) % ARRAY_SIZE(wrong)]);
}

/* FZ_FIELD for an id-bearing field: its wrong values come from fz_wrong(). */
#define FZ_ID_FIELD(b, pr, first, name, gen)                       \
    do {                                                           \
        uint8_t f_ = fz_u8(pr);                                    \
        if (f_ % 8 == 0)                                           \
            break;                                                 \
        buf_printf((b), "%s\"%s\":", *(first) ? "" : ",", (name)); \
        *(first) = false;                                          \
        if (f_ % 8 == 1)                                           \
            fz_wrong((b), (pr));                                   \
        else                                                       \
            gen;                                                   \
    } while (0)

/* A message being built: its text and the ref it will be answered with. */
struct fz_msg {
    struct buf b;
    bool first;
    char ref[FZ_KEY_MAX]; /* "" when none or unusable */
    int kind, room;
};

static void fz_ref(struct fz_msg *m, struct peer *p, struct prog *pr, bool forced)
{
    static const char *const refused[] = {
        "1e300", "1.5", "true", "{}", "[1]", "null", "9223372036854775808", FZ_REF70};
    uint8_t c = fz_u8(pr);
    uint64_t n = ++p->next_ref;

    switch (c % 8) {
    case 0:
    case 1:
        if (!forced)
            return;
        /* fall through */
    case 2:
    case 3:
    case 4:
        buf_printf(&m->b, "%s\"ref\":%llu", m->first ? "" : ",", (unsigned long long)n);
        snprintf(m->ref, sizeof(m->ref), "i:%llu", (unsigned long long)n);
        break;
    case 5:
        buf_printf(&m->b, "%s\"ref\":\"q\\t\\u00e9%llu\"", m->first ? "" : ",",
                   (unsigned long long)n);
        snprintf(m->ref, sizeof(m->ref), "s:q\t\xc3\xa9%llu", (unsigned long long)n);
        break;
    case 6:
        buf_printf(&m->b, "%s\"ref\":%s", m->first ? "" : ",",
                   refused[(c >> 3) % ARRAY_SIZE(refused)]);
        break;
    default:
        buf_printf(&m->b, "%s\"ref\":-%llu", m->first ? "" : ",", (unsigned long long)n);
        snprintf(m->ref, sizeof(m->ref), "i:-%llu", (unsigned long long)n);
        break;
    }
    m->first = false;
}

static void fz_users_array(struct buf *b, struct prog *pr, struct peer *p, bool watch)
{
    uint8_t c = fz_u8(pr);
    int n = c % 6, idx;

    buf_append_str(b, "[");
    for (int i = 0; i < n; i++) {
        if (i)
            buf_append_str(b, ",");
        fz_id(b, pr, fz_prefix, fz_watch_ids, FZ_WATCH_IDS, &idx);
        if (watch && idx >= 0)
            p->watched |= 1u << idx; /* a candidate: the watch may still fail */
    }
    buf_append_str(b, "]");
}

/* "since" for a join of room model rm: the model's own (epoch, seq),
 * one before it, {0,0}, numbers from the table, or invalid shapes; sets
 * what the model may expect when the join goes through. */
static void fz_since(struct buf *b, struct prog *pr, struct rmodel *rm, bool track)
{
    uint8_t c = fz_u8(pr);

    switch (c % 6) {
    case 0:
        if (rm->base) {
            buf_printf(b, "{\"epoch\":%llu,\"seq\":%llu}", (unsigned long long)rm->epoch,
                       (unsigned long long)rm->seq);
            return;
        }
        break;
    case 1:
        if (rm->base && rm->seq > 0) {
            buf_printf(b, "{\"epoch\":%llu,\"seq\":%llu}", (unsigned long long)rm->epoch,
                       (unsigned long long)rm->seq - 1);
            return;
        }
        break;
    case 2:
        buf_append_str(b, "{\"epoch\":0,\"seq\":0}");
        if (track) {
            rm->base = true; /* "my model is empty" */
            rm->members = 0;
            rm->epoch = 0;
            rm->seq = 0;
        }
        return;
    case 3: {
        const char *e = fz_numbers[fz_u8(pr) % ARRAY_SIZE(fz_numbers)];
        const char *q = fz_numbers[fz_u8(pr) % ARRAY_SIZE(fz_numbers)];
        buf_printf(b, "{\"epoch\":%s,\"seq\":%s}", e, q);
        if (track && strtod(e, NULL) == 0 && strtod(q, NULL) == 0) {
            rm->base = true; /* 0.0 and -0 are 0: "my model is empty" */
            rm->members = 0;
            rm->epoch = 0;
            rm->seq = 0;
            return;
        }
        break;
    }
    case 4:
        buf_append_str(b, "null");
        break;
    default:
        fz_value(b, pr, 1);
        break;
    }
    if (track)
        rm->base = false; /* expect a snapshot */
}

/* The fields of a message of kind m->kind. */
static void fz_fields(struct fz_msg *m, struct peer *p, struct prog *pr, bool track)
{
    static const char *const statuses[] = {"online", "away", "busy", "dnd", "offline", "BUSY"};
    static const char *const vis[] = {"everyone", "contacts", "nobody"};
    static const char *const tiers[] = {"live", "list"};
    struct buf *b = &m->b;
    bool *first = &m->first;
    int idx = -1;

    switch (m->kind) {
    case FZ_K_AUTH:
        FZ_FIELD(b, pr, first, "token", fz_string(b, pr));
        break;
    case FZ_K_HEARTBEAT:
        FZ_FIELD(b, pr, first, "ts", fz_number(b, pr));
        break;
    case FZ_K_ACTIVITY:
        FZ_FIELD(b, pr, first, "active", buf_append_str(b, fz_u8(pr) & 1 ? "true" : "false"));
        break;
    case FZ_K_STATUS:
        FZ_FIELD(b, pr, first, "status", fz_enum(b, pr, statuses, ARRAY_SIZE(statuses)));
        FZ_FIELD(b, pr, first, "expiresInMs", fz_number(b, pr));
        break;
    case FZ_K_CUSTOM:
        FZ_FIELD(b, pr, first, "text", fz_string(b, pr));
        FZ_FIELD(b, pr, first, "emoji", fz_string(b, pr));
        FZ_FIELD(b, pr, first, "expiresInMs", fz_number(b, pr));
        break;
    case FZ_K_PRIVACY:
        FZ_FIELD(b, pr, first, "online", fz_enum(b, pr, vis, 3));
        FZ_FIELD(b, pr, first, "lastSeen", fz_enum(b, pr, vis, 3));
        FZ_FIELD(b, pr, first, "invisible", buf_append_str(b, fz_u8(pr) & 1 ? "true" : "false"));
        break;
    case FZ_K_WATCH:
    case FZ_K_UNWATCH:
        FZ_ID_FIELD(b, pr, first, "users", fz_users_array(b, pr, p, m->kind == FZ_K_WATCH));
        FZ_FIELD(b, pr, first, "tier", fz_enum(b, pr, tiers, 2));
        break;
    case FZ_K_JOIN:
        FZ_ID_FIELD(b, pr, first, "room", fz_id(b, pr, "", fz_rooms, FZ_ROOMS, &idx));
        m->room = idx;
        FZ_FIELD(b, pr, first, "meta", fz_value(b, pr, 1));
        if (idx >= 0 && (!track || p->rooms[idx].state == RM_NONE))
            FZ_FIELD(b, pr, first, "since", fz_since(b, pr, &p->rooms[idx], track));
        else
            FZ_FIELD(b, pr, first, "since", fz_value(b, pr, 1));
        break;
    case FZ_K_ROOM_LEAVE:
        FZ_ID_FIELD(b, pr, first, "room", fz_id(b, pr, "", fz_rooms, FZ_ROOMS, &idx));
        m->room = idx;
        break;
    case FZ_K_PATCH:
        FZ_ID_FIELD(b, pr, first, "room", fz_id(b, pr, "", fz_rooms, FZ_ROOMS, &idx));
        FZ_FIELD(b, pr, first, "meta", fz_value(b, pr, 1));
        break;
    case FZ_K_EPHEMERAL:
        FZ_ID_FIELD(b, pr, first, "room", fz_id(b, pr, "", fz_rooms, FZ_ROOMS, &idx));
        FZ_FIELD(b, pr, first, "kind", fz_string(b, pr));
        FZ_FIELD(b, pr, first, "data", fz_value(b, pr, 1));
        break;
    default:
        break;
    }
}

static void fz_type(struct fz_msg *m, struct prog *pr)
{
    static const char *const unknown[] = {"\"bogus\"", "\"JOIN\"", "\"\"", "\"ping \""};
    static const char *const notype[] = {"7", "null", "[\"ping\"]", "{}"};
    uint8_t c = fz_u8(pr);

    if (m->kind == FZ_K_NOTYPE && c % 2 == 0)
        return; /* no type at all */
    buf_printf(&m->b, "%s\"type\":", m->first ? "" : ",");
    m->first = false;
    if (m->kind == FZ_K_UNKNOWN)
        buf_append_str(&m->b, unknown[(c >> 1) % 4]);
    else if (m->kind == FZ_K_NOTYPE)
        buf_append_str(&m->b, notype[(c >> 1) % 4]);
    else
        buf_printf(&m->b, "\"%s\"", fz_kind_names[m->kind]);
}

/* Builds one message from the program into m (track: update p's model
 * for a message that will be sent). */
static void fz_build(struct fz_msg *m, struct peer *p, struct prog *pr, uint8_t shape, bool track)
{
    bool forced;

    memset(m, 0, sizeof(*m));
    m->first = true;
    m->room = -1;
    m->kind = fz_u8(pr) % FZ_K_COUNT;
    forced = m->kind == FZ_K_JOIN || m->kind == FZ_K_ROOM_LEAVE;
    buf_append_str(&m->b, "{");
    if (!(shape & 4))
        fz_type(m, pr);
    fz_fields(m, p, pr, track);
    fz_ref(m, p, pr, forced);
    if (shape & 8) {
        buf_printf(&m->b, "%s\"zzz\":", m->first ? "" : ",");
        m->first = false;
        fz_value(&m->b, pr, 1);
    }
    if (shape & 4)
        fz_type(m, pr);
    buf_append_str(&m->b, "}");
}

/* Sends text as one text message, framed as shape says. */
static void fz_send_text(struct peer *p, const char *s, size_t n, uint8_t shape)
{
    uint8_t mask[4] = {shape, (uint8_t)(shape * 7), 0x5a, 0xa5};
    size_t half = n / 2;

    switch (shape & 3) {
    case 2:
    case 3:
        fz_send_frame(p, WS_OP_TEXT, false, s, half, mask);
        if ((shape & 3) == 3)
            fz_send_frame(p, WS_OP_PING, true, "hi", 2, mask);
        fz_send_frame(p, WS_OP_CONT, true, s + half, n - half, mask);
        break;
    default:
        fz_send_frame(p, WS_OP_TEXT, true, s, n, mask);
        break;
    }
}

/* A raw text message: LEN % 64 bytes as they are, spoiled if they happen
 * to be valid JSON (whose effects the model could not follow). */
static void fz_raw(struct peer *p, struct prog *pr, uint8_t shape, bool send)
{
    uint8_t len = fz_u8(pr) % 64;
    char s[72];

    for (int i = 0; i < len; i++)
        s[i] = (char)fz_u8(pr);
    if (json_check(s, len) == 0)
        s[len++] = '}';
    if (send) {
        fz_trace("-> raw", p, s, len);
        fz_send_text(p, s, len, shape);
    }
}

/* One message step (raw or native) for p, sent when send. */
static void fz_message(struct peer *p, struct prog *pr, bool raw, bool send)
{
    uint8_t shape = fz_u8(pr);
    struct fz_msg m;

    if (raw) {
        fz_raw(p, pr, shape, send);
        return;
    }
    fz_build(&m, p, pr, shape, send);
    if (send) {
        /* only a message the server parses answers with its ref */
        if (m.ref[0] && json_check(m.b.data, m.b.len) == 0)
            fz_ref_expect(p, m.ref, m.kind, m.room);
        if (m.kind == FZ_K_JOIN && m.room >= 0 && m.ref[0] && p->rooms[m.room].state == RM_NONE &&
            json_check(m.b.data, m.b.len) == 0) {
            p->rooms[m.room].state = RM_JOINING;
            p->rooms[m.room].join_ref = p->nrefs - 1;
        }
        fz_trace("->", p, m.b.data, m.b.len);
        fz_send_text(p, m.b.data, m.b.len, shape);
    }
    buf_release(&m.b);
}

#endif
