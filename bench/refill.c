/*
 * refill -- how fast the elastic pool makes memory resident, against the
 * kernel's own speed on the same machine in the same run (issue 35, item 4).
 *
 * Per page kind (--pages: 4k, shmem in base pages; thp, shmem with
 * MADV_HUGEPAGE, which needs shmem_enabled = advise; 2m, hugetlb 2 MiB
 * pages, which needs free huge pages) and block size (--sizes, MiB), four
 * timings, taken in turn sample after sample so that the machine's drifts
 * fall on all alike:
 *
 *   populate  a fresh memfd of the kind (MFD_HUGETLB for 2m), mapped
 *             shared, made resident by one MADV_POPULATE_WRITE: the
 *             kernel's limit, no allocator (memfd_create, ftruncate, mmap
 *             and the munmap after are not timed)
 *   touch     the same, made resident by a first write to each page
 *   demand    an elastic pool (--pool MiB, memfd, the same pages) trimmed
 *             to nothing; dp_pool_alloc of the block, which meets released
 *             memory and makes it resident before it returns (a refill on
 *             demand, counted in the stats: checked). The allocation's
 *             whole time, the allocator's search included
 *   ahead     the same pool trimmed to nothing; dsmpool_prefault_free of
 *             the block's bytes (what the maintainer does to keep its
 *             warm reserve)
 *
 * and, per kind, the release: dsmpool_prefault_free of --release-mib, then
 * dsmpool_trim(pool, 0) timed (--reps times), one process mapping it.
 *
 * Each timing is reported per MiB: p50, p99 and p99.9 of microseconds per
 * MiB with the sample count (a p99.9 of fewer than 10,000 samples is
 * printed as "-"), GB/s at the median, and the medians' ratio to populate
 * (the goal: demand and ahead at 0.9x of populate's speed or better).
 *
 * Options: --pages 4k,thp,2m  --sizes 2,32  --samples N (for 2 MiB; larger
 * blocks get N * 2 MiB / size, at least 200)  --pool MiB (1024)
 * --release-mib M (512)  --reps R (20). Kinds the machine cannot give are
 * skipped with a line that says why. bench/refill.sh sets shmem THP and
 * reserves huge pages for a run, and puts them back. Prints a table and
 * "csv," lines; exit 1 when a timing failed.
 */
#include <dsmpool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "dp_internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MFD_HUGETLB
#define MFD_HUGETLB 4u
#endif

#define MIB ((size_t)1 << 20)

enum { T_POPULATE, T_TOUCH, T_DEMAND, T_AHEAD, NT };
static const char *const tname[NT] = {"populate", "touch", "demand", "ahead"};

typedef struct kind {
    const char *name;
    const char *what;
    dsmpool_huge huge;
    unsigned mfd_flags;
    size_t page;
} kind;

static const kind kinds[] = {
    {"4k", "shmem, 4 KiB pages", DSMPOOL_HUGE_OFF, 0, 4096},
    {"thp", "shmem, transparent huge pages (MADV_HUGEPAGE)", DSMPOOL_HUGE_TRANSPARENT, 0, 2 * MIB},
    {"2m", "hugetlb, 2 MiB pages", DSMPOOL_HUGE_ON, MFD_HUGETLB, 2 * MIB},
};

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* the q-quantile (nearest rank) of n sorted values */
static double quantile(const double *v, size_t n, double q) {
    size_t i = (size_t)(q * (double)n);
    return v[i < n ? i : n - 1];
}

/* One raw sample: a fresh memfd of the kind, made resident by populate or
 * by touch; microseconds, or -1 (errno set). */
static double raw_sample(const kind *k, size_t bytes, bool touch) {
    int fd = memfd_create("dsmpool-refill-bench", MFD_CLOEXEC | k->mfd_flags);
    if (fd < 0) return -1;
    double t = -1;
    if (ftruncate(fd, (off_t)bytes) == 0) {
        char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            if (k->huge == DSMPOOL_HUGE_TRANSPARENT) madvise(p, bytes, MADV_HUGEPAGE);
            double t0 = now_us();
            int r = 0;
            if (touch)
                for (size_t o = 0; o < bytes; o += k->page) ((volatile char *)p)[o] = 1;
            else
                r = madvise(p, bytes, MADV_POPULATE_WRITE);
            if (r == 0) t = now_us() - t0;
            munmap(p, bytes);
        }
    }
    int e = errno;
    close(fd);
    errno = e;
    return t;
}

