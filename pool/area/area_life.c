/*
 * area_life.c -- an area's lifetime: create, attach, detach and destroy,
 * the process-local object and this process's list of areas, tags, the
 * area's stats and limit, and the last process out of the pool.
 *
 * Layer: areas, above the heap files (a detach gives this process's caches
 * back). It registers the area layer's hooks from dp_area_layer_init: the
 * segment layer's destructor of area control segments (area_final) and its
 * trim hook (area_cache.c dp_ar_trim_thread), and the fork handlers of
 * dp_ar_reg_lock and the areas' locks (rank DP_RANK_AREAS).
 *
 * Rules
 *   [control block] An area's control block (ar_ctl) is a pool segment
 *      (DP_SEG_AREA) whose handle is the area's handle and whose reference
 *      count is the area's: the last detach, or recovery of the last
 *      process, destroys the area through the segment layer's hook, with no
 *      separate count that a crash could skew. It holds the magic, version
 *      and record count (checked at attach), the flags, state (LIVE,
 *      DESTROYED), limit, held bytes, the random key (area_free.c [free
 *      tags]), the tag, the registry's and the records' page tables
 *      (area_registry.c), per-class hints, the shared path's flag and kept
 *      span, and counters; no cache record, so a new area's is 12 KiB.
 *   [destroy] An explicit destroy: one CAS makes the area DESTROYED; then,
 *      if other threads hold caches, membarrier(GLOBAL) (every running
 *      thread passes a full barrier), then every cache record whose owner
 *      lives is waited for until its sequence is even (bounded:
 *      AR_QUIESCE_NS, 50 ms in all; a test may lengthen it:
 *      dp_area_test_quiesce_ns). A destroyer that sees ctl->shared
 *      always uses membarrier and also waits (same bound) until no live slot
 *      but its own has a bracket open (dp_brackets_quiesce; its own: just
 *      its own bracket; area_shared.c [shared path]). After that no
 *      operation can touch the area's spans: one that began before saw LIVE
 *      and has ended, one that begins later sees DESTROYED (area_cache.c
 *      [operations]). Then every entry is taken and released
 *      (area_registry.c [entries]); an INIT or RETIRED one whose owner lives
 *      is left to it, INIT ones marked DOOMED. If an operation is still
 *      running when the bound passes (its thread stopped or preempted), or
 *      membarrier fails, the destroyer releases nothing: the last
 *      reference's destroy releases it all.
 *   [final destroy] The segment layer calls area_final when the control
 *      segment's last reference is gone: no process is attached, so no
 *      operation runs. It marks the area DESTROYED, takes and releases every
 *      entry whoever owned it, frees the registry and record pages and the
 *      area's tag. It works from the pool and the control block alone, in
 *      any process (a recoverer's included), and is idempotent.
 *   [tags] Fallback pointers carry a 14-bit tag naming their area
 *      (area_pointer.c [fallback pointers]); tags come from a pool-wide
 *      bitmap, so no two live areas share one and a pointer of one area is
 *      always refused by another. 0: none left, and the area uses no OS
 *      segments. A creator takes its tag inside the bracket that writes the
 *      control block's magic: one that dies in between leaves a tag no
 *      control block names, which the leak sweep frees (dp_area_sweep_tags,
 *      recover.c [leak sweep]).
 *   [fork] fork() while another thread holds dp_ar_reg_lock or an area's
 *      lock must not leave the child with it held: they are taken around
 *      fork (the registry's, then the areas'), and made anew after a fork
 *      that skipped the atfork handlers (proc.c [fork]).
 *   [accounting] (dsmpool_area_stats) held = in_use + cached when quiet:
 *      cached is the chunks of spans' stacks and of every cache record's
 *      list (count) and bump range, and each span's tail that no chunk fits
 *      (none unless an exact span's trim stopped early -- palloc.c [exact blocks] --
 *      and it holds more of its block: stats count a span by its block
 *      word's bytes, as held does); in_use the spans' other chunks plus the
 *      large blocks (their exact bytes). The reservation of a power of two
 *      is lowered once the tail went back (area_acquire.c [reserve]), and a
 *      death in between leaves held high until the lost sweep sets it to
 *      the entries' sum (area_recover.c [lost chunks]). Bytes asked for: a
 *      large block's are in its entry, exact (area_large.c [large blocks]).
 *      A chunk's are nowhere (free() is not told its size and the chunk is
 *      the caller's): each cache record adds what every chunk allocation
 *      asked for and its class size (area_small.c [asked bytes]), the shared
 *      path the same into the control block; stats estimates the chunks'
 *      requested bytes as their in-use bytes x asked / given, summed over
 *      all records (kept for the area's life), and says it is an estimate.
 *      The limit is judged when bytes are reserved (area_acquire.c
 *      [reserve]).
 *   [last process out] (life.c [last out]) When nobody is attached to the pool
 *      any more and its OS segments are about to go, every area entry that
 *      lives in one goes first (dp_area_drop_os), so an area of a pool that
 *      persists names no segment that is gone (its chunks there are lost
 *      with the segment: pointers into them get -EINVAL). No operation can
 *      run: plain stores.
 *
 * Invariant, per area: [held] held = in_use + cached, when no operation
 * runs and no death is unswept ([accounting]).
 *
 * Crash bound: a creator killed after taking its tag and before the magic
 * leaves the tag to the leak sweep ([tags]); a destroyer killed after the
 * DESTROYED mark leaves the entries to their owners, to recovery (RETIRED
 * in its name: area_registry.c [parts]) and to the last reference's
 * destroy, which takes everything.
 *
 * Memory ordering: LIVE is a release store after the control block is
 * written, read by acquire loads at attach and in every query
 * (dp_area_live, dp_ar_query_ok); the DESTROYED mark is an acq_rel CAS and
 * then a seq_cst fence, against a claimer's seq_cst fence between its claim
 * and its first state read (dp_ar_tc_take_record) and a shared user's after
 * its flag (dp_ar_tc_get_slow), so that a destroyer that sees no other
 * record held may skip membarrier; the records' owner and sequence are
 * acquire loads (dp_ar_cache_claim's CAS, ar_op_end's release). Tags are
 * acq_rel RMWs on the bitmap.
 *
 * Injection points: "area.destroy.marked" (DESTROYED, before the caches
 * are waited for).
 */

