/* SPDX-License-Identifier: MIT */
/*
 * engine_privacy.c - privacy on the owner side of the engine: the settings
 * cache, the store reads and writes behind it, per-viewer watch
 * subscriptions with class-based fan-out, the `privacy` message and the
 * admin calls that land on a user's owner.
 *
 * Cache. The owner of a user keeps a struct puser for it: the settings
 * (most private until the store answered: fail closed), the public state
 * of privacy.h, and a cache of relations (viewer -> contact, blocked)
 * filled by store_get_relations(). Every write of a user's settings,
 * contacts or blocks goes through its owner, which applies it to the cache
 * when the store acknowledged it: explicit invalidation with one writer.
 * A puser stays while it is in use (subscriptions, live sessions, loads,
 * writes or parked messages); beyond PUSER_MAX per worker the least
 * recently used unused ones go.
 *
 * Parking. A message that needs data not cached yet (a watch needs the
 * viewer's relation, a query too, a join the room visibility) is parked on
 * the puser, the loads are submitted, and when the last load completes the
 * parked messages run again in arrival order through engine__dispatch().
 * Any later message about the same user parks behind them, so per-user
 * order holds.
 *
 * Fan-out. struct sub keeps one struct subv per viewer with its class; a
 * transition is encoded once per class in use (privacy_encode()), classes
 * whose frame did not change are left out, and each subscribed worker gets
 * one OP_PRESENCE with the frames. A settings or relation change
 * re-classifies the viewers: a viewer whose class changed gets OP_VIEW
 * with its new frame, and the watcher side sends it only if its bytes
 * differ from what that viewer last got.
 */
#include "engine_privacy.h"
#include "cluster_user.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>

#include "engine_admin.h"
#include "engine_room.h"
#include "engine_state.h"
#include "frame.h"
#include "hooks.h"
#include "http_read.h"
#include "httpd.h"
#include "json.h"
#include "lastseen.h"
#include "log.h"
#include "pool.h"
#include "watch.h"

#define PUSER_MAX    65536 /* cached users per worker before eviction */
#define EVICT_SCAN   16    /* pusers looked at per eviction */
#define RELS_MAX     4096  /* cached relations per user before a reset */
#define SESSIONS_MAX 64    /* sessions told about a privacy change */
#define RETRY_MS     1000  /* a failed read is used (most private) this long */

struct prel {
    struct hmap_node node; /* puser->rels, by viewer */
    bool contact, blocked;
    bool pending; /* a load is in flight */
    bool stale;   /* the store failed: most private, reload on next use */
    bool sync;    /* engine__privacy_reload(): the watcher's bits follow this load */
    uint64_t failed_at;
    char viewer[];
};

/*
 * A cached user. Every owned user with a live session has one, so the
 * always-present part is kept small: the settings (one of the 18 possible
 * values, as an index into settings_all[]), flags and the uid. The rest
 * exists only while in use: the public last-seen state while not all zero
 * (a returning user has one), on its own; and with it, as a struct pstate,
 * while a load or write is in flight, messages are parked, relations are
 * cached or a read failed. puser_trim() shrinks it back when that is over.
 */
struct puser {
    struct hmap_node node;       /* e->pusers, by uid */
    struct list lru;             /* e->plru */
    struct privacy_public *more; /* NULL = all zero; the pub of a pstate if PU_BUSY */
    uint8_t bits;                /* PU_SET_MASK: settings_all[] index; PU_* flags */
    char uid[];                  /* the user */
};

#define PU_SET_MASK 0x1fu
#define PU_LOADED   0x20u /* set holds the stored settings (else most private) */
#define PU_STALE    0x40u /* the last read failed (pstate.failed_at says when) */
#define PU_BUSY     0x80u /* more is the pub of a struct pstate */

struct pstate {
    struct privacy_public pub; /* first: the pstate is found from it */
    struct store_privacy want; /* while writes: the latest value a write in flight sets */
    unsigned loads, writes;    /* store requests in flight */
    uint64_t failed_at;        /* while PU_STALE: loop ms of the failed read */
    struct hmap rels;          /* struct prel; rels.count of them */
    struct list parked;        /* struct emsg.park */
};

struct load {
    struct engine *e;
    char uid[PRESENCE_ID_MAX + 1];
    char viewer[PRESENCE_ID_MAX + 1]; /* "" = settings only */
};

/* ---- lookups and lifetime ---- */

static struct puser *find_puser(struct engine *e, const char *uid)
{
    return ENGINE_FIND(struct puser, &e->pusers, uid, uid);
}

/* ---- a puser's parts: settings bits and the on-demand state ---- */

/* Every settings value, at index online * 6 + last_seen * 2 + invisible:
 * a puser keeps the index, readers get a pointer into this table. */
/* clang-format off */
static const struct store_privacy settings_all[18] = {
    {STORE_VIS_EVERYONE, STORE_VIS_EVERYONE, false},
    {STORE_VIS_EVERYONE, STORE_VIS_EVERYONE, true},
    {STORE_VIS_EVERYONE, STORE_VIS_CONTACTS, false},
    {STORE_VIS_EVERYONE, STORE_VIS_CONTACTS, true},
    {STORE_VIS_EVERYONE, STORE_VIS_NOBODY, false},
    {STORE_VIS_EVERYONE, STORE_VIS_NOBODY, true},
    {STORE_VIS_CONTACTS, STORE_VIS_EVERYONE, false},
    {STORE_VIS_CONTACTS, STORE_VIS_EVERYONE, true},
    {STORE_VIS_CONTACTS, STORE_VIS_CONTACTS, false},
    {STORE_VIS_CONTACTS, STORE_VIS_CONTACTS, true},
    {STORE_VIS_CONTACTS, STORE_VIS_NOBODY, false},
    {STORE_VIS_CONTACTS, STORE_VIS_NOBODY, true},
    {STORE_VIS_NOBODY, STORE_VIS_EVERYONE, false},
    {STORE_VIS_NOBODY, STORE_VIS_EVERYONE, true},
    {STORE_VIS_NOBODY, STORE_VIS_CONTACTS, false},
    {STORE_VIS_NOBODY, STORE_VIS_CONTACTS, true},
    {STORE_VIS_NOBODY, STORE_VIS_NOBODY, false},
    {STORE_VIS_NOBODY, STORE_VIS_NOBODY, true},
};
/* clang-format on */
_Static_assert(ARRAY_SIZE(settings_all) <= PU_SET_MASK + 1, "puser.bits keeps the index in 5 bits");

