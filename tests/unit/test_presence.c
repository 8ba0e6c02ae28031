/* SPDX-License-Identifier: MIT */
/*
 * test_presence.c - the presence engine against a fake clock.
 *
 * The engine never reads a clock: every test owns `now`, moves it forward
 * and runs the wheel at it, so TTLs, graces, idle times, expiries and the
 * debounce window are tested to the millisecond without sleeping. A
 * fixture records every on_change and on_end call; tests assert on those
 * records, on reads and on the engine's stats counters. The randomized
 * test replays random operations against a brute-force model of the spec.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "presence.h"
#include "util.h"
#include "wheel.h"

#define T0         1000000u /* the fake clock's start */
#define SEC        1000u
#define MIN_MS     (60u * SEC)
#define HOUR       (60u * MIN_MS)
#define DAY        (24u * HOUR)
#define MAX_EVENTS 1024
#define MAX_ENDS   256

/* A copy of a view, so it outlives the callback. */
struct snap {
    enum presence_status status;
    enum presence_status devices[PRESENCE_DEVICE_COUNT];
    char text[512];
    char emoji[64];
    uint64_t custom_expires;
    uint64_t last_seen;
    uint64_t version;
};

struct event {
    char user[PRESENCE_ID_MAX + 1];
    struct snap old;
    struct snap cur;
};

struct end_rec {
    char sid[PRESENCE_ID_MAX + 1];
    char user[PRESENCE_ID_MAX + 1];
    enum presence_end_reason reason;
    void *conn;
};

struct fx;
typedef void change_hook(struct fx *f, const struct presence_view *cur);
typedef void end_hook(struct fx *f, const struct presence_session_info *s,
                      enum presence_end_reason reason);

/* The fixture: an engine on its own wheel, with recorded callbacks. */
struct fx {
    struct presence_config cfg;
    struct wheel *w;
    struct presence *p;
    uint64_t now;
    struct event ev[MAX_EVENTS];
    size_t nev;    /* recorded (at most MAX_EVENTS) */
    size_t events; /* on_change calls since the last clear */
    struct end_rec ends[MAX_ENDS];
    size_t nends;
    change_hook *on_change; /* optional extra behaviour in callbacks */
    end_hook *on_end;
    int hook_state; /* for hooks */
};

static void snap_of(const struct presence_view *v, struct snap *s)
{
    memset(s, 0, sizeof(*s));
    s->status = v->status;
    memcpy(s->devices, v->devices, sizeof(s->devices));
    snprintf(s->text, sizeof(s->text), "%s", v->custom.text);
    snprintf(s->emoji, sizeof(s->emoji), "%s", v->custom.emoji);
    s->custom_expires = v->custom.expires_at;
    s->last_seen = v->last_seen;
    s->version = v->version;
}

static void record_change(void *ctx, const struct presence_view *old,
                          const struct presence_view *cur)
{
    struct fx *f = ctx;

    assert_string_equal(old->user, cur->user);
    assert_true(cur->version > old->version);
    if (f->nev < MAX_EVENTS) {
        struct event *e = &f->ev[f->nev++];

        snprintf(e->user, sizeof(e->user), "%s", cur->user);
        snap_of(old, &e->old);
        snap_of(cur, &e->cur);
    }
    f->events++;
    if (f->on_change)
        f->on_change(f, cur);
}

static void record_end(void *ctx, const struct presence_session_info *s,
                       enum presence_end_reason reason)
{
    struct fx *f = ctx;

    assert_true(f->nends < MAX_ENDS);
    snprintf(f->ends[f->nends].sid, sizeof(f->ends[0].sid), "%s", s->sid);
    snprintf(f->ends[f->nends].user, sizeof(f->ends[0].user), "%s", s->user);
    f->ends[f->nends].reason = reason;
    f->ends[f->nends].conn = s->conn_ref;
    f->nends++;
    if (f->on_end)
        f->on_end(f, s, reason);
}

static struct fx *fx_new_cfg(const struct presence_config *cfg)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    f->cfg = *cfg;
    f->now = T0;
    f->w = wheel_new(T0);
    f->p = presence_new(cfg, f->w, record_change, record_end, f);
    return f;
}

static struct fx *fx_new(void)
{
    struct presence_config cfg;

    presence_config_init(&cfg);
    return fx_new_cfg(&cfg);
}

static void fx_free(struct fx *f)
{
    presence_free(f->p);
    /* Freeing the engine unlinks every timer it armed. */
    assert_int_equal(wheel_count(f->w), 0);
    wheel_free(f->w);
    free(f);
}

static void clear(struct fx *f)
{
    f->nev = f->events = f->nends = 0;
}

/* Moves the clock to t and runs the wheel twice: timers that callbacks of
 * the first run arm for t (a debounce of 0, say) fire in the second. */
static void run_to(struct fx *f, uint64_t t)
{
    assert_true(t >= f->now);
    f->now = t;
    wheel_run(f->w, t);
    wheel_run(f->w, t);
}

static void step(struct fx *f, uint64_t ms)
{
    run_to(f, f->now + ms);
}

/* Past the debounce window: pending events are out. */
static void flush(struct fx *f)
{
    step(f, f->cfg.debounce_ms);
}

static void *conn(uintptr_t k)
{
    return (void *)k;
}

static void start(struct fx *f, const char *sid, const char *uid, enum presence_device d)
{
    assert_int_equal(presence_session_start(f->p, sid, uid, d, conn(1), f->now), 0);
}

static struct presence_view view(struct fx *f, const char *uid)
{
    struct presence_view v;

    assert_int_equal(presence_get_user(f->p, uid, f->now, &v), 0);
    return v;
}

static struct presence_stats stats(struct fx *f)
{
    struct presence_stats s;

    presence_get_stats(f->p, &s);
    return s;
}

static enum presence_status session_status(struct fx *f, const char *sid)
{
    struct presence_session_info si;

    assert_int_equal(presence_get_session(f->p, sid, &si), 0);
    return si.status;
}

/* ---- sessions, grace and TTL ---- */

static void test_two_tabs_one_user_online(void **state)
{
    struct fx *f = fx_new();
    struct presence_view v;

    (void)state;
    start(f, "tab1", "u1", PRESENCE_DEVICE_WEB);
    start(f, "tab2", "u1", PRESENCE_DEVICE_WEB);
    /* Not visible before the debounce window closes. */
    assert_int_equal(view(f, "u1").status, PRESENCE_OFFLINE);
    flush(f);
    assert_int_equal(f->events, 1);
    assert_string_equal(f->ev[0].user, "u1");
    assert_int_equal(f->ev[0].old.status, PRESENCE_OFFLINE);
    assert_int_equal(f->ev[0].old.version, 0);
    assert_int_equal(f->ev[0].cur.status, PRESENCE_ONLINE);
    assert_int_equal(f->ev[0].cur.devices[PRESENCE_DEVICE_WEB], PRESENCE_ONLINE);
    assert_int_equal(f->ev[0].cur.devices[PRESENCE_DEVICE_DESKTOP], PRESENCE_OFFLINE);
    v = view(f, "u1");
    assert_int_equal(v.status, PRESENCE_ONLINE);
    assert_int_equal(v.version, f->ev[0].cur.version);
    assert_int_equal(v.last_seen, 0);
    assert_int_equal(presence_list_sessions(f->p, "u1", NULL, 0), 2);
    assert_int_equal(stats(f).users, 1);
    assert_int_equal(stats(f).sessions, 2);
    fx_free(f);
}

static void test_closing_one_tab_changes_nothing(void **state)
{
    struct fx *f = fx_new();

    (void)state;
    start(f, "tab1", "u1", PRESENCE_DEVICE_WEB);
    start(f, "tab2", "u1", PRESENCE_DEVICE_WEB);
    flush(f);
    clear(f);
    assert_int_equal(presence_socket_closed(f->p, "tab1", conn(1), f->now), 0);
    for (int i = 0; i < 10; i++) {
        step(f, 5 * SEC);
        assert_int_equal(presence_heartbeat(f->p, "tab2", f->now), 0);
    }
    assert_int_equal(f->nends, 1);
    assert_string_equal(f->ends[0].sid, "tab1");
    assert_int_equal(f->ends[0].reason, PRESENCE_END_GRACE);
    assert_int_equal(f->events, 0);
    assert_int_equal(view(f, "u1").status, PRESENCE_ONLINE);
    /* An explicit leave of the other tab of two is just as invisible. */
    start(f, "tab3", "u1", PRESENCE_DEVICE_WEB);
    assert_int_equal(presence_session_end(f->p, "tab3", f->now), 0);
    flush(f);
    assert_int_equal(f->events, 0);
    fx_free(f);
}

static void test_last_leaves_offline_after_grace(void **state)
{
    struct fx *f = fx_new();
    uint64_t closed;

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    flush(f);
    clear(f);
    closed = f->now;
    assert_int_equal(presence_socket_closed(f->p, "s1", conn(1), f->now), 0);
    run_to(f, closed + f->cfg.reconnect_grace_ms - 1);
    assert_int_equal(f->nends, 0);
    assert_int_equal(view(f, "u1").status, PRESENCE_ONLINE);
    run_to(f, closed + f->cfg.reconnect_grace_ms);
    assert_int_equal(f->nends, 1);
    assert_int_equal(f->ends[0].reason, PRESENCE_END_GRACE);
    assert_int_equal(f->events, 0); /* the debounce window is still open */
    flush(f);
    assert_int_equal(f->events, 1);
    assert_int_equal(f->ev[0].cur.status, PRESENCE_OFFLINE);
    assert_int_equal(f->ev[0].old.status, PRESENCE_ONLINE);
    /* Last seen = the last recorded sign of life: the start here. */
    assert_int_equal(f->ev[0].cur.last_seen, T0);
    assert_int_equal(presence_heartbeat(f->p, "s1", f->now), PRESENCE_E_NO_SESSION);
    fx_free(f);
}

static void test_reload_within_grace_emits_nothing(void **state)
{
    struct fx *f = fx_new();
    void *old = conn(99);

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_WEB);
    assert_int_equal(presence_set_custom(f->p, "s1", "lunch", ":pizza:", 0, f->now), 0);
    flush(f);
    clear(f);
    /* Reload: the socket closes, the page comes back and resumes. */
    assert_int_equal(presence_socket_closed(f->p, "s1", conn(1), f->now), 0);
    step(f, 3 * SEC);
    assert_int_equal(presence_heartbeat(f->p, "s1", f->now), PRESENCE_E_DETACHED);
    assert_int_equal(presence_session_resume(f->p, "u1", "s1", conn(2), &old, f->now), 0);
    assert_null(old); /* it was detached: nothing to close */
    for (int i = 0; i < 8; i++) {
        step(f, 15 * SEC);
        assert_int_equal(presence_heartbeat(f->p, "s1", f->now), 0);
    }
    assert_int_equal(f->events, 0);
    assert_int_equal(f->nends, 0);
    /* A reload that opens a new session instead, with the same device:
     * the old one leaves after the grace, nothing visible either. */
    assert_int_equal(presence_set_custom(f->p, "s1", NULL, NULL, 0, f->now), 0);
    flush(f);
    clear(f);
    assert_int_equal(presence_socket_closed(f->p, "s1", conn(2), f->now), 0);
    step(f, 500);
    start(f, "s2", "u1", PRESENCE_DEVICE_WEB);
    step(f, 10 * SEC);
    assert_int_equal(f->nends, 1);
    assert_int_equal(f->events, 0);
    fx_free(f);
}

/* A session's tag is kept through what changes its flags (idle, grace,
 * resume) and changes nothing visible. */
static void test_session_tag(void **state)
{
    struct fx *f = fx_new();
    struct presence_session_info si;

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    flush(f);
    clear(f);
    assert_int_equal(presence_get_session(f->p, "s1", &si), 0);
    assert_int_equal(si.tag, 0);
    assert_int_equal(presence_session_set_tag(f->p, "s1", 2), 0);
    assert_int_equal(presence_session_set_tag(f->p, "nope", 1), PRESENCE_E_NO_SESSION);
    assert_int_equal(presence_activity(f->p, "s1", false, f->now), 0); /* idle */
    assert_int_equal(presence_socket_closed(f->p, "s1", conn(1), f->now), 0);
    assert_int_equal(presence_get_session(f->p, "s1", &si), 0);
    assert_int_equal(si.tag, 2);
    assert_false(si.attached);
    assert_true(si.idle);
    assert_int_equal(presence_session_resume(f->p, "u1", "s1", conn(2), NULL, f->now), 0);
    assert_int_equal(presence_activity(f->p, "s1", true, f->now), 0);
    assert_int_equal(presence_get_session(f->p, "s1", &si), 0);
    assert_int_equal(si.tag, 2);
    assert_true(si.attached);
    assert_false(si.idle);
    assert_int_equal(presence_session_set_tag(f->p, "s1", 7), 0); /* cut to the low bits */
    assert_int_equal(presence_get_session(f->p, "s1", &si), 0);
    assert_int_equal(si.tag, 3);
    fx_free(f);
}

static void test_resume_takeover_and_stale_close(void **state)
{
    struct fx *f = fx_new();
    void *old = NULL;
    struct presence_session_info si;

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_MOBILE);
    flush(f);
    clear(f);
    /* The phone reconnects before the old socket is seen to die. */
    assert_int_equal(presence_session_resume(f->p, "u1", "s1", conn(2), &old, f->now), 0);
    assert_ptr_equal(old, conn(1));
    /* The old socket's late close must not detach the session. */
    assert_int_equal(presence_socket_closed(f->p, "s1", conn(1), f->now), PRESENCE_E_CONN);
    assert_int_equal(presence_get_session(f->p, "s1", &si), 0);
    assert_true(si.attached);
    assert_ptr_equal(si.conn_ref, conn(2));
    /* Another user cannot resume it; unknown ids are refused. */
    assert_int_equal(presence_session_resume(f->p, "u2", "s1", conn(3), NULL, f->now),
                     PRESENCE_E_NO_SESSION);
    assert_int_equal(presence_session_resume(f->p, "u1", "nope", conn(3), NULL, f->now),
                     PRESENCE_E_NO_SESSION);
    assert_int_equal(presence_session_resume(f->p, "bad id", "s1", conn(3), NULL, f->now),
                     PRESENCE_E_BAD_ID);
    /* Closing twice is a no-op that does not extend the grace. */
    assert_int_equal(presence_socket_closed(f->p, "s1", conn(2), f->now), 0);
    step(f, 4 * SEC);
    assert_int_equal(presence_socket_closed(f->p, "s1", conn(2), f->now), 0);
    step(f, SEC);
    assert_int_equal(f->nends, 1);
    assert_ptr_equal(f->ends[0].conn, conn(2));
    assert_int_equal(presence_session_resume(f->p, "u1", "s1", conn(3), NULL, f->now),
                     PRESENCE_E_NO_SESSION);
    fx_free(f);
}

