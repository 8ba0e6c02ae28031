/* SPDX-License-Identifier: MIT */
/*
 * test_pusher_auth.c - Pusher signatures and names. Expected signatures are
 * computed here with libcrypto directly (HMAC(EVP_sha256()), EVP_md5()),
 * API queries are built the way pusher-http-node builds them (params
 * sorted by key, joined raw, signed, auth_signature appended), and a few
 * fixed vectors, the Pusher documentation's examples, were checked with
 * node's crypto module. Every refusal path has its case, and the strings
 * a client controls are read from the end of a page followed by a
 * PROT_NONE page, so an over-read crashes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cJSON.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "guard.h"
#include "pusher_auth.h"

/* The Pusher documentation's example app. */
#define KEY    "278d425bdf160c739803"
#define SECRET "7ad3773142a6692b25b8"
#define SID    "1234.1234"
#define NOW    1353088179

/* Checked with node: crypto.createHmac('sha256', SECRET).update(...). */
#define V_PRIVATE  KEY ":58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4"
#define CD_DOCS    "{\"user_id\":10,\"user_info\":{\"name\":\"Mr. Channels\"}}"
#define V_PRESENCE KEY ":31935e7d86dba64c2a90aed31fdc61869f9b22ba9d8863bba239c03ca481bc80"
#define UD_NODE    "{\"id\":\"user-1\",\"user_info\":{\"name\":\"A\"}}"
#define V_SIGNIN   KEY ":e4ec3e2cc365540d7e0b9aa953af81df2f073388c1e54fd18bb94804a2826381"
#define DOCS_BODY \
    "{\"name\":\"foo\",\"channels\":[\"project-3\"],\"data\":\"{\\\"some\\\":\\\"data\\\"}\"}"
#define DOCS_QUERY                                                          \
    "auth_key=" KEY "&auth_timestamp=1353088179&auth_version=1.0&body_md5=" \
    "ec365a775a4cd0599faeb73354201b6f&auth_signature="                      \
    "da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6c"
#define GET_QUERY                                                                                 \
    "auth_key=" KEY "&auth_timestamp=1353088179&auth_version=1.0&info=user_count%2Csubscription_" \
    "count&auth_signature=36c7a017a98fecd546c1fdd2bb9d0bed7d3cb166a6e12f05d23d92a96bb965ee"

/* ---- reference computations (libcrypto directly) ---- */

static void hex(const unsigned char *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", p[i]);
}

static void ref_hmac(const char *secret, const void *data, size_t n, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;

    assert_non_null(HMAC(EVP_sha256(), secret, (int)strlen(secret), data, n, md, &len));
    assert_int_equal(len, 32);
    hex(md, len, out);
}

static void ref_md5(const char *body, char out[33])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;

    assert_int_equal(EVP_Digest(body, strlen(body), md, &len, EVP_md5(), NULL), 1);
    hex(md, len, out);
}

/* "KEY:<hmac of data>" into out. */
static void ref_auth(const char *key, const char *secret, const char *data, char *out, size_t cap)
{
    char sig[65];

    ref_hmac(secret, data, strlen(data), sig);
    snprintf(out, cap, "%s:%s", key, sig);
}

/* ---- guard-page wrappers: the NUL-terminated string ends at the page ---- */

static enum pusher_channel_kind kind(const char *name)
{
    struct guard g = guard_place(name, strlen(name) + 1);
    enum pusher_channel_kind k = pusher_channel_kind(g.data);

    guard_free(&g);
    return k;
}

static bool sid_ok(const char *s)
{
    struct guard g = guard_place(s, strlen(s) + 1);
    bool ok = pusher_socket_id_valid(g.data);

    guard_free(&g);
    return ok;
}

static bool chan_ok(const char *sid, const char *channel, const char *cd, const char *auth)
{
    struct guard ga = guard_place(auth, strlen(auth) + 1);
    struct guard gc = guard_place(channel, strlen(channel) + 1);
    struct guard gd = guard_place(cd ? cd : "", cd ? strlen(cd) + 1 : 1);
    bool ok = pusher_channel_auth_ok(KEY, SECRET, sid, gc.data, cd ? gd.data : NULL, ga.data);

    guard_free(&ga);
    guard_free(&gc);
    guard_free(&gd);
    return ok;
}

static bool signin_ok(const char *sid, const char *ud, const char *auth)
{
    struct guard ga = guard_place(auth, strlen(auth) + 1);
    struct guard gd = guard_place(ud, strlen(ud) + 1);
    bool ok = pusher_signin_ok(KEY, SECRET, sid, gd.data, ga.data);

    guard_free(&ga);
    guard_free(&gd);
    return ok;
}

static int member(const char *cd, size_t max_info, char *uid, char **info)
{
    struct guard g = guard_place(cd, strlen(cd) + 1);
    int rc = pusher_member_parse(g.data, max_info, uid, PUSHER_USER_ID_MAX + 1, info);

    guard_free(&g);
    return rc;
}

/* ---- API requests built the way pusher-http-node builds them ---- */

struct req_spec {
    const char *method;   /* NULL: "POST" */
    const char *path;     /* NULL: "/apps/3/events" */
    const char *key;      /* NULL: KEY */
    const char *version;  /* NULL: "1.0" */
    const char *body;     /* NULL: no body and no body_md5 */
    int64_t ts;           /* 0: NOW */
    const char *extra[8]; /* raw "key=value" parameters, NULL-terminated */
    bool escape;          /* percent-encode values in the URL (encodeURIComponent) */
    bool no_md5;          /* leave body_md5 out although there is a body */
};

struct built {
    char sign[PUSHER_API_QUERY_MAX + 256];  /* the string pusher-http-node signs */
    char query[PUSHER_API_QUERY_MAX + 256]; /* the query string it sends */
};

static int key_cmp(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    size_t xn = strcspn(x, "="), yn = strcspn(y, "=");
    int c = memcmp(x, y, xn < yn ? xn : yn);

    return c ? c : (xn > yn) - (xn < yn);
}

static void append_escaped(char *out, size_t cap, const char *s)
{
    size_t o = strlen(out);

    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("-_.!~*'()", c))
            o += (size_t)snprintf(out + o, cap - o, "%c", c);
        else
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", c);
    }
}

/* Joins the sorted pairs into out, raw or with escaped values. */
static void join(char *out, size_t cap, char **pairs, size_t n, bool escape)
{
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t kn = strcspn(pairs[i], "=");

        if (i)
            strncat(out, "&", cap - strlen(out) - 1);
        strncat(out, pairs[i], kn + 1);
        if (escape)
            append_escaped(out, cap, pairs[i] + kn + 1);
        else
            strncat(out, pairs[i] + kn + 1, cap - strlen(out) - 1);
    }
}

