/*
 * area.h -- what the area layer's files share (pool/area): the shared-memory
 * structs and their words, the process-local objects, the size classes
 * (their table is area.c's), then, file by file, the functions one defines
 * and the others call. What the hot path needs inline (the build has no
 * LTO: a helper called across files would be a call) and what names another
 * file's variables lives in the header of the file that defines it
 * (area_pointer.h, area_registry.h, area_cache.h, area_acquire.h), so that
 * no header takes a name from a file that includes it. The layers above see
 * only dp_area.h.
 *
 * Shared state, all offsets: an area's control block (ar_ctl, a pool
 * segment: area_life.c [control block]); its registry pages of span entries
 * (ar_span) and its cache record pages (ar_cache: area_registry.c,
 * area_cache.c); the pool-wide directory (area_registry.c [directory]); the
 * chunks of its spans, whose free ones carry a link and a free tag
 * (area_span.c [stacks], area_free.c [free tags]). Each field says who
 * writes it: [imm] immutable after init (or while live), [own] only its
 * owner, [atom] shared-atomic.
 */
#ifndef DP_AREA_INSIDE_H
#define DP_AREA_INSIDE_H

#include "dp_area.h"
#include <string.h>

/* ---- the shared format (every file) -------------------------------------- */

#define AR_MAGIC 0x31414552415044ull /* "DPAREA1" */
#define AR_VERSION 8u /* 4: 60 classes (cache records, span word); 5: the shared path;
                        6: spans per class from 64 KiB, cache records in pages;
                        7: 87 classes (8 B steps to 64 B, eight per doubling to 8 KiB),
                        the directory's class field 7 bits, exact spans;
                        8: fallback pointers carry their segment's check (in cache
                        records' lists, chunk links and free tags) */
#define AR_NCLS 87u
#define AR_CLS_MASK 127u /* the directory's class field: 7 bits */
#define AR_MIN_CHUNK 16u
#define AR_MIN_ALIGN 8u /* every chunk's alignment at least (the 24, 40, 56 B classes) */
#define AR_SMALL_MAX (1u << 20)
#ifndef AR_LARGE_FROM
#define AR_LARGE_FROM (256u << 10) /* larger sizes get exact blocks (area_large.c [large blocks]) */
#endif
/* mid sizes are above this, up to AR_LARGE_FROM (area_alloc.c [mid sizes]) */
#define AR_MID_FROM (4u << 10)
#define AR_SPAN_SHIFT 21u /* the largest span: 2 MiB */
#define AR_SPAN (1ull << AR_SPAN_SHIFT)
#define AR_DIR_SHIFT DP_DIR_SHIFT /* the directory's granule: a frame */
#define AR_DIR_GRAN (1ull << AR_DIR_SHIFT)
#define AR_SPAN_MIN (64u << 10) /* the smallest span */
#define AR_SPAN_MIN_CHUNKS 64u /* a span is the smallest power of two >= 64 KiB holding this many */
#define AR_NCACHES 256u
#define AR_RECS_PER_PAGE 7u /* cache records per record page */
#define AR_RECPAGE_ORDER 2u  /* a record page: a 16 KiB pool block */
#define AR_RECPAGE_BYTES ((uint64_t)DP_FRAME_SIZE << AR_RECPAGE_ORDER)
#define AR_RECPAGES ((AR_NCACHES + AR_RECS_PER_PAGE - 1) / AR_RECS_PER_PAGE)
#define AR_REGPAGES 1024u
#define AR_PER_PAGE 128u
#define AR_MAX_ENTRIES (AR_REGPAGES * AR_PER_PAGE)
#define AR_LARGE_CLS 127u /* the directory's and the info word's class of a large block */
#define AR_QUIESCE_NS 50000000ull /* how long a destroyer waits for operations (area_life.c [destroy]) */
extern dp_a64 dp_ar_quiesce_ns; /* test-only (DP_INJECTION): dp_area_test_quiesce_ns */

/* span entry state word: [gen:24][count:18][head:18][state:4]; head and
 * count reach 2 MiB / 16 B = 2^17 chunks (area_span.c [stacks]). ABA: gen
 * changes with every CAS of the word, and no CAS depends on a link read
 * from a chunk its maker does not hold (area_shared.c [take]) */
enum { SP_FREE = 0, SP_INIT = 1, SP_SPAN = 2, SP_LARGE = 3, SP_RETIRED = 4 };
#define SPW(gen, count, head, st) \
    (((uint64_t)(gen) << 40) | ((uint64_t)(count) << 22) | ((uint64_t)(head) << 4) | (st))
