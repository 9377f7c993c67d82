/*
 * area_acquire.c -- a fresh span or large block: held bytes reserved, a
 * registry entry claimed, a block from the pool (its tail given back at
 * once) or an OS segment, the directory set, the entry published.
 *
 * Layer: areas, above the caches (when the pool is short this thread's
 * caches give back first); the refill, the shared path and large blocks
 * call it.
 *
 * Rules
 *   [fresh spans] A span or large block is acquired inside the caller's
 *      operation (a cache record's, or a shared-path bracket) and inside one
 *      bracket of the slot (proc.c [brackets]), from the claim of its entry to
 *      its publication: held bytes reserved, an entry claimed as INIT(us,
 *      order) (area_registry.c [entries]), the checked-mode bitmap and the
 *      info word, the block (a span from the thread's own node first), the
 *      entry's record and block word, the directory words, then one CAS to
 *      SPAN or LARGE. A failure, or a CAS that finds the word DOOMED, gives
 *      the entry back (dp_ar_entry_abandon), and the reservation with it.
 *   [reserve] held plus what the block will hold must stay within the
 *      area's limit (a CAS on held alone decides). An exact span's or
 *      block's power of two is reserved -- what an INIT entry gives back --
 *      and lowered to the exact bytes once the tail went back; so for a
 *      moment a thread near the limit can be refused for another's
 *      reservation, and a trim cut short leaves held above the limit by what
 *      it kept.
 *   [exact blocks] Exact spans (area.c [exact spans]) and large
 *      blocks (area_large.c [large blocks]) take their power of two and give
 *      the pages past what they keep back at once (dp_pool_alloc_exact:
 *      proc.c [exact blocks], which makes only what is kept resident); an
 *      OS segment is made that size. The
 *      entry's record of the frames is written before the block word
 *      (area_registry.c [exact records]).
 *   [shortage] When the pool cannot serve, this thread's caches give back
 *      first -- its own record of this area (dp_ar_trim_answer), or without
 *      one the kept span (area_span.c [kept span]), then its caches of the
 *      pool's other areas -- and then the segment layer asks everyone and
 *      waits (dp_seg_block_short; area_cache.c [short of memory]); then
 *      comes an OS segment, unless the area says DSMPOOL_AREA_NO_FALLBACK or
 *      has no tag (area_pointer.c [fallback pointers]), or it would pass 4
 *      GiB. A mid-size block asks for neither: its class serves instead
 *      (area_alloc.c [mid sizes]); and it claims entries in the registry's
 *      first half only, which leaves the rest for spans and large blocks.
 *   [chained spans] A span for the shared path is published with every
 *      chunk but the first on its stack, tagged and linked while the entry
 *      is still INIT (a death before the publication gives the whole block
 *      back); chunk 0 is the caller's (area_shared.c [shared path]).
 *
 * Crash bound: a process killed while its entry is INIT leaves it to
 * recovery, which gives back what the exchanges find and the reservation
 * (area_registry.c [parts]). Killed between the pool's allocation and the
 * block word, it leaves a block that nothing names, inside a bracket: the
 * leak sweep's -- never a word that its entry's record disagrees with,
 * since the record comes first. Killed after the reservation and before
 * the entry records it, or before held is lowered to the exact bytes, it
 * leaves held too high: it died inside an operation (or a shared-path
 * bracket), so the lost sweep is due, and it sets held to the entries' sum
 * (area_recover.c [lost chunks]).
 *
 * Memory ordering: the info word, the block word, the directory words and
 * (a chained span) the chunks' links are set before the publishing CAS, a
 * release: dp_ar_locate's and dp_ar_fb_map's acquire loads of the state,
 * and a steal's acquire CAS, see them. held and the partial hints are
 * relaxed counters (the CAS on held alone enforces the limit).
 *
 * Injection points: "area.acquire.stored" (an INIT entry holds its block,
 * before the publishing CAS: a test stops the filler there while the area
 * is destroyed, and its publication must fail DOOMED and give the block
 * back).
 */

#include <string.h>

#include <stdio.h>

#include "area.h"
#include "area_pointer.h"
#include "area_acquire.h"

#ifdef DP_INJECTION
/* test-only: keep a new exact span's or block's whole power of two, as a
 * trim that stops at its first piece does (palloc.c [exact blocks]): an exact word
 * that gave nothing back */
_Atomic bool dp_ar_untrimmed;
#define AR_TEST_UNTRIMMED dp_load_relaxed_any(&dp_ar_untrimmed)
#else
#define AR_TEST_UNTRIMMED false
#endif

/* [reserve]: add bytes to held if held + need stays within the limit.
 * need < bytes for an exact span or large block: its power of two is
 * reserved (what an INIT entry gives back) and lowered to the exact bytes
 * once the tail went back, but the limit is judged on what it will hold. */
