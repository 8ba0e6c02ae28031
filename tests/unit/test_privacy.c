/* SPDX-License-Identifier: MIT */
/*
 * test_privacy.c - the visibility rules: the class of every viewer
 * relation under every setting (checked against an independent table),
 * room visibility, public views while invisible, byte-identity of hidden
 * users with unknown ones, coarse last seen and no versions for others.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "privacy.h"

#define MIN_MS  60000ull
#define HOUR_MS (60 * MIN_MS)
#define WALL    1764400000000ll /* wall_offset: mono 0 = this wall ms */

static struct presence_view online_view(const char *user, uint64_t now)
{
    struct presence_view v;

    memset(&v, 0, sizeof(v));
    v.user = user;
    v.status = PRESENCE_BUSY;
    for (size_t i = 0; i < PRESENCE_DEVICE_COUNT; i++)
        v.devices[i] = PRESENCE_OFFLINE;
    v.devices[PRESENCE_DEVICE_DESKTOP] = PRESENCE_BUSY;
    v.custom.text = "In a meeting";
    v.custom.emoji = ":calendar:";
    v.version = 42;
    v.now = now;
    return v;
}

static struct presence_view offline_view(const char *user, uint64_t last_seen, uint64_t now)
{
    struct presence_view v = online_view(user, now);

    v.status = PRESENCE_OFFLINE;
    v.devices[PRESENCE_DEVICE_DESKTOP] = PRESENCE_OFFLINE;
    v.custom.text = "";
    v.custom.emoji = "";
    v.last_seen = last_seen;
    return v;
}

static char *encode(const struct presence_view *truth, const struct store_privacy *p,
                    const struct privacy_public *pub, enum privacy_class cls)
{
    static char out[1024];
    struct presence_view v;
    struct buf b = {0};

    privacy_view(truth, p, pub, cls, &v);
    privacy_encode(&v, cls, WALL, &b);
    assert_true(b.len < sizeof(out));
    memcpy(out, b.data, b.len);
    out[b.len] = '\0';
    buf_release(&b);
    return out;
}

/* The rules written out independently: may a relation see a setting? */
static int sees(enum store_visibility v, enum privacy_relation rel)
{
    if (rel == PRIVACY_SELF)
        return 1;
    if (rel == PRIVACY_BLOCKED)
        return 0;
    return v == STORE_VIS_EVERYONE || (v == STORE_VIS_CONTACTS && rel == PRIVACY_CONTACT);
}

static void test_class_matrix(void **state)
{
    (void)state;
    for (int on = 0; on < 3; on++) {
        for (int ls = 0; ls < 3; ls++) {
            for (int inv = 0; inv < 2; inv++) {
                for (int rel = 0; rel < 4; rel++) {
                    struct store_privacy p = {(enum store_visibility)on, (enum store_visibility)ls,
                                              inv != 0};
                    enum privacy_class got = privacy_class_of(&p, (enum privacy_relation)rel);
                    int o = sees(p.online, (enum privacy_relation)rel);
                    int l = sees(p.last_seen, (enum privacy_relation)rel);
                    enum privacy_class want =
                        rel == PRIVACY_SELF ? PRIVACY_CLASS_SELF
                        : o                 ? (l ? PRIVACY_CLASS_FULL : PRIVACY_CLASS_NOLS)
                                            : (l ? PRIVACY_CLASS_OFF_LS : PRIVACY_CLASS_HIDDEN);
                    assert_int_equal(got, want);
                }
            }
        }
    }
}

static void test_room_visibility(void **state)
{
    struct store_privacy p = {STORE_VIS_EVERYONE, STORE_VIS_NOBODY, false};

    (void)state;
    assert_true(privacy_room_visible(&p));
    p.invisible = true;
    assert_false(privacy_room_visible(&p));
    p.invisible = false;
    p.online = STORE_VIS_CONTACTS;
    assert_false(privacy_room_visible(&p));
    p = privacy_most_private();
    assert_false(privacy_room_visible(&p));
    assert_true(p.invisible);
    assert_int_equal(p.online, STORE_VIS_NOBODY);
}

