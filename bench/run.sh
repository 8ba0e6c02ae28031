#!/usr/bin/env bash
# bench/run.sh - the benchmark suite of presenced (issue 6).
#
#   bench/run.sh quick   smoke run (<= 2 min): small sizes, fails on any
#                        error or loss, never on speed (CI: make test)
#   bench/run.sh full    the workloads W1-W8 against presenced, the Socket.IO
#                        peer (bench/peers/) and Redis pub/sub, and W4/W5
#                        through presenced's Pusher protocol, W5 through
#                        its Phoenix protocol (<= 15 min)
#   bench/run.sh ab REV  W1 (bytes per idle connection) and W4 (deliveries
#                        per CPU-second) of the release build of git
#                        revision REV (A) against this tree's (B), runs
#                        alternating A B A B ... in one run (~8 min);
#                        summary.md has the medians and B/A (bench/ab.py)
#
# Builds what it needs (the release server, bench/build/presence-bench),
# starts every server itself on loopback (port 0 / a free port), runs the
# generator, and writes bench/results/<mode>-<time>/: results.jsonl (one
# JSON object per measured step), gen.log (the generator's stderr),
# summary.md (the markdown tables) and, in full mode, the plots (PNG).
# Parameters: bench/workloads.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-quick}
case $MODE in
  quick | full) ;;
  ab) [ $# -eq 2 ] || { echo "usage: bench/run.sh ab REV" >&2; exit 2; } ;;
  *) echo "usage: bench/run.sh quick|full|ab REV" >&2; exit 2 ;;
esac
AB_REV=${2:-}
. bench/workloads.sh

make -s BUILD=release all
make -s -C bench CC=gcc >/dev/null
GEN=bench/build/presence-bench
PD=build/release/presenced
OUT=bench/results/$MODE-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
RES=$OUT/results.jsonl
LOG=$OUT/gen.log
: >"$RES"
FAILED=0
PIDS=()
SRV_PID= SRV_PORT=

cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# wait_port FILE: the port from a "listening on ...PORT" line (the peer, the
# sink) or presenced's "running: http://127.0.0.1:PORT/" line. The start_*
# functions empty FILE before they start the server: the background
# process's own ">FILE" may come after the first look here, which would
# then read the previous server's port (a run's connects all refused).
wait_port() {
  local i
  for i in $(seq 1 100); do
    SRV_PORT=$(grep -aoE 'listening on [^ ]*[0-9]|running: http://[^/]*' "$1" 2>/dev/null |
      head -1 | grep -oE '[0-9]+$' || true)
    [ -n "$SRV_PORT" ] && return 0
    kill -0 "$SRV_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench: server did not start ($1):" >&2; cat "$1" >&2; return 1
}

start_presenced() { # flags...
  rm -f "$OUT"/presenced.db*
  : >"$OUT/server.log" # before the start: see wait_port
  $PD --port 0 --store "$OUT/presenced.db" $PD_BASE "$@" >"$OUT/server.log" 2>&1 &
  SRV_PID=$!; PIDS+=("$SRV_PID"); wait_port "$OUT/server.log"
}
# A second presenced (W2 hold): SRV2_PID, SRV2_PORT; SRV_PID/SRV_PORT kept.
start_presenced2() { # flags...
  local p1=$SRV_PID port1=$SRV_PORT
  rm -f "$OUT"/presenced2.db*
  : >"$OUT/server2.log"
  $PD --port 0 --store "$OUT/presenced2.db" $PD_BASE "$@" >"$OUT/server2.log" 2>&1 &
  SRV_PID=$!; PIDS+=("$SRV_PID"); wait_port "$OUT/server2.log"
  SRV2_PID=$SRV_PID SRV2_PORT=$SRV_PORT SRV_PID=$p1 SRV_PORT=$port1
}
start_sio() { # flags...
  : >"$OUT/server.log"
  node bench/peers/socketio-presence.mjs --port 0 "$@" >"$OUT/server.log" 2>&1 &
  SRV_PID=$!; PIDS+=("$SRV_PID"); wait_port "$OUT/server.log"
}
start_redis() {
  local port
  for port in $(shuf -i 20000-30000 -n 20); do
    redis-server --port "$port" --bind 127.0.0.1 --protected-mode no --save '' \
      --appendonly no --loglevel warning >"$OUT/server.log" 2>&1 &
    SRV_PID=$!; PIDS+=("$SRV_PID")
    sleep 0.3
    if kill -0 "$SRV_PID" 2>/dev/null; then SRV_PORT=$port; return 0; fi
  done
  echo "bench: redis-server did not start" >&2; return 1
}
start_sink() { # [seconds to live, default 60] [log name, default server]
  local log=$OUT/${2:-server}.log
  : >"$log"
  $GEN sink --port 0 --hold-s "${1:-60}" >"$log" 2>&1 &
  SRV_PID=$!; PIDS+=("$SRV_PID"); wait_port "$log"
}
# A second sink (W2 hold): SRV2_PID, SRV2_PORT; SRV_PID/SRV_PORT kept.
start_sink2() { # seconds to live
  local p1=$SRV_PID port1=$SRV_PORT
  start_sink "$1" server2
  SRV2_PID=$SRV_PID SRV2_PORT=$SRV_PORT SRV_PID=$p1 SRV_PORT=$port1
}
stop_server() {
  kill "$SRV_PID" 2>/dev/null || true
  wait "$SRV_PID" 2>/dev/null || true
}

