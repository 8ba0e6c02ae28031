/* SPDX-License-Identifier: MIT */
/*
 * presence.c - the partition-local presence engine (see presence.h for the
 * model and the contracts).
 *
 * Exports sessions, heartbeats, statuses, aggregation, debounced events,
 * last seen and reads. It keeps two intrusive hash tables (users by id,
 * sessions by id) and arms every timer on the caller's wheel: per session
 * one timer at the earliest of its deadlines (end: TTL or reconnect grace;
 * idle; BUSY/DND and custom status expiry), per user with a change pending
 * a debounce timer. It never reads a clock, never blocks and never talks
 * to a socket. The pure parts
 * (validation, names, the age helper, JSON encoding) are in
 * presence_format.c.
 *
 * ---- The hot path and the state it writes ----
 *
 * A heartbeat is one hash lookup, one comparison and, at most once per
 * heartbeat_min_ms per session, one field write plus one O(1) wheel move.
 * Nothing on that path allocates: timers are embedded in their sessions.
 * Every engine allocation goes through palloc(), which counts, so tests
 * can prove it (stats.allocations). Sessions, users and their strings live
 * as long as their connections, so they come from pool.h, not malloc (they
 * would pin the holes a join burst's transients leave).
 *
 * ---- Memory: what an idle session costs ----
 *
 * Every connection holds one session and usually one user, so both keep
 * only what every one of them needs, sized for a pool class (session 144
 * bytes with a 32-character id, user 80 with an id of up to 6). What few
 * of them use is allocated while in use: a session's expiries and custom
 * status (struct extra), a user's debounce timer while armed (struct
 * debounce). The last-seen LRU link shares its place with the engine
 * pointer and the debounce timer, which only a live user needs. Sessions
 * of a user are a singly linked list in start order (at most
 * max_sessions_per_user to walk, also to count them), and that order
 * breaks recency ties, so no start counter is kept. A detached session's
 * grace end is kept as an offset from its last recorded beat.
 *
 * ---- Debounce and emission ----
 *
 * Any operation that may change a user's view calls user_touch(), which
 * arms the user's debounce timer if it is not armed: the operation itself
 * never computes or compares views. When the timer fires,
 * debounce_fired() computes the view from the sessions (user_compute: one
 * pass over at most max_sessions_per_user sessions) and compares it with
 * the last emitted one, which the user keeps as its own copy (pub).
 * Equal: nothing happens, which is how a flap inside the window
 * disappears. Different: pub is replaced by a copy *before* the callback
 * runs, so the callback may change anything (even free the sessions whose
 * strings the computed view borrowed) and a change it makes is compared
 * against what it was told.
 *
 * ---- Lifetimes: what may be freed when ----
 *
 * A session is freed only by session_end(), after it was unlinked from
 * every table and timer and after on_end returned. A user is freed only by
 * user_settle(), when it has no session, no armed debounce timer and is not
 * inside its own on_change (U_IN_EMIT): it then either becomes a last-seen
 * record on the LRU list (records beyond last_seen_max are evicted, oldest
 * offline first) or is freed at once when last_seen_max is 0. Ending a
 * session always arms its user's debounce timer first, so no callback can
 * see its user disappear. Timer callbacks never touch their timer after
 * freeing its owner, and the wheel never touches a timer after its
 * callback, so freeing from a timer callback is safe (debounce_fired()
 * frees its own timer first thing).
 */
#include "presence.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "list.h"
#include "pool.h"

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

#define S_ACTIVE   0x1u /* not idle: ONLINE unless manual is set */
#define S_ATTACHED 0x2u /* false while in the reconnect grace */

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
    uint32_t grace_ms;      /* while detached: end - last_beat (<= session_ttl_ms;
                             * last_beat does not move while detached) */
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

/* ---- allocation (counted) ---- */

static void *palloc(struct presence *p, size_t n)
{
    p->stats.allocations++;
    return pool_alloc(n);
}

