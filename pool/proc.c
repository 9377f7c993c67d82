/*
 * proc.c -- processes: slots, attachment records, fork, recovery.
 *
 * Rules
 *   1. Every process attached to a pool holds one slot. The slot word holds
 *      pid, the low 24 bits of the start time and the state, so one CAS
 *      claims a slot together with its owner's identity; the full start time
 *      follows in a second word (a reader that sees 0 there uses the 24 bits).
 *      A slot is dead when /proc/<pid>/stat is gone, shows a zombie, or
 *      shows another start time (pid reuse).
 *   2. Each segment attachment is recorded in the slot before the reference
 *      count is raised (PENDING), marked ACTIVE after, and marked DETACHING
 *      before the count is lowered. Recovery drops a reference only for
 *      ACTIVE records: a death between the record step and the count step
 *      can leak one reference, never drop one twice (leaks are safe;
 *      dsmpool_check() reports them as a count/record mismatch).
 *      Records are claimed by CAS (threads of a process share the slot);
 *      when the inline ones are taken, one-frame overflow blocks are taken
 *      from the pool and linked by CAS; they go back when the slot is freed.
 *   3. Recovery claims a dead slot by CAS (state RECOVERING, the recoverer's
 *      identity in the word), finishes the dead process's half-done allocator
 *      steps, returns its area caches, drops the references of its ACTIVE
 *      records, re-syncs the count of every segment its ambiguous records
 *      name (from the ACTIVE records of all other slots), destroys segments
 *      it was creating or destroying, frees its record blocks (each unlinked
 *      before it is freed) and frees the slot. Every step is idempotent, so a
 *      recoverer that dies is simply recovered in turn (and a sweep is asked
 *      for, since a recoverer works outside any bracket). A process that
 *      detaches marks its slot LEAVING first: its records no longer count.
 *   4. fork(): a child inherits the dsmpool pointer but not the slot. A
 *      pthread_atfork child handler bumps dp_fork_epoch; the first call on
 *      the pool in the child sees the epoch differ (one load) and takes a new
 *      slot and a reference on every inherited segment, in its own name.
 *   5. Process-local state: a registry of attached pools (so a second
 *      detach is recognised without touching freed memory) and a set of
 *      attached segment objects, each under a mutex; the atfork handlers
 *      take all of them (registry, then each pool, then the set) so the
 *      child never inherits a held lock.
 *
 *   6. Ownership changes of pool blocks (allocate + record, unrecord +
 *      free) are bracketed by dp_inflight_begin/end: a per-slot count of
 *      changes in progress and a sequence number of changes begun. A process
 *      that dies inside a bracket may leave a block allocated but recorded
 *      nowhere; recovery then sweeps: it snapshots every slot's (state,
 *      count, sequence), builds the allocator's map and the owners' map,
 *      and frees "allocated, owned by nothing" only if no live slot was
 *      inside a bracket and no snapshot value moved meanwhile (a seqlock:
 *      begin raises the count, then the sequence, then fences (release); end
 *      raises the sequence again, then lowers the count; the sweeper reads
 *      sequence then count, builds the maps, fences (acquire) and reads both
 *      again, so any change it saw any effect of shows as a moved sequence).
 *      One sweeper at a time (a lock word naming it; a dead holder is taken
 *      over): two could free the same frame twice.
 *
 * Memory ordering: the slot claim CAS is acq_rel (acquire: pairs with the
 * release that freed the slot, so the zeroed records are seen; release: the
 * identity is published). Records are written with release and read by
 * recovery with acquire.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dp_internal.h"
#include "dp_os.h"

unsigned dp_fork_epoch = 1;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
static dsmpool *reg_head;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void) {
    pthread_mutex_lock(&reg_lock);
    for (dsmpool *p = reg_head; p; p = p->reg_next) pthread_mutex_lock(&p->lock);
    pthread_mutex_lock(&set_lock);
}

static void atfork_parent(void) {
    pthread_mutex_unlock(&set_lock);
    for (dsmpool *p = reg_head; p; p = p->reg_next) pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&reg_lock);
}

static void atfork_child(void) {
    dp_fork_epoch++; /* single-threaded here: a plain write is enough */
    atfork_parent();
}

