/* SPDX-License-Identifier: MIT */
/*
 * presence.h - the presence core of one partition: sessions, heartbeats and
 * TTLs, statuses and custom statuses, multi-device aggregation, debounced
 * change events and last seen.
 *
 * A partition owns a set of users (the server picks one per user id by
 * hashing; a worker owns one partition). This module is a single-threaded,
 * pure state machine: no sockets, no threads, no clock reads. Time comes in
 * as `now` arguments (monotonic milliseconds, never a client's timestamp)
 * and through the wheel it is given; output goes through two callbacks.
 * The engine is presence.c; the pure helpers (validation, names, age
 * buckets, JSON) are presence_format.c.
 *
 * ---- Model ----
 *
 * A *session* is one client instance of a user (a tab, an app): an id
 * chosen by the caller, a user id, a device type, a status, an optional
 * custom status, and the connection it is reached through (`conn_ref`,
 * opaque here). A session ends
 *   - at once on presence_session_end() (LEAVE) or presence_session_kick()
 *     (KICKED);
 *   - `reconnect_grace_ms` after presence_socket_closed() (GRACE), unless
 *     presence_session_resume() reattaches it first: a resume changes
 *     nothing visible, so a page reload produces no event at all;
 *   - when heartbeats stop, `session_ttl_ms` after the last *recorded*
 *     heartbeat (TTL). A socket close never extends a session past its TTL.
 *
 * Heartbeat storms. A heartbeat (or activity ping) that arrives less than
 * `heartbeat_min_ms` after the last recorded one is accepted and counted,
 * but writes nothing: no field, no wheel move. The TTL is measured from the
 * last recorded beat, so a client that beats at least every
 * `heartbeat_min_ms` (<= its interval) lives between TTL - min and TTL
 * after its last beat; a client on the advertised interval has every beat
 * recorded and gets exactly the TTL. A missed beat never ends a session
 * before the TTL. Last seen is accurate to `heartbeat_min_ms`.
 *
 * Statuses. A session is ONLINE or AWAY by activity: it starts active;
 * presence_activity(active = false) or `idle_ms` without recorded activity
 * make it idle (AWAY, the automatic away), and activity makes it ONLINE
 * again. AWAY, BUSY and DND set with presence_set_status() are the user's
 * explicit choice and stick: activity, idle and custom-status changes never
 * change them, only the next presence_set_status() does (ONLINE hands the
 * status back to activity). BUSY and DND may carry an expiry, at which the
 * session reverts to ONLINE or AWAY by its activity. Explicit status and
 * custom-status changes are user actions: they count as activity on that
 * session (AWAY excepted, which also makes it idle). OFFLINE is derived: a
 * user without a session. A resume keeps all of this: a reload changes
 * nothing.
 *
 * Aggregation (a user's view). The user status merges the sessions' by the
 * configured policy (PRESENCE_POLICY_*): most-available ranks
 * online > busy > away > dnd; dnd-wins makes DND on any session global, else
 * most-available; most-recent takes the status of the most recently active
 * session, except that the user is AWAY (idle) only if no session is
 * ONLINE. "Most recently active" = latest recorded activity, ties broken by
 * the later start. The per-device breakdown merges the sessions of each
 * device type by the same policy. The custom status is that of the most
 * recently active session among those that have one (a tab without a custom
 * status does not hide the one set in another).
 *
 * Events. on_change is called only when a user's view (status, custom
 * status, device breakdown) differs from the last one emitted, never for
 * heartbeats or last seen alone. Changes are debounced per user for
 * `debounce_ms`: the first change arms a wheel timer, and when it fires the
 * current view is compared with the last emitted one, so churn inside the
 * window merges into one event, or none when it cancels out. on_change is
 * therefore only ever called from wheel_run(), one user at a time, in order
 * per user, each event with a larger version.
 *
 * Versions come from one counter per partition (starting above
 * `version_start`), so a user's versions strictly increase, also after the
 * user's record was evicted and re-created; they are not contiguous.
 *
 * Reads return the *emitted* view (state and version agree), so a snapshot
 * followed by the events with a larger version is always consistent; a
 * change is visible to reads at most `debounce_ms` late.
 *
 * Last seen. When a session ends, its user's last seen becomes the latest
 * recorded heartbeat or activity (an explicit leave counts as a sign of
 * life at its `now`). Users without sessions are kept as last-seen records
 * (status, version, last seen), at most `last_seen_max` of them per
 * partition; beyond that the one offline for the longest time is evicted
 * and reads as never seen. Durable last seen is a storage layer's job:
 * presence_set_last_seen() puts a stored one back.
 * Times are monotonic; presence_encode_user() converts to wall time with an
 * offset the caller computes at encoding time (wall_now - mono_now), so a
 * last seen is never in the future even if the wall clock steps back.
 *
 * ---- Ids and custom status ----
 *
 * User and session ids: 1..128 bytes of A-Z a-z 0-9 and - _ . ~ : @ (URL
 * unreserved characters plus ':' and '@' for namespaced ids), after an
 * optional app namespace prefix "<app id>|" (ns.h) that clients never
 * send: the adapters add it. Session ids
 * are unique per partition: the server should generate them (random, like
 * a resume token), and presence_session_resume() checks the user.
 *
 * Custom text: valid UTF-8, at most 100 code points, no control characters
 * (C0, DEL, C1), line/paragraph separators (U+2028/9) or bidi controls
 * (U+202A..202E, U+2066..2069). Empty = none.
 * Custom emoji: ":shortcode:" with 1..32 of [a-z0-9_+-] between the colons,
 * or one emoji of 1..10 code points (10 is the longest RGI sequence): one
 * pictographic base (or a keycap 0-9 # * followed by U+20E3, or a flag of
 * two regional indicators), optionally followed by U+FE0E/FE0F, skin tones
 * U+1F3FB..1F3FF and tag characters U+E0020..E007F, with further bases
 * joined only by U+200D (ZWJ). Empty = none.
 *
 * ---- Lifetimes and callbacks ----
 *
 * Strings in a view or session info are borrowed from the engine: valid
 * until the next call that changes it (or, in a callback, until it
 * returns). Callbacks may call any presence_* function except
 * presence_free(), and must not call wheel_run(). on_session_end runs after
 * the session is unlinked (its id is free for reuse) and before it is
 * freed; for LEAVE and KICKED it runs inside the call that ended it, for
 * TTL and GRACE inside wheel_run(). A failing call never fires a callback.
 * Nothing the engine is using is freed while a callback runs.
 */
