/*
 * poolbench -- the page allocator and the region, measured.
 *
 *   1. alloc+free of 32 KiB and 2 MiB blocks from the lock-free page
 *      allocator, 1 and N threads, two patterns: "pair" (alloc then free at
 *      once) and "burst" (64 allocs, then 64 frees); glibc malloc/free of
 *      the same sizes in the same run as the baseline.
 *   2. Mixed orders: each thread keeps 64 blocks, frees a random one and
 *      allocates a random order 0..3 in its place (segment and large-block
 *      traffic with exact-size tails). Printed next to the order-0 pair of
 *      the same run, with their ratio, through the library (dp_pool_alloc:
 *      CPU, node, sub-pool choice) and on the raw allocator of the same
 *      sub-pool (dp_pa_alloc), so the library's own cost is visible. The
 *      four are measured in turn --reps times (default 5) and the medians
 *      printed, with the range of the ratio over the rounds: on a shared
 *      machine one round's order-0 pair can be a third slower than the
 *      next's.
 *   3. Creating a 1 GiB pool: base pages without and with prefault, and
 *      2 MiB hugetlb pages (when the machine has them reserved).
 *
 * Prints a table and one machine-readable line per row ("csv,...").
 * Options: --seconds S (per measurement, default 0.5), --threads N (default
 * online CPUs), --size MiB of the creation test (default 1024), --mixed
 * (only the mixed-order table: for profiles and repeated runs), --reps R
 * (rounds of the mixed-order table, default 5).
 */
#include <dsmpool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dp_numa.h"
#include "bench_util.h"
#include "dp_internal.h"
#include "dp_os.h"

#define MIB (1ull << 20)

typedef struct job {
    dsmpool *pool; /* NULL: malloc baseline */
    dp_pa *raw;    /* not NULL: the raw allocator of one sub-pool (pool is its owner) */
    unsigned cpu;  /* the raw allocator's CPU hint: the thread's index */
    unsigned order;
    bool burst;
    bool mixed;    /* working set of 64, random orders 0..3 (order unused) */
    double seconds;
    atomic_int *go;
    uint64_t pairs;
    int err;
} job;

/* xorshift64: cheap, per thread, no shared state */
static inline uint64_t xs64(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static inline int one_alloc(job *j, unsigned order, uint64_t *b) {
    if (!j->raw) return dp_pool_alloc(j->pool, order, b);
    return dp_pa_alloc(j->raw, order, dp_owner(j->pool), j->cpu, b);
}

static inline void one_free(job *j, unsigned order, uint64_t b) {
    if (!j->raw) dp_pool_free(j->pool, b);
    else dp_pa_free(j->raw, b, order);
}

/* Mixed orders: a bounded working set; each step frees a random block and
 * allocates a random order 0..3 in its place. Counts steps (free+alloc). */
static void *mixed_worker(job *j) {
    enum { WS = 64 };
    uint64_t blk[WS], rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)j->cpu + 1) * 0xbf58476d1ce4e5b9ull;
    unsigned ord[WS];
    for (int i = 0; i < WS; i++) {
        ord[i] = (unsigned)(xs64(&rng) & 3);
        if (one_alloc(j, ord[i], &blk[i]) != 0) { j->err = 1; return NULL; }
    }
    while (!atomic_load(j->go)) ;
    double end = now_s() + j->seconds;
    uint64_t n = 0;
    while (now_s() < end) {
        for (int rep = 0; rep < 64; rep++) {
            uint64_t r = xs64(&rng);
            unsigned i = (unsigned)(r >> 8) % WS;
            one_free(j, ord[i], blk[i]);
            ord[i] = (unsigned)(r & 3);
            if (one_alloc(j, ord[i], &blk[i]) != 0) { j->err = 1; return NULL; }
        }
        n += 64;
    }
    for (int i = 0; i < WS; i++) one_free(j, ord[i], blk[i]);
    j->pairs = n;
    return NULL;
}

