/* SPDX-License-Identifier: MIT */
/*
 * phoenix_lp_wire.c - the long-poll session token and the NDJSON splitter
 * (phoenix_lp_wire.h). Pure: the HMAC is libcrypto's one-shot HMAC(),
 * base64 is b64.h's.
 */
#include "phoenix_lp_wire.h"

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "b64.h"

#define PREFIX     "lp1."
#define PREFIX_LEN 4
#define MAC_BYTES  16

static const char hex[] = "0123456789abcdef";

static void put_hex(char *out, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[p[i] >> 4];
        out[2 * i + 1] = hex[p[i] & 15];
    }
}

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    return -1;
}

/* The MAC of the token's first 20 bytes ("lp1." and the id). */
static void token_mac(const unsigned char key[PHX_LP_KEY_LEN], const char *head,
                      unsigned char mac[MAC_BYTES])
{
    unsigned char full[EVP_MAX_MD_SIZE];
    unsigned int len = 0;

    HMAC(EVP_sha256(), key, PHX_LP_KEY_LEN, (const unsigned char *)head, PREFIX_LEN + 16, full,
         &len);
    memcpy(mac, full, MAC_BYTES);
}

void phx_lp_token_make(const unsigned char key[PHX_LP_KEY_LEN], uint64_t id,
                       char out[PHX_LP_TOKEN_LEN + 1])
{
    unsigned char be[8], mac[MAC_BYTES];

    for (int i = 0; i < 8; i++)
        be[i] = (unsigned char)(id >> (56 - 8 * i));
    memcpy(out, PREFIX, PREFIX_LEN);
    put_hex(out + PREFIX_LEN, be, sizeof(be));
    out[PREFIX_LEN + 16] = '.';
    token_mac(key, out, mac);
    put_hex(out + PREFIX_LEN + 17, mac, sizeof(mac));
    out[PHX_LP_TOKEN_LEN] = '\0';
}

bool phx_lp_token_like(const char *p, size_t n)
{
    return n >= PREFIX_LEN && memcmp(p, PREFIX, PREFIX_LEN) == 0;
}

int phx_lp_token_check(const unsigned char key[PHX_LP_KEY_LEN], const char *p, size_t n,
                       uint64_t *id)
{
    unsigned char mac[MAC_BYTES], got[MAC_BYTES];
    uint64_t v = 0;

    if (n != PHX_LP_TOKEN_LEN || !phx_lp_token_like(p, n) || p[PREFIX_LEN + 16] != '.')
        return -1;
    for (size_t i = 0; i < 16; i++) {
        int d = hex_value(p[PREFIX_LEN + i]);
        if (d < 0)
            return -1;
        v = (v << 4) | (uint64_t)d;
    }
    for (size_t i = 0; i < MAC_BYTES; i++) {
        int hi = hex_value(p[PREFIX_LEN + 17 + 2 * i]), lo = hex_value(p[PREFIX_LEN + 18 + 2 * i]);
        if (hi < 0 || lo < 0)
            return -1;
        got[i] = (unsigned char)(hi << 4 | lo);
    }
    token_mac(key, p, mac);
    if (CRYPTO_memcmp(mac, got, MAC_BYTES) != 0)
        return -2;
    *id = v;
    return 0;
}

bool phx_lp_next_line(const char *p, size_t n, size_t *pos, const char **line, size_t *len)
{
    while (*pos < n) {
        const char *s = p + *pos, *nl = memchr(s, '\n', n - *pos);
        size_t l = nl ? (size_t)(nl - s) : n - *pos;

        *pos += l + (nl != NULL);
        if (l > 0 && s[l - 1] == '\r')
            l--;
        if (l > 0) {
            *line = s;
            *len = l;
            return true;
        }
    }
    return false;
}

bool phx_lp_line_is_text(const char *line, size_t len)
{
    return len > 0 && (line[0] == '[' || line[0] == '{');
}

ssize_t phx_lp_b64_decode(const char *p, size_t n, char *out, size_t cap)
{
    ssize_t len = b64_decode(p, n, out, cap, B64_STD | B64_LAX);

    return len < 0 ? -1 : len;
}
