/* SPDX-License-Identifier: MIT */
/*
 * adapter.c - the registry of protocol adapters (adapter.h): a small
 * table filled before the workers start and only read after.
 */
#include "adapter.h"

#include <assert.h>

static const struct proto_adapter *adapters[ADAPTER_MAX];
static unsigned nadapters;

unsigned adapter_register(const struct proto_adapter *a)
{
    for (unsigned i = 0; i < nadapters; i++)
        if (adapters[i] == a)
            return i;
    /* A fixed table: a protocol id is a few bits of struct client. */
    assert(nadapters < ADAPTER_MAX);
    /* Its handshake series exists (metrics.h). */
    assert(a->metrics_proto < METRICS_PROTOS);
    adapters[nadapters] = a;
    return nadapters++;
}

const struct proto_adapter *adapter_get(unsigned id)
{
    /* The composition root registers the adapters before any event. */
    assert(id < nadapters && adapters[id]);
    return adapters[id];
}

struct payload *adapter_no_frame(void)
{
    return NULL;
}

struct payload *adapter_no_presence(const struct presence_event *ev)
{
    (void)ev;
    return NULL;
}

struct payload *adapter_no_privacy(const struct privacy_event *ev)
{
    (void)ev;
    return NULL;
}

struct payload *adapter_no_room_joined(const struct room_joined_event *ev)
{
    (void)ev;
    return NULL;
}

unsigned adapter_count(void)
{
    return nadapters;
}

uint64_t adapter_conn_of(const char *tag)
{
    uint64_t conn = 0;

    for (unsigned i = 0; i < nadapters && !conn && tag[0]; i++)
        if (adapters[i]->conn_of)
            conn = adapters[i]->conn_of(tag);
    return conn;
}

void adapter_frames_release(struct adapter_frames *fs)
{
    for (unsigned i = 0; i < ADAPTER_MAX; i++) {
        payload_unref(fs->f[i]);
        fs->f[i] = NULL;
    }
}

void adapter_frames_copy(struct adapter_frames *dst, const struct adapter_frames *src)
{
    for (unsigned i = 0; i < ADAPTER_MAX; i++)
        dst->f[i] = src->f[i] ? payload_ref(src->f[i]) : NULL;
}
