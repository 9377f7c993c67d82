/*
 * dp_internal.h -- shared layout and process-local state of a pool.
 *
 * Region layout (all positions are offsets from the region's base; shared
 * memory never holds a pointer):
 *
 *   0              struct dp_header     magic, version, sizes, obtained
 *                                       backing/pages, the layout below
 *   proc_off       dp_proc[proc_cap]    process slots (pid + start time,
 *                                       segment attachment records)
 *   seg_off        dp_seg_desc[seg_cap] segment descriptors
 *   dir_off        uint64[dir_count]    span directory: for each 4 KiB of data,
 *                                       the area and registry entry that hold it
 *   sub[i].geom    per sub-pool: the allocator tree and per-CPU hint lines
 *   data_off       the data: sub-pool 0, 1, ... each a multiple of 2 MiB,
 *                  data_off 2 MiB aligned (so one huge page = one level-1
 *                  node of the allocator)
 *
 * Every offset in the header is recomputed by the attaching process from
 * the sizes and must match exactly (dp_layout), so an attach can trust the
 * layout only after checking it against the real mapping size.
 *
 * Field notes: [imm] immutable after init; [own] written only by the owner
 * (a slot's process); [atom] shared-atomic, ordering stated at each use.
 */
#ifndef DP_INTERNAL_H
#define DP_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dp_atomic.h"
#include "dp_inject.h"
#include "dp_palloc.h"
#include "dsmpool.h"

#define DP_MAGIC 0x31304c4f4f504d44ull          /* "DMPOOL01" */
#define DP_MAGIC_CREATING 0x3f3f4c4f4f504d44ull /* "DMPOOL??": being created (region.c rule 2) */
/* The region's format. Its first 24 bytes never move, whatever the format:
 * magic, format, header size, and the version number of the library that
 * made it (DSMPOOL_VERSION_NUMBER), so that a library can say which one
 * made a region it cannot read. Nor, from format 3 on, do the 16 after
 * them: the region's size and its pool id, so that the sweep and the list
 * can tell which anchor and fallback objects a region of another format
 * owns (life.c rule 7; format 2 had the pool id at byte 24). Format 10
 * moved presence and LIFE from the anchor in /dev/shm to the region's own
 * lock file (live.c rule 6), records the anchor's /dev/shm, and gave OS
 * fallback pointers a check in their offset's high bits (area.c, Fallback
 * pointers). Format 9 widened the area directory
 * word's class to 7 bits (87 size classes; its entry to 24). Format 8
 * made the area directory a word per 4 KiB (page-exact area blocks above
 * 4 KiB, which share 64 KiB).
 * Format 7 put the frames a block gave
 * back into its block word (exact segments and large blocks; an older
 * library would read such a word's offset wrong). Format 6 made the area directory a word
 * per 64 KiB (spans from 64 KiB); 5 changed the area directory word (a
 * 6-bit class for 60 size classes); 3 added the last; 2 had region_size
 * there. */
#define DP_FORMAT_VERSION 10u
#define DP_DIR_SHIFT 12u /* the span directory's granule: 4 KiB of data (a frame) a word */
#define DP_NAME_MAX 240

/* ---- relocatable offsets ------------------------------------------------ */

typedef uint64_t dp_off; /* offset from the region base; 0 = invalid */

/* ---- process slots ------------------------------------------------------- */

/* Slot state word: [pid:32][flags:8][unused:16][state:8]. Claimed and released
 * by one CAS each. The pid is for people (tools, messages): whether a slot's
 * process lives is decided by the liveness oracle alone (live.c), never by
 * the pid. LEAVING: the owner is detaching and clearing its records (they no
 * longer count); RECOVERING: a recoverer that holds the slot's liveness lock
 * is releasing what the dead owner held. */
enum { DP_SLOT_FREE = 0, DP_SLOT_LIVE = 1, DP_SLOT_RECOVERING = 2, DP_SLOT_LEAVING = 3 };
#define DP_SLOT_UNGUARDED 1u /* flag: the owner holds no liveness lock; never recovered */
#define DP_SLOT_STATE(w) ((unsigned)((w) & 0xff))
#define DP_SLOT_FLAGS(w) ((unsigned)(((w) >> 24) & 0xff))
#define DP_SLOT_PID(w) ((pid_t)((w) >> 32))
#define DP_SLOT_WORD(pid, flags, st) \
    (((uint64_t)(uint32_t)(pid) << 32) | ((uint64_t)((flags) & 0xff) << 24) | (st))

/* Liveness lock numbers (live.c): a byte of the lock file, or a semaphore. */
#define DP_LOCK_CREATE 0u   /* held by a creator until the region is published */
#define DP_LOCK_SWEEP 1u    /* held by the one process running the leak sweep */
#define DP_LOCK_NAMES 2u    /* held while the name table is searched or claimed (names.c) */
#define DP_LOCK_LIFE 3u     /* shared by joiners, exclusive by a last-out decision or a sweeper (life.c) */
#define DP_LOCK_PRESENT 4u  /* shared by every attached process (life.c rule 2) */
#define DP_LOCK_LIFE_X 5u   /* System V only: LIFE's exclusive holder (LIFE counts the shared ones) */
#define DP_LOCK_SLOT0 64u   /* slot i: DP_LOCK_SLOT0 + i */