# gen WORKLOAD TARGET LABEL flags...: one generator run, results appended.
gen() {
  local w=$1 t=$2 label=$3; shift 3
  echo "--- $w $t $label $*" | tee -a "$LOG" >&2
  if ! $GEN "$w" --target "$t" --port "$SRV_PORT" --server-pids "$SRV_PID" --procs "$PROCS" \
    --secret "$SECRET" --label "$label" "$@" >>"$RES" 2>>"$LOG"; then
    echo "bench: $w $t $label failed (see $LOG)" >&2
    FAILED=1
  fi
  server_alive "$w $t $label"
}
# server_alive WHAT: says so, with the server's log, when it has exited.
server_alive() {
  kill -0 "$SRV_PID" 2>/dev/null && return 0
  { echo "bench: the server of $1 had exited; the end of its log:"; tail -n 20 "$OUT/server.log"; } |
    tee -a "$LOG" >&2
}

# W2 hold: the generator's child k connects to port k % 2; the run gives up
# after W2H_TIMEOUT s (a sink lives longer than that, so it outlives the hold)
W2H_TIMEOUT=300
# hold2 TARGET LABEL flags...: the W2 hold against the two servers started
# (SRV_PID/SRV_PORT and SRV2_PID/SRV2_PORT), which it stops after.
hold2() {
  local t=$1 label=$2; shift 2
  echo "--- w2 $t $label $* (ports $SRV_PORT,$SRV2_PORT)" | tee -a "$LOG" >&2
  if ! $GEN w2 --target "$t" --ports "$SRV_PORT,$SRV2_PORT" --server-pids "$SRV_PID,$SRV2_PID" \
    --procs 4 --src-gen 3 --secret "$SECRET" --label "$label" --timeout-s "$W2H_TIMEOUT" "$@" >>"$RES" 2>>"$LOG"; then
    echo "bench: w2 $t $label failed (see $LOG)" >&2
    FAILED=1
  fi
  kill "$SRV2_PID" 2>/dev/null || true; wait "$SRV2_PID" 2>/dev/null || true
  stop_server
}

# one_native WORKLOAD LABEL "server flags" generator flags...
one_native() {
  local w=$1 label=$2 srv=$3; shift 3
  start_presenced $srv; gen "$w" native "$label" "$@"; stop_server
}
# one_pusher WORKLOAD LABEL "server flags" generator flags...: presenced with
# the Pusher app (PD_PUSHER), the generator speaking the Pusher protocol.
one_pusher() {
  local w=$1 label=$2 srv=$3; shift 3
  start_presenced $PD_PUSHER $srv; gen "$w" pusher "$label" --pusher-app "$PUSHER_APP" "$@"; stop_server
}
# one_phoenix WORKLOAD LABEL "server flags" generator flags...: presenced
# (phoenix = on, its default), the generator speaking Phoenix vsn 2.0.0.
one_phoenix() {
  local w=$1 label=$2 srv=$3; shift 3
  start_presenced $srv; gen "$w" phoenix "$label" "$@"; stop_server
}
one_sio() {
  local w=$1 label=$2 srv=$3; shift 3
  start_sio $srv; gen "$w" sio "$label" "$@"; stop_server
}

