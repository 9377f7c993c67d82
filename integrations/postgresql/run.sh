#!/usr/bin/env bash
# PostgreSQL 15 on dsmpool: fetch, patch, build, test, measure.
#
#   run.sh build [PREFIX]  fetch PostgreSQL 15's source through apt (a deb-src
#                          entry of its own, removed after), build dsmpool and
#                          the patched server into PREFIX
#   run.sh check [PREFIX]  PostgreSQL's regression suite (make check, the main
#                          schedule) with the pool serving, with a 4 MB pool,
#                          and with a full pool (everything falls back); then
#                          the crash and shutdown tests; ends with PostgreSQL's
#                          summary lines and "N passed, N failed"
#   run.sh bench [PREFIX]  the seed query, stock against patched (builds stock
#                          PostgreSQL too); a table and a plot in
#                          bench/results/postgresql-<host>/
#
# PREFIX defaults to integrations/postgresql/work. Run as root on Debian 12
# (it installs what it needs); the server runs as the user "dsmpoolpg",
# made if missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cmd=${1:-}
prefix=${2:-$here/work}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
PG_PINNED=15.18-0+deb12u1 # the version measured in the issue; the newest one served if it is gone
PGUSER_NAME=dsmpoolpg
jobs=$(nproc)

log() { echo "=== $*" >&2; }
die() {
    echo "run.sh: $*" >&2
    exit 1
}

as_pg() { # run a command as the server's user
    if [ "$(id -u)" = 0 ]; then runuser -u "$PGUSER_NAME" -- "$@"; else "$@"; fi
}

need_user() {
    [ "$(id -u)" = 0 ] || return 0
    id "$PGUSER_NAME" >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/sh "$PGUSER_NAME"
}

# ---- build --------------------------------------------------------------------

install_deps() {
    local pkgs="build-essential perl pkg-config libreadline-dev zlib1g-dev procps bzip2 patch util-linux passwd" missing=""
    for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
    "$repo/tools/deps.sh"
    if [ -n "$missing" ]; then
        log "installing:$missing"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
    fi
}

# The orig tarball of postgresql-15 from Debian's deb-src, through a sources
# file of our own; apt's configuration and lists are left as they were.
fetch_source() {
    local dl="$prefix/download"
    if ls "$dl"/postgresql-15_*.orig.tar.bz2 >/dev/null 2>&1; then return; fi
    [ "$(id -u)" = 0 ] || die "fetching the source needs root (apt)"
    mkdir -p "$dl"
    local src=/etc/apt/sources.list.d/dsmpool-postgresql-src.sources
    local before
    before=$(ls /var/lib/apt/lists/)
    cat >"$src" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    local ok=0
    if apt-get update -qq -o Dir::Etc::sourcelist="$src" -o Dir::Etc::sourceparts=- \
        -o APT::Get::List-Cleanup=0 >&2; then
        local versions v
        versions="$PG_PINNED $(apt-cache showsrc postgresql-15 2>/dev/null | awk '/^Version:/ {print $2}' | sort -rV)"
        for v in $versions; do
            if (cd "$dl" && apt-get source -qq --download-only "postgresql-15=$v" >&2 2>/dev/null); then
                log "PostgreSQL source: postgresql-15 $v"
                ok=1
                break
            fi
        done
    fi
    rm -f "$src"
    local f
    for f in $(ls /var/lib/apt/lists/); do
        echo "$before" | grep -qxF "$f" || rm -f "/var/lib/apt/lists/$f"
    done
    [ $ok = 1 ] || die "no postgresql-15 source could be fetched from Debian's deb-src"
}

unpack() { # unpack [dir]: the pristine source into $prefix/$1
    local to="$prefix/$1"
    rm -rf "$to"
    mkdir -p "$to"
    tar -xjf "$prefix"/download/postgresql-15_*.orig.tar.bz2 -C "$to" --strip-components=1
}

build_dsmpool() {
    log "dsmpool: build and install into $prefix/dsmpool"
    meson setup "$prefix/dsmpool-build" "$repo" --buildtype=release --prefix="$prefix/dsmpool" \
        -Dtests=disabled -Dbench=disabled --wipe >/dev/null 2>&1 ||
        meson setup "$prefix/dsmpool-build" "$repo" --buildtype=release --prefix="$prefix/dsmpool" \
            -Dtests=disabled -Dbench=disabled >/dev/null
    ninja -C "$prefix/dsmpool-build" install >/dev/null
}

