#!/usr/bin/env bash
# PostgreSQL 18 on dsmpool: fetch, patch, build, test, measure.
#
#   run.sh build [PREFIX]      fetch PostgreSQL 18's source through apt (a
#                              deb-src entry of its own, built from this
#                              machine's apt sources and removed after), build
#                              dsmpool and the patched server (--enable-cassert,
#                              --enable-tap-tests) into PREFIX
#   run.sh check [PREFIX]      three ways -- the pool serving, a 4 MB pool, a
#                              full pool (everything falls back) -- PostgreSQL's
#                              main regression schedule (make check), the test
#                              modules that make DSM and DSA (test_dsa,
#                              test_dsm_registry, test_shm_mq, test_radixtree,
#                              test_tidstore) and the TAP crash-restart test;
#                              then the operator's view, the elastic pool
#                              (its settings and maintainer), crash and
#                              shutdown tests; ends with "N passed, N failed"
#   run.sh api-check [PREFIX]  PostgreSQL 18 with the provider API patch
#                              alone (provider/: RegisterDsmProvider and
#                              its test module test_dsm_provider): the
#                              module's TAP test, the extension dsmpool's
#                              (extension/t: the pool through the API, no
#                              LD_PRELOAD), then check's suites with
#                              the test provider serving; EXEC_BACKEND=1:
#                              the same built -DEXEC_BACKEND, where it must
#                              decline each segment; AREAS=1: with the
#                              optional provider/areas patch too (DSA areas
#                              as dsmpool areas, the server linked with
#                              libdsmpool), check's suites with the extension
#                              dsmpool serving (run.sh api-build: the build
#                              alone)
#   run.sh container [PREFIX]  the seed query in a 64 MB /dev/shm (Docker's
#                              default): stock, stock with min_dynamic_shared_
#                              memory, dsmpool; a table (release builds)
#   run.sh bench [PREFIX]      the benchmarks (bench.py): stock against patched
#                              and against stock with the preload library,
#                              release builds; results in bench/results/
#   run.sh stock18-check [PREFIX] what of stock-check is not Debian's own
#                              (all but pg_ctlcluster), on PostgreSQL 18
#                              built here without patches (the benchmarks'
#                              stock build), its regression tests from
#                              that build's tree
#   run.sh build-release [PREFIX] the release builds bench and container use
#                              (patched, stock with amcheck and the
#                              extension dsmpool)
#   run.sh bench-small [PREFIX] the benchmarks in their smallest form (every
#                              part, seconds each: that they run, not what
#                              they say; the patched server is build's, the
#                              stock one the release build; results under
#                              PREFIX/bench-small)
#   run.sh stock-check [PREFIX] the preload library (libdsmpool-preload.so) on
#                              Debian's own postgresql-15 package, no rebuild:
#                              lifecycle (initdb, single-user mode, crash
#                              restarts, a killed postmaster, two clusters,
#                              pg_ctlcluster's environment file, a parallel
#                              index build) and the container table
#                              in a 64 MB /dev/shm (stock.sh); then the
#                              extension dsmpool built with PGXS and judged
#                              there (extension/check.sh); PostgreSQL's own
#                              installcheck, test_shm_mq and 013_crash_restart
#                              from the package's source (suites.sh); the
#                              container table in a real podman container
#                              (podman.sh); ends with "N passed, N failed"
#                              summed
#
# PREFIX defaults to integrations/postgresql/work. Run as root on Debian 12
# (it installs what it needs); the server runs as the user "dsmpoolpg",
# made if missing. DSMPOOL_PG_PORT (54329) is the port of the servers it
# starts.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cmd=${1:-}
prefix=${2:-$here/work}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
PG_MAJOR=18
PG_PINNED=18.6-3 # the version measured in the issue; the newest one served if it is gone
PG_SUITE=sid     # the Debian suite whose deb-src serves postgresql-18
jobs=$(nproc)
MODULES="test_dsa test_dsm_registry test_shm_mq test_radixtree test_tidstore"

# shellcheck source=lib.sh
source "$here/lib.sh"

# ---- build --------------------------------------------------------------------

install_deps() {
    local pkgs="build-essential perl pkg-config libreadline-dev zlib1g-dev bison flex libipc-run-perl
        procps bzip2 patch util-linux passwd" missing="" p
    for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
    "$repo/tools/deps.sh"
    if [ -n "$missing" ]; then
        log "installing:$missing"
        # shellcheck disable=SC2086 # a list of packages
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
    fi
}

# The orig tarball of postgresql-18 from Debian's deb-src (unstable), through a
# sources file of our own; apt's configuration and lists are left as they were.
fetch_source() {
    local dl="$prefix/download"
    if ls "$dl"/postgresql-${PG_MAJOR}_*.orig.tar.bz2 >/dev/null 2>&1; then return; fi
    [ "$(id -u)" = 0 ] || die "fetching the source needs root (apt)"
    mkdir -p "$dl"
    local uri key
    read -r uri key < <(archive_of_machine) || die "no Debian archive found in this machine's apt sources"
    [ "$key" != - ] || key=/usr/share/keyrings/debian-archive-keyring.gpg
    local src=/etc/apt/sources.list.d/dsmpool-postgresql-src.sources
    local before
    before=$(ls /var/lib/apt/lists/)
    printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
        "$uri" "$PG_SUITE" "$key" >"$src"
    log "PostgreSQL source: deb-src $uri $PG_SUITE (this machine's archive)"
    local ok=0
    if apt-get update -qq -o Dir::Etc::sourcelist="$src" -o Dir::Etc::sourceparts=- \
        -o APT::Get::List-Cleanup=0 >&2; then
        local versions v
        versions="$PG_PINNED $(apt-cache showsrc postgresql-$PG_MAJOR 2>/dev/null | awk '/^Version:/ {print $2}' | sort -rV)"
        for v in $versions; do
            if (cd "$dl" && apt-get source -qq --download-only "postgresql-$PG_MAJOR=$v" >&2 2>/dev/null); then
                log "PostgreSQL source: postgresql-$PG_MAJOR $v"
                ok=1
                break
            fi
        done
    fi
    rm -f "$src"
    local f
    # shellcheck disable=SC2045 # the lists' names, compared with the names before
    for f in $(ls /var/lib/apt/lists/); do
        echo "$before" | grep -qxF "$f" || rm -f "/var/lib/apt/lists/$f"
    done
    [ $ok = 1 ] || die "no postgresql-$PG_MAJOR source could be fetched from $uri ($PG_SUITE)"
}

