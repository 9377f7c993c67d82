/*
 * test_inspect.c -- dsmpool-inspect against live pools (issue 13, item 4).
 *
 *   views      a POSIX pool with the creator and two fork()ed children
 *              attached, segments pinned, unpinned and from the OS, an area
 *              with allocations: every view in JSON (python3 -m json.tool,
 *              then fields checked with json.load) and in text; looking
 *              takes no slot (the pool's process count before, during and
 *              after; no slot with a pid but ours and the children's)
 *   pid        --pid reaches the ANON and MEMFD pools a process maps (ANON
 *              only as root: /proc/PID/map_files), and the named one
 *   list       --list says live for a live pool, dead for one whose
 *              processes were all killed; then the sweep removes it
 *   usage      --help, bad arguments
 *
 * Runs alone (meson: is_parallel false): --list and --sweep look at every
 * pool on the machine. Names are unique per pid; everything made is removed.
 */
#include <criterion/criterion.h>
#include <dsmpool.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dp_internal.h"
#include "testutil.h"

/* ---- running the tool, reading its JSON --------------------------------------- */

static char json_file[128];

/* Run the inspector; stdout into json_file (and out), stderr into out too when
 * both is set. Returns its exit status. */
static int inspect(const char *args, char *out, size_t n) {
    const char *tool = getenv("DSMPOOL_INSPECT");
    if (!tool) cr_skip_test("DSMPOOL_INSPECT not set (built with -Dtools=false?)");
    snprintf(json_file, sizeof json_file, "/tmp/dsmpool-test-inspect-%llu.out", test_uid());
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "%s %s >%s 2>%s.err", tool, args, json_file, json_file);
    int st = system(cmd);
    FILE *f = fopen(json_file, "r");
    size_t got = f ? fread(out, 1, n - 1, f) : 0;
    if (f) fclose(f);
    char err[160];
    snprintf(err, sizeof err, "%s.err", json_file);
    f = fopen(err, "r");
    if (f) {
        got += fread(out + got, 1, n - 1 - got, f);
        fclose(f);
    }
    out[got] = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void cleanup_files(void) {
    char err[160];
    snprintf(err, sizeof err, "%s.err", json_file);
    unlink(json_file);
    unlink(err);
}

/* python3 -m json.tool accepts what the tool wrote. */
static void expect_json(const char *what) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "python3 -m json.tool %s >/dev/null 2>&1", json_file);
    cr_expect_eq(system(cmd), 0, "%s: not valid JSON (see %s)", what, json_file);
}

/* The value of a python expression over the document d (json.load), as text. */
static void jq(const char *expr, char *out, size_t n) {
    char cmd[400];
    setenv("DSMPOOL_TEST_JQ", expr, 1); /* through the environment: no shell quoting */
    snprintf(cmd, sizeof cmd, "python3 -c 'import json,os,sys; d=json.load(open(sys.argv[1])); "
             "print(eval(os.environ[\"DSMPOOL_TEST_JQ\"]))' %s 2>&1", json_file);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t got = fread(out, 1, n - 1, f);
    out[got] = 0;
    pclose(f);
    while (got && (out[got - 1] == '\n')) out[--got] = 0;
}

#define EXPECT_JQ(expr, want)                                                              \
    do {                                                                                   \
        char got_[4096];                                                                   \
        jq(expr, got_, sizeof got_);                                                       \
        cr_expect_str_eq(got_, want, "%s: got \"%s\", want \"%s\"", expr, got_, want);     \
    } while (0)

/* ---- a page shared with the children ----------------------------------------------- */

typedef struct shared {
    _Atomic int ready;
    _Atomic int go;
} shared;


/* Wait until *v reaches want, for at most seconds (bounded: a test never
 * hangs); whether it did. A waiter that gives up must say so, not act as if
 * told: the children of the test below once left on their own when a loaded
 * machine took longer than their 20 s to run the inspector calls, and the
 * attached count moved under the test's feet. */
static bool wait_for(_Atomic int *v, int want, int seconds) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(v) < want) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec >= seconds) return false;
        usleep(1000);
    }
    return true;
}

static unsigned procs_attached(dsmpool *p) {
    dsmpool_stats st;
    cr_assert_eq(dsmpool_get_stats(p, &st), 0);
    return st.procs_attached;
}

/* ---- views of a live, multi-process pool ---------------------------------------------- */

