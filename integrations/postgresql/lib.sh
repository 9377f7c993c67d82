# shellcheck shell=bash
# Shared by run.sh and container.sh (sourced): the server's user, a server
# of a prefix, and what that user holds in /dev/shm. The caller sets prefix
# (and may set data and pgbin after sourcing). bench.py has its own copy of
# what it uses (the user, the port and socket, a server's init, start and
# stop, log and die): a change here goes there too.
PGUSER_NAME=dsmpoolpg

log() { echo "=== $*" >&2; }
die() {
    echo "$(basename "$0"): $*" >&2
    exit 1
}

# The checks' tally: an "ok:" or "FAILED:" line each, and "N passed, N
# failed" to end (finish exits, non-zero if any failed).
passed=0
failed=0
pass() {
    passed=$((passed + 1))
    echo "ok: $*"
}
fail() {
    failed=$((failed + 1))
    echo "FAILED: $*"
}
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ]
    exit $?
}

# count_tap label output-file: a TAP run's subtests (prove's summary); a
# run that judged nothing (every test skipped) is a failure
count_tap() {
    local label=$1 out=$2 ntests nfail
    ntests=$(sed -nE 's/^Files=[0-9]+, Tests=([0-9]+),.*/\1/p' "$out")
    if grep -q '^Result: PASS' "$out" && [ "${ntests:-0}" -gt 0 ]; then
        echo "PostgreSQL ($label): All $ntests subtests passed."
        passed=$((passed + ntests))
    else
        nfail=$(sed -nE 's/.*Failed ([0-9]+)\/[0-9]+ subtests.*/\1/p' "$out" | head -1)
        echo "PostgreSQL ($label): ${nfail:-?} of ${ntests:-?} subtests failed"
        # (prove names the failed tests on "#   Failed test" lines; a run
        # without one must not end the caller under set -e and pipefail)
        grep -E '^(not ok|#   Failed test)' "$out" | head -20 || true
        [ -n "$nfail" ] && [ -n "$ntests" ] && { failed=$((failed + nfail)); passed=$((passed + ntests - nfail)); } ||
            fail "$label did not complete (see $out)"
    fi
}

# apt_install PACKAGE...: from the machine's apt sources, their lists
# refreshed first where apt does not know a package (a fresh machine has none)
apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 && return 0
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

# stock_server PACKAGE...: the server the stock scripts judge, in B (its
# bin directory), V (its major) and SERVER (what it is, for their output).
# Debian's postgresql-$V (PG_STOCK_MAJOR, 15), installed with the packages
# named if missing, no cluster made; or, with STOCK_BIN, the bin directory
# of a server built here from PostgreSQL's source without patches (run.sh
# stock18-check: 18.6). IS_PACKAGED says which (Debian's tools --
# pg_createcluster, pg_ctlcluster -- only with the package).
stock_server() {
    if [ -n "${STOCK_BIN:-}" ]; then
        B=$STOCK_BIN
        [ -x "$B/postgres" ] || die "no postgres in STOCK_BIN ($B)"
        V=$("$B/postgres" --version | sed -nE 's/.* ([0-9]+)(\.[0-9]+)?.*/\1/p')
        SERVER="PostgreSQL $("$B/postgres" --version | awk '{print $NF}') built here from its source without patches ($B)"
        IS_PACKAGED=0
        return 0
    fi
    V=${PG_STOCK_MAJOR:-15}
    B=/usr/lib/postgresql/$V/bin
    # shellcheck disable=SC2034 # read by the scripts that source this
    IS_PACKAGED=1
    local p
    for p in "$@"; do
        dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' && continue
        log "installing $p (no cluster made)"
        mkdir -p /etc/postgresql-common/createcluster.d
        echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/dsmpool-ci.conf
        apt_install "$p" || return 1
    done
    # shellcheck disable=SC2034 # read by the scripts that source this
    SERVER="Debian's postgresql-$V $(dpkg-query -W -f '${Version}' "postgresql-$V") ($("$B/postgres" --version))"
}

