/*
 * test_area_users.c -- any number of users on one area (issue 11, item 5):
 * beyond the 256 cache records, threads and processes go on through the
 * shared path (area_shared.c [shared path]) and never fail for that reason.
 *
 *   model       threads forced onto the shared path next to cached ones:
 *               random sizes, patterns written and verified, check() after
 *   threads     1024 threads hold allocations in one area at once
 *   procs       2048 processes hold allocations in one area at once (512
 *               under the sanitizers)
 *   destroy     a destroyer waits for a shared-path operation in flight
 *   death       a process killed inside a shared-path free: recovery and
 *               the lost sweep give the chunk back
 *   damage      the top of a span's stack is not free (a scribble, or a
 *               generation ABA): never handed out; the stack is dropped
 *               and the sweep returns what it held
 *
 * Children never use Criterion's asserts; they report through exit codes.
 */
#include <criterion/criterion.h>
#include <dsmpool.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testhooks.h"
#include "testutil.h"

_Atomic uint64_t *dp_area_test_word(dsmpool_area *a, const char *what, unsigned cls, dsmpool_ptr p);


static void fill(unsigned char *m, size_t n, uint64_t key) {
    for (size_t i = 0; i + 1 < n; i += 61) m[i] = (unsigned char)(key + i);
    m[n - 1] = (unsigned char)(key * 7);
}

static bool same(const unsigned char *m, size_t n, uint64_t key) {
    for (size_t i = 0; i + 1 < n; i += 61)
        if (m[i] != (unsigned char)(key + i)) return false;
    return m[n - 1] == (unsigned char)(key * 7);
}

/* ---- model: shared and cached threads side by side ------------------------ */

typedef struct worker {
    dsmpool_area *a;
    bool shared;
    uint64_t seed;
    int err;
    char why[200];
} worker;

static void *model_worker(void *arg) {
    worker *w = arg;
    dp_area_test_force_shared(w->shared);
    enum { LIVE = 96 };
    dsmpool_ptr ptr[LIVE] = {0};
    size_t len[LIVE] = {0};
    uint64_t s = w->seed;
    for (int it = 0; it < 6000 && !w->err; it++) {
        int k = (int)(test_rand(&s) % LIVE);
        if (ptr[k]) {
            unsigned char *m = dsmpool_area_addr(w->a, ptr[k]);
            if (!m || !same(m, len[k], ptr[k])) {
                snprintf(w->why, sizeof w->why, "pattern of %016llx (%zu B) damaged",
                         (unsigned long long)ptr[k], len[k]);
                w->err = 1;
                break;
            }
            if (dsmpool_area_free(w->a, ptr[k]) != 0) {
                snprintf(w->why, sizeof w->why, "free: %s", dsmpool_last_error());
                w->err = 2;
                break;
            }
            ptr[k] = 0;
            continue;
        }
        uint64_t r = test_rand(&s) % 100;
        size_t n = r < 60 ? 1 + test_rand(&s) % 512 : r < 95 ? 512 + test_rand(&s) % (40 * KIB)
                                                          : 1 * MIB + test_rand(&s) % (2 * MIB);
        if (dsmpool_area_alloc(w->a, n, 0, &ptr[k]) != 0) {
            snprintf(w->why, sizeof w->why, "alloc %zu: %s", n, dsmpool_last_error());
            w->err = 3;
            break;
        }
        if (dsmpool_area_usable_size(w->a, ptr[k]) < n) {
            snprintf(w->why, sizeof w->why, "usable size of %zu B below what was asked", n);
            w->err = 4;
            break;
        }
        len[k] = n;
        fill(dsmpool_area_addr(w->a, ptr[k]), n, ptr[k]);
    }
    for (int k = 0; k < LIVE; k++)
        if (ptr[k] && dsmpool_area_free(w->a, ptr[k]) != 0 && !w->err) w->err = 5;
    dsmpool_area_flush(w->a);
    return NULL;
}

