/*
 * fork.c -- fork detection, the one pthread_atfork registration of the
 * library with every layer's fork handlers, and this process's registry of
 * attached pools.
 *
 * Layer: ledger (pool/ledger), its bottom file: it includes only its own
 * header (fork.h) and the layers below, so the hot path's dp_epoch() (an
 * inline of fork.h) and what it reads live together.
 *
 * Rules
 *   [every fork is seen] A value that changes in every child of a fork of
 *      any kind, fork(), _Fork(), syscall(SYS_fork) and clone() included: a
 *      page advised MADV_WIPEONFORK, which the kernel zeroes in the child
 *      (the pthread_atfork child handler zeroes it too, where the kernel
 *      lacks the advice). One load on the fast path (dp_epoch); the first
 *      call that finds it zero takes a new epoch, and in a child that did
 *      not run the handlers first makes every layer's locks new (their
 *      reset handlers), since a thread that held one in the parent does not
 *      exist in the child.
 *   [one registration] The library calls pthread_atfork once, here; every
 *      layer registers its dp_fork_ops (fork.h's lock-rank table), and the
 *      handlers run them: prepare in rising rank, parent and child in
 *      falling rank, reset after a fork that skipped the handlers.
 *   [registry] The pools this process has attached, under reg_lock (rank
 *      DP_RANK_POOLS, then each pool->lock): a second detach is refused,
 *      and the fork handlers reach every pool.
 *
 * Memory ordering: the epoch is relaxed: it only has to differ from every
 * value this process stored before (racing first calls agree on one); the
 * locks order the rest.
 */
#include <pthread.h>
#include <stdbool.h>

#include "fork.h"
#include "dp_os.h"

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static dsmpool *reg_head;

#define FORK_OPS 8
static const dp_fork_ops *fork_ops[FORK_OPS]; /* by rank, rising */
static unsigned nfork_ops;

static pthread_mutex_t fork_ops_lock = PTHREAD_MUTEX_INITIALIZER; /* the table; held around fork */

void dp_ledger_on_fork(const dp_fork_ops *ops) {
    pthread_mutex_lock(&fork_ops_lock);
    bool known = false;
    for (unsigned i = 0; i < nfork_ops; i++) known |= fork_ops[i] == ops;
    if (!known && nfork_ops < FORK_OPS) { /* (always room: one per layer) */
        unsigned i = nfork_ops++;
        for (; i > 0 && fork_ops[i - 1]->rank > ops->rank; i--) fork_ops[i] = fork_ops[i - 1];
        fork_ops[i] = ops;
    }
    pthread_mutex_unlock(&fork_ops_lock);
}

void dp_ledger_each_pool(void (*fn)(dsmpool *)) {
    for (dsmpool *p = reg_head; p; p = p->reg_next) fn(p);
}

/* ---- [every fork is seen], [one registration] ------------------------------------ */

dp_fork_page *dp_forkp;
static dp_fork_page fork_static; /* where no page could be mapped */
static _Atomic unsigned epoch_last; /* plain memory: a child continues its parent's count */
static bool atfork_ran;             /* the child handler ran in this child */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* The one pthread_atfork registration of the library: every layer's fork
 * handlers run from here, prepare in rising rank (the lock-rank table,
 * dp_ledger.h), parent and child in falling rank; the ledger's own locks
 * (the registry, then each pool's, rank DP_RANK_POOLS) and objs.c's (a
 * leaf, DP_RANK_OBJS, taken for the base layer) are two of them. */
static void ledger_lock_pools(void) {
    pthread_mutex_lock(&reg_lock);
    for (dsmpool *p = reg_head; p; p = p->reg_next) pthread_mutex_lock(&p->lock);
}

static void ledger_unlock_pools(void) {
    for (dsmpool *p = reg_head; p; p = p->reg_next) pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&reg_lock);
}

