/* SPDX-License-Identifier: MIT */
/*
 * hooks.c - webhook delivery (hooks.h).
 *
 * A lane is one endpoint on one worker: its FIFO of messages (struct
 * hmsg: a body ready to send, the attempt it is at and when it is due),
 * the Pusher batch being filled, the request in flight and one timer that
 * fires at the earlier of the batch's deadline and the head's due time.
 * kick() starts the head when nothing is in flight; done() reads the
 * outcome, then pops, reschedules or disables.
 */
#include "hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "hooks_stream.h"
#include "list.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "ns.h"
#include "room.h"
#include "util.h"
#include "worker.h"

struct hmsg {
    struct list link;
    uint64_t due;                /* loop ms */
    unsigned attempt;            /* attempts made */
    char id[WEBHOOK_ID_MAX + 1]; /* Standard: the event id */
    size_t len;
    char body[];
};

struct lane {
    struct hooks *h;
    struct hook_endpoint *ep;
    struct list queue;          /* struct hmsg, oldest first */
    size_t n, bytes;            /* messages in it, and their bodies' bytes */
    struct webhook_batch batch; /* Pusher: events not in a message yet */
    struct wheel_timer timer;
    struct httpc_req *inflight; /* the head's attempt */
    bool disabled;              /* this lane has dropped everything */
};

struct hooks {
    struct loop *loop;
    struct metrics *m;
    uint64_t node_epoch;
    uint64_t counter;       /* event ids */
    uint64_t rnd;           /* xorshift state: jitter */
    struct hstream *stream; /* with Redis: where events go (hooks_stream.h) */
    unsigned n;
    struct lane lanes[HOOKS_ENDPOINTS_MAX];
};

/* ---- configuration ---- */

static struct hook_endpoint *add_endpoint(struct hooks_config *hc, const char *url, char *err,
                                          size_t errlen)
{
    struct hook_endpoint *ep;
    char why[160];

    if (hc->n == HOOKS_ENDPOINTS_MAX) {
        snprintf(err, errlen, "at most %d webhook endpoints", HOOKS_ENDPOINTS_MAX);
        return NULL;
    }
    if (strlen(url) >= HOOKS_URL_MAX) {
        snprintf(err, errlen, "webhook URL over %d bytes", HOOKS_URL_MAX - 1);
        return NULL;
    }
    ep = &hc->ep[hc->n];
    memset(ep, 0, sizeof(*ep));
    if (httpc_target_parse(&ep->target, url, why, sizeof(why)) < 0) {
        snprintf(err, errlen, "webhook URL \"%s\": %s", url, why);
        return NULL;
    }
    memcpy(ep->url, url, strlen(url) + 1);
    return ep;
}

int hooks_config_add_standard(struct hooks_config *hc, const char *url, const char *secret,
                              char *err, size_t errlen)
{
    struct hook_endpoint *ep = add_endpoint(hc, url, err, errlen);
    int rc;

    if (!ep)
        return -1;
    if ((rc = webhook_key_parse(&ep->key, secret)) != 0) {
        snprintf(err, errlen, "webhook-secret: %s (\"whsec_\" and the base64 of 24-64 bytes)",
                 webhook_strerror(rc));
        return -1;
    }
    ep->format = WEBHOOK_STANDARD;
    ep->timeout_ms = WEBHOOK_STANDARD_TIMEOUT_MS;
    hc->n++;
    return 0;
}

int hooks_config_add_pusher(struct hooks_config *hc, const char *url, const char *app_key,
                            const char *app_secret, const char *ns, hooks_room_name_fn *channel_of,
                            char *err, size_t errlen)
{
    struct hook_endpoint *ep = add_endpoint(hc, url, err, errlen);

    if (!ep)
        return -1;
    if (strlen(app_key) > HOOKS_SECRET_MAX || strlen(app_secret) > HOOKS_SECRET_MAX ||
        !app_key[0] || !app_secret[0]) {
        snprintf(err, errlen, "webhook: app key and secret must be 1-%d bytes", HOOKS_SECRET_MAX);
        return -1;
    }
    if (!ns_prefix_valid(ns)) {
        snprintf(err, errlen, "webhook: \"%s\" is not a namespace prefix", ns);
        return -1;
    }
    memcpy(ep->ns, ns, strlen(ns) + 1);
    ep->format = WEBHOOK_PUSHER;
    ep->timeout_ms = WEBHOOK_PUSHER_TIMEOUT_MS;
    memcpy(ep->app_key, app_key, strlen(app_key) + 1);
    memcpy(ep->app_secret, app_secret, strlen(app_secret) + 1);
    ep->channel_of = channel_of;
    hc->n++;
    return 0;
}

