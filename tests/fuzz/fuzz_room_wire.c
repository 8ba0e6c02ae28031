/* SPDX-License-Identifier: MIT */
/*
 * fuzz_room_wire.c - libFuzzer target for the room text between nodes
 * (room_wire.h): what arrives on a room's channel from another node, and
 * a room's state as read from Redis.
 *
 * The input, in an exactly sized heap copy (ASan catches a read past the
 * end), is parsed as a message; when it is one, its body as ops (seq >= 1)
 * or as an ephemeral value (seq 0). The whole input is also parsed as
 * state lines. Checked: parsers answer only 0, -EINVAL or (for line
 * iterators) -ENOENT at the end, always make progress, and every span they
 * return lies inside the input, in range and free of separators; a join
 * op or an ephemeral value encoded again from what was parsed parses back
 * to the same fields. The input is also split at its first two 0x1e bytes
 * into a member's metadata, another node's part before and after (an
 * empty part: none), and the last two as session ids (comma-separated)
 * for the per-connection metadata functions: they answer 0 or -EINVAL,
 * leave metadata without "~metas" as it was, and otherwise make JSON
 * that json_check() accepts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fuzz_check.h"
#include "json.h"
#include "room_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *in_lo, *in_hi; /* the input */

static void check_span(struct room_wire_str s, size_t min, size_t max, bool token)
{
    CHECK(s.len >= min && s.len <= max);
    CHECK(s.len == 0 || (s.p >= in_lo && s.p + s.len <= in_hi));
    for (size_t i = 0; token && i < s.len; i++)
        CHECK(s.p[i] != ' ' && s.p[i] != '\n' && s.p[i] != '\0');
}

static bool same(struct room_wire_str a, struct room_wire_str b)
{
    return a.len == b.len && memcmp(a.p, b.p, a.len) == 0;
}

static void join_round_trip(const struct room_wire_op *op)
{
    char user[ROOM_ID_MAX + 1];
    struct room_wire_op back;
    struct buf b = {0};
    const char *p, *end;

    memcpy(user, op->user.p, op->user.len);
    user[op->user.len] = '\0';
    room_wire_put_join(&b, user, op->joined_at, op->meta.p, op->meta.len);
    p = b.data;
    end = b.data + b.len;
    CHECK(room_wire_op_next(&p, end, &back) == 0 && p == end);
    CHECK(back.kind == ROOM_WIRE_JOIN && back.joined_at == op->joined_at);
    CHECK(back.user.len == op->user.len && memcmp(back.user.p, user, back.user.len) == 0);
    CHECK(back.meta.len == op->meta.len && memcmp(back.meta.p, op->meta.p, back.meta.len) == 0);
    buf_release(&b);
}

static void check_ops(struct room_wire_str body)
{
    const char *p = body.p, *end = body.p + body.len, *before;
    struct room_wire_op op;
    int r;

    for (;;) {
        before = p;
        r = room_wire_op_next(&p, end, &op);
        if (r == -ENOENT)
            break;
        CHECK(r == 0 || r == -EINVAL);
        CHECK(p > before && p <= end);
        if (r != 0 || op.kind == ROOM_WIRE_DROP)
            continue;
        check_span(op.user, 1, ROOM_ID_MAX, true);
        if (op.kind == ROOM_WIRE_JOIN) {
            check_span(op.meta, 1, body.len, false);
            CHECK(!memchr(op.meta.p, '\n', op.meta.len) && !memchr(op.meta.p, '\0', op.meta.len));
            join_round_trip(&op);
        }
    }
    CHECK(p == end);
}

static void check_ephemeral(struct room_wire_str body)
{
    struct room_wire_ephemeral w, back;
    char user[ROOM_ID_MAX + 1], kind[ROOM_KIND_MAX + 1];
    struct buf b = {0};

    if (room_wire_ephemeral_parse(body.p, body.len, &w) != 0)
        return;
    check_span(w.user, 1, ROOM_ID_MAX, true);
    check_span(w.kind, 1, ROOM_KIND_MAX, true);
    check_span(w.data, 0, body.len, false);
    memcpy(user, w.user.p, w.user.len);
    user[w.user.len] = '\0';
    memcpy(kind, w.kind.p, w.kind.len);
    kind[w.kind.len] = '\0';
    room_wire_put_ephemeral(&b, user, kind, w.data.p, w.data.len);
    CHECK(room_wire_ephemeral_parse(b.data, b.len, &back) == 0);
    CHECK(back.user.len == w.user.len && back.kind.len == w.kind.len && same(back.data, w.data));
    buf_release(&b);
}

