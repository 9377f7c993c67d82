#!/usr/bin/env bash
# NUMA placement on emulated multi-node machines: boots a Debian kernel under
# qemu (TCG, no KVM needed) with 2 and with 4 nodes, runs vmtest.c as /init,
# and ends with "N passed, N failed" over both boots.
#
# Needs (installed if missing, as root): qemu-system-x86, cpio, gcc,
# libnuma-dev (for its static libnuma.a). The kernel comes from Debian's
# linux-image-cloud-amd64 (its current dependency), downloaded once into
# tests/numa-vm/.cache/.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cache="$here/.cache"
mkdir -p "$cache"
fail() { echo "numa-vm: $*" >&2; echo "0 passed, 1 failed"; exit 1; }

need=""
for p in qemu-system-x86 cpio gcc libnuma-dev; do dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"; done
if [ -n "$need" ]; then
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086 # a list of packages
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends $need; } >&2 || fail "could not install$need"
fi

# shellcheck disable=SC2012 # the first kernel of a known name
kernel=$(ls "$cache"/vmlinuz-* 2>/dev/null | head -1)
if [ -z "$kernel" ]; then
    pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
    [ -n "$pkg" ] || { apt-get update -qq >&2; pkg=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/ {print $2; exit}'); }
    [ -n "$pkg" ] || fail "cannot find the linux-image-cloud-amd64 kernel package"
    (cd "$cache" && apt-get download "$pkg" >/dev/null 2>&1) || fail "cannot download $pkg"
    rm -rf "$cache/x" && dpkg-deb -x "$cache"/"$pkg"_*.deb "$cache/x" || fail "cannot unpack $pkg"
    cp "$cache"/x/boot/vmlinuz-* "$cache"/ && rm -rf "$cache/x" "$cache"/*.deb
    # shellcheck disable=SC2012 # the first kernel of a known name
    kernel=$(ls "$cache"/vmlinuz-* | head -1)
fi

# A static test program (no -march=native: TCG's "max" CPU has no AVX-512),
# from the sources of the installed library: area_test.c, the test-only hooks
# that meson compiles into the internal library alone, is left out.
# shellcheck disable=SC2010 # the library's sources, known names
src=$(ls "$top"/pool/*/*.c | grep -v '/area_test\.c$')
incs=$(for d in "$top"/pool "$top"/pool/*/; do printf ' -I%s' "$d"; done)
# shellcheck disable=SC2086
gcc -std=c11 -O2 -D_GNU_SOURCE -DHAVE_LIBNUMA -static -I"$top/include" $incs \
    -o "$cache/vmtest" "$here/vmtest.c" $src -l:libnuma.a -lpthread 2>"$cache/build.log" ||
    { cat "$cache/build.log" >&2; fail "vmtest does not build"; }

root="$cache/root"
rm -rf "$root" && mkdir -p "$root/dev" "$root/proc" "$root/sys"
cp "$cache/vmtest" "$root/init"
mknod "$root/dev/console" c 5 1 2>/dev/null || fail "mknod needs root"
(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip) >"$cache/initrd.gz"

total_p=0
total_f=0
boot() { # name, kernel hugepages=, memory MiB, qemu numa args...
    local name=$1 hp=$2 mb=$3
    shift 3
    local log="$cache/$name.log"
    local t0
    t0=$(date +%s)
    timeout 300 qemu-system-x86_64 -accel tcg -cpu max -smp 4 -m "$mb" -nographic -no-reboot \
        "$@" -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
        -kernel "$kernel" -initrd "$cache/initrd.gz" \
        -append "console=ttyS0 quiet panic=-1 numa_balancing=disable hugepagesz=2M hugepages=$hp" \
        >"$log" 2>&1
    local rc=$? t1
    t1=$(date +%s)
    tr -d '\r' <"$log" | sed -n '/NUMA VM:/,/^RESULT/p' | sed 's/^.*NUMA VM:/NUMA VM:/' | tee "$cache/$name.out"
    local line p f
    line=$(grep -a '^RESULT' "$log" | tail -1)
    p=$(echo "$line" | awk '{print $2}')
    f=$(echo "$line" | awk '{print $4}')
    if [ -z "$line" ]; then
        echo "numa-vm $name: no result (qemu exit $rc); the end of the console:" >&2
        tail -20 "$log" >&2
        p=0
        f=1
    fi
    echo "numa-vm $name: $p passed, $f failed in $((t1 - t0)) s"
    total_p=$((total_p + p))
    total_f=$((total_f + f))
}

mem() { # nodes -> memory backends and -numa node options, 512 MiB each
    local n=$1 i args=""
    for ((i = 0; i < n; i++)); do
        args="$args -object memory-backend-ram,id=m$i,size=512M"
    done
    echo "$args"
}

# shellcheck disable=SC2046 # mem prints a list of options
boot two-nodes "0:32,1:32" 1024 \
    $(mem 2) \
    -numa node,nodeid=0,cpus=0-1,memdev=m0 -numa node,nodeid=1,cpus=2-3,memdev=m1 \
    -numa dist,src=0,dst=1,val=20
# Four nodes whose nearest neighbours are not their index neighbours:
# from node 0 the nearest is node 2, from node 1 it is node 3.
# shellcheck disable=SC2046 # mem prints a list of options
boot four-nodes "0:16,1:16,2:16,3:16" 2048 \
    $(mem 4) \
    -numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1 \
    -numa node,nodeid=2,cpus=2,memdev=m2 -numa node,nodeid=3,cpus=3,memdev=m3 \
    -numa dist,src=0,dst=1,val=30 -numa dist,src=0,dst=2,val=15 -numa dist,src=0,dst=3,val=40 \
    -numa dist,src=1,dst=2,val=25 -numa dist,src=1,dst=3,val=15 -numa dist,src=2,dst=3,val=30
echo "$total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]