static const struct privacy_public pub_none; /* all zero: nothing frozen or kept */

static unsigned vis_index(enum store_visibility v)
{
    return (unsigned)v <= STORE_VIS_NOBODY ? (unsigned)v : STORE_VIS_NOBODY;
}

/* The index of p in settings_all[] (a value the store never returns,
 * out of range, counts as nobody, as everywhere else). */
static uint8_t settings_index(const struct store_privacy *p)
{
    return (uint8_t)(vis_index(p->online) * 6 + vis_index(p->last_seen) * 2 +
                     (p->invisible ? 1 : 0));
}

static const struct store_privacy *pu_set(const struct puser *pu)
{
    return &settings_all[pu->bits & PU_SET_MASK];
}

static void pu_set_settings(struct puser *pu, const struct store_privacy *p)
{
    pu->bits = (uint8_t)((pu->bits & ~PU_SET_MASK) | settings_index(p));
}

static bool pu_loaded(const struct puser *pu)
{
    return pu->bits & PU_LOADED;
}

static bool pu_stale(const struct puser *pu)
{
    return pu->bits & PU_STALE;
}

static void pu_flag(struct puser *pu, uint8_t flag, bool on)
{
    pu->bits = (uint8_t)(on ? pu->bits | flag : pu->bits & ~flag);
}

/* pu's pstate, or NULL while it has none. */
static struct pstate *pu_busy(const struct puser *pu)
{
    return (pu->bits & PU_BUSY) ? container_of(pu->more, struct pstate, pub) : NULL;
}

/* pu's pstate, created (with the pub pu had) if it has none. Moves the
 * pub: no pointer from pu_pub() may be held across it. */
static struct pstate *pu_x(struct puser *pu)
{
    struct pstate *x = pu_busy(pu);

    if (x)
        return x;
    x = pool_alloc(sizeof(*x));
    list_init(&x->parked);
    if (pu->more) {
        x->pub = *pu->more;
        pool_free(pu->more);
    }
    pu->more = &x->pub;
    pu_flag(pu, PU_BUSY, true);
    return x;
}

static unsigned pu_loads(const struct puser *pu)
{
    return pu_busy(pu) ? pu_busy(pu)->loads : 0;
}

static unsigned pu_writes(const struct puser *pu)
{
    return pu_busy(pu) ? pu_busy(pu)->writes : 0;
}

/* The settings the writes in flight end at (the stored ones without). */
static const struct store_privacy *pu_want(const struct puser *pu)
{
    return pu_writes(pu) ? &pu_busy(pu)->want : pu_set(pu);
}

static const struct privacy_public *pu_pub(const struct puser *pu)
{
    return pu->more ? pu->more : &pub_none;
}

static bool pu_parked(const struct puser *pu)
{
    return pu_busy(pu) && !list_empty(&pu_busy(pu)->parked);
}

static size_t pu_nrels(const struct puser *pu)
{
    return pu_busy(pu) ? pu_busy(pu)->rels.count : 0;
}

/* Sets one of pu's public last-seen fields (at = offsetof() in struct
 * privacy_public), allocating only for a value that is not zero. */
static void pu_pub_set(struct puser *pu, size_t at, uint64_t v)
{
    if (!pu->more) {
        if (v == 0)
            return;
        pu->more = pool_alloc(sizeof(*pu->more));
    }
    memcpy((char *)pu->more + at, &v, sizeof(v));
}

/* Shrinks pu's on-demand state to what is still in use: the pstate goes
 * when nothing in flight, parked, cached or failed is left; the pub goes
 * when it is all zero. Only where no caller up the stack holds a pointer
 * into either. */
static void puser_trim(struct puser *pu)
{
    struct pstate *x = pu_busy(pu);
    struct privacy_public pub;

    if (x) {
        if (x->loads || x->writes || pu_stale(pu) || x->rels.count || !list_empty(&x->parked))
            return;
        pub = x->pub;
        hmap_release(&x->rels);
        pool_free(x);
        pu->more = NULL;
        pu_flag(pu, PU_BUSY, false);
        pu_pub_set(pu, offsetof(struct privacy_public, frozen_last_seen), pub.frozen_last_seen);
        pu_pub_set(pu, offsetof(struct privacy_public, offline_last_seen), pub.offline_last_seen);
    }
    if (pu->more && memcmp(pu->more, &pub_none, sizeof(pub_none)) == 0) {
        pool_free(pu->more);
        pu->more = NULL;
    }
}

static struct prel *find_prel(struct puser *pu, const char *viewer)
{
    return pu_busy(pu) ? ENGINE_FIND(struct prel, &pu_busy(pu)->rels, viewer, viewer) : NULL;
}

static void rels_clear(struct puser *pu, bool keep_pending)
{
    struct hmap *rels = pu_busy(pu) ? &pu_busy(pu)->rels : NULL;
    struct hmap_node *n, *next;
    size_t it;

    for (n = rels ? hmap_first(rels, &it) : NULL; n; n = next) {
        struct prel *r = container_of(n, struct prel, node);
        next = hmap_next(rels, n, &it);
        r->sync = false; /* a write here since: its load may predate it */
        if (keep_pending && r->pending)
            continue;
        hmap_remove(rels, n);
        free(r);
    }
}

