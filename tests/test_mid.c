/*
 * test_mid.c -- mid sizes (area_alloc.c [mid sizes]): above 4 KiB, where whole pages
 * waste no more than the size class, an allocation takes an exact block of
 * pages (the pool's, shared among sizes and areas under a directory word
 * per page) and falls back to its class when the pool has none or the
 * registry's first half is full; powers of two and
 * DSMPOOL_AREA_MID_CHUNKS keep chunks.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <dsmpool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dp_internal.h"
#include "testutil.h"


static size_t large_blocks(dsmpool_area *a) {
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    return st.large_blocks;
}

/* Which sizes take a block (usable: whole pages) and which a chunk (usable:
 * the class), and the flag that keeps them all in classes. Each size comes
 * before any chunk of its class is held (one would serve it first). */
Test(mid, the_cheaper_of_pages_and_class_serves) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    static const struct { size_t size, usable; bool block; } c[] = {
        {4096, 4096, false},       /* not above 4 KiB */
        {5000, 5120, false},       /* class 5 KiB < 2 pages */
        {7500, 7680, false},       /* class 7.5 KiB < 2 pages */
        {7800, 8192, true},        /* 2 pages = class 8 KiB */
        {8192, 8192, false},       /* a power of two: its chunk */
        {11000, 12288, true},      /* 3 pages = class 12 KiB */
        {13000, 14336, false},     /* class 14 KiB < 4 pages */
        {16384, 16384, false},
        {20000, 20480, true},
        {32767, 32768, true},
        {32768, 32768, false},     /* the hash join's chunk */
        {33000, 36864, true},      /* 9 pages < class 40 KiB */
        {100000, 102400, true},
        {262143, 262144, true},    /* (before 256 KiB: a free chunk of the class would serve) */
        {262144, 262144, false},
        {262145, 266240, true},    /* large */
    };
    for (int flags = 0; flags < 2; flags++) {
        dsmpool_area *a = test_area(p, flags ? DSMPOOL_AREA_MID_CHUNKS : 0);
        for (unsigned i = 0; i < sizeof c / sizeof *c; i++) {
            size_t before = large_blocks(a);
            dsmpool_ptr x;
            cr_assert_eq(dsmpool_area_alloc(a, c[i].size, 0, &x), 0, "%zu: %s", c[i].size, dsmpool_last_error());
            bool block = c[i].block && (!flags || c[i].size > 256 * KIB);
            size_t us = dsmpool_area_usable_size(a, x);
            if (block) {
                cr_expect_eq(us, c[i].usable, "%zu (flags %d): usable %zu", c[i].size, flags, us);
                cr_expect_eq(large_blocks(a), before + 1, "%zu (flags %d): a block", c[i].size, flags);
                cr_expect_eq(x % 4096, 0);
            } else {
                cr_expect_geq(us, c[i].size);
                cr_expect_eq(large_blocks(a), before, "%zu (flags %d): a chunk", c[i].size, flags);
            }
            memset(dsmpool_area_addr(a, x), 0x5a, c[i].size);
            cr_expect_eq(dsmpool_area_ptr_of(a, (char *)dsmpool_area_addr(a, x) + c[i].size - 1), x + c[i].size - 1);
            if (block) /* (the next chunk of a span is told apart from a live one only checked) */
                cr_expect_eq(dsmpool_area_ptr_of(a, (char *)dsmpool_area_addr(a, x) + us), 0,
                             "%zu: one past the usable bytes is nobody's", c[i].size);
            cr_assert_eq(dsmpool_area_free(a, x), 0);
            cr_expect_eq(dsmpool_area_free(a, x), -EINVAL, "%zu: double free", c[i].size);
        }
        test_check_ok(p);
        cr_assert_eq(dsmpool_area_destroy(a), 0);
    }
    cr_expect_eq(dsmpool_area_create(p, 1u << 3, &(dsmpool_area *){0}), -EINVAL, "unknown flag");
    dsmpool_detach(p);
}

/* Blocks exact to the page share 64 KiB with each other and with another
 * area's blocks: the directory names each page, so every block is found,
 * freed and refused by the right area, whatever its neighbours. */
