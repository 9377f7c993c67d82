/*
 * reserve -- what an elastic pool's reservation costs before anything is
 * allocated (issue 35 item 1): for each size, an elastic pool (MEMFD, base
 * pages, resident_min 64 MiB unless --min says) is created, and the
 * benchmark prints the time the creation took, the shared memory the
 * process holds resident after it (RssShmem), what its memory cgroup was
 * charged (memory.current, before and after), and the tables' share of
 * the layout: span directory, segment table, allocator tree, and how much
 * of the tree is resident (mincore; palloc.c [lazy tree]). Then it
 * allocates and frees --touch MiB in 2 MiB blocks and as many 64 KiB
 * segments (the tables that memory needs become resident), prints the
 * tree's resident share again, trims, and prints RssShmem and the tree's
 * resident share again (resident.c [tree give-back]). Last,
 * what the pool's upkeep costs at that size: a refill ahead of 2 MiB
 * (dsmpool_prefault_free, each after a dsmpool_trim to nothing, not timed)
 * and a dsmpool_maintain step (idle_release_ms 60000: it stamps, and has
 * nothing to give back or refill), medians of --reps (11) in ms.
 *
 * Options: --gib G,G,... (default 64,1024), --min MiB (default 64),
 * --touch MiB (default 1024), --reps N (default 11). A size the library refuses prints its
 * error: the goal is refused or served, never an OOM kill.
 */
#include <dsmpool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench_util.h"
#include "dp_internal.h"

/* The resident MiB of the allocator's trees (mincore). */
static double tree_resident(dsmpool *p) {
    uint64_t have = 0;
    for (uint32_t s = 0; s < p->geo.nsub; s++) {
        uint64_t lo = p->geo.sub[s].geom.level_off[0] / 4096 * 4096, hi = p->geo.sub[s].geom.hint_off;
        size_t n = (hi - lo + 4095) / 4096;
        unsigned char *v = malloc(n);
        if (!v || mincore(p->base + lo, n * 4096, v) != 0) {
            free(v);
            return -1;
        }
        for (size_t i = 0; i < n; i++) have += v[i] & 1;
        free(v);
    }
    return have * 4096.0 / (1 << 20);
}

/* The memory cgroup's charge in bytes (cgroup v2's memory.current, or v1's
 * memory.usage_in_bytes), or -1 where it cannot be read. */
static long cgroup_current(void) {
    char line[512], path[700] = "";
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c = strchr(line, ':'), *d = c ? strchr(c + 1, ':') : NULL;
        if (!d) continue;
        if (!strncmp(c + 1, "memory:", 7))
            snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", d + 1);
        else if (c[1] == ':' && !path[0])
            snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.current", d + 1);
    }
    fclose(f);
    return path[0] ? file_num(path) : -1;
}

int main(int argc, char **argv) {
    const char *gibs = "64,1024";
    size_t min_mib = 64, touch_mib = 1024;
    int reps = 11;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gib") && i + 1 < argc) gibs = argv[++i];
        else if (!strcmp(argv[i], "--min") && i + 1 < argc) min_mib = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--touch") && i + 1 < argc) touch_mib = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: reserve [--gib G,G,...] [--min MiB] [--touch MiB] [--reps N]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 1000) reps = 11;
    printf("%8s %10s %12s %12s %10s %10s %10s %12s %14s %12s %10s %12s %9s %9s\n", "GiB", "create_ms", "rss_shm_MiB",
           "cgroup_MiB", "dir_MiB", "seg_MiB", "tree_MiB", "tree_res_MiB", "after_touch_MiB", "tree_touched", "trim_MiB",
           "tree_trimmed", "ahead_ms", "maint_ms");
    char *list = strdup(gibs);
    for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
        double g = atof(t);
        dsmpool_config cfg;
        dsmpool_config_init(&cfg);
        cfg.backing = DSMPOOL_BACKING_MEMFD;
        cfg.size = (size_t)(g * (1ull << 30));
        cfg.resident_min = min_mib << 20;
        cfg.idle_release_ms = 60000; /* (for the maintain step: it stamps) */
        long cg0 = cgroup_current();
        long r0 = proc_kb("/proc/self/status", "RssShmem");
        dsmpool *p = NULL;
        double t0 = now_s();
        int r = dsmpool_create(&cfg, &p);
        double ms = (now_s() - t0) * 1e3;
        if (r) {
            printf("%8g refused (%.1f ms): %s\n", g, ms, dsmpool_last_error());
            fflush(stdout);
            continue;
        }
        long r1 = proc_kb("/proc/self/status", "RssShmem");
        long cg1 = cgroup_current();
        const dp_header *h = &p->geo;
        double dir = h->dir_count * 8.0 / (1 << 20), seg = h->seg_cap * (double)sizeof(dp_seg_desc) / (1 << 20);
        double tree = 0;
        for (uint32_t s = 0; s < h->nsub; s++) tree += (double)(h->sub[s].geom.hint_off - h->sub[s].geom.level_off[0]) / (1 << 20);
        double tree_res = tree_resident(p);
        /* touch: allocate and free 2 MiB blocks, and as many 64 KiB ones
         * (leaves) */
        size_t n = touch_mib / 2;
        dsmpool_seg **segs = calloc(n ? 2 * n : 1, sizeof *segs);
        size_t got = 0;
        for (; got < n; got++)
            if (dsmpool_seg_create(p, 2u << 20, 0, &segs[got]) != 0) break;
        for (size_t k = 0; k < n && got < 2 * n; k++, got++)
            if (dsmpool_seg_create(p, 64u << 10, 0, &segs[got]) != 0) break;
        long r2 = proc_kb("/proc/self/status", "RssShmem");
        double tree_touched = tree_resident(p);
        for (size_t i = 0; i < got; i++) dsmpool_seg_detach(segs[i]);
        free(segs);
        dsmpool_trim(p, 0, NULL);
        long r3 = proc_kb("/proc/self/status", "RssShmem");
        double tree_trimmed = tree_resident(p);
        /* upkeep: a refill ahead of 2 MiB, a maintain step */
        double *v = calloc((size_t)reps, sizeof *v), ahead = -1, maint = -1;
        int k = 0;
        for (size_t made = 0; v && k < reps; k++) {
            if (dsmpool_trim(p, 0, NULL) != 0) break;
            double a0 = now_s();
            if (dsmpool_prefault_free(p, 2u << 20, &made) != 0 || made != 2u << 20) break;
            v[k] = (now_s() - a0) * 1e3;
        }
        if (v && k == reps) {
            qsort(v, (size_t)reps, sizeof *v, cmp_double);
            ahead = v[reps / 2];
        }
        for (k = 0; v && k < reps; k++) {
            unsigned next;
            double a0 = now_s();
            if (dsmpool_maintain(p, &next) != 0) break;
            v[k] = (now_s() - a0) * 1e3;
        }
        if (v && k == reps) {
            qsort(v, (size_t)reps, sizeof *v, cmp_double);
            maint = v[reps / 2];
        }
        free(v);
        printf("%8g %10.1f %12.1f %12.1f %10.1f %10.1f %10.1f %12.2f %14.1f %12.2f %10.1f %12.2f %9.2f %9.2f\n", g, ms,
               (r1 - r0) / 1024.0, cg0 >= 0 && cg1 >= 0 ? (cg1 - cg0) / 1048576.0 : -1.0, dir, seg, tree, tree_res,
               (r2 - r0) / 1024.0, tree_touched, (r3 - r0) / 1024.0, tree_trimmed, ahead, maint);
        fflush(stdout);
        dsmpool_destroy(p);
    }
    free(list);
    return 0;
}
