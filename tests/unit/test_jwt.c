/* SPDX-License-Identifier: MIT */
/*
 * test_jwt.c - JWT verification: tokens are built here with libcrypto
 * (HS256, RS256 with a generated RSA 2048 key, ES256 with a generated P-256
 * key whose public halves are written to a temp dir and loaded as PEM).
 * A positive case per algorithm, the leeway edges, the negative matrix
 * (every row rejected with its own code and the one client message), every
 * prefix of a valid token, key loading, and room matching. Every token is
 * read from the end of a page followed by a PROT_NONE page.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include "guard.h"
#include "jwt.h"

#define NOW       1700000000
#define EXP_OK    "1700003600"
#define HS_SECRET "test-only-secret-0123456789abcdef!!"

#define HDR_HS "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"
#define HDR_RS "{\"alg\":\"RS256\",\"typ\":\"JWT\"}"
#define HDR_ES "{\"alg\":\"ES256\",\"typ\":\"JWT\"}"
#define PAY_OK                                                                                 \
    "{\"sub\":\"user-1\",\"exp\":" EXP_OK ",\"iat\":1700000000,\"device\":\"web\",\"rooms\":[" \
    "\"lobby\",\"team:*\"]}"
#define PAY(extra) "{\"sub\":\"user-1\",\"exp\":" EXP_OK extra "}"

enum key_id { K_HS, K_RS, K_ES, K_COUNT };

enum signer {
    SIGN_HS,       /* HMAC-SHA256 with HS_SECRET */
    SIGN_RS,       /* RSA PKCS#1 v1.5 SHA-256 */
    SIGN_ES,       /* ECDSA P-256, JOSE raw r || s */
    SIGN_ES_DER,   /* ECDSA P-256, DER (wrong for JOSE) */
    SIGN_NONE,     /* empty signature */
    SIGN_CONFUSE,  /* HMAC with the RSA public key PEM as secret */
    SIGN_ZERO,     /* 64 zero bytes ("psychic signature") */
    SIGN_HS_SHORT, /* HMAC minus its last byte */
    SIGN_HS_LONG,  /* HMAC plus one byte */
    SIGN_RS_SHORT, /* RSA signature minus its last byte */
};

static struct {
    char dir[64];
    char pem_path[K_COUNT][96];
    EVP_PKEY *priv[K_COUNT];
    struct jwt_key key[K_COUNT];
    unsigned char *rs_pem;
    size_t rs_pem_len;
} g;

/* ---- token building ---- */

static char *b64url(const void *p, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const unsigned char *s = p;
    char *out = malloc(n * 4 / 3 + 4), *o = out;
    size_t i;

    for (i = 0; i + 2 < n; i += 3) {
        *o++ = abc[s[i] >> 2];
        *o++ = abc[((s[i] & 3) << 4) | (s[i + 1] >> 4)];
        *o++ = abc[((s[i + 1] & 15) << 2) | (s[i + 2] >> 6)];
        *o++ = abc[s[i + 2] & 63];
    }
    if (n - i == 1) {
        *o++ = abc[s[i] >> 2];
        *o++ = abc[(s[i] & 3) << 4];
    } else if (n - i == 2) {
        *o++ = abc[s[i] >> 2];
        *o++ = abc[((s[i] & 3) << 4) | (s[i + 1] >> 4)];
        *o++ = abc[(s[i + 1] & 15) << 2];
    }
    *o = '\0';
    return out;
}

static size_t digest_sign(EVP_PKEY *pkey, const char *data, unsigned char *sig, size_t cap)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    size_t n = cap;

    assert_non_null(ctx);
    assert_int_equal(EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, pkey), 1);
    assert_int_equal(EVP_DigestSign(ctx, sig, &n, (const unsigned char *)data, strlen(data)), 1);
    EVP_MD_CTX_free(ctx);
    return n;
}

static size_t es_raw(const unsigned char *der, size_t n, unsigned char *raw)
{
    const unsigned char *p = der;
    ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)n);

    assert_non_null(es);
    BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32);
    BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32);
    ECDSA_SIG_free(es);
    return 64;
}

static size_t hmac(const void *key, size_t klen, const char *data, unsigned char *sig)
{
    unsigned int n = 0;

    HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)data, strlen(data), sig, &n);
    return n;
}

static size_t sign(enum signer s, const char *input, unsigned char *sig)
{
    unsigned char der[600];
    size_t n;

    switch (s) {
    case SIGN_HS:
        return hmac(HS_SECRET, strlen(HS_SECRET), input, sig);
    case SIGN_HS_SHORT:
        return hmac(HS_SECRET, strlen(HS_SECRET), input, sig) - 1;
    case SIGN_HS_LONG:
        n = hmac(HS_SECRET, strlen(HS_SECRET), input, sig);
        sig[n] = 'x';
        return n + 1;
    case SIGN_RS:
        return digest_sign(g.priv[K_RS], input, sig, 512);
    case SIGN_RS_SHORT:
        return digest_sign(g.priv[K_RS], input, sig, 512) - 1;
    case SIGN_ES:
        n = digest_sign(g.priv[K_ES], input, der, sizeof(der));
        return es_raw(der, n, sig);
    case SIGN_ES_DER:
        return digest_sign(g.priv[K_ES], input, sig, 512);
    case SIGN_CONFUSE:
        return hmac(g.rs_pem, g.rs_pem_len, input, sig);
    case SIGN_ZERO:
        memset(sig, 0, 64);
        return 64;
    case SIGN_NONE:
    default:
        return 0;
    }
}

