#!/usr/bin/env python3
"""The PostgreSQL benchmarks' report (integrations/postgresql/benchreport.py)
on made-up CSV files, each figure worked out by hand:

  seed_table_*        medians and minimums in seconds, median minor faults,
                      the paired ratio against stock-1g-huge (its time over
                      this one's in the same round: the median of the ratios,
                      not the ratio of the medians), "-" without a pair or a
                      row, and seed.dat
  clients_table_*     queries per minute (median / best), errors, what fell
                      back (pool-*) or was refused (preload-huge), the paired
                      ratio
  vacuum_table_*      allocations per second of the median time, a
                      configuration without counts
  pgbench_table_*     each preload configuration against its stock twin
                      (preload-4k: stock-4k; preload-huge: stock-1g-huge, or
                      stock-4k without it), the rows in the twins' order
  idle_*              the query times and faults of the idle part, and its
                      memory: before the first query, the peak, the short
                      gaps' ends, after idle, hugetlb held, measured from the
                      main region's size before the first query
  small_check_*       the smallest form's checks: all pass on complete data;
                      a missing row, a table, a client error or a
                      configuration never sampled fails its check (and only
                      that one) and makes the result non-zero

Speaks TAP (tools/testcount.py sums it): a test per method, "ok N -
benchreport::name" or "not ok N - benchreport::name" with the failure as
"# " lines, and the plan first.
Usage: test_benchreport.py
"""
import csv
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "integrations", "postgresql"))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import benchreport  # noqa: E402

REF = "stock-1g-huge"


def rows(header, data):
    """CSV rows as csv.DictReader gives them: every cell text."""
    keys = header.split(",")
    return [dict(zip(keys, (str(x) for x in r))) for r in data]


def write_csv(path, header, data):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header.split(","))
        w.writerows(data)


def row_of(lines, config):
    """The table row of a configuration."""
    hits = [l for l in lines if l.startswith(f"| {config} |")]
    if len(hits) != 1:
        raise AssertionError(f"{len(hits)} rows for {config} in {lines}")
    return hits[0]


SEED_HEADER = "config,workers,run,ms,minflt"
# stock-1g-huge, 0 workers: 1000 3000 2000 ms -> median 2.00 s, minimum 1.00,
# faults 1000 5000 3000 -> 3k. pool-2m, 0 workers: 500 1500 4000 ms -> 1.50 /
# 0.50 s; paired 1000/500 = 2, 3000/1500 = 2, 2000/4000 = 0.5 -> 2.00x
# (0.50-2.00) (the ratio of the medians would be 1.33). 2 workers: the
# reference in rounds 1 and 2 (800, 600: 0.70 / 0.60 s), pool-2m in round 3
# alone (no pair: "-"); a row without a time is left out; pool-4k has none.
SEED = [(REF, 0, 1, 1000, 1000), (REF, 0, 2, 3000, 5000), (REF, 0, 3, 2000, 3000),
        ("pool-2m", 0, 1, 500, 2000), ("pool-2m", 0, 2, 1500, 2000), ("pool-2m", 0, 3, 4000, 8000),
        (REF, 2, 1, 800, 0), (REF, 2, 2, 600, 0), (REF, 2, 3, "", 0),
        ("pool-2m", 2, 3, 900, 12000)]