static void *worker(void *arg) {
    job *j = arg;
    if (j->mixed) return mixed_worker(j);
    while (!atomic_load(j->go)) ;
    uint64_t blk[64];
    void *mp[64];
    size_t bytes = (size_t)4096 << j->order;
    double end = now_s() + j->seconds;
    uint64_t n = 0;
    while (now_s() < end) {
        for (int rep = 0; rep < 16; rep++) {
            if (j->burst) {
                for (int i = 0; i < 64; i++) {
                    if (j->pool) {
                        if (dp_pool_alloc(j->pool, j->order, &blk[i]) != 0) { j->err = 1; return NULL; }
                    } else if (!(mp[i] = malloc(bytes))) { j->err = 1; return NULL; }
                }
                for (int i = 0; i < 64; i++) {
                    if (j->pool) dp_pool_free(j->pool, blk[i]);
                    else free(mp[i]);
                }
                n += 64;
            } else {
                if (j->pool) {
                    if (one_alloc(j, j->order, &blk[0]) != 0) { j->err = 1; return NULL; }
                    one_free(j, j->order, blk[0]);
                } else {
                    mp[0] = malloc(bytes);
                    __asm__ __volatile__("" : : "r"(mp[0]) : "memory");
                    free(mp[0]);
                }
                n++;
            }
        }
    }
    j->pairs = n;
    return NULL;
}

/* ns per alloc+free pair, aggregated over threads (wall time / pairs per
 * thread). raw: dp_pa_alloc on that sub-pool instead of dp_pool_alloc. */
static double measure_ex(dsmpool *pool, dp_pa *raw, unsigned order, bool burst, bool mixed,
                         unsigned threads, double secs) {
    pthread_t tid[256];
    job jobs[256];
    atomic_int go = 0;
    for (unsigned i = 0; i < threads; i++) {
        jobs[i] = (job){pool, raw, i, order, burst, mixed, secs, &go, 0, 0};
        pthread_create(&tid[i], NULL, worker, &jobs[i]);
    }
    usleep(20000); /* mixed workers fill their working sets first */
    double t0 = now_s();
    atomic_store(&go, 1);
    uint64_t total = 0;
    for (unsigned i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        if (jobs[i].err) {
            fprintf(stderr, "poolbench: allocation failed\n");
            exit(1);
        }
        total += jobs[i].pairs;
    }
    double wall = now_s() - t0;
    return wall * 1e9 * threads / (double)total; /* ns per pair, per thread */
}

static double measure(dsmpool *pool, unsigned order, bool burst, unsigned threads, double secs) {
    return measure_ex(pool, NULL, order, burst, false, threads, secs);
}

static double create_ms(size_t size, dsmpool_huge huge, bool prefault, char *note, size_t n) {
    dsmpool_config c;
    dsmpool_config_init(&c);
    c.size = size;
    c.backing = DSMPOOL_BACKING_MEMFD;
    c.huge_pages = huge;
    c.prefault = prefault;
    dsmpool *p;
    double t0 = now_s();
    int r = dsmpool_create(&c, &p);
    double ms = (now_s() - t0) * 1e3;
    if (r) {
        snprintf(note, n, "skipped: %s", dsmpool_last_error());
        return -1;
    }
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    unsigned t = dp_os_caps()->ncpus_online > 16 ? 16 : dp_os_caps()->ncpus_online;
    snprintf(note, n, "page %zu KiB, %zu MiB mapped huge, prefaulted %zu MiB by %u threads",
             st.page_size >> 10, st.huge_mapped_bytes >> 20, st.prefaulted_bytes >> 20,
             prefault ? t : 0);
    dsmpool_destroy(p);
    return ms;
}

