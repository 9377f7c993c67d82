/*
 * segment.c -- segments: DSM-like blocks with handles, references and pins.
 *
 * Rules
 *   [states] A descriptor goes FREE(g) -> INIT(g+1) -> LIVE(g+1) -> DYING(g+1) ->
 *      FREE(g+1), each arrow one CAS on its state word (or a release store
 *      by the one process that owns it in INIT/DYING). In INIT and DYING the
 *      count field names the owner slot, so recovery can finish the job of a
 *      creator or destroyer that died.
 *   [handles] Handle = generation << 32 | (index + 1): 0 is never a handle, and a
 *      handle whose generation is not the descriptor's is stale (-ESTALE),
 *      even after the index is reused.
 *   [create] claim a FREE descriptor (next-fit from a shared cursor), take
 *      a block from the pool (the calling CPU's sub-pool first), or create an
 *      OS segment (POSIX shm named after the pool id, index and generation,
 *      so any process of the pool, and recovery, can find it); write block,
 *      size, flags; record the attachment (proc.c [records]); CAS INIT -> LIVE
 *      with count 1 (release: publishes block and size).
 *   [attach] record, then CAS count + 1 if LIVE with the same generation
 *      (acquire: pairs with seg_create_bracketed's release). A pool block's address is base +
 *      offset, checked against the data range; an OS segment is mapped by
 *      name.
 *   [detach] mark the record, then CAS count - 1; the last reference of an
 *      unpinned segment turns it DYING in the same CAS, and its owner frees
 *      the block (or unlinks the OS name) and stores FREE.
 *   [pins] Pin sets a bit that keeps a LIVE segment alive at count 0; unpin
 *      clears it and destroys the segment if nobody is attached.
 *   [brackets] Every create, attach and detach runs inside one bracket of the
 *      caller's slot (proc.c [brackets]), from the claim of the descriptor to the
 *      record; so the checker and the leak sweep never judge a block that is
 *      between the allocator and its descriptor, or a count between two
 *      records.
 *   [area control blocks] An area's control block is a segment (DP_SEG_AREA); what the area
 *      holds is given back, when its last reference goes, by the destructor
 *      the area layer registered (dp_seg_set_area_hook): this layer knows
 *      areas only through that hook.
 *   [short of memory] Short of memory (dp_seg_block_short): before a block request spills
 *      to the OS or fails, the caches give back. This thread's own caches
 *      at once (the area layer's trim hook); every other thread's at its
 *      next area call (area_cache.c [short of memory]), asked by one increment of hdr->trim
 *      (a request nobody waits on: no lock, and a thread that makes no call
 *      keeps its cache); the requester retries for at most DP_TRIM_WAIT_NS. A request
 *      that did not help makes the next ones skip the wait for
 *      DP_TRIM_QUIET_NS, so a pool that is really full costs one wait, not
 *      one per allocation. A request whose block was found but could not
 *      be made resident (a refill failed: resident.c [refill on demand])
 *      gives back this thread's caches and looks once more, but neither
 *      asks the others nor waits: more free blocks would meet the same
 *      limit.
 *  [spilling is visible] Spilling is visible (fallback_made): every OS segment made adds its
 *      bytes to this thread's pending note, and the public call that made
 *      it reports the note to the process's hook (dp_fallback_fire) once it
 *      holds no lock, bracket or area operation; the high-water mark of the
 *      bytes in OS segments is raised then, from a walk of the descriptors
 *      (so no counter exists that a death could skew). Exhaustion -- the
 *      pool cannot serve and the fallback cannot or may not -- is -ENOMEM,
 *      the code areas give; -ENOSPC is kept for a full descriptor table.
 *  [exact to the page] A pool segment is exact to the page: the power-of-two block is taken
 *      and its tail given back at once (proc.c [exact blocks]), so its size is the
 *      size asked for rounded up to 4 KiB (to 2 MiB with
 *      DSMPOOL_SEG_HUGE_ROUND, for segments above 1 MiB). The descriptor's
 *      size equals the bytes its block word holds; an attacher checks that.
 *
 * Injection points (tests): "segment.attach.recorded" (PENDING, count not
 * raised), "segment.attach.counted" (count raised, record not ACTIVE),
 * "segment.short.asked" ([short of memory]: the request made, the wait not begun).
 *
 * Layer: above the ledger (records, brackets, pool blocks); below areas,
 * recovery and the checker, which call dp_seg_recover_slot, dp_seg_verify
 * and dp_seg_mark_owned by name.
 *
 * Memory ordering: the LIVE CAS is release and every attach CAS acquire, so
 * block/size are seen by attachers; reference drops are acq_rel so that all
 * writes into the segment happen before the destroyer hands the block back
 * (and the allocator's own release/acquire carries that to the next owner).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_numa.h"
#include "dp_segment.h"
#include "dp_os.h"

#define SEG_ON_NODE_BIT (1u << 3)
#define SEG_KNOWN_FLAGS (DSMPOOL_SEG_NO_FALLBACK | DSMPOOL_SEG_LOCAL_ONLY | DSMPOOL_SEG_INTERLEAVE | \
                         SEG_ON_NODE_BIT | DSMPOOL_SEG_HUGE_ROUND | (0xffu << 8))
#define SEG_COUNT_ONE (1ull << 3)
#define SEG_PIN_BIT (1ull << 2)

/* ---- layer hooks ------------------------------------------------------ */

static dp_seg_area_hook *area_hook;
static void (*trim_hook)(dsmpool *);

void dp_seg_set_area_hook(dp_seg_area_hook *fn) { area_hook = fn; }
void dp_seg_set_trim_hook(void (*fn)(dsmpool *)) { trim_hook = fn; }

/* ---- [short of memory]: short of memory ------------------------------------------- */

#define DP_TRIM_WAIT_NS 2000000ull   /* how long a requester retries */
#define DP_TRIM_POLL_NS 20000ull
#define DP_TRIM_QUIET_NS 20000000ull /* after a request that did not help */

/* A block as the caller asked for it: whole, or exact (keep frames). */
static int seg_block(dsmpool *p, unsigned order, unsigned place, uint64_t keep, uint64_t *blk) {
    return keep ? dp_pool_alloc_exact(p, order, place, keep, blk) : dp_pool_alloc_placed(p, order, place, blk);
}

