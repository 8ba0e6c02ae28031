/* SPDX-License-Identifier: MIT */
/*
 * static.c - files from the static directory, for the demo page.
 *
 * Three layers: static_resolve() turns a request path into a safe relative
 * path (pure), static_open() opens it under the root and proves the result
 * is inside the root after symlinks are resolved, and static_serve() adds
 * validators and writes the response. Nothing is cached: every request
 * resolves the root again, so the directory can be edited while the server
 * runs. No ranges, no compression, no directory listings.
 * One built-in file: /favicon.ico, when the directory has none, so that
 * the page a browser opens does not log a 404 on every load.
 */
#include "static.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "httpd.h"
#include "util.h"

/* ---- Paths ---- */

static bool has_encoded_separator(const char *p, size_t n)
{
    for (size_t i = 0; i + 2 < n; i++) {
        if (p[i] != '%')
            continue;
        if (p[i + 1] == '2' && (p[i + 2] == 'f' || p[i + 2] == 'F'))
            return true;
        if (p[i + 1] == '5' && (p[i + 2] == 'c' || p[i + 2] == 'C'))
            return true;
    }
    return false;
}

static bool bad_byte(unsigned char ch)
{
    return ch < 0x20 || ch == 0x7f || ch == '\\';
}

/* Decoding happens into out; the segments are then checked and compacted
 * in place (the write position never passes the read position). */
int static_resolve(const char *path, size_t path_len, char *out, size_t outsz)
{
    static const char index_name[] = "index.html";
    ssize_t n;
    size_t r = 0, w = 0;

    if (path_len == 0 || path[0] != '/' || has_encoded_separator(path, path_len))
        return -1;
    n = http_url_decode(path, path_len, out, outsz);
    if (n < 0)
        return -1;
    while (r < (size_t)n) {
        size_t start;

        while (r < (size_t)n && out[r] == '/')
            r++;
        if (r == (size_t)n)
            break;
        if (out[r] == '.')
            return -1; /* ".", "..", and hidden files */
        start = r;
        while (r < (size_t)n && out[r] != '/') {
            if (bad_byte((unsigned char)out[r]))
                return -1;
            r++;
        }
        memmove(out + w, out + start, r - start);
        w += r - start;
        if (r < (size_t)n)
            out[w++] = '/';
    }
    if (w == 0 || out[w - 1] == '/') {
        if (w + sizeof(index_name) > outsz)
            return -1;
        memcpy(out + w, index_name, sizeof(index_name));
        w += sizeof(index_name) - 1;
    }
    out[w] = '\0';
    return (int)w;
}

/* True when the canonical path real is root_real or below it. */
static bool path_inside(const char *real, const char *root_real)
{
    size_t n = strlen(root_real);

    if (n == 1 && root_real[0] == '/')
        return real[0] == '/';
    return strncmp(real, root_real, n) == 0 && (real[n] == '/' || real[n] == '\0');
}

/* Missing, unreachable and refused all look the same to the client. */
static int not_found_errno(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
    case ELOOP:
    case EACCES:
    case ENAMETOOLONG:
        return -ENOENT;
    default:
        return -err;
    }
}

/* Opens root_real/rel if it resolves inside root_real. */
static int open_inside(const char *root_real, const char *rel, struct stat *st)
{
    char full[PATH_MAX], real[PATH_MAX];
    int n = snprintf(full, sizeof(full), "%s/%s", root_real, rel);
    int fd;

    if (n < 0 || (size_t)n >= sizeof(full))
        return -ENOENT;
    if (!realpath(full, real))
        return not_found_errno(errno);
    if (!path_inside(real, root_real))
        return -ENOENT;
    /* O_NONBLOCK: opening a FIFO must not hang the worker. */
    fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return not_found_errno(errno);
    if (fstat(fd, st) < 0) {
        int err = errno;

        close(fd);
        return -err;
    }
    return fd;
}