Test(inspect, every_view_of_a_live_multiprocess_pool_without_taking_a_slot, .timeout = 120) {
    char name[64], args[400], out[65536], expr[600], want[256];
    test_name(name, sizeof name, "insp");
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = 32 * MIB;
    cfg.backing = DSMPOOL_BACKING_POSIX;
    cfg.name = name;
    cfg.prefault = false;
    dsmpool *p;
    cr_assert_eq(dsmpool_create(&cfg, &p), 0, "%s", dsmpool_last_error());

    /* segments: one kept attached, one pinned and detached, one pinned then
     * unpinned (still attached), one from the OS (bigger than the pool) */
    dsmpool_seg *kept, *pinned, *unpinned, *fb;
    cr_assert_eq(dsmpool_seg_create(p, 64 * KIB, 0, &kept), 0);
    cr_assert_eq(dsmpool_seg_create(p, 128 * KIB, 0, &pinned), 0);
    cr_assert_eq(dsmpool_seg_pin(pinned), 0);
    dsmpool_handle hpinned = dsmpool_seg_handle(pinned);
    cr_assert_eq(dsmpool_seg_detach(pinned), 0);
    cr_assert_eq(dsmpool_seg_create(p, 256 * KIB, 0, &unpinned), 0);
    cr_assert_eq(dsmpool_seg_pin(unpinned), 0);
    cr_assert_eq(dsmpool_seg_unpin(p, dsmpool_seg_handle(unpinned)), 0);
    cr_assert_eq(dsmpool_seg_create(p, 64 * MIB, 0, &fb), 0, "%s", dsmpool_last_error());
    cr_assert(dsmpool_seg_is_fallback(fb));
    dsmpool_handle hkept = dsmpool_seg_handle(kept), hfb = dsmpool_seg_handle(fb);

    /* an area: 100 chunks of 32 KiB (10 freed again: cached), one large block */
    dsmpool_area *a;
    cr_assert_eq(dsmpool_area_create(p, 0, &a), 0, "%s", dsmpool_last_error());
    dsmpool_ptr ptrs[100], big;
    for (int i = 0; i < 100; i++) cr_assert_eq(dsmpool_area_alloc(a, 32 * KIB, 0, &ptrs[i]), 0);
    for (int i = 0; i < 10; i++) cr_assert_eq(dsmpool_area_free(a, ptrs[i]), 0);
    cr_assert_eq(dsmpool_area_alloc(a, 3 * MIB, 0, &big), 0, "%s", dsmpool_last_error());

    /* named objects: a segment (its name with a quote and a backslash, for
     * the JSON escaping) and an area */
    dsmpool_seg *named;
    dsmpool_area *named_area;
    bool created;
    cr_assert_eq(dsmpool_seg_open_named(p, "join \"buckets\" \\1", 4096, 0, NULL, NULL, &named, &created), 0,
                 "%s", dsmpool_last_error());
    cr_assert_eq(dsmpool_area_open_named(p, "join.tuples", 0, &named_area, &created), 0, "%s",
                 dsmpool_last_error());

    /* two fork()ed children attach the kept segment (each takes a slot) */
    shared *sh = test_shared(sizeof(shared));
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
            dsmpool_seg *s;
            if (dsmpool_seg_attach(p, hkept, &s) != 0) _exit(3);
            atomic_fetch_add(&sh->ready, 1);
            /* stay attached until told, however long the inspector calls
             * take (the test's own timeout bounds it) */
            if (!wait_for(&sh->go, 1, 600)) _exit(5);
            _exit(dsmpool_seg_detach(s) == 0 && dsmpool_detach(p) == 0 ? 0 : 4);
        }
    }
    cr_assert(wait_for(&sh->ready, 2, 60), "the children did not attach in 60 s");
    unsigned before = procs_attached(p);
    cr_assert_eq(before, 3);

    /* every view, JSON */
    snprintf(args, sizeof args, "--json %s", name);
    cr_assert_eq(inspect(args, out, sizeof out), 0, "%s", out);
    expect_json("--json NAME");
    cr_expect_eq(procs_attached(p), before, "looking took a slot");
    EXPECT_JQ("sorted(d.keys())", "['areas', 'names', 'pool', 'processes', 'segments', 'subpools']");
    snprintf(expr, sizeof expr, "sorted((n['name'], n['kind'], n['state'], n['object_live'], n['handle']) for n in "
             "d['names']) == sorted([('join \"buckets\" \\\\1', 'segment', 'ready', True, '0x%016llx'), "
             "('join.tuples', 'area', 'ready', True, '0x%016llx')])",
             (unsigned long long)dsmpool_seg_handle(named), (unsigned long long)dsmpool_area_handle(named_area));
    EXPECT_JQ(expr, "True");
    snprintf(want, sizeof want, "%s", name);
    EXPECT_JQ("d['pool']['name']", want);
    EXPECT_JQ("d['pool']['backing']", "posix");
    EXPECT_JQ("d['processes']['attached']", "3");
    EXPECT_JQ("len(d['processes']['slots'])", "3");
    EXPECT_JQ("all(s['alive'] is True and s['state'] == 'live' for s in d['processes']['slots'])", "True");
    snprintf(expr, sizeof expr, "sorted(s['pid'] for s in d['processes']['slots']) == sorted([%d, %d, %d])",
             (int)getpid(), (int)kids[0], (int)kids[1]);
    EXPECT_JQ(expr, "True"); /* the inspector's own pid is in no slot */
    snprintf(expr, sizeof expr, "[(s['refs'], s['pinned'], s['fallback']) for s in d['segments']['list'] if "
             "s['handle'] == '0x%016llx']", (unsigned long long)hkept);
    EXPECT_JQ(expr, "[(5, False, False)]"); /* ours; each child's inherited one (adopted) and its own */
    snprintf(expr, sizeof expr, "[(s['refs'], s['pinned'], s['size']) for s in d['segments']['list'] if "
             "s['handle'] == '0x%016llx']", (unsigned long long)hpinned);
    EXPECT_JQ(expr, "[(0, True, 131072)]");
    snprintf(expr, sizeof expr, "[(s['refs'], s['pinned']) for s in d['segments']['list'] if s['handle'] == "
             "'0x%016llx']", (unsigned long long)dsmpool_seg_handle(unpinned));
    EXPECT_JQ(expr, "[(3, False)]"); /* ours and the children's inherited ones */
    snprintf(expr, sizeof expr, "[(s['fallback'], s['subpool'], s['size'] >= %llu) for s in "
             "d['segments']['list'] if s['handle'] == '0x%016llx']", 64 * MIB, (unsigned long long)hfb);
    EXPECT_JQ(expr, "[(True, -1, True)]");
    EXPECT_JQ("d['segments']['fallback_live']", "1");
    EXPECT_JQ("not any(s['damaged'] for s in d['segments']['list'])", "True");
    snprintf(expr, sizeof expr, "sorted(x['handle'] for x in d['areas']) == sorted(['0x%016llx', '0x%016llx'])",
             (unsigned long long)dsmpool_area_handle(a), (unsigned long long)dsmpool_area_handle(named_area));
    EXPECT_JQ(expr, "True");
    EXPECT_JQ("[(c['spans'] >= 1, c['cached_chunks'] >= 10) for c in [x for x in d['areas'] if x['large']['blocks']][0]['classes'] "
              "if c['chunk_size'] == 32768]", "[(True, True)]");
    EXPECT_JQ("[x for x in d['areas'] if x['large']['blocks']][0]['held'] >= 2 * 1024 * 1024 + 4 * 1024 * 1024", "True");
    EXPECT_JQ("([x for x in d['areas'] if x['large']['blocks']][0]['large']['blocks'], [x for x in d['areas'] if x['large']['blocks']][0]['large']['bytes'])", "(1, 3145728)");
    EXPECT_JQ("([x for x in d['areas'] if x['large']['blocks']][0]['state'], [x for x in d['areas'] if x['large']['blocks']][0]['damaged'], [x for x in d['areas'] if x['large']['blocks']][0]['caches'] >= 1)",
              "('live', False, True)");
    EXPECT_JQ("len(d['subpools']) >= 1 and all(s['free'] <= s['size'] for s in d['subpools'])", "True");

    /* one view */
    snprintf(args, sizeof args, "--json --view segments,processes %s", name);
    cr_assert_eq(inspect(args, out, sizeof out), 0, "%s", out);
    expect_json("--view");
    EXPECT_JQ("sorted(d.keys())", "['processes', 'segments']");

    /* text */
    snprintf(args, sizeof args, "%s", name);
    cr_assert_eq(inspect(args, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "processes   3 attached of"), "%s", out);
    cr_expect(strstr(out, "fallback(OS)") && strstr(out, "pinned") && strstr(out, "class 66") /* 32 KiB */, "%s", out);
    cr_expect_eq(procs_attached(p), before);

    /* through a child (--pid), JSON */
    snprintf(args, sizeof args, "--json --pid %d", (int)kids[0]);
    cr_assert_eq(inspect(args, out, sizeof out), 0, "%s", out);
    expect_json("--pid");
    snprintf(expr, sizeof expr, "[x['pool']['name'] for x in d['pools']] == ['%s']", name);
    EXPECT_JQ(expr, "True");
    EXPECT_JQ("d['pools'][0]['processes']['attached']", "3");

    /* --list: live */
    cr_assert_eq(inspect("--json --list", out, sizeof out), 0, "%s", out);
    expect_json("--list");
    snprintf(expr, sizeof expr, "[(x['state'], x['kind']) for x in d['pools'] if x['name'] == '%s']", name);
    EXPECT_JQ(expr, "[('live', 'posix')]");

    /* --check and --recover attach (a slot while they run), then give it back */
    snprintf(args, sizeof args, "--json --check --view pool %s", name);
    cr_assert_eq(inspect(args, out, sizeof out), 0, "%s", out);
    expect_json("--check");
    EXPECT_JQ("d['check']['result']", "ok");
    snprintf(args, sizeof args, "--json --recover --view processes %s", name);
    cr_assert_eq(inspect(args, out, sizeof out), 0, "%s", out);
    expect_json("--recover");
    EXPECT_JQ("(d['recover']['result'], d['processes']['attached'])", "('ok', 3)");
    cr_expect_eq(procs_attached(p), before);

    atomic_store(&sh->go, 1);
    for (int k = 0; k < 2; k++) cr_expect_eq(test_wait(kids[k]), 0, "child %d", k);
    cr_expect_eq(procs_attached(p), 1);
    cr_expect_eq(dsmpool_area_destroy(a), 0);
    cr_expect_eq(dsmpool_area_destroy(named_area), 0);
    cr_expect_eq(dsmpool_seg_detach(named), 0);
    cr_expect_eq(dsmpool_seg_unpin(p, hpinned), 0);
    test_check_ok(p);
    cr_expect_eq(dsmpool_destroy(p), 0, "%s", dsmpool_last_error());
    munmap(sh, sizeof *sh);
    cleanup_files();
}

