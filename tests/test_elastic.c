/*
 * test_elastic.c -- the elastic pool (issue 27): memory given back to the
 * system and made resident again while other processes allocate, free and
 * die.
 *
 *   trim_under_load     4 processes allocate segments and area chunks,
 *                       write a pattern, verify it and free, while the
 *                       parent trims everything free and prefaults it back
 *                       again and again: no byte a holder wrote changes (a
 *                       block released under its holder would read zeroes)
 *   every backing       trim, then the backing's allocated blocks
 *                       (st_blocks: MEMFD, POSIX) or this process's RSS of
 *                       the region (ANON, SysV) drop by exactly what trim
 *                       reports, and dsmpool_prefault_free brings them back
 *   hugetlb             the kernel's free huge pages rise by the pages trim
 *                       released (persistent pages: they stay in the
 *                       hugetlb pool); skipped, saying why, when no huge
 *                       pages can be reserved (the setting is put back)
 *   kills               a process killed at every step of trim and of a
 *                       refill (ahead and on demand); then recover(): the
 *                       pool's free bytes exact, dsmpool_check() clean, the
 *                       released bytes those of a granule state the kill
 *                       allows, and everything can be trimmed and refilled
 *   zeroed              a released block handed out again is resident (a
 *                       refill on demand is counted) and reads zeroes
 *   maintain            dsmpool_maintain with idle_release_ms and
 *                       warm_bytes: after idle the pool holds resident_min +
 *                       warm_bytes; the warm reserve is refilled ahead of
 *                       need; the helper thread does the same
 *   reservation         a 64 GiB reservation on a smaller machine is
 *                       created with only its tables charged and serves
 *                       what fits (2 GiB here; a POSIX one in a 1 GiB
 *                       tmpfs answers -ENOMEM once the tmpfs is full)
 *   cgroup              in a memory cgroup limited to 2 GiB a 16 GiB
 *                       reservation is created, serves up to the limit and
 *                       answers -ENOMEM beyond it: no SIGBUS, no OOM kill
 *                       (skipped, saying why, where no cgroup can be made)
 *   directory           an elastic pool's span directory is resident page
 *                       by page with its granules, given back with them,
 *                       and a stray free into released memory brings no
 *                       page in (layout.c [lazy directory])
 *   tree give-back      a trim gives its granules' page of the allocator's
 *                       leaves back with them (resident.c [tree give-back]);
 *                       forced interleavings of a trim with openers that
 *                       chose a node before it, with their fill, their
 *                       death and recovery, and with a CPU's hint: no
 *                       claim erased, no clear bit over a missing page, no
 *                       claim left unrecovered, no page read back; the
 *                       maintainer's idle release gives pages back too
 *                       (tests/model/tree.m checks the steps exhaustively);
 *                       and the page of level 1 of 64 released granules
 *                       (elastic.c el_tree_l1): given back, held against
 *                       an allocation while it goes, a trimmer's death
 *                       there recovered
 *
 * Children never use Criterion's asserts; they report through exit codes.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <dsmpool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dp_internal.h"
#include "dp_numa.h"
#include "pa_word.h"
#include "testhooks.h"
#include "testutil.h"

#define GIB (1ull << 30)

/* Under TSan (UNDER_TSAN, testutil.h) the shadow memory follows what the
 * process touches: it is charged to the same memory cgroup, and touching
 * GiBs under it takes minutes (tests/crshim's runner under TSan). */
#define GRANULE (2 * MIB)

static dsmpool_stats stats(dsmpool *p) {
    dsmpool_stats st;
    cr_assert_eq(dsmpool_get_stats(p, &st), 0, "%s", dsmpool_last_error());
    return st;
}

/* A pool of size bytes on backing b, elastic when resident_min is not 0. */
static dsmpool_config pool_config(size_t size, dsmpool_backing b, dsmpool_huge huge, size_t resident_min) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = size;
    cfg.backing = b;
    cfg.huge_pages = huge;
    cfg.resident_min = resident_min;
    return cfg;
}

static dsmpool *mkpool(dsmpool_backing b, const char *name, size_t size) {
    dsmpool_config cfg = pool_config(size, b, DSMPOOL_HUGE_OFF, 0);
    cfg.name = name;
    dsmpool *p = NULL;
    int r = dsmpool_create(&cfg, &p);
    cr_assert_eq(r, 0, "create (%s): %s", dsmpool_backing_name(b), dsmpool_last_error());
    return p;
}

/* Bytes of the backing that hold memory: the file's blocks (MEMFD, POSIX)
 * or this process's resident pages of the region (ANON, SysV). */
static long long held_bytes(dsmpool *p) {
    if (p->fd >= 0 && (p->backing == DSMPOOL_BACKING_MEMFD || p->backing == DSMPOOL_BACKING_POSIX)) {
        struct stat s;
        cr_assert_eq(fstat(p->fd, &s), 0);
        return (long long)s.st_blocks * 512;
    }
    long kb = test_smaps_kb(p->base, p->size, "Rss");
    cr_assert_geq(kb, 0, "/proc/self/smaps is unreadable");
    return (long long)kb * 1024;
}

/* The allocator's pages of leaves whose granules all say "no tree"
 * (resident.c [tree give-back]), in every sub-pool. */
static long long leaf_pages_gone(dsmpool *p) {
    long long n = 0;
    for (uint32_t s = 0; s < p->nsub; s++) {
        const dp_pa_geom *geo = &p->geo.sub[s].geom;
        uint64_t g0 = (p->geo.sub[s].data_off - p->geo.data_off) / GRANULE, off, pg, pn;
        for (uint64_t k = 0; dp_pa_leaf_page(geo, 0, geo->frames >> 9, 4096, k, &off, &pg, &pn); k++) {
            bool all = true;
            for (uint64_t j = pg; j < pg + pn; j++) all &= (dp_load_relaxed(&p->res[g0 + j]) & DP_RES_NOTREE) != 0;
            n += all;
        }
    }
    return n;
}

/* ---- trim under load ------------------------------------------------------ */

static uint64_t pat(uint64_t seed, size_t i) { return (seed * 0x9e3779b97f4a7c15ull) ^ (i * 0xff51afd7ed558ccdull); }

static void fill(void *a, size_t n, uint64_t seed) {
    uint64_t *w = a;
    for (size_t i = 0; i < n / 8; i += 64) w[i] = pat(seed, i); /* a word per 512 bytes */
    w[n / 8 - 1] = pat(seed, n / 8 - 1);
}

static bool same(const void *a, size_t n, uint64_t seed) {
    const uint64_t *w = a;
    for (size_t i = 0; i < n / 8; i += 64)
        if (w[i] != pat(seed, i)) return false;
    return w[n / 8 - 1] == pat(seed, n / 8 - 1);
}

/* A child: segments and area chunks, written, verified, freed, until the
 * deadline. Exit 0, or 10+ for what went wrong. */
typedef struct load_ctl {
    _Atomic int started, stop;
} load_ctl;

static void worker(dsmpool *p, dsmpool_area *a, uint64_t seed, load_ctl *ctl) {
    dsmpool_seg *segs[4] = {0};
    uint64_t sseed[4] = {0};
    dsmpool_ptr ch[64] = {0};
    size_t csz[64] = {0};
    uint64_t cseed[64] = {0};
    for (unsigned ops = 0; !atomic_load(&ctl->stop); ops++) {
        if (ops == 16) atomic_fetch_add(&ctl->started, 1);
        uint64_t r = test_rand(&seed);
        unsigned i = r % 4, j = (r >> 8) % 64;
        if (segs[i]) {
            if (!same(dsmpool_seg_address(segs[i]), dsmpool_seg_size(segs[i]), sseed[i])) _exit(11);
            if (dsmpool_seg_detach(segs[i]) != 0) _exit(12);
            segs[i] = NULL;
        } else {
            size_t sz = (64 * KIB) << ((r >> 16) % 8); /* 64 KiB .. 8 MiB */
            if (dsmpool_seg_create(p, sz, DSMPOOL_SEG_NO_FALLBACK, &segs[i]) == 0) {
                sseed[i] = test_rand(&seed);
                fill(dsmpool_seg_address(segs[i]), dsmpool_seg_size(segs[i]), sseed[i]);
            } else
                segs[i] = NULL;
        }
        if (ch[j]) {
            if (!same(dsmpool_area_addr(a, ch[j]), csz[j], cseed[j])) _exit(13);
            if (dsmpool_area_free(a, ch[j]) != 0) _exit(14);
            ch[j] = 0;
        } else {
            csz[j] = (4 * KIB) << ((r >> 24) % 8); /* 4 KiB .. 512 KiB */
            if (dsmpool_area_alloc(a, csz[j], 0, &ch[j]) == 0) {
                cseed[j] = test_rand(&seed);
                fill(dsmpool_area_addr(a, ch[j]), csz[j], cseed[j]);
            } else
                ch[j] = 0;
        }
    }
    for (unsigned i = 0; i < 4; i++)
        if (segs[i] && (!same(dsmpool_seg_address(segs[i]), dsmpool_seg_size(segs[i]), sseed[i]) ||
                        dsmpool_seg_detach(segs[i]) != 0))
            _exit(15);
    for (unsigned j = 0; j < 64; j++)
        if (ch[j] && (!same(dsmpool_area_addr(a, ch[j]), csz[j], cseed[j]) || dsmpool_area_free(a, ch[j]) != 0))
            _exit(16);
    dsmpool_area_flush(a);
    _exit(0);
}

static void trim_under_load(dsmpool_backing b) {
    char nm[96];
    dsmpool *p = mkpool(b, b == DSMPOOL_BACKING_ANON || b == DSMPOOL_BACKING_MEMFD ? NULL : test_name(nm, sizeof nm, "el-load"),
                        256 * MIB);
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0, "%s", dsmpool_last_error());
    load_ctl *ctl = mmap(NULL, sizeof *ctl, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(ctl, MAP_FAILED);
    pid_t kids[4];
    for (int k = 0; k < 4; k++)
        if ((kids[k] = fork()) == 0) worker(p, a, test_seed() + (uint64_t)k, ctl);
    for (int i = 0; i < 10000 && atomic_load(&ctl->started) < 4; i++) usleep(1000);
    uint64_t until = test_now_ns() + (uint64_t)(test_seconds(2.0) * 1e9);
    size_t released = 0, refilled = 0, got;
    unsigned rounds = 0;
    while (test_now_ns() < until || rounds < 8) { /* at least 8 rounds, however slow (sanitizers) */
        cr_assert_eq(dsmpool_trim(p, 0, &got), 0, "trim: %s", dsmpool_last_error());
        released += got;
        if (rounds++ % 2) {
            cr_assert_eq(dsmpool_prefault_free(p, 64 * MIB, &got), 0, "prefault: %s", dsmpool_last_error());
            refilled += got;
        }
    }
    atomic_store(&ctl->stop, 1);
    for (int k = 0; k < 4; k++) cr_expect_eq(test_wait(kids[k]), 0, "worker %d: a pattern changed or a call failed", k);
    dsmpool_stats st = stats(p);
    cr_expect_gt(released, 0, "trim never found a free granule");
    cr_expect_gt(st.refills_on_demand + st.refills_ahead, 0);
    cr_log_info("%s: %u rounds, %zu MiB released, %zu MiB refilled ahead, %llu refills on demand",
                dsmpool_backing_name(b), rounds, released >> 20, refilled >> 20,
                (unsigned long long)st.refills_on_demand);
    test_recover_all(p);
    test_check_ok(p);
    dsmpool_area_destroy(a);
    dsmpool_destroy(p);
}

Test(elastic, trim_under_load_anon, .timeout = 120) { trim_under_load(DSMPOOL_BACKING_ANON); }
Test(elastic, trim_under_load_memfd, .timeout = 120) { trim_under_load(DSMPOOL_BACKING_MEMFD); }

/* ---- every backing: the memory goes and comes back -------------------------- */

static void backing_round(dsmpool_backing b, bool elastic) {
    char nm[96];
    test_private_shm();
    const char *name = b == DSMPOOL_BACKING_POSIX ? test_name(nm, sizeof nm, "el-posix")
                       : b == DSMPOOL_BACKING_SYSV ? test_name(nm, sizeof nm, "el-sysv") + 1
                                                   : NULL;
    dsmpool_config cfg = pool_config(128 * MIB, b, DSMPOOL_HUGE_OFF, elastic ? 16 * MIB : 0);
    cfg.name = name;
    dsmpool *p = NULL;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "create (%s): %s", dsmpool_backing_name(b), dsmpool_last_error());
    dsmpool_stats st = stats(p);
    cr_assert_eq(st.elastic, elastic);
    if (elastic) {
        cr_expect_eq(st.resident_bytes, 16 * MIB, "an elastic pool starts with resident_min resident");
        size_t got;
        cr_assert_eq(dsmpool_prefault_free(p, SIZE_MAX, &got), 0, "%s", dsmpool_last_error());
        cr_expect_eq(got, st.released_bytes);
    }
    size_t free0 = test_pool_free(p);
    long long h0 = held_bytes(p);
    size_t rel = 0, got = 0;
    cr_assert_eq(dsmpool_trim(p, 8 * MIB, &rel), 0, "trim: %s", dsmpool_last_error());
    long long h1 = held_bytes(p);
    st = stats(p);
    cr_expect_geq(rel, free0 - 8 * MIB - 2 * GRANULE, "trim left %zu of %zu free bytes", free0 - rel, free0);
    cr_expect_eq(st.released_bytes, rel);
    cr_expect_geq(st.warm_free_bytes, 8 * MIB, "trim kept less than keep_bytes resident and free");
    /* an elastic pool's directory pages go with their granules: 4 KiB per
     * 2 MiB (layout.c [lazy directory]); and the allocator's pages of
     * leaves, one per 4 granules given back together (resident.c [tree
     * give-back]; all were resident: dsmpool_prefault_free above) */
    long long dir = elastic ? (long long)(rel / GRANULE) * 4096 : 0, tree = elastic ? leaf_pages_gone(p) * 4096 : 0;
    /* (but a POSIX pool's, whose tmpfs may be full when a stale reader
     * brings a page back) */
    if (elastic && b != DSMPOOL_BACKING_POSIX) cr_expect_gt(tree, 0, "%s: no page of leaves was given back", dsmpool_backing_name(b));
    if (b == DSMPOOL_BACKING_POSIX) cr_expect_eq(tree, 0, "a POSIX pool gave %lld bytes of leaves back", tree);
    cr_expect_eq(h0 - h1, (long long)rel + dir + tree, "%s: the backing held %lld bytes before and %lld after; trim "
                 "said %zu (and %lld of directory pages, %lld of leaves)", dsmpool_backing_name(b), h0, h1, rel, dir,
                 tree);
    test_check_ok(p);
    cr_assert_eq(dsmpool_prefault_free(p, SIZE_MAX, &got), 0, "prefault: %s", dsmpool_last_error());
    cr_expect_eq(got, rel);
    long long h2 = held_bytes(p);
    cr_expect_eq(h2, h0, "%s: prefault_free brought back %lld of %zu bytes", dsmpool_backing_name(b), h2 - h1, rel);
    st = stats(p);
    cr_expect_eq(st.released_bytes, 0);
    cr_expect_eq(test_pool_free(p), free0);
    cr_log_info("%s%s: held %lld MiB, after trim %lld MiB (released %zu MiB), after prefault_free %lld MiB",
                dsmpool_backing_name(b), elastic ? " (elastic)" : "", h0 >> 20, h1 >> 20, rel >> 20, h2 >> 20);
    test_check_ok(p);
    dsmpool_destroy(p);
}

