/* SPDX-License-Identifier: MIT */
/*
 * test_redis.c - the Redis client against real redis-server processes the
 * test starts on free loopback ports (tests/unit/redis_servers.h): two
 * standalone servers and a 3-master Cluster.
 *
 * Standalone: pipelining (10,000 INCRs, in order, in few writes, each
 * round trip observed in the metrics histogram), a
 * callback that queues more, EVALSHA with the NOSCRIPT fallback, SSUBSCRIBE
 * + SPUBLISH, refcount and linger over 500 flips, reconnect after a crash
 * (shard down/up, resubscribed), timeouts while the server is stopped,
 * the probe catching a stopped subscription. Cluster: routing by slot,
 * channels on different masters, ASK during a migration, MOVED after it
 * and the server's own sunsubscribe (resubscribed on the new owner).
 * Timeouts are small (300 ms) so the whole file runs in well under 60 s.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loop.h"
#include "metrics.h"
#include "redis.h"
#include "redis_servers.h"
#include "util.h"

#define WAIT_MS 5000 /* the longest any condition is waited for */

static struct rs_server solo[2];
static struct rs_server node[3];

/* ---- what the callbacks saw ---- */

struct seen {
    int up[4], down[4]; /* shard events per shard */
    int subscribed;     /* subscribed events */
    char sub_last[64];  /* the last channel subscribed */
    int messages;       /* message events */
    char msg_last[128]; /* the last message's payload */
    char msg_chan[64];  /* ... and channel */
};

static struct seen seen;

static void on_shard(void *ctx, unsigned shard, bool up)
{
    (void)ctx;
    if (shard < 4)
        (up ? seen.up : seen.down)[shard]++;
}

static void on_subscribed(void *ctx, const char *ch, size_t len)
{
    (void)ctx;
    seen.subscribed++;
    snprintf(seen.sub_last, sizeof(seen.sub_last), "%.*s", (int)len, ch);
}

static void on_message(void *ctx, const char *ch, size_t clen, const char *msg, size_t mlen)
{
    (void)ctx;
    seen.messages++;
    snprintf(seen.msg_chan, sizeof(seen.msg_chan), "%.*s", (int)clen, ch);
    snprintf(seen.msg_last, sizeof(seen.msg_last), "%.*s", (int)mlen, msg);
}

static const struct redis_events events = {on_shard, on_subscribed, on_message};

/* A reply, copied: an integer, a string or an error's text, or err. */
struct result {
    bool done;
    int err;
    int type;
    long long integer;
    char str[128];
};

static bool in_call; /* set around calls that queue: no callback may run then */

static void on_result(void *ctx, const redisReply *r, int err)
{
    struct result *res = ctx;

    assert_false(in_call);
    assert_false(res->done); /* exactly once */
    res->done = true;
    res->err = err;
    if (r) {
        res->type = r->type;
        res->integer = r->integer;
        if (r->str)
            snprintf(res->str, sizeof(res->str), "%.*s", (int)r->len, r->str);
    }
}

/* ---- helpers ---- */

static struct metrics *observe_into; /* redis_options.metrics of the next client */

static struct redis_options opts(void)
{
    struct redis_options o;

    redis_options_init(&o);
    o.metrics = observe_into;
    o.timeout_ms = 300;
    o.probe_ms = 300;
    o.linger_ms = 200;
    o.backoff_base_ms = 20;
    o.backoff_floor_ms = 50;
    o.backoff_cap_ms = 200;
    return o;
}

static struct redis *client(struct loop *l, const char *spec)
{
    struct redis_topology t;
    struct redis_options o = opts();
    char err[128];

    assert_int_equal(redis_topology_parse(spec, &t, err, sizeof(err)), 0);
    memset(&seen, 0, sizeof(seen));
    return redis_new(l, &t, &o, &events, NULL);
}

static struct redis *solo_client(struct loop *l, int n)
{
    char spec[128];

    if (n == 1)
        snprintf(spec, sizeof(spec), "redis://127.0.0.1:%d", solo[0].port);
    else
        snprintf(spec, sizeof(spec), "redis://127.0.0.1:%d,redis://127.0.0.1:%d", solo[0].port,
                 solo[1].port);
    return client(l, spec);
}

