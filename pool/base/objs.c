/*
 * objs.c -- the process-local objects handed to the caller (dsmpool,
 * dsmpool_seg, dsmpool_area) are never given back to malloc, so that a call
 * on one that was detached reads memory that is still ours and finds it
 * dead, instead of reading freed memory.
 *
 * Layer: the bottom, beside error.c; it calls nothing of the library. The
 * process ledger (proc.c) takes its lock around fork() and re-initialises
 * it after a fork that skipped the atfork handlers.
 *
 * Rules
 *   [magic first] Each such object begins with its magic (a uint64_t) and is made by
 *      dp_obj_new and ended by dp_obj_end, never by calloc or free. Every
 *      public call checks the magic (or, for segments and pools, the
 *      process-local registries of proc.c) before it reads anything else.
 *   [ended, not freed] dp_obj_end writes 0 over the magic and puts the object at the tail of
 *      its kind's queue. dp_obj_new reuses the head of the queue only when
 *      more than DP_OBJ_KEEP objects of that kind wait there, otherwise it
 *      allocates. So a call on an ended object finds magic 0 (and answers
 *      -EINVAL) until at least DP_OBJ_KEEP more objects of its kind have
 *      ended after it; only then may its memory be a new object again, which
 *      is what any pointer past its object's life risks in C.
 *   [memory bound] per kind, at most the peak of live objects plus DP_OBJ_KEEP
 *      (+1) objects; nothing grows with the number of objects made.
 *   [hidden link] The queue link lives in a hidden header before the object, never in
 *      the object, so the dead magic stays readable.
 *
 * dp_copy_sized: the other thing handed to callers that will change size,
 * the stats structs (the header's "Structs that grow"): fill a whole one,
 * give the caller the part its header knows.
 *
 * Concurrency: one mutex for all queues, a leaf (nothing else is taken while
 * it is held). Objects are made and ended by create, attach and detach calls,
 * never on an allocation's path. A call that races the end of the object it
 * names, in another thread, is the caller's bug; [ended, not freed] makes the sequential
 * case (a call after the detach returned) safe.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dp_base.h"

#define DP_OBJ_KEEP 64


/* 64 bytes, and allocated 64-byte aligned: the objects hold cache-line
 * aligned members */
typedef struct obj_hdr {
    _Alignas(64) struct obj_hdr *next;
    size_t size;
} obj_hdr;
_Static_assert(sizeof(obj_hdr) == 64, "the object after the header keeps 64-byte alignment");

static pthread_mutex_t objs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    obj_hdr *head, *tail;
    size_t n;
} queues[DP_OBJ_KINDS];

void *dp_obj_new(unsigned kind, size_t size) {
    obj_hdr *h = NULL;
    pthread_mutex_lock(&objs_lock);
    if (kind < DP_OBJ_KINDS && queues[kind].n > DP_OBJ_KEEP && queues[kind].head->size == size) {
        h = queues[kind].head;
        queues[kind].head = h->next;
        if (!queues[kind].head) queues[kind].tail = NULL;
        queues[kind].n--;
    }
    pthread_mutex_unlock(&objs_lock);
    if (h) {
        memset(h + 1, 0, size);
    } else {
        size_t bytes = (sizeof *h + size + 63) & ~(size_t)63;
        h = aligned_alloc(64, bytes);
        if (!h) return NULL;
        memset(h, 0, bytes);
        h->size = size;
    }
    h->next = NULL;
    return h + 1;
}

void dp_obj_end(unsigned kind, void *obj) {
    if (!obj) return;
    obj_hdr *h = (obj_hdr *)obj - 1;
    *(uint64_t *)obj = 0; /* [ended, not freed]: dead before anyone can take it again */
    if (kind >= DP_OBJ_KINDS) return; /* (never: kinds are constants) */
    h->next = NULL;
    pthread_mutex_lock(&objs_lock);
    if (queues[kind].tail) queues[kind].tail->next = h;
    else queues[kind].head = h;
    queues[kind].tail = h;
    queues[kind].n++;
    pthread_mutex_unlock(&objs_lock);
}

int dp_copy_sized(void *out, size_t struct_size, void *full, size_t full_size) {
    if (struct_size < sizeof(size_t))
        return dp_fail(-EINVAL, "struct_size %zu is too small for any version of this struct", struct_size);
    size_t n = struct_size < full_size ? struct_size : full_size;
    *(size_t *)full = n; /* struct_size: the bytes filled */
    memset(out, 0, struct_size); /* a newer caller's fields past ours: zero */
    memcpy(out, full, n);
    return 0;
}

void dp_objs_fork_lock(void) { pthread_mutex_lock(&objs_lock); }
void dp_objs_fork_unlock(void) { pthread_mutex_unlock(&objs_lock); }
void dp_objs_fork_reset(void) { pthread_mutex_init(&objs_lock, NULL); }
