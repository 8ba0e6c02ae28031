/* SPDX-License-Identifier: MIT */
/*
 * presence_session.c - the sessions of the presence engine (presence.h):
 * the session table's entries, their lifetime (start, the reconnect
 * grace after a socket closes, resume, end by leave, kick, TTL, grace or
 * replacement) and the calls that write a session: heartbeat, activity,
 * status, custom status. Each session has one wheel timer at the earliest
 * of its deadlines (end, idle, BUSY/DND and custom status expiry), re-armed
 * after any change to one (session_fired()).
 *
 * This is the hot path: a heartbeat is presence_heartbeat() -> one hash
 * lookup, one comparison and at most one field write and one O(1) wheel
 * move (see "The hot path" in presence.c). A session only marks its user
 * changed (presence__user_touch()); computing, comparing and emitting the
 * user's view is presence.c's, after the debounce.
 */
#include "presence_internal.h"

#include <string.h>

#include "pool.h"
#include "util.h"

/* Frees s's extra once nothing in it is set. */
static void session_trim(struct session *s)
{
    struct extra *x = s->x;

    if (x && x->status_expires == 0 && x->custom_expires == 0 && !x->text && !x->emoji) {
        pool_free(x);
        s->x = NULL;
    }
}

static void session_set_status_expires(struct presence *p, struct session *s, uint64_t at)
{
    if (s->x)
        s->x->status_expires = at;
    else
        s->x = presence__extra_new(p, at, 0, NULL, NULL);
    session_trim(s);
}

/* O(sessions): for the max_sessions_per_user check only. */
static size_t user_nsessions(const struct user *u)
{
    size_t n = 0;

    for (const struct session *s = u->sessions; s; s = s->next)
        n++;
    return n;
}

/* The oldest (first started: u->sessions is in start order) of u's
 * sessions without a live connection: detached (in its grace) or
 * socketless (conn_ref NULL); NULL if none. O(sessions), for the cap. */
static struct session *user_oldest_unattached(const struct user *u)
{
    for (struct session *s = u->sessions; s; s = s->next)
        if (!presence__session_attached(s) || s->conn_ref == NULL)
            return s;
    return NULL;
}

/* ---- sessions: timers and lifetime ---- */

static void session_fired(struct wheel_timer *t, uint64_t now);

static struct presence *session_engine(const struct session *s)
{
    return s->user->p;
}

void presence__session_info(const struct session *s, struct presence_session_info *out)
{
    memset(out, 0, sizeof(*out));
    out->sid = s->sid;
    out->user = s->user->uid;
    out->device = (enum presence_device)s->device;
    out->status = presence__session_status(s);
    out->manual = (enum presence_status)s->manual;
    out->idle = !presence__session_active(s);
    out->attached = presence__session_attached(s);
    out->tag = (uint8_t)((s->flags & S_TAG_MASK) >> S_TAG_SHIFT);
    out->conn_ref = s->conn_ref;
    out->custom.text = presence__text_of(s->x) ? presence__text_of(s->x) : "";
    out->custom.emoji = presence__emoji_of(s->x) ? presence__emoji_of(s->x) : "";
    out->custom.expires_at = presence__custom_expires_of(s->x);
    out->status_expires_at = presence__status_expires_of(s);
    out->connected_at = s->connected_at;
    out->last_heartbeat = s->last_beat;
    out->last_activity = s->last_activity;
}

/* When s ends: TTL after its last recorded beat while attached, else at
 * the end of its reconnect grace. */
static uint64_t session_end_at(const struct presence *p, const struct session *s)
{
    return s->last_beat + (presence__session_attached(s) ? p->cfg.session_ttl_ms : s->grace_ms);
}

/*
 * The earliest of s's deadlines: the end (see session_end_at()), the idle
 * deadline while active, and the BUSY/DND and custom status expiries when
 * set.
 */
static uint64_t session_deadline(const struct presence *p, const struct session *s)
{
    uint64_t at = session_end_at(p, s);

    if (presence__session_active(s))
        at = MIN(at, s->last_activity + p->cfg.idle_ms);
    if (presence__status_expires_of(s) != 0)
        at = MIN(at, presence__status_expires_of(s));
    if (presence__custom_expires_of(s->x) != 0)
        at = MIN(at, presence__custom_expires_of(s->x));
    return at;
}

