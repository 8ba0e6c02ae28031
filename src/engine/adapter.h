/* SPDX-License-Identifier: MIT */
/*
 * adapter.h - the seam between the engine and the protocol adapters: the
 * engine's events as structured values, and the table of operations
 * through which one protocol encodes them and writes them to its sockets.
 *
 * The engine decides what happens (who gets which transition, which reply,
 * which room delta); an adapter decides what it looks like on the wire.
 * Every frame the engine sends is made by an adapter's encode_* from one of
 * the event values below, or from the room core's (room.h: delta,
 * snapshot, ephemeral), once per event and protocol, and shared as a
 * refcounted payload by every recipient of that protocol (frame.h shows
 * the per-event cache). src/proto/native/native_encode.c is the first
 * adapter (the JSON of docs/protocol.md); a second one (Pusher, Phoenix)
 * registers its own table and picks it for its clients at open
 * (client__open()); docs/architecture.md "Protocol adapters" lists the
 * operations it must implement.
 *
 * Event values borrow everything they point to, for the duration of the
 * encode call only. Encoders are pure: no I/O, they return a new payload
 * (a reference the caller owns) ready to be written to a socket.
 *
 * Registration happens before the workers start (main.c, or a unit
 * test's set-up); the table is read-only while they run.
 */
#ifndef ADAPTER_H
#define ADAPTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "metrics.h"

struct client;
struct config;
struct presence_view;
struct room_delta_view;
struct room_ephemeral_view;
struct room_info;
struct room_snapshot_view;
struct store_privacy;

#define ADAPTER_MAX     4 /* protocols registered at most */
#define ADAPTER_DEFAULT 0 /* the first registered: the native protocol */

/* An error reply: code and message, for the message with ref. */
struct error_event {
    const char *code;
    const char *message;
    const char *ref; /* the client's ref as JSON text, "" or NULL = none */
};

/* The welcome of a socket that opened. */
struct welcome_event {
    const struct config *cfg; /* the server's settings it announces */
    uint64_t conn_id;
    const char *uid; /* "" = anonymous observer */
    const char *sid; /* the session, when uid is not "" */
    bool resumed;    /* the session was resumed */
};

/* The end of a socket's session. */
struct ended_event {
    int why;             /* enum presence_end_reason */
    const char *message; /* NULL = none */
};

/* A user's presence as one privacy class sees it. */
struct presence_event {
    const struct presence_view *view; /* already reduced to the class */
    int cls;                          /* enum privacy_class */
    int64_t wall_offset_ms;           /* wall - monotonic, for its times */
};

/* A user's privacy settings changed (to the user's own sessions). */
struct privacy_event {
    const struct store_privacy *settings;
};

/* A join of a room was accepted (the state follows as a snapshot). */
struct room_joined_event {
    const char *room;
    const struct room_info *info; /* epoch, seq, mode, count */
    bool resumed;                 /* the client's epoch/seq resumed */
    const char *ref;
};

/* An application event for a room's subscribers (OP_RCAST): from the
 * HTTP API, or a client's event relayed to the others. */
/* A broadcast's data that is not JSON but bytes (realtime-js's ArrayBuffer
 * payload) is '=' and their standard base64: never JSON text, so every
 * encoder tells the two apart by the first byte, and the cluster's wire
 * carries it as it carries JSON. What each protocol's clients get for it:
 * docs/phoenix.md, "Binary broadcasts". */
#define ROOM_CAST_BINARY '='

struct room_broadcast_event {
    const char *room;
    const char *event; /* the event's name */
    const char *data;  /* its data: JSON text, as the sender gave it, or a
                        * binary payload as ROOM_CAST_BINARY + its base64 */
    const char *user;  /* the sending user, "" = none (the server) */
    /* The socket that does not receive it, as its adapter names it on
     * every node (conn_of below), "" = none: the sender's own socket, or
     * the HTTP API's socket_id. Nodes other than the socket's skip nobody. */
    const char *exclude;
    /* It may wait for the room's ephemeral tick when the room is hot, in
     * order with the held ephemerals, so that a subscriber gets one write
     * per tick (Pusher client events; never merged or dropped). */
    bool batch;
};

/* True when ev's data is a binary payload (ROOM_CAST_BINARY). */
static inline bool room_broadcast_is_binary(const struct room_broadcast_event *ev)
{
    return ev->data[0] == ROOM_CAST_BINARY;
}

/*
 * One protocol's operations. Every encode_* returns a new reference to a
 * frame ready for the socket, or NULL when the protocol has no message for
 * that event (then its clients get nothing: Pusher has no acks), except
 * encode_error and encode_room_snapshot, which always give one; send
 * writes a frame to one of the protocol's clients, taking a reference of
 * its own.
 *
 * The room encoders take the room core's values (room.h: a delta, a
 * snapshot, an ephemeral), and must be deterministic: the room core keeps
 * a delta's value, not its frame, for resume, and has it encoded again.
 * The default protocol's three are the room core's codec
 * (frame_room_codec); another protocol's encode a room event on the
 * owner's side when it has recipients there (frame_room_event()).
 */