#include <stdlib.h>
#include <string.h>

#include "area.h"
#include "area_cache.h"
#include "dp_os.h"

#ifdef DP_INJECTION
/* test-only: the destroyer's bound ([destroy]), so that a test of its wait
 * does not depend on how soon a loaded machine runs the operation */
dp_a64 dp_ar_quiesce_ns = AR_QUIESCE_NS;
/* relaxed: a test sets it before the threads it bounds start (pthread_create
 * orders it), and a stale value only changes how long a destroyer waits */
#define AR_QUIESCE_BOUND dp_load_relaxed(&dp_ar_quiesce_ns)
#else
#define AR_QUIESCE_BOUND AR_QUIESCE_NS
#endif

static struct dsmpool_area *ar_reg; /* this process's areas (dp_ar_reg_lock) */

/* [destroy], [final destroy]: give back every entry that can be given back
 * now. final: the last reference went (nobody is attached, no operation can
 * run): take everything. Otherwise an INIT or RETIRED entry whose owner lives
 * is left to its owner (INIT ones marked DOOMED). */
static void release_entries(dsmpool *p, ar_ctl *ctl, uint64_t aid, uint32_t me, bool final) {
    for (uint32_t k = 0; k < AR_REGPAGES; k++) {
        uint64_t off = dp_load_acquire(&ctl->regpage[k]); /* acquire: the link CAS */
        if (!off || !dp_block_ok(p, off, DP_FRAME_SIZE)) continue;
        ar_span *pg = dp_at(p, off);
        for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
            ar_span *sp = &pg[i];
            uint64_t e = (uint64_t)k * AR_PER_PAGE + i;
            uint64_t w = dp_load_acquire(&sp->state); /* acquire: the entry's publication */
            for (int tries = 0; tries < 64; tries++) { /* until it is given back or not ours to take */
                unsigned st = SPW_ST(w);
                if (st == SP_FREE || st > SP_RETIRED) break;
                bool owned = st == SP_INIT || st == SP_RETIRED;
                if (owned && !final && dp_slot_alive(p, SPW_OWNER(w))) {
                    if (st == SP_INIT && !(w & SPW_DOOMED) && !dp_cas_acq_rel(&sp->state, &w, w | SPW_DOOMED))
                        continue; /* acq_rel: the owner's publishing CAS fails from here on */
                    break;
                }
                if (dp_ar_entry_take_from(sp, &w, me)) {
                    dp_ar_entry_release(p, ctl, aid, e, sp, w, me);
                    break;
                }
            }
        }
    }
    for (unsigned c = 0; c < AR_NCLS; c++) dp_store_relaxed(&ctl->partial[c], 0);
}

