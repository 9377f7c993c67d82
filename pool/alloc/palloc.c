/*
 * palloc.c -- the lock-free page allocator of one sub-pool.
 *
 * What it does
 *   Hands out naturally aligned power-of-two blocks of 4 KiB frames, from one
 *   frame up to the whole sub-pool, to threads of any number of processes,
 *   with no lock and no system call. Every state change is one CAS on one
 *   64-bit word, so a process killed at any instruction leaves every word
 *   consistent; the only damage is a node left half-opened or half-closed,
 *   which names its owner so that recovery can finish the step.
 *
 * Geometry (a tree of 64-bit words, stored level by level as offsets)
 *   level 0  leaf: 32 frames (128 KiB), one bit each, 1 = allocated.
 *   level L  inner: 16 children of level L-1, 2 bits each:
 *            FREE (whole child free), PART (child's own word is authoritative),
 *            FULL (whole child allocated, as part of one block), ABSENT
 *            (beyond the end of the sub-pool).
 *   Level 1 covers 2 MiB (a huge page), level 2 32 MiB, level 3 512 MiB, ...
 *   The root is the single word of the top level.
 *   Word: bits 0-31 content, 32-34 phase (IDLE 0, or one bit of OPEN,
 *   OPENING, CLOSING: pa_word.h), 35-54 owner (process slot + 1, set in
 *   OPENING/CLOSING only), 55 RESV
 *   (advisory: a CPU's current node).
 *
 * The rules
 *   [one level] A block of order k lives at exactly one level: orders 0-4 are runs of
 *      1..16 bits in a leaf; orders 5+4(L-1) .. +3 are runs of 1,2,4,8 FULL
 *      children of a level-L node; the root also takes a run of 16.
 *   [alloc and free] Allocate: find an OPEN node at that level with an aligned run of free
 *      bits/children and set them with one CAS. Free: check they are set,
 *      clear them with one CAS. Nothing else changes: a node that becomes
 *      empty stays open (lazy coalescing) so that alloc/free churn in one
 *      node costs one CAS each.
 *   [open] Open a FREE child c of node P (to allocate below it):
 *        CAS c IDLE -> OPENING(me); CAS P's state for c FREE -> PART;
 *        store c := OPEN, content 0.  (If P's state is no longer FREE, store
 *        c := IDLE and give up.)
 *   [close] Close an OPEN, empty child c of P (when a larger block is needed:
 *      dp_pa_reclaim, or an allocation that found no run):
 *        CAS c OPEN/empty -> CLOSING(me); CAS P's state for c PART -> FREE;
 *        store c := IDLE.
 *   [reservation] Per-CPU and advisory (after LLFree): each CPU keeps, per
 *      level, the node it allocates from, and at level 0 a leaf per order
 *      0..4 (a hint line in shared memory, and the RESV bit on the node,
 *      which other CPUs' searches pass over first). An allocation tries
 *      its node with one CAS; with no run there, the search walks up from
 *      it (nearby first), partly used nodes before free ones (from the one
 *      after the near child, round to it), nodes without RESV first; in
 *      that first pass a leaf serves orders 0..3 only if it keeps another
 *      run. The allocating CAS sets the found node's RESV bit; the old
 *      node's is cleared unless another order of the CPU still uses it. A
 *      stale or missing RESV bit only changes where searches look first.
 *      A free of an exact block (proc.c [exact blocks]) makes its leaf the
 *      CPU's reservation for the order when that has no run left
 *      (dp_pa_hint_freed).
 *   [take-back] Before its reservation, an allocation of order 0..4 tries
 *      the runs of its size that its thread freed as whole blocks into
 *      leaves without RESV (the newest DP_PA_BACK, thread-private, newest
 *      first, each once, only where [second chance] may take): one CAS on
 *      exactly that run; the reservation stays. Nothing is held: the runs
 *      stay free in the tree, anyone may take them, the CAS validates.
 *   [second chance] Before the search, the leaf this thread last freed a run
 *      of the order into (thread-private) is tried if it lies in the 2 MiB
 *      node of the CPU's reservation of the order, is none of the CPU's
 *      leaf reservations and has no RESV bit; if it has the run it becomes
 *      the reservation. A CPU without a reservation of the order skips it.
 *   [resident first] While a sub-pool has a cold 2 MiB node (DP_PA_COLD in
 *      the hint word per node that dp_pa_set_cold installs: its memory was
 *      given back; one relaxed load of the sub-pool's count), blocks of
 *      every size take warm memory while any fits. The warm passes take no
 *      cold 2 MiB node, open or not, no 32 MiB node without a warm one and
 *      no run of 2 MiB and up with cold memory in it; blocks below 32 MiB
 *      open no free node of 512 MiB or more, blocks of 32 MiB and up search
 *      and open only nodes with a warm run of their size (pa_no_warm_run),
 *      free ones of any level included. Blocks of 128 KiB
 *      and up make three warm passes, the last after closing empty nodes,
 *      then one that takes cold memory; leaves take it in their last pass.
 *      Within a pass fresh nodes are opened warm first and runs of 2 MiB
 *      and up taken warm first (pa_first_warm). A hint only: a cold block
 *      is a correct block, which its holder makes resident. Below 128 KiB
 *      the reservation's first CAS does not look; with no cold node nothing
 *      is read.
 *   [lazy tree] A word never written is 0: IDLE, holding nothing, the state
 *      of every node under a FREE parent (I2). So an elastic pool's creator
 *      leaves the pages of the two lowest levels untouched
 *      (dp_pa_format_fresh; a page of leaves tells of 8 MiB, one of level 1
 *      of 128 MiB) and sets DP_PA_NOTREE in the hint word of each cold
 *      2 MiB node whose pages (of its level-1 word, its 16 leaves) it left
 *      out. Those words are not read (pa_peek: IDLE without a load, for
 *      searches, trims, claims, walks and recovery; a caller that guesses
 *      how a block is held, the leak sweep, asks the bit first),
 *      and before the first is written (pa_open, pa_split) the owner's hook
 *      (dp_pa_set_tables) makes their pages resident under its room rules
 *      and clears the bit. When it cannot, the step is not taken: the
 *      search stops and the allocation, the claim or the trim ends as for
 *      a full sub-pool (-ENOMEM; a trim keeps its tail). The bit is set
 *      only with DP_PA_COLD, so only the passes that take cold memory, a
 *      claim and a trim meet it.
 *   [tree give-back] The owner of the words sets the bit again, and gives
 *      a page of leaves (or of level-1 words, once every node it tells of
 *      has the bit) back, only while it holds every 2 MiB node the page
 *      tells of (a trim: resident.c [tree give-back]): then no node there
 *      is open, and none can be linked. What it must still meet is a
 *      stale opener: one that chose the node while its parent said FREE,
 *      and writes its words later. So every open and split of a word of
 *      the two lowest levels counts itself in on its 2 MiB node first (the
 *      hook's DP_PA_TABLES_ENTER: a busy count on the owner's word for the
 *      node, where the bit is) and out when done (pa_enter, pa_leave); an
 *      open looks at its parent only once it is in, and writes nothing if
 *      the node is no longer FREE there (held whole: the open would fail
 *      anyway), nor makes its pages resident (DP_PA_TABLES_FILL, only
 *      then). The owner gives a page back only while its own count is
 *      alone on every node of it: an opener in before it is seen; one in
 *      after it (the same word: its count comes after the owner's mark)
 *      sees the node held. A split's caller holds the node's frames, so no
 *      trim holds it. tests/model/tree.m checks the steps. An open that
 *      finds the node held returns 2, and the search does not descend
 *      there. Before the page goes, every CPU's hint naming a leaf on it
 *      (or, for a page of level 1, a 2 MiB node on it) is forgotten
 *      (dp_pa_hints_forget, after a fence), and a free that makes its leaf
 *      a hint looks at the bit after (dp_pa_hint_freed, after a fence) and
 *      forgets it if set; a 2 MiB node becomes a hint only by an
 *      allocation in it, which holds it from the trim (and pa_adopt's
 *      RESV clear does not read the old one's word under the bit). A
 *      stale reader -- a thread that read such a hint, or a parent's
 *      PART, just before -- may still read a word there (or CAS one,
 *      which fails): that brings a zeroed page back (IDLE, the truth),
 *      outside any room claim, at most one page per such thread. A scribbled hint may do the same: damage,
 *      like a scribbled word. Costs an open or a close of the two lowest
 *      levels in an elastic pool two CASes on the owner's word; nothing
 *      elsewhere.
 *   [claim] Any aligned free block can be taken by its address
 *      (dp_pa_claim: a grow's piece, [exact blocks]): one CAS on its bits
 *      or FULL children when its node is open, after closing the empty
 *      children left open by [alloc and free]'s lazy coalescing; else the
 *      FREE children on the way down are opened first ([open]). Every CAS
 *      validates that the run is free, so a claim racing an allocation of
 *      any of it fails (-ENOMEM) and takes nothing.
 *   [recovery] a word in OPENING/CLOSING whose owner is dead: if P's state
 *      for it is PART it becomes FREE; the word becomes IDLE (such a node
 *      holds nothing: an opener allocates in c only after it is OPEN, a
 *      closer closes only an empty c). A split ([exact blocks]) is the one
 *      OPENING word with content: it is finished (P says PART: store OPEN
 *      with that content) or undone (P still says FULL: IDLE). "Dead" is
 *      the caller's word (dp_pa_recover's is_dead), true only while the
 *      caller holds the owner's liveness lock, which keeps the owner's id
 *      from being reused and other recoverers away until the step is
 *      finished (proc.c [pool blocks], live.c [dead iff free]); finishing a live owner's step would build an OPEN
 *      node under a FREE parent (tests/model/palloc.m).
 *   [exact blocks] the holder of a block gives back its tail (dp_pa_trim)
 *      as aligned pieces, from the end: a piece at or above the level the
 *      block lives at is FULL children or bits of the same node (one free
 *      CAS); a piece inside a FULL child needs that child split first:
 *        CAS c IDLE -> OPENING(me) with content all-used; CAS P's state for
 *        c FULL -> PART; store c := OPEN, content all-used.
 *      (If P's state is not FULL, store c := IDLE and give up.) The frames
 *      do not change hands: before, P's FULL says they are held; after, c's
 *      bits (or FULL children) say so. The holder then frees the pieces it
 *      keeps at their own levels (dp_pa_free_run); one described coarser
 *      is split first, one described finer (a trim that stopped half-way)
 *      is freed as halves. A split finding c in another owner's step (an
 *      opener that read a stale FREE, about to give up) waits briefly and
 *      then stops the trim: the block keeps the rest of its tail.
 *   docs/design.md, "Page allocator", says why each rule is as it is, with
 *   the measurements behind it.
 *
 * Invariants (at quiescence; in flight, a node in [open], [close] or [exact blocks] is owned)
 *   I1  root is OPEN; a non-root word is OPEN  <=>  its parent says PART.
 *   I2  words under a FREE or FULL parent state are IDLE (content ignored).
 *   I3  free frames + used frames = frames, where a leaf counts its bits and
 *       an inner node counts its FREE and FULL children at their size and
 *       recurses into PART children; the tree partitions the frames, so no
 *       two blocks overlap.
 *   I4  a node with ABSENT children is OPEN forever (it never closes,
 *       because its content is never 0).
 *   I5  a level-0 or level-1 word whose 2 MiB node says DP_PA_NOTREE was
 *       never written: 0, IDLE ([lazy tree]).
 *
 * Why one word per step is enough (no ABA tags)
 *   Every CAS validates, on the current value of the word, everything the
 *   step depends on: run bits free, children FREE/FULL/PART, phase OPEN or
 *   IDLE. A word that went through other states and came back to the same
 *   value is in a state where the step is as valid as it was. Only [open],
 *   [close] and [exact blocks] span two words; between them the child is owned (OPENING/CLOSING
 *   names the owner), which no other step accepts, so nobody interferes and a
 *   dead owner's step is finished by [recovery].
 *
 * Memory ordering
 *   - alloc CAS is acquire: pairs with pa_free's release CAS (or pa_close's,
 *     via the parent word) that last returned these frames, so the previous
 *     owner's writes happen before the new owner's.
 *   - free CAS is release: pairs with dp_pa_alloc's acquire CAS.
 *   - open/close/split CASes are acq_rel; the final store of [open], [close] or [exact blocks] is
 *     release and pairs with the acquire CAS of the next thread that uses
 *     the word (pa_try_node, pa_open, pa_close).
 *   - hint loads/stores are relaxed: a hint is only where to look first; the
 *     CAS that follows validates. The take-back's runs and the second
 *     chance's record are thread-private (plain accesses) and process-local,
 *     validated as a hint is; the take-back's CAS is an alloc CAS
 *     (acquire). RESV rides on the alloc CAS ([reservation]) or is cleared by a
 *     relaxed CAS: it orders nothing, it only steers searches.
 *   - pa_untouched's load of DP_PA_NOTREE is acquire: pairs with the
 *     release CAS that cleared it after the populate (res_tables,
 *     dp_res_mark_resident), so the words read after it are on pages that
 *     are there ([lazy tree]).
 *   - [tree give-back]: the opener's count and the owner's mark and bit
 *     are RMWs of one word (the hook's acq_rel CASes), so one of them reads
 *     the other's; an opener in after the owner's mark synchronizes with it
 *     and its parent load (acquire) then sees the owner's claim of the node
 *     (made before the mark), or its free, which comes after the page went.
 *
 * Failure bound
 *   Any allocation of order k succeeds if some aligned block of 2^k frames is
 *   entirely free and no node above it is in another owner's open or close
 *   step: an allocation that finds no run closes every empty node ([close],
 *   bottom-up) and searches again. When nodes in a step were in its way it
 *   returns -EBUSY, and the ledger finishes the steps of owners that are dead
 *   and searches once more (proc.c [pool blocks]). An owner that lives but stopped
 *   mid-step (SIGSTOP, preemption) keeps one node out of reach until it runs
 *   again: allocations inside the node it is opening or closing wait, and so
 *   do blocks that would contain a node it is closing (its parent says PART);
 *   a node being opened whose parent still says FREE can still be handed out
 *   whole. That is at most one node per stopped thread, at most 1/16 of the
 *   sub-pool (a child of the root). [lazy tree]: a block whose nodes'
 *   pages cannot be made resident is not found (-ENOMEM). Internal
 *   fragmentation: none beyond the power-of-two rounding of the caller.
 *
 * Damage
 *   A search uses only the children a node really has (I4): a word whose
 *   ABSENT children were scribbled to FREE cannot send a block past the end
 *   of the sub-pool, and every frame returned is checked against it.
 *
 * Injection points (tests): "palloc.open.chosen" (the child chosen, not
 * yet counted in: [tree give-back]), "palloc.open.checked" (counted in, the
 * parent still FREE, the pages there, the child not yet claimed),
 * "palloc.open.claimed", "palloc.open.linked",
 * "palloc.close.claimed" (between the two words of [open] and [close]),
 * "palloc.split.claimed", "palloc.split.linked" ([exact blocks]).
 *
 * References: LLFree (Wrenger et al., USENIX ATC 2023; luhsra/llfree-c) for
 * bit fields per huge frame, per-CPU reservation and single-word CAS steps;
 * NBBS (Marotta et al.) and SQLite mem5.c for the buddy tree over them.
 */
