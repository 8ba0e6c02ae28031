/* SPDX-License-Identifier: MIT */
/*
 * fuzz_engine.c - libFuzzer target that drives the whole engine with
 * programs of protocol messages, through the path a socket takes.
 *
 * Each input is a fresh server: one worker (its loop on a test clock,
 * its connection pool, a one-worker bus, the engine and the native
 * adapter) and a settings store on a fresh SQLite file, all on this
 * thread, no listener. Clients are real: each is the far end of a
 * socketpair(2) handed to httpd_accept() as an accepted socket, upgraded
 * with a real HTTP request to GET /v1/ws, and speaks masked WebSocket
 * frames; everything the server writes is read back and checked.
 *
 * The input is a program (fuzz_engine.h: the byte code and the JSON
 * generators): its first byte picks a configuration variant, then each
 * step opens a client (one of four users, anonymous, a bad user, or a
 * resume of another client's session), closes one abruptly or with a
 * close frame, moves the clock (so TTLs, the grace, debounces and batch
 * windows fire), sends raw bytes as a text message, or sends one of the
 * native messages as valid JSON whose fields are chosen from the bytes
 * (valid and invalid ids, wrong types, huge numbers, escapes, unknown and
 * missing fields). After each step the loop runs until it is quiet.
 *
 * Invariants (any failure aborts, so libFuzzer reports it):
 *   - the server answers an upgrade with 101 or an HTTP error, and then
 *     sends well-formed unmasked frames: text frames of strict JSON
 *     (json_check) objects of a documented type, a welcome first, close
 *     frames with a valid code (4000 only after session_ended);
 *   - a frame with a ref answers a request of this connection that
 *     carried it, at most once, with a reply of the right kind (pong for
 *     ping, room_joined for join, never an ack for join, ping or
 *     ephemeral); at the end every request of a still-open connection that
 *     must be answered was;
 *   - presence frames are about users this connection watched;
 *   - per (connection, room) the model built from snapshots and deltas
 *     follows docs/protocol.md's client table: deltas contiguous in seq
 *     per epoch, joins of absent, leaves and patches of present members,
 *     count equal to the model's members, room_joined at the model's
 *     (epoch, seq), nothing of a room the connection is not in, an
 *     ephemeral only from a member;
 *   - once every client is gone and the clock passed TTL + grace, the
 *     presence core, the room engine and the engine's maps are empty (no
 *     ghosts), and ASan's leak check at exit finds nothing.
 *
 * Deterministic: the store is fresh per input, and the only thread
 * besides this one (the store's) is waited for until it has answered.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cJSON.h>
#include <netinet/in.h>

#include "bus.h"
#include "config.h"
#include "engine.h"
#include "engine_state.h"
#include "fuzz_engine.h"
#include "httpd.h"
#include "json.h"
#include "loop.h"
#include "msg.h"
#include "native.h"
#include "net.h"
#include "presence.h"
#include "room.h"
#include "route.h"
#include "store.h"
#include "utf8.h"
#include "util.h"
#include "worker.h"
#include "ws.h"

/* ---- failing ---- */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "fuzz_engine: invariant failed: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

#define CHECK(cond, ...)       \
    do {                       \
        if (!(cond))           \
            fail(__VA_ARGS__); \
    } while (0)

/* FUZZ_ENGINE_TRACE=1 in the environment: every frame in and out, and
 * each step, on stderr (to read what a crashing input does). */
static bool trace;

void fz_trace(const char *dir, const struct peer *p, const char *s, size_t n)
{
    if (trace)
        fprintf(stderr, "%s [%d] %.*s\n", dir, p->slot, (int)MIN(n, 400), s);
}

/* ---- the server under test ---- */

static struct config cfg_template; /* config_init() once; copied per input */
static struct route *routes;
static size_t nroutes;
static const char *const subprotocols[] = {"presenced.v1", NULL};

struct env {
    struct server srv;
    struct worker w;
    struct net_ctx nc;
    struct engine_env ee;
    struct engine *e;
    struct peer peers[FZ_PEERS];
    bool progress; /* something happened in this settle round */
};

static void on_bus_msg(void *ctx, struct bus_msg *m)
{
    struct env *v = ctx;

    v->progress = true;
    if (m->type != WORKER_MSG_ENGINE)
        fail("bus message of type %u", m->type);
    engine__dispatch(&v->w, m);
}

static void bus_hook(struct loop *l, void *data)
{
    struct env *v = data;

    (void)l;
    bus_flush_all(v->srv.bus, 0);
}

static void tick_hook(struct loop *l, void *data)
{
    struct env *v = data;

    (void)l;
    engine_tick(v->e);
}

static void on_bus(struct loop_io *io, uint32_t events)
{
    struct env *v = container_of(io, struct env, w.bus_io);

    (void)events;
    bus_drain(v->srv.bus, 0, on_bus_msg, v);
}

