/*
 * dp_top.h -- the top of the layers: named objects (names.c), recovery
 * (recover.c), stats and the checker (stats.c), the inspector's views
 * (inspect.c), the lifecycle (life.c) and joining and leaving (pool.c).
 *
 * Layer: top (pool/top), above areas. Within it: recovery below the
 * checker, the inspector and the lifecycle; pool.c on top of all.
 */
#ifndef DP_TOP_H
#define DP_TOP_H

#include "dp_area.h"

/* ---- named objects (names.c) ------------------------------------------------- */

void dp_names_layer_init(void);

/* ---- lifecycle (life.c): anchors, presence, the last process out --------- */

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
/* life.c, for sweep.c: an anchor's name, whether a directory's entry nm is
 * still the file fd, letting go of an anchor taken, a pool id from an
 * object's name, and the removal of every OS object named after a pool
 * (the count removed). */
void dp_life_anchor_name(uint64_t id, char *buf, size_t n);
bool dp_life_anchor_named(int dir, const char *nm, int fd);
void dp_life_anchor_drop(int fd);
bool dp_life_parse_id(const char *name, uint64_t *id, bool *is_anchor);
size_t dp_life_remove_objects(uint64_t id, int shmdir);

/* ---- the sweep, remove and the list (sweep.c) ------------------------------ */

/* Remove the pools of that name (backing: POSIX, System V, or -1 both) that
 * no live process holds (force: even if one does). */
int dp_life_remove(const char *name, bool force, int backing);

/* ---- the elastic pool (elastic.c) ------------------------------------------ */

void dp_elastic_layer_init(void);
void dp_elastic_stop(struct dsmpool *pool); /* this process's maintainer thread, if any */

/* ---- recovery and the checker (recover.c, stats.c): the top ------------- */

int dp_recover_all(struct dsmpool *pool); /* returns slots recovered */
void dp_recover_layer_init(void);
/* Every owner of pool frames marked in owned (segments, record blocks, what
 * areas hold): 0, or -EUCLEAN with why when two owners claim one frame
 * (recover.c: the leak sweep's, and the checker's). */
int dp_owned_maps(struct dsmpool *pool, uint64_t **owned, char *why, size_t n);

/* ==== inspection (inspect.c; dsmpool-inspect) ============================
 * A read-only view of a pool for tools: the region mapped PROT_READ, its
 * header validated as attach does (layout.c [layout], dp_region_view), no
 * slot taken, nothing written; snapshots copied out with every value read
 * from shared memory checked before it is used as an index, offset or
 * address. Appended as one block (merge-friendly). */

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

/* --list (sweep.c): every pool on the machine and its state, found as the
 * sweep finds them (sweep.c [sweep]) and judged by the same locks, without
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

#endif /* DP_TOP_H */
