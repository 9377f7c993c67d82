/*
 * test_exact.c -- exact blocks (palloc.c [exact blocks], proc.c [exact blocks]): segments
 * and large area blocks exact to the page, a tail given back
 * at once and taken back by a grow in place; splits under deaths.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dp_internal.h"
#include "dp_palloc.h"
#include "testhooks.h"
#include "testutil.h"


typedef struct tpa {
    dp_pa pa;
    char *meta;
    uint64_t frames;
} tpa;

static void tpa_init(tpa *t, uint64_t frames) {
    dp_pa_geom g;
    uint64_t cur = 64;
    cr_assert_eq(dp_pa_layout(frames, 4, &cur, &g), 0);
    t->meta = aligned_alloc(64, (cur + 63) & ~63ull);
    cr_assert_not_null(t->meta);
    memset(t->meta, 0xa5, cur);
    cr_assert_eq(dp_pa_view(&t->pa, t->meta, cur, &g), 0);
    dp_pa_format(&t->pa);
    t->frames = frames;
}

/* The tree's map of allocated frames must be the model's, bit for bit. */
static void expect_map(tpa *t, const uint8_t *model, const char *when, int step) {
    uint64_t *map = calloc((t->frames + 63) / 64, 8);
    dp_pa_walk w;
    dp_pa_walk_tree(&t->pa, &w, map, NULL, NULL);
    cr_assert_eq(w.bad, 0, "%s step %d: %s", when, step, w.why);
    cr_assert_eq(w.free_frames + w.used_frames, t->frames);
    for (uint64_t f = 0; f < t->frames; f++)
        cr_assert_eq((map[f / 64] >> (f % 64)) & 1, model[f], "%s step %d (seed %llu): frame %llu",
                     when, step, (unsigned long long)test_seed(), (unsigned long long)f);
    free(map);
}

static unsigned order_of(uint64_t n) { return n <= 1 ? 0 : 64u - (unsigned)__builtin_clzll(n - 1); }

/* Random exact blocks (1 .. 4096 frames), grown in place at random, freed
 * at random, against a model of every frame; the tree's map checked after
 * every step. */
Test(exact, palloc_trim_grow_free_against_model, .timeout = 120) {
    tpa t;
    const uint64_t frames = 16 * 512; /* 32 MiB: four levels */
    tpa_init(&t, frames);
    uint8_t *model = calloc(frames, 1);
    struct { uint64_t f, n; unsigned k; } live[512];
    unsigned nlive = 0, grown = 0, blocked = 0;
    uint64_t seed = test_seed();
    for (int step = 0; step < 3000; step++) {
        unsigned op = (unsigned)(test_rand(&seed) % 100);
        if (nlive == 0 || (op < 50 && nlive < 512)) {
            uint64_t big = test_rand(&seed) % 4 ? 64 : 4096; /* one call per statement: same sequence in every build */
            uint64_t n = 1 + test_rand(&seed) % big;
            unsigned k = order_of(n);
            uint64_t f;
            int r = dp_pa_alloc(&t.pa, k, 1, (unsigned)(test_rand(&seed) % 4), &f);
            if (r == -ENOMEM) continue;
            cr_assert_eq(r, 0);
            uint64_t kept = dp_pa_trim(&t.pa, f, k, n, 1);
            cr_assert_eq(kept, n, "step %d: nothing else runs, so the whole tail goes back", step);
            for (uint64_t i = 0; i < (1ull << k); i++) {
                if (i < n) cr_assert_eq(model[f + i], 0, "step %d: overlap at %llu", step, (unsigned long long)(f + i));
                if (i < n) model[f + i] = 1;
            }
            live[nlive].f = f;
            live[nlive].n = n;
            live[nlive++].k = k;
        } else if (op < 70) {
            unsigned i = (unsigned)(test_rand(&seed) % nlive);
            uint64_t all = 1ull << live[i].k;
            if (live[i].n == all) continue;
            uint64_t to = live[i].n + 1 + test_rand(&seed) % (all - live[i].n);
            bool tail_free = true;
            for (uint64_t q = live[i].n; q < to; q++) tail_free &= !model[live[i].f + q];
            int r = dp_pa_grow(&t.pa, live[i].f, live[i].k, live[i].n, to, 1);
            cr_assert_eq(r, tail_free ? 0 : -ENOMEM, "step %d: grow %llu -> %llu, tail free %d", step,
                         (unsigned long long)live[i].n, (unsigned long long)to, tail_free);
            if (r == 0) {
                memset(model + live[i].f + live[i].n, 1, to - live[i].n);
                live[i].n = to;
                grown++;
            } else {
                blocked++;
            }
        } else {
            unsigned i = (unsigned)(test_rand(&seed) % nlive);
            cr_assert_eq(dp_pa_free_run(&t.pa, live[i].f, live[i].k, live[i].n), 0, "step %d", step);
            memset(model + live[i].f, 0, live[i].n);
            live[i] = live[--nlive];
        }
        expect_map(&t, model, "random", step);
    }
    cr_expect_gt(grown, 10, "grows in place happened (%u)", grown);
    cr_expect_gt(blocked, 10, "grows blocked by a neighbour happened (%u)", blocked);
    while (nlive) {
        nlive--;
        cr_assert_eq(dp_pa_free_run(&t.pa, live[nlive].f, live[nlive].k, live[nlive].n), 0);
        memset(model + live[nlive].f, 0, live[nlive].n);
    }
    expect_map(&t, model, "all freed", 0);
    dp_pa_reclaim(&t.pa, 1);
    uint64_t f;
    cr_assert_eq(dp_pa_alloc(&t.pa, 13, 1, 0, &f), 0, "everything coalesces");
    free(model);
    free(t.meta);
}

