/* SPDX-License-Identifier: MIT */
/*
 * test_store_pg.c - the settings store on a real PostgreSQL server.
 *
 * The same behaviour test_store.c checks on SQLite, plus what only a
 * server has: group commit seen through the rows' transaction ids, schema
 * set-up and refusal, an unreachable server, a connection terminated under
 * an idle store, an outage (the server stopped and started again through
 * $PRESENCED_TEST_PG_CTL) and acknowledged writes that survive kill -9 of
 * the writer. Needs $PRESENCED_TEST_PG (a postgres:// URI) and fails
 * without it: tests/pg/run.sh starts a throwaway cluster and sets both.
 * Every test starts from an empty schema (the tables are dropped first).
 */
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

#include <libpq-fe.h>

#include "store.h"
#include "util.h"

#define WAIT_MS 10000 /* longest wait for one completion before failing */

static const char *uri;    /* $PRESENCED_TEST_PG */
static const char *pg_ctl; /* $PRESENCED_TEST_PG_CTL: "<cmd> stop|start" */
static PGconn *admin;      /* the test's own connection, for checks and damage */
static bool stopped;       /* the server is stopped: teardown starts it */

struct fix {
    struct store *s;
    struct store_inbox *in;
};

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

/* ---- the admin connection ---- */

static void admin_ok(const char *sql)
{
    PGresult *res = PQexec(admin, sql);
    ExecStatusType st = PQresultStatus(res);

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(admin));
    PQclear(res);
}

/* The first column of the first row as a number (-1: no row). */
static long admin_num(const char *sql)
{
    PGresult *res = PQexec(admin, sql);
    long v = -1;

    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(admin));
    if (PQntuples(res) > 0)
        v = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return v;
}

static void drop_schema(void)
{
    admin_ok("DROP TABLE IF EXISTS presenced_privacy, presenced_contacts, presenced_blocks,"
             " presenced_schema");
}

/* Runs "$PRESENCED_TEST_PG_CTL what" (stop or start). */
static void cluster(const char *what)
{
    char cmd[512];

    if (!pg_ctl)
        fail_msg("PRESENCED_TEST_PG_CTL is unset: run tests/pg/run.sh");
    snprintf(cmd, sizeof(cmd), "%s %s", pg_ctl, what);
    if (system(cmd) != 0)
        fail_msg("%s failed", cmd);
    stopped = strcmp(what, "stop") == 0;
}

static void admin_connect(void)
{
    PQfinish(admin);
    admin = PQconnectdb(uri);
    if (PQstatus(admin) != CONNECTION_OK)
        fail_msg("cannot connect to %s: %s", uri, PQerrorMessage(admin));
    admin_ok("SET client_min_messages TO warning");
}

/* ---- fixture and waiting ---- */

static struct store *open_or_fail(void)
{
    char err[STORE_ERR_LEN] = "";
    struct store *s = store_open(uri, err, sizeof(err));

    if (!s)
        fail_msg("store_open: %s", err);
    return s;
}

static int setup(void **state)
{
    struct fix *f = xcalloc(1, sizeof(*f));

    drop_schema();
    f->s = open_or_fail();
    f->in = store_inbox_new();
    *state = f;
    return 0;
}

static void admin_connect(void);

