/*
 * hashjoin -- a parallel hash-join build and probe, as a PostgreSQL-style
 * executor runs it, over several memory backends: the project's main
 * benchmark.
 *
 * The query: select count(*) from t t1 join t t2 using (i), t = N rows of
 * (int32 key, int32 payload), unique keys by default (--dup D, --zipf S for
 * duplicates and skew). The count and the payload sum are checked against
 * the known answer on every run; a wrong answer fails the run.
 *
 * Build: T workers (threads, or forked processes: the PostgreSQL model) each take a
 * share of the inner relation. Worker 0 allocates the bucket array (a power
 * of two >= N of 64-bit relocatable pointers) from the backend, everybody
 * zeroes a slice, then copies its tuples into 32 KiB chunks from the backend
 * (bump inside a chunk, a new chunk when full) and pushes each onto its
 * bucket with a CAS -- as ExecParallelHashTableInsert does. Probe: each
 * worker walks the buckets for its share of the outer relation.
 *
 * Backends: dsmpool (4 KiB pages, THP, 2 MiB and 1 GiB hugetlb), pg-dsa (an
 * imitation of PostgreSQL's DSA over POSIX DSM, see pgdsa.c), pg-prealloc
 * (the same, carved from a preallocated region as min_dynamic_shared_memory
 * does; 4 KiB or 2 MiB pages), and, with threads only, jemalloc, glibc and
 * mimalloc. Two rows exist for attribution: pg-dsa-thp (pg-dsa unchanged,
 * its POSIX segments on a tmpfs mounted huge=always in a private mount
 * namespace: PostgreSQL with transparent huge pages and no code change;
 * root) and pg-prealloc+inl (pg-prealloc 2 MiB translating pointers inline
 * like dsmpool: what is left between it and dsmpool is allocation).
 *
 * Counted round: after the timed rounds, one untimed round per row counts
 * per 32 KiB chunk what the workers do on shared lines during the build --
 * lock acquisitions, contention, wait and hold time, RMWs (pgdsa.c counts
 * its own; dsmpool's are derived from the spans taken), the join's bucket
 * CAS failures, system calls (raw_syscalls tracepoint), faults -- and the
 * latency of every chunk allocation; then the serial fraction and the
 * Amdahl bound it implies, labelled as indicators.
 *
 * Defaults: 10M rows, T = 1, 2, 4 .. up to the CPUs (--oversub adds 4x and
 * 16x the CPUs), 3 rounds and one untimed counted round, workers as
 * threads and then as forked processes (--mode threads|procs|both).
 *
 * Idle-gap mode (--idle, tools/bench.sh --idle): memory that follows demand.
 * The query 1 + 2Q times at one worker count, first after short gaps (shorter
 * than idle_release_ms), then after long ones; rows: dsmpool fixed (today),
 * dsmpool elastic (resident_min, idle_release_ms, a maintainer thread in the
 * leader), dsmpool elastic with the leader refilling ahead of the build,
 * pg-dsa (gives everything back after each query), pg-dsa on a THP tmpfs,
 * pg-prealloc (holds everything). Per query the time, the faults and the
 * refills it paid; the shared memory resident in the system between queries
 * and over time (hashjoin-idle.csv, hashjoin-idle-mem.csv, hashjoin-idle.png).
 *
 * Output: progress on stderr; a table on stdout (medians of --rounds rounds),
 * speedup against pg-dsa at the same T and mode; CSV, a gnuplot data file
 * and a PNG plot in --out (bench/results). Exit status 1 on a wrong answer.
 */
#include <dsmpool.h>
#include <errno.h>
#include <fcntl.h>
#include <jemalloc/jemalloc.h>
#include <linux/perf_event.h>
#include <math.h>
#ifndef HJ_NO_MIMALLOC /* static builds: Debian ships no static libmimalloc */
#include <mimalloc.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "pgdsa.h"

static glibc_fns G; /* glibc's malloc (bench_util.h): not __libc_malloc, which mimalloc also exports */

#define CHUNK_SIZE (32u << 10)
#define CHUNK_HDR 16u /* like HashMemoryChunkData: next chunk + used */
#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define MAXT 256

/* ---- data ------------------------------------------------------------------ */

typedef struct row {
    int32_t key, payload;
} row;

typedef struct hj_tuple { /* HashJoinTupleData + a minimal tuple, roughly */
    uint64_t next;         /* relocatable pointer to the next tuple in the bucket */
    uint32_t hash;
    int32_t key, payload, pad;
} hj_tuple;

static row *rel;
static long N;
static uint64_t want_matches;
static int64_t want_sum;

static uint64_t rnd(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint32_t hash32(int32_t k) {
    return (uint32_t)(((uint64_t)(uint32_t)k * 0x9e3779b97f4a7c15ull) >> 32);
}

/* Zipf over 1..n by rejection-inversion (Hormann & Derflinger 1996). */
typedef struct zipf {
    double s, hx0, hn, q;
    long n;
} zipf;
static double zh(const zipf *z, double x) { return z->s == 1 ? log(x) : (pow(x, 1 - z->s) - 1) / (1 - z->s); }
static double zhinv(const zipf *z, double x) { return z->s == 1 ? exp(x) : pow(1 + x * (1 - z->s), 1 / (1 - z->s)); }
static long zipf_next(const zipf *z, uint64_t *seed) {
    for (;;) {
        double u = z->hn + (z->hx0 - z->hn) * ((double)(rnd(seed) >> 11) * 0x1p-53);
        double x = zhinv(z, u);
        long k = (long)(x + 0.5);
        if (k < 1) k = 1;
        if (k > z->n) k = z->n;
        if (k - x <= z->q || u >= zh(z, (double)k + 0.5) - pow((double)k, -z->s)) return k;
    }
}

static int cmp_row(const void *a, const void *b) {
    const row *x = a, *y = b;
    return x->key < y->key ? -1 : x->key > y->key;
}

static void make_data(long n, int dup, double zs, uint64_t seed) {
    rel = malloc(sizeof(row) * (size_t)n);
    if (!rel) {
        fprintf(stderr, "hashjoin: out of memory for %ld rows\n", n);
        exit(1);
    }
    if (zs > 0) {
        zipf z = {zs, 0, 0, 0, n};
        z.hx0 = zh(&z, 0.5) - 1;
        z.hn = zh(&z, (double)n + 0.5);
        z.q = 1 - zhinv(&z, zh(&z, 1.5) - pow(2, -zs));
        for (long i = 0; i < n; i++) rel[i].key = (int32_t)zipf_next(&z, &seed);
    } else {
        for (long i = 0; i < n; i++) rel[i].key = (int32_t)(i / (dup > 1 ? dup : 1) + 1);
        for (long i = n - 1; i > 0; i--) { /* shuffle: insertion order is random */
            long j = (long)(rnd(&seed) % (uint64_t)(i + 1));
            int32_t t = rel[i].key;
            rel[i].key = rel[j].key;
            rel[j].key = t;
        }
    }
    for (long i = 0; i < n; i++) rel[i].payload = (int32_t)(rnd(&seed) % 1000);
    /* The answer: sum over keys of count^2 matches, sum of count * payloads. */
    if (dup <= 1 && zs <= 0) {
        want_matches = (uint64_t)n;
        want_sum = 0;
        for (long i = 0; i < n; i++) want_sum += rel[i].payload;
        return;
    }
    row *c = malloc(sizeof(row) * (size_t)n);
    memcpy(c, rel, sizeof(row) * (size_t)n);
    qsort(c, (size_t)n, sizeof *c, cmp_row);
    want_matches = 0;
    want_sum = 0;
    for (long i = 0; i < n;) {
        long j = i;
        int64_t ps = 0;
        while (j < n && c[j].key == c[i].key) ps += c[j++].payload;
        want_matches += (uint64_t)(j - i) * (uint64_t)(j - i);
        want_sum += (j - i) * ps;
        i = j;
    }
    free(c);
}

/* ---- backends ---------------------------------------------------------------- */

enum { BK_DSMPOOL, BK_PGDSA, BK_PGPRE, BK_JEMALLOC, BK_GLIBC, BK_MIMALLOC };
/* variants: pg-dsa on a huge=always tmpfs; inline translation; an elastic
 * pool (--idle), and one whose leader also refills ahead of the build */
enum { V_NONE, V_THP_SHM, V_INLINE, V_ELASTIC, V_AHEAD };

typedef struct backend {
    const char *id;    /* selectable name */
    const char *name;  /* table name */
    const char *pages;
    int kind;
    dsmpool_huge huge;
    size_t huge_size;
    bool shared;       /* works with forked workers */
    int variant;
    bool idle_only;    /* a row of the idle-gap mode (--idle) only */
} backend;

static const backend backends[] = {
    {"dsmpool-4k", "dsmpool", "4 KiB", BK_DSMPOOL, DSMPOOL_HUGE_OFF, 0, true, V_NONE, false},
    {"dsmpool-thp", "dsmpool", "THP", BK_DSMPOOL, DSMPOOL_HUGE_TRANSPARENT, 0, true, V_NONE, false},
    {"dsmpool-2m", "dsmpool", "2 MiB", BK_DSMPOOL, DSMPOOL_HUGE_ON, 2 * MIB, true, V_NONE, false},
    {"dsmpool-1g", "dsmpool", "1 GiB", BK_DSMPOOL, DSMPOOL_HUGE_ON, GIB, true, V_NONE, false},
    {"pg-dsa", "pg-dsa", "4 KiB", BK_PGDSA, DSMPOOL_HUGE_OFF, 0, true, V_NONE, false},
    /* PostgreSQL with no code change on a tmpfs mounted huge=always */
    {"pg-dsa-thp", "pg-dsa", "THP tmpfs", BK_PGDSA, DSMPOOL_HUGE_TRANSPARENT, 0, true, V_THP_SHM, false},
    {"pg-prealloc-4k", "pg-prealloc", "4 KiB", BK_PGPRE, DSMPOOL_HUGE_OFF, 0, true, V_NONE, false},
    {"pg-prealloc-2m", "pg-prealloc", "2 MiB", BK_PGPRE, DSMPOOL_HUGE_ON, 2 * MIB, true, V_NONE, false},
    /* the same with dsmpool's kind of address translation: isolates translation */
    {"pg-prealloc-2m-inline", "pg-prealloc+inl", "2 MiB", BK_PGPRE, DSMPOOL_HUGE_ON, 2 * MIB, true, V_INLINE, false},
    /* the elastic pool (--idle): released after idle_release_ms, refilled on
     * demand; "+ahead": the leader also refills ahead of the build */
    {"dsmpool-2m-elastic", "dsmpool-el", "2 MiB", BK_DSMPOOL, DSMPOOL_HUGE_ON, 2 * MIB, true, V_ELASTIC, true},
    {"dsmpool-2m-ahead", "dsmpool-el+ahd", "2 MiB", BK_DSMPOOL, DSMPOOL_HUGE_ON, 2 * MIB, true, V_AHEAD, true},
    {"dsmpool-thp-elastic", "dsmpool-el", "THP", BK_DSMPOOL, DSMPOOL_HUGE_TRANSPARENT, 0, true, V_ELASTIC, true},
    {"dsmpool-thp-ahead", "dsmpool-el+ahd", "THP", BK_DSMPOOL, DSMPOOL_HUGE_TRANSPARENT, 0, true, V_AHEAD, true},
    {"dsmpool-4k-elastic", "dsmpool-el", "4 KiB", BK_DSMPOOL, DSMPOOL_HUGE_OFF, 0, true, V_ELASTIC, true},
    {"jemalloc", "jemalloc", "4 KiB", BK_JEMALLOC, DSMPOOL_HUGE_OFF, 0, false, V_NONE, false},
    {"glibc", "glibc", "4 KiB", BK_GLIBC, DSMPOOL_HUGE_OFF, 0, false, V_NONE, false},
    {"mimalloc", "mimalloc", "4 KiB", BK_MIMALLOC, DSMPOOL_HUGE_OFF, 0, false, V_NONE, false},
};
#define NBACKENDS (sizeof backends / sizeof *backends)

/* The idle-gap mode (--idle): the query again and again with gaps between,
 * and the elastic rows' pool settings. */
static struct {
    bool on;
    int queries;                /* per kind of gap */
    unsigned short_ms, long_ms; /* the gaps: shorter and longer than release_ms */
    unsigned release_ms;        /* cfg.idle_release_ms of the elastic rows */
    unsigned period_ms;         /* the maintainer thread's longest wait */
    size_t resident_min, warm;  /* cfg.resident_min, cfg.warm_bytes */
} I = {false, 8, 300, 3000, 1000, 200, 64 * MIB, 0};

static struct {
    const backend *b;
    dsmpool *pool;
    dsmpool_area *area;
    pgdsa_area *dsa;
    char pages[32]; /* what was really obtained */
    char *base;     /* dsmpool: the pool's base in this process */
    char *const *map; /* pg-prealloc+inl: this process's segment map */
} S;

/* ---- pg-dsa on THP: a private /dev/shm mounted huge=always ----------------------- */

static bool thp_ns; /* this process has its own mount namespace */

/* What PostgreSQL users get with no code change: its POSIX DSM segments on a
 * tmpfs mounted huge=always. Done in a mount namespace of this process only
 * (nothing outside it sees the mount; /sys settings untouched: a tmpfs's
 * huge= option applies unless shmem_enabled is "deny"). Needs root. */
static int thp_shm_mount(char *why, size_t n) {
    if (!thp_ns) {
        if (unshare(CLONE_NEWNS) != 0) {
            snprintf(why, n, "a private mount namespace needs root (unshare: %s)", strerror(errno));
            return -1;
        }
        thp_ns = true;
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
            snprintf(why, n, "mount --make-rprivate /: %s", strerror(errno));
            return -1;
        }
    }
    if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "huge=always,mode=1777") != 0) {
        snprintf(why, n, "mount tmpfs huge=always on /dev/shm: %s", strerror(errno));
        return -1;
    }
    /* did it give huge pages? a 4 MiB probe file, reserved with fallocate */
    long h0 = proc_kb("/proc/meminfo", "ShmemHugePages");
    int fd = shm_open("/hashjoin-thp-probe", O_RDWR | O_CREAT | O_EXCL, 0600);
    bool huge = false;
    if (fd >= 0) {
        if (ftruncate(fd, 4 * MIB) == 0 && posix_fallocate(fd, 0, 4 * MIB) == 0)
            huge = proc_kb("/proc/meminfo", "ShmemHugePages") - h0 >= 2048;
        close(fd);
        shm_unlink("/hashjoin-thp-probe");
    }
    if (!huge) snprintf(S.pages, sizeof S.pages, "THP tmpfs (denied)");
    return 0;
}