Test(area_users, shared_and_cached_threads_model) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 256 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, 0);
    enum { N = 6 };
    pthread_t t[N];
    worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (worker){a, i % 3 != 0, test_seed() + (uint64_t)i * 7919, 0, ""};
        cr_assert_eq(pthread_create(&t[i], NULL, model_worker, &w[i]), 0);
    }
    for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) cr_expect_eq(w[i].err, 0, "worker %d (%s): %s", i, w[i].shared ? "shared" : "cached", w[i].why);
    test_check_ok(p);
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.bytes_in_use, 0, "everything was freed");
    cr_expect_eq(st.held, st.bytes_cached, "held = in use + cached");
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    cr_expect_eq(test_pool_free(p), free0, "the destroy gave everything back");
    test_check_ok(p);
    dsmpool_detach(p);
}

/* ---- 1024 threads at once ---------------------------------------------------- */

enum { NT = 1024 };
typedef struct many {
    dsmpool_area *a;
    pthread_barrier_t *bar;
    int id, err;
} many;

static void *many_worker(void *arg) {
    many *m = arg;
    /* the large one: every 16th thread; sizes whose spans (64-256 KiB) keep
     * 256 cached threads well inside the pool, so that no record page and
     * no span has to wait for memory: this test is about users, not
     * exhaustion */
    static const size_t sz[4] = {48, 700, 4000, 1536 * KIB};
    dsmpool_ptr v[4];
    int nv = m->id % 16 ? 3 : 4;
    for (int i = 0; i < nv; i++) {
        if (dsmpool_area_alloc(m->a, sz[i], 0, &v[i]) != 0) {
            m->err = 10 + i;
            pthread_barrier_wait(m->bar);
            pthread_barrier_wait(m->bar);
            return NULL;
        }
        fill(dsmpool_area_addr(m->a, v[i]), sz[i], (uint64_t)m->id * 4 + (uint64_t)i);
    }
    pthread_barrier_wait(m->bar); /* every thread holds its allocations now */
    pthread_barrier_wait(m->bar); /* the main thread has looked */
    for (int i = 0; i < nv; i++) {
        if (!same(dsmpool_area_addr(m->a, v[i]), sz[i], (uint64_t)m->id * 4 + (uint64_t)i)) m->err = 20 + i;
        if (dsmpool_area_free(m->a, v[i]) != 0) m->err = 30 + i;
    }
    return NULL;
}

Test(area_users, threads_1024_on_one_area, .timeout = 300) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 512 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, 0);
    static pthread_t t[NT];
    static many m[NT];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NT + 1);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 256 * KIB);
    for (int i = 0; i < NT; i++) {
        m[i] = (many){a, &bar, i, 0};
        cr_assert_eq(pthread_create(&t[i], &at, many_worker, &m[i]), 0, "thread %d", i);
    }
    pthread_barrier_wait(&bar);
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.caches, 256, "every cache record is held while %d threads hold memory", NT);
    cr_expect_eq(st.large_blocks, NT / 16, "every 16th thread holds one large block");
    cr_expect_geq(st.bytes_requested, NT * (48 + 700 + 4000) + NT / 16 * 1536 * KIB, "%zu bytes",
                  (size_t)st.bytes_requested);
    pthread_barrier_wait(&bar);
    for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
    int bad = 0;
    for (int i = 0; i < NT; i++)
        if (m[i].err && bad++ < 5) cr_expect_eq(m[i].err, 0, "thread %d: error %d", i, m[i].err);
    cr_expect_eq(bad, 0, "%d of %d threads failed", bad, NT);
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    cr_expect_eq(test_pool_free(p), free0);
    pthread_barrier_destroy(&bar);
    pthread_attr_destroy(&at);
    dsmpool_detach(p);
}

/* ---- 2048 processes at once -------------------------------------------------- */

/* 2048 in the plain build; the sanitizer builds (test scale below 1) run
 * 512, still twice the cache records, since a TSan fork costs ~70 ms. */
