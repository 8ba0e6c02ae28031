/* SPDX-License-Identifier: MIT */
/*
 * engine_room_client.c - rooms on the client's worker: the operations a
 * protocol adapter asks for (join, leave, patch, ephemeral, an event
 * stream's subscription), the socket's room links, delivery of R's state
 * and events to the local subscribers, and the blocks inside rooms
 * (engine_room.c has the model of all three roles).
 */
#include "engine_room.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "client.h"
#include "conn.h"
#include "engine_state.h"
#include "frame.h"
#include "jwt.h"
#include "log.h"
#include "ns.h"
#include "room.h"
#include "room_count.h"
#include "sse.h"
#include "store.h"

struct room_link {    /* 48 bytes: one per joined socket */
    struct list link; /* lroom->links */
    struct lroom *lroom;
    struct client *client;
    struct hidden *hidden; /* its filtered view; NULL while none (nearly always) */
    bool awaiting;         /* no state yet: deltas are not for it */
    bool need_refresh;     /* a block changed before its state was complete */
    uint32_t join_id;      /* its join's number: answers to an earlier link's go */
};

/* A link's filtered view (only a socket whose user is blocked has one):
 * the blockers that are members of its room, kept out of its model, and
 * the view's own numbering (room.h, "views of readers some members hide
 * from"). Freed when a snapshot shows the link the room's own state. */
struct hidden {
    char **ids; /* heap copies */
    size_t n, cap;
    uint64_t room_epoch; /* the room's epoch the view follows (0: none yet) */
    uint64_t epoch, seq; /* the view's head as last delivered */
    uint64_t begin;      /* restart: the room's seq after which it showed nobody */
    bool restart;        /* it shows nobody: its next message begins a view epoch */
};

/* Client side: the users that block a client's user (rb_get()). */
enum { RB_LOADING, RB_READY };

struct rblock {
    int state;
    bool dirty; /* a block changed while loading: read again */
    char **ids; /* the blockers (heap copies) */
    size_t n, cap;
    struct emsg **pending; /* joins held until the blockers are known */
    size_t npending, cappending;
};

/* The blockers record of every client whose user is blocked by nobody:
 * ready and empty. Shared by all workers, so never written: on_block()
 * gives the client a record of its own before adding to it. A client
 * points at it with its rb_none bit; a record of its own is in its
 * client_x. */
static struct rblock rb_none = {.state = RB_READY};

/* c's blockers record: NULL while never read, else rb_none or its own. */
static struct rblock *rb_get(const struct client *c)
{
    if (c->rb_none)
        return &rb_none;
    return c->x ? c->x->rblock : NULL;
}

static void rb_set(struct client *c, struct rblock *rb)
{
    c->rb_none = rb == &rb_none;
    if (rb && !c->rb_none) {
        client_x(c)->rblock = rb;
    } else if (c->x) {
        c->x->rblock = NULL;
        client_x_trim(c);
    }
}

struct rb_load { /* a store read's context: the client may be gone */
    struct engine *e;
    uint64_t conn_id;
};

static void set_clear(char **v, size_t *n);
static void rb_free(struct rblock *rb);
static bool link_filtered(const struct room_link *l);
static void deliver_other(struct room_link *l, struct payload *f, uint64_t epoch, uint64_t seq,
                          bool bulk);
static void deliver_filtered(struct room_link *l, struct payload *frame, uint64_t epoch,
                             uint64_t seq, bool bulk, bool state);
static void request_refresh(struct room_link *l, const char *user);
static bool blocked_by(const struct client *c, const char *user);

struct lroom {             /* client side: local subscribers of a room */
    struct hmap_node node; /* e->lrooms */
    char room[PRESENCE_ID_MAX + 1];
    struct list links;
    uint64_t gen;    /* subscription generation (see r_unsub) */
    uint32_t nlinks; /* sockets in links (room_count.h) */
};

static struct lroom *find_lroom(struct engine *e, const char *room)
{
    return ENGINE_FIND(struct lroom, &e->lrooms, room, room);
}

static struct emsg *room_msg(struct client *c, enum engine_op op, const char *room, const char *ref)
{
    struct emsg *em = session_msg(c, op, ref);

    emsg_set_id(&em->room, room);
    em->proto = (uint8_t)c->proto;
    return em;
}

/* ---- client side ---- */

/* c's room links, nrlinks of them: the inline one while at most one,
 * else an array of pow2ceil(nrlinks) (its size follows from the count,
 * so the client keeps no capacity). */
static struct room_link **rlinks(struct client *c)
{
    return c->nrlinks > 1 ? c->rl.many : &c->rl.one;
}

static bool pow2(size_t n)
{
    return (n & (n - 1)) == 0;
}

static struct room_link *find_rlink(struct client *c, const char *room, size_t *idx)
{
    struct room_link **v = rlinks(c);

