/*
 * pagetables -- what it costs P processes to attach a pool and touch all of
 * it, as thousands of database backends would.
 *
 * For each page configuration -- 4 KiB pages, THP on shmem, 2 MiB hugetlb,
 * and 2 MiB hugetlb with the mapping aligned to 1 GiB (Linux then shares
 * the page-table pages of shared hugetlb mappings between processes, the
 * PMD sharing of mm/hugetlb.c) -- the parent creates a memfd pool, keeps only
 * its file descriptor, and forks P children; each attaches through the fd
 * (its own mapping, as an unrelated process would get), reads one byte of
 * every 4 KiB, reports its VmPTE and minor faults, and stays alive until all
 * are done. Reported: the time until all have attached and touched, the sum
 * of VmPTE, the growth of PageTables in /proc/meminfo while all are alive
 * (and both per process), and the total minor faults. A table, CSV and a
 * PNG (gnuplot).
 *
 * Baselines (issue 27): PostgreSQL's main shared memory, a plain
 * MAP_SHARED | MAP_ANONYMOUS mapping (MAP_HUGETLB with huge_pages = on) of
 * the same size, made by the parent at the address the kernel picks (as the
 * postmaster does) and populated, then inherited by fork: "shm-4k",
 * "shm-2m", and "shm-2m-1g" (the same at a 1 GiB-aligned address, to tell
 * the alignment from the rest). Each child touches all of it
 * (MADV_POPULATE_WRITE).
 *
 * Release and refill (issue 27): "4k-refill", "2m-refill", "2m-1g-refill"
 * are the pools above made elastic (idle_release_ms set: a memfd hugetlb
 * pool is trimmed only then), made wholly resident (dsmpool_prefault_free)
 * before the children attach. Three rows each, one run, the same children:
 * "before trim" (all attached and touched); "after trim" (the parent
 * attaches, dsmpool_trim(pool, 0) gives back all the free data --
 * fallocate(PUNCH_HOLE) on the memfd, which unmaps it in every child --
 * and detaches; the children's VmPTE read from /proc/PID/status; seconds:
 * the trim's); "after trim+refill" (the parent attaches,
 * dsmpool_prefault_free(SIZE_MAX) makes it all resident again, detaches,
 * and every child touches all of it again; seconds: refill and re-touch).
 * Whether hugetlb PMD sharing survives the release shows in PageTables: a
 * shared page-table page counts once there, and once per process in VmPTE.
 *
 * Waiting, without polling (thousands of processes that poll every few ms
 * saturate the CPUs and the run never ends):
 *   1. Two pipes. Every child holds the write end of "done" and the read
 *      end of "go"; the parent closes its own write end of "done" once all
 *      are forked.
 *   2. A child attaches and touches, writes one byte to "done" ('y', or 'n'
 *      if it failed), closes "done" and blocks in read() on "go".
 *   3. The parent reads "done" until end of file: that comes when every
 *      child has reported or died (the kernel closes a dead child's end),
 *      so a child killed by the OOM killer cannot hang the run; the bytes
 *      say how many attached.
 *   4. The parent closes the write end of "go": every child's read()
 *      returns 0 at once; they detach and exit. A parent that dies releases
 *      them the same way, so no child outlives the run.
 *
 * Limits, said rather than hit: before a row, the page tables it would need
 * (P x size/512 with 4 KiB pages, P x size/256 Ki with 2 MiB ones, plus this
 * process's own tables per child) are compared with MemAvailable, and the
 * number of processes with kernel.pid_max, kernel.threads-max, the pids
 * cgroup and RLIMIT_NPROC (raised to unlimited where CAP_SYS_RESOURCE
 * allows, else to the hard limit); a row that cannot fit says "skipped" and why. A fork that fails
 * anyway ends the row with the error and those limits.
 *
 * Options: --procs 16,64 (default 64; up to 100000), --size MiB
 * (default 1024), --configs 4k,thp,2m,2m-1g,shm-4k,shm-2m,shm-2m-1g,
 * 4k-refill,2m-refill,2m-1g-refill (default: all), --out DIR
 * (bench/results).
 * THP needs /sys/kernel/mm/transparent_hugepage/shmem_enabled = advise (or
 * always); hugetlb needs reserved 2 MiB pages (tools/bench.sh does both).
 */
#include <dsmpool.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define MIB (1ull << 20)
#define GIB (1ull << 30)