static void test_killed_socket_offline_at_ttl_not_before(void **state)
{
    struct fx *f = fx_new();
    uint64_t last;

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    flush(f);
    /* Beats on the advertised interval; the third one is missed and the
     * socket dies silently (no close). */
    run_to(f, T0 + 15 * SEC);
    assert_int_equal(presence_heartbeat(f->p, "s1", f->now), 0);
    run_to(f, T0 + 30 * SEC);
    assert_int_equal(presence_heartbeat(f->p, "s1", f->now), 0);
    last = f->now;
    clear(f);
    run_to(f, last + f->cfg.session_ttl_ms - 1);
    assert_int_equal(f->nends, 0);
    assert_int_equal(f->events, 0);
    assert_int_equal(view(f, "u1").status, PRESENCE_ONLINE);
    /* Exactly at the TTL the session ends; the event follows the window. */
    run_to(f, last + f->cfg.session_ttl_ms);
    assert_int_equal(f->nends, 1);
    assert_int_equal(f->ends[0].reason, PRESENCE_END_TTL);
    flush(f);
    assert_int_equal(f->events, 1);
    assert_int_equal(f->ev[0].cur.status, PRESENCE_OFFLINE);
    assert_int_equal(f->ev[0].cur.last_seen, last);
    assert_int_equal(stats(f).ended[PRESENCE_END_TTL], 1);
    fx_free(f);
}

static void test_close_never_extends_ttl(void **state)
{
    struct fx *f = fx_new();

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    run_to(f, T0 + 44 * SEC);
    assert_int_equal(presence_socket_closed(f->p, "s1", conn(1), f->now), 0);
    run_to(f, T0 + 45 * SEC - 1);
    assert_int_equal(f->nends, 0);
    run_to(f, T0 + 45 * SEC);
    assert_int_equal(f->nends, 1);
    assert_int_equal(f->ends[0].reason, PRESENCE_END_GRACE);
    fx_free(f);
}

static void test_heartbeat_storm_writes_nothing(void **state)
{
    struct fx *f = fx_new();
    struct presence_stats before, after;

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    flush(f);
    clear(f);
    before = stats(f);
    /* 1000 beats in one second. */
    for (int i = 0; i < 1000; i++) {
        run_to(f, T0 + 100 + (uint64_t)i);
        assert_int_equal(presence_heartbeat(f->p, "s1", f->now), 0);
    }
    after = stats(f);
    assert_int_equal(after.heartbeats - before.heartbeats, 1000);
    assert_int_equal(after.heartbeats_throttled - before.heartbeats_throttled, 1000);
    assert_int_equal(after.state_writes, before.state_writes);
    assert_int_equal(after.allocations, before.allocations);
    assert_int_equal(f->events, 0);
    /* A storm lasting 12 s records one beat every heartbeat_min_ms. */
    before = after;
    for (uint64_t t = T0 + 1100; t < T0 + 13100; t += 2) {
        run_to(f, t);
        assert_int_equal(presence_heartbeat(f->p, "s1", t), 0);
    }
    after = stats(f);
    assert_int_equal(after.state_writes - before.state_writes, 2); /* at 5 s and 10 s */
    assert_int_equal(f->events, 0);
    /* TTL runs from the last recorded beat (T0 + 10 s), so it is at least
     * TTL - heartbeat_min_ms after the last real beat. */
    run_to(f, T0 + 10 * SEC + f->cfg.session_ttl_ms - 1);
    assert_int_equal(f->nends, 0);
    run_to(f, T0 + 10 * SEC + f->cfg.session_ttl_ms);
    assert_int_equal(f->nends, 1);
    fx_free(f);
}

/* ---- statuses ---- */

/* Keeps s1 alive with beats every 15 s up to t (no activity). */
static void beat_until(struct fx *f, const char *sid, uint64_t t)
{
    while (f->now + 15 * SEC <= t) {
        step(f, 15 * SEC);
        assert_int_equal(presence_heartbeat(f->p, sid, f->now), 0);
    }
    run_to(f, t);
}

static void test_idle_then_activity(void **state)
{
    struct fx *f = fx_new();

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    flush(f);
    clear(f);
    /* Heartbeats are not activity: away after idle_ms. */
    beat_until(f, "s1", T0 + f->cfg.idle_ms - 1);
    assert_int_equal(session_status(f, "s1"), PRESENCE_ONLINE);
    run_to(f, T0 + f->cfg.idle_ms);
    assert_int_equal(session_status(f, "s1"), PRESENCE_AWAY);
    flush(f);
    assert_int_equal(f->events, 1);
    assert_int_equal(f->ev[0].cur.status, PRESENCE_AWAY);
    /* Activity brings it back at once, even inside the throttle window. */
    assert_int_equal(presence_activity(f->p, "s1", true, f->now), 0);
    flush(f);
    assert_int_equal(f->events, 2);
    assert_int_equal(f->ev[1].cur.status, PRESENCE_ONLINE);
    /* The client can report idleness itself. */
    assert_int_equal(presence_activity(f->p, "s1", false, f->now), 0);
    flush(f);
    assert_int_equal(f->events, 3);
    assert_int_equal(f->ev[2].cur.status, PRESENCE_AWAY);
    /* An explicit "away" looks the same, but activity does not undo it
     * (test_explicit_away_sticks); "online" does. */
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_ONLINE, 0, f->now), 0);
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_AWAY, 0, f->now), 0);
    flush(f);
    assert_int_equal(f->events, 3); /* away -> online -> away: nothing */
    assert_int_equal(presence_activity(f->p, "s1", true, f->now), 0);
    flush(f);
    assert_int_equal(f->events, 3);
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_ONLINE, 0, f->now), 0);
    flush(f);
    assert_int_equal(f->events, 4);
    assert_int_equal(f->ev[3].cur.status, PRESENCE_ONLINE);
    fx_free(f);
}

/*
 * An explicitly chosen "away" is the user's word, like busy and dnd: no
 * activity report (a tab becoming visible sends one), no custom status and
 * no idle timer changes it; only another presence_set_status() does. The
 * automatic idle-away stays undone by activity.
 */
static void test_explicit_away_sticks(void **state)
{
    struct fx *f = fx_new();

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    flush(f);
    clear(f);
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_AWAY, 0, f->now), 0);
    flush(f);
    assert_int_equal(f->events, 1);
    assert_int_equal(f->ev[0].cur.status, PRESENCE_AWAY);
    /* Activity, also past the heartbeat throttle: still away, no event. */
    assert_int_equal(presence_activity(f->p, "s1", true, f->now), 0);
    step(f, f->cfg.heartbeat_min_ms);
    assert_int_equal(presence_activity(f->p, "s1", true, f->now), 0);
    flush(f);
    assert_int_equal(f->events, 1);
    assert_int_equal(session_status(f, "s1"), PRESENCE_AWAY);
    /* A custom status is a user action, but not a status change. */
    assert_int_equal(presence_set_custom(f->p, "s1", "In a meeting", ":calendar:", 0, f->now), 0);
    flush(f);
    assert_int_equal(f->events, 2);
    assert_int_equal(f->ev[1].cur.status, PRESENCE_AWAY);
    assert_string_equal(f->ev[1].cur.text, "In a meeting");
    /* Idle and activity after it: still away. */
    beat_until(f, "s1", f->now + f->cfg.idle_ms + SEC);
    assert_int_equal(presence_activity(f->p, "s1", true, f->now), 0);
    flush(f);
    assert_int_equal(f->events, 2);
    assert_int_equal(view(f, "u1").status, PRESENCE_AWAY);
    /* A resume (a reload) keeps it too. */
    assert_int_equal(presence_socket_closed(f->p, "s1", conn(1), f->now), 0);
    step(f, SEC);
    assert_int_equal(presence_session_resume(f->p, "u1", "s1", conn(2), NULL, f->now), 0);
    assert_int_equal(presence_activity(f->p, "s1", true, f->now), 0);
    flush(f);
    assert_int_equal(f->events, 2);
    assert_int_equal(session_status(f, "s1"), PRESENCE_AWAY);
    /* Only the user's next choice ends it. */
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_ONLINE, 0, f->now), 0);
    flush(f);
    assert_int_equal(f->events, 3);
    assert_int_equal(f->ev[2].cur.status, PRESENCE_ONLINE);
    assert_string_equal(f->ev[2].cur.text, "In a meeting");
    /* And the automatic idle-away is undone by activity, as before. */
    assert_int_equal(presence_activity(f->p, "s1", false, f->now), 0);
    flush(f);
    assert_int_equal(f->ev[3].cur.status, PRESENCE_AWAY);
    assert_int_equal(presence_activity(f->p, "s1", true, f->now), 0);
    flush(f);
    assert_int_equal(f->events, 5);
    assert_int_equal(f->ev[4].cur.status, PRESENCE_ONLINE);
    fx_free(f);
}

static void test_busy_and_dnd_ignore_idle_and_revert(void **state)
{
    struct fx *f = fx_new();
    uint64_t until = T0 + 10 * MIN_MS;

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    start(f, "s2", "u2", PRESENCE_DEVICE_DESKTOP);
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_BUSY, until, f->now), 0);
    assert_int_equal(presence_set_status(f->p, "s2", PRESENCE_DND, 0, f->now), 0);
    flush(f);
    clear(f);
    /* Idle passes at T0 + 5 min: no visible change. */
    while (f->now + 15 * SEC < until) {
        step(f, 15 * SEC);
        assert_int_equal(presence_heartbeat(f->p, "s1", f->now), 0);
        assert_int_equal(presence_heartbeat(f->p, "s2", f->now), 0);
    }
    assert_int_equal(f->events, 0);
    assert_int_equal(session_status(f, "s1"), PRESENCE_BUSY);
    run_to(f, until - 1);
    assert_int_equal(session_status(f, "s1"), PRESENCE_BUSY);
    /* At the expiry busy reverts by activity: idle by now, so away. */
    run_to(f, until);
    assert_int_equal(session_status(f, "s1"), PRESENCE_AWAY);
    flush(f);
    assert_int_equal(f->events, 1);
    assert_string_equal(f->ev[0].user, "u1");
    assert_int_equal(f->ev[0].old.status, PRESENCE_BUSY);
    assert_int_equal(f->ev[0].cur.status, PRESENCE_AWAY);
    /* DND without expiry stays. */
    assert_int_equal(view(f, "u2").status, PRESENCE_DND);
    /* A revert while active gives online. */
    assert_int_equal(presence_set_status(f->p, "s2", PRESENCE_DND, f->now + 1000, f->now), 0);
    step(f, 1000);
    assert_int_equal(session_status(f, "s2"), PRESENCE_ONLINE);
    fx_free(f);
}

static void test_status_validation(void **state)
{
    struct fx *f = fx_new();
    struct presence_stats before;

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    before = stats(f);
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_OFFLINE, 0, f->now),
                     PRESENCE_E_BAD_STATUS);
    assert_int_equal(presence_set_status(f->p, "s1", (enum presence_status)42, 0, f->now),
                     PRESENCE_E_BAD_STATUS);
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_BUSY, f->now, f->now),
                     PRESENCE_E_BAD_EXPIRY);
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_DND, f->now - 1, f->now),
                     PRESENCE_E_BAD_EXPIRY);
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_ONLINE, f->now + 5, f->now),
                     PRESENCE_E_BAD_EXPIRY);
    assert_int_equal(presence_set_status(f->p, "nope", PRESENCE_BUSY, 0, f->now),
                     PRESENCE_E_NO_SESSION);
    assert_int_equal(stats(f).state_writes, before.state_writes);
    assert_int_equal(session_status(f, "s1"), PRESENCE_ONLINE);
    assert_int_equal(presence_status_parse("dnd"), PRESENCE_DND);
    assert_int_equal(presence_status_parse("offline"), PRESENCE_E_BAD_STATUS);
    assert_int_equal(presence_status_parse("Busy"), PRESENCE_E_BAD_STATUS);
    fx_free(f);
}

/* ---- custom status ---- */

static char *repeat(const char *unit, size_t n)
{
    size_t len = strlen(unit);
    char *s = malloc(len * n + 1);

    assert_non_null(s);
    for (size_t i = 0; i < n; i++)
        memcpy(s + i * len, unit, len);
    s[len * n] = '\0';
    return s;
}

static void expect_text(const char *text, int rc)
{
    assert_int_equal(presence_custom_check(text, NULL), rc);
}

static void expect_text_n(const char *unit, size_t n, int rc)
{
    char *s = repeat(unit, n);

    expect_text(s, rc);
    free(s);
}

static void test_custom_text_validation(void **state)
{
    (void)state;
    expect_text("", 0);
    expect_text("In a meeting", 0);
    expect_text_n("a", 100, 0);
    expect_text_n("a", 101, PRESENCE_E_TEXT_LONG);
    expect_text_n("\xF0\x9F\x98\x80", 100, 0); /* 100 emoji: 400 bytes */
    expect_text_n("\xF0\x9F\x98\x80", 101, PRESENCE_E_TEXT_LONG);
    expect_text_n("\xC3\xA9", 100, 0); /* e-acute: 2 bytes each */
    expect_text_n("\xC3\xA9", 101, PRESENCE_E_TEXT_LONG);
    expect_text_n("a", 5000, PRESENCE_E_TEXT_LONG);
    expect_text("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC", 0);
    expect_text("bad \xC3\x28", PRESENCE_E_TEXT_UTF8);
    expect_text("\xC0\xAF", PRESENCE_E_TEXT_UTF8);     /* overlong */
    expect_text("\x80x", PRESENCE_E_TEXT_UTF8);        /* stray continuation */
    expect_text("\xED\xA0\x80", PRESENCE_E_TEXT_UTF8); /* surrogate */
    expect_text("\xF4\x90\x80\x80", PRESENCE_E_TEXT_UTF8);
    expect_text("cut \xE6\x97", PRESENCE_E_TEXT_UTF8);
    expect_text("a\x01", PRESENCE_E_TEXT_CONTROL);
    expect_text("two\nlines", PRESENCE_E_TEXT_CONTROL);
    expect_text("tab\there", PRESENCE_E_TEXT_CONTROL);
    expect_text("del\x7F", PRESENCE_E_TEXT_CONTROL);
    expect_text("c1 \xC2\x85", PRESENCE_E_TEXT_CONTROL);      /* U+0085 */
    expect_text("ls \xE2\x80\xA8", PRESENCE_E_TEXT_CONTROL);  /* U+2028 */
    expect_text("rlo \xE2\x80\xAE", PRESENCE_E_TEXT_CONTROL); /* U+202E */
    expect_text("iso \xE2\x81\xA6", PRESENCE_E_TEXT_CONTROL); /* U+2066 */
    expect_text("zwj ok \xE2\x80\x8D", 0);                    /* U+200D is not */
    expect_text("nbsp\xC2\xA0ok", 0);
}

