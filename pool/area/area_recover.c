/*
 * area_recover.c -- areas after a death: a dead slot's cache records and
 * entries, the checker's view of operations in flight, the frames areas
 * own (for the leak sweep), and the lost sweep that gives back the chunks
 * that deaths inside operations left on no list.
 *
 * Layer: areas, the top of the layer but the test hooks (the lost sweep
 * walks an area as the checker does: area_verify.c). Recovery (recover.c)
 * calls dp_area_recover_slot, dp_area_sweep_lost and dp_area_mark_owned;
 * the checker and the leak sweep (stats.c, recover.c) the quiet calls.
 *
 * Rules
 *   [recovery] Recovery of a dead slot (recover.c) visits only the areas
 *      the slot holds a reference on (an ACTIVE record): those references
 *      keep the control blocks alive until the segment layer drops them,
 *      after this step; any other area's block may be given back at any
 *      moment by its last detacher, so it is never walked. There, its cache
 *      records are taken by CAS (owner word set to the dead slot with a
 *      recovery mark, so a recoverer that dies leaves them to the next),
 *      drained inside an operation, released (area_cache.c [give back]);
 *      its INIT and RETIRED entries are taken and released (area_registry.c
 *      [entries]). A record found inside an operation (odd sequence) may
 *      have lost chunks: ctl->lost and hdr->lost_due are counted; so are
 *      they for each area with shared users when the slot died inside a
 *      bracket (a taker holding a stolen stack, a free between tag and push:
 *      area_shared.c [shared path]). The recoverer holds the dead slot's
 *      liveness lock throughout, so a destroyer -- in another process, or
 *      in the recoverer's own (proc.c: held_by_us) -- sees the marked
 *      records as live (area_life.c [destroy]).
 *   [quiet] The checker's view of area operations (area_cache.c
 *      [operations] from outside): every cache record's (owner, sequence),
 *      and the link word of every record page not linked yet, is noted at
 *      the window's open, which fails (-EBUSY) while a live owner is inside
 *      an operation; the window holds if none of them moved.
 *   [owned frames] Every frame an area owns is marked for the leak sweep:
 *      cache record pages, registry pages, spans and large blocks in the
 *      pool (as many bytes as their entry's record agrees with:
 *      area_registry.c [exact records]; a word that disagrees is marked as
 *      damage), checked-mode bitmaps.
 *   [lost chunks] Every free chunk carries its tag before it leaves one
 *      holder (a list, a stack, a bump range) and is written into the next
 *      -- a chunk leaves first (leak-biased: never on two lists), so a death
 *      in between leaves it on none ([recovery] counts it). The lost sweep
 *      (recover.c, under the sweep lock) holds a reference on the area and a
 *      cache record of its own; inside the pool's quiet window, with none of
 *      the area's caches inside an operation, it marks every chunk a list,
 *      stack or range holds (the checker's walk, area_verify.c
 *      [verification]); then, inside an operation on its record (so an
 *      explicit destroy waits for it), it gives back each unmarked chunk
 *      whose tag is intact (nobody can reach it: a correct program does not
 *      hold a chunk whose tag is set), retires spans that are whole but were
 *      not retired (not the kept span: area_span.c [kept span]), and sets
 *      held to what the entries hold if a death came between the two
 *      (area_life.c [accounting]). A sweep that cannot get its windows, or a
 *      record, stays due; one that finds damage leaves it to the checker.
 *
 * Crash bound: a recoverer killed while it drains a record leaves it marked
 * in the dead slot's name, for the next recoverer; killed in the lost sweep,
 * ctl->lost stays (it goes to 0 only from the value the sweep started from,
 * by CAS), so the sweep stays due. The held count is exact after the sweep.
 *
 * Memory ordering: a dead owner's record and entries are read after the
 * liveness lock's acquire, the owner CAS (acq_rel) and acquire loads of the
 * entries; the lost counts are relaxed, published by the release increment
 * of hdr->lost_due, which the sweep's acquire load sees (recover.c
 * sweep_lost); the quiet window's records are acquire loads of
 * dp_ar_cache_claim's CAS and ar_op_end's release, and dp_area_quiet_holds'
 * acquire fence is the other side of ar_op_begin's release fence.
 *
 * Injection points: "area.recover.area" (recovery about to walk an area of
 * the dead slot: a test lets the area's last process detach there, and the
 * recoverer must not walk a control block that went back).
 */

