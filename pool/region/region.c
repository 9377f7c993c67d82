/*
 * region.c -- the shared region's life: creation, publication, attachment,
 * teardown. The layout and its checks are layout.c's, the config's
 * config.c's, the plan of sub-pools place.c's, and what differs between
 * backings backing.c's.
 *
 * Rules
 *   [creation] Open the backing object, size it, reserve its memory
 *      (fallocate, or the hugetlb reservation at mmap/shmget) so exhaustion
 *      is an error now and never a SIGBUS later (backing.c), map it at an
 *      address aligned to map_align (>= 2 MiB, so THP and huge pages line
 *      up with the allocator's 2 MiB nodes; by default 1 GiB for a hugetlb
 *      region of 1 GiB or more: x86 Linux shares the page-table page of
 *      each whole, aligned GiB of a shared hugetlb mapping among all its
 *      mappers, so 1024 processes hold one instead of 1024, a release
 *      unmaps a page once instead of in each of them, and a refilled page
 *      is mapped in all by the first touch -- bench/pagetables; the cost
 *      is address space only), advise THP, populate in
 *      parallel (place.c), write the tables, and store the magic last
 *      (release), so an attacher that reads the magic (acquire) sees a
 *      complete header. A named region is locked by its creator from its
 *      first step until the magic, and is named only once it holds a
 *      provisional header (DP_MAGIC_CREATING, format, pool id): backing.c
 *      [creation lock]; so an attacher that finds no magic knows which case
 *      it is in (backing.c [unborn]). The kernel drops the lock of a creator
 *      that dies. Before it reserves or populates anything, creation holds
 *      the size against the cgroup and the huge pages there are (place.c
 *      [fits first]).
 *   [huge pages] ON fails with -ENOMEM and a message saying how many pages
 *      to reserve; TRY retries with base pages and records the fallback.
 *   [undo] On failure everything done so far is undone in reverse order
 *      (region_undo: the backing's part, then the reservation).
 *   [elastic] A pool is elastic when the config sets resident_min,
 *      idle_release_ms or warm_bytes, or a size beyond the machine's memory:
 *      its size is then a reservation -- address space and tables -- of which
 *      only the tables and resident_min (split over the sub-pools by their
 *      sizes, each share from the sub-pool's start, in release units:
 *      resident.c [release unit]) are reserved, prefaulted and held against
 *      the cgroup at creation ([fits first] of place.c sees only that); the
 *      rest is mapped MAP_NORESERVE (SHM_NORESERVE), left a hole in the
 *      file, and marked released in the residency table, so that the first
 *      block handed out there is made resident first (resident.c [refill
 *      on demand]). It needs MADV_POPULATE_WRITE: a touch where a page cannot
 *      be had would be a SIGBUS (hugetlb under MAP_NORESERVE, a full tmpfs)
 *      or the OOM killer, so on a kernel without it an elastic pool is
 *      refused (-EOPNOTSUPP). A pool that is not elastic has every granule
 *      resident, as before; dsmpool_trim() can still release its free ones.
 *
 * Injection point (tests): "region.create.zeroed", the named region's
 * tables cleared, its provisional header still there.
 *
 * Layer: the region is below everything that lives in it. It maps, formats
 * and validates; the magic is published (dp_region_publish) by pool.c once
 * the creator holds its liveness lock and its slot, and slots, liveness and
 * teardown of what lives in the region are the layers' above (pool.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "dp_numa.h"
#include "dp_region.h"
#include "dp_os.h"


static dsmpool *pool_new(void);
static void pool_free(dsmpool *p);

/* ---- creation ----------------------------------------------------------- */

/* [undo]: what a create did, in reverse: the backing's part (backing.c),
 * then the reservation. Idempotent. */
static void region_undo(dp_creating *c) {
    dsmpool *p = c->p;
    dp_backing(p->backing)->undo(c);
    if (c->va) dp_os_unmap(c->va, c->va_len);
    c->va = NULL;
    c->mapped = c->named = c->sem_made = false;
}

