/* SPDX-License-Identifier: MIT */
/*
 * client.h - one socket of this worker (a WebSocket client, or an event
 * stream) and its lifetime: made by engine_client_prepare() at the
 * upgrade, opened and closed by the protocol adapter (client__open(),
 * client__close()), authenticated by tokens under auth = jwt.
 *
 * A socketless client (Phoenix's long-poll session, docs/architecture.md)
 * has no connection of its own: its adapter holds what it is sent until
 * a request fetches it, and ends it through the adapter's close. It gets
 * an id of its own (client__open_socketless()), in its worker's range
 * with CLIENT_SOCKETLESS_BIT set, so no connection ever has it.
 *
 * A client's session lives on its user's owner (session.h); its watch
 * links (watch.h) and room links (engine_room.h) are freed with it.
 */
#ifndef CLIENT_H
#define CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "adapter.h"
#include "config.h"
#include "engine_state.h"
#include "hmap.h"
#include "jwt.h"
#include "list.h"
#include "msg.h"
#include "pool.h"
#include "presence.h"
#include "sse.h"
#include "wsconn.h"

struct watch_link;
struct room_link;
struct rblock;

/* What a client rarely needs (an event stream, a watch list, a rooms
 * claim, a privacy change in flight, the query-rate bucket, blockers of
 * its user), allocated at first use by client_x() and freed with the
 * client: an ordinary idle socket has none of it. */
struct client_x {
    struct sse_stream *sse;        /* an event stream (GET /v1/presence/events) */
    struct watch_link **links;     /* the users watched (at most max_watch) */
    uint32_t nlinks, caplinks;     /* links in use / allocated */
    char *room_claims;             /* the token's "rooms" claim packed (jwt_rooms_pack()) */
    uint64_t ephemeral_hold_until; /* loop ms: drop its ephemerals until then */
    double qtokens;                /* query-rate bucket: ids that may be queried now */
    uint64_t qlast;                /* loop ms of the last refill */
    struct rblock *rblock;         /* engine_room_block.c: a blockers record of its own */
    struct watch_tier *tier;       /* watch.c: the list-tier window, NULL when no such link */
    char *okey;     /* watch.c: the observer key its watches and stream count under */
    void *adata;    /* its protocol adapter's state, freed by the adapter's release() */
    uint64_t sl_id; /* a socketless client's id (client__open_socketless()), else 0 */
    const char *ns; /* another app's namespace prefix (ns.h, apps.c's storage), else NULL */
};

/* The bit that marks a socketless client's id (below the worker's bits). */
#define CLIENT_SOCKETLESS_BIT (1ull << 47)

/* The ids stored in the client itself (uid, NUL, sid, NUL) when both fit:
 * a server-made session id (32 characters) and a user id of up to 21. */
#define CLIENT_IDS_INLINE 56
_Static_assert(CLIENT_IDS_INLINE <= 64, "struct client's sid_off has 6 bits");
/* The other bit-fields of struct client and what bounds their values. */
_Static_assert(CONFIG_WORKERS_MAX <= 128, "struct client's owner has 7 bits");
_Static_assert(PRESENCE_DEVICE_COUNT <= 8, "struct client's device has 3 bits");
_Static_assert(ADAPTER_MAX <= 4, "struct client's proto has 2 bits");
#define CLIENT_BUDGET_FREE 7  /* budgeted messages a connection sends before flow.c keeps state */
#define CLIENT_BAD_MAX     31 /* what bad_in_a_row can count to (5 bits) */

/*
 * One socket of this worker (a WebSocket client, or an event stream). Kept
 * to one 144-byte pool object for an idle authenticated socket: the rare
 * parts live in struct client_x, the uid and sid inline (read them with
 * client_uid()/client_sid(), set them with client_set_uid()/_sid()), one
 * room link inline (engine_room_client.c), the connection id read from the
 * connection (client_conn_id()), and the timer of its auth deadline or
 * token expiry shared with the sockets due about then (engine_expiry.c).
 */
