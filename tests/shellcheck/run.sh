#!/usr/bin/env bash
# Every shell script of the project passes shellcheck, with the project's
# settings (.shellcheckrc at the top: what it leaves out, and why) and what
# each script says beside a line it excuses ("# shellcheck disable=... #
# why"). The scripts: the files git tracks (every file, in a tree without
# git) that start with a shell's #! line, and those whose name ends in .sh
# (sourced ones: integrations/postgresql/lib.sh). A script is its own test.
# Speaks TAP (tests/tap.sh).
# Usage: run.sh SOURCE-ROOT
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"
root=${1:?usage: run.sh SOURCE-ROOT}
cd "$root" || exit 1
if ! command -v shellcheck >/dev/null; then
    tap_skip_all "shellcheck is not installed (tools/deps.sh installs it)"
fi
if [ -e .git ] && command -v git >/dev/null; then
    files=$(git ls-files)
else
    files=$(find . -type f -not -path '*/.*' -not -path '*/meson-*' | sed 's|^\./||')
fi
while IFS= read -r f; do
    [ -f "$f" ] || continue
    case "$f" in
    *.sh) ;;
    *) head -c 64 "$f" 2>/dev/null | head -1 | grep -qE '^#!(/usr/bin/env (ba|da)?sh|/bin/(ba|da)?sh)( |$)' || continue ;;
    esac
    if out=$(shellcheck -x -f gcc "$f" 2>&1); then
        tap_ok "shellcheck::$f"
    else
        tap_not_ok "shellcheck::$f: $(grep -c . <<<"$out") findings"
        tap_diag <<<"$out"
    fi
done <<<"$files"
tap_end
