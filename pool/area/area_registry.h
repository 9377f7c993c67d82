/*
 * area_registry.h -- registry entries inline (area_registry.c).
 */
#ifndef DP_AREA_REGISTRY_H
#define DP_AREA_REGISTRY_H

#include "area.h"

/* The registry entry of a located chunk (small pool chunks skip it). */
static inline ar_span *ar_locate_entry(struct dsmpool_area *a, ar_loc *l) {
    if (!l->sp) l->sp = dp_ar_entry(a->pool, a->ctl, l->e);
    return l->sp;
}

#endif /* DP_AREA_REGISTRY_H */
