/* SPDX-License-Identifier: MIT */
/*
 * sse.h - Server-Sent Events streams (text/event-stream) on a connection.
 *
 * sse_start() answers the current HTTP request with the stream headers and
 * a "retry:" line and takes the connection over; from then on the server
 * only writes. Events carry ids so a client that reconnects sends
 * Last-Event-ID (header, or ?lastEventId= for clients that cannot set
 * headers) and the publisher resumes after it. A ":" comment is written
 * every keep-alive interval so proxies and clients see the stream alive.
 * Events are formatted once (sse_format) into a refcounted payload that any
 * number of streams can share.
 */
#ifndef SSE_H
#define SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "conn.h"
#include "http.h"
#include "net.h"

struct sse_stream;

/* Called once when the stream's connection is being freed. */
typedef void sse_close_cb(struct sse_stream *s, void *data);

/* Takes c over (httpd_taken_over) and writes the response head and the
 * retry hint. Never NULL. on_close may be NULL. */
struct sse_stream *sse_start(struct conn *c, struct net_ctx *nc, sse_close_cb *on_close,
                             void *data);
/* Parses Last-Event-ID (header first, then ?lastEventId=) as an unsigned
 * decimal. Returns true and sets *id when present and valid. */
bool sse_last_event_id(const struct http_request *req, uint64_t *id);
/* The raw Last-Event-ID (header, then ?lastEventId=) copied into out
 * (outsz bytes incl. NUL). False when absent, empty or too long. */
bool sse_last_event_id_text(const struct http_request *req, char *out, size_t outsz);
/* Formats one event: "id: N\n" (when id != 0), "event: NAME\n" (when name
 * is non-NULL), one "data: " line per line of data, then a blank line.
 * Returns a new payload with one reference. */
struct payload *sse_format(const char *event, uint64_t id, const char *data, size_t n);
/* Ditto with a textual id (NULL for none), e.g. "epoch-seq". */
struct payload *sse_format_id(const char *event, const char *id, const char *data, size_t n);
/* Queues a formatted event (a new reference) on the stream. */
void sse_send_payload(struct sse_stream *s, struct payload *p);
/* Formats and queues one event. */
void sse_send(struct sse_stream *s, const char *event, uint64_t id, const char *data, size_t n);
struct conn *sse_conn(struct sse_stream *s);
/* Ends the stream with one "error" event {"code","message"} (strings of
 * plain text, no escaping needed), closed once it is written; the
 * client's EventSource reconnects after its retry delay. */
void sse_fail(struct sse_stream *s, const char *code, const char *message);

#endif