/* Attachment record: [gen:32][rstate:2][index+1:30]; 0 = empty. */
enum { DP_REC_PENDING = 1, DP_REC_ACTIVE = 2, DP_REC_DETACHING = 3 };
#define DP_REC_INLINE 19
#define DP_REC_PER_BLOCK ((DP_FRAME_SIZE / 8) - 1)

typedef struct dp_proc {
    dp_a64 state;              /* [atom] see DP_SLOT_WORD */
    dp_a64 claims;             /* [owner] raised by each claimer right after its claim, never
                                  cleared: a later owner is told from an earlier one even with
                                  the same pid (names.c; pid namespaces) */
    dp_a64 overflow;           /* [atom] offset of the first overflow record block */
    dp_a64 inflight;           /* [atom] ownership changes in progress (proc.c rule 6) */
    dp_a64 opseq;              /* [atom] ownership changes begun and ended, ever */
    dp_a64 rec[DP_REC_INLINE]; /* [atom] attachment records (threads share a slot) */
} dp_proc;
_Static_assert(sizeof(dp_proc) == 192, "slot layout: three cache lines");

/* An overflow record block is one frame from sub-pool 0. */
typedef struct dp_recblk {
    dp_a64 next; /* [atom] offset of the next block, 0 = none */
    dp_a64 rec[DP_REC_PER_BLOCK];
} dp_recblk;
_Static_assert(sizeof(dp_recblk) == DP_FRAME_SIZE, "one frame");

/* ---- segment descriptors ------------------------------------------------- */

/* State word: [gen:32][count:29][pinned:1][st:2]. count is the reference
 * count when LIVE and the owner slot + 1 when INIT or DYING (so a dead
 * creator or destroyer can be recognised). One CAS changes it. */
enum { DP_SEG_FREE = 0, DP_SEG_INIT = 1, DP_SEG_LIVE = 2, DP_SEG_DYING = 3 };
#define DP_SEG_ST(w) ((unsigned)((w) & 3))
#define DP_SEG_PINNED(w) ((unsigned)(((w) >> 2) & 1))
#define DP_SEG_COUNT(w) ((uint32_t)(((w) >> 3) & 0x1fffffff))
#define DP_SEG_GEN(w) ((uint32_t)((w) >> 32))
#define DP_SEG_WORD(gen, count, pinned, st) \
    (((uint64_t)(gen) << 32) | ((uint64_t)(count) << 3) | ((uint64_t)(pinned) << 2) | (st))
#define DP_SEG_COUNT_MAX 0x1fffffffu

/* Block word: a pool block is its region offset (4 KiB aligned, below
 * 2^46) | order in bits 0-5. An exact block (palloc.c rule 7; proc.c rule
 * 9: a segment or a large area block) also has DP_BLOCK_EXACT and the
 * frames given back from its tail, a 22-bit code in bits 46-63 (high) and
 * 8-11 (low): exact up to order 23 (32 GiB), in units of 2^(order - 23)
 * frames above. Only an exact word is freed piece by piece; any other is
 * freed by one exact check of its order (a wrong word frees nothing). An
 * OS fallback segment is DP_BLOCK_FALLBACK. 0 = not yet set. The sub-pool
 * follows from the offset (sub-pools are contiguous). */
#define DP_BLOCK_FALLBACK (1ull << 6)
#define DP_BLOCK_MK(off, order) ((uint64_t)(off) | (uint64_t)(order))
#define DP_BLOCK_OFF(b) ((b) & 0x3ffffffff000ull)
#define DP_BLOCK_ORDER(b) ((unsigned)((b) & 63))
#define DP_BLOCK_EXACT (1ull << 7)
#define DP_BLOCK_TRIM_BITS 22u
static inline unsigned dp_block_trim_shift(unsigned order) {
    return order > DP_BLOCK_TRIM_BITS + 1 ? order - DP_BLOCK_TRIM_BITS - 1 : 0;
}
/* The word of an exact block of 2^order frames whose last `given` frames
 * went back (given a multiple of 1 << dp_block_trim_shift(order), its code
 * below 2^DP_BLOCK_TRIM_BITS). */
static inline uint64_t dp_block_mk_trimmed(uint64_t off, unsigned order, uint64_t given) {
    uint64_t code = given >> dp_block_trim_shift(order);
    return off | order | DP_BLOCK_EXACT | ((code & 15) << 8) | ((code >> 4) << 46);
}
/* The frames a block word holds; 0 for a word that cannot be a block
 * (order beyond any pool, or more given back than it had). */
static inline uint64_t dp_block_frames(uint64_t b) {
    unsigned order = DP_BLOCK_ORDER(b);
    if (order > 36) return 0;
    uint64_t code = ((b >> 8) & 15) | ((b >> 46) << 4), given = code << dp_block_trim_shift(order);
    if (!(b & DP_BLOCK_EXACT)) return code ? 0 : 1ull << order;
    return given >= (1ull << order) ? 0 : (1ull << order) - given;
}
#define DP_BLOCK_BYTES(b) (dp_block_frames(b) * DP_FRAME_SIZE)

typedef struct dp_seg_desc {
    dp_a64 state; /* [atom] see DP_SEG_WORD */
    dp_a64 block; /* [imm while LIVE] written by the creator in INIT */
    dp_a64 size;  /* [imm while LIVE] usable bytes */
    dp_a64 flags; /* [imm while LIVE] creation flags */
} dp_seg_desc;

