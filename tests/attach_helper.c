/*
 * attach_helper -- an unrelated program (exec'ed by the tests) that attaches
 * a pool by name and checks what another process wrote.
 *
 *   attach_helper seg <pool name> <handle hex> <byte> <bytes>
 *       attach the segment; every byte of the first <bytes> must be <byte>;
 *       then write <byte>+1 over them and detach.
 *   attach_helper stats <pool name>
 *       attach, print "segments=<n> procs=<n>", detach.
 * Exit status: 0 success, 2 usage, 3 attach failed, 4 wrong data.
 */
#include <dsmpool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
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
