/* SPDX-License-Identifier: MIT */
/*
 * jwt.h - verification of JWT connection tokens (RFC 7519, RFC 7515 compact
 * serialisation) with the RFC 8725 rules, on OpenSSL 3 libcrypto and cJSON.
 *
 * One configured key pins exactly one algorithm: an HMAC secret means HS256,
 * an RSA public key (>= 2048 bits) RS256, an EC P-256 public key ES256. The
 * token's own "alg" only has to agree; it never selects anything. Tokens
 * that carry "none", another algorithm, "crit", "kid", "jku", "jwk", "x5u",
 * "x5c", "x5t", "x5t#S256" or "cty" headers are refused, as are non-strict
 * base64url, duplicate JSON keys, invalid UTF-8 and non-integer times.
 *
 * Pure and thread-safe: no I/O except jwt_key_load_pem() reading its file,
 * no global state, no logging; now_s is a parameter, so tests never sleep.
 * Not here: issuing tokens, key sets (JWKS), key rotation, refresh, and
 * where a token comes from on the wire (the protocol layer decides).
 */
#ifndef JWT_H
#define JWT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define JWT_MAX_LEN        8192u /* bytes in a compact token, checked before decoding */
#define JWT_HMAC_MIN       32u   /* bytes in an HS256 secret (RFC 7518 3.2: >= 256 bits) */
#define JWT_HMAC_MAX       1024u /* bytes in an HS256 secret */
#define JWT_RSA_MIN_BITS   2048  /* smallest accepted RSA modulus */
#define JWT_LEEWAY_DEFAULT 30    /* seconds, when jwt_opts.leeway_s is negative */
#define JWT_LEEWAY_MAX     60    /* seconds; larger leeways are clamped */
#define JWT_ID_MAX         128u  /* bytes in "sub", "device" and each "rooms" entry */
#define JWT_ROOMS_MAX      32u   /* entries in the "rooms" claim */
#define JWT_ERR_LEN        256u  /* a good size for jwt_key_load_pem()'s err buffer */

enum jwt_alg {
    JWT_ALG_UNSET = 0, /* zero-filled key: verifies nothing */
    JWT_ALG_HS256,
    JWT_ALG_RS256,
    JWT_ALG_ES256,
};

/* Errors: one distinct code per rule for logs and tests. Clients must only
 * ever see jwt_strerror(), which is the same for every code. */
enum {
    JWT_E_KEY = -(PS_EBASE + 600),    /* no key loaded, or key unusable */
    JWT_E_LENGTH = -(PS_EBASE + 601), /* empty or over JWT_MAX_LEN */
    JWT_E_FORMAT = -(PS_EBASE + 602), /* not three non-empty dot-separated segments */
    JWT_E_BASE64 = -(PS_EBASE + 603), /* segment not strict unpadded base64url */
    JWT_E_HEADER = -(PS_EBASE + 604), /* header over 1 KiB, not a JSON object, bad UTF-8, dup key */
    JWT_E_ALG = -(PS_EBASE + 605),    /* "alg" missing or not the key's algorithm */
    JWT_E_TYP = -(PS_EBASE + 606),    /* "typ" present and not "JWT" */
    JWT_E_HEADER_PARAM = -(PS_EBASE + 607), /* crit, kid, jku, jwk, x5u, x5c, x5t, cty */
    JWT_E_SIGNATURE = -(PS_EBASE + 608),    /* signature wrong length or does not verify */
    JWT_E_PAYLOAD = -(PS_EBASE + 609),      /* payload not a JSON object / bad UTF-8 / dup key */
    JWT_E_SUB = -(PS_EBASE + 610),          /* "sub" missing, not a string or not a valid id */
    JWT_E_TIME = -(PS_EBASE + 611),         /* "exp" missing, or exp/nbf/iat not an integer */
    JWT_E_EXPIRED = -(PS_EBASE + 612),      /* exp + leeway <= now */
    JWT_E_NOT_YET = -(PS_EBASE + 613),      /* nbf - leeway > now, or iat + leeway > now */
    JWT_E_AUD = -(PS_EBASE + 614),          /* configured audience not in "aud" */
    JWT_E_ISS = -(PS_EBASE + 615),          /* "iss" not the configured issuer */
    JWT_E_CLAIM = -(PS_EBASE + 616),        /* "device" or "rooms" malformed or too large */
};

struct evp_pkey_st; /* OpenSSL's EVP_PKEY, kept out of this header */

