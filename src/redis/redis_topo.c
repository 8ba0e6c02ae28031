/* SPDX-License-Identifier: MIT */
/*
 * redis_topo.c - the pure half of the Redis layer: the `redis` spec
 * parser, the routing hashes (FNV-1a-64, jump consistent hash, CRC16 key
 * slots with hash tags) and the parsers of CLUSTER SLOTS replies and of
 * -MOVED/-ASK endpoints.
 *
 * Nothing here allocates, does I/O or keeps state; every function is
 * safe on any input (the parsers are fuzzed: tests/fuzz/fuzz_redis_topo.c).
 * Connections, routing decisions and the slot map's use are redis.c's.
 */
#include "redis.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "redis_topo.h"

#define SCHEME_SHARD   "redis://"
#define SCHEME_CLUSTER "redis-cluster://"

static int spec_error(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int spec_error(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return REDIS_E_SPEC;
}

static bool is_host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_';
}

static bool is_ipv6_char(char c)
{
    return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') || c == ':' ||
           c == '.';
}

/* PORT: 1..65535, digits only. Returns the port or 0. */
static uint16_t parse_port(const char *p, size_t n)
{
    unsigned long v = 0;

    if (n == 0 || n > 5)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (unsigned long)(p[i] - '0');
    }
    return v >= 1 && v <= 65535 ? (uint16_t)v : 0;
}

/*
 * One HOST:PORT[/] (the scheme already taken off) into ep. HOST is a name
 * or IPv4 address, or a bracketed IPv6 address (stored without brackets).
 */
static int parse_hostport(const char *p, size_t n, struct redis_endpoint *ep, char *err,
                          size_t errlen)
{
    size_t hlen, colon;
    const char *host = p;

    if (memchr(p, '@', n))
        return spec_error(err, errlen, "user or password not allowed in redis endpoint %.*s",
                          (int)n, p);
    if (memchr(p, '?', n) || memchr(p, '#', n))
        return spec_error(err, errlen, "query not allowed in redis endpoint %.*s", (int)n, p);
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '/')
            continue;
        if (i + 1 != n)
            return spec_error(err, errlen, "path not allowed in redis endpoint %.*s", (int)n, p);
        n = i; /* the one trailing "/" */
    }
    if (n && p[0] == '[') {
        const char *close = memchr(p, ']', n);

        if (!close)
            return spec_error(err, errlen, "unclosed [ in redis endpoint %.*s", (int)n, p);
        host = p + 1;
        hlen = (size_t)(close - host);
        for (size_t i = 0; i < hlen; i++)
            if (!is_ipv6_char(host[i]))
                return spec_error(err, errlen, "bad IPv6 address in redis endpoint %.*s", (int)n,
                                  p);
        colon = (size_t)(close - p) + 1;
        if (colon >= n || p[colon] != ':')
            return spec_error(err, errlen, "missing port in redis endpoint %.*s", (int)n, p);
    } else {
        const char *c = memchr(p, ':', n);

        if (!c)
            return spec_error(err, errlen, "missing port in redis endpoint %.*s", (int)n, p);
        colon = (size_t)(c - p);
        hlen = colon;
        for (size_t i = 0; i < hlen; i++)
            if (!is_host_char(p[i]))
                return spec_error(err, errlen, "bad host in redis endpoint %.*s", (int)n, p);
    }
    if (hlen == 0)
        return spec_error(err, errlen, "missing host in redis endpoint %.*s", (int)n, p);
    if (hlen > REDIS_HOST_MAX)
        return spec_error(err, errlen, "host longer than %d bytes in redis endpoint",
                          REDIS_HOST_MAX);
    ep->port = parse_port(p + colon + 1, n - colon - 1);
    if (!ep->port)
        return spec_error(err, errlen, "bad port in redis endpoint %.*s (1..65535)", (int)n, p);
    memcpy(ep->host, host, hlen);
    ep->host[hlen] = '\0';
    return 0;
}

static bool has_prefix(const char *p, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);

    return n >= k && strncasecmp(p, prefix, k) == 0;
}