# in_small_shm "$0" "$@": the stock scripts run in a mount namespace of their
# own whose /dev/shm is a 64 MB tmpfs (Docker's default --shm-size), as a
# server in a container sees it, the host's untouched: the script is run
# again there (once), which then mounts it.
in_small_shm() {
    if [ "${DSMPOOL_SMALL_SHM:-}" != "$1" ]; then
        exec env DSMPOOL_SMALL_SHM="$1" unshare -m --propagation private "$@"
    fi
    mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm || die "cannot mount a tmpfs on /dev/shm"
}

as_pg() { # run a command as the server's user
    if [ "$(id -u)" = 0 ]; then runuser -u "$PGUSER_NAME" -- "$@"; else "$@"; fi
}

need_user() {
    [ "$(id -u)" = 0 ] || return 0
    id "$PGUSER_NAME" >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/sh "$PGUSER_NAME"
}

port=${DSMPOOL_PG_PORT:-54329}
# shellcheck disable=SC2154 # prefix: set by the script that sources this
sock="$prefix/sock"
data="$prefix/data"
pgbin="$prefix/patched/bin"

server_init() { # server_init bindir [postgresql.conf lines...]
    local bin=$1
    shift
    as_pg "$bin/pg_ctl" -D "$data" stop -m immediate >/dev/null 2>&1 || true
    rm -rf "$data"
    mkdir -p "$sock"
    [ "$(id -u)" = 0 ] && chown "$PGUSER_NAME" "$sock" "$prefix"
    as_pg "$bin/initdb" -D "$data" -U postgres --no-sync >/dev/null 2>&1
    {
        echo "port = $port"
        echo "unix_socket_directories = '$sock'"
        echo "listen_addresses = ''"
        echo "logging_collector = off"
        local l
        for l in "$@"; do echo "$l"; done
    } >>"$data/postgresql.conf"
}

server_start() { as_pg "$1/pg_ctl" -D "$data" -l "$data/log" -w -t 120 start >/dev/null; }
server_stop() { as_pg "$1/pg_ctl" -D "$data" -w -t 120 stop -m "${2:-fast}" >/dev/null; }
sql() { as_pg "$pgbin/psql" -h "$sock" -p "$port" -U postgres -d postgres -X -q -A -t -c "$1"; }
server_pid() { head -1 "$data/postmaster.pid"; }

# What the server's user holds in /dev/shm (the pool's objects, PostgreSQL's
# segments): leftovers are what is there after a run and was not before --
# this machine may hold other programs' objects.
shm_objects() { find /dev/shm -maxdepth 1 -user "$PGUSER_NAME" -printf '%f\n' 2>/dev/null | sort; }
shm_new() { comm -13 <(echo "$1") <(shm_objects) | tr '\n' ' ' | sed 's/ $//'; }

wait_ready() {
    local _
    for _ in $(seq 1 600); do
        as_pg "$pgbin/pg_isready" -h "$sock" -p "$port" -U postgres -q && return 0
        sleep 0.1
    done
    return 1
}


# ---- a Debian source package, through this machine's own apt sources --------
# (suites.sh.) The repository names no archive host: the URIs and keys are
# those of the machine's own apt sources, turned into deb-src entries in a
# sources file of our own, with lists and caches of our own: apt's
# configuration, lists and caches are left as they were.

# The URI and key of this machine's own Debian archive, from its apt sources
# (deb822 *.sources, then one-line *.list and sources.list): the entry whose
# suite is the release's codename. The repository names no archive host.
archive_of_machine() {
    local codename
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || return 1
    deb_entries | awk -v cn="$codename" '$2 == cn {print $1, $4; exit}' | grep .
}

