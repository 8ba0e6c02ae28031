/* SPDX-License-Identifier: MIT */
/*
 * engine_state.h - one worker's engine state (struct engine) and the
 * small lookup helpers every engine file uses on it.
 *
 * Each engine file owns some of these fields and says so in its header:
 * client.c the clients, watch.c the watches and subs, engine_room*.c the
 * room maps, engine_privacy.c the settings cache and the store inbox,
 * engine_expiry.c the deadline groups, http_read.c the queries. Only
 * engine.c creates and frees the whole.
 */
#ifndef ENGINE_STATE_H
#define ENGINE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "bus.h"
#include "engine.h"
#include "hmap.h"
#include "list.h"
#include "loop.h"
#include "msg.h"
#include "net.h"
#include "presence.h"
#include "util.h"
#include "worker.h"

struct client;
struct drain;
struct ls_engine;

struct engine {
    struct worker *w;
    const struct engine_env *env; /* shared by every worker's engine (engine.h) */
    struct net_ctx *nc;           /* this worker's net context (its app is e) */
    uint64_t swept_ms;            /* loop ms of the last observer-rate sweep (engine_tick) */
    struct presence *pres;        /* the users this worker owns */
    struct hmap clients;          /* struct client by conn_id (client.c) */
    uint64_t socketless_seq;      /* ids given to socketless clients (client__open_socketless) */
    struct hmap watches;          /* struct watch by uid (watch.c) */
    struct hmap subs;             /* struct sub by uid (watch.c, owner side) */
    struct room_engine *rooms;    /* the rooms this worker owns */
    struct hmap rsubs;            /* owner side: struct rsub by room id */
    struct hmap lrooms;           /* client side: struct lroom by room id */
    bool count_rooms;             /* sockets per room are counted (room_count.c) */
    struct hmap rc_pend;          /* client side: struct rc_pend, counts to send */
    struct hmap rcounts;          /* owner side: struct rcount by room id */
    struct hmap srooms;           /* user-owner side: struct sroom (a session's rooms) by sid */
    struct hmap expiries;         /* client side: clients' deadline groups (engine_expiry.c) */
    struct list queries;          /* HTTP reads waiting for answers (freed at shutdown) */
    uint64_t sub_gen;             /* room subscription generations (engine_room_client.c) */
    uint32_t join_ids;            /* room links' join numbers (engine_room_client.c) */
    /* many nodes (cluster_user.c) */
    struct hmap gviews;                /* struct gview by uid: global views of owned users */
    bool cluster_gone;                 /* engine_free began: no more cluster requests */
    struct hmap crooms;                /* struct croom by room id (cluster_room.c) */
    struct list crdirty;               /* struct croom.dirty_link: rooms with changes to put */
    struct wheel_timer cr_flush;       /* puts the rooms' local changes (cluster_room.c) */
    struct wheel_timer cr_retry;       /* reads again the rooms whose read failed */
    struct wheel_timer reassert_timer; /* the anti-entropy pass, a slice a second */
    uint32_t reassert_pass;            /* the pass in progress (gview.pass) */
    uint64_t reassert_began;           /* loop ms the pass began */
    struct list seats_dirty;           /* struct gview.seats_link: session counts to write */
    struct wheel_timer seats_timer;    /* writes them, SEATS_FLUSH_MS after the first */
    bool seats_armed;                  /* seats_timer is running */
    char *cluster_dead;                /* the last dead list heard (cluster_user.c), or NULL */
    struct hmap hsess;                 /* struct hsess by sid: HTTP sessions (cluster_http.c) */
    struct list hs_parked;             /* HTTP beats waiting to learn who holds their session */
    uint64_t admin_info_ms;            /* loop ms this node's summary was put (engine_admin.c) */
    struct list rs_parked;             /* resumes waiting for a take-over (cluster_resume.c) */
    struct list rs_drops;              /* sessions another node took over, to drop */
    struct wheel_timer rs_timer;       /* drops the first of them when due */
    /* the drain's spread-out closes (drain.c): NULL until it begins */
    struct drain *drain;
    /* saved and restored sessions (persist.c) */
    bool restoring; /* engine_new is putting a clean stop's state back: no webhooks */
    /* durable last seen (lastseen.c) */
    struct ls_engine *lastseen;
    /* webhooks (hooks.c): NULL when none is configured */
    struct hooks *hooks;
    /* privacy (engine_privacy.c) */
    struct hmap pusers; /* struct puser by uid: settings cache of owned users */
    struct list plru;   /* struct puser.lru, least recently used first */
    size_t npusers;
    struct store_inbox *inbox; /* this worker's store completions */
    struct loop_io inbox_io;
    bool closing;            /* engine_free: completions only free their context */
    const char *kick_reason; /* during an admin kick: the reason for on_end */
    /* flow control (flow.c) */
    bool congested;                /* a send found its owner's backlog over the bound */
    struct hmap flows;             /* struct flow_rec by client: budgets in use, pauses */
    uint64_t flows_swept_ms;       /* loop ms of the last flow__tick() sweep */
    struct list paused;            /* struct flow_rec: clients not read for now */
    struct wheel_timer flow_timer; /* looks at the backlogs while some are paused */
    /* How engine_expiry.c closes a client whose deadline passed:
     * client__expire() (engine_new sets it; the unit test of the deadline
     * groups puts a recorder there, as it has no sockets). */
    void (*expired)(struct client *c);
};

static inline struct engine *engine_of(struct worker *w)
{
    return ((struct net_ctx *)w->app)->app;
}

static inline uint64_t str_hash(const char *s)
{
    return hash_bytes(s, strlen(s));
}

static inline void copy_id(char dst[PRESENCE_ID_MAX + 1], const char *src)
{
    size_t n = strnlen(src, PRESENCE_ID_MAX);

    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* The struct that embeds a hmap node (node_off into it) and a string
 * key (a char array at key_off) equal to key, or NULL. */
static inline void *engine__find(const struct hmap *m, const char *key, size_t node_off,
                                 size_t key_off)
{
    uint64_t h = str_hash(key);

    for (struct hmap_node *n = hmap_find(m, h); n; n = hmap_find_next(n, h)) {
        char *owner = (char *)n - node_off;
        if (strcmp(owner + key_off, key) == 0)
            return owner;
    }
    return NULL;
}
#define ENGINE_FIND(type, map, field, key) \
    ((type *)engine__find((map), (key), offsetof(type, node), offsetof(type, field)))

/* Frees every struct in m (release, if not NULL, first frees what one
 * owns) and the table itself. engine.c. The structs go through
 * pool_free(), so they may come from pool_alloc() or malloc. */
void engine__free_map(struct hmap *m, size_t node_off, void (*release)(void *owner));

/* wall - monotonic, both read now (not the loop's cached time, which would
 * make a converted time jitter by the age of the iteration), in µs before
 * rounding, so that it does not jitter by a ms from one call to the next
 * either: a last seen written to the store and read back is the same ms. */
static inline int64_t wall_offset(struct engine *e)
{
    struct timespec ts;
    int64_t mono_us = (int64_t)time_mono_us();

    (void)e;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 - mono_us) / 1000;
}

/* Who owns a user, a room or a connection, and sending to it: owner.h
 * (after struct engine, which it needs). */
#include "owner.h"

#endif
