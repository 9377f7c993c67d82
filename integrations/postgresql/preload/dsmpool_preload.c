/*
 * dsmpool_preload.c -- serve a stock PostgreSQL server's posix DSM segments
 * from a dsmpool pool, with no rebuild: LD_PRELOAD=libdsmpool-preload.so.
 *
 * A stock server on Linux (dynamic_shared_memory_type = posix, the default)
 * makes, attaches and destroys its DSM segments through a few libc calls
 * that its binary imports (BIND_NOW, no static copies). This library defines
 * them; every call that is not one of PostgreSQL's DSM steps in a process of
 * the pool goes straight to libc.
 *
 * The call sequences served (dsm_impl_posix, src/backend/storage/ipc/dsm_impl.c):
 *   create   15:  shm_open(name, O_RDWR|O_CREAT|O_EXCL) -> signals blocked,
 *                 ftruncate(fd, n) in an EINTR loop -> posix_fallocate(fd, 0, n)
 *                 in an EINTR loop -> mmap(NULL, n, RW, MAP_SHARED, fd, 0) -> close
 *            16+: the same without the ftruncate (posix_fallocate grows the
 *                 file; 16+ also calls posix_fallocate to extend relations)
 *   attach   shm_open(name, O_RDWR) -> fstat -> mmap -> close
 *   detach   munmap(addr, n)
 *   destroy  munmap(addr, n) -> shm_unlink(name)
 * with name "/PostgreSQL.<u32 handle>".
 *
 * Rules
 *   [who] The pool is made only by the postmaster itself
 *      (IsPostmasterEnvironment && !IsUnderPostmaster, both exported by
 *      the postgres binary), at its first creation of a DSM name -- the
 *      control segment's, which is never served from the pool: the next
 *      start after a killed postmaster cleans up through it before any pool
 *      exists. initdb's bootstrap, single-user mode, the postmasters that
 *      pg_upgrade starts (IsBinaryUpgrade), psql, pg_ctl and a shell that
 *      inherits LD_PRELOAD never make one, and never load libdsmpool. Children get the
 *      pool by fork(); a failed creation means "no pool" for every child.
 *   [names] Each pool segment keeps its real name in /dev/shm: created
 *      O_EXCL by PostgreSQL's own shm_open, truncated to the segment's size
 *      with no data block (sparse), then made mode 0000. So PostgreSQL's
 *      name space (handles are chosen by O_EXCL), its cleanup after a killed
 *      postmaster (shm_unlink by name) and fstat's size stay true, two
 *      clusters on one /dev/shm never collide, and a process without the
 *      pool cannot open the name to map a zero-filled file (EACCES; PostgreSQL
 *      never runs as root). A process of the pool opens it O_PATH.
 *   [table] The pool's name table (in the pool, one generation's) maps a
 *      handle to its dsmpool segment, the file's inode and size; a live
 *      (published) entry is made before the creating posix_fallocate
 *      returns and removed before the file's name goes, so it always names
 *      a live file.
 *      64 + 5 x MaxBackends names (PostgreSQL's slot count) fit twice over,
 *      open addressing from the handle (name_get). An entry for a handle
 *      being created again (its name removed behind the pool's back) is
 *      replaced and its segment unpinned. An entry is reserved (BUSY) by
 *      the creating shm_open before its name exists, given the file's inode
 *      once it does, and published (LIVE) with the segment by the
 *      posix_fallocate; a creation that makes no file, or that PostgreSQL
 *      serves itself or gives up (its close), drops it. So a process killed
 *      in a creation after its fstat leaves an entry that names its file
 *      ([orphans]). Only the process that made the reservation uses it: a
 *      child forked meanwhile does not drop or publish it (its close, its
 *      posix_fallocate and its mmap of its copy of the fd are libc's:
 *      PostgreSQL never forks inside dsm_create), and a process that
 *      leaves the pool (dsm_detach_all) forgets it and its fds' segments
 *      (they go with the pool). A shm_open with O_CREAT but not O_EXCL
 *      (not PostgreSQL's: the file may be another's) is passed through,
 *      its segment PostgreSQL's own, in the postmaster too.
 *   [orphans] A process killed inside dsm_create, after its shm_open and
 *      before the registration in the control segment, leaves a name that
 *      PostgreSQL never removes (stock leaves the file, data and all). The
 *      generation's end removes every name its table still holds whose file
 *      is still the one entered (names_sweep). What is left: a name whose
 *      creator was killed between the shm_open's system call and its fstat
 *      (an empty file: no inode entered, and the name may be another's), a
 *      creation past a full name or fd table, and a killed creation that
 *      PostgreSQL was serving itself (the pool refused it), as stock
 *      leaves it.
 *   [generation] When the postmaster removes its control segment (shutdown,
 *      and every crash restart) the whole pool goes: the names its table
 *      still holds removed ([orphans]: read and checked against the files,
 *      never trusted), its memory punched out of the memfd, the
 *      postmaster's view dropped without the allocator reading the region
 *      (dsmpool_abandon: nothing a crashed backend wrote is trusted), its
 *      anchor removed by dsmpool_sweep -- which removes, as it always does,
 *      whatever any pool on the machine that no live process holds left --
 *      and the next control segment makes a new pool. A control segment
 *      PostgreSQL found corrupt is left, not removed: the postmaster's next
 *      creation (always a control segment) ends the generation then. A
 *      child that detaches the control segment (dsm_detach_all: the
 *      syslogger, which survives crash restarts, and background workers
 *      without shared memory) drops the pool too, so no surviving child of
 *      the postmaster keeps an old pool mapped (a process a backend forks
 *      without exec keeps it until it exits: its memory punched out, its
 *      own writes there allocate again).
 *   [stock] With LD_PRELOAD alone: 4 KiB pages, no NUMA binding, nothing
 *      prefaulted, no thread and no helper process; an elastic pool, whose
 *      granules go back to the system when a segment's destroy frees them,
 *      as stock's memory goes when its file goes. Where the pool cannot
 *      serve (full, or its memory cgroup has no room) the segment is
 *      PostgreSQL's own, in /dev/shm, as without the library.
 *   [settings] The extension (integrations/postgresql/extension) writes
 *      state.settings in the postmaster's _PG_init, before the control
 *      segment: each generation's pool is made with them. Huge pages only
 *      where the kernel's huge page pool can still give the whole pool
 *      (huge_fits), or, for a reservation beyond this machine's memory
 *      (dsmpool.size above MemTotal: it can never be wholly resident, and
 *      takes huge pages as it makes memory resident; a refill that finds
 *      none refuses its segment, which PostgreSQL then makes its own way),
 *      its tables, resident_min, warm and the default pool's 2 GB,
 *      then DSMPOOL_HUGE_TRY: libdsmpool holds what it makes resident
 *      against the hugetlb cgroup and falls back to 4 KiB pages where what
 *      it makes resident at creation (its tables, resident_min) cannot be
 *      had in huge pages.
 *      Why the pages fell back stays in state.note for the extension to log.
 *   [maintained] With idle_release_ms set and the extension's maintainer
 *      running (it claims DSMPOOL_PRELOAD_CLAIM_MAINTAINER each generation),
 *      a destroy does not trim: the maintainer gives back what stayed free
 *      that long (dsmpool_maintain). Without a maintainer, destroys trim.
 *   [counts] Every process of the generation counts the segments it
 *      served and refused in the name table's header (relaxed atomics); the
 *      first refusal's size and libdsmpool's message are written once, by
 *      the winner of a CAS. Nothing is logged where the refusal happens
 *      (inside posix_fallocate): the extension's background worker reads the
 *      counts and logs the first refusal once per generation.
 *   [provider] On a server with PostgreSQL's DSM provider API
 *      (RegisterDsmProvider) the extension dlopens this library, without
 *      LD_PRELOAD, and is the provider: state.provider is set, the
 *      generation is the postmaster's gen_begin to the next gen_begin or
 *      gen_end (the extension's shmem_startup_hook and on_shmem_exit), and
 *      segments come through the seg_* calls, by the pool's own handles,
 *      with no name in /dev/shm: PostgreSQL keeps the handle in its control
 *      segment. The interposed calls never serve then, even preloaded. A
 *      segment is pinned while PostgreSQL's control item lives, as [table]'s
 *      are; this process's mappings are in maps (by address, for detach).
 *      The counts and claims are the name table's header, as below. Under
 *      EXEC_BACKEND children inherit no pool: every seg_* call is -ENOENT,
 *      and PostgreSQL makes the segment the usual way.
 *   [window] The extension reaches the pool only through
 *      dsmpool_preload_get_ops() (a versioned table of calls on this
 *      process's pool, read at each call, so nobody holds an old
 *      generation's pool) and dsmpool_preload_get_state(); those calls are
 *      ordinary code, never inside an interposed call.
 *   [pass-through] A call that is not a DSM step of a process of the pool
 *      costs a few compares before libc's: no lock, no system call, errno
 *      untouched. mmap, munmap and close -- which allocators call, a
 *      preloaded jemalloc even before any constructor -- never allocate,
 *      log or resolve a symbol; before the constructor has run they are
 *      raw system calls. Serving calls (the creating posix_fallocate, the
 *      attaching shm_open, shm_unlink) call libdsmpool, which allocates its
 *      process-local segment objects: PostgreSQL's backends make them from
 *      ordinary code, never inside malloc or a signal handler. The
 *      postmaster's two (its control segment's creation, which makes the
 *      pool, and its removal, which ends the generation) run inside its
 *      SIGCHLD handler at a crash restart on 15 (16 moved that work out of
 *      handlers), as PostgreSQL's own reinitialization does there: 15's
 *      postmaster unblocks signals only around its select(), so the
 *      handler never interrupts an allocation or a lock. libdsmpool is
 *      loaded once: a failed load is not retried at each restart, and
 *      dlerror's words for it (libdsmpool.so.0, or a library it needs --
 *      libnuma.so.1 -- missing) are the note the extension logs.
 *
 * Threads: PostgreSQL's processes run one thread; the tables here are
 * process-local and unlocked. In a program that is not a postgres server
 * the library never serves, so threads there only pass through.
 *
 * Crash bound: a backend that dies anywhere makes the postmaster restart,
 * which throws the generation away ([generation]). The postmaster dying
 * leaves the pool to its last child (its memfd goes with the last process)
 * and sparse names that the next start removes, as stock's.
 *
 * Ordering: the name table's key words (name_reserve, name_publish) and its header's counts
 * (note_refusal: first_ready publishes first_why) are the shared words this
 * file writes.
 */
