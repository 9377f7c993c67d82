/*
 * life.c -- a pool's lifecycle: who is in it, and the last process out.
 * What the sweep, dsmpool_remove and the list do with pools nobody is in
 * is sweep.c's, on these rules.
 *
 * Layer: the top, with recovery (it runs recovery before it cleans up) and
 * pool.c (join and leave call it). Nothing below knows about it; presence
 * and LIFE are locks of the liveness oracle (live.c [presence and life]), which it asks.
 *
 * Rules
 *   [anchor] Every pool has an anchor: an empty file dsmpool.<pool id> in the
 *      /dev/shm its creator saw (the pool's home, recorded in the header by
 *      its device and inode), made before any other object of the pool
 *      (region name, OS fallback segments dsmpool.<id>.<index>.<gen>) and
 *      removed after the last one. So every OS object a pool makes can be
 *      traced to its pool by name, and a fallback object without an anchor
 *      belongs to no pool. A process reaches home through a descriptor of
 *      that directory (p->shmdir): the creator's, one an attacher opens
 *      when its /dev/shm is home, or the one a fork()ed child inherits --
 *      wherever the child's mount namespace has moved it. A process without
 *      one (it sees another /dev/shm) makes and maps no OS fallback object
 *      and unlinks none: it takes part in the pool otherwise ([presence]), and
 *      its attach says so in dsmpool_last_error(). A pool made where no
 *      anchor can be made (no /dev/shm) gets no fallback segments.
 *   [presence] every attached process holds the region's DP_LOCK_PRESENT
 *      shared (live.c [presence and life]: an OFD lock on a description of the region's
 *      own file that it opened itself, the lock memfd of an anonymous
 *      pool, or a System V semaphore with SEM_UNDO), from before its slot
 *      is claimed (J4) until after its slot is freed; the kernel drops it
 *      when the process dies. These are shared by every process of the
 *      pool, whatever namespaces it is in; a process that cannot hold them
 *      is refused at attach (-ENOLCK), never counted out. A pool no process
 *      is present in is dead (every process died) or closed (the last one
 *      left cleanly). Home processes also hold the anchor's
 *      DP_ANCHOR_PRESENCE: it says only "present in this /dev/shm", for a
 *      sweep that cannot reach an anonymous or memfd pool's region.
 *   [life] LIFE (the region's DP_LOCK_LIFE): a joiner holds it shared from
 *      before its presence until its slot is claimed (J3..J8); a leaver
 *      takes it exclusive while still present, and only then drops its
 *      presence and looks (L3..L6); a sweeper or remover holds it exclusive
 *      across its look at presence and its removals (S2..S5). So no cleaner
 *      ever sees a pool empty that a process is leaving cleanly, no pool is
 *      cleaned while a process joins it, and nobody joins one being removed
 *      (a joiner waits, at most 10 s, then says -EAGAIN). A joiner of a
 *      named pool checks, under LIFE and present, that the name still leads
 *      to its region (J5) before it touches the anchor, so an attach that
 *      raced dsmpool_remove fails having made nothing. The anchor's own
 *      DP_ANCHOR_LIFE plays the same part for the anchor alone (a home
 *      process takes the anchor with it shared, a sweep of an anchor whose
 *      region it cannot reach holds it exclusive), inside the region's
 *      LIFE where both are taken: lock order region LIFE, then anchor LIFE.
 *      A name found by open is trusted only once it is locked and still
 *      leads to the same file (a cleaner may have unlinked it). Locks are
 *      let go by an explicit unlock, never by close alone: a descriptor a
 *      fork()ed child copied keeps its description's locks. A leaver that
 *      cannot get LIFE within 10 s (a stopped cleaner or joiner) does not
 *      clean up, and marks a named pool closed (no sweep takes it for dead;
 *      a joiner clears the mark).
 *   [last out] The last process out (its presence dropped, LIFE exclusive, nobody
 *      present): recovers what dead processes left, drops area entries that
 *      live in OS segments, then unlinks every OS fallback segment of the
 *      pool, pinned ones too (their descriptors are freed: nobody holds
 *      them), and any stray object named after the pool. An anonymous or
 *      memfd pool goes with its last process, and a destroyed one with its
 *      name: their anchor (and System V semaphores) go too. A named pool
 *      that persists is marked closed (hdr->closed). A last process that
 *      is not home frees the descriptors but cannot reach the objects: they
 *      stay in the home /dev/shm until a sweep there (its anchor has nobody
 *      present: sweep.c [sweep]) -- a bounded leak, never a loss.
 *
 * Bounds: a process outside the pool's /dev/shm has no OS fallback
 * ([anchor]). Any failure to take presence fails the join (attach, or the first
 * call of a fork()ed child). A fork()ed child that never calls the library
 * (and never execs: the descriptions are close-on-exec) keeps a dead
 * parent's presence -- and, forked by another thread during a create or a
 * join, LIFE or the creation lock -- until it exits: a pool whose other
 * processes died is then cleaned late (attach may say -EAGAIN meanwhile),
 * never early. Do not unlink the anchor of a live pool by hand: its
 * fallback objects would then look orphaned to a sweep.
 *
 * Ordering: none in memory but hdr->closed (release here, acquire in the
 * sweep's header read); the kernel orders the locks (live.c).
 *
 * Injection points (tests): "life.join.locked" (a joiner holds LIFE shared and presence, before it
 * checks that the name still leads to its region: J4-J5).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dp_top.h"
#include "dp_os.h"

#define JOIN_WAIT_MS 10000u

void dp_life_anchor_name(uint64_t id, char *buf, size_t n) {
    snprintf(buf, n, "/dsmpool.%016llx", (unsigned long long)id);
}

/* Does the anchor's name in dir still lead to fd? A cleaner may have
 * unlinked it between our open and our lock (it unlinks only holding LIFE
 * exclusive). */
