/* SPDX-License-Identifier: MIT */
/*
 * nodeinfo.c - each node's summary in Redis, for the admin API's list of
 * nodes (cluster.h: cluster_info_put, cluster_nodes_get). Home worker
 * only.
 *
 * A node puts a short JSON object of its own (the engine's: counts,
 * health) at pd:<app>:{c}:info:<node-id>.<epoch>, which expires after
 * twice the lease: a node that stops putting it (dead, swept or cut off)
 * drops out of the list by itself, and nothing needs sweeping. A read is
 * one MGET of this node's own key and those of the live epochs of the
 * last lease reply (node.c), so it lists the members the lease says are
 * alive, with their last summary or none. Every key has the {c} tag: one
 * slot, one shard, one command.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_internal.h"
#include "util.h"

static void info_key(const struct cluster *cl, const char *member, size_t len,
                     char out[CLUSTER_KEY_MAX])
{
    snprintf(out, CLUSTER_KEY_MAX, "pd:%s:{c}:info:%.*s", cl->cfg.app, (int)len, member);
}

int cluster_info_put(struct cluster *cl, const char *json, size_t len)
{
    char key[CLUSTER_KEY_MAX], px[24];
    const char *argv[5] = {"SET", key, json, "PX", px};
    size_t argl[5];

    if (!cl->r)
        return REDIS_E_CLOSED;
    info_key(cl, cl->self, strlen(cl->self), key);
    snprintf(px, sizeof(px), "%llu", 2ull * cl->cfg.lease_ms);
    for (int i = 0; i < 5; i++)
        argl[i] = i == 2 ? len : strlen(argv[i]); /* json is not NUL-terminated */
    return redis_cmd(cl->r, key, strlen(key), 5, argv, argl, NULL, NULL);
}

struct nodes_read {
    struct cluster *cl;
    cluster_nodes_cb *cb;
    void *ctx;
    size_t n;
    char **members; /* [n]: self first, then the live epochs */
};

static void nodes_read_free(struct nodes_read *nr)
{
    for (size_t i = 0; i < nr->n; i++)
        free(nr->members[i]);
    free(nr->members);
    free(nr);
}

static void nodes_read_done(void *ctx, const redisReply *r, int err)
{
    struct nodes_read *nr = ctx;
    const char **infos;
    size_t *lens;

    if (err || r->type != REDIS_REPLY_ARRAY || r->elements != nr->n) {
        nr->cb(nr->ctx, err ? err : REDIS_E_DOWN, NULL, NULL, NULL, 0);
        nodes_read_free(nr);
        return;
    }
    infos = xcalloc(nr->n, sizeof(*infos));
    lens = xcalloc(nr->n, sizeof(*lens));
    for (size_t i = 0; i < nr->n; i++) {
        if (r->element[i]->type != REDIS_REPLY_STRING)
            continue;
        infos[i] = r->element[i]->str;
        lens[i] = r->element[i]->len;
    }
    nr->cb(nr->ctx, 0, (const char *const *)nr->members, infos, lens, nr->n);
    free(infos);
    free(lens);
    nodes_read_free(nr);
}

/* Splits "m1,m2" (the live list) into nr->members after self. */
static void add_members(struct nodes_read *nr, const struct buf *live)
{
    const char *p = live->data, *end = p ? p + live->len : NULL;

    while (p && p < end && nr->n < CLUSTER_NODES_MAX) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        size_t len = (size_t)((c ? c : end) - p);
        if (len > 0 && len <= CLUSTER_SELF_MAX)
            nr->members[nr->n++] = xstrndup(p, len);
        p = c ? c + 1 : end;
    }
}

int cluster_nodes_get(struct cluster *cl, cluster_nodes_cb *cb, void *ctx)
{
    struct nodes_read *nr;
    const char **argv;
    size_t *argl;
    char(*keys)[CLUSTER_KEY_MAX];
    int rc;

    if (!cl->r)
        return REDIS_E_CLOSED;
    nr = xcalloc(1, sizeof(*nr));
    *nr = (struct nodes_read){.cl = cl, .cb = cb, .ctx = ctx};
    nr->members = xcalloc(CLUSTER_NODES_MAX, sizeof(*nr->members));
    nr->members[nr->n++] = xstrdup(cl->self);
    add_members(nr, &cl->node.live);
    argv = xcalloc(nr->n + 1, sizeof(*argv));
    argl = xcalloc(nr->n + 1, sizeof(*argl));
    keys = xcalloc(nr->n, sizeof(*keys));
    argv[0] = "MGET";
    argl[0] = 4;
    for (size_t i = 0; i < nr->n; i++) {
        info_key(cl, nr->members[i], strlen(nr->members[i]), keys[i]);
        argv[i + 1] = keys[i];
        argl[i + 1] = strlen(keys[i]);
    }
    rc = redis_cmd(cl->r, keys[0], argl[1], (int)nr->n + 1, argv, argl, nodes_read_done, nr);
    free(argv);
    free(argl);
    free(keys);
    if (rc != 0)
        nodes_read_free(nr);
    return rc;
}
