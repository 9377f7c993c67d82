/*
 * test_area_calls.c -- the calls executors expect of a heap (issue 11, items
 * 4 and 6): realloc in place and moving, aligned allocations, usable sizes,
 * addresses back to relocatable pointers (pool and OS fallback memory),
 * the area's byte accounting against a reference, spilling to OS segments
 * made visible (pool stats, the fallback hook), and one error code for
 * exhaustion from segments and areas alike. Multi-process where it matters.
 */
#include <criterion/criterion.h>
#include <dsmpool.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"


static void fill(dsmpool_area *a, dsmpool_ptr p, size_t n, unsigned seed) {
    unsigned char *m = dsmpool_area_addr(a, p);
    for (size_t i = 0; i < n; i++) m[i] = (unsigned char)(seed + i * 7 + (i >> 9));
}

static bool same(dsmpool_area *a, dsmpool_ptr p, size_t n, unsigned seed) {
    unsigned char *m = dsmpool_area_addr(a, p);
    for (size_t i = 0; i < n; i++)
        if (m[i] != (unsigned char)(seed + i * 7 + (i >> 9))) return false;
    return true;
}

/* The alignment the header promises an allocation of n bytes whose usable
 * size is u: the largest power of two dividing u (at least 8: 8 for the
 * 24, 40 and 56 B classes, 16 or more for every other), at most 2 MiB --
 * n itself for a power of two n up to 1 MiB, 2 MiB above. */
static size_t promised(size_t n, size_t u) {
    size_t a = u & -u;
    if (a < 8) a = 8;
    if (a > DSMPOOL_AREA_MAX_ALIGN || n > MIB) a = DSMPOOL_AREA_MAX_ALIGN;
    return a;
}

/* Fill the pool with segments that cannot spill, so the next area span or
 * block comes from the OS. Returns how many were made. */
static unsigned fill_pool(dsmpool *p, dsmpool_seg **held, unsigned max) {
    dsmpool_stats st;
    unsigned n = 0;
    dsmpool_get_stats(p, &st);
    /* down to 64 KiB, the smallest span: holes below it stay for the
     * ledger's attachment record blocks (4 KiB), which a fallback segment
     * needs once the slot's inline records are used up */
    for (size_t sz = st.subpool[0].largest_free; sz >= 64 * KIB && n < max; sz >>= 1)
        while (n < max && dsmpool_seg_create(p, sz, DSMPOOL_SEG_NO_FALLBACK, &held[n]) == 0) n++;
    return n;
}

typedef struct hook_log {
    unsigned calls;
    size_t bytes, last;
} hook_log;

static void on_fallback(void *arg, size_t bytes) {
    hook_log *h = arg;
    h->calls++;
    h->bytes += bytes;
    h->last = bytes;
}

