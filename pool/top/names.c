/*
 * names.c -- named segments and areas: find or create by name, race-free
 * across processes.
 *
 * Layer: on top, beside recovery and the checker; it calls segments and
 * areas through their public calls and dp_seg_live / dp_area_live, and the
 * ledger's liveness lock; nothing below knows it exists.
 *
 * The table: DSMPOOL_NAMES_MAX entries in the region (dp_name), each a state
 * word [gen][owner slot + 1][kind][st], the object's handle and size, the
 * creator's pid and the name.
 *
 * Rules
 *   [under the lock] Every search and every claim of an entry happens while holding
 *      DP_LOCK_NAMES: the kernel's lock on a byte of the pool's lock file (a
 *      semaphore for System V), on this process's own description (live.c),
 *      with names_mutex first so that one thread of a process at a time
 *      holds it (a description never conflicts with itself). The kernel
 *      drops it when its holder dies, so a dead holder blocks nobody. It is
 *      held for a search of the table only, never while an object is made
 *      or init runs.
 *   [one entry] A name is in at most one entry whose state is INIT or READY: the
 *      search for it and the claim of a FREE entry are one step under the
 *      lock. A claim writes name, pid and kind while the entry is FREE, then
 *      stores INIT(gen + 1, own slot) (release).
 *   [creator] The claimer (the owner) makes the object outside the lock, runs init,
 *      stores handle and size, then CASes INIT -> READY (release). If making
 *      the object or init fails, it destroys what it made and CASes INIT ->
 *      FREE. Only the owner moves its entry out of INIT, except [waiters].
 *   [waiters] A caller that finds the name INIT waits (outside the lock) until it
 *      is READY or FREE, 30 s at most (-EBUSY), not at all with NOWAIT
 *      (-EAGAIN). It takes the entry over -- CAS INIT -> FREE, then searches
 *      again -- only when the owner is certainly gone: its slot is free, or
 *      has been claimed again since (the slot's claim count, kept in the
 *      entry: pids repeat across pid namespaces), or its liveness lock is
 *      free (the oracle recovery uses). The dead owner's half-made object is
 *      its slot's, released by recovery. A thread whose init opens the name
 *      it is creating gets -EDEADLK, not a wait for itself.
 *   [gone objects] A READY entry whose object is gone -- segment no longer LIVE with
 *      that handle's generation, area destroyed -- is a free name: whoever
 *      sees it under the lock CASes READY -> FREE. So a name lives exactly
 *      as long as its object, without any hook from the layers below. A
 *      caller that finds the object alive attaches by handle; if it died in
 *      between (-ESTALE) it searches again (within [waiters]'s bound); if it is
 *      alive but cannot be mapped here (an OS segment whose file was
 *      removed), the attach's error is the answer.
 *   [validated] Everything read from the table is validated before use: states and
 *      kinds against their enums, owner slots against the slot count, names
 *      by a bounded length, handles by the segment layer's own checks. An
 *      owner whose READY CAS fails (its word was changed) gives back what it
 *      made and answers -EAGAIN.
 *
 * Crash bound: a process that dies holding the lock loses nothing ([under the lock];
 * a half-written FREE entry is never read). One that dies in INIT leaves
 * its entry to the next caller ([waiters]) and its object to recovery. As for
 * recovery (live.c's bound), a dead process's locks -- the names lock, its
 * slot's -- stay held while a fork()ed child of it that never called the
 * library keeps its lock description: callers wait their 30 s and get
 * -EBUSY until that child calls, execs or exits.
 *
 * Memory ordering: the lock is the kernel's (a system call each way: full
 * barriers). INIT is stored with release after the name; READY is CASed
 * with release after handle and size, and read with acquire before them.
 * Entries leave READY and INIT by CAS on the whole word, generation
 * included, so no two callers free one entry's one life twice.
 */
#include <stdio.h>
#include <string.h>

#include "dp_top.h"
#include "dp_os.h"

#define NAMES_WAIT_NS (30ull * 1000000000ull)

/* The flags each call knows: its kind's creation flags, as
 * dsmpool_seg_create and dsmpool_area_create accept them (built from the
 * public header: those layers' own masks are theirs), plus the named ones.
 * Checked before the lookup: an existing name never reaches creation's
 * check. */
