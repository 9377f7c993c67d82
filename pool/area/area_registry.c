/*
 * area_registry.c -- an area's registry of span entries, the pool-wide
 * directory that maps a page to its entry, the cache record pages, and the
 * checked-mode bitmaps: who owns an entry, and how its parts go back.
 *
 * Layer: areas, above area.c. Every file above owns entries through
 * dp_ar_entry_take_from and gives their parts back through
 * dp_ar_entry_release.
 *
 * Shared state
 *   registry  4 KiB pages of 32-byte span entries {state, block, segment,
 *             info} (ar_span); entry e is page e / 128, slot e % 128. The
 *             control block's table of 1024 page offsets (2^17 entries) is
 *             linked one page at a time by one CAS (dp_frame_link) on first
 *             need; the final destroy frees the pages (area_life.c [final
 *             destroy]).
 *   records   the cache records (area_cache.c [records]) live in 16 KiB
 *             pool blocks of 7 (256 records in all), each linked into
 *             ctl->recpage by one CAS (dp_block_link) when every record
 *             before it is held and freed by the final destroy, so a new
 *             area's control block is 16 KiB. Walkers of the records visit
 *             the pages that exist, each link validated first
 *             (dp_ar_cache_rec).
 *   directory a pool-wide word per 4 KiB of data (a frame) naming the
 *             (area, entry, class) of the span or large block there.
 *
 * Rules
 *   [entries] An entry is filled by its owner in INIT(owner) and published
 *      by one CAS to SPAN or LARGE (area_acquire.c [fresh spans]). Whoever
 *      gives an entry's parts back owns it first: it moved the entry to
 *      RETIRED(itself) by a CAS on the word it read, generation included
 *      (dp_ar_entry_take_from). Nobody takes an INIT or RETIRED entry whose
 *      owner lives: a destroyer that finds one marks it DOOMED and leaves it
 *      (area_life.c [destroy]), and the owner's publishing CAS then fails
 *      and it gives the parts back itself (dp_ar_entry_abandon); an owner
 *      never writes into, or frees from, an entry that is not in the state
 *      it left it in.
 *   [parts] Only an entry's owner gives its parts back -- its block (a
 *      pool block, or the pin of a fallback OS segment) and its checked-mode
 *      bitmap -- each taken by exchange all the same, so a recoverer that
 *      repeats a dead owner's release frees nothing twice. The held bytes go
 *      with the block that was taken, or with the INIT reservation when
 *      nobody had put a block in yet; then the entry is FREE.
 *   [directory] A word per frame, [area id (ctl descriptor + 1):33]
 *      [entry + 1:24][class:7]; blocks are exact to the page, so no two
 *      share a word. A span or block writes all its words when acquired
 *      (before its entry is published) and clears those that name it when
 *      retired (before its block goes); free() finds a chunk's span with
 *      one load (the span's start: the pointer rounded down to the class's
 *      span size, area.c [placement]), and a pointer of another area
 *      is refused. A class that is neither a span's (< AR_NCLS) nor
 *      AR_LARGE_CLS is damage. A block whose words do not all name its
 *      entry is never freed as the entry's.
 *   [exact records] An exact block's entry keeps its own record of the
 *      block's frames (seg, unused by pool blocks otherwise), written before
 *      the block word; a free, the owned maps and lookups believe a word
 *      only if it agrees (dp_ar_entry_block_bytes), so a scribbled trim code
 *      can neither free a neighbour's pages nor leave the block's own to the
 *      sweep: it is damage, for check() to report. A grow marks the record
 *      AR_SEG_GROWING ("up to the new frames") while the word changes
 *      (area_large.c [grow in place]). An exact span's entry records its
 *      frames as an exact block's does, so everything here that believes an
 *      exact word holds for it.
 *   [claim hint] A claim starts at the page ctl->claim_pg names (the page
 *      of the last entry given back, or of the last claim) and goes round,
 *      so that it does not walk every live entry before a free one; then
 *      from the first page, linking one when all are taken.
 *   [checked bitmaps] DSMPOOL_AREA_CHECKED gives each span a bitmap of its
 *      own (a bit per chunk: 4 KiB, 8 KiB for classes under 64 B, 16 KiB for
 *      16 B chunks; its frame in the entry's info word), set when a chunk is
 *      handed out and cleared when it is freed (area_free.c [double free]).
 *
 * Crash bound: an owner killed while its entry is INIT or RETIRED leaves it
 * in its name, and recovery takes and releases it (area_recover.c
 * [recovery]); [parts] makes that safe after a release half done. A filler
 * killed before its directory words were set, or a releaser killed between
 * taking the block word and freeing the block, leaves a block that no entry
 * names, inside a bracket: the leak sweep gives it back. A death between a
 * held reservation and the entry that records it leaves held high until the
 * lost sweep sets it (area_recover.c [lost chunks]).
 *
 * Memory ordering: a claim is an acq_rel CAS whose acquire sees the last
 * user's FREE store (a release, dp_ar_entry_release, or dp_area_drop_os's);
 * taking an entry is an acq_rel CAS (acquire: the previous owner's writes);
 * the parts are taken by acq_rel exchanges (acquire: the filler's writes);
 * directory words are release stores made after the entry is set up, read
 * by acquire loads (dp_ar_locate, dsmpool_area_free); page links are read
 * by acquire loads that see dp_frame_link's and dp_block_link's CAS.
 */

