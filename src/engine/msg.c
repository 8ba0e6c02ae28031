/* SPDX-License-Identifier: MIT */
/*
 * msg.c - the engine's bus message (msg.h) and the op table: every op and
 * its handler, in one place. A handler runs on the worker the message was
 * sent to; the comment after each op in msg.h says which side that is.
 */
#include "msg.h"

#include <assert.h>

#include "client.h"
#include "engine_admin.h"
#include "engine_privacy.h"
#include "engine_room.h"
#include "engine_state.h"
#include "http_read.h"
#include "metrics.h"
#include "room_count.h"
#include "session.h"
#include "watch.h"

char engine__no_id[1]; /* "": what unset heap ids point to */

void emsg_free(struct bus_msg *m)
{
    struct emsg *em = (struct emsg *)m;

    emsg_set_id(&em->uid, NULL);
    emsg_set_id(&em->sid, NULL);
    emsg_set_id(&em->room, NULL);
    emsg_set_id(&em->viewer, NULL);
    emsg_set_ref(em, NULL);
    free(em->text);
    free(em->emoji);
    payload_unref(em->frame);
    for (size_t i = 0; i < PRIVACY_NCLASS; i++)
        payload_unref(em->frames[i]);
    for (size_t i = 0; i < em->nids; i++)
        free(em->ids[i]);
    free(em->ids);
    free(em->casts);
    free(em);
}

struct emsg *emsg_new(enum engine_op op, uint64_t conn_id)
{
    struct emsg *em = xcalloc(1, sizeof(*em));

    em->msg.type = WORKER_MSG_ENGINE;
    em->msg.free = emsg_free;
    em->op = (uint8_t)op;
    em->conn_id = conn_id;
    em->uid = em->sid = em->ref = em->room = em->viewer = engine__no_id;
    return em;
}

/* clang-format off */
static engine_op_fn *const ops[OP_COUNT] = {
    /* sessions (session.c) */
    [OP_START]      = session__on_start,
    [OP_STARTED]    = session__on_started,
    [OP_HEARTBEAT]  = session__on_heartbeat,
    [OP_ACTIVITY]   = session__on_activity,
    [OP_STATUS]     = session__on_status,
    [OP_CUSTOM]     = session__on_custom,
    [OP_LEAVE]      = session__on_leave,
    [OP_CLOSED]     = session__on_closed,
    [OP_ENDED]      = session__on_ended,
    [OP_HTTP_BEAT]  = session__on_http_beat,
    /* the client's socket (client.c) */
    [OP_REPLY]      = client__on_reply,
    [OP_KICK]       = client__on_kick,
    [OP_PRIV_EVENT] = client__on_priv_event,
    /* watch lists (watch.c) */
    [OP_WATCH]      = watch__on_watch,
    [OP_UNWATCH]    = watch__on_unwatch,
    [OP_VIEW]       = watch__on_view,
    [OP_PRESENCE]   = watch__on_presence,
    /* HTTP reads (http_read.c) */
    [OP_QUERY]      = http_read__on_query,
    [OP_ANSWER]     = http_read__on_answer,
    /* rooms (engine_room.c: R and U; engine_room_client.c: client side) */
    [OP_RJOIN]      = engine__room_on_join,
    [OP_RLEAVE]     = engine__room_on_leave,
    [OP_RJOIN_R]    = engine__room_on_join_r,
    [OP_RLEAVE_R]   = engine__room_on_leave_r,
    [OP_RPATCH]     = engine__room_on_patch,
    [OP_REPHEM]     = engine__room_on_patch,
    [OP_RSTATE]     = engine__room_on_state,
    [OP_REVENT]     = engine__room_on_event,
    [OP_RUNSUB]     = engine__room_on_unsub,
    [OP_RINFO]      = engine__room_on_info,
    [OP_RSUB]       = engine__room_on_sub,
    [OP_RCAST]      = engine__room_on_cast,
    [OP_RVIS]       = engine__room_on_vis,
    [OP_RBLOCK]     = engine__room_on_block,
    [OP_RREFRESH]   = engine__room_on_refresh,
    [OP_RCOUNT]     = rcount__on_count,
    [OP_RLIST]      = rcount__on_list,
    /* privacy and admin (engine_privacy.c, engine_admin.c) */
    [OP_PRIVACY]    = engine__op_privacy,
    [OP_PRIV_HELLO] = engine__privacy_hello,
    [OP_ADMIN]      = engine__op_admin,
    [OP_ADMIN_ROOMS] = engine__admin_rooms,
    [OP_ADMIN_NODE] = engine__admin_node,
};
/* clang-format on */

void engine__dispatch(struct worker *w, struct bus_msg *m)
{
    struct emsg *em = (struct emsg *)m;

    /* Every op has a handler: a message is only made by this engine. */
    assert(em->op < OP_COUNT && ops[em->op]);
    ops[em->op](engine_of(w), em);
    if (em->born_us) /* one observation per batch of recipients, not per recipient */
        metrics_observe(&w->metrics, MH_FANOUT, time_mono_us() - em->born_us);
    if (!em->parked)
        emsg_free(&em->msg);
}
