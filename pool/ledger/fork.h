/*
 * fork.h -- fork detection, fork handlers and the lock-rank table, and the
 * registry of this process's pools (fork.c): the ledger's bottom, which
 * dp_ledger.h includes.
 */
#ifndef DP_FORK_H
#define DP_FORK_H

#include "dp_region.h"

/* Fork detection (fork.c [every fork is seen]): a value that changes in every child of a
 * fork of any kind, fork(), _Fork(), syscall(SYS_fork) and clone() included
 * (a MADV_WIPEONFORK page; the atfork handler where the kernel lacks it).
 * One load on the fast path. */
typedef struct dp_fork_page {
    _Atomic unsigned epoch; /* 0: this process was forked since it was last read */
} dp_fork_page;
extern dp_fork_page *dp_forkp;
unsigned dp_epoch_slow(void);
static inline unsigned dp_epoch(void) {
    unsigned e = dp_forkp ? dp_load_relaxed_uint32_t(&dp_forkp->epoch) : 0;
    return dp_likely(e != 0) ? e : dp_epoch_slow();
}

/* ---- fork handlers and the lock-rank table ----------------------------------
 * Every process-local lock of the library, in the one order a thread may
 * take them: lower rank first; a thread that holds one never waits for one
 * of a lower rank. The ledger's single pthread_atfork registration runs
 * every layer's handlers: prepare in rising rank (each takes its layer's
 * locks), parent and child in falling rank (each gives them back, or makes
 * them new); a fork that skipped the handlers (a raw clone, _Fork) runs
 * every layer's reset in the child instead, at its first call.
 *   rank  lock                                       layer      around fork
 *   10    reg_lock, then each pool->lock (registry   ledger     taken
 *         order)
 *   20    dp_ar_reg_lock, then each area->lock       areas      taken
 *   30    set_lock (the attached segment objects)    segments   taken
 *   40    objs.c's lock                              base       taken (a leaf)
 *   --    pool->recover_lock, pool->lost_lock        recovery   new in the child
 *   --    pool->names_mutex                          names      new in the child
 *   --    pool->maint_mutex (and the helper thread)  elastic    new in the child (none)
 * The unranked ones are never held while a ranked one is taken, and are not
 * taken around fork (a recovery, or a wait for a name, may take seconds):
 * the child makes them new, as it does everything a thread of its parent
 * held. Each layer registers its handlers once, from its layer init. */
enum { DP_RANK_POOLS = 10, DP_RANK_AREAS = 20, DP_RANK_SEGSET = 30, DP_RANK_OBJS = 40, DP_RANK_NONE = 100 };
typedef struct dp_fork_ops {
    unsigned rank;         /* DP_RANK_* */
    void (*prepare)(void); /* take the layer's locks (NULL: none around fork) */
    void (*parent)(void);  /* give them back */
    void (*child)(void);   /* the child, after the handlers: give back, or make new */
    void (*reset)(void);   /* the child of a fork that skipped the handlers: make new */
} dp_fork_ops;
void dp_ledger_on_fork(const dp_fork_ops *ops);
void dp_ledger_each_pool(void (*fn)(struct dsmpool *pool)); /* in a fork handler: every attached pool */
void dp_ledger_layer_init(void);                            /* first of the layer inits (pool.c) */

/* fork.c [registry]: this process's attached pools. */
void dp_registry_add(struct dsmpool *pool);
bool dp_registry_take(struct dsmpool *pool); /* remove if registered; false if not */

#endif /* DP_FORK_H */
