/*
 * test_palloc.c -- the page allocator on its own, over private memory.
 *
 * Every order; exhaustion; free-all coalescing back to one block; odd
 * sub-pool sizes (partial nodes); random alloc/free against a reference
 * model with the full walk after each step; recovery of half-done steps;
 * 2/4/8 threads writing patterns into what they hold; per-order leaves;
 * mixed orders 0..3 with bounded working sets from threads of several
 * processes over one shared tree.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dp_palloc.h"
#include "testutil.h"

typedef struct tpa {
    dp_pa pa;
    char *meta;
    uint64_t frames;
} tpa;

static void tpa_init(tpa *t, uint64_t frames, uint32_t nhints) {
    dp_pa_geom g;
    uint64_t cur = 64;
    cr_assert_eq(dp_pa_layout(frames, nhints, &cur, &g), 0);
    t->meta = aligned_alloc(64, (cur + 63) & ~63ull);
    cr_assert_not_null(t->meta);
    memset(t->meta, 0xa5, cur); /* format must not rely on zeroed memory */
    cr_assert_eq(dp_pa_view(&t->pa, t->meta, cur, &g), 0);
    dp_pa_format(&t->pa);
    t->frames = frames;
}

static void tpa_fini(tpa *t) { free(t->meta); }

static dp_pa_walk walk(tpa *t) {
    dp_pa_walk w;
    dp_pa_walk_tree(&t->pa, &w, NULL, NULL, NULL);
    cr_assert_eq(w.bad, 0, "invariant broken: %s", w.why);
    cr_assert_eq(w.free_frames + w.used_frames, t->frames);
    return w;
}

Test(palloc, layout_rejects_bad_sizes) {
    dp_pa_geom g;
    uint64_t cur = 0;
    cr_expect_eq(dp_pa_layout(0, 1, &cur, &g), -EINVAL);
    cr_expect_eq(dp_pa_layout(100, 1, &cur, &g), -EINVAL); /* not a multiple of 512 */
    cr_expect_eq(dp_pa_layout(512, 0, &cur, &g), -EINVAL);
    cr_expect_eq(dp_pa_layout(512, 1, &cur, &g), 0);
    cr_expect_eq(g.nlevels, 2);
}

Test(palloc, view_rejects_tampered_geometry) {
    dp_pa_geom g;
    uint64_t cur = 64;
    cr_assert_eq(dp_pa_layout(4096, 2, &cur, &g), 0);
    char *mem = aligned_alloc(64, (cur + 63) & ~63ull);
    dp_pa pa;
    dp_pa_geom bad = g;
    bad.level_off[1] += 64;
    cr_expect_eq(dp_pa_view(&pa, mem, cur, &bad), -EPROTO);
    bad = g;
    bad.level_count[0]++;
    cr_expect_eq(dp_pa_view(&pa, mem, cur, &bad), -EPROTO);
    cr_expect_eq(dp_pa_view(&pa, mem, cur - 1, &g), -EPROTO); /* past the region */
    cr_expect_eq(dp_pa_view(&pa, mem, cur, &g), 0);
    free(mem);
}

Test(palloc, every_order) {
    tpa t;
    tpa_init(&t, 1u << 15, 4); /* 128 MiB: orders 0..15 */
    unsigned max = dp_pa_max_order(&t.pa);
    cr_assert_eq(max, 15);
    for (unsigned k = 0; k <= max; k++) {
        uint64_t f;
        cr_assert_eq(dp_pa_alloc(&t.pa, k, 1, 0, &f), 0, "order %u", k);
        cr_expect_eq(f & ((1ull << k) - 1), 0, "order %u block at frame %llu is misaligned", k,
                     (unsigned long long)f);
        dp_pa_walk w = walk(&t);
        cr_expect_eq(w.used_frames, 1ull << k, "order %u", k);
        cr_assert_eq(dp_pa_free(&t.pa, f, k), 0);
        w = walk(&t);
        cr_expect_eq(w.used_frames, 0);
        cr_expect_eq(w.largest_free_order, (int)max);
    }
    uint64_t f;
    cr_expect_eq(dp_pa_alloc(&t.pa, max + 1, 1, 0, &f), -EINVAL);
    tpa_fini(&t);
}

/* [resident first] (palloc.c): a warm pass whose nearest child is a full
 * 2 MiB node marked cold (a block held while it is refilled, or a unit a
 * trimmer holds) starts among the part-used children from the first, as
 * it does for a cold free or part-used near child: node 0's run (frame
 * 32), not node 12's above the near one. A review of the search that reads
 * cold bits only for the children it may take found the near child's bit
 * unread, and the block at 6145. */
Test(palloc, a_full_cold_near_child_starts_the_search_from_the_first) {
    tpa t;
    tpa_init(&t, 16 * 512, 2);
    static dp_a64 cold[16], ncold;
    dp_pa_set_cold(&t.pa, cold, &ncold);
    uint64_t f0, f;
    cr_assert_eq(dp_pa_alloc(&t.pa, 0, 1, 0, &f0), 0); /* CPU 0: node 0 part-used, its leaf 0 */
    cr_assert_eq(dp_pa_claim(&t.pa, 8 * 512, 9, 1), 0); /* node 8 full */
    cr_assert_eq(dp_pa_claim(&t.pa, 12 * 512, 0, 1), 0); /* node 12 part-used */
    atomic_store(&cold[8], DP_PA_COLD);
    atomic_store(&ncold, 1);
    cr_assert_eq(dp_pa_alloc(&t.pa, 0, 1, 1, &f), 0); /* CPU 1: no hint yet, its start is node 8 */
    cr_expect_eq(f, 32, "CPU 1's page is at frame %llu (2 MiB node %llu)", (unsigned long long)f,
                 (unsigned long long)(f / 512));
    tpa_fini(&t);
}

/* [resident first] (palloc.c): with 2 MiB nodes marked cold, a block of
 * every size takes warm memory while a run of its size is warm and free
 * (the 32 MiB block among them: it took the first free run by position),
 * and dp_pa_warm_fit says whether such a run is left. A 256 MiB view whose
 * 2 MiB nodes are all cold but 16-31 (a 32 MiB node) and 40-43 (8 MiB). */