/* ---- lifetime ---- */

static bool has_sessions(struct engine *e, const char *uid)
{
    return presence_list_sessions(e->pres, uid, NULL, 0) > 0;
}

static bool pinned(struct engine *e, struct puser *pu)
{
    return pu_loads(pu) || pu_writes(pu) || pu_parked(pu) || watch__find_sub(e, pu->uid) ||
           has_sessions(e, pu->uid);
}

static void puser_free(struct engine *e, struct puser *pu)
{
    hmap_remove(&e->pusers, &pu->node);
    list_del(&pu->lru);
    if (pu_busy(pu)) {
        rels_clear(pu, false);
        hmap_release(&pu_busy(pu)->rels);
        pool_free(pu_busy(pu));
    } else {
        pool_free(pu->more);
    }
    e->npusers--;
    pool_free(pu);
}

/* Drops least recently used pusers nobody uses while over PUSER_MAX,
 * looking at EVICT_SCAN of them at most (those in use move to the back),
 * so a cache full of online users costs O(1) per insert, not a scan. */
static void evict(struct engine *e)
{
    for (unsigned i = 0; i < EVICT_SCAN && e->npusers > PUSER_MAX; i++) {
        struct puser *pu = container_of(list_first(&e->plru), struct puser, lru);
        if (!pinned(e, pu)) {
            puser_free(e, pu);
            continue;
        }
        list_del(&pu->lru);
        list_insert_tail(&e->plru, &pu->lru);
    }
}

static struct puser *puser_get(struct engine *e, const char *uid)
{
    struct puser *pu = find_puser(e, uid);
    struct store_privacy most = privacy_most_private();
    size_t n;

    if (pu) {
        list_del(&pu->lru);
        list_insert_tail(&e->plru, &pu->lru);
        return pu;
    }
    n = strlen(uid);
    /* From offsetof(), not sizeof(): a short uid fits pool class 48. */
    pu = pool_alloc(offsetof(struct puser, uid) + n + 1);
    memcpy(pu->uid, uid, n + 1);
    pu_set_settings(pu, &most);
    hmap_insert(&e->pusers, &pu->node, str_hash(pu->uid));
    list_insert_tail(&e->plru, &pu->lru);
    e->npusers++;
    evict(e);
    return pu;
}

/* ---- frames ---- */

struct payload *engine__view_frame(struct engine *e, const struct presence_view *truth, int cls)
{
    const struct privacy_public *pub;
    const struct store_privacy *set = engine__privacy_settings(e, truth->user, &pub);
    struct presence_view v;

    privacy_view(truth, set, pub, (enum privacy_class)cls, &v);
    return frame_presence(&v, cls, wall_offset(e));
}

bool engine__view_online(struct engine *e, const struct presence_view *truth, int cls)
{
    const struct privacy_public *pub;
    const struct store_privacy *set = engine__privacy_settings(e, truth->user, &pub);
    struct presence_view v;

    privacy_view(truth, set, pub, (enum privacy_class)cls, &v);
    return v.status != PRESENCE_OFFLINE;
}

static enum privacy_relation relation(struct puser *pu, const char *viewer, bool contact,
                                      bool blocked)
{
    if (viewer[0] && strcmp(viewer, pu->uid) == 0)
        return PRIVACY_SELF;
    if (blocked)
        return PRIVACY_BLOCKED;
    return contact ? PRIVACY_CONTACT : PRIVACY_STRANGER;
}

int engine__privacy_class(struct engine *e, const char *uid, const char *viewer, bool *contact,
                          bool *blocked)
{
    struct puser *pu = puser_get(e, uid);
    struct prel *r = viewer[0] ? find_prel(pu, viewer) : NULL;
    bool c = r && r->contact, b = !r ? false : r->blocked;

    if (viewer[0] && strcmp(viewer, uid) != 0 && (!r || r->pending))
        b = true; /* not known: most private */
    if (contact)
        *contact = c;
    if (blocked)
        *blocked = b;
    return (int)privacy_class_of(pu_set(pu), relation(pu, viewer, c, b));
}

const struct store_privacy *engine__privacy_settings(struct engine *e, const char *uid,
                                                     const struct privacy_public **pub)
{
    struct puser *pu = puser_get(e, uid);

    *pub = pu_pub(pu);
    return pu_set(pu);
}

/* Room visibility while writes are in flight: visible only if both the
 * stored and the requested settings allow it, so a join sent right after
 * "invisible" never shows the user, even for the milliseconds of the write. */
static bool room_visible_now(const struct puser *pu)
{
    return pu_loaded(pu) && privacy_room_visible(pu_set(pu)) && privacy_room_visible(pu_want(pu));
}

bool engine__privacy_hidden(struct engine *e, const char *uid)
{
    struct puser *pu = find_puser(e, uid);

    return !pu || !pu_loaded(pu) || pu_set(pu)->invisible || pu_want(pu)->invisible;
}

uint64_t engine__privacy_offline_seen(struct engine *e, const char *uid)
{
    struct puser *pu = find_puser(e, uid);

    return pu ? pu_pub(pu)->offline_last_seen : 0;
}

void engine__privacy_restore_offline_seen(struct engine *e, const char *uid, uint64_t at)
{
    if (at)
        pu_pub_set(puser_get(e, uid), offsetof(struct privacy_public, offline_last_seen), at);
}

bool engine__room_visible(struct engine *e, const char *uid)
{
    struct puser *pu = find_puser(e, uid);

    return pu && room_visible_now(pu);
}

/* Re-classifies every viewer of pu (settings or relations changed), then
 * republishes the frames whose bytes changed. */
