/*
 * testhooks.h -- the library's test-only hooks, for a suite that uses them:
 * dp_inject_fn (the injection points' handler: pool/base/dp_inject.h) and
 * the areas' dp_area_test_* (pool/area/dp_area.h, defined in area_test.c,
 * which only the internal library has). Each is declared once, in the
 * header of the layer that defines it; this includes them.
 */
#ifndef DSMPOOL_TESTHOOKS_H
#define DSMPOOL_TESTHOOKS_H

#include "dp_internal.h"

#endif
