/* SPDX-License-Identifier: MIT */
/*
 * cluster_internal.h - struct cluster, shared by cluster.c (the bridge
 * between workers and the Redis home, users' puts and gets, watch
 * buckets), node.c (the lease, the membership view and the sweep of
 * dead epochs) and nodeinfo.c (the nodes' summaries). Nothing else
 * includes it.
 */
#ifndef CLUSTER_INTERNAL_H
#define CLUSTER_INTERNAL_H

#include <stdatomic.h>

#include "buf.h"
#include "cluster.h"
#include "wheel.h"

#define CLUSTER_SELF_MAX  (CLUSTER_NODE_ID_MAX + 1 + 16)
#define CLUSTER_DEAD_MAX  64 /* dead epochs remembered (passed to scripts) */
#define CLUSTER_KEY_MAX   (16 + CLUSTER_APP_MAX + 2 * CLUSTER_SELF_MAX)
#define CLUSTER_RETAIN_MS (30ull * 24 * 3600 * 1000) /* a user's view key: 30 days */
#define CLUSTER_SWEEP_MAX 500                        /* users a sweep step ends at once */
#define CLUSTER_CLAIM_MS  30000

struct cl_worker {
    const struct cluster_hooks *hooks; /* NULL while not attached */
    void *wctx;
};

/* A dead node epoch (node.c): swept once its grace is over. */
struct cl_dead {
    char member[CLUSTER_SELF_MAX + 1];
    uint64_t deadline;  /* Redis ms its lease ended */
    uint64_t seen_dead; /* loop ms since which this node saw it dead, renewing its own */
    bool restarted;     /* this node's own previous epoch: no grace */
    bool prev;          /* this process's previous epoch (swept while away): listed at
                           once, swept after the grace, kept until swept */
    bool sweeping;      /* this node's claim or sweep is in flight */
};

struct cl_node {
    struct wheel_timer renew_timer;
    bool renewing; /* a renewal is in flight */
    bool renewed;  /* this epoch's lease was registered: its loss means swept */
    struct cl_dead dead[CLUSTER_DEAD_MAX];
    unsigned ndead;
    struct buf dead_list; /* "m1,m2": the dead past their grace, for scripts */
    struct buf live;      /* "m1,m2": the other live epochs in the last lease reply */
};

struct cluster {
    struct cluster_config cfg;
    struct bus *bus;
    unsigned nworkers;
    char self[CLUSTER_SELF_MAX + 1]; /* <node-id>.<epoch hex> */
    struct cl_worker *ws;            /* [nworkers] */
    /* home worker only: */
    struct loop *loop;
    struct redis *r;
    int s_put, s_uread, s_take, s_renew, s_rput, s_rget; /* script handles */
    struct cl_node node;
    /* any thread: */
    atomic_bool degraded;
    _Atomic uint64_t puts, gets, views_in, swept;
    atomic_uint nodes_live;
};

/* Key and channel names (cluster.c). */
void cl__user_keys(const struct cluster *cl, const char *uid, char s[CLUSTER_KEY_MAX],
                   char a[CLUSTER_KEY_MAX]);
/* uid's session counts per node epoch (the session cap). */
void cl__seats_key(const struct cluster *cl, const char *uid, char out[CLUSTER_KEY_MAX]);
void cl__node_index(const struct cluster *cl, const char *member, char out[CLUSTER_KEY_MAX]);
/* Whether a put's online/offline transition goes to its worker's
 * webhooks (cluster_hooks.user_hook): not at all, as a user the putting
 * worker knows to be visible, or for the owner to decide (a sweep). */
enum cl_hook { CL_HOOK_NONE = 0, CL_HOOK_VISIBLE, CL_HOOK_ASK };

/* Runs the user script for uid with this node's or a dead epoch's field
 * (home only); publishes the view when it changed. reply_to: the worker
 * to tell (its hooks.view, own = true), or -1 for none; hook: what its
 * transition, if any, tells the webhooks. */
void cl__put(struct cluster *cl, const char *uid, const char *field, const char *contrib,
             uint64_t seen, int reply_to, enum cl_hook hook);

/* This start's or a new random epoch: cl->self = "<node-id>.<epoch>". */
void cl__pick_epoch(struct cluster *cl);
/* Whether member ("<node>.<epoch>", len bytes) was live in the last
 * lease reply (node.c; home). */
bool cl__is_live(const struct cluster *cl, const char *member, size_t len);
/* Whether member is in the dead list (node.c; home). */
bool cl__is_dead(const struct cluster *cl, const char *member, size_t len);
/* Whether member's lease expired (in its grace or past it; node.c; home). */
bool cl__lease_expired(const struct cluster *cl, const char *member, size_t len);
/* The dead list changed, or also (comma-separated, "" for none) names
 * epochs another node swept before this one listed them: every worker
 * hears the list and those (hooks.dead; cluster.c). */
void cl__dead_changed(struct cluster *cl, const char *also);
/* Tells every worker to put its local users again (hooks.health, up). */
void cl__reassert(struct cluster *cl);

/* node.c: the lease (home only). */
void cl__node_start(struct cluster *cl);
void cl__node_stop(struct cluster *cl);
/* Comma-separated dead epochs past their grace ("" when none). */
const char *cl__dead_list(const struct cluster *cl);
/* The wall ms of dead epoch member's last renewal (its users' last seen
 * when their contribution goes), or now when it is not known. */
uint64_t cl__dead_seen(const struct cluster *cl, const char *member);

#endif