#define SPW_ST(w) ((unsigned)((w) & 0xf))
#define SPW_HEAD(w) ((uint32_t)(((w) >> 4) & 0x3ffff))
#define SPW_COUNT(w) ((uint32_t)(((w) >> 22) & 0x3ffff))
#define SPW_GEN(w) ((uint32_t)((w) >> 40))
/* INIT and RETIRED name their owner (slot + 1, bits 8-27); INIT also the
 * order of the block it reserved held bytes for (bits 28-33), and DOOMED
 * (bit 34): a destroyer asks the owner to give it back (area_registry.c
 * [entries]). */
#define SPW_OWNED(gen, slot, st) (((uint64_t)(gen) << 40) | ((uint64_t)((slot) + 1) << 8) | (st))
#define SPW_INIT(gen, slot, order) (SPW_OWNED(gen, slot, SP_INIT) | ((uint64_t)(order) << 28))
#define SPW_OWNER(w) ((uint32_t)(((w) >> 8) & 0xfffff) - 1)
#define SPW_INIT_ORDER(w) ((unsigned)(((w) >> 28) & 63))
#define SPW_DOOMED (1ull << 34)

/* directory word: [area id (ctl descriptor + 1):33][entry + 1:24][class:7];
 * a class of neither a span (< AR_NCLS) nor a large block is damage
 * (area_registry.c [directory]) */
#define DIRW(aid, e, cls) (((uint64_t)(aid) << 31) | ((uint64_t)((e) + 1) << 7) | (cls))
#define DIRW_AID(w) ((w) >> 31)
#define DIRW_ENTRY(w) ((uint64_t)(((w) >> 7) & 0xffffff) - 1)
#define DIRW_CLS(w) ((unsigned)((w) & AR_CLS_MASK))

/* fallback pointer: [1][tag:14][entry:17][check:32-n][offset:n] for an OS
 * segment of L <= 4 GiB bytes, n = ar_fb_bits(L) (area_pointer.c [fallback
 * pointers]); FB_OFF is the check and the offset together, the 32 bits
 * below the entry */
#define FB_BIT DSMPOOL_PTR_OS_BIT
#define FB_PTR(tag, e, off) (FB_BIT | ((uint64_t)(tag) << 49) | ((uint64_t)(e) << 32) | (off))
#define FB_TAG(p) ((uint32_t)(((p) >> 49) & 0x3fff))
#define FB_ENTRY(p) ((uint64_t)(((p) >> 32) & 0x1ffff))
#define FB_OFF(p) ((uint64_t)((p) & 0xffffffffull))
#define FB_MAX_SEG (1ull << 32) /* an area's OS segments are at most 4 GiB (acquire_bracketed) */

/* bump word: [entry + 1:26][next index:19][left:19] (area_cache.c) */
#define BUMP(e1, idx, left) (((uint64_t)(e1) << 38) | ((uint64_t)(idx) << 19) | (left))
#define BUMP_E1(b) ((uint32_t)((b) >> 38))
#define BUMP_IDX(b) ((uint32_t)(((b) >> 19) & 0x7ffff))
#define BUMP_LEFT(b) ((uint32_t)((b) & 0x7ffff))
#define BUMP_TAKE(b) ((b) + (1ull << 19) - 1) /* idx + 1, left - 1 */

typedef struct ar_span {
    dp_a64 state; /* [atom] SPW */
    dp_a64 block; /* [atom] pool block word, or DP_BLOCK_FALLBACK; 0 while INIT */
    dp_a64 seg;   /* [imm while live] OS segment handle of a fallback span; for an
                     exact pool block its frames (the entry's own record of what
                     the block word says, area_registry.c [exact records];
                     AR_SEG_GROWING while a grow changes both), 0 for any other
                     pool block */
    dp_a64 info;  /* [imm while live] class | bitmap frame offset (checked mode); a large
                     block: AR_LARGE_CLS | bytes asked for << 12 (area_large.c [large
                     blocks]; its owner rewrites it on an in-place realloc) */
} ar_span;
_Static_assert(sizeof(ar_span) * AR_PER_PAGE == DP_FRAME_SIZE, "a registry page is one frame");
#define AR_INFO_LARGE(asked) (((uint64_t)(asked) << 12) | AR_LARGE_CLS)
#define AR_SEG_GROWING (1ull << 63)
#define AR_INFO_ASKED(i) ((i) >> 12)

