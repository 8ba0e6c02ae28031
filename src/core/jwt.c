/* SPDX-License-Identifier: MIT */
/*
 * jwt.c - JWT connection-token verification (RFC 7519 / 7515 / 8725).
 *
 * jwt_verify() works in a fixed order so that attacker-controlled bytes meet
 * as little code as possible before the signature is known to be good:
 * length cap, three segments, strict base64url, header JSON and its rules,
 * signature (pinned algorithm, constant-time HMAC compare), and only then
 * the payload JSON and its claims. It does not issue tokens, fetch keys or
 * log anything; errors are codes, and jwt_strerror() is uniform.
 */
#include "jwt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include "b64.h"
#include "utf8.h"
#include "util.h"

#define HEADER_MAX 1024u              /* decoded header bytes: real ones are ~40 */
#define HS256_LEN  32u                /* HMAC-SHA256 output */
#define ES256_LEN  64u                /* JOSE raw r || s on P-256 */
#define INT_LIMIT  9007199254740992.0 /* 2^53: larger doubles are not exact integers */

/* The three segments of a compact token: views into the caller's token and
 * their decoded bytes (NUL-terminated) in one temporary allocation. */
struct parts {
    const char *seg[3];    /* header, payload, signature (borrowed) */
    size_t seg_len[3];     /* bytes in each segment */
    unsigned char *dec[3]; /* decoded bytes, each followed by a NUL */
    size_t dec_len[3];     /* decoded byte counts (without the NUL) */
};

static const char *const forbidden_params[] = {
    "crit", "kid", "jku", "jwk", "x5u", "x5c", "x5t", "x5t#S256", "cty",
};

/* ---- small helpers ---- */

static const char *alg_name(enum jwt_alg alg)
{
    switch (alg) {
    case JWT_ALG_HS256:
        return "HS256";
    case JWT_ALG_RS256:
        return "RS256";
    case JWT_ALG_ES256:
        return "ES256";
    default:
        return NULL;
    }
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static bool id_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~' || c == ':' || c == '@';
}

/* True when s is 1..JWT_ID_MAX id characters; with pattern, a final '*'
 * (or "*" alone) is allowed too. */
static bool id_valid(const char *s, bool pattern)
{
    size_t n;

    for (n = 0; s[n]; n++) {
        if (n >= JWT_ID_MAX)
            return false;
        if (id_char((unsigned char)s[n]))
            continue;
        if (pattern && s[n] == '*' && s[n + 1] == '\0')
            continue;
        return false;
    }
    return n > 0;
}

/* Splits (token, len) at its dots and decodes each segment into buf (at
 * least len + 3 bytes). Exactly three non-empty segments are required. */
static int split_decode(const char *token, size_t len, unsigned char *buf, struct parts *p)
{
    const char *end = token + len, *s = token;
    size_t off = 0;
    int i;

    for (i = 0; i < 3; i++) {
        const char *dot = memchr(s, '.', (size_t)(end - s));

        if ((i < 2) != (dot != NULL))
            return JWT_E_FORMAT;
        if (dot == NULL)
            dot = end;
        p->seg[i] = s;
        p->seg_len[i] = (size_t)(dot - s);
        if (p->seg_len[i] == 0)
            return JWT_E_FORMAT;
        s = dot + (dot < end);
    }
    for (i = 0; i < 3; i++) {
        /* Strict base64url (b64.h): each byte string has one spelling. */
        ssize_t n =
            b64_decode(p->seg[i], p->seg_len[i], buf + off, p->seg_len[i], B64_URL | B64_NOPAD);

        if (n < 0)
            return JWT_E_BASE64;
        p->dec[i] = buf + off;
        p->dec_len[i] = (size_t)n;
        buf[off + (size_t)n] = '\0';
        off += (size_t)n + 1;
    }
    return 0;
}

/* ---- JSON ---- */

/* RFC 8259 text cJSON would accept but we do not: a raw NUL, invalid UTF-8,
 * or a \u0000 escape (it would silently cut a string short in cJSON). */
static bool json_text_ok(const unsigned char *p, size_t n)
{
    bool in_str = false;
    size_t i;

    if (memchr(p, '\0', n) != NULL || !utf8_valid(p, n))
        return false;
    for (i = 0; i < n; i++) {
        if (!in_str) {
            in_str = p[i] == '"';
        } else if (p[i] == '"') {
            in_str = false;
        } else if (p[i] == '\\') {
            if (i + 5 < n && p[i + 1] == 'u' && memcmp(p + i + 2, "0000", 4) == 0)
                return false;
            i++;
        }
    }
    return true;
}

