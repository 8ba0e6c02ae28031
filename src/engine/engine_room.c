/* SPDX-License-Identifier: MIT */
/*
 * engine_room.c - rooms on the workers: join, leave, metadata patches,
 * snapshots and resume, deltas and the ephemeral lane (room.h is the core).
 *
 * Three roles, as for presence (engine.h):
 *   - R, the room's owner (bus_route(room id)), runs the room core and, per
 *     room, the mask of workers with local subscribers; each delta or
 *     ephemeral message is a value that the core has the default protocol's
 *     adapter encode once (frame_room_codec), and that payload is sent once
 *     to each of those workers (OP_REVENT), which write it to their local
 *     subscribers;
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
 * stays hot until a second under half that; a quiet room turns hot as
 * soon as its rate in the current second, read over at least its first
 * EPH_SPAN_MIN_MS (100 ms), reaches the mark (a burst batches from its
 * first few messages, not from its second second). Other rooms (the usual
 * case: a few cursors, or a small room) send each message at once. Held
 * messages go out before any delta of the room, so a delta never
 * overtakes them. Casts marked batch (Pusher client events) count as
 * ephemerals and are held the same way in a hot room, in order with them,
 * never merged or dropped, each still without its sender's socket; a tick
 * that a cast arms is the room's delta window instead (room-batch-ms
 * after that cast, as a delta's window begins at the room's first
 * change), so a hot room's client events wait and batch as its native
 * patches do (one write per subscriber per window). At the tick, each run
 * of held casts goes as one message per worker (send_casts): their
 * frames encoded once, back to back, in one payload per protocol, with a
 * table of where each ends and which socket it skips. A subscriber gets
 * the payload as one piece, or, when it sent some of them, the slices of
 * that payload around its own (no copy, no echo); only a subscriber with
 * blockers, or of a protocol that stamps frames per socket, gets them one
 * by one as before (engine_room_client.c). A hot room's client events
 * thus cost one payload per tick and one iovec piece per subscriber.
 *
 * Blocks (the rare path): a WebSocket client reads the users that block
 * its user (store_list_blockers()) before its first join leaves its
 * worker. Only for a client with blockers, the client worker re-encodes
 * each room message for that socket alone: blockers removed from snapshots
 * and deltas, count lowered by the blockers it hides, their ephemerals
 * dropped (see "blocks inside rooms" in engine_room_client.c). Everyone else gets the shared
 * frame. A client whose user nobody blocks (nearly all of them) points at
 * the shared, never-written rb_none instead of a record of its own. A block or unblock is broadcast
 * (OP_RBLOCK); each socket of the target in a room where the blocker is shown gets a fresh
 * snapshot.
 */
#include "engine_room.h"

#include <stdio.h>
#include <string.h>

#include <openssl/rand.h>

#include "cluster_room.h"
#include "engine_privacy.h"
#include "engine_state.h"
#include "frame.h"
#include "hooks.h"
#include "http_read.h"
#include "log.h"
#include "pool.h"
#include "room.h"
#include "room_count.h"

/* Ephemeral ticks (see the top of the file). */
#define EPH_TICK_MS 33 /* a hot room's ephemerals go out at most once per tick */
/* A quiet room's rate is read over at least this much of its second. */
#define EPH_SPAN_MIN_MS 100

