/*
 * area_small.c -- the cached small path: a chunk from this thread's cache
 * record (its free list, then its bump range), a refill when both are
 * empty, and what every chunk allocation does as the chunk leaves.
 *
 * Layer: areas, above the acquire (a refill may take a fresh span) and the
 * free (an allocation it cannot hand out goes back). The route
 * (area_alloc.c) calls dp_ar_alloc_small_op; the shared path
 * dp_ar_chunk_hand_out.
 *
 * Rules
 *   [refill] When the list and the range of a class are empty, the cache
 *      steals the whole returned stack of a span of the class (one CAS:
 *      area_span.c [stacks], [class again]), from where its last search
 *      stopped, onto its list; else it takes a fresh span (area_acquire.c
 *      [fresh spans]) and sets the bump range to all its chunks. A mid size
 *      asks for held chunks only, never a fresh span (area_alloc.c [mid
 *      sizes]).
 *   [damaged lists] A chunk popped off the list must be a whole chunk at a
 *      chunk start of its class, and the link it carries one too (a fallback
 *      pointer's is checked when it is popped in turn); else the list is
 *      dropped -- its chunks leak -- rather than a link that a
 *      use-after-free overwrote becoming an address handed out. A bump word
 *      that names another span than the thread's, or runs past it, is
 *      dropped the same way.
 *   [hand out] A chunk leaves the allocator for the caller on either path
 *      (this one and area_shared.c [take]): its free tag cleared
 *      (area_free.c [free tags]), its checked-mode bit set, zeroed if asked;
 *      one that cannot be mapped here to be zeroed goes back.
 *   [asked bytes] Each cache record adds what every chunk allocation asked
 *      for (asked) and its class size (given), plain stores on the record's
 *      first line, which the operation writes anyway (ar_count_asked;
 *      area_life.c [accounting]).
 *
 * Crash bound: an allocation killed after taking its chunk (list head or
 * bump word stored) and before returning leaves the chunk allocated, as a
 * death just after the return would; killed inside a refill's steal, after
 * the CAS and before the list head, the stolen chunks are tagged on no list
 * (area_recover.c [lost chunks]).
 *
 * Memory ordering: the list and range are this thread's own (area_cache.c
 * [one writer]); a refill's steal is an acquire CAS that sees the pushes'
 * links (dp_ar_span_push's release).
 */

#include <string.h>

#include "area.h"
#include "area_pointer.h"
#include "area_registry.h"

/* [refill]: refill class c of this thread's cache; held_only: from spans
 * the area holds, or -ENOSPC rather than a fresh span (area_alloc.c [mid
 * sizes]). */
static int refill(struct dsmpool_area *a, ar_tc *tc, unsigned c, bool held_only) {
    ar_ctl *ctl = a->ctl;
    ar_cache *rec = tc->rec;
    dsmpool *p = a->pool;
    if (dp_load_relaxed(&ctl->partial[c])) { /* relaxed: a hint */
        for (uint32_t k = 0; k < AR_REGPAGES; k++) {
            uint32_t pg = (uint32_t)((tc->scan[c] / AR_PER_PAGE + k) % AR_REGPAGES);
            if (!dp_load_relaxed(&ctl->regpage[pg])) continue;
            for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
                uint64_t e = (uint64_t)pg * AR_PER_PAGE + i;
                ar_span *sp = dp_ar_entry(p, ctl, e);
                if (!sp) break;
                uint64_t w = dp_load_relaxed(&sp->state);
                if (SPW_ST(w) != SP_SPAN || !SPW_COUNT(w) || (dp_load_relaxed(&sp->info) & 0xff) != c)
                    continue;
                if (SPW_COUNT(w) > cls_chunks(c) || SPW_HEAD(w) > cls_chunks(c))
                    continue; /* damaged: left as it is, for dsmpool_check() to report */
                /* steal the whole stack; acquire pairs with dp_ar_span_push's
                 * release */
                if (!dp_cas_acquire(&sp->state, &w, SPW(SPW_GEN(w) + 1, 0, 0, SP_SPAN))) continue;
                dp_fetch_add_relaxed(&ctl->partial[c], (uint64_t)-1);
                if (!dp_ar_steal_class_holds(a, c, e, sp, w)) continue;
                dsmpool_ptr base = dp_ar_entry_base(a, e, sp, dp_load_relaxed(&sp->block), c);
                uint32_t idx = SPW_HEAD(w), n = SPW_COUNT(w), got = 0;
                dsmpool_ptr head = dp_load_relaxed(&rec->head[c]);
                while (idx && got < n && idx <= cls_chunks(c)) {
                    dsmpool_ptr cp = base + chunk_off(c, idx - 1);
                    char *m = ar_addr_n(a, cp, 8);
                    if (!m) break;
                    uint32_t next;
                    memcpy(&next, m, 4);
                    memcpy(m, &head, 8);
                    head = cp;
                    got++;
                    idx = next;
                }
                dp_store_relaxed(&rec->head[c], head);
                dp_store_relaxed(&rec->count[c], dp_load_relaxed(&rec->count[c]) + got);
                tc->scan[c] = e + 1;
                if (got) return 0;
            }
        }
    }
    if (held_only) return -ENOSPC;
    uint64_t e;
    dsmpool_ptr base;
    ar_want w = {.cls = c, .order = cls_span_order(c), .keep = cls_keep(c)};
    int r = dp_ar_acquire(a, tc, &w, &e, &base);
    if (r) return r;
    tc->span_ptr[c] = base;
    tc->span_e1[c] = (uint32_t)(e + 1);
    dp_store_relaxed(&rec->bump[c], BUMP(e + 1, 0, cls_chunks(c)));
    return 0;
}