/* A verification key. Zero-fill it (or jwt_key_release() it) before a
 * jwt_key_load_*() call; a failed load leaves it zero-filled. Read-only
 * while loaded, so any number of threads may verify with one key. */
struct jwt_key {
    enum jwt_alg alg;          /* the one algorithm this key accepts */
    unsigned char *_secret;    /* HS256: owned copy of the secret */
    size_t _secret_len;        /* HS256: bytes in _secret */
    struct evp_pkey_st *_pkey; /* RS256/ES256: owned public key */
};

/* Verification options; borrowed for the duration of jwt_verify(). */
struct jwt_opts {
    int64_t leeway_s; /* clock skew allowance: < 0 means JWT_LEEWAY_DEFAULT, > 60 is 60 */
    const char *aud;  /* required audience, or NULL to accept any (or none) */
    const char *iss;  /* required issuer, or NULL to accept any (or none) */
};

/* The verified claims; every string is NUL-terminated and owned by the
 * struct (plain arrays: copying the struct copies the claims). */
struct jwt_claims {
    char sub[JWT_ID_MAX + 1];                  /* user id: 1..128 of A-Z a-z 0-9 - _ . ~ : @ */
    int64_t exp;                               /* seconds since the epoch */
    int64_t nbf;                               /* 0 when absent */
    int64_t iat;                               /* 0 when absent */
    bool has_nbf;                              /* "nbf" was present */
    bool has_iat;                              /* "iat" was present */
    bool has_device;                           /* "device" was present */
    bool has_rooms;                            /* "rooms" was present (possibly empty) */
    char device[JWT_ID_MAX + 1];               /* "device" claim (same charset as sub), or "" */
    size_t nrooms;                             /* entries used in rooms[] */
    char rooms[JWT_ROOMS_MAX][JWT_ID_MAX + 1]; /* exact room ids, or prefixes ending in '*' */
};

/* Loads an HS256 secret of JWT_HMAC_MIN..JWT_HMAC_MAX bytes (copied; the
 * caller keeps (secret, n)). Returns 0, or JWT_E_KEY for a bad length. */
int jwt_key_load_hmac(struct jwt_key *k, const void *secret, size_t n);

/* Loads the first PEM "PUBLIC KEY" (SubjectPublicKeyInfo) in the file at
 * path and picks the algorithm from its type: RSA of at least
 * JWT_RSA_MIN_BITS bits -> RS256, EC on P-256 -> ES256; anything else
 * (RSA-PSS, other curves, Ed25519, smaller RSA) is refused. Returns 0, or
 * JWT_E_KEY with a message (git style: "cannot read ...") in err when err
 * is not NULL. Clears the OpenSSL error queue it leaves behind. */
int jwt_key_load_pem(struct jwt_key *k, const char *path, char *err, size_t errlen);

/* Frees what the key owns, wipes the secret and zero-fills k, so k may be
 * loaded again. A zero-filled key is a no-op; NULL is a no-op. */
void jwt_key_release(struct jwt_key *k);

/* Verifies the compact token (token, len) against k at wall-clock time
 * now_s (seconds since the epoch) and fills out. (token, len) is read only
 * within its bounds and needs no NUL; a NUL inside is simply invalid. o may
 * be NULL (default leeway, no aud/iss check). The signature is checked
 * before the payload is parsed. Returns 0 with *out filled, or one of the
 * JWT_E_* codes with *out zero-filled. Allocates only temporarily. */
int jwt_verify(const struct jwt_key *k, const struct jwt_opts *o, const char *token, size_t len,
               int64_t now_s, struct jwt_claims *out);

/* The one message to show a client for any jwt_verify() error: every code
 * gives the same static string, so a client learns nothing about which rule
 * failed. */
const char *jwt_strerror(int err);

/* A short static description of err for server logs and tests (which rule
 * failed); never send it to a client. */
const char *jwt_reason(int err);

/* True when the verified claims let the user join room: an entry equal to
 * room, or an entry "prefix*" where room starts with prefix ("*" alone
 * allows every room). False for a NULL/empty room or when "rooms" was
 * absent: the integration decides what an absent claim means. */
bool jwt_claims_allow_room(const struct jwt_claims *c, const char *room);

/* The rooms claim of c packed for keeping: its entries one after the other,
 * each NUL-terminated, then one more NUL (a claim without entries packs to
 * ""). A heap string of exactly that size, the caller's; aborts on OOM. */
char *jwt_rooms_pack(const struct jwt_claims *c);
/* jwt_claims_allow_room() for a packed claim. */
bool jwt_rooms_allow(const char *packed, const char *room);

#endif