/* The names libc exports, not the redirections _FILE_OFFSET_BITS=64 makes
 * (posix_fallocate -> posix_fallocate64): on 64-bit they are one function,
 * and both names are defined below. */
#undef _FILE_OFFSET_BITS
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dsmpool.h"
#include "dsmpool_preload.h"

#define EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- libc, reached without recursion ---------------------------------- */

static int (*real_shm_open)(const char *, int, mode_t);
static int (*real_shm_unlink)(const char *);
static int (*real_posix_fallocate)(int, off_t, off_t);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static int (*real_munmap)(void *, size_t);
static int (*real_close)(int);

static void *pass_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off) {
    if (likely(real_mmap != NULL)) return real_mmap(a, n, prot, flags, fd, off);
    return (void *)syscall(SYS_mmap, a, n, prot, flags, fd, off);
}
static int pass_munmap(void *a, size_t n) {
    return likely(real_munmap != NULL) ? real_munmap(a, n) : (int)syscall(SYS_munmap, a, n);
}
static int pass_close(int fd) {
    return likely(real_close != NULL) ? real_close(fd) : (int)syscall(SYS_close, fd);
}
/* shm_open before the constructor: glibc's, name checks included */
static int own_shm_open(const char *name, int oflag, mode_t mode) {
    char path[NAME_MAX + 16];
    while (*name == '/') name++;
    size_t n = strlen(name);
    if (n == 0 || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        errno = EINVAL;
        return -1;
    }
    if (n > NAME_MAX + 4) { /* glibc's buffer; 256..259: the kernel's ENAMETOOLONG */
        errno = EINVAL;
        return -1;
    }
    memcpy(path, "/dev/shm/", 9);
    memcpy(path + 9, name, n + 1);
    return (int)syscall(SYS_openat, AT_FDCWD, path, oflag | O_NOFOLLOW | O_CLOEXEC, mode);
}
static int pass_shm_open(const char *name, int oflag, mode_t mode) {
    return likely(real_shm_open != NULL) ? real_shm_open(name, oflag, mode) : own_shm_open(name, oflag, mode);
}
static int pass_shm_unlink(const char *name) {
    if (likely(real_shm_unlink != NULL)) return real_shm_unlink(name);
    char path[NAME_MAX + 16];
    while (*name == '/') name++;
    size_t n = strlen(name);
    if (n == 0 || strchr(name, '/') || n > NAME_MAX + 4) { /* glibc: EINVAL, given as ENOENT */
        errno = ENOENT;
        return -1;
    }
    memcpy(path, "/dev/shm/", 9);
    memcpy(path + 9, name, n + 1);
    return (int)syscall(SYS_unlinkat, AT_FDCWD, path, 0);
}
static int pass_posix_fallocate(int fd, off_t off, off_t len) {
    if (likely(real_posix_fallocate != NULL)) return real_posix_fallocate(fd, off, len);
    int e = errno;
    int r = syscall(SYS_fallocate, fd, 0, off, len) == 0 ? 0 : errno;
    errno = e;
    return r;
}

