/* SPDX-License-Identifier: MIT */
/*
 * room_internal.h - what the files of the room module share: room.c
 * (rooms, members, membership calls), room_publish.c (the flush, message
 * values, the snapshot cache), room_ring.c (the resume ring), room_info.c
 * (reads and admin lists), room_view.c (views of readers some members
 * hide from) and room_ephemeral.c (the ephemeral lane). It
 * holds the engine's private types and the room__ functions one file
 * calls in another. Not part of the room API: only those files include
 * it.
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

/* What a ring record holds: a delta, a snapshot (the one that ends
 * interval mode), or a snapshot of a room with nothing to show (its head
 * is the empty room's, not the room's own). */
enum { RING_DELTA, RING_SNAPSHOT, RING_EMPTY };

/* One message kept for resume as its value, compactly: the head is
 * rebuilt from the room and these fields, the tail holds the lists
 * (RING_DELTA: uint32 njoins, nleaves, npatches, in interval mode the
 * three uint32 totals, then the join entries, the leave ids and the patch
 * entries; RING_SNAPSHOT: uint32 nmembers, then the entries). An entry is
 * uint8 user length, uint32 meta length, uint64 joinedAt, the user id
 * with its NUL, the metadata; a leave is the user id with its NUL. No
 * byte of any wire format: resume has the codec encode it again (a W1
 * join: 59 bytes of tail for a 216-byte frame; its JSON lists took 84).
 * Its seq is its place in the ring. A pool.h object of offsetof(tail) +
 * len bytes. */
