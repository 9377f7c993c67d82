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
        out->subpool[s].node = (int)g->sub[s].node;
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

/* ---- check -------------------------------------------------------------- */

typedef struct check_ctx {
    dsmpool *p;
    uint64_t **owned;   /* per sub-pool bitmap of owned frames */
    uint32_t *refs;     /* ACTIVE records per descriptor */
    int err;
    char why[200];
} check_ctx;

static void ck_fail(check_ctx *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void ck_fail(check_ctx *c, int err, const char *fmt, ...) {
    if (c->err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    c->err = err;
}

/* Mark [off, off+len) as owned; overlap with an earlier owner is an error. */
static void ck_own(check_ctx *c, uint64_t off, uint64_t len, const char *what) {
    dsmpool *p = c->p;
    if (!dp_block_ok(p, off, len)) {
        ck_fail(c, -EUCLEAN, "%s at offset %llu is outside the data", what, (unsigned long long)off);
        return;
    }
    for (uint32_t s = 0; s < p->nsub; s++) {
        uint64_t lo = p->geo.sub[s].data_off, n = p->geo.sub[s].geom.frames;
        if (off < lo || (off - lo) / DP_FRAME_SIZE >= n) continue;
        uint64_t f0 = (off - lo) / DP_FRAME_SIZE, nf = len / DP_FRAME_SIZE;
        if (f0 + nf > n) {
            ck_fail(c, -EUCLEAN, "%s crosses the end of sub-pool %u", what, s);
            return;
        }
        for (uint64_t f = f0; f < f0 + nf; f++) {
            uint64_t bit = 1ull << (f % 64);
            if (c->owned[s][f / 64] & bit) {
                ck_fail(c, -EUCLEAN, "%s overlaps another owner at frame %llu of sub-pool %u",
                        what, (unsigned long long)f, s);
                return;
            }
            c->owned[s][f / 64] |= bit;
        }
        return;
    }
}

static void ck_record(dsmpool *p, dp_a64 *r, void *arg) {
    check_ctx *c = arg;
    uint64_t v = dp_load_acquire(r); /* acquire: pairs with the record's release store */
    if (!v) return;
    uint64_t idx = (v & 0x3fffffff) - 1;
    if (idx >= p->nsegs) {
        ck_fail(c, -EUCLEAN, "an attachment record names descriptor %llu of %llu",
                (unsigned long long)idx, (unsigned long long)p->nsegs);
        return;
    }
    if (DP_REC_ST(v) == DP_REC_ACTIVE) {
        uint64_t w = dp_load_relaxed(&p->segs[idx].state);
        if (DP_SEG_GEN(w) == (uint32_t)(v >> 32)) c->refs[idx]++;
        else ck_fail(c, -EUCLEAN, "an attachment record names a destroyed segment (%llu)",
                     (unsigned long long)idx);
    } else {
        ck_fail(c, -EBUSY, "an attach or detach of segment %llu is in progress",
                (unsigned long long)idx);
    }
}

static void ck_slot_blocks(check_ctx *c, uint32_t slot) {
    dsmpool *p = c->p;
    uint64_t off = dp_load_acquire(&p->procs[slot].overflow); /* acquire: the linking CAS */
    for (uint64_t guard = p->geo.data_size / DP_FRAME_SIZE; off; guard--) {
        if (!guard) {
            ck_fail(c, -EUCLEAN, "record blocks of slot %u form a cycle", slot);
            return;
        }
        ck_own(c, off, DP_FRAME_SIZE, "an attachment record block");
        if (c->err) return;
        off = dp_load_acquire(&((dp_recblk *)dp_at(p, off))->next);
    }
}

int dsmpool_check(dsmpool *pool) {
    dp_clear_error();
    if (!pool || pool->magic != DP_POOL_MAGIC) return dp_fail(-EINVAL, "not an attached pool");
    int r = dp_self(pool);
    if (r) return r;
    check_ctx c = {pool, NULL, NULL, 0, ""};
    const dp_header *h = pool->hdr, *g = &pool->geo;
    /* 1 */
    if (dp_load_acquire(&h->magic) != DP_MAGIC || h->region_size != g->region_size ||
        h->data_off != g->data_off || h->data_size != g->data_size || h->seg_cap != g->seg_cap ||
        h->proc_cap != g->proc_cap || memcmp(h->sub, g->sub, sizeof g->sub) != 0)
        return dp_fail(-EUCLEAN, "the shared header was overwritten");
    c.owned = calloc(pool->nsub, sizeof *c.owned);
    c.refs = calloc(pool->nsegs, sizeof *c.refs);
    uint64_t **used = calloc(pool->nsub, sizeof *used);
    if (!c.owned || !c.refs || !used) {
        ck_fail(&c, -ENOMEM, "out of memory");
        goto out;
    }
    /* 2 */
    for (uint32_t s = 0; s < pool->nsub && !c.err; s++) {
        uint64_t words = (g->sub[s].geom.frames + 63) / 64;
        c.owned[s] = calloc(words, 8);
        used[s] = calloc(words, 8);
        if (!c.owned[s] || !used[s]) {
            ck_fail(&c, -ENOMEM, "out of memory");
            break;
        }
        dp_pa_walk w;
        dp_pa_walk_tree(&pool->pa[s], &w, used[s], owner_live, pool);
        if (w.bad) ck_fail(&c, -EUCLEAN, "sub-pool %u: %s", s, w.why);
        else if (w.orphaned)
            ck_fail(&c, -EUCLEAN, "sub-pool %u: %llu allocator steps of dead processes are "
                    "unfinished; dsmpool_recover() finishes them", s, (unsigned long long)w.orphaned);
        else if (w.busy)
            ck_fail(&c, -EBUSY, "sub-pool %u: %llu allocator steps in flight", s,
                    (unsigned long long)w.busy);
    }
    /* 3: owners */
    for (uint64_t i = 0; i < pool->nsegs && !c.err; i++) {
        dp_seg_desc *d = &pool->segs[i];
        uint64_t w = dp_load_acquire(&d->state); /* acquire: pairs with create's LIVE CAS */
        unsigned st = DP_SEG_ST(w);
        if (st == DP_SEG_FREE) continue;
        if (st != DP_SEG_LIVE) {
            uint32_t owner = DP_SEG_COUNT(w);
            if (owner_live(owner, pool))
                ck_fail(&c, -EBUSY, "segment %llu is being created or destroyed", (unsigned long long)i);
            else
                ck_fail(&c, -EUCLEAN, "segment %llu was left half-created or half-destroyed by a "
                        "dead process; dsmpool_recover() finishes it", (unsigned long long)i);
            break;
        }
        uint64_t blk = dp_load_relaxed(&d->block);
        if (blk == DP_BLOCK_FALLBACK) continue;
        uint64_t bytes = (uint64_t)DP_FRAME_SIZE << (DP_BLOCK_ORDER(blk) & 31);
        if (DP_BLOCK_ORDER(blk) > 36 || dp_load_relaxed(&d->size) != bytes) {
            ck_fail(&c, -EUCLEAN, "segment %llu has a corrupt block word", (unsigned long long)i);
            break;
        }
        ck_own(&c, DP_BLOCK_OFF(blk), bytes, "a segment");
    }
    for (uint32_t sl = 0; sl < pool->nprocs && !c.err; sl++) {
        uint64_t w = dp_load_acquire(&pool->procs[sl].state); /* acquire: the claim CAS */
        if (DP_SLOT_STATE(w) == DP_SLOT_FREE) continue;
        ck_slot_blocks(&c, sl);
        if (!c.err) dp_slot_records(pool, sl, ck_record, &c);
    }
    for (uint32_t s = 0; s < pool->nsub && !c.err; s++) {
        uint64_t words = (g->sub[s].geom.frames + 63) / 64;
        for (uint64_t k = 0; k < words; k++) {
            uint64_t leak = used[s][k] & ~c.owned[s][k], ghost = c.owned[s][k] & ~used[s][k];
            if (leak) {
                ck_fail(&c, -EUCLEAN, "sub-pool %u: frame %llu is allocated but owned by nothing "
                        "(a leak)", s, (unsigned long long)(k * 64 + (unsigned)__builtin_ctzll(leak)));
                break;
            }
            if (ghost) {
                ck_fail(&c, -EUCLEAN, "sub-pool %u: frame %llu is owned but free in the allocator",
                        s, (unsigned long long)(k * 64 + (unsigned)__builtin_ctzll(ghost)));
                break;
            }
        }
    }
    /* 4 */
    for (uint64_t i = 0; i < pool->nsegs && !c.err; i++) {
        uint64_t w = dp_load_relaxed(&pool->segs[i].state);
        if (DP_SEG_ST(w) == DP_SEG_LIVE && DP_SEG_COUNT(w) != c.refs[i])
            ck_fail(&c, -EUCLEAN, "segment %llu has reference count %u but %u attachments",
                    (unsigned long long)i, DP_SEG_COUNT(w), c.refs[i]);
    }
out:
    if (used)
        for (uint32_t s = 0; s < pool->nsub; s++) free(used[s]);
    if (c.owned)
        for (uint32_t s = 0; s < pool->nsub; s++) free(c.owned[s]);
    free(used);
    free(c.owned);
    free(c.refs);
    return c.err ? dp_fail(c.err, "%s", c.why) : 0;
}
