/*
 * test_scribble.c -- a process that scribbles on the mapping cannot make the
 * library touch memory outside the region, or crash another process.
 *
 * Targeted damage (one kind per case, each in a fresh pool in a child
 * process): the library answers with documented errors, hands out only
 * addresses inside the data, never takes a signal, and dsmpool_check()
 * reports the damage where it can see it (the case table says where).
 * Random damage: a scribbler process writes random values into random words
 * of the tables (and of the data) while three workers run mixed operations;
 * nobody may take a signal.
 *
 * Damage may lose memory or hand it out twice (a link that points at another
 * live chunk is indistinguishable from a good one): that is why the workers
 * here never check patterns, only addresses and error codes.
 */
#include <criterion/criterion.h>
#include <dsmpool.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "dp_internal.h"
#include "testhooks.h"
#include "testutil.h"


static bool documented(int r) {
    static const int ok[] = {0, -EINVAL, -ENOMEM, -ENOSPC, -ESTALE, -EUCLEAN, -EBUSY, -EPROTO,
                             -ENOENT, -EALREADY};
    for (unsigned i = 0; i < sizeof ok / sizeof *ok; i++)
        if (r == ok[i]) return true;
    return false;
}

typedef struct work {
    dsmpool *p;
    dsmpool_area *a;
    char *lo, *hi; /* the data */
} work;

/* Mixed operations; every address must lie in the data, every return be
 * documented. Returns 0, or a code saying what went wrong. */
static int workload(work *w, uint64_t seed, int ops) {
    dsmpool_ptr ptr[64];
    size_t len[64];
    dsmpool_seg *segs[16];
    int n = 0, ns = 0;
    for (int i = 0; i < ops; i++) {
        uint64_t r = test_rand(&seed) % 100;
        int e;
        if (r < 40 && n < 64) {
            size_t sz = r < 25 ? 32 * KIB : 1 + test_rand(&seed) % (r < 37 ? 5000 : 3 * MIB);
            e = dsmpool_area_alloc(w->a, sz, 0, &ptr[n]);
            if (e == 0) {
                char *m = dsmpool_area_addr(w->a, ptr[n]);
                if (!m || m < w->lo || m + sz > w->hi) return 20;
                memset(m, 0x11, sz < 4096 ? sz : 4096);
                len[n++] = sz;
            }
        } else if (r < 70 && n) {
            int k = (int)(test_rand(&seed) % (uint64_t)n);
            e = dsmpool_area_free(w->a, ptr[k]);
            ptr[k] = ptr[--n];
            len[k] = len[n];
        } else if (r < 80 && ns < 16) {
            e = dsmpool_seg_create(w->p, (size_t)4096 << (test_rand(&seed) % 8), DSMPOOL_SEG_NO_FALLBACK, &segs[ns]);
            if (e == 0) {
                char *m = dsmpool_seg_address(segs[ns]);
                size_t sz = dsmpool_seg_size(segs[ns]);
                if (!m || m < w->lo || m + sz > w->hi) return 21;
                memset(m, 0x22, sz);
                ns++;
            }
        } else if (r < 90 && ns) {
            int k = (int)(test_rand(&seed) % (uint64_t)ns);
            e = dsmpool_seg_detach(segs[k]);
            segs[k] = segs[--ns];
        } else if (r < 95) {
            dsmpool_seg *s;
            e = dsmpool_seg_attach(w->p, test_rand(&seed) % 2 ? (dsmpool_handle)test_rand(&seed) : 1, &s);
            if (e == 0) dsmpool_seg_detach(s);
        } else {
            e = dsmpool_area_free(w->a, test_rand(&seed) & ~63ull); /* a wild pointer */
        }
        if (!documented(e)) return 30;
    }
    return 0;
}

static work new_work(size_t size) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = size;
    work w = {0};
    cr_assert_eq(dsmpool_create(&cfg, &w.p), 0);
    cr_assert_eq(dsmpool_area_create(w.p, DSMPOOL_AREA_NO_FALLBACK, &w.a), 0);
    w.lo = w.p->base + w.p->geo.data_off;
    w.hi = w.lo + w.p->geo.data_size;
    return w;
}

/* ---- targeted damage ------------------------------------------------------ */

typedef void (*damage_fn)(work *w);

static void warm(work *w, dsmpool_ptr *x, size_t sz) {
    cr_assert_eq(dsmpool_area_alloc(w->a, sz, 0, x), 0);
    dsmpool_ptr y;
    cr_assert_eq(dsmpool_area_alloc(w->a, sz, 0, &y), 0);
    cr_assert_eq(dsmpool_area_free(w->a, y), 0);
}

static uint64_t past_end(work *w) { return (uint64_t)(w->hi - w->p->base) + 64 * KIB; }

