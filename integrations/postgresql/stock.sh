#!/usr/bin/env bash
# The preload library on a server nobody here built (run.sh stock-check):
# Debian's own postgresql-15 package (installed if missing; its version is
# printed), LD_PRELOAD=libdsmpool-preload.so and nothing else -- no
# extension, no setting.
#
# Everything runs in a mount namespace of its own whose /dev/shm is a 64 MB
# tmpfs (Docker's default --shm-size), as a server in a container sees it.
#
#   lifecycle   initdb (its bootstrap), single-user mode and pg_upgrade (the
#               servers it starts) load no libdsmpool and make no pool; ROUNDS (10) crash restarts with
#               logging_collector = on, a parallel worker killed in the join
#               each time: the server comes back, the syslogger (which
#               survives restarts) holds no pool, the postmaster one; a
#               postmaster killed with -9: the next start and stop leave no
#               PostgreSQL.* and no dsmpool.* name; two clusters on one
#               /dev/shm at once; a parallel index build checked by amcheck;
#               the operator's way: a cluster of Debian's pg_createcluster,
#               LD_PRELOAD in its environment file, pg_ctlcluster start, and
#               off again
#   container   the seed query (ROWS rows, work_mem = 1GB, 2 workers) as
#               shipped, with the workarounds users use (a 2 GB /dev/shm,
#               dynamic_shared_memory_type = sysv, min_dynamic_shared_memory
#               = 1GB) and with the preload library: a table; the library's
#               row must be right, with no data in /dev/shm while it ran
#
# Usage: stock.sh PREFIX BUILD_DIR   (BUILD_DIR holds libdsmpool-preload.so
# and libdsmpool.so.0). Root, Debian 12. Ends with "N passed, N failed".
# Environment: ROWS (10000000), ROUNDS (10), PG_STOCK_MAJOR (15); STOCK_BIN:
# instead of the package, the bin directory of a server built without
# patches (run.sh stock18-check; the operator's way, which is Debian's
# pg_ctlcluster, is the package's only). amcheck must be installed there.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${1:?prefix}
build=$(cd "${2:?build dir}" && pwd)
ROWS=${ROWS:-10000000}
ROUNDS=${ROUNDS:-10}
V=${PG_STOCK_MAJOR:-15} # or the major of STOCK_BIN's server (stock_server)
# shellcheck source=lib.sh
source "$here/lib.sh"
[ "$(id -u)" = 0 ] || die "run as root (mount namespaces, the server's user)"

in_small_shm "$0" "$@"

stock_server "postgresql-$V" || { fail "postgresql-$V could not be installed"; finish; }
command -v strace >/dev/null || apt_install strace
echo "server: $SERVER"
need_user

root="$prefix/stock-$V"
mkdir -p "$root/lib" "$root/sock"
cp -L "$build/libdsmpool-preload.so" "$build/libdsmpool.so.0" "$root/lib/"
chmod -R a+rX "$root/lib"
chown "$PGUSER_NAME" "$root" "$root/sock"
PRE="$root/lib/libdsmpool-preload.so"
sock="$root/sock"
pgbin=$B
port=54339
data="$root/data"
JOIN="select count(*) from t t1 join t t2 using (i)"

psql_() { as_pg "$B/psql" -h "$sock" -p "${2:-$port}" -U postgres -d postgres -X -q -A -t -c "$1"; }
join_() { # join_ [port] -> the count or the error
    as_pg "$B/psql" -h "$sock" -p "${1:-$port}" -U postgres -d postgres -X -q -A -t \
        -c "set work_mem = '1GB'" -c "set max_parallel_workers_per_gather = 2" -c "$JOIN" 2>&1 | tail -1
}
start_() { # start_ datadir [LD_PRELOAD value] [-o options]
    local d=$1 pre=${2:-} opts=${3:-}
    as_pg env ${pre:+LD_PRELOAD=$pre} "$B/pg_ctl" -D "$d" -l "$d/log" -w -t 120 ${opts:+-o "$opts"} start >/dev/null
}
stop_() { as_pg "$B/pg_ctl" -D "$1" -w -t 120 stop -m fast >/dev/null 2>&1 || as_pg "$B/pg_ctl" -D "$1" stop -m immediate >/dev/null 2>&1; }
cleanup() {
    local d
    for d in "$data" "$root/data2"; do [ -f "$d/postmaster.pid" ] && stop_ "$d"; done
    [ -n "${ops:-}" ] && pg_dropcluster --stop "$V" "$ops" >/dev/null 2>&1
    return 0
}
trap cleanup EXIT
# pool_maps PID: the pool's mappings and descriptors this process holds (a
# process of the pool holds two descriptors: the region's and its liveness
# lock's)
# shellcheck disable=SC2010 # counts the descriptors that name the pool
pool_maps() { echo "$(grep -c 'memfd:dsmpool' "/proc/$1/maps" 2>/dev/null)/$(ls -l "/proc/$1/fd" 2>/dev/null | grep -c 'memfd:dsmpool')"; }
# what is in /dev/shm: name, mode, size, data blocks
shm_left() { find /dev/shm -mindepth 1 -maxdepth 1 -printf '%f %m %s %b; ' 2>/dev/null; }
# the data blocks of pool names (mode 0000) in /dev/shm, sampled until $1 exists
sample_blocks() {
    local max=0 b
    while [ ! -e "$1" ]; do
        b=$(find /dev/shm -maxdepth 1 -name 'PostgreSQL.*' -perm 0000 -printf '%b\n' 2>/dev/null | awk '{s += $1} END {print s + 0}')
        [ "$b" -gt "$max" ] && max=$b
        sleep 0.1
    done
    echo "$max"
}