/* [hand out]: a chunk of class c at h (mapped at m) leaves the allocator
 * for the caller (both paths): its free tag cleared (area_free.c [free
 * tags]), its checked-mode bit set, zeroed if asked. Inside the caller's
 * operation or bracket. */
int dp_ar_chunk_hand_out(struct dsmpool_area *a, ar_tc *tc, unsigned c, dsmpool_ptr h, char *m, size_t size,
                         unsigned flags) {
    memset(m + 8, 0, 8); /* area_free.c [free tags]: an allocated chunk carries no free tag */
    if (a->ctl->flags & DSMPOOL_AREA_CHECKED) {
        ar_loc l;
        if (dp_ar_locate(a, h, &l) == 0 && ar_locate_entry(a, &l))
            dp_ar_checked_flip(a->pool, l.sp, chunk_idx(c, l.off), true);
    }
    if (flags & DSMPOOL_ALLOC_ZERO) {
        if (!(m = ar_addr_n(a, h, size))) {
            dp_ar_free_undo(a, tc, h);
            return dp_fail(-ENOMEM, "cannot map the OS segment of the new chunk in this process");
        }
        memset(m, 0, size);
    }
    return 0;
}

/* A chunk of size's class from this thread's cache, inside an operation on
 * tc->rec ([refill], [damaged lists], [hand out], [asked bytes]). */
int dp_ar_alloc_small_op(struct dsmpool_area *area, ar_tc *tc, size_t size, size_t asked, unsigned flags,
                         bool held_only, dsmpool_ptr *out) {
    unsigned c = cls_of(size);
    ar_cache *rec = tc->rec;
    dsmpool_ptr h;
    char *m = NULL;
    for (;;) {
        h = dp_load_relaxed(&rec->head[c]); /* relaxed: area_cache.c [one writer] */
        if (h) {
            /* a whole chunk, at a chunk start, or the list is damaged (pool
             * spans start at multiples of their size: data_off is a 2 MiB one;
             * a fallback pointer's offset bits are its span's block's) */
            uint32_t ix;
            m = chunk_at(c, span_rel(c, h), &ix) ? ar_addr_n(area, h, cls_size(c)) : NULL;
            dsmpool_ptr next = 0;
            if (m) memcpy(&next, m, 8);
            /* a link a use-after-free overwrote must not become an address
             * we hand out: the list is dropped (its chunks leak) instead */
            if (!m || (next && !(next & FB_BIT) && !chunk_at(c, span_rel(c, next), &ix))) {
                dp_store_relaxed(&rec->head[c], 0);
                dp_store_relaxed(&rec->count[c], 0);
                if (!m) continue;
                next = 0;
            }
            dp_store_relaxed(&rec->head[c], next);
            dp_store_relaxed(&rec->count[c], dp_load_relaxed(&rec->count[c]) - 1);
            break;
        }
        uint64_t b = dp_load_relaxed(&rec->bump[c]);
        if (BUMP_LEFT(b)) {
            /* the base is ours (process-local); a word that names another span
             * or runs past this one is damaged: drop the range */
            if (dp_unlikely(BUMP_IDX(b) >= cls_chunks(c) || BUMP_E1(b) != tc->span_e1[c])) {
                dp_store_relaxed(&rec->bump[c], 0);
                continue;
            }
            h = tc->span_ptr[c] + chunk_off(c, BUMP_IDX(b));
            dp_store_relaxed(&rec->bump[c], BUMP_TAKE(b));
            m = !(h & FB_BIT) ? area->base + h : ar_addr_n(area, h, 16);
            if (!m) continue;
            break;
        }
        int r = refill(area, tc, c, held_only);
        if (r) return r;
    }
    int r = dp_ar_chunk_hand_out(area, tc, c, h, m, size, flags);
    if (r) return r;
    ar_count_asked(rec, asked, c);
    *out = h;
    return 0;
}
