/*
 * test_names.c -- named segments and areas (pool/names.c): find or create by
 * name, exactly one creator among racing processes, waiters that wait for
 * init, a creator killed or stopped inside init, names that go with their
 * objects, bad names, a full table.
 */
#include <criterion/criterion.h>
#include <dsmpool.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dp_internal.h"
#include "testutil.h"

typedef struct shared {
    _Atomic int inits;   /* init calls, every process */
    _Atomic int created; /* callers told created = true */
    _Atomic int ready;   /* children at the start line */
    _Atomic int go;
    _Atomic int in_init; /* a creator is inside init */
    _Atomic int release; /* init_pattern with INIT_HELD may return */
    _Atomic uint64_t handle[16];
} shared;

static shared *shared_new(void) {
    shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(s, MAP_FAILED);
    memset(s, 0, sizeof *s);
    return s;
}

static shared *sh;

/* init: count it, fill the segment with a pattern; with arg, take a while
 * (20 ms), or, with INIT_HELD, until the test sets release (or 60 s pass) */
#define INIT_HELD ((void *)2)
static int init_pattern(void *addr, size_t size, void *arg) {
    atomic_fetch_add(&sh->inits, 1);
    atomic_store(&sh->in_init, 1);
    if (arg == INIT_HELD)
        for (uint64_t t0 = test_now_ns(); !atomic_load(&sh->release) && test_now_ns() - t0 < 60000000000ull;)
            usleep(100);
    else
        usleep(arg ? 20000 : 0);
    memset(addr, 0x5a, size);
    return 0;
}

static int init_forever(void *addr, size_t size, void *arg) {
    (void)addr;
    (void)size;
    (void)arg;
    atomic_fetch_add(&sh->inits, 1);
    atomic_store(&sh->in_init, 1);
    for (;;) pause();
    return 0;
}

static int init_fails(void *addr, size_t size, void *arg) {
    (void)addr;
    (void)size;
    (void)arg;
    atomic_fetch_add(&sh->inits, 1);
    return -EIO;
}

Test(names, find_or_create_and_attach) {
    sh = shared_new();
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    dsmpool_seg *a, *b;
    bool created = false;
    cr_assert_eq(dsmpool_seg_open_named(p, "hash table", 100000, 0, init_pattern, NULL, &a, &created), 0,
                 "%s", dsmpool_last_error());
    cr_expect(created);
    cr_expect_eq(atomic_load(&sh->inits), 1);
    cr_expect_geq(dsmpool_seg_size(a), 100000);
    cr_assert_eq(dsmpool_seg_open_named(p, "hash table", 50000, 0, init_pattern, NULL, &b, &created), 0,
                 "%s", dsmpool_last_error());
    cr_expect_not(created);
    cr_expect_eq(atomic_load(&sh->inits), 1, "init runs once");
    cr_expect_eq(dsmpool_seg_handle(a), dsmpool_seg_handle(b));
    cr_expect_eq(((unsigned char *)dsmpool_seg_address(b))[99999], 0x5a, "the creator's init is seen");
    dsmpool_seg *c = (dsmpool_seg *)1;
    cr_expect_eq(dsmpool_seg_open_named(p, "hash table", 1 << 20, 0, NULL, NULL, &c, &created), -EINVAL,
                 "an existing segment smaller than asked for");
    cr_expect_null(c);
    cr_expect_neq(strstr(dsmpool_last_error(), "exists with"), NULL, "%s", dsmpool_last_error());
    cr_expect_eq(dsmpool_seg_open_named(p, "hash table", 0, 0, NULL, NULL, &c, &created), 0, "size 0 opens");
    cr_expect_not(created);
    cr_expect_eq(dsmpool_seg_detach(c), 0);
    cr_expect_eq(dsmpool_seg_open_named(p, "absent", 0, 0, NULL, NULL, &c, &created), -ENOENT);
    dsmpool_area *ar;
    cr_expect_eq(dsmpool_area_open_named(p, "hash table", 0, &ar, &created), -EEXIST, "a segment's name");
    /* the name goes with its object */
    cr_assert_eq(dsmpool_seg_detach(a), 0);
    cr_assert_eq(dsmpool_seg_detach(b), 0);
    cr_expect_eq(test_live_segments(p), 0);
    cr_expect_eq(dsmpool_seg_open_named(p, "hash table", 0, 0, NULL, NULL, &c, &created), -ENOENT,
                 "destroyed with its last reference");
    cr_assert_eq(dsmpool_seg_open_named(p, "hash table", 4096, 0, init_pattern, NULL, &a, &created), 0);
    cr_expect(created, "created afresh");
    cr_expect_eq(atomic_load(&sh->inits), 2);
    /* pinned: outlives every reference, and the name with it */
    cr_assert_eq(dsmpool_seg_pin(a), 0);
    dsmpool_handle h = dsmpool_seg_handle(a);
    cr_assert_eq(dsmpool_seg_detach(a), 0);
    cr_assert_eq(dsmpool_seg_open_named(p, "hash table", 0, 0, NULL, NULL, &a, &created), 0);
    cr_expect_eq(dsmpool_seg_handle(a), h);
    cr_assert_eq(dsmpool_seg_detach(a), 0);
    cr_assert_eq(dsmpool_seg_unpin(p, h), 0);
    cr_expect_eq(dsmpool_seg_open_named(p, "hash table", 0, 0, NULL, NULL, &c, &created), -ENOENT);
    test_check_ok(p);
    cr_assert_eq(dsmpool_detach(p), 0);
}