Test(mid, neighbours_in_one_64k_granule_of_two_areas) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a[2] = {test_area(p, 0), test_area(p, 0)};
    enum { N = 400 };
    dsmpool_ptr x[N];
    size_t sz[N];
    uint64_t rng = test_seed();
    for (int i = 0; i < N; i++) { /* 1..7 pages and a bit less: 3 of 4 of them blocks */
        sz[i] = 4096 * (1 + test_rand(&rng) % 7) + 4096 - 1 - test_rand(&rng) % 200;
        cr_assert_eq(dsmpool_area_alloc(a[i & 1], sz[i], 0, &x[i]), 0, "%s", dsmpool_last_error());
        memset(dsmpool_area_addr(a[i & 1], x[i]), i & 0xff, sz[i]);
    }
    int shared = 0, cross = 0;
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            if (x[i] >> 16 == x[j] >> 16 && x[i] % 4096 == 0 && x[j] % 4096 == 0) {
                shared++;
                cross += (i & 1) != (j & 1);
            }
    cr_expect_gt(shared, 0, "no two blocks in one 64 KiB granule: the test shows nothing");
    cr_expect_gt(cross, 0, "no two areas' blocks in one 64 KiB granule: the test shows nothing");
    test_check_ok(p);
    for (int i = 0; i < N; i++) {
        dsmpool_area *mine = a[i & 1], *other = a[!(i & 1)];
        char *m = dsmpool_area_addr(mine, x[i]);
        cr_assert_eq(m[0], (char)(i & 0xff), "allocation %d overwritten", i);
        cr_assert_eq(m[sz[i] - 1], (char)(i & 0xff), "allocation %d overwritten at its end", i);
        cr_expect_eq(dsmpool_area_ptr_of(mine, m + sz[i] / 2), x[i] + sz[i] / 2);
        cr_expect_eq(dsmpool_area_ptr_of(other, m), 0, "another area's block");
        cr_expect_eq(dsmpool_area_usable_size(other, x[i]), 0);
        cr_expect_eq(dsmpool_area_free(other, x[i]), -EINVAL, "freed through another area");
    }
    for (int i = N - 1; i >= 0; i -= 2) cr_assert_eq(dsmpool_area_free(a[i & 1], x[i]), 0);
    test_check_ok(p);
    for (int i = 0; i < N; i += 2) {
        char *m = dsmpool_area_addr(a[0], x[i]);
        cr_assert_eq(m[sz[i] - 1], (char)(i & 0xff), "allocation %d overwritten by a neighbour's free", i);
        cr_assert_eq(dsmpool_area_free(a[0], x[i]), 0);
    }
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_destroy(a[0]), 0);
    cr_assert_eq(dsmpool_area_destroy(a[1]), 0);
    cr_expect_eq(test_pool_free(p), free0, "everything back");
    dsmpool_detach(p);
}

/* A pool with no block for it: the mid size takes its class, which goes to
 * an OS span as every class does (one OS segment per 2 MiB span, not one
 * per allocation), or fails cleanly without the fallback. */
Test(mid, a_full_pool_gives_the_class) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_area *a = test_area(p, 0), *nf = test_area(p, DSMPOOL_AREA_NO_FALLBACK);
    dsmpool_ptr keep[2]; /* a registry page and a live chunk each, so no span of theirs goes back */
    cr_assert_eq(dsmpool_area_alloc(a, 100, 0, &keep[0]), 0);
    cr_assert_eq(dsmpool_area_alloc(nf, 100, 0, &keep[1]), 0);
    dsmpool_seg *s;
    int n = 0;
    for (size_t sz = 2 * MIB; sz >= 4 * KIB; sz /= 2) /* every free page, largest blocks first */
        while (dsmpool_seg_create(p, sz, DSMPOOL_SEG_NO_FALLBACK, &s) == 0) n++; /* they stay until detach */
    cr_assert_gt(n, 0);
    cr_assert_lt(test_pool_free(p), 64 * KIB, "the pool did not fill: %zu bytes free after %d segments",
                 test_pool_free(p), n); /* (a segment needs a record page too: a page may stay) */
    dsmpool_ptr x[8];
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(dsmpool_area_alloc(a, 33000, 0, &x[i]), 0, "%s", dsmpool_last_error());
        cr_expect_eq(dsmpool_area_usable_size(a, x[i]), 40 * KIB, "the 40 KiB class, not 9 pages");
        cr_expect(x[i] & DSMPOOL_PTR_OS_BIT, "from an OS span");
        memset(dsmpool_area_addr(a, x[i]), i, 33000);
    }
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.large_blocks, 0);
    cr_expect_eq(st.fallback_segments, 1, "one OS span for the eight");
    dsmpool_ptr y;
    cr_expect_eq(dsmpool_area_alloc(nf, 33000, 0, &y), -ENOMEM, "no fallback: refused");
    for (int i = 0; i < 8; i++) cr_assert_eq(dsmpool_area_free(a, x[i]), 0);
    cr_assert_eq(dsmpool_area_free(a, keep[0]), 0);
    cr_assert_eq(dsmpool_area_free(nf, keep[1]), 0);
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    cr_assert_eq(dsmpool_area_destroy(nf), 0);
    dsmpool_detach(p);
}

