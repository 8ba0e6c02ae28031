/* SPDX-License-Identifier: MIT */
/*
 * store.c - the settings store: one database thread, a request queue in
 * front of it, completion inboxes behind it, and a backend (SQLite or
 * PostgreSQL, store_backend.h) that runs the statements.
 *
 * Exports the store_* API of store.h. It validates requests, groups
 * consecutive writes into one transaction, fails reads closed and refuses
 * writes for good once the backend finds its database gone; it does
 * not cache, does not decide visibility and does not log: errors travel
 * back as statuses.
 */
#include "store.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "ns.h"
#include "store_backend.h"

#define CHECK_MS 1000 /* longest time between two backend checks */

/* One request, from submission to its callback. */
struct req {
    struct req *next;       /* in the store queue, then in the inbox */
    struct store_args args; /* what the backend runs; strings owned here */
    store_cb *cb;
    void *ctx;
    struct store_inbox *inbox; /* where the completion goes */
    int status;
    struct store_result result;
    uint64_t submitted_us; /* time_mono_us() at submit(), with inbox->metrics */
};

struct req_list {
    struct req *head;
    struct req *tail;
};

struct store_inbox {
    pthread_mutex_t lock; /* protects done and inflight */
    struct req_list done; /* finished, callbacks not run yet */
    size_t inflight;      /* submitted, not yet in done */
    size_t undrained;     /* in done; only read under lock */
    int efd;              /* eventfd, written on empty -> non-empty */

    /* The draining worker's, or NULL (store_inbox_observe). */
    struct metrics *metrics;
};

const char *const store__vis_name[3] = {"everyone", "contacts", "nobody"};

struct store {
    const struct store_backend *be; /* chosen by store_open()'s spec */
    void *db;                       /* the backend's state; thread only */
    pthread_t thread;
    pthread_mutex_t lock;  /* protects queue and closing */
    pthread_cond_t wake;   /* signalled on submit and close */
    struct req_list queue; /* submitted, not yet taken by the thread */
    bool closing;
    atomic_int fault;    /* 0, or the first error check() returned: for good */
    atomic_int outage;   /* 0, or STORE_E_IO: the last attempt found no database */
    uint64_t checked_at; /* time_mono_ms() of the last check; thread only */
};

/* ---- helpers ---- */

static void list_push(struct req_list *l, struct req *r)
{
    r->next = NULL;
    if (l->tail)
        l->tail->next = r;
    else
        l->head = r;
    l->tail = r;
}

/* The answer a failed read must be taken as: the most private one. */
static struct store_result result_private(void)
{
    return (struct store_result){
        .privacy = {.online = STORE_VIS_NOBODY, .last_seen = STORE_VIS_NOBODY, .invisible = true},
        .blocked = true,
    };
}

/* Frees what a read allocated: list_blockers', get_summary's and
 * lastseen_load's ids,
 * the lastseen calls' seen array. */
static void result_free_ids(struct store_result *res)
{
    char **ids = (char **)res->ids;

    for (size_t i = 0; i < res->nids; i++)
        free(ids[i]);
    free(ids);
    free((struct store_lastseen *)res->seen);
    free((struct store_saved *)res->saved);
    res->saved = NULL;
    res->nsaved = 0;
    res->ids = NULL;
    res->nids = 0;
    res->seen = NULL;
    res->nseen = 0;
}

/*
 * What a failed read of a's kind is taken as: the most private answer,
 * and for lastseen_read one "never seen" entry per user asked, so that a
 * caller indexing the answer like its question never needs to check n.
 */
static struct store_result result_failed(const struct store_args *a)
{
    struct store_result res = result_private();

    if (a->kind == STORE_LASTSEEN_READ) {
        struct store_lastseen *seen = xcalloc(a->n, sizeof(*seen));

        for (size_t i = 0; i < a->n; i++)
            seen[i].user = a->ids[i];
        res.seen = seen;
        res.nseen = a->n;
    }
    return res;
}

static void req_free(struct req *r)
{
    result_free_ids(&r->result);
    for (size_t i = 0; i < r->args.n; i++) {
        free(r->args.ids[i]);
        if (r->args.texts)
            free(r->args.texts[i]);
    }
    free(r->args.ids);
    free(r->args.texts);
    free(r->args.times);
    free(r->args.user);
    free(r->args.other);
    free(r);
}

static bool vis_is_valid(enum store_visibility v)
{
    return v == STORE_VIS_EVERYONE || v == STORE_VIS_CONTACTS || v == STORE_VIS_NOBODY;
}

