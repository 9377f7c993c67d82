/*
 * elastic.c -- the elastic pool's calls: give free memory back to the
 * system (dsmpool_trim), make it resident again ahead of need
 * (dsmpool_prefault_free), one bounded step of the policy that does both
 * (dsmpool_maintain), and the helper thread that calls it when asked
 * (dsmpool_maintainer_start/stop).
 *
 * Layer: top (pool/top). It composes the ledger's pool blocks (dp_pool_claim,
 * dp_pool_free, brackets: proc.c) and residency words (resident.c). Nothing
 * in the library calls it: the embedder does, or the thread it asked for;
 * pool.c stops that thread when the process leaves the pool. Its layer init
 * registers a fork handler (the child has no helper thread, and a fresh
 * maintain mutex).
 *
 * Rules
 *   [trim] A block is released in four steps, all inside one bracket of the
 *      trimmer's slot (proc.c [brackets]): claim it from the allocator by
 *      its address (dp_pool_claim: nobody holds any of it, and nobody can be
 *      handed it while the trimmer does), mark its granules released
 *      (resident.c [resident when held]), give its pages back
 *      (dp_res_release, and the allocator's pages of leaves that only its
 *      granules use: resident.c [tree give-back]), free it. Whoever is handed it afterwards makes it
 *      resident first (resident.c [refill on demand]). No allocation waits
 *      for a trim: one that looks where the block is finds it held and takes
 *      another, as for any held block. A trimmer holds one piece of at most
 *      EL_MAX_GRAN granules (32 MiB; one huge page if larger) at a time: what
 *      a trim keeps from allocations at any moment; and, in a sub-pool of
 *      EL_L1_MIN granules (1 GiB) and up, once a piece's pages of leaves
 *      went, for the moment of one give-back, the 64 granules (128 MiB, all
 *      released) that the piece's page of the allocator's level-1 words
 *      tells of, when every one says "no tree" (el_tree_l1, resident.c
 *      [tree give-back]).
 *   [largest first] The pieces of a sub-pool are its maximal aligned runs
 *      of wholly free granules (dp_pool_granule_free; for an idle release,
 *      stamped idle long enough or released already: a released one costs
 *      the piece nothing, and a page of the allocator's leaves is given
 *      back only with all the granules it tells of, resident.c [tree
 *      give-back]), cut at EL_MAX_GRAN
 *      and in release units (resident.c [release unit]); a trim takes those
 *      with resident granules, largest first and then by address, until the
 *      sub-pool's free resident bytes are down to its share of keep_bytes,
 *      halving a piece that holds more than is left to give. Partly used
 *      granules are never released. The scan for pieces reads a window of
 *      EL_MAX_GRAN granules' words before it asks the allocator about them
 *      (a window with none of interest is passed over) and stops once the
 *      whole-window pieces it found cover the budget: no piece found later
 *      could come before them, so the pieces taken are the ones a scan of
 *      everything would take -- unless a piece yields less than it held
 *      (a claim lost to an allocation, a granule being populated): then
 *      what the budget has left goes to the smaller pieces this scan found
 *      before another scan goes on from where it stopped. So a refill
 *      ahead or a maintenance step in a pool with whole free windows costs
 *      what it finds, not the reservation's size (a fragmented one is
 *      scanned whole, as before, and the policy's counts read every
 *      residency word of it).
 *   [refill ahead] A refill ahead takes a piece with released granules the
 *      same way: claim, populate the released granules (dp_res_populate:
 *      resident.c [room first]), mark them resident, free. A piece that
 *      cannot be had goes back as it was (released), and the call says
 *      -ENOMEM.
 *   [shares] keep_bytes, bytes, resident_min and warm_bytes are pool totals,
 *      split over the sub-pools by their sizes (in granules, rounded up, and
 *      no more than the pool has: SIZE_MAX is "all"), so each node keeps its
 *      part resident and warm.
 *   [policy] A maintenance step (at most one in the pool at a time: the
 *      DP_LOCK_MAINTAIN lock, which the kernel drops at death, and the
 *      process's maint_mutex) (1) stamps the wholly free resident granules
 *      it looks at, EL_SCAN from a cursor (resident.c [idle stamps]);
 *      (2) per sub-pool, releases pieces of granules stamped at least
 *      idle_release_ms ago (with the released ones beside them: [largest
 *      first]) -- checking the stamps again once it holds them -- while more than its share of warm_bytes is free and more than its
 *      shares of resident_min + warm_bytes is resident; (3) refills while
 *      less than its share of warm_bytes is free, in whole release units
 *      (a reserve short by a chunk in use gets one more unit, which (2)
 *      then never gives back: less than a unit over); (2) and (3) give back or
 *      make resident at most EL_STEP_BYTES each (a release unit where that
 *      is larger: 1 GiB pages). It says when to call again: 0 when a bound
 *      left work, else when the first stamp it saw that is
 *      not yet of age comes of age (one of age is released now or kept by
 *      the floor: a pool held at resident_min + warm_bytes is not polled),
 *      at most a period (idle_release_ms / 4, 10 ms to 1 s).
 *
 * Invariant (quiet): resident + released = the data, and for each sub-pool
 *   free = warm + released (a released granule is wholly free: resident.c R1).
 *
 * Crash bound: a trimmer killed between the claim and the free leaves its
 * piece allocated, owned by nothing, inside its bracket: the leak sweep
 * returns it (recover.c [leak sweep]) -- resident if it died before the
 * mark, released (and perhaps still resident: harmless, the next refill
 * populates what is there) after it; one killed holding the 64 granules
 * of a page of level 1 leaves those blocks (released) and its busy counts
 * on them to the sweep the same way; the page, if still there, stays
 * until a granule of it is used and given back again. A refiller killed
 * in its bracket leaves its piece to the sweep the same way, released and
 * perhaps populated, or resident; its bytes in flight go with its slot. No order
 * of the steps lets a caller hold released memory: the mark comes after the
 * claim and before the pages go, the resident mark after the populate.
 *
 * Memory ordering: none of its own; the claim's acquire and the free's
 * release (palloc.c) order the marks for the next holder (resident.c).
 *
 * Injection points: "elastic.trim.claimed" (a piece held, still resident),
 * "elastic.trim.marked" (marked released, pages still there),
 * "elastic.trim.released" (pages gone, piece still held),
 * "elastic.trim.l1held" (the 64 granules of a page of level 1 held and
 * counted busy, the page still there),
 * "elastic.refill.claimed", "elastic.refill.populated" (populated, still
 * marked released), "elastic.refill.marked" (resident, still held): a test
 * kills the trimmer or refiller at each and proves recovery leaves the
 * pool's free bytes exact and dsmpool_check() content (tests/test_elastic.c).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dp_top.h"
#include "dp_os.h"

#define GRAN (1ull << DP_RES_SHIFT)
#define EL_MAX_GRAN 16u                 /* [trim]: a piece is at most 32 MiB (or one huge page) */
#define EL_STEP_BYTES (256ull << 20)    /* [policy]: released, and refilled, per step at most */
#define EL_SCAN 65536u                  /* [policy]: granules stamped per step (128 GiB) */
#define EL_L1_MIN 512u                  /* [trim]: level-1 pages given back in sub-pools of 1 GiB and up */

