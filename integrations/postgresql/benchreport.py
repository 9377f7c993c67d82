"""The report of the PostgreSQL benchmarks (bench.py): their tables, the
data files of their plots, and the smallest form's checks.

bench.py measures and writes CSV files into its output directory; this
module reads them and says what they show. Importing it does nothing: each
function takes the rows (or the directory) and the run's parameters, and
returns text; the two that make a whole report (bench_report, idle_report)
also write it into the directory, as bench.py did. tests/benchreport/ checks
it on made-up CSV files.

  bench.txt        seed_table, clients_table, vacuum_table, pgbench_table
                   (bench_report: the four, each for a part run that has rows;
                   seed.dat, the seed plot's data, beside it)
  bench-idle.txt   idle_query_table, idle_memory_table (idle_report; the
                   memory plot's data in idle-mem.dat and idle-queries.dat)
  the smallest form small_check: an "ok: bench-small: ..." or "FAILED:
                   bench-small: ..." line per check and "N passed, N failed"
                   last (tools/test.sh counts them)

Per configuration a table gives the median and the minimum, and the paired
ratio against the reference configuration (stock-1g-huge): the reference's
time over this one's in the same round, so above 1 is faster; its median
and range. A figure that cannot be computed is "-".
"""
import csv
import os
import statistics

med = statistics.median

# The tables of bench.txt, by the first words of their headings (each runs
# up to the next one: small_check looks for a table there).
TITLES = ("Seed query", "N clients at once", "VACUUM (PARALLEL 2)", "pgbench on the scale")
# pgbench's rows: each preload configuration after its stock twin
PGBENCH_ORDER = ("stock-4k", "preload-4k", "stock-1g-huge", "preload-huge")


def read_rows(path):
    """The rows of a CSV file with a header line, as dicts; [] if it is not
    there."""
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def ratio_cell(pairs):
    """Paired ratios as "median x (min-max)", or "-" without a pair."""
    if not pairs:
        return "-"
    return f"{med(pairs):.2f}x ({min(pairs):.2f}-{max(pairs):.2f})"


def seed_table(rows, configs, workers, ref):
    """bench.txt's seed table from seed.csv's rows (config, workers, run, ms,
    minflt; a row without ms is left out), and seed.dat (the median seconds
    by worker count, a column per configuration, NaN where none): (lines,
    dat), or ([], "") without a timed row. workers: the worker counts, ints."""
    seed = [r for r in rows if r["ms"]]
    if not seed:
        return [], ""
    t = {(r["config"], int(r["workers"]), int(r["run"])): (float(r["ms"]), int(r["minflt"])) for r in seed}
    runs = sorted({int(r["run"]) for r in seed})
    lines = [f"Seed query, {len(runs)} interleaved rounds: median / minimum seconds, median minor faults, and against {ref} the paired speed-up (its time / this one's, same round): median (range)\n",
             "| config | " + " | ".join(f"{w} workers" for w in workers) + " |",
             "| --- |" + " --- |" * len(workers)]
    dat = {}
    for c in configs:
        cells = []
        for w in workers:
            ms = [t[c, w, r][0] for r in runs if (c, w, r) in t]
            fl = [t[c, w, r][1] for r in runs if (c, w, r) in t]
            if not ms:
                cells.append("-")
                continue
            pairs = [t[ref, w, r][0] / t[c, w, r][0] for r in runs if (c, w, r) in t and (ref, w, r) in t]
            dat[c, w] = (med(ms) / 1000, min(ms) / 1000)
            rc = "" if c == ref else f", {ratio_cell(pairs)}"
            cells.append(f"{med(ms) / 1000:.2f} / {min(ms) / 1000:.2f} s, {med(fl) / 1000:.0f}k flt{rc}")
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    text = "workers " + " ".join(configs) + "\n"
    for w in workers:
        text += f"{w} " + " ".join(f"{dat[c, w][0]:.3f}" if (c, w) in dat else "NaN" for c in configs) + "\n"
    lines.append("")
    return lines, text


