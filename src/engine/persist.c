/* SPDX-License-Identifier: MIT */
/*
 * persist.c - sessions saved at a clean stop and restored at the next
 * start (persist.h has the model): the shared collection, the two store
 * calls made by the main thread, and each worker's part.
 *
 * The collection is the one place workers share for this, and only at
 * the two ends of the process: at start it is filled before any worker
 * exists and read by each engine_new() on the main thread; at stop each
 * worker appends to it under the mutex, and the main thread reads it
 * after joining them all.
 */
#include "persist.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine_privacy.h"
#include "engine_room.h"
#include "engine_state.h"
#include "log.h"
#include "room.h"
#include "saved.h"

/* One session of a room member, collected on the room's owner. */
struct pmember {
    char *room;
    char *user;
    char *sid;
    char *meta; /* compact JSON */
    bool visible;
};

struct persist {
    pthread_mutex_t lock;       /* the workers' appends at stop */
    struct saved_session *sess; /* loaded at start, or collected at stop */
    size_t nsess, capsess;
    struct pmember *mem; /* collected at stop */
    size_t nmem, capmem;
    size_t hidden; /* sessions of invisible users, not collected */
};

struct persist *persist_new(void)
{
    struct persist *ps = xcalloc(1, sizeof(*ps));

    pthread_mutex_init(&ps->lock, NULL);
    return ps;
}

static void free_sessions(struct persist *ps)
{
    for (size_t i = 0; i < ps->nsess; i++)
        saved_release(&ps->sess[i]);
    free(ps->sess);
    ps->sess = NULL;
    ps->nsess = ps->capsess = 0;
}

void persist_free(struct persist *ps)
{
    if (!ps)
        return;
    free_sessions(ps);
    for (size_t i = 0; i < ps->nmem; i++) {
        free(ps->mem[i].room);
        free(ps->mem[i].user);
        free(ps->mem[i].sid);
        free(ps->mem[i].meta);
    }
    free(ps->mem);
    pthread_mutex_destroy(&ps->lock);
    free(ps);
}

static struct saved_session *push_session(struct persist *ps)
{
    if (ps->nsess == ps->capsess) {
        ps->capsess = ps->capsess ? 2 * ps->capsess : 64;
        ps->sess = xrealloc(ps->sess, ps->capsess * sizeof(*ps->sess));
    }
    memset(&ps->sess[ps->nsess], 0, sizeof(*ps->sess));
    return &ps->sess[ps->nsess++];
}

/* ---- waiting for the store on the main thread ---- */

/* Drains in until its requests completed or PERSIST_WAIT_MS passed;
 * false on the timeout. */
static bool wait_inbox(struct store_inbox *in)
{
    uint64_t until = time_mono_ms() + PERSIST_WAIT_MS;

    while (store_inbox_pending(in) > 0) {
        struct pollfd pfd = {.fd = store_inbox_fd(in), .events = POLLIN};
        uint64_t now = time_mono_ms();

        if (now >= until)
            return false;
        if (poll(&pfd, 1, (int)(until - now)) < 0 && errno != EINTR)
            return false;
        store_inbox_drain(in);
    }
    return true;
}

/* ---- start: load ---- */

struct load_ctx {
    struct persist *ps;
    const struct config *cfg;
    int status;
    size_t rows, dropped, stale;
    int64_t saved_ms; /* of the newest row */
};

static void load_row(struct load_ctx *lc, const struct store_saved *row)
{
    struct saved_session *s = push_session(lc->ps);
    int r = saved_decode(row->sid, row->data, strlen(row->data), s);

    if (r != 0) {
        log_warnx("persist", "saved session %s dropped: %s", row->sid, saved_strerror(r));
        lc->ps->nsess--;
        lc->dropped++;
    } else if (s->nrooms > (size_t)lc->cfg->max_rooms_per_connection) {
        log_warnx("persist",
                  "saved session %s of %s dropped: %zu rooms, over "
                  "max-rooms-per-connection",
                  s->sid, s->user, s->nrooms);
        saved_release(s);
        lc->ps->nsess--;
        lc->dropped++;
    }
}