static void reclassify(struct engine *e, struct puser *pu)
{
    struct sub *s = watch__find_sub(e, pu->uid);
    struct presence_view truth;
    struct list *pos;

    if (!s)
        return;
    cu__truth(e, pu->uid, &truth, NULL);
    list_foreach(pos, &s->viewers)
    {
        struct subv *v = container_of(pos, struct subv, link);
        int cls =
            (int)privacy_class_of(pu_set(pu), relation(pu, v->viewer, v->contact, v->blocked));
        if (cls == v->cls)
            continue;
        s->ncls[v->cls]--;
        s->ncls[cls]++;
        v->cls = cls;
        watch__send_view(e, &truth, v, v->workers);
    }
    for (int k = 0; k < PRIVACY_NCLASS; k++) {
        if (s->ncls[k] == 0) {
            payload_unref(s->lastf[k]);
            s->lastf[k] = NULL;
        }
    }
    watch__republish(e, s, &truth);
}

/* ---- last seen: what the store gets, and invisibility's frozen view ---- */

/* Whether uid's last seen is public now, so that it may move and be
 * stored: settings known, not invisible, and no write making it so in
 * flight. */
static bool lastseen_public(const struct puser *pu)
{
    return pu && pu_loaded(pu) && !pu_set(pu)->invisible && !pu_want(pu)->invisible;
}

/*
 * Invisibility ends. Online: the public view is live again, and the last
 * public offline is the frozen moment. Offline: everything looks as if
 * the user had gone offline when invisibility began, so the core's last
 * seen goes back to the frozen moment (what the user did while invisible
 * never shows, in memory as in the store, which never got more than that
 * moment), and watchers whose view is unchanged get nothing.
 */
static void unfreeze(struct engine *e, struct puser *pu, const struct presence_view *truth)
{
    uint64_t frozen = pu_pub(pu)->frozen_last_seen;

    if (truth->status != PRESENCE_OFFLINE)
        pu_pub_set(pu, offsetof(struct privacy_public, offline_last_seen),
                   frozen); /* its last public offline */
    else
        presence_set_last_seen(e->pres, pu->uid, frozen, false);
}

/* Notes the last seen a settings change makes public (before p is set):
 * becoming invisible freezes it at that moment (as if going offline);
 * becoming visible while online, or settings first known for an online
 * user, makes "seen now" public again. */
static void lastseen_on_settings(struct engine *e, struct puser *pu, const struct store_privacy *p,
                                 bool loaded, bool was_invisible, const struct presence_view *truth)
{
    bool online = truth->status != PRESENCE_OFFLINE;
    bool want_invisible = pu_writes(pu) && pu_busy(pu)->want.invisible;

    if (p->invisible && loaded && !was_invisible)
        engine__lastseen_note(e, pu->uid, pu_pub(pu)->frozen_last_seen);
    else if (!p->invisible && online && (!loaded || was_invisible) && !want_invisible)
        engine__lastseen_note(e, pu->uid, truth->now);
}

void engine__privacy_note_online(struct engine *e)
{
    struct hmap_node *n;
    size_t it;
    uint64_t at;

    for (n = hmap_first(&e->pusers, &it); n; n = hmap_next(&e->pusers, n, &it)) {
        struct puser *pu = container_of(n, struct puser, node);
        if (lastseen_public(pu) && has_sessions(e, pu->uid) &&
            presence_last_seen(e->pres, pu->uid, &at) == 0)
            engine__lastseen_note(e, pu->uid, at);
    }
}

/* Webhooks see a user as its rooms do (engine__room_visible()): hiding
 * an online user is its user.offline, showing it again its user.online.
 * With many nodes every node's cache applies the change, so only the
 * node that wrote it (settings_apply()'s written) sends it. */
static void hook_visibility(struct engine *e, const struct presence_view *truth, bool visible)
{
    if (e->hooks && truth->status != PRESENCE_OFFLINE)
        hooks_user(e->hooks, truth->user, visible, truth->version, (int64_t)time_wall_ms());
}

/* New settings for pu: a load, or an acknowledged write (written). */
static void settings_apply(struct engine *e, struct puser *pu, const struct store_privacy *p,
                           bool written)
{
    bool loaded = pu_loaded(pu);
    bool was_visible = loaded && privacy_room_visible(pu_set(pu));
    bool was_invisible = pu_set(pu)->invisible;
    bool changed = !loaded || settings_index(pu_set(pu)) != settings_index(p);
    struct presence_view truth;

    if (!changed)
        return;
    cu__truth(e, pu->uid, &truth, NULL);
    if (p->invisible && (!loaded || !was_invisible))
        pu_pub_set(pu, offsetof(struct privacy_public, frozen_last_seen),
                   truth.status == PRESENCE_OFFLINE ? truth.last_seen : truth.now);
    if (!p->invisible && loaded && was_invisible)
        unfreeze(e, pu, &truth);
    lastseen_on_settings(e, pu, p, loaded, was_invisible, &truth);
    pu_set_settings(pu, p); /* without writes in flight, that is also what they want */
    pu_flag(pu, PU_LOADED, true);
    if (was_visible != privacy_room_visible(p))
        engine__rooms_visibility(e, pu->uid, privacy_room_visible(p));
    if (loaded && was_visible != privacy_room_visible(p) && (written || !cu__on(e)))
        hook_visibility(e, &truth, privacy_room_visible(p));
    reclassify(e, pu);
}

/* ---- loads and parking ---- */

static void replay(struct engine *e, struct puser *pu)
{
    struct list todo;

    list_init(&todo);
    while (pu_parked(pu)) {
        struct list *l = list_first(&pu_x(pu)->parked);
        list_del(l);
        list_insert_tail(&todo, l);
    }
    puser_trim(pu);
    while (!list_empty(&todo)) { /* pu may go meanwhile: use only the list */
        struct emsg *em = container_of(list_first(&todo), struct emsg, park);
        list_del(&em->park);
        em->parked = false;
        engine__dispatch(e->w, &em->msg);
    }
}

