/*
 * area_large.c -- large blocks (an allocation of its own, exact to the
 * page), growing one in place, and the live allocation that holds a pointer
 * (usable_size, ptr_of, and what realloc starts from).
 *
 * Layer: areas, above the acquire, the free and the shared path (a grow
 * without a record is a shared-path operation); area_alloc.c routes here.
 *
 * Rules
 *   [large blocks] A size above AR_LARGE_FROM (256 KiB), and a mid size
 *      first (area_alloc.c [mid sizes]), gets its own block, exact to the
 *      page: its power of two is taken and its tail given back at once
 *      (area_acquire.c [exact blocks]), an OS segment is made that size, so
 *      its usable size is the size asked for rounded up to 4 KiB (an
 *      aligned request takes the block of its alignment and keeps what it
 *      asked for). The directory has a word per page, so the pages given
 *      back can hold anyone's blocks (another area's, a segment's) without
 *      sharing a word with ours. The bytes asked for are in the entry's info
 *      word (bits 12 up, class AR_LARGE_CLS, so it is never read as a
 *      bitmap), exact.
 *   [grow in place] A large pool block grows in place up to its power of
 *      two while the tail it gave back is still free: reserve the held
 *      bytes, take the frames back (dp_pool_grow, palloc.c [exact blocks]), set
 *      their directory words, then publish the longer block word, the
 *      entry's record marked AR_SEG_GROWING while the word changes
 *      (area_registry.c [exact records]); inside an area operation (so a
 *      destroyer waits for it, and a death inside makes the lost sweep due,
 *      which sets held right) and one bracket (frames taken and not yet
 *      published go to the leak sweep). Growing past the power of two would
 *      need the registry to merge two entries.
 *   [sizes and addresses] Every pool pointer is an offset from a mapping
 *      aligned to at least 2 MiB in every process, OS segments are mapped
 *      at 2 MiB boundaries, a span starts its block, which is aligned to its
 *      size (64 KiB to 2 MiB, a power of two), and a chunk of class c sits
 *      at a multiple of its size from its span's start (area.c
 *      [placement]); so a chunk is aligned to the largest power of two
 *      dividing its size: at least 8 B (the 24, 40 and 56 B classes:
 *      PostgreSQL's MAXALIGN, as dsa.c; less than malloc's 16, as the header
 *      says), 16 B for every other class, and n for a power-of-two n (every
 *      power of two from 16 B to 256 KiB is a class); a large block to its
 *      power of two (at most 2 MiB used). The live allocation holding a
 *      pointer is found from the directory (or the fallback pointer's
 *      entry) and the entry's state; a chunk is live unless its free tag is
 *      intact (area_free.c [free tags]) or, checked, its bit is clear -- a
 *      chunk never handed out is told apart only in checked mode, as for
 *      free. Local addresses in OS segments go back to pointers through this
 *      process's mapping records (area_pointer.c [mapping records]), which
 *      only name the entry's current segment (and carry its check).
 *
 * Crash bound: a grow killed after taking frames and before publishing the
 * longer word leaves the old word, which the record (marked growing) still
 * agrees with, and the frames taken owned by nothing, inside a bracket: the
 * leak sweep's; held, raised for them, is set right by the lost sweep.
 *
 * Memory ordering: the new frames' directory words and the block word are
 * release stores, the record's final value a release after the word; the
 * lookups read the entry by an acquire load (acquire_bracketed's
 * publishing CAS) and are outside any operation, so an allocation freed
 * meanwhile may be answered either way (as for free(), a caller's race).
 *
 * Injection points: "area.grow.taken" (a grow took the frames back, before
 * the directory and the block word say so).
 */

#include <string.h>

#include "area.h"
#include "area_pointer.h"
#include "area_registry.h"
#include "area_cache.h"

/* [large blocks]: a block of its own for size (mid: a mid size's try, from
 * the pool only), inside an operation on tc->rec or a shared-path bracket. */