Test(area_calls, realloc_in_place_and_moving) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    dsmpool_ptr v = 0, was;
    /* *p == 0 allocates */
    cr_assert_eq(dsmpool_area_realloc(a, &v, 100, 0), 0, "%s", dsmpool_last_error());
    cr_assert_neq(v, 0);
    cr_expect_eq(dsmpool_area_usable_size(a, v), 112);
    fill(a, v, 112, 1);
    /* grows within its class: in place */
    was = v;
    cr_assert_eq(dsmpool_area_realloc(a, &v, 112, 0), 0);
    cr_expect_eq(v, was, "grown within the class: in place");
    cr_assert_eq(dsmpool_area_realloc(a, &v, 10, 0), 0);
    cr_expect_eq(v, was, "shrunk: in place");
    cr_expect(same(a, v, 112, 1));
    /* past the class: moves, the pattern comes along, the old one is freed */
    cr_assert_eq(dsmpool_area_realloc(a, &v, 1000, DSMPOOL_ALLOC_ZERO), 0, "%s", dsmpool_last_error());
    cr_expect_neq(v, was);
    cr_expect_eq(dsmpool_area_usable_size(a, was), 0, "the old chunk was freed");
    cr_expect_eq(dsmpool_area_free(a, was), -EINVAL, "and cannot be freed again");
    cr_expect_eq(dsmpool_area_usable_size(a, v), 1024);
    cr_expect(same(a, v, 112, 1), "the old usable bytes were copied");
    unsigned char *m = dsmpool_area_addr(a, v);
    for (size_t i = 112; i < 1000; i++) cr_assert_eq(m[i], 0, "ZERO: byte %zu", i);
    /* small to large, large within its block, large to larger */
    fill(a, v, 1024, 2);
    cr_assert_eq(dsmpool_area_realloc(a, &v, 3 * MIB - 1000, 0), 0, "%s", dsmpool_last_error());
    cr_expect_eq(dsmpool_area_usable_size(a, v), 3 * MIB, "exact to the page, not 4 MiB");
    cr_expect(same(a, v, 1024, 2));
    fill(a, v, 3 * MIB, 3);
    was = v;
    cr_assert_eq(dsmpool_area_realloc(a, &v, 4 * MIB, DSMPOOL_ALLOC_ZERO), 0, "%s", dsmpool_last_error());
    cr_expect_eq(v, was, "a large block takes its free tail back in place");
    cr_expect_eq(dsmpool_area_usable_size(a, v), 4 * MIB);
    cr_expect(same(a, v, 3 * MIB, 3));
    m = dsmpool_area_addr(a, v);
    for (size_t i = 3 * MIB; i < 4 * MIB; i += 4093) cr_assert_eq(m[i], 0, "ZERO: byte %zu", i);
    fill(a, v, 4 * MIB, 3);
    cr_assert_eq(dsmpool_area_realloc(a, &v, 5 * MIB, 0), 0, "%s", dsmpool_last_error());
    cr_expect_neq(v, was, "past its power of two it moves");
    cr_expect_eq(dsmpool_area_usable_size(a, v), 5 * MIB);
    cr_expect(same(a, v, 4 * MIB, 3));
    was = v;
    cr_assert_eq(dsmpool_area_realloc(a, &v, 64, 0), 0);
    cr_expect_eq(v, was, "shrinking never moves");
    /* failure: the old allocation and *p stay as they were */
    dsmpool_area_stats st;
    dsmpool_area_get_stats(a, &st);
    cr_assert_eq(dsmpool_area_set_limit(a, st.held), 0);
    cr_expect_eq(dsmpool_area_realloc(a, &v, 9 * MIB, 0), -ENOMEM);
    cr_expect_eq(v, was, "*p unchanged on failure");
    cr_expect_eq(dsmpool_area_usable_size(a, v), 5 * MIB);
    cr_expect(same(a, v, 4 * MIB, 3));
    dsmpool_area_set_limit(a, 0);
    /* bad input */
    cr_expect_eq(dsmpool_area_realloc(a, &v, 0, 0), -EINVAL, "size 0");
    cr_expect_eq(dsmpool_area_realloc(a, NULL, 10, 0), -EINVAL);
    cr_expect_eq(dsmpool_area_realloc(a, &v, 10, 0x80), -EINVAL);
    dsmpool_ptr bad = v + 4096;
    cr_expect_eq(dsmpool_area_realloc(a, &bad, 10, 0), -EINVAL, "not the start of an allocation");
    cr_expect_eq(bad, v + 4096);
    cr_expect_eq(dsmpool_area_free(a, v), 0);
    bad = v;
    cr_expect_eq(dsmpool_area_realloc(a, &bad, 10, 0), -EINVAL, "freed");
    dsmpool_area_destroy(a);
    test_check_ok(p);
    dsmpool_detach(p);
}