Test(names, areas_by_name) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    dsmpool_area *a, *b;
    bool created;
    cr_expect_eq(dsmpool_area_open_named(p, "shared heap", DSMPOOL_NAMED_OPEN_ONLY, &a, &created), -ENOENT);
    cr_assert_eq(dsmpool_area_open_named(p, "shared heap", 0, &a, &created), 0, "%s", dsmpool_last_error());
    cr_expect(created);
    dsmpool_ptr x;
    cr_assert_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &x), 0);
    strcpy(dsmpool_area_addr(a, x), "from the creator");
    cr_assert_eq(dsmpool_area_open_named(p, "shared heap", 0, &b, &created), 0, "%s", dsmpool_last_error());
    cr_expect_not(created);
    cr_expect_eq(dsmpool_area_handle(a), dsmpool_area_handle(b));
    cr_expect_str_eq(dsmpool_area_addr(b, x), "from the creator");
    dsmpool_seg *s;
    cr_expect_eq(dsmpool_seg_open_named(p, "shared heap", 4096, 0, NULL, NULL, &s, &created), -EEXIST);
    /* destroyed while b is still attached: the name is free at once */
    cr_assert_eq(dsmpool_area_destroy(a), 0);
    cr_expect_eq(dsmpool_area_open_named(p, "shared heap", DSMPOOL_NAMED_OPEN_ONLY, &a, &created), -ENOENT);
    cr_assert_eq(dsmpool_area_open_named(p, "shared heap", 0, &a, &created), 0);
    cr_expect(created);
    cr_expect_neq(dsmpool_area_handle(a), dsmpool_area_handle(b));
    cr_expect_eq(dsmpool_area_detach(b), 0);
    cr_expect_eq(dsmpool_area_detach(a), 0);
    test_check_ok(p);
    cr_assert_eq(dsmpool_detach(p), 0);
}