    for (size_t i = 0; i < c->nrlinks; i++) {
        if (strcmp(v[i]->lroom->room, room) == 0) {
            *idx = i;
            return v[i];
        }
    }
    return NULL;
}

static void rlinks_push(struct client *c, struct room_link *l)
{
    size_t n = c->nrlinks;

    if (n == 1) { /* a second room: from inline to an array */
        struct room_link **v = pool_alloc(2 * sizeof(*v));
        v[0] = c->rl.one;
        c->rl.many = v;
    } else if (n > 1 && pow2(n)) { /* full */
        c->rl.many = pool_realloc(c->rl.many, 2 * n * sizeof(*c->rl.many));
    }
    if (n == 0)
        c->rl.one = l;
    else
        c->rl.many[n] = l;
    c->nrlinks++;
}

/* Removes link idx (the last one takes its place). */
static void rlinks_del(struct client *c, size_t idx)
{
    struct room_link **v = rlinks(c);
    size_t n = --c->nrlinks;

    v[idx] = v[n];
    if (n == 1) { /* back inline */
        c->rl.one = v[0];
        pool_free(v);
    } else if (n == 0) {
        c->rl.one = NULL;
    } else if (pow2(n)) { /* half full: to the size the count implies */
        c->rl.many = pool_realloc(v, n * sizeof(*v));
    }
}

static void hidden_free(struct room_link *l);

static struct room_link *rlink_add(struct client *c, const char *room)
{
    struct engine *e = c->e;
    struct lroom *lr = find_lroom(e, room);
    struct room_link *l = pool_alloc(sizeof(*l));

    if (!lr) {
        lr = pool_alloc(sizeof(*lr));
        copy_id(lr->room, room);
        list_init(&lr->links);
        lr->gen = ++e->sub_gen;
        hmap_insert(&e->lrooms, &lr->node, str_hash(lr->room));
    }
    l->lroom = lr;
    l->client = c;
    l->awaiting = true;
    l->join_id = ++e->join_ids;
    list_insert_tail(&lr->links, &l->link);
    rlinks_push(c, l);
    rcount__local(e, room, ++lr->nlinks);
    return l;
}

static void rlink_remove(struct client *c, size_t idx)
{
    struct room_link *l = rlinks(c)[idx];
    struct lroom *lr = l->lroom;
    struct emsg *em;

    rlinks_del(c, idx);
    list_del(&l->link);
    hidden_free(l);
    pool_free(l);
    if (--lr->nlinks > 0) {
        rcount__local(c->e, lr->room, lr->nlinks);
        return;
    }
    rcount__local_gone(c->e, lr->room); /* OP_RUNSUB says 0 */
    em = emsg_new(OP_RUNSUB, 0);
    emsg_set_id(&em->room, lr->room);
    em->version = lr->gen;
    owner_send(c->e, owner_of_room(c->e, lr->room), em);
    hmap_remove(&c->e->lrooms, &lr->node);
    pool_free(lr);
}

void engine__rooms_client_closed(struct client *c)
{
    /* Membership follows the session (grace, TTL), not the socket. */
    while (c->nrlinks > 0)
        rlink_remove(c, c->nrlinks - 1);
    rb_free(rb_get(c));
    rb_set(c, NULL);
}

/* Sends one room message to a subscriber: the shared WebSocket frame, or
 * for an event stream the same JSON as an SSE event with id "epoch-seq".
 * bulk: a delta, which already waited for its batch window, goes out as
 * bulk output (conn.h), so a burst of deltas cannot delay urgent frames. */
static void deliver(struct client *c, struct payload *frame, uint64_t epoch, uint64_t seq,
                    bool bulk)
{
    char id[48];
    struct payload *ev;
    const char *json;
    size_t n;

    if (!client_is_stream(c) && frame_adapter(c)->send_room) {
        frame_adapter(c)->send_room(c, frame, bulk);
        return;
    }
    if (c->ws) {
        if (bulk)
            wsconn_send_payload_bulk(c->ws, frame);
        else
            wsconn_send_payload(c->ws, frame);
        return;
    }
    snprintf(id, sizeof(id), "%llu-%llu", (unsigned long long)epoch, (unsigned long long)seq);
    frame_json(frame, &json, &n);
    ev = sse_format_id("room", seq ? id : NULL, json, n);
    sse_send_payload(c->x->sse, ev);
    payload_unref(ev);
}

void engine__room_on_state(struct engine *e, struct emsg *em)
{
    struct client *c = find_client(e, em->conn_id);
    struct room_link *l;
    struct payload *f;
    size_t idx;

    if (!c || !(l = find_rlink(c, em->room, &idx)) || em->index != l->join_id)
        return; /* no such link, or the answer to one that left before it came */
    f = emsg_frame_of(em, c->proto);
    if (f && link_filtered(l) && c->proto == ADAPTER_DEFAULT)
        deliver_filtered(l, f, em->epoch, em->since, false, true);
    else if (f)
        deliver_other(l, f, em->epoch, em->since, false);
    if (!em->arg)
        return;
    if (em->err < 0 && l->awaiting) {
        rlink_remove(c, idx); /* the join failed */
        return;
    }
    l->awaiting = false;
    if (l->need_refresh) { /* a block changed while the state was on its way */
        l->need_refresh = false;
        request_refresh(l, "");
    }
}

