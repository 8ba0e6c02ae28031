/* SPDX-License-Identifier: MIT */
/*
 * guard.h - test helper: place bytes at the very end of a mapping that is
 * followed by a PROT_NONE page (picohttpparser's test trick), so a parser
 * that reads even one byte past its input crashes at once.
 *
 * guard_place() copies (p, n) there and returns the copy; guard_free()
 * unmaps it. Header-only; aborts when mmap fails (a test machine problem).
 */
#ifndef GUARD_H
#define GUARD_H

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct guard {
    char *base;  /* start of the mapping */
    size_t size; /* data pages + the guard page */
    char *data;  /* the copy: ends exactly at the guard page */
};

static inline struct guard guard_place(const void *p, size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t data_pages = (n + page - 1) / page;
    struct guard g;

    if (data_pages == 0)
        data_pages = 1;
    g.size = (data_pages + 1) * page;
    g.base = mmap(NULL, g.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g.base == MAP_FAILED)
        abort();
    if (mprotect(g.base + data_pages * page, page, PROT_NONE) != 0)
        abort();
    g.data = g.base + data_pages * page - n;
    if (n)
        memcpy(g.data, p, n);
    return g;
}

static inline void guard_free(struct guard *g)
{
    munmap(g->base, g->size);
    g->base = g->data = NULL;
}

#endif