# ---- initdb and single-user mode --------------------------------------------------

log "initdb with LD_PRELOAD (traced)"
rm -rf "$data"
strace -f -qq -e trace=openat,memfd_create -o "$root/initdb.trace" \
    runuser -u "$PGUSER_NAME" -- env LD_PRELOAD="$PRE" "$B/initdb" -D "$data" -U postgres --no-sync >"$root/initdb.log" 2>&1 ||
    { fail "initdb failed: $(tail -3 "$root/initdb.log")"; finish; }
n=$(grep -cE 'libdsmpool\.so|memfd_create\("dsmpool' "$root/initdb.trace")
# shellcheck disable=SC2012 # a listing for the report
[ "$n" = 0 ] && [ -z "$(ls /dev/shm)" ] && pass "initdb (bootstrap and its checks) loaded no libdsmpool and made no pool" ||
    fail "initdb: $n loads of libdsmpool or pools made; /dev/shm: $(ls /dev/shm | tr '\n' ' ')"
{
    echo "port = $port"
    echo "unix_socket_directories = '$sock'"
    echo "listen_addresses = ''"
    echo "shared_buffers = 512MB"
    echo "max_worker_processes = 8"
    echo "huge_pages = off"
    echo "logging_collector = off"
} >>"$data/postgresql.conf"
strace -f -qq -e trace=openat,memfd_create -o "$root/single.trace" \
    runuser -u "$PGUSER_NAME" -- env LD_PRELOAD="$PRE" "$B/postgres" --single -D "$data" postgres \
    <<<"select 1;" >"$root/single.log" 2>&1
n=$(grep -cE 'libdsmpool\.so|memfd_create\("dsmpool' "$root/single.trace")
grep -q '1' "$root/single.log" && [ "$n" = 0 ] && pass "single-user mode ran and loaded no libdsmpool" ||
    fail "single-user mode: $n loads of libdsmpool; $(tail -2 "$root/single.log")"

# ---- pg_upgrade ------------------------------------------------------------------------
# the servers pg_upgrade starts are postmasters (binary-upgrade mode): no pool

log "pg_upgrade with LD_PRELOAD (traced)"
upg="$root/upg"
rm -rf "$upg" && mkdir -p "$upg" && chown "$PGUSER_NAME" "$upg"
as_pg "$B/initdb" -D "$upg/old" -U postgres --no-sync >"$upg/initdb.log" 2>&1 &&
    as_pg "$B/initdb" -D "$upg/new" -U postgres --no-sync >>"$upg/initdb.log" 2>&1
(cd "$upg" && strace -f -qq -e trace=openat,memfd_create,execve -o "$root/upgrade.trace" \
    runuser -u "$PGUSER_NAME" -- env LD_PRELOAD="$PRE" "$B/pg_upgrade" -b "$B" -B "$B" -d "$upg/old" -D "$upg/new" \
    -U postgres -p 55432 -P 55433 -s "$upg" >"$upg/upgrade.log" 2>&1)
r=$?
n=$(grep -cE 'libdsmpool\.so|memfd_create\("dsmpool' "$root/upgrade.trace")
pms=$(grep -c 'execve(.*/postgres"' "$root/upgrade.trace")
[ "$r" = 0 ] && [ "$n" = 0 ] && [ "$pms" -gt 0 ] && [ -z "$(ls /dev/shm)" ] &&
    pass "pg_upgrade ran ($pms postgres starts, binary-upgrade mode) and loaded no libdsmpool" ||
    fail "pg_upgrade: exit $r, $n loads of libdsmpool or pools made, $pms postgres starts; $(tail -2 "$upg/upgrade.log")"
