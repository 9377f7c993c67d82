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
 *   - an elastic pool (4 KiB and 2 MiB hugetlb pages) keeps every page on
 *     its sub-pool's node after dsmpool_trim and each kind of refill
 *     (dsmpool_prefault_free, allocations that meet released granules,
 *     dsmpool_maintain's warm reserve), run from threads on other nodes,
 *     and in a process that attached it by fd; what a trim releases leaves
 *     the node (its shmem or hugetlb pages in use, from nodeN/meminfo);
 *   - a 256 GiB pool's mapping is O(nodes) VMAs in its creator and in a
 *     forked child (the fork is timed).
 * Prints a pages-per-node table per policy, each test's time, "RESULT n
 * passed, m failed", and exits through qemu's isa-debug-exit with 0 when all passed.
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

static double now_ms(void);
static double test_t0;

static void begin(const char *name) {
    test_name = name;
    test_failed = 0;
    test_t0 = now_ms();
}

static void end(void) {
    if (test_failed) failed++;
    else passed++;
    printf("%s %s (%.1f s)\n", test_failed ? "FAILED" : "PASSED", test_name, (now_ms() - test_t0) / 1e3);
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

/* ---- placement kept after release and refill (issue 27) ------------------ */

/* What a node holds for pools of this kind: its shmem pages (4 KiB pools)
 * or its hugetlb pages in use (2 MiB pools), in bytes, from
 * /sys/devices/system/node/nodeN/meminfo; -1 if unreadable. The per-CPU
 * counter deltas are folded first (vm.stat_refresh), so shmem is exact. */
static long long node_held(uint32_t node, bool huge) {
    char path[96], line[256];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%u/meminfo", node);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    long long shmem = -1, htot = -1, hfree = -1, v;
    while (fgets(line, sizeof line, f)) {
        char *k = strchr(line, ':');
        if (!k || sscanf(k + 1, "%lld", &v) != 1) continue;
        if (strstr(line, " Shmem:")) shmem = v * 1024;
        else if (strstr(line, " HugePages_Total:")) htot = v;
        else if (strstr(line, " HugePages_Free:")) hfree = v;
    }
    fclose(f);
    if (!huge) return shmem;
    return htot < 0 || hfree < 0 ? -1 : (htot - hfree) * (long long)(2 * MIB);
}

static void stat_refresh(void) {
    FILE *f = fopen("/proc/sys/vm/stat_refresh", "we");
    if (f) {
        fputs("1", f);
        fclose(f);
    }
}

typedef struct snap {
    size_t on[DSMPOOL_MAX_NODES];       /* present 4 KiB pages of the pool's data per node */
    long long held[DSMPOOL_MAX_NODES];  /* node_held() */
    size_t present, absent;
} snap;

/* Where every 4 KiB page of every sub-pool's data is (move_pages, nodes
 * NULL: a page not present in this process's page tables is -ENOENT), with
 * checks: each present page on its sub-pool's node -- or, in the
 * interleaved sub-pool, node (i + c) mod n for page i of the sub-pool's
 * page size, one c for the whole sub-pool, gaps (released granules) or
 * not -- and a sub-pool's present pages exactly its granules that the
 * residency table says are resident. */
static void placed(dsmpool *p, const char *label, bool huge, snap *out) {
    memset(out, 0, sizeof *out);
    const dp_topo *t = dp_numa_topo();
    size_t pg = p->geo.page_size;
    for (uint32_t s = 0; s < p->nsub; s++) {
        const char *a = p->base + p->geo.sub[s].data_off;
        size_t len = p->geo.sub[s].geom.frames * DP_FRAME_SIZE, present = 0, absent = 0, wrong = 0, odd = 0;
        uint32_t node = p->geo.sub[s].node;
        long c = -1; /* interleaved: page i's node index is (i + c) % nn */
        enum { BATCH = 1024 };
        void *pages[BATCH];
        int status[BATCH];
        for (size_t o = 0; o < len;) {
            unsigned n = 0;
            size_t o0 = o;
            for (; n < BATCH && o < len; n++, o += 4096) pages[n] = (void *)(a + o);
            if (syscall(SYS_move_pages, 0, (unsigned long)n, pages, NULL, status, 0) != 0) {
                CHECK(0, "%s: move_pages: %s", label, strerror(errno));
                return;
            }
            for (unsigned i = 0; i < n; i++) {
                if (status[i] == -ENOENT) {
                    absent++;
                    continue;
                }
                if (status[i] < 0 || status[i] >= DSMPOOL_MAX_NODES) {
                    odd++;
                    continue;
                }
                present++;
                out->on[status[i]]++;
                if (node != DP_NODE_INTERLEAVE) {
                    wrong += (uint32_t)status[i] != node;
                    continue;
                }
                long k = dp_numa_index((uint32_t)status[i]), idx = (long)((o0 + (size_t)i * 4096) / pg);
                if (k < 0) wrong++;
                else if (c < 0) c = ((k - idx) % (long)t->nnodes + (long)t->nnodes) % (long)t->nnodes;
                else wrong += (idx + c) % (long)t->nnodes != k;
            }
        }
        size_t resident = (size_t)(len / (2 * MIB) - dp_res_released_in(p, s)) * (2 * MIB / 4096);
        CHECK(wrong == 0 && odd == 0, "%s: sub-pool %u (%s%u): %zu pages on the wrong node, %zu unreadable", label,
              s, node == DP_NODE_INTERLEAVE ? "interleaved over " : "node ", node == DP_NODE_INTERLEAVE ? nn : node,
              wrong, odd);
        CHECK(present == resident, "%s: sub-pool %u: %zu pages present, the residency table says %zu", label, s,
              present, resident);
        out->present += present;
        out->absent += absent;
    }
    stat_refresh();
    for (unsigned i = 0; i < nn; i++) out->held[i] = node_held(t->node[i], huge);
    printf("  %-20s present", label);
    for (unsigned i = 0; i < nn; i++) printf(" node%u=%-6zu", i, out->on[i]);
    printf(" absent=%-6zu held MiB", out->absent);
    for (unsigned i = 0; i < nn; i++) printf(" %lld", out->held[i] >> 20);
    printf("\n");
}

/* What left (or came back to) each node between two snapshots is what the
 * page tables say left (came back): the node's shmem or hugetlb pages in
 * use move by the same bytes as the pool's present pages there, so a
 * release really gives the memory back and a refill really takes it on
 * that node. 4 KiB: up to 256 KiB of slack (the kernel's own shmem). */
static void moved(const snap *a, const snap *b, const char *what, bool huge) {
    long long slack = huge ? 0 : 256 << 10;
    for (unsigned i = 0; i < nn; i++) {
        long long pages = ((long long)b->on[i] - (long long)a->on[i]) * 4096, held = b->held[i] - a->held[i];
        CHECK(a->held[i] >= 0 && b->held[i] >= 0 && llabs(held - pages) <= slack,
              "%s: node %u's %s moved by %lld KiB, the pool's present pages there by %lld KiB", what, i,
              huge ? "hugetlb pages in use" : "shmem", held >> 10, pages >> 10);
    }
}

static size_t data_bytes(const dsmpool *p) {
    size_t n = 0;
    for (uint32_t s = 0; s < p->nsub; s++) n += p->geo.sub[s].geom.frames * DP_FRAME_SIZE;
    return n;
}

/* Allocations that meet released granules, each from a thread on another
 * node than the one it asks for: for each node k, a 4 MiB segment on k from
 * a thread on node k+1; and an interleaved one of 2 MiB per node. Their
 * pages (made resident on demand by that thread) are where they asked. */
static void refill_on_demand(dsmpool *p, dsmpool_seg **segs, const char *who) {
    dsmpool_stats s0, s1;
    dsmpool_get_stats(p, &s0);
    for (unsigned k = 0; k <= nn; k++) {
        segs[k] = NULL;
        bool il = k == nn;
        size_t size = il ? nn * 2 * MIB : 4 * MIB, c[DSMPOOL_MAX_NODES];
        pin(il ? 0 : (k + 1) % nn);
        int r = dsmpool_seg_create(p, size, (il ? DSMPOOL_SEG_INTERLEAVE : DSMPOOL_SEG_ON_NODE(k)) |
                                                DSMPOOL_SEG_NO_FALLBACK, &segs[k]);
        CHECK(r == 0, "%s: segment %u: %s", who, k, dsmpool_last_error());
        if (r) continue;
        memset(dsmpool_seg_address(segs[k]), 0x5a, size);
        where(dsmpool_seg_address(segs[k]), size, c);
        for (unsigned i = 0; i < nn; i++)
            CHECK(il ? c[i] == size / 4096 / nn : c[i] == (i == k ? size / 4096 : 0),
                  "%s: %s segment: node %u has %zu of its pages", who, il ? "interleaved" : "ON_NODE", i, c[i]);
    }
    dsmpool_get_stats(p, &s1);
    CHECK(s1.refills_on_demand >= s0.refills_on_demand + nn + 1, "%s: %llu refills on demand, want %u more",
          who, (unsigned long long)(s1.refills_on_demand - s0.refills_on_demand), nn + 1);
}

/* The elastic pool's whole cycle on one pool (ANON): made resident by
 * dsmpool_prefault_free, released by dsmpool_trim, made resident again by
 * dsmpool_prefault_free, by allocations (on demand) and by dsmpool_maintain's
 * warm reserve, each refill run from a thread on a node other than most
 * sub-pools': every page stays on its sub-pool's node, and what a trim
 * gives back leaves the nodes. */
static void test_refill(dsmpool_huge huge, size_t per_node) {
    bool hp = huge != DSMPOOL_HUGE_OFF;
    printf("elastic ANON pool of %s pages: refills from threads on other nodes\n", hp ? "2 MiB hugetlb" : "4 KiB");
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = nn * per_node;
    cfg.huge_pages = huge;
    cfg.resident_min = nn * 4 * MIB;
    cfg.warm_bytes = nn * 4 * MIB;
    cfg.idle_release_ms = 600000; /* (no idle release in this test's time) */
    dsmpool *p;
    if (dsmpool_create(&cfg, &p) != 0) {
        CHECK(0, "create: %s", dsmpool_last_error());
        return;
    }
    CHECK(p->geo.elastic && p->geo.page_size == (hp ? 2 * MIB : 4096), "an elastic pool of %s pages",
          hp ? "2 MiB" : "4 KiB");
    size_t data = data_bytes(p), got = 0, rel = 0;
    snap a, b;
    placed(p, "created", hp, &a);
    CHECK(a.present > 0 && a.present * 4096 < data, "created: %zu of %zu bytes resident", a.present * 4096, data);
    pin(nn - 1); /* refills from a thread on the last node: placement is the policy's */
    CHECK(dsmpool_prefault_free(p, SIZE_MAX, &got) == 0, "prefault_free: %s", dsmpool_last_error());
    placed(p, "prefault_free", hp, &b);
    CHECK(b.present * 4096 == data && got == data - a.present * 4096, "prefault_free: %zu made resident", got);
    moved(&a, &b, "prefault_free", hp);
    CHECK(dsmpool_trim(p, 0, &rel) == 0, "trim: %s", dsmpool_last_error());
    placed(p, "trim", hp, &a);
    CHECK(rel == data && a.present == 0, "trim: %zu of %zu bytes released, %zu pages left", rel, data, a.present);
    moved(&b, &a, "trim", hp);
    CHECK(dsmpool_prefault_free(p, SIZE_MAX, &got) == 0, "prefault_free: %s", dsmpool_last_error());
    placed(p, "prefault_free again", hp, &b);
    CHECK(b.present * 4096 == data && got == data, "prefault_free again: %zu made resident", got);
    moved(&a, &b, "prefault_free again", hp);
    CHECK(dsmpool_trim(p, 0, &rel) == 0 && rel == data, "trim again: %zu released: %s", rel,
          dsmpool_last_error());
    placed(p, "trim again", hp, &a);
    dsmpool_seg *segs[DSMPOOL_MAX_NODES + 1];
    refill_on_demand(p, segs, "on demand");
    placed(p, "refill on demand", hp, &b);
    moved(&a, &b, "refill on demand", hp);
    for (unsigned k = 0; k <= nn; k++)
        if (segs[k]) dsmpool_seg_detach(segs[k]);
    CHECK(dsmpool_trim(p, 0, &rel) == 0, "trim after the segments: %s", dsmpool_last_error());
    placed(p, "trim once more", hp, &a);
    CHECK(a.present == 0, "trim once more: %zu pages left", a.present);
    dsmpool_stats s0, s1;
    dsmpool_get_stats(p, &s0);
    pin(nn - 1);
    unsigned next = 0;
    for (int i = 0; i < 16 && next == 0; i++)
        CHECK(dsmpool_maintain(p, &next) == 0, "maintain: %s", dsmpool_last_error());
    dsmpool_get_stats(p, &s1);
    placed(p, "maintain (warm)", hp, &b);
    CHECK(s1.refills_ahead > s0.refills_ahead && s1.warm_free_bytes >= cfg.warm_bytes && b.present > 0 &&
              b.present * 4096 < data,
          "maintain: %llu refills, %zu warm bytes (want %zu), %zu pages present",
          (unsigned long long)(s1.refills_ahead - s0.refills_ahead), s1.warm_free_bytes, cfg.warm_bytes,
          b.present);
    moved(&a, &b, "maintain", hp);
    CHECK(dsmpool_check(p) == 0, "check: %s", dsmpool_last_error());
    dsmpool_destroy(p);
}

/* The same refills in a process that attached (dsmpool_attach_fd, after
 * exec: nothing inherited) a MEMFD pool that the creator had released
 * whole: its allocations and its dsmpool_prefault_free place every page on
 * its sub-pool's node, as in the creator. A shmem object keeps the
 * creator's mbind as the object's own policy; a hugetlb mapping has no
 * shared policy, only the mapping's own. */
static int attach_child(int fd) {
    nn = dp_numa_topo()->nnodes;
    dsmpool *p;
    if (dsmpool_attach_fd(fd, &p) != 0) {
        printf("FAIL attach_fd: %s\n", dsmpool_last_error());
        return 1;
    }
    close(fd);
    bool hp = p->geo.page_size > 4096;
    size_t data = data_bytes(p), got = 0;
    snap a, b;
    placed(p, "attacher: attached", hp, &a);
    dsmpool_seg *segs[DSMPOOL_MAX_NODES + 1];
    refill_on_demand(p, segs, "attacher on demand");
    placed(p, "attacher: on demand", hp, &b);
    moved(&a, &b, "attacher: on demand", hp);
    pin(nn - 1);
    CHECK(dsmpool_prefault_free(p, SIZE_MAX, &got) == 0, "attacher: prefault_free: %s", dsmpool_last_error());
    placed(p, "attacher: prefault", hp, &a);
    CHECK(a.present * 4096 == data, "attacher: prefault_free: %zu of %zu bytes resident", a.present * 4096, data);
    moved(&b, &a, "attacher: prefault_free", hp);
    for (unsigned k = 0; k <= nn; k++)
        if (segs[k]) dsmpool_seg_detach(segs[k]);
    dsmpool_detach(p);
    return test_failed ? 1 : 0;
}

static void test_refill_attached(dsmpool_huge huge, size_t per_node) {
    printf("elastic MEMFD pool of %s pages, released whole; an attacher (after exec) refills it\n",
           huge != DSMPOOL_HUGE_OFF ? "2 MiB hugetlb" : "4 KiB");
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = nn * per_node;
    cfg.backing = DSMPOOL_BACKING_MEMFD;
    cfg.huge_pages = huge;
    cfg.warm_bytes = nn * 4 * MIB; /* elastic; nothing resident but the tables */
    dsmpool *p;
    if (dsmpool_create(&cfg, &p) != 0) {
        CHECK(0, "create: %s", dsmpool_last_error());
        return;
    }
    size_t rel = 0;
    CHECK(dsmpool_trim(p, 0, &rel) == 0, "trim: %s", dsmpool_last_error());
    snap a;
    placed(p, "creator: trimmed", huge != DSMPOOL_HUGE_OFF, &a);
    CHECK(a.present == 0, "trimmed: %zu pages left", a.present);
    int fd = dup(dsmpool_fd(p)); /* without FD_CLOEXEC, for the exec */
    pid_t pid = fork();
    if (pid == 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", fd);
        setenv("VMTEST_ATTACH_FD", v, 1);
        execl("/proc/self/exe", "vmtest", (char *)NULL);
        _exit(127);
    }
    close(fd);
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "the attacher failed (status %d)", st);
    CHECK(dsmpool_check(p) == 0, "check: %s", dsmpool_last_error());
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
    begin("4 KiB elastic pool: pages on their nodes after trim and each kind of refill; trim frees them");
    test_refill(DSMPOOL_HUGE_OFF, 16 * MIB);
    end();
    begin("2 MiB hugetlb elastic pool: pages on their nodes after trim and each kind of refill");
    test_refill(DSMPOOL_HUGE_ON, 24 * MIB);
    end();
    begin("4 KiB MEMFD pool: an attacher's refills land on the sub-pools' nodes");
    test_refill_attached(DSMPOOL_HUGE_OFF, 16 * MIB);
    end();
    begin("2 MiB hugetlb MEMFD pool: an attacher's refills land on the sub-pools' nodes");
    test_refill_attached(DSMPOOL_HUGE_ON, 24 * MIB);
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
    const char *afd = getenv("VMTEST_ATTACH_FD");
    if (afd) return attach_child(atoi(afd)); /* test_refill_attached's attacher */
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