/* A create that failed after the pool object exists: undo the region
 * (idempotent, also when nothing was mapped) and free the objects. */
static int create_fail(dp_creating *c, dp_header *h, int r) {
    region_undo(c);
    free(h);
    pool_free(c->p);
    return r;
}

/* [creation]: what an attacher may see of a region being created -- a magic that
 * says so, the format and the pool id -- so that, with the creation lock
 * free, a half-built region is told from a live creation and from an object
 * that is not a dsmpool at all. */
static int provisional(const dsmpool *p, size_t len, size_t page, dp_header *h) {
    /* its page made resident strictly first: a store into a reservation
     * (MAP_NORESERVE) whose huge page went to another since the check
     * of the free ones would be a SIGBUS; this is -ENOMEM */
    if (dp_os_caps()->populate_write && dp_os_populate_strict(p->base, page) != 0)
        return dp_fail(-ENOMEM, "the region's first page (%zu bytes) cannot be made resident: no page of its "
                       "size can be had now (free_hugepages, the hugetlb or memory cgroup)", page);
    memset(h, 0, sizeof *h);
    h->magic = DP_MAGIC_CREATING;
    h->version = DP_FORMAT_VERSION;
    h->header_size = sizeof(dp_header);
    h->lib_version = DSMPOOL_VERSION_NUMBER;
    h->region_size = len;
    h->pool_id = p->pool_id;
    return 0;
}

/* Open, size, reserve and map the backing object with pages of huge_sz
 * (0 = base pages): the backing's make (backing.c [made whole or not at
 * all]). Returns 0 or -errno with a message; undoes itself. */
static int map_backing(dp_creating *c, const dsmpool_config *cfg, size_t len, size_t align, size_t huge_sz) {
    int r = dp_os_reserve_va(len, align, &c->va);
    if (r) return dp_fail(r, "cannot reserve %zu bytes of address space", len);
    c->va_len = len;
    char before[600], why[600];
    snprintf(before, sizeof before, "%s", dsmpool_last_error()); /* (a huge-page try's reason, for the note) */
    if ((r = dp_backing(cfg->backing)->make(c, cfg, len, huge_sz)) == 0) return 0;
    snprintf(why, sizeof why, "%s", dsmpool_last_error());
    region_undo(c);
    if (strcmp(why, before) != 0) return dp_fail(r, "%s", why); /* the backing said why */
    if (r == -ENOSPC && cfg->backing == DSMPOOL_BACKING_POSIX && !huge_sz)
        return dp_fail(r, "dp_creating the POSIX region of %zu bytes failed: /dev/shm has no room for it (a "
                       "container's is often 64 MiB): make it bigger, or use ANON, MEMFD or SYSV backing, "
                       "which do not use it", len);
    return dp_fail(r, "dp_creating the %s region of %zu bytes failed: %s",
                   dsmpool_backing_name(cfg->backing), len, strerror(-r));
}

static void init_header(dsmpool *p, dp_header *h, const dsmpool_config *cfg) {
    h->version = DP_FORMAT_VERSION;
    h->header_size = sizeof(dp_header);
    h->lib_version = DSMPOOL_VERSION_NUMBER;
    h->pool_id = p->pool_id;
    h->backing = (uint32_t)cfg->backing;
    h->huge_requested = (uint32_t)cfg->huge_pages;
    h->mode = cfg->mode ? cfg->mode : 0600;
    if (cfg->name) snprintf(h->name, sizeof h->name, "%s", cfg->name);
    (void)p;
}

/* [elastic]: each sub-pool's resident granules (its share of resident_min,
 * in release units of `page`); returns the bytes reserved and populated at
 * creation: the tables but the directory of the other granules (layout.c
 * [lazy directory]), those granules, and the tail past the data. */
