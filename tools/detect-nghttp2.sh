#!/bin/sh
# Prints how the build can use nghttp2 (HTTP/2), or nothing when it cannot:
#   pkg-config   libnghttp2.pc exists (Debian's libnghttp2-dev ships it)
#   compile      no libnghttp2.pc, but a program including <nghttp2/nghttp2.h>
#                compiles and links with -lnghttp2
# The defences the server relies on (stream reset rate limit, CONTINUATION
# limit) must be present: an nghttp2 without them is treated as absent.
# Called by the Makefile like detect-zlib.sh. CC and PKG_CONFIG as in make.
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
tmp=$(mktemp -d 2>/dev/null) || exit 0
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/t.c" <<'C'
#include <nghttp2/nghttp2.h>
int main(void)
{
    nghttp2_option *o;
    if (nghttp2_option_new(&o) != 0)
        return 1;
    nghttp2_option_set_stream_reset_rate_limit(o, 100, 100);
    nghttp2_option_set_max_continuations(o, 8);
    nghttp2_option_set_max_settings(o, 32);
    nghttp2_option_set_max_outbound_ack(o, 1000);
    nghttp2_option_del(o);
    return 0;
}
C
if "$PKG_CONFIG" --exists libnghttp2 2>/dev/null; then
    cflags=$("$PKG_CONFIG" --cflags libnghttp2) libs=$("$PKG_CONFIG" --libs libnghttp2)
    if $CC $cflags -o "$tmp/t" "$tmp/t.c" $libs >/dev/null 2>&1; then
        echo pkg-config
        exit 0
    fi
fi
if $CC -o "$tmp/t" "$tmp/t.c" -lnghttp2 >/dev/null 2>&1; then
    echo compile
fi
exit 0
