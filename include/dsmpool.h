/*
 * dsmpool.h -- dynamic shared memory from one preallocated region.
 *
 * A pool is one shared mapping, created once (optionally in huge pages,
 * prefaulted), split into per-NUMA-node sub-pools and carved by a lock-free
 * page allocator into segments: DSM-like blocks that any process of the pool
 * attaches through a 64-bit handle. When the pool cannot serve a segment it
 * is created from the OS instead (unless DSMPOOL_SEG_NO_FALLBACK).
 *
 * Glossary
 *   region    the whole shared mapping: header, tables, data.
 *   sub-pool  the part of the data that one NUMA node's allocator manages.
 *   frame     4 KiB, the smallest block.
 *   block     a naturally aligned power-of-two run of frames.
 *   segment   a block (or an OS fallback mapping) with a handle, a reference
 *             count and a pin; the unit other processes attach.
 *   handle    names a segment in every process: slot index + generation, so
 *             a handle to a destroyed segment is refused with -ESTALE.
 *   slot      what every attached process holds in the header, with a lock
 *             that the kernel releases when the process dies;
 *             dsmpool_recover() releases what dead slots held.
 *
 * Errors
 *   Every int-returning call returns 0 or a negative errno value; no call
 *   aborts, prints or exits. dsmpool_strerror() names a code and
 *   dsmpool_last_error() gives this thread's detailed message for the last
 *   failure (what went wrong and, where there is one, what to do about it).
 *     -EINVAL   bad argument (size 0, NULL, unknown flag, bad handle format)
 *     -ENOMEM   memory is exhausted: neither the pool nor the OS fallback can
 *               serve a segment or an area allocation (or the fallback is
 *               off: DSMPOOL_SEG_NO_FALLBACK, DSMPOOL_AREA_NO_FALLBACK, a
 *               full /dev/shm), an area's limit, process-local memory, or
 *               huge pages unavailable at creation. Segments and areas give
 *               the same code for the same exhaustion.
 *     -ENOENT   no pool of that name, or no segment at that handle
 *     -EEXIST   a pool of that name already exists
 *     -ESTALE   the handle's segment was destroyed (its slot may be reused)
 *     -EAGAIN   dsmpool_attach(): the region is still being created, or being
 *               removed or cleaned up by another process; retry
 *     -EOWNERDEAD dsmpool_attach(): the pool was left half-built by a creator
 *               that died (dsmpool_remove() it, or create with replace_stale)
 *     -EPROTO   the region is not a compatible dsmpool (bad magic, version,
 *               layout, or a size that does not match the mapping)
 *     -ENOLCK   attach (or a fork()ed child's first call): this process
 *               cannot hold the pool's locks of its own -- the ones that say
 *               it is alive and present (below) -- so it is not let in: a
 *               memfd or anonymous pool where /proc/self/fd is missing, a
 *               System V pool's child in another IPC namespace
 *     -EXDEV    a segment (or area memory) that lives in an OS fallback
 *               segment, asked for by a process that sees another /dev/shm
 *               than the pool's (below)
 *     -ENOSPC   a fixed table is full (segment descriptors, process slots,
 *               names); creating a pool, no room
 *               for its files
 *     -EBUSY    dsmpool_check() could not get a quiet look (others kept working);
 *               dsmpool_remove(): a live process holds the pool
 *     -EALREADY dsmpool_seg_pin(): the segment is pinned already
 *     -EDEADLK  a named object's init opened its own name (it would wait for
 *               itself)
 *     -ENAMETOOLONG creating a POSIX pool: its file's path (the hugetlbfs
 *               mount and the name) would be longer than the library keeps
 *     -EOPNOTSUPP an elastic pool, dsmpool_trim(), dsmpool_prefault_free() or
 *               dsmpool_maintain() on a kernel without MADV_POPULATE_WRITE
 *               (before Linux 5.14): released memory could not be made
 *               resident again without risking a SIGBUS; dsmpool_trim() of a
 *               hugetlb pool that is not elastic (its pages reserved)
 *     -EUCLEAN  the pool's structures are damaged: from dsmpool_check() (the
 *               message says what and where), or from a call that met the
 *               damage; nothing outside the region is ever touched
 *     others    passed through from the OS call that failed (the message
 *               names the call)
 *
 * Threads and processes
 *   All calls are thread-safe. A dsmpool pointer stays valid in a fork()ed
 *   child: at the child's first call the library gives the child a slot of
 *   its own and takes a reference, in the child's name, on every segment the
 *   parent had attached through that pool (the inherited dsmpool_seg objects
 *   become the child's). Unrelated processes attach by name (POSIX, System V)
 *   or by a passed file descriptor (memfd). Every kind of fork is noticed,
 *   _Fork(), syscall(SYS_fork) and clone() included: the child never shares
 *   its parent's slot or caches.
 *
 * Crashes
 *   A process may die at any instruction. Its memory goes back when any
 *   process calls dsmpool_recover() (or when the library itself runs out of
 *   slots, caches or blocks); nothing of a live process is ever released.
 *   Whether a process lives, and whether any process is still in the pool
 *   (so that the last one out cleans up), is decided by locks the kernel
 *   drops at death, on the pool's own file or semaphores: an OFD lock on
 *   the region's file (a memfd made with it for an anonymous pool), or a
 *   SEM_UNDO semaphore of the pool's set for System V pools. Every process
 *   of the pool reaches them whatever its namespaces, so processes in
 *   other pid or mount namespaces, or hidden from /proc, are judged right;
 *   one that cannot hold them of its own gets -ENOLCK and is not let in
 *   (never counted out). A fork()ed child that has not called the library
 *   yet keeps its parent's lock: the parent is then recovered late, never
 *   early.
 *
 * OS fallback segments and /dev/shm
 *   A pool's OS objects (its anchor, fallback segments) live in the /dev/shm
 *   its creator saw, and the library reaches them through a descriptor of
 *   that directory: a fork()ed child keeps them wherever its mount
 *   namespace has moved it. A process that attaches from a namespace with
 *   another /dev/shm (another tmpfs there) takes part in the pool but
 *   makes and maps no OS fallback segment: -ENOMEM where the pool cannot
 *   serve, -EXDEV for one that exists; its attach says so in
 *   dsmpool_last_error(). If such a process is the last one out, the OS
 *   objects wait in the pool's /dev/shm for a dsmpool_sweep() there.
 */
#ifndef DSMPOOL_H
#define DSMPOOL_H

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DSMPOOL_EXPORT __attribute__((visibility("default")))
#else
#define DSMPOOL_EXPORT
#endif

/* On every call that returns 0 or -errno: a result dropped unread is a
 * warning where the compiler lets a cast to void say "meant" -- C23 and
 * C++17 ([[nodiscard]]) and clang (warn_unused_result). GCC before C23 has
 * only warn_unused_result, which no cast silences: nothing there. */
