/* SPDX-License-Identifier: MIT */
/*
 * watch.c - watch lists and the fan-out of transitions (watch.h has the
 * model): the watcher side (struct watch, struct wview, a client's links)
 * and the owner side (struct sub, struct subv). The frames are encoded by
 * engine_privacy.c (engine__view_frame(), one per privacy class).
 */
#include "watch.h"
#include "cluster_user.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "engine_privacy.h"
#include "engine_state.h"
#include "frame.h"
#include "quota.h"
#include "ratelimit.h"
#include "sse.h"

/* ---- watcher side ---- */
static struct watch *find_watch(struct engine *e, const char *uid)
{
    return ENGINE_FIND(struct watch, &e->watches, uid, uid);
}

/* An adapter that shows only online and offline (encode_watch, Pusher's
 * watchlist events) tells its watcher when that changes: the first time
 * only when online, as Pusher lists the online ids at sign-in. */
static void send_online(struct watch_link *l, struct watch *wt, int cls)
{
    const struct proto_adapter *a = frame_adapter(l->client);
    int8_t on = (int8_t)((wt->online >> cls) & 1);

    if (l->online_sent == on || (l->online_sent < 0 && !on)) {
        l->online_sent = on;
        return;
    }
    l->online_sent = on;
    frame_send(l->client, a->encode_watch(wt->uid, on != 0));
}

/* Sends the watch's current frame for class cls to one watcher, as a
 * WebSocket frame or an SSE event (formatted once per frame, shared by
 * all streams), or its adapter's online/offline frame. */
static void link_send(struct watch_link *l, struct watch *wt, int cls)
{
    struct client *c = l->client;
    const char *json;
    size_t n;

    if (frame_adapter(c)->encode_watch) {
        send_online(l, wt, cls);
        return;
    }
    if (c->ws) {
        wsconn_send_payload(c->ws, wt->last[cls]);
        return;
    }
    if (!wt->last_sse[cls]) {
        frame_json(wt->last[cls], &json, &n);
        wt->last_sse[cls] = sse_format("presence", ++wt->sse_id, json, n);
    }
    sse_send_payload(c->x->sse, wt->last_sse[cls]);
}

static void set_last(struct watch *wt, int cls, struct payload *f)
{
    if (wt->last[cls] == f)
        return;
    payload_unref(wt->last[cls]);
    payload_unref(wt->last_sse[cls]);
    wt->last[cls] = payload_ref(f);
    wt->last_sse[cls] = NULL;
}

/*
 * List tier. A link watched with "tier":"list" does not get each
 * transition at once: the frame waits (the latest per user replaces an
 * older one), and watch-batch-ms after the first waiting frame the client
 * gets one {"type":"presence_list","presence":[...]} with the latest state
 * of every user that changed, in the order they first changed. Snapshots
 * (the first frame of a new watch) are not held. A user whose bytes are
 * back where they were still appears (the watcher is told the latest
 * state, which is always consistent). WebSocket clients only.
 */
#define PRESENCE_PREFIX "{\"type\":\"presence\",\"presence\":"

static void tier_flush(struct client *c)
{
    struct watch_tier *t = c->x->tier;
    struct payload *f;
    struct buf b = {0};
    bool first = true;

    wheel_del(&t->timer);
    if (list_empty(&t->links))
        return;
    buf_append_str(&b, "{\"type\":\"presence_list\",\"presence\":[");
    while (!list_empty(&t->links)) {
        struct watch_link *l = container_of(list_first(&t->links), struct watch_link, pend);
        const char *json;
        size_t n, skip = sizeof(PRESENCE_PREFIX) - 1;

        frame_json(l->pending, &json, &n);
        /* frame_presence()'s shape: the prefix, the object, a '}'. */
        assert(n > skip + 1 && memcmp(json, PRESENCE_PREFIX, skip) == 0);
        if (!first)
            buf_append(&b, ",", 1);
        buf_append(&b, json + skip, n - skip - 1);
        first = false;
        list_del(&l->pend);
        payload_unref(l->pending);
        l->pending = NULL;
    }
    buf_append_str(&b, "]}");
    f = frame_text(&b);
    wsconn_send_payload(c->ws, f);
    payload_unref(f);
}

