/* SPDX-License-Identifier: MIT */
/*
 * redis_sub.c - sharded pub/sub for the client (redis.h): channels with a
 * reference count and a linger, one pub/sub connection per master, the
 * probe, and resubscription after losses and slot moves.
 *
 * A channel lives in redis->chans while it is referenced or lingering. It
 * is routed like a key to a master and waits on that master's todo list
 * until the hook writes its SSUBSCRIBE (one command per channel, so never
 * CROSSSLOT). Each SSUBSCRIBE/SUNSUBSCRIBE written is an op in the
 * connection's FIFO: a confirmation or error reply answers the op at its
 * head, so a "sunsubscribe" that matches no op is the server's own: the
 * slot moved (or the master failed over), and the channel is subscribed
 * again where the (refreshed) map says.
 *
 * The probe: each pub/sub connection is also subscribed to a probe
 * channel of its own master (Cluster: a name whose slot that master
 * serves). When the connection has received nothing for probe_ms, an
 * SPUBLISH on the probe channel goes out on the command connection; if no
 * message arrives within probe_ms more the connection is dropped and
 * everything on it subscribed again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis_internal.h"
#include "util.h"

#define PROBE_TRIES 200000 /* names tried for a probe in a master's slots */

static const struct rconn_ops ps_ops;

/* ---- channels ---- */

static struct chan *chan_new(struct redis *r, const char *name, size_t len)
{
    struct chan *ch = xcalloc(1, sizeof(*ch) + len + 1);

    ch->r = r;
    ch->master = -1;
    ch->state = CHAN_IDLE;
    ch->slot = redis_key_slot(name, len);
    ch->len = len;
    memcpy(ch->name, name, len);
    list_init(&ch->todo);
    list_init(&ch->report);
    return ch;
}

static void chan_free(struct chan *ch)
{
    if (!ch)
        return;
    list_del(&ch->todo);
    list_del(&ch->report);
    wheel_del(&ch->linger);
    free(ch);
}

static struct chan *find_chan(const struct redis *r, const char *name, size_t len)
{
    uint64_t h = hash_bytes(name, len);

    for (struct hmap_node *n = hmap_find(&r->chans, h); n; n = hmap_find_next(n, h)) {
        struct chan *ch = container_of(n, struct chan, node);

        if (ch->len == len && memcmp(ch->name, name, len) == 0)
            return ch;
    }
    return NULL;
}

/* The channel a push names on master m's connection: m's probe or one of
 * the client's. */
static struct chan *find_any(struct master *m, const char *name, size_t len)
{
    if (m->probe && m->probe->len == len && memcmp(m->probe->name, name, len) == 0)
        return m->probe;
    return find_chan(m->r, name, len);
}

/* ch waits for an SSUBSCRIBE on m. */
static void chan_schedule(struct chan *ch, struct master *m)
{
    ch->master = (int)m->idx;
    ch->state = CHAN_IDLE;
    list_del(&ch->todo);
    if (ch->probe)
        list_insert_tail(m->ps_todo.next, &ch->todo); /* first: health depends on it */
    else
        list_insert_tail(&m->ps_todo, &ch->todo);
    m->ps_wanted = true;
}

/* ---- the probe channel ---- */

/* A probe channel name this client alone uses, routed to m. NULL when m
 * serves no slot (Cluster). */
static struct chan *probe_new(struct master *m)
{
    struct redis *r = m->r;
    char name[96];
    int n;

    for (unsigned k = 0; k < PROBE_TRIES; k++) {
        n = snprintf(name, sizeof(name), "presenced:probe:%016llx:{p%u.%u}",
                     (unsigned long long)r->nonce, m->idx, k);
        if (r->mode != REDIS_CLUSTER || r->owner[redis_key_slot(name, (size_t)n)] == m->idx) {
            struct chan *ch = chan_new(r, name, (size_t)n);

            ch->probe = true;
            ch->refs = 1;
            return ch;
        }
    }
    return NULL;
}

/* m's probe is missing or no longer routes to m: a new one. The old
 * name's subscription (if any) went with the slot. */
static void probe_check(struct master *m)
{
    struct redis *r = m->r;

    if (m->probe && (r->mode != REDIS_CLUSTER || r->owner[m->probe->slot] == m->idx))
        return;
    chan_free(m->probe);
    m->probe = probe_new(m);
    m->probe_out = false;
    if (m->probe)
        chan_schedule(m->probe, m);
}

/* ---- pub/sub connection ---- */