/* ---- PostgreSQL's globals (NULL in any other program) ------------------- */

static const bool *pg_is_pm_env;    /* IsPostmasterEnvironment */
static const bool *pg_is_under_pm;  /* IsUnderPostmaster */
static const bool *pg_is_binary_upgrade; /* IsBinaryUpgrade: pg_upgrade's servers */
static const int *pg_max_backends;  /* MaxBackends */

static bool is_postmaster(void) {
    return pg_is_pm_env && pg_is_under_pm && *pg_is_pm_env && !*pg_is_under_pm;
}
/* a postmaster that may make a pool: not one of pg_upgrade's */
static bool may_make_pool(void) {
    return !(pg_is_binary_upgrade && *pg_is_binary_upgrade);
}

/* ---- libdsmpool, loaded in the postmaster alone -------------------------- */

static struct {
    void (*config_init_sized)(dsmpool_config *, size_t);
    int (*create)(const dsmpool_config *, dsmpool **);
    int (*abandon)(dsmpool *);
    int (*detach)(dsmpool *);
    int (*fd)(const dsmpool *);
    int (*sweep)(size_t *);
    int (*trim)(dsmpool *, size_t, size_t *);
    int (*seg_create)(dsmpool *, size_t, unsigned, dsmpool_seg **);
    int (*seg_attach)(dsmpool *, dsmpool_handle, dsmpool_seg **);
    int (*seg_detach)(dsmpool_seg *);
    int (*seg_pin)(dsmpool_seg *);
    int (*seg_unpin)(dsmpool *, dsmpool_handle);
    dsmpool_handle (*seg_handle)(const dsmpool_seg *);
    void *(*seg_address)(const dsmpool_seg *);
    size_t (*seg_size)(const dsmpool_seg *);
    const char *(*last_error)(void);
    int (*get_stats_sized)(dsmpool *, dsmpool_stats *, size_t);
    int (*maintain)(dsmpool *, unsigned *);
    int (*prefault_free)(dsmpool *, size_t, size_t *);
} dp;
static void *dp_lib;
static char self_dir[PATH_MAX];

/* ---- the state of this process ------------------------------------------- */

typedef struct name_ent_s {
    _Atomic uint64_t key; /* [atom] 0 never used; NAME_TOMB removed; NAME_BUSY|h in change; NAME_LIVE|h */
    uint64_t seg;         /* [own] the dsmpool handle: written by who holds the key BUSY */
    uint64_t size;        /* [own] the file's size, as PostgreSQL asked: likewise */
    uint64_t ino;         /* [own] the file's inode in /dev/shm (0: not known yet, [orphans]): likewise */
} name_ent;
#define NAME_BUSY (UINT64_C(1) << 62)
#define NAME_LIVE (UINT64_C(1) << 63)
#define NAME_TOMB (UINT64_C(1) << 61) /* removed: a probe goes on past it */
#define NAMES_MAGIC UINT64_C(0x64736d706f6f6c4e) /* "dsmpoolN" */
/* The table's header also holds what every process of the generation counts
 * and the extension reads ([counts]). */
typedef struct {
    uint64_t magic;                 /* [imm] */
    uint64_t cap;                   /* [imm] never read back: names_cap is the copy used */
    _Atomic uint64_t served;        /* [atom] segments served, all processes (relaxed: a statistic) */
    _Atomic uint64_t refused;       /* [atom] segments refused, all processes (relaxed: a statistic) */
    _Atomic uint64_t first_refused; /* [atom] 0, then the first refused segment's size (CAS) */
    _Atomic uint32_t first_ready;   /* [atom] 1 once first_why is written (release) */
    _Atomic uint32_t claimed;       /* [atom] DSMPOOL_PRELOAD_CLAIM_* bits taken (fetch_or) */
    char first_why[256];            /* [own] the CAS winner of first_refused writes it once */
    name_ent e[];
} name_table;

enum { FD_CONTROL = 1, FD_CREATING, FD_ATTACHING };
typedef struct {
    int fd;
    int kind;
    uint32_t h;       /* PostgreSQL's handle, from the name */
    dsmpool_seg *seg; /* served: the segment until mmap takes it */
    struct name_ent_s *ne; /* FD_CREATING: h's entry, reserved at the shm_open ([orphans]) until published or dropped */
    pid_t pid;        /* the process that opened it: a forked child's copy of the fd is not its creation */
} fd_ent;
#define NFDS 8
static fd_ent fds[NFDS];
static int nfds; /* entries in use: 0 makes every pass-through one compare */

typedef struct {
    void *addr;
    dsmpool_seg *seg;
} map_ent;
static map_ent *maps; /* this process's mappings of pool segments (an mmap of its own) */
static size_t maps_cap, nmaps, maps_bytes;
static uintptr_t maps_lo = UINTPTR_MAX, maps_hi; /* bounds of every address ever handed out */

static dsmpool *pool;        /* this process's view; NULL: no pool here */
static name_table *names;
static size_t names_cap;     /* its entries: this process's copy, never read from the table */
static size_t names_bytes;
static dsmpool_handle names_seg;
static bool gen_tried;       /* the postmaster tried this generation's pool */
static bool control_known;   /* the postmaster's control segment's handle */
static uint32_t control_h;
static void *control_addr;   /* its mapping (inherited by children) */
static dsmpool_preload_state state = {.version = DSMPOOL_PRELOAD_STATE_VERSION};

/* "/PostgreSQL.<decimal u32>" */
static bool pg_name(const char *name, uint32_t *h) {
    if (!name || strncmp(name, "/PostgreSQL.", 12) != 0) return false;
    const char *p = name + 12;
    uint64_t v = 0;
    if (!*p) return false;
    for (; *p; p++) {
        if (*p < '0' || *p > '9' || v > UINT32_MAX) return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > UINT32_MAX) return false;
    *h = (uint32_t)v;
    return true;
}

static fd_ent *fd_find(int fd) {
    for (int i = 0; i < NFDS; i++)
        if (fds[i].kind && fds[i].fd == fd) return &fds[i];
    return NULL;
}
static fd_ent *fd_track(int fd, int kind, uint32_t h) {
    for (int i = 0; i < NFDS; i++)
        if (!fds[i].kind) {
            fds[i] = (fd_ent){fd, kind, h, NULL, NULL, getpid()};
            nfds++;
            return &fds[i];
        }
    return NULL;
}
static void name_drop(struct name_ent_s *e);
/* An fd no longer followed; a creation's entry still reserved goes unused
 * (PostgreSQL gave the creation up: its close before any posix_fallocate),
 * but not by a forked child closing its copy: the reservation is its
 * parent's, which goes on with the creation. */
