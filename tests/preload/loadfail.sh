#!/bin/sh
# loadfail.sh CC PRELOAD LOADNOTE: the preload library beside a
# libdsmpool.so.0 that needs a library which is not there (as libnuma.so.1
# is missing from a container image without it): the pool is not made, and
# the note (which the extension logs) names the missing library. Speaks
# TAP (one test; sh, so not tests/tap.sh).
set -eu
cc=$1 pre=$2 loadnote=$3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cp "$pre" "$d/libdsmpool-preload.so"
echo 'int dsmpool_gone_dep(void) { return 0; }' >"$d/gone.c"
echo 'int dsmpool_gone_dep(void); int dsmpool_stub(void) { return dsmpool_gone_dep(); }' >"$d/stub.c"
$cc -shared -fPIC -o "$d/libdsmpoolgonedep.so" "$d/gone.c"
$cc -shared -fPIC -Wl,-soname,libdsmpool.so.0 -o "$d/libdsmpool.so.0" "$d/stub.c" -L"$d" -ldsmpoolgonedep
rm "$d/libdsmpoolgonedep.so"
note=$(env -u LD_LIBRARY_PATH LD_PRELOAD="$d/libdsmpool-preload.so" "$loadnote")
echo "note: $note" | sed 's/^/# /'
case "$note" in
*"libdsmpool could not be loaded"*libdsmpoolgonedep.so*)
    echo "ok 1 - preload::loadfail: the note names the missing dependency"
    echo "1..1"
    ;;
*)
    echo "not ok 1 - preload::loadfail: the note does not name the missing dependency (libdsmpoolgonedep.so)"
    echo "1..1"
    exit 1
    ;;
esac