static void expect_emoji(const char *emoji, bool ok)
{
    int rc = presence_custom_check(NULL, emoji);

    if (ok != (rc == 0))
        fail_msg("emoji \"%s\": got %d", emoji, rc);
    if (!ok)
        assert_int_equal(rc, PRESENCE_E_BAD_EMOJI);
}

static void test_custom_emoji_validation(void **state)
{
    char code[40];

    (void)state;
    expect_emoji("", true);
    /* Shortcodes: [a-z0-9_+-]{1,32} between colons. */
    expect_emoji(":tada:", true);
    expect_emoji(":+1:", true);
    expect_emoji(":-1:", true);
    expect_emoji(":a:", true);
    expect_emoji(":thumbs_up_2:", true);
    expect_emoji("::", false);
    expect_emoji(":", false);
    expect_emoji(":Tada:", false);
    expect_emoji(":ta da:", false);
    expect_emoji(":tada", false);
    expect_emoji("tada:", false);
    expect_emoji(":ta:da:", false);
    expect_emoji(":\xC3\xA9:", false);
    snprintf(code, sizeof(code), ":%s:", "abcdefghijklmnopqrstuvwxyz012345");
    expect_emoji(code, true); /* 32 */
    snprintf(code, sizeof(code), ":%s:", "abcdefghijklmnopqrstuvwxyz0123456");
    expect_emoji(code, false); /* 33 */
    /* One emoji. */
    expect_emoji("\xF0\x9F\x98\x80", true);                 /* grinning face */
    expect_emoji("\xE2\x9D\xA4", true);                     /* heart, text style */
    expect_emoji("\xE2\x9D\xA4\xEF\xB8\x8F", true);         /* heart + VS16 */
    expect_emoji("\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", true); /* thumbs up, skin tone */
    expect_emoji("\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7", true); /* flag FR */
    expect_emoji("1\xEF\xB8\x8F\xE2\x83\xA3", true);        /* keycap 1 */
    expect_emoji("#\xE2\x83\xA3", true);                    /* keycap # */
    expect_emoji("\xC2\xA9", true);                         /* copyright */
    /* family: man ZWJ woman ZWJ girl ZWJ boy (7 code points) */
    expect_emoji("\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D"
                 "\xF0\x9F\x91\xA7\xE2\x80\x8D\xF0\x9F\x91\xA6",
                 true);
    /* England: black flag + 5 tags + cancel tag (7 code points) */
    expect_emoji("\xF0\x9F\x8F\xB4\xF3\xA0\x81\xA7\xF3\xA0\x81\xA2\xF3\xA0\x81\xA5"
                 "\xF3\xA0\x81\xAE\xF3\xA0\x81\xA7\xF3\xA0\x81\xBF",
                 true);
    /* kiss, woman and man with skin tones: 10 code points, the longest */
    expect_emoji("\xF0\x9F\x91\xA9\xF0\x9F\x8F\xBD\xE2\x80\x8D\xE2\x9D\xA4\xEF\xB8\x8F"
                 "\xE2\x80\x8D\xF0\x9F\x92\x8B\xE2\x80\x8D\xF0\x9F\x91\xA8\xF0\x9F\x8F\xBB",
                 true);
    /* ... with one more modifier: 11 code points */
    expect_emoji("\xF0\x9F\x91\xA9\xF0\x9F\x8F\xBD\xE2\x80\x8D\xE2\x9D\xA4\xEF\xB8\x8F"
                 "\xE2\x80\x8D\xF0\x9F\x92\x8B\xE2\x80\x8D\xF0\x9F\x91\xA8\xF0\x9F\x8F\xBB"
                 "\xEF\xB8\x8F",
                 false);
    expect_emoji("\xF0\x9F\x98\x80\xF0\x9F\x98\x80", false); /* two emoji */
    expect_emoji("\xF0\x9F\x87\xAB", false);                 /* half a flag */
    expect_emoji("\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7\xF0\x9F\x87\xAB", false);
    expect_emoji("1", false);
    expect_emoji("a", false);
    expect_emoji("\xC3\xA9", false);
    expect_emoji("\xF0\x9F\x98\x80\xE2\x80\x8D", false); /* trailing ZWJ */
    expect_emoji("\xE2\x80\x8D\xF0\x9F\x98\x80", false); /* leading ZWJ */
    expect_emoji("\xF0\x9F\x8F\xBD", false);             /* modifier alone */
    expect_emoji("\xEF\xB8\x8F", false);                 /* VS16 alone */
    expect_emoji("\xF0\x9F\x98\x80 ", false);
    expect_emoji("\xF0\x9F\x98", false); /* truncated UTF-8 */
    expect_emoji("\xE2\x83\xA3", false); /* keycap mark alone */
    expect_emoji("\xF0\x9F\x98\x80\xF0\x9F\x8F\xBB\xF0\x9F\x8F\xBB\xF0\x9F\x8F\xBB"
                 "\xF0\x9F\x8F\xBB\xF0\x9F\x8F\xBB\xF0\x9F\x8F\xBB\xF0\x9F\x8F\xBB"
                 "\xF0\x9F\x8F\xBB\xF0\x9F\x8F\xBB\xF0\x9F\x8F\xBB",
                 false); /* over 40 bytes */
}

static void test_set_custom_errors_change_nothing(void **state)
{
    struct fx *f = fx_new();
    struct presence_session_info si;
    struct presence_stats before;
    char *long_text = repeat("x", 101);

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    assert_int_equal(presence_set_custom(f->p, "s1", "old", ":tada:", 0, f->now), 0);
    before = stats(f);
    assert_int_equal(presence_set_custom(f->p, "s1", long_text, NULL, 0, f->now),
                     PRESENCE_E_TEXT_LONG);
    assert_int_equal(presence_set_custom(f->p, "s1", "ok", "nope", 0, f->now),
                     PRESENCE_E_BAD_EMOJI);
    assert_int_equal(presence_set_custom(f->p, "s1", "a\x02", NULL, 0, f->now),
                     PRESENCE_E_TEXT_CONTROL);
    assert_int_equal(presence_set_custom(f->p, "s1", "\xFF", NULL, 0, f->now),
                     PRESENCE_E_TEXT_UTF8);
    assert_int_equal(presence_set_custom(f->p, "s1", "ok", NULL, f->now, f->now),
                     PRESENCE_E_BAD_EXPIRY);
    assert_int_equal(presence_set_custom(f->p, "zz", "ok", NULL, 0, f->now), PRESENCE_E_NO_SESSION);
    assert_int_equal(stats(f).state_writes, before.state_writes);
    assert_int_equal(stats(f).allocations, before.allocations);
    assert_int_equal(presence_get_session(f->p, "s1", &si), 0);
    assert_string_equal(si.custom.text, "old");
    assert_string_equal(si.custom.emoji, ":tada:");
    /* Clearing ignores the expiry. */
    assert_int_equal(presence_set_custom(f->p, "s1", "", NULL, 1, f->now), 0);
    assert_int_equal(presence_get_session(f->p, "s1", &si), 0);
    assert_string_equal(si.custom.text, "");
    assert_int_equal(si.custom.expires_at, 0);
    free(long_text);
    fx_free(f);
}

static void test_custom_expiry_clears(void **state)
{
    struct fx *f = fx_new();
    uint64_t until = T0 + 2 * MIN_MS;

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    assert_int_equal(presence_set_custom(f->p, "s1", "lunch", ":pizza:", until, f->now), 0);
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_BUSY, until + MIN_MS, f->now), 0);
    flush(f);
    assert_int_equal(f->events, 1);
    assert_string_equal(f->ev[0].cur.text, "lunch");
    assert_string_equal(f->ev[0].cur.emoji, ":pizza:");
    assert_int_equal(f->ev[0].cur.custom_expires, until);
    assert_int_equal(f->ev[0].cur.status, PRESENCE_BUSY);
    beat_until(f, "s1", until - 1);
    assert_int_equal(f->events, 1);
    run_to(f, until);
    flush(f);
    assert_int_equal(f->events, 2);
    assert_string_equal(f->ev[1].cur.text, "");
    assert_string_equal(f->ev[1].cur.emoji, "");
    assert_int_equal(f->ev[1].cur.custom_expires, 0);
    assert_int_equal(f->ev[1].cur.status, PRESENCE_BUSY);
    /* The status expiry, one minute later, still fires. */
    beat_until(f, "s1", until + MIN_MS);
    flush(f);
    assert_int_equal(f->events, 3);
    assert_int_equal(f->ev[2].cur.status, PRESENCE_ONLINE);
    fx_free(f);
}

/* ---- aggregation ---- */

static void set_session(struct fx *f, const char *sid, enum presence_status st)
{
    assert_int_equal(presence_set_status(f->p, sid, st, 0, f->now), 0);
}

/*
 * Every combination of a desktop and a mobile status under each policy.
 * The mobile status is set last (one second later), so mobile is the most
 * recently active session.
 */
static void test_policy_matrix(void **state)
{
    static const enum presence_status st[4] = {PRESENCE_ONLINE, PRESENCE_AWAY, PRESENCE_BUSY,
                                               PRESENCE_DND};
    enum { ON = PRESENCE_ONLINE, AW = PRESENCE_AWAY, BU = PRESENCE_BUSY, DN = PRESENCE_DND };
    /* expected[policy][desktop][mobile] */
    static const int expected[3][4][4] = {
        [PRESENCE_POLICY_MOST_AVAILABLE] = {{ON, ON, ON, ON},
                                            {ON, AW, BU, AW},
                                            {ON, BU, BU, BU},
                                            {ON, AW, BU, DN}},
        [PRESENCE_POLICY_DND_WINS] = {{ON, ON, ON, DN},
                                      {ON, AW, BU, DN},
                                      {ON, BU, BU, DN},
                                      {DN, DN, DN, DN}},
        [PRESENCE_POLICY_MOST_RECENT] = {{ON, ON, BU, DN},
                                         {ON, AW, BU, DN},
                                         {ON, AW, BU, DN},
                                         {ON, AW, BU, DN}},
    };

    (void)state;
    for (int pol = 0; pol < 3; pol++) {
        for (int d = 0; d < 4; d++) {
            for (int m = 0; m < 4; m++) {
                struct presence_config cfg;
                struct fx *f;
                struct presence_view v;

                presence_config_init(&cfg);
                cfg.policy = (enum presence_policy)pol;
                f = fx_new_cfg(&cfg);
                start(f, "d", "u", PRESENCE_DEVICE_DESKTOP);
                start(f, "m", "u", PRESENCE_DEVICE_MOBILE);
                set_session(f, "d", st[d]);
                step(f, SEC);
                set_session(f, "m", st[m]);
                flush(f);
                v = view(f, "u");
                if ((int)v.status != expected[pol][d][m])
                    fail_msg("%s desktop=%s mobile=%s: got %s",
                             presence_policy_name((enum presence_policy)pol),
                             presence_status_name(st[d]), presence_status_name(st[m]),
                             presence_status_name(v.status));
                assert_int_equal(v.devices[PRESENCE_DEVICE_DESKTOP], st[d]);
                assert_int_equal(v.devices[PRESENCE_DEVICE_MOBILE], st[m]);
                assert_int_equal(v.devices[PRESENCE_DEVICE_WEB], PRESENCE_OFFLINE);
                fx_free(f);
            }
        }
    }
}

/* most-recent follows activity, not the order of the status changes. */
static void test_most_recent_follows_activity(void **state)
{
    struct presence_config cfg;
    struct fx *f;

    (void)state;
    presence_config_init(&cfg);
    cfg.policy = PRESENCE_POLICY_MOST_RECENT;
    f = fx_new_cfg(&cfg);
    start(f, "d", "u", PRESENCE_DEVICE_DESKTOP);
    start(f, "m", "u", PRESENCE_DEVICE_MOBILE);
    set_session(f, "d", PRESENCE_DND);
    step(f, SEC);
    set_session(f, "m", PRESENCE_BUSY);
    flush(f);
    assert_int_equal(view(f, "u").status, PRESENCE_BUSY);
    step(f, 10 * SEC);
    assert_int_equal(presence_activity(f->p, "d", true, f->now), 0);
    flush(f);
    assert_int_equal(view(f, "u").status, PRESENCE_DND);
    /* Both idle: away; one of them active again: online. */
    set_session(f, "d", PRESENCE_ONLINE);
    set_session(f, "m", PRESENCE_ONLINE);
    assert_int_equal(presence_activity(f->p, "d", false, f->now), 0);
    assert_int_equal(presence_activity(f->p, "m", false, f->now), 0);
    flush(f);
    assert_int_equal(view(f, "u").status, PRESENCE_AWAY);
    step(f, SEC);
    assert_int_equal(presence_activity(f->p, "d", true, f->now), 0);
    step(f, SEC);
    set_session(f, "m", PRESENCE_AWAY); /* the most recent, but away */
    flush(f);
    assert_int_equal(view(f, "u").status, PRESENCE_ONLINE);
    fx_free(f);
}

static void test_custom_from_most_recently_active(void **state)
{
    struct fx *f = fx_new();
    struct presence_view v;

    (void)state;
    start(f, "d", "u", PRESENCE_DEVICE_DESKTOP);
    start(f, "m", "u", PRESENCE_DEVICE_MOBILE);
    start(f, "w", "u", PRESENCE_DEVICE_WEB);
    assert_int_equal(presence_set_custom(f->p, "d", "at my desk", NULL, 0, f->now), 0);
    step(f, SEC);
    assert_int_equal(presence_set_custom(f->p, "m", "on the go", ":bus:", 0, f->now), 0);
    flush(f);
    v = view(f, "u");
    assert_string_equal(v.custom.text, "on the go");
    assert_string_equal(v.custom.emoji, ":bus:");
    /* Desktop becomes the most recently active (beyond the throttle). */
    step(f, 10 * SEC);
    assert_int_equal(presence_activity(f->p, "d", true, f->now), 0);
    flush(f);
    v = view(f, "u");
    assert_string_equal(v.custom.text, "at my desk");
    assert_string_equal(v.custom.emoji, "");
    /* A more recent session without a custom status hides nothing. */
    step(f, 10 * SEC);
    assert_int_equal(presence_activity(f->p, "w", true, f->now), 0);
    flush(f);
    assert_string_equal(view(f, "u").custom.text, "at my desk");
    /* Clearing it on desktop shows mobile's again. */
    assert_int_equal(presence_set_custom(f->p, "d", NULL, NULL, 0, f->now), 0);
    flush(f);
    assert_string_equal(view(f, "u").custom.text, "on the go");
    fx_free(f);
}

