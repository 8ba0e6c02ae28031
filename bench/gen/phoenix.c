/*
 * phoenix.c - presence-bench: the Phoenix protocol's requests and the
 * decoding of what presenced's Phoenix adapter sends (see phoenix.h).
 *
 * Decoding scans, as proto.c does: a vsn 2.0.0 frame is
 * [join_ref,ref,"topic","event",payload] and presenced writes it compactly,
 * so the event is the quoted string after the topic, and the few values
 * needed (the room number of "r<room>", the payload's "u", "i", "t", a
 * reply's status) are found by their keys.
 */
#include "phoenix.h"
#include "proto.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static void send_str(struct net *n, struct conn *c, const char *s, int len)
{
    if (len > 0)
        net_send(n, c, s, (size_t)len);
}

void phoenix_join(struct net *n, struct conn *c, uint32_t room)
{
    char m[128];
    int l = snprintf(m, sizeof m, "[\"0\",\"0\",\"r%u\",\"phx_join\",{\"meta\":{\"i\":0,\"t\":0}}]",
                     room);
    send_str(n, c, m, l);
}

void phoenix_leave_room(struct net *n, struct conn *c, uint32_t room)
{
    char m[96];
    int l = snprintf(m, sizeof m, "[\"0\",\"%u\",\"r%u\",\"phx_leave\",{}]", ++c->acks, room);
    send_str(n, c, m, l);
}

void phoenix_cursor(struct net *n, struct conn *c, uint32_t room, uint64_t id, uint64_t t)
{
    char m[224];
    int l = snprintf(m, sizeof m,
                     "[\"0\",\"%u\",\"r%u\",\"broadcast\",{\"type\":\"broadcast\",\"event\":"
                     "\"cursor\",\"payload\":{\"x\":%u,\"u\":%u,\"i\":%llu,\"t\":%llu}}]",
                     ++c->acks, room, (unsigned)(id % 1000), c->user, (unsigned long long)id,
                     (unsigned long long)t);
    send_str(n, c, m, l);
}

void phoenix_heartbeat(struct net *n, struct conn *c)
{
    static const char hb[] = "[null,\"hb\",\"phoenix\",\"heartbeat\",{}]";
    net_send(n, c, hb, sizeof hb - 1);
}

/* The unsigned number after lit in [p, end), 0 if absent; *at (may be
 * NULL) gets the position after it. */
static uint64_t num(const char *p, const char *end, const char *lit, size_t kl, const char **at)
{
    const char *k = find(p, end, lit, kl), *nx = NULL;
    uint64_t v = k ? parse_u64(k + kl, end, &nx) : 0;
    if (at)
        *at = nx;
    return v;
}
#define NUM(p, end, lit, at) num((p), (end), (lit), sizeof(lit) - 1, (at))

/* [p, end) at q starts with lit. */
#define AT(q, lit) (end - (q) >= (ptrdiff_t)sizeof(lit) - 1 && !memcmp((q), lit, sizeof(lit) - 1))

static void on_reply(struct net *n, struct conn *c, const char *ref, const char *topic,
                     const char *p, const char *end, size_t len)
{
    int ok = FIND(topic, end, "\"status\":\"ok\"") != NULL;
    if (AT(topic, "\"phoenix\"")) {
        if (app->pong)
            app->pong(n, c);
    } else if (!ok) {
        if (app->error)
            app->error(n, c, p, len);
    } else if (AT(ref, "\"0\"")) {
        if (app->joined)
            app->joined(n, c, (uint32_t)NUM(topic, end, "\"r", NULL));
    } /* else: a broadcast's ok */
}

void phoenix_msg(struct net *n, struct conn *c, const char *p, size_t len)
{
    const char *end = p + len, *ref, *topic, *ev;
    /* [join_ref,ref,"topic","event",...: join_ref and ref are null or strings */
    if (len < 16 || p[0] != '[' || !(ref = memchr(p, ',', len)) ||
        !(topic = memchr(ref + 1, ',', (size_t)(end - ref - 1))) ||
        !(ev = memchr(topic + 2, '"', (size_t)(end - topic - 2))) || ev + 3 > end) {
        if (app->error)
            app->error(n, c, p, len);
        return;
    }
    ref++, topic++, ev += 2; /* ev: the event's opening quote */
    if (AT(ev, "\"broadcast\",")) {
        const char *pl = FIND(ev, end, "\"payload\":{"), *at;
        if (!pl || !app->delivery)
            return;
        uint32_t room = (uint32_t)NUM(topic, ev, "\"r", NULL);
        uint32_t u = (uint32_t)NUM(pl, end, "\"u\":", &at);
        uint64_t id = at ? NUM(at, end, "\"i\":", &at) : 0;
        uint64_t t = at ? NUM(at, end, "\"t\":", NULL) : 0;
        app->delivery(n, c, D_CURSOR, room, u, id, t);
    } else if (AT(ev, "\"phx_reply\",")) {
        on_reply(n, c, ref, topic, p, end, len);
    } else if (AT(ev, "\"phx_error\",") || AT(ev, "\"phx_close\",")) {
        if (app->error)
            app->error(n, c, p, len);
    } /* presence_state, presence_diff: W5 does not count members */
}