Test(palloc, every_size_takes_warm_memory_first) {
    tpa t;
    tpa_init(&t, 1u << 16, 4);
    static dp_a64 cold[128];
    static dp_a64 ncold;
    uint64_t n = 0;
    for (unsigned g = 0; g < 128; g++) {
        bool warm = (g >= 16 && g < 32) || (g >= 40 && g < 44);
        atomic_store(&cold[g], warm ? 0 : DP_PA_COLD);
        n += !warm;
    }
    atomic_store(&ncold, n);
    dp_pa_set_cold(&t.pa, cold, &ncold);
    cr_expect(dp_pa_warm_fit(&t.pa, 13, 0, UINT64_MAX), "a warm 32 MiB run is free");
    cr_expect(!dp_pa_warm_fit(&t.pa, 14, 0, UINT64_MAX), "no warm 64 MiB run");
    uint64_t big, mid, f;
    cr_assert_eq(dp_pa_alloc(&t.pa, 13, 1, 0, &big), 0);
    cr_expect_eq(big, 16ull * 512, "the 32 MiB block is at frame %llu, not the warm node's 8192",
                 (unsigned long long)big);
    cr_expect(!dp_pa_warm_fit(&t.pa, 13, 0, UINT64_MAX), "no warm 32 MiB run left");
    cr_expect(dp_pa_warm_fit(&t.pa, 11, 0, UINT64_MAX), "the warm 8 MiB run is free");
    cr_assert_eq(dp_pa_alloc(&t.pa, 11, 1, 0, &mid), 0);
    cr_expect_eq(mid, 40ull * 512, "the 8 MiB block is at frame %llu, not the warm run's 20480",
                 (unsigned long long)mid);
    cr_expect(!dp_pa_warm_fit(&t.pa, 9, 0, UINT64_MAX), "no warm 2 MiB node left");
    cr_expect(!dp_pa_warm_fit(&t.pa, 0, 0, UINT64_MAX), "no warm page left");
    /* with nothing warm free, blocks still come: cold ones */
    cr_assert_eq(dp_pa_alloc(&t.pa, 13, 1, 0, &f), 0);
    cr_assert_eq(dp_pa_free(&t.pa, f, 13), 0);
    /* the 8 MiB block freed: its memory fits small blocks and 2 MiB ones again */
    cr_assert_eq(dp_pa_free(&t.pa, mid, 11), 0);
    cr_expect(dp_pa_warm_fit(&t.pa, 0, 0, UINT64_MAX) && dp_pa_warm_fit(&t.pa, 9, 0, UINT64_MAX), "the freed warm run fits again");
    cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &f), 0);
    cr_expect(f >= 40ull * 512 && f < 44ull * 512, "a 32 KiB block in warm memory (frame %llu)",
              (unsigned long long)f);
    cr_assert_eq(dp_pa_free(&t.pa, f, 3), 0);
    cr_assert_eq(dp_pa_free(&t.pa, big, 13), 0);
    walk(&t);
    tpa_fini(&t);
}

Test(palloc, exhaustion_then_coalesce, .timeout = 60) {
    tpa t;
    tpa_init(&t, 1u << 13, 2); /* 32 MiB */
    uint64_t *blocks = malloc(sizeof(uint64_t) << 13);
    unsigned orders[] = {0, 3, 4, 5, 8, 9, 10, 13};
    for (unsigned oi = 0; oi < sizeof orders / sizeof *orders; oi++) {
        unsigned k = orders[oi];
        uint64_t n = t.frames >> k, got = 0, f;
        while (dp_pa_alloc(&t.pa, k, 1, oi, &f) == 0) {
            cr_assert_lt(got, n, "order %u: more blocks than fit", k);
            blocks[got++] = f;
        }
        cr_expect_eq(got, n, "order %u: got %llu of %llu", k, (unsigned long long)got,
                     (unsigned long long)n);
        dp_pa_walk w = walk(&t);
        cr_expect_eq(w.free_frames, 0);
        cr_expect_eq(w.largest_free_order, -1);
        cr_expect_eq(dp_pa_alloc(&t.pa, 0, 1, 0, &f), -ENOMEM);
        for (uint64_t i = 0; i < got; i++) cr_assert_eq(dp_pa_free(&t.pa, blocks[i], k), 0);
        w = walk(&t);
        cr_expect_eq(w.used_frames, 0);
        cr_expect_eq(w.largest_free_order, 13);
        /* Coalesced: the whole sub-pool is one block again. */
        cr_assert_eq(dp_pa_alloc(&t.pa, 13, 1, 0, &f), 0, "order %u left fragments", k);
        cr_assert_eq(f, 0);
        cr_assert_eq(dp_pa_free(&t.pa, f, 13), 0);
    }
    free(blocks);
    tpa_fini(&t);
}

Test(palloc, odd_sizes_have_partial_nodes) {
    /* 3, 17 and 35 huge frames: the root and upper nodes are partly absent. */
    uint64_t sizes[] = {3 * 512, 17 * 512, 35 * 512};
    for (unsigned si = 0; si < 3; si++) {
        tpa t;
        tpa_init(&t, sizes[si], 3);
        dp_pa_walk w = walk(&t);
        cr_expect_eq(w.free_frames, sizes[si]);
        /* Fill with 2 MiB blocks, then with frames: all of it, nothing more. */
        uint64_t f, n = 0;
        while (dp_pa_alloc(&t.pa, 9, 1, 0, &f) == 0) {
            cr_assert_lt(f + 512, sizes[si] + 1, "block beyond the end");
            n++;
        }
        cr_expect_eq(n, sizes[si] / 512);
        for (uint64_t i = 0; i < n; i++) cr_assert_eq(dp_pa_free(&t.pa, i * 512, 9), 0);
        n = 0;
        while (dp_pa_alloc(&t.pa, 0, 1, 1, &f) == 0) {
            cr_assert_lt(f, sizes[si]);
            n++;
        }
        cr_expect_eq(n, sizes[si]);
        for (uint64_t i = 0; i < sizes[si]; i++) cr_assert_eq(dp_pa_free(&t.pa, i, 0), 0);
        w = walk(&t);
        cr_expect_eq(w.used_frames, 0);
        unsigned max = dp_pa_max_order(&t.pa);
        cr_assert_eq(dp_pa_alloc(&t.pa, max, 1, 0, &f), 0);
        cr_expect_eq(f, 0);
        tpa_fini(&t);
    }
}

