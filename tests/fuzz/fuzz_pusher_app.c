/* SPDX-License-Identifier: MIT */
/*
 * fuzz_pusher_app.c - libFuzzer target for the pusher-app list parser.
 * The input (cut at the first NUL) is a pusher-app value. Invariants: no
 * crash or leak; on success 1..max apps, each with a non-empty id, key and
 * secret inside their bounds and a member limit in 1..10000, no two with
 * the same id or key, the first with the empty namespace prefix and every
 * other with "<id>|" (ns.h); on failure a message that starts
 * "pusher-app: ".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ns.h"
#include "pusher_app.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct pusher_app *apps, size_t n)
{
    if (n < 1 || n > 4)
        abort();
    for (size_t i = 0; i < n; i++) {
        if (!apps[i].id[0] || strlen(apps[i].id) > 32 || !apps[i].key[0] || !apps[i].secret[0] ||
            apps[i].member_limit < 1 || apps[i].member_limit > 10000)
            abort();
        if (i == 0
                ? apps[i].ns[0] != '\0'
                : (!ns_prefix_valid(apps[i].ns) || strlen(apps[i].ns) != strlen(apps[i].id) + 1 ||
                   strncmp(apps[i].ns, apps[i].id, strlen(apps[i].id)) != 0))
            abort();
        for (size_t j = 0; j < i; j++)
            if (strcmp(apps[i].id, apps[j].id) == 0 || strcmp(apps[i].key, apps[j].key) == 0)
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pusher_app apps[4];
    char *spec = malloc(size + 1), err[256];
    size_t n;

    if (!spec)
        abort();
    memcpy(spec, data, size);
    spec[size] = '\0';
    err[0] = '\0';
    if (pusher_apps_parse(spec, apps, 4, &n, err, sizeof(err)) == 0)
        check(apps, n);
    else if (strncmp(err, "pusher-app: ", 12) != 0)
        abort();
    free(spec);
    return 0;
}
