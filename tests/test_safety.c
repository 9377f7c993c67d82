/*
 * test_safety.c -- no process can be handed, free or overwrite another
 * process's live memory (issue 8). Each test forces one interleaving that
 * once gave memory to two owners, with the library's test-only injection
 * points (pool/dp_inject.h): a process stops itself (SIGSTOP) or dies
 * (SIGKILL) at a named step boundary, and the test moves others through the
 * window. Each fails without the fix it guards; see the comments.
 *
 * Children never use Criterion's asserts; they report through exit codes
 * and a shared page.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <dsmpool.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dp_internal.h"
#include "testhooks.h"
#include "testutil.h"


/* ---- injection: stop or die at a named point ------------------------------ */

enum { AT_STOP = 1, AT_KILL = 2 };
static const char *inj_point;
static int inj_action;

static void inj_handler(const char *point) {
    if (!inj_point || strcmp(point, inj_point) != 0) return;
    inj_point = NULL; /* once */
    raise(inj_action == AT_KILL ? SIGKILL : SIGSTOP);
}

static void inject_at(const char *point, int action) {
    inj_point = point;
    inj_action = action;
    dp_inject_fn = inj_handler;
}

static void wait_stopped(pid_t pid) {
    int st;
    cr_assert_eq(waitpid(pid, &st, WUNTRACED), pid);
    cr_assert(WIFSTOPPED(st), "child %d did not stop at its injection point (status %#x)", (int)pid, st);
}

/* A page shared with the children. */
typedef struct shared {
    _Atomic int ready[8], go, done[8];
    _Atomic int rc[8];
    _Atomic uint64_t val[64];
} shared;


static void spin_until(_Atomic int *w, int v) {
    for (uint64_t end = test_now_ns() + 30000000000ull; atomic_load(w) != v && test_now_ns() < end;)
        usleep(200);
}


/* Fill what is left of the pool with 2 MiB (then 4 KiB) segments, each
 * written with a pattern; returns how many. */
static int fill_pool(dsmpool *p, dsmpool_seg **segs, int max) {
    int n = 0;
    size_t sizes[] = {2 * MIB, 64 * KIB, 4 * KIB};
    for (int k = 0; k < 3; k++)
        while (n < max && dsmpool_seg_create(p, sizes[k], DSMPOOL_SEG_NO_FALLBACK, &segs[n]) == 0) {
            memset(dsmpool_seg_address(segs[n]), 0x5a, dsmpool_seg_size(segs[n]));
            n++;
        }
    return n;
}

/* The parent's own attachment records grow record blocks that stay until it
 * detaches: grow them now, so that free-byte comparisons see only leaks. */
static void warm_records(dsmpool *p, int n) {
    static dsmpool_seg *s[4096];
    int k = 0;
    while (k < n && k < 4096 && dsmpool_seg_create(p, 4096, DSMPOOL_SEG_NO_FALLBACK, &s[k]) == 0) k++;
    while (k) dsmpool_seg_detach(s[--k]);
}

static bool segs_intact(dsmpool_seg **segs, int n) { /* every word */
    for (int i = 0; i < n; i++) {
        uint64_t *m = dsmpool_seg_address(segs[i]);
        for (size_t k = 0; k < dsmpool_seg_size(segs[i]) / 8; k++)
            if (m[k] != 0x5a5a5a5a5a5a5a5aull) return false;
    }
    return true;
}

static bool pattern_ok(unsigned char *m, size_t n, unsigned char v) {
    for (size_t k = 0; k < n; k += 256)
        if (m[k] != v) return false;
    return true;
}

/* ---- 1. area destroy against operations in flight ------------------------ */

/* A child inside alloc at `point` when the area is destroyed; after it is
 * let go it writes its pattern into what it got and keeps it until told. */
static pid_t inflight_child(dsmpool *p, dsmpool_handle h, shared *sh, int id, const char *point) {
    pid_t pid = fork();
    if (pid) return pid;
    dsmpool_area *mine;
    if (dsmpool_area_attach(p, h, &mine) != 0) _exit(3);
    inject_at(point, AT_STOP);
    dsmpool_ptr v = 0;
    int r = dsmpool_area_alloc(mine, 32 * KIB, 0, &v);
    atomic_store(&sh->rc[id], r);
    unsigned char *m = r == 0 ? dsmpool_area_addr(mine, v) : NULL;
    if (m) memset(m, 0xb0 + id, 32 * KIB);
    atomic_store(&sh->done[id], 1);
    spin_until(&sh->go, 1);
    _exit(r == 0 ? (pattern_ok(m, 32 * KIB, 0xb0 + id) ? 0 : 4) : r == -ESTALE ? 0 : 5);
}

/* Defect 1: B stops with a span block stored in its INIT entry, C stops just
 * after it found the area LIVE; the area is destroyed; C, then B, go on.
 * Before the fix the destroyer took B's entry and freed its block, C took the
 * same entry and block, and B's failed publish freed C's live block, which
 * the segments below were then given: C's chunk was overwritten. */
Test(safety, destroy_against_operations_in_flight, .timeout = 120) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 48 * MIB);
    warm_records(p, 4096);
    size_t free0 = test_pool_free(p);
    dsmpool_area *a = test_area(p, 0);
    dsmpool_handle h = dsmpool_area_handle(a);
    shared *sh = test_shared(sizeof(shared));
    pid_t b = inflight_child(p, h, sh, 0, "area.acquire.stored");
    wait_stopped(b);
    pid_t c = inflight_child(p, h, sh, 1, "area.op.checked");
    wait_stopped(c);
    cr_assert_eq(dsmpool_area_destroy(a), 0, "%s", dsmpool_last_error());
    kill(c, SIGCONT);
    spin_until(&sh->done[1], 1);
    kill(b, SIGCONT);
    spin_until(&sh->done[0], 1);
    cr_assert(atomic_load(&sh->done[0]) && atomic_load(&sh->done[1]), "children did not finish");
    static dsmpool_seg *segs[4096];
    int n = fill_pool(p, segs, 4096);
    cr_expect_gt(n, 0);
    atomic_store(&sh->go, 1);
    cr_expect_eq(test_wait(b), 0, "B: its chunk was given to someone else (rc %d)", atomic_load(&sh->rc[0]));
    cr_expect_eq(test_wait(c), 0, "C: its chunk was given to someone else (rc %d)", atomic_load(&sh->rc[1]));
    cr_expect(segs_intact(segs, n), "a segment was written by a process of the destroyed area");
    test_check_ok(p);
    for (int i = 0; i < n; i++) dsmpool_seg_detach(segs[i]);
    cr_assert_eq(dsmpool_recover(p), 0); /* B and C exited attached: their references go */
    cr_expect_eq(test_pool_free(p), free0, "the last reference gave everything back (%zu of %zu free, %zu segments live)", test_pool_free(p), free0, test_live_segments(p));
    test_check_ok(p);
    dsmpool_detach(p);
}

