/* SPDX-License-Identifier: MIT */
/*
 * store_pg.c - the PostgreSQL backend of the settings store, on libpq: one
 * blocking connection owned by the database thread, statements prepared
 * once per connection, the schema version in the presenced_schema table.
 *
 * Exports store__pg (store_backend.h). Every value travels as a query
 * parameter (a contacts list as one binary text[] parameter), never inside
 * SQL text. A call that finds the connection lost fails with STORE_E_IO;
 * only pg_ready(), before each batch, reconnects. Does not log: libpq's
 * notices are swallowed and its errors become STORE_E_* codes.
 */
#include "store_backend.h"

#include <arpa/inet.h>
#include <assert.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "util.h"

#define OID_BOOL       16
#define OID_TEXT       25
#define OID_TEXT_ARRAY 1009
#define OID_INT8       20
#define OID_INT8_ARRAY 1016
#define IDLE_READS_MAX 4 /* reads of an idle socket before giving up on it */

/*
 * Connection defaults. They come before "dbname" (the URI) in the keyword
 * list, so a URI that sets any of them wins: connect_timeout bounds every
 * (re)connection, keepalives and tcp_user_timeout find a dead server under
 * an open connection, and the timeouts bound a statement stuck on a lock.
 */
static const char *const conn_keys[] = {
    "connect_timeout",  "keepalives_idle",  "keepalives_interval",
    "keepalives_count", "tcp_user_timeout", "fallback_application_name",
    "options",          "dbname",           NULL,
};
static const char *const conn_vals[] = {
    "5",  "30", "10", "3", "30000", "presenced", "-c statement_timeout=30s -c lock_timeout=5s",
    NULL, /* the URI */
    NULL,
};
#define CONN_URI 7 /* index of "dbname" above */

/* Version 0 -> 1. Ids compare bytewise (COLLATE "C"), as in SQLite. */
static const char schema_v1[] =
    "CREATE TABLE IF NOT EXISTS presenced_privacy ("
    " user_id text COLLATE \"C\" PRIMARY KEY,"
    " online_visibility text NOT NULL DEFAULT 'everyone'"
    "  CHECK (online_visibility IN ('everyone', 'contacts', 'nobody')),"
    " last_seen_visibility text NOT NULL DEFAULT 'everyone'"
    "  CHECK (last_seen_visibility IN ('everyone', 'contacts', 'nobody')),"
    " invisible boolean NOT NULL DEFAULT false);"
    "CREATE TABLE IF NOT EXISTS presenced_contacts ("
    " owner text COLLATE \"C\" NOT NULL, contact text COLLATE \"C\" NOT NULL,"
    " PRIMARY KEY (owner, contact));"
    "CREATE TABLE IF NOT EXISTS presenced_blocks ("
    " owner text COLLATE \"C\" NOT NULL, blocked text COLLATE \"C\" NOT NULL,"
    " PRIMARY KEY (owner, blocked));"
    "CREATE INDEX IF NOT EXISTS presenced_blocks_by_blocked"
    " ON presenced_blocks (blocked, owner);";

/* Version 1 -> 2: last seen, wall ms per user. */
static const char schema_v2[] = "CREATE TABLE IF NOT EXISTS presenced_last_seen ("
                                " user_id text COLLATE \"C\" PRIMARY KEY,"
                                " last_seen_ms bigint NOT NULL CHECK (last_seen_ms > 0));";

/* Version 2 -> 3: the sessions saved at a clean stop (persist.h). */
static const char schema_v3[] = "CREATE TABLE IF NOT EXISTS presenced_saved_sessions ("
                                " sid text COLLATE \"C\" PRIMARY KEY,"
                                " saved_ms bigint NOT NULL CHECK (saved_ms > 0),"
                                " data text NOT NULL);";

/* migrate_sql[v] takes the schema from version v to v + 1. */
static const char *const migrate_sql[STORE_SCHEMA_VERSION] = {schema_v1, schema_v2, schema_v3};

enum stmt {
    ST_GET_PRIVACY,
    ST_SET_PRIVACY,
    ST_CONTACTS_ADD,
    ST_CONTACTS_DEL,
    ST_CONTACTS_CLEAR,
    ST_BLOCK_ADD,
    ST_BLOCK_DEL,
    ST_RELATIONS,
    ST_BLOCKERS,
    ST_SUMMARY,
    ST_BLOCKED,
    ST_LASTSEEN_PUT,
    ST_LASTSEEN_GET,
    ST_LASTSEEN_PAGE,
    ST_SAVED_CLEAR,
    ST_SAVED_ADD,
    ST_SAVED_TAKE,
    ST_COUNT,
};

