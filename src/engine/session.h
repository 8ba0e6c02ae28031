/* SPDX-License-Identifier: MIT */
/*
 * session.h - sessions across workers: the operations a protocol adapter
 * asks for on a client's session (start or resume, heartbeat, activity,
 * status, custom status, leave, privacy), and the owner and client sides
 * of their bus ops.
 *
 * Client side: each operation is one bus message to the owner of the
 * client's user (c->owner); the caller has checked c->started (the
 * session exists) and validated the values. Errors and acks come back by
 * OP_REPLY to the client's socket. Owner side: the presence core
 * (presence.h) applies them; its callbacks (session__on_change,
 * session__on_end) fan out transitions and end sessions.
 */
#ifndef SESSION_H
#define SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "msg.h"
#include "presence.h"
#include "store.h"

struct client;
struct engine;
struct wheel_timer;

/* Asks the user's owner for c's session (start, or resume c's sid), or
 * welcomes an observer (no user) at once. */
void session__start(struct client *c);
/* A heartbeat. Throttled here: one faster than heartbeat-min-ms after the
 * last forwarded one is dropped, so a storm costs a comparison. */
void session__heartbeat(struct client *c, const char *ref);
/* For a protocol whose clients send no presence heartbeats (Pusher,
 * Phoenix): the period of the server-side beats that keep c's session
 * alive while its socket is open, a third of session-ttl-ms (at least
 * 1 s); and one such beat: a heartbeat once the session started, then t
 * (the adapter's timer) armed again for the next. */
uint64_t session__keepalive_ms(const struct client *c);
void session__keepalive(struct client *c, struct wheel_timer *t);
void session__activity(struct client *c, bool active, const char *ref);
/* status: an enum presence_status other than offline; expires_in ms, 0 = none. */
void session__status(struct client *c, int status, uint64_t expires_in, const char *ref);
/* text and emoji passed presence_custom_check() (copied). */
void session__custom(struct client *c, const char *text, const char *emoji, uint64_t expires_in,
                     const char *ref);
void session__leave(struct client *c, const char *ref);
/* New privacy settings p (mask: the PRIVACY_FIELD_* given), acknowledged
 * once stored (engine_privacy.c). Hides c's ephemerals meanwhile when the
 * change hides the user. */
void session__privacy(struct client *c, const struct store_privacy *p, uint8_t mask,
                      const char *ref);

/* Writes a fresh random session id into out and returns out. */
char *session__new_sid(char out[PRESENCE_ID_MAX + 1]);

/* The presence core's callbacks (engine_new() passes them, ctx = engine). */
void session__on_change(void *ctx, const struct presence_view *old,
                        const struct presence_view *cur);
void session__on_end(void *ctx, const struct presence_session_info *s,
                     enum presence_end_reason why);

/* The op-table handlers. Owner side: */
engine_op_fn session__on_start;     /* OP_START */
engine_op_fn session__on_heartbeat; /* OP_HEARTBEAT */
engine_op_fn session__on_activity;  /* OP_ACTIVITY */
engine_op_fn session__on_status;    /* OP_STATUS */
engine_op_fn session__on_custom;    /* OP_CUSTOM */
engine_op_fn session__on_leave;     /* OP_LEAVE */
engine_op_fn session__on_closed;    /* OP_CLOSED */
engine_op_fn session__on_http_beat; /* OP_HTTP_BEAT: POST /v1/heartbeat */
/* Client side: */
engine_op_fn session__on_started; /* OP_STARTED: welcome, or refuse */
engine_op_fn session__on_ended;   /* OP_ENDED: session_ended, then close */

#endif
