#!/usr/bin/env bash
# The seed query, stock PostgreSQL against PostgreSQL on dsmpool (run.sh bench).
#
#   create table t (i int); insert into t select generate_series(1, 10000000);
#   select pg_prewarm('t'); set work_mem = '1GB';
#   select count(*) from t t1 join t t2 using (i);
#
# with max_parallel_workers_per_gather = 0, 1, 2, ... CPUs and 4 x CPUs, on
#   stock-4k      stock, min_dynamic_shared_memory = 0, huge_pages = off
#   stock-1g-huge stock, min_dynamic_shared_memory = 1GB, huge_pages = on
#   stock-shm-thp stock, 0 and huge_pages = on, /dev/shm a huge=always tmpfs
#                 (a private mount namespace)
#   pool-4k       patched, dsmpool_size = 2GB, 4 KiB pages
#   pool-thp      patched, dsmpool in transparent huge pages
#   pool-2m       patched, dsmpool in 2 MiB hugetlb pages, huge_pages = on
# Medians of RUNS (default 7) runs; minor faults of the backends (leader and
# workers, from the postmaster's reaped-children counter: each query runs in
# a fresh connection). Output: bench/results/postgresql-<host>/ (seed.csv,
# seed.txt, seed.png). One command on any machine: run.sh bench.
#
# Environment: ROWS (10000000), RUNS (7), WORKERS ("0 1 2 .. CPUs 4xCPUs"),
# CONFIGS (all six). Rerunning some configurations (CONFIGS=pool-2m) replaces
# their rows in seed.csv and keeps the others'; delete seed.csv to start over
# (and always when ROWS or WORKERS change).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
prefix=${1:-$here/work}
ROWS=${ROWS:-10000000}
RUNS=${RUNS:-7}
ncpu=$(nproc)
if [ -z "${WORKERS:-}" ]; then
    WORKERS="0"
    for ((w = 1; w <= ncpu; w = w * 2)); do WORKERS="$WORKERS $w"; done
    [[ " $WORKERS " == *" $ncpu "* ]] || WORKERS="$WORKERS $ncpu"
    WORKERS="$WORKERS $((4 * ncpu))"
fi
ALL_CONFIGS="stock-4k stock-1g-huge stock-shm-thp pool-4k pool-thp pool-2m"
CONFIGS=${CONFIGS:-$ALL_CONFIGS}
maxw=$((4 * ncpu > 8 ? 4 * ncpu : 8))
out="$repo/bench/results/postgresql-$(hostname -s)"
mkdir -p "$out"
[ "$(id -u)" = 0 ] || { echo "bench.sh: run as root (huge pages, mount namespaces)" >&2; exit 1; }

# the patched server (run.sh build), and a stock one beside it
[ -x "$prefix/patched/bin/postgres" ] || "$here/run.sh" build "$prefix"
# shellcheck source=/dev/null
source <(sed -n '/^# ---- a server/,/^# ---- check/p' "$here/run.sh")
PGUSER_NAME=dsmpoolpg
as_pg() { runuser -u "$PGUSER_NAME" -- "$@"; }
log() { echo "=== $*" >&2; }
if [ ! -x "$prefix/stock/bin/postgres" ]; then
    log "stock PostgreSQL: build into $prefix/stock"
    source <(sed -n '/^unpack()/,/^}/p;/^configure_and_make()/,/^}/p' "$here/run.sh")
    jobs=$ncpu
    unpack src-stock
    configure_and_make "$prefix/src-stock" "$prefix/stock"
fi

