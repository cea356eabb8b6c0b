#!/bin/sh
# The reference OpenResty-style server: Debian's nginx with lua-nginx-module,
# running on OpenResty's LuaJIT, next to Debian's `luajit` that the binding uses.
#
# Debian's libnginx-mod-http-lua depends on libluajit2-5.1-2 (OpenResty's
# LuaJIT), which conflicts with the `luajit` package: installing it would remove
# `luajit`. So the module, its Lua libraries and that LuaJIT are only unpacked
# into build/ngx-lua-ref/ and loaded from there (load_module with a full path,
# LD_LIBRARY_PATH for the LuaJIT, lua_package_path for resty.core); nothing of
# it is installed. Only plain nginx is, and that conflicts with nothing.
#
#   tools/ngx-lua-ref.sh fetch                  unpack the reference (once); exit 1 with the reason if it cannot run
#   tools/ngx-lua-ref.sh start DIR HANDLER.lua  write DIR/nginx.conf, start nginx in the background, print "PORT PID"
#   tools/ngx-lua-ref.sh stop DIR               stop the nginx started in DIR, by the PID in DIR/nginx.pid
#   tools/ngx-lua-ref.sh conf DIR HANDLER.lua PORT   only write DIR/nginx.conf (for a caller that runs nginx itself)
#   tools/ngx-lua-ref.sh env                    print the LD_LIBRARY_PATH= line such a caller needs
#
# A caller running nginx itself (bench/run.py does, to pin and measure it):
#   env "$(tools/ngx-lua-ref.sh env)" nginx -p DIR -c DIR/nginx.conf -e DIR/error.log -g 'daemon off;'
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
REF="$ROOT/build/ngx-lua-ref"
STAMP="$REF/.stamp"
PKGS="libnginx-mod-http-lua libnginx-mod-http-ndk libluajit2-5.1-2 lua-resty-core lua-resty-lrucache"
MODDIR="$REF/usr/lib/nginx/modules"
LIBDIR="$REF/usr/lib/x86_64-linux-gnu"
LUADIR="$REF/usr/share/lua/5.1"
# lua-cjson (Debian's, built against the Lua 5.1 C API) loads in either LuaJIT.
CPATH_SYS="/usr/lib/x86_64-linux-gnu/lua/5.1/?.so"

die() { echo "ngx-lua-ref: $*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else die "need root to run: $*"; fi
}