/* The configuration variant of the program's first byte. */
static void configure(struct config *c, uint8_t variant)
{
    *c = cfg_template;
    c->heartbeat_interval_ms = 1000;
    c->heartbeat_min_ms = 100;
    c->session_ttl_ms = FZ_TTL_MS;
    c->reconnect_grace_ms = (variant & 1) ? 0 : FZ_GRACE_MS;
    c->idle_ms = 2000;
    c->presence_debounce_ms = (variant & 2) ? 0 : 100;
    c->max_sessions_per_user = 3;
    c->max_watch = 4;
    c->room_max_members = 3;
    c->max_rooms_per_connection = 2;
    c->room_batch_ms = 50;
    c->watch_batch_ms = 200;
    c->room_interval_members = (variant & 4) ? 2 : 1000;
    c->room_interval_ms = 100;
    c->ws_ping_interval_ms = 5000;
    c->ws_pong_timeout_ms = 2000;
    c->query_burst = (variant & 8) ? 3 : 1000;
    c->ephemeral_rate = (variant & 16) ? 2 : 15;
    static char *const policies[] = {"most-available", "dnd-wins", "most-recent"};
    c->status_policy = policies[(variant >> 5) % 3];
}

/* The settings store, shared by the runs (fz_prefix keeps them apart)
 * and replaced by a fresh file every STORE_RUNS runs to bound its size. */
#define STORE_RUNS 20000
static struct store *store;
static unsigned store_runs, runs;
static char store_dir[64], store_path[96];

static void store_drop(void)
{
    char p[128];

    if (!store)
        return;
    store_close(store);
    store = NULL;
    for (const char *const *s = (const char *const[]){"", "-wal", "-shm", "-journal", NULL}; *s;
         s++) {
        snprintf(p, sizeof(p), "%s%s", store_path, *s);
        unlink(p);
    }
    rmdir(store_dir);
}

/* The store files of runs that aborted (a crash skips atexit): every
 * /dev/shm/fuzz_engine.<pid>.* whose process is gone. */
static void store_sweep(void)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *de;
    char p[300];

    if (!d)
        return;
    while ((de = readdir(d))) {
        int pid = 0;
        if (sscanf(de->d_name, "fuzz_engine.%d.", &pid) != 1 || pid <= 0 ||
            (kill(pid, 0) < 0 && errno == EPERM) || kill(pid, 0) == 0)
            continue;
        for (const char *const *s = (const char *const[]){"", "-wal", "-shm", "-journal", NULL}; *s;
             s++) {
            snprintf(p, sizeof(p), "/dev/shm/%s/s.db%s", de->d_name, *s);
            unlink(p);
        }
        snprintf(p, sizeof(p), "/dev/shm/%s", de->d_name);
        rmdir(p);
    }
    closedir(d);
}

static struct store *store_get(void)
{
    char err[STORE_ERR_LEN];

    if (store && ++store_runs < STORE_RUNS)
        return store;
    store_drop();
    store_runs = 0;
    snprintf(store_dir, sizeof(store_dir), "/dev/shm/fuzz_engine.%d.XXXXXX", (int)getpid());
    if (!mkdtemp(store_dir)) {
        snprintf(store_dir, sizeof(store_dir), "/tmp/fuzz_engine.XXXXXX");
        if (!mkdtemp(store_dir))
            fail("mkdtemp: %s", strerror(errno));
    }
    snprintf(store_path, sizeof(store_path), "%s/s.db", store_dir);
    store = store_open(store_path, err, sizeof(err));
    if (!store)
        fail("store_open: %s", err);
    return store;
}

