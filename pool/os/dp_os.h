/*
 * dp_os.h -- the one contract between dsmpool and the operating system.
 *
 * Every function: arguments page-aligned where they are addresses or
 * lengths of mappings; returns 0 (or a non-negative value where stated) or a
 * negative errno; retries EINTR; backs out its own partial work on failure;
 * leaves errno as it found it. Nothing outside pool/os/ makes a
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
    uint64_t ram_bytes;       /* physical memory (_SC_PHYS_PAGES), 0 if unknown */
    unsigned ncpus_online;
    unsigned ncpus_conf;
    char thp_shmem[32];       /* the [selected] word of shmem_enabled, "" if none */
} dp_caps;

const dp_caps *dp_os_caps(void);

/* hugetlb pages of size sz: free and total in the kernel's pool. */
int dp_os_huge_counts(size_t sz, uint64_t *free_pages, uint64_t *total_pages);
/* The kernel's surplus pages of size sz now and the most it may have
 * (nr_overcommit_hugepages): a freed page goes back to the system while
 * there are surplus pages, else it stays free in the hugetlb pool. */
int dp_os_huge_surplus(size_t sz, uint64_t *surplus, uint64_t *overcommit);
/* Pages a new mapping can still get: free less reserved, plus the surplus
 * the overcommit setting still allows. */
int dp_os_huge_avail(size_t sz, uint64_t *avail);

/* A hugetlbfs mount whose pagesize is sz (absolute path, no trailing '/'). */
int dp_os_hugetlbfs_dir(size_t sz, char *buf, size_t n);

/* Reserve len bytes of address space aligned to align (PROT_NONE). */
int dp_os_reserve_va(size_t len, size_t align, void **addr);
int dp_os_unmap(void *addr, size_t len);

/* Map at a fixed address inside a reservation. huge_sz 0 = base pages.
 * noreserve: MAP_NORESERVE -- no commit charge, and for hugetlb pages no
 * reservation: a page is had or not when it is first populated (an
 * elastic pool, which populates with dp_os_populate_strict only). */
int dp_os_map_anon_shared(void *addr, size_t len, size_t huge_sz, bool noreserve);
/* Shared memory inherited over fork like an anonymous mapping, from an
 * unnamed shmem file (a memfd, closed once mapped): charged to the commit
 * page by page as it is populated, so a reservation works under
 * vm.overcommit_memory = 2 (where MAP_NORESERVE is ignored). */
int dp_os_map_anon_file(void *addr, size_t len);
int dp_os_map_fd(void *addr, size_t len, int fd, bool noreserve);

/* Backing objects. Names are as the user gave them. */
int dp_os_memfd(const char *tag, size_t huge_sz);              /* returns fd */
int dp_os_shm_open(const char *name, bool create, unsigned mode); /* returns fd */
int dp_os_shm_unlink(const char *name);
int dp_os_shm_open_any(const char *name, unsigned mode); /* create if missing; returns fd */
/* The pool's /dev/shm as a directory descriptor (O_PATH, close-on-exec) and
 * its identity (st_dev, st_ino: another tmpfs mounted there is another
 * directory); objects in it by shm name ("/x"), relative to that
 * descriptor, so a fork()ed child in another mount namespace reaches them. */
int dp_os_shm_dir(int *fd, uint64_t *dev, uint64_t *ino);
int dp_os_shm_openat(int dir, const char *name, bool create, unsigned mode); /* returns fd */
int dp_os_shm_unlinkat(int dir, const char *name);
int dp_os_file_open_ro(const char *path);                /* read-only, regular files only; returns fd */
int dp_os_file_open(const char *path, bool create, unsigned mode); /* returns fd */
int dp_os_file_unlink(const char *path);
bool dp_os_path_exists(const char *path); /* anything by that name (access F_OK) */
int dp_os_truncate(int fd, size_t len);
int dp_os_file_link(const char *from, const char *to); /* a second name; -EEXIST if taken */
int dp_os_fallocate(int fd, size_t len);
int dp_os_fallocate_range(int fd, uint64_t off, uint64_t len); /* allocate [off, off+len) */
int dp_os_fd_size(int fd, size_t *len);
int dp_os_close(int fd);
int dp_os_dup(int fd);

/* System V: key from text (numeric, or a hash of the text). */
int dp_os_sysv_key(const char *name, int32_t *key);
/* The id of the segment of key, or -errno (-ENOENT: none). */
int dp_os_sysv_find(int32_t key);
/* A new segment of key (-EEXIST if there is one): its id; huge_sz: in huge
 * pages of that size; noreserve: SHM_NORESERVE, as MAP_NORESERVE above */
int dp_os_sysv_make(int32_t key, size_t len, unsigned mode, size_t huge_sz, bool noreserve);
int dp_os_sysv_size(int shmid, size_t *len);
int dp_os_sysv_attach(int shmid, void *addr);  /* at addr, inside a reservation */
int dp_os_sysv_detach(void *addr);
int dp_os_sysv_remove(int shmid);

