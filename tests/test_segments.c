/*
 * test_segments.c -- segments in one process: handles, references, pins,
 * capacity, stale handles, OS fallback, bad input, and threads hammering
 * create/attach/detach with patterns written and verified.
 */
#include <criterion/criterion.h>
#include <dsmpool.h>
#include <pthread.h>
#include <stdatomic.h>

#include "dp_internal.h"
#include "testutil.h"

Test(segments, create_attach_detach_refcount) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_seg *a, *b, *c;
    cr_assert_eq(dsmpool_seg_create(p, 100000, 0, &a), 0);
    cr_expect_geq(dsmpool_seg_size(a), 100000);
    cr_expect_eq(dsmpool_seg_size(a), 100 * 1024, "pool segments are exact to the page");
    cr_expect_eq((uintptr_t)dsmpool_seg_address(a) % (128 * 1024), 0, "aligned as their power of two");
    cr_expect_not(dsmpool_seg_is_fallback(a));
    dsmpool_handle h = dsmpool_seg_handle(a);
    cr_expect_neq(h, 0);
    memset(dsmpool_seg_address(a), 0x5a, 100000);
    cr_assert_eq(dsmpool_seg_attach(p, h, &b), 0);
    cr_assert_eq(dsmpool_seg_attach(p, h, &c), 0);
    cr_expect_eq(dsmpool_seg_address(b), dsmpool_seg_address(a));
    cr_expect_eq(((unsigned char *)dsmpool_seg_address(c))[99999], 0x5a);
    test_check_ok(p);
    cr_expect_eq(test_pool_free(p), free0 - 100 * 1024, "the tail went back to the pool");
    cr_assert_eq(dsmpool_seg_detach(a), 0);
    cr_assert_eq(dsmpool_seg_detach(b), 0);
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.segments_live, 1, "alive while one reference remains");
    cr_assert_eq(dsmpool_seg_detach(c), 0);
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.segments_live, 0, "destroyed by the last detach");
    cr_expect_eq(test_pool_free(p), free0);
    dsmpool_seg *d;
    cr_expect_eq(dsmpool_seg_attach(p, h, &d), -ESTALE);
    test_check_ok(p);
    cr_assert_eq(dsmpool_detach(p), 0);
}

Test(segments, pin_keeps_alive_unpin_destroys) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    dsmpool_seg *a, *b;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &a), 0);
    dsmpool_handle h = dsmpool_seg_handle(a);
    cr_assert_eq(dsmpool_seg_pin(a), 0);
    cr_expect_eq(dsmpool_seg_pin(a), -EALREADY);
    strcpy(dsmpool_seg_address(a), "pinned");
    cr_assert_eq(dsmpool_seg_detach(a), 0);
    cr_assert_eq(dsmpool_seg_attach(p, h, &b), 0, "a pinned segment outlives its references");
    cr_expect_str_eq(dsmpool_seg_address(b), "pinned");
    cr_assert_eq(dsmpool_seg_unpin(p, h), 0);
    cr_expect_eq(dsmpool_seg_unpin(p, h), -EINVAL, "not pinned any more");
    cr_assert_eq(dsmpool_seg_detach(b), 0);
    cr_expect_eq(dsmpool_seg_attach(p, h, &b), -ESTALE);
    /* Unpin with nobody attached destroys at once. */
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &a), 0);
    h = dsmpool_seg_handle(a);
    dsmpool_seg_pin(a);
    dsmpool_seg_detach(a);
    cr_assert_eq(dsmpool_seg_unpin(p, h), 0);
    cr_expect_eq(dsmpool_seg_attach(p, h, &b), -ESTALE);
    cr_expect_eq(dsmpool_seg_unpin(p, h), -ESTALE);
    test_check_ok(p);
    dsmpool_detach(p);
}

Test(segments, thousand_small_segments_in_16mib, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    cr_assert_geq(st.segments_capacity, 1024);
    size_t free0 = test_pool_free(p);
    static dsmpool_seg *s[1024];
    for (int i = 0; i < 1024; i++) {
        int r = dsmpool_seg_create(p, 4096, DSMPOOL_SEG_NO_FALLBACK, &s[i]);
        cr_assert_eq(r, 0, "segment %d: %s", i, dsmpool_last_error());
        *(int *)dsmpool_seg_address(s[i]) = i;
    }
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.segments_live, 1024);
    cr_expect_eq(st.fallback_segments_live, 0);
    test_check_ok(p);
    for (int i = 0; i < 1024; i++) {
        cr_assert_eq(*(int *)dsmpool_seg_address(s[i]), i, "segments overlap");
        cr_assert_eq(dsmpool_seg_detach(s[i]), 0);
    }
    /* the attachment record blocks went back with... nothing: they stay with the slot */
    test_check_ok(p);
    cr_expect_leq(free0 - test_pool_free(p), 8 * 4096, "only record blocks remain allocated");
    dsmpool_detach(p);
}

