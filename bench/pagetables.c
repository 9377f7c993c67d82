/*
 * pagetables -- what it costs P processes to attach a pool and touch all of
 * it, as thousands of database backends would.
 *
 * For each page configuration -- 4 KiB pages, THP on shmem, 2 MiB hugetlb,
 * and 2 MiB hugetlb with the mapping aligned to 1 GiB (Linux then shares
 * the page-table pages of shared hugetlb mappings between processes, the
 * PMD sharing of mm/hugetlb.c) -- the parent creates a memfd pool, keeps only
 * its file descriptor, and forks P children; each attaches through the fd
 * (its own mapping, as an unrelated process would get), reads one byte of
 * every 4 KiB, reports its VmPTE and minor faults, and stays alive until all
 * are done. Reported: the time until all have attached and touched, the sum
 * of VmPTE, the growth of PageTables in /proc/meminfo while all are alive,
 * and the total minor faults. A table, CSV and a PNG (gnuplot).
 *
 * Options: --procs 16,64 (default 64; up to 4096 and more), --size MiB
 * (default 1024), --configs 4k,thp,2m,2m-1g, --out DIR (bench/results).
 * THP needs /sys/kernel/mm/transparent_hugepage/shmem_enabled = advise (or
 * always); hugetlb needs reserved 2 MiB pages (tools/bench.sh does both).
 */
#include <dsmpool.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define MIB (1ull << 20)

typedef struct config {
    const char *id, *name;
    dsmpool_huge huge;
    size_t align;
} config;

static const config configs[] = {
    {"4k", "4 KiB pages", DSMPOOL_HUGE_OFF, 0},
    {"thp", "THP (shmem)", DSMPOOL_HUGE_TRANSPARENT, 0},
    {"2m", "2 MiB hugetlb", DSMPOOL_HUGE_ON, 0},
    {"2m-1g", "2 MiB hugetlb 1 GiB-aligned", DSMPOOL_HUGE_ON, 1ull << 30},
};
#define NCONFIGS (sizeof configs / sizeof *configs)

typedef struct sync {
    _Atomic int done, go, failed;
    _Atomic long pte_kb, minflt;
} sync_t;

/* A "Field:   123 kB" line of a /proc file, in kB; -1 if missing. */
static long proc_kb(const char *path, const char *field) {
    FILE *f = fopen(path, "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') v = atol(line + n + 1);
    if (f) fclose(f);
    return v;
}

static void child(int fd, sync_t *sy) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long f0 = ru.ru_minflt;
    dsmpool *p;
    /* attach through the fd: this process's own mapping; then map every page
     * of it (dsmpool_prefault: what a backend does to keep faults off its
     * hot path) */
    if (dsmpool_attach_fd(fd, &p) != 0 || dsmpool_prefault(p) != 0) {
        atomic_store(&sy->failed, 1);
        atomic_fetch_add(&sy->done, 1);
        _exit(1);
    }
    getrusage(RUSAGE_SELF, &ru);
    atomic_fetch_add(&sy->minflt, ru.ru_minflt - f0);
    atomic_fetch_add(&sy->pte_kb, proc_kb("/proc/self/status", "VmPTE"));
    atomic_fetch_add(&sy->done, 1);
    while (!atomic_load(&sy->go)) usleep(2000);
    dsmpool_detach(p);
    _exit(0);
}

typedef struct result {
    const config *c;
    int procs;
    double seconds;
    long pte_kb, pagetables_kb, minflt;
    char skip[300];
} result;

static int run(const config *c, int procs, size_t size, result *r) {
    memset(r, 0, sizeof *r);
    r->c = c;
    r->procs = procs;
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);
    cfg.size = size;
    cfg.backing = DSMPOOL_BACKING_MEMFD;
    cfg.huge_pages = c->huge;
    cfg.map_align = c->align;
    cfg.max_procs = (unsigned)procs + 16;
    dsmpool *pool;
    if (dsmpool_create(&cfg, &pool) != 0) {
        snprintf(r->skip, sizeof r->skip, "%s", dsmpool_last_error());
        return -1;
    }
    dsmpool_stats st;
    dsmpool_get_stats(pool, &st);
    if (c->huge == DSMPOOL_HUGE_TRANSPARENT && st.huge_mapped_bytes < st.region_size / 2) {
        snprintf(r->skip, sizeof r->skip, "the kernel gave no THP for shmem (set "
                 "/sys/kernel/mm/transparent_hugepage/shmem_enabled to advise)");
        dsmpool_destroy(pool);
        return -1;
    }
    int fd = dup(dsmpool_fd(pool));
    dsmpool_detach(pool); /* the parent keeps the fd only: no mapping to inherit */
    sync_t *sy = mmap(NULL, sizeof *sy, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    long pt0 = proc_kb("/proc/meminfo", "PageTables");
    double t0 = now_s();
    pid_t *pids = calloc((size_t)procs, sizeof *pids);
    int started = 0;
    for (int i = 0; i < procs; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) child(fd, sy);
        if (pid < 0) {
            snprintf(r->skip, sizeof r->skip, "fork failed after %d processes: %s", i, strerror(errno));
            break;
        }
        pids[started++] = pid;
    }
    while (atomic_load(&sy->done) < started) usleep(1000);
    r->seconds = now_s() - t0;
    r->pagetables_kb = proc_kb("/proc/meminfo", "PageTables") - pt0;
    r->pte_kb = atomic_load(&sy->pte_kb);
    r->minflt = atomic_load(&sy->minflt);
    if (atomic_load(&sy->failed) && !r->skip[0]) snprintf(r->skip, sizeof r->skip, "a child could not attach");
    atomic_store(&sy->go, 1);
    for (int i = 0; i < started; i++) waitpid(pids[i], NULL, 0);
    free(pids);
    munmap(sy, sizeof *sy);
    if (dsmpool_attach_fd(fd, &pool) == 0) dsmpool_destroy(pool);
    close(fd);
    return r->skip[0] ? -1 : 0;
}

