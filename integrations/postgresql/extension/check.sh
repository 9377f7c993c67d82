#!/usr/bin/env bash
# The extension dsmpool on a server nobody here built: Debian's own
# postgresql-15 package (installed if missing, with its server development
# files for PGXS), the extension built and installed into its directories,
# and the preload library from BUILD_DIR.
#
# Everything runs in a mount namespace of its own whose /dev/shm is a 64 MB
# tmpfs (Docker's default --shm-size), as stock.sh does.
#
#   absent      shared_preload_libraries = 'dsmpool' without LD_PRELOAD: the
#               log says there is no pool and what to do, the view says
#               absent, no maintainer runs; the join is right in stock's
#               /dev/shm (the join the later checks use fits there)
#   inert       dynamic_shared_memory_type = sysv: said once in the log, the
#               view says inert, no pool and no maintainer, however many
#               segments the join makes
#   settings    resident_min + warm beyond size stops the start with an
#               error that names them; dsmpool.size reaches the pool (the
#               view's size, the maintainer's line)
#   view        a plain role is refused; a member of pg_read_all_stats reads
#               its one row
#   path        shared_preload_libraries naming the file by a path (none in
#               $libdir): the maintainer loads that file and runs
#   small pool  dsmpool.size = 8MB: the join is right, the refusals are
#               counted, and the log has exactly one LOG with its HINT
#               after two joins
#   maintainer  dsmpool.warm = 8MB made resident before any segment;
#               dsmpool.idle_release = 2s: resident memory stays after the
#               join and goes back to the warm reserve within the idle time
#               and a step;
#               dsmpool.huge_pages on a machine without enough huge pages:
#               4 kB pages, and the log says why
#   crash       a backend killed (-9): the server comes back, a new
#               generation, a new maintainer holding only its pool, and it
#               gives back the new generation's memory too
#   reserve     dsmpool.size 4 GB beyond the machine's memory, with huge
#               pages reserved for its tables and 2 GB to work in: the
#               pool is in huge pages and serves the join, which is right
#   TAP         the extension's TAP tests (t/*.pl) with DSMPOOL_WAY=preload:
#               every server they start has LD_PRELOAD; each subtest counts
#               (said and skipped where the server's development files have
#               no PostgreSQL::Test::Cluster)
#
# Usage: check.sh PREFIX BUILD_DIR   (BUILD_DIR holds libdsmpool-preload.so
# and libdsmpool.so.0). Root, Debian 12. Ends with "N passed, N failed".
# Environment: ROWS (300000), PG_STOCK_MAJOR (15); STOCK_BIN: instead of
# the package, the bin directory of a server built without patches (run.sh
# stock18-check).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${1:?prefix}
build=$(cd "${2:?build dir}" && pwd)
ROWS=${ROWS:-300000}
V=${PG_STOCK_MAJOR:-15}
# shellcheck source=../lib.sh
source "$here/../lib.sh"
[ "$(id -u)" = 0 ] || die "run as root (mount namespaces, the server's user)"

in_small_shm "$0" "$@"
check() { # check "what" command...: passes when the command does
    local what=$1
    shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}

stock_server "postgresql-$V" "postgresql-server-dev-$V" || { fail "postgresql-$V could not be installed"; finish; }
echo "server: $SERVER"
need_user

root="$prefix/ext-$V"
rm -rf "$root"
mkdir -p "$root/lib" "$root/sock" "$root/build"
cp -L "$build/libdsmpool-preload.so" "$build/libdsmpool.so.0" "$root/lib/"
chmod -R a+rX "$root/lib"
chown "$PGUSER_NAME" "$root" "$root/sock"
PRE="$root/lib/libdsmpool-preload.so"
sock="$root/sock"
port=54349
data="$root/data"
JOIN="select count(*) from t t1 join t t2 using (i)"

# ---- build and install (PGXS, out of the source tree) ------------------------

