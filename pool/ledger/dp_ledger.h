/*
 * dp_ledger.h -- the process ledger: fork detection, slots, the liveness
 * oracle, attachment records, brackets, quiet windows, and pool blocks
 * handed out in a process's name (proc.c, live.c), and the residency of the
 * data (resident.c).
 *
 * Layer: ledger (pool/ledger), above the region, the allocator, NUMA and
 * the OS. What it must hear from above (reclaim, adopt, join, fork resets)
 * it gets through the hooks registered here (docs/style.md, "Layers").
 */
#ifndef DP_LEDGER_H
#define DP_LEDGER_H

#include "dp_region.h"
#include "fork.h" /* fork detection, fork handlers, the lock-rank table, the registry */

/* Hooks: how a lower layer reaches what a higher one does (docs/style.md, "Layers"). */
void dp_ledger_set_reclaim(int (*fn)(struct dsmpool *pool)); /* recovery layer */
void dp_ledger_set_adopt(int (*fn)(struct dsmpool *pool));   /* segment layer; run top first */
/* life layer: a fork()ed child joins (life.c J3..J6) before it claims its
 * slot, and is joined (J8) after; leave undoes a join whose adoption failed */
void dp_ledger_set_join(int (*join)(struct dsmpool *pool), void (*joined)(struct dsmpool *pool),
                        void (*leave)(struct dsmpool *pool));
int dp_reclaim(struct dsmpool *pool); /* recover dead processes now; returns slots recovered */

int dp_self(struct dsmpool *pool);    /* make sure this process holds a slot */
int dp_slot_claim(struct dsmpool *pool);
void dp_slot_release(struct dsmpool *pool);
static inline uint32_t dp_owner(const struct dsmpool *pool) { return pool->slot + 1; }

/* The liveness oracle (live.c). */
int dp_live_created(struct dsmpool *pool);  /* the creator opens/creates the lock */
int dp_live_attached(struct dsmpool *pool); /* an attacher gets a description of its own */
int dp_live_child(struct dsmpool *pool);    /* a fork()ed child: the same, drop the parent's */
void dp_live_close(struct dsmpool *pool);
bool dp_live_guarded(const struct dsmpool *pool);
int dp_live_take(struct dsmpool *pool, uint64_t lock);  /* 0, -EAGAIN (held elsewhere) */
void dp_live_give(struct dsmpool *pool, uint64_t lock);
int dp_live_held(struct dsmpool *pool, uint64_t lock);  /* 1 held elsewhere, 0 free */
void dp_live_destroy(struct dsmpool *pool); /* remove the SysV semaphore set */
/* Presence and LIFE (live.c [presence and life]) on a lock file description or set: the
 * pool's own (&pool->live), or one a sweeper opened for a region it found
 * (by path: a file; by key: System V). Waits poll for at most ms. */
int dp_live_of_path(const char *path, dp_live *l);
int dp_live_of_key(int32_t key, dp_live *l);
void dp_live_drop(dp_live *l); /* a sweeper's: LIFE let go, description closed */
int dp_live_life_share(dp_live *l, unsigned ms); /* 0, -EAGAIN (held exclusive for ms) */
void dp_live_life_unshare(dp_live *l);
int dp_live_life_excl(dp_live *l, unsigned ms);  /* 0, -EAGAIN (held for ms) */
void dp_live_life_release(dp_live *l);
int dp_live_present(dp_live *l);
void dp_live_absent(dp_live *l);
int dp_live_anyone_present(dp_live *l); /* by one that holds none: 1 yes (or cannot tell), 0 nobody */
int dp_live_life_held(dp_live *l);      /* 1 shared or exclusive by anyone (or cannot tell) */

/* Is slot's process alive? For judging only: true when it cannot be told
 * (unguarded slots, a process without a lock of its own), false for FREE. */
bool dp_slot_alive(struct dsmpool *pool, uint32_t slot);

/* Take a dead slot's liveness lock for recovery (false: alive or free), and
 * give it back. */
bool dp_slot_take_dead(struct dsmpool *pool, uint32_t slot);
void dp_slot_give_dead(struct dsmpool *pool, uint32_t slot);
int dp_ledger_open(struct dsmpool *pool);  /* process-local ledger state of a new attachment */
void dp_ledger_close(struct dsmpool *pool);

dp_a64 *dp_rec_add(struct dsmpool *pool, uint64_t rec);
/* The frame *link names, or, if none, a zeroed frame from the pool linked
 * there by CAS (a racing linker's wins); 0 when the pool has no frame. */
