/* SPDX-License-Identifier: MIT */
/*
 * cluster.c - the bridge between a node's workers and its Redis home:
 * users' puts and gets, watch buckets, published views and health
 * (cluster.h). The lease and the sweep are node.c.
 *
 * A worker's request is a struct cl_msg sent over the bus to the home
 * worker; the home runs it on its Redis client and sends the answer back
 * in the same message (op CL_VIEW), to the worker that asked. A view
 * published on a bucket channel reaches the home, which sends it to the
 * worker owning the user. Every hook thus runs on a worker's own thread.
 */
#include "cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "bus.h"
#include "cluster_internal.h"
#include "contrib.h"
#include "log.h"
#include "room_wire.h"
#include "scripts.h"
#include "util.h"
#include "worker.h"

enum cl_op {
    CL_PUT = 1,   /* worker -> home: uid, data = contribution or NULL, seen */
    CL_GET,       /* worker -> home: uid */
    CL_WATCH,     /* worker -> home: uid's bucket +1 */
    CL_UNWATCH,   /* worker -> home: uid's bucket -1 */
    CL_ANNOUNCE,  /* worker -> home: uid's settings changed */
    CL_KICK_ALL,  /* worker -> home: end uid's sessions (data: "sid\nreason") everywhere */
    CL_RPUT,      /* worker -> home: room (in uid), data = ops */
    CL_RGET,      /* worker -> home: room */
    CL_REPH,      /* worker -> home: room, data = an ephemeral value to publish */
    CL_RSUB,      /* worker -> home: room's channel +1 */
    CL_RUNSUB,    /* worker -> home: room's channel -1 */
    CL_SPUT,      /* worker -> home: uid, data = "<n> <l>" or NULL (none here) */
    CL_SGET,      /* worker -> home: uid */
    CL_YIELD_ASK, /* worker -> home: uid, data = "<node epoch> <count>" */
    CL_HS_PUT,    /* worker -> home: uid, data = sid, seen = deadline */
    CL_HS_DEL,    /* worker -> home: uid, data = sid */
    CL_HS_GET,    /* worker -> home: uid, data = sid */
    CL_HS_FWD,    /* worker -> home: uid, data = "<node epoch> <sid>", up = leave */
    CL_RS_PUT,    /* worker -> home: uid, data = "<sid>\n<resume record>" */
    CL_RS_DEL,    /* worker -> home: uid, data = sid */
    CL_RS_TAKE,   /* worker -> home: uid, data = sid */
    CL_VIEW,      /* home -> owner: uid, err, data = view JSON or NULL, own */
    CL_UHOOK,     /* home -> owner: uid turned online/offline by our put; data = view JSON */
    CL_RESYNC,    /* home -> every worker: bucket */
    CL_HEALTH,    /* home -> every worker: up */
    CL_SET,       /* home -> owner: uid's settings changed elsewhere */
    CL_KICK,      /* home -> owner: another node asks to end uid's sessions (data) */
    CL_RMSG,      /* home -> room owner: room, seen = seq, data = "node\nops" */
    CL_RSTATE,    /* home -> room owner: room, err, seen = seq, data = member lines */
    CL_RHOOK,     /* home -> room owner: room, seen = seq, data = a script's hooks text */
    CL_RRESYNC,   /* home -> every worker: data = the channel's tag */
    CL_DEAD,      /* home -> every worker: data = the dead list */
    CL_SEATS,     /* home -> asker: uid, err, data = struct cluster_seat[bucket] */
    CL_YIELD,     /* home -> owner: end bucket of uid's sessions without a connection */
    CL_HSESSION,  /* home -> asker: uid, data = "sid\nnode", bucket = enum cluster_hs */
    CL_HBEAT,     /* home -> owner: uid, data = sid, up = leave */
    CL_RSESSION,  /* home -> asker: uid, data = "<sid>\n<record>", up = taken */
    CL_MOVED,     /* home -> owner: uid, data = sid, taken over by another node */
};

struct cl_msg {
    struct bus_msg msg;
    struct cluster *cl;
    uint8_t op;
    bool own, up;
    int err;
    unsigned bucket;
    uint64_t seen;
    char *data; /* owned */
    size_t len;
    char uid[PRESENCE_ID_MAX + 1];
};

/* m->data = a NUL-terminated copy of len bytes of data. */
static void msg_set_data(struct cl_msg *m, const char *data, size_t len)
{
    m->data = xmalloc(len + 1);
    memcpy(m->data, data, len);
    m->data[len] = '\0';
    m->len = len;
}

static void msg_free(struct bus_msg *m)
{
    struct cl_msg *cm = (struct cl_msg *)m;

    free(cm->data);
    free(cm);
}

static struct cl_msg *msg_new(struct cluster *cl, enum cl_op op, const char *uid)
{
    struct cl_msg *m = xcalloc(1, sizeof(*m));

    m->msg.type = WORKER_MSG_CLUSTER;
    m->msg.free = msg_free;
    m->cl = cl;
    m->op = (uint8_t)op;
    if (uid) {
        size_t n = strnlen(uid, PRESENCE_ID_MAX);
        memcpy(m->uid, uid, n);
    }
    return m;
}

/* ---- names ---- */

/* Whether node (n bytes) is this node's "<node-id>.<epoch>". */
static bool is_self(const struct cluster *cl, const char *node, size_t n)
{
    return n == strlen(cl->self) && memcmp(node, cl->self, n) == 0;
}

static void tag_hex(const char *id, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)redis_fnv1a64(id, strlen(id)));
}

void cl__user_keys(const struct cluster *cl, const char *uid, char s[CLUSTER_KEY_MAX],
                   char a[CLUSTER_KEY_MAX])
{
    char h[17];

    tag_hex(uid, h);
    snprintf(s, CLUSTER_KEY_MAX, "pd:%s:{u:%s}:s", cl->cfg.app, h);
    snprintf(a, CLUSTER_KEY_MAX, "pd:%s:{u:%s}:a", cl->cfg.app, h);
}

void cl__seats_key(const struct cluster *cl, const char *uid, char out[CLUSTER_KEY_MAX])
{
    char h[17];

    tag_hex(uid, h);
    snprintf(out, CLUSTER_KEY_MAX, "pd:%s:{u:%s}:c", cl->cfg.app, h);
}

static void hs_key(const struct cluster *cl, const char *uid, char out[CLUSTER_KEY_MAX])
{
    char h[17];

    tag_hex(uid, h);
    snprintf(out, CLUSTER_KEY_MAX, "pd:%s:{u:%s}:h", cl->cfg.app, h);
}

/* uid's resume records: session id -> record (contrib.h). */
static void rs_key(const struct cluster *cl, const char *uid, char out[CLUSTER_KEY_MAX])
{
    char h[17];

    tag_hex(uid, h);
    snprintf(out, CLUSTER_KEY_MAX, "pd:%s:{u:%s}:r", cl->cfg.app, h);
}

void cl__node_index(const struct cluster *cl, const char *member, char out[CLUSTER_KEY_MAX])
{
    char h[17];

    tag_hex(member, h);
    snprintf(out, CLUSTER_KEY_MAX, "pd:%s:{n:%s}:u:%s", cl->cfg.app, h, member);
}

unsigned cluster_bucket_of(const char *uid)
{
    return (unsigned)(redis_fnv1a64(uid, strlen(uid)) % CLUSTER_BUCKETS);
}

/* The control channel every node subscribes to: "<node>.<epoch> S <uid>"
 * (uid's settings changed) and "<node>.<epoch> K <uid>\n<sid>\n<reason>"
 * (end uid's sessions: sid, or all when empty). */
static int control_channel(const struct cluster *cl, char out[CLUSTER_KEY_MAX])
{
    return snprintf(out, CLUSTER_KEY_MAX, "pd:%s:{c}:ctl", cl->cfg.app);
}