static void build(const struct req_spec *s, struct built *b)
{
    char *pairs[16], md5[33], sig[65], joined[PUSHER_API_QUERY_MAX + 128];
    size_t n = 0;

    assert_int_not_equal(asprintf(&pairs[n++], "auth_key=%s", s->key ? s->key : KEY), -1);
    assert_int_not_equal(
        asprintf(&pairs[n++], "auth_timestamp=%lld", (long long)(s->ts ? s->ts : NOW)), -1);
    assert_int_not_equal(asprintf(&pairs[n++], "auth_version=%s", s->version ? s->version : "1.0"),
                         -1);
    if (s->body && !s->no_md5) {
        ref_md5(s->body, md5);
        assert_int_not_equal(asprintf(&pairs[n++], "body_md5=%s", md5), -1);
    }
    for (size_t i = 0; s->extra[i]; i++)
        pairs[n++] = strdup(s->extra[i]);
    qsort(pairs, n, sizeof(pairs[0]), key_cmp);
    join(joined, sizeof(joined), pairs, n, false);
    snprintf(b->sign, sizeof(b->sign), "%s\n%s\n%s", s->method ? s->method : "POST",
             s->path ? s->path : "/apps/3/events", joined);
    ref_hmac(SECRET, b->sign, strlen(b->sign), sig);
    join(b->query, sizeof(b->query), pairs, n, s->escape);
    strncat(b->query, "&auth_signature=", sizeof(b->query) - strlen(b->query) - 1);
    strncat(b->query, sig, sizeof(b->query) - strlen(b->query) - 1);
    for (size_t i = 0; i < n; i++)
        free(pairs[i]);
}

/* pusher_api_verify() of query (from a guard page) with the given request
 * line and body, at now; checks that *why is pusher_strerror(rc). */
static int verify_at(const char *method, const char *path, const char *query, const char *body,
                     int64_t now)
{
    struct guard g = guard_place(query, strlen(query) + 1);
    struct pusher_api_req r = {
        .method = method,
        .path = path,
        .query = g.data,
        .body = body,
        .body_len = body ? strlen(body) : 0,
    };
    const char *why = NULL;
    int rc = pusher_api_verify(&r, KEY, SECRET, now, &why);

    assert_string_equal(why, pusher_strerror(rc));
    guard_free(&g);
    return rc;
}

/* Builds s and verifies it as sent, at NOW. */
static int verify_spec(const struct req_spec *s)
{
    struct built b;

    build(s, &b);
    return verify_at(s->method ? s->method : "POST", s->path ? s->path : "/apps/3/events", b.query,
                     s->body, NOW);
}

/* Builds s, lets edit change the query, then verifies. */
static int verify_edited(const struct req_spec *s, void (*edit)(char *q))
{
    struct built b;

    build(s, &b);
    edit(b.query);
    return verify_at(s->method ? s->method : "POST", s->path ? s->path : "/apps/3/events", b.query,
                     s->body, NOW);
}

/* ---- HMAC ---- */

static void test_hmac_hex(void **state)
{
    const char bin[] = {'a', '\0', 'b', '\xff'};
    char got[65], want[65];

    (void)state;
    /* node -e "crypto.createHmac('sha256','secret').update('1234.1234:private-foobar')" */
    pusher_hmac_hex("secret", "1234.1234:private-foobar", 24, got);
    assert_string_equal(got, "d72a34ff99c998e839c2958470377261870a474fa85674304db4589ba4fef019");
    pusher_hmac_hex(SECRET, SID ":private-foobar", strlen(SID ":private-foobar"), got);
    assert_string_equal(got, strchr(V_PRIVATE, ':') + 1);
    pusher_hmac_hex(SECRET, bin, sizeof(bin), got);
    ref_hmac(SECRET, bin, sizeof(bin), want);
    assert_string_equal(got, want);
    pusher_hmac_hex("", "x", 1, got);
    ref_hmac("", "x", 1, want);
    assert_string_equal(got, want);
    pusher_hmac_hex(SECRET, NULL, 0, got);
    ref_hmac(SECRET, "", 0, want);
    assert_string_equal(got, want);
    assert_int_equal(strlen(got), 64);
}

/* ---- channel authorisation ---- */

static void test_channel_auth_docs(void **state)
{
    char auth[128];

    (void)state;
    assert_true(chan_ok(SID, "private-foobar", NULL, V_PRIVATE));
    assert_true(chan_ok(SID, "presence-foobar", CD_DOCS, V_PRESENCE));
    ref_auth(KEY, SECRET, "9.9:private-encrypted-x", auth, sizeof(auth));
    assert_true(chan_ok("9.9", "private-encrypted-x", NULL, auth));
    /* channel_data "" is signed as a trailing ':', unlike NULL. */
    ref_auth(KEY, SECRET, SID ":presence-a:", auth, sizeof(auth));
    assert_true(chan_ok(SID, "presence-a", "", auth));
    assert_false(chan_ok(SID, "presence-a", NULL, auth));
}

static void test_channel_auth_refusals(void **state)
{
    const char *sig = strchr(V_PRIVATE, ':') + 1;
    char bad[160];

    (void)state;
    snprintf(bad, sizeof(bad), "278d425bdf160c739804:%s", sig); /* wrong key part */
    assert_false(chan_ok(SID, "private-foobar", NULL, bad));
    snprintf(bad, sizeof(bad), "278d425bdf160c73980:%s", sig); /* key part too short */
    assert_false(chan_ok(SID, "private-foobar", NULL, bad));
    snprintf(bad, sizeof(bad), "%sx:%s", KEY, sig); /* key part too long */
    assert_false(chan_ok(SID, "private-foobar", NULL, bad));
    snprintf(bad, sizeof(bad), "%s%s", KEY, sig); /* no colon */
    assert_false(chan_ok(SID, "private-foobar", NULL, bad));
    snprintf(bad, sizeof(bad), "%s", sig); /* no key part */
    assert_false(chan_ok(SID, "private-foobar", NULL, bad));
    snprintf(bad, sizeof(bad), "%.84s", V_PRIVATE); /* one digit short */
    assert_false(chan_ok(SID, "private-foobar", NULL, bad));
    snprintf(bad, sizeof(bad), "%s0", V_PRIVATE); /* one digit long */
    assert_false(chan_ok(SID, "private-foobar", NULL, bad));
    snprintf(bad, sizeof(bad), "%s", V_PRIVATE);
    for (char *p = bad + strlen(KEY) + 1; *p; p++) /* uppercase hex */
        if (*p >= 'a' && *p <= 'f')
            *p = (char)(*p - 'a' + 'A');
    assert_false(chan_ok(SID, "private-foobar", NULL, bad));
    assert_false(chan_ok(SID, "private-foobar", NULL, ""));
    assert_false(chan_ok(SID, "private-foobar", NULL, KEY ":"));
    assert_false(chan_ok("1234.1235", "private-foobar", NULL, V_PRIVATE)); /* another socket */
    assert_false(chan_ok(SID, "private-foobaz", NULL, V_PRIVATE));         /* another channel */
    assert_false(chan_ok(SID, "private-foobar", "", V_PRIVATE));           /* data not signed */
    assert_false(chan_ok(SID, "presence-foobar", NULL, V_PRESENCE));       /* data missing */
}

