/* SPDX-License-Identifier: MIT */
/*
 * engine_room.c - rooms on the workers: join, leave, metadata patches,
 * snapshots and resume, deltas and the ephemeral lane (room.h is the core).
 *
 * Three roles, as for presence (engine.h):
 *   - R, the room's owner (bus_route(room id)), runs the room core and, per
 *     room, the mask of workers with local subscribers; each delta or
 *     ephemeral message is framed once by the core and sent once to each of
 *     those workers (OP_REVENT), which write the same payload to their
 *     local subscribers;
 *   - U, the owner of the joining user, records which rooms each session
 *     is in. Joins and leaves travel client -> U -> R, and when a session
 *     ends (leave, TTL, reconnect grace, kick) U sends R the leaves. Since
 *     all of a session's joins and leaves reach R from the same sender, in
 *     order, a session can never stay in a room after it ended (no ghosts);
 *     and since membership follows the session, a page reload within the
 *     grace leaves no trace in the room;
 *   - the client's worker subscribes its socket locally. A new local
 *     subscriber receives nothing until R's answer to its join (snapshot or
 *     missed deltas, OP_RSTATE) arrives; as R sends that after every earlier
 *     delta, the client sees snapshot@N and then exactly N+1, N+2, ...
 * Ephemeral messages are dropped for a socket whose output queue is over
 * half its soft limit: cursors are the first thing to give way, lifecycle
 * deltas never are.
 *
 * Ticks (R side): a room whose ephemerals made ephemeral-tick-deliveries
 * (50,000) or more deliveries in the last full second (messages times
 * members: 50 cursors at 30 Hz in a room of 500 make 750,000) is "hot":
 * its ephemerals are held and sent together every EPH_TICK_MS (33 ms), so
 * each subscriber's worker queues a tick's messages in one iteration and
 * each socket gets one writev per tick instead of one per message. A room
 * stays hot until a second under half that. Other rooms (the usual case: a
 * few cursors, or a small room) send each message at once. Held messages
 * go out before any delta of the room, so a delta never overtakes them.
 *
 * Blocks (the rare path): a WebSocket client reads the users that block
 * its user (store_list_blockers()) before its first join leaves its
 * worker. Only for a client with blockers, the client worker re-encodes
 * each room message for that socket alone: blockers removed from snapshots
 * and deltas, count lowered by the blockers it hides, their ephemerals
 * dropped (see "blocks inside rooms" below). Everyone else gets the shared
 * frame. A client whose user nobody blocks (nearly all of them) points at
 * the shared, never-written rb_none instead of a record of its own. A block or unblock is broadcast
 * (OP_RBLOCK); each socket of the target in a room where the blocker is shown gets a fresh
 * snapshot.
 */
#include "engine_internal.h"

#include <errno.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>

#include <cJSON.h>
#include <openssl/rand.h>

#include "conn.h"
#include "http.h"
#include "httpd.h"
#include "json.h"
#include "log.h"
#include "sse.h"

#include <stdio.h>

struct room_link {    /* 48 bytes: one per joined socket */
    struct list link; /* lroom->links */
    struct lroom *lroom;
    struct client *client;
    struct hidden *hidden; /* NULL while none (nearly always) */
    bool awaiting;         /* no state yet: deltas are not for it */
    bool need_refresh;     /* a block changed before its state was complete */
};

/* The blockers that are members of a link's room, kept out of its model
 * (only a socket whose user is blocked has one; freed when empty). */
struct hidden {
    char **ids; /* heap copies */
    size_t n, cap;
};

/* Client side: the users that block a client's user (rb_get()). */
enum { RB_LOADING, RB_READY };

struct rblock {
    int state;
    bool dirty; /* a block changed while loading: read again */
    char **ids; /* the blockers (heap copies) */
    size_t n, cap;
    struct emsg **pending; /* joins held until the blockers are known */
    size_t npending, cappending;
};

/* The blockers record of every client whose user is blocked by nobody:
 * ready and empty. Shared by all workers, so never written: on_block()
 * gives the client a record of its own before adding to it. A client
 * points at it with its rb_none bit; a record of its own is in its
 * client_x. */
static struct rblock rb_none = {.state = RB_READY};

/* c's blockers record: NULL while never read, else rb_none or its own. */
static struct rblock *rb_get(const struct client *c)
{
    if (c->rb_none)
        return &rb_none;
    return c->x ? c->x->rblock : NULL;
}

static void rb_set(struct client *c, struct rblock *rb)
{
    c->rb_none = rb == &rb_none;
    if (rb && !c->rb_none) {
        client_x(c)->rblock = rb;
    } else if (c->x) {
        c->x->rblock = NULL;
        client_x_trim(c);
    }
}

struct rb_load { /* a store read's context: the client may be gone */
    struct engine *e;
    uint64_t conn_id;
};

static void set_clear(char **v, size_t *n);
static void rb_free(struct rblock *rb);
static bool link_filtered(const struct room_link *l);
static void deliver_filtered(struct room_link *l, struct payload *frame, uint64_t epoch,
                             uint64_t seq, bool bulk);
static void request_refresh(struct room_link *l, const char *user);

struct lroom {             /* client side: local subscribers of a room */
    struct hmap_node node; /* e->lrooms */
    char room[PRESENCE_ID_MAX + 1];
    struct list links;
    uint64_t gen; /* subscription generation (see r_unsub) */
};

/* Ephemeral ticks (see the top of the file). */
#define EPH_TICK_MS 33 /* a hot room's ephemerals go out at most once per tick */

struct held {                /* an ephemeral message waiting for its room's tick */
    struct payload *payload; /* referenced */
    uint64_t epoch;
};

struct rsub {              /* R side: workers subscribed to a room */
    struct hmap_node node; /* e->rsubs */
    char room[PRESENCE_ID_MAX + 1];
    uint64_t workers;        /* bit i: worker i has local subscribers */
    struct engine *e;        /* for the tick timer */
    struct wheel_timer tick; /* armed while messages are held */
    uint64_t tick_due;       /* loop ms the last tick was due (the grid) */
    struct held *held;       /* pool memory; nheld in use */
    size_t nheld, capheld;
    uint64_t eph_window; /* loop ms when the current one-second count began */
    uint32_t eph_count;  /* ephemerals in that second */
    bool hot;            /* ephemerals are held for the tick */
    uint64_t gen[];      /* per worker (nworkers): newest subscription generation seen */
};
_Static_assert(CONFIG_WORKERS_MAX <= 64, "struct rsub's workers has a bit per worker");

/* U side: the rooms of one session, packed in one pool object (32 bytes
 * for one short room id): reallocated to fit on each join (rare next to
 * the session's life), compacted on a leave, freed when in no room. */
