/*
 * efficiency -- how much memory each allocator holds for what was asked:
 * dsmpool areas and segments against jemalloc, mimalloc and glibc malloc.
 *
 *   1. Overhead per size distribution: allocate --mib MiB (default 256) in
 *      sizes drawn uniformly from a range, touch each, then measure the
 *      allocator's bytes in use: dsmpool the area's held bytes (spans and
 *      large blocks), jemalloc stats.active, mimalloc its committed bytes
 *      (mi_process_info), glibc mallinfo2 (in use + mmapped). Overhead is
 *      used / requested - 1. Segments: dsmpool_seg_create of 1..64 MiB
 *      against the bytes asked (PostgreSQL's DSM is exact to the page).
 *      Then where the overhead goes: each allocator's own usable sizes
 *      (dsmpool_area_usable_size, sallocx, mi_usable_size,
 *      malloc_usable_size) summed give its size classes' rounding,
 *      usable / requested - 1; the rest, (used - usable) / requested, is
 *      what lies beyond the classes (partly used spans or slabs, span
 *      tails, headers). The two add up to the overhead.
 *   2. Churn: allocate and free at random (sizes 16 B..64 KiB, log-uniform)
 *      with the live set bounded (--live MiB, default 64); peak bytes used
 *      over peak live bytes.
 *   3. A fresh area: the pool bytes it holds after 1, 10 and 100
 *      allocations of 100 B, its control block, cache record and registry
 *      pages included (PostgreSQL creates many small DSA areas).
 *
 * Every (backend, row) runs in a fresh forked process, so the numbers are
 * the row's alone. Prints a table with the ratio dsmpool / jemalloc per row
 * and the table of where the overhead goes, and writes --out
 * DIR/efficiency.csv (default bench/results), DIR/efficiency-split.csv (the
 * second table) and a plot with gnuplot (bench/plot-efficiency.gp) where
 * there is one.
 *
 * Options: --mib N  --live N  --ops N  --seed N  --out DIR
 */
#include <dsmpool.h>
#include <jemalloc/jemalloc.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifndef EF_NO_MIMALLOC
#include <mimalloc.h>
#endif

#include "bench_util.h"

static glibc_fns G; /* glibc's malloc and mallinfo2 (bench_util.h) */

#define MIB (1ull << 20)

enum { B_DSMPOOL, B_JEMALLOC, B_MIMALLOC, B_GLIBC, NB };
static const char *bname[NB] = {"dsmpool", "jemalloc", "mimalloc", "glibc"};

typedef struct row {
    const char *name;
    size_t lo, hi; /* uniform in [lo, hi]; segments: MiB */
    bool segments;
} row;

static const row rows[] = {
    {"16..128 B", 16, 128, false},
    {"100..1000 B", 100, 1000, false},
    {"1000..10000 B", 1000, 10000, false},
    {"10000..100000 B", 10000, 100000, false},
    {"33000 B, every one", 33000, 33000, false},
    {"100000..2000000 B", 100000, 2000000, false},
    {"segments, 1..64 MiB", 1, 64, true},
};
#define NROWS (sizeof rows / sizeof *rows)