int dp_seg_block_short(dsmpool *p, unsigned order, unsigned place, uint64_t keep, uint64_t refills_failed,
                       uint64_t *blk) {
    /* a block was there, its memory was not (here or in another process):
     * other threads' caches giving back cannot help, so no wait for them;
     * this thread's own may hold resident memory, so they go back and the
     * block is sought once more (relaxed: a counter) */
    bool failed = dp_load_relaxed(&p->hdr->refill_failures) != refills_failed;
    if (trim_hook) trim_hook(p); /* this thread's caches */
    int r = seg_block(p, order, place, keep, blk);
    if (r == 0 || r == -EUCLEAN || failed) return r;
    uint64_t now = dp_os_now_ns();
    /* relaxed: a time hint; two requesters that both pass only ask twice */
    if (now < dp_load_relaxed(&p->hdr->trim_quiet)) return r;
    /* relaxed: a request counter; answering it orders nothing (each cache's
     * chunks go back through the allocator's own release/acquire) */
    dp_fetch_add_relaxed(&p->hdr->trim, 1);
    DP_INJECT("segment.short.asked"); /* (the bound starts after it: a test's pause is not the wait) */
    for (uint64_t end = dp_os_now_ns() + DP_TRIM_WAIT_NS; dp_os_now_ns() < end;) {
        dp_os_sleep_ns(DP_TRIM_POLL_NS);
        if ((r = seg_block(p, order, place, keep, blk)) == 0 || r == -EUCLEAN) return r;
    }
    dp_store_relaxed(&p->hdr->trim_quiet, dp_os_now_ns() + DP_TRIM_QUIET_NS); /* relaxed: a hint */
    return r;
}

/* ---- descriptors -------------------------------------------------------- */

void dp_fallback_name(const dsmpool *pool, uint64_t idx, uint32_t gen, char *buf, size_t n) {
    snprintf(buf, n, "/dsmpool.%016llx.%llu.%u", (unsigned long long)pool->geo.pool_id,
             (unsigned long long)idx, gen);
}

static int seg_claim(dsmpool *p, uint64_t *idx, uint32_t *gen) {
    uint64_t n = p->nsegs;
    uint64_t start = dp_fetch_add_relaxed(&p->hdr->seg_cursor, 1) % n; /* relaxed: a hint */
    for (uint64_t k = 0; k < n; k++) {
        uint64_t i = start + k < n ? start + k : start + k - n;
        dp_seg_desc *d = &p->segs[i];
        uint64_t w = dp_load_relaxed(&d->state); /* relaxed: the CAS validates */
        if (DP_SEG_ST(w) != DP_SEG_FREE) continue;
        uint32_t g = DP_SEG_GEN(w) + 1;
        /* acq_rel: acquire pairs with seg_destroy's release store of FREE */
        if (dp_cas_acq_rel(&d->state, &w, DP_SEG_WORD(g, p->slot + 1, 0, DP_SEG_INIT))) {
            *idx = i;
            *gen = g;
            return 0;
        }
    }
    return dp_fail(-ENOSPC, "all %llu segment descriptors are in use; raise max_segments",
                   (unsigned long long)n);
}

/* [detach]'s second half: give back what the descriptor holds, then FREE it.
 * owner is the slot named in DYING/INIT (recovery passes the dead one). An
 * area's contents go first (idempotent); then the block is unrecorded and
 * only then freed, inside an ownership bracket, so a death in between leaves
 * an unowned block for the sweep, never a block freed twice. */
static void seg_destroy(dsmpool *p, uint64_t idx, uint32_t gen, uint32_t owner) {
    dp_seg_desc *d = &p->segs[idx];
    dp_bracket_open(p);
    uint64_t blk = dp_load_acquire(&d->block); /* acquire: the creator's store */
    uint64_t size = dp_load_relaxed(&d->size); /* 0 while a creator had not set it */
    /* a block word whose frames disagree with the size (a scribbled trim
     * code, [exact to the page]) is never freed: it could name frames given back */
    bool pool_blk = blk && blk != DP_BLOCK_FALLBACK &&
                    dp_block_ok(p, DP_BLOCK_OFF(blk), DP_BLOCK_BYTES(blk)) &&
                    (size == 0 || size == DP_BLOCK_BYTES(blk));
    if (pool_blk && (dp_load_relaxed(&d->flags) & DP_SEG_AREA) && area_hook) /* an area goes with its last reference */
        area_hook(p, dp_at(p, DP_BLOCK_OFF(blk)), DP_BLOCK_BYTES(blk),
                  idx + 1, owner);
    /* acq_rel: the exchange is the unrecording; whoever re-runs this sees 0 */
    blk = dp_exchange_acq_rel(&d->block, 0);
    if (blk == DP_BLOCK_FALLBACK || blk == 0) {
        /* 0: a creator died before recording; its OS object may exist */
        char nm[96];
        dp_fallback_name(p, idx, gen, nm, sizeof nm);
        /* in the pool's /dev/shm (life.c [anchor]); a process that does not
         * see it leaves the object to the last one out there, or a sweep */
        if (p->shmdir >= 0) dp_os_shm_unlinkat(p->shmdir, nm);
    } else if (pool_blk) {
        dp_pool_free(p, blk);
    }
    dp_store_relaxed(&d->size, 0);
    dp_bracket_close(p);
    /* release: pairs with seg_claim's CAS of the next creator */
    dp_store_release(&d->state, DP_SEG_WORD(gen, 0, 0, DP_SEG_FREE));
}

static int seg_ref_drop(dsmpool *p, uint64_t idx, uint32_t gen, uint32_t slot) {
    dp_seg_desc *d = &p->segs[idx];
    uint64_t w = dp_load_relaxed(&d->state); /* relaxed: the CAS validates */
    for (;;) {
        if (DP_SEG_GEN(w) != gen || DP_SEG_ST(w) != DP_SEG_LIVE || DP_SEG_COUNT(w) == 0)
            return -ESTALE;
        bool last = DP_SEG_COUNT(w) == 1 && !DP_SEG_PINNED(w);
        uint64_t nw = last ? DP_SEG_WORD(gen, slot + 1, 0, DP_SEG_DYING) : w - SEG_COUNT_ONE;
        /* acq_rel: release our writes to the segment; the destroyer acquires all */
        if (dp_cas_acq_rel(&d->state, &w, nw)) {
            if (last) seg_destroy(p, idx, gen, slot);
            return 0;
        }
    }
}

