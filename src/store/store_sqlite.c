/* SPDX-License-Identifier: MIT */
/*
 * store_sqlite.c - the SQLite backend of the settings store: one
 * connection in WAL mode with synchronous=FULL and exclusive locking,
 * cached prepared statements, the schema version in PRAGMA user_version,
 * and a check that the files it has open are still the ones the path
 * names.
 *
 * Exports store__sqlite (store_backend.h). Called only by the database
 * thread after open; does not queue, retry or log.
 */
#include "store_backend.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "util.h"

#define BUSY_TIMEOUT_MS 5000 /* waiting for a lock held by another process */

enum stmt {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_GET_PRIVACY,
    ST_SET_PRIVACY,
    ST_CONTACT_ADD,
    ST_CONTACT_DEL,
    ST_CONTACT_CLEAR,
    ST_IS_CONTACT,
    ST_BLOCK_ADD,
    ST_BLOCK_DEL,
    ST_IS_BLOCKED,
    ST_BLOCKERS,
    ST_COUNT_CONTACTS,
    ST_COUNT_BLOCKS,
    ST_BLOCKED,
    ST_LASTSEEN_PUT,
    ST_LASTSEEN_GET,
    ST_LASTSEEN_PAGE,
    ST_SAVED_CLEAR,
    ST_SAVED_ADD,
    ST_SAVED_TAKE,
    ST_COUNT,
};

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_GET_PRIVACY] = "SELECT online_visibility, last_seen_visibility, invisible"
                       " FROM privacy WHERE user = ?1",
    [ST_SET_PRIVACY] = "INSERT INTO privacy(user, online_visibility, last_seen_visibility,"
                       " invisible) VALUES (?1, ?2, ?3, ?4) ON CONFLICT(user) DO UPDATE SET"
                       " online_visibility = ?2, last_seen_visibility = ?3, invisible = ?4",
    [ST_CONTACT_ADD] = "INSERT OR IGNORE INTO contacts(owner, contact) VALUES (?1, ?2)",
    [ST_CONTACT_DEL] = "DELETE FROM contacts WHERE owner = ?1 AND contact = ?2",
    [ST_CONTACT_CLEAR] = "DELETE FROM contacts WHERE owner = ?1",
    [ST_IS_CONTACT] = "SELECT 1 FROM contacts WHERE owner = ?1 AND contact = ?2",
    [ST_BLOCK_ADD] = "INSERT OR IGNORE INTO blocks(owner, blocked) VALUES (?1, ?2)",
    [ST_BLOCK_DEL] = "DELETE FROM blocks WHERE owner = ?1 AND blocked = ?2",
    [ST_IS_BLOCKED] = "SELECT 1 FROM blocks WHERE owner = ?1 AND blocked = ?2",
    [ST_BLOCKERS] = "SELECT owner FROM blocks WHERE blocked = ?1 LIMIT 10000",
    [ST_COUNT_CONTACTS] = "SELECT COUNT(*) FROM contacts WHERE owner = ?1",
    [ST_COUNT_BLOCKS] = "SELECT COUNT(*) FROM blocks WHERE owner = ?1",
    [ST_BLOCKED] = "SELECT blocked FROM blocks WHERE owner = ?1 ORDER BY blocked LIMIT 100",
    [ST_LASTSEEN_PUT] = "INSERT INTO last_seen(user, last_seen_ms) VALUES (?1, ?2)"
                        " ON CONFLICT(user) DO UPDATE SET last_seen_ms = excluded.last_seen_ms"
                        " WHERE excluded.last_seen_ms > last_seen.last_seen_ms",
    [ST_LASTSEEN_GET] = "SELECT last_seen_ms FROM last_seen WHERE user = ?1",
    [ST_LASTSEEN_PAGE] = "SELECT user, last_seen_ms FROM last_seen"
                         " WHERE user > ?1 AND last_seen_ms >= ?2 ORDER BY user LIMIT ?3",
    [ST_SAVED_CLEAR] = "DELETE FROM saved_sessions",
    [ST_SAVED_ADD] =
        "INSERT OR REPLACE INTO saved_sessions(sid, saved_ms, data) VALUES (?1, ?2, ?3)",
    /* One statement, so one implicit transaction: what is read is gone. */
    [ST_SAVED_TAKE] = "DELETE FROM saved_sessions RETURNING sid, saved_ms, data",
};

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS privacy ("
    " user TEXT PRIMARY KEY NOT NULL,"
    " online_visibility TEXT NOT NULL DEFAULT 'everyone'"
    "  CHECK (online_visibility IN ('everyone', 'contacts', 'nobody')),"
    " last_seen_visibility TEXT NOT NULL DEFAULT 'everyone'"
    "  CHECK (last_seen_visibility IN ('everyone', 'contacts', 'nobody')),"
    " invisible INTEGER NOT NULL DEFAULT 0 CHECK (invisible IN (0, 1))"
    ") WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS contacts ("
    " owner TEXT NOT NULL, contact TEXT NOT NULL, PRIMARY KEY (owner, contact)"
    ") WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS blocks ("
    " owner TEXT NOT NULL, blocked TEXT NOT NULL, PRIMARY KEY (owner, blocked)"
    ") WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS blocks_by_blocked ON blocks (blocked, owner);"
    /* version 2 */
    "CREATE TABLE IF NOT EXISTS last_seen ("
    " user TEXT PRIMARY KEY NOT NULL,"
    " last_seen_ms INTEGER NOT NULL CHECK (last_seen_ms > 0)"
    ") WITHOUT ROWID;"
    /* version 3 */
    "CREATE TABLE IF NOT EXISTS saved_sessions ("
    " sid TEXT PRIMARY KEY NOT NULL,"
    " saved_ms INTEGER NOT NULL CHECK (saved_ms > 0),"
    " data TEXT NOT NULL"
    ") WITHOUT ROWID;";

struct lite {
    sqlite3 *db;
    sqlite3_stmt *stmt[ST_COUNT]; /* prepared once, used by the thread only */
    dev_t wal_dev;                /* the -wal file the connection has open */
    ino_t wal_ino;
};

static int map_sqlite(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW:
        return 0;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return STORE_E_CORRUPT;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
        return STORE_E_READONLY;
    case SQLITE_FULL:
        return STORE_E_FULL;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return STORE_E_BUSY;
    case SQLITE_SCHEMA:
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
        return STORE_E_SCHEMA;
    default:
        return STORE_E_IO;
    }
}

