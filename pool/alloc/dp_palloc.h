/*
 * dp_palloc.h -- the lock-free page allocator of one sub-pool (see palloc.c
 * for the algorithm). Usable on its own: give it a zeroed, 64-byte aligned
 * piece of memory for its tree and a frame count; tests do exactly that.
 *
 * Which operations may run concurrently with which (all are lock-free):
 *
 *                 alloc   free   recover   walk/check
 *   alloc          yes     yes     yes      yes (approximate)
 *   free           yes     yes     yes      yes (approximate)
 *   recover        yes     yes     yes      yes (approximate)
 *   walk/check: exact only when nothing else runs.
 */
#ifndef DP_PALLOC_H
#define DP_PALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "dp_atomic.h"

#define DP_FRAME_SHIFT 12u                 /* 4 KiB frames */
#define DP_FRAME_SIZE (1u << DP_FRAME_SHIFT)
#define DP_HUGE_SHIFT 21u                  /* 2 MiB: the sub-pool granule */
#define DP_HUGE_FRAMES (1u << (DP_HUGE_SHIFT - DP_FRAME_SHIFT))
#define DP_PA_MAX_LEVELS 10u
#define DP_PA_MAX_FRAMES (1ull << 36)      /* 256 TiB per sub-pool */
#define DP_PA_MAX_ORDER 36u
#define DP_PA_OWNER_MAX ((1u << 20) - 1)   /* owner ids are 1..OWNER_MAX */

/* Where a sub-pool's allocator keeps its state: all region offsets, written
 * once by the creator, immutable after init, validated on attach. */
typedef struct dp_pa_geom {
    uint64_t frames;                        /* multiple of DP_HUGE_FRAMES */
    uint32_t nlevels;                       /* 2 .. DP_PA_MAX_LEVELS; root is nlevels-1 */
    uint32_t nhints;                        /* per-CPU hint lines */
    uint64_t level_off[DP_PA_MAX_LEVELS];   /* region offset of each level's words */
    uint64_t level_count[DP_PA_MAX_LEVELS]; /* words per level */
    uint64_t hint_off;                      /* region offset of the hint lines */
} dp_pa_geom;

/* A process's view of one sub-pool allocator (process-local). */
typedef struct dp_pa {
    uint64_t frames;
    uint32_t nlevels;
    uint32_t nhints;
    dp_a64 *level[DP_PA_MAX_LEVELS];
    uint64_t count[DP_PA_MAX_LEVELS];
    struct dp_pa_hint *hints;
    const dp_a64 *cold;  /* per 2 MiB node (level 1), a word whose DP_PA_COLD bit says "cold":
                            palloc.c [resident first]; NULL: no hint */
    dp_a64 *ncold;       /* how many are cold (a hint: 0 turns the preference off); never
                            NULL: a word that stays 0 where there is no hint or no level 2 */
    int (*tables)(void *ctx, struct dp_pa *pa, uint64_t g, int op); /* palloc.c [lazy tree]; NULL: none */
    void *tables_ctx;
} dp_pa;

/* The cold bit of a 2 MiB node's hint word (palloc.c [resident first]): its
 * memory is not resident, and an allocation that takes it pays for making
 * it so. Set and cleared by the owner of the words (the ledger's residency
 * table), never by the allocator, which only reads them. */
#define DP_PA_COLD 1ull
/* Give a view its cold hints: words[i] for the i-th 2 MiB node of the
 * sub-pool, and the count of cold ones. Process-local; no frame changes. */
void dp_pa_set_cold(dp_pa *pa, const dp_a64 *words, dp_a64 *count);

/* The tree bit of a 2 MiB node's hint word (palloc.c [lazy tree]): the
 * pages holding its words (its level-1 word and its 16 leaves) are not
 * resident, or hold only IDLE words, so they all read 0 (IDLE) without
 * being read. Set by the creator, on memory known to be zero, and by the
 * owner of the words while it holds the node's memory and gives its page
 * of leaves back (palloc.c [tree give-back]); cleared by the owner once
 * the pages are there (the hook below, or the refill of the node's
 * memory). */
#define DP_PA_NOTREE 4ull
/* palloc.c [lazy tree], [tree give-back]: the hook of the words' owner, for
 * 2 MiB node g (process-local, like dp_pa_set_cold), called around every
 * open and split of a word of its two lowest levels:
 *   DP_PA_TABLES_ENTER  count the caller in on the node's memory (no trim
 *                       gives its tree pages back while one is in): 0, 1
 *                       (in, and the pages are not there: the bit), or a
 *                       negative errno with a message (not in);
 *   DP_PA_TABLES_FILL   (in, the bit seen set) make the pages
 *                       (dp_pa_tree_range) resident under the caller's room
 *                       rules and clear the bit: 0, or -ENOMEM when they
 *                       cannot be had (the step then fails as for a full
 *                       sub-pool, with -ENOMEM);
 *   DP_PA_TABLES_LEAVE  count the caller out. */