enum { EL_TRIM, EL_IDLE, EL_REFILL };

typedef struct el_piece {
    uint64_t g, n; /* granules [g, g+n) of the sub-pool, n a power of two, aligned */
} el_piece;

typedef struct el_sub {
    uint32_t s;
    uint64_t g0, ng;            /* its first granule in the table, its granules */
    uint64_t free, released;    /* bytes */
} el_sub;

/* counts: the free bytes (a walk down the allocator's used nodes) and the
 * released ones (a read of the sub-pool's residency words: exact, where the
 * allocator's hint of them is not after a death or a scribble), which a
 * trim and the policy weigh; a refill ahead needs neither (left 0). */
static void el_sub_get(dsmpool *p, uint32_t s, bool counts, el_sub *e) {
    e->s = s;
    e->g0 = (p->geo.sub[s].data_off - p->geo.data_off) >> DP_RES_SHIFT;
    e->ng = p->geo.sub[s].geom.frames >> (DP_RES_SHIFT - DP_FRAME_SHIFT);
    uint64_t ff = 0;
    int largest;
    if (counts) dp_pool_free_frames(p, s, &ff, &largest);
    e->free = ff * DP_FRAME_SIZE;
    e->released = counts ? dp_res_released_in(p, s) * GRAN : 0;
}
static uint64_t el_warm(const el_sub *e) { return e->free > e->released ? e->free - e->released : 0; }
static uint64_t el_resident(const el_sub *e) { return e->ng * GRAN - e->released; }

/* [shares]: sub-pool s's part of a pool total, in bytes of whole granules. */
static uint64_t el_share(const dsmpool *p, uint32_t s, uint64_t total) {
    uint64_t all = p->geo.data_size >> DP_RES_SHIFT, mine = p->geo.sub[s].geom.frames >> (DP_RES_SHIFT - DP_FRAME_SHIFT);
    /* in granules, and no more than all of them: SIZE_MAX means "everything"
     * (tg * mine < 2^50 then: both count 2 MiB granules) */
    uint64_t tg = (total >> DP_RES_SHIFT) + ((total & (GRAN - 1)) != 0);
    if (tg > all) tg = all;
    return all ? (tg * mine + all - 1) / all * GRAN : 0;
}

/* Is granule k (of sub-pool e) of this kind's interest: released (a
 * refill), resident (a trim), resident and idle long enough? Its word only. */
static bool el_interest(dsmpool *p, const el_sub *e, uint64_t k, int kind, uint32_t now, uint32_t idle) {
    uint64_t w = dp_res_load(p, e->g0 + k);
    if (kind == EL_REFILL) return (w & DP_RES_RELEASED) != 0;
    if (w & DP_RES_RELEASED) return false;
    uint32_t st = DP_RES_STAMP(w);
    return kind == EL_TRIM || (st && (uint32_t)(now - st) >= idle);
}