struct sroom {
    struct hmap_node node; /* e->srooms, by sid */
    const char *sid;       /* the presence session's own id, borrowed: the
                            * sroom goes when the session ends (on_end) */
    uint32_t len;          /* bytes of rooms in use */
    char rooms[];          /* the room ids, each NUL-terminated, back to back */
};

/* Iterates the room ids r of sroom s. */
#define SROOM_FOREACH(r, s) \
    for (const char *r = (s)->rooms; r < (s)->rooms + (s)->len; r += strlen(r) + 1)

static struct lroom *find_lroom(struct engine *e, const char *room)
{
    return ENGINE_FIND(struct lroom, &e->lrooms, room, room);
}

static struct rsub *find_rsub(struct engine *e, const char *room)
{
    return ENGINE_FIND(struct rsub, &e->rsubs, room, room);
}

static struct sroom *find_sroom(struct engine *e, const char *sid)
{
    uint64_t h = str_hash(sid);

    for (struct hmap_node *n = hmap_find(&e->srooms, h); n; n = hmap_find_next(n, h)) {
        struct sroom *s = container_of(n, struct sroom, node);
        if (strcmp(s->sid, sid) == 0)
            return s;
    }
    return NULL;
}

static unsigned room_owner(struct engine *e, const char *room)
{
    return owner_of(e, room);
}

static struct emsg *room_msg(struct client *c, enum engine_op op, const char *room, const char *ref)
{
    struct emsg *em = session_msg(c, op, ref);

    emsg_set_id(&em->room, room);
    return em;
}

static void room_error(struct engine *e, uint64_t conn_id, int err, const char *ref)
{
    engine__reply_error(e, conn_id, err == ROOM_E_FULL ? "room_full" : "invalid",
                        room_strerror(err), ref);
}

/* ---- R side ---- */

/* Sends one room message to every worker with subscribers to the room. */
static void send_event(struct engine *e, const struct rsub *s, bool droppable, uint64_t epoch,
                       uint64_t seq, struct payload *payload)
{
    for (unsigned i = 0; i < e->w->srv->nworkers; i++) {
        struct emsg *em;

        if (!(s->workers & (1ull << i)))
            continue;
        em = emsg_new(OP_REVENT, 0);
        emsg_set_id(&em->room, s->room);
        em->arg = droppable;
        em->epoch = epoch;
        em->since = seq;
        em->frame = payload_ref(payload);
        send_to(e, i, em);
    }
}

/* Sends the held ephemerals, in order, and forgets them. */
static void release_held(struct engine *e, struct rsub *s)
{
    wheel_del(&s->tick);
    for (size_t i = 0; i < s->nheld; i++) {
        send_event(e, s, true, s->held[i].epoch, 0, s->held[i].payload);
        payload_unref(s->held[i].payload);
    }
    s->nheld = 0;
}

static void on_tick(struct wheel_timer *t, uint64_t now)
{
    struct rsub *s = container_of(t, struct rsub, tick);

    (void)now;
    release_held(s->e, s);
}

/* Arms s's tick for the next point of its grid of EPH_TICK_MS: a tick
 * is due EPH_TICK_MS after the one before, not after the first message it
 * holds, so the wait for that message and a late tick (a busy loop) do not
 * add up: ticks fall due every EPH_TICK_MS, one write per subscriber each.
 * A grid that fell behind (the room was quiet) starts again from now. */
static void start_tick(struct engine *e, struct rsub *s, uint64_t now)
{
    uint64_t due = s->tick_due + EPH_TICK_MS;

    if (due <= now)
        due = now + EPH_TICK_MS;
    s->tick_due = due;
    loop_timer_start(e->w->loop, &s->tick, due - now);
}

/* Counts an ephemeral message against its room's second and holds it for
 * the tick if the room is hot. Returns whether it was held. */
static bool hold_ephemeral(struct engine *e, struct rsub *s, const struct room_event *ev)
{
    uint64_t now = loop_now(e->w->loop);

    if (now - s->eph_window >= 1000) {
        uint64_t enter = (uint64_t)e->w->srv->cfg.ephemeral_tick_deliveries;
        struct room_info info = {0};
        uint64_t deliveries = 0;

        /* A count older than the last second is stale: the room was quiet. */
        if (now - s->eph_window < 2000 && room_get_info(e->rooms, s->room, &info) == 0)
            deliveries = (uint64_t)s->eph_count * info.count;
        s->hot = enter > 0 && deliveries >= (s->hot ? enter / 2 : enter);
        s->eph_window = now;
        s->eph_count = 0;
    }
    s->eph_count++;
    if (!s->hot)
        return false;
    if (s->nheld == s->capheld) {
        s->capheld = s->capheld ? s->capheld * 2 : 16;
        s->held = pool_realloc(s->held, s->capheld * sizeof(*s->held));
    }
    s->held[s->nheld++] = (struct held){payload_ref(ev->msg.payload), ev->epoch};
    if (!wheel_is_linked(&s->tick))
        start_tick(e, s, now);
    return true;
}

static void rsub_release(void *owner)
{
    struct rsub *s = owner;

    wheel_del(&s->tick);
    for (size_t i = 0; i < s->nheld; i++)
        payload_unref(s->held[i].payload);
    pool_free(s->held);
}

static void fan_out(struct engine *e, const struct room_event *ev)
{
    struct rsub *s = find_rsub(e, ev->room);

    if (!s)
        return;
    if (ev->droppable && hold_ephemeral(e, s, ev))
        return;
    if (s->nheld > 0)
        release_held(e, s); /* nothing overtakes held ephemerals */
    send_event(e, s, ev->droppable, ev->epoch, ev->seq, ev->msg.payload);
}

static void on_room_event(void *ctx, const struct room_event *ev)
{
    fan_out(ctx, ev);
}

static struct payload *frame_room_json(const char *json, size_t n)
{
    return ws_frame_payload(WS_OP_TEXT, json, n);
}

static void send_state(struct engine *e, const struct emsg *req, struct payload *p, bool last,
                       uint64_t epoch, uint64_t seq)
{
    struct emsg *em = emsg_new(OP_RSTATE, req->conn_id);

    emsg_set_id(&em->room, req->room);
    em->frame = p;
    em->arg = last;
    em->epoch = epoch;
    em->since = seq;
    send_to(e, worker_of_conn(req->conn_id), em);
}

/* The join's answer: snapshot or missed deltas, then room_joined. In
 * normal mode each join is published before it is answered (r_join), so
 * the next joiner's snapshot is at another seq: the snapshot is not cached
 * there (every idle room would keep its last joiner's). In interval mode
 * the joins of one interval share a cached snapshot. */
