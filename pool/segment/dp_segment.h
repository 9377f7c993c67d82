/*
 * dp_segment.h -- the segment layer: descriptors, handles, references and
 * pins, OS fallback segments (segment.c).
 *
 * Layer: segments (pool/segment), above the ledger.
 */
#ifndef DP_SEGMENT_H
#define DP_SEGMENT_H

#include "dp_ledger.h"
#include "fallback.h" /* spilling is visible: dp_fallback_fire() */

/* ---- process-local ---------------------------------------------------------- */

struct dsmpool_seg {
    uint64_t magic;         /* DP_SEGOBJ_MAGIC while attached */
    struct dsmpool *pool;
    dsmpool_handle handle;
    void *addr;
    size_t size;
    bool fallback;          /* addr is our own mapping of an OS segment */
    bool stale;             /* a fork()ed child could not take it over: gone */
    dp_a64 *rec;            /* our attachment record (in our slot) */
    struct dsmpool_seg *next, *prev; /* the pool's list of attached segments */
};
#define DP_SEGOBJ_MAGIC 0x6a624f6765536bull
#define DP_SEGOBJ_DEAD 0x646165644f626aull


#define DP_SEG_AREA (1u << 30) /* internal flag: the segment is an area's control block */

/* A kind of segment whose contents must be released when it is destroyed
 * (an area's control block): the area layer registers what to do. */
typedef void dp_seg_area_hook(struct dsmpool *pool, void *ctl, uint64_t bytes, uint64_t aid, uint32_t owner_slot);
void dp_seg_set_area_hook(dp_seg_area_hook *fn);
void dp_seg_layer_init(void);
/* segment.c [short of memory]: the pool could not serve a block; caches give back,
 * then one more try (bounded wait). 0 with *block, or the allocator's error. */
/* keep: the frames an exact block keeps (dp_pool_alloc_exact), 0 for a
 * whole block (dp_pool_alloc_placed); refills_failed: the pool's
 * refill_failures read before the failed try (one that moved since: the
 * block was there, its memory was not -- -ENOMEM at once) */
int dp_seg_block_short(struct dsmpool *pool, unsigned order, unsigned place, uint64_t keep, uint64_t refills_failed,
                       uint64_t *block);
bool dp_seg_live(struct dsmpool *pool, dsmpool_handle h, uint64_t *blk, uint64_t *size);
bool dp_area_live(struct dsmpool *pool, dsmpool_handle h); /* an area that is not destroyed */
void dp_seg_set_trim_hook(void (*fn)(struct dsmpool *pool)); /* this thread's caches give back */
int dp_seg_create_internal(struct dsmpool *pool, size_t size, unsigned flags,
                           struct dsmpool_seg **out);
unsigned dp_seg_flags(struct dsmpool *pool, dsmpool_handle h);
/* An OS segment with no attachment: pinned, count 0, owned by the caller's
 * structure, which unpins it to destroy it. *addr is our mapping. */
int dp_seg_os_create(struct dsmpool *pool, size_t bytes, dsmpool_handle *h, void **addr);
int dp_seg_os_map(struct dsmpool *pool, dsmpool_handle h, void **addr, size_t *len);
void dp_seg_unpin_quiet(struct dsmpool *pool, dsmpool_handle h, uint32_t owner_slot);
uint64_t dp_seg_os_size(struct dsmpool *pool, dsmpool_handle h); /* 0 if not a live OS segment */
/* The area control block of descriptor idx, validated, or NULL. */
void *dp_seg_area_ctl(struct dsmpool *pool, uint64_t idx, uint64_t min_bytes);

/* false: a reference count could not be settled now (a live process is
 * attaching or detaching that segment); the slot's records stay, and the
 * next recovery goes on. */
bool dp_seg_recover_slot(struct dsmpool *pool, uint32_t slot);
/* segset.c: this process's attached segment objects */
bool dp_segset_add(struct dsmpool_seg *seg);
bool dp_segset_take(struct dsmpool_seg *seg);
bool dp_segset_has(struct dsmpool_seg *seg);
void dp_segset_layer_init(void); /* its fork handlers (the ledger's) */
void dp_seg_unmap_all(struct dsmpool *pool, bool drop_refs);
void dp_fallback_name(const struct dsmpool *pool, uint64_t idx, uint32_t gen, char *buf,
                      size_t n);
void dp_seg_mark_owned(struct dsmpool *pool, dp_mark_fn mark, void *arg);
/* Segment states and reference counts against the records of every slot:
 * 0, -EBUSY (in progress) or -EUCLEAN with why. */
int dp_seg_verify(struct dsmpool *pool, char *why, size_t n);
#endif /* DP_SEGMENT_H */