unpack() { # unpack [dir]: the pristine source into $prefix/$1
    local to="$prefix/$1"
    rm -rf "$to"
    mkdir -p "$to"
    tar -xjf "$prefix"/download/postgresql-${PG_MAJOR}_*.orig.tar.bz2 -C "$to" --strip-components=1
}

# what every build here starts with: the packages, the server's user, the
# source, dsmpool (incremental: the library, the preload library, the header)
prepare() {
    install_deps
    need_user
    fetch_source
    build_dsmpool
}

build_dsmpool() {
    log "dsmpool: build and install into $prefix/dsmpool"
    meson setup "$prefix/dsmpool-build" "$repo" --buildtype=release --prefix="$prefix/dsmpool" \
        -Dtests=disabled -Dbench=disabled --wipe >/dev/null 2>&1 ||
        meson setup "$prefix/dsmpool-build" "$repo" --buildtype=release --prefix="$prefix/dsmpool" \
            -Dtests=disabled -Dbench=disabled >/dev/null
    ninja -C "$prefix/dsmpool-build" install >/dev/null
}

patch_tree() { # patch_tree dir: the patches of integrations/postgresql/patches
    local p
    for p in "$here"/patches/*.patch; do
        patch -s -d "$1" -p1 <"$p" || die "patch $(basename "$p") does not apply"
    done
}

# configure_and_make tree install-dir [with-dsmpool] [for-tests]: the server
# and what the tests and benchmarks use (no docs, no contrib but pg_prewarm)
configure_and_make() {
    local tree=$1 inst=$2 with=${3:-} tests=${4:-}
    local cppflags="" ldflags="" libs="" extra=""
    if [ -n "$with" ]; then
        local pc
        pc=$(dirname "$(find "$prefix/dsmpool" -name dsmpool.pc | head -1)")
        local libdir
        libdir=$(PKG_CONFIG_PATH=$pc pkg-config --variable=libdir dsmpool)
        cppflags=$(PKG_CONFIG_PATH=$pc pkg-config --cflags dsmpool)
        ldflags="-L$libdir -Wl,-rpath,$libdir"
        libs="-ldsmpool"
    fi
    [ -n "$tests" ] && extra="--enable-cassert --enable-tap-tests"
    # shellcheck disable=SC2086 # extra is a list of options
    (cd "$tree" &&
        ./configure --prefix="$inst" --without-icu --without-llvm $extra CPPFLAGS="$cppflags ${EXTRA_CPPFLAGS:-}" \
            LDFLAGS="$ldflags" LIBS="$libs" >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
        nice make -s -j"$jobs" >make.log 2>&1 || { grep -E "error|Error" make.log | head -30; exit 1; }
        make -s install >/dev/null 2>&1
        make -s -C contrib/pg_prewarm install >/dev/null 2>&1
        if [ -n "$tests" ]; then
            for m in $MODULES; do make -s -C "src/test/modules/$m" install >/dev/null 2>&1 || exit 1; done
        fi) || die "building $tree failed"
}

# What the patched build depends on: the source (its tarball's name carries
# the version), the patches, this script and lib.sh, the header the server
# compiles against, the compiler. The library itself is rebuilt and installed
# on every run (build_dsmpool), and the server finds it there (rpath).
build_key() {
    {
        # shellcheck disable=SC2012 # one file of a known name
        basename "$(ls "$prefix"/download/postgresql-${PG_MAJOR}_*.orig.tar.bz2 | head -1)"
        cat "$here"/patches/*.patch "$here/run.sh" "$here/lib.sh" "$repo/include/dsmpool.h"
        cc --version | head -1
    } | sha256sum | cut -c1-16
}

do_build() {
    prepare
    # A build cache: the prefix (tools/test.sh keeps one outside the clone)
    # holds the patched build and the key it was made with; the same key,
    # and the build is taken as it is. Said either way.
    local key
    key=$(build_key)
    if [ -x "$prefix/patched/bin/postgres" ] && [ -d "$prefix/src-patched" ] &&
        [ "$(cat "$prefix/patched.key" 2>/dev/null)" = "$key" ]; then
        log "PostgreSQL build cache: hit ($key, $prefix)"
        return 0
    fi
    log "PostgreSQL build cache: miss ($key, $prefix): building"
    rm -f "$prefix/patched.key"
    log "PostgreSQL $PG_MAJOR: unpack, patch (integrations/postgresql/patches), build into $prefix/patched"
    unpack src-patched
    patch_tree "$prefix/src-patched"
    rm -rf "$prefix/patched"
    configure_and_make "$prefix/src-patched" "$prefix/patched" with tests
    [ "$(id -u)" = 0 ] && chown -R "$PGUSER_NAME" "$prefix/src-patched"
    echo "$key" >"$prefix/patched.key"
    log "built: $prefix/patched/bin/postgres"
}

# release builds, for the container table and the benchmarks
build_release() {
    prepare
    if [ ! -x "$prefix/bench-pool/bin/postgres" ]; then
        log "PostgreSQL $PG_MAJOR patched, release build: $prefix/bench-pool"
        unpack src-bench-pool
        patch_tree "$prefix/src-bench-pool"
        configure_and_make "$prefix/src-bench-pool" "$prefix/bench-pool" with
    fi
    build_stock_release
}

# stock PostgreSQL 18, release build, without patches: the benchmarks' stock
# server and stock18-check's, with amcheck and the extension dsmpool
build_stock_release() {
    if [ ! -x "$prefix/bench-stock/bin/postgres" ]; then
        log "PostgreSQL $PG_MAJOR stock, release build: $prefix/bench-stock"
        unpack src-bench-stock
        configure_and_make "$prefix/src-bench-stock" "$prefix/bench-stock"
    fi
    # amcheck, for stock.sh's parallel index build (stock18-check)
    [ -f "$("$prefix/bench-stock/bin/pg_config" --pkglibdir)/amcheck.so" ] ||
        make -s -C "$prefix/src-bench-stock/contrib/amcheck" install >/dev/null 2>&1 ||
        die "amcheck did not build in $prefix/src-bench-stock"
    # the extension dsmpool, with PGXS, into the stock build (the preload
    # configurations), from a copy of its source (the clone stays clean)
    ext_install "$prefix/ext-build" "$prefix/bench-stock/bin/pg_config" ||
        die "the extension dsmpool did not build against $prefix/bench-stock"
}

# ext_install DIR PG_CONFIG: the extension dsmpool, with PGXS, from a copy
# of its source and TAP tests in DIR (the clone stays clean), into that
# server; the make's last lines where it fails
ext_install() {
    local d=$1
    rm -rf "$d" && mkdir -p "$d"
    cp -r "$here"/extension/{Makefile,dsmpool.c,dsmpool.control,dsmpool--1.0.sql,t} "$d/"
    make -s -C "$d" PG_CONFIG="$2" PG_CPPFLAGS="-I$repo/include -I$here/preload" install >"$d/make.log" 2>&1 ||
        { tail -20 "$d/make.log"; return 1; }
}

# ---- check ------------------------------------------------------------------------

passed=0
failed=0
temp_installed=0

# count what pg_regress says: count label output-file
count_regress() {
    local label=$1 out=$2 summary n f
    summary=$(grep -E '^# (All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests failed)' "$out" | head -1 | sed 's/^# *//')
    echo "PostgreSQL ($label): ${summary:-no summary (see $out)}"
    n=$(echo "$summary" | sed -nE 's/All ([0-9]+) tests passed.*/\1/p')
    if [ -n "$n" ]; then
        passed=$((passed + n))
    else
        f=$(echo "$summary" | sed -nE 's/([0-9]+) of ([0-9]+) tests failed.*/\1 \2/p')
        if [ -n "$f" ]; then
            # shellcheck disable=SC2086 # the fields of f
            set -- $f
            failed=$((failed + $1))
            passed=$((passed + $2 - $1))
            grep -E '^not ok' "$out" | head -20
        else
            fail "$label did not complete"
            tail -20 "$out"
        fi
    fi
}

