/* SPDX-License-Identifier: MIT */
/*
 * rconn.c - a RESP connection on the loop (rconn.h).
 *
 * connect: a non-blocking socket whose first EPOLLOUT (or error) ends the
 * connect; read: up to RCONN_READS_PER_EVENT reads per event into the
 * redisReader, then every complete reply to ops->reply; write: the
 * owner's hook calls rconn_flush(), one write() of everything queued,
 * EPOLLOUT for the rest. Every callback may close the connection: the
 * code after it checks the generation and stops. Nothing here frees the
 * struct: it is the owner's, released outside callbacks.
 */
#include "rconn.h"

#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics.h"
#include "redis.h"
#include "util.h"

#define RCONN_READ_SIZE       (16u * 1024u)
#define RCONN_READS_PER_EVENT 4

static void rconn_on_io(struct loop_io *io, uint32_t events);

void rconn_init(struct rconn *c, struct loop *l, struct list *flushq, const struct rconn_ops *ops,
                void *data)
{
    memset(c, 0, sizeof(*c));
    c->loop = l;
    c->flushq = flushq;
    c->ops = ops;
    c->data = data;
    c->fd = -1;
    list_init(&c->fifo);
    list_init(&c->flush_link);
}

int rconn_set_addr(struct rconn *c, const char *host, uint16_t port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    char service[8];
    int rc;

    snprintf(service, sizeof(service), "%u", port);
    rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0)
        return rc == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
    memcpy(&c->addr, res->ai_addr, res->ai_addrlen);
    c->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int rconn_connect(struct rconn *c)
{
    int one = 1, fd, rc;

    if (c->state != RCONN_IDLE || !c->addrlen)
        return -EINVAL;
    fd = socket(c->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&c->addr, c->addrlen) < 0 && errno != EINPROGRESS) {
        rc = -errno;
        close(fd);
        return rc;
    }
    /* Even a connect that completed at once is reported from the loop. */
    rc = loop_io_start(c->loop, &c->io, fd, EPOLLOUT, rconn_on_io);
    if (rc) {
        close(fd);
        return rc;
    }
    c->fd = fd;
    c->reader = redisReaderCreate();
    if (!c->reader)
        abort(); /* out of memory: the x*alloc policy */
    c->state = RCONN_CONNECTING;
    c->since = loop_now(c->loop);
    return 0;
}

static void mark_dirty(struct rconn *c)
{
    if (!list_is_linked(&c->flush_link))
        list_insert_tail(c->flushq, &c->flush_link);
}

void rconn_send(struct rconn *c, const char *cmd, size_t len, struct rconn_req *req)
{
    buf_append(&c->out, cmd, len);
    if (req) {
        req->sent_at = loop_now(c->loop);
        req->sent_us = 0;
        list_insert_tail(&c->fifo, &req->link);
    }
    if (c->state == RCONN_OPEN)
        mark_dirty(c);
}

void rconn_close(struct rconn *c, struct list *reqs)
{
    struct list *pos, *tmp;

    if (c->state == RCONN_IDLE)
        return;
    loop_io_forget(&c->io);
    close(c->fd);
    c->fd = -1;
    c->state = RCONN_IDLE;
    c->since = loop_now(c->loop);
    c->gen++;
    redisReaderFree(c->reader);
    c->reader = NULL;
    c->out.len = 0;
    c->out_off = 0;
    list_del(&c->flush_link);
    list_foreach_safe(pos, tmp, &c->fifo)
    {
        list_del(pos);
        if (reqs)
            list_insert_tail(reqs, pos);
    }
}

void rconn_release(struct rconn *c)
{
    rconn_close(c, NULL);
    buf_release(&c->out);
}

uint64_t rconn_oldest(const struct rconn *c)
{
    if (list_empty(&c->fifo))
        return 0;
    return container_of(list_first(&c->fifo), struct rconn_req, link)->sent_at;
}

