/*
 * main.c - presence-bench: the command line, the child processes and the
 * parent's measuring loop.
 *
 *   presence-bench WORKLOAD --target native|sio|redis|sink --port N
 *                  [--server-pids P1,P2] [--KEY VALUE]...
 *
 * Prints one JSON object per line (per measured step) on stdout; progress
 * and errors go to stderr. Exit status: 0 when the run completed, 1 when a
 * child failed or timed out, 2 on bad usage.
 */
#include "bench.h"
#include "pusher.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

void sink_main(int port, double seconds);

static void usage(void)
{
    fprintf(
        stderr,
        "usage: presence-bench w1|w2|w3|w4|w5|w6|w8|w8s --target native|sio|redis|sink|pusher|phoenix --port N\n"
        "         [--server-pids P,...] [--procs N] [--conns N] [--rooms N] [--room-size N]\n"
        "         [--rates R1,R2,...] [--rate R] [--step-s S] [--hold-s S] [--hb-ms MS]\n"
        "         [--ttl-ms MS] [--victims N] [--churners N] [--jitter-ms MS]\n"
        "         [--inflight N] [--pad BYTES] [--secret S] [--label TEXT] [--timeout-s S]\n"
        "         [--ports P1,P2 (child k uses port k %% n)] [--senders N (w5)] [--warmup-s S (w5, w6)]\n"
        "         [--probes N --probe-rate R (w6)] [--src-gen G (source 127.0.0.(2+k+8G))]\n"
        "         [--pusher-app ID:KEY:SECRET (--target pusher: w4, w5)] (--target phoenix: w5)\n"
        "       presence-bench sink --port N --seconds S   (a null server)\n");
    exit(2);
}

static enum target target_of(const char *s)
{
    if (!strcmp(s, "native"))
        return T_NATIVE;
    if (!strcmp(s, "sio"))
        return T_SIO;
    if (!strcmp(s, "redis"))
        return T_REDIS;
    if (!strcmp(s, "sink"))
        return T_SINK;
    if (!strcmp(s, "pusher"))
        return T_PUSHER;
    if (!strcmp(s, "phoenix"))
        return T_PHOENIX;
    die("unknown target %s", s);
}

static void parse_rates(struct params *p, const char *s)
{
    p->nrates = 0;
    while (*s && p->nrates < MAX_RATES) {
        char *end;
        p->rates[p->nrates++] = strtod(s, &end);
        s = *end == ',' ? end + 1 : end;
        if (end == s && *s)
            die("bad --rates");
    }
}

static void parse_args(struct params *p, int argc, char **argv)
{
    for (int i = 2; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v || strncmp(k, "--", 2))
            usage();
        k += 2;
#define NUM(name, field)    \
    if (!strcmp(k, name)) { \
        p->field = atof(v); \
        continue;           \
    }
        NUM("port", port) NUM("procs", procs) NUM("conns", conns) NUM("rooms", rooms);
        NUM("room-size", room_size) NUM("rate", rate) NUM("step-s", step_s);
        NUM("hold-s", hold_s) NUM("hb-ms", hb_ms) NUM("ttl-ms", ttl_ms);
        NUM("victims", victims) NUM("churners", churners) NUM("jitter-ms", jitter_ms);
        NUM("inflight", inflight) NUM("timeout-s", timeout_s);
        NUM("senders", senders) NUM("probes", probes) NUM("probe-rate", probe_rate);
        NUM("warmup-s", warmup_s);
        NUM("src-gen", src_gen);
#undef NUM
        if (!strcmp(k, "target")) {
            p->target = target_of(v);
            p->target_name = v;
        } else if (!strcmp(k, "rates")) {
            parse_rates(p, v);
        } else if (!strcmp(k, "ports")) {
            for (const char *s = v; *s && p->nports < MAX_PROCS;) {
                char *end;
                p->ports[p->nports++] = (int)strtol(s, &end, 10);
                if (end == s)
                    die("bad --ports");
                s = *end == ',' ? end + 1 : end;
            }
            p->port = p->ports[0];
        } else if (!strcmp(k, "server-pids")) {
            p->server_pids = v;
        } else if (!strcmp(k, "pad")) {
            proto_pad = atoi(v);
        } else if (!strcmp(k, "pusher-app")) {
            p->pusher_app = v;
        } else if (!strcmp(k, "secret")) {
            p->secret = v;
        } else if (!strcmp(k, "label")) {
            p->label = v;
        } else {
            fprintf(stderr, "presence-bench: unknown option --%s\n", k);
            usage();
        }
    }
}

