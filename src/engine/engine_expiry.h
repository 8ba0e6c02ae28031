/* SPDX-License-Identifier: MIT */
/*
 * engine_expiry.h - the deadlines of WebSocket clients under auth = jwt,
 * kept in shared groups instead of a timer per client (engine_expiry.c
 * has the model).
 */
#ifndef ENGINE_EXPIRY_H
#define ENGINE_EXPIRY_H

struct client;
struct engine;

/* (Re)arms c's deadline, c->deadline in the unit c->authed says: when it
 * passes, c->e->expired(c) closes the socket (client__expire(): 4401
 * without a token, 4403 with an expired one). Disarm before changing
 * c->deadline or c->authed, and before c goes. Both may be called from
 * inside such a close, for any client, including the members of the group
 * whose timer is firing: a group is never freed under its own callback. */
void engine__expiry_arm(struct client *c);
void engine__expiry_disarm(struct client *c); /* no-op when not armed */
void engine__expiry_free(struct engine *e);

#endif
