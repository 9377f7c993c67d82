#!/usr/bin/env bash
# Stock PostgreSQL 18 against PostgreSQL 18 on dsmpool (run.sh bench), release
# builds, in eight configurations of one cluster (shared_buffers = 512MB):
#   stock-4k      stock, min_dynamic_shared_memory = 0, huge_pages = off
#   stock-1g-huge stock, min_dynamic_shared_memory = 1GB, huge_pages = on
#   stock-shm-thp stock, 0 and huge_pages = on, /dev/shm a huge=always tmpfs
#                 (a private mount namespace)
#   pool-4k       patched, dsmpool_size = 2GB, 4 KiB pages
#   pool-thp      patched, dsmpool in transparent huge pages
#   pool-2m       patched, dsmpool in 2 MiB hugetlb pages, huge_pages = on
#   preload-4k    stock, the same binary, LD_PRELOAD=libdsmpool-preload.so and
#                 nothing else (its 2 GB elastic pool in 4 KiB pages: memory
#                 goes back as segments go), as stock-4k otherwise
#   preload-huge  stock with LD_PRELOAD and the extension dsmpool
#                 (shared_preload_libraries): dsmpool.huge_pages = on,
#                 huge_pages = on, dsmpool.warm and dsmpool.idle_release as
#                 pool-elastic's (ELASTIC_WARM, ELASTIC_IDLE), nothing sized
#                 (dsmpool.size's 2 GB default)
#   preload-reserve  (the idle part only, when named in ICONFIGS) preload-huge
#                 with a reservation beyond the machine's memory:
#                 dsmpool.size = RESERVE MB (65536) and dsmpool.resident_min
#                 = ELASTIC_MIN; the tables of the whole reservation are
#                 resident from the start (about 0.44% of it: issue 35)
# All eight servers are up at once (a copy of the cluster each), and every
# measurement is interleaved: one query of each configuration in turn, the
# order rotated from round to round, so that this machine's drifts fall on
# all of them alike. Per configuration: the median and the minimum, and the
# paired ratio against stock-1g-huge (its time over theirs in the same
# round: above 1 is faster), median and range.
#
#   seed     select count(*) from t t1 join t t2 using (i), 10M rows,
#            work_mem = 1GB, max_parallel_workers_per_gather = 0, 1, 2 .. CPUs,
#            4 x CPUs; RUNS rounds; minor faults of the backends
#   clients  N = 1, 4, 8 connections at once, each running the seed query
#            with 2 workers: queries per minute; for the pools, what fell back
#            (preload-huge: segments the pool refused, from its view)
#   pgbench  the cost of the preload library where it serves nothing: pgbench
#            -S (select only, PCLIENTS clients, PSECS seconds) and pgbench -S
#            -C (a connection per transaction: every backend a fork, its
#            exit, and the DSM attach of each) on a scale-PSCALE database,
#            PRUNS interleaved rounds, in PCONFIGS (stock-4k preload-4k
#            stock-1g-huge preload-huge): transactions per second, median,
#            and each preload configuration against its stock twin (the
#            same huge_pages: preload-4k against stock-4k, preload-huge
#            against stock-1g-huge), the paired ratio (goal: within 1%)
#   vacuum   VACUUM (PARALLEL 2) of a table of VROWS rows, 90% of them dead,
#            two indexes (the dead TIDs in a shared radix tree, a DSA area):
#            the time, and, in an untimed round with uprobes, DSA allocations
#            (and DSM segments) per second of that time
#   idle     the elastic pool against the fixed ones and stock, over time
#            (not in the default PARTS): the seed query with 2 workers
#            IRUNS times with ISHORT-second gaps (shorter than the idle
#            release: the memory stays), then IRUNS times each after an
#            ILONG-second gap (longer than dsmpool_idle_release and a
#            maintenance period: the elastic pool gives its memory back and
#            refills it in the next query), in ICONFIGS: stock-1g-huge,
#            stock-4k, stock-shm-thp, pool-2m, pool-elastic, preload-4k and
#            preload-huge
#              pool-elastic  patched, dsmpool_size = 2GB as a reservation in
#                            2 MiB hugetlb pages (as pool-2m: only the
#                            elasticity differs), dsmpool_resident_min =
#                            64MB, dsmpool_idle_release = 2000 ms,
#                            dsmpool_warm = 256MB (ELASTIC_MIN, ELASTIC_IDLE,
#                            ELASTIC_WARM)
#            Gaps that depend on idle time cannot be interleaved query by
#            query: the configurations run one after another, one server up
#            at a time, each started afresh. Per query: ms, the backends'
#            minor faults and, for the pools, pg_dsmpool's resident bytes and
#            refills on demand (their count and time: what the query paid).
#            Every ISAMPLE ms a sampler writes the server's shared memory
#            resident: the blocks (st_blocks) of every shared object its
#            processes map -- the main region, the pool, DSM segments in
#            /dev/shm -- read through /proc/PID/map_files, each object once.
#            That counts faulted pages alike for hugetlb, tmpfs, THP and
#            anonymous shared memory, and only this server's. The figure
#            compared is the dynamic shared memory resident: the pool, the
#            DSM segments, and what the main region gained since the start
#            (min_dynamic_shared_memory's pages as they are touched; shared
#            buffers are prewarmed before). Not faulted but reserved hugetlb
#            pages (stock-1g-huge's min_dynamic_shared_memory, held from the
#            start) are in hugetlb_held_mb: HugePages_Total - Free + Rsvd
#            of /proc/meminfo since before the server started (this
#            machine's: other users of huge pages show there too).
#            idle.csv, idle-mem.csv (samples, and the start and end of each
#            query), bench-idle.txt, idle-mem.png.
# Output: BENCH_OUT, by default bench/results/postgresql-<host>/ (seed.csv, clients.csv,
# vacuum.csv, bench.txt, seed.png, machine.txt; idle: above).
#
# Environment: ROWS (10000000), RUNS (3), WORKERS ("0 1 2 .. CPUs 4xCPUs"),
# CLIENTS ("1 4 8"), CRUNS (2), VROWS (3000000), VRUNS (3), PARTS
# ("seed clients vacuum pgbench"; idle on its own: PARTS=idle), CONFIGS (all
# eight; clients and vacuum use CCONFIGS, "stock-4k stock-1g-huge pool-2m
# preload-4k preload-huge": stock as shipped, stock at its best, dsmpool at
# its best, the preload library alone and with its extension), PCONFIGS,
# PRUNS (5), PSECS (10), PCLIENTS (2), PSCALE (10), IRUNS (10), ISHORT (1),
# ILONG (5), ISAMPLE (200), ICONFIGS. The defaults take about 50 minutes on
# 2 CPUs: seed 20, clients 16, vacuum 5, pgbench 7; idle about 30 more.
# SMALL=1: the smallest form (run.sh bench-small, in the README's test
# command): every part, idle included, on 100000 rows, one round each,
# a few seconds apiece: that it runs and writes its tables, not what
# they say; results in a directory of its own (bench-small/ under PREFIX).
# POOL_BIN: the patched server's bin directory (PREFIX/bench-pool/bin;
# bench-small takes the test build's, PREFIX/patched/bin). The smallest
# form works in PREFIX/bench-small (its cluster, socket, ports 100 up, the
# system settings it changed), so that it never touches a full run's, and
# sizes everything down: SB (shared_buffers, 512 MB; small 128), POOL (the
# pools, 2048 MB; small 256), MINDSM (stock-1g-huge's region, 1024 MB;
# small 128).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
prefix=${1:-$here/work}
if [ "${SMALL:-0}" = 1 ]; then # the smallest form: every part runs, nothing measured
    : "${ROWS:=100000}" "${RUNS:=1}" "${WORKERS:=0 2}" "${CLIENTS:=2}" "${CRUNS:=1}" "${VROWS:=30000}" "${VRUNS:=1}"
    : "${PRUNS:=1}" "${PSECS:=1}" "${PSCALE:=1}" "${IRUNS:=2}" "${ISHORT:=1}" "${ILONG:=3}" "${ISETTLE:=1}"
    : "${PARTS:=seed clients vacuum pgbench idle}" "${ICONFIGS:=stock-4k pool-elastic preload-huge}"
    : "${ELASTIC_IDLE:=500}" "${ELASTIC_MIN:=32MB}" "${ELASTIC_WARM:=64MB}"
    : "${SB:=128}" "${POOL:=256}" "${MINDSM:=128}"
