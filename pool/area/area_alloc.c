/*
 * area_alloc.c -- the public heap calls of an area: alloc (and aligned),
 * free, flush, realloc; each inside its operation, the common cases inline,
 * everything else routed to the small, shared or large path.
 *
 * Layer: areas, the top of the heap: it calls the paths below (small,
 * shared, large, free) and nothing calls it but users and the layers above.
 *
 * Rules
 *   [hot path] Alloc: pop the thread's free list, else take the next chunk
 *      of its bump range (area_small.c). Free: push on the thread's free
 *      list (ar_list_push_op). The common case of each is inline here: a
 *      pool chunk of this area, at a chunk start of its class, in an
 *      unchecked area, no flags (alloc) or its tag not set (free). Only the
 *      owning thread writes its cache record: relaxed loads and stores, no
 *      read-modify-write, no lock, no system call (area_cache.c [one
 *      writer], [operations]). A trim request is answered at a free, or on
 *      an allocation's slow path (area_cache.c [short of memory]).
 *   [route] Off the hot path an allocation takes a large block above
 *      AR_LARGE_FROM (area_large.c [large blocks]); a mid size as below;
 *      any other size its class -- from the thread's cache (area_small.c),
 *      or on the shared path (area_shared.c [take]) when the thread has no
 *      record: then the operation is a bracket of the slot, not the
 *      record's sequence (area_shared.c [shared path]).
 *   [mid sizes] A mid size (mid_exact: above AR_MID_FROM up to
 *      AR_LARGE_FROM, where whole pages waste no more than the class would,
 *      not a power of two; not with DSMPOOL_AREA_MID_CHUNKS) takes a chunk
 *      of its class that the area already holds (cached, or returned to a
 *      span: never a fresh span), else an exact block -- from the pool only
 *      (no trim request, no OS segment) and in the registry's first half
 *      only (65536 entries: at least 512 MiB of them, and room left for
 *      spans; area_acquire.c [shortage]) -- and on any failure but -ESTALE
 *      its class serves, which asks for trims and OS spans as usual. The
 *      pool's pages are then shared among all sizes and areas, so under
 *      churn memory follows the live bytes, at the cost of an entry, a
 *      block and its trim per allocation (docs/design.md, Areas). Powers of
 *      two keep their chunks: the cached path, and no rounding to lose.
 *   [aligned] An aligned allocation takes the first class at or above
 *      max(size, align) whose size align divides (the power of two at or
 *      above is one, at most seven classes up), or a large block aligned to
 *      its power of two (area_large.c [sizes and addresses]).
 *   [realloc] Realloc stays in place within the usable size (a class, or a
 *      block's pages); a large pool block also grows in place while the tail
 *      it gave back is free (area_large.c [grow in place]); otherwise it
 *      allocates, copies and frees, the old allocation untouched until the
 *      new one exists.
 *
 * Crash bound: an allocation that dies after taking its chunk and before
 * returning leaves that chunk allocated (as a death just after the return
 * would); everything a dead process was freeing, draining or moving comes
 * back (area_recover.c [lost chunks]). The held count is exact after the
 * lost sweep.
 *
 * Memory ordering: the operation's (area_cache.c [operations]) or the
 * bracket's (proc.c [brackets]); the state is read relaxed inside either, as
 * ar_live says why. The free's directory load is an acquire (dp_ar_dir_set's
 * release). An OS segment made inside a call is reported after its
 * operation ends (dp_fallback_fire: fallback.c [spilling is visible]).
 *
 * Injection points: "area.op.checked" (inside an operation, the state read
 * LIVE: a test stops a process there while the area is destroyed, and its
 * allocation must come out -ESTALE or whole), "area.shared.checked" (a
 * shared-path allocation inside its bracket, the state read LIVE: a
 * destroyer must wait for it).
 */

#include <stdio.h>
#include <string.h>

#include "area.h"
#include "area_pointer.h"
#include "area_cache.h"

/* [mid sizes]: a size that takes an exact block first (then its class) */
static inline bool mid_exact(size_t size) {
    return size > AR_MID_FROM && size <= AR_LARGE_FROM &&
           (size & (size - 1)) && /* powers of two keep their chunks */
           ((size + DP_FRAME_SIZE - 1) & ~(size_t)(DP_FRAME_SIZE - 1)) <= cls_size(cls_of(size));
}