/* One pool sample: trimmed to nothing first (not timed), then the block
 * made resident by an allocation (demand) or a prefault (ahead). */
static double pool_sample(dsmpool *pool, size_t bytes, bool ahead, uint64_t *ondemand) {
    size_t released = 0, made = 0;
    if (dsmpool_trim(pool, 0, &released) != 0) return -1;
    double t0 = now_us(), t;
    if (ahead) {
        if (dsmpool_prefault_free(pool, bytes, &made) != 0 || made < bytes) return -1;
        return now_us() - t0;
    }
    uint64_t blk;
    if (dp_pool_alloc(pool, (unsigned)__builtin_ctzll(bytes / DP_FRAME_SIZE), &blk) != 0) return -1; /* a power of two */
    t = now_us() - t0;
    /* the block was made resident by this allocation: counted */
    dsmpool_stats st;
    if (dsmpool_get_stats(pool, &st) != 0 || st.refills_on_demand != *ondemand + 1) {
        dp_pool_free(pool, blk);
        fprintf(stderr, "refill: an allocation of %zu MiB did not refill on demand\n", bytes / MIB);
        return -1;
    }
    *ondemand = st.refills_on_demand;
    dp_pool_free(pool, blk);
    return t;
}

static void report(const kind *k, size_t bytes, double *v[NT], size_t n) {
    double mib = (double)bytes / MIB, med[NT];
    for (int t = 0; t < NT; t++) {
        qsort(v[t], n, sizeof(double), cmp_double);
        double p50 = quantile(v[t], n, 0.5) / mib, p99 = quantile(v[t], n, 0.99) / mib,
               p999 = quantile(v[t], n, 0.999) / mib;
        med[t] = p50;
        char p999s[32];
        if (n >= 10000) snprintf(p999s, sizeof p999s, "%.1f", p999);
        else snprintf(p999s, sizeof p999s, "-");
        double gbs = 1048.576 / p50; /* 2^20 bytes / 1e9 over p50 microseconds / 1e6 */
        printf("%-4s %6.0f MiB  %-9s %7zu %9.1f %9.1f %9s %8.2f %8.2fx\n", k->name, mib, tname[t], n, p50,
               p99, p999s, gbs, med[T_POPULATE] > 0 && t > 0 ? med[T_POPULATE] / p50 : 1.0);
        printf("csv,%s,%.0f,%s,%zu,%.2f,%.2f,%s,%.3f\n", k->name, mib, tname[t], n, p50, p99, p999s, gbs);
    }
}

/* dsmpool_prefault_free of rel bytes, then dsmpool_trim(pool, 0) timed:
 * milliseconds per GiB given back, median of reps. */
static int release_rate(dsmpool *pool, size_t rel, int reps, double *ms_per_gib) {
    double *v = calloc((size_t)reps, sizeof *v);
    if (!v) return -1;
    int ok = 0;
    for (int i = 0; i < reps; i++) {
        size_t made = 0, released = 0;
        if (dsmpool_trim(pool, 0, &released) != 0 || dsmpool_prefault_free(pool, rel, &made) != 0 || made < rel)
            break;
        double t0 = now_us();
        if (dsmpool_trim(pool, 0, &released) != 0 || released < rel) break;
        v[ok++] = (now_us() - t0) / 1e3 / ((double)released / (1 << 30));
    }
    if (ok == reps) {
        qsort(v, (size_t)ok, sizeof *v, cmp_double);
        *ms_per_gib = v[ok / 2];
    }
    free(v);
    return ok == reps ? 0 : -1;
}

