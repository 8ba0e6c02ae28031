/* SPDX-License-Identifier: MIT */
/*
 * saved.c - one saved session as JSON and back (saved.h has the format).
 *
 * The encoder writes with the project's JSON writer; the decoder checks
 * the text strictly (json_check()), parses it with cJSON and validates
 * every member before it copies anything out, so a damaged row becomes
 * an error, never a half-filled session. No I/O, no clock.
 */
#include "saved.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "room.h"
#include "util.h"

#define TIME_MAX 9007199254740992LL /* 2^53: the integers a JSON number holds exactly */

/* ---- encoding ---- */

static void put_time(struct buf *b, const char *key, int64_t ms)
{
    if (ms > 0) {
        buf_printf(b, ",\"%s\":", key);
        json_append_i64(b, ms);
    }
}

static void put_custom(const struct saved_session *s, struct buf *b)
{
    const char *sep = "";

    if (!(s->text && s->text[0]) && !(s->emoji && s->emoji[0]))
        return;
    buf_append_str(b, ",\"custom\":{");
    if (s->text && s->text[0]) {
        buf_append_str(b, "\"text\":");
        json_append_cstr(b, s->text);
        sep = ",";
    }
    if (s->emoji && s->emoji[0]) {
        buf_printf(b, "%s\"emoji\":", sep);
        json_append_cstr(b, s->emoji);
    }
    put_time(b, "expiresAt", s->custom_expires_ms);
    buf_append_str(b, "}");
}

void saved_encode(const struct saved_session *s, struct buf *out)
{
    buf_printf(out, "{\"v\":%d,\"user\":", SAVED_VERSION);
    json_append_cstr(out, s->user);
    buf_printf(out, ",\"device\":\"%s\"", presence_device_name(s->device));
    if (s->manual != PRESENCE_OFFLINE && s->manual != PRESENCE_ONLINE) {
        buf_printf(out, ",\"manual\":\"%s\"", presence_status_name(s->manual));
        put_time(out, "statusExpiresAt", s->status_expires_ms);
    }
    buf_printf(out, ",\"idle\":%s,\"http\":%s", s->idle ? "true" : "false",
               s->http ? "true" : "false");
    put_custom(s, out);
    put_time(out, "lastSeen", s->last_seen_ms);
    put_time(out, "lastActivity", s->last_activity_ms);
    put_time(out, "offlineSeen", s->offline_seen_ms);
    buf_append_str(out, ",\"rooms\":[");
    for (size_t i = 0; i < s->nrooms; i++) {
        const struct saved_room *r = &s->rooms[i];

        buf_append_str(out, i ? ",{\"room\":" : "{\"room\":");
        json_append_cstr(out, r->room);
        buf_append_str(out, ",\"meta\":");
        buf_append_str(out, r->meta ? r->meta : "{}");
        buf_printf(out, ",\"visible\":%s}", r->visible ? "true" : "false");
    }
    buf_append_str(out, "]}");
}

/* ---- decoding ---- */

