/* SPDX-License-Identifier: MIT */
/*
 * test_store.c - the settings store through its threaded API, on SQLite.
 *
 * The backend-independent cases live in store_cases.h (test_store_pg.c runs
 * them on PostgreSQL, the fixture hooks below give them SQLite's ways);
 * this file adds what is SQLite's own: file paths, unwritable and corrupt
 * files, the database or its -wal deleted or replaced under a running
 * store, a -shm file truncated or made unwritable (no SIGBUS), and a libpq
 * URI that must never become a file name. Each test gets a fresh temporary
 * directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store.h"
#include "util.h"

struct fix {
    char dir[64];   /* temporary directory */
    char path[128]; /* dir/test.db */
    struct store *s;
    struct store_inbox *in;
};

static const char *fix_spec(const struct fix *f)
{
    return f->path;
}

/*
 * The test's own connection to the file. The store holds the file in
 * exclusive locking mode, so an open store is closed first (its pending
 * completions are run) and raw_end() opens it again.
 */
static sqlite3 *raw_begin(struct fix *f, bool *was_open)
{
    sqlite3 *db = NULL;

    *was_open = f->s != NULL;
    store_close(f->s);
    f->s = NULL;
    store_inbox_drain(f->in);
    if (sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
        fail_msg("open %s: %s", f->path, sqlite3_errmsg(db));
    return db;
}

static void raw_end(struct fix *f, sqlite3 *db, bool was_open)
{
    char err[STORE_ERR_LEN] = "";

    sqlite3_close(db);
    if (was_open && !(f->s = store_open(f->path, err, sizeof(err))))
        fail_msg("store_open: %s", err);
}

static void raw_exec(struct fix *f, const char *sql)
{
    bool was_open;
    sqlite3 *db = raw_begin(f, &was_open);

    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    raw_end(f, db, was_open);
}

/* The first column of the first row of sql with ?1 = arg, if any (-1: no row). */
static long raw_num(struct fix *f, const char *sql, const char *arg)
{
    bool was_open;
    sqlite3 *db = raw_begin(f, &was_open);
    sqlite3_stmt *st = NULL;
    long n = -1;

    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
        (sqlite3_bind_parameter_count(st) == 0 ||
         sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC) == SQLITE_OK) &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    if (n < 0)
        print_error("%s in %s: %s\n", sql, f->path, sqlite3_errmsg(db));
    sqlite3_finalize(st);
    raw_end(f, db, was_open);
    return n;
}

