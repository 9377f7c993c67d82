/*
 * proc.c -- the process ledger: slots, a fork()ed child's adoption,
 * attachment records, brackets, quiet windows, and pool blocks handed out
 * in a process's name (fork detection and the registry are fork.c's).
 *
 * Layer: above the allocator (palloc.c) and the region (region.c); below
 * segments, areas, recovery and the checker, which reach it by name. What it
 * needs from above it gets through hooks registered at start-up (docs/style.md, "Layers"):
 * reclaim (run recovery: the recovery layer), adopt (take over inherited
 * attachments: the segment layer), join (a fork()ed child's presence
 * around its slot claim: the life layer), fork resets (process-local
 * locks).
 *
 * Rules
 *   [slots] Every process attached to a pool holds one slot. It takes the slot's
 *      liveness lock first (live.c [slot locks]), then claims the FREE slot by one
 *      CAS that writes its pid and state; it frees the slot (LEAVING, clear,
 *      FREE) before it gives the lock back. So a slot that is not FREE has
 *      its lock held by its owner for as long as the owner lives, and a
 *      recoverer that can take the lock knows the owner is dead.
 *   [records] Each segment attachment is recorded in the slot before the reference
 *      count is raised (PENDING), marked ACTIVE after, and marked DETACHING
 *      before the count is lowered. Recovery drops a reference only for
 *      ACTIVE records: a death between the record step and the count step
 *      can leak one reference, never drop one twice; recovery re-syncs such
 *      counts (segment.c). Records are claimed by CAS (threads of a process
 *      share the slot); when the inline ones are taken, one-frame overflow
 *      blocks are taken from the pool and linked by CAS; they go back when
 *      the slot is cleared, each unlinked before it is freed.
 *   [recovery] Recovery (recover.c) works on a dead slot only while it holds the
 *      slot's lock, and frees the slot before it gives the lock back.
 *   [fork] fork(): a child inherits the dsmpool pointer but not the slot.
 *      Every kind of fork is seen (fork.c [every fork is seen]). The first
 *      call on the pool in the child sees the epoch differ (one load), opens
 *      its own liveness lock, joins the pool (presence, life.c J3..J6,
 *      through the join hook), takes a new slot and a reference on every
 *      inherited segment, in its own name. A child that cannot hold a lock
 *      of its own (live.c [presence and life]) is refused: every call
 *      fails, and it holds nothing.
 *   [process-local] The objects handed to callers are never freed (objs.c),
 *      so a call on a detached one reads no freed memory; this process's
 *      attached pools are fork.c's registry, its attached segment objects
 *      the segment layer's set.
 *   [brackets] Every change of what the pool's shared structures say --
 *      allocator words, segment states and counts, records, area entries --
 *      happens inside a bracket of the changing slot (dp_bracket_open /
 *      close: a count of brackets open and a sequence number of brackets
 *      opened and closed), or by a recoverer while the slot it recovers is
 *      RECOVERING, or inside an area cache operation (area_cache.c [operations]). A
 *      process that dies inside a bracket may leave a block allocated but
 *      recorded nowhere: the leak sweep (recover.c) returns it. The shared
 *      path of areas (area_shared.c [shared path]) makes its operations brackets, and a
 *      destroyer waits until no other live slot has one open
 *      (dp_brackets_quiesce, bounded).
 *   [quiet windows] Quiet windows (dp_quiet_open/holds): a seqlock over [brackets]. Open reads
 *      every slot's state, sequence and count and refuses (-EBUSY) if a live
 *      process is inside a bracket or a recovery or a leave runs; holds
 *      fences (acquire) and reads them again. Whatever was read between a
 *      successful open and a holds that says nothing moved was read while
 *      nobody changed it: open raises the count, then the sequence, then
 *      fences (release); close raises the sequence, then lowers the count.
 *      A slot whose process is dead but not yet recovered refuses too
 *      (-EAGAIN), and so does a leak sweep that is due: what they left is
 *      work for recovery, not damage. The checker and the sweep decide only
 *      inside such a window.
 *   [pool blocks] the calling thread's node sub-pool first, then the
 *      others nearest first (DSMPOOL_SEG_* placement flags). The CPU is read
 *      once per search; a pool of one sub-pool (one_sub) does not look up
 *      the node. Every block is
 *      checked to lie inside the data before it is returned. An allocation
 *      that found no block, but found nodes in another owner's open/close
 *      step in the way (dp_pa_alloc: -EBUSY), finishes the steps of owners
 *      that are dead (taking their liveness locks, [recovery]) and searches
 *      once more. A live owner stopped mid-step keeps one node's subtree
 *      (at most 1/16 of its sub-pool) out of reach until it runs again
 *      (palloc.c, failure bound). Every block is made resident before it
 *      is returned (resident.c [refill on demand]: its granules' words, one
 *      load each; a released one populated), or it goes back, what its
 *      refill populated is given back (dp_pool_giveback: resident.c [give
 *      back]) and the caller gets -ENOMEM; an exact block's kept frames only
 *      (dp_pool_alloc_exact), and a grow's new frames (dp_pool_grow, which
 *      gives them back when they cannot be had). Blocks are also taken by
 *      their address (dp_pool_claim: palloc.c [claim]) by the trimmer and
 *      the refill ahead (elastic.c), inside their brackets.
 *   [exact blocks] a segment or a large area block takes the power-of-two
 *      block and gives its tail back at once (dp_pool_trim; palloc.c rule
 *      7), inside the bracket it was allocated in; the block word says how
 *      many frames went back (and that it is exact), and dp_pool_free frees
 *      exactly the rest, piece by piece; a word that is not exact is freed
 *      only by the one exact check of its order, so a damaged one (a record
 *      block, a registry page) frees nothing that is not the block itself. A
 *      death between the allocation and the trim, or in the trim, leaves
 *      frames allocated that no record names: the leak sweep returns them
 *      (recover.c [leak sweep]), as for any death inside a bracket.
 *
 * Memory ordering: the slot claim CAS is acq_rel (acquire: pairs with
 * dp_slot_release's release store of FREE, so the zeroed records are seen; release: the
 * claim is published after the lock is taken). Records are written with
 * release and read by recovery with acquire. Brackets: see [quiet windows].
 *
 * Injection points (tests, DP_INJECTION builds): "proc.claim.locked" (a
 * claimer holds the lock of a FREE slot, before its CAS).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_numa.h"
#include "dp_ledger.h"
#include "dp_os.h"

#ifdef DP_INJECTION
void (*volatile dp_inject_fn)(const char *point);
volatile unsigned long long dp_inject_room_reuse_ns;
#endif


/* ---- hooks (docs/style.md, "Layers") ------------------------------------ */