# configure_and_make tree install-dir [with-dsmpool]
configure_and_make() {
    local tree=$1 inst=$2 with=${3:-}
    local cppflags="" ldflags="" libs=""
    if [ -n "$with" ]; then
        local pc
        pc=$(dirname "$(find "$prefix/dsmpool" -name dsmpool.pc | head -1)")
        local libdir
        libdir=$(PKG_CONFIG_PATH=$pc pkg-config --variable=libdir dsmpool)
        cppflags=$(PKG_CONFIG_PATH=$pc pkg-config --cflags dsmpool)
        ldflags="-L$libdir -Wl,-rpath,$libdir"
        libs="-ldsmpool"
    fi
    (cd "$tree" &&
        ./configure --prefix="$inst" --without-icu --without-llvm CPPFLAGS="$cppflags" LDFLAGS="$ldflags" \
            LIBS="$libs" >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
        make -s -j"$jobs" >make.log 2>&1 || { grep -E "error|Error" make.log | head -30; exit 1; }
        make -s install >/dev/null 2>&1
        make -s -C contrib/pg_prewarm install >/dev/null 2>&1)
}

do_build() {
    install_deps
    need_user
    fetch_source
    build_dsmpool
    log "PostgreSQL: unpack, patch (integrations/postgresql/patches), build into $prefix/patched"
    unpack src-patched
    local p
    for p in "$here"/patches/*.patch; do
        patch -s -d "$prefix/src-patched" -p1 <"$p" || die "patch $(basename "$p") does not apply"
    done
    configure_and_make "$prefix/src-patched" "$prefix/patched" with
    [ "$(id -u)" = 0 ] && chown -R "$PGUSER_NAME" "$prefix/src-patched"
    log "built: $prefix/patched/bin/postgres"
}

# ---- a server --------------------------------------------------------------------

port=54329
sock="$prefix/sock"
data="$prefix/data"
pgbin="$prefix/patched/bin"

server_init() { # server_init bindir [postgresql.conf lines...]
    local bin=$1
    shift
    as_pg "$bin/pg_ctl" -D "$data" stop -m immediate >/dev/null 2>&1 || true
    rm -rf "$data"
    mkdir -p "$sock"
    [ "$(id -u)" = 0 ] && chown "$PGUSER_NAME" "$sock" "$prefix"
    as_pg "$bin/initdb" -D "$data" -U postgres --no-sync >/dev/null
    {
        echo "port = $port"
        echo "unix_socket_directories = '$sock'"
        echo "listen_addresses = ''"
        echo "logging_collector = off"
        local l
        for l in "$@"; do echo "$l"; done
    } >>"$data/postgresql.conf"
}

server_start() { as_pg "$1/pg_ctl" -D "$data" -l "$data/log" -w -t 120 start >/dev/null; }
server_stop() { as_pg "$1/pg_ctl" -D "$data" -w -t 120 stop -m "${2:-fast}" >/dev/null; }
sql() { as_pg "$pgbin/psql" -h "$sock" -p $port -U postgres -d postgres -X -q -A -t -c "$1"; }
server_pid() { head -1 "$data/postmaster.pid"; }

pool_objects() { # what any pool or PostgreSQL left in /dev/shm
    ls /dev/shm | grep -E '^(dsmpool\.|PostgreSQL\.)' || true
}

wait_ready() {
    local i
    for i in $(seq 1 600); do
        as_pg "$pgbin/pg_isready" -h "$sock" -p $port -q && return 0
        sleep 0.1
    done
    return 1
}

# ---- check ------------------------------------------------------------------------

passed=0
failed=0
pass() {
    passed=$((passed + 1))
    echo "ok: $*"
}
fail() {
    failed=$((failed + 1))
    echo "FAILED: $*"
}

regress() { # regress name conf-lines...
    local name=$1
    shift
    local conf="$prefix/regress-$name.conf"
    printf '%s\n' "$@" >"$conf"
    chmod 644 "$conf"
    log "regression suite (make check), $name: $*"
    local out="$prefix/regress-$name.out"
    if as_pg make -C "$prefix/src-patched" check TEMP_CONFIG="$conf" >"$out" 2>&1; then :; fi
    local summary
    summary=$(grep -E '^ (All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests failed)' "$out" | head -1 | sed 's/^ *//')
    local plog="$prefix/src-patched/src/test/regress/log/postmaster.log"
    echo "PostgreSQL ($name): ${summary:-no summary (see $out)}"
    grep -h "dsmpool:" "$plog" 2>/dev/null | sed 's/.*LOG: */  /' || true
    local n f
    n=$(echo "$summary" | sed -nE 's/All ([0-9]+) tests passed.*/\1/p')
    if [ -n "$n" ]; then
        passed=$((passed + n))
    else
        f=$(echo "$summary" | sed -nE 's/([0-9]+) of ([0-9]+) tests failed.*/\1 \2/p')
        if [ -n "$f" ]; then
            set -- $f
            failed=$((failed + $1))
            passed=$((passed + $2 - $1))
            grep -E 'FAILED|failed' "$out" | head -20
        else
            fail "regression run $name did not complete"
            tail -20 "$out"
        fi
    fi
    local left
    left=$(pool_objects)
    [ -z "$left" ] && pass "$name: nothing left in /dev/shm" || fail "$name: left in /dev/shm: $left"
    cp "$out" "$plog" "$prefix/" 2>/dev/null || true
}