#define DP_REC(gen, idx, st) (((uint64_t)(gen) << 32) | ((uint64_t)(st) << 30) | ((uint64_t)(idx) + 1))
#define DP_REC_ST(r) ((unsigned)(((r) >> 30) & 3))
#define DP_REC_IDX(r) ((uint64_t)((r) & 0x3fffffff) - 1)
#define DP_REC_GEN(r) ((uint32_t)((r) >> 32))
#define DP_HANDLE(gen, idx) (((uint64_t)(gen) << 32) | ((uint64_t)(idx) + 1))
#define DP_HANDLE_IDX(h) ((uint64_t)((h) & 0x3fffffff) - 1)
#define DP_HANDLE_GEN(h) ((uint32_t)((h) >> 32))
#define DP_SEG_MAX ((1u << 30) - 2)

/* ---- the name table (names.c) ------------------------------------------- */

/* State word: [gen:32][owner slot + 1:24][kind:4][st:4]. INIT: the owner
 * makes the object (and runs init); READY: handle names it. gen rises with
 * every claim, so a CAS never confuses two lives of one entry. */
enum { DP_NAME_FREE = 0, DP_NAME_INIT = 1, DP_NAME_READY = 2 };
enum { DP_NAME_SEG = 1, DP_NAME_AREA = 2 };
#define DP_NAME_WORD(gen, owner, kind, st) \
    (((uint64_t)(gen) << 32) | ((uint64_t)((owner) & 0xffffff) << 8) | ((uint64_t)((kind) & 15) << 4) | (st))
#define DP_NAME_ST(w) ((unsigned)((w) & 15))
#define DP_NAME_KIND(w) ((unsigned)(((w) >> 4) & 15))
#define DP_NAME_OWNER(w) ((uint32_t)(((w) >> 8) & 0xffffff))
#define DP_NAME_GEN(w) ((uint32_t)((w) >> 32))

typedef struct dp_name {
    dp_a64 state;  /* [atom] see DP_NAME_WORD */
    dp_a64 handle; /* [owner, before READY (release)] the object's handle */
    dp_a64 pid;    /* [names lock] the creator's pid, for people */
    dp_a64 size;   /* [owner, before READY] a segment's usable bytes */
    dp_a64 claim;  /* [names lock] the creator's slot claim (dp_proc.claims) */
    char name[88]; /* [names lock] NUL-terminated, written only while the entry is FREE */
} dp_name;
_Static_assert(sizeof(dp_name) == 128, "two cache lines");

/* ---- the header ---------------------------------------------------------- */

#define DP_NODE_INTERLEAVE 0xffffffffu /* the interleaved sub-pool's "node" */

typedef struct dp_sub {
    uint64_t data_off; /* [imm] region offset of frame 0 */
    uint32_t node;     /* [imm] NUMA node id, or DP_NODE_INTERLEAVE */
    uint32_t pad;
    dp_pa_geom geom;   /* [imm] */
} dp_sub;

typedef struct dp_header {
    dp_a64 magic;              /* [atom] written last by the creator (release) */
    uint32_t version;          /* [imm] */
    uint32_t header_size;      /* [imm] sizeof(dp_header) */
    uint32_t lib_version;      /* [imm] DSMPOOL_VERSION_NUMBER of the creator's library */
    uint32_t pad0;
    uint64_t region_size;      /* [imm] bytes mapped */
    uint64_t pool_id;          /* [imm] random: names OS fallback segments */
    /* what was obtained [imm] */
    uint32_t backing, huge_requested, huge_pages, huge_fallback, thp_advised, mode;
    uint64_t page_size, prefaulted_bytes, map_align;
    /* layout [imm] */
    uint64_t proc_off, proc_cap;
    uint64_t seg_off, seg_cap;
    uint64_t dir_off, dir_count; /* the span directory: one word per 4 KiB of data */
    uint64_t names_off, names_cap; /* the name table (names.c) */
    uint64_t meta_end;
    uint64_t data_off, data_size;
    uint32_t nsub, nhints;
    dp_sub sub[DSMPOOL_MAX_NODES];
    char name[DP_NAME_MAX + 1]; /* [imm] the creation name, for tools */
    /* shared counters and state [atom] */
    _Alignas(64) dp_a64 seg_cursor; /* relaxed: where the next descriptor search starts */
    dp_a64 fallback_created;        /* relaxed counter */
    dp_a64 procs_recovered;         /* relaxed counter */
    dp_a64 destroyed;               /* release/acquire: the name is gone */
    dp_a64 closed;                  /* release/acquire: the last process left cleanly (life.c) */
    uint64_t no_anchor;             /* [imm] created without an anchor: no OS fallback segments */
    uint64_t shm_dev, shm_ino;      /* [imm] the /dev/shm the anchor was made in (life.c rule 1) */
    dp_a64 sweep_needed;            /* release/acquire: a process died inside an ownership change */
    dp_a64 recover_deferred;        /* relaxed counter: recoveries left unfinished for later */
    dp_a64 lost_reclaimed;          /* relaxed counter: chunks the lost sweep gave back (area.c rule 11) */
    dp_a64 lost_due;                /* release/acquire: deaths that made an area's lost sweep due (area.c rule 11) */
    dp_a64 trim;                    /* relaxed counter: requests that caches give back (segment.c rule 9) */
    dp_a64 trim_quiet;              /* relaxed: no new request before this time (ns, monotonic) */
    dp_a64 fallbacks[DSMPOOL_MAX_NODES]; /* relaxed counters: wanted sub-pool s, got another */
    dp_a64 area_tags[256];          /* acq_rel: tags in use by areas (bit t-1 for tag t) */
    dp_a64 fallback_peak;           /* relaxed: high-water mark of bytes in OS segments (segment.c rule 10) */
} dp_header;
_Static_assert(offsetof(dp_header, version) == 8 && offsetof(dp_header, header_size) == 12 &&
                   offsetof(dp_header, lib_version) == 16 && offsetof(dp_header, region_size) == 24 &&
                   offsetof(dp_header, pool_id) == 32,
               "the header's first 40 bytes never move (DP_FORMAT_VERSION)");

