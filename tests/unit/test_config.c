/* SPDX-License-Identifier: MIT */
/*
 * test_config.c - the settings table, its loaders and presenced.conf.
 *
 * Each test starts and ends with every PRESENCED_<KEY> variable and
 * PRESENCED_CONFIG unset, and removes the temporary files it wrote, so a
 * developer's environment cannot change the results. presenced.conf is read
 * from $PRESENCED_SRCDIR when set, else from the working directory (the
 * repository root, where tests/run.sh runs the unit tests).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TEMPS 4

struct fixture {
    struct config cfg;
    char err[1024];
    char temps[MAX_TEMPS][64]; /* files to unlink in teardown */
    int ntemps;
};

/* ---- helpers ---- */

/* PRESENCED_ + name upper-cased with '-' -> '_', written independently of
 * config.c so the tests check its mapping. */
static void env_var(const char *name, char *out, size_t n)
{
    size_t i = (size_t)snprintf(out, n, "PRESENCED_");

    for (; *name && i + 1 < n; name++)
        out[i++] = *name == '-' ? '_' : (char)(*name >= 'a' && *name <= 'z' ? *name - 32 : *name);
    out[i] = '\0';
}

static void clear_env(void)
{
    char name[128];

    for (size_t i = 0; i < config_ndefs; i++) {
        env_var(config_defs[i].name, name, sizeof(name));
        unsetenv(name);
    }
    unsetenv("PRESENCED_CONFIG");
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));

    if (!fx)
        return -1;
    clear_env();
    config_init(&fx->cfg);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    clear_env();
    config_release(&fx->cfg);
    for (int i = 0; i < fx->ntemps; i++)
        unlink(fx->temps[i]);
    free(fx);
    return 0;
}

