#!/usr/bin/env bash
# scripts/run-cluster.sh - `make run-cluster`: presenced as several nodes on
# loopback (docs/cluster.md), for trying it by hand. Starts one Redis, one
# throwaway PostgreSQL settings store (tests/pg/cluster.sh, as the tests
# start it) and three nodes n1..n3 on ports 7401-7403, each serving the
# demo page like `make run`, prints their URLs, and stops everything on
# Ctrl-C (SIGINT) or SIGTERM. Nothing is kept: PostgreSQL's data directory
# is removed, Redis saves nothing.
#
# Environment (all optional):
#   PRESENCED_BIN               the binary (build/release/presenced)
#   PRESENCED_CLUSTER_PORTS     the nodes' ports, one node each ("7401 7402 7403")
#   PRESENCED_CLUSTER_REDIS_PORT  Redis's port (6390 if free, else a free one)
#   PRESENCED_CLUSTER_PG_PORT   PostgreSQL's port (a free one)
#
# Logs and the servers' files go to a run directory of its own,
# /run/presenced-cluster/<checkout>-<first port>/, removed at the end.
# Runs as root (PostgreSQL runs as the postgres user, like in the tests).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)

bin=${PRESENCED_BIN:-$root/build/release/presenced}
read -r -a ports <<<"${PRESENCED_CLUSTER_PORTS:-7401 7402 7403}"
run=/run/presenced-cluster/$(printf %s "$root" | md5sum | cut -c1-8)-${ports[0]:-x}
pg=$root/tests/pg/cluster.sh

say() { echo "run-cluster: $*"; }
die() { echo "run-cluster: $*" >&2; exit 1; }

is_free() { ! ss -Htln "sport = :$1" | grep -q .; }

free_port() {
  local p
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 30000))
    is_free "$p" && { echo "$p"; return 0; }
  done
  return 1
}

# Polls "$@" every 0.1 s, at most $1 tenths of a second.
wait_for() {
  local tries=$1
  shift
  for _ in $(seq "$tries"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/readyz")" = 200 ]; }

# ---- stopping: the nodes first (they drain), then Redis and PostgreSQL ----

node_pids=()
redis_pid=
pg_up=

stop_all() {
  trap '' INT TERM
  [ ${#node_pids[@]} -gt 0 ] && kill -TERM "${node_pids[@]}" 2>/dev/null
  for p in "${node_pids[@]}"; do wait "$p" 2>/dev/null; done
  if [ -n "$redis_pid" ]; then
    kill -TERM "$redis_pid" 2>/dev/null
    wait "$redis_pid" 2>/dev/null
  fi
  [ -n "$pg_up" ] && PGRUN=$run/pg PGPORT=$pg_port "$pg" down
  rm -rf "$run"
  say "stopped"
}

# ---- checks before anything starts ----

[ ${#ports[@]} -ge 1 ] || die "PRESENCED_CLUSTER_PORTS names no port"
[ -x "$bin" ] || die "$bin is missing: run make first (make run-cluster builds it)"
command -v redis-server >/dev/null || die "redis-server is missing (make setup)"
for p in "${ports[@]}"; do
  [[ $p =~ ^[0-9]+$ ]] || die "not a port: $p"
  is_free "$p" || die "port $p is in use"
done
redis_port=${PRESENCED_CLUSTER_REDIS_PORT:-}
if [ -z "$redis_port" ]; then
  if is_free 6390; then redis_port=6390; else redis_port=$(free_port) || die "no free port for redis"; fi
fi
pg_port=${PRESENCED_CLUSTER_PG_PORT:-$(free_port)} || die "no free port for postgresql"

trap 'stop_all; exit 0' INT TERM
trap 'stop_all; exit 1' HUP

rm -rf "$run"
mkdir -p "$run/redis" || die "cannot create $run"

# ---- Redis, PostgreSQL, the nodes ----

redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
  --dir "$run/redis" >"$run/redis.log" 2>&1 &
redis_pid=$!
wait_for 100 redis-cli -p "$redis_port" ping || { tail "$run/redis.log" >&2; stop_all; die "redis did not start"; }

pg_up=1
PGRUN=$run/pg PGPORT=$pg_port PGDATABASE=presenced "$pg" up || { stop_all; die "postgresql did not start"; }
store=postgresql://postgres@127.0.0.1:$pg_port/presenced

for i in "${!ports[@]}"; do
  "$bin" --bind 127.0.0.1 --port "${ports[$i]}" --node-id "n$((i + 1))" \
    --redis "redis://127.0.0.1:$redis_port" --store "$store" >"$run/n$((i + 1)).log" 2>&1 &
  node_pids+=($!)
done
for i in "${!ports[@]}"; do
  wait_for 150 ready "${ports[$i]}" || {
    tail "$run/n$((i + 1)).log" >&2
    stop_all
    die "node n$((i + 1)) did not become ready on port ${ports[$i]}"
  }
done

say "redis pid $redis_pid on 127.0.0.1:$redis_port"
say "postgresql pid $(head -1 "$run/pg/data/postmaster.pid") on 127.0.0.1:$pg_port"
for i in "${!ports[@]}"; do
  say "node n$((i + 1)) pid ${node_pids[$i]}: http://127.0.0.1:${ports[$i]}/"
done
say "logs in $run; open two nodes in two windows; Ctrl-C stops everything"

# Until a signal, or until a node or Redis exits by itself (then stop the rest).
wait -n "${node_pids[@]}" "$redis_pid"
say "a process exited by itself; stopping the others"
stop_all
exit 1
