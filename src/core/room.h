/* SPDX-License-Identifier: MIT */
/*
 * room.h - room presence for one partition: members (users, de-duplicated
 * across their sessions), metadata, batched and sequenced deltas, snapshots,
 * resume from a sequence number, large-room interval mode, and a separate,
 * rate-limited ephemeral lane (cursors, typing).
 *
 * A partition owns a set of rooms (the server picks one per room id by
 * hashing; a worker owns one partition). This module is a single-threaded,
 * pure state machine: no sockets, no threads, no clock reads. Time comes in
 * as `now` arguments (monotonic milliseconds) and through the wheel it is
 * given; every message leaves through two callbacks, encoded once.
 *
 * ---- Members ----
 *
 * A member is a USER in a room. A user is in a room through one or more
 * sessions (tabs, devices): room_join() adds a session, room_leave()
 * removes one, and the member leaves only when its last session has left.
 * So a second tab, or closing one of two tabs, changes nothing that
 * subscribers see. A member has:
 *   - metadata: one JSON value (display name, colour, ...), at most
 *     max_meta_bytes (1 KiB) both as given and as stored. It is parsed with
 *     cJSON and stored re-serialized compactly (no whitespace; numbers are
 *     doubles, so integers beyond 2^53 lose precision). {} when a member
 *     joins without metadata. A later join with metadata replaces it (the
 *     newest tab wins); a join without (NULL) keeps it.
 *   - joinedAt: wall-clock ms of its first session (`now` +
 *     wall_offset_ms, see room_config). A member whose leave had not been
 *     published yet when it rejoined keeps its original joinedAt.
 *   - its session ids, and a visible flag (below).
 *   - per-session values: metadata that is an object with the reserved
 *     member "~metas" (ROOM_SESSION_VALUES), itself an object keyed by
 *     session id, holds one value per session (a protocol that shows one
 *     entry per connection, Phoenix, keeps each connection's meta there).
 *     A join whose metadata has "~metas" keeps the values of the member's
 *     other sessions that its own "~metas" does not name (the rest of the
 *     object is the newest join's, as above), and a session's leave drops
 *     the value under its id (a patch, if the member stays). Beyond that
 *     they are ordinary metadata, within the same max_meta_bytes.
 * Updates are in place: room_patch() applies an RFC 7386 JSON merge patch
 * (objects merge recursively, a null member deletes that key, any other
 * value replaces), room_set_meta() replaces the whole value. Neither ever
 * produces a leave+join pair.
 *
 * Ids: room, user and session ids are 1..128 bytes, kinds 1..32 bytes, of
 * A-Z a-z 0-9 and - _ . ~ : @ (the rule presence.h uses for user and session
 * ids: safe in URLs, JSON and logs without escaping). A session id is unique
 * within its member.
 *
 * ---- Deltas and sequence numbers ----
 *
 * Changes are not sent one by one: the first change in a room arms a flush
 * timer batch_ms (50 ms) later, and when it fires the engine compares, for
 * every member changed in the window, the state subscribers last saw with
 * the current one. So churn inside a window cancels out: join+leave is
 * nothing, leave+rejoin is nothing (or a patch if the metadata changed),
 * several patches are one patch with the final state. If anything remains,
 * the room's sequence number goes up by exactly one and one room_delta
 * message carries the joins (full member objects), leaves (user ids) and
 * patches (full member objects, replacing the old ones). Per room, deltas
 * are emitted in sequence order; seq 1 is a room's first delta and applies
 * to the empty room.
 *
 * Snapshots and reads show the PUBLISHED state: exactly the state after the
 * deltas up to their seq, never a pending change. So "snapshot at seq N,
 * then deltas N+1, N+2, ..." is always consistent, with no race between
 * the two, provided the integrator takes the snapshot (or resume) and adds
 * the subscriber in the same step on the owning worker. A change becomes
 * visible to reads at the flush (room_flush() forces one early, e.g. to
 * show a joining client itself at once).
 *
 * ---- Resume, epochs, deletion ----
 *
 * Every room keeps a ring of its last ring_len (256) delta messages, at most
 * ring_bytes (64 KiB) in all, and no more bytes than about its snapshot
 * (4 KiB at least): a resume that would send more than a snapshot is no
 * better than the snapshot, and an idle room holds O(its state), not 64
 * KiB. A cached snapshot is dropped when the room moves on (it would never
 * be served again). room_resume(epoch, since) returns exactly the
 * messages after `since` when the ring still has all of them, else a fresh
 * snapshot (and says which). Every room has an epoch, a nonzero number
 * below 2^53 drawn from epoch_seed when the room is created: a room that
 * was deleted and re-created has another epoch, and a resume with an old
 * epoch, a seq from the future or one older than the ring gets a snapshot.
 * A room is deleted when its last member has left and that leave has been
 * flushed. A room that does not exist reads as the empty room of epoch 0
 * at seq 0: its snapshot has no members, and resume(0, 0) on it returns no
 * deltas (the client is up to date). A client whose model is empty (count
 * 0) may adopt a new epoch at its seq 1 delta: that delta applies to the
 * empty state.
 *
 * ---- Large rooms (interval mode) ----
 *
 * When a flush leaves a room with interval_enter (1000) or more visible
 * members, the room switches to interval mode: batches are flushed every
 * interval_ms (1 s) instead of batch_ms; each list in a delta holds at most
 * interval_list_limit (100) entries and the delta carries the exact totals
 * (joinCount, leaveCount, patchCount); snapshots list the first
 * snapshot_limit (100) members in join order. count is always exact. The
 * first delta in the new mode says "mode":"interval" (every delta and
 * snapshot carries the mode); from then on a client's member list is a
 * sample. When a flush leaves interval_leave (800) or fewer visible members
 * (hysteresis: a room around one threshold does not flap), the room goes
 * back to normal mode, and the message for that seq is a full room_snapshot
 * ("mode":"normal") instead of a delta, which restores exact lists.
 *
 * ---- Visibility (privacy hook) ----
 *
 * A member is visible by default. room_set_visible(false) makes it absent
 * for subscribers: it is left out of snapshots, deltas, counts and reads as
 * if it had left (subscribers get a leave; becoming visible again is a
 * join, and joinedAt reads as the moment it became visible). It still holds
 * its sessions, but counts toward max_members only in the hard bound of
 * twice that, and it cannot publish ephemeral messages. A join that brings a member back from
 * zero sessions makes it visible again; to join invisibly, set the flag
 * right after room_join(): within the batch window only the final state
 * counts.
 *
 * ---- Ephemeral lane ----
 *
 * room_ephemeral() publishes short-lived data (a cursor, a typing flag) of
 * a kind, from a visible member, as an "ephemeral" message that never gets
 * a seq, never enters the ring and goes through its own callback: the
 * integrator may drop these first under backpressure. Per sender (member),
 * at most one message goes out per 1000/ephemeral_rate ms (67 ms at 15/s):
 * a publish after a quiet period is emitted at once; otherwise the value is
 * kept, per kind, replacing any older pending value of that kind (latest
 * wins), and a timer emits the oldest pending kind when the sender's period
 * has passed. So the last value is always delivered, late by at most one
 * period per pending kind. A sender has at most max_ephemeral_kinds kinds.
 * Pending values are dropped when the member leaves or turns invisible. An
 * ephemeral message never precedes its sender's join: while the join waits
 * in the batch, the sender's values wait too (latest wins) and go out right
 * after the flush that publishes it; they never force an early flush.
 *
 * ---- Encode once, by the integrator's codec ----
 *
 * This module does not know any wire format. It describes every message
 * as a structured value (struct room_delta_view, room_snapshot_view,
 * room_ephemeral_view below: ids, numbers, member entries whose metadata
 * is the stored JSON bytes) and has the codec the integrator configured
 * (struct room_codec) turn it into a refcounted struct payload, once per
 * message. The payload is opaque here: the callbacks and room_snapshot()
 * hand out references to that same payload, and the integrator queues it
 * on every subscriber of that protocol. Snapshots are cached per seq (the
 * codec's payload, in malloc: re-encoded at every seq of a join burst, in
 * the pool it churned that pool's pages instead, which measured worse).
 * The ring keeps each delta's structured value compactly in lasting
 * memory (payload_lasting()'s pool: held while the room is idle, it stays
 * out of the malloc arenas the burst's frames churn) and room_resume()
 * has the codec encode it again: a deterministic codec gives the same
 * bytes that went out. Member metadata and ephemeral data stay JSON in
 * every protocol: they are the application's values.
 *
 * ---- Lifetimes and callbacks ----
 *
 * Strings and pointers in views are borrowed from the engine: valid until
 * the next call that changes it (or, in a callback, until it returns). The
 * same holds for the message values a callback gets (struct room_event),
 * and for those the codec gets, during its call.
 * on_delta is called for every room_delta (and mode-switch room_snapshot)
 * from wheel_run() and room_flush(); on_ephemeral from wheel_run() and
 * room_ephemeral(). Callbacks may call any room_* function
 * except room_engine_free(), and must not call wheel_run(). A failing call
 * never fires a callback. Nothing the engine is using is freed while a
 * callback runs; a room emptied during a callback is deleted after it.
 *
 * ---- The HTTP API's JSON ----
 *
 * room_encode_info(), room_encode_info_for() and room_admin_*() write the
 * HTTP API's objects (docs/api.md), not a client protocol's messages, so
 * they stay here:
 *   info     {"room":"r","epoch":E,"seq":N,"mode":"normal","count":C,"members":[member...]}
 *   member   {"user":"u1","joinedAt":1764406800000,"meta":{"name":"Ann"}}
 * The native protocol's room messages (room_delta, room_snapshot,
 * ephemeral: docs/protocol.md) are its adapter's codec
 * (src/proto/native/native_encode.c).
 */