#ifndef PRESENCE_H
#define PRESENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "util.h"
#include "wheel.h"

#define PRESENCE_ID_MAX         128u /* bytes in a user or session id */
#define PRESENCE_TEXT_MAX_CHARS 100u /* code points in a custom text */
#define PRESENCE_EMOJI_MAX_CPS  10u  /* code points in one emoji */
#define PRESENCE_SHORTCODE_MAX  32u  /* characters between the colons */

/* Errors: negative, distinct, with presence_strerror(). */
enum {
    PRESENCE_E_BAD_ID = -(PS_EBASE + 200),         /* id empty, > 128 bytes or bad character */
    PRESENCE_E_BAD_DEVICE = -(PS_EBASE + 201),     /* not a presence_device */
    PRESENCE_E_BAD_STATUS = -(PS_EBASE + 202),     /* not a settable status (OFFLINE is derived) */
    PRESENCE_E_TEXT_UTF8 = -(PS_EBASE + 203),      /* custom text is not valid UTF-8 */
    PRESENCE_E_TEXT_CONTROL = -(PS_EBASE + 204),   /* custom text has a control character */
    PRESENCE_E_TEXT_LONG = -(PS_EBASE + 205),      /* custom text over 100 characters */
    PRESENCE_E_BAD_EMOJI = -(PS_EBASE + 206),      /* neither one emoji nor a :shortcode: */
    PRESENCE_E_BAD_EXPIRY = -(PS_EBASE + 207),     /* expiry not in the future, or not allowed */
    PRESENCE_E_SESSION_EXISTS = -(PS_EBASE + 208), /* session id already in use */
    PRESENCE_E_NO_SESSION = -(PS_EBASE + 209),     /* no such session (for this user) */
    PRESENCE_E_TOO_MANY = -(PS_EBASE + 210),       /* user at max_sessions_per_user */
    PRESENCE_E_DETACHED = -(PS_EBASE + 211),       /* session is in its reconnect grace */
    PRESENCE_E_CONN = -(PS_EBASE + 212),           /* conn_ref no longer owns the session */
    PRESENCE_E_UNKNOWN_USER = -(PS_EBASE + 213),   /* user never seen (or record evicted) */
    PRESENCE_E_CONFIG = -(PS_EBASE + 214),         /* presence_config_check() failed */
    PRESENCE_E_ONLINE = -(PS_EBASE + 215),         /* the user has a session */
};

