/* SPDX-License-Identifier: MIT */
/*
 * session.c - sessions across workers (session.h): a client's worker
 * forwards each session operation to the user's owner as one bus message,
 * and the owner applies it to its presence core and answers.
 *
 * Heartbeats are throttled on the client's worker already: one faster
 * than heartbeat-min-ms after the last forwarded one is accepted and
 * dropped there, so a heartbeat storm costs one read and a comparison.
 * The forwarded ones go lazily (no answer is sent, the TTL is seconds).
 */
#include "session.h"
#include "cluster_http.h"
#include "cluster_resume.h"
#include "cluster_user.h"

#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "engine_privacy.h"
#include "engine_room.h"
#include "engine_state.h"
#include "frame.h"
#include "http_read.h"
#include "json.h"
#include "log.h"

#define SID_BYTES         16   /* random bytes in a server-made session id */
#define EPHEMERAL_HOLD_MS 2000 /* ephemerals dropped after asking to hide */

/* ---- client side: the operations (session.h) ---- */

void session__start(struct client *c)
{
    struct engine *e = c->e;
    struct emsg *em;

    if (!client_uid(c)[0]) {
        frame_send_welcome(c, &e->w->srv->cfg, client_conn_id(c), "", "", false);
        return;
    }
    c->owner = owner_of_user(e, client_uid(c)) & 127u;
    em = emsg_new(OP_START, client_conn_id(c));
    emsg_set_id(&em->uid, client_uid(c));
    emsg_set_id(&em->sid, client_sid(c));
    em->arg = c->resume;
    em->device = (uint8_t)c->device;
    em->proto = (uint8_t)c->proto; /* kept as the session's tag (the admin API shows it) */
    owner_send(e, c->owner, em);
}

uint64_t session__keepalive_ms(const struct client *c)
{
    int64_t ttl = c->e->w->srv->cfg.session_ttl_ms;

    return (uint64_t)(ttl / 3 > 1000 ? ttl / 3 : 1000);
}

void session__keepalive(struct client *c, struct wheel_timer *t)
{
    if (c->started)
        session__heartbeat(c, "");
    loop_timer_start(c->e->w->loop, t, session__keepalive_ms(c));
}

void session__heartbeat(struct client *c, const char *ref)
{
    uint64_t now = loop_now(c->e->w->loop);

    /* Throttled here already: a storm never reaches the owner, but is
     * counted (presenced_heartbeats_total and _throttled_total). */
    if (now - c->last_beat < (uint64_t)c->e->w->srv->cfg.heartbeat_min_ms) {
        METRIC_ADD(&c->e->w->metrics, heartbeats_early, 1);
        return;
    }
    c->last_beat = now;
    /* No answer is sent, and the TTL is seconds long: it may wait for
     * other traffic to the owner (or 25 ms) instead of waking it. */
    owner_send_lazy(c->e, c->owner, session_msg(c, OP_HEARTBEAT, ref));
}

void session__activity(struct client *c, bool active, const char *ref)
{
    struct emsg *em = session_msg(c, OP_ACTIVITY, ref);

    em->arg = active;
    owner_send(c->e, c->owner, em);
}

void session__status(struct client *c, int status, uint64_t expires_in, const char *ref)
{
    struct emsg *em = session_msg(c, OP_STATUS, ref);

    em->arg = (int8_t)status;
    em->expires_in = expires_in;
    owner_send(c->e, c->owner, em);
}

void session__custom(struct client *c, const char *text, const char *emoji, uint64_t expires_in,
                     const char *ref)
{
    struct emsg *em = session_msg(c, OP_CUSTOM, ref);

    em->text = xstrdup(text);
    em->emoji = xstrdup(emoji);
    em->expires_in = expires_in;
    owner_send(c->e, c->owner, em);
}

void session__leave(struct client *c, const char *ref)
{
    owner_send(c->e, c->owner, session_msg(c, OP_LEAVE, ref));
}