/* Any single hex digit changed, and any byte of channel_data changed. */
static void test_channel_auth_every_byte(void **state)
{
    char auth[sizeof(V_PRESENCE)], cd[sizeof(CD_DOCS)];
    size_t off = strlen(KEY) + 1;

    (void)state;
    for (size_t i = off; i < strlen(V_PRESENCE); i++) {
        memcpy(auth, V_PRESENCE, sizeof(auth));
        auth[i] = auth[i] == '0' ? '1' : '0';
        assert_false(chan_ok(SID, "presence-foobar", CD_DOCS, auth));
    }
    for (size_t i = 0; i < strlen(CD_DOCS); i++) {
        memcpy(cd, CD_DOCS, sizeof(cd));
        cd[i] ^= 0x01;
        assert_false(chan_ok(SID, "presence-foobar", cd, V_PRESENCE));
    }
    /* A space after a comma: the same JSON, different bytes. */
    assert_false(chan_ok(SID, "presence-foobar",
                         "{\"user_id\":10, \"user_info\":{\"name\":\"Mr. Channels\"}}",
                         V_PRESENCE));
}

static void test_channel_auth_bad_arguments(void **state)
{
    char auth[128];

    (void)state;
    assert_false(pusher_channel_auth_ok(NULL, SECRET, SID, "private-foobar", NULL, V_PRIVATE));
    assert_false(pusher_channel_auth_ok(KEY, NULL, SID, "private-foobar", NULL, V_PRIVATE));
    assert_false(pusher_channel_auth_ok(KEY, SECRET, NULL, "private-foobar", NULL, V_PRIVATE));
    assert_false(pusher_channel_auth_ok(KEY, SECRET, SID, NULL, NULL, V_PRIVATE));
    assert_false(pusher_channel_auth_ok(KEY, SECRET, SID, "private-foobar", NULL, NULL));
    /* An empty app key or secret authorises nothing, even when signed so. */
    ref_auth("", SECRET, SID ":private-foobar", auth, sizeof(auth));
    assert_false(pusher_channel_auth_ok("", SECRET, SID, "private-foobar", NULL, auth));
    ref_auth(KEY, "", SID ":private-foobar", auth, sizeof(auth));
    assert_false(pusher_channel_auth_ok(KEY, "", SID, "private-foobar", NULL, auth));
}

/* ---- sign-in ---- */

static void test_signin(void **state)
{
    char auth[128], ud[sizeof(UD_NODE)];

    (void)state;
    assert_true(signin_ok(SID, UD_NODE, V_SIGNIN));
    ref_auth(KEY, SECRET, "1.2::user::{\"id\":\"x\"}", auth, sizeof(auth));
    assert_true(signin_ok("1.2", "{\"id\":\"x\"}", auth));
    assert_false(signin_ok("1.3", "{\"id\":\"x\"}", auth));
    assert_false(signin_ok("1.2", "{\"id\":\"y\"}", auth));
    /* The channel form of the same bytes is not a sign-in signature. */
    ref_auth(KEY, SECRET, "1.2:{\"id\":\"x\"}", auth, sizeof(auth));
    assert_false(signin_ok("1.2", "{\"id\":\"x\"}", auth));
    for (size_t i = 0; i < strlen(UD_NODE); i++) {
        memcpy(ud, UD_NODE, sizeof(ud));
        ud[i] ^= 0x20;
        assert_false(signin_ok(SID, ud, V_SIGNIN));
    }
    assert_false(pusher_signin_ok(KEY, SECRET, SID, NULL, V_SIGNIN));
    assert_false(pusher_signin_ok(KEY, SECRET, NULL, UD_NODE, V_SIGNIN));
    assert_false(pusher_signin_ok("x", SECRET, SID, UD_NODE, V_SIGNIN));
    assert_false(pusher_signin_ok(KEY, "", SID, UD_NODE, V_SIGNIN));
}

/* ---- names ---- */

static void test_socket_id(void **state)
{
    char s[80];

    (void)state;
    assert_true(sid_ok("1234.1234"));
    assert_true(sid_ok("0.0"));
    assert_true(sid_ok("1.2"));
    assert_false(sid_ok(""));
    assert_false(sid_ok("1234"));
    assert_false(sid_ok("1234."));
    assert_false(sid_ok(".1234"));
    assert_false(sid_ok("12.34.56"));
    assert_false(sid_ok("12,34"));
    assert_false(sid_ok("-1.2"));
    assert_false(sid_ok("1.2 "));
    assert_false(sid_ok(" 1.2"));
    assert_false(sid_ok("1.2\n"));
    assert_false(sid_ok("a.b"));
    assert_false(sid_ok("1.2:"));
    assert_false(pusher_socket_id_valid(NULL));
    memset(s, '1', 64);
    s[30] = '.';
    s[64] = '\0';
    assert_true(sid_ok(s)); /* 64 bytes */
    s[64] = '1';
    s[65] = '\0';
    assert_false(sid_ok(s)); /* 65 */
}

static void test_channel_kind(void **state)
{
    char s[300];

    (void)state;
    assert_int_equal(kind("a"), PUSHER_CH_PUBLIC);
    assert_int_equal(kind("my-channel"), PUSHER_CH_PUBLIC);
    assert_int_equal(kind("AZaz09_-=@,.;"), PUSHER_CH_PUBLIC);
    assert_int_equal(kind("private-foobar"), PUSHER_CH_PRIVATE);
    assert_int_equal(kind("private-encrypted"), PUSHER_CH_PRIVATE);
    assert_int_equal(kind("private-encrypted-x"), PUSHER_CH_ENCRYPTED);
    assert_int_equal(kind("presence-x"), PUSHER_CH_PRESENCE);
    assert_int_equal(kind("presence-private-x"), PUSHER_CH_PRESENCE);
    assert_int_equal(kind("Private-x"), PUSHER_CH_PUBLIC);
    assert_int_equal(kind("private"), PUSHER_CH_PUBLIC);
    assert_int_equal(kind("presence"), PUSHER_CH_PUBLIC);
    assert_int_equal(kind("#server-to-user-42"), PUSHER_CH_USER);
    assert_int_equal(kind("#server-to-user-a=b,c"), PUSHER_CH_USER);
    /* Refused. */
    assert_int_equal(kind(""), PUSHER_CH_INVALID);
    assert_int_equal(kind("private-"), PUSHER_CH_INVALID);
    assert_int_equal(kind("private-encrypted-"), PUSHER_CH_INVALID);
    assert_int_equal(kind("presence-"), PUSHER_CH_INVALID);
    assert_int_equal(kind("#server-to-user-"), PUSHER_CH_INVALID);
    assert_int_equal(kind("#server-to-user"), PUSHER_CH_INVALID);
    assert_int_equal(kind("#server-to-user-a b"), PUSHER_CH_INVALID);
    assert_int_equal(kind("#server-to-user-a:b"), PUSHER_CH_INVALID);
    assert_int_equal(kind("#foo"), PUSHER_CH_INVALID);
    assert_int_equal(kind("a b"), PUSHER_CH_INVALID);
    assert_int_equal(kind("a/b"), PUSHER_CH_INVALID);
    assert_int_equal(kind("a:b"), PUSHER_CH_INVALID);
    assert_int_equal(kind("a*"), PUSHER_CH_INVALID);
    assert_int_equal(kind("private-a#"), PUSHER_CH_INVALID);
    assert_int_equal(kind("caf\xc3\xa9"), PUSHER_CH_INVALID);
    assert_int_equal(kind("a\n"), PUSHER_CH_INVALID);
    assert_int_equal(pusher_channel_kind(NULL), PUSHER_CH_INVALID);
    /* Length limits: 164 bytes for a name, 128 after the user prefix. */
    memset(s, 'x', 164);
    s[164] = '\0';
    assert_int_equal(kind(s), PUSHER_CH_PUBLIC);
    memcpy(s, "presence-", 9);
    assert_int_equal(kind(s), PUSHER_CH_PRESENCE);
    s[164] = 'x';
    s[165] = '\0';
    assert_int_equal(kind(s), PUSHER_CH_INVALID);
    snprintf(s, sizeof(s), "#server-to-user-%0128d", 7);
    assert_int_equal(kind(s), PUSHER_CH_USER);
    snprintf(s, sizeof(s), "#server-to-user-%0129d", 7);
    assert_int_equal(kind(s), PUSHER_CH_INVALID);
}

