/*
 * hashjoin.c -- a parallel hash join on dsmpool, the way an executor would
 * write one: the program to copy.
 *
 *   hashjoin [ROWS [WORKERS]]        (defaults: 1000000 rows, 4 workers)
 *
 * The leader creates a named pool and starts WORKERS processes (fork + exec
 * of this program: unrelated processes, as a server's would be). Each one
 * attaches to the pool by its name and finds the join's shared state
 * through named objects -- nothing is passed to it but the pool's name:
 *
 *   "join.control"  a segment: the barrier and the match count
 *   "join.buckets"  a segment: the bucket array, heads of tuple chains
 *   "join.tuples"   an area: the tuples, carved from 32 KiB chunks
 *
 * Build: every worker inserts its share of the rows t(i) = 1..ROWS into the
 * buckets (a lock-free push per tuple; chunks come from the area without a
 * lock). Probe, after a barrier: every worker looks its share of the keys
 * up and counts matches. select count(*) from t t1 join t t2 using (i) is
 * ROWS; the leader checks that and prints it.
 *
 * Whoever opens a named object first creates it (and runs its init); the
 * others attach. Errors are values: every call's failure is reported with
 * dsmpool_last_error(), which says what to do.
 */
#include <dsmpool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHUNK (32 * 1024)

typedef struct control {
    _Atomic unsigned built;    /* workers done with the build */
    _Atomic unsigned long matches;
} control;

typedef struct tuple {
    dsmpool_ptr next; /* the bucket chain, relocatable */
    long key;
} tuple;

static int fail(const char *what, int r) {
    fprintf(stderr, "hashjoin: %s: %s (%s)\n", what, dsmpool_strerror(r), dsmpool_last_error());
    return 1;
}

static int zero_init(void *addr, size_t size, void *arg) {
    (void)arg;
    memset(addr, 0, size); /* runs once, in whichever process creates the object */
    return 0;
}

static unsigned long nbuckets_for(long rows) {
    unsigned long n = 1024;
    while (n < (unsigned long)rows) n *= 2;
    return n;
}

static unsigned long hash(long key, unsigned long n) { return ((unsigned long)key * 0x9e3779b97f4a7c15ul) >> 7 & (n - 1); }

