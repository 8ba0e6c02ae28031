/* SPDX-License-Identifier: MIT */
/*
 * http.c - HTTP/1.1 request parsing on llhttp, and header, query-string and
 * status-line helpers.
 *
 * http_parse_request() is stateless: every call runs a fresh llhttp parser
 * over the bytes at the start of the caller's buffer, pausing when the
 * header block is complete, so at most one request is looked at and no
 * byte after its head is read by llhttp. The body is not run through
 * llhttp: chunked bodies are refused (411) and a Content-Length body is
 * just the next Content-Length bytes. No allocation, no I/O: the request
 * is a set of views into the buffer.
 *
 * Beyond llhttp's own (non-lenient) checks, requests are refused for:
 * header names that are not tokens (llhttp 8 accepts "Host :" and
 * "Conn ection:"), empty header names, obsolete line folding, any
 * version but 1.0 and 1.1, a missing (HTTP/1.1), repeated or invalid Host,
 * and an expectation other than 100-continue.
 */
#include "http.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <string.h>

#include <llhttp.h>

#include "util.h"

/* ---- Request parsing ---- */

/* Where the header callbacks are: before the first header, inside a name,
 * or past a name's colon (in or awaiting its value). */
enum span_kind { SPAN_NONE, SPAN_FIELD, SPAN_VALUE };

/* Per-call state shared with the llhttp callbacks (parser->data). */
struct parse_ctx {
    struct http_request *req;    /* output */
    enum span_kind last;         /* header callback state */
    struct http_header *cur;     /* the header being parsed */
    struct http_header overflow; /* cur for a header past HTTP_MAX_HEADERS */
    ssize_t err;                 /* set by a callback before it fails the parse */
    const char *version;         /* "1.1" as written; for the 505-or-400 choice */
    size_t version_len;
    bool version_ok; /* on_version_complete accepted the version */
};

static struct parse_ctx *ctx_of(llhttp_t *p)
{
    return p->data;
}

/* Fails the parse with err; the value llhttp wants from a callback. */
static int fail(llhttp_t *p, ssize_t err)
{
    struct parse_ctx *ctx = ctx_of(p);

    if (!ctx->err)
        ctx->err = err;
    return -1;
}

/* Appends the piece (at, n) to the span (*start, *len). Pieces come from one
 * buffer parsed from its start, so the pieces of one span are contiguous;
 * returns false when they are not (obsolete line folding in a value). */
static bool span_extend(const char **start, size_t *len, const char *at, size_t n)
{
    if (!*start) {
        *start = at;
        *len = n;
        return true;
    }
    if (*start + *len != at)
        return false;
    *len += n;
    return true;
}

/* RFC 9110 tchar. */
static bool is_tchar(unsigned char ch)
{
    if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))
        return true;
    return ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static int on_method(llhttp_t *p, const char *at, size_t n)
{
    struct http_request *req = ctx_of(p)->req;

    return span_extend(&req->method, &req->method_len, at, n) ? 0 : fail(p, HTTP_E_BAD_REQUEST);
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    struct http_request *req = ctx_of(p)->req;

    return span_extend(&req->target, &req->target_len, at, n) ? 0 : fail(p, HTTP_E_BAD_REQUEST);
}

static int on_version(llhttp_t *p, const char *at, size_t n)
{
    struct parse_ctx *ctx = ctx_of(p);

    return span_extend(&ctx->version, &ctx->version_len, at, n) ? 0 : fail(p, HTTP_E_BAD_REQUEST);
}

/* Refuses HTTP/0.9 and HTTP/2.0 (both well-formed for llhttp) as soon as
 * the version is read, before any header. */
static int on_version_complete(llhttp_t *p)
{
    if (p->http_major != 1 || p->http_minor > 1)
        return fail(p, HTTP_E_VERSION);
    ctx_of(p)->version_ok = true;
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    struct parse_ctx *ctx = ctx_of(p);
    struct http_request *req = ctx->req;

    if (ctx->last != SPAN_FIELD) {
        ctx->cur =
            req->nheaders < HTTP_MAX_HEADERS ? &req->headers[req->nheaders++] : &ctx->overflow;
        *ctx->cur = (struct http_header){0};
        ctx->last = SPAN_FIELD;
    }
    return span_extend(&ctx->cur->name, &ctx->cur->name_len, at, n) ? 0
                                                                    : fail(p, HTTP_E_BAD_REQUEST);
}