#include "dp_palloc.h"
#include "dp_inject.h"
#include "pa_word.h"

#include <errno.h>
#include <stdbool.h>

#include <stdio.h>
#include <string.h>

/* One per CPU, per sub-pool: the node index + 1 each level allocates from;
 * at level 0 one leaf per order (node[0] for order 0, leaf[k-1] for order
 * k = 1..4), so that small orders do not use up the runs larger ones need.
 * Shared-atomic (relaxed): written by whichever thread runs on that CPU. */
struct dp_pa_hint {
    dp_a32 node[DP_PA_MAX_LEVELS];
    dp_a32 leaf[4];
    uint8_t pad[64 - 4 * (DP_PA_MAX_LEVELS + 4)];
};
_Static_assert(sizeof(struct dp_pa_hint) == 64, "one cache line per CPU");

/* [one level]: the level and run of an order; false if no level can hold it. */
static bool pa_target(const dp_pa *pa, unsigned order, unsigned *lvl, unsigned *rs) {
    unsigned root = pa->nlevels - 1;
    if (order > DP_PA_MAX_ORDER || (1ull << order) > pa->frames) return false;
    if (order <= 4) {
        *lvl = 0;
        *rs = order;
        return true;
    }
    unsigned L = 1 + (order - 5) / 4, r = (order - 5) % 4;
    if (L <= root) {
        *lvl = L;
        *rs = r;
        return true;
    }
    if (L == root + 1 && r == 0) { /* the whole root: a run of 16 */
        *lvl = root;
        *rs = 4;
        return true;
    }
    return false;
}

int dp_pa_layout(uint64_t frames, uint32_t nhints, uint64_t *cursor, dp_pa_geom *g) {
    if (!frames || frames % DP_HUGE_FRAMES || frames > DP_PA_MAX_FRAMES || !nhints ||
        nhints > 4096)
        return -EINVAL;
    memset(g, 0, sizeof *g);
    g->frames = frames;
    g->nhints = nhints;
    uint64_t off = (*cursor + 63) & ~63ull, n = frames >> 5;
    unsigned L = 0;
    for (;;) {
        g->level_off[L] = off;
        g->level_count[L] = n;
        off += n * 8 * PA_STRIDE;
        if (n == 1) break;
        n = (n + 15) >> 4;
        if (++L >= DP_PA_MAX_LEVELS) return -EINVAL;
    }
    g->nlevels = L + 1;
    g->hint_off = off;
    off += (uint64_t)nhints * sizeof(struct dp_pa_hint);
    *cursor = off;
    return 0;
}

/* The count of a view with no hint, or too few levels for a preference:
 * never written, so pa_cold_on is one load and false. */
static dp_a64 pa_no_cold;

int dp_pa_view(dp_pa *pa, char *base, uint64_t region_size, const dp_pa_geom *g) {
    dp_pa_geom want;
    uint64_t cur = g->level_off[0], end;
    if (dp_pa_layout(g->frames, g->nhints, &cur, &want) != 0) return -EPROTO;
    end = cur;
    if (memcmp(&want, g, sizeof want) != 0 || end > region_size || end < g->level_off[0])
        return -EPROTO;
    memset(pa, 0, sizeof *pa);
    pa->frames = g->frames;
    pa->nlevels = g->nlevels;
    pa->nhints = g->nhints;
    for (unsigned L = 0; L < g->nlevels; L++) {
        pa->level[L] = (dp_a64 *)(base + g->level_off[L]);
        pa->count[L] = g->level_count[L];
    }
    pa->hints = (struct dp_pa_hint *)(base + g->hint_off);
    pa->ncold = &pa_no_cold;
    return 0;
}

/* Content of a node whose range may run past the end (rule I4). */
static uint32_t pa_initial_content(const dp_pa *pa, unsigned L, uint64_t idx) {
    uint32_t c = 0;
    unsigned cs = node_shift(L - 1);
    for (unsigned i = 0; i < 16; i++) {
        uint64_t lo = (idx * 16 + i) << cs;
        if (lo >= pa->frames)
            c |= (uint32_t)CH_ABSENT << (2 * i);
        else if (lo + (1ull << cs) > pa->frames)
            c |= (uint32_t)CH_PART << (2 * i);
    }
    return c;
}

/* The formatted word of (L, idx): OPEN with its ABSENT and PART children
 * for the root and a node that runs past the end (I4), else IDLE (0). */
static uint64_t pa_initial_word(const dp_pa *pa, unsigned L, uint64_t idx) {
    bool whole = ((idx + 1) << node_shift(L)) <= pa->frames;
    return L == pa->nlevels - 1 || !whole ? w_mk(PH_OPEN, 0) | pa_initial_content(pa, L, idx) : w_mk(PH_IDLE, 0);
}

static void pa_format(dp_pa *pa, bool every_word) {
    unsigned root = pa->nlevels - 1;
    for (unsigned L = 0; L <= root; L++) {
        /* on zeroed memory only the last node of a level can be other than
         * IDLE (it alone may run past the end), and a 0 is not written: a
         * store would bring a lazy page in ([lazy tree]) */
        for (uint64_t idx = every_word ? 0 : pa->count[L] - 1; idx < pa->count[L]; idx++) {
            uint64_t w = pa_initial_word(pa, L, idx);
            if (every_word || w) dp_store_relaxed(pa_node(pa, L, idx), w);
        }
    }
    for (uint32_t i = 0; i < pa->nhints; i++) {
        for (unsigned L = 0; L < DP_PA_MAX_LEVELS; L++)
            dp_store_relaxed_uint32_t(&pa->hints[i].node[L], 0);
        for (unsigned k = 0; k < 4; k++) dp_store_relaxed_uint32_t(&pa->hints[i].leaf[k], 0);
    }
    /* Publication to other processes is the caller's release of the header. */
}