static int (*reclaim_hook)(dsmpool *);
#define ADOPT_HOOKS 4
static int (*adopt_hooks[ADOPT_HOOKS])(dsmpool *);
static unsigned nadopt_hooks;
static int (*join_hook)(dsmpool *);
static void (*joined_hook)(dsmpool *), (*leave_hook)(dsmpool *);

void dp_ledger_set_reclaim(int (*fn)(dsmpool *)) { reclaim_hook = fn; }
void dp_ledger_set_join(int (*join)(dsmpool *), void (*joined)(dsmpool *), void (*leave)(dsmpool *)) {
    join_hook = join;
    joined_hook = joined;
    leave_hook = leave;
}
void dp_ledger_set_adopt(int (*fn)(dsmpool *)) {
    for (unsigned i = 0; i < nadopt_hooks; i++)
        if (adopt_hooks[i] == fn) return;
    if (nadopt_hooks < ADOPT_HOOKS) adopt_hooks[nadopt_hooks++] = fn;
}
/* Registered once per layer, from its layer init (under pool.c's
 * pthread_once, before any pool exists); kept sorted by rank. */

int dp_reclaim(dsmpool *p) { return reclaim_hook ? reclaim_hook(p) : 0; }

/* ---- [slots]: slots -------------------------------------------------------- */

int dp_slot_claim(dsmpool *p) {
    pid_t pid = dp_os_getpid();
    bool guarded = dp_live_guarded(p);
    uint32_t n = p->nprocs, s0 = (uint32_t)pid % n;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (s0 + k) % n;
        dp_proc *sl = &p->procs[i];
        uint64_t w = dp_load_relaxed(&sl->state); /* relaxed: the CAS validates */
        if (DP_SLOT_STATE(w) != DP_SLOT_FREE) continue;
        if (guarded) {
            int r = dp_live_take(p, DP_LOCK_SLOT0 + i);
            if (r == -EAGAIN) continue; /* a recoverer is finishing it, or a claimer got there */
            if (r) return dp_fail(r, "cannot take the liveness lock of slot %u: %s", i, strerror(-r));
            DP_INJECT("proc.claim.locked");
            w = dp_load_relaxed(&sl->state);
        }
        /* acq_rel: see the file comment */
        if (DP_SLOT_STATE(w) == DP_SLOT_FREE &&
            dp_cas_acq_rel(&sl->state, &w, DP_SLOT_WORD(pid, guarded ? 0 : DP_SLOT_UNGUARDED, DP_SLOT_LIVE))) {
            /* ours alone now; release: a reader that sees the new count sees
             * our claim (one that still sees the old count judges us by the
             * lock, as it would the old owner: alive, never dead too early) */
            p->claim = dp_load_relaxed(&sl->claims) + 1;
            dp_store_release(&sl->claims, p->claim);
            p->slot = i;
            p->pid = pid;
            p->has_slot = true;
            return 0;
        }
        if (guarded) dp_live_give(p, DP_LOCK_SLOT0 + i);
    }
    return dp_fail(-ENOSPC, "all %u process slots are held by live processes; raise max_procs", n);
}


void dp_slot_records(dsmpool *p, uint32_t slot, void (*fn)(dsmpool *, dp_a64 *, void *), void *arg) {
    if (slot >= p->nprocs) return;
    dp_proc *sl = &p->procs[slot];
    for (int i = 0; i < DP_REC_INLINE; i++) fn(p, &sl->rec[i], arg);
    uint64_t off = dp_load_acquire(&sl->overflow); /* acquire: pairs with dp_block_link's linking CAS */
    for (uint64_t guard = p->geo.data_size / DP_FRAME_SIZE; off && guard; guard--) {
        if (!dp_block_ok(p, off, DP_FRAME_SIZE)) return; /* a damaged link: stop, never follow */
        dp_recblk *b = dp_at(p, off);
        for (unsigned i = 0; i < DP_REC_PER_BLOCK; i++) fn(p, &b->rec[i], arg);
        off = dp_load_acquire(&b->next); /* acquire: pairs with dp_block_link's linking CAS */
    }
}