static size_t resident_plan(const dsmpool_config *cfg, const dp_header *h, size_t len, size_t page,
                            uint64_t *resident) {
    uint64_t unit = page > 2 * DP_MIB ? page / (2 * DP_MIB) : 1, sum = 0;
    uint64_t total = h->data_size / (2 * DP_MIB), want = (cfg->resident_min + 2 * DP_MIB - 1) / (2 * DP_MIB);
    for (uint32_t s = 0; s < h->nsub; s++) {
        uint64_t units = h->sub[s].geom.frames / DP_HUGE_FRAMES;
        /* its share of resident_min, in granules rounded up, then to release
         * units (want * units < 2^50: both are counts of 2 MiB) */
        uint64_t g = total ? (want * units + total - 1) / total : 0;
        g = (g + unit - 1) / unit * unit;
        resident[s] = g < units ? g : units;
        sum += resident[s] * 2 * DP_MIB;
    }
    uint64_t tr[DP_TABLE_RANGES][2];
    unsigned nt = dp_table_ranges(h, true, page, resident, tr);
    for (unsigned i = 0; i < nt; i++) sum += tr[i][1] - tr[i][0];
    return sum + (len - h->data_off - h->data_size);
}

/* Does one of the n sorted, disjoint ranges tr hold [off, off + len)? */
static bool tr_holds(uint64_t tr[][2], unsigned n, uint64_t off, uint64_t len) {
    unsigned lo = 0, hi = n; /* the first range that starts after off is tr[lo] */
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (tr[mid][0] <= off) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && off + len <= tr[lo - 1][1];
}

