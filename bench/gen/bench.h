/*
 * bench.h - presence-bench: the harness every workload runs on.
 *
 * The parent process forks `procs` children and only measures: it samples
 * the servers (/proc) at every phase boundary and every 100 ms in between
 * (peak RSS), and prints the results. Each child owns the connections
 * whose user index i has i % procs == its shard, on its own epoll loop,
 * from its own source address 127.0.0.(2 + shard + 8 * generation).
 *
 * Workloads are written as straight-line code in the children: connect,
 * wait, publish for a while, ... with phase(x, k) as the barrier between
 * steps: a child arrives at phase k, keeps serving its sockets, and goes on
 * when every child has arrived and the parent has taken its sample k.
 * Children add their results into their own slot of a shared mapping; the
 * parent merges the slots.
 */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include "net.h"
#include "proto.h"
#include "stats.h"

#define MAX_PROCS  8
#define MAX_PHASES 40
#define MAX_STEPS  8
#define MAX_RATES  MAX_STEPS
#define MAX_MSGS   65536

/* Every knob of every workload; run.sh sets them (bench/workloads.sh). */
struct params {
    const char *workload; /* w1 ... w8, sink */
    enum target target;
    const char *target_name;
    const char *label;       /* free text copied into the output */
    const char *secret;      /* HS256 secret (native), presenced's metrics key */
    const char *pusher_app;  /* --target pusher: ID:KEY:SECRET of the server's pusher-app */
    const char *server_pids; /* comma-separated pids to sample */
    int port;
    int procs;     /* generator processes */
    int conns;     /* connections (w1, w2, w3, w8 storm) */
    int rooms;     /* rooms */
    int room_size; /* members per room (w4, w5, w8) */
    int nrates;    /* w4: publish rates per room (per second) */
    double rates[MAX_RATES];
    double rate;      /* w3 heartbeats/s, w5 cursors/s, w6 ops/s, w8 patches/s */
    double step_s;    /* measured seconds per step */
    double warmup_s;  /* w5, w6: seconds of load before the measured step */
    double hold_s;    /* w1/w2: hold time */
    int hb_ms;        /* heartbeat period of idle connections (0 = none) */
    int ttl_ms;       /* w6: the server's session TTL */
    int victims;      /* w6: silent clients; w8: slow consumers */
    int churners;     /* w6 */
    int jitter_ms;    /* w8: reconnect spread */
    int inflight;     /* w2: connects in flight per process */
    double timeout_s; /* whole run */
    int nports;       /* --ports P1,P2: child k connects to ports[k % nports] */
    int ports[MAX_PROCS];
    int senders;       /* w5: 0 = every member in turn; N = N fixed senders at rate/N each */
    int probes;        /* w6: members of one extra room timing cursors during the expiry */
    double probe_rate; /* w6: probe cursors per second in all */
    int src_gen;       /* first source address generation: 127.0.0.(2 + shard + 8 * src_gen) */
};

/* Per-child results, in shared memory. */
enum counter {
    C_READY,    /* protocol hellos */
    C_JOINED,   /* joins answered */
    C_DELIV,    /* deliveries counted */
    C_GAP,      /* ids skipped (lost or superseded) */
    C_DUP,      /* ids seen twice or out of order */
    C_MISSING,  /* final value of a publisher never delivered */
    C_SENT,     /* publishes / cursors / heartbeats sent */
    C_ERR,      /* error messages from the server */
    C_CLOSED,   /* unexpected closes */
    C_CONNFAIL, /* failed connects/handshakes */
    C_PONG,     /* barrier replies */
    C_MJOIN,    /* member joins seen (w6) */
    C_MLEAVE,   /* member leaves seen (w6) */
    C_C4008,    /* closes with 4008 */
    C_EXPIRED,  /* closes with 4000 (w6) */
    C_RESUMED,  /* w8 storm: sessions resumed */
    C_LATE,     /* w8 storm: reconnects retried */
    C_VLEAVE,   /* w6: victims seen leaving */
    C_N
};

