/* SPDX-License-Identifier: MIT */
/*
 * log.h - one line per event on stderr (OpenBSD httpd log.h style).
 *
 * Line format: "2026-11-29T09:10:00.123Z level module: message key=value",
 * or with log_set_json(true) one JSON object per line for log shippers:
 * {"time":"2026-11-29T09:10:00.123Z","level":"info","module":"main",
 *  "msg":"message key=value"} (the message JSON-escaped; a message that is
 * not valid UTF-8 has its bytes above 0x7f written as '?').
 * Callers put the connection id (conn=N) and, for HTTP, the request id
 * (req=N) in the message so every error traces back to its connection.
 * The level check is a macro so disabled levels cost one comparison and no
 * argument evaluation. Nothing per message is logged at info level.
 * Thread-safe: each line is written with one write(2).
 */
#ifndef LOG_H
#define LOG_H

#include <stdbool.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_OFF };

extern enum log_level log_min_level;

/* Sets the minimum level and the module tag; no allocation. */
void log_init(enum log_level min);
/* Lines as JSON objects (true) or text (false, the default). Before the
 * workers start. */
void log_set_json(bool on);
/* Parses "debug|info|warn|error|off" into *out; returns 0 or -1. */
int log_level_parse(const char *s, enum log_level *out);

void log_write(enum log_level lvl, const char *module, int with_errno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void fatal(const char *module, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn)); /* appends strerror(errno), exit(1) */
void fatalx(const char *module, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn)); /* ditto without errno */

#define LOG_AT(lvl, mod, e, ...)                       \
    do {                                               \
        if ((lvl) >= log_min_level)                    \
            log_write((lvl), (mod), (e), __VA_ARGS__); \
    } while (0)
#define log_debug(mod, ...) LOG_AT(LOG_DEBUG, mod, 0, __VA_ARGS__)
#define log_info(mod, ...)  LOG_AT(LOG_INFO, mod, 0, __VA_ARGS__)
#define log_warn(mod, ...)  LOG_AT(LOG_WARN, mod, 1, __VA_ARGS__) /* + strerror(errno) */
#define log_warnx(mod, ...) LOG_AT(LOG_WARN, mod, 0, __VA_ARGS__)
#define log_error(mod, ...) LOG_AT(LOG_ERROR, mod, 0, __VA_ARGS__)

#endif