/* A split that another owner's step blocks stops the trim: the block keeps
 * the rest of its tail, and frees as what it kept. */
Test(exact, palloc_trim_stops_at_a_busy_node) {
    tpa t;
    tpa_init(&t, 1024);
    uint64_t f;
    cr_assert_eq(dp_pa_alloc(&t.pa, 6, 1, 0, &f), 0); /* two FULL leaves of a level-1 node */
    /* an opener (owner 9) that read a stale FREE holds the second leaf */
    dp_a64 *leaf = dp_pa_word(&t.pa, 0, (f >> 5) + 1);
    uint64_t was = atomic_load(leaf);
    atomic_store(leaf, (2ull << 32) | (9ull << 35));
    uint64_t kept = dp_pa_trim(&t.pa, f, 6, 40, 1);
    cr_expect_eq(kept, 64, "the tail inside the busy leaf stays with the block");
    atomic_store(leaf, was);
    cr_assert_eq(dp_pa_free_run(&t.pa, f, 6, kept), 0);
    dp_pa_walk w;
    dp_pa_walk_tree(&t.pa, &w, NULL, NULL, NULL);
    cr_expect_eq(w.bad, 0, "%s", w.why);
    cr_expect_eq(w.used_frames, 0);
    free(t.meta);
}

/* Recovery of a dead owner's split (palloc.c [recovery]): undone while the
 * parent still says FULL, finished once it says PART; the frames stay
 * allocated either way. */
static bool dead_is_7(uint32_t owner, void *arg) { (void)arg; return owner == 7; }

Test(exact, palloc_half_split_is_undone_or_finished) {
    tpa t;
    tpa_init(&t, 1024); /* root level 2 */
    uint64_t f;
    cr_assert_eq(dp_pa_alloc(&t.pa, 6, 1, 0, &f), 0);
    uint64_t li = f >> 5, l1 = f >> 9;
    dp_a64 *leaf = dp_pa_word(&t.pa, 0, li + 1), *node = dp_pa_word(&t.pa, 1, l1);
    unsigned ci = (unsigned)((li + 1) & 15);
    /* claimed, not linked */
    atomic_store(leaf, (2ull << 32) | (7ull << 35) | 0xffffffffull);
    dp_pa_walk w;
    dp_pa_walk_tree(&t.pa, &w, NULL, NULL, NULL);
    cr_expect_eq(w.used_frames, 64);
    cr_expect_eq(dp_pa_recover(&t.pa, dead_is_7, NULL), 1);
    cr_expect_eq(atomic_load(leaf) >> 32 & 7, 0, "undone: IDLE under the FULL parent");
    /* claimed and linked */
    atomic_store(leaf, (2ull << 32) | (7ull << 35) | 0xffffffffull);
    atomic_store(node, atomic_load(node) ^ (3ull << (2 * ci)));
    dp_pa_walk_tree(&t.pa, &w, NULL, NULL, NULL);
    cr_expect_eq(w.used_frames, 64, "a split in flight holds its frames");
    cr_expect_eq(w.orphaned, 1);
    cr_expect_eq(dp_pa_recover(&t.pa, dead_is_7, NULL), 1);
    cr_expect_eq(atomic_load(leaf), (1ull << 32) | 0xffffffffull, "finished: OPEN, all held");
    dp_pa_walk_tree(&t.pa, &w, NULL, NULL, NULL);
    cr_expect_eq(w.bad, 0, "%s", w.why);
    cr_expect_eq(w.used_frames, 64);
    /* the block frees whole, although one leaf of it is now described finer */
    cr_assert_eq(dp_pa_free_run(&t.pa, f, 6, 64), 0);
    dp_pa_walk_tree(&t.pa, &w, NULL, NULL, NULL);
    cr_expect_eq(w.used_frames, 0);
    free(t.meta);
}