/* (Re-)arms s's timer at its earliest deadline: after any change to one. */
static void session_arm(struct presence *p, struct session *s)
{
    wheel_add(p->wheel, &s->timer, session_deadline(p, s));
}

static struct session *session_new(struct presence *p, struct user *u, const char *sid,
                                   enum presence_device device, void *conn_ref, uint64_t now)
{
    size_t n = strlen(sid);
    struct session *s = presence__palloc(p, offsetof(struct session, sid) + n + 1);
    struct session **tail = &u->sessions;

    presence__user_unrecord(p, u); /* before anything may need u->p */
    s->user = u;
    s->device = (uint8_t)device;
    s->conn_ref = conn_ref;
    s->connected_at = s->last_beat = s->last_activity = now;
    s->manual = PRESENCE_OFFLINE;
    s->flags = S_ACTIVE | S_ATTACHED;
    memcpy(s->sid, sid, n + 1);
    wheel_timer_init(&s->timer, session_fired);
    hmap_insert(&p->sessions, &s->node, hash_bytes(sid, n));
    if (!presence__user_has_sessions(u))
        p->stats.users++;
    while (*tail) /* at most max_sessions_per_user */
        tail = &(*tail)->next;
    *tail = s;
    p->stats.sessions++;
    session_arm(p, s);
    return s;
}

/* Removes s from every table and timer; its user stays. */
void presence__session_unlink(struct presence *p, struct session *s)
{
    struct session **at = &s->user->sessions;

    wheel_del(&s->timer);
    hmap_remove(&p->sessions, &s->node);
    while (*at != s)
        at = &(*at)->next;
    *at = s->next;
    if (!presence__user_has_sessions(s->user))
        p->stats.users--;
    p->stats.sessions--;
}

void presence__session_free(struct session *s)
{
    pool_free(s->x);
    pool_free(s);
}

/*
 * Ends s: record last seen, unlink, arm the user's flush (which also keeps
 * the user alive through the callback), tell the caller, free, settle.
 */
static void session_end(struct presence *p, struct session *s, enum presence_end_reason reason,
                        uint64_t now)
{
    struct user *u = s->user;
    struct presence_session_info info;
    uint64_t seen = MAX(s->last_beat, s->last_activity);

    if (reason == PRESENCE_END_LEAVE)
        seen = MAX(seen, now);
    u->last_seen = MAX(u->last_seen, seen);
    presence__session_unlink(p, s);
    presence__user_touch(p, u, now);
    p->stats.ended[reason]++;
    p->stats.state_writes++;
    if (p->on_end) {
        presence__session_info(s, &info);
        p->depth++;
        p->on_end(p->ctx, &info, reason);
        p->depth--;
    }
    presence__session_free(s);
    presence__user_settle(p, u);
}

static void session_clear_custom(struct session *s)
{
    if (s->x) {
        s->x->text = s->x->emoji = NULL;
        s->x->custom_expires = 0;
        session_trim(s);
    }
}

/*
 * The session's one timer: idle (while active), BUSY/DND revert and custom
 * status clear, then the end (TTL or grace), in that order when several are
 * due in one run (as the three timers of old fired: the end last, since it
 * frees s); then re-armed at the next deadline.
 */
static void session_fired(struct wheel_timer *t, uint64_t now)
{
    struct session *s = container_of(t, struct session, timer);
    struct presence *p = session_engine(s);
    uint64_t end = session_end_at(p, s);
    bool expired = false;

    if (presence__session_active(s) && s->last_activity + p->cfg.idle_ms <= now) {
        presence__session_flag(s, S_ACTIVE, false);
        p->stats.state_writes++;
        presence__user_touch(p, s->user, now);
    }
    if (presence__status_expires_of(s) != 0 && presence__status_expires_of(s) <= now) {
        s->manual = PRESENCE_OFFLINE;
        session_set_status_expires(p, s, 0);
        expired = true;
    }
    if (presence__custom_expires_of(s->x) != 0 && presence__custom_expires_of(s->x) <= now) {
        session_clear_custom(s);
        expired = true;
    }
    if (expired) {
        p->stats.state_writes++;
        presence__user_touch(p, s->user, now);
    }
    if (end <= now) {
        session_end(p, s, presence__session_attached(s) ? PRESENCE_END_TTL : PRESENCE_END_GRACE,
                    now);
        return;
    }
    session_arm(p, s);
}

