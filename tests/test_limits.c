/*
 * test_limits.c -- the edges of memory: every path that makes memory
 * resident answers -ENOMEM where the memory cannot be had, never the OOM
 * killer or a SIGBUS, and what a failed attempt took goes back.
 *
 *   fallback        an elastic pool in a memory cgroup: segments and area
 *                   blocks beyond the pool's room do not fall back to OS
 *                   segments the cgroup cannot hold (-ENOMEM, no OOM kill);
 *                   nor does a full fixed pool
 *   give back       a refill that fails in a full tmpfs gives back what it
 *                   populated (the tmpfs's free space, the pool file's
 *                   blocks and the stats as before; dsmpool_check clean), and
 *                   one that fails for want of huge pages keeps none
 *   prefault        dsmpool_prefault leaves trimmed memory released, and in
 *                   a cgroup without room says -ENOMEM
 *   unknown         where the limit cannot be learned -- /proc hidden -- a
 *                   refill is refused unless the pool says limits_unknown_ok;
 *                   in a cgroup namespace whose mount shows the host's tree
 *                   the limit is found; a fork()ed child moved into a limited
 *                   cgroup reads its new limit at once
 *   one step        a refill stopped between reading the room and claiming
 *                   it, while another process's refill takes the room, reads
 *                   again (a forced interleaving: "resident.room.read")
 *   reuse           a reading reused (for a minute, in these tests) counts
 *                   what the pool's other processes claimed since and what
 *                   was in flight when it was read, is never a forked
 *                   child's, and in hugetlb counts the pool's populates
 *                   since: each case the OOM killer (or pages taken) without
 *                   its part
 *   clock           a process in a time namespace a day ahead does not
 *                   release memory that has been idle for milliseconds
 *   creation        a reservation whose tables the system cannot hold is
 *                   refused (MemAvailable injected through a private mount);
 *                   64 TiB is served with its tables following use, or
 *                   refused where they cannot be had
 *   tree pages      the allocator's tree pages of released memory in a full
 *                   tmpfs: -ENOMEM, no SIGBUS, nothing taken
 *   overcommit      under vm.overcommit_memory = 2 an elastic ANON
 *                   reservation is made and serves (the setting put back)
 *   hugetlb cgroup  refills in a hugetlb cgroup at its limit: -ENOMEM, no
 *                   SIGBUS, no page kept
 *
 * Each case runs in a child (test_child: it dies with the test) that
 * reports through its exit code and a pipe; the cgroups are made and
 * removed here (testlimits.h), the settings put back. Under TSan the
 * memory cgroup cases skip: its shadow memory is charged to the cgroup too.
 * The suite runs alone (meson: is_parallel false): it changes system
 * settings and fills memory up to limits.
 */
#include <criterion/criterion.h>
#include <dsmpool.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "testhooks.h"
#include "testlimits.h"

#define GIB (1ull << 30)

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* ---- running a case in a child ----------------------------------------------- */

typedef int (*case_fn)(void *arg, int out);

typedef struct case_run {
    int status;
    bool killed;   /* by the bound */
    long oom;      /* OOM kills in the cgroup, -1 if none or unreadable */
    char out[8192];
} case_run;

/* Run fn in a child, moved into cg first when cg is given; its status, what
 * it wrote, and the cgroup's OOM kills. */
static void run_case(test_cg *cg, case_fn fn, void *arg, double seconds, case_run *cr) {
    memset(cr, 0, sizeof *cr);
    cr->oom = -1;
    int go[2], out[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(out), 0);
    pid_t c = test_child();
    cr_assert_geq(c, 0);
    if (c == 0) {
        close(go[1]);
        close(out[0]);
        char b;
        if (read(go[0], &b, 1) != 1) _exit(120);
        _exit(fn(arg, out[1]));
    }
    close(go[0]);
    close(out[1]);
    int mv = cg ? test_cg_enter(cg, c) : 0;
    cr_assert_eq(write(go[1], "g", 1), 1);
    close(go[1]);
    cr->status = test_wait_bounded(c, seconds, &cr->killed);
    size_t got = 0;
    for (ssize_t k; got < sizeof cr->out - 1 && (k = read(out[0], cr->out + got, sizeof cr->out - 1 - got)) > 0;)
        got += (size_t)k;
    cr->out[got] = 0;
    close(out[0]);
    if (cg) cr->oom = test_cg_oom_kills(cg);
    cr_assert_eq(mv, 0, "could not move the child into %s", cg ? cg->dir : "");
}

/* A memory cgroup limited to bytes, or the test skips saying why. */
static void memcg(test_cg *cg, uint64_t bytes) {
    char why[600];
    if (UNDER_TSAN)
        cr_skip_test("under ThreadSanitizer its shadow memory is charged to the cgroup too: the limit is not the "
                     "pool's to reach");
    if (!test_cg_make(cg, "memory", why, sizeof why)) cr_skip_test("no memory cgroup can be made here: %s", why);
    if (test_cg_limit(cg, bytes) != 0) {
        test_cg_remove(cg);
        cr_skip_test("cannot set a memory limit in %s", cg->dir);
    }
}

/* Run fn in a child inside a memory cgroup limited to bytes, made and
 * removed here (or the test skips saying why). */
static void in_memcg(uint64_t bytes, case_fn fn, void *arg, case_run *cr) {
    test_cg cg;
    memcg(&cg, bytes);
    run_case(&cg, fn, arg, 90, cr);
    test_cg_remove(&cg);
}

/* The verdict every cgroup case shares: no OOM kill, no signal, exit 0. */
static void expect_clean(const case_run *cr, const char *what) {
    cr_log_info("%s:\n%s", what, cr->out);
    cr_expect(!cr->killed, "%s: the child ran past its bound:\n%s", what, cr->out);
    cr_expect_leq(cr->oom, 0, "%s: the cgroup's OOM killer ran (%ld kills):\n%s", what, cr->oom, cr->out);
    cr_expect_neq(cr->status, 128 + SIGKILL, "%s: the child was killed (the OOM killer):\n%s", what, cr->out);
    cr_expect_neq(cr->status, 128 + SIGBUS, "%s: SIGBUS:\n%s", what, cr->out);
    cr_expect_eq(cr->status, 0, "%s: exit %d:\n%s", what, cr->status, cr->out);
}

static dsmpool *mk(int out, size_t size, dsmpool_backing b, const char *name, size_t resident_min, bool prefault) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = size;
    cfg.backing = b;
    cfg.name = name;
    cfg.resident_min = resident_min;
    cfg.prefault = prefault;
    dsmpool *p = NULL;
    int r = dsmpool_create(&cfg, &p);
    if (r) dprintf(out, "create %zu MiB: %d %s\n", size >> 20, r, dsmpool_last_error());
    return r ? NULL : p;
}

static dsmpool_stats stats_of(dsmpool *p) {
    dsmpool_stats st;
    memset(&st, 0, sizeof st);
    dsmpool_get_stats(p, &st);
    return st;
}

/* ---- fallback: OS segments only where the cgroup has room ------------------------- */

/* Segments of seg_mib with default flags (the OS fallback allowed) until one
 * fails; exit 0 when that is -ENOMEM naming the limit, after at least
 * min_mib were served and no more than max_mib. */
typedef struct segs_arg {
    size_t pool_size, resident_min, seg_mib, min_mib, max_mib;
} segs_arg;

static int segs_until_enomem(void *arg, int out) {
    segs_arg *a = arg;
    dsmpool *p = mk(out, a->pool_size, DSMPOOL_BACKING_ANON, NULL, a->resident_min, a->resident_min == 0);
    if (!p) return 3;
    size_t served = 0;
    int r;
    dsmpool_seg *s;
    while ((r = dsmpool_seg_create(p, a->seg_mib * MIB, 0, &s)) == 0) {
        memset(dsmpool_seg_address(s), 1, dsmpool_seg_size(s));
        served += dsmpool_seg_size(s);
        if (served > a->max_mib * MIB) return 4;
    }
    char why[2048];
    snprintf(why, sizeof why, "%s", dsmpool_last_error());
    dsmpool_stats st = stats_of(p);
    dprintf(out, "served %zu MiB (%zu MiB in OS segments), then %d: %s\n", served >> 20,
            (size_t)(st.fallback_bytes >> 20), r, why);
    if (r != -ENOMEM) return 5;
    if (served < a->min_mib * MIB) return 6;
    if (!strstr(why, "cgroup") && !strstr(why, "MemAvailable")) return 7;
    if (st.room_refusals == 0) return 8;
    return 0;
}

Test(limits, os_fallback_segments_beyond_the_cgroup_are_enomem_not_the_oom_killer, .timeout = 120) {
    segs_arg a = {4 * GIB, 16 * MIB, 64, 256, 640};
    case_run cr;
    in_memcg(512 * MIB, segs_until_enomem, &a, &cr);
    expect_clean(&cr, "an elastic 4 GiB pool in 512 MiB, 64 MiB segments (exit 4 served past the limit, 5 not "
                      "-ENOMEM, 6 served too little, 7 the message names no limit, 8 no refusal counted)");
}

