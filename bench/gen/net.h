/*
 * net.h - presence-bench: client connections on one epoll loop.
 *
 * A `struct net` is one process's event loop: it opens non-blocking TCP
 * connections from a chosen 127.0.0.x source address (bind before connect,
 * IP_BIND_ADDRESS_NO_PORT so ports are picked per destination), runs the
 * WebSocket client handshake (native protocol and Socket.IO) or nothing
 * (Redis), splits input into messages (WebSocket text frames or RESP
 * replies) and hands each to proto.c. Output is queued per connection and
 * written with one write() per connection per loop iteration (net_flush),
 * like the server's corking.
 *
 * Level-triggered epoll: EPOLLOUT is armed only while a connect is in
 * progress or a write came up short.
 */
#ifndef BENCH_NET_H
#define BENCH_NET_H

#include "util.h"

#include <netinet/in.h>
#include <stdint.h>

enum target {
    T_NATIVE, /* presenced's protocol on /v1/ws */
    T_SIO,    /* Socket.IO v4 over engine.io's WebSocket transport */
    T_REDIS,  /* RESP: SUBSCRIBE / PUBLISH */
    T_SINK,   /* native protocol against presence-bench's own null sink */
    T_PUSHER, /* the Pusher Channels protocol 7 on /app/{key} (pusher.c) */
    T_PHOENIX, /* Phoenix Channels vsn 2.0.0 on /socket/websocket (phoenix.c) */
};

enum conn_state { CS_IDLE, CS_CONNECTING, CS_HANDSHAKE, CS_OPEN, CS_CLOSED };

struct conn {
    int fd;              /* -1 when not open */
    uint32_t user;       /* global user index: user id "u<user>" */
    uint8_t state;       /* enum conn_state */
    uint8_t ready;       /* the protocol said hello (welcome, 40, TCP up for Redis) */
    uint8_t paused;      /* not reading (slow consumer) */
    uint8_t pending;     /* on the flush list */
    uint8_t want_out;    /* EPOLLOUT armed */
    uint8_t publisher;   /* Redis: a PUBLISH connection (never subscribes) */
    uint8_t quiet;       /* sends no keep-alive heartbeats (w6 victims) */
    uint8_t small_rcv;   /* 4 KiB receive buffer (w8 slow consumer) */
    uint8_t resumed;     /* native: the welcome said "resumed":true */
    uint64_t t_mark;     /* workload's timestamp (last heartbeat, drop time) */
    uint16_t close_code; /* close code received, 1006 for none */
    uint32_t mask;       /* WebSocket masking key of this connection */
    uint32_t acks;       /* Socket.IO: next ack id */
    uint64_t t_connect;  /* now_us() at connect() */
    struct buf in;       /* leftover partial input */
    struct buf out;      /* queued output */
    struct conn *next_pending;
    char sid[36]; /* native: the session id from the welcome (for resume);
                   * Pusher: the socket_id of connection_established */
};

struct net_stats {
    uint64_t connect_fail; /* connect() or handshake failures */
    uint64_t closed;       /* connections closed by the other side */
    uint64_t msgs_in;      /* messages read */
    uint64_t bytes_in;
    uint64_t writes; /* write() calls */
    uint64_t bytes_out;
};

struct net {
    int ep;
    enum target target;
    struct sockaddr_in dst;
    struct conn *pending; /* connections with output to flush */
    struct net_stats st;
    char *rbuf; /* shared read buffer */
    size_t rcap;
    char host[32];      /* "127.0.0.1:PORT" for the Host header */
    const char *secret; /* HS256 secret for ?token= (native) */
    const char *app_key;    /* Pusher: the app key (/app/{key}, "key:" of an auth) */
    const char *app_secret; /* Pusher: the app secret (HMAC of a presence auth) */
    char accept[29];    /* expected Sec-WebSocket-Accept */
};

/* Initialises n for target against 127.0.0.1:port. */
void net_init(struct net *n, enum target t, int port, const char *secret);

/* Starts connecting c (user set by the caller) from source address
 * 127.0.0.src_host; query is appended to the native/Socket.IO URL (may be
 * ""). On failure counts connect_fail and leaves c CS_CLOSED. */
void net_connect(struct net *n, struct conn *c, int src_host, const char *query);

/* Queues a text message (a masked WebSocket text frame, or raw bytes for
 * Redis); written at the next net_flush(). */
void net_send(struct net *n, struct conn *c, const char *p, size_t len);

/* Closes c at once (no close handshake: a dropped client). */
void net_drop(struct net *n, struct conn *c);

/* Sends a WebSocket close 1000 and closes after flushing. */
void net_close_ws(struct net *n, struct conn *c);

/* Stops or resumes reading c (a slow consumer). */
void net_pause(struct net *n, struct conn *c, int paused);

/* Writes every queued output: one write() per connection. */
void net_flush(struct net *n);

/* Waits up to timeout_ms for events and processes them (then flushes).
 * Returns the number of events handled. */
int net_poll(struct net *n, int timeout_ms);

/* Called by net.c for each complete message (proto.c implements it). */
void proto_on_message(struct net *n, struct conn *c, const char *p, size_t len);
/* Called by net.c once the transport is up (handshake done / TCP up). */
void proto_on_open(struct net *n, struct conn *c);
/* Called by net.c when c closed (code 1006 when no close frame came). */
void proto_on_close(struct net *n, struct conn *c, int code);

#endif
