/*
 * test_process.c -- segments across processes: fork()ed children attaching
 * by handle, an exec()ed unrelated program attaching by name, reference
 * counts that destroy exactly at the last detach in any process, SIGKILLed
 * children whose references recovery releases, inherited attachments.
 *
 * Children never use Criterion's asserts; they report through exit codes.
 */
#include <criterion/criterion.h>
#include <dsmpool.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>

#include "testutil.h"

/* A one-byte pipe handshake. */
static void say(int fd) { (void)!write(fd, "x", 1); }
static void hear(int fd) {
    char c;
    (void)!read(fd, &c, 1);
}

Test(process, forked_children_attach_by_handle, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 64 * 1024, 0, &s), 0);
    dsmpool_handle h = dsmpool_seg_handle(s);
    unsigned char *mem = dsmpool_seg_address(s);
    memset(mem, 0xab, 64 * 1024);
    pid_t kids[4];
    for (int i = 0; i < 4; i++) {
        if ((kids[i] = fork()) == 0) {
            dsmpool_seg *c;
            if (dsmpool_seg_attach(p, h, &c) != 0) _exit(3);
            unsigned char *m = dsmpool_seg_address(c);
            for (int k = 100; k < 64 * 1024; k++)
                if (m[k] != 0xab) _exit(4);
            m[i] = (unsigned char)(0x10 + i);
            _exit(dsmpool_seg_detach(c) == 0 && dsmpool_detach(p) == 0 ? 0 : 5);
        }
    }
    for (int i = 0; i < 4; i++) cr_expect_eq(test_wait(kids[i]), 0, "child %d", i);
    for (int i = 0; i < 4; i++) cr_expect_eq(mem[i], 0x10 + i, "child %d's write", i);
    test_check_ok(p);
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.procs_attached, 1, "children left their slots");
    cr_expect_eq(st.segments_live, 1);
    dsmpool_seg_detach(s);
    cr_expect_eq(test_live_segments(p), 0);
    dsmpool_detach(p);
}

Test(process, last_detach_in_any_process_destroys, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 8192, 0, &s), 0);
    dsmpool_handle h = dsmpool_seg_handle(s);
    int to_child[2], to_parent[2];
    cr_assert_eq(pipe(to_child), 0);
    cr_assert_eq(pipe(to_parent), 0);
    pid_t kid = fork();
    if (kid == 0) {
        dsmpool_seg *c;
        if (dsmpool_seg_attach(p, h, &c) != 0) _exit(3);
        say(to_parent[1]);
        hear(to_child[0]); /* parent has detached */
        strcpy(dsmpool_seg_address(c), "still here");
        /* s was inherited: it became the child's own attachment too */
        _exit(dsmpool_seg_detach(c) == 0 && dsmpool_seg_detach(s) == 0 ? 0 : 4);
    }
    hear(to_parent[0]);
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    cr_expect_eq(test_live_segments(p), 1, "the child's reference keeps it");
    say(to_child[1]);
    cr_expect_eq(test_wait(kid), 0);
    cr_expect_eq(test_live_segments(p), 0, "the child's detach was the last");
    dsmpool_recover(p); /* the child exited without dsmpool_detach: free its slot */
    cr_expect_eq(test_pool_free(p), free0);
    test_check_ok(p);
    dsmpool_detach(p);
}