/* A watcher's relation bits follow a fresh read of its relation (after a
 * change made on another node, engine__privacy_reload()). */
static bool sync_subv(struct engine *e, struct puser *pu, const struct prel *rel)
{
    struct sub *s = watch__find_sub(e, pu->uid);
    struct list *pos;
    bool changed = false;

    if (!s)
        return false;
    list_foreach(pos, &s->viewers)
    {
        struct subv *v = container_of(pos, struct subv, link);
        if (strcmp(v->viewer, rel->viewer) == 0 &&
            (v->contact != rel->contact || v->blocked != rel->blocked)) {
            v->contact = rel->contact;
            v->blocked = rel->blocked;
            changed = true;
        }
    }
    return changed;
}

static void load_done(void *ctx, int status, const struct store_result *r)
{
    struct load *ld = ctx;
    struct engine *e = ld->e;
    struct puser *pu = e->closing ? NULL : find_puser(e, ld->uid);
    struct store_privacy p = status < 0 ? privacy_most_private() : r->privacy;
    bool resync = false;

    if (!pu) {
        free(ld);
        return;
    }
    pu_x(pu)->loads--;
    if (status < 0)
        log_warnx("store", "settings of %s unreadable, treated as most private: %s", ld->uid,
                  store_strerror(status));
    pu_flag(pu, PU_STALE, status < 0);
    pu_x(pu)->failed_at = loop_now(e->w->loop);
    if (ld->viewer[0]) {
        struct prel *rel = find_prel(pu, ld->viewer);
        if (rel) {
            rel->pending = false;
            rel->stale = status < 0;
            rel->failed_at = pu_x(pu)->failed_at;
            rel->contact = status == 0 && r->is_contact;
            rel->blocked = status < 0 || r->blocked;
            resync = rel->sync && sync_subv(e, pu, rel);
        }
    }
    free(ld);
    settings_apply(e, pu, &p, false);
    if (resync)
        reclassify(e, pu); /* a relation changed on another node */
    if (pu_loads(pu) == 0)
        replay(e, pu);
}

/* Submits a read of pu's settings, with viewer's relation if viewer[0]. */
static void request_load(struct engine *e, struct puser *pu, const char *viewer)
{
    struct load *ld = xcalloc(1, sizeof(*ld));
    struct store *st = e->env->store;
    int r;

    ld->e = e;
    copy_id(ld->uid, pu->uid);
    copy_id(ld->viewer, viewer);
    if (viewer[0])
        r = store_get_relations(st, e->inbox, pu->uid, viewer, load_done, ld);
    else
        r = store_get_privacy(st, e->inbox, pu->uid, load_done, ld);
    if (r < 0) { /* an id the store refuses: answer as a failed read */
        struct store_result res;
        memset(&res, 0, sizeof(res));
        pu_x(pu)->loads++;
        load_done(ld, r, &res);
        return;
    }
    pu_x(pu)->loads++;
}

static struct prel *prel_new(struct puser *pu, const char *viewer)
{
    size_t n = strlen(viewer);
    struct prel *r = xcalloc(1, sizeof(*r) + n + 1);

    memcpy(r->viewer, viewer, n + 1);
    r->pending = true;
    if (pu_nrels(pu) >= RELS_MAX)
        rels_clear(pu, true);
    hmap_insert(&pu_x(pu)->rels, &r->node, str_hash(r->viewer));
    return r;
}

static void park(struct puser *pu, struct emsg *em)
{
    em->parked = true;
    list_insert_tail(&pu_x(pu)->parked, &em->park);
}

/* A failed read is answered from (most private) for RETRY_MS, so that an
 * outage does not turn every request into a failing read; then the next
 * request reads again and waits for the answer. */
static bool retry_due(struct engine *e, const struct puser *pu, const struct prel *rel)
{
    uint64_t now = loop_now(e->w->loop);

    if (pu_loads(pu))
        return false;
    return (pu_stale(pu) && now - pu_busy(pu)->failed_at >= RETRY_MS) ||
           (rel && rel->stale && now - rel->failed_at >= RETRY_MS);
}

static bool needs_fresh_read(const struct emsg *em, const char *uid, const char *viewer)
{
    return (em->op == OP_QUERY || em->op == OP_WATCH) && !em->reread && strcmp(viewer, uid) != 0;
}

bool engine__privacy_ready(struct engine *e, struct emsg *em, const char *uid, const char *viewer)
{
    struct puser *pu = puser_get(e, uid);
    bool need_rel = viewer && viewer[0] && strcmp(viewer, uid) != 0;
    struct prel *rel = need_rel ? find_prel(pu, viewer) : NULL;
    bool wait = false;

    if (viewer && needs_fresh_read(em, uid, viewer)) {
        /* Every read or watch by someone else waits for one store read, so
         * that a cached user (active, invisible) answers as late as an
         * unknown one: no timing side channel, and fresh settings. */
        em->reread = true;
        if (need_rel && (!rel || !rel->pending)) {
            if (!rel)
                rel = prel_new(pu, viewer);
            rel->pending = true;
            request_load(e, pu, viewer);
        } else if (!need_rel) {
            request_load(e, pu, "");
        }
        park(pu, em);
        return false;
    }
    if (pu_parked(pu)) {
        park(pu, em);
        return false;
    }
    if (!viewer)
        return true; /* only order mattered */
    if (need_rel && (!rel || rel->pending)) {
        if (!rel) {
            prel_new(pu, viewer);
            request_load(e, pu, viewer); /* brings the settings too */
        }
        wait = true;
    } else if (!pu_loaded(pu)) {
        if (pu_loads(pu) == 0)
            request_load(e, pu, "");
        wait = true;
    } else if (retry_due(e, pu, rel)) { /* a failed read, long enough ago: read again */
        if (rel) {
            rel->stale = false;
            rel->pending = true;
        }
        pu_flag(pu, PU_STALE, false);
        request_load(e, pu, need_rel ? viewer : "");
        wait = true;
    }
    if (!wait)
        return true;
    park(pu, em);
    return false;
}