static void answer_join(struct engine *e, const struct emsg *req)
{
    struct room_resume rr = {0};
    struct room_info info;
    struct buf b = {0};
    bool resumed = false;

    room_get_info(e->rooms, req->room, &info);
    if (req->has_since) {
        room_resume(e->rooms, req->room, req->epoch, req->since, &rr);
        resumed = rr.kind == ROOM_RESUME_DELTAS;
    } else {
        rr.kind = ROOM_RESUME_SNAPSHOT;
        rr.msgs = xcalloc(1, sizeof(*rr.msgs));
        if (info.mode == ROOM_MODE_NORMAL)
            rr.n = room_snapshot_uncached(e->rooms, req->room, &rr.msgs[0]) == 0;
        else
            rr.n = room_snapshot(e->rooms, req->room, &rr.msgs[0]) == 0;
    }
    for (size_t i = 0; i < rr.n; i++)
        send_state(e, req, payload_ref(rr.msgs[i].payload), false, info.epoch, rr.msgs[i].seq);
    room_resume_release(&rr);
    free(rr.msgs);
    buf_printf(&b, "{\"type\":\"room_joined\",\"room\":");
    json_append_cstr(&b, req->room);
    buf_printf(&b, ",\"epoch\":%llu,\"seq\":%llu,\"mode\":\"%s\",\"count\":%zu,\"resumed\":%s",
               (unsigned long long)info.epoch, (unsigned long long)info.seq,
               room_mode_name(info.mode), (size_t)info.count, resumed ? "true" : "false");
    proto_append_ref(&b, req->ref);
    buf_append_str(&b, "}");
    send_state(e, req, frame_text(&b), true, info.epoch, info.seq);
}

static void subscribe(struct engine *e, const char *room, unsigned from, uint64_t gen)
{
    struct rsub *s = find_rsub(e, room);

    if (!s) {
        s = pool_alloc(sizeof(*s) + e->w->srv->nworkers * sizeof(s->gen[0]));
        copy_id(s->room, room);
        s->e = e;
        wheel_timer_init(&s->tick, on_tick);
        s->eph_window = loop_now(e->w->loop);
        hmap_insert(&e->rsubs, &s->node, str_hash(s->room));
    }
    s->workers |= 1ull << from;
    s->gen[from] = MAX(s->gen[from], gen);
}

static void r_join(struct engine *e, struct emsg *req)
{
    uint64_t now = loop_now(e->w->loop);
    unsigned from = worker_of_conn(req->conn_id);
    size_t mlen = req->text ? strlen(req->text) : 0;
    struct room_info info;
    int r;

    room_engine_set_wall_offset(e->rooms, wall_offset(e));
    r = room_join(e->rooms, req->room, req->uid, req->sid, req->text, mlen, now);
    if (r < 0 && r != ROOM_E_JOINED) { /* JOINED: a resumed session re-subscribing */
        room_error(e, req->conn_id, r, req->ref);
        send_state(e, req, NULL, true, 0, 0);
        return;
    }
    room_set_visible(e->rooms, req->room, req->uid, req->arg != 0, now); /* privacy */
    if (room_get_info(e->rooms, req->room, &info) == 0 && info.mode == ROOM_MODE_NORMAL)
        room_flush(e->rooms, req->room, now); /* the joiner sees itself at once */
    subscribe(e, req->room, from, req->version);
    answer_join(e, req);
}

static void r_subscribe(struct engine *e, struct emsg *req)
{
    subscribe(e, req->room, worker_of_conn(req->conn_id), req->version);
    answer_join(e, req);
}

/* A socket's blockers changed: it gets a fresh snapshot (delivered after
 * every earlier delta, like a join's) if user is shown in the room, or in
 * any case when user is "". */
static void r_refresh(struct engine *e, struct emsg *req)
{
    struct room_member_view mv;
    struct room_info info;
    struct room_msg m;

    if (req->uid[0] && (room_get_member(e->rooms, req->room, req->uid, &mv) != 0 || !mv.published))
        return;
    if (room_snapshot(e->rooms, req->room, &m) != 0)
        return;
    room_get_info(e->rooms, req->room, &info);
    send_state(e, req, m.payload, false, info.epoch, m.seq);
}

