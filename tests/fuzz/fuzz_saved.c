/* SPDX-License-Identifier: MIT */
/*
 * fuzz_saved.c - libFuzzer target for the decoder of saved sessions
 * (saved.h), the rows a start reads back from the store. The input is a
 * session id, '\n', then the row's data, each copied into an exact-size
 * heap string so that any read past it is caught. Invariants: no crash
 * or leak; a refused row leaves the session empty; an accepted one has
 * valid internal ids (an app's namespace prefix allowed, ns.h) and values, and encoding it gives a
 * row that decodes to the same session and encodes to the same bytes.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "room.h"
#include "saved.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *copy(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);

    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static bool str_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static void check_same(const struct saved_session *a, const struct saved_session *b)
{
    CHECK(strcmp(a->sid, b->sid) == 0 && strcmp(a->user, b->user) == 0);
    CHECK(a->device == b->device && a->manual == b->manual && a->idle == b->idle);
    CHECK(a->http == b->http && a->status_expires_ms == b->status_expires_ms);
    CHECK(str_eq(a->text, b->text) && str_eq(a->emoji, b->emoji));
    CHECK(a->last_seen_ms == b->last_seen_ms && a->last_activity_ms == b->last_activity_ms);
    CHECK(a->offline_seen_ms == b->offline_seen_ms);
    CHECK(a->nrooms == b->nrooms);
    for (size_t i = 0; i < a->nrooms; i++) {
        CHECK(strcmp(a->rooms[i].room, b->rooms[i].room) == 0);
        CHECK(strcmp(a->rooms[i].meta, b->rooms[i].meta) == 0);
        CHECK(a->rooms[i].visible == b->rooms[i].visible);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t k = nl ? (size_t)(nl - data) : 0;
    char *sid = copy(data, k);
    size_t n = nl ? size - k - 1 : size;
    char *row = copy(nl ? nl + 1 : data, n);
    struct saved_session s, t;
    struct buf b1 = {0}, b2 = {0};

    if (saved_decode(sid, row, n, &s) != 0) {
        CHECK(s.rooms == NULL && s.text == NULL && s.nrooms == 0 && s.sid[0] == '\0');
        goto out;
    }
    CHECK(presence_ns_id_valid(s.sid) && presence_ns_id_valid(s.user)); /* internal ids */
    CHECK(presence_custom_check(s.text, s.emoji) == 0);
    for (size_t i = 0; i < s.nrooms; i++)
        CHECK(room_ns_id_valid(s.rooms[i].room) && s.rooms[i].meta != NULL);
    saved_encode(&s, &b1);
    CHECK(saved_decode(sid, b1.data, b1.len, &t) == 0);
    check_same(&s, &t);
    saved_encode(&t, &b2);
    CHECK(b1.len == b2.len && memcmp(b1.data, b2.data, b1.len) == 0);
    saved_release(&t);
    saved_release(&s);
    buf_release(&b1);
    buf_release(&b2);
out:
    free(row);
    free(sid);
    return 0;
}
