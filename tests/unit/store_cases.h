/* SPDX-License-Identifier: MIT */
/*
 * store_cases.h - test helper: the settings store's behaviour whatever the
 * backend, as static cases and helpers shared by test_store.c (SQLite) and
 * test_store_pg.c (PostgreSQL). Each backend's own cases stay in its file.
 * Not a test binary of its own (the Makefile builds tests/unit/test_*.c).
 *
 * Contract: the including file defines, before #include "store_cases.h":
 *
 *   struct fix { struct store *s; struct store_inbox *in; ... };
 *       what its setup() hands over as *state: a store open on an empty
 *       database (s; a case may close it and set it to NULL, teardown()
 *       copes) and an inbox for the completions (in). teardown() closes s,
 *       then drains and frees in.
 *   static const char *fix_spec(const struct fix *f);
 *       the spec store_open() takes to open f's database again (a file
 *       path, a postgres:// URI).
 *   static long fix_count_contacts(struct fix *f, const char *owner);
 *       the contact rows of owner (of everyone when owner is NULL), counted
 *       with the backend's own client, behind the store's back.
 *   static long fix_commits(struct fix *f, const char *owner);
 *       a count of committed transactions that grows by one for each that
 *       wrote contacts of owner (SQLite counts every commit in the -wal:
 *       call it around writes of owner only).
 *   static long fix_schema_version(struct fix *f);
 *       the schema version stored in the database, read the same way.
 *   static void fix_set_schema_version(struct fix *f, int v);
 *   static void fix_damage_schema(struct fix *f);
 *       store v as the schema version / rename the blocks table's
 *       "blocked" column, behind the store's back; called with f->s NULL.
 *   static void fix_forbid_contact(struct fix *f, const char *id);
 *       makes the database refuse every contact row naming id (a
 *       constraint error), behind the store's back.
 *   static void fix_destroy(struct fix *f);
 *       destroys the database under the running store: what an operator's
 *       mistake does (SQLite: the file deleted; PostgreSQL: the tables
 *       dropped).
 *   static long fix_count_lastseen(struct fix *f);
 *       the last-seen rows, counted behind the store's back.
 *   static long fix_lastseen_commits(struct fix *f);
 *       as fix_commits(), for transactions that wrote last-seen rows
 *       (SQLite counts every commit: call it around last-seen writes only).
 *   static void fix_forbid_lastseen(struct fix *f, const char *id);
 *       makes the database refuse every last-seen row naming id.
 *   static void fix_drop_lastseen(struct fix *f);
 *       drops the last-seen table, as a version 1 database lacks it;
 *       called with f->s NULL.
 *
 * Hooks are called with nothing pending. Those that work behind the
 * store's back may close f->s and open it again (SQLite must: the store
 * holds its file exclusively); each leaves f->s open if it found it open.
 *
 * Its main() lists every test_* case below with its own setup and teardown,
 * and runs durability_kill9() on an empty database of its own. Completions
 * are awaited by polling the inbox eventfd the way a worker loop would,
 * with a bounded timeout, so a lost wake-up fails the test instead of
 * hanging it.
 */
#ifndef STORE_CASES_H
#define STORE_CASES_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "metrics.h"
#include "store.h"
#include "util.h"

#define WAIT_MS 10000 /* longest wait for one completion before failing */

/* What one completion saw. */
struct rec {
    int calls;
    int status;
    struct store_result r;
};

static void rec_cb(void *ctx, int status, const struct store_result *r)
{
    struct rec *x = ctx;

    x->calls++;
    x->status = status;
    x->r = *r;
}

static struct store *open_or_fail(const char *spec)
{
    char err[STORE_ERR_LEN] = "";
    struct store *s = store_open(spec, err, sizeof(err));

    if (!s)
        fail_msg("store_open: %s", err);
    return s;
}

/* Drains in until nothing is pending, polling its fd like a worker loop. */
static void wait_all(struct store_inbox *in)
{
    while (store_inbox_pending(in) > 0) {
        struct pollfd p = {.fd = store_inbox_fd(in), .events = POLLIN};

        assert_int_equal(poll(&p, 1, WAIT_MS), 1);
        store_inbox_drain(in);
    }
}

static void reopen(struct fix *f)
{
    store_close(f->s);
    wait_all(f->in);
    f->s = open_or_fail(fix_spec(f));
}

static struct rec get_privacy(struct fix *f, const char *user)
{
    struct rec x = {0};

    assert_int_equal(store_get_privacy(f->s, f->in, user, rec_cb, &x), 0);
    wait_all(f->in);
    assert_int_equal(x.calls, 1);
    return x;
}

/* get_relations, whatever its status. */
static struct rec relations_any(struct fix *f, const char *owner, const char *viewer)
{
    struct rec x = {0};

    assert_int_equal(store_get_relations(f->s, f->in, owner, viewer, rec_cb, &x), 0);
    wait_all(f->in);
    assert_int_equal(x.calls, 1);
    return x;
}

/* get_relations, which must succeed. */
static struct rec relations(struct fix *f, const char *owner, const char *viewer)
{
    struct rec x = relations_any(f, owner, viewer);

    assert_int_equal(x.status, 0);
    return x;
}

/* Waits for one write op and returns its completion, which must be 0. */
static struct rec done(struct fix *f, int submitted, struct rec *x)
{
    assert_int_equal(submitted, 0);
    wait_all(f->in);
    assert_int_equal(x->calls, 1);
    assert_int_equal(x->status, 0);
    return *x;
}

typedef int contacts_fn(struct store *s, struct store_inbox *in, const char *owner,
                        const char *const *ids, size_t n, store_cb *cb, void *ctx);

static struct rec contacts_call(struct fix *f, contacts_fn *op, const char *owner,
                                const char *const *ids, size_t n)
{
    struct rec x = {0};

    return done(f, op(f->s, f->in, owner, ids, n, rec_cb, &x), &x);
}