static bool rec_try(dp_a64 *r, uint64_t rec) {
    uint64_t z = 0;
    /* release: recovery (acquire) must see the record once it sees our death */
    return dp_load_relaxed(r) == 0 && dp_cas_release(r, &z, rec);
}

uint64_t dp_frame_link(dsmpool *p, dp_a64 *link) { return dp_block_link(p, link, 0); }

uint64_t dp_block_link(dsmpool *p, dp_a64 *link, unsigned order) {
    uint64_t off = dp_load_acquire(link); /* acquire: pairs with dp_block_link's linking CAS below */
    if (off) return off;
    uint64_t blk;
    dp_bracket_open(p); /* until the block is linked or freed ([brackets]) */
    if (dp_pool_alloc(p, order, &blk) != 0) {
        dp_bracket_close(p);
        return 0;
    }
    memset(dp_at(p, DP_BLOCK_OFF(blk)), 0, (size_t)DP_FRAME_SIZE << order);
    uint64_t z = 0;
    /* release: publishes the zeroed frame with its link */
    if (dp_cas_release(link, &z, DP_BLOCK_OFF(blk))) {
        off = DP_BLOCK_OFF(blk);
    } else { /* someone linked one first: use theirs */
        dp_pool_free(p, blk);
        off = z;
    }
    dp_bracket_close(p);
    return off;
}

dp_a64 *dp_rec_add(dsmpool *p, uint64_t rec) {
    dp_proc *sl = &p->procs[p->slot];
    for (int i = 0; i < DP_REC_INLINE; i++)
        if (rec_try(&sl->rec[i], rec)) return &sl->rec[i];
    dp_a64 *link = &sl->overflow;
    for (uint64_t guard = p->geo.data_size / DP_FRAME_SIZE; guard; guard--) {
        uint64_t off = dp_frame_link(p, link);
        if (!off || !dp_block_ok(p, off, DP_FRAME_SIZE)) return NULL;
        dp_recblk *b = dp_at(p, off);
        for (unsigned i = 0; i < DP_REC_PER_BLOCK; i++)
            if (rec_try(&b->rec[i], rec)) return &b->rec[i];
        link = &b->next;
    }
    return NULL;
}

void dp_rec_clear(dp_a64 *rec) { dp_store_release(rec, 0); }

void dp_slot_clear(dsmpool *p, uint32_t slot, bool bracket) {
    if (slot >= p->nprocs) return;
    dp_proc *sl = &p->procs[slot];
    if (bracket) dp_bracket_open(p);
    /* one block at a time, unlinked before it is freed: whoever stops in the
     * middle leaves a chain of blocks still owned, or one unowned block that
     * the sweep returns -- never a link to a freed block */
    uint64_t off = dp_load_acquire(&sl->overflow); /* acquire: pairs with dp_block_link's linking CAS */
    for (uint64_t guard = p->geo.data_size / DP_FRAME_SIZE; off && guard; guard--) {
        if (!dp_block_ok(p, off, DP_FRAME_SIZE)) {
            dp_store_release(&sl->overflow, 0);
            break;
        }
        dp_recblk *b = dp_at(p, off);
        uint64_t next = dp_load_acquire(&b->next);
        dp_store_release(&sl->overflow, next); /* release: for the sweep's acquire */
        dp_pool_free(p, DP_BLOCK_MK(off, 0));
        off = next;
    }
    for (int i = 0; i < DP_REC_INLINE; i++) dp_store_relaxed(&sl->rec[i], 0);
    dp_res_slot_clear(p, slot); /* resident.c [room first]: it populates nothing now */
    if (bracket) dp_bracket_close(p);
}

void dp_slot_release(dsmpool *p) {
    /* LEAVING: our records no longer count (the segments are detached), and a
     * recovery that finds us dead from here on finishes the clearing */
    uint32_t slot = p->slot;
    dp_a64 *st = &p->procs[slot].state;
    uint64_t w = dp_load_relaxed(st);
    while (!dp_cas_acq_rel(st, &w, (w & ~0xffull) | DP_SLOT_LEAVING)) /* acq_rel: a state change */
        ;
    bool guarded = !(DP_SLOT_FLAGS(w) & DP_SLOT_UNGUARDED);
    dp_slot_clear(p, slot, true);
    p->has_slot = false;
    /* release: the cleared records are visible to the next claimer (acquire) */
    dp_store_release(st, DP_SLOT_FREE);
    if (guarded) dp_live_give(p, DP_LOCK_SLOT0 + slot); /* [slots]: after the slot is free */
}

int dp_ledger_open(dsmpool *p) {
    dp_res_open(p);
    p->held = calloc(((size_t)p->nprocs + 63) / 64, sizeof *p->held);
    return p->held ? 0 : dp_fail(-ENOMEM, "out of memory");
}

void dp_ledger_close(dsmpool *p) {
    free(p->held);
    p->held = NULL;
}

static bool held_by_us(dsmpool *p, uint32_t slot) {
    /* relaxed: set and cleared by our recoverer under recover_lock; a
     * reader in another thread that misses a fresh bit sees the slot as it
     * was a moment before: its state word tells RECOVERING apart */
    return p->held && (dp_load_relaxed(&p->held[slot / 64]) >> (slot % 64) & 1);
}

