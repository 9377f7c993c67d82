/*
 * recover.c -- recovery of dead processes, and the leak sweep.
 *
 * Layer: the top, below the checker (stats.c), which calls its recovery
 * and its ownership maps. It calls each layer's own recovery by name,
 * downwards; the layers below reach it only through the ledger's reclaim
 * hook (proc.c), registered here.
 *
 * Rules
 *   [dead slots] A slot is recovered only by a process that holds the slot's liveness
 *      lock, which it can take only when the owner is dead (live.c [dead iff free]).
 *      Holding it, the recoverer marks the slot RECOVERING and releases what
 *      the owner held, from the top layer down:
 *        areas     its cache records and the registry entries it was
 *                  filling or emptying (area_recover.c [recovery]);
 *        segments  its references, re-synced counts where its records were
 *                  ambiguous, descriptors it was creating or destroying;
 *        allocator its half-done open/close steps (palloc.c [recovery]);
 *        ledger    its attachment records and record blocks;
 *      then stores FREE and gives the lock back (proc.c [slots]). Every step is
 *      idempotent: a recoverer that dies leaves the slot RECOVERING with its
 *      lock free, and the next recoverer does it all again.
 *   [never the living] Nothing is recovered while its owner lives: unguarded slots (live.c
 *      [leak sweep]) are never recovered, and a process without a liveness lock of
 *      its own recovers nothing (it cannot tell).
 *   [leak sweep] A dead owner inside a bracket, or a dead recoverer, may have left a
 *      block allocated but owned by nothing (proc.c [brackets]): sweep_needed is
 *      set, and the leak sweep runs under DP_LOCK_SWEEP (one sweeper in all
 *      processes; two could free one leaked frame twice). It frees what the
 *      allocator says is allocated and no owner records, and only inside a
 *      quiet window (proc.c [quiet windows]): a block between its allocation and its
 *      record belongs to a bracket that is open, so the window refuses.
 *      Under the same lock, in windows of its own, it gives back the area
 *      chunks that deaths inside area operations lost (area_recover.c [lost chunks];
 *      hdr->lost_due; stats: lost_chunks_reclaimed). That flag does not
 *      close the checker's windows: a lost chunk is on no list, so nothing
 *      the checker proves depends on it. In the same window it notes every
 *      granule counted busy (resident.c [busy]: in a quiet window only the
 *      dead's counts are left) or marked stray (resident.c [give back]) and
 *      then settles them: a released one's pages go back (proc.c's
 *      give-back) and its bit off, and the counts seen are taken out; one
 *      that someone holds keeps them, and the sweep stays due.
 *   [never half-way] Recovery never gives up on a slot half-way: what it cannot finish
 *      now stays and runs again on the next call, and is counted. A
 *      reference count that cannot be settled because a live process is
 *      attaching or detaching that very segment (it may be stopped) leaves
 *      the slot RECOVERING with its ambiguous records in place
 *      (stats: procs_recovering, recoveries_deferred); a sweep whose maps
 *      could not be built, or whose window never went quiet, stays due
 *      (sweep_needed; stats: sweep_due), and so does an area's lost sweep
 *      run by a process without a slot of its own (the last one leaving).
 *      sweep_needed counts the times it was made due and stays set while
 *      the sweep runs (so a checker elsewhere does not judge the frames it
 *      is returning); the sweep clears it by a CAS from the count it began
 *      with, so a unit made stray meanwhile keeps it due.
 *
 * Injection point: "recover.sweep.quiet" (the sweep's window held, what it
 * frees found, nothing freed yet: a checker beside it must not cry wolf).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_top.h"
#include "dp_os.h"

/* ---- ownership maps (the sweep's and the checker's) ----------------------- */

typedef struct own_ctx {
    dsmpool *p;
    uint64_t **owned;
    int err;
    char *why;
    size_t n;
} own_ctx;