/* a thread's cache record (area_cache.c [records]) */
typedef struct ar_cache {
    dp_a64 owner;          /* [atom] 0 free; (slot + 1) | tid << 32 while held;
                              (slot + 1) | AR_RECOVERY while a recoverer drains it */
    dp_a64 seq;            /* [own] operation sequence, odd inside one (area_cache.c
                              [operations]) */
    dp_a64 asked;          /* [own] bytes asked for by this record's chunk allocations
                              (area_small.c [asked bytes]) */
    dp_a64 given;          /* [own] their usable bytes (class sizes) */
    dp_a64 pad0[4];
    dp_a64 head[AR_NCLS];  /* [own] first free chunk (dsmpool_ptr) */
    dp_a64 bump[AR_NCLS];  /* [own] BUMP word */
    dp_a64 count[AR_NCLS]; /* [own] free-list length (advisory) */
    dp_a64 pad1[3];
} ar_cache;
_Static_assert(sizeof(ar_cache) % 64 == 0, "cache records on their own lines");
#define AR_RECOVERY (0xffffffffull << 32)

/* an area's control block (area_life.c [control block]) */
typedef struct ar_ctl {
    uint64_t magic;      /* [imm] */
    uint32_t version;    /* [imm] */
    uint32_t ncaches;    /* [imm] */
    uint64_t flags;      /* [imm] DSMPOOL_AREA_* */
    uint32_t tag;        /* [imm] unique among live areas of the pool (0: none, no OS segments) */
    dp_a32 claim_pg;     /* [atom] relaxed hint: a registry page that had a free entry lately */
    uint64_t key;        /* [imm] random: free tags (area_free.c [free tags]), pointer checks */
    dp_a64 state;        /* [atom] 1 LIVE, 2 DESTROYED */
    dp_a64 limit;        /* [atom] relaxed: bytes, 0 = none */
    dp_a64 held;         /* [atom] bytes of spans and large blocks */
    dp_a64 lost;         /* [atom] deaths inside an operation not yet swept
                            (area_recover.c [lost chunks]) */
    dp_a64 shared;       /* [atom] relaxed: 1 once a thread used the shared path
                            (area_shared.c [shared path]) */
    dp_a64 sh_asked;     /* [atom] relaxed: bytes the shared path's chunk allocations asked for */
    dp_a64 sh_given;     /* [atom] relaxed: their class sizes (area_life.c [accounting]) */
    dp_a64 partial[AR_NCLS]; /* [atom] relaxed hint: spans with returned chunks */
    dp_a64 sh_hint[AR_NCLS]; /* [atom] relaxed hint: the entry the shared path last took from */
    dp_a64 sh_keep;      /* [atom] entry + 1 of the whole span kept for the shared path
                            (area_span.c [kept span]) */
    dp_a64 regpage[AR_REGPAGES]; /* [atom] registry page offsets, 0 = none */
    dp_a64 recpage[AR_RECPAGES]; /* [atom] cache record pages (AR_RECS_PER_PAGE records of
                                    the AR_NCACHES each), linked on first need; 0 = none */
} ar_ctl;
_Static_assert(sizeof(ar_cache) * AR_RECS_PER_PAGE <= AR_RECPAGE_BYTES, "a record page holds its records");

enum { AR_LIVE = 1, AR_DESTROYED = 2 };

/* ---- process-local ------------------------------------------------------- */

typedef struct ar_fb { /* this process's mapping of one fallback entry's OS segment */
    char *base;
    uint64_t len;          /* the segment's bytes, at most FB_MAX_SEG */
    dsmpool_handle seg;    /* which segment (entries are reused) */
    unsigned nb;           /* ar_fb_bits(len): the pointers' offset bits */
    uint32_t chk;          /* fb_check(seg, nb): their check */
    struct ar_fb *retired; /* replaced records: unmapped at detach, never under a reader */
} ar_fb;