/* Record, then count (proc.c [records]); inside a bracket (proc.c [brackets]). */
static int seg_ref_bracketed(dsmpool *p, uint64_t idx, uint32_t gen, dp_a64 **recp) {
    dp_a64 *rec = dp_rec_add(p, DP_REC(gen, idx, DP_REC_PENDING));
    if (!rec)
        return dp_fail(-ENOMEM, "no memory left in the pool for an attachment record (beyond %d, a "
                       "process's attachments take a 4 KiB pool frame per %d): free pool memory or "
                       "detach segments, or make the pool bigger", DP_REC_INLINE, (int)DP_REC_PER_BLOCK);
    DP_INJECT("segment.attach.recorded");
    dp_seg_desc *d = &p->segs[idx];
    uint64_t w = dp_load_relaxed(&d->state); /* relaxed: the CAS validates */
    for (;;) {
        int bad = 0;
        if (DP_SEG_GEN(w) != gen)
            bad = (int32_t)(gen - DP_SEG_GEN(w)) > 0 ? -ENOENT : -ESTALE;
        else if (DP_SEG_ST(w) == DP_SEG_INIT)
            bad = -ENOENT;
        else if (DP_SEG_ST(w) != DP_SEG_LIVE)
            bad = -ESTALE;
        else if (DP_SEG_COUNT(w) >= DP_SEG_COUNT_MAX - 1)
            bad = -ENOSPC;
        if (bad) {
            dp_rec_clear(rec);
            return bad == -ESTALE ? dp_fail(bad, "segment %016llx was destroyed",
                                            (unsigned long long)DP_HANDLE(gen, idx))
                   : bad == -ENOENT ? dp_fail(bad, "no segment %016llx",
                                              (unsigned long long)DP_HANDLE(gen, idx))
                                    : dp_fail(bad, "too many references to one segment");
        }
        /* acquire: pairs with seg_create_bracketed's release LIVE CAS (block, size) */
        if (dp_cas_acquire(&d->state, &w, w + SEG_COUNT_ONE)) break;
    }
    DP_INJECT("segment.attach.counted");
    dp_store_release(rec, DP_REC(gen, idx, DP_REC_ACTIVE)); /* release: for recovery */
    *recp = rec;
    return 0;
}

static int seg_ref(dsmpool *p, uint64_t idx, uint32_t gen, dp_a64 **recp) {
    dp_bracket_open(p);
    int r = seg_ref_bracketed(p, idx, gen, recp);
    dp_bracket_close(p);
    return r;
}

static void seg_unref(dsmpool *p, struct dsmpool_seg *s) {
    if (!s->rec) return;
    uint64_t idx = DP_HANDLE_IDX(s->handle);
    uint32_t gen = DP_HANDLE_GEN(s->handle);
    dp_bracket_open(p);
    dp_store_release(s->rec, DP_REC(gen, idx, DP_REC_DETACHING)); /* release: for recovery */
    seg_ref_drop(p, idx, gen, p->slot);
    dp_rec_clear(s->rec);
    dp_bracket_close(p);
    s->rec = NULL;
}

/* ---- OS fallback segments ---------------------------------------------- */

static int fallback_map(dsmpool *p, uint64_t idx, uint32_t gen, size_t size, bool create,
                        void **addr) {
    if (create && p->geo.no_anchor) return -ENOMEDIUM; /* life.c [anchor]: nothing could remove it */
    if (p->shmdir < 0) return -EXDEV; /* life.c [anchor]: this process sees another /dev/shm */
    char nm[96];
    dp_fallback_name(p, idx, gen, nm, sizeof nm);
    int fd = dp_os_shm_openat(p->shmdir, nm, create, p->geo.mode ? p->geo.mode : 0600);
    if (fd < 0) return fd;
    int r = 0;
    size_t have = 0;
    if (create) { /* [room first]: held against the memory cgroup's and the system's room */
        if ((r = dp_room_take(p, size, "an OS fallback segment")) == 0) {
            if ((r = dp_os_truncate(fd, size)) == 0) r = dp_os_fallocate(fd, size);
            dp_room_give(p, size);
        } else {
            r = -EDQUOT; /* (said as -ENOMEM, with the room's message, by the callers) */
        }
    } else if ((r = dp_os_fd_size(fd, &have)) == 0 && have < size) {
        r = -EPROTO;
    }
    void *va = NULL;
    if (r == 0 && (r = dp_os_reserve_va(size, 2u << 20, &va)) == 0 &&
        (r = dp_os_map_fd(va, size, fd, false)) != 0)
        dp_os_unmap(va, size);
    dp_os_close(fd);
    if (r) {
        if (create) dp_os_shm_unlinkat(p->shmdir, nm);
        return r;
    }
    *addr = va;
    return 0;
}

/* [attach], second half: find the memory of a referenced segment. */
static int seg_map(dsmpool *p, uint64_t idx, uint32_t gen, struct dsmpool_seg *s) {
    dp_seg_desc *d = &p->segs[idx];
    uint64_t blk = dp_load_relaxed(&d->block); /* relaxed: ordered by seg_ref's acquire */
    uint64_t size = dp_load_relaxed(&d->size);
    s->handle = DP_HANDLE(gen, idx);
    if (blk == DP_BLOCK_FALLBACK) {
        if (size == 0 || size > (1ull << 46))
            return dp_fail(-EPROTO, "corrupt segment descriptor %llu", (unsigned long long)idx);
        int r = fallback_map(p, idx, gen, size, false, &s->addr);
        if (r == -EXDEV)
            return dp_fail(r, "segment %016llx is an OS fallback segment in the pool's /dev/shm, which this "
                           "process does not see (another mount namespace): attach it from a process that "
                           "does, or give the pool room so that segments stay in it",
                           (unsigned long long)s->handle);
        if (r)
            return dp_fail(r == -ENOENT ? -ESTALE : r,
                           "OS segment of %016llx cannot be mapped: %s (pool destroyed?)",
                           (unsigned long long)s->handle, strerror(-r));
        s->fallback = true;
    } else {
        uint64_t bytes = DP_BLOCK_BYTES(blk);
        if (DP_BLOCK_ORDER(blk) > 36 || size != bytes || !dp_block_ok(p, DP_BLOCK_OFF(blk), bytes))
            return dp_fail(-EPROTO, "corrupt segment descriptor %llu", (unsigned long long)idx);
        s->addr = dp_at(p, DP_BLOCK_OFF(blk));
        s->fallback = false;
    }
    s->size = size;
    return 0;
}

static void seg_link(dsmpool *p, struct dsmpool_seg *s) {
    s->magic = DP_SEGOBJ_MAGIC;
    s->pool = p;
    pthread_mutex_lock(&p->lock);
    s->prev = NULL;
    s->next = p->segs_head;
    if (p->segs_head) p->segs_head->prev = s;
    p->segs_head = s;
    pthread_mutex_unlock(&p->lock);
}

static void seg_unlink(dsmpool *p, struct dsmpool_seg *s) {
    pthread_mutex_lock(&p->lock);
    if (s->prev) s->prev->next = s->next;
    else p->segs_head = s->next;
    if (s->next) s->next->prev = s->prev;
    pthread_mutex_unlock(&p->lock);
}

static void seg_free_obj(struct dsmpool_seg *s) {
    if (s->fallback && s->addr) dp_os_unmap(s->addr, s->size);
    s->magic = DP_SEGOBJ_DEAD;
    dp_obj_end(DP_OBJ_SEG, s);
}

