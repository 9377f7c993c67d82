/*
 * os_linux.c -- the Linux side of dp_os.h.
 *
 * One function per OS operation; each retries EINTR, backs out what it did
 * on failure and preserves errno (the OS_SAVE/OS_RET pair: os_errno.h).
 * Capabilities are probed once (pthread_once) and cached in dp_caps. What
 * may still be made resident (the memory and hugetlb cgroups' room) is
 * os_room.c's.
 */
#include "dp_os.h"
#include "os_errno.h"

#include "dp_atomic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef SHM_HUGE_SHIFT
#define SHM_HUGE_SHIFT 26
#endif
#ifndef MFD_HUGETLB
#define MFD_HUGETLB 4u
#endif


static dp_caps caps;
static pthread_once_t caps_once = PTHREAD_ONCE_INIT;

static unsigned log2_size(size_t sz) { return (unsigned)__builtin_ctzll(sz); }

static bool huge_dir_exists(size_t sz) {
    char p[96];
    struct stat st;
    snprintf(p, sizeof p, "/sys/kernel/mm/hugepages/hugepages-%zukB", sz / 1024);
    return stat(p, &st) == 0;
}

static void caps_probe(void) {
    int saved = errno;
    long ps = sysconf(_SC_PAGESIZE);
    caps.page_size = ps > 0 ? (size_t)ps : 4096;
    long on = sysconf(_SC_NPROCESSORS_ONLN), cf = sysconf(_SC_NPROCESSORS_CONF);
    caps.ncpus_online = on > 0 ? (unsigned)on : 1;
    caps.ncpus_conf = cf > 0 ? (unsigned)cf : caps.ncpus_online;
    long pp = sysconf(_SC_PHYS_PAGES);
    caps.ram_bytes = pp > 0 ? (uint64_t)pp * caps.page_size : 0;
    FILE *f = fopen("/proc/meminfo", "re");
    if (f) {
        char line[256];
        unsigned long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "Hugepagesize: %lu kB", &kb) == 1) caps.huge_default = kb * 1024;
        fclose(f);
    }
    caps.huge_2m = huge_dir_exists(2u << 20);
    caps.huge_1g = huge_dir_exists(1u << 30);
    int fd = (int)memfd_create("dsmpool-probe", MFD_CLOEXEC);
    caps.memfd = fd >= 0;
    if (fd >= 0) close(fd);
    /* MADV_POPULATE_WRITE on a tiny private mapping: EINVAL means unknown. */
    void *p = mmap(NULL, caps.page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p != MAP_FAILED) {
        caps.populate_write = madvise(p, caps.page_size, MADV_POPULATE_WRITE) == 0;
        munmap(p, caps.page_size);
    }
    f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "re");
    if (f) {
        char buf[256];
        if (fgets(buf, sizeof buf, f)) {
            char *a = strchr(buf, '['), *b = a ? strchr(a, ']') : NULL;
            if (a && b && (size_t)(b - a - 1) < sizeof caps.thp_shmem) {
                memcpy(caps.thp_shmem, a + 1, (size_t)(b - a - 1));
                caps.thp_shmem[b - a - 1] = 0;
            }
        }
        fclose(f);
    }
    errno = saved;
}

const dp_caps *dp_os_caps(void) {
    pthread_once(&caps_once, caps_probe);
    return &caps;
}

static int read_u64_file(const char *path, uint64_t *v) {
    FILE *f = fopen(path, "re");
    if (!f) return -errno;
    unsigned long long x;
    int ok = fscanf(f, "%llu", &x) == 1;
    fclose(f);
    if (!ok) return -EIO;
    *v = x;
    return 0;
}

/* One of the kernel's counters of hugetlb pages of size sz
 * (/sys/kernel/mm/hugepages/hugepages-<kB>kB/<name>_hugepages). */
static int huge_counter(size_t sz, const char *name, uint64_t *v) {
    char p[128];
    snprintf(p, sizeof p, "/sys/kernel/mm/hugepages/hugepages-%zukB/%s_hugepages", sz / 1024, name);
    return read_u64_file(p, v);
}

int dp_os_huge_counts(size_t sz, uint64_t *free_pages, uint64_t *total_pages) {
    OS_SAVE;
    int r = huge_counter(sz, "free", free_pages);
    OS_RET(r ? r : huge_counter(sz, "nr", total_pages));
}

int dp_os_huge_surplus(size_t sz, uint64_t *surplus, uint64_t *overcommit) {
    OS_SAVE;
    int r = huge_counter(sz, "surplus", surplus);
    OS_RET(r ? r : huge_counter(sz, "nr_overcommit", overcommit));
}

