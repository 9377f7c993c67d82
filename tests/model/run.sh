#!/usr/bin/env bash
# Model-check the protocols a crash can interrupt (palloc.m, area.m,
# presence.m, resident.m, giveback.m) with rumur, and check that each model still catches
# the bugs it was written against (the same model with LIVE_RECOVERY / BUGGY /
# OTHER_NS / ADOPT_SLOT_FIRST / ANCHOR_AFTER_PRESENCE, or one of resident.m's
# broken variants, set must fail -- for resident.m, on the property named).
# Usage: run.sh WORKDIR. Speaks TAP (tests/tap.sh), so that tools/testcount.py
# counts the checks like any suite.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
work=${1:-/tmp/dsmpool-model}
mkdir -p "$work"
if ! command -v rumur >/dev/null; then
    tap_not_ok "model::rumur: rumur is not installed (apt-get install rumur)"
    tap_end
    exit 1
fi
# Each check is a job of its own, as many at once as there are CPUs (each
# checker runs one thread: -t 1), its report written to $work/NAME.out (its
# first line PASS or FAIL) and reported in order at the end. Compiled at -O1: most state spaces are small
# enough that the compiler's time (-O2: 3.5 s a model) is most of a check;
# the large ones say -O2 (the sixth argument).
jobs=$(nproc)
names=()
check() { # name, model file, constants to flip to true (space-separated, or ""), expect: ok|error[, what the error must say[, cc -O level]]
    local name=$1
    names+=("$name")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    run_check "$@" >"$work/$name.out" 2>&1 &
}
run_check() {
    local name=$1 model=$2 flips=$3 expect=$4 want=${5:-} opt=${6:--O1}
    local src="$work/$name.m" t0=$SECONDS
    cp "$model" "$src"
    for flip in $flips; do
        sed -i "s/^\(  $flip : \)false;/\1true;/" "$src"
    done
    local out
    out=$(rumur --deadlock-detection off --threads 1 "$src" --output "$work/$name.c" 2>&1 &&
        cc "$opt" -mcx16 -o "$work/$name" "$work/$name.c" -lpthread -latomic 2>&1 &&
        timeout 600 "$work/$name" 2>&1)
    local states
    states=$(echo "$out" | grep -oE '[0-9]+ states' | tail -1)
    # (here-strings, not echo | grep -q: under pipefail a grep that stops at
    # an early match leaves echo, which writes line by line, a SIGPIPE, and
    # the check failed though it matched -- seen once, on a loaded machine)
    if { [ "$expect" = ok ] && grep -q "No error found" <<<"$out"; } ||
        { [ "$expect" = error ] && grep -q "error(s) found" <<<"$out" &&
            { [ -z "$want" ] || grep -qF "$want" <<<"$out"; }; }; then
        echo "PASS model::$name ($states, $((SECONDS - t0)) s)"
        echo "model $name: $( [ "$expect" = ok ] && echo "no error in" || echo "the old bug found after") $states"
    else
        echo "FAIL model::$name"
        echo "$out" | grep -vE 'thread [0-9]+:' | tail -30
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
# resident.m: the liveness property L is costly to prove, so it has a run of
# its own without the maintenance step (which holds no bracket and whose lock
# the kernel drops at death); ALLOC_WAITS's run leaves the step out too.
check resident_holds "$here/resident.m" "" ok
check resident_recovery_always_finishes "$here/resident.m" "NO_MAINT LIVE" ok
check resident_mark_after_release_breaks_it "$here/resident.m" MARK_AFTER_RELEASE error \
    'invariant "A: pages gone only under a released mark" failed'
check resident_resident_before_populate_breaks_it "$here/resident.m" RESIDENT_BEFORE_POPULATE error \
    'invariant "A: pages gone only under a released mark" failed'
check resident_no_residency_check_breaks_it "$here/resident.m" NO_RESIDENCY_CHECK error \
    'invariant "A: a block handed out is resident, its pages there" failed'
check resident_mark_before_claim_breaks_it "$here/resident.m" MARK_BEFORE_CLAIM error \
    'invariant "A: a block handed out is resident, its pages there" failed'
check resident_stamp_no_recheck_breaks_it "$here/resident.m" STAMP_NO_RECHECK error \
    'a stamp left on a granule in use'
check resident_sweep_not_quiet_breaks_it "$here/resident.m" SWEEP_NOT_QUIET error \
    'the leak sweep frees a block a live process holds'
check resident_alloc_waits_breaks_it "$here/resident.m" "ALLOC_WAITS NO_MAINT" error \
    'liveness property "D: no allocation waits for a trim" violated'
# giveback.m: one granule through a failed refill, trim, refill-ahead, prefault
# and a crash; each broken variant must fail on the property named.
G='invariant "G: pages under a released mark only where someone will give them back" failed'
check giveback_holds "$here/giveback.m" "" ok
check giveback_recovery_always_finishes "$here/giveback.m" LIVE ok
check giveback_no_giveback_breaks_it "$here/giveback.m" NO_GIVEBACK error "$G"
check giveback_stray_forgotten_breaks_it "$here/giveback.m" STRAY_FORGOTTEN error "$G"
check giveback_trim_ignores_busy_breaks_it "$here/giveback.m" TRIM_IGNORES_BUSY error "$G"
check giveback_sweep_gives_up_breaks_it "$here/giveback.m" SWEEP_GIVES_UP error "$G"
check giveback_sweep_no_settle_breaks_it "$here/giveback.m" SWEEP_NO_SETTLE error \
    'invariant "R3: quiet, nobody counted busy, nothing stray, no page under a released mark" failed'
# tree.m: a trim giving back a page of leaves (or of level 1) against openers, closers,
# deaths and recovery (resident.c [tree give-back]).
P='invariant "P: a clear bit has the page there" failed'
R='invariant "R: no recovered opener'"'"'s claim is left" failed'
check tree_holds "$here/tree.m" "" ok
check tree_opener_uncounted_breaks_it "$here/tree.m" OPENER_UNCOUNTED error "$R"
check tree_no_parent_look_breaks_it "$here/tree.m" NO_PARENT_LOOK error "$P"
check tree_one_granule_checked_breaks_it "$here/tree.m" ONE_GRANULE_CHECKED error "$P"
check tree_uncounted_close_breaks_it "$here/tree.m" UNCOUNTED_CLOSE error "$R"
check tree_level1_unheld_breaks_it "$here/tree.m" L1_UNHELD error "$P"
wait
for name in "${names[@]}"; do
    first=$(head -1 "$work/$name.out")
    if [ "${first#PASS }" != "$first" ]; then
        tap_ok "${first#PASS }"
        tap_note "$(sed -n 2p "$work/$name.out")"
    else
        tap_not_ok "model::$name"
        tail -n +2 "$work/$name.out" | tap_diag
    fi
done
tap_end
