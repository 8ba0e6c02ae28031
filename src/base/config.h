/* SPDX-License-Identifier: MIT */
/*
 * config.h - the one table of settings that drives presenced.
 *
 * Every setting is one row of a table in config.c: name, type, bounds,
 * default, field, one line of help. The same table drives the file parser
 * (inih, "key = value"), "--key value" flags, PRESENCED_KEY environment
 * variables (key upper-cased, '-' -> '_'), `presenced --help`, and the
 * validation messages, which name the key and the allowed range.
 * Precedence: defaults < file (--config PATH or PRESENCED_CONFIG) <
 * environment < flags. The result is validated as a whole and immutable
 * once the server starts.
 */
#ifndef CONFIG_H
#define CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Upper bounds of settings that narrow fields elsewhere rely on, each
 * checked by a _Static_assert next to such a field. */
#define CONFIG_WORKERS_MAX             64      /* workers */
#define CONFIG_WS_PING_INTERVAL_MS_MAX 3600000 /* ws-ping-interval-ms */
#define CONFIG_WS_PONG_TIMEOUT_MS_MAX  600000  /* ws-pong-timeout-ms */

struct config {
    /* network */
    char *bind;                      /* listen address (IPv4 or IPv6 literal) */
    int port;                        /* listen port */
    int workers;                     /* worker threads; 0 = number of CPUs */
    int max_connections;             /* per process; over it new sockets are closed */
    int max_pending_per_address;     /* addrcap.h; 0 = no cap */
    int max_connections_per_address; /* addrcap.h; 0 = no cap */
    /* logging */
    char *log_level;  /* debug|info|warn|error */
    char *log_format; /* text|json */
    /* HTTP */
    char *static_dir;                  /* directory served at / ("" disables) */
    char *sdk_dir;                     /* directory served at /sdk/ ("" disables) */
    int64_t http_max_body_bytes;       /* request body limit -> 413 */
    int64_t http_header_timeout_ms;    /* incomplete headers -> close (slowloris) */
    int64_t http_keepalive_timeout_ms; /* idle keep-alive connection -> close */
    /* WebSocket */
    int64_t ws_max_message_bytes; /* reassembled message limit -> 1009 */
    int64_t ws_ping_interval_ms;  /* server ping after this much silence */
    int64_t ws_pong_timeout_ms;   /* no pong within this -> close */
    char *ws_allowed_origins;     /* comma-separated list; "*" allows any */
    /* SSE */
    int64_t sse_keepalive_ms; /* ":" comment interval on event streams */
    int64_t sse_retry_ms;     /* retry: hint sent to EventSource clients */
    /* output limits */
    int64_t client_output_soft_limit_bytes; /* over it for soft-ms -> close */
    int64_t client_output_soft_limit_ms;
    int64_t client_output_hard_limit_bytes; /* over it -> close at once */
    int64_t client_socket_sndbuf_bytes;     /* SO_SNDBUF; 0 = kernel autotuning */
    /* presence */
    char *auth;                    /* none (development) | jwt */
    char *jwt_hs256_secret;        /* HS256 shared secret, or "" */
    char *jwt_public_key_file;     /* RS256/ES256 PEM public key, or "" */
    int jwt_leeway_s;              /* clock skew on exp/nbf/iat */
    char *jwt_audience;            /* required aud, or "" */
    char *jwt_issuer;              /* required iss, or "" */
    int64_t auth_timeout_ms;       /* unauthenticated sockets closed after this */
    int64_t heartbeat_interval_ms; /* announced to clients */
    int64_t heartbeat_min_ms;      /* faster beats write nothing */
    int64_t session_ttl_ms;        /* no heartbeat for this long -> session ends */
    int64_t reconnect_grace_ms;    /* closed socket -> offline after this */
    int64_t idle_ms;               /* no activity -> away */
    int64_t presence_debounce_ms;  /* per-user event merge window */
    int max_sessions_per_user;     /* sessions one user may hold */
    int max_watch;                 /* users one connection may watch */
    int max_watch_per_user;        /* watch links one user holds over all its sockets */
    int max_streams_per_user;      /* event streams one user holds open at once */
    char *status_policy;           /* most-available|dnd-wins|most-recent */
    /* rooms */
    int room_max_members;          /* members per room */
    int max_rooms_per_connection;  /* rooms one connection may join */
    int msg_rate_ephemeral;        /* per connection per second, 0 = no budget */
    int msg_rate_patch;            /* ditto */
    int msg_rate_status;           /* ditto: status, custom, activity, leave, privacy */
    int msg_rate_watch;            /* ditto: watch, unwatch */
    int msg_rate_join;             /* ditto: join, room_leave */
    int msg_burst_seconds;         /* a budget holds this many seconds of its rate */
    int bus_backlog_max;           /* queued to one worker before senders pause */
    int64_t room_batch_ms;         /* delta batching window */
    int64_t watch_batch_ms;        /* list-tier watchers: one frame per window */
    int room_interval_members;     /* interval mode from this many members */
    int64_t room_interval_ms;      /* delta period in interval mode */
    int ephemeral_rate;            /* ephemeral messages per second per sender */
    int ephemeral_tick_deliveries; /* a room ticks from this many ephemeral deliveries/s */
    /* privacy */
    char *store;              /* SQLite path or postgresql:// URI */
    char *admin_api_key;      /* "" = admin API off */
    char *metrics_key;        /* GET /metrics bearer key ("" = none) */
    char *room_token_secret;  /* "" = no per-room subscription tokens */
    int query_rate;           /* ids per second per connection */
    int query_burst;          /* bucket size */
    int observer_query_rate;  /* ids per second per observer, all connections; 0 = off */
    int observer_query_burst; /* its bucket size */
    /* last seen */
    int64_t last_seen_flush_ms; /* its store batch period */
    /* cluster */
    char *redis;              /* "" = one embedded node (docs/cluster.md) */
    char *pusher_app;         /* Pusher apps "ID:KEY:SECRET[:opt=v...]" (,-separated); "" = none */
    char *pusher_webhook_url; /* Pusher apps' webhooks when the app names none; "" = none */
    char *webhook_url;        /* native Standard Webhooks endpoint; "" = none */
    char *webhook_secret;     /* its signing secret, "whsec_" + base64 */
    char *phoenix;            /* "on" | "off": the Phoenix and Supabase Realtime sockets */
    int64_t phoenix_longpoll_window_ms; /* a held long-poll GET; 1.5x: a session's idle end */
    int64_t phoenix_longpoll_max_queue; /* messages a long-poll session holds; more ends it */
    char *node_id;                      /* "" = the host name */
    int64_t redis_timeout_ms;           /* a slower command or connect: shard degraded */
    int64_t cluster_lease_ms;           /* a lease older than this: node dead */
    int64_t cluster_orphan_grace_ms;    /* then this long before its users are swept */
    int64_t cluster_linger_ms;          /* a bucket unwatched this long is unsubscribed */
    int64_t cluster_reassert_ms;        /* anti-entropy period, 0 = off */
    /* shutdown */
    int64_t shutdown_drain_ms; /* SIGTERM: time to flush before exit */
    int64_t drain_window_ms;   /* SIGTERM: reconnects spread over this window */
    int64_t restore_max_age_s; /* saved sessions older than this are not restored; 0 = off */
    /* testing */
    int test_silent_owners; /* 1: owners ignore HTTP reads (degraded answers) */
};

