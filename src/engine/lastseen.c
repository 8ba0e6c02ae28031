/* SPDX-License-Identifier: MIT */
/*
 * lastseen.c - durable last seen: the pure batch of users to write, then
 * the engine side that flushes it on a timer, finishes it at a clean stop
 * and loads the stored values at start (lastseen.h has the model).
 *
 * The batch is a hash table of pending entries (user -> wall ms) and an
 * array of the entries in flight, with the pairs handed to the store
 * pointing into them. It does not know the store, the clock or the loop.
 */
#include "lastseen.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine_state.h"
#include "hmap.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

struct entry {
    struct hmap_node node; /* in ls->pending while pending */
    int64_t wall_ms;
    char uid[];
};

struct lastseen {
    struct hmap pending;          /* struct entry by uid */
    size_t cap;                   /* pending + in flight */
    struct entry **fly;           /* the batch in flight */
    struct store_lastseen *pairs; /* its pairs, borrowing fly's uids */
    size_t nfly;
    bool flying; /* a batch is in flight (nfly may be 0 only if not) */
    uint64_t dropped;
};

/* ---- the batch ---- */

static struct entry *find_entry(const struct lastseen *ls, const char *uid)
{
    uint64_t h = hash_bytes(uid, strlen(uid));

    for (struct hmap_node *n = hmap_find(&ls->pending, h); n; n = hmap_find_next(n, h)) {
        struct entry *en = container_of(n, struct entry, node);
        if (strcmp(en->uid, uid) == 0)
            return en;
    }
    return NULL;
}

struct lastseen *lastseen_new(size_t cap)
{
    struct lastseen *ls = xcalloc(1, sizeof(*ls));

    ls->cap = cap;
    return ls;
}

static void free_fly(struct lastseen *ls)
{
    for (size_t i = 0; i < ls->nfly; i++)
        free(ls->fly[i]);
    free(ls->fly);
    free(ls->pairs);
    ls->fly = NULL;
    ls->pairs = NULL;
    ls->nfly = 0;
    ls->flying = false;
}

void lastseen_free(struct lastseen *ls)
{
    struct hmap_node *n, *next;
    size_t it;

    if (!ls)
        return;
    for (n = hmap_first(&ls->pending, &it); n; n = next) {
        next = hmap_next(&ls->pending, n, &it);
        hmap_remove(&ls->pending, n);
        free(container_of(n, struct entry, node));
    }
    hmap_release(&ls->pending);
    free_fly(ls);
    free(ls);
}

/* Puts en (not pending) into the pending table, or merges it into the
 * pending entry of the same user and frees it. */
static void pend(struct lastseen *ls, struct entry *en)
{
    struct entry *old = find_entry(ls, en->uid);

    if (old) {
        old->wall_ms = MAX(old->wall_ms, en->wall_ms);
        free(en);
        return;
    }
    hmap_insert(&ls->pending, &en->node, hash_bytes(en->uid, strlen(en->uid)));
}

int lastseen_note(struct lastseen *ls, const char *uid, int64_t wall_ms)
{
    struct entry *en;
    size_t n;

    if (wall_ms <= 0)
        return -EINVAL;
    if ((en = find_entry(ls, uid)) != NULL) {
        en->wall_ms = MAX(en->wall_ms, wall_ms);
        return 0;
    }
    if (ls->pending.count + ls->nfly >= ls->cap) {
        ls->dropped++;
        return -ENOBUFS;
    }
    n = strlen(uid);
    en = xmalloc(sizeof(*en) + n + 1);
    en->wall_ms = wall_ms;
    memcpy(en->uid, uid, n + 1);
    pend(ls, en);
    return 0;
}

