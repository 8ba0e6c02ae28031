#!/usr/bin/env bash
# tests/cluster/run.sh - the multi-node suite (docs/cluster.md): several
# presenced nodes over real Redis (standalone shards and a 3-master
# Cluster, started by each test on free loopback ports) and one PostgreSQL
# settings store, started here (tests/pg/cluster.sh) and removed on exit.
# Run from the repository root after `make BUILD=asan all unit`. With
# arguments, runs that command instead, with the same PostgreSQL (e.g.
# tests/cluster/run.sh node --test tests/cluster/topology.test.mjs).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)

free_port() {
  local p
  for _ in $(seq 200); do
    p=$((15000 + RANDOM % 17000))
    ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return 0; }
  done
  return 1
}
command -v redis-server >/dev/null || { echo "tests/cluster: redis-server is missing (make setup)" >&2; exit 1; }

export PGRUN=/run/presenced-test/pgc-$(printf %s "$root" | md5sum | cut -c1-10)
export PGPORT=$(free_port)
export PGDATABASE=presence_test
export PRESENCED_TEST_PG="postgresql://postgres@127.0.0.1:$PGPORT/$PGDATABASE"
cluster=$root/tests/pg/cluster.sh
trap '"$cluster" down' EXIT
trap 'exit 130' INT TERM
t0=$(date +%s)
"$cluster" up || { echo "tests/cluster: cannot start postgresql" >&2; exit 1; }
rc=0
if [ $# -gt 0 ]; then "$@" || rc=1; else # a command (make soak-cluster), or the suite:
${NODE_TEST:-node --test --test-force-exit} --test-concurrency=2 tests/cluster/*.test.mjs || rc=1
node tests/soak/cluster-soak.mjs --seed 1 --seconds 30 || rc=1
fi
echo "tests/cluster: $([ $rc -eq 0 ] && echo passed || echo FAILED) in $(($(date +%s) - t0)) s"
exit $rc