/*
 * Records a heartbeat unless one was recorded less than heartbeat_min_ms
 * ago (then nothing is written: see "Heartbeat storms" in presence.h).
 * Returns whether it wrote.
 */
static bool session_beat(struct presence *p, struct session *s, uint64_t now)
{
    if (now < s->last_beat + p->cfg.heartbeat_min_ms)
        return false;
    s->last_beat = now;
    session_arm(p, s);
    return true;
}

/*
 * Records activity: the session becomes (or stays) active and its idle
 * timer restarts. Unless forced (an explicit status change), activity on an
 * active session less than heartbeat_min_ms after the last recorded one
 * writes nothing. Recency matters to the view only with several sessions.
 */
static bool session_mark_active(struct presence *p, struct session *s, uint64_t now, bool force)
{
    bool was_active = presence__session_active(s);

    if (!force && was_active && now < s->last_activity + p->cfg.heartbeat_min_ms)
        return false;
    presence__session_flag(s, S_ACTIVE, true);
    s->last_activity = now;
    session_arm(p, s);
    if (!was_active || s->user->sessions->next != NULL || force)
        presence__user_touch(p, s->user, now);
    return true;
}

/* The session's user says it is away: idle now, until the next activity. */
static bool session_mark_idle(struct presence *p, struct session *s, uint64_t now)
{
    if (!presence__session_active(s))
        return false;
    presence__session_flag(s, S_ACTIVE, false);
    session_arm(p, s);
    presence__user_touch(p, s->user, now);
    return true;
}

/* ---- public: sessions ---- */

int presence_session_start(struct presence *p, const char *sid, const char *uid,
                           enum presence_device device, void *conn_ref, uint64_t now)
{
    struct user *u;

    if (!presence_ns_id_valid(sid) || !presence_ns_id_valid(uid))
        return PRESENCE_E_BAD_ID;
    if ((unsigned)device >= PRESENCE_DEVICE_COUNT)
        return PRESENCE_E_BAD_DEVICE;
    if (presence__session_find(p, sid) != NULL)
        return PRESENCE_E_SESSION_EXISTS;
    u = presence__user_find(p, uid);
    if (u != NULL && user_nsessions(u) >= p->cfg.max_sessions_per_user) {
        struct session *old = user_oldest_unattached(u);

        if (old == NULL)
            return PRESENCE_E_TOO_MANY;                  /* every one has a live connection */
        session_end(p, old, PRESENCE_END_REPLACED, now); /* u stays: found again below */
        u = presence__user_find(p, uid);
    }
    if (u == NULL)
        u = presence__user_new(p, uid);
    session_new(p, u, sid, device, conn_ref, now);
    p->stats.state_writes++;
    presence__user_touch(p, u, now);
    presence__user_settle(p, u);
    return 0;
}

int presence_user_yield(struct presence *p, const char *uid, uint64_t now)
{
    struct user *u = presence__user_find(p, uid);
    struct session *old = u ? user_oldest_unattached(u) : NULL;

    if (old == NULL)
        return PRESENCE_E_NO_SESSION;
    session_end(p, old, PRESENCE_END_REPLACED, now);
    return 0;
}

int presence_session_end(struct presence *p, const char *sid, uint64_t now)
{
    struct session *s = presence__session_find(p, sid);

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    session_end(p, s, PRESENCE_END_LEAVE, now);
    return 0;
}

int presence_session_kick(struct presence *p, const char *sid, uint64_t now)
{
    struct session *s = presence__session_find(p, sid);

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    session_end(p, s, PRESENCE_END_KICKED, now);
    return 0;
}