#if defined(__cplusplus) && __cplusplus >= 201703L
#define DSMPOOL_NODISCARD [[nodiscard]]
#elif !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ > 201710L
#define DSMPOOL_NODISCARD [[nodiscard]]
#elif defined(__clang__)
#define DSMPOOL_NODISCARD __attribute__((warn_unused_result))
#else
#define DSMPOOL_NODISCARD
#endif

/* Structs that grow. dsmpool_config, dsmpool_stats and dsmpool_area_stats
 * are allocated by the caller and will gain fields at their ends in later
 * versions; their first member, struct_size, says how big the caller's is.
 * dsmpool_config_init() and the two get_stats calls are inline wrappers
 * that pass sizeof as the caller's header has it, so a newer library fills
 * (and reads) only the fields an older program knows, and gives later
 * fields their defaults; the stats calls set struct_size to the bytes they
 * filled. A newer program on an older library works while it leaves the
 * options that library does not know as dsmpool_config_init() made them;
 * one it sets is refused (-EINVAL, "use a library at least as new as the
 * header"), as is a config dsmpool_config_init() never saw. Everything else is
 * opaque. Only dsmpool_ symbols are exported; the soname
 * (libdsmpool.so.0) changes when an exported call or a struct's existing
 * fields change incompatibly, never for fields added at an end.
 *
 * The version this header is of; dsmpool_version() and
 * dsmpool_version_number() say which library a program runs with (they can
 * differ when the shared library was upgraded under it). Within one major
 * version (the soname, libdsmpool.so.0) a newer library runs programs built
 * against an older header. */
#define DSMPOOL_VERSION_MAJOR 0
#define DSMPOOL_VERSION_MINOR 1
#define DSMPOOL_VERSION_PATCH 0
#define DSMPOOL_VERSION_STRING "0.1.0"
#define DSMPOOL_VERSION_NUMBER (DSMPOOL_VERSION_MAJOR * 10000 + DSMPOOL_VERSION_MINOR * 100 + DSMPOOL_VERSION_PATCH)

typedef struct dsmpool dsmpool;         /* a process's handle on a pool */
typedef struct dsmpool_seg dsmpool_seg; /* a process's attachment to a segment */
typedef uint64_t dsmpool_handle;        /* names a segment in every process; 0 is never valid */

/* The header's macros and inline code use no casts: it compiles clean as
 * C11 with -pedantic and as C++ with -Wold-style-cast and
 * -Wzero-as-null-pointer-constant (tests/header). */
#define DSMPOOL_HANDLE_INVALID UINT64_C(0)
#define DSMPOOL_PRIhandle "016" PRIx64 /* in a format string: "%" DSMPOOL_PRIhandle, no cast */

typedef enum {
    DSMPOOL_BACKING_ANON,  /* anonymous shared: inherited over fork, no name */
    DSMPOOL_BACKING_MEMFD, /* memfd: pass dsmpool_fd() to another process */
    DSMPOOL_BACKING_POSIX, /* shm_open name ("/x"), or a hugetlbfs file for huge pages */
    DSMPOOL_BACKING_SYSV   /* shmget key derived from the name ("x": no leading '/', which
                              is how dsmpool_attach() tells the two kinds apart) */
} dsmpool_backing;

typedef enum {
    DSMPOOL_HUGE_OFF,        /* base pages */
    DSMPOOL_HUGE_TRY,        /* hugetlb pages if available, else base pages (stats say so) */
    DSMPOOL_HUGE_ON,         /* hugetlb pages or fail with -ENOMEM and a message */
    DSMPOOL_HUGE_TRANSPARENT /* base-page shmem with madvise(MADV_HUGEPAGE); memory is
                                reserved only by the prefault (tmpfs cannot reserve huge
                                pages untouched): without it, a full /dev/shm or memory
                                limit shows later as SIGBUS */
} dsmpool_huge;

typedef enum {
    DSMPOOL_NUMA_AUTO, /* a sub-pool per NUMA node with memory (one on a one-node machine) */
    DSMPOOL_NUMA_OFF   /* one sub-pool, placed as the kernel likes */
} dsmpool_numa;

#define DSMPOOL_MAX_NODES 64
#define DSMPOOL_INTERLEAVE_NONE SIZE_MAX

typedef struct dsmpool_config {
    size_t struct_size;      /* set by dsmpool_config_init: this struct's size as the
                                caller's header has it (see "Structs that grow") */
    size_t size;             /* bytes in the region (header and tables included) */
    dsmpool_backing backing;
    const char *name;        /* POSIX name ("/x") or SysV key text ("x"); NULL for ANON/MEMFD */
    dsmpool_huge huge_pages;
    size_t huge_page_size;   /* 0: system default; else 2 MiB or 1 GiB */
    bool prefault;           /* populate every page at creation (default true) */
    unsigned mode;           /* permissions of a named region; default 0600 */
    /* --- more fields; 0 always means "the default" --- */
    unsigned prefault_threads; /* threads that populate; 0: online CPUs, at most 16 */
    size_t max_segments;     /* segment table capacity; 0: data / 16 KiB, from 1024 up to
                                262144 (a 4 GiB pool's) */
    unsigned max_procs;      /* process slots; 0: 1024 */
    size_t map_align;        /* virtual address alignment of the mapping, a power of two
                                from 2 MiB to 1 GiB; 0: 1 GiB for a pool in hugetlb pages
                                of 1 GiB or more (Linux shares the page tables of each
                                whole GiB of it among the processes that map it), else
                                2 MiB */
    /* NUMA: each node's sub-pool is bound to the node (mbind) before it is
     * prefaulted by threads running on that node's CPUs; an extra
     * interleaved sub-pool spreads its pages (4 KiB, or whole huge pages)
     * round-robin over the nodes, for structures every node reads. One
     * policy per sub-pool: the mapping is O(nodes) VMAs, whatever its size. */
    dsmpool_numa numa;
    unsigned nnodes;         /* 0: every node with memory; else the ids in nodes[] */
    unsigned nodes[DSMPOOL_MAX_NODES];
    size_t node_size[DSMPOOL_MAX_NODES]; /* data bytes per node sub-pool, in the order of
                                nodes[] (or of the machine's nodes); all 0: an even split;
                                multiples of 2 MiB (of the huge page size) */
    size_t interleave_size;  /* 0: 1/4 of the data when there are several nodes;
                                DSMPOOL_INTERLEAVE_NONE: no interleaved sub-pool */
    bool replace_stale;      /* a named pool that exists but that no live process holds
                                (every process died, or its creator died half-way) is
                                removed and created afresh; a pool with a live process
                                is never replaced (-EEXIST) */
    /* The elastic pool ("Residency" below). Any of these set, or a size beyond
     * the machine's memory, makes size a reservation: address space and tables,
     * which may exceed the memory or the cgroup's limit; only the tables and
     * resident_min are reserved, prefaulted and charged at creation. */
    size_t resident_min;     /* bytes kept resident: prefaulted at creation, never released
                                by dsmpool_maintain() (dsmpool_trim() may go below it) */
    unsigned idle_release_ms; /* dsmpool_maintain() gives back memory free and unused this
                                long; 0 (the default): never */
    size_t warm_bytes;       /* free resident bytes dsmpool_maintain() keeps ready (it
                                makes released memory resident ahead of need to keep them) */
    /* Memory is made resident (at creation, a refill, an OS fallback segment,
     * dsmpool_prefault) only after its bytes are held against what the
     * process may still charge: its memory cgroup's room and the system's.
     * Where a process of the pool cannot learn its cgroup's limits -- /proc
     * hidden, the hierarchy not mounted in its view, a cgroup namespace
     * whose mount shows another tree -- it refuses (-ENOMEM saying why),
     * since a limit it cannot see would be the OOM killer's. true: make the
     * memory resident anyway, judged on what can be read. */
    bool limits_unknown_ok;
} dsmpool_config;

