/*
 * bench_util.h -- the little every benchmark needs: a monotonic clock in
 * seconds and the median of a set of rounds.
 */
#ifndef DSMPOOL_BENCH_UTIL_H
#define DSMPOOL_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

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

#endif