/* Closes c and hands its waiting requests to the owner. */
static void fail(struct rconn *c, int err)
{
    struct list reqs;

    list_init(&reqs);
    rconn_close(c, &reqs);
    c->ops->lost(c, &reqs, err);
    /* The owner must have taken every request. */
    assert(list_empty(&reqs));
}

/* The requests queued since the last write went out with this one: they
 * are the FIFO's unstamped tail. */
static void stamp_sent(struct rconn *c)
{
    uint64_t now = time_mono_us();

    for (struct list *pos = c->fifo.prev; pos != &c->fifo; pos = pos->prev) {
        struct rconn_req *req = container_of(pos, struct rconn_req, link);
        if (req->sent_us)
            break;
        req->sent_us = now;
    }
}

void rconn_flush(struct rconn *c)
{
    ssize_t n;

    list_del(&c->flush_link);
    if (c->state != RCONN_OPEN || c->out_off == c->out.len)
        return;
    n = write(c->fd, c->out.data + c->out_off, c->out.len - c->out_off);
    c->writes++;
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            n = 0;
        else {
            fail(c, -errno);
            return;
        }
    }
    c->out_off += (size_t)n;
    if (n > 0 && c->metrics)
        stamp_sent(c);
    if (c->out_off == c->out.len) {
        c->out.len = c->out_off = 0;
        loop_io_set(c->loop, &c->io, EPOLLIN);
    } else {
        loop_io_set(c->loop, &c->io, EPOLLIN | EPOLLOUT);
    }
}

static void on_connected(struct rconn *c)
{
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err) {
        fail(c, -err);
        return;
    }
    c->state = RCONN_OPEN;
    c->since = loop_now(c->loop);
    loop_io_set(c->loop, &c->io, EPOLLIN);
    if (c->out.len > c->out_off)
        mark_dirty(c);
    c->ops->connected(c);
}

/* Hands every complete reply in the reader to the owner. */
static void dispatch(struct rconn *c)
{
    unsigned gen = c->gen;
    uint64_t now = c->metrics ? time_mono_us() : 0; /* one reading per read */

    for (;;) {
        void *reply = NULL;
        struct rconn_req *req = NULL;

        if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
            fail(c, REDIS_E_PROTO);
            return;
        }
        if (!reply)
            return;
        if (!c->push) {
            if (list_empty(&c->fifo)) {
                freeReplyObject(reply);
                fail(c, REDIS_E_PROTO); /* a reply nobody asked for */
                return;
            }
            req = container_of(list_first(&c->fifo), struct rconn_req, link);
            list_del(&req->link);
            if (req->sent_us && c->metrics)
                metrics_observe(c->metrics, MH_REDIS, now - req->sent_us);
        }
        c->ops->reply(c, req, reply);
        freeReplyObject(reply);
        if (c->gen != gen)
            return;
    }
}

static void on_readable(struct rconn *c)
{
    char b[RCONN_READ_SIZE];
    unsigned gen = c->gen;

    for (int i = 0; i < RCONN_READS_PER_EVENT; i++) {
        ssize_t n = read(c->fd, b, sizeof(b));

        if (n == 0) {
            fail(c, -ECONNRESET);
            return;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            {
                fail(c, -errno);
                return;
            }
        }
        if (redisReaderFeed(c->reader, b, (size_t)n) != REDIS_OK) {
            fail(c, REDIS_E_PROTO);
            return;
        }
        dispatch(c);
        if (c->gen != gen || (size_t)n < sizeof(b))
            return;
    }
}

static void rconn_on_io(struct loop_io *io, uint32_t events)
{
    struct rconn *c = container_of(io, struct rconn, io);
    unsigned gen = c->gen;

    if (c->state == RCONN_CONNECTING) {
        on_connected(c);
        return;
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        on_readable(c);
    if (c->gen == gen && c->state == RCONN_OPEN && (events & EPOLLOUT))
        rconn_flush(c);
}