static uint64_t rnd(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- one backend in this process ------------------------------------------ */

static struct {
    int b;
    dsmpool *pool;
    dsmpool_area *area;
} B;

static int b_setup(int b, size_t pool_bytes) {
    B.b = b;
    if (b != B_DSMPOOL) return 0;
    dsmpool_config c;
    dsmpool_config_init(&c);
    c.size = pool_bytes;
    c.prefault = false;
    c.max_segments = 4096;
    if (dsmpool_create(&c, &B.pool) != 0 || dsmpool_area_create(B.pool, 0, &B.area) != 0) {
        fprintf(stderr, "efficiency: %s\n", dsmpool_last_error());
        return -1;
    }
    return 0;
}

/* what the allocator holds now, in bytes */
static size_t b_used(void) {
    switch (B.b) {
    case B_DSMPOOL: {
        dsmpool_area_stats st;
        if (dsmpool_area_get_stats(B.area, &st) != 0) return 0;
        return st.held;
    }
    case B_JEMALLOC: {
        uint64_t epoch = 1;
        size_t sz = sizeof epoch, active = 0, asz = sizeof active;
        mallctl("epoch", &epoch, &sz, &epoch, sz);
        mallctl("stats.active", &active, &asz, NULL, 0);
        return active;
    }
#ifndef EF_NO_MIMALLOC
    case B_MIMALLOC: {
        size_t elapsed, user, sys, rss, peak_rss, commit, peak_commit, faults;
        mi_process_info(&elapsed, &user, &sys, &rss, &peak_rss, &commit, &peak_commit, &faults);
        return commit;
    }
#endif
    case B_GLIBC: {
        struct mallinfo2 mi = G.mallinfo2();
        return mi.uordblks + mi.hblkhd;
    }
    }
    return 0;
}

typedef struct obj {
    void *m;
    dsmpool_ptr p;
    size_t size;
} obj;

/* the bookkeeping arrays come from mmap, so no allocator measured holds them */
static obj *objs_new(size_t n) {
    void *m = mmap(NULL, n * sizeof(obj), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}
static void objs_free(obj *v, size_t n) { munmap(v, n * sizeof(obj)); }

static int b_alloc(obj *o, size_t size) {
    o->size = size;
    switch (B.b) {
    case B_DSMPOOL:
        if (dsmpool_area_alloc(B.area, size, 0, &o->p) != 0) return -1;
        o->m = dsmpool_area_addr(B.area, o->p);
        break;
    case B_JEMALLOC: o->m = mallocx(size, 0); break;
#ifndef EF_NO_MIMALLOC
    case B_MIMALLOC: o->m = mi_malloc(size); break;
#endif
    default: o->m = G.malloc(size);
    }
    if (!o->m) return -1;
    *(volatile char *)o->m = 1;
    return 0;
}

/* the usable size the allocator gives this allocation (its size class) */
static size_t b_usable(const obj *o) {
    switch (B.b) {
    case B_DSMPOOL: return dsmpool_area_usable_size(B.area, o->p);
    case B_JEMALLOC: return sallocx(o->m, 0);
#ifndef EF_NO_MIMALLOC
    case B_MIMALLOC: return mi_usable_size(o->m);
#endif
    default: return G.usable ? G.usable(o->m) : 0;
    }
}

static void b_free(obj *o) {
    switch (B.b) {
    case B_DSMPOOL: dsmpool_area_free(B.area, o->p); break;
    case B_JEMALLOC: dallocx(o->m, 0); break;
#ifndef EF_NO_MIMALLOC
    case B_MIMALLOC: mi_free(o->m); break;
#endif
    default: G.free(o->m);
    }
}

/* ---- the measurements (in a child) ------------------------------------------ */

typedef struct answer {
    double overhead; /* used / requested - 1; churn: peak used / peak live */
    size_t used, requested;
    size_t usable; /* rows: the allocator's usable bytes summed (0: cannot say) */
    size_t fresh[3];
    int err;
} answer;

static void measure_row(const row *r, size_t target, uint64_t seed, answer *a) {
    if (r->segments) { /* dsmpool only */
        size_t asked = 0, got = 0;
        dsmpool_seg *segs[4096];
        int n = 0;
        while (asked < target && n < 4096) {
            size_t sz = (r->lo + rnd(&seed) % (r->hi - r->lo + 1)) * MIB - rnd(&seed) % MIB;
            if (dsmpool_seg_create(B.pool, sz, DSMPOOL_SEG_NO_FALLBACK, &segs[n]) != 0) break;
            asked += sz;
            got += dsmpool_seg_size(segs[n++]);
        }
        a->requested = asked;
        a->used = got;
        a->overhead = asked ? (double)got / (double)asked - 1 : 0;
        return;
    }
    size_t base = b_used(), asked = 0, cap = 1 << 22, n = 0;
    obj *v = objs_new(cap);
    if (!v) {
        a->err = 1;
        return;
    }
    while (asked < target && n < cap) {
        size_t sz = r->lo + rnd(&seed) % (r->hi - r->lo + 1);
        if (b_alloc(&v[n], sz) != 0) {
            a->err = 2;
            break;
        }
        asked += sz;
        n++;
    }
    size_t used = b_used() - base;
    a->requested = asked;
    a->used = used;
    a->overhead = (double)used / (double)asked - 1;
    a->usable = 0;
    for (size_t i = 0; i < n; i++) {
        size_t u = b_usable(&v[i]);
        if (!u) { /* an allocator that cannot say */
            a->usable = 0;
            break;
        }
        a->usable += u;
    }
    for (size_t i = 0; i < n; i++) b_free(&v[i]);
    objs_free(v, cap);
}

static void measure_churn(size_t live_cap, long ops, uint64_t seed, answer *a) {
    size_t cap = 1 << 22, n = 0, live = 0, peak_live = 0, peak_used = 0, base = b_used();
    obj *v = objs_new(cap);
    if (!v) {
        a->err = 1;
        return;
    }
    for (long k = 0; k < ops; k++) {
        /* grow towards the cap (3 allocations to 1 free), then hover under it */
        bool alloc = n == 0 || (live < live_cap && n < cap && (rnd(&seed) & 3) != 0);
        if (alloc) {
            size_t sz = (size_t)16 << (rnd(&seed) % 12); /* 16 B .. 32 KiB, then spread in the octave */
            sz += rnd(&seed) % sz;
            if (b_alloc(&v[n], sz) != 0) {
                a->err = 2;
                break;
            }
            live += v[n++].size;
        } else {
            size_t i = rnd(&seed) % n;
            live -= v[i].size;
            b_free(&v[i]);
            v[i] = v[--n];
        }
        if (live > peak_live) peak_live = live;
        if ((k & 1023) == 0) {
            size_t u = b_used() - base;
            if (u > peak_used) peak_used = u;
        }
    }
    a->requested = peak_live;
    a->used = peak_used;
    a->overhead = peak_live ? (double)peak_used / (double)peak_live : 0;
    for (size_t i = 0; i < n; i++) b_free(&v[i]);
    objs_free(v, cap);
}

static void measure_fresh(answer *a) {
    static const int counts[3] = {1, 10, 100};
    for (int i = 0; i < 3; i++) {
        dsmpool_area *ar;
        if (dsmpool_area_create(B.pool, 0, &ar) != 0) {
            a->err = 3;
            return;
        }
        dsmpool_ptr p;
        for (int k = 0; k < counts[i]; k++)
            if (dsmpool_area_alloc(ar, 100, 0, &p) != 0) a->err = 4;
        dsmpool_area_stats st;
        dsmpool_area_get_stats(ar, &st);
        a->fresh[i] = st.held + st.control_bytes + st.registry_bytes; /* + its control block and pages */
        dsmpool_area_destroy(ar);
    }
}

enum { M_ROW, M_CHURN, M_FRESH };

static int run(int b, int what, const row *r, size_t target, size_t live, long ops, uint64_t seed, answer *out) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        answer a;
        memset(&a, 0, sizeof a);
        if (b_setup(b, 4 * target + 64 * MIB) != 0) a.err = 9;
        else if (what == M_ROW) measure_row(r, target, seed, &a);
        else if (what == M_CHURN) measure_churn(live, ops, seed, &a);
        else measure_fresh(&a);
        (void)!write(fds[1], &a, sizeof a);
        if (B.pool) dsmpool_detach(B.pool); /* the last process: the pool and its anchor go */
        _exit(0);
    }
    close(fds[1]);
    memset(out, 0, sizeof *out);
    ssize_t n = read(fds[0], out, sizeof *out);
    close(fds[0]);
    waitpid(pid, NULL, 0);
    if (n != (ssize_t)sizeof *out) out->err = 100;
    return out->err ? -1 : 0;
}