enum presence_device {
    PRESENCE_DEVICE_DESKTOP,
    PRESENCE_DEVICE_MOBILE,
    PRESENCE_DEVICE_TABLET,
    PRESENCE_DEVICE_WEB,
    PRESENCE_DEVICE_OTHER,
    PRESENCE_DEVICE_COUNT
};

enum presence_status {
    PRESENCE_OFFLINE, /* derived: no session */
    PRESENCE_ONLINE,
    PRESENCE_AWAY,
    PRESENCE_BUSY,
    PRESENCE_DND,
};

enum presence_policy {
    PRESENCE_POLICY_MOST_AVAILABLE, /* "most-available": online > busy > away > dnd */
    PRESENCE_POLICY_DND_WINS,       /* "dnd-wins": dnd anywhere is global */
    PRESENCE_POLICY_MOST_RECENT,    /* "most-recent": the latest active session's */
};

enum presence_end_reason {
    PRESENCE_END_LEAVE,    /* presence_session_end() */
    PRESENCE_END_TTL,      /* heartbeats stopped */
    PRESENCE_END_GRACE,    /* socket closed and not resumed in time */
    PRESENCE_END_KICKED,   /* presence_session_kick() */
    PRESENCE_END_REPLACED, /* a session without a live connection, ended at the cap */
};

struct presence_config {
    uint32_t heartbeat_interval_ms; /* 15000: what clients are told to use */
    uint32_t heartbeat_min_ms;      /* 5000: faster beats write nothing */
    uint32_t session_ttl_ms;        /* 45000: life after the last recorded beat */
    uint32_t reconnect_grace_ms;    /* 5000: resume window after a socket close */
    uint32_t idle_ms;               /* 300000: no activity -> away */
    uint32_t debounce_ms;           /* 100: per-user event merge window */
    uint32_t max_sessions_per_user; /* 10 */
    uint32_t last_seen_max;         /* 100000: offline users' records kept */
    uint64_t version_start;         /* 0: versions are > this (seed across restarts) */
    enum presence_policy policy;    /* PRESENCE_POLICY_MOST_AVAILABLE */
};

/* Custom status; strings are "" when unset. */
struct presence_custom {
    const char *text;    /* UTF-8 */
    const char *emoji;   /* one emoji or ":shortcode:" */
    uint64_t expires_at; /* monotonic ms, 0 = none */
};

/* A user's aggregate view, as emitted and as read. */
struct presence_view {
    const char *user;
    enum presence_status status;                         /* OFFLINE without sessions */
    enum presence_status devices[PRESENCE_DEVICE_COUNT]; /* OFFLINE: no session of that type */
    struct presence_custom custom;
    uint64_t last_seen; /* monotonic ms when status is OFFLINE; 0 = unknown or online */
    uint64_t version;   /* of the last event; 0 = none emitted yet */
    uint64_t now;       /* the time the view was taken */
};

