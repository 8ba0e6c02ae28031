/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http.c - libFuzzer target for http_parse_request and the query and
 * header helpers.
 *
 * The input is a connection's bytes. Each parse reads from an exactly
 * sized heap copy, so ASan catches a read past the end. Checked:
 *   - a result is PS_PARTIAL, an enum http_error, or 1..len bytes;
 *   - every view of a parsed request lies inside the request's bytes;
 *   - prefixes agree with the whole: while the request is incomplete they
 *     give PS_PARTIAL, from its last byte on the same request; an error
 *     is final (a longer prefix never turns it into something else);
 *   - the requests that follow (pipelining) obey the same rules.
 * A broken invariant aborts, which libFuzzer reports as a crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "util.h"
#include "fuzz_check.h"

#define FUZZ_MAX_BODY     1024 /* small, so the corpus can trip it */
#define FUZZ_MAX_REQUESTS 8    /* pipelined requests examined per input */
#define FUZZ_ALL_PREFIXES 512  /* shorter inputs check every prefix */
#define FUZZ_SAMPLES      48   /* longer ones this many, plus the boundaries */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool is_result(ssize_t r, size_t len)
{
    switch (r) {
    case PS_PARTIAL:
    case HTTP_E_BAD_REQUEST:
    case HTTP_E_LENGTH_REQUIRED:
    case HTTP_E_BODY_TOO_LARGE:
    case HTTP_E_URI_TOO_LONG:
    case HTTP_E_HEAD_TOO_LARGE:
    case HTTP_E_TOO_MANY_HEADERS:
    case HTTP_E_VERSION:
    case HTTP_E_EXPECTATION:
    case HTTP_E_HOST:
        return true;
    default:
        return r > 0 && (size_t)r <= len;
    }
}

static bool inside(const char *p, size_t n, const char *lo, const char *hi)
{
    return p && p >= lo && n <= (size_t)(hi - p);
}

static void check_views(const struct http_request *req, const char *base, ssize_t r)
{
    const char *end = base + r, *head_end = base + req->head_len;

    CHECK(req->head_len > 0 && req->head_len <= (size_t)r);
    CHECK(req->head_len <= HTTP_MAX_HEAD_BYTES);
    CHECK(inside(req->method, req->method_len, base, head_end) && req->method_len > 0);
    CHECK(inside(req->target, req->target_len, base, head_end) && req->target_len > 0);
    /* The path is the target's start, or for an absolute-form target
     * ("http://h/x") a part of it after the authority, or a static "/". */
    CHECK(req->path_len > 0 || req->path == req->target);
    CHECK(inside(req->path, req->path_len, req->target, req->target + req->target_len) ||
          (req->path_len == 1 && req->path[0] == '/' && req->target[0] != '/'));
    CHECK(!req->query ||
          inside(req->query, req->query_len, req->target + 1, req->target + req->target_len));
    CHECK(!req->host || inside(req->host, req->host_len, base, head_end));
    CHECK(req->version_minor == 0 || req->host); /* HTTP/1.1 has its Host */
    CHECK(!req->expect_continue || req->body_len > 0);
    CHECK(req->version_minor == 0 || req->version_minor == 1);
    CHECK(req->nheaders <= HTTP_MAX_HEADERS);
    for (size_t i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];

        CHECK(inside(h->name, h->name_len, base, head_end) && h->name_len > 0);
        CHECK(inside(h->value, h->value_len, base, head_end));
    }
    if (req->body) {
        CHECK(req->body == head_end && req->body_len > 0 && req->body_len <= FUZZ_MAX_BODY);
        CHECK(req->head_len + req->body_len == (size_t)r);
        CHECK(!req->upgrade);
    } else {
        CHECK(req->body_len == 0 && head_end == end);
    }
}

/* The same request, parsed from two copies of the same bytes. */
static void check_same(const struct http_request *a, const char *abase,
                       const struct http_request *b, const char *bbase)
{
#define SAME_SPAN(f) CHECK((a->f ? a->f - abase : -1) == (b->f ? b->f - bbase : -1))
    SAME_SPAN(method);
    SAME_SPAN(target);
    SAME_SPAN(query);
    SAME_SPAN(body);
    SAME_SPAN(host);
    CHECK(a->host_len == b->host_len && a->expect_continue == b->expect_continue);
    CHECK(a->path == b->path || a->path - abase == b->path - bbase);
    CHECK(a->method_len == b->method_len && a->target_len == b->target_len);
    CHECK(a->path_len == b->path_len && a->query_len == b->query_len);
    CHECK(a->body_len == b->body_len && a->head_len == b->head_len);
    CHECK(a->nheaders == b->nheaders && a->version_minor == b->version_minor);
    CHECK(a->keep_alive == b->keep_alive && a->upgrade == b->upgrade);
    for (size_t i = 0; i < a->nheaders; i++) {
        SAME_SPAN(headers[i].name);
        SAME_SPAN(headers[i].value);
        CHECK(a->headers[i].name_len == b->headers[i].name_len);
        CHECK(a->headers[i].value_len == b->headers[i].value_len);
    }
#undef SAME_SPAN
}