/* [destroy]: wait until no operation on this area runs, other than ones of
 * dead threads. false: one still ran when the bound passed. */
static bool caches_quiesce(dsmpool *p, ar_ctl *ctl, ar_cache *mine) {
    uint64_t deadline = dp_os_now_ns() + AR_QUIESCE_BOUND;
    for (uint32_t i = 0; i < AR_NCACHES; i++) {
        ar_cache *rec = dp_ar_cache_rec(p, ctl, i);
        if (!rec || rec == mine) continue; /* (a page linked after the mark: its claims see DESTROYED) */
        for (unsigned spin = 0;; spin++) {
            uint64_t o = dp_load_acquire(&rec->owner);  /* acquire: pairs with dp_ar_cache_claim's CAS */
            uint64_t s = dp_load_acquire(&rec->seq);    /* acquire: pairs with ar_op_end's release */
            if (!o || !(s & 1) || !dp_slot_alive(p, (uint32_t)o - 1)) break;
            if (dp_os_now_ns() > deadline) return false;
            if (spin > 64) dp_os_yield();
            else dp_cpu_relax();
        }
    }
    return true;
}

static void destroy_explicit(struct dsmpool_area *a) {
    dsmpool *p = a->pool;
    ar_ctl *ctl = a->ctl;
    dp_bracket_open(p);
    uint64_t live = AR_LIVE;
    /* acq_rel: one destroyer; its writes below come after the mark */
    if (dp_cas_acq_rel(&ctl->state, &live, AR_DESTROYED)) {
        /* seq_cst fence: the mark before our reads of the owners, against a
         * claimer's seq_cst fence between its claim and its first state read
         * (when nobody else holds a record we skip membarrier: [destroy]) */
        dp_fence_seq_cst();
        DP_INJECT("area.destroy.marked");
        ar_cache *mine = dp_ar_tc_find(a);
        bool shared = dp_load_relaxed(&ctl->shared) != 0; /* relaxed: after the fence */
        bool others = shared;
        for (uint32_t i = 0; i < AR_NCACHES && !others; i++) {
            ar_cache *rec = dp_ar_cache_rec(p, ctl, i);
            others = rec && rec != mine && dp_load_relaxed(&rec->owner) != 0;
        }
        /* [destroy]: without the barrier we cannot know that a late operation
         * sees DESTROYED, so we release nothing (the last reference will) */
        bool safe = !others || dp_os_membarrier_global() == 0;
        /* area_shared.c [shared path]: its operations are brackets: wait for
         * those too */
        if (safe && caches_quiesce(p, ctl, mine) &&
            (!shared || dp_brackets_quiesce(p, dp_os_now_ns() + AR_QUIESCE_BOUND)))
            release_entries(p, ctl, a->aid, p->slot, false);
    }
    dp_bracket_close(p);
}

/* [final destroy]: the segment layer's hook: the control segment's last
 * reference is gone. Works from the pool and the control block alone, in any
 * process (a recoverer's included). Idempotent. */
static void area_final(dsmpool *p, void *ctlp, uint64_t bytes, uint64_t aid, uint32_t owner) {
    ar_ctl *ctl = ctlp;
    if (bytes < sizeof(ar_ctl) || ctl->magic != AR_MAGIC) return;
    dp_store_release(&ctl->state, AR_DESTROYED); /* release: pairs with dp_area_live's acquire */
    release_entries(p, ctl, aid, owner, true);
    for (uint32_t k = 0; k < AR_REGPAGES; k++) {
        uint64_t off = dp_load_acquire(&ctl->regpage[k]); /* acquire: dp_frame_link's CAS */
        if (!off) continue;
        dp_bracket_open(p);
        dp_store_release(&ctl->regpage[k], 0); /* unrecord, then free */
        if (dp_block_ok(p, off, DP_FRAME_SIZE)) dp_pool_free(p, DP_BLOCK_MK(off, 0));
        dp_bracket_close(p);
    }
    for (uint32_t k = 0; k < AR_RECPAGES; k++) { /* the cache records: nobody holds one now */
        uint64_t off = dp_load_acquire(&ctl->recpage[k]); /* acquire: dp_block_link's CAS */
        if (!off) continue;
        dp_bracket_open(p);
        dp_store_release(&ctl->recpage[k], 0); /* unrecord, then free */
        if (dp_block_ok(p, off, AR_RECPAGE_BYTES)) dp_pool_free(p, DP_BLOCK_MK(off, AR_RECPAGE_ORDER));
        dp_bracket_close(p);
    }
    dp_area_tag_free(p, ctl->tag);
}

