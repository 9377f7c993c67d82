/*
 * live.c -- the liveness oracle: which processes of a pool are alive.
 *
 * Recovery hands a dead process's memory to others, so "dead" must be
 * certain. Pids and /proc cannot make it so: pids differ between pid
 * namespaces and are reused, /proc may hide other processes (hidepid=2,
 * subset=pid, ProtectProc=invisible), show another namespace, or be absent
 * (a chroot). The kernel itself keeps a record that holds exactly as long as
 * a process does: a lock it releases when the holder goes.
 *
 * Rules
 *   [slot locks] A process that holds slot i holds lock DP_LOCK_SLOT0 + i: an OFD write
 *      lock on that byte of the pool's lock file, on an open file
 *      description that this process opened itself; for System V pools a
 *      semaphore of the set with the pool's key, raised from 0 to 1 with
 *      SEM_UNDO. It takes the lock before it claims the slot (proc.c [slots])
 *      and gives it back after it has freed the slot.
 *   [lock file] The lock file is the region's own file (POSIX shm, hugetlbfs, memfd);
 *      for anonymous pools a memfd made with the region and inherited with
 *      it. A System V pool's semaphores live in the same IPC namespace as its
 *      segment, so every process that can attach can judge.
 *   [own description] Descriptions are shared by fork(), dup() and SCM_RIGHTS, and a lock
 *      belongs to a description: a description someone else may hold can
 *      neither prove a death (its own locks never conflict) nor vouch for
 *      one. So the library locks only on a description it opened itself and
 *      never shows (dsmpool_fd() is another one): the creator's open, a
 *      second open by name (POSIX, same inode checked), or /proc/self/fd/N.
 *      A fork()ed child makes one at adoption and closes its copy of the
 *      parent's. A process that cannot make one is refused (-ENOLCK, rule
 *      6): before format 10 it held its slot UNGUARDED (never recovered,
 *      judging nobody) and was not counted present.
 *   [dead iff free] A slot is dead iff its lock can be taken. A recoverer takes it and
 *      keeps it while it works and until it has freed the slot; so no two
 *      recoverers work on one slot and no new owner can claim it meanwhile.
 *      In one process, recoverers take pool->recover_lock first (they share
 *      the description, and a description never conflicts with itself), and
 *      mark the slots whose locks they hold (pool->held), so that other
 *      threads of the process, whose test of that lock cannot see their own
 *      description's locks, judge those slots alive.
 *   [other locks] DP_LOCK_CREATE, held by a creator until the region is
 *      published; DP_LOCK_SWEEP, held by the one process sweeping leaks;
 *      DP_LOCK_NAMES (names.c).
 *   [presence and life] Presence and LIFE (life.c [presence] and life.c [life]) live on the same lock file, so
 *      every process of the pool shares them whatever its mount namespace:
 *      DP_LOCK_PRESENT is held shared by every attached process (an OFD
 *      read lock on its own description; System V: a semaphore raised by 1
 *      with SEM_UNDO, a count of holders), DP_LOCK_LIFE shared by joiners
 *      and exclusive by a leaver deciding whether it is the last, or by a
 *      sweeper (OFD: read/write locks of one byte; System V: LIFE counts
 *      the shared holders and DP_LOCK_LIFE_X is the exclusive one, each
 *      changed together with a test of the other in one semop). A process
 *      that cannot hold them -- no description of its own, a System V set
 *      it cannot reach -- cannot be attached: it would be counted out.
 *      A sweeper that is not attached opens a description of the region's
 *      file by its path (or the set by key) and asks the same questions
 *      (dp_live_of_path, dp_live_of_key).
 *
 * Why this is right in every namespace: locks belong to the inode (the IPC
 * object), not to a pid, and the kernel drops them when the last descriptor
 * of the description closes -- at death, and at exec (O_CLOEXEC), when the
 * mapping is gone too.
 *
 * Ordering: none in memory; the kernel orders the locks. A test says what
 * held when it ran; only a lock held across the decision makes it stay true
 * (life.c holds LIFE exclusive across "nobody present" and the clean-up).
 *
 * Bound: a child that inherited its parent's lock description and has not
 * yet called the library keeps the parent's lock alive until it calls, execs
 * or exits; so does a process that keeps such a description past exec
 * without O_CLOEXEC. Dead parents are then recovered late, never early.
 */
#include <stdio.h>
#include <string.h>

#include "dp_ledger.h"
#include "dp_os.h"

bool dp_live_guarded(const dsmpool *p) { return p->live.kind != DP_LIVE_NONE; }

/* [presence and life]: without a description of its own a process could be neither
 * judged nor counted present, so it is not let in. */