static void on_taken(void *ctx, int status, const struct store_result *r)
{
    struct load_ctx *lc = ctx;
    int64_t now = (int64_t)time_wall_ms();
    int64_t max_age = lc->cfg->restore_max_age_s * 1000;

    lc->status = status;
    lc->rows = r->nsaved;
    for (size_t i = 0; i < r->nsaved; i++)
        lc->saved_ms = MAX(lc->saved_ms, r->saved[i].saved_ms);
    for (size_t i = 0; i < r->nsaved; i++) {
        if (max_age == 0 || now - r->saved[i].saved_ms > max_age)
            lc->stale++;
        else
            load_row(lc, &r->saved[i]);
    }
}

/* By user, then most recently seen first. */
static int cmp_user_recent(const void *a, const void *b)
{
    const struct saved_session *x = a, *y = b;
    int c = strcmp(x->user, y->user);

    if (c)
        return c;
    return (x->last_seen_ms < y->last_seen_ms) - (x->last_seen_ms > y->last_seen_ms);
}

/* Keeps at most max-sessions-per-user sessions of each user. */
static void cap_users(struct persist *ps, const struct config *cfg, size_t *dropped)
{
    size_t out = 0, run = 0;

    if (ps->nsess < 2)
        return;
    qsort(ps->sess, ps->nsess, sizeof(*ps->sess), cmp_user_recent);
    for (size_t i = 0; i < ps->nsess; i++) {
        /* Against the last one kept: a dropped one is emptied. */
        run = (out > 0 && strcmp(ps->sess[i].user, ps->sess[out - 1].user) == 0) ? run + 1 : 0;
        if (run >= (size_t)cfg->max_sessions_per_user) {
            log_warnx("persist", "saved session %s of %s dropped: over max-sessions-per-user",
                      ps->sess[i].sid, ps->sess[i].user);
            saved_release(&ps->sess[i]);
            (*dropped)++;
            continue;
        }
        ps->sess[out++] = ps->sess[i];
    }
    ps->nsess = out;
}

size_t persist_load(struct persist *ps, struct store *st, const struct config *cfg)
{
    struct store_inbox *in = store_inbox_new();
    struct load_ctx lc = {.ps = ps, .cfg = cfg};

    if (store_saved_take(st, in, on_taken, &lc) != 0) {
        store_inbox_free(in);
        return 0;
    }
    if (!wait_inbox(in)) {
        /* The request may still run: its inbox must outlive it, and its
         * callback (which would fill ps) never runs, as nobody drains it. */
        log_warnx("persist",
                  "cannot read the saved sessions: no answer from the store in %d "
                  "ms; starting empty",
                  PERSIST_WAIT_MS);
        return 0;
    }
    store_inbox_free(in);
    if (lc.status != 0) {
        log_warnx("persist", "cannot read the saved sessions: %s; starting empty",
                  store_strerror(lc.status));
        return 0;
    }
    if (lc.stale)
        log_warnx("persist",
                  "%zu saved sessions discarded: saved %lld s ago, over "
                  "restore-max-age-s (%lld)",
                  lc.stale, (long long)(((int64_t)time_wall_ms() - lc.saved_ms) / 1000),
                  (long long)cfg->restore_max_age_s);
    cap_users(ps, cfg, &lc.dropped);
    if (ps->nsess || lc.dropped)
        log_info("persist", "restoring %zu saved sessions (%zu dropped) in their reconnect grace",
                 ps->nsess, lc.dropped);
    return ps->nsess;
}

void persist_loaded_done(struct persist *ps)
{
    if (ps)
        free_sessions(ps);
}

/* ---- start: each worker's part ---- */

static uint64_t to_mono(int64_t wall_ms, int64_t off)
{
    if (wall_ms <= 0)
        return 0;
    return wall_ms - off > 1 ? (uint64_t)(wall_ms - off) : 1;
}