struct stmt_def {
    const char *name; /* prepared statement name */
    const char *sql;
    int nparams;
    Oid types[4]; /* parameter types */
};

static const struct stmt_def stmts[ST_COUNT] = {
    [ST_GET_PRIVACY] = {"presenced_get_privacy",
                        "SELECT online_visibility, last_seen_visibility, invisible"
                        " FROM presenced_privacy WHERE user_id = $1",
                        1,
                        {OID_TEXT}},
    [ST_SET_PRIVACY] = {"presenced_set_privacy",
                        "INSERT INTO presenced_privacy (user_id, online_visibility,"
                        " last_seen_visibility, invisible) VALUES ($1, $2, $3, $4)"
                        " ON CONFLICT (user_id) DO UPDATE SET"
                        " online_visibility = EXCLUDED.online_visibility,"
                        " last_seen_visibility = EXCLUDED.last_seen_visibility,"
                        " invisible = EXCLUDED.invisible",
                        4,
                        {OID_TEXT, OID_TEXT, OID_TEXT, OID_BOOL}},
    [ST_CONTACTS_ADD] = {"presenced_contacts_add",
                         "INSERT INTO presenced_contacts (owner, contact)"
                         " SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING",
                         2,
                         {OID_TEXT, OID_TEXT_ARRAY}},
    [ST_CONTACTS_DEL] = {"presenced_contacts_del",
                         "DELETE FROM presenced_contacts WHERE owner = $1"
                         " AND contact = ANY ($2::text[])",
                         2,
                         {OID_TEXT, OID_TEXT_ARRAY}},
    [ST_CONTACTS_CLEAR] = {"presenced_contacts_clear",
                           "DELETE FROM presenced_contacts WHERE owner = $1",
                           1,
                           {OID_TEXT}},
    [ST_BLOCK_ADD] = {"presenced_block_add",
                      "INSERT INTO presenced_blocks (owner, blocked) VALUES ($1, $2)"
                      " ON CONFLICT DO NOTHING",
                      2,
                      {OID_TEXT, OID_TEXT}},
    [ST_BLOCK_DEL] = {"presenced_block_del",
                      "DELETE FROM presenced_blocks WHERE owner = $1 AND blocked = $2",
                      2,
                      {OID_TEXT, OID_TEXT}},
    [ST_RELATIONS] = {"presenced_relations",
                      "SELECT p.online_visibility, p.last_seen_visibility, p.invisible,"
                      " EXISTS (SELECT 1 FROM presenced_contacts c"
                      "  WHERE c.owner = $1 AND c.contact = $2),"
                      " EXISTS (SELECT 1 FROM presenced_blocks b"
                      "  WHERE b.owner = $1 AND b.blocked = $2)"
                      " FROM (SELECT 1) AS one"
                      " LEFT JOIN presenced_privacy p ON p.user_id = $1",
                      2,
                      {OID_TEXT, OID_TEXT}},
    [ST_BLOCKERS] = {"presenced_blockers",
                     "SELECT owner FROM presenced_blocks WHERE blocked = $1 LIMIT 10000",
                     1,
                     {OID_TEXT}},
    [ST_SUMMARY] = {"presenced_summary",
                    "SELECT p.online_visibility, p.last_seen_visibility, p.invisible,"
                    " (SELECT count(*) FROM presenced_contacts WHERE owner = $1),"
                    " (SELECT count(*) FROM presenced_blocks WHERE owner = $1)"
                    " FROM (SELECT 1) AS one LEFT JOIN presenced_privacy p ON p.user_id = $1",
                    1,
                    {OID_TEXT}},
    [ST_BLOCKED] = {"presenced_blocked",
                    "SELECT blocked FROM presenced_blocks WHERE owner = $1"
                    " ORDER BY blocked LIMIT 100",
                    1,
                    {OID_TEXT}},
    /*
     * One statement per batch. GROUP BY keeps the max of a user named
     * twice (ON CONFLICT may not touch a row twice in one statement);
     * ORDER BY takes the rows' locks in one order, so that nodes sharing
     * the database cannot deadlock on each other's batches.
     */
    [ST_LASTSEEN_PUT] = {"presenced_lastseen_put",
                         "INSERT INTO presenced_last_seen (user_id, last_seen_ms)"
                         " SELECT u, max(t) FROM unnest($1::text[], $2::int8[]) AS b(u, t)"
                         " GROUP BY u ORDER BY u"
                         " ON CONFLICT (user_id) DO UPDATE"
                         " SET last_seen_ms = EXCLUDED.last_seen_ms"
                         " WHERE EXCLUDED.last_seen_ms > presenced_last_seen.last_seen_ms",
                         2,
                         {OID_TEXT_ARRAY, OID_INT8_ARRAY}},
    [ST_LASTSEEN_GET] = {"presenced_lastseen_get",
                         "SELECT q.i, l.last_seen_ms"
                         " FROM unnest($1::text[]) WITH ORDINALITY AS q(u, i)"
                         " JOIN presenced_last_seen l ON l.user_id = q.u",
                         1,
                         {OID_TEXT_ARRAY}},
    [ST_LASTSEEN_PAGE] = {"presenced_lastseen_page",
                          "SELECT user_id, last_seen_ms FROM presenced_last_seen"
                          " WHERE user_id > $1 AND last_seen_ms >= $2"
                          " ORDER BY user_id LIMIT $3",
                          3,
                          {OID_TEXT, OID_INT8, OID_INT8}},
    [ST_SAVED_CLEAR] = {"presenced_saved_clear", "DELETE FROM presenced_saved_sessions", 0, {0}},
    [ST_SAVED_ADD] = {"presenced_saved_add",
                      "INSERT INTO presenced_saved_sessions (sid, saved_ms, data)"
                      " SELECT s, t, d FROM unnest($1::text[], $2::int8[], $3::text[])"
                      " AS b(s, t, d) ON CONFLICT (sid) DO NOTHING",
                      3,
                      {OID_TEXT_ARRAY, OID_INT8_ARRAY, OID_TEXT_ARRAY}},
    /* One statement: what is read is gone, atomically. */
    [ST_SAVED_TAKE] = {"presenced_saved_take",
                       "DELETE FROM presenced_saved_sessions RETURNING sid, saved_ms, data",
                       0,
                       {0}},
};

