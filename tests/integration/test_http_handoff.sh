#!/bin/sh
# The HTTP suite against `echo-server --threads 2 --accept handoff` (one
# acceptor handing connections to the workers instead of SO_REUSEPORT).
NSV_THREADS=2 NSV_ECHO_ARGS="--accept handoff" exec /usr/bin/python3 "$(dirname "$0")/test_http.py"
