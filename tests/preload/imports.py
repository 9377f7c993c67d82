#!/usr/bin/env python3
"""The preload library defines every call a stock PostgreSQL server imports
for its posix DSM segments, under a name and version that ld.so binds to it.

For each installed server binary (/usr/lib/postgresql/*/bin/postgres) the
undefined dynamic symbols of the DSM path are read (readelf --dyn-syms -W):
shm_open, shm_unlink, posix_fallocate(64), ftruncate(64), mmap(64), munmap,
close, fstat(64). Each one the library serves (SERVED) must be defined by
libdsmpool-preload.so under that exact name, GLOBAL; a definition with a
symbol version must carry the import's version, an unversioned one binds
any (that is how ld.so binds an LD_PRELOAD library). A server that imports
posix_fallocate64 where the library defines only posix_fallocate would
make the library silently inert.

  self_test_*       the check itself, against a made-up library: it refuses
                    a missing definition, a wrong version and a LOCAL one,
                    and takes an unversioned one and the same version (so
                    no case below passes or fails vacuously)
  library_defines_every_served_name
                    each name of SERVED, whatever server is installed
  needed_libc_only  the library's only NEEDED entry is libc.so.6 (a
                    sanitized build may add its runtimes: noted)
  postgres_<major>  that server's imports are all served

Speaks TAP (tools/testcount.py sums it); a case that cannot run is a test
marked "# SKIP", saying why.
Usage: imports.py PATH-TO-libdsmpool-preload.so [--sanitized]
"""
import glob
import re
import subprocess
import sys

WATCHED = {"shm_open", "shm_unlink", "posix_fallocate", "posix_fallocate64", "ftruncate",
           "ftruncate64", "mmap", "mmap64", "munmap", "close", "fstat", "fstat64"}
SERVED = {"shm_open", "shm_unlink", "posix_fallocate", "posix_fallocate64", "mmap", "mmap64",
          "munmap", "close"}
# what a server's DSM path imports whatever its version (mmap as mmap64
# where it was built with _FILE_OFFSET_BITS=64): fewer means the parsing
# below went stale, not that the server needs nothing
ALWAYS = {"shm_open", "shm_unlink", "mmap", "munmap", "close"}
SANITIZER_RUNTIMES = re.compile(r"^lib(asan|ubsan|tsan|lsan|hwasan)\.so(\.\d+)*$")

# "   70: 0000000000000000     0 FUNC    GLOBAL DEFAULT  UND shm_open@GLIBC_2.34 (18)"
SYM = re.compile(r"^\s*\d+:\s+[0-9a-fA-F]+\s+\S+\s+(\S+)\s+(\S+)\s+\S+\s+(\S+)\s+(\S+)(?:\s+\(\d+\))?\s*$")

tested = passing = 0


def result(name, ok, why="", detail=()):
    """One TAP test line (and what explains a failure, as comments)."""
    global tested, passing
    tested += 1
    if ok:
        passing += 1
        print("ok %d - preload_imports::%s%s" % (tested, name, ": " + why if why else ""))
    else:
        print("not ok %d - preload_imports::%s: %s" % (tested, name, why))
        for line in list(detail)[:40]:
            print("#     " + line)


def readelf(*args):
    return subprocess.run(["readelf", *args], check=True, capture_output=True, text=True).stdout


def dyn_syms(path):
    """[(name, version or None, type, bind, ndx)] of the dynamic symbol table."""
    out = []
    for line in readelf("--dyn-syms", "-W", path).splitlines():
        m = SYM.match(line)
        if not m:
            continue
        typ, bind, ndx, full = m.groups()
        name, _, ver = full.partition("@")
        out.append((name, ver.lstrip("@") or None, typ, bind, ndx))
    return out


def imports(path):
    """[(name, version or None)] that path takes from elsewhere, of WATCHED."""
    return sorted({(n, v) for n, v, _, _, ndx in dyn_syms(path) if ndx == "UND" and n in WATCHED})


def definitions(path):
    """{name: [(version or None, type, bind)]} that path defines."""
    defs = {}
    for n, v, typ, bind, ndx in dyn_syms(path):
        if ndx != "UND":
            defs.setdefault(n, []).append((v, typ, bind))
    return defs


def problems(imps, defs):
    """Why the library (defs) would not serve these imports: [] if it would."""
    out = []
    for name, ver in imps:
        if name not in SERVED:
            continue
        found = [d for d in defs.get(name, []) if d[2] == "GLOBAL"]
        if not found:
            out.append("%s@%s is imported; the library has no GLOBAL definition of %s"
                       % (name, ver or "(none)", name))
        elif not any(v is None or v == ver for v, _, _ in found):
            out.append("%s@%s is imported; the library defines it only as %s"
                       % (name, ver or "(none)", ", ".join("%s@%s" % (name, v) for v, _, _ in found)))
    return out


