/*
 * area_free.c -- freeing a chunk or a large block: the checks every free
 * makes, the double-free tests (free tags), and where the chunk goes on
 * each path: this thread's list inside an operation, its span's stack
 * inside a shared-path bracket.
 *
 * Layer: areas, above the caches and the span stacks; the public free
 * (area_alloc.c), and the allocation paths' undo (area_small.c,
 * area_large.c), call it.
 *
 * Rules
 *   [free tags] A freed chunk holds key ^ ptr at +8 (ar_free_tag; the key is
 *      random per area); allocation clears it (area_small.c [hand out]). A
 *      free that finds its tag intact is a double free: refused (-EINVAL),
 *      and looked for in this thread's cache and the span's stack for the
 *      message. A correct program cannot produce the tag: it would have to
 *      know the key.
 *   [double free] DSMPOOL_AREA_CHECKED adds the exact bitmap
 *      (area_registry.c [checked bitmaps]): a chunk start never handed out,
 *      which the tag cannot tell, is refused too. A large block's free owns
 *      its entry by one CAS (area_registry.c [entries]), so of two frees
 *      one is refused; a later one is refused until the area reuses the
 *      block's first page for a new block, which it would then free, as
 *      malloc would.
 *   [free paths] dp_ar_free_op runs inside an operation on tc->rec: the
 *      chunk goes on this thread's list (ar_list_push_op, the push that
 *      dsmpool_area_free's inlined case makes too; area_cache.c [drain]).
 *      dp_ar_free_bracketed runs inside a shared-path bracket (tc has no
 *      record): the chunk goes straight back to its span (area_span.c
 *      [stacks]). Either way it carries its tag before it leaves us
 *      (area_recover.c [lost chunks]). dp_ar_free_undo gives back what an
 *      allocation of this call made and cannot hand out, on the call's path.
 *
 * Crash bound: a free killed after its chunk's tag and link and before the
 * list head (or the stack's CAS) leaves the chunk tagged on no list, inside
 * an operation (or a bracket of an area with shared users): recovery makes
 * the lost sweep due, which gives it back. A large block killed between
 * owning its entry and releasing it leaves RETIRED(dead): recovery releases
 * it (area_registry.c [parts]).
 *
 * Memory ordering: a large block's entry is read by an acquire load (its
 * publication) and owned by an acq_rel CAS; a chunk's list push needs none
 * (area_cache.c [one writer]); a stack push is area_span.c's release CAS.
 *
 * Injection points: "area.free.linked" (a freed chunk's link and tag
 * written, the list head not yet; on the shared path, the tag written, the
 * push not yet): a test kills the freer there and the lost sweep must give
 * the chunk back.
 */

#include <string.h>

#include "area.h"
#include "area_pointer.h"
#include "area_registry.h"
#include "area_cache.h"

/* [free tags]: why the tag of p is intact -- for the message only. */
static const char *double_free_where(struct dsmpool_area *area, ar_tc *tc, ar_loc *l, dsmpool_ptr p) {
    ar_cache *rec = tc ? tc->rec : NULL;
    dsmpool_ptr h = rec ? dp_load_relaxed(&rec->head[l->cls]) : 0;
    for (uint64_t k = rec ? dp_load_relaxed(&rec->count[l->cls]) + 1 : 0; h && k; k--) {
        if (h == p) return "it is in this thread's cache";
        char *m = ar_addr_n(area, h, 8);
        if (!m) break;
        memcpy(&h, m, 8);
    }
    ar_span *sp = ar_locate_entry(area, l);
    if (sp) {
        uint64_t w = dp_load_acquire(&sp->state); /* acquire: dp_ar_span_push's release */
        uint32_t idx = SPW_HEAD(w), want = chunk_idx(l->cls, l->off) + 1;
        for (uint32_t k = SPW_COUNT(w); idx && k && idx <= cls_chunks(l->cls); k--) {
            if (idx == want) return "it is back on its span";
            char *m = ar_addr_n(area, l->span + chunk_off(l->cls, idx - 1), 4);
            if (!m) break;
            memcpy(&idx, m, 4);
        }
    }
    return "its free tag is intact (freed by another thread or process)";
}

/* The first half of every free, on either path: p must be this area's and
 * the start of a live allocation. A large block is given back here (1). A
 * chunk (0) passed the double-free tests ([free tags]; checked mode: its bit is
 * cleared now) and is left to the caller's push: where it is in *l and
 * *idx, its address in *m, the free tag it is to carry in *tag. < 0:
 * refused, with the message. */