static int teardown(void **state)
{
    struct fix *f = *state;

    if (stopped) {
        cluster("start");
        admin_connect();
    }
    store_close(f->s);
    store_inbox_drain(f->in);
    store_inbox_free(f->in);
    free(f);
    return 0;
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
    f->s = open_or_fail();
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

static void assert_most_private(const struct rec *x)
{
    assert_int_equal(x->r.privacy.online, STORE_VIS_NOBODY);
    assert_int_equal(x->r.privacy.last_seen, STORE_VIS_NOBODY);
    assert_true(x->r.privacy.invisible);
    assert_false(x->r.is_contact);
    assert_true(x->r.blocked);
}

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
    assert_int_equal(admin_num("SELECT count(*) FROM presenced_contacts"), 0);
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

/* ---- ordering, group commit and threads ---- */

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

#define GROUP_N 100

/* Polls until the store's INSERT waits for the lock the admin holds. */
static void wait_for_lock_waiter(void)
{
    for (int i = 0; i < 500; i++) {
        if (admin_num("SELECT count(*) FROM pg_locks WHERE NOT granted"
                      " AND relation = 'presenced_contacts'::regclass") > 0)
            return;
        usleep(10000);
    }
    fail_msg("the store never waited for the table lock");
}

/*
 * Writes queued while the database thread is busy share one transaction:
 * the first write waits on a table lock the test holds, GROUP_N - 1 more
 * are queued behind it, then the lock goes. Every row a transaction
 * inserts carries its id in xmin, so two batches mean two xmins.
 */
static void test_group_commit(void **state)
{
    struct fix *f = *state;
    struct rec *x = xcalloc(GROUP_N, sizeof(*x));

    admin_ok("BEGIN");
    admin_ok("LOCK TABLE presenced_contacts IN EXCLUSIVE MODE");
    for (int i = 0; i < GROUP_N; i++) {
        char id[16];
        const char *ids[] = {id};

        snprintf(id, sizeof(id), "g%d", i);
        assert_int_equal(store_contacts_add(f->s, f->in, "grp", ids, 1, rec_cb, &x[i]), 0);
        if (i == 0)
            wait_for_lock_waiter();
    }
    admin_ok("COMMIT");
    wait_all(f->in);
    for (int i = 0; i < GROUP_N; i++) {
        assert_int_equal(x[i].status, 0);
        assert_int_equal(x[i].r.changed, 1);
    }
    assert_int_equal(admin_num("SELECT count(*) FROM presenced_contacts WHERE owner = 'grp'"),
                     GROUP_N);
    assert_int_equal(admin_num("SELECT count(DISTINCT xmin::text) FROM presenced_contacts"
                               " WHERE owner = 'grp'"),
                     2);
    free(x);
}

/* One failing write in a group fails alone; its neighbours commit. */
static void test_failing_write_alone(void **state)
{
    struct fix *f = *state;
    const char *ids[] = {"ok1", "forbidden", "ok2"};
    struct rec x[3] = {{0}};

    admin_ok("ALTER TABLE presenced_contacts ADD CONSTRAINT no_forbidden"
             " CHECK (contact <> 'forbidden')");
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

/* ---- lifetime and schema ---- */

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
    f->s = open_or_fail();
    assert_true(relations(f, "o", "c49").r.is_contact);
}

/* The fixture's open created everything; a second open accepts it. */
static void test_schema_created_then_accepted(void **state)
{
    struct fix *f = *state;

    assert_int_equal(admin_num("SELECT version FROM presenced_schema"), STORE_SCHEMA_VERSION);
    assert_int_equal(admin_num("SELECT count(*) FROM pg_tables WHERE tablename IN"
                               " ('presenced_privacy', 'presenced_contacts', 'presenced_blocks')"),
                     3);
    CONTACTS(store_contacts_add, f, "s", "t");
    reopen(f);
    assert_int_equal(admin_num("SELECT count(*) FROM presenced_schema"), 1);
    assert_true(relations(f, "s", "t").r.is_contact);
}

static void test_newer_schema_refused(void **state)
{
    struct fix *f = *state;
    char err[STORE_ERR_LEN] = "";
    struct store *s = NULL;

    store_close(f->s);
    f->s = NULL;
    admin_ok("UPDATE presenced_schema SET version = 99");
    assert_int_equal(store_open_status(uri, err, sizeof(err), &s), STORE_E_SCHEMA);
    assert_null(s);
    assert_non_null(strstr(err, "newer"));
    assert_null(store_open(uri, err, sizeof(err)));
    /* Refused and left alone. */
    assert_int_equal(admin_num("SELECT version FROM presenced_schema"), 99);
}

static void test_damaged_schema_refused(void **state)
{
    struct fix *f = *state;
    char err[STORE_ERR_LEN] = "";
    struct store *s = NULL;

    store_close(f->s);
    f->s = NULL;
    admin_ok("ALTER TABLE presenced_blocks RENAME COLUMN blocked TO target");
    assert_int_equal(store_open_status(uri, err, sizeof(err), &s), STORE_E_SCHEMA);
    assert_null(s);
    assert_non_null(strstr(err, "blocked"));
}

/* No server on the port: open fails at once, without the password. */
static void test_unreachable_at_open(void **state)
{
    char err[STORE_ERR_LEN] = "";
    struct store *s = NULL;
    uint64_t t0 = time_mono_ms();

    (void)state;
    assert_int_equal(store_open_status("postgresql://u:sekrit@127.0.0.1:1/x", err, sizeof(err), &s),
                     STORE_E_IO);
    assert_null(s);
    assert_non_null(strstr(err, "cannot connect"));
    assert_null(strstr(err, "sekrit"));
    assert_int_equal(
        store_open_status("postgres://127.0.0.1:1/x?connect_timeout=1", err, sizeof(err), &s),
        STORE_E_IO);
    assert_true(time_mono_ms() - t0 < 5000);
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
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        const char *ids[] = {"ok", bad[i]};

        assert_int_equal(store_get_privacy(f->s, f->in, bad[i], rec_cb, &x), -EINVAL);
        assert_int_equal(store_set_privacy(f->s, f->in, bad[i], &p, rec_cb, &x), -EINVAL);
        assert_int_equal(store_block(f->s, f->in, "a", bad[i], rec_cb, &x), -EINVAL);
        assert_int_equal(store_unblock(f->s, f->in, bad[i], "a", rec_cb, &x), -EINVAL);
        assert_int_equal(store_get_relations(f->s, f->in, "a", bad[i], rec_cb, &x), -EINVAL);
        assert_int_equal(store_contacts_add(f->s, f->in, "a", ids, 2, rec_cb, &x), -EINVAL);
        assert_int_equal(store_contacts_remove(f->s, f->in, bad[i], ids, 1, rec_cb, &x), -EINVAL);
        assert_int_equal(store_contacts_replace(f->s, f->in, "a", ids, 2, rec_cb, &x), -EINVAL);
    }
    assert_int_equal(store_get_privacy(f->s, f->in, long_id, rec_cb, &x), -EINVAL);
    p.online = (enum store_visibility)3;
    assert_int_equal(store_set_privacy(f->s, f->in, "a", &p, rec_cb, &x), -EINVAL);
    p = (struct store_privacy){.last_seen = (enum store_visibility) - 1};
    assert_int_equal(store_set_privacy(f->s, f->in, "a", &p, rec_cb, &x), -EINVAL);
    assert_int_equal(store_set_privacy(f->s, f->in, "a", NULL, rec_cb, &x), -EINVAL);
    assert_int_equal(store_inbox_pending(f->in), 0);
    assert_int_equal(x.calls, 0); /* a failing call never fires its callback */
    assert_int_equal(admin_num("SELECT count(*) FROM presenced_contacts"), 0);
}

