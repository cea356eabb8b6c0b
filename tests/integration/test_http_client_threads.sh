#!/bin/sh
# The HTTP client suite with a sharded client (2 workers) in every run:
# requests start on the main thread and are forwarded to the workers.
NSV_HTTPC_THREADS=2 exec /usr/bin/python3 "$(dirname "$0")/test_http_client.py"