static void restore_session(struct engine *e, const struct saved_session *s, int64_t off)
{
    uint64_t now = loop_now(e->w->loop);
    struct presence_restore r = {
        .sid = s->sid,
        .user = s->user,
        .device = s->device,
        .manual = s->manual,
        .status_expires_at = to_mono(s->status_expires_ms, off),
        .idle = s->idle,
        .text = s->text,
        .emoji = s->emoji,
        .custom_expires_at = to_mono(s->custom_expires_ms, off),
        .last_seen = to_mono(s->last_seen_ms, off),
        .last_activity = to_mono(s->last_activity_ms, off),
        .socketless = s->http,
        /* the drain told its client to come back up to a window after the
         * stop (drain.h): the grace covers that window too */
        .grace_ms = (uint64_t)(e->w->srv->cfg.reconnect_grace_ms + e->w->srv->cfg.drain_window_ms),
    };
    uint64_t offline_seen = to_mono(s->offline_seen_ms, off);
    int err = presence_session_restore(e->pres, &r, now);

    if (err) {
        log_warnx("persist", "saved session %s of %s not restored: %s", s->sid, s->user,
                  presence_strerror(err));
        return;
    }
    engine__privacy_restore_offline_seen(e, s->user, offline_seen);
    for (size_t i = 0; i < s->nrooms; i++)
        engine__rooms_restore_session(e, s->sid, s->rooms[i].room);
}

static bool owns_room(struct engine *e, const char *room)
{
    return owner_of_room(e, room) == e->w->id;
}

void engine__persist_restore(struct engine *e)
{
    struct persist *ps = e->env->persist;
    int64_t off = wall_offset(e);

    if (!ps || e->env->cluster)
        return;
    e->restoring = true;
    for (size_t i = 0; i < ps->nsess; i++) {
        const struct saved_session *s = &ps->sess[i];

        if (owner_of_user(e, s->user) == e->w->id)
            restore_session(e, s, off);
        for (size_t k = 0; k < s->nrooms; k++) {
            const struct saved_room *r = &s->rooms[k];
            int err;

            if (!owns_room(e, r->room))
                continue;
            err = engine__rooms_restore_member(e, r->room, s->user, s->sid, r->meta, r->visible);
            if (err && err != ROOM_E_JOINED)
                log_warnx("persist", "saved session %s of %s not restored in room %s: %s", s->sid,
                          s->user, r->room, room_strerror(err));
        }
    }
    for (size_t i = 0; i < ps->nsess; i++)
        for (size_t k = 0; k < ps->sess[i].nrooms; k++)
            if (owns_room(e, ps->sess[i].rooms[k].room))
                engine__rooms_restore_flush(e, ps->sess[i].rooms[k].room);
    e->restoring = false;
}

/* ---- stop: each worker's part ---- */

struct collect_ctx {
    struct persist *ps;
    struct engine *e;
    int64_t off;
};

static int64_t to_wall(uint64_t mono, int64_t off)
{
    return mono ? (int64_t)mono + off : 0;
}

static void collect_session(void *ctx, const struct presence_session_info *si)
{
    struct collect_ctx *cc = ctx;
    struct saved_session *s;

    /* An invisible user reads as offline to everyone else: restoring its
     * session would only risk showing it (a first load of its settings
     * while it is online freezes its last seen at that moment). Its
     * client re-asserts instead; nobody else can tell. */
    if (engine__privacy_hidden(cc->e, si->user)) {
        cc->ps->hidden++;
        return;
    }
    s = push_session(cc->ps);
    memcpy(s->sid, si->sid, strlen(si->sid) + 1);
    memcpy(s->user, si->user, strlen(si->user) + 1);
    s->device = si->device;
    s->manual = si->manual;
    s->status_expires_ms = to_wall(si->status_expires_at, cc->off);
    s->idle = si->idle;
    s->http = si->conn_ref == NULL;
    s->text = xstrdup(si->custom.text);
    s->emoji = xstrdup(si->custom.emoji);
    s->custom_expires_ms = to_wall(si->custom.expires_at, cc->off);
    s->last_seen_ms = to_wall(MAX(si->last_heartbeat, si->last_activity), cc->off);
    s->last_activity_ms = to_wall(si->last_activity, cc->off);
    s->offline_seen_ms = to_wall(engine__privacy_offline_seen(cc->e, si->user), cc->off);
}

