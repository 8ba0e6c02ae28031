/* SPDX-License-Identifier: MIT */
/*
 * cluster_user.c - users' global views on this node (cluster_user.h).
 *
 * struct gview, one per user this worker owns and needs the global view
 * of, lives in e->gviews while the user has local sessions (local), local
 * watchers (watched), parked requests, puts in flight or a contribution
 * Redis may not have (dirty); otherwise it goes.
 *
 * Degraded. A put that fails (Redis unreachable or too slow) makes the
 * user dirty and shows the local change at once as an estimate (merged
 * with what is known of the other nodes); every dirty or local user is
 * put again when Redis is back (hooks.health), and the estimate gives way
 * to the first view Redis answers. An estimate's version is the last one
 * shown plus one (the user's own presence shows versions, which must not
 * go back), so what Redis answers is compared with real_ver, the last
 * version Redis gave, not with the estimate's.
 *
 * The session cap across nodes. Every node writes its session counts of
 * a user ("<sessions> <live>", contrib.h) when they change, at most once
 * per SEATS_FLUSH_MS (a reload inside it writes nothing). A new session
 * first reads the other nodes' counts (cu__admit()); at the cap, this
 * node's sessions without a live connection end first, then the other
 * nodes are asked to end theirs (cluster_yield()), and only when every
 * session of the user has a live connection is the new one refused.
 */
#include "cluster_user.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cluster.h"
#include "cluster_http.h"
#include "cluster_resume.h"
#include "cluster_room.h"
#include "contrib.h"
#include "engine_privacy.h"
#include "engine_state.h"
#include "hooks.h"
#include "log.h"
#include "watch.h"

/* A failed get is answered from what is known for this long. */
#define RETRY_MS 1000
/* Session counts are written this long after their first change. */
#define SEATS_FLUSH_MS 250

struct gview {
    struct hmap_node node; /* e->gviews */
    char uid[PRESENCE_ID_MAX + 1];
    struct list parked;     /* struct emsg.park: requests waiting for the view */
    struct list admits;     /* struct emsg.park: new sessions waiting for the counts */
    struct list seats_link; /* e->seats_dirty, while seats_dirty */
    bool known;             /* v holds a global view (or an estimate) */
    bool asked;             /* a get is out */
    bool local;             /* this node has a contribution for the user */
    bool watched;           /* local watchers: the bucket is subscribed */
    bool degraded;          /* v is an estimate made while Redis was unreachable */
    bool dirty;             /* a put failed: Redis may not have this node's contribution */
    bool stale;             /* watched, and the last get failed: read again (reget()) */
    bool seats_asked;       /* a read of the other nodes' counts is out */
    bool seats_dirty;       /* the counts may differ from seats_n/seats_l */
    unsigned seats_n;       /* sessions in the last counts written */
    unsigned seats_l;       /* ... of them with a live connection */
    unsigned puts_out;      /* puts whose reply has not come back */
    unsigned local_n;       /* sessions in this node's last contribution */
    uint64_t real_ver;      /* the last version Redis gave (v.ver may be an estimate's) */
    uint64_t failed_at;     /* loop ms of the last failed get: answer from what is known */
    uint32_t pass;          /* the last anti-entropy pass that refreshed it */
    struct contrib_view v;
};

bool cu__on(const struct engine *e)
{
    return e->env->cluster != NULL && !e->cluster_gone;
}

static struct gview *find(struct engine *e, const char *uid)
{
    return ENGINE_FIND(struct gview, &e->gviews, uid, uid);
}

static struct gview *get(struct engine *e, const char *uid)
{
    struct gview *g = find(e, uid);

    if (g)
        return g;
    g = xcalloc(1, sizeof(*g));
    copy_id(g->uid, uid);
    list_init(&g->parked);
    list_init(&g->admits);
    hmap_insert(&e->gviews, &g->node, str_hash(g->uid));
    return g;
}

/* The view cu__ready() found for the request being answered now: kept
 * until this worker's next cu__ready(), so that the answer (cu__truth(),
 * cu__watch()) still finds it even when nothing else keeps it. One per
 * thread (a worker runs one engine). */
