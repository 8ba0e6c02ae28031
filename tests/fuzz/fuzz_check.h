/* SPDX-License-Identifier: MIT */
/*
 * fuzz_check.h - the invariant check of the libFuzzer targets: a broken
 * invariant aborts, which libFuzzer reports as a crash with its input.
 */
#ifndef FUZZ_CHECK_H
#define FUZZ_CHECK_H

#include <stdlib.h>

#define CHECK(cond)  \
    do {             \
        if (!(cond)) \
            abort(); \
    } while (0)

#endif
