/* SPDX-License-Identifier: MIT */
/*
 * cluster_room.c - rooms across nodes (cluster_room.h).
 *
 * struct croom, one per room this worker owns that has local sessions, a
 * local subscriber (held) or local changes not put yet, lives in
 * e->crooms. It holds:
 *   - remote: the mirrored members, "<epoch> <user>", each one session
 *     "~<epoch>" of user in the room core;
 *   - sent: this node's part as last put, user -> its join op line;
 *   - dirty: local members changed since (put by the flush timer, which
 *     walks only the rooms on e->crdirty);
 *   - seq: the room's seq of the last message applied, and while the
 *     room is being read (loading), the messages that arrive meanwhile,
 *     applied after the read in seq order.
 * Messages of this node's own puts only advance seq.
 *
 * A subscription-only room (CR_SUBS_ROOM, cluster_room.h) has no members:
 * its part is the entry CR_SUBS_USER with this node's socket count
 * (room_count.h), and the other nodes' such entries stay in remote with
 * their counts as values, never in the room core.
 */
#include "cluster_room.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter.h"
#include "buf.h"
#include "engine_room.h"
#include "engine_state.h"
#include "hooks.h"
#include "log.h"
#include "msg.h"
#include "ns.h"
#include "room.h"
#include "room_count.h"
#include "room_wire.h"

#define CR_FLUSH_MS 10    /* local changes are put together this long after the first */
#define CR_RETRY_MS 1000  /* a failed read of a room is tried again after this */
#define CR_HELD_MAX 10000 /* messages kept while a room is read; more: read again */

struct kv { /* one entry of a string map */
    struct hmap_node node;
    char *key;
    char *val; /* NULL for a set */
};

struct pending { /* a message that came while the room was read */
    struct list link;
    uint64_t seq;
    bool own;
    char *node, *ops;
    size_t len;
};

struct croom {
    struct hmap_node node;  /* e->crooms */
    struct list dirty_link; /* e->crdirty while dirty is not empty */
    char room[PRESENCE_ID_MAX + 1];
    char tag[17];
    struct hmap remote, sent, dirty; /* struct kv */
    struct list pending;             /* struct pending, by arrival */
    struct list reads;               /* struct emsg.park: HTTP reads waiting for the read */
    size_t npending;
    uint64_t seq;
    uint64_t failed_at; /* loop ms the last read failed (0: none) */
    unsigned nlocal;    /* local sessions in the room */
    bool held;          /* local subscribers */
    bool loaded;        /* read once: joins may be answered */
    bool loading;       /* a read is out */
    bool reread;        /* read again when the one out comes back */
};

static bool on(const struct engine *e)
{
    return e->env->cluster != NULL && !e->cluster_gone;
}

bool cr__local_sid(const char *sid)
{
    return sid[0] != CR_SID_PREFIX;
}

/* Whether room is subscription-only and user (len bytes) its count entry. */
static bool subs_entry(const char *room, const char *user, size_t len)
{
    return cr__subs_room(room) && len == 2 && memcmp(user, CR_SUBS_USER, 2) == 0;
}

/* ---- string maps ---- */

static struct kv *kv_find(const struct hmap *m, const char *key)
{
    uint64_t h = str_hash(key);

    for (struct hmap_node *n = hmap_find(m, h); n; n = hmap_find_next(n, h)) {
        struct kv *k = container_of(n, struct kv, node);
        if (strcmp(k->key, key) == 0)
            return k;
    }
    return NULL;
}

static void kv_del(struct hmap *m, struct kv *k)
{
    hmap_remove(m, &k->node);
    free(k->key);
    free(k->val);
    free(k);
}

/* Sets key to val (NULL: a set member); a copy of both. */
static void kv_set(struct hmap *m, const char *key, const char *val)
{
    struct kv *k = kv_find(m, key);

    if (!k) {
        k = xcalloc(1, sizeof(*k));
        k->key = xstrdup(key);
        hmap_insert(m, &k->node, str_hash(k->key));
    }
    free(k->val);
    k->val = val ? xstrdup(val) : NULL;
}

