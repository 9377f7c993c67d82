/*
 * stats.c -- statistics and the consistency proof (dsmpool_check).
 *
 * Layer: the top, above recovery (it recovers the dead before it judges,
 * and asks recovery's ownership maps). It composes what each layer says about
 * itself: the allocator's tree (through the ledger: dp_used_maps,
 * dp_pool_free_frames), segment states and counts (segment.c), who owns
 * which frames (recovery's dp_owned_maps, from every layer's
 * dp_*_mark_owned), free lists (area_verify.c [verification]).
 *
 * The check, in order (each failure returns -EUCLEAN with the first broken
 * invariant in the message, or -EBUSY when it could not get a quiet look):
 *   1. The shared header still matches the validated private copy.
 *   2. Every sub-pool tree satisfies palloc.c's invariants I1-I4, and its
 *      walk counts free + used = total (the tree partitions the frames, so
 *      allocated blocks cannot overlap each other).
 *   3. Segments: none half-created or half-destroyed by a dead process, and
 *      each LIVE segment's count equals the ACTIVE records that name it.
 *   4. Ownership: every allocated frame belongs to exactly one owner (a
 *      segment's block, a slot's record block, an area's span, large block,
 *      registry page or bitmap), and every owned frame is allocated.
 *   5. Free lists: no chunk is on two of them (caches, span stacks, bump
 *      ranges), and every link points at a chunk of a live span of its area.
 *   6. Residency: no released granule holds an allocated frame, none is
 *      counted busy, and every residency word is one a version writes
 *      (resident.c R1, R3; run right after 2, whose maps it reads); and in
 *      a pool of shmem pages no released granule holds a page (mincore:
 *      memory given back that is still held, R3).
 *
 * While other processes run: a pass is believed only if it ran inside a
 * quiet window (proc.c [quiet windows]: no bracket open or begun anywhere;
 * area_recover.c [quiet]: no cache operation in flight or begun). A pass that saw damage
 * while something moved proves nothing, so it is repeated (up to 200 times
 * within half a second, waiting a little between); -EUCLEAN is returned only
 * for what a believed pass found, and -EBUSY when no pass could be believed.
 * A dead process that nobody has recovered yet is recovered first (as
 * dsmpool_recover() would): what it left half-done is recovery's work, not
 * damage. (A process without a liveness lock of its own cannot tell the
 * dead from the living, recovers nothing, and reports what it finds.)
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_top.h"
#include "dp_os.h"

int dsmpool_get_stats_sized(dsmpool *pool, dsmpool_stats *out, size_t struct_size) {
    dp_clear_error();
    if (!pool || pool->magic != DP_POOL_MAGIC || !out)
        return dp_fail(-EINVAL, "need an attached pool and an output struct");
    dsmpool_stats full;
    dp_stats_fill(pool, &full);
    return dp_copy_sized(out, struct_size, &full, sizeof full);
}

/* Reads only (inspect.c calls it on a read-only view): relaxed loads of the
 * shared counters, the layout from the validated private copy. */