Test(elastic, backing_anon) { backing_round(DSMPOOL_BACKING_ANON, false); }
Test(elastic, backing_memfd) { backing_round(DSMPOOL_BACKING_MEMFD, false); }
Test(elastic, backing_posix) { backing_round(DSMPOOL_BACKING_POSIX, false); }
Test(elastic, backing_sysv) { backing_round(DSMPOOL_BACKING_SYSV, false); }
Test(elastic, backing_anon_elastic) { backing_round(DSMPOOL_BACKING_ANON, true); }
Test(elastic, backing_memfd_elastic) { backing_round(DSMPOOL_BACKING_MEMFD, true); }
Test(elastic, backing_posix_elastic) { backing_round(DSMPOOL_BACKING_POSIX, true); }
Test(elastic, backing_sysv_elastic) { backing_round(DSMPOOL_BACKING_SYSV, true); }

/* ---- hugetlb ------------------------------------------------------------------ */

#define NR_HUGE "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
#define FREE_HUGE "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"

static long read_long(const char *path) {
    char buf[32] = "";
    return test_read_file(path, buf, sizeof buf) == 0 ? atol(buf) : -1;
}

static void set_nr_huge(long n) {
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", n);
    test_write_file(NR_HUGE, buf);
}

/* n more 2 MiB huge pages reserved, or the test skips saying why; returns
 * what nr_hugepages was, for set_nr_huge() to put back. */
static long reserve_huge_or_skip(long n) {
    long nr0 = read_long(NR_HUGE);
    if (nr0 < 0) cr_skip_test("no 2 MiB hugetlb pool on this kernel (%s is missing)", NR_HUGE);
    set_nr_huge(nr0 + n);
    if (read_long(NR_HUGE) < nr0 + n) {
        set_nr_huge(nr0);
        cr_skip_test("could not reserve %ld huge pages of 2 MiB (not root, or memory too fragmented)", n);
    }
    return nr0;
}

Test(elastic, hugetlb_pages_go_back_to_the_pool, .timeout = 60) {
    long nr0 = reserve_huge_or_skip(40);
    dsmpool_config cfg = pool_config(64 * MIB, DSMPOOL_BACKING_ANON, DSMPOOL_HUGE_ON, 0);
    dsmpool *p = NULL;
    int r = dsmpool_create(&cfg, &p);
    bool ok = false;
    long f0 = 0, f1 = 0, f2 = 0;
    size_t rel = 0, got = 0;
    if (r == 0) {
        /* other users of the hugetlb pool may take or free pages meanwhile:
         * try a few times for a quiet window */
        for (int t = 0; t < 5 && !ok; t++) {
            f0 = read_long(FREE_HUGE);
            if (dsmpool_trim(p, 0, &rel) != 0) break;
            f1 = read_long(FREE_HUGE);
            if (dsmpool_prefault_free(p, SIZE_MAX, &got) != 0) break;
            f2 = read_long(FREE_HUGE);
            ok = rel && f1 - f0 == (long)(rel / GRANULE) && f1 - f2 == (long)(got / GRANULE) && got == rel;
        }
    }
    dsmpool_stats st = {0};
    if (p) {
        st = stats(p);
        test_check_ok(p);
        dsmpool_destroy(p);
    }
    set_nr_huge(nr0);
    cr_assert_eq(r, 0, "create with huge pages: %s", dsmpool_last_error());
    cr_expect(ok, "free huge pages %ld, after trim (released %zu bytes) %ld, after prefault_free (%zu) %ld", f0, rel,
              f1, got, f2);
    cr_expect(!st.huge_release_to_system || read_long("/proc/sys/vm/nr_overcommit_hugepages") > 0);
    cr_log_info("hugetlb: free pages %ld, after trim %ld (%zu MiB released), after prefault_free %ld", f0, f1,
                rel >> 20, f2);
}

/* A hugetlb pool that is not elastic has its pages reserved for its whole
 * size: a hole punched in its file would be reserved again by the next
 * process to map it (an attach by name), and that attach fails when the
 * kernel's pool is short. So its trim is refused, with what to do; the same
 * pool created elastic trims. */
Test(elastic, trim_of_a_reserved_hugetlb_file_pool_is_refused, .timeout = 60) {
    long nr0 = reserve_huge_or_skip(40);
    int r[2] = {-1, -1}, tr[2] = {1, 1};
    char msg[2][256] = {"", ""};
    size_t rel[2] = {0, 0};
    for (int el = 0; el < 2; el++) {
        dsmpool_config cfg = pool_config(32 * MIB, DSMPOOL_BACKING_MEMFD, DSMPOOL_HUGE_ON, el ? 8 * MIB : 0);
        dsmpool *p = NULL;
        if ((r[el] = dsmpool_create(&cfg, &p)) != 0) {
            snprintf(msg[el], sizeof msg[el], "%s", dsmpool_last_error());
            continue;
        }
        tr[el] = dsmpool_trim(p, 0, &rel[el]);
        snprintf(msg[el], sizeof msg[el], "%s", dsmpool_last_error());
        dsmpool_destroy(p);
    }
    set_nr_huge(nr0);
    cr_assert_eq(r[0], 0, "create: %s", msg[0]);
    cr_assert_eq(r[1], 0, "create elastic: %s", msg[1]);
    cr_expect_eq(tr[0], -EOPNOTSUPP, "trim of a reserved hugetlb MEMFD pool: %d (%s)", tr[0], msg[0]);
    cr_expect_eq(rel[0], 0u);
    cr_expect(strstr(msg[0], "elastic") != NULL, "the message says what to do: %s", msg[0]);
    cr_expect_eq(tr[1], 0, "trim of the elastic one: %s", msg[1]);
}

/* region.c [creation]: a pool in 2 MiB hugetlb pages of 1 GiB or more is
 * mapped at a GiB boundary (x86 Linux then shares the page tables of each
 * whole GiB among its mappers: bench/pagetables), a smaller one and one that
 * asks for its own alignment at 2 MiB, and a forked child sees the first at
 * the same address. Elastic, so that only the tables and resident_min take
 * huge pages. */
Test(elastic, a_hugetlb_pool_of_a_gib_starts_on_a_gib, .timeout = 60) {
    long nr0 = reserve_huge_or_skip(16);
    struct { size_t size, align; } want[3] = {{GIB + 64 * MIB, 0}, {256 * MIB, 0}, {GIB, 2 * MIB}};
    int r[3] = {-1, -1, -1}, child = -1;
    uint64_t got[3] = {0, 0, 0};
    uintptr_t base[3] = {0, 0, 0};
    char msg[3][256] = {"", "", ""};
    for (int i = 0; i < 3; i++) {
        dsmpool_config cfg = pool_config(want[i].size, DSMPOOL_BACKING_ANON, DSMPOOL_HUGE_ON, 4 * MIB);
        cfg.map_align = want[i].align;
        dsmpool *p = NULL;
        if ((r[i] = dsmpool_create(&cfg, &p)) != 0) {
            snprintf(msg[i], sizeof msg[i], "%s", dsmpool_last_error());
            continue;
        }
        got[i] = p->hdr->map_align;
        base[i] = (uintptr_t)p->base;
        if (i == 0) { /* a forked child's mapping is the parent's, and it can refill */
            pid_t pid = fork();
            if (pid == 0) {
                dsmpool_seg *s;
                if ((uintptr_t)p->base != base[0]) _exit(1);
                if (dsmpool_seg_create(p, 8 * MIB, 0, &s) != 0) _exit(2);
                memset(dsmpool_seg_address(s), 1, 8 * MIB);
                _exit(0);
            }
            int st;
            waitpid(pid, &st, 0);
            child = WIFEXITED(st) ? WEXITSTATUS(st) : 99;
        }
        dsmpool_destroy(p);
    }
    set_nr_huge(nr0);
    for (int i = 0; i < 3; i++) cr_assert_eq(r[i], 0, "create %d: %s", i, msg[i]);
    cr_expect_eq(got[0], GIB, "a 1 GiB hugetlb pool: map_align %llu", (unsigned long long)got[0]);
    cr_expect_eq(base[0] % GIB, 0, "mapped at %#lx, not on a GiB", (unsigned long)base[0]);
    cr_expect_eq(got[1], 2 * MIB, "a 256 MiB hugetlb pool: map_align %llu", (unsigned long long)got[1]);
    cr_expect_eq(got[2], 2 * MIB, "map_align asked for: %llu", (unsigned long long)got[2]);
    cr_expect_eq(child, 0, "the forked child: exit %d", child);
}

/* In 1 GiB pages the release unit is a page: a maintenance step, bound to
 * 256 MiB of refill, refilled nothing and never met warm_bytes (found by
 * review). A pool of two data pages, trimmed to nothing, with a warm
 * reserve of 64 MiB: one step refills a page. */
#define NR_HUGE_1G "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"

Test(elastic, the_maintainer_keeps_a_warm_reserve_in_1_gib_pages, .timeout = 120) {
    long nr0 = read_long(NR_HUGE_1G);
    if (nr0 < 0) cr_skip_test("no 1 GiB hugetlb pages on this kernel (%s is missing)", NR_HUGE_1G);
    char v[32];
    snprintf(v, sizeof v, "%ld", nr0 + 2);
    if (test_write_file(NR_HUGE_1G, v) != 0 || read_long(NR_HUGE_1G) < nr0 + 2) {
        snprintf(v, sizeof v, "%ld", nr0);
        test_write_file(NR_HUGE_1G, v);
        cr_skip_test("two pages of 1 GiB could not be reserved (not root, or no contiguous GiB free)");
    }
    dsmpool_config cfg = pool_config(3 * GIB, DSMPOOL_BACKING_ANON, DSMPOOL_HUGE_ON, 0);
    cfg.huge_page_size = GIB;
    cfg.idle_release_ms = 60000;
    cfg.warm_bytes = 64 * MIB;
    dsmpool *p = NULL;
    int r = dsmpool_create(&cfg, &p);
    char msg[512] = "";
    dsmpool_stats s0 = {0}, s1 = {0};
    int rm = -1, rt = -1;
    if (r == 0) {
        size_t rel;
        unsigned next;
        if ((rt = dsmpool_trim(p, 0, &rel)) == 0) s0 = stats(p);
        rm = dsmpool_maintain(p, &next);
        if (rm) snprintf(msg, sizeof msg, "%s", dsmpool_last_error());
        s1 = stats(p);
        dsmpool_destroy(p);
    } else {
        snprintf(msg, sizeof msg, "%s", dsmpool_last_error());
    }
    snprintf(v, sizeof v, "%ld", nr0);
    test_write_file(NR_HUGE_1G, v);
    cr_assert_eq(r, 0, "create: %s", msg);
    cr_assert_eq(rt, 0, "the trim failed");
    cr_assert_eq(rm, 0, "maintain: %s", msg);
    cr_log_info("1 GiB pages: warm %zu MiB after the trim, %zu MiB after a step (%llu refills ahead)",
                s0.warm_free_bytes >> 20, s1.warm_free_bytes >> 20, (unsigned long long)s1.refills_ahead);
    cr_expect_lt(s0.warm_free_bytes, 64 * MIB, "the trim left the reserve met: nothing to test");
    cr_expect_geq(s1.warm_free_bytes, 64 * MIB, "a step left %zu bytes warm of the 64 MiB asked", s1.warm_free_bytes);
}

/* ---- kills at each step ------------------------------------------------------ */

static const char *inj_point;
static void die_at(const char *point) {
    if (inj_point && !strcmp(point, inj_point)) raise(SIGKILL);
}

/* Kill a child at point during op (0 trim, 1 prefault_free, 2 an allocation
 * of released memory); the pool is then recovered and must be whole. */
static void kill_at(const char *point, int op) {
    dsmpool *p = mkpool(DSMPOOL_BACKING_MEMFD, NULL, 64 * MIB);
    size_t free0 = test_pool_free(p), got;
    long long held0 = held_bytes(p);
    if (op) cr_assert_eq(dsmpool_trim(p, 0, &got), 0, "%s", dsmpool_last_error());
    size_t rel0 = stats(p).released_bytes;
    uint64_t given0 = stats(p).refill_given_back;
    pid_t c = fork();
    if (c == 0) {
        inj_point = point;
        dp_inject_fn = die_at;
        dsmpool_seg *s;
        if (op == 0) dsmpool_trim(p, 0, &got);
        else if (op == 1) dsmpool_prefault_free(p, SIZE_MAX, &got);
        else dsmpool_seg_create(p, 8 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s);
        _exit(5);
    }
    cr_assert_eq(test_wait(c), 128 + SIGKILL, "the child did not die at %s", point);
    test_recover_all(p);
    cr_expect_eq(test_pool_free(p), free0, "%s: free bytes are not what they were", point);
    test_check_ok(p);
    dsmpool_stats st = stats(p);
    /* a dead trimmer's counts, settled by the sweep once its pages went,
     * are no failed refill's (before: its granules were counted given
     * back, their pages gone; killed before its release, its pages are
     * given back by the sweep and counted) */
    if (op == 0 && !strcmp(point, "elastic.trim.released"))
        cr_expect_eq(st.refill_given_back, given0, "%s: %llu bytes counted given back by refills",
                     point, (unsigned long long)(st.refill_given_back - given0));
    /* the count palloc's [resident first] reads is the granules' (the sweep sets it right) */
    uint64_t hint = 0;
    for (uint32_t s = 0; s < p->nsub; s++) hint += dp_load_relaxed(&p->hdr->released_hint[s]);
    cr_expect_eq(hint, st.released_bytes / GRANULE, "%s: released_hint says %llu granules, the table %zu", point,
                 (unsigned long long)hint, st.released_bytes / GRANULE);
    /* a kill releases at most one piece (32 MiB), or makes one resident */
    if (op == 0) cr_expect_leq(st.released_bytes, 32 * MIB, "%s: %zu released", point, st.released_bytes);
    else cr_expect_geq(st.released_bytes + 32 * MIB, rel0, "%s: %zu released of %zu", point, st.released_bytes, rel0);
    /* every state is one the next trim and refill take as it is */
    cr_assert_eq(dsmpool_trim(p, 0, &got), 0, "%s", dsmpool_last_error());
    cr_expect_eq(stats(p).released_bytes, free0 / GRANULE * GRANULE, "%s: a free granule was not released", point);
    cr_assert_eq(dsmpool_prefault_free(p, SIZE_MAX, &got), 0, "%s", dsmpool_last_error());
    cr_expect_eq(stats(p).released_bytes, 0);
    cr_expect_eq(held_bytes(p), held0, "%s: the file holds %lld bytes, %lld at first", point, held_bytes(p), held0);
    test_check_ok(p);
    dsmpool_destroy(p);
}