static int worker(const char *pool_name, long rows, int nworkers, int me) {
    dsmpool *pool;
    dsmpool_seg *ctl_seg, *bkt_seg;
    dsmpool_area *tuples;
    int r;
    unsigned long nb = nbuckets_for(rows);
    if ((r = dsmpool_attach(pool_name, &pool)) != 0) return fail("attach", r);
    if ((r = dsmpool_seg_open_named(pool, "join.control", sizeof(control), 0, zero_init, NULL, &ctl_seg,
                                    NULL)) != 0 ||
        (r = dsmpool_seg_open_named(pool, "join.buckets", nb * sizeof(dsmpool_ptr), 0, zero_init, NULL,
                                    &bkt_seg, NULL)) != 0)
        return fail("open the join's segments", r);
    if ((r = dsmpool_area_open_named(pool, "join.tuples", 0, &tuples, NULL)) != 0)
        return fail("open the tuple area", r);
    control *ctl = dsmpool_seg_address(ctl_seg);
    _Atomic dsmpool_ptr *bucket = dsmpool_seg_address(bkt_seg);
    char *base = dsmpool_area_base(tuples);

    /* build: tuples packed into 32 KiB chunks, as a parallel hash build does */
    dsmpool_ptr chunk = 0;
    size_t used = CHUNK;
    for (long key = 1 + me; key <= rows; key += nworkers) {
        if (used + sizeof(tuple) > CHUNK) {
            if ((r = dsmpool_area_alloc(tuples, CHUNK, 0, &chunk)) != 0) return fail("allocate a chunk", r);
            used = 0;
        }
        dsmpool_ptr tp = chunk + used;
        used += sizeof(tuple);
        tuple *t = dsmpool_area_addr_inline(tuples, base, tp);
        t->key = key;
        _Atomic dsmpool_ptr *head = &bucket[hash(key, nb)];
        t->next = atomic_load_explicit(head, memory_order_relaxed);
        /* release: the tuple's fields before it is reachable */
        while (!atomic_compare_exchange_weak_explicit(head, &t->next, tp, memory_order_release,
                                                      memory_order_relaxed)) {
        }
    }
    atomic_fetch_add(&ctl->built, 1);
    while (atomic_load(&ctl->built) < (unsigned)nworkers) usleep(100); /* the barrier */

    /* probe: each worker its share of the outer side */
    unsigned long matches = 0;
    for (long key = 1 + me; key <= rows; key += nworkers)
        for (dsmpool_ptr tp = atomic_load_explicit(&bucket[hash(key, nb)], memory_order_acquire); tp;) {
            tuple *t = dsmpool_area_addr_inline(tuples, base, tp);
            matches += t->key == key;
            tp = t->next;
        }
    atomic_fetch_add(&ctl->matches, matches);
    /* leave: the objects stay while the leader holds them */
    dsmpool_area_detach(tuples);
    dsmpool_seg_detach(bkt_seg);
    dsmpool_seg_detach(ctl_seg);
    dsmpool_detach(pool);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "worker") == 0)
        return worker(argv[2], atol(argv[3]), atoi(argv[4]) >> 8, atoi(argv[4]) & 255);
    long rows = argc > 1 ? atol(argv[1]) : 1000000;
    int nworkers = argc > 2 ? atoi(argv[2]) : 4;
    if (rows < 1 || nworkers < 1 || nworkers > 255) {
        fprintf(stderr, "usage: %s [ROWS [WORKERS (1..255)]]\n", argv[0]);
        return 2;
    }
    char name[64];
    snprintf(name, sizeof name, "/dsmpool-example-%d", (int)getpid());
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.backing = DSMPOOL_BACKING_POSIX; /* attachable by name */
    cfg.name = name;
    cfg.size = 64ull << 20;
    while (cfg.size < (size_t)rows * 48) cfg.size *= 2;
    cfg.huge_pages = DSMPOOL_HUGE_TRY;
    dsmpool *pool;
    int r = dsmpool_create(&cfg, &pool);
    if (r) return fail("create the pool", r);
    /* the leader holds the join's objects for the whole query */
    dsmpool_seg *ctl_seg;
    dsmpool_area *tuples;
    if ((r = dsmpool_seg_open_named(pool, "join.control", sizeof(control), 0, zero_init, NULL, &ctl_seg,
                                    NULL)) != 0 ||
        (r = dsmpool_area_open_named(pool, "join.tuples", 0, &tuples, NULL)) != 0) {
        dsmpool_destroy(pool);
        return fail("create the join's objects", r);
    }
    pid_t *kids = calloc((size_t)nworkers, sizeof *kids);
    for (int i = 0; kids && i < nworkers; i++) {
        char rs[32], who[32];
        snprintf(rs, sizeof rs, "%ld", rows);
        snprintf(who, sizeof who, "%d", nworkers << 8 | i);
        if ((kids[i] = fork()) == 0) {
            execl("/proc/self/exe", argv[0], "worker", name, rs, who, (char *)NULL);
            _exit(127);
        }
    }
    int bad = !kids;
    for (int i = 0; kids && i < nworkers; i++) {
        int st;
        bad |= waitpid(kids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    control *ctl = dsmpool_seg_address(ctl_seg);
    unsigned long matches = atomic_load(&ctl->matches);
    printf("select count(*) from t t1 join t t2 using (i): %lu (%ld rows, %d workers)%s\n", matches, rows,
           nworkers, bad || matches != (unsigned long)rows ? ": WRONG" : "");
    dsmpool_area_destroy(tuples);
    dsmpool_seg_detach(ctl_seg);
    dsmpool_destroy(pool); /* the name goes; nothing is left in /dev/shm */
    free(kids);
    return bad || matches != (unsigned long)rows;
}
