/* SPDX-License-Identifier: MIT */
/*
 * engine.c - the presence engine on one worker: made and freed with it,
 * its bus handler, its routes and its per-iteration upkeep (engine.h has
 * the partitioning model).
 *
 * Three kinds of state per worker, each in its file:
 *   - clients: the sockets this worker accepted (client.c), each with its
 *     session (if it named a user; session.c) and the users it watches;
 *   - watches: per watched user, the local watchers and the last
 *     presence frame seen (watch.c), so a new local watcher gets its
 *     snapshot at once;
 *   - as the OWNER of some users: their presence core (presence.h) and,
 *     per user, the viewers and workers that watch them (watch.c), their
 *     privacy settings (engine_privacy.c) and their rooms (engine_room.c).
 * Every interaction between a client's worker and a user's owner is one
 * struct emsg on the bus (msg.h), dispatched by the op table in msg.c.
 */
#include "engine.h"
#include "cluster_http.h"
#include "cluster_resume.h"
#include "cluster_room.h"
#include "cluster_user.h"

#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "engine_admin.h"
#include "engine_expiry.h"
#include "engine_privacy.h"
#include "flow.h"
#include "engine_room.h"
#include "engine_state.h"
#include "client.h"
#include "drain.h"
#include "hooks.h"
#include "http_read.h"
#include "lastseen.h"
#include "log.h"
#include "msg.h"
#include "persist.h"
#include "ratelimit.h"
#include "room.h"
#include "room_count.h"
#include "session.h"
#include "watch.h"

/* ---- set-up ---- */

void engine_register(void)
{
    worker_on_msg(WORKER_MSG_ENGINE, engine__dispatch);
    hooks_register();
}

static void presence_cfg(const struct config *cfg, struct presence_config *pc)
{
    presence_config_init(pc);
    pc->heartbeat_interval_ms = (uint32_t)cfg->heartbeat_interval_ms;
    pc->heartbeat_min_ms = (uint32_t)cfg->heartbeat_min_ms;
    pc->session_ttl_ms = (uint32_t)cfg->session_ttl_ms;
    pc->reconnect_grace_ms = (uint32_t)cfg->reconnect_grace_ms;
    pc->idle_ms = (uint32_t)cfg->idle_ms;
    pc->debounce_ms = (uint32_t)cfg->presence_debounce_ms;
    pc->max_sessions_per_user = (uint32_t)cfg->max_sessions_per_user;
    pc->policy = (enum presence_policy)presence_policy_parse(cfg->status_policy);
}

struct engine *engine_new(struct worker *w, const struct engine_env *env, struct net_ctx *nc)
{
    struct engine *e = xcalloc(1, sizeof(*e));
    struct presence_config pc;

    e->w = w;
    e->env = env;
    e->nc = nc;
    presence_cfg(&w->srv->cfg, &pc);
    if (presence_config_check(&pc) != 0)
        fatalx("engine", "invalid presence settings: need heartbeat-min-ms <= "
                         "heartbeat-interval-ms < session-ttl-ms");
    e->pres = presence_new(&pc, loop_wheel(w->loop), session__on_change, session__on_end, e);
    e->expired = client__expire;
    e->rooms = engine__rooms_new(e);
    rcount__init(e);
    flow__init(e);
    list_init(&e->queries);
    engine__privacy_init(e);
    engine__lastseen_init(e);
    cr__init(e);
    e->hooks = hooks_new(env->hooks, w, env->cluster);
    ch__init(e);
    cs__init(e);
    cu__attach(e);
    engine__persist_restore(e); /* a clean stop's sessions, before any socket */
    return e;
}

void engine__free_map(struct hmap *m, size_t node_off, void (*release)(void *owner))
{
    struct hmap_node *n, *next;
    size_t it;

    for (n = hmap_first(m, &it); n; n = next) {
        next = hmap_next(m, n, &it);
        hmap_remove(m, n);
        if (release)
            release((char *)n - node_off);
        pool_free((char *)n - node_off);
    }
    hmap_release(m);
}