/* ---- process-local ------------------------------------------------------- */

struct dsmpool_seg {
    uint64_t magic;         /* DP_SEGOBJ_MAGIC while attached */
    struct dsmpool *pool;
    dsmpool_handle handle;
    void *addr;
    size_t size;
    bool fallback;          /* addr is our own mapping of an OS segment */
    bool stale;             /* a fork()ed child could not take it over: gone */
    dp_a64 *rec;            /* our attachment record (in our slot) */
    struct dsmpool_seg *next, *prev; /* the pool's list of attached segments */
};
#define DP_SEGOBJ_MAGIC 0x6a624f6765536bull
#define DP_SEGOBJ_DEAD 0x646165644f626aull

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
    int shmdir;              /* the pool's /dev/shm directory (life.c rule 1), or -1: this
                                process sees another one and makes no OS fallback objects */
    bool present;            /* we hold DP_LOCK_PRESENT on live (life.c rule 2) */
    uint64_t pool_id;        /* the id a new region gets (creation), then geo.pool_id */
    dp_proc *procs;
    uint32_t nprocs;
    dp_seg_desc *segs;
    uint64_t nsegs;
    dp_a64 *dir;             /* span directory (area.c) */
    dp_name *names;          /* the name table (names.c), geo.names_cap entries */
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
    pid_t pid;
    dp_a32 fork_epoch;       /* dp_epoch() when the slot was taken (acquire/release) */
    pthread_mutex_t lock;    /* guards the process-local seg list and slot changes */
    pthread_mutex_t recover_lock; /* one recovery at a time in this process (live.c rule 4) */
    pthread_mutex_t lost_lock;    /* one lost-chunk sweep at a time in this process (recover.c) */
    dp_a64 *held;            /* a bit per slot whose liveness lock this process holds as a
                                recoverer: its own description never conflicts with it, so
                                dp_slot_alive must be told (live.c rule 4) */
    struct dsmpool_seg *segs_head;
    struct dsmpool *reg_next; /* registry of pools in this process */
    void (*fb_hook)(void *, size_t); /* dsmpool_set_fallback_hook (lock) */
    void *fb_arg;                    /* its argument (lock) */
};
#define DP_POOL_MAGIC 0x6c6f6f506d7364ull
#define DP_POOL_DEAD 0x646165446c6f6full

/* ---- error reporting (error.c) ------------------------------------------ */

int dp_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dp_clear_error(void);

/* objs.c: the objects handed to the caller are made and ended here, never
 * freed (a call on a detached one finds it dead; objs.c rules 1-4). */
enum { DP_OBJ_POOL, DP_OBJ_SEG, DP_OBJ_AREA, DP_OBJ_KINDS };
void *dp_obj_new(unsigned kind, size_t size); /* zeroed; NULL when out of memory */
void dp_obj_end(unsigned kind, void *obj);    /* writes 0 over the magic first */
void dp_objs_fork_lock(void);                 /* the ledger's atfork handlers */
/* Give the caller the first struct_size bytes of a full struct (its first
 * member is size_t struct_size, set to the bytes given); -EINVAL if tiny. */
int dp_copy_sized(void *out, size_t struct_size, void *full, size_t full_size);
void dp_objs_fork_unlock(void);
void dp_objs_fork_reset(void);

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

/* ---- the ledger (proc.c, live.c): slots, liveness, records, brackets --- */

/* Fork detection (proc.c rule 4): a value that changes in every child of a
 * fork of any kind, fork(), _Fork(), syscall(SYS_fork) and clone() included
 * (a MADV_WIPEONFORK page; the atfork handler where the kernel lacks it).
 * One load on the fast path. */
typedef struct dp_fork_page {
    _Atomic unsigned epoch; /* 0: this process was forked since it was last read */
} dp_fork_page;
extern dp_fork_page *dp_forkp;
unsigned dp_epoch_slow(void);
static inline unsigned dp_epoch(void) {
    unsigned e = dp_forkp ? atomic_load_explicit(&dp_forkp->epoch, memory_order_relaxed) : 0;
    return __builtin_expect(e != 0, 1) ? e : dp_epoch_slow();
}

/* Hooks: how a lower layer reaches what a higher one does (STYLE 13). */
void dp_ledger_set_reclaim(int (*fn)(struct dsmpool *pool)); /* recovery layer */
void dp_ledger_set_adopt(int (*fn)(struct dsmpool *pool));   /* segment layer; run top first */
/* life layer: a fork()ed child joins (life.c J3..J6) before it claims its
 * slot, and is joined (J8) after; leave undoes a join whose adoption failed */
void dp_ledger_set_join(int (*join)(struct dsmpool *pool), void (*joined)(struct dsmpool *pool),
                        void (*leave)(struct dsmpool *pool));