/* Create segments of `size` bytes (pool only) until `want` of them start
 * in [lo, hi), or the pool or segs[max] is full: where blocks land depends
 * on the CPU's reservations, so the tests search instead of assuming.
 * Returns how many were made; *last is the index of the last one in range
 * (-1 if none), and *found how many were. */
static int segs_until_in(dsmpool *p, size_t size, const char *lo, const char *hi, int want,
                         dsmpool_seg **segs, int max, int *last, int *found) {
    int n = 0;
    *last = -1;
    *found = 0;
    while (n < max && *found < want && dsmpool_seg_create(p, size, DSMPOOL_SEG_NO_FALLBACK, &segs[n]) == 0) {
        char *m = dsmpool_seg_address(segs[n]);
        if (m >= lo && m < hi) {
            *last = n;
            ++*found;
        }
        n++;
    }
    return n;
}

/* After a scribble: every segment but the neighbour nb goes, then the pool
 * is filled with segments of `size` again; none may be the neighbour's
 * memory b, which keeps its pattern. */
static void expect_neighbour_kept(dsmpool *p, dsmpool_seg **segs, int n, int nb, size_t size,
                                  const char *b, unsigned char pattern) {
    for (int i = 0; i < n; i++) /* all but the neighbour go, so the pool has room again */
        if (i != nb) dsmpool_seg_detach(segs[i]);
    dsmpool_seg *s;
    for (int i = 0; i < 4096 && dsmpool_seg_create(p, size, DSMPOOL_SEG_NO_FALLBACK, &s) == 0; i++)
        cr_assert_neq((char *)dsmpool_seg_address(s), b, "the neighbour's memory was handed out again");
    for (size_t i = 0; i < size; i++) cr_assert_eq((unsigned char)b[i], pattern);
}

/* ---- through the pool ---------------------------------------------------- */

Test(exact, segments_are_exact_to_the_page) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 256 * MIB);
    size_t free0 = test_pool_free(p);
    enum { LIVE = 16 }; /* within the slot's inline attachment records */
    uint64_t seed = test_seed();
    for (int round = 0; round < 4; round++) {
        dsmpool_seg *s[LIVE];
        size_t want[LIVE], used = 0;
        for (int i = 0; i < LIVE; i++) {
            size_t n = 1 + test_rand(&seed) % (i % 4 ? 300 * KIB : 6 * MIB);
            unsigned fl = i % 8 == 7 ? DSMPOOL_SEG_HUGE_ROUND : 0;
            cr_assert_eq(dsmpool_seg_create(p, n, fl | DSMPOOL_SEG_NO_FALLBACK, &s[i]), 0, "%s",
                         dsmpool_last_error());
            size_t page = (fl && n > MIB) ? 2 * MIB : 4 * KIB;
            want[i] = (n + page - 1) / page * page;
            cr_expect_eq(dsmpool_seg_size(s[i]), want[i], "segment %d of %zu bytes", i, n);
            memset(dsmpool_seg_address(s[i]), 0x40 + i, want[i]);
            used += want[i];
            cr_expect_eq(test_pool_free(p), free0 - used, "the pool holds exactly the pages (%d)", i);
        }
        test_check_ok(p);
        for (int i = 0; i < LIVE; i++) {
            unsigned char *m = dsmpool_seg_address(s[i]);
            for (size_t k = 0; k < want[i]; k += 4093) cr_assert_eq(m[k], 0x40 + i, "segment %d byte %zu", i, k);
        }
        for (int i = round % 2; i < LIVE; i += 2) cr_assert_eq(dsmpool_seg_detach(s[i]), 0);
        test_check_ok(p);
        for (int i = 1 - round % 2; i < LIVE; i += 2) cr_assert_eq(dsmpool_seg_detach(s[i]), 0);
        cr_expect_eq(test_pool_free(p), free0);
    }
    test_check_ok(p);
    dsmpool_seg *all;
    cr_assert_eq(dsmpool_seg_create(p, 64 * MIB, DSMPOOL_SEG_NO_FALLBACK, &all), 0,
                 "the tails coalesced again: %s", dsmpool_last_error());
    dsmpool_seg_detach(all);
    dsmpool_detach(p);
}

