#!/usr/bin/env python3
"""Stock PostgreSQL 18 against PostgreSQL 18 on dsmpool (run.sh bench), release
builds, in eight configurations of one cluster (shared_buffers = 512MB):
  stock-4k      stock, min_dynamic_shared_memory = 0, huge_pages = off
  stock-1g-huge stock, min_dynamic_shared_memory = 1GB, huge_pages = on
  stock-shm-thp stock, 0 and huge_pages = on, /dev/shm a huge=always tmpfs
                (a private mount namespace)
  pool-4k       patched, dsmpool_size = 2GB, 4 KiB pages
  pool-thp      patched, dsmpool in transparent huge pages
  pool-2m       patched, dsmpool in 2 MiB hugetlb pages, huge_pages = on
  preload-4k    stock, the same binary, LD_PRELOAD=libdsmpool-preload.so and
                nothing else (its 2 GB elastic pool in 4 KiB pages: memory
                goes back as segments go), as stock-4k otherwise
  preload-huge  stock with LD_PRELOAD and the extension dsmpool
                (shared_preload_libraries): dsmpool.huge_pages = on,
                huge_pages = on, dsmpool.warm and dsmpool.idle_release as
                pool-elastic's (ELASTIC_WARM, ELASTIC_IDLE), nothing sized
                (dsmpool.size's 2 GB default)
  preload-reserve  (the idle part only, when named in ICONFIGS) preload-huge
                with a reservation beyond the machine's memory:
                dsmpool.size = RESERVE MB (65536) and dsmpool.resident_min
                = ELASTIC_MIN; the tables of the whole reservation are
                resident from the start (about 0.44% of it: issue 35)
All eight servers are up at once (a copy of the cluster each), and every
measurement is interleaved: one query of each configuration in turn, the
order rotated from round to round, so that this machine's drifts fall on
all of them alike. Per configuration: the median and the minimum, and the
paired ratio against stock-1g-huge (its time over theirs in the same
round: above 1 is faster), median and range.

  seed     select count(*) from t t1 join t t2 using (i), 10M rows,
           work_mem = 1GB, max_parallel_workers_per_gather = 0, 1, 2 .. CPUs,
           4 x CPUs; RUNS rounds; minor faults of the backends
  clients  N = 1, 4, 8 connections at once, each running the seed query
           with 2 workers: queries per minute; for the pools, what fell back
           (preload-huge: segments the pool refused, from its view)
  pgbench  the cost of the preload library where it serves nothing: pgbench
           -S (select only, PCLIENTS clients, PSECS seconds) and pgbench -S
           -C (a connection per transaction: every backend a fork, its
           exit, and the DSM attach of each) on a scale-PSCALE database,
           PRUNS interleaved rounds, in PCONFIGS (stock-4k preload-4k
           stock-1g-huge preload-huge): transactions per second, median,
           and each preload configuration against its stock twin (the
           same huge_pages: preload-4k against stock-4k, preload-huge
           against stock-1g-huge), the paired ratio (goal: within 1%)
  vacuum   VACUUM (PARALLEL 2) of a table of VROWS rows, 90% of them dead,
           two indexes (the dead TIDs in a shared radix tree, a DSA area):
           the time, and, in an untimed round with uprobes, DSA allocations
           (and DSM segments) per second of that time
  idle     the elastic pool against the fixed ones and stock, over time
           (not in the default PARTS): the seed query with 2 workers
           IRUNS times with ISHORT-second gaps (shorter than the idle
           release: the memory stays), then IRUNS times each after an
           ILONG-second gap (longer than dsmpool_idle_release and a
           maintenance period: the elastic pool gives its memory back and
           refills it in the next query), in ICONFIGS: stock-1g-huge,
           stock-4k, stock-shm-thp, pool-2m, pool-elastic, preload-4k and
           preload-huge
             pool-elastic  patched, dsmpool_size = 2GB as a reservation in
                           2 MiB hugetlb pages (as pool-2m: only the
                           elasticity differs), dsmpool_resident_min =
                           64MB, dsmpool_idle_release = 2000 ms,
                           dsmpool_warm = 256MB (ELASTIC_MIN, ELASTIC_IDLE,
                           ELASTIC_WARM)
           Gaps that depend on idle time cannot be interleaved query by
           query: the configurations run one after another, one server up
           at a time, each started afresh. Per query: ms, the backends'
           minor faults and, for the pools, pg_dsmpool's resident bytes and
           refills on demand (their count and time: what the query paid).
           Every ISAMPLE ms a sampler (this program, run again as
           "bench.py --sample ...": a process of its own) writes the
           server's shared memory resident: the blocks (st_blocks) of every
           shared object its processes map -- the main region, the pool,
           DSM segments in /dev/shm -- read through /proc/PID/map_files,
           each object once. That counts faulted pages alike for hugetlb,
           tmpfs, THP and anonymous shared memory, and only this server's.
           The figure compared is the dynamic shared memory resident: the
           pool, the DSM segments, and what the main region gained since
           the start (min_dynamic_shared_memory's pages as they are
           touched; shared buffers are prewarmed before). Not faulted but
           reserved hugetlb pages (stock-1g-huge's min_dynamic_shared_memory,
           held from the start) are in hugetlb_held_mb: HugePages_Total -
           Free + Rsvd of /proc/meminfo since before the server started
           (this machine's: other users of huge pages show there too).
           idle.csv, idle-mem.csv (samples, and the start and end of each
           query), bench-idle.txt, idle-mem.png.
Output: BENCH_OUT, by default bench/results/postgresql-<host>/ (seed.csv, clients.csv,
vacuum.csv, bench.txt, seed.png, machine.txt; idle: above). The tables,
the plots' data and the smallest form's checks are benchreport.py's.

Environment: ROWS (10000000), RUNS (3), WORKERS ("0 1 2 .. CPUs 4xCPUs"),
CLIENTS ("1 4 8"), CRUNS (2), VROWS (3000000), VRUNS (3), PARTS
("seed clients vacuum pgbench"; idle on its own: PARTS=idle), CONFIGS (all
eight; clients and vacuum use CCONFIGS, "stock-4k stock-1g-huge pool-2m
preload-4k preload-huge": stock as shipped, stock at its best, dsmpool at
its best, the preload library alone and with its extension), PCONFIGS,
PRUNS (5), PSECS (10), PCLIENTS (2), PSCALE (10), IRUNS (10), ISHORT (1),
ILONG (5), ISAMPLE (200), ICONFIGS. The defaults take about 50 minutes on
2 CPUs: seed 20, clients 16, vacuum 5, pgbench 7; idle about 30 more.
SMALL=1: the smallest form (run.sh bench-small, in the README's test
command): every part, idle included, on 100000 rows, one round each,
a few seconds apiece: that it runs and writes its tables, not what
they say; results in a directory of its own (bench-small/ under PREFIX).
POOL_BIN: the patched server's bin directory (PREFIX/bench-pool/bin;
bench-small takes the test build's, PREFIX/patched/bin). The smallest
form works in PREFIX/bench-small (its cluster, socket, ports 100 up, the
system settings it changed), so that it never touches a full run's, and
sizes everything down: SB (shared_buffers, 512 MB; small 128), POOL (the
pools, 2048 MB; small 256), MINDSM (stock-1g-huge's region, 1024 MB;
small 128). DSMPOOL_PG_PORT: the first port (54329), as lib.sh's.

Needs root (huge pages, mount namespaces, uprobes). What it takes from
lib.sh (the server's user, runuser, the port and socket, a server's init,
start and stop, the log and die lines) is written again here, alike.
Usage: bench.py [PREFIX]     (PREFIX: run.sh's, integrations/postgresql/work)
"""
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import benchreport  # noqa: E402  (beside this file)

