/* SPDX-License-Identifier: MIT */
/*
 * test_log.c - log lines as text and as JSON: each call is one line on
 * stderr (captured here through a pipe), the level filter drops what is
 * below it, and a JSON line parses as one object whose msg is the text
 * message exactly, quotes, backslashes and control bytes escaped, and
 * invalid UTF-8 written as '?' so the line stays valid JSON.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>
#include <cmocka.h>

#include "log.h"

/* Runs fn with stderr on a pipe; what it wrote, NUL-terminated, in out. */
static void capture(void (*fn)(void), char *out, size_t size)
{
    int fds[2], saved = dup(STDERR_FILENO);
    ssize_t n;

    assert_int_equal(pipe(fds), 0);
    dup2(fds[1], STDERR_FILENO);
    fn();
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fds[1]);
    n = read(fds[0], out, size - 1);
    close(fds[0]);
    out[n > 0 ? n : 0] = '\0';
}

static void write_text(void)
{
    log_set_json(false);
    log_init(LOG_INFO);
    log_debug("test", "hidden %d", 1);
    log_info("test", "shown %d", 2);
}

static void write_json(void)
{
    log_set_json(true);
    log_init(LOG_INFO);
    log_warnx("mod", "a \"quote\" a \\ and a\nnewline \x01 é");
    log_info("mod", "bad utf-8 \xff\xfe end");
    log_set_json(false);
}

static void test_text(void **state)
{
    char out[4096];

    (void)state;
    capture(write_text, out, sizeof(out));
    assert_null(strstr(out, "hidden"));
    assert_non_null(strstr(out, " info test: shown 2\n"));
    assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out)); /* one line */
}

static void test_json(void **state)
{
    char out[4096], *nl;
    cJSON *a, *b;

    (void)state;
    capture(write_json, out, sizeof(out));
    nl = strchr(out, '\n');
    assert_non_null(nl);
    *nl = '\0';
    a = cJSON_Parse(out);
    b = cJSON_Parse(nl + 1);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(a, "level")), "warn");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(a, "module")), "mod");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(a, "msg")),
                        "a \"quote\" a \\ and a\nnewline \x01 é");
    assert_int_equal(strlen(cJSON_GetStringValue(cJSON_GetObjectItem(a, "time"))), 24);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(b, "msg")), "bad utf-8 ?? end");
    cJSON_Delete(a);
    cJSON_Delete(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