uint64_t dp_frame_link(struct dsmpool *pool, dp_a64 *link);
/* The same for a zeroed block of 2^order frames (its user frees it as such). */
uint64_t dp_block_link(struct dsmpool *pool, dp_a64 *link, unsigned order);
void dp_rec_clear(dp_a64 *rec);
void dp_slot_clear(struct dsmpool *pool, uint32_t slot, bool bracket); /* records and their blocks */
void dp_slot_records(struct dsmpool *pool, uint32_t slot,
                     void (*fn)(struct dsmpool *, dp_a64 *, void *), void *arg);

/* Brackets (proc.c [brackets]): every change of what the pool's structures say
 * is inside one, or done by a RECOVERING recoverer, or inside an area cache
 * operation (area_cache.c [operations]); the checker and the leak sweep rely on it. */
void dp_bracket_open(struct dsmpool *pool);
void dp_bracket_close(struct dsmpool *pool);
bool dp_brackets_quiesce(struct dsmpool *pool, uint64_t deadline_ns);

/* A quiet window (proc.c [quiet windows]): a snapshot of every slot's state and
 * bracket counters; open says -EBUSY when a live process is inside a
 * bracket or a recovery runs, -EAGAIN when a dead process awaits recovery
 * or a leak sweep is due; holds says whether nothing moved since. */
typedef struct dp_quiet {
    uint64_t *w; /* 3 words per slot */
    uint32_t n;
    uint32_t self; /* our slot, or UINT32_MAX: its brackets are ours */
    uint64_t sweep; /* sweep_needed when it opened */
} dp_quiet;
int dp_quiet_open(struct dsmpool *pool, dp_quiet *q, bool sweeping); /* sweeping: the sweep's own */
bool dp_quiet_holds(struct dsmpool *pool, const dp_quiet *q);
void dp_quiet_close(dp_quiet *q);

/* Pool blocks: placement over the sub-pools (proc.c [pool blocks]). A block word is
 * DP_BLOCK_MK(region offset, order); every block handed out is inside the
 * data. On -ENOMEM after a search blocked by open/close steps, the steps of
 * dead owners are finished first and the search runs again. */
int dp_pool_alloc(struct dsmpool *pool, unsigned order, uint64_t *block); /* local, then nearest */
int dp_pool_alloc_placed(struct dsmpool *pool, unsigned order, unsigned flags, uint64_t *block);
/* The same for a block whose tail goes back at once (proc.c [exact blocks]):
 * only the keep frames it holds are made resident (resident.c [refill on
 * demand]), not the power of two. Returns the trimmed word in *block. */
int dp_pool_alloc_exact(struct dsmpool *pool, unsigned order, unsigned flags, uint64_t keep, uint64_t *block);
/* Take exactly the free aligned block of 2^order frames at frame of
 * sub-pool sub (palloc.c [claim]), inside the caller's bracket; it is not
 * made resident. 0, -ENOMEM (some of it is held), -EINVAL. */
int dp_pool_claim(struct dsmpool *pool, uint32_t sub, uint64_t frame, unsigned order, uint64_t *block);
/* Is 2 MiB granule g (within sub-pool sub) wholly free now? A hint. */
bool dp_pool_granule_free(struct dsmpool *pool, uint32_t sub, uint64_t g);
int dp_pool_free(struct dsmpool *pool, uint64_t block);
/* proc.c [exact blocks]: give back the tail of a block just allocated, keeping at
 * least keep frames (rounded up to what a block word can say). Returns the
 * block's new word (the old one when nothing went back). */
uint64_t dp_pool_trim(struct dsmpool *pool, uint64_t block, uint64_t keep);
/* Take back the tail of such a block up to want frames (rounded as above)
 * if it is free: the new word, or 0 (nothing changed). */
uint64_t dp_pool_grow(struct dsmpool *pool, uint64_t block, uint64_t want);
/* Finish the allocator steps of owners that are dead: for recovery of one
 * slot (whose lock the caller holds), or of every dead owner (slot == -1). */
unsigned dp_pool_finish_steps(struct dsmpool *pool, int64_t slot);
/* The allocator's view: a bit per allocated frame; strict: report broken
 * invariants, unfinished steps of dead owners and steps in flight. */
int dp_used_maps(struct dsmpool *pool, uint64_t **used, char *why, size_t n, bool strict);
/* Sub-pool s's free frames and its largest free block's order (-1: none),
 * as a walk of its tree finds them now (for stats). */