#define RUN_UNTIL(l, cond)                                                                    \
    do {                                                                                      \
        uint64_t t0_ = time_mono_ms();                                                        \
        while (!(cond) && time_mono_ms() - t0_ < WAIT_MS)                                     \
            loop_run_once((l), 10);                                                           \
        if (!(cond))                                                                          \
            fail_msg("%s:%d: not true within %d ms: %s", __FILE__, __LINE__, WAIT_MS, #cond); \
    } while (0)

static void run_for(struct loop *l, int ms)
{
    uint64_t t0 = time_mono_ms();

    while (time_mono_ms() - t0 < (uint64_t)ms)
        loop_run_once(l, 10);
}

static int cmd(struct redis *r, struct result *res, const char *key, int argc, ...)
{
    const char *argv[8];
    size_t argvlen[8];
    va_list ap;
    int rc;

    memset(res, 0, sizeof(*res));
    va_start(ap, argc);
    for (int i = 0; i < argc; i++) {
        argv[i] = va_arg(ap, const char *);
        argvlen[i] = strlen(argv[i]);
    }
    va_end(ap);
    in_call = true;
    rc = redis_cmd(r, key, strlen(key), argc, argv, argvlen, on_result, res);
    in_call = false;
    return rc;
}

/* The value redis-cli prints for `args` on port. */
static long long cli_int(int port, const char *args)
{
    char out[256];

    assert_int_equal(rs_cli(out, sizeof(out), port, "%s", args), 0);
    return atoll(out);
}

/* ---- standalone ---- */

static int incr_next;   /* the INCR reply the next callback must see */
static int incr_errors; /* ... and those that were not */

static void on_incr(void *ctx, const redisReply *r, int err)
{
    (void)ctx;
    if (err || !r || r->type != REDIS_REPLY_INTEGER || r->integer != incr_next)
        incr_errors++;
    incr_next++;
}

static void test_pipelining(void **state)
{
    struct loop *l = loop_new();
    struct metrics *m = (observe_into = calloc(1, sizeof(*m)));
    struct redis *r = solo_client(l, 1);
    struct redis_stats st;
    uint64_t observed = 0;
    struct result del;
    const char *argv[] = {"INCR", "pipe"};
    size_t argvlen[] = {4, 4};

    (void)state;
    assert_int_equal(cmd(r, &del, "pipe", 2, "DEL", "pipe"), 0);
    incr_next = 1;
    incr_errors = 0;
    in_call = true;
    for (int i = 0; i < 10000; i++)
        assert_int_equal(redis_cmd(r, "pipe", 4, 2, argv, argvlen, on_incr, NULL), 0);
    in_call = false;
    RUN_UNTIL(l, incr_next == 10001);
    assert_true(del.done && del.err == 0);
    assert_int_equal(incr_errors, 0);
    redis_stats(r, &st);
    assert_true(st.commands >= 10001);
    assert_true(st.replies >= 10001);
    /* One write per iteration: a few, for 10,000 commands (a short write
     * continues on EPOLLOUT). */
    assert_true(st.writes < 100);
    print_message("pipelining: %llu commands, %llu writes\n", (unsigned long long)st.commands,
                  (unsigned long long)st.writes);
    assert_int_equal(seen.up[0], 1);
    assert_true(redis_all_up(r));
    /* Every reply matched to its command's write, none twice. */
    for (unsigned b = 0; b <= METRICS_HIST_BOUNDS; b++)
        observed += METRIC_GET(&m->hist[MH_REDIS], n[b]);
    assert_true(observed >= 10001 && observed <= st.replies);
    assert_true(METRIC_GET(&m->hist[MH_REDIS], sum_us) > 0);
    redis_free(r);
    loop_free(l);
    observe_into = NULL;
    free(m);
}

static struct redis *chain_r;
static int chain_depth;

static void on_chain(void *ctx, const redisReply *r, int err)
{
    const char *argv[] = {"INCR", "chain"};
    size_t argvlen[] = {4, 5};

    (void)ctx;
    assert_false(in_call);
    assert_int_equal(err, 0);
    assert_int_equal(r->integer, chain_depth + 1);
    if (++chain_depth < 5) {
        in_call = true;
        assert_int_equal(redis_cmd(chain_r, "chain", 5, 2, argv, argvlen, on_chain, NULL), 0);
        in_call = false;
    }
}

static void test_callback_queues_more(void **state)
{
    struct loop *l = loop_new();
    struct result del;
    const char *argv[] = {"INCR", "chain"};
    size_t argvlen[] = {4, 5};

    (void)state;
    chain_r = solo_client(l, 1);
    chain_depth = 0;
    assert_int_equal(cmd(chain_r, &del, "chain", 2, "DEL", "chain"), 0);
    in_call = true;
    assert_int_equal(redis_cmd(chain_r, "chain", 5, 2, argv, argvlen, on_chain, NULL), 0);
    in_call = false;
    RUN_UNTIL(l, chain_depth == 5);
    redis_free(chain_r);
    loop_free(l);
}

static void eval(struct redis *r, int s, struct result *res)
{
    const char *keys[] = {"k{e}"}, *args[] = {"v"};
    size_t keylen[] = {4}, arglen[] = {1};

    memset(res, 0, sizeof(*res));
    in_call = true;
    assert_int_equal(redis_eval(r, s, 1, keys, keylen, 1, args, arglen, on_result, res), 0);
    in_call = false;
}

static void test_eval_noscript(void **state)
{
    struct loop *l = loop_new();
    struct redis *r = solo_client(l, 1);
    int s = redis_script(r, "return ARGV[1] .. ':' .. KEYS[1]");
    struct result res;

    (void)state;
    assert_true(s >= 0);
    eval(r, s, &res);
    RUN_UNTIL(l, res.done);
    assert_int_equal(res.err, 0);
    assert_string_equal(res.str, "v:k{e}");
    /* The server forgets it: EVALSHA gets -NOSCRIPT and EVAL follows. */
    assert_int_equal(rs_cli(NULL, 0, solo[0].port, "script flush"), 0);
    eval(r, s, &res);
    RUN_UNTIL(l, res.done);
    assert_int_equal(res.err, 0);
    assert_int_equal(res.type, REDIS_REPLY_STRING);
    assert_string_equal(res.str, "v:k{e}");
    redis_free(r);
    loop_free(l);
}

static void publish(struct redis *r, const char *ch, const char *msg, struct result *res)
{
    memset(res, 0, sizeof(*res));
    in_call = true;
    assert_int_equal(redis_publish(r, ch, strlen(ch), msg, strlen(msg), on_result, res), 0);
    in_call = false;
}

static void test_pubsub_standalone(void **state)
{
    struct loop *l = loop_new();
    struct redis *r = solo_client(l, 2);
    struct result res;
    const char *ch = "room:{a}";

    (void)state;
    redis_sub(r, ch, strlen(ch));
    assert_false(redis_subscribed(r, ch, strlen(ch)));
    RUN_UNTIL(l, seen.subscribed == 1);
    assert_string_equal(seen.sub_last, ch);
    assert_true(redis_subscribed(r, ch, strlen(ch)));
    publish(r, ch, "hello", &res);
    RUN_UNTIL(l, seen.messages == 1);
    assert_string_equal(seen.msg_chan, ch);
    assert_string_equal(seen.msg_last, "hello");
    assert_true(res.done && res.err == 0 && res.integer == 1);
    redis_free(r);
    loop_free(l);
}

static long long shardnumsub(int port, const char *ch)
{
    char out[256], *nl;

    assert_int_equal(rs_cli(out, sizeof(out), port, "pubsub shardnumsub '%s'", ch), 0);
    nl = strchr(out, '\n'); /* "channel\ncount" */
    return nl ? atoll(nl + 1) : -1;
}

static void test_refcount_linger(void **state)
{
    struct loop *l = loop_new();
    struct redis *r = solo_client(l, 1);
    const char *ch = "flip";
    struct redis_stats st0, st1;

    (void)state;
    redis_sub(r, ch, 4);
    RUN_UNTIL(l, seen.subscribed == 1);
    redis_stats(r, &st0);
    for (int i = 0; i < 500; i++) {
        redis_unsub(r, ch, 4);
        if (i % 7 == 0)
            loop_run_once(l, 0);
        redis_sub(r, ch, 4);
    }
    redis_unsub(r, ch, 4);
    redis_unsub(r, ch, 4); /* one too many: ignored */
    run_for(l, 50);
    redis_stats(r, &st1);
    assert_int_equal(st1.commands, st0.commands); /* no SSUBSCRIBE/SUNSUBSCRIBE sent */
    assert_int_equal(shardnumsub(solo[0].port, ch), 1);
    run_for(l, 400); /* linger_ms 200 */
    assert_false(redis_subscribed(r, ch, 4));
    assert_int_equal(shardnumsub(solo[0].port, ch), 0);
    /* A sub after the linger subscribes again. */
    redis_sub(r, ch, 4);
    RUN_UNTIL(l, seen.subscribed == 2);
    assert_int_equal(shardnumsub(solo[0].port, ch), 1);
    redis_free(r);
    loop_free(l);
}

static void test_reconnect(void **state)
{
    struct loop *l = loop_new();
    struct redis *r = solo_client(l, 1);
    const char *ch = "rc";
    struct redis_stats st;
    struct result res;

    (void)state;
    redis_sub(r, ch, 2);
    RUN_UNTIL(l, seen.subscribed == 1 && seen.up[0] == 1);
    rs_crash(&solo[0]);
    RUN_UNTIL(l, seen.down[0] == 1);
    assert_false(redis_shard_up(r, 0));
    assert_false(redis_subscribed(r, ch, 2));
    assert_int_equal(cmd(r, &res, "x", 1, "PING"), 0); /* waits for the server */
    assert_int_equal(rs_spawn(&solo[0]), 0);
    RUN_UNTIL(l, seen.up[0] == 2 && seen.subscribed == 2 && res.done);
    assert_int_equal(res.err, 0);
    assert_string_equal(res.str, "PONG");
    assert_true(redis_subscribed(r, ch, 2));
    redis_stats(r, &st);
    assert_true(st.reconnects >= 1);
    assert_true(st.resubscribes >= 1);
    publish(r, ch, "again", &res);
    RUN_UNTIL(l, seen.messages == 1);
    assert_string_equal(seen.msg_last, "again");
    redis_free(r);
    loop_free(l);
}

static void test_timeout_while_stopped(void **state)
{
    struct loop *l = loop_new();
    struct redis *r = solo_client(l, 1);
    struct result a, b, c;
    uint64_t t0;

    (void)state;
    RUN_UNTIL(l, redis_all_up(r));
    rs_signal(&solo[0], SIGSTOP);
    /* Written to a connection that looks fine: no reply, so the
     * connection is dropped after timeout_ms and the command fails as
     * DOWN (it may have run). t0 is the loop's time, which the command
     * is stamped with when written: the wall of a clock read now may be
     * a few ms past it, which would let a correct timeout look early. */
    t0 = loop_now(l);
    assert_int_equal(cmd(r, &a, "k", 3, "SET", "k", "1"), 0);
    RUN_UNTIL(l, a.done);
    assert_int_equal(a.err, REDIS_E_DOWN);
    assert_true(time_mono_ms() - t0 >= 300);
    assert_true(time_mono_ms() - t0 < 300 * 5);
    RUN_UNTIL(l, seen.down[0] == 1);
    /* Queued while the master is unreachable: never written, fails as
     * TIMEOUT after timeout_ms. */
    t0 = time_mono_ms();
    assert_int_equal(cmd(r, &b, "k", 2, "GET", "k"), 0);
    RUN_UNTIL(l, b.done);
    assert_int_equal(b.err, REDIS_E_TIMEOUT);
    assert_true(time_mono_ms() - t0 < 300 * 5);
    rs_signal(&solo[0], SIGCONT);
    RUN_UNTIL(l, redis_all_up(r));
    assert_int_equal(cmd(r, &c, "k", 1, "PING"), 0);
    RUN_UNTIL(l, c.done);
    assert_int_equal(c.err, 0);
    redis_free(r);
    loop_free(l);
}

static void test_probe_detects_stopped_subscription(void **state)
{
    struct loop *l = loop_new();
    struct redis *r = solo_client(l, 1);
    struct redis_stats st;
    struct result res;

    (void)state;
    redis_sub(r, "pr", 2);
    RUN_UNTIL(l, seen.subscribed == 1);
    run_for(l, 700); /* idle: probes go out and come back */
    redis_stats(r, &st);
    assert_int_equal(st.probes_failed, 0);
    assert_true(st.messages >= 1); /* the probe's own messages */
    rs_signal(&solo[0], SIGSTOP);
    RUN_UNTIL(l, (redis_stats(r, &st), st.probes_failed >= 1));
    assert_false(redis_subscribed(r, "pr", 2));
    rs_signal(&solo[0], SIGCONT);
    RUN_UNTIL(l, seen.subscribed == 2 && redis_all_up(r));
    publish(r, "pr", "back", &res);
    RUN_UNTIL(l, seen.messages == 1);
    redis_free(r);
    loop_free(l);
}

static void test_free_fails_queued(void **state)
{
    struct loop *l = loop_new();
    struct redis *r = solo_client(l, 1);
    struct result res;

    (void)state;
    assert_int_equal(cmd(r, &res, "k", 1, "PING"), 0);
    redis_free(r); /* before any connection is ready */
    assert_true(res.done);
    assert_int_equal(res.err, REDIS_E_CLOSED);
    loop_run_once(l, 0); /* no hook left behind */
    loop_free(l);
}

static void test_full(void **state)
{
    struct loop *l = loop_new();
    struct redis_topology t;
    struct redis_options o = opts();
    struct result res[3];
    char spec[64];
    struct redis *r;

    (void)state;
    snprintf(spec, sizeof(spec), "redis://127.0.0.1:%d", solo[0].port);
    assert_int_equal(redis_topology_parse(spec, &t, NULL, 0), 0);
    o.max_pending = 2;
    r = redis_new(l, &t, &o, NULL, NULL);
    assert_int_equal(cmd(r, &res[0], "k", 1, "PING"), 0);
    assert_int_equal(cmd(r, &res[1], "k", 1, "PING"), 0);
    assert_int_equal(cmd(r, &res[2], "k", 1, "PING"), REDIS_E_FULL);
    RUN_UNTIL(l, res[0].done && res[1].done);
    assert_false(res[2].done);
    assert_int_equal(cmd(r, &res[2], "k", 1, "PING"), 0);
    RUN_UNTIL(l, res[2].done);
    redis_free(r);
    loop_free(l);
}

/* ---- Cluster ---- */

static struct redis *cluster_client(struct loop *l)
{
    char spec[96];
    struct redis *r;

    snprintf(spec, sizeof(spec), "redis-cluster://127.0.0.1:%d", node[1].port);
    r = client(l, spec);
    RUN_UNTIL(l, redis_nshards(r) == 3 && redis_all_up(r));
    return r;
}

/* Which node serves key: the one whose GET does not answer MOVED. */
static int owner_port(const char *key)
{
    char out[256];

    for (int i = 0; i < 3; i++)
        if (rs_cli(out, sizeof(out), node[i].port, "get '%s'", key) == 0 &&
            strncmp(out, "MOVED", 5) != 0)
            return node[i].port;
    return -1;
}

static void test_cluster_routing_and_channels(void **state)
{
    struct loop *l = loop_new();
    struct redis *r = cluster_client(l);
    char a[32] = "c{0}", b[32] = "";
    struct result res;
    char out[64];

    (void)state;
    /* Slots as Redis computes them. */
    assert_int_equal(cli_int(node[0].port, "cluster keyslot foo"), redis_key_slot("foo", 3));
    assert_int_equal(cli_int(node[0].port, "cluster keyslot bar"), redis_key_slot("bar", 3));
    for (int i = 1; i < 100 && !b[0]; i++) {
        char c[32];

        snprintf(c, sizeof(c), "c{%d}", i);
        if (redis_shard_of(r, c, strlen(c)) != redis_shard_of(r, a, strlen(a)))
            snprintf(b, sizeof(b), "%s", c);
    }
    assert_true(b[0]);
    for (int i = 0; i < 20; i++) { /* keys all over the slots: no MOVED */
        char k[16];

        snprintf(k, sizeof(k), "key%d", i);
        assert_int_equal(cmd(r, &res, k, 3, "SET", k, "v"), 0);
        RUN_UNTIL(l, res.done);
        assert_int_equal(res.type, REDIS_REPLY_STATUS);
    }
    redis_sub(r, a, strlen(a));
    redis_sub(r, b, strlen(b));
    RUN_UNTIL(l, seen.subscribed == 2);
    /* Each is subscribed on its own slot's master, a different one. */
    int pa = -1, pb = -1;

    for (int i = 0; i < 3; i++) {
        if (shardnumsub(node[i].port, a) == 1)
            pa = node[i].port;
        if (shardnumsub(node[i].port, b) == 1)
            pb = node[i].port;
    }
    assert_true(pa > 0 && pb > 0 && pa != pb);
    assert_int_equal(rs_cli(out, sizeof(out), pa, "spublish '%s' direct", a), 0);
    assert_string_equal(out, "1");
    RUN_UNTIL(l, seen.messages == 1);
    assert_string_equal(seen.msg_last, "direct");
    publish(r, b, "routed", &res);
    RUN_UNTIL(l, seen.messages == 2 && res.done);
    assert_string_equal(seen.msg_chan, b);
    redis_free(r);
    loop_free(l);
}

static void node_id(int port, char *id, size_t len)
{
    assert_int_equal(rs_cli(id, len, port, "cluster myid"), 0);
}

static void test_cluster_ask_moved_sunsubscribe(void **state)
{
    struct loop *l = loop_new();
    struct redis *r = cluster_client(l);
    const char *key = "mv{m}", *ch = "ch{m}";
    char src_id[64], dst_id[64], out[256];
    int slot = (int)redis_key_slot(key, strlen(key)), src, dst = -1;
    struct redis_stats st0, st1;
    struct result res;

    (void)state;
    assert_int_equal(cmd(r, &res, key, 3, "SET", key, "moved-value"), 0);
    RUN_UNTIL(l, res.done);
    redis_sub(r, ch, strlen(ch));
    RUN_UNTIL(l, seen.subscribed == 1);
    src = owner_port(key);
    assert_true(src > 0);
    for (int i = 0; i < 3 && dst < 0; i++)
        if (node[i].port != src)
            dst = node[i].port;
    node_id(src, src_id, sizeof(src_id));
    node_id(dst, dst_id, sizeof(dst_id));

    /* Migration in progress, the key already moved: -ASK from the source. */
    assert_int_equal(rs_cli(out, sizeof(out), dst, "cluster setslot %d importing %s", slot, src_id),
                     0);
    assert_int_equal(rs_cli(out, sizeof(out), src, "cluster setslot %d migrating %s", slot, dst_id),
                     0);
    assert_int_equal(rs_cli(out, sizeof(out), src, "migrate 127.0.0.1 %d '%s' 0 5000", dst, key),
                     0);
    assert_string_equal(out, "OK");
    redis_stats(r, &st0);
    assert_int_equal(cmd(r, &res, key, 2, "GET", key), 0);
    RUN_UNTIL(l, res.done);
    assert_int_equal(res.err, 0);
    assert_string_equal(res.str, "moved-value");
    redis_stats(r, &st1);
    assert_int_equal(st1.redirects, st0.redirects + 1); /* one ASK */

    /* The slot is the destination's: -MOVED, the server's sunsubscribe. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            rs_cli(out, sizeof(out), node[i].port, "cluster setslot %d node %s", slot, dst_id), 0);
    redis_stats(r, &st0);
    assert_int_equal(cmd(r, &res, key, 2, "GET", key), 0);
    RUN_UNTIL(l, res.done && seen.subscribed == 2);
    redis_stats(r, &st1);
    assert_true(st1.redirects >= st0.redirects + 1); /* the stale map's MOVED */
    assert_int_equal(res.err, 0);
    assert_string_equal(res.str, "moved-value");
    assert_true(redis_subscribed(r, ch, strlen(ch)));
    assert_int_equal(shardnumsub(dst, ch), 1);
    redis_stats(r, &st1);
    assert_true(st1.resubscribes >= 1);
    /* The map was read again: the slot's master is the destination now,
     * so the next command goes there at once. */
    redis_stats(r, &st0);
    assert_int_equal(cmd(r, &res, key, 2, "GET", key), 0);
    RUN_UNTIL(l, res.done);
    redis_stats(r, &st1);
    assert_int_equal(st1.redirects, st0.redirects);
    publish(r, ch, "after-move", &res);
    RUN_UNTIL(l, seen.messages == 1 && res.done);
    assert_string_equal(seen.msg_last, "after-move");
    redis_free(r);
    loop_free(l);
}

/* ---- the servers, for the whole file ---- */

static int servers_up(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++)
        if (rs_start(&solo[i], false) != 0) {
            fprintf(stderr,
                    "test_redis: cannot start redis-server (scripts/setup.sh installs it)\n");
            return -1;
        }
    for (int i = 0; i < 3; i++)
        if (rs_start(&node[i], true) != 0)
            return -1;
    if (rs_cluster(node, 3) != 0) {
        fprintf(stderr, "test_redis: the cluster did not form\n");
        return -1;
    }
    return 0;
}

static int servers_down(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++)
        rs_stop(&solo[i]);
    for (int i = 0; i < 3; i++)
        rs_stop(&node[i]);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipelining),
        cmocka_unit_test(test_callback_queues_more),
        cmocka_unit_test(test_eval_noscript),
        cmocka_unit_test(test_pubsub_standalone),
        cmocka_unit_test(test_refcount_linger),
        cmocka_unit_test(test_reconnect),
        cmocka_unit_test(test_timeout_while_stopped),
        cmocka_unit_test(test_probe_detects_stopped_subscription),
        cmocka_unit_test(test_free_fails_queued),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_cluster_routing_and_channels),
        cmocka_unit_test(test_cluster_ask_moved_sunsubscribe),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, servers_up, servers_down);
}
