/*
 * test_numa.c -- NUMA placement on whatever machine runs the tests (one
 * node on the build machines: every policy must degrade to it cleanly).
 * Placement across several nodes is proven in tests/numa-vm/ under qemu.
 */
#include <criterion/criterion.h>
#include <dsmpool.h>
#include <sched.h>

#include "dp_numa.h"
#include "testutil.h"

static dsmpool *mk(dsmpool_config *c) {
    dsmpool *p = NULL;
    int r = dsmpool_create(c, &p);
    cr_assert_eq(r, 0, "create: %s", dsmpool_last_error());
    return p;
}

static dsmpool_config cfg(size_t size) {
    dsmpool_config c;
    dsmpool_config_init(&c);
    c.size = size;
    return c;
}

Test(numa, topology_and_current_node) {
    const dp_topo *t = dp_numa_topo();
    cr_assert_geq(t->nnodes, 1);
    uint32_t n = dp_numa_current_node();
    cr_expect_geq(dp_numa_index(n), 0, "the current node %u is a node with memory", n);
    for (unsigned i = 0; i < t->nnodes; i++) cr_expect_eq(t->dist[i][i], 10, "SLIT: local distance 10");
}

/* numa.c [current node]: one read of the CPU gives the CPU and its node; pinned to
 * each allowed CPU in turn, it must name that CPU (rseq's cpu_id where glibc
 * exports the area, sched_getcpu() elsewhere: both must be right). */
Test(numa, cpu_and_node_from_one_read) {
    cpu_set_t old, one;
    cr_assert_eq(sched_getaffinity(0, sizeof old, &old), 0);
    const dp_topo *t = dp_numa_topo();
    unsigned tried = 0;
    for (unsigned c = 0; c < CPU_SETSIZE && c < DP_NUMA_CPUS; c++) {
        if (!CPU_ISSET(c, &old)) continue;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
        uint32_t node = 0xffffffffu;
        unsigned got = dp_numa_cpu_node(&node);
        cr_expect_eq(got, c, "pinned to CPU %u, read CPU %u", c, got);
        cr_expect_eq(dp_numa_cpu(), c);
        uint32_t want = t->cpu_node[c] < 0 ? t->node[0] : (uint32_t)t->cpu_node[c];
        cr_expect_eq(node, want, "CPU %u: node %u, table says %u", c, node, want);
        cr_expect_eq(dp_numa_current_node(), want);
        tried++;
    }
    cr_assert_eq(sched_setaffinity(0, sizeof old, &old), 0);
    cr_expect_gt(tried, 0);
}

Test(numa, one_subpool_per_node_with_memory) {
    dsmpool_config c = cfg(64 * MIB);
    dsmpool *p = mk(&c);
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    unsigned nodes = dp_numa_topo()->nnodes;
    cr_expect_eq(st.nsubpools, nodes > 1 ? nodes + 1 : 1, "node sub-pools (+ interleaved)");
    for (unsigned s = 0; s < st.nsubpools; s++) cr_expect_eq(st.subpool[s].fallbacks, 0);
    dsmpool_detach(p);
    c.numa = DSMPOOL_NUMA_OFF;
    p = mk(&c);
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.nsubpools, 1, "NUMA off: one sub-pool");
    dsmpool_detach(p);
}

