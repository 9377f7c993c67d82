/*
 * churn -- a program whose allocator calls mmap and munmap, run with the
 * preload library and a preloaded jemalloc in either order
 * (tests/preload/jemalloc.sh): jemalloc maps its first memory before any
 * constructor has run, and the preload library's constructor calls dlsym,
 * which allocates; neither may deadlock or fail the other.
 *
 * Checks that malloc is jemalloc's and mmap the preload library's (else
 * the run proves nothing), then: threads that allocate and free large
 * blocks (mapped and unmapped by jemalloc), a fork whose child allocates,
 * and a file in /dev/shm (unique name, removed) grown by posix_fallocate,
 * mapped, written and read back.
 * Usage: churn; exit 0 on success, else 1 with a line saying what failed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NTHREADS 4
#define ROUNDS 300

static int from(const char *sym, const char *lib) {
    Dl_info di;
    void *p = dlsym(RTLD_DEFAULT, sym);
    const char *f = p && dladdr(p, &di) && di.dli_fname ? di.dli_fname : "nowhere";
    if (strstr(f, lib)) return 0;
    printf("churn: %s comes from %s, not %s: the run would prove nothing\n", sym, f, lib);
    return 1;
}

/* large blocks of varied sizes, each written at both ends */
static void *churn(void *arg) {
    uintptr_t seed = (uintptr_t)arg * 2654435761u + 1;
    void *held[8] = {NULL};
    for (int i = 0; i < ROUNDS; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        size_t n = ((size_t)1 << 20) + (size_t)(seed >> 33) % ((size_t)8 << 20);
        int k = i % 8;
        free(held[k]);
        char *p = malloc(n);
        if (!p) return (void *)1;
        p[0] = (char)i;
        p[n - 1] = (char)i;
        held[k] = p;
    }
    for (int k = 0; k < 8; k++) free(held[k]);
    return NULL;
}

static int shm_file(void) {
    char name[96], path[128];
    const off_t size = (off_t)4 << 20;
    const char *tag = getenv("CHURN_SHM_TAG"); /* the script removes what a killed run left */
    snprintf(name, sizeof name, "/dsmpool-preload-churn.%s.%ld", tag ? tag : "x", (long)getpid());
    snprintf(path, sizeof path, "/dev/shm%s", name);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        printf("churn: shm_open %s: %s\n", name, strerror(errno));
        return 1;
    }
    int r = posix_fallocate(fd, 0, size);
    struct stat st;
    char *p = r == 0 ? mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    int bad = r != 0 || p == MAP_FAILED || fstat(fd, &st) != 0 || st.st_blocks == 0;
    if (!bad) {
        p[size - 1] = 'x';
        char c = 0;
        bad = pread(fd, &c, 1, size - 1) != 1 || c != 'x';
    }
    if (p != MAP_FAILED) munmap(p, (size_t)size);
    close(fd);
    shm_unlink(name);
    if (bad) printf("churn: %s: posix_fallocate gave %d, then the mapping or the file went wrong\n", path, r);
    return bad;
}

int main(void) {
    if (from("malloc", "libjemalloc") | from("mmap", "libdsmpool-preload")) return 1;
    pthread_t t[NTHREADS];
    int fails = 0;
    for (intptr_t i = 0; i < NTHREADS; i++)
        if (pthread_create(&t[i], NULL, churn, (void *)i) != 0) {
            printf("churn: pthread_create failed\n");
            return 1;
        }
    fails += shm_file();
    pid_t pid = fork();
    if (pid == 0) _exit(churn((void *)99) != NULL || shm_file() != 0);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("churn: the forked child failed (status %#x)\n", status);
        fails++;
    }
    for (int i = 0; i < NTHREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        if (r) {
            printf("churn: thread %d: malloc failed\n", i);
            fails++;
        }
    }
    if (!fails) printf("churn: %d threads of %d large blocks, a fork, a /dev/shm file: done\n", NTHREADS, ROUNDS);
    return fails != 0;
}