bool dp_slot_alive(dsmpool *p, uint32_t slot) {
    if (slot >= p->nprocs) return false;
    uint64_t w = dp_load_acquire(&p->procs[slot].state); /* acquire: pairs with dp_slot_claim's CAS */
    if (DP_SLOT_STATE(w) == DP_SLOT_FREE) return false;
    if ((DP_SLOT_FLAGS(w) & DP_SLOT_UNGUARDED) || (p->has_slot && slot == p->slot) ||
        !dp_live_guarded(p) || held_by_us(p, slot))
        return true; /* cannot be judged, or a recovery of ours works on it: alive */
    return dp_live_held(p, DP_LOCK_SLOT0 + slot) != 0; /* held, or an error: alive */
}

bool dp_slot_take_dead(dsmpool *p, uint32_t slot) {
    if (slot >= p->nprocs || (p->has_slot && slot == p->slot) || !dp_live_guarded(p) || !p->held)
        return false;
    uint64_t w = dp_load_acquire(&p->procs[slot].state); /* acquire: pairs with dp_slot_claim's CAS */
    if (DP_SLOT_STATE(w) == DP_SLOT_FREE || (DP_SLOT_FLAGS(w) & DP_SLOT_UNGUARDED)) return false;
    if (held_by_us(p, slot) || dp_live_take(p, DP_LOCK_SLOT0 + slot) != 0) return false;
    /* relaxed: see held_by_us; set before we change anything of the slot's */
    dp_fetch_or_relaxed(&p->held[slot / 64], 1ull << (slot % 64));
    /* the lock is ours: the slot cannot change under us any more ([slots]) */
    w = dp_load_acquire(&p->procs[slot].state);
    if (DP_SLOT_STATE(w) == DP_SLOT_FREE || (DP_SLOT_FLAGS(w) & DP_SLOT_UNGUARDED)) {
        dp_slot_give_dead(p, slot); /* freed meanwhile */
        return false;
    }
    return true;
}

void dp_slot_give_dead(dsmpool *p, uint32_t slot) {
    dp_live_give(p, DP_LOCK_SLOT0 + slot);
    dp_fetch_and_relaxed(&p->held[slot / 64], ~(1ull << (slot % 64))); /* relaxed: held_by_us */
}

/* ---- [brackets]: brackets ----------------------------------------------------- */

void dp_bracket_open(dsmpool *p) {
    if (!p->has_slot) return; /* recovery without a slot: RECOVERING protects it */
    dp_proc *sl = &p->procs[p->slot];
    /* inflight first, then opseq: a reader reads opseq, then inflight, so it
     * either sees the bracket open or sees opseq move on its second read */
    dp_fetch_add_acq_rel(&sl->inflight, 1);
    dp_fetch_add_acq_rel(&sl->opseq, 1);
    /* release fence: pairs with dp_quiet_holds' acquire fence; any write of the
     * bracket that the reader sees implies it sees opseq move */
    dp_fence_release();
}

void dp_bracket_close(dsmpool *p) {
    if (!p->has_slot) return;
    dp_proc *sl = &p->procs[p->slot];
    dp_fetch_add_acq_rel(&sl->opseq, 1); /* a bracket that opened and closed between reads shows */
    /* release: the bracket's writes are visible to whoever reads the count */
    dp_fetch_add_acq_rel(&sl->inflight, (uint64_t)-1);
}

/* Wait until no live slot has a bracket open, other than the caller's own
 * one (area_life.c [destroy]: a destroyer waits for the shared path's operations).
 * false: one was still open when deadline_ns passed. */
bool dp_brackets_quiesce(dsmpool *p, uint64_t deadline_ns) {
    for (uint32_t i = 0; i < p->nprocs; i++) {
        uint64_t mine = p->has_slot && i == p->slot ? 1 : 0;
        for (unsigned spin = 0;; spin++) {
            /* acquire: pairs with dp_bracket_close's release */
            if (dp_load_acquire(&p->procs[i].inflight) <= mine || !dp_slot_alive(p, i)) break;
            if (dp_os_now_ns() > deadline_ns) return false;
            if (spin > 64) dp_os_yield();
            else dp_cpu_relax();
        }
    }
    return true;
}

/* ---- [quiet windows]: quiet windows -------------------------------------------------- */

int dp_quiet_open(dsmpool *p, dp_quiet *q, bool sweeping) {
    q->n = p->nprocs;
    q->self = UINT32_MAX;
    q->w = malloc((size_t)q->n * 3 * sizeof *q->w);
    if (!q->w) return -ENOMEM;
    /* a leak that a dead process left and the sweep has not freed yet is
     * recovery's work too (recover.c [leak sweep]) */
    q->sweep = dp_load_acquire(&p->hdr->sweep_needed); /* acquire: pairs with dp_recover_all's store */
    if (q->sweep && !sweeping) return -EAGAIN;
    for (uint32_t i = 0; i < q->n; i++) {
        dp_proc *sl = &p->procs[i];
        uint64_t st = dp_load_acquire(&sl->state); /* acquire: pairs with dp_slot_claim and dp_slot_release */
        uint64_t seq = dp_load_acquire(&sl->opseq); /* acquire: pairs with dp_bracket_close */
        uint64_t infl = dp_load_acquire(&sl->inflight);
        q->w[3 * i] = st;
        q->w[3 * i + 1] = seq;
        q->w[3 * i + 2] = infl;
        unsigned s = DP_SLOT_STATE(st);
        if (s == DP_SLOT_FREE) continue;
        bool working = s == DP_SLOT_RECOVERING || s == DP_SLOT_LEAVING || infl;
        bool alive = dp_slot_alive(p, i);
        if (!alive) return -EAGAIN; /* dead and not yet recovered: recover first */
        if (working) return -EBUSY;
    }
    return 0;
}