Test(elastic, kill_trim_claimed) { kill_at("elastic.trim.claimed", 0); }
Test(elastic, kill_trim_marked) { kill_at("elastic.trim.marked", 0); }
Test(elastic, kill_trim_released) { kill_at("elastic.trim.released", 0); }
Test(elastic, kill_refill_claimed) { kill_at("elastic.refill.claimed", 1); }
Test(elastic, kill_refill_populated) { kill_at("elastic.refill.populated", 1); }
Test(elastic, kill_refill_marked) { kill_at("elastic.refill.marked", 1); }
Test(elastic, kill_refill_on_demand_populated) { kill_at("resident.refill.populated", 2); }
Test(elastic, kill_trim_inside_the_mark) { kill_at("resident.mark.partway", 0); }
Test(elastic, kill_refill_inside_the_mark) { kill_at("resident.mark.partway", 1); }

/* palloc.c [lazy tree]: a process killed after making a never-used
 * granule's tree pages resident and before clearing its "no tree" mark
 * (resident.c res_tables) leaves the pages there, the mark set and its
 * busy count (resident.c [tree give-back]), which the leak sweep settles,
 * and nothing taken: the next allocation there makes them resident again
 * (a populate of pages that are there) and is served. */
Test(elastic, kill_between_tree_pages_and_their_mark) {
    dsmpool_config cfg = pool_config(64 * MIB, DSMPOOL_BACKING_MEMFD, DSMPOOL_HUGE_OFF, 2 * MIB);
    cfg.numa = DSMPOOL_NUMA_OFF; /* (sub-pool 0 is the pool) */
    dsmpool *p = NULL;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "%s", dsmpool_last_error());
    cr_assert_gt(p->geo.sub[0].geom.nlevels, 2);
    size_t free0 = test_pool_free(p);
    uint64_t marked0 = 0, g = 0;
    for (uint64_t k = 0; k < p->geo.res_count; k++)
        if (dp_load_relaxed(&p->res[k]) & DP_RES_NOTREE) marked0++, g = k;
    cr_assert_gt(marked0, 0, "no granule's tree pages were left out at creation");
    pid_t c = fork();
    if (c == 0) { /* a claim of 64 KiB in granule g, never used: it opens g's nodes */
        if (dp_self(p) != 0) _exit(4); /* a slot of its own */
        inj_point = "resident.tables.populated";
        dp_inject_fn = die_at;
        dp_bracket_open(p); /* (as every claim's: proc.c [brackets]) */
        (void)dp_pa_claim(&p->pa[0], g << 9, 4, dp_owner(p));
        _exit(5);
    }
    cr_assert_eq(test_wait(c), 128 + SIGKILL, "the child did not die between the tree pages and their mark");
    test_recover_all(p);
    cr_expect_eq(test_pool_free(p), free0, "free bytes are not what they were");
    uint64_t marked = 0;
    for (uint64_t k = 0; k < p->geo.res_count; k++) marked += (dp_load_relaxed(&p->res[k]) & DP_RES_NOTREE) != 0;
    cr_expect_eq(marked, marked0, "a mark was cleared by the process that died before clearing it");
    test_check_ok(p);
    cr_expect(dp_load_relaxed(&p->res[g]) & DP_RES_NOTREE, "the granule's mark is gone");
    cr_assert_eq(dp_pa_claim(&p->pa[0], g << 9, 4, dp_owner(p)), 0, "%s", dsmpool_last_error());
    cr_expect(!(dp_load_relaxed(&p->res[g]) & DP_RES_NOTREE), "the served claim left its granule marked");
    cr_assert_eq(dp_pa_free(&p->pa[0], g << 9, 4), 0);
    test_check_ok(p);
    dsmpool_destroy(p);
}

/* A checker beside a leak sweep that is returning a dead trimmer's piece:
 * the piece is allocated and owned by nothing until the sweep frees it, so
 * the checker must not judge it (0 or -EBUSY, never -EUCLEAN). The sweep
 * once cleared sweep_needed before it ran, and a checker in another process
 * then called the piece a leak (found by the TSan kill soak). */
static int sweep_stop[2], sweep_stopped[2];
static void stop_in_sweep(const char *point) {
    if (strcmp(point, "recover.sweep.quiet")) return;
    char b = 's';
    if (write(sweep_stopped[1], &b, 1) != 1) _exit(121);
    if (read(sweep_stop[0], &b, 1) != 1) _exit(122);
}

Test(elastic, a_checker_beside_a_sweep_does_not_cry_wolf, .timeout = 60) {
    dsmpool *p = mkpool(DSMPOOL_BACKING_MEMFD, NULL, 64 * MIB);
    size_t free0 = test_pool_free(p), got;
    pid_t k = fork();
    if (k == 0) { /* dies holding a piece it claimed to trim */
        inj_point = "elastic.trim.claimed";
        dp_inject_fn = die_at;
        dsmpool_trim(p, 0, &got);
        _exit(5);
    }
    cr_assert_eq(test_wait(k), 128 + SIGKILL, "the trimmer did not die at its claim");
    cr_assert_eq(pipe(sweep_stop), 0);
    cr_assert_eq(pipe(sweep_stopped), 0);
    pid_t s = fork();
    if (s == 0) { /* recovers the trimmer, and stops inside the sweep that follows */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dp_inject_fn = stop_in_sweep;
        _exit(dsmpool_recover(p) == 0 ? 0 : 6);
    }
    char b;
    cr_assert_eq(read(sweep_stopped[0], &b, 1), 1, "the sweep did not start");
    int r = dsmpool_check(p);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", dsmpool_last_error());
    cr_assert_eq(write(sweep_stop[1], "g", 1), 1);
    cr_assert_eq(test_wait(s), 0, "the sweeper");
    cr_expect(r == 0 || r == -EBUSY, "a check beside the sweep: %d %s", r, msg);
    cr_log_info("a check beside a sweep in progress: %d %s", r, msg);
    test_recover_all(p);
    cr_expect_eq(test_pool_free(p), free0, "the sweep did not return the piece");
    test_check_ok(p);
    dsmpool_destroy(p);
}

/* The sweep sets the allocator's count of released granules right after a
 * death between a mark and its count: a trimmer killed after its first
 * granule's mark leaves it one short. A live trimmer whose marks count
 * while the sweep is in its window (the sweep stopped there) must keep its
 * part. The defect (found by review): the fix was a CAS from the value the
 * sweep read, which the live trimmer's count made fail, so the death's
 * skew stayed, and a later refill wrapped the count below 0. */
static int hint_go[2], hint_done[2];
static void trim_in_sweep(const char *point) {
    if (strcmp(point, "recover.sweep.quiet")) return;
    char b = 'g';
    if (write(hint_go[1], &b, 1) != 1) _exit(121);
    if (read(hint_done[0], &b, 1) != 1) _exit(122);
}

static uint64_t released_count(dsmpool *p, bool words) {
    uint64_t n = 0;
    for (uint32_t s = 0; s < p->nsub; s++) n += words ? dp_res_released_in(p, s) : dp_res_hint(p, s);
    return n;
}

Test(elastic, the_sweeps_fix_of_the_released_count_keeps_a_live_trims_part, .timeout = 60) {
    dsmpool *p = mkpool(DSMPOOL_BACKING_MEMFD, NULL, 64 * MIB);
    size_t got;
    cr_assert_eq(pipe(hint_go), 0);
    cr_assert_eq(pipe(hint_done), 0);
    int ready[2];
    cr_assert_eq(pipe(ready), 0);
    pid_t h = fork();
    if (h == 0) { /* a live trimmer, waiting for its cue */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (dp_self(p) != 0 || write(ready[1], "r", 1) != 1) _exit(3);
        char b;
        if (read(hint_go[0], &b, 1) != 1) _exit(4);
        int r = dsmpool_trim(p, 0, &got);
        if (write(hint_done[1], "d", 1) != 1) _exit(5);
        _exit(r ? 6 : 0);
    }
    char b;
    cr_assert_eq(read(ready[0], &b, 1), 1, "the trimmer did not start");
    pid_t k = fork();
    if (k == 0) { /* dies after its trim's first mark, before the count */
        inj_point = "resident.mark.partway";
        dp_inject_fn = die_at;
        dsmpool_trim(p, 0, &got);
        _exit(5);
    }
    cr_assert_eq(test_wait(k), 128 + SIGKILL, "the trimmer did not die at its first mark");
    uint64_t h0 = released_count(p, false), w0 = released_count(p, true);
    dp_inject_fn = trim_in_sweep;
    (void)dsmpool_recover(p);
    dp_inject_fn = NULL;
    cr_assert_eq(test_wait(h), 0, "the live trimmer");
    test_recover_all(p);
    uint64_t h1 = released_count(p, false), w1 = released_count(p, true);
    cr_log_info("released granules after the death: counted %llu, marked %llu; after the sweep and the live trim: "
                "counted %llu, marked %llu", (unsigned long long)h0, (unsigned long long)w0,
                (unsigned long long)h1, (unsigned long long)w1);
    cr_expect_neq(h0, w0, "the death left the count as it was: nothing to fix");
    cr_expect_eq(h1, w1, "the count is off by %lld after the sweep", (long long)(h1 - w1));
    cr_assert_eq(dsmpool_prefault_free(p, SIZE_MAX, &got), 0, "%s", dsmpool_last_error());
    cr_expect_eq(released_count(p, false), released_count(p, true), "and after a refill of everything");
    test_check_ok(p);
    dsmpool_destroy(p);
}

/* The allocator's count of released granules is a hint: scribbled to 0 or
 * to more than the pool has, a trim still gives back what is warm and a
 * refill ahead still finds what is released (02daa51 weighed them on the
 * count: a trim then released nothing, a refill found nothing; review). */
Test(elastic, a_scribbled_released_count_stops_no_trim_nor_refill, .timeout = 60) {
    static const uint64_t bad[] = {0, UINT64_MAX / 2};
    for (int i = 0; i < 2; i++) {
        dsmpool *p = mkpool(DSMPOOL_BACKING_MEMFD, NULL, 256 * MIB);
        size_t got = 0, rel = 0;
        dp_store_relaxed(&p->hdr->released_hint[0], bad[i]);
        cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
        cr_expect_gt(rel, 128 * MIB, "count %#llx: the trim gave back %zu bytes", (unsigned long long)bad[i], rel);
        dp_store_relaxed(&p->hdr->released_hint[0], bad[i]);
        cr_assert_eq(dsmpool_prefault_free(p, SIZE_MAX, &got), 0, "%s", dsmpool_last_error());
        cr_expect_eq(got, rel, "count %#llx: the refill made %zu of %zu bytes resident", (unsigned long long)bad[i],
                     got, rel);
        dsmpool_destroy(p);
    }
}

/* ---- a released block comes back resident and zeroed ---------------------------- */

Test(elastic, released_block_comes_back_zeroed) {
    dsmpool *p = mkpool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 32 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s), 0, "%s", dsmpool_last_error());
    memset(dsmpool_seg_address(s), 0xab, dsmpool_seg_size(s));
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    size_t rel;
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    dsmpool_stats st0 = stats(p);
    cr_assert_eq(st0.warm_free_bytes, 0, "trim(0) left %zu free bytes resident", st0.warm_free_bytes);
    cr_assert_eq(dsmpool_seg_create(p, 32 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s), 0, "%s", dsmpool_last_error());
    dsmpool_stats st1 = stats(p);
    cr_expect_gt(st1.refills_on_demand, st0.refills_on_demand, "no refill on demand was counted");
    cr_expect_geq(st1.refilled_on_demand - st0.refilled_on_demand, 32 * MIB);
    const unsigned char *b = dsmpool_seg_address(s);
    size_t n = dsmpool_seg_size(s), nz = 0;
    /* resident: mincore says every page is there before we touch it */
    unsigned char vec[32 * MIB / 4096];
    cr_assert_eq(mincore((void *)b, 32 * MIB, vec), 0);
    size_t absent = 0;
    for (size_t i = 0; i < sizeof vec; i++) absent += !(vec[i] & 1);
    cr_expect_eq(absent, 0, "%zu pages of the block handed out are not resident", absent);
    for (size_t i = 0; i < n; i++) nz += b[i] != 0;
    cr_expect_eq(nz, 0, "%zu bytes of a released block handed out again are not zero", nz);
    dsmpool_seg_detach(s);
    test_check_ok(p);
    dsmpool_destroy(p);
}

/* ---- the policy -------------------------------------------------------------- */

static dsmpool *mkelastic(size_t size, size_t rmin, unsigned idle_ms, size_t warm) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = size;
    cfg.resident_min = rmin;
    cfg.idle_release_ms = idle_ms;
    cfg.warm_bytes = warm;
    dsmpool *p = NULL;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "create: %s", dsmpool_last_error());
    return p;
}

/* Run maintenance steps as they ask, until done() or the time is up. */
static bool maintain_until(dsmpool *p, double secs, bool (*done)(const dsmpool_stats *, const void *),
                           const void *arg) {
    uint64_t end = test_now_ns() + (uint64_t)(secs * 1e9);
    while (test_now_ns() < end) {
        unsigned next = 0;
        cr_assert_eq(dsmpool_maintain(p, &next), 0, "maintain: %s", dsmpool_last_error());
        dsmpool_stats st = stats(p);
        if (done(&st, arg)) return true;
        usleep(next > 200 ? 200000 : next * 1000u);
    }
    return false;
}

static bool resident_is(const dsmpool_stats *st, const void *arg) { return st->resident_bytes == *(const size_t *)arg; }
static bool warm_at_least(const dsmpool_stats *st, const void *arg) {
    return st->warm_free_bytes >= *(const size_t *)arg;
}

/* [idle stamps] forced: a step looks at a free granule, an allocation takes
 * it (its one load finds no stamp yet), and the step stamps it. The next
 * step must take that stamp away while the granule is held, or the memory
 * goes the moment it is freed, however briefly it was idle. The race is
 * forced by stamping a held granule as the step would have. */
Test(elastic, a_stamp_on_a_granule_in_use_goes_at_the_next_step, .timeout = 60) {
    dsmpool *p = mkelastic(64 * MIB, 8 * MIB, 1000, 0);
    uint64_t blk;
    cr_assert_eq(dp_pool_alloc(p, 9, &blk), 0, "%s", dsmpool_last_error()); /* 2 MiB: one granule */
    uint64_t g = (DP_BLOCK_OFF(blk) - p->geo.data_off) >> DP_RES_SHIFT;
    cr_assert(dp_res_stamp(p, g, 1), "the held granule's word was %#llx", (unsigned long long)dp_res_load(p, g));
    unsigned next;
    cr_assert_eq(dsmpool_maintain(p, &next), 0, "%s", dsmpool_last_error());
    cr_expect_eq(dp_res_load(p, g), 0, "a granule in use keeps a stamp of %u ms after the epoch",
                 DP_RES_STAMP(dp_res_load(p, g)));
    cr_expect_eq(dp_pool_free(p, blk), 0);
    cr_assert_eq(dsmpool_maintain(p, &next), 0, "%s", dsmpool_last_error());
    cr_expect_eq(dp_res_load(p, g) & DP_RES_RELEASED, 0, "freed just now, and released by the same step");
    test_check_ok(p);
    dsmpool_destroy(p);
}

