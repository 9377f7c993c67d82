/*
 * test_area.c -- areas: size classes, relocatable pointers across processes
 * (including OS fallback segments), mixed sizes in threads and processes
 * with patterns, caches recovered from a SIGKILLed worker, limits, bad frees,
 * and the hot path proven free of system calls and page faults by seccomp.
 */
#include <criterion/criterion.h>
#include <dsmpool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <linux/futex.h>

#include "seccomp_count.h"
#include "seccomp_forbid.h"
#include "testhooks.h"
#include "testutil.h"


Test(area, classes_alignment_and_destroy_returns_everything) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, 0);
    size_t sizes[] = {1, 63, 64, 65, 100, 4096, 32 * KIB - 1, 32 * KIB, 32 * KIB + 1, MIB, MIB + 1, 5 * MIB};
    /* chunks are aligned to the largest power of two dividing their class
     * size (16, 64, 64, 80, 112, 4 KiB, 32 KiB); blocks (above 256 KiB,
     * and the mid sizes 32 KiB - 1 and 32 KiB + 1, whose 8 and 9 pages cost
     * no more than their classes of 32 and 40 KiB) to their power of two,
     * 2 MiB at most */
    size_t align[] = {16, 64, 64, 16, 16, 4096, 32 * KIB, 32 * KIB, 8 * KIB, MIB, 2 * MIB, 2 * MIB};
    dsmpool_ptr ptrs[12];
    for (int i = 0; i < 12; i++) {
        cr_assert_eq(dsmpool_area_alloc(a, sizes[i], DSMPOOL_ALLOC_ZERO, &ptrs[i]), 0, "size %zu: %s",
                     sizes[i], dsmpool_last_error());
        unsigned char *m = dsmpool_area_addr(a, ptrs[i]);
        cr_assert_not_null(m);
        cr_expect_eq(ptrs[i] % align[i], 0, "size %zu: pointer %llx not aligned to %zu", sizes[i],
                     (unsigned long long)ptrs[i], align[i]);
        for (size_t k = 0; k < sizes[i]; k += 509) cr_assert_eq(m[k], 0, "ZERO flag");
        memset(m, i + 1, sizes[i]);
    }
    for (int i = 0; i < 12; i++) {
        unsigned char *m = dsmpool_area_addr(a, ptrs[i]);
        cr_expect_eq(m[0], i + 1, "allocation %d overwritten", i);
        cr_expect_eq(m[sizes[i] - 1], i + 1, "allocation %d overwritten at its end", i);
    }
    test_check_ok(p);
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.large_blocks, 5, "%zu", st.large_blocks);
    cr_expect_eq(st.spans, 6, "classes 16 B, 64 B, 80 B, 112 B, 4 KiB, 32 KiB");
    cr_expect_eq(dsmpool_area_usable_size(a, ptrs[8]), 36 * KIB, "32 KiB + 1: exact to the page");
    for (int i = 0; i < 6; i++) cr_assert_eq(dsmpool_area_free(a, ptrs[i]), 0);
    dsmpool_handle h = dsmpool_area_handle(a);
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    cr_expect_eq(test_pool_free(p), free0, "destroy gave back every span, block and cache");
    test_check_ok(p);
    dsmpool_area *b;
    cr_expect_eq(dsmpool_area_attach(p, h, &b), -ESTALE, "stale area handle");
    dsmpool_detach(p);
}


/* The class of every small size: the smallest that holds it, its waste
 * under 8 B (to 64 B), 16 B (to 128 B), an eighth of the size (to 8 KiB)
 * or a quarter (above); each class's span: a power of two (its chunks
 * filling the smallest from 64 KiB that holds 64 of them, 2 MiB when none
 * does) for a power-of-two class, else exact -- whole pages its chunks
 * fill without a tail: the most within 64 KiB if that is 32 chunks or
 * more, else the least of at least 64 KiB and 32 chunks (or as many as
 * 2 MiB holds), in the power of two at or above; and the
 * reciprocal that gives a chunk's index, against a divide for every offset
 * below 2 MiB in every class (chunk starts only inside the span's bytes).
 * A fallback pointer into a span's OS segment (len bytes) has the offset
 * bits of its block, so that span_rel() reads its offset. */
Test(area, class_table_and_exhaustive_reciprocal, .timeout = 120) {
    uint32_t idx;
    bool start;
    unsigned prev = 0;
    for (size_t n = 1; n <= MIB; n++) {
        unsigned c = dp_area_test_class(n);
        uint32_t sz = dp_area_test_chunk(c, 0, &idx, &start);
        if (sz < n || (c && dp_area_test_chunk(c - 1, 0, &idx, &start) >= n) || c < prev ||
            (n <= 16 ? sz - n >= 16 : n <= 64 ? sz - n >= 8 : n <= 128 ? sz - n >= 16 : n <= 8 * KIB ? (sz - n) * 8 >= n
                                                                       : (sz - n) * 4 >= n))
            cr_assert(false, "size %zu: class %u of %u bytes", n, c, sz);
        prev = c;
    }
    cr_assert_eq(dp_area_test_class(MIB), 86, "87 classes, the last one 1 MiB");
    for (unsigned c = 0; c < 128; c++) {
        uint32_t sz = dp_area_test_chunk(c, 0, &idx, &start);
        if (c >= 87) { /* no class: no chunk anywhere */
            cr_assert_eq(sz, 0);
            for (uint64_t off = 0; off < 2 * MIB; off += 4096 + 16) {
                dp_area_test_chunk(c, off, &idx, &start);
                cr_assert(!start, "class %u offset %llu", c, (unsigned long long)off);
            }
            continue;
        }
        /* 8 B steps only below 64 B (the header's 8-byte exception) */
        cr_assert(sz >= 16 && sz % (sz < 64 ? 8 : 16) == 0 && dp_area_test_class(sz) == c, "class %u: %u bytes",
                  c, sz);
        uint64_t span = dp_area_test_span(c), len = dp_area_test_span_len(c), want = 64 * KIB;
        if (!(sz & (sz - 1))) { /* a power of two: the span of 64 chunks or 2 MiB, no tail */
            while (want < 2 * MIB && want / sz < 64) want *= 2;
            cr_assert_eq(span, want, "class %u (%u B): span %llu", c, sz, (unsigned long long)span);
            cr_assert_eq(len, span, "class %u: a power of two is not trimmed", c);
        } else {
            uint64_t lcm = sz, xl;
            while (lcm % 4096) lcm += sz;
            xl = 64 * KIB / lcm * lcm; /* within 64 KiB if that holds 32 chunks */
            if (xl < 32ull * sz) {
                for (xl = lcm; xl < 64 * KIB || xl < 32ull * sz; xl += lcm) {}
                if (xl > 2 * MIB) xl = 2 * MIB / lcm * lcm;
            }
            cr_assert_eq(len, xl, "class %u (%u B): %llu bytes, want %llu", c, sz, (unsigned long long)len,
                         (unsigned long long)xl);
            cr_assert(len % sz == 0 && len % 4096 == 0 && len / sz >= 2, "class %u: whole pages, no tail", c);
            cr_assert(span >= len && span / 2 < len && span >= 64 * KIB && span <= 2 * MIB && !(span & (span - 1)),
                      "class %u: block %llu for %llu bytes", c, (unsigned long long)span, (unsigned long long)len);
        }
        cr_assert_eq(1ull << dp_area_test_fb_bits(len), span, "class %u: %llu bytes, block %llu", c,
                     (unsigned long long)len, (unsigned long long)span);
        uint64_t chunks = len / sz;
        for (uint64_t off = 0; off < 2 * MIB; off++) {
            dp_area_test_chunk(c, off, &idx, &start);
            if (idx != off / sz || start != (off % sz == 0 && off / sz < chunks))
                cr_assert(false, "class %u (%u B) offset %llu: index %u start %d", c, sz, (unsigned long long)off,
                               idx, start);
        }
        for (uint64_t off = span; off < span + 2 * MIB; off += sz) { /* past the span: never a start */
            dp_area_test_chunk(c, off, &idx, &start);
            cr_assert(!start, "class %u offset %llu", c, (unsigned long long)off);
        }
    }
}