/* ---- watch subscriptions (owner side) ---- */

void engine__privacy_on_change(struct engine *e, const struct presence_view *old,
                               const struct presence_view *cur)
{
    struct sub *s = watch__find_sub(e, cur->user);
    struct puser *pu = find_puser(e, cur->user);

    if (pu && cur->status != PRESENCE_OFFLINE && old->status == PRESENCE_OFFLINE && old->last_seen)
        pu_pub_set(pu, offsetof(struct privacy_public, offline_last_seen), old->last_seen);
    /* Going offline moves last seen; coming online too, to "seen now" (what
     * the store keeps for a user who was online at a kill -9). Heartbeats
     * never get here. */
    if (lastseen_public(pu) &&
        (cur->status == PRESENCE_OFFLINE) != (old->status == PRESENCE_OFFLINE))
        engine__lastseen_note(e, cur->user,
                              cur->status == PRESENCE_OFFLINE ? cur->last_seen : cur->now);
    if (s)
        watch__republish(e, s, cur);
    /* Webhooks: with many nodes, the put that made the change sends it
     * (cluster_user.c on_user_hook); here, one node's transitions. */
    if (e->hooks && !cu__on(e) &&
        (cur->status == PRESENCE_OFFLINE) != (old->status == PRESENCE_OFFLINE) &&
        engine__room_visible(e, cur->user))
        hooks_user(e->hooks, cur->user, cur->status != PRESENCE_OFFLINE, cur->version,
                   (int64_t)time_wall_ms());
}

void engine__privacy_reload(struct engine *e, const char *uid)
{
    struct puser *pu = find_puser(e, uid);
    struct sub *s;
    struct list *pos;

    if (!pu || !pu_loaded(pu))
        return; /* nothing cached: the next use reads the store */
    rels_clear(pu, true);
    request_load(e, pu, "");
    if (!(s = watch__find_sub(e, uid)))
        return;
    list_foreach(pos, &s->viewers)
    {
        struct subv *v = container_of(pos, struct subv, link);
        if (v->viewer[0] && strcmp(v->viewer, uid) != 0 && !find_prel(pu, v->viewer)) {
            prel_new(pu, v->viewer)->sync = true;
            request_load(e, pu, v->viewer);
        }
    }
}

/* ---- settings writes: the privacy message and the admin API ---- */

/* privacy_changed to every live socket session of uid (each gets its
 * own protocol's frame of the same settings). */
static void notify_sessions(struct engine *e, struct puser *pu)
{
    struct presence_session_info si[SESSIONS_MAX];
    size_t n = presence_list_sessions(e->pres, pu->uid, si, SESSIONS_MAX);
    struct adapter_frames fs = {0};

    frame_privacy_changed(pu_set(pu), &fs);
    for (size_t i = 0; i < n && i < SESSIONS_MAX; i++) {
        uint64_t conn = (uint64_t)(uintptr_t)si[i].conn_ref;
        struct adapter_frames mine;

        if (!conn || !si[i].attached)
            continue;
        adapter_frames_copy(&mine, &fs);
        frame_reply_frames(e, conn, &mine);
    }
    adapter_frames_release(&fs);
}

void engine__privacy_hello(struct engine *e, struct emsg *req)
{
    struct adapter_frames fs = {0};

    if (!engine__privacy_ready(e, req, req->uid, req->uid))
        return;
    frame_privacy_changed(pu_set(puser_get(e, req->uid)), &fs);
    frame_reply_frames(e, req->conn_id, &fs);
}

/* Answers an admin call: status code + JSON (see engine_admin.c). */
static void admin_answer(struct engine *e, const struct emsg *req, int code, struct buf *json)
{
    struct buf b = {0};

    if (!req->query) { /* an adapter's call (engine__kick_user()): nobody waits */
        buf_release(json);
        return;
    }
    buf_printf(&b, "%03d", code);
    buf_append(&b, json->data ? json->data : "", json->len);
    buf_append(&b, "\n", 1);
    buf_release(json);
    http_read__answer(e, req, buf_payload(&b));
}

static void admin_error(struct engine *e, const struct emsg *req, int code, const char *err,
                        const char *message)
{
    struct buf b = {0};

    httpd_error_json(&b, err, message);
    admin_answer(e, req, code, &b);
}

static void admin_settings(struct engine *e, const struct emsg *req, struct puser *pu)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"user\":");
    json_append_cstr(&b, pu->uid);
    buf_append_str(&b, ",\"privacy\":");
    privacy_encode_settings(pu_set(pu), &b);
    buf_append_str(&b, "}");
    admin_answer(e, req, 200, &b);
}

static void admin_changed(struct engine *e, const struct emsg *req, const char *what, size_t n)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"user\":");
    json_append_cstr(&b, req->uid);
    buf_printf(&b, ",\"%s\":%zu}", what, n);
    admin_answer(e, req, 200, &b);
}

static bool in_sorted(char *const *ids, size_t n, const char *id)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ids[mid], id);
        if (c == 0)
            return true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Applies an acknowledged contacts or block write to the viewers' bits. */
static void relations_apply(struct engine *e, struct puser *pu, const struct emsg *req)
{
    struct sub *s = watch__find_sub(e, pu->uid);
    struct list *pos;

    if (req->arg == ADMIN_CONTACTS_REPLACE)
        qsort(req->ids, req->nids, sizeof(*req->ids), cmp_str);
    rels_clear(pu, true);
    if (!s) {
        reclassify(e, pu);
        return;
    }
    list_foreach(pos, &s->viewers)
    {
        struct subv *v = container_of(pos, struct subv, link);
        switch (req->arg) {
        case ADMIN_CONTACTS_REPLACE:
            v->contact = in_sorted(req->ids, req->nids, v->viewer);
            break;
        case ADMIN_CONTACTS_ADD:
        case ADMIN_CONTACTS_REMOVE:
            for (size_t i = 0; i < req->nids; i++)
                if (strcmp(req->ids[i], v->viewer) == 0)
                    v->contact = req->arg == ADMIN_CONTACTS_ADD;
            break;
        default: /* block / unblock: the target rides in viewer */
            if (strcmp(req->viewer, v->viewer) == 0)
                v->blocked = req->arg == ADMIN_BLOCK;
        }
    }
    reclassify(e, pu);
}

