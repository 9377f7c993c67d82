/*
 * resident.c -- residency of the data: which 2 MiB granules are resident
 * and which were given back to the system, making a block resident before
 * it is handed out (and giving back what could not be), holding memory
 * against what the process may still charge before it is made resident,
 * and the idle stamps that the maintenance policy reads.
 *
 * Layer: ledger (pool/ledger), below proc.c, whose pool blocks it makes
 * resident ([refill on demand]), and above the region (the residency table
 * is the region's format: dp_format.h), the allocator and the OS. proc.c
 * gives back what a failed refill populated ([give back]: it holds the
 * allocator's claims); segment.c holds its OS fallback segments' bytes
 * against the room ([room first]); the top's elastic.c composes the trim,
 * the refill ahead and dsmpool_prefault out of these words.
 *
 * Rules
 *   [resident when held] A granule is marked released only by a process
 *      that holds all of it in the allocator (a trimmer: elastic.c [trim];
 *      a give-back), before it gives the pages back; it is marked resident
 *      only by one that holds some of it and has just populated all of it.
 *      So no granule that a caller holds a byte of is released or being
 *      released, and a block handed out is resident: the pages a caller
 *      touches are there -- never a SIGBUS, nor the OOM killer, at a first
 *      touch.
 *   [busy] Whoever populates a granule counts itself in its word's busy
 *      field first (one CAS) and out again when done: a refill (marking it
 *      resident lowers the count), a refill ahead, a give-back, a trimmer
 *      between its mark and its release, dsmpool_prefault. A trimmer marks
 *      released only granules that nobody populates (busy 0), and a
 *      prefault counts itself in only on a resident granule: so no page is
 *      populated under a released mark except by a populator still counted
 *      there, who gives it back ([give back]) -- and a count left by a
 *      populator that died tells the leak sweep which granules to give back
 *      (recover.c [leak sweep]).
 *   [release unit] Pages above 2 MiB (1 GiB hugetlb) go back whole or not
 *      at all: the unit of release is then the page, whose granules change
 *      state together, and a refill populates the page.
 *   [refill on demand] Every pool block is looked at before it is handed
 *      out (proc.c [pool blocks]): the word of each granule it lies in, one
 *      load for a block of 2 MiB or less, nothing written when it is zero
 *      (resident, not busy, not stamped). A run of release units with a
 *      released granule is counted busy, populated -- MADV_POPULATE_WRITE
 *      only (dp_os_populate_strict), on the memory's own node by the
 *      sub-pool's policy -- and marked resident; when the memory cannot be
 *      had the run is handed back to the caller, still busy, and the caller
 *      frees its block and gives the run back (resident.c [give back]), then
 *      says -ENOMEM (segments and areas then fall back as for a full pool).
 *      Populating a granule that another holder uses part of is safe: it
 *      changes no content.
 *   [give back] What a populate that failed made resident goes back to the
 *      system: by whoever holds the granule whole (a refill ahead; the
 *      give-back of a refill on demand, which claims each unit of its run
 *      once its block is free), which marks it released, gives its pages
 *      back and counts itself out. A unit it cannot claim is held by
 *      someone else: it is marked stray (dp_res_stray) and the leak sweep
 *      made due, which gives it back once it can claim it (recover.c [leak
 *      sweep]) -- unless its holder makes it resident first (a resident
 *      mark clears the bit) or a trimmer gives back every released granule
 *      of what it holds (it clears the bit with the pages). The holder may
 *      be an allocation that dies before it counts itself in: so the bit,
 *      not the holder, carries the pages' fate. What is counted given
 *      back (refill_given_back) is what is there just before (mincore,
 *      dp_res_release_counted): a dead trimmer's counts that the sweep settles
 *      give back granules whose pages went already, and count nothing
 *      (one killed before it gave its pages back has them counted: at
 *      most its piece). In hugetlb pages mincore sees only the caller's
 *      own mappings: the sweep, in another process, counts a dead
 *      refiller's pages as 0 (a statistic; the pages go all the same).
 *   [room first] Memory made resident in 4 KiB (or THP) pages is charged to
 *      the memory cgroup of whoever populates it, and a charge beyond the
 *      cgroup's limit -- or beyond what the system has -- wakes an OOM
 *      killer even from MADV_POPULATE_WRITE (measured: docs/design.md,
 *      "Residency"). So before a refill, dsmpool_prefault or an OS fallback
 *      segment makes bytes resident, it holds them, plus what the pool's
 *      other processes hold now (a word per slot, cleared by their
 *      recovery) and a margin, against the room the OS reports
 *      (dp_os_mem_room: the cgroup's levels and MemAvailable), and one that
 *      does not fit is -ENOMEM. The reading and the claim are one step: a
 *      claim adds its bytes to its slot's word, then advances the pool's
 *      room_seq by a CAS from the value it read before the reading; a claim
 *      made by anyone in between fails that CAS, and the check is made
 *      again on a fresh reading. So of two refills one always sees the
 *      other's bytes, in its reading or in the slot words, however long
 *      either is stopped. A claim is given back once its memory is charged
 *      (it is in the cgroup's usage then). A process that cannot learn its
 *      limits is refused unless the pool says limits_unknown_ok. Charges by
 *      others in the cgroup that race a claim are covered only by the
 *      margin. hugetlb pages are not charged to the memory cgroup (unless
 *      cgroup v2 is mounted with memory_hugetlb_accounting, which this
 *      does not look at): a page that cannot be had is the populate's own
 *      error (-EFAULT, said as -ENOMEM), never a signal nor the OOM killer.
 *      A refill on demand populates first, and reads the hugetlb cgroup
 *      and the kernel's free pages only after a failure, to say which was
 *      short, counting what the populate got (its caller then gives that
 *      back: [give back]); read first, they cost a 2 MiB refill as much as
 *      its populate (five sysfs and cgroup files, docs/results.md "Refill
 *      speed"). A refill ahead (the maintainer's warm reserve, which tries
 *      again every step) reads them first, so as not to take, step after
 *      step, the last free huge pages that another's refill would fit in.
 *   [room reuse] A reading costs more than a 2 MiB huge-page populate (a
 *      dozen system calls on proc and cgroup files, 12-25 us), so the
 *      thread that made it reuses it, in the same pool and process (the
 *      pool's id and mapping, this process's slot and its claim of it, the
 *      pid: never a forked child), for claims (and hugetlb refills ahead)
 *      in the DP_RES_ROOM_REUSE_NS (5 ms) from the reading's start, while
 *      it holds the claim, the margin, and every byte the pool's claims
 *      and hugetlb populates may have charged since, with
 *      DP_RES_ROOM_REUSE_SLACK (64 MiB) plus limit / 32 to spare. Those
 *      bytes are what was in flight when it was read (the slot words then,
 *      "owed": a hugetlb populate is in its slot word while it runs, as a
 *      claim is) and everything claimed or populated in hugetlb since, by
 *      anyone: room_claimed counts those bytes, before the claim's CAS or
 *      the populate, and only grows. Otherwise -- near a limit, another
 *      process or pool, an unknown reading -- the claim reads afresh, and a
 *      refusal is always a fresh reading's. What a reused reading cannot
 *      see is a charge by anything but those claims and populates: another
 *      program or pool in the cgroup, the first touches of a pool made
 *      without prefault, a move to another cgroup, within those 5 ms and
 *      beyond the slack; a fresh reading does not see one made between it
 *      and its populate either, which lasts as long for a 128 MiB refill.
 *      In a hugetlb pool the slot words hold its populates too, so an OS
 *      fallback segment's claim there counts them as in flight, though
 *      hugetlb pages are not charged to the memory cgroup: near the memory
 *      limit such a segment can be refused while a hugetlb refill runs (a
 *      refusal that waiting for the refill would have avoided, never a
 *      charge past the limit).
 *   [lazy directory] In an elastic pool the span directory's page of a
 *      granule (layout.c [lazy directory]) is made resident with it, first,
 *      under the same room claim, and, in 4 KiB pages, given back with it:
 *      a granule marked resident has its page, one released holds none
 *      but for a refill that failed after the page was had (its page stays
 *      until the granule's next release: 4 KiB of zeroes). In hugetlb pages
 *      a page of the directory tells of 512 granules and is never given
 *      back. A reader of the directory that holds no block there (a free
 *      of a stray pointer: area_pointer.c dp_ar_locate, the free's hot
 *      path; a damaged span word: area_registry.c dir_clear) looks at the
 *      residency word first, so as not to make the page resident. Not
 *      closed: a stray free that races the trim of its granule between
 *      that look and its read faults the page in, outside any room claim
 *      (4 KiB of zeroes, kept until the granule's next release; in a
 *      full tmpfs, a SIGBUS): a caller's bug meeting a trim in the same
 *      instant. Pinning the granule for the read would cost the free's
 *      hot path a CAS on a shared word.
 *   [lazy tree] The allocator's tree pages of a released granule whose
 *      word says "no tree" (dp_format.h, palloc.c [lazy tree]) are not
 *      there. A refill makes them resident with the granule, after its
 *      directory page and under the same room claim, and the resident mark
 *      clears the bit; the allocator's hook (res_tables, given to every
 *      attachment by dp_res_open) makes them resident alone -- room
 *      claimed, populated, the bit cleared -- when an allocation, a claim or
 *      a trim opens a node of the granule before its refill; a failure
 *      counts as a refill's (the segment and area layers quote its
 *      message). In huge pages only the ones not present are asked room
 *      for. dsmpool_prefault maps them with their resident granules
 *      (dp_res_tree_map).
 *   [tree give-back] A trim gives back, with its granules, each page of
 *      leaves that only granules it holds use (4 KiB pages; layout.c puts
 *      a sub-pool's leaves on a page boundary, so a page tells of 4
 *      aligned granules), between giving their memory back and counting
 *      itself out of them (elastic.c [trim]): it sets their "no tree" bits
 *      where its own count is alone, sees every granule of the page with
 *      its bit set and its own count alone there, forgets the CPUs' hints
 *      that name a leaf there, and punches the page; else the bits it set
 *      go back and the page stays. Every opener of a word of the two
 *      lowest levels counts itself in on the granule (res_tables: the
 *      allocator's hook, DP_PA_TABLES_ENTER, a busy count) for its whole
 *      open, and looks at the parent only once in (palloc.c [tree
 *      give-back]): one in before the trim's mark keeps the page, one in
 *      after finds the node held and writes nothing. A count is a count:
 *      a trimmer never marks a resident granule an opener is in ([busy]),
 *      and a dead opener's count stays until the leak sweep, after its
 *      recovery has finished its step, so no bit is ever set over a claim.
 *      A page of level-1 words tells of 64 granules (128 MiB), more than a
 *      trim's piece: once a piece's leaves are gone and every granule the
 *      page tells of is released with its bit set, the trim holds those
 *      64 granules a moment (elastic.c el_tree_l1: claimed as aligned
 *      blocks, counted busy) and gives the page back the same way, but
 *      sets no bit: it gives it back only where every one is set already
 *      and its own count alone (an opener in before is seen, one in after
 *      finds the node held). A page of leaves some of whose granules the
 *      trim does not hold stays, and so does a page of level 1 whose
 *      granules could not all be held (taken meanwhile, or a trimmer's
 *      death there): until one of its granules is used and given back
 *      again. Not in a POSIX
 *      pool: a reader that took a hint or a parent's state just before the
 *      page went may still read a word there (palloc.c [tree give-back]),
 *      and the page it brings back, outside any room claim, could meet a
 *      full tmpfs (a SIGBUS). In the other backings that read is a 4 KiB
 *      charge, at most one per thread that was inside those two loads
 *      while the whole give-back ran; such a page stays (under set bits)
 *      until its window is used and trimmed again. A free that hints at
 *      its leaf after the give-back forgot the hints looks at the bit and
 *      forgets its hint (palloc.c dp_pa_hint_freed; a fence on each side).
 *      A process that dies inside an open or a close leaves its count on
 *      the granule, which keeps trims (and idle stamps) off it until the
 *      leak sweep settles the count in a quiet window.
 *   [idle stamps] A maintenance step stamps a resident granule that it
 *      finds wholly free with the time ("idle since", dp_res_stamp); the
 *      allocation that takes any of it clears the stamp ([refill on
 *      demand] reads the word anyway, and writes only a stamped, busy or
 *      released one). An allocation that takes some of it between the
 *      step's look and its stamp finds no stamp and leaves it, so each step
 *      looks again and takes a stamp off a granule that is not wholly free
 *      (elastic.c el_stamp). So a stamp that is still there once a trimmer
 *      holds the whole granule says it has been free and unused since
 *      then, but for a use that began and ended between two steps. The
 *      time is dp_os_shared_now_ns's, the same clock in every time
 *      namespace, so the policy means the same in every process.
 *
 * Invariant (quiet: no bracket open, no dead slot unrecovered)
 *   R1  every granule holding an allocated frame is resident (checked by
 *       dp_res_verify, dsmpool_check's step 6);
 *   R2  released + resident = granules, and the released ones are free;
 *   R3  no granule is busy or stray, and no released granule holds a page
 *       (the check looks with mincore where the pages are shmem's), but
 *       for a release the kernel refused (dsmpool_trim said so).
 *
 * Crash bound: a death between marking a granule released and giving its
 * pages back, or between populating a released granule and marking it
 * resident (or giving it back), leaves it released, busy and perhaps
 * populated; the death was inside a bracket, so the leak sweep runs, and
 * it gives back every released granule that is busy in its quiet window
 * and takes the dead counts out ([busy]). (The other order -- pages gone,
 * granule still marked resident -- cannot happen: the trimmer marks first,
 * and marks only what nobody populates.) A death inside a mark's loop
 * leaves the sub-pool's released_hint (a count palloc.c [resident first]
 * reads to turn its preference on) off by the granules marked so far: the
 * leak sweep counts the words in its quiet window and sets it right
 * (dp_res_hint_fix). The block the dead process held is owned by nothing
 * and was inside its bracket: the leak sweep returns it (recover.c [leak
 * sweep]). A dead claimer's room goes with its slot (dp_res_slot_clear).
 * A death inside res_tables ([lazy tree]) leaves a granule's tree pages
 * resident, its "no tree" mark set and the opener's busy count (inside the
 * allocation's bracket: the leak sweep settles it): at most 12 KiB (its
 * leaves may lie across two pages), which the next allocation there takes
 * as they are. A trimmer's death inside [tree give-back] leaves bits set
 * over IDLE words whose page may still be there (4 KiB), which the next
 * opener's fill takes as they are; an opener's death, its count, which the
 * leak sweep settles after its recovery.
 *
 * Memory ordering: the state CASes are acq_rel; who holds a granule orders
 * them. A released mark is made while the trimmer holds the whole granule
 * and is seen by its next holder through the allocator's own pair (the
 * trimmer's free is a release CAS, the next allocation's CAS an acquire:
 * palloc.c); a resident mark is made before its maker frees the block,
 * likewise. The busy counts are acq_rel CASes on the same word as the
 * marks, so a trimmer's mark sees a prefault's count or the prefault sees
 * the mark. [tree give-back]: an opener's count and a trimmer's mark and
 * bits are acq_rel RMWs of one word, so whichever comes second sees the
 * first (palloc.c, "Memory ordering").
 * The room: a claim's slot word is added (relaxed) before its
 * acq_rel CAS of room_seq, and read by the next claimer after its acquire
 * load of room_seq; a claim is given back (release) after its memory is
 * charged, and a claimer that reads the word (acquire) sees the charge in
 * the reading it makes after. room_claimed is added to (release) after the
 * claim's (or hugetlb populate's) slot word and read (acquire) before the
 * slot words: a claim counted in a reading's "claimed" has its word in the
 * reading's "owed" (or was charged before the reading). One not counted
 * there is counted in the difference a reuse reads, or its CAS of
 * room_seq comes after the reuse's load of room_seq and one of the two
 * CASes fails ([room reuse]). A hugetlb populate has no CAS: one that
 * starts after a reuse read the count races it as two populates always
 * did. Stamps are relaxed: a hint the trimmer reads
 * again once its claim (acquire) holds the granule. The "no tree" mark is
 * cleared by a release CAS after its pages are populated (res_tables, or
 * the resident mark's acq_rel), and palloc.c's pa_untouched reads it with
 * acquire ([lazy tree]).
 *
 * Injection points: "resident.refill.populated" (a granule populated on
 * demand, not yet marked resident: a death there leaves it released, busy
 * and populated, which the sweep gives back); "resident.mark.partway" (a
 * mark's first word changed, the sub-pool's released count not yet: a
 * death there leaves the count off until the leak sweep sets it right);
 * "resident.room.read" (the room read, the claim not yet made: a claim
 * made meanwhile by another process sends this one back to read again);
 * "resident.room.reused" (a reading reused instead, [room reuse]);
 * "resident.room.claimed" (a claim made, its memory not yet charged: a
 * reading made meanwhile owes its bytes, [room reuse]);
 * "resident.populate.counted" (a hugetlb refill in its slot word and the
 * count, its pages not yet taken: likewise);
 * "resident.tables.populated" (a granule's tree pages made resident, its
 * "no tree" mark not yet cleared: a death there leaves the pages, the mark
 * and the opener's busy count, which the leak sweep settles; then the next
 * allocation there populates them again, a no-op);
 * "resident.tree.marked" (a trim's "no tree" bits set, the counts not yet
 * looked at, the page not yet given back: [tree give-back]; a death there
 * leaves IDLE words under the bits, which the next opener's fill keeps);
 * "resident.tree.checked" (its count seen alone, the page not yet given
 * back: an opener in now finds the node held); "resident.tree.l1.marked"
 * and "resident.tree.l1.checked", the same for a page of level 1 (no bit
 * set: they were).
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
    uint64_t now = dp_os_shared_now_ns(), e = p->geo.epoch_ns; /* [idle stamps]: one clock for all */
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