Test(area, last_detach_destroys_and_flush_returns_spans) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, 0);
    dsmpool_ptr v[300];
    for (int i = 0; i < 300; i++) cr_assert_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &v[i]), 0);
    for (int i = 0; i < 300; i++) cr_assert_eq(dsmpool_area_free(a, v[i]), 0);
    cr_assert_eq(dsmpool_area_flush(a), 0);
    dsmpool_area_stats st;
    dsmpool_area_get_stats(a, &st);
    cr_expect_eq(st.spans, 0, "all chunks returned: every span went back to the pool");
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_alloc(a, 100, 0, &v[0]), 0);
    cr_assert_eq(dsmpool_area_detach(a), 0);
    cr_expect_eq(test_pool_free(p), free0, "the last detach destroyed the area");
    cr_expect_eq(dsmpool_area_detach(a), -EINVAL, "detach twice");
    test_check_ok(p);
    dsmpool_detach(p);
}

Test(area, bad_input) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, DSMPOOL_AREA_CHECKED), *b = test_area(p, 0);
    dsmpool_ptr x = 1, y, z, big;
    cr_expect_eq(dsmpool_area_alloc(a, 0, 0, &x), -EINVAL);
    cr_expect_eq(x, 0, "out cleared");
    cr_expect_eq(dsmpool_area_alloc(a, (size_t)1 << 50, 0, &x), -ENOMEM);
    cr_expect_eq(dsmpool_area_alloc(a, 64, 0x40, &x), -EINVAL);
    cr_expect_eq(dsmpool_area_alloc(NULL, 64, 0, &x), -EINVAL);
    cr_expect_eq(dsmpool_area_alloc(a, 64, 0, NULL), -EINVAL);
    cr_assert_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &y), 0);
    cr_assert_eq(dsmpool_area_alloc(b, 32 * KIB, 0, &z), 0);
    cr_assert_eq(dsmpool_area_alloc(a, 3 * MIB, 0, &big), 0);
    cr_expect_eq(dsmpool_area_free(a, 0), -EINVAL, "null");
    cr_expect_eq(dsmpool_area_free(a, z), -EINVAL, "another area's pointer");
    cr_expect_neq(strstr(dsmpool_last_error(), "this area"), NULL, "%s", dsmpool_last_error());
    cr_expect_eq(dsmpool_area_free(a, y + 64), -EINVAL, "not the start of a chunk");
    cr_expect_eq(dsmpool_area_free(a, y + 32 * KIB), -EINVAL, "never allocated (checked mode)");
    cr_expect_eq(dsmpool_area_free(a, 12345), -EINVAL, "wild pointer");
    cr_expect_eq(dsmpool_area_free(a, big + 2 * MIB), -EINVAL, "inside a large block");
    cr_assert_eq(dsmpool_area_free(a, y), 0);
    cr_expect_eq(dsmpool_area_free(a, y), -EINVAL, "double free (checked mode)");
    cr_assert_eq(dsmpool_area_free(a, big), 0);
    cr_expect_eq(dsmpool_area_free(a, big), -EINVAL, "double free of a large block (always)");
    cr_expect_null(dsmpool_area_addr(a, 0));
    cr_expect_null(dsmpool_area_addr(NULL, y));
    test_check_ok(p);
    dsmpool_handle hb = dsmpool_area_handle(b);
    dsmpool_area_destroy(b);
    dsmpool_area *c;
    cr_expect_eq(dsmpool_area_attach(p, hb, &c), -ESTALE);
    cr_expect_eq(dsmpool_area_attach(p, 0, &c), -EINVAL);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &s), 0);
    cr_expect_eq(dsmpool_area_attach(p, dsmpool_seg_handle(s), &c), -EINVAL, "a segment, not an area");
    dsmpool_seg_detach(s);
    dsmpool_area_destroy(a);
    test_check_ok(p);
    dsmpool_detach(p);
}

/* Issue 11: exact spans. A class that is not a power of two has spans of
 * the whole pages its chunks fill, no tail: 112 B chunks, 512 in 56 KiB
 * (two runs of 28 KiB = 256 chunks), taken from a 64 KiB block whose
 * other 8 KiB are the pool's at once. Every chunk is written whole and
 * stays intact, the next span costs the pool 56 KiB again, and giving the
 * chunks back retires both spans to the byte. */
Test(area, exact_spans_hold_their_pages_only) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    dsmpool_ptr first;
    /* the control block's record and registry pages, and a 16 B span */
    cr_assert_eq(dsmpool_area_alloc(a, 16, 0, &first), 0);
    size_t free1 = test_pool_free(p);
    enum { N = 512 };
    static dsmpool_ptr v[N + 1];
    for (int i = 0; i <= N; i++) {
        cr_assert_eq(dsmpool_area_alloc(a, 100, 0, &v[i]), 0, "%s", dsmpool_last_error());
        cr_assert_eq(dsmpool_area_usable_size(a, v[i]), 112);
        if (i < N)
            cr_assert_eq(v[i], v[0] + (dsmpool_ptr)i * 112, "chunk %d of the first span", i);
        if (i == 0 || i == N - 1)
            cr_expect_eq(free1 - test_pool_free(p), 56 * KIB, "after %d chunks the pool gave %zu bytes", i + 1,
                         free1 - test_pool_free(p));
        memset(dsmpool_area_addr(a, v[i]), i & 0xff, 112);
    }
    cr_expect_eq(free1 - test_pool_free(p), 2 * 56 * KIB, "a second span of 56 KiB: %zu", free1 - test_pool_free(p));
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.held, 64 * KIB + 2 * 56 * KIB, "held %llu", (unsigned long long)st.held);
    test_check_ok(p);
    for (int i = 0; i <= N; i++) {
        unsigned char *m = dsmpool_area_addr(a, v[i]);
        for (int k = 0; k < 112; k++)
            if (m[k] != (unsigned char)(i & 0xff)) cr_assert(false, "chunk %d byte %d overwritten", i, k);
        cr_assert_eq(dsmpool_area_ptr_of(a, m + 111), v[i] + 111);
    }
    for (int i = 0; i <= N; i++) cr_assert_eq(dsmpool_area_free(a, v[i]), 0);
    cr_assert_eq(dsmpool_area_flush(a), 0);
    cr_expect_eq(test_pool_free(p), free1, "both spans retired, their pages exactly");
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}


/* A span whose trim gave nothing back (a trim stops at the first piece a
 * split of another owner holds up: palloc.c [exact blocks]) holds its whole
 * block: held counts 64 KiB for the 112 B class's 56 KiB span, and the
 * stats count it too, the pages past its chunks as cached, so held = in
 * use + cached stays exact; giving the chunk back returns the whole block. */