#ifndef ROOM_H
#define ROOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "util.h"
#include "wheel.h"

#define ROOM_ID_MAX   128u /* bytes in a room, user or session id */
#define ROOM_KIND_MAX 32u  /* bytes in an ephemeral kind */

#define ROOM_SESSION_VALUES "~metas" /* metadata's per-session values (see Members) */

/* Errors: negative, distinct, with room_strerror(). */
enum {
    ROOM_E_ROOM_ID = -(PS_EBASE + 300),    /* room id empty, > 128 bytes or bad character */
    ROOM_E_USER_ID = -(PS_EBASE + 301),    /* user id empty, > 128 bytes or bad character */
    ROOM_E_SESSION_ID = -(PS_EBASE + 302), /* session id empty, > 128 bytes or bad character */
    ROOM_E_META_SIZE = -(PS_EBASE + 303),  /* metadata or patch (or its result) too large */
    ROOM_E_META_JSON = -(PS_EBASE + 304),  /* metadata or patch is not one JSON value */
    ROOM_E_FULL = -(PS_EBASE + 305),       /* room already has max_members members */
    ROOM_E_SESSIONS = -(PS_EBASE + 306),   /* member already has max_sessions sessions */
    ROOM_E_JOINED = -(PS_EBASE + 307),     /* this session is already in the room */
    ROOM_E_NO_ROOM = -(PS_EBASE + 308),    /* no such room */
    ROOM_E_NOT_MEMBER = -(PS_EBASE + 309), /* user is not a member (or is leaving) */
    ROOM_E_NO_SESSION = -(PS_EBASE + 310), /* session is not in the room */
    ROOM_E_INVISIBLE = -(PS_EBASE + 311),  /* invisible members cannot publish */
    ROOM_E_KIND = -(PS_EBASE + 312),       /* ephemeral kind empty, > 32 bytes or bad character */
    ROOM_E_KINDS = -(PS_EBASE + 313),      /* sender already uses max_ephemeral_kinds kinds */
    ROOM_E_DATA_SIZE = -(PS_EBASE + 314),  /* ephemeral data over max_ephemeral_bytes */
    ROOM_E_DATA_JSON = -(PS_EBASE + 315),  /* ephemeral data is not one JSON value */
    ROOM_E_CONFIG = -(PS_EBASE + 316),     /* room_config_check() failed */
};

