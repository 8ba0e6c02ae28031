/* SPDX-License-Identifier: MIT */
/*
 * store.h - durable privacy settings, contacts, blocks and last seen in
 * SQLite or PostgreSQL.
 *
 * The store owns one database thread and the only database connection:
 * a SQLite file (WAL, synchronous=FULL) or a PostgreSQL server through
 * libpq (synchronous_commit at least on). Any thread submits requests; each
 * request names a completion inbox, and its callback runs on the thread
 * that drains that inbox (a worker watches store_inbox_fd() in its own
 * epoll loop), so no blocking database call ever runs on an event loop.
 *
 * Guarantees:
 * - Completions of one inbox run in submission order, reads and writes
 *   mixed; a read sees every write submitted before it.
 * - A write completes with status 0 only after the transaction holding it
 *   committed and was fsync'd: "acknowledged" means it survives kill -9 and
 *   power loss. Consecutive queued writes share one transaction.
 * - A failing call (invalid id, too many ids, bad value) returns a negative
 *   error and never fires its callback.
 * - Both backends give the same answers and the same guarantees.
 *
 * PostgreSQL: a lost connection is not retried within the requests that
 * found it lost; they complete with STORE_E_IO (reads fail closed). The
 * next batch of requests (everything queued by then) reconnects first, and
 * so does an idle store about once a second, so an outage costs errors,
 * not a hang, and ends by itself when the server is back. Bounds, each overridable in the URI:
 * connect_timeout=5 (seconds per attempt), tcp_user_timeout=30000 and keepalives for a server that
 * vanished under a query, options "-c statement_timeout=30s -c
 * lock_timeout=5s" (a URI that sets options replaces both). Tables are
 * presenced_privacy, presenced_contacts, presenced_blocks,
 * presenced_last_seen, presenced_saved_sessions and presenced_schema. Every query is parameterised.
 *
 * SQLite: presenced must be the file's only user. The connection holds
 * the file in exclusive locking mode, so the WAL index lives in the
 * process's own memory, not in a shared mapping of <file>-shm (whatever
 * happens to that file cannot crash the process), and another process
 * cannot open the database while the store has it. Before every write, and
 * about once a second while idle, the store checks that the path still
 * names the files it has open: once the database or its -wal was deleted,
 * renamed or replaced, every later write completes with STORE_E_GONE
 * (what it would write could not be found again after a restart) and
 * store_is_healthy() is false until the process restarts. Reads go on
 * from the open files.
 *
 * Fail closed: a read that completes with an error carries the most private
 * answer (invisible, visibility nobody, not a contact, blocked, no last
 * seen), and the
 * engine must use it as such; a write error must be reported to the client
 * or admin caller, never retried silently as success.
 *
 * Not here: caching (the engine keeps a cache and invalidates it on its own
 * acknowledged writes) and the visibility rules themselves.
 */
#ifndef STORE_H
#define STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define STORE_ID_MAX         128   /* bytes in a user id */
#define STORE_IDS_MAX        10000 /* ids in one contacts call */
#define STORE_SCHEMA_VERSION 3     /* SQLite user_version, PostgreSQL presenced_schema */
#define STORE_ERR_LEN        256   /* a good errlen for store_open() */

/* Errors beyond errno (-EINVAL: bad id or value; -E2BIG: too many ids). */
enum {
    STORE_E_IO = -(PS_EBASE + 700),       /* database unreachable, connection lost, I/O */
    STORE_E_CORRUPT = -(PS_EBASE + 701),  /* database file corrupt or not a database */
    STORE_E_READONLY = -(PS_EBASE + 702), /* database or its directory not writable */
    STORE_E_FULL = -(PS_EBASE + 703),     /* disk full */
    STORE_E_BUSY = -(PS_EBASE + 704),     /* locked past the timeout, or statement timeout */
    STORE_E_SCHEMA = -(PS_EBASE + 705),   /* schema newer than this code, or damaged */
    STORE_E_GONE = -(PS_EBASE + 706),     /* database file deleted or replaced under the store */
};

enum store_visibility {
    STORE_VIS_EVERYONE = 0, /* the default */
    STORE_VIS_CONTACTS = 1,
    STORE_VIS_NOBODY = 2,
};

struct store_privacy {
    enum store_visibility online;    /* who sees online status */
    enum store_visibility last_seen; /* who sees last seen */
    bool invisible;                  /* byte-identical to offline for others */
};

/* One user's last seen: wall-clock ms since the Unix epoch. */
struct store_lastseen {
    const char *user;     /* a valid id */
    int64_t last_seen_ms; /* > 0 when written; 0 in a read: never seen */
};

