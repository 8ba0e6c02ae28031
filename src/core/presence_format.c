/* SPDX-License-Identifier: MIT */
/*
 * presence_format.c - the pure half of presence.h: id and custom-status
 * validation, wire names, the last-seen age buckets and the JSON encoding
 * of a user's view.
 *
 * Nothing here touches an engine, allocates (except into the caller's
 * struct buf) or reads a clock; every function is a function of its
 * arguments. The engine (presence.c) calls the validators before it
 * changes anything, so invalid input leaves the state untouched.
 */
#include "presence.h"

#include <string.h>

#include "json.h"
#include "ns.h"
#include "utf8.h"

/* ---- ids ---- */

/* URL unreserved characters plus ':' and '@'. */
static bool id_char(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c == '-' || c == '_' || c == '.' || c == '~' || c == ':' || c == '@';
}

/* Whether id from offset p on is 1..PRESENCE_ID_MAX bytes in all of the
 * id alphabet (reads at most PRESENCE_ID_MAX + 1 bytes of it). */
static bool id_from(const char *id, size_t p)
{
    for (size_t i = p; i <= PRESENCE_ID_MAX; i++) {
        if (id[i] == '\0')
            return i > p;
        if (!id_char((unsigned char)id[i]))
            return false;
    }
    return false; /* longer than PRESENCE_ID_MAX */
}

bool presence_id_valid(const char *id)
{
    return id != NULL && id_from(id, 0); /* NS_SEP is no id_char */
}

bool presence_ns_id_valid(const char *id)
{
    int p;

    return id != NULL && (p = ns_prefix_len(id)) >= 0 && id_from(id, (size_t)p);
}

/* ---- UTF-8 decoding (of input already known to be valid) ---- */

/* Decodes the code point at *pp and advances past it. */
static uint32_t utf8_next(const unsigned char **pp)
{
    const unsigned char *p = *pp;
    uint32_t c = p[0];
    unsigned extra = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;

    if (extra > 0)
        c &= 0x3Fu >> extra;
    for (unsigned i = 1; i <= extra; i++)
        c = (c << 6) | (p[i] & 0x3Fu);
    *pp = p + 1 + extra;
    return c;
}

/* ---- custom text ---- */

/* Cc (C0, DEL, C1), line/paragraph separators and bidi controls. */
static bool is_control(uint32_t c)
{
    return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x2028 || c == 0x2029 ||
           (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

static int text_check(const char *text)
{
    size_t n = strnlen(text, 4 * PRESENCE_TEXT_MAX_CHARS + 1);
    const unsigned char *p = (const unsigned char *)text, *end = p + n;
    unsigned chars = 0;

    if (n > 4 * PRESENCE_TEXT_MAX_CHARS)
        return PRESENCE_E_TEXT_LONG; /* cannot fit, whatever it holds */
    if (!utf8_valid(text, n))
        return PRESENCE_E_TEXT_UTF8;
    while (p < end) {
        if (is_control(utf8_next(&p)))
            return PRESENCE_E_TEXT_CONTROL;
        chars++;
    }
    return chars <= PRESENCE_TEXT_MAX_CHARS ? 0 : PRESENCE_E_TEXT_LONG;
}

/* ---- custom emoji ---- */

static bool is_shortcode(const char *s, size_t n)
{
    if (n < 3 || n > PRESENCE_SHORTCODE_MAX + 2 || s[0] != ':' || s[n - 1] != ':')
        return false;
    for (size_t i = 1; i + 1 < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '+' || c == '-'))
            return false;
    }
    return true;
}

static bool is_regional(uint32_t c)
{
    return c >= 0x1F1E6 && c <= 0x1F1FF;
}

/* Marks that may follow a base: variation selectors, skin tones, tags. */
static bool is_modifier(uint32_t c)
{
    return c == 0xFE0E || c == 0xFE0F || (c >= 0x1F3FB && c <= 0x1F3FF) ||
           (c >= 0xE0020 && c <= 0xE007F);
}

static bool is_keycap_base(uint32_t c)
{
    return (c >= '0' && c <= '9') || c == '#' || c == '*';
}

/* A pictographic base: the blocks where emoji live (deliberately a little
 * wider than Unicode's Extended_Pictographic, and simpler). */