Test(area_calls, aligned_allocations) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 256 * MIB);
    dsmpool_area *a = test_area(p, 0);
    size_t sizes[] = {1, 24, 64, 100, 4096, 40000, MIB, MIB + 1, 3 * MIB};
    enum { NS = sizeof sizes / sizeof sizes[0], NA = 22 };
    dsmpool_ptr got[NS][NA];
    for (unsigned i = 0; i < NS; i++)
        for (unsigned k = 0; k < NA; k++) { /* align 1 .. 2 MiB */
            size_t al = (size_t)1 << k;
            cr_assert_eq(dsmpool_area_alloc_aligned(a, sizes[i], al, 0, &got[i][k]), 0,
                         "%zu aligned %zu: %s", sizes[i], al, dsmpool_last_error());
            uintptr_t addr = (uintptr_t)dsmpool_area_addr(a, got[i][k]);
            cr_assert_eq(addr % al, 0, "%zu aligned %zu: %#lx", sizes[i], al, (unsigned long)addr);
            /* a class holds max(size, align); a block (above 256 KiB, or
             * a mid size above 4 KiB) is aligned by its power of two and
             * keeps only the size's pages */
            size_t want = sizes[i] > al ? sizes[i] : al;
            size_t us = dsmpool_area_usable_size(a, got[i][k]);
            if (want <= 256 * KIB)
                cr_assert(us >= want || (want > 4 * KIB && us == (sizes[i] + 4095) / 4096 * 4096),
                          "%zu aligned %zu: usable %zu", sizes[i], al, us);
            else
                cr_assert_eq(us, (sizes[i] + 4095) / 4096 * 4096, "%zu aligned %zu: usable %zu", sizes[i], al, us);
            fill(a, got[i][k], sizes[i], i * NA + k);
        }
    for (unsigned i = 0; i < NS; i++)
        for (unsigned k = 0; k < NA; k++) {
            cr_assert(same(a, got[i][k], sizes[i], i * NA + k), "%zu aligned %u overwritten", sizes[i], k);
            cr_assert_eq(dsmpool_area_free(a, got[i][k]), 0, "%s", dsmpool_last_error());
        }
    /* the alignment the header promises a plain allocation */
    for (unsigned i = 0; i < NS; i++) {
        dsmpool_ptr v;
        cr_assert_eq(dsmpool_area_alloc(a, sizes[i], 0, &v), 0);
        size_t u = dsmpool_area_usable_size(a, v);
        cr_expect_eq((uintptr_t)dsmpool_area_addr(a, v) % promised(sizes[i], u), 0, "%zu bytes", sizes[i]);
        if (!(sizes[i] & (sizes[i] - 1)))
            cr_expect_eq((uintptr_t)dsmpool_area_addr(a, v) % sizes[i], 0, "a power of two, %zu", sizes[i]);
        dsmpool_area_free(a, v);
    }
    dsmpool_ptr v = 1;
    cr_expect_eq(dsmpool_area_alloc_aligned(a, 100, 48, 0, &v), -EINVAL, "not a power of two");
    cr_expect_eq(v, 0);
    cr_expect_eq(dsmpool_area_alloc_aligned(a, 100, 0, 0, &v), -EINVAL);
    cr_expect_eq(dsmpool_area_alloc_aligned(a, 100, DSMPOOL_AREA_MAX_ALIGN * 2, 0, &v), -EINVAL);
    cr_expect_eq(dsmpool_area_alloc_aligned(a, 0, 64, 0, &v), -EINVAL);
    cr_expect_eq(dsmpool_area_alloc_aligned(a, 100, 64, 0, NULL), -EINVAL);
    dsmpool_area_destroy(a);
    test_check_ok(p);
    dsmpool_detach(p);
}

/* A reference model of the heap calls over the size classes: random sizes
 * (8 B steps to 64 B, 16 B to 128 B, then eight classes per doubling to
 * 8 KiB and four above, up to large blocks), random alignments, reallocs;
 * every allocation's bytes written with its own pattern and verified
 * before it goes; usable size at least the size and, for a plain small
 * allocation, its class within an eighth (to 8 KiB) or a quarter (8 B
 * below 64 B, 16 B below 128 B); the promised alignment held; the pool
 * checked along the way; the area holds nothing once everything is freed. */
typedef struct model_alloc {
    dsmpool_ptr p;
    size_t size, align;
    unsigned seed;
} model_alloc;

static size_t model_size(uint64_t *rng) {
    uint64_t r = test_rand(rng);
    switch (r % 8) {
    case 0: case 1: case 2: return 1 + (r >> 8) % 128;                 /* the 16 B classes */
    case 3: case 4: return 129 + (r >> 8) % 4000;
    case 5: return (size_t)1 << (7 + (r >> 8) % 13) | (r >> 24) % 4096; /* 128 B .. 1 MiB, log-uniform */
    case 6: return 32 * KIB + (r >> 8) % (16 * KIB);                   /* around the hot class */
    default: return (r >> 8) % 16 ? 1 + (r >> 12) % MIB : MIB + 1 + (r >> 12) % (2 * MIB);
    }
}

static void model_verify(dsmpool_area *a, const model_alloc *m) {
    unsigned char *b = dsmpool_area_addr(a, m->p);
    cr_assert_not_null(b);
    size_t n = m->size, step = n > 8192 ? 61 : 1; /* big ones: a sample, both ends whole */
    for (size_t i = 0; i < n; i += (i < 64 || i + 64 >= n) ? 1 : step)
        if (b[i] != (unsigned char)(m->seed + i * 7 + (i >> 9)))
            cr_assert(false, "allocation %016llx of %zu bytes: byte %zu overwritten",
                      (unsigned long long)m->p, n, i);
}