static void fd_untrack(fd_ent *f) {
    if (f->ne && f->pid == getpid()) name_drop(f->ne);
    f->kind = 0;
    f->seg = NULL;
    f->ne = NULL;
    nfds--;
}

/* The fds followed forget what lay in the pool: its segments and the name
 * table go with it (a reservation stays BUSY: the generation's end sees to
 * its name). What is then done with them is PostgreSQL's own. */
static void fds_leave_pool(void) {
    for (int i = 0; i < NFDS; i++) {
        fds[i].seg = NULL;
        fds[i].ne = NULL;
    }
}

static void set_note(const char *fmt, const char *arg) {
    snprintf(state.note, sizeof state.note, fmt, arg ? arg : "");
}

/* ---- the name table (shared) -------------------------------------------- */

/* Open addressing from h % cap (PostgreSQL's handles are random), linear
 * probing; a removed entry becomes a tombstone, reused by name_reserve, so a
 * probe stops only at a never-used entry or after cap. cap is this
 * process's copy (names_cap, set by the postmaster before any fork), never
 * the shared word, which any process of the pool could scribble on. */

/* A live entry for h, or NULL. Its fields are read after the acquire load
 * of the key: pairs with name_publish's release. */
static name_ent *name_get(uint32_t h) {
    if (!names) return NULL;
    uint64_t want = NAME_LIVE | h;
    for (size_t i = 0, j = h % names_cap; i < names_cap; i++, j = j + 1 == names_cap ? 0 : j + 1) {
        uint64_t k = atomic_load_explicit(&names->e[j].key, memory_order_acquire);
        if (k == want) return &names->e[j];
        if (k == 0) return NULL;
    }
    return NULL;
}

/* An entry for h's file, reserved (BUSY) by the creating shm_open before
 * the file exists (no inode, no size yet), so that the generation's end
 * finds the name whoever dies once its inode is in (names_sweep); NULL
 * when the table is full. */
static name_ent *name_reserve(uint32_t h) {
    for (size_t i = 0, j = h % names_cap; i < names_cap; i++, j = j + 1 == names_cap ? 0 : j + 1) {
        name_ent *e = &names->e[j];
        uint64_t k = atomic_load_explicit(&e->key, memory_order_relaxed);
        /* acquire on success: the last owner's reads and writes of the fields
         * (name_take's, name_drop's release) come before ours */
        if ((k == 0 || k == NAME_TOMB) &&
            atomic_compare_exchange_strong_explicit(&e->key, &k, NAME_BUSY | h, memory_order_acquire,
                                                    memory_order_relaxed)) {
            e->seg = 0;
            e->size = 0;
            e->ino = 0;
            return e;
        }
    }
    return NULL;
}

/* The reserved entry names segment seg from now on. */
static void name_publish(name_ent *e, uint32_t h, uint64_t seg) {
    e->seg = seg;
    /* release: the fields before the key that says they are there (name_get) */
    atomic_store_explicit(&e->key, NAME_LIVE | h, memory_order_release);
}

/* The reserved entry goes unused (the segment is PostgreSQL's own). */
static void name_drop(name_ent *e) {
    /* release: our writes of the fields before the entry is free for the
     * next name_reserve (its acquire) */
    atomic_store_explicit(&e->key, NAME_TOMB, memory_order_release);
}

/* Take h's entry out; its dsmpool handle, or 0. */
static uint64_t name_take(uint32_t h) {
    name_ent *e = name_get(h);
    if (!e) return 0;
    uint64_t k = NAME_LIVE | h;
    /* acquire: the fields read below are the ones name_publish published */
    if (!atomic_compare_exchange_strong_explicit(&e->key, &k, NAME_BUSY | h, memory_order_acquire,
                                                 memory_order_relaxed))
        return 0;
    uint64_t seg = e->seg;
    /* release: our read of seg before the entry is free for the next name_reserve (its acquire) */
    atomic_store_explicit(&e->key, NAME_TOMB, memory_order_release);
    return seg;
}

/* ---- the pool's life ---------------------------------------------------- */

/* A function pointer from dlsym (POSIX: a data pointer that converts) */
static bool sym(void *fp, void *lib, const char *name) {
    void *v = dlsym(lib, name);
    memcpy(fp, &v, sizeof v);
    return v != NULL;
}
#define SYM(f, n)                            \
    do {                                     \
        if (!sym(&dp.f, dp_lib, n)) return n; \
    } while (0)

/* Why libdsmpool did not load: dlerror's words for the copy beside this
 * library (a missing dependency -- libnuma.so.1 in a container image without
 * it -- shows there), then for the library path's. */
static char load_why[400];
static const char *load_dsmpool(void) {
    if (dp_lib) return NULL;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/libdsmpool.so.0", self_dir);
    dp_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (dp_lib) goto loaded;
    const char *e = dlerror();
    int n = snprintf(load_why, sizeof load_why, "beside the preload library: %s", e ? e : path);
    dp_lib = dlopen("libdsmpool.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!dp_lib) {
        e = dlerror();
        if (n >= 0 && (size_t)n < sizeof load_why)
            snprintf(load_why + n, sizeof load_why - (size_t)n, "; on the library path: %s",
                     e ? e : "libdsmpool.so.0 not found");
        return load_why;
    }
loaded:
    SYM(config_init_sized, "dsmpool_config_init_sized");
    SYM(create, "dsmpool_create");
    SYM(abandon, "dsmpool_abandon");
    SYM(detach, "dsmpool_detach");
    SYM(fd, "dsmpool_fd");
    SYM(sweep, "dsmpool_sweep");
    SYM(trim, "dsmpool_trim");
    SYM(seg_create, "dsmpool_seg_create");
    SYM(seg_attach, "dsmpool_seg_attach");
    SYM(seg_detach, "dsmpool_seg_detach");
    SYM(seg_pin, "dsmpool_seg_pin");
    SYM(seg_unpin, "dsmpool_seg_unpin");
    SYM(seg_handle, "dsmpool_seg_handle");
    SYM(seg_address, "dsmpool_seg_address");
    SYM(seg_size, "dsmpool_seg_size");
    SYM(last_error, "dsmpool_last_error");
    SYM(get_stats_sized, "dsmpool_get_stats_sized");
    SYM(maintain, "dsmpool_maintain");
    SYM(prefault_free, "dsmpool_prefault_free");
    return NULL;
}

