/* SPDX-License-Identifier: MIT */
/*
 * fuzz_phoenix_bin.c - libFuzzer target for realtime-js's binary
 * broadcast push (phoenix_bin.h). The input is one binary frame, decoded
 * from libFuzzer's exact-size copy, so any read past it is caught.
 * Invariants: no crash; an error leaves the result zero-filled; a decoded
 * frame's spans lie inside the input, one after the other in the order of
 * the layout, with the lengths its header gives, and the payload is the
 * rest of the input; and the server's kind-4 frame made from a decoded
 * push (phx_bin_encode_cast) is its header, topic, event and payload, in
 * that order, byte for byte.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "fuzz_check.h"
#include "phoenix_bin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool is_zero(const struct phx_bin_push *m)
{
    static const struct phx_bin_push zero;

    return memcmp(m, &zero, sizeof(*m)) == 0;
}

/* The kind-4 frame of m's topic, event and payload. */
static void check_cast(const struct phx_bin_push *m)
{
    struct buf b = {0};
    const unsigned char *u;
    size_t off = 5;

    CHECK(phx_bin_encode_cast(&b, &m->topic, &m->event, m->payload.p, m->payload.n, m->json) == 0);
    u = (const unsigned char *)b.data;
    CHECK(b.len == 5 + m->topic.n + m->event.n + m->payload.n);
    CHECK(u[0] == PHX_BIN_CAST && u[1] == m->topic.n && u[2] == m->event.n && u[3] == 0 &&
          u[4] == (m->json ? 1 : 0));
    CHECK(memcmp(b.data + off, m->topic.p, m->topic.n) == 0);
    off += m->topic.n;
    CHECK(memcmp(b.data + off, m->event.p, m->event.n) == 0);
    off += m->event.n;
    CHECK(m->payload.n == 0 || memcmp(b.data + off, m->payload.p, m->payload.n) == 0);
    buf_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    struct phx_bin_push m;
    const struct phx_bin_span *f[6];
    size_t off = 7;

    if (phx_bin_decode_push(p, size, &m) < 0) {
        CHECK(is_zero(&m));
        return 0;
    }
    CHECK(size >= 7 && data[0] == PHX_BIN_PUSH && data[6] <= 1);
    CHECK(m.json == (data[6] == 1));
    f[0] = &m.join_ref;
    f[1] = &m.ref;
    f[2] = &m.topic;
    f[3] = &m.event;
    f[4] = &m.meta;
    f[5] = &m.payload;
    for (int i = 0; i < 6; i++) {
        CHECK(f[i]->p == p + off);
        CHECK(i == 5 || f[i]->n == data[1 + i]);
        off += f[i]->n;
    }
    CHECK(off == size);
    check_cast(&m);
    return 0;
}
