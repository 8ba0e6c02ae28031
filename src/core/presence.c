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
 * to a socket. This file holds the users (records, eviction), the merge
 * of a user's sessions into its view, the debounced emission, last seen,
 * the engine's lifetime and the reads; the sessions, their timer and the
 * calls that write them (the hot path) are in presence_session.c; their
 * shared types in presence_internal.h. The pure parts (validation, names,
 * the age helper, JSON encoding) are in presence_format.c. This comment
 * is the essay for all of them.
 *
 * ---- The hot path and the state it writes ----
 *
 * A heartbeat is one hash lookup, one comparison and, at most once per
 * heartbeat_min_ms per session, one field write plus one O(1) wheel move.
 * Nothing on that path allocates: timers are embedded in their sessions.
 * Every engine allocation goes through presence__palloc(), which counts, so tests
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
 * Any operation that may change a user's view calls presence__user_touch(), which
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
 * presence__user_settle(), when it has no session, no armed debounce timer and is not
 * inside its own on_change (U_IN_EMIT): it then either becomes a last-seen
 * record on the LRU list (records beyond last_seen_max are evicted, oldest
 * offline first) or is freed at once when last_seen_max is 0. Ending a
 * session always arms its user's debounce timer first, so no callback can
 * see its user disappear. Timer callbacks never touch their timer after
 * freeing its owner, and the wheel never touches a timer after its
 * callback, so freeing from a timer callback is safe (debounce_fired()
 * frees its own timer first thing).
 */
#include "presence_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "list.h"
#include "pool.h"

/* ---- allocation (counted) ---- */

void *presence__palloc(struct presence *p, size_t n)
{
    p->stats.allocations++;
    return pool_alloc(n);
}

/* Copies the set one of s into *at, moving *at past it; NULL for NULL or
 * "": the engine stores "none" as NULL. */
static char *extra_str(char **at, const char *s)
{
    size_t n;
    char *copy = *at;

    if (!presence__is_set(s))
        return NULL;
    n = strlen(s) + 1;
    memcpy(copy, s, n);
    *at += n;
    return copy;
}

/* A new extra with these fields (strings copied, "" or NULL = none), or
 * NULL when all of them are none. */
struct extra *presence__extra_new(struct presence *p, uint64_t status_expires,
                                  uint64_t custom_expires, const char *text, const char *emoji)
{
    size_t n = (presence__is_set(text) ? strlen(text) + 1 : 0) +
               (presence__is_set(emoji) ? strlen(emoji) + 1 : 0);
    struct extra *x;
    char *at;

    if (status_expires == 0 && custom_expires == 0 && n == 0)
        return NULL;
    x = presence__palloc(p, offsetof(struct extra, data) + n);
    at = x->data;
    x->status_expires = status_expires;
    x->custom_expires = custom_expires;
    x->text = extra_str(&at, text);
    x->emoji = extra_str(&at, emoji);
    return x;
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

struct user *presence__user_find(const struct presence *p, const char *uid)
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

struct session *presence__session_find(const struct presence *p, const char *sid)
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
    enum presence_status st = presence__session_status(s);

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
        st = presence__session_status(m->recent);
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
    if (a->status != b->status ||
        presence__custom_expires_of(a->custom) != presence__custom_expires_of(b->custom))
        return false;
    if (memcmp(a->devices, b->devices, sizeof(a->devices)) != 0)
        return false;
    return str_equal(presence__text_of(a->custom), presence__text_of(b->custom)) &&
           str_equal(presence__emoji_of(a->custom), presence__emoji_of(b->custom));
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
    v->custom.text = presence__text_of(a->custom) ? presence__text_of(a->custom) : "";
    v->custom.emoji = presence__emoji_of(a->custom) ? presence__emoji_of(a->custom) : "";
    v->custom.expires_at = presence__custom_expires_of(a->custom);
    v->last_seen = a->status == PRESENCE_OFFLINE ? u->last_seen : 0;
    v->version = version;
    v->now = now;
}

/* ---- users: creation, records, eviction ---- */

static void debounce_fired(struct wheel_timer *t, uint64_t now);

struct user *presence__user_new(struct presence *p, const char *uid)
{
    size_t n = strlen(uid);
    /* From offsetof(), not sizeof(): a short uid fits pool class 96. */
    struct user *u = presence__palloc(p, offsetof(struct user, uid) + n + 1);

    u->p = p;
    memcpy(u->uid, uid, n + 1);
    hmap_insert(&p->users, &u->node, hash_bytes(uid, n));
    return u;
}