def qpm(row):
    """A clients.csv row's queries per minute."""
    return int(row["queries"]) * 60000.0 / int(row["ms"])


def clients_table(rows, cconfigs, ref):
    """bench.txt's clients table from clients.csv's rows (config, clients,
    run, ms, queries, errors, fell_back, fallback_peak_mb): per client count
    the queries per minute (median / best), the errors of all rounds, what
    fell back (pool-*: the most of a round, and its peak MB; preload-huge:
    segments refused) and the paired ratio of queries per minute against
    ref. [] without rows."""
    if not rows:
        return []
    t = {(r["config"], int(r["clients"]), int(r["run"])): r for r in rows}
    runs = sorted({int(r["run"]) for r in rows})
    ns = sorted({int(r["clients"]) for r in rows})
    lines = [f"N clients at once, each the seed query with 2 workers, {len(runs)} interleaved rounds: queries per minute (median / best), errors, what fell back in the pool (areas and segments; peak MB in OS segments), and against {ref} the paired ratio of queries per minute: median (range)\n",
             "| config | " + " | ".join(f"{n} clients" for n in ns) + " |",
             "| --- |" + " --- |" * len(ns)]
    for c in cconfigs:
        cells = []
        for n in ns:
            rs = [t[c, n, r] for r in runs if (c, n, r) in t]
            if not rs:
                cells.append("-")
                continue
            q = [qpm(x) for x in rs]
            err = sum(int(x["errors"]) for x in rs)
            pairs = [qpm(t[c, n, r]) / qpm(t[ref, n, r])
                     for r in runs if (c, n, r) in t and (ref, n, r) in t and int(t[ref, n, r]["queries"]) > 0]
            cell = f"{med(q):.1f} / {max(q):.1f} qpm"
            if err:
                cell += f", {err} errors"
            if c.startswith("pool-"):
                cell += f", fell back {max(int(x['fell_back'] or 0) for x in rs)} (peak {max(int(x['fallback_peak_mb'] or 0) for x in rs)} MB)"
            elif c == "preload-huge":
                cell += f", refused {max(int(x['fell_back'] or 0) for x in rs)}"
            if c != ref:
                cell += f", {ratio_cell(pairs)}"
            cells.append(cell)
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def vacuum_table(rows, counts, cconfigs, ref):
    """bench.txt's VACUUM table from vacuum.csv's rows (config, run, ms) and
    vacuum-counts.csv's (config, dsa_allocations, dsm_segments: the untimed
    round with uprobes): the time, the allocations and segments of one
    VACUUM, allocations per second of the median time, the paired speed-up
    against ref. A configuration without a time has no row; one without
    counts has "-" there. [] without rows."""
    if not rows:
        return []
    counts = {r["config"]: r for r in counts}
    t = {(r["config"], int(r["run"])): float(r["ms"]) for r in rows if r["ms"]}
    runs = sorted({int(r["run"]) for r in rows})
    lines = [f"VACUUM (PARALLEL 2), {len(runs)} interleaved rounds: median / minimum seconds, DSA allocations and DSM segments of one VACUUM (an untimed round with uprobes), allocations per second of the median time, and against {ref} the paired speed-up: median (range)\n",
             "| config | time | DSA allocations | per second | DSM segments | vs " + ref + " |",
             "| --- | --- | --- | --- | --- | --- |"]
    for c in cconfigs:
        ms = [t[c, r] for r in runs if (c, r) in t]
        if not ms:
            continue
        m = med(ms)
        pairs = [t[ref, r] / t[c, r] for r in runs if (c, r) in t and (ref, r) in t]
        vs = "-" if c == ref else ratio_cell(pairs)
        n = counts.get(c, {})
        a = n.get("dsa_allocations", "")
        if a:
            lines.append(f"| {c} | {m / 1000:.2f} / {min(ms) / 1000:.2f} s | {int(a):,} | {int(a) / (m / 1000):,.0f} | {n.get('dsm_segments', '-')} | {vs} |")
        else:
            lines.append(f"| {c} | {m / 1000:.2f} / {min(ms) / 1000:.2f} s | - | - | - | {vs} |")
    lines.append("")
    return lines