int dp_region_create(const dsmpool_config *cfg, uint64_t pool_id, dsmpool **out) {
    if (!cfg || !out) return dp_fail(-EINVAL, "cfg and out must not be NULL");
    *out = NULL;
    if (cfg->size == 0) return dp_fail(-EINVAL, "size 0");
    if (cfg->size > (1ull << 46)) return dp_fail(-EINVAL, "size %zu is beyond 64 TiB", cfg->size);
    if ((unsigned)cfg->backing > DSMPOOL_BACKING_SYSV)
        return dp_fail(-EINVAL, "unknown backing %d", (int)cfg->backing);
    if ((unsigned)cfg->huge_pages > DSMPOOL_HUGE_TRANSPARENT)
        return dp_fail(-EINVAL, "unknown huge_pages %d", (int)cfg->huge_pages);
    if (cfg->mode & ~07777u) return dp_fail(-EINVAL, "mode %o has bits beyond 07777", cfg->mode);
    if (cfg->map_align && ((cfg->map_align & (cfg->map_align - 1)) || cfg->map_align > DP_GIB))
        return dp_fail(-EINVAL, "map_align must be a power of two up to 1 GiB");
    if (cfg->max_procs > DP_PA_OWNER_MAX)
        return dp_fail(-EINVAL, "max_procs above %u", DP_PA_OWNER_MAX);
    if (cfg->max_segments > DP_SEG_MAX)
        return dp_fail(-EINVAL, "max_segments above %u", DP_SEG_MAX);
    int r = dp_rg_check_name(cfg->backing, cfg->name);
    if (r) return r;
    dsmpool_config cfgv = *cfg;
    if (!cfgv.mode) cfgv.mode = 0600;
    cfg = &cfgv;
    const dp_caps *caps = dp_os_caps();
    dp_plan pl;
    if ((r = dp_plan_nodes(cfg, &pl)) != 0) return r;
    bool want_huge = cfg->huge_pages == DSMPOOL_HUGE_ON || cfg->huge_pages == DSMPOOL_HUGE_TRY;
    size_t huge_sz = want_huge ? dp_rg_huge_size(cfg) : 0;
    if (want_huge && huge_sz != 2 * DP_MIB && huge_sz != DP_GIB)
        return dp_fail(-EINVAL, "huge_page_size must be 0, 2 MiB or 1 GiB (got %zu)", huge_sz);
    bool huge_ok = want_huge && ((huge_sz == 2 * DP_MIB && caps->huge_2m) ||
                                 (huge_sz == DP_GIB && caps->huge_1g));
    if (want_huge && !huge_ok && cfg->huge_pages == DSMPOOL_HUGE_ON)
        return dp_fail(-ENOMEM, "this kernel/CPU has no hugetlb pages of %zu kB "
                       "(/sys/kernel/mm/hugepages/hugepages-%zukB is missing)",
                       huge_sz >> 10, huge_sz >> 10);

    /* [elastic] */
    bool elastic = cfg->idle_release_ms || cfg->resident_min || cfg->warm_bytes ||
                   (caps->ram_bytes && cfg->size > caps->ram_bytes);
    if (elastic && !caps->populate_write)
        return dp_fail(-EOPNOTSUPP, "an elastic pool (resident_min, idle_release_ms or warm_bytes set, or a size "
                       "beyond the machine's %llu bytes of memory) needs MADV_POPULATE_WRITE (Linux 5.14) to make "
                       "released memory resident without risking a SIGBUS or the OOM killer; this kernel has "
                       "none: create a pool that fits in memory, with neither set",
                       (unsigned long long)caps->ram_bytes);
    uint64_t resident[DSMPOOL_MAX_NODES] = {0};

    dsmpool *p = pool_new();
    if (!p) return dp_fail(-ENOMEM, "out of memory");
    p->backing = cfg->backing;
    p->pool_id = pool_id;
    if (cfg->name) snprintf(p->name, sizeof p->name, "%s", cfg->name);

    dp_header *h = calloc(1, sizeof *h);
    if (!h) {
        pool_free(p);
        return dp_fail(-ENOMEM, "out of memory");
    }
    dp_creating c = {p, NULL, 0, false, false, false, "", "", elastic, h, resident, false};
    size_t tries[2], page = 4096, len = 0, align = 0;
    int ntries = 0;
    if (huge_ok) tries[ntries++] = huge_sz;
    if (!want_huge || cfg->huge_pages == DSMPOOL_HUGE_TRY) tries[ntries++] = 0;
    r = 0;
    for (int i = 0; i < ntries && !c.mapped; i++) {
        size_t hs = tries[i];
        page = hs ? hs : 4096;
        len = dp_align_up(cfg->size, page);
        align = cfg->map_align ? cfg->map_align : 2 * DP_MIB;
        if (align < page) align = page;
        if (align < 2 * DP_MIB) align = 2 * DP_MIB;
        if (!cfg->map_align && hs && len >= DP_GIB) align = DP_GIB; /* [creation]: shared page tables */
        dp_layout_in in;
        int lr = dp_plan_layout(cfg, &pl, len, page, &in, h);
        if (lr == -EINVAL) {
            r = dp_fail(-EINVAL, "node sizes must be multiples of the page size (%zu)", page);
            break;
        }
        if (lr != 0 && hs && cfg->huge_pages == DSMPOOL_HUGE_TRY) {
            r = dp_fail(-EINVAL, "size %zu is too small for tables in %zu kB pages", cfg->size, hs >> 10);
            continue; /* TRY: base pages, which may fit */
        }
        if (lr != 0) {
            size_t min = dp_plan_min_size(cfg, &pl, page);
            char how[300] = "";
            /* pages above 2 MiB: the data starts at a page boundary after the
             * tables, so the tables cost a whole page: say so */
            if (min) snprintf(how, sizeof how, "%s; the least that fits is %zu bytes (dsmpool_min_size)",
                              page > 2 * DP_MIB ? "; with pages this big the data starts at a page boundary after "
                                               "the tables, so they take a page of their own" : "", min);
            r = dp_fail(-EINVAL, "size %zu is too small for %u sub-pool(s) plus tables "
                        "(%llu segments, %u process slots)%s%s", cfg->size, in.nsub,
                        (unsigned long long)in.seg_cap, in.proc_cap,
                        pl.want[0] ? ", or the node sizes do not fit" : "", how);
            break;
        }
        /* [elastic]: what is had now is the tables and the resident part */
        size_t charged = elastic ? resident_plan(cfg, h, len, page, resident) : len;
        if (hs && (r = dp_plan_huge_problems(cfg, &pl, elastic ? resident : in.units, hs, charged)) != 0) {
            if (cfg->huge_pages == DSMPOOL_HUGE_ON) break;
            continue; /* TRY: base pages */
        }
        if ((r = dp_plan_cgroup_check(cfg, charged, hs, elastic)) != 0) {
            if (hs && cfg->huge_pages == DSMPOOL_HUGE_TRY) continue; /* TRY: base pages */
            break;
        }
        p->nprocs = in.proc_cap; /* System V: the semaphore set's size */
        r = map_backing(&c, cfg, len, align, hs);
        if (r && hs && (r == -ENOMEM || r == -EINVAL || r == -ENOSPC || r == -EPERM))
            r = dp_plan_huge_message(r, hs, len);
        if (r && r != -ENOMEM) break; /* only a huge-page shortage is worth a retry */
    }
    bool fallback = c.mapped && want_huge && page == 4096;
    if (!c.mapped) return create_fail(&c, h, r ? r : dp_fail(-ENOMEM, "could not create the region"));
    if (fallback) /* what stopped the huge pages, for dsmpool_create's note */
        snprintf(p->note, sizeof p->note, "DSMPOOL_HUGE_TRY: the pool is in 4 KiB pages: %s",
                 !huge_ok ? "this kernel has no hugetlb pages of that size" : dsmpool_last_error());
    p->base = c.va;
    p->size = len;
    init_header(p, h, cfg);
    h->page_size = page;
    h->huge_pages = page > 4096;
    h->huge_fallback = fallback;
    h->map_align = align;
    if (cfg->huge_pages == DSMPOOL_HUGE_TRANSPARENT)
        h->thp_advised = dp_os_madvise_hugepage(p->base, len, true) == 0;
    /* layout.c [lazy directory]: a directory page made resident with its
     * granule is 4 KiB, not a THP for 512 granules (best effort: the advice
     * is this mapping's) */
    if (h->thp_advised && elastic) (void)dp_os_madvise_hugepage(p->base + h->dir_off, h->names_off - h->dir_off, false);
    /* palloc.c [lazy tree]: so is a page of the tree's two lowest levels
     * (the pages whole inside them, as dp_table_ranges leaves them out:
     * madvise takes page-aligned addresses only) */
    for (uint32_t s = 0; h->thp_advised && elastic && s < h->nsub; s++) {
        uint64_t lo = dp_align_up(h->sub[s].geom.level_off[0], 4096), hi = h->sub[s].geom.level_off[2] / 4096 * 4096;
        if (h->sub[s].geom.nlevels > 2 && lo < hi) (void)dp_os_madvise_hugepage(p->base + lo, hi - lo, false);
    }
    if ((r = dp_plan_bind(p, h, &pl)) != 0) return create_fail(&c, h, r);
    const dp_backing_ops *bk = dp_backing(cfg->backing);
    if (bk->provisional && (r = provisional(p, len, page, (dp_header *)p->base)) != 0) /* [creation] */
        return create_fail(&c, h, r);
    if (bk->give_name && (r = bk->give_name(&c)) != 0) return create_fail(&c, h, r);
    if (cfg->prefault || elastic) { /* [elastic]: its resident part always */
        unsigned t = cfg->prefault_threads ? cfg->prefault_threads : caps->ncpus_online;
        if (t > 16 && !cfg->prefault_threads) t = 16;
        size_t done = 0;
        r = dp_plan_prefault(p, h, &pl, t, dp_data_gran(page), elastic ? resident : NULL, &done);
        if (r)
            return create_fail(&c, h, dp_fail(r == -ENOMEM || r == -EFAULT ? -ENOMEM : r,
                                              "prefaulting %zu bytes failed (%s): not enough memory "
                                              "for the region%s", len, strerror(-r),
                                              pl.bind ? " on some node" : ""));
        h->prefaulted_bytes = done;
    }
    /* The tables: fresh objects are zero, but say so rather than rely on it
     * -- all but the header, whose provisional magic must never read 0 once
     * the region has its name ([creation]), and an elastic pool's directory
     * pages that are not resident (layout.c [lazy directory]): a fresh
     * object's holes read zero */
    uint64_t tr[DP_TABLE_RANGES][2];
    unsigned nt = dp_table_ranges(h, elastic, page, elastic ? resident : NULL, tr);
    for (unsigned i = 0; i < nt; i++) {
        uint64_t lo = tr[i][0] < sizeof *h ? sizeof *h : tr[i][0], hi = tr[i][1] < h->meta_end ? tr[i][1] : h->meta_end;
        if (lo < hi) memset((char *)p->base + lo, 0, hi - lo);
    }
    h->epoch_ns = dp_os_shared_now_ns(); /* the idle stamps' base (resident.c [idle stamps]) */
    h->limits_unknown_ok = cfg->limits_unknown_ok;
    h->anon_file = c.anon_file;
    if (elastic) { /* [elastic]: the settings, and what is not resident marked so */
        h->elastic = 1;
        h->idle_release_ms = cfg->idle_release_ms;
        h->resident_min = cfg->resident_min;
        h->warm_bytes = cfg->warm_bytes;
        dp_a64 *res = (dp_a64 *)(p->base + h->res_off);
        for (uint32_t s = 0; s < h->nsub; s++) {
            uint64_t g0 = (h->sub[s].data_off - h->data_off) >> DP_RES_SHIFT;
            uint64_t units = h->sub[s].geom.frames / DP_HUGE_FRAMES;
            /* palloc.c [lazy tree]: a released granule whose tree pages
             * were left out of the tables made resident above. Only near
             * the resident granules and the levels' ends can a page of
             * them be in those tables (a page of leaves tells of page/1024
             * granules, one of level 1 of page/64): elsewhere its page of
             * leaves is left out, and looking costs 64 TiB 0.3 s */
            for (uint64_t k = resident[s]; k < units; k++) {
                bool absent = true;
                if (k < resident[s] + page / 1024 + 2 || k + page / 64 + 2 >= units) {
                    uint64_t off[2], l[2];
                    dp_pa_tree_range(&h->sub[s].geom, k, 1, page, off, l);
                    absent = (l[0] && !tr_holds(tr, nt, off[0], l[0])) || (l[1] && !tr_holds(tr, nt, off[1], l[1]));
                }
                dp_store_relaxed(&res[g0 + k], DP_RES_WORD(1, 0) | (absent ? DP_RES_NOTREE : 0));
            }
            dp_store_relaxed(&h->released_hint[s], units - resident[s]); /* (published with the header) */
        }
    }
    DP_INJECT("region.create.zeroed");
    h->magic = DP_MAGIC_CREATING; /* until dp_region_publish ([creation]) */
    memcpy(p->base, h, sizeof *h);
    p->hdr = (dp_header *)p->base;
    r = dp_rg_build_view(p, h);
    free(h);
    if (r) return create_fail(&c, NULL, r); /* cannot happen: we just computed it */
    /* on the zeroed tables: only the words that are not 0 (the lazy
     * tree's pages stay untouched, palloc.c [lazy tree]) */
    for (uint32_t s = 0; s < p->nsub; s++) dp_pa_format_fresh(&p->pa[s]);
    p->magic = DP_POOL_MAGIC;
    *out = p; /* not yet published: dp_region_publish */
    return 0;
}