class SeedTable(unittest.TestCase):
    def setUp(self):
        self.lines, self.dat = benchreport.seed_table(rows(SEED_HEADER, SEED), [REF, "pool-2m", "pool-4k"], [0, 2], REF)

    def test_seed_table_gives_medians_minimums_and_paired_ratios(self):
        self.assertEqual(row_of(self.lines, REF), f"| {REF} | 2.00 / 1.00 s, 3k flt | 0.70 / 0.60 s, 0k flt |")
        self.assertEqual(row_of(self.lines, "pool-2m"),
                         "| pool-2m | 1.50 / 0.50 s, 2k flt, 2.00x (0.50-2.00) | 0.90 / 0.90 s, 12k flt, - |")

    def test_seed_table_says_dash_for_a_configuration_without_rows(self):
        self.assertEqual(row_of(self.lines, "pool-4k"), "| pool-4k | - | - |")

    def test_seed_table_heading_counts_the_rounds_and_names_the_workers(self):
        self.assertTrue(self.lines[0].startswith("Seed query, 3 interleaved rounds: "))
        self.assertEqual(self.lines[1:3], ["| config | 0 workers | 2 workers |", "| --- | --- | --- |"])
        self.assertEqual(self.lines[-1], "")

    def test_seed_dat_has_the_median_seconds_and_nan_where_none(self):
        self.assertEqual(self.dat, f"workers {REF} pool-2m pool-4k\n0 2.000 1.500 NaN\n2 0.700 0.900 NaN\n")

    def test_seed_table_is_empty_without_a_timed_row(self):
        self.assertEqual(benchreport.seed_table(rows(SEED_HEADER, [(REF, 0, 1, "", 0)]), [REF], [0], REF), ([], ""))


CLIENTS_HEADER = "config,clients,run,ms,queries,errors,fell_back,fallback_peak_mb"
# 2 clients. stock-1g-huge: 2 queries in 60 s (2.0 qpm), then in 30 s (4.0):
# 3.0 / 4.0 qpm. pool-2m: 2 in 30 s (4.0), 1 in 30 s with an error (2.0):
# 3.0 / 4.0 qpm, 1 error, fell back at most 5 (peak 20 MB); paired 4/2 = 2,
# 2/4 = 0.5 -> 1.25x (0.50-2.00). preload-huge: 2.0 qpm in both, refused 2
# at most; paired 2/2 = 1, 2/4 = 0.5 -> 0.75x (0.50-1.00).
CLIENTS = [(REF, 2, 1, 60000, 2, 0, "", ""), (REF, 2, 2, 30000, 2, 0, "", ""),
           ("pool-2m", 2, 1, 30000, 2, 0, 3, 10), ("pool-2m", 2, 2, 30000, 1, 1, 5, 20),
           ("preload-huge", 2, 1, 60000, 2, 0, 2, ""), ("preload-huge", 2, 2, 60000, 2, 0, "", "")]


class ClientsTable(unittest.TestCase):
    def setUp(self):
        self.lines = benchreport.clients_table(rows(CLIENTS_HEADER, CLIENTS),
                                               ["stock-4k", REF, "pool-2m", "preload-huge"], REF)

    def test_clients_table_gives_queries_per_minute(self):
        self.assertEqual(row_of(self.lines, REF), f"| {REF} | 3.0 / 4.0 qpm |")

    def test_clients_table_says_errors_what_fell_back_and_the_ratio(self):
        self.assertEqual(row_of(self.lines, "pool-2m"),
                         "| pool-2m | 3.0 / 4.0 qpm, 1 errors, fell back 5 (peak 20 MB), 1.25x (0.50-2.00) |")
        self.assertEqual(row_of(self.lines, "preload-huge"), "| preload-huge | 2.0 / 2.0 qpm, refused 2, 0.75x (0.50-1.00) |")

    def test_clients_table_says_dash_for_a_configuration_without_rows(self):
        self.assertEqual(row_of(self.lines, "stock-4k"), "| stock-4k | - |")
        self.assertEqual(self.lines[1], "| config | 2 clients |")


VACUUM_HEADER = "config,run,ms"
# stock-1g-huge 2000 4000 3000 ms: 3.00 / 2.00 s. pool-2m 2000 2000 6000:
# 2.00 / 2.00 s; 123456 allocations / 2 s = 61,728 a second; paired 1, 2,
# 0.5 -> 1.00x (0.50-2.00).
VACUUM = [(REF, 1, 2000), (REF, 2, 4000), (REF, 3, 3000),
          ("pool-2m", 1, 2000), ("pool-2m", 2, 2000), ("pool-2m", 3, 6000)]
COUNTS = rows("config,dsa_allocations,dsm_segments", [("pool-2m", 123456, 2)])


