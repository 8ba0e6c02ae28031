/* SPDX-License-Identifier: MIT */
/*
 * redis.c - the Redis client (redis.h): masters and their command
 * connections, command routing and pipelining, redirects, scripts,
 * timeouts, the Cluster slot map, health events and statistics.
 *
 * A command is formatted once (redisFormatCommandArgv) and routed to a
 * master. If the master's command connection is ready it is appended to
 * that connection's output at once, else it waits on master->queued (at
 * most timeout_ms: REDIS_E_TIMEOUT). The before-sleep hook writes every
 * connection's output in one write(). Replies come back in FIFO order;
 * -MOVED/-ASK/-TRYAGAIN/-NOSCRIPT replies send the command again (they say
 * it did not run), every other reply goes to the callback.
 *
 * A command connection is ready after its handshake: SCRIPT LOAD of each
 * script, then PING; its +PONG makes the master reachable and writes what
 * queued meanwhile. A connection that is lost, or whose oldest command
 * waited timeout_ms, is closed: its written commands fail REDIS_E_DOWN
 * (they may have run), and it is reopened after a full-jitter backoff.
 *
 * Pub/sub lives in redis_sub.c; the pure parts in redis_topo.c.
 */
#include "redis.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "redis_internal.h"
#include "util.h"

#define TRYAGAIN_MS 20 /* -TRYAGAIN: a slot being migrated; retried after */

static const struct rconn_ops cmd_ops;
static const struct rconn_ops map_ops;
static void submit(struct redis *r, struct rcmd *c);
static void send_now(struct master *m, struct rcmd *c);

void redis_options_init(struct redis_options *o)
{
    o->timeout_ms = 1000;
    o->probe_ms = 5000;
    o->backoff_base_ms = 100;
    o->backoff_floor_ms = 250;
    o->backoff_cap_ms = 5000;
    o->linger_ms = 30000;
    o->max_pending = 100000;
    o->metrics = NULL;
}

/* ---- small helpers ---- */

uint64_t redis__rand(struct redis *r)
{
    /* xorshift64*: jitter and names, not secrets */
    r->rng ^= r->rng >> 12;
    r->rng ^= r->rng << 25;
    r->rng ^= r->rng >> 27;
    return r->rng * 2685821657736338717ull;
}

/* Full jitter: uniform in [floor, max(floor, min(cap, base * 2^attempt))]. */
uint32_t redis__backoff(struct redis *r, unsigned attempt)
{
    uint64_t hi = (uint64_t)r->o.backoff_base_ms << MIN(attempt, 20u);
    uint64_t lo = r->o.backoff_floor_ms;

    hi = MIN(hi, (uint64_t)r->o.backoff_cap_ms);
    if (hi <= lo)
        return (uint32_t)lo;
    return (uint32_t)(lo + redis__rand(r) % (hi - lo + 1));
}

static bool is_error(const redisReply *rep, const char *word)
{
    size_t n = strlen(word);

    return rep && rep->type == REDIS_REPLY_ERROR && rep->len >= n &&
           memcmp(rep->str, word, n) == 0 && (rep->len == n || rep->str[n] == ' ');
}

static char *format(int argc, const char *const *argv, const size_t *argvlen, size_t *len)
{
    char *buf = NULL;
    int n = redisFormatCommandArgv(&buf, argc, (const char **)argv, argvlen);

    if (n < 0)
        abort(); /* out of memory: the x*alloc policy */
    *len = (size_t)n;
    return buf;
}

struct master *redis__master_of(struct redis *r, int idx)
{
    return idx >= 0 && (unsigned)idx < r->nm ? r->m[idx] : NULL;
}

/* ---- health ---- */

void redis__health(struct master *m)
{
    bool up = m->cmd_ready && !m->ps_lost;

    if (up == m->up || m->r->closing)
        return;
    m->up = up;
    if (m->r->ev.shard)
        m->r->ev.shard(m->r->ctx, m->idx, up);
}

/* ---- finishing commands ---- */

static void rcmd_free(struct rcmd *c)
{
    free(c->buf); /* hiredis 0.14.1 formats into malloc memory */
    free(c);
}