int dp_os_huge_avail(size_t sz, uint64_t *avail) {
    OS_SAVE;
    static const char *const f[4] = {"free", "resv", "nr_overcommit", "surplus"};
    uint64_t v[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        int r = huge_counter(sz, f[i], &v[i]);
        if (r && i < 2) OS_RET(r); /* no overcommit counters: none to add */
    }
    *avail = (v[0] > v[1] ? v[0] - v[1] : 0) + (v[2] > v[3] ? v[2] - v[3] : 0);
    OS_RET(0);
}

int dp_os_hugetlbfs_dir(size_t sz, char *buf, size_t n) {
    OS_SAVE;
    FILE *f = fopen("/proc/self/mounts", "re");
    if (!f) OS_RET(-errno);
    char line[1024];
    int r = -ENOENT;
    while (r != 0 && fgets(line, sizeof line, f)) {
        char dev[256], dir[512], type[64], opts[512];
        if (sscanf(line, "%255s %511s %63s %511s", dev, dir, type, opts) != 4) continue;
        if (strcmp(type, "hugetlbfs") != 0) continue;
        size_t psz = dp_os_caps()->huge_default;
        char *o = strstr(opts, "pagesize=");
        if (o) {
            char unit = 0;
            unsigned long v = 0;
            if (sscanf(o + 9, "%lu%c", &v, &unit) >= 1)
                psz = unit == 'G' ? v << 30 : unit == 'M' ? v << 20 : unit == 'K' ? v << 10 : v;
        }
        if (psz != sz || access(dir, W_OK) != 0) continue;
        if (strlen(dir) + 1 > n) continue;
        strcpy(buf, dir);
        r = 0;
    }
    fclose(f);
    OS_RET(r);
}

int dp_os_reserve_va(size_t len, size_t align, void **addr) {
    OS_SAVE;
    size_t span = len + align;
    if (span < len) OS_RET(-ENOMEM);
    char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) OS_RET(-errno);
    uintptr_t a = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
    if (a > (uintptr_t)p) munmap(p, a - (uintptr_t)p);
    size_t tail = (size_t)((uintptr_t)p + span - (a + len));
    if (tail) munmap((char *)a + len, tail);
    *addr = (void *)a;
    OS_RET(0);
}

int dp_os_unmap(void *addr, size_t len) {
    OS_SAVE;
    OS_RET(munmap(addr, len) == 0 ? 0 : -errno);
}

int dp_os_map_anon_shared(void *addr, size_t len, size_t huge_sz, bool noreserve) {
    OS_SAVE;
    int fl = MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED | (noreserve ? MAP_NORESERVE : 0);
    if (huge_sz) fl |= MAP_HUGETLB | (int)(log2_size(huge_sz) << MAP_HUGE_SHIFT);
    void *p = mmap(addr, len, PROT_READ | PROT_WRITE, fl, -1, 0);
    OS_RET(p == MAP_FAILED ? -errno : 0);
}

int dp_os_map_anon_file(void *addr, size_t len) {
    OS_SAVE;
    int fd = (int)memfd_create("dsmpool-anon", MFD_CLOEXEC);
    if (fd < 0) OS_RET(-errno);
    int r = ftruncate(fd, (off_t)len) == 0 ? 0 : -errno;
    if (r == 0 && mmap(addr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) r = -errno;
    close(fd); /* the mapping keeps the file */
    OS_RET(r);
}

bool dp_os_overcommit_strict(void) {
    int saved = errno;
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "re");
    int mode = 0;
    if (f) {
        if (fscanf(f, "%d", &mode) != 1) mode = 0;
        fclose(f);
    }
    errno = saved;
    return mode == 2;
}

int dp_os_present_bytes(void *addr, size_t len, uint64_t *bytes) {
    OS_SAVE;
    unsigned char vec[4096];
    const size_t page = 4096, chunk = sizeof vec * page;
    uint64_t n = 0;
    for (size_t off = 0; off < len; off += chunk) {
        size_t l = len - off < chunk ? len - off : chunk;
        if (mincore((char *)addr + off, l, vec) != 0) OS_RET(-errno);
        for (size_t i = 0; i < (l + page - 1) / page; i++) n += vec[i] & 1;
    }
    *bytes = n * page;
    OS_RET(0);
}

int dp_os_map_fd(void *addr, size_t len, int fd, bool noreserve) {
    OS_SAVE;
    void *p = mmap(addr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | (noreserve ? MAP_NORESERVE : 0),
                   fd, 0);
    OS_RET(p == MAP_FAILED ? -errno : 0);
}

int dp_os_memfd(const char *tag, size_t huge_sz) {
    OS_SAVE;
    unsigned fl = MFD_CLOEXEC;
    if (huge_sz) fl |= MFD_HUGETLB | (log2_size(huge_sz) << MAP_HUGE_SHIFT);
    int fd = (int)memfd_create(tag, fl);
    OS_RET(fd < 0 ? -errno : fd);
}

