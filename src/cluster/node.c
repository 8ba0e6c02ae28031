/* SPDX-License-Identifier: MIT */
/*
 * node.c - a node's lease in Redis, its view of the other nodes, and the
 * sweep of dead ones (cluster.h, docs/cluster.md). Home worker only.
 *
 * Every renew_ms the node runs SCRIPT_NODE_RENEW, which sets its own
 * lease deadline to Redis time + lease_ms and returns every member with
 * its deadline. A member whose deadline is in the past is *dead* from the
 * moment this node first sees it so, and *sweepable* once this node's own
 * renewals have gone on succeeding for orphan_grace_ms after that; a
 * failed renewal forgets every such observation (death detection is
 * frozen while this node is cut off: a paused Redis makes every lease
 * look old when it resumes, and the others renew theirs within renew_ms,
 * long before a grace is over). A member with this node's id and another
 * epoch is this node's previous life: sweepable at once. A member seen
 * dead that renews again (it was slow, or everyone was cut off by a
 * paused Redis) is alive again and forgotten.
 *
 * Swept while away. A node cut off alone for longer than lease + grace
 * is swept by the others. Back, its renewal finds its member gone (or a
 * sweeper's claim on it, or Redis lost everything) and does not renew
 * it: the node takes a new epoch, registers that, and has every worker
 * put its local users again. The old epoch is passed to every user
 * script at once (so each put drops the old field as it writes the new
 * one: no flap), and swept by this node after the grace, by when every
 * local user was put again, as a backstop for what else it left.
 *
 * Sweepable epochs are passed to every user script (which drops their
 * contributions as it meets them) and swept: the first node to claim
 * pd:<app>:{c}:sweep:<member> (SET NX PX 30000) walks the dead epoch's
 * index of users (SSCAN, CLUSTER_SWEEP_MAX at a time), removes its
 * contribution from each (publishing those who went offline), then
 * deletes the index and the member. Every step is idempotent; a sweeper
 * that dies is replaced when its claim expires.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_internal.h"
#include "log.h"
#include "loop.h"
#include "util.h"

/* ---- the dead ---- */

static struct cl_dead *dead_find(struct cluster *cl, const char *m)
{
    for (unsigned i = 0; i < cl->node.ndead; i++)
        if (strcmp(cl->node.dead[i].member, m) == 0)
            return &cl->node.dead[i];
    return NULL;
}

static bool same_node(const struct cluster *cl, const char *m)
{
    size_t n = strlen(cl->cfg.node_id);

    return strncmp(m, cl->cfg.node_id, n) == 0 && m[n] == '.';
}

/* Whether d may be swept now. */
static bool sweepable(const struct cluster *cl, const struct cl_dead *d, uint64_t now)
{
    return d->restarted || now >= d->seen_dead + cl->cfg.orphan_grace_ms;
}

/* Whether scripts drop d's fields now: once sweepable, or at once for
 * this process's previous epoch. */
static bool listed(const struct cluster *cl, const struct cl_dead *d, uint64_t now)
{
    return d->prev || sweepable(cl, d, now);
}

static void dead_remove(struct cluster *cl, struct cl_dead *d)
{
    *d = cl->node.dead[--cl->node.ndead];
}

static void rebuild_dead_list(struct cluster *cl)
{
    struct cl_node *nd = &cl->node;
    uint64_t now = loop_now(cl->loop);
    char *before = xstrdup(cl__dead_list(cl));

    nd->dead_list.len = 0;
    for (unsigned i = 0; i < nd->ndead; i++) {
        if (!listed(cl, &nd->dead[i], now))
            continue;
        if (nd->dead_list.len)
            buf_append(&nd->dead_list, ",", 1);
        buf_append_str(&nd->dead_list, nd->dead[i].member);
    }
    buf_append(&nd->dead_list, "", 1);
    nd->dead_list.len--;
    if (strcmp(before, nd->dead_list.data) != 0)
        cl__dead_changed(cl, ""); /* rooms drop the dead epochs' members at once */
    free(before);
}

/* Whether member (len bytes) is one of list's comma-separated items. */
static bool in_list(const struct buf *list, const char *member, size_t len)
{
    const char *p = list->data, *end = p ? p + list->len : NULL;

    while (p && p < end) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        size_t n = (size_t)((c ? c : end) - p);
        if (n == len && memcmp(p, member, len) == 0)
            return true;
        p = c ? c + 1 : end;
    }
    return false;
}

