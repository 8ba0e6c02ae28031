/* SPDX-License-Identifier: MIT */
/*
 * static.h - serves files from a configured directory (the demo page).
 *
 * The router hands GET and HEAD requests that match no route to
 * static_serve(). The request path is percent-decoded and checked
 * (static_resolve: no NUL, no "..", no backslash, no encoded slash, no
 * dot-files), then opened under the root with symlinks resolved and the
 * result required to lie inside realpath(root) (static_open). Everything
 * refused or missing answers 404, never 403, so the tree cannot be probed.
 * "/" and directories serve their index.html (no redirect to a trailing
 * slash).
 *
 * Responses carry a strong ETag built from size, mtime (ns) and inode,
 * "Cache-Control: no-cache" (browsers revalidate, so an edited demo shows
 * at once) and "X-Content-Type-Options: nosniff"; If-None-Match (a list,
 * or "*") answers 304 without a body.
 *
 * The file is read whole with blocking read() on the worker thread, which
 * stalls that worker's other connections for the duration: acceptable for
 * a small demo directory on a local disk, not for large or slow files.
 * Files over STATIC_MAX_FILE_BYTES answer 500 ("file_too_large"); open and
 * read errors answer 500 too.
 */
#ifndef STATIC_H
#define STATIC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "conn.h"
#include "http.h"

#define STATIC_MAX_FILE_BYTES (8u << 20) /* larger files answer 500 */
#define STATIC_MAX_PATH       1024       /* relative path buffer, incl. NUL */
#define STATIC_ETAG_MAX       64         /* static_etag output, incl. NUL */

/* Answers req (GET or HEAD) from the directory root with
 * httpd_respond/httpd_error; always answers. Blocks while reading. A
 * request for /favicon.ico that the directory cannot answer gets a small
 * built-in icon instead of a 404. */
void static_serve(struct conn *c, const struct http_request *req, const char *root);

/* Pure: maps a raw request path (not decoded, e.g. req->path) to a path
 * relative to the root, written to out (outsz bytes incl. NUL): no leading
 * '/', "//" collapsed, "index.html" appended to "/" and to a trailing '/'.
 * Returns its length, or -1 when the path must be refused: not starting
 * with '/', a bad escape, %00, an encoded '/' or '\', a backslash, a
 * control byte, a segment starting with '.' (".", "..", dot-files), or
 * when the decoded path, its leading '/' included, is over outsz - 1
 * bytes. */
int static_resolve(const char *path, size_t path_len, char *out, size_t outsz);

/* Opens rel (from static_resolve; relsz bytes of storage) under root for
 * reading and fills *st. A directory is replaced by its index.html, and rel
 * is rewritten to name the file actually opened. Returns the fd (caller
 * closes), -ENOENT when the file is missing, resolves (through symlinks)
 * outside realpath(root), or is not a regular file, or another -errno. */
int static_open(const char *root, char *rel, size_t relsz, struct stat *st);

/* Content-Type for a file name by its extension (case-insensitive), with
 * "; charset=utf-8" on text types; "application/octet-stream" if unknown. */
const char *static_content_type(const char *name);

/* Writes the strong ETag of st, quotes included ("\"<size>-<mtime ns>-
 * <inode>\"" in hex), to out; returns its length, or 0 if it does not fit. */
size_t static_etag(const struct stat *st, char *out, size_t outsz);

/* True when the If-None-Match value (value, len) is "*" or lists etag,
 * compared weakly (W/"x" matches "x"; RFC 9110 13.1.2). A malformed list
 * matches nothing after the malformed entry. */
bool static_etag_matches(const char *value, size_t len, const char *etag);

#endif
