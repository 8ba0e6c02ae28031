/* SPDX-License-Identifier: MIT */
/*
 * test_pusher_app.c - the pusher-app setting: ID:KEY:SECRET, its options,
 * the webhook=URL option that takes the rest of the item (a URL has ':'),
 * a clear refusal for every malformed spec, and the comma-separated list
 * of apps with its duplicate id and key checks, and the lookups by key and
 * by id.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pusher_app.h"

static int parse(const char *spec, struct pusher_app *app, char *err)
{
    return pusher_app_parse(spec, app, err, 200);
}

static void test_plain(void **state)
{
    struct pusher_app a;
    char err[200];

    (void)state;
    assert_int_equal(parse("4711:key-1:secret.1", &a, err), 0);
    assert_string_equal(a.id, "4711");
    assert_string_equal(a.key, "key-1");
    assert_string_equal(a.secret, "secret.1");
    assert_false(a.client_events);
    assert_int_equal(a.member_limit, 100);
    assert_false(a.subscription_count);
    assert_string_equal(a.webhook, "");
}

static void test_options(void **state)
{
    struct pusher_app a;
    char err[200];

    (void)state;
    assert_int_equal(parse("1:k:s:client-events=true:member-limit=7", &a, err), 0);
    assert_true(a.client_events);
    assert_int_equal(a.member_limit, 7);
    assert_int_equal(parse("1:k:s:subscription-count=true", &a, err), 0);
    assert_true(a.subscription_count);
    assert_int_equal(parse("1:k:s:subscription-count=false", &a, err), 0);
    assert_false(a.subscription_count);
    assert_int_equal(
        parse("1:k:s:client-events=true:webhook=http://127.0.0.1:8080/hooks?x=1", &a, err), 0);
    assert_true(a.client_events);
    assert_string_equal(a.webhook, "http://127.0.0.1:8080/hooks?x=1");
    /* webhook= is the last: what follows is part of the URL */
    assert_int_equal(parse("1:k:s:webhook=http://h:1/a:member-limit=3", &a, err), 0);
    assert_string_equal(a.webhook, "http://h:1/a:member-limit=3");
    assert_int_equal(a.member_limit, 100);
}

static void test_refused(void **state)
{
    static const char *bad[] = {
        "1:k",                        /* no secret */
        "1:k:s:member-limit=0",       /* out of range */
        "1:k:s:colour=blue",          /* unknown option */
        "1:k:s:subscription-count=1", /* true or false only */
        "1:k:s:webhook=",             /* no URL */
        "1:k:s,2:k2:s2",              /* a list is pusher_apps_parse's */
        "1!:k:s",                     /* id alphabet */
    };
    struct pusher_app a;
    char err[200];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(parse(bad[i], &a, err), -1);
        assert_true(strncmp(err, "pusher-app: ", 12) == 0);
    }
    char longurl[400] = "1:k:s:webhook=http://h/";
    memset(longurl + strlen(longurl), 'a', 300);
    longurl[sizeof(longurl) - 1] = '\0';
    assert_int_equal(parse(longurl, &a, err), -1);
    assert_non_null(strstr(err, "webhook= needs a URL"));
}

static void test_list(void **state)
{
    struct pusher_app a[PUSHER_APPS_MAX];
    char err[200];
    size_t n;

    (void)state;
    assert_int_equal(pusher_apps_parse("1:k:s", a, PUSHER_APPS_MAX, &n, err, 200), 0);
    assert_int_equal(n, 1);
    assert_string_equal(a[0].key, "k");
    assert_int_equal(pusher_apps_parse("1:k:s:client-events=true:webhook=http://h:1/a,"
                                       "2:k2:s2:member-limit=5",
                                       a, PUSHER_APPS_MAX, &n, err, 200),
                     0);
    assert_int_equal(n, 2);
    assert_true(a[0].client_events);
    assert_string_equal(a[0].webhook, "http://h:1/a");
    assert_int_equal(a[0].member_limit, 100);
    assert_string_equal(a[1].id, "2");
    assert_string_equal(a[1].secret, "s2");
    assert_false(a[1].client_events);
    assert_int_equal(a[1].member_limit, 5);
    assert_string_equal(a[1].webhook, "");
    /* Each app a namespace: the first shares the native one. */
    assert_string_equal(a[0].ns, "");
    assert_string_equal(a[1].ns, "2|");
    assert_ptr_equal(pusher_apps_by_ns(a, n, "ann"), &a[0]);
    assert_ptr_equal(pusher_apps_by_ns(a, n, "2|ann"), &a[1]);
    assert_ptr_equal(pusher_apps_by_ns(a, n, "2|~pnews"), &a[1]);
    assert_null(pusher_apps_by_ns(a, n, "3|ann"));
}

static void test_lookup(void **state)
{
    struct pusher_app a[PUSHER_APPS_MAX];
    char err[200];
    size_t n;

    (void)state;
    assert_int_equal(pusher_apps_parse("1:k:s,22:kk:s2", a, PUSHER_APPS_MAX, &n, err, 200), 0);
    assert_ptr_equal(pusher_apps_by_key(a, n, "k", 1), &a[0]);
    assert_ptr_equal(pusher_apps_by_key(a, n, "kk/more", 2), &a[1]);
    assert_null(pusher_apps_by_key(a, n, "kk", 1 + 1 - 2)); /* empty */
    assert_null(pusher_apps_by_key(a, n, "kkk", 3));
    assert_null(pusher_apps_by_key(a, n, "1", 1)); /* an id is not a key */
    assert_ptr_equal(pusher_apps_by_id(a, n, "22/", 2), &a[1]);
    assert_ptr_equal(pusher_apps_by_id(a, n, "1", 1), &a[0]);
    assert_null(pusher_apps_by_id(a, n, "2", 1));
    assert_null(pusher_apps_by_id(a, n, "k", 1));
}

static void test_list_refused(void **state)
{
    static const struct {
        const char *spec, *msg;
    } bad[] = {
        {"1:k:s,1:k2:s2", "two apps have the id \"1\""},
        {"1:k:s,2:k:s2", "two apps have the key \"k\""},
        {"1:k:s,", "ID:KEY:SECRET"},
        {",1:k:s", "ID:KEY:SECRET"},
        {"1:k:s,2:k2", "ID:KEY:SECRET"},
        {"1:k:s,2:k2:s2:member-limit=0", "unknown option"},
        {"1:a:s,2:b:s,3:c:s", "at most 2 apps"},
    };
    struct pusher_app a[PUSHER_APPS_MAX];
    char err[200];
    size_t n;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(pusher_apps_parse(bad[i].spec, a, 2, &n, err, 200), -1);
        assert_true(strncmp(err, "pusher-app: ", 12) == 0);
        assert_non_null(strstr(err, bad[i].msg));
    }
    char big[PUSHER_APP_ITEM_MAX + 40] = "1:k:s:webhook=http://h/";
    memset(big + strlen(big), 'a', PUSHER_APP_ITEM_MAX);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(pusher_apps_parse(big, a, 2, &n, err, 200), -1);
    assert_non_null(strstr(err, "longer than"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),        cmocka_unit_test(test_options),
        cmocka_unit_test(test_refused),      cmocka_unit_test(test_list),
        cmocka_unit_test(test_list_refused), cmocka_unit_test(test_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