/* Every byte outside the alphabet is refused in any position. */
static void test_channel_kind_alphabet(void **state)
{
    char s[8];

    (void)state;
    for (int c = 1; c < 256; c++) {
        bool ok = strchr("_-=@,.;", c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9');

        snprintf(s, sizeof(s), "ab%cc", c);
        assert_int_equal(kind(s), ok ? PUSHER_CH_PUBLIC : PUSHER_CH_INVALID);
    }
}

/* ---- channel_data ---- */

static void test_member_parse_ok(void **state)
{
    char uid[PUSHER_USER_ID_MAX + 1], *info = NULL;

    (void)state;
    assert_int_equal(member(CD_DOCS, 1024, uid, &info), 0);
    assert_string_equal(uid, "10");
    assert_string_equal(info, "{\"name\":\"Mr. Channels\"}");
    cJSON_free(info);
    assert_int_equal(member("{\"user_id\":42}", 1024, uid, &info), 0);
    assert_string_equal(uid, "42");
    assert_string_equal(info, "{}");
    cJSON_free(info);
    assert_int_equal(member(" { \"user_id\" : \"u-1.a~b:c@d_e\" , \"user_info\" : [ 1 , \"x\" ] } ",
                            1024, uid, &info),
                     0);
    assert_string_equal(uid, "u-1.a~b:c@d_e");
    assert_string_equal(info, "[1,\"x\"]");
    cJSON_free(info);
    assert_int_equal(member("{\"user_id\":-7,\"user_info\":null}", 1024, uid, &info), 0);
    assert_string_equal(uid, "-7");
    assert_string_equal(info, "null");
    cJSON_free(info);
    assert_int_equal(member("{\"user_id\":0,\"other\":1}", 1024, uid, &info), 0);
    assert_string_equal(uid, "0");
    cJSON_free(info);
    assert_int_equal(member("{\"user_id\":9007199254740991}", 1024, uid, &info), 0);
    assert_string_equal(uid, "9007199254740991");
    cJSON_free(info);
    /* user_info not wanted. */
    assert_int_equal(pusher_member_parse("{\"user_id\":\"a\"}", 2, uid, sizeof(uid), NULL), 0);
    assert_string_equal(uid, "a");
}

static void test_member_parse_refusals(void **state)
{
    static const struct {
        const char *cd;
        int rc;
    } rows[] = {
        {"", PUSHER_E_CHANNEL_DATA},
        {"not json", PUSHER_E_CHANNEL_DATA},
        {"[\"user_id\",1]", PUSHER_E_CHANNEL_DATA},
        {"\"a\"", PUSHER_E_CHANNEL_DATA},
        {"{\"user_id\":\"a\"} x", PUSHER_E_CHANNEL_DATA},
        {"{\"user_id\":\"a\"", PUSHER_E_CHANNEL_DATA},
        {"{\"user_id\":\"a\",\"user_id\":\"b\"}", PUSHER_E_CHANNEL_DATA},
        {"{\"user_id\":\"a\",\"user_info\":1,\"user_info\":2}", PUSHER_E_CHANNEL_DATA},
        {"{\"user_id\":\"a\\u0000b\"}", PUSHER_E_CHANNEL_DATA},
        {"{\"user_id\":\"\xff\"}", PUSHER_E_CHANNEL_DATA},
        {"{}", PUSHER_E_USER_ID},
        {"{\"User_id\":\"a\"}", PUSHER_E_USER_ID},
        {"{\"user_id\":\"\"}", PUSHER_E_USER_ID},
        {"{\"user_id\":null}", PUSHER_E_USER_ID},
        {"{\"user_id\":true}", PUSHER_E_USER_ID},
        {"{\"user_id\":1.5}", PUSHER_E_USER_ID},
        {"{\"user_id\":9007199254740992}", PUSHER_E_USER_ID},
        {"{\"user_id\":1e300}", PUSHER_E_USER_ID},
        {"{\"user_id\":[\"a\"]}", PUSHER_E_USER_ID},
        {"{\"user_id\":{\"a\":1}}", PUSHER_E_USER_ID},
        {"{\"user_id\":\"a b\"}", PUSHER_E_USER_ID},
        {"{\"user_id\":\"a/b\"}", PUSHER_E_USER_ID},
        {"{\"user_id\":\"a#\"}", PUSHER_E_USER_ID},
        {"{\"user_id\":\"caf\xc3\xa9\"}", PUSHER_E_USER_ID},
        {"{\"user_id\":\"a\\nb\"}", PUSHER_E_USER_ID},
    };
    char uid[PUSHER_USER_ID_MAX + 1], *info;

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        strcpy(uid, "junk");
        info = (char *)"junk";
        assert_int_equal(member(rows[i].cd, 1024, uid, &info), rows[i].rc);
        assert_string_equal(uid, "");
        assert_null(info);
    }
    assert_int_equal(pusher_member_parse(NULL, 1024, uid, sizeof(uid), &info),
                     PUSHER_E_CHANNEL_DATA);
}

static void test_member_parse_limits(void **state)
{
    char cd[400], uid[PUSHER_USER_ID_MAX + 1], *info = NULL;

    (void)state;
    /* The id: 128 bytes fit, 129 do not; a buffer too small refuses. */
    snprintf(cd, sizeof(cd), "{\"user_id\":\"%0128d\"}", 1);
    assert_int_equal(member(cd, 16, uid, &info), 0);
    assert_int_equal(strlen(uid), 128);
    cJSON_free(info);
    snprintf(cd, sizeof(cd), "{\"user_id\":\"%0129d\"}", 1);
    assert_int_equal(member(cd, 16, uid, &info), PUSHER_E_USER_ID);
    assert_int_equal(pusher_member_parse("{\"user_id\":\"abcd\"}", 16, uid, 4, &info),
                     PUSHER_E_USER_ID);
    assert_int_equal(pusher_member_parse("{\"user_id\":\"abc\"}", 16, uid, 4, &info), 0);
    cJSON_free(info);
    assert_int_equal(pusher_member_parse("{\"user_id\":\"a\"}", 16, NULL, 0, &info),
                     PUSHER_E_USER_ID);
    /* user_info: compact {"a":"xxxx"} is 12 bytes; max_info 12 takes it. */
    assert_int_equal(member("{\"user_id\":1,\"user_info\":{ \"a\" : \"xxxx\" }}", 12, uid, &info),
                     0);
    assert_string_equal(info, "{\"a\":\"xxxx\"}");
    cJSON_free(info);
    strcpy(uid, "junk");
    assert_int_equal(member("{\"user_id\":1,\"user_info\":{\"a\":\"xxxx\"}}", 11, uid, &info),
                     PUSHER_E_USER_INFO);
    assert_string_equal(uid, "");
    assert_null(info);
    /* The "{}" of an absent user_info counts too. */
    assert_int_equal(member("{\"user_id\":1}", 1, uid, &info), PUSHER_E_USER_INFO);
    assert_int_equal(member("{\"user_id\":1}", 2, uid, &info), 0);
    cJSON_free(info);
}

