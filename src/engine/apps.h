/* SPDX-License-Identifier: MIT */
/*
 * apps.h - the app a native request names with ?app=ID (docs/pusher.md
 * "Several apps"): the native WebSocket, the native HTTP API, the admin
 * API and the Phoenix/Supabase sockets serve the first configured Pusher
 * app's namespace, which is the native one (ns.h: the empty prefix).
 *
 * A request without ?app= is served as always. ?app= naming the first
 * app is served the same. Any other value is refused with 400 and a
 * message: an id no app has (unknown_app), or another app's, whose
 * namespace the HTTP API, the admin API and Phoenix do not serve
 * (app_not_native), so a client that asks for another app is never
 * served the first app's users and rooms by mistake. The native
 * WebSocket may join another app's namespace (apps_socket_ns()).
 */
#ifndef ENGINE_APPS_H
#define ENGINE_APPS_H

#include <stdbool.h>
#include <stddef.h>

#define APPS_MAX    16 /* the app ids known (PUSHER_APPS_MAX) */
#define APPS_ID_MAX 32 /* bytes of an app id (NS_APP_MAX) */

struct conn;
struct http_request;

/* The configured app ids, ids[0] the first (copied; the ones past
 * APPS_MAX or over APPS_ID_MAX bytes are ignored). Configuration time,
 * before the workers start. */
void apps_set(const char *const *ids, size_t n);

/* Whether req may be served: true without ?app= or with the first app's
 * id; else answers 400 on conn and returns false. */
bool apps_native_ok(struct conn *conn, const struct http_request *req);

/* As apps_native_ok(), for a native WebSocket, which may also be in
 * another app's namespace: true with *ns that app's prefix (ns.h; static
 * storage), "" for the first app's. Another app's is served only when
 * others is true (the caller's rule: auth = none and no room tokens, as
 * tokens do not name an app yet), else refused as app_not_native. */
bool apps_socket_ns(struct conn *conn, const struct http_request *req, bool others,
                    const char **ns);

#endif