/* Does granule k count for a piece of this kind: wholly free, and for an
 * idle release idle long enough or released already ([largest first]:
 * nothing to release there, but a page of leaves goes only with all its
 * granules)? */
static bool el_eligible(dsmpool *p, const el_sub *e, uint64_t k, int kind, uint32_t now, uint32_t idle) {
    return dp_pool_granule_free(p, e->s, k) &&
           (kind != EL_IDLE || (dp_res_load(p, e->g0 + k) & DP_RES_RELEASED) || el_interest(p, e, k, EL_IDLE, now, idle));
}

static uint64_t el_count(dsmpool *p, const el_sub *e, el_piece pc, bool released);

/* [largest first]: the pieces of sub-pool e of a kind from granule *from
 * on, largest first and then by address (malloc'd; *n of them). The scan
 * goes a window of `cap` granules (aligned: no piece crosses one) at a
 * time, passes over a window with no granule of the kind's interest
 * without asking the allocator, and stops after the window where the
 * whole-window pieces found hold `budget` bytes of interest: no later
 * piece could come before them. *from: where the next scan starts (e->ng
 * when this one reached the end). */
static el_piece *el_pieces(dsmpool *p, const el_sub *e, int kind, uint32_t now, uint32_t idle, uint64_t budget,
                           uint64_t *from, size_t *n) {
    uint64_t u = dp_res_unit(p), cap = u > EL_MAX_GRAN ? u : EL_MAX_GRAN, covered = 0, w0 = *from / cap * cap;
    size_t room = 16;
    *n = 0;
    el_piece *out = malloc(room * sizeof *out);
    if (!out) return NULL;
    for (; w0 < e->ng && covered < budget; w0 += cap) {
        uint64_t wend = w0 + cap < e->ng ? w0 + cap : e->ng;
        bool any = false;
        for (uint64_t k = w0; k < wend && !any; k++) any = el_interest(p, e, k, kind, now, idle);
        if (!any) continue;
        bool ok[EL_MAX_GRAN]; /* per unit of the window: cap / u <= EL_MAX_GRAN */
        for (uint64_t k = w0; k + u <= wend; k += u) {
            bool all = true;
            for (uint64_t j = 0; j < u && all; j++) all = el_eligible(p, e, k + j, kind, now, idle);
            ok[(k - w0) / u] = all;
        }
        for (uint64_t k = w0; k + u <= wend;) {
            if (!ok[(k - w0) / u]) {
                k += u;
                continue;
            }
            uint64_t len = u; /* the largest aligned run from k, up to cap */
            while (len * 2 <= cap && k % (len * 2) == 0 && k + len * 2 <= wend) {
                bool all = true;
                for (uint64_t j = k + len; j < k + len * 2 && all; j += u) all = ok[(j - w0) / u];
                if (!all) break;
                len *= 2;
            }
            bool wanted = kind == EL_IDLE;
            for (uint64_t j = k; j < k + len && !wanted; j++) wanted = el_interest(p, e, j, kind, now, idle);
            if (wanted) {
                if (*n == room) {
                    el_piece *more = realloc(out, 2 * room * sizeof *out);
                    if (!more) {
                        free(out);
                        return NULL;
                    }
                    out = more, room *= 2;
                }
                out[(*n)++] = (el_piece){k, len};
                if (len == cap) covered += el_count(p, e, (el_piece){k, len}, kind == EL_REFILL) * GRAN;
            }
            k += len;
        }
    }
    *from = w0 < e->ng ? w0 : e->ng;
    /* largest first, then by address: the pieces were found by address, and
     * their sizes are the powers of two from u to cap (a pass per size) */
    el_piece *sorted = malloc((*n ? *n : 1) * sizeof *sorted);
    if (!sorted) {
        free(out);
        return NULL;
    }
    size_t k = 0;
    for (uint64_t len = cap; len >= u && k < *n; len /= 2)
        for (size_t i = 0; i < *n; i++)
            if (out[i].n == len) sorted[k++] = out[i];
    free(out);
    return sorted;
}

/* The granules of piece pc of this kind's interest: resident (a release)
 * or released (a refill). */
static uint64_t el_count(dsmpool *p, const el_sub *e, el_piece pc, bool released) {
    uint64_t k = 0;
    for (uint64_t j = pc.g; j < pc.g + pc.n; j++)
        k += ((dp_res_load(p, e->g0 + j) & DP_RES_RELEASED) != 0) == released;
    return k;
}

static inline unsigned el_order(el_piece pc) { return DP_RES_SHIFT - DP_FRAME_SHIFT + (unsigned)__builtin_ctzll(pc.n); }

/* [trim]'s level-1 give-back: the page of the allocator's level-1 words
 * that tells of piece pc's first granule, once every granule it tells of
 * is released and says "no tree" (its leaves gone): those 64 granules
 * (128 MiB of released memory) claimed as aligned blocks, counted busy
 * and the page given back as a page of leaves is (resident.c [tree
 * give-back]), then freed. Inside the caller's bracket: a death leaves
 * the blocks and counts to the leak sweep, as a piece's. Only in
 * sub-pools of EL_L1_MIN granules and up. */
