#!/usr/bin/env bash
# Programs that embed dsmpool the ways the README's "Embedding" section says,
# each built in a temporary directory, offline, and run:
#   readme-example   the README's example is examples/embed.c, byte for byte
#   install          the library-only build (the README's meson options) installs
#                    the header, libdsmpool.so/.a, libdsmpool-preload.so, dsmpool.pc, the CMake package and
#                    dsmpool(3), and nothing else (no tool, no dsmpool-inspect(1))
#   pkg-config       examples/embed.c built with `pkg-config --cflags --libs dsmpool`
#   pkg-config-static  the same linked -static with `pkg-config --static`, so every
#                    library in Libs.private must be there (without --static it fails)
#   cmake            find_package(dsmpool CONFIG) + dsmpool::dsmpool, against the
#                    install moved elsewhere (the package is relocatable); [SKIP]
#                    without cmake (tools/deps.sh installs it)
#   meson-subproject a project with subprojects/dsmpool.wrap (the README's) and
#                    subprojects/dsmpool linked to this tree: dependency('dsmpool')
#                    works, and the subproject defines no test, benchmark, tool
#                    or install
# The library is built afresh for the install (and again as the subproject),
# without the options of the build running this test: sanitizer builds too.
# Speaks TAP (tests/tap.sh).
# Usage: run.sh SOURCE_ROOT
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"
src=$(cd "$1" && pwd)
here=$src/tests/consumers
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
pass() { tap_ok "consumers::$1"; }
fail() { # name why [log]
    tap_not_ok "consumers::$1: $2"
    if [ -n "${3:-}" ] && [ -f "$3" ]; then tail -40 "$3" | tap_diag; fi
}
skip() { tap_skip "consumers::$1" "$2"; }
# The fenced block after the README line that contains $1.
readme_block() {
    awk -v m="$1" 'found == 2 && /^```/ { exit } found == 2 { print }
        found == 1 && /^```/ { found = 2 } index($0, m) { found = 1 }' "$src/README.md"
}
# Runs the example and checks that it says what the worker wrote.
run_embed() { # exe log
    "$1" >"$2" 2>&1 && grep -q 'worker wrote "hello"' "$2"
}

# -- readme-example
readme_block '<!-- examples/embed.c' >"$tmp/readme-embed.c"
if [ ! -s "$tmp/readme-embed.c" ]; then
    fail readme-example "no block after '<!-- examples/embed.c' in README.md"
elif ! diff -u "$src/examples/embed.c" "$tmp/readme-embed.c" >"$tmp/diff"; then
    fail readme-example "README.md's example differs from examples/embed.c" "$tmp/diff"
else
    pass readme-example
fi

# -- install
prefix=$tmp/prefix
installed=false
if ! command -v meson >/dev/null; then
    fail install "meson not found"
elif ! meson setup "$tmp/lib" "$src" --prefix="$prefix" --buildtype=release \
        -Dtests=disabled -Dbench=disabled -Dtools=false >"$tmp/install.log" 2>&1 ||
    ! meson compile -C "$tmp/lib" >>"$tmp/install.log" 2>&1 ||
    ! meson install -C "$tmp/lib" >>"$tmp/install.log" 2>&1; then
    fail install "library-only build and install failed" "$tmp/install.log"
else
    (cd "$prefix" && find . -type f -o -type l | sed 's|^\./||' | sort) >"$tmp/files"
    libdir=$(dirname "$(grep '/libdsmpool\.a$' "$tmp/files" || echo lib/none)")
    ver=$(sed -n 's/^#define DSMPOOL_VERSION_STRING "\(.*\)"$/\1/p' "$src/include/dsmpool.h")
    for f in include/dsmpool.h "$libdir"/{libdsmpool-preload.so,libdsmpool.a,libdsmpool.so,libdsmpool.so.0,libdsmpool.so."$ver"} \
        "$libdir"/pkgconfig/dsmpool.pc "$libdir"/cmake/dsmpool/dsmpoolConfig{,Version}.cmake \
        share/man/man3/dsmpool.3; do
        echo "$f"
    done | sort >"$tmp/want"
    if ! diff -u "$tmp/want" "$tmp/files" >"$tmp/diff"; then
        fail install "installed files (+) differ from the library's (-)" "$tmp/diff"
    else
        pass install
        installed=true
    fi
fi

# -- pkg-config, pkg-config-static
if ! $installed; then
    fail pkg-config "no install"
    fail pkg-config-static "no install"
elif ! command -v pkg-config >/dev/null; then
    fail pkg-config "pkg-config not found"
    fail pkg-config-static "pkg-config not found"
else
    export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
    # shellcheck disable=SC2046
    if ! "$cc" -std=c11 -Wall -Wextra -pedantic -Werror "$src/examples/embed.c" -o "$tmp/embed-pc" \
            $(pkg-config --cflags --libs dsmpool) >"$tmp/pc.log" 2>&1; then
        fail pkg-config "cc ... \$(pkg-config --cflags --libs dsmpool) failed" "$tmp/pc.log"
    elif ! LD_LIBRARY_PATH=$prefix/$libdir run_embed "$tmp/embed-pc" "$tmp/pc.log"; then
        fail pkg-config "the example failed" "$tmp/pc.log"
    elif ! LD_LIBRARY_PATH=$prefix/$libdir ldd "$tmp/embed-pc" | grep -q "$prefix/$libdir/libdsmpool.so.0"; then
        fail pkg-config "the example did not run with the installed libdsmpool.so.0"
    else
        pass pkg-config
    fi
    static_libs=$(pkg-config --static --libs dsmpool)
    # shellcheck disable=SC2046,SC2086
    if ! "$cc" -static "$src/examples/embed.c" -o "$tmp/embed-static" \
            $(pkg-config --cflags dsmpool) $static_libs >"$tmp/static.log" 2>&1; then
        fail pkg-config-static "cc -static ... $static_libs failed" "$tmp/static.log"
    elif readelf -d "$tmp/embed-static" 2>/dev/null | grep -q NEEDED; then
        fail pkg-config-static "the -static program needs shared libraries"
    elif ! run_embed "$tmp/embed-static" "$tmp/static.log"; then
        fail pkg-config-static "the static example failed" "$tmp/static.log"
    elif grep -q -- -lnuma <<<"$static_libs" &&
        "$cc" -static "$src/examples/embed.c" -o "$tmp/embed-nopriv" \
            $(pkg-config --cflags --libs dsmpool) >/dev/null 2>&1; then
        fail pkg-config-static "it links -static without Libs.private too: the check proves nothing"
    else
        pass pkg-config-static
    fi
    unset PKG_CONFIG_PATH
fi

# -- cmake: against the install moved elsewhere
if ! $installed; then
    fail cmake "no install"
elif ! command -v cmake >/dev/null; then
    skip cmake "cmake is not installed (tools/deps.sh installs it)"
else
    mv "$prefix" "$tmp/moved"
    mkdir "$tmp/cmake"
    cp "$here/cmake/CMakeLists.txt" "$src/examples/embed.c" "$tmp/cmake/"
    gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    if ! cmake -S "$tmp/cmake" -B "$tmp/cmake/build" "${gen[@]}" -DCMAKE_PREFIX_PATH="$tmp/moved" \
            >"$tmp/cmake.log" 2>&1 || ! cmake --build "$tmp/cmake/build" >>"$tmp/cmake.log" 2>&1; then
        fail cmake "configure or build failed" "$tmp/cmake.log"
    elif ! run_embed "$tmp/cmake/build/embed" "$tmp/cmake.log"; then
        fail cmake "the example failed" "$tmp/cmake.log"
    elif ! ldd "$tmp/cmake/build/embed" | grep -q "$tmp/moved/$libdir/libdsmpool.so.0"; then
        fail cmake "the example did not run with the moved install's libdsmpool.so.0"
    else
        pass cmake
    fi
fi

# -- meson-subproject
proj=$tmp/msub
mkdir -p "$proj/subprojects"
cp "$here/meson-subproject/meson.build" "$src/examples/embed.c" "$proj/"
ln -s "$src" "$proj/subprojects/dsmpool"
readme_block '<!-- subprojects/dsmpool.wrap' >"$proj/subprojects/dsmpool.wrap"
if [ ! -s "$proj/subprojects/dsmpool.wrap" ]; then
    fail meson-subproject "no block after '<!-- subprojects/dsmpool.wrap' in README.md"
elif ! command -v meson >/dev/null; then
    fail meson-subproject "meson not found"
elif ! meson setup "$proj/build" "$proj" --wrap-mode=nodownload >"$tmp/msub.log" 2>&1 ||
    ! meson compile -C "$proj/build" >>"$tmp/msub.log" 2>&1; then
    fail meson-subproject "setup or build failed" "$tmp/msub.log"
elif ! run_embed "$proj/build/embed" "$tmp/msub.log"; then
    fail meson-subproject "the example failed" "$tmp/msub.log"
else
    # What the subproject defined: library targets only, built by default
    # only the two the dependency needs; no test, benchmark or install.
    if ! why=$(cd "$proj/build" && python3 - <<'EOF'
import json, subprocess
def intro(what):
    return json.loads(subprocess.run(['meson', 'introspect', '--' + what, '.'],
                                     check=True, capture_output=True, text=True).stdout)
bad = []
for t in intro('targets'):
    if t['subproject'] == 'dsmpool' and t['type'] != 'static library':
        bad.append('target %s (%s)' % (t['name'], t['type']))
    elif t['subproject'] == 'dsmpool' and t['build_by_default'] and t['name'] not in ('dsmpool', 'dsmpool_core'):
        bad.append('target %s built by default' % t['name'])
bad += ['test ' + t['name'] for t in intro('tests')]
bad += ['benchmark ' + t['name'] for t in intro('benchmarks')]
bad += ['installs ' + f for f in intro('installed')]
print(', '.join(bad))
EOF
    ) || [ -n "$why" ]; then
        fail meson-subproject "the subproject defines more than the library: ${why:-introspection failed}"
    else
        pass meson-subproject
    fi
fi

tap_end
