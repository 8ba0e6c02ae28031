/* SPDX-License-Identifier: MIT */
/*
 * room_wire.h - the text of a room between nodes: the messages on a
 * room's channel, the ops a node puts, the member lines of a room's
 * state and the ephemeral values (docs/cluster.md, "Rooms across nodes").
 *
 * A message, as the room script publishes it on the room's channel:
 *   "<seq> <node> <room>\n<body>"
 * seq: the channel's seq (decimal, 0 for the ephemeral lane, else >= 1);
 * node: the sender's "<node-id>.<epoch hex>"; body: the sender's ops
 * (seq >= 1), or one ephemeral value or one application event (seq 0).
 *
 * Ops, one per line ("\n" between them):
 *   "*"                           drop all of the sender's members
 *   "+ <user> <joinedAt> <meta>"  the sender holds user (join or update)
 *   "- <user>"                    the sender no longer holds user
 * State lines (a room read), one per member of a node epoch:
 *   "<node> <user> <joinedAt> <meta>"
 * An ephemeral value: "<user> <kind> <data>".
 * An application event (a broadcast to the room's subscribers):
 *   "! <user> <exclude> <n>\n<event><data>"
 * user: the sender, "-" for none (the server); exclude: the sender's
 * socket as its adapter names it across nodes (adapter.h), "-" for none;
 * n: the event name's length in bytes (1..ROOM_WIRE_EVENT_MAX), followed
 * by the name and then the data. "!" is never a user id (room.h), so the
 * two bodies of seq 0 are told apart by their first byte.
 *
 * user: 1..ROOM_ID_MAX bytes without space, newline or NUL; node:
 * 1..ROOM_WIRE_NODE_MAX bytes likewise; kind: 1..ROOM_KIND_MAX bytes;
 * joinedAt: decimal wall ms; meta: the rest of the line (a JSON object,
 * checked by the room core when applied); data: the rest of the body.
 * meta and data have no NUL.
 *
 * Every function is pure: parsers point into their input (nothing is
 * copied or allocated) and answer 0 or -EINVAL; encoders append to a buf
 * and leave its text NUL-terminated.
 */
#ifndef ROOM_WIRE_H
#define ROOM_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "cluster.h"
#include "room.h"

#define ROOM_WIRE_NODE_MAX  (CLUSTER_NODE_ID_MAX + 1 + 16) /* "<node-id>.<epoch hex>" */
#define ROOM_WIRE_EVENT_MAX 256u /* bytes in an application event's name */
#define ROOM_WIRE_TAG_MAX   64u  /* bytes in an application event's exclude tag */

/* A span of the input. */
struct room_wire_str {
    const char *p;
    size_t len;
};

/* A message of a room's channel. */
struct room_wire_msg {
    uint64_t seq; /* 0: the ephemeral lane */
    struct room_wire_str node, room, body;
};

/* Parses a whole message of len bytes: 0, or -EINVAL when it is not
 * "<seq> <node> <room>\n<body>" with fields in range (room 1..ROOM_ID_MAX
 * bytes, seq a decimal that fits 64 bits). */
int room_wire_msg_parse(const char *msg, size_t len, struct room_wire_msg *out);

enum room_wire_op_kind {
    ROOM_WIRE_DROP,  /* "*" */
    ROOM_WIRE_JOIN,  /* "+ <user> <joinedAt> <meta>" */
    ROOM_WIRE_LEAVE, /* "- <user>" */
};

/* One op; user, joined_at and meta are set as the kind has them. */
struct room_wire_op {
    enum room_wire_op_kind kind;
    struct room_wire_str user, meta;
    uint64_t joined_at;
};

/* Parses the line at *p (up to the next "\n" or end) into op and moves *p
 * past it: 0, -EINVAL for a line that is no op (*p moves past it all the
 * same, so a caller may skip it), or -ENOENT when *p == end. */
int room_wire_op_next(const char **p, const char *end, struct room_wire_op *op);

/* One state line: node's member user. */
struct room_wire_state {
    struct room_wire_str node, user, meta;
    uint64_t joined_at;
};

/* Like room_wire_op_next(), for the state lines of a room read. */
int room_wire_state_next(const char **p, const char *end, struct room_wire_state *st);

/* An ephemeral value (the body of a seq-0 message). */
struct room_wire_ephemeral {
    struct room_wire_str user, kind, data;
};

/* Parses body: 0 or -EINVAL. */
int room_wire_ephemeral_parse(const char *body, size_t len, struct room_wire_ephemeral *out);

/* An application event (a seq-0 body that starts with "!"). user and
 * exclude have len 0 for "-". */
struct room_wire_cast {
    struct room_wire_str user, exclude, event, data;
};

/* Whether a seq-0 body is an application event rather than an ephemeral. */
static inline bool room_wire_is_cast(const char *body, size_t len)
{
    return len > 0 && body[0] == '!';
}

/* Parses body: 0 or -EINVAL (fields out of range, a NUL anywhere). */
int room_wire_cast_parse(const char *body, size_t len, struct room_wire_cast *out);

/* Appends "+ <user> <joinedAt> <meta>\n" to b. user must be valid (as
 * above); meta has no newline (the room core stores compact JSON). */
void room_wire_put_join(struct buf *b, const char *user, uint64_t joined_at, const char *meta,
                        size_t meta_len);

/* Appends "- <user>\n" to b. */
void room_wire_put_leave(struct buf *b, const char *user);

/* Appends "<user> <kind> <data>" to b. */
void room_wire_put_ephemeral(struct buf *b, const char *user, const char *kind, const char *data,
                             size_t data_len);

/* Appends an application event to b. user and exclude: "" for none,
 * else valid (no space, newline or NUL; exclude <= ROOM_WIRE_TAG_MAX
 * bytes); event: 1..ROOM_WIRE_EVENT_MAX bytes without NUL; data: no NUL. */
void room_wire_put_cast(struct buf *b, const char *user, const char *exclude, const char *event,
                        const char *data, size_t data_len);

/* ---- per-connection metadata across nodes (docs/phoenix.md) ----
 *
 * A member's metadata may hold ROOM_SESSION_VALUES ("~metas"): an object
 * of values keyed by session id, one per connection (room.h, "Members").
 * Each node puts only its own sessions' values, and a node merges what
 * each other node put into its mirrored member, so a user with a tab on
 * two nodes has both tabs' values on every node, and a tab's value goes
 * when its tab does. Metadata without "~metas" is left as it is (the
 * newest wins, as before). Both functions append compact JSON to out and
 * return 0, or -EINVAL (out unchanged) when an input is not JSON that
 * json_check() accepts. */

/* meta (len bytes) with its "~metas" kept to the keys in sids (n ids). */
int room_wire_meta_own(const char *meta, size_t len, const char *const *sids, size_t n,
                       struct buf *out);
/* The metadata cur (a member's now) becomes when a node's part of it
 * changes from prev (NULL: none before) to next (NULL: none any more):
 * next's (or, without next, cur's) value, whose "~metas" is cur's entries
 * that neither prev nor next names, then next's entries ("~metas" left
 * out when none remain). */
int room_wire_meta_swap(const char *cur, size_t cur_len, const char *prev, size_t prev_len,
                        const char *next, size_t next_len, struct buf *out);

#endif
