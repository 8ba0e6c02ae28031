/* SPDX-License-Identifier: MIT */
/*
 * test_engine_client.c - the compact client of client.h: its
 * ids inline while they fit together and as pool copies when not (and
 * back), an id set from the client's own other id, and the deadline
 * groups of engine_expiry.c (shared within a 64-unit bucket and a kind,
 * freed with their last member, moved by a refresh, kept while a close
 * they fire disarms or re-arms their other members).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "client.h"
#include "engine_expiry.h"
#include "engine_state.h"
#include "loop.h"

#define SID32 "0123456789abcdef0123456789abcdef" /* like a server-made sid */

static struct client *client_new(struct engine *e)
{
    struct client *c = pool_alloc(sizeof(*c));

    c->e = e;
    return c;
}

static void test_ids_unset(void **state)
{
    struct client *c = client_new(NULL);

    (void)state;
    assert_string_equal(client_uid(c), "");
    assert_string_equal(client_sid(c), "");
    client_set_uid(c, NULL);
    client_set_sid(c, "");
    assert_false(c->ids_heap);
    assert_string_equal(client_uid(c), "");
    assert_string_equal(client_sid(c), "");
    client_free_ids(c);
    pool_free(c);
}

static void test_ids_inline(void **state)
{
    struct client *c = client_new(NULL);
    char uid[CLIENT_IDS_INLINE];

    (void)state;
    client_set_uid(c, "u1");
    client_set_sid(c, SID32);
    assert_false(c->ids_heap);
    assert_string_equal(client_uid(c), "u1");
    assert_string_equal(client_sid(c), SID32);
    /* the longest uid that still fits next to a 32-character sid */
    memset(uid, 'x', sizeof(uid));
    uid[CLIENT_IDS_INLINE - 34] = '\0';
    client_set_uid(c, uid);
    assert_false(c->ids_heap);
    assert_string_equal(client_uid(c), uid);
    assert_string_equal(client_sid(c), SID32);
    assert_ptr_equal(client_uid(c), c->ids.in); /* no pool copy */
    client_free_ids(c);
    pool_free(c);
}

static void test_ids_overflow_and_back(void **state)
{
    struct client *c = client_new(NULL);
    char uid[PRESENCE_ID_MAX + 1];

    (void)state;
    memset(uid, 'y', PRESENCE_ID_MAX);
    uid[PRESENCE_ID_MAX] = '\0';
    client_set_sid(c, SID32);
    client_set_uid(c, uid); /* 128 + 32: pool copies */
    assert_true(c->ids_heap);
    assert_string_equal(client_uid(c), uid);
    assert_string_equal(client_sid(c), SID32);
    client_set_sid(c, "s2"); /* still too long together */
    assert_true(c->ids_heap);
    assert_string_equal(client_uid(c), uid);
    assert_string_equal(client_sid(c), "s2");
    client_set_uid(c, "short"); /* fits again: back inline, copies freed */
    assert_false(c->ids_heap);
    assert_string_equal(client_uid(c), "short");
    assert_string_equal(client_sid(c), "s2");
    client_set_sid(c, NULL);
    assert_string_equal(client_sid(c), "");
    assert_string_equal(client_uid(c), "short");
    client_set_uid(c, uid); /* alone over inline: uid copied, sid "" */
    client_set_sid(c, uid);
    assert_true(c->ids_heap);
    assert_string_equal(client_sid(c), uid);
    client_free_ids(c);
    assert_false(c->ids_heap);
    pool_free(c);
}

/* Setting one id from the client's own other id (inline or copied). */
static void test_ids_alias(void **state)
{
    struct client *c = client_new(NULL);
    char uid[100];

    (void)state;
    client_set_uid(c, "same");
    client_set_sid(c, client_uid(c));
    assert_string_equal(client_sid(c), "same");
    client_set_uid(c, client_sid(c));
    assert_string_equal(client_uid(c), "same");
    memset(uid, 'z', sizeof(uid) - 1);
    uid[sizeof(uid) - 1] = '\0';
    client_set_uid(c, uid);
    client_set_sid(c, client_uid(c)); /* both copies, from the old copy */
    assert_true(c->ids_heap);
    assert_string_equal(client_uid(c), uid);
    assert_string_equal(client_sid(c), uid);
    client_set_uid(c, "a");
    client_set_sid(c, "b");
    assert_false(c->ids_heap);
    assert_string_equal(client_uid(c), "a");
    assert_string_equal(client_sid(c), "b");
    client_free_ids(c);
    pool_free(c);
}

