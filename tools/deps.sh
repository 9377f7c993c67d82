#!/bin/sh
# Install, from Debian packages, what dsmpool needs to build, test and
# benchmark. Does nothing when everything is there already.
set -eu
pkgs="meson ninja-build pkg-config gcc g++ libc6-dev python3 libcriterion-dev libnuma-dev cmake
libjemalloc-dev libmimalloc-dev gnuplot-nox rumur man-db groff-base shellcheck"
missing=""
for p in $pkgs; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "installing:$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >&2
fi
