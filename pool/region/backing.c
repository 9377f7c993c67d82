/*
 * backing.c -- one function per backing for every operation that differs
 * between them: anonymous shared memory, memfd, POSIX shm (or a hugetlbfs
 * file), System V.
 *
 * What it does
 *   The region's life (region.c) and the layers above ask a backing for
 *   what only it knows -- how its object is made and mapped, found by name,
 *   told still named, unlinked, locked while being created, and which file
 *   carries the pool's liveness locks -- through one table, dp_backing(b),
 *   as PostgreSQL's dsm_impl_op dispatches to one function per variant.
 *   Nobody else switches on the backing.
 *
 * Layer: region (pool/region), above the OS; called by region.c, and by the
 * ledger (live.c: the lock file), the lifecycle (life.c: the name, whether
 * the pool persists) and the inspector (whose lock file it can reach).
 *
 * Rules
 *   [made whole or not at all] make opens, sizes, reserves (fallocate, or the
 *      hugetlb reservation that mmap and shmget make) and maps the object at
 *      the creator's reservation; on failure it undoes what it did and says
 *      why (undo runs the backing's part of region.c's undo, in reverse). An
 *      elastic pool (region.c [elastic]) reserves only its tables and
 *      resident granules (fallocate of those ranges; MAP_NORESERVE or
 *      SHM_NORESERVE, so no hugetlb reservation and no commit charge), and
 *      every process maps it MAP_NORESERVE.
 *   [strict overcommit] Under vm.overcommit_memory = 2 the kernel charges
 *      a shared anonymous mapping to the commit limit in full, whatever
 *      MAP_NORESERVE says: an elastic ANON pool in base pages is then made
 *      of an unnamed shmem file instead (dp_os_map_anon_file), inherited
 *      over fork the same way and charged page by page as it is populated
 *      (a populate beyond the limit is an error, never the OOM killer).
 *      The header says so (anon_file); nothing else differs.
 *   [creation lock] A named object is locked by its creator from its first
 *      step until it is published (an OFD lock on DP_LOCK_CREATE of the
 *      file; for System V the creation semaphore of the pool's set, made
 *      before the segment, which is how an attacher tells a live creation
 *      from a dead one: [unborn]). A POSIX object is made as
 *      dsmpool.<id>.new in its directory and gets its name (link, which
 *      fails if the name exists: of two creators one wins) only once it
 *      holds its provisional header.
 *   [lock file] The pool's liveness and presence locks (live.c) live on a
 *      file every process of the pool reaches, whatever its mount
 *      namespace: the region's own file (POSIX, hugetlbfs, memfd), a memfd
 *      made with an anonymous region and inherited over fork, or the pool's
 *      System V semaphore set. A process locks only on a description it
 *      opened itself: the creator's open, a second open by name whose inode
 *      is the region's, or /proc/self/fd/N; a fork()ed child makes one from
 *      its inherited copy. The set of a System V pool is looked up by key
 *      and must be the one the pool has (a child in another IPC namespace
 *      would find another).
 *   [unborn] A region whose magic is not yet DP_MAGIC is being created (its
 *      creation lock is held: -EAGAIN), half-built (the lock is free and
 *      the provisional header, or for System V the pool's semaphore set,
 *      is there: -EOWNERDEAD), or not a dsmpool (-EPROTO).
 *   [named] POSIX and System V pools have a name that outlives their last
 *      process (they close, and persist); anonymous and memfd pools go with
 *      their last process.
 *
 * Memory ordering: none here; the kernel orders the locks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_region.h"
#include "dp_os.h"

/* ---- make and undo --------------------------------------------------------- */

/* [made whole or not at all], an elastic pool's file: the tables (but the
 * directory pages of released granules: layout.c [lazy directory]), each
 * sub-pool's resident granules and the tail past the data are allocated; the
 * rest stays a hole (region.c [elastic]). */
