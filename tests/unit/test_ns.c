/* SPDX-License-Identifier: MIT */
/*
 * test_ns.c - namespace prefixes of internal ids: the first app's ids
 * have none, another app's are "<id>|<wire id>"; a malformed prefix is
 * refused, stripping gives the wire id back, a join that would pass the
 * id limit fails, and membership tells the namespaces apart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ns.h"

static void test_prefix_len(void **state)
{
    char id[NS_APP_MAX + 8];

    (void)state;
    assert_int_equal(ns_prefix_len("alice"), 0);
    assert_int_equal(ns_prefix_len(""), 0);
    assert_int_equal(ns_prefix_len("app2|alice"), 5);
    assert_int_equal(ns_prefix_len("A9|x"), 3);
    assert_int_equal(ns_prefix_len("|alice"), -1);     /* empty app id */
    assert_int_equal(ns_prefix_len("a-b|alice"), -1);  /* not letters and digits */
    assert_int_equal(ns_prefix_len("a|b|c"), -1);      /* a second separator */
    assert_int_equal(ns_prefix_len("app2|~pnews"), 5); /* a subscription room */
    memset(id, 'a', NS_APP_MAX);
    strcpy(id + NS_APP_MAX, "|x");
    assert_int_equal(ns_prefix_len(id), (int)NS_APP_MAX + 1);
    memset(id, 'a', NS_APP_MAX + 1);
    strcpy(id + NS_APP_MAX + 1, "|x");
    assert_int_equal(ns_prefix_len(id), -1); /* an app id over 32 bytes */
}

static void test_strip_in(void **state)
{
    char ns[NS_PREFIX_MAX + 1];

    (void)state;
    assert_string_equal(ns_strip("alice"), "alice");
    assert_string_equal(ns_strip("app2|alice"), "alice");
    assert_string_equal(ns_strip("app2|~pprivate-x"), "~pprivate-x");
    assert_true(ns_in("alice", ""));
    assert_false(ns_in("app2|alice", ""));
    assert_true(ns_in("app2|alice", "app2|"));
    assert_false(ns_in("alice", "app2|"));
    assert_false(ns_in("app22|alice", "app2|"));
    assert_false(ns_in("app3|alice", "app2|"));
    ns_prefix_of("app2|alice", ns);
    assert_string_equal(ns, "app2|");
    ns_prefix_of("alice", ns);
    assert_string_equal(ns, "");
    ns_prefix_of("a|b|c", ns);
    assert_string_equal(ns, "");
}

static void test_prefix_valid(void **state)
{
    (void)state;
    assert_true(ns_prefix_valid(""));
    assert_true(ns_prefix_valid("app2|"));
    assert_false(ns_prefix_valid("app2"));
    assert_false(ns_prefix_valid("|"));
    assert_false(ns_prefix_valid("a|b|"));
    assert_false(ns_prefix_valid("a-b|"));
}

static void test_join(void **state)
{
    char out[128 + 1], wire[130];

    (void)state;
    assert_true(ns_join("", "alice", out, 128));
    assert_string_equal(out, "alice");
    assert_true(ns_join("app2|", "alice", out, 128));
    assert_string_equal(out, "app2|alice");
    assert_string_equal(ns_strip(out), "alice");
    /* The id limit counts the prefix: 128 - 5 bytes of wire id fit. */
    memset(wire, 'w', 123);
    wire[123] = '\0';
    assert_true(ns_join("app2|", wire, out, 128));
    assert_int_equal(strlen(out), 128);
    wire[123] = 'w';
    wire[124] = '\0';
    assert_false(ns_join("app2|", wire, out, 128));
    assert_string_equal(out, "");
    assert_true(ns_join("", wire, out, 128)); /* the first app: the whole limit */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_len),
        cmocka_unit_test(test_strip_in),
        cmocka_unit_test(test_prefix_valid),
        cmocka_unit_test(test_join),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