static const char *die_point;
static void die_at(const char *point) {
    if (!strcmp(point, die_point)) raise(SIGKILL);
}

/* A process killed inside the split of its new segment's tail (each of the
 * two steps): recovery finishes or undoes the split, the leak sweep returns
 * the block that no descriptor names, and nothing else moves. */
Test(exact, death_inside_a_split_is_recovered) {
    static const char *points[] = {"palloc.split.claimed", "palloc.split.linked"};
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_seg *keep;
    cr_assert_eq(dsmpool_seg_create(p, 40 * KIB, 0, &keep), 0); /* a neighbour that must survive */
    memset(dsmpool_seg_address(keep), 0x77, 40 * KIB);
    size_t free0 = test_pool_free(p);
    for (int k = 0; k < 2; k++) {
        pid_t c = fork();
        if (c == 0) {
            die_point = points[k];
            dp_inject_fn = die_at;
            dsmpool_seg *s;
            dsmpool_seg_create(p, 100 * KIB, 0, &s);
            _exit(5);
        }
        cr_assert_eq(test_wait(c), 128 + SIGKILL, "the child did not die at %s", points[k]);
        test_recover_all(p);
        test_check_ok(p);
        cr_expect_eq(test_pool_free(p), free0, "after a death at %s everything came back", points[k]);
    }
    unsigned char *m = dsmpool_seg_address(keep);
    for (size_t i = 0; i < 40 * KIB; i++) cr_assert_eq(m[i], 0x77);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 100 * KIB, 0, &s), 0);
    cr_expect_eq(dsmpool_seg_size(s), 100 * KIB);
    dsmpool_seg_detach(s);
    dsmpool_seg_detach(keep);
    dsmpool_detach(p);
}

/* Four processes create and destroy exact segments and large area blocks
 * at once, each writing its own pattern and checking it before it lets go:
 * a tail given back to one while another still used it would show. */
Test(exact, processes_share_the_tails, .timeout = 120) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 256 * MIB);
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0);
    size_t free0 = test_pool_free(p);
    pid_t kids[4];
    for (int k = 0; k < 4; k++) {
        if ((kids[k] = fork()) == 0) {
            uint64_t seed = test_seed() + (uint64_t)k * 977;
            dsmpool_seg *s[8] = {0};
            dsmpool_ptr v[8] = {0};
            size_t ns[8] = {0}, nv[8] = {0};
            double end = (double)test_now_ns() + test_seconds(1.5) * 1e9;
            int it = 0;
            while ((double)test_now_ns() < end || it < 200) {
                unsigned i = (unsigned)(test_rand(&seed) % 8);
                unsigned char tag = (unsigned char)(k * 64 + i * 8 + (it & 7));
                if (s[i]) {
                    unsigned char *m = dsmpool_seg_address(s[i]);
                    for (size_t q = 0; q < ns[i]; q += 1021)
                        if (m[q] != m[0]) _exit(10);
                    if (dsmpool_seg_detach(s[i]) != 0) _exit(11);
                    s[i] = NULL;
                } else {
                    size_t n = 1 + test_rand(&seed) % (600 * KIB);
                    if (dsmpool_seg_create(p, n, DSMPOOL_SEG_NO_FALLBACK, &s[i]) != 0) _exit(12);
                    ns[i] = dsmpool_seg_size(s[i]);
                    if (ns[i] != (n + 4095) / 4096 * 4096) _exit(13);
                    memset(dsmpool_seg_address(s[i]), tag, ns[i]);
                }
                if (v[i]) {
                    unsigned char *m = dsmpool_area_addr(a, v[i]);
                    for (size_t q = 0; q < nv[i]; q += 1021)
                        if (m[q] != m[0]) _exit(14);
                    size_t grow = nv[i] + test_rand(&seed) % (512 * KIB);
                    if (test_rand(&seed) % 2 && dsmpool_area_realloc(a, &v[i], grow, 0) == 0) {
                        m = dsmpool_area_addr(a, v[i]);
                        for (size_t q = 0; q < nv[i]; q += 1021)
                            if (m[q] != m[0]) _exit(15);
                        nv[i] = dsmpool_area_usable_size(a, v[i]);
                        memset(m, tag, nv[i]);
                    } else if (dsmpool_area_free(a, v[i]) != 0) {
                        _exit(16);
                    } else {
                        v[i] = 0;
                    }
                } else {
                    size_t n = MIB + 1 + test_rand(&seed) % (3 * MIB);
                    if (dsmpool_area_alloc(a, n, 0, &v[i]) != 0) _exit(17);
                    nv[i] = dsmpool_area_usable_size(a, v[i]);
                    if (nv[i] != (n + 4095) / 4096 * 4096) _exit(18);
                    memset(dsmpool_area_addr(a, v[i]), tag, nv[i]);
                }
                it++;
            }
            for (int i = 0; i < 8; i++) {
                if (s[i] && dsmpool_seg_detach(s[i]) != 0) _exit(19);
                if (v[i] && dsmpool_area_free(a, v[i]) != 0) _exit(20);
            }
            dsmpool_area_detach(a);
            dsmpool_detach(p);
            _exit(0);
        }
    }
    for (int k = 0; k < 4; k++) cr_expect_eq(test_wait(kids[k]), 0, "process %d", k);
    test_recover_all(p);
    test_check_ok(p);
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.bytes_in_use, 0);
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    cr_expect_geq(test_pool_free(p), free0, "everything came back");
    dsmpool_detach(p);
}