struct pg {
    char *spec;   /* the URI, for reconnecting; holds the password */
    PGconn *conn; /* NULL while disconnected */
    bool doomed;  /* the server said FATAL while conn was idle */
};

/* ---- errors ---- */

static bool state_is(const char *state, const char *prefix)
{
    return strncmp(state, prefix, strlen(prefix)) == 0;
}

/* Maps an SQLSTATE to a STORE_E_* code. */
static int map_state(const char *s)
{
    if (state_is(s, "53100"))
        return STORE_E_FULL;
    if (state_is(s, "XX001") || state_is(s, "XX002"))
        return STORE_E_CORRUPT;
    if (state_is(s, "25006") || state_is(s, "42501"))
        return STORE_E_READONLY;
    if (state_is(s, "40") || state_is(s, "55P03") || state_is(s, "57014"))
        return STORE_E_BUSY;
    if (state_is(s, "42") || state_is(s, "23") || state_is(s, "22"))
        return STORE_E_SCHEMA;
    return STORE_E_IO; /* 08 connection, 57P0x shutdown, 53 resources, ... */
}

/* The code for a failed result on conn: a lost connection is always I/O. */
static int map_pg(PGconn *conn, const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

    if (PQstatus(conn) != CONNECTION_OK || !state)
        return STORE_E_IO;
    return map_state(state);
}

/* Writes "what: libpq's message" to err, on one line. */
static void describe(char *err, size_t errlen, const char *what, PGconn *conn)
{
    const char *msg = conn ? PQerrorMessage(conn) : "out of memory";
    size_t n;

    snprintf(err, errlen, "%s: %s", what, *msg ? msg : "unknown error");
    for (n = strlen(err); n > 0 && (err[n - 1] == '\n' || err[n - 1] == ' '); n--)
        err[n - 1] = '\0';
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
}

/*
 * Notices ("relation already exists, skipping") are not errors of any
 * request: drop them. An error that arrives while the connection is idle
 * comes here too, and a FATAL one is a backend's last words before it
 * closes the socket (shutdown, restart, pg_terminate_backend).
 */
static void notice_receive(void *arg, const PGresult *res)
{
    struct pg *pg = arg;
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);

    if (sev && (strcmp(sev, "FATAL") == 0 || strcmp(sev, "PANIC") == 0))
        pg->doomed = true;
}

/* ---- statements ---- */

static bool alive(const struct pg *pg)
{
    return pg->conn && PQstatus(pg->conn) == CONNECTION_OK;
}

/* Keeps res in *out (when out is not NULL) if it succeeded, else frees it
 * and returns its error. */
static int take(PGconn *conn, PGresult *res, PGresult **out)
{
    ExecStatusType st = PQresultStatus(res);
    int err;

    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        if (out)
            *out = res;
        else
            PQclear(res);
        return 0;
    }
    err = map_pg(conn, res);
    PQclear(res);
    return err;
}