class VacuumTable(unittest.TestCase):
    def setUp(self):
        self.lines = benchreport.vacuum_table(rows(VACUUM_HEADER, VACUUM), COUNTS, [REF, "pool-2m", "stock-4k"], REF)

    def test_vacuum_table_gives_allocations_per_second_of_the_median(self):
        self.assertEqual(row_of(self.lines, "pool-2m"), "| pool-2m | 2.00 / 2.00 s | 123,456 | 61,728 | 2 | 1.00x (0.50-2.00) |")

    def test_vacuum_table_without_counts_says_dash(self):
        self.assertEqual(row_of(self.lines, REF), f"| {REF} | 3.00 / 2.00 s | - | - | - | - |")

    def test_vacuum_table_leaves_out_a_configuration_without_a_time(self):
        self.assertFalse([l for l in self.lines if l.startswith("| stock-4k |")])
        self.assertTrue(self.lines[0].startswith("VACUUM (PARALLEL 2), 3 interleaved rounds: "))


PGBENCH_HEADER = "config,mode,run,tps"
# -S: stock-4k 1000, 2000; preload-4k 900, 2200 -> against stock-4k 0.9 and
# 1.1 -> 1.00x (0.90-1.10). stock-1g-huge 3000, 3000; preload-huge 1500,
# 6000 -> against stock-1g-huge 0.5, 2 -> 1.25x (0.50-2.00) (against
# stock-4k it would be 1.5, 3). -S -C: stock-4k only.
PGBENCH = [("preload-huge", "S", 1, 1500), ("preload-huge", "S", 2, 6000),
           ("preload-4k", "S", 1, 900), ("preload-4k", "S", 2, 2200),
           ("stock-1g-huge", "S", 1, 3000), ("stock-1g-huge", "S", 2, 3000),
           ("stock-4k", "S", 1, 1000), ("stock-4k", "S", 2, 2000),
           ("stock-4k", "C", 1, 100), ("stock-4k", "C", 2, 300)]


class PgbenchTable(unittest.TestCase):
    def setUp(self):
        self.lines = benchreport.pgbench_table(rows(PGBENCH_HEADER, PGBENCH), "7")

    def test_pgbench_table_pairs_each_preload_configuration_with_its_twin(self):
        self.assertEqual(row_of(self.lines, "preload-4k"),
                         "| preload-4k | 1,550 (900-2,200) tps, vs stock-4k 1.00x (0.90-1.10) | - |")
        self.assertEqual(row_of(self.lines, "preload-huge"),
                         "| preload-huge | 3,750 (1,500-6,000) tps, vs stock-1g-huge 1.25x (0.50-2.00) | - |")
        self.assertEqual(row_of(self.lines, "stock-4k"), "| stock-4k | 1,500 (1,000-2,000) tps | 200 (100-300) tps |")

    def test_pgbench_table_puts_the_twins_in_order(self):
        self.assertEqual([l.split(" | ")[0] for l in self.lines[3:7]],
                         ["| stock-4k", "| preload-4k", "| stock-1g-huge", "| preload-huge"])
        self.assertTrue(self.lines[0].startswith("pgbench on the scale-7 database, 2 interleaved rounds: "))

    def test_pgbench_twin_of_preload_huge_is_stock_4k_without_stock_1g_huge(self):
        lines = benchreport.pgbench_table(rows(PGBENCH_HEADER, [r for r in PGBENCH if r[0] != REF]), "7")
        self.assertEqual(row_of(lines, "preload-huge"),
                         "| preload-huge | 3,750 (1,500-6,000) tps, vs stock-4k 2.25x (1.50-3.00) | - |")


