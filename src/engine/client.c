/* SPDX-License-Identifier: MIT */
/*
 * client.c - the sockets of this worker: their compact ids, open and
 * close, the request side of GET /v1/ws, and authentication under
 * auth = jwt. What a client says once open is the protocol adapter's
 * (src/proto/native/); what its session does is session.c's.
 *
 * Authentication. A token comes with the upgrade (?token=, or a
 * "bearer.<token>" entry in Sec-WebSocket-Protocol next to presenced.v1)
 * or in a first {"type":"auth","token":...} message. Until then the
 * socket may only ping and authenticate, and auth-timeout-ms later it is
 * closed with 4401. The token's sub is the user: ?user= and every user id
 * inside messages are ignored. The same message with a newer token
 * refreshes it (same sub); a token that expires unrefreshed closes the
 * socket with 4403, jwt-leeway-s after its exp.
 */
#include "client.h"

#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "engine_expiry.h"
#include "engine_room.h"
#include "flow.h"
#include "frame.h"
#include "http.h"
#include "http_read.h"
#include "httpd.h"
#include "jwt.h"
#include "ns.h"
#include "session.h"
#include "watch.h"

/* ---- ids ---- */

static char *heap_id(const char *v, size_t n)
{
    return n ? pool_strndup(v, n) : engine__no_id;
}

void client__set_ids(struct client *c, const char *uid, const char *sid)
{
    char *old_uid = c->ids_heap ? c->ids.heap.uid : NULL;
    char *old_sid = c->ids_heap ? c->ids.heap.sid : NULL;
    size_t nu = uid ? strlen(uid) : 0, ns = sid ? strlen(sid) : 0;
    char tmp[CLIENT_IDS_INLINE];

    if (nu + ns + 2 <= sizeof(tmp)) { /* via tmp: either may be inline now */
        memcpy(tmp, uid ? uid : "", nu + 1);
        memcpy(tmp + nu + 1, sid ? sid : "", ns + 1);
        memcpy(c->ids.in, tmp, nu + ns + 2);
        c->sid_off = (nu + 1) & 63u;
        c->ids_heap = false;
    } else { /* both copied before ids.heap overlays the inline ones */
        char *u = heap_id(uid, nu), *s = heap_id(sid, ns);
        c->ids.heap.uid = u;
        c->ids.heap.sid = s;
        c->ids_heap = true;
    }
    if (old_uid && old_uid != engine__no_id)
        pool_free(old_uid);
    if (old_sid && old_sid != engine__no_id)
        pool_free(old_sid);
}

/* ---- authentication (auth = jwt; see the top of the file) ---- */

bool client__auth_jwt(const struct engine *e)
{
    return strcmp(e->w->srv->cfg.auth, "jwt") == 0;
}

int client__verify_token(struct engine *e, const char *tok, size_t n, struct jwt_claims *cl)
{
    return jwt_verify(&e->env->jwt, &e->env->jwt_opts, tok, n, (int64_t)(time_wall_ms() / 1000),
                      cl);
}

/* Takes the identity and room rights of verified claims. */
static void take_claims(struct client *c, const struct jwt_claims *cl)
{
    engine__expiry_disarm(c); /* the auth deadline, or the old token's */
    client_set_uid(c, cl->sub);
    c->authed = true;
    c->deadline = cl->exp;
    if (cl->has_device && presence_device_parse(cl->device) >= 0) {
        c->device = (unsigned)presence_device_parse(cl->device) & 7u;
        c->device_claim = true;
    }
    if (c->x) {
        free(c->x->room_claims);
        c->x->room_claims = NULL;
        client_x_trim(c);
    }
    if (cl->has_rooms)
        client_x(c)->room_claims = jwt_rooms_pack(cl);
}

bool client__take_token(struct client *c, const struct jwt_claims *cl)
{
    bool refresh = c->authed;

    take_claims(c, cl);
    engine__expiry_arm(c);
    if (!refresh)
        session__start(c);
    return refresh;
}