bool cl__is_live(const struct cluster *cl, const char *member, size_t len)
{
    return in_list(&cl->node.live, member, len);
}

bool cl__is_dead(const struct cluster *cl, const char *member, size_t len)
{
    return in_list(&cl->node.dead_list, member, len);
}

bool cl__lease_expired(const struct cluster *cl, const char *member, size_t len)
{
    for (unsigned i = 0; i < cl->node.ndead; i++)
        if (strlen(cl->node.dead[i].member) == len &&
            memcmp(cl->node.dead[i].member, member, len) == 0)
            return true;
    return false;
}

const char *cl__dead_list(const struct cluster *cl)
{
    return cl->node.dead_list.data ? cl->node.dead_list.data : "";
}

uint64_t cl__dead_seen(const struct cluster *cl, const char *member)
{
    for (unsigned i = 0; i < cl->node.ndead; i++) {
        const struct cl_dead *d = &cl->node.dead[i];
        if (strcmp(d->member, member) == 0 && d->deadline > cl->cfg.lease_ms)
            return d->deadline - cl->cfg.lease_ms;
    }
    return time_wall_ms();
}

/* Drops the dead no longer in the member list (swept by someone). */
static void dead_prune(struct cluster *cl, const redisReply *members)
{
    struct cl_node *nd = &cl->node;
    struct buf gone = {0};

    for (unsigned i = 0; i < nd->ndead;) {
        struct cl_dead *d = &nd->dead[i];
        bool present = false;
        for (size_t j = 0; j + 1 < members->elements; j += 2)
            present |= strcmp(members->element[j]->str, d->member) == 0;
        if (present || d->sweeping || d->prev) {
            i++;
            continue;
        }
        /* Swept by another node before this one's grace for it ended: the
         * workers never heard it dead, and must drop its rooms' members. */
        if (!in_list(&nd->dead_list, d->member, strlen(d->member)))
            buf_printf(&gone, "%s%s", gone.len ? "," : "", d->member);
        dead_remove(cl, d);
    }
    if (gone.len)
        cl__dead_changed(cl, gone.data);
    buf_release(&gone);
}

/* m renewed its lease: if it was seen dead, it is alive again (unless
 * its sweep already began: then it finds that and takes a new epoch). */
static void dead_alive(struct cluster *cl, const char *m)
{
    struct cl_dead *d = dead_find(cl, m);

    if (!d || d->sweeping || d->prev || d->restarted)
        return;
    log_info("cluster", "node %s renewed its lease again", m);
    dead_remove(cl, d);
}

static void dead_note(struct cluster *cl, const char *m, uint64_t deadline)
{
    struct cl_node *nd = &cl->node;
    struct cl_dead *d = dead_find(cl, m);

    if (d || nd->ndead == CLUSTER_DEAD_MAX || strlen(m) > CLUSTER_SELF_MAX)
        return;
    d = &nd->dead[nd->ndead++];
    memset(d, 0, sizeof(*d));
    strcpy(d->member, m);
    d->deadline = deadline;
    d->seen_dead = loop_now(cl->loop);
    d->restarted = same_node(cl, m);
    if (d->restarted)
        log_info("cluster", "%s is this node's previous epoch: sweeping it now", m);
    else
        log_info("cluster", "node %s missed its lease; swept in %u ms unless it renews", m,
                 cl->cfg.orphan_grace_ms);
}

/* ---- the sweep ---- */

struct sweep {
    struct cluster *cl;
    char member[CLUSTER_SELF_MAX + 1];
    char cursor[24];
    uint64_t seen;
};

static void sweep_step(struct sweep *s);

static void sweep_end(struct sweep *s, bool done)
{
    struct cl_dead *d = dead_find(s->cl, s->member);

    if (d)
        d->sweeping = false;
    if (done) {
        atomic_fetch_add_explicit(&s->cl->swept, 1, memory_order_relaxed);
        log_info("cluster", "swept node %s", s->member);
        if (d && d->prev) { /* nobody else knows of it: done with it */
            dead_remove(s->cl, d);
            rebuild_dead_list(s->cl);
        }
    }
    free(s);
}