/* Two sessions of one device type merge by the policy. */
static void test_device_breakdown_merges_same_type(void **state)
{
    (void)state;
    for (int pol = 0; pol < 3; pol++) {
        struct presence_config cfg;
        struct fx *f;
        struct presence_view v;

        presence_config_init(&cfg);
        cfg.policy = (enum presence_policy)pol;
        f = fx_new_cfg(&cfg);
        start(f, "d1", "u", PRESENCE_DEVICE_DESKTOP);
        start(f, "d2", "u", PRESENCE_DEVICE_DESKTOP);
        start(f, "t1", "u", PRESENCE_DEVICE_TABLET);
        set_session(f, "d2", PRESENCE_DND);
        step(f, SEC);
        set_session(f, "t1", PRESENCE_AWAY);
        flush(f);
        v = view(f, "u");
        switch (pol) {
        case PRESENCE_POLICY_MOST_AVAILABLE:
            assert_int_equal(v.devices[PRESENCE_DEVICE_DESKTOP], PRESENCE_ONLINE);
            assert_int_equal(v.status, PRESENCE_ONLINE);
            break;
        case PRESENCE_POLICY_DND_WINS:
            assert_int_equal(v.devices[PRESENCE_DEVICE_DESKTOP], PRESENCE_DND);
            assert_int_equal(v.status, PRESENCE_DND);
            break;
        default: /* d2 is the more recent desktop; t1 the most recent */
            assert_int_equal(v.devices[PRESENCE_DEVICE_DESKTOP], PRESENCE_DND);
            assert_int_equal(v.status, PRESENCE_ONLINE); /* away, but d1 is online */
            break;
        }
        assert_int_equal(v.devices[PRESENCE_DEVICE_TABLET], PRESENCE_AWAY);
        assert_int_equal(v.devices[PRESENCE_DEVICE_MOBILE], PRESENCE_OFFLINE);
        fx_free(f);
    }
}

/* ---- limits and ids ---- */

/* u gets one session of each kind, oldest first: "live" (a live
 * connection), "http" (socketless) and "drop" (its socket closed, in the
 * reconnect grace); the events of that are consumed. */
static void three_kinds(struct fx *f)
{
    start(f, "live", "u", PRESENCE_DEVICE_DESKTOP);
    assert_int_equal(presence_session_start(f->p, "http", "u", PRESENCE_DEVICE_WEB, NULL, f->now),
                     0);
    assert_int_equal(
        presence_session_start(f->p, "drop", "u", PRESENCE_DEVICE_MOBILE, conn(2), f->now), 0);
    assert_int_equal(presence_socket_closed(f->p, "drop", conn(2), f->now), 0);
    flush(f);
    clear(f);
}

/* Sessions without a live connection (in their reconnect grace, or
 * socketless as over HTTP) never lock a user out: at the cap the oldest of
 * them is ended, reason REPLACED, and only live connections refuse. */
static void test_max_sessions_replaces_unattached(void **state)
{
    struct presence_config cfg;
    struct fx *f;

    (void)state;
    presence_config_init(&cfg);
    cfg.max_sessions_per_user = 3;
    f = fx_new_cfg(&cfg);
    three_kinds(f);
    /* The socketless "http" is older than the dropped "drop": it goes first. */
    assert_int_equal(
        presence_session_start(f->p, "new1", "u", PRESENCE_DEVICE_TABLET, conn(3), f->now), 0);
    assert_int_equal(f->nends, 1);
    assert_string_equal(f->ends[0].sid, "http");
    assert_int_equal(f->ends[0].reason, PRESENCE_END_REPLACED);
    assert_int_equal(
        presence_session_start(f->p, "new2", "u", PRESENCE_DEVICE_TABLET, conn(4), f->now), 0);
    assert_int_equal(f->nends, 2);
    assert_string_equal(f->ends[1].sid, "drop");
    assert_int_equal(stats(f).sessions, 3);
    assert_int_equal(stats(f).ended[PRESENCE_END_REPLACED], 2);
    /* Three live connections now: the cap refuses, and nothing ends. */
    assert_int_equal(
        presence_session_start(f->p, "new3", "u", PRESENCE_DEVICE_TABLET, conn(5), f->now),
        PRESENCE_E_TOO_MANY);
    assert_int_equal(f->nends, 2);
    assert_int_equal(stats(f).sessions, 3);
    flush(f);
    assert_int_equal(view(f, "u").status, PRESENCE_ONLINE);
    fx_free(f);
}

/* presence_user_yield(): what a session on another node asks for under
 * the cap across nodes. It ends the oldest session without a live
 * connection, never a live one, and says when there is none. */
static void test_user_yield(void **state)
{
    struct fx *f = fx_new();

    (void)state;
    three_kinds(f);
    assert_int_equal(presence_user_yield(f->p, "u", f->now), 0);
    assert_int_equal(f->nends, 1);
    assert_string_equal(f->ends[0].sid, "http");
    assert_int_equal(f->ends[0].reason, PRESENCE_END_REPLACED);
    assert_int_equal(presence_user_yield(f->p, "u", f->now), 0);
    assert_string_equal(f->ends[1].sid, "drop");
    assert_int_equal(presence_user_yield(f->p, "u", f->now), PRESENCE_E_NO_SESSION);
    assert_int_equal(presence_user_yield(f->p, "nobody", f->now), PRESENCE_E_NO_SESSION);
    assert_int_equal(f->nends, 2);
    assert_int_equal(stats(f).sessions, 1);
    flush(f);
    assert_int_equal(view(f, "u").status, PRESENCE_ONLINE);
    fx_free(f);
}

static void test_max_sessions_and_ids(void **state)
{
    struct presence_config cfg;
    struct fx *f;
    struct presence_stats before;
    char id[PRESENCE_ID_MAX + 2];

    (void)state;
    presence_config_init(&cfg);
    cfg.max_sessions_per_user = 3;
    f = fx_new_cfg(&cfg);
    start(f, "a", "u", PRESENCE_DEVICE_DESKTOP);
    start(f, "b", "u", PRESENCE_DEVICE_MOBILE);
    start(f, "c", "u", PRESENCE_DEVICE_WEB);
    flush(f);
    clear(f);
    before = stats(f);
    assert_int_equal(
        presence_session_start(f->p, "d", "u", PRESENCE_DEVICE_TABLET, conn(1), f->now),
        PRESENCE_E_TOO_MANY);
    flush(f);
    assert_int_equal(f->events, 0);
    assert_int_equal(stats(f).sessions, 3);
    assert_int_equal(stats(f).state_writes, before.state_writes);
    assert_int_equal(stats(f).allocations, before.allocations);
    assert_int_equal(view(f, "u").devices[PRESENCE_DEVICE_TABLET], PRESENCE_OFFLINE);
    assert_int_equal(presence_get_session(f->p, "d", &(struct presence_session_info){0}),
                     PRESENCE_E_NO_SESSION);
    /* Other users are not limited by u; a freed slot can be reused. */
    start(f, "d", "v", PRESENCE_DEVICE_TABLET);
    assert_int_equal(presence_session_end(f->p, "a", f->now), 0);
    start(f, "e", "u", PRESENCE_DEVICE_TABLET);
    /* Session ids are unique in the partition. */
    assert_int_equal(presence_session_start(f->p, "d", "u", PRESENCE_DEVICE_WEB, NULL, f->now),
                     PRESENCE_E_SESSION_EXISTS);
    assert_int_equal(presence_session_start(f->p, "x", "w", (enum presence_device)9, NULL, f->now),
                     PRESENCE_E_BAD_DEVICE);
    /* Ids. */
    memset(id, 'a', sizeof(id));
    id[PRESENCE_ID_MAX] = '\0';
    assert_true(presence_id_valid(id));
    assert_int_equal(presence_session_start(f->p, id, id, PRESENCE_DEVICE_WEB, NULL, f->now), 0);
    id[PRESENCE_ID_MAX] = 'a';
    id[PRESENCE_ID_MAX + 1] = '\0';
    assert_false(presence_id_valid(id));
    assert_int_equal(presence_session_start(f->p, id, "w", PRESENCE_DEVICE_WEB, NULL, f->now),
                     PRESENCE_E_BAD_ID);
    assert_int_equal(presence_session_start(f->p, "x", id, PRESENCE_DEVICE_WEB, NULL, f->now),
                     PRESENCE_E_BAD_ID);
    assert_int_equal(presence_heartbeat(f->p, id, f->now), PRESENCE_E_NO_SESSION);
    assert_false(presence_id_valid("org:42/x"));
    assert_true(presence_id_valid("user@example.com"));
    assert_true(presence_id_valid("A-Z_a.z~0:9"));
    assert_false(presence_id_valid(""));
    assert_false(presence_id_valid(NULL));
    assert_false(presence_id_valid("a b"));
    assert_false(presence_id_valid("caf\xC3\xA9"));
    assert_false(presence_id_valid("a\"b"));
    /* An app's namespace prefix (ns.h): the core takes it, clients never send it. */
    assert_false(presence_id_valid("app2|ann"));
    assert_true(presence_ns_id_valid("app2|ann"));
    assert_true(presence_ns_id_valid("ann"));
    assert_false(presence_ns_id_valid("app2|"));
    assert_false(presence_ns_id_valid("|ann"));
    assert_false(presence_ns_id_valid("a|b|ann"));
    assert_false(presence_ns_id_valid("app2|a b"));
    assert_int_equal(
        presence_session_start(f->p, "ns1", "app2|ann", PRESENCE_DEVICE_WEB, NULL, f->now), 0);
    memset(id, 'a', sizeof(id));
    memcpy(id, "app2|", 5);
    id[PRESENCE_ID_MAX] = '\0'; /* 128 bytes, the prefix included */
    assert_true(presence_ns_id_valid(id));
    id[PRESENCE_ID_MAX] = 'a';
    id[PRESENCE_ID_MAX + 1] = '\0';
    assert_false(presence_ns_id_valid(id));
    assert_int_equal(presence_get_user(f->p, "", f->now, &(struct presence_view){0}),
                     PRESENCE_E_BAD_ID);
    fx_free(f);
}

/* ---- debounce, versions, order ---- */

static void test_debounce_flap_cancels(void **state)
{
    struct fx *f = fx_new();

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    flush(f);
    clear(f);
    /* online -> offline -> online inside the window: nothing. */
    assert_int_equal(presence_session_kick(f->p, "s1", f->now), 0);
    step(f, 40);
    start(f, "s2", "u1", PRESENCE_DEVICE_DESKTOP);
    step(f, 40);
    flush(f);
    step(f, SEC);
    assert_int_equal(f->events, 0);
    assert_int_equal(f->nends, 1);
    assert_int_equal(f->ends[0].reason, PRESENCE_END_KICKED);
    /* A user who comes and goes inside one window never shows up. */
    start(f, "s3", "u2", PRESENCE_DEVICE_DESKTOP);
    step(f, 50);
    assert_int_equal(presence_session_end(f->p, "s3", f->now), 0);
    flush(f);
    assert_int_equal(f->events, 0);
    assert_int_equal(view(f, "u2").version, 0);
    fx_free(f);
}

static void test_debounce_merges_to_last_and_versions_increase(void **state)
{
    struct fx *f = fx_new();
    uint64_t v1, last[2];

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    flush(f);
    v1 = view(f, "u1").version;
    clear(f);
    /* online -> busy -> away -> dnd in the window: one event, dnd. */
    set_session(f, "s1", PRESENCE_BUSY);
    step(f, 30);
    set_session(f, "s1", PRESENCE_AWAY);
    step(f, 30);
    set_session(f, "s1", PRESENCE_DND);
    flush(f);
    assert_int_equal(f->events, 1);
    assert_int_equal(f->ev[0].old.status, PRESENCE_ONLINE);
    assert_int_equal(f->ev[0].cur.status, PRESENCE_DND);
    assert_int_equal(f->ev[0].old.version, v1);
    assert_true(f->ev[0].cur.version > v1);
    /* Two users, many changes: per user, old.version is the previous
     * event's version and versions strictly increase. */
    clear(f);
    last[0] = view(f, "u1").version;
    last[1] = 0;
    start(f, "s2", "u2", PRESENCE_DEVICE_MOBILE);
    for (int i = 0; i < 20; i++) {
        set_session(f, "s1", i % 2 ? PRESENCE_BUSY : PRESENCE_DND);
        if (i % 3 == 0)
            set_session(f, "s2", i % 2 ? PRESENCE_AWAY : PRESENCE_ONLINE);
        flush(f);
    }
    for (size_t i = 0; i < f->nev; i++) {
        int k = strcmp(f->ev[i].user, "u1") == 0 ? 0 : 1;

        assert_int_equal(f->ev[i].old.version, last[k]);
        assert_true(f->ev[i].cur.version > f->ev[i].old.version);
        last[k] = f->ev[i].cur.version;
    }
    /* u1: i = 1..19 (i = 0 repeats dnd); u2: i = 0, 3, ..., 18. */
    assert_int_equal(f->events, 19 + 7);
    assert_int_equal(view(f, "u1").version, last[0]);
    assert_int_equal(view(f, "u2").version, last[1]);
    /* Heartbeats and activity alone never emit. */
    clear(f);
    for (int i = 0; i < 10; i++) {
        step(f, 6 * SEC);
        assert_int_equal(presence_heartbeat(f->p, "s1", f->now), 0);
        assert_int_equal(presence_activity(f->p, "s2", true, f->now), 0);
    }
    flush(f);
    assert_int_equal(f->events, 0);
    fx_free(f);
}

static void test_version_start_seeds_versions(void **state)
{
    struct presence_config cfg;
    struct fx *f;

    (void)state;
    presence_config_init(&cfg);
    cfg.version_start = 1000000;
    f = fx_new_cfg(&cfg);
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    flush(f);
    assert_int_equal(f->ev[0].cur.version, 1000001);
    fx_free(f);
}

