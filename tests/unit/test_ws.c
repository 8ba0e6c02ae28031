/* SPDX-License-Identifier: MIT */
/*
 * test_ws.c - the RFC 6455 codec: header decoding at every length boundary
 * (fed whole, byte by byte and from every prefix, each from the end of a
 * page followed by a PROT_NONE page), every header error and how early it
 * is reported, masking at every offset and split, server header encoding,
 * shared frame payloads, close payloads and codes, and the handshake's
 * accept key (RFC 6455 §1.3 example).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "guard.h"
#include "util.h"
#include "ws.h"

/* Builds a client frame header: b0, then length in the requested encoding
 * (7 = 7-bit, 16, 64), then the mask key when masked. Returns its size. */
static size_t build_header(uint8_t *out, uint8_t b0, bool masked, int enc, uint64_t len,
                           const uint8_t mask[4])
{
    size_t n = 2;

    out[0] = b0;
    if (enc == 7) {
        out[1] = (uint8_t)len;
    } else if (enc == 16) {
        out[1] = 126;
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
        n = 4;
    } else {
        out[1] = 127;
        for (int i = 0; i < 8; i++)
            out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
        n = 10;
    }
    if (masked) {
        out[1] |= 0x80;
        memcpy(out + n, mask, 4);
        n += 4;
    }
    return n;
}

static ssize_t decode_guarded(const void *p, size_t n, struct ws_frame *f)
{
    struct guard g = guard_place(p, n);
    ssize_t r = ws_decode_header(g.data, n, f);

    guard_free(&g);
    return r;
}

/* Every strict prefix is partial (or, with fail-fast, the same error), the
 * whole header decodes to want_ret, and trailing bytes change nothing. */
static void expect_decode(const uint8_t *h, size_t n, ssize_t want_ret, struct ws_frame *f)
{
    uint8_t more[WS_MAX_HEADER + 8];
    struct ws_frame g;

    for (size_t k = 0; k < n; k++) {
        ssize_t r = decode_guarded(h, k, &g);
        if (want_ret >= 0 || r != want_ret)
            assert_int_equal(r, PS_PARTIAL);
    }
    assert_int_equal(decode_guarded(h, n, f), want_ret);
    memcpy(more, h, n);
    memset(more + n, 0xEE, 8);
    assert_int_equal(decode_guarded(more, n + 8, &g), want_ret);
}

static void expect_length(int enc, uint64_t len, bool masked)
{
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    uint8_t h[WS_MAX_HEADER];
    size_t n = build_header(h, 0x81, masked, enc, len, mask);
    struct ws_frame f;

    expect_decode(h, n, (ssize_t)n, &f);
    assert_true(f.fin);
    assert_int_equal(f.rsv, 0);
    assert_int_equal(f.opcode, WS_OP_TEXT);
    assert_int_equal(f.masked, masked);
    assert_true(f.len == len);
    if (masked)
        assert_memory_equal(f.mask, mask, 4);
}

/* Header errors must be reported from the first two bytes. */
static void expect_error_early(uint8_t b0, uint8_t b1, ssize_t err)
{
    uint8_t h[WS_MAX_HEADER] = {b0, (uint8_t)(b1 | 0x80)};
    struct ws_frame f;

    assert_int_equal(decode_guarded(h, 2, &f), err);
    assert_int_equal(decode_guarded(h, sizeof(h), &f), err);
    assert_int_equal(decode_guarded(h, 1, &f), PS_PARTIAL);
}

/* ---- decoding ---- */

static void test_decode_needs_two_bytes(void **state)
{
    struct ws_frame f;

    (void)state;
    assert_int_equal(decode_guarded("", 0, &f), PS_PARTIAL);
    assert_int_equal(decode_guarded("\x81", 1, &f), PS_PARTIAL);
}

static void test_decode_length_0(void **state)
{
    (void)state;
    expect_length(7, 0, true);
    expect_length(7, 0, false);
}

static void test_decode_length_125(void **state)
{
    (void)state;
    expect_length(7, 125, true);
    expect_length(7, 125, false);
}