IDLE_HEADER = "config,phase,query,gap_s,ms,minflt,resident_mb,refills_on_demand,refill_on_demand_ms,releases"
# pool-elastic: the first query 2.00 s, 5k faults; the short gaps' others
# [1.0]; the long ones [1.5, 2.5] -> 2.00 (1.50-2.50); faults 3k, and
# 4000 6000 -> 5k; refills short (0, 0.0), long (4, 12.5) (6, 7.5) -> 5, 10 ms.
# pool-2m: the same times halved: the ratio of the medians 2.000.
IDLE = [("pool-elastic", "short", 1, 1, 2000, 5000, 30, "", "", 0),
        ("pool-elastic", "short", 2, 1, 1000, 3000, 200, 0, "0.0", 0),
        ("pool-elastic", "long", 3, 3, 1500, 4000, 60, 4, "12.5", 1),
        ("pool-elastic", "long", 4, 3, 2500, 6000, 60, 6, "7.5", 2),
        ("pool-2m", "short", 1, 1, 1000, 1000, 2048, 0, "0.0", 0),
        ("pool-2m", "short", 2, 1, 500, 1000, 2048, 0, "0.0", 0),
        ("pool-2m", "long", 3, 3, 750, 1000, 2048, 0, "0.0", 0),
        ("pool-2m", "long", 4, 3, 1250, 1000, 2048, 0, "0.0", 0),
        ("stock-4k", "short", 1, 1, 3000, 9000, "", "", "", "")]

MEM_HEADER = "config,t_ms,event,phase,query,main_mb,pool_mb,seg_mb,hugetlb_held_mb"
# pool-elastic's samples (t ms: main pool seg held) and queries (two short,
# two long). The main region before the first query (t 2000) is 100 MB, not
# the first sample's 80: the resident figure is pool + seg + max(0, main -
# 100). Before the first query (t 2500): 20. The peak (t 7000): 310. The end
# of the short gap before query 2 (t 3200): 150. Before the long queries
# (t 5000, t 8000): 30 and 50 -> 40; held 6 and 10 -> 8. At t 3100 the main
# region grew by 30: 280; at t 4000 it shrank, which counts as 0: 40.
MEM = [("pool-elastic", 1000, "sample", "", "", 80, 10, 0, 0),
       ("pool-elastic", 2000, "sample", "", "", 100, 20, 0, 0),
       ("pool-elastic", 2500, "start", "short", 1, "", "", "", ""),
       ("pool-elastic", 3000, "end", "short", 1, "", "", "", ""),
       ("pool-elastic", 3100, "sample", "", "", 130, 200, 50, 4),
       ("pool-elastic", 3200, "sample", "", "", 100, 150, 0, 4),
       ("pool-elastic", 3500, "start", "short", 2, "", "", "", ""),
       ("pool-elastic", 3800, "end", "short", 2, "", "", "", ""),
       ("pool-elastic", 4000, "sample", "", "", 90, 40, 0, 8),
       ("pool-elastic", 5000, "sample", "", "", 100, 30, 0, 6),
       ("pool-elastic", 6000, "start", "long", 3, "", "", "", ""),
       ("pool-elastic", 6500, "end", "long", 3, "", "", "", ""),
       ("pool-elastic", 7000, "sample", "", "", 100, 300, 10, 6),
       ("pool-elastic", 8000, "sample", "", "", 100, 50, 0, 10),
       ("pool-elastic", 9000, "start", "long", 4, "", "", "", ""),
       ("pool-elastic", 9400, "end", "long", 4, "", "", "", "")]