static void env_open(struct env *v, uint8_t variant)
{
    struct wsconn_opts *o = &v->nc.wsconn_opts;

    snprintf(fz_prefix, sizeof(fz_prefix), "u%x-", ++runs);
    configure(&v->srv.cfg, variant);
    v->srv.nworkers = 1;
    v->srv.bus = bus_new(1);
    v->srv.workers = &v->w;
    v->w.srv = &v->srv;
    v->w.loop = loop_new();
    loop_set_clock(v->w.loop, FZ_CLOCK_START);
    v->w.pool.out_soft_limit = (size_t)v->srv.cfg.client_output_soft_limit_bytes;
    v->w.pool.out_soft_ms = (uint64_t)v->srv.cfg.client_output_soft_limit_ms;
    v->w.pool.out_hard_limit = (size_t)v->srv.cfg.client_output_hard_limit_bytes;
    v->w.pool.sndbuf = 0;
    conn_pool_init(&v->w.pool, v->w.loop, &v->w.metrics, 0);
    v->w.pool.max_input = HTTP_MAX_HEAD_BYTES + (size_t)v->srv.cfg.http_max_body_bytes + 65536;
    if (loop_io_start(v->w.loop, &v->w.bus_io, bus_inbox_fd(v->srv.bus, 0), EPOLLIN, on_bus) < 0)
        fail("epoll_ctl");
    v->nc.cfg = &v->srv.cfg;
    v->nc.metrics = &v->w.metrics;
    v->nc.routes = routes;
    v->nc.nroutes = nroutes;
    o->max_message = (size_t)v->srv.cfg.ws_max_message_bytes;
    o->ping_interval_ms = (uint64_t)v->srv.cfg.ws_ping_interval_ms;
    o->pong_timeout_ms = (uint64_t)v->srv.cfg.ws_pong_timeout_ms;
    o->allowed_origins = v->srv.cfg.ws_allowed_origins;
    o->subprotocols = subprotocols;
    o->close_timeout_ms = 2000;
    v->nc.worker = &v->w;
    v->w.app = &v->nc;
    v->ee.store = store_get();
    v->e = engine_new(&v->w, &v->ee, &v->nc);
    v->nc.app = v->e;
    loop_add_hook(v->w.loop, tick_hook, v);
    loop_add_hook(v->w.loop, bus_hook, v);
    loop_add_hook(v->w.loop, conn_pool_flush, &v->w.pool);
    loop_add_hook(v->w.loop, bus_hook, v);
    for (int i = 0; i < FZ_PEERS; i++)
        v->peers[i].fd = -1;
}

static void env_close(struct env *v)
{
    conn_pool_release(&v->w.pool);
    engine_free(v->e);
    loop_io_stop(v->w.loop, &v->w.bus_io);
    bus_free(v->srv.bus);
    loop_free(v->w.loop);
}

/* ---- the clients' side ---- */

static void peer_reset(struct peer *p)
{
    if (p->fd >= 0)
        close(p->fd);
    free(p->in);
    for (int i = 0; i < p->nrefs; i++)
        free(p->refs[i].key);
    memset(p, 0, sizeof(*p));
    p->fd = -1;
}

/* Writes all of (d, n) to a client socket; the server reads it at the
 * next loop iteration. A peer whose socket is gone is left alone. */
static void peer_write(struct peer *p, const void *d, size_t n)
{
    const char *s = d;

    while (p->fd >= 0 && n > 0) {
        ssize_t k = write(p->fd, s, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            /* the buffer is full (the server does not read: it closed) or
             * the server end is gone: the rest is lost like on a network */
            return;
        }
        s += k;
        n -= (size_t)k;
    }
}

/* One masked frame from the client. */
void fz_send_frame(struct peer *p, unsigned opcode, bool fin, const void *data, size_t n,
                   const uint8_t mask[4])
{
    uint8_t hdr[WS_MAX_HEADER];
    size_t h = ws_encode_header(hdr, opcode, fin, n);
    uint8_t *buf = xmalloc(h + 4 + n + 1);

    hdr[1] |= 0x80;
    memcpy(buf, hdr, h);
    memcpy(buf + h, mask, 4);
    ws_mask_copy(buf + h + 4, data, n, mask, 0);
    peer_write(p, buf, h + 4 + n);
    free(buf);
}

static struct ref_rec *ref_find(struct peer *p, const char *key)
{
    for (int i = 0; i < p->nrefs; i++)
        if (strcmp(p->refs[i].key, key) == 0)
            return &p->refs[i];
    return NULL;
}

bool fz_ref_expect(struct peer *p, const char *key, int kind, int room)
{
    struct ref_rec *r;

    if (p->nrefs == FZ_REFS_MAX || ref_find(p, key))
        fail("ref %s recorded twice or too many refs", key);
    r = &p->refs[p->nrefs++];
    r->key = xstrdup(key);
    r->kind = kind;
    r->room = room;
    r->answered = false;
    return true;
}

/* The normalised key of a reply's ref: "i:<int>" or "s:<string>". */
static bool ref_key(const cJSON *ref, char *out, size_t len)
{
    if (cJSON_IsNumber(ref)) {
        snprintf(out, len, "i:%lld", (long long)ref->valuedouble);
        return true;
    }
    if (cJSON_IsString(ref)) {
        snprintf(out, len, "s:%s", ref->valuestring);
        return true;
    }
    return false;
}

static int user_index(const char *u)
{
    const char *name = fz_unprefix(u);

    for (int i = 0; name && i < FZ_USERS; i++)
        if (strcmp(name, fz_users[i]) == 0)
            return i;
    fail("a room names user \"%s\", who never connected", u);
}

static int room_index(const char *r)
{
    for (int i = 0; i < FZ_ROOMS; i++)
        if (strcmp(r, fz_rooms[i]) == 0)
            return i;
    fail("a frame names room \"%s\", which no one joined", r);
}

