#!/bin/sh
# Installs the Debian packages the build and the test suites need, only if
# something is missing (so a machine that has them pays nothing).
# nginx is plain Debian nginx; the lua-nginx-module reference beside it is only
# unpacked, on demand, by tools/ngx-lua-ref.sh fetch (its LuaJIT conflicts with
# the luajit package).
set -e
PKGS="build-essential clang libclang-rt-14-dev curl wrk luajit lua5.1 luarocks lua-cjson nginx libnginx-mod-stream haproxy redis-server zip python3 python3-cffi \
python3-websockets python3-flask \
python3-fastapi python3-starlette python3-uvicorn python3-uvloop python3-httptools python3-django \
python3-django-channels python3-daphne python3-quart python3-multipart python3-h2 python3-httpx \
python3-aiohttp python3-requests gunicorn python3-hypercorn python3-pip python3-wheel python3-setuptools python3-venv python3-mypy libmbedtls-dev zlib1g-dev openssl iproute2 procps pkg-config abigail-tools libnghttp2-dev nghttp2-client h2o \
chromium"
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "installing:$missing"
    if [ "$(id -u)" != 0 ]; then echo "need root to apt-get install:$missing" >&2; exit 1; fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq $missing >/dev/null
fi