/* Names are counted and checked here, once their ':' is seen, and not as
 * pieces arrive: a name cut off by the end of the buffer is delivered
 * early, and judging it then could make a prefix fail differently from the
 * whole input (llhttp drops a pending piece when it finds an error). */
static int on_header_field_complete(llhttp_t *p)
{
    struct parse_ctx *ctx = ctx_of(p);
    const struct http_header *h = ctx->cur;

    if (ctx->last != SPAN_FIELD)
        return fail(p, HTTP_E_BAD_REQUEST);
    if (h == &ctx->overflow)
        return fail(p, HTTP_E_TOO_MANY_HEADERS);
    if (h->name_len == 0)
        return fail(p, HTTP_E_BAD_REQUEST);
    for (size_t i = 0; i < h->name_len; i++) {
        if (!is_tchar((unsigned char)h->name[i]))
            return fail(p, HTTP_E_BAD_REQUEST);
    }
    ctx->last = SPAN_VALUE;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    struct parse_ctx *ctx = ctx_of(p);
    struct http_header *h = ctx->cur;

    if (ctx->last != SPAN_VALUE)
        return fail(p, HTTP_E_BAD_REQUEST);
    if (n == 0)
        return 0; /* an empty value comes as an empty piece on the next line */
    /* A second, separate piece, or a first one on a later line than the
     * name, is a folded continuation line: RFC 9112 5.2 lets a server
     * reject it, which avoids guessing how a proxy in front of us joined
     * it. */
    if (!h->value && memchr(h->name + h->name_len, '\n', (size_t)(at - (h->name + h->name_len))))
        return fail(p, HTTP_E_BAD_REQUEST);
    return span_extend(&h->value, &h->value_len, at, n) ? 0 : fail(p, HTTP_E_BAD_REQUEST);
}

static int on_headers_complete(llhttp_t *p)
{
    (void)p;
    return HPE_PAUSED; /* one request per call; the body is not llhttp's */
}

static const llhttp_settings_t parse_settings = {
    .on_method = on_method,
    .on_url = on_url,
    .on_version = on_version,
    .on_version_complete = on_version_complete,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
};

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* Maps an llhttp error to ours. llhttp rejects versions other than 0.9,
 * 1.0, 1.1 and 2.0 with the same code as a malformed one; a well-formed
 * "D.D" that it refused is an unsupported version (505), the rest 400. */
static ssize_t map_llhttp_error(const struct parse_ctx *ctx, llhttp_errno_t e)
{
    if (e == HPE_PAUSED_H2_UPGRADE) /* the HTTP/2 connection preface */
        return HTTP_E_VERSION;
    if (e == HPE_INVALID_VERSION && !ctx->version_ok && ctx->version_len == 3 &&
        is_digit(ctx->version[0]) && ctx->version[1] == '.' && is_digit(ctx->version[2]))
        return HTTP_E_VERSION;
    return HTTP_E_BAD_REQUEST;
}