PGUSER_NAME = "dsmpoolpg"
PROG = os.path.basename(sys.argv[0])
HP = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
SHMEM = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
TRACING = "/sys/kernel/tracing"
REF = "stock-1g-huge"
SEED = "select count(*) from t t1 join t t2 using (i)"
VACUUM = "vacuum (parallel 2) v"


# ---- what lib.sh gives the shell scripts ----------------------------------

def log(msg):
    print(f"=== {msg}", file=sys.stderr, flush=True)


def die(msg):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def as_pg(cmd):
    """A command run as the server's user (when root)."""
    return (["runuser", "-u", PGUSER_NAME, "--"] if os.geteuid() == 0 else []) + cmd


def run(cmd, quiet=False, **kw):
    """A command that must succeed (a failure ends the run, as set -e did);
    quiet: its output to /dev/null."""
    if quiet:
        kw.setdefault("stdout", subprocess.DEVNULL)
    return subprocess.run(cmd, check=True, **kw)


def output(cmd, **kw):
    """What a command that must succeed prints, less its trailing newlines."""
    return run(cmd, stdout=subprocess.PIPE, text=True, **kw).stdout.rstrip("\n")


def read(path):
    with open(path) as f:
        return f.read()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def write_whole(path, text):
    """text into path by a rename, so that a run killed meanwhile leaves the
    old file or the new one, never an empty one (the settings file)."""
    with open(path + ".new", "w") as f:
        f.write(text)
    os.replace(path + ".new", path)


class signals_held:
    """SIGINT, SIGTERM and SIGHUP held back for the block: a write of
    nr_hugepages stops adding pages early when a signal is pending, and the
    pages it added must be in the settings file before the signal ends the
    run."""
    SIGS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}

    def __enter__(self):
        self.old = signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGS)

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_SETMASK, self.old)


def append(path, line):
    with open(path, "a") as f:
        f.write(line + "\n")


def tracefs_write(path, text, add=False):
    """A write to a tracefs file: appended (add) or in place of what it
    holds. Not through open(): its append mode seeks to the end, which
    tracefs refuses (EINVAL)."""
    fd = os.open(path, os.O_WRONLY | (os.O_APPEND if add else os.O_TRUNC))
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def rm_rf(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def nproc():
    return len(os.sched_getaffinity(0))


def loadavg():
    return " ".join(read("/proc/loadavg").split()[:3])


def log_lines(path, pattern, c, last=False):
    """The server log's lines that match, each as "  config: what it says"
    (to stderr)."""
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip("\n") for l in f if re.search(pattern, l)]
    except OSError:
        return
    for l in lines[-1:] if last else lines:
        print(re.sub(r".*LOG: *", lambda _: f"  {c}: ", l, count=1), file=sys.stderr, flush=True)


def hugetlb_held_kb():
    """Huge pages in use or reserved, kB: HugePages_Total - Free + Rsvd."""
    v = {}
    for l in read("/proc/meminfo").splitlines():
        k, _, rest = l.partition(":")
        v[k] = int(rest.split()[0]) if rest.split() else 0
    return (v["HugePages_Total"] - v["HugePages_Free"] + v["HugePages_Rsvd"]) * v["Hugepagesize"]


def now_ms():
    return time.time_ns() // 1000000


# ---- the sampler: a process of its own --------------------------------------