#define CONTACTS(op, f, owner, ...)                                 \
    contacts_call(f, op, owner, (const char *const[]){__VA_ARGS__}, \
                  sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

/* ---- basic behaviour ---- */

static void test_privacy_round_trip(void **state)
{
    struct fix *f = *state;
    struct store_privacy p = {STORE_VIS_CONTACTS, STORE_VIS_NOBODY, true};
    struct rec w = {0}, x;

    done(f, store_set_privacy(f->s, f->in, "alice", &p, rec_cb, &w), &w);
    assert_int_equal(w.r.changed, 1);
    x = get_privacy(f, "alice");
    assert_int_equal(x.status, 0);
    assert_true(x.r.found);
    assert_int_equal(x.r.privacy.online, STORE_VIS_CONTACTS);
    assert_int_equal(x.r.privacy.last_seen, STORE_VIS_NOBODY);
    assert_true(x.r.privacy.invisible);

    p = (struct store_privacy){STORE_VIS_NOBODY, STORE_VIS_EVERYONE, false};
    w = (struct rec){0};
    done(f, store_set_privacy(f->s, f->in, "alice", &p, rec_cb, &w), &w);
    x = get_privacy(f, "alice");
    assert_int_equal(x.r.privacy.online, STORE_VIS_NOBODY);
    assert_int_equal(x.r.privacy.last_seen, STORE_VIS_EVERYONE);
    assert_false(x.r.privacy.invisible);
    x = relations(f, "alice", "bob");
    assert_true(x.r.found);
    assert_int_equal(x.r.privacy.online, STORE_VIS_NOBODY);
}

static void test_defaults_for_unknown_user(void **state)
{
    struct fix *f = *state;
    struct rec x = get_privacy(f, "ghost");

    assert_int_equal(x.status, 0);
    assert_false(x.r.found);
    assert_int_equal(x.r.privacy.online, STORE_VIS_EVERYONE);
    assert_int_equal(x.r.privacy.last_seen, STORE_VIS_EVERYONE);
    assert_false(x.r.privacy.invisible);
    x = relations(f, "ghost", "other");
    assert_false(x.r.found);
    assert_false(x.r.is_contact);
    assert_false(x.r.blocked);
}

static void test_contacts(void **state)
{
    struct fix *f = *state;
    struct rec x = {0};

    assert_int_equal(CONTACTS(store_contacts_add, f, "a", "b", "c", "d").r.changed, 3);
    assert_int_equal(CONTACTS(store_contacts_add, f, "a", "b", "e").r.changed, 1);
    assert_int_equal(CONTACTS(store_contacts_add, f, "a", "f", "f").r.changed, 1);
    assert_true(relations(f, "a", "b").r.is_contact);
    assert_true(relations(f, "a", "e").r.is_contact);
    assert_false(relations(f, "b", "a").r.is_contact); /* directional */
    assert_false(relations(f, "A", "b").r.is_contact); /* case-sensitive */

    assert_int_equal(CONTACTS(store_contacts_remove, f, "a", "c", "zz").r.changed, 1);
    assert_false(relations(f, "a", "c").r.is_contact);
    assert_true(relations(f, "a", "d").r.is_contact);

    /* Replace: 4 rows (b, d, e, f) deleted, 2 inserted. */
    assert_int_equal(CONTACTS(store_contacts_replace, f, "a", "x", "y").r.changed, 6);
    assert_false(relations(f, "a", "b").r.is_contact);
    assert_true(relations(f, "a", "x").r.is_contact);
    assert_true(relations(f, "a", "y").r.is_contact);

    done(f, store_contacts_replace(f->s, f->in, "a", NULL, 0, rec_cb, &x), &x);
    assert_int_equal(x.r.changed, 2);
    assert_false(relations(f, "a", "x").r.is_contact);
    x = (struct rec){0};
    done(f, store_contacts_add(f->s, f->in, "a", NULL, 0, rec_cb, &x), &x);
    assert_int_equal(x.r.changed, 0);
    assert_int_equal(fix_count_contacts(f, NULL), 0);
}

static void test_blocks(void **state)
{
    struct fix *f = *state;
    struct rec x = {0};

    done(f, store_block(f->s, f->in, "a", "b", rec_cb, &x), &x);
    assert_int_equal(x.r.changed, 1);
    x = (struct rec){0};
    done(f, store_block(f->s, f->in, "a", "b", rec_cb, &x), &x);
    assert_int_equal(x.r.changed, 0); /* idempotent */
    assert_true(relations(f, "a", "b").r.blocked);
    assert_false(relations(f, "b", "a").r.blocked);
    assert_false(relations(f, "a", "c").r.blocked);
    x = (struct rec){0};
    done(f, store_unblock(f->s, f->in, "a", "b", rec_cb, &x), &x);
    assert_int_equal(x.r.changed, 1);
    x = (struct rec){0};
    done(f, store_unblock(f->s, f->in, "a", "b", rec_cb, &x), &x);
    assert_int_equal(x.r.changed, 0);
    assert_false(relations(f, "a", "b").r.blocked);
}

/* Collects a list_blockers answer as "id,id," in sorted order. */
struct blockers_rec {
    int calls;
    int status;
    char ids[256];
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void blockers_cb(void *ctx, int status, const struct store_result *r)
{
    struct blockers_rec *x = ctx;
    const char *v[16];

    x->calls++;
    x->status = status;
    x->ids[0] = '\0';
    assert_true(r->nids <= 16);
    for (size_t i = 0; i < r->nids; i++)
        v[i] = r->ids[i];
    qsort(v, r->nids, sizeof(v[0]), cmp_str);
    for (size_t i = 0; i < r->nids; i++) {
        strcat(x->ids, v[i]);
        strcat(x->ids, ",");
    }
}

static const char *blockers(struct fix *f, const char *target)
{
    static struct blockers_rec x;

    x = (struct blockers_rec){0};
    assert_int_equal(store_list_blockers(f->s, f->in, target, blockers_cb, &x), 0);
    wait_all(f->in);
    assert_int_equal(x.calls, 1);
    assert_int_equal(x.status, 0);
    return x.ids;
}

static void test_list_blockers(void **state)
{
    struct fix *f = *state;
    struct rec x = {0};

    assert_string_equal(blockers(f, "v"), "");
    done(f, store_block(f->s, f->in, "u", "v", rec_cb, &x), &x);
    x = (struct rec){0};
    done(f, store_block(f->s, f->in, "a", "v", rec_cb, &x), &x);
    x = (struct rec){0};
    done(f, store_block(f->s, f->in, "v", "u", rec_cb, &x), &x); /* the other way */
    x = (struct rec){0};
    done(f, store_block(f->s, f->in, "u", "w", rec_cb, &x), &x);
    assert_string_equal(blockers(f, "v"), "a,u,");
    assert_string_equal(blockers(f, "u"), "v,");
    assert_string_equal(blockers(f, "nobody"), "");
    x = (struct rec){0};
    done(f, store_unblock(f->s, f->in, "u", "v", rec_cb, &x), &x);
    assert_string_equal(blockers(f, "v"), "a,");
    assert_int_equal(store_list_blockers(f->s, f->in, "bad id", blockers_cb, &x), -EINVAL);
}

/* get_summary: the ids are copied out in the callback (they are the
 * store's until it returns), in the order the store gave them. */
struct summary_rec {
    int calls;
    int status;
    size_t contacts, blocks, nids;
    bool found;
    enum store_visibility online;
    char ids[512];
};

static void summary_cb(void *ctx, int status, const struct store_result *r)
{
    struct summary_rec *x = ctx;

    x->calls++;
    x->status = status;
    x->contacts = r->contacts;
    x->blocks = r->blocks;
    x->nids = r->nids;
    x->found = r->found;
    x->online = r->privacy.online;
    x->ids[0] = '\0';
    for (size_t i = 0; i < r->nids && strlen(x->ids) + strlen(r->ids[i]) + 2 < sizeof(x->ids);
         i++) {
        strcat(x->ids, r->ids[i]);
        strcat(x->ids, ",");
    }
}

static struct summary_rec summary(struct fix *f, const char *owner)
{
    struct summary_rec x = {0};

    assert_int_equal(store_get_summary(f->s, f->in, owner, summary_cb, &x), 0);
    wait_all(f->in);
    assert_int_equal(x.calls, 1);
    assert_int_equal(x.status, 0);
    return x;
}

static void test_summary(void **state)
{
    struct fix *f = *state;
    struct store_privacy p = {.online = STORE_VIS_CONTACTS, .last_seen = STORE_VIS_EVERYONE};
    struct summary_rec x = summary(f, "nobody");
    struct rec w = {0};
    char id[16];

    assert_int_equal(x.contacts, 0);
    assert_int_equal(x.blocks, 0);
    assert_int_equal(x.nids, 0);
    assert_false(x.found);
    assert_int_equal(x.online, STORE_VIS_EVERYONE);
    CONTACTS(store_contacts_replace, f, "u", "c1", "c2", "c3");
    CONTACTS(store_contacts_replace, f, "other", "c9");
    done(f, store_set_privacy(f->s, f->in, "u", &p, rec_cb, &w), &w);
    /* more blocks than the summary lists: the count is all of them */
    for (int i = 0; i < STORE_SUMMARY_BLOCKS_MAX + 5; i++) {
        snprintf(id, sizeof(id), "b%03d", STORE_SUMMARY_BLOCKS_MAX + 4 - i);
        w = (struct rec){0};
        done(f, store_block(f->s, f->in, "u", id, rec_cb, &w), &w);
    }
    w = (struct rec){0};
    done(f, store_block(f->s, f->in, "v", "u", rec_cb, &w), &w); /* the other way */
    x = summary(f, "u");
    assert_int_equal(x.contacts, 3);
    assert_int_equal(x.blocks, STORE_SUMMARY_BLOCKS_MAX + 5);
    assert_int_equal(x.nids, STORE_SUMMARY_BLOCKS_MAX);
    assert_true(x.found);
    assert_int_equal(x.online, STORE_VIS_CONTACTS);
    assert_memory_equal(x.ids, "b000,b001,b002,", 15); /* in id order */
    x = summary(f, "v");
    assert_int_equal(x.blocks, 1);
    assert_string_equal(x.ids, "u,");
    assert_int_equal(store_get_summary(f->s, f->in, "bad id", summary_cb, &x), -EINVAL);
}

/* ---- ordering and threads ---- */

#define ORDER_N 300

struct order {
    size_t next; /* index the next completion must carry */
    struct rec rec[ORDER_N];
};

struct order_ctx {
    struct order *o;
    size_t i;
};

static void order_cb(void *ctx, int status, const struct store_result *r)
{
    struct order_ctx *c = ctx;

    assert_int_equal(c->i, c->o->next);
    c->o->next++;
    rec_cb(&c->o->rec[c->i], status, r);
}

/*
 * Mixed writes and reads in one submission burst: completions must come
 * back in submission order, and every read must see the writes before it.
 */
/* The requests of histogram id counted by m's shard of it. */
static uint64_t observed(struct metrics *m, enum metrics_hist_id id)
{
    uint64_t n = 0;

    for (unsigned b = 0; b <= METRICS_HIST_BOUNDS; b++)
        n += METRIC_GET(&m->hist[id], n[b]);
    return n;
}

/* With store_inbox_observe(), each request counts in store_pending until
 * its callback runs, and its round trip lands in its kind's histogram. */
static void test_round_trips_observed(void **state)
{
    struct fix *f = *state;
    struct metrics *m = calloc(1, sizeof(*m));
    struct store_privacy p = {STORE_VIS_CONTACTS, STORE_VIS_NOBODY, false};
    const char *ids[] = {"bob"};
    struct rec w = {0}, x = {0}, y = {0};

    store_inbox_observe(f->in, m);
    assert_int_equal(store_set_privacy(f->s, f->in, "alice", &p, rec_cb, &w), 0);
    assert_int_equal(store_contacts_add(f->s, f->in, "alice", ids, 1, rec_cb, &x), 0);
    assert_int_equal(store_get_privacy(f->s, f->in, "alice", rec_cb, &y), 0);
    assert_int_equal(METRIC_GET(m, store_pending), 3);
    wait_all(f->in);
    assert_int_equal(w.calls + x.calls + y.calls, 3);
    assert_int_equal(METRIC_GET(m, store_pending), 0);
    assert_int_equal(observed(m, MH_STORE_SET_PRIVACY), 1);
    assert_int_equal(observed(m, MH_STORE_CONTACTS), 1);
    assert_int_equal(observed(m, MH_STORE_GET_PRIVACY), 1);
    assert_int_equal(observed(m, MH_STORE_BLOCK), 0);
    assert_true(METRIC_GET(&m->hist[MH_STORE_GET_PRIVACY], sum_us) < 10000000);
    store_inbox_observe(f->in, NULL);
    free(m);
}

static void test_completion_order(void **state)
{
    struct fix *f = *state;
    struct order *o = xcalloc(1, sizeof(*o));
    struct order_ctx *c = xcalloc(ORDER_N, sizeof(*c));

    for (size_t i = 0; i < ORDER_N; i++) {
        struct store_privacy p = {(enum store_visibility)(i / 3 % 3), STORE_VIS_EVERYONE, i % 2};
        char id[16];
        const char *ids[] = {id};
        int rc;

        c[i] = (struct order_ctx){o, i};
        snprintf(id, sizeof(id), "c%zu", i / 3);
        switch (i % 3) {
        case 0:
            rc = store_set_privacy(f->s, f->in, "u", &p, order_cb, &c[i]);
            break;
        case 1:
            rc = store_contacts_add(f->s, f->in, "u", ids, 1, order_cb, &c[i]);
            break;
        default:
            rc = store_get_relations(f->s, f->in, "u", id, order_cb, &c[i]);
            break;
        }
        assert_int_equal(rc, 0);
    }
    wait_all(f->in);
    assert_int_equal(o->next, ORDER_N);
    for (size_t i = 2; i < ORDER_N; i += 3) {
        const struct rec *x = &o->rec[i];

        assert_int_equal(x->status, 0);
        assert_true(x->r.is_contact);
        assert_int_equal(x->r.privacy.online, i / 3 % 3);
        assert_int_equal(x->r.privacy.invisible, (i - 2) % 2);
    }
    free(c);
    free(o);
}

#define THREADS    6
#define THREAD_OPS 150

struct worker {
    struct store *s;
    char user[16];
    size_t next; /* expected index of the next completion */
    size_t bad;  /* out-of-order or failed completions */
    struct store_inbox *in;
};

struct worker_ctx {
    struct worker *w;
    size_t i;
};

static void worker_cb(void *ctx, int status, const struct store_result *r)
{
    struct worker_ctx *c = ctx;
    struct worker *w = c->w;

    /* Odd ops read back the contact the even op just before added. */
    if (status != 0 || c->i != w->next || (c->i % 2 && !r->is_contact))
        w->bad++;
    w->next++;
    free(c);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    w->in = store_inbox_new();
    for (size_t i = 0; i < THREAD_OPS; i++) {
        struct worker_ctx *c = xmalloc(sizeof(*c));
        char id[16];
        const char *ids[] = {id};

        *c = (struct worker_ctx){w, i};
        snprintf(id, sizeof(id), "c%zu", i / 2);
        if (i % 2 == 0)
            store_contacts_add(w->s, w->in, w->user, ids, 1, worker_cb, c);
        else
            store_get_relations(w->s, w->in, w->user, id, worker_cb, c);
        if (i % 16 == 0)
            store_inbox_drain(w->in); /* interleave like a busy loop */
    }
    while (store_inbox_pending(w->in) > 0) {
        struct pollfd p = {.fd = store_inbox_fd(w->in), .events = POLLIN};

        if (poll(&p, 1, WAIT_MS) != 1)
            break;
        store_inbox_drain(w->in);
    }
    return NULL;
}

static void test_many_threads(void **state)
{
    struct fix *f = *state;
    struct worker *w = xcalloc(THREADS, sizeof(*w));
    pthread_t t[THREADS];

    for (int k = 0; k < THREADS; k++) {
        w[k].s = f->s;
        snprintf(w[k].user, sizeof(w[k].user), "t%d", k);
        assert_int_equal(pthread_create(&t[k], NULL, worker_main, &w[k]), 0);
    }
    for (int k = 0; k < THREADS; k++) {
        pthread_join(t[k], NULL);
        assert_int_equal(w[k].next, THREAD_OPS);
        assert_int_equal(w[k].bad, 0);
        assert_int_equal(store_inbox_pending(w[k].in), 0);
        store_inbox_free(w[k].in);
    }
    for (int k = 0; k < THREADS; k++)
        assert_true(relations(f, w[k].user, "c74").r.is_contact);
    free(w);
}

#define BURST_N 100

/*
 * Group commit: writes queued while the database thread is busy share a
 * transaction. A big write first (STORE_IDS_MAX contacts) keeps the thread
 * busy while BURST_N - 1 small ones queue behind it: they commit in a few
 * transactions, not one each. (test_store_pg.c's test_group_commit pins
 * the count to exactly two with a table lock.)
 */
static void test_burst_shares_transactions(void **state)
{
    struct fix *f = *state;
    const char **big = xcalloc(STORE_IDS_MAX, sizeof(*big));
    char *buf = xcalloc(STORE_IDS_MAX, 16);
    struct rec *x = xcalloc(BURST_N, sizeof(*x));
    long before = fix_commits(f, "grp"), commits;

    for (size_t i = 0; i < STORE_IDS_MAX; i++) {
        snprintf(buf + 16 * i, 16, "b%zu", i);
        big[i] = buf + 16 * i;
    }
    assert_int_equal(store_contacts_replace(f->s, f->in, "grp", big, STORE_IDS_MAX, rec_cb, &x[0]),
                     0);
    for (int i = 1; i < BURST_N; i++) {
        char id[16];
        const char *ids[] = {id};

        snprintf(id, sizeof(id), "g%d", i);
        assert_int_equal(store_contacts_add(f->s, f->in, "grp", ids, 1, rec_cb, &x[i]), 0);
    }
    wait_all(f->in);
    for (int i = 0; i < BURST_N; i++)
        assert_int_equal(x[i].status, 0);
    commits = fix_commits(f, "grp") - before;
    if (commits < 1 || commits > 3)
        fail_msg("%d writes committed in %ld transactions", BURST_N, commits);
    assert_int_equal(fix_count_contacts(f, "grp"), STORE_IDS_MAX + BURST_N - 1);
    free(x);
    free(buf);
    free(big);
}

/* ---- lifetime ---- */

static void test_reopen_keeps_everything(void **state)
{
    struct fix *f = *state;
    struct store_privacy p = {STORE_VIS_NOBODY, STORE_VIS_CONTACTS, true};
    struct rec x = {0};

    done(f, store_set_privacy(f->s, f->in, "alice", &p, rec_cb, &x), &x);
    CONTACTS(store_contacts_add, f, "alice", "bob", "carol");
    x = (struct rec){0};
    done(f, store_block(f->s, f->in, "alice", "mallory", rec_cb, &x), &x);
    reopen(f);
    x = relations(f, "alice", "bob");
    assert_true(x.r.found);
    assert_true(x.r.is_contact);
    assert_int_equal(x.r.privacy.online, STORE_VIS_NOBODY);
    assert_int_equal(x.r.privacy.last_seen, STORE_VIS_CONTACTS);
    assert_true(x.r.privacy.invisible);
    assert_true(relations(f, "alice", "mallory").r.blocked);
    assert_false(relations(f, "alice", "mallory").r.is_contact);
}

/* Close runs what was queued: completions wait in the inbox, all durable. */
static void test_close_drains_queue(void **state)
{
    struct fix *f = *state;
    struct rec x[50] = {{0}};

    for (int i = 0; i < 50; i++) {
        char id[16];
        const char *ids[] = {id};

        snprintf(id, sizeof(id), "c%d", i);
        assert_int_equal(store_contacts_add(f->s, f->in, "o", ids, 1, rec_cb, &x[i]), 0);
    }
    store_close(f->s);
    f->s = NULL;
    assert_int_equal(store_inbox_drain(f->in), 50);
    for (int i = 0; i < 50; i++) {
        assert_int_equal(x[i].calls, 1);
        assert_int_equal(x[i].status, 0);
    }
    f->s = open_or_fail(fix_spec(f));
    assert_true(relations(f, "o", "c49").r.is_contact);
}

/* ---- validation ---- */

static void test_invalid_ids_rejected(void **state)
{
    struct fix *f = *state;
    struct store_privacy p = {0};
    struct rec x = {0};
    char long_id[STORE_ID_MAX + 2];
    const char *bad[] = {"", "a b", "a/b", "\xc3\xa9", "a\"b", "a\nb", "%", "a,b", "a'b", "{a}"};

    memset(long_id, 'a', sizeof(long_id));
    long_id[STORE_ID_MAX + 1] = '\0';
    assert_false(store_id_is_valid(long_id));
    assert_int_equal(store_get_privacy(f->s, f->in, long_id, rec_cb, &x), -EINVAL);
    long_id[STORE_ID_MAX] = '\0';
    assert_true(store_id_is_valid(long_id));
    assert_true(store_id_is_valid("Az09-_.~:@"));
    assert_false(store_id_is_valid(NULL));
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        const char *ids[] = {"ok", bad[i]};

        assert_false(store_id_is_valid(bad[i]));
        assert_int_equal(store_get_privacy(f->s, f->in, bad[i], rec_cb, &x), -EINVAL);
        assert_int_equal(store_set_privacy(f->s, f->in, bad[i], &p, rec_cb, &x), -EINVAL);
        assert_int_equal(store_block(f->s, f->in, "a", bad[i], rec_cb, &x), -EINVAL);
        assert_int_equal(store_unblock(f->s, f->in, bad[i], "a", rec_cb, &x), -EINVAL);
        assert_int_equal(store_get_relations(f->s, f->in, "a", bad[i], rec_cb, &x), -EINVAL);
        assert_int_equal(store_contacts_add(f->s, f->in, "a", ids, 2, rec_cb, &x), -EINVAL);
        assert_int_equal(store_contacts_remove(f->s, f->in, bad[i], ids, 1, rec_cb, &x), -EINVAL);
        assert_int_equal(store_contacts_replace(f->s, f->in, "a", ids, 2, rec_cb, &x), -EINVAL);
    }
    p.online = (enum store_visibility)3;
    assert_int_equal(store_set_privacy(f->s, f->in, "a", &p, rec_cb, &x), -EINVAL);
    p = (struct store_privacy){.last_seen = (enum store_visibility) - 1};
    assert_int_equal(store_set_privacy(f->s, f->in, "a", &p, rec_cb, &x), -EINVAL);
    assert_int_equal(store_set_privacy(f->s, f->in, "a", NULL, rec_cb, &x), -EINVAL);
    assert_int_equal(store_inbox_pending(f->in), 0);
    assert_int_equal(x.calls, 0); /* a failing call never fires its callback */
    assert_int_equal(fix_count_contacts(f, NULL), 0);
}

/* STORE_IDS_MAX ids in one call work; one more is refused before queuing. */
static void test_ids_limit(void **state)
{
    struct fix *f = *state;
    const char **ids = xcalloc(STORE_IDS_MAX + 1, sizeof(*ids));
    char *buf = xcalloc(STORE_IDS_MAX + 1, STORE_ID_MAX + 1);
    struct rec x = {0};

    /* Long ids too: odd ones are STORE_ID_MAX bytes, 1.3 MB in all. */
    for (size_t i = 0; i <= STORE_IDS_MAX; i++) {
        char *id = buf + i * (STORE_ID_MAX + 1);

        memset(id, 'x', STORE_ID_MAX);
        snprintf(id, 8, "i%zu", i);
        id[strlen(id)] = i % 2 ? 'x' : '\0';
        ids[i] = id;
    }
    assert_int_equal(store_contacts_replace(f->s, f->in, "big", ids, STORE_IDS_MAX + 1, rec_cb, &x),
                     -E2BIG);
    assert_int_equal(store_contacts_add(f->s, f->in, "big", ids, STORE_IDS_MAX + 1, rec_cb, &x),
                     -E2BIG);
    assert_int_equal(store_contacts_remove(f->s, f->in, "big", ids, STORE_IDS_MAX + 1, rec_cb, &x),
                     -E2BIG);
    assert_int_equal(x.calls, 0);
    done(f, store_contacts_replace(f->s, f->in, "big", ids, STORE_IDS_MAX, rec_cb, &x), &x);
    assert_int_equal(x.r.changed, STORE_IDS_MAX);
    assert_true(relations(f, "big", ids[STORE_IDS_MAX - 1]).r.is_contact);
    assert_true(relations(f, "big", ids[0]).r.is_contact);
    assert_false(relations(f, "big", ids[STORE_IDS_MAX]).r.is_contact);
    x = (struct rec){0};
    done(f, store_contacts_add(f->s, f->in, "big", ids, STORE_IDS_MAX, rec_cb, &x), &x);
    assert_int_equal(x.r.changed, 0);
    x = (struct rec){0};
    done(f, store_contacts_remove(f->s, f->in, "big", ids + 1, STORE_IDS_MAX, rec_cb, &x), &x);
    assert_int_equal(x.r.changed, STORE_IDS_MAX - 1);
    assert_int_equal(fix_count_contacts(f, "big"), 1);
    free(buf);
    free(ids);
}

/* ---- lifetime ---- */

/* Undrained completions are dropped by store_inbox_free without callbacks. */
static void test_inbox_free_drops_undrained(void **state)
{
    struct fix *f = *state;
    struct store_inbox *in = store_inbox_new();
    struct rec x = {0};

    assert_int_equal(store_get_privacy(f->s, in, "a", rec_cb, &x), 0);
    store_close(f->s);
    f->s = open_or_fail(fix_spec(f));
    assert_int_equal(store_inbox_pending(in), 1);
    store_inbox_free(in);
    assert_int_equal(x.calls, 0);
}

/* ---- last seen ---- */

/* What one lastseen completion saw, copied out of the borrowed answer. */
struct seen_rec {
    int calls;
    int status;
    size_t n;
    struct store_lastseen *seen; /* users xstrdup'd; seen_rec_free() */
};

static void seen_cb(void *ctx, int status, const struct store_result *r)
{
    struct seen_rec *x = ctx;

    x->calls++;
    x->status = status;
    x->n = r->nseen;
    x->seen = xcalloc(r->nseen ? r->nseen : 1, sizeof(*x->seen));
    for (size_t i = 0; i < r->nseen; i++) {
        x->seen[i].user = xstrdup(r->seen[i].user);
        x->seen[i].last_seen_ms = r->seen[i].last_seen_ms;
    }
}

static void seen_rec_free(struct seen_rec *x)
{
    for (size_t i = 0; i < x->n; i++)
        free((char *)x->seen[i].user);
    free(x->seen);
    *x = (struct seen_rec){0};
}

/* One lastseen_write, whatever its status. */
static struct rec lastseen_write_any(struct fix *f, const struct store_lastseen *pairs, size_t n)
{
    struct rec x = {0};

    assert_int_equal(store_lastseen_write(f->s, f->in, pairs, n, rec_cb, &x), 0);
    wait_all(f->in);
    assert_int_equal(x.calls, 1);
    return x;
}

/* One lastseen_write, which must succeed; returns rows changed. */
static size_t lastseen_write(struct fix *f, const struct store_lastseen *pairs, size_t n)
{
    struct rec x = lastseen_write_any(f, pairs, n);

    assert_int_equal(x.status, 0);
    return x.r.changed;
}

#define LS_PAIRS(...)    ((const struct store_lastseen[]){__VA_ARGS__})
#define LS_COUNT(...)    (sizeof(LS_PAIRS(__VA_ARGS__)) / sizeof(struct store_lastseen))
#define LS_WRITE(f, ...) lastseen_write(f, LS_PAIRS(__VA_ARGS__), LS_COUNT(__VA_ARGS__))

/* lastseen_read of n users, whatever its status; free with seen_rec_free(). */
static struct seen_rec lastseen_read_any(struct fix *f, const char *const *users, size_t n)
{
    struct seen_rec x = {0};

    assert_int_equal(store_lastseen_read(f->s, f->in, users, n, seen_cb, &x), 0);
    wait_all(f->in);
    assert_int_equal(x.calls, 1);
    return x;
}

/* The stored last seen of user (0: never seen); the read must succeed. */
static int64_t lastseen_get(struct fix *f, const char *user)
{
    struct seen_rec x = lastseen_read_any(f, &user, 1);
    int64_t ms;

    assert_int_equal(x.status, 0);
    assert_int_equal(x.n, 1);
    assert_string_equal(x.seen[0].user, user);
    ms = x.seen[0].last_seen_ms;
    seen_rec_free(&x);
    return ms;
}

/* One lastseen_load page, which must succeed; free with seen_rec_free(). */
static struct seen_rec lastseen_page(struct fix *f, const char *after, int64_t since, size_t limit)
{
    struct seen_rec x = {0};

    assert_int_equal(store_lastseen_load(f->s, f->in, after, since, limit, seen_cb, &x), 0);
    wait_all(f->in);
    assert_int_equal(x.calls, 1);
    assert_int_equal(x.status, 0);
    return x;
}

#define T0 1764406800000LL /* a wall time in ms: 2025-11-29 09:00 UTC */

/*
 * A batch is durable once its callback ran: a store opened again reads
 * it back, one answer per user in the order asked, 0 for users never
 * seen (also a user asked twice, and one seen by nobody at all).
 */
static void test_lastseen_durable_after_completion(void **state)
{
    struct fix *f = *state;
    const char *users[] = {"bob", "ghost", "alice", "bob"};
    struct seen_rec x;

    assert_int_equal(LS_WRITE(f, {"alice", T0}, {"bob", T0 + 1500}), 2);
    reopen(f);
    x = lastseen_read_any(f, users, ARRAY_SIZE(users));
    assert_int_equal(x.status, 0);
    assert_int_equal(x.n, ARRAY_SIZE(users));
    for (size_t i = 0; i < ARRAY_SIZE(users); i++)
        assert_string_equal(x.seen[i].user, users[i]);
    assert_int_equal(x.seen[0].last_seen_ms, T0 + 1500);
    assert_int_equal(x.seen[1].last_seen_ms, 0);
    assert_int_equal(x.seen[2].last_seen_ms, T0);
    assert_int_equal(x.seen[3].last_seen_ms, T0 + 1500);
    seen_rec_free(&x);
    assert_int_equal(fix_count_lastseen(f), 2);
    /* Last seen is its own table: no privacy row appeared for them. */
    assert_false(get_privacy(f, "alice").r.found);
}

/*
 * The max wins: an older time changes nothing (changed 0), also after a
 * restart and also inside one batch; a newer one moves it forward.
 */
static void test_lastseen_max_wins(void **state)
{
    struct fix *f = *state;

    assert_int_equal(LS_WRITE(f, {"u", T0 + 5000}), 1);
    assert_int_equal(LS_WRITE(f, {"u", T0 + 3000}), 0);
    assert_int_equal(lastseen_get(f, "u"), T0 + 5000);
    assert_int_equal(LS_WRITE(f, {"u", T0 + 5000}), 0); /* the same time again */
    assert_int_equal(LS_WRITE(f, {"u", T0 + 7000}), 1);
    assert_int_equal(lastseen_get(f, "u"), T0 + 7000);

    /* A user twice in one batch keeps the larger time, in either order. */
    assert_int_equal(LS_WRITE(f, {"v", T0 + 9000}, {"w", T0 + 1}, {"v", T0 + 8000}, {"w", T0 + 2}),
                     2); /* one row each */
    assert_int_equal(lastseen_get(f, "v"), T0 + 9000);
    assert_int_equal(lastseen_get(f, "w"), T0 + 2);
    assert_int_equal(LS_WRITE(f, {"u", T0 + 10}, {"u", T0 + 20}), 0);
    assert_int_equal(lastseen_get(f, "u"), T0 + 7000);

    /* A resent, partly stale batch after a restart: only news moves. */
    reopen(f);
    assert_int_equal(LS_WRITE(f, {"u", T0 + 6000}, {"v", T0 + 9500}, {"w", T0}), 1);
    assert_int_equal(lastseen_get(f, "u"), T0 + 7000);
    assert_int_equal(lastseen_get(f, "v"), T0 + 9500);
    assert_int_equal(lastseen_get(f, "w"), T0 + 2);
    assert_int_equal(fix_count_lastseen(f), 3);
}

/* Fills n pairs with distinct ids (every third one STORE_ID_MAX bytes
 * long) in buf (n * (STORE_ID_MAX + 1) bytes), time T0 + i. */
static void lastseen_fill(struct store_lastseen *pairs, char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *id = buf + i * (STORE_ID_MAX + 1);

        snprintf(id, STORE_ID_MAX + 1, "ls%zu", i);
        if (i % 3 == 0) {
            size_t k = strlen(id);

            memset(id + k, 'z', STORE_ID_MAX - k);
            id[STORE_ID_MAX] = '\0';
        }
        pairs[i] = (struct store_lastseen){id, T0 + (int64_t)i};
    }
}