void dp_pa_format(dp_pa *pa) { pa_format(pa, true); }
void dp_pa_format_fresh(dp_pa *pa) { pa_format(pa, false); }

/* The children of (L, idx) that exist (I4): bit 2i for each. A damaged word
 * may say FREE where ABSENT belongs; searches use only these bits, so a
 * scribble can never send a block past the end of the sub-pool. */
static inline uint32_t present_mask(const dp_pa *pa, unsigned L, uint64_t idx) {
    uint64_t first = idx * 16, n = pa->count[L - 1];
    if (first + 16 <= n) return LO2;
    return first >= n ? 0u : LO2 & ((1u << (2 * (unsigned)(n - first))) - 1u);
}

/* [resident first]: is the preference on (the sub-pool has cold 2 MiB
 * nodes)? relaxed: a hint; a stale answer only changes where a search
 * looks first. */
static inline bool pa_cold_on(const dp_pa *pa) {
    return dp_load_relaxed(pa->ncold) != 0; /* one load: dp_pa_set_cold */
}

void dp_pa_set_cold(dp_pa *pa, const dp_a64 *words, dp_a64 *count) {
    pa->cold = words;
    pa->ncold = words && count && pa->nlevels > 2 ? count : &pa_no_cold;
}

/* [resident first]: is the 2 MiB node idx (level 1) cold? relaxed: a hint;
 * a cold node is still correct memory, only not preferred. */
static inline bool pa_cold_node(const dp_pa *pa, uint64_t idx) {
    return dp_load_relaxed(&pa->cold[idx]) & DP_PA_COLD;
}

/* [lazy tree], [tree give-back]: before an open or a split writes a word of
 * (L, idx) at level 0 or 1 of an elastic pool, the caller counts itself in
 * on its 2 MiB node (the hook's DP_PA_TABLES_ENTER): 0 in, 1 in and the
 * node's tree pages are not there (the bit: pa_fill makes them so, once
 * the caller knows the node is not held whole), or a negative errno (not
 * in). *in says whether pa_leave must count it out. With no hook (a fixed
 * pool) nothing is counted, and a node whose bit is set is -ENOMEM (its
 * words would stay hidden by the bit). */
static int pa_enter(dp_pa *pa, unsigned L, uint64_t idx, bool *in) {
    *in = false;
    if (L > 1) return 0;
    uint64_t g = L ? idx : idx >> 4;
    if (!pa->tables) return pa_untouched(pa, g) ? -ENOMEM : 0;
    if (!pa->cold || pa->nlevels <= 2 || g >= pa->count[1]) return 0;
    int r = pa->tables(pa->tables_ctx, pa, g, DP_PA_TABLES_ENTER);
    *in = r >= 0;
    return r;
}

/* The hook's DP_PA_TABLES_FILL for (L, idx): its tree pages made resident
 * under the room rules and the bit cleared (0), or -ENOMEM. */
static int pa_fill(dp_pa *pa, unsigned L, uint64_t idx) {
    return pa->tables(pa->tables_ctx, pa, L ? idx : idx >> 4, DP_PA_TABLES_FILL);
}

static void pa_leave(dp_pa *pa, unsigned L, uint64_t idx, bool in) {
    if (in) (void)pa->tables(pa->tables_ctx, pa, L ? idx : idx >> 4, DP_PA_TABLES_LEAVE);
}

void dp_pa_hints_forget(dp_pa *pa, uint64_t g, uint64_t n) {
    for (uint32_t i = 0; i < pa->nhints; i++) {
        /* the leaf hints (leaf indexes) and the 2 MiB node hint (level 1:
         * its word is on a page of level 1, which goes too, el_tree_l1) */
        dp_a32 *h[6] = {&pa->hints[i].node[0], &pa->hints[i].leaf[0], &pa->hints[i].leaf[1],
                        &pa->hints[i].leaf[2], &pa->hints[i].leaf[3], &pa->hints[i].node[1]};
        for (unsigned k = 0; k < 6; k++) {
            uint64_t per = k < 5 ? 16 : 1, lo = g * per, hi = (g + n) * per;
            uint32_t v = dp_load_relaxed_uint32_t(h[k]); /* relaxed: a hint */
            /* relaxed CAS: a hint; one changed meanwhile names another node */
            if (v && v - 1 >= lo && v - 1 < hi) (void)dp_cas_relaxed_uint32_t(h[k], &v, 0);
        }
    }
}

void dp_pa_set_tables(dp_pa *pa, dp_pa_tables_fn fn, void *ctx) {
    pa->tables = fn;
    pa->tables_ctx = ctx;
}

void dp_pa_tree_range(const dp_pa_geom *geo, uint64_t g, uint64_t n, uint64_t page, uint64_t off[2],
                      uint64_t len[2]) {
    off[0] = off[1] = len[0] = len[1] = 0;
    uint64_t nodes = geo->nlevels > 2 ? geo->level_count[1] : 0;
    if (g >= nodes || !n || !page) return;
    if (n > nodes - g) n = nodes - g;
    for (unsigned L = 0; L < 2; L++) {
        uint64_t per = L ? 1 : 16, word = 8 * PA_STRIDE; /* words per 2 MiB node; bytes per word */
        uint64_t lo = geo->level_off[L] + g * per * word, hi = geo->level_off[L] + (g + n) * per * word;
        off[L] = lo / page * page;
        len[L] = (hi + page - 1) / page * page - off[L];
    }
    /* disjoint: a page the two share is the leaves' */
    if (off[1] < off[0] + len[0]) {
        uint64_t end = off[1] + len[1];
        off[1] = off[0] + len[0];
        len[1] = end > off[1] ? end - off[1] : 0;
    }
}

bool dp_pa_tree_page(const dp_pa_geom *geo, unsigned L, uint64_t g, uint64_t n, uint64_t page, uint64_t k,
                     uint64_t *off, uint64_t *pg, uint64_t *pn) {
    /* the level's bytes a node: 16 leaves, or one word */
    uint64_t nodes = geo->nlevels > 2 ? geo->level_count[1] : 0, per = (L ? 1 : 16) * 8 * PA_STRIDE;
    if (L > 1 || g >= nodes || !n || !page) return false;
    if (n > nodes - g) n = nodes - g;
    uint64_t base = geo->level_off[L], lo = (base + g * per + page - 1) / page * page, hi = (base + (g + n) * per) / page * page;
    if (lo >= hi || k >= (hi - lo) / page) return false;
    *off = lo + k * page;
    *pg = (*off - base) / per;
    *pn = (*off + page - base + per - 1) / per - *pg;
    return true;
}

bool dp_pa_tree_page_of(const dp_pa_geom *geo, unsigned L, uint64_t g, uint64_t page, uint64_t *off, uint64_t *pg,
                        uint64_t *pn) {
    uint64_t nodes = geo->nlevels > 2 ? geo->level_count[1] : 0, per = (L ? 1 : 16) * 8 * PA_STRIDE;
    if (L > 1 || g >= nodes || !page) return false;
    /* the page's first node (rounded up: one whose words begin on an
     * earlier page shares it), then the one whole page from there, if it
     * is node g's */
    uint64_t base = geo->level_off[L], start = (base + g * per) / page * page;
    uint64_t first = start > base ? (start - base + per - 1) / per : 0;
    return dp_pa_tree_page(geo, L, first, nodes - first, page, 0, off, pg, pn) && *off == start && g >= *pg &&
           g < *pg + *pn;
}

/* [resident first]: bit 2i for each child i of the level-2 node idx (a
 * 2 MiB node) among want's (bit 2i each) whose hint word says cold.
 * relaxed: hints. */
static uint32_t pa_cold_kids(const dp_pa *pa, uint64_t idx, uint32_t want) {
    uint32_t m = 0;
    uint64_t g0 = idx * 16, n = pa->count[1];
    for (uint32_t x = want & LO2; x; x &= x - 1) {
        unsigned i = (unsigned)__builtin_ctz(x) / 2;
        if (g0 + i >= n) break;
        if (dp_load_relaxed(&pa->cold[g0 + i]) & DP_PA_COLD) m |= 1u << (2 * i);
    }
    return m;
}

/* [resident first]: bit 2i for each child i of the level-3 node idx (a
 * 32 MiB node) among want's with no warm 2 MiB node in it (its words read
 * up to the first warm one). */
static uint32_t pa_cold_kids3(const dp_pa *pa, uint64_t idx, uint32_t want) {
    uint32_t m = 0;
    uint64_t n = pa->count[1];
    for (uint32_t x = want & LO2; x; x &= x - 1) {
        unsigned i = (unsigned)__builtin_ctz(x) / 2;
        if (idx * 16 + i >= pa->count[2]) break;
        uint64_t g0 = (idx * 16 + i) * 16, g = g0;
        while (g < g0 + 16 && g < n && (dp_load_relaxed(&pa->cold[g]) & DP_PA_COLD)) g++;
        if (g == g0 + 16 || g >= n) m |= 1u << (2 * i); /* every present one cold */
    }
    return m;
}

/* [resident first]: bit 2i for each child i of the node idx at level L >= 2
 * with a cold 2 MiB node anywhere in it (a block there would be made
 * resident in part): 16^(L-1) hint words, read only while the sub-pool has
 * cold memory and only for blocks of 2 MiB and up. relaxed: hints. */
static uint32_t pa_cold_any(const dp_pa *pa, unsigned L, uint64_t idx) {
    if (L == 2) return pa_cold_kids(pa, idx, LO2);
    uint32_t m = 0;
    uint64_t per = 1ull << (4 * (L - 2)), n = pa->count[1]; /* 2 MiB nodes a child spans */
    for (unsigned i = 0; i < 16; i++) {
        uint64_t g0 = (idx * 16 + i) * per;
        for (uint64_t g = g0; g < g0 + per && g < n; g++)
            if (dp_load_relaxed(&pa->cold[g]) & DP_PA_COLD) {
                m |= 1u << (2 * i);
                break;
            }
    }
    return m;
}