void client__expire(struct client *c)
{
    if (!c->authed) {
        frame_send_error(c, "unauthenticated", "no valid token in time", NULL);
        client__ws_close(c, 4401, "authentication required");
        return;
    }
    if (client_is_stream(c)) { /* an event stream: its pattern for an end */
        sse_fail(c->x->sse, "token_expired", "the token expired; reconnect with a new one");
        return;
    }
    frame_send_token_expired(c);
    client__ws_close(c, 4403, "token expired");
}

_Static_assert(sizeof(struct client) <= 144, "an idle socket is one 144-byte pool object");

/* ---- lifetime ---- */

/* Puts an opened client in e->clients, by its id. */
static void client_insert(struct client *c)
{
    uint64_t id = client_conn_id(c);

    hmap_insert(&c->e->clients, &c->node, hash_bytes(&id, sizeof(id)));
}

/* The rest of an open: the auth deadline, or the session. */
static void client_start(struct client *c)
{
    struct engine *e = c->e;

    if (client__auth_jwt(e) && !c->authed && !frame_adapter(c)->own_auth) {
        c->deadline = (int64_t)(loop_now(e->w->loop) + (uint64_t)e->w->srv->cfg.auth_timeout_ms);
        engine__expiry_arm(c);
        return; /* the welcome follows a valid auth message */
    }
    if (c->authed)
        engine__expiry_arm(c);
    session__start(c);
}

void client__open(struct client *c, struct wsconn *ws, unsigned proto)
{
    c->ws = ws;
    c->proto = proto & 3u;
    client_insert(c);
    client_start(c);
}

void client__attach_socketless(struct client *c, unsigned proto)
{
    struct engine *e = c->e;

    c->proto = proto & 3u;
    client_x(c)->sl_id = ((uint64_t)e->w->id << 48) | CLIENT_SOCKETLESS_BIT | ++e->socketless_seq;
    client_insert(c);
}

void client__open_socketless(struct client *c, unsigned proto)
{
    client__attach_socketless(c, proto);
    client_start(c);
}

/* Drops a closing client's watch links and room links. */
static void client_drop_links(struct client *c)
{
    while (c->x && c->x->nlinks > 0)
        watch__remove(c, c->x->nlinks - 1);
    engine__rooms_client_closed(c);
}

void client__close(struct client *c)
{
    struct engine *e = c->e;

    client_drop_links(c);
    engine__expiry_disarm(c);
    if (c->started)
        owner_send(e, c->owner, session_msg(c, OP_CLOSED, NULL));
    hmap_remove(&e->clients, &c->node);
    client__free(c);
}

void client__free(struct client *c)
{
    client_drop_links(c);
    flow__forget(c);
    if (c->x && c->x->adata)
        frame_adapter(c)->release(c);
    if (c->x) {
        pool_free(c->x->links);
        free(c->x->room_claims);
        free(c->x->okey);
        pool_free(c->x);
    }
    client_free_ids(c);
    pool_free(c);
}

/* ---- the request side of GET /v1/ws ---- */

/* auth = jwt at the upgrade: a token, if given, must verify (401 else). */
static int prepare_token(struct client *c, struct conn *conn, const struct http_request *req)
{
    struct jwt_claims cl;
    int r = http_read__claims(c->e, req, &cl);

    if (r < 0) {
        httpd_error(conn, 401, "unauthorized", jwt_strerror(-1));
        return -1;
    }
    if (r > 0)
        take_claims(c, &cl);
    return 0;
}