static void cmd(struct cluster *cl, const char *route, int argc, const char **argv,
                redis_reply_cb *cb, void *ctx)
{
    size_t len[8];

    for (int i = 0; i < argc; i++)
        len[i] = strlen(argv[i]);
    if (redis_cmd(cl->r, route, strlen(route), argc, argv, len, cb, ctx) != 0 && cb)
        cb(ctx, NULL, REDIS_E_FULL);
}

static void sweep_scanned(void *ctx, const redisReply *r, int err)
{
    struct sweep *s = ctx;
    struct cluster *cl = s->cl;
    char nodes[CLUSTER_KEY_MAX], idx[CLUSTER_KEY_MAX];
    const redisReply *ids;

    if (err || !cl->r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        sweep_end(s, false);
        return;
    }
    ids = r->element[1];
    for (size_t i = 0; i < ids->elements; i++) {
        char seats[CLUSTER_KEY_MAX];
        if (ids->element[i]->type != REDIS_REPLY_STRING)
            continue;
        cl__put(cl, ids->element[i]->str, s->member, NULL, s->seen, -1, CL_HOOK_ASK);
        cl__seats_key(cl, ids->element[i]->str, seats);
        cmd(cl, seats, 3, (const char *[]){"HDEL", seats, s->member}, NULL, NULL);
    }
    snprintf(s->cursor, sizeof(s->cursor), "%s", r->element[0]->str);
    if (strcmp(s->cursor, "0") != 0) {
        sweep_step(s);
        return;
    }
    cl__node_index(cl, s->member, idx);
    snprintf(nodes, sizeof(nodes), "pd:%s:{c}:nodes", cl->cfg.app);
    cmd(cl, idx, 2, (const char *[]){"DEL", idx}, NULL, NULL);
    cmd(cl, nodes, 3, (const char *[]){"ZREM", nodes, s->member}, NULL, NULL);
    sweep_end(s, true);
}

static void sweep_step(struct sweep *s)
{
    char idx[CLUSTER_KEY_MAX], count[16];

    cl__node_index(s->cl, s->member, idx);
    snprintf(count, sizeof(count), "%d", CLUSTER_SWEEP_MAX);
    cmd(s->cl, idx, 5, (const char *[]){"SSCAN", idx, s->cursor, "COUNT", count}, sweep_scanned, s);
}

static void sweep_claimed(void *ctx, const redisReply *r, int err)
{
    struct sweep *s = ctx;

    if (err || !s->cl->r || r->type != REDIS_REPLY_STATUS) { /* another node sweeps it */
        sweep_end(s, false);
        return;
    }
    log_info("cluster", "sweeping node %s", s->member);
    sweep_step(s);
}

static void sweep_start(struct cluster *cl, struct cl_dead *d)
{
    struct sweep *s = xcalloc(1, sizeof(*s));
    char claim[CLUSTER_KEY_MAX], px[16];

    s->cl = cl;
    strcpy(s->member, d->member);
    strcpy(s->cursor, "0");
    s->seen = d->deadline > cl->cfg.lease_ms ? d->deadline - cl->cfg.lease_ms : d->deadline;
    d->sweeping = true;
    snprintf(claim, sizeof(claim), "pd:%s:{c}:sweep:%s", cl->cfg.app, d->member);
    snprintf(px, sizeof(px), "%d", CLUSTER_CLAIM_MS);
    cmd(cl, claim, 6, (const char *[]){"SET", claim, cl->self, "NX", "PX", px}, sweep_claimed, s);
}

static void sweep_due(struct cluster *cl)
{
    uint64_t now = loop_now(cl->loop);

    for (unsigned i = 0; i < cl->node.ndead; i++) {
        struct cl_dead *d = &cl->node.dead[i];
        if (!d->sweeping && sweepable(cl, d, now))
            sweep_start(cl, d);
    }
}

/* ---- the lease ---- */

static void renew_arm(struct cluster *cl)
{
    loop_timer_start(cl->loop, &cl->node.renew_timer, cl->cfg.renew_ms);
}

/* Our epoch was swept while we were cut off (or Redis lost it): a new
 * one, registered at once; the old one is listed for every script now
 * and swept after the grace (see the file comment); every local user is
 * put again. */