int static_open(const char *root, char *rel, size_t relsz, struct stat *st)
{
    static const char index_name[] = "/index.html";
    char root_real[PATH_MAX];
    size_t len = strlen(rel);
    int fd;

    if (!realpath(root, root_real))
        return not_found_errno(errno);
    fd = open_inside(root_real, rel, st);
    if (fd >= 0 && S_ISDIR(st->st_mode)) {
        close(fd);
        if (len + sizeof(index_name) > relsz)
            return -ENOENT;
        memcpy(rel + len, index_name, sizeof(index_name));
        fd = open_inside(root_real, rel, st);
    }
    if (fd >= 0 && !S_ISREG(st->st_mode)) {
        close(fd);
        return -ENOENT;
    }
    return fd;
}

/* ---- Headers ---- */

struct content_type {
    const char *ext; /* lowercase, without the dot */
    const char *type;
};

static const struct content_type content_types[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"map", "application/json"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"ico", "image/x-icon"},
    {"txt", "text/plain; charset=utf-8"},
    {"wasm", "application/wasm"},
};

const char *static_content_type(const char *name)
{
    const char *slash = strrchr(name, '/');
    const char *dot = strrchr(slash ? slash + 1 : name, '.');

    if (dot) {
        for (size_t i = 0; i < ARRAY_SIZE(content_types); i++) {
            if (strlen(dot + 1) == strlen(content_types[i].ext) &&
                ascii_ieq(dot + 1, strlen(dot + 1), content_types[i].ext))
                return content_types[i].type;
        }
    }
    return "application/octet-stream";
}

