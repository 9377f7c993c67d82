/*
 * dsmpool-inspect -- look at a named pool from outside.
 *
 *   dsmpool-inspect NAME            statistics
 *   dsmpool-inspect NAME --check    statistics, then the consistency proof
 *   dsmpool-inspect NAME --recover  release what dead processes held first
 *   dsmpool-inspect --sweep         remove what pools that no live process
 *                                   holds left behind (dsmpool_sweep)
 *   dsmpool-inspect --destroy NAME [--force]
 *                                   remove a pool that no live process holds
 *                                   (--force: even one that a process holds)
 *
 * NAME is a POSIX name ("/x") or a System V key text. The tool attaches like
 * any process (it takes a slot while it runs); --sweep and --destroy do not
 * attach. Exit status: 0; 1 with the library's message; 2 for usage.
 */
#include <dsmpool.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *huge_name(dsmpool_huge h) {
    switch (h) {
    case DSMPOOL_HUGE_OFF: return "off";
    case DSMPOOL_HUGE_TRY: return "try";
    case DSMPOOL_HUGE_ON: return "on";
    case DSMPOOL_HUGE_TRANSPARENT: return "transparent";
    }
    return "?";
}

static int usage(const char *me) {
    fprintf(stderr, "usage: %s NAME [--check | --recover]\n"
                    "       %s --sweep\n"
                    "       %s --destroy NAME [--force]\n", me, me, me);
    return 2;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--sweep")) {
        size_t n = 0;
        int r = dsmpool_sweep(&n);
        if (r) {
            fprintf(stderr, "sweep: %s: %s\n", dsmpool_strerror(r), dsmpool_last_error());
            return 1;
        }
        printf("removed     %zu objects of pools that no live process holds\n", n);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "--destroy")) {
        bool force = argc == 4 && !strcmp(argv[3], "--force");
        if (argc > 4 || (argc == 4 && !force)) return usage(argv[0]);
        int r = dsmpool_remove(argv[2], force);
        if (r) {
            fprintf(stderr, "%s: %s: %s\n", argv[2], dsmpool_strerror(r), dsmpool_last_error());
            return 1;
        }
        printf("removed     %s%s\n", argv[2], force ? " (forced)" : "");
        return 0;
    }
    if (argc < 2 || argc > 3 || argv[1][0] == '-' ||
        (argc == 3 && strcmp(argv[2], "--check") && strcmp(argv[2], "--recover")))
        return usage(argv[0]);
    dsmpool *p;
    int r = dsmpool_attach(argv[1], &p);
    if (r) {
        fprintf(stderr, "%s: %s: %s\n", argv[1], dsmpool_strerror(r), dsmpool_last_error());
        return 1;
    }
    if (argc == 3 && !strcmp(argv[2], "--recover") && (r = dsmpool_recover(p)) != 0) {
        fprintf(stderr, "recover: %s\n", dsmpool_last_error());
        dsmpool_detach(p);
        return 1;
    }
    dsmpool_stats st;
    dsmpool_get_stats(p, &st);
    printf("region      %zu bytes, %s backing, data %zu bytes\n", st.region_size,
           dsmpool_backing_name(st.backing), st.data_size);
    printf("pages       %zu KiB (huge pages asked: %s; hugetlb: %s%s; THP advised: %s); "
           "huge-mapped here %zu bytes\n", st.page_size >> 10, huge_name(st.huge_requested),
           st.huge_pages ? "yes" : "no", st.huge_fallback ? ", fell back" : "",
           st.thp_advised ? "yes" : "no", st.huge_mapped_bytes);
    printf("prefaulted  %zu bytes at creation\n", st.prefaulted_bytes);
    for (unsigned i = 0; i < st.nsubpools; i++)
        printf("sub-pool %u  node %d: %zu bytes, %zu free, largest free block %zu\n", i,
               st.subpool[i].node, st.subpool[i].size, st.subpool[i].free, st.subpool[i].largest_free);
    printf("segments    %zu live of %zu (%zu from the OS; %llu OS segments created so far)\n",
           st.segments_live, st.segments_capacity, st.fallback_segments_live,
           (unsigned long long)st.fallback_segments_created);
    printf("processes   %u attached of %u (this one included); %llu recovered so far\n",
           st.procs_attached, st.procs_capacity, (unsigned long long)st.procs_recovered);
    printf("recovery    %u waiting for a live process, %llu times deferred, leak sweep %s; "
           "%llu lost area chunks given back\n", st.procs_recovering, (unsigned long long)st.recoveries_deferred,
           st.sweep_due ? "due" : "not due", (unsigned long long)st.lost_chunks_reclaimed);
    printf("pressure    %llu times the pool ran short and asked caches to give back\n",
           (unsigned long long)st.cache_trims);
    int rc = 0;
    if (argc == 3 && !strcmp(argv[2], "--check")) {
        r = dsmpool_check(p);
        printf("check       %s%s%s\n", r ? dsmpool_strerror(r) : "ok", r ? ": " : "",
               r ? dsmpool_last_error() : "");
        rc = r ? 1 : 0;
    }
    dsmpool_detach(p);
    return rc;
}
