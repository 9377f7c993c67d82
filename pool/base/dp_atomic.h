/*
 * dp_atomic.h -- the one atomics header: <stdatomic.h> with the memory order
 * in every name, so that a reader sees the ordering where it is used.
 *
 * Rules for callers (docs/style.md, "Atomics and ordering"; tools/layers.py
 * checks that no other file of the library calls an atomic of <stdatomic.h>
 * or a __atomic builtin):
 *  - every _acquire names, in a one-line comment, the _release it pairs with;
 *  - _relaxed is for counters, hints and values validated by a later CAS;
 *  - shared words are 64-bit and lock-free on every supported target, so they
 *    work between processes that map the region at different addresses.
 */
#ifndef DP_ATOMIC_H
#define DP_ATOMIC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "32-bit atomics must be lock-free");

typedef _Atomic uint64_t dp_a64;
typedef _Atomic uint32_t dp_a32;

#define DP_ATOMIC_OPS(T, A)                                                                  \
    static inline T dp_load_relaxed_##T(const A *p) {                                        \
        return atomic_load_explicit((A *)p, memory_order_relaxed);                           \
    }                                                                                        \
    static inline T dp_load_acquire_##T(const A *p) {                                        \
        return atomic_load_explicit((A *)p, memory_order_acquire);                           \
    }                                                                                        \
    static inline void dp_store_relaxed_##T(A *p, T v) {                                     \
        atomic_store_explicit(p, v, memory_order_relaxed);                                   \
    }                                                                                        \
    static inline void dp_store_release_##T(A *p, T v) {                                     \
        atomic_store_explicit(p, v, memory_order_release);                                   \
    }                                                                                        \
    static inline bool dp_cas_acq_rel_##T(A *p, T *expected, T desired) {                    \
        return atomic_compare_exchange_strong_explicit(p, expected, desired,                 \
                                                       memory_order_acq_rel,                 \
                                                       memory_order_relaxed);                \
    }                                                                                        \
    static inline bool dp_cas_acquire_##T(A *p, T *expected, T desired) {                    \
        return atomic_compare_exchange_strong_explicit(p, expected, desired,                 \
                                                       memory_order_acquire,                 \
                                                       memory_order_relaxed);                \
    }                                                                                        \
    static inline bool dp_cas_release_##T(A *p, T *expected, T desired) {                    \
        return atomic_compare_exchange_strong_explicit(p, expected, desired,                 \
                                                       memory_order_release,                 \
                                                       memory_order_relaxed);                \
    }                                                                                        \
    static inline bool dp_cas_relaxed_##T(A *p, T *expected, T desired) {                    \
        return atomic_compare_exchange_strong_explicit(p, expected, desired,                 \
                                                       memory_order_relaxed,                 \
                                                       memory_order_relaxed);                \
    }                                                                                        \
    static inline T dp_fetch_add_relaxed_##T(A *p, T v) {                                    \
        return atomic_fetch_add_explicit(p, v, memory_order_relaxed);                        \
    }                                                                                        \
    static inline T dp_fetch_add_acq_rel_##T(A *p, T v) {                                    \
        return atomic_fetch_add_explicit(p, v, memory_order_acq_rel);                        \
    }                                                                                        \
    static inline T dp_fetch_add_release_##T(A *p, T v) {                                    \
        return atomic_fetch_add_explicit(p, v, memory_order_release);                        \
    }                                                                                        \
    static inline bool dp_cas_weak_relaxed_##T(A *p, T *expected, T desired) {               \
        return atomic_compare_exchange_weak_explicit(p, expected, desired,                   \
                                                     memory_order_relaxed,                   \
                                                     memory_order_relaxed);                  \
    }                                                                                        \
    static inline T dp_exchange_relaxed_##T(A *p, T v) {                                     \
        return atomic_exchange_explicit(p, v, memory_order_relaxed);                         \
    }                                                                                        \
    static inline T dp_exchange_acq_rel_##T(A *p, T v) {                                     \
        return atomic_exchange_explicit(p, v, memory_order_acq_rel);                         \
    }                                                                                        \
    static inline T dp_fetch_or_relaxed_##T(A *p, T v) {                                     \
        return atomic_fetch_or_explicit(p, v, memory_order_relaxed);                         \
    }                                                                                        \
    static inline T dp_fetch_and_relaxed_##T(A *p, T v) {                                    \
        return atomic_fetch_and_explicit(p, v, memory_order_relaxed);                        \
    }                                                                                        \
    static inline T dp_fetch_and_acq_rel_##T(A *p, T v) {                                    \
        return atomic_fetch_and_explicit(p, v, memory_order_acq_rel);                        \
    }