log "building the extension with PGXS ($B/pg_config)"
if make -s -C "$root/build" -f "$here/Makefile" VPATH="$here" PG_CONFIG="$B/pg_config" with_llvm=no >"$root/build.log" 2>&1 &&
    make -s -C "$root/build" -f "$here/Makefile" VPATH="$here" PG_CONFIG="$B/pg_config" with_llvm=no install >>"$root/build.log" 2>&1; then
    pass "the extension builds with PGXS and installs into $("$B/pg_config" --pkglibdir)"
else
    fail "the extension did not build: $(grep -m3 -E 'error|Error' "$root/build.log")"
    finish
fi
undef=$(nm -D --undefined-only "$root/build/dsmpool.so" | grep -c ' dsmpool_')
needed=$(readelf -d "$root/build/dsmpool.so" | grep -c 'NEEDED.*dsmpool')
[ "$undef" = 0 ] && [ "$needed" = 0 ] && pass "the extension links no dsmpool library and imports no dsmpool_ call" ||
    fail "the extension imports $undef dsmpool_ symbols, needs $needed dsmpool libraries"

psql_() { as_pg "$B/psql" -h "$sock" -p "$port" -U "${2:-postgres}" -d postgres -X -q -A -t -c "$1"; }
join_() { # the count or the error
    as_pg "$B/psql" -h "$sock" -p "$port" -U postgres -d postgres -X -q -A -t \
        -c "set work_mem = '1GB'" -c "set max_parallel_workers_per_gather = 2" -c "$JOIN" 2>&1 | tail -1
}
start_() { # start_ [LD_PRELOAD value] [-o options]: a fresh log each start
    local pre=${1:-} opts=${2:-}
    rm -f "$data/log"
    as_pg env ${pre:+LD_PRELOAD=$pre} "$B/pg_ctl" -D "$data" -l "$data/log" -w -t 60 ${opts:+-o "$opts"} start >/dev/null
}
stop_() { as_pg "$B/pg_ctl" -D "$data" -w -t 60 stop -m fast >/dev/null 2>&1 || as_pg "$B/pg_ctl" -D "$data" stop -m immediate >/dev/null 2>&1; }
cleanup() {
    [ -f "$data/postmaster.pid" ] && stop_
    [ -f "${libfile:-}.aside" ] && mv "$libfile.aside" "$libfile"
    [ -n "${hp_old:-}" ] && echo "$hp_old" >/proc/sys/vm/nr_hugepages
    return 0
}
trap cleanup EXIT
pm_pid() { head -1 "$data/postmaster.pid"; }
maintainer() { pgrep -P "$(pm_pid)" -f 'dsmpool maintainer' | head -1; }
has_maintainer() { [ -n "$(maintainer)" ]; }
# the pool's mappings and descriptors a process holds (stock.sh's pool_maps)
pool_maps() { echo "$(grep -c 'memfd:dsmpool' "/proc/$1/maps" 2>/dev/null)/$(find "/proc/$1/fd" -lname '*memfd:dsmpool*' 2>/dev/null | wc -l)"; }
view() { psql_ "select $1 from pg_dsmpool"; }
# wait_for SECONDS command...: until the command passes
wait_for() {
    local n=$(($1 * 10))
    shift
    while [ $n -gt 0 ]; do
        "$@" && return 0
        sleep 0.1
        n=$((n - 1))
    done
    return 1
}
logged() { grep -c -- "$1" "$data/log"; }

log "initdb; a table of $ROWS rows"
as_pg "$B/initdb" -D "$data" -U postgres --no-sync >"$root/initdb.log" 2>&1 || { fail "initdb: $(tail -3 "$root/initdb.log")"; finish; }
{
    echo "port = $port"
    echo "unix_socket_directories = '$sock'"
    echo "listen_addresses = ''"
    echo "shared_buffers = 128MB"
    echo "max_worker_processes = 8"
    echo "huge_pages = off"
    echo "logging_collector = off"
    echo "shared_preload_libraries = 'dsmpool'"
} >>"$data/postgresql.conf"

# ---- absent: no preload library ------------------------------------------------

start_ || { fail "the server did not start without the preload library: $(tail -3 "$data/log")"; finish; }
psql_ "create table t (i int); insert into t select generate_series(1, $ROWS); analyze t;
       create extension dsmpool; create role plain login; create role reader login in role pg_read_all_stats;" >/dev/null