void cluster_room_tag(const char *room, char out[17])
{
    tag_hex(room, out);
}

/* The room's channel "pd:<app>:{r:<h>}". */
static void room_channel(const struct cluster *cl, const char *room, char ch[CLUSTER_KEY_MAX])
{
    char h[17];

    tag_hex(room, h);
    snprintf(ch, CLUSTER_KEY_MAX, "pd:%s:{r:%s}", cl->cfg.app, h);
}

/* The room's channel and its keys: members (":m") and seq (":q"). */
static void room_names(const struct cluster *cl, const char *room, char ch[CLUSTER_KEY_MAX],
                       char m[CLUSTER_KEY_MAX], char q[CLUSTER_KEY_MAX], char c[CLUSTER_KEY_MAX])
{
    char h[17];

    tag_hex(room, h);
    snprintf(ch, CLUSTER_KEY_MAX, "pd:%s:{r:%s}", cl->cfg.app, h);
    snprintf(m, CLUSTER_KEY_MAX, "pd:%s:{r:%s}:m", cl->cfg.app, h);
    snprintf(q, CLUSTER_KEY_MAX, "pd:%s:{r:%s}:q", cl->cfg.app, h);
    snprintf(c, CLUSTER_KEY_MAX, "pd:%s:{r:%s}:c", cl->cfg.app, h);
}

/* The tag of a room channel of ours ("pd:<app>:{r:<16 hex>}"), or NULL. */
static const char *channel_room_tag(const struct cluster *cl, const char *ch, size_t len)
{
    char pre[CLUSTER_KEY_MAX];
    int n = snprintf(pre, sizeof(pre), "pd:%s:{r:", cl->cfg.app);

    if (len != (size_t)n + 17 || memcmp(ch, pre, (size_t)n) != 0 || ch[len - 1] != '}')
        return NULL;
    return ch + n;
}

static int bucket_channel(const struct cluster *cl, unsigned b, char out[CLUSTER_KEY_MAX])
{
    return snprintf(out, CLUSTER_KEY_MAX, "pd:%s:{w:%u}", cl->cfg.app, b);
}

/* The bucket a channel of ours names, or -1. */
static int channel_bucket(const struct cluster *cl, const char *ch, size_t len)
{
    char pre[CLUSTER_KEY_MAX];
    int n = snprintf(pre, sizeof(pre), "pd:%s:{w:", cl->cfg.app);
    unsigned b = 0;
    size_t i = (size_t)n;

    if (len <= i + 1 || memcmp(ch, pre, i) != 0 || ch[len - 1] != '}')
        return -1;
    for (; i < len - 1; i++) {
        if (ch[i] < '0' || ch[i] > '9' || b >= CLUSTER_BUCKETS)
            return -1;
        b = b * 10 + (unsigned)(ch[i] - '0');
    }
    return b < CLUSTER_BUCKETS ? (int)b : -1;
}

/* ---- home -> workers ---- */

static void send_to(struct cluster *cl, unsigned to, struct cl_msg *m)
{
    bus_send(cl->bus, cl->cfg.home, to, &m->msg);
}

static void broadcast(struct cluster *cl, enum cl_op op, unsigned bucket, bool up)
{
    for (unsigned w = 0; w < cl->nworkers; w++) {
        struct cl_msg *m = msg_new(cl, op, NULL);
        m->bucket = bucket;
        m->up = up;
        send_to(cl, w, m);
    }
}

static void broadcast_data(struct cluster *cl, enum cl_op op, const char *data, size_t len)
{
    for (unsigned w = 0; w < cl->nworkers; w++) {
        struct cl_msg *m = msg_new(cl, op, NULL);
        msg_set_data(m, data, len);
        send_to(cl, w, m);
    }
}

void cl__dead_changed(struct cluster *cl, const char *also)
{
    struct buf b = {0};

    buf_printf(&b, "%s%s%s", cl__dead_list(cl), cl__dead_list(cl)[0] && also[0] ? "," : "", also);
    broadcast_data(cl, CL_DEAD, b.len ? b.data : "", b.len);
    buf_release(&b);
}

void cl__reassert(struct cluster *cl)
{
    broadcast(cl, CL_HEALTH, 0, true);
}

static void send_view(struct cluster *cl, unsigned to, const char *uid, int err, const char *json,
                      size_t len, bool own)
{
    struct cl_msg *m = msg_new(cl, CL_VIEW, uid);

    m->err = err;
    m->own = own;
    if (json)
        msg_set_data(m, json, len);
    send_to(cl, to, m);
}

/* ---- puts and gets (home) ---- */

struct cl_req {
    struct cluster *cl;
    int reply_to;      /* worker, or -1 */
    enum cl_hook hook; /* user puts: what their transition tells the webhooks */
    bool get;          /* a put made by a read (home_get): answered as a get's view */
    char uid[PRESENCE_ID_MAX + 1];
};

static struct cl_req *req_new(struct cluster *cl, const char *uid, int reply_to)
{
    struct cl_req *q = xcalloc(1, sizeof(*q));
    size_t n = strnlen(uid, PRESENCE_ID_MAX);

    q->cl = cl;
    q->reply_to = reply_to;
    memcpy(q->uid, uid, n);
    return q;
}

static void publish_view(struct cluster *cl, const char *uid, const char *v, size_t len)
{
    char ch[CLUSTER_KEY_MAX];
    int n = bucket_channel(cl, cluster_bucket_of(uid), ch);

    redis_publish(cl->r, ch, (size_t)n, v, len, NULL, NULL);
}

/* uid turned online or offline by this node's put (scripts.h): the view
 * goes to the worker that owns uid here, for its webhooks. */
static void send_flip(struct cluster *cl, unsigned to, const char *uid, const char *json,
                      size_t len, bool visible)
{
    struct cl_msg *m = msg_new(cl, CL_UHOOK, uid);

    m->up = visible;
    msg_set_data(m, json, len);
    send_to(cl, to, m);
}

static void put_done(void *ctx, const redisReply *r, int err)
{
    struct cl_req *q = ctx;
    struct cluster *cl = q->cl;
    const redisReply *v = NULL;
    bool changed = false, flip = false;

    if (!err && r->type == REDIS_REPLY_ARRAY && (r->elements == 2 || r->elements == 3) &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_STRING) {
        changed = r->element[0]->integer == 1;
        v = r->element[1];
        flip = r->elements == 3 && r->element[2]->type == REDIS_REPLY_INTEGER &&
               r->element[2]->integer == 1;
    } else if (!err) {
        log_warnx("cluster", "user script: unexpected reply%s%s",
                  r->type == REDIS_REPLY_ERROR ? ": " : "",
                  r->type == REDIS_REPLY_ERROR ? r->str : "");
        err = REDIS_E_PROTO;
    }
    log_debug("cluster", "put %s: err %d changed %d %.*s", q->uid, err, changed,
              v ? (int)v->len : 0, v ? v->str : "");
    if (err != REDIS_E_CLOSED) {
        if (v && changed)
            publish_view(cl, q->uid, v->str, v->len);
        if (v && changed && flip && q->hook != CL_HOOK_NONE) /* the one producer */
            send_flip(cl,
                      q->reply_to >= 0 ? (unsigned)q->reply_to
                                       : bus_route(cl->bus, q->uid, strlen(q->uid)),
                      q->uid, v->str, v->len, q->hook == CL_HOOK_VISIBLE);
        if (q->reply_to >= 0)
            send_view(cl, (unsigned)q->reply_to, q->uid, err, v ? v->str : NULL, v ? v->len : 0,
                      !q->get);
    }
    free(q);
}