#define NAMED_SEG_FLAGS (DSMPOOL_SEG_NO_FALLBACK | DSMPOOL_SEG_LOCAL_ONLY | DSMPOOL_SEG_INTERLEAVE | \
                         DSMPOOL_SEG_ON_NODE(0xff) | DSMPOOL_SEG_HUGE_ROUND | DSMPOOL_NAMED_NOWAIT)
#define NAMED_SEG_NODE_BIT DSMPOOL_SEG_ON_NODE(0)
#define NAMED_AREA_FLAGS (DSMPOOL_AREA_CHECKED | DSMPOOL_AREA_NO_FALLBACK | DSMPOOL_AREA_MID_CHUNKS | \
                          DSMPOOL_NAMED_NOWAIT | DSMPOOL_NAMED_OPEN_ONLY)

static int name_check(const char *name) {
    if (!name) return dp_fail(-EINVAL, "name is NULL");
    size_t n = strnlen(name, DSMPOOL_NAME_MAX + 1);
    if (n == 0 || n > DSMPOOL_NAME_MAX)
        return dp_fail(-EINVAL, "a name is 1 to %d bytes (got %s)", DSMPOOL_NAME_MAX, n ? "more" : "none");
    for (size_t i = 0; i < n; i++)
        if (name[i] < 0x20 || name[i] > 0x7e)
            return dp_fail(-EINVAL, "a name is printable ASCII (byte %zu is 0x%02x)", i,
                           (unsigned)(unsigned char)name[i]);
    return 0;
}

static void backoff(unsigned k) { dp_os_sleep_ns(k < 10 ? 100000ull << (k / 2) : 5000000ull); }

/* [under the lock]. */
static int names_lock(dsmpool *p, unsigned flags, uint64_t deadline) {
    if (!dp_live_guarded(p))
        return dp_fail(-ENOLCK, "named objects need this process's liveness lock on the pool, which "
                       "it could not make (its lock file could not be opened)");
    for (unsigned k = 0;; k++) {
        int r = pthread_mutex_trylock(&p->names_mutex);
        if (r == 0) {
            r = dp_live_take(p, DP_LOCK_NAMES);
            if (r == 0) return 0;
            pthread_mutex_unlock(&p->names_mutex);
            if (r != -EAGAIN)
                return dp_fail(r, "cannot take the pool's name lock: %s", strerror(-r));
        }
        if (flags & DSMPOOL_NAMED_NOWAIT)
            return dp_fail(-EAGAIN, "another caller is searching the pool's names; try again");
        if (dp_os_now_ns() > deadline)
            return dp_fail(-EBUSY, "the pool's name lock has been held for 30 s (a process stopped "
                           "while searching the names?)");
        backoff(k);
    }
}

static void names_unlock(dsmpool *p) {
    dp_live_give(p, DP_LOCK_NAMES);
    pthread_mutex_unlock(&p->names_mutex);
}

static bool entry_is(const dp_name *e, const char *name) {
    return strnlen(e->name, sizeof e->name) < sizeof e->name && strcmp(e->name, name) == 0;
}

/* [gone objects]: is a READY entry's object still there? */
static bool object_live(dsmpool *p, unsigned kind, dsmpool_handle h) {
    return kind == DP_NAME_AREA ? dp_area_live(p, h) : dp_seg_live(p, h, NULL, NULL);
}

/* [waiters]: is an INIT entry's owner certainly gone? */
static bool owner_gone(dsmpool *p, uint64_t w, const dp_name *e) {
    uint32_t o = DP_NAME_OWNER(w);
    if (o == 0 || o > p->nprocs) return true; /* ([validated]: no such slot) */
    uint64_t sw = dp_load_acquire(&p->procs[o - 1].state); /* acquire: the slot's claim */
    if (DP_SLOT_STATE(sw) == DP_SLOT_FREE) return true;
    /* acquire: pairs with dp_slot_claim's release of claims. Another claim since ours
     * means the owner left (a pid could be the same: pid namespaces) */
    if (dp_load_acquire(&p->procs[o - 1].claims) != dp_load_relaxed(&e->claim)) return true;
    return !dp_slot_alive(p, o - 1);
}

/* The names this thread is creating (running init for): an init that
 * opens its own name would wait for itself. */
