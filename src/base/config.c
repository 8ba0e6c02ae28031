/* SPDX-License-Identifier: MIT */
/*
 * config.c - the settings table and the loaders that apply it.
 *
 * config_defs[] is the one source of truth: a row per field of struct
 * config. The file parser, PRESENCED_* environment variables, --flags,
 * --help and every validation message read it, and test_config.c checks
 * that presenced.conf lists exactly its keys and defaults.
 *
 * File syntax (parsed by inih): one "key = value" per line. A line whose
 * first non-blank character is '#' or ';' is a comment, and " ;" ends a
 * value early; '#' after a value is part of the value. A value may be
 * wrapped in double quotes, so `static-dir = ""` is the empty string.
 * [sections] are rejected: the keys are unique without them, and a section
 * the server ignored would silently do nothing. Leading blanks are ignored,
 * so there are no continuation lines. A line holds at most 197 characters
 * (inih's fixed buffer); longer ones are rejected, never truncated.
 * Integers are plain decimal: no sign other than '-', no hex, no suffixes.
 *
 * Nothing here logs or exits: errors go back in the caller's buffer.
 */
#include "config.h"

#include "util.h"

#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONFIG_VERSION    "0.1.0"
#define CONFIG_ENV_PREFIX "PRESENCED_"
#define CONFIG_NAME_MAX   64 /* longest key plus the prefix fits in a buffer of this */
#define HELP_COLUMNS      79 /* --help wraps text before this column */

/* ---- the table ---- */

/* The field's offset, or a compile error when its type is not T. */
#define FIELD(f, T) _Generic(((struct config *)0)->f, T : offsetof(struct config, f))

