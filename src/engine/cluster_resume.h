/* SPDX-License-Identifier: MIT */
/*
 * cluster_resume.h - resume across nodes (docs/cluster.md, "Resume across
 * nodes"). Only with `redis` set; every function is a no-op (or says "go
 * on") without it.
 *
 * When a session's socket closes, the node that holds it writes the
 * session's resumable state (device, status, custom status, its
 * deadline) to Redis under the user's tag ({u:<h>}:r, keyed by session
 * id): one write per socket lost, none per heartbeat. A client that
 * reconnects with `?resume=<sessionId>` to another node is looked up
 * there (only among its own user's records: the resume is authorised as
 * on one node, by the session id and the user); that node takes the
 * session over with one script, which moves the holder's contribution to
 * its own epoch in the same step (the user's view never flips), rebuilds
 * the session under the same id and welcomes it `resumed:true`. The old
 * holder is told to drop its copy without ending it for anyone: it keeps
 * it, socketless, CS_HOLD_MS more (so that the rooms the client joins
 * again on the new node hold it before the old one lets go), then ends it
 * silently (nothing changes anywhere: the new node holds the user and
 * the rooms' members).
 */
#ifndef CLUSTER_RESUME_H
#define CLUSTER_RESUME_H

#include <stdbool.h>

#include "presence.h"

struct engine;
struct emsg;

/* A taken-over session is dropped by its old holder this long after. */
#define CS_HOLD_MS 2000

/* OP_START em asks to resume em->sid, which this node does not hold:
 * true when em may go on (not clustered, Redis unreachable, or already
 * looked up: em->hs is HS_NONE then); else parks em while the session is
 * taken over from another node, rebuilds it here when it was, sets em->hs
 * and dispatches em again (its local resume then finds the session). */
bool cs__take(struct engine *e, struct emsg *em);
/* Session si lost its socket (its reconnect grace began): its resume
 * record is written. */
void cs__grace(struct engine *e, const struct presence_session_info *si);
/* A drain began: every session with a socket here will lose it within
 * window_ms, and the node may be gone soon after: their records are
 * written now, each with a deadline of window_ms + the grace from now,
 * while the node can still write them. */
void cs__drain(struct engine *e, uint64_t window_ms);
/* uid's session sid, which lost its socket before, was resumed here or
 * ended: its record goes. Safe inside a presence callback. */
void cs__forget(struct engine *e, const char *uid, const char *sid);

/* engine_new / engine_free. */
void cs__init(struct engine *e);
void cs__free(struct engine *e);

/* The cluster hooks (cluster_user.c's table names them). */
void cs__on_rsession(void *wctx, const char *uid, const char *sid, const char *record, size_t len);
void cs__on_moved(void *wctx, const char *uid, const char *sid);

#endif