grep -q 'WARNING:  dsmpool: no pool: the preload library libdsmpool-preload.so is not loaded' "$data/log" &&
    grep -q 'HINT:  Start the server with LD_PRELOAD naming libdsmpool-preload.so' "$data/log" &&
    pass "absent: the log says there is no preload library, and what to do" ||
    fail "absent: the log says: $(grep -m2 dsmpool "$data/log")"
r=$(view "serving || ' ' || coalesce(generation::text, '-') || ' ' || note")
[[ "$r" == "false - absent: the preload library libdsmpool-preload.so is not loaded. Start the server with LD_PRELOAD"* ]] &&
    pass "absent: the view's row says absent, with what to do" || fail "absent: the view says: $r"
[ -z "$(maintainer)" ] && pass "absent: no maintainer runs" || fail "absent: a maintainer runs: $(maintainer)"
res=$(join_)
[ "$res" = "$ROWS" ] && pass "absent: the join is right in stock's 64 MB /dev/shm (it fits there)" || fail "absent: the join said $res"
stop_

# ---- inert: dynamic_shared_memory_type = sysv ------------------------------------

start_ "$PRE" "-c dynamic_shared_memory_type=sysv" || fail "inert: the server did not start: $(tail -3 "$data/log")"
res=$(join_)
res2=$(join_)
n=$(logged 'LOG:  dsmpool: inert: dynamic_shared_memory_type is sysv')
[ "$res" = "$ROWS" ] && [ "$res2" = "$ROWS" ] && [ "$n" = 1 ] && grep -q 'HINT:  Set dynamic_shared_memory_type = posix' "$data/log" &&
    pass "inert: sysv is said once in the log (after two joins), with its hint; the joins are right" ||
    fail "inert: $n lines; joins $res, $res2"
r=$(view "serving || ' ' || coalesce(generation::text, '-') || ' ' || note")
[ "$r" = "false - inert: dynamic_shared_memory_type is sysv; the pool serves posix segments only" ] &&
    pass "inert: the view says inert" || fail "inert: the view says: $r"
[ -z "$(maintainer)" ] && [ "$(pool_maps "$(pm_pid)")" = 0/0 ] && pass "inert: no maintainer, and the postmaster holds no pool" ||
    fail "inert: maintainer '$(maintainer)', postmaster's pool mappings/fds $(pool_maps "$(pm_pid)")"
stop_

# ---- settings ------------------------------------------------------------------------

if start_ "$PRE" "-c dsmpool.size=64MB -c dsmpool.resident_min=48MB -c dsmpool.warm=32MB" 2>/dev/null; then
    fail "settings: resident_min + warm beyond size started the server"
    stop_
else
    grep -q 'dsmpool.resident_min (48 MB) and dsmpool.warm (32 MB) together exceed dsmpool.size (64 MB)' "$data/log" &&
        pass "settings: resident_min + warm beyond size stops the start, saying which" ||
        fail "settings: the start failed but the log says: $(grep -m2 -E 'FATAL|ERROR' "$data/log")"
fi
if start_ "$PRE" "-c dsmpool.size=4MB" 2>/dev/null; then
    fail "settings: dsmpool.size = 4MB started the server"
    stop_
else
    grep -q 'dsmpool.size is 4 MB; it must be between 8 MB and' "$data/log" &&
        pass "settings: a size below 8 MB stops the start, saying the range" ||
        fail "settings: the log says: $(grep -m2 -E 'FATAL|ERROR' "$data/log")"
fi

# ---- a small pool: 8 MB -----------------------------------------------------------

log "a pool of 8 MB"
start_ "$PRE" "-c dsmpool.size=8MB" || { fail "small pool: the server did not start: $(tail -3 "$data/log")"; finish; }
r=$(view "serving, size = pg_size_bytes(current_setting('dsmpool.size')), size, generation")
[ "$r" = "t|t|8388608|1" ] && pass "settings: dsmpool.size reaches the pool (pg_dsmpool: serving, size 8388608, generation 1)" ||
    fail "settings: the view says $r (serving|size = dsmpool.size|size|generation)"