/* ---- statements ---- */

/* Steps a cached statement once; returns the SQLite code and resets it
 * unless a row is returned (the caller reads it, then calls stmt_done). */
static int stmt_step(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);

    if (rc != SQLITE_ROW) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    }
    return rc;
}

static void stmt_done(sqlite3_stmt *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

static sqlite3_stmt *bind2(struct lite *l, enum stmt k, const char *a, const char *b)
{
    sqlite3_stmt *st = l->stmt[k];

    sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
    if (b)
        sqlite3_bind_text(st, 2, b, -1, SQLITE_STATIC);
    return st;
}

/* Runs a pair statement (owner, x) for each x; counts changed rows. */
static int exec_pairs(struct lite *l, enum stmt k, const char *owner, char *const *xs, size_t n,
                      size_t *changed)
{
    for (size_t i = 0; i < n; i++) {
        int rc = stmt_step(bind2(l, k, owner, xs[i]));

        if (rc != SQLITE_DONE)
            return map_sqlite(rc);
        *changed += (size_t)sqlite3_changes(l->db);
    }
    return 0;
}

static int exec_set_privacy(struct lite *l, const struct store_args *a, size_t *changed)
{
    sqlite3_stmt *st = bind2(l, ST_SET_PRIVACY, a->user, NULL);
    int rc;

    sqlite3_bind_text(st, 2, store__vis_name[a->priv.online], -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, store__vis_name[a->priv.last_seen], -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, a->priv.invisible ? 1 : 0);
    rc = stmt_step(st);
    if (rc != SQLITE_DONE)
        return map_sqlite(rc);
    *changed = 1;
    return 0;
}

/* Orders indexes into the batch by user id (qsort_r context: the ids). */
static int cmp_by_id(const void *x, const void *y, void *ids)
{
    char *const *v = ids;

    return strcmp(v[*(const size_t *)x], v[*(const size_t *)y]);
}

/*
 * Upserts the batch keeping the max, one statement per distinct user in
 * id order, as PostgreSQL's GROUP BY does: a user named twice is one row
 * written with the larger time, so both backends count changed rows (the
 * rows created or moved forward; an upsert whose WHERE fails changes
 * none) the same way.
 */
static int exec_lastseen_put(struct lite *l, const struct store_args *a, size_t *changed)
{
    size_t *order = xcalloc(a->n ? a->n : 1, sizeof(*order));
    int err = 0;

    for (size_t i = 0; i < a->n; i++)
        order[i] = i;
    qsort_r(order, a->n, sizeof(*order), cmp_by_id, a->ids);
    for (size_t i = 0; i < a->n && err == 0;) {
        const char *user = a->ids[order[i]];
        int64_t ms = a->times[order[i]];
        sqlite3_stmt *st;
        int rc;

        for (i++; i < a->n && strcmp(a->ids[order[i]], user) == 0; i++)
            if (a->times[order[i]] > ms)
                ms = a->times[order[i]];
        st = bind2(l, ST_LASTSEEN_PUT, user, NULL);
        sqlite3_bind_int64(st, 2, ms);
        rc = stmt_step(st);
        if (rc == SQLITE_DONE)
            *changed += (size_t)sqlite3_changes(l->db);
        else
            err = map_sqlite(rc);
    }
    free(order);
    return err;
}

/* Replaces the saved sessions with a's rows (inside the open transaction). */
static int exec_saved_put(struct lite *l, const struct store_args *a, size_t *changed)
{
    int rc = stmt_step(l->stmt[ST_SAVED_CLEAR]);

    if (rc != SQLITE_DONE)
        return map_sqlite(rc);
    for (size_t i = 0; i < a->n; i++) {
        sqlite3_stmt *st = bind2(l, ST_SAVED_ADD, a->ids[i], NULL);

        sqlite3_bind_int64(st, 2, a->times[i]);
        sqlite3_bind_text(st, 3, a->texts[i], -1, SQLITE_STATIC);
        if ((rc = stmt_step(st)) != SQLITE_DONE)
            return map_sqlite(rc);
    }
    *changed += a->n;
    return 0;
}

static int lite_write(void *db, const struct store_args *a, size_t *changed)
{
    struct lite *l = db;
    int err;

    switch (a->kind) {
    case STORE_SET_PRIVACY:
        return exec_set_privacy(l, a, changed);
    case STORE_CONTACTS_ADD:
        return exec_pairs(l, ST_CONTACT_ADD, a->user, a->ids, a->n, changed);
    case STORE_CONTACTS_REMOVE:
        return exec_pairs(l, ST_CONTACT_DEL, a->user, a->ids, a->n, changed);
    case STORE_CONTACTS_REPLACE:
        err = map_sqlite(stmt_step(bind2(l, ST_CONTACT_CLEAR, a->user, NULL)));
        if (err == 0)
            *changed += (size_t)sqlite3_changes(l->db);
        return err ? err : exec_pairs(l, ST_CONTACT_ADD, a->user, a->ids, a->n, changed);
    case STORE_BLOCK:
        return exec_pairs(l, ST_BLOCK_ADD, a->user, &a->other, 1, changed);
    case STORE_UNBLOCK:
        return exec_pairs(l, ST_BLOCK_DEL, a->user, &a->other, 1, changed);
    case STORE_LASTSEEN_WRITE:
        return exec_lastseen_put(l, a, changed);
    case STORE_SAVED_PUT:
        return exec_saved_put(l, a, changed);
    default:
        abort(); /* store.c passes only writes here */
    }
}

/* Reads user's privacy into res; returns 0 or an error. */
static int read_privacy(struct lite *l, const char *user, struct store_result *res)
{
    sqlite3_stmt *st = bind2(l, ST_GET_PRIVACY, user, NULL);
    int rc = stmt_step(st);

    if (rc == SQLITE_DONE)
        return 0;
    if (rc != SQLITE_ROW)
        return map_sqlite(rc);
    res->privacy.online = store__vis_parse((const char *)sqlite3_column_text(st, 0));
    res->privacy.last_seen = store__vis_parse((const char *)sqlite3_column_text(st, 1));
    res->privacy.invisible = sqlite3_column_int(st, 2) != 0;
    res->found = true;
    stmt_done(st);
    return 0;
}

/* Sets *yes to whether the pair row exists. */
static int read_exists(struct lite *l, enum stmt k, const char *a, const char *b, bool *yes)
{
    sqlite3_stmt *st = bind2(l, k, a, b);
    int rc = stmt_step(st);

    if (rc == SQLITE_ROW) {
        stmt_done(st);
        *yes = true;
        return 0;
    }
    *yes = false;
    return rc == SQLITE_DONE ? 0 : map_sqlite(rc);
}

/* The owners that block target, into res->ids (malloc'd, see backend). */
static int read_blockers(struct lite *l, const char *target, struct store_result *res)
{
    sqlite3_stmt *st = bind2(l, ST_BLOCKERS, target, NULL);
    char **ids = NULL;
    size_t cap = 0;
    int rc;

    while ((rc = stmt_step(st)) == SQLITE_ROW) {
        if (res->nids == cap) {
            cap = cap ? cap * 2 : 4;
            ids = xrealloc(ids, cap * sizeof(*ids));
        }
        ids[res->nids++] = xstrdup((const char *)sqlite3_column_text(st, 0));
        res->ids = (const char *const *)ids;
    }
    return rc == SQLITE_DONE ? 0 : map_sqlite(rc);
}

/* The one number a COUNT(*) statement answers for owner. */
static int read_count(struct lite *l, enum stmt k, const char *owner, size_t *out)
{
    sqlite3_stmt *st = bind2(l, k, owner, NULL);
    int rc = stmt_step(st);

    if (rc != SQLITE_ROW)
        return rc == SQLITE_DONE ? STORE_E_SCHEMA : map_sqlite(rc);
    *out = (size_t)sqlite3_column_int64(st, 0);
    stmt_done(st);
    return 0;
}

/* get_summary: privacy, the two counts, the first blocked users. */
static int read_summary(struct lite *l, const char *owner, struct store_result *res)
{
    sqlite3_stmt *st;
    char **ids;
    int rc = read_privacy(l, owner, res);

    if (rc == 0)
        rc = read_count(l, ST_COUNT_CONTACTS, owner, &res->contacts);
    if (rc == 0)
        rc = read_count(l, ST_COUNT_BLOCKS, owner, &res->blocks);
    if (rc)
        return rc;
    _Static_assert(STORE_SUMMARY_BLOCKS_MAX == 100, "ST_BLOCKED's LIMIT");
    ids = xcalloc(STORE_SUMMARY_BLOCKS_MAX, sizeof(*ids));
    res->ids = (const char *const *)ids;
    st = bind2(l, ST_BLOCKED, owner, NULL);
    while ((rc = stmt_step(st)) == SQLITE_ROW && res->nids < STORE_SUMMARY_BLOCKS_MAX)
        ids[res->nids++] = xstrdup((const char *)sqlite3_column_text(st, 0));
    if (rc == SQLITE_ROW) { /* cannot happen with the LIMIT; never read on */
        stmt_done(st);
        rc = SQLITE_DONE;
    }
    return rc == SQLITE_DONE ? 0 : map_sqlite(rc);
}

/* One entry per user asked, in order; 0 when the user has no row. */
static int read_lastseen(struct lite *l, const struct store_args *a, struct store_result *res)
{
    struct store_lastseen *seen = xcalloc(a->n, sizeof(*seen));

    res->seen = seen;
    res->nseen = a->n;
    for (size_t i = 0; i < a->n; i++) {
        sqlite3_stmt *st = bind2(l, ST_LASTSEEN_GET, a->ids[i], NULL);
        int rc = stmt_step(st);

        seen[i].user = a->ids[i];
        if (rc == SQLITE_ROW) {
            seen[i].last_seen_ms = sqlite3_column_int64(st, 0);
            stmt_done(st);
        } else if (rc != SQLITE_DONE) {
            return map_sqlite(rc);
        }
    }
    return 0;
}

/* One page of rows after a->other (NULL: from the start), in user order. */
static int read_lastseen_page(struct lite *l, const struct store_args *a, struct store_result *res)
{
    sqlite3_stmt *st = bind2(l, ST_LASTSEEN_PAGE, a->other ? a->other : "", NULL);
    struct store_lastseen *seen = xcalloc(a->limit, sizeof(*seen));
    char **ids = xcalloc(a->limit, sizeof(*ids));
    int rc;

    res->seen = seen;
    res->ids = (const char *const *)ids;
    sqlite3_bind_int64(st, 2, a->since_ms);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)a->limit);
    while ((rc = stmt_step(st)) == SQLITE_ROW) {
        size_t k = res->nseen;

        /* LIMIT bounds the rows; a broken bound would overrun seen. */
        assert(k < a->limit);
        ids[k] = xstrdup((const char *)sqlite3_column_text(st, 0));
        seen[k] = (struct store_lastseen){ids[k], sqlite3_column_int64(st, 1)};
        res->nids = res->nseen = k + 1;
    }
    return rc == SQLITE_DONE ? 0 : map_sqlite(rc);
}