struct client {
    struct hmap_node node; /* e->clients, by client_conn_id() */
    struct engine *e;
    struct wsconn *ws;         /* NULL before open, and for an event stream */
    struct client_x *x;        /* NULL until a rare part is needed (client_x()) */
    uint64_t last_beat;        /* loop ms of the last forwarded heartbeat */
    union {                    /* the rooms this socket is subscribed to (engine_room_client.c): */
        struct room_link *one; /* nrlinks <= 1: the only one, inline */
        struct room_link **many; /* else an array of pow2ceil(nrlinks) */
    } rl;
    struct list auth_link; /* auth=jwt: in its deadline's group (engine_expiry.c) */
    int64_t deadline;      /* auth=jwt: the current token's exp (s) once authed,
                            * before that the auth deadline (loop ms) */
    uint32_t nrlinks;
    unsigned owner : 7;        /* worker that owns uid (< CONFIG_WORKERS_MAX) */
    unsigned device : 3;       /* enum presence_device */
    unsigned bad_in_a_row : 5; /* the adapter's count of rejected messages (<= CLIENT_BAD_MAX) */
    unsigned resume : 1;       /* sid names a session to resume */
    unsigned started : 1;      /* the owner confirmed the session */
    unsigned authed : 1;       /* auth=jwt: a valid token was presented */
    unsigned device_claim : 1; /* the device came from the token */
    unsigned rb_none : 1;      /* engine_room_block.c: nobody blocks uid (rb_none) */
    unsigned ids_heap : 1;     /* the ids did not fit: ids.heap */
    unsigned sid_off : 6;      /* inline ids: where the sid starts */
    unsigned proto : 2;        /* its protocol adapter's id (adapter.h), set at open */
    unsigned budget_free : 3;  /* flow.c: budgeted messages sent before it keeps buckets */
    union {
        char in[CLIENT_IDS_INLINE]; /* "uid\0sid\0", "" when unset */
        struct {
            char *uid, *sid; /* pool copies, or engine__no_id when unset */
        } heap;
    } ids;
};

/* The id of c's connection (0 before it opens). */
static inline uint64_t client_conn_id(const struct client *c)
{
    if (c->ws)
        return wsconn_to_conn(c->ws)->id;
    if (!c->x)
        return 0;
    return c->x->sse ? sse_conn(c->x->sse)->id : c->x->sl_id;
}

/* True for an event stream's client (GET /v1/presence/events). */
static inline bool client_is_stream(const struct client *c)
{
    return !c->ws && c->x && c->x->sse;
}

/* True for a socketless client (client__open_socketless()). */
static inline bool client_is_socketless(const struct client *c)
{
    return !c->ws && c->x && c->x->sl_id;
}

/* The client's rare parts, allocated (zeroed) on first call. */
static inline struct client_x *client_x(struct client *c)
{
    if (!c->x)
        c->x = pool_alloc(sizeof(*c->x));
    return c->x;
}

/* Frees c's rare parts when none is in use any more (the query-rate
 * bucket's state counts as in use: a fresh one would be full). */
static inline void client_x_trim(struct client *c)
{
    const struct client_x *x = c->x;

    if (x && !x->sse && !x->sl_id && !x->links && !x->room_claims && !x->ephemeral_hold_until &&
        !x->qlast && !x->rblock && !x->okey && !x->adata && !x->ns) {
        pool_free(c->x);
        c->x = NULL;
    }
}

/* The namespace prefix of c's ids (ns.h): "" for the first app's, the
 * native one; another app's for a native socket opened with its ?app=. */
static inline const char *client_ns(const struct client *c)
{
    return c->x && c->x->ns ? c->x->ns : "";
}

/* The user, "" for an anonymous observer; valid until the next set. */
static inline const char *client_uid(const struct client *c)
{
    return c->ids_heap ? c->ids.heap.uid : c->ids.in;
}

/* The session id once started (or asked to resume), else "". */
static inline const char *client_sid(const struct client *c)
{
    return c->ids_heap ? c->ids.heap.sid : c->ids.in + c->sid_off;
}

/* Sets both ids (NULL or "" = unset; either may be the client's current
 * one): inline when they fit together, else pool copies, freeing the
 * previous copies. */
void client__set_ids(struct client *c, const char *uid, const char *sid);