static void kv_clear(struct hmap *m)
{
    struct hmap_node *n, *next;
    size_t it;

    for (n = hmap_first(m, &it); n; n = next) {
        next = hmap_next(m, n, &it);
        kv_del(m, container_of(n, struct kv, node));
    }
    hmap_release(m);
}

/* ---- the room's records ---- */

static struct croom *find(struct engine *e, const char *room)
{
    return ENGINE_FIND(struct croom, &e->crooms, room, room);
}

static void read_room(struct engine *e, struct croom *c)
{
    if (c->loading) {
        c->reread = true;
        return;
    }
    c->loading = true;
    c->reread = false;
    cluster_room_get(e->env->cluster, e->w->id, c->room);
}

static struct croom *get(struct engine *e, const char *room)
{
    struct croom *c = find(e, room);

    if (c)
        return c;
    c = xcalloc(1, sizeof(*c));
    copy_id(c->room, room);
    cluster_room_tag(room, c->tag);
    list_init(&c->pending);
    list_init(&c->reads);
    list_init(&c->dirty_link);
    hmap_insert(&e->crooms, &c->node, str_hash(c->room));
    /* Subscribed before read: a message published after the read's
     * state reaches us (pub/sub and commands share the order of the
     * shard; one that came first is held and sorted by seq). */
    cluster_room_sub(e->env->cluster, e->w->id, room, true);
    read_room(e, c);
    return c;
}

static void pending_free(struct pending *p)
{
    list_del(&p->link);
    free(p->node);
    free(p->ops);
    free(p);
}

static void pending_clear(struct croom *c)
{
    while (!list_empty(&c->pending))
        pending_free(container_of(list_first(&c->pending), struct pending, link));
    c->npending = 0;
}

/* The mirrored session of epoch node: "~<node>". */
static void mirror_sid(const char *node, size_t n, char out[ROOM_ID_MAX + 1])
{
    n = MIN(n, (size_t)ROOM_ID_MAX - 1);
    out[0] = CR_SID_PREFIX;
    memcpy(out + 1, node, n);
    out[n + 1] = '\0';
}

/* user's metadata becomes what room_wire_meta_swap() makes of it when a
 * node's part of it goes from prev to next (NULL: none): the other
 * connections' values stay (docs/phoenix.md). False when the member is
 * not there, or the inputs are not JSON (the caller then does as before). */
static bool swap_meta(struct engine *e, struct croom *c, const char *user, const char *prev,
                      const char *next, size_t next_len)
{
    struct room_member_view mv;
    struct buf b = {0};
    bool ok;

    if (room_get_member(e->rooms, c->room, user, &mv) != 0)
        return false;
    ok = room_wire_meta_swap(mv.meta, mv.meta_len, prev, prev ? strlen(prev) : 0, next, next_len,
                             &b) == 0;
    if (ok && (b.len != mv.meta_len || memcmp(b.data, mv.meta, b.len) != 0))
        ok = room_set_meta(e->rooms, c->room, user, b.data, b.len, loop_now(e->w->loop)) == 0;
    buf_release(&b);
    return ok;
}

/* The mirrored member k ("<epoch> <user>") leaves the room core, and its
 * connections' values the member's metadata when other sessions keep it
 * (an epoch's count of a subscription-only room is forgotten). */
static void unmirror(struct engine *e, struct croom *c, struct kv *k)
{
    const char *sp = strchr(k->key, ' ');
    char sid[ROOM_ID_MAX + 1];

    if (subs_entry(c->room, sp + 1, strlen(sp + 1))) {
        kv_del(&c->remote, k);
        rcount__remote_changed(e, c->room);
        return;
    }
    mirror_sid(k->key, (size_t)(sp - k->key), sid);
    room_leave(e->rooms, c->room, sp + 1, sid, loop_now(e->w->loop));
    if (k->val)
        swap_meta(e, c, sp + 1, k->val, NULL, 0);
    kv_del(&c->remote, k);
}