/* A number at the start of a small file, or after key in it; false if none.
 * Raw calls into a stack buffer: this runs in the postmaster's shm_open. */
static bool read_u64(const char *path, const char *key, uint64_t *v) {
    char buf[4096];
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    pass_close(fd);
    if (n <= 0) return false;
    buf[n] = 0;
    const char *p = key ? strstr(buf, key) : buf;
    if (!p) return false;
    p += key ? strlen(key) : 0;
    while (*p == ' ') p++;
    if (*p < '0' || *p > '9') return false;
    for (*v = 0; *p >= '0' && *p <= '9'; p++) *v = *v * 10 + (uint64_t)(*p - '0');
    return true;
}

/* [settings]: huge pages only where the whole pool fits in what the
 * kernel's huge page pool leaves -- free less reserved (shared memory's
 * pages are taken or reserved by now), plus surplus pages still allowed;
 * else 4 KiB pages and a note that says why. A reservation beyond this
 * machine's memory can never be wholly resident: for it, its tables (at
 * most size/256), what it holds from the start (start: resident_min and
 * warm) and room to work in as the default pool has (2 GB). libdsmpool
 * then checks the hugetlb cgroup for what it makes resident at creation
 * and at each refill ahead (a refill on demand finds out by its populate). */
static bool huge_fits(size_t size, size_t start, char *why, size_t n) {
    uint64_t kb = 0, v[4] = {0, 0, 0, 0}, mem_kb = 0;
    static const char *const f[4] = {"free", "resv", "nr_overcommit", "surplus"};
    char path[128];
    if (!read_u64("/proc/meminfo", "Hugepagesize:", &kb) || kb == 0) {
        snprintf(why, n, "huge pages asked for, none used: this system has none");
        return false;
    }
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "/sys/kernel/mm/hugepages/hugepages-%llukB/%s_hugepages", (unsigned long long)kb,
                 f[i]);
        (void)read_u64(path, NULL, &v[i]);
    }
    uint64_t avail = (v[0] > v[1] ? v[0] - v[1] : 0) + (v[2] > v[3] ? v[2] - v[3] : 0);
    bool reserve = read_u64("/proc/meminfo", "MemTotal:", &mem_kb) && size / 1024 > mem_kb;
    uint64_t bytes = reserve ? size / 256 + start + DSMPOOL_PRELOAD_DEFAULT_SIZE : size;
    uint64_t need = (bytes + kb * 1024 - 1) / (kb * 1024);
    if (avail >= need) return true;
    snprintf(why, n,
             "huge pages asked for, none used: the pool's %zu MB need %llu huge pages of %llu kB%s, and %llu can "
             "be had (%llu free, %llu of them reserved): raise vm.nr_hugepages by %llu",
             size >> 20, (unsigned long long)need, (unsigned long long)kb,
             reserve ? " (a reservation beyond this machine's memory: its tables, resident_min and warm, and "
                       "2 GB to work in)"
                     : "",
             (unsigned long long)avail, (unsigned long long)v[0], (unsigned long long)v[1],
             (unsigned long long)(need - avail));
    return false;
}

/* The postmaster makes this generation's pool. */
static void pool_make(void) {
    gen_tried = true;
    state.generation++;
    static const char *miss;
    if (!miss) miss = load_dsmpool(); /* once: never again inside a restart's signal handler */
    if (miss) {
        set_note("no pool: libdsmpool could not be loaded: %s", miss);
        return;
    }
    size_t removed = 0;
    dp.sweep(&removed); /* what killed servers' pools left (never a live one) */
    size_t slots = 64 + 5 * (size_t)(pg_max_backends && *pg_max_backends > 0 ? *pg_max_backends : 100);
    dsmpool_config cfg;
    dp.config_init_sized(&cfg, sizeof cfg);
    cfg.size = state.settings.size ? state.settings.size : DSMPOOL_PRELOAD_DEFAULT_SIZE;
    cfg.backing = DSMPOOL_BACKING_MEMFD; /* inherited by fork; outside /dev/shm */
    char huge_why[480] = "";
    size_t start = state.settings.resident_min + state.settings.warm_bytes;
    cfg.huge_pages = state.settings.huge_pages && huge_fits(cfg.size, start, huge_why, sizeof huge_why) ? DSMPOOL_HUGE_TRY
                                                                                                 : DSMPOOL_HUGE_OFF;
    cfg.numa = state.settings.numa ? DSMPOOL_NUMA_AUTO : DSMPOOL_NUMA_OFF;
    cfg.prefault = false;
    cfg.max_segments = 2 * slots + 64;
    cfg.max_procs = (unsigned)(slots / 5 + 64);
    cfg.resident_min = state.settings.resident_min;
    cfg.warm_bytes = state.settings.warm_bytes;
    /* elastic with no time policy unless asked: nothing runs dsmpool_maintain
     * without the extension; destroys trim ([stock]) */
    cfg.idle_release_ms = state.settings.idle_release_ms ? state.settings.idle_release_ms : UINT_MAX;
    dsmpool *p;
    int r = dp.create(&cfg, &p);
    if (r) {
        set_note("no pool: dsmpool_create failed: %s", dp.last_error());
        return;
    }
    const char *created = dp.last_error(); /* "no error", or a note: huge pages fell back, and why */
    set_note("%s", huge_why[0] ? huge_why : strcmp(created, "no error") != 0 ? created : "");
    /* the name table, and this process's table of mappings */
    names_bytes = sizeof(name_table) + 2 * slots * sizeof(name_ent);
    maps_cap = slots + 8;
    maps_bytes = (maps_cap * sizeof(map_ent) + 4095) & ~(size_t)4095;
    dsmpool_seg *s = NULL;
    if ((r = dp.seg_create(p, names_bytes, DSMPOOL_SEG_NO_FALLBACK, &s)) != 0 || (r = dp.seg_pin(s)) != 0) {
        set_note("no pool: its name table: %s", dp.last_error());
        dp.abandon(p);
        return;
    }
    void *m = pass_mmap(NULL, maps_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        set_note("no pool: %s", strerror(errno));
        dp.abandon(p);
        return;
    }
    names = dp.seg_address(s);
    memset(names, 0, names_bytes);
    names->magic = NAMES_MAGIC;
    names->cap = names_cap = 2 * slots;
    names_seg = dp.seg_handle(s);
    maps = m;
    nmaps = 0;
    pool = p;
    state.pool_size = cfg.size;
    state.pool_pid = getpid();
    state.serving = true;
}