typedef struct ar_tc { /* one per (thread, area) */
    _Atomic(struct dsmpool_area *) area; /* NULL once the area is detached (relaxed) */
    unsigned epoch;
    ar_cache *rec;
    uint64_t span_ptr[AR_NCLS]; /* base pointer of the bump span, per class */
    uint32_t span_e1[AR_NCLS];  /* its entry + 1: a bump word naming another is damaged */
    uint64_t scan[AR_NCLS];     /* where the partial-span search resumes */
    uint64_t trim_seen;         /* the last trim request this cache answered (area_cache.c
                                   [short of memory]) */
    uint32_t sh_ops;            /* shared-path operations (rec NULL): a record is tried again every 4096 */
    struct ar_tc *tnext;        /* this thread's list */
    struct ar_tc *anext, *aprev; /* the area's list (area->lock) */
} ar_tc;

struct dsmpool_area {
    uint64_t magic;
    dsmpool *pool;
    dsmpool_seg *seg;
    ar_ctl *ctl;
    dsmpool_handle handle;
    uint64_t aid;
    uint32_t tag;
    uint64_t key;            /* ctl->key, read once */
    dp_a64 *trimp;           /* &pool->hdr->trim: requests to give back (area_cache.c
                                [short of memory]) */
    char *base;
    uint64_t data_off, data_size;
    pthread_mutex_t lock;
    ar_tc *tcs;
    _Atomic(ar_fb *) *fb[AR_MAX_ENTRIES / 512]; /* two-level map: entry -> local mapping */
    ar_fb *fb_retired;
    struct dsmpool_area *reg_next;
};
#define AR_OBJ_MAGIC 0x616572416c636f6cull

/* area_free.c [free tags]: a freed chunk holds key ^ p at +8 */
static inline uint64_t ar_free_tag(const struct dsmpool_area *a, dsmpool_ptr p) { return a->key ^ p; }

/* ---- area.c: the classes ([classes] .. [damaged class]) ------------ */

typedef struct ar_class {
    uint32_t size, chunks; /* chunk bytes; chunks per span (they fill its len bytes) */
    uint64_t mul;
    uint32_t span;         /* the class's span block: a power of two, 64 KiB .. 2 MiB */
    uint32_t len;          /* the bytes a span holds: span, or less for an exact span (the
                              block's pages past len given back when it is taken) */
} ar_class;
#define AR_DIV_SHIFT 42u
extern const ar_class dp_ar_cls[AR_CLS_MASK + 1] __attribute__((visibility("hidden")));

static inline unsigned cls_of(size_t size) { /* size <= AR_SMALL_MAX */
    if (size <= 64) return size <= 16 ? 0 : (unsigned)((size - 1) >> 3) - 1u;
    if (size <= 128) return (unsigned)((size - 1) >> 4) + 3u;
    unsigned k = 63u - (unsigned)__builtin_clzll(size - 1); /* 2^k <= size - 1 < 2^(k+1), k >= 7 */
    if (k < 13) return 11u + 8u * (k - 7u) + (unsigned)(((size - 1) >> (k - 3)) & 7);
    return 59u + 4u * (k - 13u) + (unsigned)(((size - 1) >> (k - 2)) & 3);
}
/* (c & AR_CLS_MASK: a damaged class number reads a zero entry, never past the
 * table) */
static inline uint32_t cls_size(unsigned c) { return dp_ar_cls[c & AR_CLS_MASK].size; }
static inline uint32_t cls_chunks(unsigned c) { return dp_ar_cls[c & AR_CLS_MASK].chunks; }
/* a class's span bytes; 0 for the unused entries (no class, no span) */
static inline uint64_t cls_span(unsigned c) { return dp_ar_cls[c & AR_CLS_MASK].span; }
/* the bytes a span of class c holds (a multiple of 4 KiB, at most cls_span) */
static inline uint64_t cls_len(unsigned c) { return dp_ar_cls[c & AR_CLS_MASK].len; }
/* the frames an exact span keeps of its block (0: the whole block) */
static inline uint64_t cls_keep(unsigned c) {
    return cls_len(c) < cls_span(c) ? cls_len(c) / DP_FRAME_SIZE : 0;
}
static inline unsigned cls_span_order(unsigned c) {
    return (unsigned)__builtin_ctzll(cls_span(c) ? cls_span(c) : AR_SPAN_MIN) - DP_FRAME_SHIFT;
}
/* Where byte rel (from a 2 MiB boundary: data_off, or an OS segment's
 * start) lies in its span of class c: spans sit at multiples of their size. */
