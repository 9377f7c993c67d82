/*
 * testlimits.h -- what a test needs to put a process at the edges of
 * memory and to keep it from outliving the test: cgroups it makes and
 * removes (memory, hugetlb; v2, the hybrid unified hierarchy, or v1),
 * huge pages it reserves and puts back, children that die with their
 * parent and waits that end.
 *
 *   test_cg_make(&cg, "memory", why)   a cgroup under the hierarchy that has
 *                                      the controller (false, with why: skip)
 *   test_cg_limit(&cg, bytes)          memory.max (and no swap), or v1's
 *                                      limit_in_bytes; hugetlb: 2 MiB pages
 *   test_cg_enter(&cg, pid)            move a process (0: the caller) in
 *   test_cg_oom_kills(&cg)             the OOM kills the cgroup has seen
 *   test_cg_remove(&cg)                rmdir (waits for its processes to go),
 *                                      and the controller put back as it was
 *   test_child()                       fork() whose child dies with the
 *                                      caller (PR_SET_PDEATHSIG)
 *   test_wait_bounded(pid, seconds)    test_wait, or kill -9 after seconds
 *                                      (then 128 + SIGKILL, and *killed)
 *   test_huge_reserve(n, &old)         n more 2 MiB pages reserved (the
 *                                      count got), test_huge_restore(old)
 */
#ifndef DSMPOOL_TESTLIMITS_H
#define DSMPOOL_TESTLIMITS_H

#include <sys/prctl.h>
#include <sys/stat.h>

#include "testutil.h"

typedef struct test_cg {
    char dir[1024];
    char root[256]; /* v2: the hierarchy's root, whose subtree_control we may have changed */
    char ctl[16];
    bool v2, enabled;
} test_cg;

static inline bool test_file_has_word(const char *path, const char *word) {
    char buf[512] = "";
    if (test_read_file(path, buf, sizeof buf) != 0) return false;
    char *save = NULL;
    for (char *t = strtok_r(buf, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
        if (!strcmp(t, word)) return true;
    return false;
}

/* A cgroup with controller ctl, directly under the v2 (or unified) root --
 * enabling ctl for the root's children if need be -- or under this
 * process's v1 cgroup of that controller. */
static inline bool test_cg_make(test_cg *c, const char *ctl, char *why, size_t wn) {
    static int made; /* two cgroups of one process get two names */
    int seq = made++;
    memset(c, 0, sizeof *c);
    snprintf(c->ctl, sizeof c->ctl, "%s", ctl);
    snprintf(why, wn, "no cgroup hierarchy with the %s controller (or not root)", ctl);
    const char *roots[2] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    for (int i = 0; i < 2; i++) {
        char f[512];
        snprintf(f, sizeof f, "%s/cgroup.controllers", roots[i]);
        if (!test_file_has_word(f, ctl)) continue;
        snprintf(f, sizeof f, "%s/cgroup.subtree_control", roots[i]);
        bool had = test_file_has_word(f, ctl);
        if (!had) {
            char add[32];
            snprintf(add, sizeof add, "+%s", ctl);
            if (test_write_file(f, add) != 0) continue;
        }
        snprintf(c->root, sizeof c->root, "%s", roots[i]);
        snprintf(c->dir, sizeof c->dir, "%s/dsmpool-test-%s-%llu-%d", roots[i], ctl, test_uid(), seq);
        if (mkdir(c->dir, 0755) == 0 || errno == EEXIST) {
            c->v2 = true;
            c->enabled = !had;
            return true;
        }
        snprintf(why, wn, "mkdir %.400s: %s", c->dir, strerror(errno));
        if (!had) {
            char del[32];
            snprintf(del, sizeof del, "-%s", ctl);
            test_write_file(f, del);
        }
    }
    FILE *pc = fopen("/proc/self/cgroup", "r");
    if (!pc) return false;
    char line[1024], path[1024] = "";
    bool found = false;
    while (!found && fgets(line, sizeof line, pc)) {
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b) continue;
        *b = 0;
        char *save = NULL;
        for (char *t = strtok_r(a + 1, ",", &save); t && !found; t = strtok_r(NULL, ",", &save))
            if (!strcmp(t, ctl)) {
                found = true;
                snprintf(path, sizeof path, "%s", b + 1);
                path[strcspn(path, "\n")] = 0;
            }
    }
    fclose(pc);
    if (!found) return false;
    int n = snprintf(c->dir, sizeof c->dir, "/sys/fs/cgroup/%s%s/dsmpool-test-%s-%llu-%d", ctl, strcmp(path, "/") ? path : "",
                     ctl, test_uid(), seq);
    if (n < 0 || (size_t)n >= sizeof c->dir) return false;
    if (mkdir(c->dir, 0755) == 0 || errno == EEXIST) return true;
    snprintf(why, wn, "mkdir %.400s: %s", c->dir, strerror(errno));
    return false;
}

static inline int test_cg_set(const test_cg *c, const char *file, const char *v) {
    char f[1200];
    snprintf(f, sizeof f, "%s/%s", c->dir, file);
    return test_write_file(f, v);
}

static inline int test_cg_get(const test_cg *c, const char *file, char *buf, size_t n) {
    char f[1200];
    snprintf(f, sizeof f, "%s/%s", c->dir, file);
    return test_read_file(f, buf, n);
}

static inline int test_cg_limit(const test_cg *c, uint64_t bytes) {
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)bytes);
    if (!strcmp(c->ctl, "hugetlb")) return test_cg_set(c, c->v2 ? "hugetlb.2MB.max" : "hugetlb.2MB.limit_in_bytes", v);
    int r = test_cg_set(c, c->v2 ? "memory.max" : "memory.limit_in_bytes", v);
    if (r == 0 && c->v2) test_cg_set(c, "memory.swap.max", "0");
    return r;
}