/* Runs constant SQL (no parameters) on conn. */
static int simple(PGconn *conn, const char *sql, PGresult **out)
{
    return take(conn, PQexec(conn, sql), out);
}

/* Runs prepared statement k; lens and fmts may be NULL (all text). */
static int run(struct pg *pg, enum stmt k, const char *const *vals, const int *lens,
               const int *fmts, PGresult **out)
{
    if (!alive(pg))
        return STORE_E_IO;
    return take(pg->conn,
                PQexecPrepared(pg->conn, stmts[k].name, stmts[k].nparams, vals, lens, fmts, 0),
                out);
}

/* Runs a write and adds the rows it touched to *changed. */
static int run_count(struct pg *pg, enum stmt k, const char *const *vals, const int *lens,
                     const int *fmts, size_t *changed)
{
    PGresult *res;
    int err = run(pg, k, vals, lens, fmts, &res);

    if (err)
        return err;
    *changed += (size_t)strtoul(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    return 0;
}

static char *put32(char *p, uint32_t v)
{
    v = htonl(v);
    memcpy(p, &v, 4);
    return p + 4;
}

/*
 * Encodes ids as a one-dimensional text[] in the binary send format:
 * ndim, has-nulls flag, element type, then (length, lower bound) and
 * (byte length, bytes) per element. Returns the buffer (free() it) and its
 * length in *len.
 */
static char *encode_ids(char *const *ids, size_t n, int *len)
{
    size_t size = 20;
    char *buf, *p;

    for (size_t i = 0; i < n; i++)
        size += 4 + strlen(ids[i]);
    buf = xmalloc(size);
    p = put32(buf, 1);
    p = put32(p, 0);
    p = put32(p, OID_TEXT);
    p = put32(p, (uint32_t)n);
    p = put32(p, 1);
    for (size_t i = 0; i < n; i++) {
        size_t k = strlen(ids[i]);

        p = put32(p, (uint32_t)k);
        memcpy(p, ids[i], k);
        p += k;
    }
    *len = (int)size;
    return buf;
}

/* Encodes times as a one-dimensional int8[] in the binary send format
 * (as encode_ids(), with 8-byte big-endian elements). */
static char *encode_times(const int64_t *times, size_t n, int *len)
{
    size_t size = 20 + 12 * n;
    char *buf = xmalloc(size), *p;

    p = put32(buf, 1);
    p = put32(p, 0);
    p = put32(p, OID_INT8);
    p = put32(p, (uint32_t)n);
    p = put32(p, 1);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)times[i];

        p = put32(p, 8);
        p = put32(p, (uint32_t)(v >> 32));
        p = put32(p, (uint32_t)v);
    }
    *len = (int)size;
    return buf;
}

/* The whole batch as two array parameters of one statement. */
static int run_lastseen_put(struct pg *pg, const struct store_args *a, size_t *changed)
{
    int lens[2], fmts[2] = {1, 1}, err;
    char *users, *times;
    const char *vals[2];

    if (a->n == 0)
        return 0;
    users = encode_ids(a->ids, a->n, &lens[0]);
    times = encode_times(a->times, a->n, &lens[1]);
    vals[0] = users;
    vals[1] = times;
    err = run_count(pg, ST_LASTSEEN_PUT, vals, lens, fmts, changed);
    free(times);
    free(users);
    return err;
}

/* Runs (owner, ids) statement k with ids as one text[] parameter. */
static int run_ids(struct pg *pg, enum stmt k, const char *owner, char *const *ids, size_t n,
                   size_t *changed)
{
    int lens[2] = {0, 0}, fmts[2] = {0, 1}, err;
    char *arr;
    const char *vals[2];

    if (n == 0)
        return 0;
    arr = encode_ids(ids, n, &lens[1]);
    vals[0] = owner;
    vals[1] = arr;
    err = run_count(pg, k, vals, lens, fmts, changed);
    free(arr);
    return err;
}

/* Replaces the saved sessions with a's rows, as three array parameters. */
static int run_saved_put(struct pg *pg, const struct store_args *a, size_t *changed)
{
    int lens[3], fmts[3] = {1, 1, 1}, err;
    const char *vals[3];
    char *sids, *times, *texts;
    size_t cleared = 0;

    err = run_count(pg, ST_SAVED_CLEAR, NULL, NULL, NULL, &cleared);
    if (err || a->n == 0)
        return err;
    sids = encode_ids(a->ids, a->n, &lens[0]);
    times = encode_times(a->times, a->n, &lens[1]);
    texts = encode_ids(a->texts, a->n, &lens[2]);
    vals[0] = sids;
    vals[1] = times;
    vals[2] = texts;
    err = run_count(pg, ST_SAVED_ADD, vals, lens, fmts, changed);
    free(texts);
    free(times);
    free(sids);
    return err;
}