int dp_os_shm_open(const char *name, bool create, unsigned mode) {
    OS_SAVE;
    int fd;
    do
        fd = shm_open(name, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), (mode_t)mode);
    while (fd < 0 && errno == EINTR);
    if (fd >= 0 && create) (void)fchmod(fd, (mode_t)mode); /* umask must not narrow it */
    OS_RET(fd < 0 ? -errno : fd);
}

int dp_os_shm_open_any(const char *name, unsigned mode) {
    OS_SAVE;
    int fd;
    do
        fd = shm_open(name, O_RDWR | O_CLOEXEC | O_CREAT, (mode_t)mode);
    while (fd < 0 && errno == EINTR);
    if (fd >= 0) (void)fchmod(fd, (mode_t)mode); /* umask must not narrow it (another owner's: EPERM, fine) */
    OS_RET(fd < 0 ? -errno : fd);
}

int dp_os_file_open_ro(const char *path) {
    OS_SAVE;
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); /* a FIFO must not block us */
    while (fd < 0 && errno == EINTR);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        OS_RET(-EINVAL);
    }
    OS_RET(fd < 0 ? -errno : fd);
}

int dp_os_shm_unlink(const char *name) {
    OS_SAVE;
    OS_RET(shm_unlink(name) == 0 ? 0 : -errno);
}

/* ---- /dev/shm through a directory descriptor ------------------------------
 * A pool's objects in /dev/shm (its anchor, its OS fallback segments) are
 * opened relative to a descriptor of the directory the pool was made in, so
 * that a fork()ed child that moved to another mount namespace still reaches
 * them (life.c [anchor]). Names are shm_open's ("/x"): the slash is dropped. */

static const char *shm_rel(const char *name) {
    while (*name == '/') name++;
    return name;
}

int dp_os_shm_dir(int *fd, uint64_t *dev, uint64_t *ino) {
    OS_SAVE;
    int d;
    do
        d = open("/dev/shm", O_PATH | O_DIRECTORY | O_CLOEXEC);
    while (d < 0 && errno == EINTR);
    if (d < 0) OS_RET(-errno);
    struct stat st;
    if (fstat(d, &st) != 0) {
        int e = -errno;
        close(d);
        OS_RET(e);
    }
    *fd = d;
    *dev = (uint64_t)st.st_dev;
    *ino = (uint64_t)st.st_ino;
    OS_RET(0);
}

int dp_os_shm_openat(int dir, const char *name, bool create, unsigned mode) {
    OS_SAVE;
    const char *rel = shm_rel(name);
    if (dir < 0 || !*rel || strchr(rel, '/')) OS_RET(-EINVAL);
    int fd;
    do
        fd = openat(dir, rel, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT | O_EXCL : 0), (mode_t)mode);
    while (fd < 0 && errno == EINTR);
    if (fd >= 0 && create) (void)fchmod(fd, (mode_t)mode); /* umask must not narrow it */
    OS_RET(fd < 0 ? -errno : fd);
}

int dp_os_shm_unlinkat(int dir, const char *name) {
    OS_SAVE;
    const char *rel = shm_rel(name);
    if (dir < 0 || !*rel || strchr(rel, '/')) OS_RET(-EINVAL);
    OS_RET(unlinkat(dir, rel, 0) == 0 ? 0 : -errno);
}

int dp_os_dir_each_at(int dir, bool (*fn)(const char *name, void *arg), void *arg) {
    OS_SAVE;
    int d;
    do
        d = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    while (d < 0 && errno == EINTR);
    if (d < 0) OS_RET(-errno);
    DIR *dd = fdopendir(d);
    if (!dd) {
        int e = -errno;
        close(d);
        OS_RET(e);
    }
    for (struct dirent *e; (e = readdir(dd));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!fn(e->d_name, arg)) break;
    }
    closedir(dd);
    OS_RET(0);
}

int dp_os_file_open(const char *path, bool create, unsigned mode) {
    OS_SAVE;
    int fd;
    do
        fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), (mode_t)mode);
    while (fd < 0 && errno == EINTR);
    if (fd >= 0 && create) (void)fchmod(fd, (mode_t)mode);
    OS_RET(fd < 0 ? -errno : fd);
}

bool dp_os_path_exists(const char *path) {
    OS_SAVE;
    bool r = access(path, F_OK) == 0;
    errno = saved_errno_;
    return r;
}

int dp_os_file_unlink(const char *path) {
    OS_SAVE;
    OS_RET(unlink(path) == 0 ? 0 : -errno);
}

int dp_os_truncate(int fd, size_t len) {
    OS_SAVE;
    int r;
    do
        r = ftruncate(fd, (off_t)len);
    while (r < 0 && errno == EINTR);
    OS_RET(r < 0 ? -errno : 0);
}