static void ledger_child(void) {
    /* single-threaded here: plain stores are enough */
    if (dp_forkp) dp_store_relaxed_uint32_t(&dp_forkp->epoch, 0);
    atfork_ran = true;
    ledger_unlock_pools();
}

static void ledger_reset(void) {
    pthread_mutex_init(&reg_lock, NULL);
    for (dsmpool *p = reg_head; p; p = p->reg_next) pthread_mutex_init(&p->lock, NULL);
}

static const dp_fork_ops ledger_fork = {DP_RANK_POOLS, ledger_lock_pools, ledger_unlock_pools, ledger_child,
                                        ledger_reset};
static const dp_fork_ops objs_fork = {DP_RANK_OBJS, dp_objs_fork_lock, dp_objs_fork_unlock,
                                      dp_objs_fork_unlock, dp_objs_fork_reset};

static void atfork_prepare(void) {
    pthread_mutex_lock(&fork_ops_lock);
    for (unsigned i = 0; i < nfork_ops; i++)
        if (fork_ops[i]->prepare) fork_ops[i]->prepare();
}

static void atfork_parent(void) {
    for (unsigned i = nfork_ops; i-- > 0;)
        if (fork_ops[i]->parent) fork_ops[i]->parent();
    pthread_mutex_unlock(&fork_ops_lock);
}

static void atfork_child(void) {
    for (unsigned i = nfork_ops; i-- > 0;)
        if (fork_ops[i]->child) fork_ops[i]->child();
    pthread_mutex_unlock(&fork_ops_lock);
}

static void fork_init(void) {
    void *pg = NULL;
    bool wipes = false;
    dp_forkp = dp_os_fork_page(&pg, &wipes) == 0 ? pg : &fork_static;
    dp_ledger_on_fork(&ledger_fork);
    dp_ledger_on_fork(&objs_fork);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* A fork that skipped the atfork handlers copied the library's locks as
 * they were: every layer re-initialises its own (only this thread exists
 * here). */
static void reset_after_raw_fork(void) {
    pthread_mutex_init(&fork_ops_lock, NULL);
    for (unsigned i = nfork_ops; i-- > 0;)
        if (fork_ops[i]->reset) fork_ops[i]->reset();
}

void dp_ledger_layer_init(void) { pthread_once(&fork_once, fork_init); }

unsigned dp_epoch_slow(void) {
    pthread_once(&fork_once, fork_init);
    unsigned e = dp_load_relaxed_uint32_t(&dp_forkp->epoch);
    if (e) return e;
    /* the first call in this process, or the first in a child: a child has
     * a parent's count (epoch_last != 0) */
    if (dp_load_relaxed_uint32_t(&epoch_last) != 0) {
        if (!atfork_ran) reset_after_raw_fork();
        atfork_ran = false;
    }
    unsigned ne = dp_fetch_add_relaxed_uint32_t(&epoch_last, 1) + 1;
    if (ne == 0) ne = dp_fetch_add_relaxed_uint32_t(&epoch_last, 1) + 1;
    unsigned z = 0;
    /* relaxed: the epoch only has to differ from every value this process
     * stored before; racing first calls in one process agree on one value */
    dp_cas_relaxed_uint32_t(&dp_forkp->epoch, &z, ne);
    return dp_load_relaxed_uint32_t(&dp_forkp->epoch);
}

/* ---- [registry] ------------------------------------------------------------------- */

void dp_registry_add(dsmpool *pool) {
    unsigned e = dp_epoch();
    pthread_mutex_lock(&reg_lock);
    dp_store_relaxed_uint32_t(&pool->fork_epoch, e);
    pool->reg_next = reg_head;
    reg_head = pool;
    pthread_mutex_unlock(&reg_lock);
}

bool dp_registry_take(dsmpool *pool) {
    bool found = false;
    pthread_mutex_lock(&reg_lock);
    for (dsmpool **pp = &reg_head; *pp; pp = &(*pp)->reg_next)
        if (*pp == pool) {
            *pp = pool->reg_next;
            found = true;
            break;
        }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

