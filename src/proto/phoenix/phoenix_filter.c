/* SPDX-License-Identifier: MIT */
/*
 * phoenix_filter.c - Phoenix room frames without the reader's blockers
 * (phoenix_filter.h).
 */
#include "phoenix_filter.h"

#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "ws.h"

/* Takes the blockers' keys out of the object obj; whether any went. */
static bool drop_keys(cJSON *obj, phx_blocked_fn *blocked, void *ctx)
{
    cJSON *it, *next;
    bool changed = false;

    for (it = cJSON_IsObject(obj) ? obj->child : NULL; it; it = next) {
        next = it->next;
        if (it->string && blocked(ctx, it->string)) {
            cJSON_Delete(cJSON_DetachItemViaPointer(obj, it));
            changed = true;
        }
    }
    return changed;
}

/* The frame of m with payload root, re-encoded as a push. */
static struct payload *push_of(enum phx_vsn vsn, const struct phx_msg *m, const cJSON *root)
{
    char *text = cJSON_PrintUnformatted(root);
    struct buf b = {0};
    struct payload *f;

    if (!text)
        abort(); /* cJSON fails only on OOM */
    phx_encode_push(&b, vsn, m->has_join_ref ? m->join_ref : NULL, m->topic, m->event, text,
                    strlen(text));
    cJSON_free(text);
    f = ws_frame_payload(WS_OP_TEXT, b.data, b.len);
    buf_release(&b);
    return f;
}

/* presence_state or presence_diff of root: NULL = as it is, else the new
 * frame (*gone: nothing left to send). */
static struct payload *filter_presence(enum phx_vsn vsn, const struct phx_msg *m, cJSON *root,
                                       bool diff, phx_blocked_fn *blocked, void *ctx, bool *gone)
{
    cJSON *joins = cJSON_GetObjectItemCaseSensitive(root, "joins");
    cJSON *leaves = cJSON_GetObjectItemCaseSensitive(root, "leaves");
    bool changed;

    if (!diff)
        return drop_keys(root, blocked, ctx) ? push_of(vsn, m, root) : NULL;
    changed = drop_keys(joins, blocked, ctx);
    changed = drop_keys(leaves, blocked, ctx) || changed;
    if (!changed)
        return NULL;
    if (cJSON_GetArraySize(joins) == 0 && cJSON_GetArraySize(leaves) == 0) {
        *gone = true;
        return NULL;
    }
    return push_of(vsn, m, root);
}

struct payload *phx_filter_blocked(enum phx_vsn vsn, struct payload *f, phx_blocked_fn *blocked,
                                   void *ctx)
{
    struct ws_frame wf;
    ssize_t h = ws_decode_header(f->data, f->len, &wf);
    struct phx_msg m;
    struct payload *out = NULL;
    bool diff, gone = false;
    cJSON *root;

    if (h <= 0 || wf.opcode != WS_OP_TEXT || (size_t)h + wf.len != f->len ||
        phx_decode(vsn, f->data + h, (size_t)wf.len, &m) != 0)
        return payload_ref(f); /* not ours to read: passed on as it is */
    diff = strcmp(m.event, "presence_diff") == 0;
    if (!diff && strcmp(m.event, "presence_state") != 0)
        return payload_ref(f);
    root = cJSON_ParseWithLength(m.payload, m.payload_len);
    if (root)
        out = filter_presence(vsn, &m, root, diff, blocked, ctx, &gone);
    cJSON_Delete(root);
    if (gone)
        return NULL;
    return out ? out : payload_ref(f);
}