bool dp_life_anchor_named(int dir, const char *nm, int fd) {
    int cur = dp_os_shm_openat(dir, nm, false, 0);
    if (cur < 0) return false;
    bool same = dp_os_same_file(cur, fd) == 1;
    dp_os_close(cur);
    return same;
}

/* Let go of an anchor description: its locks first, explicitly -- a close
 * drops them only if no fork()ed child holds a copy of the descriptor. */
void dp_life_anchor_drop(int fd) {
    dp_os_ofd_unlock(fd, DP_ANCHOR_PRESENCE);
    dp_os_ofd_unlock(fd, DP_ANCHOR_LIFE);
    dp_os_close(fd);
}

/* Open the anchor in dir (making it if it is missing and make is set),
 * take its LIFE shared (waiting up to JOIN_WAIT_MS for a cleaner) and its
 * PRESENCE shared, on a name that still leads to it. Returns the fd, or
 * -errno. */
static int anchor_take(int dir, uint64_t id, bool make, unsigned mode) {
    char nm[64];
    dp_life_anchor_name(id, nm, sizeof nm);
    for (int tries = 0; tries < 100; tries++) {
        int fd = dp_os_shm_openat(dir, nm, false, 0);
        if (fd == -ENOENT && make) fd = dp_os_shm_openat(dir, nm, true, mode);
        if (fd == -EEXIST) continue; /* made by another meanwhile: open it */
        if (fd < 0) return fd;
        int r = dp_os_ofd_waitread(fd, DP_ANCHOR_LIFE, JOIN_WAIT_MS);
        if (r == 0 && (r = dp_os_ofd_tryread(fd, DP_ANCHOR_PRESENCE)) != 0) dp_os_ofd_unlock(fd, DP_ANCHOR_LIFE);
        if (r) {
            dp_os_close(fd);
            return r;
        }
        if (dp_life_anchor_named(dir, nm, fd)) return fd;
        dp_life_anchor_drop(fd); /* a cleaner unlinked it before we locked it: a fresh one */
    }
    return -EAGAIN;
}