/* A socket whose queue is over half its soft limit skips ephemeral data. */
static bool congested(const struct client *c)
{
    const struct conn *conn = c->ws                 ? wsconn_to_conn(c->ws)
                              : client_is_stream(c) ? sse_conn(c->x->sse)
                                                    : NULL;
    size_t soft = conn ? conn->pool->out_soft_limit : 0;

    return soft && conn_output_len(conn) > soft / 2;
}

static void deliver_other(struct room_link *l, struct payload *f, uint64_t epoch, uint64_t seq,
                          bool bulk);
static bool link_filtered(const struct room_link *l);

/* Whether c takes a room tick's casts as slices of their shared payload:
 * a WebSocket whose frames go as they are and are not filtered. */
static bool takes_slices(const struct room_link *l)
{
    const struct client *c = l->client;

    return c->ws && !frame_adapter(c)->send_room && !link_filtered(l);
}

/* A tick's casts (em->casts, their frames back to back in f) to l's
 * client but those it sent: as one piece, or the pieces of f around its
 * own; else (blockers, a protocol of its own) one by one as before. */
static void deliver_casts(struct room_link *l, const struct emsg *em, struct payload *f)
{
    struct client *c = l->client;
    const struct emsg_casts *t = em->casts;
    uint64_t me = client_conn_id(c);
    bool slices = takes_slices(l);
    size_t run = 0, start = 0; /* the piece being gathered: [run, start) */
    unsigned frames = 0;

    for (size_t i = 0; i < t->n; i++) {
        size_t end = t->v[i].end[c->proto];

        if (end == start) /* nothing for its protocol */
            continue;
        if (t->v[i].exclude == me || (t->v[i].from[0] && blocked_by(c, t->v[i].from))) {
            /* its own (never echoed), or from a user that blocks c's (as if absent) */
            if (slices && start > run)
                wsconn_send_payload_range(c->ws, f, run, start, frames, true);
            run = end;
            frames = 0;
        } else if (!slices) {
            struct payload *one = payload_from(f->data + start, end - start);

            if (link_filtered(l) && c->proto == ADAPTER_DEFAULT)
                deliver_filtered(l, one, em->epoch, 0, true, false);
            else
                deliver_other(l, one, em->epoch, 0, true);
            payload_unref(one);
        } else {
            frames++;
        }
        start = end;
    }
    if (slices && start > run)
        wsconn_send_payload_range(c->ws, f, run, start, frames, true);
}

void engine__room_on_event(struct engine *e, struct emsg *em)
{
    struct lroom *lr = find_lroom(e, em->room);
    struct list *pos, *tmp;

    if (!lr)
        return;
    if (em->casts) {
        list_foreach_safe(pos, tmp, &lr->links)
        {
            struct room_link *l = container_of(pos, struct room_link, link);
            struct payload *f = emsg_frame_of(em, l->client->proto);

            if (f && !l->awaiting)
                deliver_casts(l, em, f);
        }
        return;
    }
    list_foreach_safe(pos, tmp, &lr->links)
    {
        struct room_link *l = container_of(pos, struct room_link, link);
        struct client *c = l->client;
        struct payload *f = emsg_frame_of(em, c->proto);

        if (!f || l->awaiting || (em->arg && congested(c)) ||
            (em->conn_id && client_conn_id(c) == em->conn_id))
            continue; /* nothing for its protocol, or the one excluded */
        if (em->uid[0] && blocked_by(c, em->uid))
            continue; /* a broadcast from a user that blocks c's: as if absent */
        if (link_filtered(l) && c->proto == ADAPTER_DEFAULT)
            deliver_filtered(l, f, em->epoch, em->since, !em->arg, false);
        else
            deliver_other(l, f, em->epoch, em->since, !em->arg);
    }
}

/* ---- blocks inside rooms (client side) ---- */

static bool str_in(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
}

/* Adds s to the set (v, n, cap) unless there; false when it was. */
static bool set_add(char ***v, size_t *n, size_t *cap, const char *s)
{
    if (str_in(*v, *n, s))
        return false;
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 4;
        *v = xrealloc(*v, *cap * sizeof(**v));
    }
    (*v)[(*n)++] = xstrdup(s);
    return true;
}

/* Removes s from the set; false when it was not there. */
static bool set_del(char **v, size_t *n, const char *s)
{
    for (size_t i = 0; i < *n; i++) {
        if (strcmp(v[i], s) == 0) {
            free(v[i]);
            v[i] = v[--*n];
            return true;
        }
    }
    return false;
}

static void set_clear(char **v, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free(v[i]);
    *n = 0;
}