static void thp_shm_umount(void) { umount2("/dev/shm", MNT_DETACH); }

static size_t pool_bytes(void) {
    size_t nb = 1;
    while (nb < (size_t)N) nb <<= 1;
    size_t tuples = (size_t)N * sizeof(hj_tuple) / (CHUNK_SIZE - CHUNK_HDR) * CHUNK_SIZE;
    size_t need = 2 * (tuples + nb * 8) + 128 * MIB;
    return (need + 2 * MIB - 1) & ~(2 * MIB - 1);
}

/* The pool for a backend. With 1 GiB pages the data starts at the first
 * 1 GiB boundary after the tables (region.c: the data's granule is the huge
 * page), so the tables take a page of their own: one page more than the
 * data needs. */
static size_t be_pool_size(const backend *b) {
    size_t s = pool_bytes();
    if (b->huge_size == GIB) s = ((s + GIB - 1) & ~(GIB - 1)) + GIB;
    return s;
}

static int be_setup(const backend *b, char *why, size_t n) {
    memset(&S, 0, sizeof S);
    S.b = b;
    snprintf(S.pages, sizeof S.pages, "%s", b->pages);
    if (b->kind == BK_DSMPOOL) {
        dsmpool_config c;
        dsmpool_config_init(&c);
        c.size = be_pool_size(b);
        c.huge_pages = b->huge;
        c.huge_page_size = b->huge_size;
        if (b->variant == V_ELASTIC || b->variant == V_AHEAD) {
            c.resident_min = I.resident_min;
            c.idle_release_ms = I.release_ms;
            c.warm_bytes = I.warm;
        }
        if (dsmpool_create(&c, &S.pool) != 0) {
            snprintf(why, n, "%s", dsmpool_last_error());
            return -1;
        }
        /* the policy's steps: a thread of the leader, as a background worker in PostgreSQL */
        if ((b->variant == V_ELASTIC || b->variant == V_AHEAD) &&
            dsmpool_maintainer_start(S.pool, I.period_ms) != 0) {
            snprintf(why, n, "maintainer: %s", dsmpool_last_error());
            dsmpool_destroy(S.pool);
            S.pool = NULL;
            return -1;
        }
        if (b->huge == DSMPOOL_HUGE_TRANSPARENT && b->variant == V_NONE) { /* elastic: not resident yet */
            dsmpool_stats st;
            dsmpool_get_stats(S.pool, &st);
            if (st.huge_mapped_bytes < st.region_size / 2)
                snprintf(S.pages, sizeof S.pages, "THP (denied)");
        }
    } else if (b->variant == V_THP_SHM) {
        if (thp_shm_mount(why, n) != 0) return -1;
    } else if (b->kind == BK_MIMALLOC) {
#ifdef HJ_NO_MIMALLOC
        snprintf(why, n, "not in this build (static: no static libmimalloc)");
        return -1;
#endif
    } else if (b->kind == BK_PGPRE) {
        int r = pgdsa_region_create(pool_bytes(), b->huge == DSMPOOL_HUGE_ON, true);
        if (r) {
            snprintf(why, n, "preallocated region of %zu MiB in %s pages: %s", pool_bytes() >> 20,
                     b->pages, strerror(-r));
            return -1;
        }
    }
    return 0;
}

static void be_teardown(void) {
    if (S.pool) dsmpool_destroy(S.pool);
    if (S.b->kind == BK_PGPRE) pgdsa_region_destroy();
    if (S.b->variant == V_THP_SHM) thp_shm_umount();
}

static int be_round_begin(void) {
    switch (S.b->kind) {
    case BK_DSMPOOL: {
        int r = dsmpool_area_create(S.pool, 0, &S.area);
        S.base = dsmpool_area_base(S.area);
        return r;
    }
    case BK_PGDSA:
    case BK_PGPRE:
        if (!(S.dsa = pgdsa_create(S.b->kind == BK_PGPRE))) return -1;
        S.map = pgdsa_segment_map(S.dsa);
        return 0;
    default: return 0;
    }
}

static void be_round_end(void) {
    switch (S.b->kind) {
    case BK_DSMPOOL: dsmpool_area_destroy(S.area); break;
    case BK_PGDSA:
    case BK_PGPRE: pgdsa_destroy(S.dsa); break;
    default: break;
    }
}

static void be_worker_begin(bool forked) {
    if (forked && (S.b->kind == BK_PGDSA || S.b->kind == BK_PGPRE)) pgdsa_worker_begin(S.dsa);
}

static inline void *be_addr(uint64_t p) {
    switch (S.b->kind) {
    case BK_DSMPOOL: return dsmpool_area_addr_inline(S.area, S.base, p);
    case BK_PGDSA:
    case BK_PGPRE:
        if (S.b->variant == V_INLINE) return pgdsa_get_address_inline(S.dsa, S.map, p);
        return pgdsa_get_address(S.dsa, p); /* a function in PostgreSQL too */
    default: return (void *)(uintptr_t)p;
    }
}