/* True when some object at or below j has two members with the same name
 * (cJSON keeps both, and which one a lookup finds is an accident). */
static bool json_has_dup(const cJSON *j)
{
    const cJSON *a, *b;

    for (a = j->child; a != NULL; a = a->next) {
        if (cJSON_IsObject(j))
            for (b = a->next; b != NULL; b = b->next)
                if (strcmp(a->string, b->string) == 0)
                    return true;
        if ((cJSON_IsObject(a) || cJSON_IsArray(a)) && json_has_dup(a))
            return true;
    }
    return false;
}

/* Parses the NUL-terminated (p, n) as one JSON object with unique keys.
 * Returns the tree (caller deletes it) or NULL. */
static cJSON *json_object(const unsigned char *p, size_t n)
{
    cJSON *j;

    if (!json_text_ok(p, n))
        return NULL;
    j = cJSON_ParseWithLengthOpts((const char *)p, n + 1, NULL, 1);
    if (j != NULL && (!cJSON_IsObject(j) || json_has_dup(j))) {
        cJSON_Delete(j);
        j = NULL;
    }
    return j;
}

/* Reads an integer claim: 1 when present and an exact integer within
 * +-2^53 (stored in *v), 0 when absent, -1 otherwise. */
static int int_claim(const cJSON *obj, const char *name, int64_t *v)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, name);
    double d;

    if (it == NULL)
        return 0;
    if (!cJSON_IsNumber(it))
        return -1;
    d = it->valuedouble;
    /* NaN fails both comparisons; infinities fail one. */
    if (!(d >= -INT_LIMIT && d <= INT_LIMIT) || (double)(int64_t)d != d)
        return -1;
    *v = (int64_t)d;
    return 1;
}

/* ---- header and signature ---- */

static int check_header(const struct parts *p, enum jwt_alg alg)
{
    const cJSON *it;
    cJSON *h;
    size_t i;
    int rc = 0;

    if (p->dec_len[0] > HEADER_MAX || (h = json_object(p->dec[0], p->dec_len[0])) == NULL)
        return JWT_E_HEADER;
    it = cJSON_GetObjectItemCaseSensitive(h, "alg");
    if (!cJSON_IsString(it) || strcmp(it->valuestring, alg_name(alg)) != 0) {
        rc = JWT_E_ALG;
        goto out_json;
    }
    it = cJSON_GetObjectItemCaseSensitive(h, "typ");
    if (it != NULL &&
        !(cJSON_IsString(it) && ascii_ieq(it->valuestring, strlen(it->valuestring), "JWT"))) {
        rc = JWT_E_TYP;
        goto out_json;
    }
    for (i = 0; i < ARRAY_SIZE(forbidden_params); i++)
        if (cJSON_GetObjectItemCaseSensitive(h, forbidden_params[i]) != NULL)
            rc = JWT_E_HEADER_PARAM;
out_json:
    cJSON_Delete(h);
    return rc;
}

static int verify_hs256(const struct jwt_key *k, const void *data, size_t n,
                        const unsigned char *sig, size_t sig_len)
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    int rc = JWT_E_SIGNATURE;

    if (sig_len != HS256_LEN)
        return JWT_E_SIGNATURE;
    if (HMAC(EVP_sha256(), k->_secret, (int)k->_secret_len, data, n, mac, &mac_len) != NULL &&
        mac_len == HS256_LEN && CRYPTO_memcmp(mac, sig, HS256_LEN) == 0)
        rc = 0;
    OPENSSL_cleanse(mac, sizeof(mac));
    return rc;
}

/* EVP_DigestVerify with SHA-256: PKCS#1 v1.5 for RSA keys, DER ECDSA for
 * EC keys. The key is only read (OpenSSL takes it non-const). */
static int verify_digest(EVP_PKEY *pkey, const void *data, size_t n, const unsigned char *sig,
                         size_t sig_len)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int rc = JWT_E_SIGNATURE;

    if (ctx != NULL && EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, pkey) == 1 &&
        EVP_DigestVerify(ctx, sig, sig_len, data, n) == 1)
        rc = 0;
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    return rc;
}