def pgbench_twin(c, pcs):
    """The stock configuration a pgbench configuration is judged against (the
    same huge_pages): preload-4k against stock-4k, preload-huge against
    stock-1g-huge (stock-4k where that did not run); others, themselves."""
    twin = {"preload-4k": "stock-4k", "preload-huge": "stock-1g-huge" if "stock-1g-huge" in pcs else "stock-4k"}
    return twin.get(c, c)


def pgbench_table(rows, pscale):
    """bench.txt's pgbench table from pgbench.csv's rows (config, mode S or C,
    run, tps): per mode the tps, median (range), and for a preload
    configuration the paired ratio against its stock twin (pgbench_twin).
    The configurations in PGBENCH_ORDER, others after. [] without rows."""
    if not rows:
        return []
    t = {(r["config"], r["mode"], int(r["run"])): float(r["tps"]) for r in rows}
    runs = sorted({int(r["run"]) for r in rows})
    pcs = sorted(dict.fromkeys(r["config"] for r in rows),
                 key=lambda c: PGBENCH_ORDER.index(c) if c in PGBENCH_ORDER else 9)
    lines = [f"pgbench on the scale-{pscale} database, {len(runs)} interleaved rounds: transactions per second, median (range), and for the preload library against its stock twin (the same huge_pages) the paired ratio (its tps / the twin's, same round): median (range); above 1 is faster. -S: select only; -S -C: a new connection (a fork) per transaction\n",
             "| config | -S | -S -C |",
             "| --- | --- | --- |"]
    for c in pcs:
        pref = pgbench_twin(c, pcs)
        cells = []
        for m in ("S", "C"):
            v = [t[c, m, r] for r in runs if (c, m, r) in t]
            if not v:
                cells.append("-")
                continue
            pairs = [t[c, m, r] / t[pref, m, r] for r in runs if (c, m, r) in t and (pref, m, r) in t]
            cell = f"{med(v):,.0f} ({min(v):,.0f}-{max(v):,.0f}) tps"
            if c != pref:
                cell += f", vs {pref} {ratio_cell(pairs)}"
            cells.append(cell)
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def bench_report(out, configs, workers, cconfigs, ref, parts, pscale):
    """bench.txt from the CSV files in out, a table for each part of parts
    that has rows (seed.dat beside it with the seed table): its text, or
    None (and nothing written) without a table. workers: ints; pscale: the
    pgbench database's scale, as text."""
    lines = []
    if "seed" in parts:
        seed, dat = seed_table(read_rows(f"{out}/seed.csv"), configs, workers, ref)
        if seed:
            with open(f"{out}/seed.dat", "w") as f:
                f.write(dat)
            lines += seed
    if "clients" in parts:
        lines += clients_table(read_rows(f"{out}/clients.csv"), cconfigs, ref)
    if "vacuum" in parts:
        lines += vacuum_table(read_rows(f"{out}/vacuum.csv"), read_rows(f"{out}/vacuum-counts.csv"), cconfigs, ref)
    if "pgbench" in parts:
        lines += pgbench_table(read_rows(f"{out}/pgbench.csv"), pscale)
    if not lines:
        return None
    text = "\n".join(lines) + "\n"
    with open(f"{out}/bench.txt", "w") as f:
        f.write(text)
    return text


# ---- the idle part --------------------------------------------------------

def rng(v, f="{:.2f}"):
    """Values as "median (min-max)", or "-" without any."""
    return f"{f.format(med(v))} ({f.format(min(v))}-{f.format(max(v))})" if v else "-"