/* Make an attached segment object known to the process (list and set). */
static int seg_publish(dsmpool *pool, struct dsmpool_seg *s, dsmpool_seg **out) {
    seg_link(pool, s);
    if (!dp_segset_add(s)) {
        seg_unlink(pool, s);
        seg_unref(pool, s);
        seg_free_obj(s);
        return dp_fail(-ENOMEM, "out of memory");
    }
    *out = s;
    return 0;
}

static int pool_ok(dsmpool *pool) {
    if (!pool || pool->magic != DP_POOL_MAGIC) return dp_fail(-EINVAL, "not an attached pool");
    return dp_self(pool);
}

long dsmpool_pages_per_node(const void *addr, size_t len, size_t *counts, unsigned ncounts) {
    dp_clear_error();
    if (!addr || !counts) return dp_fail(-EINVAL, "addr and counts must not be NULL");
    long r = dp_numa_pages_on_nodes(addr, len, counts, ncounts);
    return r < 0 ? dp_fail((int)r, "move_pages failed: %s", strerror((int)-r)) : r;
}

static bool seg_live(const dsmpool_seg *seg);

long dsmpool_seg_pages_per_node(const dsmpool_seg *seg, size_t *counts, unsigned ncounts) {
    dp_clear_error();
    if (!seg_live(seg)) return dp_fail(-EINVAL, "not an attached segment");
    return dsmpool_pages_per_node(seg->addr, seg->size, counts, ncounts);
}

static int handle_ok(dsmpool *pool, dsmpool_handle h) {
    if (h == 0) return dp_fail(-EINVAL, "handle 0 is never valid");
    if ((h & 0xc0000000u) || DP_HANDLE_IDX(h) >= pool->nsegs)
        return dp_fail(-EINVAL, "%016llx is not a segment handle of this pool",
                       (unsigned long long)h);
    return 0;
}

int dsmpool_seg_create(dsmpool *pool, size_t size, unsigned flags, dsmpool_seg **out) {
    dp_clear_error();
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    *out = NULL;
    if (flags & ~SEG_KNOWN_FLAGS) return dp_fail(-EINVAL, "unknown flags 0x%x", flags & ~SEG_KNOWN_FLAGS);
    if ((flags >> 8) & 0xff && !(flags & SEG_ON_NODE_BIT))
        return dp_fail(-EINVAL, "node bits without DSMPOOL_SEG_ON_NODE");
    if ((flags & SEG_ON_NODE_BIT) && pool && pool->magic == DP_POOL_MAGIC &&
        pool->node_sub[(flags >> 8) & 0xff] < 0)
        return dp_fail(-EINVAL, "node %u has no sub-pool in this pool", (flags >> 8) & 0xff);
    int r = dp_seg_create_internal(pool, size, flags, out);
    dp_fallback_fire(r); /* [spilling is visible]: outside the bracket */
    return r;
}

/* Claim, block (or OS segment), record, LIVE: all in one bracket (proc.c
 * [pins]), so that nobody judges the pool while a block is between the
 * allocator and its descriptor. */
static int seg_create_bracketed(dsmpool *pool, size_t size, unsigned flags, struct dsmpool_seg *s) {
    uint64_t idx = 0;
    uint32_t gen = 0;
    int r = seg_claim(pool, &idx, &gen);
    if (r) return r;
    dp_seg_desc *d = &pool->segs[idx];
    /* [exact to the page]: exact to the page (or to whole huge pages when asked) */
    uint64_t frames = (size + DP_FRAME_SIZE - 1) / DP_FRAME_SIZE;
    if ((flags & DSMPOOL_SEG_HUGE_ROUND) && frames > DP_HUGE_FRAMES / 2)
        frames = (frames + DP_HUGE_FRAMES - 1) / DP_HUGE_FRAMES * DP_HUGE_FRAMES;
    unsigned order = frames <= 1 ? 0 : 64u - (unsigned)__builtin_clzll(frames - 1);
    uint64_t blk, bytes;
    /* proc.c [exact blocks]: trimmed inside our bracket, and only what is
     * kept made resident */
    /* relaxed: a counter, read to word the message below (resident.c: a
     * free block that could not be made resident) */
    uint64_t refill_failed = dp_load_relaxed(&pool->hdr->refill_failures);
    r = dp_pool_alloc_exact(pool, order, flags, frames, &blk);
    if (r && r != -EUCLEAN) r = dp_seg_block_short(pool, order, flags, frames, refill_failed, &blk); /* [short of memory] */
    if (r == 0) {
        bytes = DP_BLOCK_BYTES(blk);
        s->addr = dp_at(pool, DP_BLOCK_OFF(blk));
        dp_store_release(&d->block, blk); /* release: for the leak sweep's acquire */
    } else if (r == -EUCLEAN) {
        dp_store_release(&d->state, DP_SEG_WORD(gen, 0, 0, DP_SEG_FREE));
        return dp_fail(r, "the allocator of this pool is damaged; dsmpool_check() says where");
    } else if (!(flags & DSMPOOL_SEG_NO_FALLBACK)) {
        bytes = frames * DP_FRAME_SIZE; /* [exact to the page]: the same size as from the pool */
        blk = DP_BLOCK_FALLBACK;
        /* The descriptor says FALLBACK before the name exists: recovery of a
         * creator that dies in between unlinks a name that may not exist. */
        dp_store_relaxed(&d->block, blk);
        r = fallback_map(pool, idx, gen, bytes, true, &s->addr);
        char fb_why[900] = ""; /* the room's message ([room first]) */
        if (r == -EDQUOT) snprintf(fb_why, sizeof fb_why, "%s", dsmpool_last_error());
        if (r) {
            dp_store_relaxed(&d->block, 0);
            dp_store_release(&d->state, DP_SEG_WORD(gen, 0, 0, DP_SEG_FREE));
            /* [spilling is visible]: exhaustion is -ENOMEM, as an area says it */
            return r == -ENOMEDIUM
                       ? dp_fail(-ENOMEM, "the pool cannot serve %zu bytes, and it has no OS fallback "
                                 "(it was created where /dev/shm could not hold its anchor)", size)
                   : r == -EXDEV
                       ? dp_fail(-ENOMEM, "the pool cannot serve %zu bytes, and this process has no OS "
                                 "fallback: it sees another /dev/shm than the pool's (another mount "
                                 "namespace); give the pool room, or allocate from a process that sees it",
                                 size)
                   : r == -EDQUOT
                       ? dp_fail(-ENOMEM, "the pool cannot serve %zu bytes, and %s", size, fb_why)
                       : dp_fail(-ENOMEM, "the pool cannot serve %zu bytes and the OS fallback "
                                 "failed: %s", size, r == -ENOSPC ? "/dev/shm is full" : strerror(-r));
        }
        s->fallback = true;
        dp_fetch_add_relaxed(&pool->hdr->fallback_created, 1);
    } else {
        dp_store_release(&d->state, DP_SEG_WORD(gen, 0, 0, DP_SEG_FREE));
        if (dp_load_relaxed(&pool->hdr->refill_failures) != refill_failed) { /* relaxed: a counter */
            char why[600]; /* the refill's own message says which limit (resident.c [room first]) */
            snprintf(why, sizeof why, "%s", dsmpool_last_error());
            return dp_fail(-ENOMEM, "the pool's free memory for %zu bytes could not be made resident "
                           "(DSMPOOL_SEG_NO_FALLBACK): %s", size, why);
        }
        return dp_fail(-ENOMEM, "the pool has no free block of %llu bytes for %zu bytes "
                       "(DSMPOOL_SEG_NO_FALLBACK)", (unsigned long long)DP_FRAME_SIZE << order, size);
    }
    dp_store_relaxed(&d->block, blk);
    dp_store_relaxed(&d->size, bytes);
    if (blk == DP_BLOCK_FALLBACK) dp_seg_fallback_made(pool, bytes);
    dp_store_relaxed(&d->flags, flags);
    s->size = bytes;
    s->handle = DP_HANDLE(gen, idx);
    dp_a64 *rec = dp_rec_add(pool, DP_REC(gen, idx, DP_REC_PENDING));
    uint64_t w = DP_SEG_WORD(gen, pool->slot + 1, 0, DP_SEG_INIT);
    if (!rec) {
        if (s->fallback) dp_os_unmap(s->addr, bytes);
        seg_destroy(pool, idx, gen, pool->slot);
        return dp_fail(-ENOMEM, "no memory left in the pool for an attachment record (beyond %d, a "
                       "process's attachments take a 4 KiB pool frame per %d): free pool memory or "
                       "detach segments, or make the pool bigger", DP_REC_INLINE, (int)DP_REC_PER_BLOCK);
    }
    /* release: publishes block/size/flags to attachers (their acquire CAS) */
    if (!dp_cas_release(&d->state, &w, DP_SEG_WORD(gen, 1, 0, DP_SEG_LIVE))) {
        /* nobody else writes an INIT descriptor of a live owner ([states]):
         * the word was scribbled on. Not ours any more: touch nothing of it */
        dp_rec_clear(rec);
        if (s->fallback) dp_os_unmap(s->addr, bytes);
        return dp_fail(-EUCLEAN, "segment descriptor %llu changed under its creator (the table is damaged: "
                       "dsmpool_check() says where); what it holds is left to the check",
                       (unsigned long long)idx);
    }
    dp_store_release(rec, DP_REC(gen, idx, DP_REC_ACTIVE)); /* release: for recovery */
    s->rec = rec;
    return 0;
}

