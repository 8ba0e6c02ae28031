/* SPDX-License-Identifier: MIT */
/*
 * relay.c - test builds only: GET /test/broadcast, a WebSocket endpoint
 * where every text message a client sends is delivered to every client
 * connected to it, on every worker. It exercises, end to end, the path the
 * presence engine's fan-out takes: the message is framed ONCE into a
 * refcounted payload, one bus message per worker carries a reference to
 * it, and each worker queues the same payload on each of its local
 * sockets (coalesced into one writev per socket per iteration).
 */
#include "testing.h"

#include <stdlib.h>

#include "bus.h"
#include "list.h"
#include "util.h"
#include "worker.h"
#include "ws.h"
#include "wsconn.h"

struct relay_msg {
    struct bus_msg msg;    /* first member */
    struct payload *frame; /* referenced: a framed WebSocket text message */
};

struct relay_conn {
    struct list link;  /* conns[worker id] */
    struct wsconn *ws; /* borrowed: the connection owns the wsconn */
};

/* Each worker's /test/broadcast sockets, touched by that worker only. */
static struct list conns[CONFIG_WORKERS_MAX];

static struct list *conns_of(unsigned worker_id)
{
    struct list *l = &conns[worker_id];

    if (!l->next)
        list_init(l); /* zero-filled: first use on this worker */
    return l;
}

static void relay_msg_free(struct bus_msg *m)
{
    struct relay_msg *r = (struct relay_msg *)m;

    payload_unref(r->frame);
    free(r);
}

/* Worker w delivers one frame to all its local relay sockets. */
static void on_relay_msg(struct worker *w, struct bus_msg *m)
{
    struct relay_msg *r = (struct relay_msg *)m;
    struct list *pos, *tmp;

    list_foreach_safe(pos, tmp, conns_of(w->id))
    {
        wsconn_send_payload(container_of(pos, struct relay_conn, link)->ws, r->frame);
    }
    relay_msg_free(m);
}

static void relay_on_open(struct wsconn *ws)
{
    struct net_ctx *nc = wsconn_app_data(ws);
    struct relay_conn *rc = xcalloc(1, sizeof(*rc));

    rc->ws = ws;
    list_insert_tail(conns_of(nc->worker->id), &rc->link);
    wsconn_set_user_data(ws, rc);
}

static void relay_on_message(struct wsconn *ws, bool binary, const char *p, size_t n)
{
    struct worker *w = ((struct net_ctx *)wsconn_app_data(ws))->worker;
    struct payload *frame;

    if (binary) {
        wsconn_close(ws, 1003, "text only");
        return;
    }
    frame = ws_frame_payload(WS_OP_TEXT, p, n);
    for (unsigned i = 0; i < w->srv->nworkers; i++) {
        struct relay_msg *r = xcalloc(1, sizeof(*r));

        r->msg.type = WORKER_MSG_RELAY;
        r->msg.free = relay_msg_free;
        r->frame = payload_ref(frame);
        bus_send(w->srv->bus, w->id, i, &r->msg);
    }
    payload_unref(frame);
}

static void relay_on_close(struct wsconn *ws, unsigned code)
{
    struct relay_conn *rc = wsconn_user_data(ws);

    (void)code;
    if (!rc)
        return;
    list_del(&rc->link);
    free(rc);
    wsconn_set_user_data(ws, NULL);
}

const struct wsconn_app relay_app = {
    .on_open = relay_on_open,
    .on_message = relay_on_message,
    .on_close = relay_on_close,
};

void testing_register(void)
{
    worker_on_msg(WORKER_MSG_RELAY, on_relay_msg);
}