wait_for 5 grep -q 'LOG:  dsmpool: generation 1: a pool of 8 MB in 4 kB pages serves' "$data/log" &&
    pass "settings: the maintainer says what the pool is" || fail "settings: no maintainer line: $(grep -m3 dsmpool "$data/log")"
a=$(psql_ "select * from pg_dsmpool" plain 2>&1)
b=$(psql_ "select * from pg_dsmpool_stats()" plain 2>&1)
[[ "$a" == *"permission denied for view pg_dsmpool"* ]] && [[ "$b" == *"permission denied for function pg_dsmpool_stats"* ]] &&
    pass "view: a plain role is refused ($a)" || fail "view: a plain role got: $a / $b"
c=$(psql_ "select count(*), bool_and(serving) from pg_dsmpool" reader 2>&1)
[ "$c" = "1|t" ] && pass "view: a member of pg_read_all_stats reads one row" || fail "view: pg_read_all_stats got: $c"
res=$(join_)
res2=$(join_)
[ "$res" = "$ROWS" ] && [ "$res2" = "$ROWS" ] && pass "small pool: the join is right, twice" || fail "small pool: the joins said $res, $res2"
r=$(view "segments_served > 0 and segments_refused > 0")
[ "$r" = t ] && pass "small pool: the view counts segments served and refused ($(view "segments_served || ' served, ' || segments_refused || ' refused'"))" ||
    fail "small pool: the view says $(view "segments_served || ' ' || segments_refused")"
refusal() { [ "$(logged 'LOG:  dsmpool: the pool could not serve a dynamic shared memory segment of')" -ge 1 ]; }
wait_for 5 refusal
sleep 1.5 # a maintainer step more: a second line would be there
n=$(logged 'LOG:  dsmpool: the pool could not serve a dynamic shared memory segment of')
h=$(grep -A2 'LOG:  dsmpool: the pool could not serve' "$data/log" | grep -c 'HINT:  Consider increasing "dsmpool.size" (now 8 MB)')
[ "$n" = 1 ] && [ "$h" = 1 ] && pass "small pool: exactly one LOG with its HINT after two joins: $(grep -m1 'could not serve' "$data/log" | sed 's/.*LOG:  //')" ||
    fail "small pool: $n LOG lines, $h hints: $(grep -A2 'could not serve' "$data/log" | head -6)"
stop_

# ---- shared_preload_libraries naming a path ------------------------------------------
# the maintainer loads the file the postmaster loaded, not $libdir's

libfile=$("$B/pg_config" --pkglibdir)/dsmpool.so
mkdir -p "$root/alt" && cp "$root/build/dsmpool.so" "$root/alt/" && chmod -R a+rX "$root/alt"
mv "$libfile" "$libfile.aside"
if start_ "$PRE" "-c shared_preload_libraries=$root/alt/dsmpool"; then
    wait_for 10 grep -q 'LOG:  dsmpool: generation 1: a pool' "$data/log" &&
        pass "a path in shared_preload_libraries: the maintainer loads that file (none in \$libdir)" ||
        fail "a path in shared_preload_libraries: no maintainer: $(grep -m2 -E 'ERROR|could not' "$data/log")"
    stop_
else
    fail "a path in shared_preload_libraries: the server did not start: $(tail -3 "$data/log")"
fi
mv "$libfile.aside" "$libfile"

# ---- the maintainer: idle release, huge pages asked for ------------------------------

log "idle release, a crash restart"
WARM=$((8 << 20))
start_ "$PRE" "-c dsmpool.size=1GB -c dsmpool.idle_release=2000 -c dsmpool.warm=8MB -c dsmpool.huge_pages=on" ||
    { fail "maintainer: the server did not start: $(tail -3 "$data/log")"; finish; }