struct presence_session_info {
    const char *sid;  /* the session's own copy: valid until the session is
                       * freed, after its on_end returned */
    const char *user; /* the user's own copy: valid at least as long */
    enum presence_device device;
    enum presence_status status; /* the session's own, effective status */
    enum presence_status manual; /* the explicit AWAY, BUSY or DND it was set to, which
                                  * activity does not change; OFFLINE: none */
    bool idle;                   /* no recent activity (status AWAY unless set explicitly) */
    bool attached;               /* false: socket closed, in its reconnect grace */
    uint8_t tag;                 /* the caller's label, presence_session_set_tag(); 0 unset */
    void *conn_ref;              /* the caller's, as last given */
    struct presence_custom custom;
    uint64_t status_expires_at; /* BUSY/DND revert time, 0 = none */
    uint64_t connected_at;      /* monotonic ms of presence_session_start() */
    uint64_t last_heartbeat;    /* last recorded beat */
    uint64_t last_activity;     /* last recorded activity */
};

struct presence_stats {
    uint64_t sessions;                         /* live sessions (attached or in grace) */
    uint64_t users;                            /* users with at least one session */
    uint64_t records;                          /* offline users kept for last seen */
    uint64_t heartbeats;                       /* heartbeats and activity pings accepted */
    uint64_t heartbeats_throttled;             /* of those, ones that wrote nothing */
    uint64_t state_writes;                     /* operations that changed some state */
    uint64_t events;                           /* on_change calls */
    uint64_t allocations;                      /* heap allocations made by the engine */
    uint64_t evictions;                        /* last-seen records dropped by the bound */
    uint64_t ended[PRESENCE_END_REPLACED + 1]; /* sessions ended, by reason */
};

struct presence;

/* Called from wheel_run() when a user's view changed; old is the previous
 * emitted view (OFFLINE, version 0, for a user's first event). Both are
 * borrowed until the callback returns. */
typedef void presence_change_cb(void *ctx, const struct presence_view *old,
                                const struct presence_view *cur);
/* Called when a session ends (see the file comment for when); s is borrowed
 * until the callback returns. */
typedef void presence_end_cb(void *ctx, const struct presence_session_info *s,
                             enum presence_end_reason reason);

/* Fills c with the defaults above. */
void presence_config_init(struct presence_config *c);
/* 0, or PRESENCE_E_CONFIG unless 0 < heartbeat_min_ms <= heartbeat_interval_ms
 * < session_ttl_ms, idle_ms > 0, max_sessions_per_user > 0 and the policy is
 * known. */
int presence_config_check(const struct presence_config *c);

/* A new engine that arms its timers on w (borrowed: must outlive it; the
 * caller runs it). cfg must pass presence_config_check() and is copied.
 * on_change and on_end may be NULL; ctx is passed to both. Aborts on OOM. */
struct presence *presence_new(const struct presence_config *cfg, struct wheel *w,
                              presence_change_cb *on_change, presence_end_cb *on_end, void *ctx);
/* Ends nothing visibly: frees all state without callbacks and unlinks every
 * timer from the wheel. NULL is a no-op. Not from a callback. */
void presence_free(struct presence *p);

/* ---- sessions ---- */

/* Starts session sid of user uid: ONLINE, active, attached to conn_ref.
 * 0, PRESENCE_E_BAD_ID, _BAD_DEVICE, _SESSION_EXISTS or _TOO_MANY (nothing
 * changes). To start in another status, set it right after: within the
 * debounce window only the final view is emitted.
 * The cap: when uid already has max_sessions_per_user sessions, the oldest
 * one WITHOUT a live connection (in its reconnect grace, or socketless:
 * conn_ref NULL, as over HTTP) is ended first, on_end REPLACED inside this
 * call, to make room; only sessions with a live connection make the cap
 * refuse (_TOO_MANY), so dropped sockets and stray HTTP beats can never
 * lock a user out. */