enum { DP_PA_TABLES_ENTER, DP_PA_TABLES_FILL, DP_PA_TABLES_LEAVE };
typedef int (*dp_pa_tables_fn)(void *ctx, struct dp_pa *pa, uint64_t g, int op);
void dp_pa_set_tables(dp_pa *pa, dp_pa_tables_fn fn, void *ctx);
/* The tree's bytes for 2 MiB nodes [g, g + n) of the sub-pool laid out as
 * geo: its leaves' and its level-1 words', as region offsets rounded out to
 * pages of `page` ([off[L], off[L] + len[L])); len 0 where the tree has no
 * lazy levels (two levels or fewer). */
void dp_pa_tree_range(const dp_pa_geom *geo, uint64_t g, uint64_t n, uint64_t page, uint64_t off[2],
                      uint64_t len[2]);
/* palloc.c [lazy tree], [tree give-back]: the k-th whole page (of `page`
 * bytes) of level L (0: leaves, 1: the 2 MiB nodes' words) that holds only
 * words of 2 MiB nodes [g, g + n) at that level: its region offset *off and
 * the nodes whose words it holds, [*pg, *pg + *pn); false past the last
 * such page (a page shared with another level or another node is none). */
bool dp_pa_tree_page(const dp_pa_geom *geo, unsigned L, uint64_t g, uint64_t n, uint64_t page, uint64_t k,
                     uint64_t *off, uint64_t *pg, uint64_t *pn);
static inline bool dp_pa_leaf_page(const dp_pa_geom *geo, uint64_t g, uint64_t n, uint64_t page, uint64_t k,
                                   uint64_t *off, uint64_t *pg, uint64_t *pn) {
    return dp_pa_tree_page(geo, 0, g, n, page, k, off, pg, pn);
}
/* The same, for the one page of level L holding node g's words: false when
 * that page is shared with another level (or g lies outside). */
bool dp_pa_tree_page_of(const dp_pa_geom *geo, unsigned L, uint64_t g, uint64_t page, uint64_t *off, uint64_t *pg,
                        uint64_t *pn);
/* [tree give-back]: every CPU's hint naming a leaf of 2 MiB nodes [g, g + n),
 * or one of those nodes, forgotten, so that no allocation reads a page
 * given back (a thread that read one before may still: one page brought
 * back, outside any room). */
void dp_pa_hints_forget(dp_pa *pa, uint64_t g, uint64_t n);

/* A word's RESV bit (palloc.c [reservation]: some CPU's current node; advisory). */
#define DP_PA_RESV (1ull << 55)

/* The word of node idx at level L. One word per cache line: CPUs that
 * reserve neighbouring nodes must not fight over a line (false sharing cost
 * 4x in the 2-thread benchmark). */
#define DP_PA_STRIDE 8u
static inline dp_a64 *dp_pa_word(dp_pa *pa, unsigned L, uint64_t idx) {
    return &pa->level[L][idx * DP_PA_STRIDE];
}

/* Lay out a sub-pool's tree of frames frames at *cursor (a region offset,
 * advanced past what is used). Returns 0 or -EINVAL. */
int dp_pa_layout(uint64_t frames, uint32_t nhints, uint64_t *cursor, dp_pa_geom *g);

/* Build a view from a geometry; every offset and count is checked against
 * region_size and against what dp_pa_layout would compute: -EPROTO if not. */
int dp_pa_view(dp_pa *pa, char *base, uint64_t region_size, const dp_pa_geom *g);

/* Write the initial state: everything free. Only the creator, before anyone
 * else can see the region. */
void dp_pa_format(dp_pa *pa);
/* The same on memory known to be zero (a fresh object): writes only the
 * words that are not 0, the last node of each level, so that the pages of
 * the rest stay untouched (palloc.c [lazy tree]). */
void dp_pa_format_fresh(dp_pa *pa);

/* Allocate a naturally aligned block of 2^order frames; *frame is its first
 * frame, always inside the sub-pool (a damaged word that offers frames past
 * the end is never followed). owner (1..DP_PA_OWNER_MAX) names the caller's
 * process slot in the rare multi-step operations, so that recovery can
 * finish them if it dies. cpu picks the per-CPU reservation. Returns 0,
 * -ENOMEM (no such block free), -EBUSY (none found, but nodes in another
 * owner's open/close step were in the way: finish the steps of dead owners
 * and try again), -EINVAL (order larger than the sub-pool can ever hold) or
 * -EUCLEAN (the geometry is damaged). */
int dp_pa_alloc(dp_pa *pa, unsigned order, uint32_t owner, unsigned cpu, uint64_t *frame);

/* Free a block; order must be the one it was allocated with. A block of
 * order 0..4 freed into a leaf with no RESV bit is remembered by the
 * calling thread, which takes it back first (palloc.c [take-back]). -EINVAL when
 * the frames are not allocated at that level (a double free, or frames that
 * were never handed out). It cannot tell one block from adjacent smaller
 * blocks of the same span: callers keep the order (segments and areas do). */
int dp_pa_free(dp_pa *pa, uint64_t frame, unsigned order);
/* palloc.c [reservation]: after a free of a block of order <= 4, make its leaf this CPU's
 * reservation for that order, so that the next allocation of the order
 * finds the run just freed with one CAS instead of searching the tree.
 * A hint only: never fails, changes no frame's state. */
