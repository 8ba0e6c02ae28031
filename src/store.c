/* SPDX-License-Identifier: MIT */
/*
 * store.c - the SQLite settings store: one database thread, a request
 * queue in front of it and completion inboxes behind it.
 *
 * Exports the store_* API of store.h. It does not cache, does not decide
 * visibility and does not log: errors travel back as statuses.
 */
#include "store.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <sqlite3.h>

#define BUSY_TIMEOUT_MS 5000 /* waiting for a lock held by another process */

enum op {
    OP_SET_PRIVACY,
    OP_CONTACTS_ADD,
    OP_CONTACTS_REMOVE,
    OP_CONTACTS_REPLACE,
    OP_BLOCK,
    OP_UNBLOCK,
    OP_LAST_WRITE = OP_UNBLOCK, /* ops up to here are writes */
    OP_GET_PRIVACY,
    OP_GET_RELATIONS,
};

/* One request, from submission to its callback. */
struct req {
    struct req *next; /* in the store queue, then in the inbox */
    enum op op;
    char *user;  /* owner */
    char *other; /* viewer or block target; NULL if unused */
    char **ids;  /* contacts calls: n copies */
    size_t n;
    struct store_privacy priv; /* set_privacy */
    store_cb *cb;
    void *ctx;
    struct store_inbox *inbox; /* where the completion goes */
    int status;
    struct store_result result;
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
};

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
    ") WITHOUT ROWID;";

static const char *const vis_name[] = {"everyone", "contacts", "nobody"};

struct store {
    sqlite3 *db;
    sqlite3_stmt *stmt[ST_COUNT]; /* prepared once, used by the thread only */
    pthread_t thread;
    pthread_mutex_t lock;  /* protects queue and closing */
    pthread_cond_t wake;   /* signalled on submit and close */
    struct req_list queue; /* submitted, not yet taken by the thread */
    bool closing;
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

static void req_free(struct req *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->ids[i]);
    free(r->ids);
    free(r->user);
    free(r->other);
    free(r);
}

static bool vis_is_valid(enum store_visibility v)
{
    return v == STORE_VIS_EVERYONE || v == STORE_VIS_CONTACTS || v == STORE_VIS_NOBODY;
}

static enum store_visibility vis_parse(const unsigned char *s)
{
    for (size_t i = 0; i < ARRAY_SIZE(vis_name); i++)
        if (s && strcmp((const char *)s, vis_name[i]) == 0)
            return (enum store_visibility)i;
    return STORE_VIS_NOBODY; /* unknown text: the most private reading */
}

/* ---- the database thread: statements ---- */

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

static sqlite3_stmt *bind2(struct store *s, enum stmt k, const char *a, const char *b)
{
    sqlite3_stmt *st = s->stmt[k];

    sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
    if (b)
        sqlite3_bind_text(st, 2, b, -1, SQLITE_STATIC);
    return st;
}

/* Runs a pair statement (owner, x) for each x; counts changed rows. */
static int exec_pairs(struct store *s, enum stmt k, const char *owner, char *const *xs, size_t n,
                      size_t *changed)
{
    for (size_t i = 0; i < n; i++) {
        int rc = stmt_step(bind2(s, k, owner, xs[i]));

        if (rc != SQLITE_DONE)
            return map_sqlite(rc);
        *changed += (size_t)sqlite3_changes(s->db);
    }
    return 0;
}

static int exec_set_privacy(struct store *s, struct req *r)
{
    sqlite3_stmt *st = bind2(s, ST_SET_PRIVACY, r->user, NULL);
    int rc;

    sqlite3_bind_text(st, 2, vis_name[r->priv.online], -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, vis_name[r->priv.last_seen], -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, r->priv.invisible ? 1 : 0);
    rc = stmt_step(st);
    if (rc != SQLITE_DONE)
        return map_sqlite(rc);
    r->result.changed = 1;
    return 0;
}

