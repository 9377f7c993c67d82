#!/usr/bin/env python3
"""tools/testcount.py, the test command's tally, on made-up meson test logs:
Criterion's synthesis line, TAP against its plan, suites that said neither,
and the failure lines that name each failed test with what it said. Speaks
TAP (tools/testcount.py counts this run too)."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "tools", "testcount.py")


def run(entries, notes=None):
    """testcount.py --failures on a testlog.json of these entries: (passed,
    failed, the failure lines); the notes it printed go into notes (a list)."""
    with tempfile.TemporaryDirectory() as d:
        log, fails = os.path.join(d, "testlog.json"), os.path.join(d, "failures")
        with open(log, "w") as f:
            for e in entries:
                f.write(json.dumps(e) + "\n")
        open(fails, "w").close()
        ran = subprocess.run([sys.executable, TOOL, "--failures", fails, log], capture_output=True, text=True,
                             check=True)
        if notes is not None:
            notes += [line.strip() for line in ran.stderr.splitlines()]
        out = ran.stdout.split()
        return int(out[0]), int(out[1]), open(fails).read().splitlines()


def criterion(tested, passing, failing, crashing, before=""):
    return (f"{before}[====] Synthesis: Tested: {tested} | Passing: {passing} | Failing: {failing} | "
            f"Crashing: {crashing} \n")


CASES = []


def case(f):
    CASES.append(f)
    return f


@case
def criterion_passes_are_counted():
    p, f, lines = run([{"name": "area", "result": "OK", "stdout": criterion(7, 7, 0, 0)}])
    assert (p, f, lines) == (7, 0, []), (p, f, lines)


@case
def a_failed_assertion_is_named_with_its_message():
    out = ("[RUN ] fuzz::whole_api_two_processes\n[----] tests/test_fuzz.c:490: Assertion Failed\n[----]   \n"
           "[----]   process 1: dsmpool_area_free returned -5: not documented for it\n[----]   \n"
           "[FAIL] fuzz::whole_api_two_processes: (12.00s)\n")
    p, f, lines = run([{"name": "fuzz", "result": "FAIL", "stdout": criterion(2, 1, 1, 0, out)}])
    assert (p, f) == (1, 1), (p, f)
    assert len(lines) == 1 and lines[0].startswith("fuzz::whole_api_two_processes: "), lines
    assert "returned -5: not documented for it" in lines[0], lines


@case
def each_failure_has_its_own_message():
    out = ("[RUN ] s::one\n[----] a.c:1: Assertion Failed\n[----]   first\n[FAIL] s::one: (0.01s)\n"
           "[RUN ] s::two\n[----] a.c:2: Assertion Failed\n[----]   second\n[FAIL] s::two: (0.01s)\n")
    _, f, lines = run([{"name": "s", "result": "FAIL", "stdout": criterion(2, 0, 2, 0, out)}])
    assert f == 2 and len(lines) == 2, (f, lines)
    assert "first" in lines[0] and "second" not in lines[0], lines
    assert "second" in lines[1] and "first" not in lines[1], lines


@case
def another_tests_notes_are_not_the_why():
    out = ("[RUN ] s::quiet\n[----] a note of the test before\n[PASS] s::quiet: (0.01s)\n"
           "[RUN ] s::loud\n[----] its own note\n[----] b.c:7: Assertion Failed\n[----]   \n"
           "[----]   exit 8: what fits not served\n[FAIL] s::loud: (0.01s)\n")
    _, f, lines = run([{"name": "s", "result": "FAIL", "stdout": criterion(2, 1, 1, 0, out)}])
    assert f == 1 and len(lines) == 1, (f, lines)
    assert "what fits not served" in lines[0], lines
    assert "test before" not in lines[0] and "its own note" not in lines[0], lines


@case
def a_sanitizer_report_names_the_crash():
    out = ("[RUN ] area::free_twice\n==123==ERROR: AddressSanitizer: heap-use-after-free on address 0x1\n"
           "[CRASH] area::free_twice\n")
    _, f, lines = run([{"name": "area", "result": "FAIL", "stdout": criterion(1, 0, 0, 1, out)}])
    assert f == 1 and len(lines) == 1, (f, lines)
    assert lines[0].startswith("area::free_twice: ") and "heap-use-after-free" in lines[0], lines


# Criterion 2.4.1's own output with -j2 (tests/meson.build runs the suites
# so): two tests' lines interleave, a crash is counted in Failing too
J2 = """[----] Criterion v2.4.1
[====] Running 4 tests from s:
[RUN ] s::a_first
[----] a note of a
[----] t.c:4: Assertion Failed
[----]   
[----]   a says why
[----]   
[RUN ] s::b_second
[----] a note of b
[----] t.c:5: Assertion Failed
[----]   
[----]   b says why
[----]   
[FAIL] s::a_first: (0.50s)
[RUN ] s::c_crash
[FAIL] s::b_second: (0.70s)
[----] c before crash
[----] t.c:6: Unexpected signal caught below this line!
[FAIL] s::c_crash: CRASH!
[RUN ] s::d_timeout
[----] d note
[FAIL] s::d_timeout: Timed out. (0.31s)
[====] Synthesis: Tested: 4 | Passing: 0 | Failing: 4 | Crashing: 1 
"""


@case
def interleaved_tests_get_no_message_of_another():
    p, f, lines = run([{"name": "s", "result": "FAIL", "stdout": J2}])
    by = {line.split(": ")[0]: line for line in lines}
    assert "a says why" in by["s::a_first"] and "b says why" not in by["s::a_first"], lines
    # b's message came while a and b both ran: whose it is cannot be told
    assert by["s::b_second"] == "s::b_second", lines


@case
def a_crash_is_one_failure_and_says_so():
    p, f, lines = run([{"name": "s", "result": "FAIL", "stdout": J2}])
    assert (p, f) == (0, 4), (p, f)  # not 5: Criterion's Failing holds the crash
    crash = [line for line in lines if line.startswith("s::c_crash")]
    assert crash and "CRASH!" in crash[0] and "Unexpected signal" in crash[0], lines


@case
def a_timeout_says_so_and_not_its_notes():
    _, _, lines = run([{"name": "s", "result": "FAIL", "stdout": J2}])
    t = [line for line in lines if line.startswith("s::d_timeout")]
    assert t == ["s::d_timeout: Timed out."], lines


@case
def a_long_message_is_cut():
    out = "[RUN ] s::long\n[----] a.c:3: Assertion Failed\n[----]   " + "x" * 2000 + "\n[FAIL] s::long: (0.01s)\n"
    _, _, lines = run([{"name": "s", "result": "FAIL", "stdout": criterion(1, 0, 1, 0, out)}])
    assert len(lines) == 1 and "xxxx" in lines[0] and len(lines[0]) <= len("s::long: ") + 400, lines[0][:80]


@case
def tap_is_counted_against_its_plan():
    ok = "ok 1 - x::a\nnot ok 2 - x::b\nok 3 - x::c # SKIP no huge pages\n1..3\n"
    p, f, lines = run([{"name": "x", "result": "FAIL", "stdout": ok}])
    assert (p, f) == (1, 1) and lines == ["x::b"], (p, f, lines)
    short = "ok 1 - y::a\n1..2\n"  # one test of two: it stopped half-way
    p, f, lines = run([{"name": "y", "result": "FAIL", "stdout": short}])
    assert f == 1 and any(line.startswith("y (no synthesis or TAP plan") for line in lines), (p, f, lines)


@case
def notes_and_skips_are_shown_whole():
    notes = []
    tap = "# NOTE layers, bottom to top\nok 1 - x::a # SKIP no huge pages\n1..1\n"
    run([{"name": "x", "result": "OK", "stdout": tap},
         {"name": "y", "result": "OK", "stdout": criterion(1, 1, 0, 0, "[NOTE] fuzz: 250000 calls\n")}], notes)
    assert "[NOTE] x: layers, bottom to top" in notes, notes
    assert "[NOTE] y: fuzz: 250000 calls" in notes, notes
    assert "[SKIP] x::a: no huge pages" in notes, notes


@case
def a_suite_that_said_nothing_is_a_failure():
    p, f, lines = run([{"name": "kill", "result": "TIMEOUT", "stdout": "started\n"}])
    assert (p, f) == (0, 1) and lines == ["kill (no synthesis or TAP plan: TIMEOUT)"], (p, f, lines)


@case
def a_failed_suite_with_no_failed_test_is_a_failure():
    p, f, lines = run([{"name": "z", "result": "FAIL", "stdout": criterion(3, 3, 0, 0)}])
    assert (p, f) == (3, 1) and lines == ["z (FAIL)"], (p, f, lines)


bad = 0
for n, c in enumerate(CASES, 1):
    try:
        c()
        print(f"ok {n} - testcount::{c.__name__}")
    except Exception as e:  # noqa: BLE001 -- any failure is the test's
        bad += 1
        print(f"not ok {n} - testcount::{c.__name__}")
        print("# " + repr(e))
print(f"1..{len(CASES)}")
sys.exit(1 if bad else 0)