# ---- system settings, put back at the end ----------------------------------------
hp=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
shmem=/sys/kernel/mm/transparent_hugepage/shmem_enabled
hp_old=$(cat $hp)
shmem_old=$(sed -E 's/.*\[([a-z]+)\].*/\1/' $shmem)
restore() {
    for b in stock patched; do as_pg "$prefix/$b/bin/pg_ctl" -D "$data" stop -m fast >/dev/null 2>&1 || true; done
    echo "$hp_old" >$hp
    echo "$shmem_old" >$shmem
}
trap restore EXIT
need_pages=$(((2048 + 512 + 256) / 2)) # the largest: a 2 GB pool and 512 MB of shared buffers in 2 MiB pages
echo $((hp_old + need_pages)) >$hp
have=$(($(cat $hp) - hp_old))
[ "$have" -ge "$need_pages" ] || echo "warning: only $have of $need_pages huge pages could be reserved: the huge configurations may fail" >&2
echo advise >$shmem

# ---- the data: one cluster, made once, used by both binaries -------------------------------
pgbin="$prefix/stock/bin"
if [ ! -f "$data/seed-$ROWS" ]; then
    log "the table: $ROWS rows"
    server_init "$pgbin" "shared_buffers = 512MB" "max_worker_processes = $maxw" "max_parallel_workers = $maxw" \
        "min_dynamic_shared_memory = 0" "huge_pages = off"
    cp "$data/postgresql.conf" "$data/postgresql.conf.base"
    server_start "$pgbin"
    sql "create table t (i int); insert into t select generate_series(1, $ROWS); analyze t; create extension pg_prewarm;"
    server_stop "$pgbin"
    touch "$data/seed-$ROWS"
fi

settings() { # the server's settings for a configuration, a line each
    case $1 in
    stock-4k) printf '%s\n' "min_dynamic_shared_memory = 0" "huge_pages = off" ;;
    stock-1g-huge) printf '%s\n' "min_dynamic_shared_memory = 1GB" "huge_pages = on" ;;
    stock-shm-thp) printf '%s\n' "min_dynamic_shared_memory = 0" "huge_pages = on" ;;
    pool-4k) printf '%s\n' "dsmpool_size = 2GB" "dsmpool_huge_pages = off" "huge_pages = off" ;;
    pool-thp) printf '%s\n' "dsmpool_size = 2GB" "dsmpool_huge_pages = transparent" "huge_pages = off" ;;
    pool-2m) printf '%s\n' "dsmpool_size = 2GB" "dsmpool_huge_pages = on" "huge_pages = on" ;;
    esac
}

start_config() {
    local c=$1
    pgbin="$prefix/stock/bin"
    [[ $c == pool-* ]] && pgbin="$prefix/patched/bin"
    cp "$data/postgresql.conf.base" "$data/postgresql.conf"
    settings "$c" >>"$data/postgresql.conf"
    if [ "$c" = stock-shm-thp ]; then # DSM segments in a huge=always tmpfs, the server in its own mount namespace
        unshare -m --propagation private sh -c "mount -t tmpfs -o huge=always,size=8g,mode=1777 tmpfs /dev/shm &&
            exec runuser -u $PGUSER_NAME -- $pgbin/pg_ctl -D $data -l $data/log -w -t 300 start" >/dev/null
    else
        as_pg "$pgbin/pg_ctl" -D "$data" -l "$data/log" -w -t 300 start >/dev/null
    fi
    sql "select pg_prewarm('t');" >/dev/null
}

cminflt() { awk '{print $11}' "/proc/$(server_pid)/stat"; } # faults of the reaped children (field 11)

if [ -f "$out/seed.csv" ]; then # keep the rows of the configurations not run now
    awk -F, -v cs=" $CONFIGS " 'NR == 1 || index(cs, " " $1 " ") == 0' "$out/seed.csv" >"$out/seed.csv.new"
    mv "$out/seed.csv.new" "$out/seed.csv"
else
    echo "config,workers,run,ms,minflt" >"$out/seed.csv"
