#!/bin/sh
# The HTTP and WebSocket suites with build/http-proxy in front of their
# echo-server (NSV_TEST_FRONT=1, see tests/integration/proxy_upstream.py):
# the proxy must pass them end to end, single loop and sharded. TAP, one
# test point per suite run, the suite's own output as comments.
#   NSV_BUILD=build tests/long/proxy_suites.sh
cd "$(dirname "$0")/../.."
B=${NSV_BUILD:-build}
export NSV_BUILD="$B"
export NANOSRV_LIBRARY="${NANOSRV_LIBRARY:-$(pwd)/$B/libnanosrv.so.1}"
n=0
fail=0
for args in "" "--workers 2"; do
    for t in tests/integration/test_http.py tests/integration/test_ws.py; do
        n=$((n + 1))
        out=$(NSV_TEST_FRONT=1 NSV_PROXY_ARGS="$args" tests/exec "$t" 2>&1)
        rc=$?
        bad=$(printf '%s\n' "$out" | grep -c '^not ok')
        if [ "$rc" = 0 ] && [ "$bad" = 0 ]; then
            echo "ok $n - $t through http-proxy ${args:-(single loop)}: $(printf '%s\n' "$out" | grep -c '^ok') passed"
        else
            fail=1
            echo "not ok $n - $t through http-proxy ${args:-(single loop)} (exit $rc)"
            printf '%s\n' "$out" | grep -v '^ok' | head -40 | sed 's/^/#   /'
        fi
    done
done
echo "1..$n"
exit $fail