static int pg_write(void *db, const struct store_args *a, size_t *changed)
{
    struct pg *pg = db;
    const char *vals[4] = {a->user, a->other, NULL, NULL};
    int err;

    switch (a->kind) {
    case STORE_SET_PRIVACY:
        vals[1] = store__vis_name[a->priv.online];
        vals[2] = store__vis_name[a->priv.last_seen];
        vals[3] = a->priv.invisible ? "t" : "f";
        err = run(pg, ST_SET_PRIVACY, vals, NULL, NULL, NULL);
        *changed = err ? 0 : 1;
        return err;
    case STORE_CONTACTS_ADD:
        return run_ids(pg, ST_CONTACTS_ADD, a->user, a->ids, a->n, changed);
    case STORE_CONTACTS_REMOVE:
        return run_ids(pg, ST_CONTACTS_DEL, a->user, a->ids, a->n, changed);
    case STORE_CONTACTS_REPLACE:
        err = run_count(pg, ST_CONTACTS_CLEAR, vals, NULL, NULL, changed);
        return err ? err : run_ids(pg, ST_CONTACTS_ADD, a->user, a->ids, a->n, changed);
    case STORE_BLOCK:
        return run_count(pg, ST_BLOCK_ADD, vals, NULL, NULL, changed);
    case STORE_UNBLOCK:
        return run_count(pg, ST_BLOCK_DEL, vals, NULL, NULL, changed);
    case STORE_LASTSEEN_WRITE:
        return run_lastseen_put(pg, a, changed);
    case STORE_SAVED_PUT:
        return run_saved_put(pg, a, changed);
    default:
        abort(); /* store.c passes only writes here */
    }
}

static bool is_true(const PGresult *res, int col)
{
    return !PQgetisnull(res, 0, col) && PQgetvalue(res, 0, col)[0] == 't';
}

/* The first n rows' column 0 into res->ids (malloc'd, see backend). */
static void take_ids(const PGresult *r, size_t n, struct store_result *res)
{
    char **ids = xcalloc(n ? n : 1, sizeof(*ids));

    for (size_t i = 0; i < n; i++)
        ids[i] = xstrdup(PQgetvalue(r, (int)i, 0));
    res->ids = (const char *const *)ids;
    res->nids = n;
}

/* The owners that block target, into res->ids (malloc'd, see backend). */
static int read_blockers(struct pg *pg, const char *target, struct store_result *res)
{
    const char *vals[1] = {target};
    PGresult *r;
    int err = run(pg, ST_BLOCKERS, vals, NULL, NULL, &r);

    if (err)
        return err;
    take_ids(r, (size_t)PQntuples(r), res);
    PQclear(r);
    return 0;
}

/* get_summary: privacy and the two counts in one row, then the first
 * blocked users (two statements: no transaction needed for a view). */
static int read_summary(struct pg *pg, const char *owner, struct store_result *res)
{
    const char *vals[1] = {owner};
    PGresult *r;
    int err = run(pg, ST_SUMMARY, vals, NULL, NULL, &r);

    if (err)
        return err;
    if (PQntuples(r) != 1) { /* one row by construction */
        PQclear(r);
        return STORE_E_SCHEMA;
    }
    if (!PQgetisnull(r, 0, 0)) {
        res->privacy.online = store__vis_parse(PQgetvalue(r, 0, 0));
        res->privacy.last_seen = store__vis_parse(PQgetvalue(r, 0, 1));
        res->privacy.invisible = is_true(r, 2);
        res->found = true;
    }
    res->contacts = (size_t)strtoull(PQgetvalue(r, 0, 3), NULL, 10);
    res->blocks = (size_t)strtoull(PQgetvalue(r, 0, 4), NULL, 10);
    PQclear(r);
    if ((err = run(pg, ST_BLOCKED, vals, NULL, NULL, &r)))
        return err;
    _Static_assert(STORE_SUMMARY_BLOCKS_MAX == 100, "ST_BLOCKED's LIMIT");
    take_ids(r, MIN((size_t)PQntuples(r), (size_t)STORE_SUMMARY_BLOCKS_MAX), res);
    PQclear(r);
    return 0;
}