/*
 * STORE_IDS_MAX pairs are one request, committed in one transaction and
 * read back in one call; one pair more is refused before queuing.
 */
static void test_lastseen_large_batch_one_transaction(void **state)
{
    struct fix *f = *state;
    struct store_lastseen *pairs = xcalloc(STORE_IDS_MAX + 1, sizeof(*pairs));
    char *buf = xcalloc(STORE_IDS_MAX + 1, STORE_ID_MAX + 1);
    const char **users = xcalloc(STORE_IDS_MAX, sizeof(*users));
    struct rec x = {0};
    struct seen_rec y;
    long before;

    lastseen_fill(pairs, buf, STORE_IDS_MAX + 1);
    assert_int_equal(store_lastseen_write(f->s, f->in, pairs, STORE_IDS_MAX + 1, rec_cb, &x),
                     -E2BIG);
    assert_int_equal(store_inbox_pending(f->in), 0);
    before = fix_lastseen_commits(f);
    assert_int_equal(lastseen_write(f, pairs, STORE_IDS_MAX), STORE_IDS_MAX);
    assert_int_equal(fix_lastseen_commits(f) - before, 1);
    assert_int_equal(fix_count_lastseen(f), STORE_IDS_MAX);

    for (size_t i = 0; i < STORE_IDS_MAX; i++)
        users[i] = pairs[STORE_IDS_MAX - i].user; /* reversed, and one never written */
    y = lastseen_read_any(f, users, STORE_IDS_MAX);
    assert_int_equal(y.status, 0);
    assert_int_equal(y.n, STORE_IDS_MAX);
    assert_int_equal(y.seen[0].last_seen_ms, 0);
    for (size_t i = 1; i < STORE_IDS_MAX; i++) {
        assert_string_equal(y.seen[i].user, users[i]);
        assert_int_equal(y.seen[i].last_seen_ms, T0 + (int64_t)(STORE_IDS_MAX - i));
    }
    seen_rec_free(&y);
    assert_int_equal(store_lastseen_read(f->s, f->in, users, STORE_IDS_MAX + 1, seen_cb, &y),
                     -E2BIG);

    /* The same batch again, older by 1 ms: nothing moves. */
    for (size_t i = 0; i < STORE_IDS_MAX; i++)
        pairs[i].last_seen_ms--;
    assert_int_equal(lastseen_write(f, pairs, STORE_IDS_MAX), 0);
    assert_int_equal(lastseen_get(f, pairs[0].user), T0);
    free(users);
    free(buf);
    free(pairs);
}

