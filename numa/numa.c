/*
 * numa.c -- topology and the current CPU.
 *
 * dp_numa_cpu() uses sched_getcpu(), which glibc answers from the rseq area
 * (or the vDSO where rseq is not registered): no system call, a few ns.
 */
#include <sched.h>

#include "dp_numa.h"

unsigned dp_numa_subpool_nodes(uint32_t *nodes, unsigned max) {
    if (max) nodes[0] = 0;
    return 1;
}

unsigned dp_numa_cpu(void) {
    int c = sched_getcpu();
    return c < 0 ? 0u : (unsigned)c;
}