Test(palloc, bad_frees_are_refused) {
    tpa t;
    tpa_init(&t, 2048, 1);
    uint64_t f, g;
    cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &f), 0);
    cr_expect_eq(dp_pa_free(&t.pa, f + 1, 3), -EINVAL); /* misaligned */
    cr_expect_eq(dp_pa_free(&t.pa, f, 4), -EINVAL);     /* wrong order: more than allocated */
    cr_expect_eq(dp_pa_free(&t.pa, 4096, 0), -EINVAL);  /* beyond the end */
    cr_expect_eq(dp_pa_free(&t.pa, f, 40), -EINVAL);
    cr_assert_eq(dp_pa_alloc(&t.pa, 9, 1, 0, &g), 0);
    cr_expect_eq(dp_pa_free(&t.pa, g, 8), -EINVAL); /* half of a 2 MiB block */
    cr_assert_eq(dp_pa_free(&t.pa, f, 3), 0);
    cr_expect_eq(dp_pa_free(&t.pa, f, 3), -EINVAL); /* double free */
    cr_assert_eq(dp_pa_free(&t.pa, g, 9), 0);
    cr_expect_eq(dp_pa_free(&t.pa, g, 9), -EINVAL);
    dp_pa_walk w = walk(&t);
    cr_expect_eq(w.used_frames, 0);
    tpa_fini(&t);
}

/* Random alloc/free against a model: a byte per frame. */
Test(palloc, random_against_model, .timeout = 120) {
    tpa t;
    const uint64_t frames = 8 * 512; /* 16 MiB */
    tpa_init(&t, frames, 4);
    uint8_t *model = calloc(frames, 1);
    struct { uint64_t f; unsigned k; } live[4096];
    unsigned nlive = 0;
    uint64_t seed = test_seed(), used = 0;
    for (int step = 0; step < 6000; step++) {
        bool do_alloc = nlive == 0 || (nlive < 4096 && test_rand(&seed) % 100 < 55);
        if (do_alloc) {
            unsigned k = (unsigned)(test_rand(&seed) % 100 < 80 ? test_rand(&seed) % 6
                                                                 : test_rand(&seed) % 13);
            uint64_t f;
            int r = dp_pa_alloc(&t.pa, k, 1, (unsigned)(test_rand(&seed) % 4), &f);
            if (r == -ENOMEM) {
                /* The model must agree: no aligned free run of 2^k frames. */
                for (uint64_t b = 0; b < frames; b += 1ull << k) {
                    uint64_t i = 0;
                    while (i < (1ull << k) && !model[b + i]) i++;
                    cr_assert_lt(i, 1ull << k, "seed %llu step %d: -ENOMEM but frame %llu has a "
                                 "free order-%u block", (unsigned long long)test_seed(), step,
                                 (unsigned long long)b, k);
                }
                continue;
            }
            cr_assert_eq(r, 0);
            cr_assert_eq(f % (1ull << k), 0);
            for (uint64_t i = 0; i < (1ull << k); i++) {
                cr_assert_eq(model[f + i], 0, "seed %llu step %d: overlap at frame %llu",
                             (unsigned long long)test_seed(), step, (unsigned long long)(f + i));
                model[f + i] = 1;
            }
            live[nlive].f = f;
            live[nlive++].k = k;
            used += 1ull << k;
        } else {
            unsigned i = (unsigned)(test_rand(&seed) % nlive);
            cr_assert_eq(dp_pa_free(&t.pa, live[i].f, live[i].k), 0);
            cr_assert_eq(dp_pa_free(&t.pa, live[i].f, live[i].k), -EINVAL);
            memset(model + live[i].f, 0, 1ull << live[i].k);
            used -= 1ull << live[i].k;
            live[i] = live[--nlive];
        }
        dp_pa_walk w = walk(&t);
        cr_assert_eq(w.used_frames, used, "seed %llu step %d", (unsigned long long)test_seed(), step);
    }
    while (nlive) {
        nlive--;
        cr_assert_eq(dp_pa_free(&t.pa, live[nlive].f, live[nlive].k), 0);
    }
    uint64_t f;
    cr_assert_eq(dp_pa_alloc(&t.pa, 12, 1, 0, &f), 0, "free-all must coalesce");
    free(model);
    tpa_fini(&t);
}

/* A process died in the middle of opening or closing a node: recovery
 * finishes the step and nothing is lost. */
#define PH_SHIFT 32
#define OWNER_SHIFT 35
static bool dead_is_7(uint32_t owner, void *arg) { return owner == 7; }
static bool live_not_7(uint32_t owner, void *arg) { return owner != 7; }

Test(palloc, recovery_finishes_half_steps) {
    tpa t;
    tpa_init(&t, 1024, 1); /* two huge frames: root is level 2 */
    uint64_t f;
    cr_assert_eq(dp_pa_alloc(&t.pa, 0, 1, 0, &f), 0); /* opens the path to a leaf */
    cr_assert_eq(dp_pa_free(&t.pa, f, 0), 0);
    /* Dead owner 7 half-opened leaf 20 (in level-1 node 1): leaf OPENING,
     * its parent already says PART. */
    dp_a64 *leaf = dp_pa_word(&t.pa, 0, 20), *l1 = dp_pa_word(&t.pa, 1, 1), *root = dp_pa_word(&t.pa, 2, 0);
    atomic_store(root, atomic_load(root) | (1ull << 2)); /* root: child 1 PART */
    atomic_store(l1, 1ull << PH_SHIFT);                  /* node 1 OPEN, all free */
    atomic_store(l1, atomic_load(l1) | (1ull << (2 * 4)));
    atomic_store(leaf, (2ull << PH_SHIFT) | (7ull << OWNER_SHIFT));
    dp_pa_walk w;
    dp_pa_walk_tree(&t.pa, &w, NULL, live_not_7, NULL);
    cr_expect_eq(w.orphaned, 1);
    cr_expect_eq(w.free_frames, t.frames, "a half-opened node holds nothing");
    cr_expect_eq(dp_pa_recover(&t.pa, dead_is_7, NULL), 1);
    w = walk(&t);
    cr_expect_eq(w.orphaned, 0);
    cr_expect_eq(w.busy, 0);
    /* Dead owner 7 half-closed leaf 21: CLOSING with parent still PART. */
    atomic_store(l1, atomic_load(l1) | (1ull << (2 * 5)));
    atomic_store(dp_pa_word(&t.pa, 0, 21), (4ull << PH_SHIFT) | (7ull << OWNER_SHIFT)); /* CLOSING */
    cr_expect_eq(dp_pa_recover(&t.pa, dead_is_7, NULL), 1);
    w = walk(&t);
    cr_expect_eq(w.orphaned, 0);
    dp_pa_reclaim(&t.pa, 1);
    cr_assert_eq(dp_pa_alloc(&t.pa, 10, 1, 0, &f), 0, "everything coalesces after recovery");
    tpa_fini(&t);
}