/* Item i of the list (spaces around it trimmed): its endpoint, with the
 * scheme the mode requires (cluster: only the first item has one). */
static int parse_item(const char *p, size_t n, unsigned i, struct redis_topology *t, char *err,
                      size_t errlen)
{
    while (n && (*p == ' ' || *p == '\t'))
        p++, n--;
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n == 0)
        return spec_error(err, errlen, "empty item %u in redis spec", i + 1);
    if (i == 0 && has_prefix(p, n, SCHEME_CLUSTER)) {
        t->mode = REDIS_CLUSTER;
        p += strlen(SCHEME_CLUSTER), n -= strlen(SCHEME_CLUSTER);
    } else if (i == 0 && has_prefix(p, n, SCHEME_SHARD)) {
        t->mode = REDIS_SHARDS;
        p += strlen(SCHEME_SHARD), n -= strlen(SCHEME_SHARD);
    } else if (i == 0) {
        return spec_error(err, errlen, "unknown scheme in %.*s (redis:// or redis-cluster://)",
                          (int)n, p);
    } else if (t->mode == REDIS_SHARDS) {
        if (!has_prefix(p, n, SCHEME_SHARD))
            return spec_error(err, errlen, "shard %.*s is not a redis:// URL", (int)n, p);
        p += strlen(SCHEME_SHARD), n -= strlen(SCHEME_SHARD);
    } else if (memmem(p, n, "://", 3)) {
        return spec_error(err, errlen, "cluster seed %.*s must be HOST:PORT", (int)n, p);
    }
    return parse_hostport(p, n, &t->ep[i], err, errlen);
}

int redis_topology_parse(const char *spec, struct redis_topology *out, char *err, size_t errlen)
{
    const char *p = spec;
    unsigned n = 0;

    memset(out, 0, sizeof(*out));
    if (!spec || !*spec)
        return spec_error(err, errlen, "empty redis spec");
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int rc;

        if (n == REDIS_ENDPOINTS_MAX)
            return spec_error(err, errlen, "more than %d redis endpoints", REDIS_ENDPOINTS_MAX);
        rc = parse_item(p, len, n, out, err, errlen);
        if (rc)
            return rc;
        for (unsigned j = 0; j < n; j++)
            if (out->ep[j].port == out->ep[n].port &&
                strcasecmp(out->ep[j].host, out->ep[n].host) == 0)
                return spec_error(err, errlen, "duplicate redis endpoint %s:%u", out->ep[n].host,
                                  out->ep[n].port);
        n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    out->n = n;
    return 0;
}

/* ---- routing ---- */

uint64_t redis_fnv1a64(const void *p, size_t len)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < len; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm"
 * (2014), figure 1: the key drives a linear congruential generator and
 * each step jumps forward to the next bucket the key would move to. */
unsigned redis_jump_hash(uint64_t key, unsigned n)
{
    int64_t b = -1, j = 0;

    while (j < (int64_t)n) {
        b = j;
        key = key * 2862933555777941757ull + 1;
        j = (int64_t)((double)(b + 1) * ((double)(1ll << 31) / (double)((key >> 33) + 1)));
    }
    return (unsigned)b;
}

/* CRC16-CCITT (XMODEM): polynomial 0x1021, initial 0, no reflection, as
 * in the Redis Cluster specification. Bitwise: keys are short. */
