/*
 * test_region.c -- the region: every backing, what was obtained (checked
 * against /proc/self/smaps), huge pages (reserved here and put back), THP,
 * configuration errors, and attaching to corrupt, truncated or missing
 * regions. Runs alone (it changes system settings).
 */
#include <criterion/criterion.h>
#include <dsmpool.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "testutil.h"

#define NR_HUGE "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
#define FREE_HUGE "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
#define THP_SHMEM "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
/* surplus pages of the default size (2 MiB here) the kernel may allocate on demand */
#define OVC_HUGE "/proc/sys/vm/nr_overcommit_hugepages"
#define NR_HUGE_1G "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
#define FREE_HUGE_1G "/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages"

static dsmpool_config cfg_of(dsmpool_backing b, const char *name, size_t size) {
    dsmpool_config c;
    dsmpool_config_init(&c);
    c.backing = b;
    c.name = name;
    c.size = size;
    return c;
}

Test(region, every_backing_base_pages) {
    char pname[64], sname[64];
    test_name(pname, sizeof pname, "backing");
    snprintf(sname, sizeof sname, "dsmpool-test-backing-%llu", test_uid());
    dsmpool_backing bs[4] = {DSMPOOL_BACKING_ANON, DSMPOOL_BACKING_MEMFD, DSMPOOL_BACKING_POSIX,
                             DSMPOOL_BACKING_SYSV};
    const char *names[4] = {NULL, NULL, pname, sname};
    for (int i = 0; i < 4; i++) {
        dsmpool_config c = cfg_of(bs[i], names[i], 16 * MIB);
        dsmpool *p;
        int r = dsmpool_create(&c, &p);
        cr_assert_eq(r, 0, "%s: %s", dsmpool_backing_name(bs[i]), dsmpool_last_error());
        dsmpool_stats st;
        cr_assert_eq(dsmpool_get_stats(p, &st), 0);
        cr_expect_eq(st.backing, bs[i]);
        cr_expect_eq(st.page_size, 4096);
        cr_expect_eq(st.region_size, 16 * MIB);
        cr_expect_eq(st.prefaulted_bytes, 16 * MIB);
        cr_expect_eq(st.nsubpools, 1);
        cr_expect_geq(st.data_size, 12 * MIB);
        cr_expect_eq(st.data_size % (2 * MIB), 0);
        cr_expect_eq(st.subpool[0].free, st.data_size);
        cr_expect_eq(st.subpool[0].largest_free, 8 * MIB, "largest power of two in %zu", st.data_size);
        cr_expect_eq(st.procs_attached, 1);
        cr_expect_eq(dsmpool_fd(p) >= 0, bs[i] == DSMPOOL_BACKING_MEMFD || bs[i] == DSMPOOL_BACKING_POSIX);
        /* what the kernel says about our mapping */
        dsmpool_seg *s;
        cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &s), 0);
        char *base = (char *)dsmpool_seg_address(s) - ((uintptr_t)dsmpool_seg_address(s) % (2 * MIB));
        (void)base;
        long rss = test_smaps_kb(dsmpool_seg_address(s), 4096, "Rss");
        long kps = test_smaps_kb(dsmpool_seg_address(s), 4096, "KernelPageSize");
        cr_expect_eq(kps, 4, "%s: kernel page size %ld kB", dsmpool_backing_name(bs[i]), kps);
        cr_expect_geq(rss, 16 * 1024 - 4, "%s: prefaulted, Rss %ld kB", dsmpool_backing_name(bs[i]), rss);
        dsmpool_seg_detach(s);
        test_check_ok(p);
        cr_assert_eq(dsmpool_destroy(p), 0, "%s", dsmpool_last_error());
    }
}

Test(region, no_prefault_leaves_pages_unmapped) {
    dsmpool_config c = cfg_of(DSMPOOL_BACKING_MEMFD, NULL, 64 * MIB);
    c.prefault = false;
    dsmpool *p;
    cr_assert_eq(dsmpool_create(&c, &p), 0, "%s", dsmpool_last_error());
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    cr_expect_eq(st.prefaulted_bytes, 0);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &s), 0);
    long rss = test_smaps_kb(dsmpool_seg_address(s), 4096, "Rss");
    cr_expect_lt(rss, 32 * 1024, "Rss %ld kB of a 64 MiB region that was not prefaulted", rss);
    cr_assert_eq(dsmpool_prefault(p), 0);
    rss = test_smaps_kb(dsmpool_seg_address(s), 4096, "Rss");
    cr_expect_geq(rss, 64 * 1024 - 4, "dsmpool_prefault maps it all: Rss %ld kB", rss);
    dsmpool_seg_detach(s);
    dsmpool_destroy(p);
}

