/*
 * loadnote.c -- a postmaster's first DSM creation (16+'s sequence:
 * shm_open O_CREAT|O_EXCL, posix_fallocate) under the preload library, then
 * the library's note printed: why there is no pool when libdsmpool cannot
 * be loaded. Run by loadfail.sh with a libdsmpool.so.0 whose dependency is
 * missing (as libnuma.so.1 is in a container image without it): the note
 * must name what is missing, not only libdsmpool.so.0.
 *
 * PostgreSQL's globals are exported (export_dynamic) for the library to read.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dsmpool_preload.h"

bool IsPostmasterEnvironment = true;
bool IsUnderPostmaster = false;
bool IsBinaryUpgrade = false;
int MaxBackends = 10;

int main(void) {
    void *s = dlsym(RTLD_DEFAULT, "dsmpool_preload_get_state");
    if (!s) {
        fprintf(stderr, "loadnote: the preload library is not loaded (LD_PRELOAD)\n");
        return 2;
    }
    dsmpool_preload_state *(*get_state)(void);
    memcpy(&get_state, &s, sizeof s);
    char name[64];
    snprintf(name, sizeof name, "/PostgreSQL.%u", (unsigned)getpid() * 2u);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        perror("loadnote: shm_open");
        return 2;
    }
    int rc = posix_fallocate(fd, 0, 65536); /* the control segment: makes the pool, or notes why not */
    close(fd);
    shm_unlink(name);
    if (rc != 0) {
        fprintf(stderr, "loadnote: posix_fallocate: %s\n", strerror(rc));
        return 2;
    }
    dsmpool_preload_state *st = get_state();
    printf("%s\n", st ? st->note : "(no state)");
    return 0;
}