/* ---- user_data ---- */

static int user(const char *ud, size_t max_watch, char *id, char **info, char ***w, size_t *n)
{
    struct guard g = guard_place(ud, strlen(ud) + 1);
    int rc = pusher_user_data_parse(g.data, 64, max_watch, id, PUSHER_USER_ID_MAX + 1, info, w, n);

    guard_free(&g);
    return rc;
}

static void test_user_data_parse_ok(void **state)
{
    char id[PUSHER_USER_ID_MAX + 1], *info = NULL, **w = NULL;
    size_t n = 99;

    (void)state;
    assert_int_equal(user(UD_NODE, 4, id, &info, &w, &n), 0);
    assert_string_equal(id, "user-1");
    assert_string_equal(info, "{\"name\":\"A\"}");
    assert_null(w);
    assert_int_equal(n, 0);
    cJSON_free(info);
    assert_int_equal(
        user("{\"id\":\"me\",\"watchlist\":[\"a\",\"b:c\",\"a\"]}", 3, id, &info, &w, &n), 0);
    assert_string_equal(id, "me");
    assert_string_equal(info, "{}");
    assert_int_equal(n, 3);
    assert_string_equal(w[0], "a");
    assert_string_equal(w[1], "b:c");
    assert_string_equal(w[2], "a");
    pusher_watchlist_free(w, n);
    cJSON_free(info);
    assert_int_equal(user("{\"id\":\"me\",\"watchlist\":[]}", 0, id, &info, &w, &n), 0);
    assert_null(w);
    assert_int_equal(n, 0);
    cJSON_free(info);
    /* Nothing wanted but the id. */
    assert_int_equal(pusher_user_data_parse("{\"id\":\"x\",\"watchlist\":[\"y\"]}", 64, 1, id,
                                            sizeof(id), NULL, NULL, NULL),
                     0);
    assert_string_equal(id, "x");
    pusher_watchlist_free(NULL, 0);
}

static void test_user_data_parse_refusals(void **state)
{
    static const struct {
        const char *ud;
        int rc;
    } rows[] = {
        {"", PUSHER_E_USER_DATA},
        {"[]", PUSHER_E_USER_DATA},
        {"{\"id\":\"a\"}{}", PUSHER_E_USER_DATA},
        {"{\"id\":\"a\",\"id\":\"b\"}", PUSHER_E_USER_DATA},
        {"{\"id\":\"a\",\"watchlist\":[],\"watchlist\":[]}", PUSHER_E_USER_DATA},
        {"{}", PUSHER_E_ID},
        {"{\"id\":42}", PUSHER_E_ID},
        {"{\"id\":\"\"}", PUSHER_E_ID},
        {"{\"id\":\"a b\"}", PUSHER_E_ID},
        {"{\"user_id\":\"a\"}", PUSHER_E_ID},
        {"{\"id\":\"a\",\"watchlist\":\"b\"}", PUSHER_E_WATCHLIST},
        {"{\"id\":\"a\",\"watchlist\":{\"b\":1}}", PUSHER_E_WATCHLIST},
        {"{\"id\":\"a\",\"watchlist\":[1]}", PUSHER_E_WATCHLIST},
        {"{\"id\":\"a\",\"watchlist\":[\"\"]}", PUSHER_E_WATCHLIST},
        {"{\"id\":\"a\",\"watchlist\":[\"b\",\"c d\"]}", PUSHER_E_WATCHLIST},
        {"{\"id\":\"a\",\"watchlist\":[\"1\",\"2\",\"3\"]}", PUSHER_E_WATCHLIST}, /* max 2 */
        {"{\"id\":\"a\",\"user_info\":\"" /* 65 bytes compact, max 64 */
         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
         PUSHER_E_USER_INFO},
    };
    char id[PUSHER_USER_ID_MAX + 1], ud[200], *info, **w;
    size_t n;

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        strcpy(id, "junk");
        info = (char *)"junk";
        w = (char **)&info;
        n = 5;
        assert_int_equal(user(rows[i].ud, 2, id, &info, &w, &n), rows[i].rc);
        assert_string_equal(id, "");
        assert_null(info);
        assert_null(w);
        assert_int_equal(n, 0);
    }
    snprintf(ud, sizeof(ud), "{\"id\":\"%0129d\"}", 1);
    assert_int_equal(user(ud, 2, id, &info, &w, &n), PUSHER_E_ID);
    snprintf(ud, sizeof(ud), "{\"id\":\"%0128d\"}", 1);
    assert_int_equal(user(ud, 2, id, &info, &w, &n), 0);
    assert_int_equal(strlen(id), 128);
    cJSON_free(info);
}

/* ---- the HTTP API ---- */

static void test_api_docs_vectors(void **state)
{
    (void)state;
    assert_int_equal(verify_at("POST", "/apps/3/events", DOCS_QUERY, DOCS_BODY, NOW), 0);
    assert_int_equal(verify_at("GET", "/apps/3/channels/presence-foo", GET_QUERY, NULL, NOW), 0);
    /* The same request, another method or path. */
    assert_int_equal(verify_at("GET", "/apps/3/events", DOCS_QUERY, DOCS_BODY, NOW),
                     PUSHER_E_API_SIGNATURE);
    assert_int_equal(verify_at("POST", "/apps/4/events", DOCS_QUERY, DOCS_BODY, NOW),
                     PUSHER_E_API_SIGNATURE);
    assert_int_equal(verify_at("POST", "/apps/3/events", DOCS_QUERY, DOCS_BODY " ", NOW),
                     PUSHER_E_API_BODY_MD5);
}

static void test_api_built(void **state)
{
    struct req_spec get = {
        .method = "GET",
        .path = "/apps/3/channels",
        .extra = {"filter_by_prefix=presence-", "info=user_count", NULL},
    };
    struct req_spec post = {.body = "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"{}\"}"};
    struct req_spec odd = {
        .method = "GET",
        .path = "/apps/3/channels/a",
        .extra = {"info=user_count,subscription_count", "x=a b+c&d=e%f", "a-b=1", "a=2", NULL},
        .escape = true,
    };

    (void)state;
    assert_int_equal(verify_spec(&get), 0);
    get.escape = true;
    assert_int_equal(verify_spec(&get), 0);
    assert_int_equal(verify_spec(&post), 0);
    post.escape = true;
    assert_int_equal(verify_spec(&post), 0);
    /* Escaped values are signed decoded; "a" sorts before "a-b" by key. */
    assert_int_equal(verify_spec(&odd), 0);
}