/* Runs c's callback once and frees it. c is on no list. */
static void finish(struct redis *r, struct rcmd *c, const redisReply *rep, int err)
{
    if (c->m && c->kind == RCMD_USER)
        c->m->pending--;
    else if (!c->m && c->kind == RCMD_USER)
        r->nunrouted--;
    if (c->kind == RCMD_USER && c->cb)
        c->cb(c->ctx, rep, err);
    else if (c->kind == RCMD_INTERNAL && c->done)
        c->done(c->m, c, rep, err);
    rcmd_free(c);
}

static void fail_list(struct redis *r, struct list *head, int err)
{
    while (!list_empty(head)) {
        struct rcmd *c = container_of(list_first(head), struct rcmd, link);

        list_del(&c->link);
        finish(r, c, NULL, err);
    }
}

/* Commands that waited timeout_ms without being written. */
static void expire_queue(struct redis *r, struct list *head, uint64_t now)
{
    while (!list_empty(head)) {
        struct rcmd *c = container_of(list_first(head), struct rcmd, link);

        if (now - c->queued_at < r->o.timeout_ms)
            return;
        list_del(&c->link);
        finish(r, c, NULL, REDIS_E_TIMEOUT);
    }
}

/* ---- command connections ---- */

static void cmd_retry_later(struct master *m)
{
    loop_timer_start(m->r->loop, &m->cmd_retry, redis__backoff(m->r, m->cmd_attempt++));
}

static void cmd_connect(struct master *m)
{
    if (m->r->closing || m->cmd.state != RCONN_IDLE)
        return;
    if (!m->resolved)
        m->resolved = rconn_set_addr(&m->cmd, m->ep.host, m->ep.port) == 0;
    if (!m->resolved || rconn_connect(&m->cmd) != 0)
        cmd_retry_later(m);
}

static void on_cmd_retry(struct wheel_timer *t, uint64_t now)
{
    (void)now;
    cmd_connect(container_of(t, struct master, cmd_retry));
}

/* The connection is gone (lost, or closed by us): its written commands
 * fail REDIS_E_DOWN, it reconnects after a backoff, and on a Cluster the
 * map is read again (a failover may be why). */
static void cmd_down(struct master *m, struct list *reqs)
{
    struct redis *r = m->r;

    m->cmd_ready = false;
    while (!list_empty(reqs)) {
        struct rcmd *c = container_of(list_first(reqs), struct rcmd, req.link);

        list_del(&c->req.link);
        finish(r, c, NULL, REDIS_E_DOWN);
    }
    redis__health(m);
    if (r->closing)
        return;
    cmd_retry_later(m);
    if (r->mode == REDIS_CLUSTER)
        redis__refresh_map(r);
}

static void cmd_drop(struct master *m)
{
    struct list reqs;

    list_init(&reqs);
    rconn_close(&m->cmd, &reqs);
    cmd_down(m, &reqs);
}

static void cmd_lost(struct rconn *rc, struct list *reqs, int err)
{
    (void)err;
    cmd_down(rc->data, reqs);
}

static void on_hello(struct master *m, struct rcmd *c, const redisReply *rep, int err)
{
    (void)c;
    if (err || !rep || rep->type != REDIS_REPLY_STATUS) {
        /* -LOADING and the like: not ready; try again later. */
        if (!err && m->cmd.state != RCONN_IDLE)
            cmd_drop(m);
        return;
    }
    m->cmd_ready = true;
    m->cmd_attempt = 0;
    if (m->cmd_was_ready)
        m->r->st.reconnects++;
    m->cmd_was_ready = true;
    while (!list_empty(&m->queued)) {
        struct rcmd *q = container_of(list_first(&m->queued), struct rcmd, link);

        list_del(&q->link);
        send_now(m, q);
    }
    redis__health(m);
}

void redis__internal_cmd(struct master *m, const char *buf, size_t len, rcmd_done_cb *done)
{
    struct rcmd *c = xcalloc(1, sizeof(*c));

    c->buf = xmalloc(len);
    memcpy(c->buf, buf, len);
    c->len = len;
    c->kind = RCMD_INTERNAL;
    c->done = done;
    c->script = -1;
    c->m = m;
    c->queued_at = loop_now(m->r->loop);
    list_init(&c->link);
    if (m->cmd.state == RCONN_IDLE) {
        finish(m->r, c, NULL, REDIS_E_DOWN);
        return;
    }
    c->written = true;
    m->r->st.commands++;
    rconn_send(&m->cmd, c->buf, c->len, &c->req);
}

/* The handshake: every script loaded, then a PING whose reply makes the
 * connection ready. Commands are not written before it. */