/*
 * A batch with one invalid pair is refused whole, before queuing: no
 * callback, nothing written, whichever pair is bad. So are bad reads and
 * loads. An empty batch is a no-op write.
 */
static void test_lastseen_invalid_batch_refused_whole(void **state)
{
    struct fix *f = *state;
    const char *bad_ids[] = {"", "a b", "a/b", "\xc3\xa9", "a'b", NULL};
    const int64_t bad_ms[] = {0, -1, INT64_MIN};
    struct rec x = {0};
    struct seen_rec y = {0};

    for (size_t i = 0; i < ARRAY_SIZE(bad_ids); i++) {
        struct store_lastseen p[] = {{"ok1", T0}, {bad_ids[i], T0}, {"ok2", T0}};
        const char *users[] = {"ok1", bad_ids[i]};

        assert_int_equal(store_lastseen_write(f->s, f->in, p, 3, rec_cb, &x), -EINVAL);
        assert_int_equal(store_lastseen_read(f->s, f->in, users, 2, seen_cb, &y), -EINVAL);
        if (bad_ids[i])
            assert_int_equal(store_lastseen_load(f->s, f->in, bad_ids[i][0] ? bad_ids[i] : "a b", 0,
                                                 10, seen_cb, &y),
                             -EINVAL);
    }
    for (size_t i = 0; i < ARRAY_SIZE(bad_ms); i++) {
        struct store_lastseen p[] = {{"ok1", T0}, {"ok2", bad_ms[i]}};

        assert_int_equal(store_lastseen_write(f->s, f->in, p, 2, rec_cb, &x), -EINVAL);
    }
    assert_int_equal(store_lastseen_read(f->s, f->in, NULL, 0, seen_cb, &y), -EINVAL);
    assert_int_equal(store_lastseen_load(f->s, f->in, NULL, 0, 0, seen_cb, &y), -EINVAL);
    assert_int_equal(store_lastseen_load(f->s, f->in, NULL, 0, STORE_IDS_MAX + 1, seen_cb, &y),
                     -EINVAL);
    assert_int_equal(store_lastseen_load(f->s, f->in, NULL, -1, 10, seen_cb, &y), -EINVAL);
    assert_int_equal(store_inbox_pending(f->in), 0);
    assert_int_equal(x.calls, 0); /* a failing call never fires its callback */
    assert_int_equal(y.calls, 0);
    assert_int_equal(fix_count_lastseen(f), 0);

    assert_int_equal(lastseen_write(f, NULL, 0), 0);
    assert_int_equal(fix_count_lastseen(f), 0);
}