# deb_entries: "URI SUITE COMPONENT KEY" for each deb entry of this machine's
# apt sources (deb822 *.sources, then one-line sources.list and *.list) whose
# suite is the release's codename or one of its own (codename-updates,
# codename-security, ...); KEY is "-" where the entry names none.
deb_entries() {
    local cn f
    cn=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$cn" ] || return 1
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v cn="$cn" '
            function flush(   nu, ns, nc, u, s, c, i, j, k) {
                if (types ~ /(^| )deb( |$)/ && tolower(enabled) !~ /^no/) {
                    nu = split(uris, u, " "); ns = split(suites, s, " "); nc = split(comps, c, " ")
                    for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++)
                        if (s[j] == cn || index(s[j], cn "-") == 1)
                            for (k = 1; k <= nc; k++) print u[i], s[j], c[k], (key == "" ? "-" : key)
                }
                types = uris = suites = comps = key = enabled = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            /^[ \t]/ { next } # a field continued (an inline key)
            { f1 = tolower($1); $1 = ""; v = $0; sub(/^[ \t]+/, "", v) }
            f1 == "types:" { types = v }
            f1 == "uris:" { uris = v }
            f1 == "suites:" { suites = v }
            f1 == "components:" { comps = v }
            f1 == "signed-by:" && v ~ /^\// { key = v }
            f1 == "enabled:" { enabled = v }
            END { flush() }' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk -v cn="$cn" '
            $1 == "deb" {
                i = 2; key = "-"
                if ($2 ~ /^\[/) { # options
                    for (; i <= NF; i++) {
                        if ($i ~ /signed-by=/) { key = $i; sub(/.*signed-by=/, "", key); sub(/\].*/, "", key) }
                        if ($i ~ /\]$/) { i++; break }
                    }
                }
                if ($(i + 1) == cn || index($(i + 1), cn "-") == 1)
                    for (k = i + 2; k <= NF; k++) print $i, $(i + 1), $k, key
            }' "$f"
    done
}

# deb_source_get PACKAGE VERSION DIR: the source of the binary package
# PACKAGE at VERSION, unpacked with Debian's patches (dpkg-source -x) into
# DIR/tree; prints the version it got. Where no source of the machine serves
# that version (an archive or mirror that kept only the binaries), the newest
# it serves of the same upstream major, said on stderr. Needs root (apt).
deb_source_get() {
    local pkg=$1 want=$2 dir=$3
    local apt="$dir/apt" list="$dir/apt/deb-src.sources"
    rm -rf "$apt" "$dir/download" "$dir/tree"
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$dir/download"
    deb_entries | sort -u | while read -r uri suite comp key; do
        printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: %s\n' "$uri" "$suite" "$comp"
        [ "$key" = - ] || printf 'Signed-By: %s\n' "$key"
        echo
    done >"$list"
    [ -s "$list" ] || { echo "no deb entry for this release in the machine's apt sources" >&2; return 1; }
    local o=(-o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$apt/lists"
        -o Dir::Cache="$apt/cache")
    log "$pkg source: deb-src of $(grep -c '^URIs' "$list") entries of this machine's apt sources ($(awk '/^Suites:/ {print $2}' "$list" | sort -u | tr '\n' ' ' | sed 's/ $//'))"
    apt-get update -qq "${o[@]}" >&2 || { rm -rf "$apt"; return 1; }
    local major=${want%%.*} versions v got=""
    versions="$want $(apt-cache "${o[@]}" showsrc "$pkg" 2>/dev/null | awk '/^Version:/ {print $2}' |
        grep -v -xF "$want" | grep "^$major\." | sort -rV | tr '\n' ' ')"
    for v in $versions; do
        if (cd "$dir/download" && apt-get source -qq --download-only "${o[@]}" "$pkg=$v" >&2 2>/dev/null); then
            got=$v
            break
        fi
        [ "$v" = "$want" ] && log "$pkg source $want: not served by this machine's archive (its .dsc or tarballs are missing)"
    done
    rm -rf "$apt"
    [ -n "$got" ] || { echo "no source of $pkg $major.x could be fetched" >&2; return 1; }
    [ "$got" = "$want" ] || log "$pkg source: $got, the newest of $major.x served (not $want)"
    # apt checked the files against the archive's signed index; dpkg-source
    # checks them against the .dsc (and says so if it has no key for its
    # signature: the log)
    dpkg-source -x "$dir"/download/*_"${got#*:}".dsc "$dir/tree" >"$dir/dpkg-source.log" 2>&1 ||
        { tail -5 "$dir/dpkg-source.log" >&2; return 1; }
    find "$dir" -maxdepth 1 -type f -name '*.orig.tar.*' -delete # dpkg-source's copy beside the tree
    echo "$got"
}
