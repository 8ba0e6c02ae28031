/* SPDX-License-Identifier: MIT */
/*
 * engine_privacy.h - privacy on the owner side of the engine: the
 * settings cache of owned users, the parking of messages that wait for
 * it, the classes viewers fall in, and the privacy and admin writes
 * (engine_privacy.c has the model).
 */
#ifndef ENGINE_PRIVACY_H
#define ENGINE_PRIVACY_H

#include <stdbool.h>

#include "bus.h"
#include "msg.h"
#include "presence.h"
#include "privacy.h"
#include "store.h"

struct engine;

void engine__privacy_init(struct engine *e);
/* Waits (bounded) for the store requests in flight, then frees the cache
 * and the messages parked in it. */
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
/* Owner: encodes the view of uid for class cls (a presence event frame). */
struct payload *engine__view_frame(struct engine *e, const struct presence_view *truth, int cls);
/* Owner: whether class cls sees uid online (its view's status is not
 * offline), for the adapters that show only online and offline. */
bool engine__view_online(struct engine *e, const struct presence_view *truth, int cls);
/* The presence core's on_change: keeps the public last-seen state and
 * republishes to the user's watchers. */
void engine__privacy_on_change(struct engine *e, const struct presence_view *old,
                               const struct presence_view *cur);
/* True unless uid's settings are known (cached) and it is not invisible,
 * nor becoming so: whether a clean stop must leave its sessions unsaved
 * (persist.h; unknown settings count as hidden). */
bool engine__privacy_hidden(struct engine *e, const char *uid);
/* The last seen of uid's last public offline view (monotonic ms, 0 =
 * none): what viewers who see last seen but not online status are shown
 * while it is online. A clean stop saves it, the next start puts it back
 * (persist.h) before the user's settings are read. */
uint64_t engine__privacy_offline_seen(struct engine *e, const char *uid);
void engine__privacy_restore_offline_seen(struct engine *e, const char *uid, uint64_t at);
/* True while uid is visible in rooms (settings loaded and permitting). */
bool engine__room_visible(struct engine *e, const char *uid);

/* The op-table handlers (owner side). */
engine_op_fn engine__op_privacy;    /* OP_PRIVACY: the privacy message */
engine_op_fn engine__privacy_hello; /* OP_PRIV_HELLO: a new session's settings */
engine_op_fn engine__op_admin;      /* OP_ADMIN: an admin call on a user */

/* uid's settings or relations were changed by another node: drop what
 * is cached and read them again (watchers are re-classified when they are
 * in). */
void engine__privacy_reload(struct engine *e, const char *uid);

/* Ends uid's sessions on this worker (sid, or all when ""), with reason
 * (NULL: none) in their session_ended; returns how many ended. */
size_t engine__kick(struct engine *e, const char *uid, const char *sid, const char *reason);

#endif