/*
 * A batch the database refuses in part fails whole (one transaction:
 * nothing of it is written), and fails alone: writes queued beside it
 * commit, and the same batch without the bad pair goes through.
 */
static void test_lastseen_refused_batch_writes_nothing(void **state)
{
    struct fix *f = *state;
    const struct store_lastseen bad[] = {{"ok1", T0}, {"forbidden", T0}, {"ok2", T0}};
    struct store_privacy p = {STORE_VIS_CONTACTS, STORE_VIS_NOBODY, false};
    struct rec x[3] = {{0}};

    fix_forbid_lastseen(f, "forbidden");
    assert_int_equal(LS_WRITE(f, {"ok0", T0}), 1);
    assert_int_equal(store_set_privacy(f->s, f->in, "alice", &p, rec_cb, &x[0]), 0);
    assert_int_equal(store_lastseen_write(f->s, f->in, bad, 3, rec_cb, &x[1]), 0);
    assert_int_equal(store_lastseen_write(f->s, f->in, bad + 2, 1, rec_cb, &x[2]), 0);
    wait_all(f->in);
    assert_int_equal(x[0].status, 0);
    assert_int_equal(x[1].status, STORE_E_SCHEMA);
    assert_int_equal(x[1].r.changed, 0);
    assert_int_equal(x[2].status, 0);
    assert_int_equal(lastseen_get(f, "ok1"), 0);
    assert_int_equal(lastseen_get(f, "forbidden"), 0);
    assert_int_equal(lastseen_get(f, "ok2"), T0);
    assert_true(get_privacy(f, "alice").r.found);
    assert_int_equal(fix_count_lastseen(f), 2);
    assert_int_equal(LS_WRITE(f, {"ok1", T0 + 1}, {"ok2", T0 + 1}), 2);
    assert_int_equal(lastseen_get(f, "ok1"), T0 + 1);
}

