/*
 * test_presence.c -- who is in a pool is decided by the region itself, in
 * every namespace (life.c [anchor], life.c [presence] and life.c [life], live.c [presence and life]; issue 24).
 *
 *   another /dev/shm   a process of the pool in a mount namespace with a
 *                      /dev/shm of its own (a sandboxed or containerised
 *                      worker): a fork()ed child keeps the pool's home
 *                      /dev/shm (its OS blocks and segments live there and
 *                      survive its parent), an unrelated attacher is
 *                      counted present but makes no OS objects; the last
 *                      process out is really the last, and nothing is left
 *                      in either /dev/shm
 *   refused            a process that cannot hold the region's locks of its
 *                      own (no /proc for a memfd or anonymous pool) is
 *                      refused with -ENOLCK, never counted out
 *   remove race        an attach that races dsmpool_remove() fails having
 *                      made nothing (forced at life.remove.locked)
 *
 * Every test runs in a mount (and IPC) namespace of its own with a fresh
 * tmpfs on /dev/shm -- the pool's home -- so that it counts only its own
 * objects and leaves nothing on the machine; children that move make
 * another one. Needs root (unshare); says so and skips otherwise. Children
 * report through exit codes (their names below).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <dsmpool.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dp_internal.h"
#include "testhooks.h"
#include "testutil.h"


/* A mount namespace of this process's own with a fresh tmpfs on /dev/shm
 * (and, with ipc, an IPC namespace: System V objects of its own). */
static int own_dev_shm(bool ipc) {
    if (unshare(CLONE_NEWNS | (ipc ? CLONE_NEWIPC : 0)) != 0) return -errno;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -errno;
    if (mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=256m") != 0) return -errno;
    return 0;
}

static void home(void) {
    int r = own_dev_shm(true);
    if (r) cr_skip_test("needs a mount and IPC namespace of its own (root): %s", strerror(-r));
}

/* dsmpool objects in this process's /dev/shm; of pool id only if id != 0
 * (*anchor: its anchor is there). */
static int shm_objects(uint64_t id, bool *anchor) {
    char pre[64];
    snprintf(pre, sizeof pre, id ? "dsmpool.%016llx" : "dsmpool", (unsigned long long)id);
    size_t pl = strlen(pre);
    DIR *d = opendir("/dev/shm");
    if (!d) return -1;
    int n = 0;
    if (anchor) *anchor = false;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, pre, pl) != 0) continue;
        if (id && e->d_name[pl] == 0 && anchor) *anchor = true;
        else n++;
    }
    closedir(d);
    return n;
}

static dsmpool *mkpool(dsmpool_backing b, const char *name) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = 8 * MIB;
    cfg.backing = b;
    cfg.name = name;
    cfg.prefault = false;
    dsmpool *p = NULL;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "create: %s", dsmpool_last_error());
    return p;
}

static bool all(const void *m, unsigned char v, size_t n) {
    const unsigned char *c = m;
    for (size_t i = 0; i < n; i++)
        if (c[i] != v) return false;
    return true;
}

static void say(int fd) { cr_assert_eq(write(fd, "x", 1), 1); }
static bool hear(int fd) {
    char c;
    return read(fd, &c, 1) == 1;
}
#define CHILD_SAY(fd) \
    do {              \
        char c_ = 'x'; \
        if (write((fd), &c_, 1) != 1) _exit(90); \
    } while (0)
#define CHILD_HEAR(fd) \
    do {               \
        char c_;       \
        if (read((fd), &c_, 1) != 1) _exit(91); \
    } while (0)

#define BLOCK (16 * MIB) /* bigger than the pool: an OS fallback object */

/* ---- a fork()ed child in another mount namespace ------------------------------ */

/* The anonymous pool's child moves to a /dev/shm of its own and allocates
 * OS-backed blocks; its parent, the last process of the first namespace,
 * leaves. Before the fix the child made a second anchor in its /dev/shm,
 * the parent took itself for the last process out and dropped the child's
 * OS blocks from the area: the child's next block got the same pointer
 * and the same memory as one it still held. */
