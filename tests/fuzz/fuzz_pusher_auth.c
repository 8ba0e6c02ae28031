/* SPDX-License-Identifier: MIT */
/*
 * fuzz_pusher_auth.c - libFuzzer target for the Pusher signatures and
 * names. The input is a flags byte and then fields split at '\n': an API
 * query, a body, channel_data (also read as user_data), a channel name, a
 * query key, a socket id and an auth string; each field is copied into an
 * exact-size heap string, so any read past it is caught. Flag bit 0
 * prefixes the query with valid auth_key, auth_timestamp and auth_version
 * so the body and signature checks are reached; the other bits pick the
 * size limits. Invariants: no crash or leak; every output NUL-terminated,
 * within its size and made of its alphabet; an error leaves the outputs
 * empty; a channel or sign-in auth is accepted exactly when it is the one
 * string computed here with pusher_hmac_hex().
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "fuzz_check.h"
#include "pusher_auth.h"

#define KEY    "fuzz-key"
#define SECRET "fuzz-secret"
#define NOW    1700000000
#define NFIELD 7

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool id_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > PUSHER_USER_ID_MAX)
        return false;
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~:@") == n;
}

static char *field(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);

    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static void split(const uint8_t *data, size_t size, char *f[NFIELD])
{
    size_t i, start = 0, k = 0;

    for (i = 0; i <= size && k < NFIELD; i++) {
        if (i == size || (data[i] == '\n' && k < NFIELD - 1)) {
            f[k++] = field(data + start, i - start);
            start = i + 1;
        }
    }
    while (k < NFIELD)
        f[k++] = field(data, 0);
}

static void check_api(const char *query, const char *body, bool prefix)
{
    static const char head[] = "auth_key=" KEY "&auth_timestamp=1700000000&auth_version=1.0&";
    char *q = malloc(sizeof(head) + strlen(query));
    struct pusher_api_req r = {"POST", "/apps/1/events", q, body, strlen(body)};
    const char *why = NULL;
    int rc, st;

    strcpy(q, prefix ? head : "");
    strcat(q, query);
    rc = pusher_api_verify(&r, KEY, SECRET, NOW, &why);
    st = pusher_api_status(rc);
    CHECK(why != NULL && strcmp(why, pusher_strerror(rc)) == 0);
    CHECK(rc <= 0 && (st == 200) == (rc == 0) && (st == 400 || st == 401 || st == 200));
    free(q);
}

static void check_member(const char *cd, size_t max_info)
{
    char *uid = malloc(PUSHER_USER_ID_MAX + 1), *info = NULL;
    int rc = pusher_member_parse(cd, max_info, uid, PUSHER_USER_ID_MAX + 1, &info);

    if (rc == 0) {
        CHECK(id_ok(uid) && info != NULL && strlen(info) <= max_info);
    } else {
        CHECK(rc < 0 && uid[0] == '\0' && info == NULL);
        CHECK(pusher_strerror(rc) != NULL);
    }
    cJSON_free(info);
    free(uid);
}

static void check_user(const char *ud, size_t max_info, size_t max_watch)
{
    char *id = malloc(PUSHER_USER_ID_MAX + 1), *info = NULL, **w = NULL;
    size_t n = 0, i;
    int rc =
        pusher_user_data_parse(ud, max_info, max_watch, id, PUSHER_USER_ID_MAX + 1, &info, &w, &n);

    if (rc == 0) {
        CHECK(id_ok(id) && info != NULL && strlen(info) <= max_info);
        CHECK(n <= max_watch && (n == 0) == (w == NULL));
        for (i = 0; i < n; i++)
            CHECK(id_ok(w[i]));
    } else {
        CHECK(rc < 0 && id[0] == '\0' && info == NULL && w == NULL && n == 0);
    }
    pusher_watchlist_free(w, n);
    cJSON_free(info);
    free(id);
}

static void check_names(const char *channel, const char *sid)
{
    enum pusher_channel_kind k = pusher_channel_kind(channel);
    bool user = strncmp(channel, PUSHER_USER_CHANNEL_PREFIX, 16) == 0;

    if (k != PUSHER_CH_INVALID)
        CHECK(strlen(channel) <= PUSHER_CHANNEL_MAX && user == (k == PUSHER_CH_USER));
    if (pusher_socket_id_valid(sid))
        CHECK(strlen(sid) <= PUSHER_SOCKET_ID_MAX && strchr(sid, '.') != NULL);
}

static void check_query_get(const char *query, const char *key)
{
    char *out = malloc(32);
    int rc = pusher_query_get(query, key, out, 32);

    if (rc >= 0)
        CHECK(rc < 32 && strlen(out) == (size_t)rc);
    else
        CHECK((rc == -1 || rc == -2) && out[0] == '\0');
    free(out);
}

#define AUTH_LEN (sizeof(KEY) + PUSHER_HEX_LEN + 1)

/* KEY ":" the HMAC of a b c, concatenated, into good. */
static void make_auth(const char *a, const char *b, const char *c, char good[AUTH_LEN])
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n), hex[PUSHER_HEX_LEN + 1];

    snprintf(s, n, "%s%s%s", a, b, c);
    pusher_hmac_hex(SECRET, s, n - 1, hex);
    snprintf(good, AUTH_LEN, KEY ":%s", hex);
    free(s);
}

/* The auths computed here are accepted, and given exactly when it is one. */
static void check_auth(const char *sid, const char *channel, const char *cd, const char *given)
{
    char *prefix = malloc(strlen(sid) + strlen(channel) + 3), good[AUTH_LEN];

    snprintf(prefix, strlen(sid) + strlen(channel) + 3, "%s:%s:", sid, channel);
    make_auth(prefix, cd, "", good);
    CHECK(pusher_channel_auth_ok(KEY, SECRET, sid, channel, cd, good));
    CHECK(pusher_channel_auth_ok(KEY, SECRET, sid, channel, cd, given) == !strcmp(given, good));
    prefix[strlen(prefix) - 1] = '\0'; /* no channel_data: no trailing ':' */
    make_auth(prefix, "", "", good);
    CHECK(pusher_channel_auth_ok(KEY, SECRET, sid, channel, NULL, good));
    CHECK(pusher_channel_auth_ok(KEY, SECRET, sid, channel, NULL, given) == !strcmp(given, good));
    make_auth(sid, "::user::", cd, good);
    CHECK(pusher_signin_ok(KEY, SECRET, sid, cd, good));
    CHECK(pusher_signin_ok(KEY, SECRET, sid, cd, given) == !strcmp(given, good));
    free(prefix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *f[NFIELD];
    uint8_t flags = size ? data[0] : 0;
    size_t max_info = (size_t)(flags >> 4) * 16, max_watch = (flags >> 1) & 7;
    int i;

    split(size ? data + 1 : data, size ? size - 1 : 0, f);
    check_api(f[0], f[1], flags & 1);
    check_member(f[2], max_info);
    check_user(f[2], max_info, max_watch);
    check_names(f[3], f[5]);
    check_query_get(f[0], f[4]);
    check_auth(f[5], f[3], f[2], f[6]);
    for (i = 0; i < NFIELD; i++)
        free(f[i]);
    return 0;
}