struct fake {
    struct server srv;
    struct worker w;
    struct engine e;
};

static struct fake *fake_new(void)
{
    struct fake *f = calloc(1, sizeof(*f));

    config_init(&f->srv.cfg);
    f->w.srv = &f->srv;
    f->w.loop = loop_new();
    f->e.w = &f->w;
    return f;
}

static void fake_free(struct fake *f)
{
    engine__expiry_free(&f->e);
    loop_free(f->w.loop);
    config_release(&f->srv.cfg);
    free(f);
}

static void test_expiry_groups(void **state)
{
    struct fake *f = fake_new();
    int64_t base = ((int64_t)(time_wall_ms() / 1000) / 64 + 1000) * 64; /* far ahead */
    struct client *a = client_new(&f->e), *b = client_new(&f->e), *c = client_new(&f->e);

    (void)state;
    a->authed = b->authed = c->authed = true;
    a->deadline = base + 1;
    b->deadline = base + 63; /* a's bucket */
    c->deadline = base + 64; /* the next one */
    engine__expiry_arm(a);
    engine__expiry_arm(b);
    engine__expiry_arm(c);
    assert_int_equal(f->e.expiries.count, 2);
    engine__expiry_disarm(a);
    assert_int_equal(f->e.expiries.count, 2); /* b still there */
    engine__expiry_disarm(a);                 /* a no-op */
    /* a refresh: disarm by the old deadline, arm by the new one */
    engine__expiry_disarm(b);
    assert_int_equal(f->e.expiries.count, 1);
    b->deadline = c->deadline + 1;
    engine__expiry_arm(b);
    assert_int_equal(f->e.expiries.count, 1); /* c's group */
    /* an auth deadline (loop ms) never shares a token group */
    a->authed = false;
    a->deadline = (int64_t)loop_now(f->w.loop) + 600000;
    engine__expiry_arm(a);
    assert_int_equal(f->e.expiries.count, 2);
    engine__expiry_disarm(a);
    engine__expiry_disarm(b);
    engine__expiry_disarm(c);
    assert_int_equal(f->e.expiries.count, 0);
    engine__expiry_arm(c); /* left for engine__expiry_free() */
    fake_free(f);
    pool_free(a);
    pool_free(b);
    pool_free(c);
}

/* The closes of due clients (struct engine's expire), and what the close
 * of trigger does besides: disarm some clients, re-arm others at new
 * deadlines, as a close that reached other sockets could. */
static struct {
    struct client *closed[8];
    size_t nclosed;
    struct client *trigger;
    struct client *disarm[2];
    struct client *rearm[2];
    int64_t rearm_at[2];
} hook;

static void hook_expire(struct client *c)
{
    assert_true(hook.nclosed < 8);
    assert_false(list_is_linked(&c->auth_link)); /* unlinked before its close */
    hook.closed[hook.nclosed++] = c;
    if (c != hook.trigger)
        return;
    for (size_t i = 0; i < 2; i++)
        if (hook.disarm[i])
            engine__expiry_disarm(hook.disarm[i]);
    for (size_t i = 0; i < 2; i++) {
        if (!hook.rearm[i])
            continue;
        engine__expiry_disarm(hook.rearm[i]);
        hook.rearm[i]->deadline = hook.rearm_at[i];
        engine__expiry_arm(hook.rearm[i]);
    }
}

/* A fake whose token deadlines S + 0..31 (s) are due and S + 33..63 are
 * not, for S, a bucket's start, returned: the leeway puts the wall clock
 * 32 s into that bucket. Due closes go to hook_expire(). */
