/* SPDX-License-Identifier: MIT */
/*
 * addrcap.h - connections per client address, for every worker: caps on
 * pending and on established connections.
 *
 * A connection is PENDING from accept until its first request is answered
 * or it switches protocol (a WebSocket upgrade, an event stream), then
 * ESTABLISHED until it closes. One address may hold at most max_pending
 * pending connections (on by default: one client holding max-connections
 * half-open requests must not lock everyone else out) and at most
 * max_established established ones (off by default: behind a proxy every
 * client has the proxy's address). An address is an IPv4 address, or the
 * /64 prefix of an IPv6 one (one host usually has a whole /64); IPv4-mapped
 * IPv6 counts as IPv4. Loopback is not exempt.
 *
 * The table is shared by the workers: 64 stripes, each a mutex and a hash
 * table of the addresses with any connection, placed by a keyed hash under
 * a random per-process seed (clients cannot crowd one stripe). An entry
 * exists while its address has a connection. Each call takes one stripe's
 * lock for a lookup and a counter update.
 */
#ifndef ADDRCAP_H
#define ADDRCAP_H

#include <stdbool.h>
#include <stdint.h>

struct addrcap;
struct conn;

/* Where a connection stands in the table (struct conn.addr_state). */
enum addrcap_state {
    ADDRCAP_NONE = 0,    /* not counted (no table, no address) */
    ADDRCAP_PENDING,     /* counted as pending */
    ADDRCAP_ESTABLISHED, /* counted as established */
};

/* A table with the two caps (0 = no cap). Aborts on OOM. */
struct addrcap *addrcap_new(uint32_t max_pending, uint32_t max_established);
/* NULL is a no-op. No connection may still be counted. */
void addrcap_free(struct addrcap *t);

/* Counts c, whose peer is set (conn_set_peer), as pending. Returns false,
 * counting nothing, when its address already holds max_pending pending
 * connections: the caller closes c. A connection without a known address,
 * or a NULL t, is admitted uncounted. */
bool addrcap_admit(struct addrcap *t, struct conn *c);
/* c (pending) becomes established. Returns false when its address already
 * holds max_established established connections: c then stays counted as
 * pending, and the caller refuses it and closes it. A no-op returning true
 * for a connection that is not pending. */
bool addrcap_establish(struct addrcap *t, struct conn *c);
/* Stops counting c (conn_close() calls it). Idempotent. */
void addrcap_forget(struct addrcap *t, struct conn *c);

/* The counts of c's address (0, 0 when it has none); for tests. */
void addrcap_counts(struct addrcap *t, const struct conn *c, uint32_t *pending,
                    uint32_t *established);

#endif