int dp_seg_create_internal(dsmpool *pool, size_t size, unsigned flags, dsmpool_seg **out) {
    *out = NULL;
    int r = pool_ok(pool);
    if (r) return r;
    if (size == 0) return dp_fail(-EINVAL, "size 0");
    if (size > (1ull << 46)) return dp_fail(-EINVAL, "size %zu is beyond 64 TiB", size);
    struct dsmpool_seg *s = dp_obj_new(DP_OBJ_SEG, sizeof *s);
    if (!s) return dp_fail(-ENOMEM, "out of memory");
    dp_bracket_open(pool);
    r = seg_create_bracketed(pool, size, flags, s);
    dp_bracket_close(pool);
    if (r) {
        dp_obj_end(DP_OBJ_SEG, s);
        return r;
    }
    return seg_publish(pool, s, out);
}

int dsmpool_seg_attach(dsmpool *pool, dsmpool_handle h, dsmpool_seg **out) {
    dp_clear_error();
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    *out = NULL;
    int r = pool_ok(pool);
    if (r || (r = handle_ok(pool, h)) != 0) return r;
    struct dsmpool_seg *s = dp_obj_new(DP_OBJ_SEG, sizeof *s);
    if (!s) return dp_fail(-ENOMEM, "out of memory");
    uint64_t idx = DP_HANDLE_IDX(h);
    uint32_t gen = DP_HANDLE_GEN(h);
    if ((r = seg_ref(pool, idx, gen, &s->rec)) != 0) {
        dp_obj_end(DP_OBJ_SEG, s);
        return r;
    }
    if ((r = seg_map(pool, idx, gen, s)) != 0) {
        seg_unref(pool, s);
        dp_obj_end(DP_OBJ_SEG, s);
        return r;
    }
    return seg_publish(pool, s, out);
}

int dsmpool_seg_detach(dsmpool_seg *seg) {
    dp_clear_error();
    if (!seg) return dp_fail(-EINVAL, "seg is NULL");
    if (!dp_segset_take(seg)) return dp_fail(-EINVAL, "not an attached segment (detached twice?)");
    dsmpool *p = seg->pool;
    int r = dp_self(p); /* a fork()ed child adopts the segment first */
    seg_unlink(p, seg);
    if (r == 0 && seg->stale) r = dp_fail(-ESTALE, "the segment was destroyed before this process "
                                          "(a fork()ed child) took it over");
    else if (r == 0) seg_unref(p, seg);
    seg_free_obj(seg);
    return r;
}

/* In a fork()ed child: take a reference, in the child's name, on an
 * inherited attachment. If the segment went away between the fork and now
 * (the parent detached it), or no record fits, the object turns stale: no
 * address, and detach says -ESTALE. */
static void seg_adopt(dsmpool *p, struct dsmpool_seg *s) {
    dp_a64 *rec = NULL;
    s->rec = NULL;
    if (seg_ref(p, DP_HANDLE_IDX(s->handle), DP_HANDLE_GEN(s->handle), &rec) == 0) {
        s->rec = rec;
        return;
    }
    if (s->fallback && s->addr) dp_os_unmap(s->addr, s->size);
    s->addr = NULL;
    s->size = 0;
    s->fallback = false;
    s->stale = true;
}

static int seg_adopt_all(dsmpool *p) { /* the ledger's adopt hook; p->lock is held */
    for (struct dsmpool_seg *s = p->segs_head; s; s = s->next) seg_adopt(p, s);
    return 0;
}

void dp_seg_layer_init(void) {
    dp_ledger_set_adopt(seg_adopt_all);
    dp_segset_layer_init();
}

void dp_seg_unmap_all(dsmpool *p, bool drop_refs) {
    pthread_mutex_lock(&p->lock);
    struct dsmpool_seg *s = p->segs_head;
    p->segs_head = NULL;
    pthread_mutex_unlock(&p->lock);
    while (s) {
        struct dsmpool_seg *next = s->next;
        dp_segset_take(s);
        if (drop_refs) seg_unref(p, s);
        seg_free_obj(s);
        s = next;
    }
}