/* ---- last seen ---- */

static void test_last_seen_after_offline(void **state)
{
    struct fx *f = fx_new();
    uint64_t at = 0;

    (void)state;
    assert_int_equal(presence_last_seen(f->p, "u1", &at), PRESENCE_E_UNKNOWN_USER);
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    start(f, "s2", "u2", PRESENCE_DEVICE_DESKTOP);
    start(f, "s3", "u3", PRESENCE_DEVICE_DESKTOP);
    run_to(f, T0 + 20 * SEC);
    assert_int_equal(presence_heartbeat(f->p, "s1", f->now), 0);
    assert_int_equal(presence_heartbeat(f->p, "s2", f->now), 0);
    assert_int_equal(presence_activity(f->p, "s3", true, f->now), 0);
    /* Online: last seen is the latest beat. */
    assert_int_equal(presence_last_seen(f->p, "u1", &at), 0);
    assert_int_equal(at, T0 + 20 * SEC);
    run_to(f, T0 + 30 * SEC);
    /* A leave is a sign of life; a kick is not; TTL uses the last beat. */
    assert_int_equal(presence_session_end(f->p, "s1", f->now), 0);
    assert_int_equal(presence_session_kick(f->p, "s2", f->now), 0);
    run_to(f, T0 + 20 * SEC + f->cfg.session_ttl_ms);
    flush(f);
    assert_int_equal(view(f, "u1").status, PRESENCE_OFFLINE);
    assert_int_equal(view(f, "u1").last_seen, T0 + 30 * SEC);
    assert_int_equal(view(f, "u2").last_seen, T0 + 20 * SEC);
    assert_int_equal(view(f, "u3").last_seen, T0 + 20 * SEC);
    assert_int_equal(presence_last_seen(f->p, "u3", &at), 0);
    assert_int_equal(at, T0 + 20 * SEC);
    /* Kept, and the same when read much later. */
    run_to(f, T0 + 3 * DAY);
    assert_int_equal(view(f, "u1").last_seen, T0 + 30 * SEC);
    assert_int_equal(stats(f).records, 3);
    /* Back online: no last seen in the view; offline again: the new one. */
    start(f, "s4", "u1", PRESENCE_DEVICE_MOBILE);
    flush(f);
    assert_int_equal(view(f, "u1").last_seen, 0);
    assert_int_equal(stats(f).records, 2);
    assert_int_equal(presence_session_end(f->p, "s4", f->now), 0);
    flush(f);
    assert_int_equal(view(f, "u1").last_seen, f->now - f->cfg.debounce_ms);
    fx_free(f);
}

/* A stored last seen put back: records for unknown users, the max kept
 * (or the exact value when asked), never for an online user, no event. */
static void test_set_last_seen(void **state)
{
    struct fx *f = fx_new();
    uint64_t at = 0;

    (void)state;
    assert_int_equal(presence_set_last_seen(f->p, "bad id", T0, true), PRESENCE_E_BAD_ID);
    assert_int_equal(presence_set_last_seen(f->p, "u1", 0, true), PRESENCE_E_BAD_ID);
    assert_int_equal(presence_set_last_seen(f->p, "u1", T0 - 5 * SEC, true), 0);
    assert_int_equal(view(f, "u1").status, PRESENCE_OFFLINE);
    assert_int_equal(view(f, "u1").last_seen, T0 - 5 * SEC);
    assert_int_equal(view(f, "u1").version, 0);
    assert_int_equal(stats(f).records, 1);
    /* raise keeps the later one; exact sets it, back in time too. */
    assert_int_equal(presence_set_last_seen(f->p, "u1", T0 - 9 * SEC, true), 0);
    assert_int_equal(view(f, "u1").last_seen, T0 - 5 * SEC);
    assert_int_equal(presence_set_last_seen(f->p, "u1", T0 - 9 * SEC, false), 0);
    assert_int_equal(view(f, "u1").last_seen, T0 - 9 * SEC);
    assert_int_equal(presence_set_last_seen(f->p, "u2", 0, false), 0);
    assert_int_equal(stats(f).records, 1); /* never seen: no record for it */
    /* Online: refused, nothing changes. */
    start(f, "s1", "u1", PRESENCE_DEVICE_WEB);
    flush(f);
    assert_int_equal(presence_set_last_seen(f->p, "u1", T0 + 99 * SEC, true), PRESENCE_E_ONLINE);
    assert_int_equal(presence_session_end(f->p, "s1", f->now), 0);
    flush(f);
    assert_int_equal(presence_last_seen(f->p, "u1", &at), 0);
    assert_int_equal(at, f->now - f->cfg.debounce_ms);
    /* Only the start and the leave were events. */
    assert_int_equal(f->events, 2);
    assert_int_equal(f->ev[0].old.last_seen, T0 - 9 * SEC);
    fx_free(f);
}

static void test_last_seen_records_are_bounded(void **state)
{
    struct presence_config cfg;
    struct fx *f;
    char sid[16], uid[16];
    uint64_t at, v0;

    (void)state;
    presence_config_init(&cfg);
    cfg.last_seen_max = 3;
    f = fx_new_cfg(&cfg);
    for (int i = 0; i < 5; i++) {
        snprintf(sid, sizeof(sid), "s%d", i);
        snprintf(uid, sizeof(uid), "u%d", i);
        start(f, sid, uid, PRESENCE_DEVICE_WEB);
        flush(f);
    }
    v0 = view(f, "u0").version;
    /* Offline in order u0..u4: the two offline longest are evicted. */
    for (int i = 0; i < 5; i++) {
        snprintf(sid, sizeof(sid), "s%d", i);
        assert_int_equal(presence_session_end(f->p, sid, f->now), 0);
        flush(f);
    }
    assert_int_equal(stats(f).records, 3);
    assert_int_equal(stats(f).evictions, 2);
    assert_int_equal(presence_last_seen(f->p, "u0", &at), PRESENCE_E_UNKNOWN_USER);
    assert_int_equal(presence_last_seen(f->p, "u1", &at), PRESENCE_E_UNKNOWN_USER);
    assert_int_equal(presence_last_seen(f->p, "u2", &at), 0);
    assert_int_equal(view(f, "u0").version, 0);
    assert_int_equal(view(f, "u0").last_seen, 0);
    /* Online users never count against the bound. */
    start(f, "s9", "u0", PRESENCE_DEVICE_WEB);
    flush(f);
    assert_true(view(f, "u0").version > v0); /* versions survive eviction */
    assert_int_equal(stats(f).records, 3);
    fx_free(f);

    /* last_seen_max = 0: offline users are forgotten at once. */
    cfg.last_seen_max = 0;
    f = fx_new_cfg(&cfg);
    start(f, "s1", "u1", PRESENCE_DEVICE_WEB);
    flush(f);
    assert_int_equal(presence_session_end(f->p, "s1", f->now), 0);
    flush(f);
    assert_int_equal(f->events, 2);
    assert_int_equal(presence_last_seen(f->p, "u1", &at), PRESENCE_E_UNKNOWN_USER);
    assert_int_equal(stats(f).records, 0);
    fx_free(f);
}

static void expect_age(uint64_t age_ms, enum presence_age_unit unit, uint32_t value)
{
    struct presence_age a = presence_age_of(age_ms);

    if (a.unit != unit || a.value != value)
        fail_msg("age %llu ms: got %s/%u, want %s/%u", (unsigned long long)age_ms,
                 presence_age_unit_name(a.unit), a.value, presence_age_unit_name(unit), value);
}

static void test_age_granularity_boundaries(void **state)
{
    (void)state;
    expect_age(0, PRESENCE_AGE_SECONDS, 0);
    expect_age(999, PRESENCE_AGE_SECONDS, 0);
    expect_age(59 * SEC, PRESENCE_AGE_SECONDS, 59);
    expect_age(60 * SEC - 1, PRESENCE_AGE_SECONDS, 59);
    expect_age(60 * SEC, PRESENCE_AGE_MINUTES, 1);
    expect_age(119 * SEC, PRESENCE_AGE_MINUTES, 1);
    expect_age(59 * MIN_MS, PRESENCE_AGE_MINUTES, 59);
    expect_age(HOUR - 1, PRESENCE_AGE_MINUTES, 59);
    expect_age(HOUR, PRESENCE_AGE_TODAY, 0);
    expect_age(23 * HOUR + 59 * MIN_MS, PRESENCE_AGE_TODAY, 0);
    expect_age(DAY - 1, PRESENCE_AGE_TODAY, 0);
    expect_age(DAY, PRESENCE_AGE_THIS_WEEK, 0);
    expect_age(6 * (uint64_t)DAY, PRESENCE_AGE_THIS_WEEK, 0);
    expect_age(7 * (uint64_t)DAY - 1, PRESENCE_AGE_THIS_WEEK, 0);
    expect_age(7 * (uint64_t)DAY, PRESENCE_AGE_THIS_MONTH, 0);
    expect_age(30 * (uint64_t)DAY - 1, PRESENCE_AGE_THIS_MONTH, 0);
    expect_age(30 * (uint64_t)DAY, PRESENCE_AGE_THIS_YEAR, 0);
    expect_age(365 * (uint64_t)DAY - 1, PRESENCE_AGE_THIS_YEAR, 0);
    expect_age(365 * (uint64_t)DAY, PRESENCE_AGE_LONG_AGO, 0);
    expect_age(UINT64_MAX, PRESENCE_AGE_LONG_AGO, 0);
    assert_string_equal(presence_age_unit_name(PRESENCE_AGE_THIS_WEEK), "this_week");
    assert_string_equal(presence_age_unit_name((enum presence_age_unit)99), "?");
}

/* ---- encoding ---- */

static void expect_json(const struct presence_view *v, int64_t offset, const char *want)
{
    struct buf b = {0};

    presence_encode_user(v, offset, &b);
    buf_append(&b, "", 1);
    assert_string_equal(b.data, want);
    buf_release(&b);
}

static void test_encode_user(void **state)
{
    struct fx *f = fx_new();
    int64_t off = (int64_t)1764406800000 - (int64_t)T0; /* wall = mono + off */
    struct presence_view v;
    char want[512];

    (void)state;
    v = view(f, "nobody");
    expect_json(&v, off,
                "{\"user\":\"nobody\",\"status\":\"offline\",\"devices\":{},\"version\":0}");
    start(f, "d", "u1", PRESENCE_DEVICE_DESKTOP);
    start(f, "m", "u1", PRESENCE_DEVICE_MOBILE);
    set_session(f, "m", PRESENCE_AWAY);
    assert_int_equal(presence_set_custom(f->p, "d", "In a \"meeting\" \xE2\x98\x95",
                                         ":calendar:", T0 + HOUR, f->now),
                     0);
    flush(f);
    v = view(f, "u1");
    snprintf(want, sizeof(want),
             "{\"user\":\"u1\",\"status\":\"online\",\"devices\":{\"desktop\":\"online\","
             "\"mobile\":\"away\"},\"custom\":{\"text\":\"In a \\\"meeting\\\" \xE2\x98\x95\","
             "\"emoji\":\":calendar:\",\"expiresAt\":1764410400000},\"version\":%llu}",
             (unsigned long long)v.version);
    expect_json(&v, off, want);
    /* Offline, 12.5 minutes after the leave. */
    assert_int_equal(presence_set_custom(f->p, "d", NULL, "\xF0\x9F\x8E\x89", 0, f->now), 0);
    flush(f);
    v = view(f, "u1");
    snprintf(want, sizeof(want),
             "{\"user\":\"u1\",\"status\":\"online\",\"devices\":{\"desktop\":\"online\","
             "\"mobile\":\"away\"},\"custom\":{\"emoji\":\"\xF0\x9F\x8E\x89\"},\"version\":%llu}",
             (unsigned long long)v.version);
    expect_json(&v, off, want);
    run_to(f, T0 + 30 * SEC);
    assert_int_equal(presence_session_end(f->p, "d", f->now), 0);
    assert_int_equal(presence_session_end(f->p, "m", f->now), 0);
    flush(f);
    run_to(f, T0 + 30 * SEC + 12 * MIN_MS + 30 * SEC);
    v = view(f, "u1");
    snprintf(want, sizeof(want),
             "{\"user\":\"u1\",\"status\":\"offline\",\"devices\":{},"
             "\"lastSeen\":{\"at\":%llu,\"ago\":\"minutes\",\"value\":12},\"version\":%llu}",
             (unsigned long long)(T0 + 30 * SEC + off), (unsigned long long)v.version);
    expect_json(&v, off, want);
    run_to(f, T0 + 2 * DAY);
    v = view(f, "u1");
    snprintf(want, sizeof(want),
             "{\"user\":\"u1\",\"status\":\"offline\",\"devices\":{},"
             "\"lastSeen\":{\"at\":%llu,\"ago\":\"this_week\"},\"version\":%llu}",
             (unsigned long long)(T0 + 30 * SEC + off), (unsigned long long)v.version);
    expect_json(&v, off, want);
    /* A last seen "after" the view's now (a caller mixing clocks) is
     * clamped: never in the future. */
    v.last_seen = v.now + 5000;
    snprintf(want, sizeof(want),
             "{\"user\":\"u1\",\"status\":\"offline\",\"devices\":{},"
             "\"lastSeen\":{\"at\":%llu,\"ago\":\"seconds\",\"value\":0},\"version\":%llu}",
             (unsigned long long)(v.now + off), (unsigned long long)v.version);
    expect_json(&v, off, want);
    fx_free(f);
}

/* ---- callbacks that call back in ---- */

/* on_end for "a1" restarts "a1" and kicks "a2", nested. */
static void end_restarts(struct fx *f, const struct presence_session_info *s,
                         enum presence_end_reason reason)
{
    (void)reason;
    if (strcmp(s->sid, "a1") != 0 || f->hook_state++ != 0)
        return;
    assert_int_equal(presence_session_start(f->p, "a1", "u", PRESENCE_DEVICE_WEB, conn(7), f->now),
                     0);
    assert_int_equal(presence_session_kick(f->p, "a2", f->now), 0);
}

/* on_change ends the user's only session from inside its own event. */
static void change_ends(struct fx *f, const struct presence_view *cur)
{
    if (cur->status == PRESENCE_ONLINE && f->hook_state++ == 0)
        assert_int_equal(presence_session_end(f->p, "b1", f->now), 0);
}

