/*
 * vmtest -- NUMA placement proven on an emulated multi-node machine.
 *
 * Runs as /init of an initramfs under qemu (see run.sh): mounts /proc and
 * /sys, re-executes itself (libnuma reads the topology when it starts), then
 * checks with move_pages(2) where pool memory really is:
 *   - each node's sub-pool is 100% on that node; the interleaved sub-pool's
 *     pages (4 KiB, or whole 2 MiB hugetlb pages) go round-robin over the
 *     nodes (one MPOL_INTERLEAVE range);
 *   - a default allocation from a thread pinned to node k lands on node k,
 *     and so do an area's 32 KiB chunks;
 *   - DSMPOOL_SEG_ON_NODE(k) lands on k; interleaved segments (and an
 *     area's interleaved bucket array) spread evenly;
 *   - when node k is exhausted, allocation falls back to the nearest node by
 *     the SLIT distances given to qemu (LOCAL_ONLY refuses instead);
 *   - a 2 MiB hugetlb pool's sub-pools land on their nodes;
 *   - a 256 GiB pool's mapping is O(nodes) VMAs in its creator and in a
 *     forked child (the fork is timed).
 * Prints a pages-per-node table per policy, "RESULT n passed, m failed",
 * and exits through qemu's isa-debug-exit with 0 when all passed.
 */
#include <dsmpool.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "dp_numa.h"
#include "dp_internal.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

static int passed, failed; /* tests, not checks */
static int test_failed;        /* checks failed in the current test */
static const char *test_name;
static unsigned nn;            /* nodes */

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            test_failed++;                                                                    \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                       \
            printf(__VA_ARGS__);                                                              \
            printf("\n");                                                                     \
        }                                                                                     \
    } while (0)

static void begin(const char *name) {
    test_name = name;
    test_failed = 0;
}

static void end(void) {
    if (test_failed) failed++;
    else passed++;
    printf("%s %s\n", test_failed ? "FAILED" : "PASSED", test_name);
}

static void table(const char *what, const size_t *c) {
    printf("  %-44s", what);
    for (unsigned i = 0; i < nn; i++) printf(" node%u=%-7zu", i, c[i]);
    printf("\n");
}

static long where(const void *a, size_t len, size_t *c) {
    return dsmpool_pages_per_node(a, len, c, DSMPOOL_MAX_NODES);
}

static dsmpool *mkpool(size_t size, dsmpool_huge huge) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = size;
    cfg.huge_pages = huge;
    dsmpool *p;
    int r = dsmpool_create(&cfg, &p);
    if (r) {
        printf("FAIL create: %s\n", dsmpool_last_error());
        test_failed++;
        return NULL;
    }
    return p;
}

/* Pages of [a, a+len) (of size pg) whose node is not the one after the
 * previous page's in the order of the node ids; -errno on failure. */
static long pages_round_robin(const char *a, size_t len, size_t pg) {
    const dp_topo *t = dp_numa_topo();
    enum { BATCH = 512 };
    void *pages[BATCH];
    int status[BATCH];
    long bad = 0;
    int prev = -1; /* index in the topology of the previous page's node */
    for (size_t o = 0; o < len;) {
        unsigned n = 0;
        for (; n < BATCH && o < len; n++, o += pg) pages[n] = (void *)(a + o);
        if (syscall(SYS_move_pages, 0, (unsigned long)n, pages, NULL, status, 0) != 0) return -errno;
        for (unsigned i = 0; i < n; i++) {
            int k = status[i] >= 0 ? dp_numa_index((uint32_t)status[i]) : -1;
            if (k < 0 || (prev >= 0 && (unsigned)k != (prev + 1u) % t->nnodes)) bad++;
            prev = k;
        }
    }
    return bad;
}

