/*
 * area_acquire.h -- the variable area_acquire.c defines for the tests.
 */
#ifndef DP_AREA_ACQUIRE_H
#define DP_AREA_ACQUIRE_H

#include "area.h"

#ifdef DP_INJECTION
extern _Atomic bool dp_ar_untrimmed; /* test-only: dp_area_test_untrimmed */
#endif

#endif /* DP_AREA_ACQUIRE_H */