static inline uint64_t span_rel(unsigned c, uint64_t rel) { return rel & (cls_span(c) - 1); }
static inline uint32_t cls_batch(unsigned c) { uint32_t n = cls_chunks(c); return n < 64 ? n : 64; }
static inline uint64_t chunk_off(unsigned c, uint64_t idx) { return idx * cls_size(c); }
/* The chunk of class c that holds byte off (< its span bytes) of its span. */
static inline uint32_t chunk_idx(unsigned c, uint64_t off) {
    return (uint32_t)((off & (AR_SPAN - 1)) * dp_ar_cls[c & AR_CLS_MASK].mul >> AR_DIV_SHIFT);
}
/* Is off (from its span's start) the start of chunk *idx of class c?
 * (i < chunks keeps it inside the span: chunks * size <= span bytes) */
static inline bool chunk_at(unsigned c, uint64_t off, uint32_t *idx) {
    const ar_class *k = &dp_ar_cls[c & AR_CLS_MASK];
    uint64_t i = chunk_idx(c, off);
    *idx = (uint32_t)i;
    return off < AR_SPAN && i < k->chunks && i * k->size == off;
}
/* The checked-mode bitmap of a span of class c: 4 KiB << order, a bit per
 * chunk. */
static inline unsigned cls_bm_order(unsigned c) {
    uint32_t n = cls_chunks(c);
    return n > 2 * 8 * DP_FRAME_SIZE ? 2 : n > 8 * DP_FRAME_SIZE ? 1 : 0;
}

/* ---- area_registry.c: entries, the directory, record pages, bitmaps ------ */

/* The checked-mode bitmap frame an info word names (a large block's has none). */
static inline uint64_t ar_info_bitmap(uint64_t info) {
    return (info & 0xff) == AR_LARGE_CLS ? 0 : info & ~0xfffull;
}
/* The first registry entry at or after e whose page exists (AR_MAX_ENTRIES
 * if none): the walks skip a missing page whole. relaxed: a hint only,
 * dp_ar_entry's acquire load of the page link is what the walk relies on. */
static inline uint64_t ar_entry_next(ar_ctl *ctl, uint64_t e) {
    while (e < AR_MAX_ENTRIES && !dp_load_relaxed(&ctl->regpage[e / AR_PER_PAGE]))
        e = (e / AR_PER_PAGE + 1) * AR_PER_PAGE;
    return e;
}
uint64_t dp_ar_entry_block_bytes(const ar_span *sp, uint64_t blk);
ar_span *dp_ar_entry(dsmpool *p, ar_ctl *ctl, uint64_t e);
ar_cache *dp_ar_cache_rec(dsmpool *p, ar_ctl *ctl, uint32_t i);
void dp_ar_dir_set(dsmpool *p, uint64_t off, uint64_t bytes, uint64_t w);
int64_t dp_ar_entry_claim(struct dsmpool_area *a, unsigned order, uint32_t pages);
void dp_ar_entry_release(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp, uint64_t prev,
                         uint32_t slot);
bool dp_ar_entry_take_from(ar_span *sp, uint64_t *w, uint32_t slot);
void dp_ar_entry_abandon(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp, uint64_t mine);
bool dp_ar_checked_flip(dsmpool *p, ar_span *sp, uint32_t idx, bool set);
bool dp_ar_checked_test(dsmpool *p, ar_span *sp, uint32_t idx);

/* ---- area_pointer.c: fallback pointers, mapping records, locating -------- */

/* area_pointer.c [fallback pointers]: the offset bits of an OS segment of len
 * bytes, ceil(log2 len) and at least 16 -- a span's are its block's (cls_span:
 * 2^n is the power of two from 64 KiB at or above its len), so span_rel()
 * takes a chunk's offset out of a fallback pointer as out of a pool one. len
 * <= FB_MAX_SEG gives n <= 32. */
static inline unsigned ar_fb_bits(uint64_t len) {
    return len <= AR_SPAN_MIN ? 16u : 64u - (unsigned)__builtin_clzll(len - 1);
}
/* Where chunk/block pointer p lives: its entry, class and offset in the
 * span. Always-on checks: this area's, in range. */
typedef struct ar_loc {
    uint64_t e;
    ar_span *sp;
    unsigned cls;   /* AR_LARGE_CLS for large blocks */
    uint64_t off;   /* offset of p within its span / block */
    uint64_t span;  /* pointer to the span / block start */
} ar_loc;
dsmpool_ptr dp_ar_fb_base(const struct dsmpool_area *a, uint64_t e, dsmpool_handle h, uint64_t len);
dsmpool_ptr dp_ar_entry_base(struct dsmpool_area *a, uint64_t e, ar_span *sp, uint64_t blk, unsigned c);
ar_fb *dp_ar_fb_remember(struct dsmpool_area *a, uint64_t e, char *base, uint64_t len, dsmpool_handle seg);
ar_fb *dp_ar_fb_map(struct dsmpool_area *a, uint64_t e);
int dp_ar_locate(struct dsmpool_area *a, dsmpool_ptr p, ar_loc *l);
dsmpool_ptr dp_ar_fb_ptr_of(struct dsmpool_area *a, uintptr_t u);