Test(names, bad_names_and_a_full_table) {
    sh = shared_new();
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_seg *s = (dsmpool_seg *)1;
    bool created;
    char long_name[80];
    memset(long_name, 'x', 64);
    long_name[64] = 0;
    const char *bad[] = {"", long_name, "tab\there", "\x80high"};
    for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_expect_eq(dsmpool_seg_open_named(p, bad[i], 4096, 0, NULL, NULL, &s, &created), -EINVAL, "#%u", i);
        cr_expect_null(s);
    }
    cr_expect_eq(dsmpool_seg_open_named(p, NULL, 4096, 0, NULL, NULL, &s, &created), -EINVAL);
    long_name[63] = 0;
    cr_assert_eq(dsmpool_seg_open_named(p, long_name, 4096, 0, NULL, NULL, &s, &created), 0, "63 bytes are fine");
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    /* init fails: the error comes back, the object and the name are gone */
    size_t free0 = test_pool_free(p);
    cr_expect_eq(dsmpool_seg_open_named(p, "fails", 4096, 0, init_fails, NULL, &s, &created), -EIO);
    cr_expect_null(s);
    cr_expect_not(created);
    cr_expect_eq(test_pool_free(p), free0, "init's failure gave the segment back");
    cr_expect_eq(dsmpool_seg_open_named(p, "fails", 0, 0, NULL, NULL, &s, &created), -ENOENT);
    /* DSMPOOL_NAMES_MAX names, then -ENOSPC; one freed makes room */
    dsmpool_seg *all[DSMPOOL_NAMES_MAX];
    char nm[32];
    for (int i = 0; i < DSMPOOL_NAMES_MAX; i++) {
        snprintf(nm, sizeof nm, "n%d", i);
        cr_assert_eq(dsmpool_seg_open_named(p, nm, 4096, 0, NULL, NULL, &all[i], &created), 0, "%d: %s", i,
                     dsmpool_last_error());
    }
    cr_expect_eq(dsmpool_seg_open_named(p, "one more", 4096, 0, NULL, NULL, &s, &created), -ENOSPC);
    cr_expect_neq(strstr(dsmpool_last_error(), "full"), NULL, "%s", dsmpool_last_error());
    cr_assert_eq(dsmpool_seg_detach(all[7]), 0);
    cr_assert_eq(dsmpool_seg_open_named(p, "one more", 4096, 0, NULL, NULL, &s, &created), 0, "%s",
                 dsmpool_last_error());
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    for (int i = 0; i < DSMPOOL_NAMES_MAX; i++)
        if (i != 7) cr_assert_eq(dsmpool_seg_detach(all[i]), 0);
    test_check_ok(p);
    cr_assert_eq(dsmpool_detach(p), 0);
}

/* Unknown flag bits are refused before the name is looked up, whether the
 * name exists or not (issue 24: an existing name let them pass, since only
 * creation checked them): -EINVAL naming the bits, nothing created, nothing
 * attached. With names_mutex held here, a call that looked the name up
 * would get -EAGAIN (NOWAIT) instead. */