static uint64_t get_u64(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    int64_t v;

    CHECK(json_number_i64(x, 0, INT64_MAX, &v) == 0, "\"%s\" is not a non-negative integer", key);
    return (uint64_t)v;
}

static unsigned popcount(unsigned m)
{
    return (unsigned)__builtin_popcount(m);
}

/* A member list (room_snapshot "members", room_delta "joins" and
 * "patches") as a bitmask of users. */
static unsigned member_mask(const cJSON *arr, const char *what)
{
    const cJSON *m;
    unsigned mask = 0;

    CHECK(cJSON_IsArray(arr), "room \"%s\" is not an array", what);
    cJSON_ArrayForEach(m, arr)
    {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(m, "user");
        int i;
        CHECK(cJSON_IsString(u), "a member of \"%s\" has no user", what);
        i = user_index(u->valuestring);
        CHECK(!(mask & (1u << i)), "user %s twice in \"%s\"", u->valuestring, what);
        mask |= 1u << i;
    }
    return mask;
}

static unsigned leave_mask(const cJSON *arr)
{
    const cJSON *u;
    unsigned mask = 0;

    CHECK(cJSON_IsArray(arr), "room_delta leaves is not an array");
    cJSON_ArrayForEach(u, arr)
    {
        int i;
        CHECK(cJSON_IsString(u), "a leave is not a user id");
        i = user_index(u->valuestring);
        CHECK(!(mask & (1u << i)), "user %s leaves twice", u->valuestring);
        mask |= 1u << i;
    }
    return mask;
}

static void room_state(struct peer *p, struct rmodel *m, const cJSON *o, const char *type)
{
    uint64_t epoch = get_u64(o, "epoch"), seq = get_u64(o, "seq"), count = get_u64(o, "count");
    bool snapshot = strcmp(type, "room_snapshot") == 0;

    (void)p;
    CHECK(m->state != RM_NONE, "%s for a room this connection is not in", type);
    if (snapshot) {
        m->members = member_mask(cJSON_GetObjectItemCaseSensitive(o, "members"), "members");
        m->epoch = epoch;
        m->seq = seq;
        m->base = true;
    } else {
        unsigned j = member_mask(cJSON_GetObjectItemCaseSensitive(o, "joins"), "joins");
        unsigned l = leave_mask(cJSON_GetObjectItemCaseSensitive(o, "leaves"));
        unsigned pa = member_mask(cJSON_GetObjectItemCaseSensitive(o, "patches"), "patches");

        CHECK(m->base, "room_delta %llu before any state of the room", (unsigned long long)seq);
        CHECK(!(j & l) && !(j & pa) && !(l & pa), "a user in two lists of one delta");
        if (epoch == m->epoch && seq <= m->seq)
            return; /* already applied (a resume from an older seq) */
        CHECK((epoch == m->epoch && seq == m->seq + 1) ||
                  (epoch != m->epoch && seq == 1 && m->members == 0),
              "room_delta epoch %llu seq %llu after epoch %llu seq %llu", (unsigned long long)epoch,
              (unsigned long long)seq, (unsigned long long)m->epoch, (unsigned long long)m->seq);
        CHECK(!(j & m->members), "a join of a member already present");
        CHECK((l & m->members) == l, "a leave of a user who is not a member");
        CHECK((pa & m->members) == pa, "a patch of a user who is not a member");
        m->members = (m->members & ~l) | j;
        m->epoch = epoch;
        m->seq = seq;
    }
    CHECK(count == popcount(m->members), "%s count %llu, model has %u members", type,
          (unsigned long long)count, popcount(m->members));
}

static void room_joined(struct peer *p, struct rmodel *m, const cJSON *o, struct ref_rec *r)
{
    CHECK(r && r->kind == FZ_K_JOIN, "room_joined without the ref of a join");
    CHECK(m->state == RM_JOINING && m->join_ref == r - p->refs, "room_joined not for its join");
    CHECK(m->base, "room_joined before the room's state");
    CHECK(get_u64(o, "epoch") == m->epoch && get_u64(o, "seq") == m->seq,
          "room_joined at epoch %llu seq %llu, the state sent was %llu/%llu",
          (unsigned long long)get_u64(o, "epoch"), (unsigned long long)get_u64(o, "seq"),
          (unsigned long long)m->epoch, (unsigned long long)m->seq);
    CHECK(get_u64(o, "count") == popcount(m->members), "room_joined count differs from the model");
    m->state = RM_JOINED;
}

static const char *const server_types[] = {
    "welcome",
    "pong",
    "ack",
    "error",
    "presence",
    "presence_list",
    "privacy_changed",
    "session_ended",
    "room_snapshot",
    "room_delta",
    "room_joined",
    "ephemeral",
    "token_expired",
    NULL,
};

