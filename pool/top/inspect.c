/*
 * inspect.c -- a read-only view of a pool, for tools (dsmpool-inspect).
 *
 * Layer: beside the checker at the top; it reads every layer's structures
 * and changes none. It never joins a pool: no slot, no presence, no
 * liveness lock, so looking at a pool changes nothing an operator would
 * look at (the slot count above all).
 *
 * Rules
 *   [read-only] The region is mapped PROT_READ (MAP_SHARED, or SHM_RDONLY): a bug
 *      here that tried to write would fault, never scribble. The header is
 *      validated by region.c's own [read-only] (dp_region_view: a private copy,
 *      the layout recomputed and compared, the size against the object's),
 *      and the view built from the copy, as attach does.
 *   [snapshots] Every value read from shared memory after that is a snapshot that
 *      may change or be damaged: each is checked before it is used as an
 *      index, offset or address (states in range, blocks inside the data,
 *      record and registry links through dp_block_ok, loops bounded), and
 *      what fails a check is reported as damaged, not followed.
 *   [liveness] Liveness is judged as the library judges it (live.c): a slot's lock
 *      tested on a description of the region's file of our own (our open,
 *      or /proc/PID/fd and map_files, which make a new description), or the
 *      pool's System V semaphore. An anonymous pool's lock file is a
 *      separate memfd: its slots' liveness is not told (-1).
 *   [through a process] Reaching a pool through a process (--pid): shared mappings at offset
 *      0 whose first bytes are a dsmpool header. A memfd through the
 *      process's descriptor (/proc/PID/fd/N, the same inode), a named file
 *      by its path, System V by the id the mapping names, an anonymous one
 *      through /proc/PID/map_files (the kernel lets only CAP_SYS_ADMIN or
 *      CAP_CHECKPOINT_RESTORE open those: otherwise it is counted as denied
 *      and the message says so).
 *
 * Bound: a region truncated by someone else while it is mapped here would
 * raise SIGBUS on a read past its new end, as it would in any attached
 * process; the size is checked once, at mapping time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_top.h"
#include "dp_os.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

enum { JUDGE_NONE = 0, JUDGE_OFD = 1, JUDGE_SEM = 2 };

struct dp_insp {
    struct dsmpool *p; /* the view: base, geo, procs, segs; p->magic stays 0 */
    char how[4608];
    int judge;         /* JUDGE_*: how slots' liveness is told ([liveness]) */
    int semid;
};

static dp_insp *insp_new(int backing, const char *name) {
    dp_insp *in = calloc(1, sizeof *in);
    struct dsmpool *p = calloc(1, sizeof *p);
    if (!in || !p) {
        free(in);
        free(p);
        return NULL;
    }
    p->fd = p->shmid = p->anchor = p->shmdir = -1;
    p->live.fd = p->live.semid = -1;
    p->backing = (dsmpool_backing)backing;
    if (name) snprintf(p->name, sizeof p->name, "%s", name);
    in->p = p;
    in->semid = -1;
    return in;
}

void dp_inspect_close(dp_insp *in) {
    if (!in) return;
    struct dsmpool *p = in->p;
    if (p->base) {
        if (p->shmid >= 0) dp_os_sysv_detach(p->base);
        dp_os_unmap(p->base, p->size);
    }
    if (p->fd >= 0) dp_os_close(p->fd);
    free(p);
    free(in);
}

/* Where to map: the header's alignment if it is a sane one (it is checked
 * again, with everything else, once mapped), at least the page size. */
static size_t map_align_of(const dp_header *h) {
    size_t a = h->map_align >= 2 * MIB && h->map_align <= GIB && !(h->map_align & (h->map_align - 1))
                   ? h->map_align : 2 * MIB;
    if ((h->page_size == 2 * MIB || h->page_size == GIB) && a < h->page_size) a = h->page_size;
    return a;
}