static bool blocked_by(const struct client *c, const char *user)
{
    const struct rblock *rb = rb_get(c);

    return rb && str_in(rb->ids, rb->n, user);
}

/* An adapter's filter reads user ids off its frames, as the reader's
 * namespace knows them (no prefix, ns.h): they are put back in it. */
static bool is_blocker(void *ctx, const char *user)
{
    const struct client *c = ctx;
    char ns[NS_PREFIX_MAX + 1], id[ROOM_ID_MAX + 1];

    ns_prefix_of(client_uid(c), ns);
    if (!ns[0] || !ns_join(ns, user, id, ROOM_ID_MAX))
        return blocked_by(c, user);
    return blocked_by(c, id);
}

/* A frame as it goes to l's client when it needs no native view: as it is,
 * or through its adapter's filter when the client's user has blockers. */
static void deliver_other(struct room_link *l, struct payload *f, uint64_t epoch, uint64_t seq,
                          bool bulk)
{
    struct client *c = l->client;
    const struct rblock *rb = rb_get(c);
    const struct proto_adapter *a;

    if (c->proto == ADAPTER_DEFAULT || !rb || rb->n == 0 ||
        !(a = adapter_get(c->proto))->filter_blocked) {
        deliver(c, f, epoch, seq, bulk);
        return;
    }
    if ((f = a->filter_blocked(f, is_blocker, c)) != NULL) {
        deliver(c, f, epoch, seq, bulk);
        payload_unref(f);
    }
}

static void hidden_free(struct room_link *l)
{
    if (!l->hidden)
        return;
    set_clear(l->hidden->ids, &l->hidden->n);
    free(l->hidden->ids);
    pool_free(l->hidden);
    l->hidden = NULL;
}

/* l's filtered view, made on first use. */
static struct hidden *view_of(struct room_link *l)
{
    if (!l->hidden)
        l->hidden = pool_alloc(sizeof(*l->hidden));
    return l->hidden;
}

/* Whether l's messages must be rewritten: its user has blockers, or its
 * view (a model that lacks a member who stopped blocking, or numbering of
 * its own) has not been replaced by the room's own state yet. */
static bool link_filtered(const struct room_link *l)
{
    const struct rblock *rb = rb_get(l->client);

    return (rb && rb->n > 0) || l->hidden != NULL;
}

/* Removes entries of the array key by their user (the string itself, or
 * the object's "user") and returns how many: what 'j' (members, joins)
 * drops blockers and remembers them as hidden, 'l' (leaves) drops hidden
 * ones and forgets them, 'p' (patches) drops blockers. */
static size_t drop_users(cJSON *root, const char *key, struct room_link *l, int what)
{
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, key);
    cJSON *it, *next;
    size_t n = 0;

    if (!cJSON_IsArray(arr))
        return 0;
    for (it = arr->child; it; it = next) {
        const cJSON *u = cJSON_IsString(it) ? it : cJSON_GetObjectItemCaseSensitive(it, "user");
        const char *user = cJSON_IsString(u) ? u->valuestring : "";
        bool drop;

        next = it->next;
        if (what == 'l') /* a leave: hidden ones only (the model lacks them) */
            drop = l->hidden && set_del(l->hidden->ids, &l->hidden->n, user);
        else if ((drop = blocked_by(l->client, user)) && what == 'j') {
            struct hidden *v = view_of(l);
            set_add(&v->ids, &v->n, &v->cap, user);
        }
        if (drop) {
            cJSON_Delete(cJSON_DetachItemViaPointer(arr, it));
            n++;
        }
    }
    return n;
}

/* Sets key to v, written as an exact integer (cJSON could round big
 * numbers), when the key is there. */
static void set_u64(cJSON *root, const char *key, uint64_t v)
{
    char num[24];

    if (!cJSON_GetObjectItemCaseSensitive(root, key))
        return;
    snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
    cJSON_ReplaceItemInObjectCaseSensitive(root, key, cJSON_CreateRaw(num));
}

/* root's key as an exact integer (a number, or one set_u64() wrote); 0
 * when absent or not one. */
static uint64_t get_u64(const cJSON *root, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);

    if (cJSON_IsRaw(v))
        return strtoull(v->valuestring, NULL, 10);
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
}

/* Lowers an interval-mode count by the entries dropped from its list. */
static void lower(cJSON *root, const char *key, size_t by)
{
    uint64_t v = get_u64(root, key);

    if (by)
        set_u64(root, key, v > by ? v - by : 0);
}

/* The digest of the view: the room's without the hidden members (a
 * message without one is left so). */
static void view_digest(cJSON *root, const struct hidden *v)
{
    const char *d = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "digest"));
    uint64_t x;
    char hex[17];

    if (!d)
        return;
    x = strtoull(d, NULL, 16);
    for (size_t i = 0; i < v->n; i++)
        x ^= room_digest_of(v->ids[i]);
    snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)x);
    cJSON_ReplaceItemInObjectCaseSensitive(root, "digest", cJSON_CreateString(hex));
}

