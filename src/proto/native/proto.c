/* SPDX-License-Identifier: MIT */
/*
 * proto.c - the native protocol's envelope: parsing a client message into
 * a type, the ref, the pong, and the count of rejected messages. Replies
 * are written by the engine's frame.h; cJSON is used only to read, and
 * only text that json_check() accepted.
 */
#include "proto.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "native_encode.h"
#include "util.h"

/* Renders a ref as JSON text into out: a string (as it is escaped on the
 * way out) or an integer in the int64 range (a double that is integral
 * and inside it: anything else would be an undefined cast), at most
 * PROTO_REF_MAX - 1 bytes. False, with out = "", for anything else. */
/* An error before the message reached a client's handler (the native
 * protocol's own, so no adapter lookup). */
static void send_error(struct wsconn *ws, const char *code, const char *message, const char *ref)
{
    struct buf b = {0};

    native_error_json(&b, code, message, ref);
    wsconn_send_text(ws, b.data, b.len);
    buf_release(&b);
}

static bool ref_render(const cJSON *ref, char out[PROTO_REF_MAX])
{
    struct buf b = {0};
    int64_t v;
    bool ok = false;

    out[0] = '\0';
    if (cJSON_IsString(ref))
        json_append_cstr(&b, ref->valuestring);
    else if (json_number_i64(ref, INT64_MIN, INT64_MAX, &v) == 0)
        json_append_i64(&b, v);
    if (b.len > 0 && b.len < PROTO_REF_MAX) {
        memcpy(out, b.data, b.len);
        out[b.len] = '\0';
        ok = true;
    }
    buf_release(&b);
    return ok;
}

void proto_ref_text(const cJSON *root, char out[PROTO_REF_MAX])
{
    ref_render(cJSON_GetObjectItemCaseSensitive(root, "ref"), out);
}

void proto_send_pong(struct wsconn *ws, const char *ref)
{
    struct buf b = {0};

    buf_printf(&b, "{\"type\":\"pong\",\"time\":%llu", (unsigned long long)time_wall_ms());
    if (ref && ref[0]) {
        buf_append_str(&b, ",\"ref\":");
        buf_append_str(&b, ref);
    }
    buf_append_str(&b, "}");
    wsconn_send_text(ws, b.data, b.len);
    buf_release(&b);
}

/* The text is checked (json_check) before cJSON sees it: cJSON alone
 * would take trailing data, raw control characters and bad UTF-8, and turn
 * "a\\u0000b" into an id "a" further on. */
cJSON *proto_parse(struct wsconn *ws, const char *p, size_t n, const char **type)
{
    int err = json_check(p, n);
    cJSON *root = err < 0 ? NULL : cJSON_ParseWithLength(p, n);
    const cJSON *t, *r;
    char ref[PROTO_REF_MAX], msg[96];

    if (!root) {
        if (err < 0 && err != JSON_E_SYNTAX)
            snprintf(msg, sizeof(msg), "message is not valid JSON: %s", json_strerror(err));
        else
            snprintf(msg, sizeof(msg), "message is not valid JSON");
        send_error(ws, "bad_json", msg, NULL);
        return NULL;
    }
    t = cJSON_GetObjectItemCaseSensitive(root, "type");
    r = cJSON_GetObjectItemCaseSensitive(root, "ref");
    if (!cJSON_IsObject(root) || !cJSON_IsString(t)) {
        proto_ref_text(root, ref);
        send_error(ws, "bad_message", "message must be an object with a string \"type\"", ref);
        cJSON_Delete(root);
        return NULL;
    }
    if (r && !ref_render(r, ref)) {
        send_error(ws, "bad_message", "ref must be a string of at most 61 bytes or an integer",
                   NULL);
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
             (unsigned long long)wsconn_to_conn(ws)->id);
    wsconn_close(ws, 1008, "too many invalid messages");
    return true;
}
