/* SPDX-License-Identifier: MIT */
/*
 * http.h - HTTP/1.1 request parsing (a pure parser over llhttp) and small
 * helpers for headers, query strings and status lines.
 *
 * http_parse_request() looks at the bytes at the start of a connection's
 * input and either returns one complete request or says that more bytes
 * are needed. It does no I/O and no allocation: every string in struct
 * http_request is a view into the caller's buffer, valid until the caller
 * consumes or changes those bytes. Limits are enforced before any byte is
 * buffered past them: a header block over HTTP_MAX_HEAD_BYTES or with more
 * than HTTP_MAX_HEADERS headers, a body over max_body.
 * RFC 9112 framing rules it applies: an HTTP/1.1 request has exactly one
 * Host header (and any request at most one); a target in absolute form
 * ("http://host/v1/x") is served as its path, with its authority as the
 * host; Expect may only ask for 100-continue (417 otherwise), which
 * http_request.expect_continue reports so the caller can answer it.
 */
#ifndef HTTP_H
#define HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define HTTP_MAX_HEAD_BYTES 8192 /* request line + headers + CRLFCRLF */
#define HTTP_MAX_HEADERS    100

/* Errors returned by http_parse_request (negative); http_error_status maps
 * each to the status code the server answers with. */
enum http_error {
    HTTP_E_BAD_REQUEST = -400,      /* malformed request (llhttp error) */
    HTTP_E_LENGTH_REQUIRED = -411,  /* chunked request bodies are not accepted */
    HTTP_E_BODY_TOO_LARGE = -413,   /* Content-Length over max_body */
    HTTP_E_URI_TOO_LONG = -414,     /* reserved; long URIs hit HEAD_TOO_LARGE */
    HTTP_E_HEAD_TOO_LARGE = -431,   /* header block over HTTP_MAX_HEAD_BYTES */
    HTTP_E_TOO_MANY_HEADERS = -432, /* more than HTTP_MAX_HEADERS; answered 431 */
    HTTP_E_VERSION = -505,          /* not HTTP/1.0 or HTTP/1.1 */
    HTTP_E_EXPECTATION = -417,      /* Expect with anything but 100-continue */
    HTTP_E_HOST = -4001,            /* Host missing (HTTP/1.1), repeated or invalid; 400 */
};

struct http_header {
    const char *name;
    size_t name_len;
    const char *value; /* leading/trailing whitespace stripped */
    size_t value_len;
};

struct http_request {
    const char *method; /* "GET", "POST", ... */
    size_t method_len;
    const char *target; /* raw request target: path + "?" + query */
    size_t target_len;
    const char *path; /* target up to '?', not percent-decoded; for an
                       * absolute-form target only its path ("/" when
                       * empty, then a static string) */
    size_t path_len;
    const char *query; /* after '?', without it; NULL/0 when absent */
    size_t query_len;
    const char *host; /* the authority of an absolute-form target, else the
                       * Host header's value; NULL/0 when neither */
    size_t host_len;
    int version_minor; /* 0 or 1 (major is always 1) */
    struct http_header headers[HTTP_MAX_HEADERS];
    size_t nheaders;
    const char *body; /* NULL/0 when no body */
    size_t body_len;
    size_t head_len;      /* bytes of request line + headers incl. final CRLFCRLF */
    bool keep_alive;      /* per HTTP version and Connection header */
    bool upgrade;         /* "Connection: upgrade" + "Upgrade:" present */
    bool expect_continue; /* HTTP/1.1 "Expect: 100-continue" with a body */
};

/* Parses one request at the start of (buf, len). Returns the bytes the
 * whole request occupies (head + body; for an upgrade request the head
 * only, so the bytes after it belong to the new protocol), PS_PARTIAL when
 * the request is incomplete but within limits, or a negative enum
 * http_error. max_body bounds Content-Length. *req is filled when a
 * request is returned, and also on PS_PARTIAL once the head is complete
 * and only body bytes are missing: then req->head_len > 0 and req->body is
 * NULL (the moment to answer expect_continue). On any other result only
 * req->head_len == 0 is promised. Stateless and prefix-consistent: every
 * prefix of a request gives PS_PARTIAL, and once a prefix gives an error,
 * every longer one gives the same error. A request with a body is never an upgrade (its
 * body is consumed). */
ssize_t http_parse_request(const char *buf, size_t len, size_t max_body, struct http_request *req);

/* Status code to answer a parse error with (400, 411, 413, 417, 431, 505). */
int http_error_status(ssize_t err);
/* Reason phrase for a status code ("Not Found"); "Unknown" if none. */
const char *http_status_text(int status);

/* Case-insensitive header lookup; returns the first match or NULL. */
const struct http_header *http_header_get(const struct http_request *req, const char *name);
/* True when the comma-separated header value list contains token
 * (case-insensitive), e.g. Connection: keep-alive, Upgrade. */
bool http_header_has_token(const struct http_header *h, const char *token);
/* Finds the next "key=value" in the query string with the given key
 * (compared after decoding; "key" alone has an empty value), starting
 * at *pos (0 at first); percent-decodes the value (and '+' to space) into
 * out (at most outsz-1 bytes, NUL-terminated). Returns the decoded length, or
 * -1 when not found / not decodable / too long. Advances *pos past the match
 * so repeated calls return repeated keys (?user=a&user=b). */
ssize_t http_query_next(const char *query, size_t query_len, const char *key, size_t *pos,
                        char *out, size_t outsz);
/* Percent-decodes (p, n) into out (outsz bytes incl. NUL); returns the
 * decoded length or -1 on a bad escape, an embedded NUL or overflow. */
ssize_t http_url_decode(const char *p, size_t n, char *out, size_t outsz);

/* True when req has "Authorization: Bearer <k>" with k equal to key, a
 * non-empty string (an empty key matches nothing). Compared in constant
 * time over SHA-256 digests, so neither content nor length leaks. */
bool http_bearer_is(const struct http_request *req, const char *key);

#endif
