/*
 * dp_numa.h -- topology and placement, behind one small contract.
 *
 * For now the pool has one sub-pool (node 0) and the allocator only needs
 * the calling CPU for its per-CPU reservations. Node discovery, per-node
 * placement and verification arrive with the NUMA work (issue 5).
 */
#ifndef DP_NUMA_H
#define DP_NUMA_H

#include <stdint.h>

/* The nodes that get a sub-pool; returns how many (at least 1). */
unsigned dp_numa_subpool_nodes(uint32_t *nodes, unsigned max);

/* The CPU the calling thread runs on now (rseq/vDSO: no system call). */
unsigned dp_numa_cpu(void);

#endif /* DP_NUMA_H */