void dp_pool_free_frames(struct dsmpool *pool, uint32_t s, uint64_t *free_frames, int *largest_order);
uint64_t **dp_maps_new(struct dsmpool *pool);
void dp_maps_free(struct dsmpool *pool, uint64_t **maps);
typedef void (*dp_mark_fn)(void *arg, uint64_t off, uint64_t len, const char *what);
void dp_ledger_mark_owned(struct dsmpool *pool, dp_mark_fn mark, void *arg); /* record blocks */

/* ---- residency (resident.c) ---------------------------------------------------
 * Granule g is the g-th 2 MiB of the data (p->res[g]: dp_format.h). */
#define DP_RES_ROOM_MARGIN (4ull << 20) /* resident.c [room first]: plus limit / 256 */
#define DP_RES_ROOM_REUSE_NS 5000000ull     /* resident.c [room reuse]: a reading is reused this long */
#define DP_RES_ROOM_REUSE_SLACK (64ull << 20) /* resident.c [room reuse]: and this to spare, plus limit / 32 */
uint64_t dp_res_unit(const struct dsmpool *pool);  /* granules per release unit (resident.c [release unit]) */
uint32_t dp_res_now_ms(const struct dsmpool *pool); /* a stamp for now: ms after the epoch, never 0 */
uint64_t dp_res_load(const struct dsmpool *pool, uint64_t g); /* the word (relaxed) */
/* A run of granules [g, g+n); tried: its populate began (a refill the room
 * check refused got nothing, and its give-back counts nothing). */
typedef struct dp_res_run {
    uint64_t g, n;
    bool tried;
} dp_res_run;
/* [refill on demand]: make every granule of [off, off+len) resident; the
 * caller holds part of each. 0 (all were), 1 (some were populated now: a
 * refill on demand, counted), or -ENOMEM (the memory cannot be had) with
 * a message and *failed the run that could not be made resident, still
 * counted busy: the caller frees its block and gives it back
 * (dp_pool_giveback). Clears idle stamps. */
int dp_res_ensure_slow(struct dsmpool *pool, uint64_t off, uint64_t len, dp_res_run *failed);
/* The common case inline (every pool block passes here: proc.c [pool
 * blocks]): a block inside one granule of a pool in pages of 2 MiB or less
 * (res_span: 0 for larger pages) whose word is 0 (resident, not busy, not
 * stamped) is one load and no call; an offset below the data wraps past
 * res_span (len 0: nothing to make resident, whichever way it goes).
 * relaxed: the block is held; what made its granule resident
 * happened before the allocator's acquire CAS that handed it out
 * (resident.c, ordering). */
static inline bool dp_res_warm_one(struct dsmpool *p, uint64_t off, uint64_t len) {
    uint64_t r = off - p->geo.data_off;
    return r < p->res_span && !((r ^ (r + len - 1)) >> DP_RES_SHIFT) &&
           !dp_load_relaxed(&p->res[r >> DP_RES_SHIFT]);
}
static inline int dp_res_ensure(struct dsmpool *p, uint64_t off, uint64_t len, dp_res_run *failed) {
    if (dp_res_warm_one(p, off, len)) return 0;
    return dp_res_ensure_slow(p, off, len, failed);
}
bool dp_res_any_released(const struct dsmpool *pool, uint64_t off, uint64_t len);
/* Populate granules [g, g+n) ([room first], strict; ahead: a refill ahead,
 * which looks at hugetlb's room first); no mark, no count. *tried: the
 * populate began (false: refused before it, nothing was got). */
int dp_res_populate(struct dsmpool *pool, uint64_t g, uint64_t n, bool ahead, bool *tried);
/* resident.c [lazy tree]: give the allocator its hook (process-local, at attach) */
void dp_res_open(struct dsmpool *pool);
/* resident.c [lazy tree]: populate the tree pages of granules [g, g + n),
 * which are resident (dsmpool_prefault maps them): 0 or the populate's error */
int dp_res_tree_map(struct dsmpool *pool, uint64_t g, uint64_t n);
/* Give the pages of granules [g, g+n) back to the system. */
int dp_res_release(struct dsmpool *pool, uint64_t g, uint64_t n);
/* resident.c [give back]: the same, and with count, the bytes that were
 * there just before (mincore; 0 where it cannot say; in hugetlb pages only
 * what this process maps) counted in refill_given_back once they are gone. */