static bool is_base(uint32_t c)
{
    static const uint32_t ranges[][2] = {
        {0x00A9, 0x00A9}, {0x00AE, 0x00AE}, {0x203C, 0x203C},   {0x2049, 0x2049}, {0x2122, 0x2122},
        {0x2139, 0x2139}, {0x2190, 0x21FF}, {0x2300, 0x23FF},   {0x24C2, 0x24C2}, {0x25A0, 0x25FF},
        {0x2600, 0x27BF}, {0x2900, 0x297F}, {0x2B00, 0x2BFF},   {0x3030, 0x3030}, {0x303D, 0x303D},
        {0x3297, 0x3297}, {0x3299, 0x3299}, {0x1F000, 0x1FAFF},
    };

    if (is_regional(c) || is_modifier(c))
        return false;
    for (size_t i = 0; i < ARRAY_SIZE(ranges); i++)
        if (c >= ranges[i][0] && c <= ranges[i][1])
            return true;
    return false;
}

/*
 * One emoji, as a sequence of n code points: a keycap (base [FE0F] 20E3),
 * a flag (two regional indicators), or a base followed by modifiers, with
 * further bases only after a ZWJ (a base right after another base starts a
 * second emoji).
 */
static bool emoji_sequence_ok(const uint32_t *cp, size_t n)
{
    bool after_zwj = false;

    if (is_keycap_base(cp[0]))
        return (n == 2 && cp[1] == 0x20E3) || (n == 3 && cp[1] == 0xFE0F && cp[2] == 0x20E3);
    if (is_regional(cp[0]))
        return n == 2 && is_regional(cp[1]);
    if (!is_base(cp[0]))
        return false;
    for (size_t i = 1; i < n; i++) {
        if (cp[i] == 0x200D) {
            if (after_zwj || i == n - 1)
                return false;
            after_zwj = true;
        } else if (after_zwj) {
            if (!is_base(cp[i]))
                return false;
            after_zwj = false;
        } else if (!is_modifier(cp[i])) {
            return false;
        }
    }
    return true;
}

static int emoji_check(const char *emoji)
{
    size_t n = strnlen(emoji, 4 * PRESENCE_EMOJI_MAX_CPS + 1);
    const unsigned char *p = (const unsigned char *)emoji, *end = p + n;
    uint32_t cp[PRESENCE_EMOJI_MAX_CPS] = {0};
    size_t count = 0;

    if (n > 4 * PRESENCE_EMOJI_MAX_CPS)
        return PRESENCE_E_BAD_EMOJI;
    if (emoji[0] == ':')
        return is_shortcode(emoji, n) ? 0 : PRESENCE_E_BAD_EMOJI;
    if (!utf8_valid(emoji, n))
        return PRESENCE_E_BAD_EMOJI;
    while (p < end) {
        if (count == PRESENCE_EMOJI_MAX_CPS)
            return PRESENCE_E_BAD_EMOJI;
        cp[count++] = utf8_next(&p);
    }
    return emoji_sequence_ok(cp, count) ? 0 : PRESENCE_E_BAD_EMOJI;
}

int presence_custom_check(const char *text, const char *emoji)
{
    int rc;

    if (text != NULL && text[0] != '\0') {
        rc = text_check(text);
        if (rc != 0)
            return rc;
    }
    if (emoji != NULL && emoji[0] != '\0')
        return emoji_check(emoji);
    return 0;
}

/* ---- names ---- */

static const char *const status_names[] = {
    [PRESENCE_OFFLINE] = "offline", [PRESENCE_ONLINE] = "online", [PRESENCE_AWAY] = "away",
    [PRESENCE_BUSY] = "busy",       [PRESENCE_DND] = "dnd",
};

static const char *const device_names[] = {
    [PRESENCE_DEVICE_DESKTOP] = "desktop", [PRESENCE_DEVICE_MOBILE] = "mobile",
    [PRESENCE_DEVICE_TABLET] = "tablet",   [PRESENCE_DEVICE_WEB] = "web",
    [PRESENCE_DEVICE_OTHER] = "other",
};

static const char *const policy_names[] = {
    [PRESENCE_POLICY_MOST_AVAILABLE] = "most-available",
    [PRESENCE_POLICY_DND_WINS] = "dnd-wins",
    [PRESENCE_POLICY_MOST_RECENT] = "most-recent",
};