static void maps_free(void) {
    if (maps) pass_munmap(maps, maps_bytes);
    maps = NULL;
    nmaps = 0;
    maps_lo = UINTPTR_MAX;
    maps_hi = 0;
}

/* [orphans] Every name an entry of the ending generation still holds goes,
 * where the file is still the one entered (same inode, a regular file of
 * this user): PostgreSQL has removed every name its control segment lists
 * by now, and no process of the generation is left, so these are the names
 * of processes killed between their shm_open and dsm_create's registration,
 * or inside a destroy. An entry with no inode yet (killed inside the
 * shm_open) removes nothing: its name may be another's (an EEXIST, another
 * cluster's, the postmaster's next control segment). The entries are read,
 * never trusted: a scribbled one can only name a file that is not there or
 * not this one. */
static void names_sweep(void) {
    for (size_t i = 0; names && i < names_cap; i++) {
        uint64_t k = atomic_load_explicit(&names->e[i].key, memory_order_relaxed); /* every writer is dead */
        if (!(k & (NAME_LIVE | NAME_BUSY)) || (k & ~(NAME_LIVE | NAME_BUSY | UINT32_MAX)) != 0) continue;
        uint64_t ino = names->e[i].ino;
        char path[64];
        snprintf(path, sizeof path, "/dev/shm/PostgreSQL.%u", (unsigned)(uint32_t)k);
        struct stat st;
        if (ino && lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_ino == ino &&
            st.st_uid == geteuid())
            (void)syscall(SYS_unlinkat, AT_FDCWD, path, 0);
    }
}

/* The postmaster throws the generation away ([generation]). Every process of
 * the generation is gone: PostgreSQL removes the control segment only at its
 * shutdown and when reinitializing after a crash, once it has no child. */
static void pool_discard(void) {
    if (pool) {
        names_sweep();
        int fd = dp.fd(pool);
        struct stat st;
        /* every page out of the memfd, whoever still maps it */
        if (fd >= 0 && fstat(fd, &st) == 0)
            (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, st.st_size);
        dp.abandon(pool);
        size_t removed;
        dp.sweep(&removed); /* its anchor */
    }
    pool = NULL;
    names = NULL;
    maps_free();
    state.serving = false;
    gen_tried = false;
    control_known = false;
    control_addr = NULL;
}

/* A child leaves dynamic shared memory for good (dsm_detach_all). */
static void pool_leave_child(void) {
    fds_leave_pool();
    if (pool) dp.detach(pool);
    pool = NULL;
    names = NULL;
    maps_free();
    state.serving = false;
}

/* [counts]: a segment refused, in the shared table; the first one's size
 * and why. Atomics and a copy into the table: nothing that allocates,
 * logs or resolves a symbol. */
static void note_refusal(uint64_t len, const char *why) {
    state.refused++;
    if (!names) return;
    /* relaxed: a statistic */
    atomic_fetch_add_explicit(&names->refused, 1, memory_order_relaxed);
    uint64_t zero = 0;
    /* relaxed: elects the one writer of first_why; first_ready publishes it */
    if (atomic_compare_exchange_strong_explicit(&names->first_refused, &zero, len, memory_order_relaxed,
                                                memory_order_relaxed)) {
        size_t n = why ? strnlen(why, sizeof names->first_why - 1) : 0;
        if (n) memcpy(names->first_why, why, n);
        names->first_why[n] = 0;
        /* release: first_why before the flag; pairs with ops_counts's acquire */
        atomic_store_explicit(&names->first_ready, 1, memory_order_release);
    }
}

/* [maintained]: the extension's maintainer gives back what stayed free for
 * idle_release_ms; a destroy leaves it. relaxed: a hint; a destroy that
 * misses a claim made just now trims, as without the extension. */
static bool maintained(void) {
    return state.settings.idle_release_ms && names &&
           (atomic_load_explicit(&names->claimed, memory_order_relaxed) & DSMPOOL_PRELOAD_CLAIM_MAINTAINER);
}

/* ---- the interposed calls ----------------------------------------------- */

EXPORT int shm_open(const char *name, int oflag, mode_t mode) {
    uint32_t h;
    if (likely(!pg_name(name, &h))) return pass_shm_open(name, oflag, mode);
    /* PostgreSQL creates O_EXCL (its handle is new); without O_EXCL the file
     * may be another's, which neither a control segment nor an entry is */
    bool excl = (oflag & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
    if (is_postmaster()) {
        int fd = pass_shm_open(name, oflag, mode);
        /* A postmaster creates no DSM segment but its control segment (dsm_create
         * asserts IsUnderPostmaster): a new one while one is known means that
         * PostgreSQL found the old one corrupt and left it (its names leak, as
         * stock's do): this generation ends here. */
        if (fd >= 0 && excl && control_known && h != control_h && !state.provider) {
            int e = errno;
            pool_discard();
            errno = e;
        }
        if (fd >= 0 && excl && !control_known) {
            int e = errno;
            control_known = true; /* the postmaster's first creation: the control segment */
            control_h = h;
            fd_track(fd, FD_CONTROL, h);
            if (!gen_tried && !pool && may_make_pool() && !state.provider) pool_make();
            errno = e;
        }
        return fd;
    }
    if (!pool || state.provider || ((oflag & O_CREAT) && !excl)) return pass_shm_open(name, oflag, mode);
    if (excl) {
        /* [orphans]: the entry before the name exists, its inode once the
         * file is there: a death from then on leaves the name to the
         * generation's end. No entry (a full table): PostgreSQL's own. */
        name_ent *ne = name_reserve(h);
        int fd = pass_shm_open(name, oflag, mode);
        int e = errno;
        struct stat st;
        /* no name entry: its posix_fallocate refuses it; no fd entry (NFDS
         * creations open at once): PostgreSQL's own, uncounted */
        fd_ent *f = fd >= 0 ? fd_track(fd, FD_CREATING, h) : NULL;
        if (f && ne && fstat(fd, &st) == 0) {
            ne->ino = (uint64_t)st.st_ino;
            f->ne = ne;
        } else if (ne) {
            name_drop(ne); /* no file made (EEXIST: another's), or nowhere to follow it */
        }
        errno = e;
        return fd;
    }
    name_ent *e = name_get(h);
    if (!e) return pass_shm_open(name, oflag, mode);
    /* The fields are read without checking the key again: PostgreSQL
     * attaches a segment only while its control slot's count says it lives
     * (dsm_attach), so nobody takes h's entry during this attach; another
     * entry would fail the inode check below. */
    /* a pool segment: its file (mode 0000) through O_PATH, for fstat */
    int err = errno;
    uint64_t seg = e->seg, size = e->size, ino = e->ino;
    char path[64];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_PATH | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return -1;
    struct stat st;
    dsmpool_seg *s = NULL;
    int r = fstat(fd, &st) ? -errno : (uint64_t)st.st_ino != ino || (uint64_t)st.st_size != size ? -ENOENT : 0;
    if (r == 0) r = dp.seg_attach(pool, seg, &s);
    fd_ent *f = r == 0 ? fd_track(fd, FD_ATTACHING, h) : NULL;
    if (!f) {
        if (s) dp.seg_detach(s);
        pass_close(fd);
        errno = r == -ESTALE ? ENOENT : r ? -r : EMFILE;
        return -1;
    }
    f->seg = s;
    errno = err;
    return fd;
}

EXPORT int posix_fallocate(int fd, off_t off, off_t len) {
    if (likely(nfds == 0)) return pass_posix_fallocate(fd, off, len);
    fd_ent *f = fd_find(fd);
    if (!f || f->kind != FD_CREATING || f->seg || off != 0 || len <= 0 || !pool || f->pid != getpid())
        return pass_posix_fallocate(fd, off, len); /* (a forked child's copy: its parent's creation) */
    int err = errno, e = 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || (st.st_size != len && ftruncate(fd, len) != 0)) { /* 16+: still empty */
        e = errno;
        errno = err;
        return e;
    }
    uint64_t stale = name_take(f->h); /* a name removed behind the pool's back, reused */
    if (stale && dp.seg_unpin(pool, stale) != 0) state.unpin_failed++;
    name_ent *ne = f->ne; /* reserved by the shm_open ([orphans]) */
    f->ne = NULL;
    if (ne) ne->size = (uint64_t)len;
    dsmpool_seg *s = NULL;
    bool pinned = false;
    if (!ne || dp.seg_create(pool, (size_t)len, DSMPOOL_SEG_NO_FALLBACK, &s) != 0 ||
        !(pinned = dp.seg_pin(s) == 0)) {
        /* full, no room, or no entry: PostgreSQL's own segment */
        note_refusal((uint64_t)len, !ne ? "the pool's name table is full" : dp.last_error());
        if (s) dp.seg_detach(s); /* not pinned: the last reference destroys */
        if (ne) name_drop(ne);
        fd_untrack(f);
        errno = err;
        return pass_posix_fallocate(fd, off, len);
    }
    name_publish(ne, f->h, dp.seg_handle(s));
    (void)fchmod(fd, 0); /* [names]: no process without the pool opens it */
    f->seg = s;
    state.served++;
    atomic_fetch_add_explicit(&names->served, 1, memory_order_relaxed); /* relaxed: a statistic */
    errno = err;
    return 0;
}