static void ps_send_op(struct master *m, bool sub, const char *name, size_t len)
{
    const char *argv[] = {sub ? "SSUBSCRIBE" : "SUNSUBSCRIBE", name};
    size_t argvlen[] = {sub ? 10u : 12u, len};
    struct psop *op = xmalloc(sizeof(*op) + len);
    char *buf = NULL;
    int n = redisFormatCommandArgv(&buf, 2, argv, argvlen);

    if (n < 0)
        abort(); /* out of memory: the x*alloc policy */
    rconn_send(&m->ps, buf, (size_t)n, NULL);
    free(buf);
    op->sub = sub;
    op->sent_at = loop_now(m->r->loop);
    op->len = len;
    memcpy(op->name, name, len);
    list_insert_tail(&m->ps_ops, &op->link);
    m->r->st.commands++;
}

static void ops_free(struct master *m)
{
    while (!list_empty(&m->ps_ops)) {
        struct list *n = list_first(&m->ps_ops);

        list_del(n);
        free(container_of(n, struct psop, link));
    }
}

static void ps_retry_later(struct master *m)
{
    loop_timer_start(m->r->loop, &m->ps_retry, redis__backoff(m->r, m->ps_attempt++));
}

static void ps_connect(struct master *m)
{
    if (m->r->closing || m->ps.state != RCONN_IDLE || !m->resolved)
        return;
    memcpy(&m->ps.addr, &m->cmd.addr, sizeof(m->ps.addr));
    m->ps.addrlen = m->cmd.addrlen;
    if (rconn_connect(&m->ps) != 0)
        ps_retry_later(m);
}

static void on_ps_retry(struct wheel_timer *t, uint64_t now)
{
    (void)now;
    ps_connect(container_of(t, struct master, ps_retry));
}

/* The pub/sub connection is gone: everything on it waits for the next. */
static void ps_down(struct master *m)
{
    struct redis *r = m->r;
    struct hmap_node *n;
    size_t it;

    ops_free(m);
    m->ps_lost = true;
    m->probe_out = false;
    for (n = hmap_first(&r->chans, &it); n; n = hmap_next(&r->chans, n, &it)) {
        struct chan *ch = container_of(n, struct chan, node);

        if (ch->master == (int)m->idx && ch->state != CHAN_IDLE)
            chan_schedule(ch, m);
    }
    if (m->probe)
        chan_schedule(m->probe, m);
    redis__health(m);
    if (r->closing)
        return;
    ps_retry_later(m);
    if (r->mode == REDIS_CLUSTER)
        redis__refresh_map(r);
}

static void ps_drop(struct master *m)
{
    rconn_close(&m->ps, NULL);
    ps_down(m);
}

static void ps_lost(struct rconn *rc, struct list *reqs, int err)
{
    (void)reqs; /* a push connection has no FIFO */
    (void)err;
    ps_down(rc->data);
}

static void ps_connected(struct rconn *rc)
{
    struct master *m = rc->data;

    m->ps_last_rx = loop_now(m->r->loop);
    m->probe_out = false;
    probe_check(m);
}

static bool str_is(const redisReply *e, const char *s)
{
    return e->type == REDIS_REPLY_STRING && e->len == strlen(s) && memcmp(e->str, s, e->len) == 0;
}

static struct psop *op_head(struct master *m)
{
    return list_empty(&m->ps_ops) ? NULL : container_of(list_first(&m->ps_ops), struct psop, link);
}

static bool op_is(const struct psop *op, bool sub, const redisReply *name)
{
    return op && op->sub == sub && op->len == name->len &&
           memcmp(op->name, name->str, name->len) == 0;
}

static void op_pop(struct master *m)
{
    struct psop *op = op_head(m);

    list_del(&op->link);
    free(op);
}

static void on_confirmed(struct master *m, struct chan *ch)
{
    struct redis *r = m->r;

    ch->state = CHAN_OK;
    m->ps_attempt = 0;
    if (m->ps_lost) { /* the first confirmation after a loss */
        m->ps_lost = false;
        r->st.reconnects++;
        redis__health(m);
    }
    if (ch->probe || ch->refs == 0)
        return;
    if (ch->reported)
        r->st.resubscribes++;
    ch->reported = true;
    if (r->ev.subscribed)
        r->ev.subscribed(r->ctx, ch->name, ch->len);
}

/* The server dropped ch from this connection: the slot moved or the
 * master changed. Subscribed again where the map (refreshed) says. */
static void on_unsolicited(struct master *m, struct chan *ch)
{
    struct redis *r = m->r;

    if (ch->master != (int)m->idx || ch->state == CHAN_IDLE)
        return;
    ch->state = CHAN_IDLE;
    list_del(&ch->todo);
    if (r->mode == REDIS_CLUSTER && !ch->probe) {
        ch->master = -1;
        redis__refresh_map(r);
    } else if (r->mode == REDIS_CLUSTER) {
        redis__refresh_map(r); /* the probe is renamed at the reconcile */
    } else {
        chan_schedule(ch, m);
    }
}