static int fd_reserve_resident(dp_creating *c, size_t len) {
    const dp_header *h = c->layout;
    uint64_t tr[DP_TABLE_RANGES][2];
    unsigned nt = dp_table_ranges(h, true, 4096, c->resident, tr); /* layout.c [lazy directory] */
    int r = 0;
    for (unsigned i = 0; r == 0 && i < nt; i++) r = dp_os_fallocate_range(c->p->fd, tr[i][0], tr[i][1] - tr[i][0]);
    for (uint32_t s = 0; r == 0 && s < h->nsub; s++)
        if (c->resident[s])
            r = dp_os_fallocate_range(c->p->fd, h->sub[s].data_off, c->resident[s] * 2 * DP_MIB);
    if (r == 0 && len > h->data_off + h->data_size)
        r = dp_os_fallocate_range(c->p->fd, h->data_off + h->data_size, len - h->data_off - h->data_size);
    return r;
}

static int fd_backed(dp_creating *c, const dsmpool_config *cfg, size_t len, size_t huge_sz) {
    dsmpool *p = c->p;
    bool thp = cfg->huge_pages == DSMPOOL_HUGE_TRANSPARENT;
    int r;
    if ((r = dp_os_truncate(p->fd, len)) != 0) return r;
    if (!thp && !huge_sz && (r = c->noreserve ? fd_reserve_resident(c, len) : dp_os_fallocate(p->fd, len)) != 0)
        return r;
    /* hugetlb reserves here, unless noreserve: then each page is had when populated */
    if ((r = dp_os_map_fd(c->va, len, p->fd, c->noreserve)) != 0) return r;
    c->mapped = true;
    return 0;
}

static int anon_make(dp_creating *c, const dsmpool_config *cfg, size_t len, size_t huge_sz) {
    (void)cfg;
    /* [strict overcommit] */
    c->anon_file = c->noreserve && !huge_sz && dp_os_overcommit_strict();
    int r = c->anon_file ? dp_os_map_anon_file(c->va, len) : dp_os_map_anon_shared(c->va, len, huge_sz, c->noreserve);
    if (r == 0) c->mapped = true;
    return r;
}

static int memfd_make(dp_creating *c, const dsmpool_config *cfg, size_t len, size_t huge_sz) {
    int r = dp_os_memfd("dsmpool", huge_sz);
    if (r < 0) return r;
    c->p->fd = r;
    return fd_backed(c, cfg, len, huge_sz);
}

static bool posix_name_taken(const char *name) {
    int fd = dp_os_shm_open(name, false, 0);
    if (fd >= 0) {
        dp_os_close(fd);
        return true;
    }
    const dp_caps *caps = dp_os_caps();
    size_t sizes[2] = {2 * DP_MIB, DP_GIB};
    for (int i = 0; i < 2; i++) {
        char dir[4096], path[4096 + 256];
        if ((i == 0 && !caps->huge_2m) || (i == 1 && !caps->huge_1g)) continue;
        if (dp_os_hugetlbfs_dir(sizes[i], dir, sizeof dir) != 0) continue;
        snprintf(path, sizeof path, "%s%s", dir, name);
        if (dp_os_path_exists(path)) return true;
    }
    return false;
}

/* [creation lock]: made under a name of its pool's (life.c [anchor]), locked,
 * and linked to its own name only once it says what it is (posix_name). */
static int posix_make(dp_creating *c, const dsmpool_config *cfg, size_t len, size_t huge_sz) {
    dsmpool *p = c->p;
    if (posix_name_taken(cfg->name)) return dp_fail(-EEXIST, "a pool named %s already exists", cfg->name);
    char dir[4096] = "/dev/shm";
    if (huge_sz && dp_os_hugetlbfs_dir(huge_sz, dir, sizeof dir) != 0)
        return dp_fail(-ENOMEM,
                       "POSIX pools in huge pages need a writable hugetlbfs mount "
                       "with pagesize=%zuM; e.g. mount -t hugetlbfs -o pagesize=%zuM "
                       "none /dev/hugepages",
                       huge_sz >> 20, huge_sz >> 20);
    const char *sep = dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/";
    int fl = snprintf(c->final, sizeof c->final, "%s%s%s", dir, sep, cfg->name + 1);
    if (fl < 0 || (size_t)fl >= sizeof p->path)
        return dp_fail(-ENAMETOOLONG, "the pool's file %s%s%s would be longer than %zu bytes: use a "
                       "shorter name or mount point", dir, sep, cfg->name + 1, sizeof p->path - 1);
    if (huge_sz) memcpy(p->path, c->final, (size_t)fl + 1);
    snprintf(c->tmp, sizeof c->tmp, "%s%sdsmpool.%016llx.new", dir, sep, (unsigned long long)p->pool_id);
    int r = dp_os_file_open(c->tmp, true, cfg->mode);
    if (r < 0) {
        c->tmp[0] = 0;
        return r;
    }
    p->fd = r;
    if ((r = dp_os_ofd_trylock(p->fd, DP_LOCK_CREATE)) != 0) return r;
    return fd_backed(c, cfg, len, huge_sz);
}

