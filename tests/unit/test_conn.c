/* SPDX-License-Identifier: MIT */
/*
 * test_conn.c - the connection layer over real socketpairs and a real
 * loop: coalesced output (one writev), shared payloads, output limits,
 * partial input kept and re-presented, protocol switches inside one read,
 * deferred close and graceful close, bulk output and the sliced flush.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "conn.h"
#include "metrics.h"
#include "util.h"

struct fixture {
    struct loop *loop;
    struct metrics metrics;
    struct conn_pool pool;
    int peer; /* the test's end of the socketpair */
};

/* What the test protocols saw. */
static char seen[4096];
static size_t seen_len;
static int closes, overflows, switched_calls;
static size_t consume_at_most; /* 0 = everything */

static size_t rec_on_data(struct conn *c, const char *p, size_t n)
{
    size_t k = consume_at_most ? MIN(n, consume_at_most) : n;

    (void)c;
    memcpy(seen + seen_len, p, k);
    seen_len += k;
    return k;
}

static void rec_on_close(struct conn *c)
{
    (void)c;
    closes++;
}

static void rec_on_overflow(struct conn *c)
{
    overflows++;
    conn_write(c, "BYE", 3); /* still accepted: close frame analogue */
}

static const struct conn_ops rec_ops = {
    .name = "rec",
    .on_data = rec_on_data,
    .on_overflow = rec_on_overflow,
    .on_close = rec_on_close,
};

static size_t b_on_data(struct conn *c, const char *p, size_t n)
{
    (void)c;
    switched_calls++;
    memcpy(seen + seen_len, p, n);
    seen_len += n;
    return n;
}

static const struct conn_ops b_ops = {.name = "b", .on_data = b_on_data, .on_close = rec_on_close};

/* Consumes "UP\n" and switches to b_ops: the rest must reach b_ops at once. */
static size_t a_on_data(struct conn *c, const char *p, size_t n)
{
    if (n < 3)
        return 0;
    assert_memory_equal(p, "UP\n", 3);
    conn_set_ops(c, &b_ops, NULL);
    return 3;
}

static const struct conn_ops a_ops = {.name = "a", .on_data = a_on_data, .on_close = rec_on_close};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    f->loop = loop_new();
    conn_pool_init(&f->pool, f->loop, &f->metrics, 1);
    loop_add_hook(f->loop, conn_pool_flush, &f->pool);
    seen_len = 0;
    closes = overflows = switched_calls = 0;
    consume_at_most = 0;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    conn_pool_release(&f->pool);
    loop_free(f->loop);
    if (f->peer > 0)
        close(f->peer);
    free(f);
    return 0;
}

