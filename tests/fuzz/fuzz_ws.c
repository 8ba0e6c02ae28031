/* SPDX-License-Identifier: MIT */
/*
 * fuzz_ws.c - libFuzzer target for the WebSocket codec (ws.c, utf8.c).
 *
 * The input's first two bytes seed the chunking; the rest is a client byte
 * stream. It is cut into reads of pseudo-random sizes (1..64 bytes, some
 * larger), each copied into an exactly-sized heap block so that ASan sees
 * any read past the bytes a call was given. The receive loop mirrors
 * wsconn.c: leftover header bytes are presented again with the next read,
 * control frames are handled whole, data payloads are unmasked and UTF-8
 * checked piece by piece into a bounded reassembly buffer. Invariants:
 *   - the decoder returns PS_PARTIAL, a ws_error, or 2..14 <= n, and a
 *     decoded header re-encodes to the same fields;
 *   - every strict prefix of a valid header is PS_PARTIAL;
 *   - unmasking in pieces equals unmasking whole;
 *   - the incremental UTF-8 verdict equals utf8_valid() of the message;
 *   - a parsed close carries a valid code or 1005.
 */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"
#include "util.h"
#include "ws.h"

#define FUZZ_MAX_MESSAGE (256u * 1024u)

struct model {
    uint8_t in[WS_MAX_HEADER + WS_MAX_CONTROL]; /* leftover, as conn.c keeps it */
    size_t in_len;
    struct ws_frame frame; /* current data frame */
    uint64_t frame_left;   /* its payload still to come */
    size_t frame_pos;      /* its payload seen so far */
    unsigned msg_opcode;   /* open message, 0 = none */
    uint32_t utf8;         /* incremental state of the open text message */
    uint8_t *msg;          /* reassembled, unmasked message */
    size_t msg_len;
    bool failed; /* the connection would be closed */
    bool closed; /* a valid close arrived */
};

static uint32_t next_rand(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 16;
}

static bool is_error(ssize_t r)
{
    return r <= -PS_EBASE;
}

/* Checks a successful decode against the raw bytes. */
static void check_header(const uint8_t *p, size_t n, ssize_t h, const struct ws_frame *f)
{
    uint8_t enc[WS_MAX_SERVER_HEADER];
    struct ws_frame g;
    size_t e;

    assert(h >= 2 && h <= (ssize_t)WS_MAX_HEADER && (size_t)h <= n);
    assert(f->rsv == 0 && f->len < (1ull << 63));
    assert(!(f->opcode >= 3 && f->opcode <= 7) && f->opcode <= 0xA);
    assert(f->opcode < 8 || (f->fin && f->len <= WS_MAX_CONTROL));
    assert(f->masked == !!(p[1] & 0x80));
    for (size_t k = 0; k < (size_t)h; k++)
        assert(ws_decode_header(p, k, &g) == PS_PARTIAL);
    e = ws_encode_header(enc, f->opcode, f->fin, f->len);
    assert(ws_decode_header(enc, e, &g) == (ssize_t)e);
    assert(g.len == f->len && g.opcode == f->opcode && g.fin == f->fin && !g.masked);
}

static void message_end(struct model *m)
{
    if (m->msg_opcode == WS_OP_TEXT)
        assert((m->utf8 == UTF8_ACCEPT) == utf8_valid(m->msg, m->msg_len));
    free(m->msg);
    m->msg = NULL;
    m->msg_len = 0;
    m->msg_opcode = 0;
}

static void control(struct model *m, const struct ws_frame *f, const uint8_t *p)
{
    uint8_t pl[WS_MAX_CONTROL];
    unsigned code = 0;

    ws_mask_copy(pl, p, (size_t)f->len, f->mask, 0);
    if (f->opcode != WS_OP_CLOSE)
        return;
    if (ws_parse_close(pl, (size_t)f->len, &code) == 0) {
        assert(code == WS_CLOSE_NO_STATUS || ws_close_code_valid(code));
        m->closed = true;
    } else {
        m->failed = true;
    }
}