static bool is_ows(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* Strips trailing whitespace from values (llhttp strips leading only) and
 * points empty values into the buffer. */
static void finish_headers(struct http_request *req)
{
    for (size_t i = 0; i < req->nheaders; i++) {
        struct http_header *h = &req->headers[i];

        if (!h->value) {
            h->value = h->name + h->name_len;
            h->value_len = 0;
        }
        while (h->value_len > 0 && is_ows(h->value[h->value_len - 1]))
            h->value_len--;
    }
}

/* Length of the "scheme://" at the start of (t, n), 0 when there is none
 * (RFC 3986: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )). */
static size_t scheme_len(const char *t, size_t n)
{
    size_t i = 0;

    if (n == 0 || !((t[0] | 0x20) >= 'a' && (t[0] | 0x20) <= 'z'))
        return 0;
    while (i < n && (((t[i] | 0x20) >= 'a' && (t[i] | 0x20) <= 'z') || is_digit(t[i]) ||
                     t[i] == '+' || t[i] == '-' || t[i] == '.'))
        i++;
    if (n - i < 3 || memcmp(t + i, "://", 3) != 0)
        return 0;
    return i + 3;
}

/* RFC 3986 host [ ":" port ] characters: unreserved, pct-encoded,
 * sub-delims, ':' and the brackets of an IP literal. Not '@': userinfo is
 * an error in a request (RFC 9110 4.2.4). */
static bool is_host_char(unsigned char ch)
{
    if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))
        return true;
    return ch != '\0' && strchr("-._~%!$&'()*+,;=:[]", ch) != NULL;
}

static bool host_valid(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!is_host_char((unsigned char)p[i]))
            return false;
    }
    return true;
}

/* Splits the target into path and query; a fragment (which clients should
 * not send) is part of neither. An absolute-form target (RFC 9112 3.2.2,
 * what a client talking to a proxy sends) gives its authority as the host
 * and the rest as the path. */
static int split_target(struct http_request *req)
{
    const char *t = req->target;
    size_t n = req->target_len, i = scheme_len(t, n), a = i;

    if (a > 0) {
        while (i < n && t[i] != '/' && t[i] != '?' && t[i] != '#')
            i++;
        if (i == a || !host_valid(t + a, i - a))
            return HTTP_E_HOST;
        req->host = t + a;
        req->host_len = i - a;
        t += i;
        n -= i;
        i = 0;
    }
    while (i < n && t[i] != '?' && t[i] != '#')
        i++;
    req->path = i > 0 || a == 0 ? t : "/";
    req->path_len = i > 0 || a == 0 ? i : 1;
    req->query = NULL;
    req->query_len = 0;
    if (i < n && t[i] == '?') {
        size_t q = ++i;

        while (i < n && t[i] != '#')
            i++;
        req->query = t + q;
        req->query_len = i - q;
    }
    return 0;
}

/* RFC 9112 3.2: an HTTP/1.1 request has exactly one Host header, any
 * request at most one, and its value must be a host. With an absolute-form
 * target the target's authority wins (the header must still be there). */
static int check_host(struct http_request *req)
{
    const struct http_header *host = NULL;

    for (size_t i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];

        if (!ascii_ieq(h->name, h->name_len, "Host") || h->name_len != 4)
            continue;
        if (host)
            return HTTP_E_HOST;
        host = h;
    }
    if (!host)
        return req->version_minor == 1 ? HTTP_E_HOST : 0;
    if (!host_valid(host->value, host->value_len))
        return HTTP_E_HOST;
    if (!req->host) {
        req->host = host->value;
        req->host_len = host->value_len;
    }
    return 0;
}

/* RFC 9110 10.1.1: 100-continue is the only expectation defined; anything
 * else is answered 417. HTTP/1.0 clients cannot expect anything (the field
 * is ignored). Sets req->expect_continue for a request with a body. */
static int check_expect(struct http_request *req, uint64_t body_len)
{
    bool seen = false;

    if (req->version_minor == 0)
        return 0;
    for (size_t i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];

        if (h->name_len != 6 || !ascii_ieq(h->name, h->name_len, "Expect"))
            continue;
        if (h->value_len != 12 || !ascii_ieq(h->value, h->value_len, "100-continue"))
            return HTTP_E_EXPECTATION;
        seen = true;
    }
    req->expect_continue = seen && body_len > 0;
    return 0;
}

static bool wants_upgrade(const struct http_request *req)
{
    bool conn_upgrade = false;

    if (!http_header_get(req, "Upgrade"))
        return false;
    for (size_t i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];

        if (ascii_ieq(h->name, h->name_len, "Connection") && http_header_has_token(h, "upgrade"))
            conn_upgrade = true;
    }
    return conn_upgrade;
}

