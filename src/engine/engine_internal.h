/* SPDX-License-Identifier: MIT */
/*
 * engine_internal.h - what engine.c (sessions, watch lists, HTTP reads) and
 * engine_room.c (rooms) share: the bus message, the per-worker state, the
 * client, and small helpers. Private to those two files.
 */
#ifndef ENGINE_INTERNAL_H
#define ENGINE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"
#include "conn.h"
#include "engine.h"
#include "hmap.h"
#include "jwt.h"
#include "list.h"
#include "net.h"
#include "pool.h"
#include "presence.h"
#include "privacy.h"
#include "proto.h"
#include "room.h"
#include "sse.h"
#include "store.h"
#include "util.h"
#include "worker.h"
#include "ws.h"

struct sse_stream;
struct query;
struct watch_link;
struct room_link;
struct rblock;

enum engine_op {
    OP_START = 1, /* client worker -> owner: start or resume a session */
    OP_STARTED,   /* owner -> client worker: result, welcome may go out */
    OP_HEARTBEAT, /* client worker -> owner */
    OP_ACTIVITY,  /* ditto; arg = active */
    OP_STATUS,    /* ditto; arg = status, expires_in */
    OP_CUSTOM,    /* ditto; text, emoji, expires_in */
    OP_LEAVE,     /* ditto: explicit offline */
    OP_CLOSED,    /* ditto: the socket closed (reconnect grace) */
    OP_ENDED,     /* owner -> client worker: the session ended; arg = reason */
    OP_REPLY,     /* owner -> client worker: frame for one client (ack, error) */
    OP_KICK,      /* owner -> client worker: close this connection (replaced) */
    OP_WATCH,     /* watcher worker -> owner: start sending uid's events */
    OP_UNWATCH,   /* ditto: stop */
    OP_VIEW,      /* owner -> watcher worker: the current view (snapshot) */
    OP_PRESENCE,  /* owner -> watcher worker: a transition */
    OP_QUERY,     /* HTTP worker -> owner: read one user (arg = query kind) */
    OP_HTTP_BEAT, /* HTTP worker -> owner: an HTTP session's heartbeat */
    OP_ANSWER,    /* owner -> HTTP worker: one JSON part of a query's answer */
    /* rooms (engine_room.c); "U" = the user's owner, "R" = the room's owner */
    OP_RJOIN,    /* client worker -> U: join (U records it, forwards to R) */
    OP_RLEAVE,   /* client worker -> U: leave (U forgets it, forwards to R) */
    OP_RJOIN_R,  /* U -> R: join; R answers the client worker with OP_RSTATE */
    OP_RLEAVE_R, /* U -> R: leave (also when the session ended) */
    OP_RPATCH,   /* client worker -> R: metadata patch */
    OP_REPHEM,   /* client worker -> R: an ephemeral message (cursor, typing) */
    OP_RSTATE,   /* R -> client worker: snapshot/deltas for one client; arg = last */
    OP_REVENT,   /* R -> subscribed worker: a delta (arg 0) or ephemeral (arg 1) */
    OP_RUNSUB,   /* worker -> R: no local subscribers left for the room */
    OP_RINFO,    /* HTTP worker -> R: GET /v1/rooms/{id} */
    OP_RSUB,     /* SSE worker -> R: subscribe without joining (event stream) */
    OP_RVIS,     /* U -> R: the user's room visibility (arg) changed */
    /* privacy (engine_privacy.c) */
    OP_PRIVACY,     /* client worker -> U: set settings (priv, arg = fields given) */
    OP_PRIV_HELLO,  /* owner -> itself: tell session conn_id its settings when known */
    OP_PRIV_EVENT,  /* U -> client worker: conn_id's privacy message was handled */
    OP_ADMIN,       /* HTTP worker -> U: an admin call (arg = enum admin_op) */
    OP_ADMIN_ROOMS, /* HTTP worker -> any: list rooms (arg 0) or one's members (1) */
    /* blocks inside rooms (engine_room.c) */
    OP_RBLOCK,   /* U -> every worker: uid blocks (arg 1) / unblocks (0) viewer */
    OP_RREFRESH, /* client worker -> R: a fresh snapshot for conn_id if uid is shown */
};