SECONDS=0
echo "bench: $MODE run, results in $OUT" >&2
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel: $(uname -r)"
  echo "presenced: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet -- src 2>/dev/null || echo ' (src modified)')"
  echo "redis: $(redis-server --version | grep -o 'v=[0-9.]*')  node: $(node --version)"
  echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
  if [ "$MODE" = full ] && command -v perf >/dev/null; then
    echo "perf bench syscall basic: $(perf bench syscall basic 2>/dev/null | grep -E 'usecs/op' | tr -s ' ')"
  fi
} >"$OUT/machine.txt"

# ab: A = REV's release binary (built in a scratch worktree), B = this tree's.
if [ "$MODE" = ab ]; then
  AB_DIR=$(mktemp -d)
  git worktree add -q --detach "$AB_DIR/a" "$AB_REV"
  make -s -C "$AB_DIR/a" BUILD=release all >/dev/null
  PD_A=$AB_DIR/a/build/release/presenced PD_B=$PD PD_BASE_B=$PD_BASE
  echo "a: $(git rev-parse --short "$AB_REV")  b: $(git rev-parse --short HEAD)$(git diff --quiet -- src || echo ' (src modified)')" >>"$OUT/machine.txt"
  for rep in $(seq 1 "$AB_REPS"); do
    for side in a b; do
      if [ $side = a ]; then PD=$PD_A PD_BASE=$PD_BASE_OLD; else PD=$PD_B PD_BASE=$PD_BASE_B; fi
      one_native w1 "$side r$rep" "--workers 2" $W1
      one_native w4 "$side r$rep" "--workers 1 $PD_W4" $W4_ROOMS --rates "$AB_W4_RATES"
    done
  done
  PD=$PD_B PD_BASE=$PD_BASE_B
  git worktree remove --force "$AB_DIR/a"; rm -rf "$AB_DIR"
  python3 bench/ab.py "$RES" >"$OUT/summary.md"
  cat "$OUT/summary.md"
  echo "bench: ab finished in ${SECONDS}s, results in $OUT" >&2
  exit $FAILED
fi

# Null sink: what the generator alone can send.
start_sink; gen w3 sink null-sink $SINK_W3; stop_server

for rep in $(seq 1 "$REPS"); do
  # W2 and W3: A B alternation
  one_native w2 "r$rep" "--workers 2" $W2
  one_sio w2 "r$rep" "" $W2
  for wk in $W3_WORKERS; do
    one_native w3 "workers=$wk r$rep" "--workers $wk" $W3
  done
  one_sio w3 "r$rep" "" $W3
  # W4: presenced (workers 2, 1), Socket.IO, Redis
  for wk in $W4_WORKERS; do
    one_native w4 "workers=$wk r$rep" "--workers $wk $PD_W4" $W4_ROOMS --rates "$W4_RATES_NATIVE"
  done
  one_pusher w4 "workers=2 r$rep" "--workers 2 $PD_W4" $W4_ROOMS --rates "$W4_RATES_PUSHER"
  one_sio w4 "r$rep" "" $W4_ROOMS --rates "$W4_RATES_SIO"
  start_redis; gen w4 redis "r$rep" $W4_ROOMS --rates "$W4_RATES_REDIS"; stop_server
  # W5 and its stress variant
  one_native w5 "r$rep" "--workers 2" $W5
  one_pusher w5 "r$rep" "--workers 2" $W5
  one_phoenix w5 "r$rep" "--workers 2" $W5
  one_sio w5 "r$rep" "" $W5
  one_native w5 "stress r$rep" "--workers 2 $PD_W5S" $W5S
  if [ "$rep" -le "$W5S_SIO_REPS" ]; then one_sio w5 "stress r$rep" "" $W5S; fi
  # W4 2x500 (one room per worker is possible): workers 1 and 2
  if [ -n "$W4_2X500" ]; then
    for wk in $W4_WORKERS; do
      one_native w4 "2x500 workers=$wk r$rep" "--workers $wk $PD_W4" $W4_2X500 --rates "$W4_2X500_RATES"
    done
  fi