static void el_tree_l1(dsmpool *p, const el_sub *e, el_piece pc) {
    const dp_pa_geom *geo = &p->geo.sub[e->s].geom;
    uint64_t off, pg, pn, blk[16];
    if (e->ng < EL_L1_MIN || !dp_pa_tree_page_of(geo, 1, pc.g, 4096, &off, &pg, &pn) || pg + pn > e->ng) return;
    for (uint64_t j = pg; j < pg + pn; j++) { /* (a hint: the give-back looks again once they are held) */
        uint64_t w = dp_res_load(p, e->g0 + j);
        if (!(w & DP_RES_RELEASED) || !(w & DP_RES_NOTREE) || DP_RES_BUSY(w)) return;
    }
    size_t nb = 0;
    bool held = true;
    for (uint64_t i = pg; i < pg + pn && held;) { /* the largest aligned blocks, in order */
        unsigned k = i ? (unsigned)__builtin_ctzll(i) : 63;
        while ((1ull << k) > pg + pn - i) k--;
        held = nb < sizeof blk / sizeof *blk &&
               dp_pool_claim(p, e->s, i << (DP_RES_SHIFT - DP_FRAME_SHIFT), DP_RES_SHIFT - DP_FRAME_SHIFT + k,
                             &blk[nb]) == 0;
        nb += held;
        i += 1ull << k;
    }
    if (held && dp_res_busy_raise(p, e->g0 + pg, pn) == 0) {
        DP_INJECT("elastic.trim.l1held");
        (void)dp_res_tree_give_back(p, e->g0 + pg, pn, 1);
        dp_res_busy_lower(p, e->g0 + pg, pn, 1);
    }
    for (size_t i = 0; i < nb; i++) dp_pool_free(p, blk[i]);
}

/* [trim] one piece; idle: only if every granule is still stamped idle once
 * held ([policy]). *got: bytes newly released. */
static int el_release(dsmpool *p, const el_sub *e, el_piece pc, bool idle, uint32_t now, uint32_t age,
                      uint64_t *got) {
    uint64_t blk, g = e->g0 + pc.g, t0 = dp_os_now_ns(), u = dp_res_unit(p);
    *got = 0;
    dp_bracket_open(p);
    if (dp_pool_claim(p, e->s, pc.g << (DP_RES_SHIFT - DP_FRAME_SHIFT), el_order(pc), &blk) != 0) {
        dp_bracket_close(p); /* taken meanwhile: it is in use */
        return 0;
    }
    DP_INJECT("elastic.trim.claimed");
    bool go = true;
    for (uint64_t j = g; idle && go && j < g + pc.n; j++) {
        uint64_t w = dp_res_load(p, j);
        uint32_t st = DP_RES_STAMP(w);
        go = (w & DP_RES_RELEASED) || (st && (uint32_t)(now - st) >= age); /* used since: keep it */
    }
    /* [busy]: each unit marked released and counted ours, or left as it was
     * when a prefault populates one of its granules (a piece is at most 16
     * units) */
    uint32_t marked = 0;
    uint64_t newly = 0;
    for (uint64_t k = 0; go && k < pc.n / u; k++) {
        uint64_t nw;
        if (dp_res_trim_mark(p, g + k * u, u, &nw) == 0) {
            marked |= 1u << k;
            newly += nw;
        }
    }
    DP_INJECT("elastic.trim.marked");
    int r = 0;
    uint64_t leaves = 0; /* pages of leaves given back */
    /* every marked unit's pages go, those that were released already too
     * (resident.c [give back]: a failed refill's may still be there) */
    for (uint64_t k = 0; marked && k < pc.n / u;) {
        if (!(marked >> k & 1)) {
            k++;
            continue;
        }
        uint64_t h = k + 1;
        while (h < pc.n / u && (marked >> h & 1)) h++;
        int rr = dp_res_release(p, g + k * u, (h - k) * u);
        /* resident.c [tree give-back]: the allocator's leaves of what we
         * hold, while our counts keep openers away */
        if (rr == 0) leaves += dp_res_tree_give_back(p, g + k * u, (h - k) * u, 0);
        if (!r) r = rr;
        k = h;
    }
    DP_INJECT("elastic.trim.released");
    for (uint64_t k = 0; k < pc.n / u; k++) { /* our counts out; the pages gone, a stray bit with them */
        if (!(marked >> k & 1)) continue;
        if (r) dp_res_busy_lower(p, g + k * u, u, 1);
        else dp_res_given_back(p, g + k * u, u, 1);
    }
    dp_pool_free(p, blk);
    if (leaves) el_tree_l1(p, e, pc);
    dp_bracket_close(p);
    /* A release that failed keeps its marks: some of its pages may be gone,
     * and a granule marked released is only ever populated again, which is
     * safe over pages that are still there. It is not counted as given back. */
    if (newly && !r) { /* relaxed: counters */
        dp_fetch_add_relaxed(&p->hdr->releases, 1);
        dp_fetch_add_relaxed(&p->hdr->released_total, newly * GRAN);
        dp_fetch_add_relaxed(&p->hdr->release_ns, dp_os_now_ns() - t0);
    }
    *got = r ? 0 : newly * GRAN;
    return r ? dp_fail(r, "giving back %llu bytes of the pool failed: %s", (unsigned long long)(pc.n * GRAN),
                       strerror(-r))
             : 0;
}

