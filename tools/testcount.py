#!/usr/bin/env python3
"""Sum the results in meson's testlog.json: prints "passed failed".

A Criterion suite prints "Synthesis: Tested: T | Passing: P | Failing: F |
Crashing: C"; a script speaks TAP ("ok N - suite::test", "not ok N - ...",
"ok N - ... # SKIP why", the plan "1..N" or "1..0 # SKIP why"). A suite with
neither (it crashed, timed out or did not start), a TAP one whose tests do
not add up to its plan, or one that failed with no failing test counts as
one failure.

--failures FILE appends the name of each failure to FILE, a line each
("suite::test: what it said", or the suite and meson's result when the
suite itself failed), so that the test command can name them next to its
last line.
"""
import json
import re
import sys

SYN = re.compile(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)")
# Criterion: "[FAIL] suite::test: (0.24s)" (a crash too: "...: CRASH!");
# tests/crshim (the TSan runs): "[FAIL] suite::test" and "[CRASH] suite::test"
FAILED = re.compile(r"^\[(?:FAIL|CRASH)\] (\w+::\w+)")
STARTED = re.compile(r"^\[RUN \] (\w+::\w+)")
ENDED = re.compile(r"^\[(?:PASS|SKIP)\] (\w+::\w+)")
DURATION = re.compile(r"\(\d+(?:\.\d+)?s\)")
WHY = re.compile(r"Assertion Failed|Unexpected signal|ERROR: (?:Address|Leak|Thread)Sanitizer|runtime error:|"
                 r"WARNING: ThreadSanitizer")
TAP_PLAN = re.compile(r"^1\.\.(\d+)(?:\s*#\s*SKIP\b\s*(.*))?$")
TAP_TEST = re.compile(r"^(not ok|ok)\b(?:\s+\d+)?(?:\s*-)?\s*([^#]*?)\s*(?:#\s*(SKIP|TODO)\b\s*(.*))?$", re.I)


def failed_with_why(out):
    """The failed tests of a Criterion stream, each with what it said (its
    assertion's message, a sanitizer's report line; a timeout or crash as
    its [FAIL] line says it), so that the test command's last lines say why
    and not only which. The suites run --verbose (tests/meson.build), so
    each test's [RUN ] line opens it; a message goes to the one test running
    when it was printed, and to none when several were (-j2 interleaves
    them: a message is never given to the wrong test)."""
    found, running, why_of, cur = [], [], {}, None
    for line in out.splitlines():
        text = line[6:].strip() if line.startswith("[----]") else line.strip()
        m = FAILED.match(line)
        if m:
            name = m.group(1)
            rest = DURATION.sub("", line[m.end():]).strip(" :")
            text = " / ".join(([rest] if rest else []) + why_of.pop(name, [])[:3])
            found.append(name + (": " + text[:400] if text else ""))
            if name in running:
                running.remove(name)
            cur = None
            continue
        r = STARTED.match(line)
        e = ENDED.match(line)
        if r or e:
            name = (r or e).group(1)
            why_of.pop(name, None)
            if r:
                running.append(name)
            elif name in running:
                running.remove(name)
            cur = None
        elif WHY.search(line):  # what failed: the notes the test printed before it are not why
            cur = running[0] if len(running) == 1 else None
            if cur:
                why_of[cur] = [text]
        elif line.startswith("[----]"):
            if text and cur:
                why_of[cur].append(text)
        else:
            cur = None
    return found


def tap_count(out, suite):
    """(tested, passing, failing, 0) of a TAP stream, or None without a plan
    or when its tests do not add up to it. Skips are noted, not counted."""
    plan, ok, bad, seen = None, 0, 0, 0
    for line in out.splitlines():
        pm = TAP_PLAN.match(line)
        if pm:
            plan = int(pm.group(1))
            if pm.group(2) is not None and plan == 0:
                skips.append("[SKIP] %s::all: %s" % (suite, pm.group(2).strip()))
            continue
        tm = TAP_TEST.match(line)
        if not tm:
            continue
        seen += 1
        directive = (tm.group(3) or "").upper()
        if directive == "SKIP":
            skips.append("[SKIP] %s: %s" % (tm.group(2), (tm.group(4) or "").strip()))
        elif tm.group(1).lower() == "ok" or directive == "TODO":
            ok += 1
        else:
            bad += 1
            names.append(tm.group(2))
    if plan is None or plan != seen:
        return None
    return (ok + bad, ok, bad, 0)


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
        skips += ["[NOTE] " + t["name"] + ": " + l.strip()[7:] for l in out.splitlines() if l.startswith("# NOTE ")]
        names += failed_with_why(out)
        m = SYN.findall(out)
        if not m:
            tap = tap_count(out, t["name"])
            if tap is None:
                failed += 1
                names.append("%s (no synthesis or TAP plan: %s)" % (t["name"], t.get("result")))
                continue
            m = [tap]
        # Criterion counts a crash in Failing too, tests/crshim apart from it:
        # what did not pass is the tested less the passing, in both
        tested, p, _, _ = map(int, m[-1])
        passed += p
        failed += tested - p
        if t.get("result") not in ("OK", "SKIP") and tested == p:
            failed += 1
            names.append("%s (%s)" % (t["name"], t.get("result")))
for line in dict.fromkeys(skips):
    print("  " + line, file=sys.stderr)
if failures:
    with open(failures, "a") as fh:
        for n in dict.fromkeys(names):
            fh.write(n + "\n")
print(passed, failed)
