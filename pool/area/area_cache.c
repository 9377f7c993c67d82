/*
 * area_cache.c -- thread caches: each thread's cache record of an area (a
 * free list and a bump range per class, in the control block's record
 * pages, where recovery finds it), the operations that bracket every use of
 * one, and how a cache gives its chunks back.
 *
 * Layer: areas, above the span stacks. area_life.c registers
 * dp_ar_trim_thread as the segment layer's trim hook, and takes
 * dp_ar_reg_lock around fork.
 *
 * Shared state: a cache record (ar_cache: 87 classes x 24 B and one line,
 * padded to a line, 2176 B; 7 to a 16 KiB record page, area_registry.c) is
 * an owner word, an operation sequence, the asked/given counters
 * (area_life.c [accounting]), and per class a free list threaded through
 * the free chunks (head + advisory count) and a bump range in the current
 * span, [entry + 1:26][next index:19][left:19]. Process-local: an ar_tc per
 * (thread, area), on the thread's list and on the area's.
 *
 * Rules
 *   [records] A thread's first call on an area claims a free record by one
 *      CAS on its owner word ((slot + 1) | tid << 32); a record page is
 *      linked when every record of the pages before it is held. A thread
 *      that finds none free (after recovering dead processes, whose caches
 *      may hold them all) takes the shared path instead (area_shared.c
 *      [shared path]) and looks again now and then. A record is given up
 *      drained, so a free one is empty ([give back]).
 *   [one writer] Only the owning thread writes its cache record: relaxed
 *      loads and stores, no read-modify-write, no lock, no system call
 *      (area_alloc.c [hot path]). Recovery reads a dead owner's record only
 *      after taking it by CAS, every offset in it validated first.
 *   [operations] Every alloc, free, flush and cache drain runs inside its
 *      cache record's operation: seq made odd (a relaxed store, then a fence
 *      that keeps the operation's accesses after it), the area state read,
 *      the work, seq made even (release). With area_life.c [destroy] this
 *      is an asymmetric Dekker fence (the destroyer's side is membarrier),
 *      and it is the seqlock the checker reads (proc.c [quiet windows];
 *      area_recover.c [quiet]): no RMW on the hot path.
 *   [drain] A list that holds more than two batches (cls_batch: up to 64
 *      chunks) pushes one batch back on their spans' stacks (area_span.c
 *      [stacks]), each chunk unlinked from the list before it is pushed. A
 *      bump range goes back in one push: each chunk gets its free tag and a
 *      link to the next while the range still holds it, then the range is
 *      cleared, then one CAS puts the chain on the span's stack; a range
 *      that with the stack is the whole span retires it untouched, the range
 *      cleared before the entry is released (no bump word ever names a
 *      released entry).
 *   [give back] A thread that exits, or a process that detaches, drains
 *      everything it caches; recovery does the same for the caches of dead
 *      processes (area_recover.c [recovery]); so does a cache asked to give
 *      back ([short of memory]).
 *   [short of memory] (segment.c [short of memory]) A request is one increment of
 *      hdr->trim. A cache answers -- drains itself and this thread's caches
 *      of the pool's other areas (dp_ar_trim_answer) -- at its next free or
 *      its next allocation that its own list cannot serve, and at once when
 *      its own thread is the one short of memory (area_acquire.c
 *      [shortage]). The segment layer's trim hook, dp_ar_trim_thread, makes
 *      this thread's caches of the pool give back, but one whose operation
 *      is open (its caller drained it; a nested operation would end it), and
 *      the kept span for a thread without a record (area_span.c [kept
 *      span]). A thread that makes no call keeps its cache
 *      (dsmpool_area_flush() gives it back); nobody waits for it more than
 *      the requester's bound.
 *   [reference] A process uses an area only while it holds a reference on
 *      its control segment: a fork()ed child whose inherited reference
 *      could not be taken over gets -ESTALE from every call (dp_ar_usable).
 *
 * Crash bound: a drain unlinks a chunk from the list before it pushes it,
 * and a range is cleared before its chain is pushed, so a death in between
 * leaves chunks tagged on no list (area_recover.c [lost chunks]), never on
 * two. A death inside an operation leaves seq odd, which recovery counts as
 * a possible loss; a dead owner's record is taken by recovery, drained and
 * released.
 *
 * Memory ordering: [operations] -- the odd store is followed by a release
 * fence and a compiler fence, the even store is a release that
 * caches_quiesce's and quiet_open_ctl's acquire loads see. The owner word
 * is claimed by an acq_rel CAS whose acquire sees dp_ar_cache_release's
 * release store. The lists and ranges need none: one writer, and recovery
 * reads them after the writer's death, through the acquire of the liveness
 * lock and the owner CAS.
 */

