/*
 * dp_base.h -- what every layer above the OS uses: errors as values with a
 * message for people (error.c), the objects handed to callers (objs.c),
 * and the bounds check every offset read from shared memory goes through.
 *
 * Layer: base (pool/base: with dp_atomic.h and dp_inject.h). It includes
 * nothing of the library's but the public header.
 */
#ifndef DP_BASE_H
#define DP_BASE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dp_atomic.h"
#include "dp_inject.h"
#include "dsmpool.h"

/* The branch a hot path expects, for the compiler's layout (the one name
 * for __builtin_expect: tools/layers.py checks that nothing else calls it). */
#define dp_likely(x) __builtin_expect(!!(x), 1)
#define dp_unlikely(x) __builtin_expect(!!(x), 0)

/* ---- error reporting (error.c) -------------------------------------------- */

int dp_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dp_clear_error(void);

/* objs.c: the objects handed to the caller are made and ended here, never
 * freed (a call on a detached one finds it dead; objs.c [magic first], objs.c [ended, not freed], objs.c [memory bound] and objs.c [hidden link]). */
enum { DP_OBJ_POOL, DP_OBJ_SEG, DP_OBJ_AREA, DP_OBJ_KINDS };
void *dp_obj_new(unsigned kind, size_t size); /* zeroed; NULL when out of memory */
void dp_obj_end(unsigned kind, void *obj);    /* writes 0 over the magic first */
void dp_objs_fork_lock(void);                 /* the ledger's atfork handlers */
/* Give the caller the first struct_size bytes of a full struct (its first
 * member is size_t struct_size, set to the bytes given); -EINVAL if tiny. */
int dp_copy_sized(void *out, size_t struct_size, void *full, size_t full_size);
void dp_objs_fork_unlock(void);
void dp_objs_fork_reset(void);

/* ---- validation ----------------------------------------------------------- */

/* [off, off + len) lies inside [0, size): every offset and length read from
 * shared memory is checked so before it is used. */
static inline bool dp_range_ok(uint64_t off, uint64_t len, uint64_t size) {
    return off <= size && len <= size - off;
}

#endif /* DP_BASE_H */