/* ---- the pool ---------------------------------------------------------- */

/* Sensible defaults: 256 MiB, ANON, no huge pages, prefaulted, mode 0600. */
DSMPOOL_EXPORT void dsmpool_config_init_sized(dsmpool_config *cfg, size_t struct_size);
static inline void dsmpool_config_init(dsmpool_config *cfg) { dsmpool_config_init_sized(cfg, sizeof *cfg); }

/* Create a region as cfg says and attach to it. The size is rounded up to
 * the page size; data starts at the first 2 MiB boundary after the tables
 * and is a multiple of 2 MiB (at least 2 MiB). A pool's OS objects are named
 * after it: its anchor /dev/shm/dsmpool.<id> and its OS fallback segments
 * /dev/shm/dsmpool.<id>.*; names beginning "/dsmpool." are the library's.
 * A pool is not created bigger than what the process's memory (or hugetlb)
 * cgroup still lets it charge: -ENOMEM, naming the limit, rather than the
 * OOM killer or a SIGBUS during the prefault. A size too small for the
 * tables says the least one that fits (dsmpool_min_size). On success,
 * dsmpool_last_error() is "no error", or a note when the pool did not get the
 * pages asked for: HUGE_TRY fell back to 4 KiB pages (and why: no pages
 * reserved, a cgroup limit, ...), or HUGE_TRANSPARENT was given no huge
 * page at the prefault (and what setting to change). */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_create(const dsmpool_config *cfg, dsmpool **out);

/* The least cfg->size that dsmpool_create accepts for the rest of cfg
 * (sub-pools, node sizes, process slots, segments, huge page size; the
 * page is the huge page when huge pages are asked for, HUGE_TRY included):
 * the tables (header, process slots, segment descriptors, span directory,
 * allocator trees and per-CPU hints, up to the 2 MiB boundary where data
 * starts; they grow with the size: 0.6% of 1 GiB, 0.3% of 16 GiB, 0.25% of
 * 1 TiB; of an elastic pool's, the span directory is resident only for
 * its resident memory and the allocator tree's lower levels only for
 * memory it has used, about 1 KiB per 2 MiB; the rest, 14.5 MiB for 1 TiB,
 * from creation) plus 2 MiB of data per sub-pool; 4 MiB with the defaults
 * on one node. Pure computation: it creates nothing and checks no
 * huge-page reservation. 0 with a message
 * (dsmpool_last_error) for a configuration that no size fits. */
DSMPOOL_EXPORT size_t dsmpool_min_size(const dsmpool_config *cfg);

/* Attach to a pool by name: a POSIX name ("/x", looked up in /dev/shm and in
 * hugetlbfs mounts) or a SysV key text. The header is validated against the
 * real size of the mapping before anything in it is used: -EPROTO if not.
 * -EAGAIN: it is being created (or removed) right now; -EOWNERDEAD: its
 * creator died before finishing (never a retry that never ends). A complete
 * pool whose processes all died attaches, and their leftovers are recovered. */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_attach(const char *name, dsmpool **out);
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_attach_fd(int fd, dsmpool **out);  /* memfd; the fd is dup()ed */
DSMPOOL_EXPORT int dsmpool_fd(const dsmpool *pool);           /* -1 when none */

/* This process leaves: its segment attachments are detached (last reference
 * destroys, unless pinned), its slot is freed and the region unmapped. The
 * pool object is dead afterwards, and so are this process's segment and
 * area objects of the pool: any call on one of them returns -EINVAL (the
 * accessors NULL, 0 or false) and reads no freed memory, as does a call on
 * a segment or area object after its own detach. (Their memory is kept and
 * reused for new objects only after 64 more of the kind have ended.) The last
 * process to leave a pool also recovers what dead processes held and
 * removes every OS fallback segment, pinned ones too; an ANON or MEMFD pool
 * (or a destroyed one) leaves nothing behind, a named one keeps its name. */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_detach(dsmpool *pool);

/* Remove the region's name, then detach. Processes still attached go on
 * using the pool (pinned OS fallback segments can still be attached) until
 * they detach; the last one removes the rest. */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_destroy(dsmpool *pool);

/* Leave without trusting the region: for an embedder that throws away a
 * pool whose memory a crashed process may have written (PostgreSQL's crash
 * restart). This process's segment and area objects of the pool end (their
 * caches and references are not given back), the region is unmapped and the
 * pool's descriptors closed; nothing in the region is read or written. The
 * others see this process as dead (its liveness lock goes with its
 * descriptors); if it was the last, the memory of an ANON or MEMFD pool goes
 * with it, and the anchor waits for dsmpool_sweep(). The pool object is dead
 * afterwards, as after dsmpool_detach(). */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_abandon(dsmpool *pool);

/* Remove a named pool that no live process holds: its name, its OS fallback
 * segments, its anchor and System V semaphores (every process died, its
 * creator died half-way, or it was left closed). -EBUSY if a process holds
 * it or is attaching it, unless force (then processes still attached keep
 * their mappings, as with dsmpool_destroy). -ENOENT: no such pool; -EPROTO:
 * the name is not a dsmpool pool, or is one of another region format (an
 * older or newer library's: the message names it), whose liveness this
 * library cannot judge -- force removes it anyway, and its anchor and
 * fallback segments only if no process is present on the anchor. -EAGAIN:
 * the pool changed (was removed or replaced) while it was being removed. */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_remove(const char *name, bool force);