/* Sets the view's numbering for a snapshot the room's owner sent as the
 * link's state: (epoch, seq) is the view's head there (room_view_head());
 * the snapshot itself says the room's. */
static void view_state(struct hidden *v, const cJSON *root, uint64_t epoch, uint64_t seq,
                       uint64_t shown)
{
    v->room_epoch = get_u64(root, "epoch");
    v->epoch = epoch;
    v->seq = seq;
    v->restart = shown == 0;
    v->begin = shown == 0 ? get_u64(root, "seq") : 0;
}

/* Numbers a live message of the room (at room_seq of room_epoch) in the
 * view, as room_view_head() would: a message left with nothing for the
 * reader (empty) is skipped; the first one after the view showed nobody
 * begins a view epoch. False when it is skipped. */
static bool view_next(struct hidden *v, uint64_t room_epoch, uint64_t room_seq, bool empty,
                      uint64_t shown)
{
    if (v->room_epoch != room_epoch) { /* the room began again: it showed nobody */
        v->room_epoch = room_epoch;
        v->restart = true;
        v->begin = 0;
    }
    if (empty) {
        if (v->restart)
            v->begin = room_seq; /* it still shows nobody after this one */
        return false;
    }
    if (v->restart) {
        v->epoch = v->begin ? room_view_epoch(room_epoch, v->begin) : room_epoch;
        v->seq = 0;
        v->restart = false;
    }
    v->seq++;
    if (shown == 0) {
        v->restart = true;
        v->begin = room_seq;
    }
    return true;
}

/* Whether a delta, once filtered, has nothing left for the reader. */
static bool delta_empty(const cJSON *root)
{
    static const char *const keys[] = {"joins", "leaves", "patches"};
    static const char *const totals[] = {"joinCount", "leaveCount", "patchCount"};

    for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
        if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, keys[i])) > 0 ||
            get_u64(root, totals[i]) > 0)
            return false;
    return true;
}

/* Drops blockers from a room message for l; returns how many entries went
 * and whether it is a snapshot. */
static size_t filter_message(struct room_link *l, cJSON *root, const char *type, bool *snapshot)
{
    *snapshot = strcmp(type, "room_snapshot") == 0;
    if (*snapshot) {
        struct hidden *v = view_of(l);

        set_clear(v->ids, &v->n); /* the snapshot says who is in the room */
        return drop_users(root, "members", l, 'j');
    }
    size_t j = drop_users(root, "joins", l, 'j');
    size_t lv = drop_users(root, "leaves", l, 'l');
    size_t p = drop_users(root, "patches", l, 'p');
    lower(root, "joinCount", j);
    lower(root, "leaveCount", lv);
    lower(root, "patchCount", p);
    return j + lv + p;
}

/* After a state snapshot of the room at (epoch, seq): when l's view
 * shows the room as it is (no blocker, the room's own numbering), the
 * link's messages need no rewriting any more. */
static void view_maybe_free(struct room_link *l, uint64_t epoch, uint64_t seq)
{
    const struct rblock *rb = rb_get(l->client);
    const struct hidden *v = l->hidden;

    if (v->n == 0 && !(rb && rb->n > 0) && v->epoch == epoch && v->seq == seq)
        hidden_free(l);
}

/*
 * Delivers one room message to a client with blockers, as the room would
 * look without them. Members that block the user are removed from
 * snapshots and joins and remembered as hidden; their leaves are dropped
 * while hidden; their patches and ephemerals are dropped; count is
 * lowered by the hidden ones. The view has numbering of its own (room.h):
 * a delta left empty is not sent at all, the others are numbered in the
 * view's sequence, and its epoch is the view's. A snapshot that is the
 * link's state (state: from the room's owner, after a join or a refresh)
 * carries the view's head in (epoch, seq); live messages carry the room's.
 * Parsed and re-encoded only here: others share the frame. This path reads
 * and writes the native protocol's JSON (the frame the client worker
 * receives; the value stays on the room's owner): a second protocol needs
 * the value here, or a filter of its own.
 */