/* JOSE carries ECDSA as raw r || s (RFC 7518 3.4); OpenSSL wants DER. */
static int verify_es256(EVP_PKEY *pkey, const void *data, size_t n, const unsigned char *sig,
                        size_t sig_len)
{
    ECDSA_SIG *es;
    BIGNUM *r, *s;
    unsigned char *der = NULL;
    int der_len, rc = JWT_E_SIGNATURE;

    if (sig_len != ES256_LEN)
        return JWT_E_SIGNATURE;
    es = ECDSA_SIG_new();
    r = BN_bin2bn(sig, ES256_LEN / 2, NULL);
    s = BN_bin2bn(sig + ES256_LEN / 2, ES256_LEN / 2, NULL);
    if (es == NULL || r == NULL || s == NULL || ECDSA_SIG_set0(es, r, s) != 1) {
        BN_free(r);
        BN_free(s);
        goto out_sig;
    }
    der_len = i2d_ECDSA_SIG(es, &der);
    if (der_len > 0)
        rc = verify_digest(pkey, data, n, der, (size_t)der_len);
    OPENSSL_free(der);
out_sig:
    ECDSA_SIG_free(es);
    ERR_clear_error();
    return rc;
}

static int check_signature(const struct jwt_key *k, const struct parts *p)
{
    /* The signing input is "header.payload" exactly as received. */
    size_t n = p->seg_len[0] + 1 + p->seg_len[1];
    EVP_PKEY *pkey = k->_pkey;

    switch (k->alg) {
    case JWT_ALG_HS256:
        return verify_hs256(k, p->seg[0], n, p->dec[2], p->dec_len[2]);
    case JWT_ALG_RS256:
        if (p->dec_len[2] != (size_t)EVP_PKEY_get_size(pkey))
            return JWT_E_SIGNATURE;
        return verify_digest(pkey, p->seg[0], n, p->dec[2], p->dec_len[2]);
    case JWT_ALG_ES256:
        return verify_es256(pkey, p->seg[0], n, p->dec[2], p->dec_len[2]);
    default:
        return JWT_E_KEY;
    }
}

/* ---- claims ---- */

static int read_times(const cJSON *pl, const struct jwt_opts *o, int64_t now, struct jwt_claims *c)
{
    int64_t lw = o != NULL ? o->leeway_s : -1;
    int nbf, iat;

    if (lw < 0)
        lw = JWT_LEEWAY_DEFAULT;
    if (lw > JWT_LEEWAY_MAX)
        lw = JWT_LEEWAY_MAX;
    if (int_claim(pl, "exp", &c->exp) != 1)
        return JWT_E_TIME;
    nbf = int_claim(pl, "nbf", &c->nbf);
    iat = int_claim(pl, "iat", &c->iat);
    if (nbf < 0 || iat < 0)
        return JWT_E_TIME;
    c->has_nbf = nbf == 1;
    c->has_iat = iat == 1;
    /* All three are within +-2^53 and lw <= 60: no overflow. */
    if (c->exp + lw <= now)
        return JWT_E_EXPIRED;
    if ((c->has_nbf && c->nbf - lw > now) || (c->has_iat && c->iat - lw > now))
        return JWT_E_NOT_YET;
    return 0;
}

/* RFC 7519 4.1.3: a present "aud" must name us, so with no audience
 * configured a token that has one is refused too. */
static int read_aud_iss(const cJSON *pl, const struct jwt_opts *o)
{
    const cJSON *aud = cJSON_GetObjectItemCaseSensitive(pl, "aud");
    const cJSON *iss = cJSON_GetObjectItemCaseSensitive(pl, "iss");
    const char *want_aud = o != NULL ? o->aud : NULL;
    const char *want_iss = o != NULL ? o->iss : NULL;
    const cJSON *it;
    bool found = false;

    if (aud != NULL || want_aud != NULL) {
        if (want_aud == NULL || aud == NULL)
            return JWT_E_AUD;
        if (cJSON_IsString(aud)) {
            found = strcmp(aud->valuestring, want_aud) == 0;
        } else if (cJSON_IsArray(aud)) {
            cJSON_ArrayForEach(it, aud)
            {
                if (!cJSON_IsString(it))
                    return JWT_E_AUD;
                found = found || strcmp(it->valuestring, want_aud) == 0;
            }
        }
        if (!found)
            return JWT_E_AUD;
    }
    if (iss != NULL && !cJSON_IsString(iss))
        return JWT_E_ISS;
    if (want_iss != NULL && (iss == NULL || strcmp(iss->valuestring, want_iss) != 0))
        return JWT_E_ISS;
    return 0;
}

