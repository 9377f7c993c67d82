/*
 * pa_walk.c -- the page allocator's walk of one sub-pool's tree: its
 * statistics (free and used frames, the largest free block, the steps in
 * progress by live and by dead owners, and optionally a map of the used
 * frames) and the consistency proof dsmpool_check runs on it.
 *
 * Layer: alloc (pool/alloc), beside palloc.c, whose words it reads
 * (pa_word.h) and whose invariants it checks (palloc.c, "Invariants"): I1
 * both ways (an OPEN word has a parent that says PART, and a PART child
 * is OPEN or in a step), I2 (no OPEN word under a FREE or FULL state), I3
 * (free + used = frames) and I4 (ABSENT exactly for the children past the
 * end). The first broken one is named in out->why. dp_pa_walk_count is
 * the walk down the used nodes alone (the counts, without I1's other way,
 * which reads every word): what the elastic pool's upkeep and the stats
 * read, at a cost that follows use rather than the tree's size.
 *
 * Memory ordering: relaxed loads only: a snapshot, exact only while
 * nothing moves (the checker's quiet window: proc.c [quiet windows]).
 */
#include "dp_palloc.h"
#include "pa_word.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* ---- walk: statistics and the consistency proof ---------------------- */

typedef struct walk_ctx {
    dp_pa *pa;
    dp_pa_walk *out;
    uint64_t *map;
    bool (*is_live)(uint32_t, void *);
    void *arg;
} walk_ctx;

static void walk_bad(walk_ctx *wc, const char *what, unsigned L, uint64_t idx) {
    if (!wc->out->bad++)
        snprintf(wc->out->why, sizeof wc->out->why, "%s (level %u node %llu)", what, L,
                 (unsigned long long)idx);
}

static void walk_mark(walk_ctx *wc, uint64_t first, uint64_t n) {
    if (!wc->map) return;
    for (uint64_t f = first; f < first + n; f++) wc->map[f / 64] |= 1ull << (f % 64);
}

static void walk_owned_step(walk_ctx *wc, uint64_t w) {
    if (wc->is_live && wc->is_live(w_owner(w), wc->arg))
        wc->out->busy++;
    else
        wc->out->orphaned++;
}

static void walk_largest(walk_ctx *wc, int order) {
    if (order > wc->out->largest_free_order) wc->out->largest_free_order = order;
}

