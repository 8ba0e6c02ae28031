/* SPDX-License-Identifier: MIT */
/*
 * health.h - the server's own endpoints, for load balancers and scrapers:
 *   GET /healthz   liveness: 200 while the process runs
 *   GET /readyz    readiness: 200 while every worker runs and no shutdown
 *                  has begun, else 503
 *   GET /metrics   Prometheus text for every worker
 */
#ifndef HEALTH_H
#define HEALTH_H

#include "route.h"

extern const struct route_list health_routes;

#endif
