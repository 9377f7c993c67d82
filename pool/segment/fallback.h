/*
 * fallback.h -- spilling to the OS is visible (fallback.c): the note of the
 * OS segments this thread made in the current public call, and the hook's
 * report; dp_segment.h includes it.
 */
#ifndef DP_FALLBACK_H
#define DP_FALLBACK_H

#include "dp_ledger.h"

/* fallback.c [spilling is visible]: the OS segments this thread made in the current public
 * call, reported by dp_fallback_fire(r) once no lock, bracket or area
 * operation is held (r: the call's result; a failed call reports nothing). */
typedef struct dp_fb_note {
    struct dsmpool *pool;
    uint64_t bytes;
} dp_fb_note;
extern _Thread_local dp_fb_note dp_fb_pending;
void dp_fallback_fire_slow(int r);
static inline void dp_fallback_fire(int r) {
    if (dp_unlikely(dp_fb_pending.bytes != 0)) dp_fallback_fire_slow(r);
}
uint64_t dp_seg_fallback_bytes(struct dsmpool *pool); /* bytes in OS segments now (a walk) */
void dp_seg_fallback_made(struct dsmpool *pool, uint64_t bytes); /* an OS segment of bytes was made */

#endif /* DP_FALLBACK_H */