#include <stdlib.h>
#include <string.h>

#include "area.h"
#include "area_pointer.h"
#include "dp_os.h"

typedef struct held_areas {
    uint64_t *idx;
    size_t n, cap;
} held_areas;

static void note_area(dsmpool *p, dp_a64 *r, void *arg) {
    held_areas *h = arg;
    /* acquire: pairs with seg_ref_bracketed's and seg_create_bracketed's ACTIVE stores */
    uint64_t v = dp_load_acquire(r);
    if (!v || DP_REC_ST(v) != DP_REC_ACTIVE) return;
    uint64_t idx = DP_REC_IDX(v);
    if (idx >= p->nsegs || DP_SEG_GEN(dp_load_acquire(&p->segs[idx].state)) != DP_REC_GEN(v)) return;
    for (size_t i = 0; i < h->n; i++)
        if (h->idx[i] == idx) return;
    if (h->n == h->cap) {
        size_t nc = h->cap ? 2 * h->cap : 16;
        uint64_t *ni = realloc(h->idx, nc * sizeof *ni);
        if (!ni) return; /* recovery of that area waits for the next call */
        h->idx = ni;
        h->cap = nc;
    }
    h->idx[h->n++] = idx;
}

/* [recovery] for a dead slot, whose liveness lock the caller holds. Only the
 * areas it holds a reference on (an ACTIVE record): those references keep
 * their control blocks alive until the segment layer drops them, after
 * this; a process has caches and entries only in areas it is attached to.
 * (Any other area's control block may be given back meanwhile by its last
 * detacher: never walk it.) A temporary area object lets the drain code
 * run unchanged. */
void dp_area_recover_slot(dsmpool *p, uint32_t slot) {
    held_areas h = {NULL, 0, 0};
    /* area_shared.c [shared path]: it died inside a bracket, maybe a
     * shared-path free between its chunk's tag and its push. acquire:
     * dp_bracket_close's release */
    bool in_bracket = slot < p->nprocs && dp_load_acquire(&p->procs[slot].inflight) != 0;
    dp_slot_records(p, slot, note_area, &h);
    for (size_t k = 0; k < h.n; k++) {
        uint64_t idx = h.idx[k];
        ar_ctl *ctl = dp_ar_ctl_of(p, idx);
        if (!ctl) continue;
        DP_INJECT("area.recover.area");
        static _Thread_local struct dsmpool_area tmp; /* 2 KiB of map pointers: not on the stack */
        memset(&tmp, 0, sizeof tmp);
        dp_ar_fill(&tmp, p, ctl, idx + 1);
        for (uint32_t i = 0; i < AR_NCACHES; i++) {
            ar_cache *rec = dp_ar_cache_rec(p, ctl, i);
            if (!rec) continue;
            uint64_t o = dp_load_acquire(&rec->owner); /* acquire: dp_ar_cache_claim's CAS */
            /* acq_rel: the record is ours from here; a recoverer that dies
             * leaves it in the dead slot's name for the next one */
            if (o && (uint32_t)o == slot + 1 &&
                dp_cas_acq_rel(&rec->owner, &o, (uint64_t)(slot + 1) | AR_RECOVERY)) {
                /* relaxed: ordered by the owner CAS; odd: it died inside an
                 * operation (or a recoverer did), which may have lost chunks */
                if (dp_load_relaxed(&rec->seq) & 1) {
                    dp_fetch_add_relaxed(&ctl->lost, 1); /* relaxed: ordered by the release below */
                    /* release: pairs with sweep_lost's acquire (recover.c) */
                    dp_fetch_add_release(&p->hdr->lost_due, 1);
                }
                dp_ar_cache_release(&tmp, rec, slot);
            }
        }
        if (in_bracket && dp_load_relaxed(&ctl->shared)) { /* relaxed: set before any shared operation */
            dp_fetch_add_relaxed(&ctl->lost, 1); /* relaxed: ordered by the release below */
            /* release: pairs with sweep_lost's acquire (recover.c) */
            dp_fetch_add_release(&p->hdr->lost_due, 1);
        }
        for (uint32_t pg = 0; pg < AR_REGPAGES; pg++) {
            if (!dp_load_relaxed(&ctl->regpage[pg])) continue;
            for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
                uint64_t e = (uint64_t)pg * AR_PER_PAGE + i;
                ar_span *sp = dp_ar_entry(p, ctl, e);
                if (!sp) break;
                uint64_t w = dp_load_acquire(&sp->state); /* acquire: the dead owner's writes */
                unsigned st = SPW_ST(w);
                if ((st == SP_INIT || st == SP_RETIRED) && SPW_OWNER(w) == slot && dp_ar_entry_take_from(sp, &w, slot))
                    dp_ar_entry_release(p, ctl, tmp.aid, e, sp, w, slot);
            }
        }
        dp_ar_free_fb(&tmp);
    }
    free(h.idx);
}

