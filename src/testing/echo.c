/* SPDX-License-Identifier: MIT */
/*
 * echo.c - a WebSocket echo application for test builds (GET /test/echo):
 * every text or binary message is sent straight back with the same
 * opcode. It is what the conformance suite and the integration tests talk
 * to; release builds do not contain it.
 */
#include "testing.h"

#include "wsconn.h"

static void echo_on_message(struct wsconn *ws, bool binary, const char *p, size_t n)
{
    if (binary)
        wsconn_send_binary(ws, p, n);
    else
        wsconn_send_text(ws, p, n);
}

const struct wsconn_app echo_app = {
    .on_message = echo_on_message,
};
