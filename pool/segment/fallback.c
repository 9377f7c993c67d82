/*
 * fallback.c -- spilling to the OS is visible: which OS segments a public
 * call made, the bytes in them and their high-water mark, and the
 * process's hook that hears of them.
 *
 * Layer: segments (pool/segment), its bottom file: it includes only its own
 * header (fallback.h) and the ledger below, so dp_fallback_fire() (an
 * inline every public call ends with) and what it reads live together.
 *
 * Rules
 *   [spilling is visible] Every OS segment made adds its bytes to this
 *      thread's pending note (segment.c calls dp_seg_fallback_made), and
 *      the public call that made it reports the note to the process's hook
 *      (dp_fallback_fire) once it holds no lock, bracket or area
 *      operation; a call that failed reports nothing. The high-water mark
 *      of the bytes in OS segments is raised then, from a walk of the
 *      descriptors (dp_seg_fallback_bytes), so no counter exists that a
 *      death could skew.
 *
 * Memory ordering: the descriptor walk's acquire loads pair with
 * seg_create_bracketed's release LIVE CAS (size); the high-water mark is a
 * relaxed statistic (its CAS validates); the hook is read under pool->lock.
 */
#include <pthread.h>

#include "fallback.h"


_Thread_local dp_fb_note dp_fb_pending;

/* Bytes in OS segments now: a walk of the descriptors (exact when quiet). */
uint64_t dp_seg_fallback_bytes(dsmpool *p) {
    uint64_t sum = 0;
    for (uint64_t i = 0; i < p->nsegs; i++) {
        uint64_t w = dp_load_acquire(&p->segs[i].state); /* acquire: create's LIVE store (size) */
        if (DP_SEG_ST(w) != DP_SEG_LIVE || dp_load_relaxed(&p->segs[i].block) != DP_BLOCK_FALLBACK)
            continue;
        uint64_t size = dp_load_relaxed(&p->segs[i].size);
        if (size <= (1ull << 46)) sum += size; /* a damaged size is not summed */
    }
    return sum;
}

/* An OS segment of bytes was made by this thread ([spilling is visible]). */
void dp_seg_fallback_made(dsmpool *p, uint64_t bytes) {
    if (dp_fb_pending.pool && dp_fb_pending.pool != p) dp_fb_pending.bytes = 0; /* (a stale note) */
    dp_fb_pending.pool = p;
    dp_fb_pending.bytes += bytes;
}

void dp_fallback_fire_slow(int r) {
    dsmpool *p = dp_fb_pending.pool;
    uint64_t bytes = dp_fb_pending.bytes;
    dp_fb_pending.pool = NULL;
    dp_fb_pending.bytes = 0;
    /* a call that failed gave back what it made (or keeps it for nobody) */
    if (r || !p || !bytes || p->magic != DP_POOL_MAGIC) return;
    /* the descriptor being made is LIVE by now: the walk counts it */
    uint64_t now = dp_seg_fallback_bytes(p);
    uint64_t peak = dp_load_relaxed(&p->hdr->fallback_peak); /* relaxed: a statistic; the CAS validates */
    /* relaxed: a high-water mark orders nothing */
    while (now > peak && !dp_cas_weak_relaxed(&p->hdr->fallback_peak, &peak, now)) {
    }
    pthread_mutex_lock(&p->lock);
    void (*fn)(void *, size_t) = p->fb_hook;
    void *arg = p->fb_arg;
    pthread_mutex_unlock(&p->lock);
    if (fn) fn(arg, (size_t)bytes);
}

int dsmpool_set_fallback_hook(dsmpool *pool, void (*fn)(void *arg, size_t bytes), void *arg) {
    dp_clear_error();
    if (!pool || pool->magic != DP_POOL_MAGIC) return dp_fail(-EINVAL, "not an attached pool");
    pthread_mutex_lock(&pool->lock);
    pool->fb_hook = fn;
    pool->fb_arg = fn ? arg : NULL;
    pthread_mutex_unlock(&pool->lock);
    return 0;
}