int dsmpool_seg_pin(dsmpool_seg *seg) {
    dp_clear_error();
    if (!seg || !dp_segset_has(seg)) return dp_fail(-EINVAL, "not an attached segment");
    dsmpool *p = seg->pool;
    int r = dp_self(p);
    if (r) return r;
    dp_seg_desc *d = &p->segs[DP_HANDLE_IDX(seg->handle)];
    uint32_t gen = DP_HANDLE_GEN(seg->handle);
    uint64_t w = dp_load_relaxed(&d->state);
    for (;;) {
        if (DP_SEG_GEN(w) != gen || DP_SEG_ST(w) != DP_SEG_LIVE)
            return dp_fail(-ESTALE, "segment was destroyed");
        if (DP_SEG_PINNED(w)) return dp_fail(-EALREADY, "segment is already pinned");
        if (dp_cas_acq_rel(&d->state, &w, w | SEG_PIN_BIT)) return 0; /* acq_rel: state change */
    }
}

/* Drop the pin of segment (idx, gen); if no reference is left, owner
 * destroys it. 0, -ESTALE (destroyed) or -EINVAL (not pinned). */
static int seg_unpin(dsmpool *pool, uint64_t idx, uint32_t gen, uint32_t owner) {
    dp_seg_desc *d = &pool->segs[idx];
    uint64_t w = dp_load_relaxed(&d->state);
    for (;;) {
        if (DP_SEG_GEN(w) != gen || DP_SEG_ST(w) != DP_SEG_LIVE) return -ESTALE;
        if (!DP_SEG_PINNED(w)) return -EINVAL;
        bool last = DP_SEG_COUNT(w) == 0;
        uint64_t nw = last ? DP_SEG_WORD(gen, owner + 1, 0, DP_SEG_DYING) : w & ~SEG_PIN_BIT;
        if (dp_cas_acq_rel(&d->state, &w, nw)) { /* acq_rel: as in seg_ref_drop */
            if (last) seg_destroy(pool, idx, gen, owner);
            return 0;
        }
    }
}

int dsmpool_seg_unpin(dsmpool *pool, dsmpool_handle h) {
    dp_clear_error();
    int r = pool_ok(pool);
    if (r || (r = handle_ok(pool, h)) != 0) return r;
    r = seg_unpin(pool, DP_HANDLE_IDX(h), DP_HANDLE_GEN(h), pool->slot);
    if (r == -ESTALE) return dp_fail(r, "segment %016llx was destroyed", (unsigned long long)h);
    if (r) return dp_fail(r, "segment %016llx is not pinned", (unsigned long long)h);
    return 0;
}

unsigned dp_seg_flags(dsmpool *pool, dsmpool_handle h) {
    if (!h || DP_HANDLE_IDX(h) >= pool->nsegs) return 0;
    dp_seg_desc *d = &pool->segs[DP_HANDLE_IDX(h)];
    uint64_t w = dp_load_acquire(&d->state); /* acquire: create's LIVE CAS */
    return DP_SEG_GEN(w) == DP_HANDLE_GEN(h) ? (unsigned)dp_load_relaxed(&d->flags) : 0;
}

/* Whether handle h names a LIVE segment now; if so, where its pool block is
 * (0 for an OS segment) and its usable size. A snapshot: it may die next. */
bool dp_seg_live(dsmpool *pool, dsmpool_handle h, uint64_t *blk, uint64_t *size) {
    if (!h || DP_HANDLE_IDX(h) >= pool->nsegs) return false;
    dp_seg_desc *d = &pool->segs[DP_HANDLE_IDX(h)];
    uint64_t w = dp_load_acquire(&d->state); /* acquire: create's LIVE CAS (block, size) */
    if (DP_SEG_GEN(w) != DP_HANDLE_GEN(h) || DP_SEG_ST(w) != DP_SEG_LIVE) return false;
    uint64_t b = dp_load_relaxed(&d->block);
    if (blk) *blk = b == DP_BLOCK_FALLBACK ? 0 : b;
    if (size) *size = dp_load_relaxed(&d->size);
    return true;
}

int dp_seg_os_create(dsmpool *pool, size_t bytes, dsmpool_handle *h, void **addr) {
    uint64_t idx = 0;
    uint32_t gen = 0;
    int r = seg_claim(pool, &idx, &gen);
    if (r) return r;
    dp_seg_desc *d = &pool->segs[idx];
    bytes = (bytes + DP_FRAME_SIZE - 1) & ~(size_t)(DP_FRAME_SIZE - 1);
    dp_store_relaxed(&d->block, DP_BLOCK_FALLBACK);
    if ((r = fallback_map(pool, idx, gen, bytes, true, addr)) != 0) {
        dp_store_relaxed(&d->block, 0);
        dp_store_release(&d->state, DP_SEG_WORD(gen, 0, 0, DP_SEG_FREE));
        return r == -EDQUOT ? -ENOMEM : r; /* (the room's message stands) */
    }
    dp_store_relaxed(&d->size, bytes);
    dp_store_relaxed(&d->flags, 0);
    dp_fetch_add_relaxed(&pool->hdr->fallback_created, 1);
    dp_seg_fallback_made(pool, bytes);
    /* release: block and size before LIVE; pinned with no reference */
    dp_store_release(&d->state, DP_SEG_WORD(gen, 0, 1, DP_SEG_LIVE));
    *h = DP_HANDLE(gen, idx);
    return 0;
}

int dp_seg_os_map(dsmpool *pool, dsmpool_handle h, void **addr, size_t *len) {
    if (!h || DP_HANDLE_IDX(h) >= pool->nsegs) return -EINVAL;
    uint64_t idx = DP_HANDLE_IDX(h);
    dp_seg_desc *d = &pool->segs[idx];
    uint64_t w = dp_load_acquire(&d->state); /* acquire: pairs with dp_seg_os_create's release */
    if (DP_SEG_GEN(w) != DP_HANDLE_GEN(h) || DP_SEG_ST(w) != DP_SEG_LIVE ||
        dp_load_relaxed(&d->block) != DP_BLOCK_FALLBACK)
        return -ESTALE;
    uint64_t size = dp_load_relaxed(&d->size);
    if (!size || size > (1ull << 46)) return -EPROTO;
    int r = fallback_map(pool, idx, DP_HANDLE_GEN(h), size, false, addr);
    if (r == 0) *len = size;
    return r;
}

void dp_seg_unpin_quiet(dsmpool *pool, dsmpool_handle h, uint32_t owner) {
    if (h && DP_HANDLE_IDX(h) < pool->nsegs) (void)seg_unpin(pool, DP_HANDLE_IDX(h), DP_HANDLE_GEN(h), owner);
}

