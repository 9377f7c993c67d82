#!/usr/bin/env bash
# The tests that end with a pool still attached call test_private_shm()
# (tests/testutil.h), so that their pools' objects in /dev/shm -- every
# pool's anchor, /dev/shm/dsmpool.<id>, and OS segments -- go with them.
# This runs each of them inside a /dev/shm of its own (a private mount
# namespace, as tests/example/run.sh does) and checks that nothing of
# dsmpool's is left there: a test that stopped making its own would leave
# its anchor here. Speaks TAP (tests/tap.sh).
# Usage: run.sh TEST-EXECUTABLE FILTER [TEST-EXECUTABLE FILTER ...]
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"
if [ "$(id -u)" != 0 ] || ! unshare -m --propagation private true 2>/dev/null; then
    tap_skip_all "needs root for a private mount namespace"
fi
while [ $# -ge 2 ]; do
    exe=$1 filter=$2
    shift 2
    name=$(sed 's/[^A-Za-z0-9_]/_/g; s/__*/_/g; s/_$//' <<<"$filter")
    # shellcheck disable=SC2016 # sh -c's own arguments
    out=$(unshare -m --propagation private sh -c 'mount -t tmpfs -o size=1g tmpfs /dev/shm || exit 99
        "$1" --filter "$2" -j1 >/dev/null 2>&1; r=$?
        echo "$r $(ls /dev/shm | grep "^dsmpool" | tr "\n" " ")"' sh "$exe" "$filter")
    read -r rc left <<<"$out"
    if [ "${rc:-99}" = 0 ] && [ -z "${left:-}" ]; then
        tap_ok "shm_left::$name: $filter left nothing in /dev/shm"
    else
        tap_not_ok "shm_left::$name: $filter ended with ${rc:-?}, left in /dev/shm: ${left:-nothing}"
    fi
done
tap_end