/* [read-only] for an object reached through a file descriptor (taken over). */
static int view_fd(dp_insp *in, int fd) {
    struct dsmpool *p = in->p;
    p->fd = fd;
    size_t real;
    int r = dp_os_fd_size(fd, &real);
    if (r) return dp_fail(r, "fstat failed: %s", strerror(-r));
    if (real < sizeof(dp_header) || real % 4096)
        return dp_fail(-EPROTO, "object of %zu bytes cannot be a dsmpool region", real);
    dp_header *h = malloc(sizeof *h);
    if (!h) return dp_fail(-ENOMEM, "out of memory");
    r = dp_region_peek_fd(fd, h);
    size_t align = r == 0 ? map_align_of(h) : 2 * MIB;
    free(h);
    if (r) return dp_fail(r == -ENODATA ? -EPROTO : r, "cannot read the header: %s", strerror(-r));
    void *va;
    if ((r = dp_os_reserve_va(real, align, &va)) != 0) return dp_fail(r, "cannot reserve address space");
    if ((r = dp_os_map_fd_ro(va, real, fd)) != 0) {
        dp_os_unmap(va, real);
        return dp_fail(r, "read-only mmap of the region failed: %s", strerror(-r));
    }
    p->base = va;
    p->size = real;
    if ((r = dp_region_view(p, real)) != 0) return r;
    in->judge = dp_backing((dsmpool_backing)p->geo.backing)->lock_reachable ? JUDGE_OFD : JUDGE_NONE;
    return 0;
}

static int view_sysv(dp_insp *in, int shmid, int32_t key) {
    struct dsmpool *p = in->p;
    size_t real;
    int r = dp_os_sysv_size(shmid, &real);
    if (r) return dp_fail(r, "IPC_STAT failed: %s", strerror(-r));
    if (real < sizeof(dp_header)) return dp_fail(-EPROTO, "segment too small to be a dsmpool region");
    void *va;
    if ((r = dp_os_reserve_va(real, 2 * MIB, &va)) != 0) return dp_fail(r, "cannot reserve address space");
    if ((r = dp_os_sysv_attach_ro(shmid, va)) != 0) {
        dp_os_unmap(va, real);
        return dp_fail(r, "read-only shmat failed: %s", strerror(-r));
    }
    p->shmid = shmid;
    p->sysv_key = key;
    p->base = va;
    p->size = real;
    if ((r = dp_region_view(p, real)) != 0) return r;
    int sem = dp_os_sem_get(key);
    in->judge = sem >= 0 ? JUDGE_SEM : JUDGE_NONE;
    in->semid = sem;
    return 0;
}

int dp_inspect_open_name(const char *name, dp_insp **out) {
    dp_clear_error();
    if (!name || !*name) return dp_fail(-EINVAL, "name must not be empty");
    if (strlen(name) > DP_NAME_MAX) return dp_fail(-EINVAL, "name too long");
    bool posix = name[0] == '/';
    dp_insp *in = insp_new(posix ? DSMPOOL_BACKING_POSIX : DSMPOOL_BACKING_SYSV, name);
    if (!in) return dp_fail(-ENOMEM, "out of memory");
    int r;
    if (posix) { /* as attach finds it (region.c): /dev/shm, then the hugetlbfs mounts */
        if (strchr(name + 1, '/') || !name[1]) {
            dp_inspect_close(in);
            return dp_fail(-EINVAL, "POSIX name must be \"/something\" with no other '/': \"%s\"", name);
        }
        char path[4096];
        snprintf(path, sizeof path, "/dev/shm%s", name);
        r = dp_os_file_open_ro(path);
        size_t sizes[2] = {2 * MIB, GIB};
        for (int i = 0; i < 2 && r == -ENOENT; i++) {
            char dir[4096 - DP_NAME_MAX - 1];
            if (dp_os_hugetlbfs_dir(sizes[i], dir, sizeof dir) != 0) continue;
            snprintf(path, sizeof path, "%s%s", dir, name);
            if ((r = dp_os_file_open_ro(path)) >= 0) snprintf(in->p->path, sizeof in->p->path, "%s", path);
        }
        if (r < 0) {
            dp_inspect_close(in);
            return r == -ENOENT ? dp_fail(-ENOENT, "no pool named %s", name)
                                : dp_fail(r, "opening %s failed: %s", name, strerror(-r));
        }
        snprintf(in->how, sizeof in->how, "name %s (%s)", name, path);
        r = view_fd(in, r);
    } else {
        int32_t key = 0;
        dp_os_sysv_key(name, &key);
        int id = dp_os_sysv_find(key);
        if (id < 0) {
            dp_inspect_close(in);
            return id == -ENOENT ? dp_fail(-ENOENT, "no System V pool with key 0x%x (\"%s\")", (unsigned)key, name)
                                 : dp_fail(id, "shmget failed: %s", strerror(-id));
        }
        snprintf(in->how, sizeof in->how, "name %s (System V key 0x%x, id %d)", name, (unsigned)key, id);
        r = view_sysv(in, id, key);
    }
    if (r) {
        dp_inspect_close(in);
        return r;
    }
    *out = in;
    return 0;
}