/* [refill ahead] one piece. *got: bytes made resident. */
static int el_refill(dsmpool *p, const el_sub *e, el_piece pc, uint64_t *got) {
    uint64_t blk, g = e->g0 + pc.g, t0 = dp_os_now_ns(), u = dp_res_unit(p), done = 0;
    *got = 0;
    dp_bracket_open(p);
    if (dp_pool_claim(p, e->s, pc.g << (DP_RES_SHIFT - DP_FRAME_SHIFT), el_order(pc), &blk) != 0) {
        dp_bracket_close(p);
        return 0;
    }
    DP_INJECT("elastic.refill.claimed");
    int r = 0;
    uint64_t j = g;
    while (j < g + pc.n && r == 0) { /* the runs of released units */
        if (!(dp_res_load(p, j) & DP_RES_RELEASED)) {
            j += u;
            continue;
        }
        uint64_t h = j + u;
        while (h < g + pc.n && (dp_res_load(p, h) & DP_RES_RELEASED)) h += u;
        if ((r = dp_res_busy_raise(p, j, h - j)) != 0) break; /* resident.c [busy] (-EUCLEAN: no count held) */
        bool tried;
        if ((r = dp_res_populate(p, j, h - j, true, &tried)) != 0) {
            /* resident.c [give back]: we hold the piece whole; counted when
             * its populate began (refused before it, it got nothing) */
            if (dp_res_release_counted(p, j, h - j, tried) == 0) {
                dp_res_given_back(p, j, h - j, 1);
            } else {
                dp_res_busy_lower(p, j, h - j, 1);
            }
            break;
        }
        DP_INJECT("elastic.refill.populated");
        done += dp_res_mark_resident(p, j, h - j);
        j = h;
    }
    DP_INJECT("elastic.refill.marked");
    dp_pool_free(p, blk);
    dp_bracket_close(p);
    if (done) { /* relaxed: counters */
        dp_fetch_add_relaxed(&p->hdr->refills_ahead, 1);
        dp_fetch_add_relaxed(&p->hdr->refilled_ahead, done * GRAN);
        dp_fetch_add_relaxed(&p->hdr->refill_ahead_ns, dp_os_now_ns() - t0);
    }
    *got = done * GRAN;
    return r;
}

/* A piece against a budget of bytes of interest: whole, or halved until
 * its part fits ([largest first]). */
static int el_do(dsmpool *p, const el_sub *e, el_piece pc, int kind, uint32_t now, uint32_t age,
                 uint64_t *budget, uint64_t *total) {
    uint64_t u = dp_res_unit(p), want = el_count(p, e, pc, kind == EL_REFILL) * GRAN;
    if (!want || *budget < u * GRAN) return 0;
    if (want > *budget && pc.n > u) {
        int r = el_do(p, e, (el_piece){pc.g, pc.n / 2}, kind, now, age, budget, total);
        if (r == 0) r = el_do(p, e, (el_piece){pc.g + pc.n / 2, pc.n / 2}, kind, now, age, budget, total);
        return r;
    }
    if (want > *budget) return 0; /* less than a release unit is left to give */
    uint64_t got = 0;
    int r = kind == EL_REFILL ? el_refill(p, e, pc, &got) : el_release(p, e, pc, kind == EL_IDLE, now, age, &got);
    *budget = got < *budget ? *budget - got : 0;
    *total += got;
    return r;
}

/* Up to budget bytes of one kind in sub-pool e; *total adds what was done. */
static int el_run(dsmpool *p, const el_sub *e, int kind, uint32_t now, uint32_t age, uint64_t budget,
                  uint64_t *total) {
    int r = 0;
    /* a scan's pieces, then (a budget left: claims lost to others) the next scan's */
    for (uint64_t from = 0; r == 0 && from < e->ng && budget >= dp_res_unit(p) * GRAN;) {
        size_t n;
        el_piece *pcs = el_pieces(p, e, kind, now, age, budget, &from, &n);
        if (!pcs) return dp_fail(-ENOMEM, "out of memory for the pieces of sub-pool %u", e->s);
        for (size_t i = 0; i < n && r == 0 && budget >= dp_res_unit(p) * GRAN; i++)
            r = el_do(p, e, pcs[i], kind, now, age, &budget, total);
        free(pcs);
    }
    return r;
}

static int el_enter(dsmpool *pool) {
    dp_clear_error();
    if (!pool || pool->magic != DP_POOL_MAGIC) return dp_fail(-EINVAL, "not an attached pool");
    int r = dp_self(pool);
    if (r) return r;
    if (!dp_os_caps()->populate_write)
        return dp_fail(-EOPNOTSUPP, "this kernel has no MADV_POPULATE_WRITE (Linux 5.14): memory given back "
                       "could not be made resident again without risking a SIGBUS");
    return 0;
}

