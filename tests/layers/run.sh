#!/usr/bin/env bash
# run.sh - the layering rule (src/layers) holds, and both of its checks
# catch a violation.
#
# 1. scripts/check-layers passes on the tree as it is.
# 2. In a scratch copy of the tree, an upward #include planted in a core
#    file (core/presence.c including engine.h) fails check-layers AND
#    fails to compile (the core's objects see no engine headers).
# 3. In another scratch copy, an upward call without any include (the
#    same file calling engine_tick()) compiles, but the core's unit test
#    (test_presence, which links core, store and base only) fails to link
#    with an undefined reference to it. The unplanted copy links first,
#    so the failure can only be the planted call.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
fail() { echo "layers: FAIL: $*"; exit 1; }

scripts/check-layers src || fail "the tree breaks the layering rule"

scratch() { # dir: a copy of what a build needs
  mkdir -p "$1"
  cp -r "$root/src" "$root/Makefile" "$root/scripts" "$1/"
  mkdir -p "$1/tests" && cp -r "$root/tests/unit" "$1/tests/"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 2: an upward include.
scratch "$tmp/inc"
sed -i '0,/^#include ".*"$/s//&\n#include "engine.h"/' "$tmp/inc/src/core/presence.c"
grep -q '#include "engine.h"' "$tmp/inc/src/core/presence.c" || fail "could not plant the include"
if out=$(cd "$tmp/inc" && scripts/check-layers src 2>&1); then
  fail "check-layers accepted core/presence.c including engine.h"
fi
grep -q 'presence.c:.*engine.h (engine), above core' <<<"$out" || fail "check-layers said: $out"
echo "layers: check-layers refuses the planted include: $out"
if (cd "$tmp/inc" && make -s BUILD=release build/release/src/core/presence.o) >"$tmp/inc.log" 2>&1; then
  fail "core/presence.c compiled with an engine include"
fi
grep -q 'engine.h: No such file' "$tmp/inc.log" || fail "the compile failed for another reason: $(tail -3 "$tmp/inc.log")"
echo "layers: the planted include does not compile: $(grep -m1 'engine.h' "$tmp/inc.log")"

# 3: an upward call, no include.
scratch "$tmp/call"
(cd "$tmp/call" && make -s -j2 BUILD=release build/release/tests/test_presence) >"$tmp/call0.log" 2>&1 ||
  fail "the unplanted core test does not link: $(tail -3 "$tmp/call0.log")"
cat >>"$tmp/call/src/core/presence.c" <<'C'

/* Planted by tests/layers/run.sh: a call from the core up into the engine. */
void presence__planted(void);
void presence__planted(void)
{
    extern void engine_tick(void *e);
    engine_tick(0);
}
C
if (cd "$tmp/call" && make -s BUILD=release build/release/tests/test_presence) >"$tmp/call.log" 2>&1; then
  fail "test_presence linked with a call into the engine"
fi
grep -q "undefined reference to \`engine_tick'" "$tmp/call.log" ||
  fail "the link failed for another reason: $(tail -3 "$tmp/call.log")"
echo "layers: the planted call does not link: $(grep -m1 'undefined reference' "$tmp/call.log")"
echo "layers: ok"