static inline void client_set_uid(struct client *c, const char *uid)
{
    client__set_ids(c, uid, client_sid(c));
}

static inline void client_set_sid(struct client *c, const char *sid)
{
    client__set_ids(c, client_uid(c), sid);
}

static inline void client_free_ids(struct client *c)
{
    client__set_ids(c, NULL, NULL);
}

static inline struct client *find_client(struct engine *e, uint64_t conn_id)
{
    uint64_t h = hash_bytes(&conn_id, sizeof(conn_id));

    for (struct hmap_node *n = hmap_find(&e->clients, h); n; n = hmap_find_next(n, h)) {
        struct client *c = container_of(n, struct client, node);
        if (client_conn_id(c) == conn_id)
            return c;
    }
    return NULL;
}

/* A message of op about c's session (uid, sid and the client's ref). */
static inline struct emsg *session_msg(struct client *c, enum engine_op op, const char *ref)
{
    struct emsg *em = emsg_new(op, client_conn_id(c));

    emsg_set_id(&em->uid, client_uid(c));
    emsg_set_id(&em->sid, client_sid(c));
    emsg_set_ref(em, ref);
    return em;
}

/* The WebSocket of c (made by engine_client_prepare()) opened under the
 * protocol adapter proto (adapter_register()'s id), which encodes and
 * sends everything c gets: c joins e->clients and, unless it must
 * authenticate first, starts its session (session__start()). */
void client__open(struct client *c, struct wsconn *ws, unsigned proto);
/* Gives c (made by engine_client_bare()) a socketless id and puts it in
 * e->clients under protocol proto, whose adapter must have a close op:
 * everything c is sent goes through the adapter's send and send_room. */
void client__attach_socketless(struct client *c, unsigned proto);
/* The same, then opened as client__open() opens a WebSocket's client
 * (the auth deadline, or its session). */
void client__open_socketless(struct client *c, unsigned proto);
/* An anonymous client (opened, no user yet) takes user uid (valid) and
 * asks for its session; the adapter's on_started() runs once it exists. */
void client__start_as(struct client *c, const char *uid);
/* A WebSocket adapter's send (struct proto_adapter): writes f to c's
 * socket, taking a reference. */
void client__ws_send(struct client *c, struct payload *f);
/* A WebSocket adapter's on_close (struct wsconn_app), for sockets whose
 * user data is their client (set at open): closes and frees the client. */
void client__on_ws_close(struct wsconn *ws, unsigned code);
/* Closes c's WebSocket with the engine's close code (docs/protocol.md),
 * or the code its adapter maps it to (close_code). */
void client__ws_close(struct client *c, unsigned code, const char *reason);
/* The same for a socket closed because its session ended for reason end
 * (enum presence_end_reason), which the adapter's close_code sees. */
void client__ws_close_end(struct client *c, unsigned code, int end, const char *reason);
/* c's WebSocket closed: its links go, its owner hears OP_CLOSED (the
 * reconnect grace), and c is freed. */
void client__close(struct client *c);
/* Frees a client that is out of e->clients (or never was in it), with
 * its watch links, room links, rare parts and ids. */
void client__free(struct client *c);

/* True under auth = jwt. */
bool client__auth_jwt(const struct engine *e);
/* Verifies a token against the engine's key: 0, or a negative JWT_E_*. */
int client__verify_token(struct engine *e, const char *tok, size_t n, struct jwt_claims *cl);
/* A verified token for c: takes its identity and room rights and re-arms
 * c's deadline; a first token then starts the session. Returns true for
 * a refresh (c was authed already; the caller checked cl->sub is c's user). */
bool client__take_token(struct client *c, const struct jwt_claims *cl);
/* Closes a client whose deadline passed (4401 before a token, 4403 once
 * its token expired): what e->expired does outside unit tests. */
void client__expire(struct client *c);

/* The op-table handlers of the client side. */
engine_op_fn client__on_reply;      /* OP_REPLY: write em->frame to the socket */
engine_op_fn client__on_kick;       /* OP_KICK: the session resumed elsewhere */
engine_op_fn client__on_priv_event; /* OP_PRIV_EVENT: stop holding ephemerals */

#endif