/* Every saved session, deleted by the same statement. */
static int read_saved_take(struct lite *l, struct store_result *res)
{
    sqlite3_stmt *st = l->stmt[ST_SAVED_TAKE];
    struct store_saved *rows = NULL;
    char **ids = NULL;
    size_t cap = 0;
    int rc;

    while ((rc = stmt_step(st)) == SQLITE_ROW) {
        size_t k = res->nsaved;

        if (k == cap) {
            cap = cap ? 2 * cap : 16;
            rows = xrealloc(rows, cap * sizeof(*rows));
            ids = xrealloc(ids, 2 * cap * sizeof(*ids));
        }
        ids[2 * k] = xstrdup((const char *)sqlite3_column_text(st, 0));
        ids[2 * k + 1] = xstrdup((const char *)sqlite3_column_text(st, 2));
        rows[k] = (struct store_saved){ids[2 * k], ids[2 * k + 1], sqlite3_column_int64(st, 1)};
        res->nsaved = k + 1;
        res->nids = 2 * (k + 1);
        res->saved = rows;
        res->ids = (const char *const *)ids;
    }
    return rc == SQLITE_DONE ? 0 : map_sqlite(rc);
}

static int lite_read(void *db, const struct store_args *a, struct store_result *res)
{
    struct lite *l = db;
    int err;

    if (a->kind == STORE_LASTSEEN_READ)
        return read_lastseen(l, a, res);
    if (a->kind == STORE_LASTSEEN_LOAD)
        return read_lastseen_page(l, a, res);
    if (a->kind == STORE_LIST_BLOCKERS)
        return read_blockers(l, a->user, res);
    if (a->kind == STORE_GET_SUMMARY)
        return read_summary(l, a->user, res);
    if (a->kind == STORE_SAVED_TAKE)
        return read_saved_take(l, res);
    err = read_privacy(l, a->user, res);

    if (err == 0 && a->kind == STORE_GET_RELATIONS)
        err = read_exists(l, ST_IS_CONTACT, a->user, a->other, &res->is_contact);
    if (err == 0 && a->kind == STORE_GET_RELATIONS)
        err = read_exists(l, ST_IS_BLOCKED, a->user, a->other, &res->blocked);
    return err;
}