/* Payload bytes of the current data frame; returns bytes consumed. */
static size_t payload(struct model *m, const uint8_t *p, size_t n)
{
    size_t k = (size_t)MIN((uint64_t)n, m->frame_left);
    uint8_t *dst = m->msg + m->msg_len;
    uint8_t *whole = malloc(k ? k : 1);

    ws_mask_copy(dst, p, k, m->frame.mask, m->frame_pos);
    /* the same bytes unmasked in one piece from a fresh copy must agree */
    memcpy(whole, p, k);
    ws_mask(whole, k, m->frame.mask, m->frame_pos & 3);
    assert(memcmp(whole, dst, k) == 0);
    free(whole);
    if (m->msg_opcode == WS_OP_TEXT && m->utf8 != UTF8_REJECT)
        m->utf8 = utf8_step(m->utf8, dst, k);
    m->msg_len += k;
    m->frame_pos += k;
    m->frame_left -= k;
    if (m->frame_left == 0 && m->frame.fin)
        message_end(m);
    return k;
}

/* A data frame header just decoded. */
static void data_header(struct model *m, const struct ws_frame *f)
{
    if ((f->opcode == WS_OP_CONT) != (m->msg_opcode != 0) ||
        f->len > FUZZ_MAX_MESSAGE - m->msg_len) {
        m->failed = true;
        return;
    }
    if (f->opcode != WS_OP_CONT) {
        m->msg_opcode = f->opcode;
        m->utf8 = UTF8_ACCEPT;
    }
    m->msg = realloc(m->msg, m->msg_len + (size_t)f->len + 1);
    m->frame = *f;
    m->frame_left = f->len;
    m->frame_pos = 0;
    if (f->len == 0 && f->fin)
        message_end(m);
}

/* One frame at p; returns bytes consumed, 0 when more are needed. */
static size_t frame(struct model *m, const uint8_t *p, size_t n)
{
    struct ws_frame f;
    ssize_t h = ws_decode_header(p, n, &f);

    if (h == PS_PARTIAL)
        return 0;
    if (is_error(h) || !f.masked) {
        m->failed = true;
        return 0;
    }
    check_header(p, n, h, &f);
    if (f.opcode >= WS_OP_CLOSE) {
        if (n - (size_t)h < f.len)
            return 0;
        control(m, &f, p + h);
        return (size_t)h + (size_t)f.len;
    }
    data_header(m, &f);
    return (size_t)h;
}

/* One read of n bytes, presented like conn.c does (leftover first). */
static void on_read(struct model *m, const uint8_t *chunk, size_t n)
{
    size_t len = m->in_len + n, off = 0;
    uint8_t *p = malloc(len ? len : 1);

    memcpy(p, m->in, m->in_len);
    memcpy(p + m->in_len, chunk, n);
    while (off < len && !m->failed && !m->closed) {
        size_t k = m->frame_left ? payload(m, p + off, len - off) : frame(m, p + off, len - off);
        if (k == 0)
            break;
        off += k;
    }
    m->in_len = (m->failed || m->closed) ? 0 : len - off;
    /* only a header or a whole control frame is ever left over */
    assert(m->in_len <= sizeof(m->in));
    memcpy(m->in, p + off, m->in_len);
    free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct model m = {0};
    uint32_t seed;
    size_t off = 2;

    if (size < 2)
        return 0;
    seed = (uint32_t)data[0] << 8 | data[1];
    while (off < size && !m.failed && !m.closed) {
        uint32_t r = next_rand(&seed);
        size_t want = (r & 7) == 0 ? 1 + (r >> 3) % 4096 : 1 + (r >> 3) % 64;
        size_t n = MIN(want, size - off);
        uint8_t *chunk = malloc(n);

        memcpy(chunk, data + off, n);
        on_read(&m, chunk, n);
        free(chunk);
        off += n;
    }
    free(m.msg);
    return 0;
}