static const cJSON *member(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* An optional time: absent or null is 0. */
static int get_time(const cJSON *obj, const char *key, int64_t *out)
{
    const cJSON *v = member(obj, key);

    *out = 0;
    if (v == NULL || cJSON_IsNull(v))
        return 0;
    return json_number_i64(v, 0, TIME_MAX, out) == 0 ? 0 : SAVED_E_VALUE;
}

/* An optional boolean: absent is false. */
static int get_bool(const cJSON *obj, const char *key, bool *out)
{
    const cJSON *v = member(obj, key);

    *out = false;
    if (v == NULL)
        return 0;
    if (!cJSON_IsBool(v))
        return SAVED_E_VALUE;
    *out = cJSON_IsTrue(v);
    return 0;
}

/* An optional string: absent is "" (*out borrowed from obj). */
static int get_str(const cJSON *obj, const char *key, const char **out)
{
    const cJSON *v = member(obj, key);

    *out = "";
    if (v == NULL)
        return 0;
    if (!cJSON_IsString(v))
        return SAVED_E_VALUE;
    *out = v->valuestring;
    return 0;
}

static int get_id(const cJSON *obj, const char *key, char out[PRESENCE_ID_MAX + 1])
{
    const cJSON *v = member(obj, key);

    if (!cJSON_IsString(v) || !presence_ns_id_valid(v->valuestring))
        return SAVED_E_ID;
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    return 0;
}

static int get_status(const cJSON *o, struct saved_session *s)
{
    const cJSON *v = member(o, "manual");
    int st, r;

    s->manual = PRESENCE_OFFLINE;
    if (v != NULL) {
        if (!cJSON_IsString(v))
            return SAVED_E_VALUE;
        st = presence_status_parse(v->valuestring);
        if (st != PRESENCE_AWAY && st != PRESENCE_BUSY && st != PRESENCE_DND)
            return SAVED_E_VALUE;
        s->manual = (enum presence_status)st;
    }
    if ((r = get_time(o, "statusExpiresAt", &s->status_expires_ms)) != 0)
        return r;
    if (s->status_expires_ms && s->manual != PRESENCE_BUSY && s->manual != PRESENCE_DND)
        return SAVED_E_VALUE;
    return 0;
}

static int get_custom(const cJSON *o, struct saved_session *s)
{
    const cJSON *c = member(o, "custom");
    const char *text = "", *emoji = "";
    int r;

    s->custom_expires_ms = 0;
    if (c != NULL) {
        if (!cJSON_IsObject(c))
            return SAVED_E_VALUE;
        if ((r = get_str(c, "text", &text)) != 0 || (r = get_str(c, "emoji", &emoji)) != 0 ||
            (r = get_time(c, "expiresAt", &s->custom_expires_ms)) != 0)
            return r;
        if (presence_custom_check(text, emoji) != 0)
            return SAVED_E_CUSTOM;
    }
    s->text = xstrdup(text);
    s->emoji = xstrdup(emoji);
    return 0;
}

/* Checks the rooms array before anything is copied out of it. */
static int check_rooms(const cJSON *rooms)
{
    const cJSON *r;
    bool visible;

    if (!cJSON_IsArray(rooms) || cJSON_GetArraySize(rooms) > SAVED_ROOMS_MAX)
        return SAVED_E_VALUE;
    cJSON_ArrayForEach(r, rooms)
    {
        const cJSON *id = member(r, "room");

        if (!cJSON_IsObject(r) || get_bool(r, "visible", &visible) != 0)
            return SAVED_E_VALUE;
        if (!cJSON_IsString(id) || !room_ns_id_valid(id->valuestring))
            return SAVED_E_ID;
    }
    return 0;
}

static void copy_rooms(const cJSON *rooms, struct saved_session *s)
{
    const cJSON *r;
    size_t i = 0;

    s->nrooms = (size_t)cJSON_GetArraySize(rooms);
    s->rooms = s->nrooms ? xcalloc(s->nrooms, sizeof(*s->rooms)) : NULL;
    cJSON_ArrayForEach(r, rooms)
    {
        const cJSON *meta = member(r, "meta");
        struct saved_room *out = &s->rooms[i++];

        out->room = xstrdup(member(r, "room")->valuestring);
        out->meta = meta ? cJSON_PrintUnformatted(meta) : xstrdup("{}");
        if (out->meta == NULL)
            abort(); /* cJSON's out of memory */
        get_bool(r, "visible", &out->visible);
    }
}

static int decode_object(const cJSON *o, struct saved_session *s)
{
    const cJSON *v = member(o, "v"), *dev = member(o, "device");
    const cJSON *rooms = member(o, "rooms");
    int64_t version;
    int r, d;

    if (json_number_i64(v, 0, 1000, &version) != 0 || version != SAVED_VERSION)
        return SAVED_E_VERSION;
    if ((r = get_id(o, "user", s->user)) != 0)
        return r;
    if (!cJSON_IsString(dev) || (d = presence_device_parse(dev->valuestring)) < 0)
        return SAVED_E_VALUE;
    s->device = (enum presence_device)d;
    if ((r = get_status(o, s)) != 0 || (r = get_bool(o, "idle", &s->idle)) != 0 ||
        (r = get_bool(o, "http", &s->http)) != 0 ||
        (r = get_time(o, "lastSeen", &s->last_seen_ms)) != 0 ||
        (r = get_time(o, "lastActivity", &s->last_activity_ms)) != 0 ||
        (r = get_time(o, "offlineSeen", &s->offline_seen_ms)) != 0)
        return r;
    if (rooms != NULL && (r = check_rooms(rooms)) != 0)
        return r;
    if ((r = get_custom(o, s)) != 0) /* allocates: last but the rooms */
        return r;
    if (rooms != NULL)
        copy_rooms(rooms, s);
    return 0;
}

int saved_decode(const char *sid, const char *data, size_t n, struct saved_session *out)
{
    cJSON *o;
    int r;

    memset(out, 0, sizeof(*out));
    if (sid == NULL || !presence_ns_id_valid(sid))
        return SAVED_E_ID;
    if (data == NULL || json_check(data, n) != 0)
        return SAVED_E_JSON;
    o = cJSON_ParseWithLength(data, n);
    if (o == NULL)
        abort(); /* json_check() accepted it: only out of memory is left */
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return SAVED_E_JSON;
    }
    memcpy(out->sid, sid, strlen(sid) + 1);
    r = decode_object(o, out);
    cJSON_Delete(o);
    if (r != 0)
        saved_release(out);
    return r;
}

void saved_release(struct saved_session *s)
{
    for (size_t i = 0; i < s->nrooms; i++) {
        free(s->rooms[i].room);
        free(s->rooms[i].meta); /* cJSON_PrintUnformatted: malloc, as xstrdup */
    }
    free(s->rooms);
    free(s->text);
    free(s->emoji);
    memset(s, 0, sizeof(*s));
}

const char *saved_strerror(int err)
{
    switch (err) {
    case SAVED_E_JSON:
        return "not one JSON object";
    case SAVED_E_VERSION:
        return "unknown format version";
    case SAVED_E_ID:
        return "invalid session, user or room id";
    case SAVED_E_VALUE:
        return "a member has a bad type or value";
    case SAVED_E_CUSTOM:
        return "invalid custom status";
    default:
        return "unknown error";
    }
}
