/* SPDX-License-Identifier: MIT */
/*
 * test_http.c - http_parse_request and the header/query helpers.
 *
 * Every request is parsed whole, then every prefix of it (each must give
 * PS_PARTIAL until the request is complete, then the same result), then as
 * a stream split in two at every point and fed to a little request loop
 * like httpd's (pipelined requests included). Each parse reads from a
 * buffer placed at the end of an mmap'd region followed by a PROT_NONE
 * page, so reading one byte past the input crashes the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "http.h"
#include "util.h"

#define MAX_BODY 1024

/* ---- Guard-page buffers ---- */

struct guard {
    char *map;     /* mmap'd region: data pages + one PROT_NONE page */
    size_t maplen; /* bytes mapped */
    char *end;     /* first byte of the guard page */
};

static void guard_init(struct guard *g, size_t cap)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t data = (cap / page + 1) * page;

    g->maplen = data + page;
    g->map = mmap(NULL, g->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(g->map != MAP_FAILED);
    assert_int_equal(mprotect(g->map + data, page, PROT_NONE), 0);
    g->end = g->map + data;
}

static void guard_release(struct guard *g)
{
    munmap(g->map, g->maplen);
}

/* Copies (p, n) so that it ends right before the guard page. */
static const char *guard_place(struct guard *g, const char *p, size_t n)
{
    memcpy(g->end - n, p, n);
    return g->end - n;
}

/* ---- Comparing results from different copies of the same bytes ---- */

static void assert_span(const char *a, const char *abase, const char *b, const char *bbase)
{
    if (!a || !b || a == b) {
        assert_true(a == b); /* both absent, or the same static string */
        return;
    }
    assert_int_equal(a - abase, b - bbase);
}

/* a was parsed from abase, b from bbase; the requests must be identical. */
static void assert_same_request(const struct http_request *a, const char *abase,
                                const struct http_request *b, const char *bbase)
{
    assert_span(a->method, abase, b->method, bbase);
    assert_int_equal(a->method_len, b->method_len);
    assert_span(a->target, abase, b->target, bbase);
    assert_int_equal(a->target_len, b->target_len);
    assert_span(a->path, abase, b->path, bbase);
    assert_int_equal(a->path_len, b->path_len);
    assert_span(a->query, abase, b->query, bbase);
    assert_int_equal(a->query_len, b->query_len);
    assert_span(a->host, abase, b->host, bbase);
    assert_int_equal(a->host_len, b->host_len);
    assert_int_equal(a->expect_continue, b->expect_continue);
    assert_int_equal(a->version_minor, b->version_minor);
    assert_int_equal(a->nheaders, b->nheaders);
    for (size_t i = 0; i < a->nheaders; i++) {
        assert_span(a->headers[i].name, abase, b->headers[i].name, bbase);
        assert_int_equal(a->headers[i].name_len, b->headers[i].name_len);
        assert_span(a->headers[i].value, abase, b->headers[i].value, bbase);
        assert_int_equal(a->headers[i].value_len, b->headers[i].value_len);
    }
    assert_span(a->body, abase, b->body, bbase);
    assert_int_equal(a->body_len, b->body_len);
    assert_int_equal(a->head_len, b->head_len);
    assert_int_equal(a->keep_alive, b->keep_alive);
    assert_int_equal(a->upgrade, b->upgrade);
}

/* Every view of a successful parse lies inside [base, base + r). */
static void assert_views_inside(const struct http_request *req, const char *base, ssize_t r)
{
    const char *end = base + r;

    assert_true(req->method >= base && req->method + req->method_len <= end);
    assert_true(req->target >= base && req->target + req->target_len <= end);
    if (req->path_len == 1 && req->path[0] == '/' && (req->path < base || req->path >= end))
        assert_true(req->target[0] != '/'); /* an absolute form's empty path */
    else
        assert_true(req->path >= req->target &&
                    req->path + req->path_len <= req->target + req->target_len);
    if (req->host)
        assert_true(req->host >= base && req->host + req->host_len <= base + req->head_len);
    if (req->query)
        assert_true(req->query > req->target &&
                    req->query + req->query_len <= req->target + req->target_len);
    assert_true(req->head_len <= (size_t)r && req->head_len > 0);
    for (size_t i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];

        assert_true(h->name >= base && h->name + h->name_len <= base + req->head_len);
        assert_true(h->value >= base && h->value + h->value_len <= base + req->head_len);
    }
    if (req->body)
        assert_true(req->body == base + req->head_len &&
                    req->head_len + req->body_len == (size_t)r);
    else
        assert_true(req->head_len == (size_t)r);
}

/* ---- Parsing every way ---- */

