/*
 * resident.c -- residency of the data: which 2 MiB granules are resident
 * and which were given back to the system, making a block resident before
 * it is handed out, and the idle stamps that the maintenance policy reads.
 *
 * Layer: ledger (pool/ledger), below proc.c, whose pool blocks it makes
 * resident ([refill on demand]), and above the region (the residency table
 * is the region's format: dp_format.h), the allocator and the OS. The top's
 * elastic.c composes the trim and refill steps out of these words.
 *
 * Rules
 *   [resident when held] A granule is marked released only by a process
 *      that holds all of it in the allocator (a trimmer: elastic.c [trim]),
 *      before it gives the pages back; it is marked resident only by one
 *      that holds some of it and has just populated all of it. So no
 *      granule that a caller holds a byte of is released or being released,
 *      and a block handed out is resident: the pages a caller touches are
 *      there -- never a SIGBUS, nor the OOM killer, at a first touch.
 *   [release unit] Pages above 2 MiB (1 GiB hugetlb) go back whole or not
 *      at all: the unit of release is then the page, whose granules change
 *      state together, and a refill populates the page.
 *   [refill on demand] Every pool block is looked at before it is handed
 *      out (proc.c [pool blocks]): the word of each granule it lies in, one
 *      load for a block of 2 MiB or less, nothing written when it is zero
 *      (resident, not stamped). A released granule is populated --
 *      MADV_POPULATE_WRITE only (dp_os_populate_strict), on the memory's
 *      own node by the sub-pool's policy -- and marked resident; when the
 *      memory cannot be had the caller frees the block and says -ENOMEM
 *      (segments and areas then fall back as for a full pool). Populating
 *      a granule that another holder uses part of is safe: it changes no
 *      content.
 *   [room first] A pool in 4 KiB (or THP) pages is charged to the memory
 *      cgroup of whoever populates it, and a charge beyond the cgroup's
 *      limit wakes its OOM killer even from MADV_POPULATE_WRITE (measured:
 *      docs/design.md, "Residency"). So before it populates, a refill holds
 *      its bytes, plus what other processes of the pool are populating now
 *      (a word per slot, cleared by their recovery) and a margin, against
 *      the room the cgroup still has (dp_os_cgroup_mem_room), and one that
 *      does not fit is -ENOMEM. Charges by others in the cgroup that race a
 *      refill are covered only by the margin. hugetlb pages are not charged
 *      to the memory cgroup: a page that cannot be had is the populate's own
 *      error (-EFAULT, said as -ENOMEM).
 *   [idle stamps] A maintenance step stamps a resident granule that it
 *      finds wholly free with the time ("idle since", dp_res_stamp); the
 *      allocation that takes any of it clears the stamp ([refill on
 *      demand] reads the word anyway, and writes only a stamped or released
 *      one). An allocation that takes some of it between the step's look
 *      and its stamp finds no stamp and leaves it, so each step looks again
 *      and takes a stamp off a granule that is not wholly free
 *      (elastic.c el_stamp). So a stamp that is still there once a trimmer
 *      holds the whole granule says it has been free and unused since then,
 *      but for a use that began and ended between two steps.
 *
 * Invariant (quiet: no bracket open)
 *   R1  every granule holding an allocated frame is resident (checked by
 *       dp_res_verify, dsmpool_check's step 6);
 *   R2  released + resident = granules, and the released ones are free.
 *
 * Crash bound: a death between marking a granule released and giving its
 * pages back leaves it released but resident: the next refill populates
 * what is there already. (The other order -- pages gone, granule still
 * marked resident -- cannot happen: the trimmer marks first.) A death
 * between a populate and the resident mark leaves it released and
 * populated: the same. A death inside a mark's loop leaves the sub-pool's
 * released_hint (a count palloc.c [resident first] reads to turn its
 * preference on) off by the granules marked so far: the leak sweep, which
 * a death inside a bracket brings, counts the words in its quiet window
 * and sets it right (dp_res_hint_fix). The block the dead process held is owned by nothing
 * and was inside its bracket: the leak sweep returns it (recover.c [leak
 * sweep]) with its granules as they are, which every state allows. A dead
 * refiller's in-flight bytes are cleared with its slot (dp_res_slot_clear).
 *
 * Memory ordering: the state CASes are acq_rel; who holds a granule orders
 * them. A released mark is made while the trimmer holds the whole granule
 * and is seen by its next holder through the allocator's own pair (the
 * trimmer's free is a release CAS, the next allocation's CAS an acquire:
 * palloc.c); a resident mark is made before its maker frees the block,
 * likewise. Stamps and the in-flight words are relaxed: a stamp is a hint
 * the trimmer reads again once its claim (acquire) holds the granule, and
 * the in-flight words are estimates of room.
 *
 * Injection points: "resident.refill.populated" (a granule populated on
 * demand, not yet marked resident: a death there leaves it released and
 * populated, which the next refill takes as it is); "resident.mark.partway"
 * (a mark's first word changed, the sub-pool's released count not yet: a
 * death there leaves the count off until the leak sweep sets it right).
 */
