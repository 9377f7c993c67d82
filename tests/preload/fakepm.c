/*
 * fakepm -- a fake postmaster: a program that exports PostgreSQL's globals
 * (IsPostmasterEnvironment, IsUnderPostmaster, IsBinaryUpgrade,
 * MaxBackends) and makes PostgreSQL's DSM calls in PostgreSQL's order, so
 * that the preload library (libdsmpool-preload.so) serves it as it serves
 * a stock server, with no PostgreSQL.
 *
 * The processes: main() (the runner) makes a private mount and IPC
 * namespace, and for each check mounts a fresh tmpfs on /dev/shm and forks
 * a postmaster, which gives up root (uid/gid 65534: PostgreSQL never runs
 * as root, and so the mode 0000 of a pool segment's file is what keeps
 * other processes out), sets IsPostmasterEnvironment, creates its control
 * segment and forks its children, which set IsUnderPostmaster as
 * PostgreSQL's do. Each child is a worker that runs one DSM step at a time
 * on the postmaster's command, through a pipe, and answers through
 * another: every ordering between processes is a message, never a sleep.
 * Each check is run twice, with PostgreSQL 15's and 16's create sequences.
 *
 * The sequences (dsm_impl_posix in src/backend/storage/ipc/dsm_impl.c,
 * dsm.c), name "/PostgreSQL.<u32>":
 *   create   shm_open(O_RDWR|O_CREAT|O_EXCL, 0600) -> signals blocked (in a
 *            child) -> 15: ftruncate in an EINTR loop -> posix_fallocate in
 *            an EINTR loop -> unblocked -> mmap(NULL, n, RW,
 *            MAP_SHARED|MAP_HASSEMAPHORE) -> close; on a failure after the
 *            shm_open: close, shm_unlink
 *   attach   shm_open(O_RDWR, 0600) -> fstat -> mmap(st_size) -> close
 *   detach   munmap;  destroy: munmap, shm_unlink
 *   control  the postmaster's create, of an even random handle
 *   shutdown and crash restart: the postmaster shm_unlinks the handles its
 *            control segment lists (mapping nothing), then destroys the
 *            control segment (munmap, shm_unlink); a restart creates a new
 *            one. A control segment found corrupt is left as it is, and a
 *            new one created beside it.
 *
 * Rules (a check each: "[PASS] preload_fakepm::pgNN_<check>__<what>")
 *   [served] A segment a child creates is the pool's: its file sparse
 *      (0 blocks), mode 0000, of the segment's size; another child attaches
 *      it (fstat: the size) and the two exchange bytes both ways. Creating
 *      an existing name is EEXIST (dsm_create's loop) and harms nothing.
 *      The control segment is never the pool's (data blocks, mode 0600).
 *      Every successful call leaves errno as it was (a sentinel set before).
 *   [destroy] After munmap and shm_unlink the name is gone and the pool's
 *      segment count and free bytes are what they were before the create.
 *   [no pool] A process without the pool -- a program exec'd from a
 *      child, with none of PostgreSQL's globals set, or a child of the next
 *      generation -- cannot open a pool segment's name (EACCES, or ENOENT
 *      where the generation's end removed it), so never maps the zeros of
 *      its sparse file.
 *   [close early] PostgreSQL's error paths -- close and shm_unlink after
 *      the creating posix_fallocate, no mmap; close after an attach's
 *      fstat -- give the pool its bytes back, errno kept.
 *   [crash restart] A child is killed holding a mapping; the postmaster's
 *      removal of the control segment's name ends the generation (serving
 *      false); a child of the old generation still writes and reads its
 *      mapping, detaches and exits cleanly; the next control segment makes
 *      a new pool (generation + 1) that new children are served from.
 *   [corrupt control] A second control segment with the first left in place
 *      ends the generation too: new children are served from a fresh pool
 *      (generation + 1, none of the old segments in it), a child of the old
 *      pool does not find the new segments in it, and the old control
 *      segment, PostgreSQL's, is left.
 *   [orphans] Children killed inside dsm_create, right after the shm_open
 *      (the file still empty), after posix_fallocate and after mmap, before
 *      the registration in the control segment:
 *      the generation's end removes their names (PostgreSQL never will),
 *      but not a file that took such a name afterwards (another inode).
 *   [given up] Creations given up after their shm_open (close, then
 *      shm_unlink: dsm_impl_posix's error path), twice as many as the name
 *      table holds, leave no entry: the next creation is served.
 *   [forked creator] A child forked inside a creation that closes its
 *      copy of the fd leaves the name's reservation to its parent: a
 *      creation of another handle made meanwhile at the same place in the
 *      name table is served beside it, and both attach with their bytes,
 *      after another child's posix_fallocate of its copy (libc's). A
 *      process that leaves the pool with a creation open closes it and
 *      exits cleanly; a creation without O_EXCL is PostgreSQL's own.
 *   [name reused] A handle whose name was removed by a plain unlink()
 *      behind the library's back is created again: served, the new bytes
 *      seen by a new attacher and the old by the old one, and no segment or
 *      byte lost once both are gone.
 *   [detach all] A child that detaches its segments and then the control
 *      segment (dsm_detach_all, the syslogger) has no pool: its shm_open
 *      of a pool name is refused, while the others go on.
 *   [binary upgrade] Under IsBinaryUpgrade no pool is made and libdsmpool
 *      is not loaded: segments are PostgreSQL's own (data blocks, 0600).
 *   [max backends] With MaxBackends = 1 (69 slots), 2 x 69 + 1 segments
 *      alive at once, made by three children, all succeed: served from the
 *      pool or, past its name table, PostgreSQL's own (refused); each
 *      attached and read back by a fourth child; all destroyed, no name is
 *      left and the pool is as before once the creators' slots are
 *      recovered (each held more attachments than its slot records inline:
 *      the overflow blocks go back with the slot).
 *   [backends come and go] Three times as many short-lived children as
 *      the pool has process slots, one after another, each served: dead
 *      children's slots are recovered by the pool itself.
 *   [pool full] In a 64 MiB pool (the extension's setting, written before
 *      the control segment) 24 MiB segments are served until no block is
 *      left; the next are PostgreSQL's own; all read back and destroyed.
 *   [odd sizes] Sizes of any number of bytes (1, 4095, 4097, 2 MiB + 1...)
 *      are served, fstat gives each exactly, and every byte is shared.
 *   [concurrent] Four children create, fill, check and destroy at once
 *      (six segments alive in each), every one served, nothing lost.
 *   [killed postmaster] A postmaster killed with its child leaves its
 *      names; the next start removes them through the old control segment,
 *      as PostgreSQL does, makes its pool (the old pool's anchor swept)
 *      and serves.
 *   [standalone backend] Single-user mode (IsPostmasterEnvironment false):
 *      no pool, libdsmpool not loaded, segments PostgreSQL's own.
 *
 * Needs root for the namespaces and the mounts: without it, says so and
 * exits 77 (meson's skip). Usage: fakepm (under
 * LD_PRELOAD=libdsmpool-preload.so); fakepm --probe NAME is the exec'd
 * program of [no pool]. Prints Criterion's synthesis line for
 * tools/testcount.py.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dsmpool.h"
#include "dsmpool_preload.h"

/* ---- PostgreSQL's globals, exported as the postgres binary does ---------- */

extern bool IsPostmasterEnvironment, IsUnderPostmaster, IsBinaryUpgrade;
extern int MaxBackends;
bool IsPostmasterEnvironment;
bool IsUnderPostmaster;
bool IsBinaryUpgrade;
int MaxBackends = 100;

#ifndef MAP_HASSEMAPHORE
#define MAP_HASSEMAPHORE 0 /* PostgreSQL's definition where the system has none */
#endif
#define SENTINEL 4242
#define SEG_SIZE (((size_t)1 << 20) + 3 * 4096) /* not a multiple of 2 MiB */
#define NOBODY 65534
#define CC_WORKERS 4  /* [concurrent]: children at once, */
#define CC_ROUNDS 300 /* segments each creates, */
#define CC_ALIVE 6    /* alive at once in each */
#define SLOTS(mb) (64 + 5 * (mb)) /* PostgreSQL's control slots */

static const char *suite = "preload_fakepm";

/* the tally, shared by the runner and each check's postmaster */
static struct tally {
    int tested, passing;
} *tally;
static int ver; /* PostgreSQL's create sequence: 15 or 16 */
static const char *check_name = ""; /* the check running */

static void report(const char *name, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(const char *name, bool ok, const char *fmt, ...) {
    char why[1024] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    tally->tested++;
    tally->passing += ok;
    char check[64] = "";
    if (ver) snprintf(check, sizeof check, "pg%d_%s__", ver, check_name);
    printf("[%s] %s::%s%s%s%s\n", ok ? "PASS" : "FAIL", suite, check, name, why[0] ? ": " : "", why);
    fflush(stdout);
}

static void pgname(char buf[static 32], uint32_t h) { snprintf(buf, 32, "/PostgreSQL.%u", h); }

/* ---- the preload library's window ---------------------------------------- */

static dsmpool_preload_state *(*get_state)(void);
static void *(*get_pool)(void);
static char dsmpool_path[4096]; /* libdsmpool.so.0 beside the preload library */

static bool find_preload(void) {
    void *s = dlsym(RTLD_DEFAULT, "dsmpool_preload_get_state");
    void *p = dlsym(RTLD_DEFAULT, "dsmpool_preload_pool");
    memcpy(&get_state, &s, sizeof s);
    memcpy(&get_pool, &p, sizeof p);
    Dl_info di;
    if (!s || !p || !dladdr(s, &di) || !di.dli_fname) return false;
    snprintf(dsmpool_path, sizeof dsmpool_path, "%s", di.dli_fname);
    char *slash = strrchr(dsmpool_path, '/');
    if (!slash) return false;
    snprintf(slash + 1, sizeof dsmpool_path - (size_t)(slash + 1 - dsmpool_path), "libdsmpool.so.0");
    return true;
}

/* ---- the control segment (a list of handles, as dsm.c's) ------------------ */

typedef struct {
    uint32_t magic, nitems, maxitems, pad;
    struct {
        uint32_t handle, refcnt;
    } item[];
} control_t;
#define CONTROL_MAGIC 0x9a503d32u
static control_t *ctl;
static size_t ctl_size;
static uint32_t ctl_handle;

static uint64_t rng = 0x5eed0fa4e9u; /* the handles: deterministic, per check */
static uint32_t next_handle(void) {
    for (;;) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        uint32_t h = (uint32_t)(rng >> 16) << 1; /* even, as dsm.c's */
        if (h) return h;
    }
}

static void ctl_add(uint32_t h) {
    if (ctl && ctl->nitems < ctl->maxitems) {
        ctl->item[ctl->nitems].handle = h;
        ctl->item[ctl->nitems++].refcnt = 1;
    }
}
static void ctl_remove(uint32_t h) {
    for (uint32_t i = 0; ctl && i < ctl->nitems; i++)
        if (ctl->item[i].handle == h) ctl->item[i].refcnt = 0;
}

/* ---- PostgreSQL's steps ---------------------------------------------------- */

#define STEP(cond, ...)                                      \
    do {                                                     \
        if (!(cond)) {                                       \
            snprintf(why, whylen, __VA_ARGS__);              \
            goto fail;                                       \
        }                                                    \
    } while (0)

