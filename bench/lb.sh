#!/bin/sh
# bench/lb.sh - what a load balancer in front costs, and what the latency
# histograms cost. Cases, each GET / (the JSON echo) over keep-alive:
#   direct        wrk -> echo-server
#   haproxy       wrk -> HAProxy (send-proxy-v2, http-reuse always) -> echo-server --proxy-protocol
#   no-latency    wrk -> echo-server --no-metrics-latency (NSV_OPT_METRICS_LATENCY 0)
# Pinning for a 2-core machine: the echo-server on CPU $SERVER_CPU (0), wrk
# and HAProxy share CPU $CLIENT_CPU (1); so in "haproxy" the load generator
# has half a core less than in "direct", and req/s/core (requests per CPU
# second the echo-server used) is the figure that compares the server's work.
# The cases take turns in each round (RUNS rounds, default 3), so drift
# spreads over all of them; the table shows the median, min and max.
#   bench/lb.sh [BUILD]        (default build; make bench-lb runs it)
#   RUNS=5 SECS=10 CONNS=64 bench/lb.sh build/lb
set -eu
cd "$(dirname "$0")/.."
B=${1:-${BUILD:-build}}
RUNS=${RUNS:-3}
SECS=${SECS:-5}
CONNS=${CONNS:-64}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
ECHO="$B/echo-server"
for t in wrk haproxy taskset python3; do
    command -v $t >/dev/null || { echo "bench/lb.sh: $t is missing (tools/install-deps.sh)" >&2; exit 1; }
done
[ -x "$ECHO" ] || { echo "bench/lb.sh: $ECHO missing: make BUILD=$B" >&2; exit 1; }
export LD_LIBRARY_PATH="$(pwd)/$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

TMP=$(mktemp -d /tmp/nsv-bench-lb.XXXXXX)
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    for p in $PIDS; do wait "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# CPU seconds (user + system, all threads) of a process so far.
cpu_s() {
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.3f\n", ($12 + $13) / hz }' "/proc/$1/stat"
}

# Busy CPU seconds of the two benchmark CPUs so far, from /proc/stat (user,
# nice, system, irq, softirq, steal).
cpus_busy_s() {
    awk -v hz="$(getconf CLK_TCK)" -v a="cpu$SERVER_CPU" -v b="cpu$CLIENT_CPU" \
        '$1 == a || $1 == b { t += $2 + $3 + $4 + $7 + $8 + $9 } END { printf "%.3f\n", t / hz }' /proc/stat
}

# echo-server ARGS... in the background on CPU $SERVER_CPU; sets SRV_PID, SRV_PORT.
start_echo() {
    taskset -c "$SERVER_CPU" "$ECHO" --port 0 "$@" >"$TMP/echo.out" 2>"$TMP/echo.err" &
    SRV_PID=$!
    PIDS="$PIDS $SRV_PID"
    i=0
    while ! grep -q '^listening on ' "$TMP/echo.out" 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt 200 ] || { echo "bench/lb.sh: echo-server $* did not start: $(cat "$TMP/echo.err")" >&2; exit 1; }
        sleep 0.05
    done
    SRV_PORT=$(sed -n 's/^listening on //p' "$TMP/echo.out")
}

# HAProxy in front of 127.0.0.1:$1 on CPU $CLIENT_CPU; sets HAP_PID, HAP_PORT.
start_haproxy() {
    HAP_PORT=$(free_port)
    cat >"$TMP/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    http-reuse always
frontend fe
    bind 127.0.0.1:$HAP_PORT
    default_backend be
backend be
    server s1 127.0.0.1:$1 send-proxy-v2
EOF
    taskset -c "$CLIENT_CPU" haproxy -db -f "$TMP/haproxy.cfg" >"$TMP/haproxy.out" 2>&1 &
    HAP_PID=$!
    PIDS="$PIDS $HAP_PID"
    i=0
    until python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),1).close()' \
          "$HAP_PORT" 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt 200 ] || { echo "bench/lb.sh: haproxy did not start: $(cat "$TMP/haproxy.out")" >&2; exit 1; }
        sleep 0.05
    done
}

stop() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    PIDS=$(echo "$PIDS" | tr ' ' '\n' | grep -vx "$1" | tr '\n' ' ')
}

