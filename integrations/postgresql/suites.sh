#!/usr/bin/env bash
# PostgreSQL's own tests on a server nobody here built, with the preload
# library: Debian's packaged postgresql-15 (installed if missing; its version
# printed), its source of the same version through deb-src, PATH at the
# packaged binaries, LD_PRELOAD=libdsmpool-preload.so in the postmasters.
#
# Everything runs in a mount namespace of its own whose /dev/shm is a 64 MB
# tmpfs (Docker's default --shm-size), as the server's user dsmpoolpg, as
# stock.sh does.
#
#   installcheck      the main regression schedule (src/test/regress,
#                     parallel_schedule, run as installcheck-parallel runs
#                     it) against the packaged server, with
#                     force_parallel_mode = regress: every parallel-safe
#                     query runs under a Gather, each one a DSM segment
#                     (15,000 segments in a minute on 2 CPUs, against 180
#                     in 10 s without it)
#   test_shm_mq       the test module, built with PGXS against the packaged
#                     server and run with installcheck on the same server
#   013_crash_restart src/test/recovery/t/013_crash_restart.pl with prove,
#                     LD_PRELOAD in its environment (pg_ctl passes it to the
#                     postmasters the test starts), force_parallel_mode =
#                     regress too (TEMP_CONFIG): its crash restarts throw
#                     away pools that served segments
#
# Where the source is not the installed version (below), the tests that
# differ between the two fail on the packaged server with or without the
# library: the main schedule runs first without it, and passes with it when
# every test that fails failed without it too, with the same output.
#
# Each suite's own summary line is printed; each passes when it does, when
# the pool served segments while it ran and when nothing is left in /dev/shm
# after it. The segments the pool served are counted exactly: the library
# makes each name it serves mode 0000 (fchmod), one IN_ATTRIB event of
# inotify on /dev/shm; the other names are PostgreSQL's own (the control
# segment of each generation, anything the pool could not serve).
#
# The source: the source package of the installed version, through deb-src
# entries built from this machine's own apt sources (lib.sh, deb_source_get);
# where the machine's archive serves only the binaries of that version, the
# newest source of the same major it serves, said in the output. Unpacked
# once under PREFIX/suites-15/source and kept.
#
# ABI: nothing of the server is built. pg_regress is the packaged one (its
# pgxs directory); regress.so and test_shm_mq.so are built with PGXS, that is
# with the packaged server's own pg_config, headers (pg_config.h: block size,
# alignment, float8 by value...) and compiler flags, as Debian's own
# autopkgtest builds regress.so (debian/tests/installcheck), and the server
# checks their PG_MODULE_MAGIC when it loads them; autoinc.so and refint.so
# are the package's own.
#
# Usage: suites.sh PREFIX BUILD_DIR   (BUILD_DIR holds libdsmpool-preload.so
# and libdsmpool.so.0). Root, Debian 12. Ends with "N passed, N failed".
# Environment: PG_STOCK_MAJOR (15), DSMPOOL_SUITES_PORT (55300); STOCK_BIN
# and STOCK_SRC: instead of the package, a server built here without patches
# and the source tree it was built from (run.sh stock18-check).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${1:?prefix}
build=$(cd "${2:?build dir}" && pwd)
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
V=${PG_STOCK_MAJOR:-15}
# shellcheck source=lib.sh
source "$here/lib.sh"
[ "$(id -u)" = 0 ] || die "run as root (mount namespaces, apt, the server's user)"

in_small_shm "$0" "$@"
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.0f s", b - a}'; }
t_all=$(now)

missing=""
for p in libipc-run-perl inotify-tools dpkg-dev make gcc; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
    log "installing:$missing"
    # shellcheck disable=SC2086 # a list of packages
    apt_install $missing || { fail "could not install:$missing"; finish; }
fi
stock_server "postgresql-$V" "postgresql-server-dev-$V" || { fail "postgresql-$V could not be installed"; finish; }
if [ "$IS_PACKAGED" = 1 ]; then
    pkgver=$(dpkg-query -W -f '${Version}' "postgresql-$V")
else # a server built here: its own source tree, the same version
    [ -d "${STOCK_SRC:-}/src/test/regress" ] || die "STOCK_BIN needs STOCK_SRC, the source tree it was built from"
    pkgver=$("$B/postgres" --version | awk '{print $NF}')
fi
echo "server: $SERVER"
need_user

