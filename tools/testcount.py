#!/usr/bin/env python3
"""Sum Criterion results from meson's testlog.json: prints "passed failed".

Each suite prints "Synthesis: Tested: T | Passing: P | Failing: F | Crashing: C".
A suite without that line (it crashed, timed out or did not start), or one that
failed with no failing test in its synthesis, counts as one failure.
"""
import json
import re
import sys

SYN = re.compile(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)")
passed = failed = 0
skips = []
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        failed += 1
        continue
    for line in lines:
        t = json.loads(line)
        out = (t.get("stdout") or "") + (t.get("stderr") or "")
        skips += [l.strip() for l in out.splitlines() if l.startswith("[SKIP]") and "::" in l]
        skips += ["[NOTE] " + t["name"] + ": " + l.strip()[7:] for l in out.splitlines() if l.startswith("[NOTE]")]
        m = SYN.findall(out)
        if not m:
            failed += 1
            continue
        _, p, f, c = map(int, m[-1])
        passed += p
        failed += f + c
        if t.get("result") not in ("OK", "SKIP") and f + c == 0:
            failed += 1
for line in dict.fromkeys(skips):
    print("  " + line, file=sys.stderr)
print(passed, failed)
