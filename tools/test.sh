#!/usr/bin/env bash
# The test command: installs what it needs, then builds and runs every test
# suite three ways -- plain, ASan+UBSan, TSan -- plus the NUMA placement tests
# on emulated 2- and 4-node machines (qemu); PostgreSQL 18.6 with the DSM
# provider API patch (integrations/postgresql/provider: its test module's
# TAP test, the extension dsmpool's TAP test with the pool served through
# the API, the main regression schedule, the DSA/DSM test modules and the
# TAP crash-restart test with the test provider serving: run.sh api-check);
# Debian's own postgresql-15 package with the preload library (run.sh
# stock-check); the PostgreSQL benchmarks in their smallest form (bench:
# run.sh bench-small, that they run); the Debian packages (debian:
# tools/debian.sh: dpkg-buildpackage, lintian, the packages installed on a
# clean root and in a container); and ends with the line "N passed, N
# failed" summed over all of them, after a "failed: <way>: <test>: <what it
# said>" line for each failure. Only when named (the budget, 45 minutes on 2 cores): the
# four-patch server judged three ways (patched: run.sh build + check), the
# API patch built -DEXEC_BACKEND (api-eb: EXEC_BACKEND=1 run.sh api-check),
# the API patch with the optional provider/areas patch, DSA areas as
# dsmpool areas (api-areas: AREAS=1 run.sh api-check) and the stock scripts on PostgreSQL 18 built here without patches
# (stock18: run.sh stock18-check).
# Exit status 0 only if none failed.
# Usage: tools/test.sh [plain] [asan] [tsan] [numa-vm] [postgresql] [stock] [bench] [debian]
#                      [patched] [api-eb] [api-areas] [stock18]
#        (default: all but patched, api-eb, api-areas and stock18)
#        tools/test.sh quick     the edit loop: the suites labelled "fast",
#                                plain, in the build it keeps (build-quick/)
#
# Work done once: the suites that do not depend on the sanitizer (labelled
# "once": model checks, consumer builds, manual pages, layering, header)
# run in the first library way only. Suites run side by side, as many as
# there are CPUs (each in namespaces of its own: tests/isolate.c; those
# that change system settings are marked to run alone). PostgreSQL is
# built in a prefix outside the clone, $DSMPOOL_CACHE/postgresql-18
# (default /var/cache/dsmpool), reused while its key holds
# (integrations/postgresql/run.sh: "build cache: hit" or "miss").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
if ! tools/deps.sh; then
    echo "dependency installation failed"
    echo "0 passed, 1 failed"
    exit 1
