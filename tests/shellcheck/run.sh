#!/usr/bin/env bash
# Every shell script of the project passes shellcheck, with the project's
# settings (.shellcheckrc at the top: what it leaves out, and why) and what
# each script says beside a line it excuses ("# shellcheck disable=... #
# why"). The scripts: the files git tracks (every file, in a tree without
# git) that start with a shell's #! line, and those whose name ends in .sh
# (sourced ones: integrations/postgresql/lib.sh). A script is its own test.
# Prints Criterion's synthesis line for tools/testcount.py.
# Usage: run.sh SOURCE-ROOT
set -u
root=${1:?usage: run.sh SOURCE-ROOT}
cd "$root" || exit 1
if ! command -v shellcheck >/dev/null; then
    echo "[SKIP] shellcheck::all: shellcheck is not installed (tools/deps.sh installs it)"
    echo "[====] Synthesis: Tested: 0 | Passing: 0 | Failing: 0 | Crashing: 0"
    exit 77
fi
if [ -e .git ] && command -v git >/dev/null; then
    files=$(git ls-files)
else
    files=$(find . -type f -not -path '*/.*' -not -path '*/meson-*' | sed 's|^\./||')
fi
tested=0 passing=0
while IFS= read -r f; do
    [ -f "$f" ] || continue
    case "$f" in
    *.sh) ;;
    *) head -c 64 "$f" 2>/dev/null | head -1 | grep -qE '^#!(/usr/bin/env (ba|da)?sh|/bin/(ba|da)?sh)( |$)' || continue ;;
    esac
    tested=$((tested + 1))
    if out=$(shellcheck -x -f gcc "$f" 2>&1); then
        passing=$((passing + 1))
        echo "[PASS] shellcheck::$f"
    else
        echo "[FAIL] shellcheck::$f: $(grep -c . <<<"$out") findings"
        while IFS= read -r l; do echo "[----]   $l"; done <<<"$out"
    fi
done <<<"$files"
echo "[====] Synthesis: Tested: $tested | Passing: $passing | Failing: $((tested - passing)) | Crashing: 0"
[ "$tested" = "$passing" ]