typedef enum kind {
    POOL,   /* a dsmpool pool, attached through its fd */
    PLAIN,  /* PostgreSQL's main shared memory: mmap in the parent, inherited */
    REFILL, /* a pool, then trim and refill: three rows */
} kind;

typedef struct config {
    const char *id, *name;
    dsmpool_huge huge;
    size_t align;
    size_t map_page; /* the page the tables map: 4 KiB, or 2 MiB */
    bool shared_pt;  /* page-table pages shared between processes */
    kind kind;
} config;

static const config configs[] = {
    {"4k", "4 KiB pages", DSMPOOL_HUGE_OFF, 0, 4096, false, POOL},
    {"thp", "THP (shmem)", DSMPOOL_HUGE_TRANSPARENT, 0, 2 * MIB, false, POOL},
    /* "2m": 2 MiB-aligned, as every pool was mapped before region.c took 1 GiB for
     * hugetlb pools of 1 GiB or more (and a smaller one still is); "2m-1g": that default */
    {"2m", "2 MiB hugetlb", DSMPOOL_HUGE_ON, 2 * MIB, 2 * MIB, false, POOL},
    {"2m-1g", "2 MiB hugetlb 1 GiB-aligned", DSMPOOL_HUGE_ON, 1ull << 30, 2 * MIB, true, POOL},
    {"shm-4k", "plain shared 4 KiB", DSMPOOL_HUGE_OFF, 0, 4096, false, PLAIN},
    {"shm-2m", "plain shared 2 MiB hugetlb", DSMPOOL_HUGE_ON, 0, 2 * MIB, false, PLAIN},
    {"shm-2m-1g", "plain shared 2 MiB hugetlb 1 GiB-aligned", DSMPOOL_HUGE_ON, 1ull << 30, 2 * MIB, true, PLAIN},
    {"4k-refill", "4 KiB pages elastic", DSMPOOL_HUGE_OFF, 0, 4096, false, REFILL},
    {"2m-refill", "2 MiB hugetlb elastic", DSMPOOL_HUGE_ON, 2 * MIB, 2 * MIB, false, REFILL},
    {"2m-1g-refill", "2 MiB hugetlb 1 GiB-aligned elastic", DSMPOOL_HUGE_ON, 1ull << 30, 2 * MIB, true,
     REFILL},
};
/* The rows of a REFILL config */
static const char *const phases[] = {": before trim", ": after trim", ": after trim+refill"};
#define NPHASES 3
#define NCONFIGS (sizeof configs / sizeof *configs)

/* Counters the children add to; the waiting is done with pipes (rules 1-4). */
typedef struct counters {
    _Atomic long pte_kb, minflt;
    _Atomic long pte_kb2, minflt2; /* REFILL: the second touch */
} counters;

/* A "Field:   123 kB" line of a /proc file, in kB; -1 if missing. */
/* pids.max and pids.current of this process's cgroup (v2, or v1's pids). */
static void cgroup_pids(long *max, long *cur) {
    *max = *cur = -1;
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b) continue;
        char path[1200];
        if (!strncmp(a, "::", 2)) snprintf(path, sizeof path, "/sys/fs/cgroup%s", b + 1);
        else if (!strncmp(a + 1, "pids:", 5)) snprintf(path, sizeof path, "/sys/fs/cgroup/pids%s", b + 1);
        else continue;
        char m[1300], c[1300];
        snprintf(m, sizeof m, "%s/pids.max", path);
        snprintf(c, sizeof c, "%s/pids.current", path);
        long mv = file_num(m);
        if (mv < 0) continue;
        *max = mv;
        *cur = file_num(c);
        break;
    }
    if (f) fclose(f);
}

/* Threads in the system now: the 4th field of /proc/loadavg, "running/total". */
static long threads_now(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    long run = 0, total = -1;
    double a, b, c;
    if (f && fscanf(f, "%lf %lf %lf %ld/%ld", &a, &b, &c, &run, &total) != 5) total = -1;
    if (f) fclose(f);
    return total;
}

static void fmt_limit(char *buf, size_t n, long v) {
    if (v < 0) snprintf(buf, n, "unknown");
    else if (v == __LONG_MAX__ || (rlim_t)v == RLIM_INFINITY) snprintf(buf, n, "unlimited");
    else snprintf(buf, n, "%ld", v);
}