#include <stdlib.h>
#include <string.h>

#include "area.h"
#include "area_pointer.h"
#include "area_cache.h"
#include "dp_os.h"

pthread_mutex_t dp_ar_reg_lock = PTHREAD_MUTEX_INITIALIZER; /* areas of this process, tcs */
/* Thread-local variables use the dynamic models (meson.build: global-dynamic
 * by default; dp_ar_tc_last is local-dynamic, dp_area.h), not initial-exec:
 * linked into an executable, one load from the thread pointer; in
 * libdsmpool.so a __tls_get_addr call; and a dlopen()ed libdsmpool.so loads
 * (tests/dlopen), which initial-exec prevented. */
_Thread_local ar_tc *dp_ar_tc_last;
static _Thread_local ar_tc *tc_head;
static pthread_key_t tc_key;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;

_Thread_local int dp_ar_tc_err; /* why ar_tc_get gave NULL */

#ifdef DP_INJECTION
_Thread_local bool dp_ar_tc_force_shared; /* test-only: this thread's new caches take no record */
#endif

static void tc_destructor(void *arg);

static void tc_key_init(void) { pthread_key_create(&tc_key, tc_destructor); }

/* [reference]: this process may use the area's control block: it holds a
 * reference on its segment. A fork()ed child whose inherited reference could
 * not be taken over (the parent had let the area go: its block may be someone
 * else's now) must never touch it. */
int dp_ar_usable(struct dsmpool_area *a) {
    int r = dp_self(a->pool); /* adoption happens here, and may mark the segment stale */
    if (r) return r;
    if (a->seg && a->seg->stale)
        return dp_fail(-ESTALE, "the area was let go before this process (a fork()ed child) "
                       "took it over");
    return 0;
}

/* The most chunks of class c the area can hold: a bound for list walks
 * that must stop on a damaged (cyclic) list. */
uint64_t dp_ar_chunks_bound(const struct dsmpool_area *a, unsigned c) {
    uint64_t held = dp_load_relaxed(&a->ctl->held); /* relaxed: a bound, not a count */
    if (held > (1ull << 46)) held = 1ull << 46;
    return (a->data_size + held) / cls_size(c) + 1;
}

/* [drain]: the bump range [idx, idx + left) of class c goes back to span e in
 * one push (area_recover.c [lost chunks]: tagged before it leaves). Each chunk
 * gets its free tag and a link to the next while the range still holds it;
 * then the range is cleared (leak-biased: a death now leaves tagged chunks on
 * no list, which the lost sweep finds); then one CAS puts the chain on the
 * span's stack. */
static void range_push(struct dsmpool_area *a, ar_cache *rec, unsigned c, uint64_t e, ar_span *sp,
                       dsmpool_ptr base, uint32_t idx, uint32_t left, uint32_t retire_slot) {
    uint32_t n = cls_chunks(c);
    /* acquire: the pushes' links (as a steal reads them) */
    for (uint64_t w = dp_load_acquire(&sp->state); SPW_ST(w) == SP_SPAN && SPW_COUNT(w) + left == n;) {
        /* the stack and the range are the whole span: it retires untouched
         * (area_registry.c [entries]: ours by one CAS; the range is cleared
         * before the entry is released, so no bump word ever names a released
         * entry) */
        if (dp_ar_entry_take_from(sp, &w, retire_slot)) {
            dp_store_relaxed(&rec->bump[c], 0);
            if (SPW_COUNT(w)) dp_fetch_add_relaxed(&a->ctl->partial[c], (uint64_t)-1); /* relaxed: a hint */
            dp_ar_entry_release(a->pool, a->ctl, a->aid, e, sp, w, retire_slot);
            return;
        }
    }
    char *last = NULL;
    uint32_t k = 0;
    for (; k < left; k++) {
        dsmpool_ptr cp = base + chunk_off(c, idx + k);
        char *m = ar_addr_n(a, cp, 16);
        if (!m) break; /* (an OS segment this process cannot map: all of the span) */
        uint32_t next = idx + k + 2; /* the next chunk's index + 1; the last one's is set below */
        uint64_t tag = ar_free_tag(a, cp);
        memcpy(m, &next, 4);
        memcpy(m + 8, &tag, 8);
        last = m;
    }
    dp_store_relaxed(&rec->bump[c], 0);
    if (!last) return;
    uint64_t w = dp_load_relaxed(&sp->state), nw;
    for (;;) {
        if (SPW_ST(w) != SP_SPAN || SPW_COUNT(w) + k > n) return; /* corrupt: drop, never double */
        memcpy(last, &(uint32_t){SPW_HEAD(w)}, 4);
        nw = SPW(SPW_GEN(w) + 1, SPW_COUNT(w) + k, idx + 1, SP_SPAN);
        /* release: publishes the links written into the chunks (pairs with
         * refill's and span_take's steal) */
        if (dp_cas_release(&sp->state, &w, nw)) break;
    }
    dp_ar_span_pushed(a->pool, a->ctl, a->aid, e, sp, c, SPW_COUNT(w), nw, retire_slot);
}