/* chunk: a 32 KiB hash chunk (the hot path); else the bucket array */
static void *be_alloc(size_t size, bool chunk, uint64_t *rp) {
    void *m = NULL;
    switch (S.b->kind) {
    case BK_DSMPOOL: { /* the bucket array: interleaved over the nodes, as every node probes it */
        dsmpool_ptr p;
        if (dsmpool_area_alloc(S.area, size, chunk ? 0 : DSMPOOL_ALLOC_INTERLEAVE, &p) != 0) return NULL;
        *rp = p;
        return dsmpool_area_addr(S.area, p);
    }
    case BK_PGDSA:
    case BK_PGPRE: {
        pgdsa_pointer p = chunk ? pgdsa_allocate_chunk(S.dsa, size) : pgdsa_allocate(S.dsa, size);
        *rp = p;
        return p ? pgdsa_get_address(S.dsa, p) : NULL;
    }
    case BK_JEMALLOC: m = mallocx(size, 0); break;
    case BK_GLIBC: m = G.malloc(size); break;
#ifndef HJ_NO_MIMALLOC
    case BK_MIMALLOC: m = mi_malloc(size); break;
#endif
    }
    *rp = (uint64_t)(uintptr_t)m;
    return m;
}

static void be_free_private(void *m) { /* malloc peers: chunks and buckets after a round */
    switch (S.b->kind) {
    case BK_JEMALLOC: dallocx(m, 0); break;
    case BK_GLIBC: G.free(m); break;
#ifndef HJ_NO_MIMALLOC
    case BK_MIMALLOC: mi_free(m); break;
#endif
    default: break;
    }
}

/* ---- workers ---------------------------------------------------------------- */

/* What one worker did during the build, in a counted (untimed) round. */
typedef struct wstat {
    uint64_t chunks, tuples, join_cas_fail;
    pgdsa_counters pg;      /* pg-dsa / pg-prealloc: locks and RMWs */
    long long syscalls;     /* -1: not countable here */
    long faults;            /* minor + major */
    uint32_t *lat;          /* ns per chunk allocation, in the latency array */
    uint64_t nlat, maxlat;
} wstat;

typedef struct shared {
    pthread_barrier_t bar;
    bool counting;
    wstat ws[MAXT];
    _Atomic uint64_t buckets;  /* relocatable pointer to the bucket array */
    uint64_t nbuckets;
    _Atomic uint64_t matches;
    _Atomic int64_t sum;
    _Atomic long minflt;
    _Atomic int err;
} shared;

typedef struct wk {
    shared *sh;
    int id, nt;
    bool forked;
    void *chunks; /* malloc peers: list of chunks to free (first 8 bytes link) */
} wk;

/* System calls of the calling thread, counted by the raw_syscalls:sys_enter
 * tracepoint (needs root or perf_event_paranoid <= -1, and tracefs); -1 if
 * unavailable. Opened disabled; enabled around the counted steps. */
