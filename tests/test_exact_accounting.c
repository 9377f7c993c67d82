/*
 * test_exact_accounting.c -- what an exact block counts as (palloc.c
 * [exact blocks], area_registry.c [exact records], segment.c [exact to the
 * page]): an area's limit is judged on the exact bytes; the OS fallback
 * rounds a segment as the pool does; the leak sweep believes a segment's
 * or a large block's word only where it agrees with the segment's size or
 * the entry's record of its frames, so a scribbled trim code frees no live
 * tail. Each test's comment says what a wrong implementation did.
 */
#include <criterion/criterion.h>
#include <dsmpool.h>
#include <stdatomic.h>
#include <string.h>

#include "dp_internal.h"
#include "testhooks.h"
#include "testutil.h"

/* A large allocation reserves its power of two against the area's limit
 * (acquire_bracketed: held_reserve(bytes = 2^order)) and only then gives the
 * tail back: an allocation that, exact, would hold no more than the limit
 * allows fails with -ENOMEM. The header promises: "An allocation that would
 * pass it fails". 300 KiB holds 300 KiB (320 KiB when this was found,
 * exact to 64 KiB then); its power of two is 512 KiB. */
Test(exact_accounting, limit_refuses_an_exact_block_that_fits) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0);
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    size_t h0 = st.held;
    cr_assert_eq(dsmpool_area_set_limit(a, h0 + 300 * KIB), 0);
    dsmpool_ptr x = 0;
    int r = dsmpool_area_alloc(a, 300 * KIB, 0, &x);
    cr_expect_eq(r, 0, "300 KiB (300 KiB held) under a limit of held + 300 KiB: %d %s", r,
                 r ? dsmpool_last_error() : "");
    if (!r) {
        cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
        cr_expect_eq(st.held, h0 + 300 * KIB);
        dsmpool_ptr y;
        cr_expect_eq(dsmpool_area_alloc(a, 300 * KIB + 1, 0, &y), -ENOMEM, "past the limit: refused");
        dsmpool_area_free(a, x);
    }
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* DSMPOOL_SEG_HUGE_ROUND is applied to pool blocks only: when the pool
 * cannot serve and the OS fallback does, the segment is rounded to 4 KiB
 * (seg_create_bracketed computes the fallback's bytes from size alone), so
 * dsmpool_seg_size() says 1.5 MiB + 4 KiB where the flag promises whole
 * 2 MiB pages ("Round a segment above 1 MiB up to whole 2 MiB pages"). */
Test(exact_accounting, huge_round_is_ignored_by_the_os_fallback) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_seg *fill[64];
    int n = 0;
    while (n < 64 && dsmpool_seg_create(p, 256 * KIB, DSMPOOL_SEG_NO_FALLBACK, &fill[n]) == 0) n++;
    size_t want = 3 * MIB / 2 + 4 * KIB;
    dsmpool_seg *s;
    int r = dsmpool_seg_create(p, want, DSMPOOL_SEG_HUGE_ROUND, &s);
    if (r != 0) cr_skip_test("no OS fallback here: %s", dsmpool_last_error());
    cr_assert(dsmpool_seg_is_fallback(s), "served by the OS");
    cr_expect_eq(dsmpool_seg_size(s), 2 * MIB, "HUGE_ROUND from the OS: %zu bytes", dsmpool_seg_size(s));
    dsmpool_seg_detach(s);
    for (int i = 0; i < n; i++) dsmpool_seg_detach(fill[i]);
    dsmpool_detach(p);
}

/* The leak sweep believes a segment's block word: dp_seg_mark_owned marks
 * DP_BLOCK_BYTES(blk) without the cross-check against the descriptor's size
 * that seg_destroy (864d6a3) and dp_seg_verify make. A scribbled trim code
 * that says more frames went back (here 15 of 32 where 7 did) makes the
 * live segment's last 8 pages "allocated, owned by nothing", and the sweep
 * frees them while the segment is mapped: the next segment is handed those
 * pages. (dsmpool_check refuses the same word: dp_seg_verify runs before
 * its owned maps; the sweep never calls it.) */
Test(exact_accounting, sweep_frees_a_live_segments_tail_on_a_scribbled_code) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 100 * KIB, DSMPOOL_SEG_NO_FALLBACK, &s), 0);
    cr_assert_eq(dsmpool_seg_size(s), 100 * KIB);
    dp_a64 *bw = &p->segs[DP_HANDLE_IDX(dsmpool_seg_handle(s))].block;
    uint64_t blk = atomic_load(bw);
    cr_assert(blk & DP_BLOCK_EXACT);
    cr_assert_eq(DP_BLOCK_ORDER(blk), 5);
    size_t f0 = test_pool_free(p);
    atomic_store(bw, dp_block_mk_trimmed(DP_BLOCK_OFF(blk), 5, 15)); /* the scribble */
    atomic_store(&p->hdr->sweep_needed, 1);
    dsmpool_recover(p);
    size_t f1 = test_pool_free(p);
    atomic_store(bw, blk); /* repair, so that the detach below is clean */
    cr_expect_eq(f1, f0, "the sweep freed %zu bytes of a live segment", f1 - f0);
    dsmpool_seg_detach(s);
    dsmpool_detach(p);
}


/* The same for a large area block: dp_area_mark_owned marks
 * DP_BLOCK_BYTES(blk) of its word, with none of the directory cross-check
 * entry_free_parts makes since 37bc798. A code scribbled to say 64 of 128
 * frames went back (53 did: 300 KiB kept) leaves the block's last 44 KiB to
 * the sweep while the allocation is live. The entry's own record of its
 * frames (area_registry.c [exact records]) now disagrees, and mark_owned calls it damage. */
Test(exact_accounting, sweep_frees_a_live_large_blocks_tail_on_a_scribbled_code) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0);
    dsmpool_ptr x;
    cr_assert_eq(dsmpool_area_alloc(a, 300 * KIB, 0, &x), 0);
    cr_assert_eq(dsmpool_area_usable_size(a, x), 300 * KIB);
    dp_a64 *st = dp_area_test_word(a, "span", 0, x);
    cr_assert_not_null(st);
    dp_a64 *bw = st + 1; /* ar_span: state, block */
    uint64_t blk = atomic_load(bw);
    cr_assert(blk & DP_BLOCK_EXACT);
    cr_assert_eq(DP_BLOCK_ORDER(blk), 7);
    size_t f0 = test_pool_free(p);
    atomic_store(bw, dp_block_mk_trimmed(DP_BLOCK_OFF(blk), 7, 64)); /* the scribble */
    atomic_store(&p->hdr->sweep_needed, 1);
    dsmpool_recover(p);
    size_t f1 = test_pool_free(p);
    atomic_store(bw, blk); /* repair */
    cr_expect_eq(f1, f0, "the sweep freed %zu bytes of a live large block", f1 - f0);
    dsmpool_area_free(a, x);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}