void dp_region_publish(dsmpool *p) {
    /* release: pairs with dp_region_view's acquire load of the magic ([creation]) */
    dp_store_release(&p->hdr->magic, DP_MAGIC);
    dp_backing(p->backing)->published(p); /* the creation lock let go (backing.c) */
}

void dp_region_abandon(dsmpool *p) {
    dp_creating c = {p, p->base, p->size, true, true, p->backing == DSMPOOL_BACKING_SYSV, "", "", false, NULL, NULL, false};
    /* (a System V set is the pool's: it made it) */
    region_undo(&c);
    pool_free(p);
}

/* ---- attachment --------------------------------------------------------- */

static dsmpool *pool_new(void) {
    dsmpool *p = dp_obj_new(DP_OBJ_POOL, sizeof *p);
    if (!p) return NULL;
    p->fd = p->shmid = -1;
    p->live.kind = DP_LIVE_NONE;
    p->live.fd = p->live.semid = -1;
    p->anchor = p->shmdir = -1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->recover_lock, NULL);
    pthread_mutex_init(&p->lost_lock, NULL);
    pthread_mutex_init(&p->names_mutex, NULL);
    pthread_mutex_init(&p->maint_mutex, NULL);
    return p;
}

static void pool_free(dsmpool *p) {
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->recover_lock);
    pthread_mutex_destroy(&p->lost_lock);
    pthread_mutex_destroy(&p->names_mutex);
    pthread_mutex_destroy(&p->maint_mutex);
    p->magic = DP_POOL_DEAD;
    dp_obj_end(DP_OBJ_POOL, p);
}

