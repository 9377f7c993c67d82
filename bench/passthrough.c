/*
 * passthrough -- what the PostgreSQL preload library (libdsmpool-preload.so)
 * costs a call it does not serve: every process of a stock server, and every
 * program that inherits LD_PRELOAD, goes through it for shm_open,
 * shm_unlink, posix_fallocate (16+ extends relations with it), mmap, munmap
 * and close. Goal (issue 33): 15 ns or less per call.
 *
 * Run with LD_PRELOAD=libdsmpool-preload.so. Each call is timed two ways in
 * the same process, interleaved round by round (the order alternating):
 * through its name (the preload library's definition) and through libc's own
 * (dlsym on libc.so.6's handle). The cost is the median over rounds of the
 * paired difference; without LD_PRELOAD both ways are libc's, and the
 * difference is this machine's noise floor (the program says which it ran).
 *
 * Usage: passthrough [--rounds R] [--calls N]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int (*close)(int);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    int (*munmap)(void *, size_t);
    int (*posix_fallocate)(int, off_t, off_t);
    int (*shm_open)(const char *, int, mode_t);
} calls;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int tmpfd;

/* ns per call of kind k, through c */
static double run(const calls *c, int k, long n) {
    double t0 = now();
    for (long i = 0; i < n; i++) {
        switch (k) {
        case 0:
            (void)c->close(-1);
            break;
        case 1: {
            void *p = c->mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p != MAP_FAILED) c->munmap(p, 4096);
            break;
        }
        case 2:
            (void)c->posix_fallocate(tmpfd, 0, 4096);
            break;
        case 3:
            (void)c->shm_open("/dsmpool-passthrough-none", O_RDWR, 0);
            break;
        }
    }
    return (now() - t0) / (double)n;
}

int main(int argc, char **argv) {
    int rounds = 21;
    long n = 20000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc) n = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--rounds R] [--calls N]\n", argv[0]);
            return 2;
        }
    }
    if (rounds < 1 || rounds > 1001 || n < 1) {
        fprintf(stderr, "passthrough: --rounds 1..1001, --calls > 0\n");
        return 2;
    }
    calls named = {close, mmap, munmap, posix_fallocate, shm_open}, libc;
    void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *f[5] = {h ? dlsym(h, "close") : NULL, h ? dlsym(h, "mmap") : NULL, h ? dlsym(h, "munmap") : NULL,
                  h ? dlsym(h, "posix_fallocate") : NULL, h ? dlsym(h, "shm_open") : NULL};
    for (int i = 0; i < 5; i++)
        if (!f[i]) {
            fprintf(stderr, "passthrough: libc.so.6's own definitions not found: %s\n", dlerror());
            return 1;
        }
    memcpy(&libc.close, &f[0], sizeof f[0]); /* (POSIX: a function pointer from dlsym) */
    memcpy(&libc.mmap, &f[1], sizeof f[1]);
    memcpy(&libc.munmap, &f[2], sizeof f[2]);
    memcpy(&libc.posix_fallocate, &f[3], sizeof f[3]);
    memcpy(&libc.shm_open, &f[4], sizeof f[4]);
    Dl_info di;
    int preloaded = dladdr((void *)named.close, &di) && di.dli_fname && strstr(di.dli_fname, "dsmpool-preload");
    char path[] = "/tmp/dsmpool-passthrough-XXXXXX";
    tmpfd = mkstemp(path);
    if (tmpfd < 0 || posix_fallocate(tmpfd, 0, 4096) != 0) {
        perror("passthrough: a file to fallocate");
        return 1;
    }
    unlink(path);

    static const char *what[] = {"close(-1) (EBADF)", "mmap + munmap (anonymous, 4 KiB)",
                                 "posix_fallocate (a file's allocated 4 KiB)", "shm_open (not PostgreSQL's name)"};
    static const int ncalls[] = {1, 2, 1, 1};
    printf("passthrough: %s; %d rounds of %ld calls, interleaved, order alternating\n",
           preloaded ? "through libdsmpool-preload.so against libc's own"
                     : "NO preload library (both ways libc's): the noise floor",
           rounds, n);
    printf("| call | libc ns | named ns | extra per call, median of paired rounds |\n");
    printf("| --- | --: | --: | --: |\n");
    double *a = calloc((size_t)rounds, sizeof *a), *b = calloc((size_t)rounds, sizeof *b),
           *d = calloc((size_t)rounds, sizeof *d);
    if (!a || !b || !d) return 1;
    for (int k = 0; k < 4; k++) {
        run(&named, k, n / 10 + 1); /* warm */
        run(&libc, k, n / 10 + 1);
        for (int r = 0; r < rounds; r++) {
            if (r % 2) {
                a[r] = run(&libc, k, n);
                b[r] = run(&named, k, n);
            } else {
                b[r] = run(&named, k, n);
                a[r] = run(&libc, k, n);
            }
            d[r] = (b[r] - a[r]) / ncalls[k];
        }
        double dm = median(d, rounds);
        printf("| %s | %.1f | %.1f | %+.1f |\n", what[k], median(a, rounds), median(b, rounds), dm);
    }
    free(a);
    free(b);
    free(d);
    close(tmpfd);
    return 0;
}
