/*
 * dsmpool_preload.h -- what the preload library shares with the extension
 * (both in the same process: the extension finds it with dlsym). Not a
 * public interface of libdsmpool.
 */
#ifndef DSMPOOL_PRELOAD_H
#define DSMPOOL_PRELOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The reservation with LD_PRELOAD alone: address space and its tables
 * (about 0.3%: 8 MiB), nothing else until segments use it. */
#define DSMPOOL_PRELOAD_DEFAULT_SIZE ((size_t)2 << 30)

#define DSMPOOL_PRELOAD_STATE_VERSION 1
typedef struct dsmpool_preload_state {
    int version;
    /* set by the extension in the postmaster's _PG_init, before the first
     * DSM segment: the next generation's pool is made with them */
    struct {
        size_t size;             /* 0: DSMPOOL_PRELOAD_DEFAULT_SIZE */
        bool huge_pages;         /* try hugetlb pages */
        bool numa;               /* a sub-pool per node */
        size_t resident_min;
        size_t warm_bytes;
        unsigned idle_release_ms;
    } settings;
    bool serving;           /* this process has the pool */
    uint64_t generation;    /* pools made (one per start and crash restart) */
    int pool_pid;           /* the postmaster that made it */
    size_t pool_size;
    uint64_t served;        /* segments this process served from the pool */
    uint64_t refused;       /* ... that it gave to PostgreSQL's own (full, no room) */
    uint64_t unpin_failed;  /* destroys whose pool segment stayed (freed with the generation) */
    char note[512];         /* why there is no pool, when there is none */
} dsmpool_preload_state;

#endif
