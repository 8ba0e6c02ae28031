/* SPDX-License-Identifier: MIT */
/*
 * cluster_http.h - socketless HTTP sessions (POST /v1/heartbeat) across
 * nodes (docs/cluster.md, "HTTP sessions across nodes"). Only with `redis`
 * set; every function is a no-op (or says "go on") without it.
 *
 * An HTTP session lives on the node that started it, as on one node (a
 * socketless session of its presence core, ended by its TTL), and is
 * named in Redis ({u:<h>}:h: sid -> "<node>.<epoch> <deadline>") so that
 * a heartbeat a load balancer sends to another node finds it. That node
 * passes the beat (or a leave) on to the holder over the control channel
 * and answers `created:false` with the same session id; no second session
 * is made. The holder writes the deadline at most once per
 * CH_WRITE_EVERY_MS per session, however often it is beaten (the write
 * storm rule). When the holder's lease has expired (a killed node, still
 * in its orphan grace or past it), the node that gets the next beat takes
 * the session over under the same id, before the holder is swept, so a
 * client that keeps beating never goes offline for a node's death.
 */
#ifndef CLUSTER_HTTP_H
#define CLUSTER_HTTP_H

#include <stdbool.h>

#include "cluster.h"

struct engine;
struct emsg;

/* The deadline is written at most this often per session. */
#define CH_WRITE_EVERY_MS 5000

/* OP_HTTP_BEAT em names a session (em->sid) this node does not hold: true
 * when em may go on (not clustered, Redis unreachable, or em->hs already
 * says who holds it); else parks em while Redis is asked, passes the beat
 * or leave on when another node holds it, sets em->hs and dispatches em
 * again. */
bool ch__lookup(struct engine *e, struct emsg *em);
/* This node started (or took over) uid's HTTP session sid. */
void ch__started(struct engine *e, const char *uid, const char *sid);
/* uid's HTTP session sid here was beaten: its deadline is written when
 * the last write is CH_WRITE_EVERY_MS old. */
void ch__beaten(struct engine *e, const char *uid, const char *sid);
/* uid's HTTP session sid here ended (any reason). Safe inside a presence
 * callback. */
void ch__ended(struct engine *e, const char *uid, const char *sid);

/* engine_new / engine_free. */
void ch__init(struct engine *e);
void ch__free(struct engine *e);

/* The cluster hooks of HTTP sessions (cluster_user.c's table names them). */
void ch__on_hsession(void *wctx, const char *uid, const char *sid, enum cluster_hs st,
                     const char *node);
void ch__on_hbeat(void *wctx, const char *uid, const char *sid, bool leave);

#endif
