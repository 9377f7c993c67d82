/*
 * pgdsa.h -- an imitation of PostgreSQL's dynamic shared memory areas
 * (dsa.c over dsm.c / dsm_impl.c), as the parallel hash join uses them, for
 * the benchmark's "pg-dsa" and "pg-prealloc" backends. See pgdsa.c for what
 * it imitates and what it leaves out.
 */
#ifndef PGDSA_H
#define PGDSA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint64_t pgdsa_pointer; /* segment index << 40 | offset; 0 = InvalidDsaPointer */

typedef struct pgdsa_area pgdsa_area;  /* a process's handle */

/* pg-prealloc: the preallocated region (min_dynamic_shared_memory), created
 * once before workers fork; huge_2m asks for 2 MiB hugetlb pages. */
int pgdsa_region_create(size_t bytes, bool huge_2m, bool prefault);
void pgdsa_region_destroy(void);
size_t pgdsa_region_page_size(void);

/* The leader creates an area (its control lives in a new DSM segment, or in
 * the region); workers forked afterwards use the same pgdsa_area pointer and
 * call pgdsa_worker_begin() first (their segment map starts empty). */
pgdsa_area *pgdsa_create(bool prealloc);
void pgdsa_worker_begin(pgdsa_area *a);
void pgdsa_destroy(pgdsa_area *a);

/* dsa_allocate_extended: takes the area lock; may create a segment while
 * holding it. Returns 0 when out of memory. */
pgdsa_pointer pgdsa_allocate(pgdsa_area *a, size_t size);
/* The hash join's own lock around chunk allocation (ExecParallelHashTupleAlloc
 * holds pstate->lock while it calls dsa_allocate for a new chunk). */
pgdsa_pointer pgdsa_allocate_chunk(pgdsa_area *a, size_t size);
/* dsa_get_address: maps the segment into this process on first use. */
void *pgdsa_get_address(pgdsa_area *a, pgdsa_pointer p);

unsigned pgdsa_segments(pgdsa_area *a);

/* pg-prealloc with an inline translation (the "+inline" row): the
 * process's segment map, read without a function call and without
 * dsa_get_address's freed-segment check -- a load and an add, as
 * dsmpool_area_addr_inline is an add. A segment this process has not looked
 * up yet falls back to pgdsa_get_address. */
char *const *pgdsa_segment_map(pgdsa_area *a);
static inline void *pgdsa_get_address_inline(pgdsa_area *a, char *const *map, pgdsa_pointer p) {
    char *m = p ? map[p >> 40] : NULL;
    if (__builtin_expect(m != NULL, 1)) return m + (p & ((1ull << 40) - 1));
    return pgdsa_get_address(a, p);
}

/* Counting (untimed rounds only): a thread that sets pgdsa_count to its own
 * record has every lock acquisition counted and timed. NULL (the default)
 * costs one thread-local load per lock. */
typedef struct pgdsa_counters {
    uint64_t locks;     /* acquisitions (hash join lock, area lock, DSM control lock) */
    uint64_t contended; /* of those, found held (a failed trylock) */
    uint64_t rmw;       /* atomic RMWs on shared words: lock CAS + unlock exchange,
                           failed CAS on contention, the segment name counter */
    uint64_t wait_ns;   /* from asking for a lock to holding it */
    uint64_t hold_ns;   /* holding the outermost lock: the serial part */
    uint64_t segs;      /* segments created (system calls under the locks) */
    int depth;
    uint64_t t_hold;
} pgdsa_counters;
extern _Thread_local pgdsa_counters *pgdsa_count;

#endif