Test(limits, a_full_fixed_pool_falls_back_only_within_the_cgroup, .timeout = 120) {
    segs_arg a = {384 * MIB, 0, 64, 320, 640};
    case_run cr;
    in_memcg(512 * MIB, segs_until_enomem, &a, &cr);
    expect_clean(&cr, "a fixed 384 MiB pool in 512 MiB, 64 MiB segments");
}

static int area_blocks_until_enomem(void *arg, int out) {
    (void)arg;
    dsmpool *p = mk(out, 4 * GIB, DSMPOOL_BACKING_ANON, NULL, 16 * MIB, false);
    if (!p) return 3;
    dsmpool_area *ar;
    if (dsmpool_area_create(p, 0, &ar) != 0) {
        dprintf(out, "area: %s\n", dsmpool_last_error());
        return 9;
    }
    size_t served = 0;
    int r;
    dsmpool_ptr ptr;
    while ((r = dsmpool_area_alloc(ar, 8 * MIB, 0, &ptr)) == 0) {
        memset(dsmpool_area_addr(ar, ptr), 1, 8 * MIB);
        served += 8 * MIB;
        if (served > 640 * MIB) return 4;
    }
    char why[2048];
    snprintf(why, sizeof why, "%s", dsmpool_last_error());
    dsmpool_stats st = stats_of(p);
    dprintf(out, "served %zu MiB in 8 MiB blocks (%zu MiB in OS segments), then %d: %s\n", served >> 20,
            (size_t)(st.fallback_bytes >> 20), r, why);
    if (r != -ENOMEM) return 5;
    if (served < 256 * MIB) return 6;
    return 0;
}

Test(limits, os_fallback_area_blocks_beyond_the_cgroup_are_enomem_not_the_oom_killer, .timeout = 120) {
    case_run cr;
    in_memcg(512 * MIB, area_blocks_until_enomem, NULL, &cr);
    expect_clean(&cr, "an elastic 4 GiB pool in 512 MiB, 8 MiB area blocks");
}

/* ---- give back: what a failed refill populated ------------------------------------- */

/* A private /dev/shm of size MiB (a mount namespace of the child's own). */
static bool private_shm(int out, unsigned size_mib) {
    char opt[32];
    snprintf(opt, sizeof opt, "size=%um", size_mib);
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, opt) != 0) {
        dprintf(out, "no private /dev/shm: %s\n", strerror(errno));
        return false;
    }
    return true;
}

static uint64_t shm_free(void) {
    struct statvfs v;
    return statvfs("/dev/shm", &v) == 0 ? (uint64_t)v.f_bavail * v.f_frsize : 0;
}

/* Fill /dev/shm until `left` bytes are free. */
static bool shm_leave(uint64_t left) {
    int fd = open("/dev/shm/filler", O_CREAT | O_RDWR, 0600);
    if (fd < 0) return false;
    uint64_t f = shm_free();
    bool ok = f > left && posix_fallocate(fd, 0, (off_t)(f - left)) == 0;
    close(fd);
    return ok;
}

static int tmpfs_refill_gives_back(void *arg, int out) {
    (void)arg;
    if (!private_shm(out, 512)) return 2;
    dsmpool *p = mk(out, 4 * GIB, DSMPOOL_BACKING_POSIX, "/dsmpool-test-giveback", 2 * MIB, false);
    if (!p) return 3;
    if (!shm_leave(160 * MIB)) return 4;
    int fd = dsmpool_fd(p);
    struct stat s0, s1;
    fstat(fd, &s0);
    uint64_t free0 = shm_free();
    dsmpool_stats st0 = stats_of(p);
    dsmpool_seg *s;
    int r = dsmpool_seg_create(p, 256 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
    dprintf(out, "a 256 MiB segment with %llu MiB of the tmpfs free: %d %s\n", (unsigned long long)(free0 >> 20), r,
            dsmpool_last_error());
    if (r != -ENOMEM) return 5;
    fstat(fd, &s1);
    uint64_t free1 = shm_free();
    dsmpool_stats st1 = stats_of(p);
    dprintf(out, "after: the tmpfs has %llu MiB free (was %llu), the pool file %lld KiB (was %lld), released "
            "%zu MiB (was %zu), given back %llu MiB\n", (unsigned long long)(free1 >> 20),
            (unsigned long long)(free0 >> 20), (long long)s1.st_blocks / 2, (long long)s0.st_blocks / 2,
            st1.released_bytes >> 20, st0.released_bytes >> 20, (unsigned long long)(st1.refill_given_back >> 20));
    if (free1 + 4 * MIB < free0) return 6;              /* the tmpfs stays full */
    if (s1.st_blocks > s0.st_blocks + 8192) return 7;    /* (4 MiB of slack) the file kept pages */
    if (st1.released_bytes != st0.released_bytes) return 8;
    if (st1.refill_given_back == 0) return 9;
    r = dsmpool_check(p);
    if (r) dprintf(out, "check: %s\n", dsmpool_last_error());
    if (r) return 10;
    /* the memory is still usable: a segment that fits */
    if (dsmpool_seg_create(p, 64 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s) != 0) return 11;
    memset(dsmpool_seg_address(s), 3, 64 * MIB);
    dsmpool_seg_detach(s);
    return dsmpool_destroy(p) ? 12 : 0;
}

/* palloc.c [lazy tree]: the allocator's tree pages of a released granule
 * are made resident, under the room rules, before the allocation that
 * opens its nodes writes them: in a full tmpfs that is -ENOMEM naming the
 * tables, never a SIGBUS (the write of a word on a page the tmpfs cannot
 * give), and nothing is taken; with room again it serves. */
/* One sub-pool (the cases below pick granules), POSIX, elastic, 2 MiB
 * resident. */
static dsmpool *mk_one(int out, size_t size, const char *name) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = size;
    cfg.backing = DSMPOOL_BACKING_POSIX;
    cfg.name = name;
    cfg.resident_min = 2 * MIB;
    cfg.numa = DSMPOOL_NUMA_OFF;
    dsmpool *p = NULL;
    int r = dsmpool_create(&cfg, &p);
    if (r) dprintf(out, "create %zu MiB: %d %s\n", size >> 20, r, dsmpool_last_error());
    return r ? NULL : p;
}

static int tmpfs_tree_page(void *arg, int out) {
    (void)arg;
    if (!private_shm(out, 64)) return 2; /* a container's /dev/shm */
    dsmpool *p = mk_one(out, 4 * GIB, "/dsmpool-test-treepage");
    if (!p) return 3;
    dsmpool_seg *warm, *s;
    /* the one resident granule, taken whole (warm memory first) */
    if (dsmpool_seg_create(p, 2 * MIB, DSMPOOL_SEG_NO_FALLBACK, &warm) != 0) return 4;
    dsmpool_stats st0 = stats_of(p);
    if (!shm_leave(0)) return 5;
    dp_pa *pa = &p->pa[0];
    uint64_t g = pa->count[1] - 8, f; /* its page of leaves is no resident granule's */
    if (!(dp_load_relaxed(&p->res[g]) & DP_RES_NOTREE)) return 13;
    /* a claim of 64 KiB there opens its nodes; so does a search that
     * starts half way along (the last CPU's start), finding no warm memory */
    int r = dp_pa_claim(pa, g << 9, 4, dp_owner(p));
    dprintf(out, "a claim of 64 KiB with the tmpfs full: %d %s\n", r, dsmpool_last_error());
    if (r != -ENOMEM) return 6;
    if (!strstr(dsmpool_last_error(), "allocator's tables")) return 7;
    if (pa->nhints >= 2) {
        r = dp_pa_alloc(pa, 4, dp_owner(p), pa->nhints - 1, &f);
        dprintf(out, "an allocation of 64 KiB from CPU %u: %d %s\n", pa->nhints - 1, r, dsmpool_last_error());
        if (r != -ENOMEM) return 6;
        if (!strstr(dsmpool_last_error(), "allocator's tables")) return 7;
    }
    /* and through the API: -ENOMEM, for the tables or for the data */
    r = dsmpool_seg_create(p, 64 * KIB, DSMPOOL_SEG_NO_FALLBACK, &s);
    dprintf(out, "a 64 KiB segment: %d %s\n", r, dsmpool_last_error());
    if (r != -ENOMEM) return 6;
    dsmpool_stats st1 = stats_of(p);
    if (st1.released_bytes != st0.released_bytes || st1.warm_free_bytes != st0.warm_free_bytes) return 8;
    r = dsmpool_check(p);
    if (r) dprintf(out, "check: %s\n", dsmpool_last_error());
    if (r) return 9;
    unlink("/dev/shm/filler");
    r = dp_pa_claim(pa, g << 9, 4, dp_owner(p));
    if (r) dprintf(out, "with room again: %s\n", dsmpool_last_error());
    if (r) return 10;
    if (dp_load_relaxed(&p->res[g]) & DP_RES_NOTREE) return 14;
    if (dp_pa_free(pa, g << 9, 4) != 0) return 15;
    r = dsmpool_seg_create(p, 64 * KIB, DSMPOOL_SEG_NO_FALLBACK, &s);
    if (r) dprintf(out, "a segment with room again: %s\n", dsmpool_last_error());
    if (r) return 10;
    memset(dsmpool_seg_address(s), 5, 64 * KIB);
    dsmpool_seg_detach(s);
    dsmpool_seg_detach(warm);
    if (dsmpool_check(p) != 0) return 11;
    return dsmpool_destroy(p) ? 12 : 0;
}

