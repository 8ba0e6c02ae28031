/* SPDX-License-Identifier: MIT */
/*
 * test_addrcap.c - the per-address connection table: caps, the IPv6 /64
 * and IPv4-mapped grouping, the pending -> established move and forgetting.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "addrcap.h"
#include "conn.h"
#include "pool.h"

/* A connection record with only its peer set, as the table reads it. */
static void peer(struct conn *c, const char *ip)
{
    memset(c, 0, sizeof(*c));
    if (strchr(ip, ':')) {
        struct in6_addr a;
        assert_int_equal(inet_pton(AF_INET6, ip, &a), 1);
        c->peer_family = AF_INET6;
        if (IN6_IS_ADDR_V4MAPPED(&a)) {
            c->peer_v4mapped = true;
            memcpy(c->peer_ip.v4, a.s6_addr + 12, 4);
        } else {
            c->peer_ip.v6 = pool_alloc(16);
            memcpy(c->peer_ip.v6, &a, 16);
        }
    } else {
        c->peer_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, ip, c->peer_ip.v4), 1);
    }
}

static void unpeer(struct conn *c)
{
    if (c->peer_family == AF_INET6 && !c->peer_v4mapped)
        pool_free(c->peer_ip.v6);
}

static void test_pending_cap_per_address(void **state)
{
    struct addrcap *t = addrcap_new(2, 0);
    struct conn a, b, c, d;
    uint32_t p, e;

    (void)state;
    peer(&a, "10.0.0.1");
    peer(&b, "10.0.0.1");
    peer(&c, "10.0.0.1");
    peer(&d, "10.0.0.2");
    assert_true(addrcap_admit(t, &a));
    assert_true(addrcap_admit(t, &b));
    assert_false(addrcap_admit(t, &c)); /* the third pending of one address */
    assert_int_equal(c.addr_state, ADDRCAP_NONE);
    assert_true(addrcap_admit(t, &d)); /* another address */
    addrcap_forget(t, &c);             /* never counted: a no-op */
    addrcap_counts(t, &a, &p, &e);
    assert_int_equal(p, 2);
    assert_true(addrcap_establish(t, &a)); /* no established cap */
    addrcap_counts(t, &a, &p, &e);
    assert_int_equal(p, 1);
    assert_int_equal(e, 1);
    assert_true(addrcap_admit(t, &c)); /* a's move made room */
    addrcap_forget(t, &a);
    addrcap_forget(t, &a); /* idempotent */
    addrcap_forget(t, &b);
    addrcap_forget(t, &c);
    addrcap_forget(t, &d);
    addrcap_counts(t, &a, &p, &e);
    assert_int_equal(p + e, 0);
    addrcap_free(t); /* asserts every entry is gone */
}

static void test_established_cap_keeps_the_refused_pending(void **state)
{
    struct addrcap *t = addrcap_new(0, 1);
    struct conn a, b;
    uint32_t p, e;

    (void)state;
    peer(&a, "192.0.2.7");
    peer(&b, "192.0.2.7");
    assert_true(addrcap_admit(t, &a));
    assert_true(addrcap_admit(t, &b));
    assert_true(addrcap_establish(t, &a));
    assert_false(addrcap_establish(t, &b)); /* one established at most */
    assert_int_equal(b.addr_state, ADDRCAP_PENDING);
    addrcap_counts(t, &b, &p, &e);
    assert_int_equal(p, 1);
    assert_int_equal(e, 1);
    addrcap_forget(t, &b);
    addrcap_forget(t, &a);
    addrcap_free(t);
}

static void test_ipv6_counts_by_64_and_mapped_as_ipv4(void **state)
{
    struct addrcap *t = addrcap_new(1, 0);
    struct conn a, b, c, m, v4;

    (void)state;
    peer(&a, "2001:db8:1:2::1");
    peer(&b, "2001:db8:1:2:ffff::9"); /* same /64 */
    peer(&c, "2001:db8:1:3::1");      /* the next /64 */
    peer(&v4, "198.51.100.4");
    peer(&m, "::ffff:198.51.100.4"); /* the same host, IPv4-mapped */
    assert_true(addrcap_admit(t, &a));
    assert_false(addrcap_admit(t, &b));
    assert_true(addrcap_admit(t, &c));
    assert_true(addrcap_admit(t, &v4));
    assert_false(addrcap_admit(t, &m));
    addrcap_forget(t, &a);
    addrcap_forget(t, &c);
    addrcap_forget(t, &v4);
    addrcap_free(t);
    unpeer(&a);
    unpeer(&b);
    unpeer(&c);
}

static void test_no_table_or_no_address_is_uncounted(void **state)
{
    struct addrcap *t = addrcap_new(1, 1);
    struct conn a, none;

    (void)state;
    peer(&a, "10.9.9.9");
    memset(&none, 0, sizeof(none));
    assert_true(addrcap_admit(NULL, &a));
    assert_int_equal(a.addr_state, ADDRCAP_NONE);
    assert_true(addrcap_admit(t, &none));
    assert_true(addrcap_admit(t, &none)); /* no address: never capped */
    assert_int_equal(none.addr_state, ADDRCAP_NONE);
    addrcap_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pending_cap_per_address),
        cmocka_unit_test(test_established_cap_keeps_the_refused_pending),
        cmocka_unit_test(test_ipv6_counts_by_64_and_mapped_as_ipv4),
        cmocka_unit_test(test_no_table_or_no_address_is_uncounted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