/* Whole, then every prefix: PS_PARTIAL until complete, then the same. */
static ssize_t parse_prefixes(const char *raw, size_t n, size_t max_body)
{
    struct guard g;
    struct http_request whole, part;
    const char *wbase;
    ssize_t r, rk;
    bool failed = false;

    guard_init(&g, n);
    wbase = guard_place(&g, raw, n);
    r = http_parse_request(wbase, n, max_body, &whole);
    if (r >= 0) {
        assert_true((size_t)r <= n);
        assert_views_inside(&whole, wbase, r);
    }
    for (size_t k = 0; k < n; k++) {
        const char *p = guard_place(&g, raw, k);

        rk = http_parse_request(p, k, max_body, &part);
        if (r >= 0 && k < (size_t)r) {
            assert_int_equal(rk, PS_PARTIAL);
        } else if (r >= 0) {
            assert_int_equal(rk, r);
            assert_views_inside(&part, p, rk);
            assert_same_request(&part, p, &whole, wbase);
        } else if (failed) {
            assert_int_equal(rk, r); /* an error is final */
        } else if (rk != PS_PARTIAL) {
            assert_int_equal(rk, r);
            failed = true;
        }
    }
    guard_release(&g);
    return r;
}

#define MAX_RESULTS 16

/* A request loop like httpd's over (raw, n) arriving in two reads split at
 * split: records each request's length (and flags upgrade), stops at an
 * error or an upgrade. Returns the number of results. */
static size_t run_stream(const char *raw, size_t n, size_t split, size_t max_body, ssize_t *results)
{
    struct guard g;
    size_t off = 0, nres = 0;
    size_t avail[2] = {split, n};

    guard_init(&g, n);
    for (int read = 0; read < 2; read++) {
        while (off < avail[read]) {
            struct http_request req;
            size_t len = avail[read] - off;
            const char *p = guard_place(&g, raw + off, len);
            ssize_t r = http_parse_request(p, len, max_body, &req);

            if (r == PS_PARTIAL)
                break;
            assert_true(nres < MAX_RESULTS);
            results[nres++] = r;
            if (r < 0 || req.upgrade)
                goto out;
            assert_views_inside(&req, p, r);
            off += (size_t)r;
        }
    }
out:
    guard_release(&g);
    return nres;
}

static void check_splits(const char *raw, size_t n, size_t max_body)
{
    ssize_t want[MAX_RESULTS], got[MAX_RESULTS];
    size_t nwant = run_stream(raw, n, n, max_body, want);

    for (size_t split = 0; split < n; split++) {
        size_t ngot = run_stream(raw, n, split, max_body, got);

        assert_int_equal(ngot, nwant);
        for (size_t i = 0; i < ngot; i++)
            assert_int_equal(got[i], want[i]);
    }
}

/* Parses (raw, n) whole, by prefixes and split; then once more from raw
 * itself so the views in req point into raw. */
static ssize_t parse_n(const char *raw, size_t n, size_t max_body, struct http_request *req)
{
    ssize_t r = parse_prefixes(raw, n, max_body);
    ssize_t again;

    check_splits(raw, n, max_body);
    again = http_parse_request(raw, n, max_body, req);
    assert_int_equal(again, r);
    if (r >= 0)
        assert_views_inside(req, raw, r);
    return r;
}

static ssize_t parse(const char *raw, struct http_request *req)
{
    return parse_n(raw, strlen(raw), MAX_BODY, req);
}

/* Asserts that (p, n) equals the NUL-terminated s. */
static void assert_view(const char *p, size_t n, const char *s)
{
    assert_non_null(p);
    assert_int_equal(n, strlen(s));
    assert_memory_equal(p, s, n);
}

static void assert_header(const struct http_request *req, const char *name, const char *value)
{
    const struct http_header *h = http_header_get(req, name);

    assert_non_null(h);
    assert_view(h->value, h->value_len, value);
}

/* ---- Requests ---- */

static void test_simple_get(void **state)
{
    static const char raw[] = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    struct http_request req;

    (void)state;
    assert_int_equal(parse(raw, &req), sizeof(raw) - 1);
    assert_view(req.method, req.method_len, "GET");
    assert_view(req.target, req.target_len, "/");
    assert_view(req.path, req.path_len, "/");
    assert_null(req.query);
    assert_int_equal(req.query_len, 0);
    assert_int_equal(req.version_minor, 1);
    assert_int_equal(req.nheaders, 1);
    assert_view(req.headers[0].name, req.headers[0].name_len, "Host");
    assert_header(&req, "host", "example.com");
    assert_null(req.body);
    assert_int_equal(req.body_len, 0);
    assert_int_equal(req.head_len, sizeof(raw) - 1);
    assert_true(req.keep_alive);
    assert_false(req.upgrade);
}

static void test_empty_and_leading_crlf(void **state)
{
    static const char raw[] = "\r\nGET /x HTTP/1.1\r\nHost: h\r\n\r\n";
    struct http_request req;

    (void)state;
    assert_int_equal(http_parse_request("", 0, MAX_BODY, &req), PS_PARTIAL);
    assert_int_equal(parse(raw, &req), sizeof(raw) - 1);
    assert_view(req.method, req.method_len, "GET");
    assert_view(req.path, req.path_len, "/x");
}