static void own_fail(own_ctx *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void own_fail(own_ctx *c, int err, const char *fmt, ...) {
    if (c->err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, c->n, fmt, ap);
    va_end(ap);
    c->err = err;
}

/* Mark [off, off+len) as owned; overlap with an earlier owner is an error. */
static void own_mark(void *arg, uint64_t off, uint64_t len, const char *what) {
    own_ctx *c = arg;
    dsmpool *p = c->p;
    if (c->err) return;
    if (!len) {
        own_fail(c, -EUCLEAN, "%s", what); /* a layer found damage it could not walk past */
        return;
    }
    if (!dp_block_ok(p, off, len)) {
        own_fail(c, -EUCLEAN, "%s at offset %llu is outside the data", what, (unsigned long long)off);
        return;
    }
    for (uint32_t s = 0; s < p->nsub; s++) {
        uint64_t lo = p->geo.sub[s].data_off, n = p->geo.sub[s].geom.frames;
        if (off < lo || (off - lo) / DP_FRAME_SIZE >= n) continue;
        uint64_t f0 = (off - lo) / DP_FRAME_SIZE, nf = len / DP_FRAME_SIZE;
        if (f0 + nf > n) {
            own_fail(c, -EUCLEAN, "%s crosses the end of sub-pool %u", what, s);
            return;
        }
        for (uint64_t f = f0; f < f0 + nf; f++) {
            uint64_t bit = 1ull << (f % 64);
            if (c->owned[s][f / 64] & bit) {
                own_fail(c, -EUCLEAN, "%s overlaps another owner at frame %llu of sub-pool %u",
                         what, (unsigned long long)f, s);
                return;
            }
            c->owned[s][f / 64] |= bit;
        }
        return;
    }
}

int dp_owned_maps(dsmpool *p, uint64_t **owned, char *why, size_t n) {
    own_ctx c = {p, owned, 0, why, n};
    dp_area_mark_owned(p, own_mark, &c);
    dp_seg_mark_owned(p, own_mark, &c);
    dp_ledger_mark_owned(p, own_mark, &c);
    return c.err;
}


/* [dead slots], the layers from the top. false: a step must wait for a live
 * process ([never half-way]); the slot's records stay for the next call. */
static bool recover_slot(dsmpool *p, uint32_t slot) {
    dp_area_recover_slot(p, slot); /* before references drop: an area may go with them */
    bool done = dp_seg_recover_slot(p, slot);
    dp_pool_finish_steps(p, slot);
    if (!done) return false;
    /* The slot is ours to clear (RECOVERING, its lock ours); the recoverer
     * may hold no slot of its own, so no bracket: a quiet window never opens
     * while a slot is RECOVERING under a held lock. */
    dp_slot_clear(p, slot, false);
    return true;
}

/* resident.c [busy], [give back]: the granules that the dead left counted
 * busy, or that a give-back left stray, as the sweep's quiet window saw
 * them: each granule's count (n of them). */
typedef struct busy_left {
    uint64_t g;
    uint32_t count;
} busy_left;

static busy_left *busy_seen(dsmpool *p, size_t *n) {
    size_t cap = 0;
    busy_left *v = NULL;
    *n = 0;
    for (uint64_t g = 0; g < p->geo.res_count; g++) {
        uint64_t w = dp_res_load(p, g);
        unsigned b = DP_RES_BUSY(w);
        if (!b && !(w & DP_RES_STRAY)) continue;
        if (*n == cap) {
            busy_left *nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof *v);
            if (!nv) {
                free(v);
                *n = SIZE_MAX;
                return NULL;
            }
            v = nv;
        }
        v[(*n)++] = (busy_left){g, b};
    }
    return v;
}

/* Settle what the dead (and give-backs) left ([leak sweep]): a released
 * granule's pages go back and its stray bit off (its unit claimed whole, in
 * a bracket of ours: proc.c's give-back), and each count the window saw is
 * taken out -- only that many: a live populator may have counted itself in
 * since. A released unit that someone holds keeps its counts and bit:
 * false, and the sweep stays due. */
static bool busy_settle(dsmpool *p, const busy_left *v, size_t n) {
    uint64_t u = dp_res_unit(p);
    bool all = true;
    dp_bracket_open(p);
    for (size_t i = 0; i < n;) {
        uint64_t g0 = v[i].g / u * u;
        size_t j = i;
        while (j < n && v[j].g < g0 + u) j++; /* the unit's granules: v[i..j) */
        if (dp_pool_giveback_unit(p, g0, 0, true))
            for (size_t k = i; k < j; k++) dp_res_busy_lower(p, v[k].g, 1, v[k].count);
        else
            all = false;
        i = j;
    }
    dp_bracket_close(p);
    return all;
}

/* Free the frames that are allocated but owned by nothing, if it is safe to
 * decide so now ([leak sweep]), then settle what the dead left counted busy.
 * Returns true when the sweep ran to the end. */
