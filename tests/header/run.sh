#!/usr/bin/env bash
# The public header compiles clean as C11/C17 (-Wall -Wextra -pedantic
# -Werror) and C++11/C++17 (also -Wold-style-cast
# -Wzero-as-null-pointer-constant); a result of a DSMPOOL_NODISCARD call
# dropped is an error under -Werror as C2x and C++17, and one cast to void
# is not (nodiscard.c); and the shared library exports dsmpool_ symbols
# only, each of version DSMPOOL_0 (libdsmpool.map). Speaks TAP
# (tests/tap.sh).
# Usage: run.sh INCLUDE_DIR [LIBDSMPOOL.so]
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"
inc=$1
src=$(dirname "$0")/use.c
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc=${CC:-cc}
cxx=${CXX:-c++}
try() { # name compiler-and-flags...
    local name=$1
    shift
    if "$@" -I"$inc" -fsyntax-only 2>"$out/err"; then
        tap_ok "header::$name"
    else
        tap_not_ok "header::$name"
        tap_diag <"$out/err"
    fi
}
strict="-Wall -Wextra -pedantic -Werror"
# shellcheck disable=SC2086 # strict is a list of options
try c11 "$cc" -std=c11 $strict -x c "$src"
# shellcheck disable=SC2086 # strict is a list of options
try c17 "$cc" -std=c17 $strict -x c "$src"
if command -v "$cxx" >/dev/null; then
    cxxflags="$strict -Wold-style-cast -Wzero-as-null-pointer-constant"
    # shellcheck disable=SC2086 # cxxflags is a list of options
    try cxx11 "$cxx" -std=c++11 $cxxflags -x c++ "$src"
    # shellcheck disable=SC2086 # cxxflags is a list of options
    try cxx17 "$cxx" -std=c++17 $cxxflags -x c++ "$src"
else
    tap_skip "header::cxx" "no C++ compiler ($cxx) here"
fi
# DSMPOOL_NODISCARD where a cast to void can say "meant": C23 (c2x) and
# C++17. A dropped result fails under -Werror; a cast one compiles.
nd=$(dirname "$0")/nodiscard.c
dropped() { # name compiler-and-flags...: must fail, naming the dropped result
    local name=$1
    shift
    if ! "$@" -I"$inc" -fsyntax-only -DDROP 2>"$out/err" && grep -q 'dsmpool_create' "$out/err"; then
        tap_ok "header::$name: a dropped result is refused"
    else
        tap_not_ok "header::$name: a dropped result of dsmpool_create compiled"
        tap_diag <"$out/err"
    fi
}
if echo 'int x;' | "$cc" -std=c2x -x c -fsyntax-only - 2>/dev/null; then
    # shellcheck disable=SC2086 # strict is a list of options
    try nodiscard_c2x_meant "$cc" -std=c2x $strict -x c "$nd"
    # shellcheck disable=SC2086 # strict is a list of options
    dropped nodiscard_c2x_dropped "$cc" -std=c2x $strict -x c "$nd"
else
    tap_skip "header::nodiscard_c2x" "$cc has no -std=c2x"
fi
if command -v "$cxx" >/dev/null; then
    # shellcheck disable=SC2086 # cxxflags is a list of options
    try nodiscard_cxx17_meant "$cxx" -std=c++17 $cxxflags -x c++ "$nd"
    # shellcheck disable=SC2086 # cxxflags is a list of options
    dropped nodiscard_cxx17_dropped "$cxx" -std=c++17 $cxxflags -x c++ "$nd"
fi
if [ -n "${2:-}" ]; then
    # every symbol dsmpool_ and versioned DSMPOOL_0 (libdsmpool.map), but
    # the version's own (type A)
    other=$(nm -D --defined-only "$2" | awk 'NF == 3 && $2 != "A" && $3 !~ /^dsmpool_[A-Za-z0-9_]*@@DSMPOOL_0$/ {print $3}')
    if [ -z "$other" ] && nm -D --defined-only "$2" | grep -q ' dsmpool_create@@DSMPOOL_0$'; then
        tap_ok "header::exports: $(nm -D --defined-only "$2" | awk 'NF == 3 && $2 != "A"' | wc -l) symbols, all dsmpool_, versioned DSMPOOL_0"
    else
        tap_not_ok "header::exports: not dsmpool_ of version DSMPOOL_0: $other"
    fi
fi
tap_end