static int lite_begin(void *db)
{
    struct lite *l = db;

    return map_sqlite(stmt_step(l->stmt[ST_BEGIN]));
}

/* With synchronous=FULL in WAL mode, COMMIT returns after the fsync. */
static int lite_commit(void *db)
{
    struct lite *l = db;

    return map_sqlite(stmt_step(l->stmt[ST_COMMIT]));
}

static void lite_rollback(void *db)
{
    struct lite *l = db;

    if (!sqlite3_get_autocommit(l->db))
        stmt_step(l->stmt[ST_ROLLBACK]);
}

/* ---- open and close ---- */

static int open_fail(sqlite3 *db, int rc, char *err, size_t errlen, const char *what,
                     const char *path)
{
    snprintf(err, errlen, "cannot %s %s: %s", what, path,
             db ? sqlite3_errmsg(db) : "out of memory");
    rc = map_sqlite(rc);
    return rc ? rc : STORE_E_IO;
}

/* Runs a pragma that answers one row; true when it answers want. */
static bool pragma_is(sqlite3 *db, const char *sql, const char *want, int *rc)
{
    sqlite3_stmt *st;
    bool yes;

    *rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (*rc != SQLITE_OK)
        return false;
    *rc = sqlite3_step(st);
    yes = *rc == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(st, 0), want) == 0;
    sqlite3_finalize(st);
    return yes;
}