/* [give back]: everything a cache record holds goes back to the spans.
 * Inside an operation on rec. */
static void cache_drain_all(struct dsmpool_area *a, ar_cache *rec, uint32_t retire_slot) {
    for (unsigned c = 0; c < AR_NCLS; c++) {
        dsmpool_ptr h = dp_load_relaxed(&rec->head[c]);
        for (uint64_t guard = dp_ar_chunks_bound(a, c); h && guard; guard--) {
            char *m = ar_addr_n(a, h, 8); /* validated: it may be a dead process's garbage */
            if (!m) break;
            dsmpool_ptr next;
            memcpy(&next, m, 8);
            dp_store_relaxed(&rec->head[c], next); /* first unlink (leak-biased), then return */
            dp_ar_chunk_return(a, h, retire_slot);
            h = next;
        }
        dp_store_relaxed(&rec->head[c], 0);
        dp_store_relaxed(&rec->count[c], 0);
        uint64_t b = dp_load_relaxed(&rec->bump[c]);
        uint32_t e1 = BUMP_E1(b), left = BUMP_LEFT(b), idx = BUMP_IDX(b);
        ar_span *sp = e1 ? dp_ar_entry(a->pool, a->ctl, e1 - 1) : NULL;
        uint64_t w = sp ? dp_load_acquire(&sp->state) : 0; /* acquire: the entry's publication */
        if (!sp || left > cls_chunks(c) || idx + left > cls_chunks(c) || SPW_ST(w) != SP_SPAN ||
            (dp_load_relaxed(&sp->info) & 0xff) != c) {
            dp_store_relaxed(&rec->bump[c], 0);
            continue;
        }
        uint64_t blk = dp_load_relaxed(&sp->block);
        range_push(a, rec, c, e1 - 1, sp, dp_ar_entry_base(a, e1 - 1, sp, blk, c), idx, left, retire_slot);
    }
}

/* [short of memory]: this cache gives back everything. Inside an operation
 * on it. */
void dp_ar_cache_answer(struct dsmpool_area *a, ar_tc *tc) {
    tc->trim_seen = dp_load_relaxed(a->trimp); /* relaxed: [short of memory] */
    cache_drain_all(a, tc->rec, a->pool->slot);
    dp_ar_keep_release(a);
}

/* [short of memory]: a request to give back was made since this cache last
 * answered (or the pool is short for this very thread): this thread's caches
 * of every area of the pool give back. Inside an operation on tc's record. */
void dp_ar_trim_answer(struct dsmpool_area *a, ar_tc *tc) {
    dp_ar_cache_answer(a, tc);
    dp_ar_trim_thread(a->pool);
}

/* Give a cache record up: drained if the area lives, then free. */
void dp_ar_cache_release(struct dsmpool_area *a, ar_cache *rec, uint32_t slot) {
    uint64_t s = ar_op_begin(rec);
    if (ar_live(a)) cache_drain_all(a, rec, slot);
    ar_op_end(rec, s);
    dp_store_release(&rec->owner, 0); /* release: pairs with dp_ar_cache_claim's CAS */
}

