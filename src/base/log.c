/* SPDX-License-Identifier: MIT */
/*
 * log.c - formats a log line into a stack buffer and writes it with one
 * write(2) so lines from several worker threads never interleave.
 * Lines longer than the buffer are truncated with "...".
 */
#include "log.h"

#include "utf8.h"
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum log_level log_min_level = LOG_INFO;
static bool log_json;

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

void log_init(enum log_level min)
{
    log_min_level = min;
}

void log_set_json(bool on)
{
    log_json = on;
}

/* Appends s (n bytes) JSON-escaped to line at *at, within size (keeping
 * room for the line's end); ascii_only: bytes above 0x7f become '?'. */
static void put_escaped(char *line, size_t size, size_t *at, const char *s, size_t n,
                        bool ascii_only)
{
    static const char hex[] = "0123456789abcdef";

    for (size_t i = 0; i < n && *at + 8 < size; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch == '"' || ch == '\\') {
            line[(*at)++] = '\\';
            line[(*at)++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            memcpy(line + *at, "\\u00", 4);
            line[*at + 4] = hex[ch >> 4];
            line[*at + 5] = hex[ch & 15];
            *at += 6;
        } else {
            line[(*at)++] = ascii_only && ch > 0x7f ? '?' : (char)ch;
        }
    }
}

/* The JSON form of a text line's parts into line (size bytes); its length. */
static size_t json_line(char *line, size_t size, const char *time, const char *level,
                        const char *module, const char *msg, size_t mlen)
{
    size_t at = 0;
    int r = snprintf(line, size, "{\"time\":\"%s\",\"level\":\"%s\",\"module\":\"", time, level);

    at = (size_t)r;
    put_escaped(line, size, &at, module, strlen(module), !utf8_valid(module, strlen(module)));
    memcpy(line + at, "\",\"msg\":\"", 9);
    at += 9;
    put_escaped(line, size, &at, msg, mlen, !utf8_valid(msg, mlen));
    memcpy(line + at, "\"}", 2);
    return at + 2;
}

int log_level_parse(const char *s, enum log_level *out)
{
    for (int i = 0; i <= LOG_OFF; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -1;
}

static void vlog(enum log_level lvl, const char *module, int err, const char *fmt, va_list ap)
{
    char line[2048], json[2048 * 6 / 5], stamp[32];
    struct timespec ts;
    struct tm tm;
    size_t n, head;
    int r;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(stamp + n, sizeof(stamp) - n, ".%03ldZ", ts.tv_nsec / 1000000L);
    r = snprintf(line, sizeof(line), "%s %s %s: ", stamp, level_names[lvl], module);
    n = head = (size_t)r;
    r = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
    n = (r < 0) ? n : MIN(n + (size_t)r, sizeof(line) - 1);
    if (err && n < sizeof(line) - 1) {
        r = snprintf(line + n, sizeof(line) - n, ": %s", strerror(err));
        n = (r < 0) ? n : MIN(n + (size_t)r, sizeof(line) - 1);
    }
    if (n >= sizeof(line) - 1)
        memcpy(line + sizeof(line) - 5, "...", 3), n = sizeof(line) - 2;
    if (log_json) {
        n = json_line(json, sizeof(json) - 1, stamp, level_names[lvl], module, line + head,
                      n - head);
        json[n++] = '\n';
        if (write(STDERR_FILENO, json, n) < 0) {
            /* Nothing sensible to do when stderr is gone. */
        }
        return;
    }
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, n) < 0) {
        /* Nothing sensible to do when stderr is gone. */
    }
}

void log_write(enum log_level lvl, const char *module, int with_errno, const char *fmt, ...)
{
    int err = with_errno ? errno : 0;
    va_list ap;

    va_start(ap, fmt);
    vlog(lvl, module, err, fmt, ap);
    va_end(ap);
}

void fatal(const char *module, const char *fmt, ...)
{
    int err = errno;
    va_list ap;

    va_start(ap, fmt);
    vlog(LOG_ERROR, module, err, fmt, ap);
    va_end(ap);
    exit(1);
}

void fatalx(const char *module, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vlog(LOG_ERROR, module, 0, fmt, ap);
    va_end(ap);
    exit(1);
}
