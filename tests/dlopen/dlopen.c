/*
 * dlopen -- libdsmpool.so loaded with dlopen(), as a database extension
 * (a PostgreSQL module, a plugin) would load it: the load succeeds, and
 * two threads use a pool and an area through it, each with its own cache
 * and its own error message (both fail at once, then each reads its
 * own). Then the area and pool go, dlclose() is called while the threads
 * still live, and they exit afterwards (their cache destructors run): the
 * library stays mapped (-z nodelete). Before the library's thread-local
 * variables left the initial-exec model, its whole TLS block went in
 * glibc's static TLS surplus, which it did not fit: dlopen() failed with
 * "cannot allocate memory in static TLS block".
 *
 * Usage: dlopen PATH-TO-libdsmpool.so; exit 0 on success. Prints its result
 * as a Criterion suite does (tools/testcount.py counts the Synthesis line).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <dsmpool.h>

static struct {
    void (*config_init_sized)(dsmpool_config *, size_t);
    int (*create)(const dsmpool_config *, dsmpool **);
    void (*detach)(dsmpool *);
    int (*area_create)(dsmpool *, unsigned, dsmpool_area **);
    int (*area_destroy)(dsmpool_area *);
    int (*area_alloc)(dsmpool_area *, size_t, unsigned, dsmpool_ptr *);
    int (*area_free)(dsmpool_area *, dsmpool_ptr);
    void *(*area_addr)(dsmpool_area *, dsmpool_ptr);
    const char *(*last_error)(void);
} F;

static dsmpool_area *area;
static pthread_barrier_t failed, checked, gone;

/* Allocate, write, verify and free 600 chunks and blocks; true if all held. */
static bool use_area(long id) {
    static const size_t sizes[] = {24, 100, 700, 5000, 32768, 300000};
    dsmpool_ptr v[600];
    for (int i = 0; i < 600; i++) {
        size_t n = sizes[i % 6];
        if (F.area_alloc(area, n, 0, &v[i]) != 0) {
            fprintf(stderr, "thread %ld: alloc %zu: %s\n", id, n, F.last_error());
            return false;
        }
        memset(F.area_addr(area, v[i]), (int)(id + i), n);
    }
    for (int i = 0; i < 600; i++) {
        unsigned char *m = F.area_addr(area, v[i]);
        if (m[0] != (unsigned char)(id + i) || m[sizes[i % 6] - 1] != (unsigned char)(id + i)) {
            fprintf(stderr, "thread %ld: allocation %d overwritten\n", id, i);
            return false;
        }
        if (F.area_free(area, v[i]) != 0) return false;
    }
    return true;
}

static void *worker(void *arg) {
    long id = (long)arg;
    bool ok = use_area(id);
    /* this thread's own message: both fail, differently, before either reads */
    dsmpool_ptr x;
    int r = id ? F.area_alloc(area, 0, 0, &x) : F.area_alloc(area, 64, 1u << 30, &x);
    pthread_barrier_wait(&failed);
    const char *want = id ? "size 0" : "unknown flags";
    if (r != -EINVAL || !strstr(F.last_error(), want)) {
        fprintf(stderr, "thread %ld: %d, message %s (want %s)\n", id, r, F.last_error(), want);
        ok = false;
    }
    pthread_barrier_wait(&checked);
    pthread_barrier_wait(&gone); /* the library was closed: exit now, its destructors run */
    return ok ? NULL : (void *)1;
}

static int run(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
#define SYM(field, name)                                                                           \
    if (!(*(void **)&F.field = dlsym(h, name))) {                                                  \
        fprintf(stderr, "dlsym %s: %s\n", name, dlerror());                                         \
        return 1;                                                                                  \
    }
    SYM(config_init_sized, "dsmpool_config_init_sized") /* what dsmpool_config_init() calls */
    SYM(create, "dsmpool_create")
    SYM(detach, "dsmpool_detach")
    SYM(area_create, "dsmpool_area_create")
    SYM(area_destroy, "dsmpool_area_destroy")
    SYM(area_alloc, "dsmpool_area_alloc")
    SYM(area_free, "dsmpool_area_free")
    SYM(area_addr, "dsmpool_area_addr")
    SYM(last_error, "dsmpool_last_error")
    dsmpool_config cfg;
    F.config_init_sized(&cfg, sizeof cfg);
    cfg.size = 64u << 20;
    cfg.backing = DSMPOOL_BACKING_ANON;
    dsmpool *p;
    if (F.create(&cfg, &p) != 0 || F.area_create(p, 0, &area) != 0) {
        fprintf(stderr, "create: %s\n", F.last_error());
        return 1;
    }
    pthread_t t[2];
    void *r[2];
    pthread_barrier_init(&failed, NULL, 2);
    pthread_barrier_init(&checked, NULL, 3);
    pthread_barrier_init(&gone, NULL, 3);
    for (long i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i) != 0) return 1;
    pthread_barrier_wait(&checked); /* both threads hold caches of the area */
    if (F.area_destroy(area) != 0) {
        fprintf(stderr, "destroy: %s\n", F.last_error());
        return 1;
    }
    F.detach(p);
    if (dlclose(h) != 0) {
        fprintf(stderr, "dlclose: %s\n", dlerror());
        return 1;
    }
    if (!dlopen(path, RTLD_NOW | RTLD_NOLOAD)) {
        fprintf(stderr, "dlclose unmapped the library (no -z nodelete)\n");
        return 1;
    }
    pthread_barrier_wait(&gone);
    for (int i = 0; i < 2; i++) pthread_join(t[i], &r[i]);
    if (r[0] || r[1]) return 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: dlopen PATH-TO-libdsmpool.so\n");
        return 2;
    }
    int rc = run(argv[1]);
    printf("[%s] dlopen::loaded_and_used_by_two_threads_then_closed\n", rc ? "FAIL" : "PASS");
    printf("[====] Synthesis: Tested: 1 | Passing: %d | Failing: %d | Crashing: 0\n", !rc, !!rc);
    return rc;
}