static void on_tier_timer(struct wheel_timer *tm, uint64_t now)
{
    (void)now;
    tier_flush(container_of(tm, struct watch_tier, timer)->client);
}

/* Holds f for l's list-tier window. */
static void tier_hold(struct watch_link *l, struct payload *f)
{
    struct client *c = l->client;
    struct watch_tier *t = c->x->tier;

    if (l->pending == NULL)
        list_insert_tail(&t->links, &l->pend);
    payload_unref(l->pending);
    l->pending = payload_ref(f);
    if (!wheel_is_linked(&t->timer))
        loop_timer_start(c->e->w->loop, &t->timer, (uint64_t)c->e->w->srv->cfg.watch_batch_ms);
}

/* Delivers the view's current frame to its watchers: all of them when its
 * bytes differ from what they got last, else only those still waiting for
 * a snapshot; list-tier watchers' transitions wait for their window. */
static void view_deliver(struct watch *wt, struct wview *v)
{
    struct payload *f = wt->last[v->cls];
    bool changed = !v->sent || v->sent->len != f->len || memcmp(v->sent->data, f->data, f->len);
    struct list *pos, *tmp;

    list_foreach_safe(pos, tmp, &v->links)
    {
        struct watch_link *l = container_of(pos, struct watch_link, link);

        if (changed && !l->need_snapshot && l->list_tier && l->client->ws)
            tier_hold(l, f);
        else if (changed || l->need_snapshot)
            link_send(l, wt, v->cls);
        l->need_snapshot = false;
    }
    payload_unref(v->sent);
    v->sent = payload_ref(f);
}

static struct wview *find_view(struct watch *wt, const char *viewer)
{
    struct list *pos;

    list_foreach(pos, &wt->views)
    {
        struct wview *v = container_of(pos, struct wview, node);
        if (strcmp(v->viewer, viewer) == 0)
            return v;
    }
    return NULL;
}

/* OP_VIEW: the owner's class and frame for one viewer (a snapshot, or a
 * re-classification after a privacy change). */
void watch__on_view(struct engine *e, struct emsg *em)
{
    struct watch *wt = find_watch(e, em->uid);
    struct wview *v = wt ? find_view(wt, em->viewer) : NULL;

    if (!v)
        return; /* unwatched meanwhile */
    v->cls = em->arg;
    set_last(wt, v->cls, em->frame);
    wt->online = (uint8_t)((wt->online & ~(1u << v->cls)) | (em->online & (1u << v->cls)));
    view_deliver(wt, v);
}

/* OP_PRESENCE: a transition, one frame per class whose bytes changed. */
void watch__on_presence(struct engine *e, struct emsg *em)
{
    struct watch *wt = find_watch(e, em->uid);
    struct list *pos;

    if (!wt)
        return;
    for (int k = 0; k < PRIVACY_NCLASS; k++) {
        if (!em->frames[k])
            continue;
        set_last(wt, k, em->frames[k]);
        wt->online = (uint8_t)((wt->online & ~(1u << k)) | (em->online & (1u << k)));
    }
    list_foreach(pos, &wt->views)
    {
        struct wview *v = container_of(pos, struct wview, node);
        if (v->cls >= 0 && em->frames[v->cls])
            view_deliver(wt, v);
    }
}

static void watch_request(struct engine *e, const char *uid, const char *viewer, enum engine_op op)
{
    struct emsg *em = emsg_new(op, 0);

    emsg_set_id(&em->uid, uid);
    emsg_set_id(&em->viewer, viewer);
    owner_send(e, owner_of_user(e, uid), em);
}

struct watch_link *watch__find_link(struct client *c, const char *uid, size_t *idx)
{
    for (size_t i = 0; c->x && i < c->x->nlinks; i++) {
        if (strcmp(c->x->links[i]->watch->uid, uid) == 0) {
            *idx = i;
            return c->x->links[i];
        }
    }
    return NULL;
}