fi
ways=("$@")
# patched, api-eb, api-areas and stock18 are left out of the default: the budget (45
# minutes on 2 cores)
[ ${#ways[@]} -eq 0 ] && ways=(plain asan tsan numa-vm postgresql stock bench debian)
passed=0
failed=0
once_done=""
jobs=$(nproc)
cache=${DSMPOOL_CACHE:-/var/cache/dsmpool}
t_all=$SECONDS
# what failed, a line each, printed just above the last line (a CI log is
# often read from its end)
failures=$(mktemp)
trap 'rm -f "$failures"' EXIT
# external what grep-pattern command...: a run that ends with its own
# "N passed, N failed" line; its lines matching the pattern are shown.
external() {
    local what=$1 pattern=$2 out last p f
    shift 2
    echo "=== $way: $what" >&2
    local t0=$SECONDS
    out=$("$@" 2>&1)
    echo "$out" | grep -E "$pattern" >&2
    last=$(echo "$out" | tail -1)
    p=$(echo "$last" | awk '/passed,/ {print $1}')
    f=$(echo "$last" | awk '/passed,/ {print $3}')
    [ -n "$p" ] || { p=0; f=1; echo "$out" | tail -30 >&2; }
    [ "$f" = 0 ] || echo "$out" | grep -E '^(FAIL|not ok)' | sed "s/^/$way: /" >>"$failures"
    [ "$f" = 0 ] || grep -q "^$way: " "$failures" || echo "$way: $f failed (see its lines above)" >>"$failures"
    echo "=== $way: $p passed, $f failed ($((SECONDS - t0)) s)" >&2
    passed=$((passed + p))
    failed=$((failed + f))
}
# pg18 COMMAND: integrations/postgresql/run.sh COMMAND on the cached
# PostgreSQL 18 prefix, one run at a time (flock)
pg18() { flock "$cache/postgresql-18.lock" integrations/postgresql/run.sh "$1" "$cache/postgresql-18"; }
mkdir -p "$cache"
for way in "${ways[@]}"; do
    case "$way" in
    postgresql)
        # the server with the provider API (built, or taken from $cache)
        external "PostgreSQL 18.6 with the DSM provider API: test_dsm_provider's and the extension's TAP tests, its own suites with the test provider serving" \
            '^(PostgreSQL \(|ok:|FAILED|  test_dsm_provider|=== PostgreSQL build cache)' pg18 api-check
        continue
        ;;
    api-eb)
        external "PostgreSQL 18.6 with the DSM provider API, built -DEXEC_BACKEND: every segment declined, its suites pass" \
            '^(PostgreSQL \(|ok:|FAILED|  test_dsm_provider|=== PostgreSQL build cache)' env EXEC_BACKEND=1 \
            flock "$cache/postgresql-18.lock" integrations/postgresql/run.sh api-check "$cache/postgresql-18"
        continue
        ;;
    api-areas)
        external "PostgreSQL 18.6 with the DSM provider API and provider/areas: DSA areas as dsmpool areas, its suites with the extension dsmpool serving" \
            '^(PostgreSQL \(|ok:|FAILED|  pg_dsmpool|  dsmpool: generation|=== PostgreSQL build cache)' env AREAS=1 \
            flock "$cache/postgresql-18.lock" integrations/postgresql/run.sh api-check "$cache/postgresql-18"
        continue
        ;;
    debian)
        external "the Debian packages: dpkg-buildpackage, what each holds, lintian, libdsmpool-dev on a clean root, the packaged server in a container" \
            '^(ok:|FAILED|skip:|lintian|    [EWIP]: |tools/debian.sh:)' tools/debian.sh
        continue
        ;;
    patched)
        # the four core patches; one run at a time uses the cached prefix (flock), as pg18's
        # shellcheck disable=SC2016 # sh -c's own arguments
        external "build PostgreSQL 18 with the four patches (or take it from $cache), then its own tests three ways, crash and shutdown tests" \
            '^(PostgreSQL \(|ok:|FAILED|crash test|  dsmpool:|=== PostgreSQL build cache)' \
            flock "$cache/postgresql-18.lock" sh -c 'integrations/postgresql/run.sh build "$1" &&
                integrations/postgresql/run.sh check "$1"' sh "$cache/postgresql-18"
        continue
        ;;
    stock)
        # Debian's packaged server with the preload library (no rebuild)
        external "Debian's postgresql-15 with the preload library and the extension: lifecycle, the container table, its own suites, a real container" \
            '^(server:|source:|podman:|image:|skip:|ok:|FAILED|\| |installcheck|test_shm_mq|PostgreSQL \()' integrations/postgresql/run.sh stock-check "$cache/stock"
        continue
        ;;
    stock18)
        # PostgreSQL 18 built here without patches (the benchmarks' stock
        # build, in the same cached prefix) with the preload library
        external "PostgreSQL 18 built without patches with the preload library and the extension: lifecycle, the container table, its own suites" \
            '^(server:|source:|ok:|FAILED|\| |installcheck|test_shm_mq)' pg18 stock18-check
        continue
        ;;
    bench)
        # the PostgreSQL benchmarks in their smallest form: that they run
        external "the PostgreSQL benchmarks, smallest form (run.sh bench-small): every part runs and writes its table" \
            '^(ok:|FAILED)' pg18 bench-small
        continue
        ;;
    numa-vm)
        external "boot 2- and 4-node machines under qemu" '^(numa-vm|FAIL|  )' tests/numa-vm/run.sh
        continue
        ;;
    esac
    dir="build-test-$way"
    # shellcheck disable=SC2054 # one option whose value has commas
    case "$way" in
    quick) opts=(-Dbuildtype=debugoptimized) dir=build-quick ;;
    plain) opts=(-Dbuildtype=debugoptimized) ;;
    asan) opts=(-Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false -Dtest_scale=0.5) ;;
    tsan) opts=(-Dbuildtype=debug -Db_sanitize=thread -Db_lundef=false -Dtest_scale=0.5) ;;
    *) echo "unknown way: $way"; exit 2 ;;
    esac
    echo "=== $way: build" >&2
    t0=$SECONDS
    # quick keeps its build (the edit loop); every other way builds afresh
    [ "$way" = quick ] && [ -f "$dir/build.ninja" ] || { rm -rf "$dir" && meson setup "$dir" "${opts[@]}" -Dbench=disabled >"$dir.log" 2>&1; }
    if [ ! -f "$dir/build.ninja" ] || ! ninja -C "$dir" >>"$dir.log" 2>&1; then
        cat "$dir.log"
        echo "=== $way: build FAILED" >&2
        echo "$way: the build failed" >>"$failures"
        failed=$((failed + 1))
        continue
    fi
    echo "=== $way: test" >&2
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    tb=$((SECONDS - t0))
    select=()
    if [ "$way" = quick ]; then
        select=(--suite fast)
    elif [ -n "$once_done" ]; then
        select=(--no-suite once) # ran in $once_done: they do not depend on the sanitizer
    else
        once_done=$way
    fi
    meson test -C "$dir" --print-errorlogs --num-processes "$jobs" "${select[@]}" || true
    : >"$failures.way"
    read -r p f < <(python3 tools/testcount.py --failures "$failures.way" "$dir/meson-logs/testlog.json")
    # a count that could not be made is a failure, not a pass
    [[ "${p:-}" =~ ^[0-9]+$ && "${f:-}" =~ ^[0-9]+$ ]] || { p=0; f=1; echo "tools/testcount.py could not count" >>"$failures.way"; }
    sed "s/^/$way: /" "$failures.way" >>"$failures"
    rm -f "$failures.way"
    echo "=== $way: $p passed, $f failed (build $tb s, tests $((SECONDS - t0 - tb)) s)" >&2
    passed=$((passed + p))
    failed=$((failed + f))
done
echo "=== all: $((SECONDS - t_all)) s" >&2
[ -s "$failures" ] && sed 's/^/failed: /' "$failures"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
