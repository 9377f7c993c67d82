#!/usr/bin/env bash
# The manual pages (docs/man/) cannot silently go wrong or fall behind:
#   <page>_renders   man(1) formats it with warnings on and says nothing
#                    (groff -man -ww where man is missing)
#   <page>_width     no formatted line is wider than MANWIDTH=80
#   dsmpool3_exports dsmpool(3) names every DSMPOOL_EXPORT function of
#                    include/dsmpool.h
#   inspect1_options dsmpool-inspect(1) names every long option and every
#                    view of tools/dsmpool-inspect.c
# Speaks TAP (tests/tap.sh).
# Usage: run.sh SOURCE_ROOT
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"
src=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass() { tap_ok "man::$1"; }
fail() { # name why [file to show]
    tap_not_ok "man::$1: $2"
    if [ -n "${3:-}" ] && [ -s "$3" ]; then head -40 "$3" | tap_diag; fi
}
export LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80
# format PAGE TEXT ERR: the page as a reader sees it, and every warning
format() {
    if command -v man >/dev/null; then
        man --warnings -E UTF-8 -l "$1" >"$2" 2>"$3" || echo "man exited $?" >>"$3"
    elif command -v groff >/dev/null; then
        groff -man -ww -Tutf8 -rLL=78n -P-cbou "$1" >"$2" 2>"$3" || echo "groff exited $?" >>"$3"
    else
        echo "neither man nor groff is installed (tools/deps.sh installs man-db and groff-base)" >"$3"
    fi
    sed -i 's/.\x08//g' "$2" # overstrikes, should a formatter leave them
}

for page in dsmpool.3 dsmpool-inspect.1; do
    id=$(echo "$page" | sed 's/dsmpool-inspect/inspect/; s/[.-]//g')
    format "$src/docs/man/$page" "$tmp/$page.txt" "$tmp/$page.err"
    if [ -s "$tmp/$page.err" ]; then
        fail "${id}_renders" "formatting $page warned" "$tmp/$page.err"
    elif ! grep -q '^NAME' "$tmp/$page.txt"; then
        fail "${id}_renders" "formatting $page gave no NAME section" "$tmp/$page.txt"
    else
        pass "${id}_renders"
    fi
    awk -v w="$MANWIDTH" 'length > w { printf "line %d, %d columns: %s\n", NR, length, $0 }' \
        "$tmp/$page.txt" >"$tmp/$page.wide"
    if [ -s "$tmp/$page.wide" ]; then
        fail "${id}_width" "$page has lines wider than $MANWIDTH columns" "$tmp/$page.wide"
    else
        pass "${id}_width"
    fi
done

# Every exported function: the name before the first '(' of each
# DSMPOOL_EXPORT declaration (the macro's own #define starts with '#').
sed -nE 's/^(DSMPOOL_NODISCARD )?DSMPOOL_EXPORT[^(]*[ *]([A-Za-z_][A-Za-z0-9_]*)\(.*/\2/p' "$src/include/dsmpool.h" \
    | sort -u >"$tmp/exports"
: >"$tmp/missing"
while read -r fn; do
    grep -qw -- "$fn" "$tmp/dsmpool.3.txt" || echo "$fn" >>"$tmp/missing"
done <"$tmp/exports"
n=$(wc -l <"$tmp/exports")
if [ "$n" -lt 40 ]; then
    fail dsmpool3_exports "found only $n DSMPOOL_EXPORT functions in include/dsmpool.h: the pattern is stale"
elif [ -s "$tmp/missing" ]; then
    fail dsmpool3_exports "dsmpool(3) does not name $(wc -l <"$tmp/missing") of the $n exported functions" \
        "$tmp/missing"
else
    pass dsmpool3_exports
fi

# Every long option ({"name", ...} in longs[]) and every view ({"name",
# show_...} in views[]) of the inspector.
tool=$src/tools/dsmpool-inspect.c
{
    grep -oE '\{"[a-z]+", (no|required|optional)_argument' "$tool" | sed -E 's/\{"([a-z]+)".*/--\1/'
    grep -oE '\{"[a-z]+", show_[a-z]+\}' "$tool" | sed -E 's/\{"([a-z]+)".*/\1/'
} | sort -u >"$tmp/words"
: >"$tmp/missing1"
while read -r w; do
    grep -q -- "\(^\|[^a-z-]\)$w\([^a-z-]\|$\)" "$tmp/dsmpool-inspect.1.txt" || echo "$w" >>"$tmp/missing1"
done <"$tmp/words"
n=$(wc -l <"$tmp/words")
if [ "$n" -lt 10 ]; then
    fail inspect1_options "found only $n options and views in $tool: the pattern is stale"
elif [ -s "$tmp/missing1" ]; then
    fail inspect1_options "dsmpool-inspect(1) does not name these options or views" "$tmp/missing1"
else
    pass inspect1_options
fi

tap_end
