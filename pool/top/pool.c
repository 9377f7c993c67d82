/*
 * pool.c -- a process joins and leaves a pool: the top of the layers.
 *
 *   create  anchor -> region (mapped, formatted) -> lock file -> presence
 *           -> slot -> publish
 *   attach  region (validated) -> lock file -> LIFE shared, presence, the
 *           name still leads here, anchor if home -> slot -> LIFE let go
 *   detach  areas -> segments -> slot -> presence (the last process out
 *           cleans up: life.c) -> lock file -> region
 *   destroy the names (region, OS fallback segments), then detach
 *
 * Every layer is initialised once per process before the first pool,
 * bottom up: the ledger makes its fork page and its one pthread_atfork
 * registration; the segment layer registers its adoption hook and its fork
 * handlers with the ledger, the area layer its destructor for area control
 * segments and its trim hook with the segment layer and its fork handlers
 * with the ledger, recovery its reclaim hook, names and recovery their
 * locks' renewal in a fork()ed child, the lifecycle its join hooks, the
 * elastic pool its fork handler (no helper thread in a child) (lower
 * layers learn what higher ones do only through these registrations).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dp_top.h"
#include "dp_os.h"

static pthread_once_t layers_once = PTHREAD_ONCE_INIT;

static void layers_init(void) {
    dp_ledger_layer_init();
    dp_seg_layer_init();
    dp_area_layer_init();
    dp_recover_layer_init();
    dp_names_layer_init();
    dp_life_layer_init();
    dp_elastic_layer_init();
}

/* A slot for a process that has just mapped the pool; a full table is first
 * relieved of dead processes. */
static int join(dsmpool *p) {
    int r = dp_ledger_open(p);
    if (r) return r;
    r = dp_slot_claim(p);
    if (r == -ENOSPC && dp_recover_all(p) > 0) r = dp_slot_claim(p);
    if (r == 0) dp_registry_add(p);
    return r;
}

size_t dsmpool_min_size(const dsmpool_config *cfg) {
    dp_clear_error();
    dsmpool_config full;
    if (dp_config_take(cfg, &full) != 0) return 0;
    return dp_region_min_size(&full);
}

/* A pool that did not get the pages asked for says so in
 * dsmpool_last_error() although create succeeded: HUGE_TRY fell back
 * (region.c left the reason), or HUGE_TRANSPARENT was given no huge page
 * (the truth from smaps, after the prefault). */
static void create_note(dsmpool *p, const dsmpool_config *cfg) {
    dp_clear_error();
    if (!p->note[0] && cfg->huge_pages == DSMPOOL_HUGE_TRANSPARENT && cfg->prefault) {
        dsmpool_stats st;
        if (dsmpool_get_stats(p, &st) == 0 && st.huge_mapped_bytes == 0)
            snprintf(p->note, sizeof p->note,
                     "DSMPOOL_HUGE_TRANSPARENT: the kernel gave the pool no huge page (%s): "
                     "anonymous, memfd and System V memory need "
                     "/sys/kernel/mm/transparent_hugepage/shmem_enabled = advise (or always), a "
                     "POSIX pool needs /dev/shm mounted with huge=advise (or always)",
                     st.thp_advised ? "MADV_HUGEPAGE was applied" : "MADV_HUGEPAGE failed");
    }
    if (p->note[0]) dp_fail(0, "%s", p->note);
}

int dsmpool_create(const dsmpool_config *cfg, dsmpool **out) {
    dp_clear_error();
    pthread_once(&layers_once, layers_init);
    if (out) *out = NULL;
    if (!cfg || !out) return dp_fail(-EINVAL, "cfg and out must not be NULL");
    dsmpool_config full;
    int r = dp_config_take(cfg, &full);
    if (r) return r;
    cfg = &full;
    /* life.c [anchor]: the anchor before any named object of the pool */
    uint64_t id = dp_os_random64(), shm_dev = 0, shm_ino = 0;
    int shmdir = -1;
    int anchor = dp_life_anchor_create(id, cfg->mode ? cfg->mode : 0600, &shmdir, &shm_dev, &shm_ino);
    dsmpool *p;
    r = dp_region_create(cfg, id, &p);
    if (r == -EEXIST && cfg->replace_stale && cfg->name) {
        char why[512];
        snprintf(why, sizeof why, "%s", dsmpool_last_error());
        int rr = dp_life_remove(cfg->name, false, (int)cfg->backing);
        if (rr == 0) {
            r = dp_region_create(cfg, id, &p);
        } else {
            char why2[512];
            snprintf(why2, sizeof why2, "%s", dsmpool_last_error());
            r = dp_fail(-EEXIST, "%s, and it is not stale: %s", why, why2);
        }
    }
    if (r) {
        if (anchor >= 0) {
            dp_os_close(anchor);
            dp_life_anchor_remove(shmdir, id);
            dp_os_close(shmdir);
        }
        return r;
    }
    p->anchor = anchor;
    p->shmdir = shmdir;
    /* [imm]: before the magic */
    p->hdr->no_anchor = p->geo.no_anchor = anchor < 0;
    p->hdr->shm_dev = p->geo.shm_dev = shm_dev;
    p->hdr->shm_ino = p->geo.shm_ino = shm_ino;
    if ((r = dp_live_created(p)) != 0 || (r = dp_life_join(p, true)) != 0 || (r = join(p)) != 0) {
        if (p->present) dp_live_absent(&p->live);
        dp_live_destroy(p);
        dp_live_close(p);
        dp_ledger_close(p);
        if (anchor >= 0) {
            dp_os_close(anchor);
            dp_life_anchor_remove(shmdir, id);
            dp_os_close(shmdir);
        }
        dp_region_abandon(p);
        return r;
    }
    dp_region_publish(p);
    dp_life_joined(p);
    *out = p;
    create_note(p, cfg);
    return 0;
}