static _Thread_local struct {
    const struct engine *e;
    char uid[PRESENCE_ID_MAX + 1];
} held;

static bool is_held(const struct engine *e, const struct gview *g)
{
    return held.e == e && strcmp(held.uid, g->uid) == 0;
}

static void drop_if_unused(struct engine *e, struct gview *g)
{
    if (is_held(e, g) || g->local || g->watched || !list_empty(&g->parked) || g->asked ||
        g->dirty || g->puts_out || !list_empty(&g->admits) || g->seats_asked || g->seats_dirty ||
        g->seats_n)
        return;
    hmap_remove(&e->gviews, &g->node);
    free(g);
}

/* ---- views ---- */

static uint64_t to_mono(int64_t off, uint64_t wall)
{
    return wall == 0 ? 0 : (int64_t)wall - off > 0 ? (uint64_t)((int64_t)wall - off) : 1;
}

static uint64_t to_wall(int64_t off, uint64_t mono)
{
    return mono == 0 ? 0 : (uint64_t)((int64_t)mono + off);
}

/* g's view as the presence core's struct (strings borrowed from g). */
static void to_presence(struct engine *e, const struct gview *g, struct presence_view *out)
{
    int64_t off = wall_offset(e);

    memset(out, 0, sizeof(*out));
    out->user = g->uid;
    out->status = g->v.status;
    memcpy(out->devices, g->v.devices, sizeof(out->devices));
    out->custom.text = g->v.text;
    out->custom.emoji = g->v.emoji;
    out->custom.expires_at = to_mono(off, g->v.custom_expires);
    out->last_seen = g->v.status == PRESENCE_OFFLINE ? to_mono(off, g->v.seen) : 0;
    out->version = g->v.ver;
    out->now = loop_now(e->w->loop);
}

static void copy_str(char *dst, size_t cap, const char *s)
{
    size_t n = s ? strnlen(s, cap - 1) : 0;

    memcpy(dst, s ? s : "", n);
    dst[n] = '\0';
}

/* A local view as a (degraded) global one. */
static void from_presence(struct engine *e, const struct presence_view *p, unsigned n,
                          struct contrib_view *out)
{
    int64_t off = wall_offset(e);

    out->status = p->status;
    memcpy(out->devices, p->devices, sizeof(out->devices));
    copy_str(out->text, sizeof(out->text), p->custom.text);
    copy_str(out->emoji, sizeof(out->emoji), p->custom.emoji);
    out->custom_expires = to_wall(off, p->custom.expires_at);
    out->sessions = n;
    out->seen = p->status == PRESENCE_OFFLINE ? to_wall(off, p->last_seen) : 0;
}

void cu__truth(struct engine *e, const char *uid, struct presence_view *out, bool *degraded)
{
    struct gview *g = cu__on(e) ? find(e, uid) : NULL;

    /* While Redis is unreachable even a view that came from it is only
     * the last known one. */
    if (degraded)
        *degraded = cu__on(e) && ((g && g->degraded) || cluster_degraded(e->env->cluster));
    if (g && g->known) {
        to_presence(e, g, out);
        return;
    }
    presence_get_user(e->pres, uid, loop_now(e->w->loop), out);
}

/* The first request parked on l, taken off it. */
static struct emsg *unpark(struct list *l)
{
    struct emsg *em = container_of(list_first(l), struct emsg, park);

    list_del(&em->park);
    em->parked = false;
    return em;
}

/* Runs the requests that waited for g's view. */
static void release(struct engine *e, struct gview *g)
{
    struct list todo;

    list_init(&todo);
    list_move_all(&todo, &g->parked);
    while (!list_empty(&todo))
        engine__dispatch(e->w, &unpark(&todo)->msg);
}

/* g's view becomes nv (a larger version): watchers see the change. */
static void apply(struct engine *e, struct gview *g, const struct contrib_view *nv, bool own)
{
    struct presence_view old, cur;
    bool was_known = g->known;
    struct sub *s;

    to_presence(e, g, &old);
    if (!was_known)
        presence_get_user(e->pres, g->uid, loop_now(e->w->loop), &old);
    g->v = *nv;
    copy_id(g->v.uid, g->uid);
    g->known = true;
    to_presence(e, g, &cur);
    if (own) {
        engine__privacy_on_change(e, &old, &cur); /* last seen notes, then watchers */
        return;
    }
    if ((s = watch__find_sub(e, g->uid)))
        watch__republish(e, s, &cur);
}