/* Defect 1, the hot path: a child with a warm cache (chunks of spans the
 * destroy gives back at once) is idle when the area is destroyed. Its next
 * alloc, free and flush must fail with -ESTALE without writing a byte. */
Test(safety, destroyed_area_is_not_written_by_idle_caches, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 48 * MIB);
    dsmpool_area *a = test_area(p, 0);
    size_t free1 = test_pool_free(p);
    dsmpool_handle h = dsmpool_area_handle(a);
    shared *sh = test_shared(sizeof(shared));
    pid_t c = fork();
    if (c == 0) {
        dsmpool_area *mine;
        if (dsmpool_area_attach(p, h, &mine) != 0) _exit(3);
        dsmpool_ptr v[200];
        for (int i = 0; i < 200; i++)
            if (dsmpool_area_alloc(mine, i % 4 ? 32 * KIB : 100, 0, &v[i]) != 0) _exit(4);
        for (int i = 0; i < 150; i++) dsmpool_area_free(mine, v[i]);
        atomic_store(&sh->ready[0], 1);
        spin_until(&sh->go, 1);
        dsmpool_ptr x;
        int r1 = dsmpool_area_alloc(mine, 32 * KIB, 0, &x);
        int r2 = dsmpool_area_free(mine, v[190]);
        int r3 = dsmpool_area_flush(mine);
        int r4 = dsmpool_area_alloc(mine, 100, 0, &x);
        _exit(r1 == -ESTALE && r2 == -ESTALE && r3 == -ESTALE && r4 == -ESTALE ? 0 : 5);
    }
    spin_until(&sh->ready[0], 1);
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    /* every span back at once (the child was idle); only the registry
     * pages wait for the last reference */
    cr_expect_leq(free1 - test_pool_free(p), 16 * 4096, "destroy kept %zu bytes", free1 - test_pool_free(p));
    static dsmpool_seg *segs[4096];
    int n = fill_pool(p, segs, 4096);
    atomic_store(&sh->go, 1);
    cr_expect_eq(test_wait(c), 0, "the child's calls did not all say -ESTALE");
    cr_expect(segs_intact(segs, n), "the destroyed area's cache wrote into reused memory");
    for (int i = 0; i < n; i++) dsmpool_seg_detach(segs[i]);
    dsmpool_recover(p);
    test_check_ok(p);
    dsmpool_detach(p);
}

/* ---- 2. liveness that /proc cannot fake ------------------------------------ */

/* In a new mount namespace, hide every process: /proc becomes an empty tmpfs. */
static int hide_proc(void) {
    if (unshare(CLONE_NEWNS) != 0) return -errno;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -errno;
    if (mount("none", "/proc", "tmpfs", 0, NULL) != 0) return -errno;
    return 0;
}

/* A recoverer that cannot see /proc: attaches by name, recovers, reports
 * procs_recovered, and whether segment h can still be attached. */
static int blind_recoverer(const char *name, dsmpool_handle h, shared *sh) {
    pid_t pid = fork();
    if (pid == 0) {
        if (hide_proc() != 0) _exit(77);
        dsmpool *q;
        if (dsmpool_attach(name, &q) != 0) _exit(3);
        if (dsmpool_recover(q) != 0) _exit(4);
        dsmpool_stats st;
        dsmpool_get_stats(q, &st);
        atomic_store(&sh->val[0], st.procs_recovered);
        dsmpool_seg *s;
        int r = dsmpool_seg_attach(q, h, &s);
        atomic_store(&sh->rc[7], r);
        if (r == 0) dsmpool_seg_detach(s);
        _exit(dsmpool_detach(q) == 0 ? 0 : 5);
    }
    return test_wait(pid);
}

/* Defect 2: a worker stops inside an allocator open step (the parent word
 * already says PART); a recoverer that cannot see /proc runs. Before the fix
 * it took the worker for dead: it finished the step under the worker (the
 * worker's last store then built an OPEN node under a FREE parent),
 * destroyed its segments and freed its slot. Then the worker dies for real,
 * and the same blind recoverer must release everything. */
Test(safety, recovery_needs_a_dead_lock_not_a_missing_proc_entry, .timeout = 120) {
    char name[64];
    test_name(name, sizeof name, "blind");
    dsmpool *p = test_pool(DSMPOOL_BACKING_POSIX, name, 48 * MIB);
    size_t free0 = test_pool_free(p);
    shared *sh = test_shared(sizeof(shared));
    for (int phase = 0; phase < 2; phase++) {
        atomic_store(&sh->go, 0);
        pid_t w = fork();
        if (w == 0) {
            dsmpool_seg *s;
            if (dsmpool_seg_create(p, 64 * KIB, 0, &s) != 0) _exit(3);
            memset(dsmpool_seg_address(s), 0x77, 64 * KIB);
            atomic_store(&sh->val[1], dsmpool_seg_handle(s));
            inject_at("palloc.open.linked", AT_STOP);
            dsmpool_seg *small[4000];
            int n = 0;
            while (n < 4000 && dsmpool_seg_create(p, 4096, DSMPOOL_SEG_NO_FALLBACK, &small[n]) == 0) {
                memset(dsmpool_seg_address(small[n]), 0x33, 4096);
                n++;
                if (!inj_point) break; /* stopped and went on */
            }
            spin_until(&sh->go, 1);
            bool ok = pattern_ok(dsmpool_seg_address(s), 64 * KIB, 0x77);
            for (int i = 0; i < n; i++) ok &= pattern_ok(dsmpool_seg_address(small[i]), 4096, 0x33);
            _exit(ok && dsmpool_detach(p) == 0 ? 0 : 4);
        }
        wait_stopped(w);
        dsmpool_handle h = atomic_load(&sh->val[1]);
        if (phase == 0) {
            int rr = blind_recoverer(name, h, sh);
            if (rr == 77) {
                kill(w, SIGKILL);
                test_wait(w);
                cr_skip_test("cannot make a mount namespace (not root?): the blind recoverer needs one");
            }
            cr_assert_eq(rr, 0, "blind recoverer failed (%d)", rr);
            cr_expect_eq(atomic_load(&sh->val[0]), 0, "a live, stopped worker was recovered");
            cr_expect_eq(atomic_load(&sh->rc[7]), 0, "the live worker's segment was destroyed");
            kill(w, SIGCONT);
            atomic_store(&sh->go, 1);
            cr_expect_eq(test_wait(w), 0, "the worker's memory was given to someone else");
            test_check_ok(p);
        } else {
            kill(w, SIGKILL);
            test_wait(w);
            cr_assert_eq(blind_recoverer(name, h, sh), 0);
            cr_expect_eq(atomic_load(&sh->val[0]), 1, "the dead worker was not recovered");
            cr_expect_eq(atomic_load(&sh->rc[7]), -ESTALE, "the dead worker's segment is still there");
        }
    }
    test_check_ok(p);
    cr_expect_eq(test_pool_free(p), free0);
    dsmpool_destroy(p);
}