/* ---- through a process ([through a process]) ------------------------------------------- */

typedef struct pid_ctx {
    pid_t pid;
    dp_insp **v;
    size_t n, cap;
    size_t denied;
    uint64_t seen[64]; /* inodes already looked at (one object, several mappings) */
    size_t nseen;
    int err;           /* the first error that is not "not a pool" */
    char msg[4608];
    /* the descriptor search */
    const char *want;
    uint64_t ino;
    int fd;
} pid_ctx;

static bool fd_match(int fdn, const char *target, void *arg) {
    pid_ctx *c = arg;
    if (strcmp(target, c->want) != 0) return true;
    char rel[32];
    snprintf(rel, sizeof rel, "fd/%d", fdn);
    int fd = dp_os_proc_open_ro(c->pid, rel);
    uint64_t ino;
    if (fd >= 0 && dp_os_fd_inode(fd, &ino) == 0 && ino == c->ino) {
        c->fd = fd;
        return false;
    }
    if (fd >= 0) dp_os_close(fd);
    return true;
}

static bool is_pool_header(int fd) {
    dp_header *h = malloc(sizeof *h);
    bool yes = h && dp_region_peek_fd(fd, h) == 0 && (h->magic == DP_MAGIC || h->magic == DP_MAGIC_CREATING);
    free(h);
    return yes;
}

static void pid_note(pid_ctx *c, int err, const char *fmt, const char *a, const char *b) {
    if (c->err) return;
    c->err = err;
    if (snprintf(c->msg, sizeof c->msg, fmt, a, b) >= (int)sizeof c->msg) /* a long note is cut: say so */
        memcpy(c->msg + sizeof c->msg - 4, "...", 4);
}

static void pid_add(pid_ctx *c, dp_insp *in) {
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 4;
        dp_insp **nv = realloc(c->v, nc * sizeof *nv);
        if (!nv) {
            dp_inspect_close(in);
            return;
        }
        c->v = nv;
        c->cap = nc;
    }
    c->v[c->n++] = in;
}

static bool pid_vma(const dp_os_vma *m, void *arg) {
    pid_ctx *c = arg;
    if (!m->shared || m->offset != 0 || m->end - m->start < 2 * MIB) return true; /* no region is smaller */
    for (size_t i = 0; i < c->nseen; i++)
        if (c->seen[i] == m->inode) return true;
    if (c->nseen < sizeof c->seen / sizeof *c->seen) c->seen[c->nseen++] = m->inode;
    char rel[64], where[4608];
    snprintf(rel, sizeof rel, "map_files/%llx-%llx", (unsigned long long)m->start, (unsigned long long)m->end);
    bool anon = !strncmp(m->path, "/dev/zero", 9);
    bool memfd = !strncmp(m->path, "/memfd:", 7);
    unsigned key;
    int fd = -1;
    if (!strncmp(m->path, "/SYSV", 5) && sscanf(m->path + 5, "%8x", &key) == 1) {
        dp_header *h = malloc(sizeof *h); /* System V: the inode is the id */
        bool pool = h && dp_region_peek_sysv((int)m->inode, h) == 0 &&
                    (h->magic == DP_MAGIC || h->magic == DP_MAGIC_CREATING);
        free(h);
        if (!pool) return true;
        dp_insp *in = insp_new(DSMPOOL_BACKING_SYSV, NULL);
        if (!in) return true;
        snprintf(in->how, sizeof in->how, "pid %d: System V id %llu (key 0x%x)", (int)c->pid,
                 (unsigned long long)m->inode, key);
        int r = view_sysv(in, (int)m->inode, (int32_t)key);
        if (r) {
            pid_note(c, r, "%s: %s", in->how, dsmpool_last_error());
            dp_inspect_close(in);
        } else {
            pid_add(c, in);
        }
        return true;
    }
    if (memfd) { /* the process's descriptor of it, if it keeps one (no privilege needed) */
        c->want = m->path;
        c->ino = m->inode;
        c->fd = -1;
        dp_os_proc_fds_each(c->pid, fd_match, c);
        fd = c->fd;
        if (fd >= 0) snprintf(where, sizeof where, "pid %d: %s, through its descriptor", (int)c->pid, m->path);
    }
    if (fd < 0 && !anon && !memfd && m->path[0] == '/' && !strstr(m->path, " (deleted)")) {
        fd = dp_os_file_open_ro(m->path); /* a named file (POSIX shm, hugetlbfs) */
        uint64_t ino;
        if (fd >= 0 && (dp_os_fd_inode(fd, &ino) != 0 || ino != m->inode)) {
            dp_os_close(fd);
            fd = -1;
        }
        if (fd >= 0) snprintf(where, sizeof where, "pid %d: %s", (int)c->pid, m->path);
    }
    if (fd < 0) {
        fd = dp_os_proc_open_ro(c->pid, rel);
        if (fd == -EPERM || fd == -EACCES) {
            if (anon || memfd) {
                c->denied++;
                char what[4300];
                snprintf(what, sizeof what, "%d/%s (%s)", (int)c->pid, rel, m->path);
                pid_note(c, -EPERM, "not permitted to open /proc/%s%s: the kernel opens another process's "
                         "mapped objects only for CAP_SYS_ADMIN (run as root)", what,
                         memfd ? ", and the process keeps no descriptor of it" : "");
            }
            return true;
        }
        if (fd < 0) return true;
        snprintf(where, sizeof where, "pid %d: %s, through /proc/%d/%s", (int)c->pid, m->path, (int)c->pid, rel);
    }
    if (!is_pool_header(fd)) {
        dp_os_close(fd);
        return true;
    }
    dp_insp *in = insp_new(anon ? DSMPOOL_BACKING_ANON : memfd ? DSMPOOL_BACKING_MEMFD : DSMPOOL_BACKING_POSIX,
                           NULL);
    if (!in) {
        dp_os_close(fd);
        return true;
    }
    snprintf(in->how, sizeof in->how, "%s", where);
    int r = view_fd(in, fd);
    if (r) {
        pid_note(c, r, "%s: %s", in->how, dsmpool_last_error());
        dp_inspect_close(in);
    } else {
        pid_add(c, in);
    }
    return true;
}