static int read_extras(const cJSON *pl, struct jwt_claims *c)
{
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(pl, "device");
    const cJSON *rooms = cJSON_GetObjectItemCaseSensitive(pl, "rooms");
    const cJSON *it;

    if (dev != NULL) {
        if (!cJSON_IsString(dev) || !id_valid(dev->valuestring, false))
            return JWT_E_CLAIM;
        strcpy(c->device, dev->valuestring);
        c->has_device = true;
    }
    if (rooms == NULL)
        return 0;
    if (!cJSON_IsArray(rooms) || cJSON_GetArraySize(rooms) > (int)JWT_ROOMS_MAX)
        return JWT_E_CLAIM;
    cJSON_ArrayForEach(it, rooms)
    {
        if (!cJSON_IsString(it) || !id_valid(it->valuestring, true))
            return JWT_E_CLAIM;
        strcpy(c->rooms[c->nrooms++], it->valuestring);
    }
    c->has_rooms = true;
    return 0;
}

static int read_claims(const struct parts *p, const struct jwt_opts *o, int64_t now,
                       struct jwt_claims *c)
{
    const cJSON *sub;
    cJSON *pl = json_object(p->dec[1], p->dec_len[1]);
    int rc;

    if (pl == NULL)
        return JWT_E_PAYLOAD;
    sub = cJSON_GetObjectItemCaseSensitive(pl, "sub");
    if (!cJSON_IsString(sub) || !id_valid(sub->valuestring, false)) {
        rc = JWT_E_SUB;
        goto out_json;
    }
    strcpy(c->sub, sub->valuestring);
    rc = read_times(pl, o, now, c);
    if (rc == 0)
        rc = read_aud_iss(pl, o);
    if (rc == 0)
        rc = read_extras(pl, c);
out_json:
    cJSON_Delete(pl);
    return rc;
}

/* ---- public ---- */

int jwt_key_load_hmac(struct jwt_key *k, const void *secret, size_t n)
{
    memset(k, 0, sizeof(*k));
    if (secret == NULL || n < JWT_HMAC_MIN || n > JWT_HMAC_MAX)
        return JWT_E_KEY;
    k->_secret = xmalloc(n);
    memcpy(k->_secret, secret, n);
    k->_secret_len = n;
    k->alg = JWT_ALG_HS256;
    return 0;
}

/* Which algorithm a public key may verify, or JWT_ALG_UNSET (with err). */
static enum jwt_alg pkey_alg(EVP_PKEY *pkey, const char *path, char *err, size_t errlen)
{
    EVP_PKEY_CTX *ctx;
    char group[64];
    size_t glen = 0;
    enum jwt_alg alg = JWT_ALG_UNSET;

    if (EVP_PKEY_get_base_id(pkey) == EVP_PKEY_RSA) {
        if (EVP_PKEY_get_bits(pkey) >= JWT_RSA_MIN_BITS)
            alg = JWT_ALG_RS256;
        else
            set_err(err, errlen, "RSA key in %s has %d bits, at least %d needed", path,
                    EVP_PKEY_get_bits(pkey), JWT_RSA_MIN_BITS);
    } else if (EVP_PKEY_get_base_id(pkey) == EVP_PKEY_EC) {
        if (EVP_PKEY_get_group_name(pkey, group, sizeof(group), &glen) == 1 &&
            (strcmp(group, "prime256v1") == 0 || strcmp(group, "P-256") == 0))
            alg = JWT_ALG_ES256;
        else
            set_err(err, errlen, "EC key in %s is not on P-256", path);
    } else {
        set_err(err, errlen, "key in %s is neither RSA nor EC P-256", path);
    }
    if (alg == JWT_ALG_UNSET)
        return alg;
    ctx = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
    if (ctx == NULL || EVP_PKEY_public_check(ctx) != 1) {
        set_err(err, errlen, "public key in %s fails its consistency check", path);
        alg = JWT_ALG_UNSET;
    }
    EVP_PKEY_CTX_free(ctx);
    return alg;
}

int jwt_key_load_pem(struct jwt_key *k, const char *path, char *err, size_t errlen)
{
    EVP_PKEY *pkey;
    BIO *bio;
    enum jwt_alg alg;

    memset(k, 0, sizeof(*k));
    bio = BIO_new_file(path, "r");
    if (bio == NULL) {
        set_err(err, errlen, "cannot open %s: %s", path, strerror(errno));
        ERR_clear_error();
        return JWT_E_KEY;
    }
    pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (pkey == NULL) {
        set_err(err, errlen, "cannot read a PEM public key from %s", path);
        ERR_clear_error();
        return JWT_E_KEY;
    }
    alg = pkey_alg(pkey, path, err, errlen);
    ERR_clear_error();
    if (alg == JWT_ALG_UNSET) {
        EVP_PKEY_free(pkey);
        return JWT_E_KEY;
    }
    k->_pkey = pkey;
    k->alg = alg;
    return 0;
}