root="$prefix/suites-$V"
mkdir -p "$root"
# the packaged pg_regress: pgxs/src/makefiles/pgxs.mk -> pgxs/src/test/regress/pg_regress
PG_REGRESS=$(dirname "$(dirname "$("$B/pg_config" --pgxs)")")/test/regress/pg_regress
[ -x "$PG_REGRESS" ] || { fail "no pg_regress in the server's pgxs ($PG_REGRESS)"; finish; }

# ---- the source, once --------------------------------------------------------------

t0=$(now)
src="$root/source"
if [ "$IS_PACKAGED" = 0 ]; then
    srcver=$pkgver
    log "source: $STOCK_SRC, the tree $B was built from"
elif [ -d "$src/tree/src/test/regress" ] && [ "$(cut -d' ' -f1 "$src/version" 2>/dev/null)" = "$pkgver" ]; then
    srcver=$(cut -d' ' -f2 "$src/version")
    log "source: postgresql-$V $srcver, cached in $src"
else
    rm -rf "$src"
    mkdir -p "$src"
    srcver=$(deb_source_get "postgresql-$V" "$pkgver" "$src") || { fail "the source of postgresql-$V could not be fetched"; finish; }
    echo "$pkgver $srcver" >"$src/version"
    log "source: postgresql-$V $srcver fetched and unpacked in $(since "$t0")"
fi
tree="$src/tree"
if [ "$IS_PACKAGED" = 0 ]; then
    tree=$STOCK_SRC
    echo "source: PostgreSQL $srcver, the tree the server was built from ($tree)"
elif [ "$srcver" = "$pkgver" ]; then
    echo "source: postgresql-$V $srcver (the installed version), Debian's patches applied"
else
    echo "source: postgresql-$V $srcver, Debian's patches applied -- NOT the installed $pkgver: this machine's archive serves only the binaries of $pkgver, and the tests are those of $srcver"
fi

# ---- what the suites load, built against the packaged server ---------------------

t0=$(now)
run="$root/run"
rm -rf "$run"
mkdir -p "$run/lib" "$run/regress" "$run/regress-build" "$run/tap/src/test" "$root/sock"
cp "$tree/src/test/regress/regress.c" "$run/regress-build/"
# Debian's debian/tests/Makefile.regress: regress.so through the server's PGXS
# shellcheck disable=SC2016 # make's own syntax
printf 'MODULE_big = regress\nOBJS = regress.o\nPGXS := $(shell %s --pgxs)\ninclude $(PGXS)\n' "$B/pg_config" \
    >"$run/regress-build/Makefile"
cp -r "$tree/src/test/modules/test_shm_mq" "$run/test_shm_mq"
cp -r "$tree/src/test/perl" "$tree/src/test/recovery" "$run/tap/src/test/"
pkglib=$("$B/pg_config" --pkglibdir)
sharedir=$("$B/pg_config" --sharedir)
for m in autoinc refint; do ln -s "$pkglib/$m.so" "$run/lib/$m.so"; done
chown -R "$PGUSER_NAME" "$run" "$root/sock"
chown "$PGUSER_NAME" "$root"
pgxs_make() { as_pg make -s -C "$1" USE_PGXS=1 PG_CONFIG="$B/pg_config" with_llvm=no "${@:2}"; }
if pgxs_make "$run/regress-build" >"$run/regress-build.log" 2>&1 && cp "$run/regress-build/regress.so" "$run/lib/"; then
    pass "regress.so built with PGXS against the server ($("$B/pg_config" --includedir-server))"
else
    fail "regress.so could not be built: $(tail -3 "$run/regress-build.log")"
fi
# test_shm_mq goes into the packaged server's directories (as check.sh puts the
# extension dsmpool there); taken out at the end unless it was there before
shm_mq_ours=0
[ -e "$sharedir/extension/test_shm_mq.control" ] || shm_mq_ours=1
if pgxs_make "$run/test_shm_mq" >"$run/test_shm_mq-build.log" 2>&1 &&
    make -s -C "$run/test_shm_mq" USE_PGXS=1 PG_CONFIG="$B/pg_config" with_llvm=no install >>"$run/test_shm_mq-build.log" 2>&1; then
    pass "test_shm_mq built with PGXS against the server and installed into it"
else
    fail "test_shm_mq could not be built: $(tail -3 "$run/test_shm_mq-build.log")"
fi
log "built what the suites load in $(since "$t0")"

# ---- the server and the pool's count ------------------------------------------------