static int sc_open(void) {
    static _Atomic int cached = -2; /* workers race to fill it, with the same value */
    int id = atomic_load(&cached);
    if (id == -2) {
        FILE *f = fopen("/sys/kernel/tracing/events/raw_syscalls/sys_enter/id", "r");
        if (!f) f = fopen("/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id", "r");
        if (!f || fscanf(f, "%d", &id) != 1) id = -1;
        if (f) fclose(f);
        atomic_store(&cached, id);
    }
    if (id < 0) return -1;
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_TRACEPOINT;
    a.config = (uint64_t)id;
    a.disabled = 1;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

static inline uint64_t ns_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void worker(wk *w) {
    shared *sh = w->sh;
    be_worker_begin(w->forked);
    bool counting = sh->counting;
    wstat *ws = &sh->ws[w->id];
    int scfd = counting ? sc_open() : -1;
    struct rusage c0, c1;
    struct rusage r0, r1;
    pthread_barrier_wait(&sh->bar); /* start */
    getrusage(w->forked ? RUSAGE_SELF : RUSAGE_THREAD, &r0);
    uint64_t nb = sh->nbuckets, mask = nb - 1;
    if (w->id == 0) { /* PHJ_BUILD_ALLOCATE: one participant allocates the buckets */
        uint64_t rp = 0;
        void *m = be_alloc(nb * 8, false, &rp);
        if (!m) atomic_store(&sh->err, 1);
        atomic_store(&sh->buckets, rp);
    }
    pthread_barrier_wait(&sh->bar);
    _Atomic uint64_t *buckets = be_addr(atomic_load(&sh->buckets));
    if (!buckets) atomic_store(&sh->err, 1);
    uint64_t z0 = nb * (uint64_t)w->id / (uint64_t)w->nt, z1 = nb * (uint64_t)(w->id + 1) / (uint64_t)w->nt;
    if (buckets) memset((void *)(buckets + z0), 0, (z1 - z0) * 8);
    pthread_barrier_wait(&sh->bar);
    long lo = N * w->id / w->nt, hi = N * (w->id + 1) / w->nt;
    char *chunk = NULL;
    uint64_t chunk_rp = 0, tries = 0, nchunks = 0;
    size_t used = CHUNK_SIZE;
    if (counting) {
        if (S.b->kind == BK_PGDSA || S.b->kind == BK_PGPRE) pgdsa_count = &ws->pg;
        getrusage(w->forked ? RUSAGE_SELF : RUSAGE_THREAD, &c0);
        if (scfd >= 0) ioctl(scfd, PERF_EVENT_IOC_ENABLE, 0);
    }
    for (long i = lo; i < hi && buckets; i++) {
        if (used + sizeof(hj_tuple) > CHUNK_SIZE) { /* a new chunk */
            if (counting) { /* the allocation's latency, in the worker's slice */
                uint64_t t0 = ns_now();
                chunk = be_alloc(CHUNK_SIZE, true, &chunk_rp);
                uint64_t d = ns_now() - t0;
                if (ws->nlat < ws->maxlat) ws->lat[ws->nlat++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
            } else {
                chunk = be_alloc(CHUNK_SIZE, true, &chunk_rp);
            }
            nchunks++;
            if (!chunk) {
                atomic_store(&sh->err, 2);
                break;
            }
            if (!S.b->shared) { /* remember it to free it later */
                *(void **)chunk = w->chunks;
                w->chunks = chunk;
            }
            used = CHUNK_HDR;
        }
        hj_tuple *t = (hj_tuple *)(chunk + used);
        uint64_t tp = chunk_rp + used;
        used += sizeof(hj_tuple);
        uint32_t h = hash32(rel[i].key);
        t->hash = h;
        t->key = rel[i].key;
        t->payload = rel[i].payload;
        _Atomic uint64_t *bk = &buckets[h & mask];
        uint64_t old = atomic_load_explicit(bk, memory_order_relaxed);
        do
            t->next = old, tries++;
        /* release: the tuple's fields are visible to whoever follows the pointer */
        while (!atomic_compare_exchange_weak_explicit(bk, &old, tp, memory_order_release,
                                                      memory_order_relaxed));
    }
    if (counting) {
        if (scfd >= 0) {
            ioctl(scfd, PERF_EVENT_IOC_DISABLE, 0);
            long long v;
            /* less the disabling ioctl, which entered before it took effect */
            ws->syscalls = read(scfd, &v, sizeof v) == (ssize_t)sizeof v ? v - 1 : -1;
            close(scfd);
        } else {
            ws->syscalls = -1;
        }
        getrusage(w->forked ? RUSAGE_SELF : RUSAGE_THREAD, &c1);
        ws->faults = (c1.ru_minflt - c0.ru_minflt) + (c1.ru_majflt - c0.ru_majflt);
        pgdsa_count = NULL;
        ws->chunks = nchunks;
        ws->tuples = (uint64_t)(hi - lo);
        ws->join_cas_fail = tries - (uint64_t)(hi - lo);
    }
    pthread_barrier_wait(&sh->bar); /* built */
    uint64_t matches = 0;
    int64_t sum = 0;
    for (long i = lo; i < hi && buckets; i++) {
        uint32_t h = hash32(rel[i].key);
        uint64_t p = atomic_load_explicit(&buckets[h & mask], memory_order_relaxed); /* after the barrier */
        while (p) {
            const hj_tuple *t = be_addr(p);
            if (t->hash == h && t->key == rel[i].key) {
                matches++;
                sum += t->payload;
            }
            p = t->next;
        }
    }
    atomic_fetch_add(&sh->matches, matches);
    atomic_fetch_add(&sh->sum, sum);
    getrusage(w->forked ? RUSAGE_SELF : RUSAGE_THREAD, &r1);
    atomic_fetch_add(&sh->minflt, r1.ru_minflt - r0.ru_minflt);
    pthread_barrier_wait(&sh->bar); /* probed */
}

static void *thread_main(void *arg) {
    worker(arg);
    return NULL;
}

static int tlb_open(void) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_HW_CACHE;
    a.config = PERF_COUNT_HW_CACHE_DTLB | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
               (PERF_COUNT_HW_CACHE_RESULT_MISS << 16);
    a.inherit = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

/* A counted round's totals over the workers (per chunk when printed). */
typedef struct counts {
    bool done, sc_ok;
    double chunks, locks, contended, rmw, wait_ns, hold_ns, join_fail, syscalls, faults;
    double build;            /* the counted round's build time (slowed by counting) */
    double spans;            /* dsmpool: spans the area took */
    double p50, p99, p999;   /* ns per chunk allocation */
} counts;

typedef struct meas {
    double build, probe;
    long minflt;
    long long dtlb; /* -1: n/a */
    int err;        /* 0, or 1 wrong answer, 2 failure */
    counts c;
} meas;

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* V_AHEAD: from the query's start the leader makes what the query will need
 * (its tuples and buckets) and the warm free memory lacks resident again, in
 * a thread of its own, while the
 * workers build: a refill ahead of the build (as a PostgreSQL leader would,
 * knowing its hash table's estimated size). */
static struct {
    size_t bytes, done;
    double secs;
    int err;
} AH;

static void *ahead_main(void *arg) {
    (void)arg;
    double t0 = now_s();
    dsmpool_stats st; /* only what the warm free memory lacks: the rest would be released again, unused */
    size_t want = AH.bytes;
    if (dsmpool_get_stats(S.pool, &st) == 0) want = st.warm_free_bytes >= want ? 0 : want - st.warm_free_bytes;
    AH.err = want ? dsmpool_prefault_free(S.pool, want, &AH.done) : 0;
    AH.secs = now_s() - t0;
    return NULL;
}

static meas one_round(int nt, bool procs, bool counted) {
    meas m = {0, 0, 0, -1, 0, {0}};
    shared *sh = mmap(NULL, sizeof(shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    sh->counting = counted;
    uint32_t *lat = NULL;
    size_t latn = 0;
    if (counted) { /* every chunk allocation's latency: 4 bytes each, a slice per worker */
        const uint64_t tpc = (CHUNK_SIZE - CHUNK_HDR) / sizeof(hj_tuple);
        latn = (size_t)N / tpc + 2 * (size_t)nt + 2;
        lat = mmap(NULL, latn * 4, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (lat == MAP_FAILED) { /* no latencies then; the counts still come */
            lat = NULL;
            latn = 0;
        }
        size_t off = 0;
        for (int i = 0; i < nt && lat; i++) {
            long lo = N * i / nt, hi = N * (i + 1) / nt;
            sh->ws[i].lat = lat + off;
            sh->ws[i].maxlat = (uint64_t)(hi - lo) / tpc + 2;
            off += sh->ws[i].maxlat;
        }
    }
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->bar, &ba, (unsigned)nt + 1);
    sh->nbuckets = 1;
    while (sh->nbuckets < (uint64_t)N) sh->nbuckets <<= 1;
    if (be_round_begin() != 0) {
        m.err = 2;
        return m;
    }
    int tlb = tlb_open();
    wk w[MAXT];
    pthread_t tid[MAXT];
    pid_t pid[MAXT];
    for (int i = 0; i < nt; i++) {
        w[i] = (wk){sh, i, nt, procs, NULL};
        if (procs) {
            fflush(NULL);
            if ((pid[i] = fork()) == 0) {
                worker(&w[i]);
                _exit(0);
            }
        } else {
            pthread_create(&tid[i], NULL, thread_main, &w[i]);
        }
    }
    /* started after the forks: no worker is forked while it holds a block */
    pthread_t aht;
    bool ahead = S.b->variant == V_AHEAD;
    if (ahead) {
        AH.bytes = (pool_bytes() - 128 * MIB) / 2;
        AH.done = 0;
        AH.secs = 0;
        ahead = pthread_create(&aht, NULL, ahead_main, NULL) == 0;
    }
    pthread_barrier_wait(&sh->bar);
    double t0 = now_s();
    pthread_barrier_wait(&sh->bar); /* allocated */
    pthread_barrier_wait(&sh->bar); /* zeroed */
    pthread_barrier_wait(&sh->bar); /* built */
    double t1 = now_s();
    if (counted && S.b->kind == BK_DSMPOOL) { /* spans taken: the refills that took a fresh span */
        dsmpool_area_stats as;
        if (dsmpool_area_get_stats(S.area, &as) == 0) m.c.spans = (double)as.spans;
    }
    pthread_barrier_wait(&sh->bar); /* probed */
    double t2 = now_s();
    if (ahead) pthread_join(aht, NULL);
    for (int i = 0; i < nt; i++) {
        if (procs) {
            int st;
            waitpid(pid[i], &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st)) m.err = 2;
        } else {
            pthread_join(tid[i], NULL);
        }
    }
    if (tlb >= 0) {
        long long v;
        if (read(tlb, &v, sizeof v) == (ssize_t)sizeof v) m.dtlb = v;
        close(tlb);
    }
    m.build = t1 - t0;
    m.probe = t2 - t1;
    if (counted) {
        counts *c = &m.c;
        c->done = true;
        c->sc_ok = true;
        c->build = m.build;
        size_t nl = 0;
        for (int i = 0; i < nt; i++) {
            wstat *ws = &sh->ws[i];
            c->chunks += (double)ws->chunks;
            c->locks += (double)ws->pg.locks;
            c->contended += (double)ws->pg.contended;
            c->rmw += (double)ws->pg.rmw;
            c->wait_ns += (double)ws->pg.wait_ns;
            c->hold_ns += (double)ws->pg.hold_ns;
            c->join_fail += (double)ws->join_cas_fail;
            c->faults += (double)ws->faults;
            if (ws->syscalls < 0) c->sc_ok = false;
            else c->syscalls += (double)ws->syscalls;
            if (lat) memmove(lat + nl, ws->lat, ws->nlat * 4); /* compact the slices */
            nl += ws->nlat;
        }
        if (nl) {
            qsort(lat, nl, 4, cmp_u32);
            c->p50 = lat[nl / 2];
            c->p99 = lat[(size_t)((double)nl * 0.99)];
            c->p999 = lat[(size_t)((double)nl * 0.999)];
        }
        if (lat) munmap(lat, latn * 4);
    }
    m.minflt = atomic_load(&sh->minflt);
    if (atomic_load(&sh->err)) m.err = 2;
    else if (atomic_load(&sh->matches) != want_matches || atomic_load(&sh->sum) != want_sum) m.err = 1;
    if (!S.b->shared) {
        for (int i = 0; i < nt; i++)
            for (void *c = w[i].chunks, *next; c; c = next) {
                next = *(void **)c;
                be_free_private(c);
            }
        be_free_private((void *)(uintptr_t)atomic_load(&sh->buckets));
    }
    be_round_end();
    pthread_barrier_destroy(&sh->bar);
    munmap(sh, sizeof *sh);
    return m;
}

/* ---- driver ------------------------------------------------------------------ */

typedef struct result {
    const backend *b;
    char pages[32];
    bool procs;
    int t;
    double build, probe, total;
    long minflt;
    long long dtlb;
    int err;
    char skip[300];
    counts c;
} result;

static void usage(const char *p) {
    fprintf(stderr,
            "usage: %s [--rows N] [--threads 1,2,4] [--rounds R] [--mode threads|procs|both]\n"
            "          [--backends a,b,...] [--dup D] [--zipf S] [--seed S] [--out DIR]\n"
            "          [--oversub] [--no-count] [--hugepages-needed] [--gib-pages-needed]\n"
            "--oversub: add T = 4x and 16x the CPUs (oversubscription) to the list\n"
            "--no-count: no counted round (by default one untimed round per row counts\n"
            "            locks, RMWs, system calls, faults and allocation latency)\n"
            "--idle [--queries Q] [--gaps SHORT_MS,LONG_MS] [--release-ms MS] [--resident-min-mib M]\n"
            "       [--warm-mib W]: the idle-gap mode: the query 1 + 2Q times with gaps (8; 300,3000 ms),\n"
            "       at one worker count (2), processes unless --mode threads; the elastic rows'\n"
            "       idle_release_ms (1000), resident_min (64 MiB) and warm_bytes (0)\n"
            "--pair A,B [--queries Q] [--gaps SHORT_MS,...]: the warm target, paired: the query on A then\n"
            "       on B, Q times, a short gap after each pair (B's idle_release_ms raised to stay warm)\n"
            "backends:", p);
    for (size_t i = 0; i < NBACKENDS; i++) fprintf(stderr, " %s", backends[i].id);
    fprintf(stderr, "\n");
    exit(2);
}

static bool listed(const char *list, const char *id) {
    if (!list) return true;
    size_t n = strlen(id);
    for (const char *p = list; (p = strstr(p, id)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return true;
    return false;
}

static const char *fmt_count(long long v, char *buf, size_t n) {
    if (v < 0) snprintf(buf, n, "n/a");
    else if (v >= 10000000) snprintf(buf, n, "%.1fM", (double)v / 1e6);
    else if (v >= 10000) snprintf(buf, n, "%.1fk", (double)v / 1e3);
    else snprintf(buf, n, "%lld", v);
    return buf;
}

/* dsmpool's RMWs on shared words per fresh span, read off
 * pool/area/area_acquire.c (acquire_bracketed): the held-bytes reserve CAS, the entry's claim CAS,
 * the pool allocator's CAS for the 2 MiB block (at least one), the
 * publishing CAS. Chunks in between come from the thread's bump range with
 * no RMW (area_alloc.c [hot path]). A derivation, not a count: CAS failures unseen. */
#define DSMPOOL_RMW_PER_SPAN 4

static const result *find_row(const result *res, int nres, const result *r, int t) {
    for (int j = 0; j < nres; j++)
        if (res[j].b == r->b && res[j].procs == r->procs && res[j].t == t && !res[j].err && !res[j].skip[0])
            return &res[j];
    return NULL;
}

static double amdahl(double e, double t) { return 1 / (e + (1 - e) / t); }

/* Item: what every worker does on shared lines per 32 KiB chunk, the
 * allocation latency's tail, oversubscription, and the serial fraction. */
static void print_counts(const result *res, int nres, const char *out) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("\nper 32 KiB chunk, build phase, one more round (untimed, counted); latency of every chunk allocation\n");
    printf("%-15s %-12s %-7s %3s %6s %7s %7s %8s %8s %7s %7s %7s %7s %8s %8s %8s\n", "backend", "pages", "workers",
           "T", "vsTcpu", "locks", "contend", "wait us", "hold us", "RMW", "joinCAS", "syscall", "faults", "p50 us",
           "p99 us", "p99.9 us");
    char path[4096];
    snprintf(path, sizeof path, "%s/hashjoin-counts.csv", out);
    mkdir(out, 0755);
    FILE *f = fopen(path, "w");
    if (f)
        fprintf(f, "backend,pages,mode,workers,cpus,total_s,throughput_vs_tcpu,chunks,locks_per_chunk,contended_per_chunk,"
                   "wait_us_per_chunk,hold_us_per_chunk,rmw_per_chunk,rmw_derived,join_cas_fail_per_chunk,"
                   "syscalls_per_chunk,faults_per_chunk,p50_us,p99_us,p999_us\n");
    for (int i = 0; i < nres; i++) {
        const result *r = &res[i];
        if (r->skip[0] || r->err || !r->c.done || r->c.chunks <= 0) continue;
        const counts *c = &r->c;
        double n = c->chunks;
        const result *rc = find_row(res, nres, r, (int)ncpu);
        char vs[16] = "-", rmw[16] = "n/a", sc[16] = "n/a", lk[16] = "-", ct[16] = "-", wt[16] = "-", hd[16] = "-";
        if (rc && rc->total > 0) snprintf(vs, sizeof vs, "%.2f", rc->total / r->total);
        bool pg = r->b->kind == BK_PGDSA || r->b->kind == BK_PGPRE, derived = false;
        double rmwv = -1;
        if (pg) rmwv = c->rmw / n;
        else if (r->b->kind == BK_DSMPOOL) {
            rmwv = c->spans * DSMPOOL_RMW_PER_SPAN / n;
            derived = true;
        }
        if (rmwv >= 0) snprintf(rmw, sizeof rmw, "%s%.3f", derived ? "~" : "", rmwv);
        if (pg) {
            snprintf(lk, sizeof lk, "%.2f", c->locks / n);
            snprintf(ct, sizeof ct, "%.3f", c->contended / n);
            snprintf(wt, sizeof wt, "%.2f", c->wait_ns / n / 1e3);
            snprintf(hd, sizeof hd, "%.2f", c->hold_ns / n / 1e3);
        } else if (r->b->kind == BK_DSMPOOL) {
            snprintf(lk, sizeof lk, "0");
            snprintf(ct, sizeof ct, "0");
        }
        if (c->sc_ok) snprintf(sc, sizeof sc, "%.3f", c->syscalls / n);
        printf("%-15s %-12s %-7s %3d %6s %7s %7s %8s %8s %7s %7.2f %7s %7.2f %8.2f %8.2f %8.2f\n", r->b->name,
               r->pages, r->procs ? "procs" : "threads", r->t, vs, lk, ct, wt, hd, rmw, c->join_fail / n, sc,
               c->faults / n, c->p50 / 1e3, c->p99 / 1e3, c->p999 / 1e3);
        if (f)
            fprintf(f, "%s,%s,%s,%d,%ld,%.4f,%.3f,%.0f,%.4f,%.4f,%.3f,%.3f,%.4f,%d,%.3f,%.4f,%.3f,%.3f,%.3f,%.3f\n",
                    r->b->name, r->pages, r->procs ? "procs" : "threads", r->t, ncpu, r->total,
                    rc && rc->total > 0 ? rc->total / r->total : 0, n, pg ? c->locks / n : 0,
                    pg ? c->contended / n : 0, pg ? c->wait_ns / n / 1e3 : 0, pg ? c->hold_ns / n / 1e3 : 0, rmwv,
                    derived, c->join_fail / n, c->sc_ok ? c->syscalls / n : -1, c->faults / n, c->p50 / 1e3,
                    c->p99 / 1e3, c->p999 / 1e3);
    }
    if (f) fclose(f);
    printf("  vsTcpu: throughput against T = %ld (CPUs) of the same row; locks, contended, wait, hold: the\n"
           "  imitation's LWLocks, counted; RMW: atomic read-modify-writes on shared words by the allocator\n"
           "  (~: dsmpool's, derived as %d per fresh 2 MiB span from area.c, not counted; the hash join's own\n"
           "  bucket CAS, 1 per tuple (~1364 per chunk) for everybody, is left out, its failures are joinCAS);\n"
           "  syscall: every system call of the build loop (raw_syscalls tracepoint); faults: minor + major.\n",
           ncpu, DSMPOOL_RMW_PER_SPAN);
    /* the serial fraction, two ways, and the speedup it would allow */
    printf("\nserial fraction and the Amdahl bound it implies -- INDICATORS, not measurements: coherence traffic\n"
           "grows with cores and the bound ignores it (e: Karp-Flatt from build times at T=1 and T=Tmax <= CPUs,\n"
           "Tmax < 16 where a T=16 row was measured, so that bound16 can be held against meas16, the measured\n"
           "build speedup at T=16; e_lock: time holding the allocator's lock over build time, counted round at T=1)\n");
    bool have16 = false;
    for (int j = 0; j < nres; j++) have16 |= res[j].t == 16 && ncpu >= 16;
    printf("%-15s %-12s %-7s %4s %7s %7s %8s %8s %8s %8s %8s %8s %8s %8s\n", "backend", "pages", "workers", "Tmax",
           "speedup", "e", "bound16", "meas16", "bound64", "bound128", "e_lock", "lock16", "lock64", "lock128");
    for (int i = 0; i < nres; i++) {
        const result *r = &res[i];
        if (r->skip[0] || r->err || r->t != 1) continue;
        const result *top = NULL;
        for (int j = 0; j < nres; j++) {
            const result *q = &res[j];
            if (q->b == r->b && q->procs == r->procs && q->t > 1 && q->t <= ncpu && (!have16 || q->t < 16) &&
                !q->err && !q->skip[0] && (!top || q->t > top->t))
                top = q;
        }
        const result *r16 = have16 ? find_row(res, nres, r, 16) : NULL;
        char m16[16] = "-";
        if (r16 && r16->build > 0) snprintf(m16, sizeof m16, "%.1f", r->build / r16->build);
        char e1[16] = "-", b16[16] = "-", b64[16] = "-", b128[16] = "-", sp[16] = "-";
        char e2[16] = "-", l16[16] = "-", l64[16] = "-", l128[16] = "-";
        if (top) {
            double S1 = r->build / top->build, T = top->t;
            double e = (1 / S1 - 1 / T) / (1 - 1 / T);
            snprintf(sp, sizeof sp, "%.2f", S1);
            snprintf(e1, sizeof e1, "%.3f", e);
            if (e > 0 && e < 1) {
                snprintf(b16, sizeof b16, "%.1f", amdahl(e, 16));
                snprintf(b64, sizeof b64, "%.1f", amdahl(e, 64));
                snprintf(b128, sizeof b128, "%.1f", amdahl(e, 128));
            } else if (e <= 0) {
                snprintf(b16, sizeof b16, "16+");
                snprintf(b64, sizeof b64, "64+");
                snprintf(b128, sizeof b128, "128+");
            }
        }
        if (r->c.done && r->c.build > 0 && (r->b->kind == BK_PGDSA || r->b->kind == BK_PGPRE ||
                                            r->b->kind == BK_DSMPOOL)) {
            double e = r->c.hold_ns / 1e9 / r->c.build;
            snprintf(e2, sizeof e2, "%.4f", e);
            snprintf(l16, sizeof l16, "%.1f", amdahl(e, 16));
            snprintf(l64, sizeof l64, "%.1f", amdahl(e, 64));
            snprintf(l128, sizeof l128, "%.1f", amdahl(e, 128));
        }
        printf("%-15s %-12s %-7s %4d %7s %7s %8s %8s %8s %8s %8s %8s %8s %8s\n", r->b->name, r->pages,
               r->procs ? "procs" : "threads", top ? top->t : 1, sp, e1, b16, m16, b64, b128, e2, l16, l64, l128);
    }
}

/* ---- the idle-gap mode (--idle) ------------------------------------------------ */

/* Shared memory resident in the system, kB: shmem and tmpfs pages (4 KiB and
 * transparent huge ones) plus hugetlb pages in use. Read with read(2) into a
 * buffer on the stack: the sampler runs while the leader forks. */
static long shm_resident_kb(void) {
    char buf[8192];
    int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    long shmem = 0, total = 0, fre = 0, hsz = 2048;
    for (char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (!strncmp(l, "Shmem:", 6)) shmem = atol(l + 6);
        else if (!strncmp(l, "HugePages_Total:", 16)) total = atol(l + 16);
        else if (!strncmp(l, "HugePages_Free:", 15)) fre = atol(l + 15);
        else if (!strncmp(l, "Hugepagesize:", 13)) hsz = atol(l + 13);
    }
    return shmem + (total - fre) * hsz;
}

typedef struct isample {
    float t, mib, pool_mib; /* seconds since the row began; system; the pool's resident data */
    int q;                  /* the query running, or -1 */
} isample;

enum { GAP_FIRST, GAP_SHORT, GAP_LONG };
typedef struct iquery {
    int gap, q;
    double start, secs, build;
    long minflt;
    double held_mib, pool_mib;  /* resident just before the query: system, the pool's data */
    double demand_mib, demand_ms; /* refills on demand during the query (allocations paid) */
    double ahead_mib, ahead_ms;   /* refills ahead: the maintainer's and the leader's */
} iquery;

typedef struct irow {
    const backend *b;
    char pages[32], skip[300];
    int nq;
    iquery q[200];
    double warm, cold, warm_flt, cold_flt, held_short, held_long, peak, pool_long;
    int err;
} irow;

#define IMAXS 200000
static struct {
    isample *s;
    _Atomic size_t n;
    _Atomic int q;
    _Atomic bool stop;
    long base_kb;
    double t0;
} SM;

static double pool_resident_mib(void) {
    dsmpool_stats st;
    if (!S.pool || dsmpool_get_stats(S.pool, &st) != 0) return 0;
    return (double)st.resident_bytes / MIB;
}

static void *sampler_main(void *arg) {
    (void)arg;
    while (!atomic_load(&SM.stop)) {
        size_t i = atomic_load(&SM.n);
        if (i < IMAXS) {
            long kb = shm_resident_kb();
            SM.s[i] = (isample){(float)(now_s() - SM.t0), (float)(kb - SM.base_kb) / 1024.0f,
                                (float)pool_resident_mib(), atomic_load(&SM.q)};
            atomic_store(&SM.n, i + 1); /* one writer: the main thread reads only after the join */
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void sleep_ms(unsigned ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static double med_of(const irow *r, int gap, int what) {
    double v[200];
    int n = 0;
    for (int i = 0; i < r->nq; i++) {
        const iquery *q = &r->q[i];
        if (q->gap != gap) continue;
        v[n++] = what == 0 ? q->secs : what == 1 ? (double)q->minflt : what == 2 ? q->held_mib : q->pool_mib;
    }
    return n ? median(v, n) : 0;
}

static void idle_row(irow *r, int nt, bool procs, FILE *mem) {
    char why[300] = "";
    memset(&S, 0, sizeof S);
    SM.base_kb = shm_resident_kb();
    if (be_setup(r->b, why, sizeof why) != 0) {
        snprintf(r->skip, sizeof r->skip, "%s", why);
        return;
    }
    snprintf(r->pages, sizeof r->pages, "%s", S.pages);
    atomic_store(&SM.n, 0);
    atomic_store(&SM.q, -1);
    atomic_store(&SM.stop, false);
    SM.t0 = now_s();
    pthread_t st;
    bool sampling = pthread_create(&st, NULL, sampler_main, NULL) == 0;
    int total = 1 + 2 * I.queries;
    for (int k = 0; k < total && !r->err; k++) {
        iquery *q = &r->q[r->nq];
        q->gap = k == 0 ? GAP_FIRST : k <= I.queries ? GAP_SHORT : GAP_LONG;
        q->q = k;
        if (k) sleep_ms(q->gap == GAP_SHORT ? I.short_ms : I.long_ms);
        dsmpool_stats a, b;
        if (S.pool) dsmpool_get_stats(S.pool, &a);
        q->held_mib = (double)(shm_resident_kb() - SM.base_kb) / 1024;
        q->pool_mib = pool_resident_mib();
        q->start = now_s() - SM.t0;
        atomic_store(&SM.q, k);
        fprintf(stderr, "  %-20s %-7s T=%d query %d/%d\r", r->b->id, procs ? "procs" : "threads", nt, k + 1, total);
        meas m = one_round(nt, procs, false);
        atomic_store(&SM.q, -1);
        if (m.err) {
            r->err = m.err;
            break;
        }
        q->secs = m.build + m.probe;
        q->build = m.build;
        q->minflt = m.minflt;
        if (S.pool) {
            dsmpool_get_stats(S.pool, &b);
            q->demand_mib = (double)(b.refilled_on_demand - a.refilled_on_demand) / MIB;
            q->demand_ms = (double)(b.refill_on_demand_ns - a.refill_on_demand_ns) / 1e6;
            q->ahead_mib = (double)(b.refilled_ahead - a.refilled_ahead) / MIB;
            q->ahead_ms = (double)(b.refill_ahead_ns - a.refill_ahead_ns) / 1e6;
        }
        r->nq++;
    }
    atomic_store(&SM.stop, true);
    if (sampling) pthread_join(st, NULL);
    size_t ns = atomic_load(&SM.n);
    for (size_t i = 0; i < ns && mem; i++) {
        fprintf(mem, "%s,%s,%.3f,%.1f,%.1f,%d\n", r->b->id, r->pages, SM.s[i].t, SM.s[i].mib, SM.s[i].pool_mib,
                SM.s[i].q);
        if (SM.s[i].mib > r->peak) r->peak = SM.s[i].mib;
    }
    be_teardown();
    r->warm = med_of(r, GAP_SHORT, 0);
    r->cold = med_of(r, GAP_LONG, 0);
    r->warm_flt = med_of(r, GAP_SHORT, 1);
    r->cold_flt = med_of(r, GAP_LONG, 1);
    r->held_short = med_of(r, GAP_SHORT, 2);
    r->held_long = med_of(r, GAP_LONG, 2);
    r->pool_long = med_of(r, GAP_LONG, 3);
}

static const irow *idle_find(const irow *rows, int n, int kind, int variant, size_t huge_size, int bvariant) {
    for (int i = 0; i < n; i++) {
        const backend *b = rows[i].b;
        if (b->kind == kind && b->variant == variant && (kind != BK_DSMPOOL || b->huge_size == huge_size) &&
            (bvariant < 0 || b->huge == (dsmpool_huge)bvariant) && !rows[i].skip[0] && !rows[i].err && rows[i].nq)
            return &rows[i];
    }
    return NULL;
}

/* --pair A,B: the warm target, paired. Both backends set up at once, the
 * query on A then on B, --queries times, a short gap after each pair; B's
 * idle time is a gap, A's query and a gap, so the elastic rows' release
 * time is raised to 4x the short gap plus 3 s for it (still warm: nothing
 * released between its queries). Prints each pair's ratio B/A and their
 * median: a drift of the machine falls on both sides of a pair alike. */
static int pair_main(const char *pair, int nt, bool procs) {
    char a_id[64] = "", b_id[64] = "";
    if (sscanf(pair, "%63[^,],%63s", a_id, b_id) != 2) return 2;
    const backend *ba = NULL, *bb = NULL;
    for (size_t i = 0; i < NBACKENDS; i++) {
        if (!strcmp(backends[i].id, a_id)) ba = &backends[i];
        if (!strcmp(backends[i].id, b_id)) bb = &backends[i];
    }
    if (!ba || !bb || (procs && (!ba->shared || !bb->shared))) {
        fprintf(stderr, "hashjoin --pair: unknown backend, or one that cannot serve processes\n");
        return 2;
    }
    I.release_ms = 4 * I.short_ms + 3000;
    char why[300];
    __typeof__(S) sa, sb;
    memset(&S, 0, sizeof S);
    if (be_setup(ba, why, sizeof why) != 0) {
        fprintf(stderr, "%s: %s\n", ba->id, why);
        return 2;
    }
    sa = S;
    memset(&S, 0, sizeof S);
    if (be_setup(bb, why, sizeof why) != 0) {
        fprintf(stderr, "%s: %s\n", bb->id, why);
        S = sa;
        be_teardown();
        return 2;
    }
    sb = S;
    double r[100], ta[100], tb[100];
    long fa = 0, fb = 0;
    int n = 0, bad = 0;
    for (int k = 0; k <= I.queries && k < 100; k++) { /* pair 0: the first touch, not counted */
        S = sa;
        meas m1 = one_round(nt, procs, false);
        sa = S;
        S = sb;
        meas m2 = one_round(nt, procs, false);
        sb = S;
        if (m1.err || m2.err) {
            bad = 1;
            break;
        }
        if (k) {
            ta[n] = m1.build + m1.probe;
            tb[n] = m2.build + m2.probe;
            r[n] = tb[n] / ta[n];
            fa += m1.minflt;
            fb += m2.minflt;
            printf("pair %2d: %-22s %.3f s  %-22s %.3f s  ratio %.3f\n", k, ba->id, ta[n], bb->id, tb[n], r[n]);
            n++;
        }
        sleep_ms(I.short_ms);
    }
    dsmpool_stats st;
    uint64_t demand = 0, missed = 0;
    if (sb.pool && dsmpool_get_stats(sb.pool, &st) == 0) {
        demand = st.refills_on_demand;
        missed = st.refills_while_warm_fit;
    }
    S = sa;
    be_teardown();
    S = sb;
    be_teardown();
    if (!n) return 1;
    double rc[100];
    memcpy(rc, r, sizeof(double) * (size_t)n);
    double med = median(rc, n), lo = rc[0], hi = rc[n - 1]; /* (median sorts rc) */
    double p90 = rc[(9 * n + 9) / 10 - 1];                      /* the ceil(0.9 n)-th */
    printf("warm, paired (%d pairs, T=%d %s, gaps %u ms, %s release %u ms): %s / %s = %.3f median (%.3f-%.3f),"
           " %.3f 90th percentile; minor faults %ld / %ld; refills on demand in %s since its creation: %llu,"
           " %llu of them while resident memory fit\n",
           n, nt, procs ? "processes" : "threads", I.short_ms, bb->id, I.release_ms, bb->id, ba->id, med, lo, hi,
           p90, fb, fa, bb->id, (unsigned long long)demand, (unsigned long long)missed);
    printf("  target: median <= 1.03: %s; 90th percentile <= 1.15: %s\n", med <= 1.03 ? "met" : "MISSED",
           p90 <= 1.15 ? "met" : "MISSED");
    return bad;
}

/* The query 1 + 2Q times: a first one (the memory's first touch), Q after
 * short gaps (shorter than release_ms: an elastic pool keeps the memory), Q
 * after long ones (longer than release_ms plus a maintenance period: it has
 * given back all but resident_min + warm_bytes). Per query the time, the
 * workers' faults, what was resident before it, and the refills it paid;
 * the system's resident shared memory sampled every 50 ms (the memory over
 * time). Rows run one after another (a row's gaps are its own idle time), so
 * a drift of the machine falls on rows unevenly: the figures are medians. */
static int idle_main(const char *blist, int nt, bool procs, const char *out) {
    static const char *def = "dsmpool-2m,dsmpool-2m-elastic,dsmpool-2m-ahead,dsmpool-thp-elastic,"
                             "pg-dsa,pg-dsa-thp,pg-prealloc-2m";
    if (!blist) blist = def;
    irow *rows = calloc(NBACKENDS, sizeof *rows);
    SM.s = calloc(IMAXS, sizeof *SM.s);
    if (!rows || !SM.s) return 2;
    int nr = 0;
    mkdir(out, 0755);
    char path[4096];
    snprintf(path, sizeof path, "%s/hashjoin-idle-mem.csv", out);
    FILE *mem = fopen(path, "w");
    if (mem) fprintf(mem, "backend,pages,t_s,resident_mib,pool_resident_mib,query\n");
    for (size_t bi = 0; bi < NBACKENDS; bi++) {
        if (!listed(blist, backends[bi].id) || (procs && !backends[bi].shared)) continue;
        rows[nr].b = &backends[bi];
        idle_row(&rows[nr], nt, procs, mem);
        nr++;
    }
    if (mem) fclose(mem);
    fprintf(stderr, "%79s\r", "");
    printf("idle gaps: hash join of %ld x %ld rows, T=%d %s; 1 + %d + %d queries: gaps of %u ms, then %u ms;\n"
           "elastic rows: idle_release_ms %u, resident_min %zu MiB, warm_bytes %zu MiB, maintainer period %u ms\n",
           N, N, nt, procs ? "processes" : "threads", I.queries, I.queries, I.short_ms, I.long_ms, I.release_ms,
           I.resident_min >> 20, I.warm >> 20, I.period_ms);
    printf("%-15s %-10s %8s %8s %8s %8s %9s %9s %9s %9s\n", "backend", "pages", "warm s", "cold s", "warm flt",
           "cold flt", "held MiB", "idle MiB", "peak MiB", "pool idle");
    for (int i = 0; i < nr; i++) {
        const irow *r = &rows[i];
        if (r->skip[0] || r->err) {
            printf("%-15s %-10s %s%s\n", r->b->name, r->b->pages, r->skip[0] ? "skipped: " : "",
                   r->skip[0] ? r->skip : r->err == 1 ? "WRONG ANSWER" : "FAILED");
            continue;
        }
        char pl[16] = "-";
        if (r->b->kind == BK_DSMPOOL) snprintf(pl, sizeof pl, "%.0f", r->pool_long);
        printf("%-15s %-10s %8.3f %8.3f %8.0f %8.0f %9.0f %9.0f %9.0f %9s\n", r->b->name, r->pages, r->warm, r->cold,
               r->warm_flt, r->cold_flt, r->held_short, r->held_long, r->peak, pl);
    }
    printf("  warm/cold: median query time after short/long gaps; flt: the workers' minor faults; held/idle:\n"
           "  shared memory resident in the system (Shmem + hugetlb in use, /proc/meminfo, less what was\n"
           "  there before the row) just before the queries after short/long gaps; pool idle: the pool's\n"
           "  resident data (its stats) after long gaps.\n");
    printf("\nper query (refills: MiB and ms, on demand = paid by the build's allocations; ahead = the\n"
           "maintainer's warm reserve and the leader's refill ahead)\n");
    printf("%-15s %-10s %-5s %3s %8s %8s %8s %9s %9s %9s %9s\n", "backend", "pages", "gap", "q", "secs", "minflt",
           "held MiB", "demand", "dem ms", "ahead", "ahd ms");
    snprintf(path, sizeof path, "%s/hashjoin-idle.csv", out);
    FILE *f = fopen(path, "w");
    if (f)
        fprintf(f, "backend,pages,gap,query,start_s,secs,build_s,minflt,held_mib,pool_resident_mib,demand_mib,"
                   "demand_ms,ahead_mib,ahead_ms,rows,workers,mode\n");
    static const char *gname[] = {"first", "short", "long"};
    for (int i = 0; i < nr; i++) {
        const irow *r = &rows[i];
        for (int k = 0; k < r->nq; k++) {
            const iquery *q = &r->q[k];
            printf("%-15s %-10s %-5s %3d %8.3f %8ld %8.0f %9.0f %9.1f %9.0f %9.1f\n", r->b->name, r->pages,
                   gname[q->gap], q->q, q->secs, q->minflt, q->held_mib, q->demand_mib, q->demand_ms, q->ahead_mib,
                   q->ahead_ms);
            if (f)
                fprintf(f, "%s,%s,%s,%d,%.3f,%.4f,%.4f,%ld,%.1f,%.1f,%.1f,%.2f,%.1f,%.2f,%ld,%d,%s\n", r->b->id,
                        r->pages, gname[q->gap], q->q, q->start, q->secs, q->build, q->minflt, q->held_mib,
                        q->pool_mib, q->demand_mib, q->demand_ms, q->ahead_mib, q->ahead_ms, N, nt,
                        procs ? "procs" : "threads");
        }
    }
    if (f) fclose(f);
    /* the targets, as ratios in this run */
    printf("\ntargets:\n");
    for (int i = 0; i < nr; i++) {
        const irow *r = &rows[i];
        if (r->b->kind != BK_DSMPOOL || r->b->variant == V_NONE || r->skip[0] || r->err || !r->nq) continue;
        const irow *fx = idle_find(rows, nr, BK_DSMPOOL, V_NONE, r->b->huge_size, (int)r->b->huge);
        const irow *thp = idle_find(rows, nr, BK_PGDSA, V_THP_SHM, 0, -1);
        const irow *pre = idle_find(rows, nr, BK_PGPRE, V_NONE, 0, -1);
        printf("  %s %s:\n", r->b->name, r->pages);
        if (fx)
            printf("    warm: %.3f s against %.3f s fixed: %.3fx (target <= 1.03: %s); faults %.0f against %.0f (%s)\n",
                   r->warm, fx->warm, r->warm / fx->warm, r->warm / fx->warm <= 1.03 ? "met" : "MISSED",
                   r->warm_flt, fx->warm_flt, r->warm_flt <= fx->warm_flt ? "no more: met" : "MORE");
        else
            printf("    warm: no fixed dsmpool row in %s to compare with\n", r->pages);
        double want = (double)(I.resident_min + I.warm) / MIB;
        printf("    idle: the pool's resident data after long gaps %.0f MiB, resident_min + warm_bytes %.0f MiB (%s);"
               " in the system %.0f MiB",
               r->pool_long, want, r->pool_long <= want + 2 ? "met" : "MISSED", r->held_long);
        if (pre) printf(", where pg-prealloc holds %.0f MiB", pre->held_long);
        printf("\n");
        if (fx)
            printf("    cold: %.3f s against %.3f s fixed (%.3fx): the refill's cost, paid by the query\n", r->cold,
                   fx->cold, r->cold / fx->cold);
        if (thp)
            printf("    cold: %.3f s against %.3f s pg-dsa on a THP tmpfs (%.3fx; target <= 1: %s)\n", r->cold,
                   thp->cold, r->cold / thp->cold, r->cold <= thp->cold ? "met" : "MISSED");
    }
    char ids[2048] = "", cmd[9000];
    double ymax = 1, xmax = 1;
    for (int i = 0; i < nr; i++) {
        if (rows[i].skip[0] || !rows[i].nq) continue;
        size_t l = strlen(ids);
        snprintf(ids + l, sizeof ids - l, "%s%s", l ? " " : "", rows[i].b->id);
        if (rows[i].peak > ymax) ymax = rows[i].peak;
        const iquery *last = &rows[i].q[rows[i].nq - 1];
        if (last->start + last->secs > xmax) xmax = last->start + last->secs;
    }
    snprintf(cmd, sizeof cmd,
             "gnuplot -e \"dir='%s'; rows=%ld; ids='%s'; ymax=%.0f; xmax=%.1f\" bench/plot-hashjoin-idle.gp 2>/dev/null",
             out, N, ids, ymax, xmax);
    printf("\nCSV: %s/hashjoin-idle.csv, %s/hashjoin-idle-mem.csv\n", out, out);
    if (access("bench/plot-hashjoin-idle.gp", R_OK) == 0 && system(cmd) == 0)
        printf("plot: %s/hashjoin-idle.png\n", out);
    else
        printf("plot: not drawn (needs gnuplot and bench/plot-hashjoin-idle.gp, run from the repository)\n");
    int bad = 0;
    for (int i = 0; i < nr; i++) bad |= rows[i].err == 1;
    free(rows);
    free(SM.s);
    return bad ? 1 : 0;
}

int main(int argc, char **argv) {
    G = glibc_malloc();
    long rows = 10000000;
    int ts[32], nts = 0, rounds = 3, dup = 1;
    double zs = 0;
    bool procs = false, both = true, need_huge = false, need_gib = false, count = true, oversub = false;
    const char *blist = NULL, *out = "bench/results", *pair = NULL;
    uint64_t seed = 20261130;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool more = i + 1 < argc;
        if (!strcmp(a, "--rows") && more) rows = atol(argv[++i]);
        else if (!strcmp(a, "--threads") && more) {
            const char *s = argv[++i];
            while (*s && nts < 32) {
                ts[nts++] = atoi(s);
                while (*s && *s != ',') s++;
                if (*s) s++;
            }
        } else if (!strcmp(a, "--rounds") && more) rounds = atoi(argv[++i]);
        else if (!strcmp(a, "--mode") && more) {
            const char *m = argv[++i];
            both = !strcmp(m, "both");
            procs = !strcmp(m, "procs");
            if (!both && !procs && strcmp(m, "threads")) usage(argv[0]);
        } else if (!strcmp(a, "--procs")) {
            procs = true;
            both = false;
        }
        else if (!strcmp(a, "--backends") && more) blist = argv[++i];
        else if (!strcmp(a, "--dup") && more) dup = atoi(argv[++i]);
        else if (!strcmp(a, "--zipf") && more) zs = atof(argv[++i]);
        else if (!strcmp(a, "--seed") && more) seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(a, "--out") && more) out = argv[++i];
        else if (!strcmp(a, "--no-count")) count = false;
        else if (!strcmp(a, "--oversub")) oversub = true;
        else if (!strcmp(a, "--hugepages-needed")) need_huge = true;
        else if (!strcmp(a, "--gib-pages-needed")) need_gib = true;
        else if (!strcmp(a, "--idle")) I.on = true;
        else if (!strcmp(a, "--pair") && more) pair = argv[++i];
        else if (!strcmp(a, "--queries") && more) I.queries = atoi(argv[++i]);
        else if (!strcmp(a, "--gaps") && more) {
            if (sscanf(argv[++i], "%u,%u", &I.short_ms, &I.long_ms) != 2) usage(argv[0]);
        } else if (!strcmp(a, "--release-ms") && more) I.release_ms = (unsigned)atoi(argv[++i]);
        else if (!strcmp(a, "--resident-min-mib") && more) I.resident_min = (size_t)atol(argv[++i]) * MIB;
        else if (!strcmp(a, "--warm-mib") && more) I.warm = (size_t)atol(argv[++i]) * MIB;
        else usage(argv[0]);
    }
    if (rows < 1 || rows > 1000000000 || rounds < 1 || rounds > 99 || I.queries < 1 || I.queries > 99 ||
        I.release_ms < 1)
        usage(argv[0]);
    N = rows;
    if (need_huge) { /* for the set-up script: 2 MiB pages the largest backend needs; --pair
                      * holds two up at once (with 429 pages for two, the elastic pool's refills
                      * found no huge page, its areas spilled to 4 KiB OS memory: 1.9x) */
        printf("%zu\n", (size_t)((pair ? 2 : 1) * (pool_bytes() / (2 * MIB)) + 8));
        return 0;
    }
    if (need_gib) { /* for the set-up script: 1 GiB pages of the dsmpool-1g backend */
        for (size_t i = 0; i < NBACKENDS; i++)
            if (backends[i].huge_size == GIB) printf("%zu\n", (size_t)(be_pool_size(&backends[i]) / GIB));
        return 0;
    }
    int idle_t = nts ? ts[0] : 2;
    if (!nts) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (long t = 1; t <= n && nts < 31; t *= 2) ts[nts++] = (int)t;
        if (ts[nts - 1] != n) ts[nts++] = (int)n;
    }
    if (oversub && nts < 31) { /* a preempted lock holder stalls its waiters */
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        ts[nts++] = (int)(4 * n);
        ts[nts++] = (int)(16 * n);
    }
    for (int i = 0; i < nts; i++)
        if (ts[i] < 1 || ts[i] > MAXT) usage(argv[0]);
    fprintf(stderr, "hashjoin: %ld rows%s, generating...\n", N,
            zs > 0 ? " (zipf keys)" : dup > 1 ? " (duplicate keys)" : " (unique keys)");
    make_data(N, dup, zs, seed);
    fprintf(stderr, "hashjoin: expecting %llu matches\n", (unsigned long long)want_matches);

    if (pair) return pair_main(pair, idle_t, both ? true : procs);
    if (I.on) /* one worker count (the first given; 2, the seed query's, by default), processes unless threads */
        return idle_main(blist, idle_t, both ? true : procs, out);
    int nmodes = both ? 2 : 1;
    result *res = calloc(NBACKENDS * (size_t)nts * 2, sizeof *res);
    int nres = 0, wrong = 0;
    for (int mode = 0; mode < nmodes; mode++) {
        bool pm = both ? mode == 1 : procs;
        for (size_t bi = 0; bi < NBACKENDS; bi++) {
            const backend *b = &backends[bi];
            if (!listed(blist, b->id) || (pm && !b->shared) || (b->idle_only && !blist)) continue;
            char why[300] = "";
            bool ok = be_setup(b, why, sizeof why) == 0;
            for (int ti = 0; ti < nts; ti++) {
                result *r = &res[nres++];
                r->b = b;
                r->procs = pm;
                r->t = ts[ti];
                snprintf(r->pages, sizeof r->pages, "%s", S.pages);
                if (!ok) {
                    snprintf(r->skip, sizeof r->skip, "%s", why);
                    continue;
                }
                double bv[100], pv[100], tv[100];
                long flt[100];
                long long tl[100];
                if (!isatty(2))
                    fprintf(stderr, "  %-15s %-7s T=%d\n", b->id, pm ? "procs" : "threads", ts[ti]);
                for (int k = 0; k < rounds; k++) {
                    if (isatty(2))
                        fprintf(stderr, "  %-15s %-7s T=%-3d round %d/%d\r", b->id, pm ? "procs" : "threads",
                                ts[ti], k + 1, rounds);
                    meas m = one_round(ts[ti], pm, false);
                    if (m.err) {
                        r->err = m.err;
                        if (m.err == 1) wrong++;
                        break;
                    }
                    bv[k] = m.build;
                    pv[k] = m.probe;
                    tv[k] = m.build + m.probe;
                    flt[k] = m.minflt;
                    tl[k] = m.dtlb;
                }
                if (r->err) continue;
                /* the median round by total time gives the faults and misses */
                double tcopy[100];
                memcpy(tcopy, tv, sizeof(double) * (size_t)rounds);
                r->total = median(tcopy, rounds);
                for (int k = 0; k < rounds; k++)
                    if (tv[k] == r->total) {
                        r->minflt = flt[k];
                        r->dtlb = tl[k];
                    }
                r->build = median(bv, rounds);
                r->probe = median(pv, rounds);
                if (count) { /* one more round, untimed, counted */
                    meas m = one_round(ts[ti], pm, true);
                    if (m.err == 1) {
                        r->err = 1;
                        wrong++;
                    } else if (!m.err) {
                        r->c = m.c;
                    }
                }
            }
            if (ok) be_teardown();
        }
    }
    if (isatty(2)) fprintf(stderr, "%79s\r", "");

    /* the table */
    printf("hash join of %ld x %ld rows%s, %d round%s (median), %ld CPUs\n", N, N,
           zs > 0 ? " (zipf)" : dup > 1 ? " (dup)" : "", rounds, rounds > 1 ? "s" : "",
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("%-15s %-12s %-7s %3s %8s %8s %8s %8s %9s %9s\n", "backend", "pages", "workers", "T",
           "build s", "probe s", "total s", "speedup", "minflt", "dTLB miss");
    for (int i = 0; i < nres; i++) {
        result *r = &res[i];
        const char *mode = r->procs ? "procs" : "threads";
        if (r->skip[0]) {
            if (i == 0 || res[i - 1].b != r->b || res[i - 1].procs != r->procs)
                printf("%-15s %-12s %-7s     skipped: %s\n", r->b->name, r->pages, mode, r->skip);
            continue;
        }
        if (r->err) {
            printf("%-15s %-12s %-7s %3d %s\n", r->b->name, r->pages, mode, r->t,
                   r->err == 1 ? "WRONG ANSWER" : "FAILED");
            continue;
        }
        double base = 0;
        for (int j = 0; j < nres; j++)
            if (res[j].b->kind == BK_PGDSA && res[j].b->variant == V_NONE && res[j].procs == r->procs && res[j].t == r->t && !res[j].err &&
                !res[j].skip[0])
                base = res[j].total;
        char sp[16] = "-", f1[16], f2[16];
        if (base > 0) snprintf(sp, sizeof sp, "%.2fx", base / r->total);
        printf("%-15s %-12s %-7s %3d %8.3f %8.3f %8.3f %8s %9s %9s\n", r->b->name, r->pages, mode, r->t,
               r->build, r->probe, r->total, sp, fmt_count(r->minflt, f1, sizeof f1),
               fmt_count(r->dtlb, f2, sizeof f2));
    }
    if (count) print_counts(res, nres, out);
    /* the targets, stated */
    printf("\ntargets:\n");
    for (int mode = 0; mode < 2; mode++) {
        for (int ti = 0; ti < nts; ti++) {
            result *d2 = NULL, *pg = NULL, *je = NULL;
            for (int j = 0; j < nres; j++) {
                result *r = &res[j];
                if (r->procs != mode || r->t != ts[ti] || r->err || r->skip[0]) continue;
                if (r->b->kind == BK_DSMPOOL && r->b->huge_size == 2 * MIB) d2 = r;
                if (r->b->kind == BK_PGDSA && r->b->variant == V_NONE) pg = r;
                if (r->b->kind == BK_JEMALLOC) je = r;
            }
            if (d2 && pg)
                printf("  %s T=%d: dsmpool 2 MiB vs pg-dsa 4 KiB, total: %.2fx (target >= 1.37: %s)\n",
                       mode ? "procs" : "threads", ts[ti], pg->total / d2->total,
                       pg->total / d2->total >= 1.37 ? "met" : "MISSED");
            if (d2 && je)
                printf("  %s T=%d: dsmpool 2 MiB vs jemalloc, build: %.2fx (target >= 1: %s)\n",
                       mode ? "procs" : "threads", ts[ti], je->build / d2->build,
                       je->build >= d2->build ? "met" : "MISSED");
        }
    }
    /* CSV, gnuplot data files (one per mode, a block per series), the plot */
    mkdir(out, 0755);
    char path[4096];
    snprintf(path, sizeof path, "%s/hashjoin.csv", out);
    FILE *f = fopen(path, "w");
    FILE *d[2] = {NULL, NULL};
    char modes[32] = "";
    for (int mode = 0; mode < 2; mode++) {
        bool any = false;
        for (int i = 0; i < nres; i++) any |= res[i].procs == mode && !res[i].skip[0] && !res[i].err;
        if (!any) continue;
        snprintf(path, sizeof path, "%s/hashjoin-%s.dat", out, mode ? "procs" : "threads");
        d[mode] = fopen(path, "w");
        strcat(modes, mode ? "procs " : "threads ");
    }
    if (f) {
        fprintf(f, "backend,pages,mode,workers,build_s,probe_s,total_s,speedup_vs_pgdsa,minflt,dtlb_miss,rows,rounds\n");
        for (int i = 0; i < nres; i++) {
            result *r = &res[i];
            if (r->skip[0] || r->err) continue;
            double base = 0;
            for (int j = 0; j < nres; j++)
                if (res[j].b->kind == BK_PGDSA && res[j].b->variant == V_NONE && res[j].procs == r->procs && res[j].t == r->t &&
                    !res[j].err && !res[j].skip[0])
                    base = res[j].total;
            fprintf(f, "%s,%s,%s,%d,%.4f,%.4f,%.4f,%.3f,%ld,%lld,%ld,%d\n", r->b->name, r->pages,
                    r->procs ? "procs" : "threads", r->t, r->build, r->probe, r->total,
                    base > 0 ? base / r->total : 0, r->minflt, r->dtlb, N, rounds);
            FILE *df = d[r->procs];
            if (!df) continue;
            bool first = i == 0 || res[i - 1].b != r->b || res[i - 1].procs != r->procs ||
                         res[i - 1].skip[0] || res[i - 1].err;
            if (first) fprintf(df, "%s\"%s %s\" build total speedup\n", ftell(df) ? "\n\n" : "",
                               r->b->name, r->pages);
            fprintf(df, "%d %.4f %.4f %.3f\n", r->t, r->build, r->total, base > 0 ? base / r->total : 0);
        }
        fclose(f);
        for (int m = 0; m < 2; m++)
            if (d[m]) fclose(d[m]);
        printf("\nCSV: %s/hashjoin.csv\n", out);
        char cmd[9000];
        snprintf(cmd, sizeof cmd, "gnuplot -e \"dir='%s'; modes='%s'; rows=%ld\" bench/plot-hashjoin.gp 2>/dev/null",
                 out, modes, N);
        if (access("bench/plot-hashjoin.gp", R_OK) == 0 && system(cmd) == 0)
            printf("plot: %s/hashjoin.png\n", out);
        else
            printf("plot: not drawn (needs gnuplot and bench/plot-hashjoin.gp, run from the repository)\n");
    }
    if (wrong) fprintf(stderr, "hashjoin: %d WRONG ANSWER(S)\n", wrong);
    return wrong ? 1 : 0;
}
