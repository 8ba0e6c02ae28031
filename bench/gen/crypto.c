/*
 * crypto.c - presence-bench: HS256 JWT minting and Sec-WebSocket-Accept,
 * both on libcrypto (HMAC, SHA-1, EVP base64).
 */
#include "crypto.h"
#include "util.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

/* base64url without padding; returns the length written (NUL added). */
static size_t b64url(char *out, const unsigned char *in, size_t n)
{
    int len = EVP_EncodeBlock((unsigned char *)out, in, (int)n);
    while (len > 0 && out[len - 1] == '=')
        len--;
    for (int i = 0; i < len; i++) {
        if (out[i] == '+')
            out[i] = '-';
        else if (out[i] == '/')
            out[i] = '_';
    }
    out[len] = '\0';
    return (size_t)len;
}

size_t jwt_mint(char *out, size_t cap, const char *secret, const char *sub, int64_t exp)
{
    static const char hdr[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
    char claims[256];
    int cn = snprintf(claims, sizeof claims, "{\"sub\":\"%s\",\"exp\":%lld}", sub, (long long)exp);
    if (cn < 0 || (size_t)cn >= sizeof claims)
        die("jwt: subject too long");
    if (cap < 4 * (sizeof hdr + (size_t)cn) / 3 + 64 + 8)
        die("jwt: output buffer too small");
    size_t n = b64url(out, (const unsigned char *)hdr, sizeof hdr - 1);
    out[n++] = '.';
    n += b64url(out + n, (const unsigned char *)claims, (size_t)cn);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)out, n, mac,
              &maclen))
        die("jwt: HMAC failed");
    out[n++] = '.';
    n += b64url(out + n, mac, maclen);
    return n;
}

void ws_accept_of(const char *key, char out[29])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    char cat[128];
    int n = snprintf(cat, sizeof cat, "%s%s", key, guid);
    unsigned char sha[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)cat, (size_t)n, sha);
    EVP_EncodeBlock((unsigned char *)out, sha, SHA_DIGEST_LENGTH);
}