int dp_os_file_link(const char *from, const char *to) {
    OS_SAVE;
    OS_RET(link(from, to) == 0 ? 0 : -errno);
}

int dp_os_fallocate(int fd, size_t len) { return dp_os_fallocate_range(fd, 0, len); }

int dp_os_fallocate_range(int fd, uint64_t off, uint64_t len) {
    OS_SAVE;
    int r;
    do
        r = fallocate(fd, 0, (off_t)off, (off_t)len);
    while (r < 0 && errno == EINTR);
    OS_RET(r < 0 ? -errno : 0);
}

int dp_os_fd_size(int fd, size_t *len) {
    OS_SAVE;
    struct stat st;
    if (fstat(fd, &st) != 0) OS_RET(-errno);
    *len = (size_t)st.st_size;
    OS_RET(0);
}

int dp_os_close(int fd) {
    OS_SAVE;
    /* Linux closes the fd even when close() reports EINTR: never retry. */
    OS_RET(close(fd) == 0 || errno == EINTR ? 0 : -errno);
}

int dp_os_dup(int fd) {
    OS_SAVE;
    int r = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    OS_RET(r < 0 ? -errno : r);
}

int dp_os_sysv_key(const char *name, int32_t *key) {
    OS_SAVE;
    char *end;
    errno = 0;
    long long v = strtoll(name, &end, 0);
    if (*name && !*end && !errno && v > 0 && v <= 0x7fffffff) {
        *key = (int32_t)v;
        OS_RET(0);
    }
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    h &= 0x7fffffff;
    *key = (int32_t)(h ? h : 1);
    OS_RET(0);
}

int dp_os_sysv_find(int32_t key) {
    OS_SAVE;
    int id = shmget((key_t)key, 0, 0);
    OS_RET(id < 0 ? -errno : id);
}

int dp_os_sysv_make(int32_t key, size_t len, unsigned mode, size_t huge_sz, bool noreserve) {
    OS_SAVE;
    int fl = IPC_CREAT | IPC_EXCL | (int)(mode & 0777);
    if (huge_sz) fl |= SHM_HUGETLB | (int)(log2_size(huge_sz) << SHM_HUGE_SHIFT);
    if (noreserve) fl |= SHM_NORESERVE;
    int id = shmget((key_t)key, len, fl);
    OS_RET(id < 0 ? -errno : id);
}

int dp_os_sysv_size(int shmid, size_t *len) {
    OS_SAVE;
    struct shmid_ds ds;
    if (shmctl(shmid, IPC_STAT, &ds) != 0) OS_RET(-errno);
    *len = ds.shm_segsz;
    OS_RET(0);
}

int dp_os_sysv_owner(int shmid, uint32_t *uid) {
    OS_SAVE;
    struct shmid_ds ds;
    if (shmctl(shmid, IPC_STAT, &ds) != 0) OS_RET(-errno);
    *uid = (uint32_t)ds.shm_perm.cuid; /* not .uid: IPC_SET lets the owner name anyone */
    OS_RET(0);
}

int dp_os_fd_owner(int fd, uint32_t *uid) {
    OS_SAVE;
    struct stat st;
    if (fstat(fd, &st) != 0) OS_RET(-errno);
    *uid = (uint32_t)st.st_uid;
    OS_RET(0);
}

int dp_os_path_owner(const char *path, uint32_t *uid) {
    OS_SAVE;
    struct stat st;
    if (lstat(path, &st) != 0) OS_RET(-errno);
    *uid = (uint32_t)st.st_uid;
    OS_RET(0);
}

int dp_os_sysv_attach(int shmid, void *addr) {
    OS_SAVE;
    void *p = shmat(shmid, addr, SHM_REMAP);
    OS_RET(p == (void *)-1 ? -errno : 0);
}

int dp_os_sysv_detach(void *addr) {
    OS_SAVE;
    OS_RET(shmdt(addr) == 0 ? 0 : -errno);
}

int dp_os_sysv_remove(int shmid) {
    OS_SAVE;
    OS_RET(shmctl(shmid, IPC_RMID, NULL) == 0 ? 0 : -errno);
}

int dp_os_madvise_hugepage(void *addr, size_t len, bool huge) {
    OS_SAVE;
    OS_RET(madvise(addr, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) == 0 ? 0 : -errno);
}

/* ---- populate: MADV_POPULATE_WRITE per slice, in threads ------------- */

typedef struct pop_job {
    char *addr;
    size_t len;
    int err;
} pop_job;