/*
 * Sets exclusive locking, then WAL and FULL sync, and checks that both
 * modes took effect. The order matters: exclusive locking set before the
 * first WAL access keeps the WAL index in this process's heap, never in a
 * shared mapping of <path>-shm, which SIGBUSes the process (even on a read)
 * once that file is truncated or cannot be written. The price is that no
 * other process can open the file while the store has it.
 */
static int configure(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    int rc;

    sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
    if (!pragma_is(db, "PRAGMA locking_mode=EXCLUSIVE", "exclusive", &rc))
        return open_fail(db, rc, err, errlen, "lock", path);
    if (!pragma_is(db, "PRAGMA journal_mode=WAL", "wal", &rc))
        return open_fail(db, rc, err, errlen, "enable WAL on", path);
    rc = sqlite3_exec(db, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return open_fail(db, rc, err, errlen, "configure", path);
    return 0;
}

static int user_version(sqlite3 *db, int *v)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);

    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/*
 * Creates the tables (idempotent) and stamps user_version in one
 * transaction. Every version so far only added tables, so the one script
 * migrates any older version too (1 -> 2: the last_seen table; 2 -> 3:
 * saved_sessions). A later
 * version that changes a table adds a step here, guarded by the version
 * read before it.
 */
static int create_schema(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    int v = 0, rc = user_version(db, &v);
    char sql[sizeof(schema_sql) + 64];

    if (rc != SQLITE_OK)
        return open_fail(db, rc, err, errlen, "read schema version of", path);
    if (v > STORE_SCHEMA_VERSION) {
        snprintf(err, errlen, "database %s has schema version %d, newer than %d", path, v,
                 STORE_SCHEMA_VERSION);
        return STORE_E_SCHEMA;
    }
    snprintf(sql, sizeof(sql), "BEGIN IMMEDIATE;%sPRAGMA user_version=%d;COMMIT;", schema_sql,
             STORE_SCHEMA_VERSION);
    rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        rc = open_fail(db, rc, err, errlen, "create schema in", path);
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return rc;
    }
    return 0;
}

