/*
 * area_span.c -- span stacks: the chunks given back to a span wait on its
 * stack, kept in its registry entry's state word, until a refill or a
 * shared-path taker steals them; the push that makes a span whole retires
 * it (or, with shared users, keeps it).
 *
 * Layer: areas, above the registry and the pointers; the cache drains, the
 * free paths, the shared path and the lost sweep push here.
 *
 * Rules
 *   [stacks] A live span's word is [gen:24][count:18][head:18][state:4]
 *      (2^17 chunks of 16 B would fit): count returned chunks, head the
 *      first one's index + 1, each linked to the next by index + 1 through
 *      its first 4 bytes. A push writes the chunk's link, then CASes the
 *      word (gen + 1); a steal takes the whole stack by one CAS to an empty
 *      one (area_small.c [refill], area_shared.c [take]). Nobody pops a
 *      single chunk by CAS, so no CAS depends on a link read from a chunk
 *      its maker does not hold. A word that is not SPAN, or would count more
 *      chunks than the span has, is damage: the chunk is dropped (never
 *      handed out twice), for dsmpool_check() to report. ctl->partial[c]
 *      counts the class's spans with returned chunks: a hint for refills and
 *      takers, set right where it drifts.
 *   [retire] The push that makes a span's count whole retires it: a CAS to
 *      RETIRED(retire_slot) (area_registry.c [entries]), then its parts go
 *      back (the directory cleared, the block freed). A bump range that
 *      with the stack is the whole span retires it untouched (area_cache.c
 *      [drain]).
 *   [chains] A chain of free chunks that only we hold (head index + 1,
 *      count, links written) goes back by dp_ar_chain_return: onto an empty
 *      stack by one CAS; if others pushed meanwhile, their chain is stolen
 *      too (one CAS, as a steal), the shorter of the two walked to its tail
 *      -- both are ours, nobody writes them -- and linked to the other, and
 *      the whole goes back the same way. A chain that cannot go back (a
 *      damaged word or link) is left, its chunks tagged, for the lost sweep
 *      (dp_ar_chain_lost; area_recover.c [lost chunks]).
 *   [class again] A stack stolen after its entry's class was read may be
 *      another class's: the entry may have been given back and reused for
 *      another class in between, with the same word (the generation carries
 *      over). The stealer reads the class again once it holds the stack (the
 *      span cannot retire then) and puts another class's chain back as that
 *      class's (dp_ar_steal_class_holds) -- a cached refill's steal and a
 *      shared taker's alike.
 *   [kept span] In an area with shared users (area_shared.c [shared
 *      path]) a push that makes a span whole keeps it instead of retiring
 *      it (one span per area, ctl->sh_keep), so that one chunk allocated and
 *      freed at a time does not take and link a fresh span each time: a kept
 *      span that is whole stays and the new one retires; one in use again
 *      (or given back) is replaced, and looked at again after the replacing
 *      CAS in case it became whole meanwhile. The kept span goes back at a
 *      flush, when a shared operation sees a trim request (area_cache.c
 *      [short of memory]), when this thread is short (area_acquire.c
 *      [shortage]), and with the area; the lost sweep leaves it alone.
 *
 * Crash bound: a pusher killed between its link and its CAS leaves the
 * chunk tagged on no stack (it left its last holder first: area_recover.c
 * [lost chunks]); killed between the push that made a span whole and the
 * retiring CAS, a whole span not retired, which the lost sweep retires;
 * killed holding a stolen chain, its chunks tagged on no stack. The other
 * orders cannot happen: the CAS publishes the link the chunk already
 * carries, and a chain is put back only from a stack that is ours.
 *
 * Memory ordering: pushes are release CASes (they publish the chunks'
 * links, and the tags written before them), steals acquire CASes (they read
 * them); the retiring CAS is acq_rel (acquire: every chunk's link; release:
 * the claim of the entry). The kept span's slot is relaxed, ordered by
 * seq_cst fences on both sides (span_keep, dp_ar_keep_release: store
 * buffering, so one of the two sees the other's write).
 *
 * Injection points: "area.push.checked" (a chunk about to be linked onto
 * its span's stack: a test holds a recoverer there while the area goes),
 * "area.push.whole" (a push made a span whole, before it retires: a test
 * kills the pusher and the lost sweep retires the span).
 */

#include <string.h>

#include "area.h"
#include "area_pointer.h"
#include "area_registry.h"

/* [kept span]: give back entry e if it is a whole span (a kept one let go). */
static void retire_if_whole(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, uint32_t slot) {
    ar_span *sp = dp_ar_entry(p, ctl, e);
    uint64_t w = sp ? dp_load_acquire(&sp->state) : 0; /* acquire: every push's link */
    unsigned c = sp ? (unsigned)(dp_load_relaxed(&sp->info) & 0xff) : 0;
    if (!sp || SPW_ST(w) != SP_SPAN || c >= AR_NCLS || SPW_COUNT(w) != cls_chunks(c)) return;
    if (dp_ar_entry_take_from(sp, &w, slot)) { /* [retire]: ours by one CAS */
        dp_fetch_add_relaxed(&ctl->partial[c], (uint64_t)-1); /* relaxed: a hint */
        dp_ar_entry_release(p, ctl, aid, e, sp, w, slot);
    }
}