/* Remove what pools that no live process holds left behind, on this machine
 * (this /dev/shm, hugetlbfs mounts, System V segments): OS fallback
 * segments, anchors, and the regions of pools whose processes all died
 * (a named pool whose last process left cleanly stays). Never touches a
 * pool with a live process, nor a pool of another region format (an older
 * or newer library's; nor its anchor and fallback segments, where the
 * anchor has the region's owner): that is its own library's sweep's. Safe
 * from any process at any time; *removed (may be NULL) says how many
 * objects went. */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_sweep(size_t *removed);

/* Release what dead processes held: their segment references, half-done
 * allocator operations, area caches and entries they were filling. Safe to
 * call from any process at any time; also run automatically when the slot
 * table or an area's cache records are full. */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_recover(dsmpool *pool);

/* Walk every structure and prove free + used = total with no overlap, every
 * allocated block owned exactly once, every reference count equal to the
 * attachments recorded, no chunk on two free lists. Dead processes are
 * recovered first (their half-done work is not damage). Safe while other
 * processes run: a walk is believed only if nothing changed while it ran,
 * and repeated (for up to half a second) until one is. Returns 0, -EUCLEAN
 * (damage that is really there; the message says what and where) or -EBUSY
 * (others kept changing the pool: try again). */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_check(dsmpool *pool);

/* Populate this process's page tables for the memory of the region that is
 * resident, so that first touches do not fault (MADV_POPULATE_WRITE, touch
 * loop where missing). Memory that dsmpool_trim() or the maintenance step
 * released stays released (dsmpool_prefault_free() brings it back); bytes
 * that are not yet in memory (a pool created with prefault = false) are
 * first held against the room of the memory cgroup and the system, as a
 * refill is: -ENOMEM, saying which limit, where the room is not there. */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_prefault(dsmpool *pool);

/* ---- segments ---------------------------------------------------------- */

#define DSMPOOL_SEG_NO_FALLBACK (1u << 0) /* a flag bit: fail instead of using an OS segment */
/* Placement (default: the calling thread's node, then the nearest by
 * distance, then an OS segment). */
#define DSMPOOL_SEG_LOCAL_ONLY (1u << 1)   /* do not cross to another node */
#define DSMPOOL_SEG_INTERLEAVE (1u << 2)   /* from the interleaved sub-pool (if any) */
#define DSMPOOL_SEG_ON_NODE(n) ((1u << 3) | (((0u + (n)) & 0xffu) << 8)) /* prefer node n */
/* Round a segment above 1 MiB up to whole 2 MiB pages (it then shares no
 * huge page with another segment: placement and page moves act on it
 * alone). Without it a segment ends at the next 4 KiB. */
#define DSMPOOL_SEG_HUGE_ROUND (1u << 4)

/* Create a segment of at least size bytes (size rounded up to the 4 KiB page,
 * from the pool and from the OS alike; beyond 32 GiB, from the pool, to a
 * unit of size / 2^22) and attach to it (reference count 1): the pool takes
 * the power-of-two block that holds it and gives the rest back at once,
 * and takes exactly that back at the end (dsmpool_seg_size says what it
 * holds: more than the pages only in the rare case that another process's
 * allocator step was in the way of the give-back). The memory is
 * not zeroed when it comes from the pool. -ENOMEM when neither the pool nor
 * the OS fallback can serve it (as an area says); -ENOSPC when all
 * max_segments descriptors are in use. */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_seg_create(dsmpool *pool, size_t size, unsigned flags, dsmpool_seg **out);
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_seg_attach(dsmpool *pool, dsmpool_handle h, dsmpool_seg **out);
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_seg_detach(dsmpool_seg *seg); /* last reference destroys, unless pinned */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_seg_pin(dsmpool_seg *seg);    /* keep alive with no reference; -EALREADY if pinned */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_seg_unpin(dsmpool *pool, dsmpool_handle h); /* destroys if unreferenced */
DSMPOOL_EXPORT dsmpool_handle dsmpool_seg_handle(const dsmpool_seg *seg);
DSMPOOL_EXPORT void *dsmpool_seg_address(const dsmpool_seg *seg);
DSMPOOL_EXPORT size_t dsmpool_seg_size(const dsmpool_seg *seg); /* usable bytes (>= the size asked for) */
DSMPOOL_EXPORT bool dsmpool_seg_is_fallback(const dsmpool_seg *seg); /* served by the OS, not the pool */

/* ---- areas: relocatable allocation (DSA-like) -------------------------- */