/* ---- the queue ---- */

static double rnd01(struct hooks *h)
{
    h->rnd ^= h->rnd << 13;
    h->rnd ^= h->rnd >> 7;
    h->rnd ^= h->rnd << 17;
    return (double)(h->rnd >> 11) / 9007199254740992.0;
}

static void kick(struct lane *ln);
static bool gone(struct lane *ln);

static void set_queued(struct hooks *h, int64_t d)
{
    METRIC_ADD(h->m, webhooks_queued, (uint64_t)d);
}

static void msg_drop(struct lane *ln, struct hmsg *msg)
{
    list_del(&msg->link);
    ln->n--;
    ln->bytes -= msg->len;
    set_queued(ln->h, -1);
    free(msg);
}

/* Appends a message of body (len bytes) with id ("" = none). */
static void enqueue(struct lane *ln, const char *id, const void *body, size_t len)
{
    struct hmsg *msg;

    if (gone(ln) || ln->n >= HOOKS_QUEUE_MAX || ln->bytes + len > HOOKS_QUEUE_BYTES) {
        METRIC_ADD(ln->h->m, webhooks_dropped, 1);
        return;
    }
    msg = xmalloc(sizeof(*msg) + len);
    msg->due = loop_now(ln->h->loop);
    msg->attempt = 0;
    snprintf(msg->id, sizeof(msg->id), "%s", id);
    msg->len = len;
    memcpy(msg->body, body, len);
    list_insert_tail(&ln->queue, &msg->link);
    ln->n++;
    ln->bytes += len;
    set_queued(ln->h, 1);
    kick(ln);
}

/* Drops everything the lane holds (counted), once. */
static void lane_drop(struct lane *ln)
{
    size_t lost = ln->n + (ln->batch.n ? 1 : 0);

    ln->disabled = true;
    if (ln->inflight) {
        httpc_cancel(ln->inflight);
        ln->inflight = NULL;
    }
    while (!list_empty(&ln->queue))
        msg_drop(ln, container_of(ln->queue.next, struct hmsg, link));
    webhook_batch_release(&ln->batch);
    wheel_del(&ln->timer);
    METRIC_ADD(ln->h->m, webhooks_dropped, lost);
}

/* Whether the endpoint was given up (by any worker); the lane drops what
 * it holds the first time it sees so. */
static bool gone(struct lane *ln)
{
    if (!ln->disabled && atomic_load_explicit(&ln->ep->disabled, memory_order_relaxed))
        lane_drop(ln);
    return ln->disabled;
}

/* The endpoint's schedule is spent, or it said it is gone: nothing more
 * goes to it, from any worker, until restart. */
static void disable(struct lane *ln, const char *why)
{
    size_t lost = ln->n;

    if (!atomic_exchange(&ln->ep->disabled, true)) {
        METRIC_ADD(ln->h->m, webhook_endpoints_disabled, 1);
        log_error("webhook", "%s disabled (%s); %zu queued messages dropped", ln->ep->url, why,
                  lost);
    }
    lane_drop(ln);
}

/* The Pusher batch becomes a message. */
static void flush_batch(struct lane *ln)
{
    struct buf body = {0};

    if (ln->batch.n == 0)
        return;
    webhook_batch_finish(&ln->batch, (uint64_t)time_wall_ms(), &body);
    enqueue(ln, "", body.data, body.len);
    buf_release(&body);
}

/* Arms the timer for the batch's deadline or the head's due time. */
static void arm(struct lane *ln)
{
    uint64_t now = loop_now(ln->h->loop), at = UINT64_MAX;

    if (ln->batch.n)
        at = ln->batch.first_ms + WEBHOOK_PUSHER_BATCH_MS;
    if (!ln->inflight && !list_empty(&ln->queue)) {
        struct hmsg *head = container_of(ln->queue.next, struct hmsg, link);

        at = head->due < at ? head->due : at;
    }
    if (at == UINT64_MAX)
        wheel_del(&ln->timer);
    else
        loop_timer_start(ln->h->loop, &ln->timer, at > now ? at - now : 0);
}