# What a postmaster log says of the pool, and whether the first fallback was
# logged once with its hint (want: 0 or 1 such lines).
pool_log() { # pool_log label log want-fallback-lines
    local label=$1 plog=$2 want=$3 n
    grep -h "dsmpool: [0-9]* segments served\|dsmpool: pool of" "$plog" 2>/dev/null | sed 's/.*LOG: */  /' || true
    n=$(grep -c "dsmpool: the pool could not serve" "$plog" 2>/dev/null || true)
    if [ "$want" = 0 ]; then
        [ "${n:-0}" = 0 ] && pass "$label: the pool served everything, no fallback logged" ||
            fail "$label: $n fallback lines in a pool that should serve everything"
    elif [ "${n:-0}" = 1 ] && grep -A2 "dsmpool: the pool could not serve" "$plog" | grep -q 'HINT:.*"dsmpool_size"'; then
        pass "$label: the first fallback was logged once, with a hint to raise dsmpool_size"
    else
        fail "$label: ${n:-0} fallback lines, want 1 with a HINT naming dsmpool_size"
    fi
}

# the pool's view, after the test modules ran
pool_view() {
    echo "  pg_dsmpool: $(sql "select format('%s segments, %s areas and %s named segments from the pool; %s segments and %s areas fell back; peak bytes in OS segments: %s of segments, %s of areas', pool_segments, pool_areas, pool_named_segments, fallback_segments, fallback_areas, fallback_segment_bytes_peak, fallback_area_bytes_peak) from pg_dsmpool")"
}

