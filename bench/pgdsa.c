/*
 * pgdsa.c -- a faithful imitation of PostgreSQL's DSA over DSM (dsa.c,
 * dsm.c, dsm_impl.c with dynamic_shared_memory_type = posix), for the
 * benchmark's "pg-dsa" and "pg-prealloc" backends.
 *
 * What it imitates, as a parallel hash-join build exercises it:
 *   - ExecParallelHashTupleAlloc takes the hash join's pstate->lock (here
 *     hash_lock) and, while holding it, calls dsa_allocate for a 32 KiB
 *     chunk; dsa_allocate of more than 8 KiB is a "large" allocation that
 *     takes DSA_AREA_LOCK (here area_lock), looks for free pages in the
 *     existing segments and, when none has enough, calls make_new_segment
 *     WHILE HOLDING BOTH LOCKS.
 *   - make_new_segment: the first free slot; size DSA_INITIAL_SEGMENT_SIZE
 *     (1 MiB) << (index / DSA_NUM_SEGMENTS_AT_EACH_SIZE (2)), or larger for a
 *     big request; per-segment metadata (header, free page manager, and an
 *     8-byte page map entry per 4 KiB page) at its start, written on create
 *     and on every allocation (pagemap[first page] = the object).
 *   - dsm_create with dsm_impl_posix: shm_open("/PostgreSQL.<n>",
 *     O_CREAT|O_EXCL), ftruncate, posix_fallocate (dsm_impl_posix_resize),
 *     mmap(MAP_SHARED); the creator maps it at once.
 *   - dsa_get_address: check_for_freed_segments (a read of the shared
 *     freed-segment counter), then the process's segment map; a segment not
 *     yet mapped in this process is attached then (shm_open + mmap), so every
 *     worker pays those system calls and the page faults of first touch.
 *   - pg-prealloc (PostgreSQL 14's min_dynamic_shared_memory): dsm_create
 *     first tries the preallocated main region (carved by its own free page
 *     manager under DynamicSharedMemoryControlLock, which the creator also
 *     takes): no system call, and the region is mapped in every process
 *     already (inherited over fork). Optionally in 2 MiB huge pages.
 *
 * What it leaves out: the free page manager's btree (a bump pointer per
 * segment; a hash build never frees, so FPM would hand out the same pages in
 * the same order); the span object each large allocation also gets (one more
 * small allocation under a size-class lock); dsa_free and segment recycling
 * (the benchmark destroys the area after each query); resource owners and
 * on-detach callbacks; the dsm control segment's slot limit
 * (64 + 5 * MaxBackends segments). LWLocks are process-shared pthread
 * mutexes (both sleep when contended).
 */
#include "pgdsa.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define DSA_INITIAL_SEGMENT_SIZE (1ull << 20)
#define DSA_NUM_SEGMENTS_AT_EACH_SIZE 2
#define DSA_MAX_SEGMENTS 1024
#define DSA_OFFSET_WIDTH 40
#define FPM_PAGE_SIZE 4096ull
#define SEG_HEADER_BYTES 256 /* dsa_segment_header + FreePageManager, roughly */

typedef struct pgdsa_seg {
    char name[48];
    uint64_t size;       /* total, metadata included */
    uint64_t first_page; /* first usable page (after the metadata) */
    uint64_t next_page;  /* bump: the free page manager's next run */
    uint64_t region_off; /* pg-prealloc: where in the region; else 0 */
} pgdsa_seg;

typedef struct pgdsa_ctl {
    pthread_mutex_t area_lock;  /* DSA_AREA_LOCK */
    pthread_mutex_t hash_lock;  /* ParallelHashJoinState.lock */
    pthread_mutex_t dsm_lock;   /* DynamicSharedMemoryControlLock (pg-prealloc) */
    int prealloc;
    _Atomic uint64_t freed_segment_counter;
    uint32_t nsegs;             /* segments 0 .. nsegs-1 exist */
    pgdsa_seg seg[DSA_MAX_SEGMENTS];
} pgdsa_ctl;

