/*
 * region.c -- the shared region: layout, creation, attachment, teardown.
 *
 * Rules
 *   1. The layout is a pure function of (region size, segment capacity,
 *      process slots, sub-pools, hint lines, nodes): dp_layout. The creator
 *      computes it and stores its inputs and outputs in the header; an
 *      attacher recomputes it from the stored inputs and requires every
 *      output to match, and the region size to equal the real size of the
 *      object (fstat / IPC_STAT). Only then is any offset used, and only
 *      from a process-local copy of the header (the shared one could be
 *      scribbled on later; the copy cannot). A region of another format is
 *      refused (-EPROTO) naming the library version that made it (the
 *      header's first 24 bytes never move: dp_internal.h).
 *   2. Creation: open the backing object, size it, reserve its memory
 *      (fallocate, or the hugetlb reservation at mmap/shmget) so exhaustion
 *      is an error now and never a SIGBUS later, map it at an address aligned
 *      to map_align (>= 2 MiB, so THP and huge pages line up with the
 *      allocator's 2 MiB nodes), advise THP, populate in parallel, write the
 *      tables, and store the magic last (release), so an attacher that reads
 *      the magic (acquire) sees a complete header. The creator of a named
 *      region holds its creation lock from the start (an OFD lock on byte
 *      DP_LOCK_CREATE of the file; for System V the creation semaphore of
 *      the pool's set, which is made before the segment) until the magic.
 *      A POSIX region is made under a name of its pool (dsmpool.<id>.new,
 *      life.c rule 1) and linked to its own name only once it is sized and
 *      holds a provisional header (DP_MAGIC_CREATING, format, pool id); a
 *      System V segment gets that header once mapped (before that, its
 *      pool's semaphore set, made first, says it is one). So an
 *      attacher that finds no magic knows which case it is in: the lock is
 *      held (being created: -EAGAIN); it is free and the provisional header
 *      (or, System V, the pool's semaphore set) is there (a creator died:
 *      -EOWNERDEAD, never a retry that never ends); or neither (-EPROTO:
 *      not a dsmpool). The kernel drops the lock of a creator that dies.
 *      Before it reserves or populates anything, creation compares the
 *      pool's size with what the process's memory (or hugetlb) cgroup still
 *      lets it charge: a pool that does not fit fails with -ENOMEM naming
 *      the limit, instead of getting the creator OOM-killed.
 *      (Injection point for tests: "region.create.zeroed", the named
 *      region's tables cleared, its provisional header still there.)
 *   3. Huge pages: ON fails with -ENOMEM and a message saying how many pages
 *      to reserve; TRY retries with base pages and records the fallback.
 *   4. Every OS call is in os_linux.c behind dp_os.h; on failure everything
 *      done so far is undone in reverse order (region_undo).
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

#define MIB (1ull << 20)
#define GIB (1ull << 30)

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }
static dsmpool *pool_new(void);
static void pool_free(dsmpool *p);

/* The data's granule: 2 MiB, or the huge page when larger (sub-pools and
 * prefault slices are whole granules). */
static size_t data_gran(size_t page) { return page > 2 * MIB ? page : 2 * MIB; }

/* ---- layout ------------------------------------------------------------- */

int dp_layout(const dp_layout_in *in, dp_header *h) {
    if (!in->region_size || in->region_size % DP_FRAME_SIZE || !in->seg_cap ||
        in->seg_cap > DP_SEG_MAX || !in->proc_cap || in->proc_cap > DP_PA_OWNER_MAX ||
        !in->nsub || in->nsub > DSMPOOL_MAX_NODES || !in->nhints || in->nhints > 4096 ||
        in->data_align < 2 * MIB || in->data_align > GIB || (in->data_align & (in->data_align - 1)))
        return -EINVAL;
    uint64_t off = align_up(sizeof(dp_header), 64);
    h->region_size = in->region_size;
    h->proc_off = off;
    h->proc_cap = in->proc_cap;
    off = align_up(off + (uint64_t)in->proc_cap * sizeof(dp_proc), 64);
    h->seg_off = off;
    h->seg_cap = in->seg_cap;
    off = align_up(off + in->seg_cap * sizeof(dp_seg_desc), 64);
    h->dir_off = off;
    h->dir_count = in->region_size >> DP_DIR_SHIFT; /* >= the data's 4 KiB granules */
    off = align_up(off + h->dir_count * sizeof(uint64_t), 64);
    h->names_off = off;
    h->names_cap = DSMPOOL_NAMES_MAX;
    off = align_up(off + h->names_cap * sizeof(dp_name), 64);
    h->nsub = in->nsub;
    h->nhints = in->nhints;
    uint64_t hf = DP_HUGE_FRAMES * (uint64_t)DP_FRAME_SIZE, data = 0;
    for (uint32_t s = 0; s < in->nsub; s++) {
        if (!in->units[s] || in->units[s] > DP_PA_MAX_FRAMES / DP_HUGE_FRAMES) return -EINVAL;
        h->sub[s].node = in->nodes[s];
        h->sub[s].pad = 0;
        if (dp_pa_layout(in->units[s] * DP_HUGE_FRAMES, in->nhints, &off, &h->sub[s].geom) != 0)
            return -EINVAL;
        data += in->units[s] * hf;
    }
    h->meta_end = off;
    h->data_off = align_up(off, in->data_align);
    if (h->data_off > in->region_size || data > in->region_size - h->data_off) return -ENOSPC;
    h->data_size = data;
    uint64_t d = h->data_off;
    for (uint32_t s = 0; s < in->nsub; s++) {
        h->sub[s].data_off = d;
        d += h->sub[s].geom.frames * DP_FRAME_SIZE;
    }
    for (uint32_t s = in->nsub; s < DSMPOOL_MAX_NODES; s++) memset(&h->sub[s], 0, sizeof h->sub[s]);
    return 0;
}

/* Rule 2: a region whose magic is not yet DP_MAGIC: being created (the
 * creation lock is held), half-built (its creator died), or not a dsmpool.
 * A POSIX region gets its name only with its provisional header; a System V
 * segment may have none yet, but then its pool's semaphore set exists. */
static int unborn(dsmpool *p, uint64_t magic) {
    int held = 0;
    bool ours = magic == DP_MAGIC_CREATING;
    if (p->backing == DSMPOOL_BACKING_POSIX && p->fd >= 0) {
        held = dp_os_ofd_test(p->fd, DP_LOCK_CREATE);
    } else if (p->backing == DSMPOOL_BACKING_SYSV) {
        int sem = dp_os_sem_get(p->sysv_key);
        held = sem >= 0 ? dp_os_sem_test(sem, DP_LOCK_CREATE) : 0;
        ours |= sem >= 0;
    }
    if (held == 1) return dp_fail(-EAGAIN, "pool %s is being created; retry in a moment", p->name);
    if (ours)
        return dp_fail(-EOWNERDEAD, "pool %s was left half-built by a creator that died: remove it "
                       "(dsmpool_remove(), or dsmpool-inspect --destroy %s), or create it again with "
                       "replace_stale", p->name, p->name);
    return dp_fail(-EPROTO, "%s is not a dsmpool region: its header is empty and nobody is creating it",
                   p->name[0] ? p->name : "the object");
}