static struct conn *new_conn(struct fixture *f, const struct conn_ops *ops)
{
    int sv[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    f->peer = sv[1];
    return conn_new(&f->pool, sv[0], ops, NULL);
}

static size_t read_peer(struct fixture *f, char *out, size_t cap)
{
    size_t got = 0;

    for (;;) {
        ssize_t n = read(f->peer, out + got, cap - got);
        if (n <= 0)
            return got;
        got += (size_t)n;
    }
}

static void test_many_writes_one_writev(void **state)
{
    struct fixture *f = *state;
    struct conn *c = new_conn(f, &rec_ops);
    char out[65536];
    size_t n;

    for (int i = 0; i < 100; i++)
        conn_write(c, "0123456789", 10);
    assert_int_equal(conn_output_len(c), 1000);
    conn_pool_flush(f->loop, &f->pool);
    assert_int_equal(METRIC_GET(&f->metrics, writev_calls), 1);
    n = read_peer(f, out, sizeof(out));
    assert_int_equal(n, 1000);
    assert_memory_equal(out + 990, "0123456789", 10);
    assert_null(c->busy); /* idle again: no output memory */
}

/* The worker's output_bytes gauge follows every connection's queue: up
 * with writes, down with writev, with dropped output and with a close. */
static void test_output_bytes_gauge(void **state)
{
    struct fixture *f = *state;
    struct payload *p = payload_new(4096);
    struct conn *c;
    char chunk[1000];

    f->pool.out_hard_limit = 10000;
    c = new_conn(f, &rec_ops);
    memset(p->data, 'p', 4096);
    p->len = 4096;
    conn_write(c, "0123456789", 10);
    conn_write_payload(c, p);
    assert_int_equal(METRIC_GET(&f->metrics, output_bytes), 4106);
    assert_int_equal(METRIC_GET(&f->metrics, output_bytes), conn_output_len(c));
    conn_pool_flush(f->loop, &f->pool);
    assert_int_equal(METRIC_GET(&f->metrics, output_bytes), 0);
    memset(chunk, 'x', sizeof(chunk));
    for (int i = 0; i < 11; i++) /* the 11th trips the hard limit: dropped */
        conn_write(c, chunk, sizeof(chunk));
    assert_int_equal(overflows, 1);
    assert_int_equal(METRIC_GET(&f->metrics, output_bytes), conn_output_len(c));
    conn_close(c);
    assert_int_equal(METRIC_GET(&f->metrics, output_bytes), 0);
    payload_unref(p);
}

/* conn_first_message(): the connection's age in loop ms, once. */
static void test_first_message_age(void **state)
{
    struct fixture *f = *state;
    /* 36 ms before the clock's low 16 bits wrap (it only moves forward) */
    uint64_t t0 = loop_now(f->loop) / 65536 * 65536 + 2 * 65536 - 36;
    struct conn *c;
    uint64_t age = 0;

    loop_set_clock(f->loop, t0);
    c = new_conn(f, &rec_ops);
    loop_set_clock(f->loop, t0 + 250);
    assert_true(conn_first_message(c, &age));
    assert_int_equal(age, 250);
    loop_set_clock(f->loop, t0 + 5000);
    assert_false(conn_first_message(c, &age));
    assert_int_equal(age, 250);
}

static void test_shared_payload_is_referenced(void **state)
{
    struct fixture *f = *state;
    struct payload *p = payload_new(8192);
    struct conn *c = new_conn(f, &rec_ops);
    char out[32768];

    memset(p->data, 'z', 8192);
    p->len = 8192;
    conn_write(c, "head", 4);
    conn_write_payload(c, p);
    conn_write_payload(c, p);
    assert_int_equal(atomic_load(&p->refs), 3);
    conn_pool_flush(f->loop, &f->pool);
    assert_int_equal(atomic_load(&p->refs), 1);
    assert_int_equal(read_peer(f, out, sizeof(out)), 4 + 2 * 8192);
    assert_memory_equal(out, "headzz", 6);
    payload_unref(p);
}

/* Slices of one shared payload (a room tick around a recipient's own
 * frames): each is one referenced piece, written in order, only its bytes;
 * a small slice is copied into the private tail; an empty one is nothing. */
static void test_payload_slices_are_referenced_pieces(void **state)
{
    struct fixture *f = *state;
    struct payload *p = payload_new(600);
    struct conn *c = new_conn(f, &rec_ops);
    char out[4096];

    for (int i = 0; i < 600; i++)
        p->data[i] = (char)('a' + i / 100); /* 100 a, 100 b, ... 100 f */
    p->len = 600;
    conn_write(c, "head", 4);
    conn_write_payload_range(c, p, 590, 600, false); /* small: copied after head */
    conn_write_payload_range(c, p, 0, 200, true);    /* a, b */
    conn_write_payload_range(c, p, 300, 600, true);  /* d, e, f: c skipped */
    conn_write_payload_range(c, p, 250, 250, true);  /* empty: nothing */
    assert_int_equal(atomic_load(&p->refs), 3);
    assert_int_equal(conn_output_len(c), 4 + 10 + 200 + 300);
    conn_pool_flush(f->loop, &f->pool);
    assert_int_equal(atomic_load(&p->refs), 1);
    assert_int_equal(read_peer(f, out, sizeof(out)), 4 + 10 + 200 + 300);
    assert_memory_equal(out, "headffffffffff", 14);
    assert_int_equal(out[14], 'a');
    assert_int_equal(out[14 + 199], 'b');
    assert_int_equal(out[14 + 200], 'd');
    assert_int_equal(out[14 + 499], 'f');
    assert_null(c->busy);
    payload_unref(p);
}

static void test_hard_limit_trips_overflow_and_bounds_memory(void **state)
{
    struct fixture *f = *state;
    struct conn *c;
    char chunk[1000];

    f->pool.out_hard_limit = 10000;
    c = new_conn(f, &rec_ops);
    memset(chunk, 'x', sizeof(chunk));
    for (int i = 0; i < 10; i++)
        conn_write(c, chunk, sizeof(chunk));
    assert_int_equal(overflows, 0);
    conn_write(c, chunk, sizeof(chunk));
    assert_int_equal(overflows, 1);
    assert_true(c->flags & CONN_OVERFLOWED);
    assert_true(conn_is_closing(c));
    /* Unsent data was dropped; only the overflow notice remains queued. */
    assert_int_equal(conn_output_len(c), 3);
    for (int i = 0; i < 100; i++)
        conn_write(c, chunk, sizeof(chunk));
    assert_int_equal(conn_output_len(c), 3);
    assert_int_equal(METRIC_GET(&f->metrics, output_limit_closes), 1);
}

static void test_soft_limit_needs_its_window(void **state)
{
    struct fixture *f = *state;
    struct conn *c;
    char chunk[600];

    f->pool.out_soft_limit = 1000;
    f->pool.out_soft_ms = 5000;
    c = new_conn(f, &rec_ops);
    memset(chunk, 'x', sizeof(chunk));
    conn_write(c, chunk, sizeof(chunk));
    conn_write(c, chunk, sizeof(chunk));
    assert_int_equal(overflows, 0); /* over soft, but only just now */
    assert_int_equal(conn_soft_since(c), loop_now(f->loop));
    f->pool.out_soft_ms = 0; /* as if the 5 s window had passed */
    conn_write(c, "x", 1);
    assert_int_equal(overflows, 1);
}

static void test_soft_limit_resets_when_drained(void **state)
{
    struct fixture *f = *state;
    struct conn *c;
    char chunk[600];

    f->pool.out_soft_limit = 1000;
    f->pool.out_soft_ms = 5000;
    c = new_conn(f, &rec_ops);
    memset(chunk, 'x', sizeof(chunk));
    conn_write(c, chunk, sizeof(chunk));
    conn_write(c, chunk, sizeof(chunk));
    conn_pool_flush(f->loop, &f->pool); /* the peer's buffer takes it all */
    assert_int_equal(conn_soft_since(c), 0);
    assert_null(c->busy);
    assert_int_equal(overflows, 0);
}

/* The slow-reader limit is the real one: what the kernel holds in the
 * socket's full buffer counts with the own queue (issue 15, item 7).
 * Before, a reader could be behind by the limit plus the whole send
 * buffer, up to tcp_wmem's max of 4 MiB. */
static void test_hard_limit_counts_the_kernel_buffer(void **state)
{
    struct fixture *f = *state;
    struct conn *c;
    char chunk[1000];
    int sz = 16384;
    size_t in_kernel;

    f->pool.out_hard_limit = 100000;
    c = new_conn(f, &rec_ops);
    assert_int_equal(setsockopt(c->io.fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz)), 0);
    memset(chunk, 'x', sizeof(chunk));
    for (int i = 0; i < 50; i++)
        conn_write(c, chunk, sizeof(chunk));
    conn_pool_flush(f->loop, &f->pool); /* the socket takes what fits; it fills */
    assert_true(conn_output_len(c) > 0);
    in_kernel = 50000 - conn_output_len(c);
    assert_true(in_kernel >= 8000);
    /* Our own queue stays below the limit; with the kernel's share it is over. */
    while (!overflows && conn_output_len(c) + sizeof(chunk) <= f->pool.out_hard_limit)
        conn_write(c, chunk, sizeof(chunk));
    assert_int_equal(overflows, 1);
    assert_int_equal(METRIC_GET(&f->metrics, output_limit_closes), 1);
}