void jwt_key_release(struct jwt_key *k)
{
    if (k == NULL)
        return;
    if (k->_secret != NULL) {
        OPENSSL_cleanse(k->_secret, k->_secret_len);
        free(k->_secret);
    }
    EVP_PKEY_free(k->_pkey);
    memset(k, 0, sizeof(*k));
}

int jwt_verify(const struct jwt_key *k, const struct jwt_opts *o, const char *token, size_t len,
               int64_t now_s, struct jwt_claims *out)
{
    struct parts p;
    unsigned char *buf;
    int rc;

    memset(out, 0, sizeof(*out));
    if (k == NULL || alg_name(k->alg) == NULL)
        return JWT_E_KEY;
    if (token == NULL || len == 0 || len > JWT_MAX_LEN)
        return JWT_E_LENGTH;
    /* Decoded segments take at most 3/4 of len, plus three NULs. */
    buf = xmalloc(len + 3);
    rc = split_decode(token, len, buf, &p);
    if (rc == 0)
        rc = check_header(&p, k->alg);
    if (rc == 0)
        rc = check_signature(k, &p);
    if (rc == 0)
        rc = read_claims(&p, o, now_s, out);
    free(buf);
    if (rc != 0)
        memset(out, 0, sizeof(*out));
    return rc;
}

const char *jwt_strerror(int err)
{
    return err == 0 ? "ok" : "invalid token";
}

const char *jwt_reason(int err)
{
    switch (err) {
    case 0:
        return "ok";
    case JWT_E_KEY:
        return "no usable key";
    case JWT_E_LENGTH:
        return "token empty or too long";
    case JWT_E_FORMAT:
        return "not three non-empty segments";
    case JWT_E_BASE64:
        return "segment is not strict base64url";
    case JWT_E_HEADER:
        return "header is not a valid JSON object";
    case JWT_E_ALG:
        return "alg missing or not the key's algorithm";
    case JWT_E_TYP:
        return "typ is not JWT";
    case JWT_E_HEADER_PARAM:
        return "forbidden header parameter";
    case JWT_E_SIGNATURE:
        return "bad signature";
    case JWT_E_PAYLOAD:
        return "payload is not a valid JSON object";
    case JWT_E_SUB:
        return "sub missing or invalid";
    case JWT_E_TIME:
        return "exp missing, or exp/nbf/iat not an integer";
    case JWT_E_EXPIRED:
        return "token expired";
    case JWT_E_NOT_YET:
        return "token not yet valid";
    case JWT_E_AUD:
        return "audience mismatch";
    case JWT_E_ISS:
        return "issuer mismatch";
    case JWT_E_CLAIM:
        return "device or rooms claim invalid";
    default:
        return "unknown error";
    }
}

/* Does pattern (an exact id, or a prefix ending in '*') admit room? */
static bool room_matches(const char *pattern, const char *room)
{
    size_t n = strlen(pattern);

    if (n > 0 && pattern[n - 1] == '*')
        return strncmp(room, pattern, n - 1) == 0;
    return strcmp(room, pattern) == 0;
}

char *jwt_rooms_pack(const struct jwt_claims *c)
{
    size_t len = 1, off = 0;
    char *out;

    for (size_t i = 0; i < c->nrooms; i++)
        len += strlen(c->rooms[i]) + 1;
    out = xmalloc(len);
    for (size_t i = 0; i < c->nrooms; i++) {
        size_t n = strlen(c->rooms[i]) + 1;
        memcpy(out + off, c->rooms[i], n);
        off += n;
    }
    out[off] = '\0';
    return out;
}

bool jwt_rooms_allow(const char *packed, const char *room)
{
    if (packed == NULL || room == NULL || !id_valid(room, false))
        return false;
    for (const char *p = packed; *p; p += strlen(p) + 1)
        if (room_matches(p, room))
            return true;
    return false;
}

bool jwt_claims_allow_room(const struct jwt_claims *c, const char *room)
{
    if (c == NULL || room == NULL || !id_valid(room, false))
        return false;
    for (size_t i = 0; i < c->nrooms; i++)
        if (room_matches(c->rooms[i], room))
            return true;
    return false;
}
