/*
 * burst -- 32 KiB chunks from a dsmpool area against jemalloc and glibc.
 *
 *   1. single thread, steady state: ns per alloc+free pair of 32 KiB.
 *   2. burst: T workers allocate 1 GiB together in 32 KiB chunks, write one
 *      byte per 4 KiB page, then free everything; one warm-up round, then the
 *      median of --rounds rounds. Page faults (ru_minflt) of the measured
 *      rounds are counted. Then one more round, untimed, in which every
 *      system call of any kind the workers make is counted by a seccomp
 *      supervisor (tests/seccomp_count.h; it would slow the timed rounds
 *      down): the "syscalls" column, for every backend, with the kinds
 *      listed under the table.
 *
 * Every (backend, T) runs in a fresh forked process, so allocator state and
 * filters do not leak between measurements. glibc malloc is reached through
 * its own symbols in libc.so.6 (jemalloc, linked in, replaces plain malloc).
 *
 * Options: --threads 1,2,4  --rounds N  --gib G  --huge (dsmpool in 2 MiB
 * pages)  --pairs N (single-thread pairs). Prints a table and "csv," lines.
 */
#include <dsmpool.h>
#include <jemalloc/jemalloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tests/seccomp_count.h"
#include "bench_util.h"

static glibc_fns G; /* glibc's malloc (bench_util.h) */

#define CHUNK (32u << 10)
#define MIB (1ull << 20)

enum { B_DSMPOOL, B_JEMALLOC, B_GLIBC, NB };
static const char *bname[NB] = {"dsmpool", "jemalloc", "glibc"};

static struct {
    int backend;
    dsmpool *pool;
    dsmpool_area *area;
} B;

static inline void *b_alloc(uint64_t *h) {
    switch (B.backend) {
    case B_DSMPOOL: {
        dsmpool_ptr p;
        if (dsmpool_area_alloc(B.area, CHUNK, 0, &p) != 0) return NULL;
        *h = p;
        return dsmpool_area_addr(B.area, p);
    }
    case B_JEMALLOC: return mallocx(CHUNK, 0);
    default: return G.malloc(CHUNK);
    }
}

static inline void b_free(void *m, uint64_t h) {
    switch (B.backend) {
    case B_DSMPOOL: dsmpool_area_free(B.area, h); break;
    case B_JEMALLOC: dallocx(m, 0); break;
    default: G.free(m);
    }
}

static int b_setup(int backend, size_t pool_bytes, bool huge) {
    B.backend = backend;
    if (backend != B_DSMPOOL) return 0;
    dsmpool_config c;
    dsmpool_config_init(&c);
    c.size = pool_bytes;
    c.huge_pages = huge ? DSMPOOL_HUGE_ON : DSMPOOL_HUGE_OFF;
    if (dsmpool_create(&c, &B.pool) != 0 || dsmpool_area_create(B.pool, 0, &B.area) != 0) {
        fprintf(stderr, "burst: %s\n", dsmpool_last_error());
        return -1;
    }
    return 0;
}

/* ---- single thread -------------------------------------------------------- */

static double single_ns(long pairs) {
    uint64_t h = 0;
    for (int i = 0; i < 1000; i++) { /* warm up */
        void *m = b_alloc(&h);
        b_free(m, h);
    }
    double t0 = now_s();
    for (long i = 0; i < pairs; i++) {
        void *m = b_alloc(&h);
        __asm__ __volatile__("" : : "r"(m) : "memory");
        b_free(m, h);
    }
    return (now_s() - t0) * 1e9 / (double)pairs;
}

/* ---- burst ----------------------------------------------------------------- */

typedef struct wk {
    pthread_barrier_t *bar;
    int id, nthreads, rounds;
    long chunks;
    void **mem;
    uint64_t *hs;
    double *round_s; /* filled by worker 0 */
    long faults;
    int err;
    sc_count *sc;
} wk;

static int one_round(wk *w) {
    for (long i = 0; i < w->chunks; i++) {
        char *m = b_alloc(&w->hs[i]);
        if (!m) return -1;
        for (unsigned pg = 0; pg < CHUNK; pg += 4096) m[pg] = (char)i;
        w->mem[i] = m;
    }
    for (long i = 0; i < w->chunks; i++) b_free(w->mem[i], w->hs[i]);
    return 0;
}