int presence_socket_closed(struct presence *p, const char *sid, const void *conn_ref, uint64_t now)
{
    struct session *s = presence__session_find(p, sid);
    uint64_t deadline;

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    if (s->conn_ref != conn_ref)
        return PRESENCE_E_CONN;
    if (!presence__session_attached(s))
        return 0;
    /* A close never extends the session past its TTL. Kept relative to
     * last_beat (<= now, as every time given is monotonic), which does
     * not move while detached: the offset is at most the TTL. */
    deadline = MIN(now + p->cfg.reconnect_grace_ms, s->last_beat + p->cfg.session_ttl_ms);
    presence__session_flag(s, S_ATTACHED, false);
    s->grace_ms = deadline > s->last_beat ? (uint32_t)(deadline - s->last_beat) : 0;
    session_arm(p, s);
    p->stats.state_writes++;
    return 0;
}

int presence_session_resume(struct presence *p, const char *uid, const char *sid, void *conn_ref,
                            void **old_conn_ref, uint64_t now)
{
    struct session *s;

    if (!presence_ns_id_valid(uid))
        return PRESENCE_E_BAD_ID;
    s = presence__session_find(p, sid);
    if (s == NULL || strcmp(s->user->uid, uid) != 0)
        return PRESENCE_E_NO_SESSION;
    if (old_conn_ref != NULL)
        *old_conn_ref = presence__session_attached(s) ? s->conn_ref : NULL;
    s->conn_ref = conn_ref;
    presence__session_flag(s, S_ATTACHED, true);
    s->last_beat = MAX(s->last_beat, now);
    session_arm(p, s);
    p->stats.state_writes++;
    return 0;
}

/* The checks of presence_session_restore(), before anything changes. */
static int restore_check(const struct presence *p, const struct presence_restore *r)
{
    const struct user *u;

    if (!presence_ns_id_valid(r->sid) || !presence_ns_id_valid(r->user))
        return PRESENCE_E_BAD_ID;
    if ((unsigned)r->device >= PRESENCE_DEVICE_COUNT)
        return PRESENCE_E_BAD_DEVICE;
    if (r->manual != PRESENCE_OFFLINE && r->manual != PRESENCE_AWAY && r->manual != PRESENCE_BUSY &&
        r->manual != PRESENCE_DND)
        return PRESENCE_E_BAD_STATUS;
    if (r->status_expires_at && r->manual != PRESENCE_BUSY && r->manual != PRESENCE_DND)
        return PRESENCE_E_BAD_STATUS;
    if (presence_custom_check(r->text ? r->text : "", r->emoji ? r->emoji : "") != 0)
        return presence_custom_check(r->text ? r->text : "", r->emoji ? r->emoji : "");
    if (presence__session_find(p, r->sid) != NULL)
        return PRESENCE_E_SESSION_EXISTS;
    u = presence__user_find(p, r->user);
    if (u != NULL && user_nsessions(u) >= p->cfg.max_sessions_per_user)
        return PRESENCE_E_TOO_MANY;
    return 0;
}

int presence_session_restore(struct presence *p, const struct presence_restore *r, uint64_t now)
{
    uint64_t status_exp = r->status_expires_at > now ? r->status_expires_at : 0;
    uint64_t custom_exp = r->custom_expires_at;
    bool custom = presence__is_set(r->text) || presence__is_set(r->emoji);
    struct session *s;
    struct user *u;
    int err = restore_check(p, r);

    if (err)
        return err;
    if (custom_exp && custom_exp <= now)
        custom = false; /* expired while the server was down */
    if ((u = presence__user_find(p, r->user)) == NULL)
        u = presence__user_new(p, r->user);
    s = session_new(p, u, r->sid, r->device, NULL, now);
    if (r->status_expires_at == 0 || status_exp) /* else it expired: back to activity */
        s->manual = (uint8_t)r->manual;
    presence__session_flag(s, S_ACTIVE, !r->idle && r->manual != PRESENCE_AWAY);
    s->x = presence__extra_new(p, s->manual ? status_exp : 0, custom ? custom_exp : 0,
                               custom ? r->text : NULL, custom ? r->emoji : NULL);
    s->last_activity = MAX(MIN(r->last_activity, now), 1);
    if (r->socketless) {
        s->last_beat = now; /* a full TTL: its next beat keeps it */
    } else {
        /* As if its socket had just closed: the grace runs from now, and
         * its last seen stays the one from before the stop. */
        s->last_beat = MAX(MIN(MAX(r->last_seen, r->last_activity), now), 1);
        if (now - s->last_beat > UINT32_MAX / 2)
            s->last_beat = now; /* beyond what grace_ms holds: seen now */
        presence__session_flag(s, S_ATTACHED, false);
        s->grace_ms = (uint32_t)(now + (r->grace_ms ? r->grace_ms : p->cfg.reconnect_grace_ms) -
                                 s->last_beat);
    }
    session_arm(p, s);
    p->stats.state_writes++;
    presence__user_publish(p, u);
    presence__user_settle(p, u);
    return 0;
}

