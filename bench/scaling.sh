#!/usr/bin/env bash
# The many-core run, in two steps.
#
#   bench/scaling.sh build        here: builds static benchmark binaries into
#                                 bench/dist/ (no packages needed where they run)
#   bench/scaling.sh run [DIR]    there, as root: the hash-join sweep T = 1, 2, 4,
#                                 8, 16 with threads and with processes, the
#                                 page-table benchmark, the 32 KiB burst; all
#                                 output and a description of the machine into
#                                 DIR (default bench/results/scaling-<hostname>).
#
# The run needs no network and no package: it reserves 2 MiB and 1 GiB huge
# pages, sets vm.nr_overcommit_hugepages to 0 and shmem THP to "advise" for
# its duration (root), and puts them all back.
# Budget: under 8 minutes on a 16-core machine (SCALE_ROWS, SCALE_ROUNDS and
# SCALE_THREADS override the sizes; plots are drawn later, here, with
# bench/scaling.sh plot DIR, since the machine may have no gnuplot).
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-}
case "$cmd" in
build)
    tools/deps.sh
    rm -rf build-static
    meson setup build-static -Dbuildtype=release -Dtests=disabled -Dtools=false \
        -Dstatic_bench=true -Ddefault_library=static >/dev/null
    ninja -C build-static >/dev/null
    mkdir -p bench/dist
    cp build-static/bench/hashjoin build-static/bench/pagetables build-static/bench/burst bench/dist/
    cp bench/scaling.sh bench/plot-hashjoin.gp bench/plot-pagetables.gp bench/dist/
    ls -la bench/dist
    ;;
run)
    bin=bench/dist
    [ -x "$bin/hashjoin" ] || { echo "no $bin/hashjoin: run 'bench/scaling.sh build' first" >&2; exit 1; }
    out=${2:-bench/results/scaling-$(hostname)}
    mkdir -p "$out"
    rows=${SCALE_ROWS:-10000000}
    rounds=${SCALE_ROUNDS:-3}
    threads=${SCALE_THREADS:-1,2,4,8,16}
    start=$(date +%s)
    {
        echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "kernel: $(uname -r)"
        echo "cpus: $(nproc)"
        grep -m1 'model name' /proc/cpuinfo || true
        command -v lscpu >/dev/null && lscpu | grep -E 'Socket|NUMA|Thread|Core|L2|L3' || true
        grep -E 'MemTotal|Hugepagesize' /proc/meminfo
        echo "huge page sizes: $(ls /sys/kernel/mm/hugepages 2>/dev/null | tr '\n' ' ')"
    } >"$out/machine.txt"
    nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
    nr1g=/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages
    ovc=/proc/sys/vm/nr_overcommit_hugepages
    thp=/sys/kernel/mm/transparent_hugepage/shmem_enabled
    restore=""
    trap 'eval "$restore"' EXIT # every setting changed below is put back
    if [ -w "$ovc" ]; then # reserved pages only, no surplus ones coming and going
        old_ovc=$(cat "$ovc")
        restore="echo $old_ovc > $ovc; $restore"
        echo 0 >"$ovc" || true
    fi
    if [ -w "$nr1g" ]; then # first: each needs 1 GiB of contiguous free memory
        old_1g=$(cat "$nr1g")
        need1g=$("$bin/hashjoin" --rows "$rows" --gib-pages-needed)
        restore="echo $old_1g > $nr1g; $restore"
        echo 1 >/proc/sys/vm/compact_memory 2>/dev/null || true
        echo $((old_1g + need1g)) >"$nr1g" 2>/dev/null || true
        got=$(cat "$nr1g")
        [ "$got" -ge $((old_1g + need1g)) ] ||
            echo "note: contiguous memory for only $((got - old_1g)) of $need1g 1 GiB pages" | tee -a "$out/machine.txt"
    fi
    if [ -w "$nr" ]; then
        old_nr=$(cat "$nr")
        need=$("$bin/hashjoin" --rows "$rows" --hugepages-needed)
        [ "$need" -lt 600 ] && need=600 # the page-table run maps 1 GiB
        restore="echo $old_nr > $nr; $restore"
        echo $((old_nr + need)) >"$nr" || true
    fi
    if [ -w "$thp" ]; then
        old_thp=$(sed -e 's/.*\[\(.*\)\].*/\1/' "$thp")
        restore="echo $old_thp > $thp; $restore"
        echo advise >"$thp" || true
    fi
    echo "== hashjoin: $rows rows, T=$threads, threads and processes, $rounds rounds" | tee "$out/hashjoin.txt"
    timeout 300 "$bin/hashjoin" --rows "$rows" --rounds "$rounds" --threads "$threads" --mode both \
        --backends dsmpool-4k,dsmpool-thp,dsmpool-2m,dsmpool-1g,pg-dsa,pg-prealloc-4k,pg-prealloc-2m,jemalloc,glibc \
        --out "$out" 2>/dev/null | tee -a "$out/hashjoin.txt" || echo "hashjoin: stopped (time or error)" | tee -a "$out/hashjoin.txt"
    echo "== pagetables: 64, 1024 and 4096 processes, 1 GiB" | tee "$out/pagetables.txt"
    timeout 300 "$bin/pagetables" --procs 64,1024,4096 --size 1024 --out "$out" 2>/dev/null | tee -a "$out/pagetables.txt" || echo "pagetables: stopped (time or error)" | tee -a "$out/pagetables.txt"
    echo "== burst: 32 KiB alloc bursts" | tee "$out/burst.txt"
    timeout 60 "$bin/burst" --threads "$threads" --rounds 3 --gib 0.25 --pairs 10000000 2>/dev/null | tee -a "$out/burst.txt" || true
    echo "elapsed: $(($(date +%s) - start)) s" | tee -a "$out/machine.txt"
    ;;
plot)
    dir=${2:?usage: bench/scaling.sh plot DIR}
    modes=""
    [ -s "$dir/hashjoin-threads.dat" ] && modes="threads"
    [ -s "$dir/hashjoin-procs.dat" ] && modes="$modes procs"
    rows=$(awk -F, 'NR==2 {print $11}' "$dir/hashjoin.csv")
    gnuplot -e "dir='$dir'; modes='$modes'; rows=$rows" bench/plot-hashjoin.gp
    [ -s "$dir/pagetables.csv" ] && gnuplot -e "dir='$dir'; size=1024" bench/plot-pagetables.gp
    echo "plots in $dir"
    ;;
*)
    sed -n '2,17p' "$0"
    exit 2
    ;;
esac