Test(elastic, maintain_releases_idle_memory_down_to_min_plus_warm, .timeout = 60) {
    dsmpool *p = mkelastic(256 * MIB, 32 * MIB, 100, 16 * MIB);
    dsmpool_stats st = stats(p);
    cr_assert(st.elastic);
    cr_expect_eq(st.resident_bytes, 32 * MIB);
    /* a query's worth of memory, used and freed */
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 120 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s), 0, "%s", dsmpool_last_error());
    memset(dsmpool_seg_address(s), 1, dsmpool_seg_size(s));
    dsmpool_seg_detach(s);
    st = stats(p);
    cr_expect_geq(st.resident_bytes, 120 * MIB);
    size_t want = 48 * MIB; /* resident_min + warm_bytes */
    uint64_t t0 = test_now_ns();
    bool ok = maintain_until(p, 5, resident_is, &want);
    st = stats(p);
    cr_expect(ok, "after 5 s of maintenance %zu bytes are resident, not %zu", st.resident_bytes, want);
    cr_expect_geq((double)(test_now_ns() - t0) / 1e6, 100.0, "memory went before it had been idle 100 ms");
    cr_expect_gt(st.releases, 0);
    cr_expect_gt(st.maintain_steps, 0);
    unsigned next = 0;
    cr_assert_eq(dsmpool_maintain(p, &next), 0);
    cr_expect_gt(next, 0, "a pool held at resident_min + warm_bytes asks to be called again at once");
    cr_log_info("maintain: resident %zu MiB after %.0f ms (idle_release_ms 100)", st.resident_bytes >> 20,
                (double)(test_now_ns() - t0) / 1e6);
    /* memory in use is never released, and the warm reserve is refilled:
     * 20 segments of 2 MiB take resident memory first (the allocator's
     * [resident first]), leaving less than warm_bytes warm */
    dsmpool_seg *segs[40];
    int nseg = 0;
    while (nseg < 20 || (nseg < 40 && stats(p).warm_free_bytes >= 16 * MIB)) {
        cr_assert_eq(dsmpool_seg_create(p, 2 * MIB, DSMPOOL_SEG_NO_FALLBACK, &segs[nseg]), 0, "%s",
                     dsmpool_last_error());
        memset(dsmpool_seg_address(segs[nseg]), 2, dsmpool_seg_size(segs[nseg]));
        nseg++;
    }
    st = stats(p);
    /* (the preference is a hint on the slow path: a partly used 32 MiB node
     * is still taken before a free one, even where its warm granules are gone) */
    cr_log_info("maintain: %d segments of 2 MiB from 48 MiB resident: %llu more refills on demand", nseg,
                (unsigned long long)st.refills_on_demand - 1);
    cr_expect_lt(st.warm_free_bytes, 16 * MIB);
    size_t warm = 16 * MIB;
    cr_expect(maintain_until(p, 5, warm_at_least, &warm), "the warm reserve was not refilled: %zu free resident",
              stats(p).warm_free_bytes);
    cr_expect_gt(stats(p).refills_ahead, 0);
    usleep(300000);
    for (int i = 0; i < 10; i++) dsmpool_maintain(p, NULL);
    size_t bad = 0;
    for (int i = 0; i < nseg; i++) {
        const unsigned char *b = dsmpool_seg_address(segs[i]);
        for (size_t k = 0; k < dsmpool_seg_size(segs[i]); k += 4096) bad += b[k] != 2;
    }
    cr_expect_eq(bad, 0, "%zu pages of held segments changed", bad);
    st = stats(p);
    cr_expect_geq(st.resident_bytes, (size_t)nseg * 2 * MIB + 16 * MIB, "held + warm must stay resident");
    cr_expect_geq(st.warm_free_bytes, 16 * MIB);
    for (int i = 0; i < nseg; i++) dsmpool_seg_detach(segs[i]);
    test_check_ok(p);
    dsmpool_destroy(p);
}

Test(elastic, maintainer_thread, .timeout = 60) {
    dsmpool *p = mkelastic(128 * MIB, 16 * MIB, 50, 8 * MIB);
    size_t got;
    cr_assert_eq(dsmpool_prefault_free(p, SIZE_MAX, &got), 0);
    cr_assert_eq(dsmpool_maintainer_start(p, 20), 0, "%s", dsmpool_last_error());
    cr_expect_eq(dsmpool_maintainer_start(p, 20), -EALREADY);
    size_t want = 24 * MIB;
    uint64_t end = test_now_ns() + 5000000000ull;
    while (stats(p).resident_bytes != want && test_now_ns() < end) usleep(10000);
    cr_expect_eq(stats(p).resident_bytes, want, "the helper thread left %zu bytes resident", stats(p).resident_bytes);
    cr_assert_eq(dsmpool_maintainer_stop(p), 0);
    cr_assert_eq(dsmpool_maintainer_start(p, 0), 0, "%s", dsmpool_last_error());
    dsmpool_detach(p); /* stops it */
}

Test(elastic, no_policy_does_nothing) {
    dsmpool *p = mkpool(DSMPOOL_BACKING_ANON, NULL, 64 * MIB);
    unsigned next = 0;
    cr_assert_eq(dsmpool_maintain(p, &next), 0);
    cr_expect_eq(next, 1000);
    cr_expect_eq(stats(p).released_bytes, 0);
    dsmpool_destroy(p);
}

/* ---- reservations beyond memory ------------------------------------------------ */

Test(elastic, reservation_64g_serves_what_fits, .timeout = 120) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = 64 * GIB;
    dsmpool *p = NULL;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "create of a 64 GiB reservation: %s", dsmpool_last_error());
    dsmpool_stats st = stats(p);
    cr_expect(st.elastic, "a size beyond memory is a reservation");
    cr_expect_leq(st.resident_bytes, 2 * GRANULE);
    long rss_kb = test_smaps_kb(p->base, p->size, "Rss");
    cr_log_info("64 GiB reservation: tables %llu MiB, this process's RSS of it %ld MiB", (unsigned long long)(p->geo.data_off >> 20),
                rss_kb >> 10);
    /* 2 GiB of it used (the rest would fit too, but this machine is shared);
     * 256 MiB under TSan */
    dsmpool_seg *s[8];
    int nseg = UNDER_TSAN ? 1 : 8;
    for (int i = 0; i < nseg; i++) {
        cr_assert_eq(dsmpool_seg_create(p, 256 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s[i]), 0, "%s", dsmpool_last_error());
        memset(dsmpool_seg_address(s[i]), i + 1, dsmpool_seg_size(s[i]));
    }
    st = stats(p);
    cr_expect_geq(st.resident_bytes, (size_t)nseg * 256 * MIB);
    for (int i = 0; i < nseg; i++) dsmpool_seg_detach(s[i]);
    size_t rel;
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0);
    cr_expect_geq(rel, (size_t)nseg * 256 * MIB);
    test_check_ok(p);
    dsmpool_destroy(p);
}

/* POSIX in a tmpfs of 1 GiB: the reservation is 64 GiB, the tmpfs fills,
 * and the allocation that finds no room is -ENOMEM, not a SIGBUS. */
Test(elastic, reservation_in_a_full_tmpfs_says_enomem, .timeout = 120) {
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1g") != 0)
        cr_skip_test("no private /dev/shm of 1 GiB (%s; not root?)", strerror(errno));
    char nm[96];
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = 64 * GIB;
    cfg.backing = DSMPOOL_BACKING_POSIX;
    cfg.name = test_name(nm, sizeof nm, "el-tmpfs");
    dsmpool *p = NULL;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "create: %s", dsmpool_last_error());
    dsmpool_seg *s[64];
    int n = 0, r = 0;
    while (n < 64 && (r = dsmpool_seg_create(p, 64 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s[n])) == 0) {
        memset(dsmpool_seg_address(s[n]), 1, dsmpool_seg_size(s[n]));
        n++;
    }
    cr_expect_eq(r, -ENOMEM, "the allocation past the tmpfs's room: %d (%s)", r, dsmpool_last_error());
    cr_expect(strstr(dsmpool_last_error(), "could not be made resident"), "the message: %s", dsmpool_last_error());
    cr_expect_geq(n, 8, "only %d segments of 64 MiB fit in a 1 GiB tmpfs", n);
    cr_log_info("full tmpfs: %d segments of 64 MiB, then %s", n, dsmpool_last_error());
    dsmpool_stats st = stats(p);
    cr_expect_gt(st.refill_failures, 0);
    for (int i = 0; i < n; i++) dsmpool_seg_detach(s[i]);
    test_check_ok(p);
    dsmpool_destroy(p);
}

/* ---- a memory cgroup ------------------------------------------------------------ */

/* Make a memory cgroup limited to 2 GiB under this process's own (v2, or v1's
 * memory controller); its path in dir, or false with why. */
static bool cgroup_make(char *dir, size_t n, char *why, size_t wn) {
    char line[512], v1[400] = "", v2[400] = "";
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return snprintf(why, wn, "/proc/self/cgroup is unreadable"), false;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b) continue;
        if (!strncmp(a, "::", 2)) snprintf(v2, sizeof v2, "%s", b + 1);
        else if (!strncmp(a + 1, "memory:", 7)) snprintf(v1, sizeof v1, "%s", b + 1);
    }
    fclose(f);
    const char *tries[2][3] = {{"/sys/fs/cgroup", v2, "memory.max"}, {"/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes"}};
    char probe[800];
    for (int i = 0; i < 2; i++) {
        if (i == 0) { /* v2 with the memory controller on */
            snprintf(probe, sizeof probe, "%s%s/cgroup.controllers", tries[0][0], v2);
            char c[256] = "";
            if (test_read_file(probe, c, sizeof c) != 0 || !strstr(c, "memory")) continue;
        } else if (!v1[0])
            continue;
        snprintf(dir, n, "%s%s/dsmpool-test-%llu", tries[i][0], strcmp(tries[i][1], "/") ? tries[i][1] : "", test_uid());
        if (mkdir(dir, 0755) != 0) {
            snprintf(why, wn, "mkdir %s: %s", dir, strerror(errno));
            continue;
        }
        snprintf(probe, sizeof probe, "%s/%s", dir, tries[i][2]);
        if (test_write_file(probe, "2147483648") != 0) {
            snprintf(why, wn, "writing %s failed", probe);
            rmdir(dir);
            continue;
        }
        return true;
    }
    if (!why[0]) snprintf(why, wn, "no cgroup v2 with the memory controller and no v1 memory hierarchy");
    return false;
}

Test(elastic, cgroup_2g_reservation_16g_says_enomem_not_oom, .timeout = 180) {
    char dir[700], why[900] = "";
    if (UNDER_TSAN)
        cr_skip_test("under ThreadSanitizer its shadow memory is charged to the cgroup too: the limit is not "
                     "the pool's to reach");
    if (!cgroup_make(dir, sizeof dir, why, sizeof why)) cr_skip_test("no memory cgroup can be made here: %s", why);
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t c = fork();
    if (c == 0) {
        char go;
        close(pfd[1]);
        if (read(pfd[0], &go, 1) != 1) _exit(2);
        dsmpool_config cfg;
        dsmpool_config_init(&cfg);
        cfg.size = 16 * GIB;
        cfg.idle_release_ms = 1000; /* elastic */
        dsmpool *p = NULL;
        if (dsmpool_create(&cfg, &p) != 0) {
            fprintf(stderr, "create: %s\n", dsmpool_last_error());
            _exit(3);
        }
        size_t served = 0;
        int r;
        dsmpool_seg *s;
        while ((r = dsmpool_seg_create(p, 64 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s)) == 0) {
            memset(dsmpool_seg_address(s), 1, dsmpool_seg_size(s));
            served += dsmpool_seg_size(s);
            if (served > 3 * GIB) _exit(4); /* beyond the limit: the check did not hold */
        }
        fprintf(stderr, "served %zu MiB, then %d: %s\n", served >> 20, r, dsmpool_last_error());
        if (r != -ENOMEM) _exit(5);
        if (served < GIB) _exit(6);
        if (!strstr(dsmpool_last_error(), "cgroup")) _exit(7); /* the message names the limit */
        _exit(0);
    }
    close(pfd[0]);
    char procs[800];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)c);
    int mv = test_write_file(procs, pid);
    cr_assert_eq(write(pfd[1], "g", 1), 1);
    close(pfd[1]);
    int st = test_wait(c);
    char oom[256] = "";
    snprintf(procs, sizeof procs, "%s/memory.oom_control", dir);
    test_read_file(procs, oom, sizeof oom);
    snprintf(procs, sizeof procs, "%s/memory.events", dir);
    if (!oom[0]) test_read_file(procs, oom, sizeof oom);
    rmdir(dir);
    cr_assert_eq(mv, 0, "could not move the child into %s", dir);
    cr_expect_neq(st, 128 + SIGBUS, "SIGBUS");
    cr_expect_neq(st, 128 + SIGKILL, "the OOM killer (or a kill): %s", oom);
    cr_expect_eq(st, 0, "the child in a 2 GiB cgroup: exit %d (3 create failed, 4 served past the limit, 5 not "
                 "-ENOMEM, 6 served under 1 GiB, 7 the message does not name the cgroup); %s", st, oom);
    cr_expect(!strstr(oom, "oom_kill 1") && !strstr(oom, "oom_kill 2"), "%s", oom);
}

/* ---- dsmpool-inspect shows it ------------------------------------------------------ */

/* The inspector's stdout for args, run through python when expr is given. */
static void run_inspect(const char *args, const char *py, char *out, size_t n) {
    const char *tool = getenv("DSMPOOL_INSPECT");
    char cmd[1200];
    if (py)
        snprintf(cmd, sizeof cmd, "%s %s | python3 -c 'import json,sys; d=json.load(sys.stdin); print(%s)' 2>&1",
                 tool, args, py);
    else
        snprintf(cmd, sizeof cmd, "%s %s 2>&1", tool, args);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t got = fread(out, 1, n - 1, f);
    out[got] = 0;
    pclose(f);
    while (got && out[got - 1] == '\n') out[--got] = 0;
}

Test(elastic, inspect_shows_residency, .timeout = 60) {
    if (!getenv("DSMPOOL_INSPECT")) cr_skip_test("DSMPOOL_INSPECT is not set (built without the tools)");
    test_private_shm();
    char nm[96], args[200], out[4096], want[400];
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = 128 * MIB;
    cfg.backing = DSMPOOL_BACKING_POSIX;
    cfg.name = test_name(nm, sizeof nm, "el-inspect");
    cfg.resident_min = 8 * MIB;
    cfg.idle_release_ms = 500;
    cfg.warm_bytes = 4 * MIB;
    dsmpool *p = NULL;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "%s", dsmpool_last_error());
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 20 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s), 0, "%s", dsmpool_last_error());
    dsmpool_seg_detach(s);
    size_t rel;
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0);
    dsmpool_stats st = stats(p);
    snprintf(args, sizeof args, "--json --view pool %s", nm);
    run_inspect(args, "sorted(d[\"pool\"][\"residency\"].items())", out, sizeof out);
    snprintf(want, sizeof want, "('elastic', True)");
    cr_expect(strstr(out, want), "%s", out);
    snprintf(want, sizeof want, "('released_bytes', %zu)", st.released_bytes);
    cr_expect(strstr(out, want), "want %s in %s", want, out);
    snprintf(want, sizeof want, "('resident_bytes', %zu)", st.resident_bytes);
    cr_expect(strstr(out, want), "want %s in %s", want, out);
    snprintf(want, sizeof want, "('refills_on_demand', %llu)", (unsigned long long)st.refills_on_demand);
    cr_expect(strstr(out, want), "want %s in %s", want, out);
    snprintf(want, sizeof want, "('releases', %llu)", (unsigned long long)st.releases);
    cr_expect(strstr(out, want), "want %s in %s", want, out);
    cr_expect(strstr(out, "('idle_release_ms', 500)") && strstr(out, "('warm_bytes', 4194304)"), "%s", out);
    snprintf(args, sizeof args, "--view pool %s", nm);
    run_inspect(args, NULL, out, sizeof out);
    snprintf(want, sizeof want, "residency   elastic: %zu bytes resident, %zu released", st.resident_bytes,
             st.released_bytes);
    cr_expect(strstr(out, want), "want \"%s\" in:\n%s", want, out);
    cr_expect(strstr(out, "releases    "), "%s", out);
    dsmpool_destroy(p);
}

