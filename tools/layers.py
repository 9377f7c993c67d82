#!/usr/bin/env python3
"""tools/layers.py -- the library's layers call down only (docs/style.md).

The layers are written once, below, bottom to top, each as one or more
folders. For every C file of the library (pool/) it checks:

  includes    a file includes the headers of its own layer and of the layers
              below, never one above (nor pool/dp_internal.h, which is all
              of them, for tests and tools);
  calls       a function calls functions of its own layer and of the layers
              below, never one above (a layer that must react to an event of
              a higher one offers a registration: docs/style.md, "Layers");
  circles     no files call each other in a loop, within a layer or across;
  os calls    only the OS layer (pool/os) makes system calls or calls
              the C library's wrappers of them: everyone else goes through
              dp_os.h;
  pairs with  every "pairs with" note of a memory-order comment names a
              function (or a macro) that exists, and every name with an
              underscore in it is one that exists;
  atomics     no file but pool/base/dp_atomic.h calls an atomic of
              <stdatomic.h> or a __atomic builtin: every atomic has its
              memory order in its name (dp_load_acquire, dp_fence_release);
  expect      no file but pool/base/dp_base.h calls __builtin_expect: the
              hot paths say dp_likely / dp_unlikely;
  nodiscard   every call of the public header that returns an int
              returns 0 or -errno and says DSMPOOL_NODISCARD, but the two
              that return something else (NOT_ERRNO);
  citations   a rule cited as "file.c [rule]" (in the comments of the C
              files and in the Markdown) is a rule that file states (a
              line of its design comment that begins "[rule]"); no rule is
              cited by a number ("proc.c [brackets]", "STYLE 13": the numbers
              are gone); a path named in the Markdown, the manual pages and
              the meson.build files (pool/..., tests/..., bench/...) is a
              file or folder of the project, or the program built from one
              (bench/hashjoin: bench/hashjoin.c), and none lies outside it.

It reads the code as text (comments and strings removed, braces counted), so
it sees what a reader sees: a call through a function pointer (a hook) is no
call of the callee's layer, which is the point of hooks.

Speaks TAP: an "ok" or "not ok" line per check, the offending places as
comments, and the plan (tools/testcount.py counts each check as a test).
Usage: tools/layers.py [ROOT]        exit status 0 only if every check passes
"""
import os
import re
import sys

# ---- the layers, bottom to top: the one place where their order is written ----
LAYERS = [
    ("base", ["pool/base"]),
    ("os", ["pool/os"]),
    ("alloc", ["pool/alloc"]),
    ("region", ["pool/region"]),
    ("ledger", ["pool/ledger"]),
    ("segment", ["pool/segment"]),
    ("area", ["pool/area"]),
    ("top", ["pool/top"]),
]
OS_LAYER = "os"
PUBLIC_HEADERS = {"dsmpool.h"}
FORBIDDEN_HEADERS = {"dp_internal.h"}

# What the OS layer wraps: system calls and the C library's thin wrappers of
# them. A name here called outside the OS layer is a failure.
OS_CALLS = set("""
syscall sched_yield sched_getcpu getcpu pread pwrite read write readv writev open openat creat close dup dup2 dup3
mmap munmap mremap mprotect madvise mbind set_mempolicy get_mempolicy move_pages msync mlock munlock
fcntl flock ftruncate truncate fallocate posix_fallocate fstat stat lstat fstatat statfs fstatfs
access faccessat unlink unlinkat rename renameat link linkat symlink mkdir rmdir chmod fchmod chown fchown
shm_open shm_unlink shmget shmat shmdt shmctl semget semop semtimedop semctl memfd_create
getpid gettid getppid fork vfork clone _Fork execve kill tgkill raise
nanosleep usleep sleep clock_gettime clock_nanosleep gettimeofday getrandom getrusage
opendir fdopendir readdir closedir fopen fdopen fclose fgets fread fwrite fscanf fprintf getline
membarrier prctl ioctl sysconf getpagesize
""".split())

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))


def layer_of(rel):
    for i, (name, dirs) in enumerate(LAYERS):
        for d in dirs:
            if rel.startswith(d + "/"):
                return i
    return None


def sources():
    out = []
    for _, dirs in LAYERS:
        for d in dirs:
            full = os.path.join(ROOT, d)
            for f in sorted(os.listdir(full)):
                if f.endswith((".c", ".h")):
                    out.append(d + "/" + f)
    return out


