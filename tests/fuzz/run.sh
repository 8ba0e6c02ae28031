#!/usr/bin/env bash
# run.sh - runs every libFuzzer target of presenced over its corpus.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS   fuzz each target for SECONDS
#   tests/fuzz/run.sh --replay BUILD_DIR  replay each corpus, then a short
#                                         burst (FUZZ_BURST_SECONDS, default
#                                         10); what `make test` runs
#
# Targets are discovered: every executable BUILD_DIR/fuzz/fuzz_<name>, with
# its seed corpus in tests/fuzz/corpus/fuzz_<name>/ (may be missing or
# empty). The repository corpus is only read: fuzzing works on a scratch
# copy, BUILD_DIR/fuzz-corpus/<target>/ (kept between runs, so findings
# accumulate), and the replay burst on a temporary one. To keep what a run
# found, minimise it into the repository deliberately:
#   BUILD_DIR/fuzz/fuzz_http -merge=1 tests/fuzz/corpus/fuzz_http BUILD_DIR/fuzz-corpus/fuzz_http
# Crashing inputs are written to BUILD_DIR/fuzz-artifacts/. The exit status
# is non-zero when any target crashed or a source has no binary.
set -uo pipefail
cd "$(dirname "$0")/../.."

usage() {
  echo "usage: $0 BUILD_DIR SECONDS | $0 --replay BUILD_DIR" >&2
  exit 2
}

replay=0
if [ "${1:-}" = "--replay" ]; then
  replay=1
  [ $# -eq 2 ] || usage
  build=$2
  seconds=${FUZZ_BURST_SECONDS:-10}
else
  [ $# -eq 2 ] || usage
  build=$1
  seconds=$2
fi
case $seconds in '' | *[!0-9]*) usage ;; esac

# libFuzzer stops on ASan reports by itself; UBSan must be told to.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}

artifacts=$build/fuzz-artifacts
mkdir -p "$artifacts"
flags=(-timeout=25 -rss_limit_mb=2048 -print_final_stats=1 "-artifact_prefix=$artifacts/")

targets=()
for bin in "$build"/fuzz/fuzz_*; do
  case $bin in *.*) continue ;; esac # compiler by-products (.d, .o)
  [ -f "$bin" ] && [ -x "$bin" ] && targets+=("$bin")
done
rc=0
for src in tests/fuzz/fuzz_*.c; do
  [ -e "$src" ] || continue
  name=$(basename "$src" .c)
  if [ ! -x "$build/fuzz/$name" ]; then
    echo "fuzz: $name: no binary in $build/fuzz (build it: make fuzz-build)" >&2
    rc=1
  fi
done
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no targets in $build/fuzz"
  exit $rc
fi

failed=()
for bin in "${targets[@]}"; do
  name=$(basename "$bin")
  corpus=tests/fuzz/corpus/$name
  seeds=()
  [ -d "$corpus" ] && while IFS= read -r -d '' f; do seeds+=("$f"); done \
    < <(find "$corpus" -maxdepth 1 -type f -print0 | sort -z)
  ok=1
  if [ $replay -eq 1 ]; then
    echo "=== $name: replay ${#seeds[@]} inputs, then ${seconds}s"
    if [ ${#seeds[@]} -gt 0 ]; then
      "$bin" "${flags[@]}" "${seeds[@]}" >"$build/fuzz-$name-replay.log" 2>&1 || ok=0
      [ $ok -eq 1 ] || tail -n 40 "$build/fuzz-$name-replay.log"
    fi
    if [ $ok -eq 1 ] && [ "$seconds" -gt 0 ]; then
      scratch=$(mktemp -d)
      [ ${#seeds[@]} -gt 0 ] && cp "${seeds[@]}" "$scratch/"
      "$bin" "${flags[@]}" -max_total_time="$seconds" "$scratch" 2>&1 | tail -n 40 || ok=0
      rm -rf "$scratch"
    fi
  else
    scratch=$build/fuzz-corpus/$name
    mkdir -p "$scratch"
    [ ${#seeds[@]} -gt 0 ] && cp -n "${seeds[@]}" "$scratch/"
    echo "=== $name: fuzz ${seconds}s over $scratch"
    "$bin" "${flags[@]}" -max_total_time="$seconds" "$scratch" || ok=0
  fi
  if [ $ok -eq 1 ]; then
    echo "=== $name: ok"
  else
    echo "=== $name: FAILED (inputs in $artifacts)"
    failed+=("$name")
  fi
done

[ ${#failed[@]} -eq 0 ] || { echo "fuzz: failed: ${failed[*]}"; rc=1; }
exit $rc