int dp_ar_alloc_large_op(struct dsmpool_area *a, ar_tc *tc, size_t size, size_t asked, unsigned flags,
                         bool mid, dsmpool_ptr *out) {
    if (size > (1ull << 46)) return dp_fail(-ENOMEM, "%zu bytes is more than any pool holds", size);
    unsigned order = 64u - (unsigned)__builtin_clzll(size - 1) - DP_FRAME_SHIFT;
    /* [large blocks]: exact to the page, to the size asked for (an aligned
     * request takes the block of its alignment and keeps only what it asked
     * for) */
    uint64_t keep = ((asked ? asked : size) + DP_FRAME_SIZE - 1) / DP_FRAME_SIZE;
    uint64_t e;
    dsmpool_ptr base;
    unsigned place = (flags & DSMPOOL_ALLOC_INTERLEAVE) ? DSMPOOL_SEG_INTERLEAVE : 0;
    ar_want w = {.cls = AR_LARGE_CLS, .order = order, .keep = keep, .place = place, .asked = asked, .mid = mid};
    int r = dp_ar_acquire(a, tc, &w, &e, &base);
    if (r) return r;
    if (flags & DSMPOOL_ALLOC_ZERO) { /* the pages kept, no more: the rest is the pool's again */
        char *m = ar_addr_n(a, base, keep * DP_FRAME_SIZE);
        if (!m) {
            dp_ar_free_undo(a, tc, base);
            return dp_fail(-ENOMEM, "cannot map the new block's OS segment in this process");
        }
        memset(m, 0, keep * DP_FRAME_SIZE);
    }
    *out = base;
    return 0;
}

/* [grow in place]: a large pool block grows in place when the tail it gave
 * back is still free: reserve the bytes, take the frames back (palloc.c rule
 * 7), name them in the directory, then publish the longer block word. Inside
 * an area operation (so a destroyer waits for it, and a death inside makes the
 * lost sweep due, which sets held right) and one bracket (frames taken and not
 * yet published go to the leak sweep). */
static bool large_grow_op(struct dsmpool_area *a, ar_loc *l, size_t size) {
    dsmpool *p = a->pool;
    /* acquire: the entry's publication; a block freed meanwhile (by another
     * thread: a caller's race, as for free()) is not grown */
    uint64_t w = dp_load_acquire(&l->sp->state);
    uint64_t blk = dp_load_relaxed(&l->sp->block);
    /* an exact pool block (not an OS segment's) that agrees with its record */
    uint64_t have = dp_ar_entry_block_bytes(l->sp, blk), want = (size + DP_FRAME_SIZE - 1) / DP_FRAME_SIZE * DP_FRAME_SIZE;
    if (SPW_ST(w) != SP_LARGE || !(blk & DP_BLOCK_EXACT) || !have ||
        DP_BLOCK_OFF(blk) != l->span || want > (uint64_t)DP_FRAME_SIZE << DP_BLOCK_ORDER(blk) ||
        dp_ar_held_reserve(a->ctl, want - have) != 0)
        return false;
    dp_bracket_open(p);
    uint64_t nb = dp_pool_grow(p, blk, want / DP_FRAME_SIZE);
    DP_INJECT("area.grow.taken");
    if (nb) {
        dp_ar_dir_set(p, DP_BLOCK_OFF(nb) + have, DP_BLOCK_BYTES(nb) - have, DIRW(a->aid, l->e, AR_LARGE_CLS));
        /* the record says "up to the new frames" while the word changes: a
         * death in between leaves the old word, still agreed with, and the
         * frames taken owned by nothing (the sweep's) */
        dp_store_relaxed(&l->sp->seg, dp_block_frames(nb) | AR_SEG_GROWING);
        dp_store_release(&l->sp->block, nb); /* release: the frames are ours before it says so */
        dp_store_release(&l->sp->seg, dp_block_frames(nb)); /* release: after the word */
    }
    if (!nb || DP_BLOCK_BYTES(nb) != want) /* relaxed: a counter */
        dp_fetch_add_relaxed(&a->ctl->held, (nb ? DP_BLOCK_BYTES(nb) : have) - want);
    dp_bracket_close(p);
    return nb != 0;
}

/* [grow in place], inside an operation of its own: a cache record's, or a
 * shared-path bracket. */
bool dp_ar_large_grow(struct dsmpool_area *a, ar_loc *l, size_t size) {
    ar_tc *tc = ar_tc_get(a);
    if (!tc) return false;
    bool grown = false;
    if (tc->rec) {
        uint64_t s = ar_op_begin(tc->rec);
        if (ar_live(a)) grown = large_grow_op(a, l, size);
        ar_op_end(tc->rec, s);
    } else { /* area_shared.c [shared path]: the operation is a bracket */
        dp_bracket_open(a->pool);
        if (ar_live(a)) grown = large_grow_op(a, l, size);
        dp_bracket_close(a->pool);
        dp_ar_shared_done(a, tc);
    }
    return grown;
}

