/* SPDX-License-Identifier: MIT */
/*
 * wsconn.h - the WebSocket connection protocol (RFC 6455) on a conn:
 * opening handshake, frame processing, closing handshake, liveness.
 *
 * wsconn_upgrade() validates an HTTP upgrade request and, on success, switches
 * the connection from HTTP to WebSocket; from then on the application sees
 * whole messages through struct wsconn_app and sends with wsconn_send_*().
 *
 * Input: any split of the byte stream is handled. Payload bytes are
 * unmasked and (for text) UTF-8-validated as they arrive, so invalid text
 * closes with 1007 at the first bad byte, even mid-frame. A message's
 * declared size is checked against max_message before anything is
 * buffered (1009), and so is a message of more than 4096 fragments (1009).
 * Control frames may interleave with fragments; a ping is
 * answered with a pong carrying its payload, unsolicited pongs are
 * ignored. Any protocol violation sends the matching close code (1002,
 * 1007, 1009) and ends the connection; the server closes TCP first.
 *
 * Memory: struct wsconn (24 bytes) lives in its connection's protocol
 * room (conn.h), so an idle WebSocket is one 144-byte pool object and no
 * buffers. The state of a partially received frame or message, with its
 * reassembly buffer, exists only from such a frame until the message is
 * delivered; the buffer never grows past max_message (nor past the
 * message's size once its last frame declared it).
 * Complete frames up to 2 KiB are unmasked on the stack: no allocation.
 *
 * Liveness: after ping_interval_ms without any input the server sends a
 * ping; if nothing at all (pong or any frame) arrives within
 * pong_timeout_ms it sends close 1011 "ping timeout" and ends the
 * connection without waiting for the peer's close.
 *
 * Closing: the application's wsconn_close() sends a close frame, ignores data
 * frames from then on, and waits up to close_timeout_ms for the peer's
 * close before dropping TCP. A peer's close is answered by echoing its
 * code (1000 for an empty close) and the connection ends.
 * Output over the connection's limit sends close 4008 "output limit".
 */
#ifndef WSCONN_H
#define WSCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "conn.h"
#include "http.h"

struct wsconn;

struct wsconn_opts {
    size_t max_message; /* reassembled message limit in bytes (0 = none) -> 1009 */
    /* Silence before a server ping (0 = never ping), then this long for
     * any input (0 = ping_interval_ms). Both below 2^32 ms (49 days): the
     * time of the last input is kept in 32 bits. */
    uint64_t ping_interval_ms;
    uint64_t pong_timeout_ms;
    /* Comma-separated Origin allow-list; "*" allows any. A request whose
     * Origin equals its own Host (same origin) and a request without
     * Origin (not a browser) are always allowed. NULL = empty list. */
    const char *allowed_origins;
    /* Supported, NULL-terminated, may be NULL; the first 255 count. */
    const char *const *subprotocols;
    uint64_t close_timeout_ms; /* wait for the peer's close (0 = 2000) */
};

/* Application callbacks. (p, n) are borrowed: valid until the callback
 * returns. Text is valid UTF-8. on_open and on_message may send, call
 * wsconn_close() or close the connection. */
struct wsconn_app {
    void (*on_open)(struct wsconn *ws); /* after the 101 is queued; optional */
    void (*on_message)(struct wsconn *ws, bool binary, const char *p, size_t n); /* required */
    /* Exactly once, when the connection is freed (it can no longer send):
     * release user data here. code: the close code received or sent first,
     * 1005 for a close without code, 1006 when TCP ended without a close.
     * Optional. */
    void (*on_close)(struct wsconn *ws, unsigned code);
};

/* Answers the upgrade request req on c (an httpd connection inside its
 * route handler). On a bad handshake writes the HTTP error (400, 403, or
 * 426 with Sec-WebSocket-Version: 13) and returns NULL; no callback fires.
 * On success writes the 101, takes c over (httpd_taken_over, conn_set_ops),
 * calls app->on_open and returns the wsconn, owned by c and freed with it.
 * o and app are borrowed and must outlive the connection (the pair is
 * kept for the process and shared by every connection upgraded with it:
 * compared by address, so a later pair at the same addresses is the
 * same endpoint); app_data is returned by wsconn_app_data(). Bytes pipelined after the request head
 * reach the frame parser through conn.c. */
struct wsconn *wsconn_upgrade(struct conn *c, const struct http_request *req,
                              const struct wsconn_opts *o, const struct wsconn_app *app,
                              void *app_data);

/* Send one complete message. Dropped once a close was sent or the
 * connection is closing. Text must be valid UTF-8 (not checked). */
void wsconn_send_text(struct wsconn *ws, const void *p, size_t n);
void wsconn_send_binary(struct wsconn *ws, const void *p, size_t n); /* ditto */
/* Queues a frame built by ws_frame_payload() (takes a new reference; the
 * caller keeps its own), e.g. one broadcast shared by many connections. */
void wsconn_send_payload(struct wsconn *ws, struct payload *framed);
/* Same, as bulk output (conn_write_payload_bulk): for frames that may wait
 * behind urgent ones, such as room deltas. */
void wsconn_send_payload_bulk(struct wsconn *ws, struct payload *framed);
/* Queues bytes [off, end) of framed, whole frames built by
 * ws_frame_payload() back to back (a room tick's frames around the
 * recipient's own), as one piece that references framed; frames counts
 * them (metrics). bulk as above. */
void wsconn_send_payload_range(struct wsconn *ws, struct payload *framed, size_t off, size_t end,
                               unsigned frames, bool bulk);
/* Starts the closing handshake with code (must pass ws_close_code_valid)
 * and an optional reason (cut to 123 bytes). No-op when a close was sent. */
void wsconn_close(struct wsconn *ws, unsigned code, const char *reason);
/* Server shutdown: wsconn_close(ws, 1001, "server shutting down"). */
void wsconn_going_away(struct wsconn *ws);

/* True when c speaks WebSocket (c->proto is a struct wsconn). */
bool wsconn_is(const struct conn *c);
/* The wsconn of c, or NULL when c is not a WebSocket. */
struct wsconn *wsconn_from_conn(struct conn *c);

struct conn *wsconn_to_conn(const struct wsconn *ws);
void *wsconn_app_data(const struct wsconn *ws);  /* as given to wsconn_upgrade */
void *wsconn_user_data(const struct wsconn *ws); /* NULL until set */
/* Owned by the app. User data equal to app_data (or NULL) costs nothing;
 * any other makes both move into a 16-byte allocation of their own. */
void wsconn_set_user_data(struct wsconn *ws, void *data);
/* The negotiated subprotocol (an entry of o->subprotocols), or NULL. */
const char *wsconn_subprotocol(const struct wsconn *ws);

/* Whether ws holds partial-input state (a frame not handled whole, or a
 * message still open): what an idle connection never has. */
bool wsconn_has_partial_input(const struct wsconn *ws);

#endif