Test(area, a_span_whose_trim_stopped_is_counted_whole) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    dsmpool_ptr first, v;
    cr_assert_eq(dsmpool_area_alloc(a, 16, 0, &first), 0);
    size_t free1 = test_pool_free(p);
    dp_area_test_untrimmed(true);
    int r = dsmpool_area_alloc(a, 100, 0, &v);
    dp_area_test_untrimmed(false);
    cr_assert_eq(r, 0, "%s", dsmpool_last_error());
    cr_expect_eq(free1 - test_pool_free(p), 64 * KIB);
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.held, 64 * KIB + 64 * KIB, "held %zu", (size_t)st.held);
    cr_expect_eq(st.held, st.bytes_in_use + st.bytes_cached, "held %zu != %zu in use + %zu cached", (size_t)st.held,
                 (size_t)st.bytes_in_use, (size_t)st.bytes_cached);
    cr_expect_eq(st.bytes_in_use, 16 + 112, "in use %zu", (size_t)st.bytes_in_use);
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_free(a, v), 0);
    cr_assert_eq(dsmpool_area_flush(a), 0);
    cr_expect_eq(test_pool_free(p), free1, "the whole block back");
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* Issue 11: a small area costs little. A fresh area with 1, 10 and 100
 * small allocations holds at most 256 KiB of the pool, its control block,
 * cache record page and registry page included (PostgreSQL makes many small
 * DSA areas); a small class's span is at most 64 KiB: 100 B takes the
 * 112 B class, whose exact span is 56 KiB (two runs of 28 KiB, the pages
 * 112 B chunks fill without a tail; 8 KiB of its 64 KiB block go back to
 * the pool at once). */
Test(area, a_fresh_area_costs_little) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    static const int counts[3] = {1, 10, 100};
    size_t free0 = test_pool_free(p);
    for (int i = 0; i < 3; i++) {
        dsmpool_area *a = test_area(p, 0);
        dsmpool_ptr v;
        for (int k = 0; k < counts[i]; k++) cr_assert_eq(dsmpool_area_alloc(a, 100, 0, &v), 0);
        dsmpool_area_stats st;
        cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
        size_t cost = st.held + st.control_bytes + st.registry_bytes;
        cr_expect_eq(st.held, 56 * KIB, "%d allocations of 100 B: one 56 KiB span (%zu)", counts[i], st.held);
        cr_expect_leq(cost, 256 * KIB, "%d allocations: the area costs %zu bytes", counts[i], cost);
        cr_expect_leq(free0 - test_pool_free(p), 256 * KIB, "%d allocations: the pool gave %zu bytes", counts[i],
                      free0 - test_pool_free(p));
        dsmpool_area_destroy(a);
        cr_expect_eq(test_pool_free(p), free0, "destroy gave everything back");
    }
    test_check_ok(p);
    dsmpool_detach(p);
}

Test(area, limit_fails_cleanly) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    cr_assert_eq(dsmpool_area_set_limit(a, 4 * MIB), 0);
    dsmpool_ptr v[256];
    int n = 0, r;
    while ((r = dsmpool_area_alloc(a, 32 * KIB, 0, &v[n])) == 0 && n < 255) n++;
    cr_expect_eq(r, -ENOMEM);
    cr_expect_eq(n, 128, "two 2 MiB spans of 64 chunks fit in 4 MiB");
    dsmpool_area_stats st;
    dsmpool_area_get_stats(a, &st);
    cr_expect_eq(st.held, 4 * MIB, "the failed call changed nothing");
    dsmpool_ptr big;
    cr_expect_eq(dsmpool_area_alloc(a, 2 * MIB, 0, &big), -ENOMEM);
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_free(a, v[5]), 0);
    cr_expect_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &v[5]), 0, "room again after a free");
    cr_assert_eq(dsmpool_area_set_limit(a, 0), 0);
    cr_expect_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &v[128]), 0);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* ---- mixed sizes, threads and processes ---------------------------------- */

typedef struct mix_arg {
    dsmpool_area *a;
    unsigned id;
    double seconds;
    uint64_t ops;
    const char *err;
} mix_arg;

/* Allocate random sizes (mostly 32 KiB), write a pattern, verify it before
 * freeing; the pattern names the owner, so overlap between threads or
 * processes shows. */
static const char *mix_run(dsmpool_area *a, unsigned id, double seconds, uint64_t *ops) {
    uint64_t seed = test_seed() * 977 + id, end = test_now_ns() + (uint64_t)(seconds * 1e9);
    struct { dsmpool_ptr p; size_t n; uint64_t tag; } held[128];
    unsigned n = 0;
    while (test_now_ns() < end) {
        for (int k = 0; k < 32; k++) {
            if (n < 128 && (n == 0 || test_rand(&seed) % 100 < 55)) {
                uint64_t r = test_rand(&seed) % 100;
                size_t sz = r < 60 ? 32 * KIB : r < 90 ? 1 + test_rand(&seed) % 4000
                                              : r < 98 ? 1 + test_rand(&seed) % MIB
                                                       : MIB + test_rand(&seed) % (3 * MIB);
                dsmpool_ptr p;
                int e = dsmpool_area_alloc(a, sz, 0, &p);
                if (e == -ENOMEM) continue;
                if (e) return "alloc failed";
                uint64_t tag = ((uint64_t)id << 48) ^ test_rand(&seed);
                uint64_t *w = dsmpool_area_addr(a, p);
                for (size_t i = 0; i < sz / 8; i += 61) w[i] = tag + i;
                held[n].p = p;
                held[n].n = sz;
                held[n++].tag = tag;
            } else if (n) {
                unsigned i = (unsigned)(test_rand(&seed) % n);
                uint64_t *w = dsmpool_area_addr(a, held[i].p);
                for (size_t j = 0; j < held[i].n / 8; j += 61)
                    if (w[j] != held[i].tag + j) return "pattern overwritten: allocations overlap";
                if (dsmpool_area_free(a, held[i].p) != 0) return "free refused";
                held[i] = held[--n];
            }
            (*ops)++;
        }
    }
    while (n--)
        if (dsmpool_area_free(a, held[n].p) != 0) return "final free refused";
    return NULL;
}

static void *mix_thread(void *arg) {
    mix_arg *m = arg;
    m->err = mix_run(m->a, m->id, m->seconds, &m->ops);
    return NULL;
}

/* Write every page of the pool once, so that the threads' timed window
 * measures the area and not first touches (page tables; under TSan also
 * its shadow memory, which made a thread of four on two cores fall under
 * 100 operations in a loaded run once large blocks stopped reusing spans). */
static void touch_whole_pool(dsmpool *p) {
    static dsmpool_seg *s[64];
    int n = 0;
    while (n < 64 && dsmpool_seg_create(p, 4 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s[n]) == 0) {
        memset(dsmpool_seg_address(s[n]), 0, 4 * MIB);
        n++;
    }
    while (n--) dsmpool_seg_detach(s[n]);
}

static void mix_threads(unsigned nt) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 256 * MIB);
    touch_whole_pool(p);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, DSMPOOL_AREA_CHECKED);
    pthread_t t[8];
    mix_arg args[8];
    for (unsigned i = 0; i < nt; i++) {
        args[i] = (mix_arg){a, i, test_seconds(1.5), 0, NULL};
        pthread_create(&t[i], NULL, mix_thread, &args[i]);
    }
    for (unsigned i = 0; i < nt; i++) {
        pthread_join(t[i], NULL);
        cr_expect_null(args[i].err, "thread %u: %s", i, args[i].err);
        cr_expect_gt(args[i].ops, 100);
    }
    test_check_ok(p);
    dsmpool_area_destroy(a);
    cr_expect_eq(test_pool_free(p), free0);
    test_check_ok(p);
    dsmpool_detach(p);
}

