/* SPDX-License-Identifier: MIT */
/* budget.c - per-connection message budgets (budget.h). */
#include "budget.h"

#include "config.h"
#include "util.h"

static int rate_of(const struct config *cfg, enum budget_kind k)
{
    switch (k) {
    case BUDGET_EPHEMERAL:
        return cfg->msg_rate_ephemeral;
    case BUDGET_PATCH:
        return cfg->msg_rate_patch;
    case BUDGET_STATUS:
        return cfg->msg_rate_status;
    case BUDGET_WATCH:
        return cfg->msg_rate_watch;
    case BUDGET_JOIN:
        return cfg->msg_rate_join;
    default:
        return 0;
    }
}

/* Refills every bucket for the time since the last refill. */
static void refill(struct budget *b, const struct config *cfg, uint64_t now_ms)
{
    bool start = b->last_ms == 0;
    double dt = start ? 0 : (double)(now_ms - MIN(now_ms, b->last_ms)) / 1000.0;

    for (int k = BUDGET_NONE + 1; k < BUDGET_KINDS; k++) {
        double rate = rate_of(cfg, (enum budget_kind)k);
        double burst = rate * (double)cfg->msg_burst_seconds;
        double t = start ? burst : (double)b->tokens[k] + rate * dt;

        b->tokens[k] = (float)MIN(t, burst);
    }
    b->last_ms = MAX(now_ms, 1);
}

bool budget_take(struct budget *b, enum budget_kind k, const struct config *cfg, uint64_t now_ms)
{
    if (rate_of(cfg, k) == 0)
        return true;
    refill(b, cfg, now_ms);
    if (b->tokens[k] < 1.0f)
        return false;
    b->tokens[k] -= 1.0f;
    return true;
}

const char *budget_kind_name(enum budget_kind k)
{
    static const char *const names[BUDGET_KINDS] = {
        [BUDGET_NONE] = "none",     [BUDGET_EPHEMERAL] = "ephemeral", [BUDGET_PATCH] = "patch",
        [BUDGET_STATUS] = "status", [BUDGET_WATCH] = "watch",         [BUDGET_JOIN] = "join",
    };
    return (unsigned)k < BUDGET_KINDS ? names[k] : "?";
}