int presence_session_start(struct presence *p, const char *sid, const char *uid,
                           enum presence_device device, void *conn_ref, uint64_t now);
/* Ends uid's oldest session without a live connection (the one the cap
 * would end first), on_end REPLACED inside this call: how a session on
 * another node makes room under the cap (docs/cluster.md). 0, or
 * PRESENCE_E_NO_SESSION when uid has none (nothing changes). */
int presence_user_yield(struct presence *p, const char *uid, uint64_t now);
/* Explicit leave: ends the session at once (on_end LEAVE inside this call).
 * 0 or PRESENCE_E_NO_SESSION. */
int presence_session_end(struct presence *p, const char *sid, uint64_t now);
/* Ditto, reason KICKED, and last seen is not refreshed. */
int presence_session_kick(struct presence *p, const char *sid, uint64_t now);
/* The socket of sid closed: the session stays visible, detached, for the
 * reconnect grace (or until its TTL, whichever comes first). conn_ref must
 * be the session's current one: a late close of a connection that a resume
 * replaced returns PRESENCE_E_CONN and changes nothing. Closing a detached
 * session again is a no-op (0) that does not extend the grace. */
int presence_socket_closed(struct presence *p, const char *sid, const void *conn_ref, uint64_t now);
/* Reattaches session sid of uid to conn_ref, with no visible change, and
 * records a heartbeat. Works on an attached session too (the client
 * reconnected before the old socket was seen to die): *old_conn_ref (if
 * old_conn_ref is not NULL) gets the replaced one, which the caller should
 * close; it is NULL when the session was detached. 0, PRESENCE_E_BAD_ID or
 * PRESENCE_E_NO_SESSION (unknown, already ended, or another user's). */
int presence_session_resume(struct presence *p, const char *uid, const char *sid, void *conn_ref,
                            void **old_conn_ref, uint64_t now);
/* A session saved at a clean stop, to be restored (presence_session_restore()). */
struct presence_restore {
    const char *sid;
    const char *user;
    enum presence_device device;
    enum presence_status manual; /* OFFLINE = none, else AWAY, BUSY or DND */
    uint64_t status_expires_at;  /* BUSY/DND: monotonic ms, 0 = none; <= now: expired */
    bool idle;
    const char *text, *emoji;   /* custom status, NULL or "" = none */
    uint64_t custom_expires_at; /* monotonic ms, 0 = none; <= now: expired */
    uint64_t last_seen;         /* monotonic ms of its latest beat or activity (<= now) */
    uint64_t last_activity;     /* monotonic ms of its latest activity (<= now) */
    bool socketless;            /* an HTTP session: attached, conn_ref NULL, TTL from now */
    uint64_t grace_ms;          /* its reconnect grace from now; 0 = reconnect_grace_ms */
};
/* Puts back session r->sid of r->user as it was saved, as if its socket had
 * just closed: detached, in its reconnect grace (r->grace_ms, or the
 * configured one) from now (a socketless one
 * attached with a full TTL from now), with its status, custom status and
 * activity; an expiry already past is dropped (the session reads as it
 * would after it). The user's view becomes the emitted one at once, with a
 * new version and without on_change: a user who was online before the stop
 * is online after it, which is no event. Its last seen when the session
 * ends is r->last_seen (or a later sign of life), not the restore time.
 * 0, PRESENCE_E_BAD_ID, _BAD_DEVICE, _BAD_STATUS (manual not AWAY, BUSY,
 * DND or OFFLINE, or an expiry on AWAY), a custom status error,
 * _SESSION_EXISTS or _TOO_MANY (the user has max_sessions_per_user
 * sessions already); on error nothing changes. */
int presence_session_restore(struct presence *p, const struct presence_restore *r, uint64_t now);
/* A heartbeat: refreshes the TTL unless throttled (see the file comment).
 * O(1), never allocates. 0, PRESENCE_E_NO_SESSION or _DETACHED. */