/* Whether k's epoch is node. */
static bool of_node(const struct kv *k, const char *node)
{
    size_t n = strlen(node);

    return strncmp(k->key, node, n) == 0 && k->key[n] == ' ';
}

/* Drops every mirrored member (of epoch node only, when not NULL). */
static void drop_remote(struct engine *e, struct croom *c, const char *node)
{
    struct hmap_node *n, *next;
    size_t it;

    for (n = hmap_first(&c->remote, &it); n; n = next) {
        struct kv *k = container_of(n, struct kv, node);

        next = hmap_next(&c->remote, n, &it);
        if (!node || of_node(k, node))
            unmirror(e, c, k);
    }
}

/* The bytes of epoch ("<node-id>.<epoch>", len bytes) that name its node. */
static size_t node_id_len(const char *epoch, size_t len)
{
    const char *dot = memrchr(epoch, '.', len);

    return dot ? (size_t)(dot - epoch) : len;
}

/* A message from node epoch node: the node's other epochs are over (a
 * node has one epoch at a time: a restart, or a new one after its lease
 * was lost while Redis restarted empty, where nobody may ever see the old
 * one's lease expire). Their mirrored members leave. */
static void drop_other_epochs(struct engine *e, struct croom *c, const char *node)
{
    size_t len = strlen(node), id = node_id_len(node, len);
    struct hmap_node *n, *next;
    size_t it;

    for (n = hmap_first(&c->remote, &it); n; n = next) {
        struct kv *k = container_of(n, struct kv, node);
        size_t klen = (size_t)(strchr(k->key, ' ') - k->key);

        next = hmap_next(&c->remote, n, &it);
        if (node_id_len(k->key, klen) == id && memcmp(k->key, node, id) == 0 &&
            (klen != len || memcmp(k->key, node, len) != 0))
            unmirror(e, c, k);
    }
}

/* Frees c when nothing local needs it: its mirrored members leave. */
static void maybe_release(struct engine *e, struct croom *c)
{
    if (c->held || c->nlocal > 0 || c->sent.count > 0 || c->dirty.count > 0 || c->loading ||
        !list_empty(&c->reads))
        return;
    drop_remote(e, c, NULL);
    cluster_room_sub(e->env->cluster, e->w->id, c->room, false);
    pending_clear(c);
    kv_clear(&c->remote);
    kv_clear(&c->sent);
    kv_clear(&c->dirty);
    hmap_remove(&e->crooms, &c->node);
    free(c);
}

/* ---- applying the other nodes' ops ---- */

/* Epoch node holds user with meta (a join or an update). */
static void apply_join(struct engine *e, struct croom *c, struct room_wire_str node,
                       struct room_wire_str user_s, struct room_wire_str meta)
{
    char user[ROOM_ID_MAX + 1], sid[ROOM_ID_MAX + 1], key[ROOM_WIRE_NODE_MAX + 2 + ROOM_ID_MAX];
    struct room_member_view mv;
    uint64_t now = loop_now(e->w->loop);
    int r;
    struct kv *k;
    char *m;

    memcpy(user, user_s.p, user_s.len);
    user[user_s.len] = '\0';
    if (subs_entry(c->room, user, user_s.len)) { /* the epoch's count, not a member */
        char val[24];
        snprintf(key, sizeof(key), "%.*s %s", (int)node.len, node.p, user);
        snprintf(val, sizeof(val), "%.*s", (int)MIN(meta.len, sizeof(val) - 1), meta.p);
        kv_set(&c->remote, key, val);
        rcount__remote_changed(e, c->room);
        return;
    }
    snprintf(key, sizeof(key), "%.*s %s", (int)node.len, node.p, user);
    k = kv_find(&c->remote, key);
    mirror_sid(node.p, node.len, sid);
    r = room_join(e->rooms, c->room, user, sid, meta.p, meta.len, now);
    /* A metadata update: the node's connections' values replace those it
     * put before; the other sessions' stay. */
    if (r == ROOM_E_JOINED && !swap_meta(e, c, user, k ? k->val : NULL, meta.p, meta.len)) {
        if (room_get_member(e->rooms, c->room, user, &mv) == 0 &&
            (mv.meta_len != meta.len || memcmp(mv.meta, meta.p, mv.meta_len) != 0))
            room_set_meta(e->rooms, c->room, user, meta.p, meta.len, now);
    } else if (r < 0 && r != ROOM_E_JOINED) {
        log_warnx("cluster", "room %s: member %s of %.*s not mirrored: %s", c->room, user,
                  (int)node.len, node.p, room_strerror(r));
        return;
    }
    m = xmalloc(meta.len + 1); /* what the node put: its values go with its next put */
    memcpy(m, meta.p, meta.len);
    m[meta.len] = '\0';
    kv_set(&c->remote, key, m);
    free(m);
}