static void d_cache_head(work *w) { /* a cache list head past the data */
    dsmpool_ptr x;
    warm(w, &x, 32 * KIB);
    atomic_store(dp_area_test_word(w->a, "head", dp_area_test_class(32 * KIB), 0), past_end(w));
}

static void d_chunk_link(work *w) { /* a freed chunk's link past the data */
    dsmpool_ptr x;
    warm(w, &x, 32 * KIB);
    cr_assert_eq(dsmpool_area_free(w->a, x), 0);
    uint64_t bad = past_end(w) & ~(32 * KIB - 1);
    memcpy(dsmpool_area_addr(w->a, x), &bad, 8);
}

static void d_head_misaligned(work *w) { /* a 1 MiB class head: not a chunk start, near the end */
    dsmpool_ptr x;
    warm(w, &x, MIB);
    uint64_t end = (uint64_t)(w->hi - w->p->base);
    atomic_store(dp_area_test_word(w->a, "head", dp_area_test_class(MIB), 0), end - 4096);
}

static void d_bump_other(work *w) { /* a bump word for a class this thread never refilled */
    dsmpool_ptr x;
    warm(w, &x, 32 * KIB);
    dp_a64 *b = dp_area_test_word(w->a, "bump", dp_area_test_class(256), 0);
    uint64_t real = atomic_load(dp_area_test_word(w->a, "bump", dp_area_test_class(32 * KIB), 0));
    atomic_store(b, (real & ~0x3fffffffffull) | 100); /* the 32 KiB span's entry, 100 chunks left */
}

static void d_bump(work *w) { /* a bump range whose next index is beyond the span */
    dsmpool_ptr x;
    warm(w, &x, 100);
    dp_a64 *b = dp_area_test_word(w->a, "bump", dp_area_test_class(100), 0);
    atomic_store(b, atomic_load(b) | (0x7ffffull << 19));
}

static void d_regpage(work *w) { /* the registry page's offset past the data */
    dsmpool_ptr x;
    warm(w, &x, 32 * KIB);
    atomic_store(dp_area_test_word(w->a, "regpage", 0, 0), past_end(w));
}

static void d_span_stack(work *w) { /* a span's returned stack: count and head garbage */
    dsmpool_ptr v[70];
    for (int i = 0; i < 70; i++) cr_assert_eq(dsmpool_area_alloc(w->a, 32 * KIB, 0, &v[i]), 0);
    for (int i = 0; i < 70; i++) cr_assert_eq(dsmpool_area_free(w->a, v[i]), 0);
    dp_a64 *st = dp_area_test_word(w->a, "span", 0, v[0]);
    cr_assert_not_null(st);
    atomic_store(st, (atomic_load(st) & ~0xffffffff00ull) | (0xffffull << 8) | (0x7fffull << 24));
    dsmpool_area_flush(w->a);
}

static void d_seg_block(work *w) { /* a segment descriptor naming a block past the data */
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(w->p, 8192, 0, &s), 0);
    dp_seg_desc *d = &w->p->segs[DP_HANDLE_IDX(dsmpool_seg_handle(s))];
    atomic_store(&d->block, DP_BLOCK_MK(past_end(w) & ~4095ull, 1));
    dsmpool_seg *t;
    int r = dsmpool_seg_attach(w->p, dsmpool_seg_handle(s), &t);
    cr_assert_eq(r, -EPROTO, "attach of a damaged descriptor: %d", r);
    dsmpool_seg_detach(s); /* the last reference: destroy must not free what it names */
}

static void d_overflow(work *w) { /* a slot's record-block link past the data */
    dsmpool_seg *s[40];
    for (int i = 0; i < 40; i++) cr_assert_eq(dsmpool_seg_create(w->p, 4096, 0, &s[i]), 0);
    atomic_store(&w->p->procs[w->p->slot].overflow, past_end(w));
}

static void d_directory(work *w) { /* a directory word naming another area */
    dsmpool_ptr x;
    warm(w, &x, 32 * KIB);
    uint64_t k = (x - w->p->geo.data_off) >> DP_DIR_SHIFT; /* a word per 4 KiB */
    atomic_store(&w->p->dir[k], atomic_load(&w->p->dir[k]) ^ (1ull << 40));
    int r = dsmpool_area_free(w->a, x);
    cr_assert_eq(r, -EINVAL, "free through a damaged directory word: %d", r);
}

static void d_leaf(work *w) { /* an allocator leaf: every frame marked free */
    dsmpool_ptr x;
    warm(w, &x, 4096);
    dp_pa *pa = &w->p->pa[0];
    for (uint64_t i = 0; i < pa->count[0]; i++) {
        dp_a64 *lw = dp_pa_word(pa, 0, i);
        if ((atomic_load(lw) >> 32 & 7) == 1 && (uint32_t)atomic_load(lw)) { /* OPEN, with frames held */
            atomic_store(lw, atomic_load(lw) & ~0xffffffffull);
            break;
        }
    }
}

