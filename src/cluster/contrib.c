/* SPDX-License-Identifier: MIT */
/* contrib.c - contributions and global views as JSON (contrib.h). */
#include "contrib.h"

#include <errno.h>
#include <string.h>

#include "json.h"

static void append_devices(struct buf *b, const enum presence_status *d)
{
    buf_append(b, "[", 1);
    for (int i = 0; i < PRESENCE_DEVICE_COUNT; i++) {
        if (i)
            buf_append(b, ",", 1);
        json_append_u64(b, (uint64_t)d[i]);
    }
    buf_append(b, "]", 1);
}

void contrib_encode(struct buf *b, const struct contrib *c)
{
    buf_append_str(b, "{\"s\":");
    json_append_u64(b, (uint64_t)c->status);
    buf_append_str(b, ",\"d\":");
    append_devices(b, c->devices);
    buf_append_str(b, ",\"a\":");
    json_append_u64(b, c->activity);
    buf_append_str(b, c->online ? ",\"o\":1,\"n\":" : ",\"o\":0,\"n\":");
    json_append_u64(b, c->sessions);
    buf_append_str(b, ",\"ct\":");
    json_append_cstr(b, c->text ? c->text : "");
    buf_append_str(b, ",\"ce\":");
    json_append_cstr(b, c->emoji ? c->emoji : "");
    buf_append_str(b, ",\"cx\":");
    json_append_u64(b, c->custom_expires);
    buf_append_str(b, ",\"ca\":");
    json_append_u64(b, c->custom_activity);
    buf_append(b, "}", 1);
}

/* A non-negative integer field below 2^63 (doubles hold exact integers
 * up to 2^53, which every time and version here stays below). */
static int get_u64(const cJSON *o, const char *k, uint64_t max, uint64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    double d;

    if (!cJSON_IsNumber(v))
        return -EINVAL;
    d = v->valuedouble;
    if (!(d >= 0) || d > (double)max || d != (double)(uint64_t)d)
        return -EINVAL;
    *out = (uint64_t)d;
    return 0;
}

static int get_str(const cJSON *o, const char *k, char *dst, size_t cap)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    size_t n;

    if (!cJSON_IsString(v) || !v->valuestring)
        return -EINVAL;
    n = strlen(v->valuestring);
    if (n >= cap)
        return -EINVAL;
    memcpy(dst, v->valuestring, n + 1);
    return 0;
}

static int get_status(const cJSON *v, enum presence_status *out)
{
    double d;

    if (!cJSON_IsNumber(v))
        return -EINVAL;
    d = v->valuedouble;
    if (!(d >= PRESENCE_OFFLINE && d <= PRESENCE_DND) || d != (double)(int)d)
        return -EINVAL;
    *out = (enum presence_status)(int)d;
    return 0;
}

static int get_devices(const cJSON *o, enum presence_status *d)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "d");
    int i = 0;
    const cJSON *v;

    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != PRESENCE_DEVICE_COUNT)
        return -EINVAL;
    cJSON_ArrayForEach(v, a)
    {
        if (get_status(v, &d[i++]) != 0)
            return -EINVAL;
    }
    return 0;
}

static int decode_fields(const cJSON *o, struct contrib_view *out)
{
    uint64_t n;

    if (!cJSON_IsObject(o) || get_str(o, "u", out->uid, sizeof(out->uid)) != 0 || !out->uid[0])
        return -EINVAL;
    if (get_status(cJSON_GetObjectItemCaseSensitive(o, "s"), &out->status) != 0 ||
        get_devices(o, out->devices) != 0)
        return -EINVAL;
    if (get_str(o, "ct", out->text, sizeof(out->text)) != 0 ||
        get_str(o, "ce", out->emoji, sizeof(out->emoji)) != 0)
        return -EINVAL;
    if (get_u64(o, "cx", INT64_MAX, &out->custom_expires) != 0 ||
        get_u64(o, "n", UINT32_MAX, &n) != 0 || get_u64(o, "seen", INT64_MAX, &out->seen) != 0 ||
        get_u64(o, "ver", INT64_MAX, &out->ver) != 0)
        return -EINVAL;
    out->sessions = (unsigned)n;
    return 0;
}

int contrib_view_decode(const char *json, size_t len, struct contrib_view *out)
{
    cJSON *o;
    int r;

    memset(out, 0, sizeof(*out));
    if (json_check(json, len) != 0)
        return -EINVAL;
    o = cJSON_ParseWithLength(json, len);
    if (!o)
        return -EINVAL;
    r = decode_fields(o, out);
    cJSON_Delete(o);
    return r;
}

void contrib_seats_encode(struct buf *b, unsigned sessions, unsigned live)
{
    buf_printf(b, "%u %u", sessions, live);
}