void engine_free(struct engine *e)
{
    if (!e)
        return;
    cu__detach(e);              /* first: what follows would send it requests */
    engine__persist_collect(e); /* the sessions and rooms, for the next start */
    engine__lastseen_stop(e);   /* the last batch, before the store closes */
    engine__privacy_free(e);    /* waits for the store requests in flight */
    engine__lastseen_free(e);
    presence_free(e->pres);
    flow__free(e);
    cr__free(e);
    ch__free(e);
    rcount__free(e);
    cs__free(e);
    engine__rooms_free(e);
    http_read__queries_free(e); /* answers that never came back */
    watch__subs_free(e);
    engine__expiry_free(e);
    engine__drain_free(e);
    hmap_release(&e->clients); /* clients are freed with their sockets */
    hmap_release(&e->watches);
    hooks_free(e->hooks); /* last: the frees above send nothing */
    free(e);
}

/* Copies the engine's statistics into the worker's metrics. */
static void update_metrics(struct engine *e)
{
    struct metrics *m = &e->w->metrics;
    struct presence_stats ps;
    struct room_stats rs;
    uint64_t backlog = 0;

    /* As cheap as the check owner_send() makes on every message. */
    for (unsigned to = 0; to < e->w->srv->nworkers; to++)
        backlog += bus_backlog(e->w->srv->bus, e->w->id, to);
    METRIC_SET(m, bus_backlog, backlog);
    presence_get_stats(e->pres, &ps);
    room_get_stats(e->rooms, &rs);
    METRIC_SET(m, sessions, ps.sessions);
    METRIC_SET(m, users_online, ps.users);
    METRIC_SET(m, heartbeats, ps.heartbeats);
    METRIC_SET(m, heartbeats_throttled, ps.heartbeats_throttled);
    METRIC_SET(m, presence_events, ps.events);
    METRIC_SET(m, rooms, rs.rooms);
    METRIC_SET(m, room_members, rs.members);
    METRIC_SET(m, room_deltas, rs.deltas);
    METRIC_SET(m, ephemeral_sent, rs.ephemeral_sent);
}

/* ---- the engine's routes and per-iteration upkeep ---- */

/* Each route first checks ?app= (apps.h): the native side serves the
 * first app's namespace only. */
#define NATIVE_ROUTE(fn)                                                                     \
    static void fn##_app(struct conn *c, const struct http_request *req, struct net_ctx *nc) \
    {                                                                                        \
        if (apps_native_ok(c, req))                                                          \
            fn(c, req, nc);                                                                  \
    }
NATIVE_ROUTE(engine_http_presence)
NATIVE_ROUTE(engine_http_lastseen)
NATIVE_ROUTE(engine_sse_presence)
NATIVE_ROUTE(engine_http_room)
NATIVE_ROUTE(engine_http_heartbeat)
NATIVE_ROUTE(engine_http_admin)

/* clang-format off */
static const struct route routes[] = {
    {"GET", "/v1/presence", engine_http_presence_app},
    {"GET", "/v1/lastseen", engine_http_lastseen_app},
    {"GET", "/v1/presence/events", engine_sse_presence_app},
    {"GET", "/v1/rooms/", engine_http_room_app},
    {"POST", "/v1/heartbeat", engine_http_heartbeat_app},
    {"GET", "/v1/admin/", engine_http_admin_app},
    {"PUT", "/v1/admin/", engine_http_admin_app},
    {"POST", "/v1/admin/", engine_http_admin_app},
    {"DELETE", "/v1/admin/", engine_http_admin_app},
};
/* clang-format on */

const struct route_list engine_routes = ROUTE_LIST(routes);

/* The observer-rate table (ratelimit.h) is swept a slice at a time: each
 * worker takes the next SWEEP_STRIPES stripes at most every SWEEP_EVERY_MS,
 * so one worker alone covers all 64 in 8 s, about the time a bucket with
 * the default settings takes to refill (and become removable). */
#define SWEEP_EVERY_MS 1000
#define SWEEP_STRIPES  8

void engine_tick(struct engine *e)
{
    uint64_t now = loop_now(e->w->loop);

    update_metrics(e);
    rcount__flush(e);
    flow__tick(e, now);
    engine__admin_tick(e, now);
    if (e->env->observer_rate && now - e->swept_ms >= SWEEP_EVERY_MS) {
        e->swept_ms = now;
        ratelimit_sweep(e->env->observer_rate, SWEEP_STRIPES, now);
    }
}
