/*
 * dp_region.h -- the region layer: a pool's process-local object (struct
 * dsmpool), the layout, and the region's life: create, attach, publish,
 * teardown (region.c).
 *
 * Layer: region (pool/region), above the allocator, the OS and NUMA; every
 * layer above lives in the region and reaches it through this header.
 * struct dsmpool carries each upper layer's per-process state too (each
 * field says whose); only that layer writes it.
 */
#ifndef DP_REGION_H
#define DP_REGION_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dp_base.h"
#include "dp_format.h"
#include "dp_palloc.h"

/* ---- process-local --------------------------------------------------------- */

struct dsmpool_seg; /* the segment layer's (dp_segment.h) */

/* This process's liveness lock (live.c): an open file description of the
 * pool's lock file that this process opened itself, or a SysV semaphore set;
 * NONE: this process holds its slot unguarded. */
enum { DP_LIVE_NONE = 0, DP_LIVE_OFD = 1, DP_LIVE_SEM = 2 };
typedef struct dp_live {
    int kind;
    int fd;    /* DP_LIVE_OFD: our own description, never shown to the caller */
    int semid; /* DP_LIVE_SEM */
} dp_live;

struct dsmpool {
    uint64_t magic;          /* DP_POOL_MAGIC while attached */
    char *base;              /* the mapping in this process */
    size_t size;             /* bytes mapped */
    dp_header *hdr;          /* the shared header (counters only are read from it) */
    dp_header geo;           /* validated private copy: the layout is read from here */
    int fd;                  /* memfd / POSIX / hugetlbfs fd (dsmpool_fd), or -1 */
    int shmid;               /* SysV id, or -1 */
    int32_t sysv_key;        /* SysV key (the semaphore set has the same key) */
    dsmpool_backing backing;
    char name[DP_NAME_MAX + 1];
    char path[4096];         /* hugetlbfs file path when used, else "" */
    dp_live live;            /* our liveness lock (ledger) */
    char note[2100];         /* create: what the pool did not get (dsmpool_create's note) */
    int anchor;              /* our description of the pool's anchor (life.c), or -1 */
    int shmdir;              /* the pool's /dev/shm directory (life.c [anchor]), or -1: this
                                process sees another one and makes no OS fallback objects */
    bool present;            /* we hold DP_LOCK_PRESENT on live (life.c [presence]) */
    uint64_t pool_id;        /* the id a new region gets (creation), then geo.pool_id */
    dp_proc *procs;
    uint32_t nprocs;
    dp_seg_desc *segs;
    uint64_t nsegs;
    dp_a64 *dir;             /* span directory (area_registry.c [directory]) */
    dp_name *names;          /* the name table (names.c), geo.names_cap entries */
    dp_a64 *res;             /* the residency table (resident.c), geo.res_count words */
    uint64_t res_span;       /* bytes after geo.data_off one word of res each tells of
                                (dp_res_warm_one): res_count granules; 0 in pages larger
                                than a granule (a word per page, not per granule) */
    dp_a64 *fill;            /* per slot: bytes it is populating (resident.c [room first]) */
    void *elastic;           /* the top's maintainer thread of this process (elastic.c), or NULL */
    pthread_mutex_t maint_mutex; /* one dsmpool_maintain step of this process's at a time (elastic.c) */
    pthread_mutex_t names_mutex; /* one thread of this process at a time holds DP_LOCK_NAMES */
    uint32_t nsub;
    dp_pa pa[DSMPOOL_MAX_NODES];
    int il_sub;              /* the interleaved sub-pool, or -1 */
    bool one_sub;            /* one sub-pool, not interleaved: every allocation's first choice */
    int8_t node_sub[256];    /* node id -> its sub-pool, -1 none */
    uint8_t order[DSMPOOL_MAX_NODES][DSMPOOL_MAX_NODES]; /* per sub-pool: node sub-pools, nearest first */
    /* this process's identity in the pool */
    uint32_t slot;           /* index into procs */
    uint64_t claim;          /* procs[slot].claims after our claim */
    bool has_slot;           /* slot is ours (false in a fork()ed child until it adopts) */
    bool abandoned;          /* dsmpool_abandon: leaving without writing to the region */
    pid_t pid;
    dp_a32 fork_epoch;       /* dp_epoch() when the slot was taken (acquire/release) */
    pthread_mutex_t lock;    /* guards the process-local seg list and slot changes */
    pthread_mutex_t recover_lock; /* one recovery at a time in this process (live.c [dead iff free]) */
    pthread_mutex_t lost_lock;    /* one lost-chunk sweep at a time in this process (recover.c) */
    dp_a64 *held;            /* a bit per slot whose liveness lock this process holds as a
                                recoverer: its own description never conflicts with it, so
                                dp_slot_alive must be told (live.c [dead iff free]) */
    struct dsmpool_seg *segs_head;
    struct dsmpool *reg_next; /* registry of pools in this process */
    void (*fb_hook)(void *, size_t); /* dsmpool_set_fallback_hook (lock) */
    void *fb_arg;                    /* its argument (lock) */
};
#define DP_POOL_MAGIC 0x6c6f6f506d7364ull
#define DP_POOL_DEAD 0x646165446c6f6full