/*
 * Loading at start: pages in byte order of user id (upper case before
 * lower), each after the last user of the previous one, only rows at or
 * after since; the last page is the short one.
 */
static void test_lastseen_load_pages(void **state)
{
    struct fix *f = *state;
    struct store_lastseen pairs[25];
    char ids[25][8];
    char last[STORE_ID_MAX + 1] = "";
    size_t total = 0, pages = 0;
    struct seen_rec x;

    x = lastseen_page(f, NULL, 0, 10); /* an empty table */
    assert_int_equal(x.n, 0);
    seen_rec_free(&x);
    for (size_t i = 0; i < 25; i++) {
        snprintf(ids[i], sizeof(ids[i]), "%c%02zu", i % 2 ? 'u' : 'U', 24 - i);
        pairs[i] = (struct store_lastseen){ids[i], T0 + (int64_t)i * 1000};
    }
    assert_int_equal(lastseen_write(f, pairs, 25), 25);
    do {
        x = lastseen_page(f, pages ? last : "", 0, 10);
        for (size_t i = 0; i < x.n; i++) {
            assert_true(strcmp(x.seen[i].user, last) > 0); /* strictly ascending */
            assert_true(x.seen[i].last_seen_ms >= T0);
            snprintf(last, sizeof(last), "%s", x.seen[i].user);
        }
        total += x.n;
        pages++;
        if (pages == 1)
            assert_string_equal(x.seen[0].user, "U00");
        seen_rec_free(&x);
    } while (total < 25 && pages < 10);
    assert_int_equal(total, 25);
    assert_int_equal(pages, 3);
    assert_string_equal(last, "u23");
    x = lastseen_page(f, last, 0, 10);
    assert_int_equal(x.n, 0);
    seen_rec_free(&x);

    /* Only the 5 newest: i = 20..24. */
    x = lastseen_page(f, NULL, T0 + 20000, STORE_IDS_MAX);
    assert_int_equal(x.n, 5);
    for (size_t i = 0; i < x.n; i++)
        assert_true(x.seen[i].last_seen_ms >= T0 + 20000);
    assert_string_equal(x.seen[0].user, "U00");
    seen_rec_free(&x);
}