DP_ATOMIC_OPS(uint64_t, dp_a64)
DP_ATOMIC_OPS(uint32_t, dp_a32)

/* The 64-bit forms are the common case: short names for them. */
#define dp_load_relaxed(p)        dp_load_relaxed_uint64_t(p)
#define dp_load_acquire(p)        dp_load_acquire_uint64_t(p)
#define dp_store_relaxed(p, v)    dp_store_relaxed_uint64_t(p, v)
#define dp_store_release(p, v)    dp_store_release_uint64_t(p, v)
#define dp_cas_acq_rel(p, e, d)   dp_cas_acq_rel_uint64_t(p, e, d)
#define dp_cas_acquire(p, e, d)   dp_cas_acquire_uint64_t(p, e, d)
#define dp_cas_release(p, e, d)   dp_cas_release_uint64_t(p, e, d)
#define dp_cas_relaxed(p, e, d)   dp_cas_relaxed_uint64_t(p, e, d) /* hints: orders nothing */
#define dp_fetch_add_relaxed(p, v) dp_fetch_add_relaxed_uint64_t(p, v)
#define dp_fetch_add_acq_rel(p, v) dp_fetch_add_acq_rel_uint64_t(p, v)
#define dp_fetch_add_release(p, v) dp_fetch_add_release_uint64_t(p, v)
#define dp_cas_weak_relaxed(p, e, d) dp_cas_weak_relaxed_uint64_t(p, e, d) /* in a loop; orders nothing */
#define dp_exchange_relaxed(p, v) dp_exchange_relaxed_uint64_t(p, v)
#define dp_exchange_acq_rel(p, v) dp_exchange_acq_rel_uint64_t(p, v)
#define dp_fetch_or_relaxed(p, v) dp_fetch_or_relaxed_uint64_t(p, v)
#define dp_fetch_and_relaxed(p, v) dp_fetch_and_relaxed_uint64_t(p, v)
#define dp_fetch_and_acq_rel(p, v) dp_fetch_and_acq_rel_uint64_t(p, v)

/* Process-local atomics of other types (a pointer, a bool): the same names
 * with _any, for any _Atomic object. */
#define dp_load_relaxed_any(p)      atomic_load_explicit((p), memory_order_relaxed)
#define dp_load_acquire_any(p)      atomic_load_explicit((p), memory_order_acquire)
#define dp_store_relaxed_any(p, v)  atomic_store_explicit((p), (v), memory_order_relaxed)
#define dp_store_release_any(p, v)  atomic_store_explicit((p), (v), memory_order_release)
/* A plain (not _Atomic) object read or written atomically: a table of
 * pointers published once, a page touched. */
#define dp_plain_load_acquire(p)       __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define dp_plain_store_release(p, v)   __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define dp_plain_fetch_or_relaxed(p, v) __atomic_fetch_or((p), (v), __ATOMIC_RELAXED)

/* Fences; each use says what it orders against what. */
static inline void dp_fence_seq_cst(void) { atomic_thread_fence(memory_order_seq_cst); }
static inline void dp_fence_release(void) { atomic_thread_fence(memory_order_release); }
static inline void dp_fence_acquire(void) { atomic_thread_fence(memory_order_acquire); }
/* Orders this thread against its own signal handler only (a compiler
 * barrier). */
static inline void dp_signal_fence(void) { atomic_signal_fence(memory_order_seq_cst); }

static inline void dp_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif /* DP_ATOMIC_H */