/* ---- warm memory first ---------------------------------------------------------- */

/* [resident first] (palloc.c): while free resident memory fits a request, an
 * allocation takes it and does not make released memory resident. A pool
 * trimmed to nothing, 64 MiB made resident again, then segments of each
 * size from 2 MiB to 16 MiB and area chunks, up to 48 MiB in all, freed and
 * taken again: no refill on demand. Also after the trimmer's claims left
 * nodes open (a second trim and refill first). */
Test(elastic, allocations_take_warm_memory_first, .timeout = 60) {
    test_private_shm();
    dsmpool *p = mkpool(DSMPOOL_BACKING_ANON, NULL, 512 * MIB);
    size_t got = 0;
    for (int pass = 0; pass < 2; pass++) {
        cr_assert_eq(dsmpool_trim(p, 0, NULL), 0, "%s", dsmpool_last_error());
        cr_assert_eq(dsmpool_prefault_free(p, 64 * MIB, &got), 0, "%s", dsmpool_last_error());
        cr_assert_eq(got, 64 * MIB);
        dsmpool_stats s0 = stats(p);
        cr_assert_geq(s0.warm_free_bytes, 64 * MIB);
        for (int round = 0; round < 4; round++) {
            static const size_t sizes[] = {2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 2 * MIB, 6 * MIB, 10 * MIB};
            dsmpool_seg *segs[8];
            size_t used = 0;
            int n = 0;
            for (size_t i = 0; i < sizeof sizes / sizeof *sizes && used + sizes[i] <= 48 * MIB; i++) {
                cr_assert_eq(dsmpool_seg_create(p, sizes[i], 0, &segs[n]), 0, "%s", dsmpool_last_error());
                cr_assert(!dsmpool_seg_is_fallback(segs[n]));
                used += sizes[i];
                n++;
            }
            for (int i = 0; i < n; i++) dsmpool_seg_detach(segs[(i * 3 + round) % n]);
        }
        dsmpool_stats s1 = stats(p);
        cr_expect_eq(s1.refills_on_demand - s0.refills_on_demand, 0,
                     "pass %d: %llu allocations (%llu MiB) made released memory resident while %zu MiB of "
                     "resident memory was free", pass,
                     (unsigned long long)(s1.refills_on_demand - s0.refills_on_demand),
                     (unsigned long long)((s1.refilled_on_demand - s0.refilled_on_demand) >> 20),
                     s0.warm_free_bytes >> 20);
        cr_expect_eq(s1.refills_while_warm_fit, 0);
    }
    dsmpool_destroy(p);
}

/* refills_while_warm_fit counts: a 2 MiB segment made resident on demand
 * (nothing warm is free), and while its refill runs (the injection point
 * after the populate), another thread frees a warm 2 MiB segment: when the
 * allocation returns, warm memory holds a run of its size, and the pool
 * counts one. (The allocator cannot be made to miss warm memory: this is
 * the count's own test.) */
static dsmpool_seg *warm_seg;
static void *detach_warm(void *arg) {
    (void)arg;
    dsmpool_seg_detach(warm_seg);
    return NULL;
}
static void free_warm_at(const char *point) {
    if (strcmp(point, "resident.refill.populated") != 0 || !warm_seg) return;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, detach_warm, NULL), 0);
    pthread_join(th, NULL);
    warm_seg = NULL;
}
Test(elastic, refills_while_warm_fit_are_counted, .timeout = 60) {
    test_private_shm();
    dsmpool *p = mkpool(DSMPOOL_BACKING_ANON, NULL, 256 * MIB);
    cr_assert_eq(dsmpool_trim(p, 0, NULL), 0, "%s", dsmpool_last_error());
    cr_assert_eq(dsmpool_seg_create(p, 2 * MIB, 0, &warm_seg), 0, "%s", dsmpool_last_error());
    dsmpool_stats s0 = stats(p);
    cr_assert_eq(s0.refills_while_warm_fit, 0);
    dp_inject_fn = free_warm_at;
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 2 * MIB, 0, &s), 0, "%s", dsmpool_last_error());
    dp_inject_fn = NULL;
    cr_assert_null(warm_seg, "the refill on demand did not happen");
    dsmpool_stats s1 = stats(p);
    cr_expect_eq(s1.refills_on_demand - s0.refills_on_demand, 1);
    cr_expect_eq(s1.refills_while_warm_fit, 1, "counted %llu", (unsigned long long)s1.refills_while_warm_fit);
    dsmpool_seg_detach(s);
    dsmpool_destroy(p);
}

/* [resident first] for blocks of 32 MiB and up (palloc.c): a 1 GiB pool
 * trimmed to nothing and 256 MiB made resident again; then blocks of 32,
 * 64 and 128 MiB, each freed before the next, take that warm memory and
 * make nothing resident on demand: straight away (the warm memory in free
 * 32 MiB nodes), and after 2 MiB segments used and freed all of it (left
 * in open, empty nodes, which only the search's reclaim makes free). The
 * defect: such blocks took the first free run by position, released
 * memory where the trimmer's claims had left it free, while 255 MiB of
 * resident memory was free (a refill of each block's whole size). */
Test(elastic, large_blocks_take_warm_memory_first, .timeout = 60) {
    test_private_shm();
    for (int used_first = 0; used_first < 2; used_first++) {
        dsmpool *p = mkpool(DSMPOOL_BACKING_ANON, NULL, 1024 * MIB);
        size_t got = 0;
        cr_assert_eq(dsmpool_trim(p, 0, NULL), 0, "%s", dsmpool_last_error());
        cr_assert_eq(dsmpool_prefault_free(p, 256 * MIB, &got), 0, "%s", dsmpool_last_error());
        cr_assert_eq(got, 256 * MIB);
        if (used_first) {
            dsmpool_seg *segs[120];
            for (int i = 0; i < 120; i++)
                cr_assert_eq(dsmpool_seg_create(p, 2 * MIB, 0, &segs[i]), 0, "%s", dsmpool_last_error());
            for (int i = 0; i < 120; i++) dsmpool_seg_detach(segs[i]);
        }
        static const size_t sizes[] = {32 * MIB, 64 * MIB, 128 * MIB};
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            dsmpool_stats s0 = stats(p);
            dsmpool_seg *seg;
            cr_assert_eq(dsmpool_seg_create(p, sizes[i], 0, &seg), 0, "%s", dsmpool_last_error());
            cr_assert(!dsmpool_seg_is_fallback(seg));
            dsmpool_stats s1 = stats(p);
            cr_expect_eq(s1.refills_on_demand - s0.refills_on_demand, 0,
                         "%s: a block of %zu MiB made %llu MiB resident while %zu MiB of resident memory "
                         "was free", used_first ? "after 2 MiB segments" : "straight away", sizes[i] >> 20,
                         (unsigned long long)((s1.refilled_on_demand - s0.refilled_on_demand) >> 20),
                         s0.warm_free_bytes >> 20);
            cr_expect_eq(s1.refills_while_warm_fit, 0, "the pool counted %llu refills while warm memory fit",
                         (unsigned long long)s1.refills_while_warm_fit);
            dsmpool_seg_detach(seg);
        }
        dsmpool_destroy(p);
    }
}

/* ---- the span directory of a reservation (layout.c [lazy directory]) ------- */

/* Granules whose directory page disagrees with their residency: a released
 * granule whose page is in the file, or a resident one whose page is not
 * (mincore reads the shmem object's pages, whoever mapped them). */
static uint64_t dir_pages_amiss(dsmpool *p, uint64_t *present) {
    uint64_t n = p->geo.res_count, amiss = 0;
    unsigned char *v = malloc(n);
    cr_assert(v);
    cr_assert_eq(mincore(p->base + p->geo.dir_off, n * 4096, v), 0, "mincore: %s", strerror(errno));
    *present = 0;
    for (uint64_t g = 0; g < n; g++) {
        bool released = dp_load_relaxed(&p->res[g]) & DP_RES_RELEASED;
        *present += v[g] & 1;
        amiss += released == (bool)(v[g] & 1);
    }
    free(v);
    return amiss;
}

/* The directory of an elastic pool in 4 KiB pages follows its granules: a
 * page each, resident with the granule, given back with it. Before: the
 * whole directory was resident from creation (8 bytes per 4 KiB of the
 * reservation: 2 GiB of a 1 TiB one). */
Test(elastic, the_directory_follows_the_granules, .timeout = 60) {
    dsmpool_config cfg = pool_config(1 * GIB, DSMPOOL_BACKING_MEMFD, DSMPOOL_HUGE_OFF, 4 * MIB);
    dsmpool *p = NULL;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "%s", dsmpool_last_error());
    cr_assert_eq(p->geo.dir_off % 4096, 0, "the directory is not on a page boundary");
    uint64_t present, amiss = dir_pages_amiss(p, &present);
    cr_expect_eq(amiss, 0, "at creation %llu granules' directory pages disagree with their residency "
                 "(%llu pages present of %llu)", (unsigned long long)amiss, (unsigned long long)present,
                 (unsigned long long)p->geo.res_count);
    cr_expect_eq(present, 2, "resident_min is 2 granules; %llu directory pages present", (unsigned long long)present);
    /* a segment and an area's chunks in released memory: refills on demand */
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 64 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s), 0, "%s", dsmpool_last_error());
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0, "%s", dsmpool_last_error());
    dsmpool_ptr c[64];
    for (int i = 0; i < 64; i++) cr_assert_eq(dsmpool_area_alloc(a, 32 * 1024, 0, &c[i]), 0, "%s", dsmpool_last_error());
    amiss = dir_pages_amiss(p, &present);
    cr_expect_eq(amiss, 0, "after the refills %llu granules' directory pages disagree (%llu present)",
                 (unsigned long long)amiss, (unsigned long long)present);
    cr_expect_geq(present, 32 + 2);
    for (int i = 0; i < 64; i++) cr_assert_eq(dsmpool_area_free(a, c[i]), 0, "%s", dsmpool_last_error());
    cr_assert_eq(dsmpool_area_destroy(a), 0, "%s", dsmpool_last_error());
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    size_t rel;
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    amiss = dir_pages_amiss(p, &present);
    cr_expect_eq(amiss, 0, "after the trim %llu granules' directory pages disagree (%llu present)",
                 (unsigned long long)amiss, (unsigned long long)present);
    /* dsmpool_prefault maps what is resident, and makes nothing else so */
    cr_assert_eq(dsmpool_prefault(p), 0, "%s", dsmpool_last_error());
    cr_expect_eq(dir_pages_amiss(p, &present), 0, "dsmpool_prefault made directory pages resident");
    test_check_ok(p);
    dsmpool_destroy(p);
}

/* ---- the allocator's tree of a reservation (palloc.c [lazy tree]) ---------- */

/* Sub-pool 0's tree pages of levels 0 and 1: how many are present; *need,
 * how many pages the granules not marked "no tree" have among them; and
 * *amiss, how many of those granules lack a page of theirs plus how many
 * pages are present that are neither theirs nor in the tables creation
 * makes resident (dp_table_ranges, with the pool's resident_min). */
static uint64_t tree_pages(dsmpool *p, uint64_t *need, uint64_t *amiss) {
    const dp_pa_geom *geo = &p->geo.sub[0].geom;
    uint64_t lo = geo->level_off[0] / 4096 * 4096, hi = geo->level_off[2], n = (hi - lo + 4095) / 4096, present = 0;
    unsigned char *v = malloc(n), *mine = calloc(n, 1);
    cr_assert(v && mine);
    cr_assert_eq(mincore(p->base + lo, n * 4096, v), 0, "mincore: %s", strerror(errno));
    for (uint64_t i = 0; i < n; i++) present += v[i] & 1;
    uint64_t tr[DP_TABLE_RANGES][2], resident[DSMPOOL_MAX_NODES] = {0};
    resident[0] = (p->geo.resident_min + 2 * MIB - 1) / (2 * MIB);
    unsigned nt = dp_table_ranges(&p->geo, true, 4096, resident, tr);
    for (unsigned i = 0; i < nt; i++)
        for (uint64_t a = tr[i][0]; a < tr[i][1]; a += 4096)
            if (a >= lo && a < lo + n * 4096) mine[(a - lo) / 4096] = 2; /* the tables' */
    *need = *amiss = 0;
    for (uint64_t g = 0; g < geo->level_count[1]; g++) {
        if (dp_load_relaxed(&p->res[g]) & DP_RES_NOTREE) continue;
        uint64_t off[2], len[2];
        dp_pa_tree_range(geo, g, 1, 4096, off, len);
        bool here = true; /* (a granule's leaves may lie across two pages) */
        for (unsigned L = 0; L < 2; L++)
            for (uint64_t k = (off[L] - lo) / 4096; k < (off[L] + len[L] - lo) / 4096; k++) {
                here &= v[k] & 1;
                *need += mine[k] != 1;
                mine[k] = 1;
            }
        *amiss += !here;
    }
    for (uint64_t i = 0; i < n; i++) *amiss += (v[i] & 1) && !mine[i];
    free(v);
    free(mine);
    return present;
}


/* An elastic pool of size bytes (MEMFD, 4 KiB pages, one sub-pool with a
 * lazy tree), resident_min min. */
static dsmpool *tree_mkpool(size_t size, size_t min) {
    dsmpool_config cfg = pool_config(size, DSMPOOL_BACKING_MEMFD, DSMPOOL_HUGE_OFF, min);
    cfg.numa = DSMPOOL_NUMA_OFF;
    dsmpool *p = NULL;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "%zu MiB: %s", size >> 20, dsmpool_last_error());
    cr_assert_eq(p->nsub, 1);
    cr_assert_gt(p->geo.sub[0].geom.nlevels, 2);
    return p;
}

/* The tree's two lowest levels follow use: at creation only the resident
 * granules' pages of them are there (before: all of them, 0.05% of the
 * reservation: 545 MiB of a 1 TiB one), every released granule says "no
 * tree", and a granule that comes into use has its pages. */