#include <stdio.h>
#include <string.h>

#include "dp_ledger.h"
#include "dp_os.h"

#define GRAN (1ull << DP_RES_SHIFT)

uint64_t dp_res_unit(const dsmpool *p) {
    return p->geo.page_size > GRAN ? p->geo.page_size >> DP_RES_SHIFT : 1; /* [release unit] */
}

uint32_t dp_res_now_ms(const dsmpool *p) {
    uint64_t now = dp_os_now_ns(), e = p->geo.epoch_ns;
    uint64_t ms = now > e ? (now - e) / 1000000u : 0;
    return ms ? (uint32_t)ms : 1u; /* 0 means "not stamped": never a stamp */
}

uint64_t dp_res_load(const dsmpool *p, uint64_t g) {
    return g < p->geo.res_count ? dp_load_relaxed(&p->res[g]) : 0; /* relaxed: see the file comment */
}

/* The sub-pool of granule g (sub-pools are contiguous, in order). */
static uint32_t res_sub(const dsmpool *p, uint64_t g) {
    uint64_t off = p->geo.data_off + (g << DP_RES_SHIFT);
    for (uint32_t s = p->nsub; s-- > 0;)
        if (off >= p->geo.sub[s].data_off) return s;
    return 0;
}

/* ---- [room first] ------------------------------------------------------------ */

/* Bytes the live and not yet recovered slots are populating now. */
static uint64_t res_inflight(const dsmpool *p) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < p->nprocs; i++)
        sum += dp_load_relaxed(&p->fill[i]); /* relaxed: an estimate of room */
    return sum;
}

/* "No memory cgroup limits this process": true for a second after it was
 * last read so (reading a cgroup's files costs tens of microseconds). */
static dp_a64 res_unlimited_until;

static int res_room(dsmpool *p, uint64_t bytes) {
    if (p->geo.page_size != 4096) return 0; /* hugetlb: not the memory cgroup's */
    uint64_t now = dp_os_now_ns();
    if (now < dp_load_relaxed(&res_unlimited_until)) return 0; /* relaxed: a process-local cache */
    uint64_t room, limit;
    char where[1200];
    dp_os_cgroup_mem_room(&room, &limit, where, sizeof where);
    if (room == UINT64_MAX) {
        dp_store_relaxed(&res_unlimited_until, now + 1000000000ull); /* relaxed: a cache */
        return 0;
    }
    /* the margin: page tables of the new pages and other charges in the
     * cgroup that race this one (not seen) */
    uint64_t margin = DP_RES_ROOM_MARGIN + limit / 256, inflight = res_inflight(p);
    if (room < bytes + inflight + margin)
        return dp_fail(-ENOMEM, "the memory cgroup lets this process charge %llu more bytes (%s is %llu): "
                       "%llu bytes of the pool cannot be made resident (%llu more are being made "
                       "resident now, and %llu are kept as a margin) without the cgroup's OOM killer",
                       (unsigned long long)room, where, (unsigned long long)limit,
                       (unsigned long long)bytes, (unsigned long long)inflight, (unsigned long long)margin);
    return 0;
}