static void test_self_sees_truth_with_version(void **state)
{
    struct presence_view t = online_view("ann", HOUR_MS);
    struct store_privacy p = {STORE_VIS_NOBODY, STORE_VIS_NOBODY, true};
    struct privacy_public pub = {0};

    (void)state;
    assert_string_equal(encode(&t, &p, &pub, PRIVACY_CLASS_SELF),
                        "{\"user\":\"ann\",\"status\":\"busy\",\"devices\":{\"desktop\":\"busy\"},"
                        "\"custom\":{\"text\":\"In a meeting\",\"emoji\":\":calendar:\"},"
                        "\"version\":42}");
}

static void test_others_get_no_version(void **state)
{
    struct presence_view t = online_view("ann", HOUR_MS);
    struct store_privacy p = {STORE_VIS_EVERYONE, STORE_VIS_EVERYONE, false};
    struct privacy_public pub = {0};

    (void)state;
    assert_string_equal(encode(&t, &p, &pub, PRIVACY_CLASS_FULL),
                        "{\"user\":\"ann\",\"status\":\"busy\",\"devices\":{\"desktop\":\"busy\"},"
                        "\"custom\":{\"text\":\"In a meeting\",\"emoji\":\":calendar:\"}}");
}

static void test_invisible_is_frozen_offline(void **state)
{
    struct presence_view t = online_view("ann", 3 * HOUR_MS);
    struct store_privacy p = {STORE_VIS_EVERYONE, STORE_VIS_EVERYONE, true};
    struct privacy_public pub = {.frozen_last_seen = 2 * HOUR_MS + 5 * MIN_MS + 1234};
    struct presence_view off = offline_view("ann", pub.frozen_last_seen, 3 * HOUR_MS);
    struct store_privacy vis = {STORE_VIS_EVERYONE, STORE_VIS_EVERYONE, false};
    char want[1024];

    (void)state;
    /* The same bytes as an offline user whose last seen is the freeze. */
    strcpy(want, encode(&off, &vis, &pub, PRIVACY_CLASS_FULL));
    assert_string_equal(encode(&t, &p, &pub, PRIVACY_CLASS_FULL), want);
    assert_non_null(strstr(want, "\"ago\":\"minutes\",\"value\":54"));
    /* Without last seen: exactly a user never seen. */
    assert_string_equal(encode(&t, &p, &pub, PRIVACY_CLASS_NOLS),
                        "{\"user\":\"ann\",\"status\":\"offline\",\"devices\":{}}");
}

static void test_hidden_equals_unknown(void **state)
{
    struct presence_view unknown = offline_view("ann", 0, HOUR_MS);
    struct presence_view t = online_view("ann", HOUR_MS);
    struct store_privacy p = {STORE_VIS_EVERYONE, STORE_VIS_EVERYONE, false};
    struct privacy_public pub = {.offline_last_seen = MIN_MS};
    char want[1024];

    (void)state;
    unknown.version = 0;
    strcpy(want, encode(&unknown, &p, &pub, PRIVACY_CLASS_FULL));
    assert_string_equal(want, "{\"user\":\"ann\",\"status\":\"offline\",\"devices\":{}}");
    assert_string_equal(encode(&t, &p, &pub, PRIVACY_CLASS_HIDDEN), want);
    t = offline_view("ann", 30 * MIN_MS, HOUR_MS);
    assert_string_equal(encode(&t, &p, &pub, PRIVACY_CLASS_HIDDEN), want);
    assert_string_equal(encode(&t, &p, &pub, PRIVACY_CLASS_NOLS), want);
}

static void test_off_ls_shows_last_offline(void **state)
{
    struct presence_view t = online_view("ann", 5 * HOUR_MS);
    struct store_privacy p = {STORE_VIS_NOBODY, STORE_VIS_EVERYONE, false};
    struct privacy_public pub = {.offline_last_seen = 2 * HOUR_MS + 17 * MIN_MS + 999};
    const char *s;

    (void)state;
    s = encode(&t, &p, &pub, PRIVACY_CLASS_OFF_LS);
    assert_non_null(strstr(s, "\"status\":\"offline\""));
    assert_non_null(strstr(s, "\"ago\":\"today\""));
    assert_null(strstr(s, "custom"));
    assert_null(strstr(s, "version"));
}