void dp_stats_fill(dsmpool *pool, dsmpool_stats *out) {
    const dp_header *g = &pool->geo;
    memset(out, 0, sizeof *out);
    out->region_size = g->region_size;
    out->data_size = g->data_size;
    out->page_size = g->page_size;
    out->backing = (dsmpool_backing)g->backing;
    out->huge_requested = (dsmpool_huge)g->huge_requested;
    out->huge_pages = g->huge_pages;
    out->huge_fallback = g->huge_fallback;
    out->thp_advised = g->thp_advised;
    out->prefaulted_bytes = g->prefaulted_bytes;
    dp_os_smaps_huge(pool->base, pool->size, &out->huge_mapped_bytes);
    out->nsubpools = pool->nsub;
    for (uint32_t s = 0; s < pool->nsub; s++) {
        uint64_t free_frames = 0;
        int largest = -1;
        dp_pool_free_frames(pool, s, &free_frames, &largest);
        out->subpool[s].node = g->sub[s].node == DP_NODE_INTERLEAVE ? -1 : (int)g->sub[s].node;
        out->subpool[s].fallbacks = dp_load_relaxed(&pool->hdr->fallbacks[s]); /* relaxed: counter */
        out->subpool[s].size = g->sub[s].geom.frames * DP_FRAME_SIZE;
        out->subpool[s].free = free_frames * DP_FRAME_SIZE;
        out->subpool[s].largest_free = largest < 0 ? 0 : (size_t)DP_FRAME_SIZE << largest;
    }
    for (uint64_t i = 0; i < pool->nsegs; i++) {
        uint64_t w = dp_load_relaxed(&pool->segs[i].state); /* relaxed: a count */
        if (DP_SEG_ST(w) != DP_SEG_LIVE) continue;
        out->segments_live++;
        if (dp_load_relaxed(&pool->segs[i].block) == DP_BLOCK_FALLBACK) out->fallback_segments_live++;
    }
    out->segments_capacity = pool->nsegs;
    out->fallback_segments_created = dp_load_relaxed(&pool->hdr->fallback_created);
    for (uint32_t i = 0; i < pool->nprocs; i++)
        if (DP_SLOT_STATE(dp_load_relaxed(&pool->procs[i].state)) == DP_SLOT_LIVE)
            out->procs_attached++;
    for (uint32_t i = 0; i < pool->nprocs; i++) {
        uint64_t w = dp_load_relaxed(&pool->procs[i].state); /* relaxed: a count */
        if (DP_SLOT_FLAGS(w) & DP_SLOT_UNGUARDED) out->procs_unguarded++;
        if (DP_SLOT_STATE(w) == DP_SLOT_RECOVERING) out->procs_recovering++;
    }
    out->recoveries_deferred = dp_load_relaxed(&pool->hdr->recover_deferred); /* relaxed: a counter */
    out->lost_chunks_reclaimed = dp_load_relaxed(&pool->hdr->lost_reclaimed); /* relaxed: a counter */
    out->cache_trims = dp_load_relaxed(&pool->hdr->trim);                     /* relaxed: a counter */
    out->sweep_due = dp_load_relaxed(&pool->hdr->sweep_needed) || dp_load_relaxed(&pool->hdr->lost_due); /* relaxed: flags */
    out->procs_capacity = pool->nprocs;
    out->procs_recovered = dp_load_relaxed(&pool->hdr->procs_recovered);
    out->fallback_bytes = dp_seg_fallback_bytes(pool);
    out->fallback_bytes_peak = dp_load_relaxed(&pool->hdr->fallback_peak); /* relaxed: a statistic */
    /* the mark is raised after the segment is made (segment.c [spilling is visible]): never show it below now */
    if (out->fallback_bytes_peak < out->fallback_bytes) out->fallback_bytes_peak = out->fallback_bytes;
    /* residency (resident.c): granules from the table, warm = free less released */
    out->elastic = g->elastic != 0;
    out->resident_min = g->resident_min;
    out->warm_bytes = g->warm_bytes;
    out->idle_release_ms = g->idle_release_ms;
    for (uint32_t s = 0; s < pool->nsub; s++) {
        uint64_t rel = dp_res_released_in(pool, s) << DP_RES_SHIFT;
        out->released_bytes += rel;
        out->warm_free_bytes += out->subpool[s].free > rel ? out->subpool[s].free - rel : 0;
    }
    out->resident_bytes = g->data_size > out->released_bytes ? g->data_size - out->released_bytes : 0;
    const dp_header *h = pool->hdr; /* relaxed: counters */
    out->releases = dp_load_relaxed(&h->releases);
    out->released_total = dp_load_relaxed(&h->released_total);
    out->release_ns = dp_load_relaxed(&h->release_ns);
    out->refills_ahead = dp_load_relaxed(&h->refills_ahead);
    out->refilled_ahead = dp_load_relaxed(&h->refilled_ahead);
    out->refill_ahead_ns = dp_load_relaxed(&h->refill_ahead_ns);
    out->refills_on_demand = dp_load_relaxed(&h->refills_demand);
    out->refilled_on_demand = dp_load_relaxed(&h->refilled_demand);
    out->refill_on_demand_ns = dp_load_relaxed(&h->refill_demand_ns);
    out->refill_failures = dp_load_relaxed(&h->refill_failures);
    out->refill_given_back = dp_load_relaxed(&h->refill_given_back);
    out->room_refusals = dp_load_relaxed(&h->room_refusals);
    out->refills_while_warm_fit = dp_load_relaxed(&h->refills_warm_fit);
    out->maintain_steps = dp_load_relaxed(&h->maint_steps);
    uint64_t surplus = 0, over = 0;
    out->huge_release_to_system = g->huge_pages && dp_os_huge_surplus(g->page_size, &surplus, &over) == 0 && surplus > 0;
}

/* ---- check -------------------------------------------------------------- */

/* One pass of the proof (steps 2-5), on a pool that may be changing; the
 * caller decides whether to believe it (a quiet window around it). */
