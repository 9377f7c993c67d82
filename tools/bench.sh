#!/usr/bin/env bash
# The main job: the parallel hash-join benchmark with its defaults (10M x 10M
# rows, T = 1, 2, 4 .. CPUs, threads and processes, 3 rounds; every backend).
# Installs what it needs, builds optimized, and -- as root -- reserves the 2 MiB
# huge pages it needs and sets shmem THP to "advise" for the run, putting both
# back afterwards. Prints the table; CSV and PNG land in bench/results/.
# Extra arguments go to bench/hashjoin (e.g. --rows 2000000 --threads 1,2).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
dir=build-release
if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Dbuildtype=release -Dtests=disabled >/dev/null
fi
ninja -C "$dir" >/dev/null
nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
thp=/sys/kernel/mm/transparent_hugepage/shmem_enabled
restore=""
if [ -w "$nr" ]; then
    old_nr=$(cat "$nr")
    need=$("$dir/bench/hashjoin" --hugepages-needed "$@")
    restore="echo $old_nr > $nr;"
    echo $((old_nr + need)) >"$nr" 2>/dev/null || true
    got=$(cat "$nr")
    [ "$got" -ge $((old_nr + need)) ] || echo "note: only $got of $((old_nr + need)) huge pages could be reserved" >&2
fi
if [ -w "$thp" ]; then
    old_thp=$(sed -e 's/.*\[\(.*\)\].*/\1/' "$thp")
    restore="$restore echo $old_thp > $thp;"
    echo advise >"$thp" 2>/dev/null || true
fi
trap "$restore" EXIT
[ -n "$restore" ] || echo "note: not root: no huge pages reserved, shmem THP unchanged (those backends may be skipped)" >&2
"$dir/bench/hashjoin" "$@"