enum room_mode {
    ROOM_MODE_NORMAL,   /* "normal": every change, batch_ms windows, full lists */
    ROOM_MODE_INTERVAL, /* "interval": interval_ms batches, capped lists, exact counts */
};

enum room_resume_kind {
    ROOM_RESUME_DELTAS,   /* msgs are the missed deltas, oldest first (maybe none) */
    ROOM_RESUME_SNAPSHOT, /* msgs[0] is a snapshot: replace the client's state */
};

/* ---- messages as values (borrowed: see "Lifetimes and callbacks") ---- */

/* One member as a message lists it (its published state). */
struct room_entry {
    const char *user;
    uint64_t joined_at; /* wall ms */
    const char *meta;   /* compact JSON as stored, NOT NUL-terminated */
    size_t meta_len;
};

/* What every delta and snapshot starts with. */
struct room_head {
    const char *room;
    uint64_t epoch; /* 0 (with seq 0, count 0, normal) for a room with nothing to show */
    uint64_t seq;
    enum room_mode mode;
    size_t count;    /* visible members, exact in every mode */
    uint64_t digest; /* room_digest(): of the members listed to this reader (0: none) */
};

/* A delta: seq = the previous one + 1. In interval mode each list holds at
 * most interval_list_limit entries and *_total are the exact numbers of
 * changes (in normal mode they equal the list lengths). */