/* Defect 2, namespaces: a worker in new pid and mount namespaces, with a
 * /proc of its own, stores pid 1 in its slot; the recoverer's /proc/1 is
 * this machine's init, alive with another start time, which the old
 * recoverer read as "pid reused, owner dead". */
Test(safety, worker_in_another_pid_namespace_is_alive, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    size_t free0 = test_pool_free(p);
    shared *sh = test_shared(sizeof(shared));
    pid_t x = fork();
    if (x == 0) {
        if (unshare(CLONE_NEWPID) != 0) _exit(77);
        pid_t g = fork();
        if (g == 0) {
            if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
                mount("proc", "/proc", "proc", 0, NULL) != 0)
                _exit(78);
            dsmpool_seg *s;
            if (dsmpool_seg_create(p, 64 * KIB, 0, &s) != 0) _exit(3);
            atomic_store(&sh->val[1], dsmpool_seg_handle(s));
            atomic_store(&sh->val[2], (uint64_t)getpid());
            atomic_store(&sh->ready[0], 1);
            for (;;) pause();
        }
        atomic_store(&sh->val[3], (uint64_t)g);
        int st = test_wait(g);
        _exit(st == 128 + SIGKILL ? 0 : st == 78 ? 77 : 6);
    }
    spin_until(&sh->ready[0], 1);
    if (!atomic_load(&sh->ready[0])) {
        int st = test_wait(x);
        if (st == 77) cr_skip_test("cannot make a pid namespace (not root?)");
        cr_assert(false, "worker did not start (%d)", st);
    }
    cr_expect_eq(atomic_load(&sh->val[2]), 1, "the worker is pid 1 in its namespace");
    cr_assert_eq(dsmpool_recover(p), 0);
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.procs_recovered, 0, "a live worker in another pid namespace was recovered");
    dsmpool_seg *s;
    cr_expect_eq(dsmpool_seg_attach(p, atomic_load(&sh->val[1]), &s), 0, "its segment was destroyed");
    dsmpool_seg_detach(s);
    while (!atomic_load(&sh->val[3])) usleep(100);
    kill((pid_t)atomic_load(&sh->val[3]), SIGKILL);
    cr_expect_eq(test_wait(x), 0);
    cr_assert_eq(dsmpool_recover(p), 0);
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.procs_recovered, 1, "the dead worker was not recovered");
    cr_expect_eq(test_pool_free(p), free0);
    test_check_ok(p);
    dsmpool_detach(p);
}

/* ---- 3. damaged allocator words ----------------------------------------------- */

/* Defect 3: the root's ABSENT children scribbled to FREE. Before the fix the
 * allocator handed out frames past the end of the region, and the caller's
 * memset crashed. Now every block stays inside, and check says where the
 * damage is. Runs in a child so that a crash is a failure, not the end. */
Test(safety, absent_children_scribbled_free_stay_absent, .timeout = 60) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = 16 * MIB; /* data not a whole root: the root has ABSENT children */
    dsmpool *p;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0);
    dp_pa *pa = &p->pa[0];
    dp_a64 *root = dp_pa_word(pa, pa->nlevels - 1, 0);
    uint64_t w = atomic_load(root), absent = 0;
    for (unsigned i = 0; i < 16; i++)
        if (((w >> (2 * i)) & 3) == 3) absent |= 3ull << (2 * i);
    cr_assert_neq(absent, 0, "this pool's root has no absent children (data %llu frames)",
                  (unsigned long long)pa->frames);
    atomic_store(root, w & ~absent); /* ABSENT -> FREE */
    pid_t kid = fork();
    if (kid == 0) {
        char *lo = p->base + p->geo.data_off, *hi = lo + p->geo.data_size;
        for (int i = 0; i < 64; i++) {
            dsmpool_seg *s;
            int r = dsmpool_seg_create(p, (size_t)(4096u << (i % 12)), DSMPOOL_SEG_NO_FALLBACK, &s);
            if (r == -ENOMEM || r == -EUCLEAN) continue;
            if (r) _exit(3);
            char *m = dsmpool_seg_address(s);
            if (m < lo || m + dsmpool_seg_size(s) > hi) _exit(4);
            memset(m, 1, dsmpool_seg_size(s));
        }
        _exit(0);
    }
    cr_expect_eq(test_wait(kid), 0, "a block outside the data was handed out (or the child crashed)");
    int r = dsmpool_check(p);
    cr_expect_eq(r, -EUCLEAN, "check did not see the damage");
    cr_expect_neq(strstr(dsmpool_last_error(), "absent"), NULL, "%s", dsmpool_last_error());
    dsmpool_detach(p);
}

/* ---- 4. double frees -------------------------------------------------------- */

static void *free_in_thread(void *arg) {
    void **a = arg;
    return (void *)(intptr_t)dsmpool_area_free(a[0], (dsmpool_ptr)(uintptr_t)a[1]);
}

/* Defect 4: in an unchecked area, freeing a chunk twice -- from the same
 * thread, another thread, another process -- is refused by default; before
 * the fix the chunk went onto two lists and was handed out twice. */
