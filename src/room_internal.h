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
#include "wheel.h"

/* One delta message kept for resume. */
struct ring_entry {
    struct payload *payload; /* a reference */
    size_t json_len;         /* the JSON is the payload's tail */
    uint64_t seq;
};

/* Circular array of the last deltas of a room, consecutive seqs; grows on
 * demand up to ring_len entries so that quiet rooms stay small. */
struct ring {
    struct ring_entry *v; /* cap entries */
    size_t cap;
    size_t head;  /* index of the oldest entry */
    size_t n;     /* entries in use */
    size_t bytes; /* sum of their payload lengths */
};

/* The latest value of one ephemeral kind of one sender. */
struct slot {
    char kind[ROOM_KIND_MAX + 1];
    struct buf data; /* compact JSON of the latest value */
    uint64_t order;  /* publish order while pending; 0 = nothing pending */
};

/* Ephemeral state of a member that has published; freed when it leaves. */
struct sender {
    struct wheel_timer timer; /* next allowed emission while values wait */
    struct member *m;         /* owner */
    uint64_t last_emit;       /* now of the last emission */
    bool emitted;             /* last_emit is valid */
    size_t nslots;
    struct slot slots[]; /* max_ephemeral_kinds */
};

struct member {
    struct hmap_node node; /* in room->members, by user id */
    struct list order;     /* room->order: creation (join) order */
    struct list dirty;     /* room->dirty while changed since the last flush */
    struct room *room;
    char **sessions;    /* nsessions ids (pool.h copies), join order */
    uint32_t nsessions; /* at most cfg.max_sessions */
    uint32_t cap_sessions;
    struct payload *meta;     /* current metadata, compact JSON; never NULL */
    struct payload *pub_meta; /* as last published; NULL when not published */
    uint64_t joined_at;       /* wall ms, current */
    uint64_t pub_joined_at;   /* wall ms, as last published */
    struct sender *sender;    /* NULL until it publishes ephemeral data */
    bool visible;             /* the privacy flag */
    bool pub;                 /* subscribers see this member (published present) */
    char user[];              /* NUL-terminated; the member and its strings are pool.h
                                 objects: they live as long as the membership */
};

struct room {
    struct hmap_node node; /* in engine->rooms, by id */
    struct room_engine *e;
    char id[ROOM_ID_MAX + 1];
    uint64_t epoch;
    uint64_t seq;        /* of the last emitted delta */
    enum room_mode mode; /* as last published */
    struct hmap members; /* struct member by user id */
    struct list order;   /* every member record, creation order */
    struct list dirty;   /* records changed since the last flush */
    size_t present;      /* members with at least one session */
    size_t published;    /* visible members as published: the count */
    size_t pub_bytes;    /* about the published members' share of a snapshot */
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
    struct hmap rooms;          /* struct room by id */
    uint64_t rooms_created;     /* epoch counter */
    uint64_t ephemeral_order;   /* slot order counter */
    uint32_t ephemeral_period;  /* ms between one sender's messages */
    unsigned depth;             /* callbacks running */
    struct payload *empty_meta; /* "{}", shared by members without metadata */
    struct buf lists[3];        /* joins, leaves, patches while flushing */
    struct buf out;             /* the message being encoded */
    struct room_stats stats;
};

/* ---- room.c ---- */

/* True when s is 1..max bytes of the id characters (see room.h). */
bool room__id_ok(const char *s, size_t max);
/* Parses (p, n) as one JSON value and returns its compact form (free()
 * it), or NULL with *err = size_err when the text or its compact form is
 * over max bytes, json_err when it is not one JSON value (or not UTF-8). */
char *room__compact_json(const char *p, size_t n, size_t max, int size_err, int json_err, int *err);
/* Validates room and user ids and finds the member, which must have a
 * session: 0, ROOM_E_ROOM_ID, _USER_ID, _NO_ROOM or _NOT_MEMBER. */
int room__find_member(const struct room_engine *e, const char *room, const char *user,
                      struct member **out);
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
void room__sender_free(struct member *m);

#endif
