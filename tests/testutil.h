/*
 * testutil.h -- small helpers shared by the test suites.
 *
 * Seeds: every random test starts from test_seed(), which is
 * $DSMPOOL_TEST_SEED or 20261130; a failure message prints it, so a run
 * replays with DSMPOOL_TEST_SEED=<seed>. Durations: test_seconds(d) scales
 * d by $DSMPOOL_TEST_SCALE (the sanitizer runs use less). A test that
 * ends with a pool still attached calls test_private_shm() first, so that
 * the pool's objects in /dev/shm go with the test process.
 */
#ifndef DSMPOOL_TESTUTIL_H
#define DSMPOOL_TESTUTIL_H

#include <criterion/criterion.h>
#include <dsmpool.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KIB (1ull << 10)
#define MIB (1ull << 20)

/* UNDER_TSAN: 1 in a ThreadSanitizer build (gcc's macro, clang's feature) */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

/* A pool of the given backing, size and process slots (0: the default),
 * or the test fails. */
static inline dsmpool *test_pool_procs(dsmpool_backing b, const char *name, size_t size, unsigned procs) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = size;
    cfg.backing = b;
    cfg.name = name;
    cfg.max_procs = procs;
    dsmpool *p = NULL;
    int r = dsmpool_create(&cfg, &p);
    cr_assert_eq(r, 0, "create: %s", dsmpool_last_error());
    return p;
}

static inline dsmpool *test_pool(dsmpool_backing b, const char *name, size_t size) {
    return test_pool_procs(b, name, size, 0);
}

/* An area of the pool with the given flags, or the test fails. */
static inline dsmpool_area *test_area(dsmpool *p, unsigned flags) {
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, flags, &a), 0, "area_create: %s", dsmpool_last_error());
    return a;
}

/* n zeroed bytes that this process's forked children share with it (a
 * test's tallies and flags), or the test fails. */
/* Stay on the CPU this thread runs on now (any allowed one): the page
 * allocator's reservations and hints are per CPU. */
static inline void test_pin_here(void) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0, "%s", strerror(errno));
}

static inline void *test_shared(size_t n) {
    void *s = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(s, MAP_FAILED);
    memset(s, 0, n);
    return s;
}

/* Recover until nothing is left for later (a busy window can defer it). */
static inline void test_recover_all(dsmpool *p) {
    dsmpool_stats st;
    for (int i = 0; i < 100; i++) {
        cr_assert_geq(dsmpool_recover(p), 0, "%s", dsmpool_last_error());
        cr_assert_eq(dsmpool_get_stats(p, &st), 0);
        if (!st.procs_recovering && !st.sweep_due) return;
        usleep(10000);
    }
    cr_assert(false, "recovery never finished (recovering %u, sweep due %d)", st.procs_recovering, st.sweep_due);
}

static inline size_t test_pool_free(dsmpool *p) { /* over every sub-pool */
    dsmpool_stats st;
    cr_assert_eq(dsmpool_get_stats(p, &st), 0);
    size_t f = 0;
    for (unsigned i = 0; i < st.nsubpools; i++) f += st.subpool[i].free;
    return f;
}

static inline size_t test_live_segments(dsmpool *p) {
    dsmpool_stats st;
    cr_assert_eq(dsmpool_get_stats(p, &st), 0);
    return st.segments_live;
}

static inline void test_check_ok(dsmpool *p) {
    int r = dsmpool_check(p);
    cr_assert_eq(r, 0, "check: %s", dsmpool_last_error());
}

static inline uint64_t test_seed(void) {
    const char *s = getenv("DSMPOOL_TEST_SEED");
    return s && *s ? strtoull(s, NULL, 0) : 20261130ull;
}

static inline uint64_t test_rand(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t test_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double test_seconds(double d) {
    const char *s = getenv("DSMPOOL_TEST_SCALE");
    double f = s && *s ? atof(s) : 1.0;
    return d * (f > 0 ? f : 1.0);
}

/* A number no other process on the host uses while this one runs, for the
 * names of things the host shares (cgroups, hugetlbfs files, /tmp files):
 * the pid, and under tests/isolate.c (a PID namespace of its own, where
 * another run has the same pids) the isolating process's host pid too. */
static inline unsigned long long test_uid(void) {
    const char *run = getenv("DSMPOOL_ISOLATE_RUN");
    return (run && *run ? strtoull(run, NULL, 10) << 22 : 0) | (unsigned long long)getpid();
}

/* A name no other test (or earlier run) uses: "/dsmpool-test-<tag>-<uid>". */
static inline const char *test_name(char *buf, size_t n, const char *tag) {
    snprintf(buf, n, "/dsmpool-test-%s-%llu", tag, test_uid());
    return buf;
}

/* Give the rest of this process, and the children it makes, a /dev/shm of
 * their own: a private mount namespace with a fresh tmpfs on /dev/shm,
 * which goes when the last of them ends. For tests that end with a pool
 * attached (seccomp'd workers that must not exit, a region truncated under
 * its creator): every pool has an anchor there, /dev/shm/dsmpool.<id>, and
 * OS segments are /dev/shm/dsmpool.<id>.<idx>.<gen>; on the real /dev/shm
 * they would outlive the test. Criterion runs each test in a process of its
 * own, so calling this at the start of the test is enough. Needs root
 * (CAP_SYS_ADMIN): without it, says so and returns false, and the test
 * runs as before on the real /dev/shm. */
static inline bool test_private_shm(void) {
    const char *step = "unshare(CLONE_NEWNS)";
    if (unshare(CLONE_NEWNS) == 0) {
        step = "making / private";
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0) {
            step = "mounting a tmpfs on /dev/shm";
            if (mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=256m") == 0) return true;
        }
    }
    fprintf(stderr, "[NOTE] no private /dev/shm (%s: %s; not root?): this test's pool objects stay in "
            "/dev/shm\n", step, strerror(errno));
    return false;
}

/* Wait for a child; its exit status, or 128 + signal. */
static inline int test_wait(pid_t pid) {
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Sum of an smaps field (in kB) over the mappings that overlap [addr, addr+len);
 * for "KernelPageSize" the largest value. -1 if /proc/self/smaps is unreadable. */
static inline long test_smaps_kb(const void *addr, size_t len, const char *field) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    long sum = 0;
    int in = 0;
    size_t flen = strlen(field);
    uintptr_t lo = (uintptr_t)addr, hi = lo + len;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = a < hi && b > lo;
            continue;
        }
        if (in && !strncmp(line, field, flen) && line[flen] == ':') {
            long v = atol(line + flen + 1);
            if (!strcmp(field, "KernelPageSize")) sum = v > sum ? v : sum;
            else sum += v;
        }
    }
    fclose(f);
    return sum;
}

/* Write v to a /proc or /sys file; returns 0 or -errno. */
static inline int test_write_file(const char *path, const char *v) {
    FILE *f = fopen(path, "w");
    if (!f) return -errno;
    int r = fputs(v, f) < 0 ? -EIO : 0;
    if (fclose(f) != 0 && !r) r = -errno;
    return r;
}

static inline int test_read_file(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return -errno;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = 0;
    fclose(f);
    return 0;
}

#endif
