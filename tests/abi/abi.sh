#!/bin/sh
# ABI description of the public interface, compared with abidiff (Debian
# abigail-tools) against the committed baseline:
#   tests/abi/libnanosrv.abi     the exported functions of libnanosrv.so.1 and
#                                the public types they reach (nsv_event, nsv_url)
#   tests/abi/nanosrv-types.abi  every type of nanosrv.h, enum values included
#                                (from tests/abi/types.c: no function takes an enum)
# Only the public interface counts: abidw keeps the types defined under
# libnanosrv/include (--headers-dir, --drop-private-types), and hidden
# functions are not in the description at all, so internal changes pass.
#
#   abi.sh check      fails on any change but additions (new functions, new
#                     enumerators, new types); run by `make check-abi`
#   abi.sh baseline   rewrites both files from the build (`make abi-baseline`,
#                     a release step: see docs/ABI.md)
# NSV_BUILD selects the build directory, CC the compiler of the types probe.
set -e
cd "$(dirname "$0")/../.."
B=${NSV_BUILD:-build}
mode=${1:-check}
for t in abidw abidiff; do
    command -v $t >/dev/null 2>&1 || {
        echo "abi: $t not found: install abigail-tools (apt-get install abigail-tools, or make deps)" >&2
        exit 1
    }
done
mkdir -p "$B/abi"
${CC:-cc} -std=c11 -g -O0 -fno-eliminate-unused-debug-types -fPIC -shared -fvisibility=hidden \
    -Ilibnanosrv/include -o "$B/abi/nanosrv-types.so" tests/abi/types.c
# Options that keep the description independent of the build directory, the
# architecture name, parameter names and source lines.
ABIDW="abidw --no-corpus-path --no-comp-dir-path --no-show-locs --no-architecture --no-elf-needed \
--no-parameter-names --type-id-style hash --headers-dir libnanosrv/include --drop-private-types"
$ABIDW --drop-undefined-syms --out-file "$B/abi/libnanosrv.abi" "$B/libnanosrv.so.1"
$ABIDW --load-all-types --out-file "$B/abi/nanosrv-types.abi" "$B/abi/nanosrv-types.so"
if [ "$mode" = baseline ]; then
    cp "$B/abi/libnanosrv.abi" "$B/abi/nanosrv-types.abi" tests/abi/
    echo "abi: baseline written: tests/abi/libnanosrv.abi, tests/abi/nanosrv-types.abi"
    exit 0
fi
# abidiff exit status: bit 1 error, 2 usage, 4 ABI change, 8 incompatible
# change. --no-added-syms leaves additions out, and libabigail filters
# harmless changes (an enumerator added) by itself, so any status but 0 is
# a change that breaks programs or bindings built against the baseline: a
# removed function (12), a changed parameter, return type or struct layout
# (4, 12), a changed enum value (12). -t covers types no function reaches.
fail=0
diff_one() {
    set +e
    abidiff --no-added-syms $3 "$1" "$2" > "$B/abi/$(basename "$1" .abi).diff" 2>&1
    rc=$?
    set -e
    d="$B/abi/$(basename "$1" .abi).diff"
    # A new public type (e.g. a new enum) is reported as an ABI change (4)
    # although it breaks nothing: pass when the report holds only additions.
    if [ $rc = 4 ] && ! grep -q '\[[CD]\]' "$d" &&
       ! grep -Eq '(^|[^0-9])[1-9][0-9]* ([Rr]emoved|[Cc]hanged)' "$d"; then
        rc=0
    fi
    if [ $rc != 0 ]; then
        if [ $((rc & 3)) != 0 ]; then echo "abi: abidiff failed (exit $rc) on $1"; else
            echo "abi: incompatible with $1 (abidiff exit $rc):"; fi
        sed 's/^/  /' "$B/abi/$(basename "$1" .abi).diff"
        fail=1
    fi
}
diff_one tests/abi/libnanosrv.abi "$B/abi/libnanosrv.abi" ""
diff_one tests/abi/nanosrv-types.abi "$B/abi/nanosrv-types.abi" -t
[ $fail = 0 ] && echo "abi: no incompatible change against tests/abi/*.abi (abidiff)"
exit $fail
