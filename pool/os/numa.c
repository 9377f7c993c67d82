/*
 * numa.c -- topology, the current node, binding and verification.
 *
 * Rules
 *   [topology once] The topology is read once per process (pthread_once): with libnuma,
 *      the configured nodes that have memory, their sizes, CPUs and SLIT
 *      distances; without it, or where numa_available() says no, one node 0.
 *      Once probed, its pointer is published (release; read with acquire),
 *      so a CPU read on the hot path costs a load, not a pthread_once call.
 *   [current node] The current node is the node of the current CPU, from a table filled
 *      in [topology once]. The CPU is read once per question (dp_numa_cpu_node gives
 *      both): from the thread's rseq area where glibc registered one and
 *      says where (__rseq_offset, __rseq_size, glibc >= 2.35; the kernel
 *      keeps cpu_id current on every return to user space), else from
 *      sched_getcpu(), which glibc answers from rseq or the vDSO. The hot
 *      path makes no system call and no library call. A CPU read is a hint
 *      that may be stale by the next instruction (the thread can migrate);
 *      callers use it only to choose where to look first.
 *   [bind before touch] Binding is mbind on ranges nobody has touched yet, so the first fault
 *      places each page: MPOL_BIND of a range to one node, or MPOL_INTERLEAVE
 *      of a range over a set of nodes, which the kernel applies page by page
 *      (a base page, or a whole huge page of a hugetlb or THP mapping; which
 *      node a page gets follows from its offset, so it is the kernel's to
 *      say). One call per range: every distinct policy is its own VMA, so
 *      the caller keeps the count of ranges, not their size, small.
 *      Verification is move_pages(2) with a NULL node list, which only
 *      reports where pages are.
 */
#include "dp_base.h"
#include "dp_numa.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef HAVE_LIBNUMA
#include <numa.h>
#include <numaif.h>
#endif
#ifdef HAVE_RSEQ_CPU
#include <sys/rseq.h>
#endif

static dp_topo topo;
static pthread_once_t topo_once = PTHREAD_ONCE_INIT;

static void topo_single(void) {
    memset(&topo, 0, sizeof topo);
    topo.nnodes = 1;
    topo.node[0] = 0;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    topo.mem[0] = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
    topo.dist[0][0] = 10;
    for (unsigned c = 0; c < DP_NUMA_CPUS; c++) topo.cpu_node[c] = 0;
}

static void topo_probe(void) {
    int saved = errno;
    topo_single();
#ifdef HAVE_LIBNUMA
    if (numa_available() < 0) {
        errno = saved;
        return;
    }
    int maxnode = numa_max_node();
    unsigned n = 0;
    for (int id = 0; id <= maxnode && n < DP_NUMA_MAX; id++) {
        if (!numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned)id)) continue;
        long long freeb;
        long long size = numa_node_size64(id, &freeb);
        if (size <= 0) continue; /* a node without memory gets no sub-pool */
        topo.node[n] = (uint32_t)id;
        topo.mem[n] = (uint64_t)size;
        n++;
    }
    if (n == 0) {
        errno = saved;
        return;
    }
    topo.nnodes = n;
    topo.real = true;
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < n; j++) {
            int d = numa_distance((int)topo.node[i], (int)topo.node[j]);
            topo.dist[i][j] = d > 0 ? d : (i == j ? 10 : 20);
        }
    for (unsigned c = 0; c < DP_NUMA_CPUS; c++) topo.cpu_node[c] = -1;
    int ncpu = numa_num_configured_cpus();
    for (int c = 0; c < ncpu && c < DP_NUMA_CPUS; c++) {
        int nd = numa_node_of_cpu(c);
        topo.cpu_node[c] = (int16_t)(nd >= 0 ? nd : -1);
    }
#endif
    errno = saved;
}

/* The topology once probed: every CPU read asks for it, so after the first
 * probe the answer is one load, not a call into pthread_once. */
static _Atomic(const dp_topo *) topo_pub;

const dp_topo *dp_numa_topo(void) {
    /* acquire: pairs with dp_numa_topo's release below, so the probed table is seen whole */
    const dp_topo *t = dp_load_acquire_any(&topo_pub);
    if (dp_likely(t != NULL)) return t;
    pthread_once(&topo_once, topo_probe);
    /* release: publishes the table pthread_once finished (any thread may
     * store it; all store the same pointer) */
    dp_store_release_any(&topo_pub, &topo);
    return &topo;
}

int dp_numa_index(uint32_t node) {
    const dp_topo *t = dp_numa_topo();
    for (unsigned i = 0; i < t->nnodes; i++)
        if (t->node[i] == node) return (int)i;
    return -1;
}

/* [current node]: the CPU from the thread's rseq area, or -1 where there is none
 * (glibc without the exports, registration off or refused: __rseq_size 0;
 * cpu_id negative before registration completed or when it failed). */