static void add_param(char *q)
{
    strcat(q, "&extra=1");
}

static void dup_key(char *q)
{
    strcat(q, "&auth_key=" KEY);
}

static void dup_case(char *q)
{
    strcat(q, "&AUTH_VERSION=1.0");
}

static void dup_user(char *q)
{
    strcat(q, "&info=a&info=a");
}

static void bad_escape1(char *q)
{
    strcat(q, "&x=%zz");
}

static void bad_escape2(char *q)
{
    strcat(q, "&x=%4");
}

static void bad_escape3(char *q)
{
    strcat(q, "&x=%");
}

static void bad_nul(char *q)
{
    strcat(q, "&x=a%00b");
}

static void bad_key_escape(char *q)
{
    strcat(q, "&%g1=a");
}

static void empty_key(char *q)
{
    strcat(q, "&=a");
}

static void empty_pieces(char *q)
{
    memmove(q + 2, q, strlen(q) + 1);
    q[0] = q[1] = '&';
    strcat(q, "&&");
}

static void flip_sig(char *q)
{
    char *s = strstr(q, "auth_signature=") + 15;

    s[10] = s[10] == 'a' ? 'b' : 'a';
}

static void upper_sig(char *q)
{
    for (char *s = strstr(q, "auth_signature=") + 15; *s; s++)
        if (*s >= 'a' && *s <= 'f')
            *s = (char)(*s - 'a' + 'A');
}

static void short_sig(char *q)
{
    q[strlen(q) - 1] = '\0';
}

static void long_sig(char *q)
{
    strcat(q, "0");
}

static void upper_md5(char *q)
{
    for (char *s = strstr(q, "body_md5=") + 9; *s && *s != '&'; s++)
        if (*s >= 'a' && *s <= 'f')
            *s = (char)(*s - 'a' + 'A');
}

static void cut_sig(char *q)
{
    *strstr(q, "&auth_signature=") = '\0';
}

static void test_api_refusals(void **state)
{
    struct req_spec s = {.body = "{\"name\":\"e\"}", .extra = {"info=user_count", NULL}};
    struct req_spec other = s;

    (void)state;
    assert_int_equal(verify_edited(&s, add_param), PUSHER_E_API_SIGNATURE);
    assert_int_equal(verify_edited(&s, flip_sig), PUSHER_E_API_SIGNATURE);
    assert_int_equal(verify_edited(&s, upper_sig), PUSHER_E_API_SIGNATURE);
    assert_int_equal(verify_edited(&s, short_sig), PUSHER_E_API_SIGNATURE);
    assert_int_equal(verify_edited(&s, long_sig), PUSHER_E_API_SIGNATURE);
    assert_int_equal(verify_edited(&s, upper_md5), PUSHER_E_API_BODY_MD5);
    assert_int_equal(verify_edited(&s, cut_sig), PUSHER_E_API_MISSING);
    assert_int_equal(verify_edited(&s, dup_key), PUSHER_E_API_DUPLICATE);
    assert_int_equal(verify_edited(&s, dup_case), PUSHER_E_API_DUPLICATE);
    assert_int_equal(verify_edited(&s, dup_user), PUSHER_E_API_DUPLICATE);
    assert_int_equal(verify_edited(&s, bad_escape1), PUSHER_E_API_QUERY);
    assert_int_equal(verify_edited(&s, bad_escape2), PUSHER_E_API_QUERY);
    assert_int_equal(verify_edited(&s, bad_escape3), PUSHER_E_API_QUERY);
    assert_int_equal(verify_edited(&s, bad_nul), PUSHER_E_API_QUERY);
    assert_int_equal(verify_edited(&s, bad_key_escape), PUSHER_E_API_QUERY);
    assert_int_equal(verify_edited(&s, empty_key), PUSHER_E_API_QUERY);
    assert_int_equal(verify_edited(&s, empty_pieces), 0); /* skipped, as everywhere */
    other.version = "2.0";
    assert_int_equal(verify_spec(&other), PUSHER_E_API_VERSION);
    other.version = "1.00";
    assert_int_equal(verify_spec(&other), PUSHER_E_API_VERSION);
    other = s;
    other.key = "278d425bdf160c739804";
    assert_int_equal(verify_spec(&other), PUSHER_E_API_KEY);
    other = s;
    other.no_md5 = true;
    assert_int_equal(verify_spec(&other), PUSHER_E_API_BODY_MD5);
    other = s;
    other.extra[1] = "body_md5=0123456789abcdef0123456789abcdef";
    other.no_md5 = true;
    assert_int_equal(verify_spec(&other), PUSHER_E_API_BODY_MD5);
}

static void test_api_missing(void **state)
{
    static const char sig[] =
        "auth_signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    char q[512];

    (void)state;
    assert_int_equal(verify_at("GET", "/x", "", NULL, NOW), PUSHER_E_API_MISSING);
    assert_int_equal(verify_at("GET", "/x", "&&", NULL, NOW), PUSHER_E_API_MISSING);
    snprintf(q, sizeof(q), "auth_timestamp=%d&auth_version=1.0&%s", NOW, sig);
    assert_int_equal(verify_at("GET", "/x", q, NULL, NOW), PUSHER_E_API_MISSING);
    snprintf(q, sizeof(q), "auth_key=" KEY "&auth_version=1.0&%s", sig);
    assert_int_equal(verify_at("GET", "/x", q, NULL, NOW), PUSHER_E_API_MISSING);
    snprintf(q, sizeof(q), "auth_key=" KEY "&auth_timestamp=%d&%s", NOW, sig);
    assert_int_equal(verify_at("GET", "/x", q, NULL, NOW), PUSHER_E_API_MISSING);
    snprintf(q, sizeof(q), "auth_key=" KEY "&auth_timestamp=%d&auth_version=1.0", NOW);
    assert_int_equal(verify_at("GET", "/x", q, NULL, NOW), PUSHER_E_API_MISSING);
    /* Keys are case-insensitive ("auth_key" spelled in capitals counts). */
    snprintf(q, sizeof(q), "AUTH_KEY=x&Auth_Timestamp=%d&auth_version=1.0&%s", NOW, sig);
    assert_int_equal(verify_at("GET", "/x", q, NULL, NOW), PUSHER_E_API_KEY);
    snprintf(q, sizeof(q), "auth_key=" KEY "&auth_timestamp=%d&auth_version=1.0&%s", NOW, sig);
    assert_int_equal(verify_at("GET", "/x", q, NULL, NOW), PUSHER_E_API_SIGNATURE);
}

