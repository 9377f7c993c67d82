/*
 * area_verify.c -- the walks that read areas from outside: the checker's
 * (no chunk on two free lists, every link inside the area's spans) and the
 * inspector's read-only snapshot of one area.
 *
 * Layer: areas, above the lifetime (it walks every area of the pool through
 * a temporary object, dp_ar_fill). The checker (stats.c) calls
 * dp_area_verify inside the pool's quiet window; the inspector (inspect.c)
 * dp_area_inspect on a view that may be mapped read-only; the lost sweep
 * (area_recover.c) and a test hook walk one area with dp_ar_verify_area.
 *
 * Rules
 *   [verification] Every free chunk is marked once in a bit per chunk of
 *      its entry: those of every held cache record's lists (bounded by
 *      dp_ar_chunks_bound: a longer list has a cycle) and bump ranges, and
 *      of every live span's stack. A second mark is a chunk on two lists (a
 *      double free); a link that is not a chunk start of a live span of its
 *      class and this area, a damaged range or stack, a span entry that
 *      names no class: each is damage, -EUCLEAN with why. The walk reads
 *      only; it is believed because the caller holds the pool's quiet
 *      window (proc.c [quiet windows]; area_recover.c [quiet]). The scratch (the
 *      entries' bits) is zero at first, kept between the calls of one check
 *      and freed after.
 *   [inspection] The snapshot uses loads only (the view may be mapped
 *      read-only, and another process may be changing the area): every
 *      offset is checked before it is followed, and a value out of range
 *      marks the snapshot damaged, with why, instead of being used.
 *
 * Memory ordering: the owner words, entry states, page links and the area
 * state are acquire loads (dp_ar_cache_claim's CAS, dp_ar_span_push's and
 * acquire_bracketed's release CASes, the link CASes, destroy_explicit's
 * mark); the lists are read relaxed, since the window keeps their writers
 * out (verification) or any value is checked (inspection).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "area.h"
#include "area_pointer.h"
#include "area_registry.h"

static void vfail(ar_vctx *v, const char *fmt, unsigned long long x) {
    if (v->err) return;
    v->err = -EUCLEAN;
    snprintf(v->why, v->n, fmt, x, (unsigned long long)v->a->handle);
}

/* [verification]: mark chunk idx of entry e as free; a second mark is a
 * chunk on two lists. */
static void vmark(ar_vctx *v, uint64_t e, uint32_t idx, uint32_t nchunks, dsmpool_ptr p) {
    if (v->err || e >= AR_MAX_ENTRIES || idx >= nchunks) return;
    if (!v->bits[e]) {
        /* room for the chunks of any class, not this one's: while other
         * processes work, the same entry may be read as two classes' (a span
         * freed and made again between two reads), and a bitmap sized for the
         * first was overrun by the second (ASan, safety_soak) */
        uint32_t most = 0;
        for (unsigned c = 0; c < AR_NCLS; c++)
            if (cls_chunks(c) > most) most = cls_chunks(c);
        if (!(v->bits[e] = calloc((most + 63) / 64, 8))) {
            v->err = -ENOMEM;
            snprintf(v->why, v->n, "out of memory");
            return;
        }
        v->used[v->nused++] = e;
    }
    uint64_t bit = 1ull << (idx % 64);
    if (v->bits[e][idx / 64] & bit)
        vfail(v, "chunk %016llx of area %016llx is on two free lists (a double free)", p);
    v->bits[e][idx / 64] |= bit;
}

/* A free chunk pointer of class c: it must lie at a chunk start in one of
 * this area's spans of that class. */
static void vchunk(ar_vctx *v, dsmpool_ptr p, unsigned c) {
    ar_loc l;
    if (dp_ar_locate(v->a, p, &l) != 0 || l.cls != c || !ar_locate_entry(v->a, &l)) {
        vfail(v, "a free list links %016llx, which is not a chunk of area %016llx", p);
        return;
    }
    uint32_t idx;
    if (!chunk_at(c, l.off, &idx) || SPW_ST(dp_load_relaxed(&l.sp->state)) != SP_SPAN) {
        vfail(v, "a free list links %016llx, which is not a chunk of a live span of area %016llx", p);
        return;
    }
    vmark(v, l.e, idx, cls_chunks(c), p);
}

