/* SPDX-License-Identifier: MIT */
/*
 * test_engine_session.c - the engine's bus ops through an explicit
 * environment: one worker (its loop, a one-worker bus), the settings store
 * on a temporary SQLite file, and no sockets. Each test hands the engine a
 * message (engine__dispatch(), as the bus would: dispatch()), then collects what the
 * engine sent back to the worker by draining the bus itself, so it sees
 * the op table's routing, the session lifecycle on the owner, the watch
 * fan-out of a transition, a session whose socket closed before the
 * owner answered, and a room join's path through U and R.
 *
 * Time: the presence core's debounce is 0 ms, so a transition is due at
 * the next loop iteration (loop_run_once(.., 0)); nothing waits for a
 * clock. The one wait is for the store thread's answers (bounded poll).
 * The clocked tests put the loop on a test clock (loop_set_clock()) with
 * the real debounce, TTL and grace, and move it by hand: TTL expiry, the
 * reconnect grace and the debounce are checked to the millisecond, and no
 * test sleeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <poll.h>

#include "bus.h"
#include "config.h"
#include "engine.h"
#include "engine_state.h"
#include "loop.h"
#include "msg.h"
#include "net.h"
#include "presence.h"
#include "store.h"
#include "test_adapter_text.h"
#include "watch.h"
#include "worker.h"

#define CONN_A  1 /* connection ids on worker 0 */
#define CONN_B  2
#define OUT_MAX 64

struct env {
    struct server srv;
    struct worker w;
    struct net_ctx nc;
    struct engine_env ee;
    struct engine *e;
    char dir[64], path[96];
    struct emsg *out[OUT_MAX]; /* what the engine sent to worker 0, in order */
    size_t nout;
};

static void record(void *ctx, struct bus_msg *m)
{
    struct env *v = ctx;

    assert_true(v->nout < OUT_MAX);
    v->out[v->nout++] = (struct emsg *)m;
}

/* Hands em to the engine as the bus would. */
static void dispatch(struct env *v, struct emsg *em)
{
    engine__dispatch(v->e->w, &em->msg);
}

static void out_clear(struct env *v)
{
    for (size_t i = 0; i < v->nout; i++)
        emsg_free(&v->out[i]->msg);
    v->nout = 0;
}

/* Lets the store answer, timers due now fire, and collects the bus. */
static void settle(struct env *v)
{
    for (int i = 0; i < 100 && store_inbox_pending(v->e->inbox) > 0; i++) {
        struct pollfd pfd = {.fd = store_inbox_fd(v->e->inbox), .events = POLLIN};
        poll(&pfd, 1, 50);
        store_inbox_drain(v->e->inbox);
    }
    loop_run_once(v->w.loop, 0);
    bus_flush_all(v->srv.bus, 0);
    bus_drain(v->srv.bus, 0, record, v);
}

/* The first collected message of op, or NULL. */
static struct emsg *find_op(struct env *v, enum engine_op op)
{
    for (size_t i = 0; i < v->nout; i++)
        if (v->out[i]->op == op)
            return v->out[i];
    return NULL;
}

/* The JSON of a collected frame contains s. */
static bool frame_has(const struct payload *f, const char *s)
{
    return f && memmem(f->data, f->len, s, strlen(s)) != NULL;
}

/* The clocked tests' timings (ms). */
#define T_DEBOUNCE 100
#define T_TTL      3000
#define T_GRACE    1000