/* A decimal number at *p (no sign, no leading zero) up to end. */
static int seats_number(const char **p, const char *end, unsigned *out)
{
    const char *s = *p;
    unsigned v = 0;

    if (s == end || *s < '0' || *s > '9' || (*s == '0' && s + 1 < end && s[1] != ' '))
        return -EINVAL;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        v = v * 10 + (unsigned)(*s - '0');
        if (v > CONTRIB_SEATS_MAX)
            return -EINVAL;
    }
    *p = s;
    *out = v;
    return 0;
}

int contrib_seats_parse(const char *s, size_t len, unsigned *sessions, unsigned *live)
{
    const char *p = s, *end = s + len;
    unsigned n, l;

    if (seats_number(&p, end, &n) != 0 || p == end || *p++ != ' ' ||
        seats_number(&p, end, &l) != 0 || p != end || l > n)
        return -EINVAL;
    *sessions = n;
    *live = l;
    return 0;
}

int contrib_hs_parse(const char *s, size_t len, size_t *node_len, uint64_t *deadline)
{
    const char *sp = memchr(s, ' ', len), *p, *end = s + len;
    uint64_t v = 0;

    if (!sp || sp == s || (size_t)(sp - s) > CONTRIB_NODE_MAX || memchr(s, '\0', (size_t)(sp - s)))
        return -EINVAL;
    for (p = sp + 1; p < end && *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (uint64_t)(*p - '0');
        if (v >= (1ull << 53))
            return -EINVAL;
    }
    if (p == sp + 1 || p != end || (sp[1] == '0' && p - sp > 2))
        return -EINVAL;
    *node_len = (size_t)(sp - s);
    *deadline = v;
    return 0;
}

void contrib_resume_encode(struct buf *b, const struct contrib_resume *r)
{
    buf_printf(b, "%s %llu %d %d %d %llu %llu\n%s\n%s", r->node, (unsigned long long)r->deadline,
               (int)r->device, (int)r->status, r->idle ? 1 : 0,
               (unsigned long long)r->status_expires, (unsigned long long)r->custom_expires,
               r->text, r->emoji);
}

/* A decimal number below 2^53 without leading zeros, ending at a space
 * or end: its value, *p past it; -EINVAL when not one. */
static int take_num(const char **p, const char *end, uint64_t *out)
{
    const char *q = *p;
    uint64_t v = 0;

    for (; q < end && *q >= '0' && *q <= '9'; q++) {
        v = v * 10 + (uint64_t)(*q - '0');
        if (v >= (1ull << 53))
            return -EINVAL;
    }
    if (q == *p || (**p == '0' && q - *p > 1) || (q < end && *q != ' '))
        return -EINVAL;
    *p = q < end ? q + 1 : q;
    *out = v;
    return 0;
}

/* Copies the n bytes at s into dst (cap bytes): -EINVAL when too long or
 * holding a NUL. */
static int copy_field(char *dst, size_t cap, const char *s, size_t n)
{
    if (n >= cap || memchr(s, '\0', n))
        return -EINVAL;
    memcpy(dst, s, n);
    dst[n] = '\0';
    return 0;
}

int contrib_resume_parse(const char *s, size_t len, struct contrib_resume *out)
{
    const char *end = s + len, *l1 = memchr(s, '\n', len), *l2, *sp, *p;
    uint64_t v[6];

    if (!l1 || !(l2 = memchr(l1 + 1, '\n', (size_t)(end - l1 - 1))) ||
        memchr(l2 + 1, '\n', (size_t)(end - l2 - 1)))
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    sp = memchr(s, ' ', (size_t)(l1 - s));
    if (!sp || sp == s || copy_field(out->node, sizeof(out->node), s, (size_t)(sp - s)) != 0)
        return -EINVAL;
    p = sp + 1;
    for (int i = 0; i < 6; i++)
        if (p >= l1 || take_num(&p, l1, &v[i]) != 0)
            return -EINVAL;
    if (p != l1 || l1[-1] == ' ' || v[1] >= PRESENCE_DEVICE_COUNT || v[2] == PRESENCE_OFFLINE ||
        v[2] > PRESENCE_DND || v[3] > 1)
        return -EINVAL;
    out->deadline = v[0];
    out->device = (enum presence_device)v[1];
    out->status = (enum presence_status)v[2];
    out->idle = v[3] == 1;
    out->status_expires = v[4];
    out->custom_expires = v[5];
    if (copy_field(out->text, sizeof(out->text), l1 + 1, (size_t)(l2 - l1 - 1)) != 0 ||
        copy_field(out->emoji, sizeof(out->emoji), l2 + 1, (size_t)(end - l2 - 1)) != 0)
        return -EINVAL;
    return 0;
}
