/*
 * pusher.c - presence-bench: the Pusher protocol's requests and the
 * decoding of what presenced's Pusher adapter sends (see pusher.h).
 *
 * Decoding scans, as proto.c does: presenced writes every Pusher frame as
 * {"event":E[,"channel":C],"data":D[,"user_id":U]}, so the event name is at
 * a fixed offset and the few values needed ("socket_id", the channel's
 * room number, "user_id", "i", "t") are found by their keys. A client
 * event's data is relayed as the object the client sent; Pusher's own
 * events carry data as a JSON string (quotes escaped), which only the
 * socket_id and member ids are read from.
 */
#include "pusher.h"
#include "proto.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pusher_use_app(struct net *n, const char *spec)
{
    const char *k = strchr(spec, ':');
    const char *s = k ? strchr(k + 1, ':') : NULL;
    if (!k || !s || s == k + 1 || !s[1])
        die("--pusher-app wants ID:KEY:SECRET[:options], got %s", spec);
    const char *e = strchr(s + 1, ':');
    size_t sl = e ? (size_t)(e - s - 1) : strlen(s + 1);
    char *key = xmalloc((size_t)(s - k)), *secret = xmalloc(sl + 1);
    memcpy(key, k + 1, (size_t)(s - k - 1));
    key[s - k - 1] = '\0';
    memcpy(secret, s + 1, sl);
    secret[sl] = '\0';
    n->app_key = key;
    n->app_secret = secret;
}

static void send_str(struct net *n, struct conn *c, const char *s, int len)
{
    if (len > 0)
        net_send(n, c, s, (size_t)len);
}

void pusher_join(struct net *n, struct conn *c, uint32_t room)
{
    char cd[96], esc[192], sig[256], hex[2 * EVP_MAX_MD_SIZE + 1], m[512];
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    /* channel_data, signed as this text and sent as a JSON string of it */
    int cl =
        snprintf(cd, sizeof cd, "{\"user_id\":\"u%u\",\"user_info\":{\"i\":0,\"t\":0}}", c->user);
    size_t e = 0;
    for (int i = 0; i < cl; i++) {
        if (cd[i] == '"')
            esc[e++] = '\\';
        esc[e++] = cd[i];
    }
    esc[e] = '\0';
    int sl = snprintf(sig, sizeof sig, "%s:presence-r%u:%s", c->sid, room, cd);
    const char *secret = n->app_secret ? n->app_secret : "";
    if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)sig, (size_t)sl,
              mac, &maclen))
        die("pusher: HMAC failed");
    for (unsigned i = 0; i < maclen; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    int l = snprintf(m, sizeof m,
                     "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"presence-r%u\","
                     "\"auth\":\"%s:%s\",\"channel_data\":\"%s\"}}",
                     room, n->app_key ? n->app_key : "", hex, esc);
    send_str(n, c, m, l);
}

void pusher_leave_room(struct net *n, struct conn *c, uint32_t room)
{
    char m[128];
    int l = snprintf(m, sizeof m,
                     "{\"event\":\"pusher:unsubscribe\",\"data\":{\"channel\":\"presence-r%u\"}}",
                     room);
    send_str(n, c, m, l);
}

void pusher_publish(struct net *n, struct conn *c, uint32_t room, uint64_t id, uint64_t t, int pad,
                    const char *pad_text)
{
    char m[1200];
    int l = snprintf(m, sizeof m,
                     "{\"event\":\"client-meta\",\"channel\":\"presence-r%u\","
                     "\"data\":{\"i\":%llu,\"t\":%llu%s%.*s%s}}",
                     room, (unsigned long long)id, (unsigned long long)t, pad ? ",\"p\":\"" : "",
                     pad, pad_text, pad ? "\"" : "");
    send_str(n, c, m, l);
}

void pusher_cursor(struct net *n, struct conn *c, uint32_t room, uint64_t id, uint64_t t)
{
    char m[192];
    int l = snprintf(m, sizeof m,
                     "{\"event\":\"client-cursor\",\"channel\":\"presence-r%u\","
                     "\"data\":{\"x\":%u,\"i\":%llu,\"t\":%llu}}",
                     room, (unsigned)(id % 1000), (unsigned long long)id, (unsigned long long)t);
    send_str(n, c, m, l);
}