static int attached(dsmpool *p, dsmpool **out) {
    int r = dp_live_attached(p);
    if (r == 0 && (r = dp_life_join(p, false)) == 0) {
        r = join(p);
        dp_life_joined(p);
        if (r) {
            char why[512];
            snprintf(why, sizeof why, "%s", dsmpool_last_error());
            dp_life_leave(p);
            dp_fail(r, "%s", why);
        }
    }
    if (r) {
        if (p->shmdir >= 0) dp_os_close(p->shmdir);
        dp_live_close(p);
        dp_ledger_close(p);
        dp_region_free(p);
        return r;
    }
    *out = p;
    if (p->shmdir < 0 && !p->geo.no_anchor) /* life.c [anchor]: attached, and told what it lacks */
        dp_fail(0, "this process sees another /dev/shm than the pool's creator did (another mount "
                "namespace, or another tmpfs mounted there): it takes part in the pool, but cannot make "
                "or map the pool's OS fallback segments, so a segment or area allocation that the pool "
                "cannot serve gets -ENOMEM here, and one that lives in an OS segment -EXDEV");
    return 0;
}

int dsmpool_attach(const char *name, dsmpool **out) {
    dp_clear_error();
    pthread_once(&layers_once, layers_init);
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    *out = NULL;
    dsmpool *p;
    int r = dp_region_attach(name, &p);
    return r ? r : attached(p, out);
}

int dsmpool_attach_fd(int fd, dsmpool **out) {
    dp_clear_error();
    pthread_once(&layers_once, layers_init);
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    *out = NULL;
    dsmpool *p;
    int r = dp_region_attach_fd(fd, &p);
    return r ? r : attached(p, out);
}

static int pool_leave(dsmpool *p) {
    /* Detach segments and release the slot (the child of a fork that never
     * used the pool holds neither: it only unmaps). */
    bool mine = dp_load_relaxed_uint32_t(&p->fork_epoch) == dp_epoch() && p->has_slot;
    dp_elastic_stop(p); /* the helper thread first: it calls the pool */
    dp_area_detach_pool(p); /* areas first: their caches go back while the pool is mapped */
    dp_seg_unmap_all(p, mine);
    if (mine) dp_slot_release(p);
    if (mine) {
        dp_life_leave(p); /* the last process out cleans up (life.c [last out]) */
    } else if (p->anchor >= 0) {
        dp_os_close(p->anchor); /* a child's copy of its parent's: not ours to unlock */
    }
    if (p->shmdir >= 0) dp_os_close(p->shmdir);
    dp_live_close(p);
    dp_ledger_close(p);
    dp_region_free(p);
    return 0;
}

int dsmpool_detach(dsmpool *pool) {
    dp_clear_error();
    if (!pool) return dp_fail(-EINVAL, "pool is NULL");
    if (!dp_registry_take(pool))
        return dp_fail(-EINVAL, "not an attached pool (already detached?)");
    return pool_leave(pool);
}

/* Leave trusting nothing in the region: no reference dropped, no cache given
 * back, no slot released, no cleanup as the last one out -- only this
 * process's objects ended, the region unmapped and the descriptors closed.
 * The kernel drops this process's liveness lock with its descriptors, so
 * the others see it as dead; what it held is theirs to recover (or nobody's,
 * if the pool is being thrown away). */
int dsmpool_abandon(dsmpool *pool) {
    dp_clear_error();
    if (!pool) return dp_fail(-EINVAL, "pool is NULL");
    if (!dp_registry_take(pool))
        return dp_fail(-EINVAL, "not an attached pool (already detached?)");
    pool->abandoned = true;
    dp_elastic_stop(pool);
    dp_area_detach_pool(pool);
    dp_seg_unmap_all(pool, false);
    if (pool->anchor >= 0) dp_os_close(pool->anchor);
    if (pool->shmdir >= 0) dp_os_close(pool->shmdir);
    dp_live_close(pool);
    dp_ledger_close(pool);
    dp_region_free(pool);
    return 0;
}

int dsmpool_destroy(dsmpool *pool) {
    dp_clear_error();
    if (!pool) return dp_fail(-EINVAL, "pool is NULL");
    if (!dp_registry_take(pool))
        return dp_fail(-EINVAL, "not an attached pool (already detached?)");
    /* release: pairs with the last process out's acquire (life.c [last out]): it
     * removes the anchor and the OS fallback segments, which processes still
     * attached may go on using until then */
    dp_store_release(&pool->hdr->destroyed, 1);
    int r = dp_region_unlink(pool);
    char msg[512];
    if (r) snprintf(msg, sizeof msg, "%s", dsmpool_last_error());
    pool_leave(pool);
    return r ? dp_fail(r, "%s", msg) : 0;
}
