/* SPDX-License-Identifier: MIT */
/*
 * proto.c - the native protocol's envelope: parsing a client message into
 * a type, the ref, the pong, and the count of rejected messages. Replies
 * are written by the engine's frame.h; cJSON is used only to read.
 */
#include "proto.h"

#include <stdio.h>
#include <string.h>

#include "frame.h"
#include "json.h"
#include "log.h"
#include "util.h"

void proto_ref_text(const cJSON *root, char out[PROTO_REF_MAX])
{
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(root, "ref");
    struct buf b = {0};

    out[0] = '\0';
    if (cJSON_IsString(ref))
        json_append_cstr(&b, ref->valuestring);
    else if (cJSON_IsNumber(ref))
        json_append_i64(&b, (int64_t)ref->valuedouble);
    if (b.len > 0 && b.len < PROTO_REF_MAX) {
        memcpy(out, b.data, b.len);
        out[b.len] = '\0';
    }
    buf_release(&b);
}

void proto_send_pong(struct wsconn *ws, const char *ref)
{
    struct buf b = {0};

    buf_printf(&b, "{\"type\":\"pong\",\"time\":%llu", (unsigned long long)time_wall_ms());
    frame_append_ref(&b, ref);
    buf_append_str(&b, "}");
    frame_send_buf(ws, &b);
}

cJSON *proto_parse(struct wsconn *ws, const char *p, size_t n, const char **type)
{
    cJSON *root = cJSON_ParseWithLength(p, n);
    const cJSON *t;
    char ref[PROTO_REF_MAX];

    if (!root) {
        frame_send_error(ws, "bad_json", "message is not valid JSON", NULL);
        return NULL;
    }
    t = cJSON_GetObjectItemCaseSensitive(root, "type");
    if (!cJSON_IsObject(root) || !cJSON_IsString(t)) {
        proto_ref_text(root, ref);
        frame_send_error(ws, "bad_message", "message must be an object with a string \"type\"",
                         ref);
        cJSON_Delete(root);
        return NULL;
    }
    *type = t->valuestring;
    return root;
}

bool proto_count_error(struct wsconn *ws, unsigned *bad)
{
    if (++*bad < PROTO_MAX_ERRORS)
        return false;
    log_info("proto", "too many bad messages, closing conn=%llu",
             (unsigned long long)ws_conn(ws)->id);
    ws_close(ws, 1008, "too many invalid messages");
    return true;
}
