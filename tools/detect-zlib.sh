#!/bin/sh
# Prints how the build can use zlib (gzip of replies), or nothing when it
# cannot:
#   pkg-config   zlib.pc exists (Debian's zlib1g-dev ships it)
#   compile      no zlib.pc, but a program including <zlib.h> compiles and
#                links with -lz
# Called by the Makefile on every run, like detect-tls.sh, so installing or
# removing zlib1g-dev is noticed by the next `make`. CC and PKG_CONFIG as in
# make.
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
if "$PKG_CONFIG" --exists zlib 2>/dev/null; then
    echo pkg-config
    exit 0
fi
tmp=$(mktemp -d 2>/dev/null) || exit 0
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/t.c" <<'C'
#include <zlib.h>
int main(void)
{
    z_stream z = {0};
    return deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) == Z_OK ? deflateEnd(&z) : 1;
}
C
if $CC -o "$tmp/t" "$tmp/t.c" -lz >/dev/null 2>&1; then
    echo compile
fi
exit 0