class Idle(unittest.TestCase):
    def test_idle_query_table_gives_first_warm_and_cold_times(self):
        lines, qt = benchreport.idle_query_table(rows(IDLE_HEADER, IDLE), ["pool-elastic", "stock-4k", "pool-4k"])
        self.assertEqual(row_of(lines, "pool-elastic"),
                         "| pool-elastic | 2.00 | 1.00 (1.00-1.00) | 2.00 (1.50-2.50) | 5k / 3k / 5k | 0, 0 ms / 5, 10 ms |")
        self.assertEqual(row_of(lines, "stock-4k"), "| stock-4k | 3.00 | - | - | 9k / - / - | - / - |")
        self.assertNotIn("pool-4k", qt)
        self.assertEqual(qt["pool-elastic"], ([1.0], [1.5, 2.5]))

    def test_idle_memory_table_before_peak_short_gaps_after_idle(self):
        lines, memdat, qdat = benchreport.idle_memory_table(rows(MEM_HEADER, MEM), ["pool-elastic", "pool-2m"])
        self.assertEqual(row_of(lines, "pool-elastic"), "| pool-elastic | 20 | 310 | 150 | 40 | 8 |")
        self.assertFalse([l for l in lines if l.startswith("| pool-2m |")])
        self.assertEqual(memdat.split("\n")[:7], ["# pool-elastic", "0.00 10.0", "1.00 20.0", "2.10 280.0",
                                                  "2.20 150.0", "3.00 40.0", "4.00 30.0"])
        self.assertEqual(qdat, "# pool-elastic\n1.50 0.50\n2.50 0.30\n5.00 0.50\n8.00 0.40\n\n\n")

    def test_idle_report_writes_its_tables_and_compares_elastic_with_fixed(self):
        with tempfile.TemporaryDirectory() as out:
            write_csv(f"{out}/idle.csv", IDLE_HEADER, IDLE)
            write_csv(f"{out}/idle-mem.csv", MEM_HEADER, MEM)
            text = benchreport.idle_report(out, ["pool-2m", "pool-elastic", "stock-4k"], 2, "1", "3", "32MB", "500",
                                           "64MB", "100000")
            with open(f"{out}/bench-idle.txt") as f:
                self.assertEqual(f.read(), text)
            self.assertTrue(os.path.getsize(f"{out}/idle-mem.dat") > 0)
        self.assertTrue(text.startswith("Idle and warm: the seed query (100000 rows, work_mem 1GB, 2 workers) 2 times "
                                        "1 s apart (short), then 2 times each after 3 s idle (long);"))
        self.assertIn("dsmpool_resident_min 32MB, dsmpool_idle_release 500 ms, dsmpool_warm 64MB.\n", text)
        self.assertIn("pool-elastic against pool-2m, ratio of the medians (elastic / fixed; not paired, the runs were "
                      "one after the other): short gaps 2.000, long gaps 2.000.\n", text)
        self.assertIn("\n| pool-elastic | 20 | 310 | 150 | 40 | 8 |\n", text)
        self.assertIn("\nDynamic shared memory resident, MB (", text)

    def test_idle_report_states_the_reservation_against_the_machine(self):
        with tempfile.TemporaryDirectory() as out:
            write_csv(f"{out}/idle.csv", IDLE_HEADER, [])
            write_csv(f"{out}/idle-mem.csv", MEM_HEADER, [])
            text = benchreport.idle_report(out, ["preload-reserve"], 2, "1", "3", "32MB", "500", "64MB", "100000",
                                           reserve="65536", machine=(7936, "2"))
        self.assertIn(" preload-reserve: preload-huge with dsmpool.size 65536 MB, a reservation beyond this "
                      "machine's 7936 MB of memory, and dsmpool.resident_min 32MB; vm.overcommit_memory = 2.\n", text)


# ---- the smallest form -------------------------------------------------------

P = dict(parts=["seed", "clients", "vacuum", "pgbench", "idle"], configs=[REF, "pool-2m"],
         cconfigs=[REF, "pool-2m"], pconfigs=["stock-4k", "preload-4k"], iconfigs=["stock-4k", "pool-elastic"],
         workers=["0", "2"], clients=["2"], runs=1, cruns=1, vruns=1, pruns=1, iruns=2)