/* [owned frames]: mark the frames every area owns: cache record pages,
 * registry pages, spans and large blocks in the pool, checked-mode bitmaps. */
void dp_area_mark_owned(dsmpool *p, dp_mark_fn mark, void *arg) {
    for (uint64_t idx = 0; idx < p->nsegs; idx++) {
        ar_ctl *ctl = dp_ar_ctl_of(p, idx);
        if (!ctl) continue;
        for (uint32_t k = 0; k < AR_RECPAGES; k++) {
            uint64_t off = dp_load_acquire(&ctl->recpage[k]); /* acquire: dp_block_link's CAS */
            if (off) mark(arg, off, AR_RECPAGE_BYTES, "an area cache record page");
        }
        for (uint32_t k = 0; k < AR_REGPAGES; k++) {
            uint64_t off = dp_load_acquire(&ctl->regpage[k]);
            if (!off) continue;
            mark(arg, off, DP_FRAME_SIZE, "an area registry page");
            if (!dp_block_ok(p, off, DP_FRAME_SIZE)) continue;
            ar_span *pg = dp_at(p, off);
            for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
                if (SPW_ST(dp_load_acquire(&pg[i].state)) == SP_FREE) continue;
                uint64_t blk = dp_load_acquire(&pg[i].block), info = dp_load_relaxed(&pg[i].info);
                uint64_t bm = ar_info_bitmap(info);
                if (blk && blk != DP_BLOCK_FALLBACK) {
                    uint64_t bytes = dp_ar_entry_block_bytes(&pg[i], blk);
                    if (bytes) mark(arg, DP_BLOCK_OFF(blk), bytes, "an area span");
                    else mark(arg, 0, 0, "an area entry whose block word disagrees with its record");
                }
                if (bm)
                    mark(arg, bm, (uint64_t)DP_FRAME_SIZE << cls_bm_order((unsigned)(info & 0xff)),
                         "a checked-mode bitmap");
            }
        }
    }
}

/* [quiet], area_cache.c [operations] seen from outside: every cache record's
 * (owner, sequence) of one area, appended to q; -EBUSY if a live owner is
 * inside an operation. */
static int quiet_open_ctl(dsmpool *p, ar_ctl *ctl, dp_area_quiet *q) {
    for (uint32_t i = 0; i < AR_NCACHES; i++) { /* every record: a claim during the pass shows too */
        ar_cache *rec = dp_ar_cache_rec(p, ctl, i);
        uint64_t o = 0, s = 0;
        if (rec) {
            o = dp_load_acquire(&rec->owner); /* acquire: pairs with dp_ar_cache_claim's CAS */
            s = dp_load_acquire(&rec->seq); /* acquire: pairs with ar_op_end's release */
            if (o && (s & 1) && dp_slot_alive(p, (uint32_t)o - 1)) return -EBUSY;
        }
        if (q->n + 3 > q->cap) {
            size_t nc = q->cap ? q->cap * 2 : 768;
            uint64_t *ns = realloc(q->seq, nc * sizeof *ns);
            if (!ns) return -ENOMEM;
            q->seq = ns;
            q->cap = nc;
        }
        if (!rec) { /* a page not linked yet: one linked during the window (a claim) shows */
            dp_a64 *link = &ctl->recpage[i / AR_RECS_PER_PAGE];
            q->seq[q->n++] = (uintptr_t)link | 1;
            q->seq[q->n++] = dp_load_relaxed(link); /* relaxed: compared only; 0, or damaged */
            q->seq[q->n++] = 0;
            i = (i / AR_RECS_PER_PAGE + 1) * AR_RECS_PER_PAGE - 1; /* the next page */
            continue;
        }
        q->seq[q->n++] = (uintptr_t)&rec->seq;
        q->seq[q->n++] = s;
        q->seq[q->n++] = o;
    }
    return 0;
}