int dp_inspect_open_pid(pid_t pid, dp_insp ***out, size_t *n, size_t *denied) {
    dp_clear_error();
    if (pid <= 0) return dp_fail(-EINVAL, "bad pid %d", (int)pid);
    pid_ctx *c = calloc(1, sizeof *c);
    if (!c) return dp_fail(-ENOMEM, "out of memory");
    c->pid = pid;
    int r = dp_os_proc_maps_each(pid, pid_vma, c);
    if (r) {
        free(c);
        return r == -ENOENT ? dp_fail(-ESRCH, "no process %d", (int)pid)
                            : dp_fail(r, "cannot read /proc/%d/maps: %s", (int)pid, strerror(-r));
    }
    *out = c->v;
    *n = c->n;
    *denied = c->denied;
    /* with views, the message is a note on what was left out; without, why */
    size_t got = c->n;
    r = 0;
    if (c->err) r = dp_fail(c->err, "%s", c->msg);
    else if (!got) r = dp_fail(-ENOENT, "process %d maps no dsmpool region", (int)pid);
    else dp_clear_error(); /* nothing left out: no note */
    free(c);
    return got ? 0 : r;
}

/* ---- what the view says ------------------------------------------------------ */

const dp_header *dp_inspect_header(const dp_insp *in) { return &in->p->geo; }
const char *dp_inspect_how(const dp_insp *in) { return in->how; }

void dp_inspect_flags(dp_insp *in, dp_insp_flags *out) {
    const dp_header *h = in->p->hdr;
    /* acquire: pairs with the releases that set them (dp_life_join, last_out, dsmpool_destroy) */
    out->closed = dp_load_acquire(&h->closed) == 1;
    out->destroyed = dp_load_acquire(&h->destroyed) != 0;
    out->sweep_due = dp_load_relaxed(&h->sweep_needed) || dp_load_relaxed(&h->lost_due); /* relaxed: flags */
    out->liveness = in->judge != JUDGE_NONE;
}

void dp_inspect_stats(dp_insp *in, dsmpool_stats *out) {
    memset(out, 0, sizeof *out);
    dp_stats_fill(in->p, out);
    out->huge_mapped_bytes = 0; /* it is about this process's mapping, which touched nothing */
}

typedef struct rec_count {
    uint32_t active, other;
} rec_count;

