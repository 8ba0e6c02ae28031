/* SPDX-License-Identifier: MIT */
/*
 * msg.h - the engine's bus message: its ops, the one message struct all of
 * them share, and the op table that dispatches them (msg.c).
 *
 * Every interaction between a client's worker and the owner of a user or a
 * room is one struct emsg on the bus. The op says what it is; msg.c maps
 * each op to its handler in one table (grep "[OP_HEARTBEAT]"). Per-sender
 * FIFO order of the bus keeps a client's messages, and an owner's events,
 * in order.
 */
#ifndef MSG_H
#define MSG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adapter.h"
#include "bus.h"
#include "list.h"
#include "presence.h"
#include "privacy.h"
#include "store.h"
#include "util.h"
#include "worker.h"

struct engine;

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
    OP_RCAST,    /* any worker -> R: an application event for the room's subscribers
                  * (text = event, emoji = data, uid = sender, conn_id = excluded) */
    /* privacy (engine_privacy.c) */
    OP_PRIVACY,     /* client worker -> U: set settings (priv, arg = fields given) */
    OP_PRIV_HELLO,  /* owner -> itself: tell session conn_id its settings when known */
    OP_PRIV_EVENT,  /* U -> client worker: conn_id's privacy message was handled */
    OP_ADMIN,       /* HTTP worker -> U: an admin call (arg = enum admin_op) */
    OP_ADMIN_ROOMS, /* HTTP worker -> any: list rooms (arg 0), one's members (1), top limit (2) */
    OP_ADMIN_NODE,  /* HTTP worker -> the cluster home (worker 0): this node's summary */
    /* blocks inside rooms (engine_room_block.c) */
    OP_RBLOCK,   /* U -> every worker: uid blocks (arg 1) / unblocks (0) viewer */
    OP_RREFRESH, /* client worker -> R: a fresh snapshot for conn_id if uid is shown */
    OP_RCOUNT,   /* client worker -> R: its sockets in the room (index; room_count.h) */
    OP_RLIST,    /* HTTP worker -> every worker: its occupied rooms (engine_list_rooms) */
    OP_COUNT     /* not an op: the size of the op table */
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
    ADMIN_GET_USER, /* sessions, presence and settings (engine_admin.c) */
};

/* A new session against the session cap across nodes (em->admit;
 * cluster_user.h). */
enum admit {
    ADMIT_UNCHECKED, /* not checked yet (or not clustered) */
    ADMIT_YES,       /* it fits (room was made) */
    ADMIT_NO,        /* every session of the user has a live connection */
};

/* Who holds the HTTP session an OP_HTTP_BEAT names when this node does
 * not (em->hs; cluster_http.h). */
enum hs_lookup {
    HS_UNCHECKED, /* not asked yet (or not clustered) */
    HS_NONE,      /* nobody: start a new session */
    HS_FORWARDED, /* another node: the beat or leave was passed on to it */
    HS_ORPHAN,    /* a dead node: take the session over, same id */
};

/* The bytes of a client's ref kept as JSON text, NUL included. */
#define MSG_REF_MAX 64

/* The casts of one room tick in one OP_REVENT (engine_room.c): their
 * frames back to back in the message's frame per protocol, so that a
 * subscriber gets them as one piece; cast i's bytes in protocol p's frame
 * end at v[i].end[p] (they begin where cast i - 1's end, the first at 0;
 * none for p: empty), and do not go to connection v[i].exclude (0: none)
 * nor to the sockets of the users its sender v[i].from blocks.
 * Immutable once sent; one copy per message. */