struct ring_rec {
    uint32_t wire_len; /* bytes of the codec's payload: what the byte bounds count */
    uint32_t count;    /* the head's count */
    uint32_t len;      /* bytes in tail */
    uint64_t digest;   /* the head's digest */
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

/* A user known to hide from some reader (room_note_hider()). */
struct hider {
    struct hmap_node node; /* in engine->hiders, by id */
    char id[];
};

#define VLOG_IDS 64u /* users in a view-log record's lists, at most */

/* One message of a room whose numbering some readers' views skip or
 * restart on (room_view.c): a delta that changed only hiders (u, nu
 * ids), and/or a message after which only hiders were shown (p, np ids).
 * A pool.h object; the ids are NUL-terminated, back to back, u first. */
struct vlog_rec {
    uint64_t seq;
    uint8_t nu, np; /* 0 = that list is not recorded */
    char ids[];
};

/* The view log of a room's current epoch: its last ring_len records,
 * oldest first; floor is the seq of the newest one dropped (0 = none). */
struct vlog {
    struct vlog_rec **v;
    uint32_t n, cap;
    uint64_t floor;
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
    uint64_t digest;  /* room_digest() of the published visible members */
    size_t pub_bytes; /* about the published members' share of a snapshot */
    struct wheel_timer flush_timer;
    struct ring ring;
    struct room_msg snap; /* cached snapshot (payload NULL = none), valid at snap.seq */
    struct vlog vlog;     /* for the views of readers some members hide from */
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
    struct room_entry *ents[2];        /* message lists being built: joins or members, patches */
    size_t cap_ents[2];
    const char **leaves; /* a delta's leave ids, pointing into leave_ids or a ring record */
    size_t cap_leaves;
    struct buf leave_ids; /* copies of the ids that leave in a flush, NUL-terminated */
    /* A flush's entries as published before it: leaves' [0] and patches'
     * [1] (room_delta_view.leaves_prev), their metadata kept alive by
     * prev_refs until the delta has gone out. */
    struct room_entry *prev_ents[2];
    size_t cap_prev_ents[2];
    struct payload **prev_refs;
    size_t nprev_refs, cap_prev_refs;
    struct buf scratch;   /* the codec's (struct room_codec) */
    struct hmap hiders;   /* struct hider: users that block some reader */
    struct buf vlog_ids;  /* a flush's changed hiders, then a view-log record's ids */
    struct buf vlog_next; /* ditto, being collected */
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
/* Calls cb (if any) with ev, which the caller filled but for room, epoch
 * and droppable (user != NULL: an ephemeral); r is not deleted while cb
 * runs. */
void room__emit(struct room *r, room_emit_cb *cb, struct room_event *ev);
/* Deletes r when it has no member records and no callback for it runs;
 * true when r is gone. */
bool room__maybe_delete(struct room *r);

/* A new epoch, nonzero and below 2^53, from epoch_seed and a counter. */
uint64_t room__next_epoch(struct room_engine *e);
/* e's room named id, or NULL. */
struct room *room__find(const struct room_engine *e, const char *id);
/* m's nsessions session ids, join order. */
char *const *room__sessions(const struct member *m);
/* Frees m, which must not be in its room's dirty list (unless the room
 * is being freed). */
void room__member_free(struct room *r, struct member *m);

/* ---- room_publish.c ---- */

/* The flush timer of a room (room->flush_timer): flushes its batch. */
void room__on_flush_timer(struct wheel_timer *t, uint64_t now);
/* Grows the scratch list i (0 or 1) to hold n entries; returns it. */
struct room_entry *room__ents_reserve(struct room_engine *e, int i, size_t n);
/* Grows the scratch leave list to hold n ids; returns it. */
const char **room__leaves_reserve(struct room_engine *e, size_t n);
/* A message of payload p (a reference, handed over) at seq. */
struct room_msg room__make_msg(struct payload *p, uint64_t seq);
/* True when m is listed to a reader: published and not hidden by hide
 * (NULL: hides none). */
bool room__listed(const struct member *m, room_hide_fn *hide, void *ctx);
/* How many of r's published members (r NULL: none) that reader sees; sets
 * *digest to their room_digest(). */
size_t room__shown(const struct room *r, room_hide_fn *hide, void *ctx, uint64_t *digest);
/* room's snapshot by codec into *out (a reference): 0 or ROOM_E_ROOM_ID.
 * An unknown room reads as the empty room of epoch 0. The cache holds the
 * room's own codec's snapshot only, and is filled only when keep. */
int room__snapshot(struct room_engine *e, const char *room, bool keep,
                   const struct room_codec *codec, struct room_msg *out);

/* ---- room_ring.c ---- */

/* Frees every record of g and g's array; g is then empty. */
void room__ring_release(struct ring *g);
/* A record of msg, the delta whose value is v (a pool.h object). */
struct ring_rec *room__ring_rec_delta(const struct room_msg *msg, const struct room_delta_view *v);
/* A record of msg, the snapshot whose value is v (a pool.h object). */
struct ring_rec *room__ring_rec_snapshot(const struct room_msg *msg,
                                         const struct room_snapshot_view *v);
/* Makes room in r's ring for a newest message of len bytes as encoded,
 * evicting the oldest ones beyond ring_len entries or max_bytes bytes.
 * False when len > max_bytes: the ring is then empty and the message is
 * not to be kept. */
bool room__ring_make_room(struct room_engine *e, struct room *r, size_t len, size_t max_bytes);
/* Keeps x (consumed), the record of r's newest message, as the ring's
 * newest entry (after room__ring_make_room() said yes). */
void room__ring_append(struct room_engine *e, struct room *r, struct ring_rec *x);

/* ---- room_view.c ---- */

/* Records r's newest message (r->seq) in its view log when views skip or
 * restart on it: u (ulen bytes) holds the nu users it changed,
 * NUL-terminated, when they are all hiders (nu 0: not so, or a snapshot). */
void room__vlog_note(struct room_engine *e, struct room *r, const char *u, size_t ulen, size_t nu);
/* Empties r's view log (a new epoch, or r is freed). */
void room__vlog_release(struct vlog *g);
/* Frees the hider set. */
void room__hiders_release(struct room_engine *e);

/* ---- room_ephemeral.c ---- */

/* Drops m's ephemeral state (pending values and timer). */
void room__sender_free(struct room_engine *e, struct member *m);

#endif