Test(safety, small_double_frees_are_refused_by_default, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    dsmpool_ptr x, y, z;
    cr_assert_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &x), 0);
    cr_assert_eq(dsmpool_area_alloc(a, 100, 0, &y), 0);
    cr_assert_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &z), 0);
    cr_assert_eq(dsmpool_area_free(a, x), 0, "an untouched chunk frees (allocation cleared its tag)");
    cr_expect_eq(dsmpool_area_free(a, x), -EINVAL, "same thread");
    cr_expect_neq(strstr(dsmpool_last_error(), "double free"), NULL, "%s", dsmpool_last_error());
    void *args[2] = {a, (void *)(uintptr_t)y};
    pthread_t t;
    void *res;
    pthread_create(&t, NULL, free_in_thread, args);
    pthread_join(t, &res);
    cr_assert_eq((intptr_t)res, 0);
    cr_expect_eq(dsmpool_area_free(a, y), -EINVAL, "after another thread freed it");
    pid_t kid = fork();
    if (kid == 0) _exit(dsmpool_area_free(a, z) == 0 ? 0 : 3);
    cr_assert_eq(test_wait(kid), 0);
    cr_expect_eq(dsmpool_area_free(a, z), -EINVAL, "after another process freed it");
    dsmpool_recover(p);
    /* nothing was handed out twice */
    enum { N = 600 };
    static dsmpool_ptr v[N];
    for (int i = 0; i < N; i++) cr_assert_eq(dsmpool_area_alloc(a, i % 2 ? 32 * KIB : 100, 0, &v[i]), 0);
    for (int i = 0; i < N; i++)
        for (int k = i + 1; k < N; k++) cr_assert_neq(v[i], v[k], "chunk %llx handed out twice", (unsigned long long)v[i]);
    /* a span that went back and came again carries no stale tags */
    for (int i = 0; i < N; i++) cr_assert_eq(dsmpool_area_free(a, v[i]), 0);
    cr_assert_eq(dsmpool_area_flush(a), 0);
    for (int i = 0; i < N; i++) cr_assert_eq(dsmpool_area_alloc(a, i % 2 ? 32 * KIB : 100, 0, &v[i]), 0);
    for (int i = 0; i < N; i++) cr_assert_eq(dsmpool_area_free(a, v[i]), 0, "untouched chunk %d refused", i);
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* check() reports a chunk that is on a free list twice: a use-after-free
 * wipes the tag of a freed chunk (the one case the default check cannot
 * see), and the second free gets through. */
Test(safety, check_reports_a_chunk_on_two_free_lists, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    dsmpool_ptr x, y;
    cr_assert_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &x), 0);
    cr_assert_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &y), 0);
    cr_assert_eq(dsmpool_area_free(a, x), 0);
    cr_assert_eq(dsmpool_area_free(a, y), 0);
    test_check_ok(p);
    memset((char *)dsmpool_area_addr(a, x) + 8, 0, 8); /* use after free */
    cr_assert_eq(dsmpool_area_free(a, x), 0, "the tag is gone: the library cannot tell");
    int r = dsmpool_check(p);
    cr_expect_eq(r, -EUCLEAN);
    cr_expect_neq(strstr(dsmpool_last_error(), "two free lists"), NULL, "%s", dsmpool_last_error());
    dsmpool_detach(p);
}

/* ---- 6. forks that skip atfork handlers --------------------------------------- */

static pid_t raw_fork(int how) {
    switch (how) {
    case 0: return (pid_t)syscall(SYS_fork);
    case 1: return _Fork();
    default: return (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
    }
}

/* Defect 6: a child made by syscall(SYS_fork), _Fork() or clone() runs no
 * atfork handler; before the fix it kept the parent's slot and cache record,
 * and parent and child handed out the same chunks. */
Test(safety, raw_forks_get_their_own_slot_and_cache, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &s), 0);
    shared *sh = test_shared(sizeof(shared));
    for (int how = 0; how < 3; how++) {
        dsmpool_ptr v[40];
        for (int i = 0; i < 40; i++) cr_assert_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &v[i]), 0);
        for (int i = 0; i < 40; i++) cr_assert_eq(dsmpool_area_free(a, v[i]), 0); /* a warm cache */
        memset((void *)sh->val, 0, sizeof sh->val);
        atomic_store(&sh->ready[0], 0);
        atomic_store(&sh->go, 0);
        pid_t kid = raw_fork(how);
        cr_assert_geq(kid, 0);
        if (kid == 0) {
            for (int i = 0; i < 20; i++) {
                dsmpool_ptr x;
                if (dsmpool_area_alloc(a, 32 * KIB, 0, &x) != 0) _exit(3);
                atomic_store(&sh->val[i], x);
            }
            dsmpool_stats st;
            dsmpool_get_stats(p, &st);
            atomic_store(&sh->val[63], st.procs_attached);
            atomic_store(&sh->ready[0], 1);
            spin_until(&sh->go, 1);
            /* its inherited segment is its own: detaching it leaves the parent's */
            _exit(dsmpool_seg_detach(s) == 0 ? 0 : 4);
        }
        spin_until(&sh->ready[0], 1);
        dsmpool_ptr mine[20];
        for (int i = 0; i < 20; i++) cr_assert_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &mine[i]), 0);
        for (int i = 0; i < 20; i++)
            for (int k = 0; k < 20; k++)
                cr_expect_neq(mine[i], atomic_load(&sh->val[k]), "fork kind %d: chunk %llx handed to both",
                              how, (unsigned long long)mine[i]);
        cr_expect_eq(atomic_load(&sh->val[63]), 2, "fork kind %d: the child shares the parent's slot", how);
        atomic_store(&sh->go, 1);
        cr_expect_eq(test_wait(kid), 0, "fork kind %d", how);
        cr_expect_eq(test_live_segments(p), 2, "the child's detach dropped the parent's reference");
        for (int i = 0; i < 20; i++) dsmpool_area_free(a, mine[i]);
        dsmpool_recover(p);
    }
    test_check_ok(p);
    dsmpool_seg_detach(s);
    dsmpool_area_destroy(a);
    dsmpool_detach(p);
}

/* ---- 7. a dead opener does not keep memory out of reach ------------------------ */

/* Defect 7: the pool is full but for one 2 MiB node; a process dies while
 * opening it (its parent word already PART). Before the fix every later
 * allocation failed (or spilled to the OS) although the node is free: only
 * dsmpool_recover() finished the step. Now allocation does it. */