static void cmd_connected(struct rconn *rc)
{
    struct master *m = rc->data;
    struct redis *r = m->r;

    for (unsigned i = 0; i < r->nscripts; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", r->scripts[i].lua};
        size_t argvlen[] = {6, 4, strlen(r->scripts[i].lua)};
        size_t len;
        char *buf = format(3, argv, argvlen, &len);

        redis__internal_cmd(m, buf, len, NULL);
        free(buf);
    }
    redis__internal_cmd(m, "*1\r\n$4\r\nPING\r\n", 14, on_hello);
}

/* ---- redirects ---- */

static struct master *master_new(struct redis *r, const struct redis_endpoint *ep);

static struct master *find_master(struct redis *r, const struct redis_endpoint *ep)
{
    for (unsigned i = 0; i < r->nm; i++)
        if (r->m[i]->ep.port == ep->port && strcmp(r->m[i]->ep.host, ep->host) == 0)
            return r->m[i];
    return r->nm < REDIS_ENDPOINTS_MAX ? master_new(r, ep) : NULL;
}

/* -MOVED/-ASK: c goes to the endpoint the error names (MOVED: from now on,
 * for its slot); c->m is the master that answered. Returns false when it
 * cannot (c is then finished). */
static bool redirect(struct master *m, struct rcmd *c, const redisReply *rep, bool ask)
{
    struct redis *r = m->r;
    struct redis_endpoint ep;
    struct master *to;
    unsigned slot;

    r->st.redirects++;
    if (++c->redirects > REDIS_REDIRECTS_MAX) {
        finish(r, c, NULL, REDIS_E_REDIRECT);
        return false;
    }
    if (redis_redirect_parse(rep->str, rep->len, m->ep.host, &slot, &ep) ||
        !(to = find_master(r, &ep))) {
        finish(r, c, rep, 0);
        return false;
    }
    if (ask && !to->cmd_ready) {
        /* ASKING must come right before the command: not behind a
         * handshake. The target is not reachable now. */
        finish(r, c, NULL, REDIS_E_DOWN);
        return false;
    }
    m->pending--;
    to->pending++;
    c->m = to;
    if (ask) {
        redis__internal_cmd(to, "*1\r\n$6\r\nASKING\r\n", 16, NULL);
        send_now(to, c);
        return true;
    }
    if (r->mode == REDIS_CLUSTER) {
        r->owner[slot] = (uint8_t)to->idx;
        redis__refresh_map(r);
    }
    submit(r, c);
    return true;
}

static void on_retry_timer(struct wheel_timer *t, uint64_t now)
{
    struct redis *r = container_of(t, struct redis, retry_timer);

    while (!list_empty(&r->retry)) {
        struct rcmd *c = container_of(list_first(&r->retry), struct rcmd, link);

        if (c->retry_at > now) {
            loop_timer_start(r->loop, &r->retry_timer, c->retry_at - now);
            return;
        }
        list_del(&c->link);
        c->m->pending--;
        c->m = NULL;
        r->nunrouted++;
        submit(r, c);
    }
}

static void tryagain(struct master *m, struct rcmd *c)
{
    struct redis *r = m->r;

    r->st.redirects++;
    if (++c->redirects > REDIS_REDIRECTS_MAX) {
        finish(r, c, NULL, REDIS_E_REDIRECT);
        return;
    }
    c->retry_at = loop_now(r->loop) + TRYAGAIN_MS;
    list_insert_tail(&r->retry, &c->link);
    if (!wheel_is_linked(&r->retry_timer))
        loop_timer_start(r->loop, &r->retry_timer, TRYAGAIN_MS);
}

/* -NOSCRIPT: the same command as EVAL with the script's source (the bytes
 * after the SHA are the same), once. */
static void noscript(struct master *m, struct rcmd *c)
{
    const char *lua = m->r->scripts[c->script].lua;
    size_t ll = strlen(lua), tail = c->len - c->eval_tail, n;
    int argc = atoi(c->buf + 1);
    char head[64];
    char *buf;

    n = (size_t)snprintf(head, sizeof(head), "*%d\r\n$4\r\nEVAL\r\n$%zu\r\n", argc, ll);
    buf = xmalloc(n + ll + 2 + tail);
    memcpy(buf, head, n);
    memcpy(buf + n, lua, ll);
    memcpy(buf + n + ll, "\r\n", 2);
    memcpy(buf + n + ll + 2, c->buf + c->eval_tail, tail);
    free(c->buf);
    c->buf = buf;
    c->len = n + ll + 2 + tail;
    c->script = -1; /* no second fallback */
    c->eval_tail = 0;
    send_now(m, c);
}