/* [resident first]: the lowest of the runs m (bit 2i: a run of 2^rs
 * children from child i of the node idx at level L >= 2) with no cold
 * 2 MiB node in it, as a mask of its one bit, or 0: the runs in order,
 * stopping at the first warm one, so that only the hint words of the runs
 * before it and its own are read (the lowest bit of what pa_cold_any's
 * mask would leave, without reading all 16^(L-1)). relaxed: hints. */
static __attribute__((noinline)) uint32_t pa_first_warm(const dp_pa *pa, unsigned L, uint64_t idx, uint32_t m, unsigned rs) {
    uint64_t per = 1ull << (4 * (L - 2)), n = pa->count[1], span = per << rs;
    if (span == 1) /* a 2 MiB block: one word a run */
        for (; m; m &= m - 1) {
            uint64_t g = idx * 16 + (unsigned)__builtin_ctz(m) / 2;
            if (g >= n || !(dp_load_relaxed(&pa->cold[g]) & DP_PA_COLD)) return m & (~m + 1);
        }
    for (; m; m &= m - 1) {
        uint64_t g0 = (idx * 16 + (unsigned)__builtin_ctz(m) / 2) * per, g = g0;
        while (g < g0 + span && g < n && !(dp_load_relaxed(&pa->cold[g]) & DP_PA_COLD)) g++;
        if (g == g0 + span || g >= n) return m & (~m + 1);
    }
    return 0;
}

/* [resident first]: has the node idx at level L >= t a level-t node with
 * an aligned run of 2^rs children without cold memory in it? */
static bool pa_warm_run_in(const dp_pa *pa, unsigned L, uint64_t idx, unsigned t, unsigned rs) {
    if (L == t) return child_runs(~pa_cold_any(pa, t, idx) & present_mask(pa, t, idx), rs) != 0;
    for (unsigned i = 0; i < 16 && idx * 16 + i < pa->count[L - 1]; i++)
        if (pa_warm_run_in(pa, L - 1, idx * 16 + i, t, rs)) return true;
    return false;
}

/* [resident first]: bit 2i for each child i of the node idx at level A > t
 * (t >= 3) where a block of 32 MiB and up cannot be warm: a level-t child
 * with no aligned run of 2^rs children free of cold memory; above, a free
 * child with no such run in its subtree (16^(A-2) hint words: the large
 * blocks' warm passes alone read them). Children that are not free are
 * searched, and so judged below. */
static uint32_t pa_no_warm_run(const dp_pa *pa, unsigned A, uint64_t idx, unsigned t, unsigned rs, uint32_t fm) {
    uint32_t m = 0;
    for (unsigned i = 0; i < 16; i++) {
        uint64_t c = idx * 16 + i;
        if (c >= pa->count[A - 1])
            m |= 1u << (2 * i);
        else if ((A - 1 == t || (fm >> (2 * i) & 1)) && !pa_warm_run_in(pa, A - 1, c, t, rs))
            m |= 1u << (2 * i);
    }
    return m;
}

/* pa_try_node's need, or'ed in ([resident first]): warm memory only */
#define PA_WARM_ONLY 4u

/* [alloc and free]: one CAS in one node. Returns true with *frame set; false when the
 * node is not open or has fewer than need runs (1 or 2; phase
 * OPENING/CLOSING sets *stuck). resv (0 or W_RESV) is set by the same CAS:
 * a node found by a search becomes the caller's reservation without a CAS
 * of its own ([reservation]). With PA_WARM_ONLY in need ([resident first]):
 * false, too, when a node's only runs (level 2 and up) have cold memory
 * in them (a cold 2 MiB node the callers do not try: pa_cold_node). A flag in need, not a
 * parameter of its own: a ninth would go on the stack at every call, and
 * tests of need's bit 1 cost nothing more than need > 1 did. Inline at
 * every call: the reservation's try is most of an allocation, and a call
 * cost it a prologue of six pushes (bench/pacount.sh, release build: 310
 * instructions an allocation with it called, 299 inline, 288 with
 * dp_pa_alloc's search out of line too, pa_search). */
static inline __attribute__((always_inline)) bool pa_try_node(dp_pa *pa, unsigned L, uint64_t idx,
                                                              unsigned rs, uint64_t resv, unsigned need,
                                                              uint64_t *frame, bool *stuck) {
    if (idx >= pa->count[L]) return false;
    dp_a64 *p = pa_node(pa, L, idx);
    uint64_t w = dp_load_relaxed(p); /* relaxed: the CAS below validates it */
    uint32_t valid = L == 0 ? 0xffffffffu : present_mask(pa, L, idx);
    /* [resident first]: blocks of 2 MiB and up take the first warm run
     * (need & 2, a leaf's, never meets this) */
    bool warm_first = L >= 2 && pa_cold_on(pa);
    for (;;) {
        if (!(w & W_OPEN)) { /* (one bit test: pa_word.h) */
            if (w_phase(w) != PH_IDLE && stuck) *stuck = true;
            return false;
        }
        uint32_t c = (uint32_t)w;
        uint32_t m = L == 0 ? leaf_runs(c, rs) : child_runs(ch_free(c) & valid, rs);
        if (warm_first && m) {
            uint32_t mw = pa_first_warm(pa, L, idx, m, rs);
            if (mw) m = mw;
            else if (need & PA_WARM_ONLY) return false;
        }
        if (!m || ((need & 2) && !(m & (m - 1)))) return false;
        unsigned pos = L == 0 ? (unsigned)__builtin_ctz(m) : (unsigned)__builtin_ctz(m) / 2;
        uint64_t nw = w | run_used(L, run_mask(L, pos, rs)) | resv;
        /* acquire: pairs with the release CAS in dp_pa_free (or close) that freed these frames */
        if (dp_cas_acquire(p, &w, nw)) {
            *frame = (idx << node_shift(L)) + ((uint64_t)pos << child_shift(L));
            return true;
        }
    }
}

/* [open]: open FREE child i of node idx at level A. 1 opened, 0 not (it
 * was not IDLE, or the parent no longer says FREE: another may have opened
 * it), 2 not and held whole by another ([tree give-back]: do not read it),
 * or the -ENOMEM of [lazy tree]'s hook: the child's page could not be
 * made resident. */
static int pa_open_in(dp_pa *pa, unsigned A, uint64_t idx, unsigned i, uint32_t owner) {
    dp_a64 *cp = pa_node(pa, A - 1, idx * 16 + i);
    dp_a64 *pp = pa_node(pa, A, idx);
    uint64_t cw = dp_load_relaxed(cp);
    if (w_phase(cw) != PH_IDLE) return 0;
    /* acq_rel: claims the child; pairs with the release store that made it IDLE (pa_close, dp_pa_recover) */
    if (!dp_cas_acq_rel(cp, &cw, w_mk(PH_OPENING, owner))) return 0;
    DP_INJECT("palloc.open.claimed");
    uint64_t pw = dp_load_relaxed(pp);
    for (;;) {
        if (w_phase(pw) != PH_OPEN || ch_state(pw, i) != CH_FREE) {
            dp_store_release(cp, w_mk(PH_IDLE, 0)); /* release: pairs with pa_open's claim CAS */
            return 0;
        }
        if (dp_cas_acq_rel(pp, &pw, pw | ((uint64_t)CH_PART << (2 * i)))) break;
    }
    DP_INJECT("palloc.open.linked");
    /* release: pairs with pa_try_node's acquire CAS, the first allocation in the child */
    dp_store_release(cp, w_mk(PH_OPEN, 0));
    return 1;
}

static int pa_open(dp_pa *pa, unsigned A, uint64_t idx, unsigned i, uint32_t owner) {
    DP_INJECT("palloc.open.chosen");
    bool in;
    int r = pa_enter(pa, A - 1, idx * 16 + i, &in);
    if (r < 0) return r;
    if (in) {
        /* [tree give-back]: counted in, and only then the parent looked at:
         * not FREE, the open would fail -- and a trimmer may be giving the
         * pages back; nothing is written. (acquire: after our count's CAS,
         * which read any trimmer's mark before it -- dp_res_trim_mark's
         * acq_rel CAS, made after the trimmer's claim -- so the claim is
         * seen, or the free that follows its give-back.) */
        uint64_t pw = dp_load_acquire(pa_node(pa, A, idx));
        bool held = w_phase(pw) != PH_OPEN || ch_state(pw, i) != CH_FREE;
        if (!held && r == 1) r = pa_fill(pa, A - 1, idx * 16 + i);
        if (held || r) {
            pa_leave(pa, A - 1, idx * 16 + i, in);
            return held ? 2 : r;
        }
    }
    DP_INJECT("palloc.open.checked");
    r = pa_open_in(pa, A, idx, i, owner);
    pa_leave(pa, A - 1, idx * 16 + i, in);
    return r;
}

/* [close], bottom-up: close every empty descendant of (L, idx), then the node
 * itself if it is empty. Returns true if (L, idx) was closed. A node found in
 * another owner's open/close step sets *stuck. */
static bool pa_close_in(dp_pa *pa, unsigned L, uint64_t idx, uint32_t owner, uint64_t w);

static bool pa_close(dp_pa *pa, unsigned L, uint64_t idx, uint32_t owner, bool *stuck) {
    dp_a64 *p = pa_node(pa, L, idx);
    uint64_t w = dp_load_relaxed(p);
    if (w_phase(w) != PH_OPEN) {
        if (w_phase(w) != PH_IDLE) *stuck = true;
        return false;
    }
    if (L > 0) {
        for (uint32_t m = ch_part((uint32_t)w); m; m &= m - 1) {
            uint64_t ci = idx * 16 + (unsigned)__builtin_ctz(m) / 2;
            if (ci < pa->count[L - 1]) pa_close(pa, L - 1, ci, owner, stuck);
        }
        w = dp_load_relaxed(p);
        if (w_phase(w) != PH_OPEN) return false;
    }
    if (L == pa->nlevels - 1 || (uint32_t)w != 0) return false;
    /* [tree give-back]: counted in on the node's 2 MiB node for the close,
     * as an open is; a node under a set bit is IDLE (nothing to close),
     * and its page may be going */
    bool in;
    int r = pa_enter(pa, L, idx, &in);
    if (r == 0) r = pa_close_in(pa, L, idx, owner, w) ? 0 : 1;
    pa_leave(pa, L, idx, in);
    return r == 0;
}