def main():
    global tested, passing
    args = sys.argv[1:]
    sanitized = "--sanitized" in args
    args = [a for a in args if a != "--sanitized"]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    lib = args[0]
    try:
        defs = definitions(lib)
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf("-d", "-W", lib))
    except (OSError, subprocess.CalledProcessError) as e:
        result("read_library", False, "readelf on %s failed: %s" % (lib, e))
        needed, defs = None, None

    # The check refuses what ld.so would not bind and takes what it would:
    # against a made-up library that defines each served name, unversioned.
    fake_defs = {n: [(None, "FUNC", "GLOBAL")] for n in SERVED}
    fake = [("posix_fallocate64", "GLIBC_2.2.5"), ("shm_open", "GLIBC_2.34")]
    p = problems(fake, fake_defs)
    result("self_test_unversioned_definitions_bind", not p,
           "posix_fallocate64@GLIBC_2.2.5, shm_open@GLIBC_2.34 against unversioned definitions: %s"
           % (p or "accepted"))
    p = problems(fake, {n: d for n, d in fake_defs.items() if n != "posix_fallocate64"})
    result("self_test_missing_definition_fails", len(p) == 1 and "posix_fallocate64" in p[0],
           "an import of posix_fallocate64 against a library without it: %s" % (p or "accepted"))
    p = problems(fake, dict(fake_defs, shm_open=[("GLIBC_2.2.5", "FUNC", "GLOBAL")]))
    result("self_test_wrong_version_fails", len(p) == 1 and "shm_open" in p[0],
           "shm_open@GLIBC_2.34 against a definition shm_open@@GLIBC_2.2.5: %s" % (p or "accepted"))
    p = problems(fake, dict(fake_defs, shm_open=[("GLIBC_2.34", "FUNC", "GLOBAL")]))
    result("self_test_same_version_binds", not p,
           "shm_open@GLIBC_2.34 against a definition shm_open@@GLIBC_2.34: %s" % (p or "accepted"))
    p = problems(fake, dict(fake_defs, shm_open=[(None, "FUNC", "LOCAL")]))
    result("self_test_local_definition_fails", len(p) == 1 and "shm_open" in p[0],
           "shm_open defined LOCAL: %s" % (p or "accepted"))

    if defs is not None:
        # whatever server is installed, or none
        p = ["%s: no GLOBAL definition" % n for n in sorted(SERVED)
             if not any(bind == "GLOBAL" for _, _, bind in defs.get(n, []))]
        result("library_defines_every_served_name", not p,
               "%s, each GLOBAL" % ", ".join(sorted(SERVED)), p)

    if needed is not None:
        extra = [n for n in needed if n != "libc.so.6"]
        allowed = [n for n in extra if sanitized and SANITIZER_RUNTIMES.match(n)]
        ok = "libc.so.6" in needed and extra == allowed
        result("needed_libc_only", ok, "NEEDED: %s" % (", ".join(needed) or "nothing"))
        if ok and allowed:
            print("# NOTE the sanitized build's preload library also needs %s" % ", ".join(allowed))

    servers = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if not servers:
        tested += 1
        print("ok %d - preload_imports::postgres_servers # SKIP no PostgreSQL server is installed "
              "(/usr/lib/postgresql/*/bin/postgres; Debian: apt-get install postgresql-15)" % tested)
        passing += 1  # (a skip: not counted as passed by tools/testcount.py)
    for server in servers:
        major = server.split("/")[-3]
        name = "postgres_" + re.sub(r"\W", "_", major)
        if defs is None:
            result(name, False, "the library could not be read")
            continue
        try:
            imps = imports(server)
        except (OSError, subprocess.CalledProcessError) as e:
            result(name, False, "readelf on %s failed: %s" % (server, e))
            continue
        listed = ", ".join("%s@%s" % (n, v or "(none)") for n, v in imps)
        missing = sorted(ALWAYS - {re.sub(r"64$", "", n) for n, _ in imps})
        if missing:
            result(name, False, "%s imports none of %s: the binary changed or the parsing is stale "
                   "(imports seen: %s)" % (server, ", ".join(missing), listed or "none"))
            continue
        p = problems(imps, defs)
        result(name, not p, "%s imports %s" % (server, listed), p)

    print("1..%d" % tested)
    return 0 if passing == tested else 1


if __name__ == "__main__":
    sys.exit(main())
