#!/bin/sh
# The WebSocket integration suite against `echo-server --threads 2`.
NSV_THREADS=2 exec /usr/bin/python3 "$(dirname "$0")/test_ws.py"
