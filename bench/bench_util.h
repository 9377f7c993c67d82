/*
 * bench_util.h -- the little every benchmark needs: a monotonic clock in
 * seconds, the median of a set of rounds, and a number read from /proc or
 * a cgroup file.
 */
#ifndef DSMPOOL_BENCH_UTIL_H
#define DSMPOOL_BENCH_UTIL_H

#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* glibc's own malloc, free and mallinfo2, whatever allocator is linked in.
 * Not __libc_malloc: libmimalloc exports that name too, so with mimalloc
 * linked a "glibc" backend reached through it is mimalloc. Looked up in
 * libc.so.6 itself; a static binary (no mimalloc there) falls back to
 * __libc_malloc, which is glibc's when jemalloc replaces malloc. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
typedef struct glibc_fns {
    void *(*malloc)(size_t);
    void (*free)(void *);
    struct mallinfo2 (*mallinfo2)(void);
    size_t (*usable)(void *); /* glibc's malloc_usable_size; NULL if not found */
} glibc_fns;
static inline glibc_fns glibc_malloc(void) {
    glibc_fns g = {__libc_malloc, __libc_free, mallinfo2, NULL};
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!libc) return g;
    void *m = dlsym(libc, "malloc"), *f = dlsym(libc, "free"), *i = dlsym(libc, "mallinfo2"),
         *u = dlsym(libc, "malloc_usable_size");
    if (m && f) {
        *(void **)&g.malloc = m; /* (POSIX: a function pointer from dlsym) */
        *(void **)&g.free = f;
        if (u) *(void **)&g.usable = u; /* only with glibc's own malloc */
    }
    if (i) *(void **)&g.mallinfo2 = i;
    return g;
}

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v in place; the upper median for even n. */
static inline double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* The kB of a "Field:" line of a /proc status-like file; -1 if none. */
static inline long proc_kb(const char *path, const char *field) {
    FILE *f = fopen(path, "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') v = atol(line + n + 1);
    if (f) fclose(f);
    return v;
}

/* The first number in a file; -1 if unreadable, LONG_MAX for "max". */
static inline long file_num(const char *path) {
    FILE *f = fopen(path, "r");
    char buf[64] = "";
    if (!f) return -1;
    if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
    fclose(f);
    if (!strncmp(buf, "max", 3)) return __LONG_MAX__;
    return buf[0] ? atol(buf) : -1;
}

#endif
