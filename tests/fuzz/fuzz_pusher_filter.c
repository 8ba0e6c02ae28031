/* SPDX-License-Identifier: MIT */
/*
 * fuzz_pusher_filter.c - libFuzzer target for the Pusher blockers filter.
 * The input is cut at the first '\n': before it, a list of blocked users
 * separated by ','; after it, a payload handed to the filter as it is
 * (any bytes: frames, partial frames, not JSON) and, a second time, as
 * the text of one WebSocket text frame. Invariants: no crash or leak; the
 * result is NULL, f itself, or a payload that is a whole sequence of text
 * frames none of which names a blocked user in a member event.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fuzz_blocked.h"
#include "fuzz_check.h"
#include "pusher_filter.h"
#include "ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void run(struct payload *in, struct blocked *b)
{
    struct payload *out = pusher_filter_blocked(in, is_blocked, b);

    if (out && out != in)
        check_frames(out);
    payload_unref(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t blen = nl ? (size_t)(nl - data) : 0, rest = nl ? size - blen - 1 : size;
    char *list = malloc(blen + 3);
    struct blocked b = {list};
    struct payload *in;

    if (!list)
        abort();
    list[0] = ',';
    memcpy(list + 1, data, blen);
    list[blen + 1] = ',';
    list[blen + 2] = '\0';
    in = payload_from(nl ? nl + 1 : data, rest);
    run(in, &b);
    payload_unref(in);
    in = ws_frame_payload(WS_OP_TEXT, nl ? nl + 1 : data, rest);
    run(in, &b);
    payload_unref(in);
    free(list);
    return 0;
}
