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
        snprintf(err, errlen, "pusher-app: one app is parsed here; use pusher_apps_parse");
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

/* The app that has the id or the key of apps[i] among apps[0..i-1], or -1;
 * *what says which field matched. */
static int duplicate(const struct pusher_app *apps, size_t i, const char **what)
{
    for (size_t j = 0; j < i; j++) {
        *what = "id";
        if (strcmp(apps[j].id, apps[i].id) == 0)
            return (int)j;
        *what = "key";
        if (strcmp(apps[j].key, apps[i].key) == 0)
            return (int)j;
    }
    return -1;
}

int pusher_apps_parse(const char *spec, struct pusher_app *apps, size_t max, size_t *n, char *err,
                      size_t errlen)
{
    char item[PUSHER_APP_ITEM_MAX + 1];
    const char *p = spec;
    const char *what;

    *n = 0;
    for (;;) {
        size_t len = strcspn(p, ",");

        if (*n == max) {
            snprintf(err, errlen, "pusher-app: at most %zu apps", max);
            return -1;
        }
        if (len > PUSHER_APP_ITEM_MAX) {
            snprintf(err, errlen, "pusher-app: app %zu is longer than %d bytes", *n + 1,
                     PUSHER_APP_ITEM_MAX);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        if (pusher_app_parse(item, &apps[*n], err, errlen) < 0)
            return -1;
        if (duplicate(apps, *n, &what) >= 0) {
            snprintf(err, errlen, "pusher-app: two apps have the %s \"%s\"", what,
                     what[0] == 'i' ? apps[*n].id : apps[*n].key);
            return -1;
        }
        if (*n > 0) { /* the first app's namespace is the native one: no prefix */
            size_t idn = strlen(apps[*n].id); /* <= 32 = NS_APP_MAX (take_field) */

            memcpy(apps[*n].ns, apps[*n].id, idn);
            apps[*n].ns[idn] = NS_SEP;
            apps[*n].ns[idn + 1] = '\0';
        }
        (*n)++;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

static bool same(const char *field, const char *s, size_t len)
{
    return strlen(field) == len && memcmp(field, s, len) == 0;
}

const struct pusher_app *pusher_apps_by_key(const struct pusher_app *apps, size_t n, const char *s,
                                            size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (same(apps[i].key, s, len))
            return &apps[i];
    return NULL;
}

const struct pusher_app *pusher_apps_by_id(const struct pusher_app *apps, size_t n, const char *s,
                                           size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (same(apps[i].id, s, len))
            return &apps[i];
    return NULL;
}

const struct pusher_app *pusher_apps_by_ns(const struct pusher_app *apps, size_t n, const char *id)
{
    char ns[NS_PREFIX_MAX + 1];

    ns_prefix_of(id, ns);
    for (size_t i = 0; i < n; i++)
        if (strcmp(apps[i].ns, ns) == 0)
            return &apps[i];
    return NULL;
}