done

if [ -n "$W4_2X500" ]; then
  start_redis; gen w4 redis "2x500" $W4_2X500 --rates "$W4_RATES_REDIS"; stop_server
fi
# W5's fan-out on Redis pub/sub (a floor for W5: one write per recipient);
# report.py keeps the label w5-shape out of the W4 tables and plots
start_redis; gen w4 redis "w5-shape" $W5_REDIS; stop_server

# W2 hold: two presenced processes, half the connections each; then the
# same against two null sinks
start_presenced --workers 2
start_presenced2 --workers 2
hold2 native "hold 2 servers" $W2H
start_sink $((W2H_TIMEOUT + 30))
start_sink2 $((W2H_TIMEOUT + 30))
hold2 sink "hold 2 sinks" $W2H_SINK

# W1 idle memory (one run each: memory is stable)
one_native w1 r1 "--workers 2" $W1
[ "$PEERS_W1" = 1 ] && one_sio w1 r1 "" $W1

# W6 churn and expiry
W6_REPS=$([ "$MODE" = full ] && echo 2 || echo 1)
for rep in $(seq 1 "$W6_REPS"); do
  one_native w6 "r$rep" "--workers 2 $PD_W6" $W6 --hb-ms "$W6_HB" --ttl-ms "$W6_TTL"
done
one_sio w6 r1 "--ttl-ms $W6_TTL" $W6 --hb-ms "$W6_HB" --ttl-ms "$W6_TTL"
for rate in $W6_RATES_LOW; do # the same at a lower churn rate (a later --rate wins)
  one_native w6 "$rate ops/s r1" "--workers 2 $PD_W6" $W6 --rate "$rate" --hb-ms "$W6_HB" --ttl-ms "$W6_TTL"
done

# W8 slow consumer, reconnect storm
start_presenced --workers 2
gen w8 native r1 $W8
echo "presenced /metrics after W8:" >>"$LOG"
curl -s -H "Authorization: Bearer $SECRET" "http://127.0.0.1:$SRV_PORT/metrics" | grep -E '^presenced_(output_limit_closes|conns_closed)_total' >>"$LOG" || true
stop_server
one_sio w8 r1 "" $W8_SIO
one_native w8s r1 "--workers 2" $W8S
one_sio w8s r1 "" $W8S

# W7 many nodes over Redis (its own servers: Redis, PostgreSQL, nodes)
echo "--- w7 $W7" | tee -a "$LOG" >&2
node bench/w7.mjs $W7 --out "$OUT/w7.jsonl" 2>>"$LOG" || { echo "bench: w7 failed (see $LOG)" >&2; FAILED=1; }

# W9 restarts and deploys (its own servers, like W7)
echo "--- w9 $W9" | tee -a "$LOG" >&2
node bench/w9.mjs $W9 --out "$OUT/w9.jsonl" 2>>"$LOG" || { echo "bench: w9 failed (see $LOG)" >&2; FAILED=1; }

echo "bench: generator runs done in ${SECONDS}s" >&2
{ echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"; } >>"$OUT/machine.txt"
if ! /usr/bin/python3 bench/report.py "$MODE" "$OUT"; then
  FAILED=1
  echo "bench: the generator's complaints (from $LOG):" >&2
  grep -aE '^(presence-bench|bench):' "$LOG" | head -n 30 >&2
fi
if [ "$MODE" = full ] && command -v gnuplot >/dev/null; then
  (cd "$OUT" && for g in ../../plot/*.gp; do gnuplot "$g" || FAILED=1; done)
fi
echo "bench: $MODE finished in ${SECONDS}s, results in $OUT" >&2
exit $FAILED