/*
 * An area is a heap on top of the pool. alloc/free of any size, returning
 * relocatable pointers that every attached process converts to its own
 * address. Size classes from 16 B to 256 KiB (8 B steps to 64 B, 16 B
 * steps to 128 B, eight per doubling to 8 KiB, then four per doubling),
 * carved from spans of 36-64 KiB for chunks below 2 KiB, growing with the
 * class above (32 chunks or more, or as many as 2 MiB holds; 64 of a power
 * of two, up to 2 MiB -- one huge page, one allocator node -- from 32 KiB
 * chunks up); a span's chunks fill whole pages, no tail. A small area
 * costs little (a new area with a few allocations of one size up to 1 KiB
 * holds under 128 KiB of the pool, its control block included; each
 * further such size in use adds at most 64 KiB); larger requests, and mid sizes where whole
 * pages cost no more than the class (see Sizes below), get a dedicated
 * block exact to the page (its power of two, the rest given back at once).
 * Every thread keeps, per class, a private
 * cache in shared memory (so recovery can find it) refilled one span (64 x
 * 32 KiB) at a time: alloc and free of a cached chunk take no lock, make no
 * system call, cause no page fault and do no atomic read-modify-write on a
 * line another thread writes. An area has 256 such caches; any number of
 * further threads and processes use it at once through a shared path --
 * each chunk taken off, or pushed back onto, its span's stack by one CAS,
 * inside a short bracket of two atomic increments and decrements -- which is
 * slower under contention but never fails for lack of a cache (a thread
 * looks for a free cache again now and then). When the pool is full the
 * area continues in OS segments (unless DSMPOOL_AREA_NO_FALLBACK).
 *
 * Lifetime: an area lives while any process is attached; the last detach,
 * or dsmpool_area_destroy() from any process, returns everything (cached
 * chunks of every process included) to the pool at once. Afterwards calls on
 * it return -ESTALE; memory it had handed out is gone, as with free(). A
 * call already running in another thread or process when the area is
 * destroyed finishes first (destroy waits for it, at most 50 ms); if one is
 * still running then (its thread stopped), destroy gives nothing back and
 * the last detach does. The library never writes into, or hands out, memory
 * of an area after giving it back. Detaching or destroying while other
 * threads of the same process still use the area is a use-after-free.
 * dsmpool_detach() detaches the process's areas too.
 *
 * Sizes: up to 4 KiB, and every power of two up to 256 KiB (the hash join's
 * 32 KiB chunk, 8 KiB pages), are served from size classes (24, 32, 40 ..
 * 64 B, 80 .. 128 B, then eight per doubling to 8 KiB: 144, 160, 176 ...
 * 256, 288, 320 B ..., four above: 10, 12, 14, 16, 20 KiB ...; a size
 * loses at most 7 B, 15 B, an eighth or a quarter of itself): chunks cached per
 * thread (the fast path; its cost is in docs/results.md), whose spans hold
 * what the class once needed until every chunk of a span is free. Above 256 KiB an allocation
 * is a block of whole pages: the power of two at or above it is taken and
 * the rest given back to the pool at once. Mid sizes in between take such
 * a block too wherever whole pages waste no more than the class would
 * (from 16 KiB always, below that in bands), unless the area already holds
 * a free chunk of their class -- the pool shares those pages among all
 * sizes and areas, so memory follows the live bytes under churn -- a
 * slower path than a cached chunk; when the pool has no such block, or the area
 * holds 65536 blocks and spans, the class serves. DSMPOOL_AREA_MID_CHUNKS
 * keeps every mid size in its class: faster, and more memory under churn.
 *
 * Alignment and pointer arithmetic: every allocation is aligned to at least
 * 16 bytes, in every process (the pool is mapped at a 2 MiB boundary, OS
 * segments too), except those of 17 .. 24, 33 .. 40 and 49 .. 56 bytes,
 * which are aligned to 8 only:
 * PostgreSQL's MAXALIGN, what its dsa.c gives those sizes, but less than
 * malloc() gives. A type of 16-byte alignment (long double, __int128, an
 * SSE vector) placed in such an allocation needs
 * dsmpool_area_alloc_aligned(area, size, 16, ...), or a size rounded up to
 * 16. Precisely, an allocation is aligned to the largest power
 * of two dividing its usable size, at most 2 MiB (DSMPOOL_AREA_MAX_ALIGN):
 * a chunk sits at a multiple of its class size from the start of a span
 * aligned to a power of two (64 KiB to 2 MiB), so n bytes for a power of two
 * n are aligned to n, 100 bytes (class 112) only to 16; a block is aligned
 * to the power of two at or above its size, 2 MiB at most, and ends at the
 * next 4 KiB. dsmpool_area_alloc_aligned() asks for more. Inside one allocation a relocatable pointer is an integer
 * like an address: for p returned by an allocation and k below
 * dsmpool_area_usable_size(area, p), p + k names byte k (dsmpool_area_addr
 * converts it, dsmpool_area_ptr_of converts back), in the pool and in OS
 * segments alike; p + k for other k names nothing.
 *
 * Errors, besides the pool's: -ENOMEM when the area's limit or the memory
 * (pool and OS) is exhausted (nothing else changes); -EINVAL for a pointer
 * that is not the start of a live allocation of this area; -ESTALE for a pointer into an OS segment that this
 * process can no longer map (the pool was destroyed). OS segments need one
 * of 16383 area tags; an area created when none is left uses the pool only.
 *
 * Free checking: always on, at no measurable cost -- pointers of another
 * area (span directory lookup), pointers that are not the start of a chunk
 * or block, double frees of chunks (a freed chunk carries a tag, key ^
 * pointer with a random key per area, in its bytes 8..15; allocation clears
 * it; a free that finds it is refused with -EINVAL -- a correct program
 * cannot write the tag, not knowing the key) and of blocks (until the
 * area reuses the block's first page for a new block: a free of the old
 * pointer then frees the new block, as with malloc). With
 * DSMPOOL_AREA_CHECKED also never-allocated pointers of small chunks (one
 * atomic operation on a shared bitmap per alloc and per free).
 *
 * Stale pointers into OS segments: a pointer into an OS fallback segment
 * names its area, the area's registry entry that holds the segment, and
 * carries a check drawn from that segment (its handle, keyed by the
 * area's random key) in the offset bits the segment does not need. Once
 * the segment is given back (its span or block freed) and the entry holds
 * a new OS segment, the old pointer is refused as another area's is --
 * NULL from dsmpool_area_addr, -EINVAL from dsmpool_area_free, 0 from
 * dsmpool_area_usable_size, and nothing changes -- except with probability
 * 2^-(32 - n) for a new segment of at most 2^n bytes, n at least 16:
 * 2^-16 up to 64 KiB (the spans of chunks below 2 KiB), 2^-11 up to 2 MiB
 * (every span), 1/2 above 1 GiB; a segment above 2 GiB leaves no bits for
 * a check, and such a pointer is not detected. Pointers of another live
 * area are always refused (the area tags are exact). The check names the
 * segment, not the allocation: within a span still held, a freed chunk is
 * told by its free tag, as in the pool.
 */
typedef struct dsmpool_area dsmpool_area; /* a process's attachment to an area */
typedef uint64_t dsmpool_ptr;             /* relocatable pointer; 0 is the null value */

#define DSMPOOL_PTR_NULL UINT64_C(0)
#define DSMPOOL_PRIptr "016" PRIx64 /* in a format string: "%" DSMPOOL_PRIptr, no cast */

#define DSMPOOL_ALLOC_ZERO (1u << 0)       /* alloc flag: zeroed memory */
#define DSMPOOL_ALLOC_INTERLEAVE (1u << 1) /* alloc flag, > 256 KiB: from the interleaved sub-pool
                                              (bucket arrays every node reads) */
#define DSMPOOL_AREA_CHECKED (1u << 0)     /* create flag: detect every bad free */
#define DSMPOOL_AREA_NO_FALLBACK (1u << 1) /* create flag: never use OS segments */
#define DSMPOOL_AREA_MID_CHUNKS (1u << 2)  /* create flag: mid sizes from size classes (faster,
                                              more memory; see above) */

DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_area_create(dsmpool *pool, unsigned flags, dsmpool_area **out);
DSMPOOL_EXPORT dsmpool_handle dsmpool_area_handle(const dsmpool_area *area);
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_area_attach(dsmpool *pool, dsmpool_handle h, dsmpool_area **out);
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_area_alloc(dsmpool_area *area, size_t size, unsigned flags,
                                      dsmpool_ptr *out);
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_area_free(dsmpool_area *area, dsmpool_ptr p);
DSMPOOL_EXPORT void *dsmpool_area_addr(dsmpool_area *area, dsmpool_ptr p); /* local address; NULL for 0 */

/* An allocation of size bytes aligned to align in every process: a power of
 * two up to DSMPOOL_AREA_MAX_ALIGN (-EINVAL otherwise, and for size 0). It
 * is served as a plain allocation of the first class size at or above
 * max(size, align) that is a multiple of align, or of max(size, align)
 * above 256 KiB: a chunk, or a block (aligned to its power of two) that
 * keeps only the size's pages. Freed with dsmpool_area_free(). */