enum store_visibility store__vis_parse(const char *s)
{
    for (size_t i = 0; i < ARRAY_SIZE(store__vis_name); i++)
        if (s && strcmp(s, store__vis_name[i]) == 0)
            return (enum store_visibility)i;
    return STORE_VIS_NOBODY; /* unknown text: the most private reading */
}

static bool is_write(const struct req *r)
{
    return r->args.kind <= STORE_LAST_WRITE;
}

/* Completes r with err without running it: reads fail closed. */
static void req_fail(struct req *r, int err)
{
    r->status = err;
    r->result = is_write(r) ? (struct store_result){0} : result_failed(&r->args);
}

/* Runs one read; on error the result is the most private answer. */
static void exec_read(struct store *s, struct req *r)
{
    int err;

    r->result = (struct store_result){0};
    err = s->be->read(s->db, &r->args, &r->result);
    r->status = err;
    if (err) {
        result_free_ids(&r->result);
        r->result = result_failed(&r->args);
    }
}

/* ---- the database thread: batches and completions ---- */

/* The sticky fault: asks the backend unless one is known already. */
static int check_fault(struct store *s)
{
    int fault = atomic_load_explicit(&s->fault, memory_order_acquire);

    s->checked_at = time_mono_ms();
    if (fault == 0 && s->be->check) {
        fault = s->be->check(s->db);
        if (fault)
            atomic_store_explicit(&s->fault, fault, memory_order_release);
    }
    return fault;
}

static void inbox_post(struct store_inbox *in, struct req *r)
{
    bool was_empty;

    pthread_mutex_lock(&in->lock);
    was_empty = in->done.head == NULL;
    list_push(&in->done, r);
    in->inflight--;
    in->undrained++;
    pthread_mutex_unlock(&in->lock);
    if (was_empty) {
        uint64_t one = 1;
        ssize_t w = write(in->efd, &one, sizeof(one));

        /* An eventfd write only fails when the counter would overflow,
         * which leaves it readable anyway. */
        (void)w;
    }
}

/*
 * Group commit: runs the n consecutive writes starting at first in one
 * transaction and sets each one's status. When any write or the commit
 * fails, the transaction is rolled back and, if it held several writes,
 * each is rerun alone so that every request gets its own verdict and one
 * bad request cannot fail its neighbours.
 */
static void run_writes(struct store *s, struct req *first, size_t n)
{
    const struct store_backend *be = s->be;
    struct req *r = first;
    int err = be->begin(s->db);

    for (size_t i = 0; i < n && err == 0; i++, r = r->next) {
        r->result = (struct store_result){0};
        err = be->write(s->db, &r->args, &r->result.changed);
    }
    if (err == 0)
        err = be->commit(s->db);
    if (err == 0) {
        for (r = first; n--; r = r->next)
            r->status = 0;
        return;
    }
    be->rollback(s->db);
    if (n == 1) {
        req_fail(first, err);
        return;
    }
    for (r = first; n--; r = r->next)
        run_writes(s, r, 1);
}

/*
 * A group of n writes with the database gone: refused before it runs, or,
 * when the check after its commit finds the file gone, reported failed
 * although committed, since what was committed into a deleted file is not
 * there after a restart. Either way no write is acknowledged into a file
 * that the path no longer names.
 */
static void run_write_group(struct store *s, struct req *first, size_t n)
{
    int fault = check_fault(s);
    struct req *r;
    size_t i;

    if (fault == 0) {
        run_writes(s, first, n);
        fault = check_fault(s);
    }
    for (r = first, i = 0; fault && i < n; r = r->next, i++)
        req_fail(r, fault);
}

/*
 * Runs a batch in order and posts every completion after its commit. The
 * backend is asked once per batch whether it can run at all; when it
 * cannot (a lost PostgreSQL server), every request of the batch completes
 * with its error at once and the next batch asks again.
 */
static void run_batch(struct store *s, struct req *r)
{
    int down = s->be->ready ? s->be->ready(s->db) : 0;
    bool io = down == STORE_E_IO;

    while (r) {
        struct req *next;
        size_t n = 1;

        if (down) {
            req_fail(r, down);
        } else if (is_write(r)) {
            struct req *last = r;

            while (last->next && is_write(last->next)) {
                last = last->next;
                n++;
            }
            run_write_group(s, r, n);
        } else {
            exec_read(s, r);
        }
        for (; n--; r = next) {
            next = r->next;
            io = io || r->status == STORE_E_IO;
            inbox_post(r->inbox, r);
        }
    }
    atomic_store_explicit(&s->outage, io ? STORE_E_IO : 0, memory_order_relaxed);
}

