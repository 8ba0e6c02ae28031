#!/usr/bin/env bash
# redis-anchor.sh - start/stop a throwaway Redis (Debian's redis-server) on
# 127.0.0.1:PORT, the raw pub/sub fan-out anchor of the benchmark (W4).
#
#   bench/peers/redis-anchor.sh up PORT     # start (no-op if already up), wait for PONG
#   bench/peers/redis-anchor.sh down PORT   # stop (no-op if not running), wait for exit
#   bench/peers/redis-anchor.sh pid PORT    # print the server's pid (for /proc/PID/stat)
#
# No persistence (--save '' --appendonly no), no config file: Redis's built-in
# defaults otherwise (one main thread, io-threads 1, default pub/sub output
# buffer limits 32mb 8mb 60). State lives in ${TMPDIR:-/tmp}/presenced-redis-anchor.PORT
# and is removed by `down`. Extra redis-server options may be appended with
# REDIS_ANCHOR_ARGS (e.g. "--maxclients 20000"), word-split.
set -euo pipefail

die() { echo "redis-anchor: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: $0 up|down|pid PORT"
cmd=$1 port=$2
case $port in ''|*[!0-9]*) die "PORT must be a number: $port" ;; esac
if [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then die "PORT out of range: $port"; fi

REDIS_SERVER=${REDIS_SERVER:-/usr/bin/redis-server}
dir=${TMPDIR:-/tmp}/presenced-redis-anchor.$port
pidfile=$dir/redis.pid

# PING over bash's /dev/tcp, so redis-cli is not needed. A subshell, so the
# descriptor and the silenced stderr do not outlive the call.
ping_ok() (
  reply=""
  exec 9<>"/dev/tcp/127.0.0.1/$port" || exit 1
  printf 'PING\r\n' >&9
  IFS= read -r -t 1 reply <&9 || true
  [ "${reply%$'\r'}" = "+PONG" ]
) 2>/dev/null

running_pid() {
  local pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile" 2>/dev/null) || return 1
  case $pid in ''|*[!0-9]*) return 1 ;; esac
  kill -0 "$pid" 2>/dev/null || return 1
  # Make sure the pid is still our redis-server, not a recycled pid.
  grep -q redis-server "/proc/$pid/cmdline" 2>/dev/null || return 1
  echo "$pid"
}

case $cmd in
up)
  if pid=$(running_pid) && ping_ok; then
    exit 0
  fi
  [ -x "$REDIS_SERVER" ] || die "$REDIS_SERVER not found (scripts/setup.sh installs redis-server)"
  if ping_ok; then die "something else already answers on 127.0.0.1:$port"; fi
  mkdir -p "$dir"
  rm -f "$pidfile" "$dir/redis.log"
  # shellcheck disable=SC2086
  "$REDIS_SERVER" --port "$port" --bind 127.0.0.1 \
    --save '' --appendonly no \
    --daemonize yes --pidfile "$pidfile" --dir "$dir" \
    --logfile "$dir/redis.log" --loglevel warning \
    ${REDIS_ANCHOR_ARGS:-}
  for _ in $(seq 1 100); do
    if ping_ok; then exit 0; fi
    grep -q 'aborting' "$dir/redis.log" 2>/dev/null && break
    sleep 0.05
  done
  cat "$dir/redis.log" >&2 2>/dev/null || true
  die "redis-server did not come up on 127.0.0.1:$port (log above)"
  ;;
down)
  if pid=$(running_pid); then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
      while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    fi
  fi
  rm -rf "$dir"
  ;;
pid)
  running_pid || die "not running on port $port"
  ;;
*)
  die "unknown command: $cmd (up|down|pid)"
  ;;
esac
