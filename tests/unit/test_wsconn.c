/* SPDX-License-Identifier: MIT */
/*
 * test_wsconn.c - WebSocket connections over a real socketpair and loop:
 * the partial-input state exists only while a frame or message is
 * partial (whole small frames never create it), messages split at every
 * byte or in fragments arrive whole, large frames are reassembled, the
 * subprotocol is kept, and partial state is released on close.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "httpd.h"
#include "loop.h"
#include "metrics.h"
#include "net.h"
#include "util.h"
#include "ws.h"
#include "wsconn.h"

struct fixture {
    struct {
        struct loop *loop;
        struct conn_pool pool;
        struct metrics metrics;
    } w;               /* what a worker gives its connections */
    struct net_ctx nc; /* the net layer's context of that worker */
    int peer;          /* the test's end of the socketpair */
    struct conn *c;
    struct wsconn *ws;
};

/* What the application saw. */
static char got[8192];
static size_t got_len;
static char all[65536]; /* every message, concatenated */
static size_t all_len;
static int messages, closes;
static bool got_binary;
static unsigned close_code;

static void on_message(struct wsconn *ws, bool binary, const char *p, size_t n)
{
    (void)ws;
    assert_true(n <= sizeof(got));
    memcpy(got, p, n);
    got_len = n;
    assert_true(all_len + n <= sizeof(all));
    memcpy(all + all_len, p, n);
    all_len += n;
    got_binary = binary;
    messages++;
}

static void on_close(struct wsconn *ws, unsigned code)
{
    (void)ws;
    close_code = code;
    closes++;
}

static const struct wsconn_app app = {.on_message = on_message, .on_close = on_close};
static const char *const protos[] = {"other.v1", "presenced.v1", NULL};
static const struct wsconn_opts opts = {.max_message = 65536, .subprotocols = protos};

static const char upgrade[] = "GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
                              "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                              "Sec-WebSocket-Protocol: presenced.v1\r\n\r\n";

/* Reads what the server wrote so far (the socket is non-blocking). */
static size_t read_peer(struct fixture *f, char *out, size_t cap)
{
    size_t got_n = 0;

    for (;;) {
        ssize_t n = read(f->peer, out + got_n, cap - got_n);
        if (n <= 0)
            return got_n;
        got_n += (size_t)n;
    }
}

/* A connection upgraded with (o, app_data) on f's worker; its peer end
 * in *peer. */
static struct wsconn *upgrade_conn(struct fixture *f, const struct wsconn_opts *o, void *app_data,
                                   int *peer)
{
    struct http_request req;
    struct httpd_conn *h;
    struct wsconn *ws;
    char out[1024];
    int sv[2];
    size_t n;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    *peer = sv[1];
    f->nc.metrics = &f->w.metrics;
    h = httpd_conn_new(&f->nc);
    f->c = conn_new(&f->w.pool, sv[0], &httpd_ops, h);
    assert_true(http_parse_request(upgrade, sizeof(upgrade) - 1, 0, &req) > 0);
    ws = wsconn_upgrade(f->c, &req, o, &app, app_data);
    assert_non_null(ws);
    free(h); /* what httpd does once its handler returns */
    conn_pool_flush(f->w.loop, &f->w.pool);
    n = 0;
    for (ssize_t k; (k = read(*peer, out + n, sizeof(out) - 1 - n)) > 0;)
        n += (size_t)k;
    out[n] = '\0';
    assert_non_null(strstr(out, "101 Switching Protocols"));
    return ws;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    f->w.loop = loop_new();
    conn_pool_init(&f->w.pool, f->w.loop, &f->w.metrics, 0);
    loop_add_hook(f->w.loop, conn_pool_flush, &f->w.pool);
    f->ws = upgrade_conn(f, &opts, NULL, &f->peer);
    got_len = all_len = 0;
    messages = closes = 0;
    close_code = 0;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    conn_pool_release(&f->w.pool);
    loop_free(f->w.loop);
    close(f->peer);
    free(f);
    return 0;
}

/* A masked client frame of (p, n) into out; returns its size. */
static size_t client_frame(uint8_t *out, unsigned op, bool fin, const void *p, size_t n)
{
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    size_t h = 0;

    out[h++] = (uint8_t)((fin ? 0x80u : 0) | op);
    if (n < 126) {
        out[h++] = (uint8_t)(0x80u | n);
    } else {
        out[h++] = 0x80u | 126u;
        out[h++] = (uint8_t)(n >> 8);
        out[h++] = (uint8_t)n;
    }
    memcpy(out + h, mask, 4);
    h += 4;
    ws_mask_copy(out + h, p, n, mask, 0);
    return h + n;
}

static void send_peer(struct fixture *f, const void *p, size_t n)
{
    assert_int_equal(write(f->peer, p, n), (ssize_t)n);
    loop_run_once(f->w.loop, 100);
}