struct room_delta_view {
    struct room_head head;
    const struct room_entry *joins; /* njoins, in order of first change */
    size_t njoins;
    const char *const *leaves; /* nleaves user ids */
    size_t nleaves;
    const struct room_entry *patches; /* the members' new state */
    size_t npatches;
    size_t join_total, leave_total, patch_total;
    /* The entries as subscribers saw them before this delta, for the
     * protocols that show a change as "the old one out, the new one in"
     * (Phoenix's presence_diff): leaves_prev[i] is leaves[i]'s last
     * published entry, patches_prev[i] patches[i]'s. NULL in a delta that
     * the resume ring has encoded again (it keeps the new state only), so
     * such a protocol must not resume. */
    const struct room_entry *leaves_prev;
    const struct room_entry *patches_prev;
};

/* A snapshot: the published state at head.seq, members in join order (in
 * interval mode the first snapshot_limit). */
struct room_snapshot_view {
    struct room_head head;
    const struct room_entry *members;
    size_t nmembers;
};

/* An ephemeral value of kind from user; data is compact JSON. */
struct room_ephemeral_view {
    const char *room;
    const char *user;
    const char *kind;
    const char *data; /* NOT NUL-terminated */
    size_t data_len;
};

/* The integrator's encoders: each returns a new payload (one reference,
 * the caller's) for the value, which it borrows during the call only.
 * scratch is a buffer the encoder may use as it likes (its contents are
 * undefined before and after; the engine keeps it across calls, so that
 * encoding allocates nothing but the payload). Pure and deterministic (the
 * same value gives the same bytes: resume relies on it); they must not
 * fail (abort on OOM) or call room_*. */
struct room_codec {
    struct payload *(*encode_delta)(const struct room_delta_view *v, struct buf *scratch);
    struct payload *(*encode_snapshot)(const struct room_snapshot_view *v, struct buf *scratch);
    struct payload *(*encode_ephemeral)(const struct room_ephemeral_view *v, struct buf *scratch);
};

struct room_config {
    uint32_t max_members;           /* 10000 visible per room; with invisible ones, twice that */
    uint32_t max_sessions;          /* 32 per member */
    uint32_t max_meta_bytes;        /* 1024: metadata, patches and their results */
    uint32_t batch_ms;              /* 50: delta window in normal mode */
    uint32_t interval_ms;           /* 1000: delta period in interval mode */
    uint32_t interval_enter;        /* 1000 visible members: switch to interval mode */
    uint32_t interval_leave;        /* 800 (< interval_enter): back to normal mode */
    uint32_t snapshot_limit;        /* 100 members listed in interval-mode snapshots */
    uint32_t interval_list_limit;   /* 100 entries per list in interval-mode deltas */
    uint32_t ring_len;              /* 256 delta messages kept per room for resume */
    uint32_t ring_bytes;            /* 65536 payload bytes kept per room for resume */
    uint32_t ephemeral_rate;        /* 15 messages per second per sender */
    uint32_t max_ephemeral_bytes;   /* 1024 bytes of ephemeral data */
    uint32_t max_ephemeral_kinds;   /* 8 kinds per sender */
    uint64_t epoch_seed;            /* 0: seeds room epochs; pass a random value per start */
    int64_t wall_offset_ms;         /* 0: joinedAt = now + this (wall_now - mono_now) */
    const struct room_codec *codec; /* required by room_engine_new(): no default */
};