void dp_ledger_on_fork(void (*fn)(void));                    /* process-local locks to reset */
int dp_reclaim(struct dsmpool *pool); /* recover dead processes now; returns slots recovered */

void dp_registry_add(struct dsmpool *pool);
bool dp_registry_take(struct dsmpool *pool); /* remove if registered; false if not */
int dp_self(struct dsmpool *pool);    /* make sure this process holds a slot */
int dp_slot_claim(struct dsmpool *pool);
void dp_slot_release(struct dsmpool *pool);
static inline uint32_t dp_owner(const struct dsmpool *pool) { return pool->slot + 1; }

/* The liveness oracle (live.c). */
int dp_live_created(struct dsmpool *pool);  /* the creator opens/creates the lock */
int dp_live_attached(struct dsmpool *pool); /* an attacher gets a description of its own */
int dp_live_child(struct dsmpool *pool);    /* a fork()ed child: the same, drop the parent's */
void dp_live_close(struct dsmpool *pool);
bool dp_live_guarded(const struct dsmpool *pool);
int dp_live_take(struct dsmpool *pool, uint64_t lock);  /* 0, -EAGAIN (held elsewhere) */
void dp_live_give(struct dsmpool *pool, uint64_t lock);
int dp_live_held(struct dsmpool *pool, uint64_t lock);  /* 1 held elsewhere, 0 free */
void dp_live_destroy(struct dsmpool *pool); /* remove the SysV semaphore set */
/* Presence and LIFE (live.c rule 6) on a lock file description or set: the
 * pool's own (&pool->live), or one a sweeper opened for a region it found
 * (by path: a file; by key: System V). Waits poll for at most ms. */
int dp_live_of_path(const char *path, dp_live *l);
int dp_live_of_key(int32_t key, dp_live *l);
void dp_live_drop(dp_live *l); /* a sweeper's: LIFE let go, description closed */
int dp_live_life_share(dp_live *l, unsigned ms); /* 0, -EAGAIN (held exclusive for ms) */
void dp_live_life_unshare(dp_live *l);
int dp_live_life_excl(dp_live *l, unsigned ms);  /* 0, -EAGAIN (held for ms) */
void dp_live_life_release(dp_live *l);
int dp_live_present(dp_live *l);
void dp_live_absent(dp_live *l);
int dp_live_anyone_present(dp_live *l); /* by one that holds none: 1 yes (or cannot tell), 0 nobody */
int dp_live_life_held(dp_live *l);      /* 1 shared or exclusive by anyone (or cannot tell) */

/* Is slot's process alive? For judging only: true when it cannot be told
 * (unguarded slots, a process without a lock of its own), false for FREE. */
bool dp_slot_alive(struct dsmpool *pool, uint32_t slot);

/* Take a dead slot's liveness lock for recovery (false: alive or free), and
 * give it back. */
bool dp_slot_take_dead(struct dsmpool *pool, uint32_t slot);
void dp_slot_give_dead(struct dsmpool *pool, uint32_t slot);
int dp_ledger_open(struct dsmpool *pool);  /* process-local ledger state of a new attachment */
void dp_ledger_close(struct dsmpool *pool);

dp_a64 *dp_rec_add(struct dsmpool *pool, uint64_t rec);
/* The frame *link names, or, if none, a zeroed frame from the pool linked
 * there by CAS (a racing linker's wins); 0 when the pool has no frame. */
uint64_t dp_frame_link(struct dsmpool *pool, dp_a64 *link);
/* The same for a zeroed block of 2^order frames (its user frees it as such). */
uint64_t dp_block_link(struct dsmpool *pool, dp_a64 *link, unsigned order);
void dp_rec_clear(dp_a64 *rec);
void dp_slot_clear(struct dsmpool *pool, uint32_t slot, bool bracket); /* records and their blocks */
void dp_slot_records(struct dsmpool *pool, uint32_t slot,
                     void (*fn)(struct dsmpool *, dp_a64 *, void *), void *arg);
bool dp_block_ok(const struct dsmpool *pool, uint64_t off, uint64_t len);

/* Brackets (proc.c rule 6): every change of what the pool's structures say
 * is inside one, or done by a RECOVERING recoverer, or inside an area cache
 * operation (area.c); the checker and the leak sweep rely on it. */
void dp_inflight_begin(struct dsmpool *pool);
void dp_inflight_end(struct dsmpool *pool);
bool dp_brackets_quiesce(struct dsmpool *pool, uint64_t deadline_ns);

/* A quiet window (proc.c rule 7): a snapshot of every slot's state and
 * bracket counters; open says -EBUSY when a live process is inside a
 * bracket or a recovery runs, -EAGAIN when a dead process awaits recovery
 * or a leak sweep is due; holds says whether nothing moved since. */
typedef struct dp_quiet {
    uint64_t *w; /* 3 words per slot */
    uint32_t n;
    uint32_t self; /* our slot, or UINT32_MAX: its brackets are ours */
    uint64_t sweep; /* sweep_needed when it opened */
} dp_quiet;
int dp_quiet_open(struct dsmpool *pool, dp_quiet *q, bool sweeping); /* sweeping: the sweep's own */
bool dp_quiet_holds(struct dsmpool *pool, const dp_quiet *q);
void dp_quiet_close(dp_quiet *q);

/* Pool blocks: placement over the sub-pools (proc.c rule 8). A block word is
 * DP_BLOCK_MK(region offset, order); every block handed out is inside the
 * data. On -ENOMEM after a search blocked by open/close steps, the steps of
 * dead owners are finished first and the search runs again. */