static void test_api_timestamp(void **state)
{
    struct req_spec s = {.method = "GET", .path = "/apps/3/channels"};
    struct built b;
    static const char *const bad_ts[] = {"",    "-1",   "+5",  " 1",
                                         "1.5", "0x10", "1e9", "1234567890123456789"};
    char q[512];

    (void)state;
    for (int d = -599; d <= 599; d += 599) {
        s.ts = NOW + d;
        assert_int_equal(verify_spec(&s), 0);
    }
    s.ts = NOW + 600;
    assert_int_equal(verify_spec(&s), PUSHER_E_API_TIMESTAMP);
    s.ts = NOW - 600;
    assert_int_equal(verify_spec(&s), PUSHER_E_API_TIMESTAMP);
    s.ts = NOW;
    build(&s, &b);
    assert_int_equal(verify_at("GET", "/apps/3/channels", b.query, NULL, INT64_MAX),
                     PUSHER_E_API_TIMESTAMP);
    assert_int_equal(verify_at("GET", "/apps/3/channels", b.query, NULL, INT64_MIN),
                     PUSHER_E_API_TIMESTAMP);
    s.ts = 999999999999999999LL; /* 18 digits: read, then too far off */
    build(&s, &b);
    assert_int_equal(verify_at("GET", "/apps/3/channels", b.query, NULL, s.ts), 0);
    for (size_t i = 0; i < ARRAY_SIZE(bad_ts); i++) {
        snprintf(q, sizeof(q),
                 "auth_key=" KEY "&auth_timestamp=%s&auth_version=1.0&"
                 "auth_signature=%064d",
                 bad_ts[i], 0);
        assert_int_equal(verify_at("GET", "/x", q, NULL, NOW), PUSHER_E_API_TIMESTAMP);
    }
}

static void test_api_body(void **state)
{
    struct req_spec s = {.body = ""};
    struct built b;
    struct pusher_api_req r = {.method = "POST", .path = "/apps/3/events"};
    const char *why;

    (void)state;
    /* A body_md5 with an empty body must be the MD5 of nothing. */
    assert_int_equal(verify_spec(&s), 0);
    build(&s, &b);
    assert_non_null(strstr(b.query, "body_md5=d41d8cd98f00b204e9800998ecf8427e"));
    assert_int_equal(verify_at("POST", "/apps/3/events", b.query, "x", NOW), PUSHER_E_API_BODY_MD5);
    /* A body that is NULL with a length is the caller's mistake. */
    r.query = b.query;
    r.body_len = 1;
    assert_int_equal(pusher_api_verify(&r, KEY, SECRET, NOW, &why), PUSHER_E_API_REQUEST);
    assert_int_equal(pusher_api_status(PUSHER_E_API_REQUEST), 400);
    /* A body with a NUL in it is hashed whole. */
    r.body = "a\0b";
    r.body_len = 3;
    assert_int_equal(pusher_api_verify(&r, KEY, SECRET, NOW, NULL), PUSHER_E_API_BODY_MD5);
}

static void test_api_bad_requests(void **state)
{
    struct req_spec s = {.method = "GET", .path = "/apps/3/channels"};
    struct built b;
    struct pusher_api_req r = {.method = "GET", .path = "/apps/3/channels"};

    (void)state;
    build(&s, &b);
    r.query = b.query;
    assert_int_equal(pusher_api_verify(&r, KEY, SECRET, NOW, NULL), 0);
    assert_int_equal(pusher_api_verify(NULL, KEY, SECRET, NOW, NULL), PUSHER_E_API_REQUEST);
    assert_int_equal(pusher_api_verify(&r, "", SECRET, NOW, NULL), PUSHER_E_API_KEY);
    assert_int_equal(pusher_api_verify(&r, NULL, SECRET, NOW, NULL), PUSHER_E_API_KEY);
    assert_int_equal(pusher_api_verify(&r, KEY, "", NOW, NULL), PUSHER_E_API_SIGNATURE);
    assert_int_equal(pusher_api_verify(&r, KEY, NULL, NOW, NULL), PUSHER_E_API_SIGNATURE);
    assert_int_equal(pusher_api_verify(&r, KEY, "other", NOW, NULL), PUSHER_E_API_SIGNATURE);
    r.method = "";
    assert_int_equal(pusher_api_verify(&r, KEY, SECRET, NOW, NULL), PUSHER_E_API_REQUEST);
    r.method = NULL;
    assert_int_equal(pusher_api_verify(&r, KEY, SECRET, NOW, NULL), PUSHER_E_API_REQUEST);
    r.method = "get"; /* signed as given: pusher-http-node signs "GET" */
    assert_int_equal(pusher_api_verify(&r, KEY, SECRET, NOW, NULL), PUSHER_E_API_SIGNATURE);
    r.method = "GET";
    r.path = "";
    assert_int_equal(pusher_api_verify(&r, KEY, SECRET, NOW, NULL), PUSHER_E_API_REQUEST);
    r.path = NULL;
    assert_int_equal(pusher_api_verify(&r, KEY, SECRET, NOW, NULL), PUSHER_E_API_REQUEST);
    r.path = "/apps/3/channels";
    r.query = NULL;
    assert_int_equal(pusher_api_verify(&r, KEY, SECRET, NOW, NULL), PUSHER_E_API_MISSING);
}

/* A signed GET /x query with n extra parameters "pNN=v" (caller frees). */
static char *signed_with_extras(int n)
{
    char *pairs[64], joined[4096], sign[4200], sig[65], *query;
    size_t np = 0;

    assert_int_not_equal(asprintf(&pairs[np++], "auth_key=%s", KEY), -1);
    assert_int_not_equal(asprintf(&pairs[np++], "auth_timestamp=%d", NOW), -1);
    assert_int_not_equal(asprintf(&pairs[np++], "auth_version=1.0"), -1);
    for (int i = 0; i < n; i++)
        assert_int_not_equal(asprintf(&pairs[np++], "p%02d=v", i), -1);
    qsort(pairs, np, sizeof(pairs[0]), key_cmp);
    join(joined, sizeof(joined), pairs, np, false);
    snprintf(sign, sizeof(sign), "GET\n/x\n%s", joined);
    ref_hmac(SECRET, sign, strlen(sign), sig);
    assert_int_not_equal(asprintf(&query, "%s&auth_signature=%s", joined, sig), -1);
    for (size_t i = 0; i < np; i++)
        free(pairs[i]);
    return query;
}

static void test_api_limits(void **state)
{
    struct req_spec spec = {.method = "GET", .path = "/x"};
    static struct built b;
    char *q, *pad;
    size_t len;

    (void)state;
    /* 3 auth params + auth_signature + 28 = PUSHER_API_MAX_PARAMS. */
    q = signed_with_extras(28);
    assert_int_equal(verify_at("GET", "/x", q, NULL, NOW), 0);
    free(q);
    q = signed_with_extras(29);
    assert_int_equal(verify_at("GET", "/x", q, NULL, NOW), PUSHER_E_API_QUERY);
    free(q);
    /* A signed query of PUSHER_API_QUERY_MAX bytes is read; one more is not. */
    pad = calloc(PUSHER_API_QUERY_MAX + 8, 1);
    strcpy(pad, "pad=");
    spec.extra[0] = pad;
    build(&spec, &b);
    len = strlen(b.query);
    memset(pad + 4, 'a', PUSHER_API_QUERY_MAX - len);
    build(&spec, &b);
    assert_int_equal(strlen(b.query), PUSHER_API_QUERY_MAX);
    assert_int_equal(verify_at("GET", "/x", b.query, NULL, NOW), 0);
    strcat(pad, "a");
    build(&spec, &b);
    assert_int_equal(verify_at("GET", "/x", b.query, NULL, NOW), PUSHER_E_API_QUERY);
    free(pad);
}

