/* SPDX-License-Identifier: MIT */
/*
 * cluster_resume.c - resume across nodes (cluster_resume.h).
 *
 * Resumes waiting for Redis to say whether another node held their
 * session are parked on e->rs_parked (few at a time: one per reconnect
 * that lands on another node). Sessions another node took over wait on
 * e->rs_drops, in the order they came, for their CS_HOLD_MS to pass.
 */
#include "cluster_resume.h"

#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "cluster_user.h"
#include "contrib.h"
#include "engine_state.h"
#include "log.h"
#include "msg.h"

struct rs_drop {
    struct list link; /* e->rs_drops, oldest first */
    uint64_t at;      /* loop ms it is dropped */
    char sid[PRESENCE_ID_MAX + 1];
    char uid[PRESENCE_ID_MAX + 1];
};

static uint64_t to_wall(int64_t off, uint64_t mono)
{
    return mono == 0 ? 0 : (uint64_t)((int64_t)mono + off);
}

static uint64_t to_mono(int64_t off, uint64_t wall)
{
    return wall == 0 ? 0 : (int64_t)wall - off > 0 ? (uint64_t)((int64_t)wall - off) : 1;
}

static void copy_str(char *dst, size_t cap, const char *s)
{
    size_t n = s ? strnlen(s, cap - 1) : 0;

    memcpy(dst, s ? s : "", n);
    dst[n] = '\0';
}

bool cs__take(struct engine *e, struct emsg *em)
{
    if (!cu__on(e) || em->hs != HS_UNCHECKED || cluster_degraded(e->env->cluster))
        return true;
    em->parked = true;
    list_insert_tail(&e->rs_parked, &em->park);
    cluster_rs_take(e->env->cluster, e->w->id, em->uid, em->sid);
    return false;
}

/* Writes si's record: it ends at deadline (wall ms) unless resumed. */
static void write_record(struct engine *e, const struct presence_session_info *si,
                         uint64_t deadline)
{
    int64_t off = wall_offset(e);
    struct contrib_resume r = {0};
    struct buf b = {0};

    /* the holder's name is the home's to write (cluster_rs_put()) */
    r.deadline = deadline;
    r.device = si->device;
    r.status = si->manual != PRESENCE_OFFLINE ? si->manual : PRESENCE_ONLINE;
    r.idle = si->idle;
    r.status_expires = to_wall(off, si->status_expires_at);
    r.custom_expires = to_wall(off, si->custom.expires_at);
    copy_str(r.text, sizeof(r.text), si->custom.text);
    copy_str(r.emoji, sizeof(r.emoji), si->custom.emoji);
    contrib_resume_encode(&b, &r);
    cluster_rs_put(e->env->cluster, e->w->id, si->user, si->sid, b.data);
    buf_release(&b);
}

void cs__grace(struct engine *e, const struct presence_session_info *si)
{
    if (cu__on(e))
        write_record(e, si, time_wall_ms() + (uint64_t)e->w->srv->cfg.reconnect_grace_ms);
}

static void drain_user(struct engine *e, const char *uid, void *ctx)
{
    struct presence_session_info si[64];
    size_t n = presence_list_sessions(e->pres, uid, si, ARRAY_SIZE(si));
    uint64_t deadline = *(const uint64_t *)ctx;

    for (size_t i = 0; i < n && i < ARRAY_SIZE(si); i++)
        if (si[i].attached && si[i].conn_ref)
            write_record(e, &si[i], deadline);
}

void cs__drain(struct engine *e, uint64_t window_ms)
{
    uint64_t deadline = time_wall_ms() + window_ms + (uint64_t)e->w->srv->cfg.reconnect_grace_ms;

    cu__each_local(e, drain_user, &deadline);
}

void cs__forget(struct engine *e, const char *uid, const char *sid)
{
    if (cu__on(e))
        cluster_rs_del(e->env->cluster, e->w->id, uid, sid);
}

/* Rebuilds uid's session sid from its record r, socketless (the resume
 * that asked attaches it): its device, explicit status, idleness and
 * custom status as they were. */