# regress name want-fallback conf-lines...: the main schedule, the test
# modules (installcheck against one server) and the TAP crash-restart test,
# of the tree reg_tree, each log judged by reg_log (label log want), the
# server's view shown by reg_view after the modules
reg_tree=""
reg_log=pool_log
reg_view=pool_view
reg_extra_install=""
regress() {
    local name=$1 want=$2
    shift 2
    local conf="$prefix/regress-$name.conf" tree=${reg_tree:-$prefix/src-patched} before left
    printf '%s\n' "$@" >"$conf"
    chmod 644 "$conf"
    local noinst="" # the first run installs the tree into tmp_install, the others use it
    [ "$temp_installed" = 1 ] && noinst="NO_TEMP_INSTALL=1"
    temp_installed=1

    log "regression suite (make check), $name: $*"
    before=$(shm_objects)
    local out="$prefix/regress-$name.out"
    as_pg make -C "$tree" check TEMP_CONFIG="$conf" $noinst ${reg_extra_install:+EXTRA_INSTALL=$reg_extra_install} \
        >"$out" 2>&1 || true
    count_regress "$name" "$out"
    local plog="$tree/src/test/regress/log/postmaster.log"
    "$reg_log" "$name: make check" "$plog" "$want"
    cp "$plog" "$prefix/regress-$name.postmaster.log" 2>/dev/null || true
    left=$(shm_new "$before")
    [ -z "$left" ] && pass "$name: make check left nothing in /dev/shm" || fail "$name: make check left in /dev/shm: $left"

    log "test modules ($MODULES), $name"
    before=$(shm_objects)
    server_init "$pgbin" "$@" "max_worker_processes = 16"
    server_start "$pgbin"
    local m
    for m in $MODULES; do
        out="$prefix/module-$name-$m.out"
        as_pg make -C "$tree/src/test/modules/$m" installcheck PGHOST="$sock" PGPORT="$port" PGUSER=postgres \
            >"$out" 2>&1 || true
        count_regress "$name, $m" "$out"
    done
    "$reg_view"
    server_stop "$pgbin"
    "$reg_log" "$name: modules" "$data/log" "$want"
    cp "$data/log" "$prefix/modules-$name.log"
    left=$(shm_new "$before")
    [ -z "$left" ] && pass "$name: the modules left nothing in /dev/shm" || fail "$name: the modules left in /dev/shm: $left"

    log "TAP: src/test/recovery/t/013_crash_restart.pl, $name"
    before=$(shm_objects)
    out="$prefix/tap-$name.out"
    as_pg make -C "$tree/src/test/recovery" check PROVE_TESTS=t/013_crash_restart.pl NO_TEMP_INSTALL=1 \
        TEMP_CONFIG="$conf" >"$out" 2>&1 || true
    count_tap "$name, 013_crash_restart" "$out"
    grep -h "dsmpool: after the crash\|test_dsm_provider: generation" "$tree"/src/test/recovery/tmp_check/log/*013*.log 2>/dev/null |
        sed 's/.*LOG: */  /' | head -3 || true
    left=$(shm_new "$before")
    [ -z "$left" ] && pass "$name: 013_crash_restart left nothing in /dev/shm" ||
        fail "$name: 013_crash_restart left in /dev/shm: $left"
}

# The seed table, smaller for CI: rows
seed_table() {
    sql "set client_min_messages = warning; drop table if exists t;
        create table t (i int); insert into t select generate_series(1, $1); analyze t;"
}

JOIN="set work_mem = '256MB'; set max_parallel_workers_per_gather = 2; set parallel_setup_cost = 0;
set parallel_tuple_cost = 0; set min_parallel_table_scan_size = 0;
select count(*) from t t1 join t t2 using (i);"

# What an operator sees: pg_dsmpool (pg_get_dsmpool_stats()), readable by
# pg_read_all_stats only, a row with a pool and none without; with a pool
# too small for a hash join, the fallbacks counted there and the first one
# logged once.
view_test() {
    log "operator's view: pg_dsmpool, and the LOG line of the first fallback"
    local before left
    before=$(shm_objects)
    server_init "$pgbin" "dsmpool_size = 0"
    server_start "$pgbin"
    [ "$(sql "select count(*) from pg_dsmpool")" = 0 ] && pass "view: no pool, no row in pg_dsmpool" ||
        fail "view: pg_dsmpool has a row without a pool"
    server_stop "$pgbin"
    server_init "$pgbin" "dsmpool_size = 8MB" "dsmpool_huge_pages = off"
    server_start "$pgbin"
    local idle
    idle=$(sql "select format('%s|%s|%s|%s', size, free, fallback_segments + fallback_areas, fallback_area_bytes_peak + fallback_segment_bytes_peak) from pg_dsmpool")
    IFS='|' read -r size free0 fb0 peak0 <<<"$idle"
    [ "${size:-0}" -gt 0 ] && [ "$free0" -le "$size" ] && [ "$fb0" = 0 ] && [ "$peak0" = 0 ] &&
        pass "view: an idle 8 MB pool: size $size, free $free0, nothing fell back" ||
        fail "view: idle pool said size=$size free=$free0 fallbacks=$fb0 peak=$peak0"
    sql "create role watcher login; create role monitor login in role pg_read_all_stats;" >/dev/null
    if as_pg "$pgbin/psql" -h "$sock" -p "$port" -U watcher -d postgres -X -q -A -t -c "select 1 from pg_dsmpool" >/dev/null 2>&1; then
        fail "view: a role without pg_read_all_stats could read pg_dsmpool"
    elif [ "$(as_pg "$pgbin/psql" -h "$sock" -p "$port" -U monitor -d postgres -X -q -A -t -c "select count(*) from pg_dsmpool")" = 1 ]; then
        pass "view: pg_dsmpool is for pg_read_all_stats (as pg_shmem_allocations)"
    else
        fail "view: a member of pg_read_all_stats could not read pg_dsmpool"
    fi
    seed_table 300000
    local n
    n=$(sql "$JOIN" | tail -1)
    local after
    after=$(sql "select format('%s|%s|%s|%s|%s', free, fallback_segments, fallback_areas, fallback_area_bytes_peak, fallback_segment_bytes_peak) from pg_dsmpool")
    IFS='|' read -r free1 fseg farea apeak speak <<<"$after"
    echo "  pg_dsmpool after a hash join of 300k rows in 8 MB: free $free1 of $size; fell back: $fseg segments, $farea areas; peak OS bytes: areas $apeak, segments $speak"
    [ "$n" = 300000 ] && [ $((fseg + farea + apeak + speak)) -gt 0 ] &&
        pass "view: the hash join ($n rows) was right, and its fallbacks are counted in pg_dsmpool" ||
        fail "view: the join said '$n', and pg_dsmpool counted no fallback ($after)"
    server_stop "$pgbin"
    pool_log "view" "$data/log" 1
    grep -A2 "dsmpool: the pool could not serve" "$data/log" | sed 's/^[0-9-]* [0-9:.]* [A-Z]* \[[0-9]*\] /  /' | head -3
    left=$(shm_new "$before")
    [ -z "$left" ] && pass "view: nothing left in /dev/shm" || fail "view: left in /dev/shm: $left"
}

