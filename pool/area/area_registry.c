/*
 * area_registry.c -- registry entries, the directory, cache record pages, checked-mode bitmaps
 *
 * (Split out of area.c; its design comment, in dp_area.h until the next
 * commit, is divided by concern there.)
 */

#define DP_AREA_INSIDE
#include "dp_area.h"

/* The bytes the pool block word blk of entry sp holds, if the entry's own
 * record agrees (rule 13): an exact word's frames equal sp->seg (at most
 * the new size while a grow runs, or ran and died: the frames it took and
 * had not published are the sweep's), any other word has seg 0. 0: a
 * damaged word, never freed or marked as the entry's. */
uint64_t dp_ar_entry_block_bytes(const ar_span *sp, uint64_t blk) {
    uint64_t n = dp_block_frames(blk), rec = dp_load_relaxed(&sp->seg); /* [imm while live] */
    if (!n) return 0;
    if (!(blk & DP_BLOCK_EXACT)) return rec ? 0 : n * DP_FRAME_SIZE;
    if (rec & AR_SEG_GROWING) return n <= (rec & ~AR_SEG_GROWING) ? n * DP_FRAME_SIZE : 0;
    return rec == n ? n * DP_FRAME_SIZE : 0;
}

ar_span *dp_ar_entry(dsmpool *p, ar_ctl *ctl, uint64_t e) {
    if (e >= AR_MAX_ENTRIES) return NULL;
    uint64_t off = dp_load_acquire(&ctl->regpage[e / AR_PER_PAGE]); /* acquire: page link */
    if (!off || !dp_block_ok(p, off, DP_FRAME_SIZE)) return NULL;
    return (ar_span *)dp_at(p, off) + e % AR_PER_PAGE;
}

/* Cache record i, if its page exists (NULL: none yet, or a damaged link:
 * the walks skip it; a missing page's records are all free). */
ar_cache *dp_ar_cache_rec(dsmpool *p, ar_ctl *ctl, uint32_t i) {
    if (i >= AR_NCACHES) return NULL;
    uint64_t off = dp_load_acquire(&ctl->recpage[i / AR_RECS_PER_PAGE]); /* acquire: dp_block_link's CAS */
    if (!off || !dp_block_ok(p, off, AR_RECPAGE_BYTES)) return NULL;
    return (ar_cache *)dp_at(p, off) + i % AR_RECS_PER_PAGE;
}

/* The directory words of the granules [off, off + bytes) touches (a range
 * may start and end inside a granule: a grown block, an exact one). */
void dp_ar_dir_set(dsmpool *p, uint64_t off, uint64_t bytes, uint64_t w) {
    if (!bytes) return;
    uint64_t k0 = (off - p->geo.data_off) >> AR_DIR_SHIFT, k1 = (off + bytes - 1 - p->geo.data_off) >> AR_DIR_SHIFT;
    for (uint64_t k = k0; k <= k1 && k < p->geo.dir_count; k++)
        dp_store_release(&p->dir[k], w); /* release: entry is set up */
}

/* Claim a FREE registry entry of page pg as INIT(owner, order); -1: none. */
static int64_t entry_claim_in(dsmpool *p, ar_span *pg, uint32_t k, unsigned order) {
    for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
        uint64_t w = dp_load_relaxed(&pg[i].state); /* relaxed: the CAS validates */
        if (SPW_ST(w) != SP_FREE) continue;
        /* acq_rel: acquire pairs with dp_ar_entry_release's FREE store (or dp_area_drop_os's) */
        if (dp_cas_acq_rel(&pg[i].state, &w, SPW_INIT(SPW_GEN(w) + 1, p->slot, order)))
            return (int64_t)k * AR_PER_PAGE + i;
    }
    return -1;
}

/* Claim a FREE registry entry among the first `pages` registry pages as
 * INIT(owner, order): the pages that exist first, from the one the hint
 * names (ctl->claim_pg: the page of the last entry given back, or of the
 * last claim) round to it, so that a claim does not walk every live entry
 * before the free one; then from the first page, adding one if all are
 * taken. Returns the entry index or -errno. */