/* Mid-size blocks use only the registry's first half (65536 entries): past
 * that the class serves, and a freed entry serves a block again. Claims
 * that find free entries below their hint reuse them: no registry page is
 * added while one has room. */
Test(mid, registry_half_then_the_class, .timeout = 120) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 2048 * MIB); /* untouched but for the tables */
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, 0);
    enum { HALF = 65536 };
    dsmpool_ptr *x = calloc(HALF, sizeof *x);
    cr_assert_not_null(x);
    for (int i = 0; i < HALF; i++) /* 3 pages each (a 16 KiB block less a page: 1 GiB of blocks) */
        cr_assert_eq(dsmpool_area_alloc(a, 12000, 0, &x[i]), 0, "%d: %s", i, dsmpool_last_error());
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.large_blocks, HALF, "%zu", st.large_blocks);
    cr_expect_eq(st.registry_bytes, HALF / 128 * 4096, "%zu", st.registry_bytes);
    dsmpool_ptr c;
    cr_assert_eq(dsmpool_area_alloc(a, 12000, 0, &c), 0, "%s", dsmpool_last_error());
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.large_blocks, HALF, "the registry's first half is full: a chunk of the class");
    cr_expect_eq(st.spans, 1);
    cr_assert_eq(dsmpool_area_free(a, x[5]), 0);
    cr_assert_eq(dsmpool_area_free(a, x[HALF - 7]), 0);
    dsmpool_ptr b[2]; /* 5 pages: a class (20 KiB) of which the area holds no chunk */
    for (int i = 0; i < 2; i++) cr_assert_eq(dsmpool_area_alloc(a, 20000, 0, &b[i]), 0);
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.large_blocks, HALF, "freed entries serve blocks again");
    cr_expect_eq(dsmpool_area_usable_size(a, b[0]), 20 * KIB);
    cr_expect_eq(st.registry_bytes, HALF / 128 * 4096 + 4096, "the span's entry took one page more");
    x[5] = b[0];
    x[HALF - 7] = b[1];
    for (int i = 0; i < HALF; i++) cr_assert_eq(dsmpool_area_free(a, x[i]), 0);
    cr_assert_eq(dsmpool_area_free(a, c), 0);
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    cr_expect_eq(test_pool_free(p), free0);
    free(x);
    dsmpool_detach(p);
}

/* Four processes allocate and free sizes from 16 B to 300 KiB in one area
 * at random (mid sizes, their neighbours' tails and chunks all mixed), each
 * allocation filled with its owner's pattern and checked before its free:
 * nobody's memory is anybody else's. Then check() is clean and destroy
 * gives everything back. */
Test(mid, four_processes_churn_one_area, .timeout = 120) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_MEMFD, NULL, 256 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, 0);
    enum { PROCS = 4, WS = 48 };
    long ops = (long)test_seconds(1.0) * 20000;
    pid_t kid[PROCS];
    for (int k = 0; k < PROCS; k++) {
        if ((kid[k] = fork()) == 0) {
            uint64_t rng = test_seed() + (uint64_t)k * 7919;
            dsmpool_ptr v[WS] = {0};
            size_t sz[WS] = {0};
            uint64_t tag[WS] = {0};
            for (long op = 0; op < ops; op++) {
                int i = (int)(test_rand(&rng) % WS);
                if (v[i]) {
                    uint64_t *m = dsmpool_area_addr(a, v[i]);
                    size_t n = sz[i] / 8;
                    for (size_t j = 0; j < n; j += 509)
                        if (m[j] != tag[i] + j) _exit(10);
                    if (n && m[n - 1] != tag[i] + n - 1) _exit(11);
                    if (dsmpool_area_free(a, v[i]) != 0) _exit(12);
                    v[i] = 0;
                    continue;
                }
                sz[i] = (size_t)16 << (test_rand(&rng) % 15); /* 16 B .. 256 KiB, spread in the octave */
                sz[i] += test_rand(&rng) % sz[i];
                if (sz[i] > 300 * KIB) sz[i] = 300 * KIB;
                if (dsmpool_area_alloc(a, sz[i], 0, &v[i]) != 0) _exit(13);
                if (dsmpool_area_usable_size(a, v[i]) < sz[i]) _exit(14);
                tag[i] = test_rand(&rng) << 16;
                uint64_t *m = dsmpool_area_addr(a, v[i]);
                size_t n = sz[i] / 8;
                for (size_t j = 0; j < n; j++) m[j] = tag[i] + j;
            }
            for (int i = 0; i < WS; i++)
                if (v[i] && dsmpool_area_free(a, v[i]) != 0) _exit(15);
            dsmpool_detach(p);
            _exit(0);
        }
        cr_assert_gt(kid[k], 0);
    }
    for (int k = 0; k < PROCS; k++) cr_expect_eq(test_wait(kid[k]), 0, "process %d", k);
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    cr_expect_eq(test_pool_free(p), free0, "everything back");
    dsmpool_detach(p);
}