/* Rule 1: everything an attacher must check before using any offset. */
static int validate_header(dsmpool *p, const dp_header *c, size_t real_size) {
    if (c->magic == 0 || c->magic == DP_MAGIC_CREATING) return unborn(p, c->magic);
    if (c->magic != DP_MAGIC)
        return dp_fail(-EPROTO, "not a dsmpool region (magic %016llx)",
                       (unsigned long long)c->magic);
    if (c->version != DP_FORMAT_VERSION || c->header_size != sizeof(dp_header)) {
        char by[48] = "a dsmpool library before 0.1.0";
        if (c->version >= 3) /* (the library's version is in every format from 3 on) */
            snprintf(by, sizeof by, "dsmpool %u.%u.%u", c->lib_version / 10000, c->lib_version / 100 % 100,
                     c->lib_version % 100);
        return dp_fail(-EPROTO, "this pool was made by %s in region format %u (header %u bytes); "
                       "this library, dsmpool %s, reads format %u: attach with the library that made "
                       "it, or detach every process of the pool and create it again",
                       by, c->version, c->header_size, DSMPOOL_VERSION_STRING, DP_FORMAT_VERSION);
    }
    if (c->region_size != real_size)
        return dp_fail(-EPROTO, "header says %llu bytes but the object has %zu (truncated?)",
                       (unsigned long long)c->region_size, real_size);
    if (c->map_align < 2 * MIB || c->map_align > GIB || (c->map_align & (c->map_align - 1)) ||
        (c->page_size != 4096 && c->page_size != 2 * MIB && c->page_size != GIB) ||
        c->backing > DSMPOOL_BACKING_SYSV || c->huge_requested > DSMPOOL_HUGE_TRANSPARENT)
        return dp_fail(-EPROTO, "corrupt header: bad alignment, page size or backing");
    if (c->nsub < 1 || c->nsub > DSMPOOL_MAX_NODES)
        return dp_fail(-EPROTO, "corrupt header: %u sub-pools", c->nsub);
    dp_layout_in in = {c->region_size, c->seg_cap, (uint32_t)c->proc_cap, c->nsub, c->nhints,
                       data_gran(c->page_size), {0}, {0}};
    if (c->proc_cap > DP_PA_OWNER_MAX) return dp_fail(-EPROTO, "corrupt header: process slots");
    for (uint32_t s = 0; s < c->nsub; s++) {
        in.nodes[s] = c->sub[s].node;
        in.units[s] = c->sub[s].geom.frames / DP_HUGE_FRAMES;
    }
    dp_header *want = calloc(1, sizeof *want);
    if (!want) return dp_fail(-ENOMEM, "out of memory validating the header");
    int r = dp_layout(&in, want);
    bool same = r == 0 && want->proc_off == c->proc_off && want->seg_off == c->seg_off &&
                want->dir_off == c->dir_off && want->dir_count == c->dir_count &&
                want->names_off == c->names_off && want->names_cap == c->names_cap &&
                want->meta_end == c->meta_end && want->data_off == c->data_off &&
                want->data_size == c->data_size &&
                memcmp(want->sub, c->sub, sizeof want->sub) == 0;
    free(want);
    if (!same)
        return dp_fail(-EPROTO, "corrupt header: the layout does not match its sizes");
    return 0;
}

/* Per sub-pool, the node sub-pools nearest first (by the machine's SLIT
 * distances; ties by index), and the map from node id to sub-pool. */
static void placement_init(dsmpool *p) {
    const dp_topo *t = dp_numa_topo();
    p->il_sub = -1;
    memset(p->node_sub, -1, sizeof p->node_sub);
    uint32_t nn = 0, idx[DSMPOOL_MAX_NODES];
    for (uint32_t s = 0; s < p->nsub; s++) {
        uint32_t node = p->geo.sub[s].node;
        if (node == DP_NODE_INTERLEAVE) {
            p->il_sub = (int)s;
            continue;
        }
        if (node < 256) p->node_sub[node] = (int8_t)s;
        idx[nn++] = s;
    }
    for (uint32_t s = 0; s < p->nsub; s++) {
        int from = dp_numa_index(p->geo.sub[s].node);
        uint32_t ord[DSMPOOL_MAX_NODES];
        memcpy(ord, idx, sizeof(uint32_t) * nn);
        for (uint32_t i = 1; i < nn; i++) /* insertion sort by distance from s's node */
            for (uint32_t j = i; j > 0; j--) {
                int a = dp_numa_index(p->geo.sub[ord[j - 1]].node), b = dp_numa_index(p->geo.sub[ord[j]].node);
                int da = from >= 0 && a >= 0 ? t->dist[from][a] : (ord[j - 1] == s ? 0 : 100);
                int db = from >= 0 && b >= 0 ? t->dist[from][b] : (ord[j] == s ? 0 : 100);
                if (ord[j - 1] == s) da = -1; /* yourself first */
                if (ord[j] == s) db = -1;
                if (db >= da) break;
                uint32_t x = ord[j];
                ord[j] = ord[j - 1];
                ord[j - 1] = x;
            }
        for (uint32_t k = 0; k < DSMPOOL_MAX_NODES; k++) p->order[s][k] = k < nn ? (uint8_t)ord[k] : 0xff;
    }
    p->one_sub = p->nsub == 1 && p->il_sub < 0;
}

/* Build the process-local view from a validated copy of the header. */
static int build_view(dsmpool *p, const dp_header *c) {
    p->procs = (dp_proc *)(p->base + c->proc_off);
    p->nprocs = (uint32_t)c->proc_cap;
    p->segs = (dp_seg_desc *)(p->base + c->seg_off);
    p->nsegs = c->seg_cap;
    p->nsub = c->nsub;
    p->dir = (dp_a64 *)(p->base + c->dir_off);
    p->names = (dp_name *)(p->base + c->names_off);
    memcpy(&p->geo, c, sizeof p->geo);
    p->geo.magic = DP_MAGIC;
    for (uint32_t s = 0; s < c->nsub; s++)
        if (dp_pa_view(&p->pa[s], p->base, c->region_size, &c->sub[s].geom) != 0)
            return dp_fail(-EPROTO, "corrupt header: allocator tree of sub-pool %u", s);
    placement_init(p);
    return 0;
}

/* ---- configuration ------------------------------------------------------ */

/* The config's fields in order, by where each ends: a caller's struct_size
 * is honoured up to the last whole field it covers, never half a pointer. */
#define CFG_END(f) (offsetof(dsmpool_config, f) + sizeof(((dsmpool_config *)0)->f))
static const size_t cfg_ends[] = {
    CFG_END(struct_size), CFG_END(size), CFG_END(backing), CFG_END(name), CFG_END(huge_pages),
    CFG_END(huge_page_size), CFG_END(prefault), CFG_END(mode), CFG_END(prefault_threads),
    CFG_END(max_segments), CFG_END(max_procs), CFG_END(map_align), CFG_END(numa), CFG_END(nnodes),
    CFG_END(nodes), CFG_END(node_size), CFG_END(interleave_size), CFG_END(replace_stale),
};
_Static_assert(sizeof cfg_ends / sizeof *cfg_ends == 18, "a new config field needs its row here");

static size_t cfg_whole(size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < sizeof cfg_ends / sizeof *cfg_ends; i++)
        if (cfg_ends[i] <= n) w = cfg_ends[i];
    return w;
}

void dsmpool_config_init_sized(dsmpool_config *cfg, size_t struct_size) {
    if (!cfg || struct_size < sizeof(size_t)) return;
    dsmpool_config d;
    memset(&d, 0, sizeof d);
    d.struct_size = struct_size; /* the caller's: create reads no more than that */
    d.size = 256 * MIB;
    d.backing = DSMPOOL_BACKING_ANON;
    d.huge_pages = DSMPOOL_HUGE_OFF;
    d.prefault = true;
    d.mode = 0600;
    memset(cfg, 0, struct_size);    /* a newer caller's fields past ours: zero */
    memcpy(cfg, &d, cfg_whole(struct_size < sizeof d ? struct_size : sizeof d)); /* an older caller's */
    cfg->struct_size = struct_size;
}

