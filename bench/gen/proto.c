/*
 * proto.c - presence-bench: encoders and decoders of the native protocol,
 * Socket.IO v4 (engine.io 4 over WebSocket) and RESP. See proto.h.
 *
 * Decoding is scanning, not JSON parsing: each server's output format is
 * fixed, so the decoder looks for the few keys it needs ("type", "room",
 * "user", "i"/"id", "t") in order. That keeps the generator's cost per
 * delivery far below the server's.
 */
#include "proto.h"
#include "phoenix.h"
#include "pusher.h"

#include <stdio.h>
#include <string.h>

const struct app_ops *app;
int proto_pad;

static char pad_text[901]; /* 'x' * 900, filled on first use */

/* The unsigned number after key in [p, end), or 0; *at gets the position
 * after it (NULL if the key is absent). */
static uint64_t num_after(const char *p, const char *end, const char *key, const char **at)
{
    const char *k = find(p, end, key, strlen(key));
    if (!k) {
        if (at)
            *at = NULL;
        return 0;
    }
    const char *nx;
    uint64_t v = parse_u64(k + strlen(key), end, &nx);
    if (at)
        *at = nx;
    return v;
}

static void send_str(struct net *n, struct conn *c, const char *s, int len)
{
    net_send(n, c, s, (size_t)len);
}

void proto_join(struct net *n, struct conn *c, uint32_t room)
{
    if (n->target == T_PUSHER) {
        pusher_join(n, c, room);
        return;
    }
    if (n->target == T_PHOENIX) {
        phoenix_join(n, c, room);
        return;
    }
    char m[160];
    int l;
    switch (n->target) {
    case T_SIO:
        l = snprintf(m, sizeof m, "42%u[\"join\",\"r%u\"]", room, room);
        break;
    case T_REDIS:
        l = snprintf(m, sizeof m, "SUBSCRIBE r%u\r\n", room);
        break;
    default:
        l = snprintf(m, sizeof m, "{\"type\":\"join\",\"room\":\"r%u\",\"meta\":{\"i\":0,\"t\":0}}",
                     room);
    }
    send_str(n, c, m, l);
}

void proto_leave_room(struct net *n, struct conn *c, uint32_t room)
{
    if (n->target == T_PUSHER) {
        pusher_leave_room(n, c, room);
        return;
    }
    if (n->target == T_PHOENIX) {
        phoenix_leave_room(n, c, room);
        return;
    }
    char m[96];
    int l;
    switch (n->target) {
    case T_SIO:
        l = snprintf(m, sizeof m, "42[\"leave\",\"r%u\"]", room);
        break;
    case T_REDIS:
        l = snprintf(m, sizeof m, "UNSUBSCRIBE r%u\r\n", room);
        break;
    default:
        l = snprintf(m, sizeof m, "{\"type\":\"room_leave\",\"room\":\"r%u\"}", room);
    }
    send_str(n, c, m, l);
}

void proto_publish(struct net *n, struct conn *c, uint32_t room, uint32_t from, uint64_t id,
                   uint64_t t)
{
    char m[1200];
    int l, pad = proto_pad > 900 ? 900 : proto_pad;
    if (pad && !pad_text[0])
        memset(pad_text, 'x', 900);
    if (n->target == T_PUSHER) {
        pusher_publish(n, c, room, id, t, pad, pad_text);
        return;
    }
    unsigned long long i = id, ts = t;
    switch (n->target) {
    case T_SIO:
        l = snprintf(m, sizeof m,
                     "42[\"meta\",{\"room\":\"r%u\",\"meta\":{\"i\":%llu,\"t\":%llu%s%.*s%s},"
                     "\"t\":%llu,\"id\":%llu}]",
                     room, i, ts, pad ? ",\"p\":\"" : "", pad, pad_text, pad ? "\"" : "", ts, i);
        break;
    case T_REDIS: {
        char pl[96];
        int pn = snprintf(pl, sizeof pl, "{\"user\":\"u%u\",\"i\":%llu,\"t\":%llu}", from, i, ts);
        char ch[16];
        int cn = snprintf(ch, sizeof ch, "r%u", room);
        l = snprintf(m, sizeof m, "*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", cn, ch, pn,
                     pl);
        break;
    }
    default:
        l = snprintf(
            m, sizeof m,
            "{\"type\":\"patch\",\"room\":\"r%u\",\"meta\":{\"i\":%llu,\"t\":%llu%s%.*s%s}}", room,
            i, ts, pad ? ",\"p\":\"" : "", pad, pad_text, pad ? "\"" : "");
    }
    send_str(n, c, m, l);
}