/* Bytes the live and not yet recovered slots hold now. acquire: pairs with
 * dp_room_give's release (a claim given back was charged first). */
static uint64_t res_inflight(const dsmpool *p) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        uint64_t f = dp_load_acquire(&p->fill[i]);
        /* a word no claim could have made (scribbled): counted as the whole
         * data, so the check refuses rather than wraps */
        sum += f < p->geo.data_size ? f : p->geo.data_size;
    }
    return sum;
}

/* ---- [room reuse] ------------------------------------------------------------ */

/* This thread's last reading, for the pool and the kind it was read for. */
typedef struct room_memo {
    uint64_t pool_id;
    const void *hdr;     /* the pool's mapping, its slot and that slot's claim: this process's pool */
    uint32_t slot;
    uint64_t claim;
    pid_t pid;
    size_t page;         /* 0: the memory room (dp_os_mem_room); else hugetlb's, of pages this size */
    uint64_t at_ns;      /* when the reading began (dp_os_now_ns) */
    uint64_t room, limit;
    uint64_t owed;       /* bytes in flight when it was read (the slot words): perhaps charged since */
    uint64_t claimed;    /* room_claimed before it was read */
} room_memo;
static _Thread_local room_memo memo;

static uint64_t sat_add(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

/* at_ns: when the reading began (a reading stopped half-way is as old as
 * its start). */
static void res_memo(const dsmpool *p, size_t page, const dp_os_room *rm, uint64_t owed, uint64_t claimed,
                     uint64_t at_ns) {
    memo.pid = rm->unknown || !p->has_slot ? 0 : dp_os_getpid(); /* an unknown reading is never reused */
    memo.pool_id = p->geo.pool_id;
    memo.hdr = p->hdr;
    memo.slot = p->slot;
    memo.claim = p->claim;
    memo.page = page;
    memo.at_ns = at_ns;
    memo.room = rm->room;
    memo.limit = rm->limit;
    memo.owed = owed;
    memo.claimed = claimed;
}

/* Does this thread's reading still hold bytes more, in pool p (page 0: the
 * memory room; else hugetlb's), claimed being room_claimed now? */
static bool res_reuse(const dsmpool *p, size_t page, uint64_t bytes, uint64_t claimed) {
    if (!memo.pid || memo.pool_id != p->geo.pool_id || memo.hdr != p->hdr || !p->has_slot || memo.slot != p->slot ||
        memo.claim != p->claim || memo.page != page || memo.pid != dp_os_getpid())
        return false;
    uint64_t now = dp_os_now_ns(), window = DP_RES_ROOM_REUSE_NS;
#ifdef DP_INJECTION
    if (dp_inject_room_reuse_ns) window = dp_inject_room_reuse_ns;
#endif
    if (now < memo.at_ns || now - memo.at_ns > window) return false;
    if (claimed < memo.claimed) return false; /* (it only grows: scribbled) */
    if (memo.room == UINT64_MAX) return true;
    uint64_t lim = memo.limit == UINT64_MAX ? 0 : memo.limit;
    uint64_t need = sat_add(sat_add(bytes, memo.owed), claimed - memo.claimed);
    need = sat_add(need, DP_RES_ROOM_MARGIN + lim / 256 + DP_RES_ROOM_REUSE_SLACK + lim / 32);
    return memo.room >= need;
}

int dp_room_take(dsmpool *p, uint64_t bytes, const char *what) {
    dp_a64 *mine = p->has_slot ? &p->fill[p->slot] : NULL;
    for (;;) {
        /* acquire: pairs with dp_room_take's CAS, which publishes the claim's slot word */
        uint64_t seq = dp_load_acquire(&p->hdr->room_seq);
        /* acquire: pairs with the release add below (a claim counted here
         * has its slot word seen by res_inflight) */
        uint64_t claimed = dp_load_acquire(&p->hdr->room_claimed);
        if (res_reuse(p, 0, bytes, claimed)) { /* [room reuse]: it holds with room to spare */
            DP_INJECT("resident.room.reused");
        } else {
            uint64_t inflight = res_inflight(p), t0 = dp_os_now_ns(); /* (after the count above: [room reuse]) */
            dp_os_room rm;
            dp_os_mem_room(&rm);
            res_memo(p, 0, &rm, inflight, claimed, t0);
            DP_INJECT("resident.room.read");
            uint64_t margin = DP_RES_ROOM_MARGIN + (rm.limit == UINT64_MAX ? 0 : rm.limit / 256);
            bool blind = rm.unknown && !p->geo.limits_unknown_ok;
            uint64_t need = bytes + inflight + margin; /* (each below 2^47 or so: no wrap) */
            if (need < bytes) need = UINT64_MAX;
            bool full = rm.room != UINT64_MAX && rm.room < need;
            if (blind || full) dp_fetch_add_relaxed(&p->hdr->room_refusals, 1); /* relaxed: a counter */
            if (blind)
                return dp_fail(-ENOMEM, "%s (%llu bytes) cannot be made resident: the memory limits of this "
                               "process cannot be learned (%s), and one it cannot see would be the OOM killer's; "
                               "make them visible (mount /proc, and the cgroup hierarchy as this process's cgroup "
                               "namespace sees it), or create the pool with limits_unknown_ok to accept the risk",
                               what, (unsigned long long)bytes, rm.where);
            if (full)
                return dp_fail(-ENOMEM, "%s (%llu bytes) cannot be made resident without waking the OOM killer: "
                               "%s leaves room for %llu more bytes (of %llu); %llu are being made resident by the "
                               "pool's processes now, and %llu are kept as a margin",
                               what, (unsigned long long)bytes, rm.where, (unsigned long long)rm.room,
                               (unsigned long long)rm.limit, (unsigned long long)inflight,
                               (unsigned long long)margin);
        }
        if (!mine) return 0; /* (every caller holds a slot: dp_self) */
        dp_fetch_add_relaxed(mine, bytes); /* relaxed: published by the CAS below, and by this add: */
        /* release: whoever counts these bytes in room_claimed (acquire) sees
         * the slot word's add ([room reuse]); never taken back */
        dp_fetch_add_release(&p->hdr->room_claimed, bytes);
        /* acq_rel: the claim is this step; it fails when another claim was made
         * since seq was read, and the reading above may be stale */
        if (dp_cas_acq_rel(&p->hdr->room_seq, &seq, seq + 1)) {
            DP_INJECT("resident.room.claimed");
            return 0;
        }
        dp_fetch_add_relaxed(mine, (uint64_t)-bytes); /* relaxed: never published */
    }
}

void dp_room_give(dsmpool *p, uint64_t bytes) {
    /* acq_rel: release pairs with res_inflight's acquire (the charge is in the usage now) */
    if (p->has_slot) dp_fetch_add_acq_rel(&p->fill[p->slot], (uint64_t)-bytes);
}

void dp_res_slot_clear(dsmpool *p, uint32_t slot) {
    if (slot < p->nprocs) dp_store_release(&p->fill[slot], 0); /* release: as dp_room_give */
}

/* [room reuse]: a hugetlb populate of bytes about to start, in flight in
 * this process's slot word (given back by dp_room_give) and counted in
 * room_claimed: a reading made meanwhile owes it, and one made before sees
 * it in the count's growth. */
static void res_huge_inflight(dsmpool *p, uint64_t bytes) {
    if (p->has_slot) dp_fetch_add_relaxed(&p->fill[p->slot], bytes); /* relaxed: published by the add below */
    /* release: whoever counts these bytes (acquire) sees the slot word's add */
    dp_fetch_add_release(&p->hdr->room_claimed, bytes);
}

/* hugetlb ([room first]): is there room for bytes at a, the cgroup's and
 * the kernel's free pages? Its pages present now (what a failed populate
 * got, before its caller gives them back; none before a populate) count
 * as room. tmiss: the bytes of tree pages to come with it ([lazy tree]:
 * those not present). ahead: before a refill ahead's populate, where this
 * thread's last reading may do ([room reuse]). 0, or -ENOMEM with a
 * message that says which was short. */
static int res_huge_room(dsmpool *p, char *a, uint64_t bytes, uint64_t doff, uint64_t dlen, uint64_t tmiss,
                         bool ahead) {
    size_t page = p->geo.page_size;
    /* acquire: as dp_room_take's (a populate counted here has its slot word
     * seen by res_inflight below) */
    uint64_t claimed = dp_load_acquire(&p->hdr->room_claimed);
    if (ahead && res_reuse(p, page, bytes + dlen + tmiss, claimed)) {
        DP_INJECT("resident.room.reused");
        return 0;
    }
    /* the populates in flight (their slot words: dp_res_populate) may take
     * their pages after this reading */
    uint64_t owed = ahead ? res_inflight(p) : 0, t0 = dp_os_now_ns();
    dp_os_room rm;
    dp_os_huge_room(page, &rm);
    uint64_t avail = 0, got = 0, dgot = 0;
    bool counted = dp_os_huge_avail(page, &avail) == 0;
    DP_INJECT("resident.room.read");
    if (ahead && counted) { /* [room reuse]: the tighter of the two */
        dp_os_room both = rm;
        if (avail < UINT64_MAX / page && avail * page < both.room) both.room = avail * page;
        res_memo(p, page, &both, owed, claimed, t0);
    }
    if (dp_os_present_bytes(a, bytes, &got) != 0) got = 0;
    /* [lazy directory]: the directory's page too, where it is not there */
    if (dlen && dp_os_present_bytes(p->base + doff, dlen, &dgot) != 0) dgot = 0;
    bytes += dlen - dgot + tmiss;
    bool cg_full = !rm.unknown && rm.room != UINT64_MAX && rm.room + got < bytes;
    bool none = !cg_full && counted && avail * page + got < bytes;
    if (cg_full || none) dp_fetch_add_relaxed(&p->hdr->room_refusals, 1); /* relaxed: a counter */
    char also[96] = "";
    if (got)
        snprintf(also, sizeof also, ", besides the %llu bytes of them present (what a populate got goes back)",
                 (unsigned long long)got);
    if (cg_full)
        return dp_fail(-ENOMEM, "%llu bytes of the pool cannot be made resident: the hugetlb cgroup lets this "
                       "process take %llu more bytes of %llu kB pages (%s is %llu)%s", (unsigned long long)bytes,
                       (unsigned long long)rm.room, (unsigned long long)(p->geo.page_size >> 10), rm.where,
                       (unsigned long long)rm.limit, also);
    if (none)
        return dp_fail(-ENOMEM, "%llu bytes of the pool cannot be made resident: the kernel has %llu free "
                       "huge pages of %llu kB (free_hugepages, nr_overcommit_hugepages)%s",
                       (unsigned long long)bytes, (unsigned long long)avail,
                       (unsigned long long)(p->geo.page_size >> 10), also);
    return 0;
}

/* [lazy tree]: the allocator's tree pages of granules [g, g + n), where
 * one of them says "no tree" (all: every), in pieces of one sub-pool each:
 * *bytes counts them (in huge pages only those not present: the room of a
 * huge page that is there is not asked for again); with fill, they are
 * populated too (0, or the populate's error). */
static int res_tree_pages(dsmpool *p, uint64_t g, uint64_t n, bool every, bool fill, uint64_t *bytes) {
    *bytes = 0;
    for (uint64_t i = g; i < g + n && i < p->geo.res_count;) {
        uint32_t s = res_sub(p, i);
        uint64_t g0 = (p->geo.sub[s].data_off - p->geo.data_off) >> DP_RES_SHIFT;
        uint64_t e = g0 + (p->geo.sub[s].geom.frames >> (DP_RES_SHIFT - DP_FRAME_SHIFT)), any = 0, off[2], len[2];
        if (e > g + n) e = g + n;
        if (e <= i) break; /* (a damaged geometry: the attach checked it) */
        for (uint64_t k = i; k < e; k++) any |= dp_load_relaxed(&p->res[k]); /* relaxed: see the file comment */
        if (every || (any & DP_RES_NOTREE)) {
            dp_pa_tree_range(&p->geo.sub[s].geom, i - g0, e - i, p->geo.page_size, off, len);
            for (unsigned L = 0; L < 2; L++) {
                uint64_t have = 0;
                if (p->geo.page_size != 4096 && len[L] && dp_os_present_bytes(p->base + off[L], len[L], &have) != 0)
                    have = 0;
                int r = fill && len[L] ? dp_os_populate_strict(p->base + off[L], len[L]) : 0;
                if (r) return r;
                *bytes += len[L] - (have < len[L] ? have : len[L]);
            }
        }
        i = e;
    }
    return 0;
}

int dp_res_populate(dsmpool *p, uint64_t g, uint64_t n, bool ahead, bool *tried) {
    *tried = false;
    if (!n) return 0;
    if (g >= p->geo.res_count || n > p->geo.res_count - g)
        return dp_fail(-EUCLEAN, "granules %llu+%llu lie outside the data", (unsigned long long)g,
                       (unsigned long long)n);
    uint64_t bytes = n << DP_RES_SHIFT, doff = 0, dlen = 0, tlen = 0, tdone;
    bool huge = p->geo.page_size != 4096;
    char *a = p->base + p->geo.data_off + (g << DP_RES_SHIFT);
    if (p->geo.elastic) dp_dir_range(&p->geo, g, n, p->geo.page_size, &doff, &dlen); /* [lazy directory] */
    (void)res_tree_pages(p, g, n, false, false, &tlen); /* [lazy tree] */
    /* [room first]: hugetlb's room before a refill ahead, after a failed
     * refill on demand */
    int r = !huge   ? dp_room_take(p, bytes + dlen + tlen, "memory of the pool")
            : ahead ? res_huge_room(p, a, bytes, doff, dlen, tlen, true)
                    : 0;
    if (r) {
        dp_fetch_add_relaxed(&p->hdr->refill_failures, 1); /* relaxed: a counter */
        return r;
    }
    /* [room reuse]: in flight in the slot word, then counted, before the
     * pages are taken (release: as dp_room_take's, for its readers'
     * acquire); the word goes back (dp_room_give) once they are taken */
    if (huge) {
        res_huge_inflight(p, bytes + dlen + tlen);
        DP_INJECT("resident.populate.counted");
    }
    *tried = true;
    /* [lazy directory], [lazy tree]: the tables' pages first, so that a
     * granule marked resident has them */
    r = dlen ? dp_os_populate_strict(p->base + doff, dlen) : 0;
    if (r == 0 && tlen) r = res_tree_pages(p, g, n, false, true, &tdone);
    if (r == 0) r = dp_os_populate_strict(a, bytes);
    dp_room_give(p, bytes + dlen + tlen);
    if (r) {
        dp_fetch_add_relaxed(&p->hdr->refill_failures, 1); /* relaxed: a counter */
        if (huge && (r == -EFAULT || r == -ENOMEM || r == -ENOSPC) && res_huge_room(p, a, bytes, doff, dlen, tlen, false) != 0)
            return -ENOMEM; /* its message says which limit */
        return dp_fail(r == -EFAULT || r == -ENOMEM || r == -ENOSPC ? -ENOMEM : r,
                       "%llu bytes of the pool could not be made resident (MADV_POPULATE_WRITE: %s)%s",
                       (unsigned long long)bytes, strerror(-r),
                       huge ? ": no huge page of the pool's size can be had now (free_hugepages, "
                              "nr_overcommit_hugepages, or the hugetlb cgroup's limit)"
                       : r == -EFAULT || r == -ENOSPC
                           ? ": the file system holding the pool is full (a tmpfs at its size=; "
                             "df /dev/shm), or the memory cannot be had"
                           : "");
    }
    return 0;
}

/* [lazy tree]: the allocator's hook (dp_pa_set_tables): granule g of
 * sub-pool pa's tree pages, made resident under the room claim, and its
 * "no tree" bit cleared. */
static int res_tables(void *ctx, dp_pa *pa, uint64_t g, int op) {
    dsmpool *p = ctx;
    uint32_t s = (uint32_t)(pa - p->pa);
    uint64_t gi = g + ((p->geo.sub[s].data_off - p->geo.data_off) >> DP_RES_SHIFT), want, got;
    if (gi >= p->geo.res_count) return dp_fail(-EUCLEAN, "granule %llu lies outside the data", (unsigned long long)gi);
    if (op == DP_PA_TABLES_LEAVE) {
        dp_res_busy_lower(p, gi, 1, 1);
        return 0;
    }
    bool huge = p->geo.page_size != 4096;
    uint64_t w;
    if (op == DP_PA_TABLES_ENTER) {
        /* [tree give-back]: counted in on the granule ([busy]: the word of
         * a trimmer's mark and bits; whichever comes second sees the first:
         * the opener then finds the node held whole, or the trimmer our
         * count). Once in, no trim sets the bit: one read set here is set,
         * or cleared since by another's fill. acquire: as palloc.c
         * pa_untouched's (another made the pages resident). */
        int r = dp_res_busy_raise(p, gi, 1);
        if (r) return r;
        return (dp_load_acquire(&p->res[gi]) & DP_RES_NOTREE) ? 1 : 0;
    }
    /* DP_PA_TABLES_FILL: counted in (no trim gives the pages back under us),
     * and the node is not held whole by another */
    (void)res_tree_pages(p, gi, 1, false, false, &want); /* (none: another filled them since) */
    int r = huge ? 0 : dp_room_take(p, want, "the allocator's tables of released memory");
    if (huge) res_huge_inflight(p, want); /* [room reuse], as dp_res_populate's */
    /* counted as a refill's failure: the segment and area layers then
     * quote this message rather than call the pool full */
    if (r) dp_fetch_add_relaxed(&p->hdr->refill_failures, 1); /* relaxed: a counter */
    if (r) return r;
    r = res_tree_pages(p, gi, 1, false, true, &got);
    dp_room_give(p, want);
    if (r) dp_fetch_add_relaxed(&p->hdr->refill_failures, 1); /* relaxed: a counter */
    if (r)
        return dp_fail(-ENOMEM, "%llu bytes of the allocator's tables could not be made resident "
                       "(MADV_POPULATE_WRITE: %s): %s", (unsigned long long)want, strerror(-r),
                       huge ? "no huge page of the pool's size can be had now (free_hugepages, "
                              "nr_overcommit_hugepages, or the hugetlb cgroup's limit)"
                            : "the file system holding the pool is full (a tmpfs at its size=; df /dev/shm), "
                              "or the memory cannot be had");
    DP_INJECT("resident.tables.populated");
    w = dp_load_relaxed(&p->res[gi]);
    /* release: pairs with palloc.c pa_untouched's acquire (the pages are
     * there before anyone reads a word of them); our count stays */
    while ((w & DP_RES_NOTREE) && !dp_cas_release(&p->res[gi], &w, w & ~DP_RES_NOTREE))
        ;
    return 0;
}

/* [tree give-back]: set the tree bit of granule i (released, counted busy
 * by the caller): true if it was clear and the caller's count is the only
 * one (another is an opener's, or a dead one's). acq_rel: [busy], as the
 * marks. */
static bool res_notree_set(dsmpool *p, uint64_t i) {
    uint64_t w = dp_load_relaxed(&p->res[i]);
    while ((w & DP_RES_RELEASED) && DP_RES_BUSY(w) == 1 && !(w & DP_RES_NOTREE))
        if (dp_cas_acq_rel(&p->res[i], &w, w | DP_RES_NOTREE)) return true;
    return false;
}

/* The fd whose pages dp_os_release punches (MEMFD, POSIX), or -1 (an
 * anonymous or SysV mapping: MADV_REMOVE). */
static int res_fd(const dsmpool *p) {
    return p->fd >= 0 && (p->backing == DSMPOOL_BACKING_MEMFD || p->backing == DSMPOOL_BACKING_POSIX) ? p->fd : -1;
}

uint64_t dp_res_tree_give_back(dsmpool *p, uint64_t g, uint64_t n, unsigned level) {
    uint64_t pages = 0;
    /* not a POSIX pool's: its file system can be full, and a stale reader
     * bringing a page back would get a SIGBUS there */
    if (!p->geo.elastic || p->geo.page_size != 4096 || p->backing == DSMPOOL_BACKING_POSIX || g >= p->geo.res_count)
        return 0;
    if (n > p->geo.res_count - g) n = p->geo.res_count - g;
    for (uint64_t i = g; i < g + n;) {
        uint32_t s = res_sub(p, i);
        const dp_pa_geom *geo = &p->geo.sub[s].geom;
        uint64_t g0 = (p->geo.sub[s].data_off - p->geo.data_off) >> DP_RES_SHIFT, e = g0 + (geo->frames >> 9), off, pg,
                 pn;
        if (e > g + n) e = g + n;
        if (e <= i) break; /* (a damaged geometry: the attach checked it) */
        for (uint64_t k = 0; dp_pa_tree_page(geo, level, i - g0, e - i, 4096, k, &off, &pg, &pn); k++) {
            /* the granules (of a page of leaves' at most 5) whose bit we
             * set; a page of level 1 (64 granules) sets none: each of its
             * granules' bit was set with its page of leaves */
            uint64_t mine = 0;
            for (uint64_t j = 0; !level && j < pn && j < 64; j++) mine |= (uint64_t)res_notree_set(p, g0 + pg + j) << j;
            if (!mine && !level) continue; /* all were set before (or a count is in) */
            DP_INJECT(level ? "resident.tree.l1.marked" : "resident.tree.marked");
            /* every granule of the page with its bit set and counted busy by
             * us alone: another count is an opener's, in before our mark
             * (res_tables: the same word, so we see it), or a dead one's; a
             * bit clear is an opener's fill since. One that counts itself in
             * after this finds the node held (palloc.c pa_open) and writes
             * nothing. */
            bool quiet = true;
            for (uint64_t j = 0; j < pn && quiet; j++) {
                uint64_t w = dp_load_relaxed(&p->res[g0 + pg + j]); /* relaxed: coherence on one word, above */
                quiet = (w & DP_RES_NOTREE) && (w & DP_RES_RELEASED) && DP_RES_BUSY(w) == 1;
            }
            if (quiet) {
                DP_INJECT(level ? "resident.tree.l1.checked" : "resident.tree.checked");
                /* seq_cst fence: the bits before our look at the hints,
                 * against palloc.c dp_pa_hint_freed's fence between its hint
                 * and its look at the bit */
                dp_fence_seq_cst();
                dp_pa_hints_forget(&p->pa[s], pg, pn);
                if (dp_os_release(p->base + off, 4096, res_fd(p), off) == 0) {
                    pages++;
                    continue;
                }
            }
            /* an opener in the page (or a page that would not go): the bits
             * we set go back as they were */
            for (uint64_t j = 0; j < pn && j < 64; j++) {
                if (!(mine >> j & 1)) continue;
                uint64_t w = dp_load_relaxed(&p->res[g0 + pg + j]);
                /* release: as res_tables' clear (the pages are there) */
                while ((w & DP_RES_NOTREE) && !dp_cas_release(&p->res[g0 + pg + j], &w, w & ~DP_RES_NOTREE))
                    ;
            }
        }
        i = e;
    }
    return pages;
}

int dp_res_tree_map(dsmpool *p, uint64_t g, uint64_t n) {
    uint64_t bytes;
    return p->geo.elastic ? res_tree_pages(p, g, n, true, true, &bytes) : 0;
}

void dp_res_open(dsmpool *p) {
    if (!p->geo.elastic) return; /* nothing is lazy: every bit is clear */
    for (uint32_t s = 0; s < p->nsub; s++) dp_pa_set_tables(&p->pa[s], res_tables, p);
}

int dp_res_release_counted(dsmpool *p, uint64_t g, uint64_t n, bool count) {
    uint64_t have = 0;
    /* (a statistic: where mincore cannot say, nothing is counted) */
    if (count && n && g < p->geo.res_count && n <= p->geo.res_count - g &&
        dp_os_present_bytes(p->base + p->geo.data_off + (g << DP_RES_SHIFT), n << DP_RES_SHIFT, &have) != 0)
        have = 0;
    int r = dp_res_release(p, g, n);
    if (r == 0 && have) dp_fetch_add_relaxed(&p->hdr->refill_given_back, have); /* relaxed: a counter */
    return r;
}

int dp_res_release(dsmpool *p, uint64_t g, uint64_t n) {
    if (!n || g >= p->geo.res_count || n > p->geo.res_count - g) return -EINVAL;
    uint64_t off = p->geo.data_off + (g << DP_RES_SHIFT), doff, dlen;
    int r = dp_os_release(p->base + off, n << DP_RES_SHIFT, res_fd(p), off);
    /* [lazy directory]: in 4 KiB pages a granule's directory page is its
     * own, and all zero once the granule is free (area_registry.c clears
     * a span's words before its block goes) */
    if (r == 0 && p->geo.elastic && p->geo.page_size == 4096) {
        dp_dir_range(&p->geo, g, n, 4096, &doff, &dlen);
        r = dp_os_release(p->base + doff, dlen, res_fd(p), doff);
    }
    return r;
}

/* ---- the marks and the counts ------------------------------------------------- */

int dp_res_busy_raise(dsmpool *p, uint64_t g, uint64_t n) {
    for (uint64_t i = g; i < g + n && i < p->geo.res_count; i++) {
        uint64_t w = dp_load_relaxed(&p->res[i]);
        for (;;) {
            /* a full count is damage, not a crowd (65535 populators of one
             * granule at once: not in this world): no wait on it, and the
             * counts raised so far go back down */
            if (DP_RES_BUSY(w) == 0xffff) {
                if (i > g) dp_res_busy_lower(p, g, i - g, 1);
                return dp_fail(-EUCLEAN, "the residency word of granule %llu counts 65535 processes making "
                               "it resident: the pool's tables are damaged (dsmpool_check says where)",
                               (unsigned long long)i);
            }
            /* acq_rel: [busy], as the marks */
            if (dp_cas_acq_rel(&p->res[i], &w, w + DP_RES_BUSY_ONE)) break;
        }
    }
    return 0;
}

bool dp_res_busy_raise_resident(dsmpool *p, uint64_t g) {
    if (g >= p->geo.res_count) return false;
    uint64_t w = dp_load_relaxed(&p->res[g]);
    /* acq_rel: [busy]: a trimmer's mark and this count see each other */
    while (!(w & DP_RES_RELEASED) && DP_RES_BUSY(w) < 0xffff)
        if (dp_cas_acq_rel(&p->res[g], &w, w + DP_RES_BUSY_ONE)) return true;
    return false;
}

void dp_res_stray(dsmpool *p, uint64_t g, uint64_t n) {
    for (uint64_t i = g; i < g + n && i < p->geo.res_count; i++) {
        uint64_t w = dp_load_relaxed(&p->res[i]);
        /* acq_rel: [give back]; only on a released word (a resident one's
         * pages are accounted for) */
        while ((w & DP_RES_RELEASED) && !(w & DP_RES_STRAY) && !dp_cas_acq_rel(&p->res[i], &w, w | DP_RES_STRAY))
            ;
    }
}

void dp_res_given_back(dsmpool *p, uint64_t g, uint64_t n, uint64_t by) {
    for (uint64_t i = g; i < g + n && i < p->geo.res_count; i++) {
        uint64_t w = dp_load_relaxed(&p->res[i]), nw;
        /* acq_rel: [busy], [give back]: the pages are gone, the stray bit
         * with them, and `by` counts out (never below 0) */
        do
            nw = (w & ~DP_RES_STRAY) - (DP_RES_BUSY(w) < by ? DP_RES_BUSY(w) : by) * DP_RES_BUSY_ONE;
        while (!dp_cas_acq_rel(&p->res[i], &w, nw));
    }
}

void dp_res_busy_lower(dsmpool *p, uint64_t g, uint64_t n, uint64_t by) {
    for (uint64_t i = g; i < g + n && i < p->geo.res_count; i++) {
        uint64_t w = dp_load_relaxed(&p->res[i]);
        /* acq_rel: [busy]; never below 0 (a count damaged is the check's) */
        while (DP_RES_BUSY(w) && !dp_cas_acq_rel(&p->res[i], &w, w - (DP_RES_BUSY(w) < by ? DP_RES_BUSY(w) : by) * DP_RES_BUSY_ONE))
            ;
    }
}

uint64_t dp_res_mark_released(dsmpool *p, uint64_t g, uint64_t n) {
    uint64_t newly = 0;
    uint32_t s = res_sub(p, g);
    for (uint64_t i = g; i < g + n && i < p->geo.res_count; i++) {
        uint64_t w = dp_load_relaxed(&p->res[i]);
        /* acq_rel: [resident when held]; the caller holds the granule whole, so
         * only a stamp (another maintainer's) or a count can change under us */
        while (!(w & DP_RES_RELEASED) && !dp_cas_acq_rel(&p->res[i], &w, (w & DP_RES_BUSY_MASK) | DP_RES_RELEASED))
            ;
        if (!(w & DP_RES_RELEASED)) newly++;
        if (i == g) DP_INJECT("resident.mark.partway");
    }
    if (newly) dp_fetch_add_relaxed(&p->hdr->released_hint[s], newly); /* relaxed: a hint */
    return newly;
}

int dp_res_trim_mark(dsmpool *p, uint64_t g, uint64_t n, uint64_t *newly) {
    uint32_t s = res_sub(p, g);
    uint64_t i, made[8] = {0}; /* a unit is at most 512 granules (1 GiB) */
    *newly = 0;
    if (n > 512) return -EINVAL;
    for (i = g; i < g + n && i < p->geo.res_count; i++) {
        uint64_t w = dp_load_relaxed(&p->res[i]);
        bool busy = false;
        for (;;) {
            if ((!(w & DP_RES_RELEASED) && DP_RES_BUSY(w)) || DP_RES_BUSY(w) == 0xffff) {
                busy = true; /* [busy]: being populated: not ours (or a count that cannot grow) */
                break;
            }
            /* acq_rel: [busy]; released, counted busy (ours), the stamp gone */
            uint64_t nw = (w & DP_RES_RELEASED) ? w + DP_RES_BUSY_ONE : DP_RES_BUSY_ONE | DP_RES_RELEASED;
            if (dp_cas_acq_rel(&p->res[i], &w, nw)) break;
        }
        if (busy) break;
        if (!(w & DP_RES_RELEASED)) {
            made[(i - g) / 64] |= 1ull << ((i - g) % 64);
            ++*newly;
        }
        if (i == g) DP_INJECT("resident.mark.partway");
    }
    if (i < g + n && i < p->geo.res_count) { /* a busy granule: the unit stays as it was */
        for (uint64_t k = g; k < i; k++) {
            uint64_t w = dp_load_relaxed(&p->res[k]);
            bool ours = made[(k - g) / 64] >> ((k - g) % 64) & 1;
            /* acq_rel: as above; nothing was released, so the pages of a
             * granule we marked are all there: resident again */
            while (!dp_cas_acq_rel(&p->res[k], &w, ours ? (w & DP_RES_BUSY_MASK) - DP_RES_BUSY_ONE : w - DP_RES_BUSY_ONE))
                ;
        }
        *newly = 0;
        return -EBUSY;
    }
    if (*newly) dp_fetch_add_relaxed(&p->hdr->released_hint[s], *newly); /* relaxed: a hint */
    return 0;
}

uint64_t dp_res_mark_resident(dsmpool *p, uint64_t g, uint64_t n) {
    uint64_t newly = 0;
    uint32_t s = res_sub(p, g);
    for (uint64_t i = g; i < g + n && i < p->geo.res_count; i++) {
        uint64_t w = dp_load_relaxed(&p->res[i]);
        /* acq_rel: [resident when held]; resident, our count out, the stamp gone
         * (a refiller of another part may mark it first) */
        uint64_t nw;
        do
            nw = DP_RES_BUSY(w) ? (w & DP_RES_BUSY_MASK) - DP_RES_BUSY_ONE : 0;
        while (!dp_cas_acq_rel(&p->res[i], &w, nw));
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
    /* relaxed: a hint. What it is off by at the quiet window, added: marks
     * that counted since `before` was read (a live trim or refill, which a
     * CAS from `before` would have lost the fix to) keep their part. */
    dp_fetch_add_relaxed(&p->hdr->released_hint[s], count - before);
}

bool dp_res_stamp(dsmpool *p, uint64_t g, uint32_t now_ms) {
    if (g >= p->geo.res_count) return false;
    uint64_t w = 0;
    /* relaxed CAS: a stamp is a hint ([idle stamps]); only "resident, not
     * busy, not stamped" (0) takes one */
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

int dp_res_ensure_slow(dsmpool *p, uint64_t off, uint64_t len, dp_res_run *failed) {
    uint64_t n = p->geo.res_count;
    failed->g = failed->n = 0;
    failed->tried = false;
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
                /* [idle stamps]: used now; relaxed CAS: a hint (a failed one
                 * found it changed). The count stays: a prefault's. */
                if (DP_RES_STAMP(w)) dp_cas_relaxed(&p->res[k], &w, w & ~(0xffffffffull << 32));
            }
            g += u;
            continue;
        }
        uint64_t h = g + u; /* a run of units with released granules */
        while (h < g1 && unit_released(p, h, u, g1)) h += u;
        if (h > g1) h = g1;
        if (!t0) t0 = dp_os_now_ns();
        int r = dp_res_busy_raise(p, g, h - g); /* [busy] */
        if (r) return r; /* (no count held: nothing to give back) */
        bool tried;
        r = dp_res_populate(p, g, h - g, false, &tried);
        if (r) { /* [give back]: the caller frees its block, then gives the run back */
            failed->g = g;
            failed->n = h - g;
            failed->tried = tried;
            return r;
        }
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
    return filled != 0;
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
            if (w & ~(DP_RES_RELEASED | DP_RES_STRAY | DP_RES_NOTREE | DP_RES_BUSY_MASK | 0xffffffff00000000ull) ||
                ((w & (DP_RES_STRAY | DP_RES_NOTREE)) && !(w & DP_RES_RELEASED))) {
                snprintf(why, n, "sub-pool %u: the residency word of granule %llu is damaged (%016llx)", s,
                         (unsigned long long)k, (unsigned long long)w);
                return -EUCLEAN;
            }
            if (DP_RES_BUSY(w) || (w & DP_RES_STRAY)) { /* R3: nobody populates in a quiet window */
                snprintf(why, n, "sub-pool %u: granule %llu is %s though nobody populates it and no sweep is due "
                         "(a mark no death explains)", s, (unsigned long long)k,
                         DP_RES_BUSY(w) ? "counted busy" : "marked stray (pages left for the sweep)");
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

int dp_res_verify_given_back(dsmpool *p, char *why, size_t n) {
    if (p->geo.page_size != 4096) return 0; /* hugetlb: mincore sees only this process's mappings */
    for (uint64_t g = 0; g < p->geo.res_count;) {
        if (!(dp_load_relaxed(&p->res[g]) & DP_RES_RELEASED)) { /* relaxed: inside the checker's quiet window */
            g++;
            continue;
        }
        uint64_t e = g + 1;
        while (e < p->geo.res_count && (dp_load_relaxed(&p->res[e]) & DP_RES_RELEASED)) e++;
        uint64_t have = 0;
        if (dp_os_present_bytes(p->base + p->geo.data_off + (g << DP_RES_SHIFT), (e - g) << DP_RES_SHIFT, &have) == 0 &&
            have) {
            snprintf(why, n, "granules %llu..%llu are released but hold %llu KiB of pages (memory the pool says it "
                     "gave back is still held)", (unsigned long long)g, (unsigned long long)(e - 1),
                     (unsigned long long)(have >> 10));
            return -EUCLEAN;
        }
        g = e;
    }
    return 0;
}