void session__privacy(struct client *c, const struct store_privacy *p, uint8_t mask,
                      const char *ref)
{
    struct emsg *em = session_msg(c, OP_PRIVACY, ref);

    em->priv = *p;
    em->priv_mask = mask;
    if (p->invisible || ((mask & PRIVACY_FIELD_ONLINE) && p->online != STORE_VIS_EVERYONE))
        /* Ephemerals go straight to the rooms, this message through the
         * user's owner: hold them back until the rooms have heard. */
        client_x(c)->ephemeral_hold_until = loop_now(c->e->w->loop) + EPHEMERAL_HOLD_MS;
    owner_send(c->e, c->owner, em);
}

/* ---- owner side: the presence core's callbacks ---- */

void session__on_change(void *ctx, const struct presence_view *old, const struct presence_view *cur)
{
    if (cu__on(ctx))
        cu__local_change(ctx, cur); /* watchers see the global view it brings back */
    else
        engine__privacy_on_change(ctx, old, cur);
}

void session__on_end(void *ctx, const struct presence_session_info *s, enum presence_end_reason why)
{
    struct engine *e = ctx;
    uint64_t conn_id = (uint64_t)(uintptr_t)s->conn_ref;
    struct emsg *em;

    engine__rooms_session_ended(e, s->sid, s->user); /* its rooms see it leave */
    cu__seats_changed(e, s->user);
    if (!s->attached) /* it was in its grace: its resume record goes */
        cs__forget(e, s->user, s->sid);
    if (conn_id == 0)
        ch__ended(e, s->user, s->sid); /* an HTTP session */
    if (why == PRESENCE_END_GRACE || !s->attached || conn_id == 0)
        return; /* its socket is already gone, or it is an HTTP session */
    em = emsg_new(OP_ENDED, conn_id);
    em->arg = (int8_t)why;
    if (why == PRESENCE_END_KICKED && e->kick_reason)
        em->text = xstrdup(e->kick_reason);
    emsg_set_id(&em->sid, s->sid);
    owner_send(e, owner_of_conn(conn_id), em);
}

/* ---- owner side: ops from client workers ---- */