static void new_epoch(struct cluster *cl)
{
    struct cl_node *nd = &cl->node;
    struct cl_dead *d;
    char old[CLUSTER_SELF_MAX + 1];

    strcpy(old, cl->self);
    cl__pick_epoch(cl);
    log_warnx("cluster", "lease of %s was swept while this node was cut off: now %s", old,
              cl->self);
    nd->renewed = false;
    d = dead_find(cl, old);
    if (!d && nd->ndead == CLUSTER_DEAD_MAX) /* full: the oldest gives way */
        dead_remove(cl, &nd->dead[0]);
    if (!d) {
        d = &nd->dead[nd->ndead++];
        memset(d, 0, sizeof(*d));
        strcpy(d->member, old);
        /* the sweep's last seen of what it ends; every local user is put
         * again meanwhile, so this is only a backstop's guess */
        d->deadline = time_wall_ms() + cl->cfg.lease_ms;
    }
    d->prev = true;
    d->restarted = false;
    d->seen_dead = loop_now(cl->loop);
    rebuild_dead_list(cl);
    cl__reassert(cl);
    loop_timer_start(cl->loop, &nd->renew_timer, 0);
}

/* Our renewal failed: nothing we saw about the others can be trusted. */
static void renew_failed(struct cluster *cl)
{
    struct cl_node *nd = &cl->node;

    for (unsigned i = 0; i < nd->ndead; i++)
        nd->dead[i].seen_dead = loop_now(cl->loop);
}

static void renewed(void *ctx, const redisReply *r, int err)
{
    struct cluster *cl = ctx;
    const redisReply *m;
    uint64_t now;
    unsigned live = 0;

    if (!cl->r)
        return;
    cl->node.renewing = false;
    if (err || r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY ||
        r->element[2]->type != REDIS_REPLY_STRING) {
        renew_failed(cl);
        return;
    }
    if (strcmp(r->element[2]->str, "gone") == 0) {
        new_epoch(cl);
        return;
    }
    cl->node.renewed = true;
    now = strtoull(r->element[0]->str, NULL, 10);
    m = r->element[1];
    cl->node.live.len = 0;
    for (size_t j = 0; j + 1 < m->elements; j += 2) {
        uint64_t deadline = strtoull(m->element[j + 1]->str, NULL, 10);
        const char *who = m->element[j]->str;
        if (strcmp(who, cl->self) == 0) {
            live++;
        } else if (deadline < now || same_node(cl, who)) {
            dead_note(cl, who, deadline);
        } else {
            live++;
            dead_alive(cl, who);
            buf_printf(&cl->node.live, "%s%s", cl->node.live.len ? "," : "", who);
        }
    }
    atomic_store_explicit(&cl->nodes_live, live, memory_order_relaxed);
    dead_prune(cl, m);
    rebuild_dead_list(cl);
    sweep_due(cl);
}

static void renew(struct wheel_timer *t, uint64_t now)
{
    struct cluster *cl = container_of(t, struct cluster, node.renew_timer);
    char nodes[CLUSTER_KEY_MAX], claim[CLUSTER_KEY_MAX], lease[16];
    const char *keys[2] = {nodes, claim};
    const char *args[3] = {cl->self, lease, cl->node.renewed ? "1" : "0"};
    size_t kl[2], al[3];

    (void)now;
    renew_arm(cl);
    if (cl->node.renewing) { /* the last one is still out: Redis is slow */
        renew_failed(cl);
        return;
    }
    snprintf(nodes, sizeof(nodes), "pd:%s:{c}:nodes", cl->cfg.app);
    snprintf(claim, sizeof(claim), "pd:%s:{c}:sweep:%s", cl->cfg.app, cl->self);
    snprintf(lease, sizeof(lease), "%u", cl->cfg.lease_ms);
    kl[0] = strlen(nodes);
    kl[1] = strlen(claim);
    for (int i = 0; i < 3; i++)
        al[i] = strlen(args[i]);
    cl->node.renewing = true;
    if (redis_eval(cl->r, cl->s_renew, 2, keys, kl, 3, args, al, renewed, cl) != 0) {
        cl->node.renewing = false;
        renew_failed(cl);
    }
}

void cl__node_start(struct cluster *cl)
{
    wheel_timer_init(&cl->node.renew_timer, renew);
    loop_timer_start(cl->loop, &cl->node.renew_timer, 0);
}

void cl__node_stop(struct cluster *cl)
{
    wheel_del(&cl->node.renew_timer);
    buf_release(&cl->node.dead_list);
    buf_release(&cl->node.live);
}
