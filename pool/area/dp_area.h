/*
 * dp_area.h -- the area layer: DSA-like heaps of relocatable pointers
 * (pool/area/area_*.c), as the layers above call it: recovery, the checker,
 * the inspector and the lifecycle. What the area files share among
 * themselves is area.h's (and the headers of the files whose inlines the
 * hot path uses: area_pointer.h, area_registry.h, area_cache.h).
 *
 * Layer: areas (pool/area), above segments (an area's control block is a
 * segment) and the ledger. The files, bottom to top (each calls only those
 * before it): area.c (the class table), area_registry.c (entries, the
 * directory), area_pointer.c (relocatable pointers), area_span.c (span
 * stacks), area_cache.c (thread caches, operations), area_acquire.c (fresh
 * spans and blocks), area_free.c, area_small.c (the cached path),
 * area_shared.c (threads without a record), area_large.c (large blocks,
 * sizes), area_alloc.c (the public heap calls), area_life.c (lifetime,
 * stats), area_verify.c (the checker's walk, the inspector's snapshot),
 * area_recover.c (recovery, the lost sweep); area_test.c, the test hooks,
 * is in the internal library only.
 */
#ifndef DP_AREA_H
#define DP_AREA_H

#include "dp_segment.h"

void dp_area_layer_init(void);
void dp_area_tag_free(struct dsmpool *pool, uint32_t tag);
void dp_area_sweep_tags(struct dsmpool *pool); /* inside the leak sweep's quiet window */
void dp_area_detach_pool(struct dsmpool *pool); /* this process's areas of the pool */
void dp_area_recover_slot(struct dsmpool *pool, uint32_t slot);
void dp_area_mark_owned(struct dsmpool *pool, dp_mark_fn mark, void *arg);
/* Cache operations in flight, as a snapshot (area_recover.c [quiet]). */
typedef struct dp_area_quiet {
    uint64_t *seq;
    size_t n, cap;
} dp_area_quiet;
int dp_area_quiet_open(struct dsmpool *pool, dp_area_quiet *q); /* -EBUSY: an operation runs */
bool dp_area_quiet_holds(struct dsmpool *pool, const dp_area_quiet *q);
void dp_area_quiet_close(dp_area_quiet *q);
/* Free lists, caches, bump ranges and span stacks: no chunk twice, every
 * link inside its area's spans. 0 or -EUCLEAN with why. The scratch (zero
 * at first) is kept between calls of one check and freed after. */
typedef struct dp_area_scratch {
    void *bits, *used;
} dp_area_scratch;
int dp_area_verify(struct dsmpool *pool, dp_area_scratch *sc, char *why, size_t n);
/* area_recover.c [lost chunks]: give back the chunks that deaths inside area
 * operations lost (it opens its own quiet windows: call it outside any);
 * false: left for the next sweep. *got counts what went back. */
bool dp_area_sweep_lost(struct dsmpool *pool, dp_area_scratch *sc, size_t *got);
void dp_area_scratch_free(dp_area_scratch *sc);

/* area_life.c [last process out]: the pool's OS segments are about to go
 * with its last process: area entries in them go first (life.c [last out]). */
void dp_area_drop_os(struct dsmpool *pool);

/* ---- a read-only snapshot of one area (for the inspector) ---------------- */

/* Areas: one per descriptor holding an area control block. */
#define DP_INSP_NCLS 87u /* area.c's classes (chunk_size says their sizes) */
typedef struct dp_insp_area {
    uint64_t seg_index, handle;
    unsigned state;      /* 1 live, 2 destroyed, 0 unknown */
    uint64_t flags, limit, held, lost;
    uint32_t tag;
    uint64_t spans[DP_INSP_NCLS];         /* live spans per class */
    uint64_t cached_chunks[DP_INSP_NCLS]; /* free chunks thread caches hold (lists + bump ranges) */
    uint32_t chunk_size[DP_INSP_NCLS];    /* bytes per chunk of each class */
    uint64_t large_blocks, large_bytes, fallback_entries, registry_pages;
    uint32_t caches;                      /* cache records in use */
    uint64_t cached_bytes;
    bool damaged;
    char why[96];
} dp_insp_area;
int dp_area_inspect(struct dsmpool *pool, uint64_t idx, dp_insp_area *out); /* -ENOENT: not an area */

/* ---- test hooks (area_test.c: the internal library only, for tests/) ---------- */

dp_a64 *dp_area_test_word(dsmpool_area *a, const char *what, unsigned cls, dsmpool_ptr p);
void dp_area_test_untrimmed(bool on);
void dp_area_test_force_shared(bool on);
void dp_area_test_quiesce_ns(uint64_t ns);
unsigned dp_area_test_class(size_t size);
uint64_t dp_area_test_span(unsigned c);
uint64_t dp_area_test_span_len(unsigned c);
unsigned dp_area_test_fb_bits(uint64_t len);
uint32_t dp_area_test_chunk(unsigned c, uint64_t off, uint32_t *idx, bool *start);
long dp_area_test_live(dsmpool_area *a, dsmpool_ptr *out, size_t max, size_t *tagged);

#endif /* DP_AREA_H */