Test(limits, a_tree_page_a_full_tmpfs_cannot_give_is_enomem_not_sigbus, .timeout = 120) {
    case_run cr;
    run_case(NULL, tmpfs_tree_page, NULL, 90, &cr);
    if (cr.status == 2) cr_skip_test("no private /dev/shm here (not root?): %s", cr.out);
    expect_clean(&cr, "a POSIX elastic 4 GiB pool in a full 64 MiB tmpfs (exit 6 not -ENOMEM, 7 the message does "
                      "not name the tables, 8 the stats moved, 9 check failed, 10 no allocation with room again, "
                      "13 the granule not marked \"no tree\" at creation, 14 still marked once its pages are "
                      "resident, 15 the claim not freed)");
}

/* The leak sweep frees a dead process's block as the unit it may have
 * been allocated as, trying a leaf's and a 2 MiB node's first: in a
 * granule whose tree pages were never made resident it must not read them
 * (a SIGBUS in the recovering process when the tmpfs is full: found by
 * review). The block: 32 MiB taken in released memory by a process killed
 * before its refill claimed the room. */
static void die_at_room(const char *point) { /* a fresh reading or one reused ([room reuse]): not yet claimed */
    if (!strcmp(point, "resident.room.read") || !strcmp(point, "resident.room.reused")) raise(SIGKILL);
}

static int sweep_over_untouched_tree(void *arg, int out) {
    (void)arg;
    if (!private_shm(out, 64)) return 2;
    dsmpool *p = mk_one(out, 1 * GIB, "/dsmpool-test-sweeptree");
    if (!p) return 3;
    pid_t c = fork();
    if (c == 0) {
        dsmpool_seg *w, *s;
        if (dsmpool_seg_create(p, 2 * MIB, DSMPOOL_SEG_NO_FALLBACK, &w) != 0) _exit(3);
        dp_inject_fn = die_at_room;
        dsmpool_seg_create(p, 32 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
        _exit(4);
    }
    int st = 0;
    waitpid(c, &st, 0);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
        dprintf(out, "the child was not killed at the room's reading (status %d)\n", st);
        return 4;
    }
    if (!shm_leave(0)) return 5;
    int r = dsmpool_recover(p);
    dprintf(out, "recovery with the tmpfs full: %d %s\n", r, r < 0 ? dsmpool_last_error() : "");
    if (r < 0) return 6;
    r = dsmpool_check(p);
    if (r) dprintf(out, "check: %s\n", dsmpool_last_error());
    if (r) return 7;
    unlink("/dev/shm/filler");
    return dsmpool_destroy(p) ? 8 : 0;
}

Test(limits, the_leak_sweep_reads_no_tree_page_of_released_memory, .timeout = 120) {
    case_run cr;
    run_case(NULL, sweep_over_untouched_tree, NULL, 90, &cr);
    if (cr.status == 2) cr_skip_test("no private /dev/shm here (not root?): %s", cr.out);
    expect_clean(&cr, "a dead process's 32 MiB block in released memory, swept with the tmpfs full (SIGBUS: the "
                      "sweep read a tree page never made resident; exit 4 the child not killed, 6 recovery failed, "
                      "7 check failed)");
}

Test(limits, a_refill_that_fails_in_a_full_tmpfs_gives_its_pages_back, .timeout = 120) {
    case_run cr;
    run_case(NULL, tmpfs_refill_gives_back, NULL, 90, &cr);
    if (cr.status == 2) cr_skip_test("no private /dev/shm here (not root?): %s", cr.out);
    expect_clean(&cr, "a POSIX elastic pool in a 512 MiB tmpfs with 160 MiB left (exit 5 not -ENOMEM, 6 the tmpfs "
                      "stays full, 7 the pool file kept the pages, 8 the stats moved, 9 nothing given back, 10 check "
                      "failed, 11 no memory left to use)");
}

static int huge_refill_keeps_nothing(void *arg, int out) {
    (void)arg;
    /* the host may hold free huge pages of its own beside the test's 20
     * (another program's, or left reserved): the pool and the segment are
     * sized by what is free, so that the segment needs more than that */
    long before = test_huge_read(TEST_FREE_HUGE);
    if (before < 0) return 3;
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = (size_t)(before + 64) * 2 * MIB > 512 * MIB ? (size_t)(before + 64) * 2 * MIB : 512 * MIB;
    cfg.huge_pages = DSMPOOL_HUGE_ON;
    cfg.idle_release_ms = 60000; /* elastic: nothing but the tables resident */
    dsmpool *p;
    if (dsmpool_create(&cfg, &p) != 0) {
        dprintf(out, "create: %s\n", dsmpool_last_error());
        return 3;
    }
    long free0 = test_huge_read(TEST_FREE_HUGE);
    size_t more = (size_t)(free0 + 8) * 2 * MIB;
    if (more < 64 * MIB) more = 64 * MIB;
    dsmpool_seg *s;
    int r = dsmpool_seg_create(p, more, DSMPOOL_SEG_NO_FALLBACK, &s);
    long free1 = test_huge_read(TEST_FREE_HUGE);
    dprintf(out, "a %zu MiB segment with %ld huge pages free: %d %s; %ld free after\n", more >> 20, free0, r,
            dsmpool_last_error(), free1);
    if (r != -ENOMEM) return 5;
    if (free1 != free0) return 6;
    if (dsmpool_check(p) != 0) return 7;
    /* what fits is served, from those same pages */
    if (dsmpool_seg_create(p, (size_t)free0 * 2 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s) != 0) {
        dprintf(out, "%ld MiB: %s\n", free0 * 2, dsmpool_last_error());
        return 8;
    }
    memset(dsmpool_seg_address(s), 1, dsmpool_seg_size(s));
    return dsmpool_detach(p) ? 9 : 0;
}

/* Run fn in a child with n more 2 MiB pages reserved and no surplus pages
 * on demand (or the test skips saying why); both put back after. */
static void run_with_huge(long n, case_fn fn, case_run *cr) {
    long old, got = test_huge_reserve(n, &old);
    if (got < n) {
        test_huge_restore(old);
        cr_skip_test("%ld huge pages of 2 MiB could not be reserved (%ld; not root, or memory too fragmented)", n, got);
    }
    const char *ovc = "/proc/sys/vm/nr_overcommit_hugepages";
    long old_ovc = test_huge_read(ovc);
    if (old_ovc > 0) test_write_file(ovc, "0"); /* no surplus pages on demand */
    run_case(NULL, fn, NULL, 90, cr);
    test_huge_restore(old);
    if (old_ovc > 0) {
        char v[32];
        snprintf(v, sizeof v, "%ld", old_ovc);
        test_write_file(ovc, v);
    }
}

Test(limits, a_refill_short_of_huge_pages_keeps_none, .timeout = 120) {
    case_run cr;
    run_with_huge(20, huge_refill_keeps_nothing, &cr);
    expect_clean(&cr, "an elastic hugetlb pool, a segment of more pages than are free (exit 5 not -ENOMEM, 6 pages "
                      "kept, 7 check failed, 8 what fits not served)");
}

/* ---- prefault ------------------------------------------------------------------------ */

Test(limits, prefault_leaves_trimmed_memory_released, .timeout = 60) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = 256 * MIB;
    cfg.backing = DSMPOOL_BACKING_MEMFD;
    dsmpool *p;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "%s", dsmpool_last_error());
    size_t rel = 0;
    cr_assert_eq(dsmpool_trim(p, 2 * MIB, &rel), 0, "%s", dsmpool_last_error());
    struct stat s0, s1;
    cr_assert_eq(fstat(dsmpool_fd(p), &s0), 0);
    dsmpool_stats st0 = stats_of(p);
    cr_assert_eq(dsmpool_prefault(p), 0, "%s", dsmpool_last_error());
    cr_assert_eq(fstat(dsmpool_fd(p), &s1), 0);
    dsmpool_stats st1 = stats_of(p);
    cr_expect_leq(s1.st_blocks, s0.st_blocks, "trimmed to %zu MiB (released %zu MiB): prefault brought the file "
                  "from %lld to %lld KiB", st0.resident_bytes >> 20, rel >> 20, (long long)s0.st_blocks / 2,
                  (long long)s1.st_blocks / 2);
    cr_expect_eq(st1.released_bytes, st0.released_bytes);
    test_check_ok(p);
    /* and a trim after it has nothing more to give: what it released is still released */
    size_t again = 0;
    cr_assert_eq(dsmpool_trim(p, 2 * MIB, &again), 0);
    cr_expect_eq(again, 0);
    /* the memory comes back when asked for */
    size_t done = 0;
    cr_assert_eq(dsmpool_prefault_free(p, SIZE_MAX, &done), 0, "%s", dsmpool_last_error());
    cr_expect_eq(done, rel);
    dsmpool_detach(p);
}