fi
SB=${SB:-512}         # shared_buffers, MB
POOL=${POOL:-2048}    # the pools' size, MB (preload-huge: dsmpool.size, its default 2GB)
MINDSM=${MINDSM:-1024} # stock-1g-huge's min_dynamic_shared_memory, MB
ROWS=${ROWS:-10000000}
RUNS=${RUNS:-3}
CRUNS=${CRUNS:-2}
VROWS=${VROWS:-3000000}
VRUNS=${VRUNS:-3}
CLIENTS=${CLIENTS:-1 4 8}
PARTS=${PARTS:-seed clients vacuum pgbench}
PRUNS=${PRUNS:-5}
PSECS=${PSECS:-10}
PCLIENTS=${PCLIENTS:-2}
PSCALE=${PSCALE:-10}
PCONFIGS=${PCONFIGS:-stock-4k preload-4k stock-1g-huge preload-huge}
IRUNS=${IRUNS:-10}
ISHORT=${ISHORT:-1}
ILONG=${ILONG:-5}
ISAMPLE=${ISAMPLE:-200}
ICONFIGS=${ICONFIGS:-stock-1g-huge stock-4k stock-shm-thp pool-2m pool-elastic preload-4k preload-huge}
ELASTIC_MIN=${ELASTIC_MIN:-64MB}
ELASTIC_IDLE=${ELASTIC_IDLE:-2000}
ELASTIC_WARM=${ELASTIC_WARM:-256MB}
RESERVE=${RESERVE:-65536} # preload-reserve's dsmpool.size, MB
has_part() { [[ " $PARTS " == *" $1 "* ]]; }
ncpu=$(nproc)
if [ -z "${WORKERS:-}" ]; then
    WORKERS="0"
    for ((w = 1; w <= ncpu; w = w * 2)); do WORKERS="$WORKERS $w"; done
    [[ " $WORKERS " == *" $ncpu "* ]] || WORKERS="$WORKERS $ncpu"
    WORKERS="$WORKERS $((4 * ncpu))"
fi
CONFIGS=${CONFIGS:-stock-4k stock-1g-huge stock-shm-thp pool-4k pool-thp pool-2m preload-4k preload-huge}
CCONFIGS=${CCONFIGS:-stock-4k stock-1g-huge pool-2m preload-4k preload-huge}
REF=stock-1g-huge
maxw=$((4 * ncpu > 24 ? 4 * ncpu : 24))
# shellcheck source=lib.sh
source "$here/lib.sh"
[ "$(id -u)" = 0 ] || die "run as root (huge pages, mount namespaces, uprobes)"
out=${BENCH_OUT:-$repo/bench/results/postgresql-$(hostname -s)}
work=$prefix # the clusters, the socket, the system settings file
if [ "${SMALL:-0}" = 1 ]; then
    out=${BENCH_OUT:-$prefix/bench-small/results}
    work=$prefix/bench-small
    sock=$work/sock
    port=$((port + 100))
fi
mkdir -p "$out"
# the servers: stock and patched release builds (POOL_BIN: another patched
# build's bin directory; bench-small takes the test build, run.sh build's)
STOCK_BIN=$prefix/bench-stock/bin
POOL_BIN=${POOL_BIN:-$prefix/bench-pool/bin}
for b in "$STOCK_BIN" "$POOL_BIN"; do [ -x "$b/postgres" ] || die "no $b/postgres: run.sh bench builds it"; done
# the preload library (installed with libdsmpool by run.sh) and the extension
# (installed into bench-stock with PGXS by run.sh)
PRELOAD=$(find "$prefix/dsmpool" -name libdsmpool-preload.so 2>/dev/null | head -1)
[ -n "$PRELOAD" ] || die "no libdsmpool-preload.so under $prefix/dsmpool: run.sh bench installs it"
[ -f "$("$prefix/bench-stock/bin/pg_config" --pkglibdir)/dsmpool.so" ] ||
    die "no extension dsmpool in $prefix/bench-stock: run.sh bench installs it"

# ---- system settings, put back at the end ----------------------------------------
hp=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
shmem=/sys/kernel/mm/transparent_hugepage/shmem_enabled
tracing=/sys/kernel/tracing
# What was changed, kept in a file until it is put back: the huge pages this
# run added (others on this machine may reserve some meanwhile: the run takes
# back what it added, not a count it saw) and shmem_enabled. A run killed
# outright (SIGKILL, no trap) leaves the file, and the next run takes back
# what it says first (the previous helper's run left 2496 huge pages
# reserved that way).
mkdir -p "$work"
saved="$work/bench-system-settings"
hp_added=0
if [ -f "$saved" ]; then
    read -r hp_left shmem_old <"$saved"
    echo "a previous bench did not put the system settings back: $hp_left huge pages added, shmem_enabled $shmem_old; taking them back" >&2
    echo $(($(cat $hp) > hp_left ? $(cat $hp) - hp_left : 0)) >$hp
else
    shmem_old=$(sed -E 's/.*\[([a-z]+)\].*/\1/' $shmem)
fi
echo "0 $shmem_old" >"$saved"
mounted_tracefs=0
# STARTED: the servers the interleaved parts keep up at once; ALL: every
# configuration (its port, its cleanup), the idle part's too
STARTED=""
if has_part seed; then STARTED="$CONFIGS"; fi
if has_part clients || has_part vacuum; then
    for c in $CCONFIGS; do [[ " $STARTED " == *" $c "* ]] || STARTED="$STARTED $c"; done
fi
if has_part pgbench; then
    for c in $PCONFIGS; do [[ " $STARTED " == *" $c "* ]] || STARTED="$STARTED $c"; done
fi
ALL="$STARTED"
if has_part idle; then
    for c in $ICONFIGS; do [[ " $ALL " == *" $c "* ]] || ALL="$ALL $c"; done