static bool pa_close_in(dp_pa *pa, unsigned L, uint64_t idx, uint32_t owner, uint64_t w) {
    dp_a64 *p = pa_node(pa, L, idx);
    /* acq_rel: acquire pairs with pa_free's CASes that emptied it, release publishes the seal */
    if (!dp_cas_acq_rel(p, &w, w_mk(PH_CLOSING, owner))) return false;
    DP_INJECT("palloc.close.claimed");
    dp_a64 *pp = pa_node(pa, L + 1, idx >> 4);
    unsigned i = (unsigned)(idx & 15);
    uint64_t pw = dp_load_relaxed(pp);
    while (ch_state(pw, i) == CH_PART &&
           !dp_cas_acq_rel(pp, &pw, pw & ~(3ull << (2 * i))))
        ;
    dp_store_release(p, w_mk(PH_IDLE, 0)); /* release: pairs with pa_open's claim CAS */
    return true;
}

static bool pa_reclaim(dp_pa *pa, uint32_t owner) {
    unsigned root = pa->nlevels - 1;
    bool stuck = false;
    uint64_t w = dp_load_relaxed(pa_node(pa, root, 0));
    for (uint32_t m = ch_part((uint32_t)w); m; m &= m - 1) {
        uint64_t ci = (unsigned)__builtin_ctz(m) / 2;
        if (ci < pa->count[root - 1]) pa_close(pa, root - 1, ci, owner, &stuck);
    }
    return stuck;
}

void dp_pa_reclaim(dp_pa *pa, uint32_t owner) { (void)pa_reclaim(pa, owner); }

typedef struct pa_req {
    unsigned t, rs;
    uint32_t owner;
    bool avoid;    /* skip nodes other CPUs reserved */
    bool tried;    /* mine was just tried: do not try it again */
    unsigned need; /* runs a node must have to be taken: 2 in the first pass */
    uint64_t mine; /* my hint at level t, index + 1 */
    uint64_t near; /* the level-t node to start from: its path is tried first */
    bool stuck;    /* a node on the way was in another owner's open/close step */
    bool warm_only; /* [resident first]: no cold 2 MiB node, no run with a cold child */
    bool nomem;    /* [lazy tree]: a node's pages could not be made resident: stop */
} pa_req;

static bool pa_dfs(dp_pa *pa, unsigned A, uint64_t idx, pa_req *rq, uint64_t *node,
                   uint64_t *frame);

/* Try child i of (A, idx): descend if PART, open first if FREE. */
static bool pa_dfs_child(dp_pa *pa, unsigned A, uint64_t idx, unsigned i, unsigned st,
                         pa_req *rq, uint64_t *node, uint64_t *frame) {
    uint64_t ci = idx * 16 + i;
    if (ci >= pa->count[A - 1] || rq->nomem) return false;
    /* Whether we opened it or someone else just did, it may have room now;
     * unless its page could not be had ([lazy tree]): then nothing is read
     * there, and the search ends */
    int o = st == CH_FREE ? pa_open(pa, A, idx, i, rq->owner) : 1;
    if (o < 0) {
        rq->nomem = true;
        return false;
    }
    if (o == 2) return false; /* held whole: nothing there is read ([tree give-back]) */
    return pa_dfs(pa, A - 1, ci, rq, node, frame);
}

/* Search the subtree of (A, idx) for a level-t node with room ([reservation]): the
 * child towards rq->near first (so CPUs spread out over the tree), then
 * partly used children, then free ones. The partly used ones are taken
 * from the one after the near child on, round to it: a parent's PART
 * does not tell a full child from one with room (a full leaf stays open
 * and PART), and a CPU fills its node's leaves in turn, so the ones below
 * its reservation are the full ones; from child 0 every refill of an
 * order-3 bulk (4 runs a leaf) loaded them all: 6.2 leaf words per
 * search for bulks of 64 blocks, 11.1 for 512; 1.0 and 2.8 this way. */
static bool pa_dfs(dp_pa *pa, unsigned A, uint64_t idx, pa_req *rq, uint64_t *node,
                   uint64_t *frame) {
    if (idx >= pa->count[A]) return false;
    if (A == rq->t) {
        if (idx + 1 == rq->mine && rq->tried) return false;
        if (rq->avoid && (dp_load_relaxed(pa_node(pa, A, idx)) & W_RESV) && idx + 1 != rq->mine)
            return false;
        if (rq->warm_only && A == 1 && pa_cold_node(pa, idx)) return false;
        if (!pa_try_node(pa, A, idx, rq->rs, W_RESV, rq->need | (rq->warm_only ? PA_WARM_ONLY : 0), frame,
                         &rq->stuck))
            return false;
        *node = idx;
        return true;
    }
    /* (a node below the search's start is reached through a PART state or
     * an open, after which its pages are there: [lazy tree]) */
    uint64_t w = dp_load_relaxed(pa_node(pa, A, idx));
    if (w_phase(w) != PH_OPEN) {
        if (w_phase(w) != PH_IDLE) rq->stuck = true;
        return false;
    }
    /* [resident first]: fresh 2 MiB and 32 MiB nodes warm first. With
     * warm_only: no cold 2 MiB node (a leaf search's own included), no
     * 32 MiB node without a warm one, open or not (a trimmer's claim leaves
     * the nodes it opened open: empty, cold, and searched before free
     * ones), and no free node of 512 MiB or more opened (what is in it is
     * not looked at: the last pass does) */
    if (A == 1 && rq->warm_only && pa_cold_node(pa, idx)) return false;
    /* the near child: where the search starts, unless cold */
    unsigned pref = (rq->near >> (4 * (A - rq->t))) == idx ? (unsigned)(rq->near >> (4 * (A - 1 - rq->t))) & 15 : 16;
    uint32_t fm = ch_free((uint32_t)w), cold = 0, skip = 0;
    if (rq->warm_only) { /* set only while the preference is on */
        /* cold bits of the children this pass may take, and the near one's */
        uint32_t want = fm | ch_part((uint32_t)w) | (pref < 16 ? 1u << (2 * pref) : 0);
        skip = A > rq->t && rq->t >= 3 ? pa_no_warm_run(pa, A, idx, rq->t, rq->rs, fm)
               : A == 2                     ? pa_cold_kids(pa, idx, want)
               : A == 3                     ? pa_cold_kids3(pa, idx, want)
               : A > 3                      ? fm
                                            : 0;
        cold = fm & skip;
    } else if ((A == 2 || A == 3) && fm && pa_cold_on(pa)) {
        cold = A == 2 ? pa_cold_kids(pa, idx, fm) : pa_cold_kids3(pa, idx, fm);
    }
    if (pref < 16) {
        unsigned st = ch_state(w, pref);
        if ((st == CH_FREE && (cold >> (2 * pref) & 1)) || (skip >> (2 * pref) & 1))
            pref = 16; /* cold: its turn comes last, or not in this pass */
        else if ((st == CH_PART || st == CH_FREE) && pa_dfs_child(pa, A, idx, pref, st, rq, node, frame))
            return true;
    }
    uint32_t pm = ch_part((uint32_t)w) & ~skip;
    uint32_t after = pref < 15 ? pm & (0xffffffffu << (2 * pref + 2)) : 0; /* pref 16: none */
    for (int half = 0; half < 2; half++)
        for (uint32_t m = half ? pm & ~after : after; m; m &= m - 1) {
            unsigned i = (unsigned)__builtin_ctz(m) / 2;
            if (i != pref && pa_dfs_child(pa, A, idx, i, CH_PART, rq, node, frame)) return true;
        }
    for (int round = 0; round < 2; round++)
        for (uint32_t m = round ? cold & ~skip : fm & ~cold & ~skip; m; m &= m - 1) {
            unsigned i = (unsigned)__builtin_ctz(m) / 2;
            if (i != pref && pa_dfs_child(pa, A, idx, i, CH_FREE, rq, node, frame)) return true;
        }
    return false;
}

/* [take-back] and [second chance]: per thread, per run size, the
 * runs it freed as whole blocks into leaves with no RESV bit (newest
 * last, a ring of DP_PA_BACK: an older one is forgotten) and the leaf it
 * last freed a run into; and the allocator (sub-pool, this process) they
 * belong to.
 * Thread-private memory, so plain loads and stores; a value is only where
 * to look, the CAS validates (a stale run, or one of a sub-pool detached
 * since, costs a probe at most: any free run is a correct allocation).
 * Global-dynamic TLS (area_cache.c, dp_ar_tc_last). */
_Static_assert((DP_PA_BACK & (DP_PA_BACK - 1)) == 0 && DP_PA_BACK <= 128,
               "a ring indexed by uint8_t");
static _Thread_local struct {
    const dp_pa *pa;
    uint32_t leaf[5];          /* per run size 0..4: leaf index + 1, 0 = none */
    uint8_t n[5];              /* runs in back[rs] */
    uint8_t top[5];            /* back[rs][top] is the newest */
    uint64_t back[5][DP_PA_BACK]; /* frames of runs freed and not yet taken back */
} pa_freed;

/* This CPU's hint for level t and run size rs ([reservation]). */
static inline dp_a32 *pa_hint(struct dp_pa_hint *h, unsigned t, unsigned rs) {
    return t == 0 && rs > 0 ? &h->leaf[rs - 1] : &h->node[t];
}

/* [reservation]: may a CPU whose reservation for this order is leaf hv - 1 take a
 * run in leaf lf - 1 (p: its word)? Only in the 2 MiB node of that
 * reservation (a CPU that followed a moved thread's frees into another
 * CPU's node stayed there and shared its lines), in none of the CPU's leaf
 * reservations (dp_pa_hint_freed sets no RESV: another order's run is kept
 * for it) and in no leaf with RESV (another CPU's, or this CPU's other
 * levels'). The word is loaded last, so a leaf refused for where it lies
 * costs no line. Sets *w to the word loaded. */
static inline bool pa_may_take(struct dp_pa_hint *h, uint64_t lf, uint64_t hv, dp_a64 *p,
                               uint64_t *w) {
    if ((lf - 1) >> 4 != (hv - 1) >> 4) return false;
    for (unsigned k = 0; k <= 4; k++) /* relaxed: hints, on the line the caller loaded */
        if (dp_load_relaxed_uint32_t(pa_hint(h, 0, k)) == lf) return false;
    *w = dp_load_relaxed(p); /* relaxed: steers only; the CAS that follows validates */
    return !(*w & W_RESV);
}