/* The process limits, for a message. */
static void limits_text(char *buf, size_t n) {
    struct rlimit rl;
    getrlimit(RLIMIT_NPROC, &rl);
    long cmax, ccur;
    cgroup_pids(&cmax, &ccur);
    char a[32], b[32], c[32], d[32];
    fmt_limit(a, sizeof a, rl.rlim_cur == RLIM_INFINITY ? __LONG_MAX__ : (long)rl.rlim_cur);
    fmt_limit(b, sizeof b, file_num("/proc/sys/kernel/pid_max"));
    fmt_limit(c, sizeof c, file_num("/proc/sys/kernel/threads-max"));
    fmt_limit(d, sizeof d, cmax);
    snprintf(buf, n, "ulimit -u %s, kernel.pid_max %s, kernel.threads-max %s, cgroup pids.max %s "
             "(%ld in use), %ld threads running", a, b, c, d, ccur, threads_now());
}

/* RLIMIT_NPROC up to what we may: unlimited as root, else the hard limit. */
static void raise_nproc(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NPROC, &rl) != 0) return;
    struct rlimit want = {RLIM_INFINITY, RLIM_INFINITY};
    if (setrlimit(RLIMIT_NPROC, &want) == 0) return;
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NPROC, &rl);
}

/* Can this machine hold procs more processes? 0, or a reason in why. */
static int room_for_procs(int procs, char *why, size_t n) {
    long pid_max = file_num("/proc/sys/kernel/pid_max"), tmax = file_num("/proc/sys/kernel/threads-max");
    long now = threads_now(), cmax, ccur;
    cgroup_pids(&cmax, &ccur);
    struct rlimit rl;
    getrlimit(RLIMIT_NPROC, &rl);
    const char *what = NULL;
    long lim = 0, used = 0;
    if (pid_max > 0 && now >= 0 && procs + now + 64 > pid_max) what = "kernel.pid_max", lim = pid_max, used = now;
    else if (tmax > 0 && now >= 0 && procs + now + 64 > tmax) what = "kernel.threads-max", lim = tmax, used = now;
    else if (cmax > 0 && ccur >= 0 && procs + ccur + 1 > cmax) what = "the cgroup's pids.max", lim = cmax, used = ccur;
    else if (rl.rlim_cur != RLIM_INFINITY && geteuid() != 0 && (rlim_t)procs + 1 > rl.rlim_cur)
        what = "ulimit -u (RLIMIT_NPROC)", lim = (long)rl.rlim_cur, used = 0;
    if (!what) return 0;
    char l[600];
    limits_text(l, sizeof l);
    snprintf(why, n, "%d processes do not fit under %s = %ld (%ld in use): raise it (%s)", procs, what, lim,
             used, l);
    return -1;
}

/* Will the page tables of procs processes mapping size bytes fit? The
 * estimate: the pool's tables (size/512 per process with 4 KiB pages,
 * size/256Ki with 2 MiB ones, none when they are shared) plus the parent's
 * own, which every child copies. */
static int room_for_tables(const config *c, int procs, size_t size, char *why, size_t n) {
    double per = c->shared_pt ? 0 : (double)size / (double)c->map_page * 8;
    long self = proc_kb("/proc/self/status", "VmPTE");
    per += (double)(self > 0 ? self : 64) * 1024;
    double need = per * procs;
    long avail_kb = proc_kb("/proc/meminfo", "MemAvailable");
    if (avail_kb < 0) return 0;
    double avail = (double)avail_kb * 1024;
    if (c->huge != DSMPOOL_HUGE_ON) avail -= (double)size; /* the pool itself, unless in reserved pages */
    avail -= (double)GIB;                                 /* for everything else */
    if (need <= avail) return 0;
    snprintf(why, n, "needs %.1f GiB of page tables (%d x %.0f KiB), machine has %.1f GiB (MemAvailable "
             "%.1f GiB, less the pool and 1 GiB)", need / GIB, procs, per / 1024, avail > 0 ? avail / GIB : 0,
             (double)avail_kb / (1 << 20));
    return -1;
}

/* Map every page of [addr, addr + len) into this process's page tables, as
 * a backend that touches all of it would (MADV_POPULATE_WRITE, or a write
 * of every 4 KiB where the kernel has none). */
static int touch_all(char *addr, size_t len) {
    if (madvise(addr, len, MADV_POPULATE_WRITE) == 0) return 0;
    if (errno != EINVAL) return -1;
    for (size_t o = 0; o < len; o += 4096) __atomic_fetch_or(addr + o, 0, __ATOMIC_RELAXED);
    return 0;
}