static void test_callbacks_may_call_back_in(void **state)
{
    struct presence_config cfg;
    struct fx *f = fx_new();
    struct presence_session_info si;

    (void)state;
    f->on_end = end_restarts;
    start(f, "a1", "u", PRESENCE_DEVICE_WEB);
    start(f, "a2", "u", PRESENCE_DEVICE_WEB);
    flush(f);
    run_to(f, T0 + 5 * SEC);
    assert_int_equal(presence_heartbeat(f->p, "a2", f->now), 0);
    /* From a TTL expiry inside wheel_run: a2's timer is due in the same
     * run (later) and is unlinked by the kick. */
    run_to(f, T0 + 5 * SEC + f->cfg.session_ttl_ms);
    assert_int_equal(f->nends, 2);
    assert_string_equal(f->ends[0].sid, "a1");
    assert_int_equal(f->ends[0].reason, PRESENCE_END_TTL);
    assert_string_equal(f->ends[1].sid, "a2");
    assert_int_equal(f->ends[1].reason, PRESENCE_END_KICKED);
    assert_int_equal(presence_get_session(f->p, "a1", &si), 0);
    assert_ptr_equal(si.conn_ref, conn(7));
    flush(f);
    assert_int_equal(view(f, "u").status, PRESENCE_ONLINE);
    fx_free(f);

    /* With no records kept, a user whose session ends inside its own
     * on_change must survive until its next flush. */
    presence_config_init(&cfg);
    cfg.last_seen_max = 0;
    f = fx_new_cfg(&cfg);
    f->on_change = change_ends;
    start(f, "b1", "v", PRESENCE_DEVICE_WEB);
    flush(f);
    assert_int_equal(f->events, 1);
    assert_int_equal(f->nends, 1);
    flush(f);
    assert_int_equal(f->events, 2);
    assert_int_equal(f->ev[1].cur.status, PRESENCE_OFFLINE);
    assert_int_equal(f->ev[1].old.version, f->ev[0].cur.version);
    assert_int_equal(view(f, "v").version, 0); /* forgotten */
    fx_free(f);
}

static void test_list_and_get_sessions(void **state)
{
    struct fx *f = fx_new();
    struct presence_session_info si[4];

    (void)state;
    assert_int_equal(presence_list_sessions(f->p, "u1", si, 4), 0);
    assert_int_equal(presence_list_sessions(f->p, "", si, 4), 0);
    start(f, "a", "u1", PRESENCE_DEVICE_DESKTOP);
    step(f, SEC);
    assert_int_equal(
        presence_session_start(f->p, "b", "u1", PRESENCE_DEVICE_MOBILE, conn(5), f->now), 0);
    assert_int_equal(presence_set_status(f->p, "b", PRESENCE_DND, f->now + HOUR, f->now), 0);
    assert_int_equal(presence_set_custom(f->p, "b", "x", ":y:", f->now + MIN_MS, f->now), 0);
    step(f, 6 * SEC);
    assert_int_equal(presence_heartbeat(f->p, "b", f->now), 0);
    assert_int_equal(presence_socket_closed(f->p, "a", conn(1), f->now), 0);
    /* Start order; cap smaller than the count still returns the count. */
    assert_int_equal(presence_list_sessions(f->p, "u1", si, 1), 2);
    assert_string_equal(si[0].sid, "a");
    assert_int_equal(presence_list_sessions(f->p, "u1", si, 4), 2);
    assert_string_equal(si[0].user, "u1");
    assert_int_equal(si[0].device, PRESENCE_DEVICE_DESKTOP);
    assert_int_equal(si[0].status, PRESENCE_ONLINE);
    assert_false(si[0].attached);
    assert_int_equal(si[0].connected_at, T0);
    assert_string_equal(si[1].sid, "b");
    assert_int_equal(si[1].status, PRESENCE_DND);
    assert_false(si[1].idle);
    assert_true(si[1].attached);
    assert_ptr_equal(si[1].conn_ref, conn(5));
    assert_string_equal(si[1].custom.text, "x");
    assert_string_equal(si[1].custom.emoji, ":y:");
    assert_int_equal(si[1].custom.expires_at, T0 + SEC + MIN_MS);
    assert_int_equal(si[1].status_expires_at, T0 + SEC + HOUR);
    assert_int_equal(si[1].connected_at, T0 + SEC);
    assert_int_equal(si[1].last_heartbeat, T0 + 7 * SEC);
    assert_int_equal(si[1].last_activity, T0 + SEC);
    presence_free(NULL);
    fx_free(f);
}

static void test_free_with_live_state(void **state)
{
    struct fx *f = fx_new();

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_WEB);
    start(f, "s2", "u1", PRESENCE_DEVICE_WEB);
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_BUSY, f->now + HOUR, f->now), 0);
    assert_int_equal(presence_set_custom(f->p, "s2", "x", NULL, f->now + HOUR, f->now), 0);
    assert_int_equal(presence_socket_closed(f->p, "s2", conn(1), f->now), 0);
    start(f, "s3", "u2", PRESENCE_DEVICE_WEB);
    flush(f);
    assert_int_equal(presence_session_end(f->p, "s3", f->now), 0);
    /* Pending debounce, grace, idle and expiry timers, one record. */
    fx_free(f); /* checks the wheel is empty; ASan checks the memory */
}

static void test_names_errors_config(void **state)
{
    struct presence_config c;
    const int codes[] = {
        PRESENCE_E_BAD_ID,     PRESENCE_E_BAD_DEVICE,   PRESENCE_E_BAD_STATUS,
        PRESENCE_E_TEXT_UTF8,  PRESENCE_E_TEXT_CONTROL, PRESENCE_E_TEXT_LONG,
        PRESENCE_E_BAD_EMOJI,  PRESENCE_E_BAD_EXPIRY,   PRESENCE_E_SESSION_EXISTS,
        PRESENCE_E_NO_SESSION, PRESENCE_E_TOO_MANY,     PRESENCE_E_DETACHED,
        PRESENCE_E_CONN,       PRESENCE_E_UNKNOWN_USER, PRESENCE_E_CONFIG,
    };

    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(codes); i++) {
        assert_true(codes[i] < -PS_EBASE);
        assert_string_not_equal(presence_strerror(codes[i]), "unknown error");
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(codes[i], codes[j]);
            assert_string_not_equal(presence_strerror(codes[i]), presence_strerror(codes[j]));
        }
    }
    assert_string_equal(presence_strerror(-1), "unknown error");
    for (int d = 0; d < PRESENCE_DEVICE_COUNT; d++)
        assert_int_equal(presence_device_parse(presence_device_name((enum presence_device)d)), d);
    assert_int_equal(presence_device_parse("phone"), PRESENCE_E_BAD_DEVICE);
    assert_int_equal(presence_device_parse(NULL), PRESENCE_E_BAD_DEVICE);
    for (int s = PRESENCE_ONLINE; s <= PRESENCE_DND; s++)
        assert_int_equal(presence_status_parse(presence_status_name((enum presence_status)s)), s);
    assert_string_equal(presence_status_name(PRESENCE_OFFLINE), "offline");
    for (int pol = 0; pol <= PRESENCE_POLICY_MOST_RECENT; pol++)
        assert_int_equal(presence_policy_parse(presence_policy_name((enum presence_policy)pol)),
                         pol);
    assert_int_equal(presence_policy_parse("first"), PRESENCE_E_CONFIG);
    presence_config_init(&c);
    assert_int_equal(c.heartbeat_interval_ms, 15000);
    assert_int_equal(c.session_ttl_ms, 45000);
    assert_int_equal(c.reconnect_grace_ms, 5000);
    assert_int_equal(c.heartbeat_min_ms, 5000);
    assert_int_equal(c.idle_ms, 300000);
    assert_int_equal(presence_config_check(&c), 0);
    c.heartbeat_min_ms = 20000;
    assert_int_equal(presence_config_check(&c), PRESENCE_E_CONFIG);
    presence_config_init(&c);
    c.session_ttl_ms = 15000;
    assert_int_equal(presence_config_check(&c), PRESENCE_E_CONFIG);
    presence_config_init(&c);
    c.max_sessions_per_user = 0;
    assert_int_equal(presence_config_check(&c), PRESENCE_E_CONFIG);
    presence_config_init(&c);
    c.policy = (enum presence_policy)7;
    assert_int_equal(presence_config_check(&c), PRESENCE_E_CONFIG);
}

/* ---- randomized: the engine against a brute-force model ---- */

/*
 * The model keeps the same per-session facts as the spec in presence.h
 * (times recorded under the throttle, deadlines, statuses) in plain
 * arrays, and computes views by brute force: the policy by scanning the
 * preference order, "most recent" by sorting. Every step does a random
 * operation and compares return codes, then moves the clock and compares
 * ended sessions, emitted events and reads. The debounce is 0, so every
 * change is out by the second wheel run at the same now.
 */
#define M_USERS    6
#define M_SIDS     24
#define M_MAX_SESS 3

static const char *const m_texts[] = {"", "hi", "lunch \xF0\x9F\x8D\x94", "bad\x01"};
static const char *const m_emojis[] = {"", ":tada:", "\xF0\x9F\x98\x80", "xx"};

struct m_sess {
    bool live;
    int user;
    enum presence_device device;
    enum presence_status manual; /* explicit AWAY/BUSY/DND, or OFFLINE */
    bool active;
    bool attached;
    uintptr_t conn;
    uint64_t seq, last_beat, last_act, status_exp, custom_exp, end_at;
    int text, emoji; /* indexes into m_texts/m_emojis; 0 = none */
};

struct m_view {
    enum presence_status status;
    enum presence_status devices[PRESENCE_DEVICE_COUNT];
    int text, emoji;
    uint64_t custom_exp;
};

struct m_user {
    bool known;
    uint64_t last_seen;
    uint64_t version;
    struct m_view pub;
};

struct model {
    struct presence_config cfg;
    struct m_sess s[M_SIDS];
    struct m_user u[M_USERS];
    uint64_t seq;
    uintptr_t conn_seq;
    int ends[64][2]; /* expected (sid, reason), this step */
    size_t nends;
};

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    /* xorshift64*: fixed seed, same sequence everywhere */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ull) >> 33) % n;
}

static enum presence_status m_status(const struct m_sess *s)
{
    if (s->manual != PRESENCE_OFFLINE)
        return s->manual;
    return s->active ? PRESENCE_ONLINE : PRESENCE_AWAY;
}

static const struct model *sort_model;

/* qsort order: most recently active first. */
static int m_recent_cmp(const void *a, const void *b)
{
    const struct m_sess *x = &sort_model->s[*(const int *)a];
    const struct m_sess *y = &sort_model->s[*(const int *)b];

    if (x->last_act != y->last_act)
        return x->last_act > y->last_act ? -1 : 1;
    return x->seq > y->seq ? -1 : 1;
}

/* The live sessions of user u (of device d, or all when d < 0), most
 * recently active first. */
static size_t m_sessions(const struct model *m, int u, int d, int *out)
{
    size_t n = 0;

    for (int i = 0; i < M_SIDS; i++)
        if (m->s[i].live && m->s[i].user == u && (d < 0 || (int)m->s[i].device == d))
            out[n++] = i;
    sort_model = m;
    qsort(out, n, sizeof(*out), m_recent_cmp);
    return n;
}

static bool m_any(const struct model *m, const int *idx, size_t n, enum presence_status st)
{
    for (size_t i = 0; i < n; i++)
        if (m_status(&m->s[idx[i]]) == st)
            return true;
    return false;
}

static enum presence_status m_policy(const struct model *m, const int *idx, size_t n)
{
    static const enum presence_status order[] = {PRESENCE_ONLINE, PRESENCE_BUSY, PRESENCE_AWAY,
                                                 PRESENCE_DND};
    enum presence_status first;

    if (n == 0)
        return PRESENCE_OFFLINE;
    if (m->cfg.policy == PRESENCE_POLICY_MOST_RECENT) {
        first = m_status(&m->s[idx[0]]);
        if (first == PRESENCE_AWAY && m_any(m, idx, n, PRESENCE_ONLINE))
            return PRESENCE_ONLINE;
        return first;
    }
    if (m->cfg.policy == PRESENCE_POLICY_DND_WINS && m_any(m, idx, n, PRESENCE_DND))
        return PRESENCE_DND;
    for (size_t k = 0; k < ARRAY_SIZE(order); k++)
        if (m_any(m, idx, n, order[k]))
            return order[k];
    return PRESENCE_OFFLINE;
}

static struct m_view m_view_of(const struct model *m, int u)
{
    struct m_view v;
    int idx[M_SIDS];
    size_t n = m_sessions(m, u, -1, idx);

    memset(&v, 0, sizeof(v));
    v.status = m_policy(m, idx, n);
    for (size_t i = 0; i < n; i++) {
        const struct m_sess *s = &m->s[idx[i]];

        if (s->text != 0 || s->emoji != 0) {
            v.text = s->text;
            v.emoji = s->emoji;
            v.custom_exp = s->custom_exp;
            break;
        }
    }
    for (int d = 0; d < PRESENCE_DEVICE_COUNT; d++) {
        n = m_sessions(m, u, d, idx);
        v.devices[d] = m_policy(m, idx, n);
    }
    return v;
}

static bool m_view_equal(const struct m_view *a, const struct m_view *b)
{
    return a->status == b->status && a->text == b->text && a->emoji == b->emoji &&
           a->custom_exp == b->custom_exp &&
           memcmp(a->devices, b->devices, sizeof(a->devices)) == 0;
}

static void m_view_check(const struct m_view *mv, const struct snap *s)
{
    assert_int_equal(s->status, mv->status);
    assert_memory_equal(s->devices, mv->devices, sizeof(s->devices));
    assert_string_equal(s->text, m_texts[mv->text]);
    assert_string_equal(s->emoji, m_emojis[mv->emoji]);
    assert_int_equal(s->custom_expires, mv->custom_exp);
}

static void m_end(struct model *m, int i, enum presence_end_reason reason, uint64_t now)
{
    struct m_sess *s = &m->s[i];
    uint64_t seen = MAX(s->last_beat, s->last_act);

    if (reason == PRESENCE_END_LEAVE)
        seen = MAX(seen, now);
    m->u[s->user].last_seen = MAX(m->u[s->user].last_seen, seen);
    s->live = false;
    m->ends[m->nends][0] = i;
    m->ends[m->nends][1] = (int)reason;
    m->nends++;
}

static void m_beat(struct model *m, struct m_sess *s, uint64_t now)
{
    if (now >= s->last_beat + m->cfg.heartbeat_min_ms) {
        s->last_beat = now;
        s->end_at = now + m->cfg.session_ttl_ms;
    }
}