Test(safety, dead_opener_does_not_block_free_memory, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    static dsmpool_seg *segs[1024];
    int n = 0;
    while (n < 1024 && dsmpool_seg_create(p, 2 * MIB, DSMPOOL_SEG_NO_FALLBACK, &segs[n]) == 0) n++;
    dsmpool_seg *t;
    while (dsmpool_seg_create(p, 4096, DSMPOOL_SEG_NO_FALLBACK, &t) == 0) {}
    cr_assert_gt(n, 1);
    cr_assert_eq(dsmpool_seg_detach(segs[--n]), 0); /* one 2 MiB node free, and closed */
    pid_t kid = fork();
    if (kid == 0) {
        inject_at("palloc.open.linked", AT_KILL);
        dsmpool_seg *s;
        dsmpool_seg_create(p, 4096, DSMPOOL_SEG_NO_FALLBACK, &s);
        _exit(3); /* not reached: the open step kills us */
    }
    cr_assert_eq(test_wait(kid), 128 + SIGKILL, "the child did not die inside the open step");
    dsmpool_seg *s;
    int r = dsmpool_seg_create(p, 2 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
    cr_expect_eq(r, 0, "the free node stayed out of reach: %s", dsmpool_last_error());
    if (r == 0) dsmpool_seg_detach(s);
    dsmpool_recover(p);
    test_check_ok(p);
    dsmpool_detach(p);
}

/* ---- 5. a checker running beside crashes ------------------------------------- */

/* One churner: segments (create, attach a shared one, pin, detach, unpin)
 * and an area (mixed sizes, patterns checked before each free), for ever. */
static void churn(dsmpool *p, dsmpool_handle shared_seg, dsmpool_handle area, uint64_t seed) {
    dsmpool_area *a;
    if (dsmpool_area_attach(p, area, &a) != 0) _exit(3);
    dsmpool_seg *held[32];
    struct { dsmpool_ptr p; size_t n; uint64_t tag; } ch[64];
    int n = 0, m = 0;
    for (uint64_t op = 1;; op++) {
        uint64_t r = test_rand(&seed) % 100;
        if (r < 20 && n < 32) {
            if (dsmpool_seg_create(p, (size_t)4096 << (test_rand(&seed) % 7), DSMPOOL_SEG_NO_FALLBACK,
                                   &held[n]) == 0) {
                if (test_rand(&seed) % 16 == 0) dsmpool_seg_pin(held[n]);
                n++;
            }
        } else if (r < 30 && n < 32) {
            if (dsmpool_seg_attach(p, shared_seg, &held[n]) == 0) n++;
        } else if (r < 45 && n) {
            int i = (int)(test_rand(&seed) % (uint64_t)n);
            dsmpool_handle hh = dsmpool_seg_handle(held[i]);
            dsmpool_seg_detach(held[i]);
            dsmpool_seg_unpin(p, hh);
            held[i] = held[--n];
        } else if (r < 75 && m < 64) {
            size_t sz = r < 65 ? 32 * KIB : 1 + test_rand(&seed) % (r < 72 ? 4000 : 3 * MIB);
            if (dsmpool_area_alloc(a, sz, 0, &ch[m].p) == 0) {
                ch[m].n = sz;
                ch[m].tag = test_rand(&seed);
                uint64_t *w = dsmpool_area_addr(a, ch[m].p);
                for (size_t k = 0; k < sz / 8; k += 97) w[k] = ch[m].tag + k;
                m++;
            }
        } else if (m) {
            int i = (int)(test_rand(&seed) % (uint64_t)m);
            uint64_t *w = dsmpool_area_addr(a, ch[i].p);
            for (size_t k = 0; k < ch[i].n / 8; k += 97)
                if (w[k] != ch[i].tag + k) _exit(9); /* someone else wrote into our chunk */
            if (dsmpool_area_free(a, ch[i].p) != 0) _exit(8);
            ch[i] = ch[--m];
        }
    }
}

/* Defect 5: processes churn and are SIGKILLed at random moments while
 * another process runs dsmpool_check() in a loop. Before the fix the
 * checker said -EUCLEAN ("allocated but owned by nothing", "reference count
 * 2 but 1 attachments"...) about a pool every quiet check found sound. Now
 * -EUCLEAN means damage; the share of conclusive answers is printed. */
Test(safety_soak, checker_beside_kills_never_cries_wolf, .timeout = 600) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 128 * MIB);
    dsmpool_seg *ss;
    cr_assert_eq(dsmpool_seg_create(p, 8192, 0, &ss), 0);
    dsmpool_area *a = test_area(p, 0);
    shared *sh = test_shared(sizeof(shared));
    static char *msg;
    msg = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t checker = fork();
    if (checker == 0) {
        while (!atomic_load(&sh->go)) {
            int r = dsmpool_check(p);
            int k = r == 0 ? 0 : r == -EBUSY ? 1 : r == -EUCLEAN ? 2 : 3;
            atomic_fetch_add(&sh->val[k], 1);
            if (k >= 2 && !msg[0]) snprintf(msg, 4096, "%d: %s", r, dsmpool_last_error());
        }
        _exit(0);
    }
    uint64_t seed = test_seed();
    int kills = 0, want = (int)(1000 * test_seconds(1.0));
    while (kills < want) {
        pid_t kids[3];
        for (int k = 0; k < 3; k++) {
            uint64_t cs = test_rand(&seed);
            if ((kids[k] = fork()) == 0) churn(p, dsmpool_seg_handle(ss), dsmpool_area_handle(a), cs);
        }
        struct timespec ts = {0, (long)(test_rand(&seed) % 20000000)};
        nanosleep(&ts, NULL);
        for (int k = 0; k < 3; k++) kill(kids[k], SIGKILL);
        for (int k = 0; k < 3; k++) {
            int st = test_wait(kids[k]);
            cr_assert(st == 128 + SIGKILL, "a churner found its memory overwritten (exit %d)", st);
        }
        kills += 3;
        cr_assert_eq(dsmpool_recover(p), 0);
    }
    atomic_store(&sh->go, 1);
    cr_assert_eq(test_wait(checker), 0);
    uint64_t ok = atomic_load(&sh->val[0]), busy = atomic_load(&sh->val[1]), bad = atomic_load(&sh->val[2]),
             other = atomic_load(&sh->val[3]), all = ok + busy + bad + other;
    fprintf(stderr, "[NOTE] soak: %d kills; concurrent check: %llu calls, %llu conclusive (%.0f%%), "
            "%llu busy, %llu -EUCLEAN, %llu other\n", kills, (unsigned long long)all,
            (unsigned long long)ok, all ? 100.0 * (double)ok / (double)all : 0.0, (unsigned long long)busy,
            (unsigned long long)bad, (unsigned long long)other);
    cr_expect_eq(bad + other, 0, "the checker raised an alarm: %s", msg);
    cr_expect_gt(ok, 0, "the checker was never conclusive");
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_seg_detach(ss);
    dsmpool_detach(p);
}