static int populate_one(char *addr, size_t len) {
    if (dp_os_caps()->populate_write) {
        int r;
        do
            r = madvise(addr, len, MADV_POPULATE_WRITE);
        while (r < 0 && (errno == EINTR || errno == EAGAIN));
        if (r == 0) return 0;
        if (errno != EINVAL) return -errno;
    }
    /* Touch loop: an atomic or of 0 writes without changing what others wrote. */
    size_t ps = dp_os_caps()->page_size;
    for (size_t o = 0; o < len; o += ps) dp_plain_fetch_or_relaxed(addr + o, 0);
    return 0;
}

int dp_os_populate_strict(void *addr, size_t len) {
    OS_SAVE;
    if (!dp_os_caps()->populate_write) OS_RET(-EOPNOTSUPP);
    int r;
    do
        r = madvise(addr, len, MADV_POPULATE_WRITE);
    while (r < 0 && (errno == EINTR || errno == EAGAIN));
    OS_RET(r < 0 ? -errno : 0);
}

int dp_os_release(void *addr, size_t len, int fd, uint64_t off) {
    OS_SAVE;
    int r;
    if (fd >= 0) {
        do
            r = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
        while (r < 0 && errno == EINTR);
        if (r == 0 || errno != EOPNOTSUPP) OS_RET(r < 0 ? -errno : 0);
    }
    do
        r = madvise(addr, len, MADV_REMOVE);
    while (r < 0 && (errno == EINTR || errno == EAGAIN));
    OS_RET(r < 0 ? -errno : 0);
}

static void *pop_thread(void *arg) {
    pop_job *j = arg;
    j->err = populate_one(j->addr, j->len);
    return NULL;
}

int dp_os_populate(void *addr, size_t len, unsigned threads) {
    OS_SAVE;
    const size_t gran = 2u << 20; /* slices on 2 MiB: whole huge pages */
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    size_t nslices = (len + gran - 1) / gran;
    if (threads > nslices) threads = (unsigned)nslices;
    if (threads <= 1) OS_RET(populate_one(addr, len));
    pop_job jobs[64];
    pthread_t tid[64];
    size_t per = (nslices + threads - 1) / threads * gran, off = 0;
    unsigned started = 0;
    int err = 0;
    for (unsigned i = 0; i < threads && off < len; i++, off += per) {
        jobs[i] = (pop_job){(char *)addr + off, off + per > len ? len - off : per, 0};
        if (pthread_create(&tid[i], NULL, pop_thread, &jobs[i]) != 0) {
            jobs[i].err = populate_one(jobs[i].addr, jobs[i].len); /* do it here instead */
            tid[i] = 0;
        }
        started = i + 1;
    }
    for (unsigned i = 0; i < started; i++) {
        if (tid[i]) pthread_join(tid[i], NULL);
        if (jobs[i].err && !err) err = jobs[i].err;
    }
    OS_RET(err);
}

static int ofd_lock(int fd, int cmd, short type, uint64_t n, uint64_t len) {
    struct flock fl;
    memset(&fl, 0, sizeof fl); /* l_pid must be 0 for OFD locks */
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)n;
    fl.l_len = (off_t)len;
    int r;
    do
        r = fcntl(fd, cmd, &fl);
    while (r < 0 && errno == EINTR);
    if (r < 0) return errno == EACCES ? -EAGAIN : -errno;
    return cmd == F_OFD_GETLK ? (fl.l_type != F_UNLCK) : 0;
}

int dp_os_ofd_trylock(int fd, uint64_t n) {
    OS_SAVE;
    OS_RET(ofd_lock(fd, F_OFD_SETLK, F_WRLCK, n, 1));
}

int dp_os_ofd_unlock(int fd, uint64_t n) {
    OS_SAVE;
    OS_RET(ofd_lock(fd, F_OFD_SETLK, F_UNLCK, n, 1));
}

int dp_os_ofd_test(int fd, uint64_t n) {
    OS_SAVE;
    OS_RET(ofd_lock(fd, F_OFD_GETLK, F_WRLCK, n, 1));
}

int dp_os_ofd_test_range(int fd, uint64_t n, uint64_t len) {
    OS_SAVE;
    OS_RET(ofd_lock(fd, F_OFD_GETLK, F_WRLCK, n, len));
}

int dp_os_ofd_tryread(int fd, uint64_t n) {
    OS_SAVE;
    OS_RET(ofd_lock(fd, F_OFD_SETLK, F_RDLCK, n, 1));
}

/* A polling wait: a holder that is stopped must not stop us for ever. */
static int ofd_wait(int fd, short type, uint64_t n, unsigned ms) {
    uint64_t end = dp_os_now_ns() + (uint64_t)ms * 1000000ull;
    int r;
    while ((r = ofd_lock(fd, F_OFD_SETLK, type, n, 1)) == -EAGAIN && dp_os_now_ns() < end) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return r;
}