/*
 * One entry per user asked, in order: the rows come back numbered by
 * their user's place in the question (1-based), users without a row are
 * not among them and keep 0.
 */
static int read_lastseen(struct pg *pg, const struct store_args *a, struct store_result *res)
{
    struct store_lastseen *seen = xcalloc(a->n, sizeof(*seen));
    int lens[1], fmts[1] = {1}, err;
    const char *vals[1];
    char *users = encode_ids(a->ids, a->n, &lens[0]);
    PGresult *r;

    res->seen = seen;
    res->nseen = a->n;
    for (size_t i = 0; i < a->n; i++)
        seen[i].user = a->ids[i];
    vals[0] = users;
    err = run(pg, ST_LASTSEEN_GET, vals, lens, fmts, &r);
    free(users);
    if (err)
        return err;
    for (int row = 0; row < PQntuples(r); row++) {
        unsigned long i = strtoul(PQgetvalue(r, row, 0), NULL, 10);

        if (i < 1 || i > a->n) {
            PQclear(r);
            return STORE_E_SCHEMA; /* not an answer to our question */
        }
        seen[i - 1].last_seen_ms = strtoll(PQgetvalue(r, row, 1), NULL, 10);
    }
    PQclear(r);
    return 0;
}

/* One page of rows after a->other (NULL: from the start), in user order. */
static int read_lastseen_page(struct pg *pg, const struct store_args *a, struct store_result *res)
{
    char since[24], limit[24];
    const char *vals[3] = {a->other ? a->other : "", since, limit};
    struct store_lastseen *seen;
    char **ids;
    PGresult *r;
    size_t n;
    int err;

    snprintf(since, sizeof(since), "%lld", (long long)a->since_ms);
    snprintf(limit, sizeof(limit), "%zu", a->limit);
    err = run(pg, ST_LASTSEEN_PAGE, vals, NULL, NULL, &r);
    if (err)
        return err;
    n = (size_t)PQntuples(r);
    /* LIMIT bounds the rows; a broken bound would be a server's bug. */
    assert(n <= a->limit);
    ids = xcalloc(n ? n : 1, sizeof(*ids));
    seen = xcalloc(n ? n : 1, sizeof(*seen));
    for (size_t k = 0; k < n; k++) {
        ids[k] = xstrdup(PQgetvalue(r, (int)k, 0));
        seen[k] = (struct store_lastseen){ids[k], strtoll(PQgetvalue(r, (int)k, 1), NULL, 10)};
    }
    res->ids = (const char *const *)ids;
    res->nids = n;
    res->seen = seen;
    res->nseen = n;
    PQclear(r);
    return 0;
}

/* Every saved session, deleted by the same statement. */
static int read_saved_take(struct pg *pg, struct store_result *res)
{
    struct store_saved *rows;
    char **ids;
    PGresult *r;
    size_t n;
    int err = run(pg, ST_SAVED_TAKE, NULL, NULL, NULL, &r);

    if (err)
        return err;
    n = (size_t)PQntuples(r);
    ids = xcalloc(n ? 2 * n : 1, sizeof(*ids));
    rows = xcalloc(n ? n : 1, sizeof(*rows));
    for (size_t k = 0; k < n; k++) {
        ids[2 * k] = xstrdup(PQgetvalue(r, (int)k, 0));
        ids[2 * k + 1] = xstrdup(PQgetvalue(r, (int)k, 2));
        rows[k] = (struct store_saved){ids[2 * k], ids[2 * k + 1],
                                       strtoll(PQgetvalue(r, (int)k, 1), NULL, 10)};
    }
    res->ids = (const char *const *)ids;
    res->nids = 2 * n;
    res->saved = rows;
    res->nsaved = n;
    PQclear(r);
    return 0;
}

/* Both privacy read statements start with the three privacy columns, NULL
 * (or no row) when the user has none. */
static int pg_read(void *db, const struct store_args *a, struct store_result *res)
{
    struct pg *pg = db;
    const char *vals[2] = {a->user, a->other};
    bool relations = a->kind == STORE_GET_RELATIONS;
    PGresult *r;
    int err;

    if (a->kind == STORE_LASTSEEN_READ)
        return read_lastseen(pg, a, res);
    if (a->kind == STORE_LASTSEEN_LOAD)
        return read_lastseen_page(pg, a, res);
    if (a->kind == STORE_LIST_BLOCKERS)
        return read_blockers(pg, a->user, res);
    if (a->kind == STORE_GET_SUMMARY)
        return read_summary(pg, a->user, res);
    if (a->kind == STORE_SAVED_TAKE)
        return read_saved_take(pg, res);
    err = run(pg, relations ? ST_RELATIONS : ST_GET_PRIVACY, vals, NULL, NULL, &r);

    if (err)
        return err;
    if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)) {
        res->privacy.online = store__vis_parse(PQgetvalue(r, 0, 0));
        res->privacy.last_seen = store__vis_parse(PQgetvalue(r, 0, 1));
        res->privacy.invisible = is_true(r, 2);
        res->found = true;
    }
    if (relations) {
        /* Exactly one row by construction; anything else is not ours. */
        if (PQntuples(r) != 1) {
            PQclear(r);
            return STORE_E_SCHEMA;
        }
        res->is_contact = is_true(r, 3);
        res->blocked = is_true(r, 4);
    }
    PQclear(r);
    return 0;
}