/* ---- this node's contribution ---- */

static unsigned local_contrib(struct engine *e, const struct presence_view *cur, struct buf *b)
{
    struct presence_session_info si[64];
    size_t n = presence_list_sessions(e->pres, cur->user, si, ARRAY_SIZE(si));
    int64_t off = wall_offset(e);
    struct contrib c = {0};

    c.status = cur->status;
    memcpy(c.devices, cur->devices, sizeof(c.devices));
    c.sessions = (unsigned)n;
    c.text = cur->custom.text;
    c.emoji = cur->custom.emoji;
    c.custom_expires = to_wall(off, cur->custom.expires_at);
    for (size_t i = 0; i < n && i < ARRAY_SIZE(si); i++) {
        uint64_t a = to_wall(off, si[i].last_activity);
        if (a > c.activity)
            c.activity = a;
        c.online |= si[i].status == PRESENCE_ONLINE;
        if ((si[i].custom.text[0] || si[i].custom.emoji[0]) && a > c.custom_activity)
            c.custom_activity = a;
    }
    contrib_encode(b, &c);
    return (unsigned)n;
}

/* While Redis is unreachable: the local change, merged with what is
 * known of the other nodes (they keep the user online if they had
 * sessions), shown at once. */
static void estimate(struct engine *e, struct gview *g, const struct presence_view *cur, unsigned n)
{
    struct contrib_view nv = g->v;
    bool others = g->known && g->v.sessions > g->local_n;

    if (cur->status != PRESENCE_OFFLINE || !others)
        from_presence(e, cur, n + (others ? g->v.sessions - g->local_n : 0), &nv);
    nv.ver = g->v.ver + 1;
    apply(e, g, &nv, true);
    g->degraded = true;
}

static void put(struct engine *e, struct gview *g, const struct presence_view *cur)
{
    struct buf b = {0};
    unsigned n = 0;

    if (cur->status != PRESENCE_OFFLINE) {
        n = local_contrib(e, cur, &b);
        buf_append(&b, "", 1);
    }
    cluster_user_put(e->env->cluster, e->w->id, g->uid, n ? b.data : NULL,
                     to_wall(wall_offset(e), cur->last_seen ? cur->last_seen : cur->now),
                     e->hooks && engine__room_visible(e, g->uid));
    g->puts_out++;
    buf_release(&b);
    if (cluster_degraded(e->env->cluster))
        estimate(e, g, cur, n);
    g->local = n > 0;
    g->local_n = n;
}

void cu__local_change(struct engine *e, const struct presence_view *cur)
{
    struct gview *g = get(e, cur->user);

    put(e, g, cur);
    drop_if_unused(e, g);
}

/* ---- the session cap across nodes ---- */

/* uid's sessions here; *live gets those with a live connection. */
static unsigned local_seats(struct engine *e, const char *uid, unsigned *live)
{
    struct presence_session_info si[64];
    size_t n = presence_list_sessions(e->pres, uid, si, ARRAY_SIZE(si));

    *live = 0;
    for (size_t i = 0; i < n && i < ARRAY_SIZE(si); i++)
        *live += si[i].attached && si[i].conn_ref != NULL;
    return (unsigned)n;
}

static void seats_write(struct engine *e, struct gview *g)
{
    unsigned live, n = local_seats(e, g->uid, &live);

    if (n == g->seats_n && live == g->seats_l)
        return;
    cluster_seats_put(e->env->cluster, e->w->id, g->uid, n, live);
    g->seats_n = n;
    g->seats_l = live;
}

static void seats_flush(struct wheel_timer *t, uint64_t now)
{
    struct engine *e = container_of(t, struct engine, seats_timer);

    (void)now;
    e->seats_armed = false;
    while (!list_empty(&e->seats_dirty)) {
        struct gview *g = container_of(list_first(&e->seats_dirty), struct gview, seats_link);
        list_del(&g->seats_link);
        g->seats_dirty = false;
        seats_write(e, g);
        drop_if_unused(e, g);
    }
}