static int cmp_id(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

struct sorted_ids {
    char **v;
    size_t n;
};

static bool hide_blocker(const char *user, void *ctx)
{
    const struct sorted_ids *b = ctx;

    return bsearch(&user, b->v, b->n, sizeof(*b->v), cmp_id) != NULL;
}

/* The blockers are sorted once (a copy of the pointers), so a read costs
 * O(members log blockers) however many block the reader. */
void engine__room_info(struct engine *e, const char *room, char *const *blockers, size_t nblockers,
                       struct buf *out)
{
    struct sorted_ids b = {NULL, nblockers};

    if (nblockers) {
        b.v = xmalloc(nblockers * sizeof(*b.v));
        memcpy(b.v, blockers, nblockers * sizeof(*b.v));
        qsort(b.v, nblockers, sizeof(*b.v), cmp_id);
    }
    room_encode_info_for(e->rooms, room, 1000, nblockers ? hide_blocker : NULL, &b, out);
    free(b.v);
}

/*
 * A worker's last local subscriber of a room left. The unsubscribe comes
 * straight from that worker, but a new local subscriber's join travels
 * through the user's owner, so the two can arrive in either order. Each
 * local subscription set has a generation (a per-worker counter, bumped
 * when the set is created); a join carries the generation of its set, an
 * unsubscribe the one of the set that emptied. An unsubscribe older than
 * the newest join seen from that worker is stale and ignored.
 */
static void r_unsub(struct engine *e, struct emsg *em)
{
    struct rsub *s = find_rsub(e, em->room);
    unsigned from = em->msg.from;

    if (!s || s->gen[from] > em->version)
        return;
    if ((s->workers &= ~(1ull << from)) == 0) {
        hmap_remove(&e->rsubs, &s->node);
        rsub_release(s);
        pool_free(s);
    }
}

static void r_patch_or_ephemeral(struct engine *e, struct emsg *req)
{
    uint64_t now = loop_now(e->w->loop);
    const char *data = req->text ? req->text : "";
    int r;

    if (req->op == OP_RPATCH)
        r = room_patch(e->rooms, req->room, req->uid, data, strlen(data), now);
    else
        r = room_ephemeral(e->rooms, req->room, req->uid, req->emoji, data, strlen(data), now);
    if (r == ROOM_E_INVISIBLE)
        return; /* hidden by privacy: dropped, as if nobody were listening */
    if (r < 0)
        room_error(e, req->conn_id, r, req->ref);
    else if (req->op == OP_RPATCH)
        reply_ack(e, req);
}

/* ---- U side ---- */

/* Records req's room for the live session whose own id (from
 * presence_get_session()) is sid. */
static void sroom_add(struct engine *e, const struct emsg *req, const char *sid)
{
    struct sroom *s = find_sroom(e, sid);
    size_t n = strlen(req->room) + 1, len = s ? s->len : 0;

    if (s) {
        SROOM_FOREACH(r, s)
        {
            if (strcmp(r, req->room) == 0)
                return;
        }
        hmap_remove(&e->srooms, &s->node); /* the realloc may move it */
    }
    s = pool_realloc(s, offsetof(struct sroom, rooms) + len + n);
    s->sid = sid;
    memcpy(s->rooms + len, req->room, n);
    s->len = (uint32_t)(len + n);
    hmap_insert(&e->srooms, &s->node, str_hash(s->sid));
}

static void sroom_del(struct engine *e, const struct emsg *req)
{
    struct sroom *s = find_sroom(e, req->sid);
    char *end;

    if (!s)
        return;
    end = s->rooms + s->len;
    for (char *r = s->rooms; r < end; r += strlen(r) + 1) {
        size_t n = strlen(r) + 1;
        if (strcmp(r, req->room) != 0)
            continue;
        memmove(r, r + n, (size_t)(end - r - (ptrdiff_t)n));
        s->len -= (uint32_t)n;
        break;
    }
    if (s->len == 0) { /* in no room: the next join makes a new one */
        hmap_remove(&e->srooms, &s->node);
        pool_free(s);
    }
}

static struct emsg *forward(struct engine *e, const struct emsg *req, enum engine_op op)
{
    struct emsg *em = emsg_new(op, req->conn_id);

    emsg_set_id(&em->uid, req->uid);
    emsg_set_id(&em->sid, req->sid);
    emsg_set_id(&em->room, req->room);
    emsg_set_ref(em, req->ref);
    em->epoch = req->epoch;
    em->since = req->since;
    em->has_since = req->has_since;
    em->version = req->version; /* the subscription generation */
    em->text = req->text ? xstrdup(req->text) : NULL;
    send_to(e, room_owner(e, req->room), em);
    return em;
}

static void u_join(struct engine *e, struct emsg *req)
{
    struct presence_session_info si;

    if (presence_get_session(e->pres, req->sid, &si) != 0 || strcmp(si.user, req->uid) != 0) {
        struct emsg *em = emsg_new(OP_RSTATE, req->conn_id);

        engine__reply_error(e, req->conn_id, "no_session", "the session has ended", req->ref);
        emsg_set_id(&em->room, req->room);
        em->arg = 1;
        send_to(e, worker_of_conn(req->conn_id), em);
        return; /* the session is gone: nothing to join */
    }
    if (!engine__privacy_ready(e, req, req->uid, req->uid))
        return; /* runs again once the user's settings are known */
    sroom_add(e, req, si.sid);
    forward(e, req, OP_RJOIN_R)->arg = engine__room_visible(e, req->uid);
}

void engine__rooms_visibility(struct engine *e, const char *uid, bool visible)
{
    struct presence_session_info si[64];
    size_t n = MIN(presence_list_sessions(e->pres, uid, si, 64), (size_t)64);

    for (size_t i = 0; i < n; i++) {
        struct sroom *s = find_sroom(e, si[i].sid);
        if (!s)
            continue;
        SROOM_FOREACH(r, s)
        {
            struct emsg *em = emsg_new(OP_RVIS, 0);
            emsg_set_id(&em->uid, uid);
            emsg_set_id(&em->room, r);
            em->arg = visible;
            send_to(e, room_owner(e, r), em);
        }
    }
}

static void u_leave(struct engine *e, struct emsg *req)
{
    sroom_del(e, req);
    forward(e, req, OP_RLEAVE_R);
}

void engine__rooms_session_ended(struct engine *e, const char *sid, const char *uid)
{
    struct sroom *s = find_sroom(e, sid);

    if (!s)
        return;
    SROOM_FOREACH(r, s)
    {
        struct emsg *em = emsg_new(OP_RLEAVE_R, 0);
        emsg_set_id(&em->uid, uid);
        emsg_set_id(&em->sid, s->sid);
        emsg_set_id(&em->room, r);
        send_to(e, room_owner(e, r), em);
    }
    hmap_remove(&e->srooms, &s->node);
    pool_free(s);
}

/* ---- client side ---- */

/* c's room links, nrlinks of them: the inline one while at most one,
 * else an array of pow2ceil(nrlinks) (its size follows from the count,
 * so the client keeps no capacity). */
static struct room_link **rlinks(struct client *c)
{
    return c->nrlinks > 1 ? c->rl.many : &c->rl.one;
}

static bool pow2(size_t n)
{
    return (n & (n - 1)) == 0;
}

static struct room_link *find_rlink(struct client *c, const char *room, size_t *idx)
{
    struct room_link **v = rlinks(c);

    for (size_t i = 0; i < c->nrlinks; i++) {
        if (strcmp(v[i]->lroom->room, room) == 0) {
            *idx = i;
            return v[i];
        }
    }
    return NULL;
}

static void rlinks_push(struct client *c, struct room_link *l)
{
    size_t n = c->nrlinks;

    if (n == 1) { /* a second room: from inline to an array */
        struct room_link **v = pool_alloc(2 * sizeof(*v));
        v[0] = c->rl.one;
        c->rl.many = v;
    } else if (n > 1 && pow2(n)) { /* full */
        c->rl.many = pool_realloc(c->rl.many, 2 * n * sizeof(*c->rl.many));
    }
    if (n == 0)
        c->rl.one = l;
    else
        c->rl.many[n] = l;
    c->nrlinks++;
}

/* Removes link idx (the last one takes its place). */
static void rlinks_del(struct client *c, size_t idx)
{
    struct room_link **v = rlinks(c);
    size_t n = --c->nrlinks;

    v[idx] = v[n];
    if (n == 1) { /* back inline */
        c->rl.one = v[0];
        pool_free(v);
    } else if (n == 0) {
        c->rl.one = NULL;
    } else if (pow2(n)) { /* half full: to the size the count implies */
        c->rl.many = pool_realloc(v, n * sizeof(*v));
    }
}

static void hidden_free(struct room_link *l);

static struct room_link *rlink_add(struct client *c, const char *room)
{
    struct engine *e = c->e;
    struct lroom *lr = find_lroom(e, room);
    struct room_link *l = pool_alloc(sizeof(*l));

    if (!lr) {
        lr = pool_alloc(sizeof(*lr));
        copy_id(lr->room, room);
        list_init(&lr->links);
        lr->gen = ++e->sub_gen;
        hmap_insert(&e->lrooms, &lr->node, str_hash(lr->room));
    }
    l->lroom = lr;
    l->client = c;
    l->awaiting = true;
    list_insert_tail(&lr->links, &l->link);
    rlinks_push(c, l);
    return l;
}

static void rlink_remove(struct client *c, size_t idx)
{
    struct room_link *l = rlinks(c)[idx];
    struct lroom *lr = l->lroom;
    struct emsg *em;

    rlinks_del(c, idx);
    list_del(&l->link);
    hidden_free(l);
    pool_free(l);
    if (!list_empty(&lr->links))
        return;
    em = emsg_new(OP_RUNSUB, 0);
    emsg_set_id(&em->room, lr->room);
    em->version = lr->gen;
    send_to(c->e, room_owner(c->e, lr->room), em);
    hmap_remove(&c->e->lrooms, &lr->node);
    pool_free(lr);
}

void engine__rooms_client_closed(struct client *c)
{
    /* Membership follows the session (grace, TTL), not the socket. */
    while (c->nrlinks > 0)
        rlink_remove(c, c->nrlinks - 1);
    rb_free(rb_get(c));
    rb_set(c, NULL);
}

/* Sends one room message to a subscriber: the shared WebSocket frame, or
 * for an event stream the same JSON as an SSE event with id "epoch-seq".
 * bulk: a delta, which already waited for its batch window, goes out as
 * bulk output (conn.h), so a burst of deltas cannot delay urgent frames. */
static void deliver(struct client *c, struct payload *frame, uint64_t epoch, uint64_t seq,
                    bool bulk)
{
    char id[48];
    struct payload *ev;
    const char *json;
    size_t n;

    if (c->ws) {
        if (bulk)
            ws_send_payload_bulk(c->ws, frame);
        else
            ws_send_payload(c->ws, frame);
        return;
    }
    snprintf(id, sizeof(id), "%llu-%llu", (unsigned long long)epoch, (unsigned long long)seq);
    frame_json(frame, &json, &n);
    ev = sse_format_id("room", seq ? id : NULL, json, n);
    sse_send_payload(c->x->sse, ev);
    payload_unref(ev);
}

static void on_state(struct engine *e, struct emsg *em)
{
    struct client *c = find_client(e, em->conn_id);
    struct room_link *l;
    size_t idx;

    if (!c || !(l = find_rlink(c, em->room, &idx)))
        return;
    if (em->frame && link_filtered(l))
        deliver_filtered(l, em->frame, em->epoch, em->since, false);
    else if (em->frame)
        deliver(c, em->frame, em->epoch, em->since, false);
    if (!em->arg)
        return;
    if (!em->frame && l->awaiting) {
        rlink_remove(c, idx); /* the join failed */
        return;
    }
    l->awaiting = false;
    if (l->need_refresh) { /* a block changed while the state was on its way */
        l->need_refresh = false;
        request_refresh(l, "");
    }
}

/* A socket whose queue is over half its soft limit skips ephemeral data. */
static bool congested(const struct client *c)
{
    const struct conn *conn = c->ws ? ws_conn(c->ws) : sse_conn(c->x->sse);
    size_t soft = conn->pool->out_soft_limit;

    return soft && conn_output_len(conn) > soft / 2;
}

static void on_event(struct engine *e, struct emsg *em)
{
    struct lroom *lr = find_lroom(e, em->room);
    struct list *pos, *tmp;

    if (!lr)
        return;
    list_foreach_safe(pos, tmp, &lr->links)
    {
        struct room_link *l = container_of(pos, struct room_link, link);

        if (l->awaiting || (em->arg && congested(l->client)))
            continue;
        if (link_filtered(l))
            deliver_filtered(l, em->frame, em->epoch, em->since, !em->arg);
        else
            deliver(l->client, em->frame, em->epoch, em->since, !em->arg);
    }
}

/* ---- blocks inside rooms (client side) ---- */

static bool str_in(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
}

/* Adds s to the set (v, n, cap) unless there; false when it was. */
static bool set_add(char ***v, size_t *n, size_t *cap, const char *s)
{
    if (str_in(*v, *n, s))
        return false;
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 4;
        *v = xrealloc(*v, *cap * sizeof(**v));
    }
    (*v)[(*n)++] = xstrdup(s);
    return true;
}

