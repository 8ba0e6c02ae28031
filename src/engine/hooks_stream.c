/* SPDX-License-Identifier: MIT */
/*
 * hooks_stream.c - the durable webhook queue in Redis Streams
 * (hooks_stream.h).
 *
 * On the home worker: the events not yet acknowledged by their XADD (a
 * FIFO of struct pend, sent again every tick while Redis refuses them),
 * and per endpoint one struct slane: the entries it read and delivers
 * (held), the request in flight, and the Redis command in flight (busy:
 * the group's creation, a read or a claim). One timer, every
 * HSTREAM_TICK_MS, drives everything; a reply or a response also moves
 * its lane on at once. Other workers only forward their events.
 */
#include "hooks_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "bus.h"
#include "cluster.h"
#include "engine_state.h"
#include "hooks.h"
#include "list.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "redis.h"
#include "util.h"
#include "worker.h"

#define HS_KEY_MAX 192 /* bytes of a stream key */
#define HS_SID_MAX 48  /* bytes of a stream entry id ("ms-seq") */
#define HS_GROUP   "wh"

/* One entry read from the stream, until it is acknowledged. */
struct sentry {
    char sid[HS_SID_MAX];
    char id[WEBHOOK_ID_MAX + 1]; /* Standard: the webhook-id */
    size_t len;
    char *body; /* owned */
};

struct slane {
    struct hstream *s;
    struct hook_endpoint *ep;
    char key[HS_KEY_MAX];
    bool group;    /* the consumer group exists, as far as this node knows */
    bool busy;     /* a group, read or claim command is in flight */
    bool disabled; /* the endpoint is given up on this node */
    struct sentry held[HSTREAM_READ_MAX];
    unsigned nheld;
    unsigned attempt; /* attempts made at the head (Pusher: the batch) */
    uint64_t due;     /* loop ms the next attempt may start */
    struct httpc_req *inflight;
    struct buf batch; /* Pusher: the held entries' body, the same on every attempt */
    uint64_t touched; /* loop ms of the last re-claim of held */
    uint64_t claimed; /* loop ms of the last XAUTOCLAIM */
    char cursor[HS_SID_MAX];
};

/* An event waiting for its XADD's answer (home), or on its way there
 * (the bus message from another worker: the same struct). */
struct pend {
    struct bus_msg msg; /* type WORKER_MSG_HOOKS */
    struct list link;
    struct hstream *s; /* the home's, once there */
    unsigned ep;
    bool sending; /* its XADD is in flight */
    char id[WEBHOOK_ID_MAX + 1];
    size_t len;
    char body[];
};

struct hstream {
    struct hooks_config *hc;
    struct worker *w;
    struct cluster *cl;
    struct metrics *m;
    bool home;
    uint64_t rnd; /* xorshift: jitter */
    /* home only: */
    struct list pending; /* struct pend, oldest first */
    size_t npending, bytes;
    struct wheel_timer tick;
    struct slane lanes[HOOKS_ENDPOINTS_MAX];
};

/* XADD that says how many entries its trim removed (never delivered:
 * delivered ones are XDELed). */
static const char lua_add[] =
    "local n = redis.call('XLEN', KEYS[1])\n"
    "redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'i', ARGV[2], 'b', ARGV[3])\n"
    "return n + 1 - redis.call('XLEN', KEYS[1])\n";

static void lane_step(struct slane *ln);

static void ignore_reply(void *ctx, const redisReply *r, int err)
{
    (void)ctx, (void)r, (void)err;
}

static double rnd01(struct hstream *s)
{
    s->rnd ^= s->rnd << 13;
    s->rnd ^= s->rnd >> 7;
    s->rnd ^= s->rnd << 17;
    return (double)(s->rnd >> 11) / 9007199254740992.0;
}

static const char *consumer(const struct hstream *s)
{
    return cluster_self(s->cl);
}