/* cl__put(), and get: the answer goes to reply_to as a read's. */
static void put_eval(struct cluster *cl, const char *uid, const char *field, const char *contrib,
                     uint64_t seen, int reply_to, enum cl_hook hook, bool get)
{
    char ks[CLUSTER_KEY_MAX], ka[CLUSTER_KEY_MAX], seen_s[24], keep[24];
    const char *keys[2] = {ks, ka};
    size_t kl[2];
    const char *dead = cl__dead_list(cl);
    const char *args[7] = {
        uid,  field, contrib ? contrib : "", seen_s, presence_policy_name(cl->cfg.policy),
        dead, keep};
    size_t al[7];
    struct cl_req *q = req_new(cl, uid, reply_to);

    q->hook = hook;
    q->get = get;
    cl__user_keys(cl, uid, ks, ka);
    kl[0] = strlen(ks);
    kl[1] = strlen(ka);
    snprintf(seen_s, sizeof(seen_s), "%llu", (unsigned long long)seen);
    snprintf(keep, sizeof(keep), "%llu", (unsigned long long)CLUSTER_RETAIN_MS);
    for (int i = 0; i < 7; i++)
        al[i] = strlen(args[i]);
    if (redis_eval(cl->r, cl->s_put, 2, keys, kl, 7, args, al, put_done, q) != 0)
        put_done(q, NULL, REDIS_E_FULL);
}

void cl__put(struct cluster *cl, const char *uid, const char *field, const char *contrib,
             uint64_t seen, int reply_to, enum cl_hook hook)
{
    put_eval(cl, uid, field, contrib, seen, reply_to, hook, false);
}

/* The node index: which users this epoch has contributions for (what a
 * sweep of this epoch ends). */
static void index_update(struct cluster *cl, const char *uid, bool add)
{
    char k[CLUSTER_KEY_MAX];
    const char *argv[3] = {add ? "SADD" : "SREM", k, uid};
    size_t len[3];

    cl__node_index(cl, cl->self, k);
    for (int i = 0; i < 3; i++)
        len[i] = strlen(argv[i]);
    redis_cmd(cl->r, k, len[1], 3, argv, len, NULL, NULL);
}

static void get_done(void *ctx, const redisReply *r, int err)
{
    struct cl_req *q = ctx;
    bool str = !err && r->type == REDIS_REPLY_STRING;

    if (!err && !str && r->type != REDIS_REPLY_NIL)
        err = REDIS_E_PROTO;
    log_debug("cluster", "get %s: err %d %.*s", q->uid, err, str ? (int)r->len : 0,
              str ? r->str : "");
    if (err != REDIS_E_CLOSED)
        send_view(q->cl, (unsigned)q->reply_to, q->uid, err, str ? r->str : NULL, str ? r->len : 0,
                  false);
    free(q);
}

/* The answer of SCRIPT_USER_READ: the view, or the dead epoch whose
 * field the user still has, which this read drops (the put merges what
 * is left, stores and publishes it when it changed, and is the webhook's
 * one producer when the user went offline with it). */
static void read_done(void *ctx, const redisReply *r, int err)
{
    struct cl_req *q = ctx;
    struct cluster *cl = q->cl;
    const redisReply *x = !err && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                                  r->elements <= 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
                                  (r->elements == 1 || r->element[1]->type == REDIS_REPLY_STRING)
                              ? r->element[r->elements - 1]
                              : NULL;

    if (!err && !x)
        err = REDIS_E_PROTO;
    if (err == REDIS_E_CLOSED) {
        free(q);
        return;
    }
    if (!err && r->element[0]->integer == 1 && r->elements == 2) {
        log_debug("cluster", "read %s: drops dead %s", q->uid, x->str);
        put_eval(cl, q->uid, x->str, NULL, cl__dead_seen(cl, x->str), q->reply_to, CL_HOOK_ASK,
                 true);
    } else {
        bool v = !err && r->elements == 2;
        send_view(cl, (unsigned)q->reply_to, q->uid, err, v ? x->str : NULL, v ? x->len : 0, false);
    }
    free(q);
}

/* Reads uid's view. While some epoch is dead (past its lease and grace:
 * what the sweep goes by) a reader does not show its contribution, swept
 * or not: the read script says whether the user still has that epoch's
 * field, and the read then drops it itself (read_done()). */
static void home_get(struct cluster *cl, const char *uid, unsigned from)
{
    char ks[CLUSTER_KEY_MAX], ka[CLUSTER_KEY_MAX];
    const char *argv[3] = {"HGET", ka, "v"};
    size_t len[3];
    struct cl_req *q = req_new(cl, uid, (int)from);

    cl__user_keys(cl, uid, ks, ka);
    if (cl__dead_list(cl)[0]) {
        const char *keys[2] = {ks, ka}, *args[1] = {cl__dead_list(cl)};
        size_t kl[2] = {strlen(ks), strlen(ka)}, al[1] = {strlen(args[0])};
        if (redis_eval(cl->r, cl->s_uread, 2, keys, kl, 1, args, al, read_done, q) != 0)
            read_done(q, NULL, REDIS_E_FULL);
        return;
    }
    len[0] = 4;
    len[1] = strlen(ka);
    len[2] = 1;
    if (redis_cmd(cl->r, ka, len[1], 3, argv, len, get_done, q) != 0)
        get_done(q, NULL, REDIS_E_FULL);
}

static void home_watch(struct cluster *cl, const char *uid, bool on)
{
    char ch[CLUSTER_KEY_MAX];
    int n = bucket_channel(cl, cluster_bucket_of(uid), ch);

    if (on)
        redis_sub(cl->r, ch, (size_t)n);
    else
        redis_unsub(cl->r, ch, (size_t)n);
}

/* ---- rooms (home) ---- */

/* ---- the session cap (home) ---- */

static void home_seats_put(struct cluster *cl, const struct cl_msg *m)
{
    char k[CLUSTER_KEY_MAX];
    const char *argv[4] = {m->data ? "HSET" : "HDEL", k, cl->self, m->data};
    const char *exp[3] = {"PEXPIRE", k, "86400000"};
    size_t len[4], elen[3];

    cl__seats_key(cl, m->uid, k);
    for (int i = 0; i < 4; i++)
        len[i] = argv[i] ? strlen(argv[i]) : 0;
    for (int i = 0; i < 3; i++)
        elen[i] = strlen(exp[i]);
    redis_cmd(cl->r, k, len[1], m->data ? 4 : 3, argv, len, NULL, NULL);
    if (m->data)
        redis_cmd(cl->r, k, len[1], 3, exp, elen, NULL, NULL);
}

/* The seats of reply r (field, value pairs) on other epochs that are not
 * dead. A new node may not be in the last lease reply yet, so "not dead"
 * rather than "live": a swept epoch's fields were deleted by its sweep. */
static unsigned seats_collect(struct cluster *cl, const redisReply *r, struct cluster_seat *out)
{
    unsigned n = 0;

    for (size_t i = 0; i + 1 < r->elements && n < CLUSTER_SEATS_MAX; i += 2) {
        const redisReply *f = r->element[i], *v = r->element[i + 1];
        struct cluster_seat *st = &out[n];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
            f->len >= sizeof(st->node) || is_self(cl, f->str, f->len) ||
            cl__is_dead(cl, f->str, f->len) ||
            contrib_seats_parse(v->str, v->len, &st->sessions, &st->live) != 0)
            continue; /* this node's own, a dead epoch's, or not one */
        memcpy(st->node, f->str, f->len);
        st->node[f->len] = '\0';
        n++;
    }
    return n;
}