struct emsg_casts {
    size_t n;
    struct emsg_cast {
        uint64_t exclude;
        uint32_t end[ADAPTER_MAX];
        char from[PRESENCE_ID_MAX + 1]; /* its sender ("": none): skipped for those it blocks */
    } v[];
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
    int8_t arg;        /* op-specific small value */
    uint8_t device;    /* OP_START: enum presence_device */
    uint8_t priv_mask; /* OP_PRIVACY/ADMIN set: fields given */
    bool has_since;    /* OP_RJOIN*: since is set */
    bool unfiltered;   /* OP_QUERY from the admin API */
    bool parked;       /* owned by a puser: do not free */
    bool reread;       /* a settings write that re-read stale settings */
    uint8_t admit;     /* OP_START/OP_HTTP_BEAT: enum admit, the cap across nodes */
    uint8_t hs;        /* OP_HTTP_BEAT: enum hs_lookup, who holds its session; OP_START
                        * with a resume: HS_NONE once another node was asked (cluster_resume.h) */
    uint8_t proto;     /* room joins and subscriptions: the client's protocol (adapter.h) */
    uint8_t online;    /* OP_PRESENCE/OP_VIEW: bit k set when class k sees the user online */
    uint16_t limit;    /* OP_RJOIN*: members this join may make, 0 = no cap of its own */
    int err;        /* OP_STARTED/OP_REPLY: 0 or a PRESENCE_E_*; OP_RSTATE: < 0 = the join failed */
    uint32_t index; /* OP_QUERY/OP_ANSWER: position in the answer; room joins,
                     * refreshes and OP_RSTATE: the room link's join number */
    uint64_t conn_id;    /* the client connection concerned */
    uint64_t expires_in; /* OP_STATUS/OP_CUSTOM: ms, 0 = none */
    uint64_t version;    /* OP_VIEW/OP_PRESENCE */
    uint64_t query;      /* OP_QUERY/OP_ANSWER: the origin's struct query */
    uint64_t born_us;    /* OP_PRESENCE/OP_REVENT: time_mono_us() of the owner's event,
                          * observed as presenced_fanout_seconds once delivered; 0 = none */
    const char *uid;
    const char *sid;
    const char *ref;       /* the client's ref as JSON text ("" = none) */
    const char *room;      /* room ops */
    const char *viewer;    /* watch/query: who looks ("" = anonymous) */
    uint64_t epoch;        /* OP_RJOIN*: the client's epoch (resume) */
    uint64_t since;        /* OP_RJOIN*: the client's seq, with has_since */
    char *text;            /* OP_CUSTOM; OP_RLIST: the namespace listed; owned */
    char *emoji;           /* OP_CUSTOM, owned */
    struct payload *frame; /* OP_VIEW/OP_PRESENCE/OP_REPLY, referenced */
    /* OP_PRESENCE: per class, NULL = unchanged. OP_REPLY, OP_RSTATE and
     * OP_REVENT: frames[p] is protocol p's frame for p != ADAPTER_DEFAULT
     * (frame is the default's; NULL = nothing for that protocol), read
     * with emsg_frame_of(). */
    struct store_privacy priv; /* OP_PRIVACY, OP_ADMIN set */
    struct payload *frames[PRIVACY_NCLASS];
    struct engine *eng; /* a write's engine (store callback) */
    char **ids;         /* OP_ADMIN contacts, OP_RINFO the reader's blockers: owned copies */
    size_t nids;
    struct list park;         /* waiting in a struct puser */
    struct emsg_casts *casts; /* OP_REVENT of a tick's casts (above), owned; else NULL */
};

_Static_assert(ADAPTER_MAX <= PRIVACY_NCLASS, "em->frames holds a frame per protocol");

/* The frame of em (OP_REPLY, OP_RSTATE, OP_REVENT) for protocol proto,
 * borrowed; NULL when it carries none for that protocol. */
static inline struct payload *emsg_frame_of(const struct emsg *em, unsigned proto)
{
    return proto == ADAPTER_DEFAULT ? em->frame : em->frames[proto];
}

/* Moves the frames of fs (one per protocol, any may be NULL) into em:
 * em takes over fs's references and fs is left empty. */
static inline void emsg_take_frames(struct emsg *em, struct adapter_frames *fs)
{
    em->frame = fs->f[ADAPTER_DEFAULT];
    for (unsigned p = 1; p < ADAPTER_MAX; p++)
        em->frames[p] = fs->f[p];
    memset(fs, 0, sizeof(*fs));
}

/* A handler of one op (the op table in msg.c). It may keep em by setting
 * em->parked (engine_privacy.c parks it); otherwise em is freed after it
 * returns. */
typedef void engine_op_fn(struct engine *e, struct emsg *em);

/* The empty id a client's heap uid and sid, and a message's ids, point to
 * when unset (never NULL). */
extern char engine__no_id[1];

/* Sets an id of a message (uid, sid, room, viewer) to a copy of at most
 * PRESENCE_ID_MAX bytes of v (NULL or "" = unset), freeing the previous. */
static inline void emsg_set_id(const char **field, const char *v)
{
    if (*field != engine__no_id)
        free((void *)*field);
    *field = v && v[0] ? xstrndup(v, strnlen(v, PRESENCE_ID_MAX)) : engine__no_id;
}

/* Sets a message's ref from the client's ref text (at most MSG_REF_MAX - 1
 * bytes of JSON). */
static inline void emsg_set_ref(struct emsg *em, const char *ref)
{
    if (em->ref != engine__no_id)
        free((void *)em->ref);
    em->ref = ref && ref[0] ? xstrndup(ref, strnlen(ref, MSG_REF_MAX - 1)) : engine__no_id;
}

/* Frees a message and everything it owns or references (its bus free). */
void emsg_free(struct bus_msg *m);
/* A zeroed message of op for connection conn_id (0: none), ids unset.
 * Aborts on OOM. */
struct emsg *emsg_new(enum engine_op op, uint64_t conn_id);

/* The worker that accepted connection conn_id (its top 16 bits). */
static inline unsigned worker_of_conn(uint64_t conn_id)
{
    return (unsigned)(conn_id >> 48);
}

/* Runs the handler of m's op (m is a struct emsg) from the op table, on
 * worker w's engine, then frees m unless it got parked. The worker's
 * handler for WORKER_MSG_ENGINE (registered by engine_register()), so a
 * bus message reaches its op in one call; also the entry of parked
 * messages that run again (engine_privacy.c) and of messages an owner
 * hands itself. */
void engine__dispatch(struct worker *w, struct bus_msg *m);

#endif
