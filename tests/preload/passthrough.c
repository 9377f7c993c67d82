/*
 * passthrough -- in a program that is not a postgres server the preload
 * library (libdsmpool-preload.so) is inert: each call it defines behaves
 * exactly as libc's, errno included, and a name of PostgreSQL's form
 * ("/PostgreSQL.<n>") is served by /dev/shm as without the library.
 *
 * Rules
 *   [interposed] Each name the library defines (shm_open, shm_unlink,
 *      posix_fallocate, posix_fallocate64, mmap, mmap64, munmap, close)
 *      resolves to the library, and not to libc: run without LD_PRELOAD
 *      the test fails here rather than pass by testing libc against libc.
 *   [same as libc] Each call is made twice, through the library and
 *      through libc's own definition (dlsym on libc's handle), with errno
 *      set to a sentinel before it: the results and errno after must be
 *      equal, and equal to what is expected (a success leaves the
 *      sentinel; a failure gives its errno; posix_fallocate returns the
 *      error and leaves errno alone).
 *   [postgresql names] PostgreSQL's create and attach sequences on a name
 *      of its form keep their data in the file: mode 0600 kept, data
 *      blocks after posix_fallocate (st_blocks > 0), a byte written
 *      through one mapping read back through another and by pread.
 *   [threads] Threads doing all of it at once see no error.
 *   [dlerror] The library's constructor leaves no message for dlerror():
 *      main() reads it first, as a program may, and finds none, as
 *      without the library.
 *
 * Built three ways: the executable runs the checks from main(), after
 * every constructor; with PASSTHROUGH_EARLY, a library (libpreload_early.so)
 * runs them from its constructor, and with PASSTHROUGH_EARLY_MAIN an
 * executable linked with it adds up its tally. ld.so initializes a
 * program's own libraries before a preloaded one (they are loaded after
 * it, and neither depends on the other), so there the preload library's
 * constructor has not run: its calls are raw system calls and its own
 * shm_open and shm_unlink. That is where any library's constructor calls it.
 *
 * Names are unique (the pid) and removed at the end, through libc.
 * Usage: passthrough PATH-TO-libdsmpool-preload.so; passthrough_early
 * Prints Criterion's synthesis line for tools/testcount.py.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SENTINEL 4242
#define PRELOAD_NAME "libdsmpool-preload.so"
#define SEG_SIZE ((off_t)1 << 20)

static const char *suite = "preload_passthrough";
static int tested, passing;

static void report(const char *name, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(const char *name, bool ok, const char *fmt, ...) {
    char why[1024] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    tested++;
    passing += ok;
    printf("[%s] %s::%s%s%s\n", ok ? "PASS" : "FAIL", suite, name, why[0] ? ": " : "", why);
    fflush(stdout);
}

#ifndef PASSTHROUGH_EARLY_MAIN

typedef struct {
    int (*shm_open)(const char *, int, mode_t);
    int (*shm_unlink)(const char *);
    int (*posix_fallocate)(int, off_t, off_t);
    int (*posix_fallocate64)(int, off_t, off_t);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    void *(*mmap64)(void *, size_t, int, int, int, off_t);
    int (*munmap)(void *, size_t);
    int (*close)(int);
} calls;

static const char *const call_names[] = {"shm_open", "shm_unlink", "posix_fallocate", "posix_fallocate64",
                                         "mmap",     "mmap64",     "munmap",          "close"};
#define NCALLS (sizeof call_names / sizeof call_names[0])

static calls via; /* the names as the program binds them: the library's */
static calls lc;  /* libc's own definitions */
static void *libc_handle;
/* dlsym's result as a function pointer (POSIX: the conversion holds) */
static void *lookup(void *handle, const char *name, void *fp) {
    void *v = dlsym(handle, name);
    memcpy(fp, &v, sizeof v);
    return v;
}

static bool lookup_all(void) {
    libc_handle = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
    if (!libc_handle) {
        report("libc_found", false, "dlopen(libc.so.6, RTLD_NOLOAD): %s", dlerror());
        return false;
    }
    void **v = (void **)&via, **l = (void **)&lc;
    bool ok = true;
    for (size_t i = 0; i < NCALLS; i++) {
        lookup(RTLD_DEFAULT, call_names[i], &v[i]);
        lookup(libc_handle, call_names[i], &l[i]);
        if (!v[i] || !l[i]) {
            report("libc_found", false, "%s: not found (%s)", call_names[i], v[i] ? "in libc" : "at all");
            ok = false;
        }
    }
    return ok;
}