struct held {                 /* an ephemeral message or a cast waiting for its room's tick */
    struct adapter_frames fs; /* its frame per protocol of the room's subscribers */
    uint64_t epoch;
    uint64_t exclude;               /* a cast's connection that does not get it (0: none) */
    bool droppable;                 /* an ephemeral (a cast is never dropped) */
    char from[PRESENCE_ID_MAX + 1]; /* a cast's sender ("": none; send_event()) */
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
    uint64_t eph_window;           /* loop ms when the current one-second count began */
    uint32_t eph_count;            /* ephemerals in that second */
    bool hot;                      /* ephemerals are held for the tick */
    uint8_t protos;                /* bit p: a subscriber of protocol p came (never cleared) */
    struct list joins;             /* struct emsg.park: joins waiting for the batch (OP_RJOIN_R) */
    struct wheel_timer join_timer; /* armed while joins wait: the room's next flush */
    uint64_t gen[];                /* per worker (nworkers): newest subscription generation seen */
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

static void room_error(struct engine *e, uint64_t conn_id, int err, const char *ref)
{
    frame_reply_error(e, conn_id, err == ROOM_E_FULL ? "room_full" : "invalid", room_strerror(err),
                      ref);
}

/* ---- R side ---- */

/* Sends one room message, fs's frame for each protocol (NULL: none for
 * it), to every worker with subscribers to the room; exclude is a
 * connection that does not get it (0: none). */
static void send_event(struct engine *e, const struct rsub *s, bool droppable, uint64_t epoch,
                       uint64_t seq, const struct adapter_frames *fs, uint64_t exclude,
                       const char *from)
{
    uint64_t born = time_mono_us();

    for (unsigned i = 0; i < e->w->srv->nworkers; i++) {
        struct adapter_frames mine;
        struct emsg *em;

        if (!(s->workers & (1ull << i)))
            continue;
        em = emsg_new(OP_REVENT, exclude);
        em->born_us = born;
        emsg_set_id(&em->room, s->room);
        em->arg = droppable;
        em->epoch = epoch;
        em->since = seq;
        emsg_set_id(&em->uid, from); /* a broadcast's sender: its blocks apply */
        adapter_frames_copy(&mine, fs);
        emsg_take_frames(em, &mine);
        owner_send(e, i, em);
    }
}

/* Sends n held casts in a row (h[0..n-1]) as one message per worker:
 * their frames encoded once into one payload per protocol, back to back,
 * and the table of where each ends and whom it skips (struct emsg_casts),
 * so that each subscriber gets them in one piece, or the pieces around
 * its own (engine__room_on_event). */
static void send_casts(struct engine *e, const struct rsub *s, const struct held *h, size_t n)
{
    size_t tsize = sizeof(struct emsg_casts) + n * sizeof(struct emsg_cast);
    struct emsg_casts *t = xcalloc(1, tsize);
    struct adapter_frames fs = {0};

    t->n = n;
    for (unsigned p = 0; p < ADAPTER_MAX; p++) {
        size_t len = 0;

        for (size_t i = 0; i < n; i++)
            len += h[i].fs.f[p] ? h[i].fs.f[p]->len : 0;
        if (len > 0)
            fs.f[p] = payload_new(len);
        for (size_t i = 0; i < n; i++) {
            if (h[i].fs.f[p])
                payload_append(fs.f[p], h[i].fs.f[p]->data, h[i].fs.f[p]->len);
            t->v[i].end[p] = fs.f[p] ? (uint32_t)fs.f[p]->len : 0;
        }
    }
    for (size_t i = 0; i < n; i++) {
        t->v[i].exclude = h[i].exclude;
        memcpy(t->v[i].from, h[i].from, sizeof(t->v[i].from));
    }
    for (unsigned w = 0; w < e->w->srv->nworkers; w++) {
        struct adapter_frames mine;
        struct emsg *em;

        if (!(s->workers & (1ull << w)))
            continue;
        em = emsg_new(OP_REVENT, 0);
        emsg_set_id(&em->room, s->room);
        em->epoch = h[0].epoch;
        em->casts = xmalloc(tsize);
        memcpy(em->casts, t, tsize);
        adapter_frames_copy(&mine, &fs);
        emsg_take_frames(em, &mine);
        owner_send(e, w, em);
    }
    adapter_frames_release(&fs);
    free(t);
}

/* Sends the held messages, in order, and forgets them: each ephemeral
 * alone, each run of casts together (send_casts). */
static void release_held(struct engine *e, struct rsub *s)
{
    wheel_del(&s->tick);
    wheel_del(&s->join_timer);
    while (!list_empty(&s->joins)) {
        struct emsg *em = container_of(list_first(&s->joins), struct emsg, park);
        list_del(&em->park);
        emsg_free(&em->msg);
    }
    for (size_t i = 0; i < s->nheld;) {
        const struct held *h = &s->held[i];
        size_t n = 1;

        while (!h->droppable && i + n < s->nheld && !h[n].droppable)
            n++;
        if (n > 1) {
            send_casts(e, s, h, n);
        } else {
            send_event(e, s, h->droppable, h->epoch, 0, &h->fs, h->exclude,
                       h->from[0] ? h->from : NULL);
        }
        for (size_t k = 0; k < n; k++)
            adapter_frames_release(&s->held[i + k].fs);
        i += n;
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

/* ev's frame for each protocol s's subscribers speak, into fs (empty). */
static void room_frames(const struct rsub *s, const struct room_event *ev,
                        struct adapter_frames *fs)
{
    for (unsigned p = 0; p < ADAPTER_MAX; p++)
        if (s->protos & (1u << p))
            frame_room_event(fs, p, ev);
}

/* Counts an ephemeral message (or a batchable cast) against its room's
 * second; whether the room is hot: its messages wait for the tick. */
static bool room_hot(struct engine *e, struct rsub *s)
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
    if (!s->hot) { /* hot as soon as this second's rate reaches the mark */
        uint64_t enter = (uint64_t)e->w->srv->cfg.ephemeral_tick_deliveries;
        uint64_t span = now - s->eph_window;
        struct room_info info = {0};

        if (span < EPH_SPAN_MIN_MS)
            span = EPH_SPAN_MIN_MS;
        s->hot = enter > 0 && room_get_info(e->rooms, s->room, &info) == 0 &&
                 (uint64_t)s->eph_count * info.count * 1000 >= enter * span;
    }
    return s->hot;
}

/* Arms s's tick for a cast's window: room-batch-ms after the first cast
 * it holds, as a room's delta window begins at its first change (room.c
 * touch()), so a hot room's client events wait and batch as its native
 * patches do: one write per subscriber per window. */
static void start_cast_window(struct engine *e, struct rsub *s, uint64_t now)
{
    uint64_t batch = (uint64_t)e->w->srv->cfg.room_batch_ms;

    s->tick_due = now + batch;
    loop_timer_start(e->w->loop, &s->tick, batch);
}

/* A new held message at the end of s's, for the tick: armed here if it
 * is not yet, on the grid of EPH_TICK_MS for an ephemeral, a delta's
 * window for a cast; a message held while the tick is armed goes with
 * it, whichever armed it. */
static struct held *hold(struct engine *e, struct rsub *s, bool cast)
{
    if (s->nheld == s->capheld) {
        s->capheld = s->capheld ? s->capheld * 2 : 16;
        s->held = pool_realloc(s->held, s->capheld * sizeof(*s->held));
    }
    if (!wheel_is_linked(&s->tick)) {
        if (cast)
            start_cast_window(e, s, loop_now(e->w->loop));
        else
            start_tick(e, s, loop_now(e->w->loop));
    }
    return &s->held[s->nheld++];
}

/* Holds an ephemeral message for the tick if the room is hot. Returns
 * whether it was held. */
static bool hold_ephemeral(struct engine *e, struct rsub *s, const struct room_event *ev)
{
    struct held *h;

    if (!room_hot(e, s))
        return false;
    h = hold(e, s, false);
    *h = (struct held){.epoch = ev->epoch, .droppable = true};
    room_frames(s, ev, &h->fs);
    return true;
}

static void rsub_release(void *owner)
{
    struct rsub *s = owner;

    wheel_del(&s->tick);
    wheel_del(&s->join_timer); /* its joins were answered or dropped */
    for (size_t i = 0; i < s->nheld; i++)
        adapter_frames_release(&s->held[i].fs);
    pool_free(s->held);
}

/* Sends ev to the workers with subscribers, encoded once for each
 * protocol its subscribers speak (the default protocol's frame is the one
 * the room core made); a hot room holds its ephemerals, so encoded, for
 * the tick. */
static void fan_out(struct engine *e, const struct room_event *ev)
{
    struct rsub *s = find_rsub(e, ev->room);
    struct adapter_frames fs = {0};

    if (!s)
        return;
    if (ev->droppable && hold_ephemeral(e, s, ev))
        return;
    if (s->nheld > 0)
        release_held(e, s); /* nothing overtakes held ephemerals */
    room_frames(s, ev, &fs);
    send_event(e, s, ev->droppable, ev->epoch, ev->seq, &fs, 0, NULL);
    adapter_frames_release(&fs);
}

static void on_room_event(void *ctx, const struct room_event *ev)
{
    struct engine *e = ctx;

    if (ev->kind == ROOM_EV_EPHEMERAL) /* only local senders' values come here */
        cr__ephemeral_out(ctx, ev->ephemeral);
    /* Webhooks: one node's rooms only (with many nodes every node's room
     * core publishes the same change: docs/cluster.md "Webhooks"), and
     * not the members a restart put back (persist.h): nobody left. */
    if (ev->kind == ROOM_EV_DELTA && e->hooks && !e->env->cluster && !e->restoring)
        hooks_room_delta(e->hooks, ev->delta, (int64_t)time_wall_ms());
    fan_out(ctx, ev);
}

void engine__room_remote_ephemeral(struct engine *e, const struct room_ephemeral_view *v)
{
    struct room_info info;
    struct buf scratch = {0};
    struct room_event ev = {
        .room = v->room,
        .user = v->user,
        .droppable = true,
        .kind = ROOM_EV_EPHEMERAL,
        .ephemeral = v,
    };

    if (room_get_info(e->rooms, v->room, &info) != 0)
        return; /* no room here: nobody listens */
    ev.epoch = info.epoch;
    ev.msg.payload = frame_room_codec.encode_ephemeral(v, &scratch);
    fan_out(e, &ev);
    payload_unref(ev.msg.payload);
    buf_release(&scratch);
}

/* Sends one part of a join's answer (p: its frame for the client's
 * protocol, NULL = none; last: the final part); err < 0 says the join
 * failed (its error went before). */
static void send_state_err(struct engine *e, const struct emsg *req, struct payload *p, bool last,
                           uint64_t epoch, uint64_t seq, int err)
{
    struct emsg *em = emsg_new(OP_RSTATE, req->conn_id);

    em->err = err;

    emsg_set_id(&em->room, req->room);
    em->index = req->index; /* the join this answers (engine__room_on_state) */
    if (req->proto == ADAPTER_DEFAULT)
        em->frame = p;
    else
        em->frames[req->proto & (ADAPTER_MAX - 1)] = p; /* encoded for the client's protocol */
    em->arg = last;
    em->epoch = epoch;
    em->since = seq;
    owner_send(e, owner_of_conn(req->conn_id), em);
}

static void send_state(struct engine *e, const struct emsg *req, struct payload *p, bool last,
                       uint64_t epoch, uint64_t seq)
{
    send_state_err(e, req, p, last, epoch, seq, 0);
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

/* Hides every user known to block someone (ctx: the room engine). */
static bool hide_hider(const char *user, void *ctx)
{
    return room_is_hider(ctx, user);
}

/* A reader's blockers (n ids, borrowed), sorted into b (free b->v), each
 * noted as a hider in the rooms this worker owns. */
static void sort_blockers(struct engine *e, char *const *ids, size_t n, struct sorted_ids *b)
{
    b->v = NULL;
    b->n = n;
    if (n == 0)
        return;
    b->v = xmalloc(n * sizeof(*b->v));
    memcpy(b->v, ids, n * sizeof(*b->v));
    qsort(b->v, n, sizeof(*b->v), cmp_id);
    for (size_t i = 0; i < n; i++)
        room_note_hider(e->rooms, ids[i]);
}

/* The head of room as req's reader sees it (its blockers in req->ids:
 * room.h, "views of readers some members hide from"). */
static void view_info(struct engine *e, const struct emsg *req, struct room_info *info)
{
    struct sorted_ids b;
    struct room_head h;

    sort_blockers(e, req->ids, req->nids, &b);
    room_view_head(e->rooms, req->room, b.n ? hide_blocker : NULL, &b, &h);
    free(b.v);
    info->epoch = h.epoch;
    info->seq = h.seq;
    info->mode = h.mode;
    info->count = h.count;
    info->digest = h.digest;
}

/* The join's answer: snapshot or missed deltas, then room_joined. In
 * normal mode the joiner's snapshot is not cached in the room (every idle
 * room would keep its last joiner's, ~70 B per member): a lone join is
 * published before it is answered (engine__room_on_join_r), so the next
 * joiner's snapshot is at another seq anyway, and the joins of one batch
 * window share the window's snapshot through batch (made at its first use,
 * released by the caller; NULL: not in a window). In interval mode the
 * joins of one interval share the room's cached snapshot. */
static void answer_join(struct engine *e, const struct emsg *req, struct room_msg *batch)
{
    struct room_codec codec = frame_room_codec_for(req->proto);
    struct room_resume rr = {0};
    struct room_info info;
    bool resumed = false;

    room_get_info(e->rooms, req->room, &info);
    if (req->has_since && req->epoch == 0 && req->since == 0 && info.count == 0) {
        /* A client with the empty model, and a room whose members are all
         * hidden: up to date, exactly as with a room that does not exist
         * (its deltas would carry the real epoch). */
        resumed = true;
    } else if (req->has_since) {
        if (req->proto == ADAPTER_DEFAULT)
            room_resume(e->rooms, req->room, req->epoch, req->since, &rr);
        else
            room_resume_as(e->rooms, req->room, req->epoch, req->since, &codec, &rr);
        resumed = rr.kind == ROOM_RESUME_DELTAS;
    } else {
        rr.kind = ROOM_RESUME_SNAPSHOT;
        rr.msgs = xcalloc(1, sizeof(*rr.msgs));
        if (req->proto != ADAPTER_DEFAULT) /* another protocol's: encoded for this one */
            rr.n = room_snapshot_as(e->rooms, req->room, &codec, &rr.msgs[0]) == 0;
        else if (info.mode != ROOM_MODE_NORMAL)
            rr.n = room_snapshot(e->rooms, req->room, &rr.msgs[0]) == 0;
        else if (batch == NULL)
            rr.n = room_snapshot_uncached(e->rooms, req->room, &rr.msgs[0]) == 0;
        else if (batch->payload != NULL || room_snapshot_uncached(e->rooms, req->room, batch) == 0)
            rr.msgs[rr.n++] = (struct room_msg){payload_ref(batch->payload), batch->seq};
    }
    /* A room whose members are all hidden reads as the empty room of
     * epoch 0 in the snapshot: room_joined must not tell otherwise. */
    if ((!resumed || (req->epoch == 0 && req->since == 0)) && info.count == 0)
        info = (struct room_info){.mode = ROOM_MODE_NORMAL};
    if (req->nids) { /* a reader with blockers: its view's head (a snapshot) */
        view_info(e, req, &info);
        for (size_t i = 0; i < rr.n; i++)
            rr.msgs[i].seq = info.seq;
    }
    for (size_t i = 0; i < rr.n; i++)
        send_state(e, req, payload_ref(rr.msgs[i].payload), false, info.epoch, rr.msgs[i].seq);
    room_resume_release(&rr);
    free(rr.msgs);
    send_state(e, req, frame_room_joined(req->room, &info, resumed, req->ref, req->proto), true,
               info.epoch, info.seq);
}

static void on_join_timer(struct wheel_timer *t, uint64_t now);

static void drop_rsub(struct engine *e, struct rsub *s)
{
    char room[PRESENCE_ID_MAX + 1];

    copy_id(room, s->room);
    hmap_remove(&e->rsubs, &s->node);
    rsub_release(s);
    pool_free(s);
    cr__unhold(e, room);
}

static struct rsub *get_rsub(struct engine *e, const char *room)
{
    struct rsub *s = find_rsub(e, room);

    if (!s) {
        s = pool_alloc(sizeof(*s) + e->w->srv->nworkers * sizeof(s->gen[0]));
        copy_id(s->room, room);
        s->e = e;
        wheel_timer_init(&s->tick, on_tick);
        wheel_timer_init(&s->join_timer, on_join_timer);
        list_init(&s->joins);
        s->eph_window = loop_now(e->w->loop);
        hmap_insert(&e->rsubs, &s->node, str_hash(s->room));
        cr__hold(e, room); /* the other nodes' members are mirrored meanwhile */
    }
    return s;
}

static void subscribe(struct engine *e, const char *room, unsigned from, uint64_t gen,
                      unsigned proto)
{
    struct rsub *s = get_rsub(e, room);

    s->workers |= 1ull << from;
    s->protos |= (uint8_t)(1u << proto);
    s->gen[from] = MAX(s->gen[from], gen);
}

/*
 * Joins in normal mode. The joiner sees itself in its own snapshot, so a
 * join is published before it is answered. Publishing every join at once
 * made a burst of n joins (a reconnect storm) cost n^2 / 2 deliveries (150
 * joins: 11,175), one delta per join to every member so far. So a join is
 * published at once only when the room emitted no delta in the last
 * room-batch-ms; otherwise it waits in s->joins for the window's flush,
 * which join_timer forces room-batch-ms after the last delta, and all the
 * joins of the window are answered after it (one cached snapshot, one
 * delta to each earlier subscriber). A join waits at most room-batch-ms.
 */
static bool join_flushes(const struct engine *e, const struct room_info *info, uint64_t now)
{
    uint64_t batch = (uint64_t)e->w->srv->cfg.room_batch_ms;

    return info->flushed_at == 0 || now - info->flushed_at >= batch;
}

static void answer_waiting(struct engine *e, struct rsub *s)
{
    struct room_msg snap = {0}; /* the window's snapshot, shared by its joiners */

    while (!list_empty(&s->joins)) {
        struct emsg *req = container_of(list_first(&s->joins), struct emsg, park);

        list_del(&req->park);
        subscribe(e, req->room, worker_of_conn(req->conn_id), req->version, req->proto);
        answer_join(e, req, &snap);
        emsg_free(&req->msg);
    }
    payload_unref(snap.payload);
}

/* Flushes s's room and answers its waiting joins; s is freed when every
 * subscriber left while they waited. */
static void flush_waiting(struct engine *e, struct rsub *s, uint64_t now)
{
    room_flush(e->rooms, s->room, now);
    answer_waiting(e, s);
    if (s->workers == 0)
        drop_rsub(e, s);
}

static void on_join_timer(struct wheel_timer *t, uint64_t now)
{
    struct rsub *s = container_of(t, struct rsub, join_timer);

    if (!cr__ready(s->e, s->room))
        return; /* engine__room_loaded() answers them */
    flush_waiting(s->e, s, now);
}

/* req waits (in s->joins) until the room's members on the other nodes
 * are known or the batch window's flush; returns its rsub. */
static struct rsub *park(struct engine *e, struct emsg *req)
{
    struct rsub *s = get_rsub(e, req->room);

    req->parked = true;
    list_insert_tail(&s->joins, &req->park);
    return s;
}

static void wait_for_batch(struct engine *e, struct emsg *req, const struct room_info *info,
                           uint64_t now)
{
    struct rsub *s = park(e, req);
    uint64_t due = info->flushed_at + (uint64_t)e->w->srv->cfg.room_batch_ms;

    if (!wheel_is_linked(&s->join_timer))
        loop_timer_start(e->w->loop, &s->join_timer, due > now ? due - now : 0);
}

void engine__room_loaded(struct engine *e, const char *room)
{
    struct rsub *s = find_rsub(e, room);

    if (!s || list_empty(&s->joins) || wheel_is_linked(&s->join_timer))
        return;
    flush_waiting(e, s, loop_now(e->w->loop));
}

/* A join with a member limit of its own (Pusher's member-limit) into a
 * room that has that many members, its user not among them. Members of
 * other nodes count (they are mirrored here). */
static bool over_limit(struct engine *e, const struct emsg *req)
{
    struct room_info info;
    struct room_member_view mv;

    return req->limit && room_get_info(e->rooms, req->room, &info) == 0 &&
           info.members >= req->limit && room_get_member(e->rooms, req->room, req->uid, &mv) != 0;
}

void engine__room_on_join_r(struct engine *e, struct emsg *req)
{
    uint64_t now = loop_now(e->w->loop);
    unsigned from = owner_of_conn(req->conn_id);
    size_t mlen = req->text ? strlen(req->text) : 0;
    struct room_info info;
    int r;

    room_engine_set_wall_offset(e->rooms, wall_offset(e));
    for (size_t i = 0; i < req->nids; i++)
        room_note_hider(e->rooms, req->ids[i]);
    if (over_limit(e, req)) {
        room_error(e, req->conn_id, ROOM_E_FULL, req->ref);
        send_state_err(e, req, NULL, true, 0, 0, -1);
        return;
    }
    r = room_join_for(e->rooms, req->room, req->uid, req->sid, req->text, mlen, now,
                      (const char *const *)req->ids, req->nids);
    if (r < 0 && r != ROOM_E_JOINED) { /* JOINED: a resumed session re-subscribing */
        room_error(e, req->conn_id, r, req->ref);
        send_state_err(e, req, NULL, true, 0, 0, -1); /* the join failed */
        return;
    }
    room_set_visible(e->rooms, req->room, req->uid, req->arg != 0, now); /* privacy */
    cr__touch(e, req->room, req->uid, r == 0);
    if (!cr__ready(e, req->room)) { /* the other nodes' members first */
        park(e, req);
        return;
    }
    if (room_get_info(e->rooms, req->room, &info) == 0 && info.mode == ROOM_MODE_NORMAL) {
        struct rsub *s = find_rsub(e, req->room);

        if ((s && !list_empty(&s->joins)) || (info.pending && !join_flushes(e, &info, now))) {
            wait_for_batch(e, req, &info, now); /* answered in order after the flush */
            return;
        }
        room_flush(e->rooms, req->room, now); /* the joiner sees itself at once */
    }
    subscribe(e, req->room, from, req->version, req->proto);
    answer_join(e, req, NULL);
}

void engine__room_broadcast(struct engine *e, const struct room_broadcast_event *ev,
                            uint64_t exclude)
{
    struct emsg *em = emsg_new(OP_RCAST, exclude);

    emsg_set_id(&em->room, ev->room);
    emsg_set_id(&em->uid, ev->user);
    emsg_set_id(&em->sid, ev->exclude);
    em->arg = ev->batch;
    em->text = xstrdup(ev->event);
    em->emoji = xstrdup(ev->data);
    owner_send(e, owner_of_room(e, ev->room), em);
}

/* Sends ev to the room's local subscribers but exclude (a connection
 * id, 0 = none), in order with the room's other messages. Its sender goes
 * along: the client side drops it for the sockets the sender blocks
 * (engine__room_on_event()), as the ephemerals of a blocker are. */
static void deliver_cast(struct engine *e, const struct room_broadcast_event *ev, uint64_t exclude)
{
    struct rsub *s = find_rsub(e, ev->room);
    struct adapter_frames fs = {0};
    struct room_info info = {0};

    if (!s)
        return; /* nobody here listens */
    if (room_get_info(e->rooms, ev->room, &info) != 0)
        info.epoch = 0; /* subscribers of a room without members */
    frame_room_broadcast(ev, s->protos, &fs);
    if (ev->batch && room_hot(e, s)) { /* waits for the tick, in order, never dropped */
        struct held *h = hold(e, s, true);

        *h = (struct held){.fs = fs, .epoch = info.epoch, .exclude = exclude};
        snprintf(h->from, sizeof(h->from), "%s", ev->user ? ev->user : "");
        return;
    }
    if (s->nheld > 0)
        release_held(e, s);
    send_event(e, s, false, info.epoch, 0, &fs, exclude, ev->user);
    adapter_frames_release(&fs);
}

void engine__room_count_event(struct engine *e, const char *room, uint64_t n)
{
    struct rsub *s = find_rsub(e, room);
    struct adapter_frames fs = {0};
    struct room_info info = {0};
    bool any = false;

    for (unsigned p = 0; s && p < adapter_count(); p++) {
        const struct proto_adapter *a = adapter_get(p);
        if ((s->protos & (1u << p)) && a->encode_room_count &&
            (fs.f[p] = a->encode_room_count(room, n)) != NULL)
            any = true;
    }
    if (!any)
        return;
    if (room_get_info(e->rooms, room, &info) != 0)
        info.epoch = 0;
    if (s->nheld > 0)
        release_held(e, s);
    send_event(e, s, false, info.epoch, 0, &fs, 0, NULL);
    adapter_frames_release(&fs);
}

/* True when user is a member of room hidden by privacy (room.h,
 * "Visibility"): its broadcasts are dropped, as its ephemerals are. */
static bool sender_hidden(struct engine *e, const char *room, const char *user)
{
    struct room_member_view m;

    return user[0] && room_get_member(e->rooms, room, user, &m) == 0 && !m.visible;
}

void engine__room_on_cast(struct engine *e, struct emsg *req)
{
    struct room_broadcast_event ev = {.room = req->room,
                                      .event = req->text,
                                      .data = req->emoji,
                                      .user = req->uid,
                                      .exclude = req->sid,
                                      .batch = req->arg != 0};

    if (sender_hidden(e, req->room, req->uid))
        return;           /* as if nobody were listening (engine__room_on_patch()) */
    cr__cast_out(e, &ev); /* the other nodes' subscribers */
    deliver_cast(e, &ev, req->conn_id);
}

void engine__room_remote_cast(struct engine *e, const struct room_broadcast_event *ev)
{
    deliver_cast(e, ev, adapter_conn_of(ev->exclude));
}

void engine__room_on_sub(struct engine *e, struct emsg *req)
{
    if (!cr__ready(e, req->room)) {
        park(e, req);
        return;
    }
    subscribe(e, req->room, owner_of_conn(req->conn_id), req->version, req->proto);
    answer_join(e, req, NULL);
}

/* A socket's blockers changed: it gets a fresh snapshot (delivered after
 * every earlier delta, like a join's) if user is shown in the room, or in
 * any case when user is "". */
void engine__room_on_refresh(struct engine *e, struct emsg *req)
{
    struct room_codec codec = frame_room_codec_for(req->proto);
    struct room_member_view mv;
    struct room_info info;
    struct room_msg m;

    if (req->uid[0] && (room_get_member(e->rooms, req->room, req->uid, &mv) != 0 || !mv.published))
        return;
    if (room_snapshot_as(e->rooms, req->room, &codec, &m) != 0)
        return;
    room_get_info(e->rooms, req->room, &info);
    view_info(e, req, &info); /* the reader's blockers may have changed */
    send_state(e, req, m.payload, false, info.epoch, info.seq);
}

/* The blockers are sorted once (a copy of the pointers), so a read costs
 * O(members log blockers) however many block the reader. */
void engine__room_info(struct engine *e, const char *room, char *const *blockers, size_t nblockers,
                       struct buf *out)
{
    struct sorted_ids b;

    sort_blockers(e, blockers, nblockers, &b);
    room_encode_info_for(e->rooms, room, 1000, nblockers ? hide_blocker : NULL, &b, out);
    free(b.v);
}

void engine__room_subscriptions(struct engine *e, const char *room, char *const *blockers,
                                size_t nblockers, struct buf *out)
{
    struct room_info info;
    struct sorted_ids b;
    uint64_t n;

    if (room_get_info(e->rooms, room, &info) == 0 && info.members > 0) {
        sort_blockers(e, blockers, nblockers, &b);
        n = room_listed_sessions(e->rooms, room, nblockers ? hide_blocker : NULL, &b);
        free(b.v);
    } else {
        n = rcount__get(e, room);
    }
    out->len--; /* the info object's '}' */
    buf_printf(out, ",\"subscriptions\":%llu}", (unsigned long long)n);
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
/* Worker from has no subscriber of s's room left up to generation gen:
 * the joins of that generation still waiting for the batch are for links
 * that are gone, and answering them would subscribe the worker again,
 * for good (nobody there would ever unsubscribe). They go unanswered. */
static void drop_waiting(struct rsub *s, unsigned from, uint64_t gen)
{
    struct list *pos, *tmp;

    list_foreach_safe(pos, tmp, &s->joins)
    {
        struct emsg *req = container_of(pos, struct emsg, park);

        if (worker_of_conn(req->conn_id) == from && req->version <= gen) {
            list_del(&req->park);
            emsg_free(&req->msg);
        }
    }
}

void engine__room_on_unsub(struct engine *e, struct emsg *em)
{
    struct rsub *s = find_rsub(e, em->room);
    unsigned from = em->msg.from;

    rcount__unsub(e, em->room, from); /* in order with from's counts */
    if (!s || s->gen[from] > em->version)
        return;
    drop_waiting(s, from, em->version);
    if ((s->workers &= ~(1ull << from)) == 0 && list_empty(&s->joins)) {
        drop_rsub(e, s);
    }
}

/* Whether req's room shows its sender anyone: a visible member that
 * does not block it (its blockers in req->ids; when they are not known,
 * req->arg 0, every member known to block someone counts as one). */
static bool shows_anyone(struct engine *e, const struct emsg *req)
{
    struct sorted_ids b;
    struct room_head h;

    sort_blockers(e, req->ids, req->nids, &b);
    if (req->arg)
        room_view_head(e->rooms, req->room, b.n ? hide_blocker : NULL, &b, &h);
    else
        room_view_head(e->rooms, req->room, hide_hider, e->rooms, &h);
    free(b.v);
    return h.count > 0;
}

void engine__room_on_patch(struct engine *e, struct emsg *req)
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
    /* "Not a member" would tell a room held by hidden members from none. */
    if (r == ROOM_E_NOT_MEMBER && !shows_anyone(e, req))
        r = ROOM_E_NO_ROOM;
    if (r < 0) {
        room_error(e, req->conn_id, r, req->ref);
    } else if (req->op == OP_RPATCH) {
        cr__touch(e, req->room, req->uid, 0);
        frame_reply_ack(e, req);
    }
}

/* ---- U side ---- */

/* Records req's room for the live session whose own id (from
 * presence_get_session()) is sid. */
static void sroom_add_id(struct engine *e, const char *room, const char *sid)
{
    struct sroom *s = find_sroom(e, sid);
    size_t n = strlen(room) + 1, len = s ? s->len : 0;

    if (s) {
        SROOM_FOREACH(r, s)
        {
            if (strcmp(r, room) == 0)
                return;
        }
        hmap_remove(&e->srooms, &s->node); /* the realloc may move it */
    }
    s = pool_realloc(s, offsetof(struct sroom, rooms) + len + n);
    s->sid = sid;
    memcpy(s->rooms + len, room, n);
    s->len = (uint32_t)(len + n);
    hmap_insert(&e->srooms, &s->node, str_hash(s->sid));
}

static void sroom_add(struct engine *e, const struct emsg *req, const char *sid)
{
    sroom_add_id(e, req->room, sid);
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

/* em gets copies of from's ids (a join's: the joiner's blockers). */
static void copy_ids(struct emsg *em, const struct emsg *from)
{
    if (from->nids == 0)
        return;
    em->ids = xmalloc(from->nids * sizeof(*em->ids));
    for (size_t i = 0; i < from->nids; i++)
        em->ids[i] = xstrdup(from->ids[i]);
    em->nids = from->nids;
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
    em->index = req->index;     /* the link's join number */
    em->proto = req->proto;
    em->limit = req->limit; /* a join's own member cap */
    em->text = req->text ? xstrdup(req->text) : NULL;
    copy_ids(em, req);
    owner_send(e, owner_of_room(e, req->room), em);
    return em;
}

void engine__room_on_join(struct engine *e, struct emsg *req)
{
    struct presence_session_info si;

    if (presence_get_session(e->pres, req->sid, &si) != 0 || strcmp(si.user, req->uid) != 0) {
        struct emsg *em = emsg_new(OP_RSTATE, req->conn_id);

        frame_reply_error(e, req->conn_id, "no_session", "the session has ended", req->ref);
        emsg_set_id(&em->room, req->room);
        em->index = req->index;
        em->arg = 1;
        em->err = -1; /* the join failed */
        owner_send(e, owner_of_conn(req->conn_id), em);
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
            owner_send(e, owner_of_room(e, r), em);
        }
    }
}

void engine__room_on_leave(struct engine *e, struct emsg *req)
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
        owner_send(e, owner_of_room(e, r), em);
    }
    hmap_remove(&e->srooms, &s->node);
    pool_free(s);
}
/* ---- restoring a clean stop's sessions (persist.h) ---- */

void engine__rooms_restore_session(struct engine *e, const char *sid, const char *room)
{
    struct presence_session_info si;

    if (presence_get_session(e->pres, sid, &si) == 0)
        sroom_add_id(e, room, si.sid); /* borrows the session's own copy */
}

int engine__rooms_restore_member(struct engine *e, const char *room, const char *uid,
                                 const char *sid, const char *meta, bool visible)
{
    uint64_t now = loop_now(e->w->loop);
    int r;

    room_engine_set_wall_offset(e->rooms, wall_offset(e));
    r = room_join(e->rooms, room, uid, sid, meta, meta ? strlen(meta) : 0, now);
    if (r == 0 && !visible)
        room_set_visible(e->rooms, room, uid, false, now); /* before the flush: never shown */
    return r;
}

void engine__rooms_restore_flush(struct engine *e, const char *room)
{
    room_flush(e->rooms, room, loop_now(e->w->loop));
}

/* ---- bus ops of R and U ---- */

void engine__room_on_leave_r(struct engine *e, struct emsg *em)
{
    int r = room_leave(e->rooms, em->room, em->uid, em->sid, loop_now(e->w->loop));

    cr__touch(e, em->room, em->uid, r == 0 ? -1 : 0);
}

void engine__room_on_vis(struct engine *e, struct emsg *em)
{
    room_set_visible(e->rooms, em->room, em->uid, em->arg != 0, loop_now(e->w->loop));
    cr__touch(e, em->room, em->uid, 0);
}

/* GET /v1/rooms/{id} on R: one part, the room's info for its reader. */
void engine__room_on_info(struct engine *e, struct emsg *em)
{
    struct buf b = {0};

    if (cr__park_read(e, em))
        return; /* answered once the room's other nodes are known */
    engine__room_info(e, em->room, em->ids, em->nids, &b);
    if (em->arg && b.len && b.data[b.len - 1] == '}') /* an adapter's read: with its sockets */
        engine__room_subscriptions(e, em->room, em->ids, em->nids, &b);
    buf_append(&b, "\n", 1);
    http_read__answer(e, em, buf_payload(&b));
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
    rc.codec = &frame_room_codec;
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
    engine__rooms_client_free(e);
}