/* Admin calls on a user's owner (em->arg of OP_ADMIN). */
enum admin_op {
    ADMIN_GET_PRIVACY,
    ADMIN_SET_PRIVACY,
    ADMIN_CONTACTS_REPLACE,
    ADMIN_CONTACTS_ADD,
    ADMIN_CONTACTS_REMOVE,
    ADMIN_BLOCK,
    ADMIN_UNBLOCK,
    ADMIN_KICK,
};

/* One bus message of the engine. Ids and the ref are heap copies sized to
 * fit, set with emsg_set_id()/emsg_set_ref() and immutable after that;
 * unset they point to engine__no_id ("", never NULL, no allocation). A
 * join burst has thousands of messages in flight: with four inline 129-byte
 * id buffers and the ref each was 808 bytes, and the holes they left
 * between long-lived objects stayed in the heap (docs/benchmarks.md W1).
 * text and emoji are owned heap copies; frame is a held reference. */
struct emsg {
    struct bus_msg msg; /* first member; type WORKER_MSG_ENGINE */
    uint8_t op;
    int8_t arg;          /* op-specific small value */
    uint8_t device;      /* OP_START: enum presence_device */
    uint8_t priv_mask;   /* OP_PRIVACY/ADMIN set: fields given */
    bool has_since;      /* OP_RJOIN*: since is set */
    bool unfiltered;     /* OP_QUERY from the admin API */
    bool parked;         /* owned by a puser: do not free */
    bool reread;         /* a settings write that re-read stale settings */
    int err;             /* OP_STARTED/OP_REPLY: 0 or a PRESENCE_E_* */
    uint32_t index;      /* OP_QUERY/OP_ANSWER: position in the answer */
    uint64_t conn_id;    /* the client connection concerned */
    uint64_t expires_in; /* OP_STATUS/OP_CUSTOM: ms, 0 = none */
    uint64_t version;    /* OP_VIEW/OP_PRESENCE */
    uint64_t query;      /* OP_QUERY/OP_ANSWER: the origin's struct query */
    const char *uid;
    const char *sid;
    const char *ref;                        /* the client's ref as JSON text ("" = none) */
    const char *room;                       /* room ops */
    const char *viewer;                     /* watch/query: who looks ("" = anonymous) */
    uint64_t epoch;                         /* OP_RJOIN*: the client's epoch (resume) */
    uint64_t since;                         /* OP_RJOIN*: the client's seq, with has_since */
    char *text;                             /* OP_CUSTOM, owned */
    char *emoji;                            /* OP_CUSTOM, owned */
    struct payload *frame;                  /* OP_VIEW/OP_PRESENCE/OP_REPLY, referenced */
    struct store_privacy priv;              /* OP_PRIVACY, OP_ADMIN set */
    struct payload *frames[PRIVACY_NCLASS]; /* OP_PRESENCE: per class, NULL = unchanged */
    struct engine *eng;                     /* a write's engine (store callback) */
    char **ids; /* OP_ADMIN contacts, OP_RINFO the reader's blockers: owned copies */
    size_t nids;
    struct list park; /* waiting in a struct puser */
};

struct watch_link {
    struct list link;    /* view->links */
    struct wview *view;  /* the viewer group it belongs to */
    struct watch *watch; /* the user watched */
    struct client *client;
    bool need_snapshot; /* waiting for the owner's OP_VIEW */
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
    struct rblock *rblock;         /* engine_room.c: a blockers record of its own */
};

/* The ids stored in the client itself (uid, NUL, sid, NUL) when both fit:
 * a server-made session id (32 characters) and a user id of up to 21. */
#define CLIENT_IDS_INLINE 56
_Static_assert(CLIENT_IDS_INLINE <= 64, "struct client's sid_off has 6 bits");
/* The other bit-fields of struct client and what bounds their values. */
_Static_assert(CONFIG_WORKERS_MAX <= 128, "struct client's owner has 7 bits");
_Static_assert(PRESENCE_DEVICE_COUNT <= 8, "struct client's device has 3 bits");
/* proto_count_error() closes at PROTO_MAX_ERRORS: the count must reach it. */
_Static_assert(PROTO_MAX_ERRORS <= 31, "struct client's bad_in_a_row has 5 bits");