static int env_make(void **state, bool clocked)
{
    struct env *v = calloc(1, sizeof(*v));
    char err[STORE_ERR_LEN];

    assert_non_null(v);
    snprintf(v->dir, sizeof(v->dir), "/tmp/test_engine.XXXXXX");
    assert_non_null(mkdtemp(v->dir));
    snprintf(v->path, sizeof(v->path), "%s/s.db", v->dir);
    config_init(&v->srv.cfg);
    v->srv.cfg.presence_debounce_ms = clocked ? T_DEBOUNCE : 0;
    if (clocked) {
        v->srv.cfg.heartbeat_min_ms = 100;
        v->srv.cfg.heartbeat_interval_ms = 1000;
        v->srv.cfg.session_ttl_ms = T_TTL;
        v->srv.cfg.reconnect_grace_ms = T_GRACE;
    }
    v->srv.nworkers = 1;
    v->srv.bus = bus_new(1);
    v->srv.workers = &v->w;
    v->w.srv = &v->srv;
    v->w.loop = loop_new();
    if (clocked)
        loop_set_clock(v->w.loop, loop_now(v->w.loop));
    v->w.app = &v->nc;
    v->nc.worker = &v->w;
    text_register(); /* the engine's events are encoded by an adapter: a text one */
    v->ee.store = store_open(v->path, err, sizeof(err));
    assert_non_null(v->ee.store);
    v->e = engine_new(&v->w, &v->ee, &v->nc);
    v->nc.app = v->e;
    *state = v;
    return 0;
}

static int env_setup(void **state)
{
    return env_make(state, false);
}

static int env_setup_clocked(void **state)
{
    return env_make(state, true);
}

static int env_teardown(void **state)
{
    struct env *v = *state;
    char p[128];

    settle(v);
    out_clear(v);
    engine_free(v->e);
    store_close(v->ee.store);
    bus_free(v->srv.bus);
    loop_free(v->w.loop);
    config_release(&v->srv.cfg);
    for (const char *const *s = (const char *const[]){"", "-wal", "-shm", NULL}; *s; s++) {
        snprintf(p, sizeof(p), "%s%s", v->path, *s);
        unlink(p);
    }
    rmdir(v->dir);
    free(v);
    return 0;
}

static struct emsg *msg(enum engine_op op, uint64_t conn, const char *uid, const char *sid)
{
    struct emsg *em = emsg_new(op, conn);

    emsg_set_id(&em->uid, uid);
    emsg_set_id(&em->sid, sid);
    return em;
}

/* Starts uid's session on conn; returns its sid (static storage). */
static const char *start(struct env *v, uint64_t conn, const char *uid)
{
    static char sid[PRESENCE_ID_MAX + 1];
    struct emsg *res;

    dispatch(v, msg(OP_START, conn, uid, NULL));
    settle(v);
    res = find_op(v, OP_STARTED);
    assert_non_null(res);
    assert_int_equal(res->err, 0);
    assert_int_equal(res->conn_id, conn);
    assert_int_equal(strlen(res->sid), 32); /* a server-made id */
    snprintf(sid, sizeof(sid), "%s", res->sid);
    return sid;
}

/* OP_START answers OP_STARTED and, once the user's settings are read,
 * privacy_changed; status is acknowledged; a heartbeat is silent; a
 * leave ends the session with OP_ENDED (reason leave) and no ack. */
static void test_session_lifecycle(void **state)
{
    struct env *v = *state;
    struct presence_session_info si;
    const char *sid = start(v, CONN_A, "alice");
    struct emsg *em, *hello = find_op(v, OP_REPLY);

    assert_non_null(hello);
    assert_true(frame_has(hello->frame, "privacy_changed"));
    assert_int_equal(presence_get_session(v->e->pres, sid, &si), 0);
    assert_string_equal(si.user, "alice");
    out_clear(v);

    dispatch(v, msg(OP_HEARTBEAT, CONN_A, "alice", sid));
    settle(v);
    assert_int_equal(v->nout, 0);

    em = msg(OP_STATUS, CONN_A, "alice", sid);
    em->arg = PRESENCE_BUSY;
    emsg_set_ref(em, "7");
    dispatch(v, em);
    settle(v);
    assert_int_equal(v->nout, 1);
    assert_int_equal(v->out[0]->op, OP_REPLY);
    assert_true(frame_has(v->out[0]->frame, "ack ref=7"));
    out_clear(v);

    dispatch(v, msg(OP_LEAVE, CONN_A, "alice", sid));
    settle(v);
    em = find_op(v, OP_ENDED);
    assert_non_null(em);
    assert_int_equal(em->arg, PRESENCE_END_LEAVE);
    assert_null(find_op(v, OP_REPLY)); /* session_ended says it */
    assert_int_not_equal(presence_get_session(v->e->pres, sid, &si), 0);
}