void dp_ar_verify_area(ar_vctx *v) {
    struct dsmpool_area *a = v->a;
    ar_ctl *ctl = a->ctl;
    for (uint32_t i = 0; i < AR_NCACHES && !v->err; i++) {
        ar_cache *rec = dp_ar_cache_rec(a->pool, ctl, i);
        if (!rec || !dp_load_acquire(&rec->owner)) continue; /* acquire: dp_ar_cache_claim's CAS */
        for (unsigned c = 0; c < AR_NCLS && !v->err; c++) {
            dsmpool_ptr h = dp_load_relaxed(&rec->head[c]);
            for (uint64_t guard = dp_ar_chunks_bound(a, c); h && !v->err; guard--) {
                if (!guard) {
                    vfail(v, "a free list of class %llu of area %016llx has a cycle", c);
                    break;
                }
                vchunk(v, h, c);
                char *m = ar_addr_n(a, h, 8);
                if (!m) break;
                memcpy(&h, m, 8);
            }
            uint64_t b = dp_load_relaxed(&rec->bump[c]);
            uint32_t e1 = BUMP_E1(b), left = BUMP_LEFT(b), idx = BUMP_IDX(b);
            if (!left) continue;
            ar_span *bsp = e1 ? dp_ar_entry(a->pool, ctl, e1 - 1) : NULL;
            if (!bsp || idx + left > cls_chunks(c)) {
                vfail(v, "a bump range of class %llu of area %016llx is damaged", c);
                break;
            }
            /* the chunks' own pointers, for the message of one found twice */
            dsmpool_ptr base = dp_ar_entry_base(a, e1 - 1, bsp, dp_load_relaxed(&bsp->block), c);
            for (uint32_t k = 0; k < left; k++) vmark(v, e1 - 1, idx + k, cls_chunks(c), base + chunk_off(c, idx + k));
        }
    }
    for (uint64_t e = ar_entry_next(ctl, 0); e < AR_MAX_ENTRIES && !v->err; e = ar_entry_next(ctl, e + 1)) {
        ar_span *sp = dp_ar_entry(a->pool, ctl, e);
        if (!sp) continue;
        uint64_t w = dp_load_acquire(&sp->state); /* acquire: dp_ar_span_push's release */
        if (SPW_ST(w) != SP_SPAN) continue;
        unsigned c = (unsigned)(dp_load_relaxed(&sp->info) & 0xff);
        if (c >= AR_NCLS) {
            vfail(v, "span entry %llu of area %016llx names no class", e);
            break;
        }
        dsmpool_ptr base = dp_ar_entry_base(a, e, sp, dp_load_relaxed(&sp->block), c);
        uint32_t idx = SPW_HEAD(w), k = SPW_COUNT(w);
        for (; idx && k && !v->err; k--) {
            if (idx > cls_chunks(c)) {
                vfail(v, "the returned stack of span entry %llu of area %016llx is damaged", e);
                break;
            }
            dsmpool_ptr cp = base + chunk_off(c, idx - 1);
            vmark(v, e, idx - 1, cls_chunks(c), cp);
            char *m = ar_addr_n(a, cp, 4);
            if (!m) break;
            memcpy(&idx, m, 4);
        }
    }
}

bool dp_ar_scratch_ready(dp_area_scratch *sc) {
    if (!sc->bits) sc->bits = calloc(AR_MAX_ENTRIES, sizeof(uint64_t *));
    if (!sc->used) sc->used = calloc(AR_MAX_ENTRIES, sizeof(uint64_t));
    return sc->bits && sc->used;
}

void dp_ar_vclear(ar_vctx *v) { /* the scratch goes back as it came: all NULL */
    for (size_t i = 0; i < v->nused; i++) {
        free(v->bits[v->used[i]]);
        v->bits[v->used[i]] = NULL;
    }
    v->nused = 0;
}

int dp_area_verify(dsmpool *p, dp_area_scratch *sc, char *why, size_t n) {
    ar_vctx v = {NULL, sc->bits, sc->used, 0, why, n, 0};
    static _Thread_local struct dsmpool_area tmp;
    if (!dp_ar_scratch_ready(sc)) {
        snprintf(why, n, "out of memory");
        return -ENOMEM;
    }
    v.bits = sc->bits;
    v.used = sc->used;
    for (uint64_t idx = 0; idx < p->nsegs && !v.err; idx++) {
        ar_ctl *ctl = dp_ar_ctl_of(p, idx);
        if (!ctl || dp_load_acquire(&ctl->state) != AR_LIVE) continue; /* acquire: destroy_explicit's mark */
        memset(&tmp, 0, sizeof tmp);
        dp_ar_fill(&tmp, p, ctl, idx + 1);
        tmp.handle = DP_HANDLE(DP_SEG_GEN(dp_load_relaxed(&p->segs[idx].state)), idx);
        v.a = &tmp;
        dp_ar_verify_area(&v);
        dp_ar_vclear(&v);
        dp_ar_free_fb(&tmp);
    }
    return v.err;
}

void dp_area_scratch_free(dp_area_scratch *sc) {
    free(sc->bits);
    free(sc->used);
    sc->bits = NULL;
    sc->used = NULL;
}

/* ---- inspection (inspect.c): a read-only snapshot of one area ------------ */