struct proto_adapter {
    const char *name; /* "native" */
    /* Its label in presenced_handshake_seconds{proto} (metrics.h), so the
     * engine finds the series without naming protocols; 0 is native. */
    enum metrics_proto metrics_proto;
    bool own_auth; /* its clients authenticate its own way (signed
                    * subscriptions), never with a token under auth = jwt */
    struct payload *(*encode_error)(const struct error_event *ev);
    struct payload *(*encode_ack)(const char *ref); /* ref is not "" */
    struct payload *(*encode_welcome)(const struct welcome_event *ev);
    struct payload *(*encode_ended)(const struct ended_event *ev);
    struct payload *(*encode_token_expired)(void);
    struct payload *(*encode_presence)(const struct presence_event *ev);
    struct payload *(*encode_privacy)(const struct privacy_event *ev);
    struct payload *(*encode_room_joined)(const struct room_joined_event *ev);
    /* scratch: any buffer, contents undefined before and after (room.h) */
    struct payload *(*encode_room_delta)(const struct room_delta_view *v, struct buf *scratch);
    struct payload *(*encode_room_snapshot)(const struct room_snapshot_view *v,
                                            struct buf *scratch);
    struct payload *(*encode_room_ephemeral)(const struct room_ephemeral_view *v,
                                             struct buf *scratch);
    struct payload *(*encode_room_broadcast)(const struct room_broadcast_event *ev);
    /* Optional, for a protocol whose watch lists show only online and
     * offline (Pusher's watchlist): user turned online or offline for the
     * watcher. Such a protocol's watchers get this instead of
     * encode_presence's frames, once per change (watch.c). */
    struct payload *(*encode_watch)(const char *user, bool online);
    void (*send)(struct client *c, struct payload *f);
    /* Optional: writes a room message (a delta, snapshot, room_joined or
     * broadcast frame of this protocol's, shared by its recipients) to
     * the WebSocket client c, taking a reference of its own; bulk as
     * wsconn_send_payload_bulk(). For a protocol whose sockets name a room
     * their own way or stamp per-socket fields in a room's frames
     * (Phoenix's topics and join_refs). NULL: the frame goes to the
     * socket as it is. */
    void (*send_room)(struct client *c, struct payload *f, bool bulk);
    /* Optional: c's session was confirmed by its owner (after the welcome). */
    void (*on_started)(struct client *c);
    /* Optional: the protocol's close code for the engine's (native) one;
     * end is the session's enum presence_end_reason when a session end
     * closes the socket, else -1. */
    unsigned (*close_code)(unsigned native_code, int end);
    /* Optional, for a drain (drain.h): the frame sent to each socket as
     * the drain begins, telling its client that the socket closes in
     * after_ms and that it should then reconnect and resume its session;
     * NULL: nothing is said in advance. */
    struct payload *(*encode_reconnect)(uint64_t after_ms);
    /* Optional: the frame written right before the drain closes a socket
     * at its time (Pusher's pusher:error 4200); NULL: none. */
    struct payload *(*encode_drain_close)(void);
    /* The close code of a drained socket, sent as is (close_code does not
     * map it); 0 = 1001 (going away). */
    unsigned drain_close_code;
    /* Required of a protocol with socketless clients (client.h): ends c,
     * which has no WebSocket to close, with code (close_code's mapping
     * applied) and reason; c must stay valid until this returns, and is
     * closed (client__close()) by the adapter later, outside the caller. */
    void (*close)(struct client *c, unsigned code, const char *reason);
    /* Frees c->x->adata (required when the adapter sets it), as c is freed. */
    void (*release)(struct client *c);
    /* Optional: the connection of this node that tag (a socket name of
     * this protocol, room_broadcast_event.exclude) names, 0 = none here. */
    uint64_t (*conn_of)(const char *tag);
    /* Optional: room frame f (one of this protocol's, borrowed) as a
     * reader whom the users blocked() names block sees it: a new
     * reference to f, a rewritten frame, or NULL for nothing. The engine
     * calls it for such readers only (the native protocol's own view is
     * the engine's, engine_room_client.c); without it they get f. */
    struct payload *(*filter_blocked)(struct payload *f,
                                      bool (*blocked)(void *ctx, const char *user), void *ctx);
    /* The engine counts the sockets subscribed to each room while a
     * registered adapter sets this (room_count.h: the reads'
     * "subscriptions", the occupancy of rooms without members). */
    bool room_counts;
    /* Optional: the frame telling a room's subscribers that n sockets
     * are subscribed to it now (Pusher's pusher_internal:subscription_count),
     * NULL for none; at most one per room every RCOUNT_EVENT_MS. */
    struct payload *(*encode_room_count)(const char *room, uint64_t n);
};

/* Encoders for the events a protocol has no message for (they return
 * NULL), to put in its table. */
struct payload *adapter_no_frame(void);
struct payload *adapter_no_presence(const struct presence_event *ev);
struct payload *adapter_no_privacy(const struct privacy_event *ev);
struct payload *adapter_no_room_joined(const struct room_joined_event *ev);

/* Registers a (static) adapter table and returns its protocol id, which
 * its clients carry (struct client.proto). Registering the same table
 * again returns its id. Aborts past ADAPTER_MAX. Before the workers start. */
unsigned adapter_register(const struct proto_adapter *a);
/* The adapter with protocol id id; aborts when none is registered there
 * (an engine without its adapter is a composition error). */
const struct proto_adapter *adapter_get(unsigned id);
/* How many adapters are registered. */
unsigned adapter_count(void);
/* The connection of this node that tag names for any registered adapter
 * (proto_adapter.conn_of), 0 = none. */
uint64_t adapter_conn_of(const char *tag);

/*
 * The per-event cache: one event's frame per protocol, encoded on first
 * need and then shared (refcounted) by every recipient of that protocol.
 * Zero-filled before use; adapter_frames_release() drops the references.
 */
struct adapter_frames {
    struct payload *f[ADAPTER_MAX];
};

void adapter_frames_release(struct adapter_frames *fs);
/* dst gets src's frames, each with a new reference (dst's old contents
 * are not released). */
void adapter_frames_copy(struct adapter_frames *dst, const struct adapter_frames *src);

#endif