static inline void *dp_at(const struct dsmpool *pool, dp_off off) { return pool->base + off; }

/* A block [off, off + len) that lies in the data, frame-aligned: every block
 * the allocator hands out, and every offset a table names, is checked so. */
static inline bool dp_block_ok(const struct dsmpool *pool, uint64_t off, uint64_t len) {
    return off % DP_FRAME_SIZE == 0 && len && off >= pool->geo.data_off &&
           dp_range_ok(off - pool->geo.data_off, len, pool->geo.data_size);
}

/* layout.c [lazy directory]: whether the directory words of data offset
 * rel (below data_size) may be read without making a page resident: its
 * granule is not released (in a fixed pool, one dsmpool_trim gave back;
 * its directory stays resident, but it holds no block either). Relaxed: a
 * reader that holds no block there (a stray free) racing a trim of the
 * granule can still fault its page in (resident.c [lazy directory]). */
static inline bool dp_dir_readable(const struct dsmpool *pool, uint64_t rel) {
    return !(dp_load_relaxed(&pool->res[rel >> DP_RES_SHIFT]) & DP_RES_RELEASED);
}

/* ---- layout (region.c) -------------------------------------------------- */

typedef struct dp_layout_in {
    uint64_t region_size;
    uint64_t seg_cap;
    uint32_t proc_cap;
    uint32_t nsub;
    uint32_t nhints;
    uint64_t data_align;               /* where data starts: 2 MiB, or the huge page */
    uint32_t nodes[DSMPOOL_MAX_NODES];
    uint64_t units[DSMPOOL_MAX_NODES]; /* 2 MiB units of data per sub-pool */
} dp_layout_in;

int dp_layout(const dp_layout_in *in, dp_header *h);

/* layout.c [lazy directory]: the directory's page for each 2 MiB granule */
#define DP_DIR_PAGE (((uint64_t)1 << (DP_RES_SHIFT - DP_DIR_SHIFT)) * sizeof(uint64_t))
/* The directory bytes of granules [g, g + n), rounded out to pages of
 * `page`: [*off, *off + *len) from the region's base (*len 0 when n is). */
void dp_dir_range(const dp_header *h, uint64_t g, uint64_t n, uint64_t page, uint64_t *off, uint64_t *len);
/* The tables' bytes a pool keeps resident whatever its granules (the whole
 * of [0, data_off) unless lazy: an elastic pool's, without the directory
 * and the trees' two lowest levels, layout.c [lazy directory] and [lazy
 * tree]), and, where resident is not NULL, the directory and tree pages of
 * each sub-pool's first resident[s] granules: up to DP_TABLE_RANGES ranges
 * [out[i][0], out[i][1]), in order, disjoint, rounded to `page`; the count. */
#define DP_TABLE_RANGES (4 * DSMPOOL_MAX_NODES + 2)
unsigned dp_table_ranges(const dp_header *h, bool lazy, uint64_t page, const uint64_t *resident,
                         uint64_t out[][2]);

/* The region itself, below every layer that lives in it. A created region
 * is mapped and formatted but not published (attachers see no magic) until
 * dp_region_publish; dp_region_abandon removes a created one again. */
int dp_region_create(const dsmpool_config *cfg, uint64_t pool_id, struct dsmpool **out);
size_t dp_region_min_size(const dsmpool_config *cfg); /* 0 and a message: none fits */
/* A caller's config (of its header's size: struct_size) as this library's,
 * later fields defaulted; -EINVAL for one never initialised or newer. */
int dp_config_take(const dsmpool_config *cfg, dsmpool_config *full);
void dp_region_publish(struct dsmpool *pool);
void dp_region_abandon(struct dsmpool *pool);
int dp_region_attach(const char *name, struct dsmpool **out);
int dp_region_attach_fd(int fd, struct dsmpool **out);
int dp_region_unlink(struct dsmpool *pool);
void dp_region_free(struct dsmpool *pool); /* unmap, close, free the object */
/* A region's header as it is, from a file or a SysV segment, for tools and
 * the sweep: 0, or -errno (-ENODATA: too small to be one). */
int dp_region_peek_fd(int fd, dp_header *h);
int dp_region_peek_sysv(int shmid, dp_header *h);

/* layout.c [layout] on a mapped region, and why one is not ready (backing.c
 * [unborn]); the inspector takes it for its read-only view. */
int dp_region_view(struct dsmpool *pool, size_t real_size);

/* ---- what differs between backings (backing.c) ------------------------------
 * One function per backing for each operation, as PostgreSQL's dsm_impl_op
 * dispatches: nobody else switches on the backing. */

