#!/usr/bin/env bash
# tests/isolate.c keeps its promises: what another program has in /dev/shm
# and /tmp is not seen inside, System V segments of the host neither, the
# program's own pid namespace has its own /proc, the tests can name what
# the host shares (DSMPOOL_ISOLATE_RUN), the exit status comes back, and
# killing isolate (as a timeout around `meson test` does) kills every
# process the program started, however it hid. Speaks TAP
# (tests/tap.sh).
# Usage: run.sh PATH-TO-isolate
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"
iso=$1
check() { # name, then a command whose success is the check
    local name=$1
    shift
    if "$@"; then
        tap_ok "isolate::$name"
    else
        tap_not_ok "isolate::$name"
    fi
}
if [ "$(id -u)" != 0 ]; then
    tap_skip_all "needs root (namespaces)"
fi
tag=dsmpool.isolate-check-$$
touch "/dev/shm/$tag" "/tmp/$tag"
shmid=$(python3 -c 'import ctypes,sys; l=ctypes.CDLL(None); print(l.shmget(0, 4096, 0o1600))')
trap 'rm -f "/dev/shm/$tag" "/tmp/$tag"; [ -n "$shmid" ] && ipcrm -m "$shmid" 2>/dev/null' EXIT
check private_dev_shm "$iso" sh -c "[ ! -e /dev/shm/$tag ] && [ -w /dev/shm ]"
# (named without "/tmp/": isolate binds back in what its arguments name there)
check private_tmp "$iso" sh -c "! ls /tmp | grep -q $tag && touch /tmp/x"
check private_sysv "$iso" sh -c "! ipcs -m | grep -qw '$shmid'"
check own_pid_namespace "$iso" sh -c '[ "$$" -lt 10 ] && [ -e /proc/$$/stat ] && [ ! -e /proc/'$$' ]'
# shellcheck disable=SC2016 # sh -c's own variable
check run_named "$iso" sh -c '[ "$DSMPOOL_ISOLATE_RUN" -gt 0 ]'
"$iso" sh -c 'exit 7'
check exit_status_comes_back [ $? = 7 ]
"$iso" sh -c 'kill -SEGV $$'
check signal_comes_back [ $? = $((128 + 11)) ]
# a program that leaves a process behind when it exits, and one that is
# killed with its children hiding in a new session
"$iso" sh -c "(setsid sleep 1001.$$ &) ; exit 0"
sleep 0.3
check nothing_left_after_exit sh -c "! pgrep -f 'sleep 100[1][.]$$' >/dev/null"
"$iso" sh -c "(setsid sleep 1002.$$ &) ; sleep 1003.$$" &
iso_pid=$!
for _ in $(seq 50); do pgrep -f "sleep 100[2][.]$$" >/dev/null && break; sleep 0.1; done
kill -9 "$iso_pid"
wait "$iso_pid" 2>/dev/null
for _ in $(seq 50); do pgrep -f "sleep 100[23][.]$$" >/dev/null || break; sleep 0.1; done
check nothing_left_after_a_kill sh -c "! pgrep -f 'sleep 100[23][.]$$' >/dev/null"
pkill -f "sleep 100[123][.]$$" 2>/dev/null
tap_end