static int check_pass(dsmpool *pool, uint64_t **used, uint64_t **owned, dp_area_scratch *sc, char *why,
                      size_t n) {
    const dp_header *g = &pool->geo;
    int r;
    for (uint32_t s = 0; s < pool->nsub; s++) {
        memset(used[s], 0, (g->sub[s].geom.frames + 63) / 64 * 8);
        memset(owned[s], 0, (g->sub[s].geom.frames + 63) / 64 * 8);
    }
    /* 2 */
    if ((r = dp_used_maps(pool, used, why, n, true)) != 0) return r;
    /* 6 (needs only 2's maps) */
    if ((r = dp_res_verify(pool, used, why, n)) != 0) return r;
    if ((r = dp_res_verify_given_back(pool, why, n)) != 0) return r;
    /* 3, 4 */
    if ((r = dp_seg_verify(pool, why, n)) != 0) return r;
    if ((r = dp_owned_maps(pool, owned, why, n)) != 0) return r;
    for (uint32_t s = 0; s < pool->nsub; s++) {
        uint64_t words = (g->sub[s].geom.frames + 63) / 64;
        for (uint64_t k = 0; k < words; k++) {
            uint64_t leak = used[s][k] & ~owned[s][k], ghost = owned[s][k] & ~used[s][k];
            if (leak || ghost) {
                snprintf(why, n, leak ? "sub-pool %u: frame %llu is allocated but owned by "
                                        "nothing (a leak)"
                                      : "sub-pool %u: frame %llu is owned but free in the "
                                        "allocator",
                         s, (unsigned long long)(k * 64 + (unsigned)__builtin_ctzll(leak ? leak : ghost)));
                return -EUCLEAN;
            }
        }
    }
    /* 5 */
    return dp_area_verify(pool, sc, why, n);
}

int dsmpool_check(dsmpool *pool) {
    dp_clear_error();
    if (!pool || pool->magic != DP_POOL_MAGIC) return dp_fail(-EINVAL, "not an attached pool");
    int r = dp_self(pool);
    if (r) return r;
    const dp_header *h = pool->hdr, *g = &pool->geo;
    /* 1 */
    if (dp_load_acquire(&h->magic) != DP_MAGIC || h->region_size != g->region_size ||
        h->data_off != g->data_off || h->data_size != g->data_size || h->seg_cap != g->seg_cap ||
        h->proc_cap != g->proc_cap || memcmp(h->sub, g->sub, sizeof g->sub) != 0)
        return dp_fail(-EUCLEAN, "the shared header was overwritten");
    char why[256] = "", busy[256] = "an operation was in progress on every try";
    uint64_t **used = dp_maps_new(pool), **owned = dp_maps_new(pool);
    dp_area_scratch scratch = {NULL, NULL};
    if (!used || !owned) {
        dp_maps_free(pool, used);
        dp_maps_free(pool, owned);
        return dp_fail(-ENOMEM, "out of memory for the check's maps");
    }
    /* Rule of the proof: believe a pass only if nothing moved while it ran
     * (proc.c [quiet windows], area_recover.c [quiet]). Busy pools get CHECK_TRIES passes, with
     * short waits between, within CHECK_NS. */
    enum { CHECK_TRIES = 200 };
    const uint64_t CHECK_NS = 500000000ull;
    uint64_t deadline = dp_os_now_ns() + CHECK_NS;
    r = -EBUSY;
    for (int t = 0; t < CHECK_TRIES && r == -EBUSY; t++) {
        if (t && dp_os_now_ns() > deadline) break;
        if (t) {
            if (t < 8) dp_os_yield();
            else dp_os_sleep_ns(200000);
        }
        dp_quiet q = {0};
        dp_area_quiet aq = {0};
        int o = dp_quiet_open(pool, &q, false);
        if (o == -EAGAIN) { /* a dead process's leftovers are recovery's work, not damage */
            dp_quiet_close(&q);
            dp_recover_all(pool);
            o = dp_quiet_open(pool, &q, false);
            if (o == -EAGAIN) o = -EBUSY;
        }
        if (o == 0) o = dp_area_quiet_open(pool, &aq);
        if (o == 0) {
            int res = check_pass(pool, used, owned, &scratch, why, sizeof why);
            if (dp_quiet_holds(pool, &q) && dp_area_quiet_holds(pool, &aq)) r = res;
            else if (res) snprintf(busy, sizeof busy, "%s", why); /* seen while others ran: not believed */
        } else if (o == -ENOMEM) {
            r = -ENOMEM;
            snprintf(why, sizeof why, "out of memory");
        }
        dp_area_quiet_close(&aq);
        dp_quiet_close(&q);
    }
    dp_maps_free(pool, used);
    dp_maps_free(pool, owned);
    dp_area_scratch_free(&scratch);
    if (r == -EBUSY) return dp_fail(r, "other processes kept changing the pool (%s); try again", busy);
    return r ? dp_fail(r, "%s", why) : 0;
}