/* Applies one write inside the current transaction. */
static int exec_write(struct store *s, struct req *r)
{
    size_t *changed = &r->result.changed;
    int err;

    *changed = 0;
    switch (r->op) {
    case OP_SET_PRIVACY:
        return exec_set_privacy(s, r);
    case OP_CONTACTS_ADD:
        return exec_pairs(s, ST_CONTACT_ADD, r->user, r->ids, r->n, changed);
    case OP_CONTACTS_REMOVE:
        return exec_pairs(s, ST_CONTACT_DEL, r->user, r->ids, r->n, changed);
    case OP_CONTACTS_REPLACE:
        err = map_sqlite(stmt_step(bind2(s, ST_CONTACT_CLEAR, r->user, NULL)));
        if (err == 0)
            *changed += (size_t)sqlite3_changes(s->db);
        return err ? err : exec_pairs(s, ST_CONTACT_ADD, r->user, r->ids, r->n, changed);
    case OP_BLOCK:
        return exec_pairs(s, ST_BLOCK_ADD, r->user, &r->other, 1, changed);
    case OP_UNBLOCK:
        return exec_pairs(s, ST_BLOCK_DEL, r->user, &r->other, 1, changed);
    default:
        abort(); /* only writes are passed here */
    }
}

/* Reads user's privacy into res; returns 0 or an error. */
static int read_privacy(struct store *s, const char *user, struct store_result *res)
{
    sqlite3_stmt *st = bind2(s, ST_GET_PRIVACY, user, NULL);
    int rc = stmt_step(st);

    if (rc == SQLITE_DONE) {
        res->privacy = (struct store_privacy){0};
        res->found = false;
        return 0;
    }
    if (rc != SQLITE_ROW)
        return map_sqlite(rc);
    res->privacy.online = vis_parse(sqlite3_column_text(st, 0));
    res->privacy.last_seen = vis_parse(sqlite3_column_text(st, 1));
    res->privacy.invisible = sqlite3_column_int(st, 2) != 0;
    res->found = true;
    stmt_done(st);
    return 0;
}

/* Sets *yes to whether the pair row exists. */
static int read_exists(struct store *s, enum stmt k, const char *a, const char *b, bool *yes)
{
    sqlite3_stmt *st = bind2(s, k, a, b);
    int rc = stmt_step(st);

    if (rc == SQLITE_ROW) {
        stmt_done(st);
        *yes = true;
        return 0;
    }
    *yes = false;
    return rc == SQLITE_DONE ? 0 : map_sqlite(rc);
}

/* Runs one read; on error the result is the most private answer. */
static void exec_read(struct store *s, struct req *r)
{
    struct store_result *res = &r->result;
    int err = read_privacy(s, r->user, res);

    if (err == 0 && r->op == OP_GET_RELATIONS)
        err = read_exists(s, ST_IS_CONTACT, r->user, r->other, &res->is_contact);
    if (err == 0 && r->op == OP_GET_RELATIONS)
        err = read_exists(s, ST_IS_BLOCKED, r->user, r->other, &res->blocked);
    r->status = err;
    if (err)
        *res = result_private();
}

/* ---- the database thread: batches and completions ---- */

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

static void rollback(struct store *s)
{
    if (!sqlite3_get_autocommit(s->db))
        stmt_step(s->stmt[ST_ROLLBACK]);
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
    struct req *r = first;
    int err = map_sqlite(stmt_step(s->stmt[ST_BEGIN]));

    for (size_t i = 0; i < n && err == 0; i++, r = r->next)
        err = exec_write(s, r);
    if (err == 0)
        err = map_sqlite(stmt_step(s->stmt[ST_COMMIT]));
    if (err == 0) {
        for (r = first; n--; r = r->next)
            r->status = 0;
        return;
    }
    rollback(s);
    if (n == 1) {
        first->status = err;
        first->result = (struct store_result){0};
        return;
    }
    for (r = first; n--; r = r->next)
        run_writes(s, r, 1);
}

/* Runs a batch in order and posts every completion after its commit. */
static void run_batch(struct store *s, struct req *r)
{
    while (r) {
        struct req *next;
        size_t n = 1;

        if (r->op <= OP_LAST_WRITE) {
            struct req *last = r;

            while (last->next && last->next->op <= OP_LAST_WRITE) {
                last = last->next;
                n++;
            }
            run_writes(s, r, n);
        } else {
            exec_read(s, r);
        }
        for (; n--; r = next) {
            next = r->next;
            inbox_post(r->inbox, r);
        }
    }
}