Test(presence, anon_child_in_another_mount_namespace_keeps_its_os_blocks, .timeout = 60) {
    home();
    dsmpool *p = mkpool(DSMPOOL_BACKING_ANON, NULL);
    uint64_t id = p->geo.pool_id;
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0, "%s", dsmpool_last_error());
    dsmpool_handle ah = dsmpool_area_handle(a);
    int up[2], down[2];
    cr_assert_eq(pipe(up), 0);
    cr_assert_eq(pipe(down), 0);
    pid_t c = fork();
    if (c == 0) {
        close(up[0]);
        close(down[1]);
        if (own_dev_shm(false) != 0) _exit(77);
        dsmpool_area *ca;
        dsmpool_ptr x, y;
        if (dsmpool_area_attach(p, ah, &ca) != 0 || dsmpool_area_alloc(ca, BLOCK, 0, &x) != 0) _exit(3);
        if (!(x & DSMPOOL_PTR_OS_BIT)) _exit(4); /* not an OS block: the test proves nothing */
        char *mx = dsmpool_area_addr(ca, x);
        if (!mx) _exit(5);
        memset(mx, 0x5a, BLOCK);
        CHILD_SAY(up[1]);
        CHILD_HEAR(down[0]); /* the parent has left */
        if (dsmpool_area_alloc(ca, BLOCK, 0, &y) != 0) _exit(6);
        char *my = dsmpool_area_addr(ca, y);
        if (y == x || !my || my == mx) _exit(7); /* the old block handed out again */
        memset(my, 0xa5, BLOCK);
        if (!all(mx, 0x5a, BLOCK)) _exit(8); /* its bytes were changed */
        if (dsmpool_area_free(ca, x) != 0 || dsmpool_area_free(ca, y) != 0) _exit(9);
        if (dsmpool_check(p) != 0) _exit(10);
        if (dsmpool_area_detach(ca) != 0 || dsmpool_detach(p) != 0) _exit(11);
        _exit(shm_objects(0, NULL) == 0 ? 0 : 12); /* nothing was made in its own /dev/shm */
    }
    close(up[1]);
    close(down[0]);
    if (!hear(up[0])) {
        int st = test_wait(c);
        if (st == 77) cr_skip_test("the child cannot make a mount namespace");
        cr_assert(false, "child failed before the parent left: %d", st);
    }
    cr_assert_eq(dsmpool_area_detach(a), 0);
    cr_assert_eq(dsmpool_detach(p), 0); /* the child is present: not the last process out */
    bool anchor;
    cr_expect_eq(shm_objects(id, &anchor), 1, "the child's OS block is not in the pool's /dev/shm");
    cr_expect(anchor, "the parent's detach took the anchor of a pool with a live process");
    say(down[1]);
    int st = test_wait(c);
    cr_expect_eq(st, 0, "child: %d (3 attach/alloc, 7 the same block twice, 8 bytes changed, 10 check, 12 "
                 "objects in its own /dev/shm)", st);
    cr_expect_eq(shm_objects(id, &anchor), 0, "the last process out left OS objects");
    cr_expect_not(anchor, "the last process out left the anchor");
}

/* The fallback-segment case: a child holds its parent's OS segment, moves
 * to a /dev/shm of its own, and attaches the segment again after the
 * parent left. Before the fix the parent's detach freed the descriptor
 * and unlinked the object: the second attach said -ESTALE. */
Test(presence, fallback_segment_of_a_child_in_another_mount_namespace_outlives_its_parent, .timeout = 60) {
    home();
    dsmpool *p = mkpool(DSMPOOL_BACKING_ANON, NULL);
    uint64_t id = p->geo.pool_id;
    dsmpool_seg *f;
    cr_assert_eq(dsmpool_seg_create(p, BLOCK, 0, &f), 0, "%s", dsmpool_last_error());
    cr_assert(dsmpool_seg_is_fallback(f));
    memset(dsmpool_seg_address(f), 3, BLOCK);
    dsmpool_handle h = dsmpool_seg_handle(f);
    int up[2], down[2];
    cr_assert_eq(pipe(up), 0);
    cr_assert_eq(pipe(down), 0);
    pid_t c = fork();
    if (c == 0) {
        close(up[0]);
        close(down[1]);
        if (own_dev_shm(false) != 0) _exit(77);
        dsmpool_seg *t, *u;
        /* the first call takes over the inherited attachment (a reference in
         * the child's name); it writes through the inherited mapping */
        if (dsmpool_seg_create(p, 64 * KIB, 0, &t) != 0) _exit(3);
        if (!all(dsmpool_seg_address(f), 3, BLOCK)) _exit(4);
        memset(dsmpool_seg_address(f), 4, BLOCK);
        CHILD_SAY(up[1]);
        CHILD_HEAR(down[0]); /* the parent has left */
        if (dsmpool_seg_attach(p, h, &u) != 0) _exit(5); /* -ESTALE before the fix */
        if (!all(dsmpool_seg_address(u), 4, BLOCK)) _exit(6); /* the same memory, mapped again */
        if (dsmpool_seg_detach(u) != 0 || dsmpool_seg_detach(t) != 0 || dsmpool_seg_detach(f) != 0) _exit(7);
        if (dsmpool_check(p) != 0 || dsmpool_detach(p) != 0) _exit(8);
        _exit(shm_objects(0, NULL) == 0 ? 0 : 9);
    }
    close(up[1]);
    close(down[0]);
    if (!hear(up[0])) {
        int st = test_wait(c);
        if (st == 77) cr_skip_test("the child cannot make a mount namespace");
        cr_assert(false, "child failed before the parent left: %d", st);
    }
    cr_assert_eq(dsmpool_seg_detach(f), 0);
    cr_assert_eq(dsmpool_detach(p), 0);
    bool anchor;
    cr_expect_eq(shm_objects(id, &anchor), 1, "the parent's detach removed a segment the child holds");
    cr_expect(anchor);
    say(down[1]);
    int st = test_wait(c);
    cr_expect_eq(st, 0, "child: %d (3 adoption, 5 second attach after the parent left, 6 bytes, 9 "
                 "objects in its own /dev/shm)", st);
    cr_expect_eq(shm_objects(id, &anchor) + anchor, 0, "the last process out left objects");
}