rm -rf "$upg"

# ---- the table -----------------------------------------------------------------------

log "the table: $ROWS rows"
start_ "$data" || { fail "the server did not start: $(tail -3 "$data/log")"; finish; }
psql_ "create table t (i int); insert into t select generate_series(1, $ROWS); analyze t; create extension pg_prewarm; create extension amcheck;" >/dev/null
stop_ "$data"

# ---- the container table -----------------------------------------------------------

row() { # name setting result
    rows="$rows| $1 | $2 | $3 |\n"
}
rows=""
for c in stock shm-2g sysv min-dsm-1g preload; do
    pre="" opt="" shm=""
    case $c in
    stock) set_="dynamic_shared_memory_type = posix (the default)" ;;
    shm-2g) set_="a 2 GB /dev/shm (--shm-size=2g)" shm=2g ;;
    sysv) set_="dynamic_shared_memory_type = sysv" opt="-c dynamic_shared_memory_type=sysv" ;;
    min-dsm-1g) set_="min_dynamic_shared_memory = 1GB" opt="-c min_dynamic_shared_memory=1GB" ;;
    preload) set_="LD_PRELOAD=libdsmpool-preload.so" pre=$PRE ;;
    esac
    : >"$data/log"
    if [ -n "$shm" ]; then
        # a server of its own mount namespace with a bigger /dev/shm
        unshare -m --propagation private sh -c "mount -t tmpfs -o size=$shm,mode=1777 tmpfs /dev/shm &&
            exec runuser -u $PGUSER_NAME -- $B/pg_ctl -D $data -l $data/log -w -t 120 start" >/dev/null || true
    else
        start_ "$data" "$pre" "$opt" || true
    fi
    if ! psql_ "select 1" >/dev/null 2>&1; then
        row "$c" "$set_" "did not start: $(grep -m1 -E 'FATAL|ERROR' "$data/log")"
        continue
    fi
    psql_ "select pg_prewarm('t')" >/dev/null
    done_flag="$root/join.done"
    rm -f "$done_flag"
    sample_blocks "$done_flag" >"$root/blocks" &
    sampler=$!
    t0=$(date +%s%N)
    res=$(join_)
    t1=$(date +%s%N)
    touch "$done_flag"
    wait $sampler
    blocks=$(cat "$root/blocks")
    sig=$(grep -E 'terminated by signal' "$data/log" | head -1)
    if [ "$res" = "$ROWS" ]; then
        out="right, $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f s", (b - a) / 1e9}')"
    else
        # shellcheck disable=SC2001 # a pattern, not a string
        out=$(echo "$res" | sed 's/^psql:[^:]*: //')
    fi
    row "$c" "$set_" "$out${sig:+; $sig}"
    if [ "$c" = stock ]; then
        grep -q 'No space left on device' <<<"$res" && pass "container: stock fails as users report: $res" ||
            fail "container: stock in a 64 MB /dev/shm did not fail as expected: $res"
    fi
    if [ "$c" = preload ]; then
        pm=$(head -1 "$data/postmaster.pid")
        [ "$res" = "$ROWS" ] && [ -z "$sig" ] && pass "container: the preload library serves the join ($out)" ||
            fail "container: with the preload library: $res $sig"
        [ "$blocks" = 0 ] && pass "container: no data in /dev/shm while the pool served (sampled every 0.1 s)" ||
            fail "container: $blocks blocks of data under pool names in /dev/shm"
        [ "$(pool_maps "$pm")" = 1/2 ] && pass "container: the postmaster maps one pool" ||
            fail "container: the postmaster's pool mappings/fds: $(pool_maps "$pm")"
    fi
    stop_ "$data"
    if [ "$c" = preload ]; then
        # shellcheck disable=SC2012 # a listing for the report
        left=$(ls /dev/shm | tr '\n' ' ')
        [ -z "$left" ] && pass "container: the stop left nothing in /dev/shm" || fail "container: left in /dev/shm: $left"
    fi
done
{
    echo "The seed query ($ROWS rows, work_mem = 1GB, 2 workers) on $SERVER,"
    echo "/dev/shm a 64 MB tmpfs, $(nproc) CPUs:"
    echo
    echo "| config | setting | the join |"
    echo "| --- | --- | --- |"
    printf "%b" "$rows"
} | tee "$root/container.txt"