/* A large block whose given-back tail a neighbour took cannot grow in
 * place: it moves, with its bytes. */
Test(exact, a_large_block_whose_tail_is_taken_moves) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0);
    dsmpool_ptr v;
    cr_assert_eq(dsmpool_area_alloc(a, 3 * MIB, 0, &v), 0);
    memset(dsmpool_area_addr(a, v), 0x3c, 3 * MIB);
    char *lo = (char *)dsmpool_area_addr(a, v) + 3 * MIB, *hi = lo + MIB;
    static dsmpool_seg *segs[1024];
    int in_tail, found, n = segs_until_in(p, 64 * KIB, lo, hi, 1, segs, 1024, &in_tail, &found);
    cr_assert_geq(in_tail, 0, "a 64 KiB segment landed in the block's given-back tail");
    dsmpool_ptr was = v;
    cr_assert_eq(dsmpool_area_realloc(a, &v, 4 * MIB, 0), 0, "%s", dsmpool_last_error());
    cr_expect_neq(v, was, "the tail is held: it moved");
    unsigned char *m = dsmpool_area_addr(a, v);
    for (size_t i = 0; i < 3 * MIB; i += 997) cr_assert_eq(m[i], 0x3c);
    test_check_ok(p);
    for (int i = 0; i < n; i++) dsmpool_seg_detach(segs[i]);
    cr_assert_eq(dsmpool_area_free(a, v), 0);
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* A segment's block word scribbled to claim its whole power of two (the
 * trim code zeroed): the checker says so, and its destruction frees
 * nothing -- least of all the neighbour that took part of its tail. */
Test(exact, a_scribbled_trim_code_frees_no_neighbour) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_seg *a;
    cr_assert_eq(dsmpool_seg_create(p, 100 * KIB, DSMPOOL_SEG_NO_FALLBACK, &a), 0);
    char *lo = (char *)dsmpool_seg_address(a) + 100 * KIB, *hi = lo + 28 * KIB;
    static dsmpool_seg *segs[4096];
    /* until neighbours hold the whole tail (7 pages), so that a free of
     * the whole power of two would find every frame allocated */
    int nb, in_tail, n = segs_until_in(p, 4096, lo, hi, 7, segs, 4096, &nb, &in_tail);
    cr_assert_eq(in_tail, 7, "4 KiB segments took the 100 KiB segment's whole tail");
    char *b = dsmpool_seg_address(segs[nb]);
    memset(b, 0x5b, 4096);
    dp_seg_desc *d = &p->segs[DP_HANDLE_IDX(dsmpool_seg_handle(a))];
    uint64_t blk = atomic_load(&d->block);
    atomic_store(&d->block, DP_BLOCK_MK(DP_BLOCK_OFF(blk), DP_BLOCK_ORDER(blk))); /* 128 KiB */
    cr_expect_eq(dsmpool_check(p), -EUCLEAN, "the checker sees the scribble");
    dsmpool_seg_detach(a);
    expect_neighbour_kept(p, segs, n, nb, 4096, b, 0x5b);
    dsmpool_detach(p);
}

/* The same for a large area block: its entry's block word scribbled to its
 * whole power of two; free refuses to free frames the directory does not
 * give the entry (the neighbours in its tail). */
