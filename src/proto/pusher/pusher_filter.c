/* SPDX-License-Identifier: MIT */
/*
 * pusher_filter.c - Pusher room frames without the reader's blockers
 * (pusher_filter.h).
 */
#include "pusher_filter.h"

#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "ws.h"

enum verdict { KEEP, DROP, REWRITE };

/* The data of root: Pusher's data is a string holding JSON. */
static cJSON *data_of(const cJSON *root)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "data"));

    return s ? cJSON_Parse(s) : NULL;
}

static bool user_blocked(const cJSON *obj, pusher_blocked_fn *blocked, void *ctx)
{
    const char *u = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, "user_id"));

    return u && blocked(ctx, u);
}

/* subscription_succeeded: the blockers leave ids and hash, count follows.
 * Returns whether anything went; then root's data is the new string. */
static bool drop_members(cJSON *root, pusher_blocked_fn *blocked, void *ctx)
{
    cJSON *data = data_of(root), *pres, *ids, *hash, *it, *next;
    bool changed = false;
    char *text;

    pres = cJSON_GetObjectItemCaseSensitive(data, "presence");
    ids = cJSON_GetObjectItemCaseSensitive(pres, "ids");
    hash = cJSON_GetObjectItemCaseSensitive(pres, "hash");
    for (it = cJSON_IsArray(ids) ? ids->child : NULL; it; it = next) {
        next = it->next;
        if (cJSON_IsString(it) && blocked(ctx, it->valuestring)) {
            cJSON_DeleteItemFromObjectCaseSensitive(hash, it->valuestring);
            cJSON_DetachItemViaPointer(ids, it);
            cJSON_Delete(it);
            changed = true;
        }
    }
    if (changed) {
        /* Delete and add, not replace: a replace that finds no item
         * leaves the new one to nobody. */
        cJSON_DeleteItemFromObjectCaseSensitive(pres, "count");
        cJSON_AddNumberToObject(pres, "count", cJSON_GetArraySize(ids));
        text = cJSON_PrintUnformatted(data);
        if (!text)
            abort(); /* cJSON fails only on OOM */
        cJSON_DeleteItemFromObjectCaseSensitive(root, "data");
        cJSON_AddStringToObject(root, "data", text);
        cJSON_free(text);
    }
    cJSON_Delete(data);
    return changed;
}

/* What becomes of one frame's JSON (root); REWRITE leaves root changed. */
static enum verdict judge(cJSON *root, pusher_blocked_fn *blocked, void *ctx)
{
    const char *ev = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "event"));
    enum verdict v = KEEP;
    cJSON *data;

    if (!ev)
        return KEEP;
    if (strcmp(ev, "pusher_internal:member_added") == 0 ||
        strcmp(ev, "pusher_internal:member_removed") == 0) {
        data = data_of(root);
        v = user_blocked(data, blocked, ctx) ? DROP : KEEP;
        cJSON_Delete(data);
        return v;
    }
    if (strcmp(ev, "pusher_internal:subscription_succeeded") == 0)
        return drop_members(root, blocked, ctx) ? REWRITE : KEEP;
    return user_blocked(root, blocked, ctx) ? DROP : KEEP;
}

/* Appends frame (hdr + payload bytes at p, n in all) to out as judged. */
static bool one_frame(struct buf *out, const char *p, size_t hlen, size_t n,
                      pusher_blocked_fn *blocked, void *ctx)
{
    cJSON *root = cJSON_ParseWithLength(p + hlen, n - hlen);
    enum verdict v = root ? judge(root, blocked, ctx) : KEEP;

    if (v == KEEP) {
        buf_append(out, p, n);
    } else if (v == REWRITE) {
        char *text = cJSON_PrintUnformatted(root);
        struct payload *f;

        if (!text)
            abort();
        f = ws_frame_payload(WS_OP_TEXT, text, strlen(text));
        buf_append(out, f->data, f->len);
        payload_unref(f);
        cJSON_free(text);
    }
    cJSON_Delete(root);
    return v != KEEP;
}

struct payload *pusher_filter_blocked(struct payload *f, pusher_blocked_fn *blocked, void *ctx)
{
    struct buf out = {0};
    bool changed = false;
    size_t off = 0;

    while (off < f->len) {
        struct ws_frame wf;
        ssize_t h = ws_decode_header(f->data + off, f->len - off, &wf);

        if (h <= 0 || wf.opcode != WS_OP_TEXT || wf.len > f->len - off - (size_t)h) {
            buf_release(&out);
            return payload_ref(f); /* not ours to read: passed on as it is */
        }
        changed |= one_frame(&out, f->data + off, (size_t)h, (size_t)h + wf.len, blocked, ctx);
        off += (size_t)h + wf.len;
    }
    if (!changed) {
        buf_release(&out);
        return payload_ref(f);
    }
    f = out.len ? payload_from(out.data, out.len) : NULL;
    buf_release(&out);
    return f;
}
