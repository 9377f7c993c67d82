/*
 * dp_inject.h -- test-only injection points at the step boundaries where
 * another process may interleave (docs/style.md, "Tests"; PostgreSQL 17's
 * INJECTION_POINT() is the model).
 *
 *   DP_INJECT("area.acquire.stored");
 *
 * names a point. In the library that the test suites link (built with
 * -DDP_INJECTION) it calls dp_inject_fn, if a test installed one, with the
 * point's name; the test's handler may pause there, kill the process, or
 * signal another. In every other build (the installed libraries, the
 * benchmarks) the macro is empty: no load, no branch.
 *
 * Points are named "<file>.<operation>.<step>", and each one is listed in
 * the top comment of its file with what a test can prove by stopping there.
 */
#ifndef DP_INJECT_H
#define DP_INJECT_H

/* The hook a test installs (defined in the internal library only; declared
 * for every build so that tests, which are compiled without DP_INJECTION,
 * take it from here). */
extern void (*volatile dp_inject_fn)(const char *point);
/* resident.c [room reuse]: how long a room reading is reused, in ns, when
 * a test sets it (0: the library's own; 1: in effect never). */
extern volatile unsigned long long dp_inject_room_reuse_ns;
#ifdef DP_INJECTION
#define DP_INJECT(name)                      \
    do {                                     \
        void (*fn_)(const char *) = dp_inject_fn; \
        if (fn_) fn_(name);                  \
    } while (0)
#else
#define DP_INJECT(name) ((void)0)
#endif

#endif /* DP_INJECT_H */