enum config_type { CONFIG_INT, CONFIG_INT64, CONFIG_STRING, CONFIG_ENUM };

/* One row of the settings table (exported for --help, docs and tests). */
struct config_def {
    const char *name; /* "ws-max-message-bytes" */
    enum config_type type;
    size_t offset;       /* offsetof(struct config, field) */
    int64_t min, max;    /* bounds for integers */
    const char *def;     /* default, as text */
    const char *choices; /* CONFIG_ENUM: "a|b|c" */
    const char *help;    /* one sentence: why you would change it */
};
extern const struct config_def config_defs[];
extern const size_t config_ndefs;

/* Fills every field with its default (strings are heap copies). */
void config_init(struct config *c);
/* Frees strings; NULL-safe fields. */
void config_release(struct config *c);
/* Applies file, environment and argv (argv[0] is skipped) over the current
 * values in that precedence order, then validates. Returns 0 on success,
 * 1 when --help or --version was handled (caller exits 0), -1 on error
 * with a message naming the key and allowed range in err. */
int config_load(struct config *c, int argc, char **argv, char *err, size_t errlen);
/* Sets one key from text (the common path of file, env and flags).
 * Returns 0 or -1 with a message in err. */
int config_set(struct config *c, const char *name, const char *value, char *err, size_t errlen);
/* Prints usage and every setting with default and help. */
void config_print_help(FILE *f);
/* Effective number of workers (resolves 0 to the CPU count, at least 1). */
int config_workers(const struct config *c);

#endif