static void *worker(void *arg) {
    wk *w = arg;
    if (one_round(w) != 0) w->err = 1; /* warm-up */
    (void)now_s(); /* the vDSO's data page faults in on the first clock read: not in the burst */
    pthread_barrier_wait(w->bar);
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    for (int r = 0; r < w->rounds; r++) {
        pthread_barrier_wait(w->bar);
        double t0 = now_s();
        if (one_round(w) != 0) w->err = 3;
        pthread_barrier_wait(w->bar);
        if (w->id == 0) w->round_s[r] = now_s() - t0;
    }
    getrusage(RUSAGE_THREAD, &r1);
    w->faults = r1.ru_minflt - r0.ru_minflt;
    /* the counted round: every system call of this thread by the supervisor */
    if (sc_count_enter(w->sc, w->id) != 0) w->err = 2;
    pthread_barrier_wait(w->bar);
    atomic_store(&w->sc->measuring[w->id], 1);
    if (one_round(w) != 0) w->err = 4;
    atomic_store(&w->sc->measuring[w->id], 0);
    pthread_barrier_wait(w->bar);
    return NULL;
}

typedef struct result {
    double ms, gbs, single_ns;
    long faults, syscalls;
    int err;
    char kinds[200]; /* of the system calls in the counted round */
} result;

/* In a forked child: one backend, one T. */
static void run_child(int backend, int nthreads, int rounds, double gib, bool huge, long pairs,
                      int fd) {
    result res = {0};
    long total = (long)(gib * 1024 * 1024 * 1024 / CHUNK);
    if (b_setup(backend, (size_t)(gib * 1.6 * 1024) * MIB, huge) != 0) res.err = 9;
    if (!res.err && pairs) {
        res.single_ns = single_ns(pairs);
        (void)!write(fd, &res, sizeof res);
        if (B.pool) dsmpool_detach(B.pool); /* the last process: the pool and its anchor go */
        _exit(0);
    }
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nthreads + 1);
    static sc_count sc;
    if (nthreads > SC_MAX_THREADS || sc_count_start(&sc) != 0) res.err = 8;
    wk w[256];
    pthread_t tid[256];
    double round_s[64];
    memset(round_s, 0, sizeof round_s); /* touch it now: a fault in the burst would be ours */
    for (int i = 0; i < nthreads && !res.err; i++) {
        long share = total / nthreads + (i < total % nthreads);
        w[i] = (wk){&bar, i, nthreads, rounds, share, malloc(sizeof(void *) * (size_t)share),
                    malloc(8 * (size_t)share), round_s, 0, 0, &sc};
        pthread_create(&tid[i], NULL, worker, &w[i]);
    }
    if (!res.err) {
        pthread_barrier_wait(&bar); /* warm-up done */
        for (int r = 0; r < rounds; r++) {
            pthread_barrier_wait(&bar);
            pthread_barrier_wait(&bar);
        }
        pthread_barrier_wait(&bar); /* the counted round */
        pthread_barrier_wait(&bar);
        for (int i = 0; i < nthreads; i++) {
            res.syscalls += atomic_load(&sc.count[i]);
            pthread_join(tid[i], NULL);
        }
        sc_count_names(&sc, res.kinds, sizeof res.kinds);
        for (int i = 0; i < nthreads; i++) {
            res.faults += w[i].faults;
            if (w[i].err) res.err = w[i].err;
        }
        double med = median(round_s, rounds);
        res.ms = med * 1e3;
        res.gbs = (double)total * CHUNK / med / 1e9;
    }
    (void)!write(fd, &res, sizeof res);
    if (B.pool) dsmpool_detach(B.pool); /* as above: nothing left in /dev/shm */
    _exit(0);
}

static int run(int backend, int nthreads, int rounds, double gib, bool huge, long pairs, result *out) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        run_child(backend, nthreads, rounds, gib, huge, pairs, fds[1]);
    }
    close(fds[1]);
    memset(out, 0, sizeof *out);
    ssize_t n = read(fds[0], out, sizeof *out);
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    if (n != (ssize_t)sizeof *out) {
        out->err = WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS ? 100 : 101;
        return -1;
    }
    return 0;
}

