/*
 * area_test.c -- test hooks that reach inside areas (dp_area_test_*): a
 * word of an area's shared state to damage (tests/test_scribble.c,
 * test_exact.c, test_exact_review2.c, test_area_users.c), the classes'
 * table and the reciprocal (test_area.c, test_reclaim.c, test_scribble.c),
 * forcing the shared path (test_area_users.c) or an untrimmed exact block
 * (test_area.c), and every allocation of a quiet area (test_area_users.c,
 * test_reclaim.c).
 *
 * Layer: areas, above every other area file; built into the internal
 * library alone (meson.build: internal_sources), which the test suites link
 * and which has the injection points compiled in. Each hook's prototype is
 * written where the tests use it.
 */

#include <string.h>

#include "area.h"
#include "area_registry.h"
#include "area_cache.h"
#include "area_acquire.h"

#ifndef DP_INJECTION
#error "area_test.c is for the internal library only (meson.build: internal_sources)"
#endif

/* Test-only (tests/test_scribble.c damages areas on purpose): a word of the
 * area's shared state. "head"/"bump": this thread's cache record, class cls;
 * "regpage": registry page cls; "span": the state word of the span or block
 * that holds pointer p (cls unused), "block" its block word. NULL when
 * there is none. */
dp_a64 *dp_area_test_word(dsmpool_area *a, const char *what, unsigned cls, dsmpool_ptr p) {
    if (!strcmp(what, "regpage")) return cls < AR_REGPAGES ? &a->ctl->regpage[cls] : NULL;
    if (!strcmp(what, "span")) {
        ar_loc l;
        return dp_ar_locate(a, p, &l) == 0 && ar_locate_entry(a, &l) ? &l.sp->state : NULL;
    }
    if (!strcmp(what, "block")) {
        ar_loc l;
        return dp_ar_locate(a, p, &l) == 0 && ar_locate_entry(a, &l) ? &l.sp->block : NULL;
    }
    ar_tc *tc = ar_tc_get(a);
    if (!tc || !tc->rec || cls >= AR_NCLS) return NULL;
    if (!strcmp(what, "head")) return &tc->rec->head[cls];
    if (!strcmp(what, "bump")) return &tc->rec->bump[cls];
    return NULL;
}

void dp_area_test_untrimmed(bool on) { dp_store_relaxed_any(&dp_ar_untrimmed, on); }

void dp_area_test_force_shared(bool on) { dp_ar_tc_force_shared = on; }

/* Test-only: how long a destroyer waits for operations (0: AR_QUIESCE_NS). */
void dp_area_test_quiesce_ns(uint64_t ns) {
    dp_store_relaxed(&dp_ar_quiesce_ns, ns ? ns : AR_QUIESCE_NS); /* relaxed: area_life.c AR_QUIESCE_BOUND */
}

unsigned dp_area_test_class(size_t size) { return cls_of(size); }

/* Test-only: class c's span bytes (0: no such class). */
uint64_t dp_area_test_span(unsigned c) { return c <= AR_CLS_MASK ? cls_span(c) : 0; }
uint64_t dp_area_test_span_len(unsigned c) { return c <= AR_CLS_MASK ? cls_len(c) : 0; }
/* Test-only: the offset bits of a fallback pointer into an OS segment of len
 * bytes. */
unsigned dp_area_test_fb_bits(uint64_t len) { return ar_fb_bits(len); }

/* Test-only: class c's chunk size (0: no such class), and the chunk index
 * the reciprocal gives for span offset off, with whether off starts it. */
uint32_t dp_area_test_chunk(unsigned c, uint64_t off, uint32_t *idx, bool *start) {
    if (c > AR_CLS_MASK) return 0;
    uint32_t i;
    *start = chunk_at(c, off, &i);
    *idx = chunk_idx(c, off);
    return cls_size(c);
}

/* Test-only: every allocation of the area -- chunks no list, stack or range
 * holds, and large blocks -- into out (at most max; returns how many there
 * are); *tagged counts those of them that still carry a free tag (lost, if
 * the area is quiet). The caller keeps the area quiet. */
typedef struct live_out {
    dsmpool_ptr *out;
    size_t max, n, tagged;
} live_out;

static bool note_live(void *arg, uint64_t e, unsigned c, dsmpool_ptr cp, uint32_t idx, bool tagged) {
    (void)e, (void)c, (void)idx;
    live_out *o = arg;
    if (o->n < o->max) o->out[o->n] = cp;
    o->n++;
    o->tagged += tagged;
    return true;
}

long dp_area_test_live(dsmpool_area *a, dsmpool_ptr *out, size_t max, size_t *tagged) {
    dp_area_scratch sc = {0};
    char why[200];
    if (!dp_ar_scratch_ready(&sc)) return -ENOMEM;
    ar_vctx v = {a, sc.bits, sc.used, 0, why, sizeof why, 0};
    live_out o = {out, max, 0, 0};
    dp_ar_verify_area(&v);
    int r = v.err ? v.err : dp_ar_walk_unheld(&v, NULL, note_live, &o);
    dp_ar_vclear(&v);
    dp_area_scratch_free(&sc);
    if (tagged) *tagged = o.tagged;
    return r ? r : (long)o.n;
}