/* a function's address as a data pointer (POSIX: the conversion holds) */
#define FN_ADDR(out, f)                                 \
    do {                                                \
        __typeof__(&f) fp_ = &f;                        \
        memcpy(&(out), &fp_, sizeof(out));              \
    } while (0)

static const char *base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* [interposed]: each name, as dlsym and the program's own calls find it, is
 * the library's; preload, if given, is its path. */
static void check_interposed(const char *preload) {
    char want[PATH_MAX] = "";
    if (preload && !realpath(preload, want)) {
        report("interposed", false, "%s: %s", preload, strerror(errno));
        return;
    }
    /* the program's own calls (_FILE_OFFSET_BITS=64 makes two of them the
     * 64 names) */
    void *direct[NCALLS] = {NULL};
    FN_ADDR(direct[0], shm_open);
    FN_ADDR(direct[1], shm_unlink);
    FN_ADDR(direct[2], posix_fallocate);
    FN_ADDR(direct[4], mmap);
    FN_ADDR(direct[6], munmap);
    FN_ADDR(direct[7], close);
    void **v = (void **)&via, **l = (void **)&lc;
    char bad[1024] = "";
    size_t len = 0;
    for (size_t i = 0; i < NCALLS; i++) {
        const void *addrs[] = {v[i], direct[i]};
        for (int k = 0; k < 2; k++) {
            Dl_info di;
            char got[PATH_MAX] = "";
            if (!addrs[k]) continue;
            if (dladdr(addrs[k], &di) && di.dli_fname) {
                if (!realpath(di.dli_fname, got)) snprintf(got, sizeof got, "%s", di.dli_fname);
            }
            bool ok = addrs[k] != l[i] && strcmp(base(got), PRELOAD_NAME) == 0 && (!want[0] || strcmp(got, want) == 0);
            if (!ok && len < sizeof bad)
                len += (size_t)snprintf(bad + len, sizeof bad - len, " %s%s from %s;", call_names[i],
                                        k ? " (a direct call)" : "", got[0] ? got : "nowhere");
        }
    }
    report("interposed", !bad[0], "%s", bad[0] ? bad : "each name resolves to the preload library, not libc");
}

/* ---- [same as libc] ---------------------------------------------------- */

typedef struct {
    long r; /* the return value, normalized: an fd or an address is 1 */
    int e;  /* errno after */
} outcome;

/* a call's outcome through the library (p) and through libc (l) */
static void compare(const char *name, outcome p, outcome l, long want_r, int want_e) {
    bool ok = p.r == l.r && p.e == l.e && p.r == want_r && p.e == want_e;
    report(name, ok, "preload %ld, errno %d; libc %ld, errno %d; expected %ld, errno %d", p.r, p.e, l.r, l.e, want_r,
           want_e);
}

/* ---- names --------------------------------------------------------------- */

#define MAX_NAMES 64
static char made[MAX_NAMES][64]; /* names this process may have made */
static int nmade;
static char made_dir[96];
static char made_file[128];

/* a name of this process's, made or not */
static const char *shm_name(const char *tag) {
    if (nmade == MAX_NAMES) abort();
    snprintf(made[nmade], sizeof made[0], "/dsmpool-preload-test.%ld.%s", (long)getpid(), tag);
    return made[nmade++];
}

static uint32_t pg_counter;
/* the next name of PostgreSQL's form in this process's range; the caller
 * makes it O_EXCL and, on EEXIST (another process's), takes the next */
static const char *pg_name(char buf[static 32]) {
    uint32_t h = 1000000000u + (uint32_t)getpid() * 64u + pg_counter++ % 64u;
    snprintf(buf, 32, "/PostgreSQL.%u", h);
    return buf;
}

/* a name this process made: removed at the end whatever happens */
static void made_add(const char *name) {
    if (nmade == MAX_NAMES) abort();
    snprintf(made[nmade++], sizeof made[0], "%s", name);
}

