#!/usr/bin/env bash
# The Debian packages (debian/), built and judged as a user gets them. The
# build dependencies come from this machine's apt sources; the tree (tracked
# files, and untracked ones git does not ignore) is copied outside the clone
# and built there by dpkg-buildpackage -us -uc (the source and every binary
# package); lintian's output on the .changes is shown in full. Then the
# packages are installed where no build tree is, and judged:
#
#   packages   one postgresql-<major>-dsmpool for each major that
#              debian/pgversions and this machine's postgresql-common
#              support, beside libdsmpool0, libdsmpool-dev and dsmpool-tools;
#              each holds what debian/control says, and no file is in two
#   lintian    no error and no warning (the info and pedantic tags it shows
#              are explained in docs/packages.md)
#   dev        in a throwaway overlay of this machine's root (a private mount
#              namespace; /tmp, /var/tmp, /usr/local, /root and the clone
#              hidden), dpkg -i of libdsmpool0, libdsmpool-dev and
#              dsmpool-tools: libdsmpool-dev's example embed.c compiled with
#              pkg-config (shared, and -static with libdsmpool.a) and with
#              CMake's find_package(dsmpool), each run; man -w finds both
#              pages
#   container  podman.sh's image (Debian's postgresql-15 on a minimal root,
#              made as podman.sh makes it where missing) with its
#              postgresql-15 upgraded from this machine's apt sources, kept
#              as localhost/dsmpool-pg15-numa-upgraded and made again when
#              its server is older than the packages need; --network=none,
#              --shm-size=64m: dpkg -i of the runtime packages;
#              dsmpool-inspect --help; a cluster made by pg_createcluster;
#              the join (ROWS rows, 2 workers, work_mem = 1GB) fails in stock
#              as users report; with the LD_PRELOAD line in the cluster's
#              environment file and shared_preload_libraries = 'dsmpool' (the
#              operator's page, integrations/postgresql/README.md) it is
#              right, and pg_dsmpool says the pool served its segments; the
#              packages purge and leave no file
#
# Usage: tools/debian.sh   (root, Debian 12). Ends with "N passed, N failed".
# Environment: ROWS (2000000: the join of 1 million rows fits in a 64 MB
# /dev/shm, 1.5 million just overflow it, 2 million with a margin);
# DSMPOOL_NO_CONTAINER=1 leaves the container out, said and not counted, as
# podman.sh does; KEEP=1 keeps the work directory (its path is printed) with
# the packages and logs.
set -uo pipefail
clone=$(cd "$(dirname "$0")/.." && pwd)
ROWS=${ROWS:-2000000}
t_all=$SECONDS
[ "$(id -u)" = 0 ] || {
    echo "$(basename "$0"): run as root (apt, dpkg, podman, mount namespaces)" >&2
    exit 1
}
work=$(mktemp -d /tmp/dsmpool-debian.XXXXXX)
# shellcheck disable=SC2034 # lib.sh's paths hang from it as it is sourced
prefix=$work
# shellcheck source=SCRIPTDIR/../integrations/postgresql/lib.sh disable=SC1091
source "$clone/integrations/postgresql/lib.sh"
# shellcheck disable=SC1091 # the machine's
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
image=localhost/dsmpool-pg15-numa:${codename:-unknown}
upimage=localhost/dsmpool-pg15-numa-upgraded:${codename:-unknown}
# runc and explicit limits, for podman.sh's reasons (a hybrid cgroup
# hierarchy; rlimits root without CAP_SYS_RESOURCE may set)
PODMAN=(podman --runtime runc)
cname=dsmpool-debian-check
# shellcheck disable=SC2317 # run by the trap
cleanup() {
    command -v podman >/dev/null && "${PODMAN[@]}" rm -f "$cname" >/dev/null 2>&1
    if [ "${KEEP:-0}" = 1 ]; then echo "kept: $work" >&2; else rm -rf "$work"; fi
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

installed() { dpkg-query -W -f '${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
# install_missing PACKAGE...: those not installed, from the machine's apt sources
install_missing() {
    local p absent=()
    for p in "$@"; do installed "$p" || absent+=("$p"); done
    [ ${#absent[@]} -eq 0 ] && return 0
    log "installing: ${absent[*]}"
    apt_install "${absent[@]}"
}
# tally: the ok:/FAILED: lines of a part that ran elsewhere (a namespace, a
# container), counted here; other lines pass through. The part's last line
# is "end": without it the part died on the way, which is a failure.
tally() {
    local what=$1 line ended=0
    while IFS= read -r line; do
        case $line in
        "ok: "*) pass "${line#ok: }" ;;
        "FAILED: "*) fail "${line#FAILED: }" ;;
        end) ended=1 ;;
        *) echo "$line" ;;
        esac
    done
    [ "$ended" = 1 ] || fail "$what: stopped before its end (logs: KEEP=1 keeps $work)"
}