def complete_run(out):
    """What a smallest form that ran every part leaves in out (P's
    parameters), its tables made by the report itself."""
    write_csv(f"{out}/seed.csv", SEED_HEADER, [(c, w, 1, 100, 10) for w in P["workers"] for c in P["configs"]])
    write_csv(f"{out}/clients.csv", CLIENTS_HEADER, [(c, 2, 1, 500, 2, 0, "", "") for c in P["cconfigs"]])
    write_csv(f"{out}/vacuum.csv", VACUUM_HEADER, [(c, 1, 50) for c in P["cconfigs"]])
    write_csv(f"{out}/pgbench.csv", PGBENCH_HEADER, [(c, m, 1, 900) for m in "SC" for c in P["pconfigs"]])
    write_csv(f"{out}/idle.csv", IDLE_HEADER,
              [(c, ph, q, 1, 100, 10, "", "", "", "") for c in P["iconfigs"]
               for q, ph in ((1, "short"), (2, "short"), (3, "long"), (4, "long"))])
    mem = []
    for c in P["iconfigs"]:
        t = 1000
        mem.append((c, t, "sample", "", "", 100, 0, 0, 0))
        for q, ph in ((1, "short"), (2, "short"), (3, "long"), (4, "long")):
            mem += [(c, t + 100, "start", ph, q, "", "", "", ""), (c, t + 200, "end", ph, q, "", "", "", ""),
                    (c, t + 300, "sample", "", "", 100, 10 * q, 0, 0)]
            t += 1000
    write_csv(f"{out}/idle-mem.csv", MEM_HEADER, mem)
    benchreport.bench_report(out, P["configs"], [int(w) for w in P["workers"]], P["cconfigs"], REF, P["parts"], "1")
    benchreport.idle_report(out, P["iconfigs"], P["iruns"], "1", "3", "32MB", "500", "64MB", "100000")


def small_check(out):
    return benchreport.small_check(out, **P)