struct pgdsa_area {
    pgdsa_ctl *ctl;
    char ctl_name[48];
    bool ctl_in_region;
    /* per process: the segment map (dsa_area.segment_maps) */
    _Atomic(char *) map[DSA_MAX_SEGMENTS];
    pthread_mutex_t map_lock; /* threads of one process share the map */
};

/* ---- counted locks ------------------------------------------------------------ */

_Thread_local pgdsa_counters *pgdsa_count;

static uint64_t ns_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* LWLockAcquire, as a process-shared mutex; counted when the thread asks. */
static void lock(pthread_mutex_t *m) {
    pgdsa_counters *c = pgdsa_count;
    if (__builtin_expect(!c, 1)) {
        pthread_mutex_lock(m);
        return;
    }
    uint64_t t0 = ns_now();
    c->locks++;
    c->rmw++; /* the acquiring CAS */
    if (pthread_mutex_trylock(m) != 0) {
        c->contended++;
        c->rmw++; /* the failed one; the sleeping lock's own retries are not seen */
        pthread_mutex_lock(m);
    }
    uint64_t t1 = ns_now();
    c->wait_ns += t1 - t0;
    if (c->depth++ == 0) c->t_hold = t1;
}

static void unlock(pthread_mutex_t *m) {
    pgdsa_counters *c = pgdsa_count;
    if (__builtin_expect(c != NULL, 0)) {
        c->rmw++; /* the releasing exchange */
        if (--c->depth == 0) c->hold_ns += ns_now() - c->t_hold;
    }
    pthread_mutex_unlock(m);
}

/* ---- the preallocated region (pg-prealloc) -------------------------------- */

static struct {
    char *base;
    size_t size, page;
    _Atomic uint64_t *used; /* in the region's first page: the main-space FPM's bump */
} R;

int pgdsa_region_create(size_t bytes, bool huge_2m, bool prefault) {
    size_t page = huge_2m ? (2u << 20) : 4096;
    bytes = (bytes + page - 1) & ~(page - 1);
    int fl = MAP_SHARED | MAP_ANONYMOUS | (huge_2m ? MAP_HUGETLB | (21 << MAP_HUGE_SHIFT) : 0);
    char *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, fl, -1, 0);
    if (m == MAP_FAILED) return -errno;
    if (prefault) madvise(m, bytes, 23 /* MADV_POPULATE_WRITE */);
    R.base = m;
    R.size = bytes;
    R.page = page;
    R.used = (_Atomic uint64_t *)m;
    atomic_store(R.used, FPM_PAGE_SIZE);
    return 0;
}

void pgdsa_region_destroy(void) {
    if (R.base) munmap(R.base, R.size);
    memset(&R, 0, sizeof R);
}

size_t pgdsa_region_page_size(void) { return R.page; }

/* ---- DSM segments -------------------------------------------------------------- */

static _Atomic unsigned dsm_name_counter;

/* dsm_create + dsm_impl_posix: create, size, reserve, map. */
static char *dsm_create_posix(char *name, size_t n, uint64_t size) {
    snprintf(name, n, "/PostgreSQL.%u.%u", (unsigned)getpid(), atomic_fetch_add(&dsm_name_counter, 1));
    if (pgdsa_count) pgdsa_count->rmw++;
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return NULL;
    char *m = NULL;
    if (ftruncate(fd, (off_t)size) == 0 && posix_fallocate(fd, 0, (off_t)size) == 0) {
        m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) m = NULL;
    }
    close(fd);
    if (!m) shm_unlink(name);
    return m;
}

static char *dsm_attach_posix(const char *name, uint64_t size) {
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) return NULL;
    char *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return m == MAP_FAILED ? NULL : m;
}