/* An op on a session the owner does not know is answered with an error
 * for that client and ref. */
static void test_unknown_session_error(void **state)
{
    struct env *v = *state;
    struct emsg *em = msg(OP_ACTIVITY, CONN_A, "alice", "nosuchsession");

    em->arg = 1;
    emsg_set_ref(em, "\"r1\"");
    dispatch(v, em);
    settle(v);
    assert_int_equal(v->nout, 1);
    assert_int_equal(v->out[0]->op, OP_REPLY);
    assert_int_equal(v->out[0]->conn_id, CONN_A);
    assert_true(frame_has(v->out[0]->frame, "error "));
    assert_true(frame_has(v->out[0]->frame, "ref=\"r1\""));
}

/* A worker that watches bob gets its view (offline) once bob's settings
 * are known, then one OP_PRESENCE per transition carrying the frames. */
static void test_watch_fanout(void **state)
{
    struct env *v = *state;
    struct emsg *em;
    int online = 0;

    dispatch(v, msg(OP_WATCH, 0, "bob", NULL));
    settle(v);
    em = find_op(v, OP_VIEW);
    assert_non_null(em);
    assert_string_equal(em->uid, "bob");
    assert_string_equal(em->viewer, "");
    assert_true(frame_has(em->frame, "status=offline"));
    out_clear(v);

    start(v, CONN_B, "bob"); /* its settle runs the debounced transition */
    settle(v);
    em = find_op(v, OP_PRESENCE);
    assert_non_null(em);
    assert_string_equal(em->uid, "bob");
    for (int k = 0; k < PRIVACY_NCLASS; k++)
        online += frame_has(em->frames[k], "status=online");
    assert_true(online > 0); /* a frame for the class in use */
    assert_non_null(watch__find_sub(v->e, "bob"));
    out_clear(v);

    dispatch(v, msg(OP_UNWATCH, 0, "bob", NULL));
    settle(v);
    assert_null(watch__find_sub(v->e, "bob")); /* its last viewer went */
}

/* The client side drops what comes for a connection it no longer has;
 * a session whose socket closed before the owner's answer is let go:
 * the client's worker answers OP_STARTED with OP_CLOSED, and the owner
 * keeps the session only for its reconnect grace (detached). */
static void test_gone_client(void **state)
{
    struct env *v = *state;
    struct presence_session_info si;
    const char *sid = start(v, CONN_A, "carol"); /* no struct client for it */
    struct emsg *res = find_op(v, OP_STARTED), *closed;

    for (size_t i = 0; i < v->nout; i++) /* res is taken: dispatched next */
        if (v->out[i] == res)
            v->out[i] = v->out[--v->nout];
    out_clear(v);
    dispatch(v, res);
    settle(v);
    closed = find_op(v, OP_CLOSED);
    assert_non_null(closed);
    assert_string_equal(closed->sid, sid);
    assert_int_equal(v->nout, 1);
    v->nout = 0;
    dispatch(v, closed);
    dispatch(v, msg(OP_KICK, CONN_A, "carol", sid));  /* no client: ignored */
    dispatch(v, msg(OP_REPLY, CONN_A, "carol", sid)); /* ditto */
    settle(v);
    assert_int_equal(v->nout, 0);
    assert_int_equal(presence_get_session(v->e->pres, sid, &si), 0);
    assert_false(si.attached); /* in its grace */
}

/* A join goes client -> U (OP_RJOIN) -> R (OP_RJOIN_R); R answers the
 * client's worker with OP_RSTATE, the last one carrying room_joined. */
static void test_room_routing(void **state)
{
    struct env *v = *state;
    const char *sid = start(v, CONN_A, "alice");
    struct emsg *em, *fwd;

    out_clear(v);
    em = msg(OP_RJOIN, CONN_A, "alice", sid);
    emsg_set_id(&em->room, "r1");
    emsg_set_ref(em, "3");
    dispatch(v, em);
    settle(v);
    fwd = find_op(v, OP_RJOIN_R);
    assert_non_null(fwd);
    assert_string_equal(fwd->room, "r1");
    for (size_t i = 0; i < v->nout; i++) /* fwd is taken: R gets it next */
        if (v->out[i] == fwd)
            v->out[i] = v->out[--v->nout];
    out_clear(v);
    dispatch(v, fwd);
    settle(v);
    em = v->nout ? v->out[v->nout - 1] : NULL;
    assert_non_null(em);
    assert_int_equal(em->op, OP_RSTATE);
    assert_int_equal(em->arg, 1); /* last */
    assert_true(frame_has(em->frame, "room_joined "));
    assert_true(frame_has(em->frame, "ref=3"));
}