/* [route]: what serves an allocation off the hot path: a large block above
 * AR_LARGE_FROM; a mid-size one a chunk of its class that the area already
 * holds (cached, or returned to a span: never a fresh span), else an exact
 * block if the pool has one now and the registry's first half an entry
 * ([mid sizes]), else its class as every smaller size (shared: the shared
 * path's, else the thread's cache). */
static int alloc_route(struct dsmpool_area *a, ar_tc *tc, size_t size, size_t asked, unsigned flags,
                       bool shared, dsmpool_ptr *out) {
    if (size > AR_LARGE_FROM) return dp_ar_alloc_large_op(a, tc, size, asked, flags, false, out);
    if (mid_exact(size) && !(a->ctl->flags & DSMPOOL_AREA_MID_CHUNKS)) {
        int r = shared ? dp_ar_alloc_small_bracketed(a, tc, size, asked, flags, true, out)
                       : dp_ar_alloc_small_op(a, tc, size, asked, flags, true, out);
        if (r == 0) return 0;
        r = dp_ar_alloc_large_op(a, tc, size, asked, flags, true, out);
        if (r == 0 || r == -ESTALE) return r;
    }
    return shared ? dp_ar_alloc_small_bracketed(a, tc, size, asked, flags, false, out)
                  : dp_ar_alloc_small_op(a, tc, size, asked, flags, false, out);
}

/* The shared path's entries are kept out of line, off the hot path. */
static __attribute__((noinline)) int shared_alloc(struct dsmpool_area *a, ar_tc *tc, size_t size, size_t asked,
                                                  unsigned flags, dsmpool_ptr *out);
static __attribute__((noinline)) int shared_free(struct dsmpool_area *a, ar_tc *tc, dsmpool_ptr p);

static int shared_alloc(struct dsmpool_area *a, ar_tc *tc, size_t size, size_t asked, unsigned flags,
                        dsmpool_ptr *out) {
    dp_bracket_open(a->pool);
    int r;
    if (!ar_live(a)) { /* relaxed load after the bracket's acquire RMWs (area_shared.c [shared path]) */
        r = dp_fail(-ESTALE, "the area was destroyed");
    } else {
        DP_INJECT("area.shared.checked");
        dp_ar_shared_trim(a, tc);
        r = alloc_route(a, tc, size, asked, flags, true, out);
    }
    dp_bracket_close(a->pool);
    dp_fallback_fire(r); /* fallback.c [spilling is visible]: after the operation */
    dp_ar_shared_done(a, tc);
    return r;
}

static int shared_free(struct dsmpool_area *a, ar_tc *tc, dsmpool_ptr p) {
    dp_bracket_open(a->pool);
    int r;
    if (ar_live(a)) {
        dp_ar_shared_trim(a, tc);
        r = dp_ar_free_bracketed(a, tc, p);
    } else {
        r = dp_fail(-ESTALE, "the area was destroyed");
    }
    dp_bracket_close(a->pool);
    dp_ar_shared_done(a, tc);
    return r;
}

/* dsmpool_area_alloc, telling what the caller asked for (asked <= size:
 * an aligned request asks for less than it takes). */
static inline __attribute__((always_inline)) int area_alloc(dsmpool_area *area, size_t size, size_t asked,
                                                            unsigned flags, dsmpool_ptr *out);