void dp_res_slot_clear(dsmpool *p, uint32_t slot) {
    if (slot < p->nprocs) dp_store_relaxed(&p->fill[slot], 0); /* relaxed: an estimate */
}

int dp_res_populate(dsmpool *p, uint64_t g, uint64_t n) {
    if (!n) return 0;
    if (g >= p->geo.res_count || n > p->geo.res_count - g)
        return dp_fail(-EUCLEAN, "granules %llu+%llu lie outside the data", (unsigned long long)g,
                       (unsigned long long)n);
    uint64_t bytes = n << DP_RES_SHIFT;
    int r = res_room(p, bytes);
    if (r) {
        dp_fetch_add_relaxed(&p->hdr->refill_failures, 1); /* relaxed: a counter */
        return r;
    }
    dp_a64 *mine = p->has_slot ? &p->fill[p->slot] : NULL;
    if (mine) dp_fetch_add_relaxed(mine, bytes); /* relaxed: an estimate of room */
    r = dp_os_populate_strict(p->base + p->geo.data_off + (g << DP_RES_SHIFT), bytes);
    if (mine) dp_fetch_add_relaxed(mine, (uint64_t)-bytes);
    if (r) {
        dp_fetch_add_relaxed(&p->hdr->refill_failures, 1); /* relaxed: a counter */
        return dp_fail(r == -EFAULT || r == -ENOMEM || r == -ENOSPC ? -ENOMEM : r,
                       "%llu bytes of the pool could not be made resident (MADV_POPULATE_WRITE: %s)%s",
                       (unsigned long long)bytes, strerror(-r),
                       p->geo.huge_pages ? ": no huge page of the pool's size can be had now "
                                           "(free_hugepages, nr_overcommit_hugepages)"
                       : r == -EFAULT || r == -ENOSPC
                           ? ": the file system holding the pool is full (a tmpfs at its size=; "
                             "df /dev/shm), or the memory cannot be had"
                           : "");
    }
    return 0;
}

int dp_res_release(dsmpool *p, uint64_t g, uint64_t n) {
    if (!n || g >= p->geo.res_count || n > p->geo.res_count - g) return -EINVAL;
    uint64_t off = p->geo.data_off + (g << DP_RES_SHIFT);
    bool fd = p->fd >= 0 && (p->backing == DSMPOOL_BACKING_MEMFD || p->backing == DSMPOOL_BACKING_POSIX);
    return dp_os_release(p->base + off, n << DP_RES_SHIFT, fd ? p->fd : -1, off);
}

/* ---- the marks --------------------------------------------------------------- */

uint64_t dp_res_mark_released(dsmpool *p, uint64_t g, uint64_t n) {
    uint64_t newly = 0;
    uint32_t s = res_sub(p, g);
    for (uint64_t i = g; i < g + n && i < p->geo.res_count; i++) {
        uint64_t w = dp_load_relaxed(&p->res[i]);
        /* acq_rel: [resident when held]; the caller holds the granule, so
         * only a stamp can change under us (another maintainer's) */
        while (!(w & DP_RES_RELEASED) && !dp_cas_acq_rel(&p->res[i], &w, DP_RES_WORD(1, 0)))
            ;
        if (!(w & DP_RES_RELEASED)) newly++;
        if (i == g) DP_INJECT("resident.mark.partway");
    }
    if (newly) dp_fetch_add_relaxed(&p->hdr->released_hint[s], newly); /* relaxed: a hint */
    return newly;
}