/*
 * A version 1 database (no last-seen table) is migrated on open: the
 * version becomes STORE_SCHEMA_VERSION, what was there stays, and last
 * seen works.
 */
static void test_lastseen_migrates_version_1(void **state)
{
    struct fix *f = *state;

    CONTACTS(store_contacts_add, f, "alice", "bob");
    store_close(f->s);
    f->s = NULL;
    fix_drop_lastseen(f);
    fix_set_schema_version(f, 1);
    f->s = open_or_fail(fix_spec(f));
    assert_int_equal(fix_schema_version(f), STORE_SCHEMA_VERSION);
    assert_true(relations(f, "alice", "bob").r.is_contact);
    assert_int_equal(lastseen_get(f, "alice"), 0);
    assert_int_equal(LS_WRITE(f, {"alice", T0}), 1);
    reopen(f);
    assert_int_equal(lastseen_get(f, "alice"), T0);
}

/* ---- failures ---- */

/* One failing write in a group fails alone; its neighbours commit. */
static void test_failing_write_alone(void **state)
{
    struct fix *f = *state;
    const char *ids[] = {"ok1", "forbidden", "ok2"};
    struct rec x[3] = {{0}};

    fix_forbid_contact(f, "forbidden");
    for (int i = 0; i < 3; i++)
        assert_int_equal(store_contacts_add(f->s, f->in, "o", &ids[i], 1, rec_cb, &x[i]), 0);
    wait_all(f->in);
    assert_int_equal(x[0].status, 0);
    assert_int_equal(x[1].status, STORE_E_SCHEMA);
    assert_int_equal(x[1].r.changed, 0);
    assert_int_equal(x[2].status, 0);
    assert_true(relations(f, "o", "ok1").r.is_contact);
    assert_false(relations(f, "o", "forbidden").r.is_contact);
    assert_true(relations(f, "o", "ok2").r.is_contact);
}

/* The fixture's open stamped the version; a second open accepts it. */
static void test_schema_created_then_accepted(void **state)
{
    struct fix *f = *state;

    assert_int_equal(fix_schema_version(f), STORE_SCHEMA_VERSION);
    CONTACTS(store_contacts_add, f, "s", "t");
    reopen(f);
    assert_int_equal(fix_schema_version(f), STORE_SCHEMA_VERSION);
    assert_true(relations(f, "s", "t").r.is_contact);
}

/* A schema from a later release is refused, and left alone. */
static void test_newer_schema_refused(void **state)
{
    struct fix *f = *state;
    char err[STORE_ERR_LEN] = "";
    struct store *s = NULL;

    store_close(f->s);
    f->s = NULL;
    fix_set_schema_version(f, 99);
    assert_int_equal(store_open_status(fix_spec(f), err, sizeof(err), &s), STORE_E_SCHEMA);
    assert_null(s);
    assert_non_null(strstr(err, "newer"));
    err[0] = '\0';
    assert_null(store_open(fix_spec(f), err, sizeof(err)));
    assert_non_null(strstr(err, "newer"));
    assert_int_equal(fix_schema_version(f), 99);
}

/* Our version with a column renamed: refused as a schema error naming it. */
static void test_damaged_schema_refused(void **state)
{
    struct fix *f = *state;
    char err[STORE_ERR_LEN] = "";
    struct store *s = NULL;

    store_close(f->s);
    f->s = NULL;
    fix_damage_schema(f);
    assert_int_equal(store_open_status(fix_spec(f), err, sizeof(err), &s), STORE_E_SCHEMA);
    assert_null(s);
    assert_non_null(strstr(err, "blocked"));
}

/* One privacy write of user; returns its status, whatever it is. */
static int set_privacy_status(struct fix *f, const char *user)
{
    struct store_privacy p = {STORE_VIS_NOBODY, STORE_VIS_NOBODY, true};
    struct rec x = {0};

    assert_int_equal(store_set_privacy(f->s, f->in, user, &p, rec_cb, &x), 0);
    wait_all(f->in);
    assert_int_equal(x.calls, 1);
    return x.status;
}

/*
 * The database destroyed under a running store: no later write is
 * acknowledged (it could not be found after a restart), and a store opened
 * again has none of them.
 */
static void test_destroyed_database_refuses_writes(void **state)
{
    struct fix *f = *state;

    assert_true(store_is_healthy(f->s));
    assert_int_equal(store_fault(f->s), 0);
    assert_int_equal(set_privacy_status(f, "before"), 0);
    fix_destroy(f);
    assert_int_not_equal(set_privacy_status(f, "after"), 0);
    assert_int_not_equal(set_privacy_status(f, "after2"), 0);
    assert_int_not_equal(lastseen_write_any(f, LS_PAIRS({"after", T0}), 1).status, 0);
    reopen(f);
    assert_true(store_is_healthy(f->s));
    assert_false(get_privacy(f, "after").r.found);
    assert_false(get_privacy(f, "after2").r.found);
    assert_int_equal(lastseen_get(f, "after"), 0);
}

static void test_strerror(void **state)
{
    const int codes[] = {STORE_E_IO,   STORE_E_CORRUPT, STORE_E_READONLY,
                         STORE_E_FULL, STORE_E_BUSY,    STORE_E_SCHEMA,
                         STORE_E_GONE, -EINVAL,         -E2BIG};

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(codes); i++)
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(store_strerror(codes[i]), store_strerror(codes[j]));
    assert_non_null(store_strerror(12345));
}

/* ---- durability under SIGKILL ---- */

#define DUR_N      200 /* numbered writes per round */
#define DUR_SEEN   4   /* every DUR_SEEN-th write is followed by a last-seen batch */
#define DUR_ROUNDS 5

static int dur_pipe = -1; /* the child's write end */

static void dur_ack_cb(void *ctx, int status, const struct store_result *r)
{
    char line[32];
    int n;

    (void)r;
    if (status != 0)
        return;
    n = snprintf(line, sizeof(line), "acked %d\n", (int)(intptr_t)ctx);
    /* One write per line: below PIPE_BUF, so lines never interleave. */
    if (write(dur_pipe, line, (size_t)n) != n)
        _exit(3);
}

/*
 * The child: opens its own store on spec and submits DUR_N contact
 * additions for owner (acknowledged as "acked <i>"), each DUR_SEEN-th
 * followed by a last-seen batch of owner and "dur-all" at T0 + i ("acked
 * <DUR_N + i>"), draining completions as it goes so that group commits of
 * varying sizes happen, then waits to be killed.
 */
static void dur_child(const char *spec, const char *owner, unsigned seed)
{
    char err[STORE_ERR_LEN];
    struct store *s = store_open(spec, err, sizeof(err));
    struct store_inbox *in = store_inbox_new();

    if (!s)
        _exit(2);
    srand(seed);
    for (int i = 0; i < DUR_N; i++) {
        char id[16];
        const char *ids[] = {id};

        snprintf(id, sizeof(id), "c%d", i);
        if (store_contacts_add(s, in, owner, ids, 1, dur_ack_cb, (void *)(intptr_t)i) != 0)
            _exit(4);
        if (i % DUR_SEEN == 0) {
            struct store_lastseen p[] = {{owner, T0 + i}, {"dur-all", T0 + i}};

            if (store_lastseen_write(s, in, p, 2, dur_ack_cb, (void *)(intptr_t)(DUR_N + i)))
                _exit(4);
        }
        if (rand() % 4 == 0)
            usleep((useconds_t)(rand() % 3000));
        store_inbox_drain(in);
    }
    for (;;) {
        struct pollfd p = {.fd = store_inbox_fd(in), .events = POLLIN};

        poll(&p, 1, 1000);
        store_inbox_drain(in);
    }
}

