/* SPDX-License-Identifier: MIT */
/*
 * fuzz_redis_topo.c - libFuzzer target for the Redis layer's pure parsers:
 * redis_topology_parse, redis_slotmap_parse and redis_redirect_parse.
 *
 * The first byte picks the parser, the rest is its input, from an exactly
 * sized heap copy (ASan catches a read past the end). The slot map parser
 * gets the reply tree hiredis's redisReader builds from the bytes, so the
 * fuzzer explores real RESP shapes. Checked:
 *   - each parser returns 0 or its one error code;
 *   - an accepted topology has 1..REDIS_ENDPOINTS_MAX endpoints, each with
 *     a non-empty host and a port, and no duplicates;
 *   - an accepted slot map only names masters it lists;
 *   - an accepted redirect names a slot < REDIS_SLOTS and a port.
 * A broken invariant aborts, which libFuzzer reports as a crash.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "redis.h"
#include "redis_topo.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_spec(const char *p)
{
    struct redis_topology t;
    char err[256];
    int rc = redis_topology_parse(p, &t, err, sizeof(err));

    CHECK(rc == 0 || rc == REDIS_E_SPEC);
    if (rc)
        return;
    CHECK(t.n >= 1 && t.n <= REDIS_ENDPOINTS_MAX);
    for (unsigned i = 0; i < t.n; i++) {
        CHECK(t.ep[i].host[0] && t.ep[i].port);
        for (unsigned j = 0; j < i; j++)
            CHECK(t.ep[i].port != t.ep[j].port || strcasecmp(t.ep[i].host, t.ep[j].host));
    }
}

/* Whether every RESP count in p ("*N" of an array) is small: hiredis
 * 0.14.1 allocates what an array header announces before reading its
 * elements (no maxelements limit before 1.0), so a fuzzed "*300000000"
 * measures libFuzzer's malloc limit, not our parser. The Redis server is
 * trusted to send real replies (redis.h). */
static bool small_counts(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned long v = 0;
        size_t j = i + 1;
        if (p[i] != '*')
            continue;
        while (j < n && p[j] >= '0' && p[j] <= '9' && v <= 100000)
            v = v * 10 + (unsigned long)(p[j++] - '0');
        if (v > 100000)
            return false;
    }
    return true;
}

static void fuzz_slots(const char *p, size_t n)
{
    static struct redis_slotmap map;
    redisReader *rd = redisReaderCreate();
    void *rep = NULL;
    char err[128];

    if (small_counts(p, n) && redisReaderFeed(rd, p, n) == REDIS_OK &&
        redisReaderGetReply(rd, &rep) == REDIS_OK && rep) {
        int rc = redis_slotmap_parse(rep, "seed", &map, err, sizeof(err));

        CHECK(rc == 0 || rc == REDIS_E_PROTO);
        if (rc == 0)
            for (unsigned s = 0; s < REDIS_SLOTS; s++)
                CHECK(map.owner[s] == REDIS_SLOT_NONE || map.owner[s] < map.n);
        freeReplyObject(rep);
    }
    redisReaderFree(rd);
}

static void fuzz_redirect(const char *p, size_t n)
{
    struct redis_endpoint ep;
    unsigned slot;
    int rc = redis_redirect_parse(p, n, "asked", &slot, &ep);

    CHECK(rc == 0 || rc == REDIS_E_PROTO);
    if (rc == 0)
        CHECK(slot < REDIS_SLOTS && ep.port && ep.host[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *p;

    if (size == 0)
        return 0;
    p = malloc(size); /* the input after the selector, NUL-terminated */
    memcpy(p, data + 1, size - 1);
    p[size - 1] = '\0';
    switch (data[0] % 3) {
    case 0:
        fuzz_spec(p);
        break;
    case 1:
        fuzz_slots(p, size - 1);
        break;
    default:
        fuzz_redirect(p, size - 1);
        break;
    }
    free(p);
    return 0;
}