Test(names, unknown_flags_refused_with_or_without_the_name) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    dsmpool_seg *s = (dsmpool_seg *)1, *seg;
    dsmpool_area *a = (dsmpool_area *)1, *area;
    bool created = true;
    const unsigned seg_bad[] = {1u << 31, 1u << 20, 5u << 8 /* node bits without ON_NODE */};
    const unsigned area_bad[] = {1u << 31, 1u << 20, DSMPOOL_SEG_HUGE_ROUND};
    for (int present = 0; present < 2; present++) {
        if (present) {
            cr_assert_eq(dsmpool_seg_open_named(p, "seg", 4096, 0, NULL, NULL, &seg, &created), 0, "%s",
                         dsmpool_last_error());
            cr_assert_eq(dsmpool_area_open_named(p, "area", 0, &area, &created), 0, "%s", dsmpool_last_error());
        }
        size_t live = test_live_segments(p), free0 = test_pool_free(p);
        for (unsigned i = 0; i < 3; i++) {
            char bits[32];
            snprintf(bits, sizeof bits, "0x%x", seg_bad[i]);
            created = true;
            cr_expect_eq(dsmpool_seg_open_named(p, "seg", 4096, seg_bad[i], NULL, NULL, &s, &created), -EINVAL,
                         "segment, name %s, flags %s", present ? "present" : "absent", bits);
            cr_expect_null(s);
            cr_expect_not(created);
            cr_expect_neq(strstr(dsmpool_last_error(), bits), NULL, "names the bits: %s", dsmpool_last_error());
            snprintf(bits, sizeof bits, "0x%x", area_bad[i]);
            created = true;
            cr_expect_eq(dsmpool_area_open_named(p, "area", area_bad[i], &a, &created), -EINVAL,
                         "area, name %s, flags %s", present ? "present" : "absent", bits);
            cr_expect_null(a);
            cr_expect_not(created);
            cr_expect_neq(strstr(dsmpool_last_error(), bits), NULL, "names the bits: %s", dsmpool_last_error());
        }
        /* not looked up: the name lock is not even tried */
        cr_assert_eq(pthread_mutex_lock(&p->names_mutex), 0);
        int rs = dsmpool_seg_open_named(p, "seg", 4096, DSMPOOL_NAMED_NOWAIT | 1u << 31, NULL, NULL, &s, &created);
        int ra = dsmpool_area_open_named(p, "area", DSMPOOL_NAMED_NOWAIT | 1u << 31, &a, &created);
        cr_assert_eq(pthread_mutex_unlock(&p->names_mutex), 0);
        cr_expect_eq(rs, -EINVAL, "segment, name %s: refused before the lookup", present ? "present" : "absent");
        cr_expect_eq(ra, -EINVAL, "area, name %s: refused before the lookup", present ? "present" : "absent");
        cr_expect_eq(test_live_segments(p), live, "nothing created or attached");
        cr_expect_eq(test_pool_free(p), free0);
        if (!present) {
            cr_expect_eq(dsmpool_seg_open_named(p, "seg", 0, 0, NULL, NULL, &s, &created), -ENOENT);
            cr_expect_eq(dsmpool_area_open_named(p, "area", DSMPOOL_NAMED_OPEN_ONLY, &a, &created), -ENOENT);
        }
    }
    /* the known flags still open what exists */
    cr_assert_eq(dsmpool_seg_open_named(p, "seg", 4096, DSMPOOL_SEG_NO_FALLBACK | DSMPOOL_SEG_HUGE_ROUND |
                                        DSMPOOL_SEG_ON_NODE(0) | DSMPOOL_NAMED_NOWAIT, NULL, NULL, &s, &created),
                 0, "%s", dsmpool_last_error());
    cr_expect_not(created);
    cr_assert_eq(dsmpool_area_open_named(p, "area", DSMPOOL_AREA_CHECKED | DSMPOOL_AREA_MID_CHUNKS |
                                         DSMPOOL_NAMED_NOWAIT | DSMPOOL_NAMED_OPEN_ONLY, &a, &created),
                 0, "%s", dsmpool_last_error());
    cr_expect_not(created);
    cr_expect_eq(dsmpool_seg_detach(s), 0);
    cr_expect_eq(dsmpool_seg_detach(seg), 0, "one reference each: the refused calls took none");
    cr_expect_eq(dsmpool_area_detach(a), 0);
    cr_expect_eq(dsmpool_area_destroy(area), 0);
    cr_expect_eq(test_live_segments(p), 0);
    test_check_ok(p);
    cr_assert_eq(dsmpool_detach(p), 0);
}

/* 8 forked processes open one name at once, 20 times over: one creator,
 * one init, one handle; the others see init's bytes. Segments and areas. */