static int pg_begin(void *db)
{
    struct pg *pg = db;

    return alive(pg) ? simple(pg->conn, "BEGIN", NULL) : STORE_E_IO;
}

/*
 * COMMIT of a failed transaction answers ROLLBACK, not an error: only the
 * tag "COMMIT" means committed. The session runs with synchronous_commit
 * on (or stronger), so the commit is flushed when the answer arrives.
 */
static int pg_commit(void *db)
{
    struct pg *pg = db;
    PGresult *res;
    int err = alive(pg) ? simple(pg->conn, "COMMIT", &res) : STORE_E_IO;

    if (err)
        return err;
    if (strcmp(PQcmdStatus(res), "COMMIT") != 0)
        err = STORE_E_IO;
    PQclear(res);
    return err;
}

static void pg_rollback(void *db)
{
    struct pg *pg = db;

    if (alive(pg) && PQtransactionStatus(pg->conn) != PQTRANS_IDLE)
        simple(pg->conn, "ROLLBACK", NULL);
}

/* ---- connecting ---- */

/* Raises synchronous_commit to on when the server or role has it off:
 * "acknowledged" must mean flushed. Stronger settings are kept. */
static int session_setup(PGconn *conn, char *err, size_t errlen)
{
    PGresult *res;
    bool off;
    int rc = simple(conn, "SHOW synchronous_commit", &res);

    if (rc) {
        describe(err, errlen, "cannot configure the postgresql session", conn);
        return rc;
    }
    off = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "off") == 0;
    PQclear(res);
    if (off && (rc = simple(conn, "SET synchronous_commit TO on", NULL)))
        describe(err, errlen, "cannot configure the postgresql session", conn);
    return rc;
}

/* Reads the schema version (0: none yet) inside the set-up transaction. */
static int schema_version(PGconn *conn, int *v)
{
    PGresult *res;
    int rc = simple(conn,
                    "CREATE TABLE IF NOT EXISTS presenced_schema ("
                    " one boolean PRIMARY KEY DEFAULT true CHECK (one),"
                    " version integer NOT NULL)",
                    NULL);

    if (rc == 0)
        rc = simple(conn, "SELECT version FROM presenced_schema", &res);
    if (rc)
        return rc;
    *v = PQntuples(res) == 1 ? atoi(PQgetvalue(res, 0, 0)) : 0;
    PQclear(res);
    return 0;
}

static int schema_stamp(PGconn *conn)
{
    char v[16];
    const char *vals[1] = {v};

    snprintf(v, sizeof(v), "%d", STORE_SCHEMA_VERSION);
    return take(conn,
                PQexecParams(conn,
                             "INSERT INTO presenced_schema (version) VALUES ($1::integer)"
                             " ON CONFLICT (one) DO UPDATE SET version = EXCLUDED.version",
                             1, NULL, vals, NULL, NULL, 0),
                NULL);
}

/*
 * Creates or migrates the schema in one transaction, under an advisory
 * lock so that nodes starting together take turns. A version newer than
 * STORE_SCHEMA_VERSION is refused and left untouched.
 */
static int schema_setup(PGconn *conn, char *err, size_t errlen)
{
    int v = 0;
    int rc = simple(conn, "BEGIN", NULL);

    if (rc == 0)
        rc = simple(conn, "SELECT pg_advisory_xact_lock(1886545267)", NULL); /* "pres" */
    if (rc == 0)
        rc = schema_version(conn, &v);
    if (rc == 0 && v > STORE_SCHEMA_VERSION) {
        simple(conn, "ROLLBACK", NULL);
        snprintf(err, errlen, "postgresql database %s has schema version %d, newer than %d",
                 PQdb(conn), v, STORE_SCHEMA_VERSION);
        return STORE_E_SCHEMA;
    }
    for (; rc == 0 && v < STORE_SCHEMA_VERSION; v++)
        rc = simple(conn, migrate_sql[v], NULL);
    if (rc == 0)
        rc = schema_stamp(conn);
    if (rc == 0)
        rc = simple(conn, "COMMIT", NULL);
    if (rc) {
        describe(err, errlen, "cannot create the schema in postgresql", conn);
        if (PQstatus(conn) == CONNECTION_OK)
            simple(conn, "ROLLBACK", NULL);
    }
    return rc;
}

