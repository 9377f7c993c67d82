/*
 * area_pointer.c -- relocatable pointers: a pool pointer is a region
 * offset, a fallback pointer names an OS segment through its registry
 * entry. This file turns either into an address (ar_addr_n, inline in
 * dp_area.h, and dp_ar_fb_map), finds the span or block that holds one
 * (dp_ar_locate), maps an entry's OS segment into this process the first
 * time a pointer needs it, and turns a local address back into a pointer.
 *
 * Layer: areas, above the registry; everything that follows a pointer
 * calls it (the hot path only ar_addr_n's pool branch, inline).
 *
 * Rules
 *   [fallback pointers] A pool pointer is a region offset, bit 63 clear. A
 *      pointer into an OS segment of L bytes (at most 4 GiB) is
 *      [1][tag:14][entry:17][check:32-n][offset:n], n = max(16,
 *      ceil(log2 L)) (ar_fb_bits). tag: the area's, exact (unique among
 *      the pool's live areas, area_life.c [tags], so a pointer of another
 *      live area is always refused); entry: the registry entry that holds
 *      the segment; offset: the byte in it. A span's n is its block's (2^n =
 *      cls_span, the power of two from 64 KiB at or above its len;
 *      tests/test_area.c checks every class).
 *   [check] check: the top 32 - n bits of mix(key ^ handle) (fb_check),
 *      handle the OS segment's (sp->seg: index and 32-bit generation, new
 *      whenever the entry takes a new segment: segment.c [handles]), key the
 *      area's random key (area_free.c [free tags]) -- not the span word's
 *      generation, which counts the stack's pushes and pops, not what the
 *      entry holds. Every pointer built for an entry's segment carries the
 *      check (span and block bases, ptr_of, recovery, the lost sweep,
 *      verification); every one read (addr, free, usable_size, ptr_of, the
 *      walks) must match the entry's current segment, else it is refused as
 *      another area's is: NULL, -EINVAL, 0, nothing changed. So a pointer
 *      kept after its segment went back (freed, or dropped with the pool's
 *      OS segments) and used once the entry holds a new segment of L bytes
 *      passes with probability 2^-(32 - n) over the key, for any two
 *      handles: 2^-16 for L up to 64 KiB, 2^-13 up to 512 KiB, 2^-11 up to
 *      2 MiB (the largest spans), then twice that per doubling of L (1/2
 *      above 1 GiB); a new segment above 2 GiB (n = 32) leaves no bits, and
 *      such a pointer passes. An entry that holds no segment, or a pool
 *      block, refuses it always. The check names the segment, not the
 *      allocation: a freed chunk of a span still held is told by its free
 *      tag, as in the pool. Why these bits: docs/design.md, Areas.
 *   [offset arithmetic] L <= 2^n, so p + k for k below an allocation's
 *      usable size never carries into the check, and ptr_of(addr(p) + k) ==
 *      p + k; span_rel() reads a chunk's offset out of either kind of
 *      pointer (area.c [placement]).
 *   [mapping records] This process maps an entry's OS segment into a
 *      record (ar_fb) that stays keyed by entry, names its segment and
 *      keeps its n and check, so a conversion pays one compare; a record of
 *      a segment the entry no longer holds names nothing (fb_lookup).
 *      Records are published whole by pointer and never freed under a
 *      reader: one replaced is kept on a list, unmapped at detach
 *      (dp_ar_free_fb).
 *   [locate] A pool pointer's span or block comes from its directory word
 *      (one load; another area's word refuses it, area_registry.c
 *      [directory]); a fallback pointer's from its entry, which must be a
 *      live SPAN or LARGE holding the segment whose check the pointer
 *      carries.
 *
 * Memory ordering: seg is stored before the entry's publishing CAS (a
 * release, acquire_bracketed) and read after an acquire load of the state
 * (dp_ar_locate, dp_ar_fb_map) or checked against a mapping record that was
 * (fb_lookup); directory words are acquire loads (dp_ar_dir_set's release
 * stores); a record and its page are published by release stores
 * (dp_ar_fb_remember) and read by acquire loads (fb_lookup,
 * dp_ar_fb_ptr_of).
 */

#include <stdlib.h>

#include "area.h"
#include "area_pointer.h"
#include "area_registry.h"
#include "dp_os.h"

/* [check]: the check of pointers into OS segment h (n offset bits): the
 * top 32 - n bits of a mix (splitmix64's finalizer) of h keyed by the
 * area's random key; none when n is 32. */
static inline uint32_t fb_check(const struct dsmpool_area *a, dsmpool_handle h, unsigned n) {
    uint64_t x = a->key ^ h;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return n >= 32 ? 0 : (uint32_t)(x >> (32 + n));
}