int main(int argc, char **argv) {
    const char *pages = "4k,thp,2m", *sizes = "2,32";
    size_t samples = 10000, pool_mib = 1024, rel_mib = 512;
    int reps = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--pages") && i + 1 < argc) pages = argv[++i];
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) sizes = argv[++i];
        else if (!strcmp(argv[i], "--samples") && i + 1 < argc) samples = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--pool") && i + 1 < argc) pool_mib = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--release-mib") && i + 1 < argc) rel_mib = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--pages 4k,thp,2m] [--sizes MiB,...] [--samples N] [--pool MiB] "
                    "[--release-mib M] [--reps R]\n",
                    argv[0]);
            return 2;
        }
    }
    if (samples < 1 || reps < 1 || rel_mib * MIB > pool_mib * MIB) {
        fprintf(stderr, "refill: --samples and --reps at least 1, --release-mib at most --pool\n");
        return 2;
    }
    printf("refill: microseconds per MiB made resident (p50 p99 p99.9), GB/s at the median, and the "
           "median's speed against a raw MADV_POPULATE_WRITE of a fresh memfd of the same pages\n");
    printf("kind block         timing      n   p50 us/MiB   p99  p99.9     GB/s  vs populate\n");
    int failed = 0;
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        const kind *k = &kinds[ki];
        char want[64];
        snprintf(want, sizeof want, ",%s,", pages);
        char key[16];
        snprintf(key, sizeof key, ",%s,", k->name);
        if (!strstr(want, key)) continue;
        dsmpool_config cfg;
        dsmpool_config_init(&cfg);
        cfg.size = pool_mib * MIB;
        cfg.backing = DSMPOOL_BACKING_MEMFD;
        cfg.huge_pages = k->huge;
        cfg.idle_release_ms = 60000; /* elastic; no maintainer runs */
        dsmpool *pool;
        if (dsmpool_create(&cfg, &pool) != 0) {
            printf("skip: %s (%s): the pool: %s\n", k->name, k->what, dsmpool_last_error());
            continue;
        }
        dsmpool_stats st;
        if (k->huge == DSMPOOL_HUGE_TRANSPARENT && (dsmpool_get_stats(pool, &st) != 0 || !st.thp_advised)) {
            printf("skip: thp: the pool could not advise transparent huge pages\n");
            dsmpool_destroy(pool);
            continue;
        }
        if (raw_sample(k, 2 * MIB, false) < 0) {
            printf("skip: %s (%s): a raw memfd cannot be populated: %s\n", k->name, k->what, strerror(errno));
            dsmpool_destroy(pool);
            continue;
        }
        uint64_t ondemand = 0;
        if (dsmpool_get_stats(pool, &st) == 0) ondemand = st.refills_on_demand;
        char buf[64];
        snprintf(buf, sizeof buf, "%s", sizes);
        for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
            size_t bytes = strtoull(s, NULL, 10) * MIB;
            if (bytes < 2 * MIB || bytes > pool_mib * MIB / 2 || (bytes & (bytes - 1))) {
                printf("skip: %s: a block of %s MiB (a power of two, 2 MiB up to half the pool)\n", k->name, s);
                continue;
            }
            size_t n = samples * 2 * MIB / bytes;
            if (n < 200) n = 200;
            double *v[NT];
            for (int t = 0; t < NT; t++) v[t] = calloc(n, sizeof(double));
            size_t got = 0;
            for (; got < n; got++) {
                double x[NT] = {raw_sample(k, bytes, false), raw_sample(k, bytes, true),
                                pool_sample(pool, bytes, false, &ondemand), pool_sample(pool, bytes, true, &ondemand)};
                int bad = -1;
                for (int t = 0; t < NT; t++)
                    if (x[t] < 0) bad = t;
                if (bad >= 0) {
                    printf("FAILED: %s %zu MiB: %s: %s\n", k->name, bytes / MIB, tname[bad],
                           bad >= T_DEMAND ? dsmpool_last_error() : strerror(errno));
                    failed = 1;
                    break;
                }
                for (int t = 0; t < NT; t++) v[t][got] = x[t];
            }
            if (got == n) report(k, bytes, v, n);
            for (int t = 0; t < NT; t++) free(v[t]);
        }
        double msg;
        if (release_rate(pool, rel_mib * MIB, reps, &msg) == 0) {
            printf("%-4s release: dsmpool_trim gives back %zu MiB at %.1f ms per GiB (median of %d; one mapper)\n",
                   k->name, rel_mib, msg, reps);
            printf("csv,%s,release,%zu,%.2f\n", k->name, rel_mib, msg);
        } else {
            printf("FAILED: %s release: %s\n", k->name, dsmpool_last_error());
            failed = 1;
        }
        dsmpool_destroy(pool);
    }
    return failed;
}