/* The watch of uid and, in it, the view of c's user (both made, and the
 * owner asked, when new). */
static struct wview *view_get(struct client *c, const char *uid, struct watch **out)
{
    struct engine *e = c->e;
    struct watch *wt = find_watch(e, uid);
    struct wview *v;
    size_t n;

    if (!wt) {
        wt = xcalloc(1, sizeof(*wt));
        copy_id(wt->uid, uid);
        list_init(&wt->views);
        hmap_insert(&e->watches, &wt->node, str_hash(wt->uid));
    }
    *out = wt;
    if ((v = find_view(wt, client_uid(c))) != NULL)
        return v;
    n = strlen(client_uid(c));
    v = xcalloc(1, sizeof(*v) + n + 1);
    memcpy(v->viewer, client_uid(c), n + 1);
    v->cls = -1;
    list_init(&v->links);
    list_insert_tail(&wt->views, &v->node);
    watch_request(e, uid, client_uid(c), OP_WATCH);
    return v;
}

const char *watch__observer_key(struct client *c)
{
    struct client_x *x = client_x(c);
    struct conn *conn = c->ws ? wsconn_to_conn(c->ws) : sse_conn(x->sse);
    char key[RATELIMIT_KEY_MAX], peer[CONN_PEER_MAX];

    if (!x->okey) {
        ratelimit_observer_key(key, client_uid(c), conn_peer(conn, peer), client__auth_jwt(c->e));
        x->okey = xstrdup(key);
    }
    return x->okey;
}

bool watch__reserve(struct client *c, size_t n)
{
    struct quota *q = c->e->env->observer_quota;

    if (!q || n == 0 || !client_uid(c)[0]) /* anonymous: not counted */
        return true;
    return n <= UINT32_MAX && quota_take(q, watch__observer_key(c), QUOTA_WATCHES, (uint32_t)n,
                                         (uint32_t)c->e->w->srv->cfg.max_watch_per_user);
}

void watch__unreserve(struct client *c, size_t n)
{
    struct quota *q = c->e->env->observer_quota;

    if (q && n > 0 && client_uid(c)[0])
        quota_give(q, watch__observer_key(c), QUOTA_WATCHES, (uint32_t)n);
}

void watch__add(struct client *c, const char *uid)
{
    struct watch *wt;
    struct wview *v = view_get(c, uid, &wt);
    struct watch_link *l = xcalloc(1, sizeof(*l));
    struct client_x *x = client_x(c);

    l->view = v;
    l->watch = wt;
    l->client = c;
    l->need_snapshot = v->cls < 0;
    l->online_sent = -1;
    list_insert_tail(&v->links, &l->link);
    if (x->nlinks == x->caplinks) {
        x->caplinks = x->caplinks ? x->caplinks * 2 : 8;
        x->links = pool_realloc(x->links, x->caplinks * sizeof(*x->links));
    }
    x->links[x->nlinks++] = l;
    if (v->cls >= 0)
        link_send(l, wt, v->cls); /* snapshot from the local copy */
}

static void watch_free(struct engine *e, struct watch *wt)
{
    hmap_remove(&e->watches, &wt->node);
    for (int k = 0; k < PRIVACY_NCLASS; k++) {
        payload_unref(wt->last[k]);
        payload_unref(wt->last_sse[k]);
    }
    free(wt);
}

void watch__set_tier(struct client *c, const char *uid, bool list)
{
    size_t idx;
    struct watch_link *l = watch__find_link(c, uid, &idx);
    struct client_x *x = client_x(c);

    if (!l)
        return;
    if (list && !x->tier) {
        x->tier = xcalloc(1, sizeof(*x->tier));
        wheel_timer_init(&x->tier->timer, on_tier_timer);
        list_init(&x->tier->links);
        x->tier->client = c;
    }
    if (!list && l->pending) { /* its held transition goes now, then each at once */
        struct payload *f = l->pending;

        list_del(&l->pend);
        l->pending = NULL;
        wsconn_send_payload(c->ws, f);
        payload_unref(f);
    }
    l->list_tier = list;
}