/* "b64(hdr).b64(pay).b64(sig)"; malloc'd. */
static char *tok(const char *hdr, const char *pay, enum signer s)
{
    char *h = b64url(hdr, strlen(hdr)), *p = b64url(pay, strlen(pay)), *sg, *out;
    size_t in_len = strlen(h) + strlen(p) + 2;
    char *input = malloc(in_len);
    unsigned char sig[600];
    size_t n;

    snprintf(input, in_len, "%s.%s", h, p);
    n = sign(s, input, sig);
    sg = b64url(sig, n);
    out = malloc(in_len + strlen(sg) + 1);
    snprintf(out, in_len + strlen(sg) + 1, "%s.%s", input, sg);
    free(h);
    free(p);
    free(input);
    free(sg);
    return out;
}

/* Replaces the signature of a with that of b (both malloc'd; frees b). */
static char *swap_sig(char *a, char *b)
{
    char *out = malloc(strlen(a) + strlen(b) + 1);

    strcpy(out, a);
    strcpy(strrchr(out, '.'), strrchr(b, '.'));
    free(a);
    free(b);
    return out;
}

/* Verification of (t, n) from a guard-page buffer. */
static int verify_n(enum key_id k, const struct jwt_opts *o, const char *t, size_t n,
                    struct jwt_claims *c)
{
    struct guard gd = guard_place(t, n);
    int rc = jwt_verify(&g.key[k], o, gd.data, n, NOW, c);

    guard_free(&gd);
    return rc;
}

static int verify(enum key_id k, const struct jwt_opts *o, const char *t, struct jwt_claims *c)
{
    return verify_n(k, o, t, strlen(t), c);
}

/* ---- setup ---- */

static void write_pub(EVP_PKEY *pkey, const char *path)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    assert_int_equal(PEM_write_PUBKEY(f, pkey), 1);
    fclose(f);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = malloc(8192);

    assert_non_null(f);
    *n = fread(buf, 1, 8192, f);
    fclose(f);
    return buf;
}