Test(region, configuration_errors) {
    dsmpool *p = (dsmpool *)0x1;
    dsmpool_config c = cfg_of(DSMPOOL_BACKING_ANON, NULL, 0);
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL);
    cr_expect_null(p);
    cr_expect_neq(strstr(dsmpool_last_error(), "size"), NULL, "%s", dsmpool_last_error());
    c.size = 4096;
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL, "too small for tables and a 2 MiB sub-pool");
    cr_expect_neq(strstr(dsmpool_last_error(), "too small"), NULL, "%s", dsmpool_last_error());
    c.size = (size_t)1 << 50;
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL);
    c = cfg_of(DSMPOOL_BACKING_ANON, "/named", 8 * MIB);
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL, "ANON takes no name");
    c = cfg_of(DSMPOOL_BACKING_POSIX, NULL, 8 * MIB);
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL, "POSIX needs a name");
    c.name = "no-slash";
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL);
    c.name = "/a/b";
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL);
    c = cfg_of((dsmpool_backing)9, NULL, 8 * MIB);
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL);
    c = cfg_of(DSMPOOL_BACKING_ANON, NULL, 8 * MIB);
    c.huge_pages = DSMPOOL_HUGE_ON;
    c.huge_page_size = 12345;
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL);
    c = cfg_of(DSMPOOL_BACKING_ANON, NULL, 8 * MIB);
    c.map_align = 3 * MIB;
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL);
    c.map_align = 0;
    c.mode = 010000;
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL);
    cr_expect_eq(dsmpool_create(NULL, &p), -EINVAL);
    cr_expect_eq(dsmpool_create(&c, NULL), -EINVAL);
}

Test(region, names_exist_or_not) {
    char name[64];
    test_name(name, sizeof name, "names");
    dsmpool *p, *q;
    cr_expect_eq(dsmpool_attach(name, &q), -ENOENT);
    cr_expect_neq(strstr(dsmpool_last_error(), name), NULL, "%s", dsmpool_last_error());
    dsmpool_config c = cfg_of(DSMPOOL_BACKING_POSIX, name, 8 * MIB);
    c.mode = 0640;
    cr_assert_eq(dsmpool_create(&c, &p), 0, "%s", dsmpool_last_error());
    char path[128];
    struct stat stt;
    snprintf(path, sizeof path, "/dev/shm%s", name);
    cr_assert_eq(stat(path, &stt), 0);
    cr_expect_eq(stt.st_mode & 0777, 0640, "mode as configured");
    cr_expect_eq(dsmpool_create(&c, &q), -EEXIST);
    cr_assert_eq(dsmpool_attach(name, &q), 0, "%s", dsmpool_last_error());
    dsmpool_stats st;
    dsmpool_get_stats(q, &st);
    cr_expect_eq(st.procs_attached, 2, "two attachments, two slots");
    dsmpool_detach(q);
    cr_assert_eq(dsmpool_destroy(p), 0);
    cr_expect_eq(dsmpool_attach(name, &q), -ENOENT);
    cr_expect_eq(dsmpool_attach("", &q), -EINVAL);
    cr_expect_eq(dsmpool_attach(NULL, &q), -EINVAL);
    cr_expect_eq(dsmpool_attach_fd(-1, &q), -EINVAL);
    cr_expect_eq(dsmpool_attach_fd(9999, &q), -EINVAL);
}

/* Open the raw object behind a POSIX pool, to damage it. */
static unsigned char *raw_map(const char *name, size_t len, int *fdp) {
    int fd = shm_open(name, O_RDWR, 0);
    cr_assert_geq(fd, 0);
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(m, MAP_FAILED);
    *fdp = fd;
    return m;
}

Test(region, corrupt_or_truncated_regions_are_refused) {
    test_private_shm(); /* ends with the truncated pool attached: its anchor goes with the process */
    char name[64];
    test_name(name, sizeof name, "corrupt");
    dsmpool_config c = cfg_of(DSMPOOL_BACKING_POSIX, name, 16 * MIB);
    dsmpool *p, *q = (dsmpool *)0x1;
    cr_assert_eq(dsmpool_create(&c, &p), 0, "%s", dsmpool_last_error());
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &s), 0);
    strcpy(dsmpool_seg_address(s), "intact");
    int fd;
    unsigned char *raw = raw_map(name, 16 * MIB, &fd);
    unsigned char saved[512];
    memcpy(saved, raw, sizeof saved);
    /* every byte of the first 512 of the header, one at a time */
    uint64_t seed = test_seed();
    int refused = 0, accepted = 0;
    for (int k = 0; k < 64; k++) {
        size_t off = (size_t)(test_rand(&seed) % 512);
        raw[off] ^= (unsigned char)(1u << (test_rand(&seed) % 8));
        int r = dsmpool_attach(name, &q);
        if (r == 0) { /* a byte attach does not depend on (the name, say) */
            accepted++;
            dsmpool_detach(q);
        } else {
            cr_expect(r == -EPROTO || r == -EOWNERDEAD, "flip at %zu: %d (%s)", off, r, dsmpool_last_error());
            refused++;
        }
        memcpy(raw, saved, sizeof saved);
    }
    cr_expect_gt(refused, 10);
    memset(raw, 0, 8); /* magic 0, and nobody is creating it: not a dsmpool */
    cr_expect_eq(dsmpool_attach(name, &q), -EPROTO);
    memcpy(raw, "DMPOOL??", 8); /* "being created", and nobody is: its creator died */
    cr_expect_eq(dsmpool_attach(name, &q), -EOWNERDEAD);
    cr_expect_neq(strstr(dsmpool_last_error(), "half-built"), NULL, "%s", dsmpool_last_error());
    memcpy(raw, saved, sizeof saved);
    memset(raw + 8, 0x77, 4); /* version */
    cr_expect_eq(dsmpool_attach(name, &q), -EPROTO);
    cr_expect_neq(strstr(dsmpool_last_error(), "format"), NULL, "%s", dsmpool_last_error());
    memcpy(raw, saved, sizeof saved);
    cr_assert_eq(dsmpool_attach(name, &q), 0, "restored: %s", dsmpool_last_error());
    dsmpool_detach(q);
    /* nothing else changed */
    cr_expect_str_eq(dsmpool_seg_address(s), "intact");
    test_check_ok(p);
    munmap(raw, 16 * MIB);
    /* truncated: the creator must not touch its mapping past the new end */
    cr_assert_eq(ftruncate(fd, 8 * MIB), 0);
    cr_expect_eq(dsmpool_attach(name, &q), -EPROTO);
    cr_expect_neq(strstr(dsmpool_last_error(), "truncated"), NULL, "%s", dsmpool_last_error());
    cr_assert_eq(ftruncate(fd, 4096), 0);
    cr_expect_eq(dsmpool_attach(name, &q), -EPROTO);
    close(fd);
    shm_unlink(name);
}