static void atfork_install(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

void dp_registry_add(dsmpool *pool) {
    pthread_once(&atfork_once, atfork_install);
    pthread_mutex_lock(&reg_lock);
    atomic_store_explicit(&pool->fork_epoch, dp_fork_epoch, memory_order_relaxed);
    pool->reg_next = reg_head;
    reg_head = pool;
    pthread_mutex_unlock(&reg_lock);
}

bool dp_registry_take(dsmpool *pool) {
    bool found = false;
    pthread_mutex_lock(&reg_lock);
    for (dsmpool **pp = &reg_head; *pp; pp = &(*pp)->reg_next)
        if (*pp == pool) {
            *pp = pool->reg_next;
            found = true;
            break;
        }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

/* ---- the set of attached segment objects (open addressing) ------------ */

#define SET_TOMB ((uintptr_t)1)
static uintptr_t *set_tab;
static size_t set_cap, set_used;

static size_t set_hash(uintptr_t v) { return (size_t)((v >> 4) * 0x9e3779b97f4a7c15ull); }

static bool set_grow(void) {
    size_t ncap = set_cap ? set_cap * 2 : 64;
    uintptr_t *nt = calloc(ncap, sizeof *nt);
    if (!nt) return false;
    for (size_t i = 0; i < set_cap; i++) {
        uintptr_t v = set_tab[i];
        if (v <= SET_TOMB) continue;
        size_t j = set_hash(v) & (ncap - 1);
        while (nt[j]) j = (j + 1) & (ncap - 1);
        nt[j] = v;
    }
    size_t live = 0;
    for (size_t i = 0; i < ncap; i++) live += nt[i] != 0;
    free(set_tab);
    set_tab = nt;
    set_cap = ncap;
    set_used = live;
    return true;
}

static size_t set_find(uintptr_t v) { /* index of v, or set_cap */
    if (!set_cap) return 0;
    for (size_t j = set_hash(v) & (set_cap - 1), k = 0; k < set_cap; k++, j = (j + 1) & (set_cap - 1)) {
        if (set_tab[j] == v) return j;
        if (!set_tab[j]) break;
    }
    return set_cap;
}

bool dp_segset_add(struct dsmpool_seg *seg) {
    uintptr_t v = (uintptr_t)seg;
    pthread_mutex_lock(&set_lock);
    bool ok = true;
    if ((set_used + 1) * 2 > set_cap) ok = set_grow();
    if (ok) {
        size_t j = set_hash(v) & (set_cap - 1);
        while (set_tab[j] > SET_TOMB) j = (j + 1) & (set_cap - 1);
        if (!set_tab[j]) set_used++;
        set_tab[j] = v;
    }
    pthread_mutex_unlock(&set_lock);
    return ok;
}

bool dp_segset_take(struct dsmpool_seg *seg) {
    pthread_mutex_lock(&set_lock);
    size_t j = set_find((uintptr_t)seg);
    bool found = set_cap && j < set_cap;
    if (found) set_tab[j] = SET_TOMB;
    pthread_mutex_unlock(&set_lock);
    return found;
}

bool dp_segset_has(struct dsmpool_seg *seg) {
    pthread_mutex_lock(&set_lock);
    size_t j = set_find((uintptr_t)seg);
    bool found = set_cap && j < set_cap;
    pthread_mutex_unlock(&set_lock);
    return found;
}

/* ---- slots -------------------------------------------------------------- */

uint32_t dp_owner(const dsmpool *pool) { return pool->slot + 1; }

static bool slot_word_dead(dsmpool *p, uint32_t i, uint64_t w) {
    unsigned st = DP_SLOT_STATE(w);
    if (st == DP_SLOT_FREE) return false;
    pid_t pid = DP_SLOT_PID(w);
    if (pid <= 0) return true;
    uint64_t start;
    bool zombie = false;
    int r = dp_os_proc_start(pid, &start, &zombie);
    if (r == -ESRCH) return true;
    if (r != 0) return !dp_os_pid_alive(pid); /* /proc unreadable: ask kill(0) */
    if (zombie) return true;
    uint64_t full = i < p->nprocs ? dp_load_relaxed(&p->procs[i].start) : 0; /* relaxed: identity */
    if (st == DP_SLOT_LIVE && full) return full != start;
    return (start & 0xffffff) != DP_SLOT_START_LO(w);
}

bool dp_slot_dead(dsmpool *pool, uint32_t slot) {
    if (slot >= pool->nprocs) return false;
    /* acquire: pairs with the claim CAS, so the start word is the owner's */
    return slot_word_dead(pool, slot, dp_load_acquire(&pool->procs[slot].state));
}

bool dp_slot_live(dsmpool *pool, uint32_t slot) {
    if (slot >= pool->nprocs) return false;
    uint64_t w = dp_load_acquire(&pool->procs[slot].state); /* acquire: pairs with the claim CAS */
    return DP_SLOT_STATE(w) != DP_SLOT_FREE && !slot_word_dead(pool, slot, w);
}

int dp_slot_claim(dsmpool *p) {
    pid_t pid = getpid();
    uint64_t start = 0;
    dp_os_proc_start(pid, &start, NULL);
    for (int round = 0; round < 2; round++) {
        uint32_t n = p->nprocs, s0 = (uint32_t)pid % n;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t i = (s0 + k) % n;
            dp_proc *sl = &p->procs[i];
            uint64_t w = dp_load_relaxed(&sl->state); /* relaxed: the CAS validates */
            if (DP_SLOT_STATE(w) != DP_SLOT_FREE) continue;
            /* acq_rel: see the file comment */
            if (!dp_cas_acq_rel(&sl->state, &w, DP_SLOT_WORD(pid, start, DP_SLOT_LIVE))) continue;
            dp_store_relaxed(&sl->start, start);
            p->slot = i;
            p->pid = pid;
            p->has_slot = true;
            return 0;
        }
        if (round == 0 && dp_recover_all(p) == 0) break;
    }
    return dp_fail(-ENOSPC, "all %u process slots are held by live processes; raise max_procs",
                   p->nprocs);
}

bool dp_block_ok(const dsmpool *pool, uint64_t off, uint64_t len) {
    return off % DP_FRAME_SIZE == 0 && off >= pool->geo.data_off &&
           dp_range_ok(off - pool->geo.data_off, len, pool->geo.data_size);
}

/* Visit every record word of a slot; stops at a corrupt link. */
static void slot_records(dsmpool *p, uint32_t slot, void (*fn)(dsmpool *, dp_a64 *, void *),
                         void *arg) {
    dp_proc *sl = &p->procs[slot];
    for (int i = 0; i < DP_REC_INLINE; i++) fn(p, &sl->rec[i], arg);
    uint64_t off = dp_load_acquire(&sl->overflow); /* acquire: pairs with the linking CAS */
    for (uint64_t guard = p->geo.data_size / DP_FRAME_SIZE; off && guard; guard--) {
        if (!dp_block_ok(p, off, DP_FRAME_SIZE)) return;
        dp_recblk *b = dp_at(p, off);
        for (unsigned i = 0; i < DP_REC_PER_BLOCK; i++) fn(p, &b->rec[i], arg);
        off = dp_load_acquire(&b->next); /* acquire: pairs with the linking CAS */
    }
}

static bool rec_try(dp_a64 *r, uint64_t rec) {
    uint64_t z = 0;
    /* release: recovery (acquire) must see the record once it sees our death */
    return dp_load_relaxed(r) == 0 && dp_cas_release(r, &z, rec);
}

uint64_t dp_frame_link(dsmpool *p, dp_a64 *link) {
    uint64_t off = dp_load_acquire(link); /* acquire: pairs with the linking CAS below */
    if (off) return off;
    uint64_t blk;
    dp_inflight_begin(p); /* until the frame is linked or freed (rule 6) */
    if (dp_pool_alloc(p, 0, &blk) != 0) {
        dp_inflight_end(p);
        return 0;
    }
    memset(dp_at(p, DP_BLOCK_OFF(blk)), 0, DP_FRAME_SIZE);
    uint64_t z = 0;
    /* release: publishes the zeroed frame with its link */
    if (dp_cas_release(link, &z, DP_BLOCK_OFF(blk))) {
        off = DP_BLOCK_OFF(blk);
    } else { /* someone linked one first: use theirs */
        dp_pool_free(p, blk);
        off = z;
    }
    dp_inflight_end(p);
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

/* Free a slot's overflow blocks and clear its records (the slot is ours,
 * or claimed for recovery: nobody else writes it). */
static void slot_clear(dsmpool *p, uint32_t slot, bool bracket) {
    dp_proc *sl = &p->procs[slot];
    if (bracket) dp_inflight_begin(p);
    /* one block at a time, unlinked before it is freed: whoever stops in the
     * middle leaves a chain of blocks still owned, or one unowned block that
     * the sweep returns -- never a link to a freed block */
    uint64_t off = dp_load_acquire(&sl->overflow); /* acquire: pairs with the linking CAS */
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
    if (bracket) dp_inflight_end(p);
    for (int i = 0; i < DP_REC_INLINE; i++) dp_store_relaxed(&sl->rec[i], 0);
    dp_store_relaxed(&sl->start, 0);
}

void dp_slot_release(dsmpool *p) {
    /* LEAVING: our records no longer count (the segments are detached), and a
     * recovery that finds us dead from here on finishes the clearing */
    dp_a64 *st = &p->procs[p->slot].state;
    uint64_t w = dp_load_relaxed(st);
    dp_cas_acq_rel(st, &w, (w & ~0xffull) | DP_SLOT_LEAVING); /* acq_rel: a state change */
    slot_clear(p, p->slot, true);
    p->has_slot = false;
    /* release: the cleared records are visible to the next claimer (acquire) */
    dp_store_release(&p->procs[p->slot].state, DP_SLOT_FREE);
}

/* ---- rule 6: ownership brackets and the leak sweep --------------------- */

void dp_inflight_begin(dsmpool *p) {
    if (!p->has_slot) return; /* recovery without a slot: RECOVERING protects it */
    dp_proc *sl = &p->procs[p->slot];
    /* inflight first, then opseq: the sweeper reads opseq, then inflight, so
     * it either sees the bracket open or sees opseq move on its second read */
    dp_fetch_add_acq_rel(&sl->inflight, 1);
    dp_fetch_add_acq_rel(&sl->opseq, 1);
    /* release fence: pairs with the sweeper's acquire fence; any write of the
     * bracket that the sweeper sees implies it sees opseq move */
    atomic_thread_fence(memory_order_release);
}

void dp_inflight_end(dsmpool *p) {
    if (!p->has_slot) return;
    dp_proc *sl = &p->procs[p->slot];
    dp_fetch_add_acq_rel(&sl->opseq, 1); /* a bracket that opened and closed between reads shows */
    /* release: the bracket's records are visible to whoever reads the count */
    dp_fetch_add_acq_rel(&sl->inflight, (uint64_t)-1);
}

typedef struct snap {
    uint64_t state, opseq;
} snap;

/* Only one process sweeps at a time: two sweeps could free the same leaked
 * frame twice, the second after someone had allocated it again. The lock
 * word names its holder (a slot word: pid + start); a dead holder is taken
 * over. */
static bool sweep_lock(dsmpool *p, uint64_t me) {
    uint64_t w = 0;
    /* acq_rel: pairs with the release of the previous sweeper */
    if (dp_cas_acq_rel(&p->hdr->sweep_owner, &w, me)) return true;
    if (!slot_word_dead(p, UINT32_MAX, w)) return false;
    return dp_cas_acq_rel(&p->hdr->sweep_owner, &w, me);
}

/* Free the frames that are allocated but owned by nothing, if it is safe to
 * decide so now (rule 6). Returns true when the sweep ran to the end. */
static bool sweep(dsmpool *p) {
    snap *s1 = calloc(p->nprocs, sizeof *s1);
    uint64_t **used = dp_maps_new(p), **owned = dp_maps_new(p);
    bool done = false;
    char why[200];
    if (!s1 || !used || !owned) goto out;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        dp_proc *sl = &p->procs[i];
        s1[i].state = dp_load_acquire(&sl->state); /* acquire: pairs with claim/release */
        s1[i].opseq = dp_load_acquire(&sl->opseq);
        uint64_t infl = dp_load_acquire(&sl->inflight); /* acquire: pairs with dp_inflight_end */
        unsigned st = DP_SLOT_STATE(s1[i].state);
        if (st == DP_SLOT_RECOVERING || (st != DP_SLOT_FREE && infl && !slot_word_dead(p, i, s1[i].state)))
            goto out; /* a live process is inside a bracket, or a recovery runs: later */
    }
    if (dp_used_maps(p, used, why, sizeof why, false) != 0 ||
        dp_owned_maps(p, owned, why, sizeof why) != 0)
        goto out;
    atomic_thread_fence(memory_order_acquire); /* pairs with dp_inflight_begin's release fence */
    for (uint32_t i = 0; i < p->nprocs; i++) {
        uint64_t st = dp_load_relaxed(&p->procs[i].state);
        if (st != s1[i].state || dp_load_relaxed(&p->procs[i].opseq) != s1[i].opseq ||
            (DP_SLOT_STATE(st) != DP_SLOT_FREE && dp_load_relaxed(&p->procs[i].inflight) &&
             !slot_word_dead(p, i, st)))
            goto out;
    }
    static const unsigned unit_orders[] = {0, 5, 9, 13, 17, 21, 25, 29, 33};
    for (uint32_t s = 0; s < p->nsub; s++) {
        uint64_t frames = p->geo.sub[s].geom.frames;
        for (uint64_t f = 0; f < frames;) {
            uint64_t bit = (used[s][f / 64] & ~owned[s][f / 64]) >> (f % 64) & 1;
            if (!bit) {
                f++;
                continue;
            }
            /* free it as the unit it was allocated as: a leaf bit, or a FULL child */
            uint64_t step = 1;
            for (unsigned k = 0; k < sizeof unit_orders / sizeof *unit_orders; k++) {
                uint64_t n = 1ull << unit_orders[k];
                if (f % n || f + n > frames) break;
                if (dp_pa_free(&p->pa[s], f, unit_orders[k]) == 0) {
                    step = n;
                    break;
                }
            }
            f += step;
        }
    }
    done = true;
out:
    free(s1);
    dp_maps_free(p, used);
    dp_maps_free(p, owned);
    return done;
}

/* Rule 4: the first call in a fork()ed child. Caller holds pool->lock. */
static int adopt(dsmpool *p) {
    p->has_slot = false; /* the inherited slot is the parent's */
    int r = dp_slot_claim(p);
    if (r) return r;
    for (struct dsmpool_seg *s = p->segs_head; s; s = s->next) dp_seg_adopt(p, s);
    return 0;
}

int dp_self(dsmpool *pool) {
    /* acquire: pairs with the release below, so the slot fields are ours */
    if (atomic_load_explicit(&pool->fork_epoch, memory_order_acquire) == dp_fork_epoch) return 0;
    pthread_mutex_lock(&pool->lock);
    int r = 0;
    if (atomic_load_explicit(&pool->fork_epoch, memory_order_relaxed) != dp_fork_epoch) {
        r = adopt(pool);
        if (r == 0) atomic_store_explicit(&pool->fork_epoch, dp_fork_epoch, memory_order_release);
    }
    pthread_mutex_unlock(&pool->lock);
    return r;
}

/* ---- recovery ----------------------------------------------------------- */

static bool owner_is(uint32_t owner, void *arg) { return owner == *(uint32_t *)arg; }

static void recover_slot(dsmpool *p, uint32_t slot) {
    uint32_t owner = slot + 1;
    for (uint32_t s = 0; s < p->nsub; s++) dp_pa_recover(&p->pa[s], owner_is, &owner, owner);
    dp_area_recover_slot(p, slot); /* before references drop: an area may go with them */
    dp_seg_recover_slot(p, slot);
    /* The slot being recovered is ours to clear (RECOVERING); the recoverer
     * may hold no slot of its own, so no bracket: a sweep never runs while a
     * slot is RECOVERING without seeing its state move. */
    slot_clear(p, slot, false);
}

int dp_recover_all(dsmpool *p) {
    pid_t me = getpid();
    uint64_t mystart = 0;
    dp_os_proc_start(me, &mystart, NULL);
    int n = 0;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        dp_proc *sl = &p->procs[i];
        uint64_t w = dp_load_acquire(&sl->state); /* acquire: pairs with the owner's claim CAS */
        if (!slot_word_dead(p, i, w)) continue;
        /* acq_rel: exclusive claim; acquire sees everything the dead owner released */
        unsigned was = DP_SLOT_STATE(w);
        if (!dp_cas_acq_rel(&sl->state, &w, DP_SLOT_WORD(me, mystart, DP_SLOT_RECOVERING)))
            continue;
        /* release fence: a sweeper that sees any of our writes below sees the
         * slot RECOVERING (pairs with the sweeper's acquire fence) */
        atomic_thread_fence(memory_order_release);
        /* a dead owner inside a bracket, or a dead recoverer (which has no
         * bracket), may have left a block unowned */
        if (dp_load_acquire(&sl->inflight) || was == DP_SLOT_RECOVERING) /* acquire: dp_inflight_end */
            dp_store_relaxed(&p->hdr->sweep_needed, 1);
        recover_slot(p, i);
        dp_store_relaxed(&sl->inflight, 0);
        dp_store_release(&sl->state, DP_SLOT_FREE); /* release: pairs with the next claim */
        dp_fetch_add_relaxed(&p->hdr->procs_recovered, 1);
        n++;
    }
    /* relaxed: a flag; a sweep that finds nothing to do is harmless */
    uint64_t token = DP_SLOT_WORD(me, mystart, DP_SLOT_RECOVERING);
    if (dp_load_relaxed(&p->hdr->sweep_needed) && sweep_lock(p, token)) {
        if (sweep(p)) dp_store_relaxed(&p->hdr->sweep_needed, 0);
        dp_store_release(&p->hdr->sweep_owner, 0); /* release: pairs with sweep_lock */
    }
    return n;
}

int dsmpool_recover(dsmpool *pool) {
    dp_clear_error();
    if (!pool || pool->magic != DP_POOL_MAGIC) return dp_fail(-EINVAL, "not an attached pool");
    int r = dp_self(pool);
    if (r) return r;
    dp_recover_all(pool);
    return 0;
}

/* Used by dp_seg_recover_slot through slot_records. */
void dp_slot_records(dsmpool *p, uint32_t slot, void (*fn)(dsmpool *, dp_a64 *, void *), void *arg) {
    slot_records(p, slot, fn, arg);
}
