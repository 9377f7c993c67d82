/*
 * sweep.c -- what is done with pools nobody is in: the sweep
 * (dsmpool_sweep), dsmpool_remove, and the list of every pool on the
 * machine (dsmpool-inspect --list).
 *
 * Layer: the top, beside life.c, whose anchors and locks it judges by
 * (life.c [anchor], [presence], [life]) and whose removal of a pool's
 * objects it shares (dp_life_remove_objects). Nothing below knows about
 * it.
 *
 * Rules
 *   [sweep] The sweep (dsmpool_sweep, safe from any process at any time): for
 *      every pool id it finds in /dev/shm (anchors, fallback objects) or in
 *      a region header (POSIX names in /dev/shm and hugetlbfs mounts,
 *      System V segments): a region it can reach is judged by the region's
 *      locks ([life]: LIFE exclusive, nobody present, no slot or creation
 *      lock held, its header read again under LIFE and still this pool's);
 *      an anchor whose region it cannot reach (anonymous, memfd) by the
 *      anchor's. A dead pool's fallback objects, its region (unless it was
 *      closed cleanly) and its anchor are removed. Fallback objects whose
 *      pool has no anchor are removed; an unnamed region (.new) only if its
 *      creation lock is free; a published region without an anchor never
 *      (nothing says whether it closed cleanly: dsmpool_remove it). A
 *      question the kernel does not answer (an anchor or a region that
 *      cannot be opened, but exists) counts as "held". An object of a pool
 *      with a live process is never touched.
 *   [remove] dsmpool_remove (and create's replace_stale) removes one named pool
 *      the same way, refusing one with a present process unless forced.
 *   [other formats] A region of another format (a dsmpool magic, a format or header size
 *      not ours: an older or newer library's pool, after an upgrade) is not
 *      judged by this library's locks: its liveness is its own library's
 *      business. Its header's pool id (byte 32 since format 3: dp_internal.h;
 *      byte 24 in format 2; format 1 made no anchors) is believed -- its
 *      claim holds -- only if no region of ours has that id and the id's
 *      anchor exists and has the region's owner (a file's owner, read through
 *      the descriptor its header was read through; a System V segment's
 *      creator, which its owner cannot change): a file anyone can write must
 *      not shield another user's dead pool from the sweep, nor hand its
 *      anchor to a forced remove. The sweep leaves the region alone, and the
 *      anchor and fallback objects of an id whose claim holds. dsmpool_remove
 *      refuses it (-EPROTO, naming the format, header size and library that
 *      made it) unless forced; forced, it removes the region if it is still
 *      the one judged (read again), then the anchor and fallback objects of a
 *      claim that holds as a sweep would, by the anchor's presence (where
 *      formats 3 to 9 kept presence; from format 10 every home process holds
 *      it too). The list shows it as of that format, without reading its
 *      locks, with the pool id only where the claim holds. A region of ours
 *      is believed as before, whoever owns it (a forged one could sway a
 *      sweep before [other formats] too; live pools stay safe by presence).
 *
 * Ordering: none in memory but hdr->closed (acquire in the header read,
 * against life.c's release); the kernel orders the locks (live.c).
 *
 * Injection points (tests): "life.sweep.scanned" (the sweep has its list of
 * pools, before it locks and removes any); "life.remove.locked" (a remover
 * holds a pool's LIFE exclusive, before it looks at presence).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dp_top.h"
#include "dp_os.h"

/* ---- the sweep and dsmpool_remove ------------------------------------------ */

/* A region found by its header: where it is and what it says. */
typedef struct region_ref {
    uint64_t id;
    int kind;            /* 1 a file (path), 2 a System V segment, 3 one without a header */
    char path[4200];     /* file: absolute path; shm names are under /dev/shm */
    int shmid;
    int32_t key;
    uint64_t magic, closed, nprocs;
    uint32_t format, lib, hsize; /* another format's number, library version, header size; 0: ours */
    bool claims;          /* another format's: its claim on the pool id holds ([other formats]) */
    bool owned;           /* another format's: uid is known -- the file's owner (read by the
                             descriptor the header was read through) or the System V
                             segment's creator */
    uint32_t uid;
} region_ref;