void cu__seats_changed(struct engine *e, const char *uid)
{
    struct gview *g;

    if (!cu__on(e))
        return;
    g = get(e, uid);
    if (!g->seats_dirty) {
        g->seats_dirty = true;
        list_insert_tail(&e->seats_dirty, &g->seats_link);
    }
    if (!e->seats_armed) {
        e->seats_armed = true;
        loop_timer_start(e->w->loop, &e->seats_timer, SEATS_FLUSH_MS);
    }
}

bool cu__admit(struct engine *e, struct emsg *em)
{
    struct gview *g;

    if (!cu__on(e) || em->admit != ADMIT_UNCHECKED || cluster_degraded(e->env->cluster))
        return true;
    g = get(e, em->uid);
    em->parked = true;
    list_insert_tail(&g->admits, &em->park);
    if (!g->seats_asked) {
        g->seats_asked = true;
        cluster_seats_get(e->env->cluster, e->w->id, em->uid);
    }
    return false;
}

/* Whether one more session of uid fits under the cap, given the other
 * nodes' counts; makes room when it must, and ends nothing when not. */
static bool make_room(struct engine *e, const char *uid, const struct cluster_seat *s, unsigned n)
{
    unsigned cap = (unsigned)e->w->srv->cfg.max_sessions_per_user, live;
    unsigned total = local_seats(e, uid, &live), spare = total - live, need;
    uint64_t now = loop_now(e->w->loop);

    for (unsigned i = 0; i < n; i++) {
        total += s[i].sessions;
        spare += s[i].sessions - s[i].live;
    }
    if (total < cap)
        return true;
    need = total + 1 - cap;
    if (spare < need)
        return false;
    while (need && presence_user_yield(e->pres, uid, now) == 0)
        need--;
    for (unsigned i = 0; need && i < n; i++) {
        unsigned k = MIN(s[i].sessions - s[i].live, need);
        if (k)
            cluster_yield(e->env->cluster, e->w->id, uid, s[i].node, k);
        need -= k;
    }
    return true;
}

static void on_seats(void *wctx, const char *uid, int err, const struct cluster_seat *seats,
                     unsigned n)
{
    struct engine *e = wctx;
    struct gview *g = find(e, uid);
    struct list todo;

    if (!g)
        return;
    g->seats_asked = false;
    list_init(&todo);
    list_move_all(&todo, &g->admits); /* g may go while they run */
    while (!list_empty(&todo)) {
        struct emsg *em = unpark(&todo);
        /* A failed read: the local cap alone, as while Redis is away. */
        em->admit = err < 0 || make_room(e, uid, seats, n) ? ADMIT_YES : ADMIT_NO;
        engine__dispatch(e->w, &em->msg);
    }
    if ((g = find(e, uid)))
        drop_if_unused(e, g);
}

static void on_yield(void *wctx, const char *uid, unsigned count)
{
    struct engine *e = wctx;
    uint64_t now = loop_now(e->w->loop);

    while (count-- && presence_user_yield(e->pres, uid, now) == 0)
        ;
}

/* ---- reads and watchers ---- */

/* The last held view goes unless something else keeps it. */
static void unhold(struct engine *e)
{
    struct gview *g;

    if (held.e != e)
        return;
    held.e = NULL;
    if ((g = find(e, held.uid)))
        drop_if_unused(e, g);
}

bool cu__ready(struct engine *e, struct emsg *em, const char *uid)
{
    struct gview *g;

    if (!cu__on(e))
        return true;
    unhold(e);
    g = get(e, uid);
    if (g->known || g->local || (g->failed_at && loop_now(e->w->loop) - g->failed_at < RETRY_MS)) {
        held.e = e;
        copy_id(held.uid, g->uid);
        return true;
    }
    em->parked = true;
    list_insert_tail(&g->parked, &em->park);
    if (!g->asked) {
        g->asked = true;
        cluster_user_get(e->env->cluster, e->w->id, uid);
    }
    return false;
}