/* The base pointer of entry e's OS segment h of len bytes: offset 0, the
 * segment's check above it. */
dsmpool_ptr dp_ar_fb_base(const struct dsmpool_area *a, uint64_t e, dsmpool_handle h, uint64_t len) {
    unsigned n = ar_fb_bits(len);
    return FB_PTR(a->tag, e, (uint64_t)fb_check(a, h, n) << n);
}

/* The base pointer of entry e (block word blk, read by the caller): a pool
 * offset, or the fallback pointer of its OS segment -- a span's of class c
 * is cls_len(c) bytes (acquire_bracketed), a large block's (c ==
 * AR_LARGE_CLS) is what its descriptor says. */
dsmpool_ptr dp_ar_entry_base(struct dsmpool_area *a, uint64_t e, ar_span *sp, uint64_t blk, unsigned c) {
    if (blk != DP_BLOCK_FALLBACK) return DP_BLOCK_OFF(blk);
    dsmpool_handle h = dp_load_relaxed(&sp->seg); /* [imm while live] */
    return dp_ar_fb_base(a, e, h, c == AR_LARGE_CLS ? dp_seg_os_size(a->pool, h) : cls_len(c));
}

/* [mapping records]: this process's mapping of fallback entry e, if it
 * maps the entry's current OS segment (an entry can be reused for another
 * segment). Records are published whole by pointer and never freed under
 * a reader. */
static ar_fb *fb_lookup(struct dsmpool_area *a, uint64_t e) {
    _Atomic(ar_fb *) *page = dp_plain_load_acquire(&a->fb[e / 512]); /* pairs with dp_ar_fb_remember */
    if (!page) return NULL;
    ar_fb *r = dp_load_acquire_any(&page[e % 512]); /* pairs with dp_ar_fb_remember */
    if (!r) return NULL;
    ar_span *sp = dp_ar_entry(a->pool, a->ctl, e);
    return sp && dp_load_relaxed(&sp->seg) == r->seg ? r : NULL;
}

/* Install our mapping of segment seg for entry e, or, if another thread got
 * there first with the same segment, keep theirs and drop ours. Returns the
 * record in use; NULL (and ours unmapped) when out of memory. */
ar_fb *dp_ar_fb_remember(struct dsmpool_area *a, uint64_t e, char *base, uint64_t len,
                         dsmpool_handle seg) {
    pthread_mutex_lock(&a->lock);
    _Atomic(ar_fb *) *page = a->fb[e / 512];
    ar_fb *r = NULL, *cur;
    if (!page && (page = calloc(512, sizeof *page)) != NULL)
        dp_plain_store_release(&a->fb[e / 512], page);
    if (!page) goto out;
    cur = dp_load_relaxed_any(&page[e % 512]);
    if (cur && cur->seg == seg) { /* someone mapped it meanwhile */
        r = cur;
        goto out;
    }
    if (!(r = malloc(sizeof *r))) goto out;
    *r = (ar_fb){base, len, seg, ar_fb_bits(len), fb_check(a, seg, ar_fb_bits(len)), NULL};
    if (cur) { /* an earlier segment of this entry: unmapped at detach */
        cur->retired = a->fb_retired;
        a->fb_retired = cur;
    }
    dp_store_release_any(&page[e % 512], r); /* release: the record's fields */
    pthread_mutex_unlock(&a->lock);
    return r;
out:
    pthread_mutex_unlock(&a->lock);
    dp_os_unmap(base, len);
    return r;
}

/* Map a fallback entry in this process the first time a pointer needs it. */
ar_fb *dp_ar_fb_map(struct dsmpool_area *a, uint64_t e) {
    ar_fb *r = fb_lookup(a, e);
    if (r) return r;
    ar_span *sp = dp_ar_entry(a->pool, a->ctl, e);
    if (!sp) return NULL;
    uint64_t w = dp_load_acquire(&sp->state); /* acquire: pairs with acquire_bracketed's publishing CAS */
    if (SPW_ST(w) != SP_SPAN && SPW_ST(w) != SP_LARGE) return NULL;
    if (dp_load_relaxed(&sp->block) != DP_BLOCK_FALLBACK) return NULL;
    void *m;
    size_t l;
    dsmpool_handle h = dp_load_relaxed(&sp->seg);
    if (dp_seg_os_map(a->pool, h, &m, &l) != 0) return NULL;
    if (l > FB_MAX_SEG) { /* no area makes one: a damaged handle or descriptor */
        dp_os_unmap(m, l);
        return NULL;
    }
    return dp_ar_fb_remember(a, e, m, l, h);
}