Test(elastic, the_allocators_tree_follows_use, .timeout = 60) {
    dsmpool *p = tree_mkpool(64 * GIB, 4 * MIB);
    uint64_t need, amiss, present = tree_pages(p, &need, &amiss), ng = p->geo.sub[0].geom.level_count[1], notree = 0;
    for (uint64_t g = 0; g < ng; g++) {
        uint64_t w = dp_load_relaxed(&p->res[g]);
        cr_assert(!(w & DP_RES_NOTREE) || (w & DP_RES_RELEASED), "granule %llu: %016llx", (unsigned long long)g,
                  (unsigned long long)w);
        notree += !!(w & DP_RES_NOTREE);
    }
    /* resident_min is 2 granules; a few more share their pages with the
     * tables made resident (the resident granules' page of leaves, the
     * level-1 page shared with level 2) */
    cr_expect_geq(notree, ng - 16, "%llu granules of %llu marked \"no tree\"", (unsigned long long)notree,
                  (unsigned long long)ng);
    /* the resident granules' page of each level, and the pages the levels
     * share with their neighbours (level 0 with the tables before it,
     * level 1 with level 2) */
    cr_expect_leq(present, 4, "at creation %llu pages of the tree's lower levels are there (of %llu)",
                  (unsigned long long)present, (unsigned long long)((p->geo.sub[0].geom.level_off[2] -
                                                                     p->geo.sub[0].geom.level_off[0]) / 4096));
    cr_expect_eq(amiss, 0);
    /* a segment and an area's chunks in released memory */
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 64 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s), 0, "%s", dsmpool_last_error());
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0, "%s", dsmpool_last_error());
    dsmpool_ptr c[256];
    for (int i = 0; i < 256; i++) cr_assert_eq(dsmpool_area_alloc(a, 32 * 1024, 0, &c[i]), 0, "%s", dsmpool_last_error());
    present = tree_pages(p, &need, &amiss);
    cr_expect_eq(amiss, 0, "%llu granules in use without their tree pages", (unsigned long long)amiss);
    /* the used granules' pages (a page of leaves per 4 granules, one of
     * level 1 per 64) and the pages shared with other tables: no more */
    cr_expect_leq(present, need + 4, "%llu tree pages present, %llu of the granules in use",
                  (unsigned long long)present, (unsigned long long)need);
    for (int i = 0; i < 256; i++) cr_assert_eq(dsmpool_area_free(a, c[i]), 0, "%s", dsmpool_last_error());
    cr_assert_eq(dsmpool_area_destroy(a), 0, "%s", dsmpool_last_error());
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    size_t rel;
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    /* given back, the granules give their pages of leaves back with them
     * (before: they kept them all) and say "no tree" again, and the pages
     * of level 1 of 64 released granules go too (el_tree_l1) */
    uint64_t after = tree_pages(p, &need, &amiss);
    cr_expect_eq(amiss, 0, "%llu tree pages of released granules are still there", (unsigned long long)amiss);
    cr_expect_leq(after, need + 4, "%llu tree pages present after the trim (%llu before, %llu of them the "
                  "resident granules')", (unsigned long long)after, (unsigned long long)present, (unsigned long long)need);
    cr_expect_lt(after, present, "no tree page was given back: %llu before the trim, %llu after",
                 (unsigned long long)present, (unsigned long long)after);
    test_check_ok(p);
    /* and a pool that serves again from them */
    cr_assert_eq(dsmpool_seg_create(p, 64 * MIB, DSMPOOL_SEG_NO_FALLBACK, &s), 0, "%s", dsmpool_last_error());
    memset(dsmpool_seg_address(s), 7, 64 * MIB);
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    test_check_ok(p);
    dsmpool_destroy(p);
}

/* Sub-pool 0's whole pages of the tree's level 1 that are present. */
static uint64_t l1_pages_present(dsmpool *p) {
    const dp_pa_geom *geo = &p->geo.sub[0].geom;
    uint64_t lo = (geo->level_off[1] + 4095) / 4096 * 4096, hi = geo->level_off[2] / 4096 * 4096, n, k = 0;
    if (hi <= lo) return 0;
    n = (hi - lo) / 4096;
    unsigned char *v = malloc(n);
    cr_assert(v);
    cr_assert_eq(mincore(p->base + lo, n * 4096, v), 0, "mincore: %s", strerror(errno));
    for (uint64_t i = 0; i < n; i++) k += v[i] & 1;
    free(v);
    return k;
}

enum { L1_NSEG = 320 };

/* A 2 GiB elastic pool (MEMFD, one sub-pool) of which 320 MiB were used in
 * 1 MiB segments (each opens its granule's level-1 word: two whole pages
 * of them at least) and are free again, not yet trimmed; *segs: an array
 * for as many (malloc'd); *l1_0, *used: the pages of level 1 present at
 * creation and with the segments. */
static dsmpool *l1_mkpool(dsmpool_seg ***segs, uint64_t *l1_0, uint64_t *used) {
    dsmpool_seg **s = *segs = calloc(L1_NSEG, sizeof *s);
    cr_assert(s);
    dsmpool *p = tree_mkpool(2 * GIB, 2 * MIB);
    *l1_0 = l1_pages_present(p);
    for (int i = 0; i < L1_NSEG; i++) {
        cr_assert_eq(dsmpool_seg_create(p, MIB, DSMPOOL_SEG_NO_FALLBACK, &s[i]), 0, "%s", dsmpool_last_error());
        memset(dsmpool_seg_address(s[i]), 1, 4096);
    }
    *used = l1_pages_present(p);
    cr_assert_geq(*used, *l1_0 + 2, "320 MiB in use brought %llu pages of level 1 in (%llu before)",
                  (unsigned long long)*used, (unsigned long long)*l1_0);
    for (int i = 0; i < L1_NSEG; i++) cr_assert_eq(dsmpool_seg_detach(s[i]), 0);
    return p;
}

/* A trim gives back the pages of the tree's level 1 too (resident.c [tree
 * give-back], elastic.c el_tree_l1): once every granule a page of them
 * tells of (64: 128 MiB) is released with its leaves, the trim holds
 * those granules a moment and gives the page back. Before, they stayed:
 * 64 bytes for each granule ever used (8 MiB of a 256 GiB reservation
 * used once). And the pool serves from there again. */
Test(elastic, a_trim_gives_back_the_pages_of_level_1_of_what_it_releases, .timeout = 60) {
    enum { NSEG = L1_NSEG };
    dsmpool_seg **s;
    uint64_t need, amiss, l1_0, used;
    dsmpool *p = l1_mkpool(&s, &l1_0, &used);
    size_t rel;
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    uint64_t after = l1_pages_present(p);
    tree_pages(p, &need, &amiss);
    cr_expect_eq(amiss, 0, "after the trim %llu tree pages are there that no granule in use needs (level 1: %llu "
                 "pages, %llu in use, %llu at creation)", (unsigned long long)amiss, (unsigned long long)after,
                 (unsigned long long)used, (unsigned long long)l1_0);
    /* (those that stay are needed, above: this process's records keep a
     * granule or two in use) */
    cr_expect_lt(after, used, "%llu pages of level 1 after the trim, %llu with the segments, %llu at creation",
                 (unsigned long long)after, (unsigned long long)used, (unsigned long long)l1_0);
    test_check_ok(p);
    /* the same memory again: the pages come back with their granules */
    for (int i = 0; i < NSEG; i++) {
        cr_assert_eq(dsmpool_seg_create(p, MIB, DSMPOOL_SEG_NO_FALLBACK, &s[i]), 0, "%s", dsmpool_last_error());
        memset(dsmpool_seg_address(s[i]), 2, MIB);
    }
    tree_pages(p, &need, &amiss);
    cr_expect_eq(amiss, 0, "%llu granules in use without their tree pages", (unsigned long long)amiss);
    test_check_ok(p);
    for (int i = 0; i < NSEG; i++) cr_assert_eq(dsmpool_seg_detach(s[i]), 0);
    free(s);
    dsmpool_destroy(p);
}

/* A CPU's hint of a 2 MiB node (its reservation for blocks of 128 KiB to
 * 1 MiB) named a granule whose page of level 1 a trim then gave back: the
 * CPU's next such allocation read that node's word (to clear its
 * reservation mark) and brought the page back, a zeroed 4 KiB outside any
 * room claim, kept until a granule of it was used and trimmed again (found
 * by review). The hint is forgotten with the page (and pa_adopt reads no
 * old node's word under its bit). Pinned: the hints are per CPU. */
Test(elastic, a_cpus_hint_brings_no_page_of_level_1_back, .timeout = 60) {
    test_pin_here();
    dsmpool_seg **s;
    uint64_t need, amiss, l1_0, used;
    dsmpool *p = l1_mkpool(&s, &l1_0, &used);
    size_t rel;
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    tree_pages(p, &need, &amiss);
    cr_assert_eq(amiss, 0);
    /* one of each size of the 2 MiB nodes' reservations, twice */
    dsmpool_seg *t[8];
    for (int i = 0; i < 8; i++)
        cr_assert_eq(dsmpool_seg_create(p, (128 * 1024) << (i % 4), DSMPOOL_SEG_NO_FALLBACK, &t[i]), 0, "%s",
                     dsmpool_last_error());
    tree_pages(p, &need, &amiss);
    cr_expect_eq(amiss, 0, "%llu tree pages came back that no granule in use needs", (unsigned long long)amiss);
    for (int i = 0; i < 8; i++) cr_assert_eq(dsmpool_seg_detach(t[i]), 0);
    test_check_ok(p);
    free(s);
    dsmpool_destroy(p);
}

/* Creation writes no word of the lazy levels (palloc.c [lazy tree]): for
 * every size where a level's start falls on a page boundary it once stored
 * a 0 into a page of the hole, which a full tmpfs answered with a SIGBUS
 * (found by review: 144, 248, 256, 286 MiB). Every present page of the two
 * lowest levels is the tables' or a granule's in use. */
Test(elastic, creation_brings_in_no_tree_page_of_released_memory, .timeout = 60) {
    unsigned aligned = 0;
    for (size_t mib = 128; mib <= 320; mib += 2) {
        dsmpool_config cfg = pool_config(mib * MIB, DSMPOOL_BACKING_MEMFD, DSMPOOL_HUGE_OFF, 2 * MIB);
        cfg.numa = DSMPOOL_NUMA_OFF;
        dsmpool *p = NULL;
        cr_assert_eq(dsmpool_create(&cfg, &p), 0, "%zu MiB: %s", mib, dsmpool_last_error());
        const dp_pa_geom *geo = &p->geo.sub[0].geom;
        if (geo->nlevels > 2) {
            aligned += geo->level_off[1] % 4096 == 0 || geo->level_off[2] % 4096 == 0;
            uint64_t need, amiss;
            tree_pages(p, &need, &amiss);
            cr_expect_eq(amiss, 0, "%zu MiB: %llu tree pages present that are no one's (or missing)", mib,
                         (unsigned long long)amiss);
        }
        dsmpool_destroy(p);
    }
    cr_expect_gt(aligned, 0, "no size put a level's start on a page boundary: the case is not tried");
}

/* Does the mapping that holds addr say flag in its smaps VmFlags? */
static bool vma_has_flag(const void *addr, const char *flag) {
    FILE *f = fopen("/proc/self/smaps", "r");
    cr_assert(f);
    char line[512];
    bool in = false, has = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
        } else if (in && !strncmp(line, "VmFlags:", 8)) {
            char want[8];
            snprintf(want, sizeof want, " %s", flag);
            has = strstr(line, want) != NULL;
            break;
        }
    }
    fclose(f);
    return has;
}

/* A THP pool advises no huge pages on its tree's lazy levels (a page of
 * them made resident by the hook would otherwise be a 2 MiB THP, outside
 * the room claimed). The advice takes page-aligned addresses only: at 3.5
 * GiB with 100 process slots, when level 0 started on a 64-byte line, it
 * once failed unseen (found by review). Level 0 starts on a page now
 * (format 17, layout.c [lazy tree]). */
Test(elastic, a_thp_pool_advises_no_huge_pages_on_its_lazy_tree, .timeout = 60) {
    dsmpool_config cfg = pool_config(3 * GIB + 512 * MIB, DSMPOOL_BACKING_MEMFD, DSMPOOL_HUGE_TRANSPARENT, 2 * MIB);
    cfg.numa = DSMPOOL_NUMA_OFF;
    cfg.max_procs = 100;
    dsmpool *p = NULL;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "%s", dsmpool_last_error());
    if (!p->geo.thp_advised) {
        dsmpool_destroy(p);
        cr_skip_test("the kernel took no THP advice for shmem here");
    }
    const dp_pa_geom *geo = &p->geo.sub[0].geom;
    cr_assert_gt(geo->nlevels, 2);
    cr_expect_eq(geo->level_off[0] % 4096, 0, "level 0 starts inside a page (layout.c [lazy tree])");
    uint64_t lo = (geo->level_off[0] + 4095) / 4096 * 4096, hi = geo->level_off[2] / 4096 * 4096;
    cr_assert_lt(lo, hi);
    cr_expect(vma_has_flag(p->base + lo, "nh"), "the lazy tree's first page is not advised nohugepage");
    cr_expect(vma_has_flag(p->base + hi - 1, "nh"), "the lazy tree's last page is not advised nohugepage");
    cr_expect(vma_has_flag(p->base + p->geo.data_off, "hg"), "the data lost its THP advice");
    dsmpool_destroy(p);
}

/* An elastic pool of 256 MiB (2 MiB resident), an area in it with a 32 KiB
 * chunk *c, and *g the last granule, released, its directory page absent. */
static dsmpool *released_granule_pool(dsmpool_area **a, dsmpool_ptr *c, uint64_t *g) {
    dsmpool_config cfg = pool_config(256 * MIB, DSMPOOL_BACKING_MEMFD, DSMPOOL_HUGE_OFF, 2 * MIB);
    dsmpool *p = NULL;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "%s", dsmpool_last_error());
    *a = test_area(p, 0);
    cr_assert_eq(dsmpool_area_alloc(*a, 32 * 1024, 0, c), 0, "%s", dsmpool_last_error());
    uint64_t present;
    *g = p->geo.res_count - 1;
    cr_assert(dp_load_relaxed(&p->res[*g]) & DP_RES_RELEASED, "the last granule is not released");
    cr_assert_eq(dir_pages_amiss(p, &present), 0);
    return p;
}

/* A free of a stray pointer into released memory is refused and makes no
 * page of the directory resident (its reader looks at the residency word
 * first): before, the read of the directory word brought the page in. */
Test(elastic, a_stray_free_into_released_memory_makes_nothing_resident, .timeout = 60) {
    dsmpool_area *a;
    dsmpool_ptr c;
    uint64_t g, present;
    dsmpool *p = released_granule_pool(&a, &c, &g);
    dsmpool_ptr stray = p->geo.data_off + (g << DP_RES_SHIFT) + 32 * 1024;
    cr_expect_eq(dsmpool_area_free(a, stray), -EINVAL, "a free into released memory: %s", dsmpool_last_error());
    cr_expect_eq(dir_pages_amiss(p, &present), 0, "the stray free made a directory page resident");
    cr_expect_eq(dsmpool_area_free(a, c), 0, "%s", dsmpool_last_error());
    dsmpool_area_destroy(a);
    test_check_ok(p);
    dsmpool_destroy(p);
}

/* A span word scribbled to name a released granule: the area's destroy
 * clears no directory word there and brings no page in (before: it read,
 * and so populated, the released granule's page). */