/* Reads "acked <i>" lines from fd into acked; returns false at EOF. */
static bool dur_read(int fd, bool *acked, int *count, char *pend, size_t *plen)
{
    char buf[512];
    ssize_t n = read(fd, buf, sizeof(buf));
    char *nl;

    if (n <= 0)
        return n < 0 && errno == EINTR;
    assert_true(*plen + (size_t)n < 1024);
    memcpy(pend + *plen, buf, (size_t)n);
    *plen += (size_t)n;
    pend[*plen] = '\0';
    while ((nl = strchr(pend, '\n'))) {
        int i;

        *nl = '\0';
        i = atoi(pend + strlen("acked "));
        assert_true(strncmp(pend, "acked ", 6) == 0 && i >= 0 && i < 2 * DUR_N);
        if (!acked[i]) {
            acked[i] = true;
            (*count)++;
        }
        *plen -= (size_t)(nl + 1 - pend);
        memmove(pend, nl + 1, *plen + 1);
    }
    return true;
}

/* One round: returns how many writes were acknowledged before the kill. */
static int dur_round(const char *spec, const char *owner, unsigned seed, bool *acked)
{
    int fds[2], count = 0, status, kill_at;
    char pend[1024];
    size_t plen = 0;
    bool killed = false;
    pid_t pid;

    srand(seed);
    kill_at = rand() % DUR_N; /* acks to see before the kill; 0 = at once */
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dur_pipe = fds[1];
        dur_child(spec, owner, seed);
    }
    close(fds[1]);
    if (kill_at == 0) {
        usleep((useconds_t)(rand() % 20000));
        kill(pid, SIGKILL);
        killed = true;
    }
    for (;;) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};

        if (poll(&p, 1, WAIT_MS) != 1) {
            kill(pid, SIGKILL);
            fail_msg("durability child stalled at %d acks", count);
        }
        if (!dur_read(fds[0], acked, &count, pend, &plen))
            break; /* EOF: the child is dead and every ack is read */
        if (!killed && count >= kill_at) {
            kill(pid, SIGKILL);
            killed = true;
        }
    }
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    return count;
}

/*
 * The body of a kill -9 test on the empty database at spec: DUR_ROUNDS
 * times, a forked writer is killed at a random point; then a new store
 * (after the backend's crash recovery) must have every acknowledged write.
 */
static void durability_kill9(const char *spec)
{
    int total = 0, batches = 0;

    for (unsigned round = 0; round < DUR_ROUNDS; round++) {
        bool acked[2 * DUR_N] = {false};
        int64_t seen = 0; /* the last acknowledged last seen */
        struct fix f = {0};
        char owner[16];

        snprintf(owner, sizeof(owner), "dur%u", round);
        total += dur_round(spec, owner, 1234 + round * 7, acked);
        f.s = open_or_fail(spec);
        f.in = store_inbox_new();
        for (int i = 0; i < DUR_N; i++) {
            char id[16];

            snprintf(id, sizeof(id), "c%d", i);
            if (acked[i] && !relations(&f, owner, id).r.is_contact)
                fail_msg("round %u: acknowledged write %d lost", round, i);
            if (acked[DUR_N + i]) {
                seen = T0 + i;
                batches++;
            }
        }
        if (lastseen_get(&f, owner) < seen || lastseen_get(&f, "dur-all") < seen)
            fail_msg("round %u: acknowledged last seen %lld lost", round, (long long)seen);
        store_close(f.s);
        store_inbox_free(f.in);
    }
    print_message("durability: %d acknowledged writes (%d of them last-seen batches) checked over"
                  " %d rounds\n",
                  total, batches, DUR_ROUNDS);
}

/* ---- sessions saved at a clean stop ---- */

/* What one saved_take completion saw, copied out of the borrowed answer. */
struct taken {
    int calls;
    int status;
    size_t n;
    char sid[4][64];
    char data[4][256];
    int64_t ms[4];
};

static void taken_cb(void *ctx, int status, const struct store_result *r)
{
    struct taken *t = ctx;

    t->calls++;
    t->status = status;
    t->n = r->nsaved;
    for (size_t i = 0; i < r->nsaved && i < 4; i++) {
        snprintf(t->sid[i], sizeof(t->sid[i]), "%s", r->saved[i].sid);
        snprintf(t->data[i], sizeof(t->data[i]), "%s", r->saved[i].data);
        t->ms[i] = r->saved[i].saved_ms;
    }
}

static struct taken saved_take(struct fix *f)
{
    struct taken t = {0};

    assert_int_equal(store_saved_take(f->s, f->in, taken_cb, &t), 0);
    wait_all(f->in);
    assert_int_equal(t.calls, 1);
    assert_int_equal(t.status, 0);
    return t;
}

static const char *taken_data(const struct taken *t, const char *sid)
{
    for (size_t i = 0; i < t->n && i < 4; i++)
        if (strcmp(t->sid[i], sid) == 0)
            return t->data[i];
    return NULL;
}

/* A put replaces every saved row in one transaction, survives a reopen,
 * and a take reads and deletes them at once: a second take is empty. */
static void test_saved_put_then_take_once(void **state)
{
    struct fix *f = *state;
    const struct store_saved first[] = {
        {"s1", "{\"v\":1,\"user\":\"ann\"}", T0},
        {"s2", "{\"v\":1,\"user\":\"bob\",\"text\":\"caf\xc3\xa9 \\\"x\\\"\"}", T0},
        {"s3", "{}", T0},
    };
    const struct store_saved second[] = {
        {"s2", "{\"v\":1,\"user\":\"bob\"}", T0 + 5},
        {"s4", "[]", T0 + 5},
    };
    struct rec x = {0};
    struct taken t;

    assert_int_equal(saved_take(f).n, 0); /* nothing saved yet */
    done(f, store_saved_put(f->s, f->in, first, 3, rec_cb, &x), &x);
    assert_int_equal(x.r.changed, 3);
    memset(&x, 0, sizeof(x));
    done(f, store_saved_put(f->s, f->in, second, 2, rec_cb, &x), &x);
    reopen(f);
    t = saved_take(f);
    assert_int_equal(t.n, 2); /* the second put replaced the first */
    assert_string_equal(taken_data(&t, "s2"), "{\"v\":1,\"user\":\"bob\"}");
    assert_string_equal(taken_data(&t, "s4"), "[]");
    assert_null(taken_data(&t, "s1"));
    assert_int_equal(t.ms[0], T0 + 5);
    assert_int_equal(saved_take(f).n, 0); /* taken once, gone */
    reopen(f);
    assert_int_equal(saved_take(f).n, 0); /* and gone for good */
    /* An empty put clears; data with every byte class comes back whole. */
    memset(&x, 0, sizeof(x));
    done(f, store_saved_put(f->s, f->in, first + 1, 1, rec_cb, &x), &x);
    t = saved_take(f);
    assert_int_equal(t.n, 1);
    assert_string_equal(t.data[0], first[1].data);
    memset(&x, 0, sizeof(x));
    done(f, store_saved_put(f->s, f->in, first, 3, rec_cb, &x), &x);
    memset(&x, 0, sizeof(x));
    done(f, store_saved_put(f->s, f->in, NULL, 0, rec_cb, &x), &x);
    assert_int_equal(saved_take(f).n, 0);
}

static void test_saved_put_refuses_bad_rows(void **state)
{
    struct fix *f = *state;
    const struct store_saved bad_id[] = {{"ok", "{}", T0}, {"a b", "{}", T0}};
    const struct store_saved no_data[] = {{"ok", NULL, T0}};
    const struct store_saved no_time[] = {{"ok", "{}", 0}};
    struct rec x = {0};

    assert_int_equal(store_saved_put(f->s, f->in, bad_id, 2, rec_cb, &x), -EINVAL);
    assert_int_equal(store_saved_put(f->s, f->in, no_data, 1, rec_cb, &x), -EINVAL);
    assert_int_equal(store_saved_put(f->s, f->in, no_time, 1, rec_cb, &x), -EINVAL);
    wait_all(f->in);
    assert_int_equal(x.calls, 0);
    assert_int_equal(saved_take(f).n, 0);
}

#endif