# SIGKILL a parallel worker in the middle of a hash build, again and again:
# the server restarts, the pool recovers what the dead held (its free bytes
# back at their idle value), the next query is right, the DSM registry's
# named segment starts afresh (its init runs again, as in stock PostgreSQL,
# whose registry is in the main shared memory), nothing is left.
crash_test() {
    local rows=$1 rounds=$2
    log "crash test: $rounds SIGKILLs of a parallel worker during a hash build ($rows rows)"
    local before
    before=$(shm_objects)
    server_init "$pgbin" "dsmpool_size = 256MB" "restart_after_crash = on" "max_worker_processes = 8"
    server_start "$pgbin"
    seed_table "$rows"
    sql "create extension test_dsm_registry; select set_val_in_shmem(1236);" >/dev/null
    local idle
    idle=$(grep -o 'dsmpool: pool of [0-9]* bytes ready.*, [0-9]* bytes free' "$data/log" | sed -E 's/.* ([0-9]+) bytes free/\1/')
    local r killed=0 right=0 afresh=0
    for r in $(seq 1 "$rounds"); do
        local pm
        pm=$(server_pid)
        (sql "$JOIN" >/dev/null 2>&1 || true) &
        local q=$! w="" _
        for _ in $(seq 1 400); do # up to 4 s for the workers to appear
            w=$(pgrep -P "$pm" -f "parallel worker" | head -1 || true)
            [ -n "$w" ] && break
            sleep 0.01
        done
        if [ -n "$w" ]; then
            sleep "0.0$((RANDOM % 10))"
            kill -9 "$w" 2>/dev/null && killed=$((killed + 1))
        fi
        wait $q || true
        wait_ready || { fail "crash round $r: the server did not come back"; break; }
        local got
        got=$(sql "$JOIN" 2>&1 | tail -1 || true)
        [ "$got" = "$rows" ] && right=$((right + 1)) || echo "  round $r: the next query said '$got'"
        [ "$(sql "select get_val_in_shmem()" 2>&1)" = 0 ] && afresh=$((afresh + 1))
        sql "select set_val_in_shmem($r)" >/dev/null 2>&1 || true
    done
    local frees bad=0 f
    frees=$(grep -o 'after the crash, [0-9]* of' "$data/log" | grep -o '[0-9]*' || true)
    for f in $frees; do [ "$f" = "$idle" ] || bad=$((bad + 1)); done
    local restarts
    restarts=$(echo "$frees" | grep -c . || true)
    # shellcheck disable=SC2086 # the words, joined by commas
    echo "crash test: $killed workers killed, $restarts crash restarts, pool free after each: $(echo $frees | tr ' ' ',') (idle $idle)"
    [ "$right" = "$rounds" ] && pass "crash: the query after each of $rounds crashes was right" ||
        fail "crash: $right of $rounds queries after a crash were right"
    [ "$restarts" -ge 1 ] && [ "$bad" = 0 ] && pass "crash: the pool's free bytes came back to $idle after every restart ($restarts)" ||
        fail "crash: $bad of $restarts restarts left the pool short of its idle $idle bytes"
    [ "$afresh" = "$restarts" ] && pass "crash: the registry's named segment started afresh after each restart ($afresh)" ||
        fail "crash: the named segment started afresh after $afresh of $restarts restarts"
    server_stop "$pgbin" fast
    local left
    left=$(shm_new "$before")
    [ -z "$left" ] && pass "crash: nothing left in /dev/shm after pg_ctl stop" || fail "crash: left: $left"
}

# Every way down leaves nothing: an immediate shutdown, and a postmaster
# killed outright (what it leaves, the next start sweeps).
shutdown_test() {
    log "shutdown test: immediate shutdown, and a killed postmaster"
    local before left
    before=$(shm_objects)
    server_init "$pgbin" "dsmpool_size = 64MB"
    server_start "$pgbin"
    seed_table 100000
    sql "$JOIN" >/dev/null
    server_stop "$pgbin" immediate
    left=$(shm_new "$before")
    [ -z "$left" ] && pass "immediate shutdown: nothing left in /dev/shm" || fail "immediate shutdown left: $left"
    server_start "$pgbin"
    sql "$JOIN" >/dev/null
    kill -9 "$(server_pid)"
    sleep 1
    left=$(shm_new "$before")
    [ -n "$left" ] && echo "a killed postmaster left: $left"
    rm -f "$data/postmaster.pid"
    local _
    for _ in $(seq 1 50); do pgrep -u "$PGUSER_NAME" -x postgres >/dev/null || break; sleep 0.2; done
    server_start "$pgbin"
    # What it left must be gone now: the pool's objects swept by dsmpool
    # (when its backends died too), PostgreSQL's control segment removed by
    # PostgreSQL itself. (Backends that outlive the postmaster leave the
    # pool cleanly: then only PostgreSQL's segment is left.)
    local o still=""
    for o in $left; do [ -e "/dev/shm/$o" ] && still="$still $o"; done
    if [ -n "$still" ]; then
        fail "the next start did not remove what a killed postmaster left:$still"
    elif grep -q "dsmpool: removed [0-9]* objects left by pools whose processes all died" "$data/log"; then
        pass "a killed postmaster's pool was swept at the next start"
    else
        pass "what a killed postmaster left (${left:-nothing}) was gone after the next start"
    fi
    server_stop "$pgbin" fast
    left=$(shm_new "$before")
    [ -z "$left" ] && pass "after the restart and stop: nothing left in /dev/shm" || fail "left: $left"
}