Test(elastic, a_damaged_span_word_in_released_memory_makes_nothing_resident, .timeout = 60) {
    dsmpool_area *a;
    dsmpool_ptr c;
    uint64_t g, present;
    dsmpool *p = released_granule_pool(&a, &c, &g);
    dp_a64 *bw = dp_area_test_word(a, "block", 0, c);
    cr_assert_not_null(bw, "no span holds the chunk");
    uint64_t b = dp_load_relaxed(bw);
    dp_store_relaxed(bw, DP_BLOCK_MK(p->geo.data_off + (g << DP_RES_SHIFT), DP_BLOCK_ORDER(b)));
    int r = dsmpool_area_destroy(a);
    cr_log_info("destroy with a span word in released memory: %d %s", r, dsmpool_last_error());
    cr_expect_eq(dir_pages_amiss(p, &present), 0, "the destroy made a released granule's directory page resident");
    dsmpool_destroy(p);
}

/* ---- the tree's pages of leaves given back (resident.c [tree give-back]) --- */

/* A child that stops at injection points: at stop[i].point, the hit-th
 * time it is reached after the previous stop (with leaf: only where a
 * leaf word of the pool is OPENING), it says so on stopped and waits for
 * a byte on go. */
static struct gb_stop {
    const char *point;
    int hit;
    bool leaf;
} gb_stops[2];
static int gb_next, gb_hits, gb_stopped_w = -1, gb_go_r = -1;
static dsmpool *gb_pool;

/* The granule of sub-pool 0 with an OPENING leaf word (*leaf: its index),
 * or -1. */
static long long gb_opening_leaf(dsmpool *p, uint64_t *leaf) {
    const dp_pa_geom *geo = &p->geo.sub[0].geom;
    for (uint64_t i = 0; i < geo->level_count[0]; i++) {
        if (dp_load_relaxed(&p->res[i / 16]) & DP_RES_NOTREE) continue; /* (not read: may be absent) */
        if (w_phase(dp_load_relaxed(dp_pa_word(&p->pa[0], 0, i))) == PH_OPENING) {
            if (leaf) *leaf = i;
            return (long long)(i / 16);
        }
    }
    return -1;
}

static void gb_handler(const char *point) {
    if (gb_next >= 2 || !gb_stops[gb_next].point || strcmp(point, gb_stops[gb_next].point)) return;
    if (gb_stops[gb_next].leaf && gb_opening_leaf(gb_pool, NULL) < 0) return;
    if (++gb_hits < gb_stops[gb_next].hit) return;
    gb_next++;
    gb_hits = 0;
    char c = 's';
    if (write(gb_stopped_w, &c, 1) != 1) _exit(121);
    if (read(gb_go_r, &c, 1) != 1) _exit(122);
}

/* Fork a child that runs fn(p) with the stops given; returns once it has
 * stopped at the first (*go: the pipe that lets it go on, *stopped: the
 * one it says it stopped on). */
static pid_t gb_fork(dsmpool *p, struct gb_stop a, struct gb_stop b, int (*fn)(dsmpool *), int *go, int *stopped) {
    int s[2], g[2];
    cr_assert_eq(pipe(s), 0);
    cr_assert_eq(pipe(g), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(s[0]);
        close(g[1]);
        gb_pool = p;
        gb_stops[0] = a;
        gb_stops[1] = b;
        gb_stopped_w = s[1];
        gb_go_r = g[0];
        dp_inject_fn = gb_handler;
        _exit(fn(p));
    }
    close(s[1]);
    close(g[0]);
    char c;
    if (read(s[0], &c, 1) != 1) {
        int st = test_wait(pid);
        cr_assert(false, "the child did not reach %s (it ended: %d)", a.point, st);
    }
    *go = g[1];
    *stopped = s[0];
    return pid;
}

static void gb_go(int go) {
    char c = 'g';
    cr_assert_eq(write(go, &c, 1), 1);
}

/* Let the child go on from its last stop, and wait for its end: its
 * status; its pipes closed. */
static int gb_end(pid_t pid, int go, int stopped) {
    gb_go(go);
    int st = test_wait(pid);
    close(go);
    close(stopped);
    return st;
}

/* What the children do: take 4 KiB (and give it back); trim everything. */
static int gb_take(dsmpool *p) {
    dsmpool_seg *s;
    int r = dsmpool_seg_create(p, 4096, DSMPOOL_SEG_NO_FALLBACK, &s);
    if (r) return 1;
    memset(dsmpool_seg_address(s), 1, 4096);
    return dsmpool_seg_detach(s) == 0 ? 0 : 2;
}
static int gb_trim(dsmpool *p) {
    size_t rel;
    /* (a first call takes this process's slot, and its record's frame:
     * none of that in the trim that is watched) */
    if (dsmpool_trim(p, SIZE_MAX, &rel) != 0) return 4;
    gb_handler("test.ready");
    return dsmpool_trim(p, 0, &rel) == 0 ? 0 : 3;
}

/* A child that trims everything, stopped ready (its slot taken) and then
 * at point. */
static pid_t gb_trimmer(dsmpool *p, const char *point, int *go, int *stopped) {
    return gb_fork(p, (struct gb_stop){"test.ready", 1, false}, (struct gb_stop){point, 1, false}, gb_trim, go,
                   stopped);
}

/* The whole of pool p held by a few segments (largest first, from top:
 * few, so that a forked child's attachments fit its slot's records; more
 * would take a frame, in the window) but for a window: the first segment
 * of win_size bytes whose first granule is_win accepts (NULL: any), let
 * go. Returns the segments held (malloc'd, ending with NULL); *win_g: the
 * window's first granule. */
static dsmpool_seg **gb_hold_but(dsmpool *p, size_t top, size_t win_size, bool (*is_win)(dsmpool *, uint64_t),
                                 uint64_t *win_g) {
    size_t n = 0;
    dsmpool_seg **h = calloc(17, sizeof *h), *win = NULL;
    cr_assert(h);
    for (size_t size = top; size >= GRANULE && n < 15; size /= 2)
        while (n < 15 && dsmpool_seg_create(p, size, DSMPOOL_SEG_NO_FALLBACK, &h[n]) == 0) {
            uint64_t g = (uint64_t)((char *)dsmpool_seg_address(h[n]) - p->base - p->geo.data_off) / GRANULE;
            if (size == win_size && !win && (!is_win || is_win(p, g))) {
                win = h[n];
                *win_g = g;
            }
            n++;
        }
    if (test_pool_free(p)) cr_assert_eq(dsmpool_seg_create(p, test_pool_free(p), DSMPOOL_SEG_NO_FALLBACK, &h[n++]), 0);
    cr_assert_eq(test_pool_free(p), 0, "%zu bytes left free", test_pool_free(p));
    cr_assert(win, "no segment of %zu bytes for the window", win_size);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (h[i] != win) h[k++] = h[i];
    h[k] = NULL;
    cr_assert_eq(dsmpool_seg_detach(win), 0);
    cr_assert_eq(test_pool_free(p), win_size, "the window is not all that is free");
    return h;
}

/* A 64 MiB elastic pool (MEMFD, one sub-pool), all of it resident, and,
 * with hold, all of it but one aligned window of 4 granules (a page of
 * leaves) held by a few segments (*held, malloc'd, ending with NULL): few,
 * so that a forked child's attachments fit its slot's records (more would
 * take a frame, in the window). */
static dsmpool *gb_mkpool_idle(bool hold, unsigned idle_ms, dsmpool_seg ***held, uint64_t *win_g) {
    dsmpool_config cfg = pool_config(64 * MIB, DSMPOOL_BACKING_MEMFD, DSMPOOL_HUGE_OFF, 2 * MIB);
    cfg.numa = DSMPOOL_NUMA_OFF;
    cfg.idle_release_ms = idle_ms;
    dsmpool *p = NULL;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "%s", dsmpool_last_error());
    cr_assert_eq(p->nsub, 1);
    cr_assert_gt(p->geo.sub[0].geom.nlevels, 2);
    size_t got;
    cr_assert_eq(dsmpool_prefault_free(p, SIZE_MAX, &got), 0, "%s", dsmpool_last_error());
    for (uint64_t g = 0; g < p->geo.res_count; g++)
        cr_assert_eq(dp_load_relaxed(&p->res[g]) & (DP_RES_RELEASED | DP_RES_NOTREE), 0);
    if (!hold) return p;
    uint64_t g, off, pg, pn;
    *held = gb_hold_but(p, 32 * MIB, 4 * GRANULE, NULL, &g);
    /* the 8 MiB segment's granules: a page of leaves (layout.c [lazy tree]) */
    cr_assert(dp_pa_leaf_page(&p->geo.sub[0].geom, g, 4, 4096, 0, &off, &pg, &pn));
    cr_assert(pg == g && pn == 4, "granules %llu+4 are not a page of leaves", (unsigned long long)g);
    *win_g = g;
    return p;
}

static dsmpool *gb_mkpool(bool hold, dsmpool_seg ***held, uint64_t *win_g) {
    return gb_mkpool_idle(hold, 0, held, win_g);
}

static void gb_unhold(dsmpool_seg **held) {
    for (int i = 0; held[i]; i++) cr_assert_eq(dsmpool_seg_detach(held[i]), 0);
    free(held);
}

/* Every granule says "no tree" exactly when its page of leaves is not
 * there (a page given back says so for all its 4 granules; one kept, for
 * none of the granules that kept it), and no page of level 1 is there that
 * only such granules use. */
static void gb_expect_bits_match_pages(dsmpool *p) {
    uint64_t need, amiss;
    tree_pages(p, &need, &amiss);
    cr_expect_eq(amiss, 0, "%llu granules lack their pages of leaves without saying \"no tree\", or pages of "
                 "released granules are there", (unsigned long long)amiss);
}

/* The held segments let go, and the pool serves 4 KiB again, its pages
 * and bits agreeing, whole. */
static void gb_serves_again(dsmpool *p, dsmpool_seg **held) {
    gb_unhold(held);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 4096, DSMPOOL_SEG_NO_FALLBACK, &s), 0, "%s", dsmpool_last_error());
    memset(dsmpool_seg_address(s), 1, 4096);
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    gb_expect_bits_match_pages(p);
    test_check_ok(p);
}

/* An opener inside its open of a leaf (counted in on the granule, its claim
 * of the word made) when a trim takes the window: the trim must not give
 * that page back (the claim would go with it: the word reads 0, and the
 * opener's give-up store could later erase another's open leaf there).
 * The opener's count keeps the granule resident; the trim gives the other
 * pages back, and that one once the opener is done. */
Test(elastic, a_trim_keeps_the_page_of_leaves_an_opener_has_claimed_a_word_on, .timeout = 60) {
    dsmpool *p = gb_mkpool(false, NULL, NULL);
    size_t free0 = test_pool_free(p);
    int go, stopped;
    pid_t o = gb_fork(p, (struct gb_stop){"palloc.open.claimed", 1, true}, (struct gb_stop){0}, gb_take, &go, &stopped);
    uint64_t leaf;
    long long g = gb_opening_leaf(p, &leaf);
    cr_assert_geq(g, 0);
    uint64_t w0 = dp_load_relaxed(dp_pa_word(&p->pa[0], 0, leaf));
    size_t rel;
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    cr_expect_eq(dp_load_relaxed(dp_pa_word(&p->pa[0], 0, leaf)), w0,
                 "the trim gave the page back under the opener's claim (the word reads %llx)",
                 (unsigned long long)dp_load_relaxed(dp_pa_word(&p->pa[0], 0, leaf)));
    cr_expect_gt(leaf_pages_gone(p), 0, "the trim gave no page of leaves back");
    gb_expect_bits_match_pages(p);
    cr_expect_eq(gb_end(o, go, stopped), 0, "the opener's 4 KiB");
    test_check_ok(p);
    cr_expect_eq(test_pool_free(p), free0);
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    cr_expect(dp_load_relaxed(&p->res[g]) & DP_RES_NOTREE, "the opener's page stayed once it was done");
    gb_expect_bits_match_pages(p);
    dsmpool_destroy(p);
}

/* An opener that chose a node before a trim took its granule, and counts
 * itself in once the trim has set the granule's bit: it finds the node
 * held whole (the parent no longer says FREE) and writes nothing, nor
 * makes the page resident. If it made the page resident and cleared the
 * bit under the trimmer (under a room claim, for an open that fails), the
 * trimmer, seeing the bit clear, would keep the page: a stale opener would
 * keep any trim from giving pages back. Seen here: the bits against the
 * pages, and the page given back. */
Test(elastic, the_tables_hook_leaves_a_trimmers_granule_alone, .timeout = 60) {
    dsmpool_seg **held;
    uint64_t w;
    dsmpool *p = gb_mkpool(true, &held, &w);
    int go_o, st_o, go_t, st_t;
    pid_t t = gb_trimmer(p, "resident.tree.marked", &go_t, &st_t);
    pid_t o = gb_fork(p, (struct gb_stop){"palloc.open.chosen", 1, false}, (struct gb_stop){0}, gb_take, &go_o, &st_o);
    gb_go(go_t);
    char c;
    cr_assert_eq(read(st_t, &c, 1), 1, "the trimmer did not set the bits of the opener's window");
    int ro = gb_end(o, go_o, st_o); /* (the window is the trimmer's: nothing else is free) */
    cr_expect(ro == 0 || ro == 1, "the opener: %d", ro);
    cr_expect_eq(gb_end(t, go_t, st_t), 0, "the trimmer");
    gb_expect_bits_match_pages(p);
    for (uint64_t g = w; g < w + 4; g++) cr_assert(dp_load_relaxed(&p->res[g]) & DP_RES_RELEASED, "not tried");
    cr_expect_gt(leaf_pages_gone(p), 0, "the trim gave no page of leaves back");
    test_check_ok(p);
    gb_serves_again(p, held);
    dsmpool_destroy(p);
}

/* An opener killed after its claim of a leaf word, and a trim of the
 * window: recovery must find the claim and finish it. When a trim could
 * set the granule's bit over the claim (before openers counted themselves
 * in), recovery, which reads no word under the bit, skipped it; the trim
 * then saw the claim and cleared the bits back, and the word stayed in the
 * recovered owner's name: the leaf was lost for good (-ENOMEM to a claim
 * of it; found by review). Now the dead opener's count keeps the trim off
 * the granule until recovery has run. */
Test(elastic, a_dead_openers_claim_in_a_trimmed_window_is_recovered, .timeout = 60) {
    dsmpool_seg **held;
    uint64_t w;
    dsmpool *p = gb_mkpool(true, &held, &w);
    int go_t, st_t, go_o, st_o;
    pid_t t = gb_trimmer(p, "resident.tree.marked", &go_t, &st_t);
    pid_t o = gb_fork(p, (struct gb_stop){"palloc.open.claimed", 1, true}, (struct gb_stop){0}, gb_take, &go_o, &st_o);
    uint64_t leaf;
    long long g = gb_opening_leaf(p, &leaf);
    cr_assert(g >= (long long)w && g < (long long)w + 4);
    kill(o, SIGKILL);
    cr_assert_eq(test_wait(o), 128 + SIGKILL);
    close(go_o), close(st_o);
    gb_go(go_t);
    char c;
    bool marked = read(st_t, &c, 1) == 1; /* (the trimmer sets no bit over the dead opener's count) */
    cr_assert_geq(dsmpool_recover(p), 0, "%s", dsmpool_last_error());
    if (marked) {
        cr_expect_eq(gb_end(t, go_t, st_t), 0, "the trimmer");
    } else { /* (it ended: its pipe has no reader) */
        cr_expect_eq(test_wait(t), 0, "the trimmer");
        close(go_t), close(st_t);
    }
    test_recover_all(p);
    uint64_t now = dp_load_relaxed(dp_pa_word(&p->pa[0], 0, leaf));
    cr_expect_eq(w_phase(now), PH_IDLE, "a recovered owner's claim survived recovery (%llx; the trimmer %s)",
                 (unsigned long long)now, marked ? "set bits" : "set no bit");
    cr_assert_eq(dp_self(p), 0);
    dp_bracket_open(p);
    int r = dp_pa_claim(&p->pa[0], leaf * 32, 4, dp_owner(p));
    if (r == 0) r = dp_pa_free(&p->pa[0], leaf * 32, 4);
    dp_bracket_close(p);
    cr_expect_eq(r, 0, "the leaf's memory cannot be had: %d", r);
    test_check_ok(p);
    gb_expect_bits_match_pages(p);
    gb_unhold(held);
    dsmpool_destroy(p);
}