/* ---- the multi-process stress ---------------------------------------------------- */

/* Allocators write a pattern into what they get from a stable area and from
 * segments and verify it before they free; in a second area, which another
 * process destroys and re-creates all the time, they only allocate and free
 * (the library writes list links and free tags there: the writes that must
 * never land in memory given to someone else). A checker runs beside. */
static int stress_allocator(dsmpool *p, dsmpool_handle stable, shared *sh, uint64_t seed) {
    dsmpool_area *s, *d = NULL;
    if (dsmpool_area_attach(p, stable, &s) != 0) return 3;
    struct { dsmpool_ptr p; size_t n; uint64_t tag; } ch[48];
    dsmpool_seg *segs[16];
    uint64_t stag[16];
    dsmpool_ptr dv[64];
    int n = 0, ns = 0, nd = 0;
    uint64_t dh = 0;
    while (!atomic_load(&sh->go)) {
        uint64_t r = test_rand(&seed) % 100;
        if (r < 25 && n < 48) {
            size_t sz = r < 15 ? 32 * KIB : 1 + test_rand(&seed) % (r < 23 ? 5000 : 2 * MIB);
            if (dsmpool_area_alloc(s, sz, 0, &ch[n].p) == 0) {
                ch[n].n = sz;
                ch[n].tag = test_rand(&seed);
                uint64_t *w = dsmpool_area_addr(s, ch[n].p);
                for (size_t k = 0; k < sz / 8; k += 61) w[k] = ch[n].tag ^ k;
                n++;
            }
        } else if (r < 45 && n) {
            int i = (int)(test_rand(&seed) % (uint64_t)n);
            uint64_t *w = dsmpool_area_addr(s, ch[i].p);
            for (size_t k = 0; k < ch[i].n / 8; k += 61)
                if (w[k] != (ch[i].tag ^ k)) return 9;
            if (dsmpool_area_free(s, ch[i].p) != 0) return 8;
            ch[i] = ch[--n];
        } else if (r < 52 && ns < 16) {
            if (dsmpool_seg_create(p, (size_t)4096 << (test_rand(&seed) % 8), 0, &segs[ns]) == 0) {
                stag[ns] = test_rand(&seed);
                uint64_t *w = dsmpool_seg_address(segs[ns]);
                for (size_t k = 0; k < dsmpool_seg_size(segs[ns]) / 8; k += 61) w[k] = stag[ns] ^ k;
                ns++;
            }
        } else if (r < 58 && ns) {
            int i = (int)(test_rand(&seed) % (uint64_t)ns);
            uint64_t *w = dsmpool_seg_address(segs[i]);
            for (size_t k = 0; k < dsmpool_seg_size(segs[i]) / 8; k += 61)
                if (w[k] != (stag[i] ^ k)) return 10;
            dsmpool_seg_detach(segs[i]);
            segs[i] = segs[ns - 1];
            stag[i] = stag[--ns];
        } else {
            uint64_t cur = atomic_load(&sh->val[0]);
            if (!d || dh != cur) {
                if (d) dsmpool_area_detach(d);
                d = NULL;
                nd = 0;
                if (!cur || dsmpool_area_attach(p, cur, &d) != 0) continue;
                dh = cur;
            }
            int e;
            if (nd < 64 && test_rand(&seed) % 2) {
                e = dsmpool_area_alloc(d, test_rand(&seed) % 4 ? 32 * KIB : 1 + test_rand(&seed) % 3000, 0, &dv[nd]);
                if (e == 0) nd++;
            } else if (nd) {
                int i = (int)(test_rand(&seed) % (uint64_t)nd);
                e = dsmpool_area_free(d, dv[i]);
                dv[i] = dv[--nd];
            } else {
                continue;
            }
            if (e == -ESTALE) nd = 0; /* destroyed: what it held went with it */
            else if (e && e != -ENOMEM) return 11;
        }
    }
    for (int i = 0; i < n; i++) {
        uint64_t *w = dsmpool_area_addr(s, ch[i].p);
        for (size_t k = 0; k < ch[i].n / 8; k += 61)
            if (w[k] != (ch[i].tag ^ k)) return 9;
    }
    return 0;
}

/* A mount namespace of this process's own with a fresh tmpfs on /dev/shm
 * (and, with ipc, an IPC namespace of its own). */