static int prefault_in_cgroup(void *arg, int out) {
    (void)arg;
    dsmpool *p = mk(out, 768 * MIB, DSMPOOL_BACKING_ANON, NULL, 0, false); /* not prefaulted: not charged yet */
    if (!p) return 3;
    int r = dsmpool_prefault(p);
    dprintf(out, "prefault of 768 MiB in 512 MiB: %d %s\n", r, dsmpool_last_error());
    if (r != -ENOMEM) return 5;
    if (!strstr(dsmpool_last_error(), "cgroup")) return 6;
    /* what was populated before the room ran out stays resident (the pool
     * says so) and the rest can still be used; a pool that fits prefaults */
    dsmpool_detach(p);
    dsmpool *q = mk(out, 64 * MIB, DSMPOOL_BACKING_ANON, NULL, 0, false);
    if (!q || dsmpool_prefault(q) != 0) return 7;
    return 0;
}

Test(limits, prefault_without_room_is_enomem_not_the_oom_killer, .timeout = 120) {
    case_run cr;
    in_memcg(512 * MIB, prefault_in_cgroup, NULL, &cr);
    expect_clean(&cr, "dsmpool_prefault of an unprefaulted 768 MiB pool in 512 MiB (exit 5 not -ENOMEM, 6 the "
                      "message names no cgroup, 7 a pool that fits did not prefault)");
}

/* ---- limits that cannot be learned -------------------------------------------------- */

static int hidden_proc(void *arg, int out) {
    (void)arg;
    dsmpool *p = mk(out, 2 * GIB, DSMPOOL_BACKING_ANON, NULL, 8 * MIB, false);
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = 2 * GIB;
    cfg.resident_min = 8 * MIB;
    cfg.limits_unknown_ok = true;
    dsmpool *ok = NULL;
    if (!p || dsmpool_create(&cfg, &ok) != 0) return 3;
    /* /proc hidden: a tmpfs over it, in a mount namespace of our own */
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/proc", "tmpfs", 0, "size=1m") != 0) {
        dprintf(out, "cannot hide /proc: %s\n", strerror(errno));
        return 2;
    }
    dsmpool_seg *s;
    int r = dsmpool_seg_create(p, 64 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
    dprintf(out, "a 64 MiB segment with /proc hidden: %d %s\n", r, dsmpool_last_error());
    if (r != -ENOMEM) return 5;
    if (!strstr(dsmpool_last_error(), "cannot be learned") || !strstr(dsmpool_last_error(), "limits_unknown_ok"))
        return 6;
    r = dsmpool_seg_create(p, 64 * MIB, 0, &s); /* nor an OS fallback segment */
    dprintf(out, "and with the OS fallback: %d %s\n", r, dsmpool_last_error());
    if (r != -ENOMEM) return 7;
    /* the pool that accepts the risk serves (well within the limit) */
    r = dsmpool_seg_create(ok, 16 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
    dprintf(out, "limits_unknown_ok, 16 MiB: %d %s\n", r, r ? dsmpool_last_error() : "");
    if (r != 0) return 8;
    memset(dsmpool_seg_address(s), 1, 16 * MIB);
    return 0;
}

Test(limits, with_proc_hidden_a_refill_is_refused_not_guessed_unlimited, .timeout = 120) {
    case_run cr;
    in_memcg(256 * MIB, hidden_proc, NULL, &cr);
    if (cr.status == 2) cr_skip_test("cannot hide /proc here: %s", cr.out);
    expect_clean(&cr, "an elastic pool in 256 MiB with /proc hidden (exit 5 not -ENOMEM, 6 the message does not "
                      "say why or what to do, 7 an OS segment made, 8 limits_unknown_ok refused)");
}

typedef struct until_arg {
    size_t seg_mib, min_mib, max_mib;
    bool cgroupns;
} until_arg;

static int refills_until_enomem(void *arg, int out) {
    until_arg *a = arg;
    if (a->cgroupns && unshare(CLONE_NEWCGROUP) != 0) {
        dprintf(out, "unshare(CLONE_NEWCGROUP): %s\n", strerror(errno));
        return 2;
    }
    if (a->cgroupns) {
        char cg[2048] = "";
        test_read_file("/proc/self/cgroup", cg, sizeof cg);
        dprintf(out, "in its own cgroup namespace, /proc/self/cgroup says:\n%s", cg);
    }
    dsmpool *p = mk(out, 4 * GIB, DSMPOOL_BACKING_ANON, NULL, 8 * MIB, false);
    if (!p) return 3;
    size_t served = 0;
    int r;
    dsmpool_seg *s;
    while ((r = dsmpool_seg_create(p, a->seg_mib * MIB, DSMPOOL_SEG_NO_FALLBACK, &s)) == 0) {
        memset(dsmpool_seg_address(s), 1, dsmpool_seg_size(s));
        served += dsmpool_seg_size(s);
        if (served > a->max_mib * MIB) return 4;
    }
    dprintf(out, "served %zu MiB, then %d: %s\n", served >> 20, r, dsmpool_last_error());
    if (r != -ENOMEM) return 5;
    if (served < a->min_mib * MIB) return 6;
    return 0;
}

Test(limits, in_a_cgroup_namespace_showing_the_hosts_tree_the_limit_is_found, .timeout = 120) {
    until_arg a = {32, 96, 320, true};
    case_run cr;
    in_memcg(256 * MIB, refills_until_enomem, &a, &cr);
    if (cr.status == 2) cr_skip_test("no cgroup namespaces here: %s", cr.out);
    expect_clean(&cr, "32 MiB segments in a 256 MiB cgroup, from a cgroup namespace of its own (exit 4 served past "
                      "the limit, 5 not -ENOMEM, 6 served too little)");
}

/* A process that made its cgroup namespace in cgroup A and then moved into
 * B, A's sibling: /proc/self/cgroup says "/../B", a cgroup outside its
 * namespace's root. Its limit must be found or the memory refused, never
 * taken for none (the mount mapped "/../B" to a directory that is not
 * there, every level read as "no limit", and refills went to the OOM
 * killer). */
typedef struct outside_arg {
    test_cg *a, *b;
    bool remount; /* then mount the hierarchy afresh, as a container does: its root is the namespace's */
} outside_arg;

static int moved_outside_its_namespace(void *arg, int out) {
    outside_arg *o = arg;
    if (test_cg_set(o->a, "cgroup.procs", "0") != 0) return 2;
    if (unshare(CLONE_NEWCGROUP) != 0) {
        dprintf(out, "unshare(CLONE_NEWCGROUP): %s\n", strerror(errno));
        return 2;
    }
    if (test_cg_set(o->b, "cgroup.procs", "0") != 0) return 3;
    if (o->remount) {
        const char *at = o->b->v2 ? o->b->root : "/sys/fs/cgroup/memory";
        /* (the host's mount goes first: v1 refuses a second mount of a
         * hierarchy on the same place) */
        if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
            umount2(at, MNT_DETACH) != 0 ||
            mount("cgroup", at, o->b->v2 ? "cgroup2" : "cgroup", 0, o->b->v2 ? NULL : "memory") != 0) {
            dprintf(out, "mounting the hierarchy afresh at %s: %s\n", at, strerror(errno));
            return 2;
        }
        char mi[8192] = "";
        test_read_file("/proc/self/mountinfo", mi, sizeof mi);
        for (char *l = strtok(mi, "\n"); l; l = strtok(NULL, "\n"))
            if (strstr(l, at)) dprintf(out, "mountinfo: %s\n", l);
    }
    char cg[2048] = "";
    test_read_file("/proc/self/cgroup", cg, sizeof cg);
    dprintf(out, "moved out of its cgroup namespace's root, /proc/self/cgroup says:\n%s", cg);
    dsmpool *p = mk(out, 4 * GIB, DSMPOOL_BACKING_ANON, NULL, 8 * MIB, false);
    if (!p) return 0; /* refused at creation (mk said why): as good as a refused refill */
    size_t served = 0;
    int r;
    dsmpool_seg *s;
    while ((r = dsmpool_seg_create(p, 32 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s)) == 0) {
        memset(dsmpool_seg_address(s), 1, dsmpool_seg_size(s));
        served += dsmpool_seg_size(s);
        if (served > 320 * MIB) return 4;
    }
    dprintf(out, "served %zu MiB, then %d: %s\n", served >> 20, r, dsmpool_last_error());
    return r == -ENOMEM ? 0 : 5;
}