# One run of case $1; appends "case rps rps_per_core srv_cpu% errors other_load%" to $TMP/results.
run_case() {
    case "$1" in
        direct) start_echo; url="http://127.0.0.1:$SRV_PORT/" ;;
        haproxy) start_echo --proxy-protocol; start_haproxy "$SRV_PORT"; url="http://127.0.0.1:$HAP_PORT/" ;;
        no-latency) start_echo --no-metrics-latency; url="http://127.0.0.1:$SRV_PORT/" ;;
    esac
    # A short warm-up, so every run starts with the connections open; not
    # through HAProxy: the PROXY-protocol connections of clients that left stay
    # in its idle pool, and then it opens one backend connection per request
    # (about a third of the rate; nginx behind it does the same).
    [ "$1" = haproxy ] || taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d1s "$url" >/dev/null
    c0=$(cpu_s "$SRV_PID")
    h0=0; [ "$1" = haproxy ] && h0=$(cpu_s "$HAP_PID")
    b0=$(cpus_busy_s)
    t0=$(date +%s.%N)
    # wrk's own CPU time: the shell that ran it reads its children's total
    w=$(sh -c 'taskset -c "$1" wrk -t1 -c"$2" -d"$3s" "$4" >"$5"; awk -v hz="$(getconf CLK_TCK)" \
        "{ sub(/^.*\\) /, \"\"); printf \"%.3f\", (\$14 + \$15) / hz }" /proc/$$/stat' \
        sh "$CLIENT_CPU" "$CONNS" "$SECS" "$url" "$TMP/wrk.out")
    t1=$(date +%s.%N)
    b1=$(cpus_busy_s)
    c1=$(cpu_s "$SRV_PID")
    h1=0; [ "$1" = haproxy ] && h1=$(cpu_s "$HAP_PID")
    [ "$1" = haproxy ] && stop "$HAP_PID"
    stop "$SRV_PID"
    awk -v name="$1" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v other="$(echo "$b0 $b1 $c0 $c1 $h0 $h1 $w" |
        awk '{ printf "%.3f", ($2 - $1) - ($4 - $3) - ($6 - $5) - $7 }')" '
        /^Requests\/sec:/ { rps = $2 }
        /^ *[0-9]+ requests in/ { reqs = $1 }
        /Socket errors:/ { gsub(/,/, ""); err += $4 + $6 + $8 + $10 }
        /Non-2xx or 3xx responses:/ { err += $NF }
        END { cpu = c1 - c0; printf "%s %.0f %.0f %.0f %d %.0f\n", name, rps, (cpu > 0 ? reqs / cpu : 0),
              100 * cpu / (t1 - t0), err, 100 * other / (t1 - t0) }' "$TMP/wrk.out" >>"$TMP/results"
    tail -n 1 "$TMP/results" | awk '{ printf "  %-11s %9s req/s  %9s req/s/core  srv cpu %s%%  errors %s  other load %s%%%s\n",
        $1, $2, $3, $4, $5, $6, ($6 > 10 ? "  BUSY" : "") }'
}

CASES="direct haproxy no-latency"
echo "bench/lb.sh: $RUNS rounds of ${SECS}s, wrk -t1 -c$CONNS; echo-server on CPU $SERVER_CPU, wrk and haproxy on CPU $CLIENT_CPU"
: >"$TMP/results"
r=1
while [ $r -le "$RUNS" ]; do
    echo "round $r"
    for c in $CASES; do run_case "$c"; done
    CASES="$(echo "$CASES" | cut -d' ' -f2-) $(echo "$CASES" | cut -d' ' -f1)"  # rotate the order
    r=$((r + 1))
done

echo
printf '%-12s %10s %10s %10s %12s %8s %7s  %s\n' case "req/s" min max "req/s/core" "srv cpu" errors "vs direct"
base=$(awk '$1 == "direct" { print $2 }' "$TMP/results" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
for c in direct haproxy no-latency; do
    awk -v c="$c" '$1 == c' "$TMP/results" | sort -k2,2n | awk -v c="$c" -v base="$base" '
        { rps[NR] = $2; core[NR] = $3; cpu[NR] = $4; err += $5 }
        END {
            m = int((NR + 1) / 2)
            printf "%-12s %10d %10d %10d %12d %7d%% %7d  %.2f\n", c, rps[m], rps[1], rps[NR], core[m], cpu[m], err,
                   (base > 0 ? rps[m] / base : 0)
        }'
done
echo "(median of $RUNS; req/s/core and srv cpu are of the run with the median req/s)"
awk '$6 > 10 { n++; if ($6 > max) max = $6 } END { if (n) printf "BUSY MACHINE: other processes took up to %d%% of a core on CPUs '"$SERVER_CPU,$CLIENT_CPU"' in %d of %d runs; the figures are not comparable, run again on a quiet machine\n", max, n, NR }' "$TMP/results"