/* dsm_impl_posix's create from its shm_open on: fd, the name's (h) */
static bool pg_create_fd(int fd, uint32_t h, size_t n, bool map, void **out, char *why, size_t whylen) {
    char name[32];
    pgname(name, h);
    int rc;
    sigset_t block, save;
    sigfillset(&block);
    sigdelset(&block, SIGQUIT);
    if (IsUnderPostmaster) sigprocmask(SIG_SETMASK, &block, &save);
    bool ok = true;
    if (ver == 15) {
        do {
            errno = SENTINEL;
            rc = ftruncate(fd, (off_t)n);
        } while (rc < 0 && errno == EINTR);
        if (rc != 0 || errno != SENTINEL) {
            snprintf(why, whylen, "%s: create: ftruncate gave %d, errno %d", name, rc, errno);
            ok = false;
        }
    }
    if (ok) {
        do {
            errno = SENTINEL;
            rc = posix_fallocate(fd, 0, (off_t)n);
        } while (rc == EINTR);
        if (rc != 0 || errno != SENTINEL) {
            snprintf(why, whylen, "%s: create: posix_fallocate gave %d, errno %d", name, rc, errno);
            ok = false;
        }
    }
    if (IsUnderPostmaster) sigprocmask(SIG_SETMASK, &save, NULL);
    void *a = MAP_FAILED;
    if (ok && !map) { /* PostgreSQL's error path: no mmap */
        *out = NULL;
        errno = SENTINEL;
        rc = close(fd);
        if (rc != 0 || errno != SENTINEL) {
            snprintf(why, whylen, "%s: close before mmap gave %d, errno %d", name, rc, errno);
            return false;
        }
        errno = SENTINEL;
        rc = shm_unlink(name);
        if (rc != 0 || errno != SENTINEL) {
            snprintf(why, whylen, "%s: shm_unlink after close gave %d, errno %d", name, rc, errno);
            return false;
        }
        return true;
    }
    if (ok) {
        errno = SENTINEL;
        a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_HASSEMAPHORE, fd, 0);
        if (a == MAP_FAILED || errno != SENTINEL) {
            snprintf(why, whylen, "%s: create: mmap gave %p, errno %d", name, a, errno);
            if (a != MAP_FAILED) munmap(a, n);
            ok = false;
        }
    }
    if (!ok) { /* backed out as PostgreSQL does */
        close(fd);
        shm_unlink(name);
        return false;
    }
    errno = SENTINEL;
    rc = close(fd);
    if (rc != 0 || errno != SENTINEL) {
        snprintf(why, whylen, "%s: create: close gave %d, errno %d", name, rc, errno);
        return false;
    }
    *out = a;
    return true;
}

/* dsm_impl_posix's shm_open of a create: the fd, or -1 and why */
static int pg_create_open(uint32_t h, char *why, size_t whylen) {
    char name[32];
    pgname(name, h);
    errno = SENTINEL;
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || errno != SENTINEL) {
        snprintf(why, whylen, "%s: create: shm_open gave %d, errno %d", name, fd, errno);
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* dsm_impl_posix's create: *out the mapping, or false and why */
static bool pg_create(uint32_t h, size_t n, bool map, void **out, char *why, size_t whylen) {
    int fd = pg_create_open(h, why, whylen);
    return fd >= 0 && pg_create_fd(fd, h, n, map, out, why, whylen);
}

/* dsm_impl_posix's attach: *out and *size the mapping */
static bool pg_attach(uint32_t h, void **out, size_t *size, char *why, size_t whylen) {
    char name[32];
    pgname(name, h);
    struct stat st;
    void *a = MAP_FAILED;
    errno = SENTINEL;
    int fd = shm_open(name, O_RDWR, 0600);
    STEP(fd >= 0 && errno == SENTINEL, "%s: attach: shm_open gave %d, errno %d", name, fd, errno);
    errno = SENTINEL;
    int rc = fstat(fd, &st);
    STEP(rc == 0 && errno == SENTINEL, "%s: attach: fstat gave %d, errno %d", name, rc, errno);
    errno = SENTINEL;
    a = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_HASSEMAPHORE, fd, 0);
    STEP(a != MAP_FAILED && errno == SENTINEL, "%s: attach: mmap(%lld) gave %p, errno %d", name,
         (long long)st.st_size, a, errno);
    errno = SENTINEL;
    rc = close(fd);
    fd = -1;
    STEP(rc == 0 && errno == SENTINEL, "%s: attach: close gave %d, errno %d", name, rc, errno);
    *out = a;
    *size = (size_t)st.st_size;
    return true;
fail:
    if (a != MAP_FAILED) munmap(a, (size_t)st.st_size);
    if (fd >= 0) close(fd);
    return false;
}

/* dsm_impl_posix's detach, and destroy (unlink) */
static bool pg_detach(uint32_t h, void *a, size_t n, bool unlink_too, char *why, size_t whylen) {
    char name[32];
    pgname(name, h);
    int rc;
    if (a) {
        errno = SENTINEL;
        rc = munmap(a, n);
        STEP(rc == 0 && errno == SENTINEL, "%s: munmap gave %d, errno %d", name, rc, errno);
    }
    if (unlink_too) {
        errno = SENTINEL;
        rc = shm_unlink(name);
        STEP(rc == 0 && errno == SENTINEL, "%s: shm_unlink gave %d, errno %d", name, rc, errno);
    }
    return true;
fail:
    return false;
}

/* ---- the workers (the postmaster's children) ---------------------------- */

enum op {
    OP_EXIT,
    OP_CREATE,        /* h, n, byte: create, fill with byte, keep mapped */
    OP_CLOSE_EARLY,   /* h, n: create to posix_fallocate, close, shm_unlink */
    OP_ATTACH,        /* h, n: attach; the size must be n */
    OP_ATTACH_CLOSE,  /* h: attach to the fstat, then close (PostgreSQL's error path) */
    OP_CHECK,         /* h, byte: every byte of the mapping is byte */
    OP_WRITE,         /* h, byte: fill the mapping */
    OP_DETACH,        /* h */
    OP_DESTROY,       /* h: munmap if mapped, shm_unlink */
    OP_STATE,         /* the library's state and the pool's counts */
    OP_PROBE,         /* h: shm_open(O_RDWR) of a name; mapped and read if opened */
    OP_EXEC_PROBE,    /* h: the same by a program exec'd (no globals set) */
    OP_DETACH_ALL,    /* munmap of the control segment's mapping */
    OP_UNLINK_PLAIN,  /* h: unlink() of its /dev/shm file */
    OP_RECOVER,       /* dsmpool_recover: what the pool runs itself when its slot table is full */
    OP_CHURN,         /* h a seed: CC_ROUNDS creates, each checked and destroyed CC_ALIVE later */
    OP_CREATE_UNREG,  /* h, n, byte: dsm_create killed before its registration: byte 1 stops
                       * after posix_fallocate (fd open, no mmap), 2 after mmap and close,
                       * 3 right after the shm_open (the file empty) */
    OP_CREATE_GIVEUP, /* h, n: n creations given up (handles h, h+1, ...): shm_open, close,
                       * shm_unlink, as dsm_impl_posix's error path after the shm_open */
    OP_CREATE_FORKED, /* h, n, byte: a create of h during which a forked child closes its copy of
                       * the fd, and one of h + byte (the same place in the name table) made in
                       * between; both mapped and filled (0x51, 0x52); then another child forked
                       * with the first calls posix_fallocate on its copy */
    OP_CREATE_LEAVE,  /* h: shm_open of a create, dsm_detach_all, then close and shm_unlink */
    OP_CREATE_NOEXCL, /* h, n: a create whose shm_open has O_CREAT without O_EXCL, mapped */
};

typedef struct {
    int op;
    uint32_t h;
    size_t n;
    int byte;
} cmd_t;

typedef struct {
    bool ok;
    char msg[600];
    /* OP_STATE */
    bool serving, has_pool, stats, lib_loaded;
    uint64_t generation, served, refused, unpin_failed;
    size_t live, free;
    /* OP_PROBE, OP_EXEC_PROBE */
    bool opened, opath, mapped;
    int err, first;
} reply_t;

typedef struct {
    pid_t pid;
    int to, from;
} worker;

/* a worker's mappings */
typedef struct {
    uint32_t h;
    void *a;
    size_t n;
} wmap_t;
#define MAXMAPS 128
static wmap_t wmaps[MAXMAPS];
static int nwmaps;

static int wmap_find(uint32_t h) {
    for (int i = 0; i < nwmaps; i++)
        if (wmaps[i].h == h) return i;
    return -1;
}

static void state_of(reply_t *r) {
    dsmpool_preload_state *s = get_state();
    r->serving = s->serving;
    r->generation = s->generation;
    r->served = s->served;
    r->refused = s->refused;
    r->unpin_failed = s->unpin_failed;
    r->has_pool = get_pool() != NULL;
    void *lib = dlopen(dsmpool_path, RTLD_NOW | RTLD_NOLOAD);
    r->lib_loaded = lib != NULL;
    r->stats = false;
    if (lib && r->has_pool) {
        int (*stats_fn)(dsmpool *, dsmpool_stats *, size_t);
        void *f = dlsym(lib, "dsmpool_get_stats_sized");
        memcpy(&stats_fn, &f, sizeof f);
        dsmpool_stats st;
        memset(&st, 0, sizeof st);
        if (f && stats_fn(get_pool(), &st, sizeof st) == 0) {
            r->stats = true;
            r->live = st.segments_live;
            r->free = 0;
            for (unsigned i = 0; i < st.nsubpools && i < DSMPOOL_MAX_NODES; i++) r->free += st.subpool[i].free;
        }
    }
    if (lib) dlclose(lib);
    snprintf(r->msg, sizeof r->msg, "serving %d, generation %llu, served %llu, refused %llu, unpin_failed %llu%s",
             r->serving, (unsigned long long)r->generation, (unsigned long long)r->served,
             (unsigned long long)r->refused, (unsigned long long)r->unpin_failed, s->note[0] ? ", note: " : "");
    if (s->note[0]) snprintf(r->msg + strlen(r->msg), sizeof r->msg - strlen(r->msg), "%s", s->note);
    r->ok = true;
}

/* shm_open(O_RDWR) of a name by whoever runs it; if it opens, what a
 * PostgreSQL attach would map (fstat, mmap, the first byte) */
static void probe(uint32_t h, reply_t *r) {
    char name[32];
    pgname(name, h);
    errno = 0;
    int fd = shm_open(name, O_RDWR, 0600);
    r->err = errno;
    r->opened = fd >= 0;
    r->first = -1;
    if (fd >= 0) {
        int fl = fcntl(fd, F_GETFL);
        r->opath = fl >= 0 && (fl & O_PATH) == O_PATH;
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_size > 0) {
            unsigned char *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            r->mapped = p != MAP_FAILED;
            if (p != MAP_FAILED) {
                r->first = p[0];
                munmap(p, (size_t)st.st_size);
            }
        }
        close(fd);
    }
    snprintf(r->msg, sizeof r->msg, "shm_open(%s, O_RDWR): %s%s%s%s", name, fd >= 0 ? "opened" : strerror(r->err),
             r->opath ? " (O_PATH: served from a pool)" : "", r->mapped ? ", mapped, first byte " : "",
             r->mapped ? (r->first ? "not zero" : "zero") : "");
    r->ok = true;
}

/* the probe by a program exec'd from this process: none of PostgreSQL's
 * globals set, so no pool; its answer in its exit status (probe_main) */
static void exec_probe(uint32_t h, reply_t *r) {
    char name[32];
    pgname(name, h);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "fakepm", "--probe", name, (char *)NULL);
        _exit(255);
    }
    int st = 0;
    while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    int code = pid < 0 ? 255 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    memset(r, 0, sizeof *r);
    r->ok = code < 210;
    r->opened = code >= 200 && code < 210;
    r->err = code < 200 ? code : 0;
    r->mapped = code == 200 || code == 201;
    r->first = code == 200 ? 0 : code == 201 ? 1 : -1;
    snprintf(r->msg, sizeof r->msg, "exec'd program: shm_open(%s, O_RDWR): %s%s", name,
             code < 200 ? strerror(code) : code < 210 ? "opened" : "did not run",
             code == 200 ? ", mapped: zeros" : code == 201 ? ", mapped: data" : "");
}

