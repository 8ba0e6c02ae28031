/* SPDX-License-Identifier: MIT */
/*
 * room_internal.h - what room.c (members, deltas, snapshots, resume) and
 * room_ephemeral.c (the ephemeral lane) share: the engine's private types
 * and the few room__ functions one file calls in the other. Not part of
 * the room API: only those two files include it.
 */
#ifndef ROOM_INTERNAL_H
#define ROOM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "hmap.h"
#include "list.h"
#include "room.h"
#include "util.h"
#include "wheel.h"

#define META_CACHE     64u  /* recent metadata values shared by later members */
#define META_CACHE_MAX 256u /* bytes: longer values are not shared */

/* How a ring record's text is kept. Resume rebuilds a message's head
 * ({"type":T,"room":R,"epoch":E,"seq":N,"mode":M,"count":C) from the room
 * and the record; RING_LISTS keeps of a normal-mode delta only its three
 * lists (two uint32 lengths, of joins and leaves, then the three bodies),
 * RING_DELTA and RING_SNAPSHOT the JSON after the head, RING_RAW, for a
 * head that is not the room's own (a snapshot of a room with nothing to
 * show), the whole JSON. */
enum { RING_LISTS, RING_DELTA, RING_SNAPSHOT, RING_RAW };

/* One message kept for resume, compactly: no payload or frame header, no
 * head, and for a normal-mode delta no list keys (a W1 join: 84 bytes for
 * a 216-byte frame). Nothing is shared with the frame that went out,
 * which is freed once delivered. Its seq is its place in the ring. A
 * pool.h object of offsetof(tail) + len bytes. */
struct ring_rec {
    uint32_t wire_len; /* bytes of the framed message: what the byte bounds count */
    uint32_t count;    /* the head's count */
    uint32_t len;      /* bytes in tail */
    uint8_t kind;      /* RING_* */
    uint8_t mode;      /* the head's mode (enum room_mode) */
    char tail[];
};

/* Circular array of the last messages of a room, consecutive seqs ending
 * at the room's seq; grows on demand up to ring_len entries so that quiet
 * rooms stay small. */
struct ring {
    struct ring_rec **v; /* cap entries */
    uint32_t cap;
    uint32_t head;  /* index of the oldest entry */
    uint32_t n;     /* entries in use */
    uint32_t bytes; /* sum of their wire_len (<= ring_bytes) */
};

/* The latest value of one ephemeral kind of one sender. */
struct slot {
    char kind[ROOM_KIND_MAX + 1];
    struct buf data; /* compact JSON of the latest value */
    uint64_t order;  /* publish order while pending; 0 = nothing pending */
};

/* Ephemeral state of a member that has published; freed when it leaves. */
struct sender {
    struct hmap_node node;    /* in engine->senders, by member address */
    struct wheel_timer timer; /* next allowed emission while values wait */
    struct member *m;         /* owner */
    struct room *room;        /* m's room */
    uint64_t last_emit;       /* now of the last emission */
    bool emitted;             /* last_emit is valid */
    size_t nslots;
    struct slot slots[]; /* max_ephemeral_kinds */
};

/*
 * A member is one pool.h object: this header, then its user id and the
 * first session id it joined with (sized to fit), so that the usual member
 * of one session costs one allocation. Its other session ids are pool.h
 * copies. The rare parts live elsewhere: the ephemeral sender in
 * engine->senders, the pending-change mark in room->dirty. It does not
 * point to its room: every path to a member comes through the room.
 */
struct member {
    struct hmap_node node; /* in room->members, by user id */
    struct list order;     /* room->order: creation (join) order */
    union {
        char *one;   /* nsessions <= 1: the session id, or NULL */
        char **many; /* nsessions >= 2: the ids, join order (pool.h array) */
    } sid;
    struct payload *meta;     /* current metadata, compact JSON; never NULL */
    struct payload *pub_meta; /* as last published; NULL when not published */
    uint64_t joined_at;       /* wall ms; what subscribers see while pub (it
                                 changes only while the member is not published) */
    uint32_t nsessions;       /* at most cfg.max_sessions */
    bool visible : 1;         /* the privacy flag */
    bool pub : 1;             /* subscribers see this member (published present) */
    bool dirty : 1;           /* in room->dirty: changed since the last flush */
    bool sender : 1;          /* has ephemeral state in engine->senders */
    bool sid_inline : 1;      /* a session id lives in the inline copy */
    char user[];              /* NUL-terminated, then the inline session id copy */
};