/* The same over every area of the pool. */
int dp_area_quiet_open(dsmpool *p, dp_area_quiet *q) {
    q->n = 0;
    for (uint64_t idx = 0; idx < p->nsegs; idx++) {
        ar_ctl *ctl = dp_ar_ctl_of(p, idx);
        int r = ctl ? quiet_open_ctl(p, ctl, q) : 0;
        if (r) return r;
    }
    return 0;
}

bool dp_area_quiet_holds(dsmpool *p, const dp_area_quiet *q) {
    dp_fence_acquire(); /* pairs with ar_op_begin's release fence */
    for (size_t i = 0; i < q->n; i += 3) {
        if (q->seq[i] & 1) { /* a record page's link word, as it was at the open */
            if (dp_load_relaxed((dp_a64 *)(uintptr_t)(q->seq[i] & ~(uint64_t)1)) != q->seq[i + 1]) return false;
            continue;
        }
        dp_a64 *seq = (dp_a64 *)(uintptr_t)q->seq[i];
        ar_cache *rec = (ar_cache *)((char *)seq - offsetof(ar_cache, seq));
        if (dp_load_relaxed(seq) != q->seq[i + 1] || dp_load_relaxed(&rec->owner) != q->seq[i + 2])
            return false;
    }
    (void)p;
    return true;
}

void dp_area_quiet_close(dp_area_quiet *q) {
    free(q->seq);
    q->seq = NULL;
    q->n = q->cap = 0;
}

static bool lost_add(ar_lost_list *l, uint64_t e, uint32_t idx, unsigned c) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 64;
        ar_lost_ref *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) return false;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = (ar_lost_ref){e, idx, c};
    return true;
}

/* Walk the live spans of v's area after dp_ar_verify_area marked every chunk a
 * list, stack or range holds. fn(e, sp, c, base, idx, m, tagged) for every
 * chunk none holds; whole spans (count full, not retired) go to whole. */
int dp_ar_walk_unheld(ar_vctx *v, ar_lost_list *whole,
                      bool (*fn)(void *, uint64_t, unsigned, dsmpool_ptr, uint32_t, bool), void *arg) {
    struct dsmpool_area *a = v->a;
    for (uint64_t e = ar_entry_next(a->ctl, 0); e < AR_MAX_ENTRIES; e = ar_entry_next(a->ctl, e + 1)) {
        ar_span *sp = dp_ar_entry(a->pool, a->ctl, e);
        if (!sp) continue;
        uint64_t w = dp_load_acquire(&sp->state); /* acquire: the entry's publication */
        unsigned st = SPW_ST(w), c = (unsigned)(dp_load_relaxed(&sp->info) & 0xff);
        uint64_t blk = dp_load_relaxed(&sp->block);
        if (st == SP_LARGE && blk) {
            if (!fn(arg, e, AR_LARGE_CLS, dp_ar_entry_base(a, e, sp, blk, AR_LARGE_CLS), 0, false)) return -ENOMEM;
            continue;
        }
        if (st != SP_SPAN || c >= AR_NCLS || !blk) continue;
        dsmpool_ptr base = dp_ar_entry_base(a, e, sp, blk, c);
        uint32_t n = cls_chunks(c);
        if (SPW_COUNT(w) == n) {
            if (whole && !lost_add(whole, e, UINT32_MAX, c)) return -ENOMEM;
            continue;
        }
        for (uint32_t idx = 0; idx < n; idx++) {
            if (ar_vmarked(v, e, idx)) continue;
            dsmpool_ptr cp = base + chunk_off(c, idx);
            char *m = ar_addr_n(a, cp, 16);
            if (!m) continue;
            uint64_t have;
            memcpy(&have, m + 8, 8);
            if (!fn(arg, e, c, cp, idx, have == ar_free_tag(a, cp))) return -ENOMEM;
        }
    }
    return 0;
}

