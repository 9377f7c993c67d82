#!/usr/bin/env bash
# The main job: the parallel hash-join benchmark with its defaults (10M x 10M
# rows, T = 1, 2, 4 .. CPUs, threads and processes, 3 rounds; every backend).
# Installs what it needs, builds optimized, and -- as root -- reserves the 2 MiB
# and 1 GiB huge pages it needs (saying so where the kernel finds no
# contiguous GiB), sets vm.nr_overcommit_hugepages to 0 and shmem THP to
# "advise" for the run, and puts every setting back afterwards. Prints the
# table; CSV and PNG land in bench/results/.
# Extra arguments go to bench/hashjoin (e.g. --rows 2000000 --threads 1,2).
# With --idle (the idle-gap mode: the query again and again with gaps, fixed
# pools against elastic ones) no 1 GiB pages are reserved; the 2 MiB pages
# are reserved ones, as huge_pages = on servers have them, so that the huge
# pages an elastic pool gives back stay in the kernel's hugetlb pool (for
# the case where they go back to the system, set vm.nr_overcommit_hugepages
# and run bench/hashjoin --idle yourself: bench/results/idle-surplus).
set -euo pipefail
idle=false
[[ " $* " == *" --idle "* ]] && idle=true
cd "$(dirname "$0")/.."
tools/deps.sh
dir=build-release
if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Dbuildtype=release -Dtests=disabled >/dev/null
fi
ninja -C "$dir" >/dev/null
nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
nr1g=/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages
ovc=/proc/sys/vm/nr_overcommit_hugepages
thp=/sys/kernel/mm/transparent_hugepage/shmem_enabled
restore=""
trap 'eval "$restore"' EXIT # every setting changed below is put back, whatever happens
if [ -w "$ovc" ]; then
    # the pools take reserved pages only: no surplus pages that come and go
    old_ovc=$(cat "$ovc")
    restore="echo $old_ovc > $ovc; $restore"
    echo 0 >"$ovc" 2>/dev/null || true
fi
# 1 GiB pages first (each needs 1 GiB of contiguous free memory), for the
# dsmpool 1 GiB backend unless --backends leaves it out
if [ -w "$nr1g" ] && ! $idle && { [[ " $* " != *" --backends "* ]] || [[ "$*" == *dsmpool-1g* ]]; }; then
    old_1g=$(cat "$nr1g")
    need1g=$("$dir/bench/hashjoin" --gib-pages-needed "$@")
    restore="echo $old_1g > $nr1g; $restore"
    echo 1 >/proc/sys/vm/compact_memory 2>/dev/null || true # gather free memory into whole GiBs
    echo $((old_1g + need1g)) >"$nr1g" 2>/dev/null || true
    got=$(cat "$nr1g")
    [ "$got" -ge $((old_1g + need1g)) ] ||
        echo "note: the kernel found contiguous memory for only $((got - old_1g)) of $need1g 1 GiB pages; the dsmpool 1 GiB rows will say skipped" >&2
fi
if [ -w "$nr" ]; then
    old_nr=$(cat "$nr")
    need=$("$dir/bench/hashjoin" --hugepages-needed "$@")
    restore="echo $old_nr > $nr; $restore"
    echo $((old_nr + need)) >"$nr" 2>/dev/null || true
    got=$(cat "$nr")
    [ "$got" -ge $((old_nr + need)) ] || echo "note: only $got of $((old_nr + need)) huge pages could be reserved" >&2
fi
if [ -w "$thp" ]; then
    old_thp=$(sed -e 's/.*\[\(.*\)\].*/\1/' "$thp")
    restore="echo $old_thp > $thp; $restore"
    echo advise >"$thp" 2>/dev/null || true
fi
[ -n "$restore" ] || echo "note: not root: no huge pages reserved, shmem THP unchanged (those backends may be skipped)" >&2
"$dir/bench/hashjoin" "$@"