static void test_api_status_strerror(void **state)
{
    static const int bad_request[] = {PUSHER_E_API_REQUEST, PUSHER_E_API_QUERY,
                                      PUSHER_E_API_DUPLICATE, PUSHER_E_API_VERSION};
    static const int unauthorized[] = {PUSHER_E_API_MISSING, PUSHER_E_API_KEY,
                                       PUSHER_E_API_TIMESTAMP, PUSHER_E_API_BODY_MD5,
                                       PUSHER_E_API_SIGNATURE};
    static const int parse[] = {PUSHER_E_CHANNEL_DATA, PUSHER_E_USER_ID, PUSHER_E_USER_INFO,
                                PUSHER_E_USER_DATA,    PUSHER_E_ID,      PUSHER_E_WATCHLIST};
    const char *seen[32];
    size_t n = 0;

    (void)state;
    assert_int_equal(pusher_api_status(0), 200);
    assert_string_equal(pusher_strerror(0), "ok");
    for (size_t i = 0; i < ARRAY_SIZE(bad_request); i++) {
        assert_int_equal(pusher_api_status(bad_request[i]), 400);
        seen[n++] = pusher_strerror(bad_request[i]);
    }
    for (size_t i = 0; i < ARRAY_SIZE(unauthorized); i++) {
        assert_int_equal(pusher_api_status(unauthorized[i]), 401);
        seen[n++] = pusher_strerror(unauthorized[i]);
    }
    for (size_t i = 0; i < ARRAY_SIZE(parse); i++) {
        assert_int_equal(pusher_api_status(parse[i]), 400);
        seen[n++] = pusher_strerror(parse[i]);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            assert_string_not_equal(seen[i], seen[j]);
    assert_non_null(pusher_strerror(-1));
    assert_int_equal(pusher_api_status(-1), 400);
}

/* ---- query parameters ---- */

static int qget(const char *query, const char *key, char *out, size_t size)
{
    struct guard g = guard_place(query, strlen(query) + 1);
    int rc = pusher_query_get(g.data, key, out, size);

    guard_free(&g);
    return rc;
}

static void test_query_get(void **state)
{
    char out[16];

    (void)state;
    assert_int_equal(qget("a=1&filter_by_prefix=presence-&info=user_count", "filter_by_prefix", out,
                          sizeof(out)),
                     9);
    assert_string_equal(out, "presence-");
    assert_int_equal(qget("info=user_count%2Cx", "info", out, sizeof(out)), 12);
    assert_string_equal(out, "user_count,x");
    assert_int_equal(qget("x=a+b%20c%2b", "x", out, sizeof(out)), 6);
    assert_string_equal(out, "a b c+");
    assert_int_equal(qget("x=1&x=2", "x", out, sizeof(out)), 1); /* the first */
    assert_string_equal(out, "1");
    assert_int_equal(qget("INFO=u", "info", out, sizeof(out)), 1); /* keys ignore case */
    assert_int_equal(qget("%69nfo=u", "info", out, sizeof(out)), 1);
    assert_int_equal(qget("flag&x=1", "flag", out, sizeof(out)), 0);
    assert_string_equal(out, "");
    assert_int_equal(qget("flag=", "flag", out, sizeof(out)), 0);
    assert_int_equal(qget("&&x=1&&", "x", out, sizeof(out)), 1);
    assert_int_equal(qget("x=a=b", "x", out, sizeof(out)), 3);
    assert_string_equal(out, "a=b");
    /* Absent. */
    assert_int_equal(qget("", "x", out, sizeof(out)), -1);
    assert_int_equal(qget("xx=1&y=2", "x", out, sizeof(out)), -1);
    assert_int_equal(qget("a=x", "x", out, sizeof(out)), -1);
    assert_int_equal(qget("x=1", "", out, sizeof(out)), -1);
    assert_int_equal(pusher_query_get(NULL, "x", out, sizeof(out)), -1);
    assert_string_equal(out, "");
    /* Malformed anywhere, before or after the match. */
    assert_int_equal(qget("x=1&y=%zz", "x", out, sizeof(out)), -2);
    assert_int_equal(qget("y=%2&x=1", "x", out, sizeof(out)), -2);
    assert_int_equal(qget("x=%00", "x", out, sizeof(out)), -2);
    assert_int_equal(qget("x=1&=2", "x", out, sizeof(out)), -2);
    assert_int_equal(qget("x%=1", "x", out, sizeof(out)), -2);
    assert_string_equal(out, "");
    /* Sizes: 15 bytes and the NUL fit 16; 16 do not. */
    assert_int_equal(qget("x=123456789012345", "x", out, sizeof(out)), 15);
    assert_int_equal(qget("x=1234567890123456", "x", out, sizeof(out)), -2);
    assert_string_equal(out, "");
    assert_int_equal(qget("x=%41%42", "x", out, 3), 2);
    assert_string_equal(out, "AB");
    assert_int_equal(qget("x=", "x", out, 0), -2);
}

/* Every prefix of queries with escapes, from the end of a page: no
 * over-read, and the answer is a length, -1 or -2 with out in bounds. */
static void test_query_get_prefixes(void **state)
{
    static const char *const queries[] = {
        "info=user_count%2Csubscription_count&x=%4",
        "a=b+c&info=%7E%&info=2",
        GET_QUERY,
    };
    char buf[256], out[64];

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(queries); i++) {
        for (size_t n = 0; n <= strlen(queries[i]); n++) {
            int rc;

            memcpy(buf, queries[i], n);
            buf[n] = '\0';
            rc = qget(buf, "info", out, sizeof(out));
            assert_true(rc >= -2);
            if (rc >= 0)
                assert_int_equal(strlen(out), rc);
            (void)verify_at("GET", "/x", buf, NULL, NOW);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hmac_hex),
        cmocka_unit_test(test_channel_auth_docs),
        cmocka_unit_test(test_channel_auth_refusals),
        cmocka_unit_test(test_channel_auth_every_byte),
        cmocka_unit_test(test_channel_auth_bad_arguments),
        cmocka_unit_test(test_signin),
        cmocka_unit_test(test_socket_id),
        cmocka_unit_test(test_channel_kind),
        cmocka_unit_test(test_channel_kind_alphabet),
        cmocka_unit_test(test_member_parse_ok),
        cmocka_unit_test(test_member_parse_refusals),
        cmocka_unit_test(test_member_parse_limits),
        cmocka_unit_test(test_user_data_parse_ok),
        cmocka_unit_test(test_user_data_parse_refusals),
        cmocka_unit_test(test_api_docs_vectors),
        cmocka_unit_test(test_api_built),
        cmocka_unit_test(test_api_refusals),
        cmocka_unit_test(test_api_missing),
        cmocka_unit_test(test_api_timestamp),
        cmocka_unit_test(test_api_body),
        cmocka_unit_test(test_api_bad_requests),
        cmocka_unit_test(test_api_limits),
        cmocka_unit_test(test_api_status_strerror),
        cmocka_unit_test(test_query_get),
        cmocka_unit_test(test_query_get_prefixes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
