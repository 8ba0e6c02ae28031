/* SPDX-License-Identifier: MIT */
/*
 * saved.h - the encoding of one session saved at a clean stop and restored
 * at the next start (the engine's persist.h): pure, no I/O, no clock.
 *
 * A saved session is one row of the store (store_saved_put()): its id is
 * the row's key, and its data is this module's JSON object:
 *
 *   {"v":1,"user":"alice","device":"web","manual":"dnd","statusExpiresAt":1764410400000,
 *    "idle":false,"http":false,
 *    "custom":{"text":"In a meeting","emoji":":calendar:","expiresAt":1764410400000},
 *    "lastSeen":1764406800000,"lastActivity":1764406790000,"offlineSeen":1764400000000,
 *    "rooms":[{"room":"doc-42","meta":{"name":"Alice"},"visible":true}]}
 *
 * "manual" is the session's explicit status (presence.h: away, busy or
 * dnd; absent = none, so activity decides online or away), its expiry
 * "statusExpiresAt" (busy and dnd only); "idle" whether the session had
 * no recent activity; "http" a socketless session (POST /v1/heartbeat);
 * "custom" only when set, with its members only when set; "lastSeen" the
 * session's latest recorded heartbeat or activity and "lastActivity" its
 * latest activity; "rooms" the rooms the session is in, each with its
 * member's metadata (any JSON value, compact) and visible flag. All times
 * are wall-clock ms since the epoch (0 or absent = none): the monotonic
 * clock does not survive a reboot.
 *
 * The decoder is the trust boundary: a row may be damaged, or written by
 * another version. It accepts exactly what the encoder writes (plus
 * members in any order and unknown members, which it ignores) and
 * validates every value as the live operations would: ids (presence.h),
 * device and status names, the custom status (presence_custom_check()),
 * a status expiry only with busy or dnd, room ids, times as integers in
 * [0, 2^53], at most SAVED_ROOMS_MAX rooms.
 */
#ifndef SAVED_H
#define SAVED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "presence.h"

#define SAVED_VERSION   1     /* "v" of what saved_encode() writes */
#define SAVED_ROOMS_MAX 65536 /* rooms of one saved session */

/* Errors: negative, with saved_strerror(). */
enum {
    SAVED_E_JSON = -(PS_EBASE + 1400),    /* not one JSON object */
    SAVED_E_VERSION = -(PS_EBASE + 1401), /* "v" missing or not SAVED_VERSION */
    SAVED_E_ID = -(PS_EBASE + 1402),      /* session, user or room id invalid */
    SAVED_E_VALUE = -(PS_EBASE + 1403),   /* a member has a bad type or value */
    SAVED_E_CUSTOM = -(PS_EBASE + 1404),  /* the custom status fails presence_custom_check() */
};

struct saved_room {
    char *room;   /* a valid room id */
    char *meta;   /* compact JSON, "{}" when none was saved */
    bool visible; /* the member's visible flag */
};

/* A decoded session: every string is its own (saved_release()). */
struct saved_session {
    char sid[PRESENCE_ID_MAX + 1];
    char user[PRESENCE_ID_MAX + 1];
    enum presence_device device;
    enum presence_status manual; /* OFFLINE = none; else AWAY, BUSY or DND */
    int64_t status_expires_ms;   /* wall ms, 0 = none (BUSY and DND only) */
    bool idle;
    bool http;                 /* socketless */
    char *text;                /* custom text, "" = none */
    char *emoji;               /* custom emoji, "" = none */
    int64_t custom_expires_ms; /* wall ms, 0 = none */
    int64_t last_seen_ms;      /* wall ms of the latest recorded beat or activity */
    int64_t last_activity_ms;  /* wall ms of the latest recorded activity */
    int64_t offline_seen_ms;   /* wall ms: the user's last public offline's last seen, 0 = none */
    struct saved_room *rooms;
    size_t nrooms;
};

/* Appends s (minus its sid, the row's key) as the JSON object above.
 * s->text and s->emoji may be NULL for none; a room's meta NULL is {}.
 * The caller passes values the decoder accepts (the live state does). */
void saved_encode(const struct saved_session *s, struct buf *out);

/* Decodes the n bytes at data (the row of session sid) into *out, whose
 * strings are then its own. 0, or a SAVED_E_* error with *out empty
 * (nothing to release). */
int saved_decode(const char *sid, const char *data, size_t n, struct saved_session *out);

/* Frees what saved_decode() gave *out and empties it. Idempotent. */
void saved_release(struct saved_session *s);

/* A static description of a SAVED_E_* code ("unknown error" otherwise). */
const char *saved_strerror(int err);

#endif
