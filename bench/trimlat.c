/*
 * trimlat -- allocation latency while another process trims (issue 27: "the
 * p99.9 of allocation latency during a concurrent trim no more than 2x that
 * without").
 *
 * One pool (ANON, 4 KiB pages, or --huge for 2 MiB hugetlb pages), two
 * forked processes of it on the two CPUs:
 *   worker   allocates and frees in a loop, each call timed (clock_gettime,
 *            vDSO): a 2 MiB and a 256 KiB segment (the pool's page path,
 *            where a trimmer's claims live) and 16 chunks of 32 KiB from an
 *            area (the hash join's path), then frees them all; a working set
 *            of about 3 MiB, always far below keep_bytes.
 *   trimmer  in the "trim" phases only: dsmpool_prefault_free(64 MiB), then
 *            dsmpool_trim(keep_bytes = 64 MiB), which gives them back, again
 *            and again: the kernel populating and unmapping pages all the
 *            while, and the trimmer holding blocks of up to 32 MiB in the
 *            allocator. (The pool starts trimmed to 64 MiB of free memory
 *            resident: the worker's 3 MiB always fit in it.)
 * Phases alternate, quiet and trim, --phase-ms each (300), --rounds times (8),
 * so that the machine's drifts fall on both alike; a quiet phase begins only
 * once the trimmer's last cycle has ended (the samples between are dropped). Per path and phase: p50,
 * p99, p99.9 and max of the calls' latency, and the ratio trim/quiet; the
 * pool's refills on demand (an allocation that met released memory and made
 * it resident first: its latency is a system call's) in each phase.
 *
 * Options: --rounds R, --phase-ms MS, --mib M (the pool, 1024), --huge.
 * Prints a table and "csv," lines. Exit 1 when an allocation failed.
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define MIB (1ull << 20)
#define MAXLAT (8u << 20) /* samples per path and phase (the pages are touched as used) */

enum { P_SEG2M, P_SEG256K, P_CHUNK, NPATH };
static const char *path_name[NPATH] = {"segment 2 MiB", "segment 256 KiB", "area 32 KiB"};

typedef struct shared {
    _Atomic int phase;   /* 0 quiet, 1 trim, 2 stop, 3 draining: the trimmer ends its cycle */
    _Atomic int busy;    /* the trimmer is in a cycle */
    _Atomic int failed;  /* an allocation failed: errno */
    _Atomic uint64_t trims, released, refilled, cycle_ns;
    uint32_t n[2][NPATH];
    uint32_t lat[2][NPATH][MAXLAT]; /* ns */
} shared;

static inline uint64_t ns_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void note(shared *sh, int ph, int path, uint64_t d) {
    if (ph > 1) return;
    uint32_t i = sh->n[ph][path];
    if (i < MAXLAT) {
        sh->lat[ph][path][i] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
        sh->n[ph][path] = i + 1;
    }
}