def idle_query_table(q, configs):
    """bench-idle.txt's query times from idle.csv's rows (config, phase short
    or long, query, gap_s, ms, minflt, resident_mb, refills_on_demand,
    refill_on_demand_ms, releases): per configuration the first query's
    seconds, the other short-gap queries' and the long-gap ones' (median
    (range)), the backends' minor faults (first / short / long, medians) and
    the refills on demand per query (count and ms, medians; "-" for stock).
    (lines, qt): qt maps a configuration to its (short, long) seconds."""
    lines = ["| config | first | short gaps, 2.. | long gaps | faults first / short / long | refills on demand short / long |",
             "| --- | --- | --- | --- | --- | --- |"]
    qt = {}

    def faults(v):
        return f"{med([int(x['minflt']) for x in v]) / 1000:.0f}k" if v else "-"

    def refills(v):
        v = [x for x in v if x["refills_on_demand"]]
        if not v:
            return "-"
        return f"{med([int(x['refills_on_demand']) for x in v]):.0f}, {med([float(x['refill_on_demand_ms']) for x in v]):.0f} ms"

    for c in configs:
        r = [x for x in q if x["config"] == c and x["ms"]]
        if not r:
            continue
        first = r[0]
        sh = [x for x in r[1:] if x["phase"] == "short"]
        lo = [x for x in r if x["phase"] == "long"]
        qt[c] = ([float(x["ms"]) / 1000 for x in sh], [float(x["ms"]) / 1000 for x in lo])
        lines.append(f"| {c} | {float(first['ms']) / 1000:.2f} | {rng(qt[c][0])} | {rng(qt[c][1])} | {int(first['minflt']) / 1000:.0f}k / {faults(sh)} / {faults(lo)} | {refills(sh)} / {refills(lo)} |")
    return lines, qt


def idle_memory_table(m, configs):
    """bench-idle.txt's memory table from idle-mem.csv's rows (config, t_ms,
    event sample, start or end, phase, query, main_mb, pool_mb, seg_mb,
    hugetlb_held_mb). The dynamic shared memory resident of a sample is
    pool + segments + what the main region gained since the last sample
    before the first query (main0; the first sample where none is before
    it). Per configuration: that figure in the last sample before the first
    query; the peak of all samples; the median over the short-gap queries
    after the first of the last sample before each starts (the end of a
    short gap); the median of the last sample before each long-gap query
    (after idle); and hugetlb_held_mb there. A configuration without
    samples has no row. (lines, memdat, qdat): the plot's data, a block per
    configuration ("# config", then seconds since its first sample and the
    figure; for qdat each query's start and length in seconds)."""
    ev = {}
    series = {}
    for x in m:
        c = x["config"]
        if x["event"] == "sample":
            series.setdefault(c, []).append((int(x["t_ms"]), float(x["main_mb"]), float(x["pool_mb"]),
                                             float(x["seg_mb"]), float(x["hugetlb_held_mb"])))
        else:
            ev.setdefault(c, []).append((int(x["t_ms"]), x["event"], x["phase"], int(x["query"])))
    lines = ["| config | before the first | peak | short gaps | after idle | hugetlb held after idle |",
             "| --- | --- | --- | --- | --- | --- |"]
    memdat = qdat = ""
    for c in configs:
        s = series.get(c)
        if not s:
            continue
        e = sorted(ev.get(c, []))
        t0 = s[0][0]
        starts = [t for t, k, p, n in e if k == "start"]
        main0 = [x[1] for x in s if x[0] < starts[0]][-1] if starts and any(x[0] < starts[0] for x in s) else s[0][1]
        dsm = [(t, p + g + max(0.0, mn - main0), h) for t, mn, p, g, h in s]

        def before(t):
            v = [x for x in dsm if x[0] < t]
            return v[-1] if v else None

        first = before(starts[0]) if starts else None
        short_ends = [x for x in (before(t) for t, k, p, n in e if k == "start" and p == "short" and n > 1) if x]
        long_starts = [x for x in (before(t) for t, k, p, n in e if k == "start" and p == "long") if x]
        lines.append(f"| {c} | {first[1]:.0f} | {max(x[1] for x in dsm):.0f} | {med([x[1] for x in short_ends]):.0f} | {med([x[1] for x in long_starts]):.0f} | {med([x[2] for x in long_starts]):.0f} |")
        memdat += f"# {c}\n"
        for t, v, h in dsm:
            memdat += f"{(t - t0) / 1000:.2f} {v:.1f}\n"
        memdat += "\n\n"
        qdat += f"# {c}\n"
        st = {}
        for t, k, p, n in e:
            if k == "start":
                st[n] = t
            elif n in st:
                qdat += f"{(st[n] - t0) / 1000:.2f} {(t - st[n]) / 1000:.2f}\n"
        qdat += "\n\n"
    return lines, memdat, qdat