/* The reply's ref, checked against what this connection asked. */
static struct ref_rec *check_ref(struct peer *p, const cJSON *o, const char *type)
{
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(o, "ref");
    char key[FZ_KEY_MAX + 8];
    struct ref_rec *r;

    if (!ref)
        return NULL;
    CHECK(ref_key(ref, key, sizeof(key)), "%s with a ref that is neither string nor number", type);
    r = ref_find(p, key);
    CHECK(r, "%s with ref %s that this connection never sent", type, key);
    CHECK(!r->answered, "ref %s answered twice (now by %s)", key, type);
    r->answered = true;
    if (strcmp(type, "pong") == 0)
        CHECK(r->kind == FZ_K_PING, "a pong answers ref %s of a %s", key, fz_kind_name(r->kind));
    else if (strcmp(type, "room_joined") == 0)
        CHECK(r->kind == FZ_K_JOIN, "room_joined answers ref %s of a %s", key,
              fz_kind_name(r->kind));
    else if (strcmp(type, "ack") == 0)
        CHECK(r->kind != FZ_K_JOIN && r->kind != FZ_K_PING && r->kind != FZ_K_EPHEMERAL &&
                  r->kind != FZ_K_LEAVE,
              "an ack answers ref %s of a %s", key, fz_kind_name(r->kind));
    else
        CHECK(strcmp(type, "error") == 0, "a %s carries ref %s", type, key);
    return r;
}

static void on_text(struct peer *p, const char *s, size_t n)
{
    cJSON *o;
    const cJSON *t;
    const char *type;
    bool known = false;
    struct ref_rec *r;

    fz_trace("<-", p, s, n);
    CHECK(utf8_valid(s, n), "a text frame that is not UTF-8");
    CHECK(json_check(s, n) == 0, "a frame that is not strict JSON: %.*s", (int)MIN(n, 300), s);
    o = cJSON_ParseWithLength(s, n);
    CHECK(cJSON_IsObject(o), "a frame that is not an object");
    t = cJSON_GetObjectItemCaseSensitive(o, "type");
    CHECK(cJSON_IsString(t), "a frame without a string type");
    type = t->valuestring;
    for (int i = 0; server_types[i]; i++)
        known |= strcmp(type, server_types[i]) == 0;
    CHECK(known, "a frame of undocumented type %s", type);
    if (!p->welcomed && strcmp(type, "error") == 0) {
        /* a session the user may not have: the error, then close 1008 */
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(o, "code");
        CHECK(cJSON_IsString(code) && strcmp(code->valuestring, "too_many_sessions") == 0,
              "an error before the welcome");
        CHECK(p->user >= 0 && !p->refused, "too_many_sessions twice or for an observer");
        p->refused = true;
        cJSON_Delete(o);
        return;
    }
    CHECK(!p->refused, "%s after too_many_sessions", type);
    CHECK(p->welcomed || strcmp(type, "welcome") == 0, "%s before the welcome", type);
    CHECK(!p->ended, "%s after session_ended", type);
    r = check_ref(p, o, type);
    if (strcmp(type, "welcome") == 0) {
        const cJSON *sid = cJSON_GetObjectItemCaseSensitive(o, "sessionId");
        CHECK(!p->welcomed, "a second welcome");
        p->welcomed = true;
        if (cJSON_IsString(sid))
            snprintf(p->sid, sizeof(p->sid), "%s", sid->valuestring);
        CHECK((p->user >= 0) == (sid != NULL), "a welcome with%s a session", sid ? "" : "out");
    } else if (strcmp(type, "session_ended") == 0) {
        p->ended = true;
    } else if (strcmp(type, "presence") == 0) {
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(o, "presence");
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(pr, "user");
        CHECK(cJSON_IsString(u), "presence without a user");
        CHECK(fz_watched_ever(p, u->valuestring), "presence of %s, never watched here",
              u->valuestring);
    } else if (strncmp(type, "room_", 5) == 0 || strcmp(type, "ephemeral") == 0) {
        const cJSON *rm = cJSON_GetObjectItemCaseSensitive(o, "room");
        struct rmodel *m;
        CHECK(cJSON_IsString(rm), "%s without a room", type);
        m = &p->rooms[room_index(rm->valuestring)];
        if (strcmp(type, "room_joined") == 0) {
            room_joined(p, m, o, r);
        } else if (strcmp(type, "ephemeral") == 0) {
            const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "user");
            CHECK(m->state != RM_NONE, "ephemeral of a room this connection is not in");
            CHECK(cJSON_IsString(u), "ephemeral without a user");
            CHECK(!m->base || (m->members & (1u << user_index(u->valuestring))),
                  "ephemeral from %s, not a member in this connection's model", u->valuestring);
        } else {
            room_state(p, m, o, type);
        }
    }
    if (r && strcmp(type, "error") == 0 && r->room >= 0) {
        struct rmodel *m = &p->rooms[r->room];
        if (r->kind == FZ_K_JOIN && m->state == RM_JOINING && m->join_ref == r - p->refs)
            m->state = RM_NONE; /* the join failed */
    }
    if (r && strcmp(type, "ack") == 0 && r->kind == FZ_K_ROOM_LEAVE && r->room >= 0)
        p->rooms[r->room].state = RM_NONE; /* nothing more of it from now on */
    cJSON_Delete(o);
}