/* -MOVED to an SSUBSCRIBE (the map was stale), or another error: the
 * channel is subscribed again after the map is read or after a pause. */
static void on_sub_error(struct master *m, const struct psop *op, const redisReply *rep)
{
    struct redis *r = m->r;
    struct chan *ch = find_any(m, op->name, op->len);
    struct redis_endpoint ep;
    unsigned slot;

    if (!ch || ch->master != (int)m->idx || ch->state != CHAN_SENT)
        return;
    ch->state = CHAN_IDLE;
    if (r->mode == REDIS_CLUSTER && rep->len > 6 && memcmp(rep->str, "MOVED ", 6) == 0 &&
        redis_redirect_parse(rep->str, rep->len, m->ep.host, &slot, &ep) == 0) {
        redis__refresh_map(r);
        if (!ch->probe)
            ch->master = -1;
        return;
    }
    m->ps_hold_until = loop_now(r->loop) + r->o.backoff_floor_ms;
    chan_schedule(ch, m);
}

static void on_push(struct master *m, const redisReply *rep)
{
    struct redis *r = m->r;
    const redisReply *kind, *name;
    struct chan *ch;

    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 3 ||
        rep->element[1]->type != REDIS_REPLY_STRING)
        return;
    kind = rep->element[0];
    name = rep->element[1];
    ch = find_any(m, name->str, name->len);
    if (str_is(kind, "smessage")) {
        r->st.messages++;
        m->probe_out = false; /* anything received proves the connection */
        if (ch && !ch->probe && ch->refs > 0 && rep->element[2]->type == REDIS_REPLY_STRING &&
            r->ev.message)
            r->ev.message(r->ctx, name->str, name->len, rep->element[2]->str, rep->element[2]->len);
    } else if (str_is(kind, "ssubscribe")) {
        if (!op_is(op_head(m), true, name)) {
            ps_drop(m); /* out of step with the server: start over */
            return;
        }
        op_pop(m);
        if (ch && ch->master == (int)m->idx && ch->state == CHAN_SENT)
            on_confirmed(m, ch);
    } else if (str_is(kind, "sunsubscribe")) {
        if (op_is(op_head(m), false, name))
            op_pop(m);
        else if (ch)
            on_unsolicited(m, ch);
    }
}

static void ps_reply(struct rconn *rc, struct rconn_req *req, const redisReply *rep)
{
    struct master *m = rc->data;
    struct psop *op;

    (void)req;
    m->r->st.replies++;
    m->ps_last_rx = loop_now(m->r->loop);
    if (rep->type != REDIS_REPLY_ERROR) {
        on_push(m, rep);
        return;
    }
    op = op_head(m);
    if (!op)
        return;
    list_del(&op->link);
    if (op->sub)
        on_sub_error(m, op, rep);
    free(op);
}

static const struct rconn_ops ps_ops = {
    .connected = ps_connected,
    .reply = ps_reply,
    .lost = ps_lost,
};

/* ---- seams with redis.c ---- */

void redis__sub_init(struct master *m)
{
    rconn_init(&m->ps, m->r->loop, &m->r->flushq, &ps_ops, m);
    m->ps.push = true;
    wheel_timer_init(&m->ps_retry, on_ps_retry);
    list_init(&m->ps_todo);
    list_init(&m->ps_ops);
}

void redis__sub_release(struct master *m)
{
    rconn_release(&m->ps);
    ops_free(m);
    wheel_del(&m->ps_retry);
    chan_free(m->probe);
    m->probe = NULL;
    while (!list_empty(&m->ps_todo))
        list_del(list_first(&m->ps_todo));
}

/* SSUBSCRIBEs due on m, once its connection is open. */
static void sub_flush(struct master *m)
{
    if (list_empty(&m->ps_todo) || loop_now(m->r->loop) < m->ps_hold_until)
        return;
    if (m->ps.state == RCONN_IDLE) {
        if (!wheel_is_linked(&m->ps_retry))
            ps_connect(m);
        return;
    }
    if (m->ps.state != RCONN_OPEN)
        return;
    while (!list_empty(&m->ps_todo)) {
        struct chan *ch = container_of(list_first(&m->ps_todo), struct chan, todo);

        list_del(&ch->todo);
        ps_send_op(m, true, ch->name, ch->len);
        ch->state = CHAN_SENT;
    }
}

void redis__sub_hook(struct redis *r)
{
    while (!list_empty(&r->reports)) {
        struct chan *ch = container_of(list_first(&r->reports), struct chan, report);

        list_del(&ch->report);
        if (ch->refs > 0 && ch->state == CHAN_OK && r->ev.subscribed)
            r->ev.subscribed(r->ctx, ch->name, ch->len);
    }
    for (unsigned i = 0; i < r->nm; i++)
        sub_flush(r->m[i]);
}