void pusher_ping(struct net *n, struct conn *c)
{
    static const char ping[] = "{\"event\":\"pusher:ping\",\"data\":{}}";
    net_send(n, c, ping, sizeof ping - 1);
}

/* The unsigned number after key in [p, end), 0 if absent; *at (may be
 * NULL) gets the position after it, NULL if absent. */
static uint64_t num_at(const char *p, const char *end, const char *key, size_t kl, const char **at)
{
    const char *k = find(p, end, key, kl);
    const char *nx = NULL;
    uint64_t v = k ? parse_u64(k + kl, end, &nx) : 0;
    if (at)
        *at = nx;
    return v;
}
#define NUM(p, end, lit, at) num_at((p), (end), (lit), sizeof(lit) - 1, (at))

/* The event name at ev (up to end) is lit. */
#define IS(ev, lit) (end - (ev) >= (ptrdiff_t)sizeof(lit) && !memcmp((ev), lit "\"", sizeof(lit)))

static void on_client_event(struct net *n, struct conn *c, int kind, const char *p, const char *end)
{
    const char *at, *data = FIND(p, end, "\"data\":{");
    if (!data || !app->delivery)
        return;
    uint32_t room = (uint32_t)NUM(p, data, "\"channel\":\"presence-r", NULL);
    uint64_t id = NUM(data, end, "\"i\":", &at);
    uint64_t t = at ? NUM(at, end, "\"t\":", &at) : 0;
    uint32_t u = (uint32_t)NUM(at ? at : data, end, "\"user_id\":\"u", NULL);
    app->delivery(n, c, kind, room, u, id, t);
}

void pusher_msg(struct net *n, struct conn *c, const char *p, size_t len)
{
    const char *end = p + len, *ev = p + 10;
    if (len < 14 || memcmp(p, "{\"event\":\"", 10) != 0) {
        if (app->error)
            app->error(n, c, p, len);
        return;
    }
    if (IS(ev, "client-meta")) {
        on_client_event(n, c, D_META, ev, end);
    } else if (IS(ev, "client-cursor")) {
        on_client_event(n, c, D_CURSOR, ev, end);
    } else if (IS(ev, "pusher_internal:member_added") || IS(ev, "pusher_internal:member_removed")) {
        if (app->member)
            app->member(n, c, ev[23] == 'a',
                        (uint32_t)NUM(ev, end, "\"channel\":\"presence-r", NULL),
                        (uint32_t)NUM(ev, end, "user_id\\\":\\\"u", NULL));
    } else if (IS(ev, "pusher_internal:subscription_succeeded")) {
        if (app->joined)
            app->joined(n, c, (uint32_t)NUM(ev, end, "\"channel\":\"presence-r", NULL));
    } else if (IS(ev, "pusher:pong")) {
        if (app->pong)
            app->pong(n, c);
    } else if (IS(ev, "pusher:ping")) {
        static const char pong[] = "{\"event\":\"pusher:pong\",\"data\":{}}";
        net_send(n, c, pong, sizeof pong - 1);
    } else if (IS(ev, "pusher:connection_established")) {
        /* data is a string: {\"socket_id\":\"123.456\",...} */
        static const char key[] = "socket_id\\\":\\\"";
        const char *s = FIND(ev, end, key);
        size_t k = 0;
        if (s)
            for (s += sizeof key - 1;
                 s < end && k + 1 < sizeof c->sid && (*s == '.' || (*s >= '0' && *s <= '9'));)
                c->sid[k++] = *s++;
        c->sid[k] = '\0';
        if (!k) {
            if (app->error)
                app->error(n, c, p, len);
            return;
        }
        c->ready = 1;
        if (app->ready)
            app->ready(n, c);
    } else if (IS(ev, "pusher:error") || IS(ev, "pusher:subscription_error")) {
        if (app->error)
            app->error(n, c, p, len);
    }
}