/* The object, locked and with its provisional header, gets its name (link
 * fails if the name exists: of two creators one wins), then loses its
 * temporary one. */
static int posix_name(dp_creating *c) {
    dsmpool *p = c->p;
    int r = dp_os_file_link(c->tmp, c->final);
    if (r)
        return r == -EEXIST ? dp_fail(-EEXIST, "a pool named %s already exists", p->name)
                            : dp_fail(r, "cannot name the region %s: %s", c->final, strerror(-r));
    c->named = true;
    dp_os_file_unlink(c->tmp);
    c->tmp[0] = 0;
    return 0;
}

/* [creation lock], System V: the semaphore set (the lock file, live.c) is
 * made before the segment, with its creation semaphore raised; a set left
 * by a dead creator (no segment, nobody holding any of its semaphores) is
 * removed first. */
static int sysv_sems(dp_creating *c, int32_t key, unsigned mode) {
    dsmpool *p = c->p;
    unsigned n = DP_LOCK_SLOT0 + p->nprocs;
    if ((int)n > dp_os_sem_max())
        return dp_fail(-EINVAL, "%u process slots need %u semaphores; kernel.sem allows %d per set "
                       "(lower max_procs, or use another backing)", p->nprocs, n, dp_os_sem_max());
    int r = dp_os_sem_create(key, n, mode);
    if (r == -EEXIST) {
        /* no segment has the key, and nobody holds any of the set's
         * semaphores: its pool's creator died between the set and the segment
         * (or all of a destroyed pool's processes are gone). A destroyed
         * pool whose processes still run keeps its set: their liveness */
        int old = dp_os_sem_get(key);
        if (old >= 0 && dp_os_sysv_find(key) < 0 && dp_os_sem_any_held(old) == 0)
            dp_os_sem_remove(old);
        r = dp_os_sem_create(key, n, mode);
    }
    if (r < 0)
        return r == -EEXIST ? dp_fail(-EEXIST, "a System V pool named %s (key 0x%x) already exists, is being "
                                      "created, or was destroyed while processes still use it",
                                      p->name, (unsigned)key)
                            : dp_fail(r, "cannot create the System V semaphore set of key 0x%x: %s",
                                      (unsigned)key, strerror(-r));
    p->live.semid = r;
    c->sem_made = true;
    if ((r = dp_os_sem_trylock(p->live.semid, DP_LOCK_CREATE)) != 0)
        return dp_fail(r, "cannot take the creation semaphore: %s", strerror(-r));
    return 0;
}

static int sysv_make(dp_creating *c, const dsmpool_config *cfg, size_t len, size_t huge_sz) {
    dsmpool *p = c->p;
    int32_t key;
    dp_os_sysv_key(cfg->name, &key);
    p->sysv_key = key;
    int r = sysv_sems(c, key, cfg->mode);
    if (r) return r;
    if ((r = dp_os_sysv_make(key, len, cfg->mode, huge_sz, c->noreserve)) < 0)
        return r == -EEXIST ? dp_fail(-EEXIST, "a System V segment with key 0x%x (from \"%s\") exists",
                                      (unsigned)key, cfg->name)
                            : r;
    p->shmid = r;
    c->named = true;
    if ((r = dp_os_sysv_attach(p->shmid, c->va)) != 0) return r;
    c->mapped = true;
    return 0;
}

static void fd_undo(dp_creating *c) {
    dsmpool *p = c->p;
    if (p->fd >= 0) dp_os_close(p->fd);
    p->fd = -1;
}

static void posix_undo(dp_creating *c) {
    dsmpool *p = c->p;
    fd_undo(c);
    if (c->tmp[0]) dp_os_file_unlink(c->tmp);
    if (c->named) {
        if (p->path[0]) dp_os_file_unlink(p->path);
        else dp_os_shm_unlink(p->name);
    }
    c->tmp[0] = 0;
}