hp_free=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
hp_kb=$(awk '/Hugepagesize/ {print $2}' /proc/meminfo)
ps=$(view page_size)
if [ $((hp_free * hp_kb)) -lt $((1024 * 1024)) ]; then
    wait_for 5 grep -q 'LOG:  dsmpool: the pool is in 4 kB pages (dsmpool.huge_pages is on): huge pages asked for, none used: ' "$data/log"
    [ "$ps" = 4096 ] && grep -q 'HINT:  Reserve huge pages beyond what shared memory takes' "$data/log" &&
        pass "huge pages: $hp_free free huge pages: the pool serves in 4 kB pages, and the log says why: $(grep -m1 'dsmpool.huge_pages is on' "$data/log" | sed 's/.*none used: //')" ||
        fail "huge pages: page size $ps; log: $(grep -m2 'huge' "$data/log")"
else
    [ "$ps" -gt 4096 ] && pass "huge pages: $hp_free free huge pages: the pool has pages of $ps bytes" ||
        fail "huge pages: $hp_free free, the pool has pages of $ps bytes: $(grep -m2 'huge' "$data/log")"
fi
# resident: the warm reserve, the name table's granule, and a granule of slack
resident_low() { [ "$(view resident)" -le $((WARM + (4 << 20))) ]; }
warm_ready() { [ "$(view resident)" -ge "$WARM" ]; }
# idle_round GENERATION: the warm reserve made ahead, the join, then resident memory down to it
idle_round() {
    local gen=$1 res up down before
    wait_for 5 warm_ready
    before=$(view resident)
    res=$(join_)
    up=$(view resident)
    wait_for 8 resident_low
    down=$(view resident)
    [ "$before" -ge $WARM ] && pass "maintainer (generation $gen): dsmpool.warm made resident ahead of need ($((before >> 20)) MB before any segment)" ||
        fail "maintainer (generation $gen): $before bytes resident before the join, not the warm reserve's $WARM"
    [ "$res" = "$ROWS" ] && [ "$up" -ge $((down + (8 << 20))) ] && [ "$down" -ge $WARM ] && [ "$down" -le $((WARM + (4 << 20))) ] &&
        pass "maintainer (generation $gen): after the join $((up >> 20)) MB stayed resident, then the maintainer gave it back down to the warm reserve ($((down >> 20)) MB after the idle time)" ||
        fail "maintainer (generation $gen): join $res; resident after it $up, then $down (warm $WARM)"
}
wait_for 5 has_maintainer
idle_round 1

pm=$(pm_pid)
m1=$(maintainer)
as_pg "$B/psql" -h "$sock" -p "$port" -U postgres -d postgres -X -q -A -t -c "select pg_sleep(60)" >/dev/null 2>&1 &
q=$!
victim=""
backend() { pgrep -P "$pm" -f 'postgres: postgres postgres' | head -1; }
has_backend() { [ -n "$(backend)" ]; }
wait_for 5 has_backend
victim=$(backend)
[ -n "$victim" ] && kill -9 "$victim"
wait $q 2>/dev/null
up_() { psql_ "select 1" >/dev/null 2>&1; }
wait_for 30 up_
wait_for 10 has_maintainer
m2=$(maintainer)
gen=$(view generation)
[ -n "$victim" ] && [ "$gen" = 2 ] && grep -q 'terminated by signal 9' "$data/log" &&
    pass "crash: a backend killed (-9), the server came back with a new pool (generation $gen)" ||
    fail "crash: victim '${victim}', generation '$gen'; $(grep -m1 'terminated by signal' "$data/log")"
[ -n "$m2" ] && [ "$m2" != "$m1" ] && [ "$(pool_maps "$m2")" = 1/2 ] &&
    wait_for 5 grep -q 'LOG:  dsmpool: generation 2: a pool of 1024 MB' "$data/log" &&
    pass "crash: a new maintainer (pid $m2, was $m1) holds one pool, the new generation's" ||
    fail "crash: maintainer $m1 -> '$m2', its pool mappings/fds $(pool_maps "${m2:-0}")"
idle_round 2
stop_
# shellcheck disable=SC2012 # a listing for the report
left=$(ls /dev/shm | tr '\n' ' ')
[ -z "$left" ] && pass "after all: nothing in /dev/shm" || fail "after all: left in /dev/shm: $left"