static void test_query_string(void **state)
{
    struct http_request req;

    (void)state;
    assert_true(parse("GET /a/b?x=1&y=%20 HTTP/1.1\r\nHost: h\r\n\r\n", &req) > 0);
    assert_view(req.target, req.target_len, "/a/b?x=1&y=%20");
    assert_view(req.path, req.path_len, "/a/b");
    assert_view(req.query, req.query_len, "x=1&y=%20");

    assert_true(parse("GET /p? HTTP/1.1\r\nHost: h\r\n\r\n", &req) > 0);
    assert_view(req.path, req.path_len, "/p");
    assert_non_null(req.query);
    assert_int_equal(req.query_len, 0);

    assert_true(parse("GET /p?q=1#frag HTTP/1.1\r\nHost: h\r\n\r\n", &req) > 0);
    assert_view(req.path, req.path_len, "/p");
    assert_view(req.query, req.query_len, "q=1");

    assert_true(parse("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", &req) > 0);
    assert_view(req.path, req.path_len, "*");
}

static void test_header_whitespace(void **state)
{
    static const char raw[] = "GET / HTTP/1.1\r\nHost: h\r\n"
                              "X-A:   spaced out  \r\n"
                              "X-B:\ttabbed\t\r\n"
                              "X-C:\r\n"
                              "X-D:   \r\n"
                              "X-E:inner  space\r\n"
                              "\r\n";
    struct http_request req;

    (void)state;
    assert_int_equal(parse(raw, &req), sizeof(raw) - 1);
    assert_int_equal(req.nheaders, 6);
    assert_header(&req, "x-a", "spaced out");
    assert_header(&req, "X-B", "tabbed");
    assert_header(&req, "X-C", "");
    assert_header(&req, "X-D", "");
    assert_header(&req, "x-e", "inner  space");
    assert_null(http_header_get(&req, "X-F"));
    assert_null(http_header_get(&req, "X"));
}

static void test_bad_headers(void **state)
{
    struct http_request req;

    (void)state;
    /* obsolete line folding */
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\nFoo: a\r\n b\r\n\r\n", &req),
                     HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\nFoo:\r\n\tb\r\n\r\n", &req),
                     HTTP_E_BAD_REQUEST);
    /* whitespace in or after the name, empty name */
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\nHost : a\r\n\r\n", &req),
                     HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\nCon nection: a\r\n\r\n", &req),
                     HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\n: a\r\n\r\n", &req), HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", &req),
                     HTTP_E_BAD_REQUEST);
    /* control character in a value, bare LF line ends */
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\nX: a\x01\r\n\r\n", &req),
                     HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\nX: a\nY: b\n\n", &req),
                     HTTP_E_BAD_REQUEST);
}

/* Builds a request with nheaders headers: Host, then "H<i>: v" for i from
 * 1. */
static size_t build_many_headers(char *out, size_t outsz, size_t nheaders)
{
    size_t n = (size_t)snprintf(out, outsz, "GET / HTTP/1.1\r\nHost: h\r\n");

    for (size_t i = 1; i < nheaders; i++)
        n += (size_t)snprintf(out + n, outsz - n, "H%zu: v\r\n", i);
    n += (size_t)snprintf(out + n, outsz - n, "\r\n");
    assert_true(n < outsz);
    return n;
}

static void test_many_headers(void **state)
{
    static char raw[4096];
    struct http_request req;
    size_t n;

    (void)state;
    n = build_many_headers(raw, sizeof(raw), HTTP_MAX_HEADERS);
    assert_int_equal(parse_n(raw, n, MAX_BODY, &req), n);
    assert_int_equal(req.nheaders, HTTP_MAX_HEADERS);
    assert_header(&req, "H99", "v");

    n = build_many_headers(raw, sizeof(raw), HTTP_MAX_HEADERS + 1);
    assert_int_equal(parse_n(raw, n, MAX_BODY, &req), HTTP_E_TOO_MANY_HEADERS);

    /* A 101st name that turns out malformed is a malformed request, also
     * for the prefixes that end inside it (found by fuzz_http). */
    n = build_many_headers(raw, sizeof(raw), HTTP_MAX_HEADERS) - 2;
    n += (size_t)snprintf(raw + n, sizeof(raw) - n, "H10\xff: v\r\n\r\n");
    assert_int_equal(parse_n(raw, n, MAX_BODY, &req), HTTP_E_BAD_REQUEST);
    assert_int_equal(http_error_status(HTTP_E_TOO_MANY_HEADERS), 431);
}

