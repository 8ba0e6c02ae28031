/* SPDX-License-Identifier: MIT */
/*
 * ws.c - RFC 6455 codec: header decode/encode, masking, close payloads,
 * close-code rules and the handshake's Sec-WebSocket-Accept.
 *
 * Everything here is a pure function of its arguments. The decoder checks
 * the fields in wire order and reports an error from the first two bytes
 * even when the extended length or the mask key has not arrived yet, so a
 * connection can be failed on the byte that proves it wrong. SHA-1 comes
 * from libcrypto, base64 from b64.h. Nothing here knows about connections,
 * fragmentation state or limits: that is wsconn.c.
 */
#include "ws.h"

#include <string.h>

#include <openssl/evp.h>

#include "b64.h"
#include "utf8.h"

/* ---- header decoding ---- */

static bool opcode_reserved(unsigned op)
{
    return (op >= 0x3 && op <= 0x7) || op >= 0xB;
}

static bool opcode_control(unsigned op)
{
    return op >= 0x8;
}

/* Checks the first two bytes; returns 0 or a ws_error. */
static int check_first_bytes(uint8_t b0, uint8_t b1)
{
    unsigned op = b0 & 0x0Fu;

    if (b0 & 0x70u)
        return WS_E_RSV;
    if (opcode_reserved(op))
        return WS_E_OPCODE;
    if (opcode_control(op) && !(b0 & 0x80u))
        return WS_E_CONTROL_FRAGMENTED;
    if (opcode_control(op) && (b1 & 0x7Fu) > WS_MAX_CONTROL)
        return WS_E_CONTROL_TOO_LONG;
    return 0;
}

ssize_t ws_decode_header(const void *buf, size_t n, struct ws_frame *f)
{
    const uint8_t *b = buf;
    unsigned len7;
    size_t need, pos = 2;
    uint64_t len;
    int err;

    if (n < 2)
        return PS_PARTIAL;
    err = check_first_bytes(b[0], b[1]);
    if (err)
        return err;
    len7 = b[1] & 0x7Fu;
    if (len7 == 127 && n >= 3 && (b[2] & 0x80u))
        return WS_E_LENGTH;
    need = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + ((b[1] & 0x80u) ? 4 : 0);
    if (n < need)
        return PS_PARTIAL;
    len = len7;
    if (len7 == 126) {
        len = (uint64_t)b[2] << 8 | b[3];
        pos = 4;
    } else if (len7 == 127) {
        len = 0;
        for (pos = 2; pos < 10; pos++)
            len = len << 8 | b[pos];
    }
    f->fin = (b[0] & 0x80u) != 0;
    f->rsv = 0;
    f->opcode = b[0] & 0x0Fu;
    f->masked = (b[1] & 0x80u) != 0;
    memset(f->mask, 0, sizeof(f->mask));
    if (f->masked)
        memcpy(f->mask, b + pos, 4);
    f->len = len;
    return (ssize_t)need;
}

unsigned ws_error_close_code(ssize_t err)
{
    switch (err) {
    case WS_E_UTF8:
        return WS_CLOSE_INVALID_DATA;
    case WS_E_TOO_BIG:
        return WS_CLOSE_TOO_BIG;
    default:
        return WS_CLOSE_PROTOCOL;
    }
}

const char *ws_strerror(ssize_t err)
{
    switch (err) {
    case WS_E_RSV:
        return "reserved bits set";
    case WS_E_OPCODE:
        return "reserved opcode";
    case WS_E_CONTROL_FRAGMENTED:
        return "fragmented control frame";
    case WS_E_CONTROL_TOO_LONG:
        return "control frame too long";
    case WS_E_LENGTH:
        return "invalid frame length";
    case WS_E_UNMASKED:
        return "unmasked client frame";
    case WS_E_CONTINUATION:
        return "continuation without a message";
    case WS_E_FRAGMENT_OPEN:
        return "new message inside a fragmented message";
    case WS_E_CLOSE_PAYLOAD:
        return "invalid close payload";
    case WS_E_CLOSE_CODE:
        return "invalid close code";
    case WS_E_UTF8:
        return "invalid UTF-8";
    case WS_E_TOO_BIG:
        return "message too big";
    default:
        return "protocol error";
    }
}