/* One session saved at a clean stop (store_saved_put()). */
struct store_saved {
    const char *sid;  /* the session id, a valid id */
    const char *data; /* the engine's encoding of it (persist.h), NUL-terminated */
    int64_t saved_ms; /* wall ms of the stop, > 0 */
};

/*
 * What a completion sees. Borrowed; valid until the callback returns. Only
 * the fields of the request's kind are meaningful; on error every field
 * holds the most private value (see "Fail closed" above).
 */
struct store_result {
    struct store_privacy privacy; /* get_privacy, get_relations: the owner's */
    bool found;                   /* get_privacy, get_relations: a row exists (else defaults) */
    bool is_contact;              /* get_relations: viewer is in owner's contacts */
    bool blocked;                 /* get_relations: owner blocks viewer */
    size_t changed;               /* writes: rows inserted or deleted (privacy: 1) */
    size_t contacts;              /* get_summary: the owner's contacts */
    size_t blocks;                /* get_summary: the users the owner blocks */
    const char *const *ids;       /* list_blockers: the owners that block the target;
                                   * get_summary: the first users the owner blocks */
    size_t nids;                  /* list_blockers: entries in ids (0 on error) */
    const struct store_lastseen *seen; /* lastseen_read, lastseen_load: the rows */
    size_t nseen;                      /* entries in seen */
    const struct store_saved *saved;   /* saved_take: the rows */
    size_t nsaved;                     /* entries in saved */
};

struct store;
struct store_inbox;
struct metrics;

/* status is 0 or a negative error (store_strerror()); r is never NULL. */
typedef void store_cb(void *ctx, int status, const struct store_result *r);

/*
 * Opens the database spec names and starts the database thread. A spec
 * starting with "postgres://" or "postgresql://" is a libpq connection URI
 * (the database must exist; presenced creates its tables in it); anything
 * else is the path of a SQLite file, created if missing, set to WAL and
 * synchronous=FULL. Creates the schema or migrates it to
 * STORE_SCHEMA_VERSION, refuses a newer one, and prepares the statements.
 * Returns NULL and writes a message to err (errlen bytes, STORE_ERR_LEN is
 * enough; never the URI's password) when any of that fails. Blocks the
 * calling thread while it connects: call it at start, not from a loop.
 */
struct store *store_open(const char *spec, char *err, size_t errlen);

/*
 * store_open() that also says why: returns 0 and sets *out, or a negative
 * error (STORE_E_IO: unreachable; STORE_E_SCHEMA: a newer or damaged
 * schema; STORE_E_CORRUPT, STORE_E_READONLY, ...) with *out NULL and a
 * message in err.
 */
int store_open_status(const char *spec, char *err, size_t errlen, struct store **out);

/*
 * Runs every request already submitted, posts their completions, joins the
 * thread and closes the database. No request may be submitted during or
 * after the call; completions still sit in their inboxes, to be drained or
 * dropped by store_inbox_free(). NULL is a no-op.
 */
void store_close(struct store *s);

/*
 * Whether the store can take writes: false once it found its database
 * deleted or replaced (STORE_E_GONE), a fault that lasts until the store is
 * closed. A PostgreSQL outage is not a fault here: each batch retries, and
 * its requests report it. Any thread; never blocks.
 */
bool store_is_healthy(const struct store *s);

/* Why not: 0 while healthy, else the status every write now completes with
 * (for store_strerror()). Any thread; never blocks. */
int store_fault(const struct store *s);

/*
 * Whether the database answered the last attempt to use it: false from a
 * batch of requests that found it unreachable (a request or the reconnect
 * before the batch failed with STORE_E_IO) until a batch or the idle check
 * (about once a second, PostgreSQL: a lost connection is reconnected then)
 * reaches it again. Not a fault: requests go on being tried. Any thread;
 * never blocks.
 */
bool store_is_reachable(const struct store *s);

/* Describes a status from a completion or a submit call. */
const char *store_strerror(int status);

/* Valid user id: 1..STORE_ID_MAX bytes of A-Z a-z 0-9 - _ . ~ : @, after
 * an optional app namespace prefix "<app id>|" (ns.h). */
bool store_id_is_valid(const char *id);

/* ---- completion inboxes (one per draining thread) ---- */

/* A new inbox with its eventfd (non-blocking, close-on-exec). Aborts on OOM. */
struct store_inbox *store_inbox_new(void);

/* Readable whenever completions wait; watch it for EPOLLIN. */
int store_inbox_fd(const struct store_inbox *in);
/* From now on, requests submitted with in count in m's store_pending
 * until their callback runs, and each one's round trip (submit to the
 * drain that runs its callback) is observed in m's presenced_store_seconds
 * histogram of its kind. m is the draining worker's (its only writer);
 * NULL stops it. Before the first submission with in. */