/* The head (head_len bytes) is complete and llhttp accepted it: apply the
 * framing rules and limits, then find the body. */
static ssize_t finish_request(const llhttp_t *p, const char *buf, size_t len, size_t max_body,
                              size_t head_len, struct http_request *req)
{
    uint64_t body_len = 0;
    int err;

    if (head_len > HTTP_MAX_HEAD_BYTES)
        return HTTP_E_HEAD_TOO_LARGE;
    if (p->http_major != 1 || p->http_minor > 1)
        return HTTP_E_VERSION;
    if (p->flags & F_TRANSFER_ENCODING) /* without chunked last, RFC 9112 6.3 says 400 */
        return (p->flags & F_CHUNKED) ? HTTP_E_LENGTH_REQUIRED : HTTP_E_BAD_REQUEST;
    if (p->flags & F_CONTENT_LENGTH)
        body_len = p->content_length;
    if (body_len > max_body)
        return HTTP_E_BODY_TOO_LARGE;

    finish_headers(req);
    req->version_minor = p->http_minor;
    if ((err = split_target(req)) < 0 || (err = check_host(req)) < 0 ||
        (err = check_expect(req, body_len)) < 0)
        return err;
    req->head_len = head_len;
    req->keep_alive = llhttp_should_keep_alive(p);
    /* An upgrade must carry no body: one that does is answered as a plain
     * request, so its body can never be mistaken for the new protocol. */
    req->upgrade = body_len == 0 && wants_upgrade(req);
    if (body_len == 0)
        return (ssize_t)head_len;
    if (body_len > len - head_len)
        return PS_PARTIAL;
    req->body = buf + head_len;
    req->body_len = (size_t)body_len;
    return (ssize_t)(head_len + req->body_len);
}

ssize_t http_parse_request(const char *buf, size_t len, size_t max_body, struct http_request *req)
{
    struct parse_ctx ctx = {.req = req};
    /* llhttp never sees more than one byte past the head limit: enough to
     * tell "complete at the limit" from "over it". */
    size_t feed = MIN(len, (size_t)HTTP_MAX_HEAD_BYTES + 1);
    llhttp_t p;
    llhttp_errno_t e;

    memset(req, 0, sizeof(*req));
    if (len == 0)
        return PS_PARTIAL;
    llhttp_init(&p, HTTP_REQUEST, &parse_settings);
    p.data = &ctx;
    e = llhttp_execute(&p, buf, feed);
    /* A request line without a version is HTTP/0.9 to llhttp. Checked
     * first: whatever fails after such a line, a prefix that ended with it
     * already answered 505. */
    if (p.http_major == 0 && p.http_minor == 9)
        return HTTP_E_VERSION;
    if (ctx.err)
        return ctx.err;
    if (e == HPE_OK)
        return feed > HTTP_MAX_HEAD_BYTES ? HTTP_E_HEAD_TOO_LARGE : PS_PARTIAL;
    if (e != HPE_PAUSED)
        return map_llhttp_error(&ctx, e);
    return finish_request(&p, buf, len, max_body, (size_t)(llhttp_get_error_pos(&p) - buf), req);
}

int http_error_status(ssize_t err)
{
    switch (err) {
    case HTTP_E_LENGTH_REQUIRED:
        return 411;
    case HTTP_E_BODY_TOO_LARGE:
        return 413;
    case HTTP_E_URI_TOO_LONG:
        return 414;
    case HTTP_E_HEAD_TOO_LARGE:
    case HTTP_E_TOO_MANY_HEADERS:
        return 431;
    case HTTP_E_VERSION:
        return 505;
    case HTTP_E_EXPECTATION:
        return 417;
    default:
        return 400;
    }
}

const char *http_status_text(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 101:
        return "Switching Protocols";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 416:
        return "Range Not Satisfiable";
    case 417:
        return "Expectation Failed";
    case 422:
        return "Unprocessable Content";
    case 426:
        return "Upgrade Required";
    case 428:
        return "Precondition Required";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

/* ---- Headers ---- */

const struct http_header *http_header_get(const struct http_request *req, const char *name)
{
    size_t n = strlen(name);

    for (size_t i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];

        if (h->name_len == n && ascii_ieq(h->name, h->name_len, name))
            return &req->headers[i];
    }
    return NULL;
}