int dp_life_anchor_create(uint64_t id, unsigned mode, int *shmdir, uint64_t *dev, uint64_t *ino) {
    *shmdir = -1;
    *dev = *ino = 0;
    int dir, r = dp_os_shm_dir(&dir, dev, ino);
    if (r) return r;
    /* [life]: LIFE shared until published (a sweeper may hold it a moment:
     * wait); [presence]: present in this /dev/shm */
    int fd = anchor_take(dir, id, true, mode);
    if (fd < 0) {
        dp_os_close(dir);
        return fd;
    }
    *shmdir = dir;
    return fd;
}

void dp_life_anchor_remove(int shmdir, uint64_t id) {
    char nm[64];
    dp_life_anchor_name(id, nm, sizeof nm);
    if (shmdir >= 0) dp_os_shm_unlinkat(shmdir, nm);
}

/* [anchor]: the directory of the pool's home /dev/shm for this process: a
 * fork()ed child's inherited one (whatever its mount namespace), or, for
 * an attacher, its own /dev/shm if that is the one the header names;
 * else -1. */
static int home_dir(dsmpool *p, bool adopting) {
    if (p->geo.no_anchor) return -1;
    if (adopting) return p->shmdir;
    int dir;
    uint64_t dev, ino;
    if (dp_os_shm_dir(&dir, &dev, &ino) != 0) return -1;
    if (dev == p->geo.shm_dev && ino == p->geo.shm_ino) return dir;
    dp_os_close(dir);
    return -1;
}

/* Undo life_enter's J3..J6 (a join that failed before J8). */
static void life_unenter(dsmpool *p, int dir, int anchor, bool adopting) {
    if (anchor >= 0) dp_life_anchor_drop(anchor);
    if (p->present) dp_live_absent(&p->live);
    p->present = false;
    dp_live_life_unshare(&p->live);
    if (dir >= 0 && !adopting) dp_os_close(dir);
}

/* J3..J6 for an attacher (by name or fd: J5 checks the name) or, adopting, a
 * fork()ed child (the ledger calls it before it claims the child's slot:
 * proc.c adopt).
 * Both LIFE locks are held shared until dp_life_joined (J8). A home
 * process takes the anchor that exists before its presence (so that a
 * sweep of the anchor, sweep.c [sweep], sees it from J3 on) and makes a missing
 * one only after J5 (an attach racing dsmpool_remove makes nothing). */
static int life_enter(dsmpool *p, bool adopting) {
    const char *nm = p->name[0] ? p->name : "(unnamed)";
    int r = dp_live_life_share(&p->live, JOIN_WAIT_MS); /* J3 */
    if (r == -EAGAIN)
        return dp_fail(-EAGAIN, "pool %s is being cleaned up or removed by another process (it held it "
                       "for %u s); retry", nm, JOIN_WAIT_MS / 1000);
    if (r) return dp_fail(r, "cannot take the pool's LIFE lock: %s", strerror(-r));
    int dir = home_dir(p, adopting), anchor = -1;
    unsigned mode = p->geo.mode ? p->geo.mode : 0600;
    if (dir >= 0 && (anchor = anchor_take(dir, p->geo.pool_id, false, mode)) < 0 &&
        anchor != -ENOENT) {
        r = anchor;
        life_unenter(p, dir, -1, adopting);
        char an[64];
        dp_life_anchor_name(p->geo.pool_id, an, sizeof an);
        return r == -EAGAIN ? dp_fail(-EAGAIN, "pool %s's anchor is held by a process cleaning it up (for %u "
                                      "s); retry", nm, JOIN_WAIT_MS / 1000)
                            : dp_fail(r, "cannot open the pool's anchor /dev/shm%s: %s (every process of a "
                                      "pool must be able to open it: same user, or a mode that lets it)",
                                      an, strerror(-r));
    }
    if ((r = dp_live_present(&p->live)) != 0) { /* J4 */
        life_unenter(p, dir, anchor, adopting);
        return dp_fail(r, "cannot take presence on the pool's lock file: %s", strerror(-r));
    }
    p->present = true;
    DP_INJECT("life.join.locked");
    if (!adopting && !dp_backing(p->backing)->still_named(p)) { /* J5: removed while we attached; nothing made */
        life_unenter(p, dir, anchor, adopting);
        return dp_fail(-ENOENT, "pool %s was removed while this process attached", nm);
    }
    if (dir >= 0 && anchor < 0) /* J6: made again where a sweep or an anonymous pool's last process took it */
        anchor = anchor_take(dir, p->geo.pool_id, true, mode);
    if (adopting && p->anchor >= 0) dp_os_close(p->anchor); /* the parent's description: not ours to unlock */
    if (dir >= 0 && anchor < 0) { /* cannot be present there: no fallback objects ([anchor]) */
        dp_os_close(dir);
        dir = -1;
    }
    p->shmdir = dir;
    p->anchor = anchor;
    dp_store_release(&p->hdr->closed, 0); /* release: pairs with the sweep's acquire */
    return 0;
}