Test(area_users, processes_2048_on_one_area, .timeout = 600) {
    const int NP = test_seconds(1.0) < 1.0 ? 512 : 2048;
    dsmpool *p = test_pool_procs(DSMPOOL_BACKING_ANON, NULL, 256 * MIB, (unsigned)NP + 64);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, 0);
    _Atomic int *ready = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(ready, MAP_FAILED);
    int go[2]; /* the children wait for EOF: the parent closes the write end when all hold memory */
    cr_assert_eq(pipe(go), 0);
    static pid_t pid[2048];
    for (int i = 0; i < NP; i++) {
        pid[i] = fork();
        cr_assert_geq(pid[i], 0, "fork %d", i);
        if (pid[i] == 0) {
            close(go[1]);
            static const size_t sz[3] = {40, 900, 4000}; /* small spans: the pool never runs short */
            dsmpool_ptr v[3];
            int err = 0;
            for (int k = 0; k < 3 && !err; k++) {
                if (dsmpool_area_alloc(a, sz[k], 0, &v[k]) != 0) {
                    err = 10 + k;
                    fprintf(stderr, "process %d: alloc %zu: %s\n", i, sz[k], dsmpool_last_error());
                }
                else fill(dsmpool_area_addr(a, v[k]), sz[k], (uint64_t)i * 3 + (uint64_t)k);
            }
            atomic_fetch_add(ready, 1);
            char ch;
            while (read(go[0], &ch, 1) < 0 && errno == EINTR) /* until every process holds memory */
                ;
            for (int k = 0; k < 3 && !err; k++) {
                if (!same(dsmpool_area_addr(a, v[k]), sz[k], (uint64_t)i * 3 + (uint64_t)k)) err = 20 + k;
                else if (dsmpool_area_free(a, v[k]) != 0) err = 30 + k;
            }
            dsmpool_detach(p);
            _exit(err);
        }
    }
    uint64_t t0 = test_now_ns();
    while (atomic_load(ready) < NP && test_now_ns() - t0 < 300ull * 1000000000ull) usleep(10000);
    int got = atomic_load(ready);
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    close(go[1]); /* let them go */
    close(go[0]);
    cr_expect_eq(got, NP, "only %d of %d processes got as far as holding memory", got, NP);
    cr_expect_eq(st.caches, 256, "every cache record is held while %d processes hold memory", NP);
    int bad = 0;
    for (int i = 0; i < NP; i++) {
        int rc = test_wait(pid[i]);
        if (rc && bad++ < 5) cr_expect_eq(rc, 0, "process %d: exit %d", i, rc);
    }
    cr_expect_eq(bad, 0, "%d of %d processes failed", bad, NP);
    test_recover_all(p);
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.bytes_in_use, 0, "everything was freed");
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    cr_expect_eq(test_pool_free(p), free0);
    munmap(ready, 4096);
    dsmpool_detach(p);
}

/* ---- destroy waits for a shared-path operation ------------------------------ */

static _Atomic int stop_state; /* 1: the shared op is parked at the point; 2: let it go */
static _Atomic int op_done;

/* The operation parks at "area.shared.checked" until the destroyer has
 * marked the area ("area.destroy.marked", on the destroyer's thread), then
 * stays inside 20 ms more and says it is done -- still inside its bracket,
 * so a destroyer that waits for it sees op_done (a destroy that does not
 * wait returns in those 20 ms). */
static void park_at(const char *point) {
    if (!strcmp(point, "area.destroy.marked")) {
        atomic_store(&stop_state, 2);
        return;
    }
    if (strcmp(point, "area.shared.checked") || atomic_load(&stop_state) != 0) return;
    atomic_store(&stop_state, 1);
    uint64_t t0 = test_now_ns();
    while (atomic_load(&stop_state) != 2 && test_now_ns() - t0 < 5000000000ull) usleep(100);
    usleep(20000); /* still inside the operation (the destroyer's bound is 60 s here) */
    atomic_store(&op_done, 1);
}

typedef struct parked {
    dsmpool_area *a;
    dsmpool_ptr got;
    int r;
} parked;

static void *parked_alloc(void *arg) {
    parked *pk = arg;
    dp_area_test_force_shared(true);
    pk->r = dsmpool_area_alloc(pk->a, 32 * KIB, 0, &pk->got);
    return NULL;
}

/* Before the shared path waited: the destroyer released the spans while the
 * operation was still inside; it returned before the operation ended. */
