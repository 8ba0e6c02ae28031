/* SPDX-License-Identifier: MIT */
/*
 * httpc.h - a non-blocking HTTP/1.1 client on the loop: one POST to a
 * configured URL, one status back. The transport under webhooks.
 *
 * A target is parsed (and its name resolved) once, at configuration time,
 * by httpc_target_parse(). httpc_post() then connects, writes the request,
 * reads the response through llhttp and closes, without ever blocking the
 * loop; its callback fires exactly once, from a later loop callback, with
 * the response's status code or a negative error. The body of the
 * response is read (so the exchange ends cleanly) but not kept.
 *
 * What it deliberately does not do: TLS (https:// is refused), redirects
 * (a 3xx is reported as its status: webhook targets are the configured
 * URLs, never where a response points), retries, keep-alive (every request
 * is its own connection with "Connection: close"), DNS at request time (a
 * name resolved at parse time is used until the target is parsed again),
 * and limiting concurrency: each request in flight holds one socket and
 * its request bytes, so the caller bounds how many it starts per loop.
 *
 * Lifetime: a request is owned by this module. It is freed right after
 * its callback returns, or, once cancelled, at the loop's next timer run
 * (never under a running callback); a loop freed before that run leaks
 * the cancelled requests, so a caller tearing down cancels its requests
 * and runs one more iteration (loop_run_once(l, 0)) before loop_free().
 */
#ifndef HTTPC_H
#define HTTPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "loop.h"
#include "util.h"

/*
 * Response bytes (status line, headers and body) read at most. The status
 * is all a caller gets, so the bound costs nothing legitimate (a webhook
 * receiver answers in a few hundred bytes) and keeps a target that streams
 * from holding the worker's loop, reading at link speed, until the
 * deadline: a response that has not ended within it is HTTPC_E_TOO_LARGE.
 */
#define HTTPC_MAX_RESPONSE (64u * 1024u)

#define HTTPC_HOST_MAX 300  /* Host header value ("[v6]:port", a name:port) with its NUL */
#define HTTPC_PATH_MAX 2048 /* request target (path and query) with its NUL */

/* Errors given to the callback (negative, below -PS_EBASE); any other
 * socket error comes as -errno. httpc_strerror() words both. */
enum httpc_error {
    HTTPC_E_REFUSED = -(PS_EBASE + 900),     /* connection refused (nothing listens) */
    HTTPC_E_UNREACHABLE = -(PS_EBASE + 901), /* no route to the network or host */
    HTTPC_E_TIMEOUT = -(PS_EBASE + 902),     /* timeout_ms passed: connect, write and read */
    HTTPC_E_RESET = -(PS_EBASE + 903),       /* connection reset by the peer */
    HTTPC_E_CLOSED = -(PS_EBASE + 904),      /* closed before a complete response */
    HTTPC_E_MALFORMED = -(PS_EBASE + 905),   /* not an HTTP/1.x response, or status not 100-599 */
    HTTPC_E_TOO_LARGE = -(PS_EBASE + 906),   /* no end within HTTPC_MAX_RESPONSE bytes */
};

/* Where requests go: filled by httpc_target_parse(), then immutable. It
 * holds no pointers, so it may be copied freely; httpc_post() copies what
 * it needs, so a target may change or go away while requests are out. */
struct httpc_target {
    struct sockaddr_storage addr; /* the one address connected to */
    socklen_t addrlen;            /* 0 until parsed */
    char host[HTTPC_HOST_MAX];    /* Host header: the URL's authority as written */
    char path[HTTPC_PATH_MAX];    /* request target, "/" when the URL has none */
};

struct httpc_req;

/* The result of request r: its response's status code (100-599; interim
 * 1xx responses other than 101 are skipped) or a negative error. r is
 * valid until the callback returns, then freed; cancelling it from here is
 * a no-op. The callback may start and cancel other requests. */
typedef void httpc_done_cb(struct httpc_req *r, int status, void *data);

/*
 * Parses url, "http://HOST[:PORT][/PATH]" (PORT defaults to 80, PATH to
 * "/"; a query is kept in the path), into *t. HOST is an IPv4 literal, a
 * bracketed IPv6 literal or a name, which is resolved here with
 * getaddrinfo() and so may block: for configuration time only, never on a
 * running loop. The first address returned is the one used. Refused, with
 * a sentence in err (errlen bytes, NUL-terminated; may be 0): another
 * scheme (https:// included: there is no TLS in this build), userinfo, a
 * fragment, an empty host, a bad port, bytes other than visible ASCII in
 * the path. Returns 0, -EINVAL for a bad URL or -EHOSTUNREACH when the name
 * does not resolve; *t is unspecified after a failure.
 */
int httpc_target_parse(struct httpc_target *t, const char *url, char *err, size_t errlen);

/* Whether h may be given to httpc_post(): "Name: value" with a token for a
 * name, a value of visible ASCII, spaces and tabs only (no CR, LF or other
 * control byte, so nothing can be injected), and none of the headers the
 * client writes itself (Host, Content-Type, Content-Length, Connection,
 * User-Agent, Transfer-Encoding). For checking configured headers early. */
bool httpc_header_is_valid(const char *h);

/*
 * Starts "POST t->path HTTP/1.1" to t with Host, Content-Type:
 * application/json, Content-Length, Connection: close and User-Agent:
 * presenced, then headers (NULL-terminated "Name: value" strings, or
 * NULL), then the body (body, len). Everything is copied: t, headers and
 * body are borrowed for the call only. timeout_ms (> 0) is one deadline
 * for connect, write and read together.
 * Returns the request, whose cb(r, status, data) fires exactly once from
 * the loop, never from inside this call, even when the connect fails at
 * once. Returns NULL, and no callback fires, when the request itself is
 * invalid: a header httpc_header_is_valid() refuses, an unparsed t, a
 * timeout_ms of 0, or a NULL body with len > 0.
 */
struct httpc_req *httpc_post(struct loop *l, const struct httpc_target *t,
                             const char *const *headers, const void *body, size_t len,
                             uint32_t timeout_ms, httpc_done_cb *cb, void *data);

/* Abandons r: its socket is closed now and its callback never fires; it
 * is freed at the loop's next timer run. Safe from any loop callback,
 * another request's callback included; a no-op from r's own callback. Not
 * after r's callback has returned (r is gone then). */
void httpc_cancel(struct httpc_req *r);

/* Closes and frees r at once; its callback never fires. Only outside the
 * loop's callbacks, when tearing down after loop_run() returned (a
 * worker's stop): then no event of this iteration can still name r. A
 * no-op from r's own callback. */
void httpc_abandon(struct httpc_req *r);

/* A sentence for a callback's negative status (enum httpc_error or -errno). */
const char *httpc_strerror(int err);

#endif