/* Builds a complete head of exactly size bytes (one padding header). */
static size_t build_head(char *out, size_t size)
{
    static const char pre[] = "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: ";
    static const char post[] = "\r\n\r\n";
    size_t pad = size - (sizeof(pre) - 1) - (sizeof(post) - 1);

    memcpy(out, pre, sizeof(pre) - 1);
    memset(out + sizeof(pre) - 1, 'a', pad);
    memcpy(out + sizeof(pre) - 1 + pad, post, sizeof(post) - 1);
    return size;
}

static void test_head_size_limit(void **state)
{
    static char raw[HTTP_MAX_HEAD_BYTES + 64];
    struct http_request req;
    size_t n;

    (void)state;
    n = build_head(raw, HTTP_MAX_HEAD_BYTES);
    assert_int_equal(parse_n(raw, n, MAX_BODY, &req), HTTP_MAX_HEAD_BYTES);
    assert_int_equal(req.head_len, HTTP_MAX_HEAD_BYTES);

    n = build_head(raw, HTTP_MAX_HEAD_BYTES + 1);
    assert_int_equal(parse_n(raw, n, MAX_BODY, &req), HTTP_E_HEAD_TOO_LARGE);

    /* Incomplete: partial up to the limit, an error one byte past it. */
    n = build_head(raw, HTTP_MAX_HEAD_BYTES + 32);
    assert_int_equal(http_parse_request(raw, HTTP_MAX_HEAD_BYTES, MAX_BODY, &req), PS_PARTIAL);
    assert_int_equal(http_parse_request(raw, HTTP_MAX_HEAD_BYTES + 1, MAX_BODY, &req),
                     HTTP_E_HEAD_TOO_LARGE);
    assert_int_equal(http_parse_request(raw, n, MAX_BODY, &req), HTTP_E_HEAD_TOO_LARGE);
    assert_int_equal(http_error_status(HTTP_E_HEAD_TOO_LARGE), 431);

    /* A request line alone over the limit. */
    memcpy(raw, "GET /", 5);
    memset(raw + 5, 'u', sizeof(raw) - 5);
    assert_int_equal(http_parse_request(raw, sizeof(raw), MAX_BODY, &req), HTTP_E_HEAD_TOO_LARGE);
}

static void test_body_content_length(void **state)
{
    static const char raw[] = "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello";
    static const char zero[] = "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n";
    struct http_request req;

    (void)state;
    assert_int_equal(parse(raw, &req), sizeof(raw) - 1);
    assert_view(req.method, req.method_len, "POST");
    assert_view(req.body, req.body_len, "hello");
    assert_int_equal(req.head_len, sizeof(raw) - 1 - 5);
    /* A partial body is partial. */
    assert_int_equal(http_parse_request(raw, sizeof(raw) - 2, MAX_BODY, &req), PS_PARTIAL);
    assert_int_equal(http_parse_request(raw, req.head_len, MAX_BODY, &req), PS_PARTIAL);

    assert_int_equal(parse(zero, &req), sizeof(zero) - 1);
    assert_null(req.body);
    assert_int_equal(req.body_len, 0);
}

static void test_body_too_large(void **state)
{
    static const char over[] = "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n";
    static const char at[] = "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n";
    static const char huge[] =
        "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551615\r\n\r\n";
    static const char overflow[] =
        "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551616\r\n\r\n";
    struct http_request req;

    (void)state;
    /* Decided from the header alone: no body byte has arrived. */
    assert_int_equal(parse_n(over, sizeof(over) - 1, 10, &req), HTTP_E_BODY_TOO_LARGE);
    assert_int_equal(parse_n(at, sizeof(at) - 1, 10, &req), PS_PARTIAL);
    assert_int_equal(parse_n(huge, sizeof(huge) - 1, 10, &req), HTTP_E_BODY_TOO_LARGE);
    assert_int_equal(parse_n(overflow, sizeof(overflow) - 1, 10, &req), HTTP_E_BAD_REQUEST);
    assert_int_equal(http_error_status(HTTP_E_BODY_TOO_LARGE), 413);
}

static void test_chunked_refused(void **state)
{
    struct http_request req;

    (void)state;
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
                           "chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
                           &req),
                     HTTP_E_LENGTH_REQUIRED);
    assert_int_equal(
        parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &req),
        HTTP_E_LENGTH_REQUIRED);
    /* chunked not last, or not at all: the length is unknowable */
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", &req),
                     HTTP_E_BAD_REQUEST);
    assert_int_equal(http_error_status(HTTP_E_LENGTH_REQUIRED), 411);
}

static void test_content_length_and_transfer_encoding(void **state)
{
    struct http_request req;

    (void)state;
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                           "Transfer-Encoding: chunked\r\n\r\nhello",
                           &req),
                     HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                           "Content-Length: 5\r\n\r\nhello",
                           &req),
                     HTTP_E_BAD_REQUEST);
    assert_int_equal(
        parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", &req),
        HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5x\r\n\r\n", &req),
                     HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", &req),
                     HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \r\n\r\n", &req),
                     HTTP_E_BAD_REQUEST);
}

