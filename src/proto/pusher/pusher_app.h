/* SPDX-License-Identifier: MIT */
/*
 * pusher_app.h - the Pusher apps of the configuration (pusher-app): their
 * id, key, secret and options, parsed once at start (pure).
 *
 * Syntax: "ID:KEY:SECRET" with options after the secret as ":name=value"
 * items: client-events=true|false (default false, as on Pusher),
 * member-limit=N (1..10000, default 100: presence members per channel),
 * subscription-count=true|false (default false: pusher_internal:
 * subscription_count to the subscribers of the other channels),
 * webhook=URL (this app's webhook endpoint; the URL may hold ':', so this
 * option is the last: it takes the rest of the item).
 * ID is 1..32 digits or letters, KEY and SECRET 1..64 bytes of
 * [A-Za-z0-9_-.]. Several apps are comma-separated (a webhook URL holds no
 * ','; write %2C); no two share an id or a key. Serving more than one is
 * pusher.c's decision (docs/pusher.md).
 */
#ifndef PUSHER_APP_H
#define PUSHER_APP_H

#include <stdbool.h>
#include <stddef.h>

#include "ns.h"

#define PUSHER_APP_FIELD_MAX 64
#define PUSHER_APP_ITEM_MAX  1024 /* one app's ID:KEY:SECRET[:options] */
#define PUSHER_APPS_MAX      16   /* apps in one pusher-app */

struct pusher_app {
    char id[PUSHER_APP_FIELD_MAX + 1];
    char key[PUSHER_APP_FIELD_MAX + 1];
    char secret[PUSHER_APP_FIELD_MAX + 1];
    bool client_events;         /* client-* events are relayed */
    bool subscription_count;    /* pusher_internal:subscription_count is sent */
    unsigned member_limit;      /* members of a presence channel a new member may join */
    char webhook[256];          /* this app's webhook URL, "" = pusher-webhook-url's */
    char ns[NS_PREFIX_MAX + 1]; /* its namespace prefix: "" for the first app, else "<id>|" */
};

/* Parses one app's spec (no ',') into *app. 0, or -1 with a message in
 * err (errlen bytes). */
int pusher_app_parse(const char *spec, struct pusher_app *app, char *err, size_t errlen);

/* Parses the comma-separated list spec into apps[0..*n-1] (at most max),
 * in order, each with its ns. 0, or -1 with a message in err naming what
 * is wrong: a bad app, too many, or a second app with the id or the key
 * of an earlier. */
int pusher_apps_parse(const char *spec, struct pusher_app *apps, size_t max, size_t *n, char *err,
                      size_t errlen);

/* The app of apps[0..n-1] whose key (or id) is the len bytes at s, or
 * NULL (s need not be NUL-terminated). */
const struct pusher_app *pusher_apps_by_key(const struct pusher_app *apps, size_t n, const char *s,
                                            size_t len);
const struct pusher_app *pusher_apps_by_id(const struct pusher_app *apps, size_t n, const char *s,
                                           size_t len);
/* The app of apps[0..n-1] whose namespace the internal id (a room or
 * user id, ns.h) is in, or NULL. */
const struct pusher_app *pusher_apps_by_ns(const struct pusher_app *apps, size_t n, const char *id);

#endif