static int prepare_all(PGconn *conn, char *err, size_t errlen)
{
    for (int k = 0; k < ST_COUNT; k++) {
        const struct stmt_def *d = &stmts[k];
        int rc = take(conn, PQprepare(conn, d->name, d->sql, d->nparams, d->types), NULL);

        if (rc) {
            describe(err, errlen, "cannot prepare statements in postgresql", conn);
            return rc;
        }
    }
    return 0;
}

/*
 * Connects, configures the session, sets up the schema (at open only) and
 * prepares the statements; pg->conn is set only when all of it worked.
 */
static int pg_connect(struct pg *pg, bool schema, char *err, size_t errlen)
{
    const char *vals[ARRAY_SIZE(conn_vals)];
    PGconn *conn;
    int rc;

    memcpy(vals, conn_vals, sizeof(vals));
    vals[CONN_URI] = pg->spec;
    conn = PQconnectdbParams(conn_keys, vals, 1);
    /* libpq returns NULL only when it cannot allocate the PGconn. */
    if (!conn)
        abort();
    if (PQstatus(conn) != CONNECTION_OK) {
        describe(err, errlen, "cannot connect to postgresql", conn);
        PQfinish(conn);
        return STORE_E_IO;
    }
    pg->doomed = false;
    PQsetNoticeReceiver(conn, notice_receive, pg);
    rc = session_setup(conn, err, errlen);
    if (rc == 0 && schema)
        rc = schema_setup(conn, err, errlen);
    if (rc == 0)
        rc = prepare_all(conn, err, errlen);
    if (rc) {
        PQfinish(conn);
        return rc;
    }
    pg->conn = conn;
    return 0;
}

/*
 * Whether an idle connection still has its server. A backend that is
 * terminated (server shutdown or restart, pg_terminate_backend) sends a
 * FATAL error and closes its socket, leaving it readable: reading takes in
 * the error (parsed into notice_receive(), which dooms the connection) and
 * EOF, which marks it bad; either is enough, as the EOF may still be on
 * its way. An idle connection otherwise only ever receives notices and
 * parameter changes, which do no harm.
 */
static bool idle_ok(struct pg *pg)
{
    PGconn *conn = pg->conn;

    for (int i = 0; i < IDLE_READS_MAX && PQstatus(conn) == CONNECTION_OK && !pg->doomed; i++) {
        struct pollfd p = {.fd = PQsocket(conn), .events = POLLIN};
        PGnotify *n;

        if (poll(&p, 1, 0) != 1)
            break;
        if (!PQconsumeInput(conn))
            return false;
        PQisBusy(conn); /* parses what arrived */
        while ((n = PQnotifies(conn)))
            PQfreemem(n);
    }
    return PQstatus(conn) == CONNECTION_OK && !pg->doomed;
}

/* Before each batch: a healthy idle connection is kept, anything else is
 * replaced by a new one (one attempt, bounded by connect_timeout). */
static int pg_ready(void *db)
{
    struct pg *pg = db;
    char err[STORE_ERR_LEN];

    if (pg->conn && idle_ok(pg) && PQtransactionStatus(pg->conn) == PQTRANS_IDLE)
        return 0;
    PQfinish(pg->conn);
    pg->conn = NULL;
    return pg_connect(pg, false, err, sizeof(err));
}

static void pg_close(void *db)
{
    struct pg *pg = db;

    if (!pg)
        return;
    PQfinish(pg->conn);
    free(pg->spec);
    free(pg);
}

static int pg_open(const char *spec, void **db, char *err, size_t errlen)
{
    struct pg *pg = xcalloc(1, sizeof(*pg));
    int rc;

    pg->spec = xstrdup(spec);
    rc = pg_connect(pg, true, err, errlen);
    if (rc) {
        pg_close(pg);
        return rc;
    }
    *db = pg;
    return 0;
}

const struct store_backend store__pg = {
    .name = "postgresql",
    .open = pg_open,
    .close = pg_close,
    .ready = pg_ready,
    .check = NULL, /* a server has no file to lose; outages are ready()'s */
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .write = pg_write,
    .read = pg_read,
};