static int probe_main(const char *name) {
    uint32_t h;
    if (strncmp(name, "/PostgreSQL.", 12) != 0 || sscanf(name + 12, "%u", &h) != 1) return 254;
    reply_t r;
    memset(&r, 0, sizeof r);
    probe(h, &r);
    if (!r.opened) return r.err > 0 && r.err < 200 ? r.err : 253;
    return r.mapped ? (r.first == 0 ? 200 : 201) : 202;
}

static void serve(const cmd_t *c, reply_t *r) {
    char *why = r->msg;
    size_t whylen = sizeof r->msg;
    int i = wmap_find(c->h);
    memset(r, 0, sizeof *r);
    switch (c->op) {
    case OP_CREATE: {
        void *a;
        if (nwmaps == MAXMAPS) {
            snprintf(why, whylen, "the worker's table is full");
            return;
        }
        if (!pg_create(c->h, c->n, true, &a, why, whylen)) {
            r->err = errno; /* the shm_open's, where that failed */
            return;
        }
        memset(a, c->byte, c->n);
        wmaps[nwmaps++] = (wmap_t){c->h, a, c->n};
        ctl_add(c->h);
        r->ok = true;
        return;
    }
    case OP_CLOSE_EARLY: {
        void *a;
        r->ok = pg_create(c->h, c->n, false, &a, why, whylen);
        return;
    }
    case OP_CREATE_UNREG: {
        char name[32];
        pgname(name, c->h);
        if (c->byte == 2) { /* the whole create, then no ctl_add: the kill comes next */
            void *a;
            r->ok = pg_create(c->h, c->n, true, &a, why, whylen);
            return;
        }
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (c->byte == 3) {
            r->ok = fd >= 0;
            snprintf(why, whylen, "%s: shm_open %d (%s)", name, fd, fd < 0 ? strerror(errno) : "made");
            return; /* fd left open, nothing more done: the process dies here */
        }
        int rc = fd < 0 ? errno : ver == 15 && ftruncate(fd, (off_t)c->n) != 0 ? errno
                                                                                 : posix_fallocate(fd, 0, (off_t)c->n);
        r->ok = fd >= 0 && rc == 0;
        snprintf(why, whylen, "%s: shm_open %d, then %s", name, fd, strerror(rc));
        return; /* fd left open: the process dies here */
    }
    case OP_CREATE_GIVEUP: {
        char name[32];
        for (size_t k = 0; k < c->n; k++) {
            pgname(name, c->h + (uint32_t)k);
            errno = SENTINEL;
            int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
            if (fd < 0 || errno != SENTINEL || close(fd) != 0 || shm_unlink(name) != 0) {
                snprintf(why, whylen, "%s: shm_open %d, errno %d", name, fd, errno);
                return;
            }
        }
        r->ok = true;
        return;
    }
    case OP_CREATE_FORKED: {
        void *a, *b;
        if (nwmaps + 2 > MAXMAPS) {
            snprintf(why, whylen, "the worker's table is full");
            return;
        }
        int fd = pg_create_open(c->h, why, whylen), go[2] = {-1, -1};
        if (fd < 0) return;
        if (pipe(go) != 0) {
            snprintf(why, whylen, "pipe: %s", strerror(errno));
            close(fd);
            return;
        }
        fflush(stdout);
        pid_t pid = fork(), late = pid > 0 ? fork() : -1;
        if (pid == 0) _exit(close(fd) == 0 ? 0 : 1); /* a child of the creator, done with its copy */
        if (late == 0) { /* another, whose posix_fallocate of its copy comes once the creation is done */
            char x;
            _exit(read(go[0], &x, 1) == 1 && posix_fallocate(fd, 0, (off_t)c->n) == 0 ? 0 : 1);
        }
        close(go[0]);
        int st = 0, st2 = 0;
        while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        uint32_t h2 = c->h + (uint32_t)c->byte;
        bool ok = pid > 0 && late > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!ok) snprintf(why, whylen, "the forked child's close: status %d", st);
        if (ok && (ok = pg_create(h2, c->n, true, &b, why, whylen))) {
            memset(b, 0x52, c->n);
            wmaps[nwmaps++] = (wmap_t){h2, b, c->n};
            ctl_add(h2);
        }
        if (!ok) close(fd); /* (pg_create_fd closes it either way) */
        else if ((ok = pg_create_fd(fd, c->h, c->n, true, &a, why, whylen))) {
            memset(a, 0x51, c->n);
            wmaps[nwmaps++] = (wmap_t){c->h, a, c->n};
            ctl_add(c->h);
        }
        if (write(go[1], "g", 1) != 1) ok = false; /* (a child that is gone: its status says) */
        close(go[1]);
        while (late > 0 && waitpid(late, &st2, 0) < 0 && errno == EINTR) {
        }
        if (ok && (!WIFEXITED(st2) || WEXITSTATUS(st2) != 0)) {
            snprintf(why, whylen, "the late child's posix_fallocate: status %d", st2);
            ok = false;
        }
        r->ok = ok;
        return;
    }
    case OP_CREATE_LEAVE: {
        char name[32];
        pgname(name, c->h);
        int fd = pg_create_open(c->h, why, whylen);
        if (fd < 0) return;
        int rc = munmap(ctl, ctl_size); /* dsm_detach_all: the process leaves the pool */
        ctl = NULL;
        errno = SENTINEL;
        int rc2 = close(fd), e2 = errno;
        int rc3 = shm_unlink(name);
        r->ok = rc == 0 && rc2 == 0 && e2 == SENTINEL && rc3 == 0;
        snprintf(why, whylen, "%s: munmap of the control segment %d, close %d (errno %d), shm_unlink %d", name, rc,
                 rc2, e2, rc3);
        return;
    }
    case OP_CREATE_NOEXCL: {
        char name[32];
        pgname(name, c->h);
        errno = SENTINEL;
        int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
        if (fd < 0) {
            snprintf(why, whylen, "%s: shm_open(O_CREAT) gave %d, errno %d", name, fd, errno);
            return;
        }
        void *a;
        if (nwmaps == MAXMAPS || !pg_create_fd(fd, c->h, c->n, true, &a, why, whylen)) return;
        memset(a, 0x53, c->n);
        wmaps[nwmaps++] = (wmap_t){c->h, a, c->n};
        r->ok = true;
        return;
    }
    case OP_ATTACH: {
        void *a;
        size_t n;
        if (nwmaps == MAXMAPS) {
            snprintf(why, whylen, "the worker's table is full");
            return;
        }
        if (!pg_attach(c->h, &a, &n, why, whylen)) return;
        wmaps[nwmaps++] = (wmap_t){c->h, a, n};
        if (n != c->n) {
            snprintf(why, whylen, "fstat after attach gave size %zu, not %zu", n, c->n);
            return;
        }
        r->ok = true;
        return;
    }
    case OP_ATTACH_CLOSE: {
        char name[32];
        pgname(name, c->h);
        struct stat st;
        errno = SENTINEL;
        int fd = shm_open(name, O_RDWR, 0600);
        int rc = fd >= 0 ? fstat(fd, &st) : -1;
        int e1 = errno;
        errno = SENTINEL;
        int rc2 = fd >= 0 ? close(fd) : -1;
        r->ok = fd >= 0 && rc == 0 && e1 == SENTINEL && rc2 == 0 && errno == SENTINEL;
        if (!r->ok)
            snprintf(why, whylen, "%s: shm_open %d, fstat %d (errno %d), close %d (errno %d)", name, fd, rc, e1, rc2,
                     errno);
        return;
    }
    case OP_CHECK:
    case OP_WRITE:
        if (i < 0) {
            snprintf(why, whylen, "not mapped here");
            return;
        }
        if (c->op == OP_WRITE) {
            memset(wmaps[i].a, c->byte, wmaps[i].n);
            r->ok = true;
            return;
        }
        for (size_t k = 0; k < wmaps[i].n; k++)
            if (((unsigned char *)wmaps[i].a)[k] != (unsigned char)c->byte) {
                snprintf(why, whylen, "byte %zu of %zu is %#x, not %#x", k, wmaps[i].n,
                         ((unsigned char *)wmaps[i].a)[k], (unsigned char)c->byte);
                return;
            }
        r->ok = true;
        return;
    case OP_DETACH:
    case OP_DESTROY:
        if (c->op == OP_DETACH && i < 0) {
            snprintf(why, whylen, "not mapped here");
            return;
        }
        r->ok = pg_detach(c->h, i < 0 ? NULL : wmaps[i].a, i < 0 ? 0 : wmaps[i].n, c->op == OP_DESTROY, why, whylen);
        if (i >= 0) wmaps[i] = wmaps[--nwmaps];
        if (c->op == OP_DESTROY) ctl_remove(c->h);
        return;
    case OP_STATE:
        state_of(r);
        return;
    case OP_PROBE:
        probe(c->h, r);
        return;
    case OP_EXEC_PROBE:
        exec_probe(c->h, r);
        return;
    case OP_DETACH_ALL: {
        errno = SENTINEL;
        int rc = munmap(ctl, ctl_size);
        r->ok = rc == 0 && errno == SENTINEL;
        if (!r->ok) snprintf(why, whylen, "munmap of the control segment gave %d, errno %d", rc, errno);
        ctl = NULL;
        return;
    }
    case OP_RECOVER: {
        void *lib = dlopen(dsmpool_path, RTLD_NOW | RTLD_NOLOAD);
        void *f = lib ? dlsym(lib, "dsmpool_recover") : NULL;
        int (*recover)(dsmpool *);
        memcpy(&recover, &f, sizeof f);
        int rc = f && get_pool() ? recover(get_pool()) : -ENOENT;
        if (lib) dlclose(lib);
        r->ok = rc == 0;
        if (!r->ok) snprintf(why, whylen, "dsmpool_recover: %d", rc);
        return;
    }
    case OP_CHURN: {
        uint32_t live[CC_ALIVE] = {0};
        uint64_t x = c->h | (uint64_t)c->h << 32;
        uint64_t served0 = get_state()->served;
        for (int round = 0; round < CC_ROUNDS + CC_ALIVE; round++) {
            int k = round % CC_ALIVE;
            if (live[k]) {
                int j = wmap_find(live[k]);
                unsigned char want = (unsigned char)(live[k] >> 3);
                if (j < 0 || ((unsigned char *)wmaps[j].a)[0] != want ||
                    ((unsigned char *)wmaps[j].a)[wmaps[j].n - 1] != want) {
                    snprintf(why, whylen, "round %d: segment %u lost its bytes", round, live[k]);
                    return;
                }
                if (!pg_detach(live[k], wmaps[j].a, wmaps[j].n, true, why, whylen)) return;
                wmaps[j] = wmaps[--nwmaps];
                live[k] = 0;
            }
            if (round >= CC_ROUNDS) continue;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            uint32_t h = (uint32_t)(x >> 20) << 1 | 1; /* odd: none of the postmaster's even ones */
            size_t n = 4096 * (1 + (size_t)(x % 40)) + (size_t)(x >> 50) % 4096;
            void *a;
            if (!pg_create(h, n, true, &a, why, whylen)) {
                if (errno == EEXIST) continue; /* another worker's: dsm_create takes another */
                return;
            }
            memset(a, (unsigned char)(h >> 3), n);
            wmaps[nwmaps++] = (wmap_t){h, a, n};
            live[k] = h;
        }
        uint64_t served = get_state()->served - served0;
        r->ok = served > 0 && get_state()->refused == 0;
        snprintf(why, whylen, "%llu served, %llu refused", (unsigned long long)served,
                 (unsigned long long)get_state()->refused);
        return;
    }
    case OP_UNLINK_PLAIN: {
        char path[64];
        snprintf(path, sizeof path, "/dev/shm/PostgreSQL.%u", c->h);
        r->ok = unlink(path) == 0;
        if (!r->ok) snprintf(why, whylen, "unlink(%s): %s", path, strerror(errno));
        return;
    }
    default:
        snprintf(why, whylen, "unknown command %d", c->op);
    }
}