# The elastic pool (patch 0004): a 256 MB reservation of which 16 MB is
# resident at startup; a hash join makes what it takes resident (refills on
# demand, counted), and the dsmpool maintainer gives it back once it has been
# free for dsmpool_idle_release; the query after is right again.
elastic_test() {
    log "elastic pool: dsmpool_resident_min, dsmpool_idle_release, the dsmpool maintainer"
    local before left q r0 r1 r2 n
    before=$(shm_objects)
    server_init "$pgbin" "dsmpool_size = 256MB" "dsmpool_huge_pages = off" "dsmpool_resident_min = 16MB" \
        "dsmpool_idle_release = 500"
    server_start "$pgbin"
    q="select format('%s|%s|%s|%s', resident / 1048576, releases, refills_on_demand, released + resident = size) from pg_dsmpool"
    r0=$(sql "$q")
    grep -h "dsmpool: elastic" "$data/log" | sed 's/.*LOG: */  /'
    if [ "$(pgrep -P "$(server_pid)" -f "dsmpool maintainer" | wc -l)" = 1 ]; then
        pass "elastic: the dsmpool maintainer runs (a child of the postmaster)"
    else
        fail "elastic: no dsmpool maintainer among the postmaster's children"
    fi
    seed_table 1000000
    n=$(sql "$JOIN" | tail -1)
    r1=$(sql "$q")
    local _
    for _ in $(seq 1 50); do # up to 5 s for the release (0.5 s idle, then a step)
        sleep 0.1
        r2=$(sql "$q")
        [ "${r2%%|*}" -le 32 ] && break
    done
    echo "  pg_dsmpool (resident MB|releases|refills on demand|released + resident = size): idle $r0, after the join $r1, later $r2"
    IFS='|' read -r res0 _ _ whole0 <<<"$r0"
    IFS='|' read -r res1 _ rod1 _ <<<"$r1"
    IFS='|' read -r res2 rel2 _ whole2 <<<"$r2"
    # (the server's own startup may take a block beyond dsmpool_resident_min)
    [ "$res0" -le 32 ] && [ "$whole0" = t ] && pass "elastic: $res0 MB of the 256 MB pool resident at startup" ||
        fail "elastic: at startup the pool said $r0"
    [ "$n" = 1000000 ] && [ "$res1" -ge $((res0 + 16)) ] && [ "$rod1" -gt 0 ] &&
        pass "elastic: the hash join ($n rows) was right and made $((res1 - res0)) MB resident in $rod1 refills on demand" ||
        fail "elastic: the join said '$n', and the pool said $r1"
    [ "$res2" -le 32 ] && [ $((res2 + 16)) -le "$res1" ] && [ "$rel2" -gt 0 ] && [ "$whole2" = t ] &&
        pass "elastic: the maintainer gave it back ($rel2 releases): $res2 MB resident" ||
        fail "elastic: after the idle release the pool said $r2"
    n=$(sql "$JOIN" | tail -1)
    [ "$n" = 1000000 ] && pass "elastic: the join after the release was right" || fail "elastic: the join after the release said '$n'"
    server_stop "$pgbin"
    grep -h "dsmpool: the pool's maintenance failed" "$data/log" | sed 's/.*LOG: */  /' && fail "elastic: a maintenance step failed" || true
    left=$(shm_new "$before")
    [ -z "$left" ] && pass "elastic: nothing left in /dev/shm" || fail "elastic: left in /dev/shm: $left"
}

# ---- the provider API ---------------------------------------------------------