size_t static_etag(const struct stat *st, char *out, size_t outsz)
{
    uint64_t mtime_ns = (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
    int n = snprintf(out, outsz, "\"%llx-%llx-%llx\"", (unsigned long long)st->st_size,
                     (unsigned long long)mtime_ns, (unsigned long long)st->st_ino);

    if (n < 0 || (size_t)n >= outsz) {
        if (outsz)
            out[0] = '\0';
        return 0;
    }
    return (size_t)n;
}

static bool is_ows(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* Entity tags are quoted and may contain commas, so the list is parsed tag
 * by tag rather than split on ','. */
bool static_etag_matches(const char *value, size_t len, const char *etag)
{
    size_t elen = strlen(etag), i = 0;

    while (len > 0 && is_ows(value[len - 1]))
        len--;
    while (i < len && is_ows(value[i]))
        i++;
    if (len - i == 1 && value[i] == '*')
        return true;
    while (i < len) {
        size_t start;

        while (i < len && (is_ows(value[i]) || value[i] == ','))
            i++;
        if (i == len)
            break;
        if (len - i >= 2 && value[i] == 'W' && value[i + 1] == '/')
            i += 2;
        if (i == len || value[i] != '"')
            return false;
        start = i++;
        while (i < len && value[i] != '"')
            i++;
        if (i == len)
            return false;
        i++; /* closing quote */
        if (i - start == elen && memcmp(value + start, etag, elen) == 0)
            return true;
    }
    return false;
}

/* ---- Serving ---- */

static void not_found(struct conn *c)
{
    /* The same answer as an unknown route: nothing to tell them apart. */
    httpd_error(c, 404, "not_found", "no such resource");
}

/* Reads exactly n bytes from the start of fd. */
static int read_all(int fd, char *p, size_t n)
{
    size_t off = 0;

    while (off < n) {
        ssize_t r = pread(fd, p + off, n - off, (off_t)off);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -EIO; /* the file shrank while we read it */
        off += (size_t)r;
    }
    return 0;
}

static void serve_file(struct conn *c, const struct http_request *req, int fd,
                       const struct stat *st, const char *name)
{
    char etag[STATIC_ETAG_MAX], extra[256];
    const struct http_header *inm = http_header_get(req, "If-None-Match");
    size_t size = (size_t)st->st_size;
    char *body;

    static_etag(st, etag, sizeof(etag));
    snprintf(extra, sizeof(extra),
             "ETag: %s\r\nCache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n", etag);
    if (inm && static_etag_matches(inm->value, inm->value_len, etag)) {
        httpd_respond(c, 304, NULL, extra, "", 0);
        return;
    }
    body = xmalloc(size);
    if (read_all(fd, body, size) < 0) {
        free(body);
        httpd_error(c, 500, "read_error", "cannot read file");
        return;
    }
    httpd_respond(c, 200, static_content_type(name), extra, body, size);
    free(body);
}

/* The built-in /favicon.ico: one 16x16 PNG in an ICO container (what every
 * browser reads), a green presence dot on a transparent background. */
static const unsigned char favicon_ico[] = {
    0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x10, 0x10, 0x00, 0x00, 0x01, 0x00, 0x20, 0x00, 0x98, 0x00,
    0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00,
    0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x10, 0x08, 0x06,
    0x00, 0x00, 0x00, 0x1f, 0xf3, 0xff, 0x61, 0x00, 0x00, 0x00, 0x5f, 0x49, 0x44, 0x41, 0x54, 0x78,
    0xda, 0x63, 0x60, 0xa0, 0x05, 0x50, 0x3a, 0x1a, 0xc7, 0x09, 0xc4, 0xc1, 0x40, 0x5c, 0x05, 0xc5,
    0x20, 0x36, 0x27, 0xb1, 0x9a, 0x41, 0x1a, 0xbe, 0x00, 0xf1, 0x7f, 0x34, 0x0c, 0x12, 0xab, 0x22,
    0xa4, 0x79, 0x11, 0x16, 0x8d, 0xe8, 0x78, 0x11, 0x3e, 0x9b, 0xff, 0x13, 0x89, 0xab, 0xb0, 0xf9,
    0xf9, 0x0b, 0x09, 0x06, 0x7c, 0x41, 0x09, 0x13, 0x68, 0x20, 0xfd, 0x27, 0x11, 0x07, 0x93, 0xeb,
    0x7c, 0x4c, 0x6f, 0x50, 0xc3, 0x00, 0x8a, 0xbd, 0x40, 0x59, 0x20, 0x52, 0x1c, 0x8d, 0x54, 0x49,
    0x48, 0x54, 0x49, 0xca, 0x54, 0xc9, 0x4c, 0xa4, 0x02, 0x00, 0x7d, 0x94, 0x4a, 0x54, 0xd0, 0xa9,
    0x98, 0x44, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
};

/* The built-in icon's validator: it changes only with this file. */
#define FAVICON_ETAG "\"favicon-1\""

static void serve_favicon(struct conn *c, const struct http_request *req)
{
    static const char extra[] = "ETag: " FAVICON_ETAG "\r\nCache-Control: no-cache\r\n"
                                "X-Content-Type-Options: nosniff\r\n";
    const struct http_header *inm = http_header_get(req, "If-None-Match");

    if (inm && static_etag_matches(inm->value, inm->value_len, FAVICON_ETAG)) {
        httpd_respond(c, 304, NULL, extra, "", 0);
        return;
    }
    httpd_respond(c, 200, "image/x-icon", extra, favicon_ico, sizeof(favicon_ico));
}

void static_serve(struct conn *c, const struct http_request *req, const char *root)
{
    char rel[STATIC_MAX_PATH];
    struct stat st;
    int fd;

    if (static_resolve(req->path, req->path_len, rel, sizeof(rel)) < 0) {
        not_found(c);
        return;
    }
    fd = static_open(root, rel, sizeof(rel), &st);
    if (fd == -ENOENT && strcmp(rel, "favicon.ico") == 0) {
        serve_favicon(c, req);
        return;
    }
    if (fd == -ENOENT) {
        not_found(c);
        return;
    }
    if (fd < 0) {
        httpd_error(c, 500, "read_error", "cannot open file");
        return;
    }
    if ((uintmax_t)st.st_size > STATIC_MAX_FILE_BYTES)
        httpd_error(c, 500, "file_too_large", "file exceeds the static file size limit");
    else
        serve_file(c, req, fd, &st, rel);
    close(fd);
}
