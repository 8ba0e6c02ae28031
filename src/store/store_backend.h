/* SPDX-License-Identifier: MIT */
/*
 * store_backend.h - the seam between the settings store's queue, thread and
 * inboxes (store.c) and a database (store_sqlite.c, store_pg.c).
 *
 * A backend is a table of blocking functions. After open() returns, only
 * the database thread calls them, one at a time, with the state open()
 * made. store.c validates every argument before a backend sees it, groups
 * consecutive writes into one transaction, reruns a failed group one write
 * at a time, and turns a read error into the most private answer; a
 * backend only runs statements and maps its errors to STORE_E_* codes.
 * Backends never log: errors travel back as statuses and messages.
 */
#ifndef STORE_BACKEND_H
#define STORE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

enum store_kind {
    STORE_SET_PRIVACY,
    STORE_CONTACTS_ADD,
    STORE_CONTACTS_REMOVE,
    STORE_CONTACTS_REPLACE,
    STORE_BLOCK,
    STORE_UNBLOCK,
    STORE_LASTSEEN_WRITE,
    STORE_SAVED_PUT,
    STORE_LAST_WRITE = STORE_SAVED_PUT, /* kinds up to here are writes */
    STORE_GET_PRIVACY,
    STORE_GET_RELATIONS,
    STORE_LIST_BLOCKERS,
    STORE_GET_SUMMARY,
    STORE_LASTSEEN_READ,
    STORE_LASTSEEN_LOAD,
    STORE_SAVED_TAKE, /* a read that deletes what it read, in one statement */
};

/* A request's validated arguments; owned by store.c, borrowed by backends. */
struct store_args {
    enum store_kind kind;
    char *user;                /* owner, a valid id; NULL in lastseen calls */
    char *other;               /* viewer, block target, lastseen_load's after; or NULL */
    char **ids;                /* contacts, lastseen and saved_put: n valid ids */
    char **texts;              /* saved_put: n data strings, one per id */
    size_t n;                  /* 0..STORE_IDS_MAX */
    struct store_privacy priv; /* set_privacy; values in range */
    int64_t *times;            /* lastseen_write, saved_put: n times > 0, one per id */
    int64_t since_ms;          /* lastseen_load: >= 0 */
    size_t limit;              /* lastseen_load: 1..STORE_IDS_MAX */
};

struct store_backend {
    const char *name; /* "sqlite", "postgresql" */

    /*
     * Opens the database spec names, creates or migrates the schema and
     * prepares what the other calls need. Returns 0 and sets *db, or a
     * STORE_E_* code with a message in err (errlen bytes) and *db unset.
     * Runs on the caller's thread.
     */
    int (*open)(const char *spec, void **db, char *err, size_t errlen);

    /* Closes the connection and frees db. */
    void (*close)(void *db);

    /*
     * Called once before each batch taken from the queue: returns 0 when
     * the database can be used, or the error every request of the batch
     * completes with. A backend that can lose its connection reconnects
     * here (and only here). NULL: always ready.
     */
    int (*ready)(void *db);

    /*
     * Called before every group of writes and when the thread has been
     * idle for a while: returns 0 while the database the store opened is
     * still the one its spec names, or STORE_E_GONE once it was deleted or
     * replaced. store.c remembers the first error and refuses every later
     * write with it. NULL: never gone.
     */
    int (*check)(void *db);

    /* Transaction control. commit() returns 0 only once the transaction is
     * durable; rollback() is a no-op outside a transaction. */
    int (*begin)(void *db);
    int (*commit)(void *db);
    void (*rollback)(void *db);

    /* Applies one write inside the open transaction; adds the rows
     * inserted or deleted to *changed (set_privacy: 1; lastseen_write:
     * the rows created or moved forward). */
    int (*write)(void *db, const struct store_args *a, size_t *changed);

    /* Runs one read (get_privacy, get_relations, list_blockers,
     * lastseen_read, lastseen_load or saved_take) into res, which the
     * caller zero-filled; unknown users keep the defaults, found false.
     * saved_take deletes the rows it returns in the same statement and
     * sets res->saved to a malloc'd array whose strings point into
     * res->ids (2 per row: sid, data).
     * list_blockers and lastseen_load set res->ids to an array of nids
     * strings, all from malloc; lastseen_read and lastseen_load set
     * res->seen to a malloc'd array of nseen entries whose users point
     * into a->ids (read: n entries in a->ids' order, 0 = no row) or into
     * res->ids (load). store.c frees both, on error too. */
    int (*read)(void *db, const struct store_args *a, struct store_result *res);
};

extern const struct store_backend store__sqlite; /* a file path */
extern const struct store_backend store__pg;     /* a postgres:// URI */

/* The stored names of the visibility values, indexed by value. */
extern const char *const store__vis_name[3];

/* Parses a stored visibility name; unknown text reads as the most private
 * value (STORE_VIS_NOBODY). s may be NULL. */
enum store_visibility store__vis_parse(const char *s);

#endif