/* A write of req (kept alive as the callback's context) completed. */
static void write_done(void *ctx, int status, const struct store_result *r)
{
    struct emsg *req = ctx;
    struct engine *e = req->eng;
    struct puser *pu = e->closing ? NULL : find_puser(e, req->uid);
    bool admin = req->op == OP_ADMIN;
    struct pstate *x;

    if (!pu) {
        emsg_free(&req->msg);
        return;
    }
    x = pu_x(pu);
    x->writes--;
    if (status >= 0)
        cu__settings_written(e, req->uid); /* the other nodes' caches (many nodes) */
    if (status < 0) {
        /* The last write failed: what they wanted falls back to the stored
         * settings (pu_want() does that by itself once writes is 0). */
        if (x->writes == 0 && settings_index(&x->want) != settings_index(pu_set(pu))) {
            bool was = privacy_room_visible(&x->want) && privacy_room_visible(pu_set(pu));
            if (pu_loaded(pu) && was != privacy_room_visible(pu_set(pu)))
                engine__rooms_visibility(e, pu->uid, privacy_room_visible(pu_set(pu)));
        }
        log_warnx("store", "write for %s failed: %s", req->uid, store_strerror(status));
        if (admin)
            admin_error(e, req, 503, "store_unavailable", store_strerror(status));
        else
            frame_reply_error(e, req->conn_id, "store_unavailable",
                              "the settings could not be saved; nothing changed", req->ref);
    } else if (req->op == OP_PRIVACY || req->arg == ADMIN_SET_PRIVACY) {
        pu_flag(pu, PU_STALE, false); /* the stored value is known now: the one written */
        settings_apply(e, pu, &req->priv, true);
        notify_sessions(e, pu);
        if (admin)
            admin_settings(e, req, pu);
        else
            frame_reply_ack(e, req);
    } else {
        relations_apply(e, pu, req);
        if ((req->arg == ADMIN_BLOCK || req->arg == ADMIN_UNBLOCK) && r->changed > 0)
            engine__rooms_block_changed(e, req->uid, req->viewer, req->arg == ADMIN_BLOCK);
        admin_changed(e, req, "changed", r->changed);
    }
    puser_trim(pu);
    emsg_free(&req->msg);
}

static void merge(struct store_privacy *into, const struct emsg *req)
{
    if (req->priv_mask & PRIVACY_FIELD_ONLINE)
        into->online = req->priv.online;
    if (req->priv_mask & PRIVACY_FIELD_LAST_SEEN)
        into->last_seen = req->priv.last_seen;
    if (req->priv_mask & PRIVACY_FIELD_INVISIBLE)
        into->invisible = req->priv.invisible;
}

/* Submits req's write with req itself as the context (it is parked, so
 * the dispatcher leaves it alone); returns the store's submit status. */
static int submit_write(struct engine *e, struct puser *pu, struct emsg *req)
{
    struct store *st = e->env->store;
    const char *const *ids = (const char *const *)req->ids;
    int r;

    req->eng = e;
    switch (req->op == OP_PRIVACY ? ADMIN_SET_PRIVACY : req->arg) {
    case ADMIN_SET_PRIVACY:
        r = store_set_privacy(st, e->inbox, req->uid, &req->priv, write_done, req);
        break;
    case ADMIN_CONTACTS_REPLACE:
        r = store_contacts_replace(st, e->inbox, req->uid, ids, req->nids, write_done, req);
        break;
    case ADMIN_CONTACTS_ADD:
        r = store_contacts_add(st, e->inbox, req->uid, ids, req->nids, write_done, req);
        break;
    case ADMIN_CONTACTS_REMOVE:
        r = store_contacts_remove(st, e->inbox, req->uid, ids, req->nids, write_done, req);
        break;
    case ADMIN_BLOCK:
        r = store_block(st, e->inbox, req->uid, req->viewer, write_done, req);
        break;
    default:
        r = store_unblock(st, e->inbox, req->uid, req->viewer, write_done, req);
    }
    if (r == 0) {
        struct pstate *x = pu_x(pu);
        if (x->writes++ == 0)
            x->want = *pu_set(pu); /* want_set() moves it on */
        req->parked = true;        /* owned by the store request now */
    }
    return r;
}

/*
 * A partial settings write merges into the stored settings, so it needs
 * them for real, not the fail-closed stand-in: stale ones are read again
 * first (req parks), and if that read fails too the write is refused.
 * Returns pu when the write may go on.
 */
static struct puser *fresh_settings(struct engine *e, struct emsg *req)
{
    struct puser *pu;

    if (!engine__privacy_ready(e, req, req->uid, req->uid))
        return NULL;
    pu = puser_get(e, req->uid);
    if (!pu_stale(pu))
        return pu;
    if (req->reread) {
        if (req->op == OP_ADMIN)
            admin_error(e, req, 503, "store_unavailable", "the settings store is unreachable");
        else
            frame_reply_error(e, req->conn_id, "store_unavailable",
                              "the settings could not be saved; nothing changed", req->ref);
        return NULL;
    }
    req->reread = true;
    if (pu_loads(pu) == 0)
        request_load(e, pu, "");
    park(pu, req);
    return NULL;
}

