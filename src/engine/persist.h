/* SPDX-License-Identifier: MIT */
/*
 * persist.h - presence across a clean restart of a single node: every
 * session saved to the settings store at a clean stop, and restored at
 * the next start in its reconnect grace, so that clients that come back
 * in time (native ?resume=, the SDK after the drain's reconnect; Pusher
 * and Phoenix through their user's restored session) cause no event for
 * their watchers and rooms, and those that do not go offline once, after
 * their grace, with the last seen they had.
 *
 * What is saved, per session (saved.h has the format): its id, user,
 * device, explicit status with its expiry, idle flag, custom status with
 * its expiry, latest beat and activity (wall ms), its user's last public
 * offline's last seen (engine__privacy_offline_seen()), whether it is a
 * socketless HTTP session, and the rooms it is in with its member's
 * metadata and visible flag. Not saved: watch lists, which belong to a
 * connection, not to a session (a resume never restored them: a client
 * sends its watches again on every connection), room subscriptions
 * (likewise), and room epochs and seqs (a restored room has a new epoch:
 * a client that joins with its old `since` gets a room_snapshot with
 * the same members and metadata, resumed false). Nothing secret is
 * needed: a session is resumed by its id, as before the stop. Not saved
 * either: the sessions of a user that is invisible, or whose settings
 * this node has not read (engine__privacy_hidden()): it reads as offline
 * to everyone else, so leaving it out shows nothing, while restoring it
 * would have its settings first read while it is online, which freezes
 * its last seen at that moment; its client re-asserts instead.
 *
 * Stop (engine_free, on each worker after its drain; never with redis,
 * where the cluster re-asserts presence through Redis): the worker adds
 * its sessions (the users it owns) and its rooms' members (the rooms it
 * owns) to the shared collection (a mutex, taken once per worker). After
 * every worker stopped, persist_save() on the main thread joins members
 * to sessions by session id and replaces the store's saved rows with
 * them in one transaction (store_saved_put()), waiting at most
 * PERSIST_WAIT_MS for the commit; a failure is logged and the process
 * exits all the same.
 *
 * Start (main.c, before the workers exist): persist_load() takes the
 * saved rows out of the store, reading and deleting them in one
 * statement (store_saved_take()), so that a later kill -9 never brings
 * back state that was restored once. Rows older than restore-max-age-s
 * (by the stop's wall time) are all discarded, with a log line; so is a
 * row that fails saved_decode(), a session beyond max-sessions-per-user
 * of its user (the most recently active are kept), or one in more than
 * max-rooms-per-connection rooms. Then each worker's engine_new() puts
 * back its part (engine__persist_restore()): the sessions of the users
 * it owns into its presence core (presence_session_restore(): detached,
 * the grace clock starting now, the user's view published without an
 * event) with their room lists, and the members of the rooms it owns
 * into its room core (published at once, to nobody yet, without
 * webhooks). Every worker is made before any loop runs or any socket
 * is accepted, so no client can see the state half restored.
 */
#ifndef PERSIST_H
#define PERSIST_H

#include <stddef.h>

#include "config.h"
#include "store.h"

#define PERSIST_WAIT_MS 60000 /* longest wait for the store at a stop or a start */

struct engine;
struct persist;

/* An empty collection. Aborts on OOM. */
struct persist *persist_new(void);
/* Frees it and everything in it. NULL is a no-op. */
void persist_free(struct persist *ps);

/* Main thread, before the workers are made: takes the saved sessions out
 * of st and keeps the ones to restore (see above; cfg's limits). Returns
 * how many; logs what it dropped. Blocks up to PERSIST_WAIT_MS. */
size_t persist_load(struct persist *ps, struct store *st, const struct config *cfg);
/* Main thread, after the workers were made: the loaded sessions have been
 * restored; frees them. */
void persist_loaded_done(struct persist *ps);

/* Main thread, after every worker stopped and before store_close():
 * writes the collected sessions (see above). Blocks up to
 * PERSIST_WAIT_MS. Returns the number of sessions saved, or -1 (logged). */
long persist_save(struct persist *ps, struct store *st);

/* Worker, engine_new(): restores e's part of what persist_load() kept
 * (e->env->persist). */
void engine__persist_restore(struct engine *e);
/* Worker, engine_free() before the presence and room cores go: adds e's
 * sessions and room members to e->env->persist. */
void engine__persist_collect(struct engine *e);

#endif