# ---- crash restarts ----------------------------------------------------------------

log "crash restarts: $ROUNDS, logging_collector = on"
: >"$data/log"
start_ "$data" "$PRE" "-c logging_collector=on -c log_directory=$root/plog" || { fail "start: $(tail -3 "$data/log")"; finish; }
pm=$(head -1 "$data/postmaster.pid")
logger=$(pgrep -P "$pm" -f 'logger' | head -1)
ok=0
# A round kills a parallel worker of the join; a join that ended before
# one was seen (or whose worker ended before the kill) is tried again, up to
# 5 times. The waits are long (30 s for a worker, 60 s for the server to
# come back): on a loaded machine a join starts its workers late, and a
# round that killed nothing is not a server that did not come back.
for r in $(seq 1 "$ROUNDS"); do
    killed=0
    for _ in 1 2 3 4 5; do
        join_ >"$root/crash.out" 2>&1 &
        q=$!
        w=""
        for _ in $(seq 1 600); do
            w=$(pgrep -P "$pm" -f 'parallel worker' | head -1)
            [ -n "$w" ] && break
            kill -0 "$q" 2>/dev/null || break
            sleep 0.05
        done
        sleep 0.3 # the worker attaches the join's segments
        [ -n "$w" ] && kill -9 "$w" 2>/dev/null && killed=1
        wait $q || true
        [ "$killed" = 1 ] && break
    done
    for _ in $(seq 1 600); do psql_ "select 1" >/dev/null 2>&1 && break; sleep 0.1; done
    if [ "$killed" = 1 ] && psql_ "select 1" >/dev/null 2>&1; then ok=$((ok + 1)); fi
done
[ "$ok" = "$ROUNDS" ] && pass "crash restart: $ROUNDS parallel workers killed in the join, the server came back each time" ||
    fail "crash restart: came back $ok of $ROUNDS times"
res=$(join_)
[ "$res" = "$ROWS" ] && pass "crash restart: the join after the restarts is right" || fail "crash restart: the join said $res"
[ -n "$logger" ] && [ "$(pool_maps "$logger")" = 0/0 ] && pass "crash restart: the syslogger (pid $logger, alive since the start) holds no pool" ||
    fail "crash restart: the syslogger ${logger:-(none)} holds pool mappings/fds $(pool_maps "${logger:-0}")"
[ "$(pool_maps "$pm")" = 1/2 ] && pass "crash restart: the postmaster holds one pool (the last generation)" ||
    fail "crash restart: the postmaster's pool mappings/fds: $(pool_maps "$pm")"
# a worker killed between its shm_open and dsm_create's registration leaves a
# name no control segment lists (stock leaks it, data and all): each
# generation's end removes those of its pool
stop_ "$data"
left=$(shm_left)
[ -z "$left" ] && pass "crash restart: the stop after $ROUNDS restarts left no name" ||
    fail "crash restart: the stop after $ROUNDS restarts left (name mode size blocks): $left"
start_ "$data" "$PRE" || { fail "start: $(tail -3 "$data/log")"; finish; }
pm=$(head -1 "$data/postmaster.pid")

# ---- a killed postmaster --------------------------------------------------------------

join_ >/dev/null 2>&1 &
q=$!
sleep 1.5
kill -9 "$pm"
wait $q
# its children notice and exit (the syslogger last, when its pipe closes)
for _ in $(seq 1 300); do pgrep -u "$PGUSER_NAME" -x postgres >/dev/null || break; sleep 0.1; done
# shellcheck disable=SC2010 # counts PostgreSQL's own names
before=$(ls /dev/shm | grep -c '^PostgreSQL\.')
if start_ "$data" "$PRE"; then
    stop_ "$data"
    left=$(shm_left)
    [ -z "$left" ] && pass "postmaster killed (-9) in the join: the next start and stop left no name ($before PostgreSQL.* names before)" ||
        fail "postmaster killed: left in /dev/shm: $left"
else
    fail "postmaster killed: the next start failed: $(tail -3 "$data/log")"
fi

# ---- two clusters, one /dev/shm -----------------------------------------------------

rm -rf "$root/data2"
cp -a "$data" "$root/data2"
sed -i "s/^port = .*/port = $((port + 1))/" "$root/data2/postgresql.conf"
start_ "$data" "$PRE" && start_ "$root/data2" "$PRE"
join_ "$port" >"$root/j1" 2>&1 &
a=$!
join_ $((port + 1)) >"$root/j2" 2>&1 &
b=$!
wait $a $b
[ "$(cat "$root/j1")" = "$ROWS" ] && [ "$(cat "$root/j2")" = "$ROWS" ] &&
    pass "two clusters on one /dev/shm: both joins right at once" ||
    fail "two clusters: $(cat "$root/j1") / $(cat "$root/j2")"