Test(area_users, destroy_waits_for_a_shared_operation) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, 0);
    dsmpool_ptr keep;
    dp_area_test_force_shared(true);
    cr_assert_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &keep), 0, "%s", dsmpool_last_error()); /* a span */
    dp_area_test_force_shared(false);
    dsmpool_area *a2;
    cr_assert_eq(dsmpool_area_attach(p, dsmpool_area_handle(a), &a2), 0); /* keeps the control block */
    parked pk = {a, 0, -1};
    pthread_t t;
    atomic_store(&stop_state, 0);
    atomic_store(&op_done, 0);
    dp_inject_fn = park_at;
    dp_area_test_quiesce_ns(60000000000ull); /* (50 ms: a loaded machine may not run the operation in time) */
    cr_assert_eq(pthread_create(&t, NULL, parked_alloc, &pk), 0);
    while (atomic_load(&stop_state) != 1) usleep(100);
    cr_assert_eq(dsmpool_area_destroy(a), 0); /* (its mark lets the operation go: park_at) */
    dp_area_test_quiesce_ns(0);
    cr_expect_eq(atomic_load(&op_done), 1, "the destroy returned while a shared operation ran");
    pthread_join(t, NULL);
    dp_inject_fn = NULL;
    cr_expect_eq(pk.r, 0, "the operation saw LIVE and finished: %s", dsmpool_last_error());
    dsmpool_area_stats st;
    cr_expect_eq(dsmpool_area_get_stats(a2, &st), -ESTALE);
    cr_assert_eq(dsmpool_area_detach(a2), 0);
    cr_expect_eq(test_pool_free(p), free0, "everything went back");
    test_check_ok(p);
    dsmpool_detach(p);
}

/* ---- a death inside a shared-path free --------------------------------------- */

static void die_at_linked(const char *point) {
    if (!strcmp(point, "area.free.linked")) raise(SIGKILL);
}

/* Before recovery counted a death inside a bracket as a possible loss, the
 * chunk (tagged, on no stack) stayed lost and its span was never whole. */
Test(area_users, death_inside_a_shared_free_is_swept) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, 0);
    pid_t c = fork();
    if (c == 0) {
        dp_area_test_force_shared(true);
        dsmpool_ptr v[2];
        for (int i = 0; i < 2; i++)
            if (dsmpool_area_alloc(a, 32 * KIB, 0, &v[i]) != 0) _exit(3);
        if (dsmpool_area_free(a, v[0]) != 0) _exit(4);
        dp_inject_fn = die_at_linked;
        dsmpool_area_free(a, v[1]); /* dies with the tag written, before the push */
        _exit(5);
    }
    cr_assert_eq(test_wait(c), 128 + SIGKILL, "the child did not die at area.free.linked");
    test_recover_all(p);
    dsmpool_stats ps;
    cr_assert_eq(dsmpool_get_stats(p, &ps), 0);
    cr_expect_eq(ps.lost_chunks_reclaimed, 1, "the sweep gave the chunk back");
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.bytes_in_use, 0, "the span came back whole (kept for the shared path)");
    cr_expect_eq(st.held, st.bytes_cached);
    test_check_ok(p);
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    cr_expect_eq(test_pool_free(p), free0);
    dsmpool_detach(p);
}

/* ---- the top of a stack is not free ---------------------------------------- */

Test(area_users, stack_top_not_free_is_never_handed_out) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    dp_area_test_force_shared(true);
    dsmpool_ptr x, y, z, keep;
    cr_assert_eq(dsmpool_area_alloc(a, 1000, 0, &keep), 0); /* the span never comes back whole */
    cr_assert_eq(dsmpool_area_alloc(a, 1000, 0, &x), 0);
    cr_assert_eq(dsmpool_area_alloc(a, 1000, 0, &y), 0);
    cr_assert_eq(dsmpool_area_free(a, y), 0);
    cr_assert_eq(dsmpool_area_free(a, x), 0); /* x is the top of its span's stack */
    memset((char *)dsmpool_area_addr(a, x) + 8, 0, 8); /* a use after free wipes its tag */
    cr_assert_eq(dsmpool_area_alloc(a, 1000, 0, &z), 0);
    cr_expect_neq(z, x, "a chunk that is not free was handed out");
    cr_expect_neq(z, y, "a chunk below a damaged top was handed out");
    cr_assert_eq(dsmpool_area_free(a, z), 0);
    cr_assert_eq(dsmpool_area_free(a, keep), 0);
    test_recover_all(p); /* the lost sweep: y (tagged, on no stack) goes back; x is leaked */
    dsmpool_stats ps;
    cr_assert_eq(dsmpool_get_stats(p, &ps), 0);
    cr_expect_geq(ps.lost_chunks_reclaimed, 1, "y came back");
    test_check_ok(p);
    dp_area_test_force_shared(false);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* ---- a taker stopped across 2^24 operations on its span -------------------- */

