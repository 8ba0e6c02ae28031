/* SPDX-License-Identifier: MIT */
/*
 * ns.h - namespaces of users and rooms: the internal id of an id a client
 * names in one app's namespace, and back (pure, no state).
 *
 * Each configured Pusher app is a namespace of its own users and rooms
 * (docs/pusher.md "Several apps"). The first app's namespace is the
 * native one and has the empty prefix: its internal ids are the ids
 * clients send, so nothing changes for it. Another app's internal ids are
 * "<app id>|<wire id>": its prefix is the app id (1..NS_APP_MAX letters
 * and digits) and NS_SEP, a byte that no wire id can hold (every wire
 * validator refuses it: presence_id_valid(), room_id_valid(), the JWT's
 * and the adapters' own), so no client of one namespace can name an id
 * of another, and the core, Redis keys and the settings store carry the
 * internal ids unchanged.
 *
 * An internal id is at most the core's id limit (128 bytes) in all, so a
 * wire id of a prefixed namespace has that limit less its prefix
 * (ns_join() says when it does not fit).
 */
#ifndef NS_H
#define NS_H

#include <stdbool.h>
#include <stddef.h>

#define NS_SEP        '|' /* between an app id and a wire id; never in a wire id */
#define NS_APP_MAX    32u /* bytes of an app id in a prefix */
#define NS_PREFIX_MAX (NS_APP_MAX + 1u)

/* The length of id's namespace prefix, the app id and NS_SEP (0 when id
 * has no NS_SEP: the first namespace's); -1 when the prefix is malformed
 * (an app id empty, over NS_APP_MAX or not letters and digits) or id
 * holds a second NS_SEP. Reads id up to its NUL or its second NS_SEP. */
int ns_prefix_len(const char *id);

/* id past its prefix: the id its namespace's clients know it by. For an
 * id without NS_SEP, id itself. Borrowed from id. */
const char *ns_strip(const char *id);

/* Whether id belongs to the namespace of prefix ("" = the first one: id
 * holds no NS_SEP; else id starts with prefix). */
bool ns_in(const char *id, const char *prefix);

/* Whether prefix is one: "" or an app id followed by NS_SEP. */
bool ns_prefix_valid(const char *prefix);

/* prefix + wire into out (max + 1 bytes): true, or false when the two
 * take more than max bytes (out is then ""). wire is not validated. */
bool ns_join(const char *prefix, const char *wire, char *out, size_t max);

/* Copies id's prefix into out (NS_PREFIX_MAX + 1 bytes): "" for an id of
 * the first namespace or a malformed one. */
void ns_prefix_of(const char *id, char out[NS_PREFIX_MAX + 1]);

#endif
