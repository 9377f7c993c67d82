/* A pool; a segment that a forked worker attaches by its handle; an area. */
#include <dsmpool.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
    dsmpool_config cfg;
    dsmpool_config_init(&cfg);            /* anonymous shared memory, prefaulted */
    cfg.size = 32u << 20;                 /* at least dsmpool_min_size(&cfg): 4 MiB here */
    dsmpool *pool;
    dsmpool_seg *seg, *mine;
    if (dsmpool_create(&cfg, &pool) != 0 || dsmpool_seg_create(pool, 1 << 20, 0, &seg) != 0) {
        fprintf(stderr, "dsmpool: %s\n", dsmpool_last_error());
        return 1;
    }
    dsmpool_handle h = dsmpool_seg_handle(seg); /* names the segment in every process */
    if (fork() == 0) {                          /* a worker: the pool stays valid */
        if (dsmpool_seg_attach(pool, h, &mine) == 0) snprintf(dsmpool_seg_address(mine), 64, "hello");
        _exit(dsmpool_detach(pool) != 0);       /* leaves; its attachments go with it */
    }
    int status;
    wait(&status);
    dsmpool_area *area;                         /* a heap of relocatable pointers */
    dsmpool_ptr p;
    int ok = dsmpool_area_create(pool, 0, &area) == 0 && dsmpool_area_alloc(area, 32 << 10, 0, &p) == 0;
    printf("worker wrote \"%s\"; a 32 KiB chunk at %p\n", (char *)dsmpool_seg_address(seg),
           ok ? dsmpool_area_addr(area, p) : NULL);
    return !ok || !WIFEXITED(status) || WEXITSTATUS(status) || dsmpool_detach(pool) != 0;
}