fi
bindir() { case $1 in pool-*) echo "$POOL_BIN" ;; *) echo "$STOCK_BIN" ;; esac; }
preloaded() { [[ $1 == preload-* ]]; } # a stock server with LD_PRELOAD
extended() { [[ $1 == preload-huge || $1 == preload-reserve ]]; } # and the extension dsmpool
cdata() { echo "$work/bench-data/$1"; }
cport() { # a port per configuration
    local i=1 c
    for c in $ALL; do
        [ "$c" = "$1" ] && { echo $((port + i)); return; }
        i=$((i + 1))
    done
}
stop_all() {
    local c
    for c in $ALL; do [ -f "$(cdata "$c")/postmaster.pid" ] && as_pg "$(bindir "$c")/pg_ctl" -D "$(cdata "$c")" stop -m fast >/dev/null 2>&1 || true; done
}
small_check() {
    python3 - "$out" "$PARTS" "$CONFIGS" "$CCONFIGS" "$PCONFIGS" "$ICONFIGS" "$WORKERS" "$CLIENTS" \
        "$RUNS" "$CRUNS" "$VRUNS" "$PRUNS" "$IRUNS" <<'EOF'
import csv, os, sys
out, parts, configs, cconfigs, pconfigs, iconfigs, workers, clients = sys.argv[1], *[a.split() for a in sys.argv[2:9]]
runs, cruns, vruns, pruns, iruns = (int(a) for a in sys.argv[9:14])
ok = bad = 0
def check(what, cond, why=""):
    global ok, bad
    if cond:
        ok += 1
        print(f"ok: bench-small: {what}")
    else:
        bad += 1
        print(f"FAILED: bench-small: {what}{': ' + why if why else ''}")
def rows(name):
    p = f"{out}/{name}"
    return list(csv.DictReader(open(p))) if os.path.exists(p) else []
def num(v):
    try:
        return float(v) > 0
    except ValueError:
        return False
txt = open(f"{out}/bench.txt").read() if os.path.exists(f"{out}/bench.txt") else ""
TITLES = ("Seed query", "N clients at once", "VACUUM (PARALLEL 2)", "pgbench on the scale")
def section(title):  # bench.txt's table under that title, up to the next one
    i = txt.find(title)
    if i < 0:
        return ""
    ends = [txt.find(t, i + 1) for t in TITLES if txt.find(t, i + 1) > i]
    return txt[i:min(ends)] if ends else txt[i:]
def table_has(title, cs):
    sec = section(title)
    return bool(sec) and all(f"| {c} |" in sec for c in cs)
if "seed" in parts:
    r = rows("seed.csv")
    bad_rows = [x for x in r if not num(x["ms"])]
    check(f"seed: {len(configs)} configurations x {len(workers)} worker counts x {runs} rounds, each timed",
          len(r) == len(configs) * len(workers) * runs and not bad_rows, f"{len(r)} rows, {len(bad_rows)} without a time")
    check("seed: its table", table_has("Seed query", configs))
if "clients" in parts:
    r = rows("clients.csv")
    errs = [x for x in r if x["errors"] != "0" or x["queries"] != x["clients"]]
    check(f"clients: {len(cconfigs)} configurations x {len(clients)} client counts x {cruns} rounds, every query right",
          len(r) == len(cconfigs) * len(clients) * cruns and not errs, f"{len(r)} rows, {len(errs)} with errors")
    check("clients: its table", table_has("N clients at once", cconfigs))
if "vacuum" in parts:
    r = rows("vacuum.csv")
    check(f"vacuum: {len(cconfigs)} configurations x {vruns} rounds, each timed",
          len(r) == len(cconfigs) * vruns and all(num(x["ms"]) for x in r), f"{len(r)} rows")
    check("vacuum: its table", table_has("VACUUM (PARALLEL 2)", cconfigs))
if "pgbench" in parts:
    r = rows("pgbench.csv")
    check(f"pgbench: {len(pconfigs)} configurations x 2 modes x {pruns} rounds, each with its tps",
          len(r) == len(pconfigs) * 2 * pruns and all(num(x["tps"]) for x in r), f"{len(r)} rows")
    check("pgbench: its table", table_has("pgbench on the scale", pconfigs))
if "idle" in parts:
    r = rows("idle.csv")
    check(f"idle: {len(iconfigs)} configurations x {2 * iruns} queries, each timed",
          len(r) == len(iconfigs) * 2 * iruns and all(num(x["ms"]) for x in r), f"{len(r)} rows")
    m = rows("idle-mem.csv")
    check("idle: memory sampled for each configuration", all(any(x["config"] == c and x["event"] == "sample" for x in m) for c in iconfigs))
    it = open(f"{out}/bench-idle.txt").read() if os.path.exists(f"{out}/bench-idle.txt") else ""
    check("idle: its tables", "Dynamic shared memory resident" in it and all(f"| {c} |" in it for c in iconfigs))
print(f"{ok} passed, {bad} failed")
sys.exit(1 if bad else 0)
EOF
}
restore() {
    local rc=$?
    trap - EXIT INT TERM HUP
    stop_all
    local want=$(($(cat "$hp") - hp_added))
    echo "$want" >"$hp"
    echo "$shmem_old" >"$shmem"
    [ "$(cat "$hp")" = "$want" ] && rm -f "$saved" ||
        echo "warning: vm.nr_hugepages is $(cat "$hp"), not $want (this run added $hp_added): huge pages still in use?" >&2
    if [ -d "$tracing/events/uprobes" ]; then
        grep -o 'dsmpoolbench[a-z0-9_]*' "$tracing/uprobe_events" 2>/dev/null | sort -u |
            while read -r e; do echo 0 >"$tracing/events/uprobes/$e/enable" 2>/dev/null || true; echo "-:$e" >>"$tracing/uprobe_events" 2>/dev/null || true; done
    fi
    [ "$mounted_tracefs" = 1 ] && umount "$tracing" 2>/dev/null || true
    if [ "${SMALL:-0}" = 1 ] && [ -n "${small_done:-}" ]; then
        small_check
        exit $?
    fi
    exit "$rc"
}
trap restore EXIT
trap 'exit 130' INT TERM HUP
# the huge pages the servers up at once take: per configuration with
# huge_pages = on, its shared buffers (SB) and their tables, and its pool
# (POOL: pool-2m, pool-elastic, preload-huge) or min_dynamic_shared_memory
# (MINDSM: stock-1g-huge); the idle part, one server at a time, the
# largest of those
huge_mb() {
    case $1 in
    stock-1g-huge) echo $((SB + 128 + MINDSM)) ;;
    stock-shm-thp) echo $((SB + 128)) ;;
    pool-2m | pool-elastic | preload-huge) echo $((SB + 128 + POOL)) ;;
    preload-reserve) echo $((SB + 128 + POOL + RESERVE / 200)) ;; # what it uses, and the tables
    *) echo 0 ;;
    esac
}
need_mb=0
for c in $STARTED; do need_mb=$((need_mb + $(huge_mb "$c"))); done
for c in $ALL; do [ "$(huge_mb "$c")" -gt "$need_mb" ] && need_mb=$(huge_mb "$c"); done
need_pages=$((need_mb / 2))
hp_before=$(cat $hp)
echo $((hp_before + need_pages)) >$hp
hp_added=$(($(cat $hp) - hp_before))
echo "$hp_added $shmem_old" >"$saved"
[ "$hp_added" -ge "$need_pages" ] || echo "warning: only $hp_added of $need_pages huge pages could be reserved: the huge configurations may fail" >&2
echo advise >$shmem

# ---- the cluster, made once (by the patched initdb), a copy per configuration ----------
tmpl="$work/bench-data/template"
# the cluster is made again when the patched catalog changes (pg_dsmpool's columns)
# (pg_config says where: PostgreSQL drops share/'s "postgresql" suffix when the
# prefix already names postgres, as integrations/postgresql/work does)
bki="$("$POOL_BIN/pg_config" --sharedir)/postgres.bki"
[ -f "$bki" ] || die "no $bki: the patched build in $POOL_BIN is incomplete (run.sh bench rebuilds it when removed)"
stamp="seed-$ROWS-pgbench-$PSCALE-sb-$SB-$(md5sum <"$bki" | cut -c1-8)"
if [ ! -f "$tmpl/$stamp" ]; then
    log "the cluster: $ROWS rows"
    rm -rf "$work/bench-data"
    mkdir -p "$work/bench-data" "$sock"
    chown "$PGUSER_NAME" "$work/bench-data" "$sock" "$prefix" "$work"
    data=$tmpl pgbin=$POOL_BIN
    server_init "$pgbin" "shared_buffers = ${SB}MB" "max_worker_processes = $maxw" "max_parallel_workers = $maxw" \
        "max_parallel_maintenance_workers = 4" "maintenance_work_mem = 1GB" "autovacuum = off"
    cp "$data/postgresql.conf" "$data/postgresql.conf.base"
    server_start "$pgbin"
    sql "create table t (i int); insert into t select generate_series(1, $ROWS); analyze t; create extension pg_prewarm;"
    as_pg "$pgbin/pgbench" -h "$sock" -p "$port" -U postgres -i -q -s "$PSCALE" postgres >/dev/null 2>&1 ||
        die "pgbench -i failed"
    server_stop "$pgbin"
    touch "$data/$stamp"