/* Memory advice and population. */
int dp_os_madvise_hugepage(void *addr, size_t len, bool huge); /* MADV_HUGEPAGE, or MADV_NOHUGEPAGE */
int dp_os_populate(void *addr, size_t len, unsigned threads); /* POPULATE_WRITE or touch */
/* MADV_POPULATE_WRITE and nothing else: never a touch, so a page that cannot
 * be had is an error here (-ENOMEM, -EFAULT where a touch would raise
 * SIGBUS: a hugetlb page under MAP_NORESERVE, a full tmpfs) and never a
 * signal later. Content is not changed (pages already there stay as they
 * are), so it is safe over memory others use. -EOPNOTSUPP: the kernel has
 * no MADV_POPULATE_WRITE (before 5.14). NB: in a memory cgroup at its
 * limit the kernel's charge invokes the cgroup's OOM killer here as for a
 * touch (measured on 6.18, cgroup v1): callers hold the size against the
 * cgroup's room first (ledger: resident.c [room first]). */
int dp_os_populate_strict(void *addr, size_t len);
/* Give the pages of [addr, addr+len) back to the system, in every process
 * that maps them (the kernel unmaps them everywhere): fd >= 0, a punched
 * hole in the file at off (FALLOC_FL_PUNCH_HOLE | KEEP_SIZE: memfd, POSIX
 * shm, hugetlbfs); otherwise MADV_REMOVE of a shared mapping (anonymous
 * shared memory and System V are shmem or hugetlbfs files too). The range
 * reads as zeroes afterwards. Released hugetlb pages go back to the
 * hugetlb pool; the kernel frees surplus pages (nr_overcommit_hugepages)
 * to the system, persistent ones stay free in the pool. */
int dp_os_release(void *addr, size_t len, int fd, uint64_t off);

/* Bytes of [addr, addr+len) this process maps with huge page-table entries
 * (THP PMDs or hugetlb pages), from /proc/self/smaps. */
int dp_os_smaps_huge(const void *addr, size_t len, size_t *bytes);

/* Liveness locks (ledger, live.c). An OFD write lock on byte n of a file:
 * owned by the open file description, dropped by the kernel when the last
 * descriptor of that description closes (process death, exec: O_CLOEXEC).
 * trylock: 0 taken (or already ours), -EAGAIN held by another description.
 * test: 1 held by another description, 0 free. test_range: 1 if any byte of
 * [n, n+len) is held by another description. */
int dp_os_ofd_trylock(int fd, uint64_t n);
int dp_os_ofd_unlock(int fd, uint64_t n);
int dp_os_ofd_test(int fd, uint64_t n);
int dp_os_ofd_test_range(int fd, uint64_t n, uint64_t len);
/* A shared (read) lock on byte n: tryread does not wait; waitread retries
 * for up to ms milliseconds (-EAGAIN then). Shared locks of different
 * descriptions do not conflict; a write lock conflicts with all. */
int dp_os_ofd_tryread(int fd, uint64_t n);
int dp_os_ofd_waitread(int fd, uint64_t n, unsigned ms);
int dp_os_ofd_waitlock(int fd, uint64_t n, unsigned ms); /* exclusive, polling, at most ms */

/* A new open file description of fd's file, read-write, O_CLOEXEC, through
 * /proc/self/fd (works for unlinked files and memfds); -errno when /proc is
 * not there. dp_os_same_file: 1 when both fds name one inode. */
int dp_os_reopen(int fd);
int dp_os_same_file(int a, int b);

/* System V semaphores as liveness locks: semaphore n of a set is taken by
 * raising it from 0 to 1 with SEM_UNDO, so the kernel lowers it again when
 * the process exits; fork()ed children do not inherit the adjustment. */
int dp_os_sem_create(int32_t key, unsigned nsems, unsigned mode); /* semid; -EEXIST */
int dp_os_sem_get(int32_t key);                                   /* semid */
int dp_os_sem_max(void);                                          /* SEMMSL */
int dp_os_sem_trylock(int semid, unsigned n);                     /* 0, -EAGAIN */
int dp_os_sem_unlock(int semid, unsigned n);
int dp_os_sem_test(int semid, unsigned n);                        /* 1 held, 0 free */
int dp_os_sem_any_held(int semid);                                /* 1 some held, 0 none */
/* Semaphores as shared locks (live.c): raise adds 1 with SEM_UNDO (a count
 * of holders, each lowering its own with dp_os_sem_unlock); tryshare raises
 * s if x is 0, tryexcl raises x if s and x are 0, each atomically and
 * without waiting (-EAGAIN). value: the semaphore's value. */
int dp_os_sem_raise(int semid, unsigned n);
int dp_os_sem_tryshare(int semid, unsigned s, unsigned x);
int dp_os_sem_tryexcl(int semid, unsigned s, unsigned x);
int dp_os_sem_value(int semid, unsigned n);
int dp_os_sem_remove(int semid);

/* Every running thread of every process executes a full memory barrier
 * before this returns (membarrier MEMBARRIER_CMD_GLOBAL): the slow side of
 * an asymmetric fence. -errno where the kernel does not offer it. */
int dp_os_membarrier_global(void);

/* One private page that the kernel zeroes in every child of a fork of any
 * kind (MADV_WIPEONFORK); *wipes says whether the advice took. */
