/* SPDX-License-Identifier: MIT */
/*
 * http_read.h - HTTP and SSE reads answered by owners: GET /v1/presence,
 * /v1/lastseen, /v1/rooms/{id}, POST /v1/heartbeat, the admin reads, and
 * event streams (engine.h has the routes); the query machinery that
 * collects their owners' answers; the query-rate buckets.
 */
#ifndef HTTP_READ_H
#define HTTP_READ_H

#include <stdbool.h>
#include <stddef.h>

#include "conn.h"
#include "http.h"
#include "jwt.h"
#include "msg.h"
#include "presence.h"

struct client;
struct engine;
struct query;

/* HTTP queries answered by owners. Reads time out (QUERY_TIMEOUT_MS:
 * degraded parts, or 503 for an admin read); writes do not: a write is
 * answered only once its owner knows the outcome, so a client is never
 * told "failed" about a change that is applied later. */
enum query_kind {
    QUERY_PRESENCE,
    QUERY_LASTSEEN,
    QUERY_BEAT, /* a write: POST /v1/heartbeat */
    QUERY_ROOM,
    QUERY_ADMIN,       /* a read, one part: "NNN" status code + JSON */
    QUERY_ADMIN_ROOMS, /* one part per worker: room list fragments */
    QUERY_ADMIN_WRITE, /* a write, answered as QUERY_ADMIN */
    QUERY_ROOM_LIST,   /* one part per worker: an adapter's room list (engine_list_rooms) */
};

/* A query of kind with n parts for the HTTP request on c, deferred
 * (httpd_defer) until the parts are in, or for a read until
 * QUERY_TIMEOUT_MS passed. The owners of a write must answer it whatever
 * happens (success, or an error when nothing was applied): what bounds
 * that wait is the store's (docs/api.md). Owned by the engine; freed when
 * its last part came back, answered or not (the client may be gone). */
struct query *http_read__query_new(struct conn *c, int kind, size_t n);
/* Writes the answer of a query from its n parts itself (a merge of
 * sorted lists, say); parts[i] is never NULL (a missing one is empty). */
typedef void http_read_merge_fn(struct conn *c, struct payload *const *parts, size_t n, size_t arg);
/* Makes q (QUERY_ADMIN_ROOMS) answer through fn(.., arg) instead of the
 * room list. */
void http_read__query_set_merge(struct query *q, http_read_merge_fn *fn, size_t arg);
/* Names part i of query q (for a degraded answer). */
void http_read__query_set_id(struct query *q, size_t i, const char *id);
/* Owner side: part (a reference, taken over) answers req's query part. */
void http_read__answer(struct engine *e, const struct emsg *req, struct payload *part);
/* HTTP reads (kind: QUERY_PRESENCE or QUERY_LASTSEEN) of the ?user= ids;
 * unfiltered (admin API) skips auth, viewer and rate. */
void http_read__read(struct conn *c, const struct http_request *req, struct engine *e, int kind,
                     bool unfiltered);
/* Charges n ids to a connection's query-rate bucket (*tokens, *last;
 * *last == 0: a full one) and to its observer's observer-query-rate bucket
 * (the user uid, else the address of conn): both or neither. False when
 * either lacks room, with *why naming that limit for the client. */
bool http_read__rate_take(struct engine *e, double *tokens, uint64_t *last, const char *uid,
                          const struct conn *conn, size_t n, const char **why);
/* Frees the queries still waiting (engine_free: answers that never came). */
void http_read__queries_free(struct engine *e);
/* An event-stream client of viewer registered by connection id (freed
 * with the stream), counted as one of its user's max-streams-per-user with
 * nwatch links reserved (max-watch-per-user) for the watch__add() calls
 * that follow (viewer "", anonymous: not counted); NULL after answering
 * 429. */
struct client *http_read__sse_client(struct conn *conn, struct engine *e, const char *viewer,
                                     size_t nwatch);

/* Request helpers the WebSocket upgrade shares. True when the query has
 * the key at all (decodable or not). */
bool http_read__query_has(const struct http_request *req, const char *key);
/* The query's key as a valid id in out. */
bool http_read__query_id(const struct http_request *req, const char *key,
                         char out[PRESENCE_ID_MAX + 1]);
/* The request's bearer token, verified: 1 with *cl filled, 0 when the
 * request has no token, -1 when it has one that does not verify. */
int http_read__claims(struct engine *e, const struct http_request *req, struct jwt_claims *cl);

/* The op-table handlers. */
engine_op_fn http_read__on_query;  /* OP_QUERY: owner side of one user's read */
engine_op_fn http_read__on_answer; /* OP_ANSWER: one part came back */

#endif