uint64_t dp_seg_os_size(dsmpool *pool, dsmpool_handle h) {
    if (!h || DP_HANDLE_IDX(h) >= pool->nsegs) return 0;
    dp_seg_desc *d = &pool->segs[DP_HANDLE_IDX(h)];
    uint64_t w = dp_load_acquire(&d->state); /* acquire: pairs with dp_seg_os_create's release */
    if (DP_SEG_GEN(w) != DP_HANDLE_GEN(h) || dp_load_relaxed(&d->block) != DP_BLOCK_FALLBACK) return 0;
    uint64_t size = dp_load_relaxed(&d->size);
    return size <= (1ull << 46) ? size : 0;
}

void *dp_seg_area_ctl(dsmpool *p, uint64_t idx, uint64_t min_bytes) {
    if (idx >= p->nsegs) return NULL;
    uint64_t w = dp_load_acquire(&p->segs[idx].state); /* acquire: create's LIVE CAS */
    if (DP_SEG_ST(w) == DP_SEG_FREE || !(dp_load_relaxed(&p->segs[idx].flags) & DP_SEG_AREA))
        return NULL;
    uint64_t blk = dp_load_relaxed(&p->segs[idx].block);
    if (!blk || blk == DP_BLOCK_FALLBACK || DP_BLOCK_ORDER(blk) > DP_PA_MAX_ORDER) return NULL;
    uint64_t bytes = DP_BLOCK_BYTES(blk);
    if (bytes < min_bytes || !dp_block_ok(p, DP_BLOCK_OFF(blk), bytes)) return NULL;
    return dp_at(p, DP_BLOCK_OFF(blk));
}

/* The accessors answer 0 / NULL / false for a detached object (objs.c: its
 * memory is still ours, its magic is not the live one). */
static bool seg_live(const dsmpool_seg *seg) { return seg && seg->magic == DP_SEGOBJ_MAGIC; }
dsmpool_handle dsmpool_seg_handle(const dsmpool_seg *seg) { return seg_live(seg) ? seg->handle : 0; }
void *dsmpool_seg_address(const dsmpool_seg *seg) { return seg_live(seg) ? seg->addr : NULL; }
size_t dsmpool_seg_size(const dsmpool_seg *seg) { return seg_live(seg) ? seg->size : 0; }
bool dsmpool_seg_is_fallback(const dsmpool_seg *seg) { return seg_live(seg) && seg->fallback; }

/* ---- recovery ----------------------------------------------------------- */

typedef struct rec_ctx {
    uint32_t slot;
    unsigned n;          /* ambiguous records seen */
    uint64_t amb[64];    /* their (gen << 32 | index + 1), the first 64 */
    bool overflow;       /* more than 64: resync every live segment */
} rec_ctx;

/* Pass 1 over a dead slot's records: ACTIVE ones drop their reference
 * (marked DETACHING first, so a recoverer that dies here is not followed
 * by a second drop); ambiguous ones (PENDING, DETACHING) stay where they
 * are until the resync has settled their segment, so a recoverer that dies
 * meanwhile leaves them to the next. */
static void rec_recover(dsmpool *p, dp_a64 *r, void *arg) {
    rec_ctx *c = arg;
    uint64_t v = dp_load_acquire(r); /* acquire: pairs with the dead owner's record stores (dp_rec_add, seg_ref_bracketed) */
    if (!v) return;
    uint64_t idx = DP_REC_IDX(v);
    uint32_t gen = DP_REC_GEN(v);
    if (DP_REC_ST(v) == DP_REC_ACTIVE) {
        dp_store_relaxed(r, DP_REC(gen, idx, DP_REC_DETACHING)); /* idempotence: see proc.c [recovery] */
        if (idx < p->nsegs) seg_ref_drop(p, idx, gen, c->slot);
        dp_store_release(r, 0);
        return;
    }
    /* PENDING: the count may or may not have been raised; DETACHING: it may
     * or may not have been lowered (or a reference leaked). The resync
     * settles either. */
    unsigned st = DP_REC_ST(v);
    if (idx < p->nsegs && (st == DP_REC_PENDING || st == DP_REC_DETACHING)) {
        if (c->n < 64) c->amb[c->n++] = DP_HANDLE(gen, idx);
        else c->overflow = true;
    }
}

static void rec_clear(dsmpool *p, dp_a64 *r, void *arg) {
    (void)p;
    (void)arg;
    dp_store_release(r, 0);
}

typedef struct count_ctx {
    uint64_t handle;
    uint32_t active;
    bool in_flight;
    bool alive; /* the slot whose records are being counted lives */
} count_ctx;

static void rec_count(dsmpool *p, dp_a64 *r, void *arg) {
    count_ctx *c = arg;
    uint64_t v = dp_load_acquire(r); /* acquire: pairs with seg_ref_bracketed's release store of the record */
    if (!v || DP_HANDLE(DP_REC_GEN(v), DP_REC_IDX(v)) != c->handle) return;
    if (DP_REC_ST(v) == DP_REC_ACTIVE) c->active++;
    else if (c->alive) c->in_flight = true; /* a dead slot's ambiguous record holds nothing:
                                               its own recovery re-syncs, never drops */
}

/* Set a segment's count to the number of ACTIVE records that name it in
 * every slot but the one being recovered (whose ambiguous records are what
 * we are settling), when no live process's attach or detach of it is in
 * flight; the CAS fails (and we look again) if anything changed the count
 * meanwhile. slot owns the destruction if the count reaches 0. false: still
 * in flight after a while (that process may be stopped): recover.c [never half-way]. */
static bool seg_resync(dsmpool *p, uint64_t idx, uint32_t gen, uint32_t slot) {
    dp_seg_desc *d = &p->segs[idx];
    for (int tries = 0; tries < 1000; tries++) {
        uint64_t w = dp_load_acquire(&d->state); /* acquire: pairs with every count CAS (seg_ref_bracketed, seg_ref_drop) */
        if (DP_SEG_GEN(w) != gen || DP_SEG_ST(w) != DP_SEG_LIVE) return true;
        count_ctx c = {DP_HANDLE(gen, idx), 0, false, false};
        for (uint32_t sl = 0; sl < p->nprocs; sl++) {
            unsigned st = DP_SLOT_STATE(dp_load_acquire(&p->procs[sl].state));
            if (sl == slot || st == DP_SLOT_FREE || st == DP_SLOT_LEAVING) continue;
            c.alive = dp_slot_alive(p, sl);
            dp_slot_records(p, sl, rec_count, &c);
        }
        if (c.in_flight) { /* a live attach or detach: it finishes in a moment */
            dp_os_yield();
            continue;
        }
        if (c.active == DP_SEG_COUNT(w)) return true;
        bool dies = c.active == 0 && !DP_SEG_PINNED(w);
        uint64_t nw = dies ? DP_SEG_WORD(gen, slot + 1, 0, DP_SEG_DYING)
                           : DP_SEG_WORD(gen, c.active, DP_SEG_PINNED(w), DP_SEG_LIVE);
        if (dp_cas_acq_rel(&d->state, &w, nw)) { /* acq_rel: as in seg_ref_drop */
            if (dies) seg_destroy(p, idx, gen, slot);
            return true;
        }
    }
    return false;
}

