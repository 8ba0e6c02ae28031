/* SPDX-License-Identifier: MIT */
/*
 * test_store_pg.c - the settings store on a real PostgreSQL server.
 *
 * The backend-independent cases live in store_cases.h (test_store.c runs
 * them on SQLite, the fixture hooks below give them PostgreSQL's ways);
 * this file adds what only a server has: group commit seen through the
 * rows' transaction ids, the tables it creates, an unreachable server, a connection terminated
 * under an idle store, an outage (the server stopped and started again through
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

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "store.h"
#include "util.h"

static const char *uri;    /* $PRESENCED_TEST_PG */
static const char *pg_ctl; /* $PRESENCED_TEST_PG_CTL: "<cmd> stop|start" */
static PGconn *admin;      /* the test's own connection, for checks and damage */
static bool stopped;       /* the server is stopped: teardown starts it */

struct fix {
    struct store *s;
    struct store_inbox *in;
};

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
             " presenced_last_seen, presenced_schema");
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

/* ---- fixture ---- */

static const char *fix_spec(const struct fix *f)
{
    (void)f;
    return uri;
}

static long fix_count_contacts(struct fix *f, const char *owner)
{
    char sql[256];

    (void)f;
    if (!owner)
        return admin_num("SELECT count(*) FROM presenced_contacts");
    assert_true(store_id_is_valid(owner)); /* nothing to quote */
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM presenced_contacts WHERE owner = '%s'", owner);
    return admin_num(sql);
}

/* Every row a transaction inserts carries its id in xmin. */
static long fix_commits(struct fix *f, const char *owner)
{
    char sql[256];

    (void)f;
    assert_true(store_id_is_valid(owner)); /* nothing to quote */
    snprintf(sql, sizeof(sql),
             "SELECT count(DISTINCT xmin::text) FROM presenced_contacts WHERE owner = '%s'", owner);
    return admin_num(sql);
}

static long fix_schema_version(struct fix *f)
{
    (void)f;
    return admin_num("SELECT version FROM presenced_schema");
}

static void fix_set_schema_version(struct fix *f, int v)
{
    char sql[64];

    (void)f;
    snprintf(sql, sizeof(sql), "UPDATE presenced_schema SET version = %d", v);
    admin_ok(sql);
}

static void fix_damage_schema(struct fix *f)
{
    (void)f;
    admin_ok("ALTER TABLE presenced_blocks RENAME COLUMN blocked TO target");
}

static void fix_forbid_contact(struct fix *f, const char *id)
{
    char sql[256];

    (void)f;
    assert_true(store_id_is_valid(id)); /* nothing to quote */
    snprintf(sql, sizeof(sql),
             "ALTER TABLE presenced_contacts ADD CONSTRAINT forbid CHECK (contact <> '%s')", id);
    admin_ok(sql);
}

static void fix_destroy(struct fix *f)
{
    (void)f;
    drop_schema();
}

static long fix_count_lastseen(struct fix *f)
{
    (void)f;
    return admin_num("SELECT count(*) FROM presenced_last_seen");
}

/* Every row an upsert inserts or updates carries its transaction in xmin. */
static long fix_lastseen_commits(struct fix *f)
{
    (void)f;
    return admin_num("SELECT count(DISTINCT xmin::text) FROM presenced_last_seen");
}

static void fix_forbid_lastseen(struct fix *f, const char *id)
{
    char sql[256];

    (void)f;
    assert_true(store_id_is_valid(id)); /* nothing to quote */
    snprintf(sql, sizeof(sql),
             "ALTER TABLE presenced_last_seen ADD CONSTRAINT forbid CHECK (user_id <> '%s')", id);
    admin_ok(sql);
}

static void fix_drop_lastseen(struct fix *f)
{
    (void)f;
    admin_ok("DROP TABLE presenced_last_seen");
}

#include "store_cases.h"

static int setup(void **state)
{
    struct fix *f = xcalloc(1, sizeof(*f));

    drop_schema();
    f->s = open_or_fail(uri);
    f->in = store_inbox_new();
    *state = f;
    return 0;
}

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

/* ---- group commit ---- */

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

/* ---- nodes sharing the database ---- */

#define NODE_BATCHES 20
#define NODE_USERS   1000

/*
 * Two stores on one database (two nodes) flush overlapping batches at the
 * same time, one listing the users forwards and the other backwards: the
 * upserts lock rows in one order, so no batch deadlocks or fails, and
 * every user ends at the largest time either node wrote.
 */
static void test_lastseen_two_nodes(void **state)
{
    struct fix *f = *state;
    struct store *other = open_or_fail(uri);
    struct store_lastseen *pairs = xcalloc(NODE_USERS, sizeof(*pairs));
    char(*ids)[16] = xcalloc(NODE_USERS, sizeof(*ids));
    struct rec x[2 * NODE_BATCHES] = {{0}};
    char sql[128];

    for (size_t i = 0; i < NODE_USERS; i++)
        snprintf(ids[i], sizeof(ids[i]), "n%zu", i);
    for (int k = 0; k < NODE_BATCHES; k++) {
        for (int node = 0; node < 2; node++) {
            for (size_t i = 0; i < NODE_USERS; i++) {
                size_t u = node ? NODE_USERS - 1 - i : i;

                pairs[i] = (struct store_lastseen){ids[u], T0 + 2 * k + node};
            }
            assert_int_equal(store_lastseen_write(node ? other : f->s, f->in, pairs, NODE_USERS,
                                                  rec_cb, &x[2 * k + node]),
                             0);
        }
    }
    wait_all(f->in);
    for (int i = 0; i < 2 * NODE_BATCHES; i++) {
        assert_int_equal(x[i].calls, 1);
        assert_int_equal(x[i].status, 0);
    }
    assert_int_equal(admin_num("SELECT count(*) FROM presenced_last_seen"), NODE_USERS);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM presenced_last_seen WHERE last_seen_ms <> %lld",
             T0 + 2 * (NODE_BATCHES - 1) + 1);
    assert_int_equal(admin_num(sql), 0);
    store_close(other);
    free(ids);
    free(pairs);
}