def sample(cfg, pm, outf, poolbytes, period_ms, hbase, stop):
    """The server's shared memory resident, every period_ms, appended to outf
    until the stop file appears or the postmaster pm goes: st_blocks of each
    shared object that the postmaster or one of its children maps (through
    /proc/PID/map_files), each object once; the pool is the mapping of
    poolbytes bytes (or the preload library's memfd), a DSM segment a file
    of /dev/shm by PostgreSQL's or dsmpool's name, the rest the main
    region. A line: cfg, ms since the epoch, "sample", two empty fields,
    main, pool and segments MB, and the hugetlb MB held beyond hbase kB."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell's background job
    pm, poolbytes, period, hbase = int(pm), int(poolbytes), int(period_ms) / 1000.0, int(hbase)
    with open(outf, "a") as out:
        while not os.path.exists(stop) and os.path.exists(f"/proc/{pm}"):
            t = time.time()
            try:
                kids = read(f"/proc/{pm}/task/{pm}/children").split()
            except OSError:
                break
            seen, b = set(), {"main": 0, "pool": 0, "seg": 0}
            for pid in [str(pm)] + kids:
                try:
                    maps = read(f"/proc/{pid}/maps").splitlines()
                except OSError:
                    continue
                for l in maps:
                    f = l.split(None, 5)
                    if len(f) < 6 or f[1][3] != "s" or f[4] == "0" or f[5].startswith("/usr/"):
                        continue
                    key = (f[3], f[4])
                    if key in seen:
                        continue
                    try:
                        st = os.stat(f"/proc/{pid}/map_files/{f[0]}")
                    except OSError:
                        continue
                    seen.add(key)
                    lo, hi = (int(x, 16) for x in f[0].split("-"))
                    path = f[5]
                    kind = "seg" if ("PostgreSQL." in path or "/dsmpool." in path) else \
                        "pool" if ((poolbytes and hi - lo == poolbytes) or "memfd:dsmpool" in path) else "main"
                    b[kind] += st.st_blocks * 512
            mn, pl, sg = (b[k] / 1048576 for k in ("main", "pool", "seg"))
            out.write(f"{cfg},{int(t * 1000)},sample,,,{mn:.1f},{pl:.1f},{sg:.1f},{(hugetlb_held_kb() - hbase) / 1024:.0f}\n")
            out.flush()
            time.sleep(max(0.0, period - (time.time() - t)))


# ---- the run ----------------------------------------------------------------

def env(name, default=""):
    """An environment variable, or the default where it is unset or empty."""
    return os.environ.get(name) or default


class Bench:
    def __init__(self, prefix):
        self.prefix = prefix
        self.repo = os.path.abspath(os.path.join(HERE, "..", ".."))
        self.small = env("SMALL", "0") == "1"
        # the smallest form: every part runs, nothing measured
        small = {"ROWS": "100000", "RUNS": "1", "WORKERS": "0 2", "CLIENTS": "2", "CRUNS": "1", "VROWS": "30000",
                 "VRUNS": "1", "PRUNS": "1", "PSECS": "1", "PSCALE": "1", "IRUNS": "2", "ISHORT": "1", "ILONG": "3",
                 "ISETTLE": "1", "PARTS": "seed clients vacuum pgbench idle",
                 "ICONFIGS": "stock-4k pool-elastic preload-huge", "ELASTIC_IDLE": "500", "ELASTIC_MIN": "32MB",
                 "ELASTIC_WARM": "64MB", "SB": "128", "POOL": "256", "MINDSM": "128"} if self.small else {}
        ncpu = nproc()
        workers = "0"
        w = 1
        while w <= ncpu:
            workers += f" {w}"
            w *= 2
        if str(ncpu) not in workers.split():
            workers += f" {ncpu}"
        workers += f" {4 * ncpu}"
        defaults = {
            "SB": "512",  # shared_buffers, MB
            "POOL": "2048",  # the pools' size, MB (preload-huge: dsmpool.size, its default 2GB)
            "MINDSM": "1024",  # stock-1g-huge's min_dynamic_shared_memory, MB
            "ROWS": "10000000", "RUNS": "3", "CRUNS": "2", "VROWS": "3000000", "VRUNS": "3", "CLIENTS": "1 4 8",
            "PARTS": "seed clients vacuum pgbench", "PRUNS": "5", "PSECS": "10", "PCLIENTS": "2", "PSCALE": "10",
            "PCONFIGS": "stock-4k preload-4k stock-1g-huge preload-huge", "IRUNS": "10", "ISHORT": "1",
            "ILONG": "5", "ISAMPLE": "200",
            "ICONFIGS": "stock-1g-huge stock-4k stock-shm-thp pool-2m pool-elastic preload-4k preload-huge",
            "ELASTIC_MIN": "64MB", "ELASTIC_IDLE": "2000", "ELASTIC_WARM": "256MB",
            "RESERVE": "65536",  # preload-reserve's dsmpool.size, MB
            "WORKERS": workers, "ISETTLE": "5",
            "CONFIGS": "stock-4k stock-1g-huge stock-shm-thp pool-4k pool-thp pool-2m preload-4k preload-huge",
            "CCONFIGS": "stock-4k stock-1g-huge pool-2m preload-4k preload-huge"}
        self.v = {k: env(k, small.get(k, d)) for k, d in defaults.items()}
        for k in ("SB", "POOL", "MINDSM", "RUNS", "CRUNS", "VRUNS", "PRUNS", "IRUNS", "RESERVE"):
            setattr(self, k.lower(), int(self.v[k]))
        self.parts = self.v["PARTS"].split()
        self.configs = self.v["CONFIGS"].split()
        self.cconfigs = self.v["CCONFIGS"].split()
        self.pconfigs = self.v["PCONFIGS"].split()
        self.iconfigs = self.v["ICONFIGS"].split()
        self.workers = self.v["WORKERS"].split()
        self.clients = self.v["CLIENTS"].split()
        self.maxw = max(4 * ncpu, 24)
        self.port = int(env("DSMPOOL_PG_PORT", "54329"))
        self.sock = f"{prefix}/sock"
        # the clusters, the socket, the system settings file
        self.out = env("BENCH_OUT", f"{self.repo}/bench/results/postgresql-{socket.gethostname().split('.')[0]}")
        self.work = prefix
        if self.small:
            self.out = env("BENCH_OUT", f"{prefix}/bench-small/results")
            self.work = f"{prefix}/bench-small"
            self.sock = f"{self.work}/sock"
            self.port += 100
        # the servers: stock and patched release builds (POOL_BIN: another
        # patched build's bin directory; bench-small takes the test build,
        # run.sh build's)
        self.stock_bin = f"{prefix}/bench-stock/bin"
        self.pool_bin = env("POOL_BIN", f"{prefix}/bench-pool/bin")
        self.saved = f"{self.work}/bench-system-settings"
        self.hp_added = 0
        self.shmem_old = None
        self.mounted_tracefs = False
        self.small_done = False
        self.background = []  # the sampler and the clients' psql, ended at the end
        # STARTED: the servers the interleaved parts keep up at once; ALL:
        # every configuration (its port, its cleanup), the idle part's too
        started = ""
        if "seed" in self.parts:
            started = self.v["CONFIGS"]
        if "clients" in self.parts or "vacuum" in self.parts:
            for c in self.cconfigs:
                if c not in started.split():
                    started += f" {c}"
        if "pgbench" in self.parts:
            for c in self.pconfigs:
                if c not in started.split():
                    started += f" {c}"
        self.started_text = started  # as the log says it
        self.started = started.split()
        self.all = list(self.started)
        if "idle" in self.parts:
            self.all += [c for c in self.iconfigs if c not in self.all]

    # -- the configurations --

    def bindir(self, c):
        return self.pool_bin if c.startswith("pool-") else self.stock_bin

    @staticmethod
    def preloaded(c):  # a stock server with LD_PRELOAD
        return c.startswith("preload-")

    @staticmethod
    def extended(c):  # and the extension dsmpool
        return c in ("preload-huge", "preload-reserve")

    def viewed(self, c):  # a configuration with a pool's view
        return c.startswith("pool-") or self.extended(c)

    def cdata(self, c):
        return f"{self.work}/bench-data/{c}"

    def cport(self, c):  # a port per configuration
        return str(self.port + 1 + self.all.index(c)) if c in self.all else ""

    def settings(self, c):
        """The server's settings for a configuration, a line each."""
        v = self.v
        pool = f"dsmpool_size = {self.pool}MB"
        s = {
            "stock-4k": ["min_dynamic_shared_memory = 0", "huge_pages = off"],
            "stock-1g-huge": [f"min_dynamic_shared_memory = {self.mindsm}MB", "huge_pages = on"],
            "stock-shm-thp": ["min_dynamic_shared_memory = 0", "huge_pages = on"],
            "pool-4k": [pool, "dsmpool_huge_pages = off", "huge_pages = off"],
            "pool-thp": [pool, "dsmpool_huge_pages = transparent", "huge_pages = off"],
            "pool-2m": [pool, "dsmpool_huge_pages = on", "huge_pages = on"],
            "pool-elastic": [pool, "dsmpool_huge_pages = on", "huge_pages = on",
                             f"dsmpool_resident_min = {v['ELASTIC_MIN']}", f"dsmpool_idle_release = {v['ELASTIC_IDLE']}",
                             f"dsmpool_warm = {v['ELASTIC_WARM']}"],
            "preload-4k": ["min_dynamic_shared_memory = 0", "huge_pages = off"],
            "preload-huge": ["min_dynamic_shared_memory = 0", "huge_pages = on", "shared_preload_libraries = 'dsmpool'",
                             "dsmpool.huge_pages = on", f"dsmpool.warm = {v['ELASTIC_WARM']}",
                             f"dsmpool.idle_release = {v['ELASTIC_IDLE']}"]
            # 2048: dsmpool.size's default, left unset
            + ([] if self.pool == 2048 else [f"dsmpool.size = {self.pool}MB"]),
            "preload-reserve": ["min_dynamic_shared_memory = 0", "huge_pages = on",
                                "shared_preload_libraries = 'dsmpool'", "dsmpool.huge_pages = on",
                                f"dsmpool.warm = {v['ELASTIC_WARM']}", f"dsmpool.idle_release = {v['ELASTIC_IDLE']}",
                                f"dsmpool.size = {self.reserve}MB", f"dsmpool.resident_min = {v['ELASTIC_MIN']}"],
        }
        return s.get(c, [])

    def huge_mb(self, c):
        """The huge pages a configuration with huge_pages = on takes, MB: its
        shared buffers (SB) and their tables, and its pool (POOL: pool-2m,
        pool-elastic, preload-huge) or min_dynamic_shared_memory (MINDSM:
        stock-1g-huge)."""
        base = self.sb + 128
        return {"stock-1g-huge": base + self.mindsm, "stock-shm-thp": base,
                "pool-2m": base + self.pool, "pool-elastic": base + self.pool, "preload-huge": base + self.pool,
                # what the preload library asks of a reservation beyond the
                # machine (dsmpool_preload.c huge_fits: its tables at most
                # size/256, resident_min and warm, 2 GB to work in), and a margin
                "preload-reserve": base + self.pool + self.reserve // 256 + int(self.v["ELASTIC_MIN"].rstrip("MB"))
                + int(self.v["ELASTIC_WARM"].rstrip("MB")) + 64}.get(c, 0)

    def pid(self, c):
        return read(f"{self.cdata(c)}/postmaster.pid").split("\n", 1)[0]

    def cminflt(self, c):
        """The postmaster's reaped children's minor faults (field 11 of its
        stat)."""
        stat = read(f"/proc/{self.pid(c)}/stat")
        return int(stat[stat.rindex(")") + 2:].split()[8])

    # -- psql --

    def csql_cmd(self, c, *sqls):
        """One psql on a configuration's server, each statement a -c."""
        a = []
        for s in sqls:
            a += ["-c", s]
        return as_pg([f"{self.bindir(c)}/psql", "-h", self.sock, "-p", self.cport(c), "-U", "postgres",
                      "-d", "postgres", "-X", "-q", "-A", "-t"] + a)

    def csql(self, c, *sqls):
        """What the statements print (a failure ends the run)."""
        return output(self.csql_cmd(c, *sqls))

    def csql_or(self, c, sql, fallback):
        """What the statement prints, or fallback where it fails (its errors
        hidden)."""
        p = subprocess.run(self.csql_cmd(c, sql), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return p.stdout.rstrip("\n") if p.returncode == 0 else fallback

    def csql_said(self, c, sql):
        """What the statement prints, whether or not it succeeds (its errors
        said): for a check whose failure says what went wrong."""
        return subprocess.run(self.csql_cmd(c, sql), stdout=subprocess.PIPE, text=True).stdout.rstrip("\n")

    def timed(self, c, *sqls):
        """The last statement's ms ("" where psql said no time)."""
        t = re.findall(r"^Time: ([0-9.]+) ms", self.csql(c, *sqls), re.M)
        return t[-1] if t else ""

    # -- the system settings, put back at the end --

    def save_settings(self):
        """What was changed, kept in a file until it is put back: the huge
        pages this run added (others on this machine may reserve some
        meanwhile: the run takes back what it added, not a count it saw),
        shmem_enabled, and tracefs where the run mounted it (the vacuum's
        uprobes). A run killed outright (SIGKILL, no cleanup) leaves the
        file, and the next run takes back what it says first (the previous
        helper's run left 2496 huge pages reserved that way)."""
        os.makedirs(self.work, exist_ok=True)
        with signals_held():
            if os.path.isfile(self.saved):
                left = read(self.saved).split()
                hp_left, self.shmem_old = left[:2]
                print(f"a previous bench did not put the system settings back: {hp_left} huge pages added, "
                      f"shmem_enabled {self.shmem_old}{', tracefs mounted' if 'tracefs' in left[2:] else ''}; "
                      "taking them back", file=sys.stderr, flush=True)
                cur = int(read(HP))
                write(HP, f"{max(cur - int(hp_left), 0)}\n")
                if "tracefs" in left[2:] and os.path.ismount(TRACING):
                    subprocess.run(["umount", TRACING], stderr=subprocess.DEVNULL)
            else:  # the value in brackets ("within_size" too)
                self.shmem_old = re.sub(r".*\[([a-z_]+)\].*", r"\1", read(SHMEM).strip())
            write_whole(self.saved, f"0 {self.shmem_old}\n")

    def reserve_huge_pages(self):
        """The huge pages the servers up at once take; the idle part, one
        server at a time, the largest of those."""
        need_mb = sum(self.huge_mb(c) for c in self.started)
        for c in self.all:
            need_mb = max(need_mb, self.huge_mb(c))
        need_pages = need_mb // 2
        with signals_held():
            hp_before = int(read(HP))
            try:
                write(HP, f"{hp_before + need_pages}\n")
            finally:  # what it added, even where the write failed part-way
                self.hp_added = max(int(read(HP)) - hp_before, 0)
                write_whole(self.saved, f"{self.hp_added} {self.shmem_old}\n")
        if self.hp_added < need_pages:
            print(f"warning: only {self.hp_added} of {need_pages} huge pages could be reserved: the huge "
                  "configurations may fail", file=sys.stderr, flush=True)
        write(SHMEM, "advise\n")

    def stop_all(self):
        """Every configuration's server, and the template's (up while the
        cluster is made)."""
        servers = [(self.cdata(c), self.bindir(c)) for c in self.all]
        if getattr(self, "tmpl", None):
            servers.append((self.tmpl, self.pool_bin))
        for d, b in servers:
            if os.path.isfile(f"{d}/postmaster.pid"):
                subprocess.run(as_pg([f"{b}/pg_ctl", "-D", d, "stop", "-m", "fast"]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def restore(self, rc):
        """The servers stopped and the system settings put back, whatever
        ended the run; then, in the smallest form run to its end, its checks
        (so that their summary is the last line). The exit status."""
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # a second one must not stop this
            signal.signal(s, signal.SIG_IGN)
        for p in self.background:
            if p.poll() is None:
                p.terminate()
                p.wait()
        self.stop_all()
        want = None
        try:
            want = int(read(HP)) - self.hp_added
            write(HP, f"{want}\n")
        except (OSError, ValueError) as e:
            print(f"{PROG}: {HP}: {e}", file=sys.stderr)
        shmem_back = True
        try:
            write(SHMEM, f"{self.shmem_old}\n")
        except OSError as e:
            shmem_back = False
            print(f"{PROG}: {SHMEM}: {e}", file=sys.stderr)
        try:
            now = read(HP).strip()
        except OSError:
            now = "?"
        if now == str(want) and shmem_back:
            if os.path.exists(self.saved):
                os.unlink(self.saved)
        else:
            print(f"warning: vm.nr_hugepages is {now}, not {want} (this run added {self.hp_added}): huge pages "
                  "still in use?", file=sys.stderr)
        if os.path.isdir(f"{TRACING}/events/uprobes"):
            try:
                events = sorted(set(re.findall(r"dsmpoolbench[a-z0-9_]*", read(f"{TRACING}/uprobe_events"))))
            except OSError:
                events = []
            for e in events:
                for path, text, add in ((f"{TRACING}/events/uprobes/{e}/enable", "0\n", False),
                                        (f"{TRACING}/uprobe_events", f"-:{e}\n", True)):
                    try:
                        tracefs_write(path, text, add)
                    except OSError:
                        pass
        if self.mounted_tracefs:
            subprocess.run(["umount", TRACING], stderr=subprocess.DEVNULL)
        sys.stderr.flush()
        if self.small and self.small_done:
            return self.small_check()
        return rc

    def small_check(self):
        """The smallest form: what ran, counted (benchreport.small_check)."""
        lines, bad = benchreport.small_check(
            self.out, self.parts, self.configs, self.cconfigs, self.pconfigs, self.iconfigs, self.workers,
            self.clients, self.runs, self.cruns, self.vruns, self.pruns, self.iruns)
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
        return 1 if bad else 0

    # -- the servers --

    def server_init(self, data, bindir, lines):
        """A cluster made afresh in data by bindir's initdb, lib.sh's
        settings and lines appended to its postgresql.conf."""
        subprocess.run(as_pg([f"{bindir}/pg_ctl", "-D", data, "stop", "-m", "immediate"]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rm_rf(data)
        os.makedirs(self.sock, exist_ok=True)
        if os.geteuid() == 0:
            for p in (self.sock, self.prefix):
                shutil.chown(p, user=PGUSER_NAME)
        run(as_pg([f"{bindir}/initdb", "-D", data, "-U", "postgres", "--no-sync"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(f"{data}/postgresql.conf", "a") as f:
            for l in [f"port = {self.port}", f"unix_socket_directories = '{self.sock}'", "listen_addresses = ''",
                      "logging_collector = off"] + lines:
                f.write(l + "\n")

    def make_cluster(self):
        """The cluster, made once (by the patched initdb), a copy per
        configuration; made again when the patched catalog changes
        (pg_dsmpool's columns). pg_config says where that is: PostgreSQL
        drops share/'s "postgresql" suffix when the prefix already names
        postgres, as integrations/postgresql/work does."""
        self.tmpl = f"{self.work}/bench-data/template"
        bki = output([f"{self.pool_bin}/pg_config", "--sharedir"]) + "/postgres.bki"
        if not os.path.isfile(bki):
            die(f"no {bki}: the patched build in {self.pool_bin} is incomplete (run.sh bench rebuilds it when removed)")
        with open(bki, "rb") as f:
            md5 = hashlib.md5(f.read()).hexdigest()[:8]
        self.stamp = f"seed-{self.v['ROWS']}-pgbench-{self.v['PSCALE']}-sb-{self.sb}-{md5}"
        if os.path.isfile(f"{self.tmpl}/{self.stamp}"):
            return
        log(f"the cluster: {self.v['ROWS']} rows")
        if os.path.isfile(f"{self.tmpl}/postmaster.pid"):  # a run that ended while making it
            subprocess.run(as_pg([f"{self.pool_bin}/pg_ctl", "-D", self.tmpl, "stop", "-m", "immediate"]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rm_rf(f"{self.work}/bench-data")
        os.makedirs(f"{self.work}/bench-data", exist_ok=True)
        os.makedirs(self.sock, exist_ok=True)
        for p in (f"{self.work}/bench-data", self.sock, self.prefix, self.work):
            shutil.chown(p, user=PGUSER_NAME)
        data, b = self.tmpl, self.pool_bin
        self.server_init(data, b, [f"shared_buffers = {self.sb}MB", f"max_worker_processes = {self.maxw}",
                                   f"max_parallel_workers = {self.maxw}", "max_parallel_maintenance_workers = 4",
                                   "maintenance_work_mem = 1GB", "autovacuum = off"])
        shutil.copyfile(f"{data}/postgresql.conf", f"{data}/postgresql.conf.base")
        run(as_pg([f"{b}/pg_ctl", "-D", data, "-l", f"{data}/log", "-w", "-t", "120", "start"]), quiet=True)
        run(as_pg([f"{b}/psql", "-h", self.sock, "-p", str(self.port), "-U", "postgres", "-d", "postgres", "-X", "-q",
                   "-A", "-t", "-c", f"create table t (i int); insert into t select generate_series(1, {self.v['ROWS']}); "
                   "analyze t; create extension pg_prewarm;"]))
        if subprocess.run(as_pg([f"{b}/pgbench", "-h", self.sock, "-p", str(self.port), "-U", "postgres", "-i", "-q",
                                 "-s", self.v["PSCALE"], "postgres"]),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
            die("pgbench -i failed")
        run(as_pg([f"{b}/pg_ctl", "-D", data, "-w", "-t", "120", "stop", "-m", "fast"]), quiet=True)
        open(f"{data}/{self.stamp}", "a").close()

    def start_config(self, c):
        """A configuration's server, from a copy of the cluster, its settings
        appended; its table prewarmed, and its pool checked where it has one.
        A server that does not start ends the run, its log's last lines
        said."""
        d, b = self.cdata(c), self.bindir(c)
        if not os.path.isfile(f"{d}/{self.stamp}"):
            rm_rf(d)
            run(["cp", "-a", self.tmpl, d])
        shutil.copyfile(f"{d}/postgresql.conf.base", f"{d}/postgresql.conf")
        with open(f"{d}/postgresql.conf", "a") as f:
            for l in self.settings(c) + [f"port = {self.cport(c)}"]:
                f.write(l + "\n")
        open(f"{d}/log", "w").close()
        start = [f"{b}/pg_ctl", "-D", d, "-l", f"{d}/log", "-w", "-t", "300", "start"]
        if c == "stock-shm-thp":
            # DSM segments in a huge=always tmpfs, the server in its own mount namespace
            cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                   "mount -t tmpfs -o huge=always,size=16g,mode=1777 tmpfs /dev/shm && "
                   f"exec runuser -u {PGUSER_NAME} -- {b}/pg_ctl -D {d} -l {d}/log -w -t 300 start"]
        elif self.preloaded(c):  # pg_ctl passes its environment to the postmaster
            cmd = as_pg(["env", f"LD_PRELOAD={self.preload}"] + start)
        else:
            cmd = as_pg(start)
        ok = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode == 0 and \
            subprocess.run(self.csql_cmd(c, "select pg_prewarm('t');"), stdout=subprocess.DEVNULL).returncode == 0
        if not ok:
            try:
                sys.stderr.write("".join(read(f"{d}/log").splitlines(True)[-3:]))
            except OSError:
                pass
            die(f"{c} could not start")
        # the extension's view, in public (the patched initdb's catalog has a
        # pg_catalog.pg_dsmpool of its own, which a stock server cannot read)
        if self.preloaded(c):  # the postmaster maps the pool from its start (the control segment's creation makes it)
            if "memfd:dsmpool" not in read(f"/proc/{self.pid(c)}/maps"):
                die(f"{c}: the postmaster has no pool: {self.log_tail(c)}")
        if self.extended(c):
            run(self.csql_cmd(c, "set client_min_messages = warning", "create extension if not exists dsmpool"),
                quiet=True)
            if self.csql_said(c, "select serving from public.pg_dsmpool") != "t":
                die(f"{c}: the pool does not serve: {self.csql_said(c, 'select note from public.pg_dsmpool')}")
            # dsmpool.huge_pages = on falls back to 4 kB pages where huge ones are short: not this configuration
            size = self.csql_said(c, "select page_size from public.pg_dsmpool")
            if not (size.isdigit() and int(size) > 4096):
                die(f"{c}: the pool has 4 kB pages, not huge ones: {self.csql_said(c, 'select note from public.pg_dsmpool')}")

    def log_tail(self, c):
        return "\n".join(read(f"{self.cdata(c)}/log").rstrip("\n").split("\n")[-3:])

    def stop_config(self, c):
        run(as_pg([f"{self.bindir(c)}/pg_ctl", "-D", self.cdata(c), "stop", "-m", "fast"]), quiet=True)

    # -- the parts --

    def rotate(self, k, words):
        """The words, starting at the k-th (mod their number)."""
        return [words[(k + i) % len(words)] for i in range(len(words))]

    def part_seed(self):
        """The seed query by worker count."""
        f = f"{self.out}/seed.csv"
        write(f, "config,workers,run,ms,minflt\n")
        for r in range(1, self.runs + 1):
            for k, w in enumerate(self.workers, 1):
                for c in self.rotate(r + k, self.configs):
                    f0 = self.cminflt(c)
                    t = self.timed(c, "set work_mem = '1GB'", f"set max_parallel_workers_per_gather = {w}",
                                   "\\timing on", SEED)
                    time.sleep(0.2)  # the workers are reaped
                    f1 = self.cminflt(c)
                    append(f, f"{c},{w},{r},{t},{f1 - f0}")
            log(f"seed: round {r} of {self.runs} done")

    def pool_fell(self, c):
        """What a pool configuration's pg_dsmpool says fell back:
        "segments+areas|peak MB"; the extension's view, segments refused (no
        peak); "|" where it cannot be read."""
        if self.extended(c):
            return self.csql_or(c, "select segments_refused || '|' from public.pg_dsmpool", "|")
        return self.csql_or(c, "select (fallback_segments + fallback_areas) || '|' || round((fallback_area_bytes_peak"
                            " + fallback_segment_bytes_peak) / 1048576.0) from pg_dsmpool", "|")

    def part_clients(self):
        """N connections at once."""
        f = f"{self.out}/clients.csv"
        write(f, "config,clients,run,ms,queries,errors,fell_back,fallback_peak_mb\n")
        for r in range(1, self.cruns + 1):
            for k, n in enumerate(self.clients, 1):
                for c in self.rotate(r + k, self.cconfigs):
                    fb0 = self.pool_fell(c) if self.viewed(c) else "|"
                    t0 = time.time_ns()
                    procs = []
                    for i in range(1, int(n) + 1):
                        with open(f"{self.work}/bench-client-{i}.out", "w") as o:
                            procs.append(subprocess.Popen(
                                self.csql_cmd(c, "set work_mem = '1GB'", "set max_parallel_workers_per_gather = 2",
                                              SEED), stdout=o, stderr=subprocess.STDOUT))
                    self.background += procs
                    for p in procs:
                        p.wait()
                    t1 = time.time_ns()
                    self.background = [p for p in self.background if p not in procs]
                    ok = err = 0
                    for i in range(1, int(n) + 1):
                        with open(f"{self.work}/bench-client-{i}.out", errors="replace") as o:
                            right = self.v["ROWS"] in o.read().split("\n")
                        ok, err = (ok + 1, err) if right else (ok, err + 1)
                    fb1 = self.pool_fell(c) if self.viewed(c) else "|"
                    fell = ""
                    if self.viewed(c):  # (a view that cannot be read counts as 0)
                        fell = str(int(fb1.rpartition("|")[0] or 0) - int(fb0.rpartition("|")[0] or 0))
                    append(f, f"{c},{n},{r},{(t1 - t0) // 1000000},{ok},{err},{fell},{fb1.partition('|')[2]}")
            log(f"clients: round {r} of {self.cruns} done")

    def uprobe_add(self, name, binary, sym):
        """A counting probe at the symbol's file offset; False where there is
        none."""
        nm = subprocess.run(["nm", binary], stdout=subprocess.PIPE, text=True).stdout
        va = next((f[0] for f in (l.split() for l in nm.splitlines()) if len(f) >= 3 and f[2] == sym), None)
        if va is None:
            return False
        va = int(va, 16)
        off = None
        for l in subprocess.run(["readelf", "-lW", binary], stdout=subprocess.PIPE, text=True).stdout.splitlines():
            f = l.split()
            if f and f[0] == "LOAD":  # Offset VirtAddr PhysAddr FileSiz ...
                o, v, fs = int(f[1], 16), int(f[2], 16), int(f[4], 16)
                if v <= va < v + fs:
                    off = hex(va - v + o)
                    break
        if off is None:
            return False
        try:
            tracefs_write(f"{TRACING}/uprobe_events", f"p:{name} {binary}:{off}\n", add=True)
            tracefs_write(f"{TRACING}/events/uprobes/{name}/enable", "1\n")
        except OSError as e:
            print(f"{PROG}: uprobe {name}: {e}", file=sys.stderr, flush=True)
            return False
        return True

    @staticmethod
    def uprobe_hits(name):
        try:
            profile = read(f"{TRACING}/uprobe_profile")
        except OSError:
            return 0
        for l in profile.splitlines():
            f = l.split()
            if len(f) >= 3 and f[1] == name:
                return int(f[2])
        return 0

    def part_vacuum(self):
        """VACUUM (PARALLEL 2), the dead TIDs in a shared radix tree."""
        vrows = self.v["VROWS"]
        vsetup = ("set client_min_messages = warning; drop table if exists v;\n"
                  "create table v (i int, j int) with (autovacuum_enabled = off);\n"
                  f"insert into v select g, (g::bigint * 7919) % {vrows} from generate_series(1, {vrows}) g;\n"
                  "create index v_i on v (i); create index v_j on v (j);\n"
                  "delete from v where i % 10 <> 0; checkpoint;")
        f = f"{self.out}/vacuum.csv"
        write(f, "config,run,ms\n")
        for r in range(1, self.vruns + 1):
            for c in self.rotate(r, self.cconfigs):
                run(self.csql_cmd(c, vsetup), quiet=True)
                t = self.timed(c, "set maintenance_work_mem = '1GB'", "\\timing on", VACUUM)
                append(f, f"{c},{r},{t}")
            log(f"vacuum: round {r} of {self.vruns} done")
        # the untimed round: what each configuration's VACUUM allocates
        f = f"{self.out}/vacuum-counts.csv"
        write(f, "config,dsa_allocations,dsm_segments\n")
        if not os.path.isdir(f"{TRACING}/events"):
            with signals_held():  # mounted and recorded, or neither
                if subprocess.run(["mount", "-t", "tracefs", "nodev", TRACING]).returncode == 0:
                    self.mounted_tracefs = True
                    write_whole(self.saved, f"{self.hp_added} {self.shmem_old} tracefs\n")
        if not os.access(f"{TRACING}/uprobe_events", os.W_OK):
            print("  no uprobes here (tracefs): the vacuum's allocations are not counted", file=sys.stderr, flush=True)
            return
        for b, binary in (("stock", self.stock_bin), ("pool", self.pool_bin)):
            self.uprobe_add(f"dsmpoolbench_{b}_alloc", f"{binary}/postgres", "dsa_allocate_extended")
            self.uprobe_add(f"dsmpoolbench_{b}_dsm", f"{binary}/postgres", "dsm_create")
        for c in self.cconfigs:
            run(self.csql_cmd(c, vsetup), quiet=True)
            b = "pool" if c.startswith("pool-") else "stock"
            a0, s0 = self.uprobe_hits(f"dsmpoolbench_{b}_alloc"), self.uprobe_hits(f"dsmpoolbench_{b}_dsm")
            run(self.csql_cmd(c, "set maintenance_work_mem = '1GB'", VACUUM), quiet=True)
            a1, s1 = self.uprobe_hits(f"dsmpoolbench_{b}_alloc"), self.uprobe_hits(f"dsmpoolbench_{b}_dsm")
            append(f, f"{c},{a1 - a0},{s1 - s0}")

    def part_pgbench(self):
        """The preload library where it serves nothing. pgbench -S makes no
        DSM segment: what it measures of the preload library is its
        pass-through (every mmap, munmap, close and posix_fallocate of the
        server goes through it); -C adds a fork, an exit and the control
        segment's attach per transaction."""
        f = f"{self.out}/pgbench.csv"
        write(f, "config,mode,run,tps\n")
        pc = self.v["PCLIENTS"]
        for r in range(1, self.pruns + 1):
            for k, mode in enumerate(("S", "C"), 1):
                for c in self.rotate(r + k, self.pconfigs):
                    flags = ["-S"] if mode == "S" else ["-S", "-C"]
                    p = subprocess.run(as_pg([f"{self.bindir(c)}/pgbench", "-h", self.sock, "-p", self.cport(c), "-U",
                                              "postgres", "-n"] + flags + ["-c", pc, "-j", pc, "-T", self.v["PSECS"],
                                                                           "postgres"]),
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                    pout = p.stdout.rstrip("\n")
                    tail = "\n".join(pout.split("\n")[-3:])
                    if p.returncode != 0:
                        die(f"pgbench {' '.join(flags)} on {c} failed: {tail}")
                    tps = re.findall(r"^tps = ([0-9.]+)", pout, re.M)
                    if not tps:
                        die(f"pgbench {' '.join(flags)} on {c} said no tps: {tail}")
                    append(f, f"{c},{mode},{r},{tps[0]}")
            log(f"pgbench: round {r} of {self.pruns} done")

    def pool_row(self, c):
        """resident MB|refills on demand|their us|releases, or "|||" for
        stock (the extension's view: resident only)."""
        if self.extended(c):
            return self.csql_or(c, "select round(resident / 1048576.0) || '|||' from public.pg_dsmpool", "|||")
        if not c.startswith("pool-"):
            return "|||"
        return self.csql_or(c, "select round(resident / 1048576.0) || '|' || refills_on_demand || '|' || "
                            "refill_on_demand_us || '|' || releases from pg_dsmpool", "|||")

    def part_idle(self):
        """The elastic pool, warm and cold, and its memory over time: one
        configuration after another, each server started afresh, its
        sampler beside it."""
        qf, mf = f"{self.out}/idle.csv", f"{self.out}/idle-mem.csv"
        write(qf, "config,phase,query,gap_s,ms,minflt,resident_mb,refills_on_demand,refill_on_demand_ms,releases\n")
        write(mf, "config,t_ms,event,phase,query,main_mb,pool_mb,seg_mb,hugetlb_held_mb\n")
        v = self.v
        for c in self.iconfigs:
            log(f"idle: {c} ({v['IRUNS']} queries {v['ISHORT']}s apart, then {v['IRUNS']} after {v['ILONG']}s each)")
            hbase = hugetlb_held_kb()
            self.start_config(c)
            log_lines(f"{self.cdata(c)}/log", "dsmpool: pool|dsmpool: elastic", c)
            poolbytes = self.pool * 1048576 if c.startswith("pool-") else 0  # the preload library's pool: its memfd's name
            stopf = f"{self.work}/bench-idle-stop"
            rm_rf(stopf)
            sampler = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--sample", c, self.pid(c), mf,
                                        str(poolbytes), v["ISAMPLE"], str(hbase), stopf])
            self.background.append(sampler)
            time.sleep(float(v["ISETTLE"]))  # the idle server, and the elastic pool's first maintenance steps (its warm reserve)
            prev = self.pool_row(c)
            q = 0
            for phase, gap in (("short", v["ISHORT"]), ("long", v["ILONG"])):
                for _ in range(self.iruns):
                    q += 1
                    if phase == "long":
                        time.sleep(float(gap))
                    f0 = self.cminflt(c)
                    append(mf, f"{c},{now_ms()},start,{phase},{q},,,,")
                    t = self.timed(c, "set work_mem = '1GB'", "set max_parallel_workers_per_gather = 2", "\\timing on",
                                   SEED)
                    append(mf, f"{c},{now_ms()},end,{phase},{q},,,,")
                    time.sleep(0.2)  # the workers are reaped
                    f1 = self.cminflt(c)
                    row = self.pool_row(c)
                    res, rod, rus, rel = (row.split("|", 3) + ["", "", ""])[:4]
                    _, rod0, rus0, _ = (prev.split("|", 3) + ["", "", ""])[:4]
                    d1 = d2 = ""
                    if rod:
                        d1 = str(int(rod) - int(rod0 or 0))
                        d2 = f"{(float(rus or 0) - float(rus0 or 0)) / 1000:.1f}"
                    append(qf, f"{c},{phase},{q},{gap},{t},{f1 - f0},{res},{d1},{d2},{rel}")
                    prev = row
                    if phase == "short":
                        time.sleep(float(gap))
            time.sleep(float(v["ILONG"]))
            open(stopf, "a").close()
            sampler.wait()
            self.background.remove(sampler)
            rm_rf(stopf)
            self.stop_config(c)
            log_lines(f"{self.cdata(c)}/log", "dsmpool: the pool's maintenance failed", c)

    # -- the tables and the plots --

    def gnuplot(self, script):
        run(["gnuplot"], input=script, text=True)

    def postgres_version(self):
        return output([f"{self.prefix}/bench-stock/bin/postgres", "--version"])

    def memory_gib(self):
        for l in output(["free", "-g"]).splitlines():
            if "Mem:" in l:
                return l.split()[1]
        return ""

    def report(self, load_start):
        v = self.v
        text = benchreport.bench_report(self.out, self.configs, [int(w) for w in self.workers], self.cconfigs, REF,
                                        self.parts, v["PSCALE"])
        if text is not None:
            sys.stdout.write(text)
            sys.stdout.flush()
        dat = f"{self.out}/seed.dat"
        if "seed" in self.parts and shutil.which("gnuplot") and os.path.isfile(dat):
            with open(dat) as f:
                n = len(f.readline().split()) - 1
            self.gnuplot(f"""set terminal pngcairo size 900,520 noenhanced
set output "{self.out}/seed.png"
set title "PostgreSQL 18, the seed query ({v['ROWS']} rows): median of {v['RUNS']} interleaved rounds, {nproc()} CPUs"
set xlabel "max_parallel_workers_per_gather"
set ylabel "seconds"
set key outside right
set grid
plot for [i=2:{n + 1}] "{dat}" using 1:i with linespoints title columnheader(i)
""")
        # the idle part's tables and plot
        idle = f"{self.out}/idle.csv"
        if "idle" in self.parts and os.path.isfile(idle) and os.path.getsize(idle) > 0:
            text = benchreport.idle_report(self.out, self.iconfigs, self.iruns, v["ISHORT"], v["ILONG"],
                                           v["ELASTIC_MIN"], v["ELASTIC_IDLE"], v["ELASTIC_WARM"], v["ROWS"],
                                           v["RESERVE"])
            sys.stdout.write(text)
            sys.stdout.flush()
            if shutil.which("gnuplot") and os.path.isfile(f"{self.out}/idle-mem.dat"):
                ran = read(idle)
                titles = [c for c in self.iconfigs if re.search(f"^{re.escape(c)},", ran, re.M)]
                n = len(titles)
                s = [f"set terminal pngcairo size 1000,{170 * n + 60} noenhanced",
                     f"set output '{self.out}/idle-mem.png'",
                     f"set multiplot layout {n},1 title 'PostgreSQL 18, seed query ({v['ROWS']} rows, 2 workers): DSM "
                     f"resident, MB; bars: queries ({v['IRUNS']} {v['ISHORT']} s apart, {v['IRUNS']} after "
                     f"{v['ILONG']} s)'",
                     "set grid; set key top right horizontal; set yrange [-300:3000]; set ytics 0,500,2500; set lmargin 9"]
                for i, c in enumerate(titles):
                    if i == n - 1:
                        s.append("set xlabel 'seconds since the server started'")
                    s.append(f"plot '{self.out}/idle-mem.dat' index {i} using 1:2 with lines lw 2 title '{c}', "
                             f"'{self.out}/idle-queries.dat' index {i} using 1:(-150):2:(0) with vectors nohead lw 6 "
                             "lc rgb '#888888' title 'queries'")
                s.append("unset multiplot")
                self.gnuplot("\n".join(s) + "\n")
            with open(f"{self.out}/bench-idle.txt", "a") as f:
                f.write(f"\nmachine: {nproc()} CPUs, {self.memory_gib()} GiB, {os.uname().release}; PostgreSQL: "
                        f"{self.postgres_version()}\n"
                        f"load average (1, 5, 15 min) at the start: {load_start}; at the end: {loadavg()} (other "
                        "engineers' test suites share this machine)\n")
        if self.started:
            lscpu = subprocess.run(["lscpu"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
            cpu = "".join(l + "\n" for l in lscpu.splitlines() if re.search(r"Model name|NUMA node\(s\)", l))
            write(f"{self.out}/machine.txt",
                  f"machine: {nproc()} CPUs, {self.memory_gib()} GiB, {os.uname().release}\n{cpu}"
                  f"PostgreSQL: {self.postgres_version()}\n"
                  f"load average (1, 5, 15 min) at the start: {load_start}; at the end: {loadavg()} (other "
                  "engineers' test suites share this machine)\n")
        log(f"results: {self.out}")

    def check(self):
        """What the run needs: root, the two servers, the preload library and
        the extension."""
        if os.geteuid() != 0:
            die("run as root (huge pages, mount namespaces, uprobes)")
        os.makedirs(self.out, exist_ok=True)
        for b in (self.stock_bin, self.pool_bin):
            if not os.access(f"{b}/postgres", os.X_OK):
                die(f"no {b}/postgres: run.sh bench builds it")
        # the preload library (installed with libdsmpool by run.sh) and the
        # extension (installed into bench-stock with PGXS by run.sh)
        found = subprocess.run(["find", f"{self.prefix}/dsmpool", "-name", "libdsmpool-preload.so"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.split("\n")
        self.preload = found[0]
        if not self.preload:
            die(f"no libdsmpool-preload.so under {self.prefix}/dsmpool: run.sh bench installs it")
        try:
            pkglib = subprocess.run([f"{self.prefix}/bench-stock/bin/pg_config", "--pkglibdir"],
                                    stdout=subprocess.PIPE, text=True).stdout.rstrip("\n")
        except OSError:
            pkglib = ""
        if not os.path.isfile(f"{pkglib}/dsmpool.so"):
            die(f"no extension dsmpool in {self.prefix}/bench-stock: run.sh bench installs it")

    def run(self):
        self.reserve_huge_pages()
        self.make_cluster()
        load_start = loadavg()
        if self.started:
            log(f"starting: {self.started_text}")
        for c in self.started:
            self.start_config(c)
            log_lines(f"{self.cdata(c)}/log", "dsmpool: (pool|generation)", c, last=True)
        if "seed" in self.parts:
            self.part_seed()
        if "clients" in self.parts:
            self.part_clients()
        if "vacuum" in self.parts:
            self.part_vacuum()
        if "pgbench" in self.parts:
            self.part_pgbench()
        self.stop_all()
        if "idle" in self.parts:
            self.part_idle()
        self.report(load_start)
        # the smallest form: what ran, counted. Every part wrote a row for
        # each configuration and round, with a time, no client errors, and
        # its table (small_check: after the system settings are put back, so
        # that its summary is the last line).
        self.small_done = True


def on_signal(signum, frame):
    raise SystemExit(130)


def main(argv):
    if len(argv) > 1 and argv[1] == "--sample":
        sample(*argv[2:9])
        return 0
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    sys.stdout.reconfigure(line_buffering=True)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    prefix = argv[1] if len(argv) > 1 and argv[1] else f"{HERE}/work"
    b = Bench(prefix)
    b.check()
    b.save_settings()
    rc = 1
    try:
        rc = run_and_say(b)
    except SystemExit as e:  # a signal while a failure was being said
        rc = e.code if isinstance(e.code, int) else 1
    finally:  # whatever ended the run (an exception here too: said after this)
        rc = b.restore(rc)
    return rc


def run_and_say(b):
    """b's run; its exit status, a failure said."""
    rc = 0
    try:
        b.run()
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    except subprocess.CalledProcessError as e:
        cmd = e.cmd if isinstance(e.cmd, str) else " ".join(e.cmd)
        print(f"{PROG}: {cmd[:300]}: exit status {e.returncode}", file=sys.stderr, flush=True)
        rc = e.returncode if e.returncode > 0 else 128 - e.returncode
    except OSError as e:  # a file or a program that is not there
        print(f"{PROG}: {e}", file=sys.stderr, flush=True)
        rc = 1
    except Exception:  # noqa: BLE001  (said, and the settings put back all the same)
        traceback.print_exc()
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