bool dp_seg_recover_slot(dsmpool *p, uint32_t slot) {
    rec_ctx c = {slot, 0, {0}, false};
    dp_slot_records(p, slot, rec_recover, &c);
    bool settled = true;
    for (unsigned i = 0; i < c.n; i++)
        settled &= seg_resync(p, DP_HANDLE_IDX(c.amb[i]), DP_HANDLE_GEN(c.amb[i]), slot);
    if (c.overflow)
        for (uint64_t i = 0; i < p->nsegs; i++) {
            uint64_t w = dp_load_relaxed(&p->segs[i].state);
            if (DP_SEG_ST(w) == DP_SEG_LIVE) settled &= seg_resync(p, i, DP_SEG_GEN(w), slot);
        }
    if (settled) dp_slot_records(p, slot, rec_clear, NULL); /* pass 2: settled */
    for (uint64_t i = 0; i < p->nsegs; i++) {
        uint64_t w = dp_load_acquire(&p->segs[i].state); /* acquire: the dead owner's writes */
        unsigned st = DP_SEG_ST(w);
        if ((st == DP_SEG_INIT || st == DP_SEG_DYING) && DP_SEG_COUNT(w) == slot + 1)
            seg_destroy(p, i, DP_SEG_GEN(w), slot);
    }
    return settled;
}

/* ---- for the checker --------------------------------------------------- */

void dp_seg_mark_owned(dsmpool *p, dp_mark_fn mark, void *arg) {
    for (uint64_t i = 0; i < p->nsegs; i++) {
        dp_seg_desc *d = &p->segs[i];
        uint64_t w = dp_load_acquire(&d->state); /* acquire: pairs with seg_create_bracketed's LIVE CAS */
        if (DP_SEG_ST(w) == DP_SEG_FREE) continue;
        uint64_t blk = dp_load_acquire(&d->block); /* acquire: pairs with seg_create_bracketed's store */
        if (blk == DP_BLOCK_FALLBACK || blk == 0) continue;
        uint64_t size = dp_load_relaxed(&d->size); /* 0 while its creator had not set it */
        /* [exact to the page]: a word whose frames disagree with the size (a scribbled
         * trim code) is damage; marking its frames could let the sweep free
         * pages the segment still uses, or claim a neighbour's */
        if (DP_BLOCK_ORDER(blk) > DP_PA_MAX_ORDER || !dp_block_frames(blk) ||
            (size && size != DP_BLOCK_BYTES(blk))) {
            mark(arg, 0, 0, "a segment descriptor with a corrupt block word");
            continue;
        }
        mark(arg, DP_BLOCK_OFF(blk), DP_BLOCK_BYTES(blk), "a segment");
    }
}

typedef struct ref_ctx {
    uint32_t *refs;
    int err;
    char *why;
    size_t n;
} ref_ctx;

static void ck_record(dsmpool *p, dp_a64 *r, void *arg) {
    ref_ctx *c = arg;
    uint64_t v = dp_load_acquire(r); /* acquire: pairs with seg_ref_bracketed's release store of the record */
    if (!v || c->err) return;
    uint64_t idx = DP_REC_IDX(v);
    if (idx >= p->nsegs) {
        c->err = -EUCLEAN;
        snprintf(c->why, c->n, "an attachment record names descriptor %llu of %llu",
                 (unsigned long long)idx, (unsigned long long)p->nsegs);
    } else if (DP_REC_ST(v) != DP_REC_ACTIVE) {
        c->err = -EBUSY;
        snprintf(c->why, c->n, "an attach or detach of segment %llu is in progress",
                 (unsigned long long)idx);
    } else if (DP_SEG_GEN(dp_load_relaxed(&p->segs[idx].state)) == DP_REC_GEN(v)) {
        c->refs[idx]++;
    } else {
        c->err = -EUCLEAN;
        snprintf(c->why, c->n, "an attachment record names a destroyed segment (%llu)",
                 (unsigned long long)idx);
    }
}

int dp_seg_verify(dsmpool *p, char *why, size_t n) {
    for (uint64_t i = 0; i < p->nsegs; i++) {
        uint64_t w = dp_load_acquire(&p->segs[i].state); /* acquire: create's LIVE CAS */
        unsigned st = DP_SEG_ST(w);
        if (st == DP_SEG_INIT || st == DP_SEG_DYING) {
            bool live = DP_SEG_COUNT(w) >= 1 && dp_slot_alive(p, DP_SEG_COUNT(w) - 1);
            snprintf(why, n, live ? "segment %llu is being created or destroyed"
                                  : "segment %llu was left half-created or half-destroyed "
                                    "by a dead process; dsmpool_recover() finishes it",
                     (unsigned long long)i);
            return live ? -EBUSY : -EUCLEAN;
        }
        uint64_t blk = dp_load_relaxed(&p->segs[i].block);
        if (st == DP_SEG_LIVE && blk != DP_BLOCK_FALLBACK &&
            dp_load_relaxed(&p->segs[i].size) != DP_BLOCK_BYTES(blk)) {
            snprintf(why, n, "segment %llu has a corrupt block word", (unsigned long long)i);
            return -EUCLEAN;
        }
    }
    ref_ctx rc = {calloc(p->nsegs, sizeof(uint32_t)), 0, why, n};
    if (!rc.refs) {
        snprintf(why, n, "out of memory");
        return -ENOMEM;
    }
    for (uint32_t sl = 0; sl < p->nprocs && !rc.err; sl++) {
        unsigned st = DP_SLOT_STATE(dp_load_acquire(&p->procs[sl].state));
        if (st != DP_SLOT_FREE && st != DP_SLOT_LEAVING) dp_slot_records(p, sl, ck_record, &rc);
    }
    for (uint64_t i = 0; i < p->nsegs && !rc.err; i++) {
        uint64_t w = dp_load_relaxed(&p->segs[i].state);
        if (DP_SEG_ST(w) == DP_SEG_LIVE && DP_SEG_COUNT(w) != rc.refs[i]) {
            rc.err = -EUCLEAN;
            snprintf(why, n, "segment %llu has reference count %u but %u attachments",
                     (unsigned long long)i, DP_SEG_COUNT(w), rc.refs[i]);
        }
    }
    free(rc.refs);
    return rc.err;
}