static void deliver_filtered(struct room_link *l, struct payload *frame, uint64_t epoch,
                             uint64_t seq, bool bulk, bool state)
{
    struct client *c = l->client;
    const char *json, *type;
    struct buf b = {0};
    struct hidden *v;
    cJSON *root;
    size_t n;
    uint64_t shown, room_epoch, room_seq;
    bool snapshot;
    char *out;

    frame_json(frame, &json, &n);
    root = cJSON_ParseWithLength(json, n);
    type = root ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "type")) : NULL;
    if (!type || (strcmp(type, "room_snapshot") != 0 && strcmp(type, "room_delta") != 0)) {
        const char *from =
            type && strcmp(type, "ephemeral") == 0
                ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "user"))
                : NULL;
        if (!from || !blocked_by(c, from))
            deliver(c, frame, epoch, seq, bulk);
        cJSON_Delete(root);
        return;
    }
    room_epoch = get_u64(root, "epoch");
    room_seq = get_u64(root, "seq");
    if (!l->hidden && !state) {
        /* A link that filters from now on (a block came): its model
         * follows the room's numbering up to this message. */
        v = view_of(l);
        v->room_epoch = v->epoch = epoch;
        v->seq = seq ? seq - 1 : 0;
    }
    filter_message(l, root, type, &snapshot);
    v = view_of(l);
    lower(root, "count", v->n);
    view_digest(root, v);
    shown = get_u64(root, "count");
    if (state && snapshot) {
        view_state(v, root, epoch, seq, shown);
    } else if (!view_next(v, epoch, seq, !snapshot && delta_empty(root), shown)) {
        cJSON_Delete(root);
        return; /* only members hidden from the reader changed */
    }
    epoch = shown || !snapshot ? v->epoch : 0;
    seq = shown || !snapshot ? v->seq : 0;
    set_u64(root, "epoch", epoch);
    set_u64(root, "seq", seq);
    if (state && snapshot)
        view_maybe_free(l, room_epoch, room_seq);
    out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!out)
        abort(); /* cJSON fails only on OOM, which aborts everywhere */
    buf_append_str(&b, out);
    cJSON_free(out);
    frame = frame_text(&b); /* the native protocol's text frame */
    deliver(c, frame, epoch, seq, bulk);
    payload_unref(frame);
}

/* em carries copies of c's blockers (none when they are not known). */
static void ids_of_blockers(const struct client *c, struct emsg *em)
{
    const struct rblock *rb = rb_get(c);

    if (!rb || rb->n == 0)
        return;
    em->ids = xmalloc(rb->n * sizeof(*em->ids));
    for (size_t i = 0; i < rb->n; i++)
        em->ids[i] = xstrdup(rb->ids[i]);
    em->nids = rb->n;
}

/* Asks R for a fresh snapshot for l's socket if user is shown there (""
 * = in any case), so that the socket's model follows a changed block. */
static void request_refresh(struct room_link *l, const char *user)
{
    struct client *c = l->client;
    struct emsg *em = emsg_new(OP_RREFRESH, client_conn_id(c));

    emsg_set_id(&em->room, l->lroom->room);
    emsg_set_id(&em->uid, user);
    em->index = l->join_id;
    em->proto = (uint8_t)c->proto;
    ids_of_blockers(c, em);
    owner_send(c->e, owner_of_room(c->e, l->lroom->room), em);
}

/* A join travels through the user's owner; an event stream's subscription
 * goes straight to the room's. Either carries the user's blockers: the
 * room's owner counts a full room, numbers the view and filters what it
 * answers as that reader sees the room. */
static bool is_join(const struct emsg *em)
{
    return em->op == OP_RJOIN || em->op == OP_RSUB;
}

static void rb_send_join(struct client *c, struct emsg *em)
{
    if (is_join(em) && rb_get(c)->n > 0)
        em->has_since = false; /* a snapshot: the hidden members are known from it */
    if (!is_join(em))
        em->arg = 1; /* a patch or ephemeral: its sender's blockers are known */
    ids_of_blockers(c, em);
    owner_send(c->e, em->op == OP_RJOIN ? c->owner : owner_of_room(c->e, em->room), em);
}

static void rb_loaded(void *ctx, int status, const struct store_result *r);

static void rb_load(struct client *c)
{
    struct rb_load *ld = xcalloc(1, sizeof(*ld));
    struct store_result none;

    ld->e = c->e;
    ld->conn_id = client_conn_id(c);
    rb_get(c)->state = RB_LOADING;
    if (store_list_blockers(c->e->env->store, c->e->inbox, client_uid(c), rb_loaded, ld) < 0) {
        memset(&none, 0, sizeof(none));
        rb_loaded(ld, -EINVAL, &none);
    }
}

/* The blockers of a client's user are read: send its held joins, or,
 * when the store failed, refuse them (they cannot be filtered). */