static inline int test_cg_enter(const test_cg *c, pid_t pid) {
    char v[32];
    snprintf(v, sizeof v, "%d", (int)pid);
    return test_cg_set(c, "cgroup.procs", v);
}

/* The OOM kills seen in the cgroup (v1 memory.oom_control's oom_kill, v2
 * memory.events'); -1 when neither can be read. */
static inline long test_cg_oom_kills(const test_cg *c) {
    char buf[1024] = "";
    if (test_cg_get(c, c->v2 ? "memory.events" : "memory.oom_control", buf, sizeof buf) != 0) return -1;
    char *k = strstr(buf, "oom_kill ");
    return k ? atol(k + 9) : 0;
}

static inline void test_cg_remove(test_cg *c) {
    if (!c->dir[0]) return;
    for (int i = 0; i < 500 && rmdir(c->dir) != 0 && errno == EBUSY; i++) usleep(10000);
    if (c->enabled) {
        char f[512], del[32];
        snprintf(f, sizeof f, "%s/cgroup.subtree_control", c->root);
        snprintf(del, sizeof del, "-%s", c->ctl);
        test_write_file(f, del);
    }
    c->dir[0] = 0;
}

/* fork(), the child killed when the caller dies (its parent thread:
 * Criterion's test process), so that a test killed by its timeout leaves
 * no child behind. */
static inline pid_t test_child(void) {
    pid_t parent = getpid();
    pid_t c = fork();
    if (c == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127); /* the parent is gone already */
    }
    return c;
}

/* test_wait, bounded: after `seconds` the child is killed (-9) and the
 * status says so. */
static inline int test_wait_bounded(pid_t pid, double seconds, bool *killed) {
    if (killed) *killed = false;
    uint64_t end = test_now_ns() + (uint64_t)(seconds * 1e9);
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (r < 0 && errno != EINTR) return -1;
        if (test_now_ns() > end) {
            kill(pid, SIGKILL);
            if (killed) *killed = true;
            return test_wait(pid);
        }
        usleep(2000);
    }
}

#define TEST_NR_HUGE "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
#define TEST_FREE_HUGE "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"

static inline long test_huge_read(const char *f) {
    char v[32] = "";
    return test_read_file(f, v, sizeof v) == 0 && v[0] ? atol(v) : -1;
}

/* Reserve n more 2 MiB pages; the pages got (0: none), *old for the restore. */
static inline long test_huge_reserve(long n, long *old) {
    *old = test_huge_read(TEST_NR_HUGE);
    if (*old < 0) return 0;
    char v[32];
    snprintf(v, sizeof v, "%ld", *old + n);
    if (test_write_file(TEST_NR_HUGE, v) != 0) return 0;
    long now = test_huge_read(TEST_NR_HUGE);
    return now > *old ? now - *old : 0;
}

static inline void test_huge_restore(long old) {
    char v[32];
    snprintf(v, sizeof v, "%ld", old);
    if (old >= 0) test_write_file(TEST_NR_HUGE, v);
}

#endif