/* [kept span]: a push made span e whole in an area with shared users: keep it
 * (one span per area, ctl->sh_keep) instead of retiring it, so that a
 * thread that allocates and frees one chunk at a time does not take and
 * link a fresh span each time. A kept span that is no longer whole (in use
 * again, or given back) is replaced; one that is whole stays, and e
 * retires. false: retire e. */
static bool span_keep(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, uint32_t slot) {
    /* seq_cst fence: our whole-making push before our look at the slot,
     * against the fences of a replacer and of dp_ar_keep_release (store
     * buffering: one of us sees the other's write) */
    dp_fence_seq_cst();
    uint64_t k = dp_load_relaxed(&ctl->sh_keep); /* relaxed: ordered by the fences */
    for (;;) {
        if (k == e + 1) return true;
        if (k) {
            ar_span *o = dp_ar_entry(p, ctl, k - 1);
            uint64_t ow = o ? dp_load_relaxed(&o->state) : 0; /* relaxed: a look; the CAS decides */
            unsigned oc = o ? (unsigned)(dp_load_relaxed(&o->info) & 0xff) : 0;
            if (o && SPW_ST(ow) == SP_SPAN && oc < AR_NCLS && SPW_COUNT(ow) == cls_chunks(oc)) return false;
        }
        /* relaxed, then the fence: the old span is looked at again below */
        if (dp_cas_relaxed(&ctl->sh_keep, &k, e + 1))
            break;
    }
    dp_fence_seq_cst(); /* as above */
    if (k) retire_if_whole(p, ctl, aid, k - 1, slot); /* whole since we looked: nobody else will */
    return true;
}

/* A push made the span's stack nw (it held was before): keep the hint, and
 * retire a span that is whole again ([retire], [kept span]). retire_slot
 * owns the retirement. */
void dp_ar_span_pushed(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp, unsigned cls,
                       uint32_t was, uint64_t nw, uint32_t retire_slot) {
    if (was == 0) dp_fetch_add_relaxed(&ctl->partial[cls], 1); /* relaxed: a hint */
    if (SPW_COUNT(nw) == cls_chunks(cls)) {
        /* relaxed: area_shared.c [shared path]'s flag, set before any shared operation */
        if (dp_load_relaxed(&ctl->shared) && span_keep(p, ctl, aid, e, retire_slot)) return;
        DP_INJECT("area.push.whole");
        uint64_t rw = SPW_OWNED(SPW_GEN(nw) + 1, retire_slot, SP_RETIRED);
        /* acq_rel: acquire sees every chunk's link; release claims the entry */
        uint64_t prev = nw;
        if (dp_cas_acq_rel(&sp->state, &nw, rw)) {
            dp_fetch_add_relaxed(&ctl->partial[cls], (uint64_t)-1);
            dp_ar_entry_release(p, ctl, aid, e, sp, prev, retire_slot);
        }
    }
}

/* [stacks]: return one chunk (by index) to its span's stack. */
void dp_ar_span_push(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp,
                     unsigned cls, uint32_t idx, char *chunk, uint32_t retire_slot) {
    uint32_t n = cls_chunks(cls);
    uint64_t w = dp_load_relaxed(&sp->state), nw;
    for (;;) {
        if (SPW_ST(w) != SP_SPAN || SPW_COUNT(w) >= n) return; /* corrupt: drop, never double */
        DP_INJECT("area.push.checked");
        memcpy(chunk, &(uint32_t){SPW_HEAD(w)}, 4);
        nw = SPW(SPW_GEN(w) + 1, SPW_COUNT(w) + 1, idx + 1, SP_SPAN);
        /* release: publishes the link written into the chunk (pairs with
         * refill's and span_take's steal) */
        if (dp_cas_release(&sp->state, &w, nw)) break;
    }
    dp_ar_span_pushed(p, ctl, aid, e, sp, cls, SPW_COUNT(w), nw, retire_slot);
}

/* Return a chunk pointer to its span (drain, release, recovery). */
void dp_ar_chunk_return(struct dsmpool_area *a, dsmpool_ptr c, uint32_t retire_slot) {
    ar_loc l;
    if (dp_ar_locate(a, c, &l) != 0 || l.cls == AR_LARGE_CLS) return;
    uint32_t idx;
    if (!chunk_at(l.cls, l.off, &idx)) return;
    char *m = ar_addr_n(a, c, 4);
    if (m && ar_locate_entry(a, &l)) dp_ar_span_push(a->pool, a->ctl, a->aid, l.e, l.sp, l.cls, idx, m, retire_slot);
}