static void model_check_new(dsmpool_area *a, const model_alloc *m, bool plain) {
    size_t u = dsmpool_area_usable_size(a, m->p);
    cr_assert_geq(u, m->size, "%016llx: usable %zu < %zu", (unsigned long long)m->p, u, m->size);
    uintptr_t addr = (uintptr_t)dsmpool_area_addr(a, m->p);
    cr_assert_eq(addr % m->align, 0, "%zu bytes aligned %zu: %#lx", m->size, m->align, (unsigned long)addr);
    cr_assert_eq(addr % promised(m->size, u), 0, "%zu bytes: %#lx", m->size, (unsigned long)addr);
    if (plain && m->size <= MIB)
        cr_assert(m->size <= 16    ? u - m->size < 16
                  : m->size <= 64  ? u - m->size < 8
                  : m->size <= 128 ? u - m->size < 16
                  : m->size <= 8 * KIB ? (u - m->size) * 8 < m->size
                                       : (u - m->size) * 4 < m->size,
                  "%zu bytes: usable %zu", m->size, u);
    fill(a, m->p, m->size, m->seed);
}

Test(area_calls, size_classes_against_a_reference_model, .timeout = 300) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 512 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, 0);
    uint64_t seed = test_seed(), rng = seed;
    cr_log_info("seed %llu", (unsigned long long)seed);
    enum { MAXLIVE = 1500 };
    static model_alloc live[MAXLIVE];
    unsigned n = 0;
    size_t bytes = 0;
    long steps = (long)(20000 * test_seconds(1.0));
    for (long step = 0; step < steps; step++) {
        uint64_t r = test_rand(&rng);
        unsigned op = r % 10;
        if (n && (op < 3 || n == MAXLIVE || bytes > 160 * MIB)) { /* free */
            unsigned i = (unsigned)((r >> 8) % n);
            model_verify(a, &live[i]);
            cr_assert_eq(dsmpool_area_free(a, live[i].p), 0, "%s", dsmpool_last_error());
            bytes -= live[i].size;
            live[i] = live[--n];
        } else if (n && op < 5) { /* realloc: the old bytes come along */
            unsigned i = (unsigned)((r >> 8) % n);
            model_alloc *m = &live[i];
            model_verify(a, m);
            size_t ns = model_size(&rng), keep = ns < m->size ? ns : m->size;
            cr_assert_eq(dsmpool_area_realloc(a, &m->p, ns, 0), 0, "%zu -> %zu: %s", m->size, ns,
                         dsmpool_last_error());
            bytes += ns - m->size;
            m->size = keep;
            model_verify(a, m);
            m->size = ns;
            m->align = 8;
            model_check_new(a, m, false);
        } else { /* alloc, plain or aligned */
            model_alloc *m = &live[n];
            m->size = model_size(&rng);
            m->seed = (unsigned)(r >> 32);
            bool plain = op < 8;
            m->align = plain ? 8 : (size_t)1 << ((r >> 16) % 17); /* 1 B .. 64 KiB */
            int rc = plain ? dsmpool_area_alloc(a, m->size, 0, &m->p)
                           : dsmpool_area_alloc_aligned(a, m->size, m->align, 0, &m->p);
            cr_assert_eq(rc, 0, "%zu bytes aligned %zu: %s", m->size, m->align, dsmpool_last_error());
            if (m->align < 8) m->align = 8;
            model_check_new(a, m, plain);
            bytes += m->size;
            n++;
        }
        if (step % 2000 == 1999) {
            test_check_ok(p);
            dsmpool_area_stats st;
            cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
            cr_assert_geq(st.bytes_in_use, bytes, "in use %zu < the model's %zu", st.bytes_in_use, bytes);
        }
    }
    while (n) {
        model_verify(a, &live[--n]);
        cr_assert_eq(dsmpool_area_free(a, live[n].p), 0, "%s", dsmpool_last_error());
    }
    cr_assert_eq(dsmpool_area_flush(a), 0);
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.spans, 0, "every chunk came back: every span went back");
    cr_expect_eq(st.large_blocks, 0);
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    cr_expect_eq(test_pool_free(p), free0);
    dsmpool_detach(p);
}

/* usable_size and ptr_of for one allocation of n bytes at v */
static void check_addresses(dsmpool_area *a, dsmpool_ptr v, size_t n) {
    size_t u = dsmpool_area_usable_size(a, v);
    cr_assert_geq(u, n, "%016llx: usable %zu < %zu", (unsigned long long)v, u, n);
    char *m = dsmpool_area_addr(a, v);
    size_t ks[] = {0, 1, 8, 63, u / 3, u / 2 + 5, u - 1};
    for (unsigned i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        size_t k = ks[i];
        cr_assert_eq(dsmpool_area_ptr_of(a, m + k), v + k, "ptr_of(addr(p) + %zu)", k);
        cr_assert_eq(dsmpool_area_addr(a, v + k), m + k, "addr(p + %zu)", k);
        if (k) cr_assert_eq(dsmpool_area_usable_size(a, v + k), 0, "p + %zu is not a start", k);
    }
}