static void tc_unlink_area(ar_tc *tc) { /* dp_ar_reg_lock and area->lock held */
    struct dsmpool_area *a = dp_load_relaxed_any(&tc->area);
    if (tc->aprev) tc->aprev->anext = tc->anext;
    else a->tcs = tc->anext;
    if (tc->anext) tc->anext->aprev = tc->aprev;
    tc->anext = tc->aprev = NULL;
}

/* Thread exit: release this thread's caches of every area still attached. */
static void tc_destructor(void *arg) {
    (void)arg;
    unsigned e = dp_epoch();
    pthread_mutex_lock(&dp_ar_reg_lock);
    for (ar_tc *tc = tc_head, *next; tc; tc = next) {
        next = tc->tnext;
        struct dsmpool_area *a = dp_load_relaxed_any(&tc->area);
        if (a && tc->epoch == e) {
            pthread_mutex_lock(&a->lock);
            tc_unlink_area(tc);
            pthread_mutex_unlock(&a->lock);
            if (tc->rec) dp_ar_cache_release(a, tc->rec, a->pool->slot);
        }
        free(tc);
    }
    tc_head = dp_ar_tc_last = NULL;
    pthread_mutex_unlock(&dp_ar_reg_lock);
}

/* [records]: a free cache record, claimed for me; a record page is linked when
 * every record of the pages before it is held. NULL: none free, or no pool
 * block for a new page (the shared path: area_shared.c [shared path]). */
ar_cache *dp_ar_cache_claim(dsmpool *p, ar_ctl *ctl, uint64_t me) {
    for (uint32_t i = 0; i < AR_NCACHES; i++) {
        if (i % AR_RECS_PER_PAGE == 0 && !dp_block_link(p, &ctl->recpage[i / AR_RECS_PER_PAGE], AR_RECPAGE_ORDER))
            return NULL;
        ar_cache *rec = dp_ar_cache_rec(p, ctl, i);
        if (!rec) return NULL; /* a damaged page link */
        uint64_t z = 0;
        if (dp_load_relaxed(&rec->owner) != 0) continue;
        /* acq_rel: acquire pairs with dp_ar_cache_release; release: the claim */
        if (dp_cas_acq_rel(&rec->owner, &z, me)) return rec;
    }
    return NULL;
}

/* Give tc a cache record of its own, if one is free (reclaim: recover dead
 * processes first when none is). The record is emptied inside an operation.
 * false: none is free; tc->rec stays NULL (area_shared.c [shared path]). */
bool dp_ar_tc_take_record(struct dsmpool_area *a, ar_tc *tc, bool reclaim) {
#ifdef DP_INJECTION
    if (dp_ar_tc_force_shared) return false;
#endif
    ar_ctl *ctl = a->ctl;
    uint64_t me = (uint64_t)(a->pool->slot + 1) | ((uint64_t)(uint32_t)dp_os_gettid() << 32);
    ar_cache *rec = dp_ar_cache_claim(a->pool, ctl, me);
    if (!rec && reclaim && dp_reclaim(a->pool) > 0) /* dead processes' caches may hold them all */
        rec = dp_ar_cache_claim(a->pool, ctl, me);
    if (!rec) return false;
    /* seq_cst fence: our claim before our first read of the area state,
     * against the destroyer's fence (destroy_explicit) */
    dp_fence_seq_cst();
    uint64_t s = ar_op_begin(rec);
    for (unsigned c = 0; c < AR_NCLS; c++) { /* a released record is empty; say so anyway */
        dp_store_relaxed(&rec->head[c], 0);
        dp_store_relaxed(&rec->bump[c], 0);
        dp_store_relaxed(&rec->count[c], 0);
        tc->span_e1[c] = 0;
    }
    ar_op_end(rec, s);
    tc->trim_seen = dp_load_relaxed(a->trimp); /* relaxed: [short of memory] */
    tc->rec = rec;
    return true;
}