/* A reply on a command connection. */
static void cmd_reply(struct rconn *rc, struct rconn_req *req, const redisReply *rep)
{
    struct master *m = rc->data;
    struct redis *r = m->r;
    struct rcmd *c = container_of(req, struct rcmd, req);

    r->st.replies++;
    c->written = false;
    if (c->kind != RCMD_USER) {
        finish(r, c, rep, 0);
        return;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        if (is_error(rep, "MOVED") || is_error(rep, "ASK")) {
            redirect(m, c, rep, is_error(rep, "ASK"));
            return;
        }
        if (is_error(rep, "TRYAGAIN")) {
            tryagain(m, c);
            return;
        }
        if (is_error(rep, "NOSCRIPT") && c->script >= 0) {
            noscript(m, c);
            return;
        }
        if (is_error(rep, "CLUSTERDOWN") && r->mode == REDIS_CLUSTER)
            redis__refresh_map(r);
        if (is_error(rep, "READONLY")) {
            /* A demoted master: the reply stands, the connection goes. */
            finish(r, c, rep, 0);
            cmd_drop(m);
            return;
        }
    }
    finish(r, c, rep, 0);
}

static const struct rconn_ops cmd_ops = {
    .connected = cmd_connected,
    .reply = cmd_reply,
    .lost = cmd_lost,
};

/* ---- routing and submitting ---- */

static struct master *slot_master(struct redis *r, unsigned slot)
{
    return r->owner[slot] == REDIS_SLOT_NONE ? NULL : r->m[r->owner[slot]];
}

struct master *redis__route_master(struct redis *r, const char *key, size_t len)
{
    if (r->mode == REDIS_CLUSTER)
        return slot_master(r, redis_key_slot(key, len));
    return r->m[redis_shard_of(r, key, len)];
}

static void send_now(struct master *m, struct rcmd *c)
{
    c->written = true;
    m->r->st.commands++;
    rconn_send(&m->cmd, c->buf, c->len, &c->req);
}

/* c (counted in c->m->pending, or unrouted when c->m is NULL) goes to its
 * master: written when ready, else queued. */
static void submit(struct redis *r, struct rcmd *c)
{
    struct master *m = c->m;

    if (!m) {
        m = c->shard >= 0 ? r->m[c->shard] : slot_master(r, c->slot);
        if (!m) {
            list_insert_tail(&r->unrouted, &c->link);
            if (r->mode == REDIS_CLUSTER)
                redis__refresh_map(r);
            return;
        }
        r->nunrouted--;
        m->pending++;
        c->m = m;
    }
    if (m->cmd_ready)
        send_now(m, c);
    else
        list_insert_tail(&m->queued, &c->link);
}

static void route_unrouted(struct redis *r)
{
    struct list head;

    list_init(&head);
    while (!list_empty(&r->unrouted)) {
        struct list *n = list_first(&r->unrouted);

        list_del(n);
        list_insert_tail(&head, n);
    }
    while (!list_empty(&head)) {
        struct rcmd *c = container_of(list_first(&head), struct rcmd, link);

        list_del(&c->link);
        submit(r, c);
    }
}

/* A new user command: counted and routed. REDIS_E_FULL when its master
 * (or the unrouted queue) holds max_pending already. */
static int queue_user(struct redis *r, const char *key, size_t klen, char *buf, size_t len,
                      redis_reply_cb *cb, void *ctx, struct rcmd **out)
{
    struct rcmd *c;
    struct master *m = redis__route_master(r, key, klen);

    if (r->closing || (m ? m->pending : r->nunrouted) >= r->o.max_pending) {
        free(buf);
        return r->closing ? REDIS_E_CLOSED : REDIS_E_FULL;
    }
    c = xcalloc(1, sizeof(*c));
    c->buf = buf;
    c->len = len;
    c->cb = cb;
    c->ctx = ctx;
    c->kind = RCMD_USER;
    c->script = -1;
    c->slot = redis_key_slot(key, klen);
    c->shard = r->mode == REDIS_CLUSTER ? -1 : (int)redis_shard_of(r, key, klen);
    c->queued_at = loop_now(r->loop);
    list_init(&c->link);
    r->nunrouted++;
    if (out)
        *out = c;
    submit(r, c);
    return 0;
}