static void outside(bool remount) {
    test_cg a, b;
    char why[600];
    memcg(&b, 256 * MIB);
    if (!test_cg_make(&a, "memory", why, sizeof why) || !strcmp(a.dir, b.dir)) {
        test_cg_remove(&b);
        cr_skip_test("no second memory cgroup: %s", why);
    }
    outside_arg o = {&a, &b, remount};
    case_run cr;
    run_case(NULL, moved_outside_its_namespace, &o, 90, &cr);
    cr.oom = test_cg_oom_kills(&b);
    test_cg_remove(&b);
    test_cg_remove(&a);
    if (cr.status == 2) cr_skip_test("no cgroup namespaces here: %s", cr.out);
    expect_clean(&cr, remount ? "the same, with the hierarchy mounted afresh in the namespace (exit 3 not moved, "
                                "4 served past the limit, 5 not -ENOMEM)"
                              : "a 4 GiB elastic pool in a 256 MiB cgroup outside the process's cgroup namespace "
                                "(exit 3 not moved, 4 served past the limit, 5 not -ENOMEM)");
}

Test(limits, a_process_moved_outside_its_cgroup_namespace_is_refused_or_limited, .timeout = 120) {
    outside(false);
}

Test(limits, moved_outside_its_cgroup_namespace_with_the_hierarchy_mounted_there, .timeout = 120) {
    outside(true);
}

/* The parent refills (the room read, no limit found), then its fork()ed
 * child is moved into a 256 MiB cgroup and asks for 768 MiB at once. */
typedef struct moved_arg {
    test_cg *cg;
} moved_arg;