static int no_description(int r) {
    return dp_fail(-ENOLCK, "this process cannot open a description of the pool's file of its own (%s: "
                   "/proc/self/fd is needed for a memfd or anonymous pool), so it could not hold the "
                   "locks that say it is alive and present; attach where /proc is mounted",
                   strerror(-r));
}

static void live_none(dsmpool *p) {
    p->live.kind = DP_LIVE_NONE;
    p->live.fd = -1;
    p->live.semid = -1;
}

/* The lock file is the backing's (backing.c [lock file]): a description of
 * its own for the creator, an attacher, a fork()ed child. */
int dp_live_created(dsmpool *p) {
    dp_live l;
    int r = dp_backing(p->backing)->lock(p, DP_LOCKFILE_CREATED, -1, &l);
    if (r == -EPROTO) return dp_fail(r, "the pool's System V semaphore set is missing");
    if (r) return r == -ENOENT || r == -ESTALE || r == -EACCES ? no_description(r)
                  : dp_fail(r, "cannot make the pool's lock file: %s", strerror(-r));
    p->live = l;
    return 0;
}

int dp_live_attached(dsmpool *p) {
    live_none(p);
    dp_live l;
    int r = dp_backing(p->backing)->lock(p, DP_LOCKFILE_ATTACHED, -1, &l);
    if (r == -EPROTO)
        return dp_fail(-EPROTO, "the pool's System V semaphore set (key 0x%x) is missing", (unsigned)p->sysv_key);
    if (r) return p->backing == DSMPOOL_BACKING_SYSV ? dp_fail(r, "cannot reach the pool's System V "
                                                              "semaphore set: %s", strerror(-r))
                                                     : no_description(r);
    p->live = l;
    return 0;
}

int dp_live_child(dsmpool *p) {
    if (p->live.kind == DP_LIVE_NONE) return dp_fail(-ENOLCK, "the pool's lock file was not opened");
    int inherited = p->live.fd;
    if (p->live.kind == DP_LIVE_OFD && inherited < 0) return no_description(-EBADF); /* an earlier try failed */
    dp_live l;
    /* System V: undo values are not inherited, nothing of the parent's to
     * drop, but the set must still be this pool's (a child that moved to
     * another IPC namespace would lock something else under the same id) */
    int r = dp_backing(p->backing)->lock(p, DP_LOCKFILE_CHILD, inherited, &l);
    if (r && p->live.kind == DP_LIVE_SEM)
        return dp_fail(-ENOLCK, "this fork()ed child cannot reach the pool's System V semaphore set "
                       "(key 0x%x: %s); it may be in another IPC namespace, where it could not be "
                       "told alive or present", (unsigned)p->sysv_key,
                       r == -EXDEV ? "another set has that key here" : strerror(-r));
    if (r) return no_description(r); /* the inherited copy stays: the next call tries again */
    if (l.kind == DP_LIVE_OFD) dp_os_close(inherited); /* the parent's: never unlocked here */
    p->live = l;
    return 0;
}

void dp_live_close(dsmpool *p) {
    if (p->live.kind == DP_LIVE_OFD && p->live.fd >= 0) dp_os_close(p->live.fd);
    live_none(p);
}

void dp_live_destroy(dsmpool *p) {
    if (p->live.kind == DP_LIVE_SEM) dp_os_sem_remove(p->live.semid);
}

int dp_live_take(dsmpool *p, uint64_t lock) {
    switch (p->live.kind) {
    case DP_LIVE_OFD: return dp_os_ofd_trylock(p->live.fd, lock);
    case DP_LIVE_SEM:
        return lock < DP_LOCK_SLOT0 + p->nprocs ? dp_os_sem_trylock(p->live.semid, (unsigned)lock)
                                                : -EINVAL;
    }
    return -ENOLCK;
}

void dp_live_give(dsmpool *p, uint64_t lock) {
    if (p->live.kind == DP_LIVE_OFD) dp_os_ofd_unlock(p->live.fd, lock);
    else if (p->live.kind == DP_LIVE_SEM) dp_os_sem_unlock(p->live.semid, (unsigned)lock);
}

int dp_live_held(dsmpool *p, uint64_t lock) {
    switch (p->live.kind) {
    case DP_LIVE_OFD: return dp_os_ofd_test(p->live.fd, lock);
    case DP_LIVE_SEM:
        return lock < DP_LOCK_SLOT0 + p->nprocs ? dp_os_sem_test(p->live.semid, (unsigned)lock)
                                                : -EINVAL;
    }
    return -ENOLCK;
}

/* ---- [presence and life]: presence and LIFE ----------------------------------------- */

int dp_live_of_path(const char *path, dp_live *l) {
    int fd = dp_os_file_open(path, false, 0);
    if (fd < 0) return fd;
    l->kind = DP_LIVE_OFD;
    l->fd = fd;
    l->semid = -1;
    return 0;
}