static void sysv_undo(dp_creating *c) {
    dsmpool *p = c->p;
    if (c->mapped && p->shmid >= 0) dp_os_sysv_detach(c->va);
    if (p->shmid >= 0 && c->named) dp_os_sysv_remove(p->shmid);
    if (c->sem_made && p->live.semid >= 0) dp_os_sem_remove(p->live.semid);
    p->shmid = -1;
    if (c->sem_made) p->live.semid = -1;
}

static void none_undo(dp_creating *c) { (void)c; }

/* ---- by name: open, still named, unlink ------------------------------------ */

static int posix_open(dsmpool *p, const char *name) {
    int r = dp_os_shm_open(name, false, 0);
    if (r == -ENOENT) { /* huge-page pools live in hugetlbfs */
        size_t sizes[2] = {2 * DP_MIB, DP_GIB};
        for (int i = 0; i < 2 && r == -ENOENT; i++) {
            char dir[4096];
            if (dp_os_hugetlbfs_dir(sizes[i], dir, sizeof dir) != 0) continue;
            snprintf(p->path, sizeof p->path, "%s%s", dir, name);
            r = dp_os_file_open(p->path, false, 0);
            if (r < 0) p->path[0] = 0;
        }
    }
    if (r < 0)
        return r == -ENOENT ? dp_fail(-ENOENT, "no pool named %s", name)
                            : dp_fail(r, "opening %s failed: %s", name, strerror(-r));
    p->fd = r;
    if ((r = dp_region_attach_fd_mapped(p)) != 0) {
        dp_os_close(p->fd);
        p->fd = -1;
    }
    return r;
}

static int sysv_open(dsmpool *p, const char *name) {
    int32_t key;
    dp_os_sysv_key(name, &key);
    p->sysv_key = key;
    int r = dp_os_sysv_find(key);
    if (r < 0)
        return r == -ENOENT ? dp_fail(-ENOENT, "no System V pool with key 0x%x (\"%s\")", (unsigned)key, name)
                            : dp_fail(r, "shmget failed: %s", strerror(-r));
    p->shmid = r;
    size_t real;
    void *va = NULL;
    if ((r = dp_os_sysv_size(p->shmid, &real)) != 0 || real < sizeof(dp_header))
        return r ? dp_fail(r, "IPC_STAT failed") : dp_fail(-EPROTO, "segment too small");
    /* The alignment is in the header: map once anywhere to read it. */
    if ((r = dp_os_reserve_va(real, DP_GIB, &va)) == 0 && (r = dp_os_sysv_attach(p->shmid, va)) == 0) {
        p->base = va;
        p->size = real;
        r = dp_region_attach_mapped(p, real);
        if (r) dp_os_sysv_detach(va);
    }
    if (r && va) dp_os_unmap(va, real);
    if (r) {
        p->base = NULL;
        p->size = 0;
    }
    return r;
}

/* Does the name still lead to the region we mapped? (A remover may have
 * unlinked it while we attached: life.c J5.) */
static bool posix_still_named(dsmpool *p) {
    int fd = p->path[0] ? dp_os_file_open(p->path, false, 0) : dp_os_shm_open(p->name, false, 0);
    if (fd < 0) return false;
    bool same = dp_os_same_file(fd, p->fd) == 1;
    dp_os_close(fd);
    return same;
}

static bool sysv_still_named(dsmpool *p) { return dp_os_sysv_find(p->sysv_key) == p->shmid; }

static bool unnamed_still_named(dsmpool *p) {
    (void)p;
    return true;
}

static int posix_unlink(dsmpool *p) {
    int r = p->path[0] ? dp_os_file_unlink(p->path) : dp_os_shm_unlink(p->name);
    return r == -ENOENT ? 0 : r; /* someone else destroyed it first */
}

static int sysv_unlink(dsmpool *p) {
    if (p->shmid < 0) return 0;
    int r = dp_os_sysv_remove(p->shmid);
    return r == -EINVAL || r == -EIDRM ? 0 : r;
}

static int none_unlink(dsmpool *p) {
    (void)p;
    return 0;
}

/* ---- [creation lock]: held, and let go ---------------------------------------- */

/* 1 held, 0 free, <0 cannot tell; *ours: the object says it is a pool's even
 * without a header (System V: its set exists). */
static int posix_creating(dsmpool *p, bool *ours) {
    (void)ours;
    return p->fd >= 0 ? dp_os_ofd_test(p->fd, DP_LOCK_CREATE) : 0;
}

