#!/usr/bin/env bash
# The container table in a real container (run.sh stock-check): podman from
# Debian, a minimal Debian root made here with debootstrap from this
# machine's own archive (postgresql-15, procps and libnuma1 -- libdsmpool's
# one dependency beyond libc, which deploy/Dockerfile installs too --,
# nothing else; imported once as localhost/dsmpool-pg15-numa, kept), podman's default seccomp profile,
# --network=none, --memory (MEMORY, 4g) and --shm-size=64m (Docker's
# default): the seed query (ROWS rows, work_mem = 1GB, 2 workers) as
# shipped, with the workarounds users use (--shm-size=2g,
# dynamic_shared_memory_type = sysv, min_dynamic_shared_memory = 1GB) and
# with the preload library, bind-mounted read-only from BUILD_DIR and named
# by LD_PRELOAD in the container. The server runs as the image's postgres
# user; its cluster, made once by the first container, is a directory of
# PREFIX mounted into each.
#
# Checked: the container is what it says (default seccomp filter, the
# memory limit, a 64 MB /dev/shm); stock fails there as users report; the
# library's join is right, its postmaster maps a pool, and no data block
# is under a pool name in /dev/shm while it runs (sampled inside). The
# workarounds' rows are the users' own, shown, not judged.
#
# Where podman cannot be installed from the machine's apt sources, or with
# DSMPOOL_NO_CONTAINER=1 (a machine known to run no container), it says so
# and counts nothing: the other stock scripts judge the library without a
# container engine. Anything after the installation that fails -- the
# image, the smallest container -- is a failure.
#
# Usage: podman.sh PREFIX BUILD_DIR   (BUILD_DIR holds libdsmpool-preload.so
# and libdsmpool.so.0). Root, Debian 12. Ends with "N passed, N failed".
# Environment: ROWS (10000000), MEMORY (4g).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${1:?prefix}
build=$(cd "${2:?build dir}" && pwd)
ROWS=${ROWS:-10000000}
MEMORY=${MEMORY:-4g}
# shellcheck source=lib.sh
source "$here/lib.sh"
[ "$(id -u)" = 0 ] || die "run as root (podman, debootstrap)"
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
root="$prefix/podman"
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
image=localhost/dsmpool-pg15-numa:${codename:-unknown}
skip() {
    echo "skip: the real container: $1"
    finish
}
[ "${DSMPOOL_NO_CONTAINER:-0}" = 1 ] && skip "DSMPOOL_NO_CONTAINER=1"

# ---- podman and the image, once ----------------------------------------------------------

missing=""
# podman's recommends too (installed without them): where a machine's
# podman would find them, this one does
for p in podman runc conmon debootstrap containernetworking-plugins catatonit slirp4netns uidmap fuse-overlayfs; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
    log "installing:$missing"
    # shellcheck disable=SC2086 # a list of packages
    apt_install $missing || skip "could not install$missing from this machine's apt sources"