# PostgreSQL 18 with the provider API patch alone (provider/0001-*.patch: core
# and its test module test_dsm_provider; 0000-cover-letter.patch is the
# proposal's letter, applied to nothing), cassert and TAP tests, into
# $prefix/$api (api; api-eb with EXEC_BACKEND=1: compiled -DEXEC_BACKEND,
# where children are exec'd, not forked); cached as the patched build is
api=api
[ "${EXEC_BACKEND:-0}" = 1 ] && api="api-eb"
# AREAS=1: provider/areas/*.patch on top (DSA areas as dsmpool areas through
# dsa_pool_hook, which the extension sets), the server linked with libdsmpool
[ "${AREAS:-0}" = 1 ] && api="api-areas"
api_patches() {
    ls "$here"/provider/0[0-9][0-9][1-9]-*.patch
    [ "$api" = api-areas ] && ls "$here"/provider/areas/*.patch
    return 0
}
api_key() {
    {
        # shellcheck disable=SC2012 # one file of a known name
        basename "$(ls "$prefix"/download/postgresql-${PG_MAJOR}_*.orig.tar.bz2 | head -1)"
        api_patches | xargs cat
        cat "$here/run.sh" "$here/lib.sh"
        [ "$api" = api-areas ] && cat "$repo/include/dsmpool.h"
        cc --version | head -1
        echo "$api"
    } | sha256sum | cut -c1-16
}

api_build() {
    prepare
    local key tree="$prefix/src-$api"
    key=$(api_key)
    if [ -x "$prefix/$api/bin/postgres" ] && [ -d "$tree" ] && [ "$(cat "$prefix/$api.key" 2>/dev/null)" = "$key" ]; then
        log "PostgreSQL build cache: hit ($key, $prefix/$api)"
        return 0
    fi
    log "PostgreSQL build cache: miss ($key): PostgreSQL $PG_MAJOR with the provider API into $prefix/$api"
    rm -f "$prefix/$api.key"
    unpack "src-$api"
    local p
    for p in $(api_patches); do
        patch -s -d "$tree" -p1 <"$p" || die "patch $(basename "$p") does not apply"
    done
    rm -rf "${prefix:?}/$api"
    local flags="" with=""
    [ "$api" = api-eb ] && flags=-DEXEC_BACKEND
    [ "$api" = api-areas ] && with=dsmpool
    EXTRA_CPPFLAGS=$flags configure_and_make "$tree" "$prefix/$api" "$with" tests
    make -s -C "$tree/src/test/modules/test_dsm_provider" install >/dev/null 2>&1 ||
        die "test_dsm_provider did not build"
    [ "$(id -u)" = 0 ] && chown -R "$PGUSER_NAME" "$tree"
    echo "$key" >"$prefix/$api.key"
    log "built: $prefix/$api/bin/postgres"
}

# What test_dsm_provider logged of each generation it ended: with want 0 it
# served segments; with want 1 (EXEC_BACKEND: no child inherits its region)
# it served none and declined each request.
provider_log() { # provider_log label log want
    local label=$1 plog=$2 want=$3 lines s d
    lines=$(grep -h "test_dsm_provider: generation" "$plog" 2>/dev/null | sed 's/.*LOG: *//' || true)
    # shellcheck disable=SC2001 # each line indented
    [ -n "$lines" ] && echo "$lines" | sed 's/^/  /'
    s=$(echo "$lines" | awk '{s += $5} END {print s + 0}')
    d=$(echo "$lines" | awk '{d += $9} END {print d + 0}')
    if [ -z "$lines" ]; then
        fail "$label: test_dsm_provider logged no generation"
    elif [ "$want" = 0 ]; then
        [ "$s" -gt 0 ] && pass "$label: the provider served $s segments (declined $d)" ||
            fail "$label: the provider served nothing"
    else
        [ "$s" = 0 ] && [ "$d" -gt 0 ] && pass "$label: the provider declined all $d requests" ||
            fail "$label: want every request declined, got $s served and $d declined"
    fi
}

# What the extension dsmpool logged of each generation (api-areas): each
# serving through the API, no maintenance step failed
areas_log() { # areas_log label log want(0)
    local label=$1 plog=$2 gens
    gens=$(grep -c "dsmpool: generation [0-9]*: a pool of .* through the server's DSM provider API" "$plog" || true)
    grep -h "dsmpool: generation" "$plog" | sed 's/.*LOG: */  /' | head -3
    if [ "$gens" -gt 0 ] && ! grep -q "dsmpool: the pool's maintenance failed\|WARNING:  dsmpool" "$plog"; then
        pass "$label: the extension served $gens generations through the API"
    else
        fail "$label: the extension served no generation ($gens), or warned"
    fi
}

areas_view() {
    sql "create extension if not exists dsmpool" >/dev/null
    echo "  pg_dsmpool: $(sql "select format('generation %s: %s segments served, %s refused; %s of %s bytes free', generation, segments_served, segments_refused, free, size) from pg_dsmpool")"
}

provider_view() {
    sql "create extension if not exists test_dsm_provider" >/dev/null
    echo "  test_dsm_provider: $(sql "select format('generation %s: %s segments served, %s declined, %s attached, %s destroyed; %s pages in use', generation, served, declined, attached, destroyed, pages_in_use) from test_dsm_provider_stats()")"
}

# The extension dsmpool on the server with the API (extension/t): built with
# PGXS against it and judged by its TAP tests, the preload library of
# build_dsmpool's install loaded by dsmpool.library, no LD_PRELOAD. Under
# EXEC_BACKEND, where no child would inherit a pool, 002_exec_backend.pl
# alone runs: no pool, said once, and every segment PostgreSQL's own.
ext_tap() {
    local d="$prefix/ext-$api" lib
    lib=$(find "$prefix/dsmpool" -name libdsmpool-preload.so | head -1)
    [ -n "$lib" ] || { fail "no libdsmpool-preload.so under $prefix/dsmpool"; return; }
    log "TAP: the extension dsmpool (extension/t) on $api, dsmpool.library = $lib"
    ext_install "$d" "$prefix/$api/bin/pg_config" ||
        { fail "the extension dsmpool did not build against $prefix/$api"; return; }
    [ "$(id -u)" = 0 ] && chown -R "$PGUSER_NAME" "$d"
    as_pg make -C "$d" PG_CONFIG="$prefix/$api/bin/pg_config" installcheck TAP_TESTS=1 \
        DSMPOOL_PRELOAD_LIB="$lib" >"$prefix/ext-$api-tap.out" 2>&1 || true
    count_tap "$api, the extension dsmpool" "$prefix/ext-$api-tap.out"
}

