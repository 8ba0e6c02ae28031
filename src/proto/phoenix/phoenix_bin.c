/* SPDX-License-Identifier: MIT */
/*
 * phoenix_bin.c - realtime-js's binary broadcast frames (phoenix_bin.h):
 * bounds-checked reads of the client's length-prefixed push, and the
 * server's broadcast written in the same manner, nothing more.
 */
#include "phoenix_bin.h"

#include <string.h>

#define HEADER 7 /* kind and the six u8 fields */

int phx_bin_decode_push(const char *p, size_t n, struct phx_bin_push *out)
{
    const unsigned char *u = (const unsigned char *)p;
    struct phx_bin_span *f[5];
    size_t off = HEADER;

    memset(out, 0, sizeof(*out));
    if (n < HEADER)
        return PHX_BIN_E_SHORT;
    if (u[0] != PHX_BIN_PUSH)
        return PHX_BIN_E_KIND;
    if (u[6] > 1)
        return PHX_BIN_E_ENC;
    f[0] = &out->join_ref;
    f[1] = &out->ref;
    f[2] = &out->topic;
    f[3] = &out->event;
    f[4] = &out->meta;
    for (int i = 0; i < 5; i++) {
        size_t len = u[1 + i];
        if (n - off < len) {
            memset(out, 0, sizeof(*out));
            return PHX_BIN_E_SHORT;
        }
        *f[i] = (struct phx_bin_span){p + off, len};
        off += len;
    }
    out->payload = (struct phx_bin_span){p + off, n - off};
    out->json = u[6] == 1;
    return 0;
}

int phx_bin_encode_cast(struct buf *out, const struct phx_bin_span *topic,
                        const struct phx_bin_span *event, const char *p, size_t n, bool json)
{
    unsigned char head[5];

    if (topic->n > 255 || event->n > 255)
        return PHX_BIN_E_LONG;
    head[0] = PHX_BIN_CAST;
    head[1] = (unsigned char)topic->n;
    head[2] = (unsigned char)event->n;
    head[3] = 0; /* no meta */
    head[4] = json ? 1 : 0;
    buf_append(out, head, sizeof(head));
    buf_append(out, topic->p, topic->n);
    buf_append(out, event->p, event->n);
    buf_append(out, p, n);
    return 0;
}