int dp_pool_alloc(struct dsmpool *pool, unsigned order, uint64_t *block); /* local, then nearest */
int dp_pool_alloc_placed(struct dsmpool *pool, unsigned order, unsigned flags, uint64_t *block);
int dp_pool_free(struct dsmpool *pool, uint64_t block);
/* Proc.c rule 9: give back the tail of a block just allocated, keeping at
 * least keep frames (rounded up to what a block word can say). Returns the
 * block's new word (the old one when nothing went back). */
uint64_t dp_pool_trim(struct dsmpool *pool, uint64_t block, uint64_t keep);
/* Take back the tail of such a block up to want frames (rounded as above)
 * if it is free: the new word, or 0 (nothing changed). */
uint64_t dp_pool_grow(struct dsmpool *pool, uint64_t block, uint64_t want);
/* Finish the allocator steps of owners that are dead: for recovery of one
 * slot (whose lock the caller holds), or of every dead owner (slot == -1). */
unsigned dp_pool_finish_steps(struct dsmpool *pool, int64_t slot);
/* The allocator's view: a bit per allocated frame; strict: report broken
 * invariants, unfinished steps of dead owners and steps in flight. */
int dp_used_maps(struct dsmpool *pool, uint64_t **used, char *why, size_t n, bool strict);
uint64_t **dp_maps_new(struct dsmpool *pool);
void dp_maps_free(struct dsmpool *pool, uint64_t **maps);
typedef void (*dp_mark_fn)(void *arg, uint64_t off, uint64_t len, const char *what);
void dp_ledger_mark_owned(struct dsmpool *pool, dp_mark_fn mark, void *arg); /* record blocks */

/* ---- segments (segment.c) ----------------------------------------------- */

#define DP_SEG_AREA (1u << 30) /* internal flag: the segment is an area's control block */

/* A kind of segment whose contents must be released when it is destroyed
 * (an area's control block): the area layer registers what to do. */
void dp_seg_set_area_hook(void (*fn)(struct dsmpool *pool, void *ctl, uint64_t bytes,
                                     uint64_t aid, uint32_t owner_slot));
void dp_seg_layer_init(void);
/* Rule 9 of segment.c: the pool could not serve a block; caches give back,
 * then one more try (bounded wait). 0 with *block, or the allocator's error. */
int dp_seg_block_short(struct dsmpool *pool, unsigned order, unsigned place, uint64_t *block);
bool dp_seg_live(struct dsmpool *pool, dsmpool_handle h, uint64_t *blk, uint64_t *size);
bool dp_area_live(struct dsmpool *pool, dsmpool_handle h); /* an area that is not destroyed */
void dp_seg_set_trim_hook(void (*fn)(struct dsmpool *pool)); /* this thread's caches give back */
int dp_seg_create_internal(struct dsmpool *pool, size_t size, unsigned flags,
                           struct dsmpool_seg **out);
unsigned dp_seg_flags(struct dsmpool *pool, dsmpool_handle h);
/* An OS segment with no attachment: pinned, count 0, owned by the caller's
 * structure, which unpins it to destroy it. *addr is our mapping. */
int dp_seg_os_create(struct dsmpool *pool, size_t bytes, dsmpool_handle *h, void **addr);
/* segment.c rule 10: the OS segments this thread made in the current public
 * call, reported by dp_fallback_fire(r) once no lock, bracket or area
 * operation is held (r: the call's result; a failed call reports nothing). */
typedef struct dp_fb_note {
    struct dsmpool *pool;
    uint64_t bytes;
} dp_fb_note;
extern _Thread_local dp_fb_note dp_fb_pending;
void dp_fallback_fire_slow(int r);
static inline void dp_fallback_fire(int r) {
    if (__builtin_expect(dp_fb_pending.bytes != 0, 0)) dp_fallback_fire_slow(r);
}
uint64_t dp_seg_fallback_bytes(struct dsmpool *pool); /* bytes in OS segments now (a walk) */
int dp_seg_os_map(struct dsmpool *pool, dsmpool_handle h, void **addr, size_t *len);
void dp_seg_unpin_quiet(struct dsmpool *pool, dsmpool_handle h, uint32_t owner_slot);
uint64_t dp_seg_os_size(struct dsmpool *pool, dsmpool_handle h); /* 0 if not a live OS segment */
/* The area control block of descriptor idx, validated, or NULL. */
void *dp_seg_area_ctl(struct dsmpool *pool, uint64_t idx, uint64_t min_bytes);

/* false: a reference count could not be settled now (a live process is
 * attaching or detaching that segment); the slot's records stay, and the
 * next recovery goes on. */
bool dp_seg_recover_slot(struct dsmpool *pool, uint32_t slot);
bool dp_segset_add(struct dsmpool_seg *seg);
bool dp_segset_take(struct dsmpool_seg *seg);
bool dp_segset_has(struct dsmpool_seg *seg);
void dp_seg_unmap_all(struct dsmpool *pool, bool drop_refs);
void dp_fallback_name(const struct dsmpool *pool, uint64_t idx, uint32_t gen, char *buf,
                      size_t n);
void dp_seg_mark_owned(struct dsmpool *pool, dp_mark_fn mark, void *arg);
/* Segment states and reference counts against the records of every slot:
 * 0, -EBUSY (in progress) or -EUCLEAN with why. */
