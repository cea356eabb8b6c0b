#!/bin/sh
# ABI drift checks: generated cdef up to date, exported symbols == header
# functions == version script pattern, every public function documented, and
# no incompatible change against the committed ABI description (abi.sh).
set -e
cd "$(dirname "$0")/../.."
B=${NSV_BUILD:-build}
PYTHON=${PYTHON:-python3}
fail=0
$PYTHON tools/gen_cdef.py --check || fail=1
nm -D --defined-only "$B/libnanosrv.so.1" | awk '$2=="T"{print $3}' | sed 's/@.*//' | sort > "$B/exports.txt"
$PYTHON -c "
import json; d=json.load(open('bindings/cdef/nanosrv_abi.json'))
print('\n'.join(sorted(f['name'] for f in d['functions'])))
missing=[f['name'] for f in d['functions'] if not f['since']]
assert not missing, 'undocumented (no Since): %s' % missing
" > "$B/declared.txt"
if ! diff -u "$B/declared.txt" "$B/exports.txt"; then
    echo "exported symbols differ from the header (- header, + library)"; fail=1
fi
leaked=$(nm -D --defined-only "$B/libnanosrv.so.1" | awk '{print $3}' | grep -v '^nsv_' | grep -v '^NANOSRV_' || true)
[ -z "$leaked" ] || { echo "non-nsv_ exports: $leaked"; fail=1; }
soname=$(readelf -d "$B/libnanosrv.so.1" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libnanosrv.so.1" ] || { echo "bad SONAME $soname"; fail=1; }
readelf -V "$B/libnanosrv.so.1" | grep -q NANOSRV_1 || { echo "no NANOSRV_1 version node"; fail=1; }
tests/abi/abi.sh check || fail=1
[ $fail = 0 ] && echo "check-abi: ok ($(wc -l < "$B/exports.txt") exported functions)"
exit $fail
