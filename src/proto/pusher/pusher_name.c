/* SPDX-License-Identifier: MIT */
/*
 * pusher_name.c - channel names to room ids and back (pusher_name.h).
 */
#include "pusher_name.h"

#include <string.h>

#include "ns.h"

static const char plain[] = "=,;#"; /* Pusher's characters a room id lacks */
static const char coded[] = "ecsh"; /* their escapes, after '~' */

/* Appends s escaped to out at *len (at most max bytes); false when full. */
static bool escape_into(const char *s, char *out, size_t *len, size_t max)
{
    for (; *s; s++) {
        const char *hit = strchr(plain, *s);
        size_t need = hit ? 2 : 1;

        if (*len + need > max)
            return false;
        if (hit) {
            out[(*len)++] = '~';
            out[(*len)++] = coded[hit - plain];
        } else {
            out[(*len)++] = *s;
        }
    }
    out[*len] = '\0';
    return true;
}

bool pusher_room_of(const char *ns, const char *channel, bool presence, char *out)
{
    size_t len = strlen(ns);

    if (len > NS_PREFIX_MAX)
        return false;
    memcpy(out, ns, len);
    if (presence) {
        channel += strlen("presence-");
    } else {
        memcpy(out + len, PUSHER_ROOM_PREFIX, 2);
        len += 2;
    }
    return escape_into(channel, out, &len, PUSHER_ROOM_MAX);
}

bool pusher_room_is_presence(const char *room)
{
    return strncmp(ns_strip(room), PUSHER_ROOM_PREFIX, 2) != 0;
}

bool pusher_channel_of(const char *room, char *out)
{
    size_t len = 0;

    room = ns_strip(room);

    if (pusher_room_is_presence(room)) {
        memcpy(out, "presence-", 9);
        len = 9;
    } else {
        room += 2;
    }
    for (; *room; room++) {
        const char *hit = room[0] == '~' && room[1] ? strchr(coded, room[1]) : NULL;

        if (len + 1 > PUSHER_CHANNEL_MAX)
            return false;
        if (hit) {
            out[len++] = plain[hit - coded];
            room++;
        } else {
            out[len++] = *room;
        }
    }
    out[len] = '\0';
    return true;
}