typedef struct found {
    region_ref *regions;
    size_t nregions, cap;
    uint64_t *ids;
    size_t nids, idcap;
    const char *dir;
    region_ref half[8]; /* System V segments of creators that died before the header */
    size_t nhalf;
} found;

static void add_id(found *f, uint64_t id) {
    for (size_t i = 0; i < f->nids; i++)
        if (f->ids[i] == id) return;
    if (f->nids == f->idcap) {
        size_t nc = f->idcap ? 2 * f->idcap : 32;
        uint64_t *n = realloc(f->ids, nc * sizeof *n);
        if (!n) return;
        f->ids = n;
        f->idcap = nc;
    }
    f->ids[f->nids++] = id;
}

static void add_region(found *f, const region_ref *r) {
    if (r->kind == 3) {
        if (f->nhalf < sizeof f->half / sizeof *f->half) f->half[f->nhalf++] = *r;
        return;
    }
    if (f->nregions == f->cap) {
        size_t nc = f->cap ? 2 * f->cap : 16;
        region_ref *n = realloc(f->regions, nc * sizeof *n);
        if (!n) return;
        f->regions = n;
        f->cap = nc;
    }
    f->regions[f->nregions++] = *r;
    if (!r->format) add_id(f, r->id); /* another format's id: only through its claim ([other formats]) */
}

static bool header_of(const dp_header *h) {
    return (h->magic == DP_MAGIC || h->magic == DP_MAGIC_CREATING) && h->version == DP_FORMAT_VERSION &&
           h->header_size == sizeof(dp_header);
}

/* [other formats]: a region of another format (a dsmpool magic, a format or header
 * size not ours) as a region_ref: its pool id and its library's version
 * are where they have been since format 3 (dp_internal.h); format 2 kept
 * its pool id at byte 24 (no library version), format 1 made no anchors
 * (id 0: nothing is its). A zero format or size is no format: a System V
 * creator writing its provisional header field by field (region.c [creation]),
 * read half-way. */
static bool other_format(const dp_header *h, region_ref *r) {
    if ((h->magic != DP_MAGIC && h->magic != DP_MAGIC_CREATING) || !h->version || !h->header_size ||
        header_of(h))
        return false;
    uint64_t id2;
    memcpy(&id2, (const char *)h + 24, sizeof id2); /* format 2's pool id */
    r->id = h->version >= 3 ? h->pool_id : h->version == 2 ? id2 : 0;
    r->magic = h->magic;
    r->format = h->version;
    r->lib = h->version >= 3 ? h->lib_version : 0;
    r->hsize = h->header_size;
    return true;
}

/* Who made a region of another format, for messages. */
static void other_by(const region_ref *r, char *buf, size_t n) {
    if (!r->lib)
        snprintf(buf, n, "a dsmpool library of region format %u (no version is recorded before format 3; "
                 "header %u bytes)", r->format, r->hsize);
    else if (r->lib == DSMPOOL_VERSION_NUMBER)
        snprintf(buf, n, "another build of dsmpool %s (region format %u, header %u bytes)",
                 DSMPOOL_VERSION_STRING, r->format, r->hsize);
    else
        snprintf(buf, n, "dsmpool %u.%u.%u (region format %u, header %u bytes)", r->lib / 10000,
                 r->lib / 100 % 100, r->lib % 100, r->format, r->hsize);
}