int dp_live_of_key(int32_t key, dp_live *l) {
    int r = dp_os_sem_get(key);
    if (r < 0) return r;
    l->kind = DP_LIVE_SEM;
    l->fd = -1;
    l->semid = r;
    return 0;
}

void dp_live_drop(dp_live *l) {
    if (l->kind == DP_LIVE_OFD && l->fd >= 0) {
        dp_os_ofd_unlock(l->fd, DP_LOCK_LIFE); /* explicitly: a fork()ed copy must not keep it */
        dp_os_close(l->fd);
    }
    l->kind = DP_LIVE_NONE;
    l->fd = l->semid = -1;
}

#define LIVE_POLL_NS 1000000ull

/* Poll try until it stops saying -EAGAIN or ms pass: a stopped holder must
 * not stop us for ever. */
static int live_wait(dp_live *l, unsigned ms, int (*try)(dp_live *)) {
    uint64_t end = dp_os_now_ns() + (uint64_t)ms * 1000000ull;
    int r;
    while ((r = try(l)) == -EAGAIN && dp_os_now_ns() < end) dp_os_sleep_ns(LIVE_POLL_NS);
    return r;
}

static int life_tryshare(dp_live *l) {
    if (l->kind == DP_LIVE_OFD) return dp_os_ofd_tryread(l->fd, DP_LOCK_LIFE);
    if (l->kind == DP_LIVE_SEM) return dp_os_sem_tryshare(l->semid, DP_LOCK_LIFE, DP_LOCK_LIFE_X);
    return -ENOLCK;
}

static int life_tryexcl(dp_live *l) {
    if (l->kind == DP_LIVE_OFD) return dp_os_ofd_trylock(l->fd, DP_LOCK_LIFE);
    if (l->kind == DP_LIVE_SEM) return dp_os_sem_tryexcl(l->semid, DP_LOCK_LIFE, DP_LOCK_LIFE_X);
    return -ENOLCK;
}

int dp_live_life_share(dp_live *l, unsigned ms) { return ms ? live_wait(l, ms, life_tryshare) : life_tryshare(l); }
int dp_live_life_excl(dp_live *l, unsigned ms) { return ms ? live_wait(l, ms, life_tryexcl) : life_tryexcl(l); }

void dp_live_life_unshare(dp_live *l) {
    if (l->kind == DP_LIVE_OFD) dp_os_ofd_unlock(l->fd, DP_LOCK_LIFE);
    else if (l->kind == DP_LIVE_SEM) dp_os_sem_unlock(l->semid, DP_LOCK_LIFE);
}

void dp_live_life_release(dp_live *l) {
    if (l->kind == DP_LIVE_OFD) dp_os_ofd_unlock(l->fd, DP_LOCK_LIFE);
    else if (l->kind == DP_LIVE_SEM) dp_os_sem_unlock(l->semid, DP_LOCK_LIFE_X);
}

int dp_live_present(dp_live *l) {
    if (l->kind == DP_LIVE_OFD) return dp_os_ofd_tryread(l->fd, DP_LOCK_PRESENT);
    if (l->kind == DP_LIVE_SEM) return dp_os_sem_raise(l->semid, DP_LOCK_PRESENT);
    return -ENOLCK;
}

void dp_live_absent(dp_live *l) {
    if (l->kind == DP_LIVE_OFD) dp_os_ofd_unlock(l->fd, DP_LOCK_PRESENT);
    else if (l->kind == DP_LIVE_SEM) dp_os_sem_unlock(l->semid, DP_LOCK_PRESENT);
}

/* Called by a process that holds no presence (it dropped its own, or never
 * had one): 1 someone is present, 0 nobody; an error counts as present. */
int dp_live_anyone_present(dp_live *l) {
    int r = l->kind == DP_LIVE_OFD ? dp_os_ofd_test(l->fd, DP_LOCK_PRESENT)
            : l->kind == DP_LIVE_SEM ? dp_os_sem_value(l->semid, DP_LOCK_PRESENT)
                                     : -ENOLCK;
    return r == 0 ? 0 : 1;
}

/* Is LIFE held by anyone, shared or exclusive (for --list; a test only)? */
int dp_live_life_held(dp_live *l) {
    if (l->kind == DP_LIVE_OFD) return dp_os_ofd_test(l->fd, DP_LOCK_LIFE) != 0;
    if (l->kind == DP_LIVE_SEM)
        return dp_os_sem_value(l->semid, DP_LOCK_LIFE) != 0 || dp_os_sem_value(l->semid, DP_LOCK_LIFE_X) != 0;
    return 1;
}