static void on_timer(struct wheel_timer *t, uint64_t now)
{
    struct lane *ln = container_of(t, struct lane, timer);

    if (webhook_batch_due(&ln->batch, now))
        flush_batch(ln);
    kick(ln);
    arm(ln);
}

/* ---- requests ---- */

static void done(struct httpc_req *r, int status, void *data);

/* The Standard Webhooks headers of one attempt of msg. */
static void standard_headers(struct lane *ln, const struct hmsg *msg, char hid[], char hts[],
                             char hsig[], size_t size)
{
    char sig[WEBHOOK_SIG_LEN + 1];
    int64_t ts = (int64_t)(time_wall_ms() / 1000);

    if (webhook_sign(&ln->ep->key, msg->id, ts, msg->body, msg->len, sig) != 0)
        sig[0] = '\0'; /* our own ids always sign: cannot happen */
    snprintf(hid, size, "webhook-id: %s", msg->id);
    snprintf(hts, size, "webhook-timestamp: %lld", (long long)ts);
    snprintf(hsig, size, "webhook-signature: %s", sig);
}

static void start(struct lane *ln, struct hmsg *msg)
{
    char a[160], b[160], c[160];
    const char *headers[4] = {a, b, NULL, NULL};

    if (ln->ep->format == WEBHOOK_PUSHER) {
        char sig[WEBHOOK_HEX_LEN + 1];

        webhook_pusher_sign(ln->ep->app_secret, msg->body, msg->len, sig);
        snprintf(a, sizeof(a), "X-Pusher-Key: %s", ln->ep->app_key);
        snprintf(b, sizeof(b), "X-Pusher-Signature: %s", sig);
    } else {
        standard_headers(ln, msg, a, b, c, sizeof(a));
        headers[2] = c;
    }
    msg->attempt++;
    ln->inflight = httpc_post(ln->h->loop, &ln->ep->target, headers, msg->body, msg->len,
                              ln->ep->timeout_ms, done, ln);
    if (!ln->inflight) /* our own headers are valid: cannot happen */
        disable(ln, "request refused by the client");
}

static void kick(struct lane *ln)
{
    struct hmsg *head;

    if (gone(ln) || ln->inflight || list_empty(&ln->queue))
        return;
    head = container_of(ln->queue.next, struct hmsg, link);
    if (head->due > loop_now(ln->h->loop)) {
        arm(ln);
        return;
    }
    start(ln, head);
}

static void done(struct httpc_req *r, int status, void *data)
{
    struct lane *ln = data;
    struct hmsg *head = container_of(ln->queue.next, struct hmsg, link);
    enum webhook_outcome o = webhook_outcome_of(ln->ep->format, status > 0 ? status : 0);
    int64_t delay;

    (void)r;
    ln->inflight = NULL;
    if (o == WEBHOOK_DELIVERED) {
        METRIC_ADD(ln->h->m, webhooks_sent, 1);
        msg_drop(ln, head);
    } else if (o == WEBHOOK_GONE) {
        disable(ln, "410 Gone");
        return;
    } else {
        METRIC_ADD(ln->h->m, webhooks_failed, 1);
        delay = webhook_next_delay_ms(ln->ep->format, head->attempt + 1, rnd01(ln->h));
        if (delay < 0) {
            char why[96];

            snprintf(why, sizeof(why), "%u attempts failed, the last: %s", head->attempt,
                     status > 0 ? "an HTTP error status" : httpc_strerror(status));
            disable(ln, why);
            return;
        }
        head->due = loop_now(ln->h->loop) + (uint64_t)delay;
        log_warnx("webhook", "%s: attempt %u failed (%d%s%s); next in %lld ms", ln->ep->url,
                  head->attempt, status, status < 0 ? ": " : "",
                  status < 0 ? httpc_strerror(status) : "", (long long)delay);
    }
    kick(ln);
    arm(ln);
}

/* ---- life ---- */

void hooks_register(void)
{
    hstream_register();
}

struct hstream *hooks__stream(struct hooks *h)
{
    return h->stream;
}

struct hooks *hooks_new(struct hooks_config *hc, struct worker *w, struct cluster *cl)
{
    unsigned worker_id = w->id;
    struct hooks *h;