#define DSMPOOL_AREA_MAX_ALIGN (2u << 20) /* 2 MiB */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_area_alloc_aligned(dsmpool_area *area, size_t size, size_t align,
                                              unsigned flags, dsmpool_ptr *out);
/* Resize the allocation *p to size bytes. In place (*p unchanged) when
 * size fits its usable size -- growing within its class or block, or
 * shrinking, which never moves and gives nothing back -- and for a large
 * block in the pool also when the pages after it up to its power of two
 * are still free (it takes them back); otherwise it moves:
 * a new allocation (of the alignment every allocation gets, not of an
 * earlier dsmpool_area_alloc_aligned()), the old usable bytes copied, the
 * old one freed, *p set to the new pointer. Past its power of two a large
 * block always moves. On failure
 * (-ENOMEM) the old allocation and *p are unchanged. *p == 0 allocates, as
 * dsmpool_area_alloc; size 0 is -EINVAL (free it instead). flags:
 * DSMPOOL_ALLOC_ZERO zeroes the bytes from the old usable size up to size
 * (the area does not know the size first asked for: bytes below the old
 * usable size keep what they held); DSMPOOL_ALLOC_INTERLEAVE for the new
 * block. Any attached process may resize what another allocated. */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_area_realloc(dsmpool_area *area, dsmpool_ptr *p, size_t size, unsigned flags);
/* The bytes the allocation starting at p may use (its class or block size,
 * >= the size asked for); 0 when p is not the start of a live allocation
 * of this area. Live means not freed: a freed chunk is told by its free
 * tag; a never-allocated chunk of a span the area holds is told only with
 * DSMPOOL_AREA_CHECKED (as for dsmpool_area_free). */
DSMPOOL_EXPORT size_t dsmpool_area_usable_size(dsmpool_area *area, dsmpool_ptr p);
/* The relocatable pointer of the local address addr: exactly that byte, so
 * dsmpool_area_ptr_of(area, dsmpool_area_addr(area, p) + k) == p + k for k
 * below the usable size. 0 when addr is not inside a live allocation of
 * this area (same test as dsmpool_area_usable_size). Works for OS fallback
 * memory that this process has mapped (any address it got from
 * dsmpool_area_addr). The pool's memory costs a directory load; OS memory a
 * search of this process's mappings of the area's OS segments. */
DSMPOOL_EXPORT dsmpool_ptr dsmpool_area_ptr_of(dsmpool_area *area, const void *addr);

/* For hot loops (a hash probe converts a pointer per tuple): the pool's base
 * in this process, constant while it is attached, and an inline conversion.
 * A pointer into the pool is the offset from that base (bit 63 clear); one
 * into an OS fallback segment has bit 63 set and takes the function call
 * (which checks it: see "Stale pointers into OS segments" above). */
#define DSMPOOL_PTR_OS_BIT (1ull << 63)
DSMPOOL_EXPORT char *dsmpool_area_base(const dsmpool_area *area);
static inline void *dsmpool_area_addr_inline(dsmpool_area *area, char *base, dsmpool_ptr p) {
    if (__builtin_expect(!(p & DSMPOOL_PTR_OS_BIT), 1)) return p ? base + p : NULL;
    return dsmpool_area_addr(area, p);
}
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_area_detach(dsmpool_area *area);
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_area_destroy(dsmpool_area *area); /* returns everything to the pool at once */
/* Cap the memory the area holds (spans and large blocks, whatever is cached
 * or in use); 0 removes the cap. An allocation that would pass it fails with
 * -ENOMEM and changes nothing. Applies to every process of the area. */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_area_set_limit(dsmpool_area *area, size_t bytes);
/* Return this thread's cached chunks of this area to the shared spans (a
 * thread does it itself when it exits or the process detaches). */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_area_flush(dsmpool_area *area);

typedef struct dsmpool_area_stats {
    size_t struct_size;       /* set by dsmpool_area_get_stats: the bytes it filled */
    size_t held;              /* bytes of spans and large blocks the area holds */
    size_t limit;             /* 0: none */
    size_t spans;             /* spans of small classes (64 KiB .. 2 MiB each) */
    size_t large_blocks;      /* blocks of whole pages (> 256 KiB, and mid sizes) */
    size_t fallback_segments; /* of those, served by OS segments */
    unsigned caches;          /* thread caches held (all processes; at most 256, further
                                 threads use the shared path) */
    size_t registry_bytes;    /* the area's registry pages: 4 KiB per 128 spans or large blocks
                                 it held at once, kept until it is destroyed */
    /* Where held goes; held = in_use + cached when the area is quiet. */
    size_t bytes_in_use;      /* usable bytes of live allocations (class or block sizes) */
    size_t bytes_cached;      /* free chunks the area holds: thread caches (all processes)
                                 and spans' returned stacks; and any part of a span that no
                                 chunk of its class fits (none unless a span's trim was cut
                                 short: spans are sized so that their chunks fill them) */
    size_t bytes_os;          /* of held, bytes in OS fallback segments */
    size_t bytes_requested;   /* sizes asked for by live allocations: exact for large blocks;
                                 for chunks (whose size free() is not told) an
                                 estimate: their usable bytes in use times the ratio of bytes
                                 asked for to usable bytes over every chunk allocation the area
                                 made -- exact when every chunk request asks for a power of
                                 two (32 KiB chunks) or all share one ratio */
    size_t control_bytes;     /* the control block's segment and its cache record pages
                                 (16 KiB per 7 caches held at once), kept until destroyed;
                                 with registry_bytes, what the area costs beyond held */
} dsmpool_area_stats;

DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_area_get_stats_sized(dsmpool_area *area, dsmpool_area_stats *out,
                                               size_t struct_size);
DSMPOOL_NODISCARD static inline int dsmpool_area_get_stats(dsmpool_area *area, dsmpool_area_stats *out) {
    return dsmpool_area_get_stats_sized(area, out, sizeof *out);
}

/* ---- named objects -------------------------------------------------------- */