static bool full_read(int fd, void *buf, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        got += (size_t)k;
    }
    return true;
}
static bool full_write(int fd, const void *buf, size_t n) {
    for (size_t put = 0; put < n;) {
        ssize_t k = write(fd, (const char *)buf + put, n - put);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        put += (size_t)k;
    }
    return true;
}

/* A child of the postmaster, as PostgreSQL forks one. */
static worker spawn(void) {
    int down[2], up[2];
    worker w = {-1, -1, -1};
    if (pipe2(down, O_CLOEXEC) != 0) return w;
    if (pipe2(up, O_CLOEXEC) != 0) {
        close(down[0]);
        close(down[1]);
        return w;
    }
    fflush(stdout);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        IsUnderPostmaster = true; /* InitPostmasterChild */
        /* gone with the postmaster, whatever becomes of it */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(3);
        close(down[1]);
        close(up[0]);
        cmd_t c;
        reply_t r;
        while (full_read(down[0], &c, sizeof c)) {
            if (c.op == OP_EXIT) {
                fflush(stdout);
                exit(0); /* proc_exit */
            }
            serve(&c, &r);
            if (!full_write(up[1], &r, sizeof r)) break;
        }
        exit(3); /* the postmaster went away */
    }
    close(down[0]);
    close(up[1]);
    if (pid < 0) {
        close(down[1]);
        close(up[0]);
        return w;
    }
    w = (worker){pid, down[1], up[0]};
    return w;
}

