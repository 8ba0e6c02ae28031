/* SPDX-License-Identifier: MIT */
/*
 * pusher_auth.c - Pusher Channels signatures and names, on libcrypto and
 * cJSON. A signature check builds the signed string in a struct buf, checks
 * the shape of the hex it was given, and compares digests with
 * CRYPTO_memcmp(). JSON meets json_check() before cJSON. The API query is
 * decoded into one scratch allocation, sorted, and signed without being
 * escaped again. Exports only what pusher_auth.h declares; keeps no state.
 */
#include "pusher_auth.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "buf.h"
#include "json.h"
#include "util.h"

#define SHA256_LEN    32u
#define MD5_LEN       16u
#define SAFE_INT_MAX  9007199254740991LL /* 2^53 - 1: the largest exact integer double */
#define TS_DIGITS_MAX 18u                /* digits in auth_timestamp: no int64 overflow */

typedef bool char_ok(unsigned char c);

/* ---- hex and HMAC ---- */

static void hex_encode(const unsigned char *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

/* True when s is exactly n lowercase hex digits (stops at a NUL). */
static bool is_lower_hex(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[n] == '\0';
}

void pusher_hmac_hex(const char *secret, const void *data, size_t n, char out[PUSHER_HEX_LEN + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    size_t klen = strlen(secret);

    /* SHA-256 is always there: HMAC() fails only when it cannot allocate. */
    if (klen > INT_MAX ||
        !HMAC(EVP_sha256(), secret, (int)klen, data ? data : (const void *)"", n, md, &len) ||
        len != SHA256_LEN)
        abort();
    hex_encode(md, len, out);
}

/* True when hex is the 64 lowercase digits of the HMAC of (data, n). */
static bool hex_sig_ok(const char *secret, const void *data, size_t n, const char *hex)
{
    char want[PUSHER_HEX_LEN + 1];

    if (!is_lower_hex(hex, PUSHER_HEX_LEN))
        return false;
    pusher_hmac_hex(secret, data, n, want);
    return CRYPTO_memcmp(want, hex, PUSHER_HEX_LEN) == 0;
}

/* ---- channel and sign-in signatures ---- */

/* True when auth is "<app_key>:<hex>" and hex signs the bytes of b. */
static bool auth_ok(const char *app_key, const char *secret, const struct buf *b, const char *auth)
{
    size_t klen = strlen(app_key);

    if (klen == 0 || secret[0] == '\0')
        return false;
    if (strncmp(auth, app_key, klen) != 0 || auth[klen] != ':')
        return false;
    return hex_sig_ok(secret, b->data, b->len, auth + klen + 1);
}

bool pusher_channel_auth_ok(const char *app_key, const char *secret, const char *socket_id,
                            const char *channel, const char *channel_data, const char *auth)
{
    struct buf b = {0};
    bool ok;

    if (!app_key || !secret || !socket_id || !channel || !auth)
        return false;
    buf_append_str(&b, socket_id);
    buf_append(&b, ":", 1);
    buf_append_str(&b, channel);
    if (channel_data) {
        buf_append(&b, ":", 1);
        buf_append_str(&b, channel_data);
    }
    ok = auth_ok(app_key, secret, &b, auth);
    buf_release(&b);
    return ok;
}

bool pusher_signin_ok(const char *app_key, const char *secret, const char *socket_id,
                      const char *user_data, const char *auth)
{
    struct buf b = {0};
    bool ok;

    if (!app_key || !secret || !socket_id || !user_data || !auth)
        return false;
    buf_append_str(&b, socket_id);
    buf_append_str(&b, "::user::");
    buf_append_str(&b, user_data);
    ok = auth_ok(app_key, secret, &b, auth);
    buf_release(&b);
    return ok;
}

/* ---- names ---- */

static bool is_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* The channel-name alphabet: A-Z a-z 0-9 _ - = @ , . ; */
static bool channel_char(unsigned char c)
{
    return is_alnum(c) || c == '_' || c == '-' || c == '=' || c == '@' || c == ',' || c == '.' ||
           c == ';';
}

/* The user id alphabet: A-Z a-z 0-9 - _ . ~ : @ */
static bool id_char(unsigned char c)
{
    return is_alnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == ':' || c == '@';
}

/* True when s is 1..max bytes, each accepted by ok. */
static bool all_of(const char *s, size_t max, char_ok *ok)
{
    size_t n;

    for (n = 0; s[n]; n++)
        if (n >= max || !ok((unsigned char)s[n]))
            return false;
    return n > 0;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static size_t digits(const char *s)
{
    size_t n = 0;

    while (s[n] >= '0' && s[n] <= '9')
        n++;
    return n;
}

bool pusher_socket_id_valid(const char *s)
{
    size_t a, b;

    if (s == NULL)
        return false;
    a = digits(s);
    if (a == 0 || s[a] != '.')
        return false;
    b = digits(s + a + 1);
    return b > 0 && s[a + 1 + b] == '\0' && a + 1 + b <= PUSHER_SOCKET_ID_MAX;
}

enum pusher_channel_kind pusher_channel_kind(const char *name)
{
    static const struct {
        const char *prefix;
        enum pusher_channel_kind kind;
    } prefixes[] = {
        {"private-encrypted-", PUSHER_CH_ENCRYPTED}, /* before "private-", which it extends */
        {"private-", PUSHER_CH_PRIVATE},
        {"presence-", PUSHER_CH_PRESENCE},
    };
    const size_t user_len = sizeof(PUSHER_USER_CHANNEL_PREFIX) - 1;
    size_t i;

    if (name == NULL)
        return PUSHER_CH_INVALID;
    if (has_prefix(name, PUSHER_USER_CHANNEL_PREFIX))
        return all_of(name + user_len, PUSHER_USER_ID_MAX, channel_char) ? PUSHER_CH_USER
                                                                         : PUSHER_CH_INVALID;
    if (!all_of(name, PUSHER_CHANNEL_MAX, channel_char))
        return PUSHER_CH_INVALID;
    for (i = 0; i < ARRAY_SIZE(prefixes); i++)
        if (has_prefix(name, prefixes[i].prefix))
            return name[strlen(prefixes[i].prefix)] ? prefixes[i].kind : PUSHER_CH_INVALID;
    return PUSHER_CH_PUBLIC;
}

/* ---- channel_data and user_data ---- */

/* text parsed as one strict JSON object, or NULL when it is not one. */
static cJSON *parse_object(const char *text)
{
    cJSON *root;

    if (text == NULL || json_check(text, strlen(text)) != 0)
        return NULL;
    root = cJSON_Parse(text);
    if (root != NULL && !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        root = NULL;
    }
    return root;
}

/* Sets *out to the member of obj named exactly key (NULL when absent);
 * false when key occurs twice, which would leave its meaning to whichever
 * parser reads it. */
static bool get_once(const cJSON *obj, const char *key, const cJSON **out)
{
    const cJSON *it;

    *out = NULL;
    for (it = obj->child; it != NULL; it = it->next) {
        if (it->string == NULL || strcmp(it->string, key) != 0)
            continue;
        if (*out != NULL)
            return false;
        *out = it;
    }
    return true;
}

static void clear_id(char *id, size_t size)
{
    if (id != NULL && size > 0)
        id[0] = '\0';
}

/* Copies s into out (size bytes); false when s is not a valid user id or
 * does not fit. */
static bool id_copy(const char *s, char *out, size_t size)
{
    size_t n = strlen(s);

    if (!all_of(s, PUSHER_USER_ID_MAX, id_char) || n >= size)
        return false;
    memcpy(out, s, n + 1);
    return true;
}

/* The user id in v, a string or an exact integer (as its decimal text),
 * copied into out; false when there is none or it is invalid. */
static bool user_id_of(const cJSON *v, char *out, size_t size)
{
    char num[24];
    int64_t i;

    if (cJSON_IsString(v))
        return id_copy(v->valuestring, out, size);
    if (json_number_i64(v, -SAFE_INT_MAX, SAFE_INT_MAX, &i) != 0)
        return false;
    snprintf(num, sizeof(num), "%" PRId64, i);
    return id_copy(num, out, size);
}

/* Stores the compact JSON text of v ("{}" for NULL, cJSON's heap) in *out,
 * or frees it when out is NULL. PUSHER_E_USER_INFO when over max bytes. */
static int info_out(const cJSON *v, size_t max, char **out)
{
    char *text;

    if (v == NULL) {
        text = cJSON_malloc(3);
        if (text != NULL)
            memcpy(text, "{}", 3);
    } else {
        text = cJSON_PrintUnformatted(v);
    }
    if (text == NULL)
        abort(); /* printing a parsed tree fails only on out-of-memory */
    if (strlen(text) > max) {
        cJSON_free(text);
        return PUSHER_E_USER_INFO;
    }
    if (out != NULL)
        *out = text;
    else
        cJSON_free(text);
    return 0;
}

static int member_fill(const cJSON *root, size_t max_info, char *user_id, size_t uid_size,
                       char **user_info)
{
    const cJSON *uid, *info;

    if (!get_once(root, "user_id", &uid) || !get_once(root, "user_info", &info))
        return PUSHER_E_CHANNEL_DATA;
    if (!user_id_of(uid, user_id, uid_size))
        return PUSHER_E_USER_ID;
    return info_out(info, max_info, user_info);
}

int pusher_member_parse(const char *channel_data, size_t max_info, char *user_id, size_t uid_size,
                        char **user_info)
{
    cJSON *root = parse_object(channel_data);
    int rc;

    clear_id(user_id, uid_size);
    if (user_info != NULL)
        *user_info = NULL;
    if (root == NULL)
        return PUSHER_E_CHANNEL_DATA;
    rc = member_fill(root, max_info, user_id, uid_size, user_info);
    cJSON_Delete(root);
    if (rc != 0)
        clear_id(user_id, uid_size);
    return rc;
}

/* True when v is absent, or an array of at most max valid user ids. */
static bool watchlist_ok(const cJSON *v, size_t max)
{
    const cJSON *it;
    size_t n = 0;

    if (v == NULL)
        return true;
    if (!cJSON_IsArray(v))
        return false;
    for (it = v->child; it != NULL; it = it->next)
        if (++n > max || !cJSON_IsString(it) ||
            !all_of(it->valuestring, PUSHER_USER_ID_MAX, id_char))
            return false;
    return true;
}

/* Copies the watchlist_ok() array v into *out and *n (NULL, 0 when none). */
static void watchlist_copy(const cJSON *v, char ***out, size_t *n)
{
    const cJSON *it;
    size_t count = 0, i = 0;
    char **list;

    for (it = v ? v->child : NULL; it != NULL; it = it->next)
        count++;
    if (count == 0)
        return;
    list = xcalloc(count, sizeof(*list));
    for (it = v->child; it != NULL; it = it->next)
        list[i++] = xstrdup(it->valuestring);
    *out = list;
    *n = count;
}

/* The outputs of pusher_user_data_parse(), to keep argument lists short. */
struct user_out {
    char *id;          /* the caller's id buffer */
    size_t id_size;    /* bytes in id */
    char **user_info;  /* NULL when not wanted */
    char ***watchlist; /* NULL when not wanted */
    size_t *nwatch;    /* NULL when watchlist is */
};

static void user_out_clear(const struct user_out *o)
{
    clear_id(o->id, o->id_size);
    if (o->user_info != NULL)
        *o->user_info = NULL;
    if (o->watchlist != NULL)
        *o->watchlist = NULL;
    if (o->nwatch != NULL)
        *o->nwatch = 0;
}

static int user_fill(const cJSON *root, size_t max_info, size_t max_watch, const struct user_out *o)
{
    const cJSON *id, *info, *watch;
    int rc;

    if (!get_once(root, "id", &id) || !get_once(root, "user_info", &info) ||
        !get_once(root, "watchlist", &watch))
        return PUSHER_E_USER_DATA;
    if (!cJSON_IsString(id) || !id_copy(id->valuestring, o->id, o->id_size))
        return PUSHER_E_ID;
    if (!watchlist_ok(watch, max_watch))
        return PUSHER_E_WATCHLIST;
    rc = info_out(info, max_info, o->user_info);
    if (rc == 0 && o->watchlist != NULL && o->nwatch != NULL)
        watchlist_copy(watch, o->watchlist, o->nwatch);
    return rc;
}

int pusher_user_data_parse(const char *user_data, size_t max_info, size_t max_watch, char *id,
                           size_t id_size, char **user_info, char ***watchlist, size_t *nwatch)
{
    const struct user_out o = {id, id_size, user_info, watchlist, nwatch};
    cJSON *root = parse_object(user_data);
    int rc;

    user_out_clear(&o);
    if (root == NULL)
        return PUSHER_E_USER_DATA;
    rc = user_fill(root, max_info, max_watch, &o);
    cJSON_Delete(root);
    if (rc != 0)
        clear_id(id, id_size);
    return rc;
}

void pusher_watchlist_free(char **watchlist, size_t n)
{
    size_t i;

    if (watchlist == NULL)
        return;
    for (i = 0; i < n; i++)
        free(watchlist[i]);
    free(watchlist);
}

/* ---- query strings ---- */

/* Bytes of the raw query: a key or a value, still encoded. */
struct span {
    const char *p; /* first byte, inside the query */
    size_t n;      /* bytes */
};

/* Splits the next non-empty '&'-separated piece off *q into its key and
 * value, before and after its first '=' (no '=': an empty value). Returns
 * false when the query is used up. */
static bool next_param(const char **q, struct span *key, struct span *val)
{
    const char *s = *q, *end, *eq;

    while (*s == '&')
        s++;
    *q = s;
    if (*s == '\0')
        return false;
    end = s + strcspn(s, "&");
    eq = memchr(s, '=', (size_t)(end - s));
    key->p = s;
    key->n = (size_t)((eq ? eq : end) - s);
    val->p = eq ? eq + 1 : end;
    val->n = (size_t)(end - val->p);
    *q = end;
    return true;
}

/* Decodes the byte of sp at *i: '+' is a space, %XY the byte 0xXY (hex of
 * either case). Returns it and advances *i, or -1 for an escape that is
 * not %XY or one that decodes to NUL. */
static int form_byte(struct span sp, size_t *i)
{
    unsigned char c = (unsigned char)sp.p[*i];
    int hi, lo;

    if (c != '%') {
        (*i)++;
        return c == '+' ? ' ' : c;
    }
    if (sp.n - *i < 3)
        return -1;
    hi = hex_digit_value((unsigned char)sp.p[*i + 1]);
    lo = hex_digit_value((unsigned char)sp.p[*i + 2]);
    if (hi < 0 || lo < 0 || (hi | lo) == 0)
        return -1;
    *i += 3;
    return hi << 4 | lo;
}

static int ascii_lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* Decodes sp into out (room for sp.n + 1 bytes; NULL to only measure),
 * NUL-terminated, lower-casing ASCII when lower. Returns the decoded
 * length, or -1 when malformed. */
static long form_decode(struct span sp, char *out, bool lower)
{
    size_t i = 0, o = 0;
    int c;

    while (i < sp.n) {
        c = form_byte(sp, &i);
        if (c < 0)
            return -1;
        if (out != NULL)
            out[o] = (char)(lower ? ascii_lower(c) : c);
        o++;
    }
    if (out != NULL)
        out[o] = '\0';
    return (long)o;
}

/* 1 when the well-formed key sp decodes to key ignoring ASCII case, else 0. */
static int form_key_eq(struct span sp, const char *key)
{
    size_t i = 0, k = 0;

    while (i < sp.n) {
        int c = form_byte(sp, &i);

        if (key[k] == '\0' || ascii_lower(c) != ascii_lower((unsigned char)key[k]))
            return 0;
        k++;
    }
    return key[k] == '\0';
}

/* True when the piece (k, v) is well formed: a non-empty key, both decode. */
static bool param_ok(struct span k, struct span v)
{
    return k.n > 0 && form_decode(k, NULL, false) >= 0 && form_decode(v, NULL, false) >= 0;
}

/* Decodes the value v into out (size bytes). The length, or -2 when it
 * does not fit. */
static int value_copy(struct span v, char *out, size_t size)
{
    long n = form_decode(v, NULL, false);

    if (n < 0 || (size_t)n >= size || n > INT_MAX)
        return -2;
    form_decode(v, out, false);
    return (int)n;
}

int pusher_query_get(const char *query, const char *key, char *out, size_t out_size)
{
    const char *q = query ? query : "";
    struct span k, v, hit = {NULL, 0};
    bool found = false;

    if (out_size > 0)
        out[0] = '\0';
    while (next_param(&q, &k, &v)) {
        if (!param_ok(k, v))
            return -2;
        if (!found && form_key_eq(k, key)) {
            hit = v;
            found = true;
        }
    }
    return found ? value_copy(hit, out, out_size) : -1;
}

/* ---- API request signatures ---- */

/* One decoded parameter of an API query. */
struct param {
    const char *key; /* lower-cased, NUL-terminated, in the query's scratch */
    const char *val; /* NUL-terminated, in the query's scratch */
};

/* A decoded API query; scratch is the caller's to free(). */
struct query {
    struct param p[PUSHER_API_MAX_PARAMS]; /* sorted by key once parsed */
    size_t n;                              /* parameters in p */
    char *scratch;                         /* the decoded bytes of every parameter */
};

/* Decodes (k, v) into the scratch at offset *o as the next parameter. */
static int param_add(struct query *q, struct span k, struct span v, size_t *o)
{
    char *key = q->scratch + *o, *val;
    long kn, vn;

    if (q->n == PUSHER_API_MAX_PARAMS || !param_ok(k, v))
        return PUSHER_E_API_QUERY;
    kn = form_decode(k, key, true);
    val = key + kn + 1;
    vn = form_decode(v, val, false);
    *o += (size_t)kn + 1 + (size_t)vn + 1;
    q->p[q->n].key = key;
    q->p[q->n].val = val;
    q->n++;
    return 0;
}

static int param_cmp(const void *a, const void *b)
{
    return strcmp(((const struct param *)a)->key, ((const struct param *)b)->key);
}

/* Sorts q by key; PUSHER_E_API_DUPLICATE when a key occurs twice. */
static int query_sort(struct query *q)
{
    size_t i;

    qsort(q->p, q->n, sizeof(q->p[0]), param_cmp);
    for (i = 1; i < q->n; i++)
        if (strcmp(q->p[i - 1].key, q->p[i].key) == 0)
            return PUSHER_E_API_DUPLICATE;
    return 0;
}

/* Decodes the raw query into q. Each parameter needs at most its encoded
 * bytes and two NULs, which sizes the scratch. */
static int query_parse(const char *query, struct query *q)
{
    const char *s = query ? query : "";
    size_t len = strnlen(s, PUSHER_API_QUERY_MAX + 1), o = 0;
    struct span k, v;
    int rc = 0;

    if (len > PUSHER_API_QUERY_MAX)
        return PUSHER_E_API_QUERY;
    q->scratch = xmalloc(len + 2 * PUSHER_API_MAX_PARAMS + 2);
    while (rc == 0 && next_param(&s, &k, &v))
        rc = param_add(q, k, v, &o);
    return rc == 0 ? query_sort(q) : rc;
}

static const char *query_find(const struct query *q, const char *key)
{
    size_t i;

    for (i = 0; i < q->n; i++)
        if (strcmp(q->p[i].key, key) == 0)
            return q->p[i].val;
    return NULL;
}

/* Appends method "\n" path "\n" and the sorted key=value pairs but
 * auth_signature, joined with '&', to b: the string to sign. */
static void sign_input(const struct pusher_api_req *r, const struct query *q, struct buf *b)
{
    bool first = true;
    size_t i;

    buf_append_str(b, r->method);
    buf_append(b, "\n", 1);
    buf_append_str(b, r->path);
    buf_append(b, "\n", 1);
    for (i = 0; i < q->n; i++) {
        if (strcmp(q->p[i].key, "auth_signature") == 0)
            continue;
        if (!first)
            buf_append(b, "&", 1);
        buf_append_str(b, q->p[i].key);
        buf_append(b, "=", 1);
        buf_append_str(b, q->p[i].val);
        first = false;
    }
}

static bool signature_ok(const struct pusher_api_req *r, const struct query *q, const char *secret,
                         const char *sig)
{
    struct buf b = {0};
    bool ok;

    sign_input(r, q, &b);
    ok = hex_sig_ok(secret, b.data, b.len, sig);
    buf_release(&b);
    return ok;
}

/* True when s is 1..18 decimal digits less than the skew from now. The
 * difference is taken in unsigned arithmetic, so no now_s overflows it. */
static bool timestamp_fresh(const char *s, int64_t now)
{
    int64_t ts = 0;
    uint64_t diff;
    size_t i;

    for (i = 0; s[i] != '\0'; i++) {
        if (i >= TS_DIGITS_MAX || s[i] < '0' || s[i] > '9')
            return false;
        ts = ts * 10 + (s[i] - '0');
    }
    if (i == 0)
        return false;
    diff = ts <= now ? (uint64_t)now - (uint64_t)ts : (uint64_t)ts - (uint64_t)now;
    return diff < PUSHER_API_MAX_SKEW;
}

/* Checks body_md5 (md5, NULL when absent) against the body. A libcrypto
 * without MD5 (a FIPS-only configuration) fails closed rather than abort. */
static int body_md5_check(const struct pusher_api_req *r, const char *md5)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    unsigned int len = 0;

    if (md5 == NULL)
        return r->body_len > 0 ? PUSHER_E_API_BODY_MD5 : 0;
    if (!is_lower_hex(md5, 2 * MD5_LEN))
        return PUSHER_E_API_BODY_MD5;
    if (EVP_Digest(r->body ? r->body : "", r->body_len, md, &len, EVP_md5(), NULL) != 1 ||
        len != MD5_LEN)
        return PUSHER_E_API_BODY_MD5;
    hex_encode(md, len, hex);
    return CRYPTO_memcmp(hex, md5, 2 * MD5_LEN) == 0 ? 0 : PUSHER_E_API_BODY_MD5;
}

static int request_check(const struct pusher_api_req *r, const char *app_key, const char *secret)
{
    if (r == NULL || r->method == NULL || r->path == NULL || r->method[0] == '\0' ||
        r->path[0] == '\0' || (r->body == NULL && r->body_len > 0))
        return PUSHER_E_API_REQUEST;
    if (app_key == NULL || app_key[0] == '\0')
        return PUSHER_E_API_KEY;
    if (secret == NULL || secret[0] == '\0')
        return PUSHER_E_API_SIGNATURE;
    return 0;
}

static int params_check(const struct pusher_api_req *r, const struct query *q, const char *app_key,
                        const char *secret, int64_t now_s)
{
    const char *key = query_find(q, "auth_key"), *ts = query_find(q, "auth_timestamp");
    const char *ver = query_find(q, "auth_version"), *sig = query_find(q, "auth_signature");
    int rc;

    if (key == NULL || ts == NULL || ver == NULL || sig == NULL)
        return PUSHER_E_API_MISSING;
    if (strcmp(ver, PUSHER_API_VERSION) != 0)
        return PUSHER_E_API_VERSION;
    if (strcmp(key, app_key) != 0)
        return PUSHER_E_API_KEY;
    if (!timestamp_fresh(ts, now_s))
        return PUSHER_E_API_TIMESTAMP;
    rc = body_md5_check(r, query_find(q, "body_md5"));
    if (rc == 0 && !signature_ok(r, q, secret, sig))
        rc = PUSHER_E_API_SIGNATURE;
    return rc;
}

int pusher_api_verify(const struct pusher_api_req *r, const char *app_key, const char *secret,
                      int64_t now_s, const char **why)
{
    struct query q = {.n = 0, .scratch = NULL};
    int rc = request_check(r, app_key, secret);

    if (rc == 0)
        rc = query_parse(r->query, &q);
    if (rc == 0)
        rc = params_check(r, &q, app_key, secret, now_s);
    free(q.scratch);
    if (why != NULL)
        *why = pusher_strerror(rc);
    return rc;
}

int pusher_api_status(int err)
{
    switch (err) {
    case 0:
        return 200;
    case PUSHER_E_API_MISSING:
    case PUSHER_E_API_KEY:
    case PUSHER_E_API_TIMESTAMP:
    case PUSHER_E_API_BODY_MD5:
    case PUSHER_E_API_SIGNATURE:
        return 401;
    default:
        return 400;
    }
}

const char *pusher_strerror(int err)
{
    switch (err) {
    case 0:
        return "ok";
    case PUSHER_E_CHANNEL_DATA:
        return "channel_data must be a JSON object";
    case PUSHER_E_USER_ID:
        return "user_id must be a string or an integer of 1 to 128 characters "
               "A-Z a-z 0-9 - _ . ~ : @";
    case PUSHER_E_USER_INFO:
        return "user_info is too large";
    case PUSHER_E_USER_DATA:
        return "user_data must be a JSON object";
    case PUSHER_E_ID:
        return "user_data id must be a string of 1 to 128 characters A-Z a-z 0-9 - _ . ~ : @";
    case PUSHER_E_WATCHLIST:
        return "watchlist must be an array of valid user ids, within the allowed count";
    case PUSHER_E_API_REQUEST:
        return "invalid request";
    case PUSHER_E_API_QUERY:
        return "malformed query string";
    case PUSHER_E_API_DUPLICATE:
        return "duplicated query parameter";
    case PUSHER_E_API_VERSION:
        return "unsupported auth_version: only 1.0 is accepted";
    case PUSHER_E_API_MISSING:
        return "auth_key, auth_timestamp, auth_version and auth_signature are required";
    case PUSHER_E_API_KEY:
        return "unknown auth_key";
    case PUSHER_E_API_TIMESTAMP:
        return "auth_timestamp is not within 600 seconds of the server time";
    case PUSHER_E_API_BODY_MD5:
        return "body_md5 is missing or does not match the body";
    case PUSHER_E_API_SIGNATURE:
        return "invalid signature";
    default:
        return "invalid request";
    }
}