static bool is_set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

/* Copies the set one of s into *at, moving *at past it; NULL for NULL or
 * "": the engine stores "none" as NULL. */
static char *extra_str(char **at, const char *s)
{
    size_t n;
    char *copy = *at;

    if (!is_set(s))
        return NULL;
    n = strlen(s) + 1;
    memcpy(copy, s, n);
    *at += n;
    return copy;
}

/* A new extra with these fields (strings copied, "" or NULL = none), or
 * NULL when all of them are none. */
static struct extra *extra_new(struct presence *p, uint64_t status_expires, uint64_t custom_expires,
                               const char *text, const char *emoji)
{
    size_t n = (is_set(text) ? strlen(text) + 1 : 0) + (is_set(emoji) ? strlen(emoji) + 1 : 0);
    struct extra *x;
    char *at;

    if (status_expires == 0 && custom_expires == 0 && n == 0)
        return NULL;
    x = palloc(p, offsetof(struct extra, data) + n);
    at = x->data;
    x->status_expires = status_expires;
    x->custom_expires = custom_expires;
    x->text = extra_str(&at, text);
    x->emoji = extra_str(&at, emoji);
    return x;
}

static uint64_t status_expires_of(const struct session *s)
{
    return s->x ? s->x->status_expires : 0;
}

static uint64_t custom_expires_of(const struct extra *x)
{
    return x ? x->custom_expires : 0;
}

static const char *text_of(const struct extra *x)
{
    return x ? x->text : NULL;
}

static const char *emoji_of(const struct extra *x)
{
    return x ? x->emoji : NULL;
}

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
        s->x = extra_new(p, at, 0, NULL, NULL);
    session_trim(s);
}

/* ---- lookup ---- */

/* Length of id if it could be a stored id (1..PRESENCE_ID_MAX), else 0. */
static size_t id_len(const char *id)
{
    size_t n;

    if (id == NULL)
        return 0;
    n = strnlen(id, PRESENCE_ID_MAX + 1);
    return n <= PRESENCE_ID_MAX ? n : 0;
}

static struct user *user_find(const struct presence *p, const char *uid)
{
    size_t n = id_len(uid);
    uint64_t h = hash_bytes(uid, n);

    if (n == 0)
        return NULL;
    for (struct hmap_node *x = hmap_find(&p->users, h); x; x = hmap_find_next(x, h)) {
        struct user *u = container_of(x, struct user, node);

        if (strncmp(u->uid, uid, n) == 0 && u->uid[n] == '\0')
            return u;
    }
    return NULL;
}

static struct session *session_find(const struct presence *p, const char *sid)
{
    size_t n = id_len(sid);
    uint64_t h = hash_bytes(sid, n);

    if (n == 0)
        return NULL;
    for (struct hmap_node *x = hmap_find(&p->sessions, h); x; x = hmap_find_next(x, h)) {
        struct session *s = container_of(x, struct session, node);

        if (strncmp(s->sid, sid, n) == 0 && s->sid[n] == '\0')
            return s;
    }
    return NULL;
}

/* ---- session status and aggregation ---- */

static enum presence_status session_status(const struct session *s)
{
    if (s->manual != PRESENCE_OFFLINE)
        return (enum presence_status)s->manual;
    return (s->flags & S_ACTIVE) ? PRESENCE_ONLINE : PRESENCE_AWAY;
}

static bool session_active(const struct session *s)
{
    return s->flags & S_ACTIVE;
}

static bool session_attached(const struct session *s)
{
    return s->flags & S_ATTACHED;
}

static void session_flag(struct session *s, uint8_t flag, bool on)
{
    s->flags = (uint8_t)(on ? s->flags | flag : s->flags & ~flag);
}

static bool session_has_custom(const struct session *s)
{
    return s->x && (s->x->text != NULL || s->x->emoji != NULL);
}