Test(region, junk_object_is_not_a_pool) {
    char name[64];
    test_name(name, sizeof name, "junk");
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, 4 * MIB), 0);
    unsigned char *m = mmap(NULL, 4 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    dsmpool *z = (dsmpool *)1;
    /* zero-filled: not a pool, and no one is making it one -- never "retry" */
    cr_expect_eq(dsmpool_attach(name, &z), -EPROTO, "%s", dsmpool_last_error());
    cr_expect_null(z);
    cr_expect_eq(strstr(dsmpool_last_error(), "retry"), NULL, "%s", dsmpool_last_error());
    uint64_t seed = test_seed();
    for (size_t i = 0; i < 4 * MIB; i += 8) *(uint64_t *)(m + i) = test_rand(&seed);
    dsmpool *q;
    cr_expect_eq(dsmpool_attach(name, &q), -EPROTO);
    /* a header copied from a real pool, but on an object of the wrong size */
    dsmpool_config c = cfg_of(DSMPOOL_BACKING_MEMFD, NULL, 16 * MIB);
    dsmpool *p;
    cr_assert_eq(dsmpool_create(&c, &p), 0);
    unsigned char hdr[4096];
    cr_assert_eq(pread(dsmpool_fd(p), hdr, sizeof hdr, 0), (ssize_t)sizeof hdr);
    memcpy(m, hdr, sizeof hdr);
    cr_expect_eq(dsmpool_attach(name, &q), -EPROTO);
    munmap(m, 4 * MIB);
    close(fd);
    shm_unlink(name);
    dsmpool_detach(p);
}

/* ---- huge pages --------------------------------------------------------- */

static char saved_nr[32], saved_ovc[32], saved_nr_1g[32];
static char saved_thp[128];
static bool mounted_here;
#define HUGE_DIR "/dev/hugepages"

static void huge_reserve(long n) {
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", n);
    test_write_file(NR_HUGE, buf);
}

static long huge_free(void) {
    char buf[32] = "0";
    test_read_file(FREE_HUGE, buf, sizeof buf);
    return atol(buf);
}

static void huge_setup(void) {
    if (test_read_file(NR_HUGE, saved_nr, sizeof saved_nr) != 0) saved_nr[0] = 0;
    if (test_read_file(OVC_HUGE, saved_ovc, sizeof saved_ovc) != 0) saved_ovc[0] = 0;
    if (test_read_file(NR_HUGE_1G, saved_nr_1g, sizeof saved_nr_1g) != 0) saved_nr_1g[0] = 0;
}

/* Every setting a test of this suite may change goes back to what it was.
 * Idempotent: huge_skip runs it too. */
static void huge_teardown(void) {
    if (mounted_here) umount(HUGE_DIR);
    mounted_here = false;
    if (saved_nr[0]) test_write_file(NR_HUGE, saved_nr);
    if (saved_ovc[0]) test_write_file(OVC_HUGE, saved_ovc);
    if (saved_nr_1g[0]) test_write_file(NR_HUGE_1G, saved_nr_1g);
}

/* Skip, putting the settings back first: Criterion does not run the
 * suite's .fini after cr_skip_test (a skipped 1 GiB test left
 * nr_hugepages at 1). */
#define huge_skip(...)                                                                                       \
    do {                                                                                                     \
        huge_teardown();                                                                                     \
        cr_skip_test(__VA_ARGS__);                                                                           \
    } while (0)

/* No surplus pages for the rest of this test (the teardown puts the setting
 * back): with vm.nr_overcommit_hugepages above 0 the kernel hands out huge
 * pages nobody reserved, so "none reserved" would not mean "none to have". */
static void overcommit_off(void) {
    if (!saved_ovc[0] || atol(saved_ovc) == 0) return;
    if (test_write_file(OVC_HUGE, "0") != 0)
        huge_skip("%s is %ld and cannot be set to 0 (not root?): the kernel would hand out surplus "
                     "huge pages", OVC_HUGE, atol(saved_ovc));
}

/* Reserve n more pages for this test, or skip saying why. */
static void need_huge(long n) {
    if (!saved_nr[0]) huge_skip("no 2 MiB hugetlb pool on this kernel (%s missing)", NR_HUGE);
    overcommit_off(); /* the pools take the reserved pages, which the tests count */
    huge_reserve(atol(saved_nr) + n);
    long got = huge_free(); /* read before huge_skip puts the setting back */
    if (got < n)
        huge_skip("could not reserve %ld huge pages of 2 MiB (free %ld; not root, or memory "
                  "too fragmented)", n, got);
}

/* No 2 MiB page to be had for this test: none reserved and none on demand. */
static void need_no_huge(void) {
    if (!saved_nr[0]) huge_skip("no 2 MiB hugetlb pool on this kernel (%s missing)", NR_HUGE);
    overcommit_off();
    huge_reserve(0);
    long left = huge_free();
    if (left > 0) huge_skip("%ld huge pages of 2 MiB stay free with nr_hugepages = 0 (not root?)", left);
}