fi

settings() { # the server's settings for a configuration, a line each
    case $1 in
    stock-4k) printf '%s\n' "min_dynamic_shared_memory = 0" "huge_pages = off" ;;
    stock-1g-huge) printf '%s\n' "min_dynamic_shared_memory = ${MINDSM}MB" "huge_pages = on" ;;
    stock-shm-thp) printf '%s\n' "min_dynamic_shared_memory = 0" "huge_pages = on" ;;
    pool-4k) printf '%s\n' "dsmpool_size = ${POOL}MB" "dsmpool_huge_pages = off" "huge_pages = off" ;;
    pool-thp) printf '%s\n' "dsmpool_size = ${POOL}MB" "dsmpool_huge_pages = transparent" "huge_pages = off" ;;
    pool-2m) printf '%s\n' "dsmpool_size = ${POOL}MB" "dsmpool_huge_pages = on" "huge_pages = on" ;;
    pool-elastic) printf '%s\n' "dsmpool_size = ${POOL}MB" "dsmpool_huge_pages = on" "huge_pages = on" \
        "dsmpool_resident_min = $ELASTIC_MIN" "dsmpool_idle_release = $ELASTIC_IDLE" "dsmpool_warm = $ELASTIC_WARM" ;;
    preload-4k) printf '%s\n' "min_dynamic_shared_memory = 0" "huge_pages = off" ;;
    preload-huge) printf '%s\n' "min_dynamic_shared_memory = 0" "huge_pages = on" "shared_preload_libraries = 'dsmpool'" \
        "dsmpool.huge_pages = on" "dsmpool.warm = $ELASTIC_WARM" "dsmpool.idle_release = $ELASTIC_IDLE"
        [ "$POOL" = 2048 ] || echo "dsmpool.size = ${POOL}MB" ;; # 2048: dsmpool.size's default, left unset
    preload-reserve) printf '%s\n' "min_dynamic_shared_memory = 0" "huge_pages = on" "shared_preload_libraries = 'dsmpool'" \
        "dsmpool.huge_pages = on" "dsmpool.warm = $ELASTIC_WARM" "dsmpool.idle_release = $ELASTIC_IDLE" \
        "dsmpool.size = ${RESERVE}MB" "dsmpool.resident_min = $ELASTIC_MIN" ;;
    esac
}

start_config() {
    local c=$1 d b
    d=$(cdata "$c")
    b=$(bindir "$c")
    if [ ! -f "$d/$stamp" ]; then
        rm -rf "$d"
        cp -a "$tmpl" "$d"
    fi
    cp "$d/postgresql.conf.base" "$d/postgresql.conf"
    { settings "$c"; echo "port = $(cport "$c")"; } >>"$d/postgresql.conf"
    : >"$d/log"
    if [ "$c" = stock-shm-thp ]; then # DSM segments in a huge=always tmpfs, the server in its own mount namespace
        unshare -m --propagation private sh -c "mount -t tmpfs -o huge=always,size=16g,mode=1777 tmpfs /dev/shm &&
            exec runuser -u $PGUSER_NAME -- $b/pg_ctl -D $d -l $d/log -w -t 300 start" >/dev/null
    elif preloaded "$c"; then # pg_ctl passes its environment to the postmaster
        as_pg env LD_PRELOAD="$PRELOAD" "$b/pg_ctl" -D "$d" -l "$d/log" -w -t 300 start >/dev/null
    else
        as_pg "$b/pg_ctl" -D "$d" -l "$d/log" -w -t 300 start >/dev/null
    fi
    csql "$c" "select pg_prewarm('t');" >/dev/null
    # the extension's view, in public (the patched initdb's catalog has a
    # pg_catalog.pg_dsmpool of its own, which a stock server cannot read)
    if preloaded "$c"; then # the postmaster maps the pool from its start (the control segment's creation makes it)
        grep -q 'memfd:dsmpool' "/proc/$(head -1 "$d/postmaster.pid")/maps" ||
            die "$c: the postmaster has no pool: $(tail -3 "$d/log")"
    fi
    if extended "$c"; then
        csql "$c" "set client_min_messages = warning" "create extension if not exists dsmpool" >/dev/null
        [ "$(csql "$c" "select serving from public.pg_dsmpool")" = t ] ||
            die "$c: the pool does not serve: $(csql "$c" "select note from public.pg_dsmpool")"
        # dsmpool.huge_pages = on falls back to 4 kB pages where huge ones are short: not this configuration
        [ "$(csql "$c" "select page_size from public.pg_dsmpool")" -gt 4096 ] ||
            die "$c: the pool has 4 kB pages, not huge ones: $(csql "$c" "select note from public.pg_dsmpool")"
    fi
}

