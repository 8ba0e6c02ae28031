/* SPDX-License-Identifier: MIT */
/*
 * test_contrib.c - the resume record of a session (contrib.h): what the
 * node that holds a session writes when its socket closes, and what the
 * node the client resumes on parses: a round trip keeps every field and
 * gives back the same bytes; malformed records are refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "contrib.h"

static void test_resume_round_trip(void **state)
{
    struct contrib_resume r = {0}, out;
    struct buf b = {0};

    (void)state;
    strcpy(r.node, "b.00000000000000ff");
    r.deadline = 1764410400000;
    r.device = PRESENCE_DEVICE_MOBILE;
    r.status = PRESENCE_BUSY;
    r.status_expires = 1764410500000;
    strcpy(r.text, "In a meeting \xc3\xa9");
    strcpy(r.emoji, ":calendar:");
    contrib_resume_encode(&b, &r);
    assert_string_equal(b.data, "b.00000000000000ff 1764410400000 1 3 0 1764410500000 0\n"
                                "In a meeting \xc3\xa9\n:calendar:");
    assert_int_equal(contrib_resume_parse(b.data, b.len, &out), 0);
    assert_string_equal(out.node, r.node);
    assert_true(out.deadline == r.deadline && out.status_expires == r.status_expires);
    assert_int_equal(out.device, PRESENCE_DEVICE_MOBILE);
    assert_int_equal(out.status, PRESENCE_BUSY);
    assert_false(out.idle);
    assert_string_equal(out.text, r.text);
    assert_string_equal(out.emoji, ":calendar:");
    buf_release(&b);
    assert_int_equal(contrib_resume_parse("a.1 5 0 2 1 0 0\n\n", 17, &out), 0);
    assert_true(out.idle && out.status == PRESENCE_AWAY && !out.text[0] && !out.emoji[0]);
}

static void test_resume_refused(void **state)
{
    static const char *bad[] = {
        "",
        "a.1 5 0 1 0 0 0\n",                  /* two lines */
        "a.1 5 0 1 0 0 0\n\n\n",              /* four */
        " 5 0 1 0 0 0\n\n",                   /* no holder */
        "a.1 5 0 1 0 0\n\n",                  /* a number missing */
        "a.1 5 0 1 0 0 0 7\n\n",              /* one too many */
        "a.1 05 0 1 0 0 0\n\n",               /* a leading zero */
        "a.1 5 0 1 0 0 0 \n\n",               /* a trailing space */
        "a.1 5  0 1 0 0 0\n\n",               /* two spaces */
        "a.1 5 9 1 0 0 0\n\n",                /* no such device */
        "a.1 5 0 0 0 0 0\n\n",                /* offline */
        "a.1 5 0 5 0 0 0\n\n",                /* no such status */
        "a.1 5 0 1 2 0 0\n\n",                /* idle 2 */
        "a.1 9007199254740992 0 1 0 0 0\n\n", /* 2^53 */
        "a.1 5 0 x 0 0 0\n\n",
    };
    struct contrib_resume out;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(contrib_resume_parse(bad[i], strlen(bad[i]), &out), -EINVAL);
    assert_int_equal(contrib_resume_parse("a.1 5 0 1 0 0 0\nx\0y\n", 20, &out), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_round_trip),
        cmocka_unit_test(test_resume_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