static void test_decode_length_126(void **state)
{
    (void)state;
    expect_length(16, 126, true);
    expect_length(16, 126, false);
}

static void test_decode_length_127(void **state)
{
    (void)state;
    expect_length(16, 127, true);
}

static void test_decode_length_65535(void **state)
{
    (void)state;
    expect_length(16, 65535, true);
    expect_length(16, 65535, false);
}

static void test_decode_length_65536(void **state)
{
    (void)state;
    expect_length(64, 65536, true);
    expect_length(64, 65536, false);
}

static void test_decode_length_large_64_bit(void **state)
{
    (void)state;
    expect_length(64, 0x100000000ull, true);
    expect_length(64, 0x7fffffffffffffffull, true);
}

static void test_decode_non_minimal_lengths_accepted(void **state)
{
    (void)state;
    expect_length(16, 5, true);
    expect_length(64, 5, true);
    expect_length(64, 65535, true);
}

static void test_decode_64_bit_top_bit_rejected(void **state)
{
    static const uint8_t mask[4] = {1, 2, 3, 4};
    uint8_t h[WS_MAX_HEADER];
    size_t n = build_header(h, 0x82, true, 64, 0x8000000000000000ull, mask);
    struct ws_frame f;

    (void)state;
    assert_int_equal(decode_guarded(h, n, &f), WS_E_LENGTH);
    assert_int_equal(decode_guarded(h, 3, &f), WS_E_LENGTH); /* fail fast */
    assert_int_equal(decode_guarded(h, 2, &f), PS_PARTIAL);
    n = build_header(h, 0x82, true, 64, UINT64_MAX, mask);
    assert_int_equal(decode_guarded(h, n, &f), WS_E_LENGTH);
}

static void test_decode_mask_key_and_bits(void **state)
{
    static const uint8_t mask[4] = {0, 0xff, 0x80, 0x01};
    uint8_t h[WS_MAX_HEADER];
    size_t n = build_header(h, 0x02, true, 7, 3, mask); /* binary, FIN 0 */
    struct ws_frame f;

    (void)state;
    expect_decode(h, n, 6, &f);
    assert_false(f.fin);
    assert_int_equal(f.opcode, WS_OP_BINARY);
    assert_memory_equal(f.mask, mask, 4);
    n = build_header(h, 0x80, false, 7, 0, mask); /* continuation, unmasked */
    expect_decode(h, n, 2, &f);
    assert_int_equal(f.opcode, WS_OP_CONT);
    assert_false(f.masked);
    assert_memory_equal(f.mask, "\0\0\0\0", 4);
}

static void test_decode_control_frames(void **state)
{
    static const uint8_t mask[4] = {9, 9, 9, 9};
    static const unsigned ops[] = {WS_OP_CLOSE, WS_OP_PING, WS_OP_PONG};
    uint8_t h[WS_MAX_HEADER];
    struct ws_frame f;

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
        size_t n = build_header(h, (uint8_t)(0x80 | ops[i]), true, 7, 125, mask);
        expect_decode(h, n, 6, &f);
        assert_int_equal(f.opcode, ops[i]);
        assert_true(f.len == 125);
    }
}

static void test_decode_rsv_bits_rejected(void **state)
{
    static const uint8_t ops[] = {0x0, 0x1, 0x2, 0x8, 0x9, 0xA};

    (void)state;
    for (unsigned rsv = 1; rsv <= 7; rsv++)
        for (size_t i = 0; i < sizeof(ops); i++)
            expect_error_early((uint8_t)(0x80 | rsv << 4 | ops[i]), 5, WS_E_RSV);
}

static void test_decode_reserved_opcodes_rejected(void **state)
{
    static const uint8_t ops[] = {0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF};

    (void)state;
    for (size_t i = 0; i < sizeof(ops); i++) {
        expect_error_early((uint8_t)(0x80 | ops[i]), 0, WS_E_OPCODE);
        expect_error_early(ops[i], 0, WS_E_OPCODE);
    }
}

static void test_decode_fragmented_control_rejected(void **state)
{
    (void)state;
    expect_error_early(0x08, 0, WS_E_CONTROL_FRAGMENTED);
    expect_error_early(0x09, 5, WS_E_CONTROL_FRAGMENTED);
    expect_error_early(0x0A, 5, WS_E_CONTROL_FRAGMENTED);
}