bool dp_quiet_holds(dsmpool *p, const dp_quiet *q) {
    dp_fence_acquire(); /* pairs with dp_bracket_open's release fence */
    if (dp_load_relaxed(&p->hdr->sweep_needed) != q->sweep) return false;
    for (uint32_t i = 0; i < q->n; i++) {
        dp_proc *sl = &p->procs[i];
        if (dp_load_relaxed(&sl->state) != q->w[3 * i] || dp_load_relaxed(&sl->opseq) != q->w[3 * i + 1] ||
            dp_load_relaxed(&sl->inflight) != q->w[3 * i + 2])
            return false;
    }
    return true;
}

void dp_quiet_close(dp_quiet *q) {
    free(q->w);
    q->w = NULL;
}

/* ---- [fork]: the first call in a fork()ed child ----------------------------- */

/* A child is present before it holds a slot, as an attacher is (life.c
 * [records] and [recovery], J3..J8, through the life layer's join hooks): LIFE shared and
 * presence on a description of its own, then the slot, then LIFE let go;
 * so a parent that leaves meanwhile either cleaned up before the child
 * came in or sees it present. */
static int adopt(dsmpool *p) { /* caller holds pool->lock */
    p->has_slot = false; /* the inherited slot is the parent's */
    p->present = false;  /* and so is the presence */
    if (p->held) /* the parent's recoveries are not ours: we hold none of its locks */
        memset(p->held, 0, ((size_t)p->nprocs + 63) / 64 * sizeof *p->held);
    int r = dp_live_child(p);
    if (r || (join_hook && (r = join_hook(p)) != 0)) return r;
    r = dp_slot_claim(p);
    if (r == -ENOSPC && dp_reclaim(p) > 0) r = dp_slot_claim(p);
    /* the top layer first: one that cannot take the child in refuses it
     * before a lower one took references */
    for (unsigned i = nadopt_hooks; r == 0 && i-- > 0;)
        if ((r = adopt_hooks[i](p)) != 0) dp_slot_release(p);
    if (joined_hook) joined_hook(p);
    if (r && leave_hook) leave_hook(p); /* present without a slot: leave again */
    return r;
}

int dp_self(dsmpool *pool) {
    unsigned e = dp_epoch();
    /* acquire: pairs with dp_self's release below, so the slot fields are ours */
    if (dp_load_acquire_uint32_t(&pool->fork_epoch) == e) return 0;
    pthread_mutex_lock(&pool->lock);
    int r = 0;
    if (dp_load_relaxed_uint32_t(&pool->fork_epoch) != e) {
        r = adopt(pool);
        if (r == 0) dp_store_release_uint32_t(&pool->fork_epoch, e);
    }
    pthread_mutex_unlock(&pool->lock);
    return r;
}

/* ---- [pool blocks]: pool blocks ---------------------------------------------------- */

/* A block of the order from sub-pool k: its region offset in *off (the
 * callers make the word, and look at its residency, without decoding it). */
static int try_sub(dsmpool *p, uint32_t k, unsigned order, unsigned cpu, uint64_t *off) {
    uint64_t frame;
    int r = dp_pa_alloc(&p->pa[k], order, dp_owner(p), cpu, &frame);
    if (r) return r;
    *off = p->geo.sub[k].data_off + frame * DP_FRAME_SIZE;
    if (!dp_block_ok(p, *off, (uint64_t)DP_FRAME_SIZE << order)) return -EUCLEAN; /* never hand it out */
    return 0;
}

/* -EINVAL (no sub-pool can hold the order) is the weakest reason; -EBUSY
 * (blocked by open/close steps) outranks -ENOMEM; -EUCLEAN outranks all. */
static int worse(int a, int b) {
    static const int rank[] = {EINVAL, ENOMEM, EBUSY, EUCLEAN};
    int ra = 0, rb = 0;
    for (int i = 0; i < 4; i++) {
        if (-a == rank[i]) ra = i;
        if (-b == rank[i]) rb = i;
    }
    return rb > ra ? b : a;
}

static int placed_once(dsmpool *p, unsigned order, unsigned flags, uint64_t *off) {
    /* One sub-pool, not interleaved: every flag leads to it, so no node is
     * looked up (two dependent loads before the allocator's first; the
     * cost: docs/design.md, "Page allocator"). */
    if (p->one_sub) return try_sub(p, 0, order, dp_numa_cpu(), off);
    uint32_t node;
    unsigned cpu = dp_numa_cpu_node(&node); /* one read of the CPU for both */
    bool only = flags & DSMPOOL_SEG_LOCAL_ONLY;
    int err = -EINVAL, r;
    if ((flags & DSMPOOL_SEG_INTERLEAVE) && p->il_sub >= 0) {
        if ((r = try_sub(p, (uint32_t)p->il_sub, order, cpu, off)) == 0) return 0;
        if (only) return r;
        err = worse(err, r);
    }
    if (flags & (1u << 3)) node = (flags >> 8) & 0xff;
    int pref = node < 256 ? p->node_sub[node] : -1;
    if (pref < 0) pref = p->il_sub == 0 ? 1 : 0;
    for (uint32_t k = 0; k < DSMPOOL_MAX_NODES && p->order[pref][k] != 0xff; k++) {
        uint32_t s = p->order[pref][k];
        if ((r = try_sub(p, s, order, cpu, off)) == 0) {
            if (s != (uint32_t)pref) dp_fetch_add_relaxed(&p->hdr->fallbacks[pref], 1); /* relaxed: a counter */
            return 0;
        }
        err = worse(err, r);
        if (only) break;
    }
    return err;
}