/* Found in review: a zeroed aligned allocation cleared its class size (24
 * KiB for 20000 B at 8 KiB alignment) while its block kept only the size's
 * pages (20 KiB): the page past them, given back to the pool, was zeroed
 * under whoever got it. Above 256 KiB the same with the alignment (1 MiB
 * cleared for 300000 B). The byte past the kept pages, set before through
 * the whole power of two, must survive. The thread is pinned: the same
 * block comes back only from the same CPU's reservation. */
Test(mid, zeroed_aligned_blocks_clear_only_their_pages) {
    test_pin_here(); /* reservations are per CPU: a block expected back stays on one */
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    static const struct { size_t size, align, pow2; } c[] = {
        {20000, 8 * KIB, 32 * KIB},
        {300000, 1 * MIB, 1 * MIB},
    };
    for (unsigned i = 0; i < 2; i++) {
        /* the power of two whole, as a block of its own, filled, freed */
        dsmpool_ptr w, x;
        cr_assert_eq(dsmpool_area_alloc(a, c[i].pow2 - 4096 + 1, 0, &w), 0, "%s", dsmpool_last_error());
        cr_assert_eq(dsmpool_area_usable_size(a, w), c[i].pow2, "the whole power of two");
        memset(dsmpool_area_addr(a, w), 0xaa, c[i].pow2);
        cr_assert_eq(dsmpool_area_free(a, w), 0);
        cr_assert_eq(dsmpool_area_alloc_aligned(a, c[i].size, c[i].align, DSMPOOL_ALLOC_ZERO, &x), 0, "%s",
                     dsmpool_last_error());
        cr_assert_eq(x, w, "the same block again (the test needs it)");
        size_t us = dsmpool_area_usable_size(a, x);
        cr_assert_eq(us, (c[i].size + 4095) / 4096 * 4096);
        unsigned char *m = dsmpool_area_addr(a, x);
        for (size_t k = 0; k < us; k += 64) cr_assert_eq(m[k], 0, "%zu: byte %zu not zeroed", c[i].size, k);
        cr_expect_eq(m[us], 0xaa, "%zu aligned %zu: the page past the block was zeroed", c[i].size, c[i].align);
        cr_assert_eq(dsmpool_area_free(a, x), 0);
    }
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    dsmpool_detach(p);
}

/* Found in review: with thousands of live blocks of a few pages, each
 * allocation after a free searched the allocator's tree for a run (the
 * CPU's reservation had none left; 3.4 us a free+alloc with 30000 live),
 * and took a fresh leaf. Now the run an exact block frees becomes the CPU's
 * reservation for its order when that has none: after the reservation's
 * own runs are used up, blocks of the size land in runs just freed and the
 * area's extent stops growing. The thread is pinned (reservations are per
 * CPU). */
Test(mid, freed_runs_serve_the_next_blocks_of_their_order) {
    test_pin_here(); /* reservations are per CPU: a block expected back stays on one */
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 256 * MIB);
    dsmpool_area *a = test_area(p, 0);
    enum { N = 2000, WARM = 16, STEPS = 200 };
    static dsmpool_ptr v[N];
    for (int i = 0; i < N; i++) cr_assert_eq(dsmpool_area_alloc(a, 12000, 0, &v[i]), 0); /* 3 of 4 pages */
    uint64_t rng = test_seed();
    dsmpool_ptr top = 0;
    for (int k = 0; k < WARM + STEPS; k++) {
        if (k == WARM) /* the reservation's own runs are used up by now */
            for (int i = 0; i < N; i++) top = v[i] > top ? v[i] : top;
        int i = (int)(test_rand(&rng) % N);
        cr_assert_eq(dsmpool_area_free(a, v[i]), 0);
        cr_assert_eq(dsmpool_area_alloc(a, 12000, 0, &v[i]), 0);
        if (k >= WARM)
            cr_expect_leq(v[i], top, "step %d: a fresh run (%016llx) while freed ones waited below %016llx", k,
                          (unsigned long long)v[i], (unsigned long long)top);
    }
    for (int i = 0; i < N; i++) cr_assert_eq(dsmpool_area_free(a, v[i]), 0);
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    dsmpool_detach(p);
}