static void test_decode_control_over_125_rejected(void **state)
{
    (void)state;
    expect_error_early(0x89, 126, WS_E_CONTROL_TOO_LONG);
    expect_error_early(0x8A, 127, WS_E_CONTROL_TOO_LONG);
    expect_error_early(0x88, 126, WS_E_CONTROL_TOO_LONG);
}

/* A stream of frames cut into every possible pair of reads, as a
 * connection would see it: leftover header bytes are presented again. */
static void test_decode_stream_split_everywhere(void **state)
{
    static const uint8_t mask[4] = {0xa, 0xb, 0xc, 0xd};
    static const uint64_t lens[] = {0, 1, 125, 126, 300};
    uint8_t stream[2048];
    size_t n = 0;

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(lens); i++) {
        int enc = lens[i] < 126 ? 7 : 16;
        n += build_header(stream + n, 0x82, true, enc, lens[i], mask);
        memset(stream + n, (int)i, (size_t)lens[i]);
        n += (size_t)lens[i];
    }
    for (size_t cut = 0; cut <= n; cut++) {
        size_t off = 0, frames = 0, avail = cut;
        while (off < n) {
            struct ws_frame f;
            ssize_t r;
            if (off > avail)
                avail = n; /* that payload needed the second read */
            r = decode_guarded(stream + off, avail - off, &f);
            if (r == PS_PARTIAL) {
                assert_true(avail < n);
                avail = n; /* the second read arrives */
                continue;
            }
            assert_true(r > 0 && (size_t)r <= avail - off);
            assert_true(f.len == lens[frames]);
            off += (size_t)r + (size_t)f.len;
            frames++;
        }
        assert_int_equal(frames, ARRAY_SIZE(lens));
    }
}

static void test_error_close_codes(void **state)
{
    static const ssize_t protocol[] = {
        WS_E_RSV,           WS_E_OPCODE,     WS_E_CONTROL_FRAGMENTED, WS_E_CONTROL_TOO_LONG,
        WS_E_LENGTH,        WS_E_UNMASKED,   WS_E_CONTINUATION,       WS_E_FRAGMENT_OPEN,
        WS_E_CLOSE_PAYLOAD, WS_E_CLOSE_CODE,
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(protocol); i++)
        assert_int_equal(ws_error_close_code(protocol[i]), 1002);
    assert_int_equal(ws_error_close_code(WS_E_UTF8), 1007);
    assert_int_equal(ws_error_close_code(WS_E_TOO_BIG), 1009);
    assert_int_equal(ws_error_close_code(-1), 1002);
}

static void test_errors_are_distinct_and_described(void **state)
{
    static const ssize_t all[] = {
        WS_E_RSV,
        WS_E_OPCODE,
        WS_E_CONTROL_FRAGMENTED,
        WS_E_CONTROL_TOO_LONG,
        WS_E_LENGTH,
        WS_E_UNMASKED,
        WS_E_CONTINUATION,
        WS_E_FRAGMENT_OPEN,
        WS_E_CLOSE_PAYLOAD,
        WS_E_CLOSE_CODE,
        WS_E_UTF8,
        WS_E_TOO_BIG,
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
        assert_true(all[i] < -PS_EBASE);
        assert_true(strlen(ws_strerror(all[i])) <= WS_MAX_CLOSE_REASON);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(all[i], all[j]);
            assert_string_not_equal(ws_strerror(all[i]), ws_strerror(all[j]));
        }
    }
}

/* ---- masking ---- */

static void test_mask_every_length_and_offset(void **state)
{
    static const uint8_t mask[4] = {0x12, 0x34, 0x56, 0x78};
    uint8_t src[100], want[100];

    (void)state;
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (uint8_t)(i * 7 + 3);
    for (size_t off = 0; off < 8; off++) {
        for (size_t n = 0; n <= sizeof(src); n++) {
            struct guard g = guard_place(src, n);
            struct guard d = guard_place(src, n); /* destination also ends at a guard */
            for (size_t i = 0; i < n; i++)
                want[i] = src[i] ^ mask[(off + i) % 4];
            ws_mask(g.data, n, mask, off);
            assert_memory_equal(g.data, want, n);
            ws_mask_copy(d.data, src, n, mask, off);
            assert_memory_equal(d.data, want, n);
            ws_mask(g.data, n, mask, off); /* involution */
            assert_memory_equal(g.data, src, n);
            guard_free(&g);
            guard_free(&d);
        }
    }
}

