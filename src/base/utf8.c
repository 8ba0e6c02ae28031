/* SPDX-License-Identifier: MIT */
/*
 * utf8.c - the UTF-8 validating DFA: a byte-class table and a transition
 * table, both derived from the UTF8-octets grammar of RFC 3629 §4:
 *
 *   UTF8-1 = %x00-7F
 *   UTF8-2 = %xC2-DF UTF8-tail
 *   UTF8-3 = %xE0 %xA0-BF UTF8-tail / %xE1-EC 2( UTF8-tail ) /
 *            %xED %x80-9F UTF8-tail / %xEE-EF 2( UTF8-tail )
 *   UTF8-4 = %xF0 %x90-BF 2( UTF8-tail ) / %xF1-F3 3( UTF8-tail ) /
 *            %xF4 %x80-8F 2( UTF8-tail )
 *   UTF8-tail = %x80-BF
 *
 * Every byte falls in one of 12 classes that the grammar never needs to
 * tell apart; each state is "how many tail bytes are still owed, and which
 * range the next one must fall in". The restricted second-byte ranges are
 * what exclude overlongs (E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and
 * code points above U+10FFFF (F4 90..BF); C0, C1 and F5..FF can never
 * appear. States are stored premultiplied by the class count so that one
 * step is one table load: next = trans[state + class[byte]].
 * Pure ASCII runs in the accept state are skipped eight bytes at a time.
 */
#include "utf8.h"

#include <string.h>

/* Byte classes. */
enum {
    C_ASCII, /* 00..7F */
    C_T8,    /* 80..8F: tail, also the only second byte allowed after F4 */
    C_T9,    /* 90..9F: tail, allowed after ED, F0 */
    C_TA,    /* A0..BF: tail, allowed after E0, F0 */
    C_BAD,   /* C0, C1, F5..FF: never valid */
    C_L2,    /* C2..DF: lead of 2 */
    C_E0,    /* E0: lead of 3, second byte A0..BF */
    C_L3,    /* E1..EC, EE, EF: lead of 3 */
    C_ED,    /* ED: lead of 3, second byte 80..9F */
    C_F0,    /* F0: lead of 4, second byte 90..BF */
    C_L4,    /* F1..F3: lead of 4 */
    C_F4,    /* F4: lead of 4, second byte 80..8F */
    C_COUNT
};

/* States, premultiplied by C_COUNT. */
#define S_ACC 0u  /* UTF8_ACCEPT */
#define S_REJ 12u /* UTF8_REJECT */
#define S_1   24u /* one tail byte owed */
#define S_2   36u /* two tail bytes owed */
#define S_E0  48u /* after E0: A0..BF, then one */
#define S_ED  60u /* after ED: 80..9F, then one */
#define S_3   72u /* three tail bytes owed */
#define S_F0  84u /* after F0: 90..BF, then two */
#define S_F4  96u /* after F4: 80..8F, then two */

_Static_assert(S_ACC == UTF8_ACCEPT && S_REJ == UTF8_REJECT, "public state values");
_Static_assert(C_COUNT == 12, "states are premultiplied by 12");

/* clang-format off */
static const uint8_t utf8_class[256] = {
    /* 00..7F */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    /* 80..8F */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    /* 90..9F */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    /* A0..BF */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    /* C0..DF: C0 and C1 would only encode overlong ASCII */
    4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5,
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5,
    /* E0..EF */
    6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 7,
    /* F0..FF: F5 and above would encode beyond U+10FFFF */
    9, 10, 10, 10, 11, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
};

#define R S_REJ
static const uint8_t utf8_trans[9 * C_COUNT] = {
    /*        ASCII  T8    T9    TA    BAD  L2   E0    L3   ED    F0    L4   F4 */
    /* ACC */ S_ACC, R,    R,    R,    R,   S_1, S_E0, S_2, S_ED, S_F0, S_3, S_F4,
    /* REJ */ R,     R,    R,    R,    R,   R,   R,    R,   R,    R,    R,   R,
    /* 1   */ R,     S_ACC, S_ACC, S_ACC, R, R,  R,    R,   R,    R,    R,   R,
    /* 2   */ R,     S_1,  S_1,  S_1,  R,   R,   R,    R,   R,    R,    R,   R,
    /* E0  */ R,     R,    R,    S_1,  R,   R,   R,    R,   R,    R,    R,   R,
    /* ED  */ R,     S_1,  S_1,  R,    R,   R,   R,    R,   R,    R,    R,   R,
    /* 3   */ R,     S_2,  S_2,  S_2,  R,   R,   R,    R,   R,    R,    R,   R,
    /* F0  */ R,     R,    S_2,  S_2,  R,   R,   R,    R,   R,    R,    R,   R,
    /* F4  */ R,     S_2,  R,    R,    R,   R,   R,    R,   R,    R,    R,   R,
};
#undef R
/* clang-format on */

#define HIGH_BITS 0x8080808080808080ull

/* Number of leading bytes of (s, n) that are ASCII, counted in words. */
static size_t ascii_run(const uint8_t *s, size_t n)
{
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (w & HIGH_BITS)
            break;
    }
    return i;
}

uint32_t utf8_step(uint32_t state, const void *p, size_t n)
{
    const uint8_t *s = p;
    size_t i = 0;

    while (i < n && state != UTF8_REJECT) {
        if (state == UTF8_ACCEPT && s[i] < 0x80) {
            i += ascii_run(s + i, n - i);
            /* finish the run (or the short tail) byte by byte */
            while (i < n && s[i] < 0x80)
                i++;
            continue;
        }
        state = utf8_trans[state + utf8_class[s[i]]];
        i++;
    }
    return state;
}

bool utf8_valid(const void *p, size_t n)
{
    return utf8_step(UTF8_ACCEPT, p, n) == UTF8_ACCEPT;
}

size_t utf8_valid_prefix(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint32_t state = UTF8_ACCEPT;
    size_t good = 0;

    for (size_t i = 0; i < n; i++) {
        state = utf8_trans[state + utf8_class[s[i]]];
        if (state == UTF8_REJECT)
            break;
        if (state == UTF8_ACCEPT)
            good = i + 1;
    }
    return good;
}