/* ---- threads ------------------------------------------------------------ */

typedef struct thr_arg {
    tpa *t;
    char *data;
    unsigned id;
    uint64_t seed;
    uint64_t ops;
    double seconds;
} thr_arg;

static void *thr_main(void *argp) {
    thr_arg *a = argp;
    struct { uint64_t f; unsigned k; } held[64];
    unsigned n = 0;
    uint64_t seed = a->seed, end = test_now_ns() + (uint64_t)(a->seconds * 1e9);
    while (test_now_ns() < end) {
        for (int burst = 0; burst < 64; burst++) {
            if (n < 64 && (n == 0 || test_rand(&seed) % 2)) {
                unsigned k = (unsigned)(test_rand(&seed) % 100 < 90 ? test_rand(&seed) % 4
                                                                     : test_rand(&seed) % 10);
                uint64_t f;
                if (dp_pa_alloc(&a->t->pa, k, a->id + 1, a->id, &f) != 0) continue;
                /* Write our pattern over the whole block. */
                uint64_t *p = (uint64_t *)(a->data + f * 4096), words = (4096ull << k) / 8;
                uint64_t tag = ((uint64_t)a->id << 56) | f;
                for (uint64_t i = 0; i < words; i += 61) p[i] = tag ^ i;
                p[words - 1] = tag;
                held[n].f = f;
                held[n++].k = k;
            } else if (n) {
                unsigned i = (unsigned)(test_rand(&seed) % n);
                uint64_t f = held[i].f, words = (4096ull << held[i].k) / 8;
                uint64_t *p = (uint64_t *)(a->data + f * 4096), tag = ((uint64_t)a->id << 56) | f;
                for (uint64_t w = 0; w < words; w += 61)
                    if (p[w] != (tag ^ w)) return (void *)"pattern overwritten: blocks overlap";
                if (p[words - 1] != tag) return (void *)"pattern overwritten at the end";
                if (dp_pa_free(&a->t->pa, f, held[i].k) != 0) return (void *)"free refused";
                held[i] = held[--n];
            }
            a->ops++;
        }
    }
    while (n--)
        if (dp_pa_free(&a->t->pa, held[n].f, held[n].k) != 0) return (void *)"final free refused";
    return NULL;
}

static void run_threads(unsigned nthreads, double seconds) {
    tpa t;
    tpa_init(&t, 16 * 512, nthreads); /* 32 MiB */
    char *data = aligned_alloc(4096, t.frames * 4096);
    cr_assert_not_null(data);
    pthread_t tid[8];
    thr_arg args[8];
    for (unsigned i = 0; i < nthreads; i++) {
        args[i] = (thr_arg){&t, data, i, test_seed() + i * 7919, 0, seconds};
        pthread_create(&tid[i], NULL, thr_main, &args[i]);
    }
    uint64_t ops = 0;
    for (unsigned i = 0; i < nthreads; i++) {
        void *err;
        pthread_join(tid[i], &err);
        cr_expect_null(err, "thread %u: %s", i, err ? (char *)err : "");
        ops += args[i].ops;
    }
    cr_expect_gt(ops, 1000);
    dp_pa_walk w = walk(&t);
    cr_expect_eq(w.used_frames, 0);
    cr_expect_eq(w.busy + w.orphaned, 0);
    uint64_t f;
    cr_expect_eq(dp_pa_alloc(&t.pa, 13, 1, 0, &f), 0, "all memory free and coalesced");
    free(data);
    tpa_fini(&t);
}

Test(palloc_threads, two, .timeout = 60) { run_threads(2, test_seconds(2.0)); }
Test(palloc_threads, four, .timeout = 60) { run_threads(4, test_seconds(2.0)); }
Test(palloc_threads, eight, .timeout = 60) { run_threads(8, test_seconds(2.0)); }

/* ---- mixed orders ------------------------------------------------------- */

/* palloc.c [reservation]: each order 0..4 keeps its own leaf, so small blocks do not
 * use up the runs larger ones need. One CPU, order-0 and order-3 blocks
 * alternating: no leaf may hold both (with one leaf per CPU they share). */
Test(palloc, orders_keep_their_own_leaves) {
    tpa t;
    tpa_init(&t, 4 * 512, 1);
    uint64_t f0[24], f3[12];
    for (unsigned i = 0; i < 12; i++) {
        cr_assert_eq(dp_pa_alloc(&t.pa, 0, 1, 0, &f0[2 * i]), 0);
        cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &f3[i]), 0);
        cr_assert_eq(dp_pa_alloc(&t.pa, 0, 1, 0, &f0[2 * i + 1]), 0);
    }
    for (unsigned i = 0; i < 24; i++)
        for (unsigned j = 0; j < 12; j++)
            cr_expect_neq(f0[i] >> 5, f3[j] >> 5, "frame %llu (order 0) and %llu (order 3) share a leaf",
                          (unsigned long long)f0[i], (unsigned long long)f3[j]);
    for (unsigned i = 0; i < 24; i++) cr_assert_eq(dp_pa_free(&t.pa, f0[i], 0), 0);
    for (unsigned j = 0; j < 12; j++) cr_assert_eq(dp_pa_free(&t.pa, f3[j], 3), 0);
    dp_pa_walk w = walk(&t);
    cr_expect_eq(w.used_frames, 0);
    tpa_fini(&t);
}

/* palloc.c [reservation]'s search: when the reservation runs dry, the
 * partly used leaves of its 2 MiB node are taken from the one after it
 * on, round to it. A parent's PART does not tell a full leaf from one with
 * room, and a CPU fills its leaves in turn, so those below the reservation
 * are the full ones: from leaf 0 on, each refill of an order-3 bulk (4 runs
 * a leaf) loaded every one of them. Here the leaves below have room too,
 * and the search still goes on past the reservation. The frees run on
 * another thread, so that no take-back or second chance of this one is
 * involved. */