static int wait_status(pid_t pid) {
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* one command to a worker, its answer in *r (r->ok false if it died) */
static bool rpc(worker *w, int op, uint32_t h, size_t n, int byte, reply_t *r) {
    cmd_t c = {op, h, n, byte};
    memset(r, 0, sizeof *r);
    if (w->pid <= 0) {
        snprintf(r->msg, sizeof r->msg, "no worker (fork failed)");
        return false;
    }
    if (full_write(w->to, &c, sizeof c) && full_read(w->from, r, sizeof *r)) return r->ok;
    int st = wait_status(w->pid);
    w->pid = -1;
    snprintf(r->msg, sizeof r->msg, "worker died during command %d: %s %d", op, st >= 128 ? "signal" : "status",
             st >= 128 ? st - 128 : st);
    r->ok = false;
    return false;
}

/* the worker's exit status (128 + signal) */
static int finish(worker *w) {
    if (w->pid <= 0) return -1;
    cmd_t c = {OP_EXIT, 0, 0, 0};
    full_write(w->to, &c, sizeof c);
    close(w->to);
    close(w->from);
    int st = wait_status(w->pid);
    w->pid = -1;
    return st;
}

/* a worker's exit status, told nothing (it was killed) */
static int reap(worker *w) {
    if (w->pid <= 0) return -1;
    close(w->to);
    close(w->from);
    int st = wait_status(w->pid);
    w->pid = -1;
    return st;
}

/* ---- the postmaster's own steps ----------------------------------------- */

/* a file's stat in /dev/shm: mode, blocks, size; false if it is not there */
static bool shm_stat(uint32_t h, struct stat *st) {
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/PostgreSQL.%u", h);
    return stat(path, st) == 0;
}

/* h's file is of size n, with mode and data blocks (or none) as given;
 * what it is in why */
static bool file_is(uint32_t h, size_t n, unsigned mode, bool data, char *why, size_t whylen) {
    struct stat st;
    if (!shm_stat(h, &st)) {
        snprintf(why, whylen, "/dev/shm/PostgreSQL.%u: %s", h, strerror(errno));
        return false;
    }
    snprintf(why, whylen, "file: mode %04o, %lld blocks, size %lld", (unsigned)(st.st_mode & 07777),
             (long long)st.st_blocks, (long long)st.st_size);
    return (st.st_mode & 07777) == mode && (st.st_blocks > 0) == data && (size_t)st.st_size == n;
}
/* the pool's: sparse, mode 0000 */
static bool is_pool_file(uint32_t h, size_t n, char *why, size_t whylen) {
    return file_is(h, n, 0, false, why, whylen);
}
/* PostgreSQL's own: data blocks, mode 0600 */
static bool is_own_file(uint32_t h, size_t n, char *why, size_t whylen) {
    return file_is(h, n, 0600, true, why, whylen);
}

/* dsm_postmaster_startup: a new control segment */
static bool pm_control(char *why, size_t whylen) {
    void *a;
    uint32_t h = next_handle();
    ctl_size = sizeof(control_t) + (size_t)SLOTS(MaxBackends) * sizeof ctl->item[0];
    if (!pg_create(h, ctl_size, true, &a, why, whylen)) return false;
    ctl = a;
    ctl_handle = h;
    ctl->magic = CONTROL_MAGIC;
    ctl->nitems = 0;
    ctl->maxitems = (uint32_t)SLOTS(MaxBackends);
    return true;
}

/* dsm_postmaster_shutdown: the names the control segment lists, then the
 * control segment itself */
static bool pm_shutdown(char *why, size_t whylen) {
    char name[32];
    for (uint32_t i = 0; i < ctl->nitems; i++) {
        if (!ctl->item[i].refcnt) continue;
        pgname(name, ctl->item[i].handle);
        errno = SENTINEL;
        int rc = shm_unlink(name);
        if (rc != 0 || errno != SENTINEL) {
            snprintf(why, whylen, "postmaster: shm_unlink(%s) gave %d, errno %d", name, rc, errno);
            return false;
        }
    }
    bool ok = pg_detach(ctl_handle, ctl, ctl_size, true, why, whylen);
    ctl = NULL;
    return ok;
}

/* the postmaster's own state */
static reply_t pm_state(void) {
    reply_t r;
    memset(&r, 0, sizeof r);
    state_of(&r);
    return r;
}

/* a check's first steps: the control segment, checked */
static bool start(void) {
    char why[600];
    if (!pm_control(why, sizeof why)) {
        report("control_segment_created", false, "%s", why);
        return false;
    }
    return true;
}

#define EXPECT(name, cond, ...) report(name, (cond), __VA_ARGS__)
/* a step that says why only when it went wrong */
static void step(const char *name, bool ok, const char *why) { report(name, ok, "%s", ok ? "" : why); }

/* ---- the checks (each in a postmaster of its own, in a /dev/shm of its own) */

/* [served] */
static void check_served(void) {
    char why[600];
    reply_t r, s;
    if (!start()) return;
    EXPECT("control_segment_is_not_the_pool_s", is_own_file(ctl_handle, ctl_size, why, sizeof why), "%s", why);
    r = pm_state();
    EXPECT("postmaster_makes_the_pool_at_its_control_segment", r.serving && r.generation == 1 && r.lib_loaded,
           "%s", r.msg);
    worker a = spawn(), b = spawn();
    uint32_t h = next_handle();
    rpc(&a, OP_STATE, 0, 0, 0, &s);
    bool made = rpc(&a, OP_CREATE, h, SEG_SIZE, 0x5a, &r);
    EXPECT("create_keeps_errno", made, "%s", made ? "every call left the sentinel" : r.msg);
    rpc(&a, OP_STATE, 0, 0, 0, &r);
    EXPECT("created_segment_is_served", made && r.served == s.served + 1 && r.refused == s.refused, "%s", r.msg);
    EXPECT("served_segment_file_is_sparse_mode_0000_of_its_size", is_pool_file(h, SEG_SIZE, why, sizeof why), "%s",
           why);
    bool att = rpc(&b, OP_ATTACH, h, SEG_SIZE, 0, &r);
    EXPECT("attach_keeps_errno_and_fstat_gives_the_size", att, "%s", att ? "every call left the sentinel" : r.msg);
    bool seen = att && rpc(&b, OP_CHECK, h, 0, 0x5a, &r);
    bool back = seen && rpc(&b, OP_WRITE, h, 0, 0xa5, &r) && rpc(&a, OP_CHECK, h, 0, 0xa5, &r);
    EXPECT("two_children_exchange_bytes_both_ways", seen && back, "%s",
           seen && back ? "B read A's bytes, A read B's" : r.msg);
    /* dsm_create's loop takes another handle on EEXIST */
    bool twice = !rpc(&b, OP_CREATE, h, SEG_SIZE, 0x77, &r) && r.err == EEXIST &&
                 rpc(&a, OP_CHECK, h, 0, 0xa5, &r);
    EXPECT("create_of_an_existing_name_is_eexist_and_harms_nothing", twice, "%s", r.msg);
    bool det = rpc(&b, OP_DETACH, h, 0, 0, &r);
    EXPECT("detach_keeps_errno", det, "%s", r.msg);
    int sa = finish(&a), sb = finish(&b);
    EXPECT("children_exit_cleanly", sa == 0 && sb == 0, "exit statuses %d and %d", sa, sb);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [destroy] */
static void check_destroy(void) {
    char why[600];
    reply_t r, s, t;
    if (!start()) return;
    worker a = spawn(), b = spawn(), c = spawn();
    uint32_t h = next_handle();
    rpc(&a, OP_STATE, 0, 0, 0, &s);
    bool ok = rpc(&a, OP_CREATE, h, SEG_SIZE, 0x11, &r) && rpc(&b, OP_ATTACH, h, SEG_SIZE, 0, &r) &&
              rpc(&a, OP_DETACH, h, 0, 0, &r);
    EXPECT("create_attach_detach", ok, "%s", r.msg);
    rpc(&a, OP_STATE, 0, 0, 0, &t);
    EXPECT("detached_segment_stays_while_attached", t.live == s.live + 1 && t.free < s.free,
           "segments %zu (before the create %zu), free %zu (before %zu)", t.live, s.live, t.free, s.free);
    bool d = rpc(&b, OP_DESTROY, h, 0, 0, &r);
    EXPECT("destroy_keeps_errno", d, "%s", d ? "munmap and shm_unlink left the sentinel" : r.msg);
    struct stat st;
    bool gone = !shm_stat(h, &st) && errno == ENOENT;
    rpc(&c, OP_PROBE, h, 0, 0, &r);
    EXPECT("destroyed_name_is_gone", gone && !r.opened && r.err == ENOENT, "stat: %s; another child's %s",
           gone ? "ENOENT" : "still there", r.msg);
    rpc(&c, OP_STATE, 0, 0, 0, &t);
    EXPECT("destroyed_segment_s_memory_is_back", t.stats && t.live == s.live && t.free == s.free &&
               t.unpin_failed == 0,
           "segments %zu (before %zu), free %zu (before %zu), unpin_failed %llu", t.live, s.live, t.free, s.free,
           (unsigned long long)t.unpin_failed);
    int sa = finish(&a), sb = finish(&b), sc = finish(&c);
    EXPECT("children_exit_cleanly", sa == 0 && sb == 0 && sc == 0, "exit statuses %d, %d, %d", sa, sb, sc);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [no pool] */
static void check_no_pool(void) {
    char why[600];
    reply_t r;
    if (!start()) return;
    worker a = spawn();
    uint32_t h = next_handle();
    bool made = rpc(&a, OP_CREATE, h, SEG_SIZE, 0x5a, &r);
    EXPECT("create", made, "%s", r.msg);
    EXPECT("served_segment_file_is_sparse_mode_0000_of_its_size", is_pool_file(h, SEG_SIZE, why, sizeof why), "%s",
           why);
    /* a program exec'd by a child (archive_command's shell, say) */
    rpc(&a, OP_EXEC_PROBE, h, 0, 0, &r);
    EXPECT("program_without_the_pool_cannot_open_a_pool_name", r.ok && !r.opened && r.err == EACCES, "%s", r.msg);
    /* a child of the next generation (the control segment was found
     * corrupt and left) */
    step("next_control_segment", pm_control(why, sizeof why), why);
    worker n = spawn();
    rpc(&n, OP_STATE, 0, 0, 0, &r);
    bool next = r.serving && r.generation == 2;
    rpc(&n, OP_PROBE, h, 0, 0, &r);
    EXPECT("next_generation_child_cannot_open_an_old_pool_name",
           next && !r.opened && (r.err == EACCES || r.err == ENOENT), "%s%s",
           next ? "" : "(not a child of generation 2) ", r.msg);
    /* the old generation's memory went with it (the library's [generation]):
     * its child reads zeros, and may still write */
    bool still = rpc(&a, OP_CHECK, h, 0, 0, &r) && rpc(&a, OP_WRITE, h, 0, 0x77, &r) &&
                 rpc(&a, OP_CHECK, h, 0, 0x77, &r);
    EXPECT("old_child_s_mapping_is_emptied_and_still_works", still, "%s", r.msg);
    int sa = finish(&a), sn = finish(&n);
    EXPECT("children_exit_cleanly", sa == 0 && sn == 0, "exit statuses %d and %d", sa, sn);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [close early] */
static void check_close_early(void) {
    char why[600];
    reply_t r, s, t;
    if (!start()) return;
    worker a = spawn(), b = spawn();
    uint32_t h = next_handle();
    rpc(&a, OP_STATE, 0, 0, 0, &s);
    bool ok = rpc(&a, OP_CLOSE_EARLY, h, SEG_SIZE, 0, &r);
    EXPECT("close_before_mmap_then_shm_unlink_keep_errno", ok, "%s", ok ? "every call left the sentinel" : r.msg);
    rpc(&a, OP_STATE, 0, 0, 0, &t);
    struct stat st;
    bool gone = !shm_stat(h, &st) && errno == ENOENT;
    EXPECT("close_before_mmap_loses_nothing", gone && t.served == s.served + 1 && t.live == s.live &&
               t.free == s.free && t.unpin_failed == 0,
           "name %s; served %llu (before %llu); segments %zu (before %zu), free %zu (before %zu), unpin_failed %llu",
           gone ? "gone" : "still there", (unsigned long long)t.served, (unsigned long long)s.served, t.live, s.live,
           t.free, s.free, (unsigned long long)t.unpin_failed);
    /* an attach that fails after its shm_open (fstat, mmap) closes the fd */
    uint32_t h2 = next_handle();
    ok = rpc(&a, OP_CREATE, h2, SEG_SIZE, 0x44, &r) && rpc(&b, OP_ATTACH_CLOSE, h2, 0, 0, &r) &&
         rpc(&a, OP_DESTROY, h2, 0, 0, &r);
    rpc(&b, OP_STATE, 0, 0, 0, &t);
    EXPECT("attach_closed_before_mmap_loses_nothing", ok && t.live == s.live && t.free == s.free, "%s",
           ok ? "" : r.msg);
    /* the handle again, to its end */
    ok = rpc(&a, OP_CREATE, h, SEG_SIZE, 0x33, &r) && rpc(&a, OP_DESTROY, h, 0, 0, &r);
    rpc(&a, OP_STATE, 0, 0, 0, &t);
    EXPECT("same_handle_after_the_error_path", ok && t.live == s.live && t.free == s.free, "%s",
           ok ? "created and destroyed, nothing lost" : r.msg);
    int sa = finish(&a), sb = finish(&b);
    EXPECT("children_exit_cleanly", sa == 0 && sb == 0, "exit statuses %d and %d", sa, sb);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [crash restart] */
static void check_crash_restart(void) {
    char why[600];
    reply_t r;
    if (!start()) return;
    uint32_t old_ctl = ctl_handle;
    worker a = spawn(), b = spawn(), k = spawn();
    uint32_t h = next_handle();
    bool ok = rpc(&a, OP_CREATE, h, SEG_SIZE, 0x11, &r) && rpc(&b, OP_ATTACH, h, SEG_SIZE, 0, &r) &&
              rpc(&k, OP_ATTACH, h, SEG_SIZE, 0, &r);
    EXPECT("create_and_attach", ok, "%s", r.msg);
    /* the crash: a child dies holding a mapping; PostgreSQL waits for the
     * others to go, but here a and b stay, holding theirs */
    if (k.pid > 0) kill(k.pid, SIGKILL);
    int sk = reap(&k);
    EXPECT("a_child_is_killed", sk == 128 + SIGKILL, "exit status %d", sk);
    step("postmaster_removes_its_segments", pm_shutdown(why, sizeof why), why);
    struct stat st;
    bool gone = !shm_stat(h, &st) && !shm_stat(old_ctl, &st);
    r = pm_state();
    EXPECT("generation_ends_with_the_control_segment_s_name", gone && !r.serving && !r.has_pool &&
               r.generation == 1,
           "names %s; %s", gone ? "gone" : "still there", r.msg);
    ok = rpc(&a, OP_WRITE, h, 0, 0x22, &r) && rpc(&a, OP_CHECK, h, 0, 0x22, &r);
    EXPECT("old_child_writes_and_reads_its_mapping", ok, "%s", r.msg);
    ok = rpc(&a, OP_DETACH, h, 0, 0, &r);
    EXPECT("old_child_detaches", ok, "%s", r.msg);
    ok = rpc(&b, OP_DETACH, h, 0, 0, &r);
    EXPECT("old_child_detaches_last", ok, "%s", r.msg);
    int sa = finish(&a), sb = finish(&b);
    EXPECT("old_children_exit_cleanly", sa == 0 && sb == 0, "exit statuses %d and %d", sa, sb);
    /* the restart */
    step("new_control_segment", pm_control(why, sizeof why), why);
    r = pm_state();
    EXPECT("new_control_segment_makes_a_new_pool", r.serving && r.generation == 2, "%s", r.msg);
    worker c = spawn(), d = spawn();
    uint32_t h2 = next_handle();
    ok = rpc(&c, OP_CREATE, h2, SEG_SIZE, 0x33, &r) && rpc(&d, OP_ATTACH, h2, SEG_SIZE, 0, &r) &&
         rpc(&d, OP_CHECK, h2, 0, 0x33, &r);
    EXPECT("new_children_share_a_segment", ok, "%s", r.msg);
    rpc(&c, OP_STATE, 0, 0, 0, &r);
    EXPECT("new_children_are_served_from_the_new_pool",
           ok && r.serving && r.generation == 2 && r.served == 1 && is_pool_file(h2, SEG_SIZE, why, sizeof why),
           "%s; %s", r.msg, why);
    ok = rpc(&d, OP_DETACH, h2, 0, 0, &r) && rpc(&c, OP_DESTROY, h2, 0, 0, &r);
    EXPECT("new_segment_destroyed", ok, "%s", r.msg);
    int sc = finish(&c), sd = finish(&d);
    EXPECT("new_children_exit_cleanly", sc == 0 && sd == 0, "exit statuses %d and %d", sc, sd);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [corrupt control] */
static void check_corrupt_control(void) {
    char why[600];
    reply_t r, s;
    if (!start()) return;
    uint32_t old_ctl = ctl_handle;
    worker a = spawn();
    uint32_t h = next_handle();
    bool ok = rpc(&a, OP_CREATE, h, SEG_SIZE, 0x11, &r);
    EXPECT("create", ok, "%s", r.msg);
    /* dsm_postmaster_shutdown found the control segment corrupt and left
     * it, and every name it lists; dsm_postmaster_startup makes another */
    step("second_control_segment", pm_control(why, sizeof why), why);
    struct stat st;
    r = pm_state();
    EXPECT("second_control_segment_starts_a_new_generation", r.serving && r.generation == 2, "%s", r.msg);
    /* the old control segment is PostgreSQL's, left as it left it; the old
     * pool's names may be left (as stock leaves them) or removed */
    bool old_ctl_left = shm_stat(old_ctl, &st), old_name_left = shm_stat(h, &st);
    EXPECT("old_control_segment_is_left_to_postgresql", old_ctl_left, "old control segment %s; the old pool's "
           "segment's name %s", old_ctl_left ? "left" : "removed", old_name_left ? "left" : "removed");
    worker b = spawn(), c = spawn();
    rpc(&b, OP_STATE, 0, 0, 0, &s);
    uint32_t h2 = next_handle();
    ok = rpc(&b, OP_CREATE, h2, SEG_SIZE, 0x22, &r);
    rpc(&b, OP_STATE, 0, 0, 0, &r);
    EXPECT("new_child_is_served_from_a_fresh_pool",
           ok && s.serving && s.generation == 2 && s.stats && s.live == 1 && r.live == 2 && r.served == 1,
           "generation %llu; segments before its create %zu (the name table alone: 1), after %zu; %s",
           (unsigned long long)s.generation, s.live, r.live, r.msg);
    EXPECT("new_segment_is_served", is_pool_file(h2, SEG_SIZE, why, sizeof why), "%s", why);
    rpc(&a, OP_PROBE, h2, 0, 0, &r);
    EXPECT("old_pool_s_child_does_not_find_the_new_segment", r.ok && !r.opened && r.err == EACCES, "%s", r.msg);
    ok = rpc(&c, OP_ATTACH, h2, SEG_SIZE, 0, &r) && rpc(&c, OP_CHECK, h2, 0, 0x22, &r);
    EXPECT("new_children_share_the_new_segment", ok, "%s", r.msg);
    ok = rpc(&a, OP_WRITE, h, 0, 0x44, &r) && rpc(&a, OP_CHECK, h, 0, 0x44, &r) && rpc(&a, OP_DETACH, h, 0, 0, &r);
    EXPECT("old_child_uses_and_detaches_its_mapping", ok, "%s", r.msg);
    ok = rpc(&c, OP_DETACH, h2, 0, 0, &r) && rpc(&b, OP_DESTROY, h2, 0, 0, &r);
    rpc(&b, OP_STATE, 0, 0, 0, &r);
    EXPECT("new_segment_destroyed_loses_nothing", ok && r.live == s.live && r.free == s.free,
           "segments %zu (before %zu), free %zu (before %zu)", r.live, s.live, r.free, s.free);
    int sa = finish(&a), sb = finish(&b), sc = finish(&c);
    EXPECT("children_exit_cleanly", sa == 0 && sb == 0 && sc == 0, "exit statuses %d, %d, %d", sa, sb, sc);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [orphans] */
static void check_orphans(void) {
    char why[600];
    reply_t r;
    if (!start()) return;
    worker a = spawn(), b = spawn(), c = spawn(), d = spawn(), u = spawn();
    uint32_t h1 = next_handle(), h2 = next_handle(), h3 = next_handle(), h4 = next_handle();
    bool ok = rpc(&d, OP_CREATE_UNREG, h4, SEG_SIZE, 3, &r);
    struct stat st;
    EXPECT("killed_right_after_shm_open", ok && shm_stat(h4, &st) && st.st_size == 0, "%s", r.msg);
    ok = rpc(&a, OP_CREATE_UNREG, h1, SEG_SIZE, 1, &r);
    EXPECT("killed_after_posix_fallocate", ok && is_pool_file(h1, SEG_SIZE, why, sizeof why), "%s; %s", r.msg, why);
    ok = rpc(&b, OP_CREATE_UNREG, h2, SEG_SIZE, 2, &r);
    EXPECT("killed_after_mmap_and_close", ok && is_pool_file(h2, SEG_SIZE, why, sizeof why), "%s; %s", r.msg, why);
    /* h3's entry names a file that is gone: another file of that name (not
     * the pool's, another inode) must outlive the sweep */
    ok = rpc(&c, OP_CREATE_UNREG, h3, SEG_SIZE, 2, &r) && rpc(&u, OP_UNLINK_PLAIN, h3, 0, 0, &r);
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/PostgreSQL.%u", h3);
    int fd = ok ? open(path, O_RDWR | O_CREAT | O_EXCL, 0600) : -1;
    EXPECT("another_file_takes_a_killed_segment_s_name", fd >= 0, "%s: %s", path, ok ? strerror(errno) : r.msg);
    if (fd >= 0) close(fd);
    worker *all[] = {&a, &b, &c, &d};
    int killed = 0;
    for (int i = 0; i < 4; i++) {
        if (all[i]->pid > 0) kill(all[i]->pid, SIGKILL);
        killed += reap(all[i]) == 128 + SIGKILL;
    }
    int su = finish(&u);
    EXPECT("creators_killed", killed == 4 && su == 0, "%d of 4 killed; the other exited %d", killed, su);
    /* the crash restart: PostgreSQL removes what its control segment lists
     * (none of these), then the control segment: the generation's end */
    step("postmaster_removes_its_segments", pm_shutdown(why, sizeof why), why);
    bool g1 = !shm_stat(h1, &st), g2 = !shm_stat(h2, &st), g4 = !shm_stat(h4, &st);
    bool kept = shm_stat(h3, &st) && st.st_size == 0;
    EXPECT("generation_s_end_removes_the_killed_creators_names", g1 && g2 && g4, "after posix_fallocate: %s; "
           "after mmap: %s; after the shm_open: %s", g1 ? "gone" : "left", g2 ? "gone" : "left",
           g4 ? "gone" : "left");
    EXPECT("a_file_that_is_not_the_entered_one_stays", kept, "%s", kept ? "" : "removed, or changed");
    unlink(path);
}

/* [given up]: creations that PostgreSQL gives up after the shm_open (its
 * close and shm_unlink) leave no entry behind: past twice the name table,
 * a creation is still served. */
static void check_given_up(void) {
    char why[600] = "";
    reply_t r;
    MaxBackends = 1;
    if (!start()) return;
    worker w = spawn();
    uint32_t h = (next_handle() & 0x3fffffffu) | 0x80000000u; /* h + 275 stays above 2^31 */
    bool ok = rpc(&w, OP_CREATE_GIVEUP, h, 4 * SLOTS(1), 0, &r);
    EXPECT("creations_given_up", ok, "%s", r.msg);
    uint32_t h2 = next_handle() & 0x7fffffffu; /* not one of the given-up handles */
    reply_t st0;
    rpc(&w, OP_STATE, 0, 0, 0, &st0);
    ok = rpc(&w, OP_CREATE, h2, SEG_SIZE, 0x31, &r);
    reply_t st1;
    rpc(&w, OP_STATE, 0, 0, 0, &st1);
    EXPECT("a_creation_after_them_is_served", ok && st1.served == st0.served + 1 && is_pool_file(h2, SEG_SIZE, why, sizeof why),
           "%s; served %llu then %llu, refused %llu; %s", r.msg, (unsigned long long)st0.served,
           (unsigned long long)st1.served, (unsigned long long)st1.refused, why);
    ok = rpc(&w, OP_DESTROY, h2, 0, 0, &r);
    EXPECT("it_is_destroyed", ok, "%s", r.msg);
    int sw = finish(&w);
    EXPECT("child_exits_cleanly", sw == 0, "exit status %d", sw);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [forked creator]: a child forked in the middle of a creation that
 * closes its copy of the fd leaves the reservation to its parent: before,
 * its close dropped the entry, a creation of another handle took the same
 * place in the name table, and the parent's publication then wrote over
 * it (that segment's name no longer found: its attach refused). A process
 * that leaves the pool (dsm_detach_all) with a creation open closes it
 * without touching the pool it left (before: a write through a pointer
 * into the unmapped table). A creation without O_EXCL is PostgreSQL's own. */
static void check_forked_creator(void) {
    char why[600] = "";
    reply_t r;
    MaxBackends = 1;
    if (!start()) return;
    worker a = spawn(), b = spawn(), c = spawn();
    uint32_t h = next_handle() & 0x7fffffffu;
    int cap = 2 * SLOTS(1); /* the name table's entries: h + cap starts its probe where h does */
    reply_t st0, st1;
    rpc(&a, OP_STATE, 0, 0, 0, &st0);
    bool ok = rpc(&a, OP_CREATE_FORKED, h, SEG_SIZE, cap, &r);
    EXPECT("a_creation_across_a_fork_and_one_beside_it", ok, "%s", r.msg);
    rpc(&a, OP_STATE, 0, 0, 0, &st1);
    /* (h's file: the late child's posix_fallocate, libc's, gave it blocks) */
    EXPECT("both_are_served", st1.served == st0.served + 2, "served %llu, then %llu",
           (unsigned long long)st0.served, (unsigned long long)st1.served);
    bool s2 = is_pool_file(h + (uint32_t)cap, SEG_SIZE, why, sizeof why);
    EXPECT("the_one_beside_it_is_served", s2, "%s", why);
    reply_t r1, r2;
    bool a1 = rpc(&b, OP_ATTACH, h, SEG_SIZE, 0, &r1) && rpc(&b, OP_CHECK, h, SEG_SIZE, 0x51, &r1);
    bool a2 = rpc(&b, OP_ATTACH, h + (uint32_t)cap, SEG_SIZE, 0, &r2) &&
              rpc(&b, OP_CHECK, h + (uint32_t)cap, SEG_SIZE, 0x52, &r2);
    EXPECT("both_are_attached_with_their_bytes", a1 && a2, "%s; %s", r1.msg, r2.msg);
    rpc(&b, OP_DETACH, h, 0, 0, &r);
    rpc(&b, OP_DETACH, h + (uint32_t)cap, 0, 0, &r);
    ok = rpc(&a, OP_DESTROY, h, 0, 0, &r) && rpc(&a, OP_DESTROY, h + (uint32_t)cap, 0, 0, &r);
    EXPECT("both_are_destroyed", ok, "%s", r.msg);
    uint32_t h3 = next_handle() & 0x7fffffffu;
    ok = rpc(&c, OP_CREATE_LEAVE, h3, 0, 0, &r);
    EXPECT("a_creation_open_when_its_process_leaves_the_pool_closes", ok, "%s", r.msg);
    uint32_t h4 = next_handle() & 0x7fffffffu;
    ok = rpc(&a, OP_CREATE_NOEXCL, h4, SEG_SIZE, 0, &r);
    bool own = ok && is_own_file(h4, SEG_SIZE, why, sizeof why);
    EXPECT("a_creation_without_o_excl_is_postgresql_s_own", own, "%s; %s", r.msg, why);
    if (ok) rpc(&a, OP_DESTROY, h4, 0, 0, &r);
    int sa = finish(&a), sb = finish(&b), sc = finish(&c);
    EXPECT("children_exit_cleanly", sa == 0 && sb == 0 && sc == 0, "exit statuses %d, %d, %d", sa, sb, sc);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [name reused] */
static void check_name_reused(void) {
    char why[600];
    reply_t r, s, t;
    if (!start()) return;
    worker a = spawn(), b = spawn(), c = spawn(), n = spawn(), o = spawn();
    uint32_t h = next_handle();
    rpc(&c, OP_STATE, 0, 0, 0, &s);
    /* o stays attached to the first segment of the name */
    bool ok = rpc(&a, OP_CREATE, h, SEG_SIZE, 0x11, &r) && rpc(&o, OP_ATTACH, h, SEG_SIZE, 0, &r) &&
              rpc(&a, OP_DETACH, h, 0, 0, &r);
    EXPECT("create_attach_and_detach", ok, "%s", r.msg);
    /* a child with no pool removes the name behind the library's back */
    ok = rpc(&n, OP_DETACH_ALL, 0, 0, 0, &r);
    rpc(&n, OP_STATE, 0, 0, 0, &t);
    ok = ok && !t.serving && !t.has_pool && rpc(&n, OP_UNLINK_PLAIN, h, 0, 0, &r);
    EXPECT("plain_unlink_by_a_child_without_the_pool", ok, "%s; %s", r.msg, t.msg);
    ok = rpc(&b, OP_CREATE, h, SEG_SIZE, 0x22, &r);
    EXPECT("same_handle_created_again", ok, "%s", r.msg);
    rpc(&b, OP_STATE, 0, 0, 0, &t);
    EXPECT("same_handle_again_is_served", ok && t.served == 1 && t.refused == 0 && t.unpin_failed == 0 &&
               is_pool_file(h, SEG_SIZE, why, sizeof why),
           "%s; %s", t.msg, why);
    EXPECT("stale_segment_stays_while_attached", t.live == s.live + 2,
           "segments %zu: %zu before the first create, the old (attached) and the new now", t.live, s.live);
    ok = rpc(&c, OP_ATTACH, h, SEG_SIZE, 0, &r) && rpc(&c, OP_CHECK, h, 0, 0x22, &r);
    EXPECT("attacher_sees_the_new_bytes", ok, "%s", r.msg);
    ok = rpc(&o, OP_CHECK, h, 0, 0x11, &r) && rpc(&o, OP_DETACH, h, 0, 0, &r);
    rpc(&c, OP_STATE, 0, 0, 0, &t);
    EXPECT("stale_segment_kept_its_bytes_and_is_freed_at_its_detach", ok && t.live == s.live + 1,
           "%s segments %zu: %zu before the first create, the new one alone now", r.msg, t.live, s.live);
    ok = rpc(&c, OP_DETACH, h, 0, 0, &r) && rpc(&b, OP_DESTROY, h, 0, 0, &r);
    rpc(&c, OP_STATE, 0, 0, 0, &t);
    EXPECT("nothing_lost", ok && t.live == s.live && t.free == s.free && t.unpin_failed == 0,
           "%s segments %zu (before %zu), free %zu (before %zu)", ok ? "" : r.msg, t.live, s.live, t.free, s.free);
    int sa = finish(&a), sb = finish(&b), sc = finish(&c), sn = finish(&n), so = finish(&o);
    EXPECT("children_exit_cleanly", sa == 0 && sb == 0 && sc == 0 && sn == 0 && so == 0,
           "exit statuses %d, %d, %d, %d, %d", sa, sb, sc, sn, so);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [detach all] */
static void check_detach_all(void) {
    char why[600];
    reply_t r, t;
    if (!start()) return;
    worker a = spawn(), lg = spawn(), b = spawn();
    uint32_t h = next_handle();
    bool ok = rpc(&a, OP_CREATE, h, SEG_SIZE, 0x5a, &r);
    EXPECT("create", ok, "%s", r.msg);
    /* dsm_detach_all: each segment, then the control segment */
    ok = rpc(&lg, OP_ATTACH, h, SEG_SIZE, 0, &r) && rpc(&lg, OP_DETACH, h, 0, 0, &r) &&
         rpc(&lg, OP_DETACH_ALL, 0, 0, 0, &r);
    rpc(&lg, OP_STATE, 0, 0, 0, &t);
    EXPECT("detach_all_drops_the_pool", ok && !t.serving && !t.has_pool, "%s%s%s", ok ? "" : r.msg, ok ? "" : "; ",
           t.msg);
    rpc(&lg, OP_PROBE, h, 0, 0, &r);
    EXPECT("child_after_detach_all_cannot_open_a_pool_name",
           r.ok && ((!r.opened && (r.err == EACCES || r.err == ENOENT)) || (r.opened && !r.opath && r.first != 0)),
           "%s", r.msg);
    ok = rpc(&b, OP_ATTACH, h, SEG_SIZE, 0, &r) && rpc(&b, OP_CHECK, h, 0, 0x5a, &r) &&
         rpc(&b, OP_DETACH, h, 0, 0, &r) && rpc(&a, OP_DESTROY, h, 0, 0, &r);
    EXPECT("others_go_on", ok, "%s", r.msg);
    int sa = finish(&a), sl = finish(&lg), sb = finish(&b);
    EXPECT("children_exit_cleanly", sa == 0 && sl == 0 && sb == 0, "exit statuses %d, %d, %d", sa, sl, sb);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [binary upgrade] */
static void check_binary_upgrade(void) {
    char why[600];
    reply_t r;
    IsBinaryUpgrade = true;
    if (!start()) return;
    r = pm_state();
    EXPECT("no_pool_under_binary_upgrade", !r.serving && !r.has_pool && r.generation == 0 && !r.lib_loaded,
           "%s; libdsmpool %s", r.msg, r.lib_loaded ? "loaded" : "not loaded");
    worker a = spawn(), b = spawn();
    uint32_t h = next_handle();
    bool ok = rpc(&a, OP_CREATE, h, SEG_SIZE, 0x5a, &r);
    EXPECT("create_keeps_errno", ok, "%s", r.msg);
    EXPECT("segment_is_postgresql_s_own", is_own_file(h, SEG_SIZE, why, sizeof why), "%s", why);
    rpc(&a, OP_STATE, 0, 0, 0, &r);
    EXPECT("child_has_no_pool", !r.serving && !r.has_pool && r.served == 0 && r.refused == 0 && !r.lib_loaded,
           "%s", r.msg);
    ok = rpc(&b, OP_ATTACH, h, SEG_SIZE, 0, &r) && rpc(&b, OP_CHECK, h, 0, 0x5a, &r) &&
         rpc(&b, OP_DETACH, h, 0, 0, &r) && rpc(&a, OP_DESTROY, h, 0, 0, &r);
    struct stat st;
    EXPECT("attach_and_destroy", ok && !shm_stat(h, &st), "%s", ok ? "the name is gone" : r.msg);
    int sa = finish(&a), sb = finish(&b);
    EXPECT("children_exit_cleanly", sa == 0 && sb == 0, "exit statuses %d and %d", sa, sb);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [max backends] */
#define MB_SEGS (2 * SLOTS(1) + 1)
#define MB_SIZE ((size_t)64 << 10)
static void check_max_backends(void) {
    char why[600];
    reply_t r, s;
    MaxBackends = 1;
    if (!start()) return;
    worker w[3] = {spawn(), spawn(), spawn()}, v = spawn();
    uint32_t hs[MB_SEGS];
    rpc(&v, OP_STATE, 0, 0, 0, &s);
    int made = 0;
    char first_fail[600] = "";
    for (int i = 0; i < MB_SEGS; i++) {
        hs[i] = next_handle();
        if (rpc(&w[i % 3], OP_CREATE, hs[i], MB_SIZE, (i & 0x7f) | 1, &r)) made++;
        else if (!first_fail[0]) snprintf(first_fail, sizeof first_fail, "%s", r.msg);
    }
    EXPECT("every_create_succeeds", made == MB_SEGS, "%d of %d alive at once%s%s", made, MB_SEGS,
           first_fail[0] ? "; the first failure: " : "", first_fail);
    uint64_t served = 0, refused = 0;
    for (int k = 0; k < 3; k++) {
        rpc(&w[k], OP_STATE, 0, 0, 0, &r);
        served += r.served;
        refused += r.refused;
    }
    int pool_files = 0, own_files = 0;
    for (int i = 0; i < MB_SEGS; i++) {
        pool_files += is_pool_file(hs[i], MB_SIZE, why, sizeof why);
        own_files += is_own_file(hs[i], MB_SIZE, why, sizeof why);
    }
    EXPECT("each_is_served_or_postgresql_s_own",
           served + refused == MB_SEGS && (uint64_t)pool_files == served && (uint64_t)own_files == refused &&
               served >= (uint64_t)SLOTS(1),
           "served %llu (files sparse, 0000: %d), refused %llu (files with data, 0600: %d), of %d",
           (unsigned long long)served, pool_files, (unsigned long long)refused, own_files, MB_SEGS);
    int seen = 0;
    first_fail[0] = 0;
    for (int i = 0; i < MB_SEGS; i++) {
        if (rpc(&v, OP_ATTACH, hs[i], MB_SIZE, 0, &r) && rpc(&v, OP_CHECK, hs[i], 0, (i & 0x7f) | 1, &r) &&
            rpc(&v, OP_DETACH, hs[i], 0, 0, &r))
            seen++;
        else if (!first_fail[0])
            snprintf(first_fail, sizeof first_fail, "%s", r.msg);
    }
    EXPECT("each_attached_and_read_back", seen == MB_SEGS, "%d of %d%s%s", seen, MB_SEGS,
           first_fail[0] ? "; the first failure: " : "", first_fail);
    int gone = 0;
    first_fail[0] = 0;
    for (int i = 0; i < MB_SEGS; i++) {
        if (rpc(&w[i % 3], OP_DESTROY, hs[i], 0, 0, &r)) gone++;
        else if (!first_fail[0])
            snprintf(first_fail, sizeof first_fail, "%s", r.msg);
    }
    rpc(&v, OP_STATE, 0, 0, 0, &r);
    int left = 0;
    struct stat st;
    for (int i = 0; i < MB_SEGS; i++) left += shm_stat(hs[i], &st);
    int bad = 0;
    for (int k = 0; k < 3; k++) bad += finish(&w[k]) != 0;
    /* each creator held more attachments than a slot records inline: their
     * overflow blocks go back when their slots are cleared, by the recovery
     * the pool runs itself once its slot table is full (below, at once) */
    reply_t e;
    rpc(&v, OP_RECOVER, 0, 0, 0, &e);
    rpc(&v, OP_STATE, 0, 0, 0, &e);
    EXPECT("all_destroyed_nothing_lost",
           gone == MB_SEGS && left == 0 && r.live == s.live && e.free == s.free && r.unpin_failed == 0,
           "%d destroyed, %d names left; segments %zu (before %zu), free %zu, %zu once the creators' slots "
           "were recovered (before %zu)%s%s", gone, left, r.live, s.live, r.free, e.free, s.free,
           first_fail[0] ? "; the first failure: " : "", first_fail);
    bad += finish(&v) != 0;
    EXPECT("children_exit_cleanly", bad == 0, "%d of 4 did not", bad);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [backends come and go] */
#define CHURN_PROCS (3 * (SLOTS(1) / 5 + 64) + 1) /* the pool's slot table (max_procs), thrice */
static void check_backends_come_and_go(void) {
    char why[600];
    reply_t r, s;
    MaxBackends = 1;
    if (!start()) return;
    worker v = spawn();
    rpc(&v, OP_STATE, 0, 0, 0, &s);
    int served = 0, bad_exit = 0;
    char first_fail[600] = "";
    for (int i = 0; i < CHURN_PROCS; i++) {
        worker b = spawn();
        uint32_t h = next_handle();
        bool ok = rpc(&b, OP_CREATE, h, MB_SIZE, 0x5a, &r) && rpc(&v, OP_ATTACH, h, MB_SIZE, 0, &r) &&
                  rpc(&v, OP_CHECK, h, 0, 0x5a, &r) && rpc(&v, OP_DETACH, h, 0, 0, &r) &&
                  rpc(&b, OP_DESTROY, h, 0, 0, &r) && rpc(&b, OP_STATE, 0, 0, 0, &r) && r.served == 1;
        if (ok) served++;
        else if (!first_fail[0])
            snprintf(first_fail, sizeof first_fail, "child %d: %.500s", i, r.msg);
        bad_exit += finish(&b) != 0;
    }
    EXPECT("each_short_lived_child_is_served", served == CHURN_PROCS && bad_exit == 0,
           "%d of %d served, %d exited badly%s%s", served, CHURN_PROCS, bad_exit,
           first_fail[0] ? "; the first failure: " : "", first_fail);
    rpc(&v, OP_RECOVER, 0, 0, 0, &r);
    rpc(&v, OP_STATE, 0, 0, 0, &r);
    EXPECT("nothing_lost", r.live == s.live && r.free == s.free && r.unpin_failed == 0,
           "segments %zu (before %zu), free %zu (before %zu)", r.live, s.live, r.free, s.free);
    int sv = finish(&v);
    EXPECT("children_exit_cleanly", sv == 0, "exit status %d", sv);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [pool full] the pool (64 MiB, as the extension may set it) serves
 * segments until it has no block for the next, which is PostgreSQL's own */
#define FULL_SEGS 4
static void check_pool_full(void) {
    char why[600];
    reply_t r, s;
    const size_t big = (size_t)24 << 20;
    get_state()->settings.size = (size_t)64 << 20; /* set in _PG_init, before the control segment */
    if (!start()) return;
    worker a = spawn(), b = spawn();
    uint32_t h[FULL_SEGS];
    rpc(&b, OP_STATE, 0, 0, 0, &s);
    int made = 0, pool_files = 0, own_files = 0;
    for (int i = 0; i < FULL_SEGS; i++) {
        h[i] = next_handle();
        if (!rpc(&a, OP_CREATE, h[i], big, 0x10 + i, &r)) break;
        made++;
        pool_files += is_pool_file(h[i], big, why, sizeof why);
        own_files += is_own_file(h[i], big, why, sizeof why);
    }
    EXPECT("every_create_succeeds", made == FULL_SEGS, "%d of %d%s%s", made, FULL_SEGS, made < FULL_SEGS ? "; " : "",
           made < FULL_SEGS ? r.msg : "");
    rpc(&a, OP_STATE, 0, 0, 0, &r);
    EXPECT("what_the_pool_cannot_hold_is_postgresql_s_own",
           pool_files >= 1 && own_files >= 1 && pool_files + own_files == made &&
               r.served == (uint64_t)pool_files && r.refused == (uint64_t)own_files,
           "%d served (sparse, 0000), %d PostgreSQL's own (data, 0600); %s", pool_files, own_files, r.msg);
    bool ok = true;
    for (int i = 0; i < made && ok; i++)
        ok = rpc(&b, OP_ATTACH, h[i], big, 0, &r) && rpc(&b, OP_CHECK, h[i], 0, 0x10 + i, &r) &&
             rpc(&b, OP_DETACH, h[i], 0, 0, &r);
    EXPECT("each_attached_and_read_back", ok, "%s", r.msg);
    for (int i = 0; i < made && ok; i++) ok = rpc(&a, OP_DESTROY, h[i], 0, 0, &r);
    rpc(&b, OP_STATE, 0, 0, 0, &r);
    int left = 0;
    struct stat st;
    for (int i = 0; i < made; i++) left += shm_stat(h[i], &st);
    EXPECT("all_destroyed_nothing_lost", ok && left == 0 && r.live == s.live && r.free == s.free,
           "%s%d names left; segments %zu (before %zu), free %zu (before %zu)", ok ? "" : r.msg, left, r.live, s.live,
           r.free, s.free);
    int sa = finish(&a), sb = finish(&b);
    EXPECT("children_exit_cleanly", sa == 0 && sb == 0, "exit statuses %d and %d", sa, sb);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [odd sizes] PostgreSQL's sizes are any number of bytes */
static void check_odd_sizes(void) {
    char why[600];
    reply_t r, s;
    static const size_t sizes[] = {1, 100, 4095, 4096, 4097, 12345, 65536 + 8, (size_t)(2 << 20) - 1,
                                   (size_t)(2 << 20) + 1};
    if (!start()) return;
    worker a = spawn(), b = spawn();
    rpc(&b, OP_STATE, 0, 0, 0, &s);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        uint32_t h = next_handle();
        char name[64];
        snprintf(name, sizeof name, "size_%zu", n);
        bool ok = rpc(&a, OP_CREATE, h, n, 0x40 + (int)i, &r) && is_pool_file(h, n, why, sizeof why) &&
                  rpc(&b, OP_ATTACH, h, n, 0, &r) && rpc(&b, OP_CHECK, h, 0, 0x40 + (int)i, &r) &&
                  rpc(&b, OP_DETACH, h, 0, 0, &r) && rpc(&a, OP_DESTROY, h, 0, 0, &r);
        EXPECT(name, ok, "%s", ok ? "served, shared, destroyed" : r.msg[0] ? r.msg : why);
    }
    rpc(&b, OP_STATE, 0, 0, 0, &r);
    EXPECT("nothing_lost", r.live == s.live && r.free == s.free && r.unpin_failed == 0,
           "segments %zu (before %zu), free %zu (before %zu)", r.live, s.live, r.free, s.free);
    int sa = finish(&a), sb = finish(&b);
    EXPECT("children_exit_cleanly", sa == 0 && sb == 0, "exit statuses %d and %d", sa, sb);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [concurrent] children create, use and destroy at once: the name table
 * changed by several processes together */
static void check_concurrent(void) {
    char why[600];
    reply_t r, s;
    if (!start()) return;
    worker w[CC_WORKERS], v = spawn();
    rpc(&v, OP_STATE, 0, 0, 0, &s);
    for (int k = 0; k < CC_WORKERS; k++) w[k] = spawn();
    /* each worker's handles: its own, from the postmaster's sequence */
    cmd_t c = {OP_CHURN, 0, 0, 0};
    for (int k = 0; k < CC_WORKERS; k++) {
        c.h = next_handle();
        c.n = (size_t)k;
        if (w[k].pid > 0) full_write(w[k].to, &c, sizeof c);
    }
    int good = 0;
    char first_fail[600] = "";
    for (int k = 0; k < CC_WORKERS; k++) {
        memset(&r, 0, sizeof r);
        bool got = w[k].pid > 0 && full_read(w[k].from, &r, sizeof r);
        if (got && r.ok) good++;
        else if (!first_fail[0])
            snprintf(first_fail, sizeof first_fail, "worker %d: %.560s", k, got ? r.msg : "died");
    }
    EXPECT("children_at_once_are_served", good == CC_WORKERS, "%d of %d workers: %d rounds of %d segments%s%s",
           good, CC_WORKERS, CC_ROUNDS, CC_ALIVE, first_fail[0] ? "; " : "", first_fail);
    int bad = 0;
    for (int k = 0; k < CC_WORKERS; k++) bad += finish(&w[k]) != 0;
    rpc(&v, OP_RECOVER, 0, 0, 0, &r);
    rpc(&v, OP_STATE, 0, 0, 0, &r);
    EXPECT("nothing_lost", r.live == s.live && r.free == s.free && r.unpin_failed == 0,
           "segments %zu (before %zu), free %zu (before %zu)", r.live, s.live, r.free, s.free);
    bad += finish(&v) != 0;
    EXPECT("children_exit_cleanly", bad == 0, "%d did not", bad);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* the names in /dev/shm: PostgreSQL's, and the others (dsmpool's anchors) */
static void shm_count(int *pg, int *other) {
    *pg = *other = 0;
    DIR *d = opendir("/dev/shm");
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (strncmp(e->d_name, "PostgreSQL.", 11) == 0) ++*pg;
        else ++*other;
    }
    if (d) closedir(d);
}

/* [killed postmaster] */
static void check_killed_postmaster(void) {
    char why[600];
    reply_t r;
    struct {
        bool ok;
        uint32_t ctl, h[2];
        pid_t worker;
        char why[600];
    } m;
    memset(&m, 0, sizeof m);
    int p[2];
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0 || pipe2(p, O_CLOEXEC) != 0) {
        report("start", false, "subreaper or pipe: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    pid_t first = fork();
    if (first == 0) { /* the first postmaster, killed with its child */
        close(p[0]);
        m.ok = pm_control(m.why, sizeof m.why);
        worker w = spawn();
        m.ctl = ctl_handle;
        m.worker = w.pid;
        for (int i = 0; i < 2 && m.ok; i++) {
            m.h[i] = next_handle();
            m.ok = rpc(&w, OP_CREATE, m.h[i], SEG_SIZE, 0x11, &r);
            if (!m.ok) snprintf(m.why, sizeof m.why, "%s", r.msg);
        }
        full_write(p[1], &m, sizeof m);
        for (;;) pause();
    }
    close(p[1]);
    bool got = first > 0 && full_read(p[0], &m, sizeof m);
    close(p[0]);
    if (m.worker > 0) kill(m.worker, SIGKILL);
    if (first > 0) kill(first, SIGKILL);
    if (first > 0) wait_status(first);
    if (m.worker > 0) wait_status(m.worker); /* ours once its parent is gone (subreaper) */
    EXPECT("first_postmaster_served_then_was_killed", got && m.ok, "%s", got ? m.why : "it did not answer");
    if (!got || !m.ok) return;
    int pg0, other0;
    shm_count(&pg0, &other0);
    /* the next start: dsm_cleanup_using_control_segment, as PostgreSQL's own */
    void *a = NULL;
    size_t n = 0;
    bool ok = pg_attach(m.ctl, &a, &n, why, sizeof why);
    if (ok) {
        control_t *old = a;
        char name[32];
        for (uint32_t i = 0; ok && i < old->nitems && i < old->maxitems; i++) {
            if (!old->item[i].refcnt) continue;
            pgname(name, old->item[i].handle);
            errno = SENTINEL;
            int rc = shm_unlink(name);
            ok = rc == 0 && errno == SENTINEL;
            if (!ok) snprintf(why, sizeof why, "shm_unlink(%s) gave %d, errno %d", name, rc, errno);
        }
        ok = ok && pg_detach(m.ctl, a, n, true, why, sizeof why);
    }
    step("next_start_removes_the_killed_server_s_names", ok, why);
    if (!start()) return;
    int pg1, other1;
    shm_count(&pg1, &other1);
    r = pm_state();
    EXPECT("next_start_makes_a_pool_and_sweeps_the_old_one", r.serving && r.generation == 1 && pg1 == 1 &&
               other1 == other0 && other0 >= 1,
           "before: %d of PostgreSQL's names, %d others; after: %d and %d (its control segment; the new pool's "
           "anchor for the old one's); %s", pg0, other0, pg1, other1, r.msg);
    worker w = spawn();
    uint32_t h = next_handle();
    ok = rpc(&w, OP_CREATE, h, SEG_SIZE, 0x22, &r) && rpc(&w, OP_DESTROY, h, 0, 0, &r);
    rpc(&w, OP_STATE, 0, 0, 0, &r);
    EXPECT("next_start_serves", ok && r.served == 1, "%s", r.msg);
    int sw = finish(&w);
    EXPECT("children_exit_cleanly", sw == 0, "exit status %d", sw);
    step("postmaster_shutdown", pm_shutdown(why, sizeof why), why);
}

/* [standalone backend] single-user mode: no postmaster, DSM made by the
 * process that made the control segment */
static void check_standalone(void) {
    char why[600];
    reply_t r;
    IsPostmasterEnvironment = false;
    if (!start()) return;
    void *a;
    uint32_t h = next_handle();
    bool ok = pg_create(h, SEG_SIZE, true, &a, why, sizeof why);
    step("create_keeps_errno", ok, why);
    bool own = ok && is_own_file(h, SEG_SIZE, why, sizeof why);
    EXPECT("segment_is_postgresql_s_own", own, "%s", why);
    r = pm_state();
    EXPECT("no_pool_and_no_libdsmpool", !r.serving && !r.has_pool && r.generation == 0 && !r.lib_loaded, "%s",
           r.msg);
    if (ok) step("destroy_keeps_errno", pg_detach(h, a, SEG_SIZE, true, why, sizeof why), why);
    step("shutdown", pm_shutdown(why, sizeof why), why);
}

/* ---- the runner ------------------------------------------------------------ */

/* one check: a /dev/shm of its own, a postmaster of its own (not root) */
static void run_check(void (*fn)(void), int seed) {
    const char *name = "runner";
    if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=1777") != 0) {
        report(name, false, "mounting a tmpfs on /dev/shm: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(NOBODY) != 0 || setuid(NOBODY) != 0) {
            report(name, false, "setuid(%d): %s", NOBODY, strerror(errno));
            _exit(1);
        }
        prctl(PR_SET_DUMPABLE, 1); /* its own /proc, as a server's */
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* (cleared by setuid) gone with the runner */
        signal(SIGPIPE, SIG_IGN);  /* a dead worker is an answer that does not come */
        rng += (uint64_t)seed * 0x9e3779b97f4a7c15u;
        IsPostmasterEnvironment = true;
        IsUnderPostmaster = false;
        fn();
        fflush(stdout);
        exit(0);
    }
    int st = pid < 0 ? -1 : wait_status(pid);
    if (st != 0) report(name, false, "the postmaster %s %d", st >= 128 ? "was killed by signal" : "exited with",
                        st >= 128 ? st - 128 : st);
    if (umount2("/dev/shm", MNT_DETACH) != 0) report(name, false, "umount /dev/shm: %s", strerror(errno));
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--probe") == 0) return probe_main(argv[2]);
    static struct tally local;
    tally = &local;
    void *t = mmap(NULL, sizeof *tally, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED) {
        report("start", false, "mmap: %s", strerror(errno));
        return 1;
    }
    tally = t;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!find_preload()) {
        report("preload_library_loaded", false,
               "dsmpool_preload_get_state not found: run with LD_PRELOAD=libdsmpool-preload.so");
        printf("[====] Synthesis: Tested: 1 | Passing: 0 | Failing: 1 | Crashing: 0\n");
        return 1;
    }
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        printf("[SKIP] %s::all: no private /dev/shm (%s: needs root, CAP_SYS_ADMIN)\n", suite, strerror(errno));
        printf("[====] Synthesis: Tested: 0 | Passing: 0 | Failing: 0 | Crashing: 0\n");
        return 77;
    }
    static const struct {
        const char *name;
        void (*fn)(void);
    } checks[] = {
        {"served", check_served},
        {"destroy", check_destroy},
        {"no_pool", check_no_pool},
        {"close_early", check_close_early},
        {"crash_restart", check_crash_restart},
        {"corrupt_control", check_corrupt_control},
        {"orphans", check_orphans},
        {"given_up", check_given_up},
        {"forked_creator", check_forked_creator},
        {"name_reused", check_name_reused},
        {"detach_all", check_detach_all},
        {"binary_upgrade", check_binary_upgrade},
        {"max_backends", check_max_backends},
        {"backends_come_and_go", check_backends_come_and_go},
        {"pool_full", check_pool_full},
        {"odd_sizes", check_odd_sizes},
        {"concurrent", check_concurrent},
        {"killed_postmaster", check_killed_postmaster},
        {"standalone_backend", check_standalone},
    };
    printf("%s: handles from seed %#llx\n", suite, (unsigned long long)rng);
    for (int v = 15; v <= 16; v++) {
        ver = v;
        for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
            check_name = checks[i].name;
            run_check(checks[i].fn, (int)i);
        }
    }
    printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: 0\n", tally->tested,
           tally->passing, tally->tested - tally->passing);
    return tally->passing == tally->tested ? 0 : 1;
}