/* [tags]: a tag of its own for a new area; 0: none left (the area then
 * uses no OS segments). */
static uint32_t tag_alloc(dsmpool *p) {
    for (unsigned w = 0; w < 256; w++) {
        uint64_t v = dp_load_relaxed(&p->hdr->area_tags[w]); /* relaxed: the CAS validates */
        while (~v) {
            unsigned b = (unsigned)__builtin_ctzll(~v);
            uint32_t tag = w * 64 + b + 1;
            if (tag > 0x3fff) return 0;
            /* acq_rel: pairs with dp_area_tag_free */
            if (dp_cas_acq_rel(&p->hdr->area_tags[w], &v, v | (1ull << b))) return tag;
        }
    }
    return 0;
}

ar_ctl *dp_ar_ctl_of(dsmpool *p, uint64_t idx) {
    ar_ctl *ctl = dp_seg_area_ctl(p, idx, sizeof(ar_ctl));
    return ctl && ctl->magic == AR_MAGIC && ctl->ncaches == AR_NCACHES ? ctl : NULL;
}

/* [tags] for the leak sweep (recover.c [leak sweep]), inside its quiet window: a tag
 * that no area's control block names was taken by a creator that died before
 * writing it down. */
void dp_area_sweep_tags(dsmpool *p) {
    uint64_t used[256] = {0};
    for (uint64_t idx = 0; idx < p->nsegs; idx++) {
        ar_ctl *ctl = dp_ar_ctl_of(p, idx);
        if (ctl && ctl->tag >= 1 && ctl->tag <= 0x3fff) used[(ctl->tag - 1) / 64] |= 1ull << ((ctl->tag - 1) % 64);
    }
    for (unsigned w = 0; w < 256; w++) {
        uint64_t stray = dp_load_relaxed(&p->hdr->area_tags[w]) & ~used[w]; /* relaxed: quiet */
        if (stray) dp_fetch_and_acq_rel(&p->hdr->area_tags[w], ~stray); /* acq_rel: tag_alloc */
    }
}

void dp_area_tag_free(dsmpool *p, uint32_t tag) {
    if (!tag || tag > 0x3fff) return;
    /* acq_rel: pairs with tag_alloc */
    dp_fetch_and_acq_rel(&p->hdr->area_tags[(tag - 1) / 64], ~(1ull << ((tag - 1) % 64)));
}

/* [fork]: take the locks around fork (the registry's, then the areas';
 * rank DP_RANK_AREAS of the ledger's table). */
static void ar_prepare(void) {
    pthread_mutex_lock(&dp_ar_reg_lock);
    for (struct dsmpool_area *a = ar_reg; a; a = a->reg_next) pthread_mutex_lock(&a->lock);
}

static void ar_after(void) {
    for (struct dsmpool_area *a = ar_reg; a; a = a->reg_next) pthread_mutex_unlock(&a->lock);
    pthread_mutex_unlock(&dp_ar_reg_lock);
}

/* [fork]: after a fork that skipped the atfork handlers (proc.c [fork]). */
static void ar_reset(void) {
    pthread_mutex_init(&dp_ar_reg_lock, NULL);
    for (struct dsmpool_area *a = ar_reg; a; a = a->reg_next) pthread_mutex_init(&a->lock, NULL);
}

static const dp_fork_ops ar_fork = {DP_RANK_AREAS, ar_prepare, ar_after, ar_after, ar_reset};

void dp_area_layer_init(void) {
    dp_seg_set_area_hook(area_final);
    dp_seg_set_trim_hook(dp_ar_trim_thread);
    dp_ledger_on_fork(&ar_fork);
}