struct shard {
    uint64_t c[MAX_STEPS][C_N];  /* counters per step */
    struct hist lat[MAX_STEPS];  /* delivery latency per step, µs */
    struct hist lat2[MAX_STEPS]; /* second latency (handshake, leave, offline) */
    double cpu[MAX_PHASES + 1];  /* this child's CPU time at each phase */
    uint64_t rss_kb;             /* this child's VmRSS at the end */
    int failed;                  /* 1: the child gave up (timeout) */
};

struct shm {
    volatile int arrived[MAX_PHASES + 1];
    volatile int release;
    struct sample at[MAX_PHASES + 1];     /* server sample at each phase */
    uint64_t peak_rss_kb[MAX_PHASES + 1]; /* peak server RSS before each phase */
    uint64_t peak_tcp_kb[MAX_PHASES + 1]; /* peak TCP buffer memory before each phase */
    struct shard sh[MAX_PROCS];
    uint64_t msg_t[MAX_MSGS];    /* w5: send time per cursor id */
    uint64_t msg_last[MAX_MSGS]; /* w5: arrival time at the last recipient */
    uint64_t user_u64[];         /* per user: last id sent / last join time */
};

/* One child's view. */
struct ctx {
    struct params *p;
    int shard;
    struct net net;
    struct shm *shm;
    struct shard *res;
    struct conn *conns; /* local connections, conns[k] is user shard + k * procs */
    uint32_t nlocal;
    int step;                                  /* current step: counters go to res->c[step] */
    int gen;                                   /* connection generation (source address) */
    void (*tick)(struct ctx *x, uint64_t now); /* called every loop iteration */
    void *w;                                   /* the workload's own state */
    /* keep-alive heartbeats of every open connection when p->hb_ms > 0 */
    uint64_t hb_next;
    uint32_t hb_pos;
    int hb_on;
};

extern struct ctx *X; /* the child's context (callbacks reach it here) */

#define CNT(x, k) ((x)->res->c[(x)->step][(k)])

/* Local index of a user of this shard. */
static inline uint32_t local_of(const struct ctx *x, uint32_t user)
{
    return user / (uint32_t)x->p->procs;
}

/* Connects every local connection in [from, to) (local indexes) with at
 * most p->inflight pending handshakes; returns when all are ready or
 * failed, or at the deadline. Returns the number ready. query_of may be
 * NULL; else it writes the query string for a connection. */
uint32_t connect_range(struct ctx *x, uint32_t from, uint32_t to, uint64_t deadline,
                       void (*query_of)(struct ctx *x, struct conn *c, char *q, size_t cap));

/* Runs the loop until cond(x) holds or the deadline passes; returns 1 if
 * it held. cond may be NULL (run until the deadline). */
int run_until(struct ctx *x, uint64_t deadline, int (*cond)(struct ctx *x));

/* Arrives at phase k and serves the sockets until the parent releases it. */
void phase(struct ctx *x, int k);

/* Sends heartbeats from every ready connection every p->hb_ms, spread
 * evenly; called from run loops when x->hb_on. */
void hb_tick(struct ctx *x, uint64_t now);

/* The workloads: child bodies and parent reports. */
struct workload {
    const char *name;
    int phases; /* the child calls phase(1..phases + per_rate * nrates) */
    int per_rate;
    void (*child)(struct ctx *x);                    /* runs in every child */
    void (*report)(struct params *p, struct shm *m); /* prints JSON lines */
};

const struct workload *workload_find(const char *name);

/* Shared by the workloads (w_conn.c). */
extern const struct app_ops base_ops;
void alloc_conns(struct ctx *x, uint32_t total);
int wait_count(struct ctx *x, enum counter k, uint64_t n, double timeout_s);
void join_all(struct ctx *x);
void out_errors(struct params *p, struct shm *m, int step);

/* JSON output helpers (stdout, one object per line). */
void out_begin(struct params *p, const char *workload, int step);
void out_num(const char *key, double v);
void out_str(const char *key, const char *v);
void out_end(void);

/* Sums of the children's counters and histograms of one step. */
uint64_t sum_c(struct shm *m, int procs, int step, enum counter k);
void sum_hist(struct shm *m, int procs, int step, int second, struct hist *out);
/* The children's CPU between phases a and b. */
double gen_cpu(struct shm *m, int procs, int a, int b);
/* Latency fields p50/p95/p99/max in ms under prefix. */
void out_hist(const char *prefix, const struct hist *h);

#endif
