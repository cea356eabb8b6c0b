#!/bin/sh
# Requests per second of the echo contract: echo.js (koffi, ffi-napi),
# echo-server (C) and Node's http module, in interleaved rounds.
# Each server is pinned to CPU 1 and wrk to CPU 0; server CPU time
# (utime+stime of all its threads) gives req/s per server core.
#   bench/compare.sh [ROUNDS] [SECONDS]     (NANOSRV_LIBRARY and ECHO_SERVER may be set)
set -e
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-5}
ECHO_SERVER=${ECHO_SERVER:-$(dirname "$NANOSRV_LIBRARY")/echo-server}
TCK=$(getconf CLK_TCK)

run_one() { # name, command...
    name=$1; shift
    out=$(mktemp)
    taskset -c 1 "$@" --port 0 >"$out" 2>&1 &
    pid=$!
    i=0
    until grep -q '^listening on' "$out" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 100 ] && { echo "$name did not start: $(cat "$out")"; kill $pid; return; }
        sleep 0.1
    done
    port=$(awk '/^listening on/ {print $3}' "$out")
    taskset -c 0 wrk -t1 -c50 -d1s "http://127.0.0.1:$port/" >/dev/null # warm-up
    c0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    rps=$(taskset -c 0 wrk -t1 -c50 -d"${SECS}s" "http://127.0.0.1:$port/" | awk '/Requests\/sec/ {print $2}')
    c1=$(awk '{print $14 + $15}' /proc/$pid/stat)
    kill -TERM $pid; wait $pid 2>/dev/null || true
    rm -f "$out"
    cpu=$(echo "$c0 $c1 $TCK $SECS" | awk '{printf "%.2f", ($2 - $1) / $3 / $4}')
    per=$(echo "$rps $cpu" | awk '{ if ($2 > 0) printf "%.0f", $1 / $2; else print "-" }')
    printf '%-16s %10s req/s  cpu %5s  %10s req/s per core\n' "$name" "$rps" "$cpu" "$per"
}

uptime
for r in $(seq "$ROUNDS"); do
    echo "round $r"
    run_one echo-server "$ECHO_SERVER"
    run_one koffi node examples/echo.js --backend koffi --threads 1
    run_one ffi-napi node examples/echo.js --backend ffi-napi --threads 1
    run_one node-http node bench/http-echo.js
done
uptime