int dp_seg_verify(struct dsmpool *pool, char *why, size_t n);

/* ---- areas (area.c) ------------------------------------------------------ */

void dp_area_layer_init(void);
void dp_area_tag_free(struct dsmpool *pool, uint32_t tag);
void dp_area_sweep_tags(struct dsmpool *pool); /* inside the leak sweep's quiet window */
void dp_area_detach_pool(struct dsmpool *pool); /* this process's areas of the pool */
void dp_area_recover_slot(struct dsmpool *pool, uint32_t slot);
void dp_area_mark_owned(struct dsmpool *pool, dp_mark_fn mark, void *arg);
/* Cache operations in flight, as a snapshot (area.c rule 7). */
typedef struct dp_area_quiet {
    uint64_t *seq;
    size_t n, cap;
} dp_area_quiet;
int dp_area_quiet_open(struct dsmpool *pool, dp_area_quiet *q); /* -EBUSY: an operation runs */
bool dp_area_quiet_holds(struct dsmpool *pool, const dp_area_quiet *q);
void dp_area_quiet_close(dp_area_quiet *q);
/* Free lists, caches, bump ranges and span stacks: no chunk twice, every
 * link inside its area's spans. 0 or -EUCLEAN with why. The scratch (zero
 * at first) is kept between calls of one check and freed after. */
typedef struct dp_area_scratch {
    void *bits, *used;
} dp_area_scratch;
int dp_area_verify(struct dsmpool *pool, dp_area_scratch *sc, char *why, size_t n);
/* area.c rule 11: give back the chunks that deaths inside area operations
 * lost (it opens its own quiet windows: call it outside any); false: left
 * for the next sweep. *got counts what went back. */
bool dp_area_sweep_lost(struct dsmpool *pool, dp_area_scratch *sc, size_t *got);
void dp_area_scratch_free(dp_area_scratch *sc);

/* area.c: the pool's OS segments are about to go with its last process:
 * area entries in them go first (life.c rule 4). */
void dp_area_drop_os(struct dsmpool *pool);

/* ---- lifecycle (life.c): anchors, the last process out, the sweep -------- */

#define DP_ANCHOR_LIFE 0u     /* shared by joiners, exclusive for cleaners */
#define DP_ANCHOR_PRESENCE 1u /* shared by every attached process */
/* The anchor in this process's /dev/shm (present, its LIFE shared), and that
 * directory's descriptor and identity for the header: the fd, or -errno. */
int dp_life_anchor_create(uint64_t pool_id, unsigned mode, int *shmdir, uint64_t *dev, uint64_t *ino);
void dp_life_anchor_remove(int shmdir, uint64_t pool_id);
int dp_life_join(struct dsmpool *pool, bool creator); /* presence, LIFE shared; the anchor if home */
void dp_life_joined(struct dsmpool *pool);     /* LIFE released */
void dp_life_leave(struct dsmpool *pool);      /* after the slot is released */
void dp_life_layer_init(void);
/* Remove the pools of that name (backing: POSIX, System V, or -1 both) that
 * no live process holds (force: even if one does). */
int dp_life_remove(const char *name, bool force, int backing);

/* ---- recovery and the checker (recover.c, stats.c): the top ------------- */

int dp_recover_all(struct dsmpool *pool); /* returns slots recovered */
void dp_recover_layer_init(void);
/* Every owner of pool frames marked in owned (segments, record blocks, what
 * areas hold): 0, or -EUCLEAN with why when two owners claim one frame. */
int dp_owned_maps(struct dsmpool *pool, uint64_t **owned, char *why, size_t n);

/* ---- validation helpers ------------------------------------------------- */

static inline bool dp_range_ok(uint64_t off, uint64_t len, uint64_t size) {
    return off <= size && len <= size - off;
}

static inline void *dp_at(const struct dsmpool *pool, dp_off off) { return pool->base + off; }

/* ==== inspection (inspect.c; dsmpool-inspect) ============================
 * A read-only view of a pool for tools: the region mapped PROT_READ, its
 * header validated as attach does (region.c rule 1, dp_region_view), no
 * slot taken, nothing written; snapshots copied out with every value read
 * from shared memory checked before it is used as an index, offset or
 * address. Appended as one block (merge-friendly). */

int dp_region_view(struct dsmpool *pool, size_t real_size); /* region.c: rule 1 on a mapped region */
void dp_stats_fill(struct dsmpool *pool, dsmpool_stats *out); /* stats.c: reads only */

typedef struct dp_insp dp_insp; /* a read-only view (inspect.c) */

/* How a view was reached: by name, or through a process (--pid). */
int dp_inspect_open_name(const char *name, dp_insp **out);
/* Every pool that process pid maps (memfd through /proc/pid/fd, the others
 * through /proc/pid/map_files, or by name): views in *out (n of them);
 * *denied counts mappings that look like pools but may not be opened
 * (anonymous ones need CAP_SYS_ADMIN), with why in the last error. */
int dp_inspect_open_pid(pid_t pid, dp_insp ***out, size_t *n, size_t *denied);
void dp_inspect_close(dp_insp *in);

const dp_header *dp_inspect_header(const dp_insp *in); /* the validated copy */
const char *dp_inspect_how(const dp_insp *in);       /* "name /x", "pid 12 fd 5", ... */
typedef struct dp_insp_flags {
    bool closed, destroyed, sweep_due;
    bool liveness;  /* slots' liveness can be judged (their lock file or semaphores are reachable) */
} dp_insp_flags;
void dp_inspect_flags(dp_insp *in, dp_insp_flags *out);
void dp_inspect_stats(dp_insp *in, dsmpool_stats *out);