static void area_register(struct dsmpool_area *a) {
    pthread_mutex_lock(&dp_ar_reg_lock);
    a->reg_next = ar_reg;
    ar_reg = a;
    pthread_mutex_unlock(&dp_ar_reg_lock);
}

static bool area_unregister(struct dsmpool_area *a) {
    bool found = false;
    unsigned e = dp_epoch();
    pthread_mutex_lock(&dp_ar_reg_lock);
    for (struct dsmpool_area **pp = &ar_reg; *pp; pp = &(*pp)->reg_next)
        if (*pp == a) {
            *pp = a->reg_next;
            found = true;
            break;
        }
    if (found) { /* this process's thread caches on it go back */
        /* dp_ar_reg_lock alone keeps the list still (adding and freeing a tc
         * take it); a->lock is not held, since a release may map an OS
         * segment (dp_ar_fb_remember takes a->lock) */
        ar_tc *tcs = a->tcs;
        for (ar_tc *tc = tcs, *next; tc; tc = next) {
            next = tc->anext;
            /* (an abandoned pool's region is not trusted: nothing goes back) */
            if (tc->epoch == e && tc->rec && !a->pool->abandoned) dp_ar_cache_release(a, tc->rec, a->pool->slot);
            dp_store_relaxed_any(&tc->area, NULL); /* its thread frees tc */
            tc->anext = tc->aprev = NULL;
        }
        pthread_mutex_lock(&a->lock);
        a->tcs = NULL;
        pthread_mutex_unlock(&a->lock);
    }
    pthread_mutex_unlock(&dp_ar_reg_lock);
    return found;
}

static void area_free_local(struct dsmpool_area *a);

/* dsmpool_detach: this process's areas of the pool go first (their thread
 * caches are released; their control segments go with the pool's). */
void dp_area_detach_pool(dsmpool *pool) {
    for (;;) {
        pthread_mutex_lock(&dp_ar_reg_lock);
        struct dsmpool_area *a = ar_reg;
        while (a && a->pool != pool) a = a->reg_next;
        pthread_mutex_unlock(&dp_ar_reg_lock);
        if (!a) return;
        if (area_unregister(a)) area_free_local(a);
    }
}

/* The process-local fields of an area object for control block ctl. */
void dp_ar_fill(struct dsmpool_area *a, dsmpool *pool, ar_ctl *ctl, uint64_t aid) {
    a->magic = AR_OBJ_MAGIC;
    a->pool = pool;
    a->ctl = ctl;
    a->aid = aid;
    a->tag = ctl->tag & 0x3fff;
    a->key = ctl->key;
    a->trimp = &pool->hdr->trim;
    a->base = pool->base;
    a->data_off = pool->geo.data_off;
    a->data_size = pool->geo.data_size;
    pthread_mutex_init(&a->lock, NULL);
}

static struct dsmpool_area *area_new(dsmpool *pool, dsmpool_seg *seg) {
    struct dsmpool_area *a = dp_obj_new(DP_OBJ_AREA, sizeof *a);
    if (!a) return NULL;
    a->seg = seg;
    a->handle = dsmpool_seg_handle(seg);
    dp_ar_fill(a, pool, dsmpool_seg_address(seg), DP_HANDLE_IDX(a->handle) + 1);
    return a;
}

/* Unmap this process's mappings of fallback entries. */
void dp_ar_free_fb(struct dsmpool_area *a) {
    for (unsigned i = 0; i < AR_MAX_ENTRIES / 512; i++) {
        _Atomic(ar_fb *) *page = a->fb[i];
        if (!page) continue;
        for (unsigned k = 0; k < 512; k++) {
            ar_fb *r = dp_load_relaxed_any(&page[k]);
            if (r) {
                dp_os_unmap(r->base, r->len);
                free(r);
            }
        }
        free(page);
        a->fb[i] = NULL;
    }
    for (ar_fb *r = a->fb_retired, *next; r; r = next) {
        next = r->retired;
        dp_os_unmap(r->base, r->len);
        free(r);
    }
    a->fb_retired = NULL;
    pthread_mutex_destroy(&a->lock);
}

static void area_free_local(struct dsmpool_area *a) {
    dp_ar_free_fb(a);
    dp_obj_end(DP_OBJ_AREA, a); /* (writes 0 over the magic) */
}