/* a new name of PostgreSQL's form, made here (empty), or "" */
static const char *pg_make(char buf[static 32]) {
    for (int i = 0; i < 64; i++) {
        int fd = lc.shm_open(pg_name(buf), O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd >= 0) {
            lc.close(fd);
            made_add(buf);
            return buf;
        }
        if (errno != EEXIST) break;
    }
    buf[0] = 0;
    return buf;
}

/* a name of PostgreSQL's form that nobody has */
static const char *pg_missing(char buf[static 32]) {
    int fd;
    while ((fd = lc.shm_open(pg_name(buf), O_RDONLY, 0)) >= 0) lc.close(fd);
    return buf;
}

static void cleanup(void) {
    int e = errno;
    for (int i = 0; i < nmade; i++) lc.shm_unlink(made[i]);
    if (made_file[0]) unlink(made_file);
    if (made_dir[0]) rmdir(made_dir);
    errno = e;
}

/* ---- each call ------------------------------------------------------------ */

typedef int (*shm_open_fn)(const char *, int, mode_t);
static outcome do_shm_open(shm_open_fn f, const char *name, int oflag, int *fd_out) {
    errno = SENTINEL;
    int fd = f(name, oflag, 0600);
    outcome o = {fd >= 0 ? 1 : fd, errno};
    if (fd_out) *fd_out = fd;
    else if (fd >= 0) lc.close(fd);
    return o;
}

static outcome do_shm_unlink(int (*f)(const char *), const char *name) {
    errno = SENTINEL;
    int r = f(name);
    return (outcome){r, errno};
}

static outcome do_fallocate(int (*f)(int, off_t, off_t), int fd, off_t off, off_t len) {
    errno = SENTINEL;
    int r = f(fd, off, len);
    return (outcome){r, errno};
}

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
static outcome do_mmap(mmap_fn f, size_t len, int prot, int flags, int fd, off_t off) {
    errno = SENTINEL;
    void *a = f(NULL, len, prot, flags, fd, off);
    outcome o = {a == MAP_FAILED ? -1 : 1, errno};
    if (a != MAP_FAILED) lc.munmap(a, len);
    return o;
}

static outcome do_munmap(int (*f)(void *, size_t), void *a, size_t len) {
    errno = SENTINEL;
    int r = f(a, len);
    return (outcome){r, errno};
}

static outcome do_close(int (*f)(int), int fd) {
    errno = SENTINEL;
    int r = f(fd);
    return (outcome){r, errno};
}

/* an fd number that is not open */
static int closed_fd(void) {
    int fd = dup(0);
    if (fd < 0) fd = 1000;
    else lc.close(fd);
    return fd;
}

static int shm_fd(const char *tag, off_t size) {
    int fd = lc.shm_open(shm_name(tag), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0 && size && ftruncate(fd, size) != 0) {
        lc.close(fd);
        return -1;
    }
    return fd;
}

static void check_shm_open(void) {
    int fdp = -1, fdl = -1;
    const char *a = shm_name("a"), *b = shm_name("b");
    compare("shm_open_create_keeps_errno", do_shm_open(via.shm_open, a, O_RDWR | O_CREAT | O_EXCL, &fdp),
            do_shm_open(lc.shm_open, b, O_RDWR | O_CREAT | O_EXCL, &fdl), 1, SENTINEL);
    if (fdp >= 0) lc.close(fdp);
    if (fdl >= 0) lc.close(fdl);
    compare("shm_open_open_keeps_errno", do_shm_open(via.shm_open, a, O_RDWR, NULL),
            do_shm_open(lc.shm_open, a, O_RDWR, NULL), 1, SENTINEL);
    compare("shm_open_excl_existing_is_eexist", do_shm_open(via.shm_open, a, O_RDWR | O_CREAT | O_EXCL, NULL),
            do_shm_open(lc.shm_open, a, O_RDWR | O_CREAT | O_EXCL, NULL), -1, EEXIST);
    const char *missing = shm_name("missing");
    compare("shm_open_missing_is_enoent", do_shm_open(via.shm_open, missing, O_RDWR, NULL),
            do_shm_open(lc.shm_open, missing, O_RDWR, NULL), -1, ENOENT);

    char ba[32], bb[32];
    const char *pa = pg_make(ba), *pb = pg_missing(bb);
    compare("shm_open_postgresql_name_excl_existing_is_eexist",
            do_shm_open(via.shm_open, pa, O_RDWR | O_CREAT | O_EXCL, NULL),
            do_shm_open(lc.shm_open, pa, O_RDWR | O_CREAT | O_EXCL, NULL), -1, EEXIST);
    compare("shm_open_postgresql_name_missing_is_enoent", do_shm_open(via.shm_open, pb, O_RDWR, NULL),
            do_shm_open(lc.shm_open, pb, O_RDWR, NULL), -1, ENOENT);

    /* names libc refuses, each with libc's errno */
    char longname[400];
    longname[0] = '/';
    memset(longname + 1, 'q', 300);
    longname[301] = 0;
    const char *bad[] = {"", "/", "//", "/.", "/..", "/dsmpool-preload-test.no/such", longname};
    const char *badname[] = {"empty", "slash", "slashes", "dot", "dotdot", "inner_slash", "300_chars"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char n[96];
        outcome l = do_shm_open(lc.shm_open, bad[i], O_RDWR, NULL);
        snprintf(n, sizeof n, "shm_open_refuses_name_%s", badname[i]);
        compare(n, do_shm_open(via.shm_open, bad[i], O_RDWR, NULL), l, -1, l.r == -1 ? l.e : -1);
    }
}