Test(segments, stale_handle_after_slot_reuse) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = 16 * MIB;
    cfg.max_segments = 4; /* force reuse of the same descriptors */
    dsmpool *p;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "%s", dsmpool_last_error());
    dsmpool_seg *a, *b;
    dsmpool_handle old[4];
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &a), 0);
        old[i] = dsmpool_seg_handle(a);
        dsmpool_seg_detach(a);
    }
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &a), 0);
    dsmpool_handle h = dsmpool_seg_handle(a);
    for (int i = 0; i < 4; i++) {
        cr_expect_neq(old[i], h);
        cr_expect_eq(dsmpool_seg_attach(p, old[i], &b), -ESTALE, "old handle %d", i);
    }
    dsmpool_seg *more[4];
    int n = 0, r;
    while ((r = dsmpool_seg_create(p, 4096, 0, &more[n])) == 0 && n < 3) n++;
    cr_expect_eq(n, 3);
    cr_expect_eq(dsmpool_seg_create(p, 4096, 0, &b), -ENOSPC, "table full");
    cr_expect(strstr(dsmpool_last_error(), "max_segments") != NULL, "%s", dsmpool_last_error());
    while (n--) dsmpool_seg_detach(more[n]);
    dsmpool_seg_detach(a);
    test_check_ok(p);
    dsmpool_detach(p);
}

Test(segments, fallback_to_os_and_no_fallback) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 8 * MIB);
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    dsmpool_seg *a, *b;
    size_t big = st.data_size + 1;
    cr_expect_eq(dsmpool_seg_create(p, big, DSMPOOL_SEG_NO_FALLBACK, &a), -ENOMEM);
    cr_assert_eq(dsmpool_seg_create(p, big, 0, &a), 0, "%s", dsmpool_last_error());
    cr_expect(dsmpool_seg_is_fallback(a));
    cr_expect_geq(dsmpool_seg_size(a), big);
    memset(dsmpool_seg_address(a), 7, big);
    cr_assert_eq(dsmpool_seg_attach(p, dsmpool_seg_handle(a), &b), 0);
    cr_expect_neq(dsmpool_seg_address(b), dsmpool_seg_address(a), "mapped twice");
    cr_expect_eq(((char *)dsmpool_seg_address(b))[big - 1], 7, "same memory");
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.fallback_segments_live, 1);
    cr_expect_eq(st.fallback_segments_created, 1);
    test_check_ok(p);
    dsmpool_seg_detach(a);
    dsmpool_seg_detach(b);
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.fallback_segments_live, 0);
    dsmpool_detach(p);
}

/* Attachment records past a process's DP_REC_INLINE take a frame of pool
 * memory; with every block taken, the attach (and a create, whose segment
 * the OS fallback serves) fails with -ENOMEM -- the exhaustion code, not
 * -ENOSPC, which is for full tables (issue 24) -- and changes nothing: the
 * reference count and the records are as they were. */
static unsigned recs_used(dsmpool *p) {
    unsigned n = 0;
    for (int i = 0; i < DP_REC_INLINE; i++) n += atomic_load(&p->procs[p->slot].rec[i]) != 0;
    return n;
}