static void seats_done(void *ctx, const redisReply *r, int err)
{
    struct cl_req *q = ctx;
    struct cl_msg *m;
    struct cluster_seat *seats;

    if (err == REDIS_E_CLOSED) {
        free(q);
        return;
    }
    if (!err && r->type != REDIS_REPLY_ARRAY)
        err = REDIS_E_PROTO;
    m = msg_new(q->cl, CL_SEATS, q->uid);
    m->err = err;
    if (!err) {
        seats = xcalloc(CLUSTER_SEATS_MAX, sizeof(*seats));
        m->bucket = seats_collect(q->cl, r, seats);
        m->data = (char *)seats;
    }
    log_debug("cluster", "seats of %s: err %d, %u other epochs", q->uid, err, m->bucket);
    send_to(q->cl, (unsigned)q->reply_to, m);
    free(q);
}

static void home_seats_get(struct cluster *cl, const struct cl_msg *m)
{
    char k[CLUSTER_KEY_MAX];
    const char *argv[2] = {"HGETALL", k};
    size_t len[2];
    struct cl_req *q = req_new(cl, m->uid, (int)m->msg.from);

    cl__seats_key(cl, m->uid, k);
    len[0] = 7;
    len[1] = strlen(k);
    if (redis_cmd(cl->r, k, len[1], 2, argv, len, seats_done, q) != 0)
        seats_done(q, NULL, REDIS_E_FULL);
}

/* ---- socketless HTTP sessions (home) ---- */

static void home_hs_put(struct cluster *cl, const struct cl_msg *m)
{
    char k[CLUSTER_KEY_MAX], v[CLUSTER_SELF_MAX + 24];
    const char *set[4] = {"HSET", k, m->data, v}, *exp[3] = {"PEXPIRE", k, "86400000"};
    size_t len[4], elen[3];

    hs_key(cl, m->uid, k);
    snprintf(v, sizeof(v), "%s %llu", cl->self, (unsigned long long)m->seen);
    for (int i = 0; i < 4; i++)
        len[i] = strlen(set[i]);
    for (int i = 0; i < 3; i++)
        elen[i] = strlen(exp[i]);
    redis_cmd(cl->r, k, len[1], 4, set, len, NULL, NULL);
    redis_cmd(cl->r, k, len[1], 3, exp, elen, NULL, NULL);
}

static void home_hs_del(struct cluster *cl, const struct cl_msg *m)
{
    char k[CLUSTER_KEY_MAX];
    const char *argv[3] = {"HDEL", k, m->data};
    size_t len[3];

    hs_key(cl, m->uid, k);
    for (int i = 0; i < 3; i++)
        len[i] = strlen(argv[i]);
    redis_cmd(cl->r, k, len[1], 3, argv, len, NULL, NULL);
}

struct hs_req {
    struct cluster *cl;
    unsigned reply_to;
    char uid[PRESENCE_ID_MAX + 1];
    char sid[PRESENCE_ID_MAX + 1];
};

/* Who holds the session a record (r: HGET's reply) names. */
static enum cluster_hs hs_state(struct cluster *cl, const redisReply *r, size_t *node_len)
{
    uint64_t deadline;

    if (!r || r->type != REDIS_REPLY_STRING ||
        contrib_hs_parse(r->str, r->len, node_len, &deadline) != 0)
        return CLUSTER_HS_NONE;
    /* This node's own: the engine would have found it; a passed deadline:
     * ended, whoever held it. */
    if (is_self(cl, r->str, *node_len) || deadline <= time_wall_ms())
        return CLUSTER_HS_NONE;
    /* A holder whose lease expired, even in its grace: taking the session
     * over now, before the holder is swept, is what keeps its user from
     * going offline for the node's death. */
    return cl__lease_expired(cl, r->str, *node_len) ? CLUSTER_HS_ORPHAN : CLUSTER_HS_OWNED;
}

static void hs_done(void *ctx, const redisReply *r, int err)
{
    struct hs_req *q = ctx;
    struct cl_msg *m;
    size_t nl = 0;
    enum cluster_hs st;
    struct buf b = {0};

    if (err == REDIS_E_CLOSED) {
        free(q);
        return;
    }
    st = err ? CLUSTER_HS_NONE : hs_state(q->cl, r, &nl);
    buf_printf(&b, "%s\n%.*s", q->sid, st == CLUSTER_HS_NONE ? 0 : (int)nl,
               st == CLUSTER_HS_NONE ? "" : r->str);
    log_debug("cluster", "http session %s of %s: %d %s", q->sid, q->uid, (int)st,
              strchr(b.data, '\n') + 1);
    m = msg_new(q->cl, CL_HSESSION, q->uid);
    m->bucket = (unsigned)st;
    m->data = b.data;
    m->len = b.len;
    send_to(q->cl, q->reply_to, m);
    free(q);
}

static void home_hs_get(struct cluster *cl, const struct cl_msg *m)
{
    char k[CLUSTER_KEY_MAX];
    const char *argv[3] = {"HGET", k, m->data};
    size_t len[3];
    struct hs_req *q = xcalloc(1, sizeof(*q));

    q->cl = cl;
    q->reply_to = m->msg.from;
    memcpy(q->uid, m->uid, sizeof(q->uid));
    snprintf(q->sid, sizeof(q->sid), "%s", m->data);
    hs_key(cl, m->uid, k);
    for (int i = 0; i < 3; i++)
        len[i] = strlen(argv[i]);
    if (redis_cmd(cl->r, k, len[1], 3, argv, len, hs_done, q) != 0)
        hs_done(q, NULL, REDIS_E_FULL);
}

/* ---- resume across nodes (home) ---- */

/* The record comes without its holder's name (the worker cannot read
 * cl->self, which the home may change): this node's epoch goes first. */
static void home_rs_put(struct cluster *cl, const struct cl_msg *m)
{
    char k[CLUSTER_KEY_MAX];
    const char *nl = strchr(m->data, '\n');
    struct buf rec = {0};
    const char *set[4] = {"HSET", k, m->data, NULL}, *exp[3] = {"PEXPIRE", k, "86400000"};
    size_t len[4] = {4, 0, (size_t)(nl - m->data), 0}, elen[3];

    buf_printf(&rec, "%s%s", cl->self, nl + 1);
    set[3] = rec.data;
    len[3] = rec.len;
    rs_key(cl, m->uid, k);
    len[1] = strlen(k);
    for (int i = 0; i < 3; i++)
        elen[i] = strlen(exp[i]);
    redis_cmd(cl->r, k, len[1], 4, set, len, NULL, NULL);
    redis_cmd(cl->r, k, len[1], 3, exp, elen, NULL, NULL);
    buf_release(&rec);
}

static void home_rs_del(struct cluster *cl, const struct cl_msg *m)
{
    char k[CLUSTER_KEY_MAX];
    const char *argv[3] = {"HDEL", k, m->data};
    size_t len[3];

    rs_key(cl, m->uid, k);
    for (int i = 0; i < 3; i++)
        len[i] = strlen(argv[i]);
    redis_cmd(cl->r, k, len[1], 3, argv, len, NULL, NULL);
}

/* Publishes "<self> <op> <uid>\n<text>" on the control channel. */
static void publish_control(struct cluster *cl, char op, const char *uid, const char *text)
{
    char ch[CLUSTER_KEY_MAX];
    int n = control_channel(cl, ch);
    struct buf b = {0};

    buf_printf(&b, "%s %c %s\n%s", cl->self, op, uid, text);
    redis_publish(cl->r, ch, (size_t)n, b.data, b.len, NULL, NULL);
    buf_release(&b);
}