/* Removes s from the set; false when it was not there. */
static bool set_del(char **v, size_t *n, const char *s)
{
    for (size_t i = 0; i < *n; i++) {
        if (strcmp(v[i], s) == 0) {
            free(v[i]);
            v[i] = v[--*n];
            return true;
        }
    }
    return false;
}

static void set_clear(char **v, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free(v[i]);
    *n = 0;
}

static bool blocked_by(const struct client *c, const char *user)
{
    const struct rblock *rb = rb_get(c);

    return rb && str_in(rb->ids, rb->n, user);
}

static size_t nhidden(const struct room_link *l)
{
    return l->hidden ? l->hidden->n : 0;
}

static void hidden_free(struct room_link *l)
{
    if (!l->hidden)
        return;
    set_clear(l->hidden->ids, &l->hidden->n);
    free(l->hidden->ids);
    pool_free(l->hidden);
    l->hidden = NULL;
}

/* Whether l's messages must be rewritten: its user has blockers, or
 * its model still lacks a member who stopped blocking. */
static bool link_filtered(const struct room_link *l)
{
    const struct rblock *rb = rb_get(l->client);

    return (rb && rb->n > 0) || nhidden(l) > 0;
}

/* Removes entries of the array key by their user (the string itself, or
 * the object's "user") and returns how many: what 'j' (members, joins)
 * drops blockers and remembers them as hidden, 'l' (leaves) drops hidden
 * ones and forgets them, 'p' (patches) drops blockers. */
static size_t drop_users(cJSON *root, const char *key, struct room_link *l, int what)
{
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, key);
    cJSON *it, *next;
    size_t n = 0;

    if (!cJSON_IsArray(arr))
        return 0;
    for (it = arr->child; it; it = next) {
        const cJSON *u = cJSON_IsString(it) ? it : cJSON_GetObjectItemCaseSensitive(it, "user");
        const char *user = cJSON_IsString(u) ? u->valuestring : "";
        bool drop;

        next = it->next;
        if (what == 'l') /* a leave: hidden ones only (the model lacks them) */
            drop = l->hidden && set_del(l->hidden->ids, &l->hidden->n, user);
        else if ((drop = blocked_by(l->client, user)) && what == 'j') {
            if (!l->hidden)
                l->hidden = pool_alloc(sizeof(*l->hidden));
            set_add(&l->hidden->ids, &l->hidden->n, &l->hidden->cap, user);
        }
        if (drop) {
            cJSON_Delete(cJSON_DetachItemViaPointer(arr, it));
            n++;
        }
    }
    return n;
}