/*
 * One socket of this worker (a WebSocket client, or an event stream). Kept
 * to one 144-byte pool object for an idle authenticated socket: the rare
 * parts live in struct client_x, the uid and sid inline (read them with
 * client_uid()/client_sid(), set them with client_set_uid()/_sid()), one
 * room link inline (engine_room.c), the connection id read from the
 * connection (client_conn_id()), and the timer of its auth deadline or
 * token expiry shared with the sockets due about then (engine_expiry.c).
 */
struct client {
    struct hmap_node node; /* e->clients, by client_conn_id() */
    struct engine *e;
    struct wsconn *ws;           /* NULL before open, and for an event stream */
    struct client_x *x;          /* NULL until a rare part is needed (client_x()) */
    uint64_t last_beat;          /* loop ms of the last forwarded heartbeat */
    union {                      /* the rooms this socket is subscribed to (engine_room.c): */
        struct room_link *one;   /* nrlinks <= 1: the only one, inline */
        struct room_link **many; /* else an array of pow2ceil(nrlinks) */
    } rl;
    struct list auth_link; /* auth=jwt: in its deadline's group (engine_expiry.c) */
    int64_t deadline;      /* auth=jwt: the current token's exp (s) once authed,
                            * before that the auth deadline (loop ms) */
    uint32_t nrlinks;
    unsigned owner : 7;        /* worker that owns uid (< CONFIG_WORKERS_MAX) */
    unsigned device : 3;       /* enum presence_device */
    unsigned bad_in_a_row : 5; /* consecutive rejected messages (< PROTO_MAX_ERRORS) */
    unsigned resume : 1;       /* sid names a session to resume */
    unsigned started : 1;      /* the owner confirmed the session */
    unsigned authed : 1;       /* auth=jwt: a valid token was presented */
    unsigned device_claim : 1; /* the device came from the token */
    unsigned rb_none : 1;      /* engine_room.c: nobody blocks uid (rb_none) */
    unsigned ids_heap : 1;     /* the ids did not fit: ids.heap */
    unsigned sid_off : 6;      /* inline ids: where the sid starts */
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
        return ws_conn(c->ws)->id;
    return c->x && c->x->sse ? sse_conn(c->x->sse)->id : 0;
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

    if (x && !x->sse && !x->links && !x->room_claims && !x->ephemeral_hold_until && !x->qlast &&
        !x->rblock) {
        pool_free(c->x);
        c->x = NULL;
    }
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

/* engine.c: sets both ids (NULL or "" = unset; either may be the
 * client's current one): inline when they fit together, else pool
 * copies, freeing the previous copies. */
void engine__client_set_ids(struct client *c, const char *uid, const char *sid);

static inline void client_set_uid(struct client *c, const char *uid)
{
    engine__client_set_ids(c, uid, client_sid(c));
}

static inline void client_set_sid(struct client *c, const char *sid)
{
    engine__client_set_ids(c, client_uid(c), sid);
}

static inline void client_free_ids(struct client *c)
{
    engine__client_set_ids(c, NULL, NULL);
}

struct watch {
    struct hmap_node node; /* e->watches, by uid */
    char uid[PRESENCE_ID_MAX + 1];
    struct list views;                        /* struct wview.node */
    struct payload *last[PRIVACY_NCLASS];     /* last frame per class, NULL = none yet */
    struct payload *last_sse[PRIVACY_NCLASS]; /* the same as SSE events, made on need */
    uint64_t sse_id;                          /* SSE event ids of this user's stream */
};

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
    struct payload *lastf[PRIVACY_NCLASS]; /* last frame sent per class */
};

