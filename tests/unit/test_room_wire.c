/* SPDX-License-Identifier: MIT */
/*
 * test_room_wire.c - the text of a room between nodes (room_wire.h):
 * messages, ops, state lines and ephemeral values, good and bad, each
 * parsed from a copy that ends at a guard page (a read past the end
 * crashes), and the encoders read back by the parsers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "guard.h"
#include "room_wire.h"

#define STR_EQ(s, lit) \
    (assert_int_equal((s).len, strlen(lit)), assert_memory_equal((s).p, lit, (s).len))

static int msg(const char *text, struct room_wire_msg *w)
{
    struct guard g = guard_place(text, strlen(text));
    int r = room_wire_msg_parse(g.data, strlen(text), w);

    if (r == 0) { /* point into the literal: the guard copy goes away */
        w->node.p = text + (w->node.p - g.data);
        w->room.p = text + (w->room.p - g.data);
        w->body.p = text + (w->body.p - g.data);
    }
    guard_free(&g);
    return r;
}

static void test_messages(void **state)
{
    struct room_wire_msg w;

    (void)state;
    assert_int_equal(msg("17 a.00ff doc-42\n+ ann 1764406800000 {}", &w), 0);
    assert_int_equal(w.seq, 17);
    STR_EQ(w.node, "a.00ff");
    STR_EQ(w.room, "doc-42");
    STR_EQ(w.body, "+ ann 1764406800000 {}");
    assert_int_equal(msg("0 b.1 r\nann cursor {\"x\":1}", &w), 0);
    assert_int_equal(w.seq, 0);
    STR_EQ(w.body, "ann cursor {\"x\":1}");
    assert_int_equal(msg("18446744073709551615 n r\n", &w), 0);
    assert_true(w.seq == UINT64_MAX);
    assert_int_equal(w.body.len, 0);

    const char *bad[] = {
        "",
        "17",
        "17 a.1",
        "17 a.1 r",                     /* no newline */
        "x a.1 r\n",                    /* seq not a number */
        "-1 a.1 r\n",                   /* nor this */
        "18446744073709551616 a.1 r\n", /* over 64 bits */
        "17  r\n",                      /* empty node */
        "17 a.1 \n",                    /* empty room */
        "17 a.1 r s\n",                 /* a space in the room */
        " 17 a.1 r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        if (msg(bad[i], &w) != -EINVAL)
            fail_msg("accepted %s", bad[i]);

    char big[400];
    memset(big, 'n', sizeof(big));
    memcpy(big, "1 ", 2);
    memcpy(big + 2 + ROOM_WIRE_NODE_MAX + 1, " r\n", 4); /* node one byte too long */
    assert_int_equal(msg(big, &w), -EINVAL);
    memcpy(big + 2 + ROOM_WIRE_NODE_MAX, " r\n", 4); /* exactly the longest */
    assert_int_equal(msg(big, &w), 0);
    assert_int_equal(w.node.len, ROOM_WIRE_NODE_MAX);
}

/* Parses every op of text (in a guard copy, kept until the next call:
 * the ops point into it) into out; returns how many were ops and counts
 * the lines that were not. */
static size_t ops(const char *text, struct room_wire_op *out, size_t max, size_t *bad)
{
    static struct guard g;
    const char *p, *end;
    size_t n = 0;
    int r;

    if (g.base)
        guard_free(&g);
    g = guard_place(text, strlen(text));
    p = g.data;
    end = g.data + strlen(text);
    *bad = 0;
    while ((r = room_wire_op_next(&p, end, &out[n < max ? n : max - 1])) != -ENOENT) {
        if (r == 0)
            n++;
        else
            (*bad)++;
        assert_true(r == 0 || r == -EINVAL);
    }
    assert_ptr_equal(p, end);
    return n;
}

static void test_ops(void **state)
{
    struct room_wire_op o[8];
    size_t bad;

    (void)state;
    assert_int_equal(ops("*\n+ ann 1764406800000 {\"n\":\"A b\"}\n- bob", o, 8, &bad), 3);
    assert_int_equal(bad, 0);
    assert_int_equal(o[0].kind, ROOM_WIRE_DROP);
    assert_int_equal(o[2].kind, ROOM_WIRE_LEAVE);
    assert_int_equal(ops("+ ann 1764406800000 {\"n\":\"A b\"}", o, 8, &bad), 1);
    assert_int_equal(o[0].kind, ROOM_WIRE_JOIN);
    STR_EQ(o[0].user, "ann");
    assert_true(o[0].joined_at == 1764406800000ull);
    STR_EQ(o[0].meta, "{\"n\":\"A b\"}");
    assert_int_equal(ops("- bob\n", o, 8, &bad), 1);
    STR_EQ(o[0].user, "bob");
    assert_int_equal(ops("", o, 8, &bad), 0);

    /* lines that are no op are counted and skipped; the good ones stay */
    assert_int_equal(
        ops("?\n+ \n+ ann\n+ ann x {}\n+ ann 1 \n- \n- a b\n** \n+ann 1 {}\n- ok", o, 8, &bad), 1);
    assert_int_equal(bad, 9);
    STR_EQ(o[0].user, "ok");
}

static void test_state_lines(void **state)
{
    const char *text = "a.1 ann 5 {}\nbad\nb.2 bob 6 {\"x\":[1, 2]}";
    struct guard g = guard_place(text, strlen(text));
    const char *p = g.data, *end = g.data + strlen(text);
    struct room_wire_state st;

    (void)state;
    assert_int_equal(room_wire_state_next(&p, end, &st), 0);
    STR_EQ(st.node, "a.1");
    STR_EQ(st.user, "ann");
    assert_int_equal(st.joined_at, 5);
    STR_EQ(st.meta, "{}");
    assert_int_equal(room_wire_state_next(&p, end, &st), -EINVAL);
    assert_int_equal(room_wire_state_next(&p, end, &st), 0);
    STR_EQ(st.user, "bob");
    STR_EQ(st.meta, "{\"x\":[1, 2]}");
    assert_int_equal(room_wire_state_next(&p, end, &st), -ENOENT);
    guard_free(&g);
}

static void test_ephemeral(void **state)
{
    struct room_wire_ephemeral w;
    const char *ok = "ann cursor {\"x\":1, \"y\":2}";
    struct guard g = guard_place(ok, strlen(ok));
    char kind[ROOM_KIND_MAX + 2];

    (void)state;
    assert_int_equal(room_wire_ephemeral_parse(g.data, strlen(ok), &w), 0);
    assert_int_equal(w.user.len, 3);
    assert_int_equal(w.kind.len, 6);
    assert_int_equal(w.data.len, strlen("{\"x\":1, \"y\":2}"));
    guard_free(&g);
    assert_int_equal(room_wire_ephemeral_parse("ann cursor ", 11, &w), 0);
    assert_int_equal(w.data.len, 0);
    assert_int_equal(room_wire_ephemeral_parse("ann cursor", 10, &w), -EINVAL);
    assert_int_equal(room_wire_ephemeral_parse(" cursor x", 9, &w), -EINVAL);
    assert_int_equal(room_wire_ephemeral_parse("ann  x", 6, &w), -EINVAL);
    assert_int_equal(room_wire_ephemeral_parse("ann k {\"\0\"}", 10, &w),
                     -EINVAL); /* NUL in data */
    memset(kind, 'k', sizeof(kind));
    char text[64] = "ann ";
    memcpy(text + 4, kind, ROOM_KIND_MAX + 1);
    memcpy(text + 4 + ROOM_KIND_MAX + 1, " x", 3);
    assert_int_equal(room_wire_ephemeral_parse(text, strlen(text), &w), -EINVAL);
}

static void test_cast(void **state)
{
    struct room_wire_cast w;
    struct buf b = {0};
    const char *ok = "! ann 12.7 9\nclient-hi\"data\"";
    struct guard g = guard_place(ok, strlen(ok));

    (void)state;
    assert_true(room_wire_is_cast(ok, strlen(ok)));
    assert_false(room_wire_is_cast("ann cursor x", 12));
    assert_int_equal(room_wire_cast_parse(g.data, strlen(ok), &w), 0);
    STR_EQ(w.user, "ann");
    STR_EQ(w.exclude, "12.7");
    STR_EQ(w.event, "client-hi");
    STR_EQ(w.data, "\"data\"");
    guard_free(&g);
    /* "-" for none; an event name may hold spaces and newlines */
    room_wire_put_cast(&b, "", "", "my event\n", "{}", 2);
    assert_string_equal(b.data, "! - - 9\nmy event\n{}");
    assert_int_equal(room_wire_cast_parse(b.data, b.len, &w), 0);
    assert_int_equal(w.user.len, 0);
    assert_int_equal(w.exclude.len, 0);
    STR_EQ(w.event, "my event\n");
    STR_EQ(w.data, "{}");
    buf_release(&b);
    assert_int_equal(room_wire_cast_parse("! - - 0\n", 8, &w), -EINVAL);     /* no name */
    assert_int_equal(room_wire_cast_parse("! - - 5\nab", 10, &w), -EINVAL);  /* short */
    assert_int_equal(room_wire_cast_parse("! - - 257\n", 10, &w), -EINVAL);  /* too long */
    assert_int_equal(room_wire_cast_parse("! - -  2\nab", 11, &w), -EINVAL); /* no length */
    assert_int_equal(room_wire_cast_parse("! - - 2", 7, &w), -EINVAL);       /* no newline */
    assert_int_equal(room_wire_cast_parse("!- - 2\nab", 9, &w), -EINVAL);
    assert_int_equal(room_wire_cast_parse("! - - 2\na\0", 10, &w), -EINVAL); /* NUL */
    assert_int_equal(room_wire_cast_parse("! - - 99999999999999999999999\nab", 31, &w), -EINVAL);
}

static void test_encoders_read_back(void **state)
{
    struct buf b = {0};
    struct room_wire_op op;
    struct room_wire_ephemeral w;
    const char *p, *end;

    (void)state;
    room_wire_put_join(&b, "ann", 1764406800000ull, "{\"c\":\"#0a0\"}", 12);
    room_wire_put_leave(&b, "bob");
    assert_string_equal(b.data, "+ ann 1764406800000 {\"c\":\"#0a0\"}\n- bob\n");
    p = b.data;
    end = b.data + b.len;
    assert_int_equal(room_wire_op_next(&p, end, &op), 0);
    assert_int_equal(op.kind, ROOM_WIRE_JOIN);
    STR_EQ(op.meta, "{\"c\":\"#0a0\"}");
    assert_int_equal(room_wire_op_next(&p, end, &op), 0);
    assert_int_equal(op.kind, ROOM_WIRE_LEAVE);
    STR_EQ(op.user, "bob");
    assert_int_equal(room_wire_op_next(&p, end, &op), -ENOENT);
    buf_release(&b);
    room_wire_put_join(&b, "ann", 1, "{}", 2);
    assert_string_equal(b.data, "+ ann 1 {}\n"); /* a C string: kept as one */
    buf_release(&b);
    room_wire_put_ephemeral(&b, "ann", "typing", "true", 4);
    assert_string_equal(b.data, "ann typing true");
    assert_int_equal(room_wire_ephemeral_parse(b.data, b.len, &w), 0);
    STR_EQ(w.kind, "typing");
    STR_EQ(w.data, "true");
    buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_ops),
        cmocka_unit_test(test_state_lines),
        cmocka_unit_test(test_ephemeral),
        cmocka_unit_test(test_cast),
        cmocka_unit_test(test_cast),
        cmocka_unit_test(test_encoders_read_back),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