/* A write of p is in flight: rooms hide the user at once if p hides it
 * (the stricter of stored and requested applies until the write is done;
 * a failed write shows the user again, see write_done()). */
static void want_set(struct engine *e, struct puser *pu, const struct store_privacy *p)
{
    bool before =
        pu_loaded(pu) && privacy_room_visible(pu_set(pu)) && privacy_room_visible(&pu_x(pu)->want);

    pu_x(pu)->want = *p; /* a write is in flight: the pstate is there */
    if (before && !room_visible_now(pu))
        engine__rooms_visibility(e, pu->uid, false);
}

/* Tells the client's worker that the rooms have heard of this privacy
 * message (OP_RVIS, if any, is on the bus before this): it may let the
 * connection's ephemeral messages through again (client__on_priv_event). */
static void release_hold(struct engine *e, uint64_t conn_id)
{
    owner_send(e, owner_of_conn(conn_id), emsg_new(OP_PRIV_EVENT, conn_id));
}

void engine__op_privacy(struct engine *e, struct emsg *req)
{
    struct puser *pu;
    struct store_privacy p;
    uint64_t conn = req->conn_id;

    if (!(pu = fresh_settings(e, req))) {
        if (!req->parked)
            release_hold(e, conn); /* refused */
        return;
    }
    p = *pu_want(pu);
    merge(&p, req);
    req->priv = p;
    if (submit_write(e, pu, req) < 0) {
        frame_reply_error(e, req->conn_id, "store_unavailable",
                          "the settings could not be saved; nothing changed", req->ref);
        release_hold(e, conn);
        return;
    }
    want_set(e, pu, &p);
    release_hold(e, conn); /* req belongs to the store request now */
}

size_t engine__kick(struct engine *e, const char *uid, const char *sid, const char *reason)
{
    struct presence_session_info si[SESSIONS_MAX];
    char sids[SESSIONS_MAX][PRESENCE_ID_MAX + 1];
    size_t n = presence_list_sessions(e->pres, uid, si, SESSIONS_MAX), kicked = 0;
    uint64_t now = loop_now(e->w->loop);

    n = MIN(n, (size_t)SESSIONS_MAX);
    for (size_t i = 0; i < n; i++) /* ids are borrowed: copy before ending any */
        copy_id(sids[i], si[i].sid);
    e->kick_reason = reason;
    for (size_t i = 0; i < n; i++)
        if ((!sid[0] || strcmp(sid, sids[i]) == 0) &&
            presence_session_kick(e->pres, sids[i], now) == 0)
            kicked++;
    e->kick_reason = NULL;
    return kicked;
}

static void admin_kick(struct engine *e, struct emsg *req)
{
    size_t kicked = engine__kick(e, req->uid, req->sid, req->text);

    cu__kick(e, req->uid, req->sid, req->text); /* and on the other nodes */
    admin_changed(e, req, "kicked", kicked);
}

void engine__op_admin(struct engine *e, struct emsg *req)
{
    struct puser *pu;
    int r;

    if (req->arg == ADMIN_KICK) {
        if (engine__privacy_ready(e, req, req->uid, NULL))
            admin_kick(e, req);
        return;
    }
    if (req->arg == ADMIN_SET_PRIVACY) {
        if (!(pu = fresh_settings(e, req)))
            return;
    } else if (!engine__privacy_ready(e, req, req->uid, req->uid)) {
        return;
    }
    if (req->arg == ADMIN_GET_USER) {
        engine__admin_user(e, req);
        return;
    }
    pu = puser_get(e, req->uid);
    if (req->arg == ADMIN_GET_PRIVACY) {
        admin_settings(e, req, pu);
        return;
    }
    if (req->arg == ADMIN_SET_PRIVACY) {
        struct store_privacy p = *pu_want(pu);
        merge(&p, req);
        req->priv = p;
    }
    r = submit_write(e, pu, req);
    if (r < 0)
        admin_error(e, req, r == -E2BIG ? 413 : 400, "bad_request", store_strerror(r));
    else if (req->arg == ADMIN_SET_PRIVACY)
        want_set(e, pu, &req->priv);
}

/* ---- set-up ---- */

static void on_inbox(struct loop_io *io, uint32_t events)
{
    struct engine *e = container_of(io, struct engine, inbox_io);

    (void)events;
    store_inbox_drain(e->inbox);
}

void engine__privacy_init(struct engine *e)
{
    list_init(&e->plru);
    e->inbox = store_inbox_new();
    store_inbox_observe(e->inbox, &e->w->metrics);
    if (loop_io_start(e->w->loop, &e->inbox_io, store_inbox_fd(e->inbox), EPOLLIN, on_inbox) < 0)
        fatal("engine", "epoll_ctl");
}

/* Waits (bounded) for the store requests still in flight so that their
 * contexts are freed; their callbacks do nothing else now. */
static void drain_inbox(struct engine *e)
{
    uint64_t until = time_mono_ms() + 10000;

    e->closing = true;
    while (store_inbox_pending(e->inbox) > 0 && time_mono_ms() < until) {
        struct pollfd pfd = {.fd = store_inbox_fd(e->inbox), .events = POLLIN};
        poll(&pfd, 1, 100);
        store_inbox_drain(e->inbox);
    }
}

void engine__privacy_free(struct engine *e)
{
    drain_inbox(e);
    while (!list_empty(&e->plru)) {
        struct puser *pu = container_of(list_first(&e->plru), struct puser, lru);
        while (pu_parked(pu)) {
            struct emsg *em = container_of(list_first(&pu_x(pu)->parked), struct emsg, park);
            list_del(&em->park);
            emsg_free(&em->msg);
        }
        puser_free(e, pu);
    }
    hmap_release(&e->pusers);
    if (store_inbox_pending(e->inbox) == 0)
        store_inbox_free(e->inbox);
    else
        log_warnx("store", "store requests still running at exit; leaving their inbox");
}