/* One encoded message: a reference to the codec's payload (the holder's). */
struct room_msg {
    struct payload *payload;
    uint64_t seq; /* the room's seq after this message; 0 for ephemeral */
};

enum room_event_kind {
    ROOM_EV_DELTA,     /* delta is set */
    ROOM_EV_SNAPSHOT,  /* snapshot is set: a mode switch back to normal */
    ROOM_EV_EPHEMERAL, /* ephemeral is set */
};

/* What a callback receives: the message as a value and as the configured
 * codec encoded it. Everything is borrowed until the callback returns or
 * calls a room_* function that changes the engine, whichever is first
 * (payload_ref() the payload to keep it). */
struct room_event {
    const char *room; /* room id */
    uint64_t epoch;   /* the room's epoch */
    uint64_t seq;     /* deltas: the new seq; ephemeral: 0 */
    const char *user; /* ephemeral: the sender; deltas: NULL */
    struct room_msg msg;
    bool droppable; /* true for ephemeral messages only */
    enum room_event_kind kind;
    const struct room_delta_view *delta;         /* ROOM_EV_DELTA, else NULL */
    const struct room_snapshot_view *snapshot;   /* ROOM_EV_SNAPSHOT, else NULL */
    const struct room_ephemeral_view *ephemeral; /* ROOM_EV_EPHEMERAL, else NULL */
};

struct room_engine;

/* on_delta: a lifecycle message (never drop it); on_ephemeral: a
 * droppable one. See "Lifetimes and callbacks". */
typedef void room_emit_cb(void *ctx, const struct room_event *ev);

/* Resume result: n references the caller owns (room_resume_release()). */
struct room_resume {
    enum room_resume_kind kind;
    struct room_msg *msgs; /* NULL when n == 0 */
    size_t n;
};

/* The published state of a room (what subscribers see). */
struct room_info {
    uint64_t epoch;      /* 0 when the room does not exist */
    uint64_t seq;        /* seq of the last delta */
    enum room_mode mode; /* as last published */
    size_t count;        /* visible members */
    uint64_t digest;     /* room_digest() of the visible members */
    size_t members;      /* members with a session now, invisible and unpublished included */
    bool pending;        /* changes wait for the flush timer */
    uint64_t flushed_at; /* now of the last delta (0 = none): joins batch within batch_ms */
};

/* One member, current state (not only the published one). */
struct room_member_view {
    const char *user;
    const char *meta; /* compact JSON, NOT NUL-terminated */
    size_t meta_len;
    uint64_t joined_at;             /* wall ms */
    const char *const *session_ids; /* nsessions ids, join order */
    size_t nsessions;
    bool visible;   /* the flag */
    bool published; /* subscribers currently see this member */
};

struct room_stats {
    uint64_t rooms;               /* rooms that exist */
    uint64_t members;             /* member records (leaving ones included) */
    uint64_t deltas;              /* lifecycle messages emitted */
    uint64_t snapshots;           /* snapshots encoded (cache misses) */
    uint64_t resumes_deltas;      /* room_resume() answered with deltas */
    uint64_t resumes_snapshot;    /* ... with a snapshot */
    uint64_t ephemeral_sent;      /* ephemeral messages emitted */
    uint64_t ephemeral_coalesced; /* ephemeral values replaced before sending */
};