int redis_cmd(struct redis *r, const char *route_key, size_t route_len, int argc,
              const char *const *argv, const size_t *argvlen, redis_reply_cb *cb, void *ctx)
{
    size_t len;
    char *buf = format(argc, argv, argvlen, &len);

    return queue_user(r, route_key, route_len, buf, len, cb, ctx, NULL);
}

int redis_publish(struct redis *r, const char *channel, size_t clen, const char *msg, size_t mlen,
                  redis_reply_cb *cb, void *ctx)
{
    const char *argv[] = {"SPUBLISH", channel, msg};
    size_t argvlen[] = {8, clen, mlen};

    return redis_cmd(r, channel, clen, 3, argv, argvlen, cb, ctx);
}

/* ---- scripts ---- */

int redis_script(struct redis *r, const char *lua)
{
    unsigned char md[SHA_DIGEST_LENGTH];
    struct redis_script *s;

    r->scripts = xrealloc(r->scripts, (r->nscripts + 1) * sizeof(*r->scripts));
    s = &r->scripts[r->nscripts];
    s->lua = xstrdup(lua);
    SHA1((const unsigned char *)lua, strlen(lua), md);
    for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
        snprintf(s->sha + 2 * i, 3, "%02x", md[i]);
    return (int)r->nscripts++;
}

int redis_eval(struct redis *r, int script, int nkeys, const char *const *keys,
               const size_t *keylen, int nargs, const char *const *args, const size_t *arglen,
               redis_reply_cb *cb, void *ctx)
{
    int argc = 3 + nkeys + nargs;
    const char **argv = xmalloc((size_t)argc * sizeof(*argv));
    size_t *argvlen = xmalloc((size_t)argc * sizeof(*argvlen));
    char nk[16];
    struct rcmd *c = NULL;
    size_t len, tail;
    char *buf;
    int rc;

    assert(script >= 0 && (unsigned)script < r->nscripts); /* a handle redis_script() gave */
    snprintf(nk, sizeof(nk), "%d", nkeys);
    argv[0] = "EVALSHA", argvlen[0] = 7;
    argv[1] = r->scripts[script].sha, argvlen[1] = 40;
    argv[2] = nk, argvlen[2] = strlen(nk);
    for (int i = 0; i < nkeys; i++)
        argv[3 + i] = keys[i], argvlen[3 + i] = keylen[i];
    for (int i = 0; i < nargs; i++)
        argv[3 + nkeys + i] = args[i], argvlen[3 + nkeys + i] = arglen[i];
    buf = format(argc, argv, argvlen, &len);
    free(argv);
    free(argvlen);
    /* "*N\r\n$7\r\nEVALSHA\r\n$40\r\n<sha>\r\n" then the rest */
    tail = (size_t)snprintf(NULL, 0, "*%d\r\n", argc) + 13 + 5 + 42;
    rc = queue_user(r, nkeys ? keys[0] : "", nkeys ? keylen[0] : 0, buf, len, cb, ctx, &c);
    if (rc == 0) {
        c->script = script;
        c->eval_tail = tail;
    }
    return rc;
}

/* ---- the Cluster slot map ---- */

static void map_retry(struct redis *r, uint32_t delay)
{
    r->map_busy = true; /* until the timer has run */
    loop_timer_start(r->loop, &r->map_timer, delay);
}

/* The endpoints to ask, in turn: the seeds, then the masters seen. */
static const struct redis_endpoint *map_candidate(struct redis *r)
{
    unsigned n = r->topo.n + r->nm, i = r->map_next++ % n;

    return i < r->topo.n ? &r->topo.ep[i] : &r->m[i - r->topo.n]->ep;
}

static void map_start(struct redis *r)
{
    const struct redis_endpoint *ep = map_candidate(r);

    r->map_busy = true;
    r->map_again = false;
    snprintf(r->map_host, sizeof(r->map_host), "%s", ep->host);
    if (rconn_set_addr(&r->mapc, ep->host, ep->port) || rconn_connect(&r->mapc)) {
        map_retry(r, redis__backoff(r, r->map_attempt++));
        return;
    }
    rconn_send(&r->mapc, "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n", 28, &r->map_req);
}