/*
 * A statement that does not prepare on a database whose version is ours
 * means tables or columns are missing or renamed: a damaged schema, as
 * PostgreSQL reports it, not an I/O error.
 */
static int prepare_all(struct lite *l, const char *path, char *err, size_t errlen)
{
    for (int k = 0; k < ST_COUNT; k++) {
        int rc = sqlite3_prepare_v3(l->db, stmt_sql[k], -1, SQLITE_PREPARE_PERSISTENT, &l->stmt[k],
                                    NULL);

        if (rc != SQLITE_OK) {
            rc = open_fail(l->db, rc, err, errlen, "prepare statements for", path);
            return rc == STORE_E_IO ? STORE_E_SCHEMA : rc;
        }
    }
    return 0;
}

/* ---- the files under the path ---- */

/*
 * Remembers which -wal file the connection has open: the one its name
 * gives right after the schema was written (SQLite keeps that file open
 * and never recreates it while the connection lives).
 */
static int note_wal(struct lite *l, const char *path, char *err, size_t errlen)
{
    const char *wal = sqlite3_filename_wal(sqlite3_db_filename(l->db, "main"));
    struct stat st;

    if (!wal || stat(wal, &st) != 0) {
        snprintf(err, errlen, "cannot find the write-ahead log of %s", path);
        return STORE_E_IO;
    }
    l->wal_dev = st.st_dev;
    l->wal_ino = st.st_ino;
    return 0;
}

/*
 * The database is gone when its path, or its -wal's, no longer names the
 * file the connection has open: deleted, renamed or replaced. SQLite would
 * go on writing into the open files, and a restart would find a new empty
 * database (or lose the log) where they were.
 */
static int lite_check(void *db)
{
    struct lite *l = db;
    const char *wal = sqlite3_filename_wal(sqlite3_db_filename(l->db, "main"));
    int moved = 0;
    struct stat st;

    if (sqlite3_file_control(l->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) != SQLITE_OK || moved)
        return STORE_E_GONE;
    if (stat(wal, &st) != 0 || st.st_dev != l->wal_dev || st.st_ino != l->wal_ino)
        return STORE_E_GONE;
    return 0;
}

static void lite_close(void *db)
{
    struct lite *l = db;

    if (!l)
        return;
    for (int k = 0; k < ST_COUNT; k++)
        sqlite3_finalize(l->stmt[k]);
    sqlite3_close(l->db);
    free(l);
}

static int lite_open(const char *path, void **db, char *err, size_t errlen)
{
    struct lite *l = xcalloc(1, sizeof(*l));
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    int rc = sqlite3_open_v2(path, &l->db, flags, NULL);

    if (rc != SQLITE_OK) {
        rc = open_fail(l->db, rc, err, errlen, "open database", path);
        goto out_close;
    }
    sqlite3_extended_result_codes(l->db, 1);
    rc = configure(l->db, path, err, errlen);
    if (rc == 0)
        rc = create_schema(l->db, path, err, errlen);
    if (rc == 0)
        rc = prepare_all(l, path, err, errlen);
    if (rc == 0)
        rc = note_wal(l, path, err, errlen);
    if (rc)
        goto out_close;
    *db = l;
    return 0;
out_close:
    lite_close(l);
    return rc;
}

const struct store_backend store__sqlite = {
    .name = "sqlite",
    .open = lite_open,
    .close = lite_close,
    .ready = NULL,
    .check = lite_check,
    .begin = lite_begin,
    .commit = lite_commit,
    .rollback = lite_rollback,
    .write = lite_write,
    .read = lite_read,
};
