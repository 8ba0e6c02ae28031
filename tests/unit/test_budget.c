/* SPDX-License-Identifier: MIT */
/*
 * test_budget.c - per-connection message budgets (engine/budget.h): a full
 * bucket at first use, refusal past it, refill at the rate, the burst cap,
 * kinds independent of each other, and rate 0 as "no budget".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "budget.h"
#include "config.h"

static struct config cfg_with(int patch_rate, int burst_s)
{
    struct config c;

    memset(&c, 0, sizeof(c));
    c.msg_rate_patch = patch_rate;
    c.msg_rate_status = 1;
    c.msg_burst_seconds = burst_s;
    return c;
}

static void test_burst_then_refusal(void **state)
{
    struct config c = cfg_with(10, 2); /* a bucket of 20 */
    struct budget b = {0};

    (void)state;
    for (int i = 0; i < 20; i++)
        assert_true(budget_take(&b, BUDGET_PATCH, &c, 1000));
    assert_false(budget_take(&b, BUDGET_PATCH, &c, 1000));
    assert_false(budget_take(&b, BUDGET_PATCH, &c, 1050)); /* half a token back */
    assert_true(budget_take(&b, BUDGET_PATCH, &c, 1100));  /* one token after 100 ms */
    assert_false(budget_take(&b, BUDGET_PATCH, &c, 1100));
}

static void test_refill_is_capped_at_the_burst(void **state)
{
    struct config c = cfg_with(10, 1); /* a bucket of 10 */
    struct budget b = {0};
    int n = 0;

    (void)state;
    assert_true(budget_take(&b, BUDGET_PATCH, &c, 5));
    while (budget_take(&b, BUDGET_PATCH, &c, 3600 * 1000))
        n++;
    assert_int_equal(n, 10); /* an hour idle is still one burst */
}

static void test_kinds_are_independent(void **state)
{
    struct config c = cfg_with(10, 1);
    struct budget b = {0};

    (void)state;
    assert_true(budget_take(&b, BUDGET_STATUS, &c, 10)); /* status: 1/s, bucket 1 */
    assert_false(budget_take(&b, BUDGET_STATUS, &c, 10));
    for (int i = 0; i < 10; i++)
        assert_true(budget_take(&b, BUDGET_PATCH, &c, 10));
}

static void test_rate_zero_is_no_budget(void **state)
{
    struct config c = cfg_with(0, 1);
    struct budget b = {0};

    (void)state;
    for (int i = 0; i < 100000; i++)
        assert_true(budget_take(&b, BUDGET_PATCH, &c, 10));
    assert_true(budget_take(&b, BUDGET_JOIN, &c, 10)); /* join rate 0 too */
    assert_string_equal(budget_kind_name(BUDGET_EPHEMERAL), "ephemeral");
    assert_string_equal(budget_kind_name(BUDGET_JOIN), "join");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_then_refusal),
        cmocka_unit_test(test_refill_is_capped_at_the_burst),
        cmocka_unit_test(test_kinds_are_independent),
        cmocka_unit_test(test_rate_zero_is_no_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