int dp_os_ofd_waitread(int fd, uint64_t n, unsigned ms) {
    OS_SAVE;
    OS_RET(ofd_wait(fd, F_RDLCK, n, ms));
}

int dp_os_ofd_waitlock(int fd, uint64_t n, unsigned ms) {
    OS_SAVE;
    OS_RET(ofd_wait(fd, F_WRLCK, n, ms));
}

int dp_os_reopen(int fd) {
    OS_SAVE;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int r;
    do
        r = open(path, O_RDWR | O_CLOEXEC);
    while (r < 0 && errno == EINTR);
    if (r >= 0 && dp_os_same_file(r, fd) != 1) { /* /proc of another pid namespace */
        close(r);
        OS_RET(-ESTALE);
    }
    OS_RET(r < 0 ? -errno : r);
}

int dp_os_same_file(int a, int b) {
    OS_SAVE;
    struct stat sa, sb;
    if (fstat(a, &sa) != 0 || fstat(b, &sb) != 0) OS_RET(-errno);
    OS_RET(sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino);
}

int dp_os_sem_create(int32_t key, unsigned nsems, unsigned mode) {
    OS_SAVE;
    int id = semget((key_t)key, (int)nsems, IPC_CREAT | IPC_EXCL | (int)(mode & 0777));
    OS_RET(id < 0 ? -errno : id);
}

int dp_os_sem_get(int32_t key) {
    OS_SAVE;
    int id = semget((key_t)key, 0, 0);
    OS_RET(id < 0 ? -errno : id);
}

int dp_os_sem_max(void) {
    OS_SAVE;
    uint64_t v = 32000;
    FILE *f = fopen("/proc/sys/kernel/sem", "re");
    if (f) {
        unsigned long long a;
        if (fscanf(f, "%llu", &a) == 1) v = a;
        fclose(f);
    }
    OS_RET(v > 0x7fffffff ? 0x7fffffff : (int)v);
}

static int sem_op(int semid, struct sembuf *ops, size_t n) {
    int r;
    do
        r = semop(semid, ops, n);
    while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : 0;
}

int dp_os_sem_trylock(int semid, unsigned n) {
    OS_SAVE;
    /* atomically: wait for 0 (without waiting), then raise to 1 with undo */
    struct sembuf ops[2] = {{(unsigned short)n, 0, IPC_NOWAIT},
                            {(unsigned short)n, 1, SEM_UNDO | IPC_NOWAIT}};
    OS_RET(sem_op(semid, ops, 2));
}

int dp_os_sem_unlock(int semid, unsigned n) {
    OS_SAVE;
    struct sembuf op = {(unsigned short)n, -1, SEM_UNDO | IPC_NOWAIT};
    OS_RET(sem_op(semid, &op, 1));
}

int dp_os_sem_raise(int semid, unsigned n) {
    OS_SAVE;
    struct sembuf op = {(unsigned short)n, 1, SEM_UNDO | IPC_NOWAIT};
    OS_RET(sem_op(semid, &op, 1));
}

int dp_os_sem_tryshare(int semid, unsigned s, unsigned x) {
    OS_SAVE;
    /* atomically: the exclusive one is 0 (without waiting), the shared count + 1 */
    struct sembuf ops[2] = {{(unsigned short)x, 0, IPC_NOWAIT},
                            {(unsigned short)s, 1, SEM_UNDO | IPC_NOWAIT}};
    OS_RET(sem_op(semid, ops, 2));
}

int dp_os_sem_tryexcl(int semid, unsigned s, unsigned x) {
    OS_SAVE;
    /* atomically: no shared holder, no exclusive one, then the exclusive one to 1 */
    struct sembuf ops[3] = {{(unsigned short)s, 0, IPC_NOWAIT},
                            {(unsigned short)x, 0, IPC_NOWAIT},
                            {(unsigned short)x, 1, SEM_UNDO | IPC_NOWAIT}};
    OS_RET(sem_op(semid, ops, 3));
}

int dp_os_sem_value(int semid, unsigned n) {
    OS_SAVE;
    int v = semctl(semid, (int)n, GETVAL);
    OS_RET(v < 0 ? -errno : v);
}

int dp_os_sem_any_held(int semid) {
    OS_SAVE;
    struct semid_ds ds;
    union {
        int val;
        struct semid_ds *buf;
        unsigned short *array;
    } arg = {.buf = &ds};
    if (semctl(semid, 0, IPC_STAT, arg) != 0) OS_RET(-errno);
    for (unsigned long i = 0; i < ds.sem_nsems; i++) {
        int v = semctl(semid, (int)i, GETVAL);
        if (v < 0) OS_RET(-errno);
        if (v > 0) OS_RET(1);
    }
    OS_RET(0);
}

int dp_os_sem_test(int semid, unsigned n) {
    OS_SAVE;
    int v = semctl(semid, (int)n, GETVAL);
    OS_RET(v < 0 ? -errno : v > 0);
}