csql() { # csql config sql...: one psql, each further argument a -c
    local c=$1 a=()
    shift
    for s in "$@"; do a+=(-c "$s"); done
    as_pg "$(bindir "$c")/psql" -h "$sock" -p "$(cport "$c")" -U postgres -d postgres -X -q -A -t "${a[@]}"
}
cminflt() { awk '{print $11}' "/proc/$(head -1 "$(cdata "$1")/postmaster.pid")/stat"; } # reaped children's faults
rotate() { # rotate k words...: the words, starting at the k-th (mod their number)
    local k=$1
    shift
    local n=$# i
    local a=("$@")
    for ((i = 0; i < n; i++)); do printf '%s ' "${a[$(((k + i) % n))]}"; done
}
timed() { # timed config sql-settings... : the last statement's ms
    local c=$1
    shift
    csql "$c" "$@" | sed -nE 's/^Time: ([0-9.]+) ms.*/\1/p' | tail -1
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
[ -n "$STARTED" ] && log "starting: $STARTED"
for c in $STARTED; do
    start_config "$c" || {
        tail -3 "$(cdata "$c")/log" >&2
        die "$c could not start"
    }
    grep -hE "dsmpool: (pool|generation)" "$(cdata "$c")/log" | tail -1 | sed "s/.*LOG: */  $c: /" >&2 || true
done

SEED="select count(*) from t t1 join t t2 using (i)"

# ---- seed: the query by worker count ---------------------------------------------------
if has_part seed; then
    echo "config,workers,run,ms,minflt" >"$out/seed.csv"
    for r in $(seq 1 "$RUNS"); do
        k=0
        for w in $WORKERS; do
            k=$((k + 1))
            # shellcheck disable=SC2086 # CONFIGS is a list
            for c in $(rotate $((r + k)) $CONFIGS); do
                f0=$(cminflt "$c")
                t=$(timed "$c" "set work_mem = '1GB'" "set max_parallel_workers_per_gather = $w" '\timing on' "$SEED")
                sleep 0.2 # the workers are reaped
                f1=$(cminflt "$c")
                echo "$c,$w,$r,$t,$((f1 - f0))" >>"$out/seed.csv"
            done
        done
        log "seed: round $r of $RUNS done"
    done
fi

# ---- clients: N connections at once --------------------------------------------------------
pool_fell() { # what a pool configuration's pg_dsmpool says fell back: segments+areas|peak MB
    if extended "$1"; then # the extension's view: segments refused (no peak)
        csql "$1" "select segments_refused || '|' from public.pg_dsmpool" 2>/dev/null || echo "|"
        return
    fi
    csql "$1" "select (fallback_segments + fallback_areas) || '|' || round((fallback_area_bytes_peak + fallback_segment_bytes_peak) / 1048576.0) from pg_dsmpool" 2>/dev/null || echo "|"
}
viewed() { [[ $1 == pool-* ]] || extended "$1"; } # a configuration with a pool's view
if has_part clients; then
    echo "config,clients,run,ms,queries,errors,fell_back,fallback_peak_mb" >"$out/clients.csv"
    for r in $(seq 1 "$CRUNS"); do
        k=0
        for n in $CLIENTS; do
            k=$((k + 1))
            # shellcheck disable=SC2086 # CCONFIGS is a list
            for c in $(rotate $((r + k)) $CCONFIGS); do
                fb0="|"
                viewed "$c" && fb0=$(pool_fell "$c")
                t0=$(date +%s%N)
                pids=""
                for i in $(seq 1 "$n"); do
                    (csql "$c" "set work_mem = '1GB'" "set max_parallel_workers_per_gather = 2" "$SEED" \
                        >"$work/bench-client-$i.out" 2>&1 || true) &
                    pids="$pids $!"
                done
                # shellcheck disable=SC2086 # a list of pids
                wait $pids
                t1=$(date +%s%N)
                ok=0 err=0
                for i in $(seq 1 "$n"); do
                    if grep -qx "$ROWS" "$work/bench-client-$i.out"; then ok=$((ok + 1)); else err=$((err + 1)); fi
                done
                fb1="|"
                viewed "$c" && fb1=$(pool_fell "$c")
                fell=""
                viewed "$c" && fell=$((${fb1%|*} - ${fb0%|*}))
                echo "$c,$n,$r,$(((t1 - t0) / 1000000)),$ok,$err,$fell,${fb1#*|}" >>"$out/clients.csv"
            done
        done
        log "clients: round $r of $CRUNS done"
    done
fi

# ---- vacuum: VACUUM (PARALLEL 2), the dead TIDs in a shared radix tree ---------------------
VSETUP="set client_min_messages = warning; drop table if exists v;
create table v (i int, j int) with (autovacuum_enabled = off);
insert into v select g, (g::bigint * 7919) % $VROWS from generate_series(1, $VROWS) g;
create index v_i on v (i); create index v_j on v (j);
delete from v where i % 10 <> 0; checkpoint;"
VACUUM="vacuum (parallel 2) v"
uprobe_add() { # uprobe_add name binary symbol: a counting probe at the symbol's file offset
    local name=$1 bin=$2 sym=$3 va off
    va=$(nm "$bin" | awk -v s="$sym" '$3 == s {print $1; exit}')
    [ -n "$va" ] || return 1
    off=$(readelf -lW "$bin" | python3 -c '
import sys
va = int(sys.argv[1], 16)
for line in sys.stdin:
    f = line.split()
    if f and f[0] == "LOAD":  # Offset VirtAddr PhysAddr FileSiz ...
        o, v, fs = int(f[1], 16), int(f[2], 16), int(f[4], 16)
        if v <= va < v + fs:
            print(hex(va - v + o))
            break' "$va")
    [ -n "$off" ] || return 1
    echo "p:$name $bin:$off" >>$tracing/uprobe_events && echo 1 >"$tracing/events/uprobes/$name/enable"
}
uprobe_hits() { awk -v n="$1" '$2 == n {print $3}' $tracing/uprobe_profile; }
if has_part vacuum; then
    echo "config,run,ms" >"$out/vacuum.csv"
    for r in $(seq 1 "$VRUNS"); do
        # shellcheck disable=SC2086 # CCONFIGS is a list
        for c in $(rotate "$r" $CCONFIGS); do
            csql "$c" "$VSETUP" >/dev/null
            t=$(timed "$c" "set maintenance_work_mem = '1GB'" '\timing on' "$VACUUM")
            echo "$c,$r,$t" >>"$out/vacuum.csv"
        done
        log "vacuum: round $r of $VRUNS done"
    done
    # the untimed round: what each configuration's VACUUM allocates
    echo "config,dsa_allocations,dsm_segments" >"$out/vacuum-counts.csv"
    if [ ! -d $tracing/events ]; then mount -t tracefs nodev $tracing && mounted_tracefs=1 || true; fi
    if [ -w $tracing/uprobe_events ]; then
        for b in stock pool; do
            bin=$STOCK_BIN
            [ $b = pool ] && bin=$POOL_BIN
            uprobe_add "dsmpoolbench_${b}_alloc" "$bin/postgres" dsa_allocate_extended || true
            uprobe_add "dsmpoolbench_${b}_dsm" "$bin/postgres" dsm_create || true
        done
        for c in $CCONFIGS; do
            csql "$c" "$VSETUP" >/dev/null
            b=stock
            [[ $c == pool-* ]] && b=pool
            a0=$(uprobe_hits "dsmpoolbench_${b}_alloc")
            s0=$(uprobe_hits "dsmpoolbench_${b}_dsm")
            csql "$c" "set maintenance_work_mem = '1GB'" "$VACUUM" >/dev/null
            a1=$(uprobe_hits "dsmpoolbench_${b}_alloc")
            s1=$(uprobe_hits "dsmpoolbench_${b}_dsm")
            echo "$c,$((${a1:-0} - ${a0:-0})),$((${s1:-0} - ${s0:-0}))" >>"$out/vacuum-counts.csv"
        done
    else
        echo "  no uprobes here (tracefs): the vacuum's allocations are not counted" >&2
    fi
fi

# ---- pgbench: the preload library where it serves nothing ------------------------------------
# pgbench -S makes no DSM segment: what it measures of the preload library is
# its pass-through (every mmap, munmap, close and posix_fallocate of the
# server goes through it); -C adds a fork, an exit and the control segment's
# attach per transaction.
if has_part pgbench; then
    echo "config,mode,run,tps" >"$out/pgbench.csv"
    for r in $(seq 1 "$PRUNS"); do
        k=0
        for mode in S C; do
            k=$((k + 1))
            # shellcheck disable=SC2086 # PCONFIGS is a list
            for c in $(rotate $((r + k)) $PCONFIGS); do
                flags=(-S)
                [ $mode = C ] && flags=(-S -C)
                pout=$(as_pg "$(bindir "$c")/pgbench" -h "$sock" -p "$(cport "$c")" -U postgres -n "${flags[@]}" \
                    -c "$PCLIENTS" -j "$PCLIENTS" -T "$PSECS" postgres 2>&1) ||
                    die "pgbench ${flags[*]} on $c failed: $(tail -3 <<<"$pout")"
                tps=$(sed -nE 's/^tps = ([0-9.]+).*/\1/p' <<<"$pout" | head -1)
                [ -n "$tps" ] || die "pgbench ${flags[*]} on $c said no tps: $(tail -3 <<<"$pout")"
                echo "$c,$mode,$r,$tps" >>"$out/pgbench.csv"
            done
        done
        log "pgbench: round $r of $PRUNS done"
    done
fi
stop_all

# ---- idle: the elastic pool, warm and cold, and its memory over time --------------------------
# The server's shared memory resident, every ISAMPLE ms, until the stop file
# appears or the postmaster goes: st_blocks of each shared object that the
# postmaster or one of its children maps (through /proc/PID/map_files), each
# object once; the pool is the mapping of dsmpool_size bytes.
SAMPLER='
import os, sys, time
cfg, pm, outf, poolbytes, period, hbase, stop = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]) / 1000.0, int(sys.argv[6]), sys.argv[7]
def held_kb():
    m = {}
    for l in open("/proc/meminfo"):
        k, v = l.split(":")
        m[k] = int(v.split()[0])
    return (m["HugePages_Total"] - m["HugePages_Free"] + m["HugePages_Rsvd"]) * m["Hugepagesize"]