static const struct {
    const char *name;
    damage_fn fn;
    bool check_sees; /* check() must say -EUCLEAN afterwards */
} cases[] = {
    {"cache head past the data", d_cache_head, false}, /* dropped on the next pop: a leak */
    {"chunk link past the data", d_chunk_link, false}, /* dropped on the next pop: a leak */
    {"bump index beyond the span", d_bump, false},     /* dropped: a leak */
    {"cache head not a chunk start", d_head_misaligned, false}, /* dropped: a leak */
    {"bump word of another span", d_bump_other, false}, /* dropped */
    {"registry page past the data", d_regpage, true},
    {"span stack garbage", d_span_stack, true},
    {"segment block past the data", d_seg_block, true},
    {"record block link past the data", d_overflow, true},
    {"directory word of another area", d_directory, false},
    {"allocator leaf zeroed", d_leaf, true},
};

Test(scribble, targeted_damage_gives_errors_not_signals, .timeout = 120) {
    for (unsigned c = 0; c < sizeof cases / sizeof *cases; c++) {
        pid_t kid = fork();
        if (kid == 0) {
            work w = new_work(64 * MIB);
            cases[c].fn(&w);
            int r = workload(&w, test_seed() + c, 3000);
            if (r) _exit(r);
            r = dsmpool_check(w.p);
            if (!documented(r)) _exit(31);
            if (cases[c].check_sees && r != -EUCLEAN) _exit(32);
            fprintf(stderr, "[NOTE] %-34s check: %s\n", cases[c].name,
                    r ? dsmpool_last_error() : "sound (the damage only leaked memory)");
            r = dsmpool_recover(w.p);
            if (!documented(r)) _exit(33);
            dsmpool_area_destroy(w.a);
            dsmpool_detach(w.p);
            _exit(0);
        }
        int st = test_wait(kid);
        cr_expect_eq(st, 0, "%s: %s (%d)", cases[c].name,
                     st >= 128 ? "a signal" : st == 20 || st == 21 ? "an address outside the data"
                                            : st == 32 ? "check() did not see it" : "an undocumented result",
                     st);
    }
}

/* ---- random damage while operations run ---------------------------------- */

Test(scribble, random_words_while_operations_run, .timeout = 300) {
    work w = new_work(64 * MIB);
    _Atomic int *stop = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(stop, MAP_FAILED);
    *stop = 0;
    pid_t kids[4];
    for (int k = 0; k < 3; k++)
        if ((kids[k] = fork()) == 0) {
            dsmpool_area *mine;
            if (dsmpool_area_attach(w.p, dsmpool_area_handle(w.a), &mine) != 0) _exit(3);
            work mw = w;
            mw.a = mine;
            uint64_t seed = test_seed() + 977 * (uint64_t)k;
            while (!atomic_load(stop)) {
                int r = workload(&mw, test_rand(&seed), 200);
                if (r) _exit(r);
            }
            _exit(0);
        }
    if ((kids[3] = fork()) == 0) { /* the scribbler: tables, and now and then the data */
        uint64_t seed = test_seed() ^ 0x5c;
        uint64_t meta = w.p->geo.meta_end / 8, data = w.p->geo.data_size / 8;
        uint64_t *base = (uint64_t *)w.p->base, *d0 = (uint64_t *)w.lo;
        while (!atomic_load(stop)) {
            uint64_t r = test_rand(&seed), v = test_rand(&seed);
            if (r % 8 == 0) v &= 0xffffffffull; /* small values look like offsets and counts */
            uint64_t at = r % 4 == 0 ? (test_rand(&seed) % data) : (test_rand(&seed) % meta);
            uint64_t *word = r % 4 == 0 ? d0 + at : base + at;
            __atomic_store_n(word, v, __ATOMIC_RELAXED);
            usleep(50);
        }
        _exit(0);
    }
    usleep((useconds_t)(test_seconds(3.0) * 1e6));
    atomic_store(stop, 1);
    for (int k = 0; k < 4; k++) {
        int st = test_wait(kids[k]);
        cr_expect_eq(st, 0, "process %d: %s (%d)", k, st >= 128 ? "killed by a signal" : "bad result", st);
    }
    int r = dsmpool_recover(w.p);
    cr_expect(documented(r), "recover: %d", r);
    r = dsmpool_check(w.p);
    cr_expect(documented(r), "check: %d", r);
    fprintf(stderr, "[NOTE] after random scribbles check says: %s\n", r ? dsmpool_last_error() : "sound");
    dsmpool_detach(w.p);
}