/* Found in review: the first shared path popped with a CAS on (generation,
 * count, top) after reading the top's link; a popper stopped across exactly
 * 2^24 operations on its span installed a stale link, and a chunk a cached
 * thread still held was handed out twice (dsmpool_check() saw nothing).
 * Now a taker steals the whole stack and reads links only of chunks it
 * holds: the same schedule hands out every chunk once. */
static _Thread_local bool aba_is_a;
static _Atomic int aba_state; /* 1: A parked after reading the word; 2: go */
static void aba_park(const char *point) {
    if (!aba_is_a || strcmp(point, "area.take.read") || atomic_load(&aba_state) != 0) return;
    atomic_store(&aba_state, 1);
    while (atomic_load(&aba_state) != 2) usleep(100);
}
typedef struct aba_t {
    dsmpool_area *a;
    dsmpool_ptr got[3];
    int r;
    _Atomic int phase;
} aba_t;
static void *aba_a(void *arg) { /* a shared-path taker */
    aba_t *t = arg;
    dp_area_test_force_shared(true);
    aba_is_a = true;
    t->r = dsmpool_area_alloc(t->a, 256 * KIB, 0, &t->got[0]);
    return NULL;
}
static void *aba_b(void *arg) { /* a cached thread */
    aba_t *t = arg;
    dp_area_test_force_shared(false);
    t->r = dsmpool_area_alloc(t->a, 256 * KIB, 0, &t->got[0]); /* steals the stack */
    atomic_store(&t->phase, 1);
    while (atomic_load(&t->phase) != 2) usleep(100);
    dsmpool_area_alloc(t->a, 256 * KIB, 0, &t->got[1]);
    dsmpool_area_alloc(t->a, 256 * KIB, 0, &t->got[2]);
    atomic_store(&t->phase, 3);
    while (atomic_load(&t->phase) != 4) usleep(100);
    for (int i = 0; i < 3; i++) dsmpool_area_free(t->a, t->got[i]);
    return NULL;
}