static void apply_leave(struct engine *e, struct croom *c, struct room_wire_str node,
                        struct room_wire_str user)
{
    char key[ROOM_WIRE_NODE_MAX + 2 + ROOM_ID_MAX];
    struct kv *k;

    snprintf(key, sizeof(key), "%.*s %.*s", (int)node.len, node.p, (int)user.len, user.p);
    if ((k = kv_find(&c->remote, key)))
        unmirror(e, c, k);
}

/* Applies epoch node's ops; lines that are no op are skipped. */
static void apply_ops(struct engine *e, struct croom *c, const char *node, const char *ops,
                      size_t len)
{
    struct room_wire_str n = {node, strlen(node)};
    const char *p = ops, *end = ops + len;
    struct room_wire_op op;
    int r;

    if (n.len == 0 || n.len > ROOM_WIRE_NODE_MAX)
        return;
    drop_other_epochs(e, c, node);
    while ((r = room_wire_op_next(&p, end, &op)) != -ENOENT) {
        if (r != 0)
            continue;
        if (op.kind == ROOM_WIRE_DROP)
            drop_remote(e, c, node);
        else if (op.kind == ROOM_WIRE_JOIN)
            apply_join(e, c, n, op.user, op.meta);
        else
            apply_leave(e, c, n, op.user);
    }
}

/* One message in order: applied when it is the next seq, ignored when
 * older (the read had it), a gap makes the room read again. */
static void take(struct engine *e, struct croom *c, uint64_t seq, const char *node, bool own,
                 const char *ops, size_t len)
{
    if (seq <= c->seq)
        return;
    if (seq != c->seq + 1) {
        log_debug("cluster", "room %s: seq %llu after %llu: read again", c->room,
                  (unsigned long long)seq, (unsigned long long)c->seq);
        read_room(e, c);
        return;
    }
    c->seq = seq;
    if (!own)
        apply_ops(e, c, node, ops, len);
}

static void hold_message(struct croom *c, uint64_t seq, const char *node, bool own, const char *ops,
                         size_t len)
{
    struct pending *p;

    if (c->npending >= CR_HELD_MAX) {
        c->reread = true; /* too many: read again after this read */
        return;
    }
    p = xcalloc(1, sizeof(*p));
    p->seq = seq;
    p->own = own;
    p->node = xstrdup(node);
    p->ops = xmalloc(len + 1);
    memcpy(p->ops, ops, len);
    p->ops[len] = '\0';
    p->len = len;
    list_insert_tail(&c->pending, &p->link);
    c->npending++;
}

/* An ephemeral value of room from another node (room_wire.h). */
static void ephemeral_in(struct engine *e, const char *room, const char *text, size_t len)
{
    char user[ROOM_ID_MAX + 1], kind[ROOM_KIND_MAX + 1];
    struct room_wire_ephemeral w;
    struct room_ephemeral_view v;

    if (room_wire_ephemeral_parse(text, len, &w) != 0)
        return;
    memcpy(user, w.user.p, w.user.len);
    user[w.user.len] = '\0';
    memcpy(kind, w.kind.p, w.kind.len);
    kind[w.kind.len] = '\0';
    v = (struct room_ephemeral_view){
        .room = room, .user = user, .kind = kind, .data = w.data.p, .data_len = w.data.len};
    engine__room_remote_ephemeral(e, &v);
}

