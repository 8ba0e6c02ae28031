/* SPDX-License-Identifier: MIT */
/*
 * owner.h - the one seam between the engine and "who owns this user's,
 * this room's and this connection's state", and the way messages reach
 * that owner.
 *
 * Today an owner is a worker of this process: a user or room id hashes
 * to one (bus_route()), a connection belongs to the worker that accepted
 * it (the top bits of its id), and a message is an emsg on the worker bus.
 * Every engine file names owners and sends to them only through these
 * functions, never through bus_route() or bus_send() directly.
 *
 * A Redis-backed owner replaces this header's bodies, not its callers:
 * owner_of_user()/owner_of_room() return a node-or-worker handle (a local
 * worker when the id hashes to this node's slots, else a "remote" handle
 * naming the node), owner_send() serialises the emsg (its op, ids, ref and
 * text are plain values; frames are re-encoded by the receiving node's
 * adapter) onto that node's channel instead of the bus, and the receiving
 * node feeds it to engine__dispatch() as the bus does now. Worker masks
 * of struct subv become channel subscriptions (watch.h). Connection
 * owners stay local: a socket never moves between nodes.
 */
#ifndef OWNER_H
#define OWNER_H

#include <string.h>

#include "bus.h"
#include "engine_state.h"
#include "msg.h"
#include "worker.h"

/* The owner of user uid's sessions, presence and privacy settings. */
static inline unsigned owner_of_user(struct engine *e, const char *uid)
{
    return bus_route(e->w->srv->bus, uid, strlen(uid));
}

/* The owner of room id room's members and resume ring. */
static inline unsigned owner_of_room(struct engine *e, const char *room)
{
    return bus_route(e->w->srv->bus, room, strlen(room));
}

/* The owner of connection conn_id: the worker that accepted it. */
static inline unsigned owner_of_conn(uint64_t conn_id)
{
    return worker_of_conn(conn_id);
}

/* Sends em (taken over) to owner to. */
static inline void owner_send(struct engine *e, unsigned to, struct emsg *em)
{
    bus_send(e->w->srv->bus, e->w->id, to, &em->msg);
    if (bus_backlog(e->w->srv->bus, e->w->id, to) > (uint64_t)e->w->srv->cfg.bus_backlog_max)
        e->congested = true; /* flow.h: the sender stops being read */
}

/* owner_send() for a message that may wait a few ms (bus_send_lazy()). */
static inline void owner_send_lazy(struct engine *e, unsigned to, struct emsg *em)
{
    bus_send_lazy(e->w->srv->bus, e->w->id, to, &em->msg);
    if (bus_backlog(e->w->srv->bus, e->w->id, to) > (uint64_t)e->w->srv->cfg.bus_backlog_max)
        e->congested = true;
}

#endif