def strip(text):
    """Comments and string/char literals blanked out (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def comments(text):
    """(line, text) of every comment."""
    res = []
    for m in re.finditer(r"/\*.*?\*/|//[^\n]*", text, re.S):
        res.append((text.count("\n", 0, m.start()) + 1, m.group(0)))
    return res


IDENT = re.compile(r"(?<![\w.>])([A-Za-z_]\w*)\s*\(")  # not a member (p->fn(), s.fn())
KEYWORDS = set("if for while switch return sizeof _Alignof alignof _Static_assert defined __attribute__ "
               "__builtin_expect __typeof__ typeof do else case".split())


def definitions(code):
    """Top-level function definitions: (name, static?, body start, body end)."""
    defs, depth, i, n = [], 0, 0, len(code)
    stmt_start = 0
    while i < n:
        c = code[i]
        if c == "{":
            if depth == 0:
                # attributes blanked out, positions kept (static inline
                # __attribute__((always_inline)) bool f(...) is f's)
                head = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", lambda a: " " * len(a.group(0)),
                              code[stmt_start:i])
                m = re.search(r"\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*$", head, re.S)
                if m and m.group(1) not in KEYWORDS and not re.search(r"\b(struct|union|enum)\s*\w*\s*$", head) \
                        and "=" not in head[m.start():]:
                    # find the matching brace
                    d, j = 0, i
                    while j < n:
                        if code[j] == "{":
                            d += 1
                        elif code[j] == "}":
                            d -= 1
                            if d == 0:
                                break
                        j += 1
                    defs.append((m.group(1), bool(re.search(r"\bstatic\b", head[head.rfind(";") + 1:])), i, j))
                    i = j + 1
                    stmt_start = i
                    continue
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                stmt_start = i + 1
        elif c == ";" and depth == 0:
            stmt_start = i + 1
        elif c == "#" and (i == 0 or code[i - 1] == "\n"):
            j = code.find("\n", i)
            while j > 0 and code[j - 1] == "\\":
                j = code.find("\n", j + 1)
            j = n if j < 0 else j
            stmt_start = j
            i = j
            continue
        i += 1
    return defs


def macros(code):
    return set(re.findall(r"^\s*#\s*define\s+([A-Za-z_]\w*)", code, re.M))


# The public calls that return an int that is not 0 or -errno.
NOT_ERRNO = {"dsmpool_fd", "dsmpool_version_number"}

# Paths the scripts make (not in the tree): a citation of one is right.
MADE = ("integrations/postgresql/work", "bench/dist", "bench/results/scaling-HOSTNAME")
TOP_DIRS = "pool|numa|tests|tools|bench|integrations|docs|include|examples|debian|cmake|\\.ci"


def project_files():
    """Every file of the project (git's list where there is one)."""
    out = []
    for d, subs, fs in os.walk(ROOT):
        rel = os.path.relpath(d, ROOT)
        subs[:] = [x for x in subs if not x.startswith(".") and not os.path.exists(os.path.join(d, x, "meson-private"))
                   and not (rel == "." and x.startswith("build"))]
        for f in fs:
            out.append(os.path.normpath(os.path.join(rel, f)))
    return out


def citations():
    files = project_files()
    fileset = set(files)
    dirs = set()
    for f in files:
        p = os.path.dirname(f)
        while p:
            dirs.add(p)
            p = os.path.dirname(p)
    by_name = {}
    for f in files:
        by_name.setdefault(os.path.basename(f), []).append(f)
    texts = {}

    def text_of(f):
        if f not in texts:
            try:
                texts[f] = open(os.path.join(ROOT, f), errors="replace").read()
            except OSError:
                texts[f] = ""
        return texts[f]

    def states(f, rule):
        return re.search(r"^\s*(?:\*|//|#|-)?\s*\[" + re.escape(rule) + r"\]", text_of(f), re.M) is not None

    out = []
    cite = re.compile(r"\b([A-Za-z_][\w-]*\.(?:c|h|md))\s*\[([a-z][^\]\n]{0,40})\]")
    numbered = re.compile(r"\b(?:[A-Za-z_]\w*\.[ch] rule \d+|STYLE(?:\.md)? \d+|DESIGN(?:\.md)? \d+)")
    path = re.compile(r"(?<![\w./-])((?:\.\./)*(?:%s)/[\w./+-]*[\w+-])" % TOP_DIRS)
    for f in sorted(files):
        md = f.endswith((".md", ".m"))  # Markdown, and the models' comments (tests/model)
        if not (md or f.endswith((".c", ".h"))):
            continue
        t = text_of(f)
        places = [(0, t)] if md else comments(t)
        for ln0, com in places:
            for m in cite.finditer(com):
                name, rule = m.group(1), m.group(2)
                ln = (ln0 + com.count("\n", 0, m.start())) if ln0 else t.count("\n", 0, m.start()) + 1
                where = "%s:%d" % (f, ln)
                if name == "file.c":  # (the form itself, in the docs)
                    continue
                if name not in by_name:
                    out.append("%s cites %s [%s]: there is no %s" % (where, name, rule, name))
                elif not any(states(g, rule) for g in by_name[name]):
                    out.append("%s cites %s [%s]: %s states no such rule" % (where, name, rule, name))
            for m in numbered.finditer(com):
                ln = (ln0 + com.count("\n", 0, m.start())) if ln0 else t.count("\n", 0, m.start()) + 1
                out.append("%s:%d cites \"%s\": rules are cited by name ([rule]), not by number" %
                           (f, ln, m.group(0)))
    for f in sorted(files):
        if not (f.endswith((".md", ".m")) or os.path.basename(f) == "meson.build" or re.search(r"\.\d$", f)):
            continue
        t = text_of(f)
        for m in re.finditer(r"(?<![\w/])(?:\.\./)*shared/[\w./-]+", t):
            out.append("%s:%d names %s, outside the project" % (f, t.count("\n", 0, m.start()) + 1, m.group(0)))
        for m in path.finditer(t):
            p = m.group(1).rstrip(".")
            cands = {p, os.path.normpath(os.path.join(os.path.dirname(f), p))}
            ok = False
            for c in cands:
                if c in fileset or c in dirs or any(c + x in fileset for x in (".c", ".sh", ".py")) or \
                        c.startswith(MADE) or any(g.startswith(c) for g in files):
                    ok = True
            if not ok and "*" not in p:
                out.append("%s:%d names %s, which is not in the project" % (f, t.count("\n", 0, m.start()) + 1, p))
    return out


def main():
    files = sources()
    text = {f: open(os.path.join(ROOT, f)).read() for f in files}
    code = {f: strip(text[f]) for f in files}
    fails = {k: [] for k in ("includes", "calls", "circles", "os calls", "pairs with", "atomics", "expect",
                             "nodiscard", "citations")}

    # where each header lives
    header_layer = {}
    for f in files:
        if f.endswith(".h"):
            header_layer[os.path.basename(f)] = (layer_of(f), f)

    # ---- includes
    for f in files:
        lf = layer_of(f)
        for ln, line in enumerate(text[f].split("\n"), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            h = os.path.basename(m.group(1))
            if h in PUBLIC_HEADERS:
                continue
            if h in FORBIDDEN_HEADERS:
                fails["includes"].append("%s:%d includes %s (all layers at once: for tests and tools)" % (f, ln, h))
            elif h not in header_layer:
                fails["includes"].append("%s:%d includes %s, which no layer has" % (f, ln, h))
            elif header_layer[h][0] > lf:
                fails["includes"].append("%s:%d (%s) includes %s of the layer above, %s" %
                                         (f, ln, LAYERS[lf][0], h, LAYERS[header_layer[h][0]][0]))

    # ---- definitions: every non-static function and macro, and where
    defined = {}     # name -> file (non-static functions)
    statics = {}     # file -> set of its own static names
    known = set()    # every function and macro name of the library
    bodies = {}      # file -> [(name, start, end)]
    for f in files:
        ds = definitions(code[f])
        bodies[f] = ds
        statics[f] = {n for n, st, _, _ in ds if st}
        for n, st, _, _ in ds:
            known.add(n)
            if not st or f.endswith(".h"):
                defined.setdefault(n, f)
        known |= macros(code[f])

    # ---- calls (and os calls), file -> file edges
    edges = {}
    for f in files:
        lf = layer_of(f)
        for name, st, a, b in bodies[f]:
            body = code[f][a:b]
            for m in IDENT.finditer(body):
                callee = m.group(1)
                line = code[f].count("\n", 0, a + m.start()) + 1
                if callee in statics[f] or callee in KEYWORDS:
                    continue
                if callee in OS_CALLS and LAYERS[lf][0] != OS_LAYER:
                    fails["os calls"].append("%s:%d %s() calls %s(): go through dp_os.h" % (f, line, name, callee))
                g = defined.get(callee)
                if not g or g == f:
                    continue
                lg = layer_of(g)
                if lg > lf:
                    fails["calls"].append("%s:%d %s() (%s) calls %s() of the layer above, %s (%s)" %
                                          (f, line, name, LAYERS[lf][0], callee, LAYERS[lg][0], g))
                # a header's inline that calls its own layer's .c is the header's
                # promise, not a dependency of the header on that file
                if not f.endswith(".h") and not g.endswith(".h"):
                    edges.setdefault(f, {}).setdefault(g, set()).add(callee)

    # ---- circles: strongly connected components of the file call graph
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            strong(v)
    for comp in sccs:
        ties = []
        for a in comp:
            for b in comp:
                if b in edges.get(a, {}):
                    ties.append("%s -> %s: %s" % (a, b, ", ".join(sorted(edges[a][b])[:6])))
        fails["circles"].append("a circle of %d files: %s" % (len(comp), "; ".join(ties)))

    # ---- pairs with
    for f in files:
        for ln, com in comments(text[f]):
            for m in re.finditer(r"pairs with\s+(.*?)(?:[.;]\s|\*/|$)", com, re.S):
                note = m.group(1)
                names = re.findall(r"\b([A-Za-z_]\w*)(?:'s|\(\))?", note)
                funcs = [x for x in names if x in known]
                bad = [x for x in names if "_" in x.strip("_") and x not in known and not x.isupper()]
                where = "%s:%d" % (f, ln + com.count("\n", 0, m.start()))
                if bad:
                    fails["pairs with"].append("%s names %s, which does not exist: \"pairs with %s\"" %
                                               (where, ", ".join(bad), " ".join(note.split())))
                elif not funcs:
                    fails["pairs with"].append("%s names no function: \"pairs with %s\"" %
                                               (where, " ".join(note.split())))

    # ---- conventions: one name for each atomic and for the branch hint
    own = {"atomics": ("pool/base/dp_atomic.h", re.compile(r"\b(?:atomic_\w+|__atomic_\w+)\s*\(")),
           "expect": ("pool/base/dp_base.h", re.compile(r"\b__builtin_expect\s*\("))}
    for check, (home, pat) in own.items():
        for f in files:
            if f == home:
                continue
            for m in pat.finditer(code[f]):
                fails[check].append("%s:%d calls %s (only %s may)" % (f, code[f].count("\n", 0, m.start()) + 1,
                                                                      m.group(0).rstrip("( "), home))

    # ---- nodiscard: the public calls that return 0 or -errno say so
    hdr = strip(open(os.path.join(ROOT, "include", "dsmpool.h")).read())
    for m in re.finditer(r"^([^\n;{}#]*?)\bint\s+(dsmpool_\w+)\s*\(", hdr, re.M):
        specs, name = m.group(1), m.group(2)
        if name in NOT_ERRNO:
            if "DSMPOOL_NODISCARD" in specs:
                fails["nodiscard"].append("include/dsmpool.h: %s returns no -errno, yet says DSMPOOL_NODISCARD" % name)
        elif "DSMPOOL_NODISCARD" not in specs:
            fails["nodiscard"].append("include/dsmpool.h:%d: %s returns 0 or -errno without DSMPOOL_NODISCARD" %
                                      (hdr.count("\n", 0, m.start()) + 1, name))

    fails["citations"] = citations()

    nf = 0
    for n, (check, fl) in enumerate(fails.items(), 1):
        if fl:
            nf += 1
            print("not ok %d - layers::%s (%d)" % (n, check.replace(" ", "_"), len(fl)))
            for x in fl:
                print("#   " + x)
        else:
            print("ok %d - layers::%s" % (n, check.replace(" ", "_")))
    order = " < ".join("%s (%s)" % (n, ", ".join(d)) for n, d in LAYERS)
    print("# NOTE layers, bottom to top: " + order)
    print("1..%d" % len(fails))
    return 1 if nf else 0


if __name__ == "__main__":
    sys.exit(main())