Test(area_threads, two, .timeout = 90) { mix_threads(2); }
Test(area_threads, four, .timeout = 90) { mix_threads(4); }

Test(area_threads, exiting_threads_return_their_caches, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 128 * MIB);
    dsmpool_area *a = test_area(p, 0);
    for (int round = 0; round < 4; round++) {
        pthread_t t[4];
        mix_arg args[4];
        for (unsigned i = 0; i < 4; i++) {
            args[i] = (mix_arg){a, i, test_seconds(0.2), 0, NULL};
            pthread_create(&t[i], NULL, mix_thread, &args[i]);
        }
        for (unsigned i = 0; i < 4; i++) {
            pthread_join(t[i], NULL);
            cr_expect_null(args[i].err, "%s", args[i].err);
        }
        dsmpool_area_stats st;
        dsmpool_area_get_stats(a, &st);
        cr_expect_eq(st.caches, 0, "exited threads released their caches");
        cr_expect_eq(st.spans + st.large_blocks, 0, "and every span went back");
    }
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

Test(area_process, forked_workers_mix_sizes, .timeout = 90) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 256 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, DSMPOOL_AREA_CHECKED);
    dsmpool_handle h = dsmpool_area_handle(a);
    pid_t kids[3];
    for (int i = 0; i < 3; i++) {
        if ((kids[i] = fork()) == 0) {
            dsmpool_area *mine;
            if (dsmpool_area_attach(p, h, &mine) != 0) _exit(3);
            uint64_t ops = 0;
            const char *err = mix_run(mine, (unsigned)i + 1, 1.0, &ops);
            if (err) {
                fprintf(stderr, "child %d: %s\n", i, err);
                _exit(4);
            }
            _exit(dsmpool_area_detach(mine) == 0 && dsmpool_area_detach(a) == 0 ? 0 : 5);
        }
    }
    uint64_t ops = 0;
    const char *err = mix_run(a, 0, 1.0, &ops);
    cr_expect_null(err, "parent: %s", err);
    for (int i = 0; i < 3; i++) cr_expect_eq(test_wait(kids[i]), 0, "child %d", i);
    dsmpool_recover(p);
    test_check_ok(p);
    dsmpool_area_destroy(a);
    cr_expect_eq(test_pool_free(p), free0);
    dsmpool_detach(p);
}

Test(area_process, sigkilled_worker_caches_come_back, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 128 * MIB);
    dsmpool_area *a = test_area(p, 0);
    dsmpool_ptr keep;
    cr_assert_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &keep), 0);
    size_t free_before = test_pool_free(p);
    int ready[2];
    cr_assert_eq(pipe(ready), 0);
    pid_t kid = fork();
    if (kid == 0) {
        dsmpool_area *mine;
        if (dsmpool_area_attach(p, dsmpool_area_handle(a), &mine) != 0) _exit(3);
        dsmpool_ptr v[1000];
        for (int i = 0; i < 1000; i++)
            if (dsmpool_area_alloc(mine, i % 3 ? 32 * KIB : 200, 0, &v[i]) != 0) _exit(4);
        for (int i = 0; i < 1000; i++) dsmpool_area_free(mine, v[i]);
        (void)!write(ready[1], "x", 1); /* caches full of chunks, spans in use */
        pause();
        _exit(0);
    }
    char c;
    cr_assert_eq(read(ready[0], &c, 1), 1);
    cr_expect_lt(test_pool_free(p), free_before, "the worker holds spans");
    kill(kid, SIGKILL);
    test_wait(kid);
    cr_assert_eq(dsmpool_recover(p), 0);
    cr_expect_eq(test_pool_free(p), free_before, "recovery returned the dead worker's cached chunks");
    test_check_ok(p);
    cr_expect_eq(dsmpool_area_free(a, keep), 0);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* Pointers written by one process, followed by an exec'ed one that maps the
 * pool elsewhere; half the nodes live in OS fallback segments. */