static void test_subpools(dsmpool *p, const char *label) {
    printf("%s: sub-pools\n", label);
    CHECK(p->nsub == nn + 1, "%u nodes: %u node sub-pools + 1 interleaved, got %u", nn, nn, p->nsub);
    for (uint32_t s = 0; s < p->nsub; s++) {
        char *a = p->base + p->geo.sub[s].data_off;
        size_t len = p->geo.sub[s].geom.frames * DP_FRAME_SIZE, c[DSMPOOL_MAX_NODES];
        long n = where(a, len, c);
        char what[64];
        uint32_t node = p->geo.sub[s].node;
        if (node != DP_NODE_INTERLEAVE) {
            snprintf(what, sizeof what, "sub-pool %u (node %u, %zu MiB)", s, node, len >> 20);
            table(what, c);
            CHECK(n > 0 && (size_t)n == c[node] && (size_t)n == len / 4096,
                  "sub-pool %u: %zu of %zu pages on node %u", s, c[node], len / 4096, node);
        } else {
            snprintf(what, sizeof what, "interleaved sub-pool (%zu MiB)", len >> 20);
            table(what, c);
            size_t pg = p->geo.page_size, per = len / pg / nn;
            for (unsigned i = 0; i < nn; i++)
                CHECK(c[i] >= per * (pg / 4096), "interleaved: node %u has %zu pages, want %zu", i,
                      c[i], per * (pg / 4096));
            /* MPOL_INTERLEAVE: page k+1 (4 KiB, or a whole huge page) on the
             * node after page k's, from a start the kernel picks */
            long bad = pages_round_robin(a, len, pg);
            CHECK(bad == 0, "interleaved pages round-robin: %ld of %zu pages of %zu kB out of turn", bad,
                  len / pg, pg >> 10);
        }
    }
}

static void pin(unsigned node) {
    if (dp_numa_run_on_node(node) != 0) printf("  (could not pin to node %u)\n", node);
    sched_yield();
}

static void test_local_and_on_node(dsmpool *p) {
    printf("placement of 8 MiB segments\n");
    for (unsigned k = 0; k < nn; k++) {
        pin(k);
        dsmpool_seg *s;
        size_t c[DSMPOOL_MAX_NODES];
        char what[80];
        CHECK(dsmpool_seg_create(p, 8 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s) == 0, "create: %s", dsmpool_last_error());
        where(dsmpool_seg_address(s), 8 * MIB, c);
        snprintf(what, sizeof what, "local, thread on node %u", k);
        table(what, c);
        CHECK(c[k] == 2048, "local from node %u: %zu of 2048 pages there", k, c[k]);
        dsmpool_seg_detach(s);
        unsigned other = (k + 1) % nn;
        CHECK(dsmpool_seg_create(p, 8 * MIB, DSMPOOL_SEG_ON_NODE(other) | DSMPOOL_SEG_NO_FALLBACK, &s) == 0,
              "create on node: %s", dsmpool_last_error());
        where(dsmpool_seg_address(s), 8 * MIB, c);
        snprintf(what, sizeof what, "ON_NODE(%u), thread on node %u", other, k);
        table(what, c);
        CHECK(c[other] == 2048, "on node %u: %zu of 2048", other, c[other]);
        dsmpool_seg_detach(s);
    }
    dsmpool_seg *s;
    size_t c[DSMPOOL_MAX_NODES], size = (size_t)nn * 4 * 2 * MIB;
    CHECK(dsmpool_seg_create(p, size, DSMPOOL_SEG_INTERLEAVE | DSMPOOL_SEG_NO_FALLBACK, &s) == 0,
          "interleaved: %s", dsmpool_last_error());
    where(dsmpool_seg_address(s), size, c);
    table("INTERLEAVE, 8 MiB per node", c);
    for (unsigned i = 0; i < nn; i++)
        CHECK(c[i] == 4 * 512, "interleaved segment: node %u has %zu pages, want 2048", i, c[i]);
    dsmpool_seg_detach(s);
}

static void test_area(dsmpool *p) {
    printf("area: 32 KiB chunks and an interleaved bucket array\n");
    dsmpool_area *a;
    CHECK(dsmpool_area_create(p, DSMPOOL_AREA_NO_FALLBACK, &a) == 0, "area: %s", dsmpool_last_error());
    for (unsigned k = 0; k < nn; k++) {
        pin(k);
        size_t c[DSMPOOL_MAX_NODES] = {0}, tot[DSMPOOL_MAX_NODES] = {0};
        dsmpool_ptr v[64];
        for (int i = 0; i < 64; i++) {
            CHECK(dsmpool_area_alloc(a, 32 << 10, 0, &v[i]) == 0, "alloc: %s", dsmpool_last_error());
            where(dsmpool_area_addr(a, v[i]), 32 << 10, c);
            for (unsigned j = 0; j < nn; j++) tot[j] += c[j];
        }
        char what[64];
        snprintf(what, sizeof what, "64 chunks, thread on node %u", k);
        table(what, tot);
        CHECK(tot[k] == 64 * 8, "chunks from node %u: %zu of 512 pages there", k, tot[k]);
        dsmpool_area_flush(a);
        for (int i = 0; i < 64; i++) dsmpool_area_free(a, v[i]);
        dsmpool_area_flush(a);
    }
    dsmpool_ptr b;
    size_t c[DSMPOOL_MAX_NODES], size = (size_t)nn * 4 * 2 * MIB;
    CHECK(dsmpool_area_alloc(a, size, DSMPOOL_ALLOC_INTERLEAVE, &b) == 0, "bucket array: %s", dsmpool_last_error());
    where(dsmpool_area_addr(a, b), size, c);
    table("bucket array, ALLOC_INTERLEAVE", c);
    for (unsigned i = 0; i < nn; i++) CHECK(c[i] == 4 * 512, "bucket array: node %u has %zu", i, c[i]);
    dsmpool_area_destroy(a);
}

