/* SPDX-License-Identifier: MIT */
/*
 * presence_internal.h - what the two files of the presence engine share:
 * presence.c (users, aggregation, debounced emission, last seen, the
 * engine's lifetime and reads) and presence_session.c (sessions, their
 * one timer each, and the session calls of presence.h: start, end,
 * resume, heartbeat, activity, status, custom status). It holds the
 * engine's private types, the small accessors both read (inline, as the
 * heartbeat path runs through them) and the presence__ functions one
 * file calls in the other. Not part of the presence API: only those two
 * files include it.
 */
#ifndef PRESENCE_INTERNAL_H
#define PRESENCE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hmap.h"
#include "list.h"
#include "presence.h"
#include "wheel.h"

/*
 * The rare part of a session: expiries and the custom status. A session
 * has one only while some of it is set (session_trim() drops it after);
 * the last emitted custom status of a user (user.pub) is one too, with
 * status_expires 0. The strings live in data[].
 */
struct extra {
    uint64_t status_expires; /* BUSY/DND revert time, 0 = none */
    uint64_t custom_expires; /* custom status clear time, 0 = none */
    char *text;              /* custom text, NULL = none */
    char *emoji;             /* custom emoji, NULL = none */
    char data[];
};

/* The content of a view that events compare (what users see change).
 * Statuses are enum presence_status values kept in a byte each: every
 * user holds one of these. */
struct agg {
    uint8_t status;
    uint8_t devices[PRESENCE_DEVICE_COUNT];
    struct extra *custom; /* NULL = none; owned in user.pub, borrowed otherwise */
};

/* A user's armed debounce timer: allocated while armed, so that the
 * (many) users with nothing pending do not carry one. */
struct debounce {
    struct wheel_timer timer;
    struct user *user;
};

#define U_RECORD  0x1u /* a last-seen record: lru is linked */
#define U_ARMED   0x2u /* a change may be unpublished: debounce is armed */
#define U_IN_EMIT 0x4u /* on_change for this user is on the stack */

/*
 * A last-seen record has no session and no change pending, and only a
 * record is on the LRU list, so the list link shares its place with what
 * only a live user needs: the engine (for its sessions' timers) and the
 * debounce timer. Whoever turns a record live again (user_unrecord()) is
 * given the engine and puts it back.
 */
struct user {
    struct hmap_node node;    /* in presence.users */
    struct session *sessions; /* first of them, in start order (session.next) */
    union {
        struct list lru; /* U_RECORD: in presence.lru */
        struct {         /* not U_RECORD */
            struct presence *p;
            struct debounce *debounce; /* U_ARMED */
        };
    };
    uint64_t last_seen; /* latest beat/activity of an ended session */
    uint64_t version;   /* of pub; 0 = nothing emitted */
    struct agg pub;     /* the last emitted view, custom owned */
    uint8_t flags;      /* U_* */
    char uid[];         /* NUL-terminated; allocated from offsetof(), not sizeof() */
};

#define S_ACTIVE    0x1u                  /* not idle: ONLINE unless manual is set */
#define S_ATTACHED  0x2u                  /* false while in the reconnect grace */
#define S_TAG_SHIFT 4                     /* the caller's tag (presence_session_set_tag) */
#define S_TAG_MASK  (0x3u << S_TAG_SHIFT) /* in flags: the struct has no byte to spare */

/*
 * Recency ties are broken by the later start, which is the later place in
 * user.sessions: every pass that compares recency walks that list in
 * order, so a session needs no start sequence number.
 */
struct session {
    struct hmap_node node;    /* in presence.sessions */
    struct session *next;     /* in user.sessions */
    struct user *user;        /* owner; outlives the session */
    struct wheel_timer timer; /* at session_deadline(): see session_fired */
    void *conn_ref;           /* the caller's */
    uint64_t connected_at;
    uint64_t last_beat;     /* last recorded heartbeat; + TTL = end while attached */
    uint64_t last_activity; /* last recorded activity; + idle_ms = idle while active */
    struct extra *x;        /* NULL = no expiry and no custom status */
    uint32_t grace_ms;      /* while detached: end - last_beat (<= session_ttl_ms,
                             * but for a restored session, whose last_beat is
                             * from before the stop; last_beat does not move
                             * while detached) */
    uint8_t device;         /* enum presence_device */
    uint8_t manual;         /* enum presence_status: the user's explicit AWAY, BUSY or
                             * DND, which activity does not change; else OFFLINE */
    uint8_t flags;          /* S_* */
    char sid[];             /* NUL-terminated; allocated from offsetof(), not sizeof(),
                             * so that a 32-character id fits pool class 144 */
};
_Static_assert(sizeof(((struct session *)0)->grace_ms) >=
                   sizeof(((struct presence_config *)0)->session_ttl_ms),
               "a session's grace_ms holds up to session_ttl_ms");