static int pool_alloc_raw(dsmpool *p, unsigned order, unsigned flags, uint64_t *off) {
    int r = placed_once(p, order, flags, off);
    if (r == -EBUSY && dp_pool_finish_steps(p, -1) > 0) r = placed_once(p, order, flags, off);
    return r == -EBUSY ? -ENOMEM : r;
}

static bool block_sub(const dsmpool *p, uint64_t off, uint32_t *sub, uint64_t *frame);

/* resident.c [refill on demand], past dp_res_warm_one (the callers' inline
 * look): a block that cannot be made resident goes back, so does what its
 * refill populated ([give back]), and the caller is told -ENOMEM (the
 * message says why). A refill on demand where warm memory
 * had a free run of the block's order is counted (palloc.c [resident
 * first]: the allocator's misses). The look, after a populate alone, scans
 * the 2 MiB nodes of a window around the block: 4096 of them (8 GiB) per
 * 2 MiB of the block, so that it costs a fraction of the populate; the
 * whole sub-pool where it is no larger. */
enum { WARM_FIT_WINDOW = 4096 };
__attribute__((noinline)) static int pool_resident(dsmpool *p, uint64_t *block, uint64_t bytes) {
    dp_res_run run;
    int r = dp_res_ensure_slow(p, DP_BLOCK_OFF(*block), bytes, &run); /* (the callers looked inline) */
    if (r == 0) return 0;
    if (r > 0) {
        uint32_t k;
        uint64_t frame;
        if (block_sub(p, DP_BLOCK_OFF(*block), &k, &frame)) {
            uint64_t g = frame >> (DP_RES_SHIFT - DP_FRAME_SHIFT), span = (bytes >> DP_RES_SHIFT) + 1;
            uint64_t half = WARM_FIT_WINDOW / 2 * span, from = g > half ? g - half : 0;
            if (dp_pa_warm_fit(&p->pa[k], DP_BLOCK_ORDER(*block), from, g + half + span))
                dp_fetch_add_relaxed(&p->hdr->refills_warm_fit, 1); /* relaxed: a counter */
        }
        return 0;
    }
    dp_pool_free(p, *block);
    *block = 0;
    if (run.n) dp_pool_giveback(p, run, 1);
    return r == -EUCLEAN ? r : -ENOMEM;
}

int dp_pool_alloc_placed(dsmpool *p, unsigned order, unsigned flags, uint64_t *block) {
    uint64_t off;
    int r = pool_alloc_raw(p, order, flags, &off);
    if (r) return r;
    *block = DP_BLOCK_MK(off, order);
    /* a fresh block of the order: the common case (one warm granule)
     * inline, the rest in pool_resident */
    uint64_t bytes = (uint64_t)DP_FRAME_SIZE << order;
    if (dp_likely(dp_res_warm_one(p, off, bytes))) return 0;
    return pool_resident(p, block, bytes);
}

int dp_pool_alloc_exact(dsmpool *p, unsigned order, unsigned flags, uint64_t keep, uint64_t *block) {
    uint64_t off;
    int r = pool_alloc_raw(p, order, flags, &off);
    if (r) return r;
    *block = dp_pool_trim(p, DP_BLOCK_MK(off, order), keep); /* [exact blocks] */
    uint64_t bytes = DP_BLOCK_BYTES(*block);
    return dp_res_warm_one(p, off, bytes) ? 0 : pool_resident(p, block, bytes);
}

int dp_pool_claim(dsmpool *p, uint32_t sub, uint64_t frame, unsigned order, uint64_t *block) {
    if (sub >= p->nsub) return -EINVAL;
    int r = dp_pa_claim(&p->pa[sub], frame, order, dp_owner(p));
    if (r) return r;
    uint64_t off = p->geo.sub[sub].data_off + frame * DP_FRAME_SIZE;
    if (!dp_block_ok(p, off, (uint64_t)DP_FRAME_SIZE << order)) return -EUCLEAN; /* cannot be: checked above */
    *block = DP_BLOCK_MK(off, order);
    return 0;
}


/* resident.c [give back], one release unit: claim it whole (a few tries
 * while nobody holds any of it: a claim can miss while another owner's open
 * or close step is in the way), give back the pages of one still released
 * (counted in refill_given_back with count: its populate began; the
 * bytes there just before, resident.c [give back]).
 * Inside the caller's bracket: a death holding the unit leaves it to the
 * leak sweep, its counts and bit as they were. */
