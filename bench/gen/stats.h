/*
 * stats.h - presence-bench: latency histograms and what is measured from
 * outside the servers (/proc): CPU time, RSS, kernel slab.
 *
 * A histogram has log-linear buckets of microseconds: exact below 64 µs,
 * then 32 buckets per power of two (about 3 % resolution) up to ~2^37 µs.
 * Histograms are plain arrays, so the harness can keep them in shared
 * memory and add those of several processes.
 */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HIST_BUCKETS (64 + 32 * 32)

struct hist {
    uint64_t n;   /* samples */
    uint64_t max; /* largest sample (µs) */
    uint64_t b[HIST_BUCKETS];
};

/* Adds one sample of v microseconds. */
void hist_add(struct hist *h, uint64_t v);

/* Adds every sample of src to dst. */
void hist_merge(struct hist *dst, const struct hist *src);

/* The value below which a fraction q (0..1) of the samples lie, in µs
 * (the bucket's upper bound); 0 for an empty histogram. */
double hist_quantile(const struct hist *h, double q);

/* Server processes sampled from outside. */
#define MAX_PIDS 8
#define MAX_THREADS 24
struct sysmon {
    int npids;
    pid_t pids[MAX_PIDS];
};

struct sample {
    uint64_t t_us;    /* now_us() of the sample */
    double cpu_s;     /* utime+stime of all pids and their threads */
    uint64_t rss_kb;  /* sum of VmRSS */
    uint64_t slab_kb; /* /proc/meminfo Slab (the whole machine) */
    uint64_t tcp_kb;  /* /proc/net/sockstat TCP mem: socket buffers (the whole machine) */
    int64_t writev;   /* presenced_writev_calls_total from /metrics; -1 = not read */
    int nthr;         /* threads of the servers seen (at most MAX_THREADS) */
    int tid[MAX_THREADS];
    double tcpu[MAX_THREADS]; /* CPU seconds per thread (schedstat) */
};

/* The largest CPU time one server thread used between samples a and b:
 * what limits a server whose work is split over threads. */
double busiest_thread_cpu_s(const struct sample *a, const struct sample *b);

/* The sum over its labels of counter `name` in presenced's /metrics on
 * 127.0.0.1:port, asked with "Authorization: Bearer key" (HTTP/1.0,
 * blocking, 2 s at most); -1 when it cannot be
 * read. Only the parent calls it, and only at phase boundaries. */
int64_t scrape_metric(int port, const char *key, const char *name);

/* Parses a comma-separated pid list; dies on a bad one. */
void sysmon_init(struct sysmon *m, const char *pids);

/* Reads the current values. A pid that is gone counts 0. */
void sysmon_read(const struct sysmon *m, struct sample *s);

/* CPU seconds this process (and its reaped children, when children is
 * set) has used. */
double self_cpu_s(int children);

#endif
