#!/usr/bin/env python3
"""Sum Criterion results from meson's testlog.json: prints "passed failed".

Each suite prints "Synthesis: Tested: T | Passing: P | Failing: F | Crashing: C".
A suite without that line (it crashed, timed out or did not start), or one that
failed with no failing test in its synthesis, counts as one failure.

--failures FILE appends the name of each failure to FILE, a line each
("suite::test", or the suite and meson's result when the suite itself failed),
so that the test command can name them next to its last line.
"""
import json
import re
import sys

SYN = re.compile(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)")
# Criterion: "[FAIL] suite::test: (0.24s)" (a crash too: "...: CRASH!");
# tests/crshim (the TSan runs): "[FAIL] suite::test" and "[CRASH] suite::test"
FAILED = re.compile(r"^\[(?:FAIL|CRASH)\] (\w+::\w+)")
passed = failed = 0
skips = []
names = []
args = sys.argv[1:]
failures = None
if len(args) >= 2 and args[0] == "--failures":
    failures, args = args[1], args[2:]
for path in args:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        failed += 1
        names.append(path + ": no test log")
        continue
    for line in lines:
        t = json.loads(line)
        out = (t.get("stdout") or "") + (t.get("stderr") or "")
        skips += [l.strip() for l in out.splitlines() if l.startswith("[SKIP]") and "::" in l]
        skips += ["[NOTE] " + t["name"] + ": " + l.strip()[7:] for l in out.splitlines() if l.startswith("[NOTE]")]
        names += [m.group(1) for m in map(FAILED.match, out.splitlines()) if m]
        m = SYN.findall(out)
        if not m:
            failed += 1
            names.append("%s (no synthesis: %s)" % (t["name"], t.get("result")))
            continue
        _, p, f, c = map(int, m[-1])
        passed += p
        failed += f + c
        if t.get("result") not in ("OK", "SKIP") and f + c == 0:
            failed += 1
            names.append("%s (%s)" % (t["name"], t.get("result")))
for line in dict.fromkeys(skips):
    print("  " + line, file=sys.stderr)
if failures:
    with open(failures, "a") as fh:
        for n in dict.fromkeys(names):
            fh.write(n + "\n")
print(passed, failed)
