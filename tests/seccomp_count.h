/*
 * seccomp_count.h -- count every system call a thread makes while it says
 * it is measuring, of any kind, and say which ones.
 *
 * Each measured thread installs a seccomp filter that hands every system
 * call it makes to a supervisor (SECCOMP_RET_USER_NOTIF, a listener of its
 * own); the supervisor thread, which has no filter, counts the call by
 * number if the thread's measuring flag is set, and lets it run
 * (SECCOMP_USER_NOTIF_FLAG_CONTINUE: the call itself is unchanged). So
 * barriers and clocks outside the measured steps work as usual, and a
 * count of 0 means that the measured steps made no system call at all --
 * not futex, not sched_yield, not getcpu, not clock_gettime. Linux >= 5.5.
 * Shared by tests/test_area.c and bench/burst.c. x86-64 numbering.
 *
 *   sc_count c;  sc_count_start(&c);        in the main thread
 *   sc_count_enter(&c, id);                 in worker id, before measuring
 *   atomic_store(&c.measuring[id], 1); ... ; atomic_store(&c.measuring[id], 0);
 *   c.count[id], c.by_nr[nr]                after
 */
#ifndef DSMPOOL_SECCOMP_COUNT_H
#define DSMPOOL_SECCOMP_COUNT_H

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SC_MAX_THREADS 64
#define SC_MAX_NR 512

typedef struct sc_count {
    _Atomic int fd[SC_MAX_THREADS]; /* listeners, 0 = none yet */
    _Atomic int measuring[SC_MAX_THREADS];
    _Atomic long count[SC_MAX_THREADS];
    _Atomic long by_nr[SC_MAX_NR];
    _Atomic long outside; /* calls made while not measuring (barriers, ...) */
    _Atomic int stop;
    pthread_t sup;
} sc_count;

static void *sc_supervise(void *arg) {
    sc_count *c = arg;
    struct pollfd pf[SC_MAX_THREADS];
    int idx[SC_MAX_THREADS];
    while (!atomic_load(&c->stop)) {
        int n = 0;
        for (int i = 0; i < SC_MAX_THREADS; i++) {
            int fd = atomic_load(&c->fd[i]);
            if (fd > 0) {
                pf[n] = (struct pollfd){fd, POLLIN, 0};
                idx[n++] = i;
            }
        }
        if (poll(pf, (nfds_t)n, 5) <= 0) continue;
        for (int k = 0; k < n; k++) {
            if (!(pf[k].revents & POLLIN)) continue;
            struct seccomp_notif req;
            struct seccomp_notif_resp resp;
            memset(&req, 0, sizeof req);
            if (ioctl(pf[k].fd, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) continue;
            int i = idx[k];
            if (atomic_load(&c->measuring[i])) {
                atomic_fetch_add(&c->count[i], 1);
                atomic_fetch_add(&c->by_nr[req.data.nr < SC_MAX_NR ? req.data.nr : SC_MAX_NR - 1], 1);
            } else {
                atomic_fetch_add(&c->outside, 1);
            }
            memset(&resp, 0, sizeof resp);
            resp.id = req.id;
            resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE; /* run it, unchanged */
            ioctl(pf[k].fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
        }
    }
    return NULL;
}

static inline int sc_count_start(sc_count *c) {
    memset(c, 0, sizeof *c);
    return pthread_create(&c->sup, NULL, sc_supervise, c) == 0 ? 0 : -EAGAIN;
}

static inline void sc_count_stop(sc_count *c) {
    atomic_store(&c->stop, 1);
    pthread_join(c->sup, NULL);
}

/* In worker id: every later system call of this thread goes by the supervisor. */
static inline int sc_count_enter(sc_count *c, int id) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof *f), f};
    if (id < 0 || id >= SC_MAX_THREADS) return -EINVAL;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -errno;
    long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (fd < 0) return -errno;
    atomic_store(&c->fd[id], (int)fd); /* the supervisor picks it up within 5 ms */
    return 0;
}

static inline const char *sc_name(int nr) {
    switch (nr) {
    case SYS_read: return "read";
    case SYS_write: return "write";
    case SYS_mmap: return "mmap";
    case SYS_munmap: return "munmap";
    case SYS_mprotect: return "mprotect";
    case SYS_madvise: return "madvise";
    case SYS_brk: return "brk";
    case SYS_futex: return "futex";
    case SYS_sched_yield: return "sched_yield";
    case SYS_getcpu: return "getcpu";
    case SYS_clock_gettime: return "clock_gettime";
    case SYS_gettid: return "gettid";
    case SYS_getpid: return "getpid";
    case SYS_nanosleep: return "nanosleep";
    case SYS_clock_nanosleep: return "clock_nanosleep";
    case SYS_fcntl: return "fcntl";
    case SYS_openat: return "openat";
    case SYS_ftruncate: return "ftruncate";
    case SYS_fallocate: return "fallocate";
    case SYS_rseq: return "rseq";
    default: return NULL;
    }
}

/* "none", or "futex x3, getcpu x1" */
static inline void sc_count_names(sc_count *c, char *buf, size_t n) {
    buf[0] = 0;
    for (int nr = 0; nr < SC_MAX_NR; nr++) {
        long k = atomic_load(&c->by_nr[nr]);
        if (!k) continue;
        size_t l = strlen(buf);
        const char *nm = sc_name(nr);
        if (nm) snprintf(buf + l, n - l, "%s%s x%ld", l ? ", " : "", nm, k);
        else snprintf(buf + l, n - l, "%ssyscall %d x%ld", l ? ", " : "", nr, k);
    }
    if (!buf[0]) snprintf(buf, n, "none");
}

#endif
