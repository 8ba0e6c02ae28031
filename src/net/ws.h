/* SPDX-License-Identifier: MIT */
/*
 * ws.h - RFC 6455 WebSocket codec: frame headers, masking, close payloads,
 * the handshake's accept key. Pure: no I/O, no allocation (except
 * ws_frame_payload, which builds a shared payload and says so).
 *
 * The decoder is incremental in the picohttpparser sense: give it the bytes
 * at the start of a frame; it returns the header size once the whole header
 * is there, PS_PARTIAL before that, or a negative enum ws_error as soon as
 * the bytes seen already prove the frame invalid (fail fast). It checks
 * what a header alone can show; the stream-level rules (masking required,
 * fragmentation order, message size, UTF-8) belong to the caller
 * (wsconn.c), which maps every error to its close code with
 * ws_error_close_code().
 * No extension is ever negotiated, so any RSV bit is an error.
 */
#ifndef WS_H
#define WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "util.h"

/* Opcodes (RFC 6455 §5.2). */
#define WS_OP_CONT   0x0u
#define WS_OP_TEXT   0x1u
#define WS_OP_BINARY 0x2u
#define WS_OP_CLOSE  0x8u
#define WS_OP_PING   0x9u
#define WS_OP_PONG   0xAu

#define WS_MAX_HEADER        14u  /* 2 + 8 (64-bit length) + 4 (mask) */
#define WS_MAX_SERVER_HEADER 10u  /* server frames are never masked */
#define WS_MAX_CONTROL       125u /* control frame payload limit */
#define WS_MAX_CLOSE_REASON  123u /* control limit minus the 2-byte code */

/* Close codes used by the server (RFC 6455 §7.4.1 and project codes). */
#define WS_CLOSE_NORMAL       1000u
#define WS_CLOSE_GOING_AWAY   1001u
#define WS_CLOSE_PROTOCOL     1002u
#define WS_CLOSE_UNSUPPORTED  1003u
#define WS_CLOSE_NO_STATUS    1005u /* never sent: "the close had no code" */
#define WS_CLOSE_ABNORMAL     1006u /* never sent: "TCP ended without a close" */
#define WS_CLOSE_INVALID_DATA 1007u
#define WS_CLOSE_POLICY       1008u
#define WS_CLOSE_TOO_BIG      1009u
#define WS_CLOSE_INTERNAL     1011u
#define WS_CLOSE_OUTPUT_LIMIT 4008u /* presenced: slow consumer */

/* Errors (negative, below -PS_EBASE so they never collide with PS_PARTIAL
 * or errno). The decoder returns the first five; the others name the
 * stream-level violations detected by wsconn.c and ws_parse_close(). */
enum ws_error {
    WS_E_RSV = -(PS_EBASE + 100),                /* RSV bit set, no extension: 1002 */
    WS_E_OPCODE = -(PS_EBASE + 101),             /* reserved opcode 3-7, 0xB-0xF: 1002 */
    WS_E_CONTROL_FRAGMENTED = -(PS_EBASE + 102), /* control frame with FIN 0: 1002 */
    WS_E_CONTROL_TOO_LONG = -(PS_EBASE + 103),   /* control payload > 125: 1002 */
    WS_E_LENGTH = -(PS_EBASE + 104),             /* 64-bit length, top bit set: 1002 */
    WS_E_UNMASKED = -(PS_EBASE + 105),           /* client frame without mask: 1002 */
    WS_E_CONTINUATION = -(PS_EBASE + 106),       /* continuation, no open message: 1002 */
    WS_E_FRAGMENT_OPEN = -(PS_EBASE + 107),      /* new message while one is open: 1002 */
    WS_E_CLOSE_PAYLOAD = -(PS_EBASE + 108),      /* close payload of 1 byte: 1002 */
    WS_E_CLOSE_CODE = -(PS_EBASE + 109),         /* close code not allowed on the wire: 1002 */
    WS_E_UTF8 = -(PS_EBASE + 110),               /* invalid UTF-8 text or reason: 1007 */
    WS_E_TOO_BIG = -(PS_EBASE + 111),            /* message over the size limit: 1009 */
};

/* A decoded frame header. */
struct ws_frame {
    bool fin;        /* last frame of its message */
    unsigned rsv;    /* RSV1..3 as bits 2..0 (always 0 after a successful decode) */
    unsigned opcode; /* WS_OP_* */
    bool masked;     /* MASK bit */
    uint8_t mask[4]; /* masking key; zero when !masked */
    uint64_t len;    /* payload length, < 2^63 */
};

/* Decodes the frame header at the start of (buf, n). Returns the header size
 * (2..14), PS_PARTIAL when more bytes are needed, or a negative enum
 * ws_error as soon as the bytes present show the header is invalid. Reads
 * at most the header's bytes and never more than n; *f is written only on
 * success. Non-minimal length encodings are accepted. */
ssize_t ws_decode_header(const void *buf, size_t n, struct ws_frame *f);

/* Close code a ws_error is answered with (1002, 1007 or 1009; 1002 for an
 * unknown value). */
unsigned ws_error_close_code(ssize_t err);
/* Short English description for a close reason or a log line. */
const char *ws_strerror(ssize_t err);

/* XORs (p, n) in place with the masking key; offset is the position of p[0]
 * within the frame payload (only offset % 4 matters), so a payload may be
 * unmasked piecewise as it arrives. Word at a time. */
void ws_mask(void *p, size_t n, const uint8_t mask[4], size_t offset);
/* Ditto, from src into dst in one pass; dst == src is allowed, any other
 * overlap is not. */
void ws_mask_copy(void *dst, const void *src, size_t n, const uint8_t mask[4], size_t offset);

/* Writes a server frame header (unmasked) for a payload of len bytes into
 * out; returns its size (2, 4 or 10). */
size_t ws_encode_header(uint8_t out[WS_MAX_SERVER_HEADER], unsigned opcode, bool fin, uint64_t len);
/* A new payload (one reference, the caller's) holding a complete FIN frame:
 * header then (p, n). Encode once, queue on any number of connections with
 * conn_write_payload. Aborts on OOM. */
struct payload *ws_frame_payload(unsigned opcode, const void *p, size_t n);

/* Writes a close frame's payload: the code in network order then reason
 * (may be NULL), cut to WS_MAX_CLOSE_REASON bytes at a UTF-8 character
 * boundary. Returns the payload size (2..125). */
size_t ws_encode_close(uint8_t out[WS_MAX_CONTROL], unsigned code, const char *reason);
/* Validates a received (unmasked) close payload (§5.5.1, §7.4). Returns 0
 * and sets *code (WS_CLOSE_NO_STATUS for an empty payload), or
 * WS_E_CLOSE_PAYLOAD (1 byte), WS_E_CLOSE_CODE, WS_E_UTF8 (reason). */
int ws_parse_close(const void *p, size_t n, unsigned *code);

/* True for codes a peer may send: 1000-1003, 1007-1014, 3000-4999. */
bool ws_close_code_valid(unsigned code);

/* Sec-WebSocket-Accept for a client's Sec-WebSocket-Key (key, key_len):
 * checks that the key is base64 of exactly 16 bytes, then writes
 * base64(SHA-1(key + GUID)) and a NUL into out. Returns 0, or -1 when the
 * key is invalid (out untouched). */
int ws_accept_key(const char *key, size_t key_len, char out[29]);

#endif