int dp_os_fork_page(void **page, bool *wipes);

pid_t dp_os_getpid(void);
pid_t dp_os_gettid(void);
void dp_os_yield(void); /* sched_yield: let another thread run (a spin that waits long) */

/* Every entry of a directory but "." and ".." (fn returns false to stop). */
int dp_os_dir_each(const char *dir, bool (*fn)(const char *name, void *arg), void *arg);
int dp_os_dir_each_at(int dir, bool (*fn)(const char *name, void *arg), void *arg); /* dir: a descriptor */
/* Every System V shared memory segment this process may see. */
int dp_os_sysv_each(bool (*fn)(int shmid, int32_t key, size_t size, uint64_t nattch, void *arg), void *arg);
/* The first len bytes of a SysV segment, read-only (attach, copy, detach). */
int dp_os_sysv_peek(int shmid, void *buf, size_t len);
/* The first len bytes of a file (a hugetlbfs file is mapped: it has no read). */
int dp_os_file_peek(int fd, void *buf, size_t len);
/* The user that owns a file (by path, not following a symbolic link; by
 * descriptor), or that created a System V segment (its creator: the owner
 * it records can be set to any user by that owner). */
int dp_os_path_owner(const char *path, uint32_t *uid);
int dp_os_fd_owner(int fd, uint32_t *uid);
int dp_os_sysv_owner(int shmid, uint32_t *uid);

/* What the calling process may still make resident before an OOM killer
 * wakes, and what binds it. The memory cgroup: at each level from the
 * process's own cgroup up to the highest its mount shows, limit - usage
 * (v2 memory.max - memory.current, v1 memory.limit_in_bytes -
 * memory.usage_in_bytes), page cache the kernel can drop counted as room.
 * The cgroup is found from /proc/self/cgroup and /proc/self/mountinfo (in
 * a cgroup namespace whose mount shows an ancestor's tree, by the
 * cgroup.procs that lists this process; levels above a namespace's root
 * that its mount does not show are not seen). The system: MemAvailable +
 * SwapFree. room is the least (UINT64_MAX: nothing limits), limit and
 * where say which binds. unknown is -errno when the cgroup's limits cannot
 * be learned -- /proc hidden, the hierarchy not mounted in view, the
 * process's cgroup not found -- and where then says why (room covers only
 * what could be read). A level found without a limit is believed for a
 * second; /proc/self/cgroup is read every time, so a fork()ed child or a
 * process moved to another cgroup is judged afresh. */
typedef struct dp_os_room {
    uint64_t room, limit;
    int unknown;
    char where[1800];
} dp_os_room;
void dp_os_mem_room(dp_os_room *r);
/* The same for the hugetlb cgroup's pages of size page (v2
 * hugetlb.<size>.max - .current, v1 .limit_in_bytes - .usage_in_bytes);
 * the kernel's free pages are dp_os_huge_avail's. */
void dp_os_huge_room(size_t page, dp_os_room *r);
/* vm.overcommit_memory is 2 (strict): the kernel charges a shared
 * anonymous mapping in full whatever MAP_NORESERVE says. */
bool dp_os_overcommit_strict(void);
/* Bytes of [addr, addr+len) whose pages are in the page cache of the shmem
 * file behind it (mincore: for shmem, whoever populated them; for hugetlb,
 * only those this process maps). */
int dp_os_present_bytes(void *addr, size_t len, uint64_t *bytes);
uint64_t dp_os_random64(void);
uint64_t dp_os_now_ns(void);
/* CLOCK_MONOTONIC as the initial time namespace reads it: this process's
 * clock less its time namespace's offset (/proc/self/timens_offsets, read
 * once per process), so that every process of a pool reads one clock. */
uint64_t dp_os_shared_now_ns(void);
void dp_os_sleep_ns(uint64_t ns);

/* ---- read-only inspection (inspect.c) ------------------------------------ */

/* Map read-only at a fixed address inside a reservation. */
int dp_os_map_fd_ro(void *addr, size_t len, int fd);
int dp_os_sysv_attach_ro(int shmid, void *addr);
/* /proc/<pid>/<rel> opened read-only (a new description; regular files
 * only): -EPERM/-EACCES when this process may not (map_files needs
 * CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE). Returns the fd. */
int dp_os_proc_open_ro(pid_t pid, const char *rel);
/* Every mapping of a process, from /proc/<pid>/maps (fn returns false to stop). */
typedef struct dp_os_vma {
    uint64_t start, end, offset, inode;
    bool shared;    /* 's' in the permissions */
    char path[4096]; /* as maps shows it ("/dev/zero (deleted)", "/memfd:x (deleted)", ...) */
} dp_os_vma;
int dp_os_proc_maps_each(pid_t pid, bool (*fn)(const dp_os_vma *vma, void *arg), void *arg);
/* Every open descriptor of a process and what it links to. */
int dp_os_proc_fds_each(pid_t pid, bool (*fn)(int fd, const char *target, void *arg), void *arg);
int dp_os_fd_inode(int fd, uint64_t *ino);

#endif /* DP_OS_H */