static void test_upgrade_keeps_the_subprotocol(void **state)
{
    struct fixture *f = *state;

    assert_string_equal(wsconn_subprotocol(f->ws), "presenced.v1");
    assert_ptr_equal(wsconn_to_conn(f->ws), f->c);
    assert_ptr_equal(wsconn_from_conn(f->c), f->ws);
    assert_false(wsconn_has_partial_input(f->ws));
}

static void test_whole_small_frame_has_no_partial_state(void **state)
{
    struct fixture *f = *state;
    uint8_t fr[64];

    send_peer(f, fr, client_frame(fr, WS_OP_TEXT, true, "{\"type\":\"hb\"}", 13));
    assert_int_equal(messages, 1);
    assert_int_equal(got_len, 13);
    assert_memory_equal(got, "{\"type\":\"hb\"}", 13);
    assert_false(wsconn_has_partial_input(f->ws));
    assert_null(f->c->busy); /* nothing left over, nothing queued */
}

static void test_frame_split_at_every_byte(void **state)
{
    struct fixture *f = *state;
    uint8_t fr[512];
    char text[300];
    size_t n;

    for (size_t i = 0; i < sizeof(text); i++)
        text[i] = (char)('a' + i % 26);
    n = client_frame(fr, WS_OP_TEXT, true, text, sizeof(text));
    for (size_t i = 0; i + 1 < n; i++) {
        send_peer(f, fr + i, 1);
        assert_int_equal(messages, 0);
    }
    assert_true(wsconn_has_partial_input(f->ws)); /* inside the payload */
    send_peer(f, fr + n - 1, 1);
    assert_int_equal(messages, 1);
    assert_int_equal(got_len, sizeof(text));
    assert_memory_equal(got, text, sizeof(text));
    assert_false(wsconn_has_partial_input(f->ws));
}

static void test_fragments_are_reassembled(void **state)
{
    struct fixture *f = *state;
    uint8_t fr[128];
    size_t n = 0;

    n += client_frame(fr + n, WS_OP_BINARY, false, "abc", 3);
    send_peer(f, fr, n);
    assert_true(wsconn_has_partial_input(f->ws));   /* a message is open */
    n = client_frame(fr, WS_OP_PING, true, "p", 1); /* control frames interleave */
    n += client_frame(fr + n, WS_OP_CONT, false, "", 0);
    n += client_frame(fr + n, WS_OP_CONT, true, "defg", 4);
    send_peer(f, fr, n);
    assert_int_equal(messages, 1);
    assert_true(got_binary);
    assert_int_equal(got_len, 7);
    assert_memory_equal(got, "abcdefg", 7);
    assert_false(wsconn_has_partial_input(f->ws));
}

static void test_large_frame_is_reassembled(void **state)
{
    struct fixture *f = *state;
    static uint8_t fr[6000];
    static char data[5000];

    memset(data, 'x', sizeof(data));
    data[4999] = 'y';
    send_peer(f, fr, client_frame(fr, WS_OP_TEXT, true, data, sizeof(data)));
    assert_int_equal(messages, 1);
    assert_int_equal(got_len, 5000);
    assert_int_equal(got[4999], 'y');
    assert_false(wsconn_has_partial_input(f->ws));
}

static void test_bad_text_across_fragments_closes_1007(void **state)
{
    struct fixture *f = *state;
    uint8_t fr[64];
    char out[256];
    size_t n;

    n = client_frame(fr, WS_OP_TEXT, false, "ok\xc3", 3);
    n += client_frame(fr + n, WS_OP_CONT, true, "(", 1); /* not a continuation byte */
    send_peer(f, fr, n);
    assert_int_equal(messages, 0);
    n = read_peer(f, out, sizeof(out));
    assert_true(n >= 4);
    assert_int_equal((uint8_t)out[0], 0x88); /* close */
    assert_int_equal(((uint8_t)out[2] << 8) | (uint8_t)out[3], 1007);
}

/* A client byte stream and the messages it should deliver. */
struct script {
    uint8_t bytes[8192];
    size_t n;
    char want[8192]; /* the data messages, concatenated */
    size_t want_len;
    int messages;
};

static void script_add(struct script *s, unsigned op, bool fin, const void *p, size_t len)
{
    s->n += client_frame(s->bytes + s->n, op, fin, p, len);
    if (op >= WS_OP_CLOSE)
        return;
    memcpy(s->want + s->want_len, p, len);
    s->want_len += len;
    s->messages += fin;
}

/* Whole, fragmented and large messages back to back, cut into reads of
 * every size from 1 to 40 bytes: each cut delivers the same messages. */