Test(process, exec_attaches_posix_pool_by_name, .timeout = 60) {
    char name[64];
    test_name(name, sizeof name, "exec");
    dsmpool *p = test_pool(DSMPOOL_BACKING_POSIX, name, 32 * MIB);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 3 * 4096, 0, &s), 0);
    memset(dsmpool_seg_address(s), 51, 3 * 4096);
    char hs[32];
    snprintf(hs, sizeof hs, "%" DSMPOOL_PRIhandle, dsmpool_seg_handle(s));
    const char *helper = getenv("DSMPOOL_ATTACH_HELPER");
    cr_assert_not_null(helper, "DSMPOOL_ATTACH_HELPER not set (run through meson test)");
    pid_t kid = fork();
    if (kid == 0) {
        execl(helper, helper, "seg", name, hs, "51", "12288", (char *)NULL);
        _exit(127);
    }
    cr_expect_eq(test_wait(kid), 0, "the exec'ed program could not attach or saw wrong data");
    cr_expect_eq(((unsigned char *)dsmpool_seg_address(s))[12287], 52, "its write is visible here");
    dsmpool_recover(p);
    test_check_ok(p);
    dsmpool_seg_detach(s);
    cr_assert_eq(dsmpool_destroy(p), 0);
    dsmpool *q;
    cr_expect_eq(dsmpool_attach(name, &q), -ENOENT, "destroy removed the name");
}

Test(process, exec_attaches_sysv_pool_by_key, .timeout = 60) {
    char name[64];
    snprintf(name, sizeof name, "dsmpool-test-sysv-%llu", test_uid());
    dsmpool *p = test_pool(DSMPOOL_BACKING_SYSV, name, 16 * MIB);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &s), 0);
    memset(dsmpool_seg_address(s), 9, 4096);
    char hs[32];
    snprintf(hs, sizeof hs, "%" DSMPOOL_PRIhandle, dsmpool_seg_handle(s));
    const char *helper = getenv("DSMPOOL_ATTACH_HELPER");
    cr_assert_not_null(helper);
    pid_t kid = fork();
    if (kid == 0) {
        execl(helper, helper, "seg", name, hs, "9", "4096", (char *)NULL);
        _exit(127);
    }
    cr_expect_eq(test_wait(kid), 0);
    cr_expect_eq(((unsigned char *)dsmpool_seg_address(s))[0], 10);
    dsmpool_seg_detach(s);
    cr_assert_eq(dsmpool_destroy(p), 0);
    dsmpool *q;
    cr_expect_eq(dsmpool_attach(name, &q), -ENOENT);
}

Test(process, memfd_attached_through_its_fd, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_MEMFD, NULL, 16 * MIB);
    int fd = dsmpool_fd(p);
    cr_assert_geq(fd, 0);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &s), 0);
    strcpy(dsmpool_seg_address(s), "memfd");
    dsmpool_handle h = dsmpool_seg_handle(s);
    pid_t kid = fork();
    if (kid == 0) {
        /* A second, independent attachment (as a process that got the fd over a socket). */
        dsmpool *q;
        dsmpool_seg *c;
        if (dsmpool_attach_fd(fd, &q) != 0) _exit(3);
        if (dsmpool_seg_attach(q, h, &c) != 0) _exit(4);
        if (strcmp(dsmpool_seg_address(c), "memfd") != 0) _exit(5);
        if (dsmpool_seg_address(c) == dsmpool_seg_address(s)) _exit(6); /* a new mapping */
        _exit(dsmpool_seg_detach(c) == 0 && dsmpool_detach(q) == 0 ? 0 : 7);
    }
    cr_expect_eq(test_wait(kid), 0);
    dsmpool_recover(p);
    test_check_ok(p);
    dsmpool_detach(p);
}

Test(process, sigkilled_child_references_recovered, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_seg *s[3];
    dsmpool_handle h[3];
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(dsmpool_seg_create(p, 4096 << i, 0, &s[i]), 0);
        h[i] = dsmpool_seg_handle(s[i]);
    }
    int ready[2];
    cr_assert_eq(pipe(ready), 0);
    pid_t kid = fork();
    if (kid == 0) {
        dsmpool_seg *c;
        for (int i = 0; i < 3; i++)
            if (dsmpool_seg_attach(p, h[i], &c) != 0) _exit(3);
        for (int i = 0; i < 20; i++) /* and some of its own, more than the inline records */
            if (dsmpool_seg_create(p, 4096, 0, &c) != 0) _exit(4);
        say(ready[1]);
        pause();
        _exit(0);
    }
    hear(ready[0]);
    cr_expect_eq(test_live_segments(p), 23);
    kill(kid, SIGKILL);
    cr_expect_eq(test_wait(kid), 128 + SIGKILL);
    for (int i = 0; i < 3; i++) dsmpool_seg_detach(s[i]);
    cr_expect_eq(test_live_segments(p), 23, "the dead child still holds references");
    cr_assert_eq(dsmpool_recover(p), 0);
    cr_expect_eq(test_live_segments(p), 0, "recovery released them");
    cr_expect_eq(test_pool_free(p), free0, "and every block");
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.procs_recovered, 1);
    cr_expect_eq(st.procs_attached, 1);
    test_check_ok(p);
    dsmpool_detach(p);
}