static void take_done(void *ctx, const redisReply *r, int err)
{
    struct hs_req *q = ctx;
    struct cl_msg *m;
    struct buf b = {0};
    bool taken = !err && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                 r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 1 &&
                 r->element[1]->type == REDIS_REPLY_STRING;
    const char *sp = taken ? memchr(r->element[1]->str, ' ', r->element[1]->len) : NULL;

    if (err == REDIS_E_CLOSED) {
        free(q);
        return;
    }
    buf_printf(&b, "%s\n", q->sid);
    if (taken)
        buf_append(&b, r->element[1]->str, r->element[1]->len);
    buf_append(&b, "", 1); /* NUL-terminated, not counted */
    b.len--;
    log_debug("cluster", "take of %s's session %s: %s", q->uid, q->sid, taken ? "taken" : "none");
    if (taken) /* the contribution may be this epoch's now: its sweep must find it */
        index_update(q->cl, q->uid, true);
    if (taken && sp) { /* the holder drops its copy */
        struct buf t = {0};
        buf_printf(&t, "%.*s %s", (int)(sp - r->element[1]->str), r->element[1]->str, q->sid);
        publish_control(q->cl, 'M', q->uid, t.data);
        buf_release(&t);
    }
    m = msg_new(q->cl, CL_RSESSION, q->uid);
    m->up = taken;
    m->data = b.data;
    m->len = b.len;
    send_to(q->cl, q->reply_to, m);
    free(q);
}

static void home_rs_take(struct cluster *cl, const struct cl_msg *m)
{
    char ks[CLUSTER_KEY_MAX], ka[CLUSTER_KEY_MAX], kr[CLUSTER_KEY_MAX];
    const char *keys[2] = {ks, kr}, *args[2] = {m->data, cl->self};
    size_t kl[2], al[2];
    struct hs_req *q = xcalloc(1, sizeof(*q));

    q->cl = cl;
    q->reply_to = m->msg.from;
    memcpy(q->uid, m->uid, sizeof(q->uid));
    snprintf(q->sid, sizeof(q->sid), "%s", m->data);
    cl__user_keys(cl, m->uid, ks, ka);
    rs_key(cl, m->uid, kr);
    kl[0] = strlen(ks);
    kl[1] = strlen(kr);
    al[0] = strlen(args[0]);
    al[1] = strlen(args[1]);
    if (redis_eval(cl->r, cl->s_take, 2, keys, kl, 2, args, al, take_done, q) != 0)
        take_done(q, NULL, REDIS_E_FULL);
}

static void room_eval(struct cluster *cl, const char *room, int script, int argc, const char **args,
                      redis_reply_cb *cb, struct cl_req *q)
{
    char ch[CLUSTER_KEY_MAX], km[CLUSTER_KEY_MAX], kq[CLUSTER_KEY_MAX], kc[CLUSTER_KEY_MAX];
    const char *keys[3] = {km, kq, kc};
    size_t kl[3], al[4];

    room_names(cl, room, ch, km, kq, kc);
    kl[0] = strlen(km);
    kl[1] = strlen(kq);
    kl[2] = strlen(kc);
    if (script == cl->s_rput)
        args[2] = ch;
    for (int i = 0; i < argc; i++)
        al[i] = strlen(args[i]);
    if (redis_eval(cl->r, script, 3, keys, kl, argc, args, al, cb, q) != 0 && cb)
        cb(q, NULL, REDIS_E_FULL);
}

/* A room script's hooks text (scripts.h) goes to the worker that ran it
 * when it holds a transition: a first or last member, or the count
 * crossing zero. */
static void send_hooks(struct cluster *cl, const struct cl_req *q, uint64_t seq,
                       const redisReply *h)
{
    unsigned long long ep, before, after;
    const char *nl;
    struct cl_msg *m;

    if (q->reply_to < 0 || h->type != REDIS_REPLY_STRING ||
        sscanf(h->str, "%llu %llu %llu", &ep, &before, &after) != 3 ||
        !(nl = memchr(h->str, '\n', h->len)))
        return;
    if ((size_t)(nl + 1 - h->str) == h->len && (before == 0) == (after == 0))
        return; /* nothing to report */
    m = msg_new(cl, CL_RHOOK, q->uid);
    m->seen = seq;
    msg_set_data(m, h->str, h->len);
    send_to(cl, (unsigned)q->reply_to, m);
}

static void rput_done(void *ctx, const redisReply *r, int err)
{
    struct cl_req *q = ctx;

    if (!err && (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
                 r->element[0]->type != REDIS_REPLY_INTEGER))
        err = REDIS_E_PROTO;
    if (err)
        log_debug("cluster", "room put %s failed: %d", q->uid, err);
    else
        send_hooks(q->cl, q, (uint64_t)r->element[0]->integer, r->element[1]);
    /* A failed put is repaired by the owner on health (it puts all again);
     * the message of a successful one is its answer. */
    free(q);
}

static void home_room_put(struct cluster *cl, const struct cl_msg *m)
{
    const char *args[4] = {cl->self, m->uid, NULL, m->data};

    room_eval(cl, m->uid, cl->s_rput, 4, args, rput_done, req_new(cl, m->uid, (int)m->msg.from));
}

/* The Redis ms of node epoch node's last write of the room (its "@"
 * field in all), 0 when none. */
static uint64_t wrote_at(const char *node, size_t n, const redisReply *all)
{
    for (size_t i = 2; i + 1 < all->elements; i += 2) {
        const redisReply *f = all->element[i];
        if (f->len == n + 1 && f->str[0] == '@' && memcmp(f->str + 1, node, n) == 0)
            return strtoull(all->element[i + 1]->str, NULL, 10);
    }
    return 0;
}

/* Whether another epoch of node's node id wrote the room later (a node
 * has one epoch at a time: the later one is the live one). */
static bool superseded(const char *node, size_t n, const redisReply *all)
{
    const char *dot = memrchr(node, '.', n);
    size_t id = dot ? (size_t)(dot - node) : n;
    uint64_t mine = wrote_at(node, n, all);

    for (size_t i = 2; i + 1 < all->elements; i += 2) {
        const redisReply *f = all->element[i];
        if (f->str[0] == '@' && f->len > id + 1 && memcmp(f->str + 1, node, id) == 0 &&
            f->str[1 + id] == '.' && (f->len - 1 != n || memcmp(f->str + 1, node, n) != 0) &&
            !memchr(f->str + 2 + id, '.', f->len - 2 - id) &&
            strtoull(all->element[i + 1]->str, NULL, 10) > mine)
            return true;
    }
    return false;
}

/* Whether a field's node epoch is to be shown: this node's own fields are
 * its local state, not news; an epoch that is neither live nor wrote in
 * the last lease (a new node not in the last lease reply yet) is gone, and
 * so is one whose node wrote the room later under another epoch. */
static bool field_live(struct cluster *cl, const char *node, size_t n, const redisReply *all,
                       uint64_t now)
{
    if (is_self(cl, node, n) || superseded(node, n, all))
        return false;
    if (cl__is_live(cl, node, n))
        return true;
    return wrote_at(node, n, all) + cl->cfg.lease_ms > now;
}

static void rget_done(void *ctx, const redisReply *r, int err)
{
    struct cl_req *q = ctx;
    struct cluster *cl = q->cl;
    struct cl_msg *m;
    struct buf b = {0};
    uint64_t now;

    if (err == REDIS_E_CLOSED) {
        free(q);
        return;
    }
    if (!err && (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements % 2 != 0))
        err = REDIS_E_PROTO;
    for (size_t i = 0; !err && i < r->elements; i++)
        if (r->element[i]->type != REDIS_REPLY_STRING)
            err = REDIS_E_PROTO;
    m = msg_new(cl, CL_RSTATE, q->uid);
    m->err = err;
    if (!err) {
        m->seen = strtoull(r->element[0]->str, NULL, 10);
        now = strtoull(r->element[1]->str, NULL, 10);
        for (size_t i = 2; i + 1 < r->elements; i += 2) {
            const redisReply *f = r->element[i];
            const char *sp = memchr(f->str, ' ', f->len);
            if (f->len == 1 && f->str[0] == '#') /* the hooks of the drop (scripts.h) */
                send_hooks(cl, q, m->seen, r->element[i + 1]);
            if (f->str[0] == '@' || !sp || !field_live(cl, f->str, (size_t)(sp - f->str), r, now))
                continue;
            buf_printf(&b, "%s %s\n", f->str, r->element[i + 1]->str);
        }
        buf_append(&b, "", 1);
        m->data = b.data;
        m->len = b.len - 1;
    }
    send_to(cl, (unsigned)q->reply_to, m);
    free(q);
}