Test(area_process, relocatable_pointers_across_exec, .timeout = 60) {
    char name[64];
    test_name(name, sizeof name, "relptr");
    dsmpool *p = test_pool(DSMPOOL_BACKING_POSIX, name, 32 * MIB);
    dsmpool_area *a = test_area(p, 0);
    enum { N = 200 };
    dsmpool_ptr head = 0;
    dsmpool_seg *filler = NULL;
    for (unsigned long i = 1; i <= N; i++) {
        if (i == N / 2) { /* fill the pool: the rest must come from the OS */
            dsmpool_stats st;
            dsmpool_get_stats(p, &st);
            cr_assert_eq(dsmpool_seg_create(p, st.subpool[0].largest_free, DSMPOOL_SEG_NO_FALLBACK,
                                            &filler), 0, "%s", dsmpool_last_error());
            while (dsmpool_seg_create(p, 2 * MIB, DSMPOOL_SEG_NO_FALLBACK, &(dsmpool_seg *){0}) == 0) {}
        }
        dsmpool_ptr n;
        /* the second half in a class with no span yet: it needs new (OS) spans */
        size_t sz = i >= N / 2 ? 100 * KIB : i % 2 ? 40000 : 24;
        cr_assert_eq(dsmpool_area_alloc(a, sz, 0, &n), 0, "node %lu: %s", i, dsmpool_last_error());
        unsigned long *node = dsmpool_area_addr(a, n);
        node[0] = head;
        node[1] = i;
        head = n;
    }
    dsmpool_area_stats st;
    dsmpool_area_get_stats(a, &st);
    cr_expect_gt(st.fallback_segments, 0, "some nodes are in OS segments");
    cr_expect(head & (1ull << 63), "the head node is in an OS segment");
    const char *helper = getenv("DSMPOOL_ATTACH_HELPER");
    cr_assert_not_null(helper);
    char hs[32], ps[32], ns[16];
    snprintf(hs, sizeof hs, "%" DSMPOOL_PRIhandle, dsmpool_area_handle(a));
    snprintf(ps, sizeof ps, "%" DSMPOOL_PRIptr, head);
    snprintf(ns, sizeof ns, "%d", N);
    int out[2];
    cr_assert_eq(pipe(out), 0);
    pid_t kid = fork();
    if (kid == 0) {
        dup2(out[1], 1);
        execl(helper, helper, "area", name, hs, ps, ns, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char buf[512] = "";
    size_t got = 0;
    ssize_t k;
    while ((k = read(out[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)k;
    buf[got] = 0;
    cr_assert_eq(test_wait(kid), 0, "helper failed: %s", buf);
    char want[64];
    snprintf(want, sizeof want, "sum=%d", N * (N + 1) / 2);
    cr_expect_neq(strstr(buf, want), NULL, "helper said: %s", buf);
    void *theirs = NULL;
    char *b = strstr(buf, "base=");
    if (b) sscanf(b, "base=%p", &theirs);
    cr_expect_neq(theirs, dsmpool_area_addr(a, head), "the helper mapped it elsewhere");
    unsigned long long q = 0;
    char *nw = strstr(buf, "new=");
    cr_assert_not_null(nw, "%s", buf);
    sscanf(nw, "new=%llx", &q);
    cr_expect_eq(((unsigned long *)dsmpool_area_addr(a, q))[1], 4242, "its node, read here");
    dsmpool_recover(p);
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_destroy(p);
}

/* ---- the hot path: no system call, no page fault ------------------------- */

#define BURST 512 /* chunks: 16 MiB */

/* Allocate BURST chunks, write every page, free them: rounds times. */
static int burst(dsmpool_area *a, int rounds) {
    static _Thread_local dsmpool_ptr v[BURST];
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < BURST; i++) {
            if (dsmpool_area_alloc(a, 32 * KIB, 0, &v[i]) != 0) return -1;
            char *m = dsmpool_area_addr(a, v[i]);
            for (int pg = 0; pg < 8; pg++) m[pg * 4096] = (char)i;
        }
        for (int i = 0; i < BURST; i++)
            if (dsmpool_area_free(a, v[i]) != 0) return -2;
    }
    return 0;
}

static long minflt(int who) {
    struct rusage ru;
    getrusage(who, &ru);
    return ru.ru_minflt;
}

/* The measured window: the minor faults of burst(a, rounds) alone. Every
 * worker calls it once in its warm-up too, from the same place (noinline:
 * one frame at one depth), so that each stack byte the window writes has
 * been written before -- above all getrusage's result, which the kernel
 * copies out after it has read the count. A fork()ed child shares each
 * stack page with its parent until it first writes it (copy-on-write):
 * that copy, made by the first getrusage's copy_to_user into a page of
 * the test function's own frame (the warm-up's frames all lie below it),
 * was the 1 fault per worker that two_processes_no_syscall_no_fault
 * counted in about 1 run in 40: where stack randomisation put a page
 * boundary inside that frame (perf record -e page-faults -d: _copy_to_user
 * into [stack], at the window's start). Faults of the library's own memory
 * still count. */
static __attribute__((noinline)) int burst_faults(dsmpool_area *a, int rounds, int who, long *faults) {
    long f0 = minflt(who);
    int r = burst(a, rounds);
    *faults = minflt(who) - f0;
    return r;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1 /* shadow memory faults in on first touch: minflt cannot be 0 */
#else
#define SANITIZED 0
#endif

typedef struct sc_shared {
    pthread_barrier_t start, done;
    dsmpool_area *a;
    _Atomic long faults[8];
    _Atomic int err[8];
} sc_shared;

typedef struct sc_arg {
    sc_shared *s;
    int id;
} sc_arg;

static void *sc_thread(void *argp) {
    sc_arg *arg = argp;
    sc_shared *s = arg->s;
    long faults;
    if (burst_faults(s->a, 2, RUSAGE_THREAD, &faults) != 0) atomic_store(&s->err[arg->id], 1); /* warm-up */
    pthread_barrier_wait(&s->start);
    if (forbid_memory_syscalls() != 0) atomic_store(&s->err[arg->id], 2);
    if (burst_faults(s->a, 20, RUSAGE_THREAD, &faults) != 0) atomic_store(&s->err[arg->id], 3);
    atomic_store(&s->faults[arg->id], faults);
    pthread_barrier_wait(&s->done);
    for (;;) pause(); /* never exit: thread exit would free (and could munmap) */
    return NULL;
}

static void seccomp_threads(int nt) {
#if defined(__SANITIZE_THREAD__)
    cr_skip_test("TSan's runtime maps memory for every thread it tracks: a seccomp filter on "
                 "mmap would catch the runtime, not dsmpool (the plain and ASan runs test this)");
#endif
    test_private_shm(); /* the process ends with the pool attached: its anchor goes with it */
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 512 * MIB);
    static sc_shared s;
    memset(&s, 0, sizeof s);
    s.a = test_area(p, 0);
    pthread_barrier_init(&s.start, NULL, (unsigned)nt + 1);
    pthread_barrier_init(&s.done, NULL, (unsigned)nt + 1);
    pthread_t t[8];
    static sc_arg args[8];
    for (int i = 0; i < nt; i++) {
        args[i] = (sc_arg){&s, i};
        pthread_create(&t[i], NULL, sc_thread, &args[i]);
    }
    pthread_barrier_wait(&s.start);
    pthread_barrier_wait(&s.done); /* had any worker made a forbidden call, we would be dead */
    for (int i = 0; i < nt; i++) {
        cr_expect_eq(atomic_load(&s.err[i]), 0, "worker %d failed (step %d)", i, atomic_load(&s.err[i]));
        if (!SANITIZED)
            cr_expect_eq(atomic_load(&s.faults[i]), 0, "worker %d took %ld page faults in the burst",
                         i, atomic_load(&s.faults[i]));
    }
    if (SANITIZED) fprintf(stderr, "[NOTE] sanitizer build: system calls checked, page faults not\n");
    /* the workers stay parked; the test process's exit ends them */
}

Test(area_hotpath, two_threads_no_syscall_no_fault, .timeout = 120) { seccomp_threads(2); }

/* The strict proof: every system call of any kind (futex, sched_yield,
 * getcpu, clock_gettime included) that the workers make during 20 steady-
 * state bursts is counted by a seccomp supervisor (seccomp_count.h), and
 * there are none. The warm-up, the spin barrier and the parking after are
 * outside the count, and do make some (the count says how many). */
typedef struct strict_shared {
    sc_count sc;
    dsmpool_area *a;
    _Atomic int ready, go, done;
    _Atomic int err[8];
} strict_shared;

static strict_shared *strict;

static void *strict_thread(void *argp) {
    int id = (int)(intptr_t)argp;
    if (burst(strict->a, 2) != 0) atomic_store(&strict->err[id], 1); /* warm-up */
    if (sc_count_enter(&strict->sc, id) != 0) atomic_store(&strict->err[id], 2);
    atomic_fetch_add(&strict->ready, 1);
    while (!atomic_load(&strict->go)) {
    }
    atomic_store(&strict->sc.measuring[id], 1);
    if (burst(strict->a, 20) != 0) atomic_store(&strict->err[id], 3);
    atomic_store(&strict->sc.measuring[id], 0);
    atomic_fetch_add(&strict->done, 1);
    for (;;) pause(); /* never exit: thread exit frees */
    return NULL;
}

static void strict_threads(int nt) {
#if defined(__SANITIZE_THREAD__)
    cr_skip_test("TSan's runtime makes system calls of its own in every thread it tracks (the plain and "
                 "ASan runs test this)");
#endif
    test_private_shm(); /* the process ends with the pool attached: its anchor goes with it */
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 512 * MIB);
    strict = calloc(1, sizeof *strict);
    cr_assert_not_null(strict);
    cr_assert_eq(sc_count_start(&strict->sc), 0);
    strict->a = test_area(p, 0);
    pthread_t t[8];
    for (int i = 0; i < nt; i++) pthread_create(&t[i], NULL, strict_thread, (void *)(intptr_t)i);
    while (atomic_load(&strict->ready) < nt) usleep(1000);
    usleep(20000); /* the supervisor has every listener */
    atomic_store(&strict->go, 1);
    while (atomic_load(&strict->done) < nt) usleep(1000);
    char names[512];
    sc_count_names(&strict->sc, names, sizeof names);
    for (int i = 0; i < nt; i++) {
        cr_expect_eq(atomic_load(&strict->err[i]), 0, "worker %d failed (step %d)", i, atomic_load(&strict->err[i]));
        cr_expect_eq(atomic_load(&strict->sc.count[i]), 0, "worker %d made %ld system calls in the bursts: %s", i,
                     atomic_load(&strict->sc.count[i]), names);
    }
    fprintf(stderr, "[NOTE] %d threads, 20 bursts of 16 MiB in 32 KiB chunks each: system calls of any kind in "
            "the bursts: %s (outside them: %ld)\n", nt, names, atomic_load(&strict->sc.outside));
    /* the workers stay parked; the test process's exit ends them */
}

Test(area_hotpath, no_system_call_of_any_kind_two_threads, .timeout = 120) { strict_threads(2); }
Test(area_hotpath, no_system_call_of_any_kind_four_threads, .timeout = 120) { strict_threads(4); }
Test(area_hotpath, four_threads_no_syscall_no_fault, .timeout = 120) { seccomp_threads(4); }

static void futex_wait(_Atomic int *w, int v) { syscall(SYS_futex, w, FUTEX_WAIT, v, NULL, NULL, 0); }
static void futex_wake(_Atomic int *w) { syscall(SYS_futex, w, FUTEX_WAKE, 1 << 30, NULL, NULL, 0); }

Test(area_hotpath, two_processes_no_syscall_no_fault, .timeout = 120) {
#if defined(__SANITIZE_THREAD__)
    cr_skip_test("TSan's runtime maps memory for its own records of the atomics a fresh span's directory "
                 "words are (512 a 2 MiB span since the directory has a word per 4 KiB) in each forked "
                 "child: a system call of its own, not the library's (the plain and ASan runs test this)");
#endif
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 512 * MIB);
    dsmpool_area *a = test_area(p, 0);
    struct sync { _Atomic int ready, go; _Atomic long faults[2]; _Atomic int err[2]; } *sy;
    sy = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(sy, MAP_FAILED);
    pid_t kids[2];
    for (int i = 0; i < 2; i++) {
        if ((kids[i] = fork()) == 0) {
            /* warm-up: the first call adopts the pool; the page tables of a
             * shared mapping are not inherited, so map them all now */
            long faults;
            if (dsmpool_prefault(p) != 0 || burst_faults(a, 2, RUSAGE_SELF, &faults) != 0)
                atomic_store(&sy->err[i], 1);
            atomic_fetch_add(&sy->ready, 1);
            futex_wake(&sy->ready);
            while (!atomic_load(&sy->go)) futex_wait(&sy->go, 0);
            if (forbid_memory_syscalls() != 0) atomic_store(&sy->err[i], 2);
            if (burst_faults(a, 20, RUSAGE_SELF, &faults) != 0) atomic_store(&sy->err[i], 3);
            atomic_store(&sy->faults[i], faults);
            _exit(0);
        }
    }
    int r;
    while ((r = atomic_load(&sy->ready)) < 2) futex_wait(&sy->ready, r);
    atomic_store(&sy->go, 1);
    futex_wake(&sy->go);
    for (int i = 0; i < 2; i++) {
        int st = test_wait(kids[i]);
        cr_expect_eq(st, 0, "worker %d ended with %d (%d = killed by seccomp)", i, st, 128 + SIGSYS);
        cr_expect_eq(atomic_load(&sy->err[i]), 0, "worker %d failed (step %d)", i, atomic_load(&sy->err[i]));
        if (!SANITIZED)
            cr_expect_eq(atomic_load(&sy->faults[i]), 0, "worker %d took %ld page faults in the burst",
                         i, atomic_load(&sy->faults[i]));
    }
    dsmpool_recover(p);
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* Children churn an area (mixed sizes, large blocks, drains, retirements)
 * and are SIGKILLed at random moments; after each round recovery must leave
 * a consistent pool, and destroying the area must give every frame back. */
Test(area_process, sigkill_at_random_points_then_destroy_is_exact, .timeout = 240) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 128 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, 0);
    dsmpool_handle h = dsmpool_area_handle(a);
    uint64_t seed = test_seed();
    int rounds = (int)(30 * test_seconds(1.0));
    for (int round = 0; round < rounds; round++) {
        pid_t kids[3];
        for (int k = 0; k < 3; k++) {
            uint64_t cs = test_rand(&seed);
            if ((kids[k] = fork()) == 0) {
                dsmpool_area *mine;
                if (dsmpool_area_attach(p, h, &mine) != 0) _exit(3);
                dsmpool_ptr held[256];
                int n = 0;
                for (;;) {
                    uint64_t r = test_rand(&cs) % 100;
                    if (n < 256 && r < 52) {
                        size_t sz = r < 40 ? 32 * KIB : r < 50 ? 1 + test_rand(&cs) % 5000
                                                               : MIB + test_rand(&cs) % MIB;
                        if (dsmpool_area_alloc(mine, sz, 0, &held[n]) == 0) n++;
                    } else if (n) {
                        int i = (int)(test_rand(&cs) % (uint64_t)n);
                        dsmpool_area_free(mine, held[i]);
                        held[i] = held[--n];
                    }
                }
            }
        }
        struct timespec ts = {0, (long)(test_rand(&seed) % 20000000)};
        nanosleep(&ts, NULL);
        for (int k = 0; k < 3; k++) kill(kids[k], SIGKILL);
        for (int k = 0; k < 3; k++) test_wait(kids[k]);
        cr_assert_eq(dsmpool_recover(p), 0);
        int r = dsmpool_check(p);
        cr_assert_eq(r, 0, "round %d (seed %llu): %s", round, (unsigned long long)test_seed(),
                     dsmpool_last_error());
        dsmpool_area_stats st;
        cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
        cr_assert_eq(st.caches, 0, "round %d: the dead workers' caches were released", round);
    }
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    test_check_ok(p);
    cr_expect_eq(test_pool_free(p), free0, "every frame back after the area is destroyed");
    dsmpool_detach(p);
}

