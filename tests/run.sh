#!/usr/bin/env bash
# run.sh - every test suite of presenced, in order; used by `make test`.
#
# Expects the ASan+UBSan build in build/asan (server + unit tests) and the
# libFuzzer build in build/fuzz (make test builds both first). Each suite's
# output goes to the terminal and to tests/out/<suite>.log. The last line is
# "suites: N passed, N failed"; the exit status is non-zero when any failed.
#
# Nothing may hang the run: every suite has a time limit (SUITE_TIMEOUT
# seconds, default 1200; past it the suite's process group is killed and the
# suite fails), and node's test runner gets a limit per test
# (NODE_TEST_TIMEOUT ms, default 300000) and --test-force-exit, so a test
# file whose tests are done but whose event loop is not (a third-party
# client's stray reconnect timer, as pusher-js can leave) ends instead of
# waiting forever. The node flags are exported as NODE_TEST for the suite
# scripts (tests/cluster, tests/pg).
set -uo pipefail
cd "$(dirname "$0")/.."

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export PRESENCED_BIN=${PRESENCED_BIN:-$PWD/build/asan/presenced}
export PRESENCED_SRCDIR=$PWD
PY=/usr/bin/python3   # Debian's interpreter: it sees python3-websockets

SUITE_TIMEOUT=${SUITE_TIMEOUT:-1200}
export NODE_TEST="node --test --test-force-exit --test-timeout=${NODE_TEST_TIMEOUT:-300000}"

mkdir -p tests/out
passed=0 failed=0 failed_names=()

suite_pid=
trap '[ -n "$suite_pid" ] && kill -TERM -- "-$suite_pid" 2>/dev/null; exit 130' INT TERM

suite() { # name command...
  local name=$1; shift
  echo "=== suite $name: $*"
  local start=$SECONDS
  # timeout runs the suite in a process group of its own, killed whole at
  # the limit; a Ctrl-C or TERM of this script is passed on to it (trap).
  timeout -k 20 "$SUITE_TIMEOUT" "$@" > >(tee "tests/out/$name.log") 2>&1 &
  suite_pid=$!
  wait "$suite_pid"
  local rc=$?
  suite_pid=
  if [ $rc -eq 124 ]; then echo "=== suite $name: over its limit of $SUITE_TIMEOUT s, killed"; fi
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1)); echo "=== suite $name: ok ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1)); failed_names+=("$name"); echo "=== suite $name: FAILED ($((SECONDS - start)) s)"
  fi
}

unit_all() {
  local rc=0
  for t in build/asan/tests/test_*; do
    [ -x "$t" ] || continue
    case $t in *_pg) continue ;; esac # run by the postgres suite, which starts PostgreSQL
    echo "--- $t"
    "$t" || rc=1
  done
  return $rc
}

export -f unit_all
suite unit bash -c unit_all
[ -x tests/layers/run.sh ] && suite layers tests/layers/run.sh
[ -x tests/pkg/run.sh ] && suite pkg tests/pkg/run.sh
[ -x tests/fuzz/run.sh ] && suite fuzz-replay env FUZZ_BURST_SECONDS="${FUZZ_BURST_SECONDS:-4}" tests/fuzz/run.sh --replay build/fuzz
[ -x tests/conformance/run.sh ] && suite conformance-calibration tests/conformance/run.sh calibrate
[ -x tests/conformance/run.sh ] && suite conformance tests/conformance/run.sh presenced "$PRESENCED_BIN"
# Integration: two files at a time, but a file whose first lines hold the
# marker "// run-alone" (it measures one client's latency while another
# floods: another file's load would be what it measures) after them, alone.
integration_node() {
  local alone=() rest=() f rc=0
  for f in tests/integration/*.test.mjs; do
    if head -n 20 "$f" | grep -q '^// run-alone'; then alone+=("$f"); else rest+=("$f"); fi
  done
  $NODE_TEST --test-concurrency=2 "${rest[@]}" || rc=1
  if [ ${#alone[@]} -gt 0 ]; then $NODE_TEST --test-concurrency=1 "${alone[@]}" || rc=1; fi
  return $rc
}
export -f integration_node
ls tests/integration/*.test.mjs >/dev/null 2>&1 && suite integration-node bash -c integration_node
[ -f tests/soak/soak.mjs ] && suite soak node tests/soak/soak.mjs --seed 1 --seconds 40
ls tests/integration/test_*.py >/dev/null 2>&1 && \
  suite integration-python $PY -m unittest discover -s tests/integration -p 'test_*.py' -v
[ -d clients/js/test ] && suite js-sdk bash -c "cd clients/js && $NODE_TEST test/"
ls tests/browser/*.test.mjs >/dev/null 2>&1 && \
  suite browser $NODE_TEST --test-concurrency=1 tests/browser/
[ -x tests/pg/run.sh ] && suite postgres tests/pg/run.sh
[ -x tests/cluster/run.sh ] && suite cluster tests/cluster/run.sh
[ -x bench/run.sh ] && suite bench-quick bench/run.sh quick

echo
[ ${#failed_names[@]} -eq 0 ] || echo "failed suites: ${failed_names[*]}"
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