static int rebuild(struct engine *e, const char *uid, const char *sid,
                   const struct contrib_resume *r)
{
    uint64_t now = loop_now(e->w->loop);
    int64_t off = wall_offset(e);
    int rc = presence_session_start(e->pres, sid, uid, r->device, NULL, now);

    if (rc != 0)
        return rc;
    if (r->status != PRESENCE_ONLINE) /* explicit: activity does not change it */
        presence_set_status(e->pres, sid, r->status, to_mono(off, r->status_expires), now);
    if (r->idle && r->status != PRESENCE_AWAY) /* an explicit AWAY is idle already */
        presence_activity(e->pres, sid, false, now);
    if ((r->text[0] || r->emoji[0]) &&
        presence_set_custom(e->pres, sid, r->text, r->emoji, to_mono(off, r->custom_expires),
                            now) != 0)
        log_warnx("cluster", "session %s resumed without its custom status", sid);
    return 0;
}

void cs__on_rsession(void *wctx, const char *uid, const char *sid, const char *record, size_t len)
{
    struct engine *e = wctx;
    struct contrib_resume r;
    struct emsg *em = NULL;

    struct list *l;

    list_foreach(l, &e->rs_parked)
    {
        struct emsg *x = container_of(l, struct emsg, park);
        if (strcmp(x->uid, uid) == 0 && strcmp(x->sid, sid) == 0) {
            em = x;
            break;
        }
    }
    if (!em)
        return; /* its socket closed meanwhile: the old holder's copy ends */
    list_del(&em->park);
    em->parked = false;
    em->hs = HS_NONE;
    if (record && contrib_resume_parse(record, len, &r) != 0)
        log_warnx("cluster", "malformed resume record of session %s", sid);
    else if (record && rebuild(e, uid, sid, &r) != 0)
        log_warnx("cluster", "session %s could not be resumed here", sid);
    engine__dispatch(e->w, &em->msg);
}

static void drop_due(struct wheel_timer *t, uint64_t now)
{
    struct engine *e = container_of(t, struct engine, rs_timer);

    while (!list_empty(&e->rs_drops)) {
        struct rs_drop *d = container_of(list_first(&e->rs_drops), struct rs_drop, link);
        struct presence_session_info si;
        if (d->at > now) {
            loop_timer_start(e->w->loop, &e->rs_timer, d->at - now);
            return;
        }
        list_del(&d->link);
        /* Still the one that moved (not resumed here again meanwhile). */
        if (presence_get_session(e->pres, d->sid, &si) == 0 && !si.attached &&
            strcmp(si.user, d->uid) == 0)
            presence_session_end(e->pres, d->sid, now);
        free(d);
    }
}

void cs__on_moved(void *wctx, const char *uid, const char *sid)
{
    struct engine *e = wctx;
    struct presence_session_info si;
    struct rs_drop *d;

    if (presence_get_session(e->pres, sid, &si) != 0 || si.attached || strcmp(si.user, uid) != 0)
        return;
    log_debug("cluster", "session %s of %s moved to another node", sid, uid);
    d = xcalloc(1, sizeof(*d));
    d->at = loop_now(e->w->loop) + CS_HOLD_MS;
    copy_id(d->sid, sid);
    copy_id(d->uid, uid);
    if (list_empty(&e->rs_drops))
        loop_timer_start(e->w->loop, &e->rs_timer, CS_HOLD_MS);
    list_insert_tail(&e->rs_drops, &d->link);
}

void cs__init(struct engine *e)
{
    list_init(&e->rs_parked);
    list_init(&e->rs_drops);
    wheel_timer_init(&e->rs_timer, drop_due);
}

void cs__free(struct engine *e)
{
    wheel_del(&e->rs_timer);
    while (!list_empty(&e->rs_parked)) {
        struct emsg *em = container_of(list_first(&e->rs_parked), struct emsg, park);
        list_del(&em->park);
        emsg_free(&em->msg);
    }
    while (!list_empty(&e->rs_drops)) {
        struct rs_drop *d = container_of(list_first(&e->rs_drops), struct rs_drop, link);
        list_del(&d->link);
        free(d);
    }
}