static void count_rec(struct dsmpool *p, dp_a64 *r, void *arg) {
    rec_count *c = arg;
    uint64_t v = dp_load_acquire(r); /* acquire: pairs with seg_ref_bracketed's release store of the record */
    if (!v) return;
    if (DP_REC_ST(v) == DP_REC_ACTIVE) c->active++;
    else c->other++;
}

static int alive(dp_insp *in, uint32_t slot) {
    int r = -1;
    if (in->judge == JUDGE_OFD) r = dp_os_ofd_test(in->p->fd, DP_LOCK_SLOT0 + slot);
    else if (in->judge == JUDGE_SEM) r = dp_os_sem_test(in->semid, (unsigned)(DP_LOCK_SLOT0 + slot));
    return r == 0 || r == 1 ? r : -1;
}

int dp_inspect_procs(dp_insp *in, dp_insp_proc **out, size_t *n) {
    struct dsmpool *p = in->p;
    dp_insp_proc *v = calloc(p->nprocs ? p->nprocs : 1, sizeof *v);
    if (!v) return dp_fail(-ENOMEM, "out of memory");
    size_t k = 0;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        uint64_t w = dp_load_acquire(&p->procs[i].state); /* acquire: pairs with dp_slot_claim's CAS */
        unsigned st = DP_SLOT_STATE(w);
        if (st == DP_SLOT_FREE) continue;
        dp_insp_proc *e = &v[k++];
        e->slot = i;
        e->state = st <= DP_SLOT_LEAVING ? st : 255;
        e->unguarded = DP_SLOT_FLAGS(w) & DP_SLOT_UNGUARDED;
        e->pid = (int32_t)DP_SLOT_PID(w);
        e->alive = e->unguarded ? -1 : alive(in, i);
        rec_count rc = {0, 0};
        dp_slot_records(p, i, count_rec, &rc); /* bounded; overflow links checked (proc.c) */
        e->records = rc.active;
        e->pending = rc.other;
        e->inflight = dp_load_relaxed(&p->procs[i].inflight); /* relaxed: a snapshot */
    }
    *out = v;
    *n = k;
    return 0;
}

/* Room for one more element in a growing snapshot array; false (and the
 * array freed) when out of memory. */
static bool room_for(void **v, size_t *cap, size_t k, size_t elem) {
    if (k < *cap) return true;
    void *nv = realloc(*v, 2 * *cap * elem);
    if (!nv) {
        free(*v);
        *v = NULL;
        return false;
    }
    *v = nv;
    *cap *= 2;
    return true;
}

int dp_inspect_segs(dp_insp *in, dp_insp_seg **out, size_t *n) {
    struct dsmpool *p = in->p;
    size_t cap = 64, k = 0;
    dp_insp_seg *v = malloc(cap * sizeof *v);
    if (!v) return dp_fail(-ENOMEM, "out of memory");
    for (uint64_t i = 0; i < p->nsegs; i++) {
        const dp_seg_desc *d = &p->segs[i];
        uint64_t w = dp_load_acquire(&d->state); /* acquire: pairs with seg_create_bracketed's LIVE CAS */
        unsigned st = DP_SEG_ST(w);
        if (st == DP_SEG_FREE) continue;
        void *vv = v;
        if (!room_for(&vv, &cap, k, sizeof *v)) return dp_fail(-ENOMEM, "out of memory");
        v = vv;
        dp_insp_seg *e = &v[k++];
        memset(e, 0, sizeof *e);
        e->index = i;
        e->handle = DP_HANDLE(DP_SEG_GEN(w), i);
        e->state = st;
        e->pinned = DP_SEG_PINNED(w);
        e->refs = st == DP_SEG_LIVE ? DP_SEG_COUNT(w) : 0;
        e->owner_slot = st != DP_SEG_LIVE && DP_SEG_COUNT(w) ? (int64_t)DP_SEG_COUNT(w) - 1 : -1;
        if (e->owner_slot >= (int64_t)p->nprocs) {
            e->owner_slot = -1;
            e->damaged = true;
        }
        uint64_t blk = dp_load_relaxed(&d->block), size = dp_load_relaxed(&d->size);
        e->flags = (uint32_t)dp_load_relaxed(&d->flags);
        e->area = e->flags & DP_SEG_AREA;
        e->sub = -1;
        e->fallback = blk == DP_BLOCK_FALLBACK;
        if (size > (1ull << 46)) {
            e->damaged = true;
            size = 0;
        }
        e->size = size;
        if (!blk || e->fallback) continue; /* INIT before its block is set, or an OS segment */
        uint64_t off = DP_BLOCK_OFF(blk);
        unsigned order = DP_BLOCK_ORDER(blk);
        uint64_t bytes = order <= DP_PA_MAX_ORDER ? DP_BLOCK_BYTES(blk) : 0;
        if (!bytes || !dp_block_ok(p, off, bytes) || size > bytes) {
            e->damaged = true;
            continue;
        }
        e->offset = off;
        e->order = order;
        for (uint32_t s = 0; s < p->nsub; s++) /* the layout from the validated copy */
            if (off >= p->geo.sub[s].data_off && off - p->geo.sub[s].data_off < p->geo.sub[s].geom.frames * DP_FRAME_SIZE)
                e->sub = (int)s;
    }
    *out = v;
    *n = k;
    return 0;
}