static int parse_list(const char *s, int *v, int max) {
    int n = 0;
    while (*s && n < max) {
        v[n++] = atoi(s);
        while (*s && *s != ',') s++;
        if (*s == ',') s++;
    }
    return n;
}

int main(int argc, char **argv) {
    G = glibc_malloc();
    int ts[32], nts = 0, rounds = 5;
    double gib = 1.0;
    bool huge = false;
    long pairs = 20000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) nts = parse_list(argv[++i], ts, 32);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--gib") && i + 1 < argc) gib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--pairs") && i + 1 < argc) pairs = atol(argv[++i]);
        else if (!strcmp(argv[i], "--huge")) huge = true;
        else {
            fprintf(stderr, "usage: %s [--threads 1,2,4] [--rounds N] [--gib G] [--pairs N] [--huge]\n", argv[0]);
            return 2;
        }
    }
    if (rounds < 1) rounds = 1;
    if (rounds > 64) rounds = 64;
    if (!nts) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (long t = 1; t <= n && nts < 32; t *= 2) ts[nts++] = (int)t;
        if (ts[nts - 1] != n && nts < 32) ts[nts++] = (int)n;
    }
    int fails = 0;
    printf("32 KiB alloc+free, one thread, steady state: ns per pair (lower is better)\n");
    double single[NB];
    for (int b = 0; b < NB; b++) {
        result r;
        run(b, 1, 1, 0.01, huge, pairs, &r);
        single[b] = r.single_ns;
        printf("  %-9s %7.1f ns%s\n", bname[b], r.single_ns,
               b == B_DSMPOOL ? (r.single_ns <= 25 ? "   (target <= 25: met)" : "   (target <= 25: MISSED)")
                              : "");
        printf("csv,single,%s,%.2f\n", bname[b], r.single_ns);
    }
    printf("  dsmpool vs jemalloc %.2fx, vs glibc %.2fx faster\n", single[B_JEMALLOC] / single[B_DSMPOOL],
           single[B_GLIBC] / single[B_DSMPOOL]);
    printf("\nburst: T workers allocate %.2g GiB in 32 KiB chunks, touch every page, free; median of "
           "%d rounds after a warm-up%s\n", gib, rounds, huge ? "; dsmpool in 2 MiB pages" : "");
    printf("%3s %-9s %9s %8s %10s %12s %8s %8s\n", "T", "backend", "ms", "GB/s", "minflt", "syscalls",
           "vs jem", "vs glibc");
    for (int i = 0; i < nts; i++) {
        result r[NB];
        for (int b = 0; b < NB; b++) run(b, ts[i], rounds, gib, huge, 0, &r[b]);
        for (int b = 0; b < NB; b++) {
            if (r[b].err) {
                printf("%3d %-9s FAILED (%s)\n", ts[i], bname[b],
                       r[b].err == 8 ? "no seccomp supervisor (Linux >= 5.5 needed)"
                                       : "see stderr");
                fails++;
                continue;
            }
            printf("%3d %-9s %9.1f %8.2f %10ld %12ld", ts[i], bname[b], r[b].ms, r[b].gbs, r[b].faults,
                   r[b].syscalls);
            if (b == B_DSMPOOL && r[b].syscalls) {
                printf("  (target 0 system calls: MISSED)");
                fails++;
            }
            if (b == B_DSMPOOL)
                printf(" %7.2fx %7.2fx%s", r[B_JEMALLOC].ms / r[b].ms, r[B_GLIBC].ms / r[b].ms,
                       r[B_JEMALLOC].ms >= r[b].ms ? "" : "  (slower than jemalloc)");
            printf("\n");
            printf("csv,burst,%d,%s,%.2f,%.3f,%ld,%ld\n", ts[i], bname[b], r[b].ms, r[b].gbs, r[b].faults,
                   r[b].syscalls);
        }
        for (int b = 0; b < NB; b++)
            if (!r[b].err) printf("      %s's system calls in the counted round: %s\n", bname[b], r[b].kinds);
    }
    return fails ? 1 : 0;
}
