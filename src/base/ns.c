/* SPDX-License-Identifier: MIT */
/*
 * ns.c - namespace prefixes of internal ids (ns.h).
 */
#include "ns.h"

#include <string.h>

static bool app_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

int ns_prefix_len(const char *id)
{
    const char *sep = strchr(id, NS_SEP);
    size_t n;

    if (!sep)
        return 0;
    n = (size_t)(sep - id);
    if (n == 0 || n > NS_APP_MAX || strchr(sep + 1, NS_SEP))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!app_char(id[i]))
            return -1;
    return (int)n + 1;
}

const char *ns_strip(const char *id)
{
    const char *sep = strchr(id, NS_SEP);

    return sep ? sep + 1 : id;
}

bool ns_in(const char *id, const char *prefix)
{
    if (!prefix[0])
        return strchr(id, NS_SEP) == NULL;
    return strncmp(id, prefix, strlen(prefix)) == 0;
}

bool ns_prefix_valid(const char *prefix)
{
    size_t n = strlen(prefix);

    return n == 0 || (prefix[n - 1] == NS_SEP && ns_prefix_len(prefix) == (int)n);
}

bool ns_join(const char *prefix, const char *wire, char *out, size_t max)
{
    size_t p = strlen(prefix), w = strlen(wire);

    if (p + w > max) {
        out[0] = '\0';
        return false;
    }
    memcpy(out, prefix, p);
    memcpy(out + p, wire, w + 1);
    return true;
}

void ns_prefix_of(const char *id, char out[NS_PREFIX_MAX + 1])
{
    int n = ns_prefix_len(id);

    if (n <= 0)
        n = 0;
    memcpy(out, id, (size_t)n);
    out[n] = '\0';
}