/* [take-back]: the newest run of size rs this thread freed into a
 * leaf with no RESV bit, if it is still free and this CPU may take it; one
 * CAS sets exactly its bits (no RESV: the reservation stays where it is).
 * Each run is tried once and forgotten, so a call costs at most DP_PA_BACK
 * probes. Caller: t == 0, hv != 0, pa_freed.pa == pa. */
static bool pa_take_back(dp_pa *pa, struct dp_pa_hint *h, unsigned rs, uint64_t hv,
                         uint64_t *frame) {
    while (pa_freed.n[rs]) {
        unsigned top = pa_freed.top[rs];
        uint64_t f = pa_freed.back[rs][top], lf = (f >> node_shift(0)) + 1, w;
        pa_freed.n[rs]--;
        pa_freed.top[rs] = (uint8_t)((top - 1) & (DP_PA_BACK - 1));
        if (lf - 1 >= pa->count[0]) continue;
        dp_a64 *p = pa_node(pa, 0, lf - 1);
        if (!pa_may_take(h, lf, hv, p, &w)) continue;
        uint64_t m = run_mask(0, (unsigned)f & 31, rs);
        while (w_phase(w) == PH_OPEN && !(w & m) && !(w & W_RESV))
            /* acquire: pairs with the release CAS in dp_pa_free that freed the run */
            if (dp_cas_acquire(p, &w, w | m)) {
                *frame = f;
                return true;
            }
    }
    return false;
}

/* Make node idx this CPU's reservation at level t (advisory, best effort).
 * The search that found idx set its RESV bit in the allocating CAS; the
 * old reservation loses its bit unless another order of this CPU still
 * allocates from it. */
static void pa_adopt(dp_pa *pa, struct dp_pa_hint *h, unsigned t, unsigned rs, uint64_t idx) {
    dp_a32 *hp = pa_hint(h, t, rs);
    uint32_t old = dp_load_relaxed_uint32_t(hp); /* relaxed: hint */
    if (old == idx + 1) return;
    dp_store_relaxed_uint32_t(hp, (uint32_t)(idx + 1));
    if (t == 0)
        for (unsigned k = 0; k <= 4; k++)
            if (pa_hint(h, 0, k) != hp && dp_load_relaxed_uint32_t(pa_hint(h, 0, k)) == old) return;
    /* (a 2 MiB node's word is not read where its page may be gone:
     * [tree give-back]; a leaf's hint is forgotten with its page) */
    if (old && old - 1 < pa->count[t] && !(t == 1 && pa_untouched(pa, old - 1))) {
        dp_a64 *p = pa_node(pa, t, old - 1);
        uint64_t w = dp_load_relaxed(p);
        /* relaxed CAS: RESV orders nothing, it only steers searches */
        while (w_phase(w) == PH_OPEN && (w & W_RESV) &&
               !dp_cas_weak_relaxed(p, &w, w & ~W_RESV))
            ;
    }
}

void dp_pa_hint_freed(dp_pa *pa, uint64_t frame, unsigned order, unsigned cpu) {
    unsigned t, rs;
    if (!pa_target(pa, order, &t, &rs) || t != 0 || frame >= pa->frames) return;
    unsigned hi = cpu < pa->nhints ? cpu : cpu % pa->nhints;
    struct dp_pa_hint *h = &pa->hints[hi];
    uint32_t hv = dp_load_relaxed_uint32_t(pa_hint(h, 0, rs)); /* relaxed: a hint */
    if (hv && hv - 1 < pa->count[0]) {
        uint64_t w = dp_load_relaxed(pa_node(pa, 0, hv - 1)); /* relaxed: a hint's check */
        if (w_phase(w) == PH_OPEN && leaf_runs((uint32_t)w, rs)) return; /* it still has a run */
    }
    uint64_t lf = frame >> node_shift(0);
    pa_adopt(pa, h, 0, rs, lf);
    /* [tree give-back]: a trim may have given the leaf's page back between
     * our free and this hint (its dp_pa_hints_forget came first): the hint
     * goes again. seq_cst fence: our hint's store before our load of the
     * bit, against the trim's fence between its bits and its look at the
     * hints (resident.c dp_res_tree_give_back): one of the two sees the
     * other. */
    if (pa->tables) {
        dp_fence_seq_cst();
        if (pa_untouched(pa, lf >> 4)) {
            uint32_t v = (uint32_t)lf + 1;
            (void)dp_cas_relaxed_uint32_t(pa_hint(h, 0, rs), &v, 0); /* relaxed CAS: a hint */
        }
    }
}

/* dp_pa_alloc's search, after the reservation (and [second chance]) missed:
 * out of line, so that the common case keeps few registers. */
static __attribute__((noinline)) bool pa_search(dp_pa *pa, struct dp_pa_hint *h, unsigned t, unsigned rs,
                                                uint32_t owner, uint64_t hv, uint64_t start, bool warm_first,
                                                uint64_t *frame, bool *stuckp, bool *nomemp) {
    unsigned root = pa->nlevels - 1;
    bool stuck = false;
    /* Passes: 0 leaves that keep a run after this one ([reservation]) and
     * no node another CPU reserved; 1 any; 2 after closing empty nodes
     * (not for a leaf: closing nodes never makes room inside one). While
     * the sub-pool has cold memory ([resident first]), passes 0 and 1 take
     * warm memory only; for a leaf pass 2 takes any (no closing), for a
     * larger block pass 2 warm memory only after the closing (warm memory
     * that smaller blocks used and freed lies in empty open nodes, which
     * the closing makes free) and a pass 3 any. */
    if (t == 0) warm_first = pa_cold_on(pa);
    bool got = false;
    int passes = warm_first && t > 0 ? 4 : 3;
    bool nomem = false;
    for (int pass = 0; pass < passes && !got && !nomem; pass++) {
        if (pass == 2) {
            if (t == 0 && !warm_first) break;
            if (t > 0) stuck |= pa_reclaim(pa, owner); /* it visits every part-used node */
        }
        unsigned need = pass == 0 && t == 0 && rs <= 3 ? 2 : 1;
        bool warm_only = warm_first && pass < (t > 0 ? 3 : 2);
        pa_req rq = {t, rs, owner, pass == 0, pass == 0 && hv, need, hv, start, false, warm_only, false};
        uint64_t node;
        if (t == root) {
            got = pa_try_node(pa, root, 0, rs, 0, rq.warm_only ? 1 | PA_WARM_ONLY : 1, frame, &rq.stuck);
        } else { /* nearby first: the smallest open subtree around start, then larger ones */
            for (unsigned A = t + 1; A <= root && !got; A++)
                /* [lazy tree]: the start's 2 MiB node may be untouched: IDLE */
                if ((A > 1 || !pa_untouched(pa, start >> 4)) && pa_dfs(pa, A, start >> (4 * (A - t)), &rq, &node, frame)) {
                    pa_adopt(pa, h, t, rs, node);
                    got = true;
                }
        }
        stuck |= rq.stuck;
        nomem |= rq.nomem;
    }
    *stuckp |= stuck;
    *nomemp |= nomem;
    return got;
}

int dp_pa_alloc(dp_pa *pa, unsigned order, uint32_t owner, unsigned cpu, uint64_t *frame) {
    unsigned t, rs;
    if (!pa_target(pa, order, &t, &rs)) return -EINVAL;
    /* nhints is the configured CPU count, so cpu < nhints but after a
     * hotplug: skip the division (tens of cycles) in the common case. */
    unsigned hi = cpu < pa->nhints ? cpu : cpu % pa->nhints;
    struct dp_pa_hint *h = &pa->hints[hi];
    uint64_t hv = dp_load_relaxed_uint32_t(pa_hint(h, t, rs)); /* relaxed: a hint, validated by CAS */
    uint64_t start;
    bool stuck = false, got = false, nomem = false;
    /* [take-back], before the reservation: tried after it, every
     * allocation once the reservation ran dry paid a failed probe first
     * (docs/design.md, "Page allocator"). Costs the shared library a
     * __tls_get_addr call per allocation of order 0..4. */
    if (t == 0 && hv && pa_freed.n[rs] && pa_freed.pa == pa && pa_take_back(pa, h, rs, hv, frame))
        return 0; /* a run from a leaf in the sub-pool: no end check needed */
    /* [resident first] for blocks of 128 KiB and up (one relaxed load of
     * the count, and only for them: the leaf path below 128 KiB is left
     * as it was). */
    bool warm_first = t > 0 && pa_cold_on(pa);
    if (hv && hv - 1 < pa->count[t]) {
        if (!(warm_first && t == 1 && pa_cold_node(pa, hv - 1)))
            got = pa_try_node(pa, t, hv - 1, rs, 0, warm_first ? 1 | PA_WARM_ONLY : 1, frame, &stuck);
        start = hv - 1;
    } else {
        hv = 0;
        start = (uint64_t)hi * pa->count[t] / pa->nhints;
    }
    /* [second chance]: the leaf this thread last freed such a run
     * into, if this CPU may take from it (pa_may_take). No stuck report:
     * the search below decides between -EBUSY and -ENOMEM. */
    if (!got && t == 0 && hv && pa_freed.pa == pa) {
        uint64_t lf = pa_freed.leaf[rs], w;
        if (lf && lf - 1 < pa->count[0] && pa_may_take(h, lf, hv, pa_node(pa, 0, lf - 1), &w) &&
            pa_try_node(pa, 0, lf - 1, rs, W_RESV, 1, frame, NULL)) {
            pa_adopt(pa, h, 0, rs, lf - 1);
            got = true;
        }
    }
    if (!got) got = pa_search(pa, h, t, rs, owner, hv, start, warm_first, frame, &stuck, &nomem);
    if (!got) return stuck && !nomem ? -EBUSY : -ENOMEM;
    /* Searches use only present children, so this cannot fail unless the
     * geometry itself is broken; never hand out frames past the end. */
    if (*frame >= pa->frames || (1ull << order) > pa->frames - *frame) return -EUCLEAN;
    return 0;
}

/* [alloc and free]'s free; remember: a whole block at its own order, which [take-back]'s
 * take-back may take back (not a piece of an exact block, a trimmed tail
 * or a grow given up: those runs are not of the size their holder asked
 * for, and a trimmed tail is what a grow in place wants back). */