static const char *const age_names[] = {
    [PRESENCE_AGE_SECONDS] = "seconds",       [PRESENCE_AGE_MINUTES] = "minutes",
    [PRESENCE_AGE_TODAY] = "today",           [PRESENCE_AGE_THIS_WEEK] = "this_week",
    [PRESENCE_AGE_THIS_MONTH] = "this_month", [PRESENCE_AGE_THIS_YEAR] = "this_year",
    [PRESENCE_AGE_LONG_AGO] = "long_ago",
};

static const char *name_of(const char *const *names, size_t n, unsigned i)
{
    return i < n ? names[i] : "?";
}

/* Index of s in names, or -1. */
static int index_of(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; s != NULL && i < n; i++)
        if (strcmp(names[i], s) == 0)
            return (int)i;
    return -1;
}

const char *presence_status_name(enum presence_status s)
{
    return name_of(status_names, ARRAY_SIZE(status_names), (unsigned)s);
}

const char *presence_device_name(enum presence_device d)
{
    return name_of(device_names, ARRAY_SIZE(device_names), (unsigned)d);
}

const char *presence_policy_name(enum presence_policy policy)
{
    return name_of(policy_names, ARRAY_SIZE(policy_names), (unsigned)policy);
}

const char *presence_age_unit_name(enum presence_age_unit unit)
{
    return name_of(age_names, ARRAY_SIZE(age_names), (unsigned)unit);
}

int presence_status_parse(const char *s)
{
    int i = index_of(status_names, ARRAY_SIZE(status_names), s);

    /* "offline" is a name but never a settable status. */
    return i > PRESENCE_OFFLINE ? i : PRESENCE_E_BAD_STATUS;
}

int presence_device_parse(const char *s)
{
    int i = index_of(device_names, ARRAY_SIZE(device_names), s);

    return i >= 0 ? i : PRESENCE_E_BAD_DEVICE;
}

int presence_policy_parse(const char *s)
{
    int i = index_of(policy_names, ARRAY_SIZE(policy_names), s);

    return i >= 0 ? i : PRESENCE_E_CONFIG;
}

const char *presence_strerror(int err)
{
    switch (err) {
    case PRESENCE_E_BAD_ID:
        return "invalid id (1-128 characters of A-Z a-z 0-9 - _ . ~ : @)";
    case PRESENCE_E_BAD_DEVICE:
        return "unknown device type";
    case PRESENCE_E_BAD_STATUS:
        return "status must be online, away, busy or dnd";
    case PRESENCE_E_TEXT_UTF8:
        return "custom text is not valid UTF-8";
    case PRESENCE_E_TEXT_CONTROL:
        return "custom text contains a control character";
    case PRESENCE_E_TEXT_LONG:
        return "custom text is longer than 100 characters";
    case PRESENCE_E_BAD_EMOJI:
        return "custom emoji must be one emoji or a :shortcode:";
    case PRESENCE_E_BAD_EXPIRY:
        return "expiry must be in the future (and only busy, dnd and custom statuses expire)";
    case PRESENCE_E_SESSION_EXISTS:
        return "session id already in use";
    case PRESENCE_E_NO_SESSION:
        return "no such session";
    case PRESENCE_E_TOO_MANY:
        return "too many sessions for this user";
    case PRESENCE_E_DETACHED:
        return "session is disconnected (resume it first)";
    case PRESENCE_E_CONN:
        return "connection no longer owns the session";
    case PRESENCE_E_UNKNOWN_USER:
        return "user never seen";
    case PRESENCE_E_CONFIG:
        return "invalid presence configuration";
    case PRESENCE_E_ONLINE:
        return "user has a session";
    default:
        return "unknown error";
    }
}

/* ---- last-seen age ---- */

struct presence_age presence_age_of(uint64_t age_ms)
{
    static const struct {
        uint64_t below_s;
        enum presence_age_unit unit;
    } buckets[] = {
        {24 * 3600, PRESENCE_AGE_TODAY},
        {7 * 24 * 3600, PRESENCE_AGE_THIS_WEEK},
        {30 * 24 * 3600, PRESENCE_AGE_THIS_MONTH},
        {365 * 24 * 3600, PRESENCE_AGE_THIS_YEAR},
    };
    uint64_t s = age_ms / 1000;

