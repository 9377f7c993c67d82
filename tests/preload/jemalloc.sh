#!/usr/bin/env bash
# The preload library and a preloaded jemalloc (libjemalloc.so.2) in
# either order: "jemalloc preload" (jemalloc's mmap calls reach the
# library before its constructor has looked libc up) and "preload
# jemalloc" (the library's constructor calls dlsym, which allocates
# through jemalloc) run tests/preload/churn.c to its end: threads of large
# blocks, a fork, a /dev/shm file. Each order runs with jemalloc's
# defaults and with retain:false and no decay (every free unmaps). A run
# that does not end within 60 s is a deadlock. Speaks TAP
# (tests/tap.sh).
# Usage: jemalloc.sh PATH-TO-churn PATH-TO-libdsmpool-preload.so
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"
churn=$1 preload=$2
jemalloc=""
for d in "/usr/lib/$(uname -m)-linux-gnu" /usr/lib64 /usr/lib /usr/local/lib; do
    [ -f "$d/libjemalloc.so.2" ] && { jemalloc=$d/libjemalloc.so.2; break; }
done
if [ -z "$jemalloc" ]; then
    tap_skip_all "libjemalloc.so.2 is not installed (Debian: apt-get install libjemalloc2)"
fi
limit=60
run() { # name LD_PRELOAD MALLOC_CONF
    local name=$1 out rc
    # (the variables for churn alone: timeout itself must not hang with it)
    out=$(timeout -k 5 "$limit" env LD_PRELOAD="$2" MALLOC_CONF="$3" CHURN_SHM_TAG="$$" "$churn" 2>&1)
    rc=$?
    rm -f /dev/shm/dsmpool-preload-churn."$$".* # what a killed run left
    if [ "$rc" = 0 ]; then
        tap_ok "preload_jemalloc::$name: $(tail -1 <<<"$out")"
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        tap_not_ok "preload_jemalloc::$name: no end within $limit s (a deadlock?) with LD_PRELOAD=\"$2\" MALLOC_CONF=\"$3\""
    else
        tap_not_ok "preload_jemalloc::$name: exit status $rc with LD_PRELOAD=\"$2\" MALLOC_CONF=\"$3\""
        head -20 <<<"$out" | tap_diag
    fi
}
unmap="retain:false,dirty_decay_ms:0,muzzy_decay_ms:0"
run jemalloc_first "$jemalloc $preload" ""
run preload_first "$preload $jemalloc" ""
run jemalloc_first_unmapping "$jemalloc $preload" "$unmap"
run preload_first_unmapping "$preload $jemalloc" "$unmap"
tap_end
