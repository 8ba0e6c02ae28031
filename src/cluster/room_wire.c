/* SPDX-License-Identifier: MIT */
/*
 * room_wire.c - the text of a room between nodes (room_wire.h).
 */
#include "room_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "json.h"

/* A field ends at a space, a newline or the end; it has no NUL. */
static size_t field_len(const char *p, const char *end)
{
    const char *q = p;

    while (q < end && *q != ' ' && *q != '\n' && *q != '\0')
        q++;
    return (size_t)(q - p);
}

/* Takes a field of 1..max bytes at *p, followed by sep, into s; *p moves
 * past sep. sep '\0' means the field must end the input. */
static int take_field(const char **p, const char *end, size_t max, char sep,
                      struct room_wire_str *s)
{
    size_t n = field_len(*p, end);
    const char *after = *p + n;

    if (n == 0 || n > max)
        return -EINVAL;
    if (sep ? (after == end || *after != sep) : after != end)
        return -EINVAL;
    s->p = *p;
    s->len = n;
    *p = sep ? after + 1 : after;
    return 0;
}

/* A decimal of 1..20 digits that fits 64 bits, ended by a space. */
static int take_u64(const char **p, const char *end, uint64_t *out)
{
    const char *q = *p;
    uint64_t v = 0;

    if (q == end || *q < '0' || *q > '9')
        return -EINVAL;
    for (; q < end && *q >= '0' && *q <= '9'; q++) {
        unsigned d = (unsigned)(*q - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -EINVAL;
        v = v * 10 + d;
    }
    if (q == end || *q != ' ')
        return -EINVAL;
    *out = v;
    *p = q + 1;
    return 0;
}

int room_wire_msg_parse(const char *msg, size_t len, struct room_wire_msg *out)
{
    const char *p = msg, *end = msg + len;

    if (take_u64(&p, end, &out->seq) || take_field(&p, end, ROOM_WIRE_NODE_MAX, ' ', &out->node) ||
        take_field(&p, end, ROOM_ID_MAX, '\n', &out->room))
        return -EINVAL;
    out->body.p = p;
    out->body.len = (size_t)(end - p);
    return 0;
}

/* The line at *p, *p moved past it and its "\n". */
static const char *line_at(const char **p, const char *end, const char **le)
{
    const char *nl = memchr(*p, '\n', (size_t)(end - *p)), *l = *p;

    *le = nl ? nl : end;
    *p = nl ? nl + 1 : end;
    return l;
}

/* "<joinedAt> <meta>" up to le: meta non-empty without NUL. */
static int take_joined(const char *p, const char *le, uint64_t *joined_at,
                       struct room_wire_str *meta)
{
    if (take_u64(&p, le, joined_at) || p == le || memchr(p, '\0', (size_t)(le - p)))
        return -EINVAL;
    meta->p = p;
    meta->len = (size_t)(le - p);
    return 0;
}

int room_wire_op_next(const char **p, const char *end, struct room_wire_op *op)
{
    const char *le, *l;

    if (*p >= end)
        return -ENOENT;
    l = line_at(p, end, &le);
    memset(op, 0, sizeof(*op));
    if (le - l == 1 && l[0] == '*') {
        op->kind = ROOM_WIRE_DROP;
        return 0;
    }
    if (le - l < 3 || l[1] != ' ' || (l[0] != '+' && l[0] != '-'))
        return -EINVAL;
    l += 2;
    if (l[-2] == '-') {
        op->kind = ROOM_WIRE_LEAVE;
        return take_field(&l, le, ROOM_ID_MAX, '\0', &op->user);
    }
    op->kind = ROOM_WIRE_JOIN;
    if (take_field(&l, le, ROOM_ID_MAX, ' ', &op->user))
        return -EINVAL;
    return take_joined(l, le, &op->joined_at, &op->meta);
}

int room_wire_state_next(const char **p, const char *end, struct room_wire_state *st)
{
    const char *le, *l;

    if (*p >= end)
        return -ENOENT;
    l = line_at(p, end, &le);
    memset(st, 0, sizeof(*st));
    if (take_field(&l, le, ROOM_WIRE_NODE_MAX, ' ', &st->node) ||
        take_field(&l, le, ROOM_ID_MAX, ' ', &st->user))
        return -EINVAL;
    return take_joined(l, le, &st->joined_at, &st->meta);
}

int room_wire_ephemeral_parse(const char *body, size_t len, struct room_wire_ephemeral *out)
{
    const char *p = body, *end = body + len;

    if (take_field(&p, end, ROOM_ID_MAX, ' ', &out->user) ||
        take_field(&p, end, ROOM_KIND_MAX, ' ', &out->kind) || memchr(p, '\0', (size_t)(end - p)))
        return -EINVAL;
    out->data.p = p;
    out->data.len = (size_t)(end - p);
    return 0;
}

/* A field of 0..max bytes or "-" (then len 0), followed by a space. */
static int take_opt(const char **p, const char *end, size_t max, struct room_wire_str *s)
{
    if (take_field(p, end, max, ' ', s))
        return -EINVAL;
    if (s->len == 1 && s->p[0] == '-')
        s->len = 0;
    return 0;
}

/* A decimal of 1..max ended by a newline; *p moves past the newline. */
static int take_len(const char **p, const char *end, uint64_t max, uint64_t *out)
{
    const char *q = *p;
    uint64_t v = 0;

    for (; q < end && *q >= '0' && *q <= '9' && v <= max; q++)
        v = v * 10 + (uint64_t)(*q - '0');
    if (q == *p || q == end || *q != '\n' || v == 0 || v > max)
        return -EINVAL;
    *out = v;
    *p = q + 1;
    return 0;
}

int room_wire_cast_parse(const char *body, size_t len, struct room_wire_cast *out)
{
    const char *p = body + 2, *end = body + len;
    uint64_t n;

    if (len < 2 || body[0] != '!' || body[1] != ' ')
        return -EINVAL;
    if (take_opt(&p, end, ROOM_ID_MAX, &out->user) ||
        take_opt(&p, end, ROOM_WIRE_TAG_MAX, &out->exclude) ||
        take_len(&p, end, ROOM_WIRE_EVENT_MAX, &n) || n > (uint64_t)(end - p) ||
        memchr(p, '\0', (size_t)(end - p)))
        return -EINVAL;
    out->event = (struct room_wire_str){p, (size_t)n};
    out->data = (struct room_wire_str){p + n, (size_t)(end - p) - (size_t)n};
    return 0;
}

/* Keeps b's text a C string after a buf_append(). */
static void terminate(struct buf *b)
{
    buf_reserve(b, 1);
    b->data[b->len] = '\0';
}

void room_wire_put_join(struct buf *b, const char *user, uint64_t joined_at, const char *meta,
                        size_t meta_len)
{
    buf_printf(b, "+ %s %llu ", user, (unsigned long long)joined_at);
    buf_append(b, meta, meta_len);
    buf_append(b, "\n", 1);
    terminate(b);
}

void room_wire_put_leave(struct buf *b, const char *user)
{
    buf_printf(b, "- %s\n", user);
}

void room_wire_put_ephemeral(struct buf *b, const char *user, const char *kind, const char *data,
                             size_t data_len)
{
    buf_printf(b, "%s %s ", user, kind);
    buf_append(b, data, data_len);
    terminate(b);
}

void room_wire_put_cast(struct buf *b, const char *user, const char *exclude, const char *event,
                        const char *data, size_t data_len)
{
    buf_printf(b, "! %s %s %zu\n", user[0] ? user : "-", exclude[0] ? exclude : "-", strlen(event));
    buf_append(b, event, strlen(event));
    buf_append(b, data, data_len);
    terminate(b);
}

/* ---- per-connection metadata ---- */

static bool names_values(const char *s, size_t n)
{
    return s && n > 0 && memmem(s, n, "\"" ROOM_SESSION_VALUES "\"", 8) != NULL;
}

/* The "~metas" object of v, or NULL. */
static cJSON *values_of(const cJSON *v)
{
    cJSON *sv = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, ROOM_SESSION_VALUES) : NULL;

    return cJSON_IsObject(sv) ? sv : NULL;
}