void dp_pa_hint_freed(dp_pa *pa, uint64_t frame, unsigned order, unsigned cpu);

/* palloc.c [take-back]: how many runs per run size (orders 0..4) a thread
 * remembers having freed as whole blocks into leaves with no RESV bit, to
 * take them back before its CPU's reservation (thread-private; a power of
 * two). With 8,
 * random orders 0..3 over 64 blocks searched the tree for 0.8% of order-3
 * allocations; with 16, 0.04% (12% before the take-back). */
#define DP_PA_BACK 16u

/* Give back the tail of a block of 2^order frames at frame that the caller
 * was just given: keep its first keep frames (palloc.c [exact blocks]: FULL children on the
 * way are split, in owner's name). Returns the frames kept: keep, or more
 * when a node on the way was in another owner's step (then the block keeps
 * [0, returned); a piece given back is never taken back). */
uint64_t dp_pa_trim(dp_pa *pa, uint64_t frame, unsigned order, uint64_t keep, uint32_t owner);

/* Free the first n frames of a block of 2^order frames at frame (what
 * dp_pa_trim kept and dp_pa_grow added), piece by piece: each at its own
 * level, or as halves where a split or grow described it finer; never by
 * splitting (a piece inside a coarser FULL child is not the caller's:
 * -EINVAL). */
int dp_pa_free_run(dp_pa *pa, uint64_t frame, unsigned order, uint64_t n);

/* Grow such a block in place: take frames [from, to) of it back if they
 * are all free (the pieces are claimed one by one; on failure the ones
 * taken go back). 0, or -ENOMEM when some of them are held. */
int dp_pa_grow(dp_pa *pa, uint64_t frame, unsigned order, uint64_t from, uint64_t to, uint32_t owner);
/* Give back frames [from, to) that a dp_pa_grow of [from, to) took. */
void dp_pa_ungrow(dp_pa *pa, uint64_t frame, unsigned order, uint64_t from, uint64_t to);

/* Take exactly the aligned block of 2^order frames at frame if all of it is
 * free (one CAS in its node, or the opens on the way down: palloc.c
 * [claim]); it is then held as if dp_pa_alloc had returned it (dp_pa_free
 * frees it). 0, -ENOMEM (some of it is held, or a node on the way is in
 * another owner's step), -EINVAL (not an aligned block of this sub-pool). */
int dp_pa_claim(dp_pa *pa, uint64_t frame, unsigned order, uint32_t owner);

/* Is the 2 MiB node g (frames g*512 ..) wholly free now? A hint for whom to
 * claim (palloc.c [claim]): exact only when nothing runs; the claim decides. */
bool dp_pa_granule_free(dp_pa *pa, uint64_t g);

/* [resident first]: is a run of the order free in warm memory now (2 MiB
 * nodes without the cold bit), among the 2 MiB nodes [from, to)? A
 * read-only scan, exact only while nothing runs: for counting the refills
 * on demand that warm memory would have spared
 * (dsmpool_stats.refills_while_warm_fit). */
bool dp_pa_warm_fit(dp_pa *pa, unsigned order, uint64_t from, uint64_t to);

/* Finish the multi-step operations of owners that is_dead() says are dead.
 * is_dead must answer true only for an owner that cannot come back and whose
 * id nobody else can take meanwhile (the ledger holds the owner's liveness
 * lock while this runs). Returns how many steps were finished. */
unsigned dp_pa_recover(dp_pa *pa, bool (*is_dead)(uint32_t owner, void *arg), void *arg);

/* Close every node that is entirely free so that large blocks can form. */
void dp_pa_reclaim(dp_pa *pa, uint32_t owner);

typedef struct dp_pa_walk {
    uint64_t free_frames;
    uint64_t used_frames;
    int largest_free_order;   /* -1 when nothing is free */
    uint64_t busy;            /* nodes in an open/close step of a live owner */
    uint64_t orphaned;        /* nodes in such a step whose owner is not live */
    uint64_t bad;             /* words that break an invariant */
    char why[160];            /* the first invariant broken, for humans */
} dp_pa_walk;

/* Walk the whole tree. If used_map is not NULL, set bit f for every
 * allocated frame f (the map has frames bits). Exact only when quiet. */
void dp_pa_walk_tree(dp_pa *pa, dp_pa_walk *out, uint64_t *used_map,
                     bool (*is_live)(uint32_t owner, void *arg), void *arg);

/* The free and used frames and the largest free order (and what is bad
 * among the words it reads), from a walk down the PART nodes only: its cost
 * follows the tree's used part, not its size. Steps in flight are not told
 * apart by their owners' lives (no is_live: every one counts as orphaned),
 * and I1's other way (no OPEN word off that path) is dp_pa_walk_tree's. */
void dp_pa_walk_count(dp_pa *pa, dp_pa_walk *out);

/* The largest order a block of this sub-pool can have. */
unsigned dp_pa_max_order(const dp_pa *pa);

#endif /* DP_PALLOC_H */