int dp_config_take(const dsmpool_config *cfg, dsmpool_config *full) {
    dsmpool_config_init_sized(full, sizeof *full);
    if (!cfg) return dp_fail(-EINVAL, "cfg must not be NULL");
    if (cfg->struct_size < offsetof(dsmpool_config, size) + sizeof cfg->size)
        return dp_fail(-EINVAL, "cfg->struct_size is %zu: call dsmpool_config_init() on the config first",
                       cfg->struct_size);
    if (cfg->struct_size > (1u << 16))
        return dp_fail(-EINVAL, "cfg->struct_size is %zu: call dsmpool_config_init() on the config first",
                       cfg->struct_size);
    /* a newer header's config: fine while the options this library does not
     * know are left as dsmpool_config_init() made them (zero) */
    for (size_t i = sizeof *full; i < cfg->struct_size; i++)
        if (((const unsigned char *)cfg)[i])
            return dp_fail(-EINVAL, "the config sets options of a newer dsmpool header (%zu bytes; byte %zu "
                           "is set) than this library, dsmpool %s, knows (%zu bytes): use a library at "
                           "least as new as the header", cfg->struct_size, i, DSMPOOL_VERSION_STRING,
                           sizeof *full);
    memcpy(full, cfg, cfg_whole(cfg->struct_size < sizeof *full ? cfg->struct_size : sizeof *full));
    full->struct_size = sizeof *full;
    return 0;
}

static int check_name(dsmpool_backing b, const char *name) {
    if (b == DSMPOOL_BACKING_ANON || b == DSMPOOL_BACKING_MEMFD) {
        if (name) return dp_fail(-EINVAL, "name must be NULL for %s backing", dsmpool_backing_name(b));
        return 0;
    }
    if (!name || !*name) return dp_fail(-EINVAL, "%s backing needs a name", dsmpool_backing_name(b));
    size_t n = strlen(name);
    if (n > DP_NAME_MAX) return dp_fail(-EINVAL, "name longer than %d bytes", DP_NAME_MAX);
    if (b == DSMPOOL_BACKING_POSIX && (name[0] != '/' || n < 2 || strchr(name + 1, '/') ||
                                       !strcmp(name, "/.") || !strcmp(name, "/..")))
        return dp_fail(-EINVAL, "POSIX name must be \"/something\" with no other '/': \"%s\"", name);
    if (b == DSMPOOL_BACKING_SYSV && name[0] == '/')
        return dp_fail(-EINVAL, "a System V name must not begin with '/' (attach takes such a name for a "
                       "POSIX one): \"%s\"", name);
    if (b == DSMPOOL_BACKING_POSIX && !strncmp(name, "/dsmpool.", 9))
        return dp_fail(-EINVAL, "names beginning \"/dsmpool.\" are the library's own (anchors and OS "
                       "segments): choose another name than \"%s\"", name);
    return 0;
}

static size_t huge_size_for(const dsmpool_config *cfg) {
    return cfg->huge_page_size ? cfg->huge_page_size : dp_os_caps()->huge_default;
}

/* ---- creation ----------------------------------------------------------- */

typedef struct creating {
    dsmpool *p;
    void *va;       /* reservation / mapping */
    size_t va_len;
    bool mapped;
    bool named;     /* a name exists that undo must remove */
    bool sem_made;  /* we made the System V semaphore set */
    char tmp[4200]; /* POSIX: the object's path until it is linked to its name, or "" */
    char final[4200]; /* POSIX: the path of its name */
} creating;

static void region_undo(creating *c) {
    dsmpool *p = c->p;
    if (c->mapped && p->shmid >= 0) dp_os_sysv_detach(c->va);
    if (c->va) dp_os_unmap(c->va, c->va_len);
    if (p->shmid >= 0 && c->named) dp_os_sysv_remove(p->shmid);
    if (c->sem_made && p->live.semid >= 0) dp_os_sem_remove(p->live.semid);
    if (p->fd >= 0) dp_os_close(p->fd);
    if (c->tmp[0]) dp_os_file_unlink(c->tmp);
    if (c->named && p->backing == DSMPOOL_BACKING_POSIX) {
        if (p->path[0]) dp_os_file_unlink(p->path);
        else dp_os_shm_unlink(p->name);
    }
    c->tmp[0] = 0;
    p->fd = p->shmid = -1;
    if (c->sem_made) p->live.semid = -1;
    c->va = NULL;
    c->mapped = c->named = c->sem_made = false;
}

/* A create that failed after the pool object exists: undo the region
 * (idempotent, also when nothing was mapped) and free the objects. */
static int create_fail(creating *c, dp_header *h, int r) {
    region_undo(c);
    free(h);
    pool_free(c->p);
    return r;
}

static bool posix_name_taken(const char *name) {
    int fd = dp_os_shm_open(name, false, 0);
    if (fd >= 0) {
        dp_os_close(fd);
        return true;
    }
    const dp_caps *caps = dp_os_caps();
    size_t sizes[2] = {2 * MIB, GIB};
    for (int i = 0; i < 2; i++) {
        char dir[4096], path[4096 + 256];
        if ((i == 0 && !caps->huge_2m) || (i == 1 && !caps->huge_1g)) continue;
        if (dp_os_hugetlbfs_dir(sizes[i], dir, sizeof dir) != 0) continue;
        snprintf(path, sizeof path, "%s%s", dir, name);
        if (dp_os_path_exists(path)) return true;
    }
    return false;
}

/* Rule 2: what an attacher may see of a region being created -- a magic that
 * says so, the format and the pool id -- so that, with the creation lock
 * free, a half-built region is told from a live creation and from an object
 * that is not a dsmpool at all. */
static void provisional(const dsmpool *p, size_t len, dp_header *h) {
    memset(h, 0, sizeof *h);
    h->magic = DP_MAGIC_CREATING;
    h->version = DP_FORMAT_VERSION;
    h->header_size = sizeof(dp_header);
    h->lib_version = DSMPOOL_VERSION_NUMBER;
    h->region_size = len;
    h->pool_id = p->pool_id;
}

/* Rule 2, POSIX: the object, locked and with its provisional header, gets
 * its name (link fails if the name exists: of two creators one wins), then
 * loses its temporary one. */