static void need_hugetlbfs(void) {
    FILE *f = fopen("/proc/self/mounts", "r");
    char line[512];
    bool have = false;
    while (f && fgets(line, sizeof line, f)) have |= strstr(line, " hugetlbfs ") != NULL;
    if (f) fclose(f);
    if (have) return;
    mkdir(HUGE_DIR, 0755);
    if (mount("none", HUGE_DIR, "hugetlbfs", 0, "pagesize=2M") != 0)
        huge_skip("no hugetlbfs mounted and mounting one failed: %s", strerror(errno));
    mounted_here = true;
}

TestSuite(huge, .init = huge_setup, .fini = huge_teardown);

Test(huge, on_gets_2mib_pages_on_every_backing, .timeout = 60) {
    need_huge(64);
    need_hugetlbfs();
    char pname[64], sname[64];
    test_name(pname, sizeof pname, "huge");
    snprintf(sname, sizeof sname, "dsmpool-test-huge-%llu", test_uid());
    dsmpool_backing bs[4] = {DSMPOOL_BACKING_ANON, DSMPOOL_BACKING_MEMFD, DSMPOOL_BACKING_POSIX,
                             DSMPOOL_BACKING_SYSV};
    const char *names[4] = {NULL, NULL, pname, sname};
    for (int i = 0; i < 4; i++) {
        dsmpool_config c = cfg_of(bs[i], names[i], 32 * MIB);
        c.huge_pages = DSMPOOL_HUGE_ON;
        dsmpool *p, *q;
        long before = huge_free();
        int r = dsmpool_create(&c, &p);
        cr_assert_eq(r, 0, "%s: %s", dsmpool_backing_name(bs[i]), dsmpool_last_error());
        dsmpool_stats st;
        dsmpool_get_stats(p, &st);
        cr_expect(st.huge_pages);
        cr_expect_not(st.huge_fallback);
        cr_expect_eq(st.page_size, 2 * MIB);
        cr_expect_eq(before - huge_free(), 16, "%s took %ld pages", dsmpool_backing_name(bs[i]),
                     before - huge_free());
        dsmpool_seg *s;
        cr_assert_eq(dsmpool_seg_create(p, 2 * MIB, 0, &s), 0);
        void *a = dsmpool_seg_address(s);
        cr_expect_eq((uintptr_t)a % (2 * MIB), 0);
        cr_expect_eq(test_smaps_kb(a, 2 * MIB, "KernelPageSize"), 2048);
        long hp = test_smaps_kb(a, 2 * MIB, "Shared_Hugetlb") + test_smaps_kb(a, 2 * MIB, "Private_Hugetlb");
        cr_expect_eq(hp, 32 * 1024, "%s: %ld kB in hugetlb pages", dsmpool_backing_name(bs[i]), hp);
        cr_expect_eq(st.huge_mapped_bytes, 32 * MIB);
        memset(a, 1, 2 * MIB);
        if (names[i]) { /* attach by name finds it (a hugetlbfs file for POSIX) */
            cr_assert_eq(dsmpool_attach(names[i], &q), 0, "%s", dsmpool_last_error());
            dsmpool_seg *t;
            cr_assert_eq(dsmpool_seg_attach(q, dsmpool_seg_handle(s), &t), 0);
            cr_expect_eq(((char *)dsmpool_seg_address(t))[2 * MIB - 1], 1);
            dsmpool_seg_detach(t);
            dsmpool_detach(q);
        }
        dsmpool_seg_detach(s);
        test_check_ok(p);
        cr_assert_eq(dsmpool_destroy(p), 0);
        cr_expect_eq(huge_free(), before, "pages returned");
    }
}

Test(huge, on_without_pages_fails_with_advice) {
    need_no_huge();
    dsmpool_config c = cfg_of(DSMPOOL_BACKING_MEMFD, NULL, 32 * MIB);
    c.huge_pages = DSMPOOL_HUGE_ON;
    dsmpool *p = (dsmpool *)0x1;
    cr_expect_eq(dsmpool_create(&c, &p), -ENOMEM);
    cr_expect_null(p);
    cr_expect_neq(strstr(dsmpool_last_error(), "nr_hugepages"), NULL, "%s", dsmpool_last_error());
    cr_expect_neq(strstr(dsmpool_last_error(), "16 pages of 2048 kB are needed"), NULL, "%s", dsmpool_last_error());
}

Test(huge, try_falls_back_and_says_so) {
    need_no_huge();
    dsmpool_config c = cfg_of(DSMPOOL_BACKING_ANON, NULL, 32 * MIB);
    c.huge_pages = DSMPOOL_HUGE_TRY;
    dsmpool *p;
    cr_assert_eq(dsmpool_create(&c, &p), 0, "%s", dsmpool_last_error());
    const char *note = dsmpool_last_error();
    cr_expect_neq(strstr(note, "DSMPOOL_HUGE_TRY: the pool is in 4 KiB pages: "), NULL, "note: %s", note);
    cr_expect_neq(strstr(note, "nr_hugepages"), NULL, "the note says what to reserve: %s", note);
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    cr_expect(st.huge_fallback);
    cr_expect_not(st.huge_pages);
    cr_expect_eq(st.page_size, 4096);
    dsmpool_seg *s;
    cr_assert_eq(dsmpool_seg_create(p, 4096, 0, &s), 0);
    cr_expect_eq(test_smaps_kb(dsmpool_seg_address(s), 4096, "KernelPageSize"), 4);
    dsmpool_detach(p);
}