int64_t dp_ar_entry_claim(struct dsmpool_area *a, unsigned order, uint32_t pages) {
    dsmpool *p = a->pool;
    ar_ctl *ctl = a->ctl;
    uint32_t from = atomic_load_explicit(&ctl->claim_pg, memory_order_relaxed); /* relaxed: a hint */
    if (from >= pages) from = 0;
    for (uint32_t n = 0; n < pages; n++) {
        uint32_t k = (from + n) % pages;
        uint64_t off = dp_load_acquire(&ctl->regpage[k]); /* acquire: the link CAS */
        if (!off) continue;
        if (!dp_block_ok(p, off, DP_FRAME_SIZE)) return -EUCLEAN;
        int64_t e = entry_claim_in(p, dp_at(p, off), k, order);
        if (e >= 0) {
            if (k != from) atomic_store_explicit(&ctl->claim_pg, k, memory_order_relaxed); /* relaxed: a hint */
            return e;
        }
    }
    for (uint32_t k = 0; k < pages; k++) {
        uint64_t off = dp_frame_link(p, &ctl->regpage[k]);
        if (!off) return -ENOMEM;
        if (!dp_block_ok(p, off, DP_FRAME_SIZE)) return -EUCLEAN;
        int64_t e = entry_claim_in(p, dp_at(p, off), k, order);
        if (e >= 0) {
            atomic_store_explicit(&ctl->claim_pg, k, memory_order_relaxed); /* relaxed: a hint */
            return e;
        }
    }
    return -ENOSPC;
}

/* Clear the directory words of [off, off+bytes) that name (aid, e).
 * Returns whether every granule of the range named it. */
static bool dir_clear(dsmpool *p, uint64_t aid, uint64_t e, uint64_t off, uint64_t bytes) {
    bool all = true;
    if (!bytes) return true;
    uint64_t k0 = (off - p->geo.data_off) >> AR_DIR_SHIFT, k1 = (off + bytes - 1 - p->geo.data_off) >> AR_DIR_SHIFT;
    for (uint64_t k = k0; k <= k1; k++) {
        if (k >= p->geo.dir_count) return false;
        uint64_t dw = dp_load_relaxed(&p->dir[k]);
        if (DIRW_AID(dw) == aid && DIRW_ENTRY(dw) == e)
            dp_store_release(&p->dir[k], 0); /* release: before the block goes */
        else
            all = false;
    }
    return all;
}

/* Take and give back the parts an entry holds: its block (a pool block, or
 * the pin of a fallback OS segment) and its checked-mode bitmap. Only the
 * entry's owner calls this (rule 5); each part is taken by exchange all the
 * same, so a recoverer that repeats a dead owner's release frees nothing
 * twice. Returns the bytes of the block this call took (0: none). */
static uint64_t entry_free_parts(dsmpool *p, uint64_t aid, uint64_t e, ar_span *sp, uint32_t slot) {
    dp_inflight_begin(p);
    /* acq_rel: the exchange is the unrecording; acquire sees the filler's writes */
    uint64_t blk = atomic_exchange_explicit(&sp->block, 0, memory_order_acq_rel), took = 0;
    if (blk == DP_BLOCK_FALLBACK) {
        dsmpool_handle h = dp_load_relaxed(&sp->seg);
        took = dp_seg_os_size(p, h);
        dp_seg_unpin_quiet(p, h, slot);
    } else if (blk && DP_BLOCK_ORDER(blk) <= DP_PA_MAX_ORDER) {
        took = dp_ar_entry_block_bytes(sp, blk);
        /* A damaged word is never freed: one past the data, one whose
         * frames disagree with the entry's record, or whose frames the
         * directory does not say are the entry's (a scribbled trim code
         * naming a tail given back, rule 13). A filler that died before its
         * directory words were set leaves its block to the leak sweep the
         * same way. */
        if (dp_block_ok(p, DP_BLOCK_OFF(blk), took) && dir_clear(p, aid, e, DP_BLOCK_OFF(blk), took))
            dp_pool_free(p, blk);
        else
            took = 0;
    }
    uint64_t info = atomic_exchange_explicit(&sp->info, 0, memory_order_acq_rel);
    uint64_t bm = ar_info_bitmap(info);
    unsigned bo = cls_bm_order((unsigned)(info & 0xff));
    if (bm && dp_block_ok(p, bm, (uint64_t)DP_FRAME_SIZE << bo)) dp_pool_free(p, DP_BLOCK_MK(bm, bo));
    dp_inflight_end(p);
    return took;
}