void cr__ephemeral_out(struct engine *e, const struct room_ephemeral_view *v)
{
    struct buf b = {0};

    if (!on(e))
        return;
    room_wire_put_ephemeral(&b, v->user, v->kind, v->data, v->data_len);
    cluster_room_publish(e->env->cluster, e->w->id, v->room, b.data, b.len);
    buf_release(&b);
}

void cr__cast_out(struct engine *e, const struct room_broadcast_event *ev)
{
    struct buf b = {0};

    if (!on(e))
        return;
    room_wire_put_cast(&b, ev->user, ev->exclude, ev->event, ev->data, strlen(ev->data));
    cluster_room_publish(e->env->cluster, e->w->id, ev->room, b.data, b.len);
    buf_release(&b);
}

/* An application event of room from another node (room_wire.h). */
static void cast_in(struct engine *e, const char *room, const char *text, size_t len)
{
    char user[ROOM_ID_MAX + 1], tag[ROOM_WIRE_TAG_MAX + 1], *event, *data;
    struct room_wire_cast w;
    struct room_broadcast_event ev;

    if (room_wire_cast_parse(text, len, &w) != 0)
        return;
    memcpy(user, w.user.p, w.user.len);
    user[w.user.len] = '\0';
    memcpy(tag, w.exclude.p, w.exclude.len);
    tag[w.exclude.len] = '\0';
    event = xstrndup(w.event.p, w.event.len);
    data = xstrndup(w.data.p, w.data.len);
    ev = (struct room_broadcast_event){
        .room = room, .event = event, .data = data, .user = user, .exclude = tag};
    engine__room_remote_cast(e, &ev);
    free(event);
    free(data);
}

void cr__on_message(void *wctx, const char *room, uint64_t seq, const char *node, bool own,
                    const char *ops, size_t len)
{
    struct engine *e = wctx;
    struct croom *c = find(e, room);

    if (!c)
        return;     /* nothing here needs the room (a linger's message) */
    if (seq == 0) { /* the ephemeral lane, and application events */
        if (!own && room_wire_is_cast(ops, len))
            cast_in(e, room, ops, len);
        else if (!own && c->loaded)
            ephemeral_in(e, room, ops, len);
        return;
    }
    if (c->loading)
        hold_message(c, seq, node, own, ops, len);
    else
        take(e, c, seq, node, own, ops, len);
}

/* Applies the held messages in seq order (selection: they are few). */
static void take_pending(struct engine *e, struct croom *c)
{
    while (!list_empty(&c->pending) && !c->loading) {
        struct pending *best = NULL;
        struct list *pos;

        list_foreach(pos, &c->pending)
        {
            struct pending *p = container_of(pos, struct pending, link);
            if (!best || p->seq < best->seq)
                best = p;
        }
        take(e, c, best->seq, best->node, best->own, best->ops, best->len);
        pending_free(best);
        c->npending--;
    }
}

/* The room's state (room_wire.h, state lines). The mirrored members not
 * in it leave; those in it join or update. */
static void reconcile(struct engine *e, struct croom *c, const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    struct hmap seen = {0};
    struct hmap_node *n, *next;
    struct room_wire_state st;
    size_t it;
    int r;

    while ((r = room_wire_state_next(&p, end, &st)) != -ENOENT) {
        struct buf key = {0};

        if (r != 0)
            continue;
        apply_join(e, c, st.node, st.user, st.meta);
        buf_printf(&key, "%.*s %.*s", (int)st.node.len, st.node.p, (int)st.user.len, st.user.p);
        kv_set(&seen, key.data, NULL);
        buf_release(&key);
    }
    for (n = hmap_first(&c->remote, &it); n; n = next) {
        struct kv *k = container_of(n, struct kv, node);

        next = hmap_next(&c->remote, n, &it);
        if (!kv_find(&seen, k->key))
            unmirror(e, c, k);
    }
    kv_clear(&seen);
}

static void arm_retry(struct engine *e)
{
    if (!wheel_is_linked(&e->cr_retry))
        loop_timer_start(e->w->loop, &e->cr_retry, CR_RETRY_MS);
}