static int held_reserve_for(ar_ctl *ctl, uint64_t bytes, uint64_t need) {
    uint64_t lim = dp_load_relaxed(&ctl->limit); /* relaxed: a setting */
    uint64_t h = dp_load_relaxed(&ctl->held);
    for (;;) {
        if (lim && (h + need > lim || h + bytes < h))
            return dp_fail(-ENOMEM, "the area's limit of %llu bytes would be passed (it holds %llu)",
                           (unsigned long long)lim, (unsigned long long)h);
        /* relaxed: a counter; the limit is enforced by this CAS alone */
        if (dp_cas_weak_relaxed(&ctl->held, &h, h + bytes))
            return 0;
    }
}

int dp_ar_held_reserve(ar_ctl *ctl, uint64_t bytes) { return held_reserve_for(ctl, bytes, bytes); }

/* [chained spans]: link chunks 1.. of a fresh span of class c at base into
 * one stack, each with its free tag (area_recover.c [lost chunks]), before
 * the span is published.
 * Returns how many were linked (0: the span could not be mapped here). */
static uint32_t span_chain(struct dsmpool_area *a, unsigned c, dsmpool_ptr base) {
    uint32_t n = cls_chunks(c);
    if (n < 2 || !ar_addr_n(a, base, cls_len(c))) return 0;
    for (uint32_t i = 1; i < n; i++) {
        dsmpool_ptr cp = base + chunk_off(c, i);
        char *m = ar_addr_n(a, cp, 16);
        uint32_t next = i + 1 < n ? i + 2 : 0; /* the next chunk's index + 1; 0 ends the stack */
        uint64_t tag = ar_free_tag(a, cp);
        memcpy(m, &next, 4);
        memcpy(m + 8, &tag, 8);
    }
    return n - 1;
}

/* [fresh spans]: a span of class w->cls, or a large block of 2^order
 * frames (ar_want, area.h), inside the caller's operation and one bracket
 * (proc.c [brackets]), from the claim of the entry to its publication. */
