/* SPDX-License-Identifier: MIT */
/*
 * test_redis_topo.c - the Redis layer's pure functions: the `redis` spec
 * parser (good and bad specs with their exact errors), FNV-1a-64, jump
 * consistent hash, CRC16 key slots and hash tags, and the CLUSTER SLOTS
 * and -MOVED/-ASK parsers (replies built by hiredis's own reader).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "guard.h"
#include "redis.h"
#include "redis_topo.h"

static void parse_ok(const char *spec, struct redis_topology *t)
{
    char err[256] = "";
    struct guard g = guard_place(spec, strlen(spec) + 1);

    if (redis_topology_parse(g.data, t, err, sizeof(err)) != 0)
        fail_msg("%s: %s", spec, err);
    guard_free(&g);
}

static void parse_bad(const char *spec, const char *want)
{
    struct redis_topology t;
    char err[256] = "";
    struct guard g = guard_place(spec, strlen(spec) + 1);

    assert_int_equal(redis_topology_parse(g.data, &t, err, sizeof(err)), REDIS_E_SPEC);
    assert_string_equal(err, want);
    guard_free(&g);
}

static void test_spec_shards(void **state)
{
    struct redis_topology t;

    (void)state;
    parse_ok("redis://127.0.0.1:6379", &t);
    assert_int_equal(t.mode, REDIS_SHARDS);
    assert_int_equal(t.n, 1);
    assert_string_equal(t.ep[0].host, "127.0.0.1");
    assert_int_equal(t.ep[0].port, 6379);
    parse_ok("redis://a.example:1/, redis://[::1]:65535,redis://b_c-d:2", &t);
    assert_int_equal(t.n, 3);
    assert_string_equal(t.ep[0].host, "a.example");
    assert_int_equal(t.ep[0].port, 1);
    assert_string_equal(t.ep[1].host, "::1");
    assert_int_equal(t.ep[1].port, 65535);
    assert_string_equal(t.ep[2].host, "b_c-d");
}

static void test_spec_cluster(void **state)
{
    struct redis_topology t;

    (void)state;
    parse_ok("redis-cluster://10.0.0.1:7001,10.0.0.2:7002,[fe80::1]:7003", &t);
    assert_int_equal(t.mode, REDIS_CLUSTER);
    assert_int_equal(t.n, 3);
    assert_string_equal(t.ep[1].host, "10.0.0.2");
    assert_int_equal(t.ep[1].port, 7002);
    assert_string_equal(t.ep[2].host, "fe80::1");
    parse_ok("REDIS-CLUSTER://h:1/", &t);
    assert_int_equal(t.n, 1);
}

static void test_spec_errors(void **state)
{
    char many[64 * 24 + 64];
    size_t n = 0;

    (void)state;
    parse_bad("", "empty redis spec");
    parse_bad("localhost:6379", "unknown scheme in localhost:6379 (redis:// or redis-cluster://)");
    parse_bad("rediss://h:1", "unknown scheme in rediss://h:1 (redis:// or redis-cluster://)");
    parse_bad("redis://h", "missing port in redis endpoint h");
    parse_bad("redis://h:", "bad port in redis endpoint h: (1..65535)");
    parse_bad("redis://h:0", "bad port in redis endpoint h:0 (1..65535)");
    parse_bad("redis://h:65536", "bad port in redis endpoint h:65536 (1..65535)");
    parse_bad("redis://h:6x", "bad port in redis endpoint h:6x (1..65535)");
    parse_bad("redis://:6379", "missing host in redis endpoint :6379");
    parse_bad("redis://h:1/0", "path not allowed in redis endpoint h:1/0");
    parse_bad("redis://user:pw@h:1", "user or password not allowed in redis endpoint user:pw@h:1");
    parse_bad("redis://h:1?db=2", "query not allowed in redis endpoint h:1?db=2");
    parse_bad("redis://h:1,", "empty item 2 in redis spec");
    parse_bad("redis://h:1,,redis://g:1", "empty item 2 in redis spec");
    parse_bad("redis://h:1,g:2", "shard g:2 is not a redis:// URL");
    parse_bad("redis-cluster://h:1,redis-cluster://g:2",
              "cluster seed redis-cluster://g:2 must be HOST:PORT");
    parse_bad("redis://h:1,redis://H:1", "duplicate redis endpoint H:1");
    parse_bad("redis://[::1:1", "unclosed [ in redis endpoint [::1:1");
    parse_bad("redis://[::1]", "missing port in redis endpoint [::1]");
    parse_bad("redis://[zz]:1", "bad IPv6 address in redis endpoint [zz]:1");
    parse_bad("redis://h h:1", "bad host in redis endpoint h h:1");
    for (int i = 0; i < 65; i++)
        n += (size_t)snprintf(many + n, sizeof(many) - n, "%sredis://h:%d", i ? "," : "", i + 1);
    parse_bad(many, "more than 64 redis endpoints");
}

/* Published FNV-1a-64 values (the FNV reference test suite). */
static void test_fnv1a64(void **state)
{
    (void)state;
    assert_true(redis_fnv1a64("", 0) == 0xcbf29ce484222325ull);
    assert_true(redis_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(redis_fnv1a64("foobar", 6) == 0x85944171f73967e8ull);
}

/* The vectors other implementations of the paper's algorithm test with
 * (dgryski/go-jump), and buckets never move but to the new one. */
static void test_jump_hash(void **state)
{
    static const unsigned first10[] = {0, 6, 6, 8, 1, 4, 9, 0, 4, 7};

    (void)state;
    assert_int_equal(redis_jump_hash(1, 1), 0);
    assert_int_equal(redis_jump_hash(42, 57), 43);
    assert_int_equal(redis_jump_hash(0xDEAD10CCull, 1), 0);
    assert_int_equal(redis_jump_hash(0xDEAD10CCull, 666), 361);
    assert_int_equal(redis_jump_hash(256, 1024), 520);
    for (unsigned k = 0; k < 10; k++)
        assert_int_equal(redis_jump_hash(k, 10), first10[k]);
    for (uint64_t k = 0; k < 2000; k++) {
        unsigned a = redis_jump_hash(k * 0x9e3779b97f4a7c15ull, 7);
        unsigned b = redis_jump_hash(k * 0x9e3779b97f4a7c15ull, 8);

        assert_true(b == a || b == 7);
    }
}

/* Redis's own answers (CLUSTER KEYSLOT on 7.0.15) and the CRC16/XMODEM
 * check value. */
static void test_crc16_slots(void **state)
{
    (void)state;
    assert_int_equal(redis_crc16("123456789", 9), 0x31c3);
    assert_int_equal(redis_key_slot("foo", 3), 12182);
    assert_int_equal(redis_key_slot("bar", 3), 5061);
    assert_int_equal(redis_key_slot("room:1", 6), 10963);
    assert_int_equal(redis_key_slot("{user1000}.following", 20), 3443);
    assert_int_equal(redis_key_slot("{user1000}.followers", 20), 3443);
    assert_int_equal(redis_key_slot("", 0), 0);
}

static void tag_is(const char *key, const char *want)
{
    size_t len = strlen(key);
    const char *t = redis_key_tag(key, &len);

    assert_int_equal(len, strlen(want));
    assert_memory_equal(t, want, len);
}

static void test_key_tags(void **state)
{
    (void)state;
    tag_is("{user1000}.following", "user1000");
    tag_is("foo{}{bar}", "foo{}{bar}"); /* the first {} is empty: whole key */
    tag_is("{}", "{}");
    tag_is("a{}b", "a{}b");
    tag_is("{a}{b}", "a");
    tag_is("foo{{bar}}zap", "{bar");
    tag_is("foo{bar", "foo{bar");
    tag_is("pd:app:{r:0123456789abcdef}:m", "r:0123456789abcdef");
    assert_int_equal(redis_key_slot("{a}{b}", 6), redis_key_slot("a", 1));
}

/* A reply tree from RESP text, by hiredis's reader. */
static redisReply *resp(const char *text)
{
    redisReader *rd = redisReaderCreate();
    void *rep = NULL;

    assert_int_equal(redisReaderFeed(rd, text, strlen(text)), REDIS_OK);
    assert_int_equal(redisReaderGetReply(rd, &rep), REDIS_OK);
    assert_non_null(rep);
    redisReaderFree(rd);
    return rep;
}

static void test_slotmap(void **state)
{
    struct redis_slotmap *m = malloc(sizeof(*m));
    char err[128];
    redisReply *r = resp("*3\r\n"
                         "*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$2\r\nid\r\n"
                         "*4\r\n:5461\r\n:10922\r\n*2\r\n$0\r\n\r\n:7002\r\n"
                         "*2\r\n$9\r\n127.0.0.1\r\n:7102\r\n"
                         "*3\r\n:10923\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:7001\r\n");

    (void)state;
    assert_int_equal(redis_slotmap_parse(r, "10.1.1.1", m, err, sizeof(err)), 0);
    assert_int_equal(m->n, 2);
    assert_string_equal(m->ep[0].host, "127.0.0.1");
    assert_int_equal(m->ep[0].port, 7001);
    assert_string_equal(m->ep[1].host, "10.1.1.1"); /* "" is the host asked */
    assert_int_equal(m->ep[1].port, 7002);
    assert_int_equal(m->owner[0], 0);
    assert_int_equal(m->owner[5460], 0);
    assert_int_equal(m->owner[5461], 1);
    assert_int_equal(m->owner[10922], 1);
    assert_int_equal(m->owner[16383], 0);
    freeReplyObject(r);

    r = resp("*1\r\n*3\r\n:100\r\n:99\r\n*2\r\n$1\r\nh\r\n:1\r\n");
    assert_int_equal(redis_slotmap_parse(r, "x", m, err, sizeof(err)), REDIS_E_PROTO);
    assert_string_equal(err, "bad CLUSTER SLOTS reply: slot out of range");
    freeReplyObject(r);
    r = resp("*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:0\r\n");
    assert_int_equal(redis_slotmap_parse(r, "x", m, err, sizeof(err)), REDIS_E_PROTO);
    assert_string_equal(err, "bad CLUSTER SLOTS reply: a master is not [host, port, ...]");
    freeReplyObject(r);
    r = resp("-ERR This instance has cluster support disabled\r\n");
    assert_int_equal(redis_slotmap_parse(r, "x", m, err, sizeof(err)), REDIS_E_PROTO);
    assert_string_equal(err, "bad CLUSTER SLOTS reply: not an array");
    freeReplyObject(r);
    r = resp("*0\r\n");
    assert_int_equal(redis_slotmap_parse(r, "x", m, err, sizeof(err)), 0);
    assert_int_equal(m->n, 0);
    assert_int_equal(m->owner[7], REDIS_SLOT_NONE);
    freeReplyObject(r);
    free(m);
}

static void redirect_ok(const char *s, unsigned slot, const char *host, unsigned port)
{
    struct redis_endpoint ep;
    unsigned got;
    struct guard g = guard_place(s, strlen(s));

    assert_int_equal(redis_redirect_parse(g.data, strlen(s), "asked", &got, &ep), 0);
    assert_int_equal(got, slot);
    assert_string_equal(ep.host, host);
    assert_int_equal(ep.port, port);
    guard_free(&g);
}

static void redirect_bad(const char *s)
{
    struct redis_endpoint ep;
    unsigned got;
    struct guard g = guard_place(s, strlen(s));

    assert_int_equal(redis_redirect_parse(g.data, strlen(s), "asked", &got, &ep), REDIS_E_PROTO);
    guard_free(&g);
}

static void test_redirects(void **state)
{
    (void)state;
    redirect_ok("MOVED 3999 127.0.0.1:6381", 3999, "127.0.0.1", 6381);
    redirect_ok("ASK 0 [::1]:7000", 0, "::1", 7000);
    redirect_ok("MOVED 16383 :6380", 16383, "asked", 6380);
    redirect_bad("MOVED");
    redirect_bad("MOVED 16384 h:1");
    redirect_bad("MOVED x h:1");
    redirect_bad("MOVED 1 h");
    redirect_bad("MOVED 1 h:0");
    redirect_bad("MOVED 1 h:70000");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_shards), cmocka_unit_test(test_spec_cluster),
        cmocka_unit_test(test_spec_errors), cmocka_unit_test(test_fnv1a64),
        cmocka_unit_test(test_jump_hash),   cmocka_unit_test(test_crc16_slots),
        cmocka_unit_test(test_key_tags),    cmocka_unit_test(test_slotmap),
        cmocka_unit_test(test_redirects),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