typedef struct frees3 {
    tpa *t;
    const uint64_t *f;
    unsigned n;
} frees3;

static void *free_order3(void *arg) {
    frees3 *x = arg;
    for (unsigned i = 0; i < x->n; i++)
        if (dp_pa_free(&x->t->pa, x->f[i], 3) != 0) return (void *)1;
    return NULL;
}

static void free_order3_elsewhere(tpa *t, const uint64_t *f, unsigned n) {
    pthread_t th;
    frees3 x = {t, f, n};
    void *r;
    cr_assert_eq(pthread_create(&th, NULL, free_order3, &x), 0);
    cr_assert_eq(pthread_join(th, &r), 0);
    cr_assert_null(r, "a free failed");
}

Test(palloc, a_refill_takes_the_leaf_after_the_reservation) {
    tpa t;
    tpa_init(&t, 4 * 512, 1);
    uint64_t a[32], b[12], f;
    for (unsigned i = 0; i < 32; i++) cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &a[i]), 0);
    cr_assert_eq(a[0] >> 5, 0);
    cr_assert_eq(a[31] >> 5, 7, "32 order-3 blocks fill leaves 0..7");
    free_order3_elsewhere(&t, a, 32); /* leaves 0..7 open and empty; the reservation is leaf 7 */
    for (unsigned i = 0; i < 12; i++) cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &b[i]), 0);
    cr_assert_eq(b[0] >> 5, 7);
    cr_assert_eq(b[4] >> 5, 0, "no partly used leaf after 7: round to leaf 0");
    cr_assert_eq(b[8] >> 5, 1);
    cr_assert_eq(b[11] >> 5, 1);
    free_order3_elsewhere(&t, b + 4, 2); /* leaf 0, below the reservation, has two runs again */
    cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &f), 0);
    cr_expect_eq(f >> 5, 2, "the refill went back to leaf %llu, not on to leaf 2", (unsigned long long)(f >> 5));
    cr_assert_eq(dp_pa_free(&t.pa, f, 3), 0);
    for (unsigned i = 0; i < 12; i++)
        if (i != 4 && i != 5) cr_assert_eq(dp_pa_free(&t.pa, b[i], 3), 0);
    dp_pa_walk w = walk(&t);
    cr_expect_eq(w.used_frames, 0);
    tpa_fini(&t);
}

/* palloc.c [second chance]: when a CPU's reservation has no run
 * left, the leaf this thread last freed such a run into is tried before
 * the search -- if it lies in the reservation's 2 MiB node. One CPU fills
 * two leaves with order-3 blocks (4 a leaf) and frees one in the first:
 * the next order-3 block is that run (the search would pass over a leaf
 * with a single run and open a fresh one). A run freed into another CPU's
 * 2 MiB node is not taken by this CPU (a CPU would otherwise follow a
 * thread that moved onto it into the other CPU's leaves), but is by the
 * CPU whose node it is. */
Test(palloc, a_freed_run_is_the_next_when_the_reservation_is_full) {
    tpa t;
    tpa_init(&t, 4 * 512, 2); /* 64 leaves; CPU 1 starts at leaf 32 */
    uint64_t a[8], c[8], f;
    for (unsigned i = 0; i < 8; i++) cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &a[i]), 0);
    cr_assert_eq(a[0] >> 5, a[3] >> 5);
    cr_assert_eq(a[4] >> 5, a[7] >> 5);
    cr_assert_neq(a[0] >> 5, a[4] >> 5);
    cr_assert_eq(a[0] >> 9, a[4] >> 9, "both leaves in one 2 MiB node");
    cr_assert_eq(dp_pa_free(&t.pa, a[1], 3), 0);
    cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &f), 0);
    cr_expect_eq(f, a[1], "the run just freed (frame %llu) was passed over for frame %llu",
                 (unsigned long long)a[1], (unsigned long long)f);
    a[1] = f;
    /* that leaf is now the reservation: with a run free in each leaf, the
     * next block comes from it, not from the old reservation */
    cr_assert_eq(dp_pa_free(&t.pa, a[5], 3), 0);
    cr_assert_eq(dp_pa_free(&t.pa, a[2], 3), 0);
    cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &f), 0);
    cr_expect_eq(f, a[2], "the leaf taken was not adopted: frame %llu, not %llu",
                 (unsigned long long)f, (unsigned long long)a[2]);
    a[2] = f;
    cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &a[5]), 0);

    for (unsigned i = 0; i < 8; i++) cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 1, &c[i]), 0);
    cr_assert_eq(c[0] >> 5, c[3] >> 5);
    cr_assert_eq(c[4] >> 5, c[7] >> 5);
    cr_assert_neq(c[0] >> 9, a[0] >> 9, "CPU 1 reserves in another 2 MiB node");
    cr_assert_eq(dp_pa_free(&t.pa, c[1], 3), 0); /* this thread's last freed leaf: CPU 1's node */
    cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &f), 0);
    cr_expect_neq(f, c[1], "CPU 0 followed a freed run into CPU 1's 2 MiB node");
    cr_expect_eq(f >> 9, a[0] >> 9, "CPU 0 left its 2 MiB node for frame %llu", (unsigned long long)f);
    uint64_t g;
    cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 1, &g), 0);
    cr_expect_eq(g, c[1], "CPU 1 passed over the run freed in its own node");
    c[1] = g;

    cr_assert_eq(dp_pa_free(&t.pa, f, 3), 0);
    for (unsigned i = 0; i < 8; i++) {
        cr_assert_eq(dp_pa_free(&t.pa, a[i], 3), 0);
        cr_assert_eq(dp_pa_free(&t.pa, c[i], 3), 0);
    }
    dp_pa_walk w = walk(&t);
    cr_expect_eq(w.used_frames, 0);
    tpa_fini(&t);
}

/* The second chance takes no leaf that is a reservation already: a leaf
 * that dp_pa_hint_freed made this CPU's order-2 reservation (it sets no
 * RESV bit) keeps its run for order 2 though order 3 last freed into it,
 * and a leaf with RESV (another CPU's reservation; set by hand here, as
 * the allocating CAS of that CPU's search would) is not taken either. */