static void worker(dsmpool *pool, shared *sh) {
    dsmpool_area *area;
    if (dsmpool_area_create(pool, 0, &area) != 0) {
        atomic_store(&sh->failed, ENOMEM);
        _exit(1);
    }
    int ph;
    /* relaxed: the phase is a hint of which bucket a sample goes in; the
     * parent reads the samples after waitpid(), which orders everything */
    while ((ph = atomic_load_explicit(&sh->phase, memory_order_relaxed)) != 2) {
        dsmpool_seg *a, *b;
        dsmpool_ptr c[16];
        if (ph == 3) ph = 2; /* no bucket: the phase is changing */
        uint64_t t0 = ns_now();
        int r = dsmpool_seg_create(pool, 2 * MIB, 0, &a);
        uint64_t t1 = ns_now();
        int r2 = dsmpool_seg_create(pool, 256 << 10, 0, &b);
        uint64_t t2 = ns_now();
        if (r || r2) {
            atomic_store(&sh->failed, r ? -r : -r2);
            break;
        }
        note(sh, ph, P_SEG2M, t1 - t0);
        note(sh, ph, P_SEG256K, t2 - t1);
        ((volatile char *)dsmpool_seg_address(a))[0] = 1; /* the memory is there */
        ((volatile char *)dsmpool_seg_address(b))[0] = 1;
        for (int i = 0; i < 16; i++) {
            uint64_t s = ns_now();
            if ((r = dsmpool_area_alloc(area, 32 << 10, 0, &c[i])) != 0) {
                atomic_store(&sh->failed, -r);
                _exit(1);
            }
            note(sh, ph, P_CHUNK, ns_now() - s);
            ((volatile char *)dsmpool_area_addr(area, c[i]))[0] = 1;
        }
        for (int i = 0; i < 16; i++) dsmpool_area_free(area, c[i]);
        dsmpool_seg_detach(a);
        dsmpool_seg_detach(b);
    }
    dsmpool_area_destroy(area);
    _exit(0);
}