static int sysv_creating(dsmpool *p, bool *ours) {
    int sem = dp_os_sem_get(p->sysv_key);
    if (sem < 0) return 0;
    *ours = true;
    return dp_os_sem_test(sem, DP_LOCK_CREATE);
}

static int none_creating(dsmpool *p, bool *ours) {
    (void)p;
    (void)ours;
    return 0;
}

static void posix_published(dsmpool *p) {
    if (p->fd >= 0) dp_os_ofd_unlock(p->fd, DP_LOCK_CREATE);
}

static void sysv_published(dsmpool *p) {
    if (p->live.semid >= 0) dp_os_sem_unlock(p->live.semid, DP_LOCK_CREATE);
}

static void none_published(dsmpool *p) { (void)p; }

/* ---- [lock file] ---------------------------------------------------------------- */

/* A description of the region's file that is ours alone: by name first (no
 * /proc needed; the inode must be the region's), else through /proc/self/fd. */
static int posix_lock(dsmpool *p, int how, int inherited, dp_live *out) {
    int fd = how == DP_LOCKFILE_CHILD ? inherited : p->fd;
    int r = p->path[0] ? dp_os_file_open(p->path, false, 0) : dp_os_shm_open(p->name, false, 0);
    if (r >= 0 && dp_os_same_file(r, fd) != 1) { /* the name now names another object */
        dp_os_close(r);
        r = -ESTALE;
    }
    if (r < 0) r = dp_os_reopen(fd);
    if (r < 0) return r;
    *out = (dp_live){DP_LIVE_OFD, r, -1};
    return 0;
}

static int memfd_lock(dsmpool *p, int how, int inherited, dp_live *out) {
    int r = dp_os_reopen(how == DP_LOCKFILE_CHILD ? inherited : p->fd);
    if (r < 0) return r;
    *out = (dp_live){DP_LIVE_OFD, r, -1};
    return 0;
}

/* An anonymous region has no file: a memfd made with it carries the locks,
 * and is inherited with the mapping. */
static int anon_lock(dsmpool *p, int how, int inherited, dp_live *out) {
    (void)p;
    int r = how == DP_LOCKFILE_CREATED ? dp_os_memfd("dsmpool-live", 0)
            : how == DP_LOCKFILE_CHILD ? dp_os_reopen(inherited)
                                       : -EINVAL; /* (nobody attaches an anonymous pool) */
    if (r < 0) return r;
    *out = (dp_live){DP_LIVE_OFD, r, -1};
    return 0;
}

static int sysv_lock(dsmpool *p, int how, int inherited, dp_live *out) {
    (void)inherited;
    if (how == DP_LOCKFILE_CREATED) { /* the set was made before the segment (sysv_sems) */
        if (p->live.semid < 0) return -EPROTO;
        *out = (dp_live){DP_LIVE_SEM, -1, p->live.semid};
        return 0;
    }
    int r = dp_os_sem_get(p->sysv_key);
    if (r < 0) return r == -ENOENT ? -EPROTO : r;
    if (how == DP_LOCKFILE_CHILD && r != p->live.semid) return -EXDEV; /* another IPC namespace */
    *out = (dp_live){DP_LIVE_SEM, -1, r};
    return 0;
}

/* ---- attaching: map, validate, and why a region is not ready --------------------- */

/* [unborn]: a region whose magic is not yet DP_MAGIC: being created (the
 * creation lock is held), half-built (its creator died), or not a dsmpool.
 * A POSIX region gets its name only with its provisional header; a System V
 * segment may have none yet, but then its pool's semaphore set exists. */
static int unborn(dsmpool *p, uint64_t magic) {
    bool ours = magic == DP_MAGIC_CREATING;
    int held = dp_backing(p->backing)->creating(p, &ours);
    if (held == 1) return dp_fail(-EAGAIN, "pool %s is being created; retry in a moment", p->name);
    if (ours)
        return dp_fail(-EOWNERDEAD, "pool %s was left half-built by a creator that died: remove it "
                       "(dsmpool_remove(), or dsmpool-inspect --destroy %s), or create it again with "
                       "replace_stale", p->name, p->name);
    return dp_fail(-EPROTO, "%s is not a dsmpool region: its header is empty and nobody is creating it",
                   p->name[0] ? p->name : "the object");
}