int dp_inspect_areas(dp_insp *in, dp_insp_area **out, size_t *n) {
    struct dsmpool *p = in->p;
    size_t cap = 8, k = 0;
    dp_insp_area *v = malloc(cap * sizeof *v);
    if (!v) return dp_fail(-ENOMEM, "out of memory");
    for (uint64_t i = 0; i < p->nsegs; i++) {
        uint64_t w = dp_load_acquire(&p->segs[i].state); /* acquire: pairs with seg_create_bracketed's LIVE CAS */
        if (DP_SEG_ST(w) == DP_SEG_FREE || !(dp_load_relaxed(&p->segs[i].flags) & DP_SEG_AREA)) continue;
        void *vv = v;
        if (!room_for(&vv, &cap, k, sizeof *v)) return dp_fail(-ENOMEM, "out of memory");
        v = vv;
        if (dp_area_inspect(p, i, &v[k]) == 0) k++; /* validates the control block itself */
    }
    *out = v;
    *n = k;
    return 0;
}

/* The name table (names.c); read only, every word validated ([read-only]). */
int dp_inspect_names(dp_insp *in, dp_insp_name **out, size_t *n) {
    struct dsmpool *p = in->p;
    uint64_t cap = p->geo.names_cap;
    *out = NULL;
    *n = 0;
    if (!p->names || cap > DSMPOOL_NAMES_MAX) return 0;
    dp_insp_name *v = calloc(cap ? cap : 1, sizeof *v);
    if (!v) return dp_fail(-ENOMEM, "out of memory");
    size_t k = 0;
    for (uint32_t i = 0; i < cap; i++) {
        const dp_name *e = &p->names[i];
        uint64_t w = dp_load_acquire(&e->state); /* acquire: READY's release (handle, size) */
        if (DP_NAME_ST(w) == DP_NAME_FREE) continue;
        dp_insp_name *x = &v[k++];
        x->index = i;
        x->state = DP_NAME_ST(w);
        x->kind = DP_NAME_KIND(w);
        x->handle = dp_load_relaxed(&e->handle);
        x->size = dp_load_relaxed(&e->size);
        x->pid = dp_load_relaxed(&e->pid);
        x->owner_slot = x->state == DP_NAME_INIT && DP_NAME_OWNER(w) ? (int64_t)DP_NAME_OWNER(w) - 1 : -1;
        size_t len = strnlen(e->name, sizeof e->name);
        x->damaged = (x->state != DP_NAME_INIT && x->state != DP_NAME_READY) ||
                     (x->kind != DP_NAME_SEG && x->kind != DP_NAME_AREA) || len > DSMPOOL_NAME_MAX ||
                     x->owner_slot >= (int64_t)p->nprocs;
        memcpy(x->name, e->name, len > DSMPOOL_NAME_MAX ? DSMPOOL_NAME_MAX : len);
        for (char *c = x->name; *c; c++) /* names.c writes printable ASCII only: anything else is damage, */
            if (*c < 0x20 || *c > 0x7e) { /* and never reaches an operator's terminal as it is */
                *c = '?';
                x->damaged = true;
            }
        if (x->state == DP_NAME_READY && !x->damaged)
            x->object_live = x->kind == DP_NAME_AREA ? dp_area_live(p, x->handle)
                                                     : dp_seg_live(p, x->handle, NULL, NULL);
    }
    *out = v;
    *n = k;
    return 0;
}