/* True when a counts as more recently active than b, for a started after
 * b (later in user.sessions): ties go to the later start. */
static bool session_newer(const struct session *a, const struct session *b)
{
    return a->last_activity >= b->last_activity;
}

/* most-available order: online > busy > away > dnd > offline. */
static int status_rank(enum presence_status st)
{
    static const int rank[] = {
        [PRESENCE_OFFLINE] = 0, [PRESENCE_DND] = 1,    [PRESENCE_AWAY] = 2,
        [PRESENCE_BUSY] = 3,    [PRESENCE_ONLINE] = 4,
    };

    return rank[st];
}

/* What a policy needs to know about a set of sessions. */
struct merge {
    enum presence_status best;    /* by status_rank */
    const struct session *recent; /* most recently active; NULL = empty set.
                                   * Sessions are added in start order. */
    bool any_dnd;
    bool any_online;
};

static void merge_add(struct merge *m, const struct session *s)
{
    enum presence_status st = session_status(s);

    if (status_rank(st) > status_rank(m->best))
        m->best = st;
    m->any_dnd |= st == PRESENCE_DND;
    m->any_online |= st == PRESENCE_ONLINE;
    if (m->recent == NULL || session_newer(s, m->recent))
        m->recent = s;
}

static enum presence_status merge_result(const struct merge *m, enum presence_policy policy)
{
    enum presence_status st;

    if (m->recent == NULL)
        return PRESENCE_OFFLINE;
    switch (policy) {
    case PRESENCE_POLICY_DND_WINS:
        return m->any_dnd ? PRESENCE_DND : m->best;
    case PRESENCE_POLICY_MOST_RECENT:
        /* Idle only if every session is idle. */
        st = session_status(m->recent);
        return st == PRESENCE_AWAY && m->any_online ? PRESENCE_ONLINE : st;
    case PRESENCE_POLICY_MOST_AVAILABLE:
    default:
        return m->best;
    }
}

/*
 * The user's current view from its sessions, in one pass: one merge for
 * all sessions, one per device type, and the most recently active session
 * that has a custom status. Strings are borrowed from that session.
 */
static void user_compute(const struct presence *p, const struct user *u, struct agg *out)
{
    struct merge all = {0}, dev[PRESENCE_DEVICE_COUNT];
    const struct session *custom = NULL;

    memset(dev, 0, sizeof(dev));
    for (const struct session *s = u->sessions; s; s = s->next) {
        merge_add(&all, s);
        merge_add(&dev[s->device], s);
        if (session_has_custom(s) && (custom == NULL || session_newer(s, custom)))
            custom = s;
    }
    out->status = merge_result(&all, p->cfg.policy);
    for (unsigned d = 0; d < PRESENCE_DEVICE_COUNT; d++)
        out->devices[d] = merge_result(&dev[d], p->cfg.policy);
    out->custom = custom ? custom->x : NULL;
}

