# Shared by run.sh, bench.sh and container.sh (sourced): the server's user,
# a server of a prefix, and what that user holds in /dev/shm. The caller
# sets prefix (and may set data and pgbin after sourcing).
PGUSER_NAME=dsmpoolpg

log() { echo "=== $*" >&2; }
die() {
    echo "$(basename "$0"): $*" >&2
    exit 1
}

as_pg() { # run a command as the server's user
    if [ "$(id -u)" = 0 ]; then runuser -u "$PGUSER_NAME" -- "$@"; else "$@"; fi
}

need_user() {
    [ "$(id -u)" = 0 ] || return 0
    id "$PGUSER_NAME" >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/sh "$PGUSER_NAME"
}

port=${DSMPOOL_PG_PORT:-54329}
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
    local i
    for i in $(seq 1 600); do
        as_pg "$pgbin/pg_isready" -h "$sock" -p "$port" -U postgres -q && return 0
        sleep 0.1
    done
    return 1
}