/* Takes u off the LRU list if it is a last-seen record: live again. */
void presence__user_unrecord(struct presence *p, struct user *u)
{
    if (u->flags & U_RECORD) {
        list_del(&u->lru);
        u->flags &= (uint8_t)~U_RECORD;
        u->p = p;
        u->debounce = NULL;
        p->stats.records--;
    }
}

static void user_free(struct presence *p, struct user *u)
{
    /* Only settled users (no session, nothing pending) are freed. */
    assert(!presence__user_has_sessions(u) && !(u->flags & (U_ARMED | U_IN_EMIT)));
    presence__user_unrecord(p, u);
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
void presence__user_settle(struct presence *p, struct user *u)
{
    bool record = !presence__user_has_sessions(u) && !(u->flags & (U_ARMED | U_IN_EMIT));

    if (!record) {
        presence__user_unrecord(p, u);
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
 * last-seen record that gets one is live again (presence__user_settle() would take
 * it off the LRU list anyway; the debounce pointer needs it done first). */
void presence__user_touch(struct presence *p, struct user *u, uint64_t now)
{
    struct debounce *d;

    if (u->flags & U_ARMED)
        return;
    presence__user_unrecord(p, u);
    d = presence__palloc(p, sizeof(*d));
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
        u->pub.custom = c ? presence__extra_new(p, 0, c->custom_expires, c->text, c->emoji) : NULL;
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
    presence__user_settle(p, u);
}

void presence__user_publish(struct presence *p, struct user *u)
{
    struct agg cur;
    const struct extra *c;

    user_compute(p, u, &cur);
    agg_release(&u->pub);
    u->pub = cur;
    c = cur.custom;
    u->pub.custom = c ? presence__extra_new(p, 0, c->custom_expires, c->text, c->emoji) : NULL;
    u->version = ++p->seq;
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

            presence__session_unlink(p, s);
            presence__session_free(s);
        }
        user_disarm(u);
        u->flags &= (uint8_t)~U_IN_EMIT;
        user_free(p, u);
    }
    hmap_release(&p->users);
    hmap_release(&p->sessions);
    free(p);
}

/* ---- public: reads ---- */

int presence_get_user(const struct presence *p, const char *uid, uint64_t now,
                      struct presence_view *out)
{
    const struct user *u;

    if (!presence_ns_id_valid(uid))
        return PRESENCE_E_BAD_ID;
    u = presence__user_find(p, uid);
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
    const struct session *s = presence__session_find(p, sid);

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    presence__session_info(s, out);
    return 0;
}

int presence_session_set_tag(struct presence *p, const char *sid, unsigned tag)
{
    struct session *s = presence__session_find(p, sid);

    if (s == NULL)
        return PRESENCE_E_NO_SESSION;
    s->flags = (uint8_t)((s->flags & ~S_TAG_MASK) | ((tag & PRESENCE_TAG_MAX) << S_TAG_SHIFT));
    return 0;
}

size_t presence_list_sessions(const struct presence *p, const char *uid,
                              struct presence_session_info *out, size_t cap)
{
    const struct user *u = presence__user_find(p, uid);
    size_t n = 0;

    if (u == NULL)
        return 0;
    for (const struct session *s = u->sessions; s; s = s->next, n++)
        if (n < cap)
            presence__session_info(s, &out[n]);
    return n;
}

void presence_each_session(const struct presence *p, presence_session_fn *fn, void *ctx)
{
    struct presence_session_info info;
    struct hmap_node *n;
    size_t it;

    for (n = hmap_first(&p->sessions, &it); n; n = hmap_next(&p->sessions, n, &it)) {
        presence__session_info(container_of(n, struct session, node), &info);
        fn(ctx, &info);
    }
}

int presence_last_seen(const struct presence *p, const char *uid, uint64_t *at)
{
    const struct user *u = presence__user_find(p, uid);
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

    if (!presence_ns_id_valid(uid) || (at == 0 && raise))
        return PRESENCE_E_BAD_ID;
    u = presence__user_find(p, uid);
    if (u && presence__user_has_sessions(u))
        return PRESENCE_E_ONLINE;
    if (!u && at == 0)
        return 0; /* never seen already */
    if (!u)
        u = presence__user_new(p, uid); /* zero-filled: offline, nothing emitted */
    u->last_seen = raise ? MAX(u->last_seen, at) : at;
    p->stats.state_writes++;
    presence__user_settle(p, u);
    return 0;
}

void presence_get_stats(const struct presence *p, struct presence_stats *out)
{
    *out = p->stats;
}