static void on_map_timer(struct wheel_timer *t, uint64_t now)
{
    struct redis *r = container_of(t, struct redis, map_timer);

    (void)now;
    map_start(r);
}

void redis__refresh_map(struct redis *r)
{
    if (r->mode != REDIS_CLUSTER || r->closing)
        return;
    if (r->map_busy)
        r->map_again = true;
    else
        map_start(r);
}

static void map_failed(struct redis *r)
{
    rconn_close(&r->mapc, NULL);
    map_retry(r, redis__backoff(r, r->map_attempt++));
}

static void map_lost(struct rconn *rc, struct list *reqs, int err)
{
    (void)err;
    while (!list_empty(reqs)) /* map_req only: nothing to finish */
        list_del(list_first(reqs));
    map_failed(rc->data);
}

static void map_connected(struct rconn *rc)
{
    (void)rc;
}

/* Installs a parsed map: masters found or added, slots pointed at them,
 * waiting commands routed, channels moved to where they now belong. */
static void map_apply(struct redis *r, const struct redis_slotmap *map)
{
    uint8_t idx[REDIS_ENDPOINTS_MAX];

    for (unsigned i = 0; i < map->n; i++) {
        struct master *m = find_master(r, &map->ep[i]);

        idx[i] = m ? (uint8_t)m->idx : REDIS_SLOT_NONE;
    }
    for (unsigned s = 0; s < REDIS_SLOTS; s++)
        r->owner[s] = map->owner[s] == REDIS_SLOT_NONE ? REDIS_SLOT_NONE : idx[map->owner[s]];
    r->have_map = true;
    route_unrouted(r);
    redis__sub_reconcile(r);
}

static void map_reply(struct rconn *rc, struct rconn_req *req, const redisReply *rep)
{
    struct redis *r = rc->data;
    char err[128];

    (void)req;
    if (redis_slotmap_parse(rep, r->map_host, r->map, err, sizeof(err)) || r->map->n == 0) {
        map_failed(r);
        return;
    }
    rconn_close(&r->mapc, NULL);
    r->map_attempt = 0;
    map_apply(r, r->map);
    if (r->map_again)
        map_retry(r, TRYAGAIN_MS); /* asked again meanwhile: once more, shortly */
    else
        r->map_busy = false;
}

static const struct rconn_ops map_ops = {
    .connected = map_connected,
    .reply = map_reply,
    .lost = map_lost,
};

/* ---- the hook and the tick ---- */

static void on_hook(struct loop *l, void *data)
{
    struct redis *r = data;

    (void)l;
    redis__sub_hook(r);
    while (!list_empty(&r->flushq)) {
        struct rconn *c = container_of(list_first(&r->flushq), struct rconn, flush_link);

        rconn_flush(c); /* unlinks c */
    }
}

static uint32_t tick_ms(const struct redis_options *o)
{
    uint32_t t = MIN(o->timeout_ms, o->probe_ms) / 4;

    return MAX(10u, MIN(t, 250u));
}

/* The command connection's deadlines: connect + handshake, and the oldest
 * written command, each timeout_ms. */
static void cmd_tick(struct master *m, uint64_t now)
{
    uint64_t oldest = rconn_oldest(&m->cmd);
    uint32_t to = m->r->o.timeout_ms;

    if (m->cmd.state != RCONN_IDLE && !m->cmd_ready && now - m->cmd.since >= to)
        cmd_drop(m);
    else if (oldest && now - oldest >= to)
        cmd_drop(m);
    expire_queue(m->r, &m->queued, now);
}

static void on_tick(struct wheel_timer *t, uint64_t now)
{
    struct redis *r = container_of(t, struct redis, tick);

    for (unsigned i = 0; i < r->nm; i++) {
        cmd_tick(r->m[i], now);
        redis__sub_tick(r->m[i], now);
    }
    expire_queue(r, &r->unrouted, now);
    if (r->mapc.state != RCONN_IDLE && now - r->mapc.since >= r->o.timeout_ms)
        map_failed(r);
    loop_timer_start(r->loop, &r->tick, tick_ms(&r->o));
}

/* ---- life cycle ---- */

static struct master *master_new(struct redis *r, const struct redis_endpoint *ep)
{
    struct master *m = xcalloc(1, sizeof(*m));

