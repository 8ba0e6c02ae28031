/* SPDX-License-Identifier: MIT */
/*
 * test_list.c - the intrusive list: insert and delete keep the links of
 * both directions, list_del() of an unlinked node is a no-op, and
 * list_move_all() moves a whole list, in order, to the tail of another
 * (empty or not), leaving the source empty.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "list.h"
#include "util.h"

struct item {
    struct list link;
    int v;
};

/* The values of head's items, front to back, checking the back links. */
static int values(const struct list *head, int *out, int cap)
{
    int n = 0;
    const struct list *prev = head;

    for (const struct list *l = head->next; l != head; l = l->next) {
        assert_ptr_equal(l->prev, prev);
        assert_true(n < cap);
        out[n++] = container_of(l, const struct item, link)->v;
        prev = l;
    }
    assert_ptr_equal(head->prev, prev);
    return n;
}

static void fill(struct list *head, struct item *it, int n, int first)
{
    for (int i = 0; i < n; i++) {
        it[i].v = first + i;
        list_insert_tail(head, &it[i].link);
    }
}

static void test_insert_delete(void **state)
{
    struct list head;
    struct item it[3];
    int v[4];

    (void)state;
    list_init(&head);
    assert_true(list_empty(&head));
    fill(&head, it, 3, 1);
    assert_int_equal(values(&head, v, 4), 3);
    assert_int_equal(v[0] * 100 + v[1] * 10 + v[2], 123);
    list_del(&it[1].link);
    assert_false(list_is_linked(&it[1].link));
    list_del(&it[1].link); /* unlinked: no-op */
    assert_int_equal(values(&head, v, 4), 2);
    assert_int_equal(v[0] * 10 + v[1], 13);
}

static void test_move_all(void **state)
{
    struct list to, from;
    struct item a[2], b[3];
    int v[8];

    (void)state;
    list_init(&to);
    list_init(&from);
    list_move_all(&to, &from); /* both empty */
    assert_true(list_empty(&to) && list_empty(&from));
    fill(&from, b, 3, 3);
    list_move_all(&to, &from); /* into an empty one */
    assert_true(list_empty(&from));
    assert_int_equal(values(&to, v, 8), 3);
    assert_int_equal(v[0] * 100 + v[1] * 10 + v[2], 345);
    fill(&from, a, 2, 1);
    list_move_all(&to, &from); /* to the tail of a non-empty one */
    assert_true(list_empty(&from));
    assert_int_equal(values(&to, v, 8), 5);
    assert_int_equal(v[0] * 10000 + v[1] * 1000 + v[2] * 100 + v[3] * 10 + v[4], 34512);
    assert_int_equal(values(&from, v, 8), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_insert_delete),
        cmocka_unit_test(test_move_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