size_t lastseen_take(struct lastseen *ls, size_t max, const struct store_lastseen **pairs)
{
    struct hmap_node *n, *next;
    size_t it, k = 0, want = MIN(max, ls->pending.count);

    if (ls->flying || want == 0)
        return 0;
    ls->fly = xmalloc(want * sizeof(*ls->fly));
    ls->pairs = xmalloc(want * sizeof(*ls->pairs));
    for (n = hmap_first(&ls->pending, &it); n && k < want; n = next) {
        struct entry *en = container_of(n, struct entry, node);
        next = hmap_next(&ls->pending, n, &it);
        hmap_remove(&ls->pending, n);
        ls->fly[k] = en;
        ls->pairs[k].user = en->uid;
        ls->pairs[k].last_seen_ms = en->wall_ms;
        k++;
    }
    ls->nfly = k;
    ls->flying = true;
    *pairs = ls->pairs;
    return k;
}

void lastseen_done(struct lastseen *ls, bool ok)
{
    if (!ls->flying)
        return;
    if (!ok) {
        for (size_t i = 0; i < ls->nfly; i++)
            pend(ls, ls->fly[i]);
        ls->nfly = 0;
    }
    free_fly(ls);
}

bool lastseen_in_flight(const struct lastseen *ls)
{
    return ls->flying;
}

void lastseen_get_stats(const struct lastseen *ls, struct lastseen_stats *out)
{
    out->dropped = ls->dropped;
    out->pending = ls->pending.count;
    out->in_flight = ls->nfly;
}

/* ---- the engine side: flushes ---- */

#define LOAD_RETRY_MS 1000 /* a failed page of the load is asked again */

/* The engine's last-seen state (e->lastseen). */
struct ls_engine {
    struct lastseen *batch;
    struct engine *e;
    struct wheel_timer flush;     /* armed while something is pending */
    struct wheel_timer retry;     /* a failed load page, asked again */
    bool due;                     /* the flush time passed while a batch was in flight */
    bool stopping;                /* engine__lastseen_stop() ran: no timers */
    uint64_t dropped_logged;      /* drops already logged */
    char after[STORE_ID_MAX + 1]; /* the load's cursor: "" = first page */
};

static uint64_t flush_ms(struct engine *e)
{
    return (uint64_t)e->w->srv->cfg.last_seen_flush_ms;
}

static void arm(struct ls_engine *le)
{
    if (!le->stopping && !wheel_is_linked(&le->flush))
        wheel_add(loop_wheel(le->e->w->loop), &le->flush,
                  loop_now(le->e->w->loop) + flush_ms(le->e));
}

static void submit(struct ls_engine *le);

static void write_done(void *ctx, int status, const struct store_result *r)
{
    struct ls_engine *le = ctx;
    struct lastseen_stats st;

    (void)r;
    if (le->e->closing)
        return; /* engine__lastseen_stop() has resubmitted what was in flight */
    if (status < 0)
        log_warnx("store", "last seen of %zu users not written, retried with the next batch: %s",
                  le->batch->nfly, store_strerror(status));
    lastseen_done(le->batch, status == 0);
    lastseen_get_stats(le->batch, &st);
    if (st.pending == 0)
        return;
    if (le->due) /* its turn came while this one was in flight */
        submit(le);
    arm(le);
}

/* Writes the next batch now (one in flight at a time). */
static void submit(struct ls_engine *le)
{
    const struct store_lastseen *pairs;
    size_t n = lastseen_take(le->batch, STORE_IDS_MAX, &pairs);
    int r;

    le->due = false;
    if (n == 0)
        return;
    r = store_lastseen_write(le->e->env->store, le->e->inbox, pairs, n, write_done, le);
    if (r < 0) { /* only ids the store refuses: they can never be written */
        log_warnx("store", "last seen batch refused: %s", store_strerror(r));
        lastseen_done(le->batch, true);
        return;
    }
    METRIC_ADD(&le->e->w->metrics, last_seen_writes, 1);
}

static void log_drops(struct ls_engine *le)
{
    struct lastseen_stats st;

    lastseen_get_stats(le->batch, &st);
    METRIC_SET(&le->e->w->metrics, last_seen_dropped, st.dropped);
    if (st.dropped != le->dropped_logged) {
        log_warnx("store", "%" PRIu64 " last seen updates dropped: over %d users waiting",
                  st.dropped - le->dropped_logged, LASTSEEN_PENDING_MAX);
        le->dropped_logged = st.dropped;
    }
}

