/*
 * stats.c - presence-bench: histograms and /proc sampling. See stats.h.
 *
 * CPU time is read from /proc/PID/task/TID/schedstat (nanoseconds on the
 * CPU per thread, summed over the threads), which is exact where the
 * 10 ms ticks of /proc/PID/stat's utime+stime are coarse; when schedstat
 * is missing the stat ticks are used.
 */
#include "stats.h"
#include "util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static unsigned bucket_of(uint64_t v)
{
    if (v < 64)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v) - 5u; /* v >> e is in [32, 64) */
    unsigned idx = 64u + (e - 1u) * 32u + (unsigned)((v >> e) - 32u);
    return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

static double bucket_top(unsigned i)
{
    if (i < 64)
        return (double)i;
    unsigned e = (i - 64u) / 32u + 1u;
    unsigned sub = (i - 64u) % 32u + 32u;
    return (double)(((uint64_t)sub + 1u) << e) - 1.0;
}

void hist_add(struct hist *h, uint64_t v)
{
    h->b[bucket_of(v)]++;
    h->n++;
    if (v > h->max)
        h->max = v;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        dst->b[i] += src->b[i];
    dst->n += src->n;
    if (src->max > dst->max)
        dst->max = src->max;
}

double hist_quantile(const struct hist *h, double q)
{
    if (!h->n)
        return 0;
    uint64_t want = (uint64_t)(q * (double)h->n);
    if (want >= h->n)
        want = h->n - 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen > want) {
            double top = bucket_top(i);
            return top > (double)h->max ? (double)h->max : top;
        }
    }
    return (double)h->max;
}

void sysmon_init(struct sysmon *m, const char *pids)
{
    memset(m, 0, sizeof *m);
    while (pids && *pids) {
        char *end;
        long p = strtol(pids, &end, 10);
        if (end == pids || p <= 0 || m->npids == MAX_PIDS)
            die("bad --server-pids %s", pids);
        m->pids[m->npids++] = (pid_t)p;
        pids = *end == ',' ? end + 1 : end;
    }
}

/* Sum of the first field of every thread's schedstat, in ns; -1 if none.
 * Each thread's time is also recorded in s (when there is room). */
static double schedstat_cpu(pid_t pid, struct sample *s)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    double ns = 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p2[320];
        snprintf(p2, sizeof p2, "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
        FILE *f = fopen(p2, "r");
        if (!f)
            continue;
        unsigned long long v;
        if (fscanf(f, "%llu", &v) == 1) {
            ns += (double)v;
            found = 1;
            if (s->nthr < MAX_THREADS) {
                s->tid[s->nthr] = atoi(e->d_name);
                s->tcpu[s->nthr++] = (double)v / 1e9;
            }
        }
        fclose(f);
    }
    closedir(d);
    return found ? ns / 1e9 : -1;
}

static double stat_cpu(pid_t pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    char *p = strrchr(line, ')');
    unsigned long long ut = 0, st = 0;
    /* fields after ")": state(3) ... utime(14) stime(15) */
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
        return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    return 0;
}

static uint64_t status_kb(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, key, kl)) {
            v = strtoull(line + kl, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

void sysmon_read(const struct sysmon *m, struct sample *s)
{
    memset(s, 0, sizeof *s);
    s->t_us = now_us();
    for (int i = 0; i < m->npids; i++) {
        double c = schedstat_cpu(m->pids[i], s);
        s->cpu_s += c >= 0 ? c : stat_cpu(m->pids[i]);
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/status", (int)m->pids[i]);
        s->rss_kb += status_kb(path, "VmRSS:");
    }
    s->slab_kb = status_kb("/proc/meminfo", "Slab:");
    FILE *f = fopen("/proc/net/sockstat", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        const char *m = strstr(line, " mem ");
        if (!strncmp(line, "TCP:", 4) && m)
            s->tcp_kb = strtoull(m + 5, NULL, 10) * ((uint64_t)sysconf(_SC_PAGESIZE) / 1024u);
    }
    if (f)
        fclose(f);
}

double busiest_thread_cpu_s(const struct sample *a, const struct sample *b)
{
    double best = 0;
    for (int i = 0; i < b->nthr; i++) {
        double before = 0;
        for (int j = 0; j < a->nthr; j++)
            if (a->tid[j] == b->tid[i])
                before = a->tcpu[j];
        if (b->tcpu[i] - before > best)
            best = b->tcpu[i] - before;
    }
    return best;
}

double self_cpu_s(int children)
{
    struct rusage ru;
    getrusage(children ? RUSAGE_CHILDREN : RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int64_t scrape_metric(int port, const char *key, const char *name)
{
    static char body[1 << 20];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {.tv_sec = 2};
    char req[512];
    int rn = snprintf(req, sizeof req, "GET /metrics HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n",
                      key && *key ? key : "-");
    size_t len = 0, nlen = strlen(name);
    int64_t sum = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        rn < 0 || (size_t)rn >= sizeof req || write(fd, req, (size_t)rn) != (ssize_t)rn) {
        close(fd);
        return -1;
    }
    for (ssize_t r; len < sizeof body - 1 && (r = read(fd, body + len, sizeof body - 1 - len)) > 0;)
        len += (size_t)r;
    close(fd);
    body[len] = '\0';
    if (strncmp(body, "HTTP/1.", 7) != 0 || strncmp(body + 9, "200", 3) != 0)
        return -1;
    /* Sample lines: name{labels} value, or name value. */
    for (const char *l = body; (l = strstr(l, name)) != NULL; l += nlen) {
        const char *v = l + nlen;
        if (l != body && l[-1] != '\n')
            continue;
        if (*v == '{')
            v = strchr(v, '}');
        if (!v || (v[*v == '}'] != ' '))
            continue;
        sum += strtoll(v + 1 + (*v == '}'), NULL, 10);
    }
    return sum;
}
