/* SPDX-License-Identifier: MIT */
/*
 * apps.c - ?app=ID on the native side's requests (apps.h).
 */
#include "apps.h"

#include <stdio.h>
#include <string.h>

#include "http.h"
#include "http_read.h"
#include "httpd.h"
#include "ns.h"

static char ids[APPS_MAX][APPS_ID_MAX + 1];
static char prefixes[APPS_MAX][APPS_ID_MAX + 2]; /* "" for the first, else "<id>|" */
static size_t nids;

void apps_set(const char *const *list, size_t n)
{
    nids = 0;
    for (size_t i = 0; i < n && nids < APPS_MAX; i++) {
        if (strlen(list[i]) > APPS_ID_MAX)
            continue;
        snprintf(ids[nids], sizeof(ids[nids]), "%s", list[i]);
        if (nids > 0) /* the first app's prefix stays "" */
            snprintf(prefixes[nids], sizeof(prefixes[nids]), "%s%c", list[i], NS_SEP);
        nids++;
    }
}

/* The index of the app whose id is s, or -1. */
static int find(const char *s)
{
    for (size_t i = 0; i < nids; i++)
        if (strcmp(ids[i], s) == 0)
            return (int)i;
    return -1;
}

bool apps_socket_ns(struct conn *conn, const struct http_request *req, bool others, const char **ns)
{
    char app[APPS_ID_MAX + 2];
    size_t pos = 0;
    int i;

    *ns = "";
    if (!http_read__query_has(req, "app"))
        return true;
    if (http_query_next(req->query, req->query_len, "app", &pos, app, sizeof(app)) < 0 ||
        (i = find(app)) < 0) {
        httpd_error(conn, 400, "unknown_app", "app names no configured pusher-app id");
        return false;
    }
    if (i > 0 && !others) {
        httpd_error(conn, 400, "app_not_native",
                    "this endpoint serves the first pusher-app's users and rooms only (another "
                    "app's: the native WebSocket with auth = none, or the Pusher protocol; "
                    "docs/pusher.md)");
        return false;
    }
    *ns = prefixes[i];
    return true;
}

bool apps_native_ok(struct conn *conn, const struct http_request *req)
{
    const char *ns;

    return apps_socket_ns(conn, req, false, &ns);
}
