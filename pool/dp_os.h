/*
 * dp_os.h -- the one contract between dsmpool and the operating system.
 *
 * Every function: arguments page-aligned where they are addresses or
 * lengths of mappings; returns 0 (or a non-negative value where stated) or a
 * negative errno; retries EINTR; backs out its own partial work on failure;
 * leaves errno as it found it. Nothing outside pool/os_*.c and numa/ makes a
 * system call or tests for the OS.
 */
#ifndef DP_OS_H
#define DP_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What the machine offers (filled once, cached). */
typedef struct dp_caps {
    size_t page_size;         /* base page */
    size_t huge_default;      /* Hugepagesize from /proc/meminfo, 0 if none */
    bool huge_2m, huge_1g;    /* hugetlb pools exist for these sizes */
    bool memfd;               /* memfd_create works */
    bool populate_write;      /* MADV_POPULATE_WRITE known to the kernel */
    unsigned ncpus_online;
    unsigned ncpus_conf;
    char thp_shmem[32];       /* the [selected] word of shmem_enabled, "" if none */
} dp_caps;

const dp_caps *dp_os_caps(void);

/* hugetlb pages of size sz: free and total in the kernel's pool. */
int dp_os_huge_counts(size_t sz, uint64_t *free_pages, uint64_t *total_pages);

/* A hugetlbfs mount whose pagesize is sz (absolute path, no trailing '/'). */
int dp_os_hugetlbfs_dir(size_t sz, char *buf, size_t n);

/* Reserve len bytes of address space aligned to align (PROT_NONE). */
int dp_os_reserve_va(size_t len, size_t align, void **addr);
int dp_os_unmap(void *addr, size_t len);

/* Map at a fixed address inside a reservation. huge_sz 0 = base pages. */
int dp_os_map_anon_shared(void *addr, size_t len, size_t huge_sz);
int dp_os_map_fd(void *addr, size_t len, int fd);

/* Backing objects. Names are as the user gave them. */
int dp_os_memfd(const char *tag, size_t huge_sz);              /* returns fd */
int dp_os_shm_open(const char *name, bool create, unsigned mode); /* returns fd */
int dp_os_shm_unlink(const char *name);
int dp_os_file_open(const char *path, bool create, unsigned mode); /* returns fd */
int dp_os_file_unlink(const char *path);
int dp_os_truncate(int fd, size_t len);
int dp_os_fallocate(int fd, size_t len);
int dp_os_fd_size(int fd, size_t *len);
int dp_os_close(int fd);
int dp_os_dup(int fd);

/* System V: key from text (numeric, or a hash of the text). */
int dp_os_sysv_key(const char *name, int32_t *key);
int dp_os_sysv_get(int32_t key, size_t len, bool create, unsigned mode, size_t huge_sz); /* id */
int dp_os_sysv_size(int shmid, size_t *len);
int dp_os_sysv_attach(int shmid, void *addr);  /* at addr, inside a reservation */
int dp_os_sysv_detach(void *addr);
int dp_os_sysv_remove(int shmid);

/* Memory advice and population. */
int dp_os_madvise_hugepage(void *addr, size_t len);
int dp_os_populate(void *addr, size_t len, unsigned threads); /* POPULATE_WRITE or touch */

/* Bytes of [addr, addr+len) this process maps with huge page-table entries
 * (THP PMDs or hugetlb pages), from /proc/self/smaps. */
int dp_os_smaps_huge(const void *addr, size_t len, size_t *bytes);

/* Processes. start is field 22 of /proc/<pid>/stat (clock ticks since boot);
 * zombie (may be NULL) says whether the process has exited but is not reaped.
 * -ESRCH when there is no such process. */
int dp_os_proc_start(pid_t pid, uint64_t *start, bool *zombie);
bool dp_os_pid_alive(pid_t pid);
uint64_t dp_os_random64(void);
uint64_t dp_os_now_ns(void);

#endif /* DP_OS_H */