/* A create in progress (region.c), as the backing's make and undo see it. */
typedef struct dp_creating {
    struct dsmpool *p;
    void *va;         /* reservation / mapping */
    size_t va_len;
    bool mapped;
    bool named;       /* a name exists that undo must remove */
    bool sem_made;    /* we made the System V semaphore set */
    char tmp[4200];   /* POSIX: the object's path until it is linked to its name, or "" */
    char final[4200]; /* POSIX: the path of its name */
    /* an elastic pool (region.c [elastic]): mapped MAP_NORESERVE, and only the
     * tables and each sub-pool's first resident[s] granules reserved */
    bool noreserve;
    const dp_header *layout;
    const uint64_t *resident; /* per sub-pool: 2 MiB granules kept resident */
    bool anon_file;   /* ANON: the data is an unnamed shmem file (backing.c [strict overcommit]) */
} dp_creating;

enum { DP_LOCKFILE_CREATED, DP_LOCKFILE_ATTACHED, DP_LOCKFILE_CHILD };

typedef struct dp_backing_ops {
    const char *name;
    bool named;          /* attached by name; persists after its last process (life.c [last out]) */
    bool lock_reachable; /* another process can open its lock file (the inspector's judge) */
    bool provisional;    /* others may see it before it is published: it gets a provisional header */
    /* open, size, reserve and map at c->va (backing.c [made whole or not at all]) */
    int (*make)(dp_creating *c, const dsmpool_config *cfg, size_t len, size_t huge_sz);
    int (*give_name)(dp_creating *c);  /* give a made region its name (NULL: it has it, or none) */
    void (*undo)(dp_creating *c);      /* the backing's part of undoing a create */
    int (*open)(struct dsmpool *p, const char *name); /* attach by name: map and validate (NULL: none) */
    bool (*still_named)(struct dsmpool *p); /* the name still leads to this region (life.c J5) */
    int (*unlink)(struct dsmpool *p);  /* remove the name: 0 also when it is gone already */
    int (*creating)(struct dsmpool *p, bool *ours); /* its creation lock: 1 held, 0 free */
    void (*published)(struct dsmpool *p);           /* let the creation lock go */
    /* a description of the lock file of this process's own (backing.c [lock file]), for
     * live.c: how is DP_LOCKFILE_*; a child passes its inherited descriptor */
    int (*lock)(struct dsmpool *p, int how, int inherited, dp_live *out);
} dp_backing_ops;
const dp_backing_ops *dp_backing(dsmpool_backing b);

/* ---- inside the region layer, by file ------------------------------------------ */

#define DP_MIB (1ull << 20)
#define DP_GIB (1ull << 30)
static inline uint64_t dp_align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }
/* The data's granule: 2 MiB, or the huge page when larger (sub-pools and
 * prefault slices are whole granules). */
static inline size_t dp_data_gran(size_t page) { return page > 2 * DP_MIB ? page : 2 * DP_MIB; }

/* layout.c */
int dp_rg_validate_header(struct dsmpool *p, const dp_header *c, size_t real_size);
int dp_rg_build_view(struct dsmpool *p, const dp_header *c);

/* config.c */
int dp_rg_check_name(dsmpool_backing b, const char *name);
size_t dp_rg_huge_size(const dsmpool_config *cfg);

/* place.c: the plan of a new region's sub-pools */
typedef struct dp_plan {
    uint32_t nsub, nnode;           /* sub-pools; of which node sub-pools (the rest: interleave) */
    uint32_t nodes[DSMPOOL_MAX_NODES];
    uint64_t want[DSMPOOL_MAX_NODES]; /* explicit 2 MiB units per sub-pool, 0 = share */
    bool bind;                      /* real NUMA: mbind and pin */
} dp_plan;
int dp_plan_nodes(const dsmpool_config *cfg, dp_plan *pl);
int dp_plan_layout(const dsmpool_config *cfg, const dp_plan *pl, size_t len, size_t page, dp_layout_in *in,
                   dp_header *h);
size_t dp_plan_min_size(const dsmpool_config *cfg, const dp_plan *pl, size_t page);
int dp_plan_huge_problems(const dsmpool_config *cfg, const dp_plan *pl, const uint64_t *units, size_t hs,
                          size_t len);
int dp_plan_bind(struct dsmpool *p, const dp_header *h, const dp_plan *pl);
/* The same policies from a validated header (place.c [bound in every mapping]). */
int dp_region_bind(struct dsmpool *p, const dp_header *h);
/* resident: per sub-pool, the 2 MiB granules from its start to populate
 * (an elastic pool's); NULL: all of them */
int dp_plan_prefault(struct dsmpool *p, const dp_header *h, const dp_plan *pl, unsigned threads, size_t gran,
                     const uint64_t *resident, size_t *done);
int dp_plan_cgroup_check(const dsmpool_config *cfg, size_t len, size_t huge_sz, bool elastic);
int dp_plan_huge_message(int r, size_t huge_sz, size_t len);

/* region.c: attach, once the object is open (backing.c's open) */
int dp_region_attach_mapped(struct dsmpool *p, size_t real);
int dp_region_attach_fd_mapped(struct dsmpool *p); /* read the header, map aligned, attach */

#endif /* DP_REGION_H */