Test(area_users, taker_stopped_across_a_generation_wrap, .timeout = 600) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    atomic_store(&aba_state, 0);
    dp_area_test_force_shared(true);
    dsmpool_ptr c[8], x;
    for (int i = 0; i < 6; i++) cr_assert_eq(dsmpool_area_alloc(a, 256 * KIB, 0, &c[i]), 0);
    for (int i = 1; i < 6; i++) cr_assert_eq(c[i], c[0] + (dsmpool_ptr)i * 256 * KIB, "one span, in order");
    c[6] = c[0] + 6 * 256 * KIB;
    c[7] = c[0] + 7 * 256 * KIB;
    /* the stack: c6 -> c7 (count 2); A reads the word and stops */
    aba_t ta = {a, {0}, -1, 0}, tb = {a, {0}, -1, 0};
    pthread_t pa, pb;
    dp_inject_fn = aba_park;
    cr_assert_eq(pthread_create(&pa, NULL, aba_a, &ta), 0);
    while (atomic_load(&aba_state) != 1) usleep(100);
    cr_assert_eq(dsmpool_area_alloc(a, 256 * KIB, 0, &x), 0);
    cr_assert_eq(x, c[6]);
    cr_assert_eq(dsmpool_area_alloc(a, 256 * KIB, 0, &x), 0);
    cr_assert_eq(x, c[7]);
    cr_assert_eq(dsmpool_area_free(a, c[1]), 0);
    cr_assert_eq(dsmpool_area_free(a, c[2]), 0);
    cr_assert_eq(dsmpool_area_free(a, c[7]), 0); /* the stack: c7 -> c2 -> c1 */
    cr_assert_eq(pthread_create(&pb, NULL, aba_b, &tb), 0);
    while (atomic_load(&tb.phase) != 1) usleep(100);
    cr_assert_eq(tb.got[0], c[1], "B stole the stack and took c1; its list: c2 -> c7");
    cr_assert_eq(dsmpool_area_free(a, c[3]), 0);
    cr_assert_eq(dsmpool_area_free(a, c[6]), 0); /* the stack: c6 -> c3 (count 2) */
    /* Until the span's word is again what A read -- generation (24 bits),
     * count, top. Each step below is one CAS on it: so far 9 (a take is a
     * steal, plus a put-back if chunks are left; a free is a push); a pair
     * (take c6, free it) is 3; a double (take c6 and c3, free c3, c6) is 5;
     * 9 + 3 k + 2 x 5 = 2^24. */
    for (uint64_t k = 0; k < ((1ull << 24) - 19) / 3; k++) {
        cr_assert_eq(dsmpool_area_alloc(a, 256 * KIB, 0, &x), 0);
        if (x != c[6]) cr_assert(false, "took %016llx, not c6", (unsigned long long)x);
        cr_assert_eq(dsmpool_area_free(a, x), 0);
    }
    for (int j = 0; j < 2; j++) {
        dsmpool_ptr u, v;
        cr_assert_eq(dsmpool_area_alloc(a, 256 * KIB, 0, &u), 0);
        cr_assert_eq(dsmpool_area_alloc(a, 256 * KIB, 0, &v), 0);
        cr_assert(u == c[6] && v == c[3]);
        cr_assert_eq(dsmpool_area_free(a, v), 0);
        cr_assert_eq(dsmpool_area_free(a, u), 0);
    }
    atomic_store(&aba_state, 2);
    pthread_join(pa, NULL);
    cr_expect_eq(ta.r, 0, "%s", dsmpool_last_error());
    cr_expect_eq(ta.got[0], c[6], "A's steal took the stack as it is now: c6 -> c3");
    dsmpool_ptr y = 0;
    cr_assert_eq(dsmpool_area_alloc(a, 256 * KIB, 0, &y), 0);
    atomic_store(&tb.phase, 2);
    while (atomic_load(&tb.phase) != 3) usleep(100);
    dsmpool_ptr all[] = {c[0], c[4], c[5], ta.got[0], y, tb.got[0], tb.got[1], tb.got[2]};
    for (int i = 0; i < 8; i++)
        for (int j = i + 1; j < 8; j++)
            cr_expect_neq(all[i], all[j], "%016llx handed out twice (%d, %d)", (unsigned long long)all[i], i, j);
    test_check_ok(p);
    atomic_store(&tb.phase, 4);
    pthread_join(pb, NULL);
    dp_inject_fn = NULL;
    dp_area_test_force_shared(false);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* ---- a shared user that allocates and frees one chunk at a time ----------- */

static _Atomic int acquired;
static void count_acquire(const char *point) {
    if (!strcmp(point, "area.acquire.stored")) atomic_fetch_add(&acquired, 1);
}

/* Found in review: each free that made the span whole retired it, and the
 * next allocation took a fresh span and linked all its chunks (54 us a
 * pair for 64 B chunks). One whole span per class is kept now. */
Test(area_users, one_chunk_at_a_time_keeps_its_span) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, 0);
    dp_area_test_force_shared(true);
    atomic_store(&acquired, 0);
    dp_inject_fn = count_acquire;
    dsmpool_ptr x;
    for (int i = 0; i < 1000; i++) {
        cr_assert_eq(dsmpool_area_alloc(a, 64, 0, &x), 0);
        cr_assert_eq(dsmpool_area_free(a, x), 0);
    }
    dp_inject_fn = NULL;
    cr_expect_eq(atomic_load(&acquired), 1, "%d fresh spans for 1000 alloc/free pairs", atomic_load(&acquired));
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.bytes_in_use, 0);
    cr_expect_eq(st.held, st.bytes_cached, "the kept span is all cached");
    test_check_ok(p);
    dp_area_test_force_shared(false);
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    cr_expect_eq(test_pool_free(p), free0, "the kept span went back with the area");
    dsmpool_detach(p);
}