int dsmpool_trim(dsmpool *pool, size_t keep_bytes, size_t *released) {
    if (released) *released = 0;
    int r = el_enter(pool);
    /* A hugetlb pool that is not elastic was mapped with its pages reserved:
     * a hole punched in its file is reserved again by the next process that
     * maps it (an attach by name), which then fails when the kernel's pool
     * is short. A forked child inherits the mapping, so ANON is safe. */
    if (r == 0 && pool->geo.huge_pages && !pool->geo.elastic && pool->geo.backing != DSMPOOL_BACKING_ANON)
        r = dp_fail(-EOPNOTSUPP, "this pool has hugetlb pages reserved for its whole size (not elastic): "
                    "memory given back would be reserved again by the next process to attach; create it "
                    "elastic (resident_min, idle_release_ms or warm_bytes) to trim it");
    uint64_t total = 0;
    for (uint32_t s = 0; r == 0 && s < pool->nsub; s++) {
        el_sub e;
        el_sub_get(pool, s, true, &e);
        uint64_t keep = el_share(pool, s, keep_bytes), warm = el_warm(&e);
        if (warm > keep) r = el_run(pool, &e, EL_TRIM, 0, 0, warm - keep, &total);
    }
    if (released) *released = total;
    return r;
}

int dsmpool_prefault_free(dsmpool *pool, size_t bytes, size_t *prefaulted) {
    if (prefaulted) *prefaulted = 0;
    int r = el_enter(pool);
    uint64_t total = 0;
    for (uint32_t s = 0; r == 0 && s < pool->nsub; s++) {
        el_sub e;
        el_sub_get(pool, s, false, &e); /* (no counts: the scan finds what is released) */
        uint64_t want = el_share(pool, s, bytes);
        if (want > bytes) want = bytes; /* (one sub-pool: exactly what was asked, in granules) */
        r = el_run(pool, &e, EL_REFILL, 0, 0, want, &total);
    }
    if (prefaulted) *prefaulted = total;
    return r;
}

/* [prefault]: this process's page tables for the tables and every resident
 * granule (with its directory page), in runs of at most PF_RUN granules, each counted busy and inside
 * a bracket (a death leaves the counts to the leak sweep). What is not yet
 * there (a pool created without prefault) is held against the room first
 * (resident.c [room first]). */
#define PF_RUN 32u /* 64 MiB */

static int pf_run(dsmpool *pool, uint64_t g, uint64_t n, unsigned threads) {
    char *a = pool->base + pool->geo.data_off + (g << DP_RES_SHIFT);
    size_t len = n << DP_RES_SHIFT;
    uint64_t have = 0, need = 0;
    bool shmem = pool->geo.page_size == 4096;
    if (shmem && dp_os_present_bytes(a, len, &have) == 0) need = have < len ? len - have : 0;
    else if (shmem) need = len; /* (mincore refused: count it all) */
    int r = need ? dp_room_take(pool, need, "dsmpool_prefault") : 0;
    if (r == 0) {
        /* strict where the kernel has it: a page that cannot be had is an
         * error, never a signal (hugetlb: the cgroup's limit) */
        r = dp_os_caps()->populate_write ? dp_os_populate_strict(a, len) : dp_os_populate(a, len, threads);
        uint64_t doff, dlen; /* layout.c [lazy directory]: resident with its granules */
        if (r == 0 && pool->geo.elastic) {
            dp_dir_range(&pool->geo, g, n, pool->geo.page_size, &doff, &dlen);
            r = dp_os_populate_strict(pool->base + doff, dlen);
            if (r == 0) r = dp_res_tree_map(pool, g, n); /* resident.c [lazy tree]: there since their refill */
        }
        if (need) dp_room_give(pool, need);
        if (r) r = dp_fail(r == -EFAULT || r == -ENOSPC ? -ENOMEM : r, "dsmpool_prefault: %zu bytes could not be "
                           "made resident (%s): %s", len, strerror(-r),
                           pool->geo.huge_pages ? "no huge page can be had (free_hugepages, the hugetlb cgroup)"
                                                : "the memory cannot be had (a full tmpfs?)");
    }
    return r;
}

int dsmpool_prefault(dsmpool *pool) {
    dp_clear_error();
    if (!pool || pool->magic != DP_POOL_MAGIC) return dp_fail(-EINVAL, "not an attached pool");
    int r = dp_self(pool);
    if (r) return r;
    const dp_header *g = &pool->geo;
    unsigned t = dp_os_caps()->ncpus_online;
    if (t > 16) t = 16;
    /* the tables: resident since creation (an elastic pool's directory:
     * with each run of granules below) */
    uint64_t tr[DP_TABLE_RANGES][2];
    unsigned nt = dp_table_ranges(g, g->elastic, g->page_size, NULL, tr);
    for (unsigned i = 0; r == 0 && i < nt; i++) r = dp_os_populate(pool->base + tr[i][0], tr[i][1] - tr[i][0], 1);
    if (r) return dp_fail(r, "populating the pool's tables failed: %s", strerror(-r));
    for (uint64_t k = 0; r == 0 && k < g->res_count;) {
        dp_bracket_open(pool);
        uint64_t e = k;
        /* resident.c [busy]: counted on resident granules only; a released
         * one ends the run and is skipped (dsmpool_prefault_free is the
         * call that makes released memory resident) */
        while (e < g->res_count && e - k < PF_RUN && dp_res_busy_raise_resident(pool, e)) e++;
        if (e > k) {
            r = pf_run(pool, k, e - k, t);
            dp_res_busy_lower(pool, k, e - k, 1);
        }
        dp_bracket_close(pool);
        k = e > k ? e : k + 1;
    }
    return r;
}