/* Every hugetlb problem in one message: a POSIX pool in huge pages with no
 * hugetlbfs mounted (a private mount namespace without any) and no pages
 * reserved is told both, numbered, instead of one now and one later. */
Test(huge, every_problem_in_one_message) {
    need_no_huge();
    pid_t kid = fork();
    if (kid == 0) {
        if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) _exit(77);
        FILE *f = fopen("/proc/self/mounts", "r");
        char dev[256], dir[512], type[64];
        while (f && fscanf(f, "%255s %511s %63s %*[^\n]", dev, dir, type) == 3)
            if (!strcmp(type, "hugetlbfs") && umount2(dir, MNT_DETACH) != 0) _exit(78);
        if (f) fclose(f);
        char name[64];
        test_name(name, sizeof name, "hugeall");
        dsmpool_config c = cfg_of(DSMPOOL_BACKING_POSIX, name, 32 * MIB);
        c.huge_pages = DSMPOOL_HUGE_ON;
        dsmpool *p;
        int r = dsmpool_create(&c, &p);
        const char *m = dsmpool_last_error();
        fprintf(stderr, "[NOTE] %s\n", m);
        _exit(r == -ENOMEM && strstr(m, "(1) no hugetlbfs is mounted") && strstr(m, "(2) 16 pages of 2048 kB") &&
                      strstr(m, "nr_hugepages") ? 0 : 1);
    }
    int st = test_wait(kid);
    if (st == 77) huge_skip("no private mount namespace here");
    cr_expect_eq(st, 0, "one message with both problems (see the NOTE)");
}

/* HUGE_TRY whose tables do not fit beside the data in 1 GiB pages (a 1 GiB
 * pool) falls back to base pages, as any other huge-page problem does. */
Test(huge, try_1gib_too_small_for_tables_falls_back) {
    dsmpool_config c = cfg_of(DSMPOOL_BACKING_ANON, NULL, 1024 * MIB);
    c.huge_pages = DSMPOOL_HUGE_TRY;
    c.huge_page_size = 1024 * MIB;
    c.prefault = false;
    dsmpool *p;
    cr_assert_eq(dsmpool_create(&c, &p), 0, "%s", dsmpool_last_error());
    dsmpool_stats st;
    cr_assert_eq(dsmpool_get_stats(p, &st), 0);
    cr_expect_eq(st.page_size, 4096);
    cr_expect(st.huge_fallback);
    cr_assert_eq(dsmpool_detach(p), 0);
}

static long huge_free_1g(void) {
    char buf[32] = "0";
    test_read_file(FREE_HUGE_1G, buf, sizeof buf);
    return atol(buf);
}

Test(huge, one_gib_pages_where_supported, .timeout = 120) {
    struct stat st;
    dsmpool_config c = cfg_of(DSMPOOL_BACKING_ANON, NULL, 1024 * MIB);
    c.huge_pages = DSMPOOL_HUGE_ON;
    c.huge_page_size = 1024 * MIB;
    dsmpool *p;
    if (stat("/sys/kernel/mm/hugepages/hugepages-1048576kB", &st) != 0) {
        cr_expect_eq(dsmpool_create(&c, &p), -ENOMEM);
        cr_expect_neq(strstr(dsmpool_last_error(), "1048576 kB"), NULL, "%s", dsmpool_last_error());
        fprintf(stderr, "[NOTE] 1 GiB pages: not supported by this CPU/kernel; checked the error only\n");
        return;
    }
    /* the data starts at a 1 GiB boundary after the tables: a 1 GiB pool
     * has no room, and the message says what to ask for */
    cr_expect_eq(dsmpool_create(&c, &p), -EINVAL);
    cr_expect_neq(strstr(dsmpool_last_error(), "the least that fits is 2147483648 bytes"), NULL, "%s",
                  dsmpool_last_error());
    /* two pages, if the kernel finds two free contiguous GiB (the teardown
     * puts nr_hugepages back) */
    long before = atol(saved_nr_1g), want = before + 2;
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", want);
    if (test_write_file(NR_HUGE_1G, buf) != 0) huge_skip("cannot write %s (not root?)", NR_HUGE_1G);
    test_read_file(NR_HUGE_1G, buf, sizeof buf);
    long got = atol(buf) - before, fr = huge_free_1g(); /* before huge_skip puts it back */
    if (got < 2 || fr < 2)
        huge_skip("the kernel found contiguous memory for only %ld of 2 pages of 1 GiB (%ld free): "
                  "memory too fragmented; the 1 GiB pool was not tested", got, fr);
    c.size = 2048 * MIB;
    cr_assert_eq(dsmpool_create(&c, &p), 0, "%s", dsmpool_last_error());
    dsmpool_stats s;
    dsmpool_get_stats(p, &s);
    cr_expect(s.huge_pages);
    cr_expect_eq(s.page_size, 1024 * MIB);
    cr_expect_eq(s.data_size, 1024 * MIB, "one page of data, one for the tables");
    cr_expect_eq(huge_free_1g(), fr - 2, "both pages taken");
    dsmpool_seg *g;
    cr_assert_eq(dsmpool_seg_create(p, 512 * MIB, 0, &g), 0, "%s", dsmpool_last_error());
    char *a = dsmpool_seg_address(g);
    cr_expect_eq(test_smaps_kb(a, 4096, "KernelPageSize"), 1024 * 1024);
    memset(a, 7, 512 * MIB);
    cr_expect_eq(a[512 * MIB - 1], 7);
    dsmpool_seg_detach(g);
    test_check_ok(p);
    cr_assert_eq(dsmpool_destroy(p), 0, "%s", dsmpool_last_error());
    cr_expect_eq(huge_free_1g(), fr, "pages returned");
}

