/*
 * test_fuzz.c -- the public API under random use, good and bad.
 *
 * Two processes share a pool and call the whole API at random: pools
 * (stats, recover, prefault, fd, pages per node, a second attachment),
 * segments (create with random sizes and flags, attach by published, stale
 * and random handles, pin, unpin, detach), areas (create, attach, alloc of
 * random sizes and flags, free of live, freed, foreign and wild pointers,
 * limits, flush, stats, destroy), errors (strerror, backing names) -- and
 * bad arguments everywhere (NULL, 0, huge, unknown flags). Every result
 * must be 0 or an error code documented for that call, with a message.
 * (Wild pointers that are chunk starts never handed out are given only to
 * checked areas: an unchecked area cannot tell them, as dsmpool.h says.)
 *
 * No memory handed out twice: a shared map has a bit per 8 bytes (the
 * smallest alignment: the 24, 40 and 56 B classes) of the data, set 64 at
 * a time by one atomic OR, and a byte at each holding's first 8 bytes that
 * names its holder for the message; each process marks what it is given (an
 * allocation, a segment it created) and clears it before giving it back; a
 * byte already marked is memory handed to two owners. Every CHECK_EVERY calls both processes
 * meet, and one runs dsmpool_check(), which must say 0.
 *
 * Seeded (DSMPOOL_TEST_SEED); DSMPOOL_FUZZ_CALLS sets the calls per run
 * (default 500000 x DSMPOOL_TEST_SCALE: 10^6 over the plain, ASan and TSan
 * runs of tools/test.sh).
 */
#include <criterion/criterion.h>
#include <dsmpool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "dp_internal.h"
#include "testutil.h"

#define NPROC 2
#define CHECK_EVERY 2500
/* documented results of each call (0 ends a list) */
static const int R_SEG_CREATE[] = {EINVAL, ENOMEM, ENOSPC, EUCLEAN, 0};
static const int R_SEG_ATTACH[] = {EINVAL, ENOENT, ESTALE, ENOSPC, ENOMEM, EPROTO, 0};
static const int R_SEG_DETACH[] = {EINVAL, ESTALE, 0};
static const int R_SEG_PIN[] = {EINVAL, ESTALE, EALREADY, 0};
static const int R_AREA_CREATE[] = {EINVAL, ENOMEM, ENOSPC, 0};
static const int R_AREA_ATTACH[] = {EINVAL, ENOENT, ESTALE, ENOSPC, ENOMEM, 0};
static const int R_AREA_ALLOC[] = {EINVAL, ENOMEM, ESTALE, ENOSPC, EUCLEAN, 0};
static const int R_AREA_OTHER[] = {EINVAL, ESTALE, ENOSPC, 0};
static const int R_EINVAL[] = {EINVAL, 0};
static const int R_NONE[] = {0};
static const int R_PAGES[] = {EINVAL, ENOSYS, EPERM, EFAULT, 0};

typedef struct fz_shared {
    pthread_barrier_t meet;
    _Atomic uint64_t seghandles[64];  /* published segment handles (maybe stale) */
    _Atomic uint64_t shared_area;
    _Atomic int fail;
    char why[512];
    _Atomic uint64_t calls[NPROC], checks;
    /* the shadow: FZ_WORDS(data) words of a bit per FZ_GRAN bytes of the data
     * (set: held), then a byte per FZ_GRAN bytes, set at a holding's first
     * granule only: (process + 1) | kind << 4 */
    _Atomic uint64_t held[];
} fz_shared;

typedef struct fz {
    dsmpool *p;
    fz_shared *sh;
    char *data;
    uint64_t data_size;
    uint64_t seed;
    int id;
    /* what this process holds */
    struct { dsmpool_seg *s; bool mine; bool pinned; } segs[32];
    int nsegs;
    struct { dsmpool_area *a; bool shared, checked; } areas[4];
    int nareas;
    struct { int ai; dsmpool_ptr p; size_t n; } ptrs[256];
    int nptrs;
    dsmpool_ptr freed[64]; /* recently freed (for double frees) */
    int ai_freed[64];
    int nfreed;
    uint64_t pinned[16];
    int npinned;
} fz;