static void on_close_frame(struct peer *p, const uint8_t *pl, size_t n)
{
    unsigned code = WS_CLOSE_NO_STATUS;

    CHECK(ws_parse_close(pl, n, &code) == 0, "an invalid close frame from the server");
    if (trace)
        fprintf(stderr, "<- [%d] close %u\n", p->slot, code);
    CHECK(code != WS_CLOSE_NO_STATUS && code != WS_CLOSE_ABNORMAL, "server close without a code");
    CHECK(code != 4000 || p->ended, "close 4000 without session_ended");
    CHECK(!p->refused || code == 1008, "too_many_sessions closed with %u, not 1008", code);
    p->server_closed = true;
}

/* Parses what the server sent: the HTTP answer, then frames. */
static void peer_parse(struct peer *p)
{
    size_t off = 0;

    if (!p->upgraded) {
        char *end = memmem(p->in, p->in_len, "\r\n\r\n", 4);
        if (!end)
            return;
        CHECK(p->in_len > 12 && memcmp(p->in, "HTTP/1.1 ", 9) == 0, "not an HTTP answer");
        if (memcmp(p->in + 9, "101 ", 4) != 0) {
            CHECK(p->in[9] == '4', "upgrade answered %.3s", p->in + 9);
            CHECK(p->bad, "a good upgrade refused with %.3s", p->in + 9);
            p->server_closed = true; /* nothing to speak with it */
            p->in_len = 0;
            return;
        }
        CHECK(!p->bad, "an invalid upgrade request accepted");
        p->upgraded = true;
        off = (size_t)(end + 4 - p->in);
    }
    while (off < p->in_len && !p->server_closed) {
        struct ws_frame f;
        ssize_t h = ws_decode_header(p->in + off, p->in_len - off, &f);
        if (h == PS_PARTIAL)
            break;
        CHECK(h > 0, "the server sent a bad frame header: %s", ws_strerror(h));
        CHECK(!f.masked, "a masked server frame");
        CHECK(f.fin, "a fragmented server frame");
        if (p->in_len - off - (size_t)h < f.len)
            break;
        const uint8_t *pl = (const uint8_t *)p->in + off + h;
        if (f.opcode == WS_OP_TEXT) {
            on_text(p, (const char *)pl, (size_t)f.len);
        } else if (f.opcode == WS_OP_CLOSE) {
            on_close_frame(p, pl, (size_t)f.len);
        } else if (f.opcode == WS_OP_PONG) {
            /* the answer to a ping sent between fragments */
        } else if (f.opcode == WS_OP_PING) {
            static const uint8_t m[4] = {1, 2, 3, 4};
            fz_send_frame(p, WS_OP_PONG, true, pl, (size_t)f.len, m);
        } else {
            fail("a server frame of opcode %u", f.opcode);
        }
        off += (size_t)h + (size_t)f.len;
    }
    memmove(p->in, p->in + off, p->in_len - off);
    p->in_len -= off;
}

/* Reads what the server wrote to p; true when something came. */
static bool peer_read(struct env *v, struct peer *p)
{
    bool got = false;

    (void)v;
    while (p->fd >= 0) {
        if (p->in_cap - p->in_len < 4096) {
            p->in_cap = p->in_cap ? 2 * p->in_cap : 8192;
            p->in = xrealloc(p->in, p->in_cap);
        }
        ssize_t k = read(p->fd, p->in + p->in_len, p->in_cap - p->in_len);
        if (k > 0) {
            p->in_len += (size_t)k;
            got = true;
            continue;
        }
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        /* EOF or reset: the server closed its end */
        close(p->fd);
        p->fd = -1;
        p->gone = true;
        got = true;
    }
    if (got)
        peer_parse(p);
    if (p->server_closed && p->fd >= 0) {
        close(p->fd); /* the close handshake's end is not under test here */
        p->fd = -1;
        p->gone = true;
    }
    return got;
}