static void test_mask_split_at_every_point(void **state)
{
    static const uint8_t mask[4] = {0xde, 0xad, 0xbe, 0xef};
    uint8_t whole[77], parts[77];

    (void)state;
    for (size_t i = 0; i < sizeof(whole); i++)
        whole[i] = (uint8_t)i;
    ws_mask(whole, sizeof(whole), mask, 0);
    for (size_t a = 0; a <= sizeof(parts); a++) {
        for (size_t b = a; b <= sizeof(parts); b += 5) {
            for (size_t i = 0; i < sizeof(parts); i++)
                parts[i] = (uint8_t)i;
            ws_mask(parts, a, mask, 0);
            ws_mask(parts + a, b - a, mask, a);
            ws_mask(parts + b, sizeof(parts) - b, mask, b);
            assert_memory_equal(parts, whole, sizeof(parts));
        }
    }
}

static void test_mask_rfc_example(void **state)
{
    /* RFC 6455 §5.7: masked "Hello" */
    static const uint8_t frame[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
                                    0x7f, 0x9f, 0x4d, 0x51, 0x58};
    struct ws_frame f;
    char out[5];

    (void)state;
    assert_int_equal(decode_guarded(frame, sizeof(frame), &f), 6);
    assert_true(f.len == 5);
    ws_mask_copy(out, frame + 6, 5, f.mask, 0);
    assert_memory_equal(out, "Hello", 5);
}

/* ---- encoding ---- */

static void expect_encode(uint64_t len, size_t want_size)
{
    uint8_t h[WS_MAX_SERVER_HEADER];
    size_t n = ws_encode_header(h, WS_OP_BINARY, true, len);
    struct ws_frame f;

    assert_int_equal(n, want_size);
    assert_int_equal(decode_guarded(h, n, &f), (ssize_t)n);
    assert_true(f.len == len);
    assert_false(f.masked);
    assert_true(f.fin);
    assert_int_equal(f.opcode, WS_OP_BINARY);
}

static void test_encode_header_sizes(void **state)
{
    (void)state;
    expect_encode(0, 2);
    expect_encode(125, 2);
    expect_encode(126, 4);
    expect_encode(127, 4);
    expect_encode(65535, 4);
    expect_encode(65536, 10);
    expect_encode(0x7fffffffffffffffull, 10);
}

static void test_encode_header_bits(void **state)
{
    uint8_t h[WS_MAX_SERVER_HEADER];

    (void)state;
    assert_int_equal(ws_encode_header(h, WS_OP_TEXT, true, 5), 2);
    assert_memory_equal(h, "\x81\x05", 2);
    assert_int_equal(ws_encode_header(h, WS_OP_TEXT, false, 5), 2);
    assert_memory_equal(h, "\x01\x05", 2);
    assert_int_equal(ws_encode_header(h, WS_OP_PONG, true, 0), 2);
    assert_memory_equal(h, "\x8a\x00", 2);
    assert_int_equal(ws_encode_header(h, WS_OP_BINARY, true, 256), 4);
    assert_memory_equal(h, "\x82\x7e\x01\x00", 4);
    assert_int_equal(ws_encode_header(h, WS_OP_BINARY, true, 65536), 10);
    assert_memory_equal(h, "\x82\x7f\x00\x00\x00\x00\x00\x01\x00\x00", 10);
}