    m->r = r;
    m->idx = r->nm;
    m->ep = *ep;
    rconn_init(&m->cmd, r->loop, &r->flushq, &cmd_ops, m);
    m->cmd.metrics = r->o.metrics;
    wheel_timer_init(&m->cmd_retry, on_cmd_retry);
    list_init(&m->queued);
    redis__sub_init(m);
    r->m[r->nm++] = m;
    cmd_connect(m);
    return m;
}

static void master_free(struct master *m)
{
    struct list reqs;

    list_init(&reqs);
    rconn_close(&m->cmd, &reqs);
    while (!list_empty(&reqs)) {
        struct rcmd *c = container_of(list_first(&reqs), struct rcmd, req.link);

        list_del(&c->req.link);
        finish(m->r, c, NULL, REDIS_E_CLOSED);
    }
    fail_list(m->r, &m->queued, REDIS_E_CLOSED);
    rconn_release(&m->cmd);
    wheel_del(&m->cmd_retry);
    redis__sub_release(m);
    free(m);
}

struct redis *redis_new(struct loop *l, const struct redis_topology *t,
                        const struct redis_options *o, const struct redis_events *ev, void *ctx)
{
    struct redis *r = xcalloc(1, sizeof(*r));

    r->loop = l;
    r->o = *o;
    if (ev)
        r->ev = *ev;
    r->ctx = ctx;
    r->mode = t->mode;
    r->topo = *t;
    r->rng = time_mono_us() ^ (uint64_t)(uintptr_t)r ^ 0x9e3779b97f4a7c15ull;
    r->nonce = redis__rand(r);
    memset(r->owner, REDIS_SLOT_NONE, sizeof(r->owner));
    list_init(&r->flushq);
    list_init(&r->unrouted);
    list_init(&r->retry);
    list_init(&r->reports);
    wheel_timer_init(&r->retry_timer, on_retry_timer);
    wheel_timer_init(&r->tick, on_tick);
    wheel_timer_init(&r->map_timer, on_map_timer);
    rconn_init(&r->mapc, l, &r->flushq, &map_ops, r);
    loop_add_hook(l, on_hook, r);
    loop_timer_start(l, &r->tick, tick_ms(o));
    if (t->mode == REDIS_CLUSTER) {
        r->map = xmalloc(sizeof(*r->map));
        redis__refresh_map(r);
    } else {
        for (unsigned i = 0; i < t->n; i++)
            master_new(r, &t->ep[i]);
    }
    return r;
}

void redis_free(struct redis *r)
{
    if (!r)
        return;
    r->closing = true;
    loop_del_hook(r->loop, on_hook, r);
    wheel_del(&r->tick);
    wheel_del(&r->retry_timer);
    wheel_del(&r->map_timer);
    rconn_release(&r->mapc);
    while (!list_empty(&r->retry)) {
        struct rcmd *c = container_of(list_first(&r->retry), struct rcmd, link);

        list_del(&c->link);
        finish(r, c, NULL, REDIS_E_CLOSED);
    }
    fail_list(r, &r->unrouted, REDIS_E_CLOSED);
    for (unsigned i = 0; i < r->nm; i++)
        master_free(r->m[i]);
    redis__chans_free(r);
    for (unsigned i = 0; i < r->nscripts; i++)
        free(r->scripts[i].lua);
    free(r->scripts);
    free(r->map);
    free(r);
}

/* ---- queries ---- */

unsigned redis_nshards(const struct redis *r)
{
    return r->nm;
}

unsigned redis_shard_of(const struct redis *r, const char *key, size_t len)
{
    if (r->mode == REDIS_CLUSTER) {
        uint8_t o = r->owner[redis_key_slot(key, len)];

        return o == REDIS_SLOT_NONE ? 0 : o;
    }
    key = redis_key_tag(key, &len);
    return redis_jump_hash(redis_fnv1a64(key, len), r->topo.n);
}

bool redis_shard_up(const struct redis *r, unsigned shard)
{
    return shard < r->nm && r->m[shard]->up;
}

bool redis_all_up(const struct redis *r)
{
    if (r->nm == 0)
        return false;
    for (unsigned i = 0; i < r->nm; i++)
        if (!r->m[i]->up)
            return false;
    return true;
}

void redis_stats(const struct redis *r, struct redis_stats *out)
{
    *out = r->st;
    out->writes = r->mapc.writes;
    for (unsigned i = 0; i < r->nm; i++)
        out->writes += r->m[i]->cmd.writes + r->m[i]->ps.writes;
}