static void answer_reads(struct engine *e, struct croom *c)
{
    if (!list_empty(&c->reads)) /* reads show the published state */
        room_flush(e->rooms, c->room, loop_now(e->w->loop));
    while (!list_empty(&c->reads)) {
        struct emsg *em = container_of(list_first(&c->reads), struct emsg, park);

        list_del(&em->park);
        engine__room_on_info(e, em);
        emsg_free(&em->msg);
    }
}

bool cr__park_read(struct engine *e, struct emsg *em)
{
    struct croom *c;

    if (!on(e) || cluster_degraded(e->env->cluster))
        return false;
    c = get(e, em->room);
    if (c->loaded)
        return false;
    em->parked = true;
    list_insert_tail(&c->reads, &em->park);
    return true;
}

void cr__on_state(void *wctx, const char *room, int err, uint64_t seq, const char *text, size_t len)
{
    struct engine *e = wctx;
    struct croom *c = find(e, room);
    bool first;

    if (!c)
        return;
    c->loading = false;
    first = !c->loaded;
    if (err < 0) {
        log_debug("cluster", "room %s: read failed (%d)", room, err);
        c->failed_at = loop_now(e->w->loop);
        c->loaded = true; /* answer the joins from what is known */
        arm_retry(e);
    } else {
        c->failed_at = 0;
        c->loaded = true;
        c->seq = seq;
        reconcile(e, c, text, len);
        take_pending(e, c);
    }
    if (c->reread && !c->failed_at)
        read_room(e, c);
    if (first)
        engine__room_loaded(e, room);
    answer_reads(e, c);
    if ((c = find(e, room)) != NULL)
        maybe_release(e, c);
}

static void on_retry(struct wheel_timer *t, uint64_t now)
{
    struct engine *e = container_of(t, struct engine, cr_retry);
    struct hmap_node *n;
    size_t it;

    (void)now;
    for (n = hmap_first(&e->crooms, &it); n; n = hmap_next(&e->crooms, n, &it)) {
        struct croom *c = container_of(n, struct croom, node);
        if (c->failed_at && !c->loading)
            read_room(e, c);
    }
}

void cr__on_resync(void *wctx, const char *tag)
{
    struct engine *e = wctx;
    struct hmap_node *n;
    size_t it;

    for (n = hmap_first(&e->crooms, &it); n; n = hmap_next(&e->crooms, n, &it)) {
        struct croom *c = container_of(n, struct croom, node);
        if (strcmp(c->tag, tag) == 0)
            read_room(e, c);
    }
}

/* Whether epoch m (len bytes) is in list "a,b,c". */
static bool in_list(const char *list, const char *m, size_t len)
{
    for (const char *p = list; *p;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == len && memcmp(p, m, len) == 0)
            return true;
        p += n + (c != NULL);
    }
    return false;
}

void cr__on_dead(void *wctx, const char *list)
{
    struct engine *e = wctx;
    struct hmap_node *n, *rn, *next;
    size_t it, rit;

    for (n = hmap_first(&e->crooms, &it); n; n = hmap_next(&e->crooms, n, &it)) {
        struct croom *c = container_of(n, struct croom, node);
        bool had = false;

        for (rn = hmap_first(&c->remote, &rit); rn; rn = next) {
            struct kv *k = container_of(rn, struct kv, node);

            next = hmap_next(&c->remote, rn, &rit);
            if (in_list(list, k->key, (size_t)(strchr(k->key, ' ') - k->key))) {
                unmirror(e, c, k);
                had = true;
            }
        }
        /* A read drops the dead epoch's fields in Redis: the first
         * node's read reports its last members (webhooks, scripts.h). */
        if (had && e->hooks)
            read_room(e, c);
    }
}