Test(numa, placements_degrade_on_one_node) {
    if (dp_numa_topo()->nnodes > 1) cr_skip_test("this machine has several nodes: see tests/numa-vm");
    dsmpool_config c = cfg(64 * MIB);
    dsmpool *p = mk(&c);
    uint32_t node = dp_numa_topo()->node[0];
    dsmpool_seg *s;
    unsigned flags[] = {0, DSMPOOL_SEG_LOCAL_ONLY, DSMPOOL_SEG_INTERLEAVE, DSMPOOL_SEG_ON_NODE(node),
                        DSMPOOL_SEG_ON_NODE(node) | DSMPOOL_SEG_LOCAL_ONLY};
    for (unsigned i = 0; i < sizeof flags / sizeof *flags; i++) {
        cr_assert_eq(dsmpool_seg_create(p, 4 * MIB, flags[i], &s), 0, "flags 0x%x: %s", flags[i],
                     dsmpool_last_error());
        size_t counts[DSMPOOL_MAX_NODES];
        long n = dsmpool_seg_pages_per_node(s, counts, DSMPOOL_MAX_NODES);
        cr_expect_eq(n, 1024, "flags 0x%x: all 1024 pages are resident (prefaulted)", flags[i]);
        cr_expect_eq(counts[node], 1024, "flags 0x%x: and on node %u", flags[i], node);
        dsmpool_seg_detach(s);
    }
    cr_expect_eq(dsmpool_seg_create(p, 4096, DSMPOOL_SEG_ON_NODE(node + 1), &s), -EINVAL);
    cr_expect_neq(strstr(dsmpool_last_error(), "no sub-pool"), NULL, "%s", dsmpool_last_error());
    cr_expect_eq(dsmpool_seg_create(p, 4096, 5u << 8, &s), -EINVAL, "node bits without ON_NODE");
    /* LOCAL_ONLY on an exhausted node: no crossing, and here no OS either */
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    dsmpool_seg *big;
    cr_assert_eq(dsmpool_seg_create(p, st.subpool[0].largest_free, DSMPOOL_SEG_NO_FALLBACK, &big), 0);
    cr_expect_eq(dsmpool_seg_create(p, st.subpool[0].largest_free,
                                    DSMPOOL_SEG_LOCAL_ONLY | DSMPOOL_SEG_NO_FALLBACK, &s), -ENOMEM);
    dsmpool_seg_detach(big);
    /* areas: large blocks may ask for interleaving */
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0);
    dsmpool_ptr bp;
    cr_assert_eq(dsmpool_area_alloc(a, 8 * MIB, DSMPOOL_ALLOC_INTERLEAVE | DSMPOOL_ALLOC_ZERO, &bp), 0);
    size_t counts[DSMPOOL_MAX_NODES];
    cr_expect_eq(dsmpool_pages_per_node(dsmpool_area_addr(a, bp), 8 * MIB, counts, DSMPOOL_MAX_NODES), 2048);
    dsmpool_area_destroy(a);
    cr_assert_eq(dsmpool_check(p), 0, "%s", dsmpool_last_error());
    dsmpool_detach(p);
}

Test(numa, configuration_errors) {
    dsmpool *p;
    dsmpool_config c = cfg(64 * MIB);
    c.nnodes = 1;
    c.nodes[0] = 200;
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL);
    cr_expect_neq(strstr(dsmpool_last_error(), "no memory"), NULL, "%s", dsmpool_last_error());
    c.nodes[0] = dp_numa_topo()->node[0];
    c.nnodes = 2;
    c.nodes[1] = c.nodes[0];
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL, "a node twice");
    c = cfg(64 * MIB);
    c.node_size[0] = 3 * MIB;
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL, "not a multiple of 2 MiB");
    c.node_size[0] = 0;
    c.node_size[5] = 2 * MIB;
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL, "a size for a node not in the pool");
    c = cfg(64 * MIB);
    c.node_size[0] = 1024 * MIB;
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL, "node sizes larger than the region");
    c.node_size[0] = 16 * MIB;
    if (dp_numa_topo()->nnodes == 1) {
        p = mk(&c);
        dsmpool_stats st;
        dsmpool_get_stats(p, &st);
        cr_expect_eq(st.subpool[0].size, 16 * MIB, "the size asked for");
        dsmpool_detach(p);
    }
    c = cfg(64 * MIB);
    c.numa = (dsmpool_numa)7;
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL);
}

Test(numa, pages_per_node_bad_input) {
    size_t counts[4];
    cr_expect_eq(dsmpool_pages_per_node(NULL, 4096, counts, 4), -EINVAL);
    cr_expect_eq(dsmpool_seg_pages_per_node(NULL, counts, 4), -EINVAL);
    static char untouched[1 << 20] __attribute__((aligned(4096)));
    long n = dsmpool_pages_per_node(untouched, sizeof untouched, counts, 4);
    cr_expect_geq(n, 0);
    cr_expect_lt(n, 256, "pages never touched are not resident anywhere (%ld)", n);
}
