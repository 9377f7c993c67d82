/*
 * dp_internal.h -- every layer's header at once, for the test suites, the
 * tools and the benchmarks that reach the library's internals (they link
 * the internal static library). Nothing in pool/ includes it: each
 * file there includes its own layer's header, which includes the ones
 * below (tools/layers.py checks that).
 */
#ifndef DP_INTERNAL_H
#define DP_INTERNAL_H

#include "dp_top.h"

#endif /* DP_INTERNAL_H */