static struct fake *fake_mid_bucket(int64_t *s)
{
    struct fake *f = fake_new();
    int64_t now_s = (int64_t)(time_wall_ms() / 1000);

    *s = (now_s / 64 - 2) * 64;
    f->srv.cfg.jwt_leeway_s = (int)(now_s - *s - 32);
    f->e.expired = hook_expire;
    memset(&hook, 0, sizeof(hook));
    return f;
}

/* Arms clients in order (authed, token deadlines). */
static void arm_tokens(struct client **v, const int64_t *deadlines, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        v[i]->authed = true;
        v[i]->deadline = deadlines[i];
        engine__expiry_arm(v[i]);
    }
}

/* The scene of the two tests below, on fake_mid_bucket()'s fake (returned,
 * S in *s): c, a, b (v[0..2]) armed in that order into one token group, c
 * not due (S + 50), a and b due (S + 1, S + 2), and the hook set to act on
 * a's close. Free with scene_free(). */
static struct fake *scene_new(struct client **v, int64_t *s)
{
    struct fake *f = fake_mid_bucket(s);

    for (size_t i = 0; i < 3; i++)
        v[i] = client_new(&f->e);
    arm_tokens(v, (int64_t[]){*s + 50, *s + 1, *s + 2}, 3);
    hook.trigger = v[1];
    return f;
}

static void scene_free(struct fake *f, struct client **v)
{
    fake_free(f);
    for (size_t i = 0; i < 3; i++)
        pool_free(v[i]);
}

/* c is not due and goes back first, then a's close disarms c (leaving the
 * group without members) and b, still waiting to be looked at: b is not
 * closed, and the group is freed once, at the end of its callback. */
static void test_expiry_close_disarms_members(void **state)
{
    int64_t s;
    struct client *v[3];
    struct fake *f = scene_new(v, &s);
    struct client *c = v[0], *a = v[1], *b = v[2];

    (void)state;
    assert_int_equal(f->e.expiries.count, 1);
    hook.disarm[0] = c;
    hook.disarm[1] = b;
    loop_run_once(f->w.loop, 0);
    assert_int_equal(hook.nclosed, 1);
    assert_ptr_equal(hook.closed[0], a);
    assert_false(list_is_linked(&b->auth_link));
    assert_false(list_is_linked(&c->auth_link));
    assert_int_equal(f->e.expiries.count, 0);
    scene_free(f, v);
}

/* a's close re-arms b (not looked at yet) for later in the same group,
 * and c (already back) for a due deadline in it, emptying the group for a
 * moment: the group stays armed, c is closed at the next firing, and b
 * stays until disarmed. */
static void test_expiry_close_rearms_members(void **state)
{
    int64_t s;
    struct client *v[3];
    struct fake *f = scene_new(v, &s);
    struct client *c = v[0], *a = v[1], *b = v[2];

    (void)state;
    hook.rearm[0] = b;
    hook.rearm_at[0] = s + 55;
    hook.rearm[1] = c;
    hook.rearm_at[1] = s + 3;
    loop_run_once(f->w.loop, 0);
    assert_int_equal(hook.nclosed, 1);
    assert_ptr_equal(hook.closed[0], a);
    assert_true(list_is_linked(&b->auth_link));
    assert_true(list_is_linked(&c->auth_link));
    assert_int_equal(f->e.expiries.count, 1);
    loop_run_once(f->w.loop, 0);
    assert_int_equal(hook.nclosed, 2);
    assert_ptr_equal(hook.closed[1], c);
    assert_true(list_is_linked(&b->auth_link));
    assert_int_equal(f->e.expiries.count, 1);
    engine__expiry_disarm(b);
    assert_int_equal(f->e.expiries.count, 0);
    scene_free(f, v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids_unset),
        cmocka_unit_test(test_ids_inline),
        cmocka_unit_test(test_ids_overflow_and_back),
        cmocka_unit_test(test_ids_alias),
        cmocka_unit_test(test_expiry_groups),
        cmocka_unit_test(test_expiry_close_disarms_members),
        cmocka_unit_test(test_expiry_close_rearms_members),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
