/* SPDX-License-Identifier: MIT */
/*
 * fuzz_json.c - libFuzzer target for json_check and json_append_string.
 *
 * The input is a client message's bytes. Each check reads from an exactly
 * sized heap copy, so ASan catches a read past the end. Checked:
 *   - json_check returns 0 or an enum json_error;
 *   - what it accepts, cJSON parses (json_check is the stricter of the
 *     two), and every string in the tree is valid UTF-8 (no NUL cut it
 *     short: the tree printed again is accepted again);
 *   - json_append_string of the raw bytes is valid UTF-8 and, unless the
 *     input holds a NUL (escaped as \u0000, which json_check refuses), a
 *     JSON string that json_check accepts.
 * A broken invariant aborts, which libFuzzer reports as a crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "json.h"
#include "utf8.h"
#include "util.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool is_result(int r)
{
    switch (r) {
    case 0:
    case JSON_E_SYNTAX:
    case JSON_E_TRAILING:
    case JSON_E_CONTROL:
    case JSON_E_NUL:
    case JSON_E_UTF8:
    case JSON_E_DEPTH:
        return true;
    default:
        return false;
    }
}

/* Every string (values and member names) of an accepted tree. */
static void check_strings(const cJSON *v)
{
    for (; v; v = v->next) {
        if (v->string)
            CHECK(utf8_valid(v->string, strlen(v->string)));
        if (cJSON_IsString(v))
            CHECK(utf8_valid(v->valuestring, strlen(v->valuestring)));
        check_strings(v->child);
    }
}

static void check_accepted(const char *p, size_t n)
{
    cJSON *root = cJSON_ParseWithLength(p, n);
    char *again;

    CHECK(root != NULL);
    check_strings(root);
    again = cJSON_PrintUnformatted(root);
    /* cJSON prints numbers it cannot write as JSON (overflowing doubles)
     * as null, which is still JSON. */
    CHECK(again && json_check(again, strlen(again)) == 0);
    free(again);
    cJSON_Delete(root);
}

static void check_escaping(const char *p, size_t n)
{
    struct buf b = {0};

    json_append_string(&b, p, n);
    CHECK(utf8_valid(b.data, b.len));
    if (!memchr(p, '\0', n))
        CHECK(json_check(b.data, b.len) == 0);
    buf_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *p = malloc(size ? size : 1);
    int r;

    if (size)
        memcpy(p, data, size);
    r = json_check(p, size);
    CHECK(is_result(r));
    if (r == 0)
        check_accepted(p, size);
    check_escaping(p, size);
    free(p);
    return 0;
}
