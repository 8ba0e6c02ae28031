/* SPDX-License-Identifier: MIT */
/*
 * health.h - the server's own endpoints, for load balancers and scrapers:
 *   GET /healthz   liveness: 200 while the process runs
 *   GET /readyz    readiness: 200 while every worker runs, no shutdown
 *                  has begun and every added check passes, else 503
 *   GET /metrics   Prometheus text for every worker; needs "Authorization:
 *                  Bearer <metrics-key or admin-api-key>" (401 without),
 *                  except under auth = none with neither key set
 */
#ifndef HEALTH_H
#define HEALTH_H

#include <stdbool.h>
#include <stddef.h>

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

#endif