uint64_t dp_res_mark_resident(dsmpool *p, uint64_t g, uint64_t n) {
    uint64_t newly = 0;
    uint32_t s = res_sub(p, g);
    for (uint64_t i = g; i < g + n && i < p->geo.res_count; i++) {
        uint64_t w = dp_load_relaxed(&p->res[i]);
        /* acq_rel: [resident when held]; a refiller of another part may mark it first */
        while ((w & DP_RES_RELEASED) && !dp_cas_acq_rel(&p->res[i], &w, DP_RES_WORD(0, 0)))
            ;
        if (w & DP_RES_RELEASED) newly++;
        if (i == g) DP_INJECT("resident.mark.partway");
    }
    if (newly) dp_fetch_add_relaxed(&p->hdr->released_hint[s], (uint64_t)-newly); /* relaxed: a hint */
    return newly;
}

uint64_t dp_res_hint(const dsmpool *p, uint32_t s) {
    return s < p->nsub ? dp_load_relaxed(&p->hdr->released_hint[s]) : 0; /* relaxed: a hint */
}

void dp_res_hint_fix(dsmpool *p, uint32_t s, uint64_t before, uint64_t count) {
    if (s >= p->nsub || before == count) return;
    /* relaxed CAS: a hint. It fails when a mark added to the count since
     * `before` was read; a mark that changed words after the quiet window
     * and adds only after this CAS adds to the right base. */
    dp_cas_relaxed(&p->hdr->released_hint[s], &before, count);
}

bool dp_res_stamp(dsmpool *p, uint64_t g, uint32_t now_ms) {
    if (g >= p->geo.res_count) return false;
    uint64_t w = 0;
    /* relaxed CAS: a stamp is a hint ([idle stamps]); only "resident, not
     * stamped" (0) takes one */
    return dp_cas_relaxed(&p->res[g], &w, DP_RES_WORD(0, now_ms));
}

/* ---- [refill on demand] ------------------------------------------------------------ */

/* Has the release unit at g (aligned) any granule released? relaxed: the
 * caller holds part of the unit; see the file comment. */
static bool unit_released(const dsmpool *p, uint64_t g, uint64_t u, uint64_t g1) {
    for (uint64_t k = g; k < g + u && k < g1; k++)
        if (dp_load_relaxed(&p->res[k]) & DP_RES_RELEASED) return true;
    return false;
}

int dp_res_ensure_slow(dsmpool *p, uint64_t off, uint64_t len) {
    uint64_t n = p->geo.res_count;
    if (!len || off < p->geo.data_off) return 0;
    uint64_t g0 = (off - p->geo.data_off) >> DP_RES_SHIFT, g1 = ((off - p->geo.data_off + len - 1) >> DP_RES_SHIFT) + 1;
    /* (dp_ledger.h's inline dp_res_ensure took the one-granule, resident,
     * unstamped case: one load and no call) */
    uint64_t u = dp_res_unit(p);
    g0 = g0 / u * u;
    g1 = (g1 + u - 1) / u * u;
    if (g1 > n) g1 = n;
    uint64_t any = 0;
    for (uint64_t g = g0; g < g1; g++) any |= dp_load_relaxed(&p->res[g]); /* relaxed: see the file comment */
    if (!any) return 0; /* resident, not stamped: nothing to write */
    uint64_t t0 = 0, filled = 0;
    /* whole release units, aligned ([release unit]): a unit with any
     * granule released is populated whole -- a death inside
     * dp_res_mark_resident's loop can leave a 1 GiB page part marked, and
     * a run must never start inside a unit nor end in the next one */
    for (uint64_t g = g0; g < g1;) {
        if (!unit_released(p, g, u, g1)) {
            for (uint64_t k = g; k < g + u && k < g1; k++) {
                uint64_t w = dp_load_relaxed(&p->res[k]);
                /* [idle stamps]: used now; relaxed CAS: a hint (a failed one found it changed) */
                if (w) dp_cas_relaxed(&p->res[k], &w, 0);
            }
            g += u;
            continue;
        }
        uint64_t h = g + u; /* a run of units with released granules */
        while (h < g1 && unit_released(p, h, u, g1)) h += u;
        if (h > g1) h = g1;
        if (!t0) t0 = dp_os_now_ns();
        int r = dp_res_populate(p, g, h - g);
        if (r) return r;
        DP_INJECT("resident.refill.populated");
        dp_res_mark_resident(p, g, h - g);
        filled += (h - g) << DP_RES_SHIFT;
        g = h;
    }
    if (filled) { /* relaxed: counters */
        dp_fetch_add_relaxed(&p->hdr->refills_demand, 1);
        dp_fetch_add_relaxed(&p->hdr->refilled_demand, filled);
        dp_fetch_add_relaxed(&p->hdr->refill_demand_ns, dp_os_now_ns() - t0);
    }
    return 0;
}