static long fix_count_contacts(struct fix *f, const char *owner)
{
    return raw_num(f, "SELECT count(*) FROM contacts WHERE ?1 IS NULL OR owner = ?1", owner);
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/*
 * Commit frames in the -wal since its last reset: a WAL file is a 32-byte
 * header (page size at 8, salts at 16) and frames of a 24-byte header
 * (database size after the commit at 4, non-zero only in a commit's last
 * frame; the salts at 8) and a page. Frames with other salts are left from
 * before a reset. Read with plain I/O: the store holds the database's
 * lock, not the log's.
 */
static long fix_commits(struct fix *f, const char *owner)
{
    unsigned char hdr[32], fh[24];
    char wal[192];
    long n = 0;
    uint32_t pgsz;
    off_t at = 32;
    int fd;

    (void)owner;
    snprintf(wal, sizeof(wal), "%s-wal", f->path);
    fd = open(wal, O_RDONLY);
    if (fd < 0 || pread(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
        fail_msg("cannot read the header of %s", wal);
    pgsz = be32(hdr + 8);
    while (pread(fd, fh, sizeof(fh), at) == (ssize_t)sizeof(fh) &&
           memcmp(fh + 8, hdr + 16, 8) == 0) {
        n += be32(fh + 4) != 0;
        at += (off_t)sizeof(fh) + pgsz;
    }
    close(fd);
    return n;
}

static long fix_schema_version(struct fix *f)
{
    return raw_num(f, "PRAGMA user_version", NULL);
}

/* What a future release writes. */
static void fix_set_schema_version(struct fix *f, int v)
{
    char sql[64];

    snprintf(sql, sizeof(sql), "PRAGMA user_version=%d", v);
    raw_exec(f, sql);
}

static void fix_damage_schema(struct fix *f)
{
    raw_exec(f, "ALTER TABLE blocks RENAME COLUMN blocked TO target");
}

/* A trigger: SQLite cannot add a CHECK constraint to a table. */
static void fix_forbid_contact(struct fix *f, const char *id)
{
    char sql[256];

    assert_true(store_id_is_valid(id)); /* nothing to quote */
    snprintf(sql, sizeof(sql),
             "CREATE TRIGGER forbid BEFORE INSERT ON contacts WHEN NEW.contact = '%s'"
             " BEGIN SELECT RAISE(ABORT, 'forbidden contact'); END",
             id);
    raw_exec(f, sql);
}

static void fix_destroy(struct fix *f)
{
    assert_int_equal(unlink(f->path), 0);
}

static long fix_count_lastseen(struct fix *f)
{
    return raw_num(f, "SELECT count(*) FROM last_seen", NULL);
}

static long fix_lastseen_commits(struct fix *f)
{
    return fix_commits(f, NULL);
}

static void fix_forbid_lastseen(struct fix *f, const char *id)
{
    char sql[256];

    assert_true(store_id_is_valid(id)); /* nothing to quote */
    snprintf(sql, sizeof(sql),
             "CREATE TRIGGER forbid_ls BEFORE INSERT ON last_seen WHEN NEW.user = '%s'"
             " BEGIN SELECT RAISE(ABORT, 'forbidden last seen'); END",
             id);
    raw_exec(f, sql);
}

static void fix_drop_lastseen(struct fix *f)
{
    raw_exec(f, "DROP TABLE last_seen");
}

#include "store_cases.h"

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void make_dir(char *dir, size_t n)
{
    snprintf(dir, n, "/tmp/test_store.XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void remove_dir(const char *dir)
{
    nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static int setup(void **state)
{
    struct fix *f = xcalloc(1, sizeof(*f));

    make_dir(f->dir, sizeof(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/test.db", f->dir);
    f->s = open_or_fail(f->path);
    f->in = store_inbox_new();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;

    store_close(f->s);
    store_inbox_drain(f->in);
    store_inbox_free(f->in);
    remove_dir(f->dir);
    free(f);
    return 0;
}

/* ---- validation and errors ---- */

static void test_unwritable_path_fails_cleanly(void **state)
{
    struct fix *f = *state;
    char path[192], err[STORE_ERR_LEN] = "";
    int fd;

    /* A path below a regular file cannot be created, even by root. */
    snprintf(path, sizeof(path), "%s/file", f->dir);
    fd = open(path, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    close(fd);
    snprintf(path, sizeof(path), "%s/file/x.db", f->dir);
    assert_null(store_open(path, err, sizeof(err)));
    assert_non_null(strstr(err, "x.db"));
}

static void test_corrupt_file_fails_cleanly(void **state)
{
    struct fix *f = *state;
    char path[192], err[STORE_ERR_LEN] = "";
    char junk[4096];
    int fd;

    memset(junk, 'z', sizeof(junk));
    snprintf(path, sizeof(path), "%s/junk.db", f->dir);
    fd = open(path, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, junk, sizeof(junk)), sizeof(junk));
    close(fd);
    assert_null(store_open(path, err, sizeof(err)));
    assert_non_null(strstr(err, "junk.db"));
}

/*
 * A postgres:// or postgresql:// spec is a libpq URI, never a file name:
 * with nothing listening, open fails with STORE_E_IO at once, says so, and
 * does not repeat the password. (test_store_pg.c covers a live server.)
 */
static void test_postgres_spec_is_not_a_file(void **state)
{
    const char *specs[] = {"postgresql://u:sekrit@127.0.0.1:1/x",
                           "postgres://u:sekrit@127.0.0.1:1/x?connect_timeout=1"};
    char err[STORE_ERR_LEN];

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(specs); i++) {
        struct store *s = NULL;

        err[0] = '\0';
        assert_int_equal(store_open_status(specs[i], err, sizeof(err), &s), STORE_E_IO);
        assert_null(s);
        assert_non_null(strstr(err, "postgresql"));
        assert_null(strstr(err, "sekrit"));
        assert_int_equal(access("postgresql:", F_OK), -1);
        assert_int_equal(access("postgres:", F_OK), -1);
    }
}

/* ---- the files deleted or replaced under a running store ---- */

/*
 * What every way of losing the file must give: the write after the loss
 * and every one after it complete with STORE_E_GONE, the store says it is
 * unhealthy and why, reads still answer from the open file, and after a
 * restart on the path nothing refused is there.
 */
static void assert_gone(struct fix *f)
{
    struct rec x;

    assert_int_equal(set_privacy_status(f, "late"), STORE_E_GONE);
    assert_false(store_is_healthy(f->s));
    assert_int_equal(store_fault(f->s), STORE_E_GONE);
    assert_non_null(strstr(store_strerror(store_fault(f->s)), "deleted or replaced"));
    assert_int_equal(set_privacy_status(f, "later"), STORE_E_GONE);
    x = get_privacy(f, "early");
    assert_int_equal(x.status, 0);
    assert_true(x.r.found);
    assert_true(x.r.privacy.invisible);
    store_close(f->s);
    f->s = NULL;
    wait_all(f->in);
    f->s = open_or_fail(f->path);
    assert_true(store_is_healthy(f->s));
    assert_false(get_privacy(f, "late").r.found);
    assert_false(get_privacy(f, "later").r.found);
}

static void test_deleted_file_refuses_writes(void **state)
{
    struct fix *f = *state;

    assert_true(store_is_healthy(f->s));
    assert_int_equal(store_fault(f->s), 0);
    assert_int_equal(set_privacy_status(f, "early"), 0);
    assert_int_equal(unlink(f->path), 0);
    assert_gone(f);
}

/* Another file renamed over the path: what a careless restore does. */
static void test_replaced_file_refuses_writes(void **state)
{
    struct fix *f = *state;
    char other[192];
    int fd;

    assert_int_equal(set_privacy_status(f, "early"), 0);
    snprintf(other, sizeof(other), "%s/other.db", f->dir);
    fd = open(other, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(rename(other, f->path), 0);
    assert_gone(f);
}

/* The -wal holds acknowledged writes not yet checkpointed: losing it
 * loses them at the next crash. */
static void test_deleted_wal_refuses_writes(void **state)
{
    struct fix *f = *state;
    char wal[192];

    assert_int_equal(set_privacy_status(f, "early"), 0);
    snprintf(wal, sizeof(wal), "%s-wal", f->path);
    assert_int_equal(unlink(wal), 0);
    assert_int_equal(set_privacy_status(f, "late"), STORE_E_GONE);
    assert_false(store_is_healthy(f->s));
}

/* Found without any request: an idle store checks about once a second. */
static void test_deleted_file_found_while_idle(void **state)
{
    struct fix *f = *state;
    uint64_t t0 = time_mono_ms();

    assert_int_equal(unlink(f->path), 0);
    while (store_is_healthy(f->s) && time_mono_ms() - t0 < 5000)
        usleep(20000);
    assert_false(store_is_healthy(f->s));
    assert_int_equal(store_fault(f->s), STORE_E_GONE);
}

/* ---- the -shm file ---- */

/*
 * The child of test_shm_faults_do_not_crash: a store of its own on path,
 * then <path>-shm truncated (how a shared WAL index SIGBUSes its mapper,
 * even on a read) and made unwritable, created first if absent; then reads
 * and writes. Exits 0 when every one succeeded.
 */
static void shm_child(const char *path, bool unwritable)
{
    struct store_privacy p = {STORE_VIS_CONTACTS, STORE_VIS_EVERYONE, false};
    char err[STORE_ERR_LEN], shm[192];
    struct store *s = store_open(path, err, sizeof(err));
    struct store_inbox *in = store_inbox_new();
    struct rec x[4] = {{0}};
    int fd, bad = 0;

    if (!s)
        _exit(2);
    /* cmocka's handlers would turn a SIGBUS on the store's thread into an
     * exit(-1): let it kill the child, for the parent to name. */
    signal(SIGBUS, SIG_DFL);
    signal(SIGSEGV, SIG_DFL);
    if (store_set_privacy(s, in, "before", &p, rec_cb, &x[0]) != 0)
        _exit(3);
    wait_all(in);
    snprintf(shm, sizeof(shm), "%s-shm", path);
    fd = open(shm, O_CREAT | O_WRONLY, 0600);
    if (fd < 0 || ftruncate(fd, 0) != 0)
        _exit(4);
    close(fd);
    if (unwritable && chmod(shm, 0) != 0)
        _exit(5);
    if (store_get_privacy(s, in, "before", rec_cb, &x[1]) != 0 ||
        store_set_privacy(s, in, "after", &p, rec_cb, &x[2]) != 0 ||
        store_get_relations(s, in, "after", "v", rec_cb, &x[3]) != 0)
        _exit(6);
    wait_all(in);
    for (int i = 0; i < 4; i++)
        bad += x[i].calls != 1 || x[i].status != 0;
    store_close(s);
    store_inbox_free(in);
    _exit(bad ? 7 : 0);
}

static void test_shm_faults_do_not_crash(void **state)
{
    struct fix *f = *state;

    store_close(f->s); /* the child must be the file's only user */
    f->s = NULL;
    for (int unwritable = 0; unwritable < 2; unwritable++) {
        int status;
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid == 0)
            shm_child(f->path, unwritable);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (WIFSIGNALED(status))
            fail_msg("the store died of signal %d (%s)", WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    f->s = open_or_fail(f->path);
    assert_int_equal(get_privacy(f, "after").r.privacy.online, STORE_VIS_CONTACTS);
}

/* ---- durability under SIGKILL ---- */

/* Acknowledged writes survive kill -9: WAL recovery at the next open. */
static void test_durability_kill9(void **state)
{
    char dir[64], path[128];

    (void)state;
    make_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/dur.db", dir);
    durability_kill9(path);
    remove_dir(dir);
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
        /* SQLite's own */
        cmocka_unit_test_setup_teardown(test_unwritable_path_fails_cleanly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_file_fails_cleanly, setup, teardown),
        cmocka_unit_test(test_postgres_spec_is_not_a_file),
        cmocka_unit_test_setup_teardown(test_deleted_file_refuses_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replaced_file_refuses_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deleted_wal_refuses_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deleted_file_found_while_idle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shm_faults_do_not_crash, setup, teardown),
        cmocka_unit_test(test_durability_kill9),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