bool dp_pool_giveback_unit(dsmpool *p, uint64_t g, uint64_t by, bool count) {
    uint64_t u = dp_res_unit(p), off = p->geo.data_off + (g << DP_RES_SHIFT), frame, blk = 0;
    unsigned order = DP_RES_SHIFT - DP_FRAME_SHIFT + (unsigned)__builtin_ctzll(u);
    uint32_t k;
    bool held = false;
    if (block_sub(p, off, &k, &frame))
        for (int t = 0; t < 8 && !held; t++) {
            held = dp_pool_claim(p, k, frame, order, &blk) == 0;
            bool free_now = true;
            for (uint64_t j = 0; j < u && free_now; j++)
                free_now = dp_pool_granule_free(p, k, (frame >> (DP_RES_SHIFT - DP_FRAME_SHIFT)) + j);
            if (!held && !free_now) break; /* someone holds some of it */
            if (!held) dp_os_yield();
        }
    bool released = dp_res_any_released(p, off, u << DP_RES_SHIFT);
    if (!held && released) return false;
    if (held && released) {
        dp_res_mark_released(p, g, u); /* the unit whole ([release unit]) */
        if (dp_res_release_counted(p, g, u, count) == 0) {
            dp_res_given_back(p, g, u, by);
            by = 0;
        }
    }
    if (by) dp_res_busy_lower(p, g, u, by);
    if (held) dp_pool_free(p, blk);
    return true;
}

void dp_pool_giveback(dsmpool *p, dp_res_run run, uint64_t by) {
    uint64_t u = dp_res_unit(p);
    for (uint64_t g = run.g / u * u; g < run.g + run.n && g < p->geo.res_count; g += u) {
        if (dp_pool_giveback_unit(p, g, by, run.tried)) continue;
        /* its holder may die before it counts itself in: the sweep's */
        dp_res_stray(p, g, u);
        /* release: pairs with dp_quiet_open; a count (recover.c dp_recover_all) */
        dp_fetch_add_release(&p->hdr->sweep_needed, 1);
        if (by) dp_res_busy_lower(p, g, u, by);
    }
}

bool dp_pool_granule_free(dsmpool *p, uint32_t sub, uint64_t g) {
    return sub < p->nsub && dp_pa_granule_free(&p->pa[sub], g);
}

int dp_pool_alloc(dsmpool *p, unsigned order, uint64_t *block) {
    return dp_pool_alloc_placed(p, order, 0, block);
}

/* The sub-pool and frame of a block's offset; false if in none. */
static bool block_sub(const dsmpool *p, uint64_t off, uint32_t *sub, uint64_t *frame) {
    for (uint32_t k = 0; k < p->nsub; k++) {
        uint64_t lo = p->geo.sub[k].data_off, n = p->geo.sub[k].geom.frames;
        if (off >= lo && (off - lo) / DP_FRAME_SIZE < n) {
            *sub = k;
            *frame = (off - lo) / DP_FRAME_SIZE;
            return true;
        }
    }
    return false;
}

int dp_pool_free(dsmpool *p, uint64_t block) {
    uint32_t k;
    uint64_t frame, n = dp_block_frames(block);
    unsigned order = DP_BLOCK_ORDER(block);
    if (!n || !block_sub(p, DP_BLOCK_OFF(block), &k, &frame)) return -EINVAL;
    if (!(block & DP_BLOCK_EXACT)) return dp_pa_free(&p->pa[k], frame, order);
    int r = dp_pa_free_run(&p->pa[k], frame, order, n); /* [exact blocks] */
    /* An exact block's run (its tail is free too unless someone took it)
     * serves this CPU's next allocation of its order when the CPU's
     * reservation has none: area blocks of a few pages come and go at
     * random places, and the search for a run would otherwise walk the
     * tree. Not for other blocks: an order-0 pair or a burst keeps its
     * leaf anyway (the measurements: docs/design.md, "Page allocator"). */
    if (r == 0 && order <= 4) dp_pa_hint_freed(&p->pa[k], frame, order, dp_numa_cpu());
    return r;
}

/* n frames rounded up to what an exact word of this order can say */
static inline uint64_t frames_sayable(unsigned order, uint64_t n) {
    unsigned sh = dp_block_trim_shift(order);
    return (n + (1ull << sh) - 1) >> sh << sh;
}

uint64_t dp_pool_grow(dsmpool *p, uint64_t block, uint64_t want) {
    uint32_t k;
    uint64_t frame, n = dp_block_frames(block);
    unsigned order = DP_BLOCK_ORDER(block);
    uint64_t all = 1ull << order;
    want = frames_sayable(order, want);
    if (!n || want <= n || want > all || !block_sub(p, DP_BLOCK_OFF(block), &k, &frame) ||
        dp_pa_grow(&p->pa[k], frame, order, n, want, dp_owner(p)) != 0)
        return 0;
    /* resident.c [refill on demand]: the frames taken are held now; the
     * ones that cannot be made resident go back (the caller moves instead) */
    uint64_t from = DP_BLOCK_OFF(block) + n * DP_FRAME_SIZE;
    dp_res_run run;
    if (dp_res_ensure(p, from, (want - n) * DP_FRAME_SIZE, &run) < 0) {
        dp_pa_ungrow(&p->pa[k], frame, order, n, want);
        if (run.n) dp_pool_giveback(p, run, 1); /* [give back] */
        return 0;
    }
    return dp_block_mk_trimmed(DP_BLOCK_OFF(block), order, all - want);
}