static bool str_equal(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

static bool agg_equal(const struct agg *a, const struct agg *b)
{
    if (a->status != b->status || custom_expires_of(a->custom) != custom_expires_of(b->custom))
        return false;
    if (memcmp(a->devices, b->devices, sizeof(a->devices)) != 0)
        return false;
    return str_equal(text_of(a->custom), text_of(b->custom)) &&
           str_equal(emoji_of(a->custom), emoji_of(b->custom));
}

/* Frees the custom status of an owned agg. */
static void agg_release(struct agg *a)
{
    pool_free(a->custom);
    a->custom = NULL;
}

/* Fills a public view from an agg (strings borrowed from it). */
static void view_fill(const struct user *u, const struct agg *a, uint64_t version, uint64_t now,
                      struct presence_view *v)
{
    memset(v, 0, sizeof(*v));
    v->user = u->uid;
    v->status = (enum presence_status)a->status;
    for (unsigned d = 0; d < PRESENCE_DEVICE_COUNT; d++)
        v->devices[d] = (enum presence_status)a->devices[d];
    v->custom.text = text_of(a->custom) ? text_of(a->custom) : "";
    v->custom.emoji = emoji_of(a->custom) ? emoji_of(a->custom) : "";
    v->custom.expires_at = custom_expires_of(a->custom);
    v->last_seen = a->status == PRESENCE_OFFLINE ? u->last_seen : 0;
    v->version = version;
    v->now = now;
}

/* ---- users: creation, records, eviction ---- */

static void debounce_fired(struct wheel_timer *t, uint64_t now);

static struct user *user_new(struct presence *p, const char *uid)
{
    size_t n = strlen(uid);
    /* From offsetof(), not sizeof(): a short uid fits pool class 96. */
    struct user *u = palloc(p, offsetof(struct user, uid) + n + 1);

    u->p = p;
    memcpy(u->uid, uid, n + 1);
    hmap_insert(&p->users, &u->node, hash_bytes(uid, n));
    return u;
}

/* Takes u off the LRU list if it is a last-seen record: live again. */
static void user_unrecord(struct presence *p, struct user *u)
{
    if (u->flags & U_RECORD) {
        list_del(&u->lru);
        u->flags &= (uint8_t)~U_RECORD;
        u->p = p;
        u->debounce = NULL;
        p->stats.records--;
    }
}

static bool user_has_sessions(const struct user *u)
{
    return u->sessions != NULL;
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
        if (!session_attached(s) || s->conn_ref == NULL)
            return s;
    return NULL;
}

static void user_free(struct presence *p, struct user *u)
{
    /* Only settled users (no session, nothing pending) are freed. */
    assert(!user_has_sessions(u) && !(u->flags & (U_ARMED | U_IN_EMIT)));
    user_unrecord(p, u);
    hmap_remove(&p->users, &u->node);
    agg_release(&u->pub);
    pool_free(u);
}

/*
 * Puts u where its state says it belongs: a user with sessions or pending
 * work is live and off the LRU list; one without becomes a last-seen
 * record at the LRU's tail, and the oldest records beyond last_seen_max
 * are evicted (u itself only when the bound is 0).
 */
static void user_settle(struct presence *p, struct user *u)
{
    bool record = !user_has_sessions(u) && !(u->flags & (U_ARMED | U_IN_EMIT));

    if (!record) {
        user_unrecord(p, u);
        return;
    }
    if (u->flags & U_RECORD)
        return;
    if (p->cfg.last_seen_max == 0) {
        user_free(p, u);
        return;
    }
    list_insert_tail(&p->lru, &u->lru);
    u->flags |= U_RECORD;
    p->stats.records++;
    while (p->stats.records > p->cfg.last_seen_max) {
        user_free(p, container_of(list_first(&p->lru), struct user, lru));
        p->stats.evictions++;
    }
}

/* A change to u's view may have happened: make sure a flush is due. A
 * last-seen record that gets one is live again (user_settle() would take
 * it off the LRU list anyway; the debounce pointer needs it done first). */
static void user_touch(struct presence *p, struct user *u, uint64_t now)
{
    struct debounce *d;

    if (u->flags & U_ARMED)
        return;
    user_unrecord(p, u);
    d = palloc(p, sizeof(*d));
    wheel_timer_init(&d->timer, debounce_fired);
    d->user = u;
    u->debounce = d;
    u->flags |= U_ARMED;
    wheel_add(p->wheel, &d->timer, now + p->cfg.debounce_ms);
}

/* Unarms u's debounce timer and frees it (the wheel has unlinked it, or
 * wheel_del() does). */
static void user_disarm(struct user *u)
{
    if (!(u->flags & U_ARMED))
        return;
    wheel_del(&u->debounce->timer);
    pool_free(u->debounce);
    u->debounce = NULL;
    u->flags &= (uint8_t)~U_ARMED;
}

/* ---- emission ---- */

/*
 * The debounce timer: compare, publish a copy, then call on_change with the
 * old and new views (see the file comment for why in this order). The
 * timer is freed first: the wheel never touches it after this callback.
 */
static void debounce_fired(struct wheel_timer *t, uint64_t now)
{
    struct user *u = container_of(t, struct debounce, timer)->user;
    struct presence *p = u->p;
    struct agg cur, old;
    struct presence_view vold, vcur;
    uint64_t old_version = u->version;
    const struct extra *c;

    user_disarm(u);
    user_compute(p, u, &cur);
    if (!agg_equal(&cur, &u->pub)) {
        old = u->pub;
        u->pub = cur;
        c = cur.custom;
        u->pub.custom = c ? extra_new(p, 0, c->custom_expires, c->text, c->emoji) : NULL;
        u->version = ++p->seq;
        p->stats.events++;
        if (p->on_change) {
            view_fill(u, &old, old_version, now, &vold);
            view_fill(u, &u->pub, u->version, now, &vcur);
            u->flags |= U_IN_EMIT;
            p->depth++;
            p->on_change(p->ctx, &vold, &vcur);
            p->depth--;
            u->flags &= (uint8_t)~U_IN_EMIT;
        }
        agg_release(&old);
    }
    user_settle(p, u);
}

/* ---- sessions: timers and lifetime ---- */

static void session_fired(struct wheel_timer *t, uint64_t now);

static struct presence *session_engine(const struct session *s)
{
    return s->user->p;
}

static void session_info(const struct session *s, struct presence_session_info *out)
{
    memset(out, 0, sizeof(*out));
    out->sid = s->sid;
    out->user = s->user->uid;
    out->device = (enum presence_device)s->device;
    out->status = session_status(s);
    out->idle = !session_active(s);
    out->attached = session_attached(s);
    out->conn_ref = s->conn_ref;
    out->custom.text = text_of(s->x) ? text_of(s->x) : "";
    out->custom.emoji = emoji_of(s->x) ? emoji_of(s->x) : "";
    out->custom.expires_at = custom_expires_of(s->x);
    out->status_expires_at = status_expires_of(s);
    out->connected_at = s->connected_at;
    out->last_heartbeat = s->last_beat;
    out->last_activity = s->last_activity;
}

/* When s ends: TTL after its last recorded beat while attached, else at
 * the end of its reconnect grace. */
static uint64_t session_end_at(const struct presence *p, const struct session *s)
{
    return s->last_beat + (session_attached(s) ? p->cfg.session_ttl_ms : s->grace_ms);
}

/*
 * The earliest of s's deadlines: the end (see session_end_at()), the idle
 * deadline while active, and the BUSY/DND and custom status expiries when
 * set.
 */
static uint64_t session_deadline(const struct presence *p, const struct session *s)
{
    uint64_t at = session_end_at(p, s);

    if (session_active(s))
        at = MIN(at, s->last_activity + p->cfg.idle_ms);
    if (status_expires_of(s) != 0)
        at = MIN(at, status_expires_of(s));
    if (custom_expires_of(s->x) != 0)
        at = MIN(at, custom_expires_of(s->x));
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
    struct session *s = palloc(p, offsetof(struct session, sid) + n + 1);
    struct session **tail = &u->sessions;

    user_unrecord(p, u); /* before anything may need u->p */
    s->user = u;
    s->device = (uint8_t)device;
    s->conn_ref = conn_ref;
    s->connected_at = s->last_beat = s->last_activity = now;
    s->manual = PRESENCE_OFFLINE;
    s->flags = S_ACTIVE | S_ATTACHED;
    memcpy(s->sid, sid, n + 1);
    wheel_timer_init(&s->timer, session_fired);
    hmap_insert(&p->sessions, &s->node, hash_bytes(sid, n));
    if (!user_has_sessions(u))
        p->stats.users++;
    while (*tail) /* at most max_sessions_per_user */
        tail = &(*tail)->next;
    *tail = s;
    p->stats.sessions++;
    session_arm(p, s);
    return s;
}

/* Removes s from every table and timer; its user stays. */
static void session_unlink(struct presence *p, struct session *s)
{
    struct session **at = &s->user->sessions;

    wheel_del(&s->timer);
    hmap_remove(&p->sessions, &s->node);
    while (*at != s)
        at = &(*at)->next;
    *at = s->next;
    if (!user_has_sessions(s->user))
        p->stats.users--;
    p->stats.sessions--;
}

static void session_free(struct session *s)
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
    session_unlink(p, s);
    user_touch(p, u, now);
    p->stats.ended[reason]++;
    p->stats.state_writes++;
    if (p->on_end) {
        session_info(s, &info);
        p->depth++;
        p->on_end(p->ctx, &info, reason);
        p->depth--;
    }
    session_free(s);
    user_settle(p, u);
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

    if (session_active(s) && s->last_activity + p->cfg.idle_ms <= now) {
        session_flag(s, S_ACTIVE, false);
        p->stats.state_writes++;
        user_touch(p, s->user, now);
    }
    if (status_expires_of(s) != 0 && status_expires_of(s) <= now) {
        s->manual = PRESENCE_OFFLINE;
        session_set_status_expires(p, s, 0);
        expired = true;
    }
    if (custom_expires_of(s->x) != 0 && custom_expires_of(s->x) <= now) {
        session_clear_custom(s);
        expired = true;
    }
    if (expired) {
        p->stats.state_writes++;
        user_touch(p, s->user, now);
    }
    if (end <= now) {
        session_end(p, s, session_attached(s) ? PRESENCE_END_TTL : PRESENCE_END_GRACE, now);
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
    bool was_active = session_active(s);

    if (!force && was_active && now < s->last_activity + p->cfg.heartbeat_min_ms)
        return false;
    session_flag(s, S_ACTIVE, true);
    s->last_activity = now;
    session_arm(p, s);
    if (!was_active || s->user->sessions->next != NULL || force)
        user_touch(p, s->user, now);
    return true;
}

/* The session's user says it is away: idle now, until the next activity. */
static bool session_mark_idle(struct presence *p, struct session *s, uint64_t now)
{
    if (!session_active(s))
        return false;
    session_flag(s, S_ACTIVE, false);
    session_arm(p, s);
    user_touch(p, s->user, now);
    return true;
}

/* ---- public: lifecycle ---- */

void presence_config_init(struct presence_config *c)
{
    memset(c, 0, sizeof(*c));
    c->heartbeat_interval_ms = 15000;
    c->heartbeat_min_ms = 5000;
    c->session_ttl_ms = 45000;
    c->reconnect_grace_ms = 5000;
    c->idle_ms = 300000;
    c->debounce_ms = 100;
    c->max_sessions_per_user = 10;
    c->last_seen_max = 100000;
    c->version_start = 0;
    c->policy = PRESENCE_POLICY_MOST_AVAILABLE;
}

int presence_config_check(const struct presence_config *c)
{
    if (c->heartbeat_min_ms == 0 || c->heartbeat_min_ms > c->heartbeat_interval_ms)
        return PRESENCE_E_CONFIG;
    if (c->heartbeat_interval_ms >= c->session_ttl_ms)
        return PRESENCE_E_CONFIG;
    if (c->idle_ms == 0 || c->max_sessions_per_user == 0)
        return PRESENCE_E_CONFIG;
    if ((unsigned)c->policy > PRESENCE_POLICY_MOST_RECENT)
        return PRESENCE_E_CONFIG;
    return 0;
}

struct presence *presence_new(const struct presence_config *cfg, struct wheel *w,
                              presence_change_cb *on_change, presence_end_cb *on_end, void *ctx)
{
    struct presence *p;

    /* The configuration module validates before anything starts. */
    assert(presence_config_check(cfg) == 0);
    p = xcalloc(1, sizeof(*p));
    p->cfg = *cfg;
    p->wheel = w;
    p->on_change = on_change;
    p->on_end = on_end;
    p->ctx = ctx;
    p->seq = cfg->version_start;
    list_init(&p->lru);
    p->stats.allocations = 1;
    return p;
}

void presence_free(struct presence *p)
{
    struct hmap_node *n, *next;
    size_t it;

    if (p == NULL)
        return;
    /* Freeing the engine under one of its callbacks is not supported. */
    assert(p->depth == 0);
    for (n = hmap_first(&p->users, &it); n; n = next) {
        struct user *u = container_of(n, struct user, node);

        next = hmap_next(&p->users, n, &it);
        while (u->sessions) {
            struct session *s = u->sessions;

            session_unlink(p, s);
            session_free(s);
        }
        user_disarm(u);
        u->flags &= (uint8_t)~U_IN_EMIT;
        user_free(p, u);
    }
    hmap_release(&p->users);
    hmap_release(&p->sessions);
    free(p);
}

/* ---- public: sessions ---- */

int presence_session_start(struct presence *p, const char *sid, const char *uid,
                           enum presence_device device, void *conn_ref, uint64_t now)
{
    struct user *u;

    if (!presence_id_valid(sid) || !presence_id_valid(uid))
        return PRESENCE_E_BAD_ID;
    if ((unsigned)device >= PRESENCE_DEVICE_COUNT)
        return PRESENCE_E_BAD_DEVICE;
    if (session_find(p, sid) != NULL)
        return PRESENCE_E_SESSION_EXISTS;
    u = user_find(p, uid);
    if (u != NULL && user_nsessions(u) >= p->cfg.max_sessions_per_user) {
        struct session *old = user_oldest_unattached(u);

        if (old == NULL)
            return PRESENCE_E_TOO_MANY;                  /* every one has a live connection */
        session_end(p, old, PRESENCE_END_REPLACED, now); /* u stays: found again below */
        u = user_find(p, uid);
    }
    if (u == NULL)
        u = user_new(p, uid);
    session_new(p, u, sid, device, conn_ref, now);
    p->stats.state_writes++;
    user_touch(p, u, now);
    user_settle(p, u);
    return 0;
}

int presence_session_end(struct presence *p, const char *sid, uint64_t now)
{
    struct session *s = session_find(p, sid);

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    session_end(p, s, PRESENCE_END_LEAVE, now);
    return 0;
}

int presence_session_kick(struct presence *p, const char *sid, uint64_t now)
{
    struct session *s = session_find(p, sid);

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    session_end(p, s, PRESENCE_END_KICKED, now);
    return 0;
}

int presence_socket_closed(struct presence *p, const char *sid, const void *conn_ref, uint64_t now)
{
    struct session *s = session_find(p, sid);
    uint64_t deadline;

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    if (s->conn_ref != conn_ref)
        return PRESENCE_E_CONN;
    if (!session_attached(s))
        return 0;
    /* A close never extends the session past its TTL. Kept relative to
     * last_beat (<= now, as every time given is monotonic), which does
     * not move while detached: the offset is at most the TTL. */
    deadline = MIN(now + p->cfg.reconnect_grace_ms, s->last_beat + p->cfg.session_ttl_ms);
    session_flag(s, S_ATTACHED, false);
    s->grace_ms = deadline > s->last_beat ? (uint32_t)(deadline - s->last_beat) : 0;
    session_arm(p, s);
    p->stats.state_writes++;
    return 0;
}

int presence_session_resume(struct presence *p, const char *uid, const char *sid, void *conn_ref,
                            void **old_conn_ref, uint64_t now)
{
    struct session *s;

    if (!presence_id_valid(uid))
        return PRESENCE_E_BAD_ID;
    s = session_find(p, sid);
    if (s == NULL || strcmp(s->user->uid, uid) != 0)
        return PRESENCE_E_NO_SESSION;
    if (old_conn_ref != NULL)
        *old_conn_ref = session_attached(s) ? s->conn_ref : NULL;
    s->conn_ref = conn_ref;
    session_flag(s, S_ATTACHED, true);
    s->last_beat = MAX(s->last_beat, now);
    session_arm(p, s);
    p->stats.state_writes++;
    return 0;
}

/* Shared by heartbeat and activity: the live, attached session or an error. */
static int beat_target(struct presence *p, const char *sid, struct session **out)
{
    struct session *s = session_find(p, sid);

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    if (!session_attached(s))
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
    struct session *s = session_find(p, sid);
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
    user_touch(p, s->user, now);
    p->stats.state_writes++;
    return 0;
}

int presence_set_custom(struct presence *p, const char *sid, const char *text, const char *emoji,
                        uint64_t expires_at, uint64_t now)
{
    struct session *s = session_find(p, sid);
    struct extra *x;
    int rc;

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    rc = presence_custom_check(text, emoji);
    if (rc != 0)
        return rc;
    if (!is_set(text) && !is_set(emoji))
        expires_at = 0;
    else if (expires_at != 0 && expires_at <= now)
        return PRESENCE_E_BAD_EXPIRY;
    x = extra_new(p, status_expires_of(s), expires_at, text, emoji);
    pool_free(s->x);
    s->x = x;
    session_mark_active(p, s, now, true);
    session_arm(p, s);
    user_touch(p, s->user, now);
    p->stats.state_writes++;
    return 0;
}

/* ---- public: reads ---- */

int presence_get_user(const struct presence *p, const char *uid, uint64_t now,
                      struct presence_view *out)
{
    const struct user *u;

    if (!presence_id_valid(uid))
        return PRESENCE_E_BAD_ID;
    u = user_find(p, uid);
    if (u == NULL) {
        memset(out, 0, sizeof(*out));
        out->user = uid;
        out->custom.text = out->custom.emoji = "";
        out->now = now;
        return 0;
    }
    view_fill(u, &u->pub, u->version, now, out);
    return 0;
}

int presence_get_session(const struct presence *p, const char *sid,
                         struct presence_session_info *out)
{
    const struct session *s = session_find(p, sid);

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    session_info(s, out);
    return 0;
}

size_t presence_list_sessions(const struct presence *p, const char *uid,
                              struct presence_session_info *out, size_t cap)
{
    const struct user *u = user_find(p, uid);
    size_t n = 0;

    if (u == NULL)
        return 0;
    for (const struct session *s = u->sessions; s; s = s->next, n++)
        if (n < cap)
            session_info(s, &out[n]);
    return n;
}

int presence_last_seen(const struct presence *p, const char *uid, uint64_t *at)
{
    const struct user *u = user_find(p, uid);
    uint64_t seen;

    if (u == NULL)
        return PRESENCE_E_UNKNOWN_USER;
    seen = u->last_seen;
    for (const struct session *s = u->sessions; s; s = s->next)
        seen = MAX(seen, MAX(s->last_beat, s->last_activity));
    *at = seen;
    return 0;
}

int presence_set_last_seen(struct presence *p, const char *uid, uint64_t at, bool raise)
{
    struct user *u;

    if (!presence_id_valid(uid) || (at == 0 && raise))
        return PRESENCE_E_BAD_ID;
    u = user_find(p, uid);
    if (u && user_has_sessions(u))
        return PRESENCE_E_ONLINE;
    if (!u && at == 0)
        return 0; /* never seen already */
    if (!u)
        u = user_new(p, uid); /* zero-filled: offline, nothing emitted */
    u->last_seen = raise ? MAX(u->last_seen, at) : at;
    p->stats.state_writes++;
    user_settle(p, u);
    return 0;
}

void presence_get_stats(const struct presence *p, struct presence_stats *out)
{
    *out = p->stats;
}