static int pa_free(dp_pa *pa, uint64_t frame, unsigned order, bool remember) {
    unsigned t, rs;
    if (!pa_target(pa, order, &t, &rs)) return -EINVAL;
    uint64_t n = 1ull << order;
    if ((frame & (n - 1)) || frame >= pa->frames || n > pa->frames - frame) return -EINVAL;
    uint64_t idx = frame >> node_shift(t);
    unsigned pos = (unsigned)(frame >> child_shift(t)) & (t == 0 ? 31u : 15u);
    if (idx >= pa->count[t]) return -EINVAL;
    uint64_t mask = run_mask(t, pos, rs), used = run_used(t, mask);
    dp_a64 *p = pa_node(pa, t, idx);
    uint64_t w = dp_load_relaxed(p); /* relaxed: validated by the CAS */
    for (;;) {
        if ((w & (W_OPEN | mask)) != (W_OPEN | used)) return -EINVAL; /* OPEN, the run held */
        /* release: pairs with the acquire CAS in pa_try_node that hands them out again */
        if (dp_cas_release(p, &w, w & ~mask)) {
            if (t == 0) { /* [take-back] and [second chance]; thread-private */
                if (pa_freed.pa != pa) {
                    memset(pa_freed.leaf, 0, sizeof pa_freed.leaf);
                    memset(pa_freed.n, 0, sizeof pa_freed.n);
                    pa_freed.pa = pa;
                }
                pa_freed.leaf[rs] = (uint32_t)idx + 1;
                if (remember && !(w & W_RESV)) { /* a reserved leaf's runs are its CPU's */
                    unsigned top = (pa_freed.top[rs] + 1u) & (DP_PA_BACK - 1);
                    pa_freed.top[rs] = (uint8_t)top;
                    pa_freed.back[rs][top] = frame;
                    if (pa_freed.n[rs] < DP_PA_BACK) pa_freed.n[rs]++;
                }
            }
            return 0;
        }
    }
}

int dp_pa_free(dp_pa *pa, uint64_t frame, unsigned order) {
    return pa_free(pa, frame, order, true);
}

/* ---- [exact blocks]: exact blocks (split a FULL child, give back a tail) ------ */

/* Content of a node whose every frame is allocated: all leaf bits, or
 * every child FULL (a FULL child lies inside the sub-pool, so all 16 of its
 * children exist). */
static inline uint32_t all_used(unsigned L) { return L == 0 ? 0xffffffffu : HI2; }

/* [exact blocks]: split FULL child i of (A, idx) -- frames the caller holds -- so
 * that they are described one level down: claim the IDLE child with its
 * content already all-used, turn the parent's FULL into PART, store OPEN.
 * -EBUSY when another owner is in a step on the child (an opener that read
 * a stale FREE: it gives up at once unless stopped); -EINVAL when the
 * parent does not say FULL (the caller does not hold these frames). */
static int pa_split_in(dp_pa *pa, unsigned A, uint64_t idx, unsigned i, uint32_t owner);

static int pa_split(dp_pa *pa, unsigned A, uint64_t idx, unsigned i, uint32_t owner) {
    uint64_t ci = idx * 16 + i;
    if (ci >= pa->count[A - 1] || !owner || owner > DP_PA_OWNER_MAX) return -EINVAL;
    /* [lazy tree], [tree give-back]: counted in (the caller holds the
     * frames, so no trim holds the node) and the pages made resident */
    bool in;
    int r = pa_enter(pa, A - 1, ci, &in);
    if (r == 1) r = pa_fill(pa, A - 1, ci);
    if (r == 0) r = pa_split_in(pa, A, idx, i, owner);
    pa_leave(pa, A - 1, ci, in);
    return r;
}

static int pa_split_in(dp_pa *pa, unsigned A, uint64_t idx, unsigned i, uint32_t owner) {
    uint64_t ci = idx * 16 + i;
    dp_a64 *cp = pa_node(pa, A - 1, ci), *pp = pa_node(pa, A, idx);
    uint64_t all = all_used(A - 1), cw = dp_load_relaxed(cp);
    for (unsigned spin = 0;; spin++) {
        if (w_phase(cw) == PH_IDLE) {
            /* acq_rel: claims the child as in [open]; the content rides along
             * so that recovery can tell a split from an open ([recovery]) */
            if (dp_cas_acq_rel(cp, &cw, w_mk(PH_OPENING, owner) | all)) break;
            continue;
        }
        if (spin >= 256) return -EBUSY;
        dp_cpu_relax();
        cw = dp_load_relaxed(cp);
    }
    DP_INJECT("palloc.split.claimed");
    uint64_t pw = dp_load_relaxed(pp);
    for (;;) {
        if (w_phase(pw) != PH_OPEN || ch_state(pw, i) != CH_FULL) {
            dp_store_release(cp, w_mk(PH_IDLE, 0)); /* release: pairs with pa_split's claim CAS */
            return -EINVAL;
        }
        /* acq_rel: as [open]'s link; FULL (2) -> PART (1) */
        if (dp_cas_acq_rel(pp, &pw, pw ^ (3ull << (2 * i)))) break;
    }
    DP_INJECT("palloc.split.linked");
    /* release: pairs with the acquire of the next CAS on the child (pa_free
     * of a piece, by us, or pa_try_node after that) */
    dp_store_release(cp, w_mk(PH_OPEN, 0) | all);
    return 0;
}

/* The lowest level above t whose node holding frame is OPEN (the root is). */
static unsigned lowest_open_above(dp_pa *pa, uint64_t frame, unsigned t) {
    unsigned root = pa->nlevels - 1, A = t + 1;
    while (A < root && w_phase(pa_peek(pa, A, frame >> node_shift(A))) != PH_OPEN)
        A++; /* relaxed: where to start; each step below validates by CAS */
    return A;
}

/* The aligned piece at pos (> 0) of a run growing towards end. */
static inline uint64_t piece_up(uint64_t pos, uint64_t end) {
    uint64_t s = pos & -pos;
    while (s > end - pos) s >>= 1;
    return s;
}

/* Make the level-t node holding frame OPEN, splitting the FULL children
 * above it (frames the caller holds) from the lowest open ancestor down. */
static int pa_split_down(dp_pa *pa, uint64_t frame, unsigned t, uint32_t owner) {
    for (unsigned A = lowest_open_above(pa, frame, t); A > t; A--) {
        uint64_t idx = frame >> node_shift(A);
        unsigned i = (unsigned)(frame >> node_shift(A - 1)) & 15;
        uint64_t cw = pa_peek(pa, A - 1, idx * 16 + i); /* relaxed: re-read by the CAS */
        if (w_phase(cw) == PH_OPEN) continue; /* already split (by us, earlier) */
        int r = pa_split(pa, A, idx, i, owner);
        if (r) return r;
    }
    return 0;
}

/* Free an aligned piece of 2^j frames of a block the caller holds, however
 * the tree describes it now: at its own level (one CAS), as part of a FULL
 * child above (split first: a trim only, owner != 0), or as finer pieces (a
 * split that a stopped trim left behind, or a grow: free the halves). A
 * free of what was kept never needs a split: the kept pieces shrink
 * towards the end, so a coarser FULL child would have held the whole of a
 * larger kept piece. */
static int pa_free_piece(dp_pa *pa, uint64_t frame, unsigned j, uint32_t owner) {
    unsigned t, rs;
    if (!pa_target(pa, j, &t, &rs)) return pa_free(pa, frame, j, false); /* (-EINVAL) */
    /* [lazy tree]: a node never made resident holds nothing at its own
     * level: not read, but split down to (which makes it resident) */
    uint64_t w = pa_peek(pa, t, frame >> node_shift(t)); /* relaxed: a hint */
    int r = w_phase(w) == PH_IDLE ? -EINVAL : pa_free(pa, frame, j, false);
    if (r == 0) return r;
    w = pa_peek(pa, t, frame >> node_shift(t)); /* relaxed: a hint */
    if (w_phase(w) == PH_IDLE) {
        if (!owner) return r;
        if ((r = pa_split_down(pa, frame, t, owner)) != 0) return r;
        return pa_free(pa, frame, j, false);
    }
    if (w_phase(w) != PH_OPEN || t == 0) return r; /* leaf bits have no finer form */
    /* Finer only if every child of the run is FULL or PART (none FREE). */
    unsigned pos = (unsigned)(frame >> child_shift(t)) & 15;
    for (unsigned k = 0; k < (1u << rs); k++)
        if (ch_state(w, pos + k) != CH_FULL && ch_state(w, pos + k) != CH_PART) return r;
    if ((r = pa_free_piece(pa, frame, j - 1, owner)) != 0) return r;
    return pa_free_piece(pa, frame + (1ull << (j - 1)), j - 1, owner);
}

uint64_t dp_pa_trim(dp_pa *pa, uint64_t frame, unsigned order, uint64_t keep, uint32_t owner) {
    uint64_t end = 1ull << order;
    if (!keep || keep >= end) return end;
    /* The tail [keep, end) as aligned pieces growing towards the end; give
     * them back from the end, so what is kept is always [0, end). */
    while (end > keep) {
        uint64_t s = end & -end;
        while (s > end - keep) s >>= 1;
        if (pa_free_piece(pa, frame + end - s, (unsigned)__builtin_ctzll(s), owner) != 0) break;
        end -= s;
    }
    return end;
}

int dp_pa_free_run(dp_pa *pa, uint64_t frame, unsigned order, uint64_t n) {
    uint64_t all = 1ull << order;
    if (order > DP_PA_MAX_ORDER || !n || n > all || (frame & (all - 1)) || frame >= pa->frames ||
        all > pa->frames - frame)
        return -EINVAL;
    /* [0, n) as aligned pieces shrinking towards its end (n == all: the
     * whole block, one CAS unless a trim or grow changed how it is held) */
    for (uint64_t pos = 0; pos < n;) {
        unsigned j = 63u - (unsigned)__builtin_clzll(n - pos);
        int r = pa_free_piece(pa, frame + pos, j, 0);
        if (r) return r;
        pos += 1ull << j;
    }
    return 0;
}

/* Take the aligned piece of 2^j frames at frame if it is free (a grow in
 * place): one CAS in its node when that is open; otherwise open the FREE
 * children down to it ([open]). -ENOMEM when any of it is held (or a node
 * on the way is in another owner's step). */