Test(segments, no_pool_memory_for_an_attachment_record_is_enomem) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 8 * MIB);
    dsmpool_seg *x, *refs[DP_REC_INLINE + 1], *fill[DP_REC_INLINE], *s = (dsmpool_seg *)1;
    unsigned nrefs = 0, nfill = 0;
    cr_assert_eq(dsmpool_seg_create(p, 4096, DSMPOOL_SEG_NO_FALLBACK, &x), 0, "%s", dsmpool_last_error());
    dsmpool_handle h = dsmpool_seg_handle(x);
    /* every block of every sub-pool taken, one block per segment */
    for (;;) {
        dsmpool_stats st;
        cr_assert_eq(dsmpool_get_stats(p, &st), 0);
        unsigned best = 0;
        for (unsigned i = 1; i < st.nsubpools; i++)
            if (st.subpool[i].largest_free > st.subpool[best].largest_free) best = i;
        size_t big = st.subpool[best].largest_free;
        if (big == 0) break;
        cr_assert_lt(nfill, DP_REC_INLINE - 2, "the pool's free space is in few blocks");
        unsigned fl = DSMPOOL_SEG_NO_FALLBACK | DSMPOOL_SEG_LOCAL_ONLY |
                      (st.subpool[best].node < 0 ? DSMPOOL_SEG_INTERLEAVE
                                                 : DSMPOOL_SEG_ON_NODE(st.subpool[best].node));
        cr_assert_eq(dsmpool_seg_create(p, big, fl, &fill[nfill]), 0, "%zu bytes: %s", big,
                     dsmpool_last_error());
        nfill++;
    }
    cr_assert_eq(test_pool_free(p), 0, "no pool memory left");
    /* the inline records filled with references to x */
    while (recs_used(p) < DP_REC_INLINE) {
        cr_assert_eq(dsmpool_seg_attach(p, h, &refs[nrefs]), 0, "%s", dsmpool_last_error());
        nrefs++;
    }
    cr_assert_eq(atomic_load(&p->procs[p->slot].overflow), 0, "no overflow block yet");
    dp_seg_desc *d = &p->segs[DP_HANDLE_IDX(h)];
    uint64_t w0 = atomic_load(&d->state);
    size_t live = test_live_segments(p);

    cr_expect_eq(dsmpool_seg_attach(p, h, &s), -ENOMEM, "an attach needing an overflow block: %s",
                 dsmpool_last_error());
    cr_expect_null(s);
    cr_expect_neq(strstr(dsmpool_last_error(), "attachment record"), NULL, "%s", dsmpool_last_error());
    cr_expect_eq(atomic_load(&d->state), w0, "the reference count is unchanged");
    s = (dsmpool_seg *)1;
    cr_expect_eq(dsmpool_seg_create(p, 4096, 0, &s), -ENOMEM, "a create (OS fallback) needing one: %s",
                 dsmpool_last_error());
    cr_expect_null(s);
    cr_expect_neq(strstr(dsmpool_last_error(), "attachment record"), NULL, "%s", dsmpool_last_error());
    dsmpool_stats st;
    cr_assert_eq(dsmpool_get_stats(p, &st), 0);
    cr_expect_eq(st.segments_live, live, "the created segment was given back");
    cr_expect_eq(st.fallback_segments_live, 0);
    cr_expect_eq(recs_used(p), DP_REC_INLINE, "no record left behind or taken");
    cr_expect_eq(atomic_load(&p->procs[p->slot].overflow), 0);
    test_check_ok(p);

    /* memory again (a filler's record freed, and taken again by x): the
     * next attach takes an overflow block */
    cr_assert_eq(dsmpool_seg_detach(fill[--nfill]), 0);
    cr_assert_eq(dsmpool_seg_attach(p, h, &refs[nrefs]), 0, "%s", dsmpool_last_error());
    nrefs++;
    cr_assert_eq(dsmpool_seg_attach(p, h, &s), 0, "%s", dsmpool_last_error());
    cr_expect_neq(atomic_load(&p->procs[p->slot].overflow), 0);
    test_check_ok(p);
    /* x goes exactly with its last counted reference */
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    for (unsigned i = 0; i < nrefs; i++) cr_assert_eq(dsmpool_seg_detach(refs[i]), 0);
    cr_expect_eq(test_live_segments(p), live - 1, "x still held by its creator's reference");
    cr_assert_eq(dsmpool_seg_detach(x), 0);
    cr_expect_eq(test_live_segments(p), live - 2, "x destroyed by its last detach");
    cr_expect_eq(dsmpool_seg_attach(p, h, &s), -ESTALE);
    while (nfill) cr_assert_eq(dsmpool_seg_detach(fill[--nfill]), 0);
    cr_expect_eq(test_live_segments(p), 0);
    test_check_ok(p);
    cr_assert_eq(dsmpool_detach(p), 0);
}