static inline int area_alloc(dsmpool_area *area, size_t size, size_t asked, unsigned flags, dsmpool_ptr *out) {
    if (dp_unlikely(!out)) return dp_fail(-EINVAL, "out must not be NULL");
    *out = 0;
    if (dp_unlikely(!area || area->magic != AR_OBJ_MAGIC)) return dp_fail(-EINVAL, "not an attached area");
    if (dp_unlikely(size == 0)) return dp_fail(-EINVAL, "size 0");
    if (dp_unlikely(flags & ~(DSMPOOL_ALLOC_ZERO | DSMPOOL_ALLOC_INTERLEAVE)))
        return dp_fail(-EINVAL, "unknown flags 0x%x", flags);
    ar_tc *tc = ar_tc_get(area);
    if (dp_unlikely(!tc)) return dp_ar_tc_err;
    ar_cache *rec = tc->rec;
    if (dp_unlikely(!rec)) return shared_alloc(area, tc, size, asked, flags, out);
    uint64_t s = ar_op_begin(rec);
    int r;
    if (dp_unlikely(!ar_live(area))) {
        r = dp_fail(-ESTALE, "the area was destroyed");
    } else {
        DP_INJECT("area.op.checked");
        /* [hot path], the common case inline: a pool chunk on this thread's
         * list (a trim request is answered on the slow path, or at a free) */
        unsigned c = size <= AR_LARGE_FROM ? cls_of(size) : 0;
        dsmpool_ptr h = size <= AR_LARGE_FROM ? dp_load_relaxed(&rec->head[c]) : 0; /* relaxed: [hot path] */
        uint32_t ix;
        /* h: a pool chunk start of class c (data_off is a 2 MiB multiple) */
        if (dp_likely(h && !(h & FB_BIT) && chunk_at(c, span_rel(c, h), &ix) && !flags &&
                                 !(area->ctl->flags & DSMPOOL_AREA_CHECKED) &&
                                 h - area->data_off <= area->data_size - cls_size(c))) {
            char *m = area->base + h;
            dsmpool_ptr next;
            memcpy(&next, m, 8);
            /* the link is tested in full when it is popped in turn (above,
             * or dp_ar_alloc_small_op, which drops a damaged list): here only
             * what costs no multiply */
            if (dp_likely(!(next & (AR_MIN_ALIGN - 1)))) {
                dp_store_relaxed(&rec->head[c], next);
                dp_store_relaxed(&rec->count[c], dp_load_relaxed(&rec->count[c]) - 1);
                memset(m + 8, 0, 8); /* area_free.c [free tags]: an allocated chunk carries none */
                ar_count_asked(rec, asked, c);
                *out = h;
                ar_op_end(rec, s);
                return 0;
            }
        }
        /* relaxed: a request count (area_cache.c [short of memory]) */
        if (dp_load_relaxed(area->trimp) != tc->trim_seen) dp_ar_trim_answer(area, tc);
        r = alloc_route(area, tc, size, asked, flags, false, out);
    }
    ar_op_end(rec, s);
    dp_fallback_fire(r); /* fallback.c [spilling is visible]: after the operation */
    return r;
}

int dsmpool_area_alloc(dsmpool_area *area, size_t size, unsigned flags, dsmpool_ptr *out) {
    return area_alloc(area, size, size, flags, out);
}

int dsmpool_area_free(dsmpool_area *area, dsmpool_ptr p) {
    if (dp_unlikely(!area || area->magic != AR_OBJ_MAGIC)) return dp_fail(-EINVAL, "not an attached area");
    if (dp_unlikely(!p)) return dp_fail(-EINVAL, "free of the null pointer");
    ar_tc *tc = ar_tc_get(area);
    if (dp_unlikely(!tc)) return dp_ar_tc_err;
    ar_cache *rec = tc->rec;
    if (dp_unlikely(!rec)) return shared_free(area, tc, p);
    uint64_t s = ar_op_begin(rec);
    int r;
    if (dp_unlikely(!ar_live(area))) {
        r = dp_fail(-ESTALE, "the area was destroyed");
    } else {
        DP_INJECT("area.op.checked");
        /* relaxed: a request count (area_cache.c [short of memory]) */
        if (dp_unlikely(dp_load_relaxed(area->trimp) != tc->trim_seen))
            dp_ar_trim_answer(area, tc);
        /* [hot path], the common case inline: a pool chunk of this area, at a
         * chunk start, in an unchecked area, its tag not set (area_free.c
         * [free tags]), in memory not released (layout.c [lazy directory]) */
        uint64_t rel = p - area->data_off;
        if (dp_likely(!(p & FB_BIT) && rel < area->data_size && !(area->ctl->flags & DSMPOOL_AREA_CHECKED) &&
                                 dp_dir_readable(area->pool, rel))) {
            /* acquire: pairs with dp_ar_dir_set */
            uint64_t dw = dp_load_acquire(&area->pool->dir[rel >> AR_DIR_SHIFT]);
            unsigned c = DIRW_CLS(dw);
            uint32_t ix;
            /* a large block's class, or a damaged one, has no chunks: chunk_at
             * fails */
            if (dp_likely(DIRW_AID(dw) == area->aid && chunk_at(c, span_rel(c, rel), &ix) &&
                                     rel <= area->data_size - cls_size(c))) {
                char *m = area->base + p;
                uint64_t tag = ar_free_tag(area, p), have;
                memcpy(&have, m + 8, 8);
                if (dp_likely(have != tag)) {
                    ar_list_push_op(area, rec, c, p, m, tag);
                    ar_op_end(rec, s);
                    return 0;
                }
            }
        }
        r = dp_ar_free_op(area, tc, p); /* everything else, and every error message */
    }
    ar_op_end(rec, s);
    return r;
}