static void on_flush(struct wheel_timer *t, uint64_t now)
{
    struct ls_engine *le = container_of(t, struct ls_engine, flush);
    struct lastseen_stats st;

    (void)now;
    log_drops(le);
    if (lastseen_in_flight(le->batch)) {
        le->due = true; /* write_done() submits */
        return;
    }
    submit(le);
    lastseen_get_stats(le->batch, &st);
    if (st.pending)
        arm(le);
}

void engine__lastseen_note(struct engine *e, const char *uid, uint64_t mono_ms)
{
    struct ls_engine *le = e->lastseen;
    int64_t wall = (int64_t)mono_ms + wall_offset(e);

    if (!le || mono_ms == 0 || wall <= 0)
        return;
    if (lastseen_note(le->batch, uid, wall) == 0)
        arm(le);
}

/* ---- the engine side: loading at start ---- */

static void load_page(struct ls_engine *le);

static void load_done(void *ctx, int status, const struct store_result *r)
{
    struct ls_engine *le = ctx;
    struct engine *e = le->e;
    int64_t offset = wall_offset(e);

    if (e->closing)
        return;
    if (status < 0) {
        log_warnx("store", "last seen not loaded (retrying in 1 s): %s", store_strerror(status));
        if (!le->stopping)
            wheel_add(loop_wheel(e->w->loop), &le->retry, loop_now(e->w->loop) + LOAD_RETRY_MS);
        return;
    }
    for (size_t i = 0; i < r->nseen; i++) {
        const struct store_lastseen *row = &r->seen[i];
        int64_t mono = row->last_seen_ms - offset;
        if (owner_of_user(e, row->user) != e->w->id)
            continue;
        /* Before the machine's boot: the earliest time the core can hold. */
        presence_set_last_seen(e->pres, row->user, mono > 0 ? (uint64_t)mono : 1, true);
    }
    if (r->nseen < STORE_IDS_MAX)
        return; /* the last page */
    copy_id(le->after, r->seen[r->nseen - 1].user);
    load_page(le);
}

static void load_page(struct ls_engine *le)
{
    struct engine *e = le->e;
    int r =
        store_lastseen_load(e->env->store, e->inbox, le->after, 0, STORE_IDS_MAX, load_done, le);

    if (r < 0)
        log_warnx("store", "last seen not loaded: %s", store_strerror(r));
}

static void on_retry(struct wheel_timer *t, uint64_t now)
{
    (void)now;
    load_page(container_of(t, struct ls_engine, retry));
}

/* ---- the engine side: lifetime ---- */

void engine__lastseen_init(struct engine *e)
{
    struct ls_engine *le = xcalloc(1, sizeof(*le));

    le->batch = lastseen_new(LASTSEEN_PENDING_MAX);
    le->e = e;
    wheel_timer_init(&le->flush, on_flush);
    wheel_timer_init(&le->retry, on_retry);
    e->lastseen = le;
    load_page(le);
}

void engine__lastseen_stop(struct engine *e)
{
    struct ls_engine *le = e->lastseen;
    const struct store_lastseen *pairs;
    size_t n;

    if (!le)
        return;
    le->stopping = true;
    wheel_del(&le->flush);
    wheel_del(&le->retry);
    engine__privacy_note_online(e);
    /* What is in flight may still fail: write it once more (the store
     * keeps the max), then everything pending, in as many calls as needed;
     * write_done() only returns now (e->closing). */
    lastseen_done(le->batch, false);
    while ((n = lastseen_take(le->batch, STORE_IDS_MAX, &pairs)) > 0) {
        if (store_lastseen_write(e->env->store, e->inbox, pairs, n, write_done, le) == 0)
            METRIC_ADD(&e->w->metrics, last_seen_writes, 1);
        lastseen_done(le->batch, true); /* the store copied the pairs */
    }
}

void engine__lastseen_free(struct engine *e)
{
    struct ls_engine *le = e->lastseen;

    if (!le)
        return;
    wheel_del(&le->flush);
    wheel_del(&le->retry);
    lastseen_free(le->batch);
    free(le);
    e->lastseen = NULL;
}