/* The process-local object for an attached control segment. */
static int area_open(dsmpool *pool, dsmpool_seg *seg, dsmpool_area **out) {
    struct dsmpool_area *a = area_new(pool, seg);
    if (!a) {
        dsmpool_seg_detach(seg);
        return dp_fail(-ENOMEM, "out of memory");
    }
    area_register(a);
    *out = a;
    return 0;
}

int dsmpool_area_create(dsmpool *pool, unsigned flags, dsmpool_area **out) {
    dp_clear_error();
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    *out = NULL;
    if (!pool || pool->magic != DP_POOL_MAGIC) return dp_fail(-EINVAL, "not an attached pool");
    if (flags & ~(DSMPOOL_AREA_CHECKED | DSMPOOL_AREA_NO_FALLBACK | DSMPOOL_AREA_MID_CHUNKS))
        return dp_fail(-EINVAL, "unknown flags 0x%x", flags);
    int r = dp_self(pool);
    if (r) return r;
    dsmpool_seg *seg;
    /* one bracket: a creator that dies after taking a tag and before the
     * magic leaves it to the leak sweep (dp_area_sweep_tags) */
    dp_bracket_open(pool);
    r = dp_seg_create_internal(pool, sizeof(ar_ctl), DP_SEG_AREA | DSMPOOL_SEG_NO_FALLBACK, &seg);
    if (r) {
        dp_bracket_close(pool);
        return r == -ENOMEM ? dp_fail(-ENOMEM, "no room in the pool for the area's control "
                                      "block (%zu bytes)", sizeof(ar_ctl)) : r;
    }
    ar_ctl *ctl = dsmpool_seg_address(seg);
    memset(ctl, 0, sizeof *ctl);
    ctl->version = AR_VERSION;
    ctl->ncaches = AR_NCACHES;
    ctl->flags = flags;
    ctl->tag = (flags & DSMPOOL_AREA_NO_FALLBACK) ? 0 : tag_alloc(pool);
    ctl->key = dp_os_random64() | 1;
    ctl->magic = AR_MAGIC;
    dp_store_release(&ctl->state, AR_LIVE); /* release: publishes the control block */
    dp_bracket_close(pool);
    return area_open(pool, seg, out);
}

bool dp_area_live(dsmpool *pool, dsmpool_handle h) {
    uint64_t blk;
    if (!(dp_seg_flags(pool, h) & DP_SEG_AREA) || !dp_seg_live(pool, h, &blk, NULL) || !blk) return false;
    uint64_t bytes = DP_BLOCK_BYTES(blk);
    if (bytes < sizeof(ar_ctl) || !dp_block_ok(pool, DP_BLOCK_OFF(blk), bytes)) return false;
    ar_ctl *ctl = dp_at(pool, DP_BLOCK_OFF(blk));
    return ctl->magic == AR_MAGIC && dp_load_acquire(&ctl->state) == AR_LIVE; /* acquire: the LIVE store, the marks */
}

int dsmpool_area_attach(dsmpool *pool, dsmpool_handle h, dsmpool_area **out) {
    dp_clear_error();
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    *out = NULL;
    dsmpool_seg *seg;
    int r = dsmpool_seg_attach(pool, h, &seg);
    if (r) return r;
    ar_ctl *ctl = dsmpool_seg_address(seg);
    if (!(dp_seg_flags(pool, h) & DP_SEG_AREA) || dsmpool_seg_size(seg) < sizeof(ar_ctl) ||
        ctl->magic != AR_MAGIC || ctl->version != AR_VERSION || ctl->ncaches != AR_NCACHES) {
        dsmpool_seg_detach(seg);
        return dp_fail(-EINVAL, "handle %016llx names a segment that is not an area",
                       (unsigned long long)h);
    }
    if (dp_load_acquire(&ctl->state) != AR_LIVE) { /* acquire: pairs with destroy_explicit's mark */
        dsmpool_seg_detach(seg);
        return dp_fail(-ESTALE, "the area %016llx was destroyed", (unsigned long long)h);
    }
    return area_open(pool, seg, out);
}

dsmpool_handle dsmpool_area_handle(const dsmpool_area *area) {
    return area && area->magic == AR_OBJ_MAGIC ? area->handle : 0;
}