/* Queues argv (argc strings) on ln's stream. 0 or < 0 (REDIS_E_*). */
static int lane_cmd(struct slane *ln, int argc, const char *const *argv, redis_reply_cb *cb,
                    void *ctx)
{
    struct redis *r = cluster_redis(ln->s->cl);
    size_t lens[HSTREAM_READ_MAX + 8];

    if (!r)
        return REDIS_E_CLOSED;
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return redis_cmd(r, ln->key, strlen(ln->key), argc, argv, lens, cb, ctx);
}

/* ---- acknowledging ---- */

/* XACK and XDEL the n entries from held[0] on, and forget them. */
static void ack(struct slane *ln, unsigned n)
{
    const char *argv[HSTREAM_READ_MAX + 3];

    argv[0] = "XACK";
    argv[1] = ln->key;
    argv[2] = HS_GROUP;
    for (unsigned i = 0; i < n; i++)
        argv[3 + i] = ln->held[i].sid;
    lane_cmd(ln, 3 + (int)n, argv, ignore_reply, NULL);
    argv[0] = "XDEL";
    argv[1] = ln->key;
    for (unsigned i = 0; i < n; i++)
        argv[2 + i] = ln->held[i].sid;
    lane_cmd(ln, 2 + (int)n, argv, ignore_reply, NULL);
    for (unsigned i = 0; i < n; i++)
        free(ln->held[i].body);
    ln->batch.len = 0;
    memmove(ln->held, ln->held + n, (ln->nheld - n) * sizeof(ln->held[0]));
    ln->nheld -= n;
    METRIC_SUB(ln->s->m, webhooks_queued, n);
}

/* The endpoint is given up here: what this node holds of it is
 * acknowledged (so no node sends it) and counted as dropped. */
static void lane_drop(struct slane *ln)
{
    unsigned n = ln->nheld;

    ln->disabled = true;
    if (ln->inflight) {
        httpc_cancel(ln->inflight);
        ln->inflight = NULL;
    }
    if (n) {
        ack(ln, n);
        METRIC_ADD(ln->s->m, webhooks_dropped, n);
    }
}

static bool gone(struct slane *ln)
{
    if (!ln->disabled && atomic_load_explicit(&ln->ep->disabled, memory_order_relaxed))
        lane_drop(ln);
    return ln->disabled;
}

static void disable(struct slane *ln, const char *why)
{
    if (!atomic_exchange(&ln->ep->disabled, true)) {
        METRIC_ADD(ln->s->m, webhook_endpoints_disabled, 1);
        log_error("webhook", "%s disabled (%s); %u held events dropped", ln->ep->url, why,
                  ln->nheld);
    }
    lane_drop(ln);
}

/* ---- delivering ---- */

static void done(struct httpc_req *r, int status, void *data);

/* How many held entries the next request carries. */
static unsigned batch_size(const struct slane *ln)
{
    return ln->ep->format == WEBHOOK_PUSHER ? ln->nheld : 1;
}