Test(area_calls, usable_size_and_ptr_of_pool_and_fallback) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    dsmpool_area *a = test_area(p, 0), *b = test_area(p, 0);
    size_t sizes[] = {24, 100, 32 * KIB, 100 * KIB, 3 * MIB};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    dsmpool_ptr pool[NS], os[NS];
    for (unsigned i = 0; i < NS; i++) {
        cr_assert_eq(dsmpool_area_alloc(a, sizes[i], 0, &pool[i]), 0, "%s", dsmpool_last_error());
        cr_expect_eq(pool[i] & DSMPOOL_PTR_OS_BIT, 0);
        check_addresses(a, pool[i], sizes[i]);
    }
    /* the pool full: what comes next is OS memory */
    dsmpool_seg *held[64];
    unsigned nh = fill_pool(p, held, 64);
    size_t os_sizes[] = {200 * KIB, 2 * KIB, 3 * MIB, 400 * KIB, 5 * MIB};
    for (unsigned i = 0; i < NS; i++) {
        cr_assert_eq(dsmpool_area_alloc(a, os_sizes[i], 0, &os[i]), 0, "%s", dsmpool_last_error());
        cr_assert_neq(os[i] & DSMPOOL_PTR_OS_BIT, 0, "%zu bytes came from the pool", os_sizes[i]);
        check_addresses(a, os[i], os_sizes[i]);
    }
    /* another area, a stack address, a freed chunk, a pointer never made */
    int local;
    cr_expect_eq(dsmpool_area_ptr_of(b, dsmpool_area_addr(a, pool[1])), 0, "another area's chunk");
    cr_expect_eq(dsmpool_area_ptr_of(b, dsmpool_area_addr(a, os[0])), 0, "another area's OS chunk");
    cr_expect_eq(dsmpool_area_usable_size(b, pool[2]), 0);
    cr_expect_eq(dsmpool_area_ptr_of(a, &local), 0);
    cr_expect_eq(dsmpool_area_ptr_of(a, NULL), 0);
    cr_expect_eq(dsmpool_area_usable_size(a, 0), 0);
    cr_expect_eq(dsmpool_area_usable_size(a, DSMPOOL_PTR_OS_BIT | 12345), 0);
    for (unsigned i = 0; i < NS; i++) {
        char *m = dsmpool_area_addr(a, pool[i]), *o = dsmpool_area_addr(a, os[i]);
        cr_assert_eq(dsmpool_area_free(a, pool[i]), 0);
        cr_assert_eq(dsmpool_area_free(a, os[i]), 0);
        /* a freed large block may leave this process's mapping: ask only chunks */
        if (sizes[i] <= MIB) {
            cr_expect_eq(dsmpool_area_usable_size(a, pool[i]), 0, "freed %zu", sizes[i]);
            cr_expect_eq(dsmpool_area_ptr_of(a, m + 1), 0, "freed %zu", sizes[i]);
        }
        if (os_sizes[i] <= MIB) {
            cr_expect_eq(dsmpool_area_usable_size(a, os[i]), 0, "freed OS %zu", os_sizes[i]);
            cr_expect_eq(dsmpool_area_ptr_of(a, o + 1), 0, "freed OS %zu", os_sizes[i]);
        }
    }
    for (unsigned i = 0; i < nh; i++) dsmpool_seg_detach(held[i]);
    dsmpool_area_destroy(b);
    dsmpool_area_destroy(a);
    test_check_ok(p);
    dsmpool_detach(p);
}

Test(area_calls, checked_mode_knows_never_allocated_chunks) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_area *a = test_area(p, DSMPOOL_AREA_CHECKED);
    dsmpool_ptr v;
    cr_assert_eq(dsmpool_area_alloc(a, 1000, 0, &v), 0);
    cr_expect_eq(dsmpool_area_usable_size(a, v), 1024);
    cr_expect_eq(dsmpool_area_usable_size(a, v + 5 * 1024), 0, "a chunk of the span never handed out");
    cr_expect_eq(dsmpool_area_ptr_of(a, (char *)dsmpool_area_addr(a, v) + 5 * 1024 + 3), 0);
    cr_expect_eq(dsmpool_area_ptr_of(a, (char *)dsmpool_area_addr(a, v) + 3), v + 3);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* held = in_use + cached; in_use and requested against what the test holds */