/* Last seen for others: rounded down by age; self gets it exact. */
static void test_coarse_last_seen(void **state)
{
    struct store_privacy p = {STORE_VIS_EVERYONE, STORE_VIS_EVERYONE, false};
    struct privacy_public pub = {0};
    const uint64_t now = 40 * 24 * HOUR_MS;
    const struct {
        uint64_t age;
        uint64_t step;
    } cases[] = {{30 * 1000, MIN_MS},
                 {25 * MIN_MS, MIN_MS},
                 {5 * HOUR_MS, HOUR_MS},
                 {3 * 24 * HOUR_MS, 24 * HOUR_MS}};

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t seen = now - cases[i].age + 1234;
        struct presence_view t = offline_view("ann", seen, now);
        long long exact = WALL + (long long)seen, coarse = exact - exact % (long long)cases[i].step;
        char want[64];

        snprintf(want, sizeof(want), "\"at\":%lld,", coarse);
        assert_non_null(strstr(encode(&t, &p, &pub, PRIVACY_CLASS_FULL), want));
        snprintf(want, sizeof(want), "\"at\":%lld,", exact);
        assert_non_null(strstr(encode(&t, &p, &pub, PRIVACY_CLASS_SELF), want));
    }
    /* Seconds: the value only for self. */
    {
        struct presence_view t = offline_view("ann", now - 30000, now);
        assert_null(strstr(encode(&t, &p, &pub, PRIVACY_CLASS_FULL), "value"));
        assert_non_null(strstr(encode(&t, &p, &pub, PRIVACY_CLASS_SELF), "\"value\":30"));
    }
}

static void test_names(void **state)
{
    struct store_privacy p = {STORE_VIS_CONTACTS, STORE_VIS_NOBODY, true};
    struct buf b = {0};

    (void)state;
    assert_int_equal(privacy_visibility_parse("everyone"), STORE_VIS_EVERYONE);
    assert_int_equal(privacy_visibility_parse("contacts"), STORE_VIS_CONTACTS);
    assert_int_equal(privacy_visibility_parse("nobody"), STORE_VIS_NOBODY);
    assert_int_equal(privacy_visibility_parse("Everyone"), -1);
    assert_int_equal(privacy_visibility_parse(""), -1);
    privacy_encode_settings(&p, &b);
    assert_int_equal(b.len, strlen("{\"online\":\"contacts\",\"lastSeen\":\"nobody\","
                                   "\"invisible\":true}"));
    assert_memory_equal(
        b.data, "{\"online\":\"contacts\",\"lastSeen\":\"nobody\",\"invisible\":true}", b.len);
    buf_release(&b);
}

static void test_parse_update(void **state)
{
    static const char *const bad[] = {"[]",
                                      "null",
                                      "{\"online\":\"friends\"}",
                                      "{\"lastSeen\":null}",
                                      "{\"invisible\":1}",
                                      "{\"online\":\"Everyone\"}"};
    struct store_privacy p = {STORE_VIS_EVERYONE, STORE_VIS_EVERYONE, false};
    uint8_t mask;
    cJSON *j = cJSON_Parse("{\"lastSeen\":\"nobody\",\"invisible\":true,\"user\":\"x\"}");

    (void)state;
    assert_int_equal(privacy_parse_update(j, &p, &mask), 0);
    assert_int_equal(mask, PRIVACY_FIELD_LAST_SEEN | PRIVACY_FIELD_INVISIBLE);
    assert_int_equal(p.last_seen, STORE_VIS_NOBODY);
    assert_true(p.invisible);
    assert_int_equal(p.online, STORE_VIS_EVERYONE); /* not named: untouched */
    cJSON_Delete(j);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        j = cJSON_Parse(bad[i]);
        assert_int_equal(privacy_parse_update(j, &p, &mask), -1);
        cJSON_Delete(j);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_class_matrix),
        cmocka_unit_test(test_room_visibility),
        cmocka_unit_test(test_self_sees_truth_with_version),
        cmocka_unit_test(test_others_get_no_version),
        cmocka_unit_test(test_invisible_is_frozen_offline),
        cmocka_unit_test(test_hidden_equals_unknown),
        cmocka_unit_test(test_off_ls_shows_last_offline),
        cmocka_unit_test(test_coarse_last_seen),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_parse_update),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