static int setup(void **state)
{
    (void)state;
    strcpy(g.dir, "/tmp/test_jwt.XXXXXX");
    if (mkdtemp(g.dir) == NULL)
        return -1;
    g.priv[K_RS] = EVP_RSA_gen(2048);
    g.priv[K_ES] = EVP_EC_gen("P-256");
    if (g.priv[K_RS] == NULL || g.priv[K_ES] == NULL)
        return -1;
    snprintf(g.pem_path[K_RS], sizeof(g.pem_path[K_RS]), "%s/rs256.pub.pem", g.dir);
    snprintf(g.pem_path[K_ES], sizeof(g.pem_path[K_ES]), "%s/es256.pub.pem", g.dir);
    write_pub(g.priv[K_RS], g.pem_path[K_RS]);
    write_pub(g.priv[K_ES], g.pem_path[K_ES]);
    g.rs_pem = slurp(g.pem_path[K_RS], &g.rs_pem_len);
    if (jwt_key_load_hmac(&g.key[K_HS], HS_SECRET, strlen(HS_SECRET)) != 0 ||
        jwt_key_load_pem(&g.key[K_RS], g.pem_path[K_RS], NULL, 0) != 0 ||
        jwt_key_load_pem(&g.key[K_ES], g.pem_path[K_ES], NULL, 0) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    int i;

    (void)state;
    for (i = 0; i < K_COUNT; i++) {
        jwt_key_release(&g.key[i]);
        EVP_PKEY_free(g.priv[i]);
        if (g.pem_path[i][0])
            unlink(g.pem_path[i]);
    }
    free(g.rs_pem);
    rmdir(g.dir);
    return 0;
}

/* ---- positive cases ---- */

static void check_ok(enum key_id k, const char *t)
{
    struct jwt_claims c;

    assert_int_equal(verify(k, NULL, t, &c), 0);
    assert_string_equal(c.sub, "user-1");
    assert_int_equal(c.exp, 1700003600);
    assert_true(c.has_iat);
    assert_false(c.has_nbf);
    assert_string_equal(c.device, "web");
    assert_int_equal(c.nrooms, 2);
    assert_string_equal(c.rooms[1], "team:*");
}

static void test_hs256_ok(void **state)
{
    char *t = tok(HDR_HS, PAY_OK, SIGN_HS);

    (void)state;
    check_ok(K_HS, t);
    free(t);
}

static void test_rs256_ok(void **state)
{
    char *t = tok(HDR_RS, PAY_OK, SIGN_RS);

    (void)state;
    check_ok(K_RS, t);
    free(t);
}

static void test_es256_ok(void **state)
{
    char *t = tok(HDR_ES, PAY_OK, SIGN_ES);

    (void)state;
    check_ok(K_ES, t);
    free(t);
}

static void test_optional_header_and_claims(void **state)
{
    struct jwt_claims c;
    char *t1 =
        tok("{\"alg\":\"HS256\"}", "{\"sub\":\"a:b@c.d~e_f-9\",\"exp\":" EXP_OK "}", SIGN_HS);
    char *t2 = tok("{\"alg\":\"HS256\",\"typ\":\"jwt\"}",
                   PAY(",\"nbf\":1700000000,\"x\":{\"y\":[1]}"), SIGN_HS);

    (void)state;
    assert_int_equal(verify(K_HS, NULL, t1, &c), 0);
    assert_string_equal(c.sub, "a:b@c.d~e_f-9");
    assert_false(c.has_device);
    assert_false(c.has_rooms);
    assert_int_equal(verify(K_HS, NULL, t2, &c), 0);
    assert_true(c.has_nbf);
    free(t1);
    free(t2);
}

static void test_leeway_edges(void **state)
{
    struct jwt_opts zero = {.leeway_s = 0}, big = {.leeway_s = 3600};
    struct jwt_claims c;
    char *in = tok(HDR_HS, "{\"sub\":\"u\",\"exp\":1699999971}", SIGN_HS);  /* now - 29 */
    char *out = tok(HDR_HS, "{\"sub\":\"u\",\"exp\":1699999970}", SIGN_HS); /* now - 30 */
    char *nbf = tok(HDR_HS, PAY(",\"nbf\":1700000030,\"iat\":1700000030"), SIGN_HS);
    char *clamp = tok(HDR_HS, "{\"sub\":\"u\",\"exp\":1699999941}", SIGN_HS); /* now - 59 */
    char *past = tok(HDR_HS, "{\"sub\":\"u\",\"exp\":1699999940}", SIGN_HS);  /* now - 60 */

    (void)state;
    assert_int_equal(verify(K_HS, NULL, in, &c), 0);
    assert_int_equal(verify(K_HS, NULL, out, &c), JWT_E_EXPIRED);
    assert_int_equal(verify(K_HS, NULL, nbf, &c), 0);
    assert_int_equal(verify(K_HS, &zero, in, &c), JWT_E_EXPIRED);
    assert_int_equal(verify(K_HS, &zero, nbf, &c), JWT_E_NOT_YET);
    assert_int_equal(verify(K_HS, &big, clamp, &c), 0);
    assert_int_equal(verify(K_HS, &big, past, &c), JWT_E_EXPIRED);
    free(in);
    free(out);
    free(nbf);
    free(clamp);
    free(past);
}

static void test_aud_iss_ok(void **state)
{
    struct jwt_opts o = {.leeway_s = -1, .aud = "presenced", .iss = "https://idp.example"};
    struct jwt_claims c;
    char *t1 = tok(HDR_HS, PAY(",\"aud\":\"presenced\",\"iss\":\"https://idp.example\""), SIGN_HS);
    char *t2 =
        tok(HDR_HS, PAY(",\"aud\":[\"x\",\"presenced\"],\"iss\":\"https://idp.example\""), SIGN_HS);

    (void)state;
    assert_int_equal(verify(K_HS, &o, t1, &c), 0);
    assert_int_equal(verify(K_HS, &o, t2, &c), 0);
    free(t1);
    free(t2);
}

/* The largest token within JWT_MAX_LEN verifies; one over is refused. */
static void test_size_limit(void **state)
{
    char pay[8192], *t = NULL;
    size_t pad, prev_len = 0;
    struct jwt_claims c;

    (void)state;
    for (pad = 6000;; pad++) {
        int n = snprintf(pay, sizeof(pay), "{\"sub\":\"u\",\"exp\":" EXP_OK ",\"pad\":\"%*s\"}",
                         (int)pad, "");

        assert_true(n > 0 && (size_t)n < sizeof(pay));
        free(t);
        t = tok(HDR_HS, pay, SIGN_HS);
        if (strlen(t) > JWT_MAX_LEN)
            break;
        prev_len = strlen(t);
        assert_int_equal(verify(K_HS, NULL, t, &c), 0);
    }
    assert_true(prev_len > JWT_MAX_LEN - 4);
    assert_int_equal(verify(K_HS, NULL, t, &c), JWT_E_LENGTH);
    free(t);
}

/* ---- negative matrix ---- */

struct neg {
    const char *name;
    enum key_id key;
    const char *hdr;
    const char *pay;
    enum signer s;
    int want;
    const struct jwt_opts *opts;
};

static const struct jwt_opts opts_aud = {.leeway_s = -1, .aud = "presenced"};
static const struct jwt_opts opts_iss = {.leeway_s = -1, .iss = "https://idp.example"};

static const struct neg neg_json[] = {
    {"alg none, empty sig", K_HS, "{\"alg\":\"none\"}", PAY_OK, SIGN_NONE, JWT_E_FORMAT, NULL},
    {"alg none, HS sig", K_HS, "{\"alg\":\"none\"}", PAY_OK, SIGN_HS, JWT_E_ALG, NULL},
    {"alg None", K_HS, "{\"alg\":\"None\"}", PAY_OK, SIGN_HS, JWT_E_ALG, NULL},
    {"alg NONE", K_RS, "{\"alg\":\"NONE\"}", PAY_OK, SIGN_RS, JWT_E_ALG, NULL},
    {"alg missing", K_HS, "{\"typ\":\"JWT\"}", PAY_OK, SIGN_HS, JWT_E_ALG, NULL},
    {"alg number", K_HS, "{\"alg\":256}", PAY_OK, SIGN_HS, JWT_E_ALG, NULL},
    {"alg lowercase", K_HS, "{\"alg\":\"hs256\"}", PAY_OK, SIGN_HS, JWT_E_ALG, NULL},
    {"key confusion HS256 with RSA PEM", K_RS, HDR_HS, PAY_OK, SIGN_CONFUSE, JWT_E_ALG, NULL},
    {"HS256 token on EC key", K_ES, HDR_HS, PAY_OK, SIGN_HS, JWT_E_ALG, NULL},
    {"RS256 token on HS key", K_HS, HDR_RS, PAY_OK, SIGN_RS, JWT_E_ALG, NULL},
    {"ES256 token on HS key", K_HS, HDR_ES, PAY_OK, SIGN_ES, JWT_E_ALG, NULL},
    {"ES256 token on RS key", K_RS, HDR_ES, PAY_OK, SIGN_ES, JWT_E_ALG, NULL},
    {"RS256 token on ES key", K_ES, HDR_RS, PAY_OK, SIGN_RS, JWT_E_ALG, NULL},
    {"ES256 DER signature", K_ES, HDR_ES, PAY_OK, SIGN_ES_DER, JWT_E_SIGNATURE, NULL},
    {"ES256 zero signature", K_ES, HDR_ES, PAY_OK, SIGN_ZERO, JWT_E_SIGNATURE, NULL},
    {"HS truncated signature", K_HS, HDR_HS, PAY_OK, SIGN_HS_SHORT, JWT_E_SIGNATURE, NULL},
    {"HS extended signature", K_HS, HDR_HS, PAY_OK, SIGN_HS_LONG, JWT_E_SIGNATURE, NULL},
    {"RS truncated signature", K_RS, HDR_RS, PAY_OK, SIGN_RS_SHORT, JWT_E_SIGNATURE, NULL},
    {"expired", K_HS, HDR_HS, "{\"sub\":\"u\",\"exp\":1699999000}", SIGN_HS, JWT_E_EXPIRED, NULL},
    {"nbf in the future", K_HS, HDR_HS, PAY(",\"nbf\":1700000031"), SIGN_HS, JWT_E_NOT_YET, NULL},
    {"iat in the future", K_HS, HDR_HS, PAY(",\"iat\":1700000031"), SIGN_HS, JWT_E_NOT_YET, NULL},
    {"sub missing", K_HS, HDR_HS, "{\"exp\":" EXP_OK "}", SIGN_HS, JWT_E_SUB, NULL},
    {"exp missing", K_HS, HDR_HS, "{\"sub\":\"u\"}", SIGN_HS, JWT_E_TIME, NULL},
    {"sub number", K_HS, HDR_HS, "{\"sub\":42,\"exp\":" EXP_OK "}", SIGN_HS, JWT_E_SUB, NULL},
    {"sub empty", K_HS, HDR_HS, "{\"sub\":\"\",\"exp\":" EXP_OK "}", SIGN_HS, JWT_E_SUB, NULL},
    {"sub space", K_HS, HDR_HS, "{\"sub\":\"a b\",\"exp\":" EXP_OK "}", SIGN_HS, JWT_E_SUB, NULL},
    {"sub slash", K_HS, HDR_HS, "{\"sub\":\"../x\",\"exp\":" EXP_OK "}", SIGN_HS, JWT_E_SUB, NULL},
    {"sub non-ASCII", K_HS, HDR_HS, "{\"sub\":\"j\xc3\xa9\",\"exp\":" EXP_OK "}", SIGN_HS,
     JWT_E_SUB, NULL},
    {"sub 129 bytes", K_HS, HDR_HS,
     "{\"sub\":\"0123456789012345678901234567890123456789012345678901234567890123"
     "45678901234567890123456789012345678901234567890123456789012345678\",\"exp\":" EXP_OK "}",
     SIGN_HS, JWT_E_SUB, NULL},
    {"sub with \\u0000", K_HS, HDR_HS, "{\"sub\":\"adm\\u0000x\",\"exp\":" EXP_OK "}", SIGN_HS,
     JWT_E_PAYLOAD, NULL},
    {"exp string", K_HS, HDR_HS, "{\"sub\":\"u\",\"exp\":\"" EXP_OK "\"}", SIGN_HS, JWT_E_TIME,
     NULL},
    {"exp float", K_HS, HDR_HS, "{\"sub\":\"u\",\"exp\":1700003600.5}", SIGN_HS, JWT_E_TIME, NULL},
    {"exp 1e300", K_HS, HDR_HS, "{\"sub\":\"u\",\"exp\":1e300}", SIGN_HS, JWT_E_TIME, NULL},
    {"exp 1e400 (inf)", K_HS, HDR_HS, "{\"sub\":\"u\",\"exp\":1e400}", SIGN_HS, JWT_E_TIME, NULL},
    {"exp 2^53+2", K_HS, HDR_HS, "{\"sub\":\"u\",\"exp\":9007199254740994}", SIGN_HS, JWT_E_TIME,
     NULL},
    {"exp -huge", K_HS, HDR_HS, "{\"sub\":\"u\",\"exp\":-1e20}", SIGN_HS, JWT_E_TIME, NULL},
    {"exp true", K_HS, HDR_HS, "{\"sub\":\"u\",\"exp\":true}", SIGN_HS, JWT_E_TIME, NULL},
    {"nbf string", K_HS, HDR_HS, PAY(",\"nbf\":\"0\""), SIGN_HS, JWT_E_TIME, NULL},
    {"crit header", K_HS, "{\"alg\":\"HS256\",\"crit\":[\"exp\"],\"exp\":1}", PAY_OK, SIGN_HS,
     JWT_E_HEADER_PARAM, NULL},
    {"kid header", K_HS, "{\"alg\":\"HS256\",\"kid\":\"../../etc/passwd\"}", PAY_OK, SIGN_HS,
     JWT_E_HEADER_PARAM, NULL},
    {"jku header", K_RS, "{\"alg\":\"RS256\",\"jku\":\"https://evil/jwks\"}", PAY_OK, SIGN_RS,
     JWT_E_HEADER_PARAM, NULL},
    {"jwk header", K_ES, "{\"alg\":\"ES256\",\"jwk\":{\"kty\":\"EC\"}}", PAY_OK, SIGN_ES,
     JWT_E_HEADER_PARAM, NULL},
    {"x5u header", K_RS, "{\"alg\":\"RS256\",\"x5u\":\"https://evil/c\"}", PAY_OK, SIGN_RS,
     JWT_E_HEADER_PARAM, NULL},
    {"x5c header", K_RS, "{\"alg\":\"RS256\",\"x5c\":[\"AAAA\"]}", PAY_OK, SIGN_RS,
     JWT_E_HEADER_PARAM, NULL},
    {"cty JWT (nested)", K_HS, "{\"alg\":\"HS256\",\"cty\":\"JWT\"}", PAY_OK, SIGN_HS,
     JWT_E_HEADER_PARAM, NULL},
    {"typ xyz", K_HS, "{\"alg\":\"HS256\",\"typ\":\"xyz\"}", PAY_OK, SIGN_HS, JWT_E_TYP, NULL},
    {"typ number", K_HS, "{\"alg\":\"HS256\",\"typ\":1}", PAY_OK, SIGN_HS, JWT_E_TYP, NULL},
    {"header array", K_HS, "[\"HS256\"]", PAY_OK, SIGN_HS, JWT_E_HEADER, NULL},
    {"header string", K_HS, "\"HS256\"", PAY_OK, SIGN_HS, JWT_E_HEADER, NULL},
    {"header not JSON", K_HS, "{\"alg\":\"HS256\"", PAY_OK, SIGN_HS, JWT_E_HEADER, NULL},
    {"header trailing garbage", K_HS, "{\"alg\":\"HS256\"} x", PAY_OK, SIGN_HS, JWT_E_HEADER, NULL},
    {"duplicate alg", K_HS, "{\"alg\":\"HS256\",\"alg\":\"HS256\"}", PAY_OK, SIGN_HS, JWT_E_HEADER,
     NULL},
    {"duplicate alg none", K_HS, "{\"alg\":\"HS256\",\"alg\":\"none\"}", PAY_OK, SIGN_HS,
     JWT_E_HEADER, NULL},
    {"header bad UTF-8", K_HS, "{\"alg\":\"HS256\",\"x\":\"\xc0\xaf\"}", PAY_OK, SIGN_HS,
     JWT_E_HEADER, NULL},
    {"payload array", K_HS, HDR_HS, "[{\"sub\":\"u\",\"exp\":" EXP_OK "}]", SIGN_HS, JWT_E_PAYLOAD,
     NULL},
    {"payload null", K_HS, HDR_HS, "null", SIGN_HS, JWT_E_PAYLOAD, NULL},
    {"payload trailing garbage", K_HS, HDR_HS, PAY("") "}", SIGN_HS, JWT_E_PAYLOAD, NULL},
    {"duplicate sub", K_HS, HDR_HS, "{\"sub\":\"user-1\",\"sub\":\"admin\",\"exp\":" EXP_OK "}",
     SIGN_HS, JWT_E_PAYLOAD, NULL},
    {"duplicate nested key", K_HS, HDR_HS, PAY(",\"x\":[{\"a\":1,\"a\":2}]"), SIGN_HS,
     JWT_E_PAYLOAD, NULL},
    {"payload bad UTF-8", K_HS, HDR_HS, PAY(",\"x\":\"\xff\""), SIGN_HS, JWT_E_PAYLOAD, NULL},
    {"payload surrogate", K_HS, HDR_HS, PAY(",\"x\":\"\xed\xa0\x80\""), SIGN_HS, JWT_E_PAYLOAD,
     NULL},
    {"payload lone \\ud800", K_HS, HDR_HS, PAY(",\"x\":\"\\ud800\""), SIGN_HS, JWT_E_PAYLOAD, NULL},
    {"aud mismatch", K_HS, HDR_HS, PAY(",\"aud\":\"other\""), SIGN_HS, JWT_E_AUD, &opts_aud},
    {"aud array mismatch", K_HS, HDR_HS, PAY(",\"aud\":[\"a\",\"b\"]"), SIGN_HS, JWT_E_AUD,
     &opts_aud},
    {"aud missing", K_HS, HDR_HS, PAY_OK, SIGN_HS, JWT_E_AUD, &opts_aud},
    {"aud number", K_HS, HDR_HS, PAY(",\"aud\":1"), SIGN_HS, JWT_E_AUD, &opts_aud},
    {"aud unconfigured", K_HS, HDR_HS, PAY(",\"aud\":\"presenced\""), SIGN_HS, JWT_E_AUD, NULL},
    {"iss mismatch", K_HS, HDR_HS, PAY(",\"iss\":\"https://evil\""), SIGN_HS, JWT_E_ISS, &opts_iss},
    {"iss missing", K_HS, HDR_HS, PAY_OK, SIGN_HS, JWT_E_ISS, &opts_iss},
    {"device number", K_HS, HDR_HS, PAY(",\"device\":5"), SIGN_HS, JWT_E_CLAIM, NULL},
    {"rooms string", K_HS, HDR_HS, PAY(",\"rooms\":\"lobby\""), SIGN_HS, JWT_E_CLAIM, NULL},
    {"rooms star inside", K_HS, HDR_HS, PAY(",\"rooms\":[\"a*b\"]"), SIGN_HS, JWT_E_CLAIM, NULL},
    {"rooms 33 entries", K_HS, HDR_HS,
     PAY(",\"rooms\":[\"0\",\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"a\",\"b\","
         "\"c\","
         "\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\","
         "\"r\","
         "\"s\",\"t\",\"u\",\"v\",\"w\"]"),
     SIGN_HS, JWT_E_CLAIM, NULL},
};

static void check_rejected(const char *name, int rc, int want)
{
    if (rc != want)
        fail_msg("%s: got %d (%s), want %d (%s)", name, rc, jwt_reason(rc), want, jwt_reason(want));
    assert_string_equal(jwt_strerror(rc), "invalid token");
}

static void test_negative_json(void **state)
{
    struct jwt_claims c;
    size_t i;

    (void)state;
    for (i = 0; i < ARRAY_SIZE(neg_json); i++) {
        const struct neg *n = &neg_json[i];
        char *t = tok(n->hdr, n->pay, n->s);

        check_rejected(n->name, verify(n->key, n->opts, t, &c), n->want);
        assert_int_equal(c.sub[0], '\0');
        free(t);
    }
}

/* Byte-level damage to a valid HS256 token. */
static void test_negative_bytes(void **state)
{
    char *ok = tok(HDR_HS, PAY_OK, SIGN_HS), buf[9000];
    size_t n = strlen(ok), dot1 = (size_t)(strchr(ok, '.') - ok),
           dot2 = (size_t)(strrchr(ok, '.') - ok);
    struct jwt_claims c;
    char *t;
    int v;

    (void)state;
#define MUT(name, want, ...)                                                     \
    do {                                                                         \
        int len_ = snprintf(buf, sizeof(buf), __VA_ARGS__);                      \
        check_rejected(name, verify_n(K_HS, NULL, buf, (size_t)len_, &c), want); \
    } while (0)
    MUT("padding in payload", JWT_E_BASE64, "%.*s=.%s", (int)dot2, ok, ok + dot2 + 1);
    MUT("padding in signature", JWT_E_BASE64, "%s=", ok);
    MUT("whitespace inside", JWT_E_BASE64, "%.*s %s", (int)dot1 + 3, ok, ok + dot1 + 3);
    MUT("leading space", JWT_E_BASE64, " %s", ok);
    MUT("trailing newline", JWT_E_BASE64, "%s\n", ok);
    MUT("four segments", JWT_E_FORMAT, "%s.AAAA", ok);
    MUT("two segments", JWT_E_FORMAT, "%.*s", (int)dot2, ok);
    MUT("trailing dot", JWT_E_FORMAT, "%s.", ok);
    MUT("empty header", JWT_E_FORMAT, "%s", ok + dot1);
    MUT("empty payload", JWT_E_FORMAT, "%.*s.%s", (int)dot1, ok, ok + dot2);
    MUT("only dots", JWT_E_FORMAT, "..");
    MUT("no dots", JWT_E_FORMAT, "abc");
    MUT("empty token", JWT_E_LENGTH, "%s", "");
    memset(buf, 'A', JWT_MAX_LEN + 1);
    check_rejected("8193 bytes", verify_n(K_HS, NULL, buf, JWT_MAX_LEN + 1, &c), JWT_E_LENGTH);

    /* Standard base64 characters; a NUL inside and at the end. */
    strcpy(buf, ok);
    buf[n - 2] = '+';
    check_rejected("'+' in signature", verify_n(K_HS, NULL, buf, n, &c), JWT_E_BASE64);
    strcpy(buf, ok);
    buf[dot1 + 1] = '/';
    check_rejected("'/' in payload", verify_n(K_HS, NULL, buf, n, &c), JWT_E_BASE64);
    strcpy(buf, ok);
    buf[dot1 + 4] = '\0';
    check_rejected("NUL inside", verify_n(K_HS, NULL, buf, n, &c), JWT_E_BASE64);
    strcpy(buf, ok);
    check_rejected("NUL at the end", verify_n(K_HS, NULL, buf, n + 1, &c), JWT_E_BASE64);

    /* Non-canonical last character: same bytes, non-zero leftover bits. */
    strcpy(buf, ok);
    v = (int)(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
                     buf[n - 1]) -
              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_");
    buf[n - 1] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[v | 1];
    check_rejected("non-canonical base64", verify_n(K_HS, NULL, buf, n, &c), JWT_E_BASE64);

    /* Signature of another token; one flipped payload bit ("user-1" -> "user-0"). */
    t = swap_sig(tok(HDR_HS, PAY(",\"x\":1"), SIGN_HS), tok(HDR_HS, PAY_OK, SIGN_HS));
    check_rejected("signature of another token", verify(K_HS, NULL, t, &c), JWT_E_SIGNATURE);
    free(t);
    t = swap_sig(tok(HDR_HS, "{\"sub\":\"user-0\",\"exp\":" EXP_OK "}", SIGN_HS),
                 tok(HDR_HS, "{\"sub\":\"user-1\",\"exp\":" EXP_OK "}", SIGN_HS));
    check_rejected("flipped payload bit", verify(K_HS, NULL, t, &c), JWT_E_SIGNATURE);
    free(t);
    t = swap_sig(tok(HDR_RS, PAY(",\"x\":1"), SIGN_RS), tok(HDR_RS, PAY_OK, SIGN_RS));
    check_rejected("RS signature of another token", verify(K_RS, NULL, t, &c), JWT_E_SIGNATURE);
    free(t);
    t = swap_sig(tok(HDR_ES, PAY(",\"x\":1"), SIGN_ES), tok(HDR_ES, PAY_OK, SIGN_ES));
    check_rejected("ES signature of another token", verify(K_ES, NULL, t, &c), JWT_E_SIGNATURE);
    free(t);
#undef MUT
    free(ok);
}

static void test_header_too_big(void **state)
{
    char hdr[1200];
    char *t;
    struct jwt_claims c;

    (void)state;
    snprintf(hdr, sizeof(hdr), "{\"alg\":\"HS256\",\"x\":\"%1100s\"}", "");
    t = tok(hdr, PAY_OK, SIGN_HS);
    check_rejected("header over 1 KiB", verify(K_HS, NULL, t, &c), JWT_E_HEADER);
    free(t);
}

static void test_no_key(void **state)
{
    struct jwt_key zero = {0};
    struct jwt_claims c;
    char *t = tok(HDR_HS, PAY_OK, SIGN_HS);

    (void)state;
    check_rejected("zero-filled key", jwt_verify(&zero, NULL, t, strlen(t), NOW, &c), JWT_E_KEY);
    check_rejected("NULL key", jwt_verify(NULL, NULL, t, strlen(t), NOW, &c), JWT_E_KEY);
    free(t);
}

/* Every proper prefix of a valid token, of each algorithm, is refused
 * without reading past its end. */
static void test_every_prefix(void **state)
{
    char *t[K_COUNT] = {tok(HDR_HS, PAY_OK, SIGN_HS), tok(HDR_RS, PAY_OK, SIGN_RS),
                        tok(HDR_ES, PAY_OK, SIGN_ES)};
    struct jwt_claims c;
    size_t i, k;

    (void)state;
    for (k = 0; k < K_COUNT; k++) {
        for (i = 0; i < strlen(t[k]); i++)
            assert_int_not_equal(verify_n((enum key_id)k, NULL, t[k], i, &c), 0);
        assert_int_equal(verify_n((enum key_id)k, NULL, t[k], i, &c), 0);
        free(t[k]);
    }
}

/* ---- key loading ---- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_pem_refused(const char *path, const char *msg_part)
{
    struct jwt_key k;
    char err[JWT_ERR_LEN] = "";

    assert_int_equal(jwt_key_load_pem(&k, path, err, sizeof(err)), JWT_E_KEY);
    if (strstr(err, msg_part) == NULL)
        fail_msg("%s: message '%s' lacks '%s'", path, err, msg_part);
    assert_int_equal(k.alg, JWT_ALG_UNSET);
    assert_null(k._pkey);
    jwt_key_release(&k);
}

static void test_key_load(void **state)
{
    char path[128];
    EVP_PKEY *p;
    struct jwt_key k;

    (void)state;
    assert_int_equal(jwt_key_load_hmac(&k, "short", 5), JWT_E_KEY);
    assert_int_equal(jwt_key_load_hmac(&k, HS_SECRET, 31), JWT_E_KEY);
    assert_int_equal(jwt_key_load_hmac(&k, HS_SECRET, 32), 0);
    assert_int_equal(k.alg, JWT_ALG_HS256);
    jwt_key_release(&k);
    jwt_key_release(&k);
    jwt_key_release(NULL);
    assert_int_equal(g.key[K_RS].alg, JWT_ALG_RS256);
    assert_int_equal(g.key[K_ES].alg, JWT_ALG_ES256);

    snprintf(path, sizeof(path), "%s/missing.pem", g.dir);
    expect_pem_refused(path, "cannot open");
    snprintf(path, sizeof(path), "%s/garbage.pem", g.dir);
    write_file(path, "-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----\n");
    expect_pem_refused(path, "cannot read");
    unlink(path);

    p = EVP_RSA_gen(1024);
    snprintf(path, sizeof(path), "%s/rsa1024.pem", g.dir);
    write_pub(p, path);
    expect_pem_refused(path, "1024 bits");
    unlink(path);
    EVP_PKEY_free(p);

    p = EVP_EC_gen("P-384");
    snprintf(path, sizeof(path), "%s/p384.pem", g.dir);
    write_pub(p, path);
    expect_pem_refused(path, "not on P-256");
    unlink(path);
    EVP_PKEY_free(p);

    p = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    snprintf(path, sizeof(path), "%s/ed25519.pem", g.dir);
    write_pub(p, path);
    expect_pem_refused(path, "neither RSA nor EC");
    unlink(path);
    EVP_PKEY_free(p);
}

/* ---- rooms ---- */

static void test_allow_room(void **state)
{
    struct jwt_claims c = {.nrooms = 3, .has_rooms = true};

    (void)state;
    strcpy(c.rooms[0], "lobby");
    strcpy(c.rooms[1], "team:*");
    strcpy(c.rooms[2], "x");
    assert_true(jwt_claims_allow_room(&c, "lobby"));
    assert_true(jwt_claims_allow_room(&c, "team:"));
    assert_true(jwt_claims_allow_room(&c, "team:42"));
    assert_true(jwt_claims_allow_room(&c, "x"));
    assert_false(jwt_claims_allow_room(&c, "lobby2"));
    assert_false(jwt_claims_allow_room(&c, "lobb"));
    assert_false(jwt_claims_allow_room(&c, "team"));
    assert_false(jwt_claims_allow_room(&c, "xy"));
    assert_false(jwt_claims_allow_room(&c, ""));
    assert_false(jwt_claims_allow_room(&c, NULL));
    assert_false(jwt_claims_allow_room(&c, "team:a b"));
    strcpy(c.rooms[2], "*");
    assert_true(jwt_claims_allow_room(&c, "anything"));
    c.nrooms = 0;
    assert_false(jwt_claims_allow_room(&c, "lobby"));
}

/* The packed form allows exactly what the claim allows, in exact space. */
static void test_rooms_packed(void **state)
{
    struct jwt_claims c = {.nrooms = 3, .has_rooms = true};
    const char *rooms[] = {"lobby", "team:", "team:42", "x",        "lobby2",  "lobb",
                           "team",  "xy",    "",        "team:a b", "anything"};
    char *packed;

    (void)state;
    strcpy(c.rooms[0], "lobby");
    strcpy(c.rooms[1], "team:*");
    strcpy(c.rooms[2], "x");
    packed = jwt_rooms_pack(&c);
    assert_memory_equal(packed, "lobby\0team:*\0x\0", 16);
    for (size_t i = 0; i < sizeof(rooms) / sizeof(rooms[0]); i++)
        assert_int_equal(jwt_rooms_allow(packed, rooms[i]), jwt_claims_allow_room(&c, rooms[i]));
    assert_false(jwt_rooms_allow(packed, NULL));
    free(packed);
    c.nrooms = 0;
    packed = jwt_rooms_pack(&c);
    assert_int_equal(packed[0], '\0');
    assert_false(jwt_rooms_allow(packed, "lobby"));
    free(packed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hs256_ok),       cmocka_unit_test(test_rs256_ok),
        cmocka_unit_test(test_es256_ok),       cmocka_unit_test(test_optional_header_and_claims),
        cmocka_unit_test(test_leeway_edges),   cmocka_unit_test(test_aud_iss_ok),
        cmocka_unit_test(test_size_limit),     cmocka_unit_test(test_negative_json),
        cmocka_unit_test(test_negative_bytes), cmocka_unit_test(test_header_too_big),
        cmocka_unit_test(test_no_key),         cmocka_unit_test(test_every_prefix),
        cmocka_unit_test(test_key_load),       cmocka_unit_test(test_allow_room),
        cmocka_unit_test(test_rooms_packed),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
