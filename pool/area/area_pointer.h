/*
 * area_pointer.h -- pointers inline: a relocatable pointer's local address (area_pointer.c), for the
 * hot path that converts one per tuple.
 */
#ifndef DP_AREA_POINTER_H
#define DP_AREA_POINTER_H

#include "area.h"

/* The local address of p, with room for need bytes there, or NULL. Pool
 * pointers must lie in the data; fallback ones in their entry's current
 * segment, with its check. */
static inline char *ar_addr_n(struct dsmpool_area *a, dsmpool_ptr p, uint64_t need) {
    if (!(p & FB_BIT))
        return p >= a->data_off && p - a->data_off < a->data_size &&
                       need <= a->data_size - (p - a->data_off)
                   ? a->base + p
                   : NULL;
    if (FB_TAG(p) != a->tag || !a->tag) return NULL; /* another area's */
    ar_fb *r = dp_ar_fb_map(a, FB_ENTRY(p));
    if (!r || FB_OFF(p) >> r->nb != r->chk) return NULL; /* another segment's: stale */
    uint64_t off = FB_OFF(p) & ((1ull << r->nb) - 1);
    return off < r->len && need <= r->len - off ? r->base + off : NULL;
}

#endif /* DP_AREA_POINTER_H */