static void m_mark_active(struct m_sess *s, uint64_t now)
{
    s->active = true;
    s->last_act = now;
}

/* What the wheel does at now, in the model. */
static void m_timers(struct model *m, uint64_t now)
{
    for (int i = 0; i < M_SIDS; i++) {
        struct m_sess *s = &m->s[i];

        if (!s->live)
            continue;
        if (s->end_at <= now) {
            m_end(m, i, s->attached ? PRESENCE_END_TTL : PRESENCE_END_GRACE, now);
            continue;
        }
        if (s->active && s->last_act + m->cfg.idle_ms <= now)
            s->active = false;
        if (s->status_exp != 0 && s->status_exp <= now) {
            s->manual = PRESENCE_OFFLINE;
            s->status_exp = 0;
        }
        if (s->custom_exp != 0 && s->custom_exp <= now)
            s->text = s->emoji = 0, s->custom_exp = 0;
    }
}

static int m_user_sessions(const struct model *m, int u)
{
    int n = 0;

    for (int i = 0; i < M_SIDS; i++)
        n += m->s[i].live && m->s[i].user == u;
    return n;
}

static int m_start(struct model *m, int i, int u, enum presence_device d, uint64_t now)
{
    struct m_sess *s = &m->s[i];

    if (s->live)
        return PRESENCE_E_SESSION_EXISTS;
    if (m_user_sessions(m, u) >= M_MAX_SESS) { /* the oldest one without a socket goes */
        int old = -1;

        for (int k = 0; k < M_SIDS; k++)
            if (m->s[k].live && m->s[k].user == u && !m->s[k].attached &&
                (old < 0 || m->s[k].seq < m->s[old].seq))
                old = k;
        if (old < 0)
            return PRESENCE_E_TOO_MANY;
        m_end(m, old, PRESENCE_END_REPLACED, now);
    }
    memset(s, 0, sizeof(*s));
    s->live = s->active = s->attached = true;
    s->user = u;
    s->device = d;
    s->manual = PRESENCE_OFFLINE;
    s->conn = ++m->conn_seq;
    s->seq = ++m->seq;
    s->last_beat = s->last_act = now;
    s->end_at = now + m->cfg.session_ttl_ms;
    m->u[u].known = true;
    return 0;
}

static int m_set_status(struct model *m, struct m_sess *s, enum presence_status st, uint64_t exp,
                        uint64_t now)
{
    if (!s->live)
        return PRESENCE_E_NO_SESSION;
    if (st == PRESENCE_OFFLINE)
        return PRESENCE_E_BAD_STATUS;
    if (st == PRESENCE_ONLINE || st == PRESENCE_AWAY ? exp != 0 : exp != 0 && exp <= now)
        return PRESENCE_E_BAD_EXPIRY;
    s->manual = st == PRESENCE_ONLINE ? PRESENCE_OFFLINE : st;
    s->status_exp = exp;
    if (st == PRESENCE_AWAY) {
        s->last_act = MAX(s->last_act, now);
        s->active = false;
    } else {
        m_mark_active(s, now);
    }
    (void)m;
    return 0;
}

static int m_set_custom(struct m_sess *s, int text, int emoji, uint64_t exp, uint64_t now)
{
    if (!s->live)
        return PRESENCE_E_NO_SESSION;
    if (text == 3)
        return PRESENCE_E_TEXT_CONTROL;
    if (emoji == 3)
        return PRESENCE_E_BAD_EMOJI;
    if (text == 0 && emoji == 0)
        exp = 0;
    else if (exp != 0 && exp <= now)
        return PRESENCE_E_BAD_EXPIRY;
    s->text = text;
    s->emoji = emoji;
    s->custom_exp = exp;
    m_mark_active(s, now);
    return 0;
}

/* A random expiry: none, in the future, or invalid (now). */
static uint64_t rnd_expiry(uint64_t now)
{
    uint32_t r = rnd(10);

    return r < 4 ? 0 : r < 9 ? now + 1 + rnd(90 * SEC) : now;
}

/* One random operation on both; their return codes must agree. */
static void random_op(struct fx *f, struct model *m)
{
    static char sids[M_SIDS][16], uids[M_USERS][16];
    int i = (int)rnd(M_SIDS), u = (int)rnd(M_USERS);
    struct m_sess *s = &m->s[i];
    uint64_t now = f->now;
    int got = 0, want = 0;

    for (int k = 0; k < M_SIDS; k++)
        snprintf(sids[k], sizeof(sids[k]), "s%d", k);
    for (int k = 0; k < M_USERS; k++)
        snprintf(uids[k], sizeof(uids[k]), "u%d", k);
    switch (rnd(11)) {
    case 0:
    case 1: {
        enum presence_device d = (enum presence_device)rnd(PRESENCE_DEVICE_COUNT);

        want = m_start(m, i, u, d, now);
        got = presence_session_start(f->p, sids[i], uids[u], d, conn(m->conn_seq), now);
        break;
    }
    case 2: {
        bool kick = rnd(4) == 0;

        want = s->live ? 0 : PRESENCE_E_NO_SESSION;
        if (s->live)
            m_end(m, i, kick ? PRESENCE_END_KICKED : PRESENCE_END_LEAVE, now);
        got = kick ? presence_session_kick(f->p, sids[i], now)
                   : presence_session_end(f->p, sids[i], now);
        break;
    }
    case 3: {
        uintptr_t c = rnd(4) ? s->conn : 999999;

        want = !s->live ? PRESENCE_E_NO_SESSION : c != s->conn ? PRESENCE_E_CONN : 0;
        if (want == 0 && s->attached) {
            s->attached = false;
            s->end_at = MIN(now + m->cfg.reconnect_grace_ms, s->last_beat + m->cfg.session_ttl_ms);
        }
        got = presence_socket_closed(f->p, sids[i], conn(c), now);
        break;
    }
    case 4: {
        int who = rnd(4) ? s->user : u;

        want = !s->live || s->user != who ? PRESENCE_E_NO_SESSION : 0;
        if (want == 0) {
            s->attached = true;
            s->conn = ++m->conn_seq;
            s->last_beat = MAX(s->last_beat, now);
            s->end_at = s->last_beat + m->cfg.session_ttl_ms;
        }
        got = presence_session_resume(f->p, uids[who], sids[i], conn(m->conn_seq), NULL, now);
        break;
    }
    case 5:
    case 6: {
        bool active = rnd(3) != 0, hb = rnd(2) == 0;

        want = !s->live ? PRESENCE_E_NO_SESSION : !s->attached ? PRESENCE_E_DETACHED : 0;
        if (want == 0) {
            m_beat(m, s, now);
            if (!hb && active && (!s->active || now >= s->last_act + m->cfg.heartbeat_min_ms))
                m_mark_active(s, now);
            else if (!hb && !active)
                s->active = false;
        }
        got = hb ? presence_heartbeat(f->p, sids[i], now)
                 : presence_activity(f->p, sids[i], active, now);
        break;
    }
    case 7:
    case 8: {
        enum presence_status st = (enum presence_status)rnd(5);
        uint64_t exp =
            st == PRESENCE_BUSY || st == PRESENCE_DND || rnd(8) == 0 ? rnd_expiry(now) : 0;

        want = m_set_status(m, s, st, exp, now);
        got = presence_set_status(f->p, sids[i], st, exp, now);
        break;
    }
    default: {
        int t = (int)rnd(4), e = (int)rnd(4);
        uint64_t exp = rnd_expiry(now);

        want = m_set_custom(s, t, e, exp, now);
        got = presence_set_custom(f->p, sids[i], m_texts[t], m_emojis[e], exp, now);
        break;
    }
    }
    assert_int_equal(got, want);
}

static int end_cmp(const void *a, const void *b)
{
    const int *x = a, *y = b;

    return x[0] != y[0] ? x[0] - y[0] : x[1] - y[1];
}

/* Ended sessions of this step: the same set, whatever the order. */
static void check_ends(struct fx *f, struct model *m)
{
    int got[64][2];

    assert_int_equal(f->nends, m->nends);
    for (size_t k = 0; k < f->nends; k++) {
        got[k][0] = atoi(f->ends[k].sid + 1);
        got[k][1] = (int)f->ends[k].reason;
    }
    qsort(got, f->nends, sizeof(got[0]), end_cmp);
    qsort(m->ends, m->nends, sizeof(m->ends[0]), end_cmp);
    assert_memory_equal(got, m->ends, m->nends * sizeof(got[0]));
    m->nends = f->nends = 0;
}

/* Events of this step: exactly one per user whose view changed. */
static void check_events(struct fx *f, struct model *m)
{
    size_t expected = 0;
    char uid[16];

    for (int u = 0; u < M_USERS; u++) {
        struct m_view cur = m_view_of(m, u);
        const struct event *ev = NULL;
        uint64_t at;

        snprintf(uid, sizeof(uid), "u%d", u);
        for (size_t k = 0; k < f->nev; k++) {
            if (strcmp(f->ev[k].user, uid) == 0) {
                assert_null(ev); /* at most one per user per flush */
                ev = &f->ev[k];
            }
        }
        if (m_view_equal(&cur, &m->u[u].pub)) {
            assert_null(ev);
        } else {
            assert_non_null(ev);
            m_view_check(&m->u[u].pub, &ev->old);
            m_view_check(&cur, &ev->cur);
            assert_int_equal(ev->old.version, m->u[u].version);
            assert_true(ev->cur.version > m->u[u].version);
            m->u[u].version = ev->cur.version;
            m->u[u].pub = cur;
            expected++;
        }
        /* Reads agree with the model. */
        {
            struct presence_view v = view(f, uid);
            struct snap sn;

            snap_of(&v, &sn);
            m_view_check(&m->u[u].pub, &sn);
            assert_int_equal(v.version, m->u[u].version);
            if (v.status == PRESENCE_OFFLINE)
                assert_int_equal(v.last_seen, m->u[u].last_seen);
        }
        if (!m->u[u].known) {
            assert_int_equal(presence_last_seen(f->p, uid, &at), PRESENCE_E_UNKNOWN_USER);
        } else {
            uint64_t want = m->u[u].last_seen;

            for (int i = 0; i < M_SIDS; i++)
                if (m->s[i].live && m->s[i].user == u)
                    want = MAX(want, MAX(m->s[i].last_beat, m->s[i].last_act));
            assert_int_equal(presence_last_seen(f->p, uid, &at), 0);
            assert_int_equal(at, want);
            assert_int_equal(presence_list_sessions(f->p, uid, NULL, 0), m_user_sessions(m, u));
        }
    }
    assert_int_equal(f->nev, expected);
    f->nev = f->events = 0;
}

static uint64_t rnd_delta(void)
{
    uint32_t r = rnd(100);

    /* Zero steps make ties (same now for several sessions) common. */
    if (r < 15)
        return 0;
    return r < 70 ? rnd(2 * SEC) : r < 95 ? rnd(20 * SEC) : rnd(120 * SEC);
}

static void test_randomized_against_model(void **state)
{
    (void)state;
    for (int pol = 0; pol < 3; pol++) {
        struct model *m = calloc(1, sizeof(*m));
        struct fx *f;

        assert_non_null(m);
        presence_config_init(&m->cfg);
        m->cfg.policy = (enum presence_policy)pol;
        m->cfg.debounce_ms = 0;
        m->cfg.idle_ms = 60 * SEC;
        m->cfg.max_sessions_per_user = M_MAX_SESS;
        f = fx_new_cfg(&m->cfg);
        rng_state = 0x9E3779B97F4A7C15ull + (uint64_t)pol;
        for (int step_no = 0; step_no < 20000; step_no++) {
            random_op(f, m);
            run_to(f, f->now); /* the op's flush (debounce 0) */
            check_ends(f, m);
            check_events(f, m);
            run_to(f, f->now + rnd_delta());
            m_timers(m, f->now);
            check_ends(f, m);
            check_events(f, m);
        }
        fx_free(f);
        free(m);
    }
}

/* ---- scale ---- */

/* ---- state kept on demand ---- */

/* Expiries and custom statuses live apart from the session while set;
 * setting, clearing and expiring them in any order keeps each intact. */
static void test_rare_state_on_demand(void **state)
{
    struct fx *f = fx_new();
    struct presence_session_info si;
    struct presence_stats before;
    uint64_t t = T0;

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_DESKTOP);
    flush(f);
    /* Busy until +10 s, then a custom status until +5 s: both kept. */
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_BUSY, t + 10 * SEC, f->now), 0);
    assert_int_equal(presence_set_custom(f->p, "s1", "lunch", ":pizza:", t + 5 * SEC, f->now), 0);
    assert_int_equal(presence_get_session(f->p, "s1", &si), 0);
    assert_int_equal(si.status, PRESENCE_BUSY);
    assert_int_equal(si.status_expires_at, t + 10 * SEC);
    assert_string_equal(si.custom.text, "lunch");
    assert_string_equal(si.custom.emoji, ":pizza:");
    assert_int_equal(si.custom.expires_at, t + 5 * SEC);
    flush(f);
    assert_string_equal(view(f, "u1").custom.text, "lunch");
    /* The custom status expires first; the status expiry stays. */
    run_to(f, t + 5 * SEC);
    assert_int_equal(presence_get_session(f->p, "s1", &si), 0);
    assert_string_equal(si.custom.text, "");
    assert_string_equal(si.custom.emoji, "");
    assert_int_equal(si.custom.expires_at, 0);
    assert_int_equal(si.status, PRESENCE_BUSY);
    assert_int_equal(si.status_expires_at, t + 10 * SEC);
    flush(f);
    assert_string_equal(view(f, "u1").custom.text, "");
    assert_int_equal(view(f, "u1").status, PRESENCE_BUSY);
    run_to(f, t + 10 * SEC);
    assert_int_equal(presence_get_session(f->p, "s1", &si), 0);
    assert_int_equal(si.status, PRESENCE_ONLINE);
    assert_int_equal(si.status_expires_at, 0);
    /* A custom status without expiry survives a status expiry, and
     * clearing it leaves a status expiry alone. */
    assert_int_equal(presence_set_custom(f->p, "s1", NULL, ":x:", 0, f->now), 0);
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_DND, f->now + SEC, f->now), 0);
    step(f, SEC);
    assert_int_equal(presence_get_session(f->p, "s1", &si), 0);
    assert_int_equal(si.status, PRESENCE_ONLINE);
    assert_string_equal(si.custom.emoji, ":x:");
    assert_string_equal(si.custom.text, "");
    assert_int_equal(presence_set_status(f->p, "s1", PRESENCE_DND, f->now + SEC, f->now), 0);
    assert_int_equal(presence_set_custom(f->p, "s1", "", "", 0, f->now), 0);
    assert_int_equal(presence_get_session(f->p, "s1", &si), 0);
    assert_int_equal(si.status, PRESENCE_DND);
    assert_int_equal(si.status_expires_at, f->now + SEC);
    assert_string_equal(si.custom.emoji, "");
    flush(f);
    assert_int_equal(view(f, "u1").status, PRESENCE_DND);
    assert_string_equal(view(f, "u1").custom.emoji, "");
    /* Back to nothing rare: heartbeats still never allocate. */
    step(f, SEC);
    assert_int_equal(session_status(f, "s1"), PRESENCE_ONLINE);
    flush(f);
    before = stats(f);
    for (int i = 0; i < 10; i++) {
        step(f, 5 * SEC);
        assert_int_equal(presence_heartbeat(f->p, "s1", f->now), 0);
    }
    assert_int_equal(stats(f).allocations, before.allocations);
    fx_free(f);
}

