#!/bin/sh
# Node's http2 client (node:http2) against echo-server: h2c with prior
# knowledge on the plain port and h2 by ALPN on the TLS port (a certificate
# made here with openssl). Several streams on one session, POST bodies.
set -e
cd "$(dirname "$0")/../.."
B=${NSV_BUILD:-build}
# the build's config says whether HTTP/2 is built in (a sanitizer build's
# library cannot be loaded into python3), else nsv_http2_available() does
if [ -f "$B/config" ]; then
    grep -qx 'HTTP2=nghttp2' "$B/config"
else
    python3 -c 'import ctypes, sys; sys.exit(ctypes.CDLL(sys.argv[1]).nsv_http2_available() != 1)' \
        "$B/libnanosrv.so.1" 2>/dev/null
fi || {
    echo "1..0 # SKIP the library is built without HTTP/2 (nghttp2)"
    exit 0
}
d=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$d"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/srv.key" -out "$d/srv.crt" \
    -days 30 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 >/dev/null 2>&1
# start NAME ARGS...: echo-server on an ephemeral port; its port in $d/NAME.port
start() {
    name=$1; shift
    "$B/echo-server" --port 0 "$@" > "$d/$name.out" &
    pids="$pids $!"
    i=0
    while ! grep -q listening "$d/$name.out" && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
    awk '/listening on/ {print $3}' "$d/$name.out" > "$d/$name.port"
}
start plain
start tls --cert "$d/srv.crt" --key "$d/srv.key"
node tests/integration/h2_node_client.js "$(cat "$d/plain.port")" "$(cat "$d/tls.port")" "$d/srv.crt"