/* ---- --pid: ANON and MEMFD pools ------------------------------------------------------ */

Test(inspect, pid_reaches_anon_and_memfd_pools, .timeout = 60) {
    char args[200], out[65536], expr[400];
    dsmpool *an = test_pool(DSMPOOL_BACKING_ANON, NULL, 16 * MIB);
    dsmpool *mf = test_pool(DSMPOOL_BACKING_MEMFD, NULL, 16 * MIB);
    dsmpool_seg *s1, *s2;
    cr_assert_eq(dsmpool_seg_create(an, 64 * KIB, 0, &s1), 0);
    cr_assert_eq(dsmpool_seg_create(mf, 64 * KIB, 0, &s2), 0);
    unsigned before = procs_attached(mf);
    snprintf(args, sizeof args, "--json --pid %d", (int)getpid());
    int rc = inspect(args, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    expect_json("--pid self");
    snprintf(expr, sizeof expr, "[x['pool']['pool_id'] for x in d['pools'] if x['pool']['backing'] == 'memfd'] "
             "== ['0x%016llx']", (unsigned long long)mf->geo.pool_id);
    EXPECT_JQ(expr, "True");
    EXPECT_JQ("[x['processes']['liveness_known'] for x in d['pools'] if x['pool']['backing'] == 'memfd']",
              "[True]");
    EXPECT_JQ("[s['alive'] for x in d['pools'] if x['pool']['backing'] == 'memfd' for s in "
              "x['processes']['slots']]", "[True]");
    if (geteuid() == 0) { /* map_files opens only for CAP_SYS_ADMIN */
        snprintf(expr, sizeof expr, "[(x['segments']['live'], x['processes']['attached']) for x in d['pools'] if "
                 "x['pool']['pool_id'] == '0x%016llx']", (unsigned long long)an->geo.pool_id);
        EXPECT_JQ(expr, "[(1, 1)]");
        EXPECT_JQ("[x['processes']['liveness_known'] for x in d['pools'] if x['pool']['backing'] == 'anon']",
                  "[False]");
    } else {
        EXPECT_JQ("d['denied'] >= 1 and 'CAP_SYS_ADMIN' in d['note']", "True");
    }
    cr_expect_eq(procs_attached(mf), before);
    /* a process that is not there */
    cr_expect_eq(inspect("--pid 2147483647", out, sizeof out), 1, "%s", out);
    cr_expect(strstr(out, "no process"), "%s", out);
    cr_expect_eq(dsmpool_seg_detach(s1), 0);
    cr_expect_eq(dsmpool_seg_detach(s2), 0);
    cr_expect_eq(dsmpool_detach(an), 0);
    cr_expect_eq(dsmpool_detach(mf), 0);
    cleanup_files();
}

/* ---- --list: a pool whose processes were all killed is dead ---------------------------- */

static bool shm_exists(const char *name) {
    char path[300];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    return access(path, F_OK) == 0;
}

Test(inspect, list_says_dead_for_a_pool_whose_processes_were_killed, .timeout = 60) {
    char name[64], args[200], out[65536], expr[400];
    test_name(name, sizeof name, "insp-dead");
    shared *sh = test_shared(sizeof(shared));
    prctl(PR_SET_CHILD_SUBREAPER, 1); /* the grandchild is ours to reap */
    pid_t c = fork();
    if (c == 0) { /* creates, and forks a grandchild that attaches; both wait to be killed */
        /* or die with their parent: a failed assertion ends the test
         * before its kill, and they would pause for ever, holding the pool */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dsmpool_config cfg;
        dsmpool_config_init(&cfg);
        cfg.size = 8 * MIB;
        cfg.backing = DSMPOOL_BACKING_POSIX;
        cfg.name = name;
        cfg.prefault = false;
        dsmpool *p;
        dsmpool_seg *s;
        if (dsmpool_create(&cfg, &p) != 0 || dsmpool_seg_create(p, 64 * KIB, 0, &s) != 0) _exit(3);
        pid_t g = fork();
        if (g == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            dsmpool_seg *t;
            if (dsmpool_seg_attach(p, dsmpool_seg_handle(s), &t) != 0) _exit(3);
            atomic_fetch_add(&sh->ready, 1);
            for (;;) pause();
        }
        atomic_store(&sh->go, g);
        atomic_fetch_add(&sh->ready, 1);
        for (;;) pause();
    }
    cr_assert(wait_for(&sh->ready, 2, 60), "the pool's creator and its child did not start in 60 s");
    pid_t g = atomic_load(&sh->go);
    cr_assert_eq(inspect("--json --list", out, sizeof out), 0, "%s", out);
    snprintf(expr, sizeof expr, "[x['state'] for x in d['pools'] if x['name'] == '%s']", name);
    EXPECT_JQ(expr, "['live']");

    kill(g, SIGKILL);
    kill(c, SIGKILL);
    cr_expect_eq(test_wait(c), 128 + SIGKILL);
    cr_expect_eq(test_wait(g), 128 + SIGKILL);

    cr_assert_eq(inspect("--json --list", out, sizeof out), 0, "%s", out);
    expect_json("--list (dead)");
    EXPECT_JQ(expr, "['dead']");
    cr_assert_eq(inspect("--list", out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "dead") && strstr(out, name), "%s", out);
    /* the views of a dead pool: its slots are still there, their processes dead */
    snprintf(args, sizeof args, "--json --view processes %s", name);
    cr_assert_eq(inspect(args, out, sizeof out), 0, "%s", out);
    EXPECT_JQ("(d['processes']['attached'], [s['alive'] for s in d['processes']['slots']])", "(2, [False, False])");
    /* the sweep removes it */
    cr_assert_eq(inspect("--json --sweep", out, sizeof out), 0, "%s", out);
    expect_json("--sweep");
    EXPECT_JQ("d['removed'] >= 2", "True");
    cr_expect_not(shm_exists(name), "the sweep left the dead pool");
    if (shm_exists(name)) dsmpool_remove(name, true);
    munmap(sh, sizeof *sh);
    cleanup_files();
}

/* ---- usage ------------------------------------------------------------------------------ */

Test(inspect, help_and_usage, .timeout = 30) {
    char out[8192];
    cr_expect_eq(inspect("--help", out, sizeof out), 0);
    cr_expect(strstr(out, "--json") && strstr(out, "--pid") && strstr(out, "--list"), "%s", out);
    cr_expect_eq(inspect("--bogus", out, sizeof out), 2);
    cr_expect_eq(inspect("--list --sweep", out, sizeof out), 2);
    cr_expect_eq(inspect("--view nosuch /x", out, sizeof out), 2);
    cr_expect_eq(inspect("--force /x", out, sizeof out), 2);
    cr_expect_eq(inspect("/dsmpool-test-no-such-pool", out, sizeof out), 1);
    cr_expect(strstr(out, "no pool named"), "%s", out);
    cleanup_files();
}