/* While idle, asks the backend whether it could run a batch (a PostgreSQL
 * connection lost or back: ready() reconnects), so that store_is_reachable()
 * follows an outage of an idle store too. */
static void probe_ready(struct store *s)
{
    int down;

    if (!s->be->ready)
        return;
    down = s->be->ready(s->db);
    atomic_store_explicit(&s->outage, down == STORE_E_IO ? STORE_E_IO : 0, memory_order_relaxed);
}

/* CLOCK_MONOTONIC (the condition variable's clock) in ms from now. */
static struct timespec deadline_in(uint64_t ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/*
 * Takes whatever is queued and runs it; waits at most CHECK_MS for more,
 * and checks the backend whenever CHECK_MS passed without a check, so that
 * a database deleted under an idle or read-only store is found within
 * about a second (store_is_healthy()), not at the next write. An idle
 * store also asks ready() then, so that a PostgreSQL server lost or back
 * shows in store_is_reachable() within about a second too.
 */
static void *store_thread(void *arg)
{
    struct store *s = arg;

    for (;;) {
        struct req *batch;
        bool closing;

        pthread_mutex_lock(&s->lock);
        if (!s->queue.head && !s->closing) {
            struct timespec until = deadline_in(CHECK_MS);

            pthread_cond_timedwait(&s->wake, &s->lock, &until);
        }
        batch = s->queue.head;
        s->queue = (struct req_list){0};
        closing = s->closing;
        pthread_mutex_unlock(&s->lock);
        if (batch)
            run_batch(s, batch);
        else if (closing)
            return NULL; /* closing and nothing left */
        if (time_mono_ms() - s->checked_at < CHECK_MS)
            continue;
        check_fault(s);
        if (!batch)
            probe_ready(s);
    }
}

/* ---- open and close ---- */

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static const struct store_backend *backend_for(const char *spec)
{
    if (has_prefix(spec, "postgres://") || has_prefix(spec, "postgresql://"))
        return &store__pg;
    return &store__sqlite;
}

/* A condition variable on CLOCK_MONOTONIC: a wall clock step must not
 * stretch or cut the thread's timed waits. */
static void init_wake(pthread_cond_t *c)
{
    pthread_condattr_t attr;

    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
}

int store_open_status(const char *spec, char *err, size_t errlen, struct store **out)
{
    struct store *s = xcalloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    s->be = backend_for(spec);
    rc = s->be->open(spec, &s->db, err, errlen);
    if (rc)
        goto out_free;
    pthread_mutex_init(&s->lock, NULL);
    init_wake(&s->wake);
    s->checked_at = time_mono_ms();
    rc = -pthread_create(&s->thread, NULL, store_thread, s);
    if (rc) {
        snprintf(err, errlen, "cannot start the %s database thread: %s", s->be->name,
                 strerror(-rc));
        goto out_sync;
    }
    *out = s;
    return 0;
out_sync:
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    s->be->close(s->db);
out_free:
    free(s);
    return rc;
}

struct store *store_open(const char *spec, char *err, size_t errlen)
{
    struct store *s;

    store_open_status(spec, err, errlen, &s);
    return s;
}

void store_close(struct store *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->closing = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    /* The thread exits only with an empty queue, and nobody may submit now. */
    assert(s->queue.head == NULL);
    s->be->close(s->db);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

bool store_is_healthy(const struct store *s)
{
    return store_fault(s) == 0;
}

int store_fault(const struct store *s)
{
    return atomic_load_explicit(&((struct store *)s)->fault, memory_order_acquire);
}

bool store_is_reachable(const struct store *s)
{
    return atomic_load_explicit(&((struct store *)s)->outage, memory_order_relaxed) == 0;
}

const char *store_strerror(int status)
{
    switch (status) {
    case 0:
        return "success";
    case STORE_E_IO:
        return "settings database unreachable or i/o error";
    case STORE_E_CORRUPT:
        return "settings database corrupt";
    case STORE_E_READONLY:
        return "settings database is read-only";
    case STORE_E_FULL:
        return "settings database disk full";
    case STORE_E_BUSY:
        return "settings database locked";
    case STORE_E_SCHEMA:
        return "settings database schema mismatch";
    case STORE_E_GONE:
        return "settings database file deleted or replaced: writes refused until restart";
    case -EINVAL:
        return "invalid user id, privacy value or time";
    case -E2BIG:
        return "too many ids in one call";
    default:
        return status < 0 && status > -PS_EBASE ? strerror(-status) : "unknown store error";
    }
}

bool store_id_is_valid(const char *id)
{
    size_t n, p;
    int pl;

    if (!id || (pl = ns_prefix_len(id)) < 0) /* an app's namespace prefix (ns.h) */
        return false;
    for (n = p = (size_t)pl; id[n]; n++) {
        unsigned char c = (unsigned char)id[n];

        if (n == STORE_ID_MAX)
            return false;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("-_.~:@", c)))
            return false;
    }
    return n > p;
}