/* One child. A pool (fd >= 0) is attached through its fd -- this process's
 * own mapping -- and prefaulted (dsmpool_prefault: what a backend does to
 * keep faults off its hot path); a plain mapping (plain != NULL) is the
 * parent's, inherited, and touched. With done2_w >= 0 (REFILL) it waits for
 * a byte on go2 and touches again, reporting on done2. */
static void child(int fd, char *plain, size_t len, counters *sy, int done_w, int go_r, int done2_w,
                  int go2_r) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long f0 = ru.ru_minflt;
    dsmpool *p = NULL;
    char ok = 'n';
    if (plain) ok = touch_all(plain, len) == 0 ? 'y' : 'n';
    else if (dsmpool_attach_fd(fd, &p) == 0) ok = dsmpool_prefault(p) == 0 ? 'y' : 'n';
    getrusage(RUSAGE_SELF, &ru);
    atomic_fetch_add(&sy->minflt, ru.ru_minflt - f0);
    atomic_fetch_add(&sy->pte_kb, proc_kb("/proc/self/status", "VmPTE"));
    while (write(done_w, &ok, 1) < 0 && errno == EINTR) {}
    close(done_w); /* rule 2: the parent's end of file counts us */
    char c;
    if (done2_w >= 0) { /* REFILL: one byte each on go2, then the same again */
        ssize_t k;
        while ((k = read(go2_r, &c, 1)) < 0 && errno == EINTR) {}
        if (k == 1) {
            getrusage(RUSAGE_SELF, &ru);
            f0 = ru.ru_minflt;
            char ok2 = ok == 'y' && dsmpool_prefault(p) == 0 ? 'y' : 'n';
            getrusage(RUSAGE_SELF, &ru);
            atomic_fetch_add(&sy->minflt2, ru.ru_minflt - f0);
            atomic_fetch_add(&sy->pte_kb2, proc_kb("/proc/self/status", "VmPTE"));
            while (write(done2_w, &ok2, 1) < 0 && errno == EINTR) {}
        }
        close(done2_w);
    }
    while (read(go_r, &c, 1) < 0 && errno == EINTR) {} /* rule 4: blocks until the parent closes */
    if (p) dsmpool_detach(p);
    _exit(ok == 'y' ? 0 : 1);
}

typedef struct result {
    const config *c;
    const char *phase; /* "" or one of phases[] */
    int procs;
    double seconds;
    long pte_kb, pagetables_kb, minflt;
    char skip[1000];
} result;

/* Read "done" until end of file (rule 3): how many said 'y', in *ok; the
 * number of bytes read is returned. */