bool cu__in_order(struct engine *e, struct emsg *em, const char *uid)
{
    struct gview *g = cu__on(e) ? find(e, uid) : NULL;

    if (!g || list_empty(&g->parked))
        return true;
    em->parked = true;
    list_insert_tail(&g->parked, &em->park);
    return false;
}

void cu__watch(struct engine *e, const char *uid, bool on)
{
    struct gview *g;

    if (!cu__on(e))
        return;
    g = get(e, uid);
    if (g->watched == on)
        return;
    g->watched = on;
    cluster_watch(e->env->cluster, e->w->id, uid, on);
    if (!on && !g->local)
        g->known = false; /* no bucket any more: it would go stale */
    drop_if_unused(e, g);
}

/* ---- the cluster's hooks ---- */

/* A put of g failed: Redis may not have what this node holds of the
 * user. The local state is shown at once as an estimate, and put again
 * when Redis is back (on_health). */
static void put_failed(struct engine *e, struct gview *g)
{
    struct presence_view cur;

    g->dirty = true;
    if (g->degraded) /* put() showed the latest local state already */
        return;
    presence_get_user(e->pres, g->uid, loop_now(e->w->loop), &cur);
    estimate(e, g, &cur, cur.status != PRESENCE_OFFLINE ? g->local_n : 0);
}

/* A view from Redis: taken when newer than the last one Redis gave, or,
 * for the reply to this node's own put while an estimate is shown, when
 * as new (the put changed nothing: the estimate was right). */
static void take_view(struct engine *e, struct gview *g, struct contrib_view *nv, bool own)
{
    bool newer =
        !g->known || nv->ver > g->real_ver || (own && g->degraded && nv->ver == g->real_ver);

    if (!newer)
        return;
    g->real_ver = nv->ver;
    if (g->known && nv->ver <= g->v.ver) /* an estimate showed a larger one */
        nv->ver = g->v.ver + 1;
    g->degraded = false;
    apply(e, g, nv, own);
}

static void on_view(void *wctx, const char *uid, int err, const char *json, size_t len, bool own)
{
    struct engine *e = wctx;
    struct gview *g = find(e, uid);
    struct contrib_view nv;

    if (!g)
        return; /* nobody here needs it any more */
    if (own && g->puts_out)
        g->puts_out--;
    if (!own)
        g->asked = false;
    if (err < 0 && own) {
        put_failed(e, g);
    } else if (err < 0) {
        g->failed_at = loop_now(e->w->loop) | 1;
        g->stale = g->watched;
    } else if (!json) { /* nothing stored: never online, or long gone */
        if (!g->known && !g->local) {
            memset(&nv, 0, sizeof(nv));
            apply(e, g, &nv, false);
        }
    } else if (contrib_view_decode(json, len, &nv) != 0) {
        log_warnx("cluster", "malformed view of %s", uid);
        g->failed_at = loop_now(e->w->loop) | 1;
    } else {
        if (own)
            g->dirty = false;
        else
            g->stale = false;
        take_view(e, g, &nv, own);
    }
    release(e, g);
    if ((g = find(e, uid)))
        drop_if_unused(e, g);
}

/* This node's put turned uid online or offline: the webhook, sent by this
 * node alone. Hidden users send nothing, and so do users whose settings
 * this worker does not hold (a dead node's users swept here): no webhook
 * ever tells of a user it cannot tell is visible (docs/cluster.md). */
static void on_user_hook(void *wctx, const char *uid, const char *json, size_t len, bool visible)
{
    struct engine *e = wctx;
    struct contrib_view v;

    if (!e->hooks || contrib_view_decode(json, len, &v) != 0 ||
        (!visible && !engine__room_visible(e, uid)))
        return;
    hooks_user(e->hooks, uid, v.sessions > 0, v.ver, (int64_t)time_wall_ms());
}

/* Reads a watched user's view again. A get already out does not stand
 * for this one: it may have been written before what is read now. */
static void reget(struct engine *e, struct gview *g)
{
    g->asked = true;
    cluster_user_get(e->env->cluster, e->w->id, g->uid);
}