/* Fills c with the defaults above. */
void room_config_init(struct room_config *c);
/* 0, or ROOM_E_CONFIG unless every limit is > 0, max_meta_bytes and
 * max_ephemeral_bytes are <= 1 MiB, interval_leave < interval_enter and
 * ephemeral_rate <= 1000. */
int room_config_check(const struct room_config *c);

/* A new engine that arms its timers on w (borrowed: must outlive it; the
 * caller runs it). cfg must pass room_config_check() and is copied; its
 * codec (borrowed: must outlive the engine) must be set.
 * on_delta and on_ephemeral may be NULL; ctx is passed to both. Aborts on
 * OOM. */
struct room_engine *room_engine_new(const struct room_config *cfg, struct wheel *w,
                                    room_emit_cb *on_delta, room_emit_cb *on_ephemeral, void *ctx);
/* Frees all state without emitting pending batches and unlinks every timer.
 * NULL is a no-op. Not from a callback. */
void room_engine_free(struct room_engine *e);
/* Sets wall_offset_ms for later joins (e.g. after the wall clock stepped). */
void room_engine_set_wall_offset(struct room_engine *e, int64_t wall_offset_ms);

/* ---- membership ---- */

/* Adds session to user's membership of room, creating the room and the
 * member as needed. meta (meta_len bytes) is the member's metadata, or NULL
 * to keep it ({} for a new member). 0, ROOM_E_ROOM_ID, _USER_ID,
 * _SESSION_ID, _META_SIZE, _META_JSON, _FULL, _SESSIONS or _JOINED; on
 * error nothing changes. */
int room_join(struct room_engine *e, const char *room, const char *user, const char *session,
              const char *meta, size_t meta_len, uint64_t now);
/* room_join() by a user who must not see the nunseen users in unseen (a
 * set of ids, borrowed during the call; those that block the joiner):
 * ROOM_E_FULL does not count them, so that a full room says nothing about
 * members hidden from the joiner (they still count in the hard bound of
 * twice max_members). */
int room_join_for(struct room_engine *e, const char *room, const char *user, const char *session,
                  const char *meta, size_t meta_len, uint64_t now, const char *const *unseen,
                  size_t nunseen);
/* Removes session; the member leaves with its last session. 0,
 * ROOM_E_ROOM_ID, _USER_ID, _SESSION_ID, _NO_ROOM, _NOT_MEMBER or
 * _NO_SESSION. */
int room_leave(struct room_engine *e, const char *room, const char *user, const char *session,
               uint64_t now);
/* Removes all of user's sessions (a kick). 0 or as room_leave(). */
int room_kick(struct room_engine *e, const char *room, const char *user, uint64_t now);
/* Merges an RFC 7386 merge patch (len bytes of JSON) into user's metadata.
 * 0, ROOM_E_ROOM_ID, _USER_ID, _NO_ROOM, _NOT_MEMBER, _META_SIZE (patch or
 * result over max_meta_bytes) or _META_JSON; on error nothing changes. */
int room_patch(struct room_engine *e, const char *room, const char *user, const char *patch,
               size_t len, uint64_t now);
/* Replaces user's metadata. Errors as room_patch(). */
int room_set_meta(struct room_engine *e, const char *room, const char *user, const char *meta,
                  size_t len, uint64_t now);
/* Sets user's visible flag (see "Visibility"). 0, ROOM_E_ROOM_ID,
 * _USER_ID, _NO_ROOM or _NOT_MEMBER. */
int room_set_visible(struct room_engine *e, const char *room, const char *user, bool visible,
                     uint64_t now);
/* Flushes room's pending batch now (on_delta fires inside if anything
 * changed); the room may be deleted by this call. 0, ROOM_E_ROOM_ID or
 * ROOM_E_NO_ROOM. */
int room_flush(struct room_engine *e, const char *room, uint64_t now);

/* ---- ephemeral lane ---- */

/* Publishes data (len bytes of JSON, stored compactly) of kind from user
 * (see "Ephemeral lane"); on_ephemeral may fire inside. 0, ROOM_E_ROOM_ID,
 * _USER_ID, _KIND, _NO_ROOM, _NOT_MEMBER, _INVISIBLE, _DATA_SIZE,
 * _DATA_JSON or _KINDS; on error nothing changes. */