static void expect_stats(dsmpool_area *a, size_t in_use, size_t requested, const char *when) {
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.struct_size, sizeof st);
    cr_expect_eq(st.bytes_in_use, in_use, "%s: in use %zu, want %zu", when, st.bytes_in_use, in_use);
    cr_expect_eq(st.bytes_requested, requested, "%s: requested %zu, want %zu", when, st.bytes_requested,
                 requested);
    cr_expect_eq(st.held, st.bytes_in_use + st.bytes_cached, "%s: held %zu != %zu in use + %zu cached", when,
                 st.held, st.bytes_in_use, st.bytes_cached);
    cr_expect_leq(st.bytes_os, st.held);
}

Test(area_calls, stats_against_a_reference) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 256 * MIB);
    dsmpool_area *a = test_area(p, 0), *b = test_area(p, 0);
    uint64_t seed = test_seed();
    enum { N = 300 };
    static dsmpool_ptr v[N];
    static size_t want[N], usable[N];
    size_t in_use = 0, requested = 0;
    expect_stats(a, 0, 0, "empty");
    /* chunks asking for powers of two (the 32 KiB hot case): exact; large
     * blocks of any size: exact */
    for (unsigned i = 0; i < N; i++) {
        unsigned r = (unsigned)(test_rand(&seed) % 10);
        want[i] = r < 7 ? 32 * KIB : r < 9 ? (size_t)64 << (test_rand(&seed) % 15)
                                           : MIB + 1 + test_rand(&seed) % (3 * MIB);
        cr_assert_eq(dsmpool_area_alloc(a, want[i], 0, &v[i]), 0, "%s", dsmpool_last_error());
        usable[i] = dsmpool_area_usable_size(a, v[i]);
        in_use += usable[i];
        requested += want[i];
    }
    expect_stats(a, in_use, requested, "allocated");
    for (unsigned i = 0; i < N; i += 2) {
        cr_assert_eq(dsmpool_area_free(a, v[i]), 0);
        in_use -= usable[i];
        requested -= want[i];
    }
    expect_stats(a, in_use, requested, "half freed");
    /* a large block resized in place asks for its new size */
    unsigned big = 1;
    while (big < N && want[big] <= MIB) big += 2;
    cr_assert_lt(big, N, "no large block at an odd index (seed %llu)", (unsigned long long)seed);
    requested -= want[big];
    want[big] = usable[big] - 1;
    cr_assert_eq(dsmpool_area_realloc(a, &v[big], want[big], 0), 0);
    requested += want[big];
    expect_stats(a, in_use, requested, "realloc in place");
    cr_assert_eq(dsmpool_area_flush(a), 0);
    expect_stats(a, in_use, requested, "flushed");
    for (unsigned i = 1; i < N; i += 2) dsmpool_area_free(a, v[i]);
    dsmpool_area_flush(a);
    expect_stats(a, 0, 0, "all freed");
    dsmpool_area_stats st;
    dsmpool_area_get_stats(a, &st);
    cr_expect_eq(st.held, 0, "an idle area holds nothing");
    /* one ratio for every chunk (30 KiB of 32): the estimate is exact */
    for (unsigned i = 0; i < 100; i++) cr_assert_eq(dsmpool_area_alloc(b, 30 * KIB, 0, &v[i]), 0);
    expect_stats(b, 100 * 32 * KIB, 100 * 30 * KIB, "30 KiB chunks");
    /* other processes' caches count too */
    pid_t kid = fork();
    if (kid == 0) {
        dsmpool_ptr w;
        for (unsigned i = 0; i < 10; i++)
            if (dsmpool_area_alloc(b, 30 * KIB, 0, &w) != 0) _exit(1);
        _exit(0); /* (its caches stay for recovery: it does not detach) */
    }
    cr_assert_eq(test_wait(kid), 0);
    expect_stats(b, 110 * 32 * KIB, 110 * 30 * KIB, "a child's 10 more");
    dsmpool_area_destroy(a);
    dsmpool_area_destroy(b);
    dsmpool_detach(p);
}