static bool sweep(dsmpool *p) {
    uint64_t **used = dp_maps_new(p), **owned = dp_maps_new(p);
    dp_quiet q = {0};
    bool done = false;
    char why[200];
    uint64_t hint[DSMPOOL_MAX_NODES], nrel[DSMPOOL_MAX_NODES];
    busy_left *busy = NULL;
    size_t nbusy = 0;
    /* a give-back claims in a bracket of its own: a process without a slot
     * leaves the sweep due for one that has */
    if (!p->has_slot || !used || !owned || dp_quiet_open(p, &q, true) != 0) goto out;
    for (uint32_t s = 0; s < p->nsub; s++) { /* resident.c's crash bound: a death inside a mark */
        hint[s] = dp_res_hint(p, s);
        nrel[s] = dp_res_released_in(p, s);
    }
    if (dp_used_maps(p, used, why, sizeof why, false) != 0) goto out;
    if (dp_owned_maps(p, owned, why, sizeof why) != 0) goto out; /* damage: leave it to check() */
    busy = busy_seen(p, &nbusy);
    if (nbusy == SIZE_MAX) goto out;
    if (!dp_quiet_holds(p, &q)) goto out;
    DP_INJECT("recover.sweep.quiet"); /* (what it frees found; nothing freed yet) */
    for (uint32_t s = 0; s < p->nsub; s++) dp_res_hint_fix(p, s, hint[s], nrel[s]);
    static const unsigned unit_orders[] = {0, 5, 9, 13, 17, 21, 25, 29, 33};
    for (uint32_t s = 0; s < p->nsub; s++) {
        uint64_t frames = p->geo.sub[s].geom.frames;
        for (uint64_t f = 0; f < frames;) {
            uint64_t bit = (used[s][f / 64] & ~owned[s][f / 64]) >> (f % 64) & 1;
            if (!bit) {
                f++;
                continue;
            }
            /* free it as the unit it was allocated as: a leaf bit, or a FULL
             * child; not as a leaf's or a 2 MiB node's where the granule's
             * tree pages were never made resident (palloc.c [lazy tree]: no
             * block is held there, and the read would bring them in) */
            uint64_t step = 1, g = ((p->geo.sub[s].data_off - p->geo.data_off) >> DP_RES_SHIFT) + (f >> 9);
            bool notree = dp_res_load(p, g) & DP_RES_NOTREE;
            for (unsigned k = 0; k < sizeof unit_orders / sizeof *unit_orders; k++) {
                uint64_t n = 1ull << unit_orders[k];
                if (f % n || f + n > frames) break;
                if (notree && unit_orders[k] < 9) continue;
                if (dp_pool_free(p, DP_BLOCK_MK(p->geo.sub[s].data_off + f * DP_FRAME_SIZE, unit_orders[k])) == 0) {
                    step = n;
                    break;
                }
            }
            f += step;
        }
    }
    dp_quiet_close(&q); /* (the window was believed; what follows changes the pool) */
    done = nbusy ? busy_settle(p, busy, nbusy) : true;
    dp_area_sweep_tags(p);
out:
    free(busy);
    dp_quiet_close(&q);
    dp_maps_free(p, used);
    dp_maps_free(p, owned);
    return done;
}

/* The area chunks that deaths inside operations lost (area_recover.c [lost chunks]; it
 * opens windows of its own). lost_due counts the deaths that asked for it:
 * it goes back to 0 only from the value this sweep started from, so a
 * death counted meanwhile, or a sweeper that dies, leaves it due. */
static void sweep_lost(dsmpool *p) {
    uint64_t due = dp_load_acquire(&p->hdr->lost_due); /* acquire: pairs with dp_area_recover_slot's increment */
    if (!due) return;
    dp_area_scratch sc = {0};
    size_t got = 0;
    if (dp_area_sweep_lost(p, &sc, &got)) dp_cas_acq_rel(&p->hdr->lost_due, &due, 0); /* acq_rel: as above */
    dp_fetch_add_relaxed(&p->hdr->lost_reclaimed, got); /* relaxed: a counter */
    dp_area_scratch_free(&sc);
}