/* Once the reader took everything, the kernel's share is forgotten. */
static void test_kernel_share_resets_when_drained(void **state)
{
    struct fixture *f = *state;
    struct conn *c;
    char chunk[1000], out[65536];
    int sz = 16384;

    f->pool.out_soft_limit = 30000;
    f->pool.out_soft_ms = 5000;
    c = new_conn(f, &rec_ops);
    assert_int_equal(setsockopt(c->io.fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz)), 0);
    memset(chunk, 'x', sizeof(chunk));
    for (int i = 0; i < 40; i++)
        conn_write(c, chunk, sizeof(chunk));
    conn_pool_flush(f->loop, &f->pool);
    assert_true(conn_output_len(c) > 0);
    for (int i = 0; i < 100 && c->busy; i++) {
        read_peer(f, out, sizeof(out));
        loop_run_once(f->loop, 10); /* EPOLLOUT, then the flush hook */
    }
    assert_null(c->busy);
    conn_write(c, chunk, sizeof(chunk)); /* far below the soft limit again */
    assert_int_equal(conn_soft_since(c), 0);
    assert_int_equal(overflows, 0);
}

/* pool->sndbuf is applied to every new socket (the kernel doubles it). */
static void test_sndbuf_is_set_on_new_sockets(void **state)
{
    struct fixture *f = *state;
    struct conn *c;
    int got = 0;
    socklen_t len = sizeof(got);

    f->pool.sndbuf = 16384;
    c = new_conn(f, &rec_ops);
    assert_int_equal(getsockopt(c->io.fd, SOL_SOCKET, SO_SNDBUF, &got, &len), 0);
    assert_int_equal(got, 2 * 16384);
}