static void on_resync(void *wctx, unsigned bucket)
{
    struct engine *e = wctx;
    struct hmap_node *n;
    size_t it;

    for (n = hmap_first(&e->gviews, &it); n; n = hmap_next(&e->gviews, n, &it)) {
        struct gview *g = container_of(n, struct gview, node);
        if (g->watched && cluster_bucket_of(g->uid) == bucket)
            reget(e, g);
    }
}

/* Redis is back: this node's contributions may be gone (data lost, or
 * this epoch swept): put every one again. Every watched user of another
 * node is read again: a view published while this node's subscription
 * was being restored may have been missed, and the resync of a
 * resubscribed bucket may have failed (its gets queued for a command
 * connection that was not back yet). */
static void on_health(void *wctx, bool up)
{
    struct engine *e = wctx;
    struct hmap_node *n;
    size_t it;

    if (!up)
        return;
    cr__on_health(e);
    for (n = hmap_first(&e->gviews, &it); n; n = hmap_next(&e->gviews, n, &it)) {
        struct gview *g = container_of(n, struct gview, node);
        struct presence_view cur;
        if (g->watched && !g->local)
            reget(e, g);
        if (g->seats_n) { /* Redis may have lost them, or this is a new epoch */
            cluster_seats_put(e->env->cluster, e->w->id, g->uid, g->seats_n, g->seats_l);
        }
        if (!g->local && !g->dirty && !g->degraded)
            continue;
        presence_get_user(e->pres, g->uid, loop_now(e->w->loop), &cur);
        put(e, g, &cur);
    }
}

void cu__each_local(struct engine *e, void (*fn)(struct engine *e, const char *uid, void *ctx),
                    void *ctx)
{
    struct hmap_node *n;
    size_t it;

    if (!cu__on(e))
        return;
    for (n = hmap_first(&e->gviews, &it); n; n = hmap_next(&e->gviews, n, &it)) {
        struct gview *g = container_of(n, struct gview, node);
        if (g->local)
            fn(e, g->uid, ctx);
    }
}

static void on_settings(void *wctx, const char *uid)
{
    engine__privacy_reload(wctx, uid);
}

void cu__settings_written(struct engine *e, const char *uid)
{
    if (cu__on(e))
        cluster_settings_changed(e->env->cluster, e->w->id, uid);
}

static void on_kick(void *wctx, const char *uid, const char *sid, const char *reason)
{
    engine__kick(wctx, uid, sid, reason[0] ? reason : NULL);
}

void cu__kick(struct engine *e, const char *uid, const char *sid, const char *reason)
{
    if (cu__on(e))
        cluster_kick(e->env->cluster, e->w->id, uid, sid, reason);
}

/*
 * Anti-entropy (cluster-reassert-ms): over each period every user this
 * worker puts is put again (a no-op in Redis when nothing changed: the
 * script publishes only a changed view) and every watched user is read
 * again, so that what pub/sub lost, or a write Redis lost without telling,
 * is repaired within one period. The pass is sliced: each second takes
 * its share of the users not refreshed in this pass yet, so the commands
 * are spread over the period instead of coming in one burst.
 */
#define REASSERT_TICK_MS 1000

static void reassert_one(struct engine *e, struct gview *g)
{
    struct presence_view cur;

    g->pass = e->reassert_pass;
    if (g->watched && !g->asked && !g->local)
        reget(e, g);
    if (g->local) { /* its reply refreshes the view too */
        presence_get_user(e->pres, g->uid, loop_now(e->w->loop), &cur);
        put(e, g, &cur);
    }
}

static void reassert_tick(struct wheel_timer *t, uint64_t now)
{
    struct engine *e = container_of(t, struct engine, reassert_timer);
    uint64_t period = (uint64_t)e->w->srv->cfg.cluster_reassert_ms;
    size_t budget = (e->gviews.count * REASSERT_TICK_MS + period - 1) / period, left = 0;
    struct hmap_node *n;
    size_t it;

    loop_timer_start(e->w->loop, t, REASSERT_TICK_MS);
    if (cluster_degraded(e->env->cluster)) /* health's put-again covers it */
        return;
    for (n = hmap_first(&e->gviews, &it); n; n = hmap_next(&e->gviews, n, &it)) {
        struct gview *g = container_of(n, struct gview, node);
        if (g->stale && !g->asked) /* a failed read: retried on each tick that reaches it */
            reget(e, g);
        if (g->pass == e->reassert_pass)
            continue;
        if (budget == 0) {
            left++;
            break;
        }
        budget--;
        reassert_one(e, g);
    }
    if (left == 0 && now - e->reassert_began >= period) { /* all done: the next pass */
        e->reassert_pass++;
        e->reassert_began = now;
    }
}