uint64_t dp_pool_trim(dsmpool *p, uint64_t block, uint64_t keep) {
    uint32_t k;
    uint64_t frame;
    unsigned order = DP_BLOCK_ORDER(block), sh = dp_block_trim_shift(order);
    uint64_t all = 1ull << order;
    keep = frames_sayable(order, keep);
    if ((block & DP_BLOCK_EXACT) || dp_block_frames(block) != all || keep >= all || !keep ||
        (all - keep) >> sh >> DP_BLOCK_TRIM_BITS || /* more than the word can say */
        !block_sub(p, DP_BLOCK_OFF(block), &k, &frame))
        return block;
    uint64_t kept = dp_pa_trim(&p->pa[k], frame, order, keep, dp_owner(p));
    return dp_block_mk_trimmed(DP_BLOCK_OFF(block), order, all - kept);
}

typedef struct steps_ctx {
    dsmpool *p;
    int64_t slot;      /* the one slot whose lock the caller holds, or -1 */
    uint8_t *verdict;  /* per owner: 0 not asked, 1 dead (lock ours), 2 alive */
} steps_ctx;

static bool steps_dead(uint32_t owner, void *arg) {
    steps_ctx *c = arg;
    if (c->slot >= 0) return owner == (uint64_t)c->slot + 1;
    if (owner == 0 || owner > c->p->nprocs) return false;
    if (!c->verdict[owner]) c->verdict[owner] = dp_slot_take_dead(c->p, owner - 1) ? 1 : 2;
    return c->verdict[owner] == 1;
}

unsigned dp_pool_finish_steps(dsmpool *p, int64_t slot) {
    steps_ctx c = {p, slot, NULL};
    unsigned n = 0;
    if (slot >= 0) {
        for (uint32_t s = 0; s < p->nsub; s++) n += dp_pa_recover(&p->pa[s], steps_dead, &c);
        return n;
    }
    if (!dp_live_guarded(p) || !(c.verdict = calloc((size_t)p->nprocs + 1, 1))) return 0;
    pthread_mutex_lock(&p->recover_lock); /* live.c [dead iff free] */
    for (uint32_t s = 0; s < p->nsub; s++) n += dp_pa_recover(&p->pa[s], steps_dead, &c);
    for (uint32_t o = 1; o <= p->nprocs; o++)
        if (c.verdict[o] == 1) dp_slot_give_dead(p, o - 1); /* the slot's full recovery comes later */
    pthread_mutex_unlock(&p->recover_lock);
    free(c.verdict);
    return n;
}

/* ---- ownership maps: the allocator's side --------------------------------- */

uint64_t **dp_maps_new(dsmpool *p) {
    uint64_t **m = calloc(p->nsub, sizeof *m);
    if (!m) return NULL;
    for (uint32_t s = 0; s < p->nsub; s++)
        if (!(m[s] = calloc((p->geo.sub[s].geom.frames + 63) / 64, 8))) {
            dp_maps_free(p, m);
            return NULL;
        }
    return m;
}

void dp_maps_free(dsmpool *p, uint64_t **m) {
    if (!m) return;
    for (uint32_t s = 0; s < p->nsub; s++) free(m[s]);
    free(m);
}

static bool owner_live(uint32_t owner, void *arg) {
    return owner >= 1 && dp_slot_alive(arg, owner - 1);
}

void dp_pool_free_frames(dsmpool *p, uint32_t s, uint64_t *free_frames, int *largest_order) {
    dp_pa_walk w;
    dp_pa_walk_count(&p->pa[s], &w); /* (no proof: the counts alone) */
    *free_frames = w.free_frames;
    *largest_order = w.largest_free_order;
}

int dp_used_maps(dsmpool *p, uint64_t **used, char *why, size_t n, bool strict) {
    for (uint32_t s = 0; s < p->nsub; s++) {
        dp_pa_walk w;
        dp_pa_walk_tree(&p->pa[s], &w, used ? used[s] : NULL, owner_live, p);
        if (!strict) continue;
        if (w.bad) {
            snprintf(why, n, "sub-pool %u: %s", s, w.why);
            return -EUCLEAN;
        }
        if (w.orphaned) {
            snprintf(why, n, "sub-pool %u: %llu allocator steps of dead processes are unfinished; "
                     "dsmpool_recover() finishes them", s, (unsigned long long)w.orphaned);
            return -EUCLEAN;
        }
        if (w.busy) {
            snprintf(why, n, "sub-pool %u: %llu allocator steps in flight", s,
                     (unsigned long long)w.busy);
            return -EBUSY;
        }
    }
    return 0;
}

void dp_ledger_mark_owned(dsmpool *p, dp_mark_fn mark, void *arg) {
    for (uint32_t sl = 0; sl < p->nprocs; sl++) {
        uint64_t w = dp_load_acquire(&p->procs[sl].state); /* acquire: the claim CAS */
        if (DP_SLOT_STATE(w) == DP_SLOT_FREE) continue;
        uint64_t off = dp_load_acquire(&p->procs[sl].overflow); /* acquire: the linking CAS */
        for (uint64_t guard = p->geo.data_size / DP_FRAME_SIZE + 1; off; guard--) {
            if (!guard) {
                mark(arg, 0, 0, "a cycle of attachment record blocks");
                break;
            }
            mark(arg, off, DP_FRAME_SIZE, "an attachment record block");
            if (!dp_block_ok(p, off, DP_FRAME_SIZE)) break;
            off = dp_load_acquire(&((dp_recblk *)dp_at(p, off))->next);
        }
    }
}