int dsmpool_area_flush(dsmpool_area *area) {
    if (!area || area->magic != AR_OBJ_MAGIC) return dp_fail(-EINVAL, "not an attached area");
    ar_tc *tc = ar_tc_get(area);
    if (!tc) return dp_ar_tc_err;
    if (!tc->rec) { /* area_shared.c [shared path]: it caches only the kept span */
        dp_bracket_open(area->pool);
        int r = ar_live(area) ? 0 : dp_fail(-ESTALE, "the area was destroyed");
        if (!r) dp_ar_keep_release(area);
        dp_bracket_close(area->pool);
        return r;
    }
    uint64_t s = ar_op_begin(tc->rec);
    int r = ar_live(area) ? 0 : dp_fail(-ESTALE, "the area was destroyed");
    if (r == 0) dp_ar_cache_answer(area, tc);
    ar_op_end(tc->rec, s);
    return r;
}

int dsmpool_area_alloc_aligned(dsmpool_area *area, size_t size, size_t align, unsigned flags,
                               dsmpool_ptr *out) {
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    *out = 0;
    if (!align || (align & (align - 1)))
        return dp_fail(-EINVAL, "alignment %zu is not a power of two", align);
    if (align > DSMPOOL_AREA_MAX_ALIGN)
        return dp_fail(-EINVAL, "alignment %zu is more than the %zu bytes an area promises in every "
                       "process (DSMPOOL_AREA_MAX_ALIGN)", align, (size_t)DSMPOOL_AREA_MAX_ALIGN);
    /* [aligned]: a chunk of class c is aligned to the largest power of two
     * dividing its size; take the first class at or above max(size, align)
     * whose size align divides (the power of two at or above it always
     * does, within seven classes); a block is aligned to its power of two */
    size_t want = size && size < align ? align : size;
    if (want && want <= AR_LARGE_FROM) {
        unsigned c = cls_of(want);
        while (cls_size(c) & (align - 1)) c++;
        want = cls_size(c); /* cls_of(want) == c */
    }
    return area_alloc(area, want, size, flags, out);
}

int dsmpool_area_realloc(dsmpool_area *area, dsmpool_ptr *p, size_t size, unsigned flags) {
    if (!p) return dp_fail(-EINVAL, "p must not be NULL");
    if (flags & ~(DSMPOOL_ALLOC_ZERO | DSMPOOL_ALLOC_INTERLEAVE)) return dp_fail(-EINVAL, "unknown flags 0x%x", flags);
    if (!*p) return dsmpool_area_alloc(area, size, flags, p);
    if (size == 0) return dp_fail(-EINVAL, "size 0 (free the allocation with dsmpool_area_free)");
    int r = dp_ar_query_ok(area);
    if (r) return r;
    ar_loc l;
    dsmpool_ptr start = 0, old = *p, np;
    uint64_t have = dp_ar_live_alloc(area, old, &start, &l);
    if (!have || start != old)
        return dp_fail(-EINVAL, "%016llx is not the start of a live allocation of this area", (unsigned long long)old);
    bool grown = size > have && l.cls == AR_LARGE_CLS && dp_ar_large_grow(area, &l, size);
    if (size <= have || grown) { /* [realloc]: in place */
        /* relaxed: the block's owner is the only writer; stats read it
         * approximately */
        if (l.cls == AR_LARGE_CLS) dp_store_relaxed(&l.sp->info, AR_INFO_LARGE(size));
        char *m = grown && (flags & DSMPOOL_ALLOC_ZERO) ? ar_addr_n(area, old, size) : NULL;
        if (m) memset(m + have, 0, size - have); /* pool memory: always mapped */
        return 0;
    }
    if ((r = dsmpool_area_alloc(area, size, flags & ~DSMPOOL_ALLOC_ZERO, &np)) != 0) return r;
    char *src = ar_addr_n(area, old, have), *dst = ar_addr_n(area, np, size);
    if (!src || !dst) {
        dsmpool_area_free(area, np);
        return dp_fail(-ESTALE, "an OS segment of %016llx cannot be mapped in this process",
                       (unsigned long long)(src ? np : old));
    }
    memcpy(dst, src, have);
    if (flags & DSMPOOL_ALLOC_ZERO) memset(dst + have, 0, size - have);
    if ((r = dsmpool_area_free(area, old)) != 0) { /* freed by someone else meanwhile */
        char why[256];
        snprintf(why, sizeof why, "%s", dsmpool_last_error());
        dsmpool_area_free(area, np);
        return dp_fail(r, "%s", why);
    }
    *p = np;
    return 0;
}