static void check_shm_unlink(void) {
    const char *a = shm_name("ua"), *b = shm_name("ub");
    int fd;
    if ((fd = lc.shm_open(a, O_RDWR | O_CREAT | O_EXCL, 0600)) >= 0) lc.close(fd);
    if ((fd = lc.shm_open(b, O_RDWR | O_CREAT | O_EXCL, 0600)) >= 0) lc.close(fd);
    compare("shm_unlink_keeps_errno", do_shm_unlink(via.shm_unlink, a), do_shm_unlink(lc.shm_unlink, b), 0,
            SENTINEL);
    compare("shm_unlink_missing_is_enoent", do_shm_unlink(via.shm_unlink, a), do_shm_unlink(lc.shm_unlink, b), -1,
            ENOENT);
    char ba[32], bb[32];
    const char *pa = pg_make(ba), *pb = pg_make(bb);
    compare("shm_unlink_postgresql_name_keeps_errno", do_shm_unlink(via.shm_unlink, pa),
            do_shm_unlink(lc.shm_unlink, pb), 0, SENTINEL);
    compare("shm_unlink_postgresql_name_missing_is_enoent", do_shm_unlink(via.shm_unlink, pa),
            do_shm_unlink(lc.shm_unlink, pb), -1, ENOENT);

    /* a name with a slash inside names no object: libc refuses it, and the
     * file that the path would reach stays (made here: nothing else is at risk) */
    snprintf(made_dir, sizeof made_dir, "/dev/shm/dsmpool-preload-test.%ld.d", (long)getpid());
    snprintf(made_file, sizeof made_file, "%s/f", made_dir);
    bool have = mkdir(made_dir, 0700) == 0 && (fd = open(made_file, O_RDWR | O_CREAT | O_EXCL, 0600)) >= 0;
    if (have) lc.close(fd);
    char inner[128], up[160];
    snprintf(inner, sizeof inner, "%s", made_file + strlen("/dev/shm"));
    snprintf(up, sizeof up, "/../shm%s", inner);
    const char *paths[] = {inner, up};
    const char *pname[] = {"shm_unlink_refuses_a_path_inside", "shm_unlink_refuses_a_path_up"};
    for (int i = 0; i < 2; i++) {
        outcome l = do_shm_unlink(lc.shm_unlink, paths[i]);
        outcome p = do_shm_unlink(via.shm_unlink, paths[i]);
        struct stat st;
        bool kept = !have || stat(made_file, &st) == 0;
        bool ok = kept && p.r == l.r && p.e == l.e && l.r == -1;
        report(pname[i], ok, "shm_unlink(\"%s\"): preload %ld, errno %d; libc %ld, errno %d; %s", paths[i], p.r, p.e,
               l.r, l.e, !have ? "(no file made)" : kept ? "the file stays" : "the file is gone");
        if (!kept && (fd = open(made_file, O_RDWR | O_CREAT | O_EXCL, 0600)) >= 0) lc.close(fd);
    }

    char longname[400];
    longname[0] = '/';
    memset(longname + 1, 'q', 300);
    longname[301] = 0;
    const char *bad[] = {"", "/", "//", longname};
    const char *badname[] = {"empty", "slash", "slashes", "300_chars"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char n[96];
        outcome l = do_shm_unlink(lc.shm_unlink, bad[i]);
        snprintf(n, sizeof n, "shm_unlink_refuses_name_%s", badname[i]);
        compare(n, do_shm_unlink(via.shm_unlink, bad[i]), l, -1, l.r == -1 ? l.e : -1);
    }
}