/* ---- masking ---- */

/*
 * The key repeats every 4 bytes, so an 8-byte word XORed with the key
 * rotated to the right phase covers two periods; loads and stores go
 * through memcpy, which compiles to plain unaligned moves (and lets the
 * compiler vectorise the loop) without breaking aliasing rules.
 */
void ws_mask_copy(void *dst, const void *src, size_t n, const uint8_t mask[4], size_t offset)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    uint8_t k[8];
    uint64_t key;
    size_t i = 0;

    for (size_t j = 0; j < 8; j++)
        k[j] = mask[(offset + j) & 3];
    memcpy(&key, k, 8);
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, s + i, 32);
        w[0] ^= key;
        w[1] ^= key;
        w[2] ^= key;
        w[3] ^= key;
        memcpy(d + i, w, 32);
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        w ^= key;
        memcpy(d + i, &w, 8);
    }
    for (; i < n; i++)
        d[i] = s[i] ^ k[i & 7];
}

void ws_mask(void *p, size_t n, const uint8_t mask[4], size_t offset)
{
    ws_mask_copy(p, p, n, mask, offset);
}

/* ---- encoding ---- */

size_t ws_encode_header(uint8_t out[WS_MAX_SERVER_HEADER], unsigned opcode, bool fin, uint64_t len)
{
    out[0] = (uint8_t)((fin ? 0x80u : 0u) | (opcode & 0x0Fu));
    if (len < 126) {
        out[1] = (uint8_t)len;
        return 2;
    }
    if (len <= 0xFFFF) {
        out[1] = 126;
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
        return 4;
    }
    out[1] = 127;
    for (int i = 0; i < 8; i++)
        out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
    return 10;
}

struct payload *ws_frame_payload(unsigned opcode, const void *p, size_t n)
{
    uint8_t head[WS_MAX_SERVER_HEADER];
    size_t h = ws_encode_header(head, opcode, true, n);
    struct payload *pl = payload_new(h + n);

    payload_append(pl, head, h);
    payload_append(pl, p, n);
    return pl;
}

size_t ws_encode_close(uint8_t out[WS_MAX_CONTROL], unsigned code, const char *reason)
{
    size_t n = reason ? strnlen(reason, WS_MAX_CLOSE_REASON) : 0;

    out[0] = (uint8_t)(code >> 8);
    out[1] = (uint8_t)code;
    n = utf8_valid_prefix(reason, n);
    if (n)
        memcpy(out + 2, reason, n);
    return 2 + n;
}

/* ---- close frames ---- */

bool ws_close_code_valid(unsigned code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

int ws_parse_close(const void *p, size_t n, unsigned *code)
{
    const uint8_t *b = p;
    unsigned c;

    if (n == 0) {
        *code = WS_CLOSE_NO_STATUS;
        return 0;
    }
    if (n == 1)
        return WS_E_CLOSE_PAYLOAD;
    c = (unsigned)b[0] << 8 | b[1];
    if (!ws_close_code_valid(c))
        return WS_E_CLOSE_CODE;
    if (!utf8_valid(b + 2, n - 2))
        return WS_E_UTF8;
    *code = c;
    return 0;
}

/* ---- handshake ---- */

/* True when key is the padded base64 of 16 bytes: 22 digits and "==",
 * so 24 characters. The 4 bits below the last byte are not checked: the
 * key is only hashed, never decoded. */
static bool key_is_16_bytes(const char *key, size_t len)
{
    unsigned char raw[16];

    return b64_decode(key, len, raw, sizeof(raw), B64_STD | B64_PAD | B64_LAX) == 16;
}

int ws_accept_key(const char *key, size_t key_len, char out[29])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    char in[24 + sizeof(guid) - 1];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;

    if (!key_is_16_bytes(key, key_len))
        return -1;
    memcpy(in, key, 24);
    memcpy(in + 24, guid, sizeof(guid) - 1);
    if (!EVP_Digest(in, sizeof(in), md, &mdlen, EVP_sha1(), NULL) || mdlen != 20)
        return -1;
    b64_encode(md, 20, out, B64_STD); /* 28 characters and a NUL */
    return 0;
}
