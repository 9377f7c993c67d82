/*
 * pacount -- the fixed workload whose instructions callgrind counts in the
 * pool's page path (issue 35, item 3; the driver issue 27 measured with).
 *
 * One pool of 256 MiB (ANON, base pages), and at each of the orders 0, 3, 6
 * and 9 (4 KiB, 32 KiB, 256 KiB, 2 MiB): 20000 pairs (dp_pool_alloc, then
 * dp_pool_free of that block) and 200 bursts of 64 (64 allocations, then
 * their 64 frees): 131200 allocations and as many frees in all. The same
 * blocks every run: single-threaded, no clock, no random number.
 *
 *   --elastic   the pool is created elastic (idle_release_ms set, nothing
 *               resident beyond resident_min = 0), then wholly made resident
 *               (dsmpool_prefault_free) before the workload: what the
 *               residency checks cost where every block is warm
 *   --cold      the same, 512 MiB of which 256 MiB are made resident: the
 *               other half stays released, so the allocator's [resident
 *               first] preference is on (palloc.c) while every block still
 *               fits in warm memory (the largest burst holds 128 MiB)
 * In both, no refill may happen: the run fails if one does.
 *
 * bench/pacount.sh runs it under callgrind, counting inside dp_pool_alloc
 * and dp_pool_free only, and prints instructions per call. Alone, it prints
 * the calls it made. Exit 1 on any failure.
 */
#include <dsmpool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dp_internal.h"

enum { PAIRS = 20000, BURSTS = 200, BURST = 64 };

int main(int argc, char **argv) {
    bool cold = argc > 1 && strcmp(argv[1], "--cold") == 0;
    bool elastic = cold || (argc > 1 && strcmp(argv[1], "--elastic") == 0);
    if (argc > 2 || (argc == 2 && !elastic)) {
        fprintf(stderr, "usage: %s [--elastic | --cold]\n", argv[0]);
        return 2;
    }
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = (cold ? 512u : 256u) << 20;
    cfg.backing = DSMPOOL_BACKING_ANON;
    if (elastic) cfg.idle_release_ms = 1000;
    dsmpool *pool;
    if (dsmpool_create(&cfg, &pool) != 0) {
        fprintf(stderr, "pacount: %s\n", dsmpool_last_error());
        return 1;
    }
    if (elastic) {
        size_t made = 0;
        if (dsmpool_prefault_free(pool, cold ? 256u << 20 : SIZE_MAX, &made) != 0) goto fail;
    }
    static const unsigned orders[] = {0, 3, 6, 9};
    uint64_t blk[BURST], calls = 0;
    for (unsigned k = 0; k < sizeof orders / sizeof orders[0]; k++) {
        unsigned o = orders[k];
        for (int i = 0; i < PAIRS; i++) {
            if (dp_pool_alloc(pool, o, &blk[0]) != 0 || dp_pool_free(pool, blk[0]) != 0) goto fail;
            calls++;
        }
        for (int b = 0; b < BURSTS; b++) {
            for (int i = 0; i < BURST; i++)
                if (dp_pool_alloc(pool, o, &blk[i]) != 0) goto fail;
            for (int i = 0; i < BURST; i++)
                if (dp_pool_free(pool, blk[i]) != 0) goto fail;
            calls += BURST;
        }
    }
    dsmpool_stats st;
    if (dsmpool_get_stats(pool, &st) != 0) goto fail;
    if (st.refills_on_demand != 0) {
        fprintf(stderr, "pacount: %llu refills on demand: the pool was not wholly resident\n",
                (unsigned long long)st.refills_on_demand);
        dsmpool_destroy(pool);
        return 1;
    }
    printf("pacount: %s pool, %llu allocations and %llu frees (orders 0, 3, 6, 9)\n",
           cold ? "an elastic, half cold," : elastic ? "an elastic" : "a fixed", (unsigned long long)calls, (unsigned long long)calls);
    dsmpool_destroy(pool);
    return 0;
fail:
    fprintf(stderr, "pacount: %s\n", dsmpool_last_error());
    dsmpool_destroy(pool); /* its anchor in /dev/shm goes with it */
    return 1;
}