/* Returns true when every frame under (L, idx) is free. */
static bool walk_node(walk_ctx *wc, unsigned L, uint64_t idx) {
    dp_pa *pa = wc->pa;
    uint64_t w = dp_load_relaxed(pa_node(pa, L, idx));
    uint32_t c = (uint32_t)w;
    uint64_t first = idx << node_shift(L);
    if (L == 0) {
        unsigned used = (unsigned)__builtin_popcount(c);
        wc->out->used_frames += used;
        wc->out->free_frames += 32 - used;
        for (int rs = 4; rs >= 0; rs--)
            if (leaf_find(c, (unsigned)rs) >= 0) {
                walk_largest(wc, rs);
                break;
            }
        if (wc->map)
            for (unsigned b = 0; b < 32; b++)
                if (c & (1u << b)) walk_mark(wc, first + b, 1);
        return c == 0;
    }
    uint32_t effree = 0;
    unsigned cs = node_shift(L - 1);
    for (unsigned i = 0; i < 16; i++) {
        uint64_t ci = idx * 16 + i, lo = ci << cs, n = 1ull << cs;
        unsigned st = ch_state(c, i);
        bool present = lo < pa->frames && ci < pa->count[L - 1];
        if (st == CH_ABSENT) {
            if (present) walk_bad(wc, "present child marked absent", L, idx);
            continue;
        }
        if (!present) {
            walk_bad(wc, "child beyond the end not marked absent", L, idx);
            continue;
        }
        uint64_t cw = pa_peek(pa, L - 1, ci); /* palloc.c [lazy tree] */
        unsigned cph = w_phase(cw);
        if (cph != PH_IDLE && cph != PH_OPEN && cph != PH_OPENING && cph != PH_CLOSING) {
            walk_bad(wc, "a phase that is no phase (two of its bits set)", L - 1, ci);
            continue;
        }
        if (st == CH_FREE || st == CH_FULL) {
            if (cph == PH_OPEN) walk_bad(wc, "open node under a free or full parent", L - 1, ci);
            else if (cph != PH_IDLE) walk_owned_step(wc, cw);
            if (st == CH_FREE) {
                wc->out->free_frames += n;
                effree |= 1u << (2 * i);
            } else {
                wc->out->used_frames += n;
                walk_mark(wc, lo, n);
            }
            continue;
        }
        /* PART */
        if (cph == PH_OPEN) {
            if (walk_node(wc, L - 1, ci)) effree |= 1u << (2 * i);
        } else if (cph == PH_IDLE) {
            walk_bad(wc, "idle node under a part-used parent", L - 1, ci);
        } else if (cph == PH_OPENING && (uint32_t)cw != 0) { /* mid split: all held ([exact blocks]) */
            walk_owned_step(wc, cw);
            wc->out->used_frames += n;
            walk_mark(wc, lo, n);
        } else { /* mid open/close: holds nothing (palloc.c [recovery]) */
            walk_owned_step(wc, cw);
            wc->out->free_frames += n;
        }
    }
    for (int rs = (L == pa->nlevels - 1) ? 4 : 3; rs >= 0; rs--)
        if (run_find(effree, (unsigned)rs) >= 0) {
            walk_largest(wc, (int)child_shift(L) + rs);
            break;
        }
    return effree == LO2;
}

/* From the root down through the PART nodes: the counts, and I1 one way,
 * I2 and I4 on the words it reaches. */
static void walk_down(walk_ctx *wc) {
    dp_pa *pa = wc->pa;
    dp_pa_walk *out = wc->out;
    memset(out, 0, sizeof *out);
    out->largest_free_order = -1;
    unsigned root = pa->nlevels - 1;
    if (w_phase(dp_load_relaxed(pa_node(pa, root, 0))) != PH_OPEN)
        walk_bad(wc, "root not open", root, 0);
    else if (walk_node(wc, root, 0))
        walk_largest(wc, (int)node_shift(root));
    if (out->largest_free_order > (int)dp_pa_max_order(pa))
        out->largest_free_order = (int)dp_pa_max_order(pa);
}

void dp_pa_walk_count(dp_pa *pa, dp_pa_walk *out) {
    walk_ctx wc = {pa, out, NULL, NULL, NULL};
    walk_down(&wc);
}

void dp_pa_walk_tree(dp_pa *pa, dp_pa_walk *out, uint64_t *used_map,
                     bool (*is_live)(uint32_t owner, void *arg), void *arg) {
    walk_ctx wc = {pa, out, used_map, is_live, arg};
    walk_down(&wc);
    unsigned root = pa->nlevels - 1;
    /* I1 the other way: an open word must hang under a PART state (every
     * word read: what makes this walk the size of the tree) */
    for (unsigned L = 0; L < root; L++)
        for (uint64_t idx = 0; idx < pa->count[L]; idx++) {
            /* palloc.c [lazy tree]: a 2 MiB node's words never made
             * resident are IDLE, and not read */
            if (L == 0 && !(idx & 15) && pa_untouched(pa, idx >> 4)) {
                idx += 15;
                continue;
            }
            uint64_t w = pa_peek(pa, L, idx), pw = pa_peek(pa, L + 1, idx >> 4);
            if (w_phase(w) == PH_OPEN &&
                (w_phase(pw) != PH_OPEN || ch_state(pw, (unsigned)(idx & 15)) != CH_PART))
                walk_bad(&wc, "open node not reachable from the root", L, idx);
        }
    if (out->free_frames + out->used_frames != pa->frames && !out->bad)
        walk_bad(&wc, "free + used != total", root, 0);
}