/* Sets key to v, written as an exact integer (cJSON could round big
 * numbers), when the key is there. */
static void set_u64(cJSON *root, const char *key, uint64_t v)
{
    char num[24];

    if (!cJSON_GetObjectItemCaseSensitive(root, key))
        return;
    snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
    cJSON_ReplaceItemInObjectCaseSensitive(root, key, cJSON_CreateRaw(num));
}

static uint64_t get_u64(const cJSON *root, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);

    return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
}

/* Lowers an interval-mode count by the entries dropped from its list. */
static void lower(cJSON *root, const char *key, size_t by)
{
    uint64_t v = get_u64(root, key);

    if (by)
        set_u64(root, key, v > by ? v - by : 0);
}

/*
 * Delivers one room message to a client with blockers, as the room would
 * look without them. Members that block the user are removed from
 * snapshots and joins and remembered as hidden; their leaves are dropped
 * while hidden; their patches and ephemerals are dropped; count is
 * lowered by the hidden ones. seq and epoch are kept, so an emptied delta
 * still goes out. Parsed and re-encoded only here: others share the frame.
 */
static void deliver_filtered(struct room_link *l, struct payload *frame, uint64_t epoch,
                             uint64_t seq, bool bulk)
{
    struct client *c = l->client;
    const char *json, *type;
    cJSON *root;
    size_t n, dropped = 0;
    char *out;

    frame_json(frame, &json, &n);
    root = cJSON_ParseWithLength(json, n);
    type = root ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "type")) : NULL;
    if (!type) {
        cJSON_Delete(root);
        deliver(c, frame, epoch, seq, bulk);
        return;
    }
    if (strcmp(type, "ephemeral") == 0) {
        const char *from = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "user"));
        if (!from || !blocked_by(c, from))
            deliver(c, frame, epoch, seq, bulk);
        cJSON_Delete(root);
        return;
    }
    if (strcmp(type, "room_snapshot") == 0) {
        hidden_free(l);
        dropped += drop_users(root, "members", l, 'j');
    } else if (strcmp(type, "room_delta") == 0) {
        size_t j = drop_users(root, "joins", l, 'j');
        size_t lv = drop_users(root, "leaves", l, 'l');
        size_t p = drop_users(root, "patches", l, 'p');
        lower(root, "joinCount", j);
        lower(root, "leaveCount", lv);
        lower(root, "patchCount", p);
        dropped += j + lv + p;
    }
    if (l->hidden && l->hidden->n == 0)
        hidden_free(l); /* every hidden one left */
    if (dropped == 0 && nhidden(l) == 0) {
        cJSON_Delete(root);
        deliver(c, frame, epoch, seq, bulk);
        return;
    }
    lower(root, "count", nhidden(l));
    set_u64(root, "epoch", get_u64(root, "epoch"));
    out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!out)
        abort(); /* cJSON fails only on OOM, which aborts everywhere */
    frame = frame_room_json(out, strlen(out));
    cJSON_free(out);
    deliver(c, frame, epoch, seq, bulk);
    payload_unref(frame);
}

/* Asks R for a fresh snapshot for l's socket if user is shown there (""
 * = in any case), so that the socket's model follows a changed block. */
static void request_refresh(struct room_link *l, const char *user)
{
    struct client *c = l->client;
    struct emsg *em = emsg_new(OP_RREFRESH, client_conn_id(c));

    emsg_set_id(&em->room, l->lroom->room);
    emsg_set_id(&em->uid, user);
    send_to(c->e, room_owner(c->e, l->lroom->room), em);
}

/* A join travels through the user's owner; an event stream's subscription
 * goes straight to the room's. */
static void rb_send_join(struct client *c, struct emsg *em)
{
    if (rb_get(c)->n > 0)
        em->has_since = false; /* a snapshot: the hidden members are known from it */
    send_to(c->e, em->op == OP_RSUB ? room_owner(c->e, em->room) : c->owner, em);
}

static void rb_loaded(void *ctx, int status, const struct store_result *r);

static void rb_load(struct client *c)
{
    struct rb_load *ld = xcalloc(1, sizeof(*ld));
    struct store_result none;

    ld->e = c->e;
    ld->conn_id = client_conn_id(c);
    rb_get(c)->state = RB_LOADING;
    if (store_list_blockers(c->e->env->store, c->e->inbox, client_uid(c), rb_loaded, ld) < 0) {
        memset(&none, 0, sizeof(none));
        rb_loaded(ld, -EINVAL, &none);
    }
}

/* The blockers of a client's user are read: send its held joins, or,
 * when the store failed, refuse them (they cannot be filtered). */
static void rb_loaded(void *ctx, int status, const struct store_result *r)
{
    struct rb_load *ld = ctx;
    struct client *c = ld->e->closing ? NULL : find_client(ld->e, ld->conn_id);
    struct rblock *rb = c ? rb_get(c) : NULL;

    free(ld);
    if (!rb)
        return;
    if (status == 0 && rb->dirty) {
        rb->dirty = false;
        rb_load(c); /* a block changed meanwhile: this answer may predate it */
        return;
    }
    if (status < 0) {
        log_warnx("store", "blockers of %s unreadable, room joins refused: %s", client_uid(c),
                  store_strerror(status));
        for (size_t i = 0; i < rb->npending; i++) {
            struct emsg *em = rb->pending[i];
            size_t idx;
            if (find_rlink(c, em->room, &idx))
                rlink_remove(c, idx);
            if (c->ws)
                proto_send_error(c->ws, "store_unavailable",
                                 "the settings could not be read; try again", em->ref);
            else /* an event stream: ended, the client's EventSource retries */
                sse_fail(c->x->sse, "store_unavailable",
                         "the settings could not be read; try again");
            emsg_free(&em->msg);
        }
        rb->npending = 0;
        rb_set(c, NULL); /* the next join reads again */
        free(rb->pending);
        pool_free(rb);
        return;
    }
    for (size_t i = 0; i < r->nids; i++)
        set_add(&rb->ids, &rb->n, &rb->cap, r->ids[i]);
    rb->state = RB_READY;
    for (size_t i = 0; i < rb->npending; i++)
        rb_send_join(c, rb->pending[i]);
    rb->npending = 0;
    free(rb->pending); /* joins are held only while loading */
    rb->pending = NULL;
    rb->cappending = 0;
    if (rb->n == 0) { /* blocked by nobody: share rb_none */
        rb_set(c, &rb_none);
        rb_free(rb);
    }
}

