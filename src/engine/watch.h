/* SPDX-License-Identifier: MIT */
/*
 * watch.h - watch lists: which sockets watch which users, and the fan-out
 * of a user's transitions to them.
 *
 * Watch lists are subscriptions per worker, not per socket. Owner side
 * (struct sub): the owner of a user keeps, per viewer (struct subv), its
 * privacy class and the mask of workers where it watches, and sends each
 * of those workers ONE message per transition carrying one pre-framed
 * payload per class whose bytes changed (watch__republish()). Watcher side
 * (struct watch): each worker keeps the last frame per class and its local
 * watchers grouped by viewer (struct wview), writes the shared payload to
 * them, and gives a later local watcher its snapshot without asking the
 * owner. This is the seam the Redis mode will use: owners become nodes,
 * worker masks become channels.
 */
#ifndef WATCH_H
#define WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus.h"
#include "hmap.h"
#include "list.h"
#include "msg.h"
#include "presence.h"
#include "privacy.h"

struct client;
struct engine;

struct watch_link {
    struct list link;    /* view->links */
    struct wview *view;  /* the viewer group it belongs to */
    struct watch *watch; /* the user watched */
    struct client *client;
    bool need_snapshot;      /* waiting for the owner's OP_VIEW */
    int8_t online_sent;      /* an online-only adapter's (encode_watch): 1/0 last told, -1 none */
    bool list_tier;          /* "tier":"list": transitions wait for the client's window */
    struct payload *pending; /* list tier: the latest frame not yet sent (referenced) */
    struct list pend;        /* in struct watch_tier.links while pending is set */
};

/* A client's list-tier window (allocated at its first list-tier link,
 * freed with its last link): the links with a pending frame, sent together
 * as one presence_list frame watch-batch-ms after the first of them. */
struct watch_tier {
    struct wheel_timer timer;
    struct list links; /* struct watch_link.pend */
    struct client *client;
};

/* Watcher side: the local watchers of one user that are the same viewer
 * (so in the same privacy class). */
struct wview {
    struct list node;     /* watch->views */
    struct list links;    /* struct watch_link.link */
    struct payload *sent; /* the frame last delivered to these watchers */
    int cls;              /* the owner's verdict; -1 until OP_VIEW */
    char viewer[];        /* "" = anonymous */
};

struct watch {
    struct hmap_node node; /* e->watches, by uid */
    char uid[PRESENCE_ID_MAX + 1];
    struct list views;                        /* struct wview.node */
    struct payload *last[PRIVACY_NCLASS];     /* last frame per class, NULL = none yet */
    struct payload *last_sse[PRIVACY_NCLASS]; /* the same as SSE events, made on need */
    uint64_t sse_id;                          /* SSE event ids of this user's stream */
    uint8_t online;                           /* bit k: class k's last frame shows online */
};
_Static_assert(PRIVACY_NCLASS <= 8, "struct watch's online has a bit per class");

/* Owner side: one viewer (a user id, "" = anonymous) watching a user. */
struct subv {
    struct list link; /* sub->viewers */
    uint64_t workers; /* bit i: worker i has this viewer watching */
    int cls;          /* its privacy class */
    bool contact;     /* the relation, kept for re-classification */
    bool blocked;
    char viewer[];
};
_Static_assert(CONFIG_WORKERS_MAX <= 64, "struct subv's workers has a bit per worker");

struct sub {
    struct hmap_node node; /* e->subs, by uid (owner side) */
    char uid[PRESENCE_ID_MAX + 1];
    struct list viewers;                   /* struct subv.link */
    unsigned ncls[PRIVACY_NCLASS];         /* viewers per class */
    struct payload *lastf[PRIVACY_NCLASS]; /* key (watch.c view_key) of the last frame per class */
};

/* ---- watcher side: the operations on a client's list ---- */

/* c's link to uid, with its index in c->x->links in *idx, or NULL. */
struct watch_link *watch__find_link(struct client *c, const char *uid, size_t *idx);
/* The key c's watches and event stream are counted under for its user
 * (ratelimit_observer_key() of its user id and its connection's address,
 * as observer-query-rate charges), made at the first call and kept with c. */
const char *watch__observer_key(struct client *c);
/* Reserves n more links for c's user, over all its connections on every
 * worker (max-watch-per-user; an anonymous client, with no user id, is
 * not counted: always true). True when they fit: then c makes exactly n
 * watch__add() calls of users it does not watch yet (each link is handed
 * back by watch__remove()). False reserves nothing. */
bool watch__reserve(struct client *c, size_t n);
/* Hands back n reserved links that will not be added after all. */
void watch__unreserve(struct client *c, size_t n);
/* Adds uid (valid, not watched by c yet, reserved) to c's list: the
 * snapshot comes from the local copy at once, or from the owner (asked on
 * a new viewer). */
void watch__add(struct client *c, const char *uid);
/* Sets the tier of c's link to uid (if watched): list = true batches its
 * transitions over watch-batch-ms, false sends each at once (a pending
 * one goes out now). */
void watch__set_tier(struct client *c, const char *uid, bool list);
/* Removes c's link idx (the owner told when its viewer has no watcher
 * left on this worker) and hands its reservation back. */
void watch__remove(struct client *c, size_t idx);

/* ---- owner side ---- */

/* uid's subscription, or NULL when nobody watches it. */
struct sub *watch__find_sub(struct engine *e, const char *uid);
/* Sends viewer v its class and frame (OP_VIEW) on the workers in the mask. */
void watch__send_view(struct engine *e, const struct presence_view *truth, const struct subv *v,
                      uint64_t workers);
/* Sends the frames of every class in use whose bytes changed since the
 * last ones (nothing at all when none did). */
void watch__republish(struct engine *e, struct sub *s, const struct presence_view *truth);
/* Frees every subscription (engine_free). */
void watch__subs_free(struct engine *e);

/* The op-table handlers. Owner side (both wait for the privacy data they
 * need: engine__privacy_ready()): */
engine_op_fn watch__on_watch;   /* OP_WATCH */
engine_op_fn watch__on_unwatch; /* OP_UNWATCH */
/* Watcher side: */
engine_op_fn watch__on_view;     /* OP_VIEW: a viewer's class and frame */
engine_op_fn watch__on_presence; /* OP_PRESENCE: a transition */

#endif