/* ---- [policy] -------------------------------------------------------------- */

static unsigned el_period(const dsmpool *p) {
    unsigned idle = p->geo.idle_release_ms, t = idle ? idle / 4 : 1000;
    return t < 10 ? 10 : t > 1000 ? 1000 : t;
}

/* (1): stamp what is free; the soonest a stamp comes of age (ms from now), or
 * UINT32_MAX. */
static uint32_t el_stamp(dsmpool *p, uint32_t now) {
    uint64_t n = p->geo.res_count, scan = n < EL_SCAN ? n : EL_SCAN;
    uint64_t cur = dp_load_relaxed(&p->hdr->maint_cursor) % (n ? n : 1); /* relaxed: where to start */
    uint32_t idle = p->geo.idle_release_ms, soonest = UINT32_MAX;
    uint32_t s = 0;
    for (uint64_t i = 0; i < scan; i++) {
        uint64_t g = (cur + i) % n;
        while (s + 1 < p->nsub && p->geo.data_off + (g << DP_RES_SHIFT) >= p->geo.sub[s + 1].data_off) s++;
        while (s > 0 && p->geo.data_off + (g << DP_RES_SHIFT) < p->geo.sub[s].data_off) s--;
        uint64_t w = dp_res_load(p, g);
        if (w & DP_RES_RELEASED) continue;
        uint32_t st = DP_RES_STAMP(w);
        uint64_t k = g - ((p->geo.sub[s].data_off - p->geo.data_off) >> DP_RES_SHIFT);
        if (!st) {
            if (!dp_pool_granule_free(p, s, k) || !dp_res_stamp(p, g, now)) continue;
            st = now;
            w = DP_RES_WORD(0, now); /* what dp_res_stamp wrote */
        }
        /* [idle stamps]: an allocation that took some of it between the
         * look and the stamp read the word before the stamp was there (its
         * one load in dp_res_ensure) and left it; so every step looks again,
         * and a stamp on a granule that is not wholly free now goes. What is
         * left is a granule taken and given back between two steps. */
        if (!dp_pool_granule_free(p, s, k)) {
            dp_cas_relaxed(&p->res[g], &w, w & ~(0xffffffffull << 32)); /* relaxed CAS: a hint, as the stamp (a count stays) */
            continue;
        }
        /* of age already: this step releases it, or the floor (resident_min
         * + warm_bytes) keeps it -- neither is a reason to be called sooner */
        uint32_t age = now - st;
        if (age < idle && idle - age < soonest) soonest = idle - age;
    }
    dp_store_relaxed(&p->hdr->maint_cursor, (cur + scan) % (n ? n : 1)); /* relaxed: a hint */
    return soonest;
}

int dsmpool_maintain(dsmpool *pool, unsigned *next_ms) {
    if (next_ms) *next_ms = 1000;
    int r = el_enter(pool);
    if (r) return r;
    const dp_header *g = &pool->geo;
    if (!g->elastic || (!g->idle_release_ms && !g->warm_bytes)) return 0; /* no policy */
    unsigned period = el_period(pool);
    if (next_ms) *next_ms = period;
    if (pthread_mutex_trylock(&pool->maint_mutex) != 0) return 0; /* another thread's step runs */
    if (dp_live_take(pool, DP_LOCK_MAINTAIN) != 0) { /* another process's */
        pthread_mutex_unlock(&pool->maint_mutex);
        return 0;
    }
    /* what a give-back left stray, or a death left busy, goes back by the
     * leak sweep (recover.c [leak sweep]): settled here too when due */
    if (dp_load_acquire(&pool->hdr->sweep_needed)) dp_recover_all(pool); /* acquire: pairs with dp_pool_giveback's release */
    uint32_t now = dp_res_now_ms(pool), soonest = UINT32_MAX;
    bool more = false;
    if (g->idle_release_ms) soonest = el_stamp(pool, now); /* (1) */
    /* (at least a release unit: in 1 GiB pages a step of 256 MiB did nothing) */
    uint64_t step = EL_STEP_BYTES > dp_res_unit(pool) * GRAN ? EL_STEP_BYTES : dp_res_unit(pool) * GRAN;
    uint64_t rel_left = step, fill_left = step;
    for (uint32_t s = 0; r == 0 && s < pool->nsub; s++) {
        el_sub e;
        el_sub_get(pool, s, true, &e);
        uint64_t warm_s = el_share(pool, s, g->warm_bytes), min_s = el_share(pool, s, g->resident_min);
        uint64_t warm = el_warm(&e), res = el_resident(&e), done = 0;
        if (g->idle_release_ms && warm > warm_s && res > min_s + warm_s) { /* (2) */
            uint64_t can = warm - warm_s < res - (min_s + warm_s) ? warm - warm_s : res - (min_s + warm_s);
            uint64_t b = can < rel_left ? can : rel_left;
            r = el_run(pool, &e, EL_IDLE, now, g->idle_release_ms, b, &done);
            rel_left -= done < rel_left ? done : rel_left;
            if (can > b && !rel_left) more = true; /* the bound left work */
            if (done) el_sub_get(pool, s, true, &e);
        }
        warm = el_warm(&e);
        if (r == 0 && warm < warm_s && e.released) { /* (3) */
            /* in whole release units: a reserve a few KiB short (a chunk of
             * a granule in use) is refilled by one more unit */
            uint64_t unit = dp_res_unit(pool) * GRAN, need = (warm_s - warm + unit - 1) / unit * unit;
            uint64_t b = need < fill_left ? need : fill_left;
            done = 0;
            r = el_run(pool, &e, EL_REFILL, now, 0, b, &done);
            fill_left -= done < fill_left ? done : fill_left;
            if (r == 0 && need > b && !fill_left) more = true;
            if (r == -ENOMEM) r = 0; /* the memory cannot be had now: try again next period */
        }
    }
    dp_live_give(pool, DP_LOCK_MAINTAIN);
    pthread_mutex_unlock(&pool->maint_mutex);
    dp_fetch_add_relaxed(&pool->hdr->maint_steps, 1); /* relaxed: a counter */
    if (next_ms) *next_ms = more ? 0 : soonest < period ? soonest : period;
    return r;
}