static void trimmer(dsmpool *pool, shared *sh) {
    int ph;
    while ((ph = atomic_load_explicit(&sh->phase, memory_order_relaxed)) != 2) {
        if (ph != 1) { /* quiet or draining */
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
            continue;
        }
        size_t rel = 0, pf = 0;
        atomic_store(&sh->busy, 1); /* seq_cst: the parent sees it before it sees the cycle's end */
        uint64_t c0 = ns_now();
        if (atomic_load(&sh->phase) == 1) {
            dsmpool_prefault_free(pool, 64 * MIB, &pf); /* work for the trim: 64 MiB a cycle */
            dsmpool_trim(pool, 64 * MIB, &rel);
        }
        atomic_fetch_add_explicit(&sh->cycle_ns, ns_now() - c0, memory_order_relaxed);
        atomic_store(&sh->busy, 0);
        atomic_fetch_add_explicit(&sh->trims, 1, memory_order_relaxed); /* counts, read after waitpid */
        atomic_fetch_add_explicit(&sh->released, rel, memory_order_relaxed);
        atomic_fetch_add_explicit(&sh->refilled, pf, memory_order_relaxed);
    }
    _exit(0);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(uint32_t *v, uint32_t n, double p) {
    if (!n) return 0;
    size_t i = (size_t)((double)n * p);
    return v[i >= n ? n - 1 : i] / 1e3;
}

int main(int argc, char **argv) {
    int rounds = 8, phase_ms = 300;
    size_t mib = 1024;
    bool huge = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--phase-ms") && i + 1 < argc) phase_ms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--huge")) huge = true;
        else {
            fprintf(stderr, "usage: %s [--rounds R] [--phase-ms MS] [--mib M] [--huge]\n", argv[0]);
            return 2;
        }
    }
    if (rounds < 1 || phase_ms < 10 || mib < 512) {
        fprintf(stderr, "trimlat: --rounds >= 1, --phase-ms >= 10, --mib >= 512\n");
        return 2;
    }
    dsmpool_config c;
    dsmpool_config_init(&c);
    c.size = mib * MIB;
    c.huge_pages = huge ? DSMPOOL_HUGE_ON : DSMPOOL_HUGE_OFF;
    dsmpool *pool;
    if (dsmpool_create(&c, &pool) != 0) {
        fprintf(stderr, "trimlat: %s\n", dsmpool_last_error());
        return huge ? 0 : 1; /* no huge pages here: nothing to measure */
    }
    shared *sh = mmap(NULL, sizeof(shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return 1;
    dsmpool_stats s0, s1;
    uint64_t demand[2] = {0, 0};
    fflush(NULL);
    pid_t w = fork();
    if (w == 0) worker(pool, sh);
    pid_t t = fork();
    if (t == 0) trimmer(pool, sh);
    size_t start_rel = 0; /* the start: 64 MiB of free memory resident, the rest released */
    dsmpool_trim(pool, 64 * MIB, &start_rel);
    for (int r = 0; r < 2 * rounds; r++) {
        int ph = r & 1;
        if (!ph) { /* the trimmer's last cycle ends before a quiet phase begins */
            atomic_store(&sh->phase, 3);
            while (atomic_load(&sh->busy)) {
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
            }
        }
        dsmpool_get_stats(pool, &s0);
        atomic_store(&sh->phase, ph);
        struct timespec ts = {phase_ms / 1000, (long)(phase_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        dsmpool_get_stats(pool, &s1);
        demand[ph] += s1.refills_on_demand - s0.refills_on_demand;
    }
    atomic_store(&sh->phase, 2);
    int st, bad = 0;
    waitpid(w, &st, 0);
    bad |= !WIFEXITED(st) || WEXITSTATUS(st);
    waitpid(t, &st, 0);
    bad |= !WIFEXITED(st) || WEXITSTATUS(st);
    if (atomic_load(&sh->failed)) {
        fprintf(stderr, "trimlat: an allocation failed: %s\n", strerror(atomic_load(&sh->failed)));
        bad = 1;
    }
    printf("allocation latency with and without a concurrent trimmer: a %zu MiB pool in %s pages, %d x %d ms "
           "phases each\n", mib, huge ? "2 MiB" : "4 KiB", rounds, phase_ms);
    printf("trimmer: %llu refill+trim cycles of %.1f ms, %llu MiB released, %llu MiB made resident again; refills on "
           "demand: %llu quiet, %llu during trims\n", (unsigned long long)sh->trims,
           sh->trims ? (double)sh->cycle_ns / 1e6 / (double)sh->trims : 0, (unsigned long long)(sh->released >> 20),
           (unsigned long long)(sh->refilled >> 20), (unsigned long long)demand[0], (unsigned long long)demand[1]);
    double secs = (double)rounds * phase_ms / 1e3;
    printf("worker: %.0f rounds/s quiet, %.0f during trims (a round: the calls below, and one write to each block: "
           "the writes fault where the trimmer made memory resident, in its own page tables only)\n",
           sh->n[0][P_SEG2M] / secs, sh->n[1][P_SEG2M] / secs);
    printf("%-16s %-6s %9s %8s %8s %8s %9s\n", "path", "phase", "calls", "p50 us", "p99 us", "p99.9 us", "max us");
    for (int p = 0; p < NPATH; p++) {
        double q[2][4];
        for (int ph = 0; ph < 2; ph++) {
            uint32_t n = sh->n[ph][p];
            qsort(sh->lat[ph][p], n, 4, cmp_u32);
            q[ph][0] = pct(sh->lat[ph][p], n, 0.5);
            q[ph][1] = pct(sh->lat[ph][p], n, 0.99);
            q[ph][2] = pct(sh->lat[ph][p], n, 0.999);
            q[ph][3] = n ? sh->lat[ph][p][n - 1] / 1e3 : 0;
            printf("%-16s %-6s %9u %8.2f %8.2f %8.2f %9.1f\n", path_name[p], ph ? "trim" : "quiet", n, q[ph][0],
                   q[ph][1], q[ph][2], q[ph][3]);
            printf("csv,%s,%s,%s,%u,%.3f,%.3f,%.3f,%.1f\n", huge ? "2m" : "4k", path_name[p], ph ? "trim" : "quiet",
                   n, q[ph][0], q[ph][1], q[ph][2], q[ph][3]);
        }
        double ratio = q[0][2] > 0 ? q[1][2] / q[0][2] : 0;
        printf("  %s: p99.9 during trims / quiet = %.2fx (target <= 2: %s)\n", path_name[p], ratio,
               ratio <= 2 ? "met" : "MISSED");
    }
    munmap(sh, sizeof *sh);
    dsmpool_destroy(pool);
    return bad;
}