/* ---- completion inboxes ---- */

struct store_inbox *store_inbox_new(void)
{
    struct store_inbox *in = xcalloc(1, sizeof(*in));

    in->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    /* Only fd exhaustion fails here, which the daemon treats like OOM. */
    if (in->efd < 0)
        abort();
    pthread_mutex_init(&in->lock, NULL);
    return in;
}

void store_inbox_observe(struct store_inbox *in, struct metrics *m)
{
    in->metrics = m;
}

/* The histogram of each request kind (enum store_kind order). */
static const enum metrics_hist_id kind_hist[] = {
    [STORE_SET_PRIVACY] = MH_STORE_SET_PRIVACY,
    [STORE_CONTACTS_ADD] = MH_STORE_CONTACTS,
    [STORE_CONTACTS_REMOVE] = MH_STORE_CONTACTS,
    [STORE_CONTACTS_REPLACE] = MH_STORE_CONTACTS,
    [STORE_BLOCK] = MH_STORE_BLOCK,
    [STORE_UNBLOCK] = MH_STORE_BLOCK,
    [STORE_LASTSEEN_WRITE] = MH_STORE_LASTSEEN_WRITE,
    [STORE_GET_PRIVACY] = MH_STORE_GET_PRIVACY,
    [STORE_GET_RELATIONS] = MH_STORE_GET_RELATIONS,
    [STORE_LIST_BLOCKERS] = MH_STORE_LIST_BLOCKERS,
    [STORE_LASTSEEN_READ] = MH_STORE_LASTSEEN_READ,
    [STORE_LASTSEEN_LOAD] = MH_STORE_LASTSEEN_LOAD,
};

/* A finished request's round trip and the pending count, on the draining
 * worker's metrics; now is read once per drain. */
static void observe_done(struct store_inbox *in, const struct req *r, uint64_t now)
{
    METRIC_SUB(in->metrics, store_pending, 1);
    metrics_observe(in->metrics, kind_hist[r->args.kind], now - r->submitted_us);
}

int store_inbox_fd(const struct store_inbox *in)
{
    return in->efd;
}

/*
 * Clears the eventfd before taking the list: a completion posted after the
 * take finds the list empty and writes the eventfd again, so none is ever
 * left without a wake-up (at worst a later drain finds nothing).
 */
size_t store_inbox_drain(struct store_inbox *in)
{
    uint64_t v;
    struct req *r, *next;
    size_t n = 0;
    ssize_t got = read(in->efd, &v, sizeof(v));
    uint64_t now;

    (void)got; /* EAGAIN: nothing signalled, the list may still hold work */
    pthread_mutex_lock(&in->lock);
    r = in->done.head;
    in->done = (struct req_list){0};
    pthread_mutex_unlock(&in->lock);
    now = r && in->metrics ? time_mono_us() : 0;
    for (; r; r = next, n++) {
        next = r->next;
        if (in->metrics)
            observe_done(in, r, now);
        r->cb(r->ctx, r->status, &r->result);
        req_free(r);
        pthread_mutex_lock(&in->lock);
        in->undrained--;
        pthread_mutex_unlock(&in->lock);
    }
    return n;
}

size_t store_inbox_pending(struct store_inbox *in)
{
    size_t n;

    pthread_mutex_lock(&in->lock);
    n = in->inflight + in->undrained;
    pthread_mutex_unlock(&in->lock);
    return n;
}

void store_inbox_free(struct store_inbox *in)
{
    struct req *r, *next;

    if (!in)
        return;
    /* The database thread would post into freed memory. */
    assert(in->inflight == 0);
    for (r = in->done.head; r; r = next) {
        next = r->next;
        req_free(r);
    }
    close(in->efd);
    pthread_mutex_destroy(&in->lock);
    free(in);
}