/* STORE_IDS_MAX ids in one call work; one more is refused before queuing. */
static void test_ids_limit(void **state)
{
    struct fix *f = *state;
    const char **ids = xcalloc(STORE_IDS_MAX + 1, sizeof(*ids));
    char *buf = xcalloc(STORE_IDS_MAX + 1, STORE_ID_MAX + 1);
    struct rec x = {0};

    /* Long ids too: 10,000 of 128 bytes is a 1.3 MB parameter. */
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
    assert_int_equal(admin_num("SELECT count(*) FROM presenced_contacts WHERE owner = 'big'"), 1);
    free(buf);
    free(ids);
}

/* ---- losing the server ---- */

/*
 * A server that terminates the store's idle connection (a restart, an
 * administrator) costs nothing: the next batch notices before it runs and
 * reconnects.
 */
static void test_terminated_connection_reconnects(void **state)
{
    struct fix *f = *state;
    const char *mine = "SELECT count(*) FROM pg_stat_activity"
                       " WHERE application_name = 'presenced'";

    CONTACTS(store_contacts_add, f, "r", "s");
    assert_int_equal(admin_num(mine), 1);
    admin_ok("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
             " WHERE application_name = 'presenced'");
    for (int i = 0; i < 500 && admin_num(mine) > 0; i++)
        usleep(10000);
    assert_int_equal(admin_num(mine), 0);
    assert_true(relations(f, "r", "s").r.is_contact);
    CONTACTS(store_contacts_add, f, "r", "t");
    assert_true(relations(f, "r", "t").r.is_contact);
}

/*
 * The server stops: every request fails (reads with the most private
 * answer, writes with STORE_E_IO), in order and promptly; the store keeps
 * retrying per batch and works again, with nothing lost, once the server
 * is back.
 */