static void test_garbage(void **state)
{
    static const char tls[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    struct http_request req;

    (void)state;
    assert_int_equal(parse_n(tls, sizeof(tls) - 1, MAX_BODY, &req), HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("hello world\r\n\r\n", &req), HTTP_E_BAD_REQUEST);
    assert_int_equal(parse(" GET / HTTP/1.1\r\nHost: h\r\n\r\n", &req), HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("GET /a b HTTP/1.1\r\nHost: h\r\n\r\n", &req), HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("GET / FOO/1.1\r\n\r\n", &req), HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("GET / HTTP/1.1 \r\n\r\n", &req), HTTP_E_BAD_REQUEST);
    assert_int_equal(parse_n("GET /\0 HTTP/1.1\r\nHost: h\r\n\r\n", 20, MAX_BODY, &req),
                     HTTP_E_BAD_REQUEST);
    assert_int_equal(http_error_status(HTTP_E_BAD_REQUEST), 400);
}

static void test_lowercase_method(void **state)
{
    struct http_request req;

    (void)state;
    assert_int_equal(parse("get / HTTP/1.1\r\nHost: h\r\n\r\n", &req), HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("Get / HTTP/1.1\r\nHost: h\r\n\r\n", &req), HTTP_E_BAD_REQUEST);
    assert_true(parse("DELETE /x HTTP/1.1\r\nHost: h\r\n\r\n", &req) > 0);
    assert_view(req.method, req.method_len, "DELETE");
}

static void test_versions(void **state)
{
    struct http_request req;

    (void)state;
    assert_int_equal(parse("GET / HTTP/2.0\r\n\r\n", &req), HTTP_E_VERSION);
    assert_int_equal(parse("GET / HTTP/0.9\r\n\r\n", &req), HTTP_E_VERSION);
    assert_int_equal(parse("GET /\r\n", &req), HTTP_E_VERSION);
    assert_int_equal(parse("GET /\r\n\r\n", &req), HTTP_E_VERSION);
    /* whatever follows a request line without a version (found by fuzz_http) */
    assert_int_equal(parse("GET /x\r\nX: a\r\n b\r\n\r\n", &req), HTTP_E_VERSION);
    assert_int_equal(parse("GET / HTTP/1.2\r\n\r\n", &req), HTTP_E_VERSION);
    assert_int_equal(parse("GET / HTTP/3.0\r\n\r\n", &req), HTTP_E_VERSION);
    assert_int_equal(parse("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", &req), HTTP_E_VERSION);
    assert_int_equal(parse("GET / HTTP/x.1\r\n\r\n", &req), HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("GET / HTTP/11.1\r\n\r\n", &req), HTTP_E_BAD_REQUEST);
    assert_int_equal(parse("GET / HTTP/1.1x\r\n\r\n", &req), HTTP_E_BAD_REQUEST);
    assert_int_equal(http_error_status(HTTP_E_VERSION), 505);

    assert_true(parse("GET / HTTP/1.0\r\n\r\n", &req) > 0);
    assert_int_equal(req.version_minor, 0);
}

static void test_keep_alive(void **state)
{
    struct http_request req;

    (void)state;
    assert_true(parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n", &req) > 0);
    assert_true(req.keep_alive);
    assert_true(parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", &req) > 0);
    assert_false(req.keep_alive);
    assert_true(parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n", &req) > 0);
    assert_false(req.keep_alive);
    assert_true(parse("GET / HTTP/1.0\r\n\r\n", &req) > 0);
    assert_false(req.keep_alive);
    assert_true(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &req) > 0);
    assert_true(req.keep_alive);
    assert_true(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &req) > 0);
    assert_true(req.keep_alive);
}

static void test_pipelined(void **state)
{
#define REQ_A "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
#define REQ_B "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nxyz"
#define REQ_C "GET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
    static const char raw[] = REQ_A REQ_B REQ_C;
    struct http_request req;
    size_t off = 0, n = sizeof(raw) - 1;
    ssize_t r;

    (void)state;
    r = parse_n(raw, n, MAX_BODY, &req);
    assert_int_equal(r, sizeof(REQ_A) - 1);
    assert_view(req.path, req.path_len, "/a");
    off += (size_t)r;
    r = parse_n(raw + off, n - off, MAX_BODY, &req);
    assert_int_equal(r, sizeof(REQ_B) - 1);
    assert_view(req.path, req.path_len, "/b");
    assert_view(req.body, req.body_len, "xyz");
    off += (size_t)r;
    r = parse_n(raw + off, n - off, MAX_BODY, &req);
    assert_int_equal(r, sizeof(REQ_C) - 1);
    assert_int_equal((size_t)r, n - off);
    assert_view(req.path, req.path_len, "/c");
    assert_false(req.keep_alive);
#undef REQ_A
#undef REQ_B
#undef REQ_C
}

static void test_upgrade(void **state)
{
    static const char ws[] = "GET /v1/ws HTTP/1.1\r\n"
                             "Host: localhost\r\n"
                             "Connection: keep-alive, Upgrade\r\n"
                             "Upgrade: websocket\r\n"
                             "Sec-WebSocket-Version: 13\r\n"
                             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                             "\r\n"
                             "\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58"
                             "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    static const char head_only[] = "GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\n"
                                    "Upgrade: websocket\r\n\r\n";
    static const char with_body[] =
        "POST / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: x\r\n"
        "Content-Length: 2\r\n\r\nab";
    struct http_request req;
    size_t head = strstr(ws, "\r\n\r\n") + 4 - ws;

    (void)state;
    assert_int_equal(parse_n(ws, sizeof(ws) - 1, MAX_BODY, &req), head);
    assert_true(req.upgrade);
    assert_int_equal(req.head_len, head);
    assert_null(req.body);
    assert_header(&req, "upgrade", "websocket");

    assert_int_equal(parse(head_only, &req), sizeof(head_only) - 1);
    assert_true(req.upgrade);
    /* Either half alone is not an upgrade. */
    assert_true(parse("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n", &req) > 0);
    assert_false(req.upgrade);
    assert_true(parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\n\r\n", &req) > 0);
    assert_false(req.upgrade);
    assert_true(
        parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: upgraded\r\nUpgrade: x\r\n\r\n", &req) > 0);
    assert_false(req.upgrade);
    /* The token may be in a second Connection header. */
    assert_true(
        parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nConnection: upgrade\r\n"
              "Upgrade: x\r\n\r\n",
              &req) > 0);
    assert_true(req.upgrade);
    /* With a body it is answered as an ordinary request: body consumed. */
    assert_int_equal(parse(with_body, &req), sizeof(with_body) - 1);
    assert_false(req.upgrade);
    assert_view(req.body, req.body_len, "ab");
}

/* ---- Helpers ---- */

/* RFC 9112 3.2: exactly one Host in HTTP/1.1, at most one in HTTP/1.0. */
static void test_host_required(void **state)
{
    struct http_request req;

    (void)state;
    assert_int_equal(parse("GET / HTTP/1.1\r\n\r\n", &req), HTTP_E_HOST);
    assert_int_equal(parse("GET / HTTP/1.1\r\nX: y\r\n\r\n", &req), HTTP_E_HOST);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", &req), HTTP_E_HOST);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nX: y\r\nhost: b\r\n\r\n", &req),
                     HTTP_E_HOST);
    assert_int_equal(parse("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", &req), HTTP_E_HOST);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", &req), HTTP_E_HOST);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: user@a\r\n\r\n", &req), HTTP_E_HOST);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", &req), HTTP_E_HOST);
    assert_int_equal(http_error_status(HTTP_E_HOST), 400);

    assert_true(parse("GET / HTTP/1.0\r\n\r\n", &req) > 0); /* HTTP/1.0 may omit it */
    assert_null(req.host);
    assert_true(parse("GET / HTTP/1.1\r\nHost: example.com:7400\r\n\r\n", &req) > 0);
    assert_view(req.host, req.host_len, "example.com:7400");
    assert_true(parse("GET / HTTP/1.1\r\nhOsT: [::1]:80\r\n\r\n", &req) > 0);
    assert_view(req.host, req.host_len, "[::1]:80");
    assert_true(parse("GET / HTTP/1.1\r\nHost:\r\n\r\n", &req) > 0); /* empty is allowed */
    assert_int_equal(req.host_len, 0);
    /* A header whose name only starts with Host is another header. */
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost-X: a\r\n\r\n", &req), HTTP_E_HOST);
}