/* Appends n bytes of s to out, leaving its text NUL-terminated. */
static int append_text(struct buf *out, const char *s, size_t n)
{
    buf_append(out, s, n);
    buf_append(out, "", 1);
    out->len--;
    return 0;
}

/* Appends v, compact, to out and frees it. */
static int print_to(cJSON *v, struct buf *out)
{
    char *s = cJSON_PrintUnformatted(v);

    cJSON_Delete(v);
    if (!s)
        abort(); /* cJSON's malloc failed: out of memory */
    append_text(out, s, strlen(s));
    free(s);
    return 0;
}

int room_wire_meta_own(const char *meta, size_t len, const char *const *sids, size_t n,
                       struct buf *out)
{
    cJSON *v, *sv, *item, *next;

    if (!names_values(meta, len))
        return append_text(out, meta, len);
    if (json_check(meta, len) != 0 || !(v = cJSON_ParseWithLength(meta, len)))
        return -EINVAL;
    if ((sv = values_of(v))) {
        for (item = sv->child; item; item = next) {
            bool keep = false;
            next = item->next;
            for (size_t i = 0; i < n && !keep; i++)
                keep = strcmp(item->string, sids[i]) == 0;
            if (!keep)
                cJSON_Delete(cJSON_DetachItemViaPointer(sv, item));
        }
    }
    return print_to(v, out);
}

