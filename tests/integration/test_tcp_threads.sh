#!/bin/sh
# The raw TCP suite against `tcp-echo --threads 2` (the proxy stays single-loop).
NSV_THREADS=2 exec /usr/bin/python3 "$(dirname "$0")/test_tcp.py"
