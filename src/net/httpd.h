/* SPDX-License-Identifier: MIT */
/*
 * httpd.h - the HTTP/1.1 connection protocol: keep-alive, pipelining,
 * timeouts, dispatch through the routing table, and response writing.
 *
 * A new TCP connection starts here (httpd_ops). Each complete request is
 * parsed from the connection's input (http_parse_request) and handed to the
 * route that matches its path; requests are answered in order, one at a
 * time, so pipelined requests get pipelined responses. A handler must answer
 * before it returns (httpd_respond / httpd_error), or take the connection
 * over (WebSocket upgrade, SSE stream). Errors are JSON:
 *   {"error":{"code":"not_found","message":"no route for /x"}}
 */
#ifndef HTTPD_H
#define HTTPD_H

#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include "conn.h"
#include "http.h"
#include "net.h"

extern const struct conn_ops httpd_ops;

/* Per-connection HTTP state (conn->proto while speaking HTTP). */
struct httpd_conn {
    struct net_ctx *nc;           /* the worker's context, borrowed */
    uint64_t req_seq;             /* requests seen on this connection */
    int responded;                /* current request answered (or taken over) */
    int keep_alive;               /* current request allows keep-alive */
    int head_only;                /* current request is HEAD: no body bytes */
    int draining;                 /* shutdown: answer with Connection: close */
    int state;                    /* waiting for a request, or one is partial */
    int deferred;                 /* the current request is answered later */
    int peer_eof;                 /* the client half-closed while an answer was deferred */
    void (*abort_cb)(void *data); /* deferred: called if the connection closes first */
    void *abort_data;             /* for abort_cb */
    double qtokens;               /* the engine's query-rate bucket */
    uint64_t qlast;               /* its last refill (loop ms; 0 = full) */
};

/* Starts HTTP on a freshly accepted connection. */
struct httpd_conn *httpd_conn_new(struct net_ctx *nc);
/* Makes an HTTP connection of an accepted socket fd (owned from now on) on
 * pool, with the peer's address, its header timer armed. */
struct conn *httpd_accept(struct net_ctx *nc, struct conn_pool *pool, int fd,
                          const struct sockaddr *peer);
/* Shutdown: every WebSocket of pool gets close 1001 (wsconn_going_away), every
 * other connection httpd_drain() (which also ends event streams), except the
 * connections for which keep (when not NULL) returns true: their owner
 * closes them itself (the engine's spread-out drain). */
void httpd_drain_all(struct conn_pool *pool, bool (*keep)(const struct conn *c, void *ctx),
                     void *ctx);

/* Writes a complete response for the current request: status line, Date,
 * Content-Type (when non-NULL), Content-Length, Connection, extra_headers
 * (each "Name: value\r\n", may be NULL), then body. */
void httpd_respond(struct conn *c, int status, const char *content_type, const char *extra_headers,
                   const void *body, size_t len);
/* Writes {"error":{"code":code,"message":message}} with the given status. */
void httpd_error(struct conn *c, int status, const char *code, const char *message);
/* Appends the JSON error body httpd_error() sends (without its newline),
 * for answers composed elsewhere (e.g. on another worker). */
void httpd_error_json(struct buf *b, const char *code, const char *message);
/* Marks the current request as answered by a protocol switch (WebSocket,
 * SSE): httpd stops managing the connection. */
void httpd_taken_over(struct conn *c);
/* Defers the answer to the current request: the handler returns without
 * answering and httpd reads no further request on c until httpd_respond()
 * or httpd_error() answers it later, on this worker, outside the handler
 * (pipelined requests behind it wait in the input buffer). If c closes
 * first, abort_cb(data) is called once, from c's deferred free; after that
 * c must not be used. */
void httpd_defer(struct conn *c, void (*abort_cb)(void *data), void *data);
/* Shutdown: closes c now if it is between requests, else after the
 * response to the request in progress (answered with Connection: close). */
void httpd_drain(struct conn *c);

#endif