/* Writes text to a new temporary file and returns its path (owned by fx). */
static const char *write_temp(struct fixture *fx, const char *text)
{
    char *path;
    int fd;

    assert_true(fx->ntemps < MAX_TEMPS);
    path = fx->temps[fx->ntemps];
    snprintf(path, sizeof(fx->temps[0]), "/tmp/test_config.XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    fx->ntemps++;
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* Runs config_load on "presenced" followed by the NULL-terminated args. */
static int load(struct fixture *fx, const char *const *args)
{
    char *argv[32];
    int argc = 0;

    argv[argc++] = "presenced";
    for (; *args; args++) {
        assert_true(argc < 31);
        argv[argc++] = (char *)*args;
    }
    argv[argc] = NULL;
    fx->err[0] = '\0';
    return config_load(&fx->cfg, argc, argv, fx->err, sizeof(fx->err));
}
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Fails unless fx->err contains every NULL-terminated fragment. */
static void expect_error(const struct fixture *fx, const char *const *fragments)
{
    for (; *fragments; fragments++) {
        if (!strstr(fx->err, *fragments))
            fail_msg("error \"%s\" lacks \"%s\"", fx->err, *fragments);
    }
}

/* Loads args, expects -1 and an error containing every fragment. */
static void expect_load_error(struct fixture *fx, const char *const *args,
                              const char *const *fragments)
{
    assert_int_equal(load(fx, args), -1);
    expect_error(fx, fragments);
}

static const struct config_def *def_named(const char *name)
{
    for (size_t i = 0; i < config_ndefs; i++) {
        if (strcmp(config_defs[i].name, name) == 0)
            return &config_defs[i];
    }
    return NULL;
}

/* Reads all of f from the start into a heap string. */
static char *slurp(FILE *f)
{
    long n;
    char *s;

    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    s = calloc(1, (size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    return s;
}

/* Calls config_load with stdout sent to a temporary file; returns what it
 * printed (heap) and stores the result in *r. */
static char *load_capturing_stdout(struct fixture *fx, const char *const *args, int *r)
{
    FILE *tmp = tmpfile();
    int saved;
    char *out;

    assert_non_null(tmp);
    fflush(stdout);
    saved = dup(STDOUT_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tmp), STDOUT_FILENO) >= 0);
    *r = load(fx, args);
    fflush(stdout);
    assert_true(dup2(saved, STDOUT_FILENO) >= 0);
    close(saved);
    out = slurp(tmp);
    fclose(tmp);
    return out;
}

/* ---- the table ---- */

static void test_table_is_sane(void **state)
{
    (void)state;
    assert_true(config_ndefs >= 19);
    for (size_t i = 0; i < config_ndefs; i++) {
        const struct config_def *d = &config_defs[i];
        size_t hl = strlen(d->help);

        assert_true(strlen(d->name) > 0 && strlen(d->name) < 40);
        assert_int_equal(strspn(d->name, "abcdefghijklmnopqrstuvwxyz0123456789-"), strlen(d->name));
        assert_true(d->name[0] != '-' && d->name[strlen(d->name) - 1] != '-');
        assert_ptr_equal(def_named(d->name), d); /* names are unique */
        assert_non_null(d->def);
        assert_true(hl > 20 && d->help[hl - 1] == '.');
        if (d->type == CONFIG_INT || d->type == CONFIG_INT64)
            assert_true(d->min <= d->max);
        if (d->type == CONFIG_INT)
            assert_true(d->min >= INT_MIN && d->max <= INT_MAX);
        if (d->type == CONFIG_ENUM)
            assert_non_null(d->choices);
    }
}

static void test_defaults(void **state)
{
    struct fixture *fx = *state;
    const struct config *c = &fx->cfg;

    assert_string_equal(c->bind, "127.0.0.1");
    assert_int_equal(c->port, 7400);
    assert_int_equal(c->workers, 0);
    assert_int_equal(c->max_connections, 19000);
    assert_string_equal(c->log_level, "info");
    assert_string_equal(c->static_dir, "www");
    assert_int_equal(c->http_max_body_bytes, 65536);
    assert_int_equal(c->http_header_timeout_ms, 10000);
    assert_int_equal(c->http_keepalive_timeout_ms, 60000);
    assert_int_equal(c->ws_max_message_bytes, 65536);
    assert_int_equal(c->ws_ping_interval_ms, 25000);
    assert_int_equal(c->ws_pong_timeout_ms, 10000);
    assert_string_equal(c->ws_allowed_origins, "*");
    assert_int_equal(c->sse_keepalive_ms, 15000);
    assert_int_equal(c->sse_retry_ms, 3000);
    assert_int_equal(c->client_output_soft_limit_bytes, 262144);
    assert_int_equal(c->client_output_soft_limit_ms, 10000);
    assert_int_equal(c->client_output_hard_limit_bytes, 1048576);
    assert_int_equal(c->shutdown_drain_ms, 5000);
    /* Loading nothing keeps the defaults and they validate. */
    assert_int_equal(load(fx, ARGS(NULL)), 0);
    assert_int_equal(c->port, 7400);
}

static void test_release_is_idempotent(void **state)
{
    struct fixture *fx = *state;

    config_release(&fx->cfg);
    assert_null(fx->cfg.bind);
    config_release(&fx->cfg); /* teardown releases a third time */
}

/* ---- sources and precedence ---- */

static void test_file_parsing(void **state)
{
    struct fixture *fx = *state;
    const char *path = write_temp(fx, "# a comment\n"
                                      "; another comment\n"
                                      "\n"
                                      "port = 8080\n"
                                      "  workers=3\n"
                                      "log-level = debug ; inline comment\n"
                                      "static-dir = \"\"\n"
                                      "ws-allowed-origins = https://a.example,https://b.example\r\n"
                                      "http-max-body-bytes = 1\n"
                                      "http-max-body-bytes = 2\n"
                                      "bind = ::1");

    assert_int_equal(load(fx, ARGS("--config", path)), 0);
    assert_int_equal(fx->cfg.port, 8080);
    assert_int_equal(fx->cfg.workers, 3);
    assert_string_equal(fx->cfg.log_level, "debug");
    assert_string_equal(fx->cfg.static_dir, "");
    assert_string_equal(fx->cfg.ws_allowed_origins, "https://a.example,https://b.example");
    assert_int_equal(fx->cfg.http_max_body_bytes, 2); /* the last one wins */
    assert_string_equal(fx->cfg.bind, "::1");
    assert_int_equal(fx->cfg.sse_retry_ms, 3000); /* untouched */
}

static void test_file_from_env(void **state)
{
    struct fixture *fx = *state;
    const char *a = write_temp(fx, "port = 1001\n");
    const char *b = write_temp(fx, "port = 1002\n");

    setenv("PRESENCED_CONFIG", a, 1);
    assert_int_equal(load(fx, ARGS(NULL)), 0);
    assert_int_equal(fx->cfg.port, 1001);
    /* --config wins over PRESENCED_CONFIG. */
    assert_int_equal(load(fx, ARGS("--config", b)), 0);
    assert_int_equal(fx->cfg.port, 1002);
    config_release(&fx->cfg);
    config_init(&fx->cfg);
    /* An empty --config means no file at all, not even PRESENCED_CONFIG's. */
    assert_int_equal(load(fx, ARGS("--config=")), 0);
    assert_int_equal(fx->cfg.port, 7400);
}

static void test_env_overrides_file(void **state)
{
    struct fixture *fx = *state;
    const char *path = write_temp(fx, "port = 1000\nws-max-message-bytes = 1000\n"
                                      "static-dir = public\n");

    setenv("PRESENCED_PORT", "2000", 1);
    setenv("PRESENCED_WS_MAX_MESSAGE_BYTES", "4096", 1);
    setenv("PRESENCED_STATIC_DIR", "", 1); /* set but empty: a value */
    assert_int_equal(load(fx, ARGS("--config", path)), 0);
    assert_int_equal(fx->cfg.port, 2000);
    assert_int_equal(fx->cfg.ws_max_message_bytes, 4096);
    assert_string_equal(fx->cfg.static_dir, "");
}

static void test_flag_overrides_env(void **state)
{
    struct fixture *fx = *state;
    const char *path = write_temp(fx, "port = 1000\nsse-retry-ms = 1\n");

    setenv("PRESENCED_PORT", "2000", 1);
    setenv("PRESENCED_LOG_LEVEL", "warn", 1);
    assert_int_equal(load(fx, ARGS("--config", path, "--port", "3000")), 0);
    assert_int_equal(fx->cfg.port, 3000);
    assert_string_equal(fx->cfg.log_level, "warn");
    assert_int_equal(fx->cfg.sse_retry_ms, 1);
}

static void test_flag_equals_form(void **state)
{
    struct fixture *fx = *state;

    assert_int_equal(load(fx, ARGS("--port=3001", "--bind=0.0.0.0",
                                   "--static-dir=", "--ws-allowed-origins=https://x.example",
                                   "--workers", "2", "--log-level", "ERROR")),
                     0);
    assert_int_equal(fx->cfg.port, 3001);
    assert_string_equal(fx->cfg.bind, "0.0.0.0");
    assert_string_equal(fx->cfg.static_dir, "");
    assert_string_equal(fx->cfg.ws_allowed_origins, "https://x.example");
    assert_int_equal(fx->cfg.workers, 2);
    assert_string_equal(fx->cfg.log_level, "error"); /* stored as the canonical choice */
    /* The last flag for a key wins; an '=' inside the value is kept. */
    assert_int_equal(load(fx, ARGS("--port=1", "--port", "2", "--static-dir=a=b")), 0);
    assert_int_equal(fx->cfg.port, 2);
    assert_string_equal(fx->cfg.static_dir, "a=b");
}

static void test_every_key_by_flag_and_env(void **state)
{
    struct fixture *fx = *state;
    char flag[128], name[128];

    /* Each key accepts its own default from both sources. */
    for (size_t i = 0; i < config_ndefs; i++) {
        const struct config_def *d = &config_defs[i];

        snprintf(flag, sizeof(flag), "--%s=%s", d->name, d->def);
        if (load(fx, ARGS(flag)) != 0)
            fail_msg("%s: %s", flag, fx->err);
        env_var(d->name, name, sizeof(name));
        setenv(name, d->def, 1);
    }
    if (load(fx, ARGS(NULL)) != 0)
        fail_msg("env: %s", fx->err);
}

/* ---- errors ---- */

static void test_error_unknown_key_in_file(void **state)
{
    struct fixture *fx = *state;
    const char *path = write_temp(fx, "# comment\nport = 7401\n\nprot = 7402\nbogus = 1\n");

    expect_load_error(fx, ARGS("--config", path), ARGS("unknown key \"prot\"", path, ":4)"));
}

static void test_error_file_syntax(void **state)
{
    struct fixture *fx = *state;
    const char *noeq = write_temp(fx, "port = 7401\nport 7402\nbogus = 1\n");
    const char *section = write_temp(fx, "port = 7401\n\n[ws]\nmax-message-bytes = 1\n");
    char text[400];

    expect_load_error(fx, ARGS("--config", noeq), ARGS("syntax error", noeq, ":2)", "key = value"));
    expect_load_error(fx, ARGS("--config", section),
                      ARGS("sections are not supported", section, ":3)"));
    /* A line longer than inih's buffer is an error, never truncated. */
    snprintf(text, sizeof(text), "port = 7401\nws-allowed-origins = %0300d\n", 0);
    expect_load_error(fx, ARGS("--config", write_temp(fx, text)),
                      ARGS("line too long", ":2)", "197 characters"));
}

static void test_error_bad_value_in_file(void **state)
{
    struct fixture *fx = *state;
    const char *path = write_temp(fx, "port = 7401\nworkers = 65\n");

    expect_load_error(
        fx, ARGS("--config", path),
        ARGS("invalid value \"65\" for workers (from ", path, ":2): must be between 0 and 64"));
    /* '#' is a comment only at the start of a line. */
    path = write_temp(fx, "port = 7401 # the port\n");
    expect_load_error(fx, ARGS("--config", path), ARGS("invalid value \"7401 # the port\""));
}

static void test_error_unreadable_file(void **state)
{
    struct fixture *fx = *state;

    expect_load_error(fx, ARGS("--config", "/nonexistent/presenced.conf"),
                      ARGS("cannot read config file \"/nonexistent/presenced.conf\" (from "
                           "--config): No such file or directory"));
    expect_load_error(fx, ARGS("--config", "/"),
                      ARGS("cannot read config file \"/\"", "Is a directory"));
    setenv("PRESENCED_CONFIG", "/nonexistent/env.conf", 1);
    expect_load_error(fx, ARGS(NULL),
                      ARGS("\"/nonexistent/env.conf\" (from PRESENCED_CONFIG)", "No such file"));
}

static void test_error_unknown_flag(void **state)
{
    struct fixture *fx = *state;

    expect_load_error(fx, ARGS("--prot", "7400"), ARGS("unknown option \"--prot\"", "--help"));
    expect_load_error(fx, ARGS("--prot=7400"), ARGS("unknown option \"--prot\""));
    expect_load_error(fx, ARGS("-p", "7400"), ARGS("unexpected argument \"-p\""));
    expect_load_error(fx, ARGS("7400"), ARGS("unexpected argument \"7400\""));
    expect_load_error(fx, ARGS("--"), ARGS("unexpected argument \"--\""));
    expect_load_error(fx, ARGS("-"), ARGS("unexpected argument \"-\""));
    expect_load_error(fx, ARGS(""), ARGS("unexpected argument \"\""));
}

static void test_error_missing_value(void **state)
{
    struct fixture *fx = *state;

    expect_load_error(fx, ARGS("--port"), ARGS("missing value for --port"));
    assert_string_equal(fx->err, "missing value for --port");
    expect_load_error(fx, ARGS("--config"), ARGS("missing value for --config"));
    expect_load_error(fx, ARGS("--bind", "--port", "1"),
                      ARGS("missing value for --bind", "--bind=VALUE"));
}

static void test_error_bad_number(void **state)
{
    struct fixture *fx = *state;

    expect_load_error(fx, ARGS("--port", "abc"),
                      ARGS("invalid value \"abc\" for port (from --port): must be a decimal "
                           "integer between 0 and 65535"));
    expect_load_error(fx, ARGS("--port="), ARGS("invalid value \"\" for port"));
    expect_load_error(fx, ARGS("--port", "80k"), ARGS("invalid value \"80k\""));
    expect_load_error(fx, ARGS("--port", " 80"), ARGS("invalid value \" 80\""));
    expect_load_error(fx, ARGS("--port", "0x50"), ARGS("invalid value \"0x50\""));
    expect_load_error(fx, ARGS("--port", "+80"), ARGS("invalid value \"+80\""));
    expect_load_error(fx, ARGS("--port", "-"), ARGS("invalid value \"-\""));
}

static void test_error_out_of_range(void **state)
{
    struct fixture *fx = *state;

    expect_load_error(fx, ARGS("--port", "70000"),
                      ARGS("invalid value \"70000\" for port (from --port): must be between 0 "
                           "and 65535"));
    expect_load_error(fx, ARGS("--port=-1"), ARGS("must be between 0 and 65535"));
    expect_load_error(fx, ARGS("--workers", "-1"), ARGS("for workers", "between 0 and 64"));
    expect_load_error(fx, ARGS("--ws-max-message-bytes", "124"),
                      ARGS("for ws-max-message-bytes", "between 125 and 67108864"));
    expect_load_error(fx, ARGS("--client-output-hard-limit-bytes", "99999999999999999999999"),
                      ARGS("must be between 0 and 1073741824"));
    setenv("PRESENCED_HTTP_HEADER_TIMEOUT_MS", "99", 1);
    expect_load_error(fx, ARGS(NULL),
                      ARGS("invalid value \"99\" for http-header-timeout-ms (from "
                           "PRESENCED_HTTP_HEADER_TIMEOUT_MS): must be between 100 and 600000"));
}

static void test_error_bad_enum(void **state)
{
    struct fixture *fx = *state;

    expect_load_error(fx, ARGS("--log-level", "loud"),
                      ARGS("invalid value \"loud\" for log-level (from --log-level): must be one "
                           "of debug|info|warn|error"));
    expect_load_error(fx, ARGS("--log-level", "inf"), ARGS("must be one of"));
    expect_load_error(fx, ARGS("--log-level", "infos"), ARGS("must be one of"));
    expect_load_error(fx, ARGS("--log-level", ""), ARGS("must be one of"));
    expect_load_error(fx, ARGS("--log-level", "debug|info"), ARGS("must be one of"));
}

static void test_cross_field_validation(void **state)
{
    struct fixture *fx = *state;

    expect_load_error(fx, ARGS("--client-output-soft-limit-bytes", "2000000"),
                      ARGS("client-output-soft-limit-bytes (2000000) must not exceed "
                           "client-output-hard-limit-bytes (1048576)"));
    /* 0 turns a limit off, so the rule does not apply. */
    assert_int_equal(load(fx, ARGS("--client-output-soft-limit-bytes", "2000000",
                                   "--client-output-hard-limit-bytes", "0")),
                     0);
    assert_int_equal(load(fx, ARGS("--client-output-soft-limit-bytes", "0",
                                   "--client-output-hard-limit-bytes", "10")),
                     0);
    /* Equal limits are fine. */
    assert_int_equal(load(fx, ARGS("--client-output-soft-limit-bytes=10",
                                   "--client-output-hard-limit-bytes=10")),
                     0);
    expect_load_error(fx, ARGS("--heartbeat-min-ms", "20000"),
                      ARGS("heartbeat-min-ms (20000) must not exceed heartbeat-interval-ms "
                           "(15000)"));
    expect_load_error(fx, ARGS("--heartbeat-min-ms", "5000", "--session-ttl-ms", "15000"),
                      ARGS("session-ttl-ms (15000) must be greater than heartbeat-interval-ms "
                           "(15000)"));
    assert_int_equal(load(fx, ARGS("--session-ttl-ms", "15001")), 0);
    assert_int_equal(load(fx, ARGS("--session-ttl-ms", "45000")), 0);
    expect_load_error(fx, ARGS("--bind", "localhost"),
                      ARGS("invalid value \"localhost\" for bind", "IPv4 or IPv6"));
    expect_load_error(fx, ARGS("--bind", ""), ARGS("invalid value \"\" for bind"));
    assert_int_equal(load(fx, ARGS("--bind", "::")), 0);
}

/* ---- --help, --version, config_set, config_workers ---- */

static void test_help_and_version(void **state)
{
    struct fixture *fx = *state;
    char *out;
    int r;

    out = load_capturing_stdout(fx, ARGS("--help"), &r);
    assert_int_equal(r, 1);
    assert_non_null(strstr(out, "usage: presenced"));
    assert_non_null(strstr(out, "--port N  (default 7400, 0..65535)"));
    assert_non_null(strstr(out, "PRESENCED_"));
    free(out);
    /* -h works too, and wins over a bad file that is then never read. */
    out = load_capturing_stdout(fx, ARGS("--config", "/nonexistent", "-h"), &r);
    assert_int_equal(r, 1);
    free(out);
    out = load_capturing_stdout(fx, ARGS("--version"), &r);
    assert_int_equal(r, 1);
    assert_string_equal(out, "presenced 0.1.0\n");
    free(out);
}

static void test_print_help_lists_every_key(void **state)
{
    FILE *f = tmpfile();
    char needle[128], *out;

    (void)state;
    assert_non_null(f);
    config_print_help(f);
    out = slurp(f);
    fclose(f);
    for (size_t i = 0; i < config_ndefs; i++) {
        const struct config_def *d = &config_defs[i];
        const char *first_word_end = strchr(d->help, ' ');

        snprintf(needle, sizeof(needle), "  --%s ", config_defs[i].name);
        if (!strstr(out, needle))
            fail_msg("--help lacks %s", needle);
        snprintf(needle, sizeof(needle), "default %s%s%s", d->type == CONFIG_STRING ? "\"" : "",
                 d->def, d->type == CONFIG_STRING ? "\"" : "");
        if (!strstr(out, needle))
            fail_msg("--help lacks %s", needle);
        snprintf(needle, sizeof(needle), "      %.*s", (int)(first_word_end - d->help), d->help);
        if (!strstr(out, needle))
            fail_msg("--help lacks the help of %s", d->name);
    }
    for (char *line = out; *line; line = strchr(line, '\n') + 1) {
        if ((size_t)(strchr(line, '\n') - line) >= 100)
            fail_msg("--help line too long: %.60s...", line);
    }
    free(out);
}

static void test_config_set(void **state)
{
    struct fixture *fx = *state;
    char *err = fx->err;
    size_t n = sizeof(fx->err);

    assert_int_equal(config_set(&fx->cfg, "port", "9000", err, n), 0);
    assert_int_equal(fx->cfg.port, 9000);
    assert_int_equal(config_set(&fx->cfg, "ws-max-message-bytes", "67108864", err, n), 0);
    assert_int_equal(fx->cfg.ws_max_message_bytes, 67108864);
    assert_int_equal(config_set(&fx->cfg, "static-dir", "/srv/www", err, n), 0);
    assert_string_equal(fx->cfg.static_dir, "/srv/www");
    assert_int_equal(config_set(&fx->cfg, "log-level", "Warn", err, n), 0);
    assert_string_equal(fx->cfg.log_level, "warn");

    assert_int_equal(config_set(&fx->cfg, "nope", "1", err, n), -1);
    assert_string_equal(err, "unknown key \"nope\"");
    assert_int_equal(config_set(&fx->cfg, "port", "65536", err, n), -1);
    assert_string_equal(err, "invalid value \"65536\" for port: must be between 0 and 65535");
    assert_int_equal(fx->cfg.port, 9000); /* a failed set changes nothing */
    assert_int_equal(config_set(&fx->cfg, "port", "1", NULL, 0), 0); /* err is optional */
    assert_int_equal(config_set(&fx->cfg, "port", "x", NULL, 0), -1);
    /* A short buffer gets a truncated, terminated message. */
    assert_int_equal(config_set(&fx->cfg, "port", "x", err, 8), -1);
    assert_string_equal(err, "invalid");
}

static void test_config_workers(void **state)
{
    struct fixture *fx = *state;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    fx->cfg.workers = 3;
    assert_int_equal(config_workers(&fx->cfg), 3);
    fx->cfg.workers = 0;
    assert_true(config_workers(&fx->cfg) >= 1);
    if (cpus >= 1 && cpus <= 64)
        assert_int_equal(config_workers(&fx->cfg), cpus);
}

/* ---- presenced.conf ---- */

/*
 * presenced.conf must list every key of the table exactly once, commented
 * out as "# key = default", right after the table's help sentence (wrapped
 * over comment lines) and nothing else may be active in it.
 */
static void test_sample_conf_matches_table(void **state)
{
    struct fixture *fx = *state;
    const char *dir = getenv("PRESENCED_SRCDIR");
    char path[PATH_MAX], line[512], help[2048] = "";
    int *seen = calloc(config_ndefs, sizeof(*seen));
    int lineno = 0;
    FILE *f;

    assert_non_null(seen);
    snprintf(path, sizeof(path), "%s%spresenced.conf", dir ? dir : "", dir ? "/" : "");
    f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (run from the repository root or set PRESENCED_SRCDIR)", path);
    while (fgets(line, sizeof(line), f)) {
        size_t klen;
        const struct config_def *d;
        const char *value;

        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0') {
            help[0] = '\0';
            continue;
        }
        if (strncmp(line, "# ", 2) != 0 && strcmp(line, "#") != 0)
            fail_msg("%s:%d: not a comment: %s", path, lineno, line);
        klen = strspn(line + 2, "abcdefghijklmnopqrstuvwxyz0123456789-");
        if (klen == 0 || strncmp(line + 2 + klen, " =", 2) != 0) {
            /* A comment line: part of the next key's help. */
            if (help[0])
                strncat(help, " ", sizeof(help) - strlen(help) - 1);
            strncat(help, line + 2, sizeof(help) - strlen(help) - 1);
            continue;
        }
        line[2 + klen] = '\0';
        value = line + 2 + klen + 2;
        value += *value == ' ';
        d = def_named(line + 2);
        if (!d)
            fail_msg("%s:%d: unknown key %s", path, lineno, line + 2);
        if (seen[d - config_defs]++)
            fail_msg("%s:%d: %s appears twice", path, lineno, d->name);
        if (strcmp(value, d->def) != 0)
            fail_msg("%s:%d: %s = %s, but the default is %s", path, lineno, d->name, value, d->def);
        if (strcmp(help, d->help) != 0)
            fail_msg("%s:%d: the help of %s differs from the table:\n  file:  %s\n  table: %s",
                     path, lineno, d->name, help, d->help);
        help[0] = '\0';
    }
    fclose(f);
    for (size_t i = 0; i < config_ndefs; i++) {
        if (!seen[i])
            fail_msg("%s lacks %s", path, config_defs[i].name);
    }
    free(seen);
    /* And the file loads as it stands. */
    assert_int_equal(load(fx, ARGS("--config", path)), 0);
}

/* Uncommenting every key of presenced.conf gives a file that loads to the
 * defaults: the sample's values are in the syntax the parser accepts. */
static void test_sample_conf_uncommented_loads(void **state)
{
    struct fixture *fx = *state;
    const char *dir = getenv("PRESENCED_SRCDIR");
    char path[PATH_MAX], line[512], text[8192] = "";
    FILE *f;

    snprintf(path, sizeof(path), "%s%spresenced.conf", dir ? dir : "", dir ? "/" : "");
    f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f)) {
        size_t klen;

        if (strncmp(line, "# ", 2) != 0)
            continue;
        klen = strspn(line + 2, "abcdefghijklmnopqrstuvwxyz0123456789-");
        if (klen && strncmp(line + 2 + klen, " =", 2) == 0)
            strncat(text, line + 2, sizeof(text) - strlen(text) - 1);
    }
    fclose(f);
    assert_true(strlen(text) < sizeof(text) - 1);
    if (load(fx, ARGS("--config", write_temp(fx, text))) != 0)
        fail_msg("%s", fx->err);
    assert_int_equal(fx->cfg.port, 7400);
    assert_string_equal(fx->cfg.static_dir, "www");
    assert_string_equal(fx->cfg.ws_allowed_origins, "*");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_table_is_sane),
        T(test_defaults),
        T(test_release_is_idempotent),
        T(test_file_parsing),
        T(test_file_from_env),
        T(test_env_overrides_file),
        T(test_flag_overrides_env),
        T(test_flag_equals_form),
        T(test_every_key_by_flag_and_env),
        T(test_error_unknown_key_in_file),
        T(test_error_file_syntax),
        T(test_error_bad_value_in_file),
        T(test_error_unreadable_file),
        T(test_error_unknown_flag),
        T(test_error_missing_value),
        T(test_error_bad_number),
        T(test_error_out_of_range),
        T(test_error_bad_enum),
        T(test_cross_field_validation),
        T(test_help_and_version),
        T(test_print_help_lists_every_key),
        T(test_config_set),
        T(test_config_workers),
        T(test_sample_conf_matches_table),
        T(test_sample_conf_uncommented_loads),
#undef T
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
