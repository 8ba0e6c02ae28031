/* SPDX-License-Identifier: MIT */
/*
 * fuzz_jwt.c - libFuzzer target for the JWT verifier: arbitrary bytes as a
 * compact token against an HS256 key. Invariants: no crash, no over-read
 * (ASan), and an accepted token's claims are well-formed strings.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jwt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct jwt_key key;
    static int loaded;
    struct jwt_opts opts = {.leeway_s = 30, .aud = NULL, .iss = NULL};
    struct jwt_claims cl;
    char *tok;

    if (!loaded) {
        static const char secret[] = "fuzzing-secret-fuzzing-secret-0123";
        if (jwt_key_load_hmac(&key, secret, sizeof(secret) - 1) != 0)
            abort();
        loaded = 1;
    }
    /* An exact-size copy, so any read past the token is caught. */
    tok = malloc(size ? size : 1);
    memcpy(tok, data, size);
    if (jwt_verify(&key, &opts, tok, size, 1764406800, &cl) == 0) {
        if (cl.sub[0] == '\0' || strlen(cl.sub) > JWT_ID_MAX || cl.nrooms > JWT_ROOMS_MAX)
            abort();
        (void)jwt_claims_allow_room(&cl, "room-1");
    }
    free(tok);
    return 0;
}
