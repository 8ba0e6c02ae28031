/* SPDX-License-Identifier: MIT */
/*
 * hooks_stream.h - the durable webhook queue, where Redis is configured:
 * every webhook event goes through a Redis Stream per endpoint, read by
 * all nodes through one consumer group (docs/cluster.md "Webhooks").
 *
 * ---- Producing ----
 *
 * hooks.c builds each event as it would without Redis (a Standard
 * Webhooks body with its id, or one Pusher event object) and gives it to
 * hstream_add() on the worker that produced it. The event goes over the
 * bus to the node's Redis home, which appends it with XADD to
 * pd:<app>:{wh:<h>}:q, h = 16 hex digits of FNV-1a-64 of the endpoint's
 * format and URL, so every node that names the same endpoint shares one
 * stream (MAXLEN ~ HSTREAM_MAXLEN: what the trim removes was never
 * delivered, and is counted as dropped). The XADD follows the script that
 * decided the transition: it cannot be in that script, whose keys are
 * the user's or the room's slot. An event is acknowledged as produced
 * when the XADD answers; until then it waits in the home's memory (at
 * most HOOKS_QUEUE_MAX events of HOOKS_QUEUE_BYTES, the rest dropped and
 * counted), and is sent again every HSTREAM_TICK_MS while Redis cannot be
 * reached. A node that dies loses the events not yet acknowledged.
 *
 * ---- Delivering ----
 *
 * Each node's home reads each stream with XREADGROUP (group "wh", the
 * consumer "<node-id>.<epoch>", never blocking: it polls every
 * HSTREAM_TICK_MS and right after its own XADDs): up to 20 entries for
 * a Pusher endpoint, sent as one batch (the 20 events / 250 ms rule:
 * nothing read waits), up to HSTREAM_READ_MAX for a Standard Webhooks
 * one, sent one per request with their own webhook-id. An entry is
 * XACKed and XDELed after a 2xx, or when the endpoint is disabled on this
 * node (its schedule spent, or 410), then counted as dropped. Entries
 * held for a retry are re-claimed by their holder every HSTREAM_TOUCH_MS
 * (XCLAIM JUSTID), so their idle time stays short; an entry idle longer
 * than its endpoint's timeout plus HSTREAM_CLAIM_MARGIN_MS belongs to a
 * node that died, and the first node whose XAUTOCLAIM (every
 * HSTREAM_CLAIM_EVERY_MS) finds it delivers it: at-least-once, the same
 * webhook-id, receivers dedupe.
 *
 * Order: one node delivers what it read in stream order, one request at a
 * time per endpoint; several nodes read disjoint runs of the stream and
 * deliver them concurrently, and a claimed entry comes after newer ones,
 * so receivers order by the payload's version (user events) or
 * (epoch, seq) (room events), not by arrival.
 *
 * Threads: hstream_new() and hstream_free() on the worker's thread (its
 * start and stop); the home alone talks to Redis, from its loop.
 */
#ifndef HOOKS_STREAM_H
#define HOOKS_STREAM_H

#include <stddef.h>

struct cluster;
struct hooks_config;
struct metrics;
struct worker;
struct hstream;

#define HSTREAM_MAXLEN          100000 /* entries per endpoint's stream (XADD MAXLEN ~) */
#define HSTREAM_READ_MAX        20     /* entries one read takes (Pusher: one batch) */
#define HSTREAM_TICK_MS         100    /* reads, and sends again what Redis refused */
#define HSTREAM_TOUCH_MS        2000   /* held entries re-claimed by their holder */
#define HSTREAM_CLAIM_EVERY_MS  1000   /* XAUTOCLAIM of dead consumers' entries */
#define HSTREAM_CLAIM_MARGIN_MS 5000   /* idle past the endpoint's timeout plus this: dead */

/* Registers the bus handler (WORKER_MSG_HOOKS); before server_start. */
void hstream_register(void);

/* Worker w's side for the endpoints of hc, over cluster cl (its home
 * talks to Redis), counting into m. Never NULL. */
struct hstream *hstream_new(struct hooks_config *hc, struct worker *w, struct cluster *cl,
                            struct metrics *m);
/* After the worker's cluster_detach() (no Redis callback can come);
 * drops what it holds (at-most-once for what was not acknowledged). */
void hstream_free(struct hstream *s);

/* Produces an event for endpoint ep (hc's index): id its webhook-id
 * ("" for Pusher), body its len bytes (copied). Worker's thread. */
void hstream_add(struct hstream *s, unsigned ep, const char *id, const void *body, size_t len);

#endif