int room_ephemeral(struct room_engine *e, const char *room, const char *user, const char *kind,
                   const char *data, size_t len, uint64_t now);

/* ---- snapshots, resume, reads ---- */

/* *out = the room's snapshot at its current seq (a new reference, the
 * caller's; payload_unref() it). The same payload is returned until the
 * seq changes. A room that does not exist gives the epoch-0 empty snapshot.
 * 0 or ROOM_E_ROOM_ID. */
int room_snapshot(struct room_engine *e, const char *room, struct room_msg *out);
/* room_snapshot(), except that a snapshot it has to encode is not kept
 * (the cached one is returned when it is current): for a reader after
 * whom the seq is expected to move anyway, so that an idle room does not
 * keep a snapshot's worth of bytes that no later reader would share. */
int room_snapshot_uncached(struct room_engine *e, const char *room, struct room_msg *out);
/* What a client that has room's state at (epoch, since) missed: returns
 * ROOM_RESUME_DELTAS with the deltas after since (none when up to date), or
 * ROOM_RESUME_SNAPSHOT with a snapshot when the ring does not reach back to
 * since, since is in the future, or the epoch differs (an epoch-0 client,
 * i.e. one with an empty model, at since 0, gets deltas from seq 1 when the
 * ring still has them). The caller owns *out's references
 * (room_resume_release()). ROOM_E_ROOM_ID on a bad id (*out is then empty). */
int room_resume(struct room_engine *e, const char *room, uint64_t epoch, uint64_t since,
                struct room_resume *out);
void room_resume_release(struct room_resume *r); /* drops the references; leaves r empty */
/* room_snapshot() and room_resume() with another codec than the
 * configured one (a second protocol's): the same messages, encoded by
 * codec (borrowed during the call). Its snapshots are not cached. */
int room_snapshot_as(struct room_engine *e, const char *room, const struct room_codec *codec,
                     struct room_msg *out);
int room_resume_as(struct room_engine *e, const char *room, uint64_t epoch, uint64_t since,
                   const struct room_codec *codec, struct room_resume *out);

/* Fills out with the room's published state. 0, ROOM_E_ROOM_ID or
 * ROOM_E_NO_ROOM (out then describes the empty room). */
int room_get_info(const struct room_engine *e, const char *room, struct room_info *out);
/* Fills out with user's current state, whether published or not (leaving
 * members, whose last session is gone, are not members). 0,
 * ROOM_E_ROOM_ID, _USER_ID, _NO_ROOM or _NOT_MEMBER. */
int room_get_member(const struct room_engine *e, const char *room, const char *user,
                    struct room_member_view *out);
/* Appends the published room as the "info" object, listing at most limit
 * members in join order (count stays exact); an absent room, and one whose
 * members are all hidden, appears as the empty one of epoch 0. 0 or
 * ROOM_E_ROOM_ID (nothing appended). */
int room_encode_info(const struct room_engine *e, const char *room, size_t limit, struct buf *out);
/* Whether a reader must not see user (a member that blocks the reader). */
typedef bool room_hide_fn(const char *user, void *ctx);
/* room_encode_info() as seen by a reader who must not see the members for
 * which hide(user, ctx) is true (called during the call only): they are
 * not listed and not counted, and a room left with nobody to show reads
 * as the empty one of epoch 0. hide NULL = room_encode_info(). */
int room_encode_info_for(const struct room_engine *e, const char *room, size_t limit,
                         room_hide_fn *hide, void *ctx, struct buf *out);
void room_get_stats(const struct room_engine *e, struct room_stats *out);
/* The sessions of the members of room that a reader who must not see
 * the members hide() names would list (room_encode_info_for()): the
 * published members' sessions. 0 for no room. hide NULL = every published
 * member. */
size_t room_listed_sessions(const struct room_engine *e, const char *room, room_hide_fn *hide,
                            void *ctx);
/* Calls fn(ctx, room, count, sessions) for every room with a published
 * member: count its published members, sessions theirs (as
 * room_listed_sessions()). fn must not change the rooms. */