/* ---- OS fallback pointers, and an area's lifetime against detach, death and destroy ---- */

/* Fill the pool so that an area's next spans must come from OS segments. */
static dsmpool_seg *fill_pool(dsmpool *p) {
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    dsmpool_seg *big = NULL, *s;
    cr_assert_eq(dsmpool_seg_create(p, st.subpool[0].largest_free, DSMPOOL_SEG_NO_FALLBACK, &big), 0);
    while (dsmpool_seg_create(p, 2 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s) == 0) {}
    /* and the holes below 2 MiB, where exact large blocks would fit */
    while (dsmpool_seg_create(p, 64 * KIB, DSMPOOL_SEG_NO_FALLBACK, &s) == 0) {}
    return big;
}

typedef struct conv_arg {
    dsmpool_area *a;
    dsmpool_ptr *v;
    int n;
    int bad;
    pthread_barrier_t *go;
} conv_arg;

static void *convert_all(void *arg) {
    conv_arg *c = arg;
    if (c->go) pthread_barrier_wait(c->go); /* both start together */
    for (int i = 0; i < c->n; i++) {
        unsigned long *m = dsmpool_area_addr(c->a, c->v[i]);
        if (!m || m[0] != (unsigned long)i) c->bad++;
    }
    return NULL;
}

/* Two threads of a process that has mapped none of an area's OS segments
 * convert the same pointers at once: both must get working mappings. */