int dp_os_sem_remove(int semid) {
    OS_SAVE;
    OS_RET(semctl(semid, 0, IPC_RMID) == 0 ? 0 : -errno);
}

int dp_os_membarrier_global(void) {
    OS_SAVE;
    /* MEMBARRIER_CMD_GLOBAL (1): no registration needed; every running
     * thread on the system passes a barrier before it returns. */
    long r = syscall(SYS_membarrier, 1, 0, 0);
    OS_RET(r < 0 ? -errno : 0);
}

int dp_os_fork_page(void **page, bool *wipes) {
    OS_SAVE;
    size_t ps = dp_os_caps()->page_size;
    void *p = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) OS_RET(-errno);
#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif
    *wipes = madvise(p, ps, MADV_WIPEONFORK) == 0;
    *page = p;
    OS_RET(0);
}

pid_t dp_os_getpid(void) { return getpid(); }

pid_t dp_os_gettid(void) { return (pid_t)syscall(SYS_gettid); }

void dp_os_yield(void) {
    OS_SAVE;
    sched_yield();
    errno = saved_errno_;
}

int dp_os_dir_each(const char *dir, bool (*fn)(const char *name, void *arg), void *arg) {
    OS_SAVE;
    DIR *d = opendir(dir);
    if (!d) OS_RET(-errno);
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!fn(e->d_name, arg)) break;
    }
    closedir(d);
    OS_RET(0);
}

int dp_os_sysv_each(bool (*fn)(int shmid, int32_t key, size_t size, uint64_t nattch, void *arg), void *arg) {
    OS_SAVE;
    struct shm_info info;
    int max = shmctl(0, SHM_INFO, (struct shmid_ds *)(void *)&info);
    if (max < 0) OS_RET(-errno);
    for (int i = 0; i <= max; i++) {
        struct shmid_ds ds;
        int id = shmctl(i, SHM_STAT, &ds);
        if (id < 0) continue;
        if (!fn(id, (int32_t)ds.shm_perm.__key, ds.shm_segsz, (uint64_t)ds.shm_nattch, arg)) break;
    }
    OS_RET(0);
}

int dp_os_sysv_peek(int shmid, void *buf, size_t len) {
    OS_SAVE;
    void *p = shmat(shmid, NULL, SHM_RDONLY);
    if (p == (void *)-1) OS_RET(-errno);
    memcpy(buf, p, len);
    shmdt(p);
    OS_RET(0);
}

int dp_os_file_peek(int fd, void *buf, size_t len) {
    OS_SAVE;
    struct stat st;
    if (fstat(fd, &st) != 0) OS_RET(-errno);
    if ((size_t)st.st_size < len) OS_RET(-ENODATA);
    ssize_t r;
    do
        r = pread(fd, buf, len, 0);
    while (r < 0 && errno == EINTR);
    if (r == (ssize_t)len) OS_RET(0);
    size_t map = st.st_size < (off_t)(1u << 30) ? (size_t)st.st_size : (size_t)1 << 30;
    void *p = mmap(NULL, map, PROT_READ, MAP_SHARED, fd, 0); /* hugetlbfs: no read() */
    if (p == MAP_FAILED) OS_RET(-errno);
    memcpy(buf, p, len);
    munmap(p, map);
    OS_RET(0);
}

uint64_t dp_os_random64(void) {
    int saved = errno;
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
        v = dp_os_now_ns() ^ ((uint64_t)getpid() << 32);
    errno = saved;
    return v;
}

uint64_t dp_os_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* This process's time namespace's CLOCK_MONOTONIC offset, read once per
 * process (a fork()ed child reads its own: it may live in the namespace
 * its parent made for its children). /proc/self/timens_offsets shows the
 * offsets of the namespace a process's children get; they are its own
 * when /proc/self/ns/time and time_for_children name one namespace. Where
 * neither can be read (no time namespaces, /proc hidden) the offset is 0. */
static dp_a64 tns_pid, tns_off;

static uint64_t timens_offset(void) {
    uint64_t me = (uint64_t)getpid();
    if (dp_load_acquire(&tns_pid) == me) /* acquire: pairs with timens_offset's release store (the offset) */
        return dp_load_relaxed(&tns_off);
    uint64_t off = 0;
    char a[128] = "", b[128] = "";
    ssize_t la = readlink("/proc/self/ns/time", a, sizeof a - 1), lb = readlink("/proc/self/ns/time_for_children", b, sizeof b - 1);
    if (la > 0 && lb == la && !memcmp(a, b, (size_t)la)) {
        FILE *f = fopen("/proc/self/timens_offsets", "re");
        if (f) {
            char name[32];
            long long sec, nsec;
            while (fscanf(f, "%31s %lld %lld", name, &sec, &nsec) == 3)
                if (!strcmp(name, "monotonic")) off = (uint64_t)(sec * 1000000000ll + nsec);
            fclose(f);
        }
    }
    dp_store_relaxed(&tns_off, off); /* relaxed: published by the release store of the pid */
    dp_store_release(&tns_pid, me);  /* release: pairs with timens_offset's acquire load */
    return off;
}