static int own_dev_shm(bool ipc) {
    if (unshare(CLONE_NEWNS | (ipc ? CLONE_NEWIPC : 0)) != 0) return -errno;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -errno;
    if (mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=512m") != 0) return -errno;
    return 0;
}

static int dsmpool_objects_in_dev_shm(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strncmp(e->d_name, "dsmpool", 7) == 0;
    closedir(d);
    return n;
}

/* Allocator k of the stress; with namespaces, allocator 0 runs in a mount
 * namespace with a /dev/shm of its own (and finds nothing of the pool's
 * there at the end), allocator 1 in a pid namespace of its own (pid 1
 * there). */
static int stress_kid(dsmpool *p, dsmpool_handle stable, shared *sh, int k, bool namespaces) {
    uint64_t seed = test_seed() + 31 * (uint64_t)k;
    if (namespaces && k == 0) {
        if (own_dev_shm(false) != 0) return 77;
        /* one segment larger than the pool: an OS segment, made from this
         * namespace in the pool's /dev/shm (through its inherited directory
         * descriptor) whatever the allocators' pace -- under TSan they may
         * not fill the pool in the soak's seconds */
        dsmpool_seg *big;
        if (dsmpool_seg_create(p, 64 * MIB, 0, &big) != 0) return 15;
        memset(dsmpool_seg_address(big), 0x5a, dsmpool_seg_size(big));
        dsmpool_seg_detach(big);
        int r = stress_allocator(p, stable, sh, seed);
        return r ? r : dsmpool_objects_in_dev_shm() == 0 ? 0 : 12;
    }
    if (namespaces && k == 1) {
        if (unshare(CLONE_NEWPID) != 0) return 77;
        pid_t g = fork();
        if (g == 0) _exit(getpid() == 1 ? stress_allocator(p, stable, sh, seed) : 13);
        return g < 0 ? 14 : test_wait(g);
    }
    return stress_allocator(p, stable, sh, seed);
}

static void stress_case(size_t pool_size, bool namespaces) {
    if (namespaces) {
        int r = own_dev_shm(true);
        if (r) cr_skip_test("needs mount, IPC and pid namespaces (root): %s", strerror(-r));
    }
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, pool_size);
    size_t free0 = test_pool_free(p);
    dsmpool_area *stable = test_area(p, 0);
    shared *sh = test_shared(sizeof(shared));
    static char *msg;
    msg = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t kids[5];
    for (int k = 0; k < 3; k++)
        if ((kids[k] = fork()) == 0) _exit(stress_kid(p, dsmpool_area_handle(stable), sh, k, namespaces));
    if ((kids[3] = fork()) == 0) { /* the destroyer */
        uint64_t seed = test_seed() ^ 0xd;
        while (!atomic_load(&sh->go)) {
            dsmpool_area *d;
            if (dsmpool_area_create(p, 0, &d) != 0) _exit(3);
            atomic_store(&sh->val[0], dsmpool_area_handle(d));
            usleep((useconds_t)(test_rand(&seed) % 20000));
            if (dsmpool_area_destroy(d) != 0) _exit(4);
            atomic_fetch_add(&sh->val[5], 1);
        }
        atomic_store(&sh->val[0], 0);
        _exit(0);
    }
    if ((kids[4] = fork()) == 0) { /* the checker */
        while (!atomic_load(&sh->go)) {
            int r = dsmpool_check(p);
            int k = r == 0 ? 1 : r == -EBUSY ? 2 : 3;
            atomic_fetch_add(&sh->val[k], 1);
            if (k == 3 && !msg[0]) snprintf(msg, 4096, "%d: %s", r, dsmpool_last_error());
        }
        _exit(0);
    }
    usleep((useconds_t)(test_seconds(5.0) * 1e6));
    atomic_store(&sh->go, 1);
    for (int k = 0; k < 5; k++) {
        int st = test_wait(kids[k]);
        cr_expect_eq(st, 0, "process %d: %d (%s)", k, st,
                     k < 3 ? "9, 10 an allocation was overwritten; 8, 11 a call failed; 12 objects in its "
                             "own /dev/shm; 15 no segment larger than the pool; 77 no namespace"
                           : "failed");
    }
    uint64_t ok = atomic_load(&sh->val[1]), busy = atomic_load(&sh->val[2]), bad = atomic_load(&sh->val[3]);
    dsmpool_stats st;
    cr_assert_eq(dsmpool_get_stats(p, &st), 0);
    fprintf(stderr, "[NOTE] stress%s: %llu areas destroyed under 3 allocators; check: %llu conclusive, "
            "%llu busy, %llu alarms; %llu OS fallback segments made\n",
            namespaces ? " (an allocator in its own mount namespace, one in its own pid namespace)" : "",
            (unsigned long long)atomic_load(&sh->val[5]), (unsigned long long)ok, (unsigned long long)busy,
            (unsigned long long)bad, (unsigned long long)st.fallback_segments_created);
    cr_expect_eq(bad, 0, "the checker raised an alarm: %s", msg);
    cr_expect_gt(atomic_load(&sh->val[5]), 10, "the destroyer did little");
    if (namespaces) cr_expect_gt(st.fallback_segments_created, 0, "nothing fell back to the OS: /dev/shm untested");
    cr_assert_eq(dsmpool_recover(p), 0);
    test_check_ok(p);
    dsmpool_area_destroy(stable);
    cr_expect_eq(test_pool_free(p), free0, "every frame back");
    dsmpool_detach(p);
    if (namespaces) cr_expect_eq(dsmpool_objects_in_dev_shm(), 0, "the last detach left objects in /dev/shm");
}

Test(safety_soak, allocators_destroyer_and_checker, .timeout = 600) { stress_case(256 * MIB, false); }

/* Issue 24: the same with one allocator in a mount namespace with a
 * /dev/shm of its own and one in a pid namespace of its own, in a pool
 * small enough that blocks fall back to OS segments (they live in the
 * pool's /dev/shm, which the first one reaches through its inherited
 * directory descriptor; it makes one larger than the pool first, so that
 * one fallback is there however slowly the soak runs); nothing is left in
 * either /dev/shm. */
Test(safety_soak, allocators_in_other_namespaces_destroyer_and_checker, .timeout = 600) {
    stress_case(48 * MIB, true);
}

/* ---- recovery against forks, destroyers and unsettled counts ------------------------ */

/* A fork()ed child of a process that then let an area go: its inherited
 * area object names a control block that now belongs to a segment. The
 * child's first call must say -ESTALE, not claim a cache record in it. */
Test(recovery_races, forked_child_of_a_released_area_writes_nothing, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    dsmpool_area *a = test_area(p, 0);
    shared *sh = test_shared(sizeof(shared));
    pid_t kid = fork();
    if (kid == 0) {
        spin_until(&sh->go, 1);
        dsmpool_ptr v;
        int r1 = dsmpool_area_alloc(a, 64, 0, &v);
        int r2 = dsmpool_area_set_limit(a, 1 << 20);
        int r3 = dsmpool_area_destroy(a);
        _exit(r1 == -ESTALE && r2 == -ESTALE && r3 == -ESTALE ? 0 : 3);
    }
    cr_assert_eq(dsmpool_area_detach(a), 0); /* the last reference: the control block goes back */
    static dsmpool_seg *segs[256];
    int n = fill_pool(p, segs, 256);
    atomic_store(&sh->go, 1);
    cr_expect_eq(test_wait(kid), 0, "the child's calls did not all say -ESTALE");
    cr_expect(segs_intact(segs, n), "the child wrote into the block its area had");
    dsmpool_recover(p);
    test_check_ok(p);
    dsmpool_detach(p);
}

static pthread_t rec_thread;
static _Atomic int rec_stage;

static void pause_recoverer(const char *point) {
    if (strcmp(point, "area.push.checked") || !pthread_equal(pthread_self(), rec_thread)) return;
    int z = 0;
    if (!atomic_compare_exchange_strong(&rec_stage, &z, 1)) return;
    while (atomic_load(&rec_stage) != 2) usleep(500);
}

static void *recover_thread(void *p) { return (void *)(intptr_t)dsmpool_recover(p); }