static void test_outage_fails_closed_then_recovers(void **state)
{
    struct fix *f = *state;
    struct store_privacy p = {STORE_VIS_EVERYONE, STORE_VIS_EVERYONE, false};
    const char *ids[] = {"new"};
    struct rec x[5] = {{0}};
    uint64_t t0;

    CONTACTS(store_contacts_add, f, "alice", "bob");
    done(f, store_set_privacy(f->s, f->in, "alice", &p, rec_cb, &x[0]), &x[0]);
    cluster("stop");
    t0 = time_mono_ms();
    memset(x, 0, sizeof(x));
    assert_int_equal(store_get_relations(f->s, f->in, "alice", "bob", rec_cb, &x[0]), 0);
    assert_int_equal(store_set_privacy(f->s, f->in, "alice", &p, rec_cb, &x[1]), 0);
    assert_int_equal(store_contacts_add(f->s, f->in, "alice", ids, 1, rec_cb, &x[2]), 0);
    assert_int_equal(store_block(f->s, f->in, "alice", "eve", rec_cb, &x[3]), 0);
    assert_int_equal(store_get_privacy(f->s, f->in, "alice", rec_cb, &x[4]), 0);
    wait_all(f->in);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(x[i].calls, 1);
        assert_int_equal(x[i].status, STORE_E_IO);
    }
    assert_most_private(&x[0]);
    assert_most_private(&x[4]);
    assert_int_equal(x[1].r.changed, 0);
    /* Every later request retries the connection and fails the same way. */
    x[0] = relations_any(f, "alice", "bob");
    assert_int_equal(x[0].status, STORE_E_IO);
    assert_most_private(&x[0]);
    assert_true(time_mono_ms() - t0 < 5000);

    cluster("start");
    admin_connect();
    x[0] = relations(f, "alice", "bob");
    assert_true(x[0].r.is_contact);
    assert_false(x[0].r.blocked);
    assert_false(x[0].r.privacy.invisible);
    assert_false(relations(f, "alice", "new").r.is_contact); /* the failed write did not happen */
    CONTACTS(store_contacts_add, f, "alice", "new");
    assert_true(relations(f, "alice", "new").r.is_contact);
}

/* ---- durability under SIGKILL ---- */

#define DUR_N      200 /* numbered writes per round */
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
 * The child: opens its own store and submits DUR_N contact additions for
 * owner, draining completions as it goes so that group commits of varying
 * sizes happen, then waits to be killed.
 */
static void dur_child(const char *owner, unsigned seed)
{
    char err[STORE_ERR_LEN];
    struct store *s = store_open(uri, err, sizeof(err));
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
        assert_true(strncmp(pend, "acked ", 6) == 0 && i >= 0 && i < DUR_N);
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
static int dur_round(const char *owner, unsigned seed, bool *acked)
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
        dur_child(owner, seed);
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

static void test_durability_kill9(void **state)
{
    int total = 0;

    (void)state;
    drop_schema();
    for (unsigned round = 0; round < DUR_ROUNDS; round++) {
        bool acked[DUR_N] = {false};
        struct fix f = {0};
        char owner[16];

        snprintf(owner, sizeof(owner), "dur%u", round);
        total += dur_round(owner, 1234 + round * 7, acked);
        /* A new store after the crash: every acknowledged write is there. */
        f.s = open_or_fail();
        f.in = store_inbox_new();
        for (int i = 0; i < DUR_N; i++) {
            char id[16];

            snprintf(id, sizeof(id), "c%d", i);
            if (acked[i] && !relations(&f, owner, id).r.is_contact)
                fail_msg("round %u: acknowledged write %d lost", round, i);
        }
        store_close(f.s);
        store_inbox_free(f.in);
    }
    print_message("durability: %d acknowledged writes checked over %d rounds\n", total, DUR_ROUNDS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_privacy_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_defaults_for_unknown_user, setup, teardown),
        cmocka_unit_test_setup_teardown(test_contacts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_blockers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_completion_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failing_write_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen_keeps_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_drains_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_schema_created_then_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_schema_refused, setup, teardown),
        cmocka_unit_test(test_unreachable_at_open),
        cmocka_unit_test_setup_teardown(test_invalid_ids_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_terminated_connection_reconnects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outage_fails_closed_then_recovers, setup, teardown),
        cmocka_unit_test(test_durability_kill9),
    };
    int rc;

    uri = getenv("PRESENCED_TEST_PG");
    pg_ctl = getenv("PRESENCED_TEST_PG_CTL");
    if (!uri || !*uri) {
        fprintf(stderr, "test_store_pg: PRESENCED_TEST_PG is unset: run tests/pg/run.sh, or"
                        " set it to a postgres:// URI of a scratch database\n");
        return 1;
    }
    admin = PQconnectdb(uri);
    if (PQstatus(admin) != CONNECTION_OK) {
        fprintf(stderr, "test_store_pg: cannot connect to %s: %s", uri, PQerrorMessage(admin));
        PQfinish(admin);
        return 1;
    }
    PQclear(PQexec(admin, "SET client_min_messages TO warning"));
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    PQclear(PQexec(admin, "DROP TABLE IF EXISTS presenced_privacy, presenced_contacts,"
                          " presenced_blocks, presenced_schema"));
    PQfinish(admin);
    return rc;
}