out = open(outf, "a")
while not os.path.exists(stop) and os.path.exists(f"/proc/{pm}"):
    t = time.time()
    try:
        kids = open(f"/proc/{pm}/task/{pm}/children").read().split()
    except OSError:
        break
    seen, b = set(), {"main": 0, "pool": 0, "seg": 0}
    for pid in [pm] + kids:
        try:
            maps = open(f"/proc/{pid}/maps").read().splitlines()
        except OSError:
            continue
        for l in maps:
            f = l.split(None, 5)
            if len(f) < 6 or f[1][3] != "s" or f[4] == "0" or f[5].startswith("/usr/"):
                continue
            key = (f[3], f[4])
            if key in seen:
                continue
            try:
                st = os.stat(f"/proc/{pid}/map_files/{f[0]}")
            except OSError:
                continue
            seen.add(key)
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            path = f[5]
            kind = "seg" if ("PostgreSQL." in path or "/dsmpool." in path) else \
                   "pool" if ((poolbytes and hi - lo == poolbytes) or "memfd:dsmpool" in path) else "main"
            b[kind] += st.st_blocks * 512
    mn, pl, sg = (b[k] / 1048576 for k in ("main", "pool", "seg"))
    out.write(f"{cfg},{int(t * 1000)},sample,,,{mn:.1f},{pl:.1f},{sg:.1f},{(held_kb() - hbase) / 1024:.0f}\n")
    out.flush()
    time.sleep(max(0.0, period - (time.time() - t)))
'
hugetlb_held_kb() { awk '/^HugePages_(Total|Free|Rsvd):/ {v[$1] = $2} /^Hugepagesize:/ {s = $2} END {print (v["HugePages_Total:"] - v["HugePages_Free:"] + v["HugePages_Rsvd:"]) * s}' /proc/meminfo; }
now_ms() { date +%s%3N; }
pool_row() { # config: resident MB|refills on demand|their us|releases, or "|||" for stock
    if extended "$1"; then # the extension's view: resident only
        csql "$1" "select round(resident / 1048576.0) || '|||' from public.pg_dsmpool" 2>/dev/null || echo "|||"
        return
    fi
    [[ $1 == pool-* ]] || { echo "|||"; return; }
    csql "$1" "select round(resident / 1048576.0) || '|' || refills_on_demand || '|' || refill_on_demand_us || '|' || releases from pg_dsmpool" 2>/dev/null || echo "|||"
}
if has_part idle; then
    echo "config,phase,query,gap_s,ms,minflt,resident_mb,refills_on_demand,refill_on_demand_ms,releases" >"$out/idle.csv"
    echo "config,t_ms,event,phase,query,main_mb,pool_mb,seg_mb,hugetlb_held_mb" >"$out/idle-mem.csv"
    for c in $ICONFIGS; do
        log "idle: $c ($IRUNS queries ${ISHORT}s apart, then $IRUNS after ${ILONG}s each)"
        hbase=$(hugetlb_held_kb)
        start_config "$c" || {
            tail -3 "$(cdata "$c")/log" >&2
            die "$c could not start"
        }
        grep -h "dsmpool: pool\|dsmpool: elastic" "$(cdata "$c")/log" | sed "s/.*LOG: */  $c: /" >&2 || true
        poolbytes=0
        [[ $c == pool-* ]] && poolbytes=$((POOL * 1048576)) # the preload library's pool: its memfd's name
        stopf="$work/bench-idle-stop"
        rm -f "$stopf"
        python3 -c "$SAMPLER" "$c" "$(head -1 "$(cdata "$c")/postmaster.pid")" "$out/idle-mem.csv" "$poolbytes" "$ISAMPLE" "$hbase" "$stopf" &
        sampler=$!
        sleep "${ISETTLE:-5}" # the idle server, and the elastic pool's first maintenance steps (its warm reserve)
        prev=$(pool_row "$c")
        q=0
        for phase in short long; do
            gap=$ISHORT
            [ $phase = long ] && gap=$ILONG
            for i in $(seq 1 "$IRUNS"); do
                q=$((q + 1))
                [ $phase = long ] && sleep "$gap"
                f0=$(cminflt "$c")
                echo "$c,$(now_ms),start,$phase,$q,,,," >>"$out/idle-mem.csv"
                t=$(timed "$c" "set work_mem = '1GB'" "set max_parallel_workers_per_gather = 2" '\timing on' "$SEED")
                echo "$c,$(now_ms),end,$phase,$q,,,," >>"$out/idle-mem.csv"
                sleep 0.2 # the workers are reaped
                f1=$(cminflt "$c")
                row=$(pool_row "$c")
                IFS='|' read -r res rod rus rel <<<"$row"
                IFS='|' read -r _ rod0 rus0 _ <<<"$prev"
                d1="" d2=""
                [ -n "$rod" ] && d1=$((rod - rod0)) && d2=$(awk -v a="$rus" -v b="$rus0" 'BEGIN {printf "%.1f", (a - b) / 1000}')
                echo "$c,$phase,$q,$gap,$t,$((f1 - f0)),$res,$d1,$d2,$rel" >>"$out/idle.csv"
                prev=$row
                [ $phase = short ] && sleep "$gap"
            done
        done
        sleep "$ILONG"
        touch "$stopf"
        wait "$sampler" || true
        rm -f "$stopf"
        as_pg "$(bindir "$c")/pg_ctl" -D "$(cdata "$c")" stop -m fast >/dev/null
        grep -h "dsmpool: the pool's maintenance failed" "$(cdata "$c")/log" | sed "s/.*LOG: */  $c: /" >&2 || true
    done
fi

# ---- the tables and the plot --------------------------------------------------------------------
PSCALE=$PSCALE python3 - "$out" "$CONFIGS" "$WORKERS" "$CCONFIGS" "$REF" "$PARTS" <<'EOF'
import csv, os, statistics, sys
out, configs, workers, cconfigs, ref, parts = sys.argv[1], sys.argv[2].split(), [int(w) for w in sys.argv[3].split()], sys.argv[4].split(), sys.argv[5], sys.argv[6].split()
lines = []
def rows(name):
    p = f"{out}/{name}"
    return list(csv.DictReader(open(p))) if os.path.exists(p) else []
def ratio_cell(pairs):
    if not pairs:
        return "-"
    return f"{statistics.median(pairs):.2f}x ({min(pairs):.2f}-{max(pairs):.2f})"

seed = [r for r in rows("seed.csv") if r["ms"]]
if seed and "seed" in parts:
    t = {(r["config"], int(r["workers"]), int(r["run"])): (float(r["ms"]), int(r["minflt"])) for r in seed}
    runs = sorted({int(r["run"]) for r in seed})
    lines.append(f"Seed query, {len(runs)} interleaved rounds: median / minimum seconds, median minor faults, and against {ref} the paired speed-up (its time / this one's, same round): median (range)\n")
    lines.append("| config | " + " | ".join(f"{w} workers" for w in workers) + " |")
    lines.append("| --- |" + " --- |" * len(workers))
    dat = {}
    for c in configs:
        cells = []
        for w in workers:
            ms = [t[c, w, r][0] for r in runs if (c, w, r) in t]
            fl = [t[c, w, r][1] for r in runs if (c, w, r) in t]
            if not ms:
                cells.append("-")
                continue
            pairs = [t[ref, w, r][0] / t[c, w, r][0] for r in runs if (c, w, r) in t and (ref, w, r) in t]
            dat[c, w] = (statistics.median(ms) / 1000, min(ms) / 1000)
            rc = "" if c == ref else f", {ratio_cell(pairs)}"
            cells.append(f"{statistics.median(ms) / 1000:.2f} / {min(ms) / 1000:.2f} s, {statistics.median(fl) / 1000:.0f}k flt{rc}")
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    with open(f"{out}/seed.dat", "w") as f:
        f.write("workers " + " ".join(configs) + "\n")
        for w in workers:
            f.write(f"{w} " + " ".join(f"{dat[c, w][0]:.3f}" if (c, w) in dat else "NaN" for c in configs) + "\n")
    lines.append("")