static void test_frame_payload_holds_header_and_bytes(void **state)
{
    static char big[70000];
    struct payload *p;

    (void)state;
    p = ws_frame_payload(WS_OP_TEXT, "Hello", 5);
    assert_int_equal(atomic_load(&p->refs), 1);
    assert_int_equal(p->len, 7);
    assert_memory_equal(p->data, "\x81\x05Hello", 7);
    payload_unref(p);
    p = ws_frame_payload(WS_OP_BINARY, "", 0);
    assert_int_equal(p->len, 2);
    assert_memory_equal(p->data, "\x82\x00", 2);
    payload_unref(p);
    memset(big, 'x', sizeof(big));
    p = ws_frame_payload(WS_OP_BINARY, big, sizeof(big));
    assert_int_equal(p->len, sizeof(big) + 10);
    assert_memory_equal(p->data + 10, big, sizeof(big));
    payload_unref(p);
}

/* ---- close frames ---- */

static void test_encode_close(void **state)
{
    uint8_t out[WS_MAX_CONTROL];
    char reason[200];

    (void)state;
    assert_int_equal(ws_encode_close(out, 1000, NULL), 2);
    assert_memory_equal(out, "\x03\xe8", 2);
    assert_int_equal(ws_encode_close(out, 4008, "output limit"), 14);
    assert_memory_equal(out, "\x0f\xa8output limit", 14);
    memset(reason, 'r', sizeof(reason) - 1);
    reason[sizeof(reason) - 1] = '\0';
    assert_int_equal(ws_encode_close(out, 1001, reason), 125);
}

static void test_encode_close_cuts_reason_at_character_boundary(void **state)
{
    uint8_t out[WS_MAX_CONTROL];
    unsigned code;
    char reason[130];

    (void)state;
    memset(reason, 'a', 122);
    memcpy(reason + 122, "\xc3\xa9zz", 5); /* "é" straddles byte 123 */
    assert_int_equal(ws_encode_close(out, 1000, reason), 2 + 122);
    assert_int_equal(ws_parse_close(out, 2 + 122, &code), 0);
    assert_int_equal(code, 1000);
}

static void test_parse_close_empty_and_one_byte(void **state)
{
    unsigned code = 0;

    (void)state;
    assert_int_equal(ws_parse_close("", 0, &code), 0);
    assert_int_equal(code, 1005);
    assert_int_equal(ws_parse_close("\x03", 1, &code), WS_E_CLOSE_PAYLOAD);
}

static void test_parse_close_codes(void **state)
{
    static const unsigned good[] = {1000, 1001, 1002, 1003, 1007, 1008, 1009,
                                    1010, 1011, 3000, 3999, 4000, 4999};
    static const unsigned bad[] = {0, 999, 1004, 1005, 1006, 1016, 1100, 2000, 2999, 5000, 65535};
    uint8_t p[2];
    unsigned code;

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
        p[0] = (uint8_t)(good[i] >> 8), p[1] = (uint8_t)good[i];
        assert_int_equal(ws_parse_close(p, 2, &code), 0);
        assert_int_equal(code, good[i]);
    }
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        p[0] = (uint8_t)(bad[i] >> 8), p[1] = (uint8_t)bad[i];
        assert_int_equal(ws_parse_close(p, 2, &code), WS_E_CLOSE_CODE);
    }
}

static void test_parse_close_reason_utf8(void **state)
{
    static const char ok[] = "\x03\xe8\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5";
    static const char bad[] = "\x03\xe8\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80"
                              "edited";
    static const char cut[] = "\x03\xe8\xce";
    unsigned code;
    struct guard g;

    (void)state;
    g = guard_place(ok, sizeof(ok) - 1);
    assert_int_equal(ws_parse_close(g.data, sizeof(ok) - 1, &code), 0);
    guard_free(&g);
    g = guard_place(bad, sizeof(bad) - 1);
    assert_int_equal(ws_parse_close(g.data, sizeof(bad) - 1, &code), WS_E_UTF8);
    guard_free(&g);
    g = guard_place(cut, sizeof(cut) - 1);
    assert_int_equal(ws_parse_close(g.data, sizeof(cut) - 1, &code), WS_E_UTF8);
    guard_free(&g);
}

static void test_close_code_valid_table(void **state)
{
    (void)state;
    for (unsigned c = 0; c < 70000; c++) {
        bool want =
            (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999);
        assert_int_equal(ws_close_code_valid(c), want);
    }
    assert_false(ws_close_code_valid(1015));
    assert_true(ws_close_code_valid(1014));
}