    if (!hc || hc->n == 0)
        return NULL;
    h = xcalloc(1, sizeof(*h));
    h->loop = w->loop;
    h->m = &w->metrics;
    if (cl)
        h->stream = hstream_new(hc, w, cl, h->m);
    /* Distinct per node start (node_epoch) and per worker (the top byte). */
    h->node_epoch = hc->node_epoch ^ ((uint64_t)(worker_id & 0xff) << 56);
    h->rnd = (hc->node_epoch ^ time_mono_us() ^ ((uint64_t)worker_id << 32)) | 1;
    h->n = hc->n;
    for (unsigned i = 0; i < hc->n; i++) {
        struct lane *ln = &h->lanes[i];

        ln->h = h;
        ln->ep = &hc->ep[i];
        list_init(&ln->queue);
        wheel_timer_init(&ln->timer, on_timer);
    }
    return h;
}

void hooks_free(struct hooks *h)
{
    if (!h)
        return;
    for (unsigned i = 0; i < h->n; i++) {
        struct lane *ln = &h->lanes[i];

        if (ln->inflight)
            httpc_abandon(ln->inflight);
        while (!list_empty(&ln->queue))
            msg_drop(ln, container_of(ln->queue.next, struct hmsg, link));
        webhook_batch_release(&ln->batch);
        wheel_del(&ln->timer);
    }
    hstream_free(h->stream);
    free(h);
}

/* ---- events ---- */

static void pusher_event(struct lane *ln, const struct webhook_pusher_event *ev)
{
    uint64_t now = loop_now(ln->h->loop);

    if (gone(ln)) {
        METRIC_ADD(ln->h->m, webhooks_dropped, 1);
        return;
    }
    if (ln->h->stream) { /* one event an entry: the reader batches them */
        struct webhook_batch one = {0};

        if (webhook_batch_add(&one, ev, now) == 1)
            hstream_add(ln->h->stream, (unsigned)(ln - ln->h->lanes), "", one.events.data,
                        one.events.len);
        webhook_batch_release(&one);
        return;
    }
    if (webhook_batch_add(&ln->batch, ev, now) == (int)WEBHOOK_PUSHER_BATCH_MAX)
        flush_batch(ln);
    arm(ln);
}

static void standard_event(struct lane *ln, struct webhook_event *ev)
{
    char id[WEBHOOK_EVENT_ID_LEN + 1];
    struct buf body = {0};

    webhook_event_id(ln->h->node_epoch, ++ln->h->counter, id);
    ev->id = id;
    if (webhook_event_body(ev, &body) != 0)
        ; /* a kind without a body: cannot happen */
    else if (!ln->h->stream)
        enqueue(ln, id, body.data, body.len);
    else if (gone(ln))
        METRIC_ADD(ln->h->m, webhooks_dropped, 1);
    else
        hstream_add(ln->h->stream, (unsigned)(ln - ln->h->lanes), id, body.data, body.len);
    buf_release(&body);
}

void hooks_user(struct hooks *h, const char *uid, bool online, uint64_t version, int64_t time_ms)
{
    if (!h)
        return;
    for (unsigned i = 0; i < h->n; i++) {
        struct webhook_event ev = {
            .kind = online ? WEBHOOK_USER_ONLINE : WEBHOOK_USER_OFFLINE,
            .time_ms = time_ms,
            .user = uid,
            .version = version,
        };

        if (h->lanes[i].ep->format == WEBHOOK_STANDARD && ns_in(uid, ""))
            standard_event(&h->lanes[i], &ev);
    }
}

/* The channel (HOOKS_URL_MAX bytes) that ln, a Pusher endpoint, names
 * room by: false when ln is not one, room is of another app's namespace
 * (each app's endpoint hears of its own rooms only) or not reported. */
static bool pusher_channel(const struct lane *ln, const char *room, char *channel)
{
    return ln->ep->format == WEBHOOK_PUSHER && ln->ep->channel_of && ns_in(room, ln->ep->ns) &&
           ln->ep->channel_of(room, channel, HOOKS_URL_MAX);
}

/* One room change for lane ln: kind k of the Standard format, pk of
 * Pusher's; user NULL for occupied/vacated. */