/* What the area's entries hold, as held should say ([lost chunks]); false if an
 * entry is between owners (INIT, RETIRED), when no sum is exact. */
static bool held_sum(struct dsmpool_area *a, uint64_t *sum) {
    *sum = 0;
    for (uint64_t e = ar_entry_next(a->ctl, 0); e < AR_MAX_ENTRIES; e = ar_entry_next(a->ctl, e + 1)) {
        ar_span *sp = dp_ar_entry(a->pool, a->ctl, e);
        if (!sp) continue;
        uint64_t w = dp_load_acquire(&sp->state); /* acquire: the entry's publication */
        unsigned st = SPW_ST(w);
        if (st == SP_FREE) continue;
        if (st != SP_SPAN && st != SP_LARGE) return false;
        uint64_t blk = dp_load_relaxed(&sp->block);
        if (blk == DP_BLOCK_FALLBACK) *sum += dp_seg_os_size(a->pool, dp_load_relaxed(&sp->seg));
        else if (blk && DP_BLOCK_ORDER(blk) <= DP_PA_MAX_ORDER) *sum += DP_BLOCK_BYTES(blk);
    }
    return true;
}

static bool note_lost(void *arg, uint64_t e, unsigned c, dsmpool_ptr cp, uint32_t idx, bool tagged) {
    (void)cp;
    return !tagged || c == AR_LARGE_CLS || lost_add(arg, e, idx, c);
}

/* One area whose control block we hold a reference on (so no last detach frees
 * it), with a cache record of our own (mine). Find the lost chunks inside the
 * pool's quiet window (no recovery runs, no bracket is open) and with none of
 * the area's caches inside an operation; then, inside an operation on mine (so
 * an explicit destroy waits for us: area_life.c [destroy]), give them back. A
 * chunk that is held by no list, stack or range and still carries its free tag
 * was being freed, drained or moved by an operation that died: nobody can
 * reach it any more, so giving it back after the windows close races with
 * nobody. */
static int lost_sweep_area(struct dsmpool_area *a, ar_cache *mine, dp_area_scratch *sc, size_t *got) {
    dsmpool *p = a->pool;
    char why[200];
    for (int tries = 0; tries < 50; tries++) {
        if (tries) dp_os_sleep_ns(100000);
        dp_quiet pq = {0};
        dp_area_quiet q = {0};
        int r = dp_quiet_open(p, &pq, true);
        if (r == 0) r = quiet_open_ctl(p, a->ctl, &q);
        if (r) {
            dp_area_quiet_close(&q);
            dp_quiet_close(&pq);
            if (r == -ENOMEM || r == -EAGAIN) return r; /* (-EAGAIN: a new death, recovery first) */
            continue;
        }
        ar_vctx v = {a, sc->bits, sc->used, 0, why, sizeof why, 0};
        ar_lost_list lost = {0}, whole = {0};
        uint64_t held = dp_load_relaxed(&a->ctl->held), sum = 0; /* relaxed: the windows order it */
        bool exact = held_sum(a, &sum);
        dp_ar_verify_area(&v);
        if (!v.err) r = dp_ar_walk_unheld(&v, &whole, note_lost, &lost);
        bool holds = dp_area_quiet_holds(p, &q) && dp_quiet_holds(p, &pq);
        dp_ar_vclear(&v);
        dp_area_quiet_close(&q);
        dp_quiet_close(&pq);
        if (v.err || r || !holds) {
            free(lost.v);
            free(whole.v);
            if (v.err || r) return v.err ? v.err : r; /* damage: the checker's to report */
            continue;
        }
        uint64_t s = ar_op_begin(mine);
        if (!ar_live(a)) { /* destroyed meanwhile: its destroyer takes everything */
            ar_op_end(mine, s);
            free(lost.v);
            free(whole.v);
            return 0;
        }
        /* a death between the reservation of held bytes and the entry that
         * records them left the count wrong; nothing changed it during the
         * windows: set it right, unless something did since (then again), and
         * before our pushes retire anything. relaxed: a counter; the CAS
         * alone decides */
        if (exact && held != sum &&
            !dp_cas_relaxed(&a->ctl->held, &held, sum)) {
            ar_op_end(mine, s);
            free(lost.v);
            free(whole.v);
            continue;
        }
        for (size_t i = 0; i < lost.n; i++) {
            ar_lost_ref *l = &lost.v[i];
            ar_span *sp = dp_ar_entry(p, a->ctl, l->e);
            uint64_t blk = sp ? dp_load_relaxed(&sp->block) : 0;
            dsmpool_ptr cp = (sp ? dp_ar_entry_base(a, l->e, sp, blk, l->cls) : 0) + chunk_off(l->cls, l->idx);
            char *m = sp ? ar_addr_n(a, cp, 4) : NULL;
            if (m) dp_ar_span_push(p, a->ctl, a->aid, l->e, sp, l->cls, l->idx, m, p->slot);
        }
        size_t kept = 0;
        for (size_t i = 0; i < whole.n; i++) { /* a death between the whole count and its retirement */
            /* relaxed: area_span.c [kept span], which the sweep leaves alone */
            if (dp_load_relaxed(&a->ctl->sh_keep) == whole.v[i].e + 1) {
                kept++;
                continue;
            }
            ar_span *sp = dp_ar_entry(p, a->ctl, whole.v[i].e);
            uint64_t w = sp ? dp_load_acquire(&sp->state) : 0; /* acquire: every push's link */
            if (!sp || SPW_ST(w) != SP_SPAN || SPW_COUNT(w) != cls_chunks(whole.v[i].cls)) continue;
            if (dp_ar_entry_take_from(sp, &w, p->slot)) {
                dp_fetch_add_relaxed(&a->ctl->partial[whole.v[i].cls], (uint64_t)-1); /* relaxed: a hint */
                dp_ar_entry_release(p, a->ctl, a->aid, whole.v[i].e, sp, w, p->slot);
            }
        }
        ar_op_end(mine, s);
        *got += lost.n + whole.n - kept;
        free(lost.v);
        free(whole.v);
        return 0;
    }
    return -EBUSY;
}