/* A thread of this process recovers a dead process's cache (it holds the
 * dead slot's lock, on a description this process's destroyer shares:
 * F_OFD_GETLK never reports our own locks) and stops just before linking a
 * chunk onto its span; another thread destroys the area. Before the fix the
 * destroyer took the slot for dead, released the span, and the recovery's
 * link landed in the segment that got the block next. */
Test(recovery_races, destroyer_waits_for_a_recoverer_of_its_own_process, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_MEMFD, NULL, 64 * MIB);
    dsmpool_area *a = test_area(p, 0);
    pid_t x = fork();
    if (x == 0) { /* fill a cache, then die with it */
        dsmpool_ptr v[100];
        for (int i = 0; i < 100; i++)
            if (dsmpool_area_alloc(a, 64, 0, &v[i])) _exit(3);
        for (int i = 0; i < 100; i++) dsmpool_area_free(a, v[i]);
        raise(SIGKILL);
    }
    cr_assert_eq(test_wait(x), 128 + SIGKILL);
    atomic_store(&rec_stage, 0);
    dp_inject_fn = pause_recoverer;
    pthread_create(&rec_thread, NULL, recover_thread, p);
    for (int i = 0; i < 10000 && atomic_load(&rec_stage) != 1; i++) usleep(500);
    cr_assert_eq(atomic_load(&rec_stage), 1, "the recovery never reached the push");
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    static dsmpool_seg *segs[64];
    int n = fill_pool(p, segs, 64);
    atomic_store(&rec_stage, 2);
    pthread_join(rec_thread, NULL);
    dp_inject_fn = NULL;
    cr_expect(segs_intact(segs, n), "the recovery wrote into a segment the destroyed area's span became");
    for (int i = 0; i < n; i++) dsmpool_seg_detach(segs[i]);
    dsmpool_recover(p);
    test_check_ok(p);
    dsmpool_detach(p);
}

static void pause_at_area(const char *point) {
    if (strcmp(point, "area.recover.area")) return;
    int z = 0;
    if (!atomic_compare_exchange_strong(&rec_stage, &z, 1)) return;
    for (int i = 0; i < 400 && atomic_load(&rec_stage) != 2; i++) usleep(500);
}

/* A process dies holding no reference to area A; while its recovery runs,
 * A's last process detaches (the control block goes back) and the block
 * becomes a segment full of a value that looks like the dead slot's cache
 * owner word. Before the fix recovery walked every area's control block and
 * rewrote 512 words of that segment. */
Test(recovery_races, recovery_walks_only_areas_the_dead_held, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_MEMFD, NULL, 32 * MIB);
    shared *sh = test_shared(sizeof(shared));
    pid_t x = fork();
    if (x == 0) {
        if (dsmpool_recover(p)) _exit(3); /* its first call: a slot of its own, and nothing else */
        atomic_store(&sh->val[0], p->slot + 1);
        raise(SIGKILL);
    }
    cr_assert_eq(test_wait(x), 128 + SIGKILL);
    uint64_t xslot1 = atomic_load(&sh->val[0]);
    dsmpool_area *a = test_area(p, 0); /* made after X died: X never held it */
    dsmpool_ptr q;
    cr_assert_eq(dsmpool_area_alloc(a, 64, 0, &q), 0);
    cr_assert_eq(dsmpool_area_flush(a), 0);
    atomic_store(&rec_stage, 0);
    dp_inject_fn = pause_at_area;
    pthread_t t;
    pthread_create(&t, NULL, recover_thread, p);
    for (int i = 0; i < 100 && atomic_load(&rec_stage) != 1; i++) usleep(1000);
    cr_assert_eq(dsmpool_area_detach(a), 0);
    static dsmpool_seg *segs[64];
    int n = 0;
    while (n < 64 && dsmpool_seg_create(p, 128 * KIB, DSMPOOL_SEG_NO_FALLBACK, &segs[n]) == 0) {
        uint64_t *w = dsmpool_seg_address(segs[n]);
        for (size_t k = 0; k < 128 * KIB / 8; k++) w[k] = xslot1;
        n++;
    }
    atomic_store(&rec_stage, 2);
    pthread_join(t, NULL);
    dp_inject_fn = NULL;
    for (int i = 0; i < n; i++) {
        uint64_t *w = dsmpool_seg_address(segs[i]);
        for (size_t k = 0; k < 128 * KIB / 8; k++)
            cr_assert_eq(w[k], xslot1, "segment %d word %zu was rewritten by the recovery", i, k);
    }
    for (int i = 0; i < n; i++) dsmpool_seg_detach(segs[i]);
    test_check_ok(p);
    dsmpool_detach(p);
}

/* X dies after raising segment G's count but before its record says so; L
 * is stopped with a PENDING record for G. Before the fix recovery waited a
 * while, then erased X's record anyway: G leaked a reference for good (and
 * check said so for ever). Now the slot waits RECOVERING, and the next
 * recovery after L goes on settles it exactly. */
Test(recovery_races, an_unsettled_count_waits_for_the_next_recovery, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_seg *g;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &g), 0);
    dsmpool_handle h = dsmpool_seg_handle(g);
    pid_t x = fork();
    if (x == 0) {
        inject_at("segment.attach.counted", AT_KILL);
        dsmpool_seg *s;
        dsmpool_seg_attach(p, h, &s);
        _exit(3);
    }
    cr_assert_eq(test_wait(x), 128 + SIGKILL);
    pid_t l = fork();
    if (l == 0) {
        inject_at("segment.attach.recorded", AT_STOP);
        dsmpool_seg *s;
        int r = dsmpool_seg_attach(p, h, &s);
        if (r == 0) dsmpool_seg_detach(s);
        _exit(r == 0 && dsmpool_detach(p) == 0 ? 0 : 4);
    }
    wait_stopped(l);
    cr_assert_eq(dsmpool_recover(p), 0);
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.procs_recovering, 1, "the unsettled slot was not kept for later");
    cr_expect_geq(st.recoveries_deferred, 1);
    kill(l, SIGCONT);
    cr_expect_eq(test_wait(l), 0);
    cr_assert_eq(dsmpool_recover(p), 0);
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.procs_recovering, 0, "the next recovery did not finish it");
    test_check_ok(p);
    cr_assert_eq(dsmpool_seg_detach(g), 0);
    cr_expect_eq(test_live_segments(p), 0, "the segment leaked a reference");
    cr_expect_eq(test_pool_free(p), free0);
    dsmpool_detach(p);
}