#define NAMES_NEST 8
typedef struct creating_name {
    const dsmpool *pool;
    uint32_t idx;
} creating_name;
static _Thread_local creating_name creating[NAMES_NEST];
static _Thread_local unsigned ncreating;

typedef struct found {
    int what;      /* 0 nothing (claimed if asked), 1 READY, 2 INIT (wait) */
    uint32_t idx;
    uint64_t word;
    dsmpool_handle handle;
    uint64_t size;
} found;

/* Under the lock: search; free dead names ([waiters] and [gone objects]); claim if asked and
 * absent. */
static int search(dsmpool *p, const char *name, unsigned kind, bool claim, found *f) {
    uint32_t n = (uint32_t)p->geo.names_cap, free_idx = n;
    memset(f, 0, sizeof *f);
    for (uint32_t i = 0; i < n; i++) {
        dp_name *e = &p->names[i];
        uint64_t w = dp_load_acquire(&e->state); /* acquire: READY's / INIT's release */
        unsigned st = DP_NAME_ST(w), k = DP_NAME_KIND(w);
        if (st == DP_NAME_FREE) {
            if (free_idx == n) free_idx = i;
            continue;
        }
        if ((st != DP_NAME_INIT && st != DP_NAME_READY) || (k != DP_NAME_SEG && k != DP_NAME_AREA)) {
            /* [validated]: a scribbled word: the entry is nobody's; free it */
            dp_cas_acq_rel(&e->state, &w, DP_NAME_WORD(DP_NAME_GEN(w), 0, 0, DP_NAME_FREE));
            continue;
        }
        dsmpool_handle h = dp_load_relaxed(&e->handle);
        if (st == DP_NAME_READY && !object_live(p, k, h)) { /* [gone objects] */
            /* acq_rel: a later claim of the entry sees it free */
            if (dp_cas_acq_rel(&e->state, &w, DP_NAME_WORD(DP_NAME_GEN(w), 0, 0, DP_NAME_FREE)) &&
                free_idx == n)
                free_idx = i;
            continue;
        }
        if (st == DP_NAME_INIT && owner_gone(p, w, e)) { /* [waiters] */
            if (dp_cas_acq_rel(&e->state, &w, DP_NAME_WORD(DP_NAME_GEN(w), 0, 0, DP_NAME_FREE)) &&
                free_idx == n)
                free_idx = i;
            continue;
        }
        if (!entry_is(e, name)) continue;
        if (k != kind)
            return dp_fail(-EEXIST, "'%s' names %s in this pool", name,
                           k == DP_NAME_AREA ? "an area" : "a segment");
        f->idx = i;
        f->word = w;
        f->handle = h;
        f->size = dp_load_relaxed(&e->size);
        f->what = st == DP_NAME_READY ? 1 : 2;
        return 0;
    }
    if (!claim) return 0;
    if (free_idx == n)
        return dp_fail(-ENOSPC, "the pool's name table is full (%d names in use)", DSMPOOL_NAMES_MAX);
    dp_name *e = &p->names[free_idx];
    uint64_t w = dp_load_relaxed(&e->state); /* relaxed: FREE, and only we claim under the lock */
    if (DP_NAME_ST(w) != DP_NAME_FREE) return dp_fail(-EAGAIN, "name table entry changed under the lock");
    memset(e->name, 0, sizeof e->name);
    memcpy(e->name, name, strlen(name));
    dp_store_relaxed(&e->pid, (uint64_t)(uint32_t)dp_os_getpid());
    dp_store_relaxed(&e->claim, p->claim);
    dp_store_relaxed(&e->handle, 0);
    dp_store_relaxed(&e->size, 0);
    f->idx = free_idx;
    f->word = DP_NAME_WORD(DP_NAME_GEN(w) + 1, p->slot + 1, kind, DP_NAME_INIT);
    dp_store_release(&e->state, f->word); /* release: name, pid before INIT ([one entry]) */
    return 0;
}

/* The owner's end of [creator]. false: the entry is no longer ours -- a
 * caller judged us gone ([waiters] rules that out while we run) or the word
 * was scribbled on -- and the object must not be named. */
