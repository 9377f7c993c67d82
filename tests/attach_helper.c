/*
 * attach_helper -- an unrelated program (exec'ed by the tests) that attaches
 * a pool by name and checks what another process wrote.
 *
 *   attach_helper seg <pool name> <handle hex> <byte> <bytes>
 *       attach the segment; every byte of the first <bytes> must be <byte>;
 *       then write <byte>+1 over them and detach.
 *   attach_helper area <pool name> <area handle hex> <root ptr hex> <n>
 *       attach the area; follow a list of n nodes {next ptr, value} from
 *       root (values must be 1..n); print "base=<addr of root> sum=<sum>";
 *       then allocate one node with value 4242 and print "new=<ptr>".
 *   attach_helper stats <pool name>
 *       attach, print "segments=<n> procs=<n>", detach.
 *   attach_helper sweep
 *       dsmpool_sweep() from a process that never attached: print
 *       "removed=<n>".
 * Exit status: 0 success, 2 usage, 3 attach failed, 4 wrong data.
 */
#include <dsmpool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "sweep")) {
        size_t n = 0;
        int r = dsmpool_sweep(&n);
        printf("removed=%zu\n", n);
        return r ? 3 : 0;
    }
    if (argc < 3) return 2;
    dsmpool *pool;
    int r = dsmpool_attach(argv[2], &pool);
    if (r) {
        fprintf(stderr, "attach %s: %s (%s)\n", argv[2], dsmpool_strerror(r), dsmpool_last_error());
        return 3;
    }
    int rc = 0;
    if (!strcmp(argv[1], "seg") && argc == 6) {
        dsmpool_handle h = strtoull(argv[3], NULL, 16);
        int byte = atoi(argv[4]);
        size_t n = strtoull(argv[5], NULL, 0);
        dsmpool_seg *seg;
        if ((r = dsmpool_seg_attach(pool, h, &seg)) != 0) {
            fprintf(stderr, "seg_attach: %s (%s)\n", dsmpool_strerror(r), dsmpool_last_error());
            rc = 3;
        } else {
            unsigned char *p = dsmpool_seg_address(seg);
            for (size_t i = 0; i < n && !rc; i++)
                if (p[i] != (unsigned char)byte) rc = 4;
            memset(p, byte + 1, n);
            dsmpool_seg_detach(seg);
        }
    } else if (!strcmp(argv[1], "area") && argc == 6) {
        dsmpool_area *area;
        if ((r = dsmpool_area_attach(pool, strtoull(argv[3], NULL, 16), &area)) != 0) {
            fprintf(stderr, "area_attach: %s (%s)\n", dsmpool_strerror(r), dsmpool_last_error());
            rc = 3;
        } else {
            dsmpool_ptr p = strtoull(argv[4], NULL, 16);
            unsigned long n = strtoul(argv[5], NULL, 0), sum = 0, i = 0;
            printf("base=%p\n", dsmpool_area_addr(area, p));
            for (; p && i < n; i++) {
                unsigned long *node = dsmpool_area_addr(area, p);
                if (!node || node[1] != n - i) {
                    rc = 4;
                    break;
                }
                sum += node[1];
                p = node[0];
            }
            if (i != n || p) rc = 4;
            printf("sum=%lu\n", sum);
            dsmpool_ptr q;
            if (dsmpool_area_alloc(area, 16, 0, &q) == 0) {
                ((unsigned long *)dsmpool_area_addr(area, q))[1] = 4242;
                printf("new=%" DSMPOOL_PRIptr "\n", q);
            } else {
                rc = 5;
            }
            dsmpool_area_detach(area);
        }
    } else if (!strcmp(argv[1], "stats")) {
        dsmpool_stats st;
        dsmpool_get_stats(pool, &st);
        printf("segments=%zu procs=%u\n", st.segments_live, st.procs_attached);
    } else {
        rc = 2;
    }
    dsmpool_detach(pool);
    return rc;
}