int dp_recover_all(dsmpool *p) {
    if (!dp_live_guarded(p)) return 0; /* [never the living] */
    pthread_mutex_lock(&p->recover_lock); /* live.c [dead iff free] */
    pid_t me = dp_os_getpid();
    int n = 0;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        dp_proc *sl = &p->procs[i];
        if (!dp_slot_take_dead(p, i)) continue;
        uint64_t w = dp_load_acquire(&sl->state); /* acquire: all the dead owner released */
        unsigned was = DP_SLOT_STATE(w);
        /* acq_rel: nobody else writes this word while we hold the lock; the
         * release publishes RECOVERING before our first change (quiet windows) */
        dp_cas_acq_rel(&sl->state, &w, DP_SLOT_WORD(me, 0, DP_SLOT_RECOVERING));
        dp_fence_release(); /* pairs with dp_quiet_holds' acquire fence */
        /* a dead owner inside a bracket, or a dead recoverer, may have left a
         * block unowned ([leak sweep]) */
        if (dp_load_acquire(&sl->inflight) || was == DP_SLOT_RECOVERING) /* acquire: dp_bracket_close */
            /* release: pairs with dp_quiet_open; a count (dp_recover_all) */
            dp_fetch_add_release(&p->hdr->sweep_needed, 1);
        if (!recover_slot(p, i)) { /* [never half-way]: stays RECOVERING, its lock free: the next call goes on */
            dp_fetch_add_relaxed(&p->hdr->recover_deferred, 1); /* relaxed: a counter */
            dp_slot_give_dead(p, i);
            continue;
        }
        dp_store_relaxed(&sl->inflight, 0);
        dp_store_release(&sl->state, DP_SLOT_FREE); /* release: pairs with dp_slot_claim's CAS of the next owner */
        dp_slot_give_dead(p, i);
        dp_fetch_add_relaxed(&p->hdr->procs_recovered, 1); /* relaxed: a counter */
        n++;
    }
    /* relaxed: a flag; a sweep that finds nothing to do is harmless */
    if (dp_load_relaxed(&p->hdr->sweep_needed) && dp_live_take(p, DP_LOCK_SWEEP) == 0) {
        /* sweep_needed counts the times it was made due: cleared only if
         * nobody made it due again while the sweep ran (a stray unit marked
         * then: proc.c), so such a unit keeps it due for the next sweep
         * instead of being cleared unseen. It stays set during the sweep, so
         * a checker elsewhere does not judge frames the sweep is returning
         * (dp_quiet_open). acquire: pairs with dp_pool_giveback's release; acq_rel
         * CAS: the clear is ordered after the sweep's work. */
        uint64_t due = dp_load_acquire(&p->hdr->sweep_needed);
        if (due && sweep(p)) dp_cas_acq_rel(&p->hdr->sweep_needed, &due, 0);
        dp_live_give(p, DP_LOCK_SWEEP);
    }
    pthread_mutex_unlock(&p->recover_lock);
    /* The lost sweep runs outside recover_lock: the area reference it takes
     * may need a record frame, and the allocator may finish dead processes'
     * steps for it, which takes recover_lock. One thread of this process at
     * a time (lost_lock: the sweep lock is shared by our threads), one
     * process at a time (the sweep lock). relaxed: a count checked again */
    if (dp_load_relaxed(&p->hdr->lost_due) && pthread_mutex_trylock(&p->lost_lock) == 0) {
        if (dp_live_take(p, DP_LOCK_SWEEP) == 0) {
            sweep_lost(p);
            dp_live_give(p, DP_LOCK_SWEEP);
        }
        pthread_mutex_unlock(&p->lost_lock);
    }
    return n;
}

/* A recovery another thread of the parent was running is not the child's:
 * its locks are not taken around fork (a recovery may take a while), and
 * start free in the child (the ledger's lock-rank table). */
static void recover_locks_new(dsmpool *p) {
    pthread_mutex_init(&p->recover_lock, NULL);
    pthread_mutex_init(&p->lost_lock, NULL);
}
static void recover_fork_child(void) { dp_ledger_each_pool(recover_locks_new); }
static const dp_fork_ops recover_fork = {DP_RANK_NONE, NULL, NULL, recover_fork_child, recover_fork_child};

void dp_recover_layer_init(void) {
    dp_ledger_set_reclaim(dp_recover_all);
    dp_ledger_on_fork(&recover_fork);
}

int dsmpool_recover(dsmpool *pool) {
    dp_clear_error();
    if (!pool || pool->magic != DP_POOL_MAGIC) return dp_fail(-EINVAL, "not an attached pool");
    int r = dp_self(pool);
    if (r) return r;
    dp_recover_all(pool);
    return 0;
}