static void collect_member(void *ctx, const char *room, const struct room_member_view *m)
{
    struct persist *ps = ((struct collect_ctx *)ctx)->ps;

    for (size_t i = 0; i < m->nsessions; i++) {
        struct pmember *pm;
        char *meta = xmalloc(m->meta_len + 1);

        memcpy(meta, m->meta, m->meta_len);
        meta[m->meta_len] = '\0';
        if (ps->nmem == ps->capmem) {
            ps->capmem = ps->capmem ? 2 * ps->capmem : 64;
            ps->mem = xrealloc(ps->mem, ps->capmem * sizeof(*ps->mem));
        }
        pm = &ps->mem[ps->nmem++];
        *pm = (struct pmember){xstrdup(room), xstrdup(m->user), xstrdup(m->session_ids[i]), meta,
                               m->visible};
    }
}

void engine__persist_collect(struct engine *e)
{
    struct collect_ctx cc = {e->env->persist, e, wall_offset(e)};

    if (!cc.ps || e->env->cluster)
        return;
    pthread_mutex_lock(&cc.ps->lock);
    presence_each_session(e->pres, collect_session, &cc);
    room_each_member(e->rooms, collect_member, &cc);
    pthread_mutex_unlock(&cc.ps->lock);
}

/* ---- stop: save ---- */

static int cmp_sid(const void *a, const void *b)
{
    return strcmp(((const struct saved_session *)a)->sid, ((const struct saved_session *)b)->sid);
}

/* Gives each collected session the rooms whose members name it. */
static void join_members(struct persist *ps)
{
    if (ps->nsess == 0)
        return;
    qsort(ps->sess, ps->nsess, sizeof(*ps->sess), cmp_sid);
    for (size_t i = 0; i < ps->nmem; i++) {
        const struct pmember *pm = &ps->mem[i];
        struct saved_session key, *s;
        struct saved_room *r;

        memcpy(key.sid, pm->sid, strlen(pm->sid) + 1);
        s = bsearch(&key, ps->sess, ps->nsess, sizeof(*ps->sess), cmp_sid);
        if (!s || strcmp(s->user, pm->user) != 0)
            continue; /* its session ended while the workers stopped */
        s->rooms = xrealloc(s->rooms, (s->nrooms + 1) * sizeof(*s->rooms));
        r = &s->rooms[s->nrooms++];
        r->room = xstrdup(pm->room);
        r->meta = xstrdup(pm->meta);
        r->visible = pm->visible;
    }
}

struct save_ctx {
    int status;
    bool done;
};

static void on_saved(void *ctx, int status, const struct store_result *r)
{
    struct save_ctx *sc = ctx;

    (void)r;
    sc->status = status;
    sc->done = true;
}

long persist_save(struct persist *ps, struct store *st)
{
    struct store_saved *rows = xcalloc(ps->nsess ? ps->nsess : 1, sizeof(*rows));
    struct buf *data = xcalloc(ps->nsess ? ps->nsess : 1, sizeof(*data));
    struct store_inbox *in = store_inbox_new();
    struct save_ctx sc = {0};
    int64_t now = (int64_t)time_wall_ms();
    long n = (long)ps->nsess;
    int r;

    join_members(ps);
    for (size_t i = 0; i < ps->nsess; i++) {
        saved_encode(&ps->sess[i], &data[i]);
        buf_append(&data[i], "", 1); /* NUL-terminated */
        rows[i] = (struct store_saved){ps->sess[i].sid, data[i].data, now};
    }
    r = store_saved_put(st, in, rows, ps->nsess, on_saved, &sc);
    if (r == 0 && !wait_inbox(in))
        r = -ETIMEDOUT; /* store_close() waits for it; its inbox must outlive it */
    else if (r == 0)
        r = sc.status;
    if (r != 0) {
        log_error("persist", "cannot save %ld sessions for the next start: %s", n,
                  r == -ETIMEDOUT ? "the store did not answer" : store_strerror(r));
        n = -1;
    } else if (n > 0 || ps->hidden) {
        log_info("persist", "saved %ld sessions for the next start (%zu of invisible users not)", n,
                 ps->hidden);
    }
    if (r != -ETIMEDOUT)
        store_inbox_free(in);
    for (size_t i = 0; i < ps->nsess; i++)
        buf_release(&data[i]);
    free(data);
    free(rows);
    return n;
}