static char saved_shm_huge[32];

/* The huge= option of the /dev/shm mount ("never" when absent). */
static void shm_huge_option(char *buf, size_t n) {
    FILE *f = fopen("/proc/self/mounts", "r");
    char line[512];
    snprintf(buf, n, "never");
    while (f && fgets(line, sizeof line, f)) {
        char dev[128], dir[256], type[64], opts[256];
        if (sscanf(line, "%127s %255s %63s %255s", dev, dir, type, opts) != 4) continue;
        if (strcmp(dir, "/dev/shm") != 0) continue;
        char *h = strstr(opts, "huge=");
        if (h) {
            snprintf(buf, n, "%s", h + 5);
            buf[strcspn(buf, ",")] = 0;
        }
    }
    if (f) fclose(f);
}

/* Remount /dev/shm with another huge= option, keeping its other flags. */
static int shm_remount(const char *huge) {
    struct statvfs v;
    if (statvfs("/dev/shm", &v) != 0) return -1;
    unsigned long fl = MS_REMOUNT;
    if (v.f_flag & ST_NOSUID) fl |= MS_NOSUID;
    if (v.f_flag & ST_NODEV) fl |= MS_NODEV;
    if (v.f_flag & ST_NOEXEC) fl |= MS_NOEXEC;
    if (v.f_flag & ST_RELATIME) fl |= MS_RELATIME;
    char opts[64];
    snprintf(opts, sizeof opts, "huge=%s", huge);
    return mount("tmpfs", "/dev/shm", "tmpfs", fl, opts);
}

static void thp_setup(void) {
    if (test_read_file(THP_SHMEM, saved_thp, sizeof saved_thp) != 0) saved_thp[0] = 0;
    shm_huge_option(saved_shm_huge, sizeof saved_shm_huge);
}

/* saved_thp holds e.g. "always within_size [never] deny force": put back the [one] */
static void thp_teardown(void) {
    char *a = strchr(saved_thp, '['), *b = a ? strchr(a, ']') : NULL;
    if (a && b) {
        *b = 0;
        test_write_file(THP_SHMEM, a + 1);
    }
    char now[32];
    shm_huge_option(now, sizeof now);
    if (strcmp(now, saved_shm_huge) != 0) shm_remount(saved_shm_huge);
}

TestSuite(thp, .init = thp_setup, .fini = thp_teardown);

Test(thp, transparent_on_shmem, .timeout = 60) {
    if (!saved_thp[0]) cr_skip_test("no %s: kernel without shmem THP", THP_SHMEM);
    if (test_write_file(THP_SHMEM, "advise") != 0)
        cr_skip_test("cannot set %s (not root?)", THP_SHMEM);
    /* shmem_enabled governs anonymous shared memory and memfd; /dev/shm is a
     * tmpfs mount with its own huge= option. */
    bool posix = shm_remount("advise") == 0;
    if (!posix) fprintf(stderr, "[NOTE] cannot remount /dev/shm with huge=advise: POSIX THP not tested\n");
    dsmpool_backing bs[3] = {DSMPOOL_BACKING_ANON, DSMPOOL_BACKING_MEMFD, DSMPOOL_BACKING_POSIX};
    char name[64];
    test_name(name, sizeof name, "thp");
    for (int i = 0; i < (posix ? 3 : 2); i++) {
        dsmpool_config c = cfg_of(bs[i], bs[i] == DSMPOOL_BACKING_POSIX ? name : NULL, 64 * MIB);
        c.huge_pages = DSMPOOL_HUGE_TRANSPARENT;
        dsmpool *p;
        cr_assert_eq(dsmpool_create(&c, &p), 0, "%s", dsmpool_last_error());
        dsmpool_stats st;
        dsmpool_get_stats(p, &st);
        cr_expect(st.thp_advised);
        dsmpool_seg *s;
        cr_assert_eq(dsmpool_seg_create(p, 32 * MIB, 0, &s), 0);
        long pmd = test_smaps_kb(dsmpool_seg_address(s), 32 * MIB, "ShmemPmdMapped") +
                   test_smaps_kb(dsmpool_seg_address(s), 32 * MIB, "FilePmdMapped");
        cr_expect_geq(pmd, 32 * 1024, "%s: only %ld kB mapped by PMDs", dsmpool_backing_name(bs[i]), pmd);
        dsmpool_get_stats(p, &st);
        cr_expect_eq(st.huge_mapped_bytes, 64 * MIB, "%s: stats say %zu bytes in huge pages",
                     dsmpool_backing_name(bs[i]), st.huge_mapped_bytes);
        dsmpool_seg_detach(s);
        dsmpool_destroy(p);
    }
}

/* HUGE_TRANSPARENT with shmem THP off: create succeeds, and
 * dsmpool_last_error() says the pool got no huge page and what to set. */
