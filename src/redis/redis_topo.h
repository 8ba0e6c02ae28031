/* SPDX-License-Identifier: MIT */
/*
 * redis_topo.h - the Redis layer's pure parts that redis.h does not
 * export: the Cluster slot map and its CLUSTER SLOTS reply parser.
 *
 * Internal to src/redis/ (redis.c and its tests and fuzz target). The
 * topology parser and the routing hashes are declared in redis.h.
 */
#ifndef REDIS_TOPO_H
#define REDIS_TOPO_H

#include <stdint.h>

#include "redis.h"

#define REDIS_SLOT_NONE 0xffu /* redis_slotmap.owner: no master serves it */

/* A Cluster's masters and which one serves each slot. 16.5 KiB + the
 * endpoints: allocate it, do not put it on a small stack. */
struct redis_slotmap {
    unsigned n;                                    /* masters, 0..REDIS_ENDPOINTS_MAX */
    struct redis_endpoint ep[REDIS_ENDPOINTS_MAX]; /* in order of first appearance */
    uint8_t owner[REDIS_SLOTS];                    /* index into ep, or REDIS_SLOT_NONE */
};

/* Parses a CLUSTER SLOTS reply (pure): an array of [start, end, master,
 * replica...] where each node is [host, port, ...]. An empty host or "?"
 * (Redis: the node's address is unknown to the server answering) means
 * `asked`, the host the reply came from. Slots no range covers are
 * REDIS_SLOT_NONE. Returns 0, or REDIS_E_PROTO with a one-line reason in
 * err (a malformed reply, a slot out of range, more than
 * REDIS_ENDPOINTS_MAX masters); out is then unspecified. */
int redis_slotmap_parse(const redisReply *r, const char *asked, struct redis_slotmap *out,
                        char *err, size_t errlen);

/* Parses the endpoint of a -MOVED or -ASK error ("MOVED 3999 127.0.0.1:6381")
 * into *slot and *ep (pure). An empty host ("MOVED 1 :6380") means
 * `asked`. Returns 0, or REDIS_E_PROTO. */
int redis_redirect_parse(const char *s, size_t len, const char *asked, unsigned *slot,
                         struct redis_endpoint *ep);

#endif