/* Sends a join of c, held until c's blockers are known. */
static void rb_join(struct client *c, struct emsg *em)
{
    struct rblock *rb = rb_get(c);
    bool load = !rb;

    if (!rb)
        rb_set(c, rb = pool_alloc(sizeof(*rb)));
    else if (rb->state == RB_READY) {
        rb_send_join(c, em);
        return;
    }
    if (rb->npending == rb->cappending) {
        rb->cappending = rb->cappending ? rb->cappending * 2 : 4;
        rb->pending = xrealloc(rb->pending, rb->cappending * sizeof(*rb->pending));
    }
    rb->pending[rb->npending++] = em;
    if (load)
        rb_load(c);
}

/* A join still held for room is cancelled (room_leave before it left). */
static void rb_cancel(struct client *c, const char *room)
{
    struct rblock *rb = rb_get(c);

    for (size_t i = 0; rb && i < rb->npending; i++) {
        if (strcmp(rb->pending[i]->room, room) == 0) {
            emsg_free(&rb->pending[i]->msg);
            memmove(rb->pending + i, rb->pending + i + 1,
                    (rb->npending - i - 1) * sizeof(*rb->pending));
            rb->npending--;
            return;
        }
    }
}

static void rb_free(struct rblock *rb)
{
    if (!rb || rb == &rb_none)
        return;
    for (size_t i = 0; i < rb->npending; i++)
        emsg_free(&rb->pending[i]->msg);
    free(rb->pending);
    set_clear(rb->ids, &rb->n);
    free(rb->ids);
    pool_free(rb);
}

/* Every worker: owner blocks (or stops blocking) viewer. Sockets of
 * viewer whose blockers are known update them, and each of their rooms
 * where owner is shown sends them a fresh snapshot. */
static void on_block(struct engine *e, const struct emsg *em)
{
    struct hmap_node *n;
    size_t it;

    for (n = hmap_first(&e->clients, &it); n; n = hmap_next(&e->clients, n, &it)) {
        struct client *c = container_of(n, struct client, node);
        struct rblock *rb = rb_get(c);

        if (!rb || strcmp(client_uid(c), em->viewer) != 0)
            continue;
        if (rb->state == RB_LOADING) {
            rb->dirty = true;
            continue;
        }
        if (em->arg && rb == &rb_none) {
            rb_set(c, rb = pool_alloc(sizeof(*rb)));
            rb->state = RB_READY;
        }
        if (em->arg)
            set_add(&rb->ids, &rb->n, &rb->cap, em->uid);
        else
            set_del(rb->ids, &rb->n, em->uid);
        for (size_t i = 0; i < c->nrlinks; i++) {
            struct room_link *l = rlinks(c)[i];
            if (l->awaiting)
                l->need_refresh = true;
            else
                request_refresh(l, em->uid);
        }
    }
}

void engine__rooms_block_changed(struct engine *e, const char *owner, const char *target,
                                 bool blocked)
{
    for (unsigned i = 0; i < e->w->srv->nworkers; i++) {
        struct emsg *em = emsg_new(OP_RBLOCK, 0);
        emsg_set_id(&em->uid, owner);
        emsg_set_id(&em->viewer, target);
        em->arg = blocked;
        send_to(e, i, em);
    }
}

/* ---- client messages ---- */

static const char *room_arg(struct client *c, const cJSON *root, const char *ref)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(root, "room");

    if (!cJSON_IsString(r) || !room_id_valid(r->valuestring)) {
        proto_send_error(c->ws, "invalid", "\"room\" must be a room id", ref);
        return NULL;
    }
    return r->valuestring;
}

/* The JSON value of key as compact text (heap, caller frees), or NULL
 * when absent; *bad when present but over max bytes. */
static char *json_arg(const cJSON *root, const char *key, size_t max, bool *bad)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    char *text;

    *bad = false;
    if (!v)
        return NULL;
    text = cJSON_PrintUnformatted(v);
    if (!text || strlen(text) > max) {
        *bad = true;
        cJSON_free(text);
        return NULL;
    }
    return text;
}

bool engine__room_token_ok(const struct engine *e, const char *holder, const char *room,
                           const char *tok)
{
    const char *secret = e->w->srv->cfg.room_token_secret;
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned maclen = 0;
    char msg[64 + PRESENCE_ID_MAX], hex[2 * EVP_MAX_MD_SIZE + 1];
    int n = snprintf(msg, sizeof(msg), "%s:%s", holder, room);

    if (!tok || n < 0 || (size_t)n >= sizeof(msg))
        return false;
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)msg, (size_t)n, mac,
         &maclen);
    for (unsigned i = 0; i < maclen; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    return strlen(tok) == 2 * maclen && CRYPTO_memcmp(hex, tok, 2 * maclen) == 0;
}

/*
 * A join is allowed by the JWT's rooms claim, or by a per-room
 * subscription token (when room-token-secret is set) for this connection
 * (engine_internal.h). Without a secret and without a claim every room is
 * open.
 */
static bool room_allowed(const struct client *c, const cJSON *root, const char *room)
{
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "token");
    char holder[32];

    const char *claims = c->x ? c->x->room_claims : NULL;

    if (claims && jwt_rooms_allow(claims, room))
        return true;
    if (!c->e->w->srv->cfg.room_token_secret[0])
        return claims == NULL;
    snprintf(holder, sizeof(holder), "%llx", (unsigned long long)client_conn_id(c));
    return engine__room_token_ok(c->e, holder, room, cJSON_IsString(tok) ? tok->valuestring : NULL);
}

static bool msg_join(struct client *c, const cJSON *root, const char *ref)
{
    const char *room = room_arg(c, root, ref);
    const cJSON *since = cJSON_GetObjectItemCaseSensitive(root, "since");
    struct emsg *em;
    char *meta;
    size_t idx;
    bool bad;

    if (!room || !need_session(c, ref))
        return false;
    if (!room_allowed(c, root, room)) {
        proto_send_error(c->ws, "forbidden",
                         "the token does not allow this room and no valid room token was given",
                         ref);
        return false;
    }
    meta = json_arg(root, "meta", 1024, &bad);
    if (bad) {
        proto_send_error(c->ws, "invalid", "\"meta\" is over 1024 bytes", ref);
        return false;
    }
    if (find_rlink(c, room, &idx)) {
        cJSON_free(meta);
        proto_send_error(c->ws, "already_joined", "this connection is in the room already", ref);
        return false;
    }
    em = room_msg(c, OP_RJOIN, room, ref);
    em->text = meta ? xstrdup(meta) : NULL;
    cJSON_free(meta);
    if (cJSON_IsObject(since)) {
        const cJSON *ep = cJSON_GetObjectItemCaseSensitive(since, "epoch");
        const cJSON *sq = cJSON_GetObjectItemCaseSensitive(since, "seq");
        if (cJSON_IsNumber(ep) && cJSON_IsNumber(sq) && ep->valuedouble >= 0 &&
            sq->valuedouble >= 0) {
            em->epoch = (uint64_t)ep->valuedouble;
            em->since = (uint64_t)sq->valuedouble;
            em->has_since = true;
        }
    }
    em->version = rlink_add(c, room)->lroom->gen;
    rb_join(c, em); /* sent once c's blockers are known */
    return true;
}