static void room_change(struct lane *ln, const char *room, uint64_t epoch, uint64_t seq,
                        enum webhook_event_kind k, enum webhook_pusher_kind pk, const char *user,
                        int64_t time_ms)
{
    if (ln->ep->format == WEBHOOK_STANDARD) {
        struct webhook_event ev = {
            .kind = k,
            .time_ms = time_ms,
            .user = user,
            .room = room,
            .epoch = epoch,
            .seq = seq,
        };

        /* not a Pusher non-presence channel, nor another app's room */
        if (strncmp(room, "~p", 2) != 0 && ns_in(room, ""))
            standard_event(ln, &ev);
    } else {
        char channel[HOOKS_URL_MAX];
        struct webhook_pusher_event ev = {
            .kind = pk, .channel = channel, .user_id = user ? ns_strip(user) : NULL};

        if (pusher_channel(ln, room, channel) && strncmp(channel, "presence-", 9) == 0)
            pusher_event(ln, &ev);
    }
}

void hooks_room_member(struct hooks *h, const char *room, uint64_t epoch, uint64_t seq,
                       const char *user, bool joined, int64_t time_ms)
{
    for (unsigned i = 0; h && i < h->n; i++)
        room_change(&h->lanes[i], room, epoch, seq,
                    joined ? WEBHOOK_MEMBER_JOINED : WEBHOOK_MEMBER_LEFT,
                    joined ? WEBHOOK_MEMBER_ADDED : WEBHOOK_MEMBER_REMOVED, user, time_ms);
}

void hooks_room_occupancy(struct hooks *h, const char *room, uint64_t epoch, uint64_t seq,
                          bool occupied, int64_t time_ms)
{
    for (unsigned i = 0; h && i < h->n; i++)
        room_change(&h->lanes[i], room, epoch, seq,
                    occupied ? WEBHOOK_ROOM_OCCUPIED : WEBHOOK_ROOM_VACATED,
                    occupied ? WEBHOOK_CHANNEL_OCCUPIED : WEBHOOK_CHANNEL_VACATED, NULL, time_ms);
}

void hooks_room_delta(struct hooks *h, const struct room_delta_view *d, int64_t time_ms)
{
    const struct room_head *hd = &d->head;
    size_t before;

    if (!h)
        return;
    before = hd->count + d->leave_total - d->join_total;
    if (before == 0 && hd->count > 0)
        hooks_room_occupancy(h, hd->room, hd->epoch, hd->seq, true, time_ms);
    for (size_t j = 0; j < d->njoins; j++)
        hooks_room_member(h, hd->room, hd->epoch, hd->seq, d->joins[j].user, true, time_ms);
    for (size_t j = 0; j < d->nleaves; j++)
        hooks_room_member(h, hd->room, hd->epoch, hd->seq, d->leaves[j], false, time_ms);
    if (before > 0 && hd->count == 0)
        hooks_room_occupancy(h, hd->room, hd->epoch, hd->seq, false, time_ms);
}

void hooks_channel_occupancy(struct hooks *h, const char *room, bool occupied)
{
    for (unsigned i = 0; h && i < h->n; i++) {
        struct lane *ln = &h->lanes[i];
        char channel[HOOKS_URL_MAX];
        struct webhook_pusher_event ev = {
            .kind = occupied ? WEBHOOK_CHANNEL_OCCUPIED : WEBHOOK_CHANNEL_VACATED,
            .channel = channel,
        };

        if (pusher_channel(ln, room, channel) && strncmp(channel, "presence-", 9) != 0 &&
            channel[0] != '#')
            pusher_event(ln, &ev);
    }
}

void hooks_client_event(struct hooks *h, const char *room, const char *event, const char *data,
                        size_t data_len, const char *socket_id, const char *user)
{
    if (!h)
        return;
    for (unsigned i = 0; i < h->n; i++) {
        struct lane *ln = &h->lanes[i];
        char channel[HOOKS_URL_MAX];
        struct webhook_pusher_event ev = {
            .kind = WEBHOOK_CLIENT_EVENT,
            .channel = channel,
            .user_id = user ? ns_strip(user) : NULL,
            .event = event,
            .data = data,
            .data_len = data_len,
            .socket_id = socket_id,
        };

        if (pusher_channel(ln, room, channel))
            pusher_event(ln, &ev);
    }
}
