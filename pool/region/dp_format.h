/*
 * dp_format.h -- the region's format: every table that lives in shared
 * memory, as the layers above lay their words out in it.
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
 *                                       the area and registry entry that hold it;
 *                                       page-aligned, a 4 KiB page per 2 MiB of
 *                                       data (layout.c [lazy directory])
 *   names_off      dp_name[names_cap]   the name table (names.c)
 *   res_off        uint64[res_count]    residency: a word per 2 MiB granule of
 *                                       data (resident or released, idle since)
 *   fill_off       uint64[proc_cap]     per slot, the bytes it is making
 *                                       resident now (resident.c [room first])
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
 *
 * Layer: region (pool/region). The region lays these tables out (region.c
 * dp_layout) and validates them on attach; the layers above own their
 * words: slots and records (ledger), segment descriptors (segments), names
 * (names.c), and what areas keep in their own segments (pool/area).
 */
#ifndef DP_FORMAT_H
#define DP_FORMAT_H

#include <stdint.h>

#include "dp_atomic.h"
#include "dp_palloc.h"
#include "dsmpool.h"

#define DP_MAGIC 0x31304c4f4f504d44ull          /* "DMPOOL01" */
#define DP_MAGIC_CREATING 0x3f3f4c4f4f504d44ull /* "DMPOOL??": being created (region.c [creation]) */
/* The region's format. Its first 24 bytes never move, whatever the format:
 * magic, format, header size, and the version number of the library that
 * made it (DSMPOOL_VERSION_NUMBER), so that a library can say which one
 * made a region it cannot read. Nor do the 16 after them: the region's
 * size and its pool id, so that the sweep and the list can tell which
 * anchor and fallback objects a region of another format owns (life.c
 * [other formats]). A change to any table's layout or to the meaning of
 * a word takes a new format: a library attaches only its own (layout.c
 * [layout]). Each format's change, and what an older library would do
 * wrong with it: docs/design.md, "Region formats". */
