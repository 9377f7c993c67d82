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

#define DSMPOOL_PRELOAD_STATE_VERSION 2
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
    bool provider;          /* the way in is the server's DSM provider API (ops' gen_begin and
                               seg_*), not the interposed calls, which then never serve */
    bool serving;           /* this process has the pool */
    uint64_t generation;    /* pools made (one per start and crash restart) */
    int pool_pid;           /* the postmaster that made it */
    size_t pool_size;
    uint64_t served;        /* segments this process served from the pool */
    uint64_t refused;       /* ... that it gave to PostgreSQL's own (full, no room) */
    uint64_t unpin_failed;  /* destroys whose pool segment stayed (freed with the generation) */
    char note[512];         /* why there is no pool, when there is none; with a pool,
                               what its creation noted (huge pages fell back, and why) */
} dsmpool_preload_state;

/* What every process of this generation counted (the pool's name table). */
typedef struct dsmpool_preload_counts {
    uint64_t served;              /* segments the pool served */
    uint64_t refused;             /* segments it could not: PostgreSQL made them in /dev/shm */
    uint64_t first_refused_bytes; /* the first refused segment's size; 0: none yet (or not
                                     yet written) */
    char first_refused_why[256];  /* libdsmpool's message for it */
} dsmpool_preload_counts;

/* Taken once per generation by whoever calls claim first. */
#define DSMPOOL_PRELOAD_CLAIM_REFUSAL 1u    /* logs the first refusal */
#define DSMPOOL_PRELOAD_CLAIM_ANNOUNCE 2u   /* logs what the generation's pool is */
#define DSMPOOL_PRELOAD_CLAIM_MAINTAINER 4u /* a maintainer runs: with idle_release_ms set, a
                                               destroy leaves the release to it */

/* The pool, to the extension: dsmpool_preload_get_ops() (found with
 * dlsym(RTLD_DEFAULT, ...); the extension does not link libdsmpool). Each
 * call works on this process's pool of its generation and returns -ENOENT
 * where it has none; 0 or -errno, last_error() saying why. */
#define DSMPOOL_PRELOAD_OPS_VERSION 3
struct dsmpool_stats;
struct dsmpool;
typedef struct dsmpool_preload_ops {
    int version;
    int (*get_stats)(struct dsmpool_stats *out, size_t struct_size); /* dsmpool_get_stats_sized */
    int (*maintain)(unsigned *next_ms);                              /* dsmpool_maintain */
    int (*prefault_free)(size_t bytes, size_t *prefaulted);          /* dsmpool_prefault_free */
    int (*trim)(size_t keep_bytes, size_t *released);                /* dsmpool_trim */
    int (*counts)(dsmpool_preload_counts *out);
    bool (*claim)(unsigned what); /* true for the first caller of the generation (a bit above) */
    const char *(*last_error)(void);
    /* The provider's way in (a server with RegisterDsmProvider; the library
     * dlopened by the extension, or preloaded). The postmaster ends its
     * generation, if any, and makes the next pool (gen_begin: each time
     * shared memory is made, at the start and at each crash restart) or
     * ends it (gen_end: at shutdown); then any process of the generation
     * creates a pinned pool segment (id: its dsmpool handle), attaches it,
     * detaches its mapping, and unpins it once nobody maps it (destroy). */
    int (*gen_begin)(void);
    void (*gen_end)(void);
    int (*seg_create)(size_t size, uint64_t *id, void **addr, size_t *len);
    int (*seg_attach)(uint64_t id, void **addr, size_t *len);
    int (*seg_detach)(void *addr);
    int (*seg_destroy)(uint64_t id);
    /* This process's pool of its generation while the provider serves from
     * it, else NULL: what a server whose DSA areas are dsmpool areas
     * (provider/areas: dsa_pool_hook) makes its areas in. */
    struct dsmpool *(*pool)(void);
} dsmpool_preload_ops;

#endif