Test(thp, transparent_off_leaves_a_note, .timeout = 60) {
    if (!saved_thp[0]) cr_skip_test("no %s: kernel without shmem THP", THP_SHMEM);
    if (test_write_file(THP_SHMEM, "never") != 0)
        cr_skip_test("cannot set %s (not root?)", THP_SHMEM);
    dsmpool_config c = cfg_of(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    c.huge_pages = DSMPOOL_HUGE_TRANSPARENT;
    dsmpool *p;
    cr_assert_eq(dsmpool_create(&c, &p), 0, "%s", dsmpool_last_error());
    const char *note = dsmpool_last_error();
    cr_expect_neq(strstr(note, "DSMPOOL_HUGE_TRANSPARENT: the kernel gave the pool no huge page"), NULL,
                  "note: %s", note);
    cr_expect_neq(strstr(note, "shmem_enabled"), NULL, "%s", note);
    dsmpool_detach(p);
    c.huge_pages = DSMPOOL_HUGE_OFF;
    cr_assert_eq(dsmpool_create(&c, &p), 0);
    cr_expect_str_eq(dsmpool_last_error(), "no error", "no note when nothing was asked for");
    dsmpool_detach(p);
}

/* The library says which version runs: the string parses to the number and
 * both agree with the header this test was built with. */
Test(region, version_at_run_time) {
    const char *v = dsmpool_version();
    cr_assert_not_null(v);
    unsigned ma, mi, pa;
    char end;
    cr_assert_eq(sscanf(v, "%u.%u.%u%c", &ma, &mi, &pa, &end), 3, "'%s' is major.minor.patch", v);
    cr_expect_eq((int)(ma * 10000 + mi * 100 + pa), dsmpool_version_number());
    cr_expect_str_eq(v, DSMPOOL_VERSION_STRING);
    cr_expect_eq(dsmpool_version_number(), DSMPOOL_VERSION_NUMBER);
    cr_expect_eq(ma, DSMPOOL_VERSION_MAJOR);
    cr_expect_eq(mi, DSMPOOL_VERSION_MINOR);
}

/* dsmpool_min_size: the least size create accepts, for several shapes of
 * configuration; one page less is refused with a message that names it. */
static void min_size_case(dsmpool_config c, const char *what) {
    size_t min = dsmpool_min_size(&c);
    cr_assert_gt(min, 0, "%s: %s", what, dsmpool_last_error());
    cr_expect_eq(min % 4096, 0, "%s", what);
    dsmpool *p = NULL;
    c.size = min;
    int r = dsmpool_create(&c, &p);
    cr_assert_eq(r, 0, "%s: min %zu refused: %s", what, min, dsmpool_last_error());
    dsmpool_stats st;
    cr_assert_eq(dsmpool_get_stats(p, &st), 0);
    cr_expect_geq(st.subpool[0].size, 2 * MIB, "%s: a 2 MiB sub-pool at least", what);
    cr_assert_eq(dsmpool_detach(p), 0);
    c.size = min - 4096;
    r = dsmpool_create(&c, &p);
    cr_expect_eq(r, -EINVAL, "%s: %zu accepted though below the minimum %zu", what, c.size, min);
    char want[64];
    snprintf(want, sizeof want, "the least that fits is %zu bytes", min);
    cr_expect_neq(strstr(dsmpool_last_error(), want), NULL, "%s: %s", what, dsmpool_last_error());
}

Test(region, min_size_is_exact) {
    dsmpool_config c = cfg_of(DSMPOOL_BACKING_ANON, NULL, 0);
    c.prefault = false;
    min_size_case(c, "defaults");
    c.max_procs = 4096;
    min_size_case(c, "4096 process slots");
    c.max_procs = 0;
    c.max_segments = 100000;
    min_size_case(c, "100000 segments");
    c.max_segments = 0;
    c.backing = DSMPOOL_BACKING_MEMFD;
    min_size_case(c, "memfd");
    cr_expect_eq(dsmpool_min_size(NULL), 0);
    c.huge_pages = DSMPOOL_HUGE_ON;
    c.huge_page_size = 12345;
    cr_expect_eq(dsmpool_min_size(&c), 0, "a bad huge page size has no minimum");
    cr_expect_neq(strstr(dsmpool_last_error(), "huge_page_size"), NULL, "%s", dsmpool_last_error());
    c.huge_page_size = 2 * MIB;
    size_t m2 = dsmpool_min_size(&c);
    cr_expect_eq(m2 % (2 * MIB), 0, "in 2 MiB pages: %zu", m2);
}

/* A region of another format says which library made it and what to do;
 * one of format 2 (before the library's version was kept) says so too. */
Test(region, other_format_names_its_library) {
    dsmpool_config c = cfg_of(DSMPOOL_BACKING_MEMFD, NULL, 8 * MIB);
    dsmpool *p, *q = NULL;
    cr_assert_eq(dsmpool_create(&c, &p), 0, "%s", dsmpool_last_error());
    int fd = dsmpool_fd(p);
    uint32_t *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(w, MAP_FAILED);
    cr_expect_eq(w[4], (uint32_t)DSMPOOL_VERSION_NUMBER, "the creator's version at byte 16");
    uint32_t v = w[2];
    w[2] = v + 1;   /* format: a later one */
    w[4] = 20304;   /* made by 2.3.4 */
    cr_expect_eq(dsmpool_attach_fd(fd, &q), -EPROTO);
    cr_expect_null(q);
    const char *m = dsmpool_last_error();
    char want[64];
    snprintf(want, sizeof want, "made by dsmpool 2.3.4 in region format %u", v + 1);
    cr_expect_neq(strstr(m, want), NULL, "%s", m);
    cr_expect_neq(strstr(m, "create it again"), NULL, "%s", m);
    cr_expect_neq(strstr(m, DSMPOOL_VERSION_STRING), NULL, "%s", m);
    w[2] = 2;
    cr_expect_eq(dsmpool_attach_fd(fd, &q), -EPROTO);
    cr_expect_neq(strstr(dsmpool_last_error(), "before 0.1.0"), NULL, "%s", dsmpool_last_error());
    w[2] = v;
    w[4] = DSMPOOL_VERSION_NUMBER;
    cr_assert_eq(dsmpool_attach_fd(fd, &q), 0, "%s", dsmpool_last_error());
    cr_expect_eq(dsmpool_detach(q), 0);
    munmap(w, 4096);
    cr_expect_eq(dsmpool_detach(p), 0);
}

/* Structs that grow (the header's rule): a program built against an older
 * header (a shorter config and stats) and one against a newer header (a
 * longer one) both work with this library; the library writes nothing past
 * the caller's struct; a newer option it does not know is refused; a
 * config that dsmpool_config_init() never saw is refused. */
Test(region, structs_that_grow) {
    enum { OLD = offsetof(dsmpool_config, huge_page_size), NEW = sizeof(dsmpool_config) + 64 };
    unsigned char buf[NEW + 64];
    /* older: its config ends before huge_page_size; the rest keeps defaults */
    memset(buf, 0xaa, sizeof buf);
    dsmpool_config_init_sized((dsmpool_config *)buf, OLD);
    for (size_t i = OLD; i < sizeof buf; i++) cr_assert_eq(buf[i], 0xaa, "init wrote byte %zu past %d", i, OLD);
    dsmpool_config *c = (dsmpool_config *)buf;
    cr_expect_eq(c->struct_size, OLD);
    c->size = 8 * MIB;
    dsmpool *p;
    cr_assert_eq(dsmpool_create(c, &p), 0, "%s", dsmpool_last_error());
    /* an older program's stats: only what it knows is written */
    enum { OLDST = offsetof(dsmpool_stats, backing) };
    unsigned char sb[sizeof(dsmpool_stats) + 64];
    memset(sb, 0xaa, sizeof sb);
    cr_assert_eq(dsmpool_get_stats_sized(p, (dsmpool_stats *)sb, OLDST), 0);
    for (size_t i = OLDST; i < sizeof sb; i++) cr_assert_eq(sb[i], 0xaa, "stats wrote byte %zu past %d", i, OLDST);
    dsmpool_stats *st = (dsmpool_stats *)sb;
    cr_expect_eq(st->struct_size, OLDST);
    cr_expect_eq(st->region_size, 8 * MIB);
    cr_expect_eq(st->page_size, 4096);
    /* a newer program's stats: ours filled, the rest zero, struct_size says so */
    memset(sb, 0xaa, sizeof sb);
    cr_assert_eq(dsmpool_get_stats_sized(p, (dsmpool_stats *)sb, sizeof sb), 0);
    cr_expect_eq(st->struct_size, sizeof(dsmpool_stats));
    for (size_t i = sizeof(dsmpool_stats); i < sizeof sb; i++) cr_assert_eq(sb[i], 0, "byte %zu", i);
    dsmpool_stats full;
    cr_assert_eq(dsmpool_get_stats(p, &full), 0);
    cr_expect(full.prefaulted_bytes > 0, "the older config's missing prefault defaulted to true");
    cr_expect_eq(dsmpool_get_stats_sized(p, (dsmpool_stats *)sb, 4), -EINVAL);
    cr_assert_eq(dsmpool_detach(p), 0);
    /* newer: works while its new options are left alone */
    memset(buf, 0xaa, sizeof buf);
    dsmpool_config_init_sized((dsmpool_config *)buf, NEW);
    for (size_t i = NEW; i < sizeof buf; i++) cr_assert_eq(buf[i], 0xaa, "byte %zu", i);
    cr_expect_eq(c->struct_size, NEW);
    c->size = 8 * MIB;
    cr_assert_eq(dsmpool_create(c, &p), 0, "%s", dsmpool_last_error());
    cr_assert_eq(dsmpool_detach(p), 0);
    buf[sizeof(dsmpool_config) + 3] = 1; /* an option this library does not know */
    cr_expect_eq(dsmpool_create(c, &p), -EINVAL);
    cr_expect_neq(strstr(dsmpool_last_error(), "newer dsmpool header"), NULL, "%s", dsmpool_last_error());
    cr_expect_eq(dsmpool_min_size(c), 0);
    /* a struct_size that ends inside a field (half of name's pointer): only
     * whole fields are read, the rest keeps its defaults; no crash */
    memset(buf, 0xaa, sizeof buf);
    dsmpool_config_init_sized((dsmpool_config *)buf, offsetof(dsmpool_config, name) + 4);
    c->size = 8 * MIB;
    cr_assert_eq(dsmpool_create(c, &p), 0, "%s", dsmpool_last_error());
    cr_assert_eq(dsmpool_detach(p), 0);
    /* never initialised */
    dsmpool_config z;
    memset(&z, 0, sizeof z);
    z.size = 8 * MIB;
    cr_expect_eq(dsmpool_create(&z, &p), -EINVAL);
    cr_expect_neq(strstr(dsmpool_last_error(), "dsmpool_config_init"), NULL, "%s", dsmpool_last_error());
}