void proto_cursor(struct net *n, struct conn *c, uint32_t room, uint64_t id, uint64_t t)
{
    if (n->target == T_PUSHER) {
        pusher_cursor(n, c, room, id, t);
        return;
    }
    if (n->target == T_PHOENIX) {
        phoenix_cursor(n, c, room, id, t);
        return;
    }
    char m[192];
    int l;
    unsigned long long i = id, ts = t;
    if (n->target == T_SIO)
        l = snprintf(m, sizeof m,
                     "42[\"cursor\",{\"room\":\"r%u\",\"x\":%u,\"y\":%u,\"t\":%llu,\"id\":%llu}]",
                     room, (unsigned)(i % 1000), (unsigned)(i % 700), ts, i);
    else if (n->target == T_REDIS)
        return;
    else
        l = snprintf(m, sizeof m,
                     "{\"type\":\"ephemeral\",\"room\":\"r%u\",\"kind\":\"c\","
                     "\"data\":{\"x\":%u,\"i\":%llu,\"t\":%llu}}",
                     room, (unsigned)(i % 1000), i, ts);
    send_str(n, c, m, l);
}

void proto_heartbeat(struct net *n, struct conn *c)
{
    if (n->target == T_PUSHER) {
        pusher_ping(n, c);
        return;
    }
    if (n->target == T_PHOENIX) {
        phoenix_heartbeat(n, c);
        return;
    }
    if (n->target == T_SIO)
        send_str(n, c, "42[\"heartbeat\"]", 15);
    else if (n->target != T_REDIS)
        send_str(n, c, "{\"type\":\"heartbeat\"}", 20);
}

void proto_barrier(struct net *n, struct conn *c)
{
    if (n->target == T_PUSHER) {
        pusher_ping(n, c);
        return;
    }
    if (n->target == T_PHOENIX) {
        phoenix_heartbeat(n, c);
        return;
    }
    if (n->target == T_SIO)
        proto_join(n, c, 900000000u + c->user);
    else if (n->target != T_REDIS) {
        static const char ping[] = "{\"type\":\"ping\",\"ref\":1}";
        net_send(n, c, ping, sizeof ping - 1);
    }
}

void proto_on_open(struct net *n, struct conn *c)
{
    if (n->target != T_REDIS && n->target != T_PHOENIX)
        return; /* the others say hello in a message */
    c->ready = 1;
    if (app->ready)
        app->ready(n, c);
}

void proto_on_close(struct net *n, struct conn *c, int code)
{
    if (app->closed)
        app->closed(n, c, code);
}

/* Native room_delta: member joins, leaves, and patches as deliveries. */
static void native_delta(struct net *n, struct conn *c, uint32_t room, const char *p,
                         const char *end)
{
    const char *j = FIND(p, end, "\"joins\":[");
    const char *l = FIND(p, end, "\"leaves\":[");
    const char *pa = FIND(p, end, "\"patches\":[");
    if (!j || !l || !pa)
        return;
    const char *q = j, *nx;
    while (app->member && (q = FIND(q, l, "{\"user\":\"u"))) {
        uint32_t u = (uint32_t)parse_u64(q + 10, l, &nx);
        app->member(n, c, 1, room, u);
        q = nx;
    }
    for (q = l + 10; app->member && q < pa && *q == '"';) {
        uint32_t u = (uint32_t)parse_u64(q + 2, pa, &nx);
        app->member(n, c, 0, room, u);
        q = nx + 1;
        if (*q == ',')
            q++;
    }
    for (q = pa; app->delivery && (q = FIND(q, end, "{\"user\":\"u"));) {
        uint32_t u = (uint32_t)parse_u64(q + 10, end, &nx);
        const char *at;
        uint64_t id = num_after(nx, end, "\"meta\":{\"i\":", &at);
        if (!at)
            break;
        uint64_t t = num_after(at, end, "\"t\":", &at);
        app->delivery(n, c, D_META, room, u, id, t);
        q = at ? at : end;
    }
}