static void post(struct slane *ln)
{
    char a[160], b[160], c[160];
    const char *headers[4] = {a, b, NULL, NULL};
    struct buf body = {0};

    if (ln->ep->format == WEBHOOK_PUSHER) {
        struct webhook_batch batch = {0};
        char sig[WEBHOOK_HEX_LEN + 1];

        if (ln->batch.len == 0) { /* a new batch: its body, kept for the retries */
            for (unsigned i = 0; i < ln->nheld; i++) {
                if (i)
                    buf_append(&batch.events, ",", 1);
                buf_append(&batch.events, ln->held[i].body, ln->held[i].len);
            }
            batch.n = ln->nheld;
            webhook_batch_finish(&batch, (uint64_t)time_wall_ms(), &ln->batch);
            webhook_batch_release(&batch);
        }
        buf_append(&body, ln->batch.data, ln->batch.len);
        webhook_pusher_sign(ln->ep->app_secret, body.data, body.len, sig);
        snprintf(a, sizeof(a), "X-Pusher-Key: %s", ln->ep->app_key);
        snprintf(b, sizeof(b), "X-Pusher-Signature: %s", sig);
    } else {
        const struct sentry *e = &ln->held[0];
        char sig[WEBHOOK_SIG_LEN + 1];
        int64_t ts = (int64_t)(time_wall_ms() / 1000);

        if (webhook_sign(&ln->ep->key, e->id, ts, e->body, e->len, sig) != 0)
            sig[0] = '\0'; /* an entry of another version: the endpoint refuses it */
        buf_append(&body, e->body, e->len);
        snprintf(a, sizeof(a), "webhook-id: %s", e->id);
        snprintf(b, sizeof(b), "webhook-timestamp: %lld", (long long)ts);
        snprintf(c, sizeof(c), "webhook-signature: %s", sig);
        headers[2] = c;
    }
    ln->attempt++;
    ln->inflight = httpc_post(ln->s->w->loop, &ln->ep->target, headers, body.data, body.len,
                              ln->ep->timeout_ms, done, ln);
    buf_release(&body);
    if (!ln->inflight) /* our own headers are valid: cannot happen */
        disable(ln, "request refused by the client");
}

static void done(struct httpc_req *r, int status, void *data)
{
    struct slane *ln = data;
    enum webhook_outcome o = webhook_outcome_of(ln->ep->format, status > 0 ? status : 0);
    uint64_t now = loop_now(ln->s->w->loop);
    int64_t delay;

    (void)r;
    ln->inflight = NULL;
    if (o == WEBHOOK_DELIVERED) {
        METRIC_ADD(ln->s->m, webhooks_sent, 1);
        ack(ln, batch_size(ln));
        ln->attempt = 0;
        ln->due = now;
    } else if (o == WEBHOOK_GONE) {
        disable(ln, "410 Gone");
        return;
    } else {
        METRIC_ADD(ln->s->m, webhooks_failed, 1);
        delay = webhook_next_delay_ms(ln->ep->format, ln->attempt + 1, rnd01(ln->s));
        if (delay < 0) {
            char why[96];

            snprintf(why, sizeof(why), "%u attempts failed, the last: %s", ln->attempt,
                     status > 0 ? "an HTTP error status" : httpc_strerror(status));
            disable(ln, why);
            return;
        }
        ln->due = now + (uint64_t)delay;
        log_warnx("webhook", "%s: attempt %u failed (%d%s%s); next in %lld ms", ln->ep->url,
                  ln->attempt, status, status < 0 ? ": " : "",
                  status < 0 ? httpc_strerror(status) : "", (long long)delay);
    }
    lane_step(ln);
}

/* ---- reading ---- */

static const redisReply *field(const redisReply *f, const char *name)
{
    for (size_t i = 0; f->type == REDIS_REPLY_ARRAY && i + 1 < f->elements; i += 2)
        if (f->element[i]->type == REDIS_REPLY_STRING && strcmp(f->element[i]->str, name) == 0 &&
            f->element[i + 1]->type == REDIS_REPLY_STRING)
            return f->element[i + 1];
    return NULL;
}

/* Takes the entries of arr ([[id, [field, value, ...]], ...]) into held;
 * an entry deleted meanwhile (its fields nil) or not ours (no body) is
 * acknowledged and skipped. */