static void test_any_cut_of_a_mixed_stream(void **state)
{
    struct fixture *f = *state;
    static struct script s;
    static char big[3000], pongs[4096];

    memset(big, 'b', sizeof(big));
    script_add(&s, WS_OP_TEXT, true, "hb", 2);
    script_add(&s, WS_OP_TEXT, false, "fr", 2);
    script_add(&s, WS_OP_PING, true, "x", 1);
    script_add(&s, WS_OP_CONT, true, "ag", 2);
    script_add(&s, WS_OP_BINARY, true, big, sizeof(big));
    script_add(&s, WS_OP_TEXT, true, "\xc3\xa9t\xc3\xa9", 6);
    for (size_t cut = 1; cut <= 40; cut++) {
        all_len = 0;
        messages = 0;
        for (size_t off = 0; off < s.n; off += cut)
            send_peer(f, s.bytes + off, MIN(cut, s.n - off));
        assert_int_equal(messages, s.messages);
        assert_int_equal(all_len, s.want_len);
        assert_memory_equal(all, s.want, s.want_len);
        assert_false(wsconn_has_partial_input(f->ws));
        read_peer(f, pongs, sizeof(pongs));
    }
}

/* Connections upgraded with other options (another endpoint) keep them. */
static void test_endpoints_keep_their_own_options(void **state)
{
    static const struct wsconn_opts small = {.max_message = 10};
    struct fixture *f = *state;
    struct conn *first = f->c;
    struct wsconn *ws2;
    uint8_t fr[64];
    char out[64];
    int peer2;

    ws2 = upgrade_conn(f, &small, NULL, &peer2);
    assert_null(wsconn_subprotocol(ws2)); /* small offers none */
    assert_true(wsconn_is(f->c) && wsconn_is(first));
    assert_ptr_not_equal(f->c->ops, first->ops);
    assert_int_equal(write(peer2, fr, client_frame(fr, WS_OP_TEXT, true, "0123456789ab", 12)), 18);
    send_peer(f, fr, client_frame(fr, WS_OP_TEXT, true, "0123456789ab", 12));
    assert_int_equal(messages, 1); /* the first connection's limit is 65536 */
    assert_true(read(peer2, out, sizeof(out)) >= 4);
    assert_int_equal((uint8_t)out[0], 0x88);
    assert_int_equal(((uint8_t)out[2] << 8) | (uint8_t)out[3], 1009);
    assert_string_equal(wsconn_subprotocol(f->ws), "presenced.v1");
    close(peer2);
}

/* User data equal to app_data (the engine's way) needs no room of its
 * own; other user data moves both into an allocation (freed with ws). */
static void test_app_and_user_data(void **state)
{
    struct fixture *f = *state;
    struct wsconn *ws2;
    int a, b, peer2;

    assert_null(wsconn_app_data(f->ws)); /* setup passed NULL */
    assert_null(wsconn_user_data(f->ws));
    wsconn_set_user_data(f->ws, &b);
    assert_ptr_equal(wsconn_user_data(f->ws), &b);
    assert_null(wsconn_app_data(f->ws));

    ws2 = upgrade_conn(f, &opts, &a, &peer2);
    assert_ptr_equal(wsconn_app_data(ws2), &a);
    assert_null(wsconn_user_data(ws2));
    wsconn_set_user_data(ws2, &a);
    assert_ptr_equal(wsconn_user_data(ws2), &a);
    wsconn_set_user_data(ws2, NULL);
    assert_null(wsconn_user_data(ws2));
    wsconn_set_user_data(ws2, &b);
    assert_ptr_equal(wsconn_user_data(ws2), &b);
    assert_ptr_equal(wsconn_app_data(ws2), &a);
    wsconn_set_user_data(ws2, &a);
    assert_ptr_equal(wsconn_user_data(ws2), &a);
    assert_ptr_equal(wsconn_app_data(ws2), &a);
    close(peer2);
}

static void test_close_with_a_partial_message(void **state)
{
    struct fixture *f = *state;
    uint8_t fr[512];
    char text[200];

    memset(text, 'z', sizeof(text));
    send_peer(f, fr, client_frame(fr, WS_OP_TEXT, true, text, sizeof(text)) - 50);
    assert_true(wsconn_has_partial_input(f->ws));
    shutdown(f->peer, SHUT_WR);
    loop_run_once(f->w.loop, 100);
    loop_run_once(f->w.loop, 100);
    conn_pool_flush(f->w.loop, &f->w.pool);
    assert_int_equal(messages, 0);
    assert_int_equal(closes, 1); /* freed with its partial state (ASan: no leak) */
    assert_int_equal(close_code, 1006);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_upgrade_keeps_the_subprotocol, setup, teardown),
        cmocka_unit_test_setup_teardown(test_whole_small_frame_has_no_partial_state, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_frame_split_at_every_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fragments_are_reassembled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_frame_is_reassembled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_text_across_fragments_closes_1007, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_any_cut_of_a_mixed_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_endpoints_keep_their_own_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_app_and_user_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_with_a_partial_message, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