Test(exact, a_scribbled_large_block_frees_no_neighbour) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0);
    dsmpool_ptr v;
    cr_assert_eq(dsmpool_area_alloc(a, 300 * KIB, 0, &v), 0); /* 300 KiB of a 512 KiB block */
    char *lo = (char *)dsmpool_area_addr(a, v) + 300 * KIB, *hi = lo + 212 * KIB;
    static dsmpool_seg *segs[1024];
    int nb, in_tail, n = segs_until_in(p, 64 * KIB, lo, hi, 3, segs, 1024, &nb, &in_tail);
    cr_assert_eq(in_tail, 3, "64 KiB segments took the block's whole tail");
    char *b = dsmpool_seg_address(segs[nb]);
    memset(b, 0x6c, 64 * KIB);
    _Atomic uint64_t *word = dp_area_test_word(a, "span", 0, v);
    cr_assert_not_null(word);
    uint64_t blk = atomic_load(word + 1); /* the entry's block word follows its state */
    cr_assert_eq(DP_BLOCK_OFF(blk), (uint64_t)v);
    atomic_store(word + 1, DP_BLOCK_MK(DP_BLOCK_OFF(blk), DP_BLOCK_ORDER(blk)));
    dsmpool_area_free(a, v);
    expect_neighbour_kept(p, segs, n, nb, 64 * KIB, b, 0x6c);
    dsmpool_detach(p);
}

/* A large block ends inside a directory granule (exact to the page); the
 * rest of that granule goes to small blocks the directory does not name.
 * A pointer into them finds the block's entry and an offset past its end:
 * the area refuses it, and neither side's memory changes. */
Test(exact, a_large_blocks_last_granule_is_shared_safely) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0);
    dsmpool_ptr v;
    cr_assert_eq(dsmpool_area_alloc(a, 300 * KIB - 100, 0, &v), 0);
    cr_expect_eq(dsmpool_area_usable_size(a, v), 300 * KIB, "exact to the page");
    char *base = dsmpool_area_addr(a, v), *lo = base + 300 * KIB, *hi = base + 320 * KIB;
    memset(base, 0x2e, 300 * KIB);
    static dsmpool_seg *segs[4096];
    int nb, found, n = segs_until_in(p, 4096, lo, hi, 1, segs, 4096, &nb, &found);
    cr_assert_geq(nb, 0, "a 4 KiB segment landed in the block's last granule");
    char *m = dsmpool_seg_address(segs[nb]);
    memset(m, 0x7d, 4096);
    dsmpool_ptr q = v + (dsmpool_ptr)(m - base);
    cr_expect_eq(dsmpool_area_usable_size(a, q), 0, "not an allocation of the area");
    cr_expect_eq(dsmpool_area_ptr_of(a, m), 0);
    cr_expect_eq(dsmpool_area_ptr_of(a, base + 300 * KIB - 1), v + 300 * KIB - 1);
    cr_expect_eq(dsmpool_area_free(a, q), -EINVAL);
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_free(a, v), 0);
    test_check_ok(p);
    for (size_t i = 0; i < 4096; i++) cr_assert_eq((unsigned char)m[i], 0x7d);
    cr_expect_eq(dsmpool_area_free(a, q), -EINVAL, "after the block went, still nothing of the area");
    for (int i = 0; i < n; i++) dsmpool_seg_detach(segs[i]);
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* A grow in place whose new pages cross into another directory granule:
 * every granule it touches must name the block, or its free is refused
 * (the range started mid-granule and a 64 KiB stride skipped the last). */
Test(exact, a_grow_across_a_granule_names_every_granule) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    size_t f0 = test_pool_free(p);
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0);
    dsmpool_ptr v, was;
    cr_assert_eq(dsmpool_area_alloc(a, 420 * KIB, 0, &v), 0);
    was = v;
    cr_assert_eq(dsmpool_area_realloc(a, &v, 468 * KIB, 0), 0, "%s", dsmpool_last_error());
    cr_assert_eq(v, was, "grown in place (the tail was free)");
    cr_expect_eq(dsmpool_area_usable_size(a, v + 460 * KIB), 0, "inside, not a start");
    cr_expect_eq(dsmpool_area_ptr_of(a, (char *)dsmpool_area_addr(a, v) + 467 * KIB), v + 467 * KIB,
                 "the last page, in the next granule, is the block's");
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_free(a, v), 0);
    test_check_ok(p); /* a refused free would leave frames owned by nothing */
    dsmpool_area_destroy(a);
    cr_expect_eq(test_pool_free(p), f0);
    dsmpool_detach(p);
}