int dp_life_join(dsmpool *p, bool creator) {
    if (!creator) return life_enter(p, false);
    /* J4 alone: nobody can join or sweep a region before it is published
     * (region.c [creation]); the anchor was made with LIFE shared and present */
    int r = dp_live_present(&p->live);
    if (r) return dp_fail(r, "cannot take presence on the pool's lock file: %s", strerror(-r));
    p->present = true;
    dp_store_release(&p->hdr->closed, 0); /* release: pairs with the sweep's acquire */
    return 0;
}

void dp_life_joined(dsmpool *p) {
    dp_live_life_unshare(&p->live); /* J8 (a creator holds none: a no-op) */
    if (p->anchor >= 0) dp_os_ofd_unlock(p->anchor, DP_ANCHOR_LIFE);
}

/* A fork()ed child adopting the pool: the ledger calls these around its
 * slot claim (proc.c adopt), so the child is present before it holds a
 * slot, as an attacher is. */
static int life_adopt_enter(dsmpool *p) { return life_enter(p, true); }

void dp_life_layer_init(void) { dp_ledger_set_join(life_adopt_enter, dp_life_joined, dp_life_leave); }

/* ---- removing a pool's objects --------------------------------------------- */

typedef struct by_id {
    uint64_t id;
    size_t removed;
    const char *dir; /* a path, or NULL: dirfd */
    int dirfd;
} by_id;