static void fz_fail(fz *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fz_fail(fz *f, const char *fmt, ...) {
    int z = 0;
    if (atomic_compare_exchange_strong(&f->sh->fail, &z, f->id + 1)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(f->sh->why, sizeof f->sh->why, fmt, ap);
        va_end(ap);
    }
}

static uint64_t rnd(fz *f, uint64_t n) { return n ? test_rand(&f->seed) % n : 0; }

/* r must be 0 or one of the documented codes; an error has a message */
static void expect(fz *f, const char *call, int r, const int *allowed) {
    if (r == 0) return;
    bool ok = false;
    for (const int *a = allowed; *a && !ok; a++) ok = r == -*a;
    if (!ok)
        fz_fail(f, "%s returned %d (%s): not documented for it", call, r, dsmpool_last_error());
    else if (!strcmp(dsmpool_last_error(), "no error"))
        fz_fail(f, "%s returned %d without a message", call, r);
}

/* ---- the shadow: a byte per FZ_GRAN bytes of the data -------------------- */

#define FZ_GRAN 8u /* every allocation starts at a multiple of 8 (16 from 64 B) */
#define FZ_WORDS(data_size) (((data_size) / FZ_GRAN + 63) / 64)

static const char *kinds[] = {"?", "a segment", "an allocation"};

/* The holder whose holding starts at or before granule g (at most 4 MiB
 * before), for the message: 0 if none is found. */
static uint8_t shadow_holder(fz *f, uint64_t g) {
    _Atomic uint8_t *first = (_Atomic uint8_t *)&f->sh->held[FZ_WORDS(f->data_size)];
    for (uint64_t k = g + 1, stop = g > (4u << 20) / FZ_GRAN ? g - (4u << 20) / FZ_GRAN : 0; k-- > stop;) {
        uint8_t o = atomic_load(&first[k]);
        if (o) return o;
    }
    return 0;
}

static void shadow(fz *f, const void *addr, size_t n, bool take, const char *what) {
    const char *a = addr;
    if (!a || a < f->data || a >= f->data + f->data_size) return; /* OS fallback memory */
    uint8_t me = (uint8_t)((f->id + 1) | (strstr(what, "segment") ? 1 : 2) << 4);
    uint64_t nb = f->data_size / FZ_GRAN;
    uint64_t lo = (uint64_t)(a - f->data) / FZ_GRAN, hi = ((uint64_t)(a - f->data) + n + FZ_GRAN - 1) / FZ_GRAN;
    if (hi > nb) hi = nb;
    if (lo >= hi) return;
    _Atomic uint8_t *first = (_Atomic uint8_t *)&f->sh->held[FZ_WORDS(f->data_size)];
    if (!take) atomic_store(&first[lo], 0);
    for (uint64_t b = lo; b < hi;) {
        uint64_t w = b / 64, e = (w + 1) * 64 < hi ? (w + 1) * 64 : hi, cnt = e - b;
        uint64_t mask = (cnt == 64 ? ~0ull : (1ull << cnt) - 1) << (b % 64);
        if (take) {
            uint64_t old = atomic_fetch_or(&f->sh->held[w], mask);
            if (old & mask) {
                uint64_t c = w * 64 + (uint64_t)__builtin_ctzll(old & mask);
                uint8_t o = shadow_holder(f, c);
                fz_fail(f, "%s at data offset %llu (+%llu of %zu): memory handed out twice; process %d "
                        "holds it as %s", what, (unsigned long long)(lo * FZ_GRAN),
                        (unsigned long long)((c - lo) * FZ_GRAN), n, (o & 15) - 1, kinds[(o >> 4) % 3]);
                return;
            }
        } else {
            atomic_fetch_and(&f->sh->held[w], ~mask);
        }
        b = e;
    }
    if (take) atomic_store(&first[lo], me);
}

/* ---- calls ----------------------------------------------------------------- */

static size_t rand_size(fz *f) {
    uint64_t r = rnd(f, 100);
    if (r < 2) return 0;
    if (r < 4) return (size_t)1 << (40 + rnd(f, 20));
    if (r < 50) return 32 * KIB;
    if (r < 80) return 1 + rnd(f, 4096);
    if (r < 95) return 1 + rnd(f, MIB);
    return MIB + rnd(f, 3 * MIB);
}

static void op_seg_create(fz *f) {
    if (f->nsegs >= 32) return;
    unsigned flags = rnd(f, 10) == 0 ? (unsigned)test_rand(&f->seed) : rnd(f, 3) ? DSMPOOL_SEG_NO_FALLBACK : 0;
    if (rnd(f, 10) == 0) flags = DSMPOOL_SEG_ON_NODE(rnd(f, 3)) | DSMPOOL_SEG_NO_FALLBACK;
    size_t sz = rnd(f, 4) ? (size_t)4096 << rnd(f, 9) : rand_size(f);
    dsmpool_seg *s = NULL;
    int r = dsmpool_seg_create(rnd(f, 50) ? f->p : NULL, sz, flags, rnd(f, 50) ? &s : NULL);
    expect(f, "dsmpool_seg_create", r, R_SEG_CREATE);
    if (r) return;
    if (!s) return;
    shadow(f, dsmpool_seg_address(s), dsmpool_seg_size(s), true, "a new segment");
    memset(dsmpool_seg_address(s), f->id, dsmpool_seg_size(s) < 8192 ? dsmpool_seg_size(s) : 8192);
    f->segs[f->nsegs].s = s;
    f->segs[f->nsegs].mine = true;
    f->segs[f->nsegs++].pinned = false;
    atomic_store(&f->sh->seghandles[rnd(f, 64)], dsmpool_seg_handle(s));
}

static void op_seg_attach(fz *f) {
    if (f->nsegs >= 32) return;
    dsmpool_handle h = rnd(f, 5) ? atomic_load(&f->sh->seghandles[rnd(f, 64)]) : test_rand(&f->seed);
    dsmpool_seg *s;
    int r = dsmpool_seg_attach(f->p, h, &s);
    expect(f, "dsmpool_seg_attach", r, R_SEG_ATTACH);
    if (r == 0) {
        f->segs[f->nsegs].s = s;
        f->segs[f->nsegs].mine = false;
        f->segs[f->nsegs++].pinned = false;
    }
}

static void op_seg_detach(fz *f) {
    if (!f->nsegs) {
        expect(f, "dsmpool_seg_detach(NULL)", dsmpool_seg_detach(NULL), R_SEG_DETACH);
        return;
    }
    int i = (int)rnd(f, (uint64_t)f->nsegs);
    dsmpool_seg *s = f->segs[i].s;
    dsmpool_handle h = dsmpool_seg_handle(s);
    bool keep = f->segs[i].pinned && f->npinned < 16; /* else unpinned now */
    if (f->segs[i].mine && !keep) shadow(f, dsmpool_seg_address(s), dsmpool_seg_size(s), false, "");
    if (keep) f->pinned[f->npinned++] = h;
    expect(f, "dsmpool_seg_detach", dsmpool_seg_detach(s), R_SEG_DETACH);
    if (f->segs[i].pinned && !keep) expect(f, "dsmpool_seg_unpin", dsmpool_seg_unpin(f->p, h), R_SEG_DETACH);
    f->segs[i] = f->segs[--f->nsegs];
}

static void op_seg_pin(fz *f) {
    if (!f->nsegs) return;
    int i = (int)rnd(f, (uint64_t)f->nsegs);
    int r = dsmpool_seg_pin(f->segs[i].s);
    expect(f, "dsmpool_seg_pin", r, R_SEG_PIN);
    /* a pinned segment outlives its creator's detach: it stays in the
     * shadow until it is unpinned (only the creator tracks it) */
    if (r == 0 && f->segs[i].mine) f->segs[i].pinned = true;
    else if (r == 0) dsmpool_seg_unpin(f->p, dsmpool_seg_handle(f->segs[i].s));
}

static void op_seg_unpin(fz *f) {
    if (f->npinned && rnd(f, 2)) {
        int i = (int)rnd(f, (uint64_t)f->npinned);
        uint64_t h = f->pinned[i];
        /* the memory goes back if nobody is attached: clear the shadow first */
        dsmpool_seg *s;
        if (dsmpool_seg_attach(f->p, h, &s) == 0) {
            shadow(f, dsmpool_seg_address(s), dsmpool_seg_size(s), false, "");
            dsmpool_seg_detach(s);
        }
        expect(f, "dsmpool_seg_unpin", dsmpool_seg_unpin(f->p, h), R_SEG_DETACH);
        f->pinned[i] = f->pinned[--f->npinned];
        return;
    }
    /* a random handle (never a published one: unpinning another process's
     * pinned segment behind its back is legal, and would look like a
     * double hand-out to its shadow) */
    expect(f, "dsmpool_seg_unpin (random)", dsmpool_seg_unpin(f->p, test_rand(&f->seed)), R_SEG_DETACH);
}

static void op_area_create(fz *f) {
    if (f->nareas >= 4) return;
    unsigned flags = rnd(f, 10) == 0 ? (unsigned)test_rand(&f->seed) : (unsigned)rnd(f, 4);
    dsmpool_area *a = NULL;
    int r = dsmpool_area_create(rnd(f, 50) ? f->p : NULL, flags, &a);
    expect(f, "dsmpool_area_create", r, R_AREA_CREATE);
    if (r == 0) {
        f->areas[f->nareas].a = a;
        f->areas[f->nareas].checked = flags & DSMPOOL_AREA_CHECKED;
        f->areas[f->nareas++].shared = false;
    }
}

/* forget what area ai held: it was destroyed (its memory went with it) */
static void area_gone(fz *f, int ai, bool shadowed) {
    for (int k = 0; k < f->nptrs;)
        if (f->ptrs[k].ai == ai) {
            if (shadowed) shadow(f, dsmpool_area_addr(f->areas[ai].a, f->ptrs[k].p), f->ptrs[k].n, false, "");
            f->ptrs[k] = f->ptrs[--f->nptrs];
        } else {
            k++;
        }
    for (int k = 0; k < f->nfreed;)
        if (f->ai_freed[k] == ai) {
            f->freed[k] = f->freed[--f->nfreed];
            f->ai_freed[k] = f->ai_freed[f->nfreed];
        } else {
            k++;
        }
}

static void area_drop(fz *f, int ai) { /* and renumber the last one to ai */
    int last = --f->nareas;
    if (ai != last) {
        f->areas[ai] = f->areas[last];
        for (int k = 0; k < f->nptrs; k++)
            if (f->ptrs[k].ai == last) f->ptrs[k].ai = ai;
        for (int k = 0; k < f->nfreed; k++)
            if (f->ai_freed[k] == last) f->ai_freed[k] = ai;
    }
}

static void op_area_end(fz *f) { /* detach or destroy a private area */
    for (int ai = 0; ai < f->nareas; ai++) {
        if (f->areas[ai].shared) continue;
        area_gone(f, ai, true);
        int r = rnd(f, 2) ? dsmpool_area_destroy(f->areas[ai].a) : dsmpool_area_detach(f->areas[ai].a);
        expect(f, "dsmpool_area_destroy/detach", r, R_AREA_OTHER);
        area_drop(f, ai);
        return;
    }
}

static void op_alloc(fz *f) {
    if (!f->nareas || f->nptrs >= 256) return;
    int ai = (int)rnd(f, (uint64_t)f->nareas);
    size_t sz = rand_size(f);
    unsigned flags = rnd(f, 20) == 0 ? (unsigned)test_rand(&f->seed) : (unsigned)rnd(f, 4);
    dsmpool_ptr p = 0;
    int r = dsmpool_area_alloc(f->areas[ai].a, sz, flags, rnd(f, 100) ? &p : NULL);
    expect(f, "dsmpool_area_alloc", r, R_AREA_ALLOC);
    if (r || !p) return;
    char *m = dsmpool_area_addr(f->areas[ai].a, p);
    if (!m) {
        fz_fail(f, "an allocation has no address");
        return;
    }
    if ((flags & DSMPOOL_ALLOC_ZERO) && (m[0] || m[sz - 1])) fz_fail(f, "DSMPOOL_ALLOC_ZERO memory is not zero");
    shadow(f, m, sz, true, "a new allocation");
    for (int k = 0; k < f->nfreed;) /* they may come back now: no more double frees of them */
        if (f->ai_freed[k] == ai) {
            f->freed[k] = f->freed[--f->nfreed];
            f->ai_freed[k] = f->ai_freed[f->nfreed];
        } else {
            k++;
        }
    memset(m, 0xa0 + f->id, sz < 4096 ? sz : 4096);
    f->ptrs[f->nptrs].ai = ai;
    f->ptrs[f->nptrs].p = p;
    f->ptrs[f->nptrs++].n = sz;
}

/* A wild pointer for a free in an unchecked area, made of any value: never
 * a chunk start, since such an area cannot tell one that was never handed
 * out (dsmpool.h): 4 past a multiple of 8, and every chunk and block starts
 * at a multiple of 8. (8 past a 64-byte line, as this was before, is a
 * chunk start of the 24, 40 and 56 B classes: the 24 B class's chunk 3 is
 * at 72.) Checked areas get any value. */
static dsmpool_ptr wild_form(dsmpool_ptr v) { return (v & ~7ull) | 4; }

static void op_free(fz *f) {
    if (!f->nareas) return;
    uint64_t r = rnd(f, 100);
    if ((r < 80 || !f->nfreed) && f->nptrs) {
        int k = (int)rnd(f, (uint64_t)f->nptrs);
        int ai = f->ptrs[k].ai;
        dsmpool_area *a = f->areas[ai].a;
        shadow(f, dsmpool_area_addr(a, f->ptrs[k].p), f->ptrs[k].n, false, "");
        int e = dsmpool_area_free(a, f->ptrs[k].p);
        expect(f, "dsmpool_area_free", e, R_AREA_OTHER);
        if (e) fz_fail(f, "a live allocation could not be freed: %s", dsmpool_last_error());
        /* a chunk of a private area that nobody has allocated since can be
         * freed again: only this process allocates there */
        if (!f->areas[ai].shared && f->nfreed < 64) {
            f->ai_freed[f->nfreed] = ai;
            f->freed[f->nfreed++] = f->ptrs[k].p;
        }
        f->ptrs[k] = f->ptrs[--f->nptrs];
    } else if (r < 90 && f->nfreed) { /* a double free */
        int k = (int)rnd(f, (uint64_t)f->nfreed);
        int e = dsmpool_area_free(f->areas[f->ai_freed[k]].a, f->freed[k]);
        expect(f, "dsmpool_area_free (double)", e, R_AREA_OTHER);
        if (e != -EINVAL) fz_fail(f, "a double free was accepted (%d)", e);
        f->freed[k] = f->freed[--f->nfreed];
        f->ai_freed[k] = f->ai_freed[f->nfreed];
    } else { /* foreign and wild pointers */
        int ai = (int)rnd(f, (uint64_t)f->nareas);
        dsmpool_ptr p = rnd(f, 2) ? test_rand(&f->seed) : (dsmpool_ptr)rnd(f, f->data_size) & ~63ull;
        if (!f->areas[ai].checked) p = wild_form(p);
        bool live = false; /* a wild pointer that hits one of our live chunks is a free, not a wild one */
        for (int k = 0; k < f->nptrs && !live; k++) live = f->ptrs[k].p == p;
        if (!live) expect(f, "dsmpool_area_free (wild)", dsmpool_area_free(f->areas[ai].a, p), R_AREA_OTHER);
    }
}

static void op_misc(fz *f) {
    dsmpool_stats st;
    dsmpool_area_stats as;
    switch (rnd(f, 10)) {
    case 0: expect(f, "dsmpool_get_stats", dsmpool_get_stats(f->p, rnd(f, 20) ? &st : NULL), R_EINVAL); break;
    case 1: expect(f, "dsmpool_recover", dsmpool_recover(f->p), R_NONE); break;
    case 2:
        if (f->nareas)
            expect(f, "dsmpool_area_get_stats", dsmpool_area_get_stats(f->areas[rnd(f, (uint64_t)f->nareas)].a, &as),
                   R_AREA_OTHER);
        break;
    case 3:
        if (f->nareas)
            expect(f, "dsmpool_area_flush", dsmpool_area_flush(f->areas[rnd(f, (uint64_t)f->nareas)].a), R_AREA_OTHER);
        break;
    case 4:
        if (f->nareas) {
            dsmpool_area *a = f->areas[rnd(f, (uint64_t)f->nareas)].a;
            expect(f, "dsmpool_area_set_limit", dsmpool_area_set_limit(a, rnd(f, 2) ? 0 : (size_t)rnd(f, 64 * MIB)),
                   R_AREA_OTHER);
        }
        break;
    case 5: {
        size_t counts[8];
        long n = dsmpool_pages_per_node(f->data, 16 * 4096, counts, 8);
        if (n < 0) expect(f, "dsmpool_pages_per_node", (int)n, R_PAGES);
        break;
    }
    case 6:
        if (!dsmpool_strerror(-(int)rnd(f, 200)) || !dsmpool_backing_name((dsmpool_backing)rnd(f, 6)))
            fz_fail(f, "a NULL name");
        break;
    case 7: expect(f, "dsmpool_seg_create(0)", dsmpool_seg_create(f->p, 0, 0, &(dsmpool_seg *){0}), R_EINVAL); break;
    case 8: {
        dsmpool_area *a;
        int r = dsmpool_area_attach(f->p, rnd(f, 2) ? test_rand(&f->seed) : atomic_load(&f->sh->seghandles[rnd(f, 64)]), &a);
        expect(f, "dsmpool_area_attach", r, R_AREA_ATTACH);
        if (r == 0) dsmpool_area_detach(a); /* a segment handle that names an area: leave it */
        break;
    }
    default: expect(f, "dsmpool_check(NULL)", dsmpool_check(NULL), R_EINVAL); break;
    }
}

/* ---- the driver ---------------------------------------------------------- */

static void meet_and_check(fz *f) {
    pthread_barrier_wait(&f->sh->meet);
    if (f->id == 0 && !atomic_load(&f->sh->fail)) {
        int r = dsmpool_check(f->p);
        atomic_fetch_add(&f->sh->checks, 1);
        if (r) fz_fail(f, "check with both processes waiting: %d %s", r, dsmpool_last_error());
    }
    pthread_barrier_wait(&f->sh->meet);
}

static int fuzz_process(dsmpool *p, fz_shared *sh, int id, uint64_t calls) {
    static fz f;
    memset(&f, 0, sizeof f);
    f.p = p;
    f.sh = sh;
    f.id = id;
    f.seed = test_seed() * 7919 + (uint64_t)id;
    f.data = p->base + p->geo.data_off;
    f.data_size = p->geo.data_size;
    dsmpool_area *shared_area;
    if (dsmpool_area_attach(p, atomic_load(&sh->shared_area), &shared_area) != 0) return 3;
    f.areas[0].a = shared_area;
    f.areas[0].shared = true;
    f.areas[0].checked = false;
    f.nareas = 1;
    for (uint64_t i = 0; i < calls; i++) {
        if (!atomic_load(&sh->fail)) { /* after a failure: only keep the meetings */
            uint64_t r = rnd(&f, 100);
            if (r < 12) op_seg_create(&f);
            else if (r < 18) op_seg_attach(&f);
            else if (r < 28) op_seg_detach(&f);
            else if (r < 30) op_seg_pin(&f);
            else if (r < 32) op_seg_unpin(&f);
            else if (r < 33) op_area_create(&f);
            else if (r < 34) op_area_end(&f);
            else if (r < 62) op_alloc(&f);
            else if (r < 92) op_free(&f);
            else op_misc(&f);
            atomic_store(&sh->calls[id], i + 1);
        }
        if ((i + 1) % CHECK_EVERY == 0) meet_and_check(&f);
    }
    /* give everything back */
    while (f.nptrs) op_free(&f);
    while (f.nsegs) op_seg_detach(&f);
    while (f.npinned) op_seg_unpin(&f);
    for (int ai = f.nareas - 1; ai >= 0; ai--) dsmpool_area_detach(f.areas[ai].a);
    return atomic_load(&sh->fail) ? 4 : 0;
}

/* The fuzz's wild pointers for unchecked areas are never chunk starts: every
 * one of wild_form's pointers across the spans of the 8-aligned classes (24,
 * 40, 56 B) and of 64 B is refused, and nothing changes. With 8 past a
 * 64-byte line (the form before) the 24 B span's chunk 3 was taken as a free
 * of a chunk never handed out, and dsmpool_check found it on two lists. */
Test(fuzz, wild_pointers_of_unchecked_areas_are_never_chunk_starts) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    const size_t sizes[] = {24, 40, 56, 64};
    dsmpool_ptr live[4];
    for (int i = 0; i < 4; i++) cr_assert_eq(dsmpool_area_alloc(a, sizes[i], 0, &live[i]), 0, "%s", dsmpool_last_error());
    for (int i = 0; i < 4; i++) {
        dsmpool_ptr g = live[i] & ~(dsmpool_ptr)(2 * MIB - 1); /* the span's 2 MiB, every line of it */
        for (dsmpool_ptr v = g; v < g + 2 * MIB; v += 8) {
            dsmpool_ptr w = wild_form(v);
            int r = dsmpool_area_free(a, w);
            cr_assert_eq(r, -EINVAL, "class of %zu B: the wild pointer %#llx (from %#llx) was taken as a free (%d)",
                         sizes[i], (unsigned long long)w, (unsigned long long)v, r);
        }
    }
    test_check_ok(p);
    for (int i = 0; i < 4; i++) cr_expect_eq(dsmpool_area_free(a, live[i]), 0, "%s", dsmpool_last_error());
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

Test(fuzz, whole_api_two_processes, .timeout = 1800) {
    const char *env = getenv("DSMPOOL_FUZZ_CALLS");
    uint64_t total = env && *env ? strtoull(env, NULL, 0) : (uint64_t)(500000 * test_seconds(1.0));
    uint64_t per = (total + NPROC - 1) / NPROC;
    per -= per % CHECK_EVERY; /* both processes meet the same number of times */
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 256 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    size_t bytes = sizeof(fz_shared) + FZ_WORDS(st.data_size) * 8 + st.data_size / FZ_GRAN;
    fz_shared *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(sh, MAP_FAILED);
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->meet, &ba, NPROC);
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0);
    atomic_store(&sh->shared_area, dsmpool_area_handle(a));
    pid_t kids[NPROC];
    for (int i = 0; i < NPROC; i++)
        if ((kids[i] = fork()) == 0) _exit(fuzz_process(p, sh, i, per));
    for (int i = 0; i < NPROC; i++) {
        int st2 = test_wait(kids[i]);
        cr_expect_eq(st2, 0, "fuzz process %d ended with %d", i, st2);
    }
    fprintf(stderr, "[NOTE] fuzz: %llu calls in 2 processes (seed %llu), %llu checks\n",
            (unsigned long long)(atomic_load(&sh->calls[0]) + atomic_load(&sh->calls[1])),
            (unsigned long long)test_seed(), (unsigned long long)atomic_load(&sh->checks));
    cr_expect_eq(atomic_load(&sh->fail), 0, "process %d: %s (replay with DSMPOOL_TEST_SEED=%llu)",
                 atomic_load(&sh->fail) - 1, sh->why, (unsigned long long)test_seed());
    cr_assert_eq(dsmpool_recover(p), 0);
    test_check_ok(p);
    dsmpool_area_destroy(a);
    cr_expect_eq(test_pool_free(p), free0, "the fuzz leaked %zu bytes", free0 - test_pool_free(p));
    dsmpool_detach(p);
}