static void test_partial_input_is_represented(void **state)
{
    struct fixture *f = *state;

    struct conn *c;

    consume_at_most = 2;
    c = new_conn(f, &rec_ops);
    assert_int_equal(write(f->peer, "abcde", 5), 5);
    loop_run_once(f->loop, 100);
    /* Two bytes consumed; the rest waits in the busy part. */
    assert_int_equal(seen_len, 2);
    assert_int_equal(conn_input_len(c), 3);
    consume_at_most = 0;
    assert_int_equal(write(f->peer, "fg", 2), 2);
    loop_run_once(f->loop, 100);
    assert_int_equal(seen_len, 7);
    assert_memory_equal(seen, "abcdefg", 7);
    assert_int_equal(conn_input_len(c), 0);
    assert_null(c->busy); /* idle again: no input memory */
}

/* Output waiting while leftover input is kept: both share the busy part,
 * which goes only when both are done, in either order. */
static void test_busy_part_outlives_either_use(void **state)
{
    struct fixture *f = *state;
    char out[64];
    struct conn *c;

    consume_at_most = 2;
    c = new_conn(f, &rec_ops);
    assert_null(c->busy); /* a new connection is idle */
    assert_int_equal(write(f->peer, "abcde", 5), 5);
    loop_run_once(f->loop, 100); /* leftover kept */
    conn_write(c, "out", 3);
    conn_pool_flush(f->loop, &f->pool); /* output gone, input still kept */
    assert_int_equal(read_peer(f, out, sizeof(out)), 3);
    assert_non_null(c->busy);
    assert_int_equal(conn_input_len(c), 3);
    assert_int_equal(conn_output_len(c), 0);
    consume_at_most = 0;
    assert_int_equal(write(f->peer, "f", 1), 1);
    loop_run_once(f->loop, 100);
    assert_int_equal(seen_len, 6);
    assert_null(c->busy);
}

/* More chunks than the busy part holds itself: the ring moves to the heap,
 * keeps the byte order, and is freed with the busy part once written. */
static void test_ring_grows_past_its_inline_chunks(void **state)
{
    struct fixture *f = *state;
    struct conn *c = new_conn(f, &rec_ops);
    struct payload *p[20];
    static char out[20 * 100];

    for (int i = 0; i < 20; i++) {
        p[i] = payload_new(100);
        memset(p[i]->data, 'a' + i, 100);
        p[i]->len = 100;
        conn_write_payload(c, p[i]);
    }
    assert_int_equal(conn_output_len(c), 2000);
    conn_pool_flush(f->loop, &f->pool);
    assert_int_equal(read_peer(f, out, sizeof(out)), 2000);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(out[i * 100], 'a' + i);
        assert_int_equal(out[i * 100 + 99], 'a' + i);
        assert_int_equal(atomic_load(&p[i]->refs), 1);
        payload_unref(p[i]);
    }
    assert_null(c->busy);
}

/* What an idle connection costs: struct conn and the protocol room, one
 * 144-byte pool object (docs/architecture.md, conn.c/h). */
static void test_idle_connection_size(void **state)
{
    (void)state;
    assert_true(sizeof(struct conn) + CONN_PROTO_ROOM <= 144);
    assert_int_equal(sizeof(struct loop_io), 16);
}