struct room {
    struct hmap_node node; /* in engine->rooms, by id */
    struct room_engine *e;
    char id[ROOM_ID_MAX + 1];
    uint64_t epoch;
    uint64_t seq;          /* of the last emitted delta */
    uint64_t flushed_at;   /* now of the last emitted delta, 0 = none */
    enum room_mode mode;   /* as last published */
    struct hmap members;   /* struct member by user id */
    struct list order;     /* every member record, creation order */
    struct member **dirty; /* records changed since the last flush, in the
                              order of their first change (pool.h; NULL when none) */
    uint32_t ndirty;
    uint32_t cap_dirty;
    size_t present;   /* members with at least one session */
    size_t hidden;    /* of those, invisible ones (not in the room to others) */
    size_t published; /* visible members as published: the count */
    size_t pub_bytes; /* about the published members' share of a snapshot */
    struct wheel_timer flush_timer;
    struct ring ring;
    struct room_msg snap; /* cached snapshot (payload NULL = none), valid at snap.seq */
    unsigned busy;        /* callbacks running for this room: deletion waits */
};

struct room_engine {
    struct room_config cfg;
    struct wheel *wheel; /* borrowed */
    room_emit_cb *on_delta;
    room_emit_cb *on_ephemeral;
    void *ctx;
    struct hmap rooms;                 /* struct room by id */
    struct hmap senders;               /* struct sender by member address */
    uint64_t rooms_created;            /* epoch counter */
    uint64_t ephemeral_order;          /* slot order counter */
    uint32_t ephemeral_period;         /* ms between one sender's messages */
    unsigned depth;                    /* callbacks running */
    struct payload *empty_meta;        /* "{}", shared by members without metadata */
    struct payload *metas[META_CACHE]; /* recent metadata values, by hash: shared */
    struct buf lists[3];               /* joins, leaves, patches while flushing */
    struct buf out;                    /* the message being encoded */
    struct buf head;                   /* a ring record's head, to compare */
    struct room_stats stats;
};

/* ---- room.c ---- */

/* Hash of a member's address, its key in engine->senders. */
static inline uint64_t room__member_hash(const struct member *m)
{
    return hash_bytes(&m, sizeof(m));
}

/* True when s is 1..max bytes of the id characters (see room.h). */
bool room__id_ok(const char *s, size_t max);
/* Parses (p, n) as one JSON value and returns its compact form (free()
 * it), or NULL with *err = size_err when the text or its compact form is
 * over max bytes, json_err when it is not one JSON value (or not UTF-8). */
char *room__compact_json(const char *p, size_t n, size_t max, int size_err, int json_err, int *err);
/* Validates room and user ids and finds the room (*rp) and the member
 * (*out), which must have a session: 0, ROOM_E_ROOM_ID, _USER_ID, _NO_ROOM
 * or _NOT_MEMBER. */
int room__find_member(const struct room_engine *e, const char *room, const char *user,
                      struct room **rp, struct member **out);
/* One message from the JSON in b, through the frame function; the caller
 * owns the reference. */
struct room_msg room__make_msg(const struct room_engine *e, const struct buf *b, uint64_t seq);
/* Calls cb (if any) with msg; r is not deleted while cb runs. user is the
 * ephemeral sender (it makes the event droppable), NULL for deltas. */
void room__emit(struct room *r, room_emit_cb *cb, const struct room_msg *msg, const char *user);
/* Deletes r when it has no member records and no callback for it runs;
 * true when r is gone. */
bool room__maybe_delete(struct room *r);

/* ---- room_ephemeral.c ---- */

/* Drops m's ephemeral state (pending values and timer). */
void room__sender_free(struct room_engine *e, struct member *m);

#endif
