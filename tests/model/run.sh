#!/usr/bin/env bash
# Model-check the protocols a crash can interrupt (palloc.m, area.m,
# presence.m) with rumur, and check that each model still catches the bug it
# was written against (the same model with LIVE_RECOVERY / BUGGY / OTHER_NS /
# ADOPT_SLOT_FIRST / ANCHOR_AFTER_PRESENCE set must fail). Usage: run.sh
# WORKDIR. Prints Criterion's synthesis line, so that tools/testcount.py
# counts the checks like any suite.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-/tmp/dsmpool-model}
mkdir -p "$work"
pass=0
fail=0
if ! command -v rumur >/dev/null; then
    echo "[----] rumur is not installed (apt-get install rumur)"
    echo "[====] Synthesis: Tested: 1 | Passing: 0 | Failing: 1 | Crashing: 0"
    exit 1
fi
check() { # name, model file, constants to flip to true (space-separated, or ""), expect: ok|error
    local name=$1 model=$2 flips=$3 expect=$4
    local src="$work/$name.m"
    cp "$model" "$src"
    for flip in $flips; do
        sed -i "s/^\(  $flip : \)false;/\1true;/" "$src"
    done
    local out
    out=$(rumur --deadlock-detection off "$src" --output "$work/$name.c" 2>&1 &&
        cc -O2 -mcx16 -o "$work/$name" "$work/$name.c" -lpthread -latomic 2>&1 &&
        timeout 600 "$work/$name" 2>&1)
    local states
    states=$(echo "$out" | grep -oE '[0-9]+ states' | tail -1)
    if { [ "$expect" = ok ] && echo "$out" | grep -q "No error found"; } ||
        { [ "$expect" = error ] && echo "$out" | grep -q "error(s) found"; }; then
        echo "[PASS] model::$name ($states)"
        echo "[NOTE] model $name: $( [ "$expect" = ok ] && echo "no error in" || echo "the old bug found after") $states"
        pass=$((pass + 1))
    else
        echo "[FAIL] model::$name"
        echo "$out" | grep -vE 'thread [0-9]+:' | tail -30
        fail=$((fail + 1))
    fi
}
check palloc_holds "$here/palloc.m" "" ok
check palloc_live_recovery_breaks_it "$here/palloc.m" LIVE_RECOVERY error
check area_holds "$here/area.m" "" ok
check area_old_destroy_breaks_it "$here/area.m" BUGGY error
check presence_holds "$here/presence.m" "" ok
check presence_fd_pool_holds "$here/presence.m" FD_POOL ok
check presence_other_ns_breaks_it "$here/presence.m" OTHER_NS error
check presence_adopt_slot_first_breaks_it "$here/presence.m" ADOPT_SLOT_FIRST error
check presence_anchor_after_presence_breaks_it "$here/presence.m" "FD_POOL ANCHOR_AFTER_PRESENCE" error
echo "[====] Synthesis: Tested: $((pass + fail)) | Passing: $pass | Failing: $fail | Crashing: 0"
[ "$fail" -eq 0 ]
