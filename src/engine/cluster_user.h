/* SPDX-License-Identifier: MIT */
/*
 * cluster_user.h - the engine's side of cluster.h: users' presence across
 * nodes (docs/cluster.md). Only with `redis` set; every function is a
 * no-op (or answers from the local presence core) without it.
 *
 * The owner of a user on this node (owner.h) keeps, while the user has
 * local sessions or local watchers or a read waits for it, a *global
 * view*: the merge of every node's contribution, as Redis's user script
 * made it, with its version. A local change of the user's view (the
 * presence core's on_change, debounced) becomes this node's contribution
 * (cluster_user_put()); the view that comes back, or that another node's
 * change publishes on the user's bucket, replaces the global view when
 * its version is larger, and is what watchers, rooms' privacy and reads
 * see. While Redis cannot be reached, a local change is applied at once,
 * merged with the last known view (marked degraded), and put again when
 * Redis is back.
 */
#ifndef CLUSTER_USER_H
#define CLUSTER_USER_H

#include <stdbool.h>

#include "msg.h"
#include "presence.h"

struct engine;

/* Whether this node is one of many (`redis` set). */
bool cu__on(const struct engine *e);
/* engine_new / engine_free. */
void cu__attach(struct engine *e);
void cu__detach(struct engine *e);

/* The presence core's on_change for a user of this worker (clustered). */
void cu__local_change(struct engine *e, const struct presence_view *cur);
/* True when uid's global view is known (or cannot be known now: Redis
 * unreachable) so that em can be answered; else parks em (engine__dispatch
 * runs it again once the view is in) and returns false. Always true when
 * not clustered. */
bool cu__ready(struct engine *e, struct emsg *em, const char *uid);
/* False, after parking em behind them, when requests about uid wait for
 * its global view (so that an unwatch runs after the watch before it);
 * else true. Always true when not clustered. */
bool cu__in_order(struct engine *e, struct emsg *em, const char *uid);
/* uid's view as watchers and reads see it: the global one when known,
 * else the local presence core's. *degraded (may be NULL) says whether it
 * is an estimate made while Redis was unreachable. */
void cu__truth(struct engine *e, const char *uid, struct presence_view *out, bool *degraded);
/* The session cap across nodes (docs/cluster.md, "Session cap"). True
 * when em (OP_START or OP_HTTP_BEAT of em->uid, about to start a new
 * session) may go on: not clustered, Redis unreachable (the local cap
 * alone then), or em->admit already says (ADMIT_YES/_NO). Else parks em
 * while the other nodes' session counts are read, and then sets em->admit
 * and dispatches it again: ADMIT_YES after making room when it must
 * (sessions without a live connection end, here at once and on other
 * nodes within a round trip), ADMIT_NO when every session has one. */
bool cu__admit(struct engine *e, struct emsg *em);
/* uid's sessions on this node started, ended, lost or regained their
 * connection: its counts are written within SEATS_FLUSH_MS. No-op when
 * not clustered. Safe inside a presence callback. */
void cu__seats_changed(struct engine *e, const char *uid);
/* An admin kick of uid's sessions (sid, or all when "") made here: the
 * other nodes end theirs too. */
void cu__kick(struct engine *e, const char *uid, const char *sid, const char *reason);
/* uid's settings were written here: the other nodes drop their copies. */
void cu__settings_written(struct engine *e, const char *uid);
/* The first local watcher of uid on this node's owner (on) or the last one
 * gone: keeps the global view and its bucket subscription. */
void cu__watch(struct engine *e, const char *uid, bool on);

/* Calls fn(e, uid, ctx) for every user this worker has sessions of
 * (its contribution is in Redis). fn must not change the sessions. */
void cu__each_local(struct engine *e, void (*fn)(struct engine *e, const char *uid, void *ctx),
                    void *ctx);

#endif