/* Slots that are not FREE. */
typedef struct dp_insp_proc {
    uint32_t slot;
    unsigned state;     /* DP_SLOT_*; 255: a state word no version writes */
    bool unguarded;     /* DP_SLOT_UNGUARDED */
    int32_t pid;        /* as the slot says (for people) */
    int alive;          /* 1 its liveness lock is held, 0 it is not (dead), -1 cannot tell */
    uint32_t records;   /* ACTIVE attachment records */
    uint32_t pending;   /* PENDING or DETACHING records */
    uint64_t inflight;  /* brackets open */
} dp_insp_proc;
int dp_inspect_procs(dp_insp *in, dp_insp_proc **out, size_t *n); /* *out: free() */

/* Descriptors that are not FREE. */
typedef struct dp_insp_seg {
    uint64_t index, handle;
    unsigned state;      /* DP_SEG_* */
    uint32_t refs;       /* LIVE: references */
    int64_t owner_slot;  /* INIT/DYING: the slot doing it; -1 */
    bool pinned, fallback, area, damaged; /* damaged: block word or size out of range */
    uint64_t size;       /* usable bytes */
    uint64_t offset;     /* pool block: region offset; 0 for a fallback */
    unsigned order;      /* pool block: 4 KiB << order */
    int sub;             /* pool block: its sub-pool; -1 */
    uint32_t flags;      /* creation flags (DSMPOOL_SEG_*) */
} dp_insp_seg;
int dp_inspect_segs(dp_insp *in, dp_insp_seg **out, size_t *n);

/* Areas: one per descriptor holding an area control block. */
#define DP_INSP_NCLS 87u /* area.c's classes (chunk_size says their sizes) */
typedef struct dp_insp_area {
    uint64_t seg_index, handle;
    unsigned state;      /* 1 live, 2 destroyed, 0 unknown */
    uint64_t flags, limit, held, lost;
    uint32_t tag;
    uint64_t spans[DP_INSP_NCLS];         /* live spans per class */
    uint64_t cached_chunks[DP_INSP_NCLS]; /* free chunks thread caches hold (lists + bump ranges) */
    uint32_t chunk_size[DP_INSP_NCLS];    /* bytes per chunk of each class */
    uint64_t large_blocks, large_bytes, fallback_entries, registry_pages;
    uint32_t caches;                      /* cache records in use */
    uint64_t cached_bytes;
    bool damaged;
    char why[96];
} dp_insp_area;
int dp_area_inspect(struct dsmpool *pool, uint64_t idx, dp_insp_area *out); /* area.c; -ENOENT: not an area */
int dp_inspect_areas(dp_insp *in, dp_insp_area **out, size_t *n);

/* Name table entries that are not FREE (names.c), validated like the ones
 * above: the name copied bounded and NUL-terminated, state and kind against
 * their enums, the object judged by the segment and area layers' checks. */
typedef struct dp_insp_name {
    uint32_t index;
    unsigned state;      /* DP_NAME_INIT or DP_NAME_READY */
    unsigned kind;       /* DP_NAME_SEG or DP_NAME_AREA */
    uint64_t handle, size, pid;
    int64_t owner_slot;  /* INIT: the creator's slot; -1 */
    bool object_live;    /* READY: its segment is LIVE in that generation / its area not destroyed */
    bool damaged;        /* a word no version writes, or a name without its NUL */
    char name[DSMPOOL_NAME_MAX + 1];
} dp_insp_name;
int dp_inspect_names(dp_insp *in, dp_insp_name **out, size_t *n); /* *out: free() */

/* --list (life.c): every pool on the machine and its state, found as the
 * sweep finds them (life.c rule 5) and judged by the same locks, without
 * taking any. */
enum { DP_LIST_FILE = 1, DP_LIST_SYSV = 2, DP_LIST_NO_REGION = 3 };
enum { DP_LIST_LIVE = 1, DP_LIST_DEAD, DP_LIST_CLOSED, DP_LIST_CREATING, DP_LIST_HALF,
       DP_LIST_OTHER_FORMAT /* a region of another format: its own library judges it */ };
typedef struct dp_list_entry {
    uint64_t id;            /* pool id (0: a System V segment without a header yet) */
    int kind;               /* DP_LIST_*: a file (POSIX shm, hugetlbfs), System V, or only an
                               anchor / fallback objects (an anonymous or memfd pool) */
    int state;              /* DP_LIST_LIVE ... */
    char name[DP_NAME_MAX + 1]; /* the creation name from the header ("" if none) */
    char path[4200];        /* a file's path */
    int32_t key;            /* System V */
    int shmid;
    bool anchor, present;   /* its anchor exists; a process holds presence on it */
    bool slots_held;        /* a slot's (or the creation) lock is held */
    uint64_t fallback_objects; /* its OS fallback segments in /dev/shm */
    uint32_t format, lib_version, header_size; /* DP_LIST_OTHER_FORMAT: its format, library (0: unknown)
                                                  and header size; id 0 unless its claim holds */
} dp_list_entry;
int dp_life_list(dp_list_entry **out, size_t *n); /* *out: free() */
/* ==== end of inspection ================================================== */

#endif /* DP_INTERNAL_H */