/* Whether the comma-separated list has an item that old lacks. */
static bool has_new(const char *list, const char *old)
{
    for (const char *p = list; *p;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        bool seen = false;
        for (const char *q = old; *q && !seen;) {
            const char *d = strchr(q, ',');
            size_t m = d ? (size_t)(d - q) : strlen(q);
            seen = m == n && memcmp(p, q, n) == 0;
            q += m + (d != NULL);
        }
        if (!seen)
            return true;
        p += n + (c != NULL);
    }
    return false;
}

/* Node epochs are past their lease and grace. Rooms drop their members
 * at once; a watched user with sessions on other nodes is read again
 * when an epoch joined the list: the read drops the dead epoch's
 * contribution whether or not its sweep ran yet (cluster.c, home_get()),
 * so no watcher keeps a ghost until the sweep. */
static void on_dead(void *wctx, const char *list)
{
    struct engine *e = wctx;
    bool added = has_new(list, e->cluster_dead ? e->cluster_dead : "");
    struct hmap_node *n;
    size_t it;

    free(e->cluster_dead);
    e->cluster_dead = xstrdup(list);
    cr__on_dead(wctx, list);
    if (!added)
        return;
    for (n = hmap_first(&e->gviews, &it); n; n = hmap_next(&e->gviews, n, &it)) {
        struct gview *g = container_of(n, struct gview, node);
        if (g->watched && g->known && g->v.sessions > g->local_n)
            reget(e, g);
    }
}

static const struct cluster_hooks hooks = {
    .view = on_view,
    .user_hook = on_user_hook,
    .resync = on_resync,
    .health = on_health,
    .settings = on_settings,
    .kick = on_kick,
    .seats = on_seats,
    .yield = on_yield,
    .hsession = ch__on_hsession,
    .hbeat = ch__on_hbeat,
    .rsession = cs__on_rsession,
    .moved = cs__on_moved,
    .room_message = cr__on_message,
    .room_state = cr__on_state,
    .room_hooks = cr__on_hooks,
    .room_resync = cr__on_resync,
    .dead = on_dead,
};

void cu__attach(struct engine *e)
{
    if (!cu__on(e))
        return;
    cluster_attach(e->env->cluster, e->w, &hooks, e);
    list_init(&e->seats_dirty);
    wheel_timer_init(&e->seats_timer, seats_flush);
    if (e->w->srv->cfg.cluster_reassert_ms > 0) {
        e->reassert_pass = 1;
        e->reassert_began = loop_now(e->w->loop);
        wheel_timer_init(&e->reassert_timer, reassert_tick);
        loop_timer_start(e->w->loop, &e->reassert_timer, REASSERT_TICK_MS);
    }
}

static void free_parked(struct list *l)
{
    while (!list_empty(l)) {
        struct emsg *em = unpark(l);
        em->msg.free(&em->msg);
    }
}

void cu__detach(struct engine *e)
{
    struct hmap_node *n, *next;
    size_t it;

    if (!cu__on(e))
        return;
    wheel_del(&e->reassert_timer);
    wheel_del(&e->seats_timer);
    if (held.e == e)
        held.e = NULL;
    cluster_detach(e->env->cluster, e->w->id);
    for (n = hmap_first(&e->gviews, &it); n; n = next) {
        struct gview *g = container_of(n, struct gview, node);
        next = hmap_next(&e->gviews, n, &it);
        free_parked(&g->parked);
        free_parked(&g->admits);
        hmap_remove(&e->gviews, n);
        free(g);
    }
    hmap_release(&e->gviews);
    free(e->cluster_dead);
    e->cluster_dead = NULL;
    e->cluster_gone = true;
}