static bool scan_file(const char *name, void *arg) {
    found *f = arg;
    uint64_t id;
    bool anchor;
    if (dp_life_parse_id(name, &id, &anchor)) { /* an anchor, or a fallback object */
        add_id(f, id);
        return true;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    int fd = dp_os_file_open_ro(path);
    if (fd < 0) return true;
    dp_header *h = malloc(sizeof *h);
    region_ref r = {.kind = 1, .shmid = -1};
    if (h && dp_region_peek_fd(fd, h) == 0 && (header_of(h) || other_format(h, &r))) {
        if (!r.format) {
            r.id = h->pool_id;
            r.magic = h->magic;
            r.closed = dp_load_relaxed(&h->closed);
            r.nprocs = h->proc_cap;
        }
        snprintf(r.path, sizeof r.path, "%s", path);
        if (r.format) r.owned = dp_os_fd_owner(fd, &r.uid) == 0; /* the file whose header was read */
        add_region(f, &r);
    }
    free(h);
    dp_os_close(fd);
    return true;
}

/* A System V segment without a header yet, that nobody maps, whose key has
 * a semaphore set with the creation semaphore free: a creator died between
 * shmget and its first write (region.c [creation]). */
static bool sysv_half_built(int32_t key, uint64_t nattch) {
    if (nattch) return false;
    int sem = dp_os_sem_get(key);
    return sem >= 0 && dp_os_sem_test(sem, DP_LOCK_CREATE) == 0;
}

static bool scan_sysv(int shmid, int32_t key, size_t size, uint64_t nattch, void *arg) {
    found *f = arg;
    if (size < sizeof(dp_header)) return true;
    dp_header *h = malloc(sizeof *h);
    if (h && dp_region_peek_sysv(shmid, h) == 0) {
        region_ref r = {.kind = 2, .shmid = shmid, .key = key};
        if (header_of(h)) {
            r.id = h->pool_id;
            r.magic = h->magic;
            r.closed = dp_load_relaxed(&h->closed);
            r.nprocs = h->proc_cap;
            add_region(f, &r);
        } else if (other_format(h, &r)) {
            r.owned = dp_os_sysv_owner(shmid, &r.uid) == 0;
            add_region(f, &r);
        } else if (h->magic == 0 && sysv_half_built(key, nattch)) {
            r.kind = 3; /* no pool id yet */
            add_region(f, &r);
        }
    }
    free(h);
    return true;
}

/* [other formats]: a region of another format speaks for its pool id only where no
 * region of ours has that id and the id's anchor exists and has the
 * region's owner (a System V segment's creator: its recorded owner can be
 * set to anyone): a file anyone may write must not make the sweep keep
 * another user's dead pool, nor a forced remove take its anchor. (Without
 * an anchor the id's fallback objects belong to no pool: [anchor].) */
static void judge_claims(found *f) {
    for (size_t k = 0; k < f->nregions; k++) {
        region_ref *r = &f->regions[k];
        if (!r->format || !r->id) continue;
        bool ours = false;
        for (size_t i = 0; i < f->nregions && !ours; i++) ours = !f->regions[i].format && f->regions[i].id == r->id;
        char path[96];
        snprintf(path, sizeof path, "/dev/shm/dsmpool.%016llx", (unsigned long long)r->id);
        uint32_t au;
        r->claims = !ours && r->owned && dp_os_path_owner(path, &au) == 0 && au == r->uid;
    }
}

/* The region that speaks for pool id: ours, else another format's whose
 * claim holds ([other formats]), else none. */
static const region_ref *region_of(const found *f, uint64_t id) {
    const region_ref *other = NULL;
    for (size_t k = 0; k < f->nregions; k++) {
        if (f->regions[k].id != id) continue;
        if (!f->regions[k].format) return &f->regions[k];
        if (f->regions[k].claims) other = &f->regions[k];
    }
    return other;
}

static void scan_all(found *f) {
    f->dir = "/dev/shm";
    dp_os_dir_each("/dev/shm", scan_file, f);
    size_t sizes[2] = {2u << 20, 1u << 30};
    for (int i = 0; i < 2; i++) {
        char dir[4096];
        if (dp_os_hugetlbfs_dir(sizes[i], dir, sizeof dir) != 0) continue;
        f->dir = dir;
        dp_os_dir_each(dir, scan_file, f);
    }
    dp_os_sysv_each(scan_sysv, f);
    judge_claims(f);
}

/* Does any process hold a slot or the creation of this region? (A question
 * that cannot be asked is answered yes.) */
static bool region_held(const region_ref *r) {
    uint64_t n = r->nprocs < (1u << 20) ? r->nprocs : (1u << 20);
    if (r->kind == 1) {
        int fd = dp_os_file_open_ro(r->path);
        if (fd < 0) return fd != -ENOENT;
        bool held = dp_os_ofd_test(fd, DP_LOCK_CREATE) != 0 || dp_os_ofd_test_range(fd, DP_LOCK_SLOT0, n) != 0;
        dp_os_close(fd);
        return held;
    }
    int sem = dp_os_sem_get(r->key);
    if (sem < 0) return sem != -ENOENT;
    for (uint64_t i = 0; i < DP_LOCK_SLOT0 + n; i++) /* (LIFE and presence: the caller's question) */
        if (i != DP_LOCK_LIFE && i != DP_LOCK_LIFE_X && i != DP_LOCK_PRESENT && dp_os_sem_test(sem, (unsigned)i) != 0)
            return true;
    return false;
}

/* A copy of the region's header: a file's by path, a System V segment's by
 * id (this very segment, or none). */
static int region_peek(const region_ref *r, dp_header *h) {
    if (r->kind != 1) return dp_region_peek_sysv(r->shmid, h);
    int fd = dp_os_file_open_ro(r->path), rr = -ENOENT;
    if (fd >= 0) {
        rr = dp_region_peek_fd(fd, h);
        dp_os_close(fd);
    }
    return rr;
}

/* Read the region's header again, now that LIFE is ours (the scan may be
 * old: a process may have joined and left cleanly since). false: the name
 * no longer leads to this pool's region (removed, or another pool's now). */
static bool region_refresh(region_ref *r) {
    dp_header *h = malloc(sizeof *h);
    if (!h) return false;
    int rr = region_peek(r, h);
    bool ok = rr == 0 && (r->kind == 3 ? h->magic == 0 : header_of(h) && h->pool_id == r->id);
    if (ok) {
        r->magic = h->magic;
        r->closed = dp_load_relaxed(&h->closed);
        r->nprocs = h->proc_cap;
    }
    free(h);
    return ok;
}

static size_t remove_region(const region_ref *r) {
    if (r->kind == 1) return dp_os_file_unlink(r->path) == 0; /* /dev/shm or hugetlbfs */
    /* the set first: while the segment exists nobody can make a new set for
     * the key (region.c sysv_sems), so the set we remove is this pool's */
    size_t n = 0;
    int sem = dp_os_sem_get(r->key);
    if (sem >= 0 && dp_os_sysv_find(r->key) == r->shmid && dp_os_sem_remove(sem) == 0) n++;
    n += dp_os_sysv_remove(r->shmid) == 0; /* by id: never another segment */
    return n;
}

/* dp_life_anchor_named for a sweep: by this process's /dev/shm, as it scanned it. */
static bool anchor_named_path(const char *nm, int fd) {
    int cur = dp_os_shm_open(nm, false, 0);
    if (cur < 0) return false;
    bool same = dp_os_same_file(cur, fd) == 1;
    dp_os_close(cur);
    return same;
}

static bool anchor_exists(const char *nm) {
    int fd = dp_os_shm_open(nm, false, 0);
    if (fd >= 0) dp_os_close(fd);
    return fd >= 0 || fd == -EACCES;
}

/* [sweep]'s judge for a region it reaches: the region's own lock file (a
 * description of its file opened by path, or its System V set by key). */
static int region_live(const region_ref *r, dp_live *l) {
    return r->kind == 1 ? dp_live_of_path(r->path, l) : dp_live_of_key(r->key, l);
}

/* [sweep] and [remove] for one pool id: remove it if nobody holds it (or forced).
 * region: its region if known. Returns objects removed, or -EBUSY. */
static long remove_pool(uint64_t id, const region_ref *scanned, bool force, bool sweeping) {
    region_ref cur, *region = NULL;
    if (scanned) {
        cur = *scanned;
        region = &cur;
    }
    char nm[64];
    dp_life_anchor_name(id, nm, sizeof nm);
    dp_live l = {DP_LIVE_NONE, -1, -1};
    int fd = -1;
    if (region) { /* S1..S3 on the region's locks: every process of the pool holds them */
        int r = region_live(region, &l);
        if (r < 0 && r != -ENOENT && !force) return -EBUSY; /* cannot tell: never guess "nobody" */
        if (r == 0) {
            if (dp_live_life_excl(&l, 0) != 0) { /* someone joins, leaves or cleans it now */
                dp_live_drop(&l);
                return -EBUSY;
            }
            DP_INJECT("life.remove.locked");
            if (!force && dp_live_anyone_present(&l) != 0) {
                dp_live_life_release(&l);
                dp_live_drop(&l);
                return -EBUSY;
            }
        } else if (region->kind == 1) {
            region = NULL; /* gone since the scan */
        } /* (System V without its set: nobody can be present; the anchor says the rest) */
    }
    if (l.kind == DP_LIVE_NONE) { /* no region to ask: the anchor's own locks ([sweep]) */
        fd = dp_os_shm_open(nm, false, 0);
        if (fd < 0 && fd != -ENOENT && !force) return -EBUSY; /* cannot tell: never guess "nobody" */
        if (fd >= 0) {
            if (dp_os_ofd_trylock(fd, DP_ANCHOR_LIFE) != 0) { /* someone joins or cleans it now */
                dp_os_close(fd);
                return -EBUSY;
            }
            DP_INJECT("life.remove.locked");
            /* ([life]: the name must still lead to what we locked) */
            if (!anchor_named_path(nm, fd) || (!force && dp_os_ofd_test(fd, DP_ANCHOR_PRESENCE) != 0)) {
                dp_life_anchor_drop(fd);
                return -EBUSY;
            }
        }
    }
    long n = -EBUSY;
    bool anchored = l.kind != DP_LIVE_NONE ? anchor_exists(nm) : fd >= 0;
    if (region && !region_refresh(region)) region = NULL; /* gone, or not this pool's any more */
    /* a published region without an anchor (created where none could be
     * made): whether it closed cleanly is unknown, so a sweep keeps it */
    if (!anchored && sweeping && region && region->magic == DP_MAGIC) {
        n = 0;
    } else if (force || !region || !region_held(region)) { /* belt and braces: slots and creation */
        n = (long)dp_life_remove_objects(id, -1);
        /* a sweep keeps a pool whose last process left cleanly: it persists */
        bool keep = sweeping && region && region->magic == DP_MAGIC && region->closed == 1;
        if (region && !keep) n += (long)remove_region(region);
        if (!keep && anchored && dp_os_shm_unlink(nm) == 0) n++;
    }
    if (fd >= 0) dp_life_anchor_drop(fd);
    if (l.kind != DP_LIVE_NONE) {
        dp_live_life_release(&l);
        dp_live_drop(&l);
    }
    return n;
}

int dsmpool_sweep(size_t *removed) {
    dp_clear_error();
    found f = {0};
    scan_all(&f);
    DP_INJECT("life.sweep.scanned");
    size_t n = 0;
    for (size_t i = 0; i < f.nids; i++) {
        const region_ref *reg = region_of(&f, f.ids[i]);
        if (reg && reg->format) continue; /* [other formats]: another format's pool is not ours to judge */
        long r = remove_pool(f.ids[i], reg, false, true);
        if (r > 0) n += (size_t)r;
    }
    for (size_t i = 0; i < f.nhalf; i++) /* still the segment we saw, still without a creator */
        if (region_refresh(&f.half[i]) && sysv_half_built(f.half[i].key, 0)) n += remove_region(&f.half[i]);
    free(f.regions);
    free(f.ids);
    if (removed) *removed = n;
    return 0;
}

/* [other formats], forced: the region, by the name it was found under, if it is
 * still that region (the same format and pool id, read again: a name is
 * trusted only once it still leads to what was judged); its fallback
 * objects and anchor only if its claim on the pool id holds, and then as a
 * sweep judges them (presence is the same anchor byte in every format). */
static long remove_other(const region_ref *r) {
    dp_header *h = malloc(sizeof *h);
    if (!h) return -ENOMEM;
    region_ref again = {0};
    bool same = region_peek(r, h) == 0 && other_format(h, &again) && again.format == r->format &&
                again.id == r->id;
    free(h);
    if (!same) return -ESTALE; /* removed or replaced since the scan */
    long n = (long)remove_region(r);
    if (r->claims) {
        long m = remove_pool(r->id, NULL, false, true);
        if (m > 0) n += m;
    }
    return n;
}

int dp_life_remove(const char *name, bool force, int backing) {
    found f = {0};
    scan_all(&f);
    int32_t key = 0;
    dp_os_sysv_key(name, &key);
    /* a POSIX name begins with '/', a System V one does not (region.c check_name) */
    bool files = (backing < 0 || backing == DSMPOOL_BACKING_POSIX) && name[0] == '/';
    bool sysv = (backing < 0 || backing == DSMPOOL_BACKING_SYSV) && name[0] != '/';
    int matched = 0, busy = 0, changed = 0;
    region_ref other = {0};
    for (size_t k = 0; k < f.nregions; k++) { /* a POSIX name (/dev/shm or hugetlbfs), a System V key */
        const region_ref *r = &f.regions[k];
        const char *base = strrchr(r->path, '/');
        if (!((files && r->kind == 1 && base && !strcmp(base, name)) || (sysv && r->kind == 2 && r->key == key)))
            continue;
        if (r->format && !force) { /* [other formats]: whether it is held, only its own library can say */
            other = *r;
            continue;
        }
        matched++;
        long rr = r->format ? remove_other(r) : remove_pool(r->id, r, force, false);
        changed += rr == -ESTALE;
        busy += rr < 0 && rr != -ESTALE;
    }
    for (size_t k = 0; k < f.nhalf && sysv; k++)
        if (f.half[k].key == key) {
            matched++;
            busy += !(region_refresh(&f.half[k]) && sysv_half_built(key, 0) && remove_region(&f.half[k]));
        }
    free(f.regions);
    free(f.ids);
    if (changed && !busy)
        return dp_fail(-EAGAIN, "pool %s changed while it was being removed (another process removed or "
                       "replaced it): look again", name);
    if (busy)
        return dp_fail(-EBUSY, "pool %s is held by a live process (or one is creating or attaching it); it is "
                       "not removed%s", name, force ? "" : " (force removes it anyway)");
    if (matched) return 0;
    if (other.format) {
        char by[160];
        other_by(&other, by, sizeof by);
        return dp_fail(-EPROTO, "pool %s was made by %s; this library, dsmpool %s, reads region format %u "
                       "(header %zu bytes) and cannot tell whether a process of it lives: remove it with "
                       "the library or tool that made it, or with force (dsmpool-inspect --destroy %s "
                       "--force) once no process of it runs",
                       name, by, DSMPOOL_VERSION_STRING, DP_FORMAT_VERSION, sizeof(dp_header), name);
    }
    bool exists = false;
    if (files) {
        int fd = dp_os_shm_open(name, false, 0);
        exists = fd >= 0 || fd == -EACCES;
        if (fd >= 0) dp_os_close(fd);
    }
    if (sysv) exists |= dp_os_sysv_find(key) >= 0;
    return exists ? dp_fail(-EPROTO, "%s is not a dsmpool pool of this format (or this process may not read "
                            "it); it is not removed", name)
                  : dp_fail(-ENOENT, "no pool named %s", name);
}

int dsmpool_remove(const char *name, bool force) {
    dp_clear_error();
    if (!name || !*name) return dp_fail(-EINVAL, "name must not be empty");
    if (strlen(name) > DP_NAME_MAX) return dp_fail(-EINVAL, "name too long");
    return dp_life_remove(name, force, -1);
}

/* ---- the list (dsmpool-inspect --list) --------------------------------------- */

/* [sweep]'s scan and its judges, but read-only: no lock is taken, only tested
 * (a test that cannot be made counts as held, as in the sweep). */

typedef struct list_ctx {
    dp_list_entry *e;
    size_t n;
} list_ctx;

static bool count_objects(const char *name, void *arg) {
    list_ctx *c = arg;
    uint64_t id;
    bool anchor;
    if (!dp_life_parse_id(name, &id, &anchor)) return true;
    for (size_t i = 0; i < c->n; i++) {
        if (c->e[i].id != id) continue;
        if (anchor) c->e[i].anchor = true;
        else c->e[i].fallback_objects++;
    }
    return true;
}

static bool anchor_present(uint64_t id) {
    char path[96];
    snprintf(path, sizeof path, "/dev/shm/dsmpool.%016llx", (unsigned long long)id);
    int fd = dp_os_file_open_ro(path);
    if (fd < 0) return fd != -ENOENT;
    bool held = dp_os_ofd_test(fd, DP_ANCHOR_PRESENCE) != 0;
    dp_os_close(fd);
    return held;
}

/* Is anyone present in the region ([presence]), tested, not taken? (A question
 * that cannot be asked is answered yes.) */
static bool region_present(const region_ref *r) {
    dp_live l = {DP_LIVE_NONE, -1, -1};
    if (r->kind == 1) {
        int fd = dp_os_file_open_ro(r->path);
        if (fd < 0) return fd != -ENOENT;
        l.kind = DP_LIVE_OFD;
        l.fd = fd;
    } else if (dp_live_of_key(r->key, &l) != 0) {
        return false; /* no set: nobody can be present */
    }
    bool present = dp_live_anyone_present(&l) != 0;
    if (l.fd >= 0) dp_os_close(l.fd);
    return present;
}

static bool creation_held(const region_ref *r) {
    if (r->kind == 1) {
        int fd = dp_os_file_open_ro(r->path);
        if (fd < 0) return fd != -ENOENT;
        bool held = dp_os_ofd_test(fd, DP_LOCK_CREATE) != 0;
        dp_os_close(fd);
        return held;
    }
    int sem = dp_os_sem_get(r->key);
    return sem >= 0 ? dp_os_sem_test(sem, DP_LOCK_CREATE) != 0 : sem != -ENOENT;
}

/* The creation name, bounded (a header is read again: the scan keeps none). */
static void region_name(const region_ref *r, char *buf, size_t n) {
    buf[0] = 0;
    dp_header *h = malloc(sizeof *h);
    if (!h) return;
    int rr = r->kind == 1 || r->kind == 2 ? region_peek(r, h) : -ENOENT;
    if (rr == 0 && header_of(h) && h->pool_id == r->id) {
        h->name[DP_NAME_MAX] = 0; /* the copy is ours: bound it */
        snprintf(buf, n, "%s", h->name);
    }
    free(h);
}

static void list_where(dp_list_entry *e, const region_ref *reg) {
    e->kind = reg->kind == 1 ? DP_LIST_FILE : DP_LIST_SYSV;
    snprintf(e->path, sizeof e->path, "%s", reg->kind == 1 ? reg->path : "");
    e->key = reg->key;
    e->shmid = reg->kind == 2 ? reg->shmid : -1;
}

/* [other formats]: a region of another format, as its header's stable part says;
 * its pool id only where its claim holds. */
static void list_other(dp_list_entry *e, const region_ref *reg) {
    e->id = reg->claims ? reg->id : 0;
    list_where(e, reg);
    e->state = DP_LIST_OTHER_FORMAT;
    e->format = reg->format;
    e->lib_version = reg->lib;
    e->header_size = reg->hsize;
}

int dp_life_list(dp_list_entry **out, size_t *n) {
    found f = {0};
    scan_all(&f);
    list_ctx c = {calloc(f.nids + f.nhalf + f.nregions + 1, sizeof(dp_list_entry)), 0};
    if (!c.e) {
        free(f.regions);
        free(f.ids);
        return dp_fail(-ENOMEM, "out of memory listing pools");
    }
    for (size_t i = 0; i < f.nids; i++) {
        const region_ref *reg = region_of(&f, f.ids[i]);
        if (reg && reg->format) continue; /* [other formats]: listed with its region, below */
        dp_list_entry *e = &c.e[c.n++];
        e->id = f.ids[i];
        e->shmid = -1;
        e->present = anchor_present(e->id) || (reg && !reg->format && region_present(reg));
        if (!reg) { /* an anonymous or memfd pool (or what one left behind) */
            e->kind = DP_LIST_NO_REGION;
            e->state = e->present ? DP_LIST_LIVE : DP_LIST_DEAD;
            continue;
        }
        list_where(e, reg);
        region_name(reg, e->name, sizeof e->name);
        e->slots_held = region_held(reg);
        if (reg->magic == DP_MAGIC_CREATING) e->state = creation_held(reg) ? DP_LIST_CREATING : DP_LIST_HALF;
        else if (e->present || e->slots_held) e->state = DP_LIST_LIVE;
        else e->state = reg->closed == 1 ? DP_LIST_CLOSED : DP_LIST_DEAD;
    }
    for (size_t k = 0; k < f.nregions; k++) /* [other formats]: no lock of its format is read as if ours */
        if (f.regions[k].format) list_other(&c.e[c.n++], &f.regions[k]);
    for (size_t i = 0; i < f.nhalf; i++) { /* System V segments of creators that died before the header */
        dp_list_entry *e = &c.e[c.n++];
        e->kind = DP_LIST_SYSV;
        e->state = DP_LIST_HALF;
        e->key = f.half[i].key;
        e->shmid = f.half[i].shmid;
    }
    dp_os_dir_each("/dev/shm", count_objects, &c);
    free(f.regions);
    free(f.ids);
    *out = c.e;
    *n = c.n;
    return 0;
}