static inline char *ar_addr(struct dsmpool_area *a, dsmpool_ptr p) { return ar_addr_n(a, p, 1); }

char *dsmpool_area_base(const dsmpool_area *area) {
    return area && area->magic == AR_OBJ_MAGIC ? area->base : NULL;
}

void *dsmpool_area_addr(dsmpool_area *area, dsmpool_ptr p) {
    if (!area || !p || area->magic != AR_OBJ_MAGIC) return NULL;
    return ar_addr(area, p);
}

int dp_ar_locate(struct dsmpool_area *a, dsmpool_ptr p, ar_loc *l) {
    dsmpool *pool = a->pool;
    if (!(p & FB_BIT)) {
        if (p < a->data_off || p - a->data_off >= a->data_size) return -EINVAL;
        uint64_t rel = p - a->data_off, k = rel >> AR_DIR_SHIFT;
        /* released memory holds no block; its directory page is not to be
         * made resident for a stray pointer (layout.c [lazy directory]) */
        if (!dp_dir_readable(pool, rel)) return -EINVAL;
        uint64_t dw = dp_load_acquire(&pool->dir[k]); /* acquire: pairs with dp_ar_dir_set */
        if (DIRW_AID(dw) != a->aid) return -EINVAL;
        l->e = DIRW_ENTRY(dw);
        l->cls = DIRW_CLS(dw);
        l->sp = NULL; /* small chunks need only the directory; see ar_locate_entry */
        if (l->cls >= AR_NCLS && l->cls != AR_LARGE_CLS) return -EINVAL; /* a damaged word */
        if (l->cls == AR_LARGE_CLS) {
            if (!(l->sp = dp_ar_entry(pool, a->ctl, l->e))) return -EINVAL;
            l->span = DP_BLOCK_OFF(dp_load_relaxed(&l->sp->block));
        } else {
            l->span = p - span_rel(l->cls, rel); /* data_off is a 2 MiB multiple */
        }
        l->off = p - l->span;
        return 0;
    }
    if (FB_TAG(p) != a->tag || !a->tag) return -EINVAL;
    l->e = FB_ENTRY(p);
    l->sp = dp_ar_entry(pool, a->ctl, l->e);
    if (!l->sp) return -EINVAL;
    uint64_t w = dp_load_acquire(&l->sp->state); /* acquire: pairs with acquire_bracketed's publishing CAS */
    if (dp_load_relaxed(&l->sp->block) != DP_BLOCK_FALLBACK) return -EINVAL;
    if (SPW_ST(w) == SP_LARGE) l->cls = AR_LARGE_CLS;
    else if (SPW_ST(w) == SP_SPAN) l->cls = (unsigned)(dp_load_relaxed(&l->sp->info) & 0xff);
    else return -EINVAL;
    if (l->cls >= AR_NCLS && l->cls != AR_LARGE_CLS) return -EINVAL; /* a corrupt entry */
    /* the segment the entry holds now (seg was stored before the
     * publication our acquire saw); a pointer into an earlier one is stale */
    dsmpool_handle h = dp_load_relaxed(&l->sp->seg); /* [imm while live] */
    uint64_t len = l->cls == AR_LARGE_CLS ? dp_seg_os_size(pool, h) : cls_len(l->cls);
    unsigned n = ar_fb_bits(len);
    if (!len || len > FB_MAX_SEG || FB_OFF(p) >> n != fb_check(a, h, n)) return -EINVAL;
    l->span = p & ~((1ull << n) - 1);
    l->off = p & ((1ull << n) - 1);
    return 0;
}

/* The relocatable pointer of local address u in this process's mapping of
 * one of the area's OS segments (current ones only); 0 if none. */
dsmpool_ptr dp_ar_fb_ptr_of(struct dsmpool_area *a, uintptr_t u) {
    if (!a->tag) return 0;
    for (unsigned i = 0; i < AR_MAX_ENTRIES / 512; i++) {
        _Atomic(ar_fb *) *page = dp_plain_load_acquire(&a->fb[i]); /* pairs with dp_ar_fb_remember */
        if (!page) continue;
        for (unsigned k = 0; k < 512; k++) {
            ar_fb *r = dp_load_acquire_any(&page[k]); /* pairs with dp_ar_fb_remember */
            if (!r || u < (uintptr_t)r->base || u - (uintptr_t)r->base >= r->len) continue;
            uint64_t e = (uint64_t)i * 512 + k;
            /* a record of a segment the entry no longer holds names nothing */
            return fb_lookup(a, e) == r && r->len <= FB_MAX_SEG
                       ? FB_PTR(a->tag, e, ((uint64_t)r->chk << r->nb) | (u - (uintptr_t)r->base))
                       : 0;
        }
    }
    return 0;
}