/* ---- the tree's pages of level 1 given back (elastic.c el_tree_l1) -------- */

/* A trimmer killed while it holds the 64 granules a page of level 1 tells
 * of (before its look at their counts, and after it, the page not yet
 * gone): the leak sweep returns the blocks and takes its counts out, the
 * pool is whole, and once those granules are used again the next trim
 * gives the page back (until then it stays: 4 KiB a death). */
static void l1_kill_at(const char *point) {
    dsmpool_seg **s;
    uint64_t l1_0, used, need, amiss;
    dsmpool *p = l1_mkpool(&s, &l1_0, &used);
    size_t free0 = test_pool_free(p), rel;
    uint64_t given0 = stats(p).refill_given_back;
    pid_t c = fork();
    cr_assert_geq(c, 0);
    if (c == 0) {
        inj_point = point;
        dp_inject_fn = die_at;
        (void)dsmpool_trim(p, 0, &rel);
        _exit(5);
    }
    cr_assert_eq(test_wait(c), 128 + SIGKILL, "the trimmer did not die at %s", point);
    test_recover_all(p);
    cr_expect_eq(test_pool_free(p), free0, "%s: %zu bytes free, %zu before", point, test_pool_free(p), free0);
    cr_expect_eq(stats(p).refill_given_back, given0, "%s: %llu bytes counted given back by refills", point,
                 (unsigned long long)(stats(p).refill_given_back - given0));
    test_check_ok(p);
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    test_check_ok(p);
    for (int i = 0; i < L1_NSEG; i++)
        cr_assert_eq(dsmpool_seg_create(p, MIB, DSMPOOL_SEG_NO_FALLBACK, &s[i]), 0, "%s", dsmpool_last_error());
    for (int i = 0; i < L1_NSEG; i++) cr_assert_eq(dsmpool_seg_detach(s[i]), 0);
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    tree_pages(p, &need, &amiss);
    cr_expect_eq(amiss, 0, "%s: %llu tree pages stay that no granule in use needs", point, (unsigned long long)amiss);
    cr_expect_eq(test_pool_free(p), free0);
    test_check_ok(p);
    free(s);
    dsmpool_destroy(p);
}
Test(elastic, kill_trim_holding_a_page_of_level_1, .timeout = 60) { l1_kill_at("elastic.trim.l1held"); }
Test(elastic, kill_trim_giving_back_a_page_of_level_1, .timeout = 60) { l1_kill_at("resident.tree.l1.checked"); }

/* Granules [g, g + 64) are the ones a whole page of level 1 tells of. */
static bool l1_whole_page(dsmpool *p, uint64_t g) {
    uint64_t off, pg, pn;
    return dp_pa_tree_page_of(&p->geo.sub[0].geom, 1, g, 4096, &off, &pg, &pn) && pg == g && pn == 64;
}

/* An allocation that comes while a trim gives a page of level 1 back (its
 * counts seen alone, the page not yet gone) must find those granules held:
 * if it could open a word there, the page would go with that word (an
 * OPEN word read as IDLE under a parent that says PART: blocks handed out
 * twice). A 1 GiB pool held whole but for the 128 MiB a page of level 1
 * tells of. */
Test(elastic, an_allocation_during_a_give_back_of_level_1_finds_it_held, .timeout = 60) {
    dsmpool *p = NULL;
    /* a size whose pages of level 1 tell of aligned groups of 64 granules
     * (a count of granules that is a multiple of 4 puts level 1 on a page
     * boundary): one of them is then a 128 MiB segment's */
    for (size_t size = GIB; !p || p->geo.sub[0].geom.level_count[1] % 4; size += 2 * MIB) {
        if (p) dsmpool_destroy(p);
        cr_assert_lt(size, GIB + 16 * MIB);
        p = tree_mkpool(size, 2 * MIB);
    }
    uint64_t g, off, pg, pn;
    dsmpool_seg **h = gb_hold_but(p, 128 * MIB, 128 * MIB, l1_whole_page, &g);
    cr_assert(dp_pa_tree_page_of(&p->geo.sub[0].geom, 1, g, 4096, &off, &pg, &pn));
    int go_t, st_t;
    pid_t t = gb_trimmer(p, "resident.tree.l1.checked", &go_t, &st_t);
    gb_go(go_t);
    char c;
    cr_assert_eq(read(st_t, &c, 1), 1, "the trimmer did not reach the page of level 1");
    pid_t o = fork();
    cr_assert_geq(o, 0);
    if (o == 0) _exit(gb_take(p));
    cr_expect_eq(test_wait(o), 1, "an allocation was served from the granules a trim was giving back");
    cr_expect_eq(gb_end(t, go_t, st_t), 0, "the trimmer");
    for (uint64_t j = g; j < g + 64; j++) cr_assert(dp_load_relaxed(&p->res[j]) & DP_RES_NOTREE, "granule %llu",
                                                    (unsigned long long)j);
    unsigned char v;
    cr_assert_eq(mincore(p->base + off, 4096, &v), 0);
    cr_expect_eq(v & 1, 0, "the page of level 1 is still there");
    gb_expect_bits_match_pages(p);
    test_check_ok(p);
    gb_serves_again(p, h);
    dsmpool_destroy(p);
}

/* What the child does here: claim 64 KiB at the frame *gb_frame (the
 * allocator's hook runs for its granule), and give it back; inside a
 * bracket, as every claim is. */
static uint64_t gb_frame;
static int gb_claim(dsmpool *p) {
    if (dp_self(p) != 0) return 4;
    dp_bracket_open(p);
    int r = dp_pa_claim(&p->pa[0], gb_frame, 4, dp_owner(p));
    if (r == 0) (void)dp_pa_free(&p->pa[0], gb_frame, 4);
    dp_bracket_close(p);
    return r == 0 || r == -ENOMEM ? 0 : 5;
}

/* An opener that makes the page of leaves resident for a granule whose bit
 * is set (another granule of the page refilled since: a trim takes the
 * window) while a trim gives that page back: the trim must see the opener
 * (its count, then the bit it cleared) and keep the page. Without the
 * opener's count, the trim's mark looks like the only one and the opener
 * clears its bit after the page went; looking only at the granules whose
 * bits the trim set misses it too: either way, a clear bit over a missing
 * page, seen when the claimer is back from the fill (its next access
 * brings the page in, outside any room claim). */
Test(elastic, a_trim_keeps_a_page_of_leaves_a_hook_is_populating, .timeout = 60) {
    dsmpool_seg **held;
    uint64_t w;
    dsmpool *p = gb_mkpool(true, &held, &w);
    size_t rel, got;
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    for (uint64_t g = w; g < w + 4; g++) cr_assert(dp_load_relaxed(&p->res[g]) & DP_RES_NOTREE);
    cr_assert_eq(dsmpool_prefault_free(p, GRANULE, &got), 0, "%s", dsmpool_last_error());
    cr_assert_eq(got, GRANULE);
    uint64_t warm = w, cold = 0;
    while (warm < w + 4 && (dp_load_relaxed(&p->res[warm]) & DP_RES_RELEASED)) warm++;
    cr_assert_lt(warm, w + 4, "the refill took no granule of the window");
    cold = warm == w ? w + 1 : w;
    gb_frame = cold << 9;
    int go, stopped;
    pid_t c = gb_fork(p, (struct gb_stop){"resident.tables.populated", 1, false},
                      (struct gb_stop){"palloc.open.checked", 1, false}, gb_claim, &go, &stopped);
    cr_assert(dp_load_relaxed(&p->res[cold]) & DP_RES_NOTREE);
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    cr_expect(dp_load_relaxed(&p->res[warm]) & DP_RES_RELEASED, "the trim did not take the window: not tried");
    gb_go(go);
    char x;
    cr_assert_eq(read(stopped, &x, 1), 1, "the claimer did not go on from the hook");
    gb_expect_bits_match_pages(p); /* (before its next access brings a page in) */
    cr_expect_eq(gb_end(c, go, stopped), 0, "the claimer");
    gb_expect_bits_match_pages(p);
    test_recover_all(p);
    test_check_ok(p);
    gb_unhold(held);
    dsmpool_destroy(p);
}

static bool gb_window_given_back(const dsmpool_stats *st, const void *arg) {
    (void)st;
    const struct {
        dsmpool *p;
        uint64_t w;
    } *a = arg;
    for (uint64_t g = a->w; g < a->w + 4; g++)
        if (!(dp_load_relaxed(&a->p->res[g]) & DP_RES_RELEASED)) return false;
    return true;
}

/* The maintainer's idle release takes a granule whose 3 neighbours on its
 * page of leaves were released before (a trim, then a refill of one of
 * them): the released ones belong in its piece (free, and nothing to
 * release), so that the page of leaves goes with the last one. Before, an
 * idle release took only granules stamped idle, so in a pool that the
 * maintainer keeps (PostgreSQL's) a page of leaves went only when its 4
 * granules went idle together. */
Test(elastic, the_maintainers_idle_release_gives_a_page_of_leaves_back, .timeout = 60) {
    dsmpool_seg **held;
    uint64_t w;
    dsmpool *p = gb_mkpool_idle(true, 1, &held, &w);
    size_t rel, got;
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    cr_assert_eq(dsmpool_prefault_free(p, GRANULE, &got), 0, "%s", dsmpool_last_error());
    cr_assert_eq(got, GRANULE);
    cr_assert_eq(leaf_pages_gone(p), 0, "the refill left the page out");
    struct {
        dsmpool *p;
        uint64_t w;
    } a = {p, w};
    cr_assert(maintain_until(p, 5, gb_window_given_back, &a), "the maintainer did not release the granule");
    cr_expect_eq(leaf_pages_gone(p), 1, "the page of leaves stayed with the window released");
    gb_expect_bits_match_pages(p);
    test_check_ok(p);
    gb_unhold(held);
    dsmpool_destroy(p);
}

/* The CPUs' hints naming a leaf on a page given back are forgotten first:
 * else this CPU's next allocation tries its hint first and reads the word,
 * which brings the page back (zeroed: it holds nothing) outside any room
 * claim, on the allocation's path, under bits that say it is not there. */
Test(elastic, a_page_given_back_is_not_read_again_through_a_hint, .timeout = 60) {
    test_pin_here(); /* (the hint is this CPU's) */
    dsmpool *p = gb_mkpool(false, NULL, NULL);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 4096, DSMPOOL_SEG_NO_FALLBACK, &s), 0, "%s", dsmpool_last_error());
    uint64_t g = (uint64_t)((char *)dsmpool_seg_address(s) - p->base - p->geo.data_off) / GRANULE;
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    size_t rel;
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    cr_assert(dp_load_relaxed(&p->res[g]) & DP_RES_NOTREE, "the page of the leaf used was not given back: not tried");
    /* the next allocation on this CPU, seen before it opens anything (its
     * hint tried, its search begun): no page brought back under the bits */
    int go, stopped;
    pid_t c = gb_fork(p, (struct gb_stop){"palloc.open.chosen", 1, false}, (struct gb_stop){0}, gb_take, &go, &stopped);
    gb_expect_bits_match_pages(p);
    uint64_t off, pg, pn;
    for (uint64_t k = 0; dp_pa_leaf_page(&p->geo.sub[0].geom, 0, p->geo.res_count, 4096, k, &off, &pg, &pn); k++) {
        if (g < pg || g >= pg + pn) continue;
        unsigned char v;
        cr_assert_eq(mincore(p->base + off, 4096, &v), 0);
        cr_expect(!(v & 1), "the page of leaves of granule %llu came back under its bits", (unsigned long long)g);
    }
    cr_expect_eq(gb_end(c, go, stopped), 0, "the allocation");
    gb_expect_bits_match_pages(p);
    test_check_ok(p);
    dsmpool_destroy(p);
}

/* A free of an exact block (dp_pool_free: dp_pa_free_run, then
 * dp_pa_hint_freed) that a trim of its window comes between: the trim
 * forgets the CPUs' hints and gives the page back, then the free makes the
 * freed leaf, on that page, this CPU's reservation, and the CPU's next
 * allocation reads it: the page comes back under its bits (found by
 * review). The free looks at the bit after its hint (a fence each side)
 * and forgets the hint. */
Test(elastic, a_free_between_a_trims_forget_and_its_hint_names_no_page_given_back, .timeout = 60) {
    test_pin_here(); /* (the hint is this CPU's) */
    dsmpool_seg **held;
    uint64_t win;
    dsmpool *p = gb_mkpool(true, &held, &win);
    uint64_t blk = 0;
    dp_bracket_open(p);
    cr_assert_eq(dp_pool_alloc_exact(p, 2, 0, 3, &blk), 0, "%s", dsmpool_last_error());
    dp_bracket_close(p);
    uint64_t frame = (DP_BLOCK_OFF(blk) - p->geo.sub[0].data_off) / 4096;
    cr_assert(frame >> 9 >= win && frame >> 9 < win + 4, "not in the window");
    cr_assert(blk & DP_BLOCK_EXACT);
    /* dp_pool_free's first half; the trim; its second half */
    dp_bracket_open(p);
    cr_assert_eq(dp_pa_free_run(&p->pa[0], frame, 2, dp_block_frames(blk)), 0);
    dp_bracket_close(p);
    size_t rel;
    cr_assert_eq(dsmpool_trim(p, 0, &rel), 0, "%s", dsmpool_last_error());
    cr_assert(dp_load_relaxed(&p->res[win]) & DP_RES_NOTREE, "the page was not given back: not tried");
    dp_pa_hint_freed(&p->pa[0], frame, 2, dp_numa_cpu());
    /* warm memory elsewhere, so that the next allocation needs nothing of
     * the window */
    cr_assert_eq(dsmpool_seg_detach(held[0]), 0);
    memmove(held, held + 1, 16 * sizeof *held);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 12288, DSMPOOL_SEG_NO_FALLBACK, &s), 0, "%s", dsmpool_last_error());
    uint64_t off, pg, pn;
    cr_assert(dp_pa_leaf_page(&p->geo.sub[0].geom, win, 4, 4096, 0, &off, &pg, &pn));
    unsigned char v;
    cr_assert_eq(mincore(p->base + off, 4096, &v), 0);
    cr_expect(!(v & 1), "the page of leaves of granules %llu+4 came back under their bits (through the hint)",
              (unsigned long long)win);
    gb_expect_bits_match_pages(p);
    cr_assert_eq(dsmpool_seg_detach(s), 0);
    test_check_ok(p);
    gb_unhold(held);
    dsmpool_destroy(p);
}