# the API's own TAP test, the extension's, then
# PostgreSQL's suites with every segment that the provider serves from it
# (regress: the main schedule with debug_parallel_query = regress, the
# DSM/DSA test modules, 013_crash_restart)
api_check() {
    api_build
    need_user
    local tree="$prefix/src-$api" want=0
    [ "$api" = api-eb ] && want=1
    pgbin="$prefix/$api/bin"
    log "TAP: src/test/modules/test_dsm_provider ($api)"
    as_pg make -C "$tree/src/test/modules/test_dsm_provider" check >"$prefix/$api-tap.out" 2>&1 || true
    count_tap "$api, test_dsm_provider" "$prefix/$api-tap.out"
    ext_tap
    temp_installed=1 # the TAP run made tmp_install, with the module in it
    reg_tree=$tree
    if [ "$api" = api-areas ]; then
        # the extension serving (its areas too): into tmp_install as well
        local lib b="$prefix/$api/bin" d
        lib=$(find "$prefix/dsmpool" -name libdsmpool-preload.so | head -1)
        for d in "$("$b/pg_config" --pkglibdir)" "$("$b/pg_config" --sharedir)/extension"; do
            cp "$d"/dsmpool* "$tree/tmp_install$d/"
        done
        reg_log=areas_log reg_view=areas_view
        regress "$api" 0 "shared_preload_libraries = 'dsmpool'" "dsmpool.library = '$lib'" \
            "dsmpool.size = '1GB'" "debug_parallel_query = regress"
    else
        reg_log=provider_log reg_view=provider_view
        regress "$api" "$want" "shared_preload_libraries = 'test_dsm_provider'" "debug_parallel_query = regress"
    fi
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ]
}

do_check() {
    [ -x "$pgbin/postgres" ] || do_build
    need_user
    [ "$(id -u)" = 0 ] && chown -R "$PGUSER_NAME" "$prefix/src-patched"
    regress pool 0 "dsmpool_size = 128MB"
    regress small 1 "dsmpool_size = 4MB" "dsmpool_huge_pages = off"
    regress full 1 "dsmpool_size = 32MB" "dsmpool_fill_for_testing = on"
    view_test
    elastic_test
    crash_test "${DSMPOOL_PG_CRASH_ROWS:-1000000}" "${DSMPOOL_PG_CRASH_ROUNDS:-10}"
    shutdown_test
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ]
}

# stock_scripts BUILD_DIR OUT SCRIPT...: the preload library alone
# (stock.sh), with the extension (extension/check.sh), under PostgreSQL's
# own suites (suites.sh), in a real container (podman.sh), each with the
# libraries of BUILD_DIR; each ends with "N passed, N failed"; the last
# line is their sum
stock_scripts() {
    local sp=0 sf=0 s out p f build=$1 o=$2
    shift 2
    for s in "$@"; do
        "$here/$s" "$prefix" "$build" 2>&1 | tee "$o" || true
        out=$(tail -1 "$o")
        p="" f=""
        [[ $out =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]] && p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]}
        [ -n "$p" ] || { p=0 f=1; echo "FAILED: $(basename "$s") ended without its summary line"; }
        sp=$((sp + p)) sf=$((sf + f))
    done
    echo "$sp passed, $sf failed"
    [ "$sf" = 0 ]
}

# locked_release_then SCRIPT: under the prefix's lock, the release builds,
# then SCRIPT PREFIX
locked_release_then() {
    # shellcheck disable=SC2016 # sh -c's own arguments
    exec flock "$prefix.lock" sh -c '"$1" build-release "$2" && exec "$3" "$2"' sh "$0" "$prefix" "$1"
}

case "$cmd" in
build) do_build ;;
check) do_check ;;
api-build) api_build ;;
api-check) api_check ;;
# the measuring runs take the prefix's lock, which tools/test.sh holds around
# the runs of this script it makes (bench-small, stock18-check share the
# prefix's builds, clusters' parent and ports)
container) locked_release_then "$here/container.sh" ;;
bench) locked_release_then "$here/bench.py" ;;
build-release) build_release ;;
bench-small)
    # the test build (run.sh build's, cached) is the patched server here: that
    # the benchmarks run is what is checked, not their speed
    do_build && build_stock_release && SMALL=1 POOL_BIN="$prefix/patched/bin" exec "$here/bench.py" "$prefix"
    ;;
stock18-check)
    # the stock scripts on PostgreSQL 18 built here without patches (the
    # benchmarks' stock build): what of them is not Debian's own
    prepare
    build_stock_release
    [ "$(id -u)" = 0 ] && chown -R "$PGUSER_NAME" "$prefix/src-bench-stock"
    STOCK_BIN="$prefix/bench-stock/bin" STOCK_SRC="$prefix/src-bench-stock" \
        stock_scripts "$prefix/dsmpool-build" "$prefix/stock18-check.out" stock.sh extension/check.sh suites.sh
    ;;
stock-check)
    install_deps
    log "dsmpool (with the preload library): release build in $prefix/stock-build"
    # a build made from another clone (its sources elsewhere) is made again
    [ "$(cat "$prefix/stock-build.src" 2>/dev/null)" = "$repo" ] || rm -rf "$prefix/stock-build"
    { [ -f "$prefix/stock-build/build.ninja" ] ||
        { meson setup "$prefix/stock-build" "$repo" --buildtype=release -Dtests=disabled -Dbench=disabled >/dev/null &&
            echo "$repo" >"$prefix/stock-build.src"; }; } &&
        ninja -C "$prefix/stock-build" >/dev/null || die "the dsmpool build failed"
    stock_scripts "$prefix/stock-build" "$prefix/stock-check.out" stock.sh extension/check.sh suites.sh podman.sh
    ;;
*)
    sed -n '2,65p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