Test(palloc, the_second_chance_takes_no_reserved_leaf) {
    tpa t;
    tpa_init(&t, 4 * 512, 1);
    uint64_t a[8], b[8], f, g;
    for (unsigned i = 0; i < 8; i++) cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &a[i]), 0);
    for (unsigned i = 0; i < 8; i++) cr_assert_eq(dp_pa_alloc(&t.pa, 2, 1, 0, &b[i]), 0);
    cr_assert_eq(b[0] >> 5, b[7] >> 5, "eight order-2 blocks fill one leaf");
    cr_assert_eq(b[0] >> 9, a[0] >> 9);
    cr_assert_eq(a[0] >> 5, a[1] >> 5);
    cr_assert_eq(dp_pa_free(&t.pa, a[1], 3), 0);
    dp_pa_hint_freed(&t.pa, a[1], 2, 0); /* a[1]'s leaf: the order-2 reservation */
    cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &f), 0);
    cr_expect_neq(f, a[1], "order 3 took the run kept for order 2");
    cr_assert_eq(dp_pa_alloc(&t.pa, 2, 1, 0, &g), 0);
    cr_expect_eq(g >> 5, a[1] >> 5, "order 2 lost its reserved leaf (frame %llu)", (unsigned long long)g);
    cr_assert_eq(dp_pa_free(&t.pa, g, 2), 0);
    cr_assert_eq(dp_pa_free(&t.pa, f, 3), 0);
    for (unsigned i = 0; i < 8; i++) {
        if (i != 1) cr_assert_eq(dp_pa_free(&t.pa, a[i], 3), 0);
        cr_assert_eq(dp_pa_free(&t.pa, b[i], 2), 0);
    }
    dp_pa_walk wk = walk(&t);
    cr_expect_eq(wk.used_frames, 0);
    tpa_fini(&t);

    /* a fresh tree: a[4..7]'s leaf is the dry reservation, the last free
     * went into a[0..3]'s leaf, which another CPU reserved */
    tpa_init(&t, 4 * 512, 1);
    for (unsigned i = 0; i < 8; i++) cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &a[i]), 0);
    cr_assert_eq(a[0] >> 5, a[1] >> 5);
    cr_assert_eq(a[4] >> 5, a[7] >> 5);
    cr_assert_eq(dp_pa_free(&t.pa, a[1], 3), 0);
    dp_a64 *w = dp_pa_word(&t.pa, 0, a[1] >> 5);
    uint64_t v = atomic_load(w);
    cr_assert_eq(v & DP_PA_RESV, 0, "a[1]'s leaf is nobody's reservation yet");
    atomic_store(w, v | DP_PA_RESV);
    cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &g), 0);
    cr_expect_neq(g, a[1], "another CPU's reserved leaf was taken");
    atomic_fetch_and(w, ~DP_PA_RESV);
    cr_assert_eq(dp_pa_free(&t.pa, g, 3), 0);
    for (unsigned i = 0; i < 8; i++)
        if (i != 1) cr_assert_eq(dp_pa_free(&t.pa, a[i], 3), 0);
    wk = walk(&t);
    cr_expect_eq(wk.used_frames, 0);
    tpa_fini(&t);
}

/* palloc.c [take-back]: the runs a thread freed into leaves nobody
 * reserved come back to it newest first, each exactly, before its CPU's
 * reservation is used and without moving it. A run freed into the
 * reservation is left to the reservation; a run that someone else took
 * meanwhile is passed over; another thread on the same CPU does not take
 * this thread's runs. Before the take-back the reservation served first,
 * and a dry one took the first run of the leaf last freed into. */
static void *alloc_order3_cpu0(void *arg) {
    tpa *t = arg;
    uint64_t f;
    if (dp_pa_alloc(&t->pa, 3, 1, 0, &f) != 0) return (void *)UINTPTR_MAX;
    return (void *)(uintptr_t)f;
}

Test(palloc, freed_runs_come_back_newest_first) {
    tpa t;
    tpa_init(&t, 4 * 512, 1);
    uint64_t a[16], f;
    for (unsigned i = 0; i < 16; i++) cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &a[i]), 0);
    for (unsigned i = 0; i < 16; i++) {
        cr_assert_eq(a[i] >> 5, a[i & ~3u] >> 5, "four order-3 blocks a leaf");
        cr_assert_eq(a[i] >> 9, a[0] >> 9, "one 2 MiB node");
    }
    cr_assert(a[0] >> 5 != a[4] >> 5 && a[4] >> 5 != a[8] >> 5 && a[8] >> 5 != a[12] >> 5);
    /* a[12..15]'s leaf is the reservation; the three before it are nobody's */
    cr_assert_eq(dp_pa_free(&t.pa, a[13], 3), 0);
    cr_assert_eq(dp_pa_free(&t.pa, a[1], 3), 0);
    cr_assert_eq(dp_pa_free(&t.pa, a[5], 3), 0);
    cr_assert_eq(dp_pa_free(&t.pa, a[9], 3), 0);
    /* another thread, same CPU: the reservation's run, not this thread's */
    pthread_t th;
    void *res;
    cr_assert_eq(pthread_create(&th, NULL, alloc_order3_cpu0, &t), 0);
    pthread_join(th, &res);
    cr_expect_eq((uint64_t)(uintptr_t)res, a[13],
                 "the other thread got frame %llu, not the reservation's %llu",
                 (unsigned long long)(uintptr_t)res, (unsigned long long)a[13]);
    a[13] = (uint64_t)(uintptr_t)res;
    uint64_t want[3] = {a[9], a[5], a[1]};
    for (unsigned k = 0; k < 3; k++) {
        cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &f), 0);
        cr_expect_eq(f, want[k], "take-back %u: frame %llu, not the run freed %s (%llu)", k,
                     (unsigned long long)f, k == 0 ? "last" : "before",
                     (unsigned long long)want[k]);
    }
    /* the reservation did not move: its run freed now is the next block */
    cr_assert_eq(dp_pa_free(&t.pa, a[14], 3), 0);
    cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &f), 0);
    cr_expect_eq(f, a[14], "the reservation moved: frame %llu, not %llu", (unsigned long long)f,
                 (unsigned long long)a[14]);
    /* a remembered run that someone else took meanwhile is passed over */
    cr_assert_eq(dp_pa_free(&t.pa, a[2], 3), 0);
    dp_a64 *w = dp_pa_word(&t.pa, 0, a[2] >> 5);
    uint64_t bits = 0xffull << (a[2] & 31);
    cr_assert_eq(atomic_fetch_or(w, bits) & bits, 0, "a[2]'s run is free");
    cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &f), 0);
    cr_expect_neq(f >> 5, a[2] >> 5, "a full leaf gave frame %llu", (unsigned long long)f);
    cr_assert_eq(dp_pa_free(&t.pa, f, 3), 0);
    atomic_fetch_and(w, ~bits); /* a[2]'s run is free again */
    for (unsigned i = 0; i < 16; i++)
        if (i != 2) cr_assert_eq(dp_pa_free(&t.pa, a[i], 3), 0);
    dp_pa_walk wk = walk(&t);
    cr_expect_eq(wk.used_frames, 0);
    tpa_fini(&t);
}