Test(segments, bad_input) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 8 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_seg *s = (dsmpool_seg *)0x1, *t;
    cr_expect_eq(dsmpool_seg_create(p, 0, 0, &s), -EINVAL);
    cr_expect_null(s, "out is cleared on failure");
    cr_expect_eq(dsmpool_seg_create(p, (size_t)1 << 60, 0, &s), -EINVAL);
    cr_expect_eq(dsmpool_seg_create(p, 4096, 0x80, &s), -EINVAL);
    cr_expect_eq(dsmpool_seg_create(NULL, 4096, 0, &s), -EINVAL);
    cr_expect_eq(dsmpool_seg_create(p, 4096, 0, NULL), -EINVAL);
    /* larger than memory: the pool cannot, the OS refuses */
    cr_expect_eq(dsmpool_seg_create(p, (size_t)1 << 45, 0, &s), -ENOMEM, "%s", dsmpool_last_error());
    cr_expect_eq(dsmpool_seg_attach(p, 0, &s), -EINVAL);
    cr_expect_eq(dsmpool_seg_attach(p, 0xffffffffffffffffull, &s), -EINVAL);
    cr_expect_eq(dsmpool_seg_attach(p, (5ull << 32) | 3, &s), -ENOENT, "never issued");
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &s), 0);
    dsmpool_handle h = dsmpool_seg_handle(s);
    cr_expect_eq(dsmpool_seg_attach(p, h + (1ull << 32), &t), -ENOENT, "future generation");
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    cr_expect_eq(dsmpool_seg_detach(s), -EINVAL, "detach twice");
    cr_expect_eq(dsmpool_seg_detach(NULL), -EINVAL);
    cr_expect_eq(dsmpool_seg_attach(p, h, &t), -ESTALE);
    cr_expect_eq(dsmpool_seg_unpin(p, h), -ESTALE);
    cr_expect_eq(dsmpool_seg_unpin(p, 0), -EINVAL);
    cr_expect_eq(test_pool_free(p), free0, "nothing changed");
    test_check_ok(p);
    cr_expect_neq(strcmp(dsmpool_strerror(-ESTALE), "unknown error"), 0);
    cr_assert_eq(dsmpool_detach(p), 0);
    cr_expect_eq(dsmpool_detach(p), -EINVAL, "pool detach twice");
}

/* ---- threads ------------------------------------------------------------ */

typedef struct seg_thr {
    dsmpool *p;
    unsigned id;
    double seconds;
    uint64_t ops;
    const char *err;
} seg_thr;

static void *seg_thread(void *argp) {
    seg_thr *a = argp;
    uint64_t seed = test_seed() * 31 + a->id, end = test_now_ns() + (uint64_t)(a->seconds * 1e9);
    dsmpool_seg *held[32];
    uint64_t tag[32];
    size_t written[32];
    unsigned n = 0;
    while (test_now_ns() < end && !a->err) {
        if (n < 32 && (n == 0 || test_rand(&seed) % 2)) {
            size_t size = (size_t)4096 << (test_rand(&seed) % 7);
            size -= test_rand(&seed) % 4000;
            dsmpool_seg *s;
            int r = dsmpool_seg_create(a->p, size, DSMPOOL_SEG_NO_FALLBACK, &s);
            if (r == -ENOMEM) continue; /* the pool is full */
            if (r) { a->err = "create failed"; break; }
            uint64_t t = ((uint64_t)a->id << 48) ^ test_rand(&seed);
            uint64_t *w = dsmpool_seg_address(s);
            for (size_t i = 0; i < size / 8; i += 67) w[i] = t + i;
            /* Sometimes attach a second reference and detach the first. */
            if (test_rand(&seed) % 4 == 0) {
                dsmpool_seg *s2;
                if (dsmpool_seg_attach(a->p, dsmpool_seg_handle(s), &s2) != 0) { a->err = "attach"; break; }
                dsmpool_seg_detach(s);
                s = s2;
            }
            held[n] = s;
            written[n] = size;
            tag[n++] = t;
        } else if (n) {
            unsigned i = (unsigned)(test_rand(&seed) % n);
            uint64_t *w = dsmpool_seg_address(held[i]);
            for (size_t k = 0; k < written[i] / 8; k += 67)
                if (w[k] != tag[i] + k) {
                    a->err = "pattern overwritten: segments overlap";
                    break;
                }
            if (dsmpool_seg_detach(held[i]) != 0) a->err = "detach failed";
            held[i] = held[--n];
            tag[i] = tag[n];
            written[i] = written[n];
        }
        a->ops++;
    }
    while (n--) dsmpool_seg_detach(held[n]);
    return NULL;
}

static void seg_threads(unsigned nt) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    size_t free0 = test_pool_free(p);
    pthread_t tid[8];
    seg_thr args[8];
    for (unsigned i = 0; i < nt; i++) {
        args[i] = (seg_thr){p, i, test_seconds(2.0), 0, NULL};
        pthread_create(&tid[i], NULL, seg_thread, &args[i]);
    }
    uint64_t ops = 0;
    for (unsigned i = 0; i < nt; i++) {
        pthread_join(tid[i], NULL);
        cr_expect_null(args[i].err, "thread %u: %s", i, args[i].err);
        ops += args[i].ops;
    }
    cr_expect_gt(ops, 100);
    test_check_ok(p);
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.segments_live, 0);
    cr_expect_geq(test_pool_free(p) + 16 * 4096, free0, "all memory free (record blocks aside)");
    dsmpool_detach(p);
}

Test(segment_threads, two, .timeout = 90) { seg_threads(2); }
Test(segment_threads, four, .timeout = 90) { seg_threads(4); }
Test(segment_threads, eight, .timeout = 90) { seg_threads(8); }