/* The debounce timer shares its place with the last-seen LRU link: a
 * record that comes back, or that a callback revives, moves between them. */
static void test_record_revived_and_debounced(void **state)
{
    struct fx *f = fx_new();
    struct presence_view v;

    (void)state;
    start(f, "s1", "u1", PRESENCE_DEVICE_WEB);
    flush(f);
    assert_int_equal(presence_session_end(f->p, "s1", f->now), 0);
    flush(f);
    assert_int_equal(stats(f).records, 1);
    v = view(f, "u1");
    assert_int_equal(v.status, PRESENCE_OFFLINE);
    assert_true(v.last_seen > 0);
    /* Back online: no longer a record, its debounce armed. */
    start(f, "s2", "u1", PRESENCE_DEVICE_MOBILE);
    assert_int_equal(stats(f).records, 0);
    flush(f);
    assert_int_equal(view(f, "u1").status, PRESENCE_ONLINE);
    assert_int_equal(view(f, "u1").devices[PRESENCE_DEVICE_MOBILE], PRESENCE_ONLINE);
    /* Ended inside the window: no event, a record again, still known. */
    clear(f);
    assert_int_equal(presence_session_start(f->p, "s3", "u1", PRESENCE_DEVICE_WEB, conn(1), f->now),
                     0);
    assert_int_equal(presence_session_end(f->p, "s3", f->now), 0);
    flush(f);
    assert_int_equal(f->events, 0);
    assert_int_equal(presence_session_end(f->p, "s2", f->now), 0);
    flush(f);
    assert_int_equal(f->events, 1);
    assert_int_equal(stats(f).records, 1);
    fx_free(f);
}

/* Ties in recency go to the later start, also for the custom status. */
static void test_recency_ties_by_start_order(void **state)
{
    struct presence_config cfg;
    struct fx *f;

    (void)state;
    presence_config_init(&cfg);
    cfg.policy = PRESENCE_POLICY_MOST_RECENT;
    f = fx_new_cfg(&cfg);
    start(f, "a", "u", PRESENCE_DEVICE_WEB);
    start(f, "b", "u", PRESENCE_DEVICE_MOBILE);
    start(f, "c", "u", PRESENCE_DEVICE_DESKTOP);
    /* Same activity time for all three: the latest start, c, decides. */
    assert_int_equal(presence_set_custom(f->p, "a", "from a", NULL, 0, f->now), 0);
    assert_int_equal(presence_set_custom(f->p, "c", "from c", NULL, 0, f->now), 0);
    assert_int_equal(presence_set_status(f->p, "b", PRESENCE_DND, 0, f->now), 0);
    assert_int_equal(presence_set_status(f->p, "c", PRESENCE_BUSY, 0, f->now), 0);
    flush(f);
    assert_int_equal(view(f, "u").status, PRESENCE_BUSY);
    assert_string_equal(view(f, "u").custom.text, "from c");
    /* c ends: b is now the latest start among equals. */
    assert_int_equal(presence_session_end(f->p, "c", f->now), 0);
    flush(f);
    assert_int_equal(view(f, "u").status, PRESENCE_DND);
    assert_string_equal(view(f, "u").custom.text, "from a");
    fx_free(f);
}

static void test_100k_sessions_heartbeats_never_allocate(void **state)
{
    enum { N = 100000 };
    struct presence_config cfg;
    struct fx *f;
    struct presence_stats before, after;
    char sid[16], uid[16];

    (void)state;
    presence_config_init(&cfg);
    f = fx_new_cfg(&cfg);
    for (int i = 0; i < N; i++) {
        snprintf(sid, sizeof(sid), "s%d", i);
        snprintf(uid, sizeof(uid), "u%d", i / 2);
        start(f, sid, uid, (enum presence_device)(i % PRESENCE_DEVICE_COUNT));
    }
    flush(f);
    assert_int_equal(f->events, N / 2);
    before = stats(f);
    assert_int_equal(before.sessions, N);
    assert_int_equal(before.users, N / 2);
    /* Two rounds: one recorded (wheel moves), one throttled. */
    for (int round = 0; round < 2; round++) {
        step(f, round == 0 ? 15 * SEC : 1 * SEC);
        for (int i = 0; i < N; i++) {
            snprintf(sid, sizeof(sid), "s%d", i);
            assert_int_equal(presence_heartbeat(f->p, sid, f->now), 0);
        }
    }
    after = stats(f);
    assert_int_equal(after.allocations, before.allocations);
    assert_int_equal(after.heartbeats - before.heartbeats, 2 * N);
    assert_int_equal(after.heartbeats_throttled - before.heartbeats_throttled, N);
    assert_int_equal(after.state_writes - before.state_writes, N);
    /* Every session still there past the original TTL. */
    run_to(f, T0 + cfg.session_ttl_ms + 5 * SEC);
    assert_int_equal(stats(f).sessions, N);
    assert_int_equal(f->nends, 0);
    fx_free(f);
}

/* ---- restore after a clean stop ---- */

static struct presence_restore restored(const char *sid, const char *uid)
{
    return (struct presence_restore){.sid = sid, .user = uid, .device = PRESENCE_DEVICE_WEB};
}

/* A restored session is online at once, with no event; in its grace from
 * the restore; resumed, nothing happens; not resumed, one offline after
 * the grace with the last seen from before the stop. */
static void test_restore_publishes_without_event_then_grace(void **state)
{
    struct fx *f = fx_new();
    struct presence_restore r = restored("s1", "ann");
    struct presence_restore q = restored("s2", "bob");
    struct presence_session_info si;
    struct presence_view v;
    uint64_t seen = f->now - 30 * SEC, t;

    (void)state;
    step(f, 40 * SEC); /* the clock is past what was saved */
    r.manual = PRESENCE_DND;
    r.status_expires_at = f->now + HOUR;
    r.text = "In a meeting";
    r.emoji = ":calendar:";
    r.custom_expires_at = f->now + HOUR;
    r.last_seen = r.last_activity = seen;
    assert_int_equal(presence_session_restore(f->p, &r, f->now), 0);
    q.last_seen = q.last_activity = seen;
    assert_int_equal(presence_session_restore(f->p, &q, f->now), 0);
    assert_int_equal(presence_session_restore(f->p, &q, f->now), PRESENCE_E_SESSION_EXISTS);
    v = view(f, "ann");
    assert_int_equal(v.status, PRESENCE_DND);
    assert_string_equal(v.custom.text, "In a meeting");
    assert_int_equal(v.custom.expires_at, r.custom_expires_at);
    assert_true(v.version > 0);
    assert_int_equal(presence_get_session(f->p, "s1", &si), 0);
    assert_false(si.attached);
    assert_int_equal(si.manual, PRESENCE_DND);
    t = f->now;
    step(f, SEC);
    assert_int_equal(f->events, 0); /* no event: online before, online after */
    assert_int_equal(presence_session_resume(f->p, "ann", "s1", conn(7), NULL, f->now), 0);
    run_to(f, t + f->cfg.reconnect_grace_ms - 1);
    assert_int_equal(f->nends, 0);
    run_to(f, t + f->cfg.reconnect_grace_ms);
    flush(f);
    assert_int_equal(f->nends, 1);
    assert_string_equal(f->ends[0].sid, "s2");
    assert_int_equal(f->ends[0].reason, PRESENCE_END_GRACE);
    assert_int_equal(f->events, 1); /* bob offline, once */
    assert_string_equal(f->ev[0].user, "bob");
    assert_int_equal(f->ev[0].cur.status, PRESENCE_OFFLINE);
    assert_int_equal(f->ev[0].cur.last_seen, seen);
    assert_int_equal(view(f, "ann").status, PRESENCE_DND);
    fx_free(f);
}

/* Expiries that passed while the server was down are dropped; a bad value
 * changes nothing; the cap is the cap; an idle session stays idle; a
 * socketless one has a TTL from now. */
static void test_restore_expiries_errors_and_kinds(void **state)
{
    struct fx *f = fx_new();
    struct presence_restore r = restored("s1", "ann");
    struct presence_restore h = restored("h1", "hal");
    struct presence_session_info si;
    struct presence_view v;
    char sid[16];

    (void)state;
    step(f, HOUR);
    r.manual = PRESENCE_BUSY;
    r.status_expires_at = f->now - 1;
    r.text = "gone";
    r.custom_expires_at = f->now;
    r.idle = true;
    r.last_seen = r.last_activity = f->now - MIN_MS;
    assert_int_equal(presence_session_restore(f->p, &r, f->now), 0);
    v = view(f, "ann");
    assert_int_equal(v.status, PRESENCE_AWAY); /* busy expired: back to activity, idle */
    assert_string_equal(v.custom.text, "");
    r = restored("s2", "ann");
    r.manual = PRESENCE_AWAY;
    r.status_expires_at = f->now + SEC;
    assert_int_equal(presence_session_restore(f->p, &r, f->now), PRESENCE_E_BAD_STATUS);
    r = restored("s2", "ann");
    r.manual = PRESENCE_ONLINE;
    assert_int_equal(presence_session_restore(f->p, &r, f->now), PRESENCE_E_BAD_STATUS);
    r = restored("s2", "a b");
    assert_int_equal(presence_session_restore(f->p, &r, f->now), PRESENCE_E_BAD_ID);
    r = restored("s2", "ann");
    r.emoji = "nope";
    assert_int_equal(presence_session_restore(f->p, &r, f->now), PRESENCE_E_BAD_EMOJI);
    r = restored("s2", "ann");
    r.device = PRESENCE_DEVICE_COUNT;
    assert_int_equal(presence_session_restore(f->p, &r, f->now), PRESENCE_E_BAD_DEVICE);
    assert_int_equal(stats(f).sessions, 1);
    for (unsigned i = 1; i < f->cfg.max_sessions_per_user; i++) {
        snprintf(sid, sizeof(sid), "c%u", i);
        r = restored(sid, "ann");
        assert_int_equal(presence_session_restore(f->p, &r, f->now), 0);
    }
    r = restored("over", "ann");
    assert_int_equal(presence_session_restore(f->p, &r, f->now), PRESENCE_E_TOO_MANY);
    /* Socketless (HTTP): attached, no connection, ends by its TTL. */
    h.socketless = true;
    h.last_seen = h.last_activity = f->now - MIN_MS;
    assert_int_equal(presence_session_restore(f->p, &h, f->now), 0);
    assert_int_equal(presence_get_session(f->p, "h1", &si), 0);
    assert_true(si.attached);
    assert_null(si.conn_ref);
    assert_int_equal(presence_heartbeat(f->p, "h1", f->now + SEC), 0);
    step(f, f->cfg.session_ttl_ms - 1);
    assert_int_equal(view(f, "hal").status, PRESENCE_ONLINE);
    step(f, 1);
    flush(f);
    assert_int_equal(view(f, "hal").status, PRESENCE_OFFLINE);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_tabs_one_user_online),
        cmocka_unit_test(test_session_tag),
        cmocka_unit_test(test_closing_one_tab_changes_nothing),
        cmocka_unit_test(test_last_leaves_offline_after_grace),
        cmocka_unit_test(test_reload_within_grace_emits_nothing),
        cmocka_unit_test(test_resume_takeover_and_stale_close),
        cmocka_unit_test(test_killed_socket_offline_at_ttl_not_before),
        cmocka_unit_test(test_close_never_extends_ttl),
        cmocka_unit_test(test_heartbeat_storm_writes_nothing),
        cmocka_unit_test(test_idle_then_activity),
        cmocka_unit_test(test_explicit_away_sticks),
        cmocka_unit_test(test_busy_and_dnd_ignore_idle_and_revert),
        cmocka_unit_test(test_status_validation),
        cmocka_unit_test(test_custom_text_validation),
        cmocka_unit_test(test_custom_emoji_validation),
        cmocka_unit_test(test_set_custom_errors_change_nothing),
        cmocka_unit_test(test_custom_expiry_clears),
        cmocka_unit_test(test_policy_matrix),
        cmocka_unit_test(test_most_recent_follows_activity),
        cmocka_unit_test(test_custom_from_most_recently_active),
        cmocka_unit_test(test_device_breakdown_merges_same_type),
        cmocka_unit_test(test_max_sessions_and_ids),
        cmocka_unit_test(test_max_sessions_replaces_unattached),
        cmocka_unit_test(test_user_yield),
        cmocka_unit_test(test_debounce_flap_cancels),
        cmocka_unit_test(test_debounce_merges_to_last_and_versions_increase),
        cmocka_unit_test(test_version_start_seeds_versions),
        cmocka_unit_test(test_last_seen_after_offline),
        cmocka_unit_test(test_set_last_seen),
        cmocka_unit_test(test_last_seen_records_are_bounded),
        cmocka_unit_test(test_age_granularity_boundaries),
        cmocka_unit_test(test_encode_user),
        cmocka_unit_test(test_callbacks_may_call_back_in),
        cmocka_unit_test(test_list_and_get_sessions),
        cmocka_unit_test(test_free_with_live_state),
        cmocka_unit_test(test_names_errors_config),
        cmocka_unit_test(test_randomized_against_model),
        cmocka_unit_test(test_rare_state_on_demand),
        cmocka_unit_test(test_record_revived_and_debounced),
        cmocka_unit_test(test_recency_ties_by_start_order),
        cmocka_unit_test(test_100k_sessions_heartbeats_never_allocate),
        cmocka_unit_test(test_restore_publishes_without_event_then_grace),
        cmocka_unit_test(test_restore_expiries_errors_and_kinds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
