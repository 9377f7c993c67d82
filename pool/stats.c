/*
 * stats.c -- statistics and the consistency proof (dsmpool_check).
 *
 * The check, in order (each failure returns -EUCLEAN with the first broken
 * invariant in the message, or -EBUSY for an operation in flight):
 *   1. The shared header still matches the validated private copy.
 *   2. Every sub-pool tree satisfies palloc.c's invariants I1-I4, and its
 *      walk counts free + used = total (the tree partitions the frames, so
 *      allocated blocks cannot overlap each other).
 *   3. Ownership: every allocated frame belongs to exactly one owner (a LIVE
 *      pool segment's block, a process slot's overflow record block), and
 *      every owned frame is allocated: owned map == allocated map, and no
 *      frame is claimed twice.
 *   4. References: each LIVE segment's count equals the ACTIVE records that
 *      name it, over all slots.
 * Exact only when nothing else runs on the pool.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_internal.h"
#include "dp_os.h"

static bool owner_live(uint32_t owner, void *arg) {
    dsmpool *p = arg;
    return owner >= 1 && dp_slot_live(p, owner - 1);
}

int dsmpool_get_stats(dsmpool *pool, dsmpool_stats *out) {
    dp_clear_error();
    if (!pool || pool->magic != DP_POOL_MAGIC || !out)
        return dp_fail(-EINVAL, "need an attached pool and an output struct");
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
        dp_pa_walk w;
        dp_pa_walk_tree(&pool->pa[s], &w, NULL, NULL, NULL);
        out->subpool[s].node = g->sub[s].node == DP_NODE_INTERLEAVE ? -1 : (int)g->sub[s].node;
        out->subpool[s].fallbacks = dp_load_relaxed(&pool->hdr->fallbacks[s]); /* relaxed: counter */
        out->subpool[s].size = g->sub[s].geom.frames * DP_FRAME_SIZE;
        out->subpool[s].free = w.free_frames * DP_FRAME_SIZE;
        out->subpool[s].largest_free =
            w.largest_free_order < 0 ? 0 : (size_t)DP_FRAME_SIZE << w.largest_free_order;
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
    out->procs_capacity = pool->nprocs;
    out->procs_recovered = dp_load_relaxed(&pool->hdr->procs_recovered);
    return 0;
}

/* ---- ownership maps: shared by the check and the leak sweep ------------ */

uint64_t **dp_maps_new(dsmpool *p) {
    uint64_t **m = calloc(p->nsub, sizeof *m);
    if (!m) return NULL;
    for (uint32_t s = 0; s < p->nsub; s++)
        if (!(m[s] = calloc((p->geo.sub[s].geom.frames + 63) / 64, 8))) {
            dp_maps_free(p, m);
            return NULL;
        }
    return m;
}

void dp_maps_free(dsmpool *p, uint64_t **m) {
    if (!m) return;
    for (uint32_t s = 0; s < p->nsub; s++) free(m[s]);
    free(m);
}

typedef struct own_ctx {
    dsmpool *p;
    uint64_t **owned;
    int err;
    char *why;
    size_t n;
} own_ctx;

