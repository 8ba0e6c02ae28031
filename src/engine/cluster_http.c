/* SPDX-License-Identifier: MIT */
/*
 * cluster_http.c - socketless HTTP sessions across nodes (cluster_http.h).
 *
 * e->hsess holds, per HTTP session this worker's presence core holds,
 * when its deadline was last written to Redis (the throttle). Beats that
 * wait for Redis to say who holds their session are parked on
 * e->hs_parked; the answer (ch__on_hsession()) passes them on to the
 * holder or lets this node start or take over the session.
 */
#include "cluster_http.h"

#include <stdlib.h>
#include <string.h>

#include "cluster_user.h"
#include "engine_state.h"
#include "msg.h"

struct hsess {
    struct hmap_node node; /* e->hsess */
    char sid[PRESENCE_ID_MAX + 1];
    char uid[PRESENCE_ID_MAX + 1];
    uint64_t written; /* loop ms of the last deadline written */
};

static struct hsess *find(struct engine *e, const char *sid)
{
    return ENGINE_FIND(struct hsess, &e->hsess, sid, sid);
}

/* The deadline written is the latest the session can end before the
 * next write is due: beats inside CH_WRITE_EVERY_MS write nothing but
 * move the real end on by up to that much. */
static void write_deadline(struct engine *e, struct hsess *h)
{
    uint64_t ttl = (uint64_t)e->w->srv->cfg.session_ttl_ms;

    cluster_hs_put(e->env->cluster, e->w->id, h->uid, h->sid,
                   time_wall_ms() + ttl + CH_WRITE_EVERY_MS);
    h->written = loop_now(e->w->loop);
}

void ch__started(struct engine *e, const char *uid, const char *sid)
{
    struct hsess *h;

    if (!cu__on(e))
        return;
    if (!(h = find(e, sid))) {
        h = xcalloc(1, sizeof(*h));
        copy_id(h->sid, sid);
        copy_id(h->uid, uid);
        hmap_insert(&e->hsess, &h->node, str_hash(h->sid));
    }
    write_deadline(e, h);
}

void ch__beaten(struct engine *e, const char *uid, const char *sid)
{
    struct hsess *h;

    if (!cu__on(e))
        return;
    if (!(h = find(e, sid)))
        ch__started(e, uid, sid);
    else if (loop_now(e->w->loop) - h->written >= CH_WRITE_EVERY_MS)
        write_deadline(e, h);
}

void ch__ended(struct engine *e, const char *uid, const char *sid)
{
    struct hsess *h;

    if (!cu__on(e) || !(h = find(e, sid)))
        return;
    cluster_hs_del(e->env->cluster, e->w->id, uid, sid);
    hmap_remove(&e->hsess, &h->node);
    free(h);
}

bool ch__lookup(struct engine *e, struct emsg *em)
{
    if (!cu__on(e) || em->hs != HS_UNCHECKED || cluster_degraded(e->env->cluster))
        return true;
    em->parked = true;
    list_insert_tail(&e->hs_parked, &em->park);
    cluster_hs_get(e->env->cluster, e->w->id, em->uid, em->sid);
    return false;
}

void ch__on_hsession(void *wctx, const char *uid, const char *sid, enum cluster_hs st,
                     const char *node)
{
    struct engine *e = wctx;
    struct list todo, *l, *tmp;

    list_init(&todo);
    list_foreach_safe(l, tmp, &e->hs_parked)
    {
        struct emsg *em = container_of(l, struct emsg, park);
        if (strcmp(em->uid, uid) == 0 && strcmp(em->sid, sid) == 0) {
            list_del(l);
            list_insert_tail(&todo, l);
        }
    }
    while (!list_empty(&todo)) {
        struct emsg *em = container_of(list_first(&todo), struct emsg, park);
        list_del(&em->park);
        em->parked = false;
        if (st == CLUSTER_HS_OWNED)
            cluster_hs_forward(e->env->cluster, e->w->id, uid, sid, node, em->arg != 0);
        em->hs = st == CLUSTER_HS_OWNED    ? HS_FORWARDED
                 : st == CLUSTER_HS_ORPHAN ? HS_ORPHAN
                                           : HS_NONE;
        engine__dispatch(e->w, &em->msg);
    }
}

void ch__on_hbeat(void *wctx, const char *uid, const char *sid, bool leave)
{
    struct engine *e = wctx;
    struct presence_session_info si;
    uint64_t now = loop_now(e->w->loop);

    if (presence_get_session(e->pres, sid, &si) != 0 || strcmp(si.user, uid) != 0 ||
        si.conn_ref != NULL)
        return; /* not an HTTP session of uid here (any more) */
    if (leave) {
        presence_session_end(e->pres, sid, now);
        return;
    }
    presence_heartbeat(e->pres, sid, now);
    ch__beaten(e, uid, sid);
}

void ch__init(struct engine *e)
{
    list_init(&e->hs_parked);
}

void ch__free(struct engine *e)
{
    while (!list_empty(&e->hs_parked)) {
        struct emsg *em = container_of(list_first(&e->hs_parked), struct emsg, park);
        list_del(&em->park);
        emsg_free(&em->msg);
    }
    engine__free_map(&e->hsess, offsetof(struct hsess, node), NULL);
}