Test(process, zombie_counts_as_dead, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &s), 0);
    dsmpool_handle h = dsmpool_seg_handle(s);
    pid_t kid = fork();
    if (kid == 0) {
        dsmpool_seg *c;
        _exit(dsmpool_seg_attach(p, h, &c) == 0 ? 0 : 3); /* exits holding a reference */
    }
    siginfo_t si;
    cr_assert_eq(waitid(P_PID, (id_t)kid, &si, WEXITED | WNOWAIT), 0); /* not reaped */
    dsmpool_seg_detach(s);
    cr_expect_eq(test_live_segments(p), 1);
    dsmpool_recover(p);
    cr_expect_eq(test_live_segments(p), 0, "an unreaped zombie holds nothing");
    cr_expect_eq(test_wait(kid), 0);
    dsmpool_detach(p);
}

Test(process, inherited_attachments_become_the_childs, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &s), 0);
    strcpy(dsmpool_seg_address(s), "parent");
    int ready[2], go[2];
    cr_assert_eq(pipe(ready), 0);
    cr_assert_eq(pipe(go), 0);
    pid_t kid = fork();
    if (kid == 0) {
        /* The first call in the child takes a slot and a reference on s. */
        if (dsmpool_recover(p) != 0) _exit(3);
        say(ready[1]);
        hear(go[0]); /* the parent has detached s */
        if (strcmp(dsmpool_seg_address(s), "parent") != 0) _exit(4);
        strcpy(dsmpool_seg_address(s), "child");
        _exit(dsmpool_seg_detach(s) == 0 && dsmpool_detach(p) == 0 ? 0 : 5);
    }
    hear(ready[0]);
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    cr_expect_eq(test_live_segments(p), 1, "the child's inherited attachment holds it");
    say(go[1]);
    cr_expect_eq(test_wait(kid), 0);
    cr_expect_eq(test_live_segments(p), 0);
    test_check_ok(p);
    dsmpool_detach(p);
}

Test(process, many_processes_contend, .timeout = 120) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    size_t free0 = test_pool_free(p);
    dsmpool_seg *shared;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &shared), 0);
    dsmpool_handle h = dsmpool_seg_handle(shared);
    pid_t kids[6];
    for (int i = 0; i < 6; i++) {
        if ((kids[i] = fork()) == 0) {
            uint64_t seed = test_seed() + (uint64_t)i * 101, end = test_now_ns() + 1500000000ull;
            while (test_now_ns() < end) {
                dsmpool_seg *a, *b;
                size_t sz = (size_t)4096 << (test_rand(&seed) % 8);
                if (dsmpool_seg_create(p, sz, DSMPOOL_SEG_NO_FALLBACK, &a) != 0) continue;
                memset(dsmpool_seg_address(a), i, sz);
                if (dsmpool_seg_attach(p, h, &b) != 0) _exit(3);
                for (size_t k = 0; k < sz; k += 512)
                    if (((unsigned char *)dsmpool_seg_address(a))[k] != i) _exit(4);
                dsmpool_seg_detach(b);
                dsmpool_seg_detach(a);
            }
            _exit(dsmpool_detach(p) == 0 ? 0 : 5);
        }
    }
    for (int i = 0; i < 6; i++) cr_expect_eq(test_wait(kids[i]), 0, "child %d", i);
    dsmpool_seg_detach(shared);
    test_check_ok(p);
    cr_expect_eq(test_pool_free(p), free0);
    dsmpool_detach(p);
}