/* ---- the shared path against stopped takers, class reuse and idle areas ----------- */

static _Thread_local bool parker;
static _Atomic int park_state; /* 1: parked; 2: go */
static const char *park_point;
static void park_hook(const char *point) {
    if (!strcmp(point, "area.acquire.stored")) atomic_fetch_add(&acquired, 1);
    if (parker && park_point && !strcmp(point, park_point) && atomic_load(&park_state) == 0) {
        atomic_store(&park_state, 1);
        while (atomic_load(&park_state) != 2) usleep(100);
    }
}
typedef struct targ {
    dsmpool_area *a;
    size_t sz;
    dsmpool_ptr got;
    int r;
} targ;
static void *parked_taker(void *arg) {
    targ *t = arg;
    dp_area_test_force_shared(true);
    parker = true;
    t->r = dsmpool_area_alloc(t->a, t->sz, 0, &t->got);
    return NULL;
}

/* A taker read a span's class, then stopped; the span went back whole, its
 * entry came back as a span of another class with the same word (the
 * generation carries over), and the taker's steal succeeded: it handed out
 * a 256 KiB chunk over a live 128 KiB one. The class is read again after
 * the steal now. */
Test(area_users, class_changes_under_a_stopped_taker, .timeout = 600) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    dp_area_test_force_shared(true);
    dsmpool_ptr k[8], s[8], t[16], x;
    for (int i = 0; i < 8; i++) cr_assert_eq(dsmpool_area_alloc(a, 256 * KIB, 0, &k[i]), 0); /* span K */
    for (int i = 0; i < 8; i++) cr_assert_eq(dsmpool_area_alloc(a, 256 * KIB, 0, &s[i]), 0); /* span S */
    cr_assert_eq(dsmpool_area_free(a, s[0]), 0); /* S's stack: {0} */
    _Atomic uint64_t *word = dp_area_test_word(a, "span", 0, s[0]);
    cr_assert_not_null(word);
    uint64_t W = atomic_load(word);
    atomic_store(&park_state, 0);
    park_point = "area.take.read";
    dp_inject_fn = park_hook;
    targ ta = {a, 256 * KIB, 0, -1};
    pthread_t pa;
    cr_assert_eq(pthread_create(&pa, NULL, parked_taker, &ta), 0);
    while (atomic_load(&park_state) != 1) usleep(100);
    cr_assert_eq(atomic_load(word), W, "A read S's word");
    for (int i = 0; i < 8; i++) cr_assert_eq(dsmpool_area_free(a, k[i]), 0); /* K whole: kept */
    for (int i = 1; i < 8; i++) cr_assert_eq(dsmpool_area_free(a, s[i]), 0); /* S whole: retires */
    for (int i = 0; i < 16; i++) cr_assert_eq(dsmpool_area_alloc(a, 128 * KIB, 0, &t[i]), 0);
    cr_assert_eq(dp_area_test_word(a, "span", 0, t[0]), word, "S' (256 KiB) reuses S's entry");
    cr_assert_eq(dsmpool_area_free(a, t[0]), 0); /* S' stack: {0} */
    uint64_t now = atomic_load(word);
    cr_assert_eq(now & ((1ull << 40) - 1), W & ((1ull << 40) - 1), "the same count, top and state");
    uint32_t diff = (uint32_t)((W >> 40) - (now >> 40)) & 0xffffff;
    if (diff < 3) diff += 1u << 24;
    if (diff & 1) { /* 3 CASes: free t1 (push), take t1 (steal, put t0 back) */
        cr_assert_eq(dsmpool_area_free(a, t[1]), 0);
        cr_assert_eq(dsmpool_area_alloc(a, 128 * KIB, 0, &x), 0);
        cr_assert_eq(x, t[1]);
        diff -= 3;
    }
    for (uint32_t i = 0; i < diff / 2; i++) { /* 2 CASes: take t0 (steal), free it (push) */
        cr_assert_eq(dsmpool_area_alloc(a, 128 * KIB, 0, &x), 0);
        cr_assert_eq(dsmpool_area_free(a, x), 0);
    }
    cr_assert_eq(atomic_load(word), W, "the word is what A read");
    atomic_store(&park_state, 2);
    pthread_join(pa, NULL);
    dp_inject_fn = NULL;
    park_point = NULL;
    cr_assert_eq(ta.r, 0, "%s", dsmpool_last_error());
    for (int i = 1; i < 16; i++)
        cr_expect(!(ta.got <= t[i] && t[i] < ta.got + 256 * KIB),
                  "A's 512 KiB chunk %016llx overlaps the live 256 KiB chunk %016llx", (unsigned long long)ta.got,
                  (unsigned long long)t[i]);
    cr_expect_eq(dsmpool_area_usable_size(a, ta.got), 256 * KIB);
    test_check_ok(p);
    dp_area_test_force_shared(false);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