static void *store_thread(void *arg)
{
    struct store *s = arg;

    for (;;) {
        struct req *batch;

        pthread_mutex_lock(&s->lock);
        while (!s->queue.head && !s->closing)
            pthread_cond_wait(&s->wake, &s->lock);
        batch = s->queue.head;
        s->queue = (struct req_list){0};
        pthread_mutex_unlock(&s->lock);
        if (!batch)
            return NULL; /* closing and nothing left */
        run_batch(s, batch);
    }
}

/* ---- open and close ---- */

static int open_fail(sqlite3 *db, char *err, size_t errlen, const char *what, const char *path)
{
    snprintf(err, errlen, "cannot %s %s: %s", what, path,
             db ? sqlite3_errmsg(db) : "out of memory");
    return -1;
}

/* Sets WAL and FULL sync, and checks that WAL really took effect. */
static int configure(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    bool wal;

    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &st, NULL) != SQLITE_OK)
        return open_fail(db, err, errlen, "open database", path);
    wal = sqlite3_step(st) == SQLITE_ROW &&
          strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
    sqlite3_finalize(st);
    if (!wal)
        return open_fail(db, err, errlen, "enable WAL on", path);
    if (sqlite3_exec(db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) != SQLITE_OK)
        return open_fail(db, err, errlen, "configure", path);
    sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
    return 0;
}

static int user_version(sqlite3 *db)
{
    sqlite3_stmt *st;
    int v = -1;

    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

/*
 * Creates the tables (idempotent) and stamps user_version in one
 * transaction. Later versions add migration steps here, each guarded by
 * the version read before it.
 */
static int create_schema(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    int v = user_version(db);
    char sql[sizeof(schema_sql) + 64];

    if (v < 0)
        return open_fail(db, err, errlen, "read schema version of", path);
    if (v > STORE_SCHEMA_VERSION) {
        snprintf(err, errlen, "database %s has schema version %d, newer than %d", path, v,
                 STORE_SCHEMA_VERSION);
        return -1;
    }
    snprintf(sql, sizeof(sql), "BEGIN IMMEDIATE;%sPRAGMA user_version=%d;COMMIT;", schema_sql,
             STORE_SCHEMA_VERSION);
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        open_fail(db, err, errlen, "create schema in", path);
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}

static int prepare_all(struct store *s, const char *path, char *err, size_t errlen)
{
    for (int k = 0; k < ST_COUNT; k++)
        if (sqlite3_prepare_v3(s->db, stmt_sql[k], -1, SQLITE_PREPARE_PERSISTENT, &s->stmt[k],
                               NULL) != SQLITE_OK)
            return open_fail(s->db, err, errlen, "prepare statements for", path);
    return 0;
}

static void finalize_all(struct store *s)
{
    for (int k = 0; k < ST_COUNT; k++)
        sqlite3_finalize(s->stmt[k]);
}

struct store *store_open(const char *path, char *err, size_t errlen)
{
    struct store *s = xcalloc(1, sizeof(*s));
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;

    if (sqlite3_open_v2(path, &s->db, flags, NULL) != SQLITE_OK) {
        open_fail(s->db, err, errlen, "open database", path);
        goto out_db;
    }
    sqlite3_extended_result_codes(s->db, 1);
    if (configure(s->db, path, err, errlen) || create_schema(s->db, path, err, errlen) ||
        prepare_all(s, path, err, errlen))
        goto out_stmt;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    if (pthread_create(&s->thread, NULL, store_thread, s) != 0) {
        snprintf(err, errlen, "cannot start database thread for %s", path);
        goto out_sync;
    }
    return s;
out_sync:
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
out_stmt:
    finalize_all(s);
out_db:
    sqlite3_close(s->db);
    free(s);
    return NULL;
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
    finalize_all(s);
    sqlite3_close(s->db);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
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
    case -EINVAL:
        return "invalid user id or privacy value";
    case -E2BIG:
        return "too many ids in one call";
    default:
        return status < 0 && status > -PS_EBASE ? strerror(-status) : "unknown store error";
    }
}