/* Runs the loop, the store's answers and the clients until nothing moves. */
static void settle(struct env *v)
{
    for (int round = 0, quiet = 0; quiet < 2; round++) {
        CHECK(round < 10000, "the loop never goes quiet");
        v->progress = false;
        for (int i = 0; i < 200 && store_inbox_pending(v->e->inbox) > 0; i++) {
            struct pollfd pfd = {.fd = store_inbox_fd(v->e->inbox), .events = POLLIN};
            poll(&pfd, 1, 50);
            v->progress = true;
            store_inbox_drain(v->e->inbox);
        }
        loop_run_once(v->w.loop, 0);
        bus_flush_all(v->srv.bus, 0);
        if (bus_drain(v->srv.bus, 0, on_bus_msg, v) > 0)
            v->progress = true;
        for (int i = 0; i < FZ_PEERS; i++)
            if (v->peers[i].fd >= 0 && peer_read(v, &v->peers[i]))
                v->progress = true;
        quiet = v->progress ? 0 : quiet + 1;
    }
}

/* Moves the clock by ms, stopping at each timer that may fall due. */
static void advance(struct env *v, uint64_t ms)
{
    struct loop *l = v->w.loop;
    uint64_t end = loop_now(l) + ms;

    while (loop_now(l) < end) {
        uint64_t next = wheel_next(loop_wheel(l));
        uint64_t t = MAX(loop_now(l) + 1, next);
        loop_set_clock(l, MIN(end, t));
        settle(v);
    }
}

/* ---- the program's steps ---- */

static void peer_open(struct env *v, struct prog *pr)
{
    struct peer *p = &v->peers[fz_u8(pr) % FZ_PEERS];
    int sv[2];
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(40000)};
    char req[512], query[256];
    uint8_t who = fz_u8(pr), dev = fz_u8(pr);

    if (p->fd >= 0)
        return; /* the slot is busy: a no-op, like an open that failed */
    peer_reset(p);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        fail("socketpair: %s", strerror(errno));
    p->fd = sv[0];
    p->slot = (int)(p - v->peers);
    p->user = fz_pick_user(v->peers, p, who, query, sizeof(query), dev);
    peer.sin_addr.s_addr = htonl(0x7f000001);
    httpd_accept(&v->nc, &v->w.pool, sv[1], (const struct sockaddr *)&peer);
    snprintf(req, sizeof(req),
             "GET /v1/ws%s HTTP/1.1\r\nHost: fuzz\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
             "Sec-WebSocket-Version: 13\r\n\r\n",
             query);
    peer_write(p, req, strlen(req));
    if (trace)
        fprintf(stderr, "-> [%d] open %s\n", p->slot, query);
}

static void peer_drop(struct env *v, struct prog *pr)
{
    struct peer *p = &v->peers[fz_u8(pr) % FZ_PEERS];

    (void)v;
    if (p->fd >= 0) {
        if (trace)
            fprintf(stderr, "-> [%d] drop\n", p->slot);
        close(p->fd);
        p->fd = -1;
        p->gone = true;
    }
}

static void peer_close_frame(struct env *v, struct prog *pr)
{
    struct peer *p = &v->peers[fz_u8(pr) % FZ_PEERS];
    static const uint16_t codes[] = {1000, 1001, 1002, 3000, 4999, 999, 1005, 5000};
    uint8_t b = fz_u8(pr), pl[2];
    static const uint8_t m[4] = {9, 8, 7, 6};

    (void)v;
    if (p->fd < 0 || !p->upgraded)
        return;
    pl[0] = (uint8_t)(codes[b % 8] >> 8);
    pl[1] = (uint8_t)codes[b % 8];
    if (trace)
        fprintf(stderr, "-> [%d] close frame %u%s\n", p->slot, codes[b % 8],
                (b & 8) ? " (empty)" : "");
    fz_send_frame(p, WS_OP_CLOSE, true, pl, (b & 8) ? 0 : 2, m);
}

static void step(struct env *v, struct prog *pr)
{
    uint8_t op = fz_u8(pr);

    switch (op % 16) {
    case 0:
    case 1:
        peer_open(v, pr);
        break;
    case 2:
        peer_drop(v, pr);
        break;
    case 3:
        peer_close_frame(v, pr);
        break;
    case 4: {
        uint64_t ms = fz_delay(fz_u8(pr));
        if (trace)
            fprintf(stderr, "-- clock +%llu ms\n", (unsigned long long)ms);
        advance(v, ms);
        break;
    }
    default: {
        struct peer *p = &v->peers[fz_u8(pr) % FZ_PEERS];
        static struct peer dummy; /* reads the same bytes, sends nothing */
        bool live = p->fd >= 0 && p->upgraded && !p->server_closed;
        fz_message(live ? p : &dummy, pr, op % 16 == 5, live);
        break;
    }
    }
    settle(v);
}

/* Every request that must be answered, on a connection still open after
 * the room batch window, was; so was every join (room_joined or an error). */