uint64_t dp_os_shared_now_ns(void) {
    int saved = errno;
    uint64_t off = timens_offset(); /* (two's complement: a negative offset adds) */
    errno = saved;
    return dp_os_now_ns() - off;
}

void dp_os_sleep_ns(uint64_t ns) {
    int saved = errno;
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    errno = saved;
}

int dp_os_smaps_huge(const void *addr, size_t len, size_t *bytes) {
    OS_SAVE;
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f) OS_RET(-errno);
    static const char *fields[] = {"ShmemPmdMapped:", "FilePmdMapped:", "Shared_Hugetlb:",
                                   "Private_Hugetlb:", "AnonHugePages:"};
    char line[512];
    uintptr_t lo = (uintptr_t)addr, hi = lo + len;
    bool in = false;
    size_t kb = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        char *dash = strchr(line, '-'), *sp = strchr(line, ' ');
        if (dash && sp && dash < sp && sscanf(line, "%lx-%lx ", &a, &b) == 2) {
            in = a < hi && b > lo;
            continue;
        }
        if (!in) continue;
        for (unsigned i = 0; i < sizeof fields / sizeof *fields; i++)
            if (!strncmp(line, fields[i], strlen(fields[i])))
                kb += strtoul(line + strlen(fields[i]), NULL, 10);
    }
    fclose(f);
    *bytes = kb * 1024;
    OS_RET(0);
}

/* ---- read-only inspection (inspect.c) ------------------------------------ */

int dp_os_map_fd_ro(void *addr, size_t len, int fd) {
    OS_SAVE;
    void *p = mmap(addr, len, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    OS_RET(p == MAP_FAILED ? -errno : 0);
}

int dp_os_sysv_attach_ro(int shmid, void *addr) {
    OS_SAVE;
    void *p = shmat(shmid, addr, SHM_RDONLY | SHM_REMAP);
    OS_RET(p == (void *)-1 ? -errno : 0);
}

int dp_os_proc_open_ro(pid_t pid, const char *rel) {
    OS_SAVE;
    char path[128];
    if (snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, rel) >= (int)sizeof path) OS_RET(-ENAMETOOLONG);
    int fd;
    do /* a magic link (map_files, fd): a new description of the object, never the process's own */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        OS_RET(-EINVAL);
    }
    OS_RET(fd < 0 ? -errno : fd);
}

int dp_os_proc_maps_each(pid_t pid, bool (*fn)(const dp_os_vma *vma, void *arg), void *arg) {
    OS_SAVE;
    char path[64], line[4400];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) OS_RET(-errno);
    while (fgets(line, sizeof line, f)) {
        dp_os_vma v;
        memset(&v, 0, sizeof v);
        unsigned long long a, b, off, ino;
        char perms[8];
        int pos = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*x:%*x %llu %n", &a, &b, perms, &off, &ino, &pos) < 5) continue;
        v.start = a;
        v.end = b;
        v.offset = off;
        v.inode = ino;
        v.shared = perms[3] == 's';
        if (pos > 0 && (size_t)pos < strlen(line)) snprintf(v.path, sizeof v.path, "%s", line + pos);
        size_t l = strlen(v.path);
        if (l && v.path[l - 1] == '\n') v.path[l - 1] = 0;
        if (!fn(&v, arg)) break;
    }
    fclose(f);
    OS_RET(0);
}

int dp_os_proc_fds_each(pid_t pid, bool (*fn)(int fd, const char *target, void *arg), void *arg) {
    OS_SAVE;
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d) OS_RET(-errno);
    for (struct dirent *e; (e = readdir(d));) {
        char *end;
        long n = strtol(e->d_name, &end, 10);
        if (*end || n < 0 || n > 0x7fffffff) continue;
        char link[340], target[4200];
        snprintf(link, sizeof link, "%s/%s", dir, e->d_name);
        ssize_t k = readlink(link, target, sizeof target - 1);
        if (k < 0) continue;
        target[k] = 0;
        if (!fn((int)n, target, arg)) break;
    }
    closedir(d);
    OS_RET(0);
}

int dp_os_fd_inode(int fd, uint64_t *ino) {
    OS_SAVE;
    struct stat st;
    if (fstat(fd, &st) != 0) OS_RET(-errno);
    *ino = (uint64_t)st.st_ino;
    OS_RET(0);
}
