/*
 * dp_numa.h -- topology and placement, behind one small contract.
 *
 * Topology comes from libnuma (nodes with memory, their CPUs and sizes, the
 * SLIT distances), discovered once per process and cached. A build without
 * libnuma, a machine without NUMA, or DSMPOOL_NUMA_OFF runs as one node and
 * every call here degrades to a no-op. Calls return 0 (or a count) or a
 * negative errno and leave errno as they found it.
 */
#ifndef DP_NUMA_H
#define DP_NUMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DP_NUMA_MAX 64     /* = DSMPOOL_MAX_NODES */
#define DP_NUMA_CPUS 4096

typedef struct dp_topo {
    bool real;                        /* topology from libnuma (else one node 0) */
    unsigned nnodes;                  /* nodes with memory */
    uint32_t node[DP_NUMA_MAX];       /* their ids, ascending */
    uint64_t mem[DP_NUMA_MAX];        /* bytes of memory per listed node */
    int dist[DP_NUMA_MAX][DP_NUMA_MAX]; /* distances between listed nodes (by index) */
    int16_t cpu_node[DP_NUMA_CPUS];   /* node id of each CPU, -1 unknown */
} dp_topo;

const dp_topo *dp_numa_topo(void);

/* Index of node id in the topology, or -1. */
int dp_numa_index(uint32_t node);

/* The CPU the calling thread runs on now (rseq/vDSO: no system call), and
 * its node id from the cached CPU table (the first node when unknown).
 * dp_numa_cpu_node gives both from one read of the CPU, so they agree. */
unsigned dp_numa_cpu(void);
unsigned dp_numa_cpu_node(uint32_t *node);
uint32_t dp_numa_current_node(void);

/* mbind(MPOL_BIND) of a range to one node; page-aligned. */
int dp_numa_bind(void *addr, size_t len, uint32_t node);

/* mbind(MPOL_INTERLEAVE) of a range over nodes[0..n): one policy, one VMA,
 * pages (huge pages whole) spread over the nodes in the kernel's order, each
 * from another node when its own is full; page-aligned. */
int dp_numa_interleave(void *addr, size_t len, const uint32_t *nodes, unsigned n);

/* Pin the calling thread to the CPUs of a node (for first touch there). */
int dp_numa_run_on_node(uint32_t node);

/* How many base pages of [addr, addr+len) live on each node (move_pages
 * with nodes = NULL): counts[id] for ids < ncounts. Returns pages counted. */
long dp_numa_pages_on_nodes(const void *addr, size_t len, size_t *counts, unsigned ncounts);

/* hugetlb pages of size sz free on a node, or -1 when unknown. */
long dp_numa_huge_free(uint32_t node, size_t sz);

#endif /* DP_NUMA_H */