class SmallCheck(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name
        complete_run(self.out)

    def tearDown(self):
        self.tmp.cleanup()

    def failed_lines(self, lines):
        return [l for l in lines if l.startswith("FAILED")]

    def rewrite(self, name, change):
        """The file name in the output, as change makes it of its text."""
        with open(f"{self.out}/{name}") as f:
            txt = f.read()
        with open(f"{self.out}/{name}", "w") as f:
            f.write(change(txt))
        return txt

    def test_small_check_passes_every_check_on_a_complete_run(self):
        lines, bad = small_check(self.out)
        self.assertEqual(bad, 0)
        self.assertEqual(self.failed_lines(lines), [])
        self.assertEqual(len([l for l in lines if l.startswith("ok: bench-small: ")]), 11)
        self.assertEqual(lines[-1], "11 passed, 0 failed")
        self.assertIn("ok: bench-small: seed: 2 configurations x 2 worker counts x 1 rounds, each timed", lines)
        self.assertIn("ok: bench-small: idle: 2 configurations x 4 queries, each timed", lines)

    def test_small_check_fails_a_missing_seed_row(self):
        self.rewrite("seed.csv", lambda t: "\n".join(t.splitlines()[:-1]) + "\n")
        lines, bad = small_check(self.out)
        self.assertEqual(bad, 1)
        self.assertEqual(self.failed_lines(lines), [
            "FAILED: bench-small: seed: 2 configurations x 2 worker counts x 1 rounds, each timed: 3 rows, 0 without a time"])
        self.assertEqual(lines[-1], "10 passed, 1 failed")

    def test_small_check_fails_a_missing_table(self):
        self.rewrite("bench.txt", lambda t: t[:t.index("VACUUM (PARALLEL 2)")] + t[t.index("pgbench on the scale"):])
        lines, bad = small_check(self.out)
        self.assertEqual(bad, 1)
        self.assertEqual(self.failed_lines(lines), ["FAILED: bench-small: vacuum: its table"])

    def test_small_check_fails_a_table_without_a_configuration(self):
        self.rewrite("bench.txt", lambda t: t.replace("| preload-4k |", "| preload-4k-gone |"))
        lines, bad = small_check(self.out)
        self.assertEqual(self.failed_lines(lines), ["FAILED: bench-small: pgbench: its table"])

    def test_small_check_fails_a_client_error(self):
        write_csv(f"{self.out}/clients.csv", CLIENTS_HEADER,
                  [(REF, 2, 1, 500, 2, 0, "", ""), ("pool-2m", 2, 1, 500, 1, 1, 0, 0)])
        lines, bad = small_check(self.out)
        self.assertEqual(bad, 1)
        self.assertEqual(self.failed_lines(lines), [
            "FAILED: bench-small: clients: 2 configurations x 1 client counts x 1 rounds, every query right: 2 rows, 1 with errors"])

    def test_small_check_fails_a_client_query_that_did_not_answer(self):
        # no error said, but one of the two clients' queries gave no count
        write_csv(f"{self.out}/clients.csv", CLIENTS_HEADER,
                  [(REF, 2, 1, 500, 2, 0, "", ""), ("pool-2m", 2, 1, 500, 1, 0, 0, 0)])
        lines, bad = small_check(self.out)
        self.assertEqual(self.failed_lines(lines), [
            "FAILED: bench-small: clients: 2 configurations x 1 client counts x 1 rounds, every query right: 2 rows, 1 with errors"])

    def test_small_check_fails_a_time_of_zero(self):
        write_csv(f"{self.out}/vacuum.csv", VACUUM_HEADER, [(c, 1, 50 if c == REF else 0) for c in P["cconfigs"]])
        lines, bad = small_check(self.out)
        self.assertEqual(self.failed_lines(lines), ["FAILED: bench-small: vacuum: 2 configurations x 1 rounds, each timed: 2 rows"])

    def test_small_check_looks_for_a_table_under_its_own_heading(self):
        # the clients' table gone: its configurations still show in the
        # vacuum table after it, which must not stand in for it
        txt = self.rewrite("bench.txt", lambda t: t[:t.index("N clients at once")] + "N clients at once: no table\n\n"
                           + t[t.index("VACUUM (PARALLEL 2)"):])
        clients = txt[txt.index("N clients at once"):txt.index("VACUUM (PARALLEL 2)")]
        lines, bad = small_check(self.out)
        self.assertIn("| pool-2m |", clients)
        self.assertEqual(self.failed_lines(lines), ["FAILED: bench-small: clients: its table"])

    def test_small_check_fails_idle_tables_without_the_memory_table(self):
        self.rewrite("bench-idle.txt", lambda t: t.replace("Dynamic shared memory resident", "Dynamic shared memory"))
        lines, bad = small_check(self.out)
        self.assertEqual(self.failed_lines(lines), ["FAILED: bench-small: idle: its tables"])

    def test_small_check_fails_a_configuration_never_sampled(self):
        self.rewrite("idle-mem.csv", lambda t: "\n".join(
            l for l in t.splitlines() if not (l.startswith("pool-elastic,") and ",sample," in l)) + "\n")
        lines, bad = small_check(self.out)
        self.assertEqual(self.failed_lines(lines), ["FAILED: bench-small: idle: memory sampled for each configuration"])
        self.assertEqual(lines[-1], "10 passed, 1 failed")

    def test_small_check_fails_every_part_of_an_empty_directory(self):
        with tempfile.TemporaryDirectory() as empty:
            lines, bad = small_check(empty)
        self.assertEqual(bad, 11)
        self.assertEqual(lines[-1], "0 passed, 11 failed")


def main():
    tests = []

    def flatten(s):
        for t in s:
            if isinstance(t, unittest.TestSuite):
                flatten(t)
            else:
                tests.append(t)

    flatten(unittest.TestLoader().loadTestsFromModule(sys.modules[__name__]))
    print(f"1..{len(tests)}")
    bad = 0
    for n, t in enumerate(tests, 1):
        name = "benchreport::" + t._testMethodName.removeprefix("test_")
        result = unittest.TestResult()
        t.run(result)
        problems = result.failures + result.errors
        if result.skipped:
            print(f"ok {n} - {name} # SKIP {result.skipped[0][1]}")
        elif problems:
            bad += 1
            print(f"not ok {n} - {name}")
            for _, trace in problems:
                for line in trace.rstrip("\n").split("\n"):
                    print("# " + line)
        else:
            print(f"ok {n} - {name}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