def idle_report(out, configs, iruns, ishort, ilong, emin, eidle, ewarm, rows, reserve="65536", machine=None):
    """bench-idle.txt (and idle-mem.dat, idle-queries.dat) from idle.csv and
    idle-mem.csv in out: its text. The parameters as the run had them, as
    text but iruns; with preload-reserve in configs the heading says the
    reservation against the machine's memory: machine, (memory MB,
    vm.overcommit_memory), read from /proc where None."""
    q = read_rows(f"{out}/idle.csv")
    m = read_rows(f"{out}/idle-mem.csv")
    note = ""
    if "preload-reserve" in configs:
        if machine is None:
            with open("/proc/meminfo") as f:
                memmb = int(f.readline().split()[1]) // 1024
            with open("/proc/sys/vm/overcommit_memory") as f:
                machine = (memmb, f.read().strip())
        note = f" preload-reserve: preload-huge with dsmpool.size {reserve} MB, a reservation beyond this machine's {machine[0]} MB of memory, and dsmpool.resident_min {emin}; vm.overcommit_memory = {machine[1]}."
    L = [f"Idle and warm: the seed query ({rows} rows, work_mem 1GB, 2 workers) {iruns} times {ishort} s apart (short), then {iruns} times each after {ilong} s idle (long); one configuration after another, each server started afresh (not interleaved: the gaps are the point). pool-elastic: dsmpool_size 2GB as a reservation in 2 MiB hugetlb pages, dsmpool_resident_min {emin}, dsmpool_idle_release {eidle} ms, dsmpool_warm {ewarm}.{note}\n",
         "Query times, seconds: the first query of a fresh server; the short gaps' others (warm: median (range)); the long gaps' (cold for an elastic pool). Minor faults of the backends, median; for the pools, refills on demand per query (count, ms: what the query paid), median.\n"]
    lines, qt = idle_query_table(q, configs)
    L += lines
    L.append("")
    if "pool-elastic" in qt and "pool-2m" in qt:
        e, f = qt["pool-elastic"], qt["pool-2m"]
        L.append(f"pool-elastic against pool-2m, ratio of the medians (elastic / fixed; not paired, the runs were one after the other): short gaps {med(e[0]) / med(f[0]):.3f}, long gaps {med(e[1]) / med(f[1]):.3f}.\n")
    L.append("Dynamic shared memory resident, MB (the pool, the DSM segments, and what the main region gained since the server started: min_dynamic_shared_memory's touched pages): before the first query; the peak; at the end of each short gap (median); before each long-gap query, after the idle release and a maintenance period (median); and hugetlb pages held (in use or reserved) by the server at that point, MB.\n")
    lines, memdat, qdat = idle_memory_table(m, configs)
    L += lines
    L.append("")
    with open(f"{out}/idle-mem.dat", "w") as f:
        f.write(memdat)
    with open(f"{out}/idle-queries.dat", "w") as f:
        f.write(qdat)
    text = "\n".join(L) + "\n"
    with open(f"{out}/bench-idle.txt", "w") as f:
        f.write(text)
    return text


# ---- the smallest form's checks --------------------------------------------

def section(txt, title):
    """bench.txt's table under that title, up to the next one ("" if none)."""
    i = txt.find(title)
    if i < 0:
        return ""
    ends = [txt.find(t, i + 1) for t in TITLES if txt.find(t, i + 1) > i]
    return txt[i:min(ends)] if ends else txt[i:]


