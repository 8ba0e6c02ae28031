/*
 * crypto.h - presence-bench: the little cryptography a client needs, on
 * libcrypto: HS256 JWT minting for `auth = jwt` and the WebSocket
 * Sec-WebSocket-Accept value of a key.
 */
#ifndef BENCH_CRYPTO_H
#define BENCH_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

/* Writes an HS256 JWT {"sub":sub,"exp":exp} signed with secret into out
 * (NUL-terminated, base64url, no padding). Returns its length; aborts if
 * it does not fit in cap. */
size_t jwt_mint(char *out, size_t cap, const char *secret, const char *sub, int64_t exp);

/* Writes base64(SHA-1(key + RFC 6455 GUID)) into out (29 bytes incl. NUL). */
void ws_accept_of(const char *key, char out[29]);

#endif
