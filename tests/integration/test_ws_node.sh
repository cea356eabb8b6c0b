#!/bin/sh
# Node's `ws` client (from the Node binding's locked dependencies) against echo-server /ws.
set -e
cd "$(dirname "$0")/../.."
B=${NSV_BUILD:-build}
out=$(mktemp)
"$B/echo-server" --port 0 > "$out" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$out"' EXIT
i=0
while ! grep -q listening "$out" && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
port=$(awk '/listening on/ {print $3}' "$out")
NODE_PATH=bindings/node-ffi/node_modules node tests/integration/ws_node_client.js "$port"