static void home_room_get(struct cluster *cl, const struct cl_msg *m)
{
    const char *args[1] = {cl__dead_list(cl)};

    room_eval(cl, m->uid, cl->s_rget, 1, args, rget_done, req_new(cl, m->uid, (int)m->msg.from));
}

static void home_room_publish(struct cluster *cl, const struct cl_msg *m)
{
    char ch[CLUSTER_KEY_MAX];
    struct buf b = {0};

    room_channel(cl, m->uid, ch);
    buf_printf(&b, "0 %s %s\n", cl->self, m->uid);
    buf_append(&b, m->data, m->len);
    redis_publish(cl->r, ch, strlen(ch), b.data, b.len, NULL, NULL);
    buf_release(&b);
}

static void home_room_sub(struct cluster *cl, const char *room, bool on)
{
    char ch[CLUSTER_KEY_MAX];

    room_channel(cl, room, ch);
    if (on)
        redis_sub(cl->r, ch, strlen(ch));
    else
        redis_unsub(cl->r, ch, strlen(ch));
}

/* ---- Redis events (home) ---- */

static void on_shard(void *ctx, unsigned shard, bool up)
{
    struct cluster *cl = ctx;
    bool all = redis_all_up(cl->r);

    log_info("cluster", "redis shard %u %s", shard, up ? "up" : "down");
    if (atomic_exchange(&cl->degraded, !all) != !all)
        broadcast(cl, CL_HEALTH, 0, all);
}

static void on_subscribed(void *ctx, const char *ch, size_t len)
{
    struct cluster *cl = ctx;
    int b = channel_bucket(cl, ch, len);

    const char *tag = channel_room_tag(cl, ch, len);

    log_debug("cluster", "subscribed %.*s", (int)len, ch);
    if (b >= 0)
        broadcast(cl, CL_RESYNC, (unsigned)b, true);
    if (tag)
        broadcast_data(cl, CL_RRESYNC, tag, 16);
}

/* A control message for one node, "<op> <uid>\n<node epoch> <arg>": to
 * uid's owner when this node is the one named. Y: arg is how many
 * sessions without a connection to end; H, E: arg is the HTTP session
 * to beat or end; M: arg is the session another node took over (its
 * resume there), whose copy here goes. */
static void on_targeted(struct cluster *cl, char op, const char *uid, size_t n, const char *rest,
                        size_t len)
{
    size_t self = strlen(cl->self), alen;
    const char *arg = rest + self + 1;
    struct cl_msg *m;
    char num[8];

    if (len <= self + 1 || memcmp(rest, cl->self, self) != 0 || rest[self] != ' ')
        return;
    alen = len - self - 1;
    if (memchr(arg, '\0', alen) || memchr(arg, ' ', alen) || alen > PRESENCE_ID_MAX)
        return;
    m = msg_new(cl, op == 'Y' ? CL_YIELD : op == 'M' ? CL_MOVED : CL_HBEAT, NULL);
    memcpy(m->uid, uid, n);
    if (op == 'Y') {
        memcpy(num, arg, MIN(alen, sizeof(num) - 1));
        num[MIN(alen, sizeof(num) - 1)] = '\0';
        m->bucket = (unsigned)strtoul(num, NULL, 10);
        if (alen >= sizeof(num) || m->bucket == 0 || m->bucket > CONTRIB_SEATS_MAX) {
            msg_free(&m->msg);
            return;
        }
    } else {
        msg_set_data(m, arg, alen);
        m->up = op == 'E';
    }
    log_debug("cluster", "control %c for %.*s: %.*s", op, (int)n, uid, (int)alen, arg);
    send_to(cl, bus_route(cl->bus, m->uid, n), m);
}

/* A message on the control channel: tell the user's owner, unless this
 * node sent it. */
static void on_control(struct cluster *cl, const char *msg, size_t mlen)
{
    const char *sp = memchr(msg, ' ', mlen), *end = msg + mlen, *uid, *nl;
    size_t self = strlen(cl->self), n;
    struct cl_msg *m;

    if (!sp || ((size_t)(sp - msg) == self && memcmp(msg, cl->self, self) == 0))
        return;
    if (end - sp < 4 || !strchr("SKYHEM", sp[1]) || sp[2] != ' ')
        return;
    uid = sp + 3;
    nl = memchr(uid, '\n', (size_t)(end - uid));
    n = (size_t)((nl ? nl : end) - uid);
    if (n == 0 || n > PRESENCE_ID_MAX || memchr(uid, '\0', n) || (sp[1] != 'S' && !nl))
        return;
    if (sp[1] != 'S' && sp[1] != 'K') {
        on_targeted(cl, sp[1], uid, n, nl + 1, (size_t)(end - nl - 1));
        return;
    }
    m = msg_new(cl, sp[1] == 'S' ? CL_SET : CL_KICK, NULL);
    memcpy(m->uid, uid, n);
    if (nl) {
        m->len = (size_t)(end - nl - 1);
        m->data = xmalloc(m->len + 1);
        memcpy(m->data, nl + 1, m->len);
        m->data[m->len] = '\0';
    }
    send_to(cl, bus_route(cl->bus, m->uid, n), m);
}

/* A message of a room's channel (room_wire.h): to the room's owner. */
static void on_room_message(struct cluster *cl, const char *msg, size_t mlen)
{
    struct room_wire_msg w;
    struct cl_msg *m;

    if (room_wire_msg_parse(msg, mlen, &w) != 0) {
        log_warnx("cluster", "ignoring a malformed room message");
        return;
    }
    m = msg_new(cl, CL_RMSG, NULL);
    memcpy(m->uid, w.room.p, w.room.len);
    m->seen = w.seq;
    m->own = is_self(cl, w.node.p, w.node.len);
    m->len = w.node.len + 1 + w.body.len;
    m->data = xmalloc(m->len + 1);
    memcpy(m->data, w.node.p, w.node.len);
    m->data[w.node.len] = '\n';
    memcpy(m->data + w.node.len + 1, w.body.p, w.body.len);
    m->data[m->len] = '\0';
    log_debug("cluster", "room message %.*s", (int)MIN(mlen, (size_t)200), msg);
    send_to(cl, bus_route(cl->bus, m->uid, w.room.len), m);
}

static void on_message(void *ctx, const char *ch, size_t clen, const char *msg, size_t mlen)
{
    struct cluster *cl = ctx;
    struct contrib_view v;
    char set[CLUSTER_KEY_MAX];
    int sl = control_channel(cl, set);

    if (clen == (size_t)sl && memcmp(ch, set, clen) == 0) {
        on_control(cl, msg, mlen);
        return;
    }
    if (channel_room_tag(cl, ch, clen)) {
        on_room_message(cl, msg, mlen);
        return;
    }
    if (channel_bucket(cl, ch, clen) < 0)
        return;
    if (contrib_view_decode(msg, mlen, &v) != 0) {
        log_warnx("cluster", "ignoring a malformed view on %.*s", (int)clen, ch);
        return;
    }
    atomic_fetch_add_explicit(&cl->views_in, 1, memory_order_relaxed);
    log_debug("cluster", "message %.*s", (int)mlen, msg);
    send_view(cl, bus_route(cl->bus, v.uid, strlen(v.uid)), v.uid, 0, msg, mlen, false);
}

/* ---- the bus ---- */

