/* SPDX-License-Identifier: MIT */
/*
 * fuzz_webhook.c - libFuzzer target for the webhook secret parser, the two
 * verifiers and the bodies. The input is a flags byte and then fields
 * split at '\n': a secret, a webhook-id, a webhook-timestamp, a
 * webhook-signature, a body, an X-Pusher-Key and an X-Pusher-Signature;
 * each field is copied into an exact-size heap string, so any read past it
 * is caught. Invariants: no crash or leak; a parsed key has 24..64 bytes
 * and a refused one is zeroed; what webhook_sign() makes, webhook_verify()
 * accepts, and a given signature header verifies exactly when one of its
 * space-separated entries is that "v1," string; a Pusher signature
 * verifies exactly when it is webhook_pusher_sign()'s; the fields made
 * into Pusher and Standard Webhooks bodies always give strict JSON.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "json.h"
#include "webhook.h"

#define APP_KEY    "fuzz-key"
#define APP_SECRET "fuzz-secret"
#define NOW        1700000000
#define NFIELD     7

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

/* The key of f[0], or a fixed raw one when the secret is refused. */
static void check_key(const char *secret, struct webhook_key *k)
{
    static const unsigned char zero[WEBHOOK_KEY_MAX];
    int rc = webhook_key_parse(k, secret);

    if (rc == 0) {
        CHECK(k->len >= WEBHOOK_KEY_MIN && k->len <= WEBHOOK_KEY_MAX);
        return;
    }
    CHECK(rc < 0 && k->len == 0 && memcmp(k->bytes, zero, sizeof(zero)) == 0);
    CHECK(strcmp(webhook_strerror(rc), webhook_strerror(-1)) != 0);
    CHECK(webhook_key_raw(k, "0123456789abcdef0123456789abcdef", 32) == 0);
}

/* True when some space-separated entry of list is exactly want. */
static bool listed(const char *list, const char *want)
{
    size_t wn = strlen(want);
    const char *p = list;

    while (*p) {
        size_t n = strcspn(p, " ");

        if (n == wn && memcmp(p, want, n) == 0)
            return true;
        p += n;
        p += strspn(p, " ");
    }
    return false;
}

static void check_standard(const struct webhook_key *k, const char *id, const char *ts,
                           const char *sig, const char *body)
{
    char good[WEBHOOK_SIG_LEN + 1];
    size_t n = strlen(body);
    int rc = webhook_verify(k, id, ts, sig, body, n, NOW, WEBHOOK_TOLERANCE_S);
    int64_t t = 0;
    size_t i;

    CHECK(rc == 0 || rc == WEBHOOK_E_ID || rc == WEBHOOK_E_TIMESTAMP || rc == WEBHOOK_E_SIGNATURE);
    for (i = 0; ts[i] >= '0' && ts[i] <= '9' && i < 18; i++)
        t = t * 10 + (ts[i] - '0');
    if (webhook_sign(k, id, NOW, body, n, good) != 0) {
        CHECK(rc == WEBHOOK_E_ID && good[0] == '\0');
        return;
    }
    CHECK(strlen(good) == WEBHOOK_SIG_LEN && strncmp(good, "v1,", 3) == 0);
    CHECK(webhook_verify(k, id, "1700000000", good, body, n, NOW, WEBHOOK_TOLERANCE_S) == 0);
    if (rc == WEBHOOK_E_TIMESTAMP)
        return;
    CHECK(rc != WEBHOOK_E_ID);
    /* ts parsed: the signature is the one for that ts. */
    CHECK(webhook_sign(k, id, t, body, n, good) == 0);
    CHECK((rc == 0) == listed(sig, good));
}

static void check_pusher(const char *key, const char *sig, const char *body)
{
    char good[WEBHOOK_HEX_LEN + 1];
    size_t n = strlen(body);
    bool ok = webhook_pusher_verify(APP_KEY, APP_SECRET, key, sig, body, n);

    webhook_pusher_sign(APP_SECRET, body, n, good);
    CHECK(webhook_pusher_verify(APP_KEY, APP_SECRET, APP_KEY, good, body, n));
    CHECK(ok == (strcmp(key, APP_KEY) == 0 && strcmp(sig, good) == 0));
}

/* Fields as ids, channels and data: the bodies stay strict JSON. */
static void check_bodies(char *const f[NFIELD], uint8_t flags)
{
    struct webhook_pusher_event pe = {
        .kind = (enum webhook_pusher_kind)(flags % 5),
        .channel = f[1],
        .user_id = (flags & 8) ? NULL : f[2],
        .event = f[3],
        .data = f[4],
        .data_len = strlen(f[4]),
        .socket_id = (flags & 16) ? NULL : f[5],
    };
    struct webhook_event ev = {
        .kind = (enum webhook_event_kind)(flags % 6),
        .id = f[1],
        .time_ms = (int64_t)(flags & 0x80 ? -1 : (int64_t)strlen(f[4]) * 86400123),
        .user = f[2],
        .room = f[3],
        .version = strlen(f[5]),
        .epoch = flags,
        .seq = UINT64_MAX - flags,
    };
    struct webhook_batch b = {0};
    struct buf out = {0};
    int rc = webhook_batch_add(&b, &pe, 0);

    CHECK(rc == 1 || rc == WEBHOOK_E_EVENT);
    webhook_batch_finish(&b, NOW * 1000ULL, &out);
    CHECK(json_check(out.data, out.len) == 0);
    out.len = 0;
    rc = webhook_event_body(&ev, &out);
    CHECK(rc == 0 ? json_check(out.data, out.len) == 0 : out.len == 0);
    CHECK(rc == 0 || rc == WEBHOOK_E_EVENT || rc == WEBHOOK_E_TIME);
    webhook_batch_release(&b);
    buf_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *f[NFIELD];
    uint8_t flags = size ? data[0] : 0;
    struct webhook_key k;
    int i;

    split(size ? data + 1 : data, size ? size - 1 : 0, f);
    check_key(f[0], &k);
    check_standard(&k, f[1], f[2], f[3], f[4]);
    check_pusher(f[5], f[6], f[4]);
    check_bodies(f, flags);
    for (i = 0; i < NFIELD; i++)
        free(f[i]);
    return 0;
}