Test(names, eight_processes_race_one_creator, .timeout = 120) {
    sh = shared_new();
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    for (int round = 0; round < 20; round++) {
        bool area = round % 2;
        atomic_store(&sh->inits, 0);
        atomic_store(&sh->created, 0);
        atomic_store(&sh->ready, 0);
        atomic_store(&sh->go, 0);
        char nm[32];
        snprintf(nm, sizeof nm, "race %d", round);
        pid_t kids[8];
        for (int k = 0; k < 8; k++) {
            if ((kids[k] = fork()) == 0) {
                atomic_fetch_add(&sh->ready, 1);
                while (!atomic_load(&sh->go)) sched_yield();
                bool created = false;
                dsmpool_handle h;
                if (area) {
                    dsmpool_area *a;
                    if (dsmpool_area_open_named(p, nm, 0, &a, &created) != 0) _exit(10);
                    h = dsmpool_area_handle(a);
                    if (created) atomic_fetch_add(&sh->inits, 1);
                } else {
                    dsmpool_seg *s;
                    if (dsmpool_seg_open_named(p, nm, 64 * KIB, 0, init_pattern, (void *)1, &s, &created))
                        _exit(11);
                    if (((unsigned char *)dsmpool_seg_address(s))[64 * KIB - 1] != 0x5a) _exit(12);
                    h = dsmpool_seg_handle(s);
                }
                atomic_fetch_add(&sh->created, created);
                sh->handle[k] = h;
                _exit(0); /* (the process's references go with it: recovery) */
            }
        }
        while (atomic_load(&sh->ready) < 8) usleep(100);
        atomic_store(&sh->go, 1);
        for (int k = 0; k < 8; k++) cr_assert_eq(test_wait(kids[k]), 0, "round %d child %d", round, k);
        cr_expect_eq(atomic_load(&sh->created), 1, "round %d: one creator", round);
        cr_expect_eq(atomic_load(&sh->inits), 1, "round %d: one init", round);
        for (int k = 1; k < 8; k++) cr_expect_eq(sh->handle[k], sh->handle[0], "round %d: one object", round);
    }
    cr_assert_eq(dsmpool_recover(p), 0, "%s", dsmpool_last_error());
    test_check_ok(p);
    cr_assert_eq(dsmpool_detach(p), 0);
}

/* A creator SIGKILLed inside init: another caller (NOWAIT) is told to try
 * again while it is alive; after its death the next caller creates the
 * object afresh and runs init, within the bounded wait. A creator stopped
 * inside init makes callers wait, or -EAGAIN with NOWAIT, and finishes
 * when continued. */
Test(names, creator_killed_or_stopped_in_init, .timeout = 120) {
    sh = shared_new();
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    size_t free0 = test_pool_free(p);
    pid_t kid = fork();
    if (kid == 0) {
        dsmpool_seg *s;
        bool created;
        dsmpool_seg_open_named(p, "doomed", 64 * KIB, 0, init_forever, NULL, &s, &created);
        _exit(1);
    }
    while (!atomic_load(&sh->in_init)) usleep(100);
    dsmpool_seg *s = (dsmpool_seg *)1;
    bool created;
    cr_expect_eq(dsmpool_seg_open_named(p, "doomed", 64 * KIB, DSMPOOL_NAMED_NOWAIT, init_pattern, NULL, &s,
                                        &created), -EAGAIN, "%s", dsmpool_last_error());
    cr_expect_neq(strstr(dsmpool_last_error(), "being created by process"), NULL, "%s", dsmpool_last_error());
    kill(kid, SIGKILL);
    cr_expect_eq(test_wait(kid), 128 + SIGKILL);
    uint64_t t0 = test_now_ns();
    cr_assert_eq(dsmpool_seg_open_named(p, "doomed", 64 * KIB, 0, init_pattern, NULL, &s, &created), 0, "%s",
                 dsmpool_last_error());
    cr_expect(created, "the dead creator's name is taken over");
    cr_expect_lt(test_now_ns() - t0, 5000000000ull, "without waiting for the 30 s bound");
    cr_expect_eq(atomic_load(&sh->inits), 2);
    cr_expect_eq(((unsigned char *)dsmpool_seg_address(s))[0], 0x5a);
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    cr_assert_eq(dsmpool_recover(p), 0, "%s", dsmpool_last_error());
    cr_expect_eq(test_pool_free(p), free0, "the dead creator's segment went with its slot");

    /* stopped, then continued */
    atomic_store(&sh->in_init, 0);
    kid = fork();
    if (kid == 0) {
        dsmpool_seg *t;
        bool c;
        int r = dsmpool_seg_open_named(p, "stopped", 64 * KIB, 0, init_pattern, INIT_HELD, &t, &c);
        _exit(r == 0 && c ? 0 : 1);
    }
    /* the creator stays inside init until it is stopped: a loaded machine
     * that runs this process late cannot let it finish first */
    while (!atomic_load(&sh->in_init)) usleep(100);
    kill(kid, SIGSTOP);
    int wst;
    cr_assert_eq(waitpid(kid, &wst, WUNTRACED), kid);
    cr_assert(WIFSTOPPED(wst), "the creator was not stopped (status %#x)", wst);
    atomic_store(&sh->release, 1); /* it finishes init once continued */
    cr_expect_eq(dsmpool_seg_open_named(p, "stopped", 64 * KIB, DSMPOOL_NAMED_NOWAIT, NULL, NULL, &s,
                                        &created), -EAGAIN);
    pid_t waiter = fork();
    if (waiter == 0) { /* waits for the stopped creator, then attaches */
        dsmpool_seg *t;
        bool c = true;
        int r = dsmpool_seg_open_named(p, "stopped", 64 * KIB, 0, NULL, NULL, &t, &c);
        _exit(r == 0 && !c && ((unsigned char *)dsmpool_seg_address(t))[100] == 0x5a ? 0 : 1);
    }
    usleep(200000);
    kill(kid, SIGCONT);
    cr_expect_eq(test_wait(kid), 0);
    cr_expect_eq(test_wait(waiter), 0, "the waiter attached once init was done");
    cr_assert_eq(dsmpool_recover(p), 0);
    test_check_ok(p);
    cr_assert_eq(dsmpool_detach(p), 0);
}

