/* SPDX-License-Identifier: MIT */
/*
 * test_pusher_name.c - channel names to room ids and back: presence
 * channels are their bare room, every other channel (user channels too)
 * the reserved "~p" room, Pusher's characters that a room id lacks are
 * escaped one-to-one, and what does not fit a room id has no room.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pusher_auth.h"
#include "pusher_name.h"

/* channel -> room, then room -> channel gives channel back. */
static void round_trip(const char *channel, const char *room)
{
    char r[PUSHER_ROOM_MAX + 1], back[PUSHER_CHANNEL_MAX + 1];
    bool presence = pusher_channel_kind(channel) == PUSHER_CH_PRESENCE;

    assert_true(pusher_room_of("", channel, presence, r));
    assert_string_equal(r, room);
    assert_int_equal(pusher_room_is_presence(r), presence);
    assert_true(pusher_channel_of(r, back));
    assert_string_equal(back, channel);
}

static void test_kinds(void **state)
{
    (void)state;
    round_trip("presence-doc", "doc");
    round_trip("private-orders", "~pprivate-orders");
    round_trip("news", "~pnews");
    round_trip("private-encrypted-x", "~pprivate-encrypted-x");
}

static void test_escapes(void **state)
{
    (void)state;
    round_trip("presence-a=b,c;d", "a~eb~cc~sd");
    round_trip("#server-to-user-ann", "~p~hserver-to-user-ann");
    round_trip("#server-to-user-a=b", "~p~hserver-to-user-a~eb");
}

/* Another app's rooms carry its prefix; the channel of a room drops it. */
static void test_namespaced(void **state)
{
    char r[PUSHER_ROOM_MAX + 1], back[PUSHER_CHANNEL_MAX + 1], channel[PUSHER_CHANNEL_MAX + 1];

    (void)state;
    assert_true(pusher_room_of("app2|", "presence-doc", true, r));
    assert_string_equal(r, "app2|doc");
    assert_true(pusher_room_is_presence(r));
    assert_true(pusher_channel_of(r, back));
    assert_string_equal(back, "presence-doc");
    assert_true(pusher_room_of("app2|", "private-a=b", false, r));
    assert_string_equal(r, "app2|~pprivate-a~eb");
    assert_false(pusher_room_is_presence(r));
    assert_true(pusher_channel_of(r, back));
    assert_string_equal(back, "private-a=b");
    /* The prefix counts in the room id's 128 bytes. */
    memset(channel, 0, sizeof(channel));
    memcpy(channel, "presence-", 9);
    memset(channel + 9, 'x', PUSHER_ROOM_MAX - 5);
    assert_true(pusher_room_of("app2|", channel, true, r));
    assert_int_equal(strlen(r), PUSHER_ROOM_MAX);
    channel[strlen(channel)] = 'x';
    assert_false(pusher_room_of("app2|", channel, true, r));
    assert_true(pusher_room_of("", channel, true, r));
}

static void test_too_long(void **state)
{
    char channel[PUSHER_CHANNEL_MAX + 1], r[PUSHER_ROOM_MAX + 1];
    size_t fits = PUSHER_ROOM_MAX - 4 - strlen("server-to-user-"); /* "~p~h" + the rest */

    (void)state;
    memset(channel, 0, sizeof(channel));
    memcpy(channel, PUSHER_USER_CHANNEL_PREFIX, strlen(PUSHER_USER_CHANNEL_PREFIX));
    memset(channel + strlen(PUSHER_USER_CHANNEL_PREFIX), 'u', fits);
    assert_int_equal(pusher_channel_kind(channel), PUSHER_CH_USER);
    assert_true(pusher_room_of("", channel, false, r));
    assert_int_equal(strlen(r), PUSHER_ROOM_MAX);
    channel[strlen(channel)] = 'u'; /* one byte more */
    assert_false(pusher_room_of("", channel, false, r));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_namespaced),
        cmocka_unit_test(test_too_long),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