void cr__on_hooks(void *wctx, const char *room, uint64_t seq, const char *text, size_t len)
{
    struct engine *e = wctx;
    unsigned long long ep, before, after;
    const char *p = memchr(text, '\n', len), *end = text + len;
    int64_t now = (int64_t)time_wall_ms();

    if (!e->hooks || !p || sscanf(text, "%llu %llu %llu", &ep, &before, &after) != 3)
        return;
    if (before == 0 && after > 0)
        hooks_room_occupancy(e->hooks, room, ep, seq, true, now);
    for (p++; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char user[ROOM_ID_MAX + 1];

        if (n > 1 && n <= ROOM_ID_MAX + 1 && (p[0] == '+' || p[0] == '-')) {
            memcpy(user, p + 1, n - 1);
            user[n - 1] = '\0';
            if (subs_entry(room, user, n - 1)) /* the first or last node with sockets */
                hooks_channel_occupancy(e->hooks, room, p[0] == '+');
            else
                hooks_room_member(e->hooks, room, ep, seq, user, p[0] == '+', now);
        }
        p += n + (nl != NULL);
    }
    if (before > 0 && after == 0)
        hooks_room_occupancy(e->hooks, room, ep, seq, false, now);
}

/* ---- this node's part ---- */

static void on_flush(struct wheel_timer *t, uint64_t now);

/* What this node holds of user in c's room, as its join op (room_wire.h)
 * of a visible member with a local session, into b; false if none. */
static bool local_part(struct engine *e, const struct croom *c, const char *user, struct buf *b)
{
    struct room_member_view mv;
    const char **mine;
    struct buf own = {0};
    size_t n = 0;

    if (subs_entry(c->room, user, strlen(user))) { /* this node's sockets */
        uint64_t n = rcount__local_total(e, c->room);
        char meta[24];
        if (n == 0)
            return false;
        snprintf(meta, sizeof(meta), "%llu", (unsigned long long)n);
        room_wire_put_join(b, user, 0, meta, strlen(meta));
        return true;
    }
    if (room_get_member(e->rooms, c->room, user, &mv) != 0 || !mv.visible)
        return false;
    mine = xmalloc((mv.nsessions + 1) * sizeof(*mine));
    for (size_t i = 0; i < mv.nsessions; i++)
        if (cr__local_sid(mv.session_ids[i]))
            mine[n++] = mv.session_ids[i];
    /* Only this node's connections' values: the other nodes put theirs. */
    if (n && room_wire_meta_own(mv.meta, mv.meta_len, mine, n, &own) == 0)
        room_wire_put_join(b, user, mv.joined_at, own.data, own.len);
    else if (n)
        room_wire_put_join(b, user, mv.joined_at, mv.meta, mv.meta_len);
    buf_release(&own);
    free(mine);
    return n > 0;
}

/* Appends the op that brings user's entry in c->sent to what is local
 * now, if any, and records it as sent. */
static void diff_one(struct engine *e, struct croom *c, const char *user, struct buf *ops)
{
    struct buf now = {0};
    struct kv *k = kv_find(&c->sent, user);
    bool has = local_part(e, c, user, &now);

    if (has && (!k || strcmp(k->val, now.data) != 0)) {
        buf_append(ops, now.data, now.len);
        kv_set(&c->sent, user, now.data);
    } else if (!has && k) {
        room_wire_put_leave(ops, user);
        kv_del(&c->sent, k);
    }
    buf_release(&now);
}

static void put_ops(struct engine *e, struct croom *c, struct buf *ops)
{
    if (ops->len == 0)
        return;
    cluster_room_put(e->env->cluster, e->w->id, c->room, ops->data, ops->len - 1);
}

/* Puts c's dirty members' changes in one script call. */
static void flush_room(struct engine *e, struct croom *c)
{
    struct hmap_node *d, *dn;
    struct buf ops = {0};
    size_t dit;

    for (d = hmap_first(&c->dirty, &dit); d; d = dn) {
        struct kv *k = container_of(d, struct kv, node);
        dn = hmap_next(&c->dirty, d, &dit);
        diff_one(e, c, k->key, &ops);
        kv_del(&c->dirty, k);
    }
    put_ops(e, c, &ops);
    buf_release(&ops);
}

static void on_flush(struct wheel_timer *t, uint64_t now)
{
    struct engine *e = container_of(t, struct engine, cr_flush);

    (void)now;
    while (!list_empty(&e->crdirty)) {
        struct croom *c = container_of(list_first(&e->crdirty), struct croom, dirty_link);

        list_del(&c->dirty_link);
        flush_room(e, c);
        maybe_release(e, c);
    }
}