/* ---- handshake ---- */

static void test_accept_key_rfc_example(void **state)
{
    static const char key[] = "dGhlIHNhbXBsZSBub25jZQ==";
    char out[29];
    struct guard g = guard_place(key, sizeof(key) - 1);

    (void)state;
    assert_int_equal(ws_accept_key(g.data, sizeof(key) - 1, out), 0);
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    guard_free(&g);
}

static void test_accept_key_rejects_bad_keys(void **state)
{
    static const char *const bad[] = {
        "",
        "short",
        "dGhlIHNhbXBsZSBub25jZQ=",   /* 23 characters */
        "dGhlIHNhbXBsZSBub25jZQ===", /* 25 */
        "dGhlIHNhbXBsZSBub25jZQAA",  /* 18 bytes, no padding */
        "dGhlIHNhbXBsZSBub25jZ===",  /* padding too early */
        "dGhlIHNhbXBsZSBub25j*Q==",  /* not base64 */
        "dGhlIHNhbXBsZSBub25jZ Q=",
        "dGhlIHNhbXBsZSBub25jZQ==dGhlIHNhbXBsZSBub25jZQ==",
    };
    char out[29] = "untouched";

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct guard g = guard_place(bad[i], strlen(bad[i]));
        assert_int_equal(ws_accept_key(g.data, strlen(bad[i]), out), -1);
        assert_string_equal(out, "untouched");
        guard_free(&g);
    }
}

static void test_accept_key_other_valid_key(void **state)
{
    /* 16 zero bytes; expected value computed with Python's hashlib/base64 */
    char out[29];

    (void)state;
    assert_int_equal(ws_accept_key("AAAAAAAAAAAAAAAAAAAAAA==", 24, out), 0);
    assert_int_equal(strlen(out), 28);
    assert_string_equal(out, "ICX+Yqv66kxgM0FcWaLWlFLwTAI=");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_needs_two_bytes),
        cmocka_unit_test(test_decode_length_0),
        cmocka_unit_test(test_decode_length_125),
        cmocka_unit_test(test_decode_length_126),
        cmocka_unit_test(test_decode_length_127),
        cmocka_unit_test(test_decode_length_65535),
        cmocka_unit_test(test_decode_length_65536),
        cmocka_unit_test(test_decode_length_large_64_bit),
        cmocka_unit_test(test_decode_non_minimal_lengths_accepted),
        cmocka_unit_test(test_decode_64_bit_top_bit_rejected),
        cmocka_unit_test(test_decode_mask_key_and_bits),
        cmocka_unit_test(test_decode_control_frames),
        cmocka_unit_test(test_decode_rsv_bits_rejected),
        cmocka_unit_test(test_decode_reserved_opcodes_rejected),
        cmocka_unit_test(test_decode_fragmented_control_rejected),
        cmocka_unit_test(test_decode_control_over_125_rejected),
        cmocka_unit_test(test_decode_stream_split_everywhere),
        cmocka_unit_test(test_error_close_codes),
        cmocka_unit_test(test_errors_are_distinct_and_described),
        cmocka_unit_test(test_mask_every_length_and_offset),
        cmocka_unit_test(test_mask_split_at_every_point),
        cmocka_unit_test(test_mask_rfc_example),
        cmocka_unit_test(test_encode_header_sizes),
        cmocka_unit_test(test_encode_header_bits),
        cmocka_unit_test(test_frame_payload_holds_header_and_bytes),
        cmocka_unit_test(test_encode_close),
        cmocka_unit_test(test_encode_close_cuts_reason_at_character_boundary),
        cmocka_unit_test(test_parse_close_empty_and_one_byte),
        cmocka_unit_test(test_parse_close_codes),
        cmocka_unit_test(test_parse_close_reason_utf8),
        cmocka_unit_test(test_close_code_valid_table),
        cmocka_unit_test(test_accept_key_rfc_example),
        cmocka_unit_test(test_accept_key_rejects_bad_keys),
        cmocka_unit_test(test_accept_key_other_valid_key),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
