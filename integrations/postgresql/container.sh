#!/usr/bin/env bash
# The seed query in a container-sized /dev/shm (run.sh container).
#
#   create table t (i int); insert into t select generate_series(1, 10000000);
#   select pg_prewarm('t'); set work_mem = '1GB';
#   set max_parallel_workers_per_gather = 2;
#   select count(*) from t t1 join t t2 using (i);
#
# Each server runs in a mount namespace of its own whose /dev/shm is a 64 MB
# tmpfs (Docker's default --shm-size), as a server in a container sees it:
#   stock         dynamic_shared_memory_type = posix (the default)
#   stock-1g      min_dynamic_shared_memory = 1GB (in the main shared memory,
#                 an anonymous mapping, outside /dev/shm)
#   pool-2g       dsmpool_size = 2GB (an anonymous mapping too)
#   pool-256m     dsmpool_size = 256MB: too small, so the areas spill to the
#                 pool's OS segments, in the 64 MB /dev/shm
# RUNS (3) queries each; a table of what each did: the median time, or the
# error, and whether any process died of a signal (SIGBUS). Release builds
# (run.sh builds them); one cluster, made by the patched initdb, used by
# both servers. Output: bench/results/postgresql-<host>/container.txt.
#
# Environment: ROWS (10000000), RUNS (3), SHM_SIZE (64m), CONFIGS.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
prefix=${1:-$here/work}
ROWS=${ROWS:-10000000}
RUNS=${RUNS:-3}
SHM_SIZE=${SHM_SIZE:-64m}
CONFIGS=${CONFIGS:-stock stock-1g pool-2g pool-256m}
# shellcheck source=lib.sh
source "$here/lib.sh"
[ "$(id -u)" = 0 ] || die "run as root (mount namespaces)"
need_user
out="$repo/bench/results/postgresql-$(hostname -s)"
mkdir -p "$out"
data="$prefix/data-container"

settings() {
    case $1 in
    stock) echo "dynamic_shared_memory_type = posix" ;;
    stock-1g) echo "min_dynamic_shared_memory = 1GB" ;;
    pool-2g) echo "dsmpool_size = 2GB" ;;
    pool-256m) echo "dsmpool_size = 256MB" ;;
    esac
}
binof() { case $1 in pool-*) echo "$prefix/bench-pool/bin" ;; *) echo "$prefix/bench-stock/bin" ;; esac; }

if [ ! -f "$data/seed-$ROWS" ]; then
    log "container: the table, $ROWS rows"
    pgbin="$prefix/bench-pool/bin"
    server_init "$pgbin" "shared_buffers = 512MB" "max_worker_processes = 8" "huge_pages = off"
    cp "$data/postgresql.conf" "$data/postgresql.conf.base"
    server_start "$pgbin"
    sql "create table t (i int); insert into t select generate_series(1, $ROWS); analyze t; create extension pg_prewarm;"
    server_stop "$pgbin"
    touch "$data/seed-$ROWS"
fi

QUERY="select count(*) from t t1 join t t2 using (i)"
# A server left running by an interrupted run would hold its namespace's
# tmpfs (and the pool) until stopped: stop it on the way out.
cur_bin=""
stop_server() { [ -z "$cur_bin" ] || as_pg "$cur_bin/pg_ctl" -D "$data" stop -m immediate >/dev/null 2>&1 || true; }
trap stop_server EXIT
trap 'exit 130' INT TERM HUP
rows_out=""
for c in $CONFIGS; do
    pgbin=$(binof "$c")
    cp "$data/postgresql.conf.base" "$data/postgresql.conf"
    { settings "$c"; echo "port = $port"; } >>"$data/postgresql.conf" # the base may have another's port
    : >"$data/log"
    log "container ($SHM_SIZE /dev/shm): $c: $(settings "$c")"
    if ! unshare -m --propagation private sh -c "mount -t tmpfs -o size=$SHM_SIZE,mode=1777 tmpfs /dev/shm &&
            exec runuser -u $PGUSER_NAME -- $pgbin/pg_ctl -D $data -l $data/log -w -t 300 start" >/dev/null; then
        rows_out="$rows_out| $c | $(settings "$c") | the server did not start: $(grep -m1 -E 'FATAL|ERROR' "$data/log" | sed 's/.*\(FATAL\|ERROR\): *//') |\n"
        continue
    fi
    cur_bin=$pgbin
    sql "select pg_prewarm('t')" >/dev/null
    times="" err=""
    for r in $(seq 1 "$RUNS"); do
        res=$(as_pg "$pgbin/psql" -h "$sock" -p "$port" -U postgres -d postgres -X -q -A -t \
            -c "set work_mem = '1GB'" -c "set max_parallel_workers_per_gather = 2" -c '\timing on' \
            -c "$QUERY" 2>&1 || true)
        t=$(echo "$res" | sed -nE 's/^Time: ([0-9.]+) ms.*/\1/p')
        n=$(echo "$res" | grep -xE '[0-9]+' | head -1 || true)
        if [ -n "$t" ] && [ "$n" = "$ROWS" ]; then
            times="$times $t"
        else
            err=$(echo "$res" | grep -m1 -E 'ERROR|FATAL|server closed|terminated' | sed 's/^psql:[^:]*: //' || true)
            [ -n "$err" ] || err="wrong answer: $n"
            # shellcheck disable=SC2001 # a pattern, not a string
            detail=$(grep -A1 -F "$(echo "$err" | sed 's/^ERROR: *//')" "$data/log" | grep -m1 'DETAIL:' | sed 's/.*DETAIL: */ (/; s/$/)/' || true)
            err="$err$detail"
            t=""
            wait_ready || true
        fi
        echo "  run $r: ${t:+$t ms}${err:+$err}" >&2
    done
    sig=$(grep -E 'terminated by signal' "$data/log" | sed -E 's/.*terminated by signal ([0-9]+): ([A-Za-z ]+).*/signal \1 (\2)/' | sort -u | tr '\n' ' ' || true)
    pool=""
    [[ $c == pool-* ]] && pool=$(sql "select format('; pg_dsmpool: %s segments and %s areas fell back, at most %s MB of area memory in OS segments', fallback_segments, fallback_areas, round(fallback_area_bytes_peak / 1048576.0))
                                      from pg_dsmpool" 2>/dev/null || true)
    if [[ $c == pool-* ]] && grep -q "dsmpool: the pool could not serve" "$data/log"; then
        pool="$pool; logged once: $(grep -m1 "dsmpool: the pool could not serve" "$data/log" | sed 's/.*LOG: *//')"
    fi
    as_pg "$pgbin/pg_ctl" -D "$data" -w -t 120 stop -m fast >/dev/null 2>&1 || as_pg "$pgbin/pg_ctl" -D "$data" stop -m immediate >/dev/null 2>&1 || true
    cur_bin=""
    result=""
    if [ -n "$times" ]; then
        # shellcheck disable=SC2086 # the words, one a line
        result=$(echo $times | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {printf "%.2f s (median of %d)", a[int((NR+1)/2)] / 1000, NR}')
    fi
    if [ -n "$err" ]; then
        result="${result:+$result; }$err"
    fi
    result="$result${pool}; ${sig:-no process died of a signal}"
    rows_out="$rows_out| $c | $(settings "$c") | $result |\n"
done
{
    echo "The seed query ($ROWS rows, work_mem = 1GB, 2 workers) with /dev/shm a $SHM_SIZE tmpfs, $(nproc) CPUs:"
    echo
    echo "| config | setting | what it did |"
    echo "| --- | --- | --- |"
    printf "%b" "$rows_out"
} | tee "$out/container.txt"
