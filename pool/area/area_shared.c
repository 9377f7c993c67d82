/*
 * area_shared.c -- the shared path: a thread that finds every cache record
 * of an area held uses the area all the same, with no cache: it takes a
 * chunk straight off a span's stack, and its frees push straight back.
 *
 * Layer: areas, above the small path (whose hand out it shares) and the
 * span stacks; area_alloc.c runs its operations (shared_alloc,
 * shared_free), area_large.c its grows.
 *
 * Rules
 *   [shared path] A thread that finds every cache record held takes none:
 *      its tc has rec NULL, and it sets ctl->shared before its first
 *      operation (a relaxed store of its own, then a seq_cst fence: a
 *      destroyer that misses the flag is seen DESTROYED; area_cache.c
 *      dp_ar_tc_get_slow). Each of its operations is a bracket of its
 *      process's slot (proc.c [brackets]) instead of a record's sequence: begun
 *      (two acq_rel RMWs), the area state read, the work, ended. A destroyer
 *      that sees ctl->shared waits for those brackets too (area_life.c
 *      [destroy]); recovery of a slot that died inside one counts ctl->lost
 *      (area_recover.c [recovery]). Large blocks are as with a record. Every
 *      4096 shared operations the thread looks for a record again
 *      (dp_ar_shared_done). Stats add the shared path's asked/given
 *      (area_life.c [accounting]). The lost sweep needs a record of its own:
 *      while all are held it stays due.
 *   [take] A chunk is taken from a span of its class with returned chunks
 *      (the last that served, then any, from ctl->sh_hint; looking again a
 *      few times, with growing pauses, before a fresh span, since a stack
 *      another taker holds looks empty): the whole stack is stolen by one
 *      CAS (as a refill does: area_span.c [stacks], [class again]), its top
 *      kept -- it must carry its free tag and a link that fits the count, or
 *      the chain is left for the lost sweep (area_span.c [chains]) -- and
 *      the rest put back (dp_ar_chain_return). No CAS depends on a link read
 *      from a chunk the taker does not hold, so a taker stopped for any time
 *      (across generation wraps) installs nothing stale. Else a fresh span,
 *      published with chunks 1.. on its stack (area_acquire.c [chained
 *      spans]), chunk 0 the caller's.
 *   [shared trim] A shared operation that sees a trim request gives the
 *      kept span back (area_span.c [kept span]; area_cache.c [short of
 *      memory]): it caches nothing else.
 *
 * Crash bound: a taker killed holding a stolen stack, or a free killed
 * between its chunk's tag and its push, leaves tagged chunks on no stack,
 * inside a bracket: recovery counts ctl->lost for each area of the slot that
 * has shared users, and the lost sweep gives them back.
 *
 * Memory ordering: the steal is an acquire CAS (the pushes' links and
 * tags), the put back a release CAS (dp_ar_chain_return); the flag is a
 * relaxed store ordered by the seq_cst fence against destroy_explicit's.
 *
 * Injection points: "area.take.read" (a taker read a span's word, before
 * its steal CAS: a test parks it there across 2^24 operations on the span,
 * and the steal must still hand out every chunk once), "area.take.stolen"
 * (it holds the stolen stack).
 */

#include "area.h"
#include "area_pointer.h"

/* [take]: take one chunk of class c off span e's stack: steal the whole
 * stack (one CAS, as a refill does), keep its top, put the rest back. No
 * CAS depends on a link read from a chunk we do not hold, so a stopped
 * thread cannot install a stale link (no ABA). false: the stack is empty,
 * not a span of c, or damaged. */