static int name_region(creating *c) {
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

/* System V: the semaphore set (the liveness oracle, live.c) is made before
 * the segment, with its creation semaphore raised; a set left by a dead
 * creator (no segment, creation semaphore free) is removed first. */
static int sysv_sems(creating *c, int32_t key, unsigned mode) {
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
        if (old >= 0 && dp_os_sysv_get(key, 0, false, 0, 0) < 0 && dp_os_sem_any_held(old) == 0)
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

/* Open, size, reserve and map the backing object with pages of huge_sz
 * (0 = base pages). Returns 0 or -errno with a message; undoes itself. */
static int map_backing(creating *c, const dsmpool_config *cfg, size_t len, size_t align,
                       size_t huge_sz) {
    dsmpool *p = c->p;
    bool thp = cfg->huge_pages == DSMPOOL_HUGE_TRANSPARENT;
    int r = dp_os_reserve_va(len, align, &c->va);
    if (r) return dp_fail(r, "cannot reserve %zu bytes of address space", len);
    c->va_len = len;
    switch (cfg->backing) {
    case DSMPOOL_BACKING_ANON:
        r = dp_os_map_anon_shared(c->va, len, huge_sz);
        if (r) goto fail_os;
        c->mapped = true;
        return 0;
    case DSMPOOL_BACKING_MEMFD:
        r = dp_os_memfd("dsmpool", huge_sz);
        if (r < 0) goto fail_os;
        p->fd = r;
        break;
    case DSMPOOL_BACKING_POSIX: {
        if (posix_name_taken(cfg->name)) {
            region_undo(c);
            return dp_fail(-EEXIST, "a pool named %s already exists", cfg->name);
        }
        char dir[4096] = "/dev/shm";
        if (huge_sz && dp_os_hugetlbfs_dir(huge_sz, dir, sizeof dir) != 0) {
            region_undo(c);
            return dp_fail(-ENOMEM,
                           "POSIX pools in huge pages need a writable hugetlbfs mount "
                           "with pagesize=%zuM; e.g. mount -t hugetlbfs -o pagesize=%zuM "
                           "none /dev/hugepages",
                           huge_sz >> 20, huge_sz >> 20);
        }
        /* rule 2: made under a name of its own (life.c rule 1: the pool's
         * id), locked, and linked to its name only once it says what it is */
        const char *sep = dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/";
        int fl = snprintf(c->final, sizeof c->final, "%s%s%s", dir, sep, cfg->name + 1);
        if (fl < 0 || (size_t)fl >= sizeof p->path)
            return dp_fail(-ENAMETOOLONG, "the pool's file %s%s%s would be longer than %zu bytes: use a "
                           "shorter name or mount point", dir, sep, cfg->name + 1, sizeof p->path - 1);
        if (huge_sz) memcpy(p->path, c->final, (size_t)fl + 1);
        snprintf(c->tmp, sizeof c->tmp, "%s%sdsmpool.%016llx.new", dir, sep, (unsigned long long)p->pool_id);
        r = dp_os_file_open(c->tmp, true, cfg->mode);
        if (r < 0) {
            c->tmp[0] = 0;
            goto fail_os;
        }
        p->fd = r;
        if ((r = dp_os_ofd_trylock(p->fd, DP_LOCK_CREATE)) != 0) goto fail_os;
        break;
    }
    case DSMPOOL_BACKING_SYSV: {
        int32_t key;
        dp_os_sysv_key(cfg->name, &key);
        p->sysv_key = key;
        if ((r = sysv_sems(c, key, cfg->mode)) != 0) {
            region_undo(c);
            return r;
        }
        r = dp_os_sysv_get(key, len, true, cfg->mode, huge_sz);
        if (r < 0) {
            if (r == -EEXIST) {
                region_undo(c);
                return dp_fail(-EEXIST, "a System V segment with key 0x%x (from \"%s\") exists",
                               (unsigned)key, cfg->name);
            }
            goto fail_os;
        }
        p->shmid = r;
        c->named = true;
        r = dp_os_sysv_attach(p->shmid, c->va);
        if (r) goto fail_os;
        c->mapped = true;
        return 0;
    }
    }
    /* fd-based: memfd, /dev/shm, hugetlbfs */
    if ((r = dp_os_truncate(p->fd, len)) != 0) goto fail_os;
    if (!thp && !huge_sz && (r = dp_os_fallocate(p->fd, len)) != 0) goto fail_os;
    if ((r = dp_os_map_fd(c->va, len, p->fd)) != 0) goto fail_os; /* hugetlb reserves here */
    c->mapped = true;
    return 0;
fail_os:
    region_undo(c);
    if (r == -ENOSPC && cfg->backing == DSMPOOL_BACKING_POSIX && !huge_sz)
        return dp_fail(r, "creating the POSIX region of %zu bytes failed: /dev/shm has no room for it (a "
                       "container's is often 64 MiB): make it bigger, or use ANON, MEMFD or SYSV backing, "
                       "which do not use it", len);
    return dp_fail(r, "creating the %s region of %zu bytes failed: %s",
                   dsmpool_backing_name(cfg->backing), len, strerror(-r));
}

/* A pool the cgroup cannot hold would be OOM-killed while it is prefaulted
 * (or while a memfd or /dev/shm object is reserved): say so before. */
static int cgroup_check(const dsmpool_config *cfg, size_t len, size_t huge_sz) {
    uint64_t room, limit;
    char where[1200];
    if (huge_sz) {
        dp_os_cgroup_huge_room(huge_sz, &room, &limit, where, sizeof where);
        if (room < len)
            return dp_fail(-ENOMEM, "the hugetlb cgroup lets this process take %llu more bytes of %zu kB "
                           "pages (%s is %llu); the pool needs %zu: raise the limit or make the pool smaller",
                           (unsigned long long)room, huge_sz >> 10, where, (unsigned long long)limit, len);
        return 0;
    }
    bool charged = cfg->prefault || cfg->backing == DSMPOOL_BACKING_MEMFD ||
                   (cfg->backing == DSMPOOL_BACKING_POSIX && cfg->huge_pages != DSMPOOL_HUGE_TRANSPARENT);
    if (!charged) return 0;
    dp_os_cgroup_mem_room(&room, &limit, where, sizeof where);
    if (room < len)
        return dp_fail(-ENOMEM, "the memory cgroup lets this process charge %llu more bytes (%s is %llu); "
                       "a pool of %zu bytes %s would be killed by the OOM killer: raise the limit, make "
                       "the pool smaller%s", (unsigned long long)room, where, (unsigned long long)limit, len,
                       cfg->prefault ? "prefaulted" : "reserved",
                       cfg->prefault && cfg->backing != DSMPOOL_BACKING_MEMFD ? ", or create it with prefault = false" : "");
    return 0;
}

static int huge_message(int r, size_t huge_sz, size_t len) {
    uint64_t fr = 0, tot = 0;
    dp_os_huge_counts(huge_sz, &fr, &tot);
    uint64_t need = (len + huge_sz - 1) / huge_sz;
    return dp_fail(r == -EINVAL || r == -ENOSPC || r == -ENOMEM ? -ENOMEM : r,
                   "huge pages unavailable: need %llu pages of %zu kB, %llu free of %llu; "
                   "reserve them with: echo %llu > /sys/kernel/mm/hugepages/hugepages-%zukB/"
                   "nr_hugepages (or use DSMPOOL_HUGE_TRY)",
                   (unsigned long long)need, huge_sz >> 10, (unsigned long long)fr,
                   (unsigned long long)tot, (unsigned long long)(tot + need - (fr < need ? fr : need)),
                   huge_sz >> 10);
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

/* ---- NUMA planning: which sub-pools, how big, bound where --------------- */

typedef struct plan {
    uint32_t nsub, nnode;           /* sub-pools; of which node sub-pools (the rest: interleave) */
    uint32_t nodes[DSMPOOL_MAX_NODES];
    uint64_t want[DSMPOOL_MAX_NODES]; /* explicit 2 MiB units per sub-pool, 0 = share */
    bool bind;                      /* real NUMA: mbind and pin */
} plan;

static int plan_nodes(const dsmpool_config *cfg, plan *pl) {
    const dp_topo *t = dp_numa_topo();
    memset(pl, 0, sizeof *pl);
    if ((unsigned)cfg->numa > DSMPOOL_NUMA_OFF) return dp_fail(-EINVAL, "unknown numa mode %d", (int)cfg->numa);
    if (cfg->nnodes >= DSMPOOL_MAX_NODES)
        return dp_fail(-EINVAL, "nnodes %u: at most %d nodes", cfg->nnodes, DSMPOOL_MAX_NODES - 1);
    bool numa = cfg->numa == DSMPOOL_NUMA_AUTO && t->real;
    uint32_t n = 0;
    if (cfg->nnodes) {
        for (unsigned i = 0; i < cfg->nnodes; i++) {
            uint32_t id = cfg->nodes[i];
            if (id > 255) return dp_fail(-EINVAL, "node %u: node ids above 255 are not supported", id);
            if (dp_numa_index(id) < 0) {
                char have[256] = "";
                for (unsigned k = 0; k < t->nnodes && strlen(have) < 200; k++)
                    snprintf(have + strlen(have), sizeof have - strlen(have), " %u", t->node[k]);
                return dp_fail(-EINVAL, "node %u has no memory here (nodes with memory:%s)", id, have);
            }
            for (unsigned k = 0; k < n; k++)
                if (pl->nodes[k] == id) return dp_fail(-EINVAL, "node %u listed twice", id);
            pl->nodes[n++] = id;
        }
        if (n > 1 && !numa)
            return dp_fail(-EINVAL, "%u nodes listed, but NUMA is %s", n,
                           cfg->numa == DSMPOOL_NUMA_OFF ? "off in the config" : "not available");
    } else if (numa) {
        for (unsigned k = 0; k < t->nnodes && n < DSMPOOL_MAX_NODES - 1; k++)
            if (t->node[k] <= 255) pl->nodes[n++] = t->node[k];
    } else {
        pl->nodes[n++] = t->node[0];
    }
    bool any = false, all = true;
    for (unsigned i = 0; i < DSMPOOL_MAX_NODES; i++) {
        size_t sz = cfg->node_size[i];
        if (i >= n && sz) return dp_fail(-EINVAL, "node_size[%u] set for a node not in the pool", i);
        if (i >= n) continue;
        if (sz % (2 * MIB)) return dp_fail(-EINVAL, "node_size[%u] = %zu is not a multiple of 2 MiB", i, sz);
        any |= sz != 0;
        all &= sz != 0;
        pl->want[i] = sz / (2 * MIB);
    }
    if (any && !all) return dp_fail(-EINVAL, "node_size: give every node's size, or none");
    pl->nnode = n;
    pl->bind = numa && n > 1;
    if (n > 1 && cfg->interleave_size != DSMPOOL_INTERLEAVE_NONE) {
        if (cfg->interleave_size % (2 * MIB))
            return dp_fail(-EINVAL, "interleave_size is not a multiple of 2 MiB");
        pl->nodes[n] = DP_NODE_INTERLEAVE;
        pl->want[n] = cfg->interleave_size / (2 * MIB);
        n++;
    }
    pl->nsub = n;
    return 0;
}

/* Split total 2 MiB units (in steps of g) among the sub-pools. */
static int plan_units(const plan *pl, uint64_t total, uint64_t g, uint64_t *units) {
    uint64_t used = 0, il = 0;
    bool has_il = pl->nsub > pl->nnode;
    if (has_il) {
        il = pl->want[pl->nnode];
        if (!il) il = total / 4 / (g * pl->nnode) * (g * pl->nnode);
        if (il < g * pl->nnode) il = g * pl->nnode;
        if (il % g) return -EINVAL;
        units[pl->nnode] = il;
    }
    if (pl->want[0]) {
        for (uint32_t i = 0; i < pl->nnode; i++) {
            if (pl->want[i] % g) return -EINVAL;
            units[i] = pl->want[i];
            used += units[i];
        }
        return used + il <= total ? 0 : -ENOSPC;
    }
    if (total < il + g * pl->nnode) return -ENOSPC;
    uint64_t steps = (total - il) / g, per = steps / pl->nnode, extra = steps % pl->nnode;
    for (uint32_t i = 0; i < pl->nnode; i++) units[i] = (per + (i < extra)) * g;
    return 0;
}

/* The layout of a region of len bytes in pages of `page`: the most data
 * that fits beside the tables, split as the plan says. 0, -ENOSPC (too
 * small) or -EINVAL (explicit node sizes that are not multiples of the data
 * granule). Pure computation: no system call. */
static int layout_for(const dsmpool_config *cfg, const plan *pl, size_t len, size_t page,
                      dp_layout_in *in, dp_header *h) {
    const dp_caps *caps = dp_os_caps();
    *in = (dp_layout_in){len, 0, cfg->max_procs ? cfg->max_procs : 1024, pl->nsub, 0,
                         data_gran(page), {0}, {0}};
    memcpy(in->nodes, pl->nodes, sizeof in->nodes);
    in->nhints = caps->ncpus_conf < 1 ? 1 : caps->ncpus_conf > 4096 ? 4096 : caps->ncpus_conf;
    uint64_t est = len / (16 * 1024);
    in->seg_cap = cfg->max_segments ? cfg->max_segments : (est > 1024 ? est : 1024);
    if (in->seg_cap > DP_SEG_MAX) in->seg_cap = DP_SEG_MAX;
    uint64_t g = in->data_align / (2 * MIB), total = len / (2 * MIB) / g * g;
    int lr = -ENOSPC;
    for (; total >= g; total -= g) {
        int pr = plan_units(pl, total, g, in->units);
        if (pr == -EINVAL) return pl->want[0] ? -EINVAL : -ENOSPC;
        if (pr == 0 && (lr = dp_layout(in, h)) == 0) break;
        if (pl->want[0]) break; /* explicit sizes: no smaller split to try */
    }
    return lr;
}

/* The least size (a multiple of page) whose layout fits, or 0 if none up to
 * 64 TiB. The tables grow with the size (segment descriptors: one per 16
 * KiB unless max_segments is set), so it searches upwards: doubling to a
 * size that fits, then halving the step down to the least one. */
static size_t min_size_for(const dsmpool_config *cfg, const plan *pl, size_t page) {
    dp_header *h = malloc(sizeof *h);
    if (!h) return 0;
    dp_layout_in in;
    size_t lo = 0, hi = page; /* lo does not fit (or is 0); hi is the candidate */
    while (hi <= (1ull << 46) && layout_for(cfg, pl, hi, page, &in, h) != 0) {
        lo = hi;
        hi *= 2;
    }
    size_t best = 0;
    if (hi <= (1ull << 46)) {
        best = hi;
        /* the least fitting multiple of page in (lo, hi]: a linear walk down
         * from hi would be long; fit is monotone in practice, but check every
         * answer, so that a non-monotone corner costs only a larger minimum */
        while (hi - lo > page) {
            size_t mid = lo + (hi - lo) / 2 / page * page;
            if (mid <= lo) mid = lo + page;
            if (layout_for(cfg, pl, mid, page, &in, h) == 0) hi = best = mid;
            else lo = mid;
        }
    }
    free(h);
    return best;
}

size_t dp_region_min_size(const dsmpool_config *cfg) {
    if (!cfg) return 0;
    plan pl;
    if (plan_nodes(cfg, &pl) != 0) return 0;
    bool want_huge = cfg->huge_pages == DSMPOOL_HUGE_ON || cfg->huge_pages == DSMPOOL_HUGE_TRY;
    size_t page = want_huge ? huge_size_for(cfg) : 4096;
    if (page != 4096 && page != 2 * MIB && page != GIB) {
        dp_fail(-EINVAL, "huge_page_size must be 0, 2 MiB or 1 GiB (got %zu)", page);
        return 0;
    }
    size_t min = min_size_for(cfg, &pl, page);
    if (!min) dp_fail(-EINVAL, "no size up to 64 TiB fits this configuration (node sizes?)");
    return min;
}

/* hugetlb pools are per node: with bound sub-pools, each node must have its
 * share free, or the prefault (or a later fault) would fail there. The
 * interleaved sub-pool's huge pages go round-robin from a start the kernel
 * picks (the page's offset), so each node may get the rounded-up share; one
 * it cannot serve would come from another node and take a page that node's
 * bound sub-pool needs. */
static int plan_huge_check(const plan *pl, const uint64_t *units, size_t hs) {
    if (!pl->bind || !hs) return 0;
    uint64_t need[DSMPOOL_MAX_NODES] = {0};
    for (uint32_t i = 0; i < pl->nnode; i++) need[i] = units[i] * (2 * MIB) / hs;
    if (pl->nsub > pl->nnode) {
        uint64_t pages = units[pl->nnode] * (2 * MIB) / hs;
        for (uint32_t i = 0; i < pl->nnode; i++) need[i] += (pages + pl->nnode - 1) / pl->nnode;
    }
    for (uint32_t i = 0; i < pl->nnode; i++) {
        long fr = dp_numa_huge_free(pl->nodes[i], hs);
        if (fr >= 0 && (uint64_t)fr < need[i])
            return dp_fail(-ENOMEM, "huge pages unavailable on node %u: need %llu pages of %zu kB, "
                           "%ld free; reserve them with: echo %llu > /sys/devices/system/node/node%u/"
                           "hugepages/hugepages-%zukB/nr_hugepages", pl->nodes[i],
                           (unsigned long long)need[i], hs >> 10, fr, (unsigned long long)need[i],
                           pl->nodes[i], hs >> 10);
    }
    return 0;
}

/* Everything that stops hugetlb pages of size hs for this pool, in one
 * message (-ENOMEM), or 0: no hugetlbfs mount for a POSIX pool, too few
 * pages reserved (overall; per node for bound sub-pools), a hugetlb cgroup
 * limit. A caller that fixes one problem is not sent back for the next. */
static int huge_problems(const dsmpool_config *cfg, const plan *pl, const uint64_t *units, size_t hs,
                         size_t len) {
    char msg[1800] = "", one[1400], dir[512];
    int n = 0;
#define HUGE_ADD(...)                                                                              \
    do {                                                                                           \
        if (snprintf(one, sizeof one, __VA_ARGS__) < 0) one[0] = 0;                               \
        size_t l_ = strlen(msg);                                                                  \
        if (snprintf(msg + l_, sizeof msg - l_, "%s(%d) %s", n ? "; " : "", n + 1, one) < 0)     \
            msg[l_] = 0;                                                                           \
        n++;                                                                                       \
    } while (0)
    if (cfg->backing == DSMPOOL_BACKING_POSIX && dp_os_hugetlbfs_dir(hs, dir, sizeof dir) != 0)
        HUGE_ADD("no hugetlbfs is mounted with pagesize=%zuM, which a POSIX pool needs: mount -t hugetlbfs -o "
                 "pagesize=%zuM none /dev/hugepages", hs >> 20, hs >> 20);
    uint64_t need = (len + hs - 1) / hs, avail = 0, fr = 0, tot = 0;
    dp_os_huge_counts(hs, &fr, &tot);
    if (dp_os_huge_avail(hs, &avail) == 0 && avail < need)
        HUGE_ADD("%llu pages of %zu kB are needed, %llu can be had (%llu free of %llu): echo %llu > "
                 "/sys/kernel/mm/hugepages/hugepages-%zukB/nr_hugepages", (unsigned long long)need, hs >> 10,
                 (unsigned long long)avail, (unsigned long long)fr, (unsigned long long)tot,
                 (unsigned long long)(tot + need - avail), hs >> 10);
    else if (plan_huge_check(pl, units, hs) != 0)
        HUGE_ADD("%s", dsmpool_last_error());
    uint64_t room, limit;
    char where[1200];
    dp_os_cgroup_huge_room(hs, &room, &limit, where, sizeof where);
    if (room < len)
        HUGE_ADD("the hugetlb cgroup lets this process take %llu more bytes of %zu kB pages (%s is %llu): raise "
                 "it", (unsigned long long)room, hs >> 10, where, (unsigned long long)limit);
#undef HUGE_ADD
    if (!n) return 0;
    return dp_fail(-ENOMEM, "huge pages of %zu kB cannot be had for %zu bytes: %s%s", hs >> 10, len, msg,
                   cfg->huge_pages == DSMPOOL_HUGE_ON ? " (or use DSMPOOL_HUGE_TRY)" : "");
}

/* Bind every node sub-pool to its node and the interleaved one over all the
 * pool's nodes, before anything touches them: one mbind per sub-pool, so the
 * mapping is at most nsub + 2 VMAs (the tables before, any tail after) in
 * this process and every child, whatever the pool's size. (One mbind per
 * 2 MiB granule made a VMA each: 32k for a 256 GiB pool, against
 * vm.max_map_count = 65530, in every forked process, and a slow fork.) The
 * interleaved sub-pool is therefore interleaved page by page -- 4 KiB pages,
 * or whole huge pages -- in the kernel's order (numa.c rule 3). */
static int bind_subpools(dsmpool *p, const dp_header *h, const plan *pl) {
    if (!pl->bind) return 0;
    for (uint32_t s = 0; s < h->nsub; s++) {
        char *a = p->base + h->sub[s].data_off;
        size_t len = h->sub[s].geom.frames * DP_FRAME_SIZE;
        int r = h->sub[s].node != DP_NODE_INTERLEAVE ? dp_numa_bind(a, len, h->sub[s].node)
                                                      : dp_numa_interleave(a, len, pl->nodes, pl->nnode);
        if (r) return dp_fail(r, "mbind of sub-pool %u failed: %s", s, strerror(-r));
    }
    return 0;
}

typedef struct pf_job {
    char *addr;
    size_t len;
    int64_t node; /* pin to this node first, or -1 */
    int err;
    pthread_t tid;
} pf_job;

static void *pf_thread(void *arg) {
    pf_job *j = arg;
    if (j->node >= 0) dp_numa_run_on_node((uint32_t)j->node);
    j->err = dp_os_populate(j->addr, j->len, 1);
    return NULL;
}

/* Prefault: the tables, then each sub-pool in slices by threads pinned to
 * its node, at most `threads` at a time. Slices are whole pages (gran). */
static int prefault_pool(dsmpool *p, const dp_header *h, const plan *pl, unsigned threads,
                         size_t gran, size_t *done) {
    enum { MAXJ = 64 };
    pf_job jobs[MAXJ];
    unsigned nj = 0;
    if (!threads) threads = 1;
    jobs[nj++] = (pf_job){p->base, h->data_off, -1, 0, 0};
    unsigned per = threads / h->nsub;
    if (per < 1) per = 1;
    if (per > (MAXJ - 2) / h->nsub) per = (MAXJ - 2) / h->nsub; /* every slice gets a job */
    for (uint32_t s = 0; s < h->nsub; s++) {
        char *a = p->base + h->sub[s].data_off;
        size_t len = h->sub[s].geom.frames * DP_FRAME_SIZE;
        size_t slice = (len / per + gran - 1) / gran * gran;
        int64_t node = pl->bind && h->sub[s].node != DP_NODE_INTERLEAVE ? (int64_t)h->sub[s].node : -1;
        for (size_t o = 0; o < len; o += slice)
            jobs[nj++] = (pf_job){a + o, o + slice > len ? len - o : slice, node, 0, 0};
    }
    if (p->size > h->data_off + h->data_size) /* the tail past the data */
        jobs[nj++] = (pf_job){p->base + h->data_off + h->data_size, p->size - h->data_off - h->data_size,
                              -1, 0, 0};
    int err = 0;
    *done = 0;
    for (unsigned i = 0; i < nj; i += threads) {
        unsigned end = i + threads < nj ? i + threads : nj;
        for (unsigned k = i; k < end; k++)
            if (pthread_create(&jobs[k].tid, NULL, pf_thread, &jobs[k]) != 0) {
                jobs[k].tid = 0;
                pf_thread(&jobs[k]);
            }
        for (unsigned k = i; k < end; k++) {
            if (jobs[k].tid) pthread_join(jobs[k].tid, NULL);
            if (jobs[k].err && !err) err = jobs[k].err;
            if (!jobs[k].err) *done += jobs[k].len;
        }
    }
    return err;
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
    if (cfg->map_align && ((cfg->map_align & (cfg->map_align - 1)) || cfg->map_align > GIB))
        return dp_fail(-EINVAL, "map_align must be a power of two up to 1 GiB");
    if (cfg->max_procs > DP_PA_OWNER_MAX)
        return dp_fail(-EINVAL, "max_procs above %u", DP_PA_OWNER_MAX);
    if (cfg->max_segments > DP_SEG_MAX)
        return dp_fail(-EINVAL, "max_segments above %u", DP_SEG_MAX);
    int r = check_name(cfg->backing, cfg->name);
    if (r) return r;
    dsmpool_config cfgv = *cfg;
    if (!cfgv.mode) cfgv.mode = 0600;
    cfg = &cfgv;
    const dp_caps *caps = dp_os_caps();
    plan pl;
    if ((r = plan_nodes(cfg, &pl)) != 0) return r;
    bool want_huge = cfg->huge_pages == DSMPOOL_HUGE_ON || cfg->huge_pages == DSMPOOL_HUGE_TRY;
    size_t huge_sz = want_huge ? huge_size_for(cfg) : 0;
    if (want_huge && huge_sz != 2 * MIB && huge_sz != GIB)
        return dp_fail(-EINVAL, "huge_page_size must be 0, 2 MiB or 1 GiB (got %zu)", huge_sz);
    bool huge_ok = want_huge && ((huge_sz == 2 * MIB && caps->huge_2m) ||
                                 (huge_sz == GIB && caps->huge_1g));
    if (want_huge && !huge_ok && cfg->huge_pages == DSMPOOL_HUGE_ON)
        return dp_fail(-ENOMEM, "this kernel/CPU has no hugetlb pages of %zu kB "
                       "(/sys/kernel/mm/hugepages/hugepages-%zukB is missing)",
                       huge_sz >> 10, huge_sz >> 10);

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
    creating c = {p, NULL, 0, false, false, false, "", ""};
    size_t tries[2], page = 4096, len = 0, align = 0;
    int ntries = 0;
    if (huge_ok) tries[ntries++] = huge_sz;
    if (!want_huge || cfg->huge_pages == DSMPOOL_HUGE_TRY) tries[ntries++] = 0;
    r = 0;
    for (int i = 0; i < ntries && !c.mapped; i++) {
        size_t hs = tries[i];
        page = hs ? hs : 4096;
        len = align_up(cfg->size, page);
        align = cfg->map_align ? cfg->map_align : 2 * MIB;
        if (align < page) align = page;
        if (align < 2 * MIB) align = 2 * MIB;
        dp_layout_in in;
        int lr = layout_for(cfg, &pl, len, page, &in, h);
        if (lr == -EINVAL) {
            r = dp_fail(-EINVAL, "node sizes must be multiples of the page size (%zu)", page);
            break;
        }
        if (lr != 0 && hs && cfg->huge_pages == DSMPOOL_HUGE_TRY) {
            r = dp_fail(-EINVAL, "size %zu is too small for tables in %zu kB pages", cfg->size, hs >> 10);
            continue; /* TRY: base pages, which may fit */
        }
        if (lr != 0) {
            size_t min = min_size_for(cfg, &pl, page);
            char how[300] = "";
            /* pages above 2 MiB: the data starts at a page boundary after the
             * tables, so the tables cost a whole page: say so */
            if (min) snprintf(how, sizeof how, "%s; the least that fits is %zu bytes (dsmpool_min_size)",
                              page > 2 * MIB ? "; with pages this big the data starts at a page boundary after "
                                               "the tables, so they take a page of their own" : "", min);
            r = dp_fail(-EINVAL, "size %zu is too small for %u sub-pool(s) plus tables "
                        "(%llu segments, %u process slots)%s%s", cfg->size, in.nsub,
                        (unsigned long long)in.seg_cap, in.proc_cap,
                        pl.want[0] ? ", or the node sizes do not fit" : "", how);
            break;
        }
        if (hs && (r = huge_problems(cfg, &pl, in.units, hs, len)) != 0) {
            if (cfg->huge_pages == DSMPOOL_HUGE_ON) break;
            continue; /* TRY: base pages */
        }
        if ((r = cgroup_check(cfg, len, hs)) != 0) {
            if (hs && cfg->huge_pages == DSMPOOL_HUGE_TRY) continue; /* TRY: base pages */
            break;
        }
        p->nprocs = in.proc_cap; /* System V: the semaphore set's size */
        r = map_backing(&c, cfg, len, align, hs);
        if (r && hs && (r == -ENOMEM || r == -EINVAL || r == -ENOSPC || r == -EPERM))
            r = huge_message(r, hs, len);
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
        h->thp_advised = dp_os_madvise_hugepage(p->base, len) == 0;
    if ((r = bind_subpools(p, h, &pl)) != 0) return create_fail(&c, h, r);
    if (cfg->backing != DSMPOOL_BACKING_ANON) provisional(p, len, (dp_header *)p->base); /* rule 2 */
    if (c.tmp[0] && (r = name_region(&c)) != 0) return create_fail(&c, h, r);
    if (cfg->prefault) {
        unsigned t = cfg->prefault_threads ? cfg->prefault_threads : caps->ncpus_online;
        if (t > 16 && !cfg->prefault_threads) t = 16;
        size_t done = 0;
        r = prefault_pool(p, h, &pl, t, data_gran(page), &done);
        if (r)
            return create_fail(&c, h, dp_fail(r == -ENOMEM || r == -EFAULT ? -ENOMEM : r,
                                              "prefaulting %zu bytes failed (%s): not enough memory "
                                              "for the region%s", len, strerror(-r),
                                              pl.bind ? " on some node" : ""));
        h->prefaulted_bytes = done;
    }
    /* The tables: fresh objects are zero, but say so rather than rely on it
     * -- all but the header, whose provisional magic must never read 0 once
     * the region has its name (rule 2) */
    memset((char *)p->base + sizeof *h, 0, h->meta_end - sizeof *h);
    DP_INJECT("region.create.zeroed");
    h->magic = DP_MAGIC_CREATING; /* until dp_region_publish (rule 2) */
    memcpy(p->base, h, sizeof *h);
    p->hdr = (dp_header *)p->base;
    r = build_view(p, h);
    free(h);
    if (r) return create_fail(&c, NULL, r); /* cannot happen: we just computed it */
    for (uint32_t s = 0; s < p->nsub; s++) dp_pa_format(&p->pa[s]);
    p->magic = DP_POOL_MAGIC;
    *out = p; /* not yet published: dp_region_publish */
    return 0;
}

void dp_region_publish(dsmpool *p) {
    /* release: pairs with the acquire load of the magic in attach (rule 2) */
    dp_store_release(&p->hdr->magic, DP_MAGIC);
    if (p->backing == DSMPOOL_BACKING_POSIX && p->fd >= 0) dp_os_ofd_unlock(p->fd, DP_LOCK_CREATE);
    if (p->backing == DSMPOOL_BACKING_SYSV && p->live.semid >= 0) dp_os_sem_unlock(p->live.semid, DP_LOCK_CREATE);
}

void dp_region_abandon(dsmpool *p) {
    creating c = {p, p->base, p->size, true, true, p->backing == DSMPOOL_BACKING_SYSV, "", ""};
    region_undo(&c);
    pool_free(p);
}

/* ---- attachment --------------------------------------------------------- */

static int attach_mapped(dsmpool *p, size_t real) {
    int r = dp_region_view(p, real); /* rule 1 */
    if (r) return r;
    p->magic = DP_POOL_MAGIC;
    return 0;
}

/* Read the header from an fd-backed object, map it aligned, attach. */
static int attach_fd_common(dsmpool *p) {
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
    if ((r = validate_header(p, &hc, real)) != 0) return r;
    size_t align = hc.map_align;
    void *va;
    if ((r = dp_os_reserve_va(real, align, &va)) != 0) return dp_fail(r, "cannot reserve address space");
    if ((r = dp_os_map_fd(va, real, p->fd)) != 0) {
        dp_os_unmap(va, real);
        return dp_fail(r, "mmap of the region failed: %s", strerror(-r));
    }
    p->base = va;
    p->size = real;
    if ((r = attach_mapped(p, real)) != 0) {
        dp_os_unmap(va, real);
        p->base = NULL;
    }
    return r;
}

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
    return p;
}

static void pool_free(dsmpool *p) {
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->recover_lock);
    pthread_mutex_destroy(&p->lost_lock);
    pthread_mutex_destroy(&p->names_mutex);
    p->magic = DP_POOL_DEAD;
    dp_obj_end(DP_OBJ_POOL, p);
}

int dp_region_attach(const char *name, dsmpool **out) {
    if (!name || !*name) return dp_fail(-EINVAL, "name must not be empty");
    if (strlen(name) > DP_NAME_MAX) return dp_fail(-EINVAL, "name too long");
    dsmpool *p = pool_new();
    if (!p) return dp_fail(-ENOMEM, "out of memory");
    snprintf(p->name, sizeof p->name, "%s", name);
    int r;
    if (name[0] == '/') {
        p->backing = DSMPOOL_BACKING_POSIX;
        if (check_name(DSMPOOL_BACKING_POSIX, name)) {
            pool_free(p);
            return -EINVAL;
        }
        r = dp_os_shm_open(name, false, 0);
        if (r == -ENOENT) { /* huge-page pools live in hugetlbfs */
            size_t sizes[2] = {2 * MIB, GIB};
            for (int i = 0; i < 2 && r == -ENOENT; i++) {
                char dir[4096];
                if (dp_os_hugetlbfs_dir(sizes[i], dir, sizeof dir) != 0) continue;
                snprintf(p->path, sizeof p->path, "%s%s", dir, name);
                r = dp_os_file_open(p->path, false, 0);
                if (r < 0) p->path[0] = 0;
            }
        }
        if (r < 0) {
            pool_free(p);
            return r == -ENOENT ? dp_fail(-ENOENT, "no pool named %s", name)
                                : dp_fail(r, "opening %s failed: %s", name, strerror(-r));
        }
        p->fd = r;
        if ((r = attach_fd_common(p)) != 0) {
            dp_os_close(p->fd);
            pool_free(p);
            return r;
        }
    } else {
        p->backing = DSMPOOL_BACKING_SYSV;
        int32_t key;
        dp_os_sysv_key(name, &key);
        p->sysv_key = key;
        r = dp_os_sysv_get(key, 0, false, 0, 0);
        if (r < 0) {
            pool_free(p);
            return r == -ENOENT ? dp_fail(-ENOENT, "no System V pool with key 0x%x (\"%s\")",
                                          (unsigned)key, name)
                                : dp_fail(r, "shmget failed: %s", strerror(-r));
        }
        p->shmid = r;
        size_t real;
        void *va = NULL;
        if ((r = dp_os_sysv_size(p->shmid, &real)) != 0 || real < sizeof(dp_header)) {
            pool_free(p);
            return r ? dp_fail(r, "IPC_STAT failed") : dp_fail(-EPROTO, "segment too small");
        }
        /* The alignment is in the header: map once anywhere to read it. */
        size_t align = GIB;
        if ((r = dp_os_reserve_va(real, align, &va)) == 0 &&
            (r = dp_os_sysv_attach(p->shmid, va)) == 0) {
            p->base = va;
            p->size = real;
            r = attach_mapped(p, real);
            if (r) dp_os_sysv_detach(va);
        }
        if (r) {
            if (va) dp_os_unmap(va, real);
            pool_free(p);
            return r;
        }
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
    if ((r = attach_fd_common(p)) != 0) {
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

/* ---- for tools and the sweep --------------------------------------------- */

int dp_region_peek_fd(int fd, dp_header *h) { return dp_os_file_peek(fd, h, sizeof *h); }
int dp_region_peek_sysv(int shmid, dp_header *h) { return dp_os_sysv_peek(shmid, h, sizeof *h); }

/* Rule 1 for a mapped region (base and size set): validate a copy of its
 * header and build the view from it. Attach then marks p attached;
 * inspect.c (a read-only mapping) leaves p->magic alone, so no public call
 * takes its p for an attached pool. */
int dp_region_view(dsmpool *p, size_t real) {
    dp_header *c = malloc(sizeof *c);
    if (!c) return dp_fail(-ENOMEM, "out of memory");
    /* acquire: pairs with the creator's release store of the magic */
    uint64_t magic = dp_load_acquire(&((dp_header *)p->base)->magic);
    memcpy(c, p->base, sizeof *c);
    c->magic = magic;
    int r = validate_header(p, c, real);
    if (r == 0) r = build_view(p, c);
    free(c);
    if (r == 0) p->hdr = (dp_header *)p->base;
    return r;
}

/* ---- teardown ----------------------------------------------------------- */

void dp_region_free(dsmpool *p) {
    if (p->shmid >= 0) dp_os_sysv_detach(p->base);
    dp_os_unmap(p->base, p->size);
    if (p->fd >= 0) dp_os_close(p->fd);
    pool_free(p);
}

int dp_region_unlink(dsmpool *p) {
    int r = 0;
    if (p->backing == DSMPOOL_BACKING_POSIX) {
        r = p->path[0] ? dp_os_file_unlink(p->path) : dp_os_shm_unlink(p->name);
        if (r == -ENOENT) r = 0; /* someone else destroyed it first */
    } else if (p->backing == DSMPOOL_BACKING_SYSV && p->shmid >= 0) {
        r = dp_os_sysv_remove(p->shmid);
        if (r == -EINVAL || r == -EIDRM) r = 0;
    }
    return r ? dp_fail(r, "removing the region's name failed: %s", strerror(-r)) : 0;
}

int dsmpool_prefault(dsmpool *pool) {
    dp_clear_error();
    if (!pool || pool->magic != DP_POOL_MAGIC) return dp_fail(-EINVAL, "not an attached pool");
    unsigned t = dp_os_caps()->ncpus_online;
    int r = dp_os_populate(pool->base, pool->size, t > 16 ? 16 : t);
    return r ? dp_fail(r, "populate failed: %s", strerror(-r)) : 0;
}