void watch__remove(struct client *c, size_t idx)
{
    struct client_x *x = c->x;
    struct watch_link *l = x->links[idx];
    struct wview *v = l->view;
    struct watch *wt = l->watch;

    x->links[idx] = x->links[--x->nlinks];
    if (c->e->env->observer_quota && client_uid(c)[0])
        quota_give(c->e->env->observer_quota, watch__observer_key(c), QUOTA_WATCHES, 1);
    list_del(&l->link);
    if (l->pending) {
        list_del(&l->pend);
        payload_unref(l->pending);
    }
    free(l);
    if (x->tier && list_empty(&x->tier->links))
        wheel_del(&x->tier->timer);
    if (x->tier && x->nlinks == 0) {
        free(x->tier);
        x->tier = NULL;
    }
    if (!list_empty(&v->links))
        return;
    watch_request(c->e, wt->uid, v->viewer, OP_UNWATCH);
    list_del(&v->node);
    payload_unref(v->sent);
    free(v);
    if (list_empty(&wt->views))
        watch_free(c->e, wt);
}

/* ---- owner side ---- */

struct sub *watch__find_sub(struct engine *e, const char *uid)
{
    return ENGINE_FIND(struct sub, &e->subs, uid, uid);
}

static bool same_bytes(const struct payload *a, const struct payload *b)
{
    return a && b && a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

static uint64_t sub_workers(const struct sub *s)
{
    uint64_t w = 0;
    struct list *pos;

    list_foreach(pos, &s->viewers)
    {
        w |= container_of(pos, struct subv, link)->workers;
    }
    return w;
}

/*
 * What a viewer of class cls sees of truth, without the age of its last
 * seen: the view as of the moment of that last seen, exact. Two views
 * with the same key differ only by how long ago, which a watcher works
 * out by itself, so an unchanged key sends nothing: an invisible user's
 * activity (frozen view) then sends exactly what an offline user's
 * silence does.
 */
static struct payload *view_key(struct engine *e, const struct presence_view *truth, int cls)
{
    const struct privacy_public *pub;
    const struct store_privacy *set = engine__privacy_settings(e, truth->user, &pub);
    struct presence_view v;
    struct buf b = {0};

    privacy_view(truth, set, pub, (enum privacy_class)cls, &v);
    v.now = v.last_seen;
    presence_encode_user_as(&v, 0, true, &b);
    return buf_payload(&b);
}

/* Sends the frames of every class in use whose view changed since the
 * last ones (nothing at all when none did). */
void watch__republish(struct engine *e, struct sub *s, const struct presence_view *truth)
{
    struct payload *frames[PRIVACY_NCLASS] = {0};
    uint64_t workers = sub_workers(s);
    uint64_t born; /* the transition's time, for presenced_fanout_seconds */
    bool any = false;
    uint8_t online = 0;

    for (int k = 0; k < PRIVACY_NCLASS; k++) {
        struct payload *key;
        if (s->ncls[k] == 0)
            continue;
        key = view_key(e, truth, k);
        if (same_bytes(key, s->lastf[k])) {
            payload_unref(key);
            continue;
        }
        payload_unref(s->lastf[k]);
        s->lastf[k] = key;
        frames[k] = engine__view_frame(e, truth, k);
        online |= (uint8_t)(engine__view_online(e, truth, k) << k);
        any = true;
    }
    born = any ? time_mono_us() : 0;
    for (unsigned i = 0; any && i < e->w->srv->nworkers; i++) {
        struct emsg *em;
        if (!(workers & (1ull << i)))
            continue;
        em = emsg_new(OP_PRESENCE, 0);
        em->born_us = born;
        emsg_set_id(&em->uid, truth->user);
        em->version = truth->version;
        em->online = online;
        for (int k = 0; k < PRIVACY_NCLASS; k++)
            em->frames[k] = frames[k] ? payload_ref(frames[k]) : NULL;
        owner_send(e, i, em);
    }
    for (int k = 0; k < PRIVACY_NCLASS; k++)
        payload_unref(frames[k]);
}

void watch__send_view(struct engine *e, const struct presence_view *truth, const struct subv *v,
                      uint64_t workers)
{
    struct payload *f = engine__view_frame(e, truth, v->cls);
    uint8_t online = (uint8_t)(engine__view_online(e, truth, v->cls) << v->cls);

    for (unsigned i = 0; i < e->w->srv->nworkers; i++) {
        struct emsg *em;
        if (!(workers & (1ull << i)))
            continue;
        em = emsg_new(OP_VIEW, 0);
        emsg_set_id(&em->uid, truth->user);
        emsg_set_id(&em->viewer, v->viewer);
        em->arg = (int8_t)v->cls;
        em->version = truth->version;
        em->online = online;
        em->frame = payload_ref(f);
        owner_send(e, i, em);
    }
    payload_unref(f);
}

/* ---- classes ---- */

static struct subv *find_subv(struct sub *s, const char *viewer)
{
    struct list *pos;

    list_foreach(pos, &s->viewers)
    {
        struct subv *v = container_of(pos, struct subv, link);
        if (strcmp(v->viewer, viewer) == 0)
            return v;
    }
    return NULL;
}

static void sub_free(struct engine *e, struct sub *s)
{
    while (!list_empty(&s->viewers)) {
        struct list *l = list_first(&s->viewers);
        list_del(l);
        free(container_of(l, struct subv, link));
    }
    for (int k = 0; k < PRIVACY_NCLASS; k++)
        payload_unref(s->lastf[k]);
    cu__watch(e, s->uid, false);
    hmap_remove(&e->subs, &s->node);
    free(s);
}

static void unwatch(struct engine *e, const char *uid, const char *viewer, unsigned from)
{
    struct sub *s = watch__find_sub(e, uid);
    struct subv *v = s ? find_subv(s, viewer) : NULL;

    if (!v || (v->workers &= ~(1ull << from)) != 0)
        return;
    s->ncls[v->cls]--;
    list_del(&v->link);
    free(v);
    if (list_empty(&s->viewers))
        sub_free(e, s);
}

static void op_watch(struct engine *e, struct emsg *req, bool on)
{
    unsigned from = req->msg.from;
    struct presence_view truth;
    struct sub *s;
    struct subv *v;

    if (!engine__privacy_ready(e, req, req->uid, on ? req->viewer : NULL))
        return;
    if (!on) {
        if (cu__in_order(e, req, req->uid)) /* behind a watch waiting for the view */
            unwatch(e, req->uid, req->viewer, from);
        return;
    }
    if (!cu__ready(e, req, req->uid))
        return; /* the global view first (many nodes) */
    if (!(s = watch__find_sub(e, req->uid))) {
        s = xcalloc(1, sizeof(*s));
        copy_id(s->uid, req->uid);
        list_init(&s->viewers);
        hmap_insert(&e->subs, &s->node, str_hash(s->uid));
        cu__watch(e, s->uid, true);
    }
    if (!(v = find_subv(s, req->viewer))) {
        size_t n = strlen(req->viewer);
        v = xcalloc(1, sizeof(*v) + n + 1);
        memcpy(v->viewer, req->viewer, n + 1);
        v->cls = engine__privacy_class(e, req->uid, req->viewer, &v->contact, &v->blocked);
        s->ncls[v->cls]++;
        list_insert_tail(&s->viewers, &v->link);
    }
    v->workers |= 1ull << from;
    cu__truth(e, req->uid, &truth, NULL);
    watch__send_view(e, &truth, v, 1ull << from);
}

void watch__on_watch(struct engine *e, struct emsg *req)
{
    op_watch(e, req, true);
}

void watch__on_unwatch(struct engine *e, struct emsg *req)
{
    op_watch(e, req, false);
}

void watch__subs_free(struct engine *e)
{
    while (e->subs.count > 0) {
        size_t it;
        sub_free(e, container_of(hmap_first(&e->subs, &it), struct sub, node));
    }
    hmap_release(&e->subs);
}
