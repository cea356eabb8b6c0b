#!/bin/sh
# `make install PREFIX=...` gives a usable library: header, SONAME links,
# static archive and a pkg-config file that a C program builds against.
cd "$(dirname "$0")/../.."
B=build  # an uninstrumented build: sanitizer runtimes cannot be loaded by a plain program
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
t() { n=$((n+1)); if eval "$2" >/dev/null 2>&1; then echo "ok $n - $1"; else echo "not ok $n - $1"; fi; }
t "make install" "make -s BUILD=$B install PREFIX=$tmp/p"
t "header installed" "test -f $tmp/p/include/nanosrv.h"
t "shared object and links" "test -f $tmp/p/lib/libnanosrv.so.1.0.0 && test -L $tmp/p/lib/libnanosrv.so.1 && test -L $tmp/p/lib/libnanosrv.so"
t "static archive" "test -f $tmp/p/lib/libnanosrv.a"
t "pkg-config file names the prefix" "grep -q 'prefix=$tmp/p' $tmp/p/lib/pkgconfig/nanosrv.pc"
cat > "$tmp/v.c" <<'C'
#include <nanosrv.h>
#include <stdio.h>
#include <string.h>
int main(void) { return strcmp(nsv_version_string(), NSV_VERSION_STRING) != 0; }
C
t "a program builds with pkg-config and runs" "cc $tmp/v.c -o $tmp/v \$(PKG_CONFIG_PATH=$tmp/p/lib/pkgconfig pkg-config --cflags --libs nanosrv) && LD_LIBRARY_PATH=$tmp/p/lib $tmp/v"
echo "1..$n"