int dsmpool_area_detach(dsmpool_area *area) {
    dp_clear_error();
    if (!area || !area_unregister(area)) return dp_fail(-EINVAL, "not an attached area (detached twice?)");
    int r = dsmpool_seg_detach(area->seg); /* the last reference destroys the contents */
    area_free_local(area);
    return r;
}

int dsmpool_area_destroy(dsmpool_area *area) {
    dp_clear_error();
    if (!area || area->magic != AR_OBJ_MAGIC) return dp_fail(-EINVAL, "not an attached area");
    int r = dp_ar_usable(area);
    if (r == 0) destroy_explicit(area);
    int d = dsmpool_area_detach(area);
    return r ? r : d;
}

int dsmpool_area_set_limit(dsmpool_area *area, size_t bytes) {
    dp_clear_error();
    if (!area || area->magic != AR_OBJ_MAGIC) return dp_fail(-EINVAL, "not an attached area");
    int r = dp_ar_usable(area);
    if (r) return r;
    if (dp_load_acquire(&area->ctl->state) != AR_LIVE) return dp_fail(-ESTALE, "the area was destroyed");
    dp_store_relaxed(&area->ctl->limit, bytes); /* relaxed: read by dp_ar_held_reserve's CAS loop */
    return 0;
}

static int area_get_stats(dsmpool_area *area, dsmpool_area_stats *out);

int dsmpool_area_get_stats_sized(dsmpool_area *area, dsmpool_area_stats *out, size_t struct_size) {
    dp_clear_error();
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    dsmpool_area_stats full;
    int r = area_get_stats(area, &full);
    return r ? r : dp_copy_sized(out, struct_size, &full, sizeof full);
}

static int area_get_stats(dsmpool_area *area, dsmpool_area_stats *out) {
    if (!area || area->magic != AR_OBJ_MAGIC) return dp_fail(-EINVAL, "not an attached area");
    int r = dp_ar_usable(area);
    if (r) return r;
    if (dp_load_acquire(&area->ctl->state) != AR_LIVE) return dp_fail(-ESTALE, "the area was destroyed");
    memset(out, 0, sizeof *out);
    ar_ctl *ctl = area->ctl;
    uint64_t span_chunks = 0; /* bytes of all spans (chunks and tails) */
    out->held = dp_load_relaxed(&ctl->held);
    out->limit = dp_load_relaxed(&ctl->limit);
    for (uint64_t e = ar_entry_next(ctl, 0); e < AR_MAX_ENTRIES; e = ar_entry_next(ctl, e + 1)) {
        if (e % AR_PER_PAGE == 0) out->registry_bytes += DP_FRAME_SIZE;
        ar_span *sp = dp_ar_entry(area->pool, ctl, e);
        if (!sp) continue;
        uint64_t w = dp_load_acquire(&sp->state); /* acquire: the entry's publication */
        unsigned st = SPW_ST(w);
        uint64_t info = dp_load_relaxed(&sp->info), blk = dp_load_relaxed(&sp->block), bytes;
        if (blk == DP_BLOCK_FALLBACK) bytes = dp_seg_os_size(area->pool, dp_load_relaxed(&sp->seg));
        else bytes = blk && DP_BLOCK_ORDER(blk) <= DP_PA_MAX_ORDER ? DP_BLOCK_BYTES(blk) : 0;
        if (st == SP_SPAN) {
            out->spans++;
            unsigned c = (unsigned)(info & 0xff);
            if (c < AR_NCLS && SPW_COUNT(w) <= cls_chunks(c)) { /* [accounting]: its free chunks */
                /* what the span holds is its block's bytes, as held counts
                 * them: cls_len, or more when its trim stopped early
                 * (palloc.c [exact blocks]); the part no chunk fits counts as
                 * cached, held but given to no allocation */
                uint64_t fill = (uint64_t)cls_chunks(c) * cls_size(c);
                uint64_t sb = bytes >= fill && bytes <= cls_span(c) ? bytes : cls_len(c); /* else damaged */
                span_chunks += sb;
                out->bytes_cached += (uint64_t)SPW_COUNT(w) * cls_size(c) + sb - fill;
            }
        } else if (st == SP_LARGE) {
            out->large_blocks++;
            out->bytes_in_use += bytes;
            out->bytes_requested += AR_INFO_ASKED(info) <= bytes ? AR_INFO_ASKED(info) : bytes;
        } else {
            continue;
        }
        if (blk == DP_BLOCK_FALLBACK) {
            out->fallback_segments++;
            out->bytes_os += bytes;
        }
    }
    /* [accounting]: what the caches hold (lists and bump ranges), and what
     * chunk allocations asked for; relaxed reads of owner-only words:
     * approximate while others run */
    uint64_t asked = dp_load_relaxed(&ctl->sh_asked), given = dp_load_relaxed(&ctl->sh_given);
    out->control_bytes = area->seg ? dsmpool_seg_size(area->seg) : sizeof(ar_ctl);
    for (uint32_t k = 0; k < AR_RECPAGES; k++)
        if (dp_load_relaxed(&ctl->recpage[k])) out->control_bytes += AR_RECPAGE_BYTES; /* relaxed: a count */
    for (uint32_t i = 0; i < AR_NCACHES; i++) {
        ar_cache *rec = dp_ar_cache_rec(area->pool, ctl, i);
        if (!rec) continue;
        asked += dp_load_relaxed(&rec->asked);
        given += dp_load_relaxed(&rec->given);
        /* released records are empty (area_cache.c [give back]) */
        if (!dp_load_relaxed(&rec->owner)) continue;
        out->caches++;
        for (unsigned c = 0; c < AR_NCLS; c++) {
            uint64_t n = dp_load_relaxed(&rec->count[c]), left = BUMP_LEFT(dp_load_relaxed(&rec->bump[c]));
            if (n > cls_chunks(c) * 1024ull) n = 0; /* a damaged count */
            if (left > cls_chunks(c)) left = 0;
            out->bytes_cached += (n + left) * cls_size(c);
        }
    }
    uint64_t chunks_in_use = span_chunks > out->bytes_cached ? span_chunks - out->bytes_cached : 0;
    out->bytes_in_use += chunks_in_use;
    if (given) out->bytes_requested += (size_t)((double)chunks_in_use * ((double)asked / (double)given));
    return 0;
}