def table_has(txt, title, configs):
    """That bench.txt has the table and a row of it for each configuration."""
    sec = section(txt, title)
    return bool(sec) and all(f"| {c} |" in sec for c in configs)


def positive(v):
    """A CSV cell that is a number above 0."""
    try:
        return float(v) > 0
    except (TypeError, ValueError):
        return False


def small_check(out, parts, configs, cconfigs, pconfigs, iconfigs, workers, clients,
                runs, cruns, vruns, pruns, iruns):
    """What the smallest form ran, counted from out: for each part of parts,
    a row per configuration and round with its time (clients: every query
    right; idle: memory sampled too), and the part's table. The lists are
    lists of words, the rounds ints. (lines, failed): an "ok: bench-small:
    ..." or "FAILED: bench-small: ...: why" line per check, "N passed, N
    failed" last."""
    lines = []
    ok = bad = 0

    def check(what, cond, why=""):
        nonlocal ok, bad
        if cond:
            ok += 1
            lines.append(f"ok: bench-small: {what}")
        else:
            bad += 1
            lines.append(f"FAILED: bench-small: {what}{': ' + why if why else ''}")

    def text(name):
        p = f"{out}/{name}"
        if not os.path.exists(p):
            return ""
        with open(p) as f:
            return f.read()

    txt = text("bench.txt")
    if "seed" in parts:
        r = read_rows(f"{out}/seed.csv")
        untimed = [x for x in r if not positive(x["ms"])]
        check(f"seed: {len(configs)} configurations x {len(workers)} worker counts x {runs} rounds, each timed",
              len(r) == len(configs) * len(workers) * runs and not untimed,
              f"{len(r)} rows, {len(untimed)} without a time")
        check("seed: its table", table_has(txt, "Seed query", configs))
    if "clients" in parts:
        r = read_rows(f"{out}/clients.csv")
        errs = [x for x in r if x["errors"] != "0" or x["queries"] != x["clients"]]
        check(f"clients: {len(cconfigs)} configurations x {len(clients)} client counts x {cruns} rounds, every query right",
              len(r) == len(cconfigs) * len(clients) * cruns and not errs, f"{len(r)} rows, {len(errs)} with errors")
        check("clients: its table", table_has(txt, "N clients at once", cconfigs))
    if "vacuum" in parts:
        r = read_rows(f"{out}/vacuum.csv")
        check(f"vacuum: {len(cconfigs)} configurations x {vruns} rounds, each timed",
              len(r) == len(cconfigs) * vruns and all(positive(x["ms"]) for x in r), f"{len(r)} rows")
        check("vacuum: its table", table_has(txt, "VACUUM (PARALLEL 2)", cconfigs))
    if "pgbench" in parts:
        r = read_rows(f"{out}/pgbench.csv")
        check(f"pgbench: {len(pconfigs)} configurations x 2 modes x {pruns} rounds, each with its tps",
              len(r) == len(pconfigs) * 2 * pruns and all(positive(x["tps"]) for x in r), f"{len(r)} rows")
        check("pgbench: its table", table_has(txt, "pgbench on the scale", pconfigs))
    if "idle" in parts:
        r = read_rows(f"{out}/idle.csv")
        check(f"idle: {len(iconfigs)} configurations x {2 * iruns} queries, each timed",
              len(r) == len(iconfigs) * 2 * iruns and all(positive(x["ms"]) for x in r), f"{len(r)} rows")
        m = read_rows(f"{out}/idle-mem.csv")
        check("idle: memory sampled for each configuration",
              all(any(x["config"] == c and x["event"] == "sample" for x in m) for c in iconfigs))
        it = text("bench-idle.txt")
        check("idle: its tables", "Dynamic shared memory resident" in it and all(f"| {c} |" in it for c in iconfigs))
    lines.append(f"{ok} passed, {bad} failed")
    return lines, bad
