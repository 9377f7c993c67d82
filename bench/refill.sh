#!/usr/bin/env bash
# refill.sh [BUILD_DIR [refill options]]: bench/refill (refill speed against
# the kernel's own MADV_POPULATE_WRITE, issue 35) with what its page kinds
# need: as root, shmem THP set to "advise" and 2 MiB huge pages reserved for
# the pool and the raw samples, each put back when the run ends, whatever
# happens. Not root: the run goes on, and the kinds it cannot have are
# skipped with a line that says why. BUILD_DIR (default build-release) is
# set up as a release build if it is not there.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-release}
shift || true
if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Dbuildtype=release -Dtests=disabled >/dev/null
fi
ninja -C "$dir" bench/refill >/dev/null
nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
thp=/sys/kernel/mm/transparent_hugepage/shmem_enabled
restore=""
trap 'eval "$restore"' EXIT
if [ -w "$thp" ]; then
    old_thp=$(sed -nE 's/.*\[([a-z_]+)\].*/\1/p' "$thp")
    restore="echo $old_thp > $thp; $restore"
    echo advise >"$thp"
fi
if [ -w "$nr" ]; then
    # the pool (1024 MiB by default) and a raw sample of the largest block
    old_nr=$(cat "$nr")
    restore="echo $old_nr > $nr; $restore"
    echo $((old_nr + 512 + 64)) >"$nr"
    echo "2 MiB huge pages: $(cat "$nr") reserved ($old_nr before), $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages) free"
fi
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, kernel $(uname -r), $dir/bench/refill $*"
"$dir/bench/refill" "$@"
