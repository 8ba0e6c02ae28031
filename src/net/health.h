/* SPDX-License-Identifier: MIT */
/*
 * health.h - the server's own endpoints, for load balancers and scrapers:
 *   GET /healthz   liveness: 200 while the process runs
 *   GET /readyz    readiness: 200 while every worker runs, no shutdown
 *                  has begun and every added check passes, else 503; the
 *                  200 body names each degraded dependency
 *   GET /metrics   Prometheus text for every worker, then a gauge per
 *                  dependency and the added process-wide metrics; needs
 *                  "Authorization: Bearer <metrics-key or admin-api-key>"
 *                  (401 without), except under auth = none with neither
 *                  key set
 *
 * Checks and dependencies differ in what a failure means: a failed check
 * takes the node out of its load balancer (503); an unreachable
 * dependency only degrades it, since the node keeps serving its local
 * state without it (200 with "degraded":[...]).
 */
#ifndef HEALTH_H
#define HEALTH_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "route.h"

extern const struct route_list health_routes;

/* A readiness check of an upper layer (the settings store): returns true
 * while healthy, else false with a short error code and a message
 * (static strings). Any thread; must not block. */
typedef bool health_check_fn(void *data, const char **code, const char **message);

/* Makes /readyz also answer 503 with the check's code while fn says so.
 * Call before the workers start (the checks are read-only after); at most
 * HEALTH_CHECKS_MAX checks. */
#define HEALTH_CHECKS_MAX 4
void health_add_check(health_check_fn *fn, void *data);

/* Whether a dependency of an upper layer (Redis, the settings database)
 * answered lately. Any thread; must not block. */
typedef bool health_dep_fn(void *data);

/* Names a dependency: while fn says false, /readyz still answers 200 but
 * lists name in "degraded", and /metrics shows
 * presenced_dependency_up{dependency="<name>"} as 0 (else 1). name is a
 * static string of [a-z0-9_]. Call before the workers start; at most
 * HEALTH_DEPS_MAX, rendered in the order added. */
#define HEALTH_DEPS_MAX 4
void health_add_dependency(const char *name, health_dep_fn *fn, void *data);

/* Appends a JSON array naming every dependency that is down now, in the
 * order added ("[]" when none): what /readyz lists as "degraded". Any
 * thread; calls the dependencies' fns. */
void health_append_degraded(struct buf *out);

/* Appends an upper layer's process-wide metrics to out (metrics.h's
 * metrics_render_head() and metrics_render_sample()). Any thread; must
 * not block. */
typedef void health_metrics_fn(void *data, struct buf *out);

/* Makes /metrics render fn's metrics after the others. Call before the
 * workers start; at most HEALTH_METRICS_MAX. */
#define HEALTH_METRICS_MAX 4
void health_add_metrics(health_metrics_fn *fn, void *data);

#endif
