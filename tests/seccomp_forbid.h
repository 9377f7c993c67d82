/*
 * seccomp_forbid.h -- the filter that proves a code path makes no memory or
 * object system call: after forbid_memory_syscalls(), the calling thread (and
 * threads it creates later) kills the whole process on mmap, munmap, mremap,
 * madvise, mprotect, brk, ftruncate, fallocate, openat, shmget or shmat.
 * Shared by tests/test_area.c and bench/burst.c. x86-64.
 */
#ifndef DSMPOOL_SECCOMP_FORBID_H
#define DSMPOOL_SECCOMP_FORBID_H

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int forbid_memory_syscalls(void) {
    static const int nrs[] = {SYS_mmap, SYS_munmap, SYS_mremap, SYS_madvise, SYS_mprotect,
                              SYS_brk, SYS_ftruncate, SYS_fallocate, SYS_openat, SYS_shmget,
                              SYS_shmat};
    struct sock_filter f[4 + 2 * 11 + 1];
    unsigned n = 0;
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (unsigned i = 0; i < sizeof nrs / sizeof *nrs; i++) {
        f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nrs[i], 0, 1);
        f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    }
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {(unsigned short)n, f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -errno;
    return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0 ? 0 : -errno;
}

#endif
