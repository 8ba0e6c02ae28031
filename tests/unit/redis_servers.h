/* SPDX-License-Identifier: MIT */
/*
 * redis_servers.h - test helper: real redis-server processes on free
 * loopback ports, started and stopped by the test itself.
 *
 * rs_start() forks/execs `redis-server --port P --save '' --appendonly no
 * --daemonize no` (plus the cluster options for a Cluster node) in a
 * fresh temporary directory and waits for its PING; rs_stop() ends it and
 * removes the directory. rs_cluster() joins nodes into a Cluster with
 * `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes` and
 * waits for cluster_state:ok on each. rs_cli() runs redis-cli and returns
 * its output. Every started process is also killed at exit, so a failed
 * assertion leaves nothing running. A missing redis-server fails (the
 * caller asserts on the return value); scripts/setup.sh installs it.
 * Header-only (static functions); every wait is bounded.
 */
#ifndef REDIS_SERVERS_H
#define REDIS_SERVERS_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RS_MAX 16

struct rs_server {
    pid_t pid;    /* 0 when not running */
    int port;     /* the client port; the Cluster bus is port + 10000 */
    bool cluster; /* started with --cluster-enabled yes */
    char dir[64]; /* its temporary directory */
};

static pid_t rs_pids[RS_MAX];

static void rs_kill_all(void)
{
    for (int i = 0; i < RS_MAX; i++)
        if (rs_pids[i] > 0) {
            kill(rs_pids[i], SIGCONT);
            kill(rs_pids[i], SIGKILL);
            waitpid(rs_pids[i], NULL, 0);
            rs_pids[i] = 0;
        }
}

static void rs_track(pid_t pid, pid_t old)
{
    static bool registered;

    if (!registered) {
        atexit(rs_kill_all);
        registered = true;
    }
    for (int i = 0; i < RS_MAX; i++)
        if (rs_pids[i] == old) {
            rs_pids[i] = pid;
            return;
        }
}

static void rs_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static bool rs_port_free(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    bool ok;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

/* A port in 20000..50000 that is free, with its Cluster bus port. */
static int rs_pick_port(void)
{
    static unsigned seed;

    if (!seed)
        seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    for (int i = 0; i < 200; i++) {
        int p = 20000 + (int)(rand_r(&seed) % 30000);

        if (rs_port_free(p) && rs_port_free(p + 10000))
            return p;
    }
    return -1;
}

/* Whether a PING on port gets +PONG. */
static bool rs_ping(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {0, 200000};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char b[16] = {0};
    bool ok = false;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && write(fd, "PING\r\n", 6) == 6 &&
        read(fd, b, sizeof(b) - 1) > 0)
        ok = strncmp(b, "+PONG", 5) == 0;
    close(fd);
    return ok;
}

/* Starts (or restarts, on the same port and directory) s. Returns 0, or -1
 * when redis-server is missing or does not answer within 5 s. */
static int rs_spawn(struct rs_server *s)
{
    char port[16], conf[96], logf[96];
    pid_t pid, old = s->pid;

    snprintf(port, sizeof(port), "%d", s->port);
    snprintf(conf, sizeof(conf), "%s/nodes.conf", s->dir);
    snprintf(logf, sizeof(logf), "%s/redis.log", s->dir);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (s->cluster)
            execlp("redis-server", "redis-server", "--bind", "127.0.0.1", "--port", port, "--save",
                   "", "--appendonly", "no", "--daemonize", "no", "--dir", s->dir, "--logfile",
                   logf, "--cluster-enabled", "yes", "--cluster-config-file", conf,
                   "--cluster-node-timeout", "5000", (char *)NULL);
        else
            execlp("redis-server", "redis-server", "--bind", "127.0.0.1", "--port", port, "--save",
                   "", "--appendonly", "no", "--daemonize", "no", "--dir", s->dir, "--logfile",
                   logf, (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    rs_track(pid, old);
    for (int i = 0; i < 100; i++) {
        int st;

        if (rs_ping(s->port))
            return 0;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            rs_track(0, pid);
            s->pid = 0;
            return -1; /* exited: not installed, or the port was taken */
        }
        rs_sleep_ms(50);
    }
    return -1;
}

static int rs_start(struct rs_server *s, bool cluster)
{
    memset(s, 0, sizeof(*s));
    s->cluster = cluster;
    snprintf(s->dir, sizeof(s->dir), "/tmp/presenced-redis-XXXXXX");
    if (!mkdtemp(s->dir))
        return -1;
    for (int tries = 0; tries < 5; tries++) {
        s->port = rs_pick_port();
        if (s->port > 0 && rs_spawn(s) == 0)
            return 0;
    }
    return -1;
}

/* Sends sig (SIGSTOP, SIGCONT, ...) to the server. */
static void rs_signal(struct rs_server *s, int sig)
{
    if (s->pid > 0)
        kill(s->pid, sig);
}

/* Kills the server at once (SIGKILL), as a crash. */
static void rs_crash(struct rs_server *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGCONT);
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    rs_track(0, s->pid);
    s->pid = 0;
}

static void rs_stop(struct rs_server *s)
{
    char cmd[128];

    rs_crash(s);
    if (s->dir[0]) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "redis_servers: could not remove %s\n", s->dir);
        s->dir[0] = '\0';
    }
}

/* Runs `redis-cli -p PORT ARGS` (ARGS from fmt) and puts its output,
 * trailing newlines removed, in out. Returns the exit status. */
static int rs_cli(char *out, size_t outlen, int port, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int rs_cli(char *out, size_t outlen, int port, const char *fmt, ...)
{
    char cmd[1024];
    size_t n, len = 0;
    va_list ap;
    FILE *f;

    n = (size_t)snprintf(cmd, sizeof(cmd), "redis-cli -p %d ", port);
    va_start(ap, fmt);
    vsnprintf(cmd + n, sizeof(cmd) - n, fmt, ap);
    va_end(ap);
    f = popen(cmd, "r");
    if (!f)
        return -1;
    if (out && outlen) {
        len = fread(out, 1, outlen - 1, f);
        while (len && (out[len - 1] == '\n' || out[len - 1] == '\r'))
            len--;
        out[len] = '\0';
    } else {
        char sink[256];

        while (fread(sink, 1, sizeof(sink), f) > 0)
            ;
    }
    return pclose(f);
}

/* Joins n Cluster nodes into one Cluster of n masters and waits (10 s at
 * most) until every node says cluster_state:ok. Returns 0 or -1. */
static int rs_cluster(struct rs_server *s, int n)
{
    char cmd[512], out[2048];
    size_t len;

    len = (size_t)snprintf(cmd, sizeof(cmd), "redis-cli --cluster create");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(cmd + len, sizeof(cmd) - len, " 127.0.0.1:%d", s[i].port);
    snprintf(cmd + len, sizeof(cmd) - len, " --cluster-replicas 0 --cluster-yes >/dev/null");
    if (system(cmd) != 0)
        return -1;
    for (int t = 0; t < 200; t++) {
        int ok = 0;

        for (int i = 0; i < n; i++)
            if (rs_cli(out, sizeof(out), s[i].port, "cluster info") == 0 &&
                strstr(out, "cluster_state:ok"))
                ok++;
        if (ok == n)
            return 0;
        rs_sleep_ms(50);
    }
    return -1;
}

#endif