lib="$root/lib"
mkdir -p "$lib"
cp -L "$build/libdsmpool-preload.so" "$build/libdsmpool.so.0" "$lib/"
chmod -R a+rX "$lib"
PRE="$lib/libdsmpool-preload.so"
sock="$root/sock"
data="$root/data"
port=${DSMPOOL_SUITES_PORT:-55300}
# force_parallel_mode (debug_parallel_query from 16): a Gather over every
# parallel-safe plan, hidden from EXPLAIN and errors, as the build farm's
# animals run it; the main schedule's own parallel tests set the rest
PARALLEL="force_parallel_mode = regress"
[ "$V" -ge 16 ] && PARALLEL="debug_parallel_query = regress"

watcher="" watch_log=""
watch_start() { # watch_start log: inotify on /dev/shm until watch_stop
    watch_log=$1
    inotifywait -m -e create -e attrib --format '%e %f' /dev/shm >"$watch_log" 2>"$watch_log.err" &
    watcher=$!
    for _ in $(seq 1 50); do grep -q 'Watches established' "$watch_log.err" && return 0; sleep 0.1; done
    return 1
}
watch_stop() { # prints "served made": pool names (fchmod 0000) and all PostgreSQL.* names made
    sleep 0.2
    [ -n "$watcher" ] && kill "$watcher" 2>/dev/null && wait "$watcher" 2>/dev/null
    watcher=""
    echo "$(grep -c '^ATTRIB PostgreSQL\.' "$watch_log") $(grep -c '^CREATE PostgreSQL\.' "$watch_log")"
}
# shellcheck disable=SC2010 # counts the descriptors that name the pool
pool_maps() { echo "$(grep -c 'memfd:dsmpool' "/proc/$1/maps" 2>/dev/null)/$(ls -l "/proc/$1/fd" 2>/dev/null | grep -c 'memfd:dsmpool')"; }
shm_left() { find /dev/shm -mindepth 1 -maxdepth 1 -printf '%f %m %s %b; ' 2>/dev/null; }
stop_() { as_pg "$B/pg_ctl" -D "$data" -w -t 120 stop -m fast >/dev/null 2>&1 || as_pg "$B/pg_ctl" -D "$data" stop -m immediate >/dev/null 2>&1; }
cleanup() {
    [ -f "$data/postmaster.pid" ] && stop_
    [ -n "$watcher" ] && kill "$watcher" 2>/dev/null
    if [ "$shm_mq_ours" = 1 ] && [ -d "$run/test_shm_mq" ]; then
        make -s -C "$run/test_shm_mq" USE_PGXS=1 PG_CONFIG="$B/pg_config" with_llvm=no uninstall >/dev/null 2>&1
    fi
    return 0
}
trap cleanup EXIT
# served_ok label served made: the pool served every segment made while the
# suite ran (the server's control segment was made before)
served_ok() {
    local label=$1 s=$2 m=$3
    echo "$label: $m PostgreSQL.* names made in /dev/shm, $s of them served by the pool, $((m - s)) PostgreSQL's own"
    [ "$s" -gt 0 ] && [ "$s" = "$m" ] && pass "$label: the pool served all $s segments made" ||
        fail "$label: the pool served $s of $m segments made"
}

log "server: initdb, $PARALLEL, LD_PRELOAD for the postmaster"
rm -rf "$data"
as_pg "$B/initdb" -D "$data" -U postgres -E UTF8 --locale=C --no-sync >"$root/initdb.log" 2>&1 ||
    { fail "initdb failed: $(tail -3 "$root/initdb.log")"; finish; }
{
    echo "port = $port"
    echo "unix_socket_directories = '$sock'"
    echo "listen_addresses = ''"
    echo "logging_collector = off"
    echo "fsync = off"                  # speed; nothing here tests durability
    echo "max_prepared_transactions = 2" # as pg_regress's own temporary server
    echo "$PARALLEL"
} >>"$data/postgresql.conf"
start_() { as_pg env ${1:+LD_PRELOAD=$1} "$B/pg_ctl" -D "$data" -l "$data/log" -w -t 120 start >/dev/null; }