ar_tc *dp_ar_tc_get_slow(struct dsmpool_area *a) {
    if ((dp_ar_tc_err = dp_ar_usable(a)) != 0) return NULL;
    unsigned e = dp_epoch();
    /* this thread's objects of areas detached since: free them now */
    pthread_mutex_lock(&dp_ar_reg_lock);
    for (ar_tc **pp = &tc_head; *pp;) {
        ar_tc *tc = *pp;
        if (!dp_load_relaxed_any(&tc->area) || tc->epoch != e) {
            *pp = tc->tnext;
            if (dp_ar_tc_last == tc) dp_ar_tc_last = NULL;
            if (tc->epoch == e) free(tc); /* (a fork child's copies: the parent's) */
            continue;
        }
        if (dp_load_relaxed_any(&tc->area) == a) {
            pthread_mutex_unlock(&dp_ar_reg_lock);
            return dp_ar_tc_last = tc;
        }
        pp = &tc->tnext;
    }
    pthread_mutex_unlock(&dp_ar_reg_lock);
    pthread_once(&tc_once, tc_key_init);
    ar_tc *tc = calloc(1, sizeof *tc);
    if (!tc) {
        dp_ar_tc_err = dp_fail(-ENOMEM, "out of memory");
        return NULL;
    }
    if (!dp_ar_tc_take_record(a, tc, true)) {
        /* area_shared.c [shared path]: more threads than records use the area:
         * this one takes the shared path. relaxed store, then a seq_cst fence
         * before our first read of the area state, against the destroyer's
         * fence: it sees the flag (and uses membarrier), or we see DESTROYED */
        dp_store_relaxed(&a->ctl->shared, 1); /* every time: our own store before our fence */
        dp_fence_seq_cst();
    }
    dp_store_relaxed_any(&tc->area, a);
    tc->epoch = e;
    pthread_mutex_lock(&dp_ar_reg_lock);
    pthread_mutex_lock(&a->lock);
    tc->anext = a->tcs;
    if (a->tcs) a->tcs->aprev = tc;
    a->tcs = tc;
    pthread_mutex_unlock(&a->lock);
    tc->tnext = tc_head;
    tc_head = tc;
    pthread_mutex_unlock(&dp_ar_reg_lock);
    pthread_setspecific(tc_key, (void *)1); /* any non-NULL value: run the destructor */
    return dp_ar_tc_last = tc;
}

/* This thread's cache record of a, if it has one (no new one is made). */
ar_cache *dp_ar_tc_find(struct dsmpool_area *a) {
    unsigned e = dp_epoch();
    for (ar_tc *tc = tc_head; tc; tc = tc->tnext)
        if (dp_load_relaxed_any(&tc->area) == a && tc->epoch == e) return tc->rec;
    return NULL;
}

/* [drain]: push one batch of class c back to the spans. Inside an
 * operation on rec. */
void dp_ar_drain_op(struct dsmpool_area *a, ar_cache *rec, unsigned c) {
    uint32_t n = cls_batch(c);
    dsmpool_ptr h = dp_load_relaxed(&rec->head[c]);
    for (uint32_t k = 0; k < n && h; k++) {
        char *m = ar_addr_n(a, h, 8);
        if (!m) break;
        dsmpool_ptr next;
        memcpy(&next, m, 8);
        dp_store_relaxed(&rec->head[c], next);
        dp_store_relaxed(&rec->count[c], dp_load_relaxed(&rec->count[c]) - 1);
        dp_ar_chunk_return(a, h, a->pool->slot);
        h = next;
    }
}

/* [short of memory] for the segment layer (its trim hook): this thread's
 * caches of every area of pool p give back now -- but one that an operation of
 * this thread has open (its caller drained it; a nested operation would end
 * it). */
void dp_ar_trim_thread(dsmpool *p) {
    if (pthread_mutex_trylock(&dp_ar_reg_lock) != 0) return; /* (held by this thread: not now) */
    unsigned e = dp_epoch();
    for (ar_tc *tc = tc_head; tc; tc = tc->tnext) {
        struct dsmpool_area *a = dp_load_relaxed_any(&tc->area);
        /* relaxed: this thread is the record's only writer */
        if (!a || a->pool != p || tc->epoch != e) continue;
        if (!tc->rec) { /* area_span.c [kept span], inside a bracket */
            dp_bracket_open(p);
            if (ar_live(a)) dp_ar_keep_release(a);
            dp_bracket_close(p);
            continue;
        }
        if (dp_load_relaxed(&tc->rec->seq) & 1) continue; /* relaxed: this thread is its only writer */
        uint64_t s = ar_op_begin(tc->rec);
        if (ar_live(a)) dp_ar_cache_answer(a, tc);
        ar_op_end(tc->rec, s);
    }
    pthread_mutex_unlock(&dp_ar_reg_lock);
}