static void check_answered(struct env *v)
{
    for (int i = 0; i < FZ_PEERS; i++) {
        struct peer *p = &v->peers[i];
        if (p->fd < 0 || p->server_closed || !p->upgraded)
            continue;
        for (int k = 0; k < FZ_ROOMS; k++)
            CHECK(p->rooms[k].state != RM_JOINING, "a join of %s never answered", fz_rooms[k]);
        for (int k = 0; k < p->nrefs; k++) {
            const struct ref_rec *r = &p->refs[k];
            CHECK(r->answered || !fz_kind_answers(r->kind), "ref %s of a %s never answered", r->key,
                  fz_kind_name(r->kind));
        }
    }
}

/*
 * Found and fixed: bug 1, a join still waiting in its room's batch window
 * when the last local subscriber of the room closed left an rsub behind
 * for ever (engine_room.c drop_waiting(); regression seed
 * corpus/fuzz_engine/regress-rsub-leak).
 *
 * Bug 2: a connection whose user is hidden (invisible) joined a room
 * whose other members were hidden too or leaving: it got the documented
 * empty room of epoch 0, then the live deltas of the room's real epoch
 * from where it was (seq 3, say), which docs/protocol.md's client table
 * cannot apply (it adopts another epoch only at seq 1). A room that shows
 * nobody after a flush now starts a new epoch at seq 0 (room_publish.c
 * restart_if_empty()), so its next delta is seq 1 of an epoch nobody has
 * seen (regression seed corpus/fuzz_engine/regress-epoch0-gap).
 *
 * Found and fixed (their inputs are regression seeds in the corpus, and
 * their checks are always on): bug 3, a join with since {0,0} of a room
 * whose members are all hidden answered with the room's real epoch
 * (corpus/fuzz_engine/regress-hidden-epoch; answer_join() now answers
 * like the room that does not exist); bug 4, join, room_leave and join
 * again before the first answer came: the first join's state and
 * room_joined reached the new subscription (regress-stale-join; every
 * OP_RSTATE now carries its link's join number).
 */

static void check_drained(struct env *v)
{
    struct presence_stats ps;
    struct room_stats rs;
    struct engine *e = v->e;

    presence_get_stats(e->pres, &ps);
    room_get_stats(e->rooms, &rs);
    CHECK(ps.sessions == 0 && ps.users == 0, "%llu sessions of %llu users left",
          (unsigned long long)ps.sessions, (unsigned long long)ps.users);
    CHECK(rs.rooms == 0 && rs.members == 0, "%llu rooms with %llu members left",
          (unsigned long long)rs.rooms, (unsigned long long)rs.members);
    CHECK(e->clients.count == 0, "%zu clients left", e->clients.count);
    CHECK(e->watches.count == 0 && e->subs.count == 0, "watches left");
    CHECK(e->rsubs.count == 0 && e->lrooms.count == 0 && e->srooms.count == 0,
          "room subscriptions left: %zu %zu %zu", e->rsubs.count, e->lrooms.count, e->srooms.count);
    CHECK(e->expiries.count == 0, "deadline groups left");
    CHECK(v->w.pool.count == 0, "%zu connections left", v->w.pool.count);
}

/* libFuzzer's entropic schedule spends most of the time in its own
 * bookkeeping (UpdateFeatureFrequency) with this target's tens of
 * thousands of features, ten times what a run costs: it is off unless
 * the command line asks for it. */
static void entropic_off(int *argc, char ***argv)
{
    static char flag[] = "-entropic=0";
    char **v;

    for (int i = 1; i < *argc; i++)
        if (strncmp((*argv)[i], "-entropic=", 10) == 0)
            return;
    v = xcalloc((size_t)*argc + 2, sizeof(*v)); /* lives as long as the process */
    memcpy(v, *argv, (size_t)*argc * sizeof(*v));
    v[(*argc)++] = flag;
    *argv = v;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const struct route_list parts[] = {native_routes, engine_routes};

    entropic_off(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    trace = getenv("FUZZ_ENGINE_TRACE") != NULL;
    config_init(&cfg_template);
    native_register();
    routes = route_join(parts, ARRAY_SIZE(parts), &nroutes);
    store_sweep();
    atexit(store_drop);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct env v;
    struct prog pr = {data, size, 0};

    if (size < 1 || size > FZ_MAX_INPUT)
        return 0;
    memset(&v, 0, sizeof(v));
    env_open(&v, fz_u8(&pr));
    for (int n = 0; pr.pos < pr.size && n < FZ_MAX_STEPS; n++)
        step(&v, &pr);
    advance(&v, 200); /* past the room batch, short of every TTL and ping */
    check_answered(&v);
    for (int i = 0; i < FZ_PEERS; i++)
        peer_reset(&v.peers[i]);
    settle(&v);
    advance(&v, FZ_DRAIN_MS);
    check_drained(&v);
    env_close(&v);
    return 0;
}