struct engine {
    struct worker *w;
    const struct engine_env *env; /* shared by every worker's engine (engine.h) */
    struct net_ctx *nc;           /* this worker's net context (its app is e) */
    uint64_t swept_ms;            /* loop ms of the last observer-rate sweep (engine_tick) */
    struct presence *pres;        /* the users this worker owns */
    struct hmap clients;          /* struct client by conn_id */
    struct hmap watches;          /* struct watch by uid */
    struct hmap subs;             /* struct sub by uid */
    struct room_engine *rooms;    /* the rooms this worker owns */
    struct hmap rsubs;            /* owner side: struct rsub by room id */
    struct hmap lrooms;           /* client side: struct lroom by room id */
    struct hmap srooms;           /* user-owner side: struct sroom (a session's rooms) by sid */
    struct hmap expiries;         /* client side: clients' deadline groups (engine_expiry.c) */
    struct list queries;          /* HTTP reads waiting for answers (freed at shutdown) */
    uint64_t sub_gen;             /* room subscription generations (engine_room.c) */
    /* privacy (engine_privacy.c) */
    struct hmap pusers; /* struct puser by uid: settings cache of owned users */
    struct list plru;   /* struct puser.lru, least recently used first */
    size_t npusers;
    struct store_inbox *inbox; /* this worker's store completions */
    struct loop_io inbox_io;
    bool closing;            /* engine_free: completions only free their context */
    const char *kick_reason; /* during an admin kick: the reason for on_end */
    /* engine_expiry.c closes a client whose deadline passed with this; NULL
     * (always, but in unit tests): the error and close of its socket. */
    void (*expire)(struct client *c);
};

/* The empty id a client's heap uid and sid, and a message's ids, point to
 * when unset (never NULL). */
extern char engine__no_id[1];

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

/* Sets an id of a message (uid, sid, room, viewer) to a copy of at most
 * PRESENCE_ID_MAX bytes of v (NULL or "" = unset), freeing the previous. */
static inline void emsg_set_id(const char **field, const char *v)
{
    if (*field != engine__no_id)
        free((void *)*field);
    *field = v && v[0] ? xstrndup(v, strnlen(v, PRESENCE_ID_MAX)) : engine__no_id;
}

/* Sets a message's ref from the client's ref text (proto_ref_text()). */
static inline void emsg_set_ref(struct emsg *em, const char *ref)
{
    if (em->ref != engine__no_id)
        free((void *)em->ref);
    em->ref = ref && ref[0] ? xstrndup(ref, strnlen(ref, PROTO_REF_MAX - 1)) : engine__no_id;
}

static inline void emsg_free(struct bus_msg *m)
{
    struct emsg *em = (struct emsg *)m;

    emsg_set_id(&em->uid, NULL);
    emsg_set_id(&em->sid, NULL);
    emsg_set_id(&em->room, NULL);
    emsg_set_id(&em->viewer, NULL);
    emsg_set_ref(em, NULL);
    free(em->text);
    free(em->emoji);
    payload_unref(em->frame);
    for (size_t i = 0; i < PRIVACY_NCLASS; i++)
        payload_unref(em->frames[i]);
    for (size_t i = 0; i < em->nids; i++)
        free(em->ids[i]);
    free(em->ids);
    free(em);
}

static inline struct emsg *emsg_new(enum engine_op op, uint64_t conn_id)
{
    struct emsg *em = xcalloc(1, sizeof(*em));

    em->msg.type = WORKER_MSG_ENGINE;
    em->msg.free = emsg_free;
    em->op = (uint8_t)op;
    em->conn_id = conn_id;
    em->uid = em->sid = em->ref = em->room = em->viewer = engine__no_id;
    return em;
}

static inline void send_to(struct engine *e, unsigned to, struct emsg *em)
{
    worker_send(e->w, to, &em->msg);
}

/* send_to() for a message that may wait a few ms (worker_send_lazy()). */
static inline void send_lazy(struct engine *e, unsigned to, struct emsg *em)
{
    worker_send_lazy(e->w, to, &em->msg);
}

static inline unsigned owner_of(struct engine *e, const char *uid)
{
    return bus_route(e->w->srv->bus, uid, strlen(uid));
}

static inline unsigned worker_of_conn(uint64_t conn_id)
{
    return (unsigned)(conn_id >> 48);
}