/* ---- the last process out (life.c) --------------------------------------- */

/* [last process out]: nobody is attached to the pool any more (life.c [last out]:
 * the caller holds LIFE exclusive, nobody is present, dead processes were
 * recovered), and its OS segments are about to go: every area entry that lives
 * in one goes first, so an area of a pool that persists names no segment that
 * is gone (its chunks there are lost with the segment: pointers into them get
 * -EINVAL). No operation can run: plain stores. */
void dp_area_drop_os(dsmpool *p) {
    for (uint64_t idx = 0; idx < p->nsegs; idx++) {
        ar_ctl *ctl = dp_ar_ctl_of(p, idx);
        if (!ctl) continue;
        for (uint32_t k = 0; k < AR_REGPAGES; k++) {
            uint64_t off = dp_load_acquire(&ctl->regpage[k]); /* acquire: the link CAS */
            if (!off || !dp_block_ok(p, off, DP_FRAME_SIZE)) continue;
            ar_span *pg = dp_at(p, off);
            for (uint32_t i = 0; i < AR_PER_PAGE; i++) {
                uint64_t w = dp_load_acquire(&pg[i].state); /* acquire: the filler's writes */
                unsigned st = SPW_ST(w);
                if ((st != SP_SPAN && st != SP_LARGE) || dp_load_relaxed(&pg[i].block) != DP_BLOCK_FALLBACK) continue;
                uint64_t bytes = dp_seg_os_size(p, dp_load_relaxed(&pg[i].seg));
                unsigned c = (unsigned)(dp_load_relaxed(&pg[i].info) & 0xff);
                if (st == SP_SPAN && SPW_COUNT(w) && c < AR_NCLS)
                    dp_fetch_add_relaxed(&ctl->partial[c], (uint64_t)-1); /* relaxed: a hint */
                if (bytes) dp_fetch_add_relaxed(&ctl->held, (uint64_t)-bytes); /* relaxed: a counter */
                dp_store_relaxed(&pg[i].block, 0);
                dp_store_relaxed(&pg[i].seg, 0);
                dp_store_release(&pg[i].state, SPW(SPW_GEN(w) + 1, 0, 0, SP_FREE)); /* release: dp_ar_entry_claim */
            }
        }
    }
}