/* Parses an exactly sized heap copy of (p, n); *copy is the caller's to free. */
static ssize_t parse_copy(const char *p, size_t n, struct http_request *req, char **copy)
{
    ssize_t r;

    *copy = malloc(n ? n : 1);
    CHECK(*copy);
    if (n)
        memcpy(*copy, p, n);
    r = http_parse_request(*copy, n, FUZZ_MAX_BODY, req);
    CHECK(is_result(r, n));
    if (r > 0)
        check_views(req, *copy, r);
    return r;
}

static void check_prefix(const char *p, size_t k, ssize_t whole, bool *failed,
                         const struct http_request *wreq, const char *wbase)
{
    struct http_request req;
    char *copy;
    ssize_t r = parse_copy(p, k, &req, &copy);

    if (whole >= 0 && k < (size_t)whole) {
        CHECK(r == PS_PARTIAL);
    } else if (whole >= 0) {
        CHECK(r == whole);
        check_same(&req, copy, wreq, wbase);
    } else if (*failed) {
        CHECK(r == whole);
    } else if (r != PS_PARTIAL) {
        CHECK(r == whole);
        *failed = true;
    }
    free(copy);
}

/* Prefixes in increasing order; an error, once seen, must stay. */
static void check_prefixes(const char *p, size_t n, ssize_t whole, const struct http_request *wreq,
                           const char *wbase)
{
    bool failed = false;
    size_t step = n <= FUZZ_ALL_PREFIXES ? 1 : n / FUZZ_SAMPLES;
    size_t edge = whole > 0 ? (size_t)whole : n;
    size_t head = whole > 0 ? wreq->head_len : n;

    for (size_t k = 0; k < n; k++) {
        /* sampled, but never skipping the bytes around the boundaries */
        bool near = k + 2 >= edge && k <= edge + 1;

        near = near || (k + 2 >= head && k <= head + 1) || k + 2 >= n ||
               (k + 2 >= HTTP_MAX_HEAD_BYTES && k <= HTTP_MAX_HEAD_BYTES + 2);
        if (step == 1 || k % step == 0 || near)
            check_prefix(p, k, whole, &failed, wreq, wbase);
    }
}

static void exercise_helpers(const struct http_request *req)
{
    static const char *const keys[] = {"user", "room", "a", "", "x y"};
    char out[64], key[9];
    size_t klen = 0;

    /* every call moves pos forward, so repeated keys are each seen once */
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        size_t pos = 0;

        do {
            size_t prev = pos;
            ssize_t r =
                http_query_next(req->query, req->query_len, keys[i], &pos, out, sizeof(out));

            CHECK(r >= -1 && r < (ssize_t)sizeof(out) && pos <= req->query_len);
            CHECK(pos > prev || (prev == req->query_len && r == -1));
            CHECK(r < 0 || out[r] == '\0');
        } while (pos < req->query_len);
    }
    /* a key taken from the query itself, so that it sometimes matches */
    while (klen < req->query_len && klen < sizeof(key) - 1 && req->query[klen] != '=' &&
           req->query[klen] != '&' && req->query[klen] != '\0')
        key[klen] = req->query[klen], klen++;
    key[klen] = '\0';
    {
        size_t pos = 0;

        (void)http_query_next(req->query, req->query_len, key, &pos, out, sizeof(out));
        CHECK(pos <= req->query_len);
    }
    CHECK(http_url_decode(req->path, req->path_len, out, sizeof(out)) < (ssize_t)sizeof(out));
    for (size_t i = 0; i < req->nheaders; i++) {
        (void)http_header_has_token(&req->headers[i], "upgrade");
        (void)http_header_has_token(&req->headers[i], "close");
    }
    (void)http_header_get(req, "Host");
    CHECK(http_status_text(200)[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    size_t off = 0;

    for (int i = 0; i < FUZZ_MAX_REQUESTS && off < size; i++) {
        struct http_request req;
        char *copy;
        ssize_t r = parse_copy(p + off, size - off, &req, &copy);

        check_prefixes(p + off, size - off, r, &req, copy);
        if (r < 0) {
            int status = http_error_status(r);

            CHECK(status >= 400 && status <= 505);
            CHECK(r == PS_PARTIAL || strcmp(http_status_text(status), "Unknown") != 0);
            free(copy);
            break;
        }
        exercise_helpers(&req);
        free(copy);
        if (req.upgrade)
            break; /* the rest is another protocol */
        off += (size_t)r;
    }
    return 0;
}