fi
# runc: crun refuses a hybrid cgroup hierarchy (v1 controllers, a v2 mount
# beside them), as this project's machines have. Explicit limits: podman's
# default rlimits are above what root without CAP_SYS_RESOURCE may set here.
PODMAN=(podman --runtime runc)
RUN=("${PODMAN[@]}" run --rm --network=none --ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
echo "podman: $(podman --version | awk '{print $NF}'), runc $(runc --version | awk 'NR == 1 {print $NF}'), kernel $(uname -r)"

mkdir -p "$root"
if ! "${PODMAN[@]}" image exists "$image"; then
    read -r uri key < <(archive_of_machine) || { fail "no Debian archive in this machine's apt sources for debootstrap"; finish; }
    keyring=()
    [ "$key" != - ] && keyring=(--keyring="$key")
    log "the image: debootstrap $codename (minbase, postgresql-15, procps, libnuma1) from $uri"
    rm -rf "$root/rootfs"
    mkdir -p "$root/rootfs/etc/postgresql-common/createcluster.d"
    echo "create_main_cluster = false" >"$root/rootfs/etc/postgresql-common/createcluster.d/no-main.conf"
    debootstrap "${keyring[@]}" --variant=minbase --include=postgresql-15,procps,libnuma1 "$codename" "$root/rootfs" "$uri" \
        >"$root/debootstrap.log" 2>&1 || { fail "debootstrap failed: $(tail -2 "$root/debootstrap.log")"; finish; }
    rm -rf "$root"/rootfs/var/cache/apt/archives/*.deb "$root"/rootfs/var/lib/apt/lists/*
    tar -C "$root/rootfs" --numeric-owner -cf - . | "${PODMAN[@]}" import --change 'CMD ["/bin/bash"]' - "$image" \
        >"$root/import.log" 2>&1 || { fail "podman import failed: $(tail -2 "$root/import.log")"; finish; }
    rm -rf "$root/rootfs"
fi
# each container is named, removed before and at the exit: a killed run
# leaves none running over the next run's cluster
cname=dsmpool-podman-check
RUN+=(--name "$cname")
cleanup() { "${PODMAN[@]}" rm -f "$cname" >/dev/null 2>&1; return 0; }
trap cleanup EXIT
cleanup
if ! out=$("${RUN[@]}" "$image" true 2>&1); then
    fail "podman cannot start a container here: $out (DSMPOOL_NO_CONTAINER=1 leaves this out on a machine that runs none)"
    finish
fi
# shellcheck disable=SC2016 # dpkg-query's own format
pgver=$("${RUN[@]}" "$image" dpkg-query -W -f '${Version}' postgresql-15)
echo "image: $image, Debian's postgresql-15 $pgver"

# ---- the cluster, once per run, in a directory of PREFIX ------------------------------------

uid=$("${RUN[@]}" "$image" id -u postgres)
gid=$("${RUN[@]}" "$image" id -g postgres)
rm -rf "${root:?}/data" "${root:?}/lib" "${root:?}/out"
mkdir -p "$root/data" "$root/lib" "$root/out"
cp -L "$build/libdsmpool-preload.so" "$build/libdsmpool.so.0" "$root/lib/"
chmod -R a+rX "$root/lib"
chown "$uid:$gid" "$root/data" "$root/out"
# in_container: the script each container runs (as root, the server as
# postgres): $1 what (init or a configuration), $2 server options, $3
# LD_PRELOAD or empty; it writes its results under /out
cat >"$root/lib/in_container.sh" <<'EOF'
#!/bin/bash
what=$1 opts=$2 pre=$3
B=/usr/lib/postgresql/15/bin
D=/data/pg
as_pg() { su postgres -s /bin/bash -c "$*"; }
mkdir -p /var/run/postgresql && chown postgres: /var/run/postgresql
if [ "$what" = init ]; then
    as_pg "$B/initdb -D $D -U postgres -A trust --no-sync" >/out/initdb.log 2>&1 || exit 1
    as_pg "$B/pg_ctl -D $D -l /out/init.log -w start" >/dev/null || exit 1
    as_pg "psql -X -q -U postgres -c 'create table t (i int)' -c 'insert into t select generate_series(1, $ROWS)' -c 'analyze t' -c 'create extension pg_prewarm'" || exit 1
    as_pg "$B/pg_ctl -D $D -w stop" >/dev/null
    exit 0
fi
# the container as seen from inside
{
    echo "seccomp $(awk '/^Seccomp:/ {print $2}' /proc/self/status)"
    echo "shm $(df -k --output=size /dev/shm | tail -1)"
    echo "memory $(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null)"
} >"/out/$what.env"
as_pg "${pre:+LD_PRELOAD=$pre} $B/pg_ctl -D $D -l /out/$what.log -w -t 120 ${opts:+-o '$opts'} start" >/dev/null ||
    { echo "did not start: $(grep -m1 -E 'FATAL|ERROR' "/out/$what.log")" >"/out/$what.res"; exit 0; }
pm=$(head -1 $D/postmaster.pid)
# the pool, as the server's user (container root has no CAP_SYS_PTRACE)
as_pg "grep -c memfd:dsmpool /proc/$pm/maps" >"/out/$what.pool" 2>/dev/null
as_pg "psql -X -q -A -t -U postgres -c \"select pg_prewarm('t')\"" >/dev/null
# data blocks under pool names (mode 0000) in /dev/shm, sampled while the join runs
(max=0
 while [ ! -e /tmp/done ]; do
     b=$(find /dev/shm -maxdepth 1 -name 'PostgreSQL.*' -perm 0000 -printf '%b\n' 2>/dev/null | awk '{s += $1} END {print s + 0}')
     [ "$b" -gt "$max" ] && max=$b
     sleep 0.1
 done
 echo "$max" >"/out/$what.blocks") &
t0=$(date +%s%N)
res=$(as_pg "psql -X -q -A -t -U postgres -c \"set work_mem = '1GB'\" -c 'set max_parallel_workers_per_gather = 2' -c 'select count(*) from t t1 join t t2 using (i)'" 2>&1 | tail -1)
t1=$(date +%s%N)
touch /tmp/done
wait
if [ "$res" = "$ROWS" ]; then
    echo "right, $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f s", (b - a) / 1e9}')" >"/out/$what.res"
else
    echo "$res" | sed 's/^psql:[^:]*: //' >"/out/$what.res"
fi
grep -m1 'terminated by signal' "/out/$what.log" >"/out/$what.sig"
as_pg "$B/pg_ctl -D $D -w -t 120 stop -m fast" >/dev/null
exit 0
EOF
chmod a+rx "$root/lib/in_container.sh"
MOUNTS=(-v "$root/data:/data" -v "$root/out:/out" -v "$root/lib:/opt/dsmpool:ro" -e "ROWS=$ROWS")

log "the cluster: $ROWS rows (a container of its own)"
"${RUN[@]}" "${MOUNTS[@]}" --memory="$MEMORY" "$image" /opt/dsmpool/in_container.sh init >"$root/init.out" 2>&1 ||
    { fail "the cluster could not be made in the container: $(tail -3 "$root/init.out") $(tail -3 "$root/out/initdb.log" "$root/out/init.log" 2>/dev/null)"; finish; }

# ---- the table --------------------------------------------------------------------------

rows=""
for c in stock shm-2g sysv min-dsm-1g preload; do
    shm=64m opt="" pre=""
    case $c in
    stock) set_="dynamic_shared_memory_type = posix (the default)" ;;
    shm-2g) set_="--shm-size=2g" shm=2g ;;
    sysv) set_="dynamic_shared_memory_type = sysv" opt="-c dynamic_shared_memory_type=sysv" ;;
    min-dsm-1g) set_="min_dynamic_shared_memory = 1GB" opt="-c min_dynamic_shared_memory=1GB" ;;
    preload) set_="LD_PRELOAD=libdsmpool-preload.so" pre=/opt/dsmpool/libdsmpool-preload.so ;;
    esac
    log "container: $c"
    "${RUN[@]}" "${MOUNTS[@]}" --memory="$MEMORY" --shm-size="$shm" "$image" \
        /opt/dsmpool/in_container.sh "$c" "$opt" "$pre" >"$root/$c.out" 2>&1 ||
        { fail "container $c: podman run failed: $(tail -3 "$root/$c.out")"; continue; }
    res=$(cat "$root/out/$c.res" 2>/dev/null)
    sig=$(cat "$root/out/$c.sig" 2>/dev/null)
    rows="$rows| $c | $set_ | ${res:-no result}${sig:+; $sig} |\n"
    case $c in
    stock)
        read -r _ sc < <(grep seccomp "$root/out/stock.env")
        read -r _ shmk < <(grep shm "$root/out/stock.env")
        read -r _ mem < <(grep memory "$root/out/stock.env")
        [ "$sc" = 2 ] && [ "$shmk" = 65536 ] && [ -n "$mem" ] && [ "$mem" != max ] && [ "$mem" -lt $((64 << 30)) ] &&
            pass "the container: podman's default seccomp filter, a 64 MB /dev/shm, memory limited to $((mem >> 20)) MB" ||
            fail "the container is not what it says: seccomp mode ${sc:-?}, /dev/shm ${shmk:-?} kB, memory limit ${mem:-?}"
        grep -q 'No space left on device' <<<"$res" && pass "container: stock fails as users report: $res" ||
            fail "container: stock in a 64 MB /dev/shm did not fail as expected: ${res:-no result}"
        ;;
    preload)
        [ "$res" != "${res#right}" ] && [ -z "$sig" ] && pass "container: the preload library serves the join ($res)" ||
            fail "container: with the preload library: ${res:-no result} $sig"
        [ "$(cat "$root/out/preload.pool" 2>/dev/null)" = 1 ] && pass "container: the postmaster maps one pool" ||
            fail "container: the postmaster's pool mappings: $(cat "$root/out/preload.pool" 2>/dev/null)"
        [ "$(cat "$root/out/preload.blocks" 2>/dev/null)" = 0 ] &&
            pass "container: no data in /dev/shm while the pool served (sampled every 0.1 s inside)" ||
            fail "container: $(cat "$root/out/preload.blocks" 2>/dev/null) blocks of data under pool names in /dev/shm"
        ;;
    esac
done
{
    echo "The seed query ($ROWS rows, work_mem = 1GB, 2 workers) in a podman container (runc, default seccomp,"
    echo "--network=none, --memory=$MEMORY, --shm-size=64m unless said): Debian's postgresql-15 $pgver, $(nproc) CPUs:"
    echo
    echo "| config | setting | the join |"
    echo "| --- | --- | --- |"
    printf "%b" "$rows"
} | tee "$root/container.txt"
finish