/* dsm_create in a region first (PostgreSQL 14+ main space). */
static int region_carve(pgdsa_ctl *ctl, uint64_t size, uint64_t *off) {
    lock(&ctl->dsm_lock);
    uint64_t u = atomic_load(R.used);
    int r = -1;
    if (u + size <= R.size) {
        atomic_store(R.used, u + size);
        *off = u;
        r = 0;
    }
    unlock(&ctl->dsm_lock);
    return r;
}

static void mutex_init_shared(pthread_mutex_t *m) {
    pthread_mutexattr_t at;
    pthread_mutexattr_init(&at);
    pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(m, &at);
    pthread_mutexattr_destroy(&at);
}

pgdsa_area *pgdsa_create(bool prealloc) {
    pgdsa_area *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    pthread_mutex_init(&a->map_lock, NULL);
    if (prealloc && R.base) {
        /* the control object lives in the region too (dsa_create_in_place) */
        uint64_t need = (sizeof(pgdsa_ctl) + FPM_PAGE_SIZE - 1) & ~(FPM_PAGE_SIZE - 1);
        uint64_t u = atomic_fetch_add(R.used, need);
        if (u + need > R.size) {
            free(a);
            return NULL;
        }
        a->ctl = (pgdsa_ctl *)(R.base + u);
        a->ctl_in_region = true;
    } else {
        a->ctl = (pgdsa_ctl *)dsm_create_posix(a->ctl_name, sizeof a->ctl_name, sizeof(pgdsa_ctl));
        if (!a->ctl) {
            free(a);
            return NULL;
        }
    }
    memset(a->ctl, 0, sizeof *a->ctl);
    mutex_init_shared(&a->ctl->area_lock);
    mutex_init_shared(&a->ctl->hash_lock);
    mutex_init_shared(&a->ctl->dsm_lock);
    a->ctl->prealloc = prealloc && R.base;
    return a;
}

void pgdsa_worker_begin(pgdsa_area *a) {
    /* A new process has mapped nothing yet (the creator's map was inherited
     * over fork, but a PostgreSQL worker attaches each segment itself). */
    for (unsigned i = 0; i < DSA_MAX_SEGMENTS; i++) atomic_store(&a->map[i], NULL);
    pthread_mutex_init(&a->map_lock, NULL);
}

void pgdsa_destroy(pgdsa_area *a) {
    pgdsa_ctl *ctl = a->ctl;
    for (uint32_t i = 0; i < ctl->nsegs; i++) {
        char *m = atomic_load(&a->map[i]);
        if (!ctl->prealloc) {
            if (m) munmap(m, ctl->seg[i].size);
            shm_unlink(ctl->seg[i].name);
        }
    }
    if (a->ctl_in_region) {
        atomic_store(R.used, FPM_PAGE_SIZE); /* the whole query's memory goes back */
    } else {
        munmap(a->ctl, sizeof *a->ctl);
        shm_unlink(a->ctl_name);
    }
    pthread_mutex_destroy(&a->map_lock);
    free(a);
}

unsigned pgdsa_segments(pgdsa_area *a) { return a->ctl->nsegs; }

char *const *pgdsa_segment_map(pgdsa_area *a) {
    /* _Atomic(char *) and char * have the same representation; the inline
     * reader's plain load of a pointer-sized word is what the relaxed load was */
    return (char *const *)(void *)a->map;
}

/* The segment's address in this process: get_segment_by_index, which
 * attaches it (shm_open + mmap) the first time this process needs it. */
static char *seg_base(pgdsa_area *a, uint32_t idx) {
    char *m = atomic_load_explicit(&a->map[idx], memory_order_acquire);
    if (__builtin_expect(m != NULL, 1)) return m;
    pthread_mutex_lock(&a->map_lock);
    m = atomic_load(&a->map[idx]);
    if (!m) {
        pgdsa_seg *s = &a->ctl->seg[idx];
        m = a->ctl->prealloc ? R.base + s->region_off : dsm_attach_posix(s->name, s->size);
        atomic_store(&a->map[idx], m);
    }
    pthread_mutex_unlock(&a->map_lock);
    return m;
}