cl = rows("clients.csv")
if cl and "clients" in parts:
    t = {(r["config"], int(r["clients"]), int(r["run"])): r for r in cl}
    runs = sorted({int(r["run"]) for r in cl})
    ns = sorted({int(r["clients"]) for r in cl})
    lines.append(f"N clients at once, each the seed query with 2 workers, {len(runs)} interleaved rounds: queries per minute (median / best), errors, what fell back in the pool (areas and segments; peak MB in OS segments), and against {ref} the paired ratio of queries per minute: median (range)\n")
    lines.append("| config | " + " | ".join(f"{n} clients" for n in ns) + " |")
    lines.append("| --- |" + " --- |" * len(ns))
    for c in cconfigs:
        cells = []
        for n in ns:
            rs = [t[c, n, r] for r in runs if (c, n, r) in t]
            if not rs:
                cells.append("-")
                continue
            qpm = [int(x["queries"]) * 60000.0 / int(x["ms"]) for x in rs]
            err = sum(int(x["errors"]) for x in rs)
            pairs = [(int(t[c, n, r]["queries"]) * 60000.0 / int(t[c, n, r]["ms"])) / (int(t[ref, n, r]["queries"]) * 60000.0 / int(t[ref, n, r]["ms"]))
                     for r in runs if (c, n, r) in t and (ref, n, r) in t and int(t[ref, n, r]["queries"]) > 0]
            cell = f"{statistics.median(qpm):.1f} / {max(qpm):.1f} qpm"
            if err:
                cell += f", {err} errors"
            if c.startswith("pool-"):
                cell += f", fell back {max(int(x['fell_back'] or 0) for x in rs)} (peak {max(int(x['fallback_peak_mb'] or 0) for x in rs)} MB)"
            elif c == "preload-huge":
                cell += f", refused {max(int(x['fell_back'] or 0) for x in rs)}"
            if c != ref:
                cell += f", {ratio_cell(pairs)}"
            cells.append(cell)
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    lines.append("")

va = rows("vacuum.csv")
if va and "vacuum" in parts:
    counts = {r["config"]: r for r in rows("vacuum-counts.csv")}
    t = {(r["config"], int(r["run"])): float(r["ms"]) for r in va if r["ms"]}
    runs = sorted({int(r["run"]) for r in va})
    lines.append(f"VACUUM (PARALLEL 2), {len(runs)} interleaved rounds: median / minimum seconds, DSA allocations and DSM segments of one VACUUM (an untimed round with uprobes), allocations per second of the median time, and against {ref} the paired speed-up: median (range)\n")
    lines.append("| config | time | DSA allocations | per second | DSM segments | vs " + ref + " |")
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for c in cconfigs:
        ms = [t[c, r] for r in runs if (c, r) in t]
        if not ms:
            continue
        med = statistics.median(ms)
        pairs = [t[ref, r] / t[c, r] for r in runs if (c, r) in t and (ref, r) in t]
        n = counts.get(c, {})
        a = n.get("dsa_allocations", "")
        per = f"{int(a) / (med / 1000):,.0f}" if a else "-"
        lines.append(f"| {c} | {med / 1000:.2f} / {min(ms) / 1000:.2f} s | {int(a):,} | {per} | {n.get('dsm_segments', '-')} | {'-' if c == ref else ratio_cell(pairs)} |" if a else
                     f"| {c} | {med / 1000:.2f} / {min(ms) / 1000:.2f} s | - | - | - | {'-' if c == ref else ratio_cell(pairs)} |")
    lines.append("")
pb = rows("pgbench.csv")
if pb and "pgbench" in parts:
    t = {(r["config"], r["mode"], int(r["run"])): float(r["tps"]) for r in pb}
    runs = sorted({int(r["run"]) for r in pb})
    pcs = sorted(dict.fromkeys(r["config"] for r in pb), key=lambda c: ["stock-4k", "preload-4k", "stock-1g-huge", "preload-huge"].index(c) if c in ("stock-4k", "preload-4k", "stock-1g-huge", "preload-huge") else 9)
    # each preload configuration against its stock twin (the same huge_pages)
    twin = {"preload-4k": "stock-4k", "preload-huge": "stock-1g-huge" if "stock-1g-huge" in pcs else "stock-4k"}
    lines.append(f"pgbench on the scale-{os.environ.get('PSCALE', '?')} database, {len(runs)} interleaved rounds: transactions per second, median (range), and for the preload library against its stock twin (the same huge_pages) the paired ratio (its tps / the twin's, same round): median (range); above 1 is faster. -S: select only; -S -C: a new connection (a fork) per transaction\n")
    lines.append("| config | -S | -S -C |")
    lines.append("| --- | --- | --- |")
    for c in pcs:
        pref = twin.get(c, c)
        cells = []
        for m in ("S", "C"):
            v = [t[c, m, r] for r in runs if (c, m, r) in t]
            if not v:
                cells.append("-")
                continue
            pairs = [t[c, m, r] / t[pref, m, r] for r in runs if (c, m, r) in t and (pref, m, r) in t]
            cell = f"{statistics.median(v):,.0f} ({min(v):,.0f}-{max(v):,.0f}) tps"
            if c != pref:
                cell += f", vs {pref} {ratio_cell(pairs)}"
            cells.append(cell)
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    lines.append("")
if lines:
    open(f"{out}/bench.txt", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
EOF
if has_part seed && command -v gnuplot >/dev/null && [ -f "$out/seed.dat" ]; then
    n=$(($(head -1 "$out/seed.dat" | wc -w) - 1))
    gnuplot <<EOF
set terminal pngcairo size 900,520 noenhanced
set output "$out/seed.png"
set title "PostgreSQL 18, the seed query ($ROWS rows): median of $RUNS interleaved rounds, $(nproc) CPUs"
set xlabel "max_parallel_workers_per_gather"
set ylabel "seconds"
set key outside right
set grid
plot for [i=2:$((n + 1))] "$out/seed.dat" using 1:i with linespoints title columnheader(i)
EOF
fi
# the idle part's tables and plot
if has_part idle && [ -s "$out/idle.csv" ]; then
    RESERVE=$RESERVE python3 - "$out" "$ICONFIGS" "$IRUNS" "$ISHORT" "$ILONG" "$ELASTIC_MIN" "$ELASTIC_IDLE" "$ELASTIC_WARM" "$ROWS" <<'EOF'
import csv, statistics, sys
out, configs, iruns, ishort, ilong, emin, eidle, ewarm, rows = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7], sys.argv[8], sys.argv[9]
q = list(csv.DictReader(open(f"{out}/idle.csv")))
m = list(csv.DictReader(open(f"{out}/idle-mem.csv")))
med = statistics.median
def rng(v, f="{:.2f}"):
    return f"{f.format(med(v))} ({f.format(min(v))}-{f.format(max(v))})" if v else "-"
import os
reserve = ""
if "preload-reserve" in configs:
    ovc = open("/proc/sys/vm/overcommit_memory").read().strip()
    memmb = int(open("/proc/meminfo").readline().split()[1]) // 1024
    reserve = f" preload-reserve: preload-huge with dsmpool.size {os.environ.get('RESERVE', '65536')} MB, a reservation beyond this machine's {memmb} MB of memory, and dsmpool.resident_min {emin}; vm.overcommit_memory = {ovc}."