static int pa_take_piece(dp_pa *pa, uint64_t frame, unsigned j, uint32_t owner) {
    unsigned t, rs;
    if (!pa_target(pa, j, &t, &rs)) return -EINVAL;
    for (unsigned tries = 0; tries < 4; tries++) {
        uint64_t idx = frame >> node_shift(t);
        unsigned pos = (unsigned)(frame >> child_shift(t)) & (t == 0 ? 31u : 15u);
        dp_a64 *p = pa_node(pa, t, idx);
        uint64_t w = pa_peek(pa, t, idx); /* relaxed: validated by the CAS */
        if (w_phase(w) == PH_OPEN) {
            uint64_t mask = run_mask(t, pos, rs);
            uint32_t valid = t == 0 ? 0xffffffffu : present_mask(pa, t, idx);
            uint32_t want = t == 0 ? (uint32_t)mask : (uint32_t)mask & LO2;
            for (;;) {
                if (w_phase(w) != PH_OPEN) break;
                uint32_t c = (uint32_t)w;
                uint32_t fm = t == 0 ? ~c : ch_free(c) & valid;
                if ((fm & want) != want) {
                    uint32_t part = t == 0 ? 0 : ch_part(c) & want;
                    if (!part || tries == 3) return -ENOMEM;
                    /* children left open and empty (lazy coalescing, rule
                     * 2): close them ([close]), then look again */
                    bool stuck = false;
                    for (; part; part &= part - 1)
                        pa_close(pa, t - 1, idx * 16 + (unsigned)__builtin_ctz(part) / 2, owner, &stuck);
                    break;
                }
                /* acquire: as an allocation ([alloc and free]) */
                if (dp_cas_acquire(p, &w, w | run_used(t, mask))) return 0;
            }
            continue;
        }
        /* open the way down: from the lowest open ancestor, FREE children */
        for (unsigned A = lowest_open_above(pa, frame, t); A > t; A--) {
            uint64_t ai = frame >> node_shift(A);
            unsigned i = (unsigned)(frame >> node_shift(A - 1)) & 15;
            uint64_t aw = pa_peek(pa, A, ai);
            if (w_phase(aw) != PH_OPEN) break;
            unsigned st = ch_state(aw, i);
            if (st == CH_FULL || st == CH_ABSENT) return -ENOMEM;
            int o = st == CH_FREE ? pa_open(pa, A, ai, i, owner) : 1;
            if (o < 0) return o; /* [lazy tree]: its page could not be had */
            if (o != 1) break;
        }
    }
    return -ENOMEM;
}

int dp_pa_grow(dp_pa *pa, uint64_t frame, unsigned order, uint64_t from, uint64_t to, uint32_t owner) {
    uint64_t all = 1ull << order;
    if (order > DP_PA_MAX_ORDER || !from || from > to || to > all || (frame & (all - 1)) ||
        frame >= pa->frames || all > pa->frames - frame)
        return -EINVAL;
    /* [from, to) as aligned pieces growing from from */
    uint64_t pos = from;
    int r = 0;
    while (pos < to) {
        uint64_t s = piece_up(pos, to);
        if ((r = pa_take_piece(pa, frame + pos, (unsigned)__builtin_ctzll(s), owner)) != 0) break;
        pos += s;
    }
    if (pos == to) return 0;
    dp_pa_ungrow(pa, frame, order, from, pos); /* what was taken goes back */
    return r;
}

void dp_pa_ungrow(dp_pa *pa, uint64_t frame, unsigned order, uint64_t from, uint64_t to) {
    (void)order;
    /* the same pieces of [from, to) that dp_pa_grow took */
    for (uint64_t q = from, s; q < to; q += s) {
        s = piece_up(q, to);
        pa_free(pa, frame + q, (unsigned)__builtin_ctzll(s), false);
    }
}

int dp_pa_claim(dp_pa *pa, uint64_t frame, unsigned order, uint32_t owner) {
    uint64_t n = 1ull << order;
    if (order > DP_PA_MAX_ORDER || (frame & (n - 1)) || frame >= pa->frames || n > pa->frames - frame)
        return -EINVAL;
    return pa_take_piece(pa, frame, order, owner); /* [claim] */
}

/* Is everything under the OPEN node (L, idx), L >= 1, free? Children FREE,
 * or PART with an empty open node below (lazy coalescing). */
static bool pa_open_node_free(dp_pa *pa, unsigned L, uint64_t idx, uint64_t w) {
    uint32_t c = (uint32_t)w, valid = present_mask(pa, L, idx);
    if ((ch_free(c) & valid) == valid) return true;
    if (c & HI2 & (valid << 1)) return false; /* a FULL child */
    for (uint32_t m = ch_part(c) & valid; m; m &= m - 1) {
        uint64_t ci = idx * 16 + (unsigned)__builtin_ctz(m) / 2;
        uint64_t cw = dp_load_relaxed(pa_node(pa, L - 1, ci)); /* relaxed: a hint */
        if (w_phase(cw) != PH_OPEN) return false;
        if (L - 1 == 0 ? (uint32_t)cw != 0 : !pa_open_node_free(pa, L - 1, ci, cw)) return false;
    }
    return true;
}

bool dp_pa_granule_free(dp_pa *pa, uint64_t g) {
    if (pa->nlevels < 2 || g >= pa->count[1]) return false;
    /* relaxed loads throughout: a hint, dp_pa_claim validates by CAS */
    uint64_t w = pa_peek(pa, 1, g);
    if (w_phase(w) == PH_OPEN) return pa_open_node_free(pa, 1, g, w);
    if (w_phase(w) != PH_IDLE) return false; /* in an owner's step */
    /* IDLE: what the lowest open node above says of the subtree holding it */
    for (unsigned A = 2; A < pa->nlevels; A++) {
        uint64_t pw = dp_load_relaxed(pa_node(pa, A, g >> (4 * (A - 1))));
        unsigned st = ch_state(pw, (unsigned)(g >> (4 * (A - 2))) & 15);
        if (w_phase(pw) == PH_OPEN) return st == CH_FREE;
        if (w_phase(pw) != PH_IDLE) return false;
    }
    return false;
}

/* [resident first]: a free run of the order in warm memory, among the
 * 2 MiB nodes [from, to)? Blocks of 2 MiB and up: an aligned run of warm,
 * free 2 MiB nodes (dp_pa_granule_free: open and empty ones too) starting
 * there; smaller ones: a warm 2 MiB node that is free, or open with a run
 * of the order among its leaves (free ones, open empty ones, or inside an
 * open one for leaf sizes). A read-only scan of hint words and tree
 * (relaxed loads: hints; exact while nothing changes), made after a
 * refill on demand alone. */
bool dp_pa_warm_fit(dp_pa *pa, unsigned order, uint64_t from, uint64_t to) {
    unsigned t, rs;
    if (!pa->cold || pa->nlevels < 2 || !pa_target(pa, order, &t, &rs)) return false;
    uint64_t n = pa->count[1];
    if (to > n) to = n;
    if (t >= 2) {
        uint64_t k = 1ull << (order - node_shift(1)); /* 2 MiB nodes a block spans */
        for (uint64_t g0 = from / k * k; g0 < to && g0 + k <= n; g0 += k) {
            uint64_t g = g0;
            while (g < g0 + k && !(dp_load_relaxed(&pa->cold[g]) & DP_PA_COLD) && dp_pa_granule_free(pa, g)) g++;
            if (g == g0 + k) return true;
        }
        return false;
    }
    for (uint64_t g = from; g < to; g++) {
        if (dp_load_relaxed(&pa->cold[g]) & DP_PA_COLD) continue;
        uint64_t w = pa_peek(pa, 1, g);
        if (w_phase(w) != PH_OPEN) {
            if (dp_pa_granule_free(pa, g)) return true;
            continue;
        }
        uint32_t valid = present_mask(pa, 1, g), free = 0;
        for (unsigned i = 0; i < 16; i++) {
            if (!(valid >> (2 * i) & 1)) continue;
            unsigned st = ch_state(w, i);
            uint64_t lw = st == CH_PART ? dp_load_relaxed(pa_node(pa, 0, g * 16 + i)) : 0;
            bool open = st == CH_PART && w_phase(lw) == PH_OPEN;
            if (st == CH_FREE || (open && (uint32_t)lw == 0)) free |= 1u << (2 * i);
            else if (t == 0 && open && leaf_runs((uint32_t)lw, rs)) return true;
        }
        if (t == 0 ? free != 0 : child_runs(free, rs) != 0) return true;
    }
    return false;
}

unsigned dp_pa_recover(dp_pa *pa, bool (*is_dead)(uint32_t owner, void *arg), void *arg) {
    unsigned n = 0;
    for (unsigned L = 0; L + 1 < pa->nlevels; L++) {
        for (uint64_t idx = 0; idx < pa->count[L]; idx++) {
            if (L <= 1 && pa_untouched(pa, L ? idx : idx >> 4)) { /* [lazy tree]: all IDLE */
                if (L == 0) idx |= 15; /* (the granule's other leaves too) */
                continue;
            }
            dp_a64 *p = pa_node(pa, L, idx);
            uint64_t w = dp_load_acquire(p); /* acquire: pairs with the dead owner's claim CAS (pa_open, pa_close, pa_split) */
            unsigned ph = w_phase(w);
            if ((ph != PH_OPENING && ph != PH_CLOSING) || !is_dead(w_owner(w), arg)) continue;
            /* The caller holds the dead owner's liveness lock (ledger), so no
             * other recoverer works on this owner and nobody can take its
             * slot: the word stays in the dead owner's name until IDLE. */
            dp_a64 *pp = pa_node(pa, L + 1, idx >> 4);
            unsigned i = (unsigned)(idx & 15);
            uint64_t pw = dp_load_relaxed(pp);
            if (ph == PH_OPENING && (uint32_t)w != 0) {
                /* a split ([exact blocks]): its frames stay allocated; linked: finish it */
                if (w_phase(pw) == PH_OPEN && ch_state(pw, i) == CH_PART)
                    dp_store_release(p, w_mk(PH_OPEN, 0) | (uint32_t)w); /* release: as pa_split's last store */
                else
                    dp_store_release(p, w_mk(PH_IDLE, 0)); /* release: pairs with pa_open's claim CAS of the next owner */
                n++;
                continue;
            }
            while (ch_state(pw, i) == CH_PART &&
                   !dp_cas_acq_rel(pp, &pw, pw & ~(3ull << (2 * i))))
                ;
            dp_store_release(p, w_mk(PH_IDLE, 0)); /* release: pairs with pa_open's claim CAS */
            n++;
        }
    }
    return n;
}

unsigned dp_pa_max_order(const dp_pa *pa) { return 63u - (unsigned)__builtin_clzll(pa->frames); }