static void native_msg(struct net *n, struct conn *c, const char *p, size_t len)
{
    const char *end = p + len;
    if (len < 12 || memcmp(p, "{\"type\":\"", 9) != 0) {
        if (app->error)
            app->error(n, c, p, len);
        return;
    }
    const char *t = p + 9;
    uint32_t room = (uint32_t)num_after(t, end, "\"room\":\"r", NULL);
    if (!memcmp(t, "room_delta\"", 11)) {
        native_delta(n, c, room, t, end);
    } else if (!memcmp(t, "ephemeral\"", 10)) {
        const char *at;
        uint32_t u = (uint32_t)num_after(t, end, "\"user\":\"u", &at);
        uint64_t id = num_after(t, end, "\"i\":", &at);
        uint64_t ts = num_after(at ? at : t, end, "\"t\":", NULL);
        if (app->delivery)
            app->delivery(n, c, D_CURSOR, room, u, id, ts);
    } else if (!memcmp(t, "room_joined\"", 12)) {
        if (app->joined)
            app->joined(n, c, room);
    } else if (!memcmp(t, "pong\"", 5)) {
        if (app->pong)
            app->pong(n, c);
    } else if (!memcmp(t, "welcome\"", 8)) {
        const char *s = FIND(t, end, "\"sessionId\":\"");
        if (s && end - s > 13 + 32)
            memcpy(c->sid, s + 13, 32), c->sid[32] = '\0';
        c->resumed = FIND(t, end, "\"resumed\":true") != NULL;
        c->ready = 1;
        if (app->ready)
            app->ready(n, c);
    } else if (!memcmp(t, "error\"", 6) || !memcmp(t, "token_expired\"", 14)) {
        if (app->error)
            app->error(n, c, p, len);
    }
}

static void sio_event(struct net *n, struct conn *c, const char *p, const char *end)
{
    const char *at;
    uint32_t room = (uint32_t)num_after(p, end, "\"room\":\"r", NULL);
    uint32_t u = (uint32_t)num_after(p, end, "\"user\":\"u", NULL);
    if (!memcmp(p, "[\"member_meta\"", 14) || !memcmp(p, "[\"cursor\"", 9)) {
        int kind = p[2] == 'c' ? D_CURSOR : D_META;
        uint64_t id = num_after(p, end, "\"id\":", &at);
        const char *tk = FIND(p, end, "},\"t\":");
        uint64_t t = tk ? num_after(tk, end, "\"t\":", NULL) : num_after(p, end, "\"t\":", NULL);
        if (app->delivery)
            app->delivery(n, c, kind, room, u, id, t);
    } else if (!memcmp(p, "[\"member_joined\"", 16) || !memcmp(p, "[\"member_left\"", 14)) {
        if (app->member)
            app->member(n, c, p[9] == 'j', room, u);
    }
}

static void sio_msg(struct net *n, struct conn *c, const char *p, size_t len)
{
    const char *end = p + len;
    if (len == 1 && p[0] == '2') {
        net_send(n, c, "3", 1);
    } else if (len >= 2 && p[0] == '4' && p[1] == '2') {
        sio_event(n, c, p + 2, end);
    } else if (len >= 2 && p[0] == '4' && p[1] == '3') {
        const char *nx;
        uint32_t room = (uint32_t)parse_u64(p + 2, end, &nx);
        if (room >= 900000000u) {
            if (app->pong)
                app->pong(n, c);
        } else if (app->joined) {
            app->joined(n, c, room);
        }
    } else if (len >= 2 && p[0] == '4' && p[1] == '0') {
        c->ready = 1;
        if (app->ready)
            app->ready(n, c);
    } else if (len >= 1 && p[0] == '0') {
        char m[96];
        int l = snprintf(m, sizeof m, "40{\"user\":\"u%u\",\"device\":\"desktop\"}", c->user);
        net_send(n, c, m, (size_t)l);
    } else if (len >= 2 && p[0] == '4' && p[1] == '4') {
        if (app->error)
            app->error(n, c, p, len);
    }
}

static void redis_msg(struct net *n, struct conn *c, const char *p, size_t len)
{
    const char *end = p + len;
    if (p[0] == '*' && len > 20 && !memcmp(p, "*3\r\n$7\r\nmessage\r\n", 17)) {
        uint32_t room = (uint32_t)num_after(p + 17, end, "\r\nr", NULL);
        const char *at;
        uint32_t u = (uint32_t)num_after(p + 17, end, "\"user\":\"u", &at);
        uint64_t id = num_after(at ? at : p, end, "\"i\":", &at);
        uint64_t t = num_after(at ? at : p, end, "\"t\":", NULL);
        if (app->delivery)
            app->delivery(n, c, D_META, room, u, id, t);
    } else if (p[0] == '*' && FIND(p, end, "\r\nsubscribe\r\n")) {
        uint32_t room = (uint32_t)num_after(p, end, "\r\nr", NULL);
        if (app->joined)
            app->joined(n, c, room);
    } else if (p[0] == '-') {
        if (app->error)
            app->error(n, c, p, len);
    }
}

void proto_on_message(struct net *n, struct conn *c, const char *p, size_t len)
{
    if (!len)
        return;
    if (n->target == T_SIO)
        sio_msg(n, c, p, len);
    else if (n->target == T_PUSHER)
        pusher_msg(n, c, p, len);
    else if (n->target == T_PHOENIX)
        phoenix_msg(n, c, p, len);
    else if (n->target == T_REDIS)
        redis_msg(n, c, p, len);
    else
        native_msg(n, c, p, len);
}