static void test_protocol_switch_within_one_read(void **state)
{
    struct fixture *f = *state;
    struct conn *c = new_conn(f, &a_ops);

    assert_int_equal(write(f->peer, "UP\nframes", 9), 9);
    loop_run_once(f->loop, 100);
    assert_ptr_equal(c->ops, &b_ops);
    assert_int_equal(switched_calls, 1);
    assert_int_equal(seen_len, 6);
    assert_memory_equal(seen, "frames", 6);
}

static void test_close_is_deferred(void **state)
{
    struct fixture *f = *state;
    struct conn *c = new_conn(f, &rec_ops);

    conn_write(c, "lost", 4);
    conn_close(c);
    conn_close(c);               /* idempotent */
    assert_int_equal(closes, 0); /* not freed under the caller */
    assert_int_equal(f->pool.count, 0);
    conn_pool_flush(f->loop, &f->pool);
    assert_int_equal(closes, 1);
    char out[16];
    assert_int_equal(read(f->peer, out, sizeof(out)), 0); /* EOF, nothing written */
}

static void test_close_after_flush_delivers_then_eof(void **state)
{
    struct fixture *f = *state;
    struct conn *c = new_conn(f, &rec_ops);
    char out[64];
    ssize_t n;

    conn_write(c, "last words", 10);
    conn_close_after_flush(c);
    conn_write(c, "dropped", 7);
    conn_pool_flush(f->loop, &f->pool);
    n = read(f->peer, out, sizeof(out));
    assert_int_equal(n, 10);
    assert_memory_equal(out, "last words", 10);
    assert_int_equal(read(f->peer, out, sizeof(out)), 0); /* our side shut down */
    assert_int_equal(closes, 0);                          /* waits for the peer's EOF */
    shutdown(f->peer, SHUT_WR);
    loop_run_once(f->loop, 100);
    assert_int_equal(closes, 1);
}

/* The peer hung up before our last words went out: they still go out,
 * then we close without waiting for anything. */
static void test_eof_before_close_after_flush(void **state)
{
    struct fixture *f = *state;
    struct conn *c = new_conn(f, &rec_ops);
    char out[64];

    conn_close_after_flush(c);
    conn_write(c, "dropped", 7); /* closing: not accepted any more */
    shutdown(f->peer, SHUT_WR);
    loop_run_once(f->loop, 100); /* reads the EOF: nothing left to send */
    assert_int_equal(closes, 1);
    assert_int_equal(read(f->peer, out, sizeof(out)), 0);
}

static void test_eof_while_last_words_queued(void **state)
{
    struct fixture *f = *state;
    struct conn *c = new_conn(f, &rec_ops);
    char out[64];

    conn_write(c, "last words", 10);
    conn_close_after_flush(c);
    shutdown(f->peer, SHUT_WR);
    /* The EOF is read before the flush (events run first), then the flush
     * writes and closes: no shutdown, no waiting for a second EOF. */
    loop_run_once(f->loop, 100);
    assert_int_equal(read(f->peer, out, sizeof(out)), 10);
    assert_memory_equal(out, "last words", 10);
    assert_int_equal(read(f->peer, out, sizeof(out)), 0);
    loop_run_once(f->loop, 0);
    assert_int_equal(closes, 1);
}

static void test_peer_eof_closes_by_default(void **state)
{
    struct fixture *f = *state;

    new_conn(f, &rec_ops);
    close(f->peer);
    f->peer = -1;
    loop_run_once(f->loop, 100);
    assert_int_equal(closes, 1);
    assert_int_equal(f->pool.count, 0);
}

static struct payload *payload_of(const char *s)
{
    struct payload *p = payload_new(strlen(s));

    payload_append(p, s, strlen(s));
    return p;
}

