/* SPDX-License-Identifier: MIT */
/*
 * log.c - formats a log line into a stack buffer and writes it with one
 * write(2) so lines from several worker threads never interleave.
 * Lines longer than the buffer are truncated with "...".
 */
#include "log.h"

#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum log_level log_min_level = LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

void log_init(enum log_level min)
{
    log_min_level = min;
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
    char line[2048];
    struct timespec ts;
    struct tm tm;
    size_t n;
    int r;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    r = snprintf(line + n, sizeof(line) - n, ".%03ldZ %s %s: ", ts.tv_nsec / 1000000L,
                 level_names[lvl], module);
    n += (size_t)r;
    r = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
    n = (r < 0) ? n : MIN(n + (size_t)r, sizeof(line) - 1);
    if (err && n < sizeof(line) - 1) {
        r = snprintf(line + n, sizeof(line) - n, ": %s", strerror(err));
        n = (r < 0) ? n : MIN(n + (size_t)r, sizeof(line) - 1);
    }
    if (n >= sizeof(line) - 1)
        memcpy(line + sizeof(line) - 5, "...", 3), n = sizeof(line) - 2;
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