/* The take-back remembers the newest DP_PA_BACK runs of a size: one more
 * freed forgets the oldest. Order 0, three full leaves (the third is the
 * reservation); of DP_PA_BACK + 4 blocks freed from the first two, the
 * newest DP_PA_BACK come back newest first, and the four oldest are left
 * to the second chance and the search. */
Test(palloc, the_take_back_remembers_the_newest_runs_only) {
    enum { N = 96, FREED = DP_PA_BACK + 4 };
    tpa t;
    tpa_init(&t, 4 * 512, 1);
    uint64_t a[N], f;
    for (unsigned i = 0; i < N; i++) cr_assert_eq(dp_pa_alloc(&t.pa, 0, 1, 0, &a[i]), 0);
    cr_assert_eq(a[0] >> 5, a[31] >> 5);
    cr_assert_eq(a[64] >> 5, a[95] >> 5);
    cr_assert_neq(a[31] >> 5, a[32] >> 5);
    unsigned idx[FREED];
    for (unsigned k = 0; k < FREED; k++) {
        idx[k] = (k & 1) ? 32 + k : k; /* alternately from the first two leaves */
        cr_assert_eq(dp_pa_free(&t.pa, a[idx[k]], 0), 0);
    }
    for (unsigned k = 0; k < DP_PA_BACK; k++) {
        unsigned want = idx[FREED - 1 - k];
        cr_assert_eq(dp_pa_alloc(&t.pa, 0, 1, 0, &f), 0);
        cr_expect_eq(f, a[want], "take-back %u: frame %llu, not %llu", k, (unsigned long long)f,
                     (unsigned long long)a[want]);
        a[want] = f;
    }
    /* the four oldest are forgotten: a ring of more would give idx[3]'s
     * run now; the second chance gives the first run of the leaf last
     * freed into (the second leaf: idx[1]'s) */
    cr_assert_eq(dp_pa_alloc(&t.pa, 0, 1, 0, &f), 0);
    cr_expect_eq(f, a[idx[1]], "frame %llu, not the second chance's %llu (idx[3]'s: %llu)",
                 (unsigned long long)f, (unsigned long long)a[idx[1]],
                 (unsigned long long)a[idx[3]]);
    cr_assert_eq(dp_pa_free(&t.pa, f, 0), 0);
    for (unsigned i = 0; i < N; i++) {
        bool gone = false;
        for (unsigned k = 0; k < 4; k++) gone |= i == idx[k];
        if (!gone) cr_assert_eq(dp_pa_free(&t.pa, a[i], 0), 0);
    }
    dp_pa_walk wk = walk(&t);
    cr_expect_eq(wk.used_frames, 0);
    tpa_fini(&t);
}

/* The take-back remembers whole blocks freed at their own order only: the
 * tail a trim gave back (pieces of 1, 2 and 4 frames) stays where it is,
 * so the next order-0 block comes from the order-0 reservation, and the
 * block can grow back in place. Remembering the pieces would hand the
 * 1-frame piece to that order-0 allocation and make the grow fail. */
Test(palloc, trimmed_tails_are_not_taken_back) {
    tpa t;
    tpa_init(&t, 4 * 512, 1);
    uint64_t a[5], z, f;
    for (unsigned i = 0; i < 5; i++) cr_assert_eq(dp_pa_alloc(&t.pa, 3, 1, 0, &a[i]), 0);
    cr_assert_eq(a[0] >> 5, a[3] >> 5, "four order-3 blocks fill a leaf");
    cr_assert_neq(a[3] >> 5, a[4] >> 5, "the reservation moved on: a[0..3]'s leaf has no RESV");
    cr_assert_eq(dp_pa_alloc(&t.pa, 0, 1, 0, &z), 0); /* this CPU's order-0 reservation */
    cr_assert_neq(z >> 5, a[2] >> 5);
    cr_assert_eq(dp_pa_trim(&t.pa, a[2], 3, 1, 1), 1, "a[2] keeps 1 of its 8 frames");
    cr_assert_eq(dp_pa_alloc(&t.pa, 0, 1, 0, &f), 0);
    cr_expect_eq(f >> 5, z >> 5, "order 0 took frame %llu of a trimmed tail (a[2] = %llu)",
                 (unsigned long long)f, (unsigned long long)a[2]);
    cr_expect_eq(dp_pa_grow(&t.pa, a[2], 3, 1, 8, 1), 0, "the tail could not grow back");
    cr_assert_eq(dp_pa_free_run(&t.pa, a[2], 3, 8), 0);
    cr_assert_eq(dp_pa_free(&t.pa, f, 0), 0);
    cr_assert_eq(dp_pa_free(&t.pa, z, 0), 0);
    for (unsigned i = 0; i < 5; i++)
        if (i != 2) cr_assert_eq(dp_pa_free(&t.pa, a[i], 3), 0);
    dp_pa_walk wk = walk(&t);
    cr_expect_eq(wk.used_frames, 0);
    tpa_fini(&t);
}

/* Mixed orders 0..3 with a bounded working set per worker (free a random
 * block, allocate a random order in its place), from threads of several
 * processes over one shared tree, with fewer hint lines than workers (so
 * workers share reservations): every frame of every block carries its
 * holder's tag, checked before each free; at the end every frame is free,
 * the walk finds no broken invariant and the whole sub-pool coalesces. */
enum { MX_PROCS = 3, MX_THREADS = 2, MX_WS = 48, MX_FRAMES = 4 * 512 };