struct client *engine_client_prepare(struct worker *w, struct conn *conn, bool other_apps,
                                     const struct http_request *req)
{
    struct client *c = pool_alloc(sizeof(*c)); /* ids "" inline */
    char dev[32], id[PRESENCE_ID_MAX + 1], full[PRESENCE_ID_MAX + 1];
    const char *ns;
    size_t pos = 0;
    int d = PRESENCE_DEVICE_WEB;

    c->e = engine_of(w);
    /* Tokens (JWT, room tokens) name no app yet: one app's would pass
     * for another's user or room of the same name. */
    other_apps = other_apps && !client__auth_jwt(c->e) && !c->e->w->srv->cfg.room_token_secret[0];
    if (!apps_socket_ns(conn, req, other_apps, &ns))
        goto out_free;
    if (ns[0])
        client_x(c)->ns = ns;
    if (client__auth_jwt(c->e)) {
        if (prepare_token(c, conn, req) < 0)
            goto out_free;
    } else if (http_read__query_has(req, "user")) {
        if (!http_read__query_id(req, "user", id) || !ns_join(ns, id, full, PRESENCE_ID_MAX)) {
            httpd_error(conn, 400, "bad_user",
                        "user must be 1-128 of A-Z a-z 0-9 - _ . ~ : @ (with ?app= of an app "
                        "other than the first, 128 less the app id and 1)");
            goto out_free;
        }
        client_set_uid(c, full);
    }
    if (http_read__query_has(req, "device")) {
        if (http_query_next(req->query, req->query_len, "device", &pos, dev, sizeof(dev)) < 0 ||
            (d = presence_device_parse(dev)) < 0) {
            httpd_error(conn, 400, "bad_device",
                        "device must be desktop, mobile, tablet, web or other");
            goto out_free;
        }
    }
    if (!c->device_claim)
        c->device = (unsigned)d & 7u;
    c->resume = client_uid(c)[0] && http_read__query_id(req, "resume", id);
    if (c->resume)
        client_set_sid(c, id);
    return c;
out_free:
    engine_client_discard(c);
    return NULL;
}

void client__ws_send(struct client *c, struct payload *f)
{
    if (c->ws)
        wsconn_send_payload(c->ws, f);
}

void client__on_ws_close(struct wsconn *ws, unsigned code)
{
    struct client *c = wsconn_user_data(ws);

    (void)code;
    if (!c)
        return;
    client__close(c);
    wsconn_set_user_data(ws, NULL);
}

void client__ws_close_end(struct client *c, unsigned code, int end, const char *reason)
{
    const struct proto_adapter *a = frame_adapter(c);
    unsigned mapped = a->close_code ? a->close_code(code, end) : code;

    if (c->ws)
        wsconn_close(c->ws, mapped, reason);
    else if (client_is_socketless(c))
        a->close(c, mapped, reason);
}

void client__ws_close(struct client *c, unsigned code, const char *reason)
{
    client__ws_close_end(c, code, -1, reason);
}

struct client *engine_client_bare(struct worker *w)
{
    struct client *c = pool_alloc(sizeof(*c)); /* ids "" inline */

    c->e = engine_of(w);
    c->device = PRESENCE_DEVICE_WEB & 7u;
    return c;
}

void client__start_as(struct client *c, const char *uid)
{
    client_set_uid(c, uid);
    session__start(c);
}

void engine_client_discard(struct client *c)
{
    client__free(c);
}

/* ---- bus ops for the client side ---- */

void client__on_reply(struct engine *e, struct emsg *em)
{
    struct client *c = find_client(e, em->conn_id);
    struct payload *f = c ? emsg_frame_of(em, c->proto) : NULL;

    if (f) /* NULL: its protocol has no such message (a Pusher ack) */
        frame_adapter(c)->send(c, f);
}

void client__on_kick(struct engine *e, struct emsg *em)
{
    struct client *c = find_client(e, em->conn_id);

    if (c) {
        c->started = false; /* the session lives on elsewhere */
        client__ws_close(c, 4001, "session resumed on another connection");
    }
}

/* The owner has handled this connection's privacy message. */
void client__on_priv_event(struct engine *e, struct emsg *em)
{
    struct client *c = find_client(e, em->conn_id);

    if (c && c->x) {
        c->x->ephemeral_hold_until = 0;
        client_x_trim(c);
    }
}