fetch() {
    if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
        # Plain Debian nginx: `apt-get install -s nginx` removes nothing.
        DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq nginx >/dev/null \
            || die "apt-get install nginx failed"
    fi
    if [ ! -f "$STAMP" ]; then
        # One unpacking at a time (a test and the bench may fetch together);
        # the one that waited finds the stamp.
        mkdir -p "$ROOT/build" || die "cannot create $ROOT/build"
        exec 9>"$REF.lock" || die "cannot write $REF.lock"
        flock -w 300 9 || die "another fetch held $REF.lock for 300 s"
    fi
    if [ ! -f "$STAMP" ]; then
        command -v apt-get >/dev/null 2>&1 || die "apt-get not found: the reference needs Debian packages"
        command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb not found"
        dl="$REF.dl"
        rm -rf "$dl"
        mkdir -p "$dl"
        # apt's sandbox user cannot write into a root-owned build/: download as
        # the caller (the warning about an unsandboxed download is harmless).
        if ! (cd "$dl" && apt-get download $PKGS >/dev/null 2>&1); then
            [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 || true
            (cd "$dl" && apt-get download $PKGS >/dev/null 2>"$dl/apt.err") \
                || die "apt-get download $PKGS failed: $(tail -1 "$dl/apt.err")"
        fi
        rm -rf "$REF.new"
        mkdir -p "$REF.new"
        for deb in "$dl"/*.deb; do dpkg-deb -x "$deb" "$REF.new" || die "dpkg-deb -x $deb failed"; done
        dpkg-deb -f "$dl"/libnginx-mod-http-lua_*.deb Depends | grep -o 'nginx-abi-[0-9.-]*' \
            >"$REF.new/.abi" || true
        rm -rf "$REF"
        mv "$REF.new" "$REF"
        ls "$dl"/*.deb | sed 's,.*/,,' >"$STAMP"
        rm -rf "$dl"
    fi
    nginx_bin >/dev/null || die "nginx not found"
    for f in "$MODDIR/ngx_http_lua_module.so" "$MODDIR/ndk_http_module.so" \
             "$LIBDIR/libluajit-5.1.so.2" "$LUADIR/resty/core.lua" "$LUADIR/resty/lrucache.lua"; do
        [ -e "$f" ] || die "$f missing after unpacking (remove $REF and fetch again)"
    done
    # The module is built for one nginx ABI; a different nginx refuses it at start.
    abi=$(dpkg-query -W -f='${Provides}' nginx 2>/dev/null | tr ',' '\n' | grep -o 'nginx-abi-[0-9.-]*' || true)
    need=$(grep -o 'nginx-abi-[0-9.-]*' "$REF/.abi" 2>/dev/null || true)
    [ -z "$need" ] || [ "$abi" = "$need" ] || die "nginx provides ${abi:-no ABI}, the module needs $need"
    return 0
}

nginx_bin() {
    command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || return 1
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# conf DIR HANDLER PORT: the nginx.conf of the reference.
conf() {
    dir=$1 handler=$2 port=$3
    mkdir -p "$dir/body" "$dir/proxy" "$dir/fastcgi" "$dir/uwsgi" "$dir/scgi"
    # As root the workers would run as `nobody` and could not read the handler
    # or write the temp paths; stay root (this is a loopback test server).
    user=""
    [ "$(id -u)" = 0 ] && user="user root;"
    cat >"$dir/nginx.conf" <<EOF
# Written by tools/ngx-lua-ref.sh: lua-nginx-module on OpenResty's LuaJIT,
# one worker, the handler file as the content of every location.
load_module $MODDIR/ndk_http_module.so;
load_module $MODDIR/ngx_http_lua_module.so;
$user
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
worker_rlimit_nofile 20000;

events {
    worker_connections 12000;
    use epoll;
}

http {
    access_log off;
    # nginx closes a connection after 1000 requests by default; the other
    # servers never do.
    keepalive_requests 100000000;
    keepalive_timeout 300s;
    # Keep request bodies in memory (ngx.req.get_body_data() returns nil for a
    # body spilled to a file).
    client_body_buffer_size 16m;
    client_max_body_size 16m;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    lua_package_path "$LUADIR/?.lua;;";
    lua_package_cpath "$CPATH_SYS;;";
    lua_code_cache on;

    server {
        listen 127.0.0.1:$port backlog=4096;
        location / {
            content_by_lua_file $handler;
        }
    }
}
EOF
}

abspath() {
    case $1 in /*) echo "$1" ;; *) echo "$(pwd)/$1" ;; esac
}

start() {
    [ $# = 2 ] || die "usage: $0 start DIR HANDLER.lua"
    [ -f "$STAMP" ] || die "reference not fetched: run $0 fetch"
    dir=$(abspath "$1") handler=$(abspath "$2")
    [ -r "$handler" ] || die "handler $handler: not readable"
    mkdir -p "$dir"
    bin=$(nginx_bin) || die "nginx not found"
    # The port is free when picked but may be taken before nginx binds it:
    # try a few ports, then give up with nginx's own message.
    tries=0
    while :; do
        tries=$((tries + 1))
        port=$(free_port) || die "cannot pick a free port (python3 missing?)"
        conf "$dir" "$handler" "$port"
        rm -f "$dir/nginx.pid"
        : >"$dir/error.log"
        if LD_LIBRARY_PATH="$LIBDIR" "$bin" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" \
                >"$dir/start.log" 2>&1; then
            break
        fi
        if [ $tries -ge 5 ] || ! grep -q "Address already in use" "$dir/start.log" "$dir/error.log"; then
            die "nginx did not start: $(grep -h emerg "$dir/start.log" "$dir/error.log" | tail -1)"
        fi
    done
    # Daemonized: wait (at most 10 s) for the pid file and an answer on the port.
    i=0
    pid=""
    while [ $i -lt 100 ]; do
        [ -s "$dir/nginx.pid" ] && pid=$(cat "$dir/nginx.pid")
        if [ -n "$pid" ] && curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/"; then
            echo "$port $pid"
            return 0
        fi
        i=$((i + 1))
        sleep 0.1
    done
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    die "nginx on port $port did not answer within 10 s: $(tail -1 "$dir/error.log")"
}

stop() {
    [ $# = 1 ] || die "usage: $0 stop DIR"
    dir=$(abspath "$1")
    [ -s "$dir/nginx.pid" ] || die "$dir/nginx.pid: no nginx started there"
    pid=$(cat "$dir/nginx.pid")
    kill "$pid" 2>/dev/null || { rm -f "$dir/nginx.pid"; return 0; }
    # TERM is a fast shutdown (the master stops its worker); wait at most 5 s,
    # then kill the whole process group (daemonized nginx leads its own).
    i=0
    while [ $i -lt 50 ] && kill -0 "$pid" 2>/dev/null; do i=$((i + 1)); sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; fi
    rm -f "$dir/nginx.pid"
}

case ${1:-} in
fetch) fetch ;;
start) shift; start "$@" ;;
stop) shift; stop "$@" ;;
conf) shift; [ $# = 3 ] || die "usage: $0 conf DIR HANDLER.lua PORT"
      mkdir -p "$1"; conf "$(abspath "$1")" "$(abspath "$2")" "$3" ;;
env) echo "LD_LIBRARY_PATH=$LIBDIR" ;;
*) echo "usage: $0 fetch | start DIR HANDLER.lua | stop DIR | conf DIR HANDLER.lua PORT | env" >&2; exit 2 ;;
esac