bool store_id_is_valid(const char *id)
{
    size_t n = 0;

    if (!id)
        return false;
    for (; id[n]; n++) {
        unsigned char c = (unsigned char)id[n];

        if (n == STORE_ID_MAX)
            return false;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("-_.~:@", c)))
            return false;
    }
    return n > 0;
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

    (void)got; /* EAGAIN: nothing signalled, the list may still hold work */
    pthread_mutex_lock(&in->lock);
    r = in->done.head;
    in->done = (struct req_list){0};
    pthread_mutex_unlock(&in->lock);
    for (; r; r = next, n++) {
        next = r->next;
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

static struct req *req_new(enum op op, const char *user, const char *other, store_cb *cb, void *ctx)
{
    struct req *r = xcalloc(1, sizeof(*r));

    r->op = op;
    r->user = xstrdup(user);
    r->other = other ? xstrdup(other) : NULL;
    r->cb = cb;
    r->ctx = ctx;
    return r;
}

static int submit(struct store *s, struct store_inbox *in, struct req *r)
{
    r->inbox = in;
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

static int submit_ids(struct store *s, struct store_inbox *in, enum op op, const char *owner,
                      const char *const *ids, size_t n, store_cb *cb, void *ctx)
{
    int err = check_ids(ids, n);
    struct req *r;

    if (err)
        return err;
    if (!store_id_is_valid(owner))
        return -EINVAL;
    r = req_new(op, owner, NULL, cb, ctx);
    r->ids = xcalloc(n ? n : 1, sizeof(*r->ids));
    r->n = n;
    for (size_t i = 0; i < n; i++)
        r->ids[i] = xstrdup(ids[i]);
    return submit(s, in, r);
}

static int submit_pair(struct store *s, struct store_inbox *in, enum op op, const char *owner,
                       const char *other, store_cb *cb, void *ctx)
{
    if (!store_id_is_valid(owner) || !store_id_is_valid(other))
        return -EINVAL;
    return submit(s, in, req_new(op, owner, other, cb, ctx));
}

int store_set_privacy(struct store *s, struct store_inbox *in, const char *user,
                      const struct store_privacy *p, store_cb *cb, void *ctx)
{
    struct req *r;

    if (!store_id_is_valid(user) || !p || !vis_is_valid(p->online) || !vis_is_valid(p->last_seen))
        return -EINVAL;
    r = req_new(OP_SET_PRIVACY, user, NULL, cb, ctx);
    r->priv = *p;
    return submit(s, in, r);
}

int store_get_privacy(struct store *s, struct store_inbox *in, const char *user, store_cb *cb,
                      void *ctx)
{
    if (!store_id_is_valid(user))
        return -EINVAL;
    return submit(s, in, req_new(OP_GET_PRIVACY, user, NULL, cb, ctx));
}

int store_contacts_add(struct store *s, struct store_inbox *in, const char *owner,
                       const char *const *ids, size_t n, store_cb *cb, void *ctx)
{
    return submit_ids(s, in, OP_CONTACTS_ADD, owner, ids, n, cb, ctx);
}

int store_contacts_remove(struct store *s, struct store_inbox *in, const char *owner,
                          const char *const *ids, size_t n, store_cb *cb, void *ctx)
{
    return submit_ids(s, in, OP_CONTACTS_REMOVE, owner, ids, n, cb, ctx);
}

int store_contacts_replace(struct store *s, struct store_inbox *in, const char *owner,
                           const char *const *ids, size_t n, store_cb *cb, void *ctx)
{
    return submit_ids(s, in, OP_CONTACTS_REPLACE, owner, ids, n, cb, ctx);
}

int store_block(struct store *s, struct store_inbox *in, const char *owner, const char *target,
                store_cb *cb, void *ctx)
{
    return submit_pair(s, in, OP_BLOCK, owner, target, cb, ctx);
}

int store_unblock(struct store *s, struct store_inbox *in, const char *owner, const char *target,
                  store_cb *cb, void *ctx)
{
    return submit_pair(s, in, OP_UNBLOCK, owner, target, cb, ctx);
}

int store_get_relations(struct store *s, struct store_inbox *in, const char *owner,
                        const char *viewer, store_cb *cb, void *ctx)
{
    return submit_pair(s, in, OP_GET_RELATIONS, owner, viewer, cb, ctx);
}