static void check_fallocate(const char *fname, int (*pf)(int, off_t, off_t), int (*lf)(int, off_t, off_t)) {
    char n[128];
    char tag[32];
    snprintf(tag, sizeof tag, "%s.p", fname);
    int a = shm_fd(tag, 0);
    snprintf(tag, sizeof tag, "%s.l", fname);
    int b = shm_fd(tag, 0);
    snprintf(n, sizeof n, "%s_keeps_errno", fname);
    compare(n, do_fallocate(pf, a, 0, SEG_SIZE), do_fallocate(lf, b, 0, SEG_SIZE), a < 0 ? -2 : 0, SENTINEL);
    snprintf(n, sizeof n, "%s_grows_the_file", fname);
    struct stat sa = {0}, sb = {0};
    bool ok = fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_size == SEG_SIZE && sa.st_blocks > 0 &&
              sa.st_size == sb.st_size && sa.st_blocks == sb.st_blocks;
    report(n, ok, "size %lld, %lld blocks; through libc %lld, %lld blocks", (long long)sa.st_size,
           (long long)sa.st_blocks, (long long)sb.st_size, (long long)sb.st_blocks);
    int c = closed_fd();
    snprintf(n, sizeof n, "%s_closed_fd_returns_ebadf", fname);
    compare(n, do_fallocate(pf, c, 0, 4096), do_fallocate(lf, c, 0, 4096), EBADF, SENTINEL);
    snprintf(n, sizeof n, "%s_negative_fd_returns_ebadf", fname);
    compare(n, do_fallocate(pf, -1, 0, 4096), do_fallocate(lf, -1, 0, 4096), EBADF, SENTINEL);
    snprintf(n, sizeof n, "%s_zero_length_returns_einval", fname);
    compare(n, do_fallocate(pf, a, 0, 0), do_fallocate(lf, a, 0, 0), EINVAL, SENTINEL);
    snprintf(n, sizeof n, "%s_negative_offset_returns_einval", fname);
    compare(n, do_fallocate(pf, a, -4096, 4096), do_fallocate(lf, a, -4096, 4096), EINVAL, SENTINEL);
    int ro = -1;
    if (a >= 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", a);
        ro = open(path, O_RDONLY);
    }
    snprintf(n, sizeof n, "%s_read_only_fd_returns_ebadf", fname);
    compare(n, do_fallocate(pf, ro, 0, 4096), do_fallocate(lf, ro, 0, 4096), EBADF, SENTINEL);
    int p[2] = {-1, -1};
    if (pipe(p) != 0) p[0] = p[1] = -1;
    snprintf(n, sizeof n, "%s_pipe_returns_espipe", fname);
    compare(n, do_fallocate(pf, p[1], 0, 4096), do_fallocate(lf, p[1], 0, 4096), ESPIPE, SENTINEL);
    int fds[] = {a, b, ro, p[0], p[1]};
    for (int i = 0; i < 5; i++)
        if (fds[i] >= 0) lc.close(fds[i]);
}