int main(int argc, char **argv) {
    int plist[32], np = 0;
    size_t size_mib = 1024;
    const char *clist = NULL, *out = "bench/results";
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc;
        if (!strcmp(argv[i], "--procs") && more) {
            const char *s = argv[++i];
            while (*s && np < 32) {
                plist[np++] = atoi(s);
                while (*s && *s != ',') s++;
                if (*s) s++;
            }
        } else if (!strcmp(argv[i], "--size") && more) size_mib = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--configs") && more) clist = argv[++i];
        else if (!strcmp(argv[i], "--out") && more) out = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--procs 16,64] [--size MiB] [--configs 4k,thp,2m,2m-1g] [--out DIR]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!np) plist[np++] = 64;
    for (int i = 0; i < np; i++)
        if (plist[i] < 1 || plist[i] > 100000) {
            fprintf(stderr, "pagetables: --procs between 1 and 100000\n");
            return 2;
        }
    size_t size = size_mib * MIB;
    result *res = calloc(NCONFIGS * (size_t)np, sizeof *res);
    int n = 0;
    for (size_t c = 0; c < NCONFIGS; c++) {
        if (clist) {
            size_t l = strlen(configs[c].id);
            const char *p = clist;
            bool found = false;
            while ((p = strstr(p, configs[c].id))) {
                if ((p == clist || p[-1] == ',') && (p[l] == ',' || !p[l])) found = true;
                p += l;
            }
            if (!found) continue;
        }
        for (int i = 0; i < np; i++) {
            fprintf(stderr, isatty(2) ? "  %-30s P=%-5d\r" : "  %s P=%d\n", configs[c].name, plist[i]);
            run(&configs[c], plist[i], size, &res[n++]);
        }
    }
    if (isatty(2)) fprintf(stderr, "%79s\r", "");
    printf("P processes attach a %zu MiB pool through its fd and map all of it\n", size_mib);
    printf("%-30s %6s %10s %14s %16s %12s\n", "pages", "P", "seconds", "sum VmPTE MiB",
           "PageTables MiB", "minor faults");
    for (int i = 0; i < n; i++) {
        result *r = &res[i];
        if (r->skip[0]) {
            printf("%-30s %6d  skipped: %s\n", r->c->name, r->procs, r->skip);
            continue;
        }
        printf("%-30s %6d %10.3f %14.1f %16.1f %12ld\n", r->c->name, r->procs, r->seconds,
               (double)r->pte_kb / 1024, (double)r->pagetables_kb / 1024, r->minflt);
    }
    mkdir(out, 0755);
    char path[4096];
    snprintf(path, sizeof path, "%s/pagetables.csv", out);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f, "pages,procs,size_mib,seconds,vmpte_kb,pagetables_kb,minflt\n");
    for (int i = 0; i < n; i++)
        if (!res[i].skip[0])
            fprintf(f, "%s,%d,%zu,%.4f,%ld,%ld,%ld\n", res[i].c->name, res[i].procs, size_mib,
                    res[i].seconds, res[i].pte_kb, res[i].pagetables_kb, res[i].minflt);
    fclose(f);
    printf("\nCSV: %s\n", path);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "gnuplot -e \"dir='%s'; size=%zu\" bench/plot-pagetables.gp 2>/dev/null", out,
             size_mib);
    if (access("bench/plot-pagetables.gp", R_OK) == 0 && system(cmd) == 0)
        printf("plot: %s/pagetables.png\n", out);
    else
        printf("plot: not drawn (needs gnuplot and bench/plot-pagetables.gp, run from the repository)\n");
    return 0;
}