/* ---- area_span.c: span stacks -------------------------------------------- */

void dp_ar_span_pushed(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp, unsigned cls,
                       uint32_t was, uint64_t nw, uint32_t retire_slot);
void dp_ar_span_push(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint64_t e, ar_span *sp, unsigned cls,
                     uint32_t idx, char *chunk, uint32_t retire_slot);
void dp_ar_chunk_return(struct dsmpool_area *a, dsmpool_ptr c, uint32_t retire_slot);
void dp_ar_chain_lost(struct dsmpool_area *a);
void dp_ar_chain_return(struct dsmpool_area *a, unsigned c, uint64_t e, ar_span *sp, dsmpool_ptr base,
                        uint32_t head, uint32_t count);
bool dp_ar_steal_class_holds(struct dsmpool_area *a, unsigned c, uint64_t e, ar_span *sp, uint64_t w);
void dp_ar_keep_release(struct dsmpool_area *a);

/* ---- area_cache.c: thread caches, records, operations -------------------- */

int dp_ar_usable(struct dsmpool_area *a);
uint64_t dp_ar_chunks_bound(const struct dsmpool_area *a, unsigned c);
void dp_ar_cache_answer(struct dsmpool_area *a, ar_tc *tc);
__attribute__((noinline)) void dp_ar_trim_answer(struct dsmpool_area *a, ar_tc *tc);
void dp_ar_cache_release(struct dsmpool_area *a, ar_cache *rec, uint32_t slot);
ar_cache *dp_ar_cache_claim(dsmpool *p, ar_ctl *ctl, uint64_t me);
bool dp_ar_tc_take_record(struct dsmpool_area *a, ar_tc *tc, bool reclaim);
ar_tc *dp_ar_tc_get_slow(struct dsmpool_area *a);
ar_cache *dp_ar_tc_find(struct dsmpool_area *a);
void dp_ar_drain_op(struct dsmpool_area *a, ar_cache *rec, unsigned c);
void dp_ar_trim_thread(dsmpool *p);
static inline uint64_t ar_op_begin(ar_cache *rec) {
    uint64_t s = (dp_load_relaxed(&rec->seq) + 1) | 1; /* relaxed: this thread is its only writer */
    dp_store_relaxed(&rec->seq, s); /* odd, and changed even if a dead owner left it odd */
    /* release fence: the operation's writes stay after the odd value (the
     * checker's seqlock); both fences keep the compiler from moving the
     * state load above the store, and the destroyer's membarrier does the
     * same for the CPU (area_life.c [destroy]) */
    dp_fence_release();
    dp_signal_fence();
    return s;
}
/* s: what ar_op_begin returned */
static inline void ar_op_end(ar_cache *rec, uint64_t s) {
    /* release: pairs with the acquire loads of caches_quiesce (the destroyer)
     * and quiet_open_ctl (the checker) */
    dp_store_release(&rec->seq, s + 1);
}
static inline bool ar_live(const struct dsmpool_area *a) {
    /* relaxed: ordered by the operation's fences (area_cache.c [operations])
     * and by membarrier on the destroyer's side (area_life.c [destroy]) */
    return dp_load_relaxed(&a->ctl->state) == AR_LIVE;
}

/* ---- area_acquire.c: fresh spans and blocks ------------------------------ */

int dp_ar_held_reserve(ar_ctl *ctl, uint64_t bytes);
/* What dp_ar_acquire is asked for: a span of a class, or a large block. */
typedef struct ar_want {
    unsigned cls;   /* the span's class, or AR_LARGE_CLS */
    unsigned order; /* a block of 2^order frames */
    uint64_t keep;  /* the frames an exact block keeps (area_acquire.c [exact blocks]); 0: all */
    unsigned place; /* DSMPOOL_SEG_INTERLEAVE or 0: where the pool takes it */
    uint64_t asked; /* a large block's bytes asked for (its info word) */
    bool chain;     /* a span for the shared path (area_shared.c) */
    bool mid;       /* a mid-size block (area_alloc.c [mid sizes]) */
} ar_want;
int dp_ar_acquire(struct dsmpool_area *a, ar_tc *tc, const ar_want *w, uint64_t *entry, dsmpool_ptr *base);