static void home_control(struct cluster *cl, const struct cl_msg *m)
{
    char ch[CLUSTER_KEY_MAX];
    int n = control_channel(cl, ch);
    struct buf b = {0};

    buf_printf(&b, "%s %c %s", cl->self,
               m->op == CL_ANNOUNCE    ? 'S'
               : m->op == CL_KICK_ALL  ? 'K'
               : m->op == CL_YIELD_ASK ? 'Y'
               : m->up                 ? 'E'
                                       : 'H',
               m->uid);
    if (m->op != CL_ANNOUNCE) {
        buf_append(&b, "\n", 1);
        buf_append(&b, m->data, m->len);
    }
    redis_publish(cl->r, ch, (size_t)n, b.data, b.len, NULL, NULL);
    buf_release(&b);
}

static void on_home(struct cluster *cl, struct cl_msg *m)
{
    switch (m->op) {
    case CL_PUT:
        atomic_fetch_add_explicit(&cl->puts, 1, memory_order_relaxed);
        index_update(cl, m->uid, m->data != NULL);
        cl__put(cl, m->uid, cl->self, m->data, m->seen, (int)m->msg.from,
                m->up ? CL_HOOK_VISIBLE : CL_HOOK_NONE);
        break;
    case CL_GET:
        atomic_fetch_add_explicit(&cl->gets, 1, memory_order_relaxed);
        home_get(cl, m->uid, m->msg.from);
        break;
    case CL_WATCH:
    case CL_UNWATCH:
        home_watch(cl, m->uid, m->op == CL_WATCH);
        break;
    case CL_ANNOUNCE:
    case CL_KICK_ALL:
    case CL_YIELD_ASK:
    case CL_HS_FWD:
        home_control(cl, m);
        break;
    case CL_HS_PUT:
        home_hs_put(cl, m);
        break;
    case CL_HS_DEL:
        home_hs_del(cl, m);
        break;
    case CL_HS_GET:
        home_hs_get(cl, m);
        break;
    case CL_RS_PUT:
        home_rs_put(cl, m);
        break;
    case CL_RS_DEL:
        home_rs_del(cl, m);
        break;
    case CL_RS_TAKE:
        home_rs_take(cl, m);
        break;
    case CL_SPUT:
        home_seats_put(cl, m);
        break;
    case CL_SGET:
        home_seats_get(cl, m);
        break;
    case CL_RPUT:
        home_room_put(cl, m);
        break;
    case CL_RGET:
        home_room_get(cl, m);
        break;
    case CL_REPH:
        home_room_publish(cl, m);
        break;
    case CL_RSUB:
    case CL_RUNSUB:
        home_room_sub(cl, m->uid, m->op == CL_RSUB);
        break;
    }
}

static void on_worker(struct cluster *cl, unsigned w, struct cl_msg *m)
{
    const struct cluster_hooks *h = cl->ws[w].hooks;

    if (!h)
        return;
    switch (m->op) {
    case CL_VIEW:
        h->view(cl->ws[w].wctx, m->uid, m->err, m->data, m->len, m->own);
        break;
    case CL_UHOOK:
        if (h->user_hook)
            h->user_hook(cl->ws[w].wctx, m->uid, m->data, m->len, m->up);
        break;
    case CL_RESYNC:
        h->resync(cl->ws[w].wctx, m->bucket);
        break;
    case CL_HEALTH:
        h->health(cl->ws[w].wctx, m->up);
        break;
    case CL_SET:
        h->settings(cl->ws[w].wctx, m->uid);
        break;
    case CL_KICK: {
        char *nl = strchr(m->data, '\n');
        if (!nl || nl - m->data > PRESENCE_ID_MAX)
            break;
        *nl = '\0';
        h->kick(cl->ws[w].wctx, m->uid, m->data, nl + 1);
        break;
    }
    case CL_RMSG: {
        char *nl = strchr(m->data, '\n');
        *nl = '\0';
        h->room_message(cl->ws[w].wctx, m->uid, m->seen, m->data, m->own, nl + 1,
                        m->len - (size_t)(nl + 1 - m->data));
        break;
    }
    case CL_RSTATE:
        h->room_state(cl->ws[w].wctx, m->uid, m->err, m->seen, m->data, m->len);
        break;
    case CL_RHOOK:
        if (h->room_hooks)
            h->room_hooks(cl->ws[w].wctx, m->uid, m->seen, m->data, m->len);
        break;
    case CL_RRESYNC:
        h->room_resync(cl->ws[w].wctx, m->data);
        break;
    case CL_DEAD:
        h->dead(cl->ws[w].wctx, m->data);
        break;
    case CL_SEATS:
        h->seats(cl->ws[w].wctx, m->uid, m->err, (const struct cluster_seat *)m->data, m->bucket);
        break;
    case CL_YIELD:
        h->yield(cl->ws[w].wctx, m->uid, m->bucket);
        break;
    case CL_HSESSION: {
        char *nl = strchr(m->data, '\n');
        *nl = '\0';
        h->hsession(cl->ws[w].wctx, m->uid, m->data, (enum cluster_hs)m->bucket, nl + 1);
        break;
    }
    case CL_HBEAT:
        h->hbeat(cl->ws[w].wctx, m->uid, m->data, m->up);
        break;
    case CL_RSESSION: {
        char *nl = strchr(m->data, '\n');
        *nl = '\0';
        if (h->rsession)
            h->rsession(cl->ws[w].wctx, m->uid, m->data, m->up ? nl + 1 : NULL,
                        m->up ? m->len - (size_t)(nl + 1 - m->data) : 0);
        break;
    }
    case CL_MOVED:
        if (h->moved)
            h->moved(cl->ws[w].wctx, m->uid, m->data);
        break;
    }
}

static void on_bus(struct worker *w, struct bus_msg *bm)
{
    struct cl_msg *m = (struct cl_msg *)bm;
    struct cluster *cl = m->cl;

    if (m->op < CL_VIEW) {
        if (cl->r) /* NULL once the home detached: the request is dropped */
            on_home(cl, m);
    } else {
        on_worker(cl, w->id, m);
    }
    msg_free(bm);
}

/* ---- from a worker ---- */

static void to_home(struct cluster *cl, unsigned worker, struct cl_msg *m)
{
    bus_send(cl->bus, worker, cl->cfg.home, &m->msg);
}

void cluster_user_put(struct cluster *cl, unsigned worker, const char *uid, const char *contrib,
                      uint64_t seen_wall, bool visible)
{
    struct cl_msg *m = msg_new(cl, CL_PUT, uid);

    m->up = visible;
    if (contrib) {
        m->len = strlen(contrib);
        m->data = xstrdup(contrib);
    }
    m->seen = seen_wall;
    to_home(cl, worker, m);
}

void cluster_user_get(struct cluster *cl, unsigned worker, const char *uid)
{
    to_home(cl, worker, msg_new(cl, CL_GET, uid));
}

void cluster_watch(struct cluster *cl, unsigned worker, const char *uid, bool on)
{
    to_home(cl, worker, msg_new(cl, on ? CL_WATCH : CL_UNWATCH, uid));
}

void cluster_settings_changed(struct cluster *cl, unsigned worker, const char *uid)
{
    to_home(cl, worker, msg_new(cl, CL_ANNOUNCE, uid));
}

void cluster_kick(struct cluster *cl, unsigned worker, const char *uid, const char *sid,
                  const char *reason)
{
    struct cl_msg *m = msg_new(cl, CL_KICK_ALL, uid);
    struct buf b = {0};

    buf_printf(&b, "%s\n%s", sid, reason ? reason : "");
    m->data = b.data;
    m->len = b.len;
    to_home(cl, worker, m);
}