L = [f"Idle and warm: the seed query ({rows} rows, work_mem 1GB, 2 workers) {iruns} times {ishort} s apart (short), then {iruns} times each after {ilong} s idle (long); one configuration after another, each server started afresh (not interleaved: the gaps are the point). pool-elastic: dsmpool_size 2GB as a reservation in 2 MiB hugetlb pages, dsmpool_resident_min {emin}, dsmpool_idle_release {eidle} ms, dsmpool_warm {ewarm}.{reserve}\n",
     "Query times, seconds: the first query of a fresh server; the short gaps' others (warm: median (range)); the long gaps' (cold for an elastic pool). Minor faults of the backends, median; for the pools, refills on demand per query (count, ms: what the query paid), median.\n",
     "| config | first | short gaps, 2.. | long gaps | faults first / short / long | refills on demand short / long |",
     "| --- | --- | --- | --- | --- | --- |"]
qt = {}
for c in configs:
    r = [x for x in q if x["config"] == c and x["ms"]]
    if not r:
        continue
    first = r[0]
    sh = [x for x in r[1:] if x["phase"] == "short"]
    lo = [x for x in r if x["phase"] == "long"]
    qt[c] = ([float(x["ms"]) / 1000 for x in sh], [float(x["ms"]) / 1000 for x in lo])
    fl = lambda v: f"{med([int(x['minflt']) for x in v]) / 1000:.0f}k" if v else "-"
    def refl(v):
        v = [x for x in v if x["refills_on_demand"]]
        if not v:
            return "-"
        return f"{med([int(x['refills_on_demand']) for x in v]):.0f}, {med([float(x['refill_on_demand_ms']) for x in v]):.0f} ms"
    L.append(f"| {c} | {float(first['ms']) / 1000:.2f} | {rng(qt[c][0])} | {rng(qt[c][1])} | {int(first['minflt']) / 1000:.0f}k / {fl(sh)} / {fl(lo)} | {refl(sh)} / {refl(lo)} |")
L.append("")
if "pool-elastic" in qt and "pool-2m" in qt:
    e, f = qt["pool-elastic"], qt["pool-2m"]
    L.append(f"pool-elastic against pool-2m, ratio of the medians (elastic / fixed; not paired, the runs were one after the other): short gaps {med(e[0]) / med(f[0]):.3f}, long gaps {med(e[1]) / med(f[1]):.3f}.\n")
# memory: dynamic shared memory resident = pool + segments + what the main region gained since the start
ev = {}
series = {}
for x in m:
    c = x["config"]
    if x["event"] == "sample":
        series.setdefault(c, []).append((int(x["t_ms"]), float(x["main_mb"]), float(x["pool_mb"]), float(x["seg_mb"]), float(x["hugetlb_held_mb"])))
    else:
        ev.setdefault(c, []).append((int(x["t_ms"]), x["event"], x["phase"], int(x["query"])))
L.append("Dynamic shared memory resident, MB (the pool, the DSM segments, and what the main region gained since the server started: min_dynamic_shared_memory's touched pages): before the first query; the peak; at the end of each short gap (median); before each long-gap query, after the idle release and a maintenance period (median); and hugetlb pages held (in use or reserved) by the server at that point, MB.\n")
L.append("| config | before the first | peak | short gaps | after idle | hugetlb held after idle |")
L.append("| --- | --- | --- | --- | --- | --- |")
plotdat = open(f"{out}/idle-mem.dat", "w")
qdat = open(f"{out}/idle-queries.dat", "w")
for ci, c in enumerate(configs):
    s = series.get(c)
    if not s:
        continue
    e = sorted(ev.get(c, []))
    t0 = s[0][0]
    starts = [t for t, k, p, n in e if k == "start"]
    main0 = [x[1] for x in s if x[0] < starts[0]][-1] if starts and any(x[0] < starts[0] for x in s) else s[0][1]
    dsm = [(t, p + g + max(0.0, mn - main0), h) for t, mn, p, g, h in s]
    def before(t):
        v = [x for x in dsm if x[0] < t]
        return v[-1] if v else None
    first = before(starts[0]) if starts else None
    short_ends = [before(t) for t, k, p, n in e if k == "start" and p == "short" and n > 1]
    long_starts = [before(t) for t, k, p, n in e if k == "start" and p == "long"]
    short_ends = [x for x in short_ends if x]
    long_starts = [x for x in long_starts if x]
    L.append(f"| {c} | {first[1]:.0f} | {max(x[1] for x in dsm):.0f} | {med([x[1] for x in short_ends]):.0f} | {med([x[1] for x in long_starts]):.0f} | {med([x[2] for x in long_starts]):.0f} |")
    plotdat.write(f"# {c}\n")
    for t, v, h in dsm:
        plotdat.write(f"{(t - t0) / 1000:.2f} {v:.1f}\n")
    plotdat.write("\n\n")
    qdat.write(f"# {c}\n")
    st = {}
    for t, k, p, n in e:
        if k == "start":
            st[n] = t
        elif n in st:
            qdat.write(f"{(st[n] - t0) / 1000:.2f} {(t - st[n]) / 1000:.2f}\n")
    qdat.write("\n\n")
plotdat.close()
qdat.close()
L.append("")
open(f"{out}/bench-idle.txt", "w").write("\n".join(L) + "\n")
print("\n".join(L))
EOF
    if command -v gnuplot >/dev/null && [ -f "$out/idle-mem.dat" ]; then
        n=0
        titles=""
        for c in $ICONFIGS; do grep -q "^$c," "$out/idle.csv" && { n=$((n + 1)); titles="$titles $c"; }; done
        {
            echo "set terminal pngcairo size 1000,$((170 * n + 60)) noenhanced"
            echo "set output '$out/idle-mem.png'"
            echo "set multiplot layout $n,1 title 'PostgreSQL 18, seed query ($ROWS rows, 2 workers): DSM resident, MB; bars: queries ($IRUNS ${ISHORT} s apart, $IRUNS after ${ILONG} s)'"
            echo "set grid; set key top right horizontal; set yrange [-300:3000]; set ytics 0,500,2500; set lmargin 9"
            i=0
            for c in $titles; do
                [ $i = $((n - 1)) ] && echo "set xlabel 'seconds since the server started'"
                echo "plot '$out/idle-mem.dat' index $i using 1:2 with lines lw 2 title '$c', '$out/idle-queries.dat' index $i using 1:(-150):2:(0) with vectors nohead lw 6 lc rgb '#888888' title 'queries'"
                i=$((i + 1))
            done
            echo "unset multiplot"
        } | gnuplot
    fi
    {
        echo
        echo "machine: $(nproc) CPUs, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r); PostgreSQL: $("$prefix/bench-stock/bin/postgres" --version)"
        echo "load average (1, 5, 15 min) at the start: $load_start; at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other engineers' test suites share this machine)"
    } >>"$out/bench-idle.txt"
fi
[ -n "$STARTED" ] && {
    echo "machine: $(nproc) CPUs, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r)"
    lscpu 2>/dev/null | grep -E "Model name|NUMA node\(s\)" || true
    echo "PostgreSQL: $("$prefix/bench-stock/bin/postgres" --version)"
    echo "load average (1, 5, 15 min) at the start: $load_start; at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other engineers' test suites share this machine)"
} >"$out/machine.txt"
log "results: $out"

# ---- the smallest form: what ran, counted ---------------------------------------------------------
# Every part wrote a row for each configuration and round, with a time, no
# client errors, and its table (small_check: from the exit trap, after the
# system settings are put back, so that its summary is the last line).
small_done=1
exit 0