/* make_new_segment, with the area lock held. */
static int make_new_segment(pgdsa_area *a, uint64_t requested_pages) {
    pgdsa_ctl *ctl = a->ctl;
    uint32_t idx = ctl->nsegs;
    if (idx >= DSA_MAX_SEGMENTS) return -1;
    uint64_t total = DSA_INITIAL_SEGMENT_SIZE << (idx / DSA_NUM_SEGMENTS_AT_EACH_SIZE);
    uint64_t pages = total / FPM_PAGE_SIZE;
    uint64_t meta = SEG_HEADER_BYTES + 8 * pages;
    meta = (meta + FPM_PAGE_SIZE - 1) & ~(FPM_PAGE_SIZE - 1);
    if (requested_pages > (total - meta) / FPM_PAGE_SIZE) { /* an odd-sized segment */
        meta = (SEG_HEADER_BYTES + 8 * requested_pages + FPM_PAGE_SIZE - 1) & ~(FPM_PAGE_SIZE - 1);
        total = meta + requested_pages * FPM_PAGE_SIZE;
    }
    pgdsa_seg *s = &ctl->seg[idx];
    char *m;
    if (ctl->prealloc) {
        uint64_t off;
        if (region_carve(ctl, total, &off) != 0) return -1;
        s->region_off = off;
        m = R.base + off;
    } else {
        m = dsm_create_posix(s->name, sizeof s->name, total);
        if (!m) return -1;
    }
    if (pgdsa_count) pgdsa_count->segs++;
    s->size = total;
    s->first_page = meta / FPM_PAGE_SIZE;
    s->next_page = s->first_page;
    memset(m, 0, SEG_HEADER_BYTES); /* FreePageManagerInitialize + header */
    atomic_store(&a->map[idx], m);
    ctl->nsegs = idx + 1;
    return (int)idx;
}

static pgdsa_pointer allocate_locked(pgdsa_area *a, size_t size) {
    pgdsa_ctl *ctl = a->ctl;
    uint64_t npages = (size + FPM_PAGE_SIZE - 1) / FPM_PAGE_SIZE;
    int idx = -1;
    /* get_best_segment: the first segment with enough contiguous free pages */
    for (uint32_t i = 0; i < ctl->nsegs; i++)
        if (ctl->seg[i].next_page + npages <= ctl->seg[i].size / FPM_PAGE_SIZE) {
            idx = (int)i;
            break;
        }
    if (idx < 0 && (idx = make_new_segment(a, npages)) < 0) return 0;
    pgdsa_seg *s = &ctl->seg[idx];
    uint64_t first = s->next_page;
    s->next_page += npages;
    pgdsa_pointer p = ((uint64_t)idx << DSA_OFFSET_WIDTH) | (first * FPM_PAGE_SIZE);
    /* pagemap[first] = the span of this object: a store into the segment */
    char *base = seg_base(a, (uint32_t)idx);
    if (base) ((uint64_t *)(base + SEG_HEADER_BYTES))[first] = p;
    return p;
}

pgdsa_pointer pgdsa_allocate(pgdsa_area *a, size_t size) {
    lock(&a->ctl->area_lock);
    pgdsa_pointer p = allocate_locked(a, size);
    unlock(&a->ctl->area_lock);
    return p;
}

pgdsa_pointer pgdsa_allocate_chunk(pgdsa_area *a, size_t size) {
    lock(&a->ctl->hash_lock);
    pgdsa_pointer p = pgdsa_allocate(a, size);
    unlock(&a->ctl->hash_lock);
    return p;
}

void *pgdsa_get_address(pgdsa_area *a, pgdsa_pointer p) {
    if (!p) return NULL;
    (void)atomic_load_explicit(&a->ctl->freed_segment_counter, memory_order_acquire);
    uint32_t idx = (uint32_t)(p >> DSA_OFFSET_WIDTH);
    char *m = seg_base(a, idx);
    return m ? m + (p & ((1ull << DSA_OFFSET_WIDTH) - 1)) : NULL;
}