int dp_res_release_counted(struct dsmpool *pool, uint64_t g, uint64_t n, bool count);
/* resident.c [tree give-back]: the allocator's pages of level `level` (0:
 * leaves, 1: the 2 MiB nodes' words) that only granules [g, g + n) use,
 * given back (4 KiB pages of an elastic pool). The caller holds the
 * granules whole, marked released and counted busy (a trim, between
 * dp_res_release and dp_res_given_back). Level 0 sets its granules' tree
 * bits; level 1 gives a page back only where every granule it tells of
 * says "no tree" already. Returns the pages given back. */
uint64_t dp_res_tree_give_back(struct dsmpool *pool, uint64_t g, uint64_t n, unsigned level);
/* [room first]: hold bytes against what this process may still charge, as
 * one step with the pool's other claims; 0, or -ENOMEM with a message that
 * names what (e.g. "an OS fallback segment"). Given back (dp_room_give)
 * once they are charged. */
int dp_room_take(struct dsmpool *pool, uint64_t bytes, const char *what);
void dp_room_give(struct dsmpool *pool, uint64_t bytes);
/* [busy]: count the caller in on every granule of [g, g+n); on granule g
 * only if it is resident (false: released, not counted); out again, by
 * `by` counts (never below 0). */
int dp_res_busy_raise(struct dsmpool *pool, uint64_t g, uint64_t n); /* -EUCLEAN: a full count */
bool dp_res_busy_raise_resident(struct dsmpool *pool, uint64_t g);
void dp_res_busy_lower(struct dsmpool *pool, uint64_t g, uint64_t n, uint64_t by);
/* [give back]: mark the released granules of [g, g+n) stray (pages may be
 * left there: the leak sweep's); and, once their pages are gone, the bit
 * off and `by` counts out. */
void dp_res_stray(struct dsmpool *pool, uint64_t g, uint64_t n);
void dp_res_given_back(struct dsmpool *pool, uint64_t g, uint64_t n, uint64_t by);
/* [resident when held]: the caller holds [g, g+n) whole; returns how many
 * changed state. mark_released keeps the counts; mark_resident takes the
 * caller's count out of each granule. */
uint64_t dp_res_mark_released(struct dsmpool *pool, uint64_t g, uint64_t n);
uint64_t dp_res_mark_resident(struct dsmpool *pool, uint64_t g, uint64_t n);
/* A trimmer's mark of one release unit [g, g+n) it holds whole: every
 * granule released and counted busy (the caller's), *newly those that were
 * resident; -EBUSY, and the unit as it was, when a granule is resident and
 * being populated ([busy]). The caller releases the unit, then lowers. */
int dp_res_trim_mark(struct dsmpool *pool, uint64_t g, uint64_t n, uint64_t *newly);
bool dp_res_stamp(struct dsmpool *pool, uint64_t g, uint32_t now_ms); /* [idle stamps]: if unstamped */
uint64_t dp_res_released_in(const struct dsmpool *pool, uint32_t sub); /* released granules */
/* The sub-pool's count of released granules as palloc's [resident first]
 * reads it (a hint), and its repair: add count - before (the granules
 * counted in a quiet window, and the hint read in it), which keeps what
 * marks made since have added. */
uint64_t dp_res_hint(const struct dsmpool *pool, uint32_t sub);
void dp_res_hint_fix(struct dsmpool *pool, uint32_t sub, uint64_t before, uint64_t count);
void dp_res_slot_clear(struct dsmpool *pool, uint32_t slot); /* a slot's claimed room: 0 */
/* R1 and R3 of resident.c: no released granule holds an allocated frame
 * (used: the allocator's maps), none is busy; -EUCLEAN with why. */
int dp_res_verify(struct dsmpool *pool, uint64_t **used, char *why, size_t n);
/* R3: no released granule holds a page (mincore; 4 KiB and THP pools). */
int dp_res_verify_given_back(struct dsmpool *pool, char *why, size_t n);

/* resident.c [give back]: the run a refill could not make resident, counted
 * busy by the caller (by counts on each granule), whose block is free
 * again: each release unit the caller can claim whole and that is still
 * released has its pages given back; one it cannot claim is marked stray
 * and the leak sweep made due; the caller's counts go out of every one.
 * Inside the caller's bracket. */
void dp_pool_giveback(struct dsmpool *pool, dp_res_run run, uint64_t by);
/* One release unit at g: claimed whole (a few tries while nobody holds any
 * of it), a released one's pages given back (with count, counted in
 * refill_given_back), the stray bit off and `by` counts out: true. false:
 * someone holds some of it and it is still released -- nothing done. */
bool dp_pool_giveback_unit(struct dsmpool *pool, uint64_t g, uint64_t by, bool count);
#endif /* DP_LEDGER_H */