static void check_mmap(const char *fname, mmap_fn pf, mmap_fn lf) {
    char n[128];
    char tag[32];
    snprintf(tag, sizeof tag, "%s", fname);
    int fd = shm_fd(tag, 65536);
    const int rw = PROT_READ | PROT_WRITE;
    snprintf(n, sizeof n, "%s_anonymous_keeps_errno", fname);
    compare(n, do_mmap(pf, 65536, rw, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            do_mmap(lf, 65536, rw, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), 1, SENTINEL);
    snprintf(n, sizeof n, "%s_shared_file_keeps_errno", fname);
    compare(n, do_mmap(pf, 65536, rw, MAP_SHARED, fd, 0), do_mmap(lf, 65536, rw, MAP_SHARED, fd, 0), 1, SENTINEL);
    int c = closed_fd();
    snprintf(n, sizeof n, "%s_closed_fd_is_ebadf", fname);
    compare(n, do_mmap(pf, 65536, rw, MAP_SHARED, c, 0), do_mmap(lf, 65536, rw, MAP_SHARED, c, 0), -1, EBADF);
    snprintf(n, sizeof n, "%s_zero_length_is_einval", fname);
    compare(n, do_mmap(pf, 0, rw, MAP_SHARED, fd, 0), do_mmap(lf, 0, rw, MAP_SHARED, fd, 0), -1, EINVAL);
    snprintf(n, sizeof n, "%s_unaligned_offset_is_einval", fname);
    compare(n, do_mmap(pf, 4096, rw, MAP_SHARED, fd, 100), do_mmap(lf, 4096, rw, MAP_SHARED, fd, 100), -1, EINVAL);
    int ro = -1;
    if (fd >= 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ro = open(path, O_RDONLY);
    }
    snprintf(n, sizeof n, "%s_writable_share_of_read_only_fd_is_eacces", fname);
    compare(n, do_mmap(pf, 4096, rw, MAP_SHARED, ro, 0), do_mmap(lf, 4096, rw, MAP_SHARED, ro, 0), -1, EACCES);
    if (ro >= 0) lc.close(ro);
    if (fd >= 0) lc.close(fd);
}

static void check_munmap(void) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    void *a = lc.mmap(NULL, 2 * pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *b = lc.mmap(NULL, 2 * pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    compare("munmap_keeps_errno", do_munmap(via.munmap, a, 2 * pg), do_munmap(lc.munmap, b, 2 * pg),
            a == MAP_FAILED || b == MAP_FAILED ? -2 : 0, SENTINEL);
    /* a range no longer mapped: a success too */
    compare("munmap_of_nothing_mapped_keeps_errno", do_munmap(via.munmap, a, 2 * pg), do_munmap(lc.munmap, b, 2 * pg),
            0, SENTINEL);
    char *c = (char *)a + 1;
    compare("munmap_unaligned_is_einval", do_munmap(via.munmap, c, pg), do_munmap(lc.munmap, c, pg), -1, EINVAL);
    compare("munmap_zero_length_is_einval", do_munmap(via.munmap, a, 0), do_munmap(lc.munmap, a, 0), -1, EINVAL);
    void *top = (void *)UINTPTR_MAX; /* the end of the library's range check's arithmetic */
    compare("munmap_last_address_is_einval", do_munmap(via.munmap, top, pg), do_munmap(lc.munmap, top, pg), -1,
            EINVAL);
}

static void check_close(void) {
    int a = dup(0), b = dup(0);
    compare("close_keeps_errno", do_close(via.close, a), do_close(lc.close, b), a < 0 || b < 0 ? -2 : 0, SENTINEL);
    compare("close_closed_fd_is_ebadf", do_close(via.close, a), do_close(lc.close, b), -1, EBADF);
    compare("close_negative_fd_is_ebadf", do_close(via.close, -1), do_close(lc.close, -1), -1, EBADF);
}

/* ---- [postgresql names] ---------------------------------------------------- */

/* PostgreSQL's create (15: with ftruncate; 16+: posix_fallocate alone)
 * and attach, then destroy, of a name of its form, through the program's
 * own calls. NULL, or the first step that went wrong. */
static const char *pg_segment(bool truncate_first, char *why, size_t whylen) {
    char buf[32];
    const char *name;
    int fd;
    for (int i = 0;; i++) {
        name = pg_name(buf);
        errno = SENTINEL;
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd >= 0) made_add(name);
        if (fd >= 0 || errno != EEXIST || i == 64) break; /* EEXIST: another process's, the next */
    }
#define STEP(cond, ...)                                     \
    do {                                                    \
        if (!(cond)) {                                      \
            snprintf(why, whylen, "%s: " __VA_ARGS__);      \
            return why;                                     \
        }                                                   \
    } while (0)
    STEP(fd >= 0 && errno == SENTINEL, "shm_open(O_CREAT|O_EXCL) gave %d, errno %d", name, fd, errno);
    if (truncate_first) STEP(ftruncate(fd, SEG_SIZE) == 0, "ftruncate: %s", name, strerror(errno));
    errno = SENTINEL;
    int r = posix_fallocate(fd, 0, SEG_SIZE);
    STEP(r == 0 && errno == SENTINEL, "posix_fallocate gave %d, errno %d", name, r, errno);
    struct stat st;
    STEP(fstat(fd, &st) == 0, "fstat: %s", name, strerror(errno));
    STEP(st.st_size == SEG_SIZE && st.st_blocks > 0 && (st.st_mode & 07777) == 0600,
         "after posix_fallocate: size %lld, %lld blocks, mode %04o (expected %lld, some, 0600)", name,
         (long long)st.st_size, (long long)st.st_blocks, (unsigned)(st.st_mode & 07777), (long long)SEG_SIZE);
    errno = SENTINEL;
    unsigned char *p = mmap(NULL, (size_t)SEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    STEP(p != MAP_FAILED && errno == SENTINEL, "mmap gave %p, errno %d", name, (void *)p, errno);
    p[0] = 0x5a;
    p[SEG_SIZE - 1] = 0xa5;
    errno = SENTINEL;
    r = close(fd);
    STEP(r == 0 && errno == SENTINEL, "close gave %d, errno %d", name, r, errno);
    errno = SENTINEL;
    r = munmap(p, (size_t)SEG_SIZE);
    STEP(r == 0 && errno == SENTINEL, "munmap gave %d, errno %d", name, r, errno);

    errno = SENTINEL;
    fd = shm_open(name, O_RDWR, 0);
    STEP(fd >= 0 && errno == SENTINEL, "attach: shm_open gave %d, errno %d", name, fd, errno);
    STEP(fstat(fd, &st) == 0 && st.st_size == SEG_SIZE, "attach: fstat: size %lld", name, (long long)st.st_size);
    errno = SENTINEL;
    p = mmap(NULL, (size_t)SEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    STEP(p != MAP_FAILED && errno == SENTINEL, "attach: mmap gave %p, errno %d", name, (void *)p, errno);
    unsigned char c = 0;
    STEP(p[0] == 0x5a && p[SEG_SIZE - 1] == 0xa5, "attach: read back %#x and %#x, not 0x5a and 0xa5", name, p[0],
         p[SEG_SIZE - 1]);
    STEP(pread(fd, &c, 1, 0) == 1 && c == 0x5a, "the file holds %#x, not the byte written (0x5a)", name, c);
    errno = SENTINEL;
    r = close(fd);
    STEP(r == 0 && errno == SENTINEL, "attach: close gave %d, errno %d", name, r, errno);
    errno = SENTINEL;
    r = munmap(p, (size_t)SEG_SIZE);
    STEP(r == 0 && errno == SENTINEL, "detach: munmap gave %d, errno %d", name, r, errno);
    errno = SENTINEL;
    r = shm_unlink(name);
    STEP(r == 0 && errno == SENTINEL, "shm_unlink gave %d, errno %d", name, r, errno);
    char path[96];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    STEP(stat(path, &st) != 0 && errno == ENOENT, "%s is still there after shm_unlink", name, path);
#undef STEP
    return NULL;
}

static void check_pg_segments(void) {
    char why[512];
    const char *w = pg_segment(true, why, sizeof why);
    report("postgresql_15_create_attach_destroy_is_served_by_dev_shm", !w, "%s",
           w ? w : "data blocks in the file, mode 0600, the byte read back");
    w = pg_segment(false, why, sizeof why);
    report("postgresql_16_create_attach_destroy_is_served_by_dev_shm", !w, "%s",
           w ? w : "data blocks in the file, mode 0600, the byte read back");
}

#ifndef PASSTHROUGH_EARLY
/* ---- [threads] ------------------------------------------------------------- */

#define NTHREADS 4
#define ROUNDS 200

static void *thread_main(void *arg) {
    intptr_t fails = 0;
    char missing[96];
    snprintf(missing, sizeof missing, "/dsmpool-preload-test.%ld.t%ld.missing", (long)getpid(), (long)(intptr_t)arg);
    for (int i = 0; i < ROUNDS; i++) {
        errno = SENTINEL;
        void *a = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        int r = a == MAP_FAILED ? -1 : munmap(a, 1 << 16);
        fails += r != 0 || errno != SENTINEL;
        errno = SENTINEL;
        fails += close(-1) != -1 || errno != EBADF;
        errno = SENTINEL;
        fails += posix_fallocate(-1, 0, 1) != EBADF || errno != SENTINEL;
        errno = SENTINEL;
        fails += shm_open(missing, O_RDWR, 0) != -1 || errno != ENOENT;
        errno = SENTINEL;
        fails += shm_unlink(missing) != -1 || errno != ENOENT;
    }
    return (void *)fails;
}

static void check_threads(void) {
    pthread_t t[NTHREADS];
    int started = 0;
    for (; started < NTHREADS; started++)
        if (pthread_create(&t[started], NULL, thread_main, (void *)(intptr_t)started) != 0) break;
    intptr_t fails = 0;
    char why[512];
    const char *w = NULL;
    for (int i = 0; i < 8 && !w; i++) w = pg_segment(i % 2 == 0, why, sizeof why);
    for (int i = 0; i < started; i++) {
        void *f;
        pthread_join(t[i], &f);
        fails += (intptr_t)f;
    }
    report("threads_pass_through_at_once", started == NTHREADS && fails == 0 && !w,
           "%d threads of %d rounds: %ld calls went wrong%s%s", started, ROUNDS, (long)fails,
           w ? "; the main thread's segments: " : "", w ? w : "");
}

#endif

/* ---- the runs --------------------------------------------------------------- */

static void run_checks(const char *preload) {
    if (!lookup_all()) return;
    check_interposed(preload);
    check_shm_open();
    check_shm_unlink();
    check_fallocate("posix_fallocate", via.posix_fallocate, lc.posix_fallocate);
    check_fallocate("posix_fallocate64", via.posix_fallocate64, lc.posix_fallocate64);
    check_mmap("mmap", via.mmap, lc.mmap);
    check_mmap("mmap64", via.mmap64, lc.mmap64);
    check_munmap();
    check_close();
    check_pg_segments();
    cleanup();
}
#endif

#ifdef PASSTHROUGH_EARLY

/* the tally of the checks made before the preload's constructor: [0] set
 * when they ran, [1] tested, [2] passing (read by the early main) */
extern int passthrough_early_tally[3];
int passthrough_early_tally[3];

/* this library is loaded after the preload library (so initialized before it) */
static int order_cb(struct dl_phdr_info *info, size_t size, void *data) {
    int *seen = data;
    (void)size;
    if (strcmp(base(info->dlpi_name), PRELOAD_NAME) == 0 && !seen[1]) seen[0] = 1;
    if (strcmp(base(info->dlpi_name), "libpreload_early.so") == 0) seen[1] = 1;
    return 0;
}

__attribute__((constructor)) static void early(void) {
    suite = "preload_early";
    int seen[2] = {0, 0};
    dl_iterate_phdr(order_cb, seen);
    report("loaded_after_the_preload_library", seen[0] && seen[1], "the preload library %s, this library %s",
           seen[0] ? "loaded before" : "not loaded before", seen[1] ? "found" : "not found");
    run_checks(NULL);
    passthrough_early_tally[0] = 1;
    passthrough_early_tally[1] = tested;
    passthrough_early_tally[2] = passing;
}

#elif defined(PASSTHROUGH_EARLY_MAIN)

extern int passthrough_early_tally[3];

int main(void) {
    report("early_checks_ran", passthrough_early_tally[0], "libpreload_early.so's constructor %s",
           passthrough_early_tally[0] ? "ran its checks" : "did not run them");
    tested += passthrough_early_tally[1];
    passing += passthrough_early_tally[2];
    printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: 0\n", tested, passing,
           tested - passing);
    return passing == tested ? 0 : 1;
}

#else

int main(int argc, char **argv) {
    const char *e = dlerror();
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH-TO-libdsmpool-preload.so\n", argv[0]);
        return 2;
    }
    report("dlerror_is_clear_at_start", !e, "dlerror() in main: %s", e ? e : "nothing");
    run_checks(argv[1]);
    check_threads();
    cleanup();
    printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: 0\n", tested, passing,
           tested - passing);
    return passing == tested ? 0 : 1;
}

#endif