static void rb_loaded(void *ctx, int status, const struct store_result *r)
{
    struct rb_load *ld = ctx;
    struct client *c = ld->e->closing ? NULL : find_client(ld->e, ld->conn_id);
    struct rblock *rb = c ? rb_get(c) : NULL;

    free(ld);
    if (!rb)
        return;
    if (status == 0 && rb->dirty) {
        rb->dirty = false;
        rb_load(c); /* a block changed meanwhile: this answer may predate it */
        return;
    }
    if (status < 0) {
        log_warnx("store", "blockers of %s unreadable, room joins refused: %s", client_uid(c),
                  store_strerror(status));
        for (size_t i = 0; i < rb->npending; i++) {
            struct emsg *em = rb->pending[i];
            size_t idx;
            if (is_join(em) && find_rlink(c, em->room, &idx))
                rlink_remove(c, idx);
            if (!client_is_stream(c))
                frame_send_error(c, "store_unavailable",
                                 "the settings could not be read; try again", em->ref);
            else /* an event stream: ended, the client's EventSource retries */
                sse_fail(c->x->sse, "store_unavailable",
                         "the settings could not be read; try again");
            emsg_free(&em->msg);
        }
        rb->npending = 0;
        rb_set(c, NULL); /* the next join reads again */
        free(rb->pending);
        pool_free(rb);
        return;
    }
    for (size_t i = 0; i < r->nids; i++)
        set_add(&rb->ids, &rb->n, &rb->cap, r->ids[i]);
    rb->state = RB_READY;
    for (size_t i = 0; i < rb->npending; i++)
        rb_send_join(c, rb->pending[i]);
    rb->npending = 0;
    free(rb->pending); /* joins are held only while loading */
    rb->pending = NULL;
    rb->cappending = 0;
    if (rb->n == 0) { /* blocked by nobody: share rb_none */
        rb_set(c, &rb_none);
        rb_free(rb);
    }
}

/* Sends a join of c (or a patch or ephemeral: they carry the blockers
 * too), held until c's blockers are known. */
static void rb_join(struct client *c, struct emsg *em)
{
    struct rblock *rb = rb_get(c);
    bool load = !rb;

    if (!rb)
        rb_set(c, rb = pool_alloc(sizeof(*rb)));
    else if (rb->state == RB_READY) {
        rb_send_join(c, em);
        return;
    }
    if (rb->npending == rb->cappending) {
        rb->cappending = rb->cappending ? rb->cappending * 2 : 4;
        rb->pending = xrealloc(rb->pending, rb->cappending * sizeof(*rb->pending));
    }
    rb->pending[rb->npending++] = em;
    if (load)
        rb_load(c);
}

/* A join still held for room is cancelled (room_leave before it left). */
static void rb_cancel(struct client *c, const char *room)
{
    struct rblock *rb = rb_get(c);

    for (size_t i = 0; rb && i < rb->npending; i++) {
        if (is_join(rb->pending[i]) && strcmp(rb->pending[i]->room, room) == 0) {
            emsg_free(&rb->pending[i]->msg);
            memmove(rb->pending + i, rb->pending + i + 1,
                    (rb->npending - i - 1) * sizeof(*rb->pending));
            rb->npending--;
            return;
        }
    }
}

static void rb_free(struct rblock *rb)
{
    if (!rb || rb == &rb_none)
        return;
    for (size_t i = 0; i < rb->npending; i++)
        emsg_free(&rb->pending[i]->msg);
    free(rb->pending);
    set_clear(rb->ids, &rb->n);
    free(rb->ids);
    pool_free(rb);
}

/* Every worker: owner blocks (or stops blocking) viewer. Sockets of
 * viewer whose blockers are known update them, and each of their rooms
 * where owner is shown sends them a fresh snapshot. */
void engine__room_on_block(struct engine *e, struct emsg *em)
{
    struct hmap_node *n;
    size_t it;

    if (em->arg) /* as the rooms this worker owns: a hider from now on */
        room_note_hider(e->rooms, em->uid);
    for (n = hmap_first(&e->clients, &it); n; n = hmap_next(&e->clients, n, &it)) {
        struct client *c = container_of(n, struct client, node);
        struct rblock *rb = rb_get(c);

        if (!rb || strcmp(client_uid(c), em->viewer) != 0)
            continue;
        if (rb->state == RB_LOADING) {
            rb->dirty = true;
            continue;
        }
        if (em->arg && rb == &rb_none) {
            rb_set(c, rb = pool_alloc(sizeof(*rb)));
            rb->state = RB_READY;
        }
        if (em->arg)
            set_add(&rb->ids, &rb->n, &rb->cap, em->uid);
        else
            set_del(rb->ids, &rb->n, em->uid);
        for (size_t i = 0; i < c->nrlinks; i++) {
            struct room_link *l = rlinks(c)[i];
            if (l->awaiting)
                l->need_refresh = true;
            else
                request_refresh(l, em->uid);
        }
    }
}

void engine__rooms_block_changed(struct engine *e, const char *owner, const char *target,
                                 bool blocked)
{
    for (unsigned i = 0; i < e->w->srv->nworkers; i++) {
        struct emsg *em = emsg_new(OP_RBLOCK, 0);
        emsg_set_id(&em->uid, owner);
        emsg_set_id(&em->viewer, target);
        em->arg = blocked;
        owner_send(e, i, em);
    }
}

/* ---- the operations (engine_room.h) ---- */