static inline struct payload *frame_text(struct buf *b)
{
    struct payload *p = ws_frame_payload(WS_OP_TEXT, b->data, b->len);

    buf_release(b);
    return p;
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

/* The JSON inside a server WebSocket frame (unmasked, so the header is
 * 2, 4 or 10 bytes by the 7-bit length field). */
static inline void frame_json(const struct payload *f, const char **p, size_t *n)
{
    unsigned len7 = (unsigned char)f->data[1] & 0x7fu;
    size_t hdr = len7 < 126 ? 2 : len7 == 126 ? 4 : 10;

    *p = f->data + hdr;
    *n = f->len - hdr;
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

/* wall - monotonic, both read now (not the loop's cached time, which would
 * make a converted time jitter by the age of the iteration). */
static inline int64_t wall_offset(struct engine *e)
{
    (void)e;
    return (int64_t)time_wall_ms() - (int64_t)time_mono_ms();
}

static inline void reply(struct engine *e, const struct emsg *req, struct payload *frame)
{
    struct emsg *em = emsg_new(OP_REPLY, req->conn_id);

    em->frame = frame;
    send_to(e, worker_of_conn(req->conn_id), em);
}

static inline void reply_ack(struct engine *e, const struct emsg *req)
{
    struct buf b = {0};

    if (!req->ref[0])
        return;
    buf_append_str(&b, "{\"type\":\"ack\"");
    proto_append_ref(&b, req->ref);
    buf_append_str(&b, "}");
    reply(e, req, frame_text(&b));
}

static inline struct emsg *session_msg(struct client *c, enum engine_op op, const char *ref)
{
    struct emsg *em = emsg_new(op, client_conn_id(c));

    emsg_set_id(&em->uid, client_uid(c));
    emsg_set_id(&em->sid, client_sid(c));
    emsg_set_ref(em, ref);
    return em;
}

static inline bool need_session(struct client *c, const char *ref)
{
    if (c->started)
        return true;
    proto_send_error(c->ws, "no_session",
                     client_uid(c)[0] ? "the session is not started yet"
                                      : "connect with ?user= to have a session",
                     ref);
    return false;
}

static inline struct payload *buf_payload(struct buf *b)
{
    struct payload *p = payload_from(b->data ? b->data : "", b->len);

    buf_release(b);
    return p;
}

/* Frees every struct in m (release, if not NULL, first frees what one
 * owns) and the table itself. engine.c. The structs go through
 * pool_free(), so they may come from pool_alloc() or malloc. */
void engine__free_map(struct hmap *m, size_t node_off, void (*release)(void *owner));

/* Sends a protocol error to the client on connection conn_id (any
 * worker), as an OP_REPLY. engine.c. */
void engine__reply_error(struct engine *e, uint64_t conn_id, const char *code, const char *message,
                         const char *ref);

/* engine.c: handles one engine message; frees it unless it got parked. */
void engine__dispatch(struct engine *e, struct emsg *em);
/* engine.c: the HTTP query machinery's answer encoders for owners */
struct payload *engine__encode_frame(struct engine *e, const struct presence_view *v, int cls);

/* HTTP queries answered by owners (engine.c). */
enum query_kind {
    QUERY_PRESENCE,
    QUERY_LASTSEEN,
    QUERY_BEAT,
    QUERY_ROOM,
    QUERY_ADMIN,       /* one part: "NNN" status code + JSON */
    QUERY_ADMIN_ROOMS, /* one part per worker: room list fragments */
};

/* engine.c: HTTP reads (kind: QUERY_PRESENCE 0 or QUERY_LASTSEEN 1) of
 * the ?user= ids; unfiltered (admin API) skips auth, viewer and rate. */
void engine__http_read(struct conn *c, const struct http_request *req, struct worker *w, int kind,
                       bool unfiltered);
/* Charges n ids to a connection's query-rate bucket (*tokens, *last;
 * *last == 0: a full one) and to its observer's observer-query-rate bucket
 * (the user uid, else the address of conn): both or neither. False when
 * either lacks room, with *why naming that limit for the client. */
bool engine__rate_take(struct engine *e, double *tokens, uint64_t *last, const char *uid,
                       const struct conn *conn, size_t n, const char **why);

/* engine.c: names part i of query q (for a degraded answer). */
void engine__query_set_id(struct query *q, size_t i, const char *id);
/* engine_admin.c: the worker side of OP_ADMIN_ROOMS. */
void engine__admin_rooms(struct engine *e, struct emsg *em);

/* engine_privacy.c (owner side) */
void engine__privacy_init(struct engine *e);
void engine__privacy_free(struct engine *e);
/* True when uid's settings and its relation to viewer are known (or
 * viewer needs none); otherwise parks em (em->parked) behind uid's loads
 * and returns false: engine__dispatch() runs it again when they are in.
 * Also parks behind earlier parked messages of uid, to keep order. */
bool engine__privacy_ready(struct engine *e, struct emsg *em, const char *uid, const char *viewer);
/* The class of viewer for uid (after engine__privacy_ready()); the
 * relation is stored in *contact / *blocked when not NULL. */
int engine__privacy_class(struct engine *e, const char *uid, const char *viewer, bool *contact,
                          bool *blocked);
/* uid's settings (after engine__privacy_ready()) and public state. */
const struct store_privacy *engine__privacy_settings(struct engine *e, const char *uid,
                                                     const struct privacy_public **pub);
/* Owner: encodes the view of uid for class cls. */
struct payload *engine__view_frame(struct engine *e, const struct presence_view *truth, int cls);
void engine__privacy_on_change(struct engine *e, const struct presence_view *old,
                               const struct presence_view *cur);
void engine__subs_free(struct engine *e);
void engine__op_watch(struct engine *e, struct emsg *req, bool on);
void engine__op_privacy(struct engine *e, struct emsg *req);
void engine__op_admin(struct engine *e, struct emsg *req);
void engine__privacy_hello(struct engine *e, struct emsg *req);
/* True while uid is visible in rooms (settings loaded and permitting). */
bool engine__room_visible(struct engine *e, const char *uid);

/* engine_expiry.c: (re)arms c's deadline, c->deadline in the unit
 * c->authed says: when it passes, the socket is closed (4401 without a
 * token, 4403 with an expired one). Disarm before changing c->deadline or
 * c->authed, and before c goes. Both may be called from inside such a
 * close, for any client, including the members of the group whose timer
 * is firing: a group is never freed under its own callback. */
void engine__expiry_arm(struct client *c);
void engine__expiry_disarm(struct client *c); /* no-op when not armed */
void engine__expiry_free(struct engine *e);

/* engine_room.c */
/* True when tok is the room subscription token of holder (a connection id
 * in hex, or "http" for HTTP reads) for room: the lowercase hex
 * HMAC-SHA256 of "<holder>:<room>" under room-token-secret, as the
 * application's backend signs it (like Pusher's channel auth). */
bool engine__room_token_ok(const struct engine *e, const char *holder, const char *room,
                           const char *tok);
/* U side: owner's acknowledged block (or unblock) of target; tells every
 * worker, so that target's sockets stop (or start) seeing owner in rooms. */
void engine__rooms_block_changed(struct engine *e, const char *owner, const char *target,
                                 bool blocked);
/* U side: tells the owners of uid's rooms its new room visibility. */
void engine__rooms_visibility(struct engine *e, const char *uid, bool visible);
struct room_engine *engine__rooms_new(struct engine *e);
bool engine__room_msg(struct engine *e, struct emsg *em); /* true when handled */
bool engine__room_dispatch(struct client *c, const cJSON *root, const char *type, const char *ref,
                           bool *ok);
void engine__rooms_client_closed(struct client *c);
void engine__rooms_session_ended(struct engine *e, const char *sid, const char *uid);
void engine__rooms_free(struct engine *e);
/* Subscribes an event-stream client to room (no membership), resuming
 * after last_event_id ("epoch-seq") when given. */
void engine__room_stream(struct client *c, const char *room, const char *last_event_id);
/* R side of GET /v1/rooms/{id}: the room's info object as seen by a
 * reader blocked by the nblockers users in blockers (not listed, not
 * counted; see room_encode_info_for()). */
void engine__room_info(struct engine *e, const char *room, char *const *blockers, size_t nblockers,
                       struct buf *out);

/* engine.c: the HTTP query machinery rooms reuse */
struct query;
struct query *engine__query_new(struct conn *c, int kind, size_t n);
void engine__answer(struct engine *e, const struct emsg *req, struct payload *part);
/* An event-stream client registered by connection id (freed with the stream). */
struct client *engine__sse_client(struct conn *conn, struct worker *w);

#endif
