/*
 * area_cache.h -- this thread's cache inline, and the variables area_cache.c defines: the
 * hot path's record lookup and its list push.
 */
#ifndef DP_AREA_CACHE_H
#define DP_AREA_CACHE_H

#include "area.h"
#include <string.h>

extern pthread_mutex_t dp_ar_reg_lock; /* this process's areas and thread caches */
/* this thread's last cache; local-dynamic, as a file's static would be (the
 * library's own variable: linked into an executable, one load from the
 * thread pointer, no lea; area_cache.c says why not initial-exec) */
extern _Thread_local ar_tc *dp_ar_tc_last __attribute__((visibility("hidden"), tls_model("local-dynamic")));
/* why ar_tc_get gave NULL */
extern _Thread_local int dp_ar_tc_err __attribute__((visibility("hidden"), tls_model("local-dynamic")));
#ifdef DP_INJECTION
extern _Thread_local bool dp_ar_tc_force_shared; /* test-only: this thread's new caches take no record */
#endif

static inline ar_tc *ar_tc_get(struct dsmpool_area *a) {
    ar_tc *tc = dp_ar_tc_last;
    /* relaxed: only another thread's detach changes it, which is a
     * use-after-free anyway */
    if (dp_likely(tc && dp_load_relaxed_any(&tc->area) == a &&
                         tc->epoch == dp_epoch()))
        return tc;
    return dp_ar_tc_get_slow(a);
}

/* area_alloc.c [hot path], area_cache.c [drain]: freed chunk p of class c
 * (mapped at m) goes on this thread's list: its link and free tag (tag:
 * ar_free_tag of p) first, the head last (area_recover.c [lost chunks]: a
 * death in between leaves it tagged on no list); above two batches, one goes
 * back to the spans. Inside an operation on rec; the one push of both free
 * paths (dsmpool_area_free's inline case and dp_ar_free_op). */
static inline void ar_list_push_op(struct dsmpool_area *a, ar_cache *rec, unsigned c, dsmpool_ptr p, char *m,
                                   uint64_t tag) {
    dsmpool_ptr head = dp_load_relaxed(&rec->head[c]); /* relaxed: area_cache.c [one writer] */
    memcpy(m, &head, 8);
    memcpy(m + 8, &tag, 8);
    DP_INJECT("area.free.linked");
    dp_store_relaxed(&rec->head[c], p);
    uint64_t n = dp_load_relaxed(&rec->count[c]) + 1;
    dp_store_relaxed(&rec->count[c], n);
    if (dp_unlikely(n > 2 * cls_batch(c))) dp_ar_drain_op(a, rec, c);
}

#endif /* DP_AREA_CACHE_H */