typedef void room_list_fn(void *ctx, const char *room, size_t count, size_t sessions);
void room_list_published(const struct room_engine *e, room_list_fn *fn, void *ctx);
/* Calls fn(ctx, room, m) for every current member of every room (hidden
 * ones included, leaving ones not), in no particular order; m is borrowed
 * for the call. fn must not change e. For saving the rooms at a stop. */
typedef void room_member_fn(void *ctx, const char *room, const struct room_member_view *m);
void room_each_member(const struct room_engine *e, room_member_fn *fn, void *ctx);
/* Admin API: appends {"room":id,"members":n,"visible":n} for every room
 * with members, comma-separated (*first: nothing appended yet; cleared). */
void room_admin_list(const struct room_engine *e, struct buf *out, bool *first);
/* Admin API: the n (1..ROOM_ADMIN_TOP_MAX) rooms with the most members,
 * most first (ties in no set order), one line each: "<members> " then
 * {"room":id,"members":n,"visible":n} and "\n". */
#define ROOM_ADMIN_TOP_MAX 100
void room_admin_top(const struct room_engine *e, size_t n, struct buf *out);
/* Admin API: appends {"room":id,"members":[{"user","sessions","visible"}]}
 * with every current member, hidden ones included. 0 or ROOM_E_ROOM_ID. */
int room_admin_members(const struct room_engine *e, const char *room, struct buf *out);

/* ---- views of readers some members hide from ----
 *
 * A reader must not see members that block it: to it they are absent, and
 * so is their activity, numbering included (docs/protocol.md, "Rooms and
 * privacy"). Such a reader's view skips the messages that changed only
 * members hidden from it, so its seq counts the others; and when it shows
 * that reader nobody, the view ends as a deleted room would (epoch 0, seq
 * 0), and its next message begins a new view epoch,
 * room_view_epoch(room epoch, seq of the room's last message after which
 * the view showed nobody), at seq 1. The engine says who may hide from
 * someone (room_note_hider()) before their changes happen; see
 * room_view.c for the bounds. Readers who hide nobody see the room's own
 * numbering. */

/* user blocks some reader: later messages that change only such users are
 * recorded for the views they are hidden from. Remembered for the
 * engine's life, at most 65,536 users (later ones are ignored). */
void room_note_hider(struct room_engine *e, const char *user);
/* Whether room_note_hider(user) was called. */
bool room_is_hider(const struct room_engine *e, const char *user);
/* *out = room's head as a reader for whom hide(user, ctx) is true of the
 * members it must not see (called during the call only; NULL: nobody):
 * count = the members it sees, and with none the empty room's head (epoch
 * 0, seq 0); else the view's epoch and seq (above). head.room points into
 * the engine or at room. 0 or ROOM_E_ROOM_ID. */
int room_view_head(const struct room_engine *e, const char *room, room_hide_fn *hide, void *ctx,
                   struct room_head *out);
/* The epoch of a view that began after the room's message since of epoch
 * (since > 0): nonzero, below 2^53, never epoch. Pure. */
uint64_t room_view_epoch(uint64_t epoch, uint64_t since);

/* ---- pure helpers ---- */

/* A valid room, user or session id as a client sends it (no ns.h
 * prefix); room_ns_id_valid(): a valid internal one (a prefix allowed, as
 * the room core takes them). */
bool room_id_valid(const char *id);
bool room_ns_id_valid(const char *id);
const char *room_mode_name(enum room_mode m); /* "normal", "interval"; "?" otherwise */

/*
 * The member-set digest (docs/protocol.md, "Member digest"): the XOR of
 * room_digest_of(user) over the members a reader is shown, 0 for none.
 * Order-free and updated in O(1) per join or leave, so every message
 * carries it; two views with equal member sets have equal digests, on
 * any node. room_digest_of() is FNV-1a-64 of the id's bytes (offset
 * basis 0xcbf29ce484222325, prime 0x100000001b3).
 */
uint64_t room_digest_of(const char *user);
/* A static description of a ROOM_E_* code ("unknown error" otherwise). */
const char *room_strerror(int err);

#endif