/* [chains]: a chain of free chunks that only we hold could not be put back
 * (a damaged span word or link): its tagged chunks are left for the lost
 * sweep. */
void dp_ar_chain_lost(struct dsmpool_area *a) {
    dp_fetch_add_relaxed(&a->ctl->lost, 1); /* relaxed: ordered by the release below */
    /* release: pairs with sweep_lost's acquire (recover.c) */
    dp_fetch_add_release(&a->pool->hdr->lost_due, 1);
}

/* [chains]: put a chain we hold (head index + 1, count chunks, links
 * written) back on span e's stack. Onto an empty stack: one CAS. If others
 * pushed meanwhile, their chain is taken too (one CAS, as a steal), the
 * shorter of the two walked to its tail -- both are ours, nobody writes
 * them -- and linked to the other, and the whole goes back the same way. */
void dp_ar_chain_return(struct dsmpool_area *a, unsigned c, uint64_t e, ar_span *sp, dsmpool_ptr base,
                        uint32_t head, uint32_t count) {
    uint32_t n = cls_chunks(c);
    uint64_t w = dp_load_relaxed(&sp->state); /* relaxed: the CAS validates */
    for (;;) {
        uint32_t theirs = SPW_COUNT(w), th = SPW_HEAD(w);
        if (SPW_ST(w) != SP_SPAN || theirs + count > n || (theirs && (!th || th > n))) {
            dp_ar_chain_lost(a); /* damaged */
            return;
        }
        if (!theirs) {
            uint64_t nw = SPW(SPW_GEN(w) + 1, count, head, SP_SPAN);
            /* release: our chain's links (pairs with the next steal's acquire:
             * refill's, span_take's) */
            if (dp_cas_release(&sp->state, &w, nw)) {
                /* the hint; and a whole span (another class's, given back
                 * whole) is kept or retires as after any push */
                dp_ar_span_pushed(a->pool, a->ctl, a->aid, e, sp, c, 0, nw, a->pool->slot);
                return;
            }
            continue;
        }
        /* acquire: their links */
        if (!dp_cas_acquire(&sp->state, &w, SPW(SPW_GEN(w) + 1, 0, 0, SP_SPAN))) continue;
        dp_fetch_add_relaxed(&a->ctl->partial[c], (uint64_t)-1); /* relaxed: a hint */
        uint32_t sh_head = theirs < count ? th : head, sh_n = theirs < count ? theirs : count;
        uint32_t lg_head = theirs < count ? head : th, idx = sh_head;
        char *m = NULL;
        for (uint32_t k = 0; k < sh_n; k++) { /* to the shorter chain's tail */
            if (!idx || idx > n || !(m = ar_addr_n(a, base + chunk_off(c, idx - 1), 4))) {
                dp_ar_chain_lost(a);
                return;
            }
            if (k + 1 < sh_n) memcpy(&idx, m, 4);
        }
        memcpy(m, &lg_head, 4);
        head = sh_head;
        count += theirs;
        w = dp_load_relaxed(&sp->state); /* relaxed: the CAS validates */
    }
}

/* [class again]: a stack stolen (word w) after its class was read: the entry
 * may have been given back and reused for another class in between, with the
 * same word (the generation carries over). Read the class again now that we
 * hold the span's free chunks (it cannot retire); another class's chain goes
 * back. acquire by the steal's CAS: the entry's current info is seen. */
bool dp_ar_steal_class_holds(struct dsmpool_area *a, unsigned c, uint64_t e, ar_span *sp, uint64_t w) {
    unsigned now = (unsigned)(dp_load_relaxed(&sp->info) & 0xff); /* [imm while live] */
    if (now == c) return true;
    uint64_t blk = dp_load_relaxed(&sp->block);
    dp_fetch_add_relaxed(&a->ctl->partial[c], 1); /* relaxed: the hints, set right */
    if (now < AR_NCLS) dp_fetch_add_relaxed(&a->ctl->partial[now], (uint64_t)-1);
    if (now < AR_NCLS)
        dp_ar_chain_return(a, now, e, sp, dp_ar_entry_base(a, e, sp, blk, now), SPW_HEAD(w), SPW_COUNT(w));
    else
        dp_ar_chain_lost(a);
    return false;
}

/* [kept span]: the kept span goes back (short of memory, a flush). */
void dp_ar_keep_release(struct dsmpool_area *a) {
    ar_ctl *ctl = a->ctl;
    if (!dp_load_relaxed(&ctl->sh_keep)) return; /* relaxed: a first look */
    uint64_t k = dp_exchange_relaxed(&ctl->sh_keep, 0); /* then the fence */
    dp_fence_seq_cst(); /* against span_keep's fence (store buffering) */
    if (k) retire_if_whole(a->pool, ctl, a->aid, k - 1, a->pool->slot);
}
