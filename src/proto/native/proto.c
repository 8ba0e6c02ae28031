/* SPDX-License-Identifier: MIT */
/*
 * proto.c - the native protocol's envelope: parsing a client message into
 * a type, and the replies every message type shares (error, ack, pong).
 * Replies are written with the own JSON encoder straight into the buffer
 * that becomes the frame; cJSON is used only to read.
 */
#include "proto.h"

#include <stdio.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "util.h"

void proto_send_buf(struct wsconn *ws, struct buf *b)
{
    ws_send_text(ws, b->data, b->len);
    buf_release(b);
}

void proto_append_ref(struct buf *b, const char *ref)
{
    if (ref && ref[0]) {
        buf_append_str(b, ",\"ref\":");
        buf_append_str(b, ref);
    }
}

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

void proto_error_json(struct buf *b, const char *code, const char *message, const char *ref)
{
    buf_append_str(b, "{\"type\":\"error\",\"code\":");
    json_append_cstr(b, code);
    buf_append_str(b, ",\"message\":");
    json_append_cstr(b, message);
    proto_append_ref(b, ref);
    buf_append_str(b, "}");
}

void proto_send_error(struct wsconn *ws, const char *code, const char *message, const char *ref)
{
    struct buf b = {0};

    proto_error_json(&b, code, message, ref);
    proto_send_buf(ws, &b);
}

void proto_send_ack(struct wsconn *ws, const char *ref)
{
    struct buf b = {0};

    if (!ref || !ref[0])
        return;
    buf_append_str(&b, "{\"type\":\"ack\"");
    proto_append_ref(&b, ref);
    buf_append_str(&b, "}");
    proto_send_buf(ws, &b);
}

void proto_send_pong(struct wsconn *ws, const char *ref)
{
    struct buf b = {0};

    buf_printf(&b, "{\"type\":\"pong\",\"time\":%llu", (unsigned long long)time_wall_ms());
    proto_append_ref(&b, ref);
    buf_append_str(&b, "}");
    proto_send_buf(ws, &b);
}

cJSON *proto_parse(struct wsconn *ws, const char *p, size_t n, const char **type)
{
    cJSON *root = cJSON_ParseWithLength(p, n);
    const cJSON *t;
    char ref[PROTO_REF_MAX];

    if (!root) {
        proto_send_error(ws, "bad_json", "message is not valid JSON", NULL);
        return NULL;
    }
    t = cJSON_GetObjectItemCaseSensitive(root, "type");
    if (!cJSON_IsObject(root) || !cJSON_IsString(t)) {
        proto_ref_text(root, ref);
        proto_send_error(ws, "bad_message", "message must be an object with a string \"type\"",
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