EXPORT int posix_fallocate64(int fd, off_t off, off_t len) __attribute__((alias("posix_fallocate")));

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (likely(fd < 0 || nfds == 0)) return pass_mmap(addr, len, prot, flags, fd, off);
    fd_ent *f = fd_find(fd);
    if (likely(!f)) return pass_mmap(addr, len, prot, flags, fd, off);
    if (f->kind == FD_CONTROL) {
        void *a = pass_mmap(addr, len, prot, flags, fd, off);
        if (a != MAP_FAILED) control_addr = a;
        return a;
    }
    if (!f->seg) return pass_mmap(addr, len, prot, flags, fd, off); /* PostgreSQL's own segment */
    if (addr || off || (flags & (MAP_SHARED | MAP_FIXED)) != MAP_SHARED || prot != (PROT_READ | PROT_WRITE) ||
        len > dp.seg_size(f->seg) || nmaps == maps_cap) {
        errno = nmaps == maps_cap ? ENOMEM : EINVAL; /* never the file: it holds no data */
        return MAP_FAILED;
    }
    void *a = dp.seg_address(f->seg);
    maps[nmaps++] = (map_ent){a, f->seg};
    f->seg = NULL;
    if ((uintptr_t)a < maps_lo) maps_lo = (uintptr_t)a;
    if ((uintptr_t)a + 1 > maps_hi) maps_hi = (uintptr_t)a + 1;
    return a;
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));

EXPORT int munmap(void *addr, size_t len) {
    uintptr_t a = (uintptr_t)addr;
    if (likely(a - maps_lo >= maps_hi - maps_lo)) {
        if (unlikely(addr == control_addr && addr != NULL) && !is_postmaster()) {
            int r = pass_munmap(addr, len), e = errno;
            control_addr = NULL;
            pool_leave_child(); /* dsm_detach_all: this child is done with DSM */
            errno = e;
            return r;
        }
        return pass_munmap(addr, len);
    }
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].addr == addr) {
            int e = errno;
            dp.seg_detach(maps[i].seg);
            maps[i] = maps[--nmaps];
            errno = e;
            return 0;
        }
    return pass_munmap(addr, len);
}

EXPORT int close(int fd) {
    if (likely(nfds == 0)) return pass_close(fd);
    fd_ent *f = fd_find(fd);
    if (f) {
        if (f->seg) { /* never mapped: an attach's reference, or a creation's (its pin stays) */
            int e = errno;
            dp.seg_detach(f->seg);
            errno = e;
        }
        fd_untrack(f);
    }
    return pass_close(fd);
}

EXPORT int shm_unlink(const char *name) {
    uint32_t h;
    if (likely(!pg_name(name, &h))) return pass_shm_unlink(name);
    if (is_postmaster()) {
        /* the postmaster never touches the pool's segments ([generation]) */
        int r = pass_shm_unlink(name), e = errno;
        if (control_known && h == control_h && !state.provider) pool_discard();
        errno = e;
        return r;
    }
    if (pool && !state.provider) {
        uint64_t seg = name_take(h);
        if (seg) {
            int e = errno;
            if (dp.seg_unpin(pool, seg) != 0)
                state.unpin_failed++; /* a bounded leak: the generation's end frees it */
            else if (!maintained()) /* [stock]; else the maintainer, after idle_release_ms */
                (void)dp.trim(pool, state.settings.resident_min + state.settings.warm_bytes, NULL);
            errno = e;
        }
    }
    return pass_shm_unlink(name);
}

/* ---- the extension's window ---------------------------------------------- */

EXPORT dsmpool_preload_state *dsmpool_preload_get_state(void);
EXPORT dsmpool_preload_state *dsmpool_preload_get_state(void) { return &state; }
EXPORT void *dsmpool_preload_pool(void);
EXPORT void *dsmpool_preload_pool(void) { return pool; }

/* [window]: each call works on this process's pool, the generation's it
 * was forked with, read at the call: -ENOENT where there is none (dropped
 * by pool_leave_child, or never made). */