/* Find or create a segment or an area by name, so that unrelated processes
 * find what they share from the pool's name alone (as PostgreSQL's
 * GetNamedDSMSegment, DPDK's rte_memzone_lookup, Boost's find_or_construct).
 *
 * Exactly one caller creates: it makes the object and, for a segment, runs
 * init(addr, size, arg) on it (init may be NULL; it returns 0 or a negative
 * errno); *created says which caller it was. The others wait until init has
 * returned and then attach (reference count + 1). If init fails, the object
 * is destroyed, the name freed, and init's error returned to the creator (a
 * waiter then creates it itself). If the creator dies during init, the next
 * caller notices (the kernel's lock on its slot: the same oracle as
 * recovery) and creates the object afresh; what the dead one made is
 * recovered with its slot. A caller waits at most 30 s, then gets -EBUSY
 * naming the creator's pid (a creator stopped for that long);
 * DSMPOOL_NAMED_NOWAIT makes it -EAGAIN at once.
 *
 * A name lives as long as its object: when the segment's last reference
 * goes (unless pinned) or the area is destroyed, the name is free again and
 * the next open creates a new object. Names are 1..63 bytes of printable
 * ASCII; a pool holds DSMPOOL_NAMES_MAX at once (-ENOSPC beyond). A name in
 * use by the other kind of object: -EEXIST.
 *
 * Segments: size is the least size wanted; an existing segment smaller than
 * size is -EINVAL (its size in the message). size 0 only opens: -ENOENT if
 * the name does not exist. flags: DSMPOOL_SEG_* for creation, plus
 * DSMPOOL_NAMED_NOWAIT. Areas: flags are DSMPOOL_AREA_* for creation, plus
 * DSMPOOL_NAMED_NOWAIT, and DSMPOOL_NAMED_OPEN_ONLY to only open. */
#define DSMPOOL_NAMES_MAX 256
#define DSMPOOL_NAME_MAX 63
#define DSMPOOL_NAMED_NOWAIT (1u << 29)    /* do not wait for another caller's init */
#define DSMPOOL_NAMED_OPEN_ONLY (1u << 28) /* areas: -ENOENT rather than create */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_seg_open_named(dsmpool *pool, const char *name, size_t size, unsigned flags,
                                          int (*init)(void *addr, size_t size, void *arg), void *arg,
                                          dsmpool_seg **out, bool *created);
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_area_open_named(dsmpool *pool, const char *name, unsigned flags,
                                           dsmpool_area **out, bool *created);

/* ---- statistics -------------------------------------------------------- */

typedef struct dsmpool_subpool_stats {
    int node;               /* NUMA node; -1 for the interleaved sub-pool */
    size_t size;            /* bytes managed */
    size_t free;            /* bytes free, empty half-used blocks included */
    size_t largest_free;    /* largest block that one allocation can get now */
    uint64_t fallbacks;     /* allocations that wanted this node and got another */
} dsmpool_subpool_stats;

/* Counters are exact when the pool is quiet and approximate while others run. */
typedef struct dsmpool_stats {
    size_t struct_size;        /* set by dsmpool_get_stats: the bytes it filled */
    size_t region_size;        /* bytes mapped */
    size_t data_size;          /* bytes the page allocator manages */
    size_t page_size;          /* page size obtained: 4096, 2 MiB or 1 GiB */
    dsmpool_backing backing;
    dsmpool_huge huge_requested;
    bool huge_pages;           /* hugetlb pages obtained */
    bool huge_fallback;        /* HUGE_TRY got base pages instead */
    bool thp_advised;          /* MADV_HUGEPAGE was applied (HUGE_TRANSPARENT) */
    size_t prefaulted_bytes;   /* bytes populated at creation */
    size_t huge_mapped_bytes;  /* bytes this process maps with huge pages now (THP or
                                  hugetlb), read from /proc/self/smaps: the truth about
                                  HUGE_TRANSPARENT, which the kernel may ignore (shmem
                                  THP needs shmem_enabled, or huge= on the tmpfs mount) */
    unsigned nsubpools;
    dsmpool_subpool_stats subpool[DSMPOOL_MAX_NODES];
    size_t segments_live;      /* pool and fallback segments */
    size_t segments_capacity;
    size_t fallback_segments_live;
    uint64_t fallback_segments_created; /* since the pool was created */
    unsigned procs_attached;
    unsigned procs_capacity;
    uint64_t procs_recovered;  /* dead processes released by recovery */
    unsigned procs_unguarded;  /* always 0: a process without a liveness lock of its
                                  own is refused (-ENOLCK) */
    unsigned procs_recovering; /* dead processes whose recovery waits for a live one (it is
                                  attaching or detaching a segment they used); the next
                                  dsmpool_recover() goes on */
    uint64_t recoveries_deferred; /* times a recovery had to leave a slot for later */
    uint64_t lost_chunks_reclaimed; /* area chunks given back that dead processes were freeing
                                       or moving when they died */
    bool sweep_due;            /* a dead process left work for the leak sweep that has not run
                                  to the end yet (a live process was busy); the next
                                  dsmpool_recover() goes on */
    uint64_t cache_trims;      /* times the pool ran short and asked every area cache to give
                                  back before spilling to the OS or failing */
    size_t fallback_bytes;     /* bytes in OS fallback segments now (segments and areas'
                                  spans and blocks): what the pool could not serve */
    size_t fallback_bytes_peak; /* their high-water mark since the pool was created (as seen
                                  by the processes that made them) */
    /* Residency (below). Bytes are of the data, counted by 2 MiB granule from the
     * residency table: exact when the pool is quiet. */
    bool elastic;              /* created elastic (reserved, not all resident) */
    size_t resident_bytes;     /* data granules resident */
    size_t released_bytes;     /* data granules given back to the system (all free) */
    size_t warm_free_bytes;    /* free bytes in resident granules: what allocation finds
                                  without a refill */
    size_t resident_min;       /* the pool's settings, as created */
    size_t warm_bytes;
    unsigned idle_release_ms;
    uint64_t releases;         /* blocks given back (dsmpool_trim, dsmpool_maintain) */
    uint64_t released_total;   /* their bytes, since the pool was created */
    uint64_t release_ns;       /* time spent giving them back */
    uint64_t refills_ahead;    /* blocks made resident ahead of need (dsmpool_prefault_free,
                                  dsmpool_maintain's warm reserve) */
    uint64_t refilled_ahead;   /* their bytes */
    uint64_t refill_ahead_ns;  /* the time */
    uint64_t refills_on_demand; /* allocations that had to make their block resident first */
    uint64_t refilled_on_demand; /* their bytes */
    uint64_t refill_on_demand_ns; /* the time, paid by those allocations */
    uint64_t refill_failures;  /* refills that could not get the memory (-ENOMEM) */
    uint64_t maintain_steps;   /* dsmpool_maintain steps run */
    bool huge_release_to_system; /* hugetlb pool: released pages go back to the system now (the
                                  kernel's pool has surplus pages: nr_overcommit_hugepages);
                                  false: only to the kernel's hugetlb pool (persistent pages,
                                  free_hugepages), where other hugetlb users can take them */
    uint64_t refill_given_back; /* bytes that refills which failed had populated, given back */
    uint64_t room_refusals;    /* times memory was not made resident (a refill, an OS fallback
                                  segment, dsmpool_prefault) because the memory cgroup or the
                                  system had no room for it, or its limits could not be
                                  learned: -ENOMEM where the OOM killer would have been */
    uint64_t refills_while_warm_fit; /* refills on demand made while free resident memory near
                                  the block held a run of its size: the allocator's misses of
                                  resident memory (dsmpool(3), the elastic pool); looked for
                                  after each refill on demand, exact while nothing else runs */
} dsmpool_stats;