# The seed table, smaller for CI: rows
seed_table() {
    sql "drop table if exists t; create table t (i int); insert into t select generate_series(1, $1); analyze t;"
}

JOIN="set work_mem = '256MB'; set max_parallel_workers_per_gather = 2; set parallel_setup_cost = 0;
set parallel_tuple_cost = 0; set min_parallel_table_scan_size = 0;
select count(*) from t t1 join t t2 using (i);"

# SIGKILL a parallel worker in the middle of a hash build, again and again:
# the server restarts, the pool recovers what the dead held (its free bytes
# back at their idle value), the next query is right, nothing is left.
crash_test() {
    local rows=$1 rounds=$2
    log "crash test: $rounds SIGKILLs of a parallel worker during a hash build ($rows rows)"
    server_init "$pgbin" "dsmpool_size = 256MB" "restart_after_crash = on" "max_worker_processes = 8"
    server_start "$pgbin"
    seed_table "$rows"
    local idle
    idle=$(grep -o 'dsmpool: pool of [0-9]* bytes ready.*, [0-9]* bytes free' "$data/log" | sed -E 's/.* ([0-9]+) bytes free/\1/')
    local r killed=0 right=0
    for r in $(seq 1 "$rounds"); do
        local pm
        pm=$(server_pid)
        (sql "$JOIN" >/dev/null 2>&1 || true) &
        local q=$! w="" i
        for i in $(seq 1 400); do # up to 4 s for the workers to appear
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
    done
    local frees bad=0 f
    frees=$(grep -o 'after the crash, [0-9]* of' "$data/log" | grep -o '[0-9]*' || true)
    for f in $frees; do [ "$f" = "$idle" ] || bad=$((bad + 1)); done
    local restarts
    restarts=$(echo "$frees" | grep -c . || true)
    echo "crash test: $killed workers killed, $restarts crash restarts, pool free after each: $(echo $frees | tr ' ' ',') (idle $idle)"
    [ "$right" = "$rounds" ] && pass "crash: the query after each of $rounds crashes was right" ||
        fail "crash: $right of $rounds queries after a crash were right"
    [ "$restarts" -ge 1 ] && [ "$bad" = 0 ] && pass "crash: the pool's free bytes came back to $idle after every restart ($restarts)" ||
        fail "crash: $bad of $restarts restarts left the pool short of its idle $idle bytes"
    server_stop "$pgbin" fast
    local left
    left=$(pool_objects)
    [ -z "$left" ] && pass "crash: nothing left in /dev/shm after pg_ctl stop" || fail "crash: left: $left"
}

# Every way down leaves nothing: an immediate shutdown, and a postmaster
# killed outright (what it leaves, the next start sweeps).
shutdown_test() {
    log "shutdown test: immediate shutdown, and a killed postmaster"
    server_init "$pgbin" "dsmpool_size = 64MB"
    server_start "$pgbin"
    seed_table 100000
    sql "$JOIN" >/dev/null
    server_stop "$pgbin" immediate
    local left
    left=$(pool_objects)
    [ -z "$left" ] && pass "immediate shutdown: nothing left in /dev/shm" || fail "immediate shutdown left: $left"
    server_start "$pgbin"
    sql "$JOIN" >/dev/null
    kill -9 "$(server_pid)"
    sleep 1
    left=$(pool_objects)
    [ -n "$left" ] && echo "a killed postmaster left: $(echo $left | tr '\n' ' ')"
    rm -f "$data/postmaster.pid"
    local i
    for i in $(seq 1 50); do pgrep -u "$PGUSER_NAME" -x postgres >/dev/null || break; sleep 0.2; done
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
    left=$(pool_objects)
    [ -z "$left" ] && pass "after the restart and stop: nothing left in /dev/shm" || fail "left: $left"
}

do_check() {
    [ -x "$pgbin/postgres" ] || do_build
    need_user
    [ "$(id -u)" = 0 ] && chown -R "$PGUSER_NAME" "$prefix/src-patched"
    regress pool "dsmpool_size = 128MB"
    regress small "dsmpool_size = 4MB" "dsmpool_huge_pages = off"
    regress full "dsmpool_size = 32MB" "dsmpool_fill_for_testing = on"
    crash_test "${DSMPOOL_PG_CRASH_ROWS:-1000000}" "${DSMPOOL_PG_CRASH_ROUNDS:-10}"
    shutdown_test
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ]
}

case "$cmd" in
build) do_build ;;
check) do_check ;;
bench) exec "$here/bench.sh" "$prefix" ;;
*)
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
