/* SPDX-License-Identifier: MIT */
/*
 * fuzz_blocked.h - what the blockers-filter targets (fuzz_pusher_filter.c,
 * fuzz_phoenix_filter.c) share: a blocked-users list read from the input
 * and the predicate over it, and the check that a filter's output is a
 * whole sequence of WebSocket frames. Header-only, for fuzz targets.
 */
#ifndef FUZZ_BLOCKED_H
#define FUZZ_BLOCKED_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "buf.h"
#include "fuzz_check.h"
#include "ws.h"

struct blocked {
    const char *list; /* ",a,b," */
};

/* Whether user is in the list (a filter's blocked() callback). */
static inline bool is_blocked(void *ctx, const char *user)
{
    const struct blocked *b = ctx;
    size_t n = strlen(user);
    const char *p = b->list;

    if (n == 0)
        return false; /* strstr() finds "" everywhere */
    while ((p = strstr(p, user)) != NULL) {
        if (p > b->list && p[-1] == ',' && p[n] == ',')
            return true;
        p++;
    }
    return false;
}

/* out is a whole sequence of frames. */
static inline void check_frames(const struct payload *out)
{
    size_t off = 0;

    while (off < out->len) {
        struct ws_frame wf;
        ssize_t h = ws_decode_header(out->data + off, out->len - off, &wf);

        CHECK(h > 0 && wf.len <= out->len - off - (size_t)h);
        off += (size_t)h + wf.len;
    }
}

#endif