Test(area_calls, spilling_is_visible) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    hook_log h = {0};
    cr_assert_eq(dsmpool_set_fallback_hook(p, on_fallback, &h), 0);
    cr_expect_eq(dsmpool_set_fallback_hook(NULL, on_fallback, &h), -EINVAL);
    dsmpool_area *a = test_area(p, 0);
    dsmpool_seg *s;
    dsmpool_ptr v;
    /* from the pool: no call */
    cr_assert_eq(dsmpool_seg_create(p, 64 * KIB, 0, &s), 0);
    cr_assert_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &v), 0);
    cr_expect_eq(h.calls, 0);
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.fallback_bytes, 0);
    cr_expect_eq(st.fallback_bytes_peak, 0);
    dsmpool_seg_detach(s);
    dsmpool_area_free(a, v);
    dsmpool_seg *held[64];
    unsigned nh = fill_pool(p, held, 64);
    /* a segment from the OS: exactly its size, rounded to the page */
    cr_assert_eq(dsmpool_seg_create(p, 3 * MIB + 5, 0, &s), 0, "%s", dsmpool_last_error());
    cr_assert(dsmpool_seg_is_fallback(s));
    cr_expect_eq(h.calls, 1);
    cr_expect_eq(h.last, 3 * MIB + 4096);
    cr_expect_eq(h.last, dsmpool_seg_size(s));
    /* an area's span (an OS segment of the span's bytes: 200 KiB takes the
     * 224 KiB class, whose exact span is the nine chunks 2 MiB holds) and
     * a large block (exact too) */
    cr_assert_eq(dsmpool_area_alloc(a, 200 * KIB, 0, &v), 0, "%s", dsmpool_last_error());
    cr_assert(v & DSMPOOL_PTR_OS_BIT);
    cr_expect_eq(h.calls, 2);
    cr_expect_eq(h.last, 9 * 224 * KIB);
    dsmpool_ptr big;
    cr_assert_eq(dsmpool_area_alloc(a, 3 * MIB, 0, &big), 0, "%s", dsmpool_last_error());
    cr_expect_eq(h.calls, 3);
    cr_expect_eq(h.last, 3 * MIB);
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.fallback_bytes, h.bytes, "%zu in OS segments, the hook saw %zu", st.fallback_bytes, h.bytes);
    cr_expect_eq(st.fallback_bytes_peak, h.bytes);
    dsmpool_area_stats as;
    dsmpool_area_get_stats(a, &as);
    cr_expect_eq(as.bytes_os, 9 * 224 * KIB + 3 * MIB);
    cr_expect_eq(as.fallback_segments, 2);
    /* they go: now falls, the mark stays */
    dsmpool_seg_detach(s);
    dsmpool_area_free(a, big);
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.fallback_bytes, 9 * 224 * KIB);
    cr_expect_eq(st.fallback_bytes_peak, h.bytes);
    /* removed: no more calls */
    cr_assert_eq(dsmpool_set_fallback_hook(p, NULL, NULL), 0);
    cr_assert_eq(dsmpool_seg_create(p, MIB, 0, &s), 0);
    cr_assert(dsmpool_seg_is_fallback(s));
    cr_expect_eq(h.calls, 3);
    dsmpool_seg_detach(s);
    dsmpool_area_free(a, v);
    for (unsigned i = 0; i < nh; i++) dsmpool_seg_detach(held[i]);
    dsmpool_area_destroy(a);
    test_check_ok(p);
    dsmpool_detach(p);
}

/* The hook may call the library: no lock is held when it runs. */
static dsmpool *reentrant_pool;
static void on_fallback_reenter(void *arg, size_t bytes) {
    (void)bytes;
    dsmpool_stats st;
    *(int *)arg = dsmpool_get_stats(reentrant_pool, &st) == 0 && st.fallback_bytes >= bytes ? 1 : -1;
    dsmpool_seg *s;
    if (dsmpool_seg_create(reentrant_pool, 4096, DSMPOOL_SEG_NO_FALLBACK, &s) == 0) dsmpool_seg_detach(s);
}

Test(area_calls, hook_may_call_the_library) {
    dsmpool *p = reentrant_pool = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    int ok = 0;
    dsmpool_set_fallback_hook(p, on_fallback_reenter, &ok);
    dsmpool_seg *held[64], *s;
    unsigned nh = fill_pool(p, held, 64);
    cr_assert_eq(dsmpool_seg_create(p, MIB, 0, &s), 0);
    cr_expect_eq(ok, 1);
    dsmpool_seg_detach(s);
    for (unsigned i = 0; i < nh; i++) dsmpool_seg_detach(held[i]);
    dsmpool_detach(p);
}

