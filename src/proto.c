/* SPDX-License-Identifier: MIT */
/*
 * proto.c - the native protocol's envelope: welcome, ping/pong, errors.
 *
 * Every client message is a JSON object with a string "type". Messages
 * that are not valid JSON, not objects, lack a type, or name an unknown
 * type are answered with {"type":"error","code":...,"message":...,"ref":...}
 * and the connection stays open; PROTO_MAX_ERRORS bad messages in a row
 * close it with 1008 (policy violation). Binary messages close with 1003:
 * the protocol is JSON text only.
 */
#include "proto.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "log.h"
#include "util.h"
#include "worker.h"

struct proto_state {
    unsigned bad_in_a_row; /* consecutive rejected messages */
};

static void send_buf(struct wsconn *ws, struct buf *b)
{
    ws_send_text(ws, b->data, b->len);
    buf_release(b);
}

/* Copies the client's "ref" (string or number) into a reply. */
static void append_ref(struct buf *b, const cJSON *ref)
{
    if (cJSON_IsString(ref)) {
        buf_append_str(b, ",\"ref\":");
        json_append_cstr(b, ref->valuestring);
    } else if (cJSON_IsNumber(ref)) {
        buf_append_str(b, ",\"ref\":");
        json_append_i64(b, (int64_t)ref->valuedouble);
    }
}

static void send_welcome(struct wsconn *ws)
{
    struct worker *w = ws_app_data(ws);
    const struct config *cfg = &w->srv->cfg;
    struct buf b = {0};

    buf_printf(&b,
               "{\"type\":\"welcome\",\"protocol\":%d,\"server\":\"presenced/0.1.0\","
               "\"connectionId\":\"%llx\",\"limits\":{\"maxMessageBytes\":%lld}}",
               PROTO_VERSION, (unsigned long long)ws_conn(ws)->id,
               (long long)cfg->ws_max_message_bytes);
    send_buf(ws, &b);
}

static void send_error(struct wsconn *ws, const char *code, const char *message, const cJSON *ref)
{
    struct buf b = {0};

    buf_append_str(&b, "{\"type\":\"error\",\"code\":");
    json_append_cstr(&b, code);
    buf_append_str(&b, ",\"message\":");
    json_append_cstr(&b, message);
    append_ref(&b, ref);
    buf_append_str(&b, "}");
    send_buf(ws, &b);
}

static void send_pong(struct wsconn *ws, const cJSON *ref)
{
    struct buf b = {0};

    buf_printf(&b, "{\"type\":\"pong\",\"time\":%llu", (unsigned long long)time_wall_ms());
    append_ref(&b, ref);
    buf_append_str(&b, "}");
    send_buf(ws, &b);
}

/* Returns true when the message was understood. */
static bool dispatch(struct wsconn *ws, const char *p, size_t n)
{
    cJSON *root = cJSON_ParseWithLength(p, n);
    const cJSON *type, *ref;
    bool ok = false;

    if (!root) {
        send_error(ws, "bad_json", "message is not valid JSON", NULL);
        return false;
    }
    type = cJSON_GetObjectItemCaseSensitive(root, "type");
    ref = cJSON_GetObjectItemCaseSensitive(root, "ref");
    if (!cJSON_IsObject(root) || !cJSON_IsString(type)) {
        send_error(ws, "bad_message", "message must be an object with a string \"type\"", ref);
    } else if (strcmp(type->valuestring, "ping") == 0) {
        send_pong(ws, ref);
        ok = true;
    } else {
        send_error(ws, "unknown_type", "unknown message type", ref);
    }
    cJSON_Delete(root);
    return ok;
}

static struct proto_state *state_of(struct wsconn *ws)
{
    return ws_user_data(ws);
}

static void proto_on_open(struct wsconn *ws)
{
    ws_set_user_data(ws, xcalloc(1, sizeof(struct proto_state)));
    send_welcome(ws);
}

static void proto_on_message(struct wsconn *ws, bool binary, const char *p, size_t n)
{
    struct proto_state *st = state_of(ws);

    if (binary) {
        ws_close(ws, 1003, "binary messages are not supported");
        return;
    }
    if (dispatch(ws, p, n)) {
        st->bad_in_a_row = 0;
        return;
    }
    if (++st->bad_in_a_row >= PROTO_MAX_ERRORS) {
        log_info("proto", "too many bad messages, closing conn=%llu",
                 (unsigned long long)ws_conn(ws)->id);
        ws_close(ws, 1008, "too many invalid messages");
    }
}

static void proto_on_close(struct wsconn *ws, unsigned code)
{
    (void)code;
    free(state_of(ws));
    ws_set_user_data(ws, NULL);
}

const struct ws_app proto_app = {
    .on_open = proto_on_open,
    .on_message = proto_on_message,
    .on_close = proto_on_close,
};