/* ---- area_free.c: freeing ------------------------------------------------ */

int dp_ar_free_op(struct dsmpool_area *area, ar_tc *tc, dsmpool_ptr p);
int dp_ar_free_bracketed(struct dsmpool_area *area, ar_tc *tc, dsmpool_ptr p);
int dp_ar_free_undo(struct dsmpool_area *a, ar_tc *tc, dsmpool_ptr p);

/* ---- area_small.c: the cached small path --------------------------------- */

/* area_small.c [asked bytes]: what a chunk allocation asked for, on this
 * thread's record. */
static inline void ar_count_asked(ar_cache *rec, uint64_t asked, unsigned c) {
    /* relaxed: owner-only counters (area_cache.c [one writer]); stats reads
     * them approximately */
    dp_store_relaxed(&rec->asked, dp_load_relaxed(&rec->asked) + asked);
    dp_store_relaxed(&rec->given, dp_load_relaxed(&rec->given) + cls_size(c));
}
int dp_ar_chunk_hand_out(struct dsmpool_area *a, ar_tc *tc, unsigned c, dsmpool_ptr h, char *m,
                         size_t size, unsigned flags);
int dp_ar_alloc_small_op(struct dsmpool_area *area, ar_tc *tc, size_t size, size_t asked, unsigned flags,
                         bool held_only, dsmpool_ptr *out);

/* ---- area_shared.c: the shared path -------------------------------------- */

int dp_ar_alloc_small_bracketed(struct dsmpool_area *a, ar_tc *tc, size_t size, size_t asked,
                                unsigned flags, bool held_only, dsmpool_ptr *out);
void dp_ar_shared_done(struct dsmpool_area *a, ar_tc *tc);
void dp_ar_shared_trim(struct dsmpool_area *a, ar_tc *tc);

/* ---- area_large.c: large blocks, sizes and addresses --------------------- */

int dp_ar_alloc_large_op(struct dsmpool_area *a, ar_tc *tc, size_t size, size_t asked, unsigned flags,
                         bool mid, dsmpool_ptr *out);
bool dp_ar_large_grow(struct dsmpool_area *a, ar_loc *l, size_t size);
uint64_t dp_ar_live_alloc(struct dsmpool_area *a, dsmpool_ptr p, dsmpool_ptr *start, ar_loc *l);
int dp_ar_query_ok(struct dsmpool_area *a);

/* ---- area_life.c: lifetime ----------------------------------------------- */

ar_ctl *dp_ar_ctl_of(dsmpool *p, uint64_t idx);
void dp_ar_fill(struct dsmpool_area *a, dsmpool *pool, ar_ctl *ctl, uint64_t aid);
void dp_ar_free_fb(struct dsmpool_area *a);

/* ---- area_verify.c: verification and inspection -------------------------- */

typedef struct ar_vctx {
    struct dsmpool_area *a;
    uint64_t **bits;  /* per entry: a bit per chunk, allocated when first needed */
    uint64_t *used;   /* entries with bits, to clear after this area */
    size_t nused;
    char *why;
    size_t n;
    int err;
} ar_vctx;
static inline bool ar_vmarked(const ar_vctx *v, uint64_t e, uint32_t idx) {
    return v->bits[e] && (v->bits[e][idx / 64] >> (idx % 64) & 1);
}
void dp_ar_verify_area(ar_vctx *v);
bool dp_ar_scratch_ready(dp_area_scratch *sc);
void dp_ar_vclear(ar_vctx *v);

/* ---- area_recover.c: recovery and the lost sweep ------------------------- */

typedef struct ar_lost_ref {
    uint64_t e;
    uint32_t idx; /* UINT32_MAX: the span is whole but was not retired */
    unsigned cls;
} ar_lost_ref;

typedef struct ar_lost_list {
    ar_lost_ref *v;
    size_t n, cap;
} ar_lost_list;
int dp_ar_walk_unheld(ar_vctx *v, ar_lost_list *whole, bool (*fn)(void *, uint64_t, unsigned, dsmpool_ptr,
                      uint32_t, bool), void *arg);


#endif /* DP_AREA_INSIDE_H */