_Static_assert(AR_NCLS == DP_INSP_NCLS, "inspect.c's classes are the area's");

/* [inspection]: loads only (the view may be mapped read-only, and another
 * process may be changing the area): every offset is checked before it is
 * followed, and a value out of range marks the snapshot damaged instead of
 * being used. */
int dp_area_inspect(dsmpool *p, uint64_t idx, dp_insp_area *out) {
    memset(out, 0, sizeof *out);
    for (unsigned c = 0; c < AR_NCLS; c++) out->chunk_size[c] = cls_size(c);
    ar_ctl *ctl = dp_ar_ctl_of(p, idx);
    if (!ctl) return -ENOENT;
    uint64_t w = dp_load_acquire(&p->segs[idx].state); /* acquire: create's LIVE CAS */
    out->seg_index = idx;
    out->handle = DP_HANDLE(DP_SEG_GEN(w), idx);
    uint64_t st = dp_load_acquire(&ctl->state); /* acquire: destroy_explicit's CAS */
    out->state = st == AR_LIVE || st == AR_DESTROYED ? (unsigned)st : 0;
    out->flags = ctl->flags;
    out->tag = ctl->tag;
    out->limit = dp_load_relaxed(&ctl->limit); /* relaxed: counters, a snapshot */
    out->held = dp_load_relaxed(&ctl->held);
    out->lost = dp_load_relaxed(&ctl->lost);
    for (uint32_t k = 0; k < AR_RECPAGES; k++) {
        uint64_t off = dp_load_relaxed(&ctl->recpage[k]); /* relaxed: a snapshot, checked below */
        if (off && !dp_block_ok(p, off, AR_RECPAGE_BYTES)) {
            out->damaged = true;
            snprintf(out->why, sizeof out->why, "cache record page %u at offset %llu is outside the data", k,
                     (unsigned long long)off);
        }
    }
    for (uint32_t k = 0; k < AR_REGPAGES; k++) {
        uint64_t off = dp_load_acquire(&ctl->regpage[k]); /* acquire: dp_frame_link's CAS */
        if (!off) continue;
        if (!dp_block_ok(p, off, DP_FRAME_SIZE)) {
            out->damaged = true;
            snprintf(out->why, sizeof out->why, "registry page %u at offset %llu is outside the data", k,
                     (unsigned long long)off);
            continue;
        }
        out->registry_pages++;
        const ar_span *pg = dp_at(p, off);
        for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
            uint64_t sw = dp_load_acquire(&pg[i].state); /* acquire: acquire_bracketed's publishing CAS */
            unsigned s = SPW_ST(sw);
            if (s != SP_SPAN && s != SP_LARGE) continue;
            uint64_t blk = dp_load_relaxed(&pg[i].block);
            if (blk == DP_BLOCK_FALLBACK) out->fallback_entries++;
            if (s == SP_SPAN) {
                unsigned c = (unsigned)(dp_load_relaxed(&pg[i].info) & 0xff);
                if (c < AR_NCLS) out->spans[c]++;
                else out->damaged = true;
                continue;
            }
            out->large_blocks++;
            uint64_t bytes = blk == DP_BLOCK_FALLBACK ? dp_seg_os_size(p, dp_load_relaxed(&pg[i].seg))
                             : DP_BLOCK_ORDER(blk) <= DP_PA_MAX_ORDER && dp_block_ok(p, DP_BLOCK_OFF(blk),
                                   DP_BLOCK_BYTES(blk))
                                 ? DP_BLOCK_BYTES(blk)
                                 : 0;
            if (!bytes && blk != DP_BLOCK_FALLBACK) out->damaged = true;
            out->large_bytes += bytes;
        }
    }
    uint64_t most = p->geo.region_size / AR_MIN_CHUNK; /* no cache holds more chunks than that */
    for (uint32_t i = 0; i < AR_NCACHES; i++) {
        const ar_cache *cr = dp_ar_cache_rec(p, ctl, i);
        if (!cr || !dp_load_relaxed(&cr->owner)) continue; /* relaxed: a snapshot */
        out->caches++;
        for (unsigned c = 0; c < AR_NCLS; c++) {
            uint64_t cnt = dp_load_relaxed(&cr->count[c]), b = dp_load_relaxed(&cr->bump[c]);
            uint64_t left = BUMP_E1(b) ? BUMP_LEFT(b) : 0;
            if (cnt > most || left > cls_chunks(c)) {
                out->damaged = true;
                if (!out->why[0])
                    snprintf(out->why, sizeof out->why, "cache record %u class %u: count %llu, bump %llu", i, c,
                             (unsigned long long)cnt, (unsigned long long)left);
                continue;
            }
            out->cached_chunks[c] += cnt + left;
            out->cached_bytes += (cnt + left) * cls_size(c);
        }
    }
    return 0;
}