/* ---- schema ---- */

/* The fixture's open created every table; a second open adds no version row. */
static void test_schema_tables(void **state)
{
    struct fix *f = *state;

    assert_int_equal(admin_num("SELECT count(*) FROM pg_tables WHERE tablename IN"
                               " ('presenced_privacy', 'presenced_contacts', 'presenced_blocks',"
                               " 'presenced_last_seen')"),
                     4);
    CONTACTS(store_contacts_add, f, "s", "t");
    reopen(f);
    assert_int_equal(admin_num("SELECT count(*) FROM presenced_schema"), 1);
    assert_true(relations(f, "s", "t").r.is_contact);
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

/* What a read answers when the store cannot ask: the most private reply. */
static void assert_most_private(const struct rec *x)
{
    assert_int_equal(x->r.privacy.online, STORE_VIS_NOBODY);
    assert_int_equal(x->r.privacy.last_seen, STORE_VIS_NOBODY);
    assert_true(x->r.privacy.invisible);
    assert_false(x->r.is_contact);
    assert_true(x->r.blocked);
}

/*
 * Last seen with the server down: a batch fails whole (STORE_E_IO), a
 * read still answers one entry per user asked, each "never seen", and a
 * load page is empty.
 */
static void lastseen_fails_closed(struct fix *f)
{
    const char *users[] = {"alice", "seen", "alice"};
    struct rec w = lastseen_write_any(f, LS_PAIRS({"seen", T0 + 1}), 1);
    struct seen_rec x = lastseen_read_any(f, users, ARRAY_SIZE(users));

    assert_int_equal(w.status, STORE_E_IO);
    assert_int_equal(w.r.changed, 0);
    assert_int_equal(x.status, STORE_E_IO);
    assert_int_equal(x.n, ARRAY_SIZE(users));
    for (size_t i = 0; i < x.n; i++) {
        assert_string_equal(x.seen[i].user, users[i]);
        assert_int_equal(x.seen[i].last_seen_ms, 0);
    }
    seen_rec_free(&x);
    assert_int_equal(store_lastseen_load(f->s, f->in, NULL, 0, 10, seen_cb, &x), 0);
    wait_all(f->in);
    assert_int_equal(x.status, STORE_E_IO);
    assert_int_equal(x.n, 0);
    seen_rec_free(&x);
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
    LS_WRITE(f, {"seen", T0});
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
    lastseen_fails_closed(f);
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
    assert_int_equal(lastseen_get(f, "seen"), T0);
    assert_int_equal(LS_WRITE(f, {"seen", T0 + 1}), 1); /* the failed batch, resent */
    CONTACTS(store_contacts_add, f, "alice", "new");
    assert_true(relations(f, "alice", "new").r.is_contact);
}

/* Polls store_is_reachable() for up to 5 s until it says want. */
static bool reachable_within_5s(const struct store *s, bool want)
{
    for (int i = 0; i < 500; i++) {
        if (store_is_reachable(s) == want)
            return true;
        usleep(10000);
    }
    return false;
}

/*
 * store_is_reachable() (what /readyz's "degraded" and /metrics read)
 * follows an outage of an idle store: no request is needed to notice
 * that the server stopped, nor that it is back.
 */
static void test_reachable_follows_an_idle_outage(void **state)
{
    struct fix *f = *state;

    CONTACTS(store_contacts_add, f, "alice", "bob");
    assert_true(store_is_reachable(f->s));
    cluster("stop");
    assert_true(reachable_within_5s(f->s, false));
    assert_true(store_is_healthy(f->s)); /* an outage is not a fault */
    assert_int_equal(relations_any(f, "alice", "bob").status, STORE_E_IO);
    assert_false(store_is_reachable(f->s));
    cluster("start");
    admin_connect();
    assert_true(reachable_within_5s(f->s, true));
    assert_true(relations(f, "alice", "bob").r.is_contact);
    assert_true(store_is_reachable(f->s));
}

/* ---- durability under SIGKILL ---- */

/* Acknowledged writes survive kill -9: a new connection finds them all. */
static void test_durability_kill9(void **state)
{
    (void)state;
    drop_schema();
    durability_kill9(uri);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* store_cases.h */
        cmocka_unit_test_setup_teardown(test_privacy_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_defaults_for_unknown_user, setup, teardown),
        cmocka_unit_test_setup_teardown(test_contacts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_blockers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_summary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_completion_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trips_observed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_burst_shares_transactions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen_keeps_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_drains_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_ids_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inbox_free_drops_undrained, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lastseen_durable_after_completion, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lastseen_max_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lastseen_large_batch_one_transaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lastseen_invalid_batch_refused_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lastseen_refused_batch_writes_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_lastseen_load_pages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_saved_put_then_take_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_saved_put_refuses_bad_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lastseen_migrates_version_1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failing_write_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_schema_created_then_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_schema_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroyed_database_refuses_writes, setup, teardown),
        cmocka_unit_test(test_strerror),
        /* PostgreSQL's own */
        cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_schema_tables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lastseen_two_nodes, setup, teardown),
        cmocka_unit_test(test_unreachable_at_open),
        cmocka_unit_test_setup_teardown(test_terminated_connection_reconnects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outage_fails_closed_then_recovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reachable_follows_an_idle_outage, setup, teardown),
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
                          " presenced_blocks, presenced_last_seen, presenced_schema"));
    PQfinish(admin);
    return rc;
}