static void child_main(struct params *p, const struct workload *w, struct shm *m, int shard)
{
    static struct ctx x;
    X = &x;
    x.p = p;
    x.shard = shard;
    x.shm = m;
    x.res = &m->sh[shard];
    x.gen = p->src_gen;
    srandom((unsigned)(getpid() * 2654435761u));
    int port = p->nports ? p->ports[shard % p->nports] : p->port;
    net_init(&x.net, p->target == T_SINK ? T_NATIVE : p->target, port, p->secret);
    if (p->target == T_PUSHER)
        pusher_use_app(&x.net, p->pusher_app ? p->pusher_app : "");
    w->child(&x);
    net_flush(&x.net);
    x.res->rss_kb = 0;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            x.res->rss_kb = strtoull(line + 6, NULL, 10);
    if (f)
        fclose(f);
    _exit(0);
}

/* presenced's writev count (its /metrics), or -1 for other targets. */
static int64_t server_writev(const struct params *p)
{
    if ((p->target != T_NATIVE && p->target != T_PUSHER && p->target != T_PHOENIX) ||
        p->nports > 1)
        return -1;
    return scrape_metric(p->port, p->secret, "presenced_writev_calls_total");
}

/* Waits for every child to arrive at each phase, sampling the servers;
 * returns 0 on success, -1 if a child died or the run timed out. */
static int parent_loop(struct params *p, const struct workload *w, struct shm *m, pid_t *kids)
{
    struct sysmon mon;
    sysmon_init(&mon, p->server_pids);
    uint64_t deadline = now_us() + (uint64_t)(p->timeout_s * 1e6);
    sysmon_read(&mon, &m->at[0]);
    m->at[0].writev = server_writev(p);
    int alive = p->procs;
    int phases = w->phases + w->per_rate * p->nrates;
    for (int k = 1; k <= phases; k++) {
        uint64_t peak = 0, tpeak = 0;
        while (m->arrived[k] < p->procs) {
            struct sample s;
            sysmon_read(&mon, &s);
            if (s.rss_kb > peak)
                peak = s.rss_kb;
            if (s.tcp_kb > tpeak)
                tpeak = s.tcp_kb;
            int st;
            pid_t d = waitpid(-1, &st, WNOHANG);
            if (d > 0) {
                alive--;
                fprintf(stderr, "presence-bench: child %d exited early (status %d) at phase %d\n",
                        (int)d, st, k);
                return -1;
            }
            if (now_us() > deadline) {
                fprintf(stderr, "presence-bench: timed out at phase %d of %s\n", k, w->name);
                return -1;
            }
            usleep(20000);
        }
        sysmon_read(&mon, &m->at[k]);
        m->at[k].writev = server_writev(p);
        m->peak_rss_kb[k] = peak > m->at[k].rss_kb ? peak : m->at[k].rss_kb;
        m->peak_tcp_kb[k] = tpeak > m->at[k].tcp_kb ? tpeak : m->at[k].tcp_kb;
        __atomic_store_n(&m->release, k, __ATOMIC_RELEASE);
    }
    for (int i = 0; i < alive; i++) {
        int st;
        if (waitpid(-1, &st, 0) > 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
            return -1;
    }
    (void)kids;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    struct params p = {.procs = 1,
                       .target = T_NATIVE,
                       .target_name = "native",
                       .step_s = 3,
                       .hold_s = 5,
                       .inflight = 200,
                       .timeout_s = 120,
                       .rate = 1000,
                       .room_size = 100,
                       .rooms = 1,
                       .conns = 100};
    p.workload = argv[1];
    parse_args(&p, argc, argv);
    if (!strcmp(p.workload, "sink")) {
        sink_main(p.port, p.hold_s);
        return 0;
    }
    const struct workload *w = workload_find(p.workload);
    if (!w || !p.port || p.procs < 1 || p.procs > MAX_PROCS)
        usage();
    if (p.target == T_PUSHER && strcmp(p.workload, "w4") && strcmp(p.workload, "w5"))
        die("--target pusher runs w4 and w5 only");
    if (p.target == T_PHOENIX && strcmp(p.workload, "w5"))
        die("--target phoenix runs w5 only");
    signal(SIGPIPE, SIG_IGN);
    /* two slots per user (w6), users: every count a workload may use */
    size_t slots =
        2 * ((size_t)(p.conns > p.rooms * p.room_size ? p.conns : p.rooms * p.room_size) +
             (size_t)p.rooms + (size_t)p.victims + (size_t)p.churners + (size_t)p.probes + 1024);
    size_t sz = sizeof(struct shm) + slots * sizeof(uint64_t);
    struct shm *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        die_errno("mmap");
    pid_t kids[MAX_PROCS];
    for (int i = 0; i < p.procs; i++) {
        kids[i] = fork();
        if (kids[i] < 0)
            die_errno("fork");
        if (kids[i] == 0)
            child_main(&p, w, m, i);
    }
    int rc = parent_loop(&p, w, m, kids);
    if (rc < 0) {
        for (int i = 0; i < p.procs; i++)
            kill(kids[i], SIGKILL);
        while (wait(NULL) > 0)
            ;
        return 1;
    }
    w->report(&p, m);
    return 0;
}