char *session__new_sid(char out[PRESENCE_ID_MAX + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[SID_BYTES];

    if (RAND_bytes(r, sizeof(r)) != 1)
        fatalx("engine", "no randomness for session ids");
    for (size_t i = 0; i < sizeof(r); i++) {
        out[2 * i] = hex[r[i] >> 4];
        out[2 * i + 1] = hex[r[i] & 15];
    }
    out[2 * sizeof(r)] = '\0';
    return out;
}

/* A new session of req's user (keep_sid: under req->sid, else a new id):
 * under the cap across nodes first (which may park req, then 1), then the
 * local one. */
static int start_new(struct engine *e, struct emsg *req, void *ref, uint64_t now, bool keep_sid)
{
    char sid[PRESENCE_ID_MAX + 1];

    if (!cu__admit(e, req))
        return 1;
    if (req->admit == ADMIT_NO)
        return PRESENCE_E_TOO_MANY;
    if (!keep_sid) /* else a dead node's HTTP session, taken over */
        emsg_set_id(&req->sid, session__new_sid(sid));
    return presence_session_start(e->pres, req->sid, req->uid, (enum presence_device)req->device,
                                  ref, now);
}

_Static_assert(ADAPTER_MAX <= PRESENCE_TAG_MAX + 1, "a session's tag holds its protocol id");

void session__on_start(struct engine *e, struct emsg *req)
{
    uint64_t now = loop_now(e->w->loop);
    void *ref = (void *)(uintptr_t)req->conn_id;
    void *old = NULL;
    struct emsg *res;
    bool resumed = false;
    int r = -1;

    if (req->arg && presence_session_resume(e->pres, req->uid, req->sid, ref, &old, now) == 0) {
        resumed = true;
        if (old) { /* the same session on another socket: that one goes */
            struct emsg *kick = emsg_new(OP_KICK, (uint64_t)(uintptr_t)old);
            owner_send(e, owner_of_conn(kick->conn_id), kick);
        } else { /* back from its grace: its resume record goes */
            cs__forget(e, req->uid, req->sid);
        }
        r = 0;
    } else if (req->arg && !cs__take(e, req)) {
        return; /* parked: another node may hold the session */
    }
    if (r != 0 && (r = start_new(e, req, ref, now, false)) == 1)
        return; /* parked: the other nodes' counts first */
    if (r == 0) {
        presence_session_set_tag(e->pres, req->sid, req->proto);
        cu__seats_changed(e, req->uid);
    }
    res = emsg_new(OP_STARTED, req->conn_id);
    res->arg = resumed;
    res->err = r;
    emsg_set_id(&res->sid, req->sid);
    owner_send(e, owner_of_conn(req->conn_id), res);
    if (r == 0) { /* then its settings, once known */
        struct emsg *hello = emsg_new(OP_PRIV_HELLO, req->conn_id);
        emsg_set_id(&hello->uid, req->uid);
        engine__dispatch(e->w, &hello->msg);
    }
}

/* The answer to a session op other than a heartbeat (which has none):
 * an error, or an ack (none for a leave: the session_ended says it). */
static void answer(struct engine *e, const struct emsg *req, int r)
{
    if (r < 0)
        frame_reply_error(e, req->conn_id, "invalid", presence_strerror(r), req->ref);
    else if (r == 0 && req->op != OP_LEAVE)
        frame_reply_ack(e, req);
}

void session__on_heartbeat(struct engine *e, struct emsg *req)
{
    presence_heartbeat(e->pres, req->sid, loop_now(e->w->loop));
}

void session__on_activity(struct engine *e, struct emsg *req)
{
    answer(e, req, presence_activity(e->pres, req->sid, req->arg != 0, loop_now(e->w->loop)));
}

static uint64_t expiry_at(uint64_t now, const struct emsg *req)
{
    return req->expires_in ? now + req->expires_in : 0;
}

void session__on_status(struct engine *e, struct emsg *req)
{
    uint64_t now = loop_now(e->w->loop);

    answer(e, req,
           presence_set_status(e->pres, req->sid, (enum presence_status)req->arg,
                               expiry_at(now, req), now));
}

void session__on_custom(struct engine *e, struct emsg *req)
{
    uint64_t now = loop_now(e->w->loop);

    answer(e, req,
           presence_set_custom(e->pres, req->sid, req->text, req->emoji, expiry_at(now, req), now));
}

void session__on_leave(struct engine *e, struct emsg *req)
{
    answer(e, req, presence_session_end(e->pres, req->sid, loop_now(e->w->loop)));
}

/* Once the server shuts down a closed socket does not start its
 * session's grace: the session stays as it is, to be saved for the next
 * start (persist.h), and nobody sees it end meanwhile (drain.h). With
 * redis set the cluster's own rules apply instead (docs/cluster.md). */
void session__on_closed(struct engine *e, struct emsg *req)
{
    struct presence_session_info si;

    if (!e->env->cluster && atomic_load(&e->w->srv->shutting_down))
        return;
    if (presence_socket_closed(e->pres, req->sid, (void *)(uintptr_t)req->conn_id,
                               loop_now(e->w->loop)) == 0 &&
        presence_get_session(e->pres, req->sid, &si) == 0) {
        cu__seats_changed(e, si.user);
        cs__grace(e, &si); /* resumable on another node too */
    }
}

/* The answer to an HTTP beat: r < 0 an error; else, for a leave (kept
 * -1), whether it ended; for a beat, whether the session was kept. */
static void http_beat_answer(struct engine *e, const struct emsg *req, int r, bool kept)
{
    const struct config *cfg = &e->w->srv->cfg;
    struct buf b = {0};

    if (req->arg)
        buf_printf(&b, "{\"sessionId\":\"%s\",\"ended\":%s}\n", req->sid, kept ? "true" : "false");
    else if (r < 0) {
        buf_append_str(&b, "!{\"error\":{\"code\":\"too_many_sessions\",\"message\":");
        json_append_cstr(&b, presence_strerror(r));
        buf_append_str(&b, "}}\n");
    } else {
        buf_printf(&b,
                   "{\"sessionId\":\"%s\",\"created\":%s,\"heartbeatMs\":%lld,"
                   "\"sessionTtlMs\":%lld}\n",
                   req->sid, kept ? "false" : "true", (long long)cfg->heartbeat_interval_ms,
                   (long long)cfg->session_ttl_ms);
    }
    http_read__answer(e, req, buf_payload(&b));
}

/* Owner side: a heartbeat over HTTP starts the session if needed (an HTTP
 * session has no socket: no grace, its TTL alone ends it), or ends it when
 * the client says it leaves. With several nodes, a session this node does
 * not hold may be another node's: the beat or leave goes there
 * (cluster_http.h). Errors come back as "!" + JSON. */
void session__on_http_beat(struct engine *e, struct emsg *req)
{
    uint64_t now = loop_now(e->w->loop);
    struct presence_session_info si;
    bool known = req->sid[0] && presence_get_session(e->pres, req->sid, &si) == 0 &&
                 strcmp(si.user, req->uid) == 0 && si.conn_ref == NULL;
    bool elsewhere;
    int r = 0;

    if (!known && req->sid[0] && !ch__lookup(e, req))
        return; /* parked: who holds it first */
    elsewhere = req->hs == HS_FORWARDED;
    if (req->arg) { /* leave */
        /* Says what happened: a session that is not this user's HTTP
         * session (unknown, expired, someone else's) is not ended. */
        http_beat_answer(e, req, -1,
                         elsewhere || (known && presence_session_end(e->pres, req->sid, now) == 0));
        return;
    }
    if (known) {
        presence_heartbeat(e->pres, req->sid, now);
        ch__beaten(e, req->uid, req->sid);
    } else if (!elsewhere && (r = start_new(e, req, NULL, now, req->hs == HS_ORPHAN)) == 1) {
        return; /* parked: the other nodes' counts first */
    } else if (!elsewhere && r == 0) {
        cu__seats_changed(e, req->uid);
        ch__started(e, req->uid, req->sid);
    }
    http_beat_answer(e, req, r, known || elsewhere || req->hs == HS_ORPHAN);
}

/* ---- client side: the owner's answers ---- */

void session__on_started(struct engine *e, struct emsg *res)
{
    struct client *c = find_client(e, res->conn_id);

    if (!c) { /* closed before the owner answered: let the session go */
        if (res->err == 0) {
            struct emsg *em = emsg_new(OP_CLOSED, res->conn_id);
            emsg_set_id(&em->sid, res->sid);
            owner_send(e, res->msg.from, em);
        }
        return;
    }
    if (res->err < 0) {
        frame_send_error(c, res->err == PRESENCE_E_TOO_MANY ? "too_many_sessions" : "invalid",
                         presence_strerror(res->err), NULL);
        client__ws_close(c, 1008, "session refused");
        return;
    }
    client_set_sid(c, res->sid);
    c->started = true;
    c->last_beat = loop_now(e->w->loop);
    frame_send_welcome(c, &e->w->srv->cfg, client_conn_id(c), client_uid(c), client_sid(c),
                       res->arg != 0);
    if (frame_adapter(c)->on_started)
        frame_adapter(c)->on_started(c);
}

void session__on_ended(struct engine *e, struct emsg *em)
{
    struct client *c = find_client(e, em->conn_id);

    if (!c || strcmp(client_sid(c), em->sid) != 0)
        return;
    c->started = false;
    frame_send_session_ended(c, em->arg, em->text);
    if (em->arg == PRESENCE_END_LEAVE)
        client__ws_close(c, 1000, "left");
    else
        client__ws_close_end(c, 4000, em->arg, "session ended");
}