/* Deadlines of m's pub/sub connection: connect and each op timeout_ms,
 * the probe probe_ms (see the file comment). */
void redis__sub_tick(struct master *m, uint64_t now)
{
    struct redis *r = m->r;
    struct psop *op = op_head(m);
    char buf[160];
    int n;

    if (m->ps.state == RCONN_CONNECTING && now - m->ps.since >= r->o.timeout_ms) {
        ps_drop(m);
        return;
    }
    if (m->ps.state != RCONN_OPEN)
        return;
    if (op && now - op->sent_at >= r->o.timeout_ms) {
        ps_drop(m);
        return;
    }
    if (!m->probe || m->probe->state != CHAN_OK)
        return;
    if (m->probe_out) {
        if (now - m->probe_sent >= r->o.probe_ms) {
            r->st.probes_failed++;
            ps_drop(m);
        }
        return;
    }
    if (now - m->ps_last_rx < r->o.probe_ms || m->cmd.state == RCONN_IDLE)
        return;
    n = snprintf(buf, sizeof(buf), "*3\r\n$8\r\nSPUBLISH\r\n$%zu\r\n%s\r\n$1\r\np\r\n",
                 m->probe->len, m->probe->name);
    redis__internal_cmd(m, buf, (size_t)n, NULL);
    m->probe_out = true;
    m->probe_sent = now;
}

void redis__sub_reconcile(struct redis *r)
{
    struct hmap_node *n;
    size_t it;

    for (n = hmap_first(&r->chans, &it); n; n = hmap_next(&r->chans, n, &it)) {
        struct chan *ch = container_of(n, struct chan, node);
        struct master *want;

        if (ch->refs == 0 && ch->state == CHAN_IDLE)
            continue; /* lingering, not subscribed: its linger frees it */
        want = redis__route_master(r, ch->name, ch->len);
        if (!want ||
            (ch->master == (int)want->idx && (ch->state != CHAN_IDLE || list_is_linked(&ch->todo))))
            continue;
        chan_schedule(ch, want);
    }
    for (unsigned i = 0; i < r->nm; i++)
        if (r->m[i]->ps.state == RCONN_OPEN || r->m[i]->probe)
            probe_check(r->m[i]);
}

void redis__chans_free(struct redis *r)
{
    struct hmap_node *n, *next;
    size_t it;

    for (n = hmap_first(&r->chans, &it); n; n = next) {
        next = hmap_next(&r->chans, n, &it);
        hmap_remove(&r->chans, n);
        chan_free(container_of(n, struct chan, node));
    }
    hmap_release(&r->chans);
}

/* ---- public ---- */

static void on_linger(struct wheel_timer *t, uint64_t now)
{
    struct chan *ch = container_of(t, struct chan, linger);
    struct master *m = redis__master_of(ch->r, ch->master);

    (void)now;
    if (ch->refs)
        return;
    if (m && ch->state != CHAN_IDLE && m->ps.state == RCONN_OPEN)
        ps_send_op(m, false, ch->name, ch->len);
    hmap_remove(&ch->r->chans, &ch->node);
    chan_free(ch);
}

void redis_sub(struct redis *r, const char *channel, size_t len)
{
    struct chan *ch;
    struct master *m;

    if (len > REDIS_CHANNEL_MAX || r->closing)
        return;
    ch = find_chan(r, channel, len);
    if (ch) {
        if (ch->refs++ > 0)
            return;
        wheel_del(&ch->linger);
        if (ch->state == CHAN_OK)
            list_insert_tail(&r->reports, &ch->report); /* reported from the hook */
        else if (ch->state == CHAN_IDLE && !list_is_linked(&ch->todo) &&
                 (m = redis__route_master(r, channel, len)))
            chan_schedule(ch, m);
        return;
    }
    ch = chan_new(r, channel, len);
    ch->refs = 1;
    wheel_timer_init(&ch->linger, on_linger);
    hmap_insert(&r->chans, &ch->node, hash_bytes(channel, len));
    m = redis__route_master(r, channel, len);
    if (m)
        chan_schedule(ch, m);
    else
        redis__refresh_map(r);
}

void redis_unsub(struct redis *r, const char *channel, size_t len)
{
    struct chan *ch = len <= REDIS_CHANNEL_MAX ? find_chan(r, channel, len) : NULL;

    if (!ch || ch->refs == 0)
        return;
    if (--ch->refs == 0) {
        list_del(&ch->report);
        loop_timer_start(r->loop, &ch->linger, r->o.linger_ms);
    }
}

bool redis_subscribed(const struct redis *r, const char *channel, size_t len)
{
    const struct chan *ch = len <= REDIS_CHANNEL_MAX ? find_chan(r, channel, len) : NULL;

    return ch && ch->refs > 0 && ch->state == CHAN_OK;
}