/* layout.c [layout] for a mapped region (base and size set): validate a copy of its
 * header and build the view from it. Attach then marks p attached;
 * inspect.c (a read-only mapping) leaves p->magic alone, so no public call
 * takes its p for an attached pool. */
int dp_region_view(dsmpool *p, size_t real) {
    dp_header *c = malloc(sizeof *c);
    if (!c) return dp_fail(-ENOMEM, "out of memory");
    /* acquire: pairs with dp_region_publish's release store of the magic */
    uint64_t magic = dp_load_acquire(&((dp_header *)p->base)->magic);
    memcpy(c, p->base, sizeof *c);
    c->magic = magic;
    int r = dp_rg_validate_header(p, c, real);
    if (r == -ENODATA) r = unborn(p, magic);
    if (r == 0) r = dp_rg_build_view(p, c);
    free(c);
    if (r == 0) p->hdr = (dp_header *)p->base;
    return r;
}

int dp_region_attach_mapped(dsmpool *p, size_t real) {
    int r = dp_region_view(p, real); /* layout.c [layout] */
    if (r) return r;
    /* a hugetlb file has no shared policy: bind this mapping's sub-pools
     * as the creator did (place.c [bound in every mapping]; a bind refused
     * here does not refuse the attach) */
    if (p->geo.huge_pages) (void)dp_region_bind(p, &p->geo);
    p->magic = DP_POOL_MAGIC;
    return 0;
}

/* Read the header from an fd-backed object, map it aligned, attach. */
int dp_region_attach_fd_mapped(dsmpool *p) {
    size_t real;
    int r = dp_os_fd_size(p->fd, &real);
    if (r) return dp_fail(r, "fstat failed: %s", strerror(-r));
    if (real < sizeof(dp_header) || real % 4096) /* (a POSIX region is named at its full size) */
        return dp_fail(-EPROTO, "object of %zu bytes cannot be a dsmpool region", real);
    dp_header hc;
    /* (read, or a mapping of the first huge page on hugetlbfs, which has no read) */
    if ((r = dp_os_file_peek(p->fd, &hc, sizeof hc)) != 0)
        return dp_fail(-EPROTO, "cannot read the header: %s", strerror(-r));
    /* Checked on a copy to learn the alignment, and again once mapped. */
    if ((r = dp_rg_validate_header(p, &hc, real)) == -ENODATA) r = unborn(p, hc.magic);
    if (r) return r;
    size_t align = hc.map_align;
    void *va;
    if ((r = dp_os_reserve_va(real, align, &va)) != 0) return dp_fail(r, "cannot reserve address space");
    /* an elastic pool's hugetlb pages are not all there: no reservation (region.c [elastic]) */
    if ((r = dp_os_map_fd(va, real, p->fd, hc.elastic != 0)) != 0) {
        dp_os_unmap(va, real);
        return dp_fail(r, "mmap of the region failed: %s", strerror(-r));
    }
    p->base = va;
    p->size = real;
    if ((r = dp_region_attach_mapped(p, real)) != 0) {
        dp_os_unmap(va, real);
        p->base = NULL;
    }
    return r;
}


/* ---- the table ---------------------------------------------------------------- */

static const dp_backing_ops backings[] = {
    [DSMPOOL_BACKING_ANON] = {"anon", false, false, false, anon_make, NULL, none_undo, NULL,
                              unnamed_still_named, none_unlink, none_creating, none_published, anon_lock},
    [DSMPOOL_BACKING_MEMFD] = {"memfd", false, true, true, memfd_make, NULL, fd_undo, NULL,
                               unnamed_still_named, none_unlink, none_creating, none_published, memfd_lock},
    [DSMPOOL_BACKING_POSIX] = {"posix", true, true, true, posix_make, posix_name, posix_undo, posix_open,
                               posix_still_named, posix_unlink, posix_creating, posix_published, posix_lock},
    [DSMPOOL_BACKING_SYSV] = {"sysv", true, true, true, sysv_make, NULL, sysv_undo, sysv_open,
                              sysv_still_named, sysv_unlink, sysv_creating, sysv_published, sysv_lock},
};

const dp_backing_ops *dp_backing(dsmpool_backing b) {
    return (unsigned)b < sizeof backings / sizeof *backings ? &backings[b] : &backings[DSMPOOL_BACKING_ANON];
}