fi
for c in $CONFIGS; do
    log "$c: $(settings "$c" | tr '\n' ';')"
    if ! start_config "$c"; then
        echo "  $c could not start (see $data/log): skipped" >&2
        tail -3 "$data/log" >&2
        continue
    fi
    grep -h "dsmpool: pool" "$data/log" | tail -1 | sed 's/.*LOG: */  /' >&2 || true
    sql "select 1" >/dev/null # a warm connection path
    for w in $WORKERS; do
        for r in $(seq 1 "$RUNS"); do
            f0=$(cminflt)
            t=$(as_pg "$pgbin/psql" -h "$sock" -p $port -U postgres -d postgres -X -q -A -t \
                -c "set work_mem = '1GB'" -c "set max_parallel_workers_per_gather = $w" -c '\timing on' \
                -c "select count(*) from t t1 join t t2 using (i)" | sed -nE 's/^Time: ([0-9.]+) ms.*/\1/p')
            sleep 0.2 # the workers are reaped
            f1=$(cminflt)
            echo "$c,$w,$r,$t,$((f1 - f0))" >>"$out/seed.csv"
        done
        echo "  workers $w: $(awk -F, -v c="$c" -v w="$w" '$1==c && $2==w {print $4}' "$out/seed.csv" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)] " ms (median)"}')" >&2
    done
    as_pg "$pgbin/pg_ctl" -D "$data" -w stop -m fast >/dev/null
done

# ---- the table and the plot --------------------------------------------------------------------
python3 - "$out" "$ALL_CONFIGS" "$WORKERS" <<'EOF'
import csv, statistics, sys
out, configs, workers = sys.argv[1], sys.argv[2].split(), [int(w) for w in sys.argv[3].split()]
rows = list(csv.DictReader(open(f"{out}/seed.csv")))
configs = [c for c in configs if any(r["config"] == c for r in rows)]
med = {}
for c in configs:
    for w in workers:
        ms = [float(r["ms"]) for r in rows if r["config"] == c and int(r["workers"]) == w and r["ms"]]
        fl = [int(r["minflt"]) for r in rows if r["config"] == c and int(r["workers"]) == w and r["ms"]]
        if ms:
            med[c, w] = (statistics.median(ms), statistics.median(fl), len(ms))
with open(f"{out}/seed.txt", "w") as f:
    f.write("| config | " + " | ".join(f"{w} workers" for w in workers) + " |\n")
    f.write("| --- |" + " --- |" * len(workers) + "\n")
    base = {w: med.get(("stock-4k", w), (None,))[0] for w in workers}
    for c in configs:
        cells = []
        for w in workers:
            if (c, w) not in med:
                cells.append("-")
                continue
            ms, fl, n = med[c, w]
            rel = f" ({base[w] / ms:.2f}x)" if base[w] else ""
            cells.append(f"{ms / 1000:.2f} s{rel}, {fl / 1000:.0f}k faults")
        f.write(f"| {c} | " + " | ".join(cells) + " |\n")
with open(f"{out}/seed.dat", "w") as f:
    f.write("workers " + " ".join(configs) + "\n")
    for w in workers:
        f.write(f"{w} " + " ".join(f"{med[c, w][0] / 1000:.3f}" if (c, w) in med else "NaN" for c in configs) + "\n")
print(open(f"{out}/seed.txt").read())
EOF
if command -v gnuplot >/dev/null; then
    n=$(($(head -1 "$out/seed.dat" | wc -w) - 1))
    gnuplot <<EOF
set terminal pngcairo size 900,520 noenhanced
set output "$out/seed.png"
set title "select count(*) from t t1 join t t2 using (i), $ROWS rows: median of $RUNS ($(nproc) CPUs)"
set xlabel "max_parallel_workers_per_gather"
set ylabel "seconds"
set key outside right
set grid
plot for [i=2:$((n + 1))] "$out/seed.dat" using 1:i with linespoints title columnheader(i)
EOF
fi
{
    echo "machine: $(nproc) CPUs, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r)"
    lscpu 2>/dev/null | grep -E "Model name|NUMA node\(s\)" || true
} >"$out/machine.txt"
log "results: $out"