static int forked_then_moved(void *arg, int out) {
    moved_arg *a = arg;
    dsmpool *p = mk(out, 4 * GIB, DSMPOOL_BACKING_ANON, NULL, 8 * MIB, false);
    /* the parent's reading (of no limit) would hold for a minute
     * (resident.c [room reuse]): never in the child */
    dp_inject_room_reuse_ns = 60000000000ull;
    dsmpool_seg *s;
    if (!p || dsmpool_seg_create(p, 64 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s) != 0) return 3;
    dsmpool_seg_detach(s);
    int go[2];
    if (pipe(go) != 0) return 2;
    pid_t c = fork();
    if (c == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char b;
        if (read(go[0], &b, 1) != 1) _exit(120);
        int r = dsmpool_seg_create(p, 768 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
        dprintf(out, "the child, moved into 256 MiB, asks for 768 MiB: %d %s\n", r, dsmpool_last_error());
        if (r == 0) memset(dsmpool_seg_address(s), 1, 768 * MIB);
        _exit(r == -ENOMEM ? 0 : 5);
    }
    int mv = test_cg_enter(a->cg, c);
    if (write(go[1], "g", 1) != 1) return 2;
    int st = test_wait_bounded(c, 60, NULL);
    dprintf(out, "the child: %d (moved: %d)\n", st, mv);
    return mv ? 4 : st;
}

Test(limits, a_forked_child_moved_into_a_limited_cgroup_reads_its_new_limit, .timeout = 120) {
    test_cg cg;
    memcg(&cg, 256 * MIB);
    moved_arg a = {&cg};
    case_run cr;
    run_case(NULL, forked_then_moved, &a, 90, &cr);
    long oom = test_cg_oom_kills(&cg);
    test_cg_remove(&cg);
    cr.oom = oom;
    expect_clean(&cr, "a fork()ed child moved into 256 MiB (exit 5 not -ENOMEM, 137 the OOM killer)");
}

/* ---- one step: the room read and its claim ----------------------------------------- */

static int stop_fd[2] = {-1, -1}, stopped_fd[2] = {-1, -1};

static void stop_at_room(const char *point) {
    static int once;
    if (strcmp(point, "resident.room.read") || once++) return;
    char b = 's';
    if (write(stopped_fd[1], &b, 1) != 1) _exit(121);
    if (read(stop_fd[0], &b, 1) != 1) _exit(122);
}

/* B: once go says so, takes a 300 MiB segment and touches it, says so on
 * done_w, and holds it until go is closed (exit 0; 6 when it was refused). */
static pid_t fork_taker(dsmpool *p, int go[2], int done_w, int out, const char *what) {
    pid_t B = fork();
    if (B != 0) return B;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(go[1]);
    char b;
    if (read(go[0], &b, 1) != 1) _exit(120);
    dsmpool_seg *s;
    int r = dsmpool_seg_create(p, 300 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
    dprintf(out, "%s: %d %s\n", what, r, r ? dsmpool_last_error() : "");
    if (r == 0) memset(dsmpool_seg_address(s), 1, 300 * MIB);
    if (write(done_w, "d", 1) != 1) _exit(121);
    if (read(go[0], &b, 1) != 1) _exit(r == 0 ? 0 : 6); /* holds its segment until go is closed */
    _exit(7);
}

typedef struct two_arg {
    test_cg *cg;
} two_arg;

/* A (stopped after reading the room) and B, both in a 512 MiB cgroup, each
 * ask for 300 MiB; B runs to the end while A is stopped. */
static int two_refills(void *arg, int out) {
    two_arg *a = arg;
    dsmpool *p = mk(out, 4 * GIB, DSMPOOL_BACKING_ANON, NULL, 8 * MIB, false);
    if (!p) return 3;
    if (pipe(stop_fd) != 0 || pipe(stopped_fd) != 0) return 2;
    int bgo[2], bdone[2];
    if (pipe(bgo) != 0 || pipe(bdone) != 0) return 2;
    pid_t A = fork();
    if (A == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(bgo[1]);
        dp_inject_fn = stop_at_room;
        dsmpool_seg *s;
        int r = dsmpool_seg_create(p, 300 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
        dprintf(out, "A, let go after B took its room: %d %s\n", r, dsmpool_last_error());
        if (r == 0) memset(dsmpool_seg_address(s), 1, 300 * MIB);
        _exit(r == -ENOMEM ? 0 : 5);
    }
    pid_t B = fork_taker(p, bgo, bdone[1], out, "B, while A is stopped");
    int mv = test_cg_enter(a->cg, A) | test_cg_enter(a->cg, B);
    char b;
    /* A reaches the point (its first populate), B runs whole, then A goes on */
    if (read(stopped_fd[0], &b, 1) != 1) return 7;
    if (write(bgo[1], "g", 1) != 1 || read(bdone[0], &b, 1) != 1) return 8;
    if (write(stop_fd[1], "g", 1) != 1) return 9;
    int sa = test_wait_bounded(A, 60, NULL);
    close(bgo[1]);
    int sb = test_wait_bounded(B, 60, NULL);
    dprintf(out, "A: %d, B: %d (moved: %d)\n", sa, sb, mv);
    return mv ? 4 : sa ? 10 + (sa & 0x7f) % 100 : sb ? 20 : 0;
}

Test(limits, a_refill_stopped_after_reading_the_room_reads_again_when_another_took_it, .timeout = 120) {
    test_cg cg;
    memcg(&cg, 512 * MIB);
    two_arg a = {&cg};
    case_run cr;
    run_case(NULL, two_refills, &a, 100, &cr);
    long oom = test_cg_oom_kills(&cg);
    test_cg_remove(&cg);
    cr.oom = oom;
    expect_clean(&cr, "two refills of 300 MiB in 512 MiB, the first stopped between its reading and its claim "
                      "(exit 15: A was served; 47 or 57: A was killed -- by the OOM killer)");
}

/* ---- a reading reused ([room reuse]) ------------------------------------------------- */

static int room_fresh, room_reused;

static void count_room(const char *point) {
    if (!strcmp(point, "resident.room.read")) room_fresh++;
    else if (!strcmp(point, "resident.room.reused")) room_reused++;
}

/* In a 512 MiB cgroup, readings reused for a minute: A refills 16 MiB (a
 * reading), then 16 MiB more (that reading reused); B, another process of
 * the pool, takes 300 MiB; then A asks for 300 MiB. A's reading still
 * shows room for it, and only the claims counted since say it is gone. */
static int reuse_after_another(void *arg, int out) {
    (void)arg;
    dsmpool *p = mk(out, 4 * GIB, DSMPOOL_BACKING_ANON, NULL, 8 * MIB, false);
    if (!p) return 3;
    int go[2], done[2];
    if (pipe(go) != 0 || pipe(done) != 0) return 2;
    pid_t B = fork_taker(p, go, done[1], out, "B takes 300 MiB");
    close(go[0]);
    dp_inject_room_reuse_ns = 60000000000ull;
    dp_inject_fn = count_room;
    dsmpool_seg *s1, *s2, *s3;
    if (dsmpool_seg_create(p, 16 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s1) != 0) return 3;
    int f1 = room_fresh, u1 = room_reused;
    if (dsmpool_seg_create(p, 16 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s2) != 0) return 3;
    int f2 = room_fresh, u2 = room_reused;
    dprintf(out, "A, 16 MiB twice: %d then %d readings, %d then %d reused\n", f1, f2, u1, u2);
    if (f1 < 1 || f2 != f1 || u2 <= u1) return 8; /* the second refill reused the first's reading */
    char b;
    if (write(go[1], "g", 1) != 1 || read(done[0], &b, 1) != 1) return 9;
    dsmpool_stats st0 = stats_of(p);
    int r = dsmpool_seg_create(p, 300 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s3);
    dprintf(out, "A, after B, asks for 300 MiB: %d %s (%d readings, %d reused)\n", r, dsmpool_last_error(),
            room_fresh, room_reused);
    dsmpool_stats st1 = stats_of(p);
    dprintf(out, "%llu bytes counted given back\n", (unsigned long long)(st1.refill_given_back - st0.refill_given_back));
    /* refused before its populate: nothing was got, nothing is counted */
    if (st1.refill_given_back != st0.refill_given_back) return 11;
    if (r == 0) memset(dsmpool_seg_address(s3), 1, 300 * MIB);
    dp_inject_fn = NULL;
    close(go[1]);
    int sb = test_wait_bounded(B, 60, NULL);
    dprintf(out, "B: %d\n", sb);
    if (r != -ENOMEM) return 5;
    if (room_fresh == f2) return 10; /* refused on a fresh reading */
    return sb ? 20 : 0;
}

/* B stops once its claim of more than 100 MiB is made, its memory not yet
 * charged. */
static dsmpool *owed_pool;

/* Stop once, at point, when this process's slot word holds at least
 * bytes in flight: say so on stopped_fd, go on when stop_fd says. */
static void stop_in_flight(const char *point, const char *at, uint64_t bytes) {
    static int once;
    if (strcmp(point, at) || once) return;
    if (dp_load_relaxed(&owed_pool->fill[owed_pool->slot]) < bytes) return;
    once = 1;
    char b = 's';
    if (write(stopped_fd[1], &b, 1) != 1) _exit(121);
    if (read(stop_fd[0], &b, 1) != 1) _exit(122);
}

static void stop_after_claim(const char *point) { stop_in_flight(point, "resident.room.claimed", 100 * MIB); }

/* As above, but B's claim of 300 MiB is made before A's reading and its
 * memory charged after it: A's reading owes those bytes. */
static int reuse_owes_the_claims_in_flight(void *arg, int out) {
    (void)arg;
    dsmpool *p = owed_pool = mk(out, 4 * GIB, DSMPOOL_BACKING_ANON, NULL, 8 * MIB, false);
    if (!p) return 3;
    if (pipe(stop_fd) != 0 || pipe(stopped_fd) != 0) return 2;
    int hold[2];
    if (pipe(hold) != 0) return 2;
    pid_t B = fork();
    if (B == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(hold[1]);
        dp_inject_fn = stop_after_claim;
        dsmpool_seg *s;
        int r = dsmpool_seg_create(p, 300 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
        dprintf(out, "B, let go after A's reading, takes 300 MiB: %d %s\n", r, r ? dsmpool_last_error() : "");
        if (r == 0) memset(dsmpool_seg_address(s), 1, 300 * MIB);
        if (write(stopped_fd[1], "d", 1) != 1) _exit(121);
        char b;
        if (read(hold[0], &b, 1) != 1) _exit(r == 0 ? 0 : 6); /* holds it until A is done */
        _exit(7);
    }
    close(hold[0]);
    char b;
    if (read(stopped_fd[0], &b, 1) != 1) return 9; /* B holds its claim */
    dp_inject_room_reuse_ns = 60000000000ull;
    dp_inject_fn = count_room;
    dsmpool_seg *s1, *s3;
    int r1 = dsmpool_seg_create(p, 16 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s1);
    int f1 = room_fresh, u1 = room_reused;
    dsmpool_seg *s2;
    int r2 = dsmpool_seg_create(p, 16 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s2);
    dprintf(out, "A, while B's claim is in flight, 16 MiB twice: %d %d (%d then %d readings, %d then %d reused)\n",
            r1, r2, f1, room_fresh, u1, room_reused);
    if (r1 != 0 || r2 != 0 || f1 < 1 || room_fresh != f1 || room_reused <= u1) return 8; /* the reading reused */
    if (write(stop_fd[1], "g", 1) != 1 || read(stopped_fd[0], &b, 1) != 1) return 9; /* B charged */
    int r = dsmpool_seg_create(p, 300 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s3);
    dprintf(out, "A, after B, asks for 300 MiB: %d %s (%d readings, %d reused)\n", r, dsmpool_last_error(),
            room_fresh, room_reused);
    if (r == 0) memset(dsmpool_seg_address(s3), 1, 300 * MIB);
    dp_inject_fn = NULL;
    close(hold[1]);
    int sb = test_wait_bounded(B, 60, NULL);
    dprintf(out, "B: %d\n", sb);
    if (r != -ENOMEM) return 5;
    if (room_fresh == f1) return 10; /* refused on a fresh reading */
    return sb ? 20 : 0;
}

Test(limits, a_reused_room_reading_owes_the_claims_in_flight_when_it_was_read, .timeout = 120) {
    test_cg cg;
    memcg(&cg, 512 * MIB);
    case_run cr;
    run_case(&cg, reuse_owes_the_claims_in_flight, NULL, 100, &cr);
    expect_clean(&cr, "A's reading made while B's 300 MiB claim was in flight, reused after B's memory was "
                      "charged (exit 5: A was served; 8: the reading was not reused at all; 137: the OOM killer)");
    test_cg_remove(&cg);
}

Test(limits, a_reused_room_reading_counts_what_others_claimed_since, .timeout = 120) {
    test_cg cg;
    memcg(&cg, 512 * MIB);
    case_run cr;
    run_case(&cg, reuse_after_another, NULL, 100, &cr);
    expect_clean(&cr, "A's reading reused after B took 300 MiB of 512 (exit 5: A was served; 8: the reading was "
                      "not reused; 11: a refusal counted as given back; 137: the OOM killer)");
    test_cg_remove(&cg);
}

/* An elastic pool of 512 MiB in 2 MiB hugetlb pages, or NULL (said on out). */
static dsmpool *mk_huge512(int out) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = 512 * MIB;
    cfg.huge_pages = DSMPOOL_HUGE_ON;
    cfg.idle_release_ms = 60000;
    dsmpool *p;
    if (dsmpool_create(&cfg, &p) == 0) return p;
    dprintf(out, "create: %s\n", dsmpool_last_error());
    return NULL;
}

/* After another process (its exit status: other) took all but a few free
 * pages, A asks 16 MiB ahead: -ENOMEM, every decision on a fresh reading,
 * and with same_free no page taken. */
static int ahead_refused_fresh(dsmpool *p, int out, int other, bool same_free) {
    size_t got = 0;
    long free2 = test_huge_read(TEST_FREE_HUGE);
    int u2 = room_reused, f2 = room_fresh;
    int r = dsmpool_prefault_free(p, 16 * MIB, &got);
    long free3 = test_huge_read(TEST_FREE_HUGE);
    dprintf(out, "A, with %ld pages free, 16 MiB ahead: %d %s; %ld free after; %d readings (%d before), %d reused "
            "(%d before)\n", free2, r, dsmpool_last_error(), free3, room_fresh, f2, room_reused, u2);
    dp_inject_fn = NULL;
    if (other) return 20;
    if (free2 >= 8) return 2; /* room was left for 16 MiB */
    if (r != -ENOMEM || (same_free && free3 != free2)) return 5;
    if (room_reused != u2 || room_fresh == f2) return 6;
    return 0;
}

/* A hugetlb pool's refill ahead reads the free pages first; its reading,
 * reused for a minute, counts the pool's refills since: A refills 2 MiB
 * ahead (a reading with dozens of pages free), B takes all but a few by a
 * segment, and A asks 16 MiB ahead. Refused on a fresh reading, it takes
 * no page; on the old reading it would populate, fail and give back. */
static int huge_reuse_after_another(void *arg, int out) {
    (void)arg;
    dsmpool *p = mk_huge512(out);
    if (!p) return 3;
    dp_inject_room_reuse_ns = 60000000000ull;
    dp_inject_fn = count_room;
    size_t got = 0;
    if (dsmpool_prefault_free(p, 2 * MIB, &got) != 0 || got != 2 * MIB) return 4;
    int f1 = room_fresh;
    if (dsmpool_prefault_free(p, 2 * MIB, &got) != 0 || got != 2 * MIB) return 4;
    dprintf(out, "A, 2 MiB ahead twice: %d then %d readings, %d reused\n", f1, room_fresh, room_reused);
    if (f1 < 1 || room_fresh != f1 || room_reused < 1) return 8; /* the second reused the first's reading */
    long free1 = test_huge_read(TEST_FREE_HUGE);
    if (free1 < 48 || free1 > 200) {
        dprintf(out, "%ld huge pages free: 48 to 200 wanted\n", free1);
        return 2;
    }
    pid_t B = fork();
    if (B == 0) {
        dsmpool_seg *s;
        /* (A's warm page serves it too) */
        int r = dsmpool_seg_create(p, (size_t)(free1 - 3) * 2 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
        dprintf(out, "B asks %ld pages, %ld free: %d %s\n", free1 - 3, free1, r, r ? dsmpool_last_error() : "");
        if (r == 0) memset(dsmpool_seg_address(s), 1, dsmpool_seg_size(s));
        _exit(r == 0 ? dsmpool_detach(p) == 0 ? 0 : 7 : 6); /* (a segment nobody holds stays: the pool keeps it) */
    }
    /* refused on a fresh reading, never populated on the old one (which a
     * populate's failure would end the same way, having taken the pages) */
    return ahead_refused_fresh(p, out, test_wait_bounded(B, 60, NULL), true);
}

/* X's refill on demand of most free pages stops once it is counted, its
 * pages not yet taken; A refills 2 MiB ahead (a reading that sees X's
 * pages free), X goes on and takes them, and A asks 16 MiB ahead. A's
 * reading owes X's refill: every decision on a fresh reading, -ENOMEM. */
static void stop_after_count(const char *point) { stop_in_flight(point, "resident.populate.counted", 32 * MIB); }

static int huge_reuse_owes_refills_in_flight(void *arg, int out) {
    (void)arg;
    dsmpool *p = mk_huge512(out);
    if (!p) return 3;
    owed_pool = p;
    if (pipe(stop_fd) != 0 || pipe(stopped_fd) != 0) return 2;
    long free0 = test_huge_read(TEST_FREE_HUGE);
    if (free0 < 48 || free0 > 200) {
        dprintf(out, "%ld huge pages free: 48 to 200 wanted\n", free0);
        return 2;
    }
    pid_t X = fork();
    if (X == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dp_inject_fn = stop_after_count;
        dsmpool_seg *s;
        int r = dsmpool_seg_create(p, (size_t)(free0 - 8) * 2 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
        dprintf(out, "X, let go after A's reading, asks %ld of %ld pages: %d %s\n", free0 - 8, free0, r,
                r ? dsmpool_last_error() : "");
        if (r == 0) memset(dsmpool_seg_address(s), 1, dsmpool_seg_size(s));
        if (write(stopped_fd[1], "d", 1) != 1) _exit(121);
        _exit(r == 0 ? dsmpool_detach(p) == 0 ? 0 : 7 : 6);
    }
    char b;
    if (read(stopped_fd[0], &b, 1) != 1) return 9; /* X counted, its pages not taken */
    dp_inject_room_reuse_ns = 60000000000ull;
    dp_inject_fn = count_room;
    size_t got = 0;
    if (dsmpool_prefault_free(p, 2 * MIB, &got) != 0 || got != 2 * MIB) return 4;
    if (write(stop_fd[1], "g", 1) != 1 || read(stopped_fd[0], &b, 1) != 1) return 9; /* X took them */
    /* every decision on a fresh reading (which may serve a piece of one
     * page): the old one, reused, would have seen X's pages free */
    return ahead_refused_fresh(p, out, test_wait_bounded(X, 60, NULL), false);
}

Test(limits, a_reused_hugetlb_reading_owes_the_refills_in_flight_when_it_was_read, .timeout = 120) {
    case_run cr;
    run_with_huge(64, huge_reuse_owes_refills_in_flight, &cr);
    expect_clean(&cr, "a hugetlb refill ahead on a reading made while another's refill was in flight (exit 5 not "
                      "-ENOMEM, 6 the old reading reused)");
}

Test(limits, a_reused_hugetlb_reading_counts_the_pools_refills_since, .timeout = 120) {
    case_run cr;
    run_with_huge(64, huge_reuse_after_another, &cr);
    expect_clean(&cr, "a hugetlb refill ahead on a reading reused after another took the pages (exit 5 not "
                      "-ENOMEM, 6 the old reading reused, 8 no reading reused at all)");
}

/* ---- one clock in every time namespace ----------------------------------------------- */

static int day_ahead(void *arg, int out) {
    (void)arg;
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = 256 * MIB;
    cfg.resident_min = 8 * MIB;
    cfg.idle_release_ms = 60000;
    dsmpool *p;
    if (dsmpool_create(&cfg, &p) != 0) return 3;
    dsmpool_seg *s;
    if (dsmpool_seg_create(p, 64 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s) != 0) return 3;
    dsmpool_seg_detach(s); /* 64 MiB free and resident: idle from now */
    unsigned next;
    if (dsmpool_maintain(p, &next) != 0) return 3; /* stamps them */
    dsmpool_stats st0 = stats_of(p);
    if (unshare(CLONE_NEWTIME) != 0) {
        dprintf(out, "unshare(CLONE_NEWTIME): %s\n", strerror(errno));
        return 2;
    }
    if (test_write_file("/proc/self/timens_offsets", "monotonic 86400 0") != 0) {
        dprintf(out, "cannot set the time namespace's offsets\n");
        return 2;
    }
    pid_t c = fork(); /* in the namespace: its clock a day ahead */
    if (c == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        unsigned n;
        int r = dsmpool_maintain(p, &n);
        dprintf(out, "a maintenance step in a time namespace (its clock at %lld s): %d\n", (long long)ts.tv_sec, r);
        _exit(r ? 5 : 0);
    }
    int st = test_wait_bounded(c, 30, NULL);
    dsmpool_stats st1 = stats_of(p);
    dprintf(out, "released before %zu MiB, after %zu MiB\n", st0.released_bytes >> 20, st1.released_bytes >> 20);
    if (st) return st;
    return st1.released_bytes == st0.released_bytes ? 0 : 6;
}

Test(limits, a_time_namespace_a_day_ahead_does_not_release_memory_idle_for_milliseconds, .timeout = 60) {
    case_run cr;
    run_case(NULL, day_ahead, NULL, 40, &cr);
    if (cr.status == 2) cr_skip_test("no time namespace here: %s", cr.out);
    expect_clean(&cr, "idle_release_ms 60 s, one step from a clock a day ahead (exit 6: memory released)");
}

/* ---- creation judged on what it makes resident ------------------------------------- */

static int meminfo_256m(void *arg, int out) {
    (void)arg;
    char tmp[] = "/tmp/dsmpool-test-meminfoXXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) return 2;
    dprintf(fd, "MemTotal:       24731408 kB\nMemFree:          262144 kB\nMemAvailable:     262144 kB\n"
                "SwapTotal:             0 kB\nSwapFree:              0 kB\n");
    close(fd);
    bool ok = unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
              mount(tmp, "/proc/meminfo", NULL, MS_BIND, NULL) == 0;
    unlink(tmp);
    if (!ok) {
        dprintf(out, "cannot bind a file over /proc/meminfo: %s\n", strerror(errno));
        return 2;
    }
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    /* 64 TiB: about 400 MiB of tables resident at creation (the residency
     * table and the tree's levels from 32 MiB up; the directory and the
     * tree's lower levels follow the granules), with 256 MiB available */
    cfg.size = 64ull << 40;
    cfg.resident_min = 64 * MIB;
    dsmpool *p;
    int r = dsmpool_create(&cfg, &p);
    dprintf(out, "64 TiB with MemAvailable at 256 MiB: %d %s\n", r, dsmpool_last_error());
    if (r != -ENOMEM) return 5;
    if (!strstr(dsmpool_last_error(), "MemAvailable")) return 6;
    cfg.size = 16 * GIB; /* 8 MiB of tables resident, and resident_min: fits */
    r = dsmpool_create(&cfg, &p);
    if (r) dprintf(out, "16 GiB: %s\n", dsmpool_last_error());
    return r ? 7 : 0;
}

Test(limits, a_reservation_whose_tables_the_system_cannot_hold_is_refused, .timeout = 60) {
    case_run cr;
    run_case(NULL, meminfo_256m, NULL, 40, &cr);
    if (cr.status == 2) cr_skip_test("no private mount namespace here: %s", cr.out);
    expect_clean(&cr, "a 64 TiB reservation with 256 MiB available (exit 5 not -ENOMEM, 6 the message does not "
                      "name MemAvailable, 7 a 16 GiB reservation, which fits, refused)");
}

/* The resident bytes of [off, off + len) of the pool's mapping (mincore:
 * the shmem object's pages, whoever mapped them). */
static uint64_t resident_in(dsmpool *p, uint64_t off, uint64_t len) {
    uint64_t n = (len + 4095) / 4096, have = 0;
    unsigned char *v = malloc(n);
    cr_assert(v);
    cr_assert_eq(mincore(p->base + off, n * 4096, v), 0, "mincore: %s", strerror(errno));
    for (uint64_t i = 0; i < n; i++) have += v[i] & 1;
    free(v);
    return have * 4096;
}

/* 64 TiB, on a machine of far less: served with its tables following use
 * (palloc.c [lazy tree], layout.c [lazy directory]: before, 35 GiB of
 * tables were to be resident and it was refused), or refused where what
 * it makes resident (about 400 MiB) does not fit, or where the process
 * has no 64 TiB of address space in one piece (a PIE process under a
 * 47-bit address space may not): then 16 TiB is to be served, or the test
 * skips where even that has none (under TSan). Never the OOM killer. */
Test(limits, a_64_tib_reservation_is_served_or_refused_for_its_tables, .timeout = 60) {
    dsmpool *p = NULL;
    int r = -ENOMEM;
    for (unsigned tib = 64; tib >= 16 && r == -ENOMEM; tib /= 4) {
        dsmpool_config cfg;
        dsmpool_config_init(&cfg);
        cfg.size = (size_t)tib << 40;
        cfg.resident_min = 64 * MIB;
        cfg.backing = DSMPOOL_BACKING_MEMFD;
        uint64_t t0 = test_now_ns();
        r = dsmpool_create(&cfg, &p);
        cr_log_info("%u TiB: %d %s (%.0f ms)", tib, r, dsmpool_last_error(), (test_now_ns() - t0) / 1e6);
        const char *m = strstr(dsmpool_last_error(), "a pool that makes ");
        if (r == -ENOMEM && m && (strstr(dsmpool_last_error(), "MemAvailable") || strstr(dsmpool_last_error(), "cgroup"))) {
            /* refused for what it would make resident: the lazy tables'
             * few hundred MiB, not the whole tree's 35 GiB */
            unsigned long long need = strtoull(m + strlen("a pool that makes "), NULL, 10);
            cr_expect_lt(need, 1 * GIB, "refused for %llu MiB resident at creation", need >> 20);
            return;
        }
        if (r == -ENOMEM && !strstr(dsmpool_last_error(), "address space")) break;
    }
    if (r == -ENOMEM && strstr(dsmpool_last_error(), "address space")) /* (TSan's shadow takes most of it) */
        cr_skip_test("no 16 TiB of address space in one piece here: %s", dsmpool_last_error());
    cr_assert_eq(r, 0, "on a %.0f GiB machine: %d %s", (double)sysconf(_SC_PHYS_PAGES) * 4096 / GIB, r,
                 dsmpool_last_error());
    uint64_t tables = resident_in(p, 0, p->geo.data_off);
    cr_log_info("%.1f TiB of data: %llu MiB of tables resident", (double)p->geo.data_size / (1ull << 40),
                (unsigned long long)(tables >> 20));
    cr_expect_lt(tables, 1 * GIB, "%llu MiB of tables resident", (unsigned long long)(tables >> 20));
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 256 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s), 0, "%s", dsmpool_last_error());
    memset(dsmpool_seg_address(s), 1, 256 * MIB);
    dsmpool_seg_detach(s);
    /* (no dsmpool_check: its map of the used frames would be 2 GiB) */
    cr_assert_eq(dsmpool_destroy(p), 0, "%s", dsmpool_last_error());
}

/* ---- vm.overcommit_memory = 2 ------------------------------------------------------- */

static int strict_reservation(void *arg, int out) {
    (void)arg;
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = 64 * GIB;
    cfg.resident_min = 16 * MIB;
    dsmpool *p;
    int r = dsmpool_create(&cfg, &p);
    dprintf(out, "an ANON 64 GiB reservation under strict overcommit: %d %s\n", r, dsmpool_last_error());
    if (r) return 5;
    dsmpool_seg *s;
    r = dsmpool_seg_create(p, 256 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
    if (r) dprintf(out, "256 MiB: %s\n", dsmpool_last_error());
    if (r) return 6;
    memset(dsmpool_seg_address(s), 1, 256 * MIB);
    /* it goes back and comes back */
    dsmpool_seg_detach(s);
    size_t rel = 0;
    if (dsmpool_trim(p, 0, &rel) != 0 || rel < 256 * MIB) return 7;
    pid_t c = fork(); /* inherited over fork as an anonymous mapping is */
    if (c == 0) {
        dsmpool_seg *t;
        _exit(dsmpool_seg_create(p, 64 * MIB, DSMPOOL_SEG_NO_FALLBACK, &t) == 0 ? 0 : 1);
    }
    return test_wait(c) ? 8 : dsmpool_detach(p) ? 9 : 0;
}

Test(limits, an_elastic_anon_reservation_works_under_strict_overcommit, .timeout = 60) {
    if (UNDER_ASAN || UNDER_TSAN)
        cr_skip_test("the sanitizers reserve their shadow memory with MAP_NORESERVE, which strict overcommit "
                     "charges in full");
    char mode[16] = "", kb[32] = "", ratio[16] = "", meminfo[4096] = "";
    if (test_read_file("/proc/sys/vm/overcommit_memory", mode, sizeof mode) != 0 ||
        test_read_file("/proc/sys/vm/overcommit_kbytes", kb, sizeof kb) != 0 ||
        test_read_file("/proc/sys/vm/overcommit_ratio", ratio, sizeof ratio) != 0)
        cr_skip_test("no overcommit settings to change here");
    test_read_file("/proc/meminfo", meminfo, sizeof meminfo);
    char *c = strstr(meminfo, "Committed_AS:");
    long long committed = c ? atoll(c + 13) : 0;
    /* room for what runs now and 2 GiB more, but far from 64 GiB */
    char lim[32];
    snprintf(lim, sizeof lim, "%lld", committed + 2 * 1024 * 1024);
    if (test_write_file("/proc/sys/vm/overcommit_kbytes", lim) != 0 ||
        test_write_file("/proc/sys/vm/overcommit_memory", "2") != 0) {
        test_write_file("/proc/sys/vm/overcommit_ratio", ratio);
        cr_skip_test("cannot set vm.overcommit_memory (not root?)");
    }
    case_run cr;
    run_case(NULL, strict_reservation, NULL, 40, &cr);
    test_write_file("/proc/sys/vm/overcommit_memory", mode);
    if (atoll(kb) > 0) test_write_file("/proc/sys/vm/overcommit_kbytes", kb);
    else test_write_file("/proc/sys/vm/overcommit_ratio", ratio);
    expect_clean(&cr, "vm.overcommit_memory = 2 (exit 5 not created, 6 a segment refused, 7 not trimmed, 8 a "
                      "forked child could not allocate)");
}

/* ---- the hugetlb cgroup --------------------------------------------------------------- */

static int huge_refills_in_cgroup(void *arg, int out) {
    test_cg *cg = arg;
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = 256 * MIB;
    cfg.huge_pages = DSMPOOL_HUGE_ON;
    cfg.idle_release_ms = 60000;
    dsmpool *p;
    if (dsmpool_create(&cfg, &p) != 0) {
        dprintf(out, "create: %s\n", dsmpool_last_error());
        return 3;
    }
    const char *cur = cg->v2 ? "hugetlb.2MB.current" : "hugetlb.2MB.usage_in_bytes";
    char v[32] = "";
    test_cg_get(cg, cur, v, sizeof v);
    long long base = atoll(v);
    dsmpool_seg *s;
    int r = dsmpool_seg_create(p, 64 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
    test_cg_get(cg, cur, v, sizeof v);
    dprintf(out, "64 MiB in a 16 MiB hugetlb cgroup (%lld used): %d %s; %lld used after\n", base, r,
            dsmpool_last_error(), atoll(v));
    if (r != -ENOMEM) return 5;
    if (atoll(v) != base) return 6; /* no page kept */
    size_t served = 0;
    while ((r = dsmpool_seg_create(p, 4 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s)) == 0) {
        memset(dsmpool_seg_address(s), 1, 4 * MIB);
        served += 4 * MIB;
        if (served > 32 * MIB) return 7;
    }
    test_cg_get(cg, cur, v, sizeof v);
    dprintf(out, "then 4 MiB segments: %zu MiB served, then %d; %lld used\n", served >> 20, r, atoll(v));
    if (r != -ENOMEM || served < 8 * MIB) return 8;
    if (atoll(v) != base + (long long)served) return 9;
    return 0;
}

Test(limits, refills_in_a_hugetlb_cgroup_at_its_limit_are_enomem_not_sigbus, .timeout = 120) {
    char why[600];
    test_cg cg;
    if (!test_cg_make(&cg, "hugetlb", why, sizeof why)) cr_skip_test("no hugetlb cgroup here: %s", why);
    long old, got = test_huge_reserve(40, &old);
    if (got < 40) {
        test_huge_restore(old);
        test_cg_remove(&cg);
        cr_skip_test("40 huge pages of 2 MiB could not be reserved (%ld)", got);
    }
    const char *ovc = "/proc/sys/vm/nr_overcommit_hugepages";
    long old_ovc = test_huge_read(ovc);
    if (old_ovc > 0) test_write_file(ovc, "0");
    int r = test_cg_limit(&cg, 16 * MIB);
    case_run cr;
    if (r == 0) run_case(&cg, huge_refills_in_cgroup, &cg, 90, &cr);
    test_huge_restore(old);
    if (old_ovc > 0) {
        char v[32];
        snprintf(v, sizeof v, "%ld", old_ovc);
        test_write_file(ovc, v);
    }
    test_cg_remove(&cg);
    cr_assert_eq(r, 0, "cannot set the hugetlb limit");
    cr.oom = 0; /* (a hugetlb cgroup has no OOM killer: its limit is SIGBUS at a fault) */
    expect_clean(&cr, "an elastic hugetlb pool in a 16 MiB hugetlb cgroup (exit 5 not -ENOMEM, 6 pages kept, 7 "
                      "served past the limit, 8 what fits not served, 9 pages kept)");
}