# ---- build dependencies, the tree, dpkg-buildpackage ------------------------------------

# the tools, and what the checks compile with; debian/control's
# Build-Depends are asked of dpkg-checkbuilddeps below
install_missing dpkg-dev debhelper fakeroot lintian git gcc libc6-dev make cmake ninja-build \
    pkg-config man-db || { fail "the build tools could not be installed from this machine's apt sources"; finish; }
src=$work/src/dsmpool
mkdir -p "$src"
git -c safe.directory="$clone" -C "$clone" ls-files -z --cached --others --exclude-standard |
    (cd "$clone" && while IFS= read -r -d '' f; do
        if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
    done | tar --null -T - -cf -) | tar -C "$src" -xf - ||
    { fail "the tree could not be copied from $clone to $src"; finish; }
[ -f "$src/debian/control" ] || { fail "no debian/control in $clone"; finish; }
unmet=$(cd "$src" && dpkg-checkbuilddeps 2>&1 | sed -n 's/.*Unmet build dependencies: //p' |
    sed -E 's/ *\([^)]*\)//g; s/ *\|[^ ]*//g')
if [ -n "$unmet" ]; then
    # shellcheck disable=SC2086 # a list of package names
    install_missing $unmet || { fail "the build dependencies could not be installed: $unmet"; finish; }
fi

log "dpkg-buildpackage -us -uc in $src"
t0=$SECONDS
# PG_UPDATECONTROL: debian/control is made again, in the copy, for the
# majors this machine supports (the clone's is Debian 12's: 15 alone)
if (cd "$src" && PG_UPDATECONTROL=yes dpkg-buildpackage -us -uc) >"$work/build.log" 2>&1; then
    t_build=$((SECONDS - t0))
else
    tail -40 "$work/build.log"
    fail "dpkg-buildpackage failed after $((SECONDS - t0)) s (its last lines above)"
    finish