static bool publish(dsmpool *p, const found *f, dsmpool_handle h, uint64_t size) {
    dp_name *e = &p->names[f->idx];
    dp_store_relaxed(&e->handle, h);
    dp_store_relaxed(&e->size, size);
    uint64_t w = f->word;
    /* release: handle and size before READY */
    return dp_cas_acq_rel(&e->state, &w, DP_NAME_WORD(DP_NAME_GEN(w), 0, DP_NAME_KIND(w), DP_NAME_READY));
}

static void withdraw(dsmpool *p, const found *f) {
    uint64_t w = f->word;
    dp_cas_acq_rel(&p->names[f->idx].state, &w, DP_NAME_WORD(DP_NAME_GEN(w), 0, 0, DP_NAME_FREE));
}

typedef struct opener {
    unsigned kind;
    size_t size;        /* segments: the least size; 0 = open only */
    bool may_create;
    unsigned flags;     /* creation flags, NOWAIT removed */
    int (*init)(void *, size_t, void *);
    void *arg;
    void *out;          /* dsmpool_seg ** or dsmpool_area ** */
} opener;

static int make(dsmpool *p, opener *o, dsmpool_handle *h, uint64_t *size) {
    if (o->kind == DP_NAME_AREA) {
        dsmpool_area **a = o->out;
        int r = dsmpool_area_create(p, o->flags, a);
        if (r) return r;
        *h = dsmpool_area_handle(*a);
        *size = 0;
        return 0;
    }
    dsmpool_seg **s = o->out;
    int r = dsmpool_seg_create(p, o->size, o->flags, s);
    if (r) return r;
    *h = dsmpool_seg_handle(*s);
    *size = dsmpool_seg_size(*s);
    if (o->init && (r = o->init(dsmpool_seg_address(*s), dsmpool_seg_size(*s), o->arg)) != 0) {
        char why[256];
        snprintf(why, sizeof why, "%s", r < 0 ? strerror(-r) : "a positive value");
        dsmpool_seg_detach(*s);
        *s = NULL;
        return dp_fail(r < 0 ? r : -ECANCELED, "init of the named segment failed: %s", why);
    }
    return 0;
}

/* Gives back what make() made, when it cannot be named. */
static void unmake(opener *o) {
    if (o->kind == DP_NAME_AREA) {
        dsmpool_area **a = o->out;
        dsmpool_area_destroy(*a);
        *a = NULL;
    } else {
        dsmpool_seg **s = o->out;
        dsmpool_seg_detach(*s);
        *s = NULL;
    }
}

static int open_found(dsmpool *p, opener *o, const found *f, const char *name) {
    if (o->kind == DP_NAME_AREA) return dsmpool_area_attach(p, f->handle, o->out);
    if (o->size > f->size)
        return dp_fail(-EINVAL, "segment '%s' exists with %llu bytes, fewer than the %zu asked for", name,
                       (unsigned long long)f->size, o->size);
    return dsmpool_seg_attach(p, f->handle, o->out);
}