static void take(struct slane *ln, const redisReply *arr)
{
    uint64_t now = loop_now(ln->s->w->loop);

    for (size_t i = 0; arr->type == REDIS_REPLY_ARRAY && i < arr->elements; i++) {
        const redisReply *e = arr->element[i], *id, *b, *sid;
        struct sentry *h;

        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
            e->element[0]->type != REDIS_REPLY_STRING || e->element[0]->len >= HS_SID_MAX)
            continue;
        sid = e->element[0];
        id = field(e->element[1], "i");
        b = field(e->element[1], "b");
        if (ln->nheld == HSTREAM_READ_MAX)
            break; /* stays pending: read again by a later claim */
        if (!b || !id || id->len > WEBHOOK_ID_MAX) {
            const char *argv[] = {"XACK", ln->key, HS_GROUP, sid->str};

            lane_cmd(ln, 4, argv, ignore_reply, NULL);
            continue;
        }
        h = &ln->held[ln->nheld++];
        memcpy(h->sid, sid->str, sid->len + 1);
        memcpy(h->id, id->str, id->len + 1);
        h->len = b->len;
        h->body = xmalloc(b->len ? b->len : 1);
        memcpy(h->body, b->str, b->len);
        METRIC_ADD(ln->s->m, webhooks_queued, 1);
    }
    if (ln->nheld && ln->attempt == 0) {
        ln->due = now;
        ln->touched = now;
    }
}

/* A NOGROUP error: Redis lost the stream (a restart without its data);
 * the group is made again. */
static bool lost_group(struct slane *ln, const redisReply *r)
{
    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOGROUP", 7) == 0) {
        ln->group = false;
        return true;
    }
    return false;
}

static void on_read(void *ctx, const redisReply *r, int err)
{
    struct slane *ln = ctx;

    ln->busy = false;
    if (err < 0 || lost_group(ln, r) || gone(ln))
        return;
    /* [[key, [entries]]] or nil */
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
        r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements == 2)
        take(ln, r->element[0]->element[1]);
    lane_step(ln);
}

static void on_claim(void *ctx, const redisReply *r, int err)
{
    struct slane *ln = ctx;

    ln->busy = false;
    if (err < 0 || lost_group(ln, r) || gone(ln))
        return;
    /* [next cursor, [entries], [deleted ids]] */
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[0]->len < HS_SID_MAX) {
        size_t before = ln->nheld;

        memcpy(ln->cursor, r->element[0]->str, r->element[0]->len + 1);
        take(ln, r->element[1]);
        if (ln->nheld > before)
            log_info("webhook", "%s: %zu events of a dead node taken over", ln->ep->url,
                     ln->nheld - before);
    }
    lane_step(ln);
}

static void on_group(void *ctx, const redisReply *r, int err)
{
    struct slane *ln = ctx;

    ln->busy = false;
    if (err < 0)
        return;
    if (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "BUSYGROUP", 9) == 0)
        ln->group = true;
    else
        log_warnx("webhook", "%s: XGROUP CREATE %s: %s", ln->ep->url, ln->key, r->str);
    lane_step(ln);
}

static void read_more(struct slane *ln)
{
    char count[16], idle[24];
    uint64_t now = loop_now(ln->s->w->loop);
    unsigned room = HSTREAM_READ_MAX - ln->nheld;
    int rc;

    snprintf(count, sizeof(count), "%u", room);
    if (now - ln->claimed >= HSTREAM_CLAIM_EVERY_MS) {
        const char *argv[] = {"XAUTOCLAIM", ln->key,    HS_GROUP, consumer(ln->s),
                              idle,         ln->cursor, "COUNT",  count};

        snprintf(idle, sizeof(idle), "%u", ln->ep->timeout_ms + HSTREAM_CLAIM_MARGIN_MS);
        ln->claimed = now;
        rc = lane_cmd(ln, 8, argv, on_claim, ln);
    } else {
        const char *argv[] = {"XREADGROUP", "GROUP", HS_GROUP, consumer(ln->s), "COUNT", count,
                              "STREAMS",    ln->key, ">"};

        rc = lane_cmd(ln, 9, argv, on_read, ln);
    }
    ln->busy = rc == 0;
}

/* Moves ln on: a due attempt, or the group, or a read. */
static void lane_step(struct slane *ln)
{
    if (gone(ln) || ln->inflight || !cluster_redis(ln->s->cl))
        return;
    if (ln->nheld) {
        if (ln->due <= loop_now(ln->s->w->loop))
            post(ln);
        return;
    }
    if (ln->busy)
        return;
    if (!ln->group) {
        const char *argv[] = {"XGROUP", "CREATE", ln->key, HS_GROUP, "0", "MKSTREAM"};

        ln->busy = lane_cmd(ln, 6, argv, on_group, ln) == 0;
        return;
    }
    read_more(ln);
}