uint16_t redis_crc16(const void *p, size_t len)
{
    const unsigned char *s = p;
    uint16_t crc = 0;

    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(s[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

const char *redis_key_tag(const char *key, size_t *len)
{
    const char *open = memchr(key, '{', *len);
    const char *close;

    if (!open)
        return key;
    close = memchr(open + 1, '}', *len - (size_t)(open + 1 - key));
    if (!close || close == open + 1)
        return key;
    *len = (size_t)(close - open - 1);
    return open + 1;
}

unsigned redis_key_slot(const char *key, size_t len)
{
    const char *tag = redis_key_tag(key, &len);

    return redis_crc16(tag, len) & (REDIS_SLOTS - 1);
}

/* ---- CLUSTER SLOTS and redirects ---- */

static int proto_error(char *err, size_t errlen, const char *what)
{
    if (errlen)
        snprintf(err, errlen, "bad CLUSTER SLOTS reply: %s", what);
    return REDIS_E_PROTO;
}

static int set_endpoint(struct redis_endpoint *ep, const char *host, size_t hlen, const char *asked,
                        long long port)
{
    if (hlen == 0 || (hlen == 1 && host[0] == '?'))
        host = asked, hlen = strlen(asked);
    if (hlen == 0 || hlen > REDIS_HOST_MAX || memchr(host, '\0', hlen) || port < 1 || port > 65535)
        return REDIS_E_PROTO;
    memcpy(ep->host, host, hlen);
    ep->host[hlen] = '\0';
    ep->port = (uint16_t)port;
    return 0;
}

/* The index of the range's master in out->ep, added when new, or -1. */
static int master_index(const redisReply *node, const char *asked, struct redis_slotmap *out)
{
    struct redis_endpoint ep;

    if (node->type != REDIS_REPLY_ARRAY || node->elements < 2 ||
        node->element[0]->type != REDIS_REPLY_STRING ||
        node->element[1]->type != REDIS_REPLY_INTEGER)
        return -1;
    if (set_endpoint(&ep, node->element[0]->str, node->element[0]->len, asked,
                     node->element[1]->integer))
        return -1;
    for (unsigned i = 0; i < out->n; i++)
        if (out->ep[i].port == ep.port && strcmp(out->ep[i].host, ep.host) == 0)
            return (int)i;
    if (out->n == REDIS_ENDPOINTS_MAX)
        return -2;
    out->ep[out->n] = ep;
    return (int)out->n++;
}

int redis_slotmap_parse(const redisReply *r, const char *asked, struct redis_slotmap *out,
                        char *err, size_t errlen)
{
    memset(out->owner, REDIS_SLOT_NONE, sizeof(out->owner));
    out->n = 0;
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return proto_error(err, errlen, "not an array");
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *range = r->element[i];
        long long lo, hi;
        int m;

        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
            range->element[0]->type != REDIS_REPLY_INTEGER ||
            range->element[1]->type != REDIS_REPLY_INTEGER)
            return proto_error(err, errlen, "a range is not [start, end, master...]");
        lo = range->element[0]->integer;
        hi = range->element[1]->integer;
        if (lo < 0 || hi < lo || hi >= REDIS_SLOTS)
            return proto_error(err, errlen, "slot out of range");
        m = master_index(range->element[2], asked, out);
        if (m == -2)
            return proto_error(err, errlen, "too many masters");
        if (m < 0)
            return proto_error(err, errlen, "a master is not [host, port, ...]");
        memset(out->owner + lo, m, (size_t)(hi - lo + 1));
    }
    return 0;
}

/* "MOVED 3999 127.0.0.1:6381", "ASK 3999 [::1]:6381" (the error's
 * first word included). */
int redis_redirect_parse(const char *s, size_t len, const char *asked, unsigned *slot,
                         struct redis_endpoint *ep)
{
    const char *sp = memchr(s, ' ', len), *end = s + len, *colon;
    unsigned long v = 0;
    const char *host;
    size_t hlen;
    uint16_t port;

    if (!sp)
        return REDIS_E_PROTO;
    for (s = sp + 1; s < end && *s >= '0' && *s <= '9' && v < REDIS_SLOTS; s++)
        v = v * 10 + (unsigned long)(*s - '0');
    if (s == sp + 1 || s == end || *s != ' ' || v >= REDIS_SLOTS)
        return REDIS_E_PROTO;
    host = s + 1;
    for (colon = NULL, s = host; s < end; s++)
        if (*s == ':')
            colon = s; /* the last one: IPv6 addresses have several */
    if (!colon)
        return REDIS_E_PROTO;
    hlen = (size_t)(colon - host);
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']')
        host++, hlen -= 2;
    port = parse_port(colon + 1, (size_t)(end - colon - 1));
    if (!port || set_endpoint(ep, host, hlen, asked, port))
        return REDIS_E_PROTO;
    *slot = (unsigned)v;
    return 0;
}