# ---- a reservation beyond this machine's memory, in huge pages -------------------------

# dsmpool.size above MemTotal can never be wholly in huge pages: the pool
# takes them as it makes memory resident, where the free ones hold its
# tables (at most size/256), its start and the default pool's 2 GB to work
# in (issue 35; before, the preload library asked for the whole size in
# huge pages and fell back to 4 kB ones). The join must be served by the
# pool (segments_served), not by PostgreSQL's own /dev/shm.
log "a reservation beyond the machine's memory, in huge pages"
mem_mb=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
big=$((mem_mb + 4096))
want=$((big / 512 + 1024 + 64)) # 2 MiB pages: the tables, 2 GB, and a margin
hp_old=$(cat /proc/sys/vm/nr_hugepages)
if [ "$(awk '/Hugepagesize/ {print $2}' /proc/meminfo)" != 2048 ]; then
    echo "skip: a reservation beyond memory: the default huge page size is not 2 MB"
    hp_old=""
else
    echo $((hp_old + want)) >/proc/sys/vm/nr_hugepages 2>/dev/null || true
    hp_got=$(($(cat /proc/sys/vm/nr_hugepages) - hp_old))
fi
if [ -z "$hp_old" ]; then
    :
elif [ "$hp_got" -lt "$want" ]; then
    echo "skip: a reservation beyond memory: $hp_got of $want huge pages could be reserved"
elif start_ "$PRE" "-c dsmpool.size=${big}MB -c dsmpool.huge_pages=on -c dsmpool.idle_release=2000"; then
    ps=$(view page_size)
    res=$(join_)
    served=$(view segments_served)
    if [ "$ps" = 4096 ] && grep -q 'dsmpool.huge_pages is on.*hugetlb cgroup' "$data/log"; then
        echo "skip: a reservation beyond memory: this process's hugetlb cgroup leaves no room: $(grep -m1 'dsmpool.huge_pages is on' "$data/log")"
    else
        [ "$ps" -gt 4096 ] && [ "$res" = "$ROWS" ] && [ "$(view size)" = $((big << 20)) ] && [ "${served:-0}" -gt 0 ] &&
            pass "a reservation of $big MB on a machine of $mem_mb MB, $hp_got huge pages reserved: the pool is in pages of $ps bytes and served the join's $served segments, right" ||
            fail "a reservation of $big MB: page size $ps, join $res, size $(view size), $served segments served; $(grep -m2 'dsmpool' "$data/log")"
    fi
    stop_
else
    fail "a reservation of $big MB: the server did not start: $(tail -3 "$data/log")"
fi
[ -n "$hp_old" ] && echo "$hp_old" >/proc/sys/vm/nr_hugepages
hp_old=""

# ---- the extension's TAP tests, the preload library's way ------------------------

# t/*.pl (PostgreSQL::Test::Cluster, from the server's PGXS), as run.sh
# api-check runs them on the server with the provider API; here every
# server they start has LD_PRELOAD (DSMPOOL_WAY=preload). Each subtest
# counts.
if [ -f "$("$B/pg_config" --pgxs | sed 's|/src/makefiles/pgxs.mk$||')/src/test/perl/PostgreSQL/Test/Cluster.pm" ]; then
    log "the extension's TAP tests (t/), DSMPOOL_WAY=preload"
    tap="$root/tap"
    mkdir -p "$tap"
    cp -r "$here"/{Makefile,dsmpool.control,dsmpool--1.0.sql,t} "$tap/"
    chown -R "$PGUSER_NAME" "$tap"
    as_pg make -C "$tap" PG_CONFIG="$B/pg_config" installcheck TAP_TESTS=1 DSMPOOL_WAY=preload \
        DSMPOOL_PRELOAD_LIB="$PRE" >"$root/tap.out" 2>&1
    count_tap "$V, the extension's t/*.pl, the preload way" "$root/tap.out"
else
    echo "skip: TAP: $SERVER's development files have no PostgreSQL::Test::Cluster"
fi
finish
