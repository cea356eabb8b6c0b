#!/bin/sh
# `make install PREFIX=...` gives a usable library: header, SONAME links,
# static archive and a pkg-config file that a C program builds against. The
# README's commands for building and running a program against an installed
# copy run as written, with its example prefix replaced by a temporary one.
# `make uninstall` then removes exactly what install put there.
cd "$(dirname "$0")/../.."
# An uninstrumented build: sanitizer runtimes cannot be loaded by a plain program
# (NSV_PLAIN_BUILD names it when a sanitizer suite runs, default build).
if [ -n "$SAN" ]; then B=${NSV_PLAIN_BUILD:-build}; else B=${NSV_BUILD:-build}; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
t() { n=$((n+1)); if (eval "$2") >"$tmp/out" 2>&1; then echo "ok $n - $1"; else echo "not ok $n - $1"; sed 's/^/#   /' "$tmp/out" | head -20; fi; }
P=$tmp/p
t "make install" "make -s BUILD=$B SAN= install PREFIX=$P"
t "header installed" "test -f $P/include/nanosrv.h"
t "shared object and links" "test -f $P/lib/libnanosrv.so.1.5.0 && test -L $P/lib/libnanosrv.so.1 && test -L $P/lib/libnanosrv.so"
t "static archive" "test -f $P/lib/libnanosrv.a"
t "pkg-config file names the prefix" "grep -q 'prefix=$P' $P/lib/pkgconfig/nanosrv.pc"
t "pkg-config file of a non-system prefix carries an rpath" \
  "PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --libs nanosrv | grep -q -- '-Wl,-rpath,$P/lib'"
t "install into /usr or /usr/local adds no rpath" \
  "make -s -n BUILD=$B install PREFIX=/usr | grep -q \"s|@RPATH@||\" && make -s -n BUILD=$B install PREFIX=/usr/local | grep -q \"s|@RPATH@||\""
# A program that uses the library and fails unless the copy it loaded is the
# one under NSV_EXPECT_LIB (not another installed one).
cat > "$tmp/app.c" <<'C'
#include <nanosrv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void)
{
    if (strcmp(nsv_version_string(), NSV_VERSION_STRING) != 0)
        return 1;
    nsv_server *srv = nsv_server_new();
    int lid = nsv_listen(srv, "http://127.0.0.1:0", 18);
    nsv_event ev[4];
    char arena[4096];
    int ok = lid >= 0 && nsv_listener_port(srv, lid) > 0 && nsv_poll(srv, ev, 4, arena, sizeof arena, 0) == 0;
    nsv_server_free(srv);
    const char *want = getenv("NSV_EXPECT_LIB");
    char line[4096];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "libnanosrv.so") && want && strstr(line, want))
            found = 1;
    if (f)
        fclose(f);
    if (!found)
        fprintf(stderr, "libnanosrv not loaded from %s\n", want ? want : "(unset)");
    return ok && found ? 0 : 1;
}
C
t "a program builds with pkg-config and runs" \
  "cd $tmp && cc app.c -o v \$(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --cflags --libs nanosrv) && env -u LD_LIBRARY_PATH NSV_EXPECT_LIB=$P/lib/ ./v"
t "it has the rpath of the prefix" "readelf -d $tmp/v | grep -E 'R(UN)?PATH' | grep -q '$P/lib'"
# The README block that builds against /opt/nanosrv, on the temporary prefix.
awk '/^```sh$/{f=1; b=""; next} /^```$/{if (f && b ~ /\/opt\/nanosrv/) {printf "%s", b; exit} f=0} f{b=b $0 "\n"}' README.md |
    grep -v '^make install' | sed "s|/opt/nanosrv|$P|g" > "$tmp/readme.sh"
t "README install block found" "grep -q pkg-config $tmp/readme.sh && test \$(grep -c '\./app' $tmp/readme.sh) -ge 3"
t "README install block runs as written" \
  "cd $tmp && test -s readme.sh && rm -f app && env -u LD_LIBRARY_PATH NSV_EXPECT_LIB=$P/lib/ sh -ex readme.sh"
t "make uninstall removes every installed file" \
  "touch $P/lib/other.so && make -s BUILD=$B SAN= uninstall PREFIX=$P && rm $P/lib/other.so && test -z \"\$(find $P ! -type d)\""
t "uninstall leaves the directories" "test -d $P/include && test -d $P/lib/pkgconfig"
t "uninstall of an older version removes its real file too" \
  "make -s BUILD=$B SAN= install PREFIX=$P && mv $P/lib/\$(readlink $P/lib/libnanosrv.so.1) $P/lib/libnanosrv.so.1.99.0 &&
   ln -sf libnanosrv.so.1.99.0 $P/lib/libnanosrv.so.1 && make -s BUILD=$B SAN= uninstall PREFIX=$P &&
   test -z \"\$(find $P ! -type d)\""
echo "1..$n"