/* ---- an unrelated process in another mount namespace ---------------------------- */

/* A System V pool attached by name from a process with a /dev/shm of its
 * own: it is present (the parent's detach is not the last process out, so
 * the parent's pinned OS segment stays), and it makes nothing in its
 * /dev/shm: no anchor, no OS object (-ENOMEM where the pool cannot serve,
 * -EXDEV for the home's OS segment, each with a message). Before the fix
 * it made an anchor of its own there, and the parent's detach freed the
 * pinned segment: attaching its handle again said -ESTALE. */
Test(presence, sysv_attacher_in_another_mount_namespace_is_present, .timeout = 60) {
    home();
    char name[64];
    snprintf(name, sizeof name, "dsmpool-test-presence-%llu", test_uid());
    dsmpool *p = mkpool(DSMPOOL_BACKING_SYSV, name);
    uint64_t id = p->geo.pool_id;
    dsmpool_seg *f;
    cr_assert_eq(dsmpool_seg_create(p, BLOCK, 0, &f), 0, "%s", dsmpool_last_error());
    cr_assert(dsmpool_seg_is_fallback(f));
    memset(dsmpool_seg_address(f), 7, BLOCK);
    dsmpool_handle h = dsmpool_seg_handle(f);
    cr_assert_eq(dsmpool_seg_pin(f), 0);
    cr_assert_eq(dsmpool_seg_detach(f), 0);
    int up[2], down[2];
    cr_assert_eq(pipe(up), 0);
    cr_assert_eq(pipe(down), 0);
    pid_t c = fork();
    if (c == 0) {
        close(up[0]);
        close(down[1]);
        if (own_dev_shm(false) != 0) _exit(77);
        dsmpool *q;
        if (dsmpool_attach(name, &q) != 0) _exit(3);
        if (!strstr(dsmpool_last_error(), "/dev/shm")) _exit(4); /* attach says what it lacks */
        if (shm_objects(0, NULL) != 0) _exit(5); /* an anchor of its own */
        dsmpool_seg *s, *o;
        if (dsmpool_seg_create(q, 1 * MIB, 0, &s) != 0 || dsmpool_seg_is_fallback(s)) _exit(6);
        memset(dsmpool_seg_address(s), 9, 1 * MIB);
        if (dsmpool_seg_create(q, BLOCK, 0, &o) != -ENOMEM || !strstr(dsmpool_last_error(), "/dev/shm")) _exit(7);
        if (dsmpool_seg_attach(q, h, &o) != -EXDEV) _exit(8);
        if (shm_objects(0, NULL) != 0) _exit(9);
        CHILD_SAY(up[1]);
        CHILD_HEAR(down[0]); /* the parent has left and come back */
        if (!all(dsmpool_seg_address(s), 9, 1 * MIB)) _exit(10);
        if (dsmpool_seg_detach(s) != 0 || dsmpool_check(q) != 0 || dsmpool_detach(q) != 0) _exit(11);
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    if (!hear(up[0])) {
        int st = test_wait(c);
        if (st == 77) cr_skip_test("the child cannot make a mount namespace");
        cr_assert(false, "child failed before the parent left: %d (3 attach, 4 no note, 5 an anchor of its "
                  "own, 7 an OS segment made, 8 the home's OS segment mapped)", st);
    }
    cr_assert_eq(dsmpool_detach(p), 0); /* the child is present: not the last process out */
    bool anchor;
    cr_expect_eq(shm_objects(id, &anchor), 1, "the pinned OS segment went with the parent");
    dsmpool *q;
    cr_assert_eq(dsmpool_attach(name, &q), 0, "%s", dsmpool_last_error());
    dsmpool_seg *g;
    cr_expect_eq(dsmpool_seg_attach(q, h, &g), 0, "the pinned OS segment: %s", dsmpool_last_error());
    if (g) cr_expect(all(dsmpool_seg_address(g), 7, BLOCK));
    if (g) dsmpool_seg_detach(g);
    say(down[1]);
    int st = test_wait(c);
    cr_expect_eq(st, 0, "child: %d (10 its segment changed, 11 check/detach)", st);
    cr_assert_eq(dsmpool_detach(q), 0); /* now the last process out */
    cr_expect_eq(shm_objects(id, &anchor), 0, "the last process out left the OS segment");
    cr_expect(anchor, "a named pool that persists keeps its anchor");
    cr_assert_eq(dsmpool_remove(name, false), 0, "%s", dsmpool_last_error());
    cr_expect_eq(shm_objects(0, NULL), 0);
}

/* The bound of life.c [last out]: the last process out does not see the home
 * /dev/shm, so it frees the OS segment's descriptor but cannot unlink its
 * object; a sweep there (nobody present) removes it, and keeps the closed
 * pool. */
Test(presence, a_last_process_outside_home_leaves_os_objects_to_a_sweep, .timeout = 60) {
    home();
    char name[64];
    snprintf(name, sizeof name, "dsmpool-test-presence-sweep-%llu", test_uid());
    dsmpool *p = mkpool(DSMPOOL_BACKING_SYSV, name);
    uint64_t id = p->geo.pool_id;
    dsmpool_seg *f;
    cr_assert_eq(dsmpool_seg_create(p, BLOCK, 0, &f), 0, "%s", dsmpool_last_error());
    cr_assert_eq(dsmpool_seg_pin(f), 0);
    cr_assert_eq(dsmpool_seg_detach(f), 0);
    int up[2], down[2];
    cr_assert_eq(pipe(up), 0);
    cr_assert_eq(pipe(down), 0);
    pid_t c = fork();
    if (c == 0) {
        close(up[0]);
        close(down[1]);
        if (own_dev_shm(false) != 0) _exit(77);
        dsmpool *q;
        if (dsmpool_attach(name, &q) != 0) _exit(3);
        CHILD_SAY(up[1]);
        CHILD_HEAR(down[0]);
        _exit(dsmpool_detach(q) == 0 ? 0 : 4); /* the last process out */
    }
    close(up[1]);
    close(down[0]);
    if (!hear(up[0])) {
        int st = test_wait(c);
        if (st == 77) cr_skip_test("the child cannot make a mount namespace");
        cr_assert(false, "child: %d", st);
    }
    cr_assert_eq(dsmpool_detach(p), 0);
    say(down[1]);
    cr_assert_eq(test_wait(c), 0);
    bool anchor;
    cr_expect_eq(shm_objects(id, &anchor), 1, "expected the OS segment's object left for a sweep");
    size_t removed = 0;
    cr_assert_eq(dsmpool_sweep(&removed), 0);
    cr_expect_eq(removed, 1);
    cr_expect_eq(shm_objects(id, &anchor), 0);
    cr_expect(anchor, "the sweep removed a closed pool's anchor");
    dsmpool *q;
    cr_assert_eq(dsmpool_attach(name, &q), 0, "the closed pool: %s", dsmpool_last_error());
    dsmpool_stats st;
    cr_assert_eq(dsmpool_get_stats(q, &st), 0);
    cr_expect_eq(st.segments_live, 0, "the freed descriptor came back");
    test_check_ok(q);
    cr_assert_eq(dsmpool_destroy(q), 0);
    cr_expect_eq(shm_objects(0, NULL), 0);
}

/* ---- a process that cannot take part ---------------------------------------------- */

/* /proc hidden: a memfd pool attached by its descriptor, and an anonymous
 * pool's fork()ed child, cannot open a description of the lock file of
 * their own. Before the fix they held their slots unguarded, never
 * counted present; now they are refused (-ENOLCK) and change nothing. */
static int hide_proc(void) {
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/proc", "tmpfs", 0, "size=1m") != 0)
        return -errno;
    return 0;
}

Test(presence, a_process_without_a_description_of_its_own_is_refused, .timeout = 60) {
    home();
    dsmpool *m = mkpool(DSMPOOL_BACKING_MEMFD, NULL);
    dsmpool *a = mkpool(DSMPOOL_BACKING_ANON, NULL);
    dsmpool_stats before;
    cr_assert_eq(dsmpool_get_stats(m, &before), 0);
    int fd = dsmpool_fd(m);
    cr_assert_geq(fd, 0);
    pid_t c = fork();
    if (c == 0) {
        if (hide_proc() != 0) _exit(77);
        dsmpool *q;
        int r = dsmpool_attach_fd(fd, &q);
        if (r != -ENOLCK || !strstr(dsmpool_last_error(), "/proc")) _exit(3);
        dsmpool_seg *s;
        if (dsmpool_seg_create(a, 64 * KIB, 0, &s) != -ENOLCK) _exit(4); /* the child's first call */
        if (dsmpool_seg_create(a, 64 * KIB, 0, &s) != -ENOLCK) _exit(5); /* and every next one */
        _exit(0);
    }
    int st = test_wait(c);
    if (st == 77) cr_skip_test("cannot hide /proc in a mount namespace");
    cr_expect_eq(st, 0, "child: %d (3 attach_fd was let in, 4/5 the anonymous pool's child was let in)", st);
    dsmpool_stats after;
    cr_assert_eq(dsmpool_get_stats(m, &after), 0);
    cr_expect_eq(after.procs_attached, before.procs_attached, "a refused process holds a slot");
    cr_expect_eq(after.procs_unguarded, 0);
    test_check_ok(m);
    test_check_ok(a);
    cr_assert_eq(dsmpool_detach(m), 0);
    cr_assert_eq(dsmpool_detach(a), 0);
    cr_expect_eq(shm_objects(0, NULL), 0);
}

/* ---- an attach racing dsmpool_remove() --------------------------------------------- */

static int locked_fd = -1, go_fd = -1;

static void pause_remover(const char *point) {
    if (strcmp(point, "life.remove.locked") != 0) return;
    dp_inject_fn = NULL;
    char c = 'x';
    if (write(locked_fd, &c, 1) != 1 || read(go_fd, &c, 1) != 1) _exit(92);
}

/* Does process pid map a file whose path ends in suffix? */
static bool maps_file(pid_t pid, const char *suffix) {
    char path[64], line[4600];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *fp = fopen(path, "r");
    if (!fp) return false;
    bool found = false;
    size_t sl = strlen(suffix);
    while (!found && fgets(line, sizeof line, fp)) {
        size_t l = strlen(line);
        while (l && (line[l - 1] == '\n' || line[l - 1] == ' ')) line[--l] = 0;
        found = l >= sl && !strcmp(line + l - sl, suffix);
    }
    fclose(fp);
    return found;
}

/* The remover holds the pool's LIFE (life.remove.locked) until the joiner
 * has mapped the region; then it unlinks region and anchor. Before the fix
 * the joiner, waiting for LIFE on the anchor, made the anchor again once
 * it was gone, failed (the region's name was gone too) and left it. */
Test(presence, attach_racing_remove_leaves_nothing, .timeout = 60) {
    home();
    char name[64];
    test_name(name, sizeof name, "presence-race");
    dsmpool *p = mkpool(DSMPOOL_BACKING_POSIX, name);
    uint64_t id = p->geo.pool_id;
    cr_assert_eq(dsmpool_detach(p), 0); /* closed: removable */
    int locked[2], go[2];
    cr_assert_eq(pipe(locked), 0);
    cr_assert_eq(pipe(go), 0);
    pid_t r = fork();
    if (r == 0) {
        locked_fd = locked[1];
        go_fd = go[0];
        dp_inject_fn = pause_remover;
        int rr = dsmpool_remove(name, false);
        _exit(rr == 0 ? 0 : 3);
    }
    cr_assert(hear(locked[0]), "the remover did not reach life.remove.locked");
    pid_t j = fork();
    if (j == 0) {
        dsmpool *q;
        int rr = dsmpool_attach(name, &q);
        _exit(rr == -ENOENT ? 0 : rr == 0 ? 4 : 5);
    }
    bool mapped = false;
    for (int i = 0; i < 10000 && !(mapped = maps_file(j, name)); i++) usleep(1000);
    cr_assert(mapped, "the joiner never mapped the region");
    say(go[1]); /* the joiner waits for LIFE now, or will */
    cr_expect_eq(test_wait(r), 0, "remove failed");
    int st = test_wait(j);
    cr_expect_eq(st, 0, "the joiner: %d (4 attach succeeded on a removed pool, 5 another error)", st);
    bool anchor;
    cr_expect_eq(shm_objects(id, &anchor), 0);
    cr_expect_not(anchor, "a failed attach left the anchor of a removed pool");
    cr_expect_eq(shm_objects(0, NULL), 0, "objects left in /dev/shm");
}