/* ---- names against dead creators, reused slots and damage ------------------------- */

/* A named OS segment whose file was removed (systemd RemoveIPC, an
 * operator's rm): an open is a definite error at once, not a spin. */
Test(names, fallback_file_gone_is_an_error_not_a_spin, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_seg *s, *t = (dsmpool_seg *)1;
    bool created;
    cr_assert_eq(dsmpool_seg_open_named(p, "big", 64 * MIB, 0, NULL, NULL, &s, &created), 0, "%s",
                 dsmpool_last_error());
    cr_assert(dsmpool_seg_is_fallback(s));
    char nm[96];
    dsmpool_handle h = dsmpool_seg_handle(s);
    dp_fallback_name(p, DP_HANDLE_IDX(h), DP_HANDLE_GEN(h), nm, sizeof nm);
    cr_assert_eq(shm_unlink(nm), 0, "%s: %s", nm, strerror(errno));
    uint64_t t0 = test_now_ns();
    int r = dsmpool_seg_open_named(p, "big", 0, 0, NULL, NULL, &t, &created);
    cr_expect_neq(r, 0, "the file is gone: no attach can work");
    cr_expect_null(t);
    cr_expect_lt(test_now_ns() - t0, 2000000000ull, "answered at once, not after a bound");
    cr_expect_eq(dsmpool_seg_detach(s), 0);
    cr_assert_eq(dsmpool_detach(p), 0);
}

/* A creator killed in init whose slot is then claimed by another process
 * with the same pid (pid 1 of another pid namespace): the next caller takes
 * the name over at once (the slot's claim count differs), instead of judging
 * the new owner by the old one's pid and waiting 30 s. */
static int init_hang(void *addr, size_t size, void *arg) {
    (void)addr;
    (void)size;
    atomic_store((_Atomic int *)arg, 1);
    for (;;) pause();
    return 0;
}

static int in_new_pidns(int (*fn)(dsmpool *, _Atomic int *), dsmpool *p, _Atomic int *flag) {
    pid_t c = fork(); /* unshare(CLONE_NEWPID) applies to the caller's children */
    if (c == 0) {
        if (unshare(CLONE_NEWPID) != 0) _exit(77);
        pid_t g = fork();
        if (g == 0) _exit(fn(p, flag));
        atomic_store(flag + 1, (int)g); /* its pid out here, where it can be killed */
        _exit(test_wait(g));
    }
    return c;
}

