/*
 * pa_word.h -- the page allocator's words, for palloc.c and pa_walk.c
 * only: a node word's fields (content, phase, owner, RESV), a child's two
 * bits in an inner node's content, and the runs of free frames or
 * children a word holds. palloc.c's design comment says what they mean.
 */
#ifndef DP_PA_WORD_H
#define DP_PA_WORD_H

#include <stdint.h>

#include "dp_palloc.h"

#define W_CONTENT 0xffffffffull
#define W_PHASE_SHIFT 32
#define W_OWNER_SHIFT 35
#define W_RESV DP_PA_RESV
#define LO2 0x55555555u
#define HI2 0xaaaaaaaau

/* IDLE is 0: a word never written is an idle node holding nothing, the
 * state of every word under a FREE parent (palloc.c [lazy tree]). The
 * others are a bit each, so that the hot paths ask "OPEN?" with one bit
 * test (W_OPEN), as they did when OPEN was 0; a word with two of them set
 * is damage, which every CAS still validates. */
enum { PH_IDLE = 0, PH_OPEN = 1, PH_OPENING = 2, PH_CLOSING = 4 };
#define W_OPEN ((uint64_t)PH_OPEN << W_PHASE_SHIFT)
enum { CH_FREE = 0, CH_PART = 1, CH_FULL = 2, CH_ABSENT = 3 };

static inline unsigned w_phase(uint64_t w) { return (unsigned)(w >> W_PHASE_SHIFT) & 7u; }
static inline uint32_t w_owner(uint64_t w) { return (uint32_t)(w >> W_OWNER_SHIFT) & DP_PA_OWNER_MAX; }
static inline uint64_t w_mk(unsigned phase, uint32_t owner) {
    return ((uint64_t)phase << W_PHASE_SHIFT) | ((uint64_t)owner << W_OWNER_SHIFT);
}
static inline unsigned ch_state(uint64_t w, unsigned i) { return (unsigned)(w >> (2 * i)) & 3u; }
static inline uint32_t ch_free(uint32_t c) { return ~(c | (c >> 1)) & LO2; }
static inline uint32_t ch_part(uint32_t c) { return c & ~(c >> 1) & LO2; }

/* log2 of the frames a node of level L covers, and of one of its children. */
static inline unsigned node_shift(unsigned L) { return 5u + 4u * L; }
static inline unsigned child_shift(unsigned L) { return L ? 5u + 4u * (L - 1) : 0u; }

#define pa_node dp_pa_word
#define PA_STRIDE DP_PA_STRIDE

static const uint32_t leaf_align[5] = {0xffffffffu, 0x55555555u, 0x11111111u, 0x01010101u,
                                       0x00010001u};
static const uint32_t inner_align[5] = {0x55555555u, 0x11111111u, 0x01010101u, 0x00010001u,
                                        0x00000001u};

/* Every aligned run of 2^rs zero bits in a leaf's content: a bit at the
 * start of each. Four conditional selects and no loop: with mixed orders a
 * loop of rs steps mispredicts where it ends, and an array of the five
 * masks costs the order-0 pair a load (docs/design.md, "Page allocator"). */
static inline uint32_t leaf_runs(uint32_t c, unsigned rs) {
    uint32_t m = ~c;
    m &= rs >= 1 ? m >> 1 : ~0u;
    m &= rs >= 2 ? m >> 2 : ~0u;
    m &= rs >= 3 ? m >> 4 : ~0u;
    m &= rs >= 4 ? m >> 8 : ~0u;
    return m & leaf_align[rs];
}

/* Every aligned run of 2^rs FREE children (freemask has bit 2i per free
 * child): bit 2i at the start of each. */
static inline uint32_t child_runs(uint32_t freemask, unsigned rs) {
    uint32_t m = freemask;
    for (unsigned s = 1; s < (1u << rs); s <<= 1) m &= m >> (2 * s);
    return m & inner_align[rs];
}

/* First aligned run of 2^rs zero bits in a leaf's content, or -1. */
static inline int leaf_find(uint32_t c, unsigned rs) {
    uint32_t m = leaf_runs(c, rs);
    return m ? __builtin_ctz(m) : -1;
}

/* First aligned run of 2^rs FREE children, or -1. */
static inline int run_find(uint32_t freemask, unsigned rs) {
    uint32_t m = child_runs(freemask, rs);
    return m ? __builtin_ctz(m) / 2 : -1;
}

/* The bits a run of 2^rs units at pos occupies, and their allocated value. */
static inline uint64_t run_mask(unsigned L, unsigned pos, unsigned rs) {
    if (L == 0) return ((1ull << (1u << rs)) - 1) << pos;
    return ((1ull << (2u << rs)) - 1) << (2 * pos);
}
static inline uint64_t run_used(unsigned L, uint64_t mask) { return L == 0 ? mask : (mask & HI2); }

/* palloc.c [lazy tree]: were the pages holding the words of 2 MiB node g
 * (its level-1 word and its 16 leaves) never made resident? Then each of
 * those words is 0 (IDLE), and reading one would bring its page in outside
 * any room claim. acquire: pairs with the release CAS in res_tables (or
 * the one in dp_res_mark_resident) that cleared the bit after the
 * populate: a word read after that is on a page that is there. */
static inline bool pa_untouched(const dp_pa *pa, uint64_t g) {
    return pa->cold && pa->nlevels > 2 && g < pa->count[1] && (dp_load_acquire(&pa->cold[g]) & DP_PA_NOTREE);
}

/* palloc.c [lazy tree]: the word of (L, idx) for a reader that holds nothing there
 * (a walk, a recovery, a trim looking for how a block is held): IDLE,
 * without a read, when its page was never made resident. */
static inline uint64_t pa_peek(const dp_pa *pa, unsigned L, uint64_t idx) {
    if (L <= 1 && pa_untouched(pa, L ? idx : idx >> 4)) return w_mk(PH_IDLE, 0);
    return dp_load_relaxed(pa_node((dp_pa *)pa, L, idx)); /* relaxed: as the caller's own load */
}

#endif /* DP_PA_WORD_H */