static bool span_take(struct dsmpool_area *a, unsigned c, uint64_t e, ar_span *sp, dsmpool_ptr *cpp,
                      char **mp) {
    uint32_t n = cls_chunks(c);
    uint64_t w = dp_load_relaxed(&sp->state); /* relaxed: the CAS validates */
    for (;;) {
        if (SPW_ST(w) != SP_SPAN || !SPW_COUNT(w) || (dp_load_relaxed(&sp->info) & 0xff) != c) return false;
        if (SPW_COUNT(w) > n || !SPW_HEAD(w) || SPW_HEAD(w) > n) return false; /* damaged: for check() */
        DP_INJECT("area.take.read");
        /* acquire: the pushes' links and tags (dp_ar_span_push's release) */
        if (dp_cas_acquire(&sp->state, &w, SPW(SPW_GEN(w) + 1, 0, 0, SP_SPAN))) break;
    }
    dp_fetch_add_relaxed(&a->ctl->partial[c], (uint64_t)-1); /* relaxed: a hint */
    if (!dp_ar_steal_class_holds(a, c, e, sp, w)) return false;
    DP_INJECT("area.take.stolen");
    uint32_t count = SPW_COUNT(w), next = 0;
    dsmpool_ptr base = dp_ar_entry_base(a, e, sp, dp_load_relaxed(&sp->block), c); /* [imm while live] */
    dsmpool_ptr cp = base + chunk_off(c, SPW_HEAD(w) - 1);
    char *m = ar_addr_n(a, cp, 16);
    uint64_t tag = 0;
    if (m) {
        memcpy(&next, m, 4);
        memcpy(&tag, m + 8, 8);
    }
    /* every chunk on a stack carries its tag (area_recover.c [lost chunks])
     * and the links fit the count */
    if (!m || tag != ar_free_tag(a, cp) || next > n || (count > 1) != (next != 0)) {
        dp_ar_chain_lost(a);
        return false;
    }
    if (count > 1) dp_ar_chain_return(a, c, e, sp, base, next, count - 1);
    *cpp = cp;
    *mp = m;
    return true;
}

/* [take]: a chunk of class c for a thread without a cache record: popped
 * off a span with returned chunks (the last one that served, then the
 * others), else the first chunk of a fresh span whose others go on its
 * stack. Inside a bracket. */
int dp_ar_alloc_small_bracketed(struct dsmpool_area *a, ar_tc *tc, size_t size, size_t asked, unsigned flags,
                                bool held_only, dsmpool_ptr *out) {
    unsigned c = cls_of(size);
    ar_ctl *ctl = a->ctl;
    dsmpool_ptr h = 0;
    char *m = NULL;
    uint64_t got = AR_MAX_ENTRIES;
    /* a stack another taker holds for a moment looks empty: look again a
     * few times (a few microseconds) before taking a fresh span (held_only:
     * once, there is no fresh span to avoid) */
    for (int round = 0; round < (held_only ? 1 : 4) && got == AR_MAX_ENTRIES; round++) {
        for (int i = round ? 32 << round : 0; i > 0; i--) dp_cpu_relax();
        if (!dp_load_relaxed(&ctl->partial[c])) continue; /* relaxed: a hint */
        uint64_t start = dp_load_relaxed(&ctl->sh_hint[c]); /* relaxed: a hint */
        if (start >= AR_MAX_ENTRIES) start = 0;
        for (int pass = 0; pass < 2 && got == AR_MAX_ENTRIES; pass++) {
            uint64_t lo = pass ? 0 : start, hi = pass ? start : AR_MAX_ENTRIES;
            for (uint64_t e = ar_entry_next(ctl, lo); e < hi; e = ar_entry_next(ctl, e + 1)) {
                ar_span *sp = dp_ar_entry(a->pool, ctl, e);
                if (sp && span_take(a, c, e, sp, &h, &m)) {
                    got = e;
                    break;
                }
            }
        }
    }
    if (got == AR_MAX_ENTRIES) {
        if (held_only) return -ENOSPC;
        ar_want w = {.cls = c, .order = cls_span_order(c), .keep = cls_keep(c), .chain = true};
        int r = dp_ar_acquire(a, tc, &w, &got, &h);
        if (r) return r;
        if (!(m = ar_addr_n(a, h, 16))) return dp_fail(-ENOMEM, "cannot map the new span in this process");
    }
    if (got != dp_load_relaxed(&ctl->sh_hint[c])) dp_store_relaxed(&ctl->sh_hint[c], got); /* relaxed: a hint */
    int r = dp_ar_chunk_hand_out(a, tc, c, h, m, size, flags);
    if (r) return r;
    dp_fetch_add_relaxed(&ctl->sh_asked, asked); /* relaxed: counters (area_life.c [accounting]) */
    dp_fetch_add_relaxed(&ctl->sh_given, cls_size(c));
    *out = h;
    return 0;
}

/* [shared path]: after a shared-path operation, now and then, look for a cache
 * record that has come free. */
void dp_ar_shared_done(struct dsmpool_area *a, ar_tc *tc) {
    if (++tc->sh_ops % 4096 == 0) dp_ar_tc_take_record(a, tc, false);
}

/* [shared trim]: the kept span goes back when asked. Inside a
 * bracket. */
void dp_ar_shared_trim(struct dsmpool_area *a, ar_tc *tc) {
    uint64_t t = dp_load_relaxed(a->trimp); /* relaxed: area_cache.c [short of memory] */
    if (dp_unlikely(t != tc->trim_seen)) {
        tc->trim_seen = t;
        dp_ar_keep_release(a);
    }
}