typedef struct mx_shared {
    char err[MX_PROCS * MX_THREADS][96];
    uint64_t ops[MX_PROCS * MX_THREADS];
    uint64_t by_order[MX_PROCS * MX_THREADS][4];
} mx_shared;

typedef struct mx_arg {
    dp_pa *pa;
    char *data;
    mx_shared *sh;
    unsigned id;
    uint64_t seed;
    double seconds;
} mx_arg;

static inline uint64_t mx_tag(unsigned id, uint64_t f, unsigned k) {
    return 0x6d78000000000000ull | ((uint64_t)id << 40) | ((uint64_t)k << 36) | f;
}

static void *mx_main(void *argp) {
    mx_arg *a = argp;
    struct { uint64_t f; int k; } ws[MX_WS];
    uint64_t seed = a->seed, end = test_now_ns() + (uint64_t)(a->seconds * 1e9);
    char *err = a->sh->err[a->id];
    for (unsigned i = 0; i < MX_WS; i++) ws[i].k = -1;
    while (test_now_ns() < end) {
        for (int rep = 0; rep < 64; rep++) {
            uint64_t r = test_rand(&seed);
            unsigned i = (unsigned)(r % MX_WS), k = (unsigned)(r >> 32) & 3;
            if (ws[i].k >= 0) { /* check the whole block is still ours, then free it */
                unsigned ok = (unsigned)ws[i].k;
                for (uint64_t j = 0; j < (1ull << ok); j++) {
                    uint64_t *p = (uint64_t *)(a->data + (ws[i].f + j) * 4096);
                    if (p[0] != mx_tag(a->id, ws[i].f + j, ok) || p[511] != ~p[0]) {
                        snprintf(err, 96, "frame %llu of an order-%u block overwritten",
                                 (unsigned long long)(ws[i].f + j), ok);
                        return NULL;
                    }
                }
                if (dp_pa_free(a->pa, ws[i].f, ok) != 0) {
                    snprintf(err, 96, "free of frame %llu order %u refused",
                             (unsigned long long)ws[i].f, ok);
                    return NULL;
                }
                ws[i].k = -1;
            }
            uint64_t f;
            int rc = dp_pa_alloc(a->pa, k, a->id + 1, a->id % 2, &f);
            if (rc == -ENOMEM || rc == -EBUSY) continue; /* full for now: try again later */
            if (rc != 0 || (f & ((1ull << k) - 1)) || f + (1ull << k) > MX_FRAMES) {
                snprintf(err, 96, "alloc order %u: %d, frame %llu", k, rc, (unsigned long long)f);
                return NULL;
            }
            for (uint64_t j = 0; j < (1ull << k); j++) {
                uint64_t *p = (uint64_t *)(a->data + (f + j) * 4096);
                p[0] = mx_tag(a->id, f + j, k);
                p[511] = ~p[0];
            }
            ws[i].f = f;
            ws[i].k = (int)k;
            a->sh->by_order[a->id][k]++;
            a->sh->ops[a->id]++;
        }
    }
    for (unsigned i = 0; i < MX_WS; i++)
        if (ws[i].k >= 0 && dp_pa_free(a->pa, ws[i].f, (unsigned)ws[i].k) != 0) {
            snprintf(err, 96, "final free refused");
            return NULL;
        }
    return NULL;
}

Test(palloc_mixed, processes_and_threads, .timeout = 120) {
    dp_pa_geom g;
    uint64_t cur = 64;
    cr_assert_eq(dp_pa_layout(MX_FRAMES, MX_THREADS, &cur, &g), 0);
    size_t meta = (cur + 4095) & ~4095ull, data = (size_t)MX_FRAMES * 4096;
    char *mem = mmap(NULL, meta + data + sizeof(mx_shared), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(mem, MAP_FAILED);
    dp_pa pa;
    cr_assert_eq(dp_pa_view(&pa, mem, cur, &g), 0);
    dp_pa_format(&pa);
    mx_shared *sh = (mx_shared *)(mem + meta + data);
    double secs = test_seconds(1.5);
    uint64_t seed = test_seed();
    pid_t kids[MX_PROCS];
    for (unsigned p = 0; p < MX_PROCS; p++) {
        if ((kids[p] = fork()) == 0) {
            pthread_t tid[MX_THREADS];
            mx_arg args[MX_THREADS];
            for (unsigned i = 0; i < MX_THREADS; i++) {
                unsigned id = p * MX_THREADS + i;
                args[i] = (mx_arg){&pa, mem + meta, sh, id, seed + id * 7919, secs};
                pthread_create(&tid[i], NULL, mx_main, &args[i]);
            }
            for (unsigned i = 0; i < MX_THREADS; i++) pthread_join(tid[i], NULL);
            _exit(0);
        }
        cr_assert_gt(kids[p], 0);
    }
    for (unsigned p = 0; p < MX_PROCS; p++) cr_expect_eq(test_wait(kids[p]), 0, "process %u", p);
    for (unsigned id = 0; id < MX_PROCS * MX_THREADS; id++) {
        cr_expect_eq(sh->err[id][0], 0, "seed %llu worker %u: %s", (unsigned long long)seed, id,
                     sh->err[id]);
        cr_expect_gt(sh->ops[id], 1000, "worker %u made %llu allocations", id,
                     (unsigned long long)sh->ops[id]);
        for (unsigned k = 0; k < 4; k++) cr_expect_gt(sh->by_order[id][k], 0, "worker %u order %u", id, k);
    }
    uint64_t *map = calloc(MX_FRAMES / 64, 8);
    dp_pa_walk w;
    dp_pa_walk_tree(&pa, &w, map, NULL, NULL);
    cr_expect_eq(w.bad, 0, "invariant broken: %s", w.why);
    cr_expect_eq(w.used_frames, 0, "%llu frames did not come back", (unsigned long long)w.used_frames);
    cr_expect_eq(w.free_frames, MX_FRAMES);
    cr_expect_eq(w.busy + w.orphaned, 0);
    for (unsigned i = 0; i < MX_FRAMES / 64; i++) cr_expect_eq(map[i], 0, "frames %u.. still marked", i * 64);
    uint64_t f;
    cr_expect_eq(dp_pa_alloc(&pa, dp_pa_max_order(&pa), 1, 0, &f), 0, "all free and coalesced");
    free(map);
    munmap(mem, meta + data + sizeof(mx_shared));
}