#define DP_FORMAT_VERSION 17u
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
#define DP_LOCK_PRESENT 4u  /* shared by every attached process (life.c [presence]) */
#define DP_LOCK_LIFE_X 5u   /* System V only: LIFE's exclusive holder (LIFE counts the shared ones) */
#define DP_LOCK_MAINTAIN 6u /* held by the one process running a dsmpool_maintain step (elastic.c) */
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
    dp_a64 inflight;           /* [atom] ownership changes in progress (proc.c [brackets]) */
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
 * 2^46) | order in bits 0-5. An exact block (palloc.c [exact blocks]; proc.c rule
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

/* ---- residency (the elastic pool; ledger resident.c) ------------------------ */

/* Residency word, one per 2 MiB granule of data, from the data's start
 * (sub-pool after sub-pool): [idle since:32][busy:16][unused:13][no tree:1][stray:1][released:1].
 *   released  the granule's pages were given back to the system (or are
 *             being: its trimmer holds it). Set only by a process that holds
 *             the whole granule in the allocator (a trimmer); cleared by one
 *             that holds some of it and has made all of it resident (a
 *             refill). So a granule any caller holds a byte of is resident
 *             (resident.c [resident when held]).
 *   busy      how many processes are populating the granule now (a refill,
 *             a give-back, dsmpool_prefault, a trimmer between its mark and
 *             its release), or opening a node of the allocator's two
 *             lowest levels there (resident.c [tree give-back]): a released
 *             granule that is busy may hold pages,
 *             which its populator either marks resident or gives back; a
 *             trimmer never marks a busy resident granule released
 *             (resident.c [busy]).
 *   stray     a released granule that may hold pages nobody is counted busy
 *             on (a give-back that could not claim it): the leak sweep's to
 *             give back; cleared with the pages, or by a resident mark.
 *   no tree   (with released only) the allocator's tree pages for the
 *             granule (its level-1 word and 16 leaves) are not resident,
 *             or hold only IDLE words: they read 0 without being read. Set
 *             by the creator of an elastic pool on its released granules
 *             whose tree pages it left out (layout.c [lazy tree]), and by a
 *             trim that gives the granule's page of leaves back (resident.c
 *             [tree give-back]); cleared once the pages are there (by the
 *             allocator's hook, or a refill: resident.c [lazy tree]).
 *   idle since  milliseconds after the header's epoch (0: not seen idle)
 *             at which a maintenance step first saw the granule wholly free;
 *             cleared by the allocation that takes any of it, so a granule
 *             stamped long enough ago is free and unused since (resident.c
 *             [idle stamps]).
 * Zero is "resident, not busy, not seen idle": a pool that is not elastic
 * starts so (its whole data is prefaulted as before). */
#define DP_RES_SHIFT 21u
#define DP_RES_RELEASED 1ull
#define DP_RES_STRAY 2ull
#define DP_RES_NOTREE 4ull
#define DP_RES_BUSY_ONE (1ull << 16)
#define DP_RES_BUSY_MASK (0xffffull << 16)
#define DP_RES_BUSY(w) ((unsigned)(((w) >> 16) & 0xffff))
#define DP_RES_STAMP(w) ((uint32_t)((w) >> 32))
#define DP_RES_WORD(released, stamp) (((uint64_t)(stamp) << 32) | ((released) ? DP_RES_RELEASED : 0))
_Static_assert(DP_RES_RELEASED == DP_PA_COLD, "the allocator reads the released bit as its cold hint");
_Static_assert(DP_RES_NOTREE == DP_PA_NOTREE, "the allocator reads the no-tree bit as its lazy tree's");

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
    uint64_t res_off, res_count;   /* the residency table: a word per 2 MiB of data */
    uint64_t fill_off;             /* per slot: bytes being populated (proc_cap words) */
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
    uint64_t shm_dev, shm_ino;      /* [imm] the /dev/shm the anchor was made in (life.c [anchor]) */
    dp_a64 sweep_needed;            /* release/acquire: times made due (a death inside an ownership change, a stray unit); 0: none */
    dp_a64 recover_deferred;        /* relaxed counter: recoveries left unfinished for later */
    dp_a64 lost_reclaimed;          /* relaxed counter: chunks the lost sweep gave back (area_recover.c [lost chunks]) */
    dp_a64 lost_due;                /* release/acquire: deaths that made an area's lost sweep due (area_recover.c [lost chunks]) */
    dp_a64 trim;                    /* relaxed counter: requests that caches give back (segment.c [short of memory]) */
    dp_a64 trim_quiet;              /* relaxed: no new request before this time (ns, monotonic) */
    dp_a64 fallbacks[DSMPOOL_MAX_NODES]; /* relaxed counters: wanted sub-pool s, got another */
    dp_a64 area_tags[256];          /* acq_rel: tags in use by areas (bit t-1 for tag t) */
    dp_a64 fallback_peak;           /* relaxed: high-water mark of bytes in OS segments (segment.c [spilling is visible]) */
    /* the elastic pool (resident.c, elastic.c) [imm] */
    uint32_t elastic;               /* reserved with MAP_NORESERVE (or SHM_NORESERVE), not all reserved */
    uint32_t idle_release_ms;       /* the policy releases what is idle this long; 0: never */
    uint64_t resident_min;          /* bytes the policy keeps resident */
    uint64_t warm_bytes;            /* free resident bytes the policy keeps ready */
    uint64_t epoch_ns;              /* base of the idle stamps, on dp_os_shared_now_ns's clock */
    uint32_t limits_unknown_ok;     /* make memory resident where the limits cannot be learned */
    uint32_t anon_file;             /* ANON data in an unnamed shmem file (vm.overcommit_memory = 2) */
    /* [atom] relaxed counters unless said */
    _Alignas(64) dp_a64 released_hint[DSMPOOL_MAX_NODES]; /* released granules per sub-pool: the
                                       allocator's hint (palloc.c [resident first]); a death between a
                                       state CAS and its count skews it, never a block */
    dp_a64 room_seq;                /* acq_rel: claims of room made (resident.c [room first]) */
    dp_a64 room_claimed;            /* release/acquire: bytes of every claim of room tried and every hugetlb
                                       populate, only ever added to (resident.c [room reuse]) */
    dp_a64 releases, released_total, release_ns;   /* blocks given back, their bytes, the time */
    dp_a64 refills_ahead, refilled_ahead, refill_ahead_ns;    /* dsmpool_prefault_free / maintain */
    dp_a64 refills_demand, refilled_demand, refill_demand_ns; /* the allocation that needed it */
    dp_a64 refill_failures;         /* populates that could not get the memory (-ENOMEM): a refill's, or the
                                       allocator's tree pages (resident.c [lazy tree]) */
    dp_a64 refill_given_back;       /* bytes a failed refill populated, given back (resident.c [give back]) */
    dp_a64 room_refusals;           /* room claims refused (resident.c [room first]) */
    dp_a64 maint_steps;             /* dsmpool_maintain steps that ran */
    dp_a64 maint_cursor;            /* where the next step's stamp scan starts (a granule index) */
    dp_a64 refills_warm_fit;        /* refills on demand while warm memory had a free run of the
                                       block's order (proc.c pool_resident; palloc.c [resident first]) */
} dp_header;
_Static_assert(offsetof(dp_header, version) == 8 && offsetof(dp_header, header_size) == 12 &&
                   offsetof(dp_header, lib_version) == 16 && offsetof(dp_header, region_size) == 24 &&
                   offsetof(dp_header, pool_id) == 32,
               "the header's first 40 bytes never move (DP_FORMAT_VERSION)");

#endif /* DP_FORMAT_H */
