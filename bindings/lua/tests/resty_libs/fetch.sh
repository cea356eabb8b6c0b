#!/bin/sh
# Unpacks Debian's OpenResty Lua libraries into build/resty-libs/ for
# tests/resty_libs.lua. They are not installed: lua-nginx-redis and
# lua-nginx-websocket depend on nginx-extras, lua-resty-lrucache and
# lua-resty-core on libluajit2-5.1-2 (OpenResty's LuaJIT), and installing
# any of them removes Debian's `luajit`. The files are pure Lua, so they are
# only unpacked (apt-get download + dpkg-deb -x). Prints the Lua directory.
set -eu
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
DIR="$ROOT/build/resty-libs"
LUADIR="$DIR/usr/share/lua/5.1"
PKGS="lua-nginx-redis lua-nginx-websocket lua-resty-lrucache lua-resty-core lua-nginx-cookie"
die() { echo "resty_libs/fetch.sh: $*" >&2; exit 1; }
if [ ! -f "$DIR/.stamp" ]; then
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found"
    command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb not found"
    dl="$DIR.dl"
    rm -rf "$dl" "$DIR.new"
    mkdir -p "$dl" "$DIR.new"
    if ! (cd "$dl" && apt-get download $PKGS >/dev/null 2>"$dl/apt.err"); then
        [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 || true
        (cd "$dl" && apt-get download $PKGS >/dev/null 2>"$dl/apt.err") \
            || die "apt-get download $PKGS failed: $(tail -1 "$dl/apt.err")"
    fi
    for deb in "$dl"/*.deb; do dpkg-deb -x "$deb" "$DIR.new" || die "dpkg-deb -x $deb failed"; done
    rm -rf "$DIR"
    mv "$DIR.new" "$DIR"
    ls "$dl"/*.deb | sed 's,.*/,,' >"$DIR/.stamp"
    rm -rf "$dl"
fi
for f in nginx/redis.lua nginx/websocket/client.lua resty/lrucache.lua resty/core/base.lua nginx/cookie.lua; do
    [ -f "$LUADIR/$f" ] || die "$LUADIR/$f missing after unpacking (remove $DIR and run again)"
done
echo "$LUADIR"