stop_ "$root/data2"
rm -rf "$root/data2"

# ---- the operator's way ---------------------------------------------------------------
# Debian's pg_ctlcluster (and postgresql@.service, which runs it) gives postgres
# the environment of /etc/postgresql/V/C/environment and nothing else: the
# line goes there (integrations/postgresql/README.md, "stock").

ops=dsmpool-stock-check
opsport=$((port + 2))
if [ "$IS_PACKAGED" = 0 ]; then
    ops="" # not Debian's server: no pg_ctlcluster
    log "operator's way (pg_ctlcluster): Debian's package only, not run on $SERVER"
elif pg_dropcluster --stop "$V" "$ops" >/dev/null 2>&1
    mkdir -p "$root/ops-sock" && chown postgres "$root/ops-sock"
    pg_createcluster "$V" "$ops" -p "$opsport" -s "$root/ops-sock" -- --no-sync >"$root/ops.log" 2>&1; then
    env_file=/etc/postgresql/$V/$ops/environment
    ops_psql() { runuser -u postgres -- "$B/psql" -h "$root/ops-sock" -p "$opsport" -X -q -A -t "$@" 2>&1 | tail -1; }
    ops_pm() { head -1 "$(pg_lsclusters -h "$V" "$ops" | awk '{print $6}')/postmaster.pid" 2>/dev/null; }
    echo "LD_PRELOAD = '$PRE'" >>"$env_file"
    pg_ctlcluster --skip-systemctl-redirect "$V" "$ops" start >>"$root/ops.log" 2>&1
    pm=$(ops_pm)
    ops_psql -c "create table t (i int)" -c "insert into t select generate_series(1, 2000000)" -c "analyze t" >/dev/null
    res=$(ops_psql -c "set work_mem = '256MB'" -c "set max_parallel_workers_per_gather = 2" \
        -c "set parallel_setup_cost = 0" -c "set parallel_tuple_cost = 0" -c "$JOIN")
    grep -q libdsmpool-preload "/proc/${pm:-0}/maps" 2>/dev/null && [ "$(pool_maps "${pm:-0}")" = 1/2 ] && [ "$res" = 2000000 ] &&
        pass "operator: LD_PRELOAD in $env_file reaches the server pg_ctlcluster starts; its pool serves the join" ||
        fail "operator: pg_ctlcluster with $env_file: postmaster ${pm:-(none)}, pool $(pool_maps "${pm:-0}"), join: $res"
    # turned off: the line goes, the cluster restarts
    sed -i '/^LD_PRELOAD/d' "$env_file"
    pg_ctlcluster --skip-systemctl-redirect "$V" "$ops" restart >>"$root/ops.log" 2>&1
    pm=$(ops_pm)
    res=$(ops_psql -c "select count(*) from t")
    ! grep -q libdsmpool "/proc/${pm:-0}/maps" 2>/dev/null && [ "$res" = 2000000 ] &&
        pass "operator: without the line the restarted server is stock (no library, no pool)" ||
        fail "operator: turned off: postmaster ${pm:-(none)}, maps $(grep -c libdsmpool "/proc/${pm:-0}/maps" 2>/dev/null), count: $res"
    pg_dropcluster --stop "$V" "$ops" >>"$root/ops.log" 2>&1
else
    fail "operator: pg_createcluster failed: $(tail -3 "$root/ops.log")"
fi

# ---- a parallel index build ---------------------------------------------------------

r=$(as_pg "$B/psql" -h "$sock" -p "$port" -U postgres -d postgres -X -q -A -t \
    -c "set max_parallel_maintenance_workers = 2" -c "set maintenance_work_mem = '512MB'" \
    -c "set client_min_messages = debug1" -c "create index t_i on t (i)" \
    -c "select bt_index_parent_check('t_i', true)" -c "drop index t_i" 2>&1)
grep -qi 'error' <<<"$r" && fail "parallel index build: $(grep -i -m1 error <<<"$r")" ||
    pass "parallel index build: amcheck finds the index right"
stop_ "$data"
left=$(shm_left)
[ -z "$left" ] && pass "after all: nothing in /dev/shm" || fail "after all: left in /dev/shm: $left"
finish