int dp_region_attach(const char *name, dsmpool **out) {
    if (!name || !*name) return dp_fail(-EINVAL, "name must not be empty");
    if (strlen(name) > DP_NAME_MAX) return dp_fail(-EINVAL, "name too long");
    dsmpool *p = pool_new();
    if (!p) return dp_fail(-ENOMEM, "out of memory");
    snprintf(p->name, sizeof p->name, "%s", name);
    /* a POSIX name begins with '/', a System V one does not (config.c [names]) */
    p->backing = name[0] == '/' ? DSMPOOL_BACKING_POSIX : DSMPOOL_BACKING_SYSV;
    int r = dp_rg_check_name(p->backing, name);
    if (r == 0) r = dp_backing(p->backing)->open(p, name);
    if (r) {
        pool_free(p);
        return r;
    }
    *out = p;
    return 0;
}

int dp_region_attach_fd(int fd, dsmpool **out) {
    if (fd < 0) return dp_fail(-EINVAL, "bad file descriptor %d", fd);
    dsmpool *p = pool_new();
    if (!p) return dp_fail(-ENOMEM, "out of memory");
    p->backing = DSMPOOL_BACKING_MEMFD;
    int r = dp_os_dup(fd);
    if (r < 0) {
        pool_free(p);
        return dp_fail(r == -EBADF ? -EINVAL : r, "cannot use fd %d: %s", fd, strerror(-r));
    }
    p->fd = r;
    if ((r = dp_region_attach_fd_mapped(p)) != 0) {
        dp_os_close(p->fd);
        pool_free(p);
        return r;
    }
    *out = p;
    return 0;
}

int dsmpool_fd(const dsmpool *pool) {
    if (!pool || pool->magic != DP_POOL_MAGIC) return -1;
    return pool->fd;
}

/* ---- teardown ----------------------------------------------------------- */

void dp_region_free(dsmpool *p) {
    if (p->shmid >= 0) dp_os_sysv_detach(p->base);
    dp_os_unmap(p->base, p->size);
    if (p->fd >= 0) dp_os_close(p->fd);
    pool_free(p);
}

int dp_region_unlink(dsmpool *p) {
    int r = dp_backing(p->backing)->unlink(p);
    return r ? dp_fail(r, "removing the region's name failed: %s", strerror(-r)) : 0;
}