/* RFC 9112 3.2.2: a server must accept the absolute form; its path is
 * what is served and its authority is the host. */
static void test_absolute_form(void **state)
{
    struct http_request req;

    (void)state;
    assert_true(parse("GET http://example.com/v1/presence?user=a HTTP/1.1\r\n"
                      "Host: example.com\r\n\r\n",
                      &req) > 0);
    assert_view(req.target, req.target_len, "http://example.com/v1/presence?user=a");
    assert_view(req.path, req.path_len, "/v1/presence");
    assert_view(req.query, req.query_len, "user=a");
    assert_view(req.host, req.host_len, "example.com");

    /* The target's authority wins over the header. */
    assert_true(parse("GET HTTPS://a.example:8443/x HTTP/1.1\r\nHost: b.example\r\n\r\n", &req) >
                0);
    assert_view(req.path, req.path_len, "/x");
    assert_view(req.host, req.host_len, "a.example:8443");

    /* An empty path is "/". */
    assert_true(parse("GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n", &req) > 0);
    assert_view(req.path, req.path_len, "/");
    assert_null(req.query);
    assert_true(parse("GET http://example.com?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n", &req) >
                0);
    assert_view(req.path, req.path_len, "/");
    assert_view(req.query, req.query_len, "q=1");

    /* Still needs its Host header; no empty authority, no userinfo. */
    assert_int_equal(parse("GET http://example.com/ HTTP/1.1\r\n\r\n", &req), HTTP_E_HOST);
    assert_int_equal(parse("GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n", &req), HTTP_E_HOST);
    assert_int_equal(parse("GET http://u:p@example.com/ HTTP/1.1\r\nHost: h\r\n\r\n", &req),
                     HTTP_E_HOST);
}

