/*
 * trimcost -- what a release costs while many processes map the range
 * (issue 27): the kernel unmaps released pages in every process that maps
 * them, so dsmpool_trim's time grows with the mappers.
 *
 * A pool (ANON, base pages, or --huge for 2 MiB hugetlb pages) is made
 * and prefaulted; N forked processes each map its data into their own page
 * tables (MADV_POPULATE_READ) and wait; then dsmpool_trim gives back
 * --gib GiB (the whole free data) and dsmpool_prefault_free makes it
 * resident again (in this process only: the others fault on touch), each
 * timed, --reps times with the mappers re-populated before each. Also
 * printed: the page-table bytes of one mapper (VmPTE) before the trim and
 * after a trim and refill.
 *
 * Options: --procs N,N,... (default 1,64), --gib G (default 1), --reps R
 * (default 3), --huge. One line per N, and "csv,..." lines.
 */
#include <dsmpool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "dp_internal.h"

/* A process's page-table bytes (VmPTE), kB. */
static long pid_pte_kb(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    return proc_kb(path, "VmPTE");
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/* A mapper: populate its page tables when told (a byte on cmd), answer a
 * byte on done; exit at EOF. */
static void mapper(dsmpool *p, int cmd, int done) {
    char c;
    while (read(cmd, &c, 1) == 1) {
        madvise(p->base + p->geo.data_off, p->geo.data_size, MADV_POPULATE_READ);
        if (write(done, "k", 1) != 1) break;
    }
    _exit(0);
}

int main(int argc, char **argv) {
    const char *procs = "1,64";
    double gib = 1;
    int reps = 3;
    bool huge = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--procs") && i + 1 < argc) procs = argv[++i];
        else if (!strcmp(argv[i], "--gib") && i + 1 < argc) gib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--huge")) huge = true;
        else {
            fprintf(stderr, "usage: %s [--procs N,N,...] [--gib G] [--reps R] [--huge]\n", argv[0]);
            return 2;
        }
    }
    printf("trim cost: %.1f GiB of %s pages released and refilled, N processes mapping it (median of %d)\n", gib,
           huge ? "2 MiB hugetlb" : "4 KiB shmem", reps);
    printf("%8s %12s %12s %14s %14s %14s\n", "procs", "trim ms", "refill ms", "trim GiB/s", "VmPTE kB", "VmPTE after");
    for (const char *s = procs; *s;) {
        unsigned n = (unsigned)strtoul(s, NULL, 10);
        s = strchr(s, ',') ? strchr(s, ',') + 1 : s + strlen(s);
        dsmpool_config cfg;
        dsmpool_config_init(&cfg);
        cfg.size = (size_t)(gib * (1ull << 30)) + (64ull << 20);
        cfg.huge_pages = huge ? DSMPOOL_HUGE_ON : DSMPOOL_HUGE_OFF;
        cfg.max_procs = n + 8;
        dsmpool *p;
        if (dsmpool_create(&cfg, &p) != 0) {
            fprintf(stderr, "create: %s\n", dsmpool_last_error());
            return 1;
        }
        int cmd[2], done[2];
        if (pipe(cmd) || pipe(done)) return 1;
        pid_t *kids = calloc(n, sizeof *kids);
        for (unsigned k = 0; k < n; k++)
            if ((kids[k] = fork()) == 0) {
                close(cmd[1]);
                close(done[0]);
                mapper(p, cmd[0], done[1]);
            }
        close(cmd[0]);
        close(done[1]);
        double *tt = calloc((size_t)reps, sizeof *tt), *tr = calloc((size_t)reps, sizeof *tr);
        long pte0 = 0, pte1 = 0;
        size_t rel = 0;
        for (int r = 0; r < reps; r++) {
            for (unsigned k = 0; k < n; k++)
                if (write(cmd[1], "g", 1) != 1) return 1;
            char c;
            for (unsigned k = 0; k < n; k++)
                if (read(done[0], &c, 1) != 1) return 1;
            if (r == 0 && n) pte0 = pid_pte_kb(kids[0]);
            double t0 = now_s();
            if (dsmpool_trim(p, 0, &rel) != 0) {
                fprintf(stderr, "trim: %s\n", dsmpool_last_error());
                return 1;
            }
            double t1 = now_s();
            size_t got;
            if (dsmpool_prefault_free(p, SIZE_MAX, &got) != 0) {
                fprintf(stderr, "prefault_free: %s\n", dsmpool_last_error());
                return 1;
            }
            double t2 = now_s();
            if (r == 0 && n) pte1 = pid_pte_kb(kids[0]);
            tt[r] = (t1 - t0) * 1e3;
            tr[r] = (t2 - t1) * 1e3;
        }
        close(cmd[1]);
        for (unsigned k = 0; k < n; k++) waitpid(kids[k], NULL, 0);
        close(done[0]);
        double mt = median(tt, reps), mr = median(tr, reps);
        printf("%8u %12.1f %12.1f %14.2f %14ld %14ld\n", n, mt, mr, rel / (mt / 1e3) / (1ull << 30), pte0, pte1);
        printf("csv,trimcost,%s,%u,%zu,%.3f,%.3f,%ld,%ld\n", huge ? "huge" : "4k", n, rel, mt, mr, pte0, pte1);
        free(tt);
        free(tr);
        free(kids);
        dsmpool_destroy(p);
    }
    return 0;
}
