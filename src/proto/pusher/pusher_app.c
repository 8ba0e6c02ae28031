/* SPDX-License-Identifier: MIT */
/*
 * pusher_app.c - the pusher-app setting (pusher_app.h).
 */
#include "pusher_app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool field_char(char c, bool id)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return !id && (c == '_' || c == '-' || c == '.');
}

/* Copies the field at *p up to the next ':' (or the end) into out;
 * false when empty, too long or with a character outside its alphabet. */
static bool take_field(const char **p, char *out, bool id)
{
    size_t n = 0;

    while (**p && **p != ':') {
        if (n == PUSHER_APP_FIELD_MAX || !field_char(**p, id))
            return false;
        out[n++] = *(*p)++;
    }
    out[n] = '\0';
    if (**p == ':')
        (*p)++;
    return n > 0 && (!id || n <= 32);
}

static int option(struct pusher_app *app, const char *item, char *err, size_t errlen)
{
    char *end;
    long v;

    if (strcmp(item, "client-events=true") == 0 || strcmp(item, "client-events=false") == 0) {
        app->client_events = item[14] == 't';
        return 0;
    }
    if (strcmp(item, "subscription-count=true") == 0 ||
        strcmp(item, "subscription-count=false") == 0) {
        app->subscription_count = item[19] == 't';
        return 0;
    }
    if (strncmp(item, "member-limit=", 13) == 0) {
        v = strtol(item + 13, &end, 10);
        if (*end == '\0' && end != item + 13 && v >= 1 && v <= 10000) {
            app->member_limit = (unsigned)v;
            return 0;
        }
    }
    snprintf(err, errlen,
             "pusher-app: unknown option \"%s\" (client-events=true|false, member-limit=1..10000, "
             "subscription-count=true|false, webhook=URL last)",
             item);
    return -1;
}

int pusher_app_parse(const char *spec, struct pusher_app *app, char *err, size_t errlen)
{
    const char *p = spec;
    char item[64];

    memset(app, 0, sizeof(*app));
    app->member_limit = 100;
    if (strchr(spec, ',')) {
        snprintf(err, errlen,
                 "pusher-app: this version serves one Pusher app (each app would be "
                 "a namespace of its own); give one ID:KEY:SECRET");
        return -1;
    }
    if (!take_field(&p, app->id, true) || !take_field(&p, app->key, false) ||
        !take_field(&p, app->secret, false)) {
        snprintf(err, errlen,
                 "pusher-app: expected ID:KEY:SECRET (ID 1-32 letters or digits, KEY "
                 "and SECRET 1-64 of A-Z a-z 0-9 _ - .)");
        return -1;
    }
    while (*p) {
        size_t n = strcspn(p, ":");

        if (strncmp(p, "webhook=", 8) == 0) { /* the last: a URL has ':' */
            if (!p[8] || strlen(p + 8) >= sizeof(app->webhook)) {
                snprintf(err, errlen, "pusher-app: webhook= needs a URL of at most %zu bytes",
                         sizeof(app->webhook) - 1);
                return -1;
            }
            memcpy(app->webhook, p + 8, strlen(p + 8) + 1);
            return 0;
        }

        if (n == 0 || n >= sizeof(item)) {
            snprintf(err, errlen, "pusher-app: an empty or over-long option");
            return -1;
        }
        memcpy(item, p, n);
        item[n] = '\0';
        if (option(app, item, err, errlen) < 0)
            return -1;
        p += n + (p[n] == ':');
    }
    return 0;
}