/* Held entries stay this node's: their idle time is reset. */
static void touch(struct slane *ln)
{
    const char *argv[HSTREAM_READ_MAX + 6];
    unsigned n = 0;

    argv[n++] = "XCLAIM";
    argv[n++] = ln->key;
    argv[n++] = HS_GROUP;
    argv[n++] = consumer(ln->s);
    argv[n++] = "0";
    for (unsigned i = 0; i < ln->nheld; i++)
        argv[n++] = ln->held[i].sid;
    argv[n++] = "JUSTID";
    lane_cmd(ln, (int)n, argv, ignore_reply, NULL);
    ln->touched = loop_now(ln->s->w->loop);
}

/* ---- producing (home) ---- */

static void pend_free(struct hstream *s, struct pend *p)
{
    list_del(&p->link);
    s->npending--;
    s->bytes -= p->len;
    METRIC_SUB(s->m, webhooks_queued, 1);
    free(p);
}

static void on_added(void *ctx, const redisReply *r, int err)
{
    struct pend *p = ctx;
    struct hstream *s = p->s;
    struct slane *ln = &s->lanes[p->ep];

    p->sending = false;
    if (err < 0 || !r || r->type == REDIS_REPLY_ERROR) {
        if (r && r->type == REDIS_REPLY_ERROR)
            log_warnx("webhook", "XADD %s: %s", ln->key, r->str);
        return; /* sent again at the next tick */
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
        METRIC_ADD(s->m, webhooks_dropped, (uint64_t)r->integer);
        log_warnx("webhook", "%s: stream over %d entries: %lld undelivered events trimmed",
                  ln->ep->url, HSTREAM_MAXLEN, (long long)r->integer);
    }
    pend_free(s, p);
    lane_step(ln);
}

/* XADDs every waiting event not already on its way, oldest first. */
static void send_pending(struct hstream *s)
{
    struct redis *r = cluster_redis(s->cl);
    struct list *it;
    char maxlen[16];

    if (!r)
        return;
    snprintf(maxlen, sizeof(maxlen), "%d", HSTREAM_MAXLEN);
    list_foreach(it, &s->pending)
    {
        struct pend *p = container_of(it, struct pend, link);
        const char *argv[] = {"EVAL", lua_add, "1", s->lanes[p->ep].key, maxlen, p->id, p->body};
        size_t lens[] = {4,
                         sizeof(lua_add) - 1,
                         1,
                         strlen(s->lanes[p->ep].key),
                         strlen(maxlen),
                         strlen(p->id),
                         p->len};

        if (p->sending)
            continue;
        if (redis_cmd(r, argv[3], lens[3], 7, argv, lens, on_added, p) != 0)
            break; /* full: the next tick */
        p->sending = true;
    }
}

/* Takes p (home): waits for its XADD; dropped and counted over the bound
 * or for an endpoint given up. */
static void pend_take(struct hstream *s, struct pend *p)
{
    if (atomic_load_explicit(&s->hc->ep[p->ep].disabled, memory_order_relaxed) ||
        s->npending >= HOOKS_QUEUE_MAX || s->bytes + p->len > HOOKS_QUEUE_BYTES) {
        METRIC_ADD(s->m, webhooks_dropped, 1);
        free(p);
        return;
    }
    p->s = s;
    p->sending = false;
    list_insert_tail(&s->pending, &p->link);
    s->npending++;
    s->bytes += p->len;
    METRIC_ADD(s->m, webhooks_queued, 1);
    send_pending(s);
}

static void pend_release(struct bus_msg *m)
{
    free(container_of(m, struct pend, msg));
}