static void own_fail(own_ctx *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void own_fail(own_ctx *c, int err, const char *fmt, ...) {
    if (c->err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, c->n, fmt, ap);
    va_end(ap);
    c->err = err;
}

/* Mark [off, off+len) as owned; overlap with an earlier owner is an error. */
static void own_mark(own_ctx *c, uint64_t off, uint64_t len, const char *what) {
    dsmpool *p = c->p;
    if (!dp_block_ok(p, off, len)) {
        own_fail(c, -EUCLEAN, "%s at offset %llu is outside the data", what, (unsigned long long)off);
        return;
    }
    for (uint32_t s = 0; s < p->nsub; s++) {
        uint64_t lo = p->geo.sub[s].data_off, n = p->geo.sub[s].geom.frames;
        if (off < lo || (off - lo) / DP_FRAME_SIZE >= n) continue;
        uint64_t f0 = (off - lo) / DP_FRAME_SIZE, nf = len / DP_FRAME_SIZE;
        if (f0 + nf > n) {
            own_fail(c, -EUCLEAN, "%s crosses the end of sub-pool %u", what, s);
            return;
        }
        for (uint64_t f = f0; f < f0 + nf; f++) {
            uint64_t bit = 1ull << (f % 64);
            if (c->owned[s][f / 64] & bit) {
                own_fail(c, -EUCLEAN, "%s overlaps another owner at frame %llu of sub-pool %u",
                         what, (unsigned long long)f, s);
                return;
            }
            c->owned[s][f / 64] |= bit;
        }
        return;
    }
}

static void own_mark_cb(void *arg, uint64_t off, uint64_t len, const char *what) {
    own_ctx *c = arg;
    if (!c->err) own_mark(c, off, len, what);
}

/* Every owner of pool frames: segment blocks (in any state that holds one),
 * the record blocks of every slot that is not free, and what areas hold. */
int dp_owned_maps(dsmpool *p, uint64_t **owned, char *why, size_t n) {
    own_ctx c = {p, owned, 0, why, n};
    dp_area_owned(p, own_mark_cb, &c);
    for (uint64_t i = 0; i < p->nsegs && !c.err; i++) {
        dp_seg_desc *d = &p->segs[i];
        uint64_t w = dp_load_acquire(&d->state); /* acquire: pairs with create's LIVE CAS */
        if (DP_SEG_ST(w) == DP_SEG_FREE) continue;
        uint64_t blk = dp_load_acquire(&d->block); /* acquire: pairs with the creator's store */
        if (blk == DP_BLOCK_FALLBACK || blk == 0) continue;
        if (DP_BLOCK_ORDER(blk) > 36) {
            own_fail(&c, -EUCLEAN, "segment %llu has a corrupt block word", (unsigned long long)i);
            break;
        }
        own_mark(&c, DP_BLOCK_OFF(blk), (uint64_t)DP_FRAME_SIZE << DP_BLOCK_ORDER(blk), "a segment");
    }
    for (uint32_t sl = 0; sl < p->nprocs && !c.err; sl++) {
        uint64_t w = dp_load_acquire(&p->procs[sl].state); /* acquire: the claim CAS */
        if (DP_SLOT_STATE(w) == DP_SLOT_FREE) continue;
        uint64_t off = dp_load_acquire(&p->procs[sl].overflow); /* acquire: the linking CAS */
        for (uint64_t guard = p->geo.data_size / DP_FRAME_SIZE; off && !c.err; guard--) {
            if (!guard) {
                own_fail(&c, -EUCLEAN, "record blocks of slot %u form a cycle", sl);
                break;
            }
            own_mark(&c, off, DP_FRAME_SIZE, "an attachment record block");
            if (!c.err) off = dp_load_acquire(&((dp_recblk *)dp_at(p, off))->next);
        }
    }
    return c.err;
}

/* The allocator's view: a bit per allocated frame. strict: report broken
 * invariants, unfinished steps of dead owners and steps in flight. */
int dp_used_maps(dsmpool *p, uint64_t **used, char *why, size_t n, bool strict) {
    for (uint32_t s = 0; s < p->nsub; s++) {
        dp_pa_walk w;
        dp_pa_walk_tree(&p->pa[s], &w, used[s], owner_live, p);
        if (!strict) continue;
        if (w.bad) {
            snprintf(why, n, "sub-pool %u: %s", s, w.why);
            return -EUCLEAN;
        }
        if (w.orphaned) {
            snprintf(why, n, "sub-pool %u: %llu allocator steps of dead processes are unfinished; "
                     "dsmpool_recover() finishes them", s, (unsigned long long)w.orphaned);
            return -EUCLEAN;
        }
        if (w.busy) {
            snprintf(why, n, "sub-pool %u: %llu allocator steps in flight", s,
                     (unsigned long long)w.busy);
            return -EBUSY;
        }
    }
    return 0;
}

/* ---- check -------------------------------------------------------------- */

typedef struct ref_ctx {
    uint32_t *refs;
    int err;
    char why[200];
} ref_ctx;

static void ck_record(dsmpool *p, dp_a64 *r, void *arg) {
    ref_ctx *c = arg;
    uint64_t v = dp_load_acquire(r); /* acquire: pairs with the record's release store */
    if (!v || c->err) return;
    uint64_t idx = DP_REC_IDX(v);
    if (idx >= p->nsegs) {
        c->err = -EUCLEAN;
        snprintf(c->why, sizeof c->why, "an attachment record names descriptor %llu of %llu",
                 (unsigned long long)idx, (unsigned long long)p->nsegs);
    } else if (DP_REC_ST(v) != DP_REC_ACTIVE) {
        c->err = -EBUSY;
        snprintf(c->why, sizeof c->why, "an attach or detach of segment %llu is in progress",
                 (unsigned long long)idx);
    } else if (DP_SEG_GEN(dp_load_relaxed(&p->segs[idx].state)) == DP_REC_GEN(v)) {
        c->refs[idx]++;
    } else {
        c->err = -EUCLEAN;
        snprintf(c->why, sizeof c->why, "an attachment record names a destroyed segment (%llu)",
                 (unsigned long long)idx);
    }
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
    char why[200] = "";
    uint64_t **used = dp_maps_new(pool), **owned = dp_maps_new(pool);
    ref_ctx rc = {calloc(pool->nsegs, sizeof(uint32_t)), 0, ""};
    if (!used || !owned || !rc.refs) {
        r = -ENOMEM;
        snprintf(why, sizeof why, "out of memory");
        goto out;
    }
    /* 2 */
    if ((r = dp_used_maps(pool, used, why, sizeof why, true)) != 0) goto out;
    /* 3 */
    for (uint64_t i = 0; i < pool->nsegs; i++) {
        uint64_t w = dp_load_acquire(&pool->segs[i].state); /* acquire: create's LIVE CAS */
        unsigned st = DP_SEG_ST(w);
        if (st == DP_SEG_INIT || st == DP_SEG_DYING) {
            bool live = owner_live(DP_SEG_COUNT(w), pool);
            r = live ? -EBUSY : -EUCLEAN;
            snprintf(why, sizeof why, live ? "segment %llu is being created or destroyed"
                                           : "segment %llu was left half-created or half-destroyed "
                                             "by a dead process; dsmpool_recover() finishes it",
                     (unsigned long long)i);
            goto out;
        }
        uint64_t blk = dp_load_relaxed(&pool->segs[i].block);
        if (st == DP_SEG_LIVE && blk != DP_BLOCK_FALLBACK &&
            dp_load_relaxed(&pool->segs[i].size) != (uint64_t)DP_FRAME_SIZE << (DP_BLOCK_ORDER(blk) & 31)) {
            r = -EUCLEAN;
            snprintf(why, sizeof why, "segment %llu has a corrupt block word", (unsigned long long)i);
            goto out;
        }
    }
    if ((r = dp_owned_maps(pool, owned, why, sizeof why)) != 0) goto out;
    for (uint32_t s = 0; s < pool->nsub && !r; s++) {
        uint64_t words = (g->sub[s].geom.frames + 63) / 64;
        for (uint64_t k = 0; k < words; k++) {
            uint64_t leak = used[s][k] & ~owned[s][k], ghost = owned[s][k] & ~used[s][k];
            if (leak || ghost) {
                r = -EUCLEAN;
                snprintf(why, sizeof why, leak ? "sub-pool %u: frame %llu is allocated but owned by "
                                                 "nothing (a leak)"
                                               : "sub-pool %u: frame %llu is owned but free in the "
                                                 "allocator",
                         s, (unsigned long long)(k * 64 + (unsigned)__builtin_ctzll(leak ? leak : ghost)));
                break;
            }
        }
    }
    if (r) goto out;
    /* 4 */
    for (uint32_t sl = 0; sl < pool->nprocs && !rc.err; sl++)
        if (DP_SLOT_STATE(dp_load_acquire(&pool->procs[sl].state)) != DP_SLOT_FREE)
            dp_slot_records(pool, sl, ck_record, &rc);
    if (rc.err) {
        r = rc.err;
        snprintf(why, sizeof why, "%s", rc.why);
        goto out;
    }
    for (uint64_t i = 0; i < pool->nsegs; i++) {
        uint64_t w = dp_load_relaxed(&pool->segs[i].state);
        if (DP_SEG_ST(w) == DP_SEG_LIVE && DP_SEG_COUNT(w) != rc.refs[i]) {
            r = -EUCLEAN;
            snprintf(why, sizeof why, "segment %llu has reference count %u but %u attachments",
                     (unsigned long long)i, DP_SEG_COUNT(w), rc.refs[i]);
            break;
        }
    }
out:
    dp_maps_free(pool, used);
    dp_maps_free(pool, owned);
    free(rc.refs);
    return r ? dp_fail(r, "%s", why) : 0;
}