/* Moves the test clock by ms, one 10 ms step at a time (the wheel's
 * tick), running what falls due at each step and collecting the bus. */
static void advance(struct env *v, uint64_t ms)
{
    uint64_t end = loop_now(v->w.loop) + ms;

    while (loop_now(v->w.loop) < end) {
        loop_set_clock(v->w.loop, MIN(end, loop_now(v->w.loop) + 10));
        settle(v);
    }
}

/* The first transition of uid collected, as seen by the anonymous class
 * (the only one in use in these tests), contains s. */
static bool presence_has(struct env *v, const char *s)
{
    for (size_t i = 0; i < v->nout; i++) {
        if (v->out[i]->op != OP_PRESENCE)
            continue;
        for (int k = 0; k < PRIVACY_NCLASS; k++)
            if (frame_has(v->out[i]->frames[k], s))
                return true;
    }
    return false;
}

/* A watched session that stops heartbeating ends at its TTL, not before:
 * heartbeats keep it; after the last one, the watcher sees offline one
 * debounce after the TTL and nothing earlier. */
static void test_ttl_expiry_on_the_clock(void **state)
{
    struct env *v = *state;
    struct presence_session_info si;
    const char *sid;

    dispatch(v, msg(OP_WATCH, 0, "dave", NULL));
    settle(v);
    sid = start(v, CONN_A, "dave");
    advance(v, T_DEBOUNCE + 10);
    assert_true(presence_has(v, "status=online"));
    out_clear(v);
    for (int i = 0; i < 4; i++) { /* 4 s of heartbeats every second: alive */
        advance(v, 1000);
        dispatch(v, msg(OP_HEARTBEAT, CONN_A, "dave", sid));
        settle(v);
    }
    assert_false(presence_has(v, "status=offline"));
    advance(v, T_TTL - 20); /* silent, just short of the TTL */
    assert_int_equal(presence_get_session(v->e->pres, sid, &si), 0);
    assert_false(presence_has(v, "status=offline"));
    advance(v, 20 + T_DEBOUNCE + 20);
    assert_int_not_equal(presence_get_session(v->e->pres, sid, &si), 0);
    assert_true(presence_has(v, "status=offline"));
}

/* A closed socket's session waits out the reconnect grace: a resume
 * inside it keeps the user online with no event at all; without one, the
 * session ends at the grace and the watcher sees offline. */
static void test_grace_on_the_clock(void **state)
{
    struct env *v = *state;
    struct presence_session_info si;
    const char *sid;
    char keep[PRESENCE_ID_MAX + 1];

    dispatch(v, msg(OP_WATCH, 0, "erin", NULL));
    settle(v);
    sid = start(v, CONN_A, "erin");
    snprintf(keep, sizeof(keep), "%s", sid);
    advance(v, T_DEBOUNCE + 10);
    out_clear(v);
    dispatch(v, msg(OP_CLOSED, CONN_A, "erin", keep));
    advance(v, T_GRACE - 50);
    assert_int_equal(presence_get_session(v->e->pres, keep, &si), 0);
    assert_false(si.attached);
    assert_false(presence_has(v, "status="));
    advance(v, 50 + T_DEBOUNCE + 20);
    assert_int_not_equal(presence_get_session(v->e->pres, keep, &si), 0);
    assert_true(presence_has(v, "status=offline"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_session_lifecycle, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_unknown_session_error, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_watch_fanout, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_gone_client, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_room_routing, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_ttl_expiry_on_the_clock, env_setup_clocked,
                                        env_teardown),
        cmocka_unit_test_setup_teardown(test_grace_on_the_clock, env_setup_clocked, env_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