/* clang-format off */
#define ROW_INT(name, f, lo, hi, def, help) \
    {name, CONFIG_INT, FIELD(f, int), lo, hi, #def, NULL, help}
#define ROW_INT64(name, f, lo, hi, def, help) \
    {name, CONFIG_INT64, FIELD(f, int64_t), lo, hi, #def, NULL, help}
#define ROW_STRING(name, f, def, help) \
    {name, CONFIG_STRING, FIELD(f, char *), 0, 0, def, NULL, help}
#define ROW_ENUM(name, f, choices, def, help) \
    {name, CONFIG_ENUM, FIELD(f, char *), 0, 0, def, choices, help}
/* clang-format on */

/*
 * One row per field of struct config, in its order. Adding a setting is a
 * field there and a row here; presenced.conf must then gain the row's help
 * and default (test_config checks it). Help says why you would change it.
 */
const struct config_def config_defs[] = {
    /* network */
    ROW_STRING("bind", bind, "127.0.0.1",
               "Listen address, an IPv4 or IPv6 literal; set 0.0.0.0 or :: to accept connections "
               "from other hosts."),
    ROW_INT("port", port, 0, 65535, 7400,
            "TCP port to listen on; change it when 7400 is taken or to run several servers on one "
            "host (0 picks a free port, logged at start)."),
    ROW_INT("workers", workers, 0, CONFIG_WORKERS_MAX, 0,
            "Worker threads, each with its own event loop and listener (0 = one per CPU); lower it "
            "to leave cores to other processes."),
    ROW_INT("max-connections", max_connections, 1, 1000000, 19000,
            "Client connections the process holds at once, beyond which new sockets are closed; "
            "keep it below the open-file limit (ulimit -n)."),
    ROW_INT("max-pending-per-address", max_pending_per_address, 0, 1000000, 256,
            "Connections one client address (IPv4, or IPv6 /64) may hold before its first request "
            "is complete, beyond which its new sockets are closed at once (0 = no cap); keeps one "
            "client's half-open sockets from locking everyone out."),
    ROW_INT("max-connections-per-address", max_connections_per_address, 0, 1000000, 0,
            "Established connections one client address (IPv4, or IPv6 /64) may hold, beyond "
            "which its next request is refused with 503 (0 = no cap: behind a proxy every client "
            "has the proxy's address)."),
    /* logging */
    ROW_ENUM("log-level", log_level, "debug|info|warn|error", "info",
             "Least severe level written to stderr; use debug to trace connections, or warn to "
             "quiet a busy server."),
    ROW_ENUM("log-format", log_format, "text|json", "text",
             "text: one readable line per event; json: one JSON object per line (time, level, "
             "module, msg) for log shippers."),
    /* HTTP */
    ROW_STRING("static-dir", static_dir, "www",
               "Directory served at / (relative to the working directory); set it to \"\" to "
               "serve no static files."),
    ROW_STRING("sdk-dir", sdk_dir, "clients/js",
               "Directory served at /sdk/ (the JavaScript client the demo page imports); \"\" "
               "disables it."),
    ROW_INT64("http-max-body-bytes", http_max_body_bytes, 0, 16777216, 65536,
              "Largest HTTP request body accepted, larger ones get 413; raise it only if clients "
              "post bigger payloads."),
    ROW_INT64("http-header-timeout-ms", http_header_timeout_ms, 100, 600000, 10000,
              "Time a client has to send complete request headers before it is disconnected; "
              "lower it to shed slowloris attacks sooner."),
    ROW_INT64("http-keepalive-timeout-ms", http_keepalive_timeout_ms, 100, 3600000, 60000,
              "Idle time after which a keep-alive HTTP connection is closed; lower it to free "
              "sockets sooner on a busy server."),
    /* WebSocket */
    ROW_INT64("ws-max-message-bytes", ws_max_message_bytes, 125, 67108864, 65536,
              "Largest WebSocket message after reassembly, larger ones close the connection with "
              "1009; raise it for clients that send big payloads."),
    ROW_INT64("ws-ping-interval-ms", ws_ping_interval_ms, 100, CONFIG_WS_PING_INTERVAL_MS_MAX,
              25000,
              "Silence after which the server pings a WebSocket client; lower it when proxies or "
              "NATs drop idle connections sooner."),
    ROW_INT64("ws-pong-timeout-ms", ws_pong_timeout_ms, 100, CONFIG_WS_PONG_TIMEOUT_MS_MAX, 10000,
              "Time a WebSocket client has to answer a ping before it is disconnected; raise it "
              "for clients on slow mobile links."),
    ROW_STRING("ws-allowed-origins", ws_allowed_origins, "*",
               "Comma-separated Origin values allowed to open a WebSocket (\"*\" allows any); list "
               "your own sites to keep other pages from connecting."),
    /* SSE */
    ROW_INT64("sse-keepalive-ms", sse_keepalive_ms, 100, 3600000, 15000,
              "Interval of comment lines sent on idle event streams; lower it when a proxy closes "
              "idle responses sooner."),
    ROW_INT64("sse-retry-ms", sse_retry_ms, 0, 600000, 3000,
              "Reconnect delay suggested to EventSource clients in the retry: field; raise it to "
              "spread out reconnects after a restart."),
    /* output limits */
    ROW_INT64("client-output-soft-limit-bytes", client_output_soft_limit_bytes, 0, 1073741824,
              262144,
              "Queued output a client may exceed only for client-output-soft-limit-ms before it "
              "is disconnected (0 = off); lower it to drop slow consumers sooner."),
    ROW_INT64("client-output-soft-limit-ms", client_output_soft_limit_ms, 0, 3600000, 10000,
              "How long a client may stay over the soft output limit; raise it to tolerate longer "
              "network stalls."),
    ROW_INT64("client-output-hard-limit-bytes", client_output_hard_limit_bytes, 0, 1073741824,
              1048576,
              "Queued output at which a client is disconnected at once (0 = off); it bounds the "
              "memory one slow consumer can hold."),
    ROW_INT64("client-socket-sndbuf-bytes", client_socket_sndbuf_bytes, 0, 67108864, 65536,
              "SO_SNDBUF of client sockets (the kernel doubles it; 0 = kernel autotuning, up to "
              "tcp_wmem's max); a full socket buffer counts towards the output limits."),
    /* presence */
    ROW_ENUM("auth", auth, "none|jwt", "none",
             "How clients prove who they are: jwt verifies a signed token; none (development "
             "only) lets a client name its user with ?user=."),
    ROW_STRING("jwt-hs256-secret", jwt_hs256_secret, "",
               "Shared secret (at least 32 bytes) for HS256 tokens; set it through the "
               "environment rather than a file."),
    ROW_STRING("jwt-public-key-file", jwt_public_key_file, "",
               "PEM public key for RS256 (RSA >= 2048 bits) or ES256 (P-256) tokens, instead of "
               "a shared secret."),
    ROW_INT("jwt-leeway-s", jwt_leeway_s, 0, 60, 30,
            "Clock skew tolerated on exp, nbf and iat; lower it when clocks are well synced."),
    ROW_STRING("jwt-audience", jwt_audience, "",
               "Required aud claim (empty: not checked); set it when tokens are minted for "
               "several services."),
    ROW_STRING("jwt-issuer", jwt_issuer, "", "Required iss claim (empty: not checked)."),
    ROW_INT64("auth-timeout-ms", auth_timeout_ms, 100, 600000, 10000,
              "A socket that has not authenticated by then is closed with 4401."),
    ROW_INT64("heartbeat-interval-ms", heartbeat_interval_ms, 1000, 600000, 15000,
              "Heartbeat interval announced to clients; raise it to cut traffic from many idle "
              "clients."),
    ROW_INT64("heartbeat-min-ms", heartbeat_min_ms, 100, 600000, 5000,
              "Heartbeats faster than this per session are accepted but write nothing; it caps "
              "the work a heartbeat storm can cause."),
    ROW_INT64("session-ttl-ms", session_ttl_ms, 2000, 3600000, 45000,
              "A session without heartbeats ends after this; lower it to detect dead clients "
              "sooner."),
    ROW_INT64("reconnect-grace-ms", reconnect_grace_ms, 0, 600000, 5000,
              "A closed socket's session waits this long for a reconnect before going offline, so "
              "reloads do not flap."),
    ROW_INT64("idle-ms", idle_ms, 1000, 86400000, 300000,
              "Without activity reports for this long a session turns away; match it to your "
              "app's idea of idle."),
    ROW_INT64("presence-debounce-ms", presence_debounce_ms, 0, 10000, 100,
              "Changes of one user inside this window merge into one event; raise it to absorb "
              "more churn."),
    ROW_INT("max-sessions-per-user", max_sessions_per_user, 1, 1000, 10,
            "Sessions (tabs, devices) one user may hold at once; only live connections refuse."),
    ROW_INT("max-watch", max_watch, 1, 100000, 1000,
            "Users one connection may watch at once; it bounds the fan-out one client can ask "
            "for."),
    ROW_INT("max-watch-per-user", max_watch_per_user, 1, 10000000, 10000,
            "Users one user may watch at once over all its connections and event streams (a "
            "user watched twice counts twice); more watches are refused with too_many_watched."),
    ROW_INT("max-streams-per-user", max_streams_per_user, 1, 100000, 16,
            "Event streams (presence and room SSE) one user may hold open at once; more are "
            "refused with 429 too_many_streams."),
    ROW_ENUM("status-policy", status_policy, "most-available|dnd-wins|most-recent",
             "most-available",
             "How a user's devices merge into one status; dnd-wins makes do-not-disturb on any "
             "device global."),
    /* rooms */
    ROW_INT("room-max-members", room_max_members, 1, 1000000, 10000,
            "Members one room may hold; joins beyond it are refused with room_full."),
    ROW_INT64("watch-batch-ms", watch_batch_ms, 1, 60000, 2000,
              "A list-tier watcher gets the users that changed in this window in one frame."),
    ROW_INT("max-rooms-per-connection", max_rooms_per_connection, 1, 1000000, 1000,
            "Rooms one connection may be in at once; more joins are refused with too_many_rooms."),
    /* message budgets (engine/budget.h) and bus backpressure */
    ROW_INT("msg-rate-ephemeral", msg_rate_ephemeral, 0, 1000000, 100,
            "Ephemeral messages (cursors, typing) one connection may send per second; beyond "
            "its budget it gets rate_limited and is closed (0: no budget)."),
    ROW_INT("msg-rate-patch", msg_rate_patch, 0, 1000000, 50,
            "Room patches one connection may send per second (0: no budget)."),
    ROW_INT("msg-rate-status", msg_rate_status, 0, 1000000, 20,
            "Status, custom, activity, leave and privacy messages per second per connection (0: "
            "no budget)."),
    ROW_INT("msg-rate-watch", msg_rate_watch, 0, 1000000, 50,
            "Watch and unwatch messages per second per connection (0: no budget)."),
    ROW_INT("msg-rate-join", msg_rate_join, 0, 1000000, 100,
            "Room joins and leaves per second per connection (0: no budget)."),
    ROW_INT("msg-burst-seconds", msg_burst_seconds, 1, 3600, 10,
            "Each budget holds this many seconds of its rate, so a client may burst (a "
            "reconnect re-joining its rooms) and then keep the rate."),
    ROW_INT("bus-backlog-max", bus_backlog_max, 100, 100000000, 20000,
            "Messages one worker may have queued to another before the connections sending to "
            "it stop being read, until half have drained."),
    ROW_INT64("room-batch-ms", room_batch_ms, 1, 10000, 50,
              "Room changes inside this window go out as one delta (and a busy room's Pusher "
              "client events together); raise it to merge more churn."),
    ROW_INT("room-interval-members", room_interval_members, 2, 1000000, 1000,
            "Rooms with this many members switch to interval mode (periodic batched deltas, "
            "capped lists) to avoid n-squared fan-out."),
    ROW_INT64("room-interval-ms", room_interval_ms, 100, 60000, 1000,
              "Delta period of rooms in interval mode; lower it for livelier large rooms."),
    ROW_INT("ephemeral-rate", ephemeral_rate, 1, 1000, 15,
            "Ephemeral messages (cursors, typing) per second per sender; lower it to save "
            "bandwidth in busy rooms."),
    ROW_INT("ephemeral-tick-deliveries", ephemeral_tick_deliveries, 0, 100000000, 50000,
            "Ephemeral deliveries per second (messages times members) from which a room sends "
            "its ephemerals in 33 ms ticks, one write per socket per tick (0: never)."),
    /* privacy */
    ROW_STRING("store", store, "presenced.db",
               "Settings store: a SQLite file path, or a postgresql:// URI for multi-node "
               "deployments."),
    ROW_INT64("last-seen-flush-ms", last_seen_flush_ms, 100, 4000, 4000,
              "Users whose last seen moved are written to the store in one batch this often; "
              "kill -9 loses at most this plus one commit of last seen."),
    ROW_STRING("admin-api-key", admin_api_key, "",
               "Bearer key of the admin API under /v1/admin/ (empty: the admin API is off)."),
    ROW_STRING("metrics-key", metrics_key, "",
               "Bearer key for GET /metrics (the admin API key works too); with neither key set "
               "/metrics is public only under auth = none, else it answers 401."),
    ROW_STRING("room-token-secret", room_token_secret, "",
               "Secret for per-room subscription tokens: when set, a join needs the JWT rooms "
               "claim or a token (empty: only the rooms claim, if any, is checked)."),
    ROW_INT("query-rate", query_rate, 1, 1000000, 100,
            "User ids per second one connection may query (watch, HTTP reads); lower it to "
            "slow enumeration."),
    ROW_INT("query-burst", query_burst, 1, 1000000, 1000,
            "Ids one connection may query at once before query-rate applies."),
    ROW_INT("observer-query-rate", observer_query_rate, 0, 1000000, 200,
            "User ids per second one observer (a user, or an anonymous client's address) may "
            "query across all of its connections; lower it to slow enumeration by many sockets "
            "(0 = off)."),
    ROW_INT("observer-query-burst", observer_query_burst, 1, 1000000, 2000,
            "Ids one observer may query at once, over all its connections, before "
            "observer-query-rate applies."),
    /* cluster (docs/cluster.md) */
    ROW_STRING("pusher-app", pusher_app, "",
               "Pusher Channels apps served at /app/{key} and /apps/{id}/: ID:KEY:SECRET, options "
               "after the secret as :client-events=true:member-limit=100:subscription-count=true:"
               "webhook=URL (empty: no Pusher protocol; docs/pusher.md). Several apps, "
               "comma-separated, are each a namespace of their own users and rooms; the first "
               "shares the native protocol's."),
    ROW_STRING("pusher-webhook-url", pusher_webhook_url, "",
               "Where the Pusher apps that name no :webhook=URL send their webhooks (http://; "
               "signed with each app's secret; empty: none)."),
    ROW_STRING("webhook-url", webhook_url, "",
               "Standard Webhooks endpoint for the native side: user.online/offline, "
               "room.occupied/vacated, member.joined/left (http://; needs webhook-secret; empty: "
               "none; docs/api.md \"Webhooks\")."),
    ROW_STRING("webhook-secret", webhook_secret, "",
               "The Standard Webhooks signing secret: whsec_ and the base64 of 24-64 bytes."),
    ROW_ENUM("phoenix", phoenix, "on|off", "on",
             "Phoenix Channels (phoenix.js) at /socket/websocket and Supabase Realtime "
             "(realtime-js) at /realtime/v1/websocket; off serves neither (docs/phoenix.md)."),
    ROW_INT64("phoenix-longpoll-window-ms", phoenix_longpoll_window_ms, 100, 600000, 10000,
              "How long a Phoenix long-poll GET is held for messages before its 204; a session "
              "that sees no poll for 1.5 times this ends, as Phoenix's window_ms."),
    ROW_INT64(
        "phoenix-longpoll-max-queue", phoenix_longpoll_max_queue, 1, 1000000, 1000,
        "Messages a Phoenix long-poll session holds for its next poll; one more ends the "
        "session (its next poll gets 410), so a client that stops reading costs bounded memory."),
    ROW_STRING("redis", redis, "",
               "Redis for many nodes: redis://HOST:PORT, a comma-separated list of redis:// URLs "
               "(shards), or redis-cluster://HOST:PORT[,HOST:PORT...] (empty: one embedded node; "
               "needs a postgresql:// store)."),
    ROW_STRING("node-id", node_id, "",
               "This node's stable name in the cluster ([A-Za-z0-9_.-], at most 64 bytes; empty: "
               "the host name); each start adds a fresh random epoch."),
    ROW_INT64("redis-timeout-ms", redis_timeout_ms, 50, 60000, 1000,
              "A Redis command or connect waiting longer marks its shard degraded."),
    ROW_INT64("cluster-lease-ms", cluster_lease_ms, 500, 600000, 5000,
              "A node whose lease is not renewed for this long is dead (renewed every fifth of "
              "it)."),
    ROW_INT64("cluster-orphan-grace-ms", cluster_orphan_grace_ms, 0, 600000, 10000,
              "A dead node's users stay online this much longer before they are swept, so that "
              "clients reconnecting to another node cause no event."),
    ROW_INT64("cluster-linger-ms", cluster_linger_ms, 0, 600000, 30000,
              "A watch-bucket channel nobody on this node watches any more is unsubscribed after "
              "this long (a watcher that comes back meanwhile costs no resubscription)."),
    ROW_INT64("cluster-reassert-ms", cluster_reassert_ms, 0, 86400000, 600000,
              "Every node puts its users again and reads its watched users again over this "
              "period, spread out, to repair what pub/sub may have lost (0: never)."),
    /* shutdown */
    ROW_INT64("shutdown-drain-ms", shutdown_drain_ms, 0, 600000, 5000,
              "Time given on SIGTERM to flush queued output before exit; raise it if clients miss "
              "final messages during deploys."),
    ROW_INT64("drain-window-ms", drain_window_ms, 0, 600000, 5000,
              "On SIGTERM or POST /v1/admin/drain every client is told to reconnect and closed at "
              "a random moment within this window, so that a restart brings no reconnect storm."),
    ROW_INT64("restore-max-age-s", restore_max_age_s, 0, 86400, 300,
              "A clean stop (single node) saves every session to the store and the next start "
              "restores them in their reconnect grace; a saved state older than this is "
              "discarded (0: never save nor restore)."),
    /* testing */
    ROW_INT("test-silent-owners", test_silent_owners, 0, 1, 0,
            "1 makes every owner ignore HTTP reads, as an unreachable node would, to test "
            "degraded answers; never set it in production."),
};
const size_t config_ndefs = ARRAY_SIZE(config_defs);

/* ---- helpers ---- */

/* Formats a message into err (when there is room) and returns -1. */
__attribute__((format(printf, 3, 4))) static int errf(char *err, size_t errlen, const char *fmt,
                                                      ...)
{
    va_list ap;

    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const struct config_def *find_def(const char *name, size_t len)
{
    for (size_t i = 0; i < config_ndefs; i++) {
        if (strncmp(config_defs[i].name, name, len) == 0 && config_defs[i].name[len] == '\0')
            return &config_defs[i];
    }
    return NULL;
}

/* "ws-max-message-bytes" -> "PRESENCED_WS_MAX_MESSAGE_BYTES". */
static void env_name(const struct config_def *d, char *out, size_t n)
{
    size_t i = strlen(CONFIG_ENV_PREFIX);

    /* The table is ours: every name fits (checked by test_config). */
    assert(i + strlen(d->name) < n);
    memcpy(out, CONFIG_ENV_PREFIX, i);
    for (const char *p = d->name; *p; p++)
        out[i++] = *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    out[i] = '\0';
}

/* Parses plain decimal ('-'? digits). Returns 0, -1 when s is not such a
 * number, or 1 when it is one but does not fit in int64_t. */
static int parse_decimal(const char *s, int64_t *out)
{
    const char *digits = s + (*s == '-');
    long long v;

    if (*digits == '\0' || digits[strspn(digits, "0123456789")] != '\0')
        return -1;
    errno = 0;
    v = strtoll(s, NULL, 10);
    if (errno == ERANGE)
        return 1;
    *out = v;
    return 0;
}

/* Points *tok at the choice in d->choices equal to value (ASCII case
 * ignored) and returns its length, or 0 when there is none. */
static size_t find_choice(const struct config_def *d, const char *value, const char **tok)
{
    const char *p = d->choices;

    for (;;) {
        size_t len = strcspn(p, "|");
        if (len == strlen(value) && ascii_ieq(p, len, value)) {
            *tok = p;
            return len;
        }
        if (p[len] == '\0')
            return 0;
        p += len + 1;
    }
}

static void replace_string(char **field, const char *s, size_t len)
{
    free(*field);
    *field = xstrndup(s, len);
}

/*
 * Parses value as d's type and stores it in c. src names where the value
 * came from ("--port", "PRESENCED_PORT", "file.conf:3") or is NULL.
 */
static int set_value(struct config *c, const struct config_def *d, const char *value,
                     const char *src, char *err, size_t errlen)
{
    void *field = (char *)c + d->offset;
    char what[CONFIG_NAME_MAX + PATH_MAX + 32];
    const char *tok;
    int64_t v = 0;
    size_t len;
    int r;

    snprintf(what, sizeof(what), "%s%s%s%s", d->name, src ? " (from " : "", src ? src : "",
             src ? ")" : "");
    switch (d->type) {
    case CONFIG_INT:
    case CONFIG_INT64:
        r = parse_decimal(value, &v);
        if (r < 0)
            return errf(err, errlen,
                        "invalid value \"%s\" for %s: must be a decimal integer between %lld "
                        "and %lld",
                        value, what, (long long)d->min, (long long)d->max);
        if (r > 0 || v < d->min || v > d->max)
            return errf(err, errlen, "invalid value \"%s\" for %s: must be between %lld and %lld",
                        value, what, (long long)d->min, (long long)d->max);
        if (d->type == CONFIG_INT)
            *(int *)field = (int)v;
        else
            *(int64_t *)field = v;
        return 0;
    case CONFIG_ENUM:
        len = find_choice(d, value, &tok);
        if (len == 0)
            return errf(err, errlen, "invalid value \"%s\" for %s: must be one of %s", value, what,
                        d->choices);
        replace_string(field, tok, len);
        return 0;
    case CONFIG_STRING:
        replace_string(field, value, strlen(value));
        return 0;
    }
    /* Every row has one of the types above. */
    assert(!"unknown config_type");
    return -1;
}

/* ---- the config file ---- */

/* What the inih callbacks share while one file is parsed. */
struct file_state {
    struct config *c;
    FILE *f;
    const char *path;
    char *line;     /* getline() buffer */
    size_t cap;     /* its size */
    int lineno;     /* physical line last handed to inih */
    int read_errno; /* set when reading failed (a directory, EIO) */
    int err_line;   /* line of the first error found here, or 0 */
    char *err;      /* the caller's buffer */
    size_t errlen;
};

__attribute__((format(printf, 2, 3))) static void file_error(struct file_state *st, const char *fmt,
                                                             ...)
{
    va_list ap;

    if (st->err_line)
        return; /* only the first error is reported */
    st->err_line = st->lineno;
    if (st->err && st->errlen) {
        va_start(ap, fmt);
        vsnprintf(st->err, st->errlen, fmt, ap);
        va_end(ap);
    }
}

/*
 * inih's fgets-style reader. It reads whole physical lines itself, so that
 * lineno is the real line number when the handler runs, and so that lines
 * inih would truncate and section headers become errors. Such lines reach
 * inih as empty lines.
 */
static char *file_read_line(char *str, int num, void *stream)
{
    struct file_state *st = stream;
    ssize_t n = getline(&st->line, &st->cap, st->f);
    const char *p;

    if (n < 0) {
        if (ferror(st->f))
            st->read_errno = errno;
        return NULL;
    }
    st->lineno++;
    p = st->line + strspn(st->line, " \t");
    if (*p == '[') {
        file_error(st, "sections are not supported (from %s:%d): write plain \"key = value\" lines",
                   st->path, st->lineno);
        p = "\n";
    } else if (strlen(p) > (size_t)num - 1) {
        file_error(st, "line too long (from %s:%d): at most %d characters", st->path, st->lineno,
                   num - 3);
        p = "\n";
    }
    memcpy(str, p, strlen(p) + 1);
    return str;
}

static int file_handler(void *user, const char *section, const char *name, const char *value)
{
    struct file_state *st = user;
    const struct config_def *d = find_def(name, strlen(name));
    char src[PATH_MAX + 16], *unquoted = NULL;
    size_t len = strlen(value);
    int r;

    (void)section; /* always "": the reader turns headers into errors */
    if (st->err_line)
        return 1; /* stop applying after the first error, which is reported */
    if (!d) {
        file_error(st, "unknown key \"%s\" (from %s:%d)", name, st->path, st->lineno);
        return 0;
    }
    if (len >= 2 && value[0] == '"' && value[len - 1] == '"')
        value = unquoted = xstrndup(value + 1, len - 2);
    snprintf(src, sizeof(src), "%s:%d", st->path, st->lineno);
    r = set_value(st->c, d, value, src, st->err, st->errlen);
    free(unquoted);
    if (r < 0) {
        st->err_line = st->lineno; /* set_value wrote the message */
        return 0;
    }
    return 1;
}

/* Applies the file at path; src says who named it (--config or the env). */
static int load_file(struct config *c, const char *path, const char *src, char *err, size_t errlen)
{
    struct file_state st = {.c = c, .path = path, .err = err, .errlen = errlen};
    int r;

    st.f = fopen(path, "r");
    if (!st.f)
        return errf(err, errlen, "cannot read config file \"%s\" (from %s): %s", path, src,
                    strerror(errno));
    r = ini_parse_stream(file_read_line, &st, file_handler, &st);
    free(st.line);
    fclose(st.f);
    if (st.read_errno)
        return errf(err, errlen, "cannot read config file \"%s\" (from %s): %s", path, src,
                    strerror(st.read_errno));
    /* inih reports the first line it failed on; an earlier one may be a
     * line without '=', which never reached the handler. */
    if (r > 0 && (!st.err_line || r < st.err_line))
        return errf(err, errlen, "syntax error (from %s:%d): expected \"key = value\"", path, r);
    if (r < 0)
        return errf(err, errlen, "cannot parse config file \"%s\" (inih error %d)", path, r);
    return st.err_line ? -1 : 0;
}

/* ---- environment and flags ---- */

static int load_env(struct config *c, char *err, size_t errlen)
{
    char name[CONFIG_NAME_MAX];

    for (size_t i = 0; i < config_ndefs; i++) {
        const char *v;

        env_name(&config_defs[i], name, sizeof(name));
        v = getenv(name);
        if (v && set_value(c, &config_defs[i], v, name, err, errlen) < 0)
            return -1;
    }
    return 0;
}

enum flag_kind { FLAG_KEY, FLAG_CONFIG, FLAG_HELP, FLAG_VERSION };

/* One command-line option with its value. */
struct flag {
    enum flag_kind kind;
    const struct config_def *def; /* FLAG_KEY */
    const char *value;            /* FLAG_KEY and FLAG_CONFIG */
};

/*
 * Reads the option at argv[*i] and its value ("--key=value" or the next
 * argument, unless that starts with "--") and moves *i past both. Returns 0
 * or -1 with a message.
 */
static int next_flag(int argc, char **argv, int *i, struct flag *f, char *err, size_t errlen)
{
    const char *arg = argv[(*i)++], *name, *eq;
    size_t len;

    memset(f, 0, sizeof(*f));
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
        f->kind = FLAG_HELP;
        return 0;
    }
    if (strcmp(arg, "--version") == 0) {
        f->kind = FLAG_VERSION;
        return 0;
    }
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
        return errf(err, errlen,
                    "unexpected argument \"%s\": settings are --key value or --key=value", arg);
    name = arg + 2;
    eq = strchr(name, '=');
    len = eq ? (size_t)(eq - name) : strlen(name);
    if (len == strlen("config") && strncmp(name, "config", len) == 0)
        f->kind = FLAG_CONFIG;
    else if ((f->def = find_def(name, len)) != NULL)
        f->kind = FLAG_KEY;
    else
        return errf(err, errlen, "unknown option \"--%.*s\" (see --help)", (int)len, name);
    if (eq)
        f->value = eq + 1;
    else if (*i < argc && strncmp(argv[*i], "--", 2) != 0)
        f->value = argv[(*i)++];
    else if (*i < argc)
        return errf(err, errlen,
                    "missing value for --%.*s (write --%.*s=VALUE for a value that starts "
                    "with \"--\")",
                    (int)len, name, (int)len, name);
    else
        return errf(err, errlen, "missing value for --%.*s", (int)len, name);
    return 0;
}

/* Checks the rules that span several settings or go beyond a range. */
static bool node_id_ok(const char *s)
{
    size_t n = strlen(s);

    if (n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
            return false;
    return true;
}

static int validate(const struct config *c, char *err, size_t errlen)
{
    unsigned char addr[sizeof(struct in6_addr)];

    if (inet_pton(AF_INET, c->bind, addr) != 1 && inet_pton(AF_INET6, c->bind, addr) != 1)
        return errf(err, errlen,
                    "invalid value \"%s\" for bind: must be an IPv4 or IPv6 address such as "
                    "127.0.0.1, 0.0.0.0 or ::",
                    c->bind);
    if (c->client_output_soft_limit_bytes && c->client_output_hard_limit_bytes &&
        c->client_output_soft_limit_bytes > c->client_output_hard_limit_bytes)
        return errf(err, errlen,
                    "client-output-soft-limit-bytes (%lld) must not exceed "
                    "client-output-hard-limit-bytes (%lld) unless one of them is 0 (off)",
                    (long long)c->client_output_soft_limit_bytes,
                    (long long)c->client_output_hard_limit_bytes);
    if (strcmp(c->auth, "jwt") == 0 && !c->jwt_hs256_secret[0] == !c->jwt_public_key_file[0])
        return errf(err, errlen,
                    "auth = jwt needs exactly one of jwt-hs256-secret and jwt-public-key-file");
    if (!c->webhook_url[0] != !c->webhook_secret[0])
        return errf(err, errlen,
                    "webhook-url and webhook-secret go together: give both or neither");
    if (c->jwt_hs256_secret[0] && strlen(c->jwt_hs256_secret) < 32)
        return errf(err, errlen, "jwt-hs256-secret must be at least 32 bytes");
    if (c->heartbeat_min_ms > c->heartbeat_interval_ms)
        return errf(err, errlen,
                    "heartbeat-min-ms (%lld) must not exceed heartbeat-interval-ms (%lld)",
                    (long long)c->heartbeat_min_ms, (long long)c->heartbeat_interval_ms);
    if (c->redis[0] && strncmp(c->store, "postgresql://", 13) != 0 &&
        strncmp(c->store, "postgres://", 11) != 0)
        return errf(err, errlen,
                    "redis is set, so the settings store must be shared by every node: set store "
                    "to a postgresql:// URI (a SQLite file is one node's own)");
    if (!node_id_ok(c->node_id))
        return errf(err, errlen,
                    "invalid value \"%s\" for node-id: at most 64 of A-Z a-z 0-9 _ . -",
                    c->node_id);
    if (c->session_ttl_ms <= c->heartbeat_interval_ms)
        return errf(err, errlen,
                    "session-ttl-ms (%lld) must be greater than heartbeat-interval-ms (%lld)",
                    (long long)c->session_ttl_ms, (long long)c->heartbeat_interval_ms);
    return 0;
}

/* ---- public functions ---- */

void config_init(struct config *c)
{
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < config_ndefs; i++) {
        const struct config_def *d = &config_defs[i];
        int r;

        /* An int field cannot hold bounds beyond int. */
        assert(d->type != CONFIG_INT || (d->min >= INT_MIN && d->max <= INT_MAX));
        r = set_value(c, d, d->def, NULL, NULL, 0);
        /* A default that fails its own row is a typo in the table. */
        assert(r == 0);
        (void)r;
    }
}

void config_release(struct config *c)
{
    for (size_t i = 0; i < config_ndefs; i++) {
        const struct config_def *d = &config_defs[i];
        char **field = (char **)(void *)((char *)c + d->offset);

        if (d->type == CONFIG_STRING || d->type == CONFIG_ENUM) {
            free(*field);
            *field = NULL;
        }
    }
}

int config_load(struct config *c, int argc, char **argv, char *err, size_t errlen)
{
    const char *path = NULL, *path_src = "--config";
    struct flag f;
    int i;

    /* First pass: syntax, --help, --version and --config; applies nothing. */
    for (i = 1; i < argc;) {
        if (next_flag(argc, argv, &i, &f, err, errlen) < 0)
            return -1;
        if (f.kind == FLAG_HELP) {
            config_print_help(stdout);
            return 1;
        }
        if (f.kind == FLAG_VERSION) {
            printf("presenced %s\n", CONFIG_VERSION);
            return 1;
        }
        if (f.kind == FLAG_CONFIG)
            path = f.value;
    }
    if (!path) {
        path = getenv(CONFIG_ENV_PREFIX "CONFIG");
        path_src = CONFIG_ENV_PREFIX "CONFIG";
    }
    /* An empty path means no file, e.g. --config "" to ignore the env. */
    if (path && *path && load_file(c, path, path_src, err, errlen) < 0)
        return -1;
    if (load_env(c, err, errlen) < 0)
        return -1;
    for (i = 1; i < argc;) {
        char src[CONFIG_NAME_MAX];

        /* Cannot fail: the first pass read the same arguments. */
        next_flag(argc, argv, &i, &f, NULL, 0);
        if (f.kind != FLAG_KEY)
            continue;
        snprintf(src, sizeof(src), "--%s", f.def->name);
        if (set_value(c, f.def, f.value, src, err, errlen) < 0)
            return -1;
    }
    return validate(c, err, errlen);
}

int config_set(struct config *c, const char *name, const char *value, char *err, size_t errlen)
{
    const struct config_def *d = find_def(name, strlen(name));

    if (!d)
        return errf(err, errlen, "unknown key \"%s\"", name);
    return set_value(c, d, value, NULL, err, errlen);
}

/* Prints text as words wrapped before HELP_COLUMNS, each line after indent. */
static void print_wrapped(FILE *f, const char *indent, const char *text)
{
    size_t col = 0;

    text += strspn(text, " ");
    while (*text) {
        size_t w = strcspn(text, " ");

        if (col && col + 1 + w >= HELP_COLUMNS) {
            fputc('\n', f);
            col = 0;
        }
        col += (size_t)fprintf(f, "%s%.*s", col ? " " : indent, (int)w, text);
        text += w;
        text += strspn(text, " ");
    }
    if (col)
        fputc('\n', f);
}

void config_print_help(FILE *f)
{
    fprintf(f, "usage: presenced [--config PATH] [--KEY VALUE | --KEY=VALUE]...\n"
               "\n"
               "options:\n"
               "  --config PATH  read settings from PATH (else from $" CONFIG_ENV_PREFIX
               "CONFIG, if set)\n"
               "  -h, --help     print this help and exit\n"
               "  --version      print the version and exit\n"
               "\n"
               "settings:\n");
    for (size_t i = 0; i < config_ndefs; i++) {
        const struct config_def *d = &config_defs[i];

        if (d->type == CONFIG_INT || d->type == CONFIG_INT64)
            fprintf(f, "  --%s N  (default %s, %lld..%lld)\n", d->name, d->def, (long long)d->min,
                    (long long)d->max);
        else if (d->type == CONFIG_ENUM)
            fprintf(f, "  --%s %s  (default %s)\n", d->name, d->choices, d->def);
        else
            fprintf(f, "  --%s VALUE  (default \"%s\")\n", d->name, d->def);
        print_wrapped(f, "      ", d->help);
    }
    fputc('\n', f);
    print_wrapped(f, "",
                  "Every setting can also be set as \"key = value\" in the config file and as "
                  "the environment variable " CONFIG_ENV_PREFIX "KEY (upper case, '-' becomes "
                  "'_', e.g. " CONFIG_ENV_PREFIX "WS_MAX_MESSAGE_BYTES). Precedence: defaults < "
                  "file < environment < flags. Integers are plain decimal. presenced.conf lists "
                  "every key with its default.");
}

/* 0 resolves to the CPU count, capped at the row's maximum so that it never
 * exceeds what an explicit setting could ask for. */
int config_workers(const struct config *c)
{
    long max = (long)find_def("workers", strlen("workers"))->max;
    long n;

    if (c->workers > 0)
        return c->workers;
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)MIN(n, max);
}