Test(area_fallback, fallback_mapped_by_two_threads_at_once, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_area *a = test_area(p, 0);
    fill_pool(p);
    enum { N = 64 };
    static dsmpool_ptr v[N];
    for (int i = 0; i < N; i++) { /* 512 KiB blocks: each takes a new OS span */
        cr_assert_eq(dsmpool_area_alloc(a, 512 * KIB, 0, &v[i]), 0, "%s", dsmpool_last_error());
        cr_assert(v[i] & DSMPOOL_PTR_OS_BIT);
        *(unsigned long *)dsmpool_area_addr(a, v[i]) = (unsigned long)i;
    }
    pid_t kid = fork();
    if (kid == 0) {
        dsmpool_area *b;
        if (dsmpool_area_attach(p, dsmpool_area_handle(a), &b) != 0) _exit(3);
        pthread_t t1, t2;
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        conv_arg c1 = {b, v, N, 0, &go}, c2 = {b, v, N, 0, &go};
        pthread_create(&t1, NULL, convert_all, &c1);
        pthread_create(&t2, NULL, convert_all, &c2);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        conv_arg c3 = {b, v, N, 0, NULL}; /* and again, after both installed theirs */
        convert_all(&c3);
        _exit(c1.bad || c2.bad || c3.bad ? 4 : 0);
    }
    cr_expect_eq(test_wait(kid), 0, "every conversion gave a working mapping");
    dsmpool_recover(p);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* A pointer into another area's OS segment is refused, tags being unique. */
Test(area_fallback, fallback_pointer_of_another_area_refused, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_area *a = test_area(p, 0), *b = test_area(p, 0);
    fill_pool(p);
    dsmpool_ptr pa, pb;
    cr_assert_eq(dsmpool_area_alloc(a, 512 * KIB, 0, &pa), 0);
    cr_assert_eq(dsmpool_area_alloc(b, 512 * KIB, 0, &pb), 0);
    cr_assert((pa & DSMPOOL_PTR_OS_BIT) && (pb & DSMPOOL_PTR_OS_BIT));
    cr_expect_neq(pa, pb);
    cr_expect_eq(dsmpool_area_free(b, pa), -EINVAL);
    cr_expect_eq(dsmpool_area_free(a, pb), -EINVAL);
    cr_expect_null(dsmpool_area_addr(b, pa), "no address for a foreign pointer");
    cr_expect_eq(dsmpool_area_free(a, pa), 0);
    dsmpool_area_destroy(a);
    dsmpool_area_destroy(b);
    dsmpool_detach(p);
}

/* Issue 24: a fallback pointer carries a check drawn from the OS segment
 * its registry entry holds (area_pointer.c [check]), so once the entry
 * is given back and reused for a new segment the old pointer names nothing;
 * before, it was bit for bit the new block's, and its free freed that. The
 * new pointer equals the old one only when the two checks collide (2^-13
 * for 512 KiB, 2^-16 for a 56 KiB span): then the test takes another
 * segment, keeping the old pointer. */
static dsmpool_ptr realloc_same_entry(dsmpool_area *a, size_t size, dsmpool_ptr old) {
    dsmpool_ptr v = 0;
    for (int i = 0;; i++) {
        cr_assert_eq(dsmpool_area_alloc(a, size, 0, &v), 0, "%s", dsmpool_last_error());
        cr_assert_eq(v >> 32, old >> 32, "%zu B: entry reused (the same tag and entry bits): %016llx, was %016llx",
                     size, (unsigned long long)v, (unsigned long long)old);
        if (v != old || i == 7) break;
        cr_assert_eq(dsmpool_area_free(a, v), 0);
        dsmpool_area_flush(a);
    }
    return v;
}

static void expect_stale_refused(dsmpool_area *a, dsmpool_ptr old, dsmpool_ptr v, size_t size) {
    unsigned char *m = dsmpool_area_addr(a, v);
    cr_assert_not_null(m);
    memset(m, 0x5a, size);
    unsigned char *o = dsmpool_area_addr(a, old);
    cr_expect(o == NULL, "%zu B: the stale pointer %016llx converts to %p (the new block is at %p)", size,
              (unsigned long long)old, (void *)o, (void *)m);
    cr_expect_null(dsmpool_area_addr(a, old + 8), "%zu B: nor a byte inside it", size);
    cr_expect_eq(dsmpool_area_usable_size(a, old), 0, "%zu B: usable size of the stale pointer", size);
    cr_expect_eq(dsmpool_area_free(a, old), -EINVAL, "%zu B: free of the stale pointer", size);
    cr_expect_eq(dsmpool_area_usable_size(a, v), size, "%zu B: the new block is still live", size);
    cr_expect_eq(m[0], 0x5a);
    cr_expect_eq(m[size - 1], 0x5a, "%zu B: the new block is intact", size);
    cr_expect_eq(dsmpool_area_free(a, v), 0, "%zu B: the new block is still freeable: %s", size,
                 dsmpool_last_error());
}

Test(area_fallback, stale_fallback_pointer_refused_after_entry_reuse, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_area *a = test_area(p, 0);
    fill_pool(p);
    /* a large block: its entry goes back with the free */
    dsmpool_ptr old;
    cr_assert_eq(dsmpool_area_alloc(a, 512 * KIB, 0, &old), 0, "%s", dsmpool_last_error());
    cr_assert(old & DSMPOOL_PTR_OS_BIT);
    cr_assert_eq(dsmpool_area_free(a, old), 0);
    expect_stale_refused(a, old, realloc_same_entry(a, 512 * KIB, old), 512 * KIB);
    /* a chunk of an OS span (112 B chunks, a 56 KiB span): the entry goes
     * back when the flush makes the span whole */
    cr_assert_eq(dsmpool_area_flush(a), 0);
    cr_assert_eq(dsmpool_area_alloc(a, 112, 0, &old), 0, "%s", dsmpool_last_error());
    cr_assert(old & DSMPOOL_PTR_OS_BIT);
    cr_assert_eq(dsmpool_area_free(a, old), 0);
    cr_assert_eq(dsmpool_area_flush(a), 0);
    expect_stale_refused(a, old, realloc_same_entry(a, 112, old), 112);
    cr_assert_eq(dsmpool_area_flush(a), 0);
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* The check leaves pointer arithmetic alone: inside an OS allocation p + k
 * names byte k both ways, for spans and blocks of every check width; a
 * pointer of another area, or one whose check bits were changed, is
 * refused. */
Test(area_fallback, fallback_pointer_arithmetic_and_checks, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_area *a = test_area(p, 0), *b = test_area(p, 0);
    fill_pool(p);
    /* spans of 56 KiB, 64 KiB and 2 MiB; blocks of 300 KiB, 2, 3 and 4 MiB */
    size_t sizes[] = {112, 1024, 32 * KIB, 300 * KIB, 2 * MIB, 3 * MIB, 4 * MIB};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    dsmpool_ptr v[NS], w;
    cr_assert_eq(dsmpool_area_alloc(b, 112, 0, &w), 0, "%s", dsmpool_last_error());
    cr_assert(w & DSMPOOL_PTR_OS_BIT);
    for (unsigned i = 0; i < NS; i++) {
        cr_assert_eq(dsmpool_area_alloc(a, sizes[i], 0, &v[i]), 0, "%zu: %s", sizes[i], dsmpool_last_error());
        cr_assert(v[i] & DSMPOOL_PTR_OS_BIT, "%zu B came from the pool", sizes[i]);
        size_t n = dsmpool_area_usable_size(a, v[i]);
        cr_assert_geq(n, sizes[i]);
        char *m = dsmpool_area_addr(a, v[i]);
        cr_assert_not_null(m);
        memset(m, (int)i + 1, n);
        size_t ks[] = {0, 1, 8, 4095, 4096, n / 2, n - 8, n - 1};
        for (unsigned j = 0; j < sizeof ks / sizeof ks[0]; j++) {
            size_t k = ks[j];
            cr_assert_eq(dsmpool_area_addr(a, v[i] + k), m + k, "%zu B: addr(p + %zu)", sizes[i], k);
            cr_assert_eq(dsmpool_area_ptr_of(a, m + k), v[i] + k, "%zu B: ptr_of(addr(p) + %zu)", sizes[i], k);
        }
        cr_expect_null(dsmpool_area_addr(b, v[i]), "%zu B: another area's pointer", sizes[i]);
        cr_expect_eq(dsmpool_area_free(b, v[i]), -EINVAL);
        cr_expect_eq(dsmpool_area_usable_size(b, v[i]), 0);
        for (unsigned bit = 24; bit < 32; bit++) { /* the check's bits, or past every segment */
            dsmpool_ptr x = v[i] ^ (1ull << bit);
            cr_expect_null(dsmpool_area_addr(a, x), "%zu B: bit %u changed", sizes[i], bit);
            cr_expect_eq(dsmpool_area_usable_size(a, x), 0, "%zu B: bit %u changed", sizes[i], bit);
            cr_expect_eq(dsmpool_area_free(a, x), -EINVAL, "%zu B: bit %u changed", sizes[i], bit);
        }
        cr_expect_eq(m[0], (char)(i + 1));
        cr_expect_eq(m[n - 1], (char)(i + 1), "%zu B: intact", sizes[i]);
    }
    cr_expect_null(dsmpool_area_addr(a, w), "b's OS chunk in a");
    cr_expect_eq(dsmpool_area_free(a, w), -EINVAL);
    for (unsigned i = 0; i < NS; i++) cr_assert_eq(dsmpool_area_free(a, v[i]), 0, "%s", dsmpool_last_error());
    cr_assert_eq(dsmpool_area_free(b, w), 0);
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_area_destroy(b);
    dsmpool_detach(p);
}

/* The pool is removed by force (the OS segments' names go; a destroy keeps
 * them until the last process leaves) before another process frees a
 * pointer into one it never mapped: an error, not a crash. */
Test(area_lifetime, free_after_names_are_gone_is_an_error, .timeout = 60) {
    char name[64];
    test_name(name, sizeof name, "gone");
    dsmpool *p = test_pool(DSMPOOL_BACKING_POSIX, name, 16 * MIB);
    dsmpool_area *a = test_area(p, 0);
    fill_pool(p);
    dsmpool_ptr v;
    cr_assert_eq(dsmpool_area_alloc(a, 200 * KIB, 0, &v), 0);
    dsmpool *q;
    cr_assert_eq(dsmpool_attach(name, &q), 0);
    dsmpool_area *b;
    cr_assert_eq(dsmpool_area_attach(q, dsmpool_area_handle(a), &b), 0);
    dsmpool_area_detach(a);
    cr_assert_eq(dsmpool_remove(name, true), 0, "%s", dsmpool_last_error());
    cr_expect_eq(dsmpool_area_free(b, v), -ESTALE, "%s", dsmpool_last_error());
    cr_expect_null(dsmpool_area_addr(b, v));
    dsmpool_area_detach(b);
    dsmpool_detach(q);
    dsmpool_detach(p);
}

static pthread_barrier_t used, detached;

static void *alloc_then_exit(void *arg) {
    dsmpool_ptr v;
    dsmpool_area_alloc(arg, 32 * KIB, 0, &v);
    dsmpool_area_free(arg, v);
    pthread_barrier_wait(&used);
    pthread_barrier_wait(&detached); /* exits (its destructor runs) after the pool is gone */
    return NULL;
}

/* dsmpool_detach with areas still attached: they go with the pool, and a
 * thread that exits later does not touch freed memory. */
Test(area_lifetime, pool_detach_takes_its_areas, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    dsmpool_area *a = test_area(p, 0);
    pthread_t t;
    pthread_barrier_init(&used, NULL, 2);
    pthread_barrier_init(&detached, NULL, 2);
    pthread_create(&t, NULL, alloc_then_exit, a);
    pthread_barrier_wait(&used);
    cr_assert_eq(dsmpool_detach(p), 0);
    pthread_barrier_wait(&detached);
    pthread_join(t, NULL);
    cr_expect_eq(dsmpool_area_detach(a), -EINVAL, "already gone with the pool");
}

/* Dead processes that never detached still hold cache records: a new
 * thread finds one after the library recovers them on its own. */
Test(area_lifetime, dead_processes_caches_are_reclaimed, .timeout = 120) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    for (int i = 0; i < 260; i++) {
        pid_t kid = fork();
        if (kid == 0) {
            dsmpool_ptr v;
            _exit(dsmpool_area_alloc(a, 100, 0, &v) == 0 ? 0 : 3); /* exits holding a cache */
        }
        int st = test_wait(kid);
        if (i < 256) cr_assert_eq(st, 0, "child %d", i);
        else cr_expect_eq(st, 0, "child %d found a cache after recovery", i);
    }
    dsmpool_ptr v;
    cr_expect_eq(dsmpool_area_alloc(a, 100, 0, &v), 0, "%s", dsmpool_last_error());
    dsmpool_area_destroy(a);
    test_check_ok(p);
    dsmpool_detach(p);
}

/* Destroy while children are still allocating: their calls fail with
 * -ESTALE; nothing in the pool is lost or freed twice. */
Test(area_lifetime, destroy_while_others_allocate, .timeout = 120) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 128 * MIB);
    size_t free0 = test_pool_free(p);
    for (int round = 0; round < (int)(8 * test_seconds(1.0)); round++) {
        dsmpool_area *a = test_area(p, 0);
        dsmpool_handle h = dsmpool_area_handle(a);
        pid_t kids[3];
        for (int k = 0; k < 3; k++) {
            if ((kids[k] = fork()) == 0) {
                dsmpool_area *mine;
                if (dsmpool_area_attach(p, h, &mine) != 0) _exit(0); /* already destroyed */
                uint64_t s = test_seed() + (uint64_t)k;
                dsmpool_ptr held[64];
                int n = 0;
                for (;;) {
                    int r;
                    if (n < 64 && test_rand(&s) % 2) {
                        size_t sz = test_rand(&s) % 4 ? 32 * KIB : MIB + 1;
                        r = dsmpool_area_alloc(mine, sz, 0, &held[n]);
                        if (r == 0) n++;
                    } else if (n) {
                        r = dsmpool_area_free(mine, held[--n]);
                    } else {
                        continue;
                    }
                    if (r == -ESTALE) _exit(0);
                }
            }
        }
        usleep(5000 + 1000 * round);
        cr_assert_eq(dsmpool_area_destroy(a), 0);
        for (int k = 0; k < 3; k++) cr_expect_eq(test_wait(kids[k]), 0);
        cr_assert_eq(dsmpool_recover(p), 0);
        int r = dsmpool_check(p);
        cr_assert_eq(r, 0, "round %d: %s", round, dsmpool_last_error());
    }
    cr_expect_eq(test_pool_free(p), free0, "every frame back once the areas are gone");
    dsmpool_detach(p);
}