static bool msg_room_leave(struct client *c, const cJSON *root, const char *ref)
{
    const char *room = room_arg(c, root, ref);
    size_t idx;

    if (!room || !need_session(c, ref))
        return false;
    if (!find_rlink(c, room, &idx)) {
        proto_send_error(c->ws, "not_joined", "this connection is not in the room", ref);
        return false;
    }
    rlink_remove(c, idx);
    rb_cancel(c, room);
    send_to(c->e, c->owner, room_msg(c, OP_RLEAVE, room, ref));
    proto_send_ack(c->ws, ref);
    return true;
}

static bool msg_patch_or_ephemeral(struct client *c, const cJSON *root, const char *ref,
                                   bool ephemeral)
{
    const char *room = room_arg(c, root, ref);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
    struct emsg *em;
    char *data;
    bool bad;

    if (!room || !need_session(c, ref))
        return false;
    if (ephemeral && c->x && loop_now(c->e->w->loop) < c->x->ephemeral_hold_until)
        return true; /* asked to hide: dropped until the rooms know (engine.c) */
    data = json_arg(root, ephemeral ? "data" : "meta", 1024, &bad);
    if (!data || (ephemeral && !cJSON_IsString(kind))) {
        cJSON_free(data);
        proto_send_error(c->ws, "invalid",
                         ephemeral ? "need \"kind\" (string) and \"data\" (JSON, <= 1024 bytes)"
                                   : "need \"meta\" (a JSON merge patch, <= 1024 bytes)",
                         ref);
        return false;
    }
    em = room_msg(c, ephemeral ? OP_REPHEM : OP_RPATCH, room, ref);
    em->text = xstrdup(data);
    if (ephemeral)
        em->emoji = xstrdup(kind->valuestring); /* the kind rides in a spare string */
    cJSON_free(data);
    send_to(c->e, room_owner(c->e, room), em);
    return true;
}

bool engine__room_dispatch(struct client *c, const cJSON *root, const char *type, const char *ref,
                           bool *ok)
{
    if (strcmp(type, "join") == 0)
        *ok = msg_join(c, root, ref);
    else if (strcmp(type, "room_leave") == 0)
        *ok = msg_room_leave(c, root, ref);
    else if (strcmp(type, "patch") == 0)
        *ok = msg_patch_or_ephemeral(c, root, ref, false);
    else if (strcmp(type, "ephemeral") == 0)
        *ok = msg_patch_or_ephemeral(c, root, ref, true);
    else
        return false;
    return true;
}

/* ---- bus ---- */

bool engine__room_msg(struct engine *e, struct emsg *em)
{
    switch (em->op) {
    case OP_RJOIN:
        u_join(e, em);
        return true;
    case OP_RLEAVE:
        u_leave(e, em);
        return true;
    case OP_RJOIN_R:
        r_join(e, em);
        return true;
    case OP_RLEAVE_R:
        room_leave(e->rooms, em->room, em->uid, em->sid, loop_now(e->w->loop));
        return true;
    case OP_RPATCH:
    case OP_REPHEM:
        r_patch_or_ephemeral(e, em);
        return true;
    case OP_RSTATE:
        on_state(e, em);
        return true;
    case OP_REVENT:
        on_event(e, em);
        return true;
    case OP_RUNSUB:
        r_unsub(e, em);
        return true;
    case OP_RSUB:
        r_subscribe(e, em);
        return true;
    case OP_RBLOCK:
        on_block(e, em);
        return true;
    case OP_RREFRESH:
        r_refresh(e, em);
        return true;
    case OP_RVIS:
        room_set_visible(e->rooms, em->room, em->uid, em->arg != 0, loop_now(e->w->loop));
        return true;
    default:
        return false;
    }
}

/* ---- set-up ---- */

struct room_engine *engine__rooms_new(struct engine *e)
{
    const struct config *cfg = &e->w->srv->cfg;
    struct room_config rc;
    uint64_t seed;

    room_config_init(&rc);
    rc.max_members = (uint32_t)cfg->room_max_members;
    rc.batch_ms = (uint32_t)cfg->room_batch_ms;
    rc.interval_enter = (uint32_t)cfg->room_interval_members;
    rc.interval_leave = rc.interval_enter * 4 / 5; /* hysteresis */
    rc.interval_ms = (uint32_t)cfg->room_interval_ms;
    rc.ephemeral_rate = (uint32_t)cfg->ephemeral_rate;
    if (RAND_bytes((unsigned char *)&seed, sizeof(seed)) != 1)
        seed = time_wall_ms();
    rc.epoch_seed = seed ^ e->w->id;
    rc.frame = frame_room_json;
    rc.wall_offset_ms = wall_offset(e);
    if (rc.interval_leave >= rc.interval_enter)
        rc.interval_leave = rc.interval_enter - 1;
    if (room_config_check(&rc) != 0)
        fatalx("engine", "invalid room settings");
    return room_engine_new(&rc, loop_wheel(e->w->loop), on_room_event, on_room_event, e);
}

void engine__rooms_free(struct engine *e)
{
    room_engine_free(e->rooms);
    engine__free_map(&e->rsubs, offsetof(struct rsub, node), rsub_release);
    engine__free_map(&e->srooms, offsetof(struct sroom, node), NULL);
    engine__free_map(&e->lrooms, offsetof(struct lroom, node), NULL);
}

void engine__room_stream(struct client *c, const char *room, const char *last_event_id)
{
    struct emsg *em = emsg_new(OP_RSUB, client_conn_id(c));
    unsigned long long epoch, seq;
    int used = 0;

    emsg_set_id(&em->room, room);
    if (last_event_id && sscanf(last_event_id, "%llu-%llu%n", &epoch, &seq, &used) == 2 &&
        last_event_id[used] == '\0') {
        em->epoch = epoch;
        em->since = seq;
        em->has_since = true;
    }
    em->version = rlink_add(c, room)->lroom->gen;
    if (client_uid(c)[0])
        rb_join(c, em); /* a reader with an identity: sent once its blockers are known */
    else
        send_to(c->e, room_owner(c->e, room), em);
}