int main(int argc, char **argv) {
    G = glibc_malloc();
    size_t mib = 256, live = 64;
    long ops = 2000000;
    uint64_t seed = 20261130;
    const char *out = "bench/results";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--live") && i + 1 < argc) live = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc) ops = atol(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--mib N] [--live N] [--ops N] [--seed N] [--out DIR]\n", argv[0]);
            return 2;
        }
    }
    if (mib < 1) mib = 1;
    bool have[NB] = {true, true, true, true};
#ifdef EF_NO_MIMALLOC
    have[B_MIMALLOC] = false;
#endif
    mkdir(out, 0755);
    char path[4096], split_path[4096];
    snprintf(path, sizeof path, "%s/efficiency.csv", out);
    snprintf(split_path, sizeof split_path, "%s/efficiency-split.csv", out);
    FILE *csv = fopen(path, "w"), *csv_split = fopen(split_path, "w");
    if (csv) fprintf(csv, "row,dsmpool,jemalloc,mimalloc,glibc\n");
    if (csv_split) fprintf(csv_split, "row,allocator,classes_pct,beyond_pct\n");
    printf("memory overhead: bytes the allocator uses / bytes requested - 1, %zu MiB requested per row\n", mib);
    printf("%-22s %10s %10s %10s %10s %14s\n", "sizes (uniform)", "dsmpool", "jemalloc", "mimalloc", "glibc",
           "dsmpool/jem");
    int fails = 0;
    answer split[NROWS][NB]; /* for the table of where the overhead goes */
    memset(split, 0, sizeof split);
    for (size_t i = 0; i < NROWS; i++) {
        double ov[NB];
        printf("%-22s", rows[i].name);
        for (int b = 0; b < NB; b++) {
            answer a;
            ov[b] = -1;
            if (!have[b] || (rows[i].segments && b != B_DSMPOOL)) {
                printf(" %10s", rows[i].segments ? (b == B_DSMPOOL ? "?" : "-") : "n/a");
                continue;
            }
            if (run(b, M_ROW, &rows[i], mib * MIB, 0, 0, seed + i, &a) != 0) {
                printf(" %10s", "FAILED");
                fails++;
                continue;
            }
            ov[b] = a.overhead;
            split[i][b] = a;
            printf(" %9.1f%%", 100 * a.overhead);
        }
        if (ov[B_DSMPOOL] >= 0 && ov[B_JEMALLOC] > 0) printf(" %13.2fx", ov[B_DSMPOOL] / ov[B_JEMALLOC]);
        else if (rows[i].segments) printf("   (PostgreSQL DSM: exact to the page)");
        printf("\n");
        if (csv) {
            fprintf(csv, "\"%s\"", rows[i].name);
            for (int b = 0; b < NB; b++) fprintf(csv, ",%.4f", ov[b] >= 0 ? 100 * ov[b] : 0.0 / 0.0);
            fprintf(csv, "\n");
        }
    }
    printf("\nwhere it goes, in %% of the bytes requested: the allocator's size classes (its usable sizes)\n"
           "+ what lies beyond them (partly used spans or slabs, span tails, headers)\n");
    printf("%-22s %14s %14s %14s %14s\n", "sizes (uniform)", "dsmpool", "jemalloc", "mimalloc", "glibc");
    for (size_t i = 0; i < NROWS; i++) {
        if (rows[i].segments) continue;
        printf("%-22s", rows[i].name);
        for (int b = 0; b < NB; b++) {
            const answer *a = &split[i][b];
            if (!a->requested || !a->usable) {
                printf(" %14s", "n/a");
                continue;
            }
            double cls = 100.0 * ((double)a->usable / (double)a->requested - 1);
            double beyond = 100.0 * ((double)a->used - (double)a->usable) / (double)a->requested;
            printf("    %5.2f %+5.2f", cls, beyond);
            if (csv_split)
                fprintf(csv_split, "\"%s\",%s,%.4f,%.4f\n", rows[i].name, bname[b], cls, beyond);
        }
        printf("\n");
    }
    if (csv_split) fclose(csv_split);

    printf("\nchurn: random alloc/free, 16 B..64 KiB, live set up to %zu MiB, %ld operations: peak used / peak "
           "live\n", live, ops);
    double ch[NB];
    for (int b = 0; b < NB; b++) {
        answer a;
        ch[b] = -1;
        if (!have[b]) continue;
        if (run(b, M_CHURN, NULL, mib * MIB, live * MIB, ops, seed, &a) != 0) {
            printf("  %-9s FAILED\n", bname[b]);
            fails++;
            continue;
        }
        ch[b] = a.overhead;
        printf("  %-9s %.3f  (peak used %zu MiB, peak live %zu MiB)\n", bname[b], a.overhead, a.used >> 20,
               a.requested >> 20);
    }
    if (ch[B_DSMPOOL] > 0 && ch[B_JEMALLOC] > 0)
        printf("  dsmpool %s: %.3f (target <= 1.25 and no worse than jemalloc's %.3f)\n",
               ch[B_DSMPOOL] <= 1.25 && ch[B_DSMPOOL] <= ch[B_JEMALLOC] ? "met" : "MISSED", ch[B_DSMPOOL],
               ch[B_JEMALLOC]);
    if (csv) {
        fprintf(csv, "\"churn (peak used / peak live)\"");
        for (int b = 0; b < NB; b++) fprintf(csv, ",%.4f", ch[b]);
        fprintf(csv, "\n");
    }
    answer f;
    printf("\na fresh area: pool bytes it holds after 100-byte allocations (target <= 256 KiB)\n");
    if (run(B_DSMPOOL, M_FRESH, NULL, 64 * MIB, 0, 0, seed, &f) == 0) {
        printf("  after 1: %zu KiB, after 10: %zu KiB, after 100: %zu KiB (%s)\n", f.fresh[0] >> 10,
               f.fresh[1] >> 10, f.fresh[2] >> 10, f.fresh[2] <= 256 * 1024 ? "met" : "MISSED");
        if (csv) fprintf(csv, "\"fresh area KiB after 1/10/100\",%zu,%zu,%zu,\n", f.fresh[0] >> 10,
                         f.fresh[1] >> 10, f.fresh[2] >> 10);
    } else {
        printf("  FAILED\n");
        fails++;
    }
    if (csv) {
        fclose(csv);
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "gnuplot -e \"dir='%s'\" bench/plot-efficiency.gp 2>/dev/null", out);
        printf("\ncsv: %s%s\n", path,
               access("bench/plot-efficiency.gp", R_OK) == 0 && system(cmd) == 0 ? "; plot: efficiency.png" : "");
    }
    return fails ? 1 : 0;
}