static int ops_get_stats(dsmpool_stats *out, size_t struct_size) {
    return pool ? dp.get_stats_sized(pool, out, struct_size) : -ENOENT;
}
static int ops_maintain(unsigned *next_ms) { return pool ? dp.maintain(pool, next_ms) : -ENOENT; }
static int ops_prefault_free(size_t bytes, size_t *done) {
    return pool ? dp.prefault_free(pool, bytes, done) : -ENOENT;
}
static int ops_trim(size_t keep_bytes, size_t *released) {
    return pool ? dp.trim(pool, keep_bytes, released) : -ENOENT;
}
static int ops_counts(dsmpool_preload_counts *out) {
    memset(out, 0, sizeof *out);
    if (!pool || !names) return -ENOENT;
    /* relaxed: statistics */
    out->served = atomic_load_explicit(&names->served, memory_order_relaxed);
    out->refused = atomic_load_explicit(&names->refused, memory_order_relaxed);
    /* acquire: pairs with note_refusal's release of first_ready (first_why) */
    if (atomic_load_explicit(&names->first_ready, memory_order_acquire)) {
        out->first_refused_bytes = atomic_load_explicit(&names->first_refused, memory_order_relaxed);
        memcpy(out->first_refused_why, names->first_why, sizeof out->first_refused_why - 1);
        out->first_refused_why[sizeof out->first_refused_why - 1] = 0; /* whatever the table holds */
    }
    return 0;
}
static bool ops_claim(unsigned what) {
    if (!pool || !names) return false;
    /* relaxed: a once-flag; it publishes nothing */
    return !(atomic_fetch_or_explicit(&names->claimed, what, memory_order_relaxed) & what);
}
static const char *ops_last_error(void) { return dp.last_error ? dp.last_error() : ""; }

/* [provider]: the postmaster's generation, begun each time PostgreSQL makes
 * shared memory (the previous one ends first: every child is gone then) */
static int ops_gen_begin(void) {
    if (!is_postmaster()) return -EPERM;
    state.provider = true;
    pool_discard();
    if (may_make_pool()) pool_make();
    return pool ? 0 : -ENOENT;
}
static void ops_gen_end(void) {
    if (is_postmaster()) pool_discard();
}
static int map_add(dsmpool_seg *s, uint64_t *id, void **addr, size_t *len) {
    maps[nmaps++] = (map_ent){dp.seg_address(s), s};
    *id = dp.seg_handle(s);
    *addr = dp.seg_address(s);
    *len = dp.seg_size(s);
    return 0;
}
static int ops_seg_create(size_t size, uint64_t *id, void **addr, size_t *len) {
    if (!pool || !state.provider || is_postmaster()) return -ENOENT;
    if (nmaps == maps_cap) {
        note_refusal(size, "this process maps as many pool segments as PostgreSQL has slots");
        return -ENOSPC;
    }
    dsmpool_seg *s = NULL;
    int r = dp.seg_create(pool, size, DSMPOOL_SEG_NO_FALLBACK, &s);
    if (r == 0 && (r = dp.seg_pin(s)) != 0) {
        dp.seg_detach(s); /* not pinned: the last reference destroys */
        s = NULL;
    }
    if (r != 0) {
        note_refusal(size, dp.last_error()); /* full, or no room: PostgreSQL's own segment */
        return r;
    }
    state.served++;
    atomic_fetch_add_explicit(&names->served, 1, memory_order_relaxed); /* relaxed: a statistic */
    return map_add(s, id, addr, len);
}
static int ops_seg_attach(uint64_t id, void **addr, size_t *len) {
    if (!pool || !state.provider) return -ENOENT;
    if (nmaps == maps_cap) return -ENOSPC;
    dsmpool_seg *s = NULL;
    int r = dp.seg_attach(pool, id, &s);
    return r ? r : map_add(s, &id, addr, len);
}
static int ops_seg_detach(void *addr) {
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].addr == addr) {
            int r = dp.seg_detach(maps[i].seg);
            maps[i] = maps[--nmaps];
            return r;
        }
    return -ENOENT;
}
static int ops_seg_destroy(uint64_t id) {
    if (!pool || !state.provider) return -ENOENT;
    int r = dp.seg_unpin(pool, id);
    if (r != 0)
        state.unpin_failed++; /* a bounded leak: the generation's end frees it */
    else if (!maintained())   /* [stock]; else the maintainer, after idle_release_ms */
        (void)dp.trim(pool, state.settings.resident_min + state.settings.warm_bytes, NULL);
    return r;
}

static struct dsmpool *ops_pool(void) { return state.provider && state.serving ? pool : NULL; }

static const dsmpool_preload_ops ops = {
    .version = DSMPOOL_PRELOAD_OPS_VERSION,
    .get_stats = ops_get_stats,
    .maintain = ops_maintain,
    .prefault_free = ops_prefault_free,
    .trim = ops_trim,
    .counts = ops_counts,
    .claim = ops_claim,
    .last_error = ops_last_error,
    .gen_begin = ops_gen_begin,
    .gen_end = ops_gen_end,
    .seg_create = ops_seg_create,
    .seg_attach = ops_seg_attach,
    .seg_detach = ops_seg_detach,
    .seg_destroy = ops_seg_destroy,
    .pool = ops_pool,
};
EXPORT const dsmpool_preload_ops *dsmpool_preload_get_ops(void);
EXPORT const dsmpool_preload_ops *dsmpool_preload_get_ops(void) { return &ops; }

__attribute__((constructor)) static void preload_init(void) {
    sym(&real_shm_open, RTLD_NEXT, "shm_open");
    sym(&real_shm_unlink, RTLD_NEXT, "shm_unlink");
    sym(&real_posix_fallocate, RTLD_NEXT, "posix_fallocate");
    sym(&real_mmap, RTLD_NEXT, "mmap");
    sym(&real_munmap, RTLD_NEXT, "munmap");
    sym(&real_close, RTLD_NEXT, "close");
    pg_is_pm_env = dlsym(RTLD_DEFAULT, "IsPostmasterEnvironment");
    pg_is_under_pm = dlsym(RTLD_DEFAULT, "IsUnderPostmaster");
    pg_max_backends = dlsym(RTLD_DEFAULT, "MaxBackends");
    pg_is_binary_upgrade = dlsym(RTLD_DEFAULT, "IsBinaryUpgrade");
    (void)dlerror(); /* what the misses above left: not the program's */
    Dl_info di;
    if (dladdr(&state, &di) && di.dli_fname) {
        snprintf(self_dir, sizeof self_dir, "%s", di.dli_fname);
        char *slash = strrchr(self_dir, '/');
        if (slash) *slash = 0;
        else snprintf(self_dir, sizeof self_dir, ".");
    }
}