Test(area_calls, exhaustion_is_one_error_code) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_area *a = test_area(p, DSMPOOL_AREA_NO_FALLBACK), *fa = test_area(p, 0);
    dsmpool_seg *held[64], *s;
    unsigned nh = fill_pool(p, held, 64);
    dsmpool_ptr v;
    /* the pool full, the fallback off */
    int rs = dsmpool_seg_create(p, 2 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
    int ra = dsmpool_area_alloc(a, 2 * MIB, 0, &v);
    cr_expect_eq(rs, -ENOMEM, "segment: %d", rs);
    cr_expect_eq(ra, rs, "area %d, segment %d", ra, rs);
    ra = dsmpool_area_alloc(a, 32 * KIB, 0, &v);
    cr_expect_eq(ra, -ENOMEM, "area chunk: %d", ra);
    /* the pool full, and more than the OS gives */
    rs = dsmpool_seg_create(p, (size_t)1 << 45, 0, &s);
    ra = dsmpool_area_alloc(fa, (size_t)1 << 45, 0, &v);
    cr_expect_eq(rs, -ENOMEM, "segment: %d %s", rs, dsmpool_last_error());
    cr_expect_eq(ra, rs, "area %d, segment %d", ra, rs);
    for (unsigned i = 0; i < nh; i++) dsmpool_seg_detach(held[i]);
    dsmpool_area_destroy(a);
    dsmpool_area_destroy(fa);
    dsmpool_detach(p);
}

/* A forked child resizes and frees what the parent allocated, in the pool
 * and in OS segments; the parent sees the result through the same area. */
Test(area_calls, child_reallocs_and_frees_parents_allocations) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_area *a = test_area(p, 0);
    dsmpool_ptr v[4];
    size_t sz[4] = {100, 3 * MIB, 200 * KIB, 3 * MIB};
    dsmpool_seg *held[64];
    unsigned nh = 0;
    for (unsigned i = 0; i < 4; i++) {
        if (i == 2) nh = fill_pool(p, held, 64); /* the last two in OS segments */
        cr_assert_eq(dsmpool_area_alloc(a, sz[i], 0, &v[i]), 0, "%s", dsmpool_last_error());
        fill(a, v[i], sz[i], 10 + i);
    }
    cr_assert(v[2] & DSMPOOL_PTR_OS_BIT);
    cr_assert(v[3] & DSMPOOL_PTR_OS_BIT);
    for (unsigned i = 0; i < nh / 2; i++) dsmpool_seg_detach(held[i]); /* room to move into */
    int pp[2];
    cr_assert_eq(pipe(pp), 0);
    pid_t kid = fork();
    if (kid == 0) {
        close(pp[0]);
        dsmpool_ptr w[4];
        for (unsigned i = 0; i < 4; i++) {
            w[i] = v[i];
            if (!same(a, w[i], sz[i], 10 + i)) _exit(10 + i);
            if (dsmpool_area_ptr_of(a, (char *)dsmpool_area_addr(a, w[i]) + 7) != w[i] + 7) _exit(20 + i);
            if (dsmpool_area_realloc(a, &w[i], 2 * sz[i] + 1, 0) != 0) _exit(30 + i);
            if (!same(a, w[i], sz[i], 10 + i)) _exit(40 + i);
            if (dsmpool_area_usable_size(a, v[i]) != 0) _exit(50 + i);
        }
        if (dsmpool_area_free(a, w[0]) != 0) _exit(60);
        if (write(pp[1], w, sizeof w) != (ssize_t)sizeof w) _exit(61);
        dsmpool_area_flush(a);
        _exit(0);
    }
    close(pp[1]);
    dsmpool_ptr w[4];
    cr_assert_eq(read(pp[0], w, sizeof w), (ssize_t)sizeof w);
    cr_assert_eq(test_wait(kid), 0);
    close(pp[0]);
    /* (the old ones were seen freed in the child: their memory may hold the new ones now) */
    cr_expect_eq(dsmpool_area_usable_size(a, w[0]), 0, "the child freed it");
    for (unsigned i = 1; i < 4; i++) {
        cr_expect_geq(dsmpool_area_usable_size(a, w[i]), 2 * sz[i] + 1);
        cr_expect(same(a, w[i], sz[i], 10 + i), "the moved %u keeps its bytes", i);
        cr_expect_eq(dsmpool_area_free(a, w[i]), 0, "%s", dsmpool_last_error());
    }
    for (unsigned i = nh / 2; i < nh; i++) dsmpool_seg_detach(held[i]);
    dsmpool_area_destroy(a);
    test_check_ok(p);
    dsmpool_detach(p);
}
