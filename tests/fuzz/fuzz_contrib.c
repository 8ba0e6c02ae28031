/* SPDX-License-Identifier: MIT */
/*
 * fuzz_contrib.c - libFuzzer target for contrib_view_decode(), the parser
 * of a user's global view as it arrives from Redis (published by another
 * node, or read back), contrib_seats_parse(), the parser of another
 * node's session counts read for the session cap, and contrib_hs_parse(),
 * the parser of an HTTP session's record.
 *
 * The input is the message's bytes, read from an exactly sized heap copy
 * (ASan catches a read past the end). Checked: the decoder returns 0 or
 * -EINVAL; on 0 every field is in range (a known status, NUL-terminated
 * strings within their arrays, a non-empty user id), and encoding a
 * contribution made of the decoded fields gives JSON that json_check()
 * accepts. Seats: 0 or -EINVAL; on 0 live <= sessions, and encoding the
 * counts gives back the input's bytes; the same for an HTTP session's
 * record (a holder without spaces, the deadline below 2^53), and for
 * contrib_resume_parse(), the parser of a session's resume record read
 * by the node a client resumes on (a known device, a status other than
 * offline, NUL-terminated fields within their arrays). A broken
 * invariant aborts, which libFuzzer reports as a
 * crash.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "contrib.h"
#include "json.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_view(const struct contrib_view *v)
{
    struct contrib c = {0};
    struct buf b = {0};

    CHECK(v->uid[0] && memchr(v->uid, 0, sizeof(v->uid)));
    CHECK(memchr(v->text, 0, sizeof(v->text)) && memchr(v->emoji, 0, sizeof(v->emoji)));
    CHECK(v->status <= PRESENCE_DND);
    for (int i = 0; i < PRESENCE_DEVICE_COUNT; i++)
        CHECK(v->devices[i] <= PRESENCE_DND);
    c.status = v->status;
    memcpy(c.devices, v->devices, sizeof(c.devices));
    c.text = v->text;
    c.emoji = v->emoji;
    c.custom_expires = v->custom_expires;
    c.sessions = v->sessions;
    contrib_encode(&b, &c);
    CHECK(json_check(b.data, b.len) == 0);
    buf_release(&b);
}

static void check_seats(const char *s, size_t len)
{
    unsigned n, l;
    struct buf b = {0};
    int r = contrib_seats_parse(s, len, &n, &l);

    CHECK(r == 0 || r == -EINVAL);
    if (r != 0)
        return;
    CHECK(l <= n && n <= CONTRIB_SEATS_MAX);
    contrib_seats_encode(&b, n, l);
    CHECK(b.len == len && memcmp(b.data, s, len) == 0);
    buf_release(&b);
}

static void check_hs(const char *s, size_t len)
{
    size_t nl;
    uint64_t deadline;
    struct buf b = {0};
    int r = contrib_hs_parse(s, len, &nl, &deadline);

    CHECK(r == 0 || r == -EINVAL);
    if (r != 0)
        return;
    CHECK(nl >= 1 && nl <= CONTRIB_NODE_MAX && nl < len && !memchr(s, ' ', nl));
    CHECK(deadline < (1ull << 53));
    buf_printf(&b, "%.*s %llu", (int)nl, s, (unsigned long long)deadline);
    CHECK(b.len == len && memcmp(b.data, s, len) == 0);
    buf_release(&b);
}

static void check_resume(const char *s, size_t len)
{
    struct contrib_resume rr;
    struct buf b = {0};
    int r = contrib_resume_parse(s, len, &rr);

    CHECK(r == 0 || r == -EINVAL);
    if (r != 0)
        return;
    CHECK(rr.node[0] && memchr(rr.node, 0, sizeof(rr.node)) && !strchr(rr.node, ' '));
    CHECK(memchr(rr.text, 0, sizeof(rr.text)) && memchr(rr.emoji, 0, sizeof(rr.emoji)));
    CHECK(rr.device < PRESENCE_DEVICE_COUNT);
    CHECK(rr.status > PRESENCE_OFFLINE && rr.status <= PRESENCE_DND);
    contrib_resume_encode(&b, &rr);
    CHECK(b.len == len && memcmp(b.data, s, len) == 0);
    buf_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1);
    struct contrib_view v;
    int r;

    if (!copy)
        return 0;
    memcpy(copy, data, size);
    r = contrib_view_decode(copy, size, &v);
    CHECK(r == 0 || r == -EINVAL);
    if (r == 0)
        check_view(&v);
    check_seats(copy, size);
    check_hs(copy, size);
    check_resume(copy, size);
    free(copy);
    return 0;
}