/* Fill node 0's sub-pool from a thread on node 0; the next allocation must
 * come from node 0's nearest neighbour by distance. */
static void test_exhaustion(dsmpool *p) {
    printf("exhaustion of node 0\n");
    const dp_topo *t = dp_numa_topo();
    unsigned nearest = 1;
    for (unsigned i = 1; i < nn; i++)
        if (t->dist[0][i] < t->dist[0][nearest]) nearest = i;
    printf("  distances from node 0:");
    for (unsigned i = 0; i < nn; i++) printf(" %d", t->dist[0][i]);
    printf("  -> nearest is node %u\n", nearest);
    pin(0);
    dsmpool_seg *held[4096];
    int n = 0;
    while (n < 4096 && dsmpool_seg_create(p, 2 * MIB, DSMPOOL_SEG_LOCAL_ONLY | DSMPOOL_SEG_NO_FALLBACK, &held[n]) == 0)
        n++;
    size_t fill = (size_t)n * 2;
    printf("  node 0 full after %d segments of 2 MiB (%zu MiB)\n", n, fill);
    dsmpool_seg *s;
    CHECK(dsmpool_seg_create(p, 2 * MIB, DSMPOOL_SEG_LOCAL_ONLY | DSMPOOL_SEG_NO_FALLBACK, &s) == -ENOMEM,
          "LOCAL_ONLY must not cross");
    dsmpool_stats st0, st1;
    dsmpool_get_stats(p, &st0);
    CHECK(dsmpool_seg_create(p, 2 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s) == 0, "fallback: %s", dsmpool_last_error());
    size_t c[DSMPOOL_MAX_NODES];
    where(dsmpool_seg_address(s), 2 * MIB, c);
    table("after exhaustion, thread on node 0", c);
    CHECK(c[nearest] == 512, "fell back to node %u (nearest): %zu of 512 pages there", nearest, c[nearest]);
    dsmpool_get_stats(p, &st1);
    CHECK(st1.subpool[0].fallbacks == st0.subpool[0].fallbacks + 1, "fallbacks counted: %llu -> %llu",
          (unsigned long long)st0.subpool[0].fallbacks, (unsigned long long)st1.subpool[0].fallbacks);
    dsmpool_seg_detach(s);
    while (n--) dsmpool_seg_detach(held[n]);
}

/* VMAs of this process that overlap [a, a+len), from /proc/self/maps. */
static long vmas_in(const char *a, size_t len) {
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f) return -errno;
    uintptr_t lo, hi, from = (uintptr_t)a, to = from + len;
    long n = 0;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 && lo < to && hi > from) n++;
    fclose(f);
    return n;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* A pool as large as the example (256 GiB of 4 KiB pages, a quarter
 * of it interleaved: 32768 granules of 2 MiB), untouched: the guest runs
 * with vm.overcommit_memory = 1, the pool with prefault = false and a small
 * segment table, so only its tables are ever backed. Its mapping must be
 * O(nodes) VMAs -- one per sub-pool, plus the tables and the tail -- in the
 * creator and in a forked child, whatever its size; the fork is timed. */