/* A message of op for uid with data (a copy of the NUL-terminated text). */
static void to_home_text(struct cluster *cl, unsigned worker, enum cl_op op, const char *uid,
                         const char *text, uint64_t seen, bool up)
{
    struct cl_msg *m = msg_new(cl, op, uid);

    msg_set_data(m, text, strlen(text));
    m->seen = seen;
    m->up = up;
    to_home(cl, worker, m);
}

void cluster_seats_put(struct cluster *cl, unsigned worker, const char *uid, unsigned sessions,
                       unsigned live)
{
    struct cl_msg *m = msg_new(cl, CL_SPUT, uid);
    struct buf b = {0};

    if (sessions) {
        contrib_seats_encode(&b, MIN(sessions, CONTRIB_SEATS_MAX), MIN(live, sessions));
        m->data = b.data;
        m->len = b.len;
    }
    to_home(cl, worker, m);
}

void cluster_seats_get(struct cluster *cl, unsigned worker, const char *uid)
{
    to_home(cl, worker, msg_new(cl, CL_SGET, uid));
}

void cluster_yield(struct cluster *cl, unsigned worker, const char *uid, const char *node,
                   unsigned count)
{
    struct buf b = {0};

    buf_printf(&b, "%s %u", node, count);
    to_home_text(cl, worker, CL_YIELD_ASK, uid, b.data, 0, false);
    buf_release(&b);
}

void cluster_hs_put(struct cluster *cl, unsigned worker, const char *uid, const char *sid,
                    uint64_t deadline_wall)
{
    to_home_text(cl, worker, CL_HS_PUT, uid, sid, deadline_wall, false);
}

void cluster_hs_del(struct cluster *cl, unsigned worker, const char *uid, const char *sid)
{
    to_home_text(cl, worker, CL_HS_DEL, uid, sid, 0, false);
}

void cluster_hs_get(struct cluster *cl, unsigned worker, const char *uid, const char *sid)
{
    to_home_text(cl, worker, CL_HS_GET, uid, sid, 0, false);
}

void cluster_hs_forward(struct cluster *cl, unsigned worker, const char *uid, const char *sid,
                        const char *node, bool leave)
{
    struct buf b = {0};

    buf_printf(&b, "%s %s", node, sid);
    to_home_text(cl, worker, CL_HS_FWD, uid, b.data, 0, leave);
    buf_release(&b);
}

void cluster_rs_put(struct cluster *cl, unsigned worker, const char *uid, const char *sid,
                    const char *record)
{
    struct buf b = {0};

    buf_printf(&b, "%s\n%s", sid, record);
    to_home_text(cl, worker, CL_RS_PUT, uid, b.data, 0, false);
    buf_release(&b);
}

void cluster_rs_del(struct cluster *cl, unsigned worker, const char *uid, const char *sid)
{
    to_home_text(cl, worker, CL_RS_DEL, uid, sid, 0, false);
}

void cluster_rs_take(struct cluster *cl, unsigned worker, const char *uid, const char *sid)
{
    to_home_text(cl, worker, CL_RS_TAKE, uid, sid, 0, false);
}

void cluster_room_put(struct cluster *cl, unsigned worker, const char *room, const char *ops,
                      size_t len)
{
    struct cl_msg *m = msg_new(cl, CL_RPUT, room);

    msg_set_data(m, ops, len);
    to_home(cl, worker, m);
}

void cluster_room_publish(struct cluster *cl, unsigned worker, const char *room, const char *text,
                          size_t len)
{
    struct cl_msg *m = msg_new(cl, CL_REPH, room);

    msg_set_data(m, text, len);
    to_home(cl, worker, m);
}

void cluster_room_get(struct cluster *cl, unsigned worker, const char *room)
{
    to_home(cl, worker, msg_new(cl, CL_RGET, room));
}

void cluster_room_sub(struct cluster *cl, unsigned worker, const char *room, bool on)
{
    to_home(cl, worker, msg_new(cl, on ? CL_RSUB : CL_RUNSUB, room));
}

/* ---- life ---- */

void cl__pick_epoch(struct cluster *cl)
{
    uint64_t epoch;

    if (getrandom(&epoch, sizeof(epoch), 0) != (ssize_t)sizeof(epoch))
        fatal("cluster", "getrandom");
    snprintf(cl->self, sizeof(cl->self), "%s.%016llx", cl->cfg.node_id, (unsigned long long)epoch);
}

struct cluster *cluster_new(const struct cluster_config *cfg, unsigned nworkers)
{
    struct cluster *cl = xcalloc(1, sizeof(*cl));

    cl->cfg = *cfg;
    cl->nworkers = nworkers;
    cl->ws = xcalloc(nworkers, sizeof(*cl->ws));
    cl__pick_epoch(cl);
    atomic_store(&cl->degraded, true); /* until every shard answered */
    worker_on_msg(WORKER_MSG_CLUSTER, on_bus);
    return cl;
}

void cluster_free(struct cluster *cl)
{
    if (!cl)
        return;
    free(cl->ws);
    free(cl);
}

static const struct redis_events events = {
    .shard = on_shard,
    .subscribed = on_subscribed,
    .message = on_message,
};

void cluster_attach(struct cluster *cl, struct worker *w, const struct cluster_hooks *hooks,
                    void *wctx)
{
    cl->bus = w->srv->bus;
    cl->ws[w->id].hooks = hooks;
    cl->ws[w->id].wctx = wctx;
    if (w->id != cl->cfg.home)
        return;
    cl->loop = w->loop;
    cl->cfg.redis.metrics = &w->metrics;
    cl->r = redis_new(w->loop, &cl->cfg.topo, &cl->cfg.redis, &events, cl);
    cl->s_put = redis_script(cl->r, script_user_put);
    cl->s_uread = redis_script(cl->r, script_user_read);
    cl->s_take = redis_script(cl->r, script_user_take);
    cl->s_renew = redis_script(cl->r, script_node_renew);
    cl->s_rput = redis_script(cl->r, script_room_put);
    cl->s_rget = redis_script(cl->r, script_room_get);
    {
        char ch[CLUSTER_KEY_MAX];
        redis_sub(cl->r, ch, (size_t)control_channel(cl, ch));
    }
    log_info("cluster", "node %s: %u redis %s", cl->self, cl->cfg.topo.n,
             cl->cfg.topo.mode == REDIS_CLUSTER ? "cluster seeds" : "shards");
    cl__node_start(cl);
}

void cluster_detach(struct cluster *cl, unsigned worker)
{
    struct redis *r;

    cl->ws[worker].hooks = NULL;
    if (worker != cl->cfg.home || !cl->r)
        return;
    cl__node_stop(cl);
    r = cl->r;
    cl->r = NULL;
    redis_free(r);
}

bool cluster_is_home(const struct cluster *cl, unsigned worker)
{
    return worker == cl->cfg.home;
}

const char *cluster_self(const struct cluster *cl)
{
    return cl->self;
}

struct redis *cluster_redis(const struct cluster *cl)
{
    return cl->r;
}

unsigned cluster_home(const struct cluster *cl)
{
    return cl->cfg.home;
}

const char *cluster_app(const struct cluster *cl)
{
    return cl->cfg.app;
}

bool cluster_degraded(const struct cluster *cl)
{
    return atomic_load_explicit(&cl->degraded, memory_order_relaxed);
}

void cluster_get_stats(const struct cluster *cl, struct cluster_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->puts = atomic_load_explicit(&cl->puts, memory_order_relaxed);
    out->gets = atomic_load_explicit(&cl->gets, memory_order_relaxed);
    out->views_in = atomic_load_explicit(&cl->views_in, memory_order_relaxed);
    out->swept = atomic_load_explicit(&cl->swept, memory_order_relaxed);
    out->nodes_live = atomic_load_explicit(&cl->nodes_live, memory_order_relaxed);
}