fi
cd "$work/src" || die "no $work/src"
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
arch=$(dpkg-architecture -q DEB_HOST_ARCH)
ma=$(dpkg-architecture -q DEB_HOST_MULTIARCH)
majors=$(cd "$src" && pg_buildext supported-versions | tr '\n' ' ' | sed 's/ $//')
deb() { echo "$work/src/${1}_${version}_$arch.deb"; }
pkgs=(libdsmpool0 libdsmpool-dev dsmpool-tools)
for v in $majors; do pkgs+=("postgresql-$v-dsmpool"); done
n=0
for p in "${pkgs[@]}"; do [ -f "$(deb "$p")" ] && n=$((n + 1)); done
if [ "$n" = ${#pkgs[@]} ] && [ -f "dsmpool_$version.dsc" ]; then
    pass "dpkg-buildpackage: the source and ${pkgs[*]} ($version, PostgreSQL majors: $majors) in $t_build s"
else
    fail "dpkg-buildpackage: $n of ${#pkgs[@]} packages (${pkgs[*]}): $(echo ./*.deb)"
fi

# ---- what each package holds --------------------------------------------------------------

# holds PACKAGE PATH...: each path (a file or a link) is in the package
holds() {
    local p=$1 f paths lacks="" all
    shift
    paths=$(dpkg-deb -c "$(deb "$p")" 2>/dev/null | awk '{print $6}' | sed 's|^\./|/|')
    for f in "$@"; do grep -qxF "$f" <<<"$paths" || lacks="$lacks $f"; done
    all="$*"
    if [ -z "$lacks" ]; then pass "packages: $p holds ${all//\/usr\/lib\/$ma\//LIBDIR/}"; else fail "packages: $p lacks$lacks"; fi
}
L=/usr/lib/$ma
holds libdsmpool0 "$L/libdsmpool.so.0" "$L/libdsmpool.so.0.1.0"
holds libdsmpool-dev /usr/include/dsmpool.h "$L/libdsmpool.so" "$L/libdsmpool.a" "$L/pkgconfig/dsmpool.pc" \
    "$L/cmake/dsmpool/dsmpoolConfig.cmake" "$L/cmake/dsmpool/dsmpoolConfigVersion.cmake" \
    /usr/share/man/man3/dsmpool.3.gz /usr/share/doc/libdsmpool-dev/examples/embed.c
holds dsmpool-tools /usr/bin/dsmpool-inspect /usr/share/man/man1/dsmpool-inspect.1.gz
for v in $majors; do
    holds "postgresql-$v-dsmpool" "/usr/lib/postgresql/$v/lib/dsmpool.so" "/usr/lib/postgresql/$v/lib/libdsmpool-preload.so" \
        "/usr/share/postgresql/$v/extension/dsmpool.control" "/usr/share/postgresql/$v/extension/dsmpool--1.0.sql"
done
# files and links, not directories, in more than one package (dpkg refuses
# to install the second)
shared=$(for p in "${pkgs[@]}"; do dpkg-deb -c "$(deb "$p")" | awk '$1 !~ /^d/ {print $6}'; done | sort | uniq -d)
if [ -z "$shared" ]; then pass "packages: no file is in two packages"; else fail "packages: in two packages: $(echo "$shared" | tr '\n' ' ')"; fi
syms=$(dpkg-deb -I "$(deb libdsmpool0)" symbols 2>/dev/null | grep -c '^ dsmpool_[A-Za-z0-9_]*@DSMPOOL_0 ')
mkdir -p "$work/lib0"
dpkg-deb -x "$(deb libdsmpool0)" "$work/lib0"
exported=$(nm -D --defined-only "$work/lib0$L/libdsmpool.so.0.1.0" 2>/dev/null | grep -c ' T ')
if [ "$syms" -gt 0 ] && [ "$syms" = "$exported" ]; then
    pass "packages: libdsmpool0's symbols file lists the $exported functions the library exports, versioned DSMPOOL_0"
else
    fail "packages: libdsmpool0's symbols file lists $syms symbols, the library exports $exported functions"
fi

# ---- lintian --------------------------------------------------------------------------------

# as nobody (lintian warns against root), on the .changes: the source, the
# binaries and their debug symbols
chmod 755 "$work" "$work/src"
log "lintian -I --pedantic dsmpool_${version}_$arch.changes"
lint=$(runuser -u nobody -- lintian -I --pedantic "dsmpool_${version}_$arch.changes" 2>&1)
rc=$?
echo "lintian ($(lintian --version | awk '{print $NF}')), -I --pedantic:"
[ -n "$lint" ] && while IFS= read -r l; do echo "    $l"; done <<<"$lint"
e=$(grep -c '^E: ' <<<"$lint")
w=$(grep -c '^W: ' <<<"$lint")
infos=$(grep -cE '^[IP]: ' <<<"$lint")
if [ "$rc" -le 1 ] && [ "$e" = 0 ] && [ "$w" = 0 ]; then
    pass "lintian: no error, no warning ($infos info and pedantic tags, above: docs/packages.md explains them)"
else
    fail "lintian: $e errors, $w warnings (exit status $rc)"
fi

# ---- libdsmpool-dev in an overlay of this machine's root ------------------------------------

mkdir -p "$work/debs" "$work/dev"
cp "$(deb libdsmpool0)" "$(deb libdsmpool-dev)" "$(deb dsmpool-tools)" "$work/debs/"
for v in $majors; do cp "$(deb "postgresql-$v-dsmpool")" "$work/debs/"; done
# dev.sh OVERLAY_DIR DEBS_DIR CLONE MULTIARCH: run in a mount namespace of its
# own, so that every mount goes with it, however it ends
cat >"$work/dev.sh" <<'EOF'
#!/bin/bash
set -u
o=$1 debs=$2 clone=$3 ma=$4
r=$o/root
mkdir -p "$o/upper" "$o/work" "$r"
if ! mount -t overlay overlay -o "lowerdir=/,upperdir=$o/upper,workdir=$o/work" "$r" ||
    ! mount -t proc proc "$r/proc" || ! mount --rbind /dev "$r/dev" || ! mount --rbind /sys "$r/sys"; then
    echo "FAILED: dev: no overlay of / with /proc, /dev and /sys could be mounted"
    echo end
    exit 0
fi
# the build tree (under /tmp), the clone and what was installed by hand are
# not there: what compiles, compiles against the packages
for d in /tmp /var/tmp /usr/local /root "$clone"; do
    if [ -d "$r$d" ]; then mount -t tmpfs tmpfs "$r$d"; fi
done
mkdir -p "$r/tmp/debs" "$r/tmp/c"
cp "$debs"/libdsmpool0_*.deb "$debs"/libdsmpool-dev_*.deb "$debs"/dsmpool-tools_*.deb "$r/tmp/debs/"
cp "$debs/dev-in.sh" "$r/tmp/"
chroot "$r" /bin/bash /tmp/dev-in.sh "$ma"
EOF
# dev-in.sh MULTIARCH: in the overlay's root, as a developer would
cat >"$work/debs/dev-in.sh" <<'EOF'
#!/bin/bash
ma=$1
ok() { echo "ok: dev: $*"; }
bad() { echo "FAILED: dev: $*"; }
hello() { [[ "$1" == 'worker wrote "hello"'* ]]; }
cd /tmp/c || exit 1
if dpkg -i /tmp/debs/*.deb >dpkg.log 2>&1; then
    ok "dpkg -i of libdsmpool0, libdsmpool-dev and dsmpool-tools on this machine's root (an overlay)"
else
    bad "dpkg -i: $(tail -3 dpkg.log)"
    echo end
    exit 0
fi
cp /usr/share/doc/libdsmpool-dev/examples/embed.c .
pc=$(pkg-config --variable=pcfiledir dsmpool)
out="" lib=""
# shellcheck disable=SC2046 # pkg-config's words
if [ "$pc" = "/usr/lib/$ma/pkgconfig" ] && gcc -Wall -o embed embed.c $(pkg-config --cflags --libs dsmpool) >cc.log 2>&1 &&
    out=$(./embed 2>&1) && hello "$out" && lib=$(ldd ./embed | awk '$1 == "libdsmpool.so.0" {print $3}') &&
    [ "$(readlink -f "$lib")" = "$(readlink -f "/usr/lib/$ma/libdsmpool.so.0")" ]; then
    ok "pkg-config ($pc/dsmpool.pc, $(pkg-config --modversion dsmpool)): embed.c compiles, links /usr/lib/$ma/libdsmpool.so.0, runs: $out"
else
    bad "pkg-config: dsmpool.pc in '$pc'; libdsmpool.so.0 from '$lib'; $(tail -3 cc.log) $out"
fi
out=""
# shellcheck disable=SC2046 # pkg-config's words
if gcc -static -o embed-static embed.c $(pkg-config --static --cflags --libs dsmpool) >cc-static.log 2>&1 &&
    ! readelf -d embed-static 2>/dev/null | grep -q NEEDED && out=$(./embed-static 2>&1) && hello "$out"; then
    ok "pkg-config --static: embed.c and libdsmpool.a (libnuma.a) make a static program that runs"
else
    bad "pkg-config --static: $(grep -v 'statically linked applications' cc-static.log | tail -3) $out"
fi
out="" dir=""
mkdir -p cm
cp embed.c cm/
cat >cm/CMakeLists.txt <<'CM'
cmake_minimum_required(VERSION 3.16)
project(embed C)
find_package(dsmpool 0.1 CONFIG REQUIRED)
add_executable(embed embed.c)
target_link_libraries(embed PRIVATE dsmpool::dsmpool)
CM
if cmake -S cm -B cm/build -G Ninja >cmake.log 2>&1 && cmake --build cm/build >>cmake.log 2>&1 &&
    dir=$(sed -n 's/^dsmpool_DIR:PATH=//p' cm/build/CMakeCache.txt) && [ "$dir" = "/usr/lib/$ma/cmake/dsmpool" ] &&
    out=$(cm/build/embed 2>&1) && hello "$out"; then
    ok "CMake: find_package(dsmpool 0.1) in $dir; dsmpool::dsmpool links and runs"
else
    bad "CMake: dsmpool_DIR '$dir'; $(tail -4 cmake.log) $out"
fi
p1=$(man -w dsmpool-inspect 2>&1)
p3=$(man -w 3 dsmpool 2>&1)
if [ "$p1" = /usr/share/man/man1/dsmpool-inspect.1.gz ] && [ "$p3" = /usr/share/man/man3/dsmpool.3.gz ]; then
    ok "man -w finds dsmpool-inspect(1) and dsmpool(3) where the packages put them"
else
    bad "man -w: '$p1', '$p3'"
fi
echo end
EOF
log "libdsmpool-dev: in an overlay of this machine's root"
tally dev < <(unshare -m --propagation private bash "$work/dev.sh" "$work/dev" "$work/debs" "$clone" "$ma" 2>&1)

# ---- the container ---------------------------------------------------------------------------

# in_container.sh MAJOR ROWS: as root in the container (the server as
# postgres, started by Debian's pg_ctlcluster as an operator starts it)
mkdir -p "$work/ctr" "$work/out"
cat >"$work/ctr/in_container.sh" <<'EOF'
#!/bin/bash
V=$1 ROWS=$2
ok() { echo "ok: container: $*"; }
bad() { echo "FAILED: container: $*"; }
as_pg() { runuser -u postgres -- "$@"; }
psql_() { as_pg psql -X -q -A -t "$@"; }
join_() {
    psql_ -c "set work_mem = '1GB'" -c "set max_parallel_workers_per_gather = 2" \
        -c "select count(*) from t t1 join t t2 using (i)" 2>&1 | grep -v '^CONTEXT:' | tail -1
}
stop() { # the part ends here
    bad "$*"
    echo end
    exit 0
}
pkgs=(libdsmpool0 dsmpool-tools "postgresql-$V-dsmpool")
shm=$(df -k --output=size /dev/shm | tail -1 | tr -d ' ')
nets=$(cd /sys/class/net && echo *)
if [ "$shm" = 65536 ] && [ "$nets" = lo ]; then
    ok "--network=none, a 64 MB /dev/shm; Debian's postgresql-$V $(dpkg-query -W -f '${Version}' "postgresql-$V")"
else
    bad "the container is not what it says: /dev/shm $shm kB, network devices $nets"
fi
dpkg -i /debs/libdsmpool0_*.deb /debs/dsmpool-tools_*.deb /debs/postgresql-"$V"-dsmpool_*.deb >/out/dpkg.log 2>&1 ||
    stop "dpkg -i: $(tail -3 /out/dpkg.log)"
ok "dpkg -i of ${pkgs[*]}"
out=$(dsmpool-inspect --help 2>&1)
if [[ "$out" == usage:* ]] && [ -f /usr/share/man/man1/dsmpool-inspect.1.gz ]; then
    ok "dsmpool-inspect --help runs; its page is /usr/share/man/man1/dsmpool-inspect.1.gz"
else
    bad "dsmpool-inspect --help: $(head -2 <<<"$out")"
fi
files=$(dpkg -L "${pkgs[@]}" | while read -r f; do if [ -f "$f" ] || [ -L "$f" ]; then echo "$f"; fi; done)
conf=/etc/postgresql/$V/main
log=/var/log/postgresql/postgresql-$V-main.log
{ pg_createcluster "$V" main -- --no-sync >/out/createcluster.log 2>&1 && pg_ctlcluster "$V" main start; } ||
    stop "the cluster could not be made and started: $(tail -3 /out/createcluster.log "$log" 2>/dev/null)"
psql_ -c "create table t (i int)" -c "insert into t select generate_series(1, $ROWS)" -c "analyze t" >/dev/null
res=$(join_)
if [[ "$res" == *"No space left on device"* ]]; then
    ok "stock (no line in the environment file): the join of $ROWS rows fails, as users report: ${res#*ERROR:  }"
else
    bad "stock: the join of $ROWS rows in a 64 MB /dev/shm did not fail as expected: $res"
fi
# the operator's page: the environment file, and the extension
pre=/usr/lib/postgresql/$V/lib/libdsmpool-preload.so
echo "LD_PRELOAD = '$pre'" >>"$conf/environment"
echo "shared_preload_libraries = 'dsmpool'" >"$conf/conf.d/dsmpool.conf"
: >"$log"
pg_ctlcluster "$V" main restart || stop "the server did not start with the packages: $(grep -m3 -E 'FATAL|ERROR' "$log")"
psql_ -c "create extension dsmpool" >/dev/null
res=$(join_)
if [ "$res" = "$ROWS" ]; then
    ok "with LD_PRELOAD = '$pre' and shared_preload_libraries = 'dsmpool': the join is right ($res)"
else
    bad "with the packages: the join said: $res"
fi
IFS='|' read -r serving served refused ver < <(psql_ -c "select serving, segments_served, segments_refused,
    (select extversion from pg_extension where extname = 'dsmpool') from pg_dsmpool")
pm=$(head -1 "/var/lib/postgresql/$V/main/postmaster.pid")
maps=$(as_pg grep -c memfd:dsmpool "/proc/$pm/maps")
if [ "$serving" = t ] && [ "${served:-0}" -gt 0 ] && [ "$maps" = 1 ]; then
    ok "pg_dsmpool (extension $ver): serving, $served segments served, $refused refused; the postmaster maps one pool"
else
    bad "pg_dsmpool: serving '$serving', served '$served', refused '$refused'; the postmaster's pool mappings: $maps"
fi
if grep -q 'LOG:  dsmpool: generation 1: a pool of' "$log" && ! grep -q 'dsmpool: no pool' "$log"; then
    ok "the extension's maintainer says what the pool is: $(grep -m1 -o 'dsmpool: generation 1: .*' "$log")"
else
    bad "the log: $(grep -m3 dsmpool "$log")"
fi
pg_ctlcluster "$V" main stop
dpkg --purge "${pkgs[@]}" >/out/purge.log 2>&1 || stop "dpkg --purge: $(tail -3 /out/purge.log)"
left=$(while read -r f; do if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; fi; done <<<"$files")
if [ -z "$left" ]; then
    ok "dpkg --purge of ${pkgs[*]} leaves none of their $(wc -l <<<"$files") files"
else
    bad "dpkg --purge left: $left"
fi
echo end
EOF
chmod a+rx "$work/ctr/in_container.sh"

# upgrade.sh ROOTFS SOURCES: in a mount namespace of its own, postgresql-15
# of ROOTFS upgraded through apt in a chroot, from SOURCES (this machine's
# own deb entries); nothing of it is left in ROOTFS but the upgrade
cat >"$work/upgrade.sh" <<'EOF'
#!/bin/bash
set -u
r=$1 sources=$2
mount -t proc proc "$r/proc" && mount --rbind /dev "$r/dev" || exit 1
list=/etc/apt/sources.list.d/dsmpool-upgrade.sources
cp "$sources" "$r$list"
sed -n 's/^Signed-By: //p' "$sources" | sort -u | while read -r key; do
    [ -f "$r$key" ] || { mkdir -p "$(dirname "$r$key")" && cp "$key" "$r$key"; }
done
cp --remove-destination /etc/resolv.conf "$r/etc/resolv.conf"
# no service is started in the root (a chroot runs none)
printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
chmod 755 "$r/usr/sbin/policy-rc.d"
chroot "$r" apt-get update -qq &&
    chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --only-upgrade --no-install-recommends postgresql-15
rc=$?
chroot "$r" apt-get clean
rm -rf "$r$list" "$r/usr/sbin/policy-rc.d" "$r"/var/lib/apt/lists/*
: >"$r/etc/resolv.conf"
exit $rc
EOF

container() {
    [ "${DSMPOOL_NO_CONTAINER:-0}" = 1 ] && { echo "skip: the container: DSMPOOL_NO_CONTAINER=1"; return 0; }
    # podman.sh's packages, with the recommends it names
    install_missing podman runc conmon debootstrap containernetworking-plugins catatonit slirp4netns uidmap \
        fuse-overlayfs || { echo "skip: the container: podman could not be installed from this machine's apt sources"; return 0; }
    local V=15 need have
    if ! grep -qw "$V" <<<"$majors"; then
        fail "container: no postgresql-$V-dsmpool was built (majors: $majors), and the image has postgresql-$V alone"
        return 0
    fi
    # The server the package needs: pg_buildext makes it depend on the minor
    # version it was built against (/etc/postgresql-common/minor_versions),
    # which may come from the -security or -updates suite; podman.sh's
    # image has the release suite's. The packages are judged on that image
    # with its postgresql-15 upgraded from this machine's apt sources, as a
    # server kept up to date is: localhost/dsmpool-pg15-numa-upgraded, made
    # again when its server is older than the packages need.
    need=$(dpkg-deb -f "$(deb "postgresql-$V-dsmpool")" Depends | grep -oE "postgresql-$V \(>> [^)]*\)" | sed -E 's/.*>> ([^)]*)\)/\1/')
    if "${PODMAN[@]}" image exists "$upimage"; then
        have=$("${PODMAN[@]}" run --rm --network=none --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 "$upimage" dpkg-query -W -f "\${Version}" "postgresql-$V" 2>/dev/null)
        if [ -n "$need" ] && ! dpkg --compare-versions "$have" gt "$need"; then
            log "$upimage: its postgresql-$V ${have:-(version unreadable)} is not newer than the packages need (>> $need): made again"
            "${PODMAN[@]}" rmi -f "$upimage" >/dev/null 2>&1
        fi
    fi
    if ! "${PODMAN[@]}" image exists "$image"; then
        # as podman.sh makes it: debootstrap of this release from the machine's
        # own archive, minbase with postgresql-15, procps and libnuma1, no
        # cluster made
        local uri key keyring=() rootfs=$work/rootfs
        read -r uri key < <(archive_of_machine) || { fail "container: no Debian archive in this machine's apt sources for debootstrap"; return 0; }
        [ "$key" != - ] && keyring=(--keyring="$key")
        log "the image $image: debootstrap $codename (minbase, postgresql-15, procps, libnuma1) from $uri"
        mkdir -p "$rootfs/etc/postgresql-common/createcluster.d"
        echo "create_main_cluster = false" >"$rootfs/etc/postgresql-common/createcluster.d/no-main.conf"
        debootstrap "${keyring[@]}" --variant=minbase --include=postgresql-15,procps,libnuma1 "$codename" "$rootfs" "$uri" \
            >"$work/debootstrap.log" 2>&1 || { fail "container: debootstrap failed: $(tail -2 "$work/debootstrap.log")"; return 0; }
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
        tar -C "$rootfs" --numeric-owner -cf - . | "${PODMAN[@]}" import --change 'CMD ["/bin/bash"]' - "$image" \
            >"$work/import.log" 2>&1 || { fail "container: podman import failed: $(tail -2 "$work/import.log")"; return 0; }
        rm -rf "$rootfs"
    fi
    if ! "${PODMAN[@]}" image exists "$upimage"; then
        local cid rootfs=$work/uprootfs
        log "the image $upimage: $image, its postgresql-$V upgraded from this machine's apt sources"
        deb_entries | sort -u | while read -r uri suite comp key; do
            printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: %s\n' "$uri" "$suite" "$comp"
            [ "$key" = - ] || printf 'Signed-By: %s\n' "$key"
            echo
        done >"$work/upgrade.sources"
        mkdir -p "$rootfs"
        if ! cid=$("${PODMAN[@]}" create "$image" true) ||
            ! "${PODMAN[@]}" export "$cid" | tar -C "$rootfs" --numeric-owner -xf - ||
            ! "${PODMAN[@]}" rm "$cid" >/dev/null; then
            fail "container: $image could not be exported"
            return 0
        fi
        unshare -m --propagation private bash "$work/upgrade.sh" "$rootfs" "$work/upgrade.sources" >"$work/upgrade.log" 2>&1 ||
            { fail "container: postgresql-$V could not be upgraded in the image: $(tail -3 "$work/upgrade.log")"; return 0; }
        tar -C "$rootfs" --numeric-owner -cf - . | "${PODMAN[@]}" import --change 'CMD ["/bin/bash"]' - "$upimage" \
            >"$work/import.log" 2>&1 || { fail "container: podman import failed: $(tail -2 "$work/import.log")"; return 0; }
        rm -rf "$rootfs"
    fi
    "${PODMAN[@]}" rm -f "$cname" >/dev/null 2>&1
    log "the container: dpkg -i, a cluster, the join of $ROWS rows in stock and with the packages"
    tally container < <("${PODMAN[@]}" run --rm --name "$cname" --network=none --shm-size=64m \
        --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 \
        -v "$work/debs:/debs:ro" -v "$work/ctr:/opt/check:ro" -v "$work/out:/out" \
        "$upimage" /opt/check/in_container.sh "$V" "$ROWS" 2>&1)
}
container

echo "tools/debian.sh: $((SECONDS - t_all)) s (dpkg-buildpackage ${t_build} s)"
finish