# the main schedule against the running server, as installcheck-parallel runs
# it: regress_run outdir (the output in outdir.out)
regress_run() {
    rm -rf "$1" && mkdir -p "$1" && chown "$PGUSER_NAME" "$1"
    as_pg timeout 900 "$PG_REGRESS" --inputdir="$tree/src/test/regress" --outputdir="$1" \
        --bindir="$B" --dlpath="$run/lib" --max-concurrent-tests=20 \
        --schedule="$tree/src/test/regress/parallel_schedule" \
        --host="$sock" --port="$port" --user=postgres >"$1.out" 2>&1
}
summary_of() { # pg_regress's own summary line
    grep -E '(All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests failed)' "$1" | head -1 | sed 's/^[ #]*//; s/ *$//'
}
failed_in() { # the tests that failed (15's lines, and 16's TAP ones)
    sed -nE 's/^(test )? *([^ ]+) +\.\.\. FAILED.*/\2/p; s/^not ok [0-9]+ +[-+] ([^ ]+) .*/\1/p' "$1" | sort
}
# count_regress label output diffs: pg_regress's summary line; passes when all passed
count_regress() {
    local label=$1 out=$2 summary
    summary=$(summary_of "$out")
    echo "$label: ${summary:-no summary line (see $out)}"
    if grep -q '^All [0-9]* tests passed' <<<"$summary"; then
        pass "$label: ${summary%.}"
    else
        fail "$label: ${summary:-did not complete}"
        grep -E 'FAILED' "$out" | head -20
        [ -f "$3" ] && head -60 "$3"
    fi
}

# ---- installcheck: the main regression schedule ----------------------------------

# Tests of another version than the server's fail where the two differ; then
# the same schedule runs first without the library, and the library's run is
# judged against it: what fails must fail without it too, with the same output.
stock_failed="" t_stock=""
if [ "$srcver" != "$pkgver" ]; then
    log "installcheck without the library: the tests are $srcver's, the server $pkgver"
    t0=$(now)
    start_ || { fail "the server did not start: $(tail -3 "$data/log")"; finish; }
    regress_run "$run/regress-stock"
    stop_
    t_stock=$(since "$t0")
    echo "installcheck without the library ($t_stock): $(summary_of "$run/regress-stock.out")"
    stock_failed=$(failed_in "$run/regress-stock.out")
    # shellcheck disable=SC2086,SC2116 # the names on one line
    [ -n "$stock_failed" ] && echo "  failing without the library: $(echo $stock_failed)"
    rm -f "$root/log.stock" && mv "$data/log" "$root/log.stock"
    [ -z "$(shm_left)" ] || fail "installcheck without the library left in /dev/shm: $(shm_left)"
fi

log "installcheck: src/test/regress, parallel_schedule, LD_PRELOAD for the postmaster"
start_ "$PRE" || { fail "the server did not start: $(tail -3 "$data/log")"; finish; }
pm=$(head -1 "$data/postmaster.pid")
[ "$(pool_maps "$pm")" = 1/2 ] && pass "the postmaster (pid $pm) holds the pool (LD_PRELOAD=$PRE)" ||
    fail "the postmaster's pool mappings/fds: $(pool_maps "$pm")"
t0=$(now)
watch_start "$root/installcheck.inotify" || fail "installcheck: inotify on /dev/shm could not start"
regress_run "$run/regress"
t_ic=$(since "$t0")
read -r s m < <(watch_stop)
summary=$(summary_of "$run/regress.out")
echo "installcheck ($t_ic): ${summary:-no summary line (see $run/regress.out)}"
if grep -q '^All [0-9]* tests passed' <<<"$summary"; then
    pass "installcheck (main schedule): ${summary%.}"
elif [ -n "$summary" ] && [ "$srcver" != "$pkgver" ]; then
    unlike=""
    for t in $(failed_in "$run/regress.out"); do
        grep -qxF "$t" <<<"$stock_failed" && cmp -s "$run/regress/results/$t.out" "$run/regress-stock/results/$t.out" ||
            unlike="$unlike $t"
    done
    if [ -z "$unlike" ]; then
        pass "installcheck (main schedule): ${summary%.}, each as without the library, with the same output (the tests of $srcver on $pkgver)"
    else
        fail "installcheck (main schedule): ${summary%.}; unlike without the library:$unlike"
        for t in $unlike; do diff -u "$run/regress-stock/results/$t.out" "$run/regress/results/$t.out" 2>&1 | head -30; done
    fi
else
    fail "installcheck (main schedule): ${summary:-did not complete}"
    grep -E 'FAILED' "$run/regress.out" | head -20
    head -60 "$run/regress/regression.diffs" 2>/dev/null
fi
served_ok "installcheck" "$s" "$m"

