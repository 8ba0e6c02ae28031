/* SPDX-License-Identifier: MIT */
/*
 * privacy.c - the visibility rules of privacy.h: classes, public views and
 * their encoding. Pure: no I/O, no allocation beyond the output buffer.
 */
#include "privacy.h"

#include <string.h>

#include "json.h"
#include "util.h"

static const char *const vis_names[] = {"everyone", "contacts", "nobody"};

struct store_privacy privacy_most_private(void)
{
    struct store_privacy p = {STORE_VIS_NOBODY, STORE_VIS_NOBODY, true};

    return p;
}

static bool allows(enum store_visibility v, enum privacy_relation rel)
{
    return v == STORE_VIS_EVERYONE || (v == STORE_VIS_CONTACTS && rel == PRIVACY_CONTACT);
}

enum privacy_class privacy_class_of(const struct store_privacy *p, enum privacy_relation rel)
{
    bool online, seen;

    if (rel == PRIVACY_SELF)
        return PRIVACY_CLASS_SELF;
    if (rel == PRIVACY_BLOCKED)
        return PRIVACY_CLASS_HIDDEN;
    online = allows(p->online, rel);
    seen = allows(p->last_seen, rel);
    if (online)
        return seen ? PRIVACY_CLASS_FULL : PRIVACY_CLASS_NOLS;
    return seen ? PRIVACY_CLASS_OFF_LS : PRIVACY_CLASS_HIDDEN;
}

bool privacy_room_visible(const struct store_privacy *p)
{
    return !p->invisible && p->online == STORE_VIS_EVERYONE;
}

/* out = an offline view of truth's user with the given last seen. */
static void offline_view(const struct presence_view *truth, uint64_t last_seen,
                         struct presence_view *out)
{
    memset(out, 0, sizeof(*out));
    out->user = truth->user;
    out->status = PRESENCE_OFFLINE;
    for (size_t i = 0; i < PRESENCE_DEVICE_COUNT; i++)
        out->devices[i] = PRESENCE_OFFLINE;
    out->custom.text = "";
    out->custom.emoji = "";
    out->last_seen = last_seen;
    out->now = truth->now;
}

void privacy_view(const struct presence_view *truth, const struct store_privacy *p,
                  const struct privacy_public *pub, enum privacy_class cls,
                  struct presence_view *out)
{
    struct presence_view base;

    if (cls == PRIVACY_CLASS_SELF) {
        *out = *truth;
        return;
    }
    if (p->invisible)
        offline_view(truth, pub->frozen_last_seen, &base);
    else
        base = *truth;
    base.version = 0;
    switch (cls) {
    case PRIVACY_CLASS_FULL:
        *out = base;
        break;
    case PRIVACY_CLASS_NOLS:
        *out = base;
        out->last_seen = 0;
        break;
    case PRIVACY_CLASS_OFF_LS:
        offline_view(
            truth, base.status == PRESENCE_OFFLINE ? base.last_seen : pub->offline_last_seen, out);
        break;
    default:
        offline_view(truth, 0, out);
    }
}

void privacy_encode(const struct presence_view *v, enum privacy_class cls, int64_t wall_offset_ms,
                    struct buf *out)
{
    presence_encode_user_as(v, wall_offset_ms, cls == PRIVACY_CLASS_SELF, out);
}

const char *privacy_visibility_name(enum store_visibility v)
{
    return (unsigned)v < ARRAY_SIZE(vis_names) ? vis_names[v] : "nobody";
}

int privacy_visibility_parse(const char *s)
{
    for (size_t i = 0; i < ARRAY_SIZE(vis_names); i++)
        if (strcmp(s, vis_names[i]) == 0)
            return (int)i;
    return -1;
}

static int parse_vis(const cJSON *root, const char *key, enum store_visibility *out, uint8_t bit,
                     uint8_t *mask)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, key);
    int v;

    if (!f)
        return 0;
    if (!cJSON_IsString(f) || (v = privacy_visibility_parse(f->valuestring)) < 0)
        return -1;
    *out = (enum store_visibility)v;
    *mask |= bit;
    return 0;
}

int privacy_parse_update(const cJSON *root, struct store_privacy *p, uint8_t *mask)
{
    const cJSON *inv = cJSON_GetObjectItemCaseSensitive(root, "invisible");

    *mask = 0;
    if (!cJSON_IsObject(root) ||
        parse_vis(root, "online", &p->online, PRIVACY_FIELD_ONLINE, mask) < 0 ||
        parse_vis(root, "lastSeen", &p->last_seen, PRIVACY_FIELD_LAST_SEEN, mask) < 0 ||
        (inv && !cJSON_IsBool(inv)))
        return -1;
    if (inv) {
        p->invisible = cJSON_IsTrue(inv);
        *mask |= PRIVACY_FIELD_INVISIBLE;
    }
    return 0;
}

void privacy_encode_settings(const struct store_privacy *p, struct buf *out)
{
    buf_printf(out, "{\"online\":\"%s\",\"lastSeen\":\"%s\",\"invisible\":%s}",
               privacy_visibility_name(p->online), privacy_visibility_name(p->last_seen),
               p->invisible ? "true" : "false");
}