    if (s < 60)
        return (struct presence_age){PRESENCE_AGE_SECONDS, (uint32_t)s};
    if (s < 3600)
        return (struct presence_age){PRESENCE_AGE_MINUTES, (uint32_t)(s / 60)};
    for (size_t i = 0; i < ARRAY_SIZE(buckets); i++)
        if (s < buckets[i].below_s)
            return (struct presence_age){buckets[i].unit, 0};
    return (struct presence_age){PRESENCE_AGE_LONG_AGO, 0};
}

/* ---- JSON ---- */

/* Monotonic ms to wall ms, never below 0. */
static uint64_t to_wall(uint64_t mono, int64_t offset)
{
    int64_t w = (int64_t)mono + offset;

    return w > 0 ? (uint64_t)w : 0;
}

static void encode_devices(const struct presence_view *v, struct buf *out)
{
    bool first = true;

    buf_append_str(out, ",\"devices\":{");
    for (unsigned d = 0; d < PRESENCE_DEVICE_COUNT; d++) {
        if (v->devices[d] == PRESENCE_OFFLINE)
            continue;
        buf_printf(out, "%s\"%s\":\"%s\"", first ? "" : ",", device_names[d],
                   status_names[v->devices[d]]);
        first = false;
    }
    buf_append_str(out, "}");
}

static void encode_custom(const struct presence_view *v, int64_t offset, struct buf *out)
{
    const struct presence_custom *c = &v->custom;
    const char *sep = "";

    if (c->text[0] == '\0' && c->emoji[0] == '\0')
        return;
    buf_append_str(out, ",\"custom\":{");
    if (c->text[0] != '\0') {
        buf_append_str(out, "\"text\":");
        json_append_cstr(out, c->text);
        sep = ",";
    }
    if (c->emoji[0] != '\0') {
        buf_printf(out, "%s\"emoji\":", sep);
        json_append_cstr(out, c->emoji);
        sep = ",";
    }
    if (c->expires_at != 0) {
        buf_printf(out, "%s\"expiresAt\":", sep);
        json_append_u64(out, to_wall(c->expires_at, offset));
    }
    buf_append_str(out, "}");
}

/* The granularity a coarse last seen is rounded down to, by its age. */
static uint64_t coarse_step(uint64_t age_ms)
{
    if (age_ms < 3600000)
        return 60000;
    return age_ms < 86400000 ? 3600000 : 86400000;
}

void presence_encode_last_seen(const struct presence_view *v, int64_t offset, bool exact,
                               struct buf *out)
{
    uint64_t seen = MIN(v->last_seen, v->now); /* never in the future */
    struct presence_age age = presence_age_of(v->now - seen);
    uint64_t at = to_wall(seen, offset);

    if (v->status != PRESENCE_OFFLINE || v->last_seen == 0)
        return;
    if (!exact)
        at -= at % coarse_step(v->now - seen);
    buf_append_str(out, ",\"lastSeen\":{\"at\":");
    json_append_u64(out, at);
    buf_printf(out, ",\"ago\":\"%s\"", age_names[age.unit]);
    if (age.unit == PRESENCE_AGE_MINUTES || (exact && age.unit == PRESENCE_AGE_SECONDS))
        buf_printf(out, ",\"value\":%u", (unsigned)age.value);
    buf_append_str(out, "}");
}

void presence_encode_user_as(const struct presence_view *v, int64_t wall_offset_ms, bool exact,
                             struct buf *out)
{
    buf_append_str(out, "{\"user\":");
    json_append_cstr(out, ns_strip(v->user)); /* as its namespace's clients know it */
    buf_printf(out, ",\"status\":\"%s\"", presence_status_name(v->status));
    encode_devices(v, out);
    encode_custom(v, wall_offset_ms, out);
    presence_encode_last_seen(v, wall_offset_ms, exact, out);
    if (exact) {
        buf_append_str(out, ",\"version\":");
        json_append_u64(out, v->version);
    }
    buf_append_str(out, "}");
}

void presence_encode_user(const struct presence_view *v, int64_t wall_offset_ms, struct buf *out)
{
    presence_encode_user_as(v, wall_offset_ms, true, out);
}