/* Bulk and urgent output share one queue: order kept, one writev. */
static void test_bulk_keeps_order_with_urgent_output(void **state)
{
    struct fixture *f = *state;
    struct conn *c = new_conn(f, &rec_ops);
    struct payload *a = payload_of("bulk-a "), *b = payload_of("bulk-b");
    char out[64];

    conn_write_payload_bulk(c, a);
    assert_true(c->flags & CONN_BULK);
    conn_write(c, "urgent ", 7);
    assert_false(c->flags & CONN_BULK); /* now all of it is urgent */
    conn_write_payload_bulk(c, b);
    assert_false(c->flags & CONN_BULK);
    loop_run_once(f->loop, 0);
    assert_int_equal(METRIC_GET(&f->metrics, writev_calls), 1);
    assert_int_equal(read_peer(f, out, sizeof(out)), 20);
    assert_memory_equal(out, "bulk-a urgent bulk-b", 20);
    payload_unref(a);
    payload_unref(b);
}

/* Makes the current iteration look busy past its slice. */
static void spend_slice(struct fixture *f)
{
    loop_run_once(f->loop, 0);
    while (loop_busy_us(f->loop) < LOOP_SLICE_US + 200)
        ;
}

/* Past the slice, only CONN_SLICE_MIN bulk connections are flushed; the
 * others go out in the next iteration, which does not sleep. Urgent
 * output is flushed whatever the time. */
static void test_bulk_is_sliced_urgent_is_not(void **state)
{
    enum { N = CONN_SLICE_MIN + 8 };
    struct fixture *f = *state;
    struct payload *p = payload_of("delta");
    struct conn *c[N], *u;
    int peers[N], upeer;
    char out[16];
    int got = 0;
    uint64_t t0;

    for (int i = 0; i < N; i++) {
        c[i] = new_conn(f, &rec_ops);
        peers[i] = f->peer;
    }
    u = new_conn(f, &rec_ops);
    upeer = f->peer;
    f->peer = -1;
    spend_slice(f);
    for (int i = 0; i < N; i++)
        conn_write_payload_bulk(c[i], p);
    conn_write(u, "cursor", 6);
    conn_pool_flush(f->loop, &f->pool);
    assert_int_equal(read(upeer, out, sizeof(out)), 6);
    for (int i = 0; i < N; i++)
        got += read(peers[i], out, sizeof(out)) == 5;
    assert_int_equal(got, CONN_SLICE_MIN);
    t0 = time_mono_ms();
    loop_run_once(f->loop, 5000); /* work left: no sleep */
    assert_true(time_mono_ms() - t0 < 1000);
    for (int i = 0; i < N; i++)
        got += read(peers[i], out, sizeof(out)) == 5;
    assert_int_equal(got, N);
    for (int i = 0; i < N; i++)
        close(peers[i]);
    close(upeer);
    payload_unref(p);
}

/* Frees of closed connections are sliced the same way. */
static void test_frees_are_sliced(void **state)
{
    enum { N = CONN_SLICE_MIN + 5 };
    struct fixture *f = *state;
    int peers[N];
    struct conn *c[N];

    for (int i = 0; i < N; i++) {
        c[i] = new_conn(f, &rec_ops);
        peers[i] = f->peer;
    }
    f->peer = -1;
    spend_slice(f);
    for (int i = 0; i < N; i++)
        conn_close(c[i]);
    conn_pool_flush(f->loop, &f->pool);
    assert_int_equal(closes, CONN_SLICE_MIN);
    loop_run_once(f->loop, 5000);
    assert_int_equal(closes, N);
    for (int i = 0; i < N; i++)
        close(peers[i]);
}

/* The process-wide count (max-connections) drops when the socket closes,
 * before the deferred free, and once; a release at shutdown closes first. */
static void test_shared_count_drops_at_close(void **state)
{
    struct fixture *f = *state;
    atomic_uint count = 0;
    struct conn *a, *b;

    f->pool.shared_count = &count;
    a = new_conn(f, &rec_ops);
    close(f->peer);
    b = new_conn(f, &rec_ops);
    atomic_store(&count, 2); /* conn_new does not count: the acceptor does */
    conn_close(a);
    assert_int_equal(atomic_load(&count), 1);
    assert_int_equal(closes, 0); /* not freed yet */
    conn_close(a);               /* idempotent */
    assert_int_equal(atomic_load(&count), 1);
    conn_pool_flush(f->loop, &f->pool);
    assert_int_equal(closes, 1);
    assert_int_equal(atomic_load(&count), 1);
    conn_pool_release(&f->pool); /* closes b */
    assert_int_equal(atomic_load(&count), 0);
    f->pool.shared_count = NULL;
    (void)b;
}