int presence_heartbeat(struct presence *p, const char *sid, uint64_t now);
/* Activity report, which is also a heartbeat: active = true records
 * activity (throttled like heartbeats while already active) and restarts
 * the idle timer; active = false makes the session idle now (the client saw
 * its user leave, e.g. a hidden tab). Errors as presence_heartbeat(). */
int presence_activity(struct presence *p, const char *sid, bool active, uint64_t now);
/* Sets the session's status: ONLINE (back to ONLINE/AWAY by activity) or
 * AWAY (until changed; expires_at must be 0 for both), BUSY or DND
 * (expires_at 0 = until changed, else an absolute monotonic time > now; the
 * caller converts a client's wall time). 0, PRESENCE_E_NO_SESSION,
 * _BAD_STATUS or _BAD_EXPIRY; on error nothing changes. */
int presence_set_status(struct presence *p, const char *sid, enum presence_status status,
                        uint64_t expires_at, uint64_t now);
/* Sets the session's custom status (copied); text and emoji may be NULL or
 * "" for none, and none of both clears it (expires_at is then ignored).
 * expires_at 0 = no expiry, else > now: the custom status is cleared then.
 * 0, PRESENCE_E_NO_SESSION, _TEXT_UTF8, _TEXT_CONTROL, _TEXT_LONG,
 * _BAD_EMOJI or _BAD_EXPIRY; on error nothing changes. */
int presence_set_custom(struct presence *p, const char *sid, const char *text, const char *emoji,
                        uint64_t expires_at, uint64_t now);

/* ---- reads ---- */

/* Fills out with uid's emitted view (see "Reads" above); an unknown user
 * reads as OFFLINE, version 0, last seen 0. 0 or PRESENCE_E_BAD_ID. */
int presence_get_user(const struct presence *p, const char *uid, uint64_t now,
                      struct presence_view *out);
/* Fills out with session sid. 0 or PRESENCE_E_NO_SESSION. */
int presence_get_session(const struct presence *p, const char *sid,
                         struct presence_session_info *out);
/* Labels session sid with tag (0..PRESENCE_TAG_MAX), a small value of
 * the caller's that the core only keeps for presence_session_info.tag
 * (the engine: the client's protocol). No event, no state change. 0 or
 * PRESENCE_E_NO_SESSION; a tag out of range is cut to its low bits. */
#define PRESENCE_TAG_MAX 3
int presence_session_set_tag(struct presence *p, const char *sid, unsigned tag);
/* Fills up to cap infos with uid's sessions, in start order; returns how
 * many there are (which may exceed cap). */
size_t presence_list_sessions(const struct presence *p, const char *uid,
                              struct presence_session_info *out, size_t cap);
/* Calls fn(ctx, info) for every session, in no particular order; info
 * is borrowed for the call. fn must not change p. */
typedef void presence_session_fn(void *ctx, const struct presence_session_info *info);
void presence_each_session(const struct presence *p, presence_session_fn *fn, void *ctx);
/* *at = uid's last seen: the latest recorded beat or activity of a live
 * session when online, else the record's. 0 or PRESENCE_E_UNKNOWN_USER. */
int presence_last_seen(const struct presence *p, const char *uid, uint64_t *at);
/* Sets the last seen of uid, a user without a session, to at (monotonic
 * ms): raise = true keeps the later of at (> 0) and the one known
 * (putting back a stored last seen); false sets exactly at, earlier too,
 * 0 for "never seen" (the engine taking back what an invisible user did).
 * An unknown user becomes a last-seen record (bounded by last_seen_max
 * like any other; not for at 0). Emits no event and bumps no version:
 * last seen alone is not a change. 0, PRESENCE_E_BAD_ID (also for at 0
 * with raise), or PRESENCE_E_ONLINE (uid has a session: nothing changes). */
int presence_set_last_seen(struct presence *p, const char *uid, uint64_t at, bool raise);
void presence_get_stats(const struct presence *p, struct presence_stats *out);