void store_inbox_observe(struct store_inbox *in, struct metrics *m);

/*
 * Clears the eventfd and runs the callbacks of every completion posted so
 * far, in submission order, on the calling thread. Callbacks may submit new
 * requests (to this inbox too: they run in a later drain) but must not free
 * the inbox. Returns the number of callbacks run.
 */
size_t store_inbox_drain(struct store_inbox *in);

/* Requests submitted with this inbox whose callbacks have not run yet. */
size_t store_inbox_pending(struct store_inbox *in);

/*
 * Frees the inbox and closes its fd. Completions posted but not drained are
 * dropped without their callbacks. No request of this inbox may still be
 * running in the store (drain until store_inbox_pending() counts only
 * posted ones, or call after store_close()). NULL is a no-op.
 */
void store_inbox_free(struct store_inbox *in);

/* ---- requests ---- */

/*
 * Every request copies its arguments (ids are borrowed for the call only)
 * and returns 0 when queued, or -EINVAL (an id fails store_id_is_valid(),
 * or a value is out of range) / -E2BIG (n > STORE_IDS_MAX), in which case
 * cb never fires. cb must not be NULL.
 */

/* Sets all three privacy fields of user (a write). */
int store_set_privacy(struct store *s, struct store_inbox *in, const char *user,
                      const struct store_privacy *p, store_cb *cb, void *ctx);

/* Reads user's privacy; an unknown user gets the defaults, found false. */
int store_get_privacy(struct store *s, struct store_inbox *in, const char *user, store_cb *cb,
                      void *ctx);

/* Adds ids to owner's contacts (a write; ids already there are kept). */
int store_contacts_add(struct store *s, struct store_inbox *in, const char *owner,
                       const char *const *ids, size_t n, store_cb *cb, void *ctx);

/* Removes ids from owner's contacts (a write; absent ids are ignored). */
int store_contacts_remove(struct store *s, struct store_inbox *in, const char *owner,
                          const char *const *ids, size_t n, store_cb *cb, void *ctx);

/* Makes owner's contacts exactly ids, atomically (a write; n may be 0). */
int store_contacts_replace(struct store *s, struct store_inbox *in, const char *owner,
                           const char *const *ids, size_t n, store_cb *cb, void *ctx);

/* owner blocks / stops blocking target (writes; idempotent). */
int store_block(struct store *s, struct store_inbox *in, const char *owner, const char *target,
                store_cb *cb, void *ctx);
int store_unblock(struct store *s, struct store_inbox *in, const char *owner, const char *target,
                  store_cb *cb, void *ctx);

/*
 * Everything needed to decide what viewer may see of owner, in one read:
 * owner's privacy (and found), whether viewer is owner's contact, and
 * whether owner blocks viewer.
 */
int store_get_relations(struct store *s, struct store_inbox *in, const char *owner,
                        const char *viewer, store_cb *cb, void *ctx);

/*
 * The owners that block target (a read; at most STORE_IDS_MAX, in no
 * particular order) in r->ids and r->nids, borrowed until cb returns. On
 * error the list is empty: the caller cannot know the blockers and must
 * not act as if there were none (the engine refuses the room join).
 */
int store_list_blockers(struct store *s, struct store_inbox *in, const char *target, store_cb *cb,
                        void *ctx);

/*
 * What the admin API shows of owner (a read): its privacy (and found),
 * how many contacts and blocks it has (r->contacts, r->blocks), and the
 * first STORE_SUMMARY_BLOCKS_MAX users it blocks, in id order, in r->ids
 * and r->nids (borrowed until cb returns). On error: the most private
 * settings, counts 0, no ids.
 */
#define STORE_SUMMARY_BLOCKS_MAX 100
int store_get_summary(struct store *s, struct store_inbox *in, const char *owner, store_cb *cb,
                      void *ctx);

/* ---- last seen ---- */

/*
 * Last seen survives restarts only through these calls: the engine keeps
 * last seen in memory, collects every user whose last seen moved forward
 * and hands them over in one batch at most every few seconds, never once
 * per heartbeat. The store keeps, per user, the largest last_seen_ms ever
 * written (an upsert keeping the max), so a batch may be resent, merged
 * or reordered with others and never moves anyone's last seen back. The
 * store does not look at the clock: an engine must not write wall times
 * from the future (they would stick until real time passes them), and
 * clamps what it shows to its own now, as it does today.
 *
 * Loss after kill -9: what a completed batch wrote is durable (status 0
 * means committed and fsync'd); what changed since the last completed
 * batch is lost. An engine that flushes every F ms loses at most F plus
 * one commit of last seen; F <= 4,000 keeps that within the documented
 * 5 s. Keep one flush in flight: while one waits for its completion, the
 * next batch goes on collecting (a slow database then makes fewer,
 * bigger batches, not a queue of them). A clean shutdown flushes once
 * more before store_close(), which commits it before it returns.
 */