static void test_vma_count(void) {
    size_t size = 256 * GIB;
    printf("VMAs of a %zu GiB pool (4 KiB pages, not prefaulted)\n", size / GIB);
    FILE *oc = fopen("/proc/sys/vm/overcommit_memory", "we");
    CHECK(oc && fputs("1", oc) >= 0 && fclose(oc) == 0, "cannot set vm.overcommit_memory");
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = size;
    cfg.prefault = false;
    cfg.max_segments = 4096;
    dsmpool *p;
    double t0 = now_ms();
    int r = dsmpool_create(&cfg, &p);
    double t1 = now_ms();
    CHECK(r == 0, "create: %s", dsmpool_last_error());
    if (r) return;
    long want = (long)p->nsub + 2, mine = vmas_in(p->base, p->size);
    size_t il = 0;
    for (uint32_t s = 0; s < p->nsub; s++)
        if (p->geo.sub[s].node == DP_NODE_INTERLEAVE) il = p->geo.sub[s].geom.frames * DP_FRAME_SIZE;
    printf("  %u sub-pools, interleaved %zu GiB (%zu granules of 2 MiB); created in %.0f ms\n", p->nsub,
           il / GIB, il / (2 * MIB), t1 - t0);
    printf("  creator: %ld VMAs over the pool (at most %ld)\n", mine, want);
    CHECK(mine > 0 && mine <= want, "creator: %ld VMAs over the pool, want at most %ld", mine, want);
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    t0 = now_ms();
    pid_t pid = fork();
    if (pid == 0) {
        long n = vmas_in(p->base, p->size);
        ssize_t w = write(fds[1], &n, sizeof n);
        _exit(w == (ssize_t)sizeof n ? 0 : 1);
    }
    t1 = now_ms();
    long child = -1;
    CHECK(pid > 0, "fork: %s", strerror(errno));
    if (pid > 0) {
        CHECK(read(fds[0], &child, sizeof child) == (ssize_t)sizeof child, "no count from the child");
        int st;
        waitpid(pid, &st, 0);
    }
    double t2 = now_ms();
    close(fds[0]);
    close(fds[1]);
    printf("  child: %ld VMAs over the pool; fork took %.1f ms, fork to child's exit %.1f ms\n", child,
           t1 - t0, t2 - t0);
    CHECK(child > 0 && child <= want, "child: %ld VMAs over the pool, want at most %ld", child, want);
    dsmpool_destroy(p);
}

static void run_all(void) {
    nn = dp_numa_topo()->nnodes;
    printf("NUMA VM: %u nodes, %ld CPUs\n", nn, sysconf(_SC_NPROCESSORS_ONLN));
    begin("topology: several nodes");
    CHECK(nn >= 2, "the VM should have several nodes (got %u)", nn);
    end();
    if (nn < 2) return;
    begin("4 KiB pool: each sub-pool on its node, interleaved pages round-robin");
    dsmpool *p = mkpool((size_t)nn * 96 * MIB, DSMPOOL_HUGE_OFF);
    if (p) test_subpools(p, "4 KiB pages");
    end();
    if (p) {
        begin("local and ON_NODE segments land on their node, interleaved ones spread");
        test_local_and_on_node(p);
        end();
        begin("area chunks come from the thread's node; bucket array interleaved");
        test_area(p);
        end();
        begin("exhausted node falls back to the nearest by distance");
        test_exhaustion(p);
        end();
        begin("dsmpool_check after all of it");
        CHECK(dsmpool_check(p) == 0, "check: %s", dsmpool_last_error());
        end();
        dsmpool_destroy(p);
    }
    begin("2 MiB hugetlb pool: sub-pools on their nodes");
    dsmpool *h = mkpool((size_t)nn * 24 * MIB, DSMPOOL_HUGE_ON);
    if (h) {
        CHECK(h->geo.page_size == 2 * MIB, "hugetlb pool");
        test_subpools(h, "2 MiB hugetlb pages");
        dsmpool_destroy(h);
    }
    end();
    begin("a 256 GiB pool maps as O(nodes) VMAs, in the creator and a forked child");
    test_vma_count();
    end();
}

int main(int argc, char **argv) {
    (void)argc;
    if (getpid() == 1 && !getenv("VMTEST_STAGE2")) {
        mount("proc", "/proc", "proc", 0, NULL);
        mount("sysfs", "/sys", "sysfs", 0, NULL);
        setenv("VMTEST_STAGE2", "1", 1);
        execv(argv[0], argv); /* again, now that libnuma can read /sys */
        printf("FAIL exec: %s\n", strerror(errno));
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    run_all();
    printf("RESULT %d passed, %d failed\n", passed, failed);
    fflush(stdout);
    tcdrain(1);
    if (getpid() == 1) {
        if (ioperm(0xf4, 1, 1) == 0) outb(failed ? 1 : 0, 0xf4); /* qemu exits with (v << 1) | 1 */
        reboot(RB_POWER_OFF);
    }
    return failed ? 1 : 0;
}
