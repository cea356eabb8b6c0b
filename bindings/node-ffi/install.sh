#!/bin/sh
# Installs the package's dependencies from the lock file, only when
# node_modules is missing or older than package-lock.json.
set -e
cd "$(dirname "$0")"
stamp=node_modules/.package-lock.json
if [ -f "$stamp" ] && [ ! package-lock.json -nt "$stamp" ]; then
    exit 0
fi
npm ci --no-audit --no-fund
