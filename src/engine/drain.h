/* SPDX-License-Identifier: MIT */
/*
 * drain.h - the engine's part of a drain (SIGTERM, POST /v1/admin/drain):
 * every WebSocket client of this worker is told to reconnect and closed at
 * its own moment, uniformly random within `drain-window-ms`, so that the
 * clients of a restarting server come back spread over the window instead
 * of all in the same second.
 *
 * Per client, with its protocol adapter's drain hooks (adapter.h): a delay
 * d in [0, window) is drawn; encode_reconnect(d), when the adapter has it,
 * is sent at once (the native {"type":"reconnect","afterMs":d}); at now + d
 * encode_drain_close(), when it has it, is written and the socket closed
 * with drain_close_code (1001 when 0). The sockets are kept in one array
 * sorted by their time, with one timer at the next due: a drain costs 16
 * bytes per socket and no timer each.
 *
 * On one node (no `redis`) there is nowhere to reconnect to until the
 * next process is up, so the reconnect frame names d + window instead of
 * d: the socket still closes at now + d, but its client comes back in the
 * second window, after the stop, spread over it as the closes were, and
 * the restored sessions' grace is reconnect-grace-ms + drain-window-ms
 * (persist.c). With `redis` the other nodes take the clients at once: d.
 *
 * Sessions are not put in their reconnect grace by these closes (nor by
 * any close once the server shuts down, session.c): they stay as they
 * were, to be saved (persist.h) and restored by the next start.
 */
#ifndef DRAIN_H
#define DRAIN_H

#include <stdbool.h>
#include <stdint.h>

struct conn;
struct engine;

/* Begins the drain of e's WebSocket clients over window_ms (0: all of
 * them at once). Once per engine; worker thread. Aborts on OOM. */
void engine_drain(struct engine *e, uint64_t window_ms);
/* True when c is a socket that e's drain closes itself (the runtime's
 * drain must leave it alone). */
bool engine_drain_owns(struct engine *e, const struct conn *c);
/* Whether e's worker keeps running after its own connections went: the
 * node's Redis home does until the drain window is over (and a moment to
 * flush), so that what the other workers still send it reaches Redis
 * (their sessions' resume records: docs/cluster.md, "Resume across
 * nodes") and the lease lasts while their clients are told to move. */
bool engine_drain_busy(struct engine *e);
/* Frees the drain's state (engine_free). NULL-safe on e->drain. */
void engine__drain_free(struct engine *e);

#endif