bool http_header_has_token(const struct http_header *h, const char *token)
{
    size_t tlen = strlen(token);
    size_t i = 0;

    if (!h)
        return false;
    while (i < h->value_len) {
        size_t start, end;

        while (i < h->value_len && (is_ows(h->value[i]) || h->value[i] == ','))
            i++;
        start = i;
        while (i < h->value_len && h->value[i] != ',')
            i++;
        end = i;
        while (end > start && is_ows(h->value[end - 1]))
            end--;
        if (end - start == tlen && tlen > 0 && ascii_ieq(h->value + start, tlen, token))
            return true;
    }
    return false;
}

/* ---- Percent-decoding and query strings ---- */

/* Decodes the byte at p[*i] (a literal, "%XX", or '+' when plus_is_space),
 * advancing *i. Returns the byte, or -1 on a bad escape or a NUL. */
static int decode_byte(const char *p, size_t n, size_t *i, bool plus_is_space)
{
    int hi, lo;
    char ch = p[*i];

    if (ch == '%') {
        if (n - *i < 3)
            return -1;
        hi = hex_digit_value((unsigned char)p[*i + 1]);
        lo = hex_digit_value((unsigned char)p[*i + 2]);
        if (hi < 0 || lo < 0 || (hi | lo) == 0)
            return -1;
        *i += 3;
        return hi << 4 | lo;
    }
    (*i)++;
    if (ch == '\0')
        return -1;
    return ch == '+' && plus_is_space ? ' ' : (unsigned char)ch;
}

static ssize_t url_decode(const char *p, size_t n, char *out, size_t outsz, bool plus_is_space)
{
    size_t i = 0, o = 0;

    if (outsz == 0)
        return -1;
    while (i < n) {
        int b = decode_byte(p, n, &i, plus_is_space);

        if (b < 0 || o + 1 >= outsz)
            return -1;
        out[o++] = (char)b;
    }
    out[o] = '\0';
    return (ssize_t)o;
}

ssize_t http_url_decode(const char *p, size_t n, char *out, size_t outsz)
{
    return url_decode(p, n, out, outsz, false);
}

/* True when the form-encoded (p, n) decodes to exactly key. */
static bool key_equals(const char *p, size_t n, const char *key)
{
    size_t i = 0, k = 0;

    while (i < n) {
        int b = decode_byte(p, n, &i, true);

        if (b < 0 || key[k] == '\0' || (unsigned char)key[k] != b)
            return false;
        k++;
    }
    return key[k] == '\0';
}

ssize_t http_query_next(const char *query, size_t query_len, const char *key, size_t *pos,
                        char *out, size_t outsz)
{
    size_t i = *pos;

    while (i < query_len) {
        size_t start = i, eq, end;

        while (i < query_len && query[i] != '&')
            i++;
        end = i;
        if (i < query_len)
            i++; /* past '&' */
        for (eq = start; eq < end && query[eq] != '='; eq++)
            ;
        if (!key_equals(query + start, eq - start, key))
            continue;
        *pos = i;
        if (eq == end) /* "?flag": present, empty value */
            return url_decode(query + end, 0, out, outsz, true);
        return url_decode(query + eq + 1, end - eq - 1, out, outsz, true);
    }
    *pos = query_len;
    return -1;
}

bool http_bearer_is(const struct http_request *req, const char *key)
{
    const struct http_header *h = http_header_get(req, "Authorization");
    unsigned char want[SHA256_DIGEST_LENGTH], got[SHA256_DIGEST_LENGTH];

    if (!key[0] || !h || h->value_len < 7 || !ascii_ieq(h->value, 7, "bearer "))
        return false;
    SHA256((const unsigned char *)key, strlen(key), want);
    SHA256((const unsigned char *)h->value + 7, h->value_len - 7, got);
    return CRYPTO_memcmp(want, got, sizeof(want)) == 0;
}