/* Spilling made visible: fn(arg, bytes) is called each time this process
 * makes an OS fallback segment of the pool -- for a segment
 * (dsmpool_seg_create, dsmpool_seg_open_named) or an area's span or block
 * -- with the bytes it holds, in the thread that made it, after it is made
 * and before the call that made it returns, with no library lock held and
 * outside every bracket and area operation (fn may call the library; it
 * should be quick, like a log line or a counter). One hook per pool object
 * in this process (a fork()ed child inherits it); a new one replaces it,
 * fn NULL removes it. */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_set_fallback_hook(dsmpool *pool, void (*fn)(void *arg, size_t bytes), void *arg);

DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_get_stats_sized(dsmpool *pool, dsmpool_stats *out, size_t struct_size);
DSMPOOL_NODISCARD static inline int dsmpool_get_stats(dsmpool *pool, dsmpool_stats *out) {
    return dsmpool_get_stats_sized(pool, out, sizeof *out);
}

/* Where memory really is: how many 4 KiB pages of [addr, addr+len) sit on
 * each node (counts[id] for ids < ncounts), from move_pages(2). Pages not
 * yet faulted are not counted. Returns the pages counted, or -errno. */
DSMPOOL_EXPORT long dsmpool_pages_per_node(const void *addr, size_t len, size_t *counts,
                                           unsigned ncounts);
DSMPOOL_EXPORT long dsmpool_seg_pages_per_node(const dsmpool_seg *seg, size_t *counts,
                                               unsigned ncounts);

/* ---- residency: the elastic pool --------------------------------------- */

/*
 * A pool's data is resident or given back to the system 2 MiB at a time (a
 * granule; the huge page with 1 GiB pages). A pool created elastic (see
 * dsmpool_config: resident_min, idle_release_ms, warm_bytes, or a size
 * beyond memory) starts with only resident_min resident; the rest is a
 * reservation, charged to nothing until it is used. Memory is handed out
 * resident, always: a block in a released granule is made resident before
 * its allocation returns (MADV_POPULATE_WRITE: a system call and page faults
 * on that allocation, counted in the stats as a refill on demand), and when
 * the memory cannot be had -- the memory cgroup's limit (held against its
 * room before populating: a populate beyond it would wake the OOM killer),
 * no huge page left, a full tmpfs -- the allocation fails with -ENOMEM (or
 * takes the OS fallback), never a SIGBUS or the OOM killer later. Allocation
 * prefers resident memory where it chooses among free 2 MiB and 32 MiB
 * blocks; the 32 KiB chunk path never looks at residency.
 *
 * Do not rely on the contents of memory handed out, released or not: as
 * with any allocator, a block may hold what its last user left (a release
 * that failed, or a trimmer that died before giving the pages back, leaves
 * them). Huge pages
 * given back go to the kernel's hugetlb pool: to the system as well only as
 * surplus pages (vm.nr_overcommit_hugepages, nr_hugepages below what is in
 * use); persistent ones (vm.nr_hugepages) stay reserved for hugetlb users
 * (dsmpool_stats.huge_release_to_system and dsmpool-inspect say which).
 *
 * All three calls work on every pool, elastic or not (but dsmpool_trim() of
 * a hugetlb pool created not elastic, other than ANON, is -EOPNOTSUPP: its
 * pages are reserved for its whole size, and a process attaching later would
 * reserve what was given back again), and are safe while
 * other processes allocate, free and die: a block is released only while the
 * trimmer holds it in the allocator (nobody else can hold it or be handed
 * it), and no allocation waits for a trim. They return 0 or -errno
 * (-EOPNOTSUPP: no MADV_POPULATE_WRITE in this kernel, so nothing released
 * could be made resident again safely).
 */

/* Give free memory beyond keep_bytes of free resident memory back to the
 * system, largest free blocks first (up to 32 MiB at a time), each sub-pool
 * keeping its share of keep_bytes (by its size). *released (may be NULL):
 * the bytes given back. Only wholly free granules go; partly used ones stay. */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_trim(dsmpool *pool, size_t keep_bytes, size_t *released);
/* Make up to bytes of released free memory resident again, each sub-pool its
 * share, on its node (its memory policy). *prefaulted (may be NULL): the
 * bytes made resident. -ENOMEM when the memory cannot be had (what was done
 * before is kept and counted). */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_prefault_free(dsmpool *pool, size_t bytes, size_t *prefaulted);
/* One bounded step of the elastic pool's policy: stamp what it finds free,
 * release what has been free and unused for idle_release_ms while more
 * than resident_min + warm_bytes is resident and more than warm_bytes is
 * free (at most 256 MiB a step), and make released memory resident again
 * while less than warm_bytes is free (at most 256 MiB a step). *next_ms (may
 * be NULL): when to call again (0: at once, work is left). A pool without a
 * policy (not elastic, or neither idle_release_ms nor warm_bytes) does
 * nothing and says 1000. One step runs at a time in a pool: a call while
 * another process's runs returns 0 at once. The embedder chooses who calls
 * it (a background worker; or the helper thread below). */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_maintain(dsmpool *pool, unsigned *next_ms);
/* A helper thread in this process that calls dsmpool_maintain() when it says,
 * at least every max_period_ms (0: 1000). Never started unless asked;
 * -EALREADY if this process runs one for the pool, -EOPNOTSUPP as for
 * dsmpool_maintain(). The thread's steps report no errors: an embedder that
 * wants them calls dsmpool_maintain() itself. dsmpool_detach() stops it;
 * a fork()ed child does not inherit it. */
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_maintainer_start(dsmpool *pool, unsigned max_period_ms);
DSMPOOL_NODISCARD DSMPOOL_EXPORT int dsmpool_maintainer_stop(dsmpool *pool);

/* ---- errors ------------------------------------------------------------ */

DSMPOOL_EXPORT const char *dsmpool_strerror(int err);  /* err is negative; never NULL */
DSMPOOL_EXPORT const char *dsmpool_last_error(void);   /* this thread's detailed message for the last failure */

DSMPOOL_EXPORT const char *dsmpool_backing_name(dsmpool_backing b);

/* ---- versions ------------------------------------------------------------ */

DSMPOOL_EXPORT const char *dsmpool_version(void); /* "0.1.0": the library running */
DSMPOOL_EXPORT int dsmpool_version_number(void);  /* major * 10000 + minor * 100 + patch */

#ifdef __cplusplus
}
#endif

#endif /* DSMPOOL_H */