static int open_named(dsmpool *p, const char *name, unsigned flags, opener *o, bool *created) {
    if (created) *created = false;
    int r = name_check(name);
    if (r) return r;
    if (!p || p->magic != DP_POOL_MAGIC) return dp_fail(-EINVAL, "not an attached pool");
    if ((r = dp_self(p)) != 0) return r;
    uint64_t deadline = dp_os_now_ns() + NAMES_WAIT_NS;
    unsigned stale = 0;
    for (unsigned k = 0;; k++) {
        if ((r = names_lock(p, flags, deadline)) != 0) return r;
        found f;
        r = search(p, name, o->kind, o->may_create, &f);
        names_unlock(p);
        if (r) return r;
        if (f.what == 0 && !o->may_create)
            return dp_fail(-ENOENT, "no %s named '%s' in this pool", o->kind == DP_NAME_AREA ? "area" : "segment",
                           name);
        if (f.what == 0) { /* ours to make ([creator]) */
            dsmpool_handle h = 0;
            uint64_t size = 0;
            if (ncreating < NAMES_NEST) creating[ncreating] = (creating_name){p, f.idx};
            ncreating++;
            r = make(p, o, &h, &size);
            ncreating--;
            if (r) {
                char why[512];
                snprintf(why, sizeof why, "%s", dsmpool_last_error());
                withdraw(p, &f);
                return dp_fail(r, "%s", why);
            }
            if (!publish(p, &f, h, size)) {
                unmake(o);
                return dp_fail(-EAGAIN, "the name table entry of '%s' changed while it was being created "
                               "(damage?); try again", name);
            }
            if (created) *created = true;
            return 0;
        }
        if (f.what == 1) {
            r = open_found(p, o, &f, name);
            if (r != -ESTALE) return r;
            /* the object is alive but cannot be mapped here (an OS segment
             * whose file is gone): a definite error, not a retry */
            if (object_live(p, o->kind, f.handle)) return r;
            /* died since the search ([gone objects]): search again at once, a few
             * times, then within the bound like a wait */
            if (++stale < 4) continue;
        } else {
            for (unsigned i = 0; i < ncreating && i < NAMES_NEST; i++)
                if (creating[i].pool == p && creating[i].idx == f.idx)
                    return dp_fail(-EDEADLK, "'%s' is being created by this thread (its init opened it): "
                                   "init must not open its own name", name);
        }
        /* INIT, another owner alive (or a READY one that just died): wait ([waiters]) */
        if (flags & DSMPOOL_NAMED_NOWAIT)
            return dp_fail(-EAGAIN, "'%s' is being created by process %llu (or was just destroyed); try "
                           "again", name, (unsigned long long)dp_load_relaxed(&p->names[f.idx].pid));
        if (dp_os_now_ns() > deadline)
            return dp_fail(-EBUSY, "'%s' has been being created by process %llu for 30 s (stopped, or a "
                           "slow init?)", name, (unsigned long long)dp_load_relaxed(&p->names[f.idx].pid));
        backoff(k);
    }
}

int dsmpool_seg_open_named(dsmpool *pool, const char *name, size_t size, unsigned flags,
                           int (*init)(void *addr, size_t size, void *arg), void *arg,
                           dsmpool_seg **out, bool *created) {
    dp_clear_error();
    if (created) *created = false;
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    *out = NULL;
    if (flags & DSMPOOL_NAMED_OPEN_ONLY) return dp_fail(-EINVAL, "segments open only with size 0");
    if (flags & ~NAMED_SEG_FLAGS)
        return dp_fail(-EINVAL, "unknown flags 0x%x for a named segment (DSMPOOL_SEG_* and "
                       "DSMPOOL_NAMED_NOWAIT only)", flags & ~NAMED_SEG_FLAGS);
    if ((flags >> 8) & 0xff && !(flags & NAMED_SEG_NODE_BIT))
        return dp_fail(-EINVAL, "node bits 0x%x without DSMPOOL_SEG_ON_NODE", flags & (0xffu << 8));
    opener o = {DP_NAME_SEG, size, size != 0, flags & ~DSMPOOL_NAMED_NOWAIT, init, arg, out};
    return open_named(pool, name, flags, &o, created);
}

int dsmpool_area_open_named(dsmpool *pool, const char *name, unsigned flags, dsmpool_area **out,
                            bool *created) {
    dp_clear_error();
    if (created) *created = false;
    if (!out) return dp_fail(-EINVAL, "out must not be NULL");
    *out = NULL;
    if (flags & ~NAMED_AREA_FLAGS)
        return dp_fail(-EINVAL, "unknown flags 0x%x for a named area (DSMPOOL_AREA_*, "
                       "DSMPOOL_NAMED_NOWAIT and DSMPOOL_NAMED_OPEN_ONLY only)", flags & ~NAMED_AREA_FLAGS);
    opener o = {DP_NAME_AREA, 0, !(flags & DSMPOOL_NAMED_OPEN_ONLY),
                flags & ~(DSMPOOL_NAMED_NOWAIT | DSMPOOL_NAMED_OPEN_ONLY), NULL, NULL, out};
    return open_named(pool, name, flags, &o, created);
}

/* Its holder may wait for seconds (a creator's init): not taken around
 * fork; the child makes it new (the ledger's lock-rank table). */
static void names_lock_new(dsmpool *p) { pthread_mutex_init(&p->names_mutex, NULL); }
static void names_fork_child(void) { dp_ledger_each_pool(names_lock_new); }
static const dp_fork_ops names_fork = {DP_RANK_NONE, NULL, NULL, names_fork_child, names_fork_child};

void dp_names_layer_init(void) { dp_ledger_on_fork(&names_fork); }