/* ---- encoding and pure helpers ---- */

/* Appends v as the protocol's JSON object:
 *   {"user":"u1","status":"online","devices":{"desktop":"online","mobile":"away"},
 *    "custom":{"text":"In a meeting","emoji":":calendar:","expiresAt":1764410400000},
 *    "lastSeen":{"at":1764406800000,"ago":"minutes","value":12},"version":3}
 * devices lists only device types with a session, in enum order ({} when
 * offline). custom is present only when set, and its text, emoji and
 * expiresAt members only when set. lastSeen is present only when offline
 * with a known last seen: at = wall ms, ago/value = presence_age_of(v->now -
 * last seen) (value only for "seconds" and "minutes"). Wall times are
 * monotonic + wall_offset_ms; pass wall_now - mono_now taken at encoding. */
void presence_encode_user(const struct presence_view *v, int64_t wall_offset_ms, struct buf *out);

/* The same for whom the view is exact (exact = true: as above) or public
 * (exact = false: no "version", and lastSeen.at rounded down to the minute
 * under an hour of age, to the hour under a day, to the day beyond, with
 * "value" only for "minutes"). */
void presence_encode_user_as(const struct presence_view *v, int64_t wall_offset_ms, bool exact,
                             struct buf *out);

/* Appends just the ,"lastSeen":{...} member of the above (nothing when the
 * view is online or its last seen unknown). */
void presence_encode_last_seen(const struct presence_view *v, int64_t wall_offset_ms, bool exact,
                               struct buf *out);

/* Last-seen granularity, by age (a "today" is the last 24 h,
 * not a calendar day: the server does not know the viewer's time zone). */
enum presence_age_unit {
    PRESENCE_AGE_SECONDS,    /* < 1 min: value = whole seconds */
    PRESENCE_AGE_MINUTES,    /* < 1 h: value = whole minutes, rounded down */
    PRESENCE_AGE_TODAY,      /* < 24 h */
    PRESENCE_AGE_THIS_WEEK,  /* < 7 days */
    PRESENCE_AGE_THIS_MONTH, /* < 30 days */
    PRESENCE_AGE_THIS_YEAR,  /* < 365 days */
    PRESENCE_AGE_LONG_AGO,   /* the rest */
};

struct presence_age {
    enum presence_age_unit unit;
    uint32_t value; /* seconds or minutes; 0 for the coarse units */
};

struct presence_age presence_age_of(uint64_t age_ms);
/* "seconds", "minutes", "today", "this_week", "this_month", "this_year",
 * "long_ago". */
const char *presence_age_unit_name(enum presence_age_unit unit);

/* Wire names: "online", "away", "busy", "dnd", "offline"; "desktop",
 * "mobile", "tablet", "web", "other"; "most-available", "dnd-wins",
 * "most-recent". The names return "?" for out-of-range values; the parsers
 * return the value, or PRESENCE_E_BAD_STATUS / _BAD_DEVICE / _CONFIG. */
const char *presence_status_name(enum presence_status s);
const char *presence_device_name(enum presence_device d);
const char *presence_policy_name(enum presence_policy policy);
int presence_status_parse(const char *s);
int presence_device_parse(const char *s);
int presence_policy_parse(const char *s);

/* True when id is a valid user or session id (see above) as a client may
 * send it: never with ns.h's NS_SEP. */
bool presence_id_valid(const char *id);
/* True when id is a valid internal id: a valid id, or an app's namespace
 * prefix (ns.h) and one, 128 bytes in all. The core takes these. */
bool presence_ns_id_valid(const char *id);
/* Validates a custom status without an engine: 0 or the error
 * presence_set_custom() would return for it (expiry aside). */
int presence_custom_check(const char *text, const char *emoji);
/* A static description of a PRESENCE_E_* code ("unknown error" otherwise). */
const char *presence_strerror(int err);

#endif