/* Children churn segments (creating, attaching a shared one, detaching,
 * pinning, spilling into overflow record blocks); the parent SIGKILLs them
 * at random moments. After every round, recovery must give back everything
 * and the full check must pass: no leak, no lost reference, nothing half-done. */
Test(process, sigkill_at_random_points_then_recover_is_exact, .timeout = 240) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_seg *shared;
    cr_assert_eq(dsmpool_seg_create(p, 8192, 0, &shared), 0);
    dsmpool_handle h = dsmpool_seg_handle(shared);
    /* the shared segment lists the handles children pin: [0] counts them */
    _Atomic uint64_t *pins = dsmpool_seg_address(shared);
    size_t free0 = test_pool_free(p);
    uint64_t seed = test_seed();
    int rounds = (int)(40 * test_seconds(1.0));
    for (int round = 0; round < rounds; round++) {
        atomic_store(&pins[0], 0);
        uint64_t ops0 = atomic_load(&pins[1023]);
        pid_t kids[3];
        for (int k = 0; k < 3; k++) {
            uint64_t cs = test_rand(&seed);
            if ((kids[k] = fork()) == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed assertion must not leave us churning */
                dsmpool_seg *held[40];
                int n = 0;
                for (;;) {
                    atomic_fetch_add(&pins[1023], 1);
                    uint64_t r = test_rand(&cs) % 100;
                    if (n < 40 && r < 45) {
                        size_t sz = (size_t)4096 << (test_rand(&cs) % 9);
                        if (dsmpool_seg_create(p, sz, DSMPOOL_SEG_NO_FALLBACK, &held[n]) == 0) {
                            if (test_rand(&cs) % 8 == 0) {
                                uint64_t i = atomic_fetch_add(&pins[0], 1) + 1;
                                if (i < 1000 - 1) {
                                    atomic_store(&pins[i], dsmpool_seg_handle(held[n]));
                                    dsmpool_seg_pin(held[n]);
                                }
                            }
                            n++;
                        }
                    } else if (n < 40 && r < 70) {
                        if (dsmpool_seg_attach(p, h, &held[n]) == 0) n++;
                    } else if (n) {
                        int i = (int)(test_rand(&cs) % (uint64_t)n);
                        dsmpool_handle hh = dsmpool_seg_handle(held[i]);
                        dsmpool_seg_detach(held[i]);
                        dsmpool_seg_unpin(p, hh); /* -EINVAL unless pinned, -ESTALE if gone */
                        held[i] = held[--n];
                    }
                }
            }
        }
        /* Every other round kills amid work: it first waits (bounded) for
         * the children to have done 100 operations, however slow a loaded
         * machine makes them; the others kill at any point from the fork
         * on, start-up included. Neither counts on a speed. */
        if (round % 2) {
            struct timespec t0, t;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            for (;;) {
                if (atomic_load(&pins[1023]) - ops0 >= 100) break;
                clock_gettime(CLOCK_MONOTONIC, &t);
                cr_assert_lt(t.tv_sec - t0.tv_sec, 60, "round %d: the children did %llu operations in 60 s",
                             round, (unsigned long long)(atomic_load(&pins[1023]) - ops0));
                usleep(1000);
            }
        }
        struct timespec ts = {0, (long)(test_rand(&seed) % 20000000)};
        nanosleep(&ts, NULL);
        for (int k = 0; k < 3; k++) kill(kids[k], SIGKILL);
        for (int k = 0; k < 3; k++) test_wait(kids[k]);
        cr_assert_eq(dsmpool_recover(p), 0);
        /* a pin outlives its process (as in PostgreSQL): unpin what the dead pinned */
        uint64_t npins = atomic_load(&pins[0]);
        for (uint64_t i = 1; i <= npins && i < 1000 - 1; i++) {
            int r = dsmpool_seg_unpin(p, atomic_load(&pins[i]));
            cr_assert(r == 0 || r == -ESTALE || r == -EINVAL, "unpin: %d %s", r, dsmpool_last_error());
        }
        int r = dsmpool_check(p);
        cr_assert_eq(r, 0, "round %d (seed %llu): %s", round, (unsigned long long)test_seed(),
                     dsmpool_last_error());
        cr_assert_eq(test_live_segments(p), 1, "round %d: only the shared segment is left", round);
        cr_assert_eq(test_pool_free(p), free0, "round %d: every block came back", round);
    }
    dsmpool_seg_detach(shared);
    dsmpool_detach(p);
}