/* RFC 9110 10.1.1: only 100-continue is defined; the caller answers it. */
static void test_expect(void **state)
{
    static const char head[] = "POST /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                               "Content-Length: 5\r\n\r\n";
    char whole[sizeof(head) + 5];
    struct http_request req;

    (void)state;
    memcpy(whole, head, sizeof(head) - 1);
    memcpy(whole + sizeof(head) - 1, "hello", 6);
    assert_int_equal(parse(whole, &req), sizeof(whole) - 1);
    assert_true(req.expect_continue);
    assert_view(req.body, req.body_len, "hello");

    /* The head alone: partial, with the head filled in to answer with 100. */
    assert_int_equal(http_parse_request(head, sizeof(head) - 1, MAX_BODY, &req), PS_PARTIAL);
    assert_int_equal(req.head_len, sizeof(head) - 1);
    assert_true(req.expect_continue);
    assert_null(req.body);
    /* Before the head is complete nothing is filled in. */
    assert_int_equal(http_parse_request(head, sizeof(head) - 3, MAX_BODY, &req), PS_PARTIAL);
    assert_int_equal(req.head_len, 0);
    assert_false(req.expect_continue);

    assert_true(parse("POST /x HTTP/1.1\r\nHost: h\r\nexpect: 100-Continue\r\n\r\n", &req) > 0);
    assert_false(req.expect_continue); /* no body: nothing to wait for */
    assert_true(
        parse("POST /x HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx", &req) > 0);
    assert_false(req.expect_continue); /* HTTP/1.0: ignored */
    assert_int_equal(parse("POST /x HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\n\r\n", &req),
                     HTTP_E_EXPECTATION);
    assert_int_equal(parse("POST /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue, x\r\n\r\n", &req),
                     HTTP_E_EXPECTATION);
    assert_int_equal(http_error_status(HTTP_E_EXPECTATION), 417);
    assert_string_equal(http_status_text(417), "Expectation Failed");
    /* The body limit is decided first: a 413 needs no 100. */
    assert_int_equal(parse_n(head, sizeof(head) - 1, 4, &req), HTTP_E_BODY_TOO_LARGE);
}

static void test_header_has_token(void **state)
{
    struct http_header h = {.name = "Connection", .name_len = 10};
    static const struct {
        const char *value;
        const char *token;
        bool want;
    } cases[] = {
        {"upgrade", "upgrade", true},
        {"Upgrade", "upgrade", true},
        {"keep-alive, Upgrade", "upgrade", true},
        {"keep-alive,Upgrade", "upgrade", true},
        {"  upgrade  ", "upgrade", true},
        {",, upgrade ,,", "upgrade", true},
        {"upgrade, close", "close", true},
        {"upgrade\t,\tclose", "close", true},
        {"upgraded", "upgrade", false},
        {"up grade", "upgrade", false},
        {"xupgrade", "upgrade", false},
        {"", "upgrade", false},
        {",", "upgrade", false},
        {"upgrade", "", false},
        {"keep-alive", "upgrade", false},
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        h.value = cases[i].value;
        h.value_len = strlen(cases[i].value);
        assert_int_equal(http_header_has_token(&h, cases[i].token), cases[i].want);
    }
    assert_false(http_header_has_token(NULL, "upgrade"));
}