static int acquire_bracketed(struct dsmpool_area *a, ar_tc *tc, const ar_want *w, uint64_t *entry,
                             dsmpool_ptr *base) {
    unsigned cls = w->cls, order = w->order, place = w->place;
    uint64_t keep = w->keep, asked = w->asked;
    bool chain = w->chain, mid = w->mid;
    dsmpool *p = a->pool;
    ar_ctl *ctl = a->ctl;
    uint64_t bytes = (uint64_t)DP_FRAME_SIZE << order;
    int r = held_reserve_for(ctl, bytes, keep ? keep * DP_FRAME_SIZE : bytes);
    if (r) return r;
    /* a mid-size block only in the registry's first half: the rest stays
     * for spans and large blocks ([shortage]) */
    int64_t e = dp_ar_entry_claim(a, order, mid ? AR_REGPAGES / 2 : AR_REGPAGES);
    if (e < 0) {
        dp_fetch_add_relaxed(&ctl->held, (uint64_t)-bytes);
        if (mid) return -ENOSPC; /* the caller takes a chunk of the class instead */
        return dp_fail(e == -ENOSPC ? -ENOMEM : (int)e, "the area's registry is full (%u entries)",
                       AR_MAX_ENTRIES);
    }
    /* From here the entry is INIT(us): every part we put in is put where the
     * release's exchange finds it, and a failure gives the entry back
     * (dp_ar_entry_abandon returns the held reservation). */
    ar_span *sp = dp_ar_entry(p, ctl, (uint64_t)e);
    if (!sp) return dp_fail(-EUCLEAN, "the area's registry page vanished (damaged control block)");
    uint64_t mine = dp_load_relaxed(&sp->state);
    if ((ctl->flags & DSMPOOL_AREA_CHECKED) && cls != AR_LARGE_CLS) {
        uint64_t bm;
        r = dp_pool_alloc(p, cls_bm_order(cls), &bm);
        if (r == 0) {
            memset(dp_at(p, DP_BLOCK_OFF(bm)), 0, (size_t)DP_FRAME_SIZE << cls_bm_order(cls));
            dp_store_release(&sp->info, DP_BLOCK_OFF(bm) | cls); /* release: owned before the bracket ends */
        } else {
            dp_ar_entry_abandon(p, ctl, a->aid, (uint64_t)e, sp, mine);
            return dp_fail(-ENOMEM, "no pool memory for the checked-mode bitmap");
        }
    } else {
        /* release: owned before the bracket ends */
        dp_store_release(&sp->info, cls == AR_LARGE_CLS ? AR_INFO_LARGE(asked) : cls);
    }
    uint64_t blk = 0;
    /* spans: the thread's own node first; an exact block is trimmed at once
     * and only what it keeps is made resident (proc.c [exact blocks]) */
    uint64_t exact = keep && !AR_TEST_UNTRIMMED ? keep : 0;
    uint64_t refills_failed = dp_load_relaxed(&p->hdr->refill_failures); /* relaxed: segment.c [short of memory] */
    r = exact ? dp_pool_alloc_exact(p, order, place, exact, &blk) : dp_pool_alloc_placed(p, order, place, &blk);
    if (r && mid) { /* no trim request and no OS segment for a mid-size block: its class serves */
        dp_ar_entry_abandon(p, ctl, a->aid, (uint64_t)e, sp, mine);
        return -ENOMEM;
    }
    if (r && r != -EUCLEAN) { /* [shortage]: this thread's caches give back, then everyone's */
        if (tc && tc->rec) {
            dp_ar_trim_answer(a, tc);
        } else { /* the shared path: no cache of ours here to give back */
            dp_ar_keep_release(a);
            dp_ar_trim_thread(p);
        }
        r = dp_seg_block_short(p, order, place, exact, refills_failed, &blk);
    }
    if (r == 0) {
        if (keep && !exact) /* [exact blocks]: a test's untrimmed exact word */
            blk = dp_block_mk_trimmed(DP_BLOCK_OFF(blk), order, 0);
        /* the entry's record first: a death before the block word leaves a
         * block owned by nothing (the sweep's), never a word it disagrees with */
        if (blk & DP_BLOCK_EXACT) dp_store_relaxed(&sp->seg, dp_block_frames(blk));
        dp_store_release(&sp->block, blk); /* release: owned before the bracket ends */
        dp_ar_dir_set(p, DP_BLOCK_OFF(blk), DP_BLOCK_BYTES(blk), DIRW(a->aid, (uint64_t)e, cls));
        /* the reservation was the power of two; a death before this leaves
         * held too high, which the lost sweep sets right (held_sum) */
        if (DP_BLOCK_BYTES(blk) != bytes)
            dp_fetch_add_relaxed(&ctl->held, DP_BLOCK_BYTES(blk) - bytes); /* relaxed: a counter */
        *base = DP_BLOCK_OFF(blk);
    } else {
        void *m = NULL;
        dsmpool_handle h = 0;
        uint64_t fbytes = keep ? keep * DP_FRAME_SIZE : bytes; /* an OS segment is exact too */
        char why[900] = "";
        if (r != -EUCLEAN && !(ctl->flags & DSMPOOL_AREA_NO_FALLBACK) && a->tag && fbytes <= (1ull << 32)) {
            r = dp_seg_os_create(p, fbytes, &h, &m);
            if (r == -ENOMEM) snprintf(why, sizeof why, ": %s", dsmpool_last_error()); /* segment.c: the room's */
        }
        if (r || !h) {
            dp_ar_entry_abandon(p, ctl, a->aid, (uint64_t)e, sp, mine);
            if (r == -EUCLEAN) return dp_fail(r, "the pool's allocator is damaged; dsmpool_check() says where");
            return dp_fail(-ENOMEM, "no free block of %llu bytes in the pool%s%s",
                           (unsigned long long)bytes,
                           (ctl->flags & DSMPOOL_AREA_NO_FALLBACK) ? " (DSMPOOL_AREA_NO_FALLBACK)"
                           : !a->tag ? " (and the area has no tag for OS segments)"
                                     : " and the OS fallback failed", why);
        }
        dp_store_relaxed(&sp->seg, h);
        dp_store_release(&sp->block, DP_BLOCK_FALLBACK);
        if (fbytes != bytes) /* as above */
            dp_fetch_add_relaxed(&ctl->held, fbytes - bytes); /* relaxed: a counter */
        dp_ar_fb_remember(a, (uint64_t)e, m, fbytes, h); /* without memory: mapped again on first use */
        *base = dp_ar_fb_base(a, (uint64_t)e, h, fbytes);
    }
    /* [chained spans]: a shared-path span is published with every chunk but the
     * first on its stack, tagged and linked while the entry is still ours
     * (a death before the publication gives the whole block back) */
    uint32_t stacked = chain && cls != AR_LARGE_CLS ? span_chain(a, cls, *base) : 0;
    if (chain && cls != AR_LARGE_CLS && !stacked) { /* its chunks could be reached by nobody */
        dp_ar_entry_abandon(p, ctl, a->aid, (uint64_t)e, sp, mine);
        return dp_fail(-ENOMEM, "cannot map the new span's OS segment in this process");
    }
    DP_INJECT("area.acquire.stored");
    /* release: block, info, directory and the chunks' links are set before
     * the entry is live */
    uint64_t live = SPW(SPW_GEN(mine), stacked, stacked ? 2 : 0, cls == AR_LARGE_CLS ? SP_LARGE : SP_SPAN);
    if (!dp_cas_release(&sp->state, &mine, live)) {
        /* DOOMED by a destroyer (area_registry.c [entries]): the entry is
         * still ours; give it back */
        dp_ar_entry_abandon(p, ctl, a->aid, (uint64_t)e, sp, mine & ~SPW_DOOMED);
        return dp_fail(-ESTALE, "the area was destroyed");
    }
    if (stacked) dp_fetch_add_relaxed(&ctl->partial[cls], 1); /* relaxed: a hint */
    *entry = (uint64_t)e;
    return 0;
}

/* acquire_bracketed in a bracket of its own: inside the caller's operation. */
int dp_ar_acquire(struct dsmpool_area *a, ar_tc *tc, const ar_want *w, uint64_t *entry, dsmpool_ptr *base) {
    dp_bracket_open(a->pool);
    int r = acquire_bracketed(a, tc, w, entry, base);
    dp_bracket_close(a->pool);
    return r;
}