static void *one_of_each(void *arg) {
    dsmpool_area *a = arg;
    dp_area_test_force_shared(true);
    static const size_t sizes[] = {64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072};
    for (int i = 0; i < 12; i++) {
        dsmpool_ptr x;
        if (dsmpool_area_alloc(a, sizes[i], 0, &x) || dsmpool_area_free(a, x)) return (void *)1;
    }
    return NULL;
}

/* With a kept span per class, a shared user that touched 12 classes and left
 * kept 24 MiB that another area's shortage could not reach. One span per
 * area is kept now: an idle area holds at most one. */
Test(area_users, kept_spans_are_bounded) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    pthread_t t;
    void *rv;
    cr_assert_eq(pthread_create(&t, NULL, one_of_each, a), 0);
    pthread_join(t, &rv);
    cr_assert_null(rv, "%s", dsmpool_last_error());
    dsmpool_area_stats st;
    cr_assert_eq(dsmpool_area_get_stats(a, &st), 0);
    cr_expect_eq(st.bytes_in_use, 0);
    cr_expect_leq(st.held, 2 * MIB, "an idle area keeps at most one span (%zu bytes held)", (size_t)st.held);
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

static void die_at_linked2(const char *point) {
    if (!strcmp(point, "area.free.linked")) raise(SIGKILL);
}

/* The lost sweep retired the kept span as if a death had left it whole
 * (and counted it as reclaimed), leaving the keep slot naming a freed
 * entry: every later whole span retired again. */
Test(area_users, the_sweep_leaves_the_kept_span) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    dp_area_test_force_shared(true);
    dsmpool_ptr x, big;
    cr_assert_eq(dsmpool_area_alloc(a, 64, 0, &x), 0);
    cr_assert_eq(dsmpool_area_free(a, x), 0); /* kept */
    pid_t c = fork();
    if (c == 0) {
        dsmpool_ptr v[2];
        for (int i = 0; i < 2; i++)
            if (dsmpool_area_alloc(a, 32 * KIB, 0, &v[i]) != 0) _exit(3);
        if (dsmpool_area_free(a, v[0]) != 0) _exit(4);
        dp_inject_fn = die_at_linked2;
        dsmpool_area_free(a, v[1]);
        _exit(5);
    }
    cr_assert_eq(test_wait(c), 128 + SIGKILL);
    test_recover_all(p);
    dsmpool_stats ps;
    cr_assert_eq(dsmpool_get_stats(p, &ps), 0);
    cr_expect_eq(ps.lost_chunks_reclaimed, 1, "one chunk was lost");
    cr_assert_eq(dsmpool_area_alloc(a, 2 * MIB, 0, &big), 0); /* may reuse a freed entry */
    atomic_store(&acquired, 0);
    dp_inject_fn = count_acquire;
    for (int i = 0; i < 1000; i++) {
        cr_assert_eq(dsmpool_area_alloc(a, 64, 0, &x), 0);
        cr_assert_eq(dsmpool_area_free(a, x), 0);
    }
    dp_inject_fn = NULL;
    cr_expect_leq(atomic_load(&acquired), 1, "%d fresh spans for 1000 pairs after the sweep", atomic_load(&acquired));
    test_check_ok(p);
    dp_area_test_force_shared(false);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}
