/* SPDX-License-Identifier: MIT */
/*
 * fuzz_phoenix_msg.c - libFuzzer target for the Phoenix Channels codec.
 * The input is one frame, decoded as vsn 2.0.0 and as 1.0.0 from
 * libFuzzer's exact-size copy, so any read past it is caught. Invariants:
 * no crash or leak; an error leaves the message zero-filled and has its
 * own phx_strerror(); a decoded message has NUL-terminated, valid UTF-8
 * strings within their bounds whose strlen() is their _len, and a payload
 * inside the frame that is one JSON object; re-encoding it with either vsn
 * (and as a reply) and decoding that gives the same message back, except
 * the join_ref a 1.0.0 frame from the server never carries. The input is
 * also read as a vsn value and as a topic.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "json.h"
#include "phoenix_msg.h"
#include "utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool is_zero(const struct phx_msg *m)
{
    static const struct phx_msg zero;

    return memcmp(m, &zero, sizeof(*m)) == 0;
}

static bool text_ok(const char *s, size_t len, size_t max)
{
    return len <= max && strlen(s) == len && utf8_valid(s, len);
}

static void check_decoded(const struct phx_msg *m, const char *p, size_t n)
{
    CHECK(text_ok(m->join_ref, m->join_ref_len, PHX_REF_MAX));
    CHECK(text_ok(m->ref, m->ref_len, PHX_REF_MAX));
    CHECK(text_ok(m->topic, m->topic_len, PHX_TOPIC_MAX));
    CHECK(text_ok(m->event, m->event_len, PHX_EVENT_MAX));
    CHECK(m->has_join_ref || m->join_ref_len == 0);
    CHECK(m->has_ref || m->ref_len == 0);
    CHECK(m->payload >= p && m->payload_len >= 2 && m->payload + m->payload_len <= p + n);
    CHECK(m->payload[0] == '{' && m->payload[m->payload_len - 1] == '}');
    CHECK(json_check(m->payload, m->payload_len) == 0);
}

/* Equal, comparing join_ref only when with_join_ref. */
static bool same(const struct phx_msg *a, const struct phx_msg *b, bool with_join_ref)
{
    if (with_join_ref &&
        (a->has_join_ref != b->has_join_ref || strcmp(a->join_ref, b->join_ref) != 0))
        return false;
    return a->has_ref == b->has_ref && strcmp(a->ref, b->ref) == 0 &&
           strcmp(a->topic, b->topic) == 0 && strcmp(a->event, b->event) == 0 &&
           a->payload_len == b->payload_len && memcmp(a->payload, b->payload, a->payload_len) == 0;
}

/* Encodes m with vsn, decodes it back and compares. */
static void check_round_trip(const struct phx_msg *m, enum phx_vsn vsn)
{
    struct buf b = {0};
    struct phx_msg back;

    phx_encode(&b, vsn, m->has_join_ref ? m->join_ref : NULL, m->has_ref ? m->ref : NULL, m->topic,
               m->event, m->payload, m->payload_len);
    CHECK(phx_decode(vsn, b.data, b.len, &back) == 0);
    CHECK(same(m, &back, vsn == PHX_VSN_2));
    CHECK(vsn == PHX_VSN_2 || !back.has_join_ref);
    buf_release(&b);
}

/* A reply to m, with m's payload as the response: decodes as phx_reply. */
static void check_reply(const struct phx_msg *m, enum phx_vsn vsn)
{
    struct buf b = {0};
    struct phx_msg back;

    phx_encode_reply_to(&b, vsn, m, m->payload_len % 2 == 0, m->payload, m->payload_len);
    CHECK(phx_decode(vsn, b.data, b.len, &back) == 0);
    CHECK(strcmp(back.event, PHX_EV_REPLY) == 0 && strcmp(back.topic, m->topic) == 0);
    CHECK(back.has_ref == m->has_ref && strcmp(back.ref, m->ref) == 0);
    CHECK(back.payload_len > m->payload_len);
    buf_release(&b);
}

static void check_decode(const char *p, size_t n, enum phx_vsn vsn)
{
    struct phx_msg m;
    int rc = phx_decode(vsn, p, n, &m);

    if (rc != 0) {
        CHECK(rc < -PS_EBASE && rc != PHX_E_VSN && is_zero(&m));
        CHECK(strcmp(phx_strerror(rc), phx_strerror(-1)) != 0);
        return;
    }
    check_decoded(&m, p, n);
    check_round_trip(&m, PHX_VSN_2);
    check_round_trip(&m, PHX_VSN_1);
    check_reply(&m, vsn);
    CHECK(phx_is_heartbeat(&m) ==
          (strcmp(m.topic, "phoenix") == 0 && strcmp(m.event, "heartbeat") == 0));
}

/* The input as a C string: a vsn value and a topic. */
static void check_strings(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    enum phx_vsn v = (enum phx_vsn)0;
    const char *name;

    memcpy(s, data, size);
    s[size] = '\0';
    if (phx_vsn_parse(s, &v) == 0)
        CHECK(strcmp(phx_vsn_name(v), s) == 0);
    else
        CHECK(v == (enum phx_vsn)0);
    name = phx_topic_realtime_name(s);
    CHECK(name == NULL || (name == s + 9 && *name != '\0'));
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_decode((const char *)data, size, PHX_VSN_2);
    check_decode((const char *)data, size, PHX_VSN_1);
    check_strings(data, size);
    return 0;
}
