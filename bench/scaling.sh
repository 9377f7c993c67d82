#!/usr/bin/env bash
# The many-core run, in two steps.
#
#   bench/scaling.sh build        here: builds static benchmark binaries into
#                                 bench/dist/ (no packages needed where they run)
#   bench/scaling.sh run [DIR]    there, as root: the hash-join sweep T = 1, 2,
#                                 4 .. CPUs and 4x, 16x the CPUs, threads and
#                                 processes, every shared backend and the
#                                 attribution rows, with the counted round
#                                 (per-chunk locks, RMWs, system calls,
#                                 faults, allocation tails, serial-fraction
#                                 indicators next to the measured speedup);
#                                 the 32 KiB burst; the page-table benchmark
#                                 with 1024, 4096, 16384 processes where
#                                 memory and time allow; all output and a
#                                 description of the machine into DIR
#                                 (default bench/results/scaling-<hostname>).
#
# The run needs no network and no package: it reserves 2 MiB and 1 GiB huge
# pages, sets vm.nr_overcommit_hugepages to 0 and shmem THP to "advise" for
# its duration (root), and puts them all back; the pg-dsa-thp rows mount a
# tmpfs in a mount namespace of their own, seen by nobody else.
# Budget: 8 minutes, kept by construction: each step gets a timeout from what
# is left (SCALE_BUDGET seconds, default 470), and a step that has no time
# left says so. SCALE_ROWS (default 4M), SCALE_ROUNDS (2, plus the counted
# round) and SCALE_THREADS (default 1, 2, 4 .. CPUs, 4x, 16x) override the
# sizes; plots are drawn later, here, with bench/scaling.sh plot DIR, since
# the machine may have no gnuplot.
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
    rows=${SCALE_ROWS:-4000000}
    rounds=${SCALE_ROUNDS:-2}
    ncpu=$(nproc)
    if [ -z "${SCALE_THREADS:-}" ]; then
        threads=1
        t=2
        while [ "$t" -le "$ncpu" ]; do threads="$threads,$t"; t=$((t * 2)); done
        [ $((t / 2)) -eq "$ncpu" ] || threads="$threads,$ncpu"
        threads="$threads,$((4 * ncpu)),$((16 * ncpu))"
        [ $((16 * ncpu)) -le 256 ] || threads="${threads%,*}" # the bench's limit: 256 workers
    else
        threads=$SCALE_THREADS
    fi
    bthreads=$(echo "$threads" | tr ',' '\n' | awk -v n="$ncpu" '$1 <= n' | paste -sd,)
    start=$(date +%s)
    deadline=$((start + ${SCALE_BUDGET:-470}))
    left() { echo $((deadline - $(date +%s))); }
    {
        echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "kernel: $(uname -r)"
        echo "cpus: $(nproc)"
        grep -m1 'model name' /proc/cpuinfo || true
        command -v lscpu >/dev/null && lscpu | grep -E 'Socket|NUMA|Thread|Core|L2|L3' || true
        grep -E 'MemTotal|MemAvailable|Hugepagesize' /proc/meminfo
        echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "shmem THP: $(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null)"
        # shellcheck disable=SC2012 # a listing for the log
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
    # 1. the hash join: times, attribution rows, counted round, indicators, tails
    echo "== hashjoin: $rows rows, T=$threads, threads and processes, $rounds rounds + 1 counted" | tee "$out/hashjoin.txt"
    timeout "$(($(left) - 120))" "$bin/hashjoin" --rows "$rows" --rounds "$rounds" --threads "$threads" --mode both \
        --backends dsmpool-4k,dsmpool-thp,dsmpool-2m,dsmpool-1g,pg-dsa,pg-dsa-thp,pg-prealloc-4k,pg-prealloc-2m,pg-prealloc-2m-inline,jemalloc,glibc \
        --out "$out" 2>"$out/hashjoin.err" | tee -a "$out/hashjoin.txt" ||
        echo "hashjoin: stopped (time or error; see hashjoin.err)" | tee -a "$out/hashjoin.txt"
    echo "step hashjoin: $(($(date +%s) - start)) s from the start" >>"$out/machine.txt"
    # 2. the 32 KiB burst
    echo "== burst: 32 KiB alloc bursts, T=$bthreads" | tee "$out/burst.txt"
    t_left=$(left)
    if [ "$t_left" -gt 100 ]; then
        timeout 40 "$bin/burst" --threads "$bthreads" --rounds 3 --gib 0.25 --pairs 10000000 2>/dev/null |
            tee -a "$out/burst.txt" || echo "burst: stopped (time or error)" | tee -a "$out/burst.txt"
    else
        echo "burst: skipped, $t_left s of the budget left" | tee -a "$out/burst.txt"
    fi
    echo "step burst: $(($(date +%s) - start)) s from the start" >>"$out/machine.txt"
    # 3. page tables of many processes: one invocation per count, so that
    # what finished is kept; the bench skips what memory or limits forbid
    echo "== pagetables: 1024, 4096, 16384 processes, 1 GiB" | tee "$out/pagetables.txt"
    for p in 1024 4096 16384; do
        t_left=$(left)
        if [ "$t_left" -lt 20 ]; then
            echo "pagetables P=$p: skipped, $t_left s of the budget left" | tee -a "$out/pagetables.txt"
            continue
        fi
        cfg=4k,thp,2m,2m-1g
        [ "$p" -gt 1024 ] && cfg=thp,2m,2m-1g # 4 KiB pages: 2 GiB of page tables per 1024 processes, minutes
        timeout "$((t_left - 10))" "$bin/pagetables" --procs "$p" --configs "$cfg" --size 1024 --out "$out/pagetables-$p" \
            2>/dev/null | tee -a "$out/pagetables.txt" ||
            echo "pagetables P=$p: stopped (time or error)" | tee -a "$out/pagetables.txt"
        echo "step pagetables P=$p: $(($(date +%s) - start)) s from the start" >>"$out/machine.txt"
    done
    echo "elapsed: $(($(date +%s) - start)) s" | tee -a "$out/machine.txt"
    ;;
plot)
    dir=${2:?usage: bench/scaling.sh plot DIR}
    modes=""
    [ -s "$dir/hashjoin-threads.dat" ] && modes="threads"
    [ -s "$dir/hashjoin-procs.dat" ] && modes="$modes procs"
    rows=$(awk -F, 'NR==2 {print $11}' "$dir/hashjoin.csv")
    gnuplot -e "dir='$dir'; modes='$modes'; rows=$rows" bench/plot-hashjoin.gp
    for d in "$dir" "$dir"/pagetables-*; do
        [ -s "$d/pagetables.csv" ] && gnuplot -e "dir='$d'; size=1024" bench/plot-pagetables.gp
    done
    echo "plots in $dir"
    ;;
*)
    sed -n '2,29p' "$0"
    exit 2
    ;;
esac