static void on_msg(struct worker *w, struct bus_msg *m)
{
    struct engine *e = engine_of(w);
    struct hstream *s = e->hooks ? hooks__stream(e->hooks) : NULL;
    struct pend *p = container_of(m, struct pend, msg);

    if (!s || !s->home) {
        free(p);
        return;
    }
    pend_take(s, p);
}

void hstream_add(struct hstream *s, unsigned ep, const char *id, const void *body, size_t len)
{
    struct pend *p = xmalloc(sizeof(*p) + len + 1);

    memset(p, 0, sizeof(*p));
    p->msg.type = WORKER_MSG_HOOKS;
    p->msg.free = pend_release;
    p->ep = ep;
    snprintf(p->id, sizeof(p->id), "%s", id);
    p->len = len;
    memcpy(p->body, body, len);
    p->body[len] = '\0';
    if (s->home)
        pend_take(s, p);
    else
        bus_send(s->w->srv->bus, s->w->id, cluster_home(s->cl), &p->msg);
}

/* ---- life ---- */

static void on_tick(struct wheel_timer *t, uint64_t now)
{
    struct hstream *s = container_of(t, struct hstream, tick);

    send_pending(s);
    for (unsigned i = 0; i < s->hc->n; i++) {
        struct slane *ln = &s->lanes[i];

        if (!gone(ln) && ln->nheld && now - ln->touched >= HSTREAM_TOUCH_MS && cluster_redis(s->cl))
            touch(ln);
        lane_step(ln);
    }
    loop_timer_start(s->w->loop, &s->tick, HSTREAM_TICK_MS);
}

void hstream_register(void)
{
    worker_on_msg(WORKER_MSG_HOOKS, on_msg);
}

struct hstream *hstream_new(struct hooks_config *hc, struct worker *w, struct cluster *cl,
                            struct metrics *m)
{
    struct hstream *s = xcalloc(1, sizeof(*s));

    s->hc = hc;
    s->w = w;
    s->cl = cl;
    s->m = m;
    s->home = w->id == cluster_home(cl);
    s->rnd = (hc->node_epoch ^ time_mono_us() ^ ((uint64_t)w->id << 32)) | 1;
    list_init(&s->pending);
    wheel_timer_init(&s->tick, on_tick);
    for (unsigned i = 0; i < hc->n; i++) {
        struct slane *ln = &s->lanes[i];
        const struct hook_endpoint *ep = &hc->ep[i];
        struct buf name = {0};
        uint64_t h;

        /* An app other than the first adds its namespace: two apps may
         * share a URL, never a queue (each signs with its own secret). */
        buf_printf(&name, "%s %s%s", ep->format == WEBHOOK_PUSHER ? "pusher" : "standard",
                   ep->format == WEBHOOK_PUSHER ? ep->ns : "", ep->url);
        h = redis_fnv1a64(name.data, name.len);
        buf_release(&name);
        ln->s = s;
        ln->ep = &hc->ep[i];
        snprintf(ln->key, sizeof(ln->key), "pd:%s:{wh:%016llx}:q", cluster_app(cl),
                 (unsigned long long)h);
        snprintf(ln->cursor, sizeof(ln->cursor), "0-0");
    }
    if (s->home)
        loop_timer_start(w->loop, &s->tick, HSTREAM_TICK_MS);
    return s;
}

void hstream_free(struct hstream *s)
{
    if (!s)
        return;
    wheel_del(&s->tick);
    while (!list_empty(&s->pending))
        pend_free(s, container_of(list_first(&s->pending), struct pend, link));
    for (unsigned i = 0; i < s->hc->n; i++) {
        struct slane *ln = &s->lanes[i];

        if (ln->inflight)
            httpc_abandon(ln->inflight);
        for (unsigned j = 0; j < ln->nheld; j++)
            free(ln->held[j].body);
        buf_release(&ln->batch);
        METRIC_SUB(s->m, webhooks_queued, ln->nheld);
    }
    free(s);
}