bool engine__room_token_ok(const struct engine *e, const char *holder, const char *room,
                           const char *tok)
{
    const char *secret = e->w->srv->cfg.room_token_secret;
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned maclen = 0;
    char msg[2 * PRESENCE_ID_MAX + 32], hex[2 * EVP_MAX_MD_SIZE + 1];
    size_t digits = 0;
    int64_t exp = 0;
    int n;

    /* "<exp>.<hex>": exp in decimal Unix seconds, 1..12 digits. */
    while (tok && tok[digits] >= '0' && tok[digits] <= '9' && digits < 12)
        exp = exp * 10 + (tok[digits++] - '0');
    if (!tok || digits == 0 || tok[digits] != '.' || (tok[0] == '0' && digits > 1) ||
        exp * 1000 < (int64_t)time_wall_ms())
        return false; /* malformed, or expired */
    n = snprintf(msg, sizeof(msg), "%s:%s:%lld", holder, room, (long long)exp);
    if (n < 0 || (size_t)n >= sizeof(msg))
        return false;
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)msg, (size_t)n, mac,
         &maclen);
    for (unsigned i = 0; i < maclen; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    tok += digits + 1;
    return strlen(tok) == 2 * maclen && CRYPTO_memcmp(hex, tok, 2 * maclen) == 0;
}

bool engine__room_allowed(const struct client *c, const char *room, const char *tok)
{
    const char *claims = c->x ? c->x->room_claims : NULL;

    if (claims && jwt_rooms_allow(claims, room))
        return true;
    if (!c->e->w->srv->cfg.room_token_secret[0])
        return claims == NULL;
    return engine__room_token_ok(c->e, client_uid(c), room, tok);
}

int engine__room_join(struct client *c, const char *room, const char *meta, bool has_since,
                      uint64_t epoch, uint64_t seq, unsigned limit, const char *ref)
{
    struct room_link *l;
    struct emsg *em;
    size_t idx;

    if (find_rlink(c, room, &idx))
        return -EALREADY;
    if (c->nrlinks >= (uint32_t)c->e->w->srv->cfg.max_rooms_per_connection)
        return -EMLINK;
    em = room_msg(c, OP_RJOIN, room, ref);
    em->text = meta ? xstrdup(meta) : NULL;
    em->limit = (uint16_t)(limit > UINT16_MAX ? UINT16_MAX : limit);
    if (has_since) {
        em->epoch = epoch;
        em->since = seq;
        em->has_since = true;
    }
    l = rlink_add(c, room);
    em->version = l->lroom->gen;
    em->index = l->join_id; /* echoed by every OP_RSTATE of the answer */
    rb_join(c, em);         /* sent once c's blockers are known */
    return 0;
}

int engine__room_leave(struct client *c, const char *room, const char *ref)
{
    size_t idx;

    if (!find_rlink(c, room, &idx))
        return -ENOENT;
    rlink_remove(c, idx);
    rb_cancel(c, room);
    owner_send(c->e, c->owner, room_msg(c, OP_RLEAVE, room, ref));
    return 0;
}

bool engine__room_linked(struct client *c, const char *room)
{
    size_t idx;

    return find_rlink(c, room, &idx) != NULL;
}

int engine__room_unsubscribe(struct client *c, const char *room)
{
    size_t idx;

    if (!find_rlink(c, room, &idx))
        return -ENOENT;
    rlink_remove(c, idx);
    rb_cancel(c, room);
    return 0;
}

void engine__room_patch(struct client *c, const char *room, const char *meta, const char *ref)
{
    struct emsg *em = room_msg(c, OP_RPATCH, room, ref);

    em->text = xstrdup(meta);
    rb_join(c, em); /* with c's blockers, once known: see engine__room_on_patch() */
}

void engine__room_ephemeral(struct client *c, const char *room, const char *kind, const char *data,
                            const char *ref)
{
    struct emsg *em = room_msg(c, OP_REPHEM, room, ref);

    em->text = xstrdup(data);
    em->emoji = xstrdup(kind); /* the kind rides in a spare string */
    rb_join(c, em);            /* ditto */
}

bool engine__room_ephemerals_held(const struct client *c)
{
    return c->x && loop_now(c->e->w->loop) < c->x->ephemeral_hold_until;
}

void engine__rooms_client_free(struct engine *e)
{
    engine__free_map(&e->lrooms, offsetof(struct lroom, node), NULL);
}

void engine__room_stream(struct client *c, const char *room, const char *last_event_id)
{
    struct emsg *em = emsg_new(OP_RSUB, client_conn_id(c));
    unsigned long long epoch, seq;
    struct room_link *l;
    int used = 0;

    emsg_set_id(&em->room, room);
    em->proto = (uint8_t)c->proto;
    if (last_event_id && sscanf(last_event_id, "%llu-%llu%n", &epoch, &seq, &used) == 2 &&
        last_event_id[used] == '\0') {
        em->epoch = epoch;
        em->since = seq;
        em->has_since = true;
    }
    l = rlink_add(c, room);
    em->version = l->lroom->gen;
    em->index = l->join_id; /* echoed by every OP_RSTATE of the answer */
    if (client_uid(c)[0])
        rb_join(c, em); /* a reader with an identity: sent once its blockers are known */
    else
        owner_send(c->e, owner_of_room(c->e, room), em);
}