static void expect_peer(struct conn *c, const struct sockaddr *sa, const char *want)
{
    char out[CONN_PEER_MAX];

    conn_set_peer(c, sa);
    assert_string_equal(conn_peer(c, out), want);
}

/* IPv4 and IPv4-mapped addresses are kept inline, other IPv6 ones in an
 * allocation of their own, replaced and freed with c (ASan: no leak). */
static void test_peer_addresses(void **state)
{
    struct fixture *f = *state;
    struct conn *c = new_conn(f, &rec_ops);
    struct sockaddr_in in4 = {.sin_family = AF_INET, .sin_port = htons(4242)};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(443)};
    struct sockaddr other = {.sa_family = AF_UNIX};
    char out[CONN_PEER_MAX];

    assert_string_equal(conn_peer(c, out), "?:0");
    inet_pton(AF_INET, "192.0.2.7", &in4.sin_addr);
    expect_peer(c, (struct sockaddr *)&in4, "192.0.2.7:4242");
    inet_pton(AF_INET6, "2001:db8::1", &in6.sin6_addr);
    expect_peer(c, (struct sockaddr *)&in6, "2001:db8::1:443");
    inet_pton(AF_INET6, "::1", &in6.sin6_addr);
    expect_peer(c, (struct sockaddr *)&in6, "::1:443");
    inet_pton(AF_INET6, "::ffff:198.51.100.9", &in6.sin6_addr);
    expect_peer(c, (struct sockaddr *)&in6, "::ffff:198.51.100.9:443");
    assert_true(c->peer_v4mapped);
    expect_peer(c, &other, "?:0");
    inet_pton(AF_INET6, "fe80::2", &in6.sin6_addr);
    expect_peer(c, (struct sockaddr *)&in6, "fe80::2:443"); /* freed with c */
}

static void test_ids_are_unique_and_carry_the_worker(void **state)
{
    struct fixture *f = *state;
    struct conn *a = new_conn(f, &rec_ops);
    int p1 = f->peer;
    struct conn *b = new_conn(f, &rec_ops);

    assert_true(a->id != b->id);
    assert_int_equal(a->id >> 48, 1);
    close(p1);
}

/* A restart is a new pool of the same worker: its ids must start above
 * every id the earlier one gave out, or a room token signed for an old
 * connection id would admit a new connection. */
static void test_ids_do_not_repeat_after_a_restart(void **state)
{
    struct conn_pool before = {0}, after = {0};
    struct metrics m = {0};
    struct loop *l = loop_new();
    uint64_t last;

    (void)state;
    conn_pool_init(&before, l, &m, 1);
    before.next_seq += 100; /* the earlier run made 100 connections in its 2 ms */
    last = ((uint64_t)1 << 48) | (before.next_seq - 1);
    usleep(2000);
    conn_pool_init(&after, l, &m, 1);
    assert_true((((uint64_t)1 << 48) | after.next_seq) > last);
    assert_int_equal((((uint64_t)1 << 48) | after.next_seq) >> 48, 1); /* still the worker's */
    conn_pool_release(&before);
    conn_pool_release(&after);
    loop_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_many_writes_one_writev, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_payload_is_referenced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_bytes_gauge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_message_age, setup, teardown),
        cmocka_unit_test_setup_teardown(test_payload_slices_are_referenced_pieces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_count_drops_at_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hard_limit_trips_overflow_and_bounds_memory, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_soft_limit_needs_its_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_soft_limit_resets_when_drained, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hard_limit_counts_the_kernel_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kernel_share_resets_when_drained, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sndbuf_is_set_on_new_sockets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_input_is_represented, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy_part_outlives_either_use, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ring_grows_past_its_inline_chunks, setup, teardown),
        cmocka_unit_test(test_idle_connection_size),
        cmocka_unit_test_setup_teardown(test_protocol_switch_within_one_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_is_deferred, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_after_flush_delivers_then_eof, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eof_before_close_after_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eof_while_last_words_queued, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_eof_closes_by_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_are_unique_and_carry_the_worker, setup, teardown),
        cmocka_unit_test(test_ids_do_not_repeat_after_a_restart),
        cmocka_unit_test_setup_teardown(test_peer_addresses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bulk_keeps_order_with_urgent_output, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bulk_is_sliced_urgent_is_not, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frees_are_sliced, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