/* Give back what an entry holds, then FREE it. The caller owns the entry:
 * it moved it to RETIRED(itself) by CAS from prev (rule 5). */
void dp_ar_entry_release(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp,
                          uint64_t prev, uint32_t slot) {
    uint64_t bytes = entry_free_parts(p, aid, e, sp, slot);
    /* the held bytes go with the block that was taken, or with the INIT
     * reservation when nobody had put a block in yet (or its filler took it) */
    if (!bytes && SPW_ST(prev) == SP_INIT) bytes = (uint64_t)DP_FRAME_SIZE << SPW_INIT_ORDER(prev);
    if (bytes) dp_fetch_add_relaxed(&ctl->held, (uint64_t)-bytes);
    dp_store_relaxed(&sp->seg, 0);
    dp_store_release(&sp->state, SPW(SPW_GEN(prev) + 1, 0, 0, SP_FREE)); /* release: dp_ar_entry_claim */
    /* relaxed: a hint; the next claim looks here first */
    atomic_store_explicit(&ctl->claim_pg, (uint32_t)(e / AR_PER_PAGE), memory_order_relaxed);
}

/* Rule 5: own the entry whose word is *w by one CAS to RETIRED(slot). */
bool dp_ar_entry_take_from(ar_span *sp, uint64_t *w, uint32_t slot) {
    uint64_t prev = *w;
    /* acq_rel: exclusive; acquire sees the previous owner's writes */
    if (!dp_cas_acq_rel(&sp->state, w, SPW_OWNED(SPW_GEN(prev) + 1, slot, SP_RETIRED))) return false;
    *w = prev;
    return true;
}

/* The owner of INIT(mine) gives it back itself (a failed fill, or DOOMED). */
void dp_ar_entry_abandon(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp,
                          uint64_t mine) {
    uint64_t w = dp_load_acquire(&sp->state); /* acquire: a destroyer's DOOMED */
    if ((w & ~SPW_DOOMED) != mine) return; /* not ours any more: a damaged word; never touch it */
    if (dp_ar_entry_take_from(sp, &w, p->slot)) dp_ar_entry_release(p, ctl, aid, e, sp, w, p->slot);
}

/* Flip chunk idx's bit in the span's bitmap: set on alloc, clear on free.
 * Returns false when it already had the new value. */
bool dp_ar_checked_flip(dsmpool *p, ar_span *sp, uint32_t idx, bool set) {
    uint64_t info = dp_load_relaxed(&sp->info), bm = ar_info_bitmap(info);
    unsigned c = (unsigned)(info & 0xff);
    if (!bm || !dp_block_ok(p, bm, (uint64_t)DP_FRAME_SIZE << cls_bm_order(c)) || idx >= cls_chunks(c)) return true;
    dp_a64 *word = (dp_a64 *)dp_at(p, bm) + idx / 64;
    uint64_t bit = 1ull << (idx % 64);
    /* relaxed: the bitmap orders nothing, it only remembers */
    uint64_t old = set ? atomic_fetch_or_explicit(word, bit, memory_order_relaxed)
                       : atomic_fetch_and_explicit(word, ~bit, memory_order_relaxed);
    return set ? !(old & bit) : (old & bit) != 0;
}

/* Checked mode: is chunk idx's bit set (allocated)? Reads only. */
bool dp_ar_checked_test(dsmpool *p, ar_span *sp, uint32_t idx) {
    uint64_t info = dp_load_relaxed(&sp->info), bm = ar_info_bitmap(info);
    unsigned c = (unsigned)(info & 0xff);
    if (!bm || !dp_block_ok(p, bm, (uint64_t)DP_FRAME_SIZE << cls_bm_order(c)) || idx >= cls_chunks(c)) return true;
    /* relaxed: the bitmap orders nothing, it only remembers */
    return (dp_load_relaxed((dp_a64 *)dp_at(p, bm) + idx / 64) >> (idx % 64)) & 1;
}