#include "area.h"

/* The bytes the pool block word blk of entry sp holds, if the entry's own
 * record agrees ([exact records]): an exact word's frames equal sp->seg
 * (at most the new size while a grow runs, or ran and died: the frames it
 * took and had not published are the sweep's), any other word has seg 0.
 * 0: a damaged word, never freed or marked as the entry's. */
uint64_t dp_ar_entry_block_bytes(const ar_span *sp, uint64_t blk) {
    uint64_t n = dp_block_frames(blk), rec = dp_load_relaxed(&sp->seg); /* [imm while live] */
    if (!n) return 0;
    if (!(blk & DP_BLOCK_EXACT)) return rec ? 0 : n * DP_FRAME_SIZE;
    if (rec & AR_SEG_GROWING) return n <= (rec & ~AR_SEG_GROWING) ? n * DP_FRAME_SIZE : 0;
    return rec == n ? n * DP_FRAME_SIZE : 0;
}

/* Registry entry e, if its page exists (NULL: none yet, or a damaged link). */
ar_span *dp_ar_entry(dsmpool *p, ar_ctl *ctl, uint64_t e) {
    if (e >= AR_MAX_ENTRIES) return NULL;
    uint64_t off = dp_load_acquire(&ctl->regpage[e / AR_PER_PAGE]); /* acquire: dp_frame_link's CAS */
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
        /* acq_rel: acquire pairs with dp_ar_entry_release's FREE store (or
         * dp_area_drop_os's) */
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
    uint32_t from = dp_load_relaxed_uint32_t(&ctl->claim_pg); /* relaxed: a hint */
    if (from >= pages) from = 0;
    for (uint32_t n = 0; n < pages; n++) {
        uint32_t k = (from + n) % pages;
        uint64_t off = dp_load_acquire(&ctl->regpage[k]); /* acquire: dp_frame_link's CAS */
        if (!off) continue;
        if (!dp_block_ok(p, off, DP_FRAME_SIZE)) return -EUCLEAN;
        int64_t e = entry_claim_in(p, dp_at(p, off), k, order);
        if (e >= 0) {
            if (k != from) dp_store_relaxed_uint32_t(&ctl->claim_pg, k); /* relaxed: a hint */
            return e;
        }
    }
    for (uint32_t k = 0; k < pages; k++) {
        uint64_t off = dp_frame_link(p, &ctl->regpage[k]);
        if (!off) return -ENOMEM;
        if (!dp_block_ok(p, off, DP_FRAME_SIZE)) return -EUCLEAN;
        int64_t e = entry_claim_in(p, dp_at(p, off), k, order);
        if (e >= 0) {
            dp_store_relaxed_uint32_t(&ctl->claim_pg, k); /* relaxed: a hint */
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
        if (k >= p->geo.dir_count || (k << AR_DIR_SHIFT) >= p->geo.data_size) return false;
        /* a block held lies in resident memory: a word of a released
         * granule is a damaged block word's, and its page is not to be
         * made resident (layout.c [lazy directory]) */
        if ((k == k0 || !(k & (DP_DIR_PAGE / 8 - 1))) && !dp_dir_readable(p, k << AR_DIR_SHIFT)) return false;
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
 * entry's owner calls this ([entries]); each part is taken by exchange all the
 * same, so a recoverer that repeats a dead owner's release frees nothing
 * twice. Returns the bytes of the block this call took (0: none). */
static uint64_t entry_free_parts(dsmpool *p, uint64_t aid, uint64_t e, ar_span *sp, uint32_t slot) {
    dp_bracket_open(p);
    /* acq_rel: the exchange is the unrecording; acquire sees the filler's
     * writes */
    uint64_t blk = dp_exchange_acq_rel(&sp->block, 0), took = 0;
    if (blk == DP_BLOCK_FALLBACK) {
        dsmpool_handle h = dp_load_relaxed(&sp->seg);
        took = dp_seg_os_size(p, h);
        dp_seg_unpin_quiet(p, h, slot);
    } else if (blk && DP_BLOCK_ORDER(blk) <= DP_PA_MAX_ORDER) {
        took = dp_ar_entry_block_bytes(sp, blk);
        /* A damaged word is never freed: one past the data, one whose frames
         * disagree with the entry's record, or whose frames the directory does
         * not say are the entry's (a scribbled trim code naming a tail given
         * back, [exact records]). A filler that died before its directory
         * words were set leaves its block to the leak sweep the same way. */
        if (dp_block_ok(p, DP_BLOCK_OFF(blk), took) && dir_clear(p, aid, e, DP_BLOCK_OFF(blk), took))
            dp_pool_free(p, blk);
        else
            took = 0;
    }
    uint64_t info = dp_exchange_acq_rel(&sp->info, 0);
    uint64_t bm = ar_info_bitmap(info);
    unsigned bo = cls_bm_order((unsigned)(info & 0xff));
    if (bm && dp_block_ok(p, bm, (uint64_t)DP_FRAME_SIZE << bo)) dp_pool_free(p, DP_BLOCK_MK(bm, bo));
    dp_bracket_close(p);
    return took;
}

/* Give back what an entry holds, then FREE it. The caller owns the entry:
 * it moved it to RETIRED(itself) by CAS from prev ([entries], [parts]). */
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
    dp_store_relaxed_uint32_t(&ctl->claim_pg, (uint32_t)(e / AR_PER_PAGE));
}

/* [entries]: own the entry whose word is *w by one CAS to RETIRED(slot). */
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

/* [checked bitmaps]: flip chunk idx's bit in the span's bitmap: set on
 * alloc, clear on free.
 * Returns false when it already had the new value. */
bool dp_ar_checked_flip(dsmpool *p, ar_span *sp, uint32_t idx, bool set) {
    uint64_t info = dp_load_relaxed(&sp->info), bm = ar_info_bitmap(info);
    unsigned c = (unsigned)(info & 0xff);
    if (!bm || !dp_block_ok(p, bm, (uint64_t)DP_FRAME_SIZE << cls_bm_order(c)) || idx >= cls_chunks(c)) return true;
    dp_a64 *word = (dp_a64 *)dp_at(p, bm) + idx / 64;
    uint64_t bit = 1ull << (idx % 64);
    /* relaxed: the bitmap orders nothing, it only remembers */
    uint64_t old = set ? dp_fetch_or_relaxed(word, bit)
                       : dp_fetch_and_relaxed(word, ~bit);
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