static void check_cast(struct room_wire_str body)
{
    struct room_wire_cast w, back;
    char user[ROOM_ID_MAX + 1], tag[ROOM_WIRE_TAG_MAX + 1], event[ROOM_WIRE_EVENT_MAX + 1];
    struct buf b = {0};

    if (room_wire_cast_parse(body.p, body.len, &w) != 0)
        return;
    check_span(w.user, 0, ROOM_ID_MAX, true);
    check_span(w.exclude, 0, ROOM_WIRE_TAG_MAX, true);
    check_span(w.event, 1, ROOM_WIRE_EVENT_MAX, false);
    check_span(w.data, 0, body.len, false);
    memcpy(user, w.user.p, w.user.len);
    user[w.user.len] = '\0';
    memcpy(tag, w.exclude.p, w.exclude.len);
    tag[w.exclude.len] = '\0';
    memcpy(event, w.event.p, w.event.len);
    event[w.event.len] = '\0';
    room_wire_put_cast(&b, user, tag, event, w.data.p, w.data.len);
    CHECK(room_wire_cast_parse(b.data, b.len, &back) == 0);
    CHECK(same(back.event, w.event) && same(back.data, w.data) && back.user.len == w.user.len);
    buf_release(&b);
}

static void check_state(const char *text, size_t len)
{
    const char *p = text, *end = text + len, *before;
    struct room_wire_state st;
    int r;

    for (;;) {
        before = p;
        r = room_wire_state_next(&p, end, &st);
        if (r == -ENOENT)
            break;
        CHECK(r == 0 || r == -EINVAL);
        CHECK(p > before && p <= end);
        if (r == 0) {
            check_span(st.node, 1, ROOM_WIRE_NODE_MAX, true);
            check_span(st.user, 1, ROOM_ID_MAX, true);
            check_span(st.meta, 1, len, false);
        }
    }
}

static bool names_values(const char *s, size_t n)
{
    return n > 0 && memmem(s, n, "\"" ROOM_SESSION_VALUES "\"", 8) != NULL;
}

/* The per-connection metadata functions on the parts of the input. */
static void check_meta(const char *in, size_t size)
{
    const char *part[3] = {in, NULL, NULL}, *sids[8];
    size_t len[3] = {size, 0, 0}, n = 0;
    char ids[256];
    struct buf b = {0};
    int r;

    for (int i = 1; i < 3; i++) {
        const char *sep = memchr(part[i - 1], 0x1e, len[i - 1]);
        if (!sep)
            break;
        part[i] = sep + 1;
        len[i] = len[i - 1] - (size_t)(part[i] - part[i - 1]);
        len[i - 1] = (size_t)(sep - part[i - 1]);
    }
    if (part[2]) { /* session ids from the last part */
        size_t m = MIN(len[2], sizeof(ids) - 1);
        memcpy(ids, part[2], m);
        ids[m] = '\0';
        for (char *t = strtok(ids, ","); t && n < 8; t = strtok(NULL, ","))
            sids[n++] = t;
    }
    r = room_wire_meta_own(part[0], len[0], sids, n, &b);
    CHECK(r == 0 || r == -EINVAL);
    CHECK(r != 0 || names_values(part[0], len[0]) ||
          (b.len == len[0] && (len[0] == 0 || memcmp(b.data, part[0], len[0]) == 0)));
    CHECK(r != 0 || !names_values(part[0], len[0]) || json_check(b.data, b.len) == 0);
    buf_release(&b);
    r = room_wire_meta_swap(part[0], len[0], len[1] ? part[1] : NULL, len[1],
                            len[2] ? part[2] : NULL, len[2], &b);
    CHECK(r == 0 || r == -EINVAL);
    if (r == 0 && (names_values(part[0], len[0]) || names_values(part[1], len[1]) ||
                   names_values(part[2], len[2])))
        CHECK(json_check(b.data, b.len) == 0);
    buf_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1);
    struct room_wire_msg m;
    int r;

    if (!copy)
        return 0;
    memcpy(copy, data, size);
    in_lo = copy;
    in_hi = copy + size;
    r = room_wire_msg_parse(copy, size, &m);
    CHECK(r == 0 || r == -EINVAL);
    if (r == 0) {
        check_span(m.node, 1, ROOM_WIRE_NODE_MAX, true);
        check_span(m.room, 1, ROOM_ID_MAX, true);
        check_span(m.body, 0, size, false);
        if (m.seq == 0 && room_wire_is_cast(m.body.p, m.body.len))
            check_cast(m.body);
        else if (m.seq == 0)
            check_ephemeral(m.body);
        else
            check_ops(m.body);
    }
    check_state(copy, size);
    check_meta(copy, size);
    free(copy);
    return 0;
}