/* ---- requests ---- */

static struct req *req_new(enum store_kind kind, const char *user, const char *other, store_cb *cb,
                           void *ctx)
{
    struct req *r = xcalloc(1, sizeof(*r));

    r->args.kind = kind;
    r->args.user = user ? xstrdup(user) : NULL;
    r->args.other = other ? xstrdup(other) : NULL;
    r->cb = cb;
    r->ctx = ctx;
    return r;
}

static int submit(struct store *s, struct store_inbox *in, struct req *r)
{
    r->inbox = in;
    if (in->metrics) {
        r->submitted_us = time_mono_us();
        METRIC_ADD(in->metrics, store_pending, 1);
    }
    pthread_mutex_lock(&in->lock);
    in->inflight++;
    pthread_mutex_unlock(&in->lock);
    pthread_mutex_lock(&s->lock);
    /* store_close() forbids submissions from its start. */
    assert(!s->closing);
    list_push(&s->queue, r);
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static int check_ids(const char *const *ids, size_t n)
{
    if (n > STORE_IDS_MAX)
        return -E2BIG;
    for (size_t i = 0; i < n; i++)
        if (!store_id_is_valid(ids[i]))
            return -EINVAL;
    return 0;
}

static int submit_ids(struct store *s, struct store_inbox *in, enum store_kind kind,
                      const char *owner, const char *const *ids, size_t n, store_cb *cb, void *ctx)
{
    int err = check_ids(ids, n);
    struct req *r;

    if (err)
        return err;
    if (!store_id_is_valid(owner))
        return -EINVAL;
    r = req_new(kind, owner, NULL, cb, ctx);
    r->args.ids = xcalloc(n ? n : 1, sizeof(*r->args.ids));
    r->args.n = n;
    for (size_t i = 0; i < n; i++)
        r->args.ids[i] = xstrdup(ids[i]);
    return submit(s, in, r);
}

static int submit_pair(struct store *s, struct store_inbox *in, enum store_kind kind,
                       const char *owner, const char *other, store_cb *cb, void *ctx)
{
    if (!store_id_is_valid(owner) || !store_id_is_valid(other))
        return -EINVAL;
    return submit(s, in, req_new(kind, owner, other, cb, ctx));
}

int store_set_privacy(struct store *s, struct store_inbox *in, const char *user,
                      const struct store_privacy *p, store_cb *cb, void *ctx)
{
    struct req *r;

    if (!store_id_is_valid(user) || !p || !vis_is_valid(p->online) || !vis_is_valid(p->last_seen))
        return -EINVAL;
    r = req_new(STORE_SET_PRIVACY, user, NULL, cb, ctx);
    r->args.priv = *p;
    return submit(s, in, r);
}

int store_get_privacy(struct store *s, struct store_inbox *in, const char *user, store_cb *cb,
                      void *ctx)
{
    if (!store_id_is_valid(user))
        return -EINVAL;
    return submit(s, in, req_new(STORE_GET_PRIVACY, user, NULL, cb, ctx));
}

int store_contacts_add(struct store *s, struct store_inbox *in, const char *owner,
                       const char *const *ids, size_t n, store_cb *cb, void *ctx)
{
    return submit_ids(s, in, STORE_CONTACTS_ADD, owner, ids, n, cb, ctx);
}

int store_contacts_remove(struct store *s, struct store_inbox *in, const char *owner,
                          const char *const *ids, size_t n, store_cb *cb, void *ctx)
{
    return submit_ids(s, in, STORE_CONTACTS_REMOVE, owner, ids, n, cb, ctx);
}

int store_contacts_replace(struct store *s, struct store_inbox *in, const char *owner,
                           const char *const *ids, size_t n, store_cb *cb, void *ctx)
{
    return submit_ids(s, in, STORE_CONTACTS_REPLACE, owner, ids, n, cb, ctx);
}

int store_block(struct store *s, struct store_inbox *in, const char *owner, const char *target,
                store_cb *cb, void *ctx)
{
    return submit_pair(s, in, STORE_BLOCK, owner, target, cb, ctx);
}

int store_unblock(struct store *s, struct store_inbox *in, const char *owner, const char *target,
                  store_cb *cb, void *ctx)
{
    return submit_pair(s, in, STORE_UNBLOCK, owner, target, cb, ctx);
}

int store_get_relations(struct store *s, struct store_inbox *in, const char *owner,
                        const char *viewer, store_cb *cb, void *ctx)
{
    return submit_pair(s, in, STORE_GET_RELATIONS, owner, viewer, cb, ctx);
}

int store_list_blockers(struct store *s, struct store_inbox *in, const char *target, store_cb *cb,
                        void *ctx)
{
    if (!store_id_is_valid(target))
        return -EINVAL;
    return submit(s, in, req_new(STORE_LIST_BLOCKERS, target, NULL, cb, ctx));
}

int store_get_summary(struct store *s, struct store_inbox *in, const char *owner, store_cb *cb,
                      void *ctx)
{
    if (!store_id_is_valid(owner))
        return -EINVAL;
    return submit(s, in, req_new(STORE_GET_SUMMARY, owner, NULL, cb, ctx));
}

/*
 * The lastseen calls carry their users in args.ids and no owner
 * (args.user NULL). Every pair is checked before anything is copied, so
 * a refused call has queued nothing.
 */
int store_lastseen_write(struct store *s, struct store_inbox *in,
                         const struct store_lastseen *pairs, size_t n, store_cb *cb, void *ctx)
{
    struct req *r;

    if (n > STORE_IDS_MAX)
        return -E2BIG;
    for (size_t i = 0; i < n; i++)
        if (!store_id_is_valid(pairs[i].user) || pairs[i].last_seen_ms <= 0)
            return -EINVAL;
    r = req_new(STORE_LASTSEEN_WRITE, NULL, NULL, cb, ctx);
    r->args.ids = xcalloc(n ? n : 1, sizeof(*r->args.ids));
    r->args.times = xcalloc(n ? n : 1, sizeof(*r->args.times));
    r->args.n = n;
    for (size_t i = 0; i < n; i++) {
        r->args.ids[i] = xstrdup(pairs[i].user);
        r->args.times[i] = pairs[i].last_seen_ms;
    }
    return submit(s, in, r);
}

int store_lastseen_read(struct store *s, struct store_inbox *in, const char *const *users, size_t n,
                        store_cb *cb, void *ctx)
{
    int err = check_ids(users, n);
    struct req *r;

    if (err)
        return err;
    if (n == 0)
        return -EINVAL;
    r = req_new(STORE_LASTSEEN_READ, NULL, NULL, cb, ctx);
    r->args.ids = xcalloc(n, sizeof(*r->args.ids));
    r->args.n = n;
    for (size_t i = 0; i < n; i++)
        r->args.ids[i] = xstrdup(users[i]);
    return submit(s, in, r);
}

int store_lastseen_load(struct store *s, struct store_inbox *in, const char *after,
                        int64_t since_ms, size_t limit, store_cb *cb, void *ctx)
{
    struct req *r;

    if (after && *after == '\0')
        after = NULL;
    if ((after && !store_id_is_valid(after)) || since_ms < 0 || limit == 0 || limit > STORE_IDS_MAX)
        return -EINVAL;
    r = req_new(STORE_LASTSEEN_LOAD, NULL, after, cb, ctx);
    r->args.since_ms = since_ms;
    r->args.limit = limit;
    return submit(s, in, r);
}

/* ---- presence saved at a clean stop ---- */

int store_saved_put(struct store *s, struct store_inbox *in, const struct store_saved *rows,
                    size_t n, store_cb *cb, void *ctx)
{
    struct req *r;

    for (size_t i = 0; i < n; i++)
        if (!store_id_is_valid(rows[i].sid) || !rows[i].data || rows[i].saved_ms <= 0)
            return -EINVAL;
    r = req_new(STORE_SAVED_PUT, NULL, NULL, cb, ctx);
    r->args.ids = xcalloc(n ? n : 1, sizeof(*r->args.ids));
    r->args.texts = xcalloc(n ? n : 1, sizeof(*r->args.texts));
    r->args.times = xcalloc(n ? n : 1, sizeof(*r->args.times));
    r->args.n = n;
    for (size_t i = 0; i < n; i++) {
        r->args.ids[i] = xstrdup(rows[i].sid);
        r->args.texts[i] = xstrdup(rows[i].data);
        r->args.times[i] = rows[i].saved_ms;
    }
    return submit(s, in, r);
}

int store_saved_take(struct store *s, struct store_inbox *in, store_cb *cb, void *ctx)
{
    return submit(s, in, req_new(STORE_SAVED_TAKE, NULL, NULL, cb, ctx));
}