int main(int argc, char **argv) {
    double secs = 0.5;
    unsigned threads = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
    size_t create_mib = 1024;
    bool only_mixed = false;
    unsigned reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) secs = atof(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc) create_mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--mixed")) only_mixed = true;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = (unsigned)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--seconds S] [--threads N] [--size MiB] [--mixed] [--reps R]\n",
                    argv[0]);
            return 2;
        }
    }
    if (threads < 1) threads = 1;
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    if (threads > 256) threads = 256;
    dsmpool_config c;
    dsmpool_config_init(&c);
    c.size = 512 * MIB;
    dsmpool *pool;
    if (dsmpool_create(&c, &pool) != 0) {
        fprintf(stderr, "poolbench: %s\n", dsmpool_last_error());
        return 1;
    }
    printf("dsmpool page allocator: ns per alloc+free, per thread (lower is better)\n");
    if (!only_mixed)
        printf("%-7s %-6s %7s %12s %12s %9s\n", "block", "mode", "threads", "dsmpool ns",
               "malloc ns", "ratio");
    unsigned orders[2] = {3, 9};
    const char *names[2] = {"32 KiB", "2 MiB"};
    unsigned tl[2] = {1, threads};
    for (int o = 0; o < (only_mixed ? 0 : 2); o++)
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < (threads > 1 ? 2 : 1); t++) {
                double d = measure(pool, orders[o], b, tl[t], secs);
                double m = measure(NULL, orders[o], b, tl[t], secs);
                printf("%-7s %-6s %7u %12.1f %12.1f %8.2fx\n", names[o], b ? "burst" : "pair", tl[t],
                       d, m, m / d);
                printf("csv,palloc,%s,%s,%u,%.1f,%.1f\n", names[o], b ? "burst" : "pair", tl[t], d, m);
            }

    /* The raw allocator: the sub-pool this thread's node allocates from. */
    int rs = pool->node_sub[dp_numa_current_node() & 0xff];
    dp_pa *raw = &pool->pa[rs >= 0 ? rs : 0];
    printf("\nmixed orders 0..3 (working set 64 per thread) vs order-0 pair, ns per alloc+free,\n"
           "medians of %u rounds (each round measures the four in turn)\n", reps);
    printf("%7s %10s %10s %9s %10s %10s %9s %13s\n", "threads", "o0 pair", "o0 raw", "lib cost",
           "mixed", "mixed raw", "mixed/o0", "rounds' range");
    for (int t = 0; t < (threads > 1 ? 2 : 1); t++) {
        double v[4][64], ratio[64];
        for (unsigned r = 0; r < reps; r++) {
            v[0][r] = measure_ex(pool, NULL, 0, false, false, tl[t], secs);
            v[1][r] = measure_ex(pool, raw, 0, false, false, tl[t], secs);
            v[2][r] = measure_ex(pool, NULL, 0, false, true, tl[t], secs);
            v[3][r] = measure_ex(pool, raw, 0, false, true, tl[t], secs);
            ratio[r] = v[2][r] / v[0][r];
        }
        double o0 = median(v[0], (int)reps), o0r = median(v[1], (int)reps), mx = median(v[2], (int)reps),
               mxr = median(v[3], (int)reps), lo = ratio[0], hi = ratio[0];
        for (unsigned r = 1; r < reps; r++) {
            lo = ratio[r] < lo ? ratio[r] : lo;
            hi = ratio[r] > hi ? ratio[r] : hi;
        }
        printf("%7u %10.1f %10.1f %9.1f %10.1f %10.1f %8.2fx %6.2f-%.2fx\n", tl[t], o0, o0r, o0 - o0r, mx,
               mxr, mx / o0, lo, hi);
        printf("csv,mixed,%u,%.1f,%.1f,%.1f,%.1f,%.2f\n", tl[t], o0, o0r, mx, mxr, mx / o0);
    }
    if (dsmpool_check(pool) != 0) {
        fprintf(stderr, "poolbench: check failed: %s\n", dsmpool_last_error());
        return 1;
    }
    dsmpool_detach(pool);
    if (only_mixed) return 0;

    printf("\npool creation, %zu MiB, memfd backing\n", create_mib);
    printf("%-30s %10s  %s\n", "pages", "ms", "obtained");
    struct { const char *name; dsmpool_huge huge; bool prefault; } cases[] = {
        {"4 KiB, no prefault", DSMPOOL_HUGE_OFF, false},
        {"4 KiB, prefault", DSMPOOL_HUGE_OFF, true},
        {"THP (madvise), prefault", DSMPOOL_HUGE_TRANSPARENT, true},
        {"2 MiB hugetlb, prefault", DSMPOOL_HUGE_ON, true},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof *cases; i++) {
        char note[400];
        double ms = create_ms(create_mib * MIB, cases[i].huge, cases[i].prefault, note, sizeof note);
        if (ms < 0) printf("%-30s %10s  %s\n", cases[i].name, "-", note);
        else printf("%-30s %10.1f  %s\n", cases[i].name, ms, note);
        printf("csv,create,%s,%zu,%.1f\n", cases[i].name, create_mib, ms);
    }
    return 0;
}