static void test_query_next(void **state)
{
    static const char q[] = "user=a&room=r%201&user=b+c&flag&user=&x=%zz&long=0123456789"
                            "&%75ser=d&empty=";
    size_t qn = sizeof(q) - 1, pos = 0;
    char out[8];

    (void)state;
    assert_int_equal(http_query_next(q, qn, "user", &pos, out, sizeof(out)), 1);
    assert_string_equal(out, "a");
    assert_int_equal(http_query_next(q, qn, "user", &pos, out, sizeof(out)), 3);
    assert_string_equal(out, "b c");
    assert_int_equal(http_query_next(q, qn, "user", &pos, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    assert_int_equal(http_query_next(q, qn, "user", &pos, out, sizeof(out)), 1);
    assert_string_equal(out, "d"); /* the key is decoded too */
    assert_int_equal(http_query_next(q, qn, "user", &pos, out, sizeof(out)), -1);
    assert_int_equal(pos, qn);
    assert_int_equal(http_query_next(q, qn, "user", &pos, out, sizeof(out)), -1);

    pos = 0;
    assert_int_equal(http_query_next(q, qn, "room", &pos, out, sizeof(out)), 3);
    assert_string_equal(out, "r 1");
    pos = 0;
    assert_int_equal(http_query_next(q, qn, "flag", &pos, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    pos = 0;
    assert_int_equal(http_query_next(q, qn, "x", &pos, out, sizeof(out)), -1); /* bad escape */
    pos = 0;
    assert_int_equal(http_query_next(q, qn, "long", &pos, out, sizeof(out)), -1); /* too long */
    pos = 0;
    assert_int_equal(http_query_next(q, qn, "empty", &pos, out, sizeof(out)), 0);
    pos = 0;
    assert_int_equal(http_query_next(q, qn, "use", &pos, out, sizeof(out)), -1);
    pos = 0;
    assert_int_equal(http_query_next(q, qn, "users", &pos, out, sizeof(out)), -1);
    pos = 0;
    assert_int_equal(http_query_next(NULL, 0, "user", &pos, out, sizeof(out)), -1);
    pos = 0;
    assert_int_equal(http_query_next("a=%00", 5, "a", &pos, out, sizeof(out)), -1);
    pos = 0;
    assert_int_equal(http_query_next("a=1", 3, "a", &pos, out, 0), -1);
}

static void test_url_decode(void **state)
{
    char out[16];

    (void)state;
    assert_int_equal(http_url_decode("/a%20b", 6, out, sizeof(out)), 4);
    assert_string_equal(out, "/a b");
    assert_int_equal(http_url_decode("a+b", 3, out, sizeof(out)), 3);
    assert_string_equal(out, "a+b"); /* '+' is a space only in queries */
    assert_int_equal(http_url_decode("%2e%2E%2f", 9, out, sizeof(out)), 3);
    assert_string_equal(out, "../");
    assert_int_equal(http_url_decode("%C3%A9", 6, out, sizeof(out)), 2);
    assert_int_equal(http_url_decode("", 0, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    assert_int_equal(http_url_decode("%", 1, out, sizeof(out)), -1);
    assert_int_equal(http_url_decode("%2", 2, out, sizeof(out)), -1);
    assert_int_equal(http_url_decode("%zz", 3, out, sizeof(out)), -1);
    assert_int_equal(http_url_decode("%g0", 3, out, sizeof(out)), -1);
    assert_int_equal(http_url_decode("a%00b", 5, out, sizeof(out)), -1);
    assert_int_equal(http_url_decode("a\0b", 3, out, sizeof(out)), -1);
    /* 15 bytes fit in 16 with the NUL; 16 do not */
    assert_int_equal(http_url_decode("0123456789abcde", 15, out, sizeof(out)), 15);
    assert_int_equal(http_url_decode("0123456789abcdef", 16, out, sizeof(out)), -1);
    assert_int_equal(http_url_decode("a", 1, out, 0), -1);
    /* A decoder must not read past n: "%4" then a '1' outside the input. */
    assert_int_equal(http_url_decode("%41", 2, out, sizeof(out)), -1);
}

static void test_status_text(void **state)
{
    static const int codes[] = {101, 200, 204, 206, 301, 302, 304, 400, 401, 403, 404, 405,
                                408, 411, 413, 414, 426, 429, 431, 500, 501, 503, 505};

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(codes); i++)
        assert_string_not_equal(http_status_text(codes[i]), "Unknown");
    assert_string_equal(http_status_text(200), "OK");
    assert_string_equal(http_status_text(404), "Not Found");
    assert_string_equal(http_status_text(101), "Switching Protocols");
    assert_string_equal(http_status_text(799), "Unknown");
    assert_int_equal(http_error_status(HTTP_E_URI_TOO_LONG), 414);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_get),
        cmocka_unit_test(test_empty_and_leading_crlf),
        cmocka_unit_test(test_query_string),
        cmocka_unit_test(test_header_whitespace),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_many_headers),
        cmocka_unit_test(test_head_size_limit),
        cmocka_unit_test(test_body_content_length),
        cmocka_unit_test(test_body_too_large),
        cmocka_unit_test(test_chunked_refused),
        cmocka_unit_test(test_content_length_and_transfer_encoding),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_lowercase_method),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_keep_alive),
        cmocka_unit_test(test_pipelined),
        cmocka_unit_test(test_upgrade),
        cmocka_unit_test(test_host_required),
        cmocka_unit_test(test_absolute_form),
        cmocka_unit_test(test_expect),
        cmocka_unit_test(test_header_has_token),
        cmocka_unit_test(test_query_next),
        cmocka_unit_test(test_url_decode),
        cmocka_unit_test(test_status_text),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