static inline int rseq_cpu(void) {
#ifdef HAVE_RSEQ_CPU
    if (__rseq_size == 0) return -1;
    const struct rseq *r =
        (const struct rseq *)((const char *)__builtin_thread_pointer() + __rseq_offset);
    /* volatile: the kernel rewrites it between any two instructions of ours;
     * one plain read of one aligned word, no ordering needed for a hint */
    return (int)*(const volatile int32_t *)&r->cpu_id;
#else
    return -1;
#endif
}

static inline unsigned cpu_now(void) {
    int c = rseq_cpu();
    if (c < 0) c = sched_getcpu();
    return c < 0 ? 0u : (unsigned)c;
}

unsigned dp_numa_cpu(void) { return cpu_now(); }

unsigned dp_numa_cpu_node(uint32_t *node) {
    const dp_topo *t = dp_numa_topo();
    unsigned c = cpu_now();
    int n = c < DP_NUMA_CPUS ? t->cpu_node[c] : -1;
    *node = n < 0 ? t->node[0] : (uint32_t)n;
    return c;
}

uint32_t dp_numa_current_node(void) {
    uint32_t n;
    (void)dp_numa_cpu_node(&n);
    return n;
}

/* mbind(mode) of a range over nodes[0..n): one call, one policy. */
static int numa_mbind(void *addr, size_t len, int mode, const uint32_t *nodes, unsigned n) {
#ifdef HAVE_LIBNUMA
    if (!dp_numa_topo()->real) return 0;
    unsigned long mask[1024 / (8 * sizeof(unsigned long))];
    memset(mask, 0, sizeof mask);
    if (n == 0) return -EINVAL;
    for (unsigned i = 0; i < n; i++) {
        if (nodes[i] >= 8 * sizeof mask) return -EINVAL;
        mask[nodes[i] / (8 * sizeof(unsigned long))] |= 1ul << (nodes[i] % (8 * sizeof(unsigned long)));
    }
    int saved = errno;
    long r = mbind(addr, len, mode, mask, 8 * sizeof mask, 0);
    int e = r == 0 ? 0 : -errno;
    errno = saved;
    return e;
#else
    (void)addr;
    (void)len;
    (void)mode;
    (void)nodes;
    (void)n;
    return 0;
#endif
}

int dp_numa_bind(void *addr, size_t len, uint32_t node) {
#ifdef HAVE_LIBNUMA
    return numa_mbind(addr, len, MPOL_BIND, &node, 1);
#else
    return numa_mbind(addr, len, 0, &node, 1);
#endif
}

int dp_numa_interleave(void *addr, size_t len, const uint32_t *nodes, unsigned n) {
#ifdef HAVE_LIBNUMA
    return numa_mbind(addr, len, MPOL_INTERLEAVE, nodes, n);
#else
    return numa_mbind(addr, len, 0, nodes, n);
#endif
}

int dp_numa_run_on_node(uint32_t node) {
#ifdef HAVE_LIBNUMA
    if (!dp_numa_topo()->real) return 0;
    int saved = errno;
    cpu_set_t set;
    CPU_ZERO(&set);
    const dp_topo *t = dp_numa_topo();
    int n = 0;
    for (unsigned c = 0; c < DP_NUMA_CPUS && c < CPU_SETSIZE; c++)
        if (t->cpu_node[c] == (int)node) {
            CPU_SET(c, &set);
            n++;
        }
    int r = n ? pthread_setaffinity_np(pthread_self(), sizeof set, &set) : -ENOENT;
    errno = saved;
    return r > 0 ? -r : r;
#else
    (void)node;
    return 0;
#endif
}

long dp_numa_pages_on_nodes(const void *addr, size_t len, size_t *counts, unsigned ncounts) {
    int saved = errno;
    for (unsigned i = 0; i < ncounts; i++) counts[i] = 0;
    long total = 0;
    enum { BATCH = 1024 };
    void *pages[BATCH];
    int status[BATCH];
    const char *p = (const char *)((uintptr_t)addr & ~(uintptr_t)4095);
    const char *end = (const char *)addr + len;
    while (p < end) {
        unsigned n = 0;
        for (; n < BATCH && p < end; n++, p += 4096) pages[n] = (void *)p;
        /* the raw call: no libnuma needed to ask where pages are */
        if (syscall(SYS_move_pages, 0, (unsigned long)n, pages, NULL, status, 0) != 0) {
            long e = -errno;
            errno = saved;
            return e;
        }
        for (unsigned i = 0; i < n; i++)
            if (status[i] >= 0 && (unsigned)status[i] < ncounts) {
                counts[status[i]]++;
                total++;
            }
    }
    errno = saved;
    return total;
}

long dp_numa_huge_free(uint32_t node, size_t sz) {
    int saved = errno;
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%u/hugepages/hugepages-%zukB/free_hugepages",
             node, sz >> 10);
    FILE *f = fopen(path, "re");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1) v = -1;
        fclose(f);
    }
    errno = saved;
    return v;
}
