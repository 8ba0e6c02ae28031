#!/usr/bin/env bash
# run.sh - ab-lite WebSocket conformance (Autobahn categories 1-7 + 10, 247 cases).
#
#   tests/conformance/run.sh calibrate
#       Starts each reference echo server (python-websockets 10.4 from Debian,
#       ws from tests/node_modules) on a free loopback port and runs all 247
#       cases with --expect against its published verdicts. Non-zero exit on
#       any difference.
#   tests/conformance/run.sh presenced BINARY
#       Starts BINARY --port P --bind 127.0.0.1 --workers 2
#       --ws-max-message-bytes 1048576 and runs all 247 cases against
#       ws://127.0.0.1:P/test/echo (test builds only). Requires 247 passed,
#       the server still alive afterwards, a clean exit on SIGTERM and no
#       sanitizer report in its log.
#
# Logs and JSON results go to tests/out/conformance/. Every wait is bounded;
# every server started here is stopped on exit (trap).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
PY=/usr/bin/python3            # Debian's interpreter: it sees python3-websockets
out="$root/tests/out/conformance"
mkdir -p "$out"

pids=()
cleanup() {
  local p
  for p in "${pids[@]:-}"; do
    [ -n "$p" ] || continue
    if kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p" 2>/dev/null
      for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$p" 2>/dev/null
    fi
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_port PORT PID SECONDS: until something accepts on 127.0.0.1:PORT
wait_port() {
  "$PY" - "$1" "$2" "$3" <<'EOF'
import os, socket, sys, time
port, pid, limit = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
end = time.monotonic() + limit
while time.monotonic() < end:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("server process %d exited before listening" % pid)
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit("nothing listens on 127.0.0.1:%d after %.0f s" % (port, limit))
EOF
}

# stop_server PID SECONDS: SIGTERM, wait (bounded), SIGKILL. Sets STOP_STATUS
# to the exit status, or "killed" (must run in this shell: wait needs a child).
STOP_STATUS=
stop_server() {
  local pid=$1 limit=$2 i
  kill -TERM "$pid" 2>/dev/null
  for i in $(seq 1 $((limit * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    STOP_STATUS=killed
    return
  fi
  wait "$pid" 2>/dev/null
  STOP_STATUS=$?
}

total_pass=0
total_fail=0
count_line() { # add the closing "N passed, N failed" line of a log to the totals
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" | tail -1)
  if [ -n "$line" ]; then
    total_pass=$((total_pass + $(echo "$line" | awk '{print $1}')))
    total_fail=$((total_fail + $(echo "$line" | awk '{print $3}')))
  else
    total_fail=$((total_fail + 1))
  fi
}

calibrate_one() { # name expected-file command...
  local name=$1 expect=$2; shift 2
  local port pid rc
  port=$(free_port)
  echo "=== calibration: $name on 127.0.0.1:$port"
  "$@" "$port" >"$out/$name.server.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  if ! wait_port "$port" "$pid" 20; then
    cat "$out/$name.server.log"
    echo "$name: reference server did not start"
    total_fail=$((total_fail + 1))
    return 1
  fi
  head -1 "$out/$name.server.log"
  timeout 300 "$PY" "$here/ablite.py" --url "ws://127.0.0.1:$port/" --expect "$expect" \
      --json "$out/$name.json" 2>&1 | tee "$out/$name.ablite.log"
  rc=${PIPESTATUS[0]}
  count_line "$out/$name.ablite.log"
  stop_server "$pid" 10
  echo "$name: server stop status $STOP_STATUS"
  if [ "$rc" -ne 0 ]; then
    echo "=== calibration: $name DIFFERS from its published verdicts (rc $rc)"
    return 1
  fi
  echo "=== calibration: $name matches its published verdicts"
  return 0
}

cmd=${1:-}
case "$cmd" in
  calibrate)
    status=0
    start=$SECONDS
    calibrate_one python-websockets "$here/expected/python-websockets.json" \
        "$PY" "$here/ref_python_echo.py" || status=1
    if [ ! -f "$root/tests/node_modules/ws/package.json" ]; then
      echo "node-ws: tests/node_modules/ws is missing (cd tests && npm ci)"
      total_fail=$((total_fail + 1))
      status=1
    else
      calibrate_one node-ws "$here/expected/node-ws.json" \
          node "$here/ref_node_echo.mjs" || status=1
    fi
    echo "calibration took $((SECONDS - start)) s"
    echo "calibration: $total_pass passed, $total_fail failed"
    exit $status
    ;;
  presenced)
    bin=${2:-}
    if [ -z "$bin" ] || [ ! -x "$bin" ]; then
      echo "usage: run.sh presenced BINARY (got '${bin}', not executable)"
      exit 2
    fi
    port=$(free_port)
    log="$out/presenced.server.log"
    echo "=== conformance: $bin on 127.0.0.1:$port"
    rm -f "$out"/presenced.db*
    "$bin" --port "$port" --bind 127.0.0.1 --workers 2 --ws-max-message-bytes 1048576 \
      --store "$out/presenced.db" >"$log" 2>&1 &
    pid=$!
    pids+=("$pid")
    if ! wait_port "$port" "$pid" 30; then
      tail -50 "$log"
      echo "presenced did not start"
      echo "conformance: 0 passed, 247 failed"
      exit 1
    fi
    timeout 300 "$PY" "$here/ablite.py" --url "ws://127.0.0.1:$port/test/echo" --agent presenced \
        --timeout-mult "${ABLITE_TIMEOUT_MULT:-2}" --json "$out/presenced.json" 2>&1 \
        | tee "$out/presenced.ablite.log"
    rc=${PIPESTATUS[0]}
    status=0
    [ "$rc" -eq 0 ] || { echo "ab-lite: not all 247 cases passed (rc $rc)"; status=1; }
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "presenced died during the run:"
      tail -50 "$log"
      status=1
    else
      stop_server "$pid" 15
      echo "presenced stop status: $STOP_STATUS"
      [ "$STOP_STATUS" = "0" ] || { echo "presenced did not exit cleanly on SIGTERM"; status=1; }
    fi
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer' "$log"; then
      echo "sanitizer report in $log:"
      grep -nE -A20 'AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer' "$log" | head -80
      status=1
    fi
    # closing line: the cases, plus one failure for a crash, an unclean exit
    # or a sanitizer report (so a green case table cannot hide those)
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out/presenced.ablite.log" | tail -1)
    if [ -n "$line" ]; then
      np=$(echo "$line" | awk '{print $1}'); nf=$(echo "$line" | awk '{print $3}')
    else
      np=0; nf=247
    fi
    [ "$status" -ne 0 ] && [ "$nf" -eq 0 ] && nf=1
    echo "conformance: $np passed, $nf failed"
    exit $status
    ;;
  *)
    echo "usage: run.sh calibrate | run.sh presenced BINARY"
    exit 2
    ;;
esac