int room_wire_meta_swap(const char *cur, size_t cur_len, const char *prev, size_t prev_len,
                        const char *next, size_t next_len, struct buf *out)
{
    cJSON *c = NULL, *p = NULL, *x = NULL, *r, *sv, *item;
    const cJSON *cs, *ps, *xs;
    int rc = -EINVAL;

    if (!names_values(cur, cur_len) && !names_values(prev, prev_len) &&
        !names_values(next, next_len)) {
        return next ? append_text(out, next, next_len) : append_text(out, cur, cur_len);
    }
    if (json_check(cur, cur_len) != 0 || (prev && json_check(prev, prev_len) != 0) ||
        (next && json_check(next, next_len) != 0))
        return -EINVAL;
    if (!(c = cJSON_ParseWithLength(cur, cur_len)) ||
        (prev && !(p = cJSON_ParseWithLength(prev, prev_len))) ||
        (next && !(x = cJSON_ParseWithLength(next, next_len))))
        goto out_free;
    r = cJSON_Duplicate(next ? x : c, true);
    if (!r)
        abort();
    if (!cJSON_IsObject(r)) { /* no room for values: as before, the newest wins */
        rc = print_to(r, out);
        goto out_free;
    }
    cs = values_of(c);
    ps = values_of(p);
    xs = values_of(x);
    sv = cJSON_CreateObject();
    for (item = cs ? cs->child : NULL; item; item = item->next)
        if (!(ps && cJSON_GetObjectItemCaseSensitive(ps, item->string)) &&
            !(xs && cJSON_GetObjectItemCaseSensitive(xs, item->string)))
            cJSON_AddItemToObject(sv, item->string, cJSON_Duplicate(item, true));
    for (item = xs ? xs->child : NULL; item; item = item->next)
        cJSON_AddItemToObject(sv, item->string, cJSON_Duplicate(item, true));
    cJSON_DeleteItemFromObjectCaseSensitive(r, ROOM_SESSION_VALUES);
    if (sv->child)
        cJSON_AddItemToObject(r, ROOM_SESSION_VALUES, sv);
    else
        cJSON_Delete(sv);
    rc = print_to(r, out);
out_free:
    cJSON_Delete(c);
    cJSON_Delete(p);
    cJSON_Delete(x);
    return rc;
}