/* Shared by heartbeat and activity: the live, attached session or an error. */
static int beat_target(struct presence *p, const char *sid, struct session **out)
{
    struct session *s = presence__session_find(p, sid);

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    if (!presence__session_attached(s))
        return PRESENCE_E_DETACHED;
    *out = s;
    return 0;
}

static void count_beat(struct presence *p, bool wrote)
{
    p->stats.heartbeats++;
    if (wrote)
        p->stats.state_writes++;
    else
        p->stats.heartbeats_throttled++;
}

int presence_heartbeat(struct presence *p, const char *sid, uint64_t now)
{
    struct session *s = NULL;
    int rc = beat_target(p, sid, &s);

    if (rc != 0)
        return rc;
    count_beat(p, session_beat(p, s, now));
    return 0;
}

int presence_activity(struct presence *p, const char *sid, bool active, uint64_t now)
{
    struct session *s = NULL;
    int rc = beat_target(p, sid, &s);
    bool wrote;

    if (rc != 0)
        return rc;
    wrote = session_beat(p, s, now);
    if (active)
        wrote |= session_mark_active(p, s, now, false);
    else
        wrote |= session_mark_idle(p, s, now);
    count_beat(p, wrote);
    return 0;
}

/* 0 when (status, expires_at) may be set at now. */
static int status_check(enum presence_status status, uint64_t expires_at, uint64_t now)
{
    switch (status) {
    case PRESENCE_ONLINE:
    case PRESENCE_AWAY:
        return expires_at == 0 ? 0 : PRESENCE_E_BAD_EXPIRY;
    case PRESENCE_BUSY:
    case PRESENCE_DND:
        return expires_at == 0 || expires_at > now ? 0 : PRESENCE_E_BAD_EXPIRY;
    case PRESENCE_OFFLINE:
    default:
        return PRESENCE_E_BAD_STATUS;
    }
}

int presence_set_status(struct presence *p, const char *sid, enum presence_status status,
                        uint64_t expires_at, uint64_t now)
{
    struct session *s = presence__session_find(p, sid);
    int rc;

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    rc = status_check(status, expires_at, now);
    if (rc != 0)
        return rc;
    /* Only ONLINE hands the status back to activity: an explicit AWAY
     * sticks like BUSY and DND, until the user changes it. */
    s->manual = status == PRESENCE_ONLINE ? PRESENCE_OFFLINE : status;
    session_set_status_expires(p, s, expires_at);
    if (status == PRESENCE_AWAY) {
        /* A user action (recency), but one that says "I am away". */
        s->last_activity = MAX(s->last_activity, now);
        session_mark_idle(p, s, now);
    } else {
        session_mark_active(p, s, now, true);
    }
    session_arm(p, s);
    presence__user_touch(p, s->user, now);
    p->stats.state_writes++;
    return 0;
}

int presence_set_custom(struct presence *p, const char *sid, const char *text, const char *emoji,
                        uint64_t expires_at, uint64_t now)
{
    struct session *s = presence__session_find(p, sid);
    struct extra *x;
    int rc;

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    rc = presence_custom_check(text, emoji);
    if (rc != 0)
        return rc;
    if (!presence__is_set(text) && !presence__is_set(emoji))
        expires_at = 0;
    else if (expires_at != 0 && expires_at <= now)
        return PRESENCE_E_BAD_EXPIRY;
    x = presence__extra_new(p, presence__status_expires_of(s), expires_at, text, emoji);
    pool_free(s->x);
    s->x = x;
    session_mark_active(p, s, now, true);
    session_arm(p, s);
    presence__user_touch(p, s->user, now);
    p->stats.state_writes++;
    return 0;
}