bool dp_res_any_released(const dsmpool *p, uint64_t off, uint64_t len) {
    if (!len || off < p->geo.data_off) return false;
    uint64_t g0 = (off - p->geo.data_off) >> DP_RES_SHIFT, g1 = ((off - p->geo.data_off + len - 1) >> DP_RES_SHIFT) + 1;
    for (uint64_t g = g0; g < g1 && g < p->geo.res_count; g++)
        if (dp_load_relaxed(&p->res[g]) & DP_RES_RELEASED) return true; /* relaxed: the holder re-checks */
    return false;
}

/* ---- counting and the check ----------------------------------------------------- */

uint64_t dp_res_released_in(const dsmpool *p, uint32_t s) {
    if (s >= p->nsub) return 0;
    uint64_t g0 = (p->geo.sub[s].data_off - p->geo.data_off) >> DP_RES_SHIFT;
    uint64_t n = p->geo.sub[s].geom.frames * DP_FRAME_SIZE >> DP_RES_SHIFT, k = 0;
    for (uint64_t g = g0; g < g0 + n && g < p->geo.res_count; g++)
        k += dp_load_relaxed(&p->res[g]) & DP_RES_RELEASED; /* relaxed: a count, exact when quiet */
    return k;
}

int dp_res_verify(dsmpool *p, uint64_t **used, char *why, size_t n) {
    for (uint32_t s = 0; s < p->nsub; s++) {
        uint64_t g0 = (p->geo.sub[s].data_off - p->geo.data_off) >> DP_RES_SHIFT;
        uint64_t ng = p->geo.sub[s].geom.frames >> (DP_RES_SHIFT - DP_FRAME_SHIFT);
        for (uint64_t k = 0; k < ng && g0 + k < p->geo.res_count; k++) {
            uint64_t w = dp_load_relaxed(&p->res[g0 + k]); /* relaxed: inside the checker's quiet window */
            if (w & ~(DP_RES_RELEASED | 0xffffffff00000000ull)) {
                snprintf(why, n, "sub-pool %u: the residency word of granule %llu is damaged (%016llx)", s,
                         (unsigned long long)k, (unsigned long long)w);
                return -EUCLEAN;
            }
            if (!(w & DP_RES_RELEASED)) continue;
            /* R1: 512 frames, 8 words of the used map */
            const uint64_t *m = &used[s][k * (GRAN / DP_FRAME_SIZE) / 64];
            for (unsigned i = 0; i < GRAN / DP_FRAME_SIZE / 64; i++)
                if (m[i]) {
                    snprintf(why, n, "sub-pool %u: granule %llu is released but frame %llu of it is allocated "
                             "(memory handed out that is not resident)", s, (unsigned long long)k,
                             (unsigned long long)(k * (GRAN / DP_FRAME_SIZE) + i * 64 +
                                                  (unsigned)__builtin_ctzll(m[i])));
                    return -EUCLEAN;
                }
        }
    }
    return 0;
}