static int collect(int done_r, int *ok) {
    int reported = 0;
    char buf[4096];
    *ok = 0;
    for (ssize_t k; (k = read(done_r, buf, sizeof buf)) != 0;) {
        if (k < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (ssize_t j = 0; j < k; j++) *ok += buf[j] == 'y';
        reported += (int)k;
    }
    return reported;
}

/* The children's VmPTE, summed, read by the parent. */
static long children_pte_kb(const pid_t *pids, int n) {
    long sum = 0;
    for (int i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/status", (int)pids[i]);
        long v = proc_kb(path, "VmPTE");
        if (v > 0) sum += v;
    }
    return sum;
}

/* A plain shared mapping as PostgreSQL's postmaster makes its main shared
 * memory (sysv_shmem.c, CreateAnonymousSegment): mmap(NULL, size,
 * MAP_SHARED | MAP_ANONYMOUS [| MAP_HUGETLB]); at an address aligned to
 * align when align != 0 (the control). NULL with errno on failure. */
static char *plain_map(const config *c, size_t size) {
    int fl = MAP_SHARED | MAP_ANONYMOUS | (c->huge == DSMPOOL_HUGE_ON ? MAP_HUGETLB : 0);
    if (!c->align) {
        char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, fl, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    char *r = mmap(NULL, size + c->align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) return NULL;
    char *a = (char *)(((uintptr_t)r + c->align - 1) & ~(uintptr_t)(c->align - 1));
    if (a > r) munmap(r, (size_t)(a - r));
    if (r + size + c->align > a + size) munmap(a + size, (size_t)(r + size + c->align - (a + size)));
    char *p = mmap(a, size, PROT_READ | PROT_WRITE, fl | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        munmap(a, size);
        errno = e;
        return NULL;
    }
    return p;
}

/* REFILL: attach, call what (trim or refill), detach; -1 with r->skip said. */
static int parent_step(int fd, bool trim, double *secs, size_t *bytes, result *r) {
    dsmpool *pool;
    if (dsmpool_attach_fd(fd, &pool) != 0) {
        snprintf(r->skip, sizeof r->skip, "parent attach: %s", dsmpool_last_error());
        return -1;
    }
    double t0 = now_s();
    int e = trim ? dsmpool_trim(pool, 0, bytes) : dsmpool_prefault_free(pool, SIZE_MAX, bytes);
    *secs = now_s() - t0;
    if (e != 0) snprintf(r->skip, sizeof r->skip, "%s: %s", trim ? "dsmpool_trim" : "dsmpool_prefault_free",
                         dsmpool_last_error());
    dsmpool_detach(pool);
    return e ? -1 : 0;
}

/* One config at procs processes: 1 result, NPHASES for REFILL; returns how
 * many were filled (a skip said in the first that failed). */
static int run(const config *c, int procs, size_t size, result *rs) {
    int nres = c->kind == REFILL ? NPHASES : 1;
    memset(rs, 0, sizeof *rs * (size_t)nres);
    for (int i = 0; i < nres; i++) {
        rs[i].c = c;
        rs[i].procs = procs;
        rs[i].phase = c->kind == REFILL ? phases[i] : "";
    }
    result *r = &rs[0];
    if (room_for_tables(c, procs, size, r->skip, sizeof r->skip) != 0) return 1;
    if (room_for_procs(procs, r->skip, sizeof r->skip) != 0) return 1;
    int fd = -1;
    char *plain = NULL;
    if (c->kind == PLAIN) {
        if (!(plain = plain_map(c, size))) {
            snprintf(r->skip, sizeof r->skip, "mmap of %zu MiB%s failed: %s%s", size >> 20,
                     c->huge == DSMPOOL_HUGE_ON ? " (MAP_HUGETLB)" : "", strerror(errno),
                     c->huge == DSMPOOL_HUGE_ON ? ": reserve 2 MiB pages (vm.nr_hugepages)" : "");
            return 1;
        }
        if (touch_all(plain, size) != 0) { /* the postmaster's: the memory is had before the fork */
            snprintf(r->skip, sizeof r->skip, "populating the plain mapping failed: %s", strerror(errno));
            munmap(plain, size);
            return 1;
        }
        printf("# %s: mapped at %p, %s 1 GiB-aligned\n", c->name, (void *)plain,
               (uintptr_t)plain % GIB ? "not" : "");
    } else {
        dsmpool_config cfg;
        dsmpool_config_init(&cfg);
        cfg.size = size;
        cfg.backing = DSMPOOL_BACKING_MEMFD;
        cfg.huge_pages = c->huge;
        cfg.map_align = c->align;
        cfg.max_procs = (unsigned)procs + 16;
        /* REFILL: elastic (a memfd hugetlb pool is trimmed only then), never
         * released by a policy: only the explicit calls below release */
        if (c->kind == REFILL) cfg.idle_release_ms = 1000u * 3600u;
        dsmpool *pool;
        if (dsmpool_create(&cfg, &pool) != 0) {
            snprintf(r->skip, sizeof r->skip, "%s", dsmpool_last_error());
            return 1;
        }
        dsmpool_stats st;
        dsmpool_get_stats(pool, &st);
        if (c->huge == DSMPOOL_HUGE_TRANSPARENT && st.huge_mapped_bytes < st.region_size / 2) {
            snprintf(r->skip, sizeof r->skip, "the kernel gave no THP for shmem (set "
                     "/sys/kernel/mm/transparent_hugepage/shmem_enabled to advise)");
            dsmpool_destroy(pool);
            return 1;
        }
        size_t got = 0;
        if (c->kind == REFILL && dsmpool_prefault_free(pool, SIZE_MAX, &got) != 0) {
            snprintf(r->skip, sizeof r->skip, "dsmpool_prefault_free: %s", dsmpool_last_error());
            dsmpool_destroy(pool);
            return 1;
        }
        fd = dup(dsmpool_fd(pool));
        dsmpool_detach(pool); /* the parent keeps the fd only: no mapping to inherit */
    }
    counters *sy = mmap(NULL, sizeof *sy, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int done[2], go[2], done2[2] = {-1, -1}, go2[2] = {-1, -1};
    if (sy == MAP_FAILED || pipe(done) != 0 || pipe(go) != 0 ||
        (c->kind == REFILL && (pipe(done2) != 0 || pipe(go2) != 0))) {
        snprintf(r->skip, sizeof r->skip, "mmap or pipe failed: %s", strerror(errno));
        dsmpool *pool;
        if (fd >= 0 && dsmpool_attach_fd(fd, &pool) == 0) dsmpool_destroy(pool);
        if (fd >= 0) close(fd);
        if (plain) munmap(plain, size);
        return 1;
    }
    long pt0 = proc_kb("/proc/meminfo", "PageTables");
    double t0 = now_s();
    pid_t *pids = calloc((size_t)procs, sizeof *pids);
    int started = 0;
    for (int i = 0; i < procs; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            close(done[0]);
            close(go[1]);
            if (done2[0] >= 0) close(done2[0]);
            if (go2[1] >= 0) close(go2[1]);
            child(fd, plain, size, sy, done[1], go[0], done2[1], go2[0]);
        }
        if (pid < 0) {
            int e = errno;
            char l[600];
            limits_text(l, sizeof l);
            snprintf(r->skip, sizeof r->skip, "fork failed after %d of %d processes: %s; limits: %s; raise the one "
                     "that was reached (an ancestor cgroup's pids.max counts too)", i, procs,
                     strerror(e), l);
            break;
        }
        pids[started++] = pid;
    }
    close(done[1]); /* rule 1: end of file once every child has reported or died */
    if (done2[1] >= 0) close(done2[1]);
    int ok, reported = collect(done[0], &ok);
    r->seconds = now_s() - t0;
    r->pagetables_kb = proc_kb("/proc/meminfo", "PageTables") - pt0;
    r->pte_kb = atomic_load(&sy->pte_kb);
    r->minflt = atomic_load(&sy->minflt);
    if (!r->skip[0] && reported < started)
        snprintf(r->skip, sizeof r->skip, "%d of %d children died before reporting (OOM killer? see dmesg)",
                 started - reported, started);
    else if (!r->skip[0] && ok < started)
        snprintf(r->skip, sizeof r->skip, "%d of %d children could not attach or prefault", started - ok, started);
    int filled = 1;
    if (c->kind == REFILL && !r->skip[0]) {
        /* after trim: the parent's own mapping gone again (detached) before
         * PageTables is read, so the delta is the children's */
        result *a = &rs[1], *b = &rs[2];
        size_t rel = 0, got = 0;
        filled = 2;
        if (parent_step(fd, true, &a->seconds, &rel, a) == 0) {
            a->pagetables_kb = proc_kb("/proc/meminfo", "PageTables") - pt0;
            a->pte_kb = children_pte_kb(pids, started);
            printf("# %s P=%d: trim released %.1f MiB in %.1f ms\n", c->name, procs, (double)rel / MIB,
                   a->seconds * 1e3);
            double trefill = 0;
            filled = 3;
            if (parent_step(fd, false, &trefill, &got, b) == 0) {
                double t1 = now_s();
                for (int i = 0; i < started; i++) /* rule 2 again: one byte each on go2 */
                    while (write(go2[1], "r", 1) < 0 && errno == EINTR) {}
                int ok2, rep2 = collect(done2[0], &ok2);
                b->seconds = trefill + (now_s() - t1);
                b->pagetables_kb = proc_kb("/proc/meminfo", "PageTables") - pt0;
                b->pte_kb = atomic_load(&sy->pte_kb2);
                b->minflt = atomic_load(&sy->minflt2);
                printf("# %s P=%d: refill made %.1f MiB resident in %.1f ms\n", c->name, procs, (double)got / MIB,
                       trefill * 1e3);
                if (rep2 < started || ok2 < started)
                    snprintf(b->skip, sizeof b->skip, "%d of %d children could not touch again",
                             started - (rep2 < ok2 ? rep2 : ok2), started);
            }
        }
    }
    if (go2[1] >= 0) close(go2[1]); /* a child still waiting on go2 reads end of file */
    close(go[1]); /* rule 4: every child's read() returns */
    for (int i = 0; i < started; i++)
        while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR) {}
    close(done[0]);
    close(go[0]);
    if (done2[0] >= 0) close(done2[0]);
    if (go2[0] >= 0) close(go2[0]);
    free(pids);
    munmap(sy, sizeof *sy);
    dsmpool *pool;
    if (fd >= 0 && dsmpool_attach_fd(fd, &pool) == 0) dsmpool_destroy(pool);
    if (fd >= 0) close(fd);
    if (plain) munmap(plain, size);
    return filled;
}

int main(int argc, char **argv) {
    int plist[32], np = 0;
    size_t size_mib = 1024;
    const char *clist = NULL, *out = "bench/results";
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc;
        if (!strcmp(argv[i], "--procs") && more) {
            const char *s = argv[++i];
            while (*s && np < 32) {
                plist[np++] = atoi(s);
                while (*s && *s != ',') s++;
                if (*s) s++;
            }
        } else if (!strcmp(argv[i], "--size") && more) size_mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--configs") && more) clist = argv[++i];
        else if (!strcmp(argv[i], "--out") && more) out = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--procs 16,64] [--size MiB] [--configs 4k,thp,2m,2m-1g,shm-4k,shm-2m,shm-2m-1g,"
                    "4k-refill,2m-refill,2m-1g-refill] [--out DIR]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!np) plist[np++] = 64;
    for (int i = 0; i < np; i++)
        if (plist[i] < 1 || plist[i] > 100000) {
            fprintf(stderr, "pagetables: --procs between 1 and 100000\n");
            return 2;
        }
    size_t size = size_mib * MIB;
    raise_nproc();
    result *res = calloc(NCONFIGS * NPHASES * (size_t)np, sizeof *res);
    int n = 0;
    for (size_t c = 0; c < NCONFIGS; c++) {
        if (clist) {
            size_t l = strlen(configs[c].id);
            const char *p = clist;
            bool found = false;
            while ((p = strstr(p, configs[c].id))) {
                if ((p == clist || p[-1] == ',') && (p[l] == ',' || !p[l])) found = true;
                p += l;
            }
            if (!found) continue;
        }
        for (int i = 0; i < np; i++) {
            fprintf(stderr, isatty(2) ? "  %-30s P=%-5d\r" : "  %s P=%d\n", configs[c].name, plist[i]);
            n += run(&configs[c], plist[i], size, &res[n]);
        }
    }
    if (isatty(2)) fprintf(stderr, "%79s\r", "");
    printf("P processes attach a %zu MiB pool through its fd and map all of it (plain: inherit a mapping "
           "of that size)\n", size_mib);
    printf("%-54s %6s %9s %13s %13s %13s %12s\n", "pages", "P", "seconds", "sum VmPTE MiB",
           "VmPTE KiB/P", "PageTbl KiB/P", "minor faults");
    for (int i = 0; i < n; i++) {
        result *r = &res[i];
        char name[128];
        snprintf(name, sizeof name, "%s%s", r->c->name, r->phase);
        if (r->skip[0]) {
            printf("%-54s %6d  skipped: %s\n", name, r->procs, r->skip);
            continue;
        }
        printf("%-54s %6d %9.3f %13.1f %13.1f %13.1f %12ld\n", name, r->procs, r->seconds,
               (double)r->pte_kb / 1024, (double)r->pte_kb / r->procs, (double)r->pagetables_kb / r->procs,
               r->minflt);
    }
    mkdir(out, 0755);
    char path[4096];
    snprintf(path, sizeof path, "%s/pagetables.csv", out);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f, "pages,procs,size_mib,seconds,vmpte_kb,pagetables_kb,minflt,vmpte_kb_per_proc,"
               "pagetables_kb_per_proc\n");
    for (int i = 0; i < n; i++)
        if (!res[i].skip[0])
            fprintf(f, "%s%s,%d,%zu,%.4f,%ld,%ld,%ld,%.1f,%.1f\n", res[i].c->name, res[i].phase, res[i].procs,
                    size_mib, res[i].seconds, res[i].pte_kb, res[i].pagetables_kb, res[i].minflt,
                    (double)res[i].pte_kb / res[i].procs, (double)res[i].pagetables_kb / res[i].procs);
    fclose(f);
    printf("\nCSV: %s\n", path);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "gnuplot -e \"dir='%s'; size=%zu\" bench/plot-pagetables.gp 2>/dev/null", out,
             size_mib);
    if (access("bench/plot-pagetables.gp", R_OK) == 0 && system(cmd) == 0)
        printf("plot: %s/pagetables.png\n", out);
    else
        printf("plot: not drawn (needs gnuplot and bench/plot-pagetables.gp, run from the repository)\n");
    return 0;
}
