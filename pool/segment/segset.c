/*
 * segset.c -- this process's attached segment objects: a set of the
 * dsmpool_seg objects it handed out and has not detached, so that a call
 * on one that was detached (or never was one) is refused, not followed.
 *
 * Layer: segments (pool/segment), for segment.c. Process-local: an open
 * hash set of the objects' addresses (tombstones for the taken ones,
 * doubled when half full) under set_lock, a mutex of rank DP_RANK_SEGSET
 * that the ledger's fork handlers take around fork (dp_segset_layer_init
 * registers them), so a child finds it whole and unlocked.
 */
#include <pthread.h>
#include <stdlib.h>

#include "dp_segment.h"

static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;

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

static void set_lock_take(void) { pthread_mutex_lock(&set_lock); }
static void set_lock_give(void) { pthread_mutex_unlock(&set_lock); }
static void set_lock_new(void) { pthread_mutex_init(&set_lock, NULL); }
static const dp_fork_ops seg_fork = {DP_RANK_SEGSET, set_lock_take, set_lock_give, set_lock_give, set_lock_new};

void dp_segset_layer_init(void) { dp_ledger_on_fork(&seg_fork); }