static int free_check(struct dsmpool_area *area, ar_tc *tc, dsmpool_ptr p, ar_loc *l, uint32_t *idx, char **mp,
                      uint64_t *tagp) {
    if (dp_ar_locate(area, p, l) != 0)
        return dp_fail(-EINVAL, "%016llx does not point into this area (another area's, or "
                       "never allocated)", (unsigned long long)p);
    if (l->cls == AR_LARGE_CLS) {
        uint64_t w = dp_load_acquire(&l->sp->state); /* acquire: the entry's publication */
        if (SPW_ST(w) != SP_LARGE || l->off != 0)
            return dp_fail(-EINVAL, "%016llx is not the start of a live block (double free?)",
                           (unsigned long long)p);
        if (!dp_ar_entry_take_from(l->sp, &w, area->pool->slot))
            return dp_fail(-EINVAL, "%016llx was freed by someone else at the same time",
                           (unsigned long long)p);
        dp_ar_entry_release(area->pool, area->ctl, area->aid, l->e, l->sp, w, area->pool->slot);
        return 1;
    }
    if (!chunk_at(l->cls, l->off, idx))
        return dp_fail(-EINVAL, "%016llx is not the start of a chunk", (unsigned long long)p);
    char *m = ar_addr_n(area, p, 16);
    if (!m) /* an OS segment this process cannot map (its name is gone: the pool was destroyed) */
        return dp_fail(-ESTALE, "%016llx is in an OS segment that cannot be mapped here",
                       (unsigned long long)p);
    if ((area->ctl->flags & DSMPOOL_AREA_CHECKED) &&
        (!ar_locate_entry(area, l) || !dp_ar_checked_flip(area->pool, l->sp, *idx, false)))
        return dp_fail(-EINVAL, "%016llx is not allocated (double free)", (unsigned long long)p);
    uint64_t tag = ar_free_tag(area, p), have;
    memcpy(&have, m + 8, 8);
    if (dp_unlikely(have == tag))
        return dp_fail(-EINVAL, "double free of %016llx: %s", (unsigned long long)p,
                       double_free_where(area, tc, l, p));
    *mp = m;
    *tagp = tag;
    return 0;
}

/* [free paths]: free, inside an operation on tc->rec: a chunk goes on this
 * thread's list (ar_list_push_op); everything but the inlined common case of
 * dsmpool_area_free, and every error message. */
int dp_ar_free_op(struct dsmpool_area *area, ar_tc *tc, dsmpool_ptr p) {
    ar_loc l;
    uint32_t idx;
    char *m;
    uint64_t tag;
    int r = free_check(area, tc, p, &l, &idx, &m, &tag);
    if (r) return r < 0 ? r : 0;
    ar_list_push_op(area, tc->rec, l.cls, p, m, tag);
    return 0;
}

/* [free paths]: free, inside a shared-path bracket (tc has no record,
 * area_shared.c [shared path]): a chunk goes straight back to its span,
 * tagged before it leaves us (area_recover.c [lost chunks]). */
int dp_ar_free_bracketed(struct dsmpool_area *area, ar_tc *tc, dsmpool_ptr p) {
    ar_loc l;
    uint32_t idx;
    char *m;
    uint64_t tag;
    int r = free_check(area, tc, p, &l, &idx, &m, &tag);
    if (r) return r < 0 ? r : 0;
    if (!ar_locate_entry(area, &l))
        return dp_fail(-EINVAL, "%016llx: its span's entry is gone (damaged area)", (unsigned long long)p);
    memcpy(m + 8, &tag, 8);
    DP_INJECT("area.free.linked");
    dp_ar_span_push(area->pool, area->ctl, area->aid, l.e, l.sp, l.cls, idx, m, area->pool->slot);
    return 0;
}

/* An allocation this call made and cannot hand out (its OS segment cannot
 * be mapped here) goes back: inside the operation on tc->rec, or without a
 * record inside the shared-path bracket, that made it. */
int dp_ar_free_undo(struct dsmpool_area *a, ar_tc *tc, dsmpool_ptr p) {
    return tc->rec ? dp_ar_free_op(a, tc, p) : dp_ar_free_bracketed(a, tc, p);
}