bool dp_area_sweep_lost(dsmpool *p, dp_area_scratch *sc, size_t *got) {
    if (!p->has_slot) return false; /* a retirement needs a live owner: the next recovery with a slot */
    if (!dp_ar_scratch_ready(sc)) return false;
    static _Thread_local struct dsmpool_area tmp;
    uint64_t me = (uint64_t)(p->slot + 1) | ((uint64_t)(uint32_t)dp_os_gettid() << 32);
    bool done = true;
    for (uint64_t idx = 0; idx < p->nsegs; idx++) {
        ar_ctl *ctl = dp_ar_ctl_of(p, idx);
        /* relaxed: a first look; what we act on is read again under a
         * reference */
        if (!ctl || !dp_load_relaxed(&ctl->lost)) continue;
        dsmpool_seg *ref; /* [recovery]'s reason, here: no last detach frees the block under us */
        dsmpool_handle h = DP_HANDLE(DP_SEG_GEN(dp_load_acquire(&p->segs[idx].state)), idx);
        int r = dsmpool_seg_attach(p, h, &ref);
        if (r) { /* gone: nothing of it is lost any more; anything else: next time */
            if (r != -ESTALE && r != -ENOENT) done = false;
            continue;
        }
        /* acquire: pairs with the CAS below (an earlier dp_area_sweep_lost's) */
        uint64_t lost = dp_load_acquire(&ctl->lost);
        ar_cache *mine = dp_ar_ctl_of(p, idx) == ctl && dp_load_acquire(&ctl->state) == AR_LIVE && lost
                             ? dp_ar_cache_claim(p, ctl, me) : NULL;
        if (mine) {
            memset(&tmp, 0, sizeof tmp);
            dp_ar_fill(&tmp, p, ctl, idx + 1);
            tmp.handle = h;
            /* acq_rel: a death counted since stays due (the CAS fails) */
            if (lost_sweep_area(&tmp, mine, sc, got) != 0 || !dp_cas_acq_rel(&ctl->lost, &lost, 0)) done = false;
            dp_ar_cache_release(&tmp, mine, p->slot); /* it holds nothing: just given up */
            dp_ar_free_fb(&tmp);
        } else if (lost && dp_load_acquire(&ctl->state) == AR_LIVE) {
            done = false; /* every cache record is held: next time */
        }
        dsmpool_seg_detach(ref);
    }
    return done;
}