/* ---- the helper thread ------------------------------------------------------ */

typedef struct el_thread {
    dsmpool *pool;
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    unsigned max_ms;
    pid_t pid; /* the process that runs it (a fork()ed child has none) */
} el_thread;

static void *el_main(void *arg) {
    el_thread *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        pthread_mutex_unlock(&t->mu);
        unsigned next = t->max_ms;
        dsmpool_maintain(t->pool, &next);
        if (next > t->max_ms) next = t->max_ms;
        pthread_mutex_lock(&t->mu);
        if (t->stop || !next) continue;
        uint64_t at = dp_os_now_ns() + (uint64_t)next * 1000000ull; /* CLOCK_MONOTONIC, as the condvar's */
        struct timespec ts = {(time_t)(at / 1000000000ull), (long)(at % 1000000000ull)};
        while (!t->stop && pthread_cond_timedwait(&t->cv, &t->mu, &ts) == 0)
            ;
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int dsmpool_maintainer_start(dsmpool *pool, unsigned max_period_ms) {
    int r = el_enter(pool); /* -EOPNOTSUPP here, not from every step of a thread nobody hears */
    if (r) return r;
    pthread_mutex_lock(&pool->lock);
    el_thread *t = pool->elastic;
    if (t && t->pid == dp_os_getpid()) {
        pthread_mutex_unlock(&pool->lock);
        return dp_fail(-EALREADY, "this process runs a maintainer thread for the pool already");
    }
    if (!(t = calloc(1, sizeof *t))) {
        pthread_mutex_unlock(&pool->lock);
        return dp_fail(-ENOMEM, "out of memory");
    }
    t->pool = pool;
    t->max_ms = max_period_ms ? max_period_ms : 1000;
    t->pid = dp_os_getpid();
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&t->mu, NULL);
    if ((r = pthread_create(&t->tid, NULL, el_main, t)) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        free(t);
        pthread_mutex_unlock(&pool->lock);
        return dp_fail(-r, "cannot start the maintainer thread: %s", strerror(r));
    }
    pool->elastic = t;
    pthread_mutex_unlock(&pool->lock);
    return 0;
}

/* Stop this process's helper thread, if it has one (dsmpool_detach too). */
void dp_elastic_stop(dsmpool *pool) {
    pthread_mutex_lock(&pool->lock);
    el_thread *t = pool->elastic;
    pool->elastic = NULL;
    pthread_mutex_unlock(&pool->lock);
    if (!t || t->pid != dp_os_getpid()) return; /* none, or a fork()ed child's copy of its parent's */
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->tid, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

int dsmpool_maintainer_stop(dsmpool *pool) {
    dp_clear_error();
    if (!pool || pool->magic != DP_POOL_MAGIC) return dp_fail(-EINVAL, "not an attached pool");
    dp_elastic_stop(pool);
    return 0;
}

/* A fork()ed child has no helper thread, and its maint_mutex may have been
 * held by a thread of the parent. */
static void el_child_pool(dsmpool *p) {
    pthread_mutex_init(&p->maint_mutex, NULL);
    p->elastic = NULL;
}
static void el_fork_child(void) { dp_ledger_each_pool(el_child_pool); }
static const dp_fork_ops el_fork = {DP_RANK_NONE, NULL, NULL, el_fork_child, el_fork_child};

void dp_elastic_layer_init(void) { dp_ledger_on_fork(&el_fork); }