struct presence {
    struct presence_config cfg;
    struct wheel *wheel;
    presence_change_cb *on_change;
    presence_end_cb *on_end;
    void *ctx;
    struct hmap users;    /* struct user by uid */
    struct hmap sessions; /* struct session by sid */
    struct list lru;      /* last-seen records, oldest offline first */
    uint64_t seq;         /* last version handed out */
    unsigned depth;       /* callbacks on the stack */
    struct presence_stats stats;
};

/* ---- accessors ---- */
static inline bool presence__is_set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

static inline uint64_t presence__status_expires_of(const struct session *s)
{
    return s->x ? s->x->status_expires : 0;
}

static inline uint64_t presence__custom_expires_of(const struct extra *x)
{
    return x ? x->custom_expires : 0;
}

static inline const char *presence__text_of(const struct extra *x)
{
    return x ? x->text : NULL;
}

static inline const char *presence__emoji_of(const struct extra *x)
{
    return x ? x->emoji : NULL;
}

static inline enum presence_status presence__session_status(const struct session *s)
{
    if (s->manual != PRESENCE_OFFLINE)
        return (enum presence_status)s->manual;
    return (s->flags & S_ACTIVE) ? PRESENCE_ONLINE : PRESENCE_AWAY;
}

static inline bool presence__session_active(const struct session *s)
{
    return s->flags & S_ACTIVE;
}

static inline bool presence__session_attached(const struct session *s)
{
    return s->flags & S_ATTACHED;
}

static inline void presence__session_flag(struct session *s, uint8_t flag, bool on)
{
    s->flags = (uint8_t)(on ? s->flags | flag : s->flags & ~flag);
}

static inline bool presence__user_has_sessions(const struct user *u)
{
    return u->sessions != NULL;
}

/* ---- presence.c ---- */

/* pool_alloc(n), counted in stats.allocations; pool_free() it. */
void *presence__palloc(struct presence *p, size_t n);
/* A new extra with these fields (strings copied, "" or NULL = none), or
 * NULL when all of them are none. */
struct extra *presence__extra_new(struct presence *p, uint64_t status_expires,
                                  uint64_t custom_expires, const char *text, const char *emoji);
/* The user or session of that id, or NULL (also for an id that could not
 * be stored). */
struct user *presence__user_find(const struct presence *p, const char *uid);
struct session *presence__session_find(const struct presence *p, const char *sid);
/* A new live user of id uid without sessions, in p's users table. */
struct user *presence__user_new(struct presence *p, const char *uid);
/* Takes u off the LRU list if it is a last-seen record: live again. */
void presence__user_unrecord(struct presence *p, struct user *u);
/* Puts u where its state says it belongs: live, a last-seen record, or
 * freed (see the file comment of presence.c); u may be gone after. */
void presence__user_settle(struct presence *p, struct user *u);
/* A change to u's view may have happened: arms u's debounce timer unless
 * armed, so that a flush is due. */
void presence__user_touch(struct presence *p, struct user *u, uint64_t now);

/* Makes u's current view its emitted one, with a new version and no
 * on_change (a restored user: presence_session_restore()). */
void presence__user_publish(struct presence *p, struct user *u);

/* ---- presence_session.c ---- */

/* Removes s from every table and timer; its user stays. */
void presence__session_unlink(struct presence *p, struct session *s);
/* Frees s (after presence__session_unlink()). */
void presence__session_free(struct session *s);
/* Fills *out from s (strings borrowed from s). */
void presence__session_info(const struct session *s, struct presence_session_info *out);

#endif
