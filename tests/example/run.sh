#!/usr/bin/env bash
# Runs the example executor (examples/hashjoin.c) -- a parallel hash join
# whose exec'd workers attach by name and find the hash table through named
# objects -- and checks its answer and that it leaves nothing in /dev/shm.
# Speaks TAP (tests/tap.sh).
# Usage: run.sh PATH-TO-hashjoin-example
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"
exe=$1
# Each run gets a /dev/shm of its own where it can (root: a private mount
# namespace), so that other programs' objects are not counted as its own.
private=""
if [ "$(id -u)" = 0 ] && unshare -m --propagation private true 2>/dev/null; then private=yes; fi
in_shm() { # command...: run it, then print the dsmpool objects left in its /dev/shm
    if [ -n "$private" ]; then
        # shellcheck disable=SC2016 # sh -c's own arguments
        unshare -m --propagation private sh -c 'mount -t tmpfs -o size=1g tmpfs /dev/shm && "$@"; r=$?;
            echo "left: $(ls /dev/shm | grep -c "^dsmpool")"; exit $r' sh "$@"
    else
        "$@"
        r=$?
        # shellcheck disable=SC2010 # counts the pool's names
        echo "left: $(ls /dev/shm | grep -c '^dsmpool')"
        return $r
    fi
}
check() { # name command...
    local name=$1 out
    shift
    before=0
    # shellcheck disable=SC2010 # counts the pool's names
    [ -n "$private" ] || before=$(ls /dev/shm | grep -c '^dsmpool' || true)
    if out=$(in_shm "$@" 2>&1) && grep -q "join t t2 using (i): $rows ($rows rows, $workers workers)$" <<<"$out"; then
        after=$(sed -n 's/^left: //p' <<<"$out")
        out=$(grep -v '^left: ' <<<"$out")
        if [ "${after:-99}" -le "$before" ]; then
            tap_ok "example::$name: $out"
            return
        fi
        out="$out; left in /dev/shm: $((after - before)) objects"
    fi
    tap_not_ok "example::$name: $out"
}
rows=200000 workers=4
check four_workers "$exe" $rows $workers
rows=100000 workers=1
check one_worker "$exe" $rows $workers
rows=50000 workers=16
check sixteen_workers "$exe" $rows $workers
tap_end