bool dp_life_parse_id(const char *name, uint64_t *id, bool *is_anchor) {
    if (strncmp(name, "dsmpool.", 8) != 0) return false;
    const char *h = name + 8;
    for (int i = 0; i < 16; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f'))) return false;
    *is_anchor = h[16] == 0;
    if (!*is_anchor && h[16] != '.') return false;
    *id = strtoull(h, NULL, 16);
    return true;
}

static bool unlink_objects_of(const char *name, void *arg) {
    by_id *b = arg;
    uint64_t id;
    bool anchor;
    if (!dp_life_parse_id(name, &id, &anchor) || anchor || id != b->id) return true;
    size_t l = strlen(name);
    bool unnamed = l > 4 && !strcmp(name + l - 4, ".new"); /* a region not yet named: its creator may live */
    if (!b->dir) { /* the pool's home, by descriptor */
        if (unnamed) {
            int fd = dp_os_shm_openat(b->dirfd, name, false, 0);
            bool held = fd < 0 ? fd != -ENOENT : dp_os_ofd_test(fd, DP_LOCK_CREATE) != 0;
            if (fd >= 0) dp_os_close(fd);
            if (held) return true;
        }
        if (dp_os_shm_unlinkat(b->dirfd, name) == 0) b->removed++;
        return true;
    }
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", b->dir, name);
    if (unnamed) {
        int fd = dp_os_file_open_ro(path);
        bool held = fd < 0 ? fd != -ENOENT : dp_os_ofd_test(fd, DP_LOCK_CREATE) != 0;
        if (fd >= 0) dp_os_close(fd);
        if (held) return true;
    }
    if (dp_os_file_unlink(path) == 0) b->removed++;
    return true;
}

/* The pool's objects other than its anchor and its region: OS fallback
 * segments (/dev/shm: the home directory shmdir when >= 0, else this
 * process's /dev/shm by path, as a sweep sees it) and a region not yet
 * named (dsmpool.<id>.new, in /dev/shm or a hugetlbfs mount). */
size_t dp_life_remove_objects(uint64_t id, int shmdir) {
    by_id b = {id, 0, shmdir >= 0 ? NULL : "/dev/shm", shmdir};
    if (shmdir >= 0) dp_os_dir_each_at(shmdir, unlink_objects_of, &b);
    else dp_os_dir_each(b.dir, unlink_objects_of, &b);
    size_t sizes[2] = {2u << 20, 1u << 30};
    char dir[4096];
    for (int i = 0; i < 2; i++) {
        if (dp_os_hugetlbfs_dir(sizes[i], dir, sizeof dir) != 0) continue;
        b.dir = dir;
        dp_os_dir_each(dir, unlink_objects_of, &b);
    }
    return b.removed;
}

/* [last out] (L5), with LIFE held exclusive and nobody present. */
static void last_out(dsmpool *p) {
    dp_recover_all(p); /* what dead processes held goes first (their segments with it) */
    dp_area_drop_os(p); /* area entries in OS segments: their segments go now */
    for (uint64_t i = 0; i < p->nsegs; i++) { /* what is left: pinned, or of processes that left */
        dp_seg_desc *d = &p->segs[i];
        uint64_t w = dp_load_acquire(&d->state); /* acquire: pairs with seg_create_bracketed's LIVE CAS */
        if (DP_SEG_ST(w) == DP_SEG_FREE || dp_load_relaxed(&d->block) != DP_BLOCK_FALLBACK) continue;
        char nm[96];
        dp_fallback_name(p, i, DP_SEG_GEN(w), nm, sizeof nm);
        if (p->shmdir >= 0) dp_os_shm_unlinkat(p->shmdir, nm); /* (not home: a sweep there: [last out]) */
        dp_store_relaxed(&d->block, 0);
        dp_store_relaxed(&d->size, 0);
        /* release: pairs with seg_claim's CAS of a later creator (nobody holds it: nobody is present) */
        dp_store_release(&d->state, DP_SEG_WORD(DP_SEG_GEN(w), 0, 0, DP_SEG_FREE));
    }
    if (p->shmdir >= 0) dp_life_remove_objects(p->geo.pool_id, p->shmdir); /* strays: a creator that died between name and record */
    bool gone = !dp_backing(p->backing)->named ||
                dp_load_acquire(&p->hdr->destroyed); /* acquire: dsmpool_destroy's release */
    if (gone) {
        dp_life_anchor_remove(p->shmdir, p->geo.pool_id);
        dp_live_destroy(p); /* System V: the semaphore set */
    } else {
        dp_store_release(&p->hdr->closed, 1); /* release: pairs with the sweep's acquire */
    }
}

void dp_life_leave(dsmpool *p) {
    if (p->anchor >= 0) { /* L2: present in this /dev/shm no longer */
        dp_life_anchor_drop(p->anchor);
        p->anchor = -1;
    }
    if (!p->present) return;
    p->present = false;
    /* L3..L6 ([life]): LIFE exclusive while still present -- a sweeper that
     * holds it sees us and lets go, a joiner finishes its join -- and only
     * then is presence dropped and looked at: nobody can take our being
     * gone for a pool that died */
    if (dp_live_life_excl(&p->live, JOIN_WAIT_MS) == 0) {
        dp_live_absent(&p->live);
        if (dp_live_anyone_present(&p->live) == 0) last_out(p);
        dp_live_life_release(&p->live);
        return;
    }
    if (dp_backing(p->backing)->named) {
        /* held for 10 s by another (a stopped cleaner or joiner, or a child
         * forked while one held it): not ours to clean up; a named pool is
         * marked closed -- before our presence goes, so that no sweep takes
         * it for dead meanwhile (a joiner clears it) */
        dp_store_release(&p->hdr->closed, 1); /* release: pairs with the sweep's acquire */
    }
    dp_live_absent(&p->live);
}
