#!/bin/sh
# The C examples in README.md compile against the library (they are the
# first thing users copy).
cd "$(dirname "$0")/../.."
B=build  # uninstrumented: a plain program cannot load sanitizer runtimes
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
awk '/^```c$/{f=1; k++; next} /^```$/{f=0} f{print > ("'"$tmp"'/snippet" k ".c")}' README.md
for f in "$tmp"/snippet*.c; do
    n=$((n+1))
    { echo '#include <nanosrv.h>'; echo '#include <stdlib.h>'; echo 'int main(void) {';
      grep -v '^#include' "$f"; echo 'return 0; }'; } > "$f.main.c"
    if cc -std=c11 -Wall -Werror -Wno-unused-variable -Ilibnanosrv/include -c "$f.main.c" -o "$f.o" 2> "$f.err"; then
        echo "ok $n - README snippet $n compiles"
    else
        echo "not ok $n - README snippet $n compiles"; sed 's/^/#   /' "$f.err" | head -20
    fi
done
echo "1..$n"
