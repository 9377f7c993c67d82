#!/usr/bin/env bash
# The main job: installs what it needs, builds optimized, reserves huge pages
# for the run (root only; put back afterwards) and runs the benchmark with
# its defaults. Extra arguments go to the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
dir=build-release
if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Dbuildtype=release -Dtests=disabled >/dev/null
fi
ninja -C "$dir" >/dev/null
nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
if [ -w "$nr" ]; then
    old=$(cat "$nr")
    trap 'echo "$old" > "$nr"' EXIT
    echo $((old + 600)) >"$nr" || true
fi
"$dir/bench/poolbench" "$@"
