#!/usr/bin/env bash
# tests/pg/run.sh - the PostgreSQL suite. Run from the repository root after
# `make BUILD=asan all unit` (as root, or as postgres).
#
# Starts a throwaway PostgreSQL 15 cluster on a free loopback port
# (cluster.sh), exports PRESENCED_TEST_PG (its URI) and
# PRESENCED_TEST_PG_CTL (cluster.sh, to stop and restart it), runs
# build/asan/tests/test_store_pg, then every tests/pg/*.test.mjs with
# node --test. The cluster is removed on exit, whatever happens; the exit
# status is non-zero when anything failed. The run directory is derived
# from the checkout's path, so a rerun replaces what an interrupted run
# left behind while another checkout's suite can run at the same time.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)
BUILD_DIR=${BUILD_DIR:-build/asan}

free_port() {
  local p
  for _ in $(seq 200); do
    p=$((15000 + RANDOM % 17000)) # below the ephemeral range (32768-60999)
    ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return 0; }
  done
  return 1
}

export PGRUN=${PGRUN:-/run/presenced-test/pg-$(printf %s "$root" | md5sum | cut -c1-10)}
export PGPORT=${PRESENCED_TEST_PG_PORT:-$(free_port)} # not an inherited libpq PGPORT
export PGDATABASE=presence_test
export PRESENCED_TEST_PG="postgresql://postgres@127.0.0.1:$PGPORT/$PGDATABASE"
export PRESENCED_TEST_PG_CTL="$root/tests/pg/cluster.sh"
cluster=$root/tests/pg/cluster.sh

bin=$BUILD_DIR/tests/test_store_pg
if [ ! -x "$bin" ]; then
  echo "tests/pg: $bin is missing: run make BUILD=asan all unit first" >&2
  exit 1
fi

trap '"$cluster" down' EXIT
trap 'exit 130' INT TERM
t0=$(date +%s)
"$cluster" up || { echo "tests/pg: cannot start postgresql" >&2; exit 1; }
echo "tests/pg: postgresql on 127.0.0.1:$PGPORT ($PGRUN), up in $(($(date +%s) - t0)) s"

rc=0
echo "--- $bin"
"$bin" || rc=1

shopt -s nullglob
mjs=(tests/pg/*.test.mjs)
if [ ${#mjs[@]} -gt 0 ]; then
  echo "--- node --test ${mjs[*]}"
  ${NODE_TEST:-node --test --test-force-exit} "${mjs[@]}" || rc=1
fi
[ $rc -eq 0 ] || { echo "tests/pg: postgresql log tail:" >&2; tail -20 "$PGRUN/pg.log" >&2; }
echo "tests/pg: $([ $rc -eq 0 ] && echo passed || echo FAILED) in $(($(date +%s) - t0)) s"
exit $rc