static int pidns_creator(dsmpool *p, _Atomic int *flag) {
    if (getpid() != 1) return 70;
    dsmpool_seg *s;
    bool created;
    dsmpool_seg_open_named(p, "pidns", 4096, 0, init_hang, (void *)flag, &s, &created);
    return 71;
}

static int pidns_taker(dsmpool *p, _Atomic int *flag) {
    (void)flag;
    if (getpid() != 1) return 70;
    dsmpool_seg *s;
    bool created = false;
    int r = dsmpool_seg_open_named(p, "pidns", 4096, DSMPOOL_NAMED_NOWAIT, NULL, NULL, &s, &created);
    if (r) fprintf(stderr, "[NOTE] taker: %d %s\n", r, dsmpool_last_error());
    return r == 0 && created ? 0 : 1;
}

Test(names, same_pid_in_another_namespace_is_not_the_dead_creator, .timeout = 60) {
    dsmpool_config c;
    dsmpool_config_init(&c);
    c.size = 16 * MIB;
    c.max_procs = 2; /* ours and one more: the taker gets the dead creator's slot */
    dsmpool *p;
    cr_assert_eq(dsmpool_create(&c, &p), 0, "%s", dsmpool_last_error());
    _Atomic int *flag = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(flag, MAP_FAILED);
    flag[0] = flag[1] = 0;
    pid_t a = in_new_pidns(pidns_creator, p, flag);
    for (int i = 0; i < 5000 && !atomic_load(flag); i++) usleep(1000);
    if (!atomic_load(flag)) {
        kill(a, SIGKILL);
        int st = test_wait(a);
        if (st == 77) cr_skip_test("no pid namespaces here (not root?)");
        cr_assert(false, "the creator never reached init (%d)", st);
    }
    /* kill the creator (pid 1 of its namespace; flag[1] is its pid here,
     * stored by its parent after the fork: wait for it -- kill(0) would
     * kill our own process group), then free its slot */
    for (int i = 0; i < 5000 && atomic_load(flag + 1) <= 1; i++) usleep(1000);
    cr_assert_gt(atomic_load(flag + 1), 1, "the creator's pid never came");
    kill(atomic_load(flag + 1), SIGKILL);
    test_wait(a);
    for (int i = 0; i < 100; i++) {
        if (dsmpool_recover(p) == 0 && test_live_segments(p) == 0) break;
        usleep(20000);
    }
    pid_t b = in_new_pidns(pidns_taker, p, flag);
    cr_expect_eq(test_wait(b), 0, "the taker, pid 1 in its own namespace, took the name over");
    dsmpool_recover(p);
    test_check_ok(p);
    cr_assert_eq(dsmpool_detach(p), 0);
}

/* An init that opens the name it is creating: -EDEADLK at once, not a 30 s
 * wait for itself; the outer open then fails with init's error. */
static dsmpool *rec_pool;
static int init_reopens(void *addr, size_t size, void *arg) {
    (void)addr;
    (void)size;
    dsmpool_seg *s;
    bool c;
    int r = dsmpool_seg_open_named(rec_pool, "self", 4096, 0, NULL, NULL, &s, &c);
    *(int *)arg = r;
    return r;
}

Test(names, init_opening_its_own_name_is_edeadlk, .timeout = 60) {
    rec_pool = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_seg *s;
    bool created;
    int inner = 0;
    uint64_t t0 = test_now_ns();
    cr_expect_eq(dsmpool_seg_open_named(rec_pool, "self", 4096, 0, init_reopens, &inner, &s, &created), -EDEADLK);
    cr_expect_eq(inner, -EDEADLK);
    cr_expect_lt(test_now_ns() - t0, 2000000000ull);
    cr_expect_eq(dsmpool_seg_open_named(rec_pool, "self", 0, 0, NULL, NULL, &s, &created), -ENOENT,
                 "the failed creation left no name");
    test_check_ok(rec_pool);
    cr_assert_eq(dsmpool_detach(rec_pool), 0);
}