/* A process whose main thread called pthread_exit shows as a zombie in
 * /proc while its other threads run: it is alive, and recovery must leave
 * its references alone. */
static void *hold_on(void *arg) {
    int fd = *(int *)arg;
    say(fd);
    for (;;) pause();
    return NULL;
}

Test(process, leader_exited_but_threads_live_is_not_dead, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &s), 0);
    dsmpool_handle h = dsmpool_seg_handle(s);
    int ready[2];
    cr_assert_eq(pipe(ready), 0);
    pid_t kid = fork();
    if (kid == 0) {
        dsmpool_seg *c;
        if (dsmpool_seg_attach(p, h, &c) != 0) _exit(3);
        pthread_t t;
        pthread_create(&t, NULL, hold_on, &ready[1]);
        pthread_exit(NULL); /* the leader goes; the process lives on */
    }
    hear(ready[0]);
    /* the leader a zombie, seen as such (bounded: 10 s), not a sleep that a
     * loaded machine could outlast with the leader still running */
    char path[64], st_line[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)kid);
    bool zombie = false;
    for (int i = 0; i < 10000 && !zombie; i++) {
        FILE *f = fopen(path, "r");
        const char *rp = f && fgets(st_line, sizeof st_line, f) ? strrchr(st_line, ')') : NULL;
        zombie = rp && rp[1] == ' ' && rp[2] == 'Z';
        if (f) fclose(f);
        if (!zombie) usleep(1000);
    }
    cr_assert(zombie, "the child's leader never became a zombie");
    dsmpool_seg_detach(s);
    cr_assert_eq(dsmpool_recover(p), 0);
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.segments_live, 1, "the live child's reference survived recovery");
    cr_expect_eq(st.procs_recovered, 0);
    kill(kid, SIGKILL);
    test_wait(kid);
    cr_assert_eq(dsmpool_recover(p), 0);
    cr_expect_eq(test_live_segments(p), 0, "and went with the child");
    test_check_ok(p);
    dsmpool_detach(p);
}

/* The parent destroys a segment between fork() and the child's first call:
 * the child's inherited object turns stale instead of pointing at reused
 * memory. */
Test(process, inherited_segment_destroyed_before_adoption_is_stale, .timeout = 60) {
    dsmpool *p = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool_seg *s, *other;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &s), 0);
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &other), 0);
    int go[2], done[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(done), 0);
    pid_t kid = fork();
    if (kid == 0) {
        hear(go[0]); /* the parent has destroyed s */
        if (dsmpool_recover(p) != 0) _exit(3); /* the first call: adoption */
        if (dsmpool_seg_address(s) != NULL) _exit(4);
        if (dsmpool_seg_detach(s) != -ESTALE) _exit(5);
        if (dsmpool_seg_address(other) == NULL) _exit(6); /* the other one was taken over */
        _exit(dsmpool_seg_detach(other) == 0 && dsmpool_detach(p) == 0 ? 0 : 7);
    }
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    say(go[1]);
    cr_expect_eq(test_wait(kid), 0);
    dsmpool_seg_detach(other);
    cr_expect_eq(test_live_segments(p), 0);
    test_check_ok(p);
    dsmpool_detach(p);
}
