# shellcheck shell=bash
# TAP for the test scripts, sourced (meson runs them with protocol 'tap';
# tools/testcount.py sums them): "ok N - suite::test", "not ok N -
# suite::test: why" followed by what explains it as "# " lines, "ok N -
# suite::test # SKIP why", notes as "# NOTE ...", and the plan last (or
# "1..0 # SKIP why" alone). tap_end's status is the script's.
tap_n=0 tap_bad=0
# (a description is one line: its newlines become "; ")
tap_ok() { local d="$*"; tap_n=$((tap_n + 1)); printf 'ok %d - %s\n' "$tap_n" "${d//$'\n'/; }"; }
tap_not_ok() {
    local d="$*"
    tap_n=$((tap_n + 1)) tap_bad=$((tap_bad + 1))
    printf 'not ok %d - %s\n' "$tap_n" "${d//$'\n'/; }"
}
tap_skip() { tap_n=$((tap_n + 1)); printf 'ok %d - %s # SKIP %s\n' "$tap_n" "$1" "$2"; }
tap_diag() { sed 's/^/# /'; }
tap_note() { printf '# NOTE %s\n' "$*"; }
tap_skip_all() { printf '1..0 # SKIP %s\n' "$*"; exit 0; }
tap_end() { printf '1..%d\n' "$tap_n"; [ "$tap_bad" = 0 ]; }