/* [sizes and addresses]: the live allocation that holds pointer p (any byte of
 * it): its usable bytes, and its start in *start; 0 when none. Reads only,
 * every word validated; outside any operation, so an allocation freed
 * meanwhile may be answered either way (as for free(), a caller's race). */
uint64_t dp_ar_live_alloc(struct dsmpool_area *a, dsmpool_ptr p, dsmpool_ptr *start, ar_loc *l) {
    if (!p || dp_ar_locate(a, p, l) != 0 || !ar_locate_entry(a, l)) return 0;
    uint64_t w = dp_load_acquire(&l->sp->state); /* acquire: pairs with acquire_bracketed's publishing CAS */
    uint64_t blk = dp_load_relaxed(&l->sp->block);
    bool fb = (p & FB_BIT) != 0;
    if (fb != (blk == DP_BLOCK_FALLBACK)) return 0;
    if (!fb && (!blk || DP_BLOCK_ORDER(blk) > DP_PA_MAX_ORDER)) return 0;
    if (l->cls == AR_LARGE_CLS) {
        if (SPW_ST(w) != SP_LARGE) return 0;
        uint64_t bytes = fb ? dp_seg_os_size(a->pool, dp_load_relaxed(&l->sp->seg))
                            : dp_ar_entry_block_bytes(l->sp, blk);
        if ((!fb && DP_BLOCK_OFF(blk) != l->span) || l->off >= bytes) return 0;
        *start = l->span;
        return bytes;
    }
    if (SPW_ST(w) != SP_SPAN || (dp_load_relaxed(&l->sp->info) & 0xff) != l->cls) return 0;
    if (!fb && DP_BLOCK_OFF(blk) != l->span) return 0; /* a directory word racing a retirement */
    uint64_t idx = l->off < cls_span(l->cls) ? chunk_idx(l->cls, l->off) : UINT64_MAX; /* any byte of the chunk */
    if (idx >= cls_chunks(l->cls)) return 0;
    dsmpool_ptr c = l->span + chunk_off(l->cls, idx);
    char *m = ar_addr_n(a, c, 16);
    if (!m) return 0;
    uint64_t have;
    memcpy(&have, m + 8, 8);
    if (have == ar_free_tag(a, c)) return 0; /* freed (area_free.c [free tags]) */
    if ((a->ctl->flags & DSMPOOL_AREA_CHECKED) && !dp_ar_checked_test(a->pool, l->sp, (uint32_t)idx)) return 0;
    *start = c;
    return cls_size(l->cls);
}

/* The checks every query starts with (and realloc's, area_alloc.c). */
int dp_ar_query_ok(struct dsmpool_area *a) {
    if (!a || a->magic != AR_OBJ_MAGIC) return dp_fail(-EINVAL, "not an attached area");
    int r = dp_ar_usable(a);
    if (r) return r;
    if (dp_load_acquire(&a->ctl->state) != AR_LIVE) /* acquire: pairs with destroy_explicit's mark */
        return dp_fail(-ESTALE, "the area was destroyed");
    return 0;
}

size_t dsmpool_area_usable_size(dsmpool_area *area, dsmpool_ptr p) {
    if (dp_ar_query_ok(area)) return 0;
    ar_loc l;
    dsmpool_ptr start = 0;
    uint64_t n = dp_ar_live_alloc(area, p, &start, &l);
    if (!n || start != p) {
        dp_fail(-EINVAL, "%016llx is not the start of a live allocation of this area", (unsigned long long)p);
        return 0;
    }
    return (size_t)n;
}

dsmpool_ptr dsmpool_area_ptr_of(dsmpool_area *area, const void *addr) {
    if (dp_ar_query_ok(area)) return 0;
    uintptr_t u = (uintptr_t)addr, b = (uintptr_t)area->base;
    dsmpool_ptr p = u >= b + area->data_off && u - b - area->data_off < area->data_size ? u - b
                                                                                         : dp_ar_fb_ptr_of(area, u);
    ar_loc l;
    dsmpool_ptr start;
    if (!p || !dp_ar_live_alloc(area, p, &start, &l)) {
        dp_fail(-EINVAL, "%p is not inside a live allocation of this area", addr);
        return 0;
    }
    return p;
}