# ---- test_shm_mq ----------------------------------------------------------------------

log "test_shm_mq: installcheck"
t0=$(now)
watch_start "$root/test_shm_mq.inotify" || fail "test_shm_mq: inotify on /dev/shm could not start"
as_pg timeout 300 make -s -C "$run/test_shm_mq" USE_PGXS=1 PG_CONFIG="$B/pg_config" with_llvm=no installcheck \
    PGHOST="$sock" PGPORT="$port" PGUSER=postgres >"$root/test_shm_mq.out" 2>&1
t_mq=$(since "$t0")
read -r s m < <(watch_stop)
count_regress "test_shm_mq ($t_mq)" "$root/test_shm_mq.out" "$run/test_shm_mq/regression.diffs"
served_ok "test_shm_mq" "$s" "$m"

pm2=$(head -1 "$data/postmaster.pid")
[ "$pm2" = "$pm" ] && ! grep -q 'terminated by signal' "$data/log" && pass "the server ran both suites with no crash" ||
    fail "the server crashed during the suites: $(grep -m1 'terminated by signal' "$data/log")"
stop_
left=$(shm_left)
[ -z "$left" ] && pass "installcheck, test_shm_mq: the stop left nothing in /dev/shm" ||
    fail "installcheck, test_shm_mq: left in /dev/shm (name mode size blocks): $left"

# ---- TAP: 013_crash_restart -----------------------------------------------------------

log "TAP: src/test/recovery/t/013_crash_restart.pl"
t0=$(now)
printf '%s\n' "$PARALLEL" >"$run/tap/temp.conf"
chmod a+r "$run/tap/temp.conf"
watch_start "$root/tap.inotify" || fail "013_crash_restart: inotify on /dev/shm could not start"
(cd "$run/tap/src/test/recovery" && as_pg timeout 600 env PATH="$B:$PATH" LD_PRELOAD="$PRE" \
    TESTDIR="$run/tap/src/test/recovery" PG_REGRESS="$PG_REGRESS" TEMP_CONFIG="$run/tap/temp.conf" \
    prove -I ../perl/ -I . t/013_crash_restart.pl) >"$root/tap.out" 2>&1
t_tap=$(since "$t0")
read -r s m < <(watch_stop)
# the primary's log: tmp_check/log/ up to 16, log/ from 17 (TESTLOGDIR's default)
# shellcheck disable=SC2012 # the first of two places
tlog=$(ls "$run"/tap/src/test/recovery/{tmp_check/log,log}/*013*primary*.log 2>/dev/null | head -1)
restarts=$(grep -c 'all server processes terminated; reinitializing' "$tlog" 2>/dev/null)
grep -E '^(t/013|Files=|Result:)' "$root/tap.out" | sed 's/^/  /'
ntests=$(sed -nE 's/^Files=[0-9]+, Tests=([0-9]+),.*/\1/p' "$root/tap.out")
if grep -q '^Result: PASS' "$root/tap.out" && [ "${restarts:-0}" -gt 0 ]; then
    pass "013_crash_restart ($t_tap): all $ntests subtests passed, $restarts crash restarts"
elif grep -q '^Result: PASS' "$root/tap.out"; then
    fail "013_crash_restart ($t_tap): passed, but its primary's log (${tlog:-not found}) shows no crash restart"
else
    fail "013_crash_restart ($t_tap): $(grep -E '^(not ok|Result:|Failed)' "$root/tap.out" | head -5 | tr '\n' ' ')"
fi
# PostgreSQL's own names here: each generation's control segment, and those of
# the standalone backends initdb runs (no pool there)
echo "013_crash_restart: $m PostgreSQL.* names made in /dev/shm, $s of them served by the pool, $((m - s)) PostgreSQL's own (the control segments of initdb's backends and of $((${restarts:-0} + 1)) generations)"
[ "$s" -gt 0 ] && pass "013_crash_restart: the pool served $s segments in the postmaster's generations" ||
    fail "013_crash_restart: the pool served no segment"
left=$(shm_left)
[ -z "$left" ] && pass "013_crash_restart: nothing left in /dev/shm" ||
    fail "013_crash_restart: left in /dev/shm (name mode size blocks): $left"

echo "time: $(since "$t_all") in all (${t_stock:+installcheck without the library $t_stock, }installcheck $t_ic, test_shm_mq $t_mq, 013_crash_restart $t_tap), $(nproc) CPUs"
finish