/*
 * Writes n (user, last_seen_ms) pairs in one transaction: each user's row
 * becomes the larger of its stored and given time (a row is created when
 * there was none; a pair older than the stored time changes nothing). A
 * user named twice keeps the larger of the two. 0 <= n <=
 * STORE_IDS_MAX; split bigger flushes into several calls (consecutive
 * calls still share a transaction, each with its own verdict).
 *
 * pairs is borrowed for the call only: every id is copied before it
 * returns, so the caller may free or reuse the array and its strings at
 * once. Refused whole: when any user fails store_id_is_valid() or any
 * last_seen_ms is <= 0 the call returns -EINVAL, n > STORE_IDS_MAX
 * returns -E2BIG, nothing is queued and cb never fires.
 *
 * cb fires once, on in's thread, after the transaction committed (status
 * 0; r->changed = the users whose row was created or moved forward, a
 * user named twice counting once) or failed (a negative status; nothing
 * of the batch was written). On failure the caller keeps the pairs and
 * hands them over again with its next batch: retrying is always safe,
 * since writes keep the max.
 */
int store_lastseen_write(struct store *s, struct store_inbox *in,
                         const struct store_lastseen *pairs, size_t n, store_cb *cb, void *ctx);

/*
 * Reads the last seen of n users (1 <= n <= STORE_IDS_MAX), as one read
 * ordered like every other after the writes submitted before it. r->seen
 * has exactly n entries, in the order asked (a user asked twice appears
 * twice), r->seen[i].user being users[i]; last_seen_ms is 0 for a user
 * the store has never seen. r->seen and its strings are borrowed until cb
 * returns. users is borrowed for the call only. -EINVAL (an invalid id,
 * n == 0) / -E2BIG: nothing queued, cb never fires.
 *
 * Fails closed: on error r->seen still has n entries, every one 0 (no
 * last seen to show). The caller shows none and must not remember the
 * answer as "never seen": ask again later, or keep what it has in memory
 * (a merge that keeps the max is safe with either answer).
 */
int store_lastseen_read(struct store *s, struct store_inbox *in, const char *const *users, size_t n,
                        store_cb *cb, void *ctx);

/*
 * One page of every stored last seen, for loading at start: up to limit
 * rows (1 <= limit <= STORE_IDS_MAX) with last_seen_ms >= since_ms, in
 * ascending byte order of user id, starting after the user after (NULL or
 * "" for the first page; else a valid id, typically the last user of the
 * previous page). A page shorter than limit is the last one. r->seen and
 * r->nseen are borrowed until cb returns. A worker that owns a partition
 * of the users keeps the rows of its own and pages on. -EINVAL (bad
 * after, limit out of range, since_ms < 0): nothing queued, cb never
 * fires.
 *
 * On error r->nseen is 0, which does not mean "no more rows": the caller
 * retries the same page later, and meanwhile reads single users on
 * demand with store_lastseen_read().
 */
int store_lastseen_load(struct store *s, struct store_inbox *in, const char *after,
                        int64_t since_ms, size_t limit, store_cb *cb, void *ctx);

/* ---- presence saved at a clean stop ----
 *
 * The state of a single node's sessions survives a clean restart through
 * these two calls (the engine's persist.h): the stop replaces whatever is
 * saved with its sessions, and the next start takes them out, reading and
 * deleting them in one statement, so that state once restored can never
 * come back (a later kill -9 starts empty).
 */

/*
 * Replaces every saved row with the n rows given (n may be 0: clears
 * them), in one transaction: a reader sees all of them or the old ones.
 * rows is borrowed for the call only (copied). -EINVAL when a sid fails
 * store_id_is_valid(), a data is NULL or a saved_ms <= 0: nothing queued,
 * cb never fires. cb fires once, after the commit (status 0, r->changed
 * = n) or a failure (nothing changed).
 */
int store_saved_put(struct store *s, struct store_inbox *in, const struct store_saved *rows,
                    size_t n, store_cb *cb, void *ctx);

/*
 * Reads every saved row and deletes them, atomically: r->saved holds
 * r->nsaved rows in no particular order, borrowed until cb returns. On
 * error r->nsaved is 0 and the rows (if any) stay stored.
 */
int store_saved_take(struct store *s, struct store_inbox *in, store_cb *cb, void *ctx);

#endif