void cr__touch(struct engine *e, const char *room, const char *user, int sessions)
{
    struct croom *c;

    if (!on(e))
        return;
    c = get(e, room);
    if (sessions > 0)
        c->nlocal++;
    else if (sessions < 0 && c->nlocal > 0)
        c->nlocal--;
    kv_set(&c->dirty, user, NULL);
    if (!list_is_linked(&c->dirty_link))
        list_insert_tail(&e->crdirty, &c->dirty_link);
    if (!wheel_is_linked(&e->cr_flush))
        loop_timer_start(e->w->loop, &e->cr_flush, CR_FLUSH_MS);
}

bool cr__subs_room(const char *room)
{
    return strncmp(ns_strip(room), CR_SUBS_ROOM, 2) == 0; /* past an app's prefix (ns.h) */
}

void cr__subs_touch(struct engine *e, const char *room)
{
    if (cr__subs_room(room))
        cr__touch(e, room, CR_SUBS_USER, 0);
}

uint64_t cr__remote_subs(struct engine *e, const char *room)
{
    struct croom *c = on(e) ? find(e, room) : NULL;
    struct hmap_node *n;
    uint64_t sum = 0;
    size_t it;

    for (n = c ? hmap_first(&c->remote, &it) : NULL; n; n = hmap_next(&c->remote, n, &it)) {
        const struct kv *k = container_of(n, struct kv, node);
        const char *sp = strchr(k->key, ' ');
        if (k->val && subs_entry(c->room, sp + 1, strlen(sp + 1)))
            sum += strtoull(k->val, NULL, 10);
    }
    return sum;
}

void cr__hold(struct engine *e, const char *room)
{
    if (on(e))
        get(e, room)->held = true;
}

void cr__unhold(struct engine *e, const char *room)
{
    struct croom *c;

    if (!on(e) || !(c = find(e, room)))
        return;
    c->held = false;
    maybe_release(e, c);
}

bool cr__ready(struct engine *e, const char *room)
{
    struct croom *c;

    if (!on(e) || cluster_degraded(e->env->cluster))
        return true;
    c = get(e, room);
    return c->loaded;
}

void cr__on_health(struct engine *e)
{
    struct hmap_node *n;
    size_t it;

    for (n = hmap_first(&e->crooms, &it); n; n = hmap_next(&e->crooms, n, &it)) {
        struct croom *c = container_of(n, struct croom, node);
        struct hmap_node *s;
        struct buf ops = {0};
        size_t sit;

        buf_append_str(&ops, "*\n");
        for (s = hmap_first(&c->sent, &sit); s; s = hmap_next(&c->sent, s, &sit)) /* join ops */
            buf_append_str(&ops, container_of(s, struct kv, node)->val);
        put_ops(e, c, &ops);
        buf_release(&ops);
        read_room(e, c);
    }
}

void cr__init(struct engine *e)
{
    list_init(&e->crdirty);
    wheel_timer_init(&e->cr_flush, on_flush);
    wheel_timer_init(&e->cr_retry, on_retry);
}

void cr__free(struct engine *e)
{
    struct hmap_node *n, *next;
    size_t it;

    wheel_del(&e->cr_flush);
    wheel_del(&e->cr_retry);
    for (n = hmap_first(&e->crooms, &it); n; n = next) {
        struct croom *c = container_of(n, struct croom, node);
        next = hmap_next(&e->crooms, n, &it);
        pending_clear(c);
        while (!list_empty(&c->reads)) {
            struct emsg *em = container_of(list_first(&c->reads), struct emsg, park);
            list_del(&em->park);
            emsg_free(&em->msg);
        }
        kv_clear(&c->remote);
        kv_clear(&c->sent);
        kv_clear(&c->dirty);
        list_del(&c->dirty_link);
        hmap_remove(&e->crooms, n);
        free(c);
    }
    hmap_release(&e->crooms);
}
